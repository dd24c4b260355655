/*
 * The decode driver: SPLITKV's streaming path (xattn_cpu_splitkv.c) on K and
 * V read where they lie, through the decode micro-kernels
 * (xattn_cpu_decode.h). The streaming path sets up a work item's tile states
 * (one per KV head) and calls xattn__cpu_dec_run once per step of keys; a
 * step's tile of each head goes: QK^T on K in place, the scores' scale,
 * modifiers, masks and online softmax (shared with the tile loop), then the
 * P.V on V in place, or the careful P.V on converted rows when V holds inf or
 * NaN.
 */
#include "xattn_cpu_decode.h"

const xattn__cpu_dec_uk *xattn__cpu_dec_get(xattn_cpu_simd simd)
{
#if XATTN__CPU_X86
    if (simd == XATTN_CPU_SIMD_AVX512)
        return &xattn__cpu_dec_avx512;
    if (simd == XATTN_CPU_SIMD_AVX2)
        return &xattn__cpu_dec_avx2;
#endif
    (void)simd;
    return NULL;
}

int xattn__cpu_dec_applies(const xattn_problem *p, xattn_cpu_simd simd)
{
    /* The table for simd as the host uses it (xattn__cpu_uk_get falls back to
     * portable for a path this build lacks). */
    const xattn__cpu_uk *uk = xattn__cpu_uk_get(simd);
    /* (q8_0 rows are whole blocks of 32, so whole vectors too) */
    return xattn__cpu_dec_get(uk->simd) && uk->qk_rows && p->D % 16 == 0 && p->Dv % 16 == 0 &&
           p->group * p->Sq <= XATTN__CPU_FEW_ROWS;
}

/* The heads take turns over a block of keys, about 128 KiB of K (64 keys of
 * 8 f16 heads of D 128, 32 of f32), so that the block is read in address
 * order overall and stays in L2 while every head passes over it (measured on
 * the 2-core VM, B8 H32/8 D128 Sk32768: f16 64 keys 64 ms vs 16 keys 77-89
 * ms; f32 16-32 keys 97-105 ms vs 64 keys 128-132 ms). */
int64_t xattn__cpu_dec_step(const xattn_problem *p, int64_t nk)
{
    const int64_t es = xattn__cpu_esize(p->k.dtype);
    return xattn__cpu_fit_keys(xattn__cpu_bk(p), (uint64_t)(nk * p->D * es), 128u << 10);
}

void xattn__cpu_dec_begin(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int nk, int64_t hk0)
{
    const xattn_problem *p = cx->p;
    const xattn__cpu_dec_uk *dk = xattn__cpu_dec_get(cx->uk->simd);
    for (int k = 0; k < nk; k++) {
        /* The scores are (q * qscale * kmul) . k' and the output acc' * omul,
         * where k' and the acc' of v' are what the kernels load (the values
         * times the unit): the scales once per tile, not per element. The
         * careful P.V converts V to the same unit. */
        const float kmul = xattn__cpu_kv_mul(cx, &p->k, hk0 + k) / xattn__cpu_dec_unit(p->k.dtype);
        sc[k].omul = xattn__cpu_kv_mul(cx, &p->v, hk0 + k) / xattn__cpu_dec_unit(p->v.dtype);
        if (sc[k].ulo >= sc[k].uhi)
            continue;
        if (kmul != 1.0f)
            cx->uk->scale(sc[k].qr, (int64_t)sc[k].R * cx->ldk, kmul);
        dk->order_q(sc[k].qr, (int)cx->ldk, sc[k].R, (int)p->D, p->k.dtype);
    }
}

/* The tile of keys [ja, jb) of one head (tile state sc, already begun) with
 * its K and V rows in t->k, t->v (from key ja): computed, its work counted. */
