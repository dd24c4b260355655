/*
 * test_embed: what an application embedding the library meets.
 *
 *  1. lazy probe   A CPU context (created, used, destroyed) loads no shared
 *                  object: the OpenCL drivers (PoCL brings LLVM) and the CUDA
 *                  driver are probed only when their backend is asked for.
 *                  Run first, before anything else in this process probes.
 *  2. live buffers xattn_ctx_destroy with buffers still live frees their
 *                  memory; the handles stay valid for xattn_buffer_free, and
 *                  every other use of them is refused with a message (run
 *                  under ASan and valgrind: no leak, no use after free).
 *  3. aliasing     Two handles on the same memory: an output that overlaps an
 *                  input through another handle is refused, on every backend
 *                  that can make such handles; disjoint regions are fine.
 *
 * Each part runs on the CPU and on OpenCL (and CUDA) when available. The last
 * line is "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_test.h"
#ifdef XATTN_TEST_HAVE_OPENCL
#include "xattn_opencl.h"
#endif

/* ---- loaded shared objects ----------------------------------------------- */

#define MAX_OBJS 512
typedef struct objset {
    int n;
    char names[MAX_OBJS][256];
} objset;

static int add_obj(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    objset *s = data;
    if (s->n < MAX_OBJS)
        snprintf(s->names[s->n++], sizeof s->names[0], "%s", info->dlpi_name);
    return 0;
}

static void loaded(objset *s)
{
    s->n = 0;
    dl_iterate_phdr(add_obj, s);
}

/*
 * A device runtime or its compiler: what probing OpenCL or CUDA loads (the
 * ICD loader's drivers, PoCL's LLVM, the CUDA driver). A CPU context may load
 * other objects on its first call: hwloc's plugins (its XML reader pulls in
 * libxml2 and libstdc++ where Debian's libhwloc-plugins is installed), which
 * are not another backend's probe.
 */
static int is_device_runtime(const char *name)
{
    static const char *const pat[] = {"opencl", "pocl",    "cuda",   "nvidia", "nvrtc",
                                      "llvm",   "clang",   "amdocl", "igdrcl", "intelocl",
                                      "libze_", "rusticl", "mesa"};
    char low[256];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] - 'A' + 'a' : name[i]);
    low[i] = 0;
    for (size_t k = 0; k < sizeof pat / sizeof pat[0]; k++)
        if (strstr(low, pat[k]))
            return 1;
    return 0;
}

/* Objects of `after` that `before` does not have, printed; their count (only
 * the device runtimes among them when `runtimes_only`). */
static int new_objects(const objset *before, const objset *after, const char *what,
                       int runtimes_only)
{
    int n = 0;
    for (int i = 0; i < after->n; i++) {
        int seen = 0;
        for (int j = 0; j < before->n && !seen; j++)
            seen = !strcmp(after->names[i], before->names[j]);
        if (!seen) {
            const int counted = !runtimes_only || is_device_runtime(after->names[i]);
            printf("  %s loaded %s%s\n", what, after->names[i][0] ? after->names[i] : "(anonymous)",
                   counted ? "" : " (not a device runtime)");
            n += counted;
        }
    }
    return n;
}

/* ---- a small problem on one context -------------------------------------- */

enum { SQ = 8, SK = 16, H = 2, D = 16 };

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* q, k, v in buffers of their own, o in `o`. */
static xattn_status run_small(xattn_ctx *ctx, xattn_buffer *q, xattn_buffer *k, xattn_buffer *v,
                              xattn_buffer *o, size_t o_off, xattn_algo algo)
{
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 1, SQ, H, D);
    d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, SK, H, D);
    d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, SK, H, D);
    d.o = xattn_tensor_bshd(o, o_off, XATTN_DTYPE_F32, 1, SQ, H, D);
    d.algo = algo;
    return xattn_attention(ctx, &d, NULL);
}

