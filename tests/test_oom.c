/*
 * test_oom: a workspace larger than the memory the process may still use is
 * refused with XATTN_STATUS_OUT_OF_MEMORY before it is touched, instead of
 * the kernel's OOM killer ending the process.
 *
 * Under Linux's default overcommit, malloc of a NAIVE score matrix larger than
 * what is left succeeds; touching it then kills the process. The test makes a
 * memory cgroup of its own below the process's (v1 or v2), limited to 256 MiB,
 * and runs a child in it: NAIVE with a 512 MiB score matrix must come back
 * OUT_OF_MEMORY with a message (the child must not be killed), while FLASH on
 * the same shape (a few MiB) must run; then with a 1.5 GiB limit, NAIVE runs.
 * Exits 77 (skipped) where no cgroup can be made (not root, no writable
 * hierarchy).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xattn.h"

/* The process's memory cgroup folder: v1 first, then v2; 0 when none. */
static int own_cgroup(char *dir, size_t n, int *v2)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char line[1024], path1[512] = "", path2[512] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        if (!strcmp(line, "0") && c1[1] == '\0')
            snprintf(path2, sizeof path2, "%s", c2 + 1);
        else if (strstr(c1 + 1, "memory"))
            snprintf(path1, sizeof path1, "%s", c2 + 1);
    }
    fclose(f);
    struct stat st;
    if (path1[0]) {
        snprintf(dir, n, "/sys/fs/cgroup/memory%s", path1);
        if (stat(dir, &st) == 0) {
            *v2 = 0;
            return 1;
        }
        snprintf(dir, n, "/sys/fs/cgroup/memory");
        if (stat(dir, &st) == 0) {
            *v2 = 0;
            return 1;
        }
    }
    if (path2[0]) {
        snprintf(dir, n, "/sys/fs/cgroup%s", path2);
        if (stat(dir, &st) == 0) {
            *v2 = 1;
            return 1;
        }
    }
    return 0;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        return 0;
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok;
}

enum { B = 1, H = 8, S = 4096, D = 64 };

/* In the child: 0 when every expectation held. */
static int child(const char *cg, int expect_naive_ok)
{
    if (!write_file(cg, "cgroup.procs", "0\n")) {
        printf("FAIL cannot join %s: %s\n", cg, strerror(errno));
        return 1;
    }
    xattn_ctx *ctx;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        printf("FAIL context: %s\n", xattn_last_error());
        return 1;
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1);
    const size_t n = (size_t)B * S * H * D;
    float *h = malloc(n * sizeof(float));
    xattn_buffer *q, *k, *v, *o;
    if (!h || xattn_buffer_alloc(ctx, n * 4, &q) || xattn_buffer_alloc(ctx, n * 4, &k) ||
        xattn_buffer_alloc(ctx, n * 4, &v) || xattn_buffer_alloc(ctx, n * 4, &o)) {
        printf("FAIL buffers: %s\n", xattn_last_error());
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    xattn_buffer_write(q, 0, h, n * 4);
    xattn_buffer_write(k, 0, h, n * 4);
    xattn_buffer_write(v, 0, h, n * 4);
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, B, S, H, D);
    d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, B, S, H, D);
    d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, B, S, H, D);
    d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, B, S, H, D);
    int bad = 0;
    d.algo = XATTN_ALGO_NAIVE; /* a 512 MiB score matrix */
    xattn_status st = xattn_attention(ctx, &d, NULL);
    if (expect_naive_ok) {
        if (st != XATTN_STATUS_OK) {
            printf("FAIL NAIVE within the limit: %s: %s\n", xattn_status_name(st),
                   xattn_last_error());
            bad = 1;
        }
    } else if (st != XATTN_STATUS_OUT_OF_MEMORY || !strstr(xattn_last_error(), "available")) {
        printf("FAIL NAIVE beyond the limit gave %s: %s\n", xattn_status_name(st),
               xattn_last_error());
        bad = 1;
    } else {
        printf("  NAIVE refused: %s\n", xattn_last_error());
    }
    d.algo = XATTN_ALGO_FLASH; /* the context is usable, and FLASH fits */
    st = xattn_attention(ctx, &d, NULL);
    if (st != XATTN_STATUS_OK) {
        printf("FAIL FLASH: %s: %s\n", xattn_status_name(st), xattn_last_error());
        bad = 1;
    }
    xattn_buffer_free(q);
    xattn_buffer_free(k);
    xattn_buffer_free(v);
    xattn_buffer_free(o);
    xattn_ctx_destroy(ctx);
    free(h);
    return bad;
}

/* Runs child() in a fresh cgroup limited to `limit` bytes; 0 = passed,
 * 1 = failed, 77 = no cgroup. */
static int in_cgroup(const char *parent, int v2, uint64_t limit, int expect_naive_ok)
{
    char cg[1024];
    snprintf(cg, sizeof cg, "%s/xattn-oom-%ld", parent, (long)getpid());
    if (mkdir(cg, 0755) != 0 && errno != EEXIST) {
        printf("SKIP cannot create the cgroup %s: %s\n", cg, strerror(errno));
        return 77;
    }
    char val[64];
    snprintf(val, sizeof val, "%llu\n", (unsigned long long)limit);
    if (!write_file(cg, v2 ? "memory.max" : "memory.limit_in_bytes", val)) {
        printf("SKIP cannot set the cgroup's limit: %s\n", strerror(errno));
        rmdir(cg);
        return 77;
    }
    if (v2)
        write_file(cg, "memory.swap.max", "0\n"); /* where swap exists, do not use it */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(cg, expect_naive_ok));
    int status = 0;
    waitpid(pid, &status, 0);
    rmdir(cg);
    if (WIFSIGNALED(status)) {
        printf("FAIL the child was killed by signal %d (%s) in a %llu MiB cgroup: the "
               "workspace was not checked against the memory left\n",
               WTERMSIG(status), strsignal(WTERMSIG(status)), (unsigned long long)(limit >> 20));
        return 1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char parent[900];
    int v2 = 0;
    if (!own_cgroup(parent, sizeof parent, &v2)) {
        printf("SKIP no memory cgroup folder found\n0 passed, 0 failed, 1 skipped\n");
        return 77;
    }
    int r = in_cgroup(parent, v2, (uint64_t)256 << 20, 0);
    if (r == 77) {
        printf("0 passed, 0 failed, 1 skipped\n");
        return 77;
    }
    int passed = r == 0, failed = r != 0;
    r = in_cgroup(parent, v2, (uint64_t)1536 << 20, 1);
    passed += r == 0;
    failed += r == 1;
    printf("%d passed, %d failed, %d skipped\n", passed, failed, r == 77);
    return failed ? 1 : 0;
}
