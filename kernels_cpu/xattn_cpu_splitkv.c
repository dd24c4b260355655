/*
 * SPLITKV (flash-decoding): the keys [0, Sk) are cut into `splits` chunks of
 * whole KV tiles. Phase 1 runs the flash tile loop of every (query tile,
 * chunk) on its own and writes a partial result per query row; phase 2
 * merges the chunks of each row with the usual max-rescaling.
 *
 * Workspace: O_part [splits, B, Hq, Sq, Dv] f32, then LSE_part
 * [splits, B, Hq, Sq] f32, then one flash scratch per thread.
 * A partial holds the chunk's *normalized* output (acc / l) and its
 * log-sum-exp m + log l, so that the merge is
 *   M = max_s LSE_s,  w_s = exp(LSE_s - M),  O = sum_s w_s O_s / sum_s w_s,
 *   LSE = M + log sum_s w_s.
 * An empty or fully masked chunk writes LSE_s = -inf and no O_s (the merge
 * never reads it); a NaN chunk writes NaN, which the merge propagates.
 */
#include "xattn_cpu_decode.h"

/* Chunks are at least this many keys when the count is chosen automatically. */
#ifndef XATTN_CPU_SPLITKV_MIN_KEYS
#define XATTN_CPU_SPLITKV_MIN_KEYS 256
#endif
/* KV heads walked together by one work item of the streaming path (below). */
#define XATTN__CPU_SKV_HEADS 16

/*
 * The streaming path (decode). With one query tile per KV head (Sq small: the
 * GQA group's rows fit one tile), a work item (sequence, group of up to 16 KV
 * heads, chunk) converts each KV tile of all its heads in one pass, key by
 * key, so that memory is read in address order: with BSHD a key's heads are
 * adjacent, and a per-head walk would read a few hundred bytes a page apart,
 * which the hardware prefetchers do not follow (decode is bound by that
 * stream). Each head keeps its own tile state; the tiles are computed from the
 * shared buffers [BK][heads][ldk] and [BK][heads][Dvp].
 */
static int xattn__cpu_skv_streams(const xattn_problem *p, xattn_cpu_simd simd)
{
    const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
    /* (fp8 and q8_0 caches are scaled per head or block: they stream only
     * where the decode driver reads them in place, which applies the scales;
     * the lanes' conversion of all heads at once does not) */
    return qt.hblocks == 1 && p->Sq <= qt.pos && p->k.sd == 1 && p->v.sd == 1 &&
           (!xattn__cpu_is_lowp(p->k.dtype) || xattn__cpu_dec_applies(p, simd));
}

static int64_t xattn__cpu_skv_hgroups(const xattn_problem *p)
{
    return (p->Hkv + XATTN__CPU_SKV_HEADS - 1) / XATTN__CPU_SKV_HEADS;
}

/* Keys per step of the streaming path: the converted K and V of all its heads
 * should stay in L1 (they are read right back), within one KV tile; 16 keys
 * at least (the micro-kernels' key blocks). */
static int64_t xattn__cpu_skv_step(const xattn_problem *p, int64_t nk)
{
    const int64_t row =
        nk *
        (xattn__cpu_round_up(p->D, XATTN__CPU_PAD) + xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD)) *
        4;
    return xattn__cpu_fit_keys(xattn__cpu_bk(p), (uint64_t)row, xattn_cpu_l1d_bytes());
}

/* The keys per step of the streaming path, the same for every group of KV
 * heads (sized for a full group: a last, smaller group takes the same steps),
 * so that one figure describes the call's key tiling (xattn__cpu_splitkv_tile_k). */
static int64_t xattn__cpu_skv_sb(xattn_cpu_simd simd, const xattn_problem *p)
{
    const int64_t nk = xattn__cpu_min(p->Hkv, XATTN__CPU_SKV_HEADS);
    return xattn__cpu_dec_applies(p, simd) ? xattn__cpu_dec_step(p, nk)
                                           : xattn__cpu_skv_step(p, nk);
}

int xattn__cpu_splitkv_tile_k(const xattn_problem *p, xattn_cpu_simd simd)
{
    return (int)(xattn__cpu_skv_streams(p, simd) ? xattn__cpu_skv_sb(simd, p) : xattn__cpu_bk(p));
}

/* Sections the streaming path's tile states go without: their K/V come from
 * the lane buffers or from the arrays in place, and in place the tiles have
 * few rows. */
