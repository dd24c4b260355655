/*
 * test_measure: the measurement model (docs/measurement.md).
 *
 * - FLOP and byte accounting of the records against hand-computed cases
 *   (causal square and rectangular in both alignments, windows, padded lengths
 *   including 0, GQA, varlen) and against brute-force loops over (i, j) on
 *   random shapes; useful <= executed <= dense;
 * - workspace: NAIVE's is B*Hq*Sq*Sk*4 bytes, FLASH's does not grow with Sq*Sk;
 * - timers against a wall clock around a synchronized call;
 * - sequence numbers, reset, user ranges, no-op calls;
 * - exports: JSON loaded back (jansson) and compared field by field, the trace
 *   parsed and checked for its required fields, CSV header and rows;
 * - ceilings: quick micro-benchmarks, the on-disk cache, a corrupt cache file.
 *
 * Ends with "N passed, N failed, N skipped"; exit status 1 on any failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef XATTN_TEST_HAVE_JANSSON
#include <jansson.h>
#endif

#include "xattn.h"
#include "xattn_test.h"

static char g_tmp[256]; /* scratch folder: cache and export files */

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

/* ---- cases -------------------------------------------------------------------- */

typedef struct tcase {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    xattn_dtype qdt, kvdt;
    int causal;
    xattn_align align;
    int64_t wl, wr;
    const int32_t *sl_q, *sl_k; /* padded mode */
    const int32_t *cu_q, *cu_k; /* varlen: B = num_seqs */
    int lse;
    xattn_algo algo;
} tcase;

static void tcase_init(tcase *c, int64_t Sq, int64_t Sk)
{
    memset(c, 0, sizeof *c);
    c->B = 1;
    c->Hq = c->Hkv = 1;
    c->Sq = Sq;
    c->Sk = Sk;
    c->D = 8;
    c->Dv = 8;
    c->qdt = c->kvdt = XATTN_DTYPE_F32;
    c->align = XATTN_ALIGN_BOTTOM_RIGHT;
    c->wl = c->wr = -1;
    c->algo = XATTN_ALGO_FLASH;
}

static int64_t tc_lq(const tcase *c, int64_t b)
{
    return c->cu_q ? c->cu_q[b + 1] - c->cu_q[b] : c->sl_q ? c->sl_q[b] : c->Sq;
}
static int64_t tc_lk(const tcase *c, int64_t b)
{
    return c->cu_k ? c->cu_k[b + 1] - c->cu_k[b] : c->sl_k ? c->sl_k[b] : c->Sk;
}
/* Longest sequences (what the record's sq/sk and the dense rectangle use). */
static int64_t tc_sq(const tcase *c)
{
    if (!c->cu_q)
        return c->Sq;
    int64_t m = 0;
    for (int64_t b = 0; b < c->B; b++)
        m = tc_lq(c, b) > m ? tc_lq(c, b) : m;
    return m;
}
static int64_t tc_sk(const tcase *c)
{
    if (!c->cu_k)
        return c->Sk;
    int64_t m = 0;
    for (int64_t b = 0; b < c->B; b++)
        m = tc_lk(c, b) > m ? tc_lk(c, b) : m;
    return m;
}

/* docs/semantics.md step 6, written out literally. */
static int tc_valid(const tcase *c, int64_t b, int64_t i, int64_t j)
{
    int64_t Lq = tc_lq(c, b), Lk = tc_lk(c, b);
    int64_t p = c->align == XATTN_ALIGN_BOTTOM_RIGHT ? i + Lk - Lq : i;
    if (i >= Lq || j >= Lk)
        return 0;
    if (c->causal && j > p)
        return 0;
    if (c->wl >= 0 && p - j > c->wl) /* j < p - left, without overflow */
        return 0;
    if (c->wr >= 0 && j - p > c->wr) /* j > p + right */
        return 0;
    return 1;
}

/* Per head: the brute-force useful pairs. */
static double bf_useful(const tcase *c)
{
    double n = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < tc_lq(c, b); i++)
            for (int64_t j = 0; j < tc_lk(c, b); j++)
                n += tc_valid(c, b, i, j);
    return n;
}

/* The valid keys [lo, hi) of row i of sequence b, found by scanning every key
 * (they form one interval; lo = hi = 0 when there are none). */
static void bf_row(const tcase *c, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    int found = 0;
    for (int64_t j = 0; j < tc_lk(c, b); j++)
        if (tc_valid(c, b, i, j)) {
            if (!found)
                *lo = j;
            *hi = j + 1;
            found = 1;
        }
}

/*
 * The executed work the CPU kernels count, recomputed by an independent walk
 * of their tiling (docs/measurement.md, "Executed work"), summed over every
 * head: qk (row, key) pairs of Q K^T and pv (row, key) pairs of P V; for
 * FLASH and SPLITKV kv, the K/V rows their tiles load (one per key of a tile
 * that runs, for each KV head and query tile).
 */
typedef struct bf_work {
    double qk, pv, kv;
} bf_work;

/* NAIVE: blocks of tq query rows of one head from row 0 (the rows a sequence
 * owns; the real ones compute), QK^T tiles of tk keys from key 0: a tile runs
 * when it meets the span of its block's intervals and counts the block's real
 * rows times its keys below Lk; the P.V walks the block's span in chunks, all
 * of which hold some row's keys (consecutive rows' intervals leave no hole). */
static bf_work bf_naive(const tcase *c, int64_t tq, int64_t tk)
{
    bf_work w = {0, 0, 0};
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t Lq = tc_lq(c, b), Lk = tc_lk(c, b);
        const int64_t rows = c->cu_q ? Lq : tc_sq(c), Sk = tc_sk(c);
        for (int64_t i0 = 0; i0 < rows; i0 += tq) {
            const int64_t R = Lq - i0 < tq ? (Lq > i0 ? Lq - i0 : 0) : tq;
            int64_t ulo = INT64_MAX, uhi = INT64_MIN;
            for (int64_t i = i0; i < i0 + R; i++) {
                int64_t lo, hi;
                bf_row(c, b, i, &lo, &hi);
                if (lo < hi) {
                    ulo = lo < ulo ? lo : ulo;
                    uhi = hi > uhi ? hi : uhi;
                }
            }
            if (ulo >= uhi)
                continue;
            for (int64_t ja = 0; ja < Sk; ja += tk) {
                const int64_t nk = Sk - ja < tk ? Sk - ja : tk;
                if (uhi <= ja || ulo >= ja + nk)
                    continue;
                const int64_t real = Lk - ja < nk ? Lk - ja : nk;
                w.qk += (double)(R * real);
            }
            w.pv += (double)(R * (uhi - ulo));
        }
    }
    w.qk *= (double)c->Hq;
    w.pv *= (double)c->Hq;
    return w;
}

/* The P.V pairs of one tile whose rows r < nr have keys [clo, chi): blocks of
 * `block` rows walk the span of their keys, the last nr % block rows their
 * own keys (tail_alone) or one more block. */
static double bf_pv_tile(const int64_t *clo, const int64_t *chi, int64_t nr, int64_t block,
                         int tail_alone)
{
    double n = 0;
    const int64_t nb = tail_alone ? nr / block * block : nr;
    int64_t r = 0;
    for (; r < nb; r += block) {
        int64_t lo = INT64_MAX, hi = INT64_MIN, e = r + block < nr ? r + block : nr;
        for (int64_t k = r; k < e; k++)
            if (clo[k] < chi[k]) {
                lo = clo[k] < lo ? clo[k] : lo;
                hi = chi[k] > hi ? chi[k] : hi;
            }
        if (lo < hi)
            n += (double)((e - r) * (hi - lo));
    }
    for (; r < nr; r++)
        n += (double)(chi[r] - clo[r]);
    return n;
}

/*
 * FLASH and SPLITKV: a query tile holds `heads` query heads of one KV group
 * times tq consecutive real positions (rows r = head * np + position); its key
 * tiles are the cells of tk keys from key 0, trimmed to the span of the rows'
 * intervals, and a cell runs when one row has keys in it: its real rows times
 * its keys for QK^T, and for the P.V the pairs of the micro-kernel's row
 * blocks (pv_tile): one by one on the portable path; blocks of 4 with the
 * rest alone on the AVX-512 path; blocks of 6 with the rest as one more block
 * on the AVX2 path (`tail_alone` 0); or blocks of 4 with a last partial one
 * where SPLITKV decode reads K/V in place (`src`). SPLITKV's chunks are whole
 * cells, so they do not change the walk (the span has no hole).
 */
static bf_work bf_tiled(const tcase *c, int64_t tq, int64_t tk, int64_t heads, int block,
                        int tail_alone, int src)
{
    bf_work w = {0, 0, 0};
    const int64_t group = c->Hq / c->Hkv, hblocks = (group + heads - 1) / heads;
    int64_t *lo = malloc((size_t)(heads * tq) * sizeof(int64_t) * 4);
    if (!lo)
        return w;
    int64_t *hi = lo + heads * tq, *clo = hi + heads * tq, *chi = clo + heads * tq;
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t Lq = tc_lq(c, b), Lk = tc_lk(c, b);
        for (int64_t hb = 0; hb < hblocks; hb++) {
            const int64_t nh = group - hb * heads < heads ? group - hb * heads : heads;
            for (int64_t i0 = 0; i0 < Lq; i0 += tq) {
                const int64_t np = Lq - i0 < tq ? Lq - i0 : tq, R = nh * np;
                int64_t ulo = INT64_MAX, uhi = INT64_MIN;
                for (int64_t r = 0; r < R; r++) {
                    bf_row(c, b, i0 + r % np, &lo[r], &hi[r]);
                    if (lo[r] < hi[r]) {
                        ulo = lo[r] < ulo ? lo[r] : ulo;
                        uhi = hi[r] > uhi ? hi[r] : uhi;
                    }
                }
                for (int64_t t0 = 0; ulo < uhi && t0 < Lk; t0 += tk) {
                    const int64_t ja = t0 > ulo ? t0 : ulo;
                    const int64_t jb = t0 + tk < uhi ? t0 + tk : uhi;
                    int any = 0;
                    for (int64_t r = 0; r < R; r++) {
                        clo[r] = lo[r] > ja ? lo[r] : ja;
                        chi[r] = hi[r] < jb ? hi[r] : jb;
                        if (chi[r] <= clo[r])
                            clo[r] = chi[r] = ja;
                        any |= chi[r] > clo[r];
                    }
                    if (jb <= ja || !any)
                        continue;
                    w.qk += (double)(R * (jb - ja));
                    w.kv += (double)(jb - ja);
                    w.pv += src ? bf_pv_tile(clo, chi, R, 4, 0)
                                : bf_pv_tile(clo, chi, R, block, tail_alone);
                }
            }
        }
    }
    free(lo);
    w.qk *= (double)c->Hkv;
    w.pv *= (double)c->Hkv;
    w.kv *= (double)c->Hkv;
    return w;
}

