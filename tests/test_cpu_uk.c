/*
 * test_cpu_uk: the CPU tile micro-kernels of every SIMD path this CPU runs
 * (kernels_cpu/xattn_cpu_uk_*.c), called alone against plain double sums:
 *
 * - qk_tile at every key count of a tile and a spread of row counts and
 *   depths (the register blocks' tails: AVX2 takes 6 keys a block and 4 for
 *   the rest, AVX-512 8), also with NAIVE's long row pitch;
 * - pv_tile with a key range per row, every row count of a tile (the row
 *   blocks' tails: AVX2 6 rows a block and one more block of the rest,
 *   AVX-512 4 and the rest one by one) and several widths of V;
 * - the (row, key) pairs pv_tile visits against xattn__cpu_pv_pairs, the
 *   executed-work count, with the table's pv_block and pv_tail_block;
 * - softmax_tile (the online-softmax step) with masked keys, fully masked
 *   rows, a NaN score and differences down to the exp's underflow;
 * - xattn__cpu_load_rows on q8_0 rows, pieces starting anywhere in a block.
 *
 * Each also checks that nothing outside what its contract lets it write was
 * written. A path this CPU lacks is reported as skipped. The inputs come from
 * a fixed seed; no timing is involved.
 *
 * The last line is "N passed, N failed, N skipped".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_cpu_common.h"
#include "xattn_test.h"

enum { BQ = XATTN_CPU_BQ, BK = XATTN_CPU_BK, PAD = XATTN__CPU_PAD };
#define SENTINEL 12345.0f /* what no kernel computes here: "not written" */

static uint32_t g_seed = 20251201u;
static float rnd(void) /* uniform in [-1, 1) */
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) / 8388608.0f - 1.0f;
}
static int rndi(int n) /* uniform in [0, n) */
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (int)((g_seed >> 8) % (uint32_t)n);
}

static int rup(int x, int m)
{
    return (x + m - 1) / m * m;
}

/* Bit equality (NaN, -inf and the sentinel alike). */
static int same(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void *zalloc(size_t floats)
{
    float *p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        printf("FAIL out of memory\n");
        exit(1);
    }
    memset(p, 0, floats * sizeof(float));
    return p;
}

/* st[c*BQ + r] = sum_d qt[d*BQ + r] * kt[c*ldk + d], c < nc, r < nr; rows up
 * to round_up(nc, 16) and lanes up to round_up(nr, 16) may be written, no more. */
static void check_qk(const xattn__cpu_uk *uk, int D, int ldk, int nc, int nr)
{
    const int rows = BK + PAD;
    float *qt = zalloc((size_t)D * BQ), *kt = zalloc((size_t)rows * ldk);
    float *st = zalloc((size_t)rows * BQ);
    for (int d = 0; d < D; d++)
        for (int r = 0; r < nr; r++) /* lanes nr.. stay 0 (finite, as the contract asks) */
            qt[d * BQ + r] = rnd();
    for (int c = 0; c < nc; c++)
        for (int d = 0; d < D; d++)
            kt[(size_t)c * ldk + d] = rnd();
    for (int i = 0; i < rows * BQ; i++)
        st[i] = SENTINEL;
    uk->qk_tile(st, qt, kt, ldk, D, nc, nr);
    int bad = 0, stray = 0;
    for (int c = 0; c < rows; c++)
        for (int r = 0; r < BQ; r++) {
            const float got = st[c * BQ + r];
            if (c < nc && r < nr) {
                double ref = 0, mag = 0;
                for (int d = 0; d < D; d++) {
                    ref += (double)qt[d * BQ + r] * kt[(size_t)c * ldk + d];
                    mag += fabs((double)qt[d * BQ + r] * kt[(size_t)c * ldk + d]);
                }
                bad += !(fabs(got - ref) <= (D + 2) * 1.2e-7 * mag + 1e-30);
            } else if (c >= rup(nc, 16) || r >= rup(nr, 16)) {
                stray += !same(got, SENTINEL);
            }
        }
    EXPECT(bad == 0 && stray == 0,
           "%s qk_tile D %d ldk %d nc %d nr %d: %d scores wrong, %d written out of bounds",
           xattn_cpu_simd_name(uk->simd), D, ldk, nc, nr, bad, stray);
    free(qt);
    free(kt);
    free(st);
}

/* Key ranges for nr rows within nc keys: mostly overlapping intervals (as
 * causal and window masks give), some empty, some a single key. */