static int xattn__cpu_skv_without(int direct)
{
    return XATTN__CPU_SC_NO_KV | (direct ? XATTN__CPU_SC_FEW : 0);
}

/* Bytes of one lane of the streaming path: one tile state per head, and
 * unless K/V are read in place, the lane's converted K and V (one extra zero
 * row block for the 16-key tails). */
static uint64_t xattn__cpu_skv_lane_bytes(const xattn_problem *p, int direct)
{
    const uint64_t H = (uint64_t)xattn__cpu_min(p->Hkv, XATTN__CPU_SKV_HEADS);
    const uint64_t ldk = (uint64_t)xattn__cpu_round_up(p->D, XATTN__CPU_PAD);
    const uint64_t dvp = (uint64_t)xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    const uint64_t rows = (uint64_t)XATTN_CPU_BK + XATTN__CPU_PAD;
    const uint64_t states = H * xattn__cpu_scratch_bytes_without(p, xattn__cpu_skv_without(direct));
    return direct ? states : states + rows * H * (ldk + dvp) * 4u;
}

/* Per-thread bytes of the streaming path: two lanes, and in place one f32 V
 * tile that the lanes' heads share, for the careful P.V of a V tile holding
 * inf or NaN (a multiple of 64 bytes: Dvp is a multiple of 16). */
static uint64_t xattn__cpu_skv_stream_bytes(const xattn_problem *p, int direct)
{
    const uint64_t dvp = (uint64_t)xattn__cpu_round_up(p->Dv, XATTN__CPU_PAD);
    return 2u * xattn__cpu_skv_lane_bytes(p, direct) +
           (direct ? (uint64_t)XATTN_CPU_BK * dvp * 4u : 0u);
}

static uint64_t xattn__cpu_skv_thread_bytes(const xattn_problem *p, xattn_cpu_simd simd)
{
    return xattn__cpu_skv_streams(p, simd)
               ? xattn__cpu_skv_stream_bytes(p, xattn__cpu_dec_applies(p, simd))
               : xattn__cpu_scratch_bytes(p);
}

int xattn__cpu_splitkv_num_splits(const xattn_problem *p, xattn_cpu_simd simd, int num_threads)
{
    const int64_t bk = xattn__cpu_bk(p), tiles = (p->Sk + bk - 1) / bk;
    const int64_t max_splits = tiles > 1 ? tiles : 1;
    int64_t s;
    if (p->num_splits > 0) {
        s = p->num_splits;
    } else {
        /* Enough work items for every thread (twice over, for balance), when
         * the query tiles alone do not give them, in chunks of >= 256 keys.
         * Partial work items are (sequence, KV head, head block): see
         * xattn__cpu_qtiling. */
        const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
        const int64_t u0 = xattn__cpu_skv_streams(p, simd) ? p->B * xattn__cpu_skv_hgroups(p)
                                                           : p->B * p->Hkv * qt.hblocks;
        const int64_t units = u0 > 0 ? u0 : 1;
        const int64_t nt = num_threads > 0 ? num_threads : 1;
        int64_t want = (2 * nt + units - 1) / units;
        if (xattn__cpu_skv_streams(p, simd)) /* chunks go by pairs (xattn__cpu_skv_stream) */
            want = 2 * want;
        const int64_t by_len = p->Sk / XATTN_CPU_SPLITKV_MIN_KEYS;
        s = want < by_len ? want : by_len;
    }
    if (s > max_splits)
        s = max_splits;
    if (s < 1)
        s = 1;
    if (s > INT32_MAX)
        s = INT32_MAX;
    return (int)s;
}

static uint64_t xattn__cpu_skv_rows(const xattn_problem *p)
{
    return (uint64_t)p->B * (uint64_t)p->Hq * (uint64_t)p->Sq;
}

uint64_t xattn__cpu_splitkv_scratch_bytes(const xattn_problem *p, xattn_cpu_simd simd,
                                          int num_threads)
{
    const uint64_t nt = (uint64_t)(num_threads > 0 ? num_threads : 1);
    uint64_t total;
    if (__builtin_mul_overflow(nt, xattn__cpu_skv_thread_bytes(p, simd), &total))
        return UINT64_MAX;
    return total;
}

/* Keys of chunk s: whole tiles, spread evenly (no chunk is empty when
 * splits <= the tile count). */