static void test_lazy_probe(void)
{
    objset *before = malloc(sizeof *before), *after = malloc(sizeof *after);
    if (!before || !after) {
        EXPECT(0, "out of memory");
        free(before);
        free(after);
        return;
    }
    loaded(before);
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "cpu context: %s", xattn_last_error());
    if (st == XATTN_STATUS_OK) {
        xattn_buffer *q, *k, *v, *o;
        float hq[SQ * H * D], hk[SK * H * D];
        fill(hq, SQ * H * D, 1);
        fill(hk, SK * H * D, 2);
        xattn_buffer_alloc(ctx, sizeof hq, &q);
        xattn_buffer_alloc(ctx, sizeof hk, &k);
        xattn_buffer_alloc(ctx, sizeof hk, &v);
        xattn_buffer_alloc(ctx, sizeof hq, &o);
        xattn_buffer_write(q, 0, hq, sizeof hq);
        xattn_buffer_write(k, 0, hk, sizeof hk);
        xattn_buffer_write(v, 0, hk, sizeof hk);
        EXPECT(run_small(ctx, q, k, v, o, 0, XATTN_ALGO_FLASH) == XATTN_STATUS_OK, "%s",
               xattn_last_error());
        xattn_buffer_free(q);
        xattn_buffer_free(k);
        xattn_buffer_free(v);
        xattn_buffer_free(o);
        xattn_ctx_destroy(ctx);
    }
    loaded(after);
    EXPECT(new_objects(before, after, "a CPU context", 1) == 0,
           "a CPU context loaded a device runtime (another backend was probed)");
    /* The test has power where probing OpenCL loads a driver. */
    if (xattn_backend_compiled(XATTN_BACKEND_OPENCL)) {
        xattn_backend_available(XATTN_BACKEND_OPENCL);
        objset *probed = malloc(sizeof *probed);
        if (probed) {
            loaded(probed);
            if (new_objects(after, probed, "probing OpenCL", 0) == 0)
                SKIP("lazy probe: probing OpenCL loaded nothing here (no ICD driver?), so the "
                     "CPU check could not have seen an eager probe");
            free(probed);
        }
    }
    free(before);
    free(after);
}

/* ---- live buffers at destroy ---------------------------------------------- */

static void test_live_buffers(xattn_backend be)
{
    const char *bn = xattn_backend_name(be);
    if (xattn_backend_available(be) != XATTN_STATUS_OK) {
        SKIP("live buffers on %s: %s", bn, xattn_last_error());
        return;
    }
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
        EXPECT(0, "%s context: %s", bn, xattn_last_error());
        return;
    }
    float hq[SQ * H * D], hk[SK * H * D];
    fill(hq, SQ * H * D, 3);
    fill(hk, SK * H * D, 4);
    float *wrapped = malloc(sizeof hq);
    xattn_buffer *q = NULL, *k = NULL, *v = NULL, *o = NULL, *w = NULL;
    xattn_buffer_alloc(ctx, sizeof hq, &q);
    xattn_buffer_alloc(ctx, sizeof hk, &k);
    xattn_buffer_alloc(ctx, sizeof hk, &v);
    xattn_buffer_alloc(ctx, sizeof hq, &o);
    EXPECT(q && k && v && o, "%s alloc: %s", bn, xattn_last_error());
    int can_wrap =
        wrapped && xattn_buffer_wrap_host(ctx, wrapped, sizeof hq, &w) == XATTN_STATUS_OK;
    if (!q || !k || !v || !o) {
        xattn_ctx_destroy(ctx);
        free(wrapped);
        return;
    }
    xattn_buffer_write(q, 0, hq, sizeof hq);
    xattn_buffer_write(k, 0, hk, sizeof hk);
    xattn_buffer_write(v, 0, hk, sizeof hk);
    EXPECT(run_small(ctx, q, k, v, o, 0, XATTN_ALGO_FLASH) == XATTN_STATUS_OK, "%s: %s", bn,
           xattn_last_error());
    (void)can_wrap;

    xattn_ctx_destroy(ctx); /* five buffers still live */

    xattn_buffer *dead[5] = {q, k, v, o, w};
    for (int i = 0; i < 5; i++) {
        if (!dead[i])
            continue;
        EXPECT(xattn_buffer_size(dead[i]) == 0, "%s: a dead buffer reports %zu bytes", bn,
               xattn_buffer_size(dead[i]));
        float x = 0;
        EXPECT(xattn_buffer_write(dead[i], 0, &x, 0) == XATTN_STATUS_INVALID_ARGUMENT &&
                   strstr(xattn_last_error(), "destroyed"),
               "%s: write to a dead buffer: %s", bn, xattn_last_error());
        EXPECT(xattn_buffer_read(dead[i], 0, &x, sizeof x) == XATTN_STATUS_INVALID_ARGUMENT,
               "%s: read of a dead buffer", bn);
    }
    /* A dead buffer in a descriptor on a new context is refused, not read. */
    xattn_ctx *ctx2 = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx2) == XATTN_STATUS_OK) {
        xattn_buffer *q2 = NULL;
        xattn_buffer_alloc(ctx2, sizeof hq, &q2);
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(q2, 0, XATTN_DTYPE_F32, 1, SQ, H, D);
        d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, SK, H, D);
        d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, SK, H, D);
        d.o = xattn_tensor_bshd(q2, 0, XATTN_DTYPE_F32, 1, SQ, H, D);
        EXPECT(xattn_attention_check(ctx2, &d) == XATTN_STATUS_INVALID_ARGUMENT &&
                   strstr(xattn_last_error(), "k.buffer") &&
                   strstr(xattn_last_error(), "destroyed"),
               "%s: a dead buffer in a descriptor: %s", bn, xattn_last_error());
        xattn_buffer_free(q2);
        xattn_ctx_destroy(ctx2);
    }
    for (int i = 0; i < 5; i++)
        xattn_buffer_free(dead[i]); /* frees the handle only: no double free */
    /* The wrapped memory is the caller's, untouched by the destroy. */
    if (wrapped) {
        wrapped[0] = 1.0f;
        EXPECT(wrapped[0] == 1.0f, "wrapped memory");
    }
    free(wrapped);
}

