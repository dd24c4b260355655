/*
 * FLASH: tiled attention with an online softmax. One work item is one query
 * tile of one sequence: np positions x nh query heads of one KV group (see
 * xattn__cpu_qtiling); it walks the KV tiles that meet the union of its rows'
 * valid key intervals (xattn__cpu_attend) and writes O and LSE. Extra memory:
 * one scratch per thread, O(BQ*(D+Dv) + BK*(D+Dv)).
 *
 * *tiles_done counts (query row, KV tile) pairs computed and *tile_k is BK, so
 * the executed work is tiles_done * tile_k * 2 * (D + Dv) FLOPs (padding rows
 * and skipped tiles excluded; masked keys inside a computed tile included).
 */
#include "xattn_cpu_common.h"

uint64_t xattn_cpu_flash_workspace_bytes(const xattn_problem *p, int num_threads)
{
    return (uint64_t)(num_threads > 0 ? num_threads : 1) * xattn__cpu_scratch_bytes(p);
}

/* Normalizes and writes the R rows of a finished query tile. */
static void xattn__cpu_flash_finish(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                                    int R)
{
    const xattn_problem *p = cx->p;
    for (int r = 0; r < R; r++) {
        const int64_t h = sc->rows[r].h, i = sc->rows[r].i;
        const float m = sc->m[r], l = sc->l[r];
        if (m == -INFINITY) { /* fully masked: O = 0, LSE = -inf */
            xattn__cpu_write_empty_row(cx, b, h, i);
            continue;
        }
        /* NaN in m (a NaN score) makes l, and so every output, NaN. */
        cx->uk->store(cx->a->o, xattn__cpu_qrow(&p->o, p, b, i, h), p->o.sd,
                      sc->acc + r * cx->Dvp, p->Dv, p->o.dtype, 1.0f / l);
        if (p->has_lse)
            cx->a->lse[xattn__cpu_lse_idx(p, b, h, i)] = m + logf(l);
    }
}

void xattn_cpu_flash(const xattn_cpu_args *a, void *ws, uint64_t *tiles_done, int *tile_k)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    const uint64_t per = xattn__cpu_scratch_bytes(p);
    if (p->poison)
        xattn__cpu_poison(ws, per * (uint64_t)nt, nt);

    const xattn__cpu_qtiling qt = xattn__cpu_qtiling_of(p);
    const int64_t nqt = (p->Sq + qt.pos - 1) / qt.pos;
    const int64_t units = p->B * p->Hkv * qt.hblocks * nqt;
    uint64_t tiles = 0;
    /* Dynamic: under causal masks or uneven lengths, tiles differ in work. */
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) reduction(+ : tiles)
#endif
    for (int64_t u = 0; u < units; u++) {
        const int64_t t = u % nqt, hb = (u / nqt) % qt.hblocks;
        const int64_t hk = (u / (nqt * qt.hblocks)) % p->Hkv, b = u / (nqt * qt.hblocks * p->Hkv);
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
        tiles += xattn__cpu_attend(&cx, &sc, b, h0, nh, i0, np, 0, INT64_MAX);
        xattn__cpu_flash_finish(&cx, &sc, b, nh * np);
    }
    if (tiles_done)
        *tiles_done = tiles;
    if (tile_k)
        *tile_k = XATTN_CPU_BK;
}
