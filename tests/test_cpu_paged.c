/*
 * The CPU backend on paged KV caches: each SIMD path and algorithm gives, on
 * a paged cache, the output and LSE it gives on the same keys laid out
 * contiguously (test_backend_ops checks the contiguous ones against the
 * reference). The page tables are what the CPU's page runs (keys one row
 * stride apart, docs/backends.md) must get right: shuffled pages, pages in
 * pool order (runs across pages), in order with a gap; page sizes 1, 3 (not a
 * power of two), 16 and 64; both stride orders of a pool (and K and V in
 * different ones); a sequence of length 0; unused pages filled with NaN and
 * unused table entries out of range, so that a key read from the wrong place
 * shows.
 */
#define _POSIX_C_SOURCE 200809L
#include "xattn_test.h"

typedef struct {
    const char *name;
    int B, Sq, Hq, Hkv, D, Dv, causal, window_left, window_right, sinks, alibi, f16;
    int nonfinite; /* an inf and a NaN in V (the careful P.V of a decode tile) */
    int32_t lk[3];
} pcase;

static const pcase cases[] = {
    /* decode, GQA: SPLITKV's in-place path (D multiple of 16) */
    {"decode_gqa", 3, 1, 8, 2, 64, 64, 0, -1, -1, 1, 0, 1, 0, {300, 0, 133}},
    {"decode_inf_nan", 2, 1, 4, 2, 32, 32, 0, 40, 0, 0, 0, 1, 1, {150, 90, 0}},
    /* a few positions, causal, ALiBi, f32 K/V */
    {"spec_decode", 2, 4, 8, 2, 32, 32, 1, -1, -1, 0, 1, 0, 0, {190, 77, 0}},
    /* prefill: FLASH packs, SPLITKV converts key by key (D not a multiple of 16) */
    {"prefill_window", 2, 37, 4, 4, 40, 24, 1, 20, 5, 0, 0, 1, 0, {150, 37, 0}},
    /* more rows than one query tile: SPLITKV's tile loop */
    {"prefill_long", 1, 70, 2, 1, 32, 32, 1, -1, -1, 1, 0, 0, 0, {200, 0, 0}},
};

/* Keys [B, Sk, Hkv, D] (and V) as random f32, the cases' inputs. */
typedef struct {
    const pcase *c;
    int Sk;
    float *q, *k, *v, *sinks, *slopes;
} inputs;

/* Writes key j of sequence b, head h (K and V) into a buffer of the kind
 * asked: contiguous [B, Sk, Hkv, D] (bt NULL) or the page pool
 * [npages, ps, Hkv, D] / [npages, Hkv, ps, D]: order 0 both the first,
 * 1 both the second, 2 K the first and V the second. */
static void put(const inputs *in, unsigned char *kb, unsigned char *vb, const int32_t *bt,
                int64_t maxp, int64_t ps, int order, int b, int j, int h)
{
    const pcase *c = in->c;
    const int64_t blk = bt ? bt[b * maxp + j / ps] : b, s = bt ? j % ps : j;
    const int64_t S = bt ? ps : in->Sk;
    const size_t es = c->f16 ? 2 : 4;
    for (int t = 0; t < 2; t++) {
        const int64_t n = t ? c->Dv : c->D;
        const float *src = (t ? in->v : in->k) + (((size_t)b * in->Sk + j) * c->Hkv + h) * n;
        unsigned char *dst = t ? vb : kb;
        for (int64_t d = 0; d < n; d++) {
            const int64_t idx = (order == 1 || (order == 2 && t))
                                    ? ((blk * c->Hkv + h) * S + s) * n + d
                                    : ((blk * S + s) * c->Hkv + h) * n + d;
            if (c->f16) {
                uint16_t x = xattn_f32_to_f16(src[d]);
                memcpy(dst + idx * es, &x, 2);
            } else
                memcpy(dst + idx * es, &src[d], 4);
        }
    }
}