static void ranges(int nc, int nr, int *clo, int *chi)
{
    const int kind = rndi(4);
    for (int r = 0; r < nr; r++) {
        int lo = 0, hi = nc;
        if (kind == 1) { /* causal-like: a diagonal */
            hi = nc * (r + 1) / nr;
        } else if (kind == 2) { /* windows */
            lo = rndi(nc + 1);
            hi = lo + rndi(nc - lo + 1);
        } else if (kind == 3) { /* anything, empty ranges included */
            lo = rndi(nc + 1);
            hi = rndi(nc + 1);
            if (hi < lo)
                hi = lo;
            if (rndi(3) == 0)
                hi = lo;
        }
        clo[r] = lo;
        chi[r] = hi;
    }
}

/* acc[r*ldacc + x] += sum_{clo[r] <= c < chi[r]} st[c*BQ + r] * vt[c*ldv + x],
 * p = 0 outside each row's range; rows from nr on and columns from ldv on are
 * not written. Then the pairs visited against xattn__cpu_pv_pairs. */
static void check_pv(const xattn__cpu_uk *uk, int n, int nc, int nr)
{
    const int ldv = rup(n, PAD), ldacc = ldv + PAD;
    float *st = zalloc((size_t)BK * BQ), *vt = zalloc((size_t)BK * ldv);
    float *acc = zalloc((size_t)BQ * ldacc), *acc0 = zalloc((size_t)BQ * ldacc);
    int clo[BQ], chi[BQ];
    ranges(nc, nr, clo, chi);
    for (int c = 0; c < nc; c++)
        for (int x = 0; x < n; x++)
            vt[(size_t)c * ldv + x] = rnd();
    for (int r = 0; r < nr; r++)
        for (int c = clo[r]; c < chi[r]; c++)
            st[c * BQ + r] = 0.5f * (rnd() + 1.0f);
    for (int r = 0; r < BQ; r++)
        for (int x = 0; x < ldacc; x++)
            acc0[r * ldacc + x] = r < nr && x < ldv ? rnd() : SENTINEL;
    memcpy(acc, acc0, (size_t)BQ * ldacc * sizeof(float));
    uk->pv_tile(acc, ldacc, st, vt, ldv, n, nr, clo, chi);
    int bad = 0, stray = 0;
    for (int r = 0; r < BQ; r++)
        for (int x = 0; x < ldacc; x++) {
            const float got = acc[r * ldacc + x], a0 = acc0[r * ldacc + x];
            if (r < nr && x < ldv) {
                double ref = a0, mag = fabs(a0);
                for (int c = clo[r]; c < chi[r]; c++) {
                    ref += (double)st[c * BQ + r] * vt[(size_t)c * ldv + x];
                    mag += fabs((double)st[c * BQ + r] * vt[(size_t)c * ldv + x]);
                }
                bad += !(fabs(got - ref) <= (chi[r] - clo[r] + 3) * 1.2e-7 * mag + 1e-30);
            } else {
                stray += !same(got, a0);
            }
        }
    EXPECT(bad == 0 && stray == 0,
           "%s pv_tile n %d nc %d nr %d: %d sums wrong, %d written out "
           "of bounds",
           xattn_cpu_simd_name(uk->simd), n, nc, nr, bad, stray);

    /* The pairs visited: p 1 at every key outside a row's range, 0 inside,
     * V all ones: acc[r][0] counts the keys row r visited outside its range. */
    for (int r = 0; r < BQ; r++)
        for (int c = 0; c < BK; c++)
            st[c * BQ + r] = c >= clo[r] && c < chi[r] ? 0.0f : 1.0f;
    for (int i = 0; i < BK * ldv; i++)
        vt[i] = 1.0f;
    memset(acc, 0, (size_t)BQ * ldacc * sizeof(float));
    uk->pv_tile(acc, ldacc, st, vt, ldv, n, nr, clo, chi);
    uint64_t visited = 0;
    for (int r = 0; r < nr; r++)
        visited += (uint64_t)(chi[r] - clo[r]) + (uint64_t)acc[r * ldacc];
    const uint64_t counted = xattn__cpu_pv_pairs(clo, chi, nr, uk->pv_block, !uk->pv_tail_block);
    EXPECT(visited == counted,
           "%s pv_tile n %d nc %d nr %d: visits %llu (row, key) pairs, "
           "the work count says %llu",
           xattn_cpu_simd_name(uk->simd), n, nc, nr, (unsigned long long)visited,
           (unsigned long long)counted);
    free(st);
    free(vt);
    free(acc);
    free(acc0);
}

