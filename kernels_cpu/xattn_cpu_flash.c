/*
 * FLASH: tiled attention with an online softmax. One work item is one query
 * tile of one sequence: np positions x nh query heads of one KV group (see
 * xattn__cpu_qtiling); it walks the KV tiles that meet the union of its rows'
 * valid key intervals (xattn__cpu_attend) and writes O and LSE. Extra memory:
 * one scratch per thread, O(BQ*(D+Dv) + BK*(D+Dv)).
 *
 * The work done is counted by the tile loop (xattn__cpu_attend_tile: each
 * computed tile's real rows times its keys, trimmed to the union of the rows'
 * intervals; skipped tiles and padding rows excluded, masked keys inside a
 * computed tile included) into per-thread counters, summed at the end.
 */
#include "xattn_cpu_common.h"

/* Packing costs one pass over K and V and saves a conversion per query tile
 * that visits each tile; it is worth it from two query tiles per KV head on,
 * up to this many bytes of packed K/V (beyond that the copy competes with the
 * caller's memory more than the conversions cost). */
#ifndef XATTN_CPU_PACK_MAX_BYTES
#define XATTN_CPU_PACK_MAX_BYTES (1ull << 30)
#endif

static uint64_t xattn__cpu_a64(uint64_t bytes)
{
    return (bytes + 63u) & ~(uint64_t)63u;
}

/* Key tiles of every sequence (one KV head); UINT64_MAX on overflow. */
static uint64_t xattn__cpu_pack_tiles(const xattn_problem *p)
{
    const int64_t bk = xattn__cpu_bk(p);
    uint64_t n = 0;
    for (int64_t b = 0; b < p->B; b++)
        n += ((uint64_t)p->len_k[b] + (uint64_t)bk - 1) / (uint64_t)bk;
    return n;
}

/* Bytes of the packed section: tile0, flags, K and V panels (+ one zero tile). */
static uint64_t xattn__cpu_pack_bytes(const xattn_problem *p)
{
    const uint64_t tiles = xattn__cpu_pack_tiles(p), ldk = (uint64_t)xattn__cpu_round_up(p->D, 16);
    const uint64_t dvp = (uint64_t)xattn__cpu_round_up(p->Dv, 16);
    uint64_t n, per, bytes;
    if (__builtin_mul_overflow(tiles, (uint64_t)p->Hkv, &n) ||
        __builtin_mul_overflow(n + 1, (uint64_t)xattn__cpu_bk(p) * (ldk + dvp) * 4u, &per) ||
        __builtin_add_overflow(per, xattn__cpu_a64(((uint64_t)p->B + 1u) * 8u), &bytes) ||
        __builtin_add_overflow(bytes, xattn__cpu_a64(n + 1), &bytes))
        return UINT64_MAX;
    return bytes;
}

int xattn__cpu_flash_packs(const xattn_problem *p)
{
    const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
    if ((p->Sq + qt.pos - 1) / qt.pos * qt.hblocks < 2)
        return 0; /* one query tile per KV head: each K/V tile is converted once anyway */
    return xattn__cpu_pack_bytes(p) <= XATTN_CPU_PACK_MAX_BYTES;
}

uint64_t xattn__cpu_flash_workspace_bytes(const xattn_problem *p, int num_threads, int pack)
{
    const uint64_t scratch =
        (uint64_t)(num_threads > 0 ? num_threads : 1) * xattn__cpu_scratch_bytes(p);
    if (!pack)
        return scratch;
    const uint64_t packed = xattn__cpu_pack_bytes(p);
    return packed > UINT64_MAX - scratch ? UINT64_MAX : scratch + packed;
}

