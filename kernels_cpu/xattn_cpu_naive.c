/*
 * NAIVE: the "standard" attention in three phases over a materialized score
 * matrix S [B, Hq, Sq, Sk] f32 (row (b, h, i) at ((b*Hq + h)*Sq + i)*Sk):
 *   qk       S = (scale*Q) K^T with softcap, ALiBi, bias; -inf where masked
 *   softmax  P = softmax(S) row by row, in place; LSE
 *   pv       O = P V
 * Each phase runs over blocks of 8 query rows of one (sequence, head), with
 * its little scratch (8 converted Q rows or accumulators, one K/V row) on the
 * stack, so the only workspace is the score matrix itself. K and V rows are
 * converted to f32 once per block and shared by its rows. Rows a sequence does
 * not own (varlen) are never touched; padding rows get S = -inf, P = 0, O = 0.
 */
#include "xattn_cpu_common.h"

#define NB XATTN__CPU_NAIVE_ROWS
#define DPAD (XATTN__CPU_DMAX + XATTN__CPU_PAD)

uint64_t xattn_cpu_naive_workspace_bytes(const xattn_problem *p)
{
    return (uint64_t)p->B * (uint64_t)p->Hq * (uint64_t)p->Sq * (uint64_t)p->Sk * 4u;
}

static float *xattn__cpu_srow(const xattn_problem *p, float *s, int64_t b, int64_t h, int64_t i)
{
    return s + (((uint64_t)b * (uint64_t)p->Hq + (uint64_t)h) * (uint64_t)p->Sq + (uint64_t)i) *
                   (uint64_t)p->Sk;
}

/* Work items: (b, h, block of NB rows). Sets i0, the rows the sequence owns in
 * the block (nrows) and how many of them are real (R); 0 when none. */
static int xattn__cpu_naive_block(const xattn_problem *p, int64_t u, int64_t *b, int64_t *h,
                                  int64_t *i0, int64_t *nrows, int *R)
{
    const int64_t nblk = (p->Sq + NB - 1) / NB;
    *b = u / (nblk * p->Hq);
    *h = (u / nblk) % p->Hq;
    *i0 = (u % nblk) * NB;
    const int64_t rows = xattn_problem_rows_q(p, *b);
    if (*i0 >= rows)
        return 0;
    *nrows = xattn__cpu_min(NB, rows - *i0);
    *R = (int)xattn__cpu_min(xattn__cpu_max((int64_t)p->len_q[*b] - *i0, 0), *nrows);
    return 1;
}

void xattn_cpu_naive_qk(const xattn_cpu_args *a, float *scores)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const xattn__cpu_uk *uk = cx.uk;
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    if (p->poison)
        xattn__cpu_poison(scores, xattn_cpu_naive_workspace_bytes(p), nt);
    const int64_t D = p->D, Dp = xattn__cpu_round_up(D, XATTN__CPU_PAD), Sk = p->Sk;
    const int64_t units = p->B * p->Hq * ((p->Sq + NB - 1) / NB);

#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
    for (int64_t u = 0; u < units; u++) {
        int64_t b, h, i0, nrows;
        int R;
        if (!xattn__cpu_naive_block(p, u, &b, &h, &i0, &nrows, &R))
            continue;
        for (int64_t r = R; r < nrows; r++) { /* padding rows */
            float *s = xattn__cpu_srow(p, scores, b, h, i0 + r);
            for (int64_t j = 0; j < Sk; j++)
                s[j] = -INFINITY;
        }
        if (R == 0)
            continue;
        float qb[NB * DPAD], kb[DPAD], dots[NB];
        xattn__cpu_row rows[NB];
        int64_t ulo = INT64_MAX, uhi = INT64_MIN;
        for (int r = 0; r < R; r++) {
            xattn__cpu_row_init(&cx, &rows[r], b, h, i0 + r, 0, INT64_MAX);
            if (rows[r].lo < rows[r].hi) {
                ulo = xattn__cpu_min(ulo, rows[r].lo);
                uhi = xattn__cpu_max(uhi, rows[r].hi);
            }
            float *q = qb + r * Dp;
            uk->load(q, a->q, xattn__cpu_qrow(&p->q, p, b, i0 + r, h), p->q.sd, D, p->q.dtype,
                     p->scale);
            for (int64_t d = D; d < Dp; d++)
                q[d] = 0.0f;
        }
        for (int64_t d = D; d < Dp; d++)
            kb[d] = 0.0f;
        const int64_t hk = h / p->group;
        /* Dot products only where some row of the block has valid keys. */
        for (int64_t j = ulo; j < uhi; j++) {
            uk->load(kb, a->k, xattn__cpu_krow(&p->k, p, b, j, hk), p->k.sd, D, p->k.dtype, 1.0f);
            uk->dot_rows(dots, qb, (int)Dp, R, kb, (int)Dp);
            for (int r = 0; r < R; r++)
                xattn__cpu_srow(p, scores, b, h, i0 + r)[j] = dots[r];
        }
        /* Modifications on the valid keys, -inf on all others. */
        for (int r = 0; r < R; r++) {
            float *s = xattn__cpu_srow(p, scores, b, h, i0 + r);
            if (p->softcap > 0.0f)
                uk->softcap(s + rows[r].lo, rows[r].hi - rows[r].lo, p->softcap);
            xattn__cpu_mod_row(&cx, &rows[r], s, 1, 0, Sk);
        }
    }
}

