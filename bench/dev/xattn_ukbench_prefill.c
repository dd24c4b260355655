/*
 * xattn_ukbench --prefill: the prefill micro-kernels alone, on one thread,
 * against the FMA ceiling of the same core measured in the same run.
 *
 * For each SIMD path the CPU runs, on one full tile resident in L1/L2
 * (XATTN_CPU_BQ query rows, the KV tile the library takes for D, D = Dv;
 * NAIVE's products on its own blocks):
 *   flash qk   uk->qk_tile, the outer product S^T = Q^T-tile x K-tile
 *   flash pv   uk->pv_tile, acc += P V over every row's keys
 *   flash tile the two with uk->softmax_tile between them (a FLASH step less
 *              its masks and rescale), its rate counted on the products' FLOPs
 *   flash walk one query tile over UKP_WALK KV tiles of packed K/V (the FLASH
 *              loop of one work item, the rescale of acc included: K/V come
 *              from L2/L3 as in a call, 2 MiB of them at D 128)
 *   naive qk   uk->qk_tile as NAIVE's QK^T phase calls it (K^T as the vector
 *              operand, Q rows broadcast)
 *   naive pv   uk->qk_tile as NAIVE's P.V phase calls it (a 256-key chunk of V
 *              as the vector operand, rows of a 2048-wide P broadcast)
 * Each figure is GFLOP/s (2 per multiply-add the kernel is asked for) at the
 * median and at the fastest repetition, and the fastest as a share of the
 * fastest FMA rate of the same vector width (12 independent FMA chains, see
 * xattn_ukbench_rates.c). Both are timed on the thread's CPU time in
 * repetitions of about 1 ms: on a shared machine, the fastest of them come
 * nearest an undisturbed core, for the kernel and the ceiling alike.
 */
#include "xattn_cpu_common.h"
#include "xattn_stats.h"
#include "xattn_ukbench_modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UKP_NAIVE_KC 256  /* keys per P.V chunk in NAIVE (xattn_cpu_naive.c) */
#define UKP_NAIVE_SK 2048 /* the score matrix's row pitch for the naive pv line */
#define UKP_WALK 32       /* KV tiles of the walk: 2048 keys with 64-key tiles */

typedef struct ukp_bufs {
    int D, ldk, Dvp, nc, nr;
    float *qt, *kt, *vt, *st, *acc, *m, *l, *alpha;
    float *kw, *vw;                /* the walk's packed K and V tiles */
    float *kq, *qr, *vn, *pn, *sn; /* NAIVE's operands */
    int clo[XATTN_CPU_BQ], chi[XATTN_CPU_BQ];
} ukp_bufs;

enum { UKP_QK, UKP_PV, UKP_TILE, UKP_WALKS, UKP_NQK, UKP_NPV, UKP_N };
static const char *const ukp_names[UKP_N] = {"flash qk",   "flash pv", "flash tile",
                                             "flash walk", "naive qk", "naive pv"};

static void ukp_once(const xattn__cpu_uk *uk, ukp_bufs *b, int what)
{
    const int NL = XATTN_CPU_BQ;
    switch (what) {
    case UKP_QK: uk->qk_tile(b->st, b->qt, b->kt, b->ldk, b->D, b->nc, b->nr); break;
    case UKP_PV:
        uk->pv_tile(b->acc, b->Dvp, b->st, b->vt, b->Dvp, b->D, b->nr, b->clo, b->chi);
        break;
    case UKP_TILE:
        uk->qk_tile(b->st, b->qt, b->kt, b->ldk, b->D, b->nc, b->nr);
        uk->softmax_tile(b->st, b->nc, b->nr, b->m, b->l, b->alpha);
        uk->pv_tile(b->acc, b->Dvp, b->st, b->vt, b->Dvp, b->D, b->nr, b->clo, b->chi);
        for (int r = 0; r < b->nr; r++)
            b->m[r] = 0.0f; /* the next step's max stays where the scores put it */
        break;
    case UKP_WALKS:
        for (int r = 0; r < b->nr; r++) {
            b->m[r] = -INFINITY;
            b->l[r] = 0.0f;
        }
        for (int t = 0; t < UKP_WALK; t++) {
            const float *kt = b->kw + (size_t)t * b->nc * b->ldk;
            const float *vt = b->vw + (size_t)t * b->nc * b->Dvp;
            uk->qk_tile(b->st, b->qt, kt, b->ldk, b->D, b->nc, b->nr);
            uk->softmax_tile(b->st, b->nc, b->nr, b->m, b->l, b->alpha);
            for (int r = 0; r < b->nr; r++) /* as xattn__cpu_attend_tile */
                if (b->alpha[r] != 1.0f)
                    uk->scale(b->acc + r * b->Dvp, b->Dvp, b->alpha[r]);
            uk->pv_tile(b->acc, b->Dvp, b->st, vt, b->Dvp, b->D, b->nr, b->clo, b->chi);
        }
        break;
    case UKP_NQK: uk->qk_tile(b->sn, b->kq, b->qr, b->ldk, b->D, NL, NL); break;
    case UKP_NPV:
        for (int dv0 = 0; dv0 < b->D; dv0 += NL)
            uk->qk_tile(b->sn, b->vn + (size_t)dv0 * UKP_NAIVE_KC, b->pn, UKP_NAIVE_SK,
                        UKP_NAIVE_KC, NL, NL);
        break;
    default: break;
    }
}