static double max_nan(double m, double s)
{
    return (s > m || s != s) ? s : m;
}

/* One online-softmax step against double: m, p = exp(s - m_new), alpha, l.
 * The kernels subtract in f32, as the reference here does before its exp, so
 * that what is compared is the exp (and the sum). */
static void check_softmax(const xattn__cpu_uk *uk, int nc, int nr)
{
    float *st = zalloc((size_t)(BK + PAD) * BQ), *s0 = zalloc((size_t)(BK + PAD) * BQ);
    float m[BQ + PAD], l[BQ + PAD], al[BQ + PAD], m0[BQ + PAD], l0[BQ + PAD];
    for (int c = 0; c < BK + PAD; c++)
        for (int r = 0; r < BQ; r++) {
            float s = SENTINEL;
            if (c < nc && r < nr) {
                const int k = rndi(16);
                s = k == 0 ? -INFINITY : 20.0f * rnd();
                if (r % 7 == 3) /* differences near the exp's underflow (-87.3) */
                    s = c == 0 ? 10.0f : 10.0f - 86.5f - 2.0f * (float)rndi(3) + rnd();
                if (r % 11 == 5) /* fully masked in this tile */
                    s = -INFINITY;
            }
            st[c * BQ + r] = s0[c * BQ + r] = s;
        }
    if (nr > 2)
        st[(nc - 1) * BQ + 2] = s0[(nc - 1) * BQ + 2] = NAN; /* a NaN score */
    for (int r = 0; r < BQ + PAD; r++) {
        m0[r] = m[r] = r < nr ? (r % 3 == 0 ? -INFINITY : 15.0f * rnd()) : SENTINEL;
        l0[r] = l[r] = r < nr ? (m0[r] == -INFINITY ? 0.0f : 1.0f + rnd()) : SENTINEL;
        al[r] = SENTINEL;
    }
    uk->softmax_tile(st, nc, nr, m, l, al);
    int bad = 0, stray = 0;
    for (int r = 0; r < nr; r++) {
        double mx = m0[r];
        for (int c = 0; c < nc; c++)
            mx = max_nan(mx, s0[c * BQ + r]);
        const float mu = mx == -INFINITY ? 0.0f : (float)mx;
        double sum = 0;
        for (int c = 0; c < nc; c++) {
            const double p = exp((double)(float)(s0[c * BQ + r] - mu));
            const float got = st[c * BQ + r];
            sum += p;
            if (p != p)
                bad += got == got;
            else if (s0[c * BQ + r] == -INFINITY)
                bad += got != 0.0f; /* a masked key weighs exactly 0 */
            else
                bad += !(fabs(got - p) <= 3e-7 * p + 1e-37);
        }
        const double a = exp((double)(float)(m0[r] - mu)), lref = l0[r] * a + sum;
        if (mx != mx) {
            bad += !(m[r] != m[r] && l[r] != l[r]);
        } else {
            bad += !same(m[r], (float)mx);
            bad += !(fabs(al[r] - a) <= 3e-7 * a + 1e-37);
            bad += !(fabs(l[r] - lref) <= (nc + 4) * 1.2e-7 * lref + 1e-37);
        }
    }
    for (int r = rup(nr, 16); r < BQ + PAD; r++)
        stray += !same(m[r], SENTINEL) + !same(l[r], SENTINEL) + !same(al[r], SENTINEL);
    for (int c = 0; c < BK + PAD; c++)
        for (int r = 0; r < BQ; r++)
            if (c >= nc || r >= rup(nr, 16))
                stray += !same(st[c * BQ + r], s0[c * BQ + r]);
    EXPECT(bad == 0 && stray == 0,
           "%s softmax_tile nc %d nr %d: %d values wrong, %d written out "
           "of bounds",
           xattn_cpu_simd_name(uk->simd), nc, nr, bad, stray);
    free(st);
    free(s0);
}

/* xattn__cpu_load_rows on q8_0 rows: every start within a block (a row piece
 * need not start on one) and lengths across block ends, against the public
 * dequantizer; zeros from n to zero_to, nothing past zero_to written, and the
 * check flag set exactly when a block in range has a NaN or inf scale. */