/* What the CPU kernels of rec (its algorithm, tiles and SIMD path) count for c. */
static bf_work bf_executed(const tcase *c, const xattn_record *rec)
{
    if (rec->algo_chosen == XATTN_ALGO_NAIVE)
        return bf_naive(c, rec->tile_q, rec->tile_k);
    const int simd = strcmp(rec->kernel, "portable") != 0;
    const int64_t group = c->Hq / c->Hkv, heads = rec->tile_heads > 0 ? rec->tile_heads : 1;
    /* SPLITKV decode reads K/V in place on the SIMD paths: one query tile per KV
     * group (contiguous rows), few rows, whole vectors of D and Dv. */
    const int src = simd && rec->algo_chosen == XATTN_ALGO_SPLITKV && heads == group &&
                    tc_sq(c) <= rec->tile_q && c->D % 16 == 0 && c->Dv % 16 == 0 &&
                    group * tc_sq(c) <= 16;
    const int avx2 = strcmp(rec->kernel, "avx2") == 0;
    return bf_tiled(c, rec->tile_q, rec->tile_k, heads, avx2 ? 6 : simd ? 4 : 1, !avx2, src);
}

typedef struct trun {
    xattn_buffer *q, *k, *v, *o, *lse;
    xattn_attn_desc d;
} trun;

static uint64_t g_rng = 0x1234567u;
static float rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) & 0xffff) / 65536.0f - 0.5f;
}

static xattn_status fill(xattn_buffer *buf, size_t n, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_Q8_0) { /* q8_0 blocks of random values (n a multiple of 32) */
        float *x = malloc((n ? n : 1) * sizeof *x);
        void *h = malloc((size_t)xattn_dtype_bytes(dt, n) + 1);
        xattn_status st = x && h ? XATTN_STATUS_OK : XATTN_STATUS_OUT_OF_MEMORY;
        for (size_t i = 0; st == XATTN_STATUS_OK && i < n; i++)
            x[i] = rnd();
        if (st == XATTN_STATUS_OK && n)
            st = xattn_quantize_q8_0(x, h, (int64_t)n);
        if (st == XATTN_STATUS_OK && n)
            st = xattn_buffer_write(buf, 0, h, (size_t)xattn_dtype_bytes(dt, n));
        free(x);
        free(h);
        return st;
    }
    size_t es = xattn_dtype_size(dt);
    void *h = malloc(n * es + 1);
    if (!h)
        return XATTN_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        float x = rnd();
        if (dt == XATTN_DTYPE_F32)
            ((float *)h)[i] = x;
        else
            ((uint16_t *)h)[i] = dt == XATTN_DTYPE_F16 ? xattn_f32_to_f16(x) : xattn_f32_to_bf16(x);
    }
    xattn_status st = n ? xattn_buffer_write(buf, 0, h, n * es) : XATTN_STATUS_OK;
    free(h);
    return st;
}

static void trun_free(trun *r)
{
    xattn_buffer_free(r->q);
    xattn_buffer_free(r->k);
    xattn_buffer_free(r->v);
    xattn_buffer_free(r->o);
    xattn_buffer_free(r->lse);
    memset(r, 0, sizeof *r);
}

static xattn_status trun_setup(xattn_ctx *ctx, const tcase *c, trun *r)
{
    memset(r, 0, sizeof *r);
    int64_t b = c->cu_q ? 1 : c->B;
    int64_t tq = c->cu_q ? c->cu_q[c->B] : c->Sq, tk = c->cu_k ? c->cu_k[c->B] : c->Sk;
    size_t nq = (size_t)(b * tq * c->Hq * c->D), nk = (size_t)(b * tk * c->Hkv * c->D);
    size_t nv = (size_t)(b * tk * c->Hkv * c->Dv), no = (size_t)(b * tq * c->Hq * c->Dv);
    size_t qs = xattn_dtype_size(c->qdt);
    const size_t kb = (size_t)xattn_dtype_bytes(c->kvdt, nk),
                 vb = (size_t)xattn_dtype_bytes(c->kvdt, nv);
    xattn_status st;
    if ((st = xattn_buffer_alloc(ctx, nq * qs + 64, &r->q)) ||
        (st = xattn_buffer_alloc(ctx, kb + 64, &r->k)) ||
        (st = xattn_buffer_alloc(ctx, vb + 64, &r->v)) ||
        (st = xattn_buffer_alloc(ctx, no * qs + 64, &r->o)) || (st = fill(r->q, nq, c->qdt)) ||
        (st = fill(r->k, nk, c->kvdt)) || (st = fill(r->v, nv, c->kvdt))) {
        trun_free(r);
        return st;
    }
    xattn_attn_desc *d = &r->d;
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(r->q, 0, c->qdt, b, tq, c->Hq, c->D);
    d->k = xattn_tensor_bshd(r->k, 0, c->kvdt, b, tk, c->Hkv, c->D);
    d->v = xattn_tensor_bshd(r->v, 0, c->kvdt, b, tk, c->Hkv, c->Dv);
    d->o = xattn_tensor_bshd(r->o, 0, c->qdt, b, tq, c->Hq, c->Dv);
    if (c->lse) {
        size_t nl = (size_t)(b * c->Hq * tq);
        if ((st = xattn_buffer_alloc(ctx, nl * 4 + 64, &r->lse))) {
            trun_free(r);
            return st;
        }
        /* lse is [B, Hq, Sq, 1], contiguous */
        d->lse = xattn_tensor_bshd(r->lse, 0, XATTN_DTYPE_F32, b, c->Hq, tq, 1);
    }
    d->causal = c->causal;
    d->align = c->align;
    d->window_left = c->wl;
    d->window_right = c->wr;
    d->seqlens_q = c->sl_q;
    d->seqlens_k = c->sl_k;
    d->cu_seqlens_q = c->cu_q;
    d->cu_seqlens_k = c->cu_k;
    d->num_seqs = c->cu_q ? c->B : 0;
    d->algo = c->algo;
    return XATTN_STATUS_OK;
}

/* Runs the case once with profiling on; the call's record and run_info. */
static xattn_status run_case(xattn_ctx *ctx, const tcase *c, xattn_record *rec,
                             xattn_run_info *info)
{
    trun r;
    xattn_status st = trun_setup(ctx, c, &r);
    if (st)
        return st;
    xattn_profiler_enable(ctx, 1);
    xattn_run_info local;
    st = xattn_attention(ctx, &r.d, info ? info : &local);
    size_t n = 0;
    if (!st)
        st = xattn_profiler_count(ctx, &n);
    if (!st && n == 0)
        st = XATTN_STATUS_INTERNAL;
    if (!st)
        st = xattn_profiler_get(ctx, n - 1, rec);
    trun_free(&r);
    return st;
}