/* Multiply-adds of one ukp_once. */
static double ukp_macs(const ukp_bufs *b, int what)
{
    const double NL = XATTN_CPU_BQ;
    switch (what) {
    case UKP_QK:
    case UKP_PV: return (double)b->nr * b->nc * b->D;
    case UKP_TILE: return 2.0 * b->nr * b->nc * b->D;
    case UKP_WALKS: return 2.0 * UKP_WALK * b->nr * b->nc * b->D;
    case UKP_NQK: return NL * NL * b->D;
    case UKP_NPV: return NL * UKP_NAIVE_KC * (double)xattn__cpu_round_up(b->D, XATTN_CPU_BQ);
    default: return 0;
    }
}

/* GFLOP/s at the median and at the fastest of reps repetitions of ~1 ms, on
 * the thread's CPU time: on a shared machine, the time slices that other
 * processes take from this core are left out (their evictions of its caches
 * are not). */
static void ukp_time(const xattn__cpu_uk *uk, ukp_bufs *b, int what, int reps, double *med,
                     double *best)
{
    double t[64];
    ukp_once(uk, b, what); /* warm-up: operands into the caches */
    int64_t n = 1;
    for (;;) { /* calls per repetition: about 1 ms */
        const double s = xattn_ukbench_cpu_s();
        for (int64_t i = 0; i < n; i++)
            ukp_once(uk, b, what);
        const double e = xattn_ukbench_cpu_s() - s;
        if (e >= 0.001 || n >= (1 << 24))
            break;
        n = e > 0 ? (int64_t)(n * 0.0012 / e) + 1 : n * 10;
    }
    for (int r = 0; r < reps; r++) {
        const double s = xattn_ukbench_cpu_s();
        for (int64_t i = 0; i < n; i++)
            ukp_once(uk, b, what);
        t[r] = (xattn_ukbench_cpu_s() - s) / (double)n;
    }
    xattn_stats sm;
    xattn_stats_compute(t, reps, &sm);
    const double flop = 2.0 * ukp_macs(b, what);
    *med = flop / sm.median * 1e-9;
    *best = flop / sm.min * 1e-9;
}

static float *ukp_alloc(size_t floats, uint32_t *seed, float amp)
{
    float *x = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!x)
        return NULL;
    for (size_t i = 0; i < floats; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = amp * ((float)(*seed >> 8) / 16777216.0f - 0.5f);
    }
    return x;
}

