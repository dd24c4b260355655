/*
 * test_affinity: the CPU backend leaves the threads of the host process where
 * it found them (docs/guarantees.md, docs/api.md "Threads").
 *
 *  1. caller     The calling thread's CPU mask is the same after each call
 *                (NAIVE, FLASH, SPLITKV; prefill and decode shapes; the
 *                context's default threads and 2 threads) as before, and the
 *                same after xattn_ceilings_measure. Parts 1 to 4 run with
 *                XATTN_CPU_BIND=1, so that every call binds its team.
 *  2. pool       Every other thread of the process (the OpenMP runtime's
 *                workers, which the host's own OpenMP code shares) has the
 *                mask it had before the calls: the caller's, from which the
 *                runtime started them.
 *  3. narrow     A caller that narrowed its own mask to one CPU (or to two,
 *                where the machine has three or more) finds it as it set it.
 *  4. pthread    The same from a second thread that is not an OpenMP thread,
 *                on a context of its own, with its full and narrowed masks.
 *  5. defaults   Without XATTN_CPU_BIND and with XATTN_CPU_BIND=0 (no
 *                binding at all) the same holds.
 *
 * Linux only (sched_getaffinity); exits 77 (skipped) on a machine, or in a
 * CPU mask, of one CPU, where there is nothing to bind. No timing. The last
 * line is "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_test.h"

#ifdef __linux__
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

/* The CPUs of the calling thread's mask, as a list "0-3,6" for messages. */
static void mask_str(const cpu_set_t *m, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && k + 16 < n; c++) {
        if (!CPU_ISSET(c, m))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, m))
            e++;
        k += (size_t)snprintf(out + k, n - k, k ? ",%d" : "%d", c);
        if (e > c)
            k += (size_t)snprintf(out + k, n - k, "-%d", e);
        c = e;
    }
}

static int get_mask(pid_t tid, cpu_set_t *m)
{
    CPU_ZERO(m);
    return sched_getaffinity(tid, sizeof *m, m);
}

/* Expects the calling thread's mask to equal `want`, and says after what. */
static void expect_mask(const cpu_set_t *want, const char *where, const char *what)
{
    cpu_set_t now;
    if (get_mask(0, &now) != 0) {
        EXPECT(0, "%s: %s: sched_getaffinity failed", where, what);
        return;
    }
    char a[256], b[256];
    mask_str(want, a, sizeof a);
    mask_str(&now, b, sizeof b);
    EXPECT(CPU_EQUAL(want, &now), "%s: after %s the thread's CPU mask is {%s}, was {%s}", where,
           what, b, a);
}

/* ---- the calls -------------------------------------------------------------- */

typedef struct shape {
    const char *name;
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal;
} shape;

static const shape k_shapes[] = {
    {"prefill B1 S96 H4 D32 causal", 1, 96, 96, 4, 4, 32, 1},
    {"decode B2 Sq1 Sk700 H8/2 D64", 2, 1, 700, 8, 2, 64, 0},
};
/* A larger prefill: several tiles a thread, the packed K/V of FLASH. */
static const shape k_large[] = {
    {"prefill B1 S512 H8 D64 causal", 1, 512, 512, 8, 8, 64, 1},
};
static const xattn_algo k_algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};

/* Every shape x algorithm on a fresh CPU context set to `threads` (0 = its
 * default), the calling thread's mask checked against `want` after each call
 * and after the context is destroyed. */
static void run_shapes(const cpu_set_t *want, int64_t threads, const char *where,
                       const shape *shapes, size_t n_shapes)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "%s: CPU context: %s", where, xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return;
    if (threads)
        EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, threads));
    for (size_t s = 0; s < n_shapes; s++) {
        const shape *sh = &shapes[s];
        xattn_test_problem p;
        st = xattn_test_problem_make(&p, ctx, sh->B, sh->Sq, sh->Sk, sh->Hq, sh->Hkv, sh->D, sh->D,
                                     1, 0x5eed + s);
        EXPECT(st == XATTN_STATUS_OK, "%s: problem: %s", where, xattn_status_name(st));
        if (st != XATTN_STATUS_OK)
            continue;
        p.desc.causal = sh->causal;
        for (size_t a = 0; a < sizeof k_algos / sizeof k_algos[0]; a++) {
            p.desc.algo = k_algos[a];
            char what[160];
            snprintf(what, sizeof what, "%s %s, threads %lld", xattn_algo_name(k_algos[a]),
                     sh->name, (long long)threads);
            xattn_run_info info;
            /* twice: the first call of a context and a later one (the
             * runtime's workers exist by then) */
            for (int rep = 0; rep < 2; rep++) {
                st = xattn_attention(ctx, &p.desc, rep ? &info : NULL);
                EXPECT(st == XATTN_STATUS_OK, "%s: %s: %s", where, what, xattn_last_error());
                expect_mask(want, where, what);
            }
        }
        xattn_test_problem_free(&p);
    }
    xattn_ctx_destroy(ctx);
    expect_mask(want, where, "xattn_ctx_destroy");
}

static void run_calls(const cpu_set_t *want, int64_t threads, const char *where)
{
    run_shapes(want, threads, where, k_shapes, sizeof k_shapes / sizeof k_shapes[0]);
}

/* The context's ceilings, measured (quick, in the test's cache folder). */
static void run_ceilings(const cpu_set_t *want, const char *where)
{
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        EXPECT(0, "%s: CPU context: %s", where, xattn_last_error());
        return;
    }
    xattn_ceilings c;
    memset(&c, 0, sizeof c);
    xattn_status st = xattn_ceilings_measure(ctx, 1, &c);
    EXPECT(st == XATTN_STATUS_OK, "%s: xattn_ceilings_measure: %s", where, xattn_last_error());
    expect_mask(want, where, "xattn_ceilings_measure");
    xattn_ctx_destroy(ctx);
}