static void describe(const tcase *c, char *out, size_t n)
{
    snprintf(out, n, "B%lld H%lld/%lld Sq%lld Sk%lld D%lld/%lld %s causal=%d %s win=%lld,%lld%s%s",
             (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Sk, (long long)c->D, (long long)c->Dv, xattn_algo_name(c->algo),
             c->causal, c->align == XATTN_ALIGN_TOP_LEFT ? "tl" : "br", (long long)c->wl,
             (long long)c->wr, c->sl_q || c->sl_k ? " padded" : "", c->cu_q ? " varlen" : "");
}

/* ---- FLOPs: hand-computed ----------------------------------------------------- */

static void check_useful(xattn_ctx *ctx, const tcase *c, double pairs_per_head,
                         double waste_expected)
{
    char desc[256];
    describe(c, desc, sizeof desc);
    xattn_record rec;
    xattn_status st = run_case(ctx, c, &rec, NULL);
    EXPECT(st == XATTN_STATUS_OK, "%s: %s", desc, xattn_last_error());
    if (st)
        return;
    const double per = 2.0 * (double)(c->D + c->Dv) * (double)c->Hq;
    EXPECT(rec.flops_useful == per * pairs_per_head, "%s: useful %.0f, expected %.0f (%g pairs)",
           desc, rec.flops_useful, per * pairs_per_head, pairs_per_head);
    EXPECT(bf_useful(c) == pairs_per_head, "%s: the brute force disagrees with the hand count",
           desc);
    const double dense = per * (double)c->B * (double)tc_sq(c) * (double)tc_sk(c);
    EXPECT(rec.flops_dense == dense, "%s: dense %.0f, expected %.0f", desc, rec.flops_dense, dense);
    if (waste_expected >= 0)
        EXPECT(fabs(rec.padding_waste - waste_expected) < 1e-12,
               "%s: padding waste %g, expected %g", desc, rec.padding_waste, waste_expected);
}

static void test_flops_hand(xattn_ctx *ctx)
{
    tcase c;
    /* Causal square: 1 + 2 + 3 + 4 in both alignments. */
    tcase_init(&c, 4, 4);
    c.causal = 1;
    check_useful(ctx, &c, 10, 0.0);
    c.align = XATTN_ALIGN_TOP_LEFT;
    check_useful(ctx, &c, 10, 0.0);
    /* Sq 2, Sk 5: top-left p = i sees 1 + 2; bottom-right p = i + 3 sees 4 + 5. */
    tcase_init(&c, 2, 5);
    c.causal = 1;
    c.align = XATTN_ALIGN_TOP_LEFT;
    check_useful(ctx, &c, 3, 0.0);
    c.align = XATTN_ALIGN_BOTTOM_RIGHT;
    check_useful(ctx, &c, 9, 0.0);
    /* Sq 5, Sk 2: top-left 1 + 2 + 2 + 2 + 2; bottom-right p = i - 3: 0 + 0 + 0 + 1 + 2. */
    tcase_init(&c, 5, 2);
    c.causal = 1;
    c.align = XATTN_ALIGN_TOP_LEFT;
    check_useful(ctx, &c, 9, 0.0);
    c.align = XATTN_ALIGN_BOTTOM_RIGHT;
    check_useful(ctx, &c, 3, 0.0);
    /* Windows: (1, 0) on 4 x 4 sees 1 + 2 + 2 + 2; (-1, 1) sees 2 + 3 + 4 + 4. */
    tcase_init(&c, 4, 4);
    c.wl = 1;
    c.wr = 0;
    check_useful(ctx, &c, 7, 0.0);
    c.wl = -1;
    c.wr = 1;
    check_useful(ctx, &c, 13, 0.0);
    /* Window (1, 1) bottom-right on Sq 2, Sk 5: p = 3 sees 2..4, p = 4 sees 3..4. */
    tcase_init(&c, 2, 5);
    c.wl = c.wr = 1;
    check_useful(ctx, &c, 5, 0.0);
    /* Window with causal, and a window far larger than the sequence. */
    tcase_init(&c, 4, 4);
    c.causal = 1;
    c.wl = 1;
    check_useful(ctx, &c, 7, 0.0);
    c.wl = INT64_MAX;
    c.wr = INT64_MAX;
    check_useful(ctx, &c, 10, 0.0);
    /* Padded: lengths q {3, 0}, k {2, 4}: non-causal 3*2 + 0; causal bottom-right
     * sequence 0 has p = i - 1: 0 + 1 + 2. Waste 1 - 6/32 in both. */
    static const int32_t lq[2] = {3, 0}, lk[2] = {2, 4};
    tcase_init(&c, 4, 4);
    c.B = 2;
    c.sl_q = lq;
    c.sl_k = lk;
    check_useful(ctx, &c, 6, 1.0 - 6.0 / 32.0);
    c.causal = 1;
    check_useful(ctx, &c, 3, 1.0 - 6.0 / 32.0);
    c.algo = XATTN_ALGO_NAIVE;
    check_useful(ctx, &c, 3, 1.0 - 6.0 / 32.0);
    /* Padded keys of length 0: nothing is valid. */
    static const int32_t lk0[1] = {0};
    tcase_init(&c, 3, 4);
    c.sl_k = lk0;
    check_useful(ctx, &c, 0, 1.0);
    /* GQA: Hq 4 over Hkv 2, causal square 4: 4 heads x 10. */
    tcase_init(&c, 4, 4);
    c.Hq = 4;
    c.Hkv = 2;
    c.causal = 1;
    check_useful(ctx, &c, 10, 0.0);
    /* Varlen: q lengths {3, 2}, k lengths {4, 1}; causal bottom-right:
     * sequence 0 p = i + 1 sees 2 + 3 + 4, sequence 1 p = i - 1 sees 0 + 1;
     * non-causal 3*4 + 2*1. Dense: B * max Sq * max Sk = 2 * 3 * 4. */
    static const int32_t cq[3] = {0, 3, 5}, ck[3] = {0, 4, 5};
    tcase_init(&c, 0, 0);
    c.B = 2;
    c.cu_q = cq;
    c.cu_k = ck;
    c.causal = 1;
    check_useful(ctx, &c, 10, 1.0 - 14.0 / 24.0);
    c.causal = 0;
    check_useful(ctx, &c, 14, 1.0 - 14.0 / 24.0);
    c.algo = XATTN_ALGO_SPLITKV;
    check_useful(ctx, &c, 14, 1.0 - 14.0 / 24.0);
}

/* Executed work counted by the CPU kernels, by hand: a causal square of 4 x 4
 * tiles. FLASH and SPLITKV compute the 10 tiles on and below the diagonal in
 * Q K^T; their P.V goes row by row over each row's own keys on the portable
 * path (1 + 2 + ... + S), by blocks of 4 rows over the block's keys on the
 * AVX-512 path (4 * (4 + 8 + ... + S)), and on the AVX2 path the 6 tiles
 * below the diagonal whole and in each of the 4 on it blocks of 6 rows over
 * the block's keys, the last T % 6 rows as one more block (pv_diag_cell).
 * NAIVE's blocks of 64 rows and tiles of 64 keys run the same 10 tiles in
 * QK^T, and its P.V each block's rows over the keys of the block's last row. */
static double pv_diag_cell(int64_t T, int64_t block)
{
    double n = 0;
    for (int64_t r = 0; r < T; r += block) {
        const int64_t e = r + block < T ? r + block : T;
        n += (double)((e - r) * e); /* row e - 1 sees keys 0 .. e - 1 of the cell */
    }
    return n;
}

static void test_executed_hand(xattn_ctx *ctx)
{
    tcase c;
    tcase_init(&c, 16, 16);
    xattn_record rec;
    xattn_run_info info;
    xattn_status st = run_case(ctx, &c, &rec, &info);
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    if (st)
        return;
    EXPECT(info.tile_q > 0 && info.tile_k > 0, "FLASH reports tiles %d x %d", info.tile_q,
           info.tile_k);
    EXPECT(rec.tile_q == info.tile_q && rec.tile_k == info.tile_k, "record tiles %d x %d",
           rec.tile_q, rec.tile_k);
    if (info.tile_q != info.tile_k || info.tile_q <= 0) {
        SKIP("executed hand case: tiles %d x %d are not square", info.tile_q, info.tile_k);
        return;
    }
    const int64_t T = info.tile_q, S = 4 * T;
    const double per = 2.0 * 8.0; /* 2 * D = 2 * Dv FLOPs a pair */
    tcase_init(&c, S, S);
    c.causal = 1;
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        c.algo = (xattn_algo)a;
        if (run_case(ctx, &c, &rec, &info) != XATTN_STATUS_OK) {
            EXPECT(0, "%s", xattn_last_error());
            continue;
        }
        const int simd = strcmp(rec.kernel, "portable") != 0;
        double qk = (double)(T * T * 10), pv;
        if (a == XATTN_ALGO_NAIVE) {
            EXPECT(rec.tile_q == 64 && rec.tile_k == 64, "naive blocks %d x %d", rec.tile_q,
                   rec.tile_k);
            const int64_t n = S / 64;
            qk = (double)(64 * 64 * n * (n + 1) / 2);
            pv = qk;
        } else {
            pv = !simd ? (double)(S * (S + 1) / 2)
                 : strcmp(rec.kernel, "avx2") == 0
                     ? 4.0 * pv_diag_cell(T, 6) + 6.0 * (double)(T * T)
                     : (double)(S * (S + 4) / 2);
        }
        EXPECT(rec.work_counted == 1, "%s: work_counted %d", xattn_algo_name(c.algo),
               rec.work_counted);
        EXPECT(rec.flops_executed == per * (qk + pv),
               "%s (%s) causal %lld: executed %.0f, expected %.0f", xattn_algo_name(c.algo),
               rec.kernel, (long long)S, rec.flops_executed, per * (qk + pv));
        EXPECT(rec.flops_useful == 2.0 * per * (double)(S * (S + 1) / 2), "useful %.0f",
               rec.flops_useful);
        EXPECT(rec.flops_dense == 2.0 * per * (double)(S * S), "dense %.0f", rec.flops_dense);
    }
}

/* One case against the brute force (useful, executed, dense) and the
 * orderings; 1 when it agrees. */
