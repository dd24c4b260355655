/*
 * xattn_paged_ab: what a paged KV cache costs against a contiguous one, as
 * paired ratios in one run (a benchmark, never a test).
 *
 * The same K/V values are laid out twice: contiguous [B, Sk, Hkv, D] and in a
 * pool of pages [pages, page, Hkv, D] under a shuffled block table (the pages
 * of a sequence scattered as a serving engine's allocator leaves them). Each
 * round runs the contiguous call and then each page size, so that every ratio
 * paged/contiguous comes from calls seconds apart on the same machine state.
 * Times are the backend's own clock (run info device_ms). The outputs of the
 * two layouts are compared once (they read the same values).
 *
 *   xattn_paged_ab [--backend cpu|opencl] [--algo splitkv|flash|auto]
 *                  [--batch 8] [--sk 8192] [--hq 32] [--hkv 8] [--d 128]
 *                  [--dtype f16|bf16|f32] [--pages 16,64,256] [--rounds 9]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xtool_stats.h"

#define MAX_PS 8

static int fail(const char *what, xattn_status st)
{
    fprintf(stderr, "xattn_paged_ab: %s: %s: %s\n", what, xattn_status_name(st),
            xattn_last_error());
    return 2;
}

static uint32_t g_rng = 12345u;
static float rnd(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)(g_rng >> 8) / 16777216.0f - 0.5f;
}

/* Element e of a buffer image of dtype dt, from f32. */
static void put(unsigned char *img, int64_t e, xattn_dtype dt, float x)
{
    if (dt == XATTN_DTYPE_F32) {
        memcpy(img + 4 * e, &x, 4);
        return;
    }
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t h;
    if (dt == XATTN_DTYPE_BF16) {
        h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else { /* f16, for values well inside its range */
        uint32_t sign = (u >> 16) & 0x8000u;
        int32_t ex = (int32_t)((u >> 23) & 0xff) - 127 + 15;
        uint32_t man = (u >> 13) & 0x3ffu;
        h = ex <= 0 ? (uint16_t)sign : (uint16_t)(sign | ((uint32_t)ex << 10) | man);
    }
    memcpy(img + 2 * e, &h, 2);
}

static int64_t arg_i(int argc, char **argv, const char *name, int64_t def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return strtoll(argv[i + 1], NULL, 10);
    return def;
}

static const char *arg_s(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

int main(int argc, char **argv)
{
    const int64_t B = arg_i(argc, argv, "--batch", 8), Sk = arg_i(argc, argv, "--sk", 8192);
    const int64_t Hq = arg_i(argc, argv, "--hq", 32), Hkv = arg_i(argc, argv, "--hkv", 8);
    const int64_t D = arg_i(argc, argv, "--d", 128);
    const int rounds = (int)arg_i(argc, argv, "--rounds", 9);
    xattn_backend be = XATTN_BACKEND_CPU;
    if (xattn_backend_from_name(arg_s(argc, argv, "--backend", "cpu"), &be) != XATTN_STATUS_OK)
        return fail("--backend", XATTN_STATUS_INVALID_ARGUMENT);
    xattn_algo algo = XATTN_ALGO_SPLITKV;
    if (xattn_algo_from_name(arg_s(argc, argv, "--algo", "splitkv"), &algo) != XATTN_STATUS_OK)
        return fail("--algo", XATTN_STATUS_INVALID_ARGUMENT);
    const char *dn = arg_s(argc, argv, "--dtype", "f16");
    const xattn_dtype dt = !strcmp(dn, "f32")    ? XATTN_DTYPE_F32
                           : !strcmp(dn, "bf16") ? XATTN_DTYPE_BF16
                                                 : XATTN_DTYPE_F16;
    int64_t ps[MAX_PS];
    int nps = 0;
    for (const char *p = arg_s(argc, argv, "--pages", "16,64,256"); *p && nps < MAX_PS;) {
        ps[nps++] = strtoll(p, (char **)&p, 10);
        if (*p == ',')
            p++;
        else
            break;
    }
    if (B < 1 || Sk < 1 || Hq < 1 || Hkv < 1 || Hq % Hkv || D < 1 || D > 256 || rounds < 1 ||
        nps < 1)
        return fail("arguments", XATTN_STATUS_INVALID_ARGUMENT);
    for (int i = 0; i < nps; i++)
        if (ps[i] < 1)
            return fail("--pages", XATTN_STATUS_INVALID_ARGUMENT);

    xattn_ctx *ctx;
    xattn_status st = xattn_ctx_create(be, 0, &ctx);
    if (st != XATTN_STATUS_OK)
        return fail("context", st);
    const size_t es = xattn_dtype_size(dt);
    const int64_t row = Hkv * D; /* elements of one token's K (or V) */
    const size_t kv_bytes = (size_t)(B * Sk * row) * es;
    unsigned char *img = malloc(kv_bytes * 2);
    if (!img)
        return fail("host memory", XATTN_STATUS_OUT_OF_MEMORY);
    for (int64_t e = 0; e < 2 * B * Sk * row; e++)
        put(img, e, dt, rnd());

    /* q, o and the contiguous caches (K then V in one image). */
    xattn_buffer *bq, *bo, *bk, *bv;
    const size_t qbytes = (size_t)(B * Hq * D) * es;
    unsigned char *qimg = malloc(qbytes);
    for (int64_t e = 0; e < B * Hq * D; e++)
        put(qimg, e, dt, rnd());
    if ((st = xattn_buffer_alloc(ctx, qbytes, &bq)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_write(bq, 0, qimg, qbytes)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_alloc(ctx, qbytes, &bo)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_alloc(ctx, kv_bytes, &bk)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_write(bk, 0, img, kv_bytes)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_alloc(ctx, kv_bytes, &bv)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_write(bv, 0, img + kv_bytes, kv_bytes)) != XATTN_STATUS_OK)
        return fail("buffers", st);
    int32_t *lens = malloc((size_t)B * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++)
        lens[b] = (int32_t)Sk;

    xattn_attn_desc dc;
    xattn_attn_desc_init(&dc);
    dc.q = xattn_tensor_bshd(bq, 0, dt, B, 1, Hq, D);
    dc.o = xattn_tensor_bshd(bo, 0, dt, B, 1, Hq, D);
    dc.k = xattn_tensor_bshd(bk, 0, dt, B, Sk, Hkv, D);
    dc.v = xattn_tensor_bshd(bv, 0, dt, B, Sk, Hkv, D);
    dc.algo = algo;

    /* The paged layouts: a shuffled pool per page size. */
    xattn_attn_desc dp[MAX_PS];
    xattn_buffer *pk[MAX_PS], *pv[MAX_PS];
    int32_t *tables[MAX_PS];
    for (int i = 0; i < nps; i++) {
        const int64_t per = (Sk + ps[i] - 1) / ps[i], np = B * per;
        const size_t pbytes = (size_t)(np * ps[i] * row) * es;
        int64_t *perm = malloc((size_t)np * sizeof *perm);
        tables[i] = malloc((size_t)np * sizeof(int32_t));
        unsigned char *pool = calloc(2, pbytes);
        if (!perm || !tables[i] || !pool)
            return fail("host memory", XATTN_STATUS_OUT_OF_MEMORY);
        for (int64_t p = 0; p < np; p++)
            perm[p] = p;
        for (int64_t p = np - 1; p > 0; p--) {
            g_rng = g_rng * 1664525u + 1013904223u;
            const int64_t e = (int64_t)(g_rng % (uint32_t)(p + 1)), t = perm[p];
            perm[p] = perm[e];
            perm[e] = t;
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t g = 0; g < per; g++) {
                const int64_t page = perm[b * per + g];
                tables[i][b * per + g] = (int32_t)page;
                for (int64_t t = 0; t < ps[i] && g * ps[i] + t < Sk; t++)
                    for (int kv = 0; kv < 2; kv++)
                        memcpy(pool + (size_t)kv * pbytes + (size_t)((page * ps[i] + t) * row) * es,
                               img + (size_t)kv * kv_bytes +
                                   (size_t)((b * Sk + g * ps[i] + t) * row) * es,
                               (size_t)row * es);
            }
        if ((st = xattn_buffer_alloc(ctx, pbytes, &pk[i])) != XATTN_STATUS_OK ||
            (st = xattn_buffer_write(pk[i], 0, pool, pbytes)) != XATTN_STATUS_OK ||
            (st = xattn_buffer_alloc(ctx, pbytes, &pv[i])) != XATTN_STATUS_OK ||
            (st = xattn_buffer_write(pv[i], 0, pool + pbytes, pbytes)) != XATTN_STATUS_OK)
            return fail("page pools", st);
        free(pool);
        free(perm);
        dp[i] = dc;
        dp[i].k = xattn_tensor_bshd(pk[i], 0, dt, np, ps[i], Hkv, D);
        dp[i].v = xattn_tensor_bshd(pv[i], 0, dt, np, ps[i], Hkv, D);
        dp[i].block_table = tables[i];
        dp[i].max_pages_per_seq = per;
        dp[i].seqlens_k = lens;
    }

    /* One check that both layouts give the same output. */
    unsigned char *oc = malloc(qbytes), *op = malloc(qbytes);
    xattn_run_info info;
    if ((st = xattn_attention(ctx, &dc, &info)) != XATTN_STATUS_OK ||
        (st = xattn_buffer_read(bo, 0, oc, qbytes)) != XATTN_STATUS_OK)
        return fail("contiguous call", st);
    for (int i = 0; i < nps; i++) {
        if ((st = xattn_attention(ctx, &dp[i], &info)) != XATTN_STATUS_OK ||
            (st = xattn_buffer_read(bo, 0, op, qbytes)) != XATTN_STATUS_OK)
            return fail("paged call", st);
        if (memcmp(oc, op, qbytes))
            printf("note: page %lld: the output differs from the contiguous one in some bits "
                   "(another summation order)\n",
                   (long long)ps[i]);
    }

    double *tc = malloc((size_t)rounds * sizeof(double));
    double *tp = malloc((size_t)rounds * nps * sizeof(double));
    double *ratio = malloc((size_t)rounds * sizeof(double));
    for (int r = 0; r < rounds; r++) {
        if ((st = xattn_attention(ctx, &dc, &info)) != XATTN_STATUS_OK)
            return fail("contiguous call", st);
        tc[r] = info.device_ms;
        for (int i = 0; i < nps; i++) {
            if ((st = xattn_attention(ctx, &dp[i], &info)) != XATTN_STATUS_OK)
                return fail("paged call", st);
            tp[i * rounds + r] = info.device_ms;
        }
    }
    xtool_stats sc;
    xtool_stats_compute(tc, rounds, &sc);
    const double gb = 2.0 * (double)kv_bytes / 1e9;
    printf("%s %s %s: B %lld, Sk %lld, H %lld/%lld, D %lld, kernel %s, %d rounds\n",
           xattn_backend_name(be), xattn_algo_name(algo), xattn_dtype_name(dt), (long long)B,
           (long long)Sk, (long long)Hq, (long long)Hkv, (long long)D, info.kernel, rounds);
    printf("%-12s %10s %8s %14s %16s\n", "layout", "median ms", "GB/s", "paged/contig",
           "ratio interval");
    printf("%-12s %10.3f %8.1f %14s %16s\n", "contiguous", sc.median, gb / (sc.median / 1e3), "",
           "");
    for (int i = 0; i < nps; i++) {
        xtool_stats s;
        xtool_stats_compute(tp + i * rounds, rounds, &s);
        for (int r = 0; r < rounds; r++)
            ratio[r] = tp[i * rounds + r] / tc[r];
        xtool_paired pr;
        xtool_stats_paired(ratio, rounds, 0.02, &pr);
        char name[32], iv[40] = "-";
        snprintf(name, sizeof name, "page %lld", (long long)ps[i]);
        if (!isnan(pr.lo))
            snprintf(iv, sizeof iv, "%.3f..%.3f", pr.lo, pr.hi);
        printf("%-12s %10.3f %8.1f %14.3f %16s\n", name, s.median, gb / (s.median / 1e3), pr.median,
               iv);
    }
    free(tc);
    free(tp);
    free(ratio);
    free(oc);
    free(op);
    free(img);
    free(qimg);
    free(lens);
    for (int i = 0; i < nps; i++) {
        free(tables[i]);
        xattn_buffer_free(pk[i]);
        xattn_buffer_free(pv[i]);
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bo);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_ctx_destroy(ctx);
    return 0;
}