/* ---- aliasing through two handles ------------------------------------------ */

static void test_alias_handles(xattn_backend be)
{
    const char *bn = xattn_backend_name(be);
    if (xattn_backend_available(be) != XATTN_STATUS_OK) {
        SKIP("aliasing on %s: %s", bn, xattn_last_error());
        return;
    }
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
        EXPECT(0, "%s context: %s", bn, xattn_last_error());
        return;
    }
    const size_t nq = SQ * H * D, nk = SK * H * D;
    float *mem = malloc((2 * nq) * sizeof(float)), *hk = malloc(nk * sizeof(float));
    xattn_buffer *k = NULL, *v = NULL, *h1 = NULL, *h2 = NULL;
    if (!mem || !hk)
        goto out;
    fill(mem, 2 * nq, 5);
    fill(hk, nk, 6);
    xattn_buffer_alloc(ctx, nk * sizeof(float), &k);
    xattn_buffer_alloc(ctx, nk * sizeof(float), &v);
    xattn_buffer_write(k, 0, hk, nk * sizeof(float));
    xattn_buffer_write(v, 0, hk, nk * sizeof(float));
    if (xattn_buffer_wrap_host(ctx, mem, 2 * nq * sizeof(float), &h1) != XATTN_STATUS_OK ||
        xattn_buffer_wrap_host(ctx, mem, 2 * nq * sizeof(float), &h2) != XATTN_STATUS_OK) {
        SKIP("aliasing on %s: cannot wrap host memory: %s", bn, xattn_last_error());
        goto out;
    }
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        /* o over q's bytes through the second handle: refused before any work. */
        xattn_status st = run_small(ctx, h1, k, v, h2, 0, (xattn_algo)a);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), "o:") &&
                   strstr(xattn_last_error(), "another buffer handle"),
               "%s %s: o aliasing q through a second handle gave %s: %s", bn,
               xattn_algo_name((xattn_algo)a), xattn_status_name(st), xattn_last_error());
        /* o over q's last half row only: still an overlap. */
        st = run_small(ctx, h1, k, v, h2, nq * sizeof(float) - 8, (xattn_algo)a);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "%s %s: a partial overlap gave %s", bn,
               xattn_algo_name((xattn_algo)a), xattn_status_name(st));
        /* Disjoint halves of the same memory through two handles: fine. */
        st = run_small(ctx, h1, k, v, h2, nq * sizeof(float), (xattn_algo)a);
        EXPECT(st == XATTN_STATUS_OK, "%s %s: disjoint halves: %s", bn,
               xattn_algo_name((xattn_algo)a), xattn_last_error());
    }
#ifdef XATTN_TEST_HAVE_OPENCL
    if (be == XATTN_BACKEND_OPENCL) {
        /* Two interop handles on one cl_mem alias as well. */
        cl_mem m = xattn_opencl_buffer_mem(h1);
        xattn_buffer *w1 = NULL, *w2 = NULL;
        if (m && xattn_opencl_buffer_wrap(ctx, m, &w1) == XATTN_STATUS_OK &&
            xattn_opencl_buffer_wrap(ctx, m, &w2) == XATTN_STATUS_OK) {
            xattn_status st = run_small(ctx, w1, k, v, w2, 0, XATTN_ALGO_FLASH);
            EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "opencl: two cl_mem wraps gave %s: %s",
                   xattn_status_name(st), xattn_last_error());
            st = run_small(ctx, w1, k, v, w2, nq * sizeof(float), XATTN_ALGO_FLASH);
            EXPECT(st == XATTN_STATUS_OK, "opencl: disjoint cl_mem regions: %s",
                   xattn_last_error());
        } else {
            EXPECT(0, "opencl: wrapping a cl_mem: %s", xattn_last_error());
        }
        xattn_buffer_free(w1);
        xattn_buffer_free(w2);
    }
#endif
out:
    xattn_buffer_free(h1);
    xattn_buffer_free(h2);
    xattn_buffer_free(k);
    xattn_buffer_free(v);
    xattn_ctx_destroy(ctx);
    free(mem);
    free(hk);
}

int main(void)
{
    test_lazy_probe(); /* first: nothing may have probed yet */
    const xattn_backend bes[] = {XATTN_BACKEND_CPU, XATTN_BACKEND_OPENCL, XATTN_BACKEND_CUDA};
    for (size_t i = 0; i < sizeof bes / sizeof bes[0]; i++) {
        test_live_buffers(bes[i]);
        test_alias_handles(bes[i]);
    }
    return xattn_test_summary();
}