static int check_bruteforce(xattn_ctx *ctx, const tcase *c)
{
    char desc[256];
    describe(c, desc, sizeof desc);
    xattn_record rec;
    xattn_run_info info;
    xattn_status st = run_case(ctx, c, &rec, &info);
    if (st) {
        EXPECT(0, "%s: %s", desc, xattn_last_error());
        return 0;
    }
    const double per = 2.0 * (double)(c->D + c->Dv) * (double)c->Hq;
    const double useful = per * bf_useful(c);
    const double dense = per * (double)c->B * (double)tc_sq(c) * (double)tc_sk(c);
    const bf_work bw = bf_executed(c, &rec);
    const double exec = 2.0 * (double)c->D * bw.qk + 2.0 * (double)c->Dv * bw.pv;
    /* FLASH and SPLITKV bytes (f32, no LSE, no bias): Q rows that see a key,
     * the K/V rows their tiles loaded, every O row; SPLITKV adds its partials,
     * written and read back (docs/measurement.md, "Bytes"). */
    double bytes = rec.bytes_actual;
    if (rec.algo_chosen != XATTN_ALGO_NAIVE) {
        double rows_read = 0, rows_out = 0, real_rows = 0;
        for (int64_t b = 0; b < c->B; b++) {
            for (int64_t i = 0; i < tc_lq(c, b); i++) {
                int64_t lo, hi;
                bf_row(c, b, i, &lo, &hi);
                rows_read += hi > lo;
            }
            rows_out += (double)(c->cu_q ? tc_lq(c, b) : c->Sq);
            real_rows += (double)tc_lq(c, b);
        }
        bytes = 4.0 * ((rows_read * (double)c->D + rows_out * (double)c->Dv) * (double)c->Hq +
                       bw.kv * (double)(c->D + c->Dv));
        if (rec.algo_chosen == XATTN_ALGO_SPLITKV)
            bytes += 2.0 * rec.num_splits * real_rows * (double)c->Hq * (double)(c->Dv + 1) * 4.0;
    }
    int ok = rec.work_counted == 1 && rec.flops_useful == useful && rec.flops_dense == dense &&
             rec.flops_executed == exec && rec.flops_useful <= rec.flops_executed &&
             rec.flops_executed <= rec.flops_dense && rec.bytes_min <= rec.bytes_actual &&
             rec.bytes_min >= 0 && rec.bytes_actual == bytes;
    EXPECT(ok,
           "%s [%s]: useful %.0f (bf %.0f), executed %.0f (bf %.0f: qk %.0f pv %.0f pairs, "
           "tiles %dx%d, %d heads, counted %d), dense %.0f (bf %.0f), bytes min %.0f actual %.0f "
           "(bf %.0f, %.0f K/V rows)",
           desc, rec.kernel, rec.flops_useful, useful, rec.flops_executed, exec, bw.qk, bw.pv,
           rec.tile_q, rec.tile_k, rec.tile_heads, rec.work_counted, rec.flops_dense, dense,
           rec.bytes_min, rec.bytes_actual, bytes, bw.kv);
    return ok;
}

/* Lengths around the tile edges, every mask and alignment, against the brute force. */
static void test_flops_edges(xattn_ctx *ctx)
{
    static const int64_t lens[] = {1, 63, 64, 65, 129, 200};
    static const int64_t wins[][2] = {{-1, -1}, {0, 0}, {17, -1}, {-1, 70}, {64, 1}};
    const int nl = (int)(sizeof lens / sizeof lens[0]), nw = (int)(sizeof wins / sizeof wins[0]);
    int bad = 0;
    for (int a = 0; a < nl && bad < 5; a++)
        for (int b = 0; b < nl && bad < 5; b++)
            for (int m = 0; m < 4 * nw && bad < 5; m++) {
                tcase c;
                tcase_init(&c, lens[a], lens[b]);
                c.causal = m & 1;
                c.align = m & 2 ? XATTN_ALIGN_TOP_LEFT : XATTN_ALIGN_BOTTOM_RIGHT;
                c.wl = wins[m / 4][0];
                c.wr = wins[m / 4][1];
                c.algo = (xattn_algo)(XATTN_ALGO_NAIVE + (a + b + m) % 3);
                bad += !check_bruteforce(ctx, &c);
            }
}

/* Random shapes (batches, GQA, padded and packed lengths) against the brute force. */
static void test_flops_random(xattn_ctx *ctx)
{
    int bad = 0;
    for (int t = 0; t < 120 && bad < 5; t++) {
        tcase c;
        tcase_init(&c, 1 + (int64_t)(g_rng % 150), 1 + (int64_t)((g_rng >> 20) % 200));
        rnd();
        c.B = 1 + (int64_t)((g_rng >> 8) % 3);
        c.Hkv = 1 + (int64_t)((g_rng >> 12) % 2);
        c.Hq = c.Hkv * (1 + (int64_t)((g_rng >> 14) % 3));
        c.causal = (int)((g_rng >> 16) & 1);
        c.align = (g_rng >> 17) & 1 ? XATTN_ALIGN_TOP_LEFT : XATTN_ALIGN_BOTTOM_RIGHT;
        rnd();
        c.wl = (g_rng >> 18) % 3 == 0 ? (int64_t)((g_rng >> 20) % 40) : -1;
        c.wr = (g_rng >> 26) % 3 == 0 ? (int64_t)((g_rng >> 28) % 40) : -1;
        c.algo = (xattn_algo)(1 + (int)((g_rng >> 34) % 3));
        int32_t lq[3], lk[3], cq[4], ck[4];
        rnd();
        int mode = (int)((g_rng >> 40) % 3); /* 0 full, 1 padded, 2 varlen */
        if (mode == 1) {
            for (int b = 0; b < c.B; b++) {
                lq[b] = (int32_t)(rnd() < 0.3f ? (int64_t)((g_rng >> 20) % (uint64_t)(c.Sq + 1))
                                               : c.Sq);
                lk[b] = (int32_t)(rnd() < 0.3f ? (int64_t)((g_rng >> 20) % (uint64_t)(c.Sk + 1))
                                               : c.Sk);
            }
            c.sl_q = lq;
            c.sl_k = lk;
        } else if (mode == 2) {
            cq[0] = ck[0] = 0;
            for (int b = 0; b < c.B; b++) {
                rnd();
                cq[b + 1] = cq[b] + (int32_t)((g_rng >> 20) % 130);
                ck[b + 1] = ck[b] + (int32_t)((g_rng >> 40) % 170);
            }
            c.cu_q = cq;
            c.cu_k = ck;
        }
        bad += !check_bruteforce(ctx, &c);
    }
}

/* The kernel paths that count their work apart, every algorithm: decode
 * reading K/V in place (D and Dv multiples of 16, up to 16 rows a KV head) or
 * converting them (D 24), with masks, windows, padded and packed lengths and
 * split counts; and GQA groups of 3 and 5, whose query tiles put a head's last
 * positions and the next head's first ones in one block of 4 rows, under
 * narrow windows (the block's span then holds keys of no row in it). */
static void test_flops_paths(xattn_ctx *ctx)
{
    static const int64_t sqs[] = {1, 2, 3, 4}, sks[] = {1, 17, 64, 65, 300};
    static const int64_t wins[][2] = {{-1, -1}, {0, 0}, {5, -1}, {3, 2}};
    static const int32_t lq[3] = {4, 0, 2}, lk[3] = {300, 7, 0}, cq[4] = {0, 3, 4, 4},
                         ck[4] = {0, 65, 65, 300};
    int bad = 0;
    for (int s = 0; s < 4 && bad < 5; s++)
        for (int k = 0; k < 5 && bad < 5; k++)
            for (int m = 0; m < 8 && bad < 5; m++) {
                tcase c;
                tcase_init(&c, sqs[s], sks[k]);
                c.Hq = 8;
                c.Hkv = 2;
                c.D = (m + k) % 4 == 3 ? 24 : 16;
                c.Dv = 32;
                c.causal = m & 1;
                c.wl = wins[m / 2][0];
                c.wr = wins[m / 2][1];
                c.algo = (xattn_algo)(XATTN_ALGO_NAIVE + (s + k + m) % 3);
                bad += !check_bruteforce(ctx, &c);
            }
    /* Padded and packed decode batches. */
    for (int v = 0; v < 4 && bad < 5; v++) {
        tcase c;
        tcase_init(&c, 4, 300);
        c.B = 3;
        c.Hq = 8;
        c.Hkv = 2;
        c.D = c.Dv = 32;
        c.causal = v & 1;
        if (v & 2) {
            c.cu_q = cq;
            c.cu_k = ck;
        } else {
            c.sl_q = lq;
            c.sl_k = lk;
        }
        for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
            c.algo = (xattn_algo)a;
            bad += !check_bruteforce(ctx, &c);
        }
    }
    /* Heads across a block of 4 rows, narrow windows; prefill and decode. */
    static const int64_t grp[] = {3, 5};
    static const int64_t gs[][2] = {{7, 100}, {2, 70}, {25, 40}};
    for (int g = 0; g < 2 && bad < 5; g++)
        for (int q = 0; q < 3 && bad < 5; q++)
            for (int w = 0; w < 4 && bad < 5; w++) {
                tcase c;
                tcase_init(&c, gs[q][0], gs[q][1]);
                c.Hkv = 2;
                c.Hq = 2 * grp[g];
                c.D = c.Dv = 16;
                c.wl = w < 2 ? w : 1;
                c.wr = w < 2 ? 0 : 1;
                c.causal = w == 3;
                for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
                    c.algo = (xattn_algo)a;
                    bad += !check_bruteforce(ctx, &c);
                }
            }
}

/* The executed-work checks on each SIMD path this CPU has (the P.V of the
 * portable path counts differently from the vector paths'). */
static void test_flops_simd(xattn_ctx *ctx)
{
    static const char *const names[] = {"", "portable", "avx2", "avx512"};
    for (int s = 1; s <= 3; s++) {
        xattn_status st = xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, s);
        if (st == XATTN_STATUS_UNSUPPORTED) {
            SKIP("executed work on the %s path: %s", names[s], xattn_last_error());
            continue;
        }
        EXPECT_OK(st);
        const int failed = g_failed;
        test_executed_hand(ctx);
        test_flops_edges(ctx);
        test_flops_random(ctx);
        test_flops_paths(ctx);
        printf("  executed work on the %s path: %s\n", names[s],
               g_failed == failed ? "as counted by the brute force" : "FAILED");
    }
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, 0));
}

/* ---- bytes: hand-computed ----------------------------------------------------- */