static int ukp_run(const xattn__cpu_uk *uk, int D, int reps, double fma_best)
{
    const int BQ = XATTN_CPU_BQ, NL = XATTN_CPU_BQ;
    ukp_bufs b;
    memset(&b, 0, sizeof b);
    b.D = D;
    b.ldk = (int)xattn__cpu_round_up(D, XATTN__CPU_PAD);
    b.Dvp = b.ldk;
    b.nr = BQ;
    /* The KV tile the library takes at this Dv (xattn__cpu_bk: from the L1
     * size, 32 KiB unless the CPU backend has set it from hwloc). */
    b.nc = (int)xattn__cpu_fit_keys(XATTN_CPU_BK, (uint64_t)b.Dvp * 4u,
                                    xattn_cpu_l1d_bytes() / 4u * 3u);
    uint32_t s = 12345u;
    const float qa = 1.0f / (float)D;
    b.qt = ukp_alloc((size_t)b.ldk * BQ, &s, qa);
    b.kt = ukp_alloc((size_t)(b.nc + XATTN__CPU_PAD) * b.ldk, &s, 1.0f);
    b.vt = ukp_alloc((size_t)(b.nc + XATTN__CPU_PAD) * b.Dvp, &s, 1.0f);
    b.st = ukp_alloc((size_t)(b.nc + XATTN__CPU_PAD) * BQ, &s, 0.0f);
    b.acc = ukp_alloc((size_t)BQ * b.Dvp, &s, 0.0f);
    b.m = ukp_alloc(BQ, &s, 0.0f);
    b.l = ukp_alloc(BQ, &s, 0.0f);
    b.alpha = ukp_alloc(BQ, &s, 0.0f);
    b.kq = ukp_alloc((size_t)b.ldk * NL, &s, 1.0f);
    b.qr = ukp_alloc((size_t)NL * b.ldk, &s, qa);
    /* [block of NL columns][KC][NL] */
    b.vn = ukp_alloc((size_t)UKP_NAIVE_KC * (size_t)xattn__cpu_round_up(D, NL), &s, 1.0f);
    b.pn = ukp_alloc((size_t)NL * UKP_NAIVE_SK, &s, 1.0f / UKP_NAIVE_KC);
    b.sn = ukp_alloc((size_t)NL * NL, &s, 0.0f);
    b.kw = ukp_alloc((size_t)UKP_WALK * b.nc * b.ldk, &s, 1.0f);
    b.vw = ukp_alloc((size_t)UKP_WALK * b.nc * b.Dvp, &s, 1.0f);
    int rc = 0;
    if (!b.qt || !b.kt || !b.vt || !b.st || !b.acc || !b.m || !b.l || !b.alpha || !b.kq || !b.qr ||
        !b.vn || !b.pn || !b.sn || !b.kw || !b.vw) {
        fprintf(stderr, "xattn_ukbench: out of memory\n");
        rc = 1;
    }
    for (int r = 0; r < BQ; r++) {
        b.clo[r] = 0;
        b.chi[r] = b.nc;
    }
    for (int what = 0; what < UKP_N && !rc; what++) {
        if (what == UKP_PV) /* P as the softmax leaves it: exp of the scores */
            uk->softmax_tile(b.st, b.nc, b.nr, b.m, b.l, b.alpha);
        double med, best;
        ukp_time(uk, &b, what, reps, &med, &best);
        printf("%-8s %-10s %4d %5dx%-3d %9.1f %9.1f %8.1f%%\n", xattn_cpu_simd_name(uk->simd),
               ukp_names[what], D, what >= UKP_NQK ? XATTN_CPU_BQ : b.nr,
               what >= UKP_NQK ? XATTN_CPU_BQ : b.nc, med, best,
               fma_best > 0 ? 100.0 * best / fma_best : 0.0);
    }
    free(b.qt);
    free(b.kt);
    free(b.vt);
    free(b.st);
    free(b.acc);
    free(b.m);
    free(b.l);
    free(b.alpha);
    free(b.kq);
    free(b.qr);
    free(b.vn);
    free(b.pn);
    free(b.sn);
    free(b.kw);
    free(b.vw);
    return rc;
}

int xattn_ukbench_prefill(int D, int reps)
{
    const xattn_cpu_simd have = xattn_cpu_simd_detect();
    printf("%-8s %-10s %4s %9s %9s %9s %9s\n", "simd", "kernel", "D", "tile", "GFLOP/s", "best",
           "% of FMA");
    for (int sv = XATTN_CPU_SIMD_AVX512; sv >= XATTN_CPU_SIMD_PORTABLE; sv--) {
        if (sv > (int)have)
            continue;
        const xattn__cpu_uk *uk = xattn__cpu_uk_get((xattn_cpu_simd)sv);
        if (uk->simd != (xattn_cpu_simd)sv)
            continue; /* not compiled in this build */
        double fma_med, fma_best = 0;
        if (xattn_ukbench_fma_gflops((xattn_cpu_simd)sv, reps, &fma_med, &fma_best) == 0)
            printf("%-8s %-10s %4s %9s %9.1f %9.1f %8s\n", xattn_cpu_simd_name(uk->simd),
                   "FMA peak", "-", "-", fma_med, fma_best, "100%");
        else
            printf("%-8s %-10s %4s %9s %9s %9s %9s\n", xattn_cpu_simd_name(uk->simd), "FMA peak",
                   "-", "-", "-", "-", "(scalar)");
        if (ukp_run(uk, D, reps, fma_best))
            return 1;
    }
    printf("(one thread, operands resident in L1/L2, on the thread's CPU time; GFLOP/s count 2\n"
           " per multiply-add asked of the kernel; %% of FMA: the fastest repetition against the\n"
           " fastest FMA rate of the same vector width, measured just before)\n");
    return 0;
}
