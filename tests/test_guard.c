/*
 * Out-of-bounds reads of the kernels, made deterministic: K and V are wrapped
 * host memory (zero-copy) that ends exactly where a PROT_NONE guard page
 * begins, so a kernel that reads one key past the last sequence faults
 * instead of reading harmless bytes. The cross-backend harness surrounds its
 * views with NaN guards inside larger buffers, which catch wrong values but
 * not a read past a packed batch's last token whose result is masked anyway
 * (NAIVE on the CPU once built K^T tiles to the padded extent Sk, past a
 * packed sequence's end; OpenCL once let a work-group's key range run past
 * the keys for rows that see none).
 *
 * Cases: causal top-left with windows and Lq > Lk (rows that see no key),
 * packed GQA batches whose longest sequence is not the last, and packed
 * decode (the CPU's in-place SPLITKV path), each with every algorithm,
 * compared with the reference; on the CPU with every SIMD path it has. An
 * OpenCL runtime that copies host memory (not PoCL) cannot fault here; the
 * test then checks the values only.
 *
 *   test_guard cpu | opencl
 *
 * Exit: 0 pass, 1 fail, 77 backend unavailable. Last line "N passed, N
 * failed, N skipped".
 */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_reference.h"
#include "xattn_test.h"

/* `bytes` (a multiple of 64) of read-write memory that end where a PROT_NONE
 * page begins; returns the start, or NULL. *base, *len: what to munmap. */
static void *guarded_alloc(size_t bytes, void **base, size_t *len)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = (bytes + page - 1) / page * page;
    *len = body + page;
    char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect(p + body, page, PROT_NONE) != 0) {
        munmap(p, *len);
        return NULL;
    }
    *base = p;
    return p + body - bytes;
}

static unsigned g_seed = 12345u;
static float rnd(void)
{
    g_seed = g_seed * 1103515245u + 12345u;
    return (float)(g_seed >> 16 & 0x7fff) / 16384.0f - 1.0f;
}

typedef struct gcase {
    const char *name;
    int hq, hkv, d;
    int nseq; /* 0: one padded-free sequence of sq x sk */
    int32_t cuq[5], cuk[5];
    int sq, sk; /* single sequence, or the packed maxima (unused) */
    int causal;
    xattn_align align;
    int64_t wl, wr;
} gcase;

static const gcase cases[] = {
    {"causal-tl-window", 1, 1, 64, 0, {0}, {0}, 48, 16, 1, XATTN_ALIGN_TOP_LEFT, 4, -1},
    {"causal-tl-window-right", 1, 1, 64, 0, {0}, {0}, 48, 16, 1, XATTN_ALIGN_TOP_LEFT, 11, 3},
    {"window-only", 1, 1, 64, 0, {0}, {0}, 48, 16, 0, XATTN_ALIGN_TOP_LEFT, 2, 2},
    {"causal-br-window", 1, 1, 64, 0, {0}, {0}, 48, 16, 1, XATTN_ALIGN_BOTTOM_RIGHT, 3, -1},
    /* the longest sequence first: the padded extent runs past the last one */
    {"packed-gqa-causal",
     8,
     2,
     64,
     3,
     {0, 70, 71, 101},
     {0, 90, 95, 125},
     0,
     0,
     1,
     XATTN_ALIGN_BOTTOM_RIGHT,
     -1,
     -1},
    {"packed-gqa",
     4,
     1,
     80,
     3,
     {0, 33, 40, 64},
     {0, 200, 203, 260},
     0,
     0,
     0,
     XATTN_ALIGN_BOTTOM_RIGHT,
     -1,
     -1},
    {"packed-decode",
     8,
     2,
     128,
     2,
     {0, 1, 2},
     {0, 700, 1000},
     0,
     0,
     0,
     XATTN_ALIGN_BOTTOM_RIGHT,
     -1,
     -1},
    {"packed-decode-window",
     4,
     1,
     64,
     3,
     {0, 1, 2, 3},
     {0, 900, 905, 1200},
     0,
     0,
     0,
     XATTN_ALIGN_BOTTOM_RIGHT,
     100,
     0},
};