static void test_bytes_hand(xattn_ctx *ctx)
{
    tcase c;
    xattn_record rec;
    /* B1 Hq2 Hkv1 Sq=Sk=4 D8 Dv4 f32: Q 4*2*8*4 = 256, K+V 4*1*12*4 = 192,
     * O 4*2*4*4 = 128 -> 576; LSE adds 4*2*4 = 32. */
    tcase_init(&c, 4, 4);
    c.Hq = 2;
    c.Dv = 4;
    c.algo = XATTN_ALGO_NAIVE;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK) {
        EXPECT(rec.bytes_min == 576, "bytes_min %.0f, expected 576", rec.bytes_min);
        /* + the score matrix 2*4*4*4 = 128 bytes, written, read, written, read. */
        EXPECT(rec.bytes_actual == 576 + 4 * 128, "naive bytes_actual %.0f, expected 1088",
               rec.bytes_actual);
    } else {
        EXPECT(0, "%s", xattn_last_error());
    }
    c.lse = 1;
    c.algo = XATTN_ALGO_FLASH;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK) {
        EXPECT(rec.bytes_min == 608, "bytes_min with LSE %.0f, expected 608", rec.bytes_min);
        /* FLASH: K/V tiles read once per query tile and K/V load. The CPU packs
         * the group's 2 heads into one tile (tile_heads 2): 4 x 12 x 4 = 192; a
         * backend without packing reads them per head: 2 x 192 = 384. Plus Q
         * 256, O 128, LSE 32. */
        const double kv = rec.tile_heads >= 2 ? 192 : 384;
        EXPECT(rec.bytes_actual == 256 + kv + 128 + 32,
               "flash bytes_actual %.0f, expected %.0f (tile_heads %d)", rec.bytes_actual,
               256 + kv + 128 + 32, rec.tile_heads);
    } else {
        EXPECT(0, "%s", xattn_last_error());
    }
    /* f16 q/o, bf16 k/v: every term halves. */
    c.lse = 0;
    c.qdt = XATTN_DTYPE_F16;
    c.kvdt = XATTN_DTYPE_BF16;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK)
        EXPECT(rec.bytes_min == 288, "f16/bf16 bytes_min %.0f, expected 288", rec.bytes_min);
    else
        EXPECT(0, "%s", xattn_last_error());
    /* q8_0 K/V, D = Dv = 32: 34 bytes per 32 values, the blocks' scales included. Q 4*2*32*4
     * = 1024, K+V 4 tokens x 2 blocks x 34 = 272, O 1024. */
    c.qdt = XATTN_DTYPE_F32;
    c.kvdt = XATTN_DTYPE_Q8_0;
    c.D = c.Dv = 32;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK)
        EXPECT(rec.bytes_min == 2320, "q8_0 bytes_min %.0f, expected 2320", rec.bytes_min);
    else
        EXPECT(0, "%s", xattn_last_error());
    /* Causal top-left Sq 2, Sk 5: only keys 0..1 are visible to any row:
     * Q 2*8*4 = 64, K+V 2*16*4 = 128, O 2*8*4 = 64. */
    tcase_init(&c, 2, 5);
    c.causal = 1;
    c.align = XATTN_ALIGN_TOP_LEFT;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK)
        EXPECT(rec.bytes_min == 256, "causal top-left bytes_min %.0f, expected 256", rec.bytes_min);
    else
        EXPECT(0, "%s", xattn_last_error());
    /* Padded rows: a sequence of length 0 still has its O rows written (zeros). */
    static const int32_t lq[2] = {4, 0};
    tcase_init(&c, 4, 4);
    c.B = 2;
    c.sl_q = lq;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK)
        /* Q 4*8*4 = 128, K+V of sequence 0: 4*16*4 = 256, O 8 rows * 32 = 256. */
        EXPECT(rec.bytes_min == 640, "padded bytes_min %.0f, expected 640", rec.bytes_min);
    else
        EXPECT(0, "%s", xattn_last_error());
}

/* Sinks, an append and a paged cache in bytes_min: the case of
 * test_bytes_hand (576 bytes) plus what each one moves. */
static xattn_status bytes_extra_run(xattn_ctx *ctx, trun *r, xattn_record *rec)
{
    xattn_profiler_enable(ctx, 1);
    xattn_status st = xattn_attention(ctx, &r->d, NULL);
    size_t n = 0;
    if (!st)
        st = xattn_profiler_count(ctx, &n);
    if (!st && n == 0)
        st = XATTN_STATUS_INTERNAL;
    return st ? st : xattn_profiler_get(ctx, n - 1, rec);
}

static void test_bytes_serving(xattn_ctx *ctx)
{
    tcase c;
    tcase_init(&c, 4, 4);
    c.Hq = 2;
    c.Dv = 4;
    c.algo = XATTN_ALGO_NAIVE;
    trun r;
    xattn_record rec;
    memset(&rec, 0, sizeof rec);
    xattn_buffer *sinks = NULL, *kn = NULL, *vn = NULL, *kp = NULL, *vp = NULL;
    if (trun_setup(ctx, &c, &r) || xattn_buffer_alloc(ctx, 8, &sinks) ||
        xattn_buffer_alloc(ctx, 32, &kn) || xattn_buffer_alloc(ctx, 16, &vn) ||
        xattn_buffer_alloc(ctx, 128, &kp) || xattn_buffer_alloc(ctx, 64, &vp) ||
        fill(sinks, 2, XATTN_DTYPE_F32) || fill(kn, 8, XATTN_DTYPE_F32) ||
        fill(vn, 4, XATTN_DTYPE_F32) || fill(kp, 32, XATTN_DTYPE_F32) ||
        fill(vp, 16, XATTN_DTYPE_F32)) {
        EXPECT(0, "serving bytes setup: %s", xattn_last_error());
        goto out;
    }
    /* Sinks: one f32 per query head, 2 * 4 = 8 bytes. */
    r.d.sinks = xattn_tensor_bshd(sinks, 0, XATTN_DTYPE_F32, 1, 1, 2, 1);
    if (bytes_extra_run(ctx, &r, &rec) == XATTN_STATUS_OK)
        EXPECT(rec.bytes_min == 576 + 8 && rec.has_sinks, "sinks bytes_min %.0f, expected 584",
               rec.bytes_min);
    else
        EXPECT(0, "sinks: %s", xattn_last_error());
    memset(&r.d.sinks, 0, sizeof r.d.sinks);
    /* An append of 1 token to a cache of 3: the same 4 keys are read, and
     * k_new/v_new (1 x (8 + 4) x 4 = 48 bytes) are read and written: + 96. */
    static const int32_t cache3[1] = {3}, len4[1] = {4};
    r.d.seqlens_k = cache3;
    r.d.k_new = xattn_tensor_bshd(kn, 0, XATTN_DTYPE_F32, 1, 1, 1, 8);
    r.d.v_new = xattn_tensor_bshd(vn, 0, XATTN_DTYPE_F32, 1, 1, 1, 4);
    if (bytes_extra_run(ctx, &r, &rec) == XATTN_STATUS_OK)
        EXPECT(rec.bytes_min == 576 + 96 && rec.append_tokens == 1 && rec.append_bytes == 48,
               "append bytes_min %.0f (expected 672), append_bytes %llu (expected 48)",
               rec.bytes_min, (unsigned long long)rec.append_bytes);
    else
        EXPECT(0, "append: %s", xattn_last_error());
    memset(&r.d.k_new, 0, sizeof r.d.k_new);
    memset(&r.d.v_new, 0, sizeof r.d.v_new);
    /* A paged cache of 2-token pages, table {1, 0}: + 2 entries of 4 bytes. */
    static const int32_t table[2] = {1, 0};
    r.d.seqlens_k = len4;
    r.d.block_table = table;
    r.d.max_pages_per_seq = 2;
    r.d.k = xattn_tensor_bshd(kp, 0, XATTN_DTYPE_F32, 2, 2, 1, 8);
    r.d.v = xattn_tensor_bshd(vp, 0, XATTN_DTYPE_F32, 2, 2, 1, 4);
    xattn_status st = bytes_extra_run(ctx, &r, &rec);
    EXPECT(st == XATTN_STATUS_OK && rec.bytes_min == 576 + 8 && rec.page_size == 2,
           "paged: %s; bytes_min %.0f, expected 584 (page size %lld)",
           st == XATTN_STATUS_OK ? "ok" : xattn_last_error(), rec.bytes_min,
           (long long)rec.page_size);
out:
    xattn_buffer_free(sinks);
    xattn_buffer_free(kn);
    xattn_buffer_free(vn);
    xattn_buffer_free(kp);
    xattn_buffer_free(vp);
    trun_free(&r);
}

/* ---- workspace -------------------------------------------------------------- */

static void test_workspace(xattn_ctx *ctx)
{
    tcase c;
    xattn_record rec;
    uint64_t flash_ws[2] = {0, 0};
    const int64_t sq[2] = {64, 256};
    for (int k = 0; k < 2; k++) {
        tcase_init(&c, sq[k], 192);
        c.B = 2;
        c.Hq = 4;
        c.Hkv = 2;
        c.algo = XATTN_ALGO_NAIVE;
        xattn_mem_stats before, after;
        xattn_ctx_mem_stats(ctx, &before);
        if (run_case(ctx, &c, &rec, NULL) != XATTN_STATUS_OK) {
            EXPECT(0, "%s", xattn_last_error());
            continue;
        }
        xattn_ctx_mem_stats(ctx, &after);
        const uint64_t want = (uint64_t)(2 * 4 * sq[k] * 192 * 4);
        EXPECT(rec.workspace_bytes == want, "NAIVE Sq %lld: workspace %llu, expected %llu",
               (long long)sq[k], (unsigned long long)rec.workspace_bytes, (unsigned long long)want);
        EXPECT(rec.mem_peak_bytes >= before.current_bytes + want,
               "NAIVE peak %llu below current %llu + workspace %llu",
               (unsigned long long)rec.mem_peak_bytes, (unsigned long long)before.current_bytes,
               (unsigned long long)want);
        c.algo = XATTN_ALGO_FLASH;
        if (run_case(ctx, &c, &rec, NULL) != XATTN_STATUS_OK) {
            EXPECT(0, "%s", xattn_last_error());
            continue;
        }
        flash_ws[k] = rec.workspace_bytes;
        (void)after;
    }
    EXPECT(flash_ws[0] > 0 && flash_ws[0] == flash_ws[1],
           "FLASH workspace %llu at Sq 64 vs %llu at Sq 256 (must not grow with Sq*Sk)",
           (unsigned long long)flash_ws[0], (unsigned long long)flash_ws[1]);
}