static void check_load_q8_0(const xattn__cpu_uk *uk)
{
    enum { RS = 96, ROWS = 3 }; /* 3 rows of 96 values, 3 blocks each */
    unsigned char raw[ROWS * RS / 32 * 34];
    float x[ROWS * RS], want[ROWS * RS], tile[ROWS * 128];
    for (int i = 0; i < ROWS * RS; i++)
        x[i] = rnd();
    EXPECT(xattn_quantize_q8_0(x, raw, ROWS * RS) == XATTN_STATUS_OK, "quantize");
    xattn_dequantize_q8_0(raw, want, ROWS * RS);
    int bad = 0;
    for (int i0 = 0; i0 < 32; i0++)
        for (int n = 1; i0 + n <= RS && n <= 70; n++) {
            for (int i = 0; i < ROWS * 128; i++)
                tile[i] = SENTINEL;
            const int zero_to = n + 5;
            const int nan = xattn__cpu_load_rows(uk, tile, 128, raw, i0, RS, n, zero_to, ROWS,
                                                 XATTN_DTYPE_Q8_0, 1, 1.0f);
            for (int c = 0; c < ROWS; c++)
                for (int t = 0; t < 128; t++) {
                    const float w = t < n ? want[c * RS + i0 + t] : t < zero_to ? 0.0f : SENTINEL;
                    bad += tile[c * 128 + t] != w;
                }
            bad += nan != 0;
        }
    EXPECT(!bad, "%s: q8_0 load_rows: %d values wrong", xattn_cpu_simd_name(uk->simd), bad);
    /* a NaN scale in block 1 of row 1: seen by a piece that covers it, not by one before it */
    raw[(RS / 32 + 1) * 34] = 0x00, raw[(RS / 32 + 1) * 34 + 1] = 0x7e;
    EXPECT(xattn__cpu_load_rows(uk, tile, 128, raw, 0, RS, 64, 64, ROWS, XATTN_DTYPE_Q8_0, 1,
                                1.0f) == 1,
           "%s: q8_0 NaN scale not reported", xattn_cpu_simd_name(uk->simd));
    EXPECT(xattn__cpu_load_rows(uk, tile, 128, raw, 0, RS, 32, 32, ROWS, XATTN_DTYPE_Q8_0, 1,
                                1.0f) == 0,
           "%s: q8_0 NaN scale outside the piece reported", xattn_cpu_simd_name(uk->simd));
}

int main(void)
{
    printf("test_cpu_uk: seed %u, tiles %d rows x %d keys\n", g_seed, BQ, BK);
    const xattn_cpu_simd have = xattn_cpu_simd_detect();
    for (int sv = XATTN_CPU_SIMD_PORTABLE; sv <= XATTN_CPU_SIMD_AVX512; sv++) {
        const xattn__cpu_uk *uk = xattn__cpu_uk_get((xattn_cpu_simd)sv);
        if (sv > (int)have || uk->simd != (xattn_cpu_simd)sv) {
            printf("skip %s: not on this CPU or not in this build\n",
                   xattn_cpu_simd_name((xattn_cpu_simd)sv));
            g_skipped++;
            continue;
        }
        static const int Ds[] = {1, 16, 80, 128}, nrs[] = {1, 8, 9, 17, 40, 64};
        for (size_t i = 0; i < sizeof Ds / sizeof Ds[0]; i++)
            for (int nc = 1; nc <= BK; nc++)
                for (size_t j = 0; j < sizeof nrs / sizeof nrs[0]; j++)
                    check_qk(uk, Ds[i], rup(Ds[i], PAD), nc, nrs[j]);
        /* NAIVE's P.V: depth 256 keys, P rows of a wide score matrix. */
        for (int nc = 1; nc <= BK; nc += 7)
            check_qk(uk, 256, 2056, nc, 64);
        static const int ns[] = {8, 16, 24, 64, 80, 128};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (int nr = 1; nr <= BQ; nr++)
                for (int rep = 0; rep < 3; rep++)
                    check_pv(uk, ns[i], 1 + rndi(BK), nr);
        static const int sncs[] = {1, 7, 16, 32, 64}, snrs[] = {1, 3, 4, 5, 8, 9, 33, 64};
        for (size_t i = 0; i < sizeof sncs / sizeof sncs[0]; i++)
            for (size_t j = 0; j < sizeof snrs / sizeof snrs[0]; j++)
                check_softmax(uk, sncs[i], snrs[j]);
        check_load_q8_0(uk);
    }
    return xattn_test_summary();
}