/* Lays the packed section out at `base` and fills it (in parallel over tiles). */
static void xattn__cpu_flash_pack(const xattn__cpu_ctx *cx, char *base, xattn__cpu_kvpack *kv,
                                  int nt)
{
    const xattn_problem *p = cx->p;
    const int64_t BK = xattn__cpu_bk(p), Hkv = p->Hkv;
    int64_t *tile0 = (int64_t *)base;
    tile0[0] = 0;
    for (int64_t b = 0; b < p->B; b++)
        tile0[b + 1] = tile0[b] + ((int64_t)p->len_k[b] + BK - 1) / BK;
    const int64_t n = tile0[p->B] * Hkv; /* tiles in all */
    unsigned char *vbad = (unsigned char *)(base + xattn__cpu_a64(((uint64_t)p->B + 1u) * 8u));
    float *k = (float *)((char *)vbad + xattn__cpu_a64((uint64_t)n + 1u));
    float *v = k + (n + 1) * BK * cx->ldk;
    memset(k + n * BK * cx->ldk, 0, (size_t)(BK * cx->ldk) * sizeof(float)); /* the zero tile */
    memset(v + n * BK * cx->Dvp, 0, (size_t)(BK * cx->Dvp) * sizeof(float));
    vbad[n] = 0;
    (void)nt; /* unused without OpenMP */
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt)
#endif
    {
        const int bound = xattn__cpu_bind_enter(cx->a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(static) nowait
#endif
        for (int64_t u = 0; u < n; u++) {
            /* Tile u = tile0[b] * Hkv + hk * ntiles(b) + t: find b by its range. */
            int64_t lo = 0, hi = p->B - 1;
            while (lo < hi) {
                const int64_t mid = (lo + hi + 1) / 2;
                if (tile0[mid] * Hkv <= u)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            const int64_t b = lo, nb = tile0[b + 1] - tile0[b], r = u - tile0[b] * Hkv;
            vbad[u] = (unsigned char)xattn__cpu_pack_tile(
                cx, b, r / nb, r % nb, k + u * BK * cx->ldk, v + u * BK * cx->Dvp);
        }
        xattn__cpu_bind_leave(cx->a->bind, bound);
    }
    kv->k = k;
    kv->v = v;
    kv->vbad = vbad;
    kv->tile0 = tile0;
}

/* Normalizes and writes the R rows of a finished query tile. */
static void xattn__cpu_flash_finish(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                                    int R)
{
    for (int r = 0; r < R; r++) {
        xattn__cpu_write_row(cx, b, sc->rows[r].h, sc->rows[r].i, sc->m[r], sc->l[r],
                             sc->acc + r * cx->Dvp);
    }
}

void xattn__cpu_flash(const xattn_cpu_args *a, void *ws, int pack, xattn_cpu_work *w)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    const uint64_t per = xattn__cpu_scratch_bytes(p);
    if (p->poison)
        xattn__cpu_poison(ws, xattn__cpu_flash_workspace_bytes(p, nt, pack), nt);
    xattn__cpu_kvpack kvp, *kv = NULL;
    if (pack) {
        xattn__cpu_flash_pack(&cx, (char *)ws + per * (uint64_t)nt, &kvp, nt);
        kv = &kvp;
    }

    const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
    const int64_t nqt = (p->Sq + qt.pos - 1) / qt.pos;
    const int64_t units = p->B * p->Hkv * qt.hblocks * nqt;
    xattn_cpu_work total = {0, 0, 0};
    /* Dynamic: under causal masks or uneven lengths, tiles differ in work. */
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(xattn__cpu_work_sum : total)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t u = 0; u < units; u++) {
            const int64_t t = u % nqt, hb = (u / nqt) % qt.hblocks;
            const int64_t hk = (u / (nqt * qt.hblocks)) % p->Hkv,
                          b = u / (nqt * qt.hblocks * p->Hkv);
            const int64_t h0 = hk * p->group + hb * qt.heads;
            const int nh = (int)xattn__cpu_min(qt.heads, p->group - hb * qt.heads);
            const int64_t rows = xattn_problem_rows_q(p, b), i0 = t * qt.pos;
            if (i0 >= rows)
                continue;
            const int64_t nrows = xattn__cpu_min(qt.pos, rows - i0);
            /* Real positions first; positions i >= len_q (padded mode) are padding. */
            const int np = (int)xattn__cpu_min(xattn__cpu_max((int64_t)p->len_q[b] - i0, 0), nrows);
            for (int hh = 0; hh < nh; hh++)
                for (int64_t r = np; r < nrows; r++)
                    xattn__cpu_write_empty_row(&cx, b, h0 + hh, i0 + r);
            if (np == 0)
                continue;
            xattn__cpu_scratch sc;
            xattn__cpu_scratch_map(&sc, (char *)ws + (uint64_t)XATTN__CPU_TID() * per, p);
            sc.work = &total; /* this thread's copy */
            xattn__cpu_attend(&cx, &sc, b, h0, nh, i0, np, 0, INT64_MAX, kv);
            xattn__cpu_flash_finish(&cx, &sc, b, nh * np);
        }
        xattn__cpu_bind_leave(a->bind, bound);
    }
    xattn__cpu_work_add(w, &total);
}