/* A mask of `n` CPUs of `from`: its last ones (CPU 0 is where a binding
 * would put thread 0, so a narrowed mask without it shows a binding best). */
static int narrow(const cpu_set_t *from, int n, cpu_set_t *out)
{
    CPU_ZERO(out);
    int k = 0;
    for (int c = CPU_SETSIZE - 1; c >= 0 && k < n; c--)
        if (CPU_ISSET(c, from)) {
            CPU_SET(c, out);
            k++;
        }
    return k == n;
}

/* Parts 1 and 3 (and 5, under XATTN_CPU_BIND=0) on the calling thread: its
 * full mask, then narrowed and restored by the test itself. */
static void caller_parts(const cpu_set_t *full, const char *who)
{
    char where[96];
    snprintf(where, sizeof where, "%s, full mask", who);
    run_calls(full, 0, where);
    run_calls(full, 2, where);
    const int n_full = CPU_COUNT(full);
    for (int n = 1; n <= 2 && n < n_full; n++) {
        cpu_set_t nm;
        if (!narrow(full, n, &nm))
            continue;
        if (sched_setaffinity(0, sizeof nm, &nm) != 0) {
            SKIP("%s: the test could not narrow its own mask to %d CPU(s)", who, n);
            continue;
        }
        snprintf(where, sizeof where, "%s, mask narrowed to %d CPU%s", who, n, n > 1 ? "s" : "");
        run_calls(&nm, 2, where);
        run_calls(&nm, 0, where);
        EXPECT(sched_setaffinity(0, sizeof *full, full) == 0, "%s: restoring the test's mask", who);
    }
}

/* Part 2: every thread of the process but the caller has the mask `want`. */
static void expect_pool_masks(const cpu_set_t *want, const char *where)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        SKIP("%s: /proc/self/task cannot be read", where);
        return;
    }
    const pid_t self = (pid_t)gettid();
    int others = 0;
    struct dirent *e;
    char a[256], b[256];
    mask_str(want, a, sizeof a);
    while ((e = readdir(d))) {
        char *end = NULL;
        long tid = strtol(e->d_name, &end, 10);
        if (!end || *end || tid <= 0 || (pid_t)tid == self)
            continue;
        cpu_set_t m;
        if (get_mask((pid_t)tid, &m) != 0)
            continue; /* the thread has exited since */
        others++;
        mask_str(&m, b, sizeof b);
        EXPECT(CPU_EQUAL(&m, want), "%s: thread %ld's CPU mask is {%s}, the caller's was {%s}",
               where, tid, b, a);
    }
    closedir(d);
    if (!others)
        SKIP("%s: no worker thread to check (a build without OpenMP)", where);
}

typedef struct thread_arg {
    cpu_set_t full;
    int had_mask;
} thread_arg;

static void *second_thread(void *arg)
{
    thread_arg *t = arg;
    t->had_mask = get_mask(0, &t->full) == 0;
    if (t->had_mask)
        caller_parts(&t->full, "second pthread");
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    cpu_set_t full;
    if (get_mask(0, &full) != 0) {
        printf("SKIP sched_getaffinity failed: no CPU mask to check\n");
        return 77;
    }
    if (CPU_COUNT(&full) < 2) {
        printf("SKIP one CPU in this thread's mask: the library has nothing to bind\n");
        return 77;
    }
    char s[256];
    mask_str(&full, s, sizeof s);
    printf("calling thread's mask: {%s} (%d CPUs)\n", s, CPU_COUNT(&full));

    /* 1 and 2: the calling thread's full mask first, so that the runtime's
     * workers are started from it and must still have it afterwards. */
    setenv("XATTN_CPU_BIND", "1", 1);
    run_calls(&full, 0, "main thread");
    run_calls(&full, 2, "main thread");
    run_shapes(&full, 2, "main thread", k_large, 1);
    run_ceilings(&full, "main thread");
    expect_pool_masks(&full, "after the main thread's calls");

    /* 3: narrowed masks on the main thread. */
    caller_parts(&full, "main thread");
    expect_mask(&full, "main thread", "the narrowed runs");

    /* 4: a thread that is not an OpenMP thread, with a context of its own. */
    pthread_t th;
    thread_arg ta;
    memset(&ta, 0, sizeof ta);
    if (pthread_create(&th, NULL, second_thread, &ta) == 0) {
        pthread_join(th, NULL);
        EXPECT(ta.had_mask, "second pthread: sched_getaffinity failed");
    } else {
        SKIP("pthread_create failed: no second thread");
    }
    expect_mask(&full, "main thread", "the second thread's calls");

    /* 5: the default, then no binding at all. */
    unsetenv("XATTN_CPU_BIND");
    run_shapes(&full, 2, "XATTN_CPU_BIND unset", k_large, 1);
    run_calls(&full, 2, "XATTN_CPU_BIND unset");
    run_ceilings(&full, "XATTN_CPU_BIND unset");
    expect_pool_masks(&full, "after the default calls");
    setenv("XATTN_CPU_BIND", "0", 1);
    run_calls(&full, 0, "XATTN_CPU_BIND=0");
    unsetenv("XATTN_CPU_BIND");
    return xattn_test_summary();
}

#else /* !__linux__ */

int main(void)
{
    printf("SKIP the CPU mask checks use Linux's sched_getaffinity\n");
    return 77;
}

#endif