/* One call; bt NULL: contiguous. O and LSE into o, lse. */
static xattn_status run(xattn_ctx *ctx, const inputs *in, xattn_algo algo, const int32_t *bt,
                        int64_t maxp, int64_t ps, int64_t npages, int order, float *o, float *lse)
{
    const pcase *c = in->c;
    const int B = c->B, Sq = c->Sq, Hq = c->Hq, Hkv = c->Hkv;
    const size_t es = c->f16 ? 2 : 4;
    const xattn_dtype kdt = c->f16 ? XATTN_DTYPE_F16 : XATTN_DTYPE_F32;
    const int64_t NB = bt ? npages : B, S = bt ? ps : in->Sk;
    const size_t kn = (size_t)NB * S * Hkv * c->D, vn = (size_t)NB * S * Hkv * c->Dv;
    const size_t qn = (size_t)B * Sq * Hq * c->D, on = (size_t)B * Sq * Hq * c->Dv;
    unsigned char *kb = malloc(kn * es), *vb = malloc(vn * es);
    memset(kb, 0xff, kn * es); /* NaN wherever no key of a sequence lies */
    memset(vb, 0xff, vn * es);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < c->lk[b]; j++)
            for (int h = 0; h < Hkv; h++)
                put(in, kb, vb, bt, maxp, ps, order, b, j, h);
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL, *bs = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, qn * 4, &bq);
    if (!st)
        st = xattn_buffer_alloc(ctx, kn * es, &bk);
    if (!st)
        st = xattn_buffer_alloc(ctx, vn * es, &bv);
    if (!st)
        st = xattn_buffer_alloc(ctx, on * 4, &bo);
    if (!st)
        st = xattn_buffer_alloc(ctx, (size_t)B * Hq * Sq * 4, &bl);
    if (!st)
        st = xattn_buffer_alloc(ctx, (size_t)Hq * 4, &bs);
    if (!st) {
        xattn_buffer_write(bq, 0, in->q, qn * 4);
        xattn_buffer_write(bk, 0, kb, kn * es);
        xattn_buffer_write(bv, 0, vb, vn * es);
        xattn_buffer_write(bs, 0, in->sinks, (size_t)Hq * 4);
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, B, Sq, Hq, c->D);
        d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, B, Sq, Hq, c->Dv);
        d.lse = xattn_tensor_bhsd(bl, 0, XATTN_DTYPE_F32, B, Hq, Sq, 1);
        d.k = order == 1 ? xattn_tensor_bhsd(bk, 0, kdt, NB, S, Hkv, c->D)
                         : xattn_tensor_bshd(bk, 0, kdt, NB, S, Hkv, c->D);
        d.v = order ? xattn_tensor_bhsd(bv, 0, kdt, NB, S, Hkv, c->Dv)
                    : xattn_tensor_bshd(bv, 0, kdt, NB, S, Hkv, c->Dv);
        d.seqlens_k = c->lk;
        d.causal = c->causal;
        d.window_left = c->window_left;
        d.window_right = c->window_right;
        d.alibi_slopes = c->alibi ? in->slopes : NULL;
        if (c->sinks)
            d.sinks = xattn_tensor_bshd(bs, 0, XATTN_DTYPE_F32, 1, 1, Hq, 1);
        d.algo = algo;
        d.num_splits = algo == XATTN_ALGO_SPLITKV ? 3 : 0;
        d.block_table = bt;
        d.max_pages_per_seq = bt ? maxp : 0;
        st = xattn_attention(ctx, &d, NULL);
        if (!st)
            st = xattn_buffer_read(bo, 0, o, on * 4);
        if (!st)
            st = xattn_buffer_read(bl, 0, lse, (size_t)B * Hq * Sq * 4);
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);
    xattn_buffer_free(bs);
    free(kb);
    free(vb);
    return st;
}

/* Equal, or both NaN. */
static int same(float a, float b)
{
    return a == b || (a != a && b != b);
}

/* The table of a paged cache: 0 shuffled, 1 in pool order (sequence b's
 * pages 2*b*maxp ..), 2 in order with a gap after the second page. Entries
 * past a sequence's pages are out of range (never to be read). */
static void table(int32_t *bt, const pcase *c, int64_t maxp, int64_t ps, int64_t npages, int kind,
                  uint64_t *rng)
{
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)npages);
    for (int64_t i = 0; i < npages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = npages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(xattn_test_rng_next(rng) % (uint64_t)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int b = 0; b < c->B; b++)
        for (int64_t pg = 0; pg < maxp; pg++) {
            const int64_t used = (c->lk[b] + ps - 1) / ps;
            const int64_t id =
                kind == 0 ? perm[b * maxp + pg] : 2 * b * maxp + pg + (kind == 2 && pg >= 2);
            bt[b * maxp + pg] = pg < used ? (int32_t)id : (pg % 2 ? -7 : INT32_MAX);
        }
    free(perm);
}