static void xattn__cpu_skv_chunk(const xattn_problem *p, int splits, int64_t s, int64_t *k0,
                                 int64_t *k1)
{
    const int64_t bk = xattn__cpu_bk(p), tiles = (p->Sk + bk - 1) / bk;
    *k0 = xattn__cpu_min(s * tiles / splits * bk, p->Sk);
    *k1 = xattn__cpu_min((s + 1) * tiles / splits * bk, p->Sk);
}

/* The normalized partial O and the LSE of the finished rows of sc, chunk s. */
static void xattn__cpu_skv_write(const xattn__cpu_ctx *cx, const xattn__cpu_scratch *sc, int64_t s,
                                 int64_t b, float *opart, float *lpart)
{
    const xattn_problem *p = cx->p;
    for (int r = 0; r < sc->R; r++) {
        const int64_t h = sc->rows[r].h, i = sc->rows[r].i;
        const uint64_t row = (((uint64_t)s * p->B + b) * p->Hq + h) * p->Sq + i;
        const float m = sc->m[r], l = sc->l[r];
        if (m == -INFINITY) {
            lpart[row] = -INFINITY;
            continue;
        }
        const float inv = sc->omul / l; /* omul: 1, or the decode driver's V scale */
        float *o = opart + row * p->Dv;
        const float *acc = sc->acc + r * cx->Dvp;
        for (int64_t d = 0; d < p->Dv; d++)
            o[d] = acc[d] * inv;
        lpart[row] = m + logf(l);
    }
}

/* One lane of a streaming work item: a chunk's tile states (one per head) and
 * its converted K/V buffers. */
typedef struct xattn__cpu_skv_lane {
    xattn__cpu_scratch sc[XATTN__CPU_SKV_HEADS];
    float *kb, *vb;
    int64_t s, ulo, uhi;
    int vbad;
} xattn__cpu_skv_lane;

/*
 * One work item of the streaming path: KV heads hk0 .. hk0+nk-1 of sequence b
 * over chunks s0 and s0+1 (when it exists), every real query row (R_all <= one
 * tile). The two chunks run as two lanes whose rows are converted alternately
 * (K and V of a key in one, then in the other): four address streams per
 * thread keep more memory requests in flight than two (single-core streaming
 * bandwidth grows with the streams: 19 -> 27 -> 31 GB/s for 1, 2, 4 on the
 * 2-core VM), and the combine phase merges the chunks as usual.
 */