/* ---- timers -------------------------------------------------------------------- */

static void test_timers(xattn_ctx *ctx)
{
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    const double res_ms = (double)res.tv_sec * 1e3 + (double)res.tv_nsec * 1e-6 + 1e-6;
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        tcase c;
        tcase_init(&c, a == XATTN_ALGO_SPLITKV ? 4 : 192, 1024);
        c.Hq = c.Hkv = 4;
        c.D = c.Dv = 64;
        c.algo = (xattn_algo)a;
        trun r;
        if (trun_setup(ctx, &c, &r) != XATTN_STATUS_OK) {
            EXPECT(0, "%s", xattn_last_error());
            continue;
        }
        xattn_profiler_enable(ctx, 1);
        xattn_profiler_reset(ctx);
        xattn_run_info info;
        double t0 = wall_ms();
        xattn_status st = xattn_attention(ctx, &r.d, &info);
        double t1 = wall_ms();
        xattn_record rec;
        EXPECT_OK(st);
        EXPECT_OK(xattn_profiler_get(ctx, 0, &rec));
        const double wall = t1 - t0;
        const char *an = xattn_algo_name(c.algo);
        EXPECT(info.device_ms > 0 && info.device_ms <= wall + res_ms,
               "%s: device %.6f ms, wall %.6f ms", an, info.device_ms, wall);
        EXPECT(rec.device_ms == info.device_ms, "%s: record %.6f vs info %.6f", an, rec.device_ms,
               info.device_ms);
        EXPECT(rec.host_return_us - rec.host_submit_us <= wall * 1e3 + res_ms * 1e3,
               "%s: host span %.3f us, wall %.3f us", an, rec.host_return_us - rec.host_submit_us,
               wall * 1e3);
        EXPECT(rec.host_submit_us <= rec.device_start_us &&
                   rec.device_start_us <= rec.device_end_us &&
                   rec.device_end_us <= rec.host_return_us,
               "%s: submit %.3f, device %.3f..%.3f, return %.3f", an, rec.host_submit_us,
               rec.device_start_us, rec.device_end_us, rec.host_return_us);
        EXPECT(fabs((rec.device_end_us - rec.device_start_us) - rec.device_ms * 1e3) < 1e-3,
               "%s: device span %.3f us vs device_ms %.6f", an,
               rec.device_end_us - rec.device_start_us, rec.device_ms);
        double sum = 0;
        for (int i = 0; i < rec.num_phases; i++)
            sum += rec.phase_ms[i];
        EXPECT(fabs(sum - rec.device_ms) <= 1e-9 * (1 + rec.device_ms),
               "%s: phases sum to %.6f ms, device %.6f ms", an, sum, rec.device_ms);
        const int want_phases = a == XATTN_ALGO_NAIVE ? 3 : a == XATTN_ALGO_FLASH ? 1 : 2;
        EXPECT(rec.num_phases == want_phases, "%s: %d phases", an, rec.num_phases);
        if (a == XATTN_ALGO_NAIVE && rec.num_phases == 3)
            EXPECT(!strcmp(rec.phase_names[0], "qk") && !strcmp(rec.phase_names[1], "softmax") &&
                       !strcmp(rec.phase_names[2], "pv") &&
                       rec.phase_start_us[1] == rec.phase_start_us[0] + rec.phase_ms[0] * 1e3,
                   "naive phases '%s' '%s' '%s'", rec.phase_names[0], rec.phase_names[1],
                   rec.phase_names[2]);
        if (a == XATTN_ALGO_SPLITKV)
            EXPECT(rec.num_splits == info.num_splits && rec.num_splits >= 1, "splits %d vs %d",
                   rec.num_splits, info.num_splits);
        EXPECT(rec.gflops_useful > 0 && rec.gflops_executed >= rec.gflops_useful &&
                   rec.gbytes_per_s > 0,
               "%s: derived %.3f / %.3f GFLOP/s, %.3f GB/s", an, rec.gflops_useful,
               rec.gflops_executed, rec.gbytes_per_s);
        EXPECT(rec.device_mem_total > 0, "%s: device memory total unknown", an);
        trun_free(&r);
    }
}

/* ---- records: sequence, reset, ranges, no-op ---------------------------------- */

static void test_records(xattn_ctx *ctx)
{
    tcase c;
    tcase_init(&c, 16, 16);
    trun r;
    if (trun_setup(ctx, &c, &r) != XATTN_STATUS_OK) {
        EXPECT(0, "%s", xattn_last_error());
        return;
    }
    EXPECT(xattn_profiler_enable(ctx, 2) == XATTN_STATUS_INVALID_ARGUMENT, "enable(2)");
    EXPECT(xattn_profiler_enable(NULL, 1) == XATTN_STATUS_INVALID_ARGUMENT, "enable(NULL)");
    EXPECT_OK(xattn_profiler_enable(ctx, 0));
    EXPECT_OK(xattn_profiler_reset(ctx));
    size_t n = 99;
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL));
    EXPECT_OK(xattn_profiler_count(ctx, &n));
    EXPECT(n == 0, "%zu records with profiling off", n);

    EXPECT_OK(xattn_profiler_enable(ctx, 1));
    EXPECT(xattn_range_pop(ctx) == XATTN_STATUS_INVALID_ARGUMENT, "pop with nothing open");
    EXPECT_OK(xattn_range_push(ctx, "outer"));
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL)); /* info NULL: still recorded with times */
    EXPECT_OK(xattn_range_push(ctx, "inner \"quoted\"\n\xff"));
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL));
    EXPECT_OK(xattn_range_pop(ctx));
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL));
    EXPECT_OK(xattn_range_pop(ctx));
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL));
    EXPECT_OK(xattn_profiler_count(ctx, &n));
    EXPECT(n == 4, "%zu records, expected 4", n);
    static const char *want[4] = {"outer", "inner \"quoted\"\n\xff", "outer", ""};
    uint64_t prev = 0;
    for (size_t i = 0; i < n && i < 4; i++) {
        xattn_record rec;
        EXPECT_OK(xattn_profiler_get(ctx, i, &rec));
        EXPECT(!strcmp(rec.range, want[i]), "record %zu range '%s', expected '%s'", i, rec.range,
               want[i]);
        EXPECT(i == 0 || rec.seq > prev, "seq %llu after %llu", (unsigned long long)rec.seq,
               (unsigned long long)prev);
        EXPECT(rec.device_ms > 0, "record %zu without a device time", i);
        EXPECT(rec.struct_size == sizeof rec, "struct_size %zu", rec.struct_size);
        prev = rec.seq;
    }
    xattn_record bad;
    EXPECT(xattn_profiler_get(ctx, n, &bad) == XATTN_STATUS_INVALID_ARGUMENT, "get past the end");

    /* A no-op call (no query rows) is recorded with no work. */
    xattn_attn_desc d0 = r.d;
    d0.q.shape[1] = 0;
    d0.o.shape[1] = 0;
    EXPECT_OK(xattn_attention(ctx, &d0, NULL));
    EXPECT_OK(xattn_profiler_count(ctx, &n));
    if (n == 5) {
        xattn_record rec;
        EXPECT_OK(xattn_profiler_get(ctx, 4, &rec));
        EXPECT(rec.sq == 0 && rec.flops_dense == 0 && rec.flops_useful == 0 && rec.device_ms == 0 &&
                   rec.seq == prev + 1,
               "no-op record: sq %lld dense %g seq %llu", (long long)rec.sq, rec.flops_dense,
               (unsigned long long)rec.seq);
    } else {
        EXPECT(0, "%zu records after a no-op call, expected 5", n);
    }

    /* Reset: records go, sequence numbers go on, an open range survives. */
    EXPECT_OK(xattn_range_push(ctx, "kept"));
    EXPECT_OK(xattn_profiler_reset(ctx));
    EXPECT_OK(xattn_profiler_count(ctx, &n));
    EXPECT(n == 0, "%zu records after reset", n);
    EXPECT_OK(xattn_attention(ctx, &r.d, NULL));
    xattn_record rec;
    EXPECT_OK(xattn_profiler_get(ctx, 0, &rec));
    EXPECT(rec.seq == prev + 2, "seq %llu after reset, expected %llu", (unsigned long long)rec.seq,
           (unsigned long long)(prev + 2));
    EXPECT(!strcmp(rec.range, "kept"), "range '%s' after reset", rec.range);
    EXPECT_OK(xattn_range_pop(ctx));
    EXPECT(xattn_range_pop(ctx) == XATTN_STATUS_INVALID_ARGUMENT, "pop after all closed");
    EXPECT(rec.has_sinks == 0, "has_sinks %d without sinks", rec.has_sinks);

    /* A call with attention sinks says so. */
    const int64_t hq = r.d.q.shape[2];
    xattn_buffer *sb = NULL;
    if (xattn_buffer_alloc(ctx, (size_t)hq * sizeof(float), &sb) == XATTN_STATUS_OK) {
        float sv[64] = {0};
        EXPECT_OK(xattn_buffer_write(sb, 0, sv, (size_t)hq * sizeof(float)));
        xattn_attn_desc ds = r.d;
        xattn_tensor t = {sb, 0, XATTN_DTYPE_F32, {1, 1, hq, 1}, {hq, hq, 1, 1}};
        ds.sinks = t;
        EXPECT_OK(xattn_attention(ctx, &ds, NULL));
        EXPECT_OK(xattn_profiler_get(ctx, 1, &rec));
        EXPECT(rec.has_sinks == 1, "has_sinks %d with sinks", rec.has_sinks);
        xattn_buffer_free(sb);
    } else {
        EXPECT(0, "sinks buffer: %s", xattn_last_error());
    }
    trun_free(&r);
}