static void run_case(xattn_ctx *ctx, const gcase *c, const char *simd)
{
    const int packed = c->nseq > 0;
    const int tq = packed ? c->cuq[c->nseq] : c->sq, tk = packed ? c->cuk[c->nseq] : c->sk;
    const size_t qn = (size_t)tq * c->hq * c->d, kn = (size_t)tk * c->hkv * c->d;
    void *kbase = NULL, *vbase = NULL;
    size_t klen = 0, vlen = 0;
    float *k = guarded_alloc(kn * 4, &kbase, &klen);
    float *v = guarded_alloc(kn * 4, &vbase, &vlen);
    float *q = malloc(qn * 4), *o = malloc(qn * 4);
    double *ref = malloc(qn * sizeof(double));
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    xattn_status st = k && v && q && o && ref ? XATTN_STATUS_OK : XATTN_STATUS_OUT_OF_MEMORY;
    char what[160];
    if (st == XATTN_STATUS_OK) {
        for (size_t i = 0; i < qn; i++)
            q[i] = rnd();
        for (size_t i = 0; i < kn; i++) {
            k[i] = rnd();
            v[i] = rnd();
        }
        st = xattn_buffer_alloc(ctx, qn * 4, &bq);
    }
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bq, 0, q, qn * 4);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_wrap_host(ctx, k, kn * 4, &bk);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_wrap_host(ctx, v, kn * 4, &bv);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, qn * 4, &bo);
    snprintf(what, sizeof what, "%s %s buffers", c->name, simd);
    EXPECT(st == XATTN_STATUS_OK, "%s: %s", what, xattn_last_error());

    for (int a = XATTN_ALGO_NAIVE; st == XATTN_STATUS_OK && a <= XATTN_ALGO_SPLITKV; a++) {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, 1, tq, c->hq, c->d);
        d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, 1, tk, c->hkv, c->d);
        d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, 1, tk, c->hkv, c->d);
        d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, 1, tq, c->hq, c->d);
        if (packed) {
            d.cu_seqlens_q = c->cuq;
            d.cu_seqlens_k = c->cuk;
            d.num_seqs = c->nseq;
        }
        d.causal = c->causal;
        d.align = c->align;
        d.window_left = c->wl;
        d.window_right = c->wr;
        d.algo = (xattn_algo)a;
        snprintf(what, sizeof what, "%s %s %s", c->name, simd, xattn_algo_name((xattn_algo)a));
        xattn_status s = xattn_attention(ctx, &d, NULL);
        if (s == XATTN_STATUS_OK)
            s = xattn_ctx_sync(ctx);
        if (s == XATTN_STATUS_OK)
            s = xattn_buffer_read(bo, 0, o, qn * 4);
        if (s == XATTN_STATUS_OK)
            s = xattn_reference_attention(ctx, &d, ref, NULL);
        if (s != XATTN_STATUS_OK) {
            EXPECT(0, "%s: %s", what, xattn_last_error());
            continue;
        }
        double num = 0, den = 0;
        for (size_t i = 0; i < qn; i++) {
            double e = (double)o[i] - ref[i];
            num += e * e;
            den += ref[i] * ref[i];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        char detail[96];
        snprintf(detail, sizeof detail, "rel L2 %.3e against the reference", rel);
        EXPECT(rel < 1e-5, "%s: %s", what, detail);
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    if (kbase)
        munmap(kbase, klen);
    if (vbase)
        munmap(vbase, vlen);
    free(q);
    free(o);
    free(ref);
}

int main(int argc, char **argv)
{
    const int cl = argc > 1 && !strcmp(argv[1], "opencl");
    if (argc != 2 || (!cl && strcmp(argv[1], "cpu"))) {
        fprintf(stderr, "usage: test_guard cpu|opencl\n");
        return 2;
    }
    const xattn_backend be = cl ? XATTN_BACKEND_OPENCL : XATTN_BACKEND_CPU;
    if (xattn_backend_available(be) != XATTN_STATUS_OK) {
        SKIP("%s: %s", argv[1], xattn_last_error());
        xattn_test_summary();
        return 77;
    }
    /* The CPU runs every SIMD path; OpenCL its device 0. */
    static const struct {
        int64_t value;
        const char *name;
    } paths[] = {{1, "portable"}, {2, "avx2"}, {3, "avx512"}};
    const size_t np = cl ? 1 : sizeof paths / sizeof paths[0];
    for (size_t p = 0; p < np; p++) {
        const char *name = cl ? "default" : paths[p].name;
        xattn_ctx *ctx = NULL;
        if (xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
            EXPECT(0, "ctx: %s", xattn_last_error());
            break;
        }
        if (!cl &&
            xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, paths[p].value) != XATTN_STATUS_OK) {
            SKIP("%s: %s", name, xattn_last_error());
            xattn_ctx_destroy(ctx);
            continue;
        }
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            run_case(ctx, &cases[c], name);
        xattn_ctx_destroy(ctx);
    }
    return xattn_test_summary();
}