void xattn_cpu_naive_softmax(const xattn_cpu_args *a, float *scores)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const xattn__cpu_uk *uk = cx.uk;
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    const int64_t Sk = p->Sk;
    const int64_t units = p->B * p->Hq * p->Sq;

#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 64)
#endif
    for (int64_t u = 0; u < units; u++) {
        const int64_t i = u % p->Sq, h = (u / p->Sq) % p->Hq, b = u / (p->Sq * p->Hq);
        if (i >= xattn_problem_rows_q(p, b))
            continue;
        float *s = xattn__cpu_srow(p, scores, b, h, i);
        float m = -INFINITY, sum = 0.0f;
        int64_t lo = 0, hi = 0;
        if (i < p->len_q[b]) {
            /* Outside the row's interval S is -inf already; only [lo, hi) can
             * hold a max. */
            xattn__cpu_row rw;
            xattn__cpu_row_init(&cx, &rw, b, h, i, 0, INT64_MAX);
            lo = rw.lo;
            hi = rw.hi;
            m = uk->row_max(s + lo, hi - lo);
        }
        if (m == -INFINITY) { /* padding or fully masked: P = 0, LSE = -inf */
            memset(s, 0, (size_t)Sk * sizeof(float));
        } else {
            sum = uk->exp_sum(s + lo, hi - lo, m);
            uk->scale(s + lo, hi - lo, 1.0f / sum);
            memset(s, 0, (size_t)lo * sizeof(float));
            memset(s + hi, 0, (size_t)(Sk - hi) * sizeof(float));
        }
        if (p->has_lse)
            a->lse[xattn__cpu_lse_idx(p, b, h, i)] = m == -INFINITY ? -INFINITY : m + logf(sum);
    }
}

void xattn_cpu_naive_pv(const xattn_cpu_args *a, const float *probs)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const xattn__cpu_uk *uk = cx.uk;
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    const int64_t Dv = p->Dv, Dvp = cx.Dvp;
    const int64_t units = p->B * p->Hq * ((p->Sq + NB - 1) / NB);
    float *P = (float *)probs; /* read only; srow computes addresses */

#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
#endif
    for (int64_t u = 0; u < units; u++) {
        int64_t b, h, i0, nrows;
        int R;
        if (!xattn__cpu_naive_block(p, u, &b, &h, &i0, &nrows, &R))
            continue;
        for (int64_t r = R; r < nrows; r++) {
            /* Padding rows: O = 0 (LSE was written by the softmax phase). */
            int64_t idx = xattn__cpu_qrow(&p->o, p, b, i0 + r, h);
            for (int64_t d = 0; d < Dv; d++)
                xattn__cpu_store1(a->o, idx + d * p->o.sd, p->o.dtype, 0.0f);
        }
        if (R == 0)
            continue;
        float acc[NB * DPAD], vb[DPAD], coef[NB];
        const float *prow[NB];
        xattn__cpu_row rws[NB];
        int64_t ulo = INT64_MAX, uhi = INT64_MIN;
        for (int r = 0; r < R; r++) {
            xattn__cpu_row *rw = &rws[r];
            xattn__cpu_row_init(&cx, rw, b, h, i0 + r, 0, INT64_MAX);
            if (rw->lo < rw->hi) {
                ulo = xattn__cpu_min(ulo, rw->lo);
                uhi = xattn__cpu_max(uhi, rw->hi);
            }
            prow[r] = xattn__cpu_srow(p, P, b, h, i0 + r);
            for (int64_t d = 0; d < Dvp; d++)
                acc[r * Dvp + d] = 0.0f;
        }
        for (int64_t d = Dv; d < Dvp; d++)
            vb[d] = 0.0f;
        const int64_t hk = h / p->group;
        /* P is 0 outside each row's interval; zeros are skipped by axpy_rows,
         * so a masked key never reads into O (even a NaN in V). A V row with
         * inf/NaN still reaches a row where its key is not masked but its
         * weight underflowed to 0 (as in the reference, where it is tiny). */
        for (int64_t j = ulo; j < uhi; j++) {
            int any = 0, zeros = 0;
            for (int r = 0; r < R; r++) {
                coef[r] = prow[r][j];
                any |= coef[r] != 0.0f;
                zeros |= coef[r] == 0.0f;
            }
            uk->load(vb, a->v, xattn__cpu_krow(&p->v, p, b, j, hk), p->v.sd, Dv, p->v.dtype, 1.0f);
            if (any)
                uk->axpy_rows(acc, (int)Dvp, R, coef, vb, (int)Dvp);
            if (zeros && uk->nonfinite(vb, Dvp))
                for (int r = 0; r < R; r++)
                    if (coef[r] == 0.0f && xattn__cpu_score1(&cx, &rws[r], b, j) != -INFINITY)
                        xattn__cpu_add_negligible(acc + r * Dvp, vb, Dv);
        }
        for (int r = 0; r < R; r++)
            uk->store(a->o, xattn__cpu_qrow(&p->o, p, b, i0 + r, h), p->o.sd, acc + r * Dvp, Dv,
                      p->o.dtype, 1.0f);
    }
}