static void xattn__cpu_dec_one(const xattn__cpu_ctx *cx, const xattn__cpu_dec_uk *dk,
                               xattn__cpu_scratch *sc, int64_t b, int64_t ja, int64_t jb,
                               xattn__cpu_dec_tile *t)
{
    const xattn_problem *p = cx->p;
    const int64_t Dv = p->Dv, Dvp = cx->Dvp;
    const int R = sc->R;
    int full;
    if (!xattn__cpu_tile_ranges(sc, ja, jb, &full))
        return;
    const int nc = (int)(jb - ja);
    /* Executed work: every real row against every key (padding rows and keys
     * aside), each K/V row read once here, and the P.V's pairs by blocks of 4
     * rows (every row over every key when each row's keys cover the tile). */
    xattn_cpu_work *w = sc->work;
    const uint64_t tile_pairs = (uint64_t)R * (uint64_t)nc;
    w->qk_pairs += tile_pairs;
    w->kv_rows += (uint64_t)nc;
    t->nc = nc;
    t->nr = R;
    t->qr = sc->qr;
    t->ldq = (int)cx->ldk;
    t->st = sc->st;
    t->acc = sc->acc;
    t->ldacc = (int)Dvp;
    t->clo = sc->clo;
    t->chi = sc->chi;
    dk->qk(t);
    /* e4m3 NaN codes: NaN scores for their keys (a NaN in K makes the score
     * NaN whatever q is), before the masks, which overwrite masked keys. */
    for (uint64_t nan = dk->nan_keys(&t->k, nc); nan; nan &= nan - 1) {
        const int c = __builtin_ctzll(nan);
        for (int r = 0; r < R; r++)
            sc->st[c * XATTN_CPU_BQ + r] = NAN;
    }
    xattn__cpu_tile_softmax(cx, sc, ja, nc, full);
    /* V is checked by the P.V itself: it adds the tile's sums to acc only
     * when they are all finite (its work was done all the same, and counts). */
    w->pv_terms +=
        (full ? tile_pairs : xattn__cpu_pv_pairs(sc->clo, sc->chi, R, 4, 0)) * (uint64_t)Dv;
    if (!dk->nan_keys(&t->v, nc) && !dk->pv(t))
        return;
    /* inf/NaN in V (or an e4m3 NaN code): the careful P.V on converted rows
     * (the heads' shared f32 tile, sc->vt), in the kernels' unit. */
    for (int c = 0; c < nc; c++)
        xattn__cpu_load_rows(cx->uk, sc->vt + c * Dvp, Dvp, t->v.base,
                             t->v.idx + (t->v.rows ? t->v.rows[c] : c * t->v.stride), 0, Dv, Dvp, 1,
                             t->v.dt, 0, xattn__cpu_dec_unit(t->v.dt));
    xattn__cpu_tile_pv_careful(cx, sc, b, ja, sc->vt, Dvp);
}

void xattn__cpu_dec_run(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int nk, int64_t b,
                        int64_t hk0, int64_t ja, int64_t jb)
{
    const xattn_problem *p = cx->p;
    const xattn__cpu_dec_uk *dk = xattn__cpu_dec_get(cx->uk->simd);
    if (jb <= ja)
        return;
    /* A paged cache: the rows of the step's keys (the pages looked up once
     * per run of keys), shared by the heads, which add their own offset. The
     * step is at most XATTN_CPU_BK keys. */
    int64_t krows[XATTN_CPU_BK], vrows[XATTN_CPU_BK];
    xattn__cpu_dec_tile t;
    memset(&t, 0, sizeof t);
    t.k.base = cx->a->k;
    t.k.stride = p->k.ss;
    t.k.dt = p->k.dtype;
    t.k.n = (int)p->D;
    t.v.base = cx->a->v;
    t.v.stride = p->v.ss;
    t.v.dt = p->v.dtype;
    t.v.n = (int)p->Dv;
    t.v_prefetch = xattn__cpu_v_prefetch_in_qk(p->v.dtype) && p->v.dtype == p->k.dtype;
    if (p->paged) {
        xattn__cpu_token_rows(p, &p->k, b, ja, jb - ja, krows);
        xattn__cpu_token_rows(p, &p->v, b, ja, jb - ja, vrows);
        t.k.rows = krows;
        t.v.rows = vrows;
    }
    for (int k = 0; k < nk; k++) {
        xattn__cpu_scratch *s = &sc[k];
        /* The tile's keys clipped to the head's valid ones (ulo, uhi: the
         * heads share positions, so intervals, but a head may have none). */
        const int64_t a = xattn__cpu_max(ja, s->ulo), e = xattn__cpu_min(jb, s->uhi);
        if (e <= a)
            continue;
        const int64_t o = a - ja; /* key a's entry of the step's rows */
        t.k.rows = p->paged ? krows + o : NULL;
        t.v.rows = p->paged ? vrows + o : NULL;
        t.k.idx = p->paged ? (hk0 + k) * p->k.sh : xattn__cpu_krow(&p->k, p, b, a, hk0 + k);
        t.v.idx = p->paged ? (hk0 + k) * p->v.sh : xattn__cpu_krow(&p->v, p, b, a, hk0 + k);
        xattn__cpu_dec_one(cx, dk, s, b, a, e, &t);
    }
}