/* ---- exports ------------------------------------------------------------------ */

/* A context with a few records of every algorithm and nested ranges. */
static xattn_status make_records(xattn_ctx *ctx)
{
    xattn_profiler_enable(ctx, 1);
    xattn_profiler_reset(ctx);
    tcase c;
    tcase_init(&c, 96, 96);
    c.Hq = 2;
    c.causal = 1;
    xattn_status st = xattn_range_push(ctx, "app \"step\"\t\xc3\xa9\xff");
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV && !st; a++) {
        c.algo = (xattn_algo)a;
        c.lse = a == XATTN_ALGO_FLASH;
        st = xattn_range_push(ctx, xattn_algo_name(c.algo));
        xattn_record rec;
        if (!st)
            st = run_case(ctx, &c, &rec, NULL);
        if (!st)
            st = xattn_range_pop(ctx);
    }
    if (!st)
        st = xattn_range_pop(ctx);
    return st;
}

static char *path_in_tmp(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", g_tmp, name);
    return buf;
}

static void test_csv(xattn_ctx *ctx)
{
    char path[512];
    size_t n = 0;
    xattn_profiler_count(ctx, &n);
    EXPECT_OK(
        xattn_profiler_export(ctx, XATTN_EXPORT_CSV, path_in_tmp("r.csv", path, sizeof path)));
    FILE *f = fopen(path, "r");
    EXPECT(f != NULL, "cannot read %s", path);
    if (!f)
        return;
    /* Count fields outside quotes; quoted fields may hold commas (not newlines here). */
    char line[16384];
    int rows = 0, header_fields = 0, ok = 1;
    while (fgets(line, sizeof line, f)) {
        int fields = 1, q = 0;
        for (char *p = line; *p && *p != '\n'; p++) {
            if (*p == '"')
                q = !q;
            else if (*p == ',' && !q)
                fields++;
        }
        if (rows == 0) {
            header_fields = fields;
            EXPECT(!strncmp(line, "seq,backend,device,device_name,", 31), "header '%.60s'", line);
            EXPECT(strstr(line, ",flops_useful,") && strstr(line, ",pct_bw_ceiling"),
                   "header misses fields");
        } else if (fields != header_fields) {
            ok = 0;
            printf("  row %d has %d fields, header %d\n", rows, fields, header_fields);
        }
        rows++;
    }
    fclose(f);
    EXPECT(ok, "CSV rows with a different field count");
    EXPECT(rows == (int)n + 1, "%d lines for %zu records", rows, n);
    EXPECT(xattn_profiler_export(ctx, XATTN_EXPORT_CSV, "/nonexistent-dir/x.csv") ==
               XATTN_STATUS_IO,
           "export into a missing folder");
    EXPECT(xattn_profiler_export(ctx, (xattn_export_format)7, path) ==
               XATTN_STATUS_INVALID_ARGUMENT,
           "bad format");
}

#ifdef XATTN_TEST_HAVE_JANSSON
static int jnum_eq(json_t *o, const char *key, double want)
{
    json_t *v = json_object_get(o, key);
    if (!isfinite(want))
        return json_is_null(v);
    return json_is_number(v) && json_number_value(v) == want;
}
static int jint_eq(json_t *o, const char *key, long long want)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) == want;
}
static int jstr_eq(json_t *o, const char *key, const char *want)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) && !strcmp(json_string_value(v), want);
}
static int jbool_eq(json_t *o, const char *key, int want)
{
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) && json_is_true(v) == (want != 0);
}
#endif

static void test_json(xattn_ctx *ctx)
{
    char path[512];
    EXPECT_OK(
        xattn_profiler_export(ctx, XATTN_EXPORT_JSON, path_in_tmp("r.json", path, sizeof path)));
#ifndef XATTN_TEST_HAVE_JANSSON
    SKIP("JSON export load-back: jansson was not found when the tests were configured");
#else
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    EXPECT(root != NULL, "JSON export does not parse: %s (line %d)", err.text, err.line);
    if (!root)
        return;
    EXPECT(jstr_eq(root, "schema", "xattn.records/1"), "schema");
    json_t *ctxo = json_object_get(root, "context");
    EXPECT(json_is_object(ctxo) && jstr_eq(ctxo, "backend", "cpu"), "context");
    json_t *recs = json_object_get(root, "records");
    size_t n = 0;
    xattn_profiler_count(ctx, &n);
    EXPECT(json_is_array(recs) && json_array_size(recs) == n, "%zu records in JSON, %zu held",
           json_is_array(recs) ? json_array_size(recs) : 0, n);
    for (size_t i = 0; json_is_array(recs) && i < n && i < json_array_size(recs); i++) {
        json_t *o = json_array_get(recs, i);
        xattn_record r;
        xattn_profiler_get(ctx, i, &r);
        int ok = 1;
#define F(cond)                                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ok = 0;                                                                                \
            printf("  record %zu: field check failed: %s\n", i, #cond);                            \
        }                                                                                          \
    } while (0)
        F(jint_eq(o, "seq", (long long)r.seq));
        F(jstr_eq(o, "backend", xattn_backend_name(r.backend)));
        F(jint_eq(o, "device", r.device));
        F(jstr_eq(o, "device_name", r.device_name));
        F(jstr_eq(o, "algo_requested", xattn_algo_name(r.algo_requested)));
        F(jstr_eq(o, "algo_chosen", xattn_algo_name(r.algo_chosen)));
        F(jstr_eq(o, "reason", r.reason));
        F(jstr_eq(o, "q_dtype", xattn_dtype_name(r.q_dtype)));
        F(jstr_eq(o, "kv_dtype", xattn_dtype_name(r.kv_dtype)));
        F(jint_eq(o, "batch", r.batch));
        F(jint_eq(o, "heads", r.heads));
        F(jint_eq(o, "kv_heads", r.kv_heads));
        F(jint_eq(o, "sq", r.sq));
        F(jint_eq(o, "sk", r.sk));
        F(jint_eq(o, "head_dim", r.head_dim));
        F(jint_eq(o, "head_dim_v", r.head_dim_v));
        F(jbool_eq(o, "causal", r.causal));
        F(jstr_eq(o, "align", r.align == XATTN_ALIGN_TOP_LEFT ? "top_left" : "bottom_right"));
        F(jint_eq(o, "window_left", r.window_left));
        F(jint_eq(o, "window_right", r.window_right));
        F(jnum_eq(o, "scale", (double)r.scale));
        F(jnum_eq(o, "softcap", (double)r.softcap));
        F(jbool_eq(o, "has_bias", r.has_bias));
        F(jbool_eq(o, "has_alibi", r.has_alibi));
        F(jbool_eq(o, "has_lse", r.has_lse));
        F(jbool_eq(o, "varlen", r.varlen));
        F(jbool_eq(o, "padded", r.padded));
        F(jint_eq(o, "num_splits", r.num_splits));
        F(jint_eq(o, "tile_q", r.tile_q));
        F(jint_eq(o, "tile_k", r.tile_k));
        F(jnum_eq(o, "host_submit_us", r.host_submit_us));
        F(jnum_eq(o, "host_return_us", r.host_return_us));
        F(jnum_eq(o, "device_start_us", r.device_start_us));
        F(jnum_eq(o, "device_end_us", r.device_end_us));
        F(jnum_eq(o, "device_ms", r.device_ms));
        F(jnum_eq(o, "build_ms", r.build_ms));
        F(jint_eq(o, "workspace_bytes", (long long)r.workspace_bytes));
        F(jint_eq(o, "mem_current_bytes", (long long)r.mem_current_bytes));
        F(jint_eq(o, "mem_peak_bytes", (long long)r.mem_peak_bytes));
        F(jint_eq(o, "device_mem_total", (long long)r.device_mem_total));
        F(jint_eq(o, "device_mem_free", (long long)r.device_mem_free));
        F(jnum_eq(o, "flops_dense", r.flops_dense));
        F(jnum_eq(o, "flops_useful", r.flops_useful));
        F(jnum_eq(o, "flops_executed", r.flops_executed));
        F(jnum_eq(o, "bytes_min", r.bytes_min));
        F(jnum_eq(o, "bytes_actual", r.bytes_actual));
        F(jnum_eq(o, "gflops_useful", r.gflops_useful));
        F(jnum_eq(o, "gflops_executed", r.gflops_executed));
        F(jnum_eq(o, "gbytes_per_s", r.gbytes_per_s));
        F(jnum_eq(o, "padding_waste", r.padding_waste));
        F(jnum_eq(o, "pct_fma_ceiling", r.pct_fma_ceiling));
        F(jnum_eq(o, "pct_bw_ceiling", r.pct_bw_ceiling));
        json_t *ph = json_object_get(o, "phases");
        F(json_is_array(ph) && (int)json_array_size(ph) == r.num_phases);
        for (int k = 0; json_is_array(ph) && k < r.num_phases && k < (int)json_array_size(ph);
             k++) {
            json_t *p = json_array_get(ph, (size_t)k);
            F(jstr_eq(p, "name", r.phase_names[k]));
            F(jnum_eq(p, "ms", r.phase_ms[k]));
            F(jnum_eq(p, "start_us", r.phase_start_us[k]));
        }
        /* Range names are valid UTF-8 in JSON: an invalid byte becomes U+FFFD. */
        json_t *rg = json_object_get(o, "range");
        F(json_is_string(rg));
        if (json_is_string(rg) && strchr(r.range, '\xff') == NULL)
            F(!strcmp(json_string_value(rg), r.range));
#undef F
        EXPECT(ok, "JSON record %zu does not match the struct", i);
    }
    json_t *ranges = json_object_get(root, "ranges");
    EXPECT(json_is_array(ranges) && json_array_size(ranges) == 4, "%zu ranges in JSON",
           json_is_array(ranges) ? json_array_size(ranges) : 0);
    if (json_is_array(ranges) && json_array_size(ranges) == 4) {
        json_t *outer = json_array_get(ranges, 0);
        EXPECT(jstr_eq(outer, "name", "app \"step\"\t\xc3\xa9\xef\xbf\xbd") &&
                   jint_eq(outer, "depth", 0) && jbool_eq(outer, "open", 0),
               "outer range '%s'", json_string_value(json_object_get(outer, "name")));
        EXPECT(jstr_eq(json_array_get(ranges, 1), "name", "naive") &&
                   jint_eq(json_array_get(ranges, 1), "depth", 1),
               "inner range");
    }
    json_decref(root);