static void xattn__cpu_skv_stream(const xattn__cpu_ctx *cx, char *mem, int64_t b, int64_t hk0,
                                  int nk, int splits, int64_t s0, float *opart, float *lpart,
                                  xattn_cpu_work *w)
{
    const xattn_problem *p = cx->p;
    const int64_t ldk = cx->ldk, Dvp = cx->Dvp;
    const int64_t R_all = xattn__cpu_min(xattn_problem_rows_q(p, b), p->len_q[b]);
    /* In place: K and V read where they lie by the decode driver (no f32
     * copy); the workspace was sized by the same test. */
    const int direct = xattn__cpu_dec_applies(p, cx->a->simd);
    const int without = xattn__cpu_skv_without(direct);
    const int64_t per = (int64_t)xattn__cpu_scratch_bytes_without(p, without);
    const int64_t bufk = (XATTN_CPU_BK + XATTN__CPU_PAD) * nk * ldk;
    const int64_t lane_bytes = (int64_t)xattn__cpu_skv_lane_bytes(p, direct);
    /* The heads' shared f32 V tile (in place only), after the two lanes. */
    float *vshared = direct ? (float *)(mem + 2 * lane_bytes) : NULL;
    const int nl = s0 + 1 < splits ? 2 : 1;
    xattn__cpu_skv_lane ln[2];
    for (int l = 0; l < nl; l++) {
        xattn__cpu_skv_lane *L = &ln[l];
        char *base = mem + lane_bytes * l;
        int64_t k0, k1;
        L->s = s0 + l;
        xattn__cpu_skv_chunk(p, splits, L->s, &k0, &k1);
        L->kb = direct ? NULL : (float *)(base + per * nk);
        L->vb = direct ? NULL : L->kb + bufk;
        L->ulo = L->uhi = 0;
        for (int k = 0; k < nk; k++) {
            xattn__cpu_scratch_map_without(&L->sc[k], base + per * k, p, without);
            L->sc[k].vt = vshared; /* read only by the careful P.V, in place */
            L->sc[k].work = w;
            xattn__cpu_attend_begin(cx, &L->sc[k], b, (hk0 + k) * p->group, (int)p->group, 0,
                                    (int)R_all, k0, k1);
            L->ulo = L->sc[k].ulo; /* the heads share positions, so intervals */
            L->uhi = L->sc[k].uhi;
        }
        if (R_all == 0 || L->ulo >= L->uhi)
            L->ulo = L->uhi = 0;
    }
    if (direct) /* Q in the order the decode kernels load K, once per query tile */
        for (int l = 0; l < nl; l++)
            xattn__cpu_dec_begin(cx, ln[l].sc, nk, hk0);
    const int64_t SB = xattn__cpu_skv_sb(cx->a->simd, p);
    int64_t steps = 0;
    for (int l = 0; l < nl; l++)
        if (ln[l].uhi > ln[l].ulo)
            steps = xattn__cpu_max(steps, ln[l].uhi / SB - ln[l].ulo / SB + 1);
    for (int64_t st = 0; st < steps; st++) {
        int64_t ja[2], jb[2];
        for (int l = 0; l < nl; l++) {
            const int64_t t0 = ln[l].ulo / SB * SB + st * SB;
            ja[l] = xattn__cpu_max(t0, ln[l].ulo);
            jb[l] = xattn__cpu_min(t0 + SB, ln[l].uhi);
            ln[l].vbad = 0;
        }
        if (direct) {
            for (int l = 0; l < nl; l++)
                xattn__cpu_dec_run(cx, ln[l].sc, nk, b, hk0, ja[l], jb[l]);
            continue;
        }
        /* Key by key, the heads in address order (adjacent with BSHD), the
         * lanes alternating. */
        for (int64_t c = 0; c < SB; c++)
            for (int l = 0; l < nl; l++) {
                xattn__cpu_skv_lane *L = &ln[l];
                const int64_t j = ja[l] + c;
                if (j >= jb[l])
                    continue;
                xattn__cpu_load_rows(cx->uk, L->kb + c * nk * ldk, ldk, cx->a->k,
                                     xattn__cpu_krow(&p->k, p, b, j, hk0), p->k.sh, p->D, ldk, nk,
                                     p->k.dtype, 0, 1.0f);
                L->vbad |= xattn__cpu_load_rows(cx->uk, L->vb + c * nk * Dvp, Dvp, cx->a->v,
                                                xattn__cpu_krow(&p->v, p, b, j, hk0), p->v.sh,
                                                p->Dv, Dvp, nk, p->v.dtype, 1, 1.0f);
            }
        for (int l = 0; l < nl; l++) {
            xattn__cpu_skv_lane *L = &ln[l];
            if (jb[l] <= ja[l])
                continue;
            const int64_t nc = jb[l] - ja[l], ncz = xattn__cpu_round_up(nc, XATTN__CPU_PAD);
            w->kv_rows += (uint64_t)nc * (uint64_t)nk; /* converted above, every head */
            memset(L->kb + nc * nk * ldk, 0, (size_t)((ncz - nc) * nk * ldk) * sizeof(float));
            for (int k = 0; k < nk; k++)
                xattn__cpu_attend_tile(cx, &L->sc[k], b, ja[l], jb[l], L->kb + k * ldk, nk * ldk,
                                       L->vb + k * Dvp, nk * Dvp, L->vbad);
        }
    }
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < nk; k++)
            xattn__cpu_skv_write(cx, &ln[l].sc[k], ln[l].s, b, opart, lpart);
}