int main(void)
{
    static const int simds[] = {1, 2, 3};
    static const char *simd_names[] = {"portable", "avx2", "avx512"};
    static const xattn_algo algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    static const int64_t page_sizes[] = {1, 3, 16, 64};
    uint64_t rng = 2026;
    for (size_t si = 0; si < sizeof simds / sizeof simds[0]; si++) {
        xattn_ctx *ctx = NULL;
        EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
        if (!ctx)
            break;
        xattn_status st = xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, simds[si]);
        if (st == XATTN_STATUS_UNSUPPORTED) {
            SKIP("cpu:%s: %s", simd_names[si], xattn_last_error());
            xattn_ctx_destroy(ctx);
            continue;
        }
        EXPECT_OK(st);
        EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1));
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            const pcase *c = &cases[ci];
            inputs in = {c, 1, NULL, NULL, NULL, NULL, NULL};
            for (int b = 0; b < c->B; b++)
                in.Sk = c->lk[b] > in.Sk ? c->lk[b] : in.Sk;
            const size_t qn = (size_t)c->B * c->Sq * c->Hq * c->D;
            const size_t kn = (size_t)c->B * in.Sk * c->Hkv * c->D;
            const size_t vn = (size_t)c->B * in.Sk * c->Hkv * c->Dv;
            const size_t on = (size_t)c->B * c->Sq * c->Hq * c->Dv;
            const size_t ln = (size_t)c->B * c->Hq * c->Sq;
            in.q = malloc(qn * 4);
            in.k = malloc(kn * 4);
            in.v = malloc(vn * 4);
            in.sinks = malloc((size_t)c->Hq * 4);
            in.slopes = malloc((size_t)c->Hq * 4);
            for (size_t i = 0; i < qn; i++)
                in.q[i] = xattn_test_rng_val(&rng);
            for (size_t i = 0; i < kn; i++)
                in.k[i] = xattn_test_rng_val(&rng);
            for (size_t i = 0; i < vn; i++)
                in.v[i] = xattn_test_rng_val(&rng);
            if (c->nonfinite) { /* key 120 of sequence 0 (in the window), key 20 of 1 (not) */
                in.v[((size_t)120 * c->Hkv + 1) * c->Dv + 3] = INFINITY;
                in.v[(((size_t)in.Sk + 20) * c->Hkv) * c->Dv] = NAN;
            }
            for (int h = 0; h < c->Hq; h++) {
                in.sinks[h] = xattn_test_rng_val(&rng);
                in.slopes[h] = 0.05f * (float)(h + 1);
            }
            float *o0 = malloc(on * 4), *l0 = malloc(ln * 4);
            float *o1 = malloc(on * 4), *l1 = malloc(ln * 4);
            for (size_t ai = 0; ai < sizeof algos / sizeof algos[0]; ai++) {
                const xattn_algo algo = algos[ai];
                xattn_status s0 = run(ctx, &in, algo, NULL, 0, 0, 0, 0, o0, l0);
                EXPECT(s0 == XATTN_STATUS_OK, "cpu:%s %s %s contiguous: %s", simd_names[si],
                       c->name, xattn_algo_name(algo), xattn_last_error());
                if (s0 != XATTN_STATUS_OK)
                    continue;
                for (size_t pi = 0; pi < sizeof page_sizes / sizeof page_sizes[0]; pi++)
                    for (int kind = 0; kind < 3; kind++)
                        for (int order = 0; order < 3; order++) {
                            const int64_t ps = page_sizes[pi];
                            const int64_t maxp = (in.Sk + ps - 1) / ps + 1;
                            const int64_t npages = 2 * c->B * maxp + 1;
                            int32_t *bt = malloc(sizeof(int32_t) * (size_t)(c->B * maxp));
                            table(bt, c, maxp, ps, npages, kind, &rng);
                            for (size_t i = 0; i < on; i++)
                                o1[i] = NAN;
                            xattn_status s1 =
                                run(ctx, &in, algo, bt, maxp, ps, npages, order, o1, l1);
                            double md = 0.0;
                            for (size_t i = 0; i < on; i++) {
                                const double e =
                                    same(o1[i], o0[i]) ? 0.0 : fabs((double)o1[i] - o0[i]);
                                md = e > md || e != e ? e : md;
                            }
                            for (size_t i = 0; i < ln; i++) {
                                const double e =
                                    same(l1[i], l0[i]) ? 0.0 : fabs((double)l1[i] - l0[i]);
                                md = e > md || e != e ? e : md;
                            }
                            EXPECT(s1 == XATTN_STATUS_OK && md <= 2e-5,
                                   "cpu:%s %s %s page_size %lld table %d order %d: %s, largest "
                                   "difference to contiguous %.3g",
                                   simd_names[si], c->name, xattn_algo_name(algo), (long long)ps,
                                   kind, order, xattn_status_name(s1), md);
                            free(bt);
                        }
            }
            free(o0);
            free(l0);
            free(o1);
            free(l1);
            free(in.q);
            free(in.k);
            free(in.v);
            free(in.sinks);
            free(in.slopes);
        }
        xattn_ctx_destroy(ctx);
    }
    return xattn_test_summary();
}