#endif
}

static void test_trace(xattn_ctx *ctx)
{
    char path[512];
    EXPECT_OK(
        xattn_profiler_export(ctx, XATTN_EXPORT_TRACE, path_in_tmp("t.json", path, sizeof path)));
#ifndef XATTN_TEST_HAVE_JANSSON
    SKIP("trace parse: jansson was not found when the tests were configured");
#else
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    EXPECT(root != NULL, "trace does not parse: %s (line %d)", err.text, err.line);
    if (!root)
        return;
    json_t *ev = json_object_get(root, "traceEvents");
    EXPECT(json_is_array(ev) && json_array_size(ev) > 0, "traceEvents");
    size_t n = json_is_array(ev) ? json_array_size(ev) : 0;
    int fields_ok = 1, counters = 0, ranges = 0, phases = 0, nested = 1, calls = 0, procs = 0;
    /* The device slices on the queue track, to check that phases nest inside. */
    double slice_s[64], slice_e[64];
    int nslices = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ev, i);
        json_t *ph = json_object_get(e, "ph");
        if (!json_is_string(ph) || !json_is_number(json_object_get(e, "ts")) ||
            !json_is_integer(json_object_get(e, "pid")) ||
            !json_is_integer(json_object_get(e, "tid")) ||
            !json_is_string(json_object_get(e, "name"))) {
            fields_ok = 0;
            continue;
        }
        const char *p = json_string_value(ph), *cat = json_string_value(json_object_get(e, "cat"));
        double ts = json_number_value(json_object_get(e, "ts"));
        double dur = json_number_value(json_object_get(e, "dur"));
        if (!strcmp(p, "C")) {
            json_t *args = json_object_get(e, "args");
            counters += json_is_integer(json_object_get(args, "current_bytes")) &&
                        json_is_integer(json_object_get(args, "peak_bytes"));
        } else if (!strcmp(p, "M")) {
            procs += !strcmp(json_string_value(json_object_get(e, "name")), "process_name");
        } else if (!strcmp(p, "X")) {
            if (!json_is_number(json_object_get(e, "dur")))
                fields_ok = 0;
            if (cat && !strcmp(cat, "range"))
                ranges += json_integer_value(json_object_get(e, "tid")) == 1;
            if (cat && !strcmp(cat, "api"))
                calls++;
            if (cat && !strcmp(cat, "attention") && nslices < 64) {
                slice_s[nslices] = ts;
                slice_e[nslices++] = ts + dur;
            }
            if (cat && !strcmp(cat, "phase")) {
                phases++;
                int inside = 0;
                for (int k = 0; k < nslices; k++)
                    inside |= ts >= slice_s[k] && ts + dur <= slice_e[k] + 1e-9;
                nested &= inside;
            }
        }
    }
    size_t nrec = 0;
    xattn_profiler_count(ctx, &nrec);
    EXPECT(fields_ok, "an event lacks ph/ts/pid/tid/name (or dur for X)");
    EXPECT(procs == 1, "%d process_name events", procs);
    EXPECT(counters >= 3 * (int)nrec, "%d memory counter events for %zu records", counters, nrec);
    EXPECT(ranges == 4, "%d range slices on the host track, expected 4", ranges);
    EXPECT(calls == (int)nrec, "%d API slices for %zu records", calls, nrec);
    EXPECT(phases == 6 && nested, "%d phase slices (expected 3 + 1 + 2), nested %d", phases,
           nested);
    json_decref(root);
#endif
}

/* ---- ceilings ----------------------------------------------------------------- */

static void test_ceilings(void)
{
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    xattn_ceilings c1, c2, c3;
    EXPECT(xattn_ceilings_get(ctx, &c1) == XATTN_STATUS_UNSUPPORTED,
           "ceilings known before any measurement in an empty cache");
    EXPECT_OK(xattn_ceilings_measure(ctx, 0, &c1));
    EXPECT(c1.fma_f32_gflops > 0 && c1.read_gbps > 0 && c1.copy_gbps > 0 &&
               c1.fma_f16_gflops >= 0 && c1.fma_bf16_gflops >= 0,
           "fma %g, read %g, copy %g", c1.fma_f32_gflops, c1.read_gbps, c1.copy_gbps);
    EXPECT(!c1.from_cache && c1.cache_path[0], "first measurement: from_cache %d, path '%s'",
           c1.from_cache, c1.cache_path);
    printf("  ceilings (quick): fma f32 %.1f GFLOP/s, f16 %.1f, bf16 %.1f, read %.1f GB/s, copy "
           "%.1f GB/s\n",
           c1.fma_f32_gflops, c1.fma_f16_gflops, c1.fma_bf16_gflops, c1.read_gbps, c1.copy_gbps);
    EXPECT_OK(xattn_ceilings_measure(ctx, 0, &c2));
    EXPECT(c2.from_cache && c2.fma_f32_gflops == c1.fma_f32_gflops &&
               c2.read_gbps == c1.read_gbps && c2.copy_gbps == c1.copy_gbps &&
               !strcmp(c2.cache_path, c1.cache_path),
           "second call: from_cache %d, fma %g vs %g", c2.from_cache, c2.fma_f32_gflops,
           c1.fma_f32_gflops);
    EXPECT_OK(xattn_ceilings_get(ctx, &c3));

    /* Records now carry % of ceiling. */
    tcase c;
    tcase_init(&c, 128, 128);
    xattn_record rec;
    if (run_case(ctx, &c, &rec, NULL) == XATTN_STATUS_OK)
        EXPECT(rec.pct_fma_ceiling > 0 && rec.pct_bw_ceiling > 0, "pct fma %g bw %g",
               rec.pct_fma_ceiling, rec.pct_bw_ceiling);
    else
        EXPECT(0, "%s", xattn_last_error());

    /* A new context finds them in the cache at creation. */
    xattn_ctx *ctx2 = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx2));
    if (ctx2) {
        EXPECT_OK(xattn_ceilings_get(ctx2, &c3));
        EXPECT(c3.from_cache && c3.fma_f32_gflops == c1.fma_f32_gflops, "loaded at creation");
        xattn_ctx_destroy(ctx2);
    }

    /* A corrupt file (garbage, then a truncated one) is measured again. */
    static const char *const bad[] = {"garbage\n\x01\x02", "format=1\nfma_f32_gflops=12\n"};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(c1.cache_path, "w");
        EXPECT(f != NULL, "cannot rewrite %s", c1.cache_path);
        if (!f)
            continue;
        fputs(bad[k], f);
        fclose(f);
        EXPECT_OK(xattn_ceilings_measure(ctx, 0, &c2));
        EXPECT(!c2.from_cache && c2.fma_f32_gflops > 0, "corrupt cache %d: from_cache %d", k,
               c2.from_cache);
        EXPECT_OK(xattn_ceilings_measure(ctx, 0, &c3));
        EXPECT(c3.from_cache && c3.fma_f32_gflops == c2.fma_f32_gflops,
               "rewritten after corrupt cache %d", k);
    }
    /* force = 1 measures even with a valid entry. */
    EXPECT_OK(xattn_ceilings_measure(ctx, 1, &c2));
    EXPECT(!c2.from_cache, "force: from_cache %d", c2.from_cache);
    EXPECT(xattn_ceilings_measure(ctx, 2, &c2) == XATTN_STATUS_INVALID_ARGUMENT, "force = 2");
    EXPECT(xattn_ceilings_measure(NULL, 0, &c2) == XATTN_STATUS_INVALID_ARGUMENT, "ctx NULL");
    xattn_ctx_destroy(ctx);
}

static void cleanup_tmp(void)
{
    DIR *d = opendir(g_tmp);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", g_tmp, e->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(g_tmp);
}

int main(void)
{
    /* A private cache folder and quick micro-benchmarks, before any context. */
    snprintf(g_tmp, sizeof g_tmp, "/tmp/xattn-test-measure-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        printf("cannot create a scratch folder\n0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    setenv("XATTN_CACHE_DIR", g_tmp, 1);
    setenv("XATTN_CEILINGS_QUICK", "1", 1);

    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "CPU context: %s", xattn_last_error());
    if (ctx) {
        test_flops_hand(ctx);
        test_flops_simd(ctx);
        test_bytes_hand(ctx);
        test_bytes_serving(ctx);
        test_workspace(ctx);
        test_timers(ctx);
        test_records(ctx);
        st = make_records(ctx);
        EXPECT(st == XATTN_STATUS_OK, "records for the exports: %s", xattn_last_error());
        if (st == XATTN_STATUS_OK) {
            test_json(ctx);
            test_trace(ctx);
            test_csv(ctx);
        }
        xattn_ctx_destroy(ctx);
    }
    test_ceilings();
    cleanup_tmp();
    return xattn_test_summary();
}