void xattn__cpu_splitkv_partial(const xattn_cpu_args *a, int splits, float *opart, float *lpart,
                                void *scratch_ws, xattn_cpu_work *w)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    const uint64_t per = xattn__cpu_skv_thread_bytes(p, a->simd);
    const uint64_t nrows = (uint64_t)splits * xattn__cpu_skv_rows(p);
    if (p->poison) {
        xattn__cpu_poison(opart, nrows * (uint64_t)p->Dv * 4u, nt);
        xattn__cpu_poison(lpart, nrows * 4u, nt);
        xattn__cpu_poison(scratch_ws, per * (uint64_t)nt, nt);
    }
    char *scratch = scratch_ws;

    if (xattn__cpu_skv_streams(p, a->simd)) {
        /* Work items: (sequence, group of KV heads, pair of chunks). */
        const int64_t ng = xattn__cpu_skv_hgroups(p), npair = (splits + 1) / 2;
        const int64_t units = p->B * ng * npair;
        xattn_cpu_work total = {0, 0, 0};
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(xattn__cpu_work_sum : total)
#endif
        {
            const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
            for (int64_t u = 0; u < units; u++) {
                const int64_t pr = u % npair, g = (u / npair) % ng, b = u / (npair * ng);
                const int64_t hk0 = g * XATTN__CPU_SKV_HEADS;
                const int nk = (int)xattn__cpu_min(XATTN__CPU_SKV_HEADS, p->Hkv - hk0);
                xattn__cpu_skv_stream(&cx, scratch + (uint64_t)XATTN__CPU_TID() * per, b, hk0, nk,
                                      splits, 2 * pr, opart, lpart, &total);
            }
            xattn__cpu_bind_leave(a->bind, bound);
        }
        xattn__cpu_work_add(w, &total);
        return;
    }

    /* Work items: (sequence, KV head, head block, chunk); each walks every
     * query tile of its heads (GQA-packed, see xattn__cpu_qtiling). */
    const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
    const int64_t units = p->B * p->Hkv * qt.hblocks * (int64_t)splits;
    xattn_cpu_work total = {0, 0, 0};
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(xattn__cpu_work_sum : total)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t u = 0; u < units; u++) {
            const int64_t s = u % splits, hb = (u / splits) % qt.hblocks;
            const int64_t hk = (u / (splits * qt.hblocks)) % p->Hkv;
            const int64_t b = u / ((int64_t)splits * qt.hblocks * p->Hkv);
            const int64_t h0 = hk * p->group + hb * qt.heads;
            const int nh = (int)xattn__cpu_min(qt.heads, p->group - hb * qt.heads);
            int64_t k0, k1;
            xattn__cpu_skv_chunk(p, splits, s, &k0, &k1);
            /* Real rows only; padding rows are written by the combine phase. */
            const int64_t R_all = xattn__cpu_min(xattn_problem_rows_q(p, b), p->len_q[b]);
            xattn__cpu_scratch sc;
            xattn__cpu_scratch_map(&sc, scratch + (uint64_t)XATTN__CPU_TID() * per, p);
            sc.work = &total; /* this thread's copy */
            for (int64_t i0 = 0; i0 < R_all; i0 += qt.pos) {
                const int np = (int)xattn__cpu_min(qt.pos, R_all - i0);
                xattn__cpu_attend(&cx, &sc, b, h0, nh, i0, np, k0, k1, NULL);
                xattn__cpu_skv_write(&cx, &sc, s, b, opart, lpart);
            }
        }
        xattn__cpu_bind_leave(a->bind, bound);
    }
    xattn__cpu_work_add(w, &total);
}

void xattn__cpu_splitkv_combine(const xattn_cpu_args *a, int splits, const float *opart,
                                const float *lpart)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    const uint64_t rows_all = xattn__cpu_skv_rows(p);
    const int64_t Dv = p->Dv;

#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(static) nowait
#endif
        for (int64_t u = 0; u < (int64_t)rows_all; u++) {
            const int64_t i = u % p->Sq, h = (u / p->Sq) % p->Hq, b = u / (p->Sq * p->Hq);
            if (i >= xattn_problem_rows_q(p, b))
                continue; /* varlen: not a row of this sequence */
            if (i >= p->len_q[b]) {
                xattn__cpu_write_empty_row(&cx, b, h, i);
                continue;
            }
            /* Max over chunks, NaN sticky. */
            float M = -INFINITY;
            for (int s = 0; s < splits; s++) {
                const float L = lpart[(uint64_t)s * rows_all + (uint64_t)u];
                M = (L > M || L != L) ? L : M;
            }
            if (M == -INFINITY) { /* no chunk saw a key */
                xattn__cpu_write_row(&cx, b, h, i, M, 0.0f, NULL);
                continue;
            }
            float acc[XATTN__CPU_DMAX];
            float sw = 0.0f;
            for (int64_t d = 0; d < Dv; d++)
                acc[d] = 0.0f;
            for (int s = 0; s < splits; s++) {
                const uint64_t row = (uint64_t)s * rows_all + (uint64_t)u;
                const float L = lpart[row];
                if (L == -INFINITY)
                    continue; /* empty chunk: its O was never written */
                const float w = expf(L - M);
                const float *o = opart + row * (uint64_t)Dv;
                sw += w;
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] += w * o[d];
            }
            /* The chunks' partials hold no sink: it is folded here, once. */
            xattn__cpu_write_row(&cx, b, h, i, M, sw, acc);
        }
        xattn__cpu_bind_leave(a->bind, bound);
    }
}
