/*
 * NAIVE: the "standard" attention in three phases over a materialized score
 * matrix S [B, Hq, Sq, Sk] f32 (row (b, h, i) at ((b*Hq + h)*Sq + i)*Sk):
 *   qk       S = Q K^T * scale with softcap, ALiBi, bias; -inf where masked
 *   softmax  P = softmax(S) row by row, in place; LSE
 *   pv       O = P V
 *
 * Both products run on the register-tiled micro-kernel uk->qk_tile (the one
 * FLASH uses for Q K^T): st[c*NL + r] = sum_d A[d*NL + r] * Bm[c*ldb + d], an
 * outer product of an operand A laid out [depth][NL lanes] with the rows of a
 * row-major operand Bm. Choosing the operands so that S and P stay row-major
 * means no transposes in the hot loops:
 *   qk  A = K^T of a tile of NL keys (built once per work item, which holds a
 *       few consecutive tiles, and shared by all its query blocks), Bm = NQ
 *       rows of Q times qscale: st is the row-major block S[rows][keys], copied
 *       into the rows of S (a contiguous stretch per row) after the rest of the
 *       scale (post, see xattn__cpu_ctx), softcap, ALiBi, bias and masks.
 *   pv  A = a chunk of KC rows of V, NL columns of Dv at a time, Bm = the rows
 *       of P read in place from the score matrix: st is the row-major block
 *       O[rows][NL columns] of that key chunk, summed into the output rows.
 * Work items: qk (b, h, group of KV tiles, chunk of query blocks); pv (b, h,
 * query block). Their scratch (about 150 KiB) lives on the stack, so the only
 * workspace is the score matrix itself. Rows a sequence does not own (varlen)
 * are never touched; padding rows get S = -inf, P = 0, O = 0.
 *
 * Executed work (xattn_cpu_work), counted per thread: qk, each computed tile's
 * real rows times its keys below len_k (the zero lanes past len_k and the
 * tiles or blocks skipped left out); pv, each block's real rows times the keys
 * of each chunk it multiplies, column by column of V.
 */
#include "xattn_cpu_common.h"

#include <limits.h>

#define NQ XATTN_CPU_BK      /* query rows per block (the rows of st) */
#define NL XATTN_CPU_BQ      /* lanes of st: keys (qk) or Dv columns (pv) */
#define KC 256               /* keys per pv chunk (the depth of its products) */
#define DM XATTN__CPU_DMAX   /* largest D (a multiple of XATTN__CPU_PAD) */
#define TAILR XATTN__CPU_PAD /* rows per copied group of P (see pv) */

_Static_assert(NQ % XATTN__CPU_PAD == 0, "NQ: multiple of the row padding");
_Static_assert(DM % XATTN__CPU_PAD == 0, "DMAX: multiple of the padding");
_Static_assert(DM / XATTN__CPU_PAD <= 32, "qk: one bit per KV tile of a group");

void xattn__cpu_naive_blocks(int *rows, int *keys)
{
    *rows = NQ;
    *keys = NL;
}

uint64_t xattn__cpu_naive_workspace_bytes(const xattn_problem *p)
{
    return (uint64_t)p->B * (uint64_t)p->Hq * (uint64_t)p->Sq * (uint64_t)p->Sk * 4u;
}

/* Row i of (b, h) in the score matrix; NULL where there is none (Sk = 0: the
 * driver allocates no bytes, and no arithmetic may be done on NULL). */
static float *xattn__cpu_srow(const xattn_problem *p, float *s, int64_t b, int64_t h, int64_t i)
{
    if (!s)
        return NULL;
    return s + (((uint64_t)b * (uint64_t)p->Hq + (uint64_t)h) * (uint64_t)p->Sq + (uint64_t)i) *
                   (uint64_t)p->Sk;
}

static void xattn__cpu_fill(float *x, int64_t n, float v)
{
    for (int64_t t = 0; t < n; t++)
        x[t] = v;
}

/* Real rows of a block of nrows owned rows starting at row i0 of sequence b. */
static int xattn__cpu_real_rows(const xattn_problem *p, int64_t b, int64_t i0, int64_t nrows)
{
    return (int)xattn__cpu_min(xattn__cpu_max((int64_t)p->len_q[b] - i0, 0), nrows);
}

/*
 * Phase 1. One work item: the keys [ja0, ja0 + T*NL) of T consecutive KV
 * tiles for the rows of a chunk of query blocks of (b, h), with T as large as
 * the K^T scratch allows (DM / Dp). K^T of a tile is built (lanes nk..NL zero)
 * when the first block that needs it comes; each block loads its Q rows
 * (times qscale) once for the T tiles, runs the products and writes its rows'
 * stretches of S.
 */
void xattn__cpu_naive_qk(const xattn_cpu_args *a, float *scores, xattn_cpu_work *w)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const xattn__cpu_uk *uk = cx.uk;
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    if (p->poison)
        xattn__cpu_poison(scores, xattn__cpu_naive_workspace_bytes(p), nt);
    const int64_t D = p->D, Dp = xattn__cpu_round_up(D, XATTN__CPU_PAD), Sk = p->Sk;
    const int64_t T = DM / Dp, ngrp = (Sk + T * NL - 1) / (T * NL);
    const int64_t nblk = (p->Sq + NQ - 1) / NQ;
    /* The query blocks of a head are split into chunks only when there are
     * too few (b, h, tile group) items to keep the threads busy: every chunk
     * builds its own K^T. */
    const int64_t items = p->B * p->Hq * ngrp;
    if (items == 0 || nblk == 0)
        return; /* no scores */
    int64_t nch = items >= 8 * nt ? 1 : xattn__cpu_min(nblk, (8 * nt + items - 1) / items);
    const int64_t bpc = (nblk + nch - 1) / nch;
    nch = (nblk + bpc - 1) / bpc;
    const int64_t units = items * nch;
    uint64_t qk = 0;

    /* S goes out with streaming stores (it is read back from memory by the
     * softmax phase); each thread fences them before the region's barrier. */
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(+ : qk)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t u = 0; u < units; u++) {
            const int64_t g = u % ngrp, ch = (u / ngrp) % nch;
            const int64_t h = (u / (ngrp * nch)) % p->Hq, b = u / (ngrp * nch * p->Hq);
            const int64_t rows = xattn_problem_rows_q(p, b);
            const int64_t ibeg = ch * bpc * NQ, iend = xattn__cpu_min((ch + 1) * bpc * NQ, rows);
            const int64_t ja0 = g * T * NL, jend = xattn__cpu_min(ja0 + T * NL, Sk);
            const int64_t hk = h / p->group;
            _Alignas(64) float kq[DM * NL]; /* K^T of tile t at kq + t*Dp*NL, [d][c] */
            _Alignas(64) float qr[NQ * DM]; /* Q rows of the block times qscale, pitch Dp */
            _Alignas(64) float st[NQ * NL]; /* S block: st[r*NL + c] = s(i0 + r, ja + c) */
            _Alignas(64) float kr[DM];      /* one converted K row */
            xattn__cpu_row rws[NQ];
            unsigned have_kq = 0; /* bit t: K^T of tile t built (T <= DM / 16) */
            for (int64_t i0 = ibeg; i0 < iend; i0 += NQ) {
                const int64_t nrows = xattn__cpu_min(NQ, iend - i0);
                const int R = xattn__cpu_real_rows(p, b, i0, nrows);
                for (int64_t r = R; r < nrows; r++) /* padding rows */
                    xattn__cpu_fill(xattn__cpu_srow(p, scores, b, h, i0 + r) + ja0, jend - ja0,
                                    -INFINITY);
                int64_t ulo = INT64_MAX, uhi = INT64_MIN;
                for (int r = 0; r < R; r++) {
                    xattn__cpu_row_init(&cx, &rws[r], b, h, i0 + r, ja0, jend);
                    if (rws[r].lo < rws[r].hi) {
                        ulo = xattn__cpu_min(ulo, rws[r].lo);
                        uhi = xattn__cpu_max(uhi, rws[r].hi);
                    }
                }
                if (ulo >= uhi) { /* every row of the block masked on these keys */
                    for (int r = 0; r < R; r++)
                        xattn__cpu_fill(xattn__cpu_srow(p, scores, b, h, i0 + r) + ja0, jend - ja0,
                                        -INFINITY);
                    continue;
                }
                /* Rows R .. round_up(R, 16) are read by the micro-kernel: zeros. */
                const int Rz = (int)xattn__cpu_round_up(R, XATTN__CPU_PAD);
                for (int r = 0; r < R; r++)
                    uk->load(qr + r * Dp, a->q, xattn__cpu_qrow(&p->q, p, b, i0 + r, h), p->q.sd, D,
                             p->q.dtype, cx.qscale);
                xattn__cpu_fill(qr + R * Dp, (Rz - R) * Dp, 0.0f);

                for (int64_t t = 0; ja0 + t * NL < jend; t++) {
                    const int64_t ja = ja0 + t * NL, nk = xattn__cpu_min(NL, jend - ja);
                    float *kt = kq + t * Dp * NL;
                    if (uhi <= ja || ulo >= ja + nk) { /* no row has keys here */
                        for (int r = 0; r < R; r++)
                            xattn__cpu_fill(xattn__cpu_srow(p, scores, b, h, i0 + r) + ja, nk,
                                            -INFINITY);
                        continue;
                    }
                    if (!(have_kq & (1u << t))) {
                        /* Keys past len_k are masked for every row and, packed
                         * (varlen), not even in the buffer: their lanes are 0. */
                        const int64_t nl =
                            xattn__cpu_max(0, xattn__cpu_min(nk, (int64_t)p->len_k[b] - ja));
                        for (int64_t c = 0; c < nl; c++) {
                            uk->load(kr, a->k, xattn__cpu_krow(&p->k, p, b, ja + c, hk), p->k.sd, D,
                                     p->k.dtype, xattn__cpu_kv_mul(&cx, &p->k, hk));
                            for (int64_t d = 0; d < D; d++)
                                kt[d * NL + c] = kr[d];
                        }
                        if (nl < NL)
                            for (int64_t d = 0; d < D; d++)
                                xattn__cpu_fill(kt + d * NL + nl, NL - nl, 0.0f);
                        have_kq |= 1u << t;
                    }
                    uk->qk_tile(st, kt, qr, (int)Dp, (int)D, R, (int)nk);
                    /* The rest of a |scale| > 1, on the whole block (lanes past
                     * nk and keys outside a row's interval are never copied). */
                    if (cx.post != 1.0f)
                        uk->scale(st, (int64_t)R * NL, cx.post);
                    const int64_t nl_real = xattn__cpu_min(nk, (int64_t)p->len_k[b] - ja);
                    qk += (uint64_t)R * (uint64_t)xattn__cpu_max(0, nl_real);

                    /* Softcap on the valid stretch, then ALiBi, bias and -inf on
                     * the rest of the tile (nothing to do for a row that covers
                     * the tile when there are no modifications). */
                    for (int r = 0; r < R; r++) {
                        const xattn__cpu_row *rw = &rws[r];
                        float *dst = xattn__cpu_srow(p, scores, b, h, i0 + r) + ja;
                        const int64_t lo = xattn__cpu_max(rw->lo, ja);
                        const int64_t hi = xattn__cpu_min(rw->hi, ja + nk);
                        if (lo >= hi) {
                            xattn__cpu_fill(dst, nk, -INFINITY);
                            continue;
                        }
                        float *sr = st + r * NL;
                        if (cx.vcap > 0.0f)
                            uk->softcap(sr + (lo - ja), hi - lo, cx.vcap);
                        if (cx.mods || lo > ja || hi < ja + nk)
                            xattn__cpu_mod_row(&cx, rw, sr, 1, ja, nk);
                        if (uk->copy_stream)
                            uk->copy_stream(dst, sr, nk);
                        else
                            memcpy(dst, sr, (size_t)nk * sizeof(float));
                    }
                }
            }
        }
        if (uk->stream_fence)
            uk->stream_fence();
        xattn__cpu_bind_leave(a->bind, bound);
    }
    w->qk_pairs += qk;
}

void xattn__cpu_naive_softmax(const xattn_cpu_args *a, float *scores)
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
#pragma omp parallel num_threads(nt)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 64) nowait
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
                if (hi > lo) /* then Sk > 0, and s is a row of the matrix */
                    m = uk->row_max(s + lo, hi - lo);
            }
            const int seen = m != -INFINITY;
            float c = 1.0f;
            if (seen)
                sum = uk->exp_sum(s + lo, hi - lo, m);
            /* A real row folds its head's sink into the denominator (a padding
             * row has none: it keeps LSE = -inf). */
            if (p->has_sinks && i < p->len_q[b])
                c = xattn_sem_sink_fold(&m, &sum, xattn__cpu_sink(&cx, h));
            if (!seen) {    /* padding or fully masked: P = 0 */
                if (Sk > 0) /* Sk = 0: no score matrix, and memset wants a pointer */
                    memset(s, 0, (size_t)Sk * sizeof(float));
            } else {
                uk->scale(s + lo, hi - lo, c / sum);
                memset(s, 0, (size_t)lo * sizeof(float));
                memset(s + hi, 0, (size_t)(Sk - hi) * sizeof(float));
            }
            if (p->has_lse)
                a->lse[xattn__cpu_lse_idx(p, b, h, i)] = xattn_sem_lse(m, sum);
        }
        xattn__cpu_bind_leave(a->bind, bound);
    }
}

/* V rows ca .. ca+kc-1 of (b, hk), columns dv0 .. dv0+nm-1, into vt (pitch
 * NL, zeros past nm), by runs of keys within one page when paged. Returns 1
 * when they are all finite. */
static int xattn__cpu_load_v(const xattn__cpu_ctx *cx, float *vt, int64_t b, int64_t hk, int64_t ca,
                             int64_t kc, int64_t dv0, int64_t nm)
{
    const xattn_problem *p = cx->p;
    const xattn_view *v = &p->v;
    const int rows = v->sd == 1 && cx->uk->load_rows;
    const float mul = xattn__cpu_kv_mul(cx, v, hk); /* an fp8 cache's scale, else 1 */
    int bad = 0;
    for (int64_t c0 = 0, run; c0 < kc; c0 += run) {
        run = xattn__cpu_krun(p, v, b, ca + c0, kc - c0);
        const int64_t idx = xattn__cpu_krow(v, p, b, ca + c0, hk) + dv0 * v->sd;
        float *dst = vt + c0 * NL;
        if (rows) {
            bad |= xattn__cpu_load_rows(cx->uk, dst, NL, cx->a->v, idx, v->ss, nm, NL, run,
                                        v->dtype, 1, mul);
            continue;
        }
        for (int64_t c = 0; c < run; c++) {
            cx->uk->load(dst + c * NL, cx->a->v, idx + c * v->ss, v->sd, nm, v->dtype, mul);
            xattn__cpu_fill(dst + c * NL + nm, NL - nm, 0.0f);
        }
    }
    return rows ? !bad : !cx->uk->nonfinite(vt, kc * NL);
}

/*
 * Phase 3. One work item: a block of NQ query rows of (b, h). The keys of the
 * union of its rows' intervals go by chunks of KC and the columns of V by NL:
 * for each (chunk, columns) the V block is converted once (lanes past Dv zero)
 * and multiplied with the P rows of the block, read in place (groups of rows
 * that do not fill 16 rows, or a score matrix too wide for int strides, go
 * through a small copy, as the micro-kernel reads whole groups of rows).
 *
 * P is 0 outside each row's interval, so with a finite V block the masked
 * keys add exact zeros. A V block holding inf or NaN goes instead through the
 * careful path of FLASH: only each row's own keys, a masked one (P = 0 and
 * score -inf) never read into O, an unmasked one whose weight underflowed to
 * 0 still bringing its inf and NaN (as in the reference, where it is tiny).
 */
void xattn__cpu_naive_pv(const xattn_cpu_args *a, const float *probs, xattn_cpu_work *w)
{
    const xattn_problem *p = a->p;
    xattn__cpu_ctx cx;
    xattn__cpu_ctx_init(&cx, a);
    const xattn__cpu_uk *uk = cx.uk;
    const int nt = a->num_threads > 0 ? a->num_threads : 1;
    (void)nt; /* unused without OpenMP */
    const int64_t Dv = p->Dv, Dvp = cx.Dvp, Sk = p->Sk;
    const int64_t nblk = (p->Sq + NQ - 1) / NQ;
    const int64_t units = p->B * p->Hq * nblk;
    /* qk_tile indexes rows of P with int products c*ldk (c < NQ). */
    const int direct = Sk <= INT_MAX / (2 * NQ);
    float *P = (float *)probs; /* read only; srow computes addresses */
    uint64_t pv = 0;

#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(+ : pv)
#endif
    {
        const int bound = xattn__cpu_bind_enter(a->bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1) nowait
#endif
        for (int64_t u = 0; u < units; u++) {
            const int64_t i0 = (u % nblk) * NQ, h = (u / nblk) % p->Hq, b = u / (nblk * p->Hq);
            const int64_t rows = xattn_problem_rows_q(p, b);
            if (i0 >= rows)
                continue;
            const int64_t nrows = xattn__cpu_min(NQ, rows - i0);
            const int R = xattn__cpu_real_rows(p, b, i0, nrows);
            for (int64_t r = R; r < nrows; r++) {
                /* Padding rows: O = 0 (LSE was written by the softmax phase). */
                int64_t idx = xattn__cpu_qrow(&p->o, p, b, i0 + r, h);
                for (int64_t d = 0; d < Dv; d++)
                    xattn__cpu_store1(a->o, idx + d * p->o.sd, p->o.dtype, 0.0f);
            }
            if (R == 0)
                continue;
            _Alignas(64) float vt[KC * NL];    /* V[ca + c][dv0 + x] at vt[c*NL + x] */
            _Alignas(64) float acc[NQ * DM];   /* output rows, pitch Dvp */
            _Alignas(64) float st[NQ * NL];    /* one product: st[r*NL + x] */
            _Alignas(64) float pc[TAILR * KC]; /* copied P rows, pitch KC */
            xattn__cpu_row rws[NQ];
            int64_t ulo = INT64_MAX, uhi = INT64_MIN;
            for (int r = 0; r < R; r++) {
                xattn__cpu_row_init(&cx, &rws[r], b, h, i0 + r, 0, INT64_MAX);
                if (rws[r].lo < rws[r].hi) {
                    ulo = xattn__cpu_min(ulo, rws[r].lo);
                    uhi = xattn__cpu_max(uhi, rws[r].hi);
                }
            }
            memset(acc, 0, (size_t)R * (size_t)Dvp * sizeof(float));
            const int64_t hk = h / p->group;
            const float *p0 = xattn__cpu_srow(p, P, b, h, i0);
            const int Rd = direct ? R / XATTN__CPU_PAD * XATTN__CPU_PAD : 0;
            for (int64_t ca = ulo; ca < uhi; ca += KC) {
                const int64_t kc = xattn__cpu_min(KC, uhi - ca);
                int any = 0; /* the union may have holes (windows) */
                for (int r = 0; r < R && !any; r++)
                    any = rws[r].lo < ca + kc && rws[r].hi > ca && rws[r].lo < rws[r].hi;
                if (!any)
                    continue;
                if (ca + kc < uhi) /* the next chunk's V rows (converted once per query block) */
                    xattn__cpu_prefetch_rows(p, &p->v, a->v, Dv, b, hk, ca + kc,
                                             xattn__cpu_min(KC, uhi - ca - kc));
                for (int64_t dv0 = 0; dv0 < Dv; dv0 += NL) {
                    const int64_t nm = xattn__cpu_min(NL, Dv - dv0);
                    const int64_t nmz = xattn__cpu_round_up(nm, XATTN__CPU_PAD);
                    if (xattn__cpu_load_v(&cx, vt, b, hk, ca, kc, dv0, nm)) {
                        if (Rd > 0)
                            uk->qk_tile(st, vt, p0 + ca, (int)Sk, (int)kc, Rd, (int)nm);
                        for (int r0 = Rd; r0 < R; r0 += TAILR) {
                            const int g = (int)xattn__cpu_min(TAILR, R - r0);
                            for (int r = 0; r < g; r++)
                                memcpy(pc + r * KC, p0 + (uint64_t)(r0 + r) * (uint64_t)Sk + ca,
                                       (size_t)kc * sizeof(float));
                            for (int r = g; r < TAILR; r++)
                                xattn__cpu_fill(pc + r * KC, kc, 0.0f);
                            uk->qk_tile(st + r0 * NL, vt, pc, KC, (int)kc, g, (int)nm);
                        }
                        pv += (uint64_t)R * (uint64_t)kc * (uint64_t)nm;
                        for (int r = 0; r < R; r++) {
                            float *ar = acc + r * Dvp + dv0;
                            const float *sr = st + r * NL;
                            for (int64_t x = 0; x < nm; x++)
                                ar[x] += sr[x];
                        }
                        continue;
                    }
                    for (int r = 0; r < R; r++) {
                        const int64_t lo = xattn__cpu_max(rws[r].lo, ca);
                        const int64_t hi = xattn__cpu_min(rws[r].hi, ca + kc);
                        const float *pr = p0 + (uint64_t)r * (uint64_t)Sk;
                        float *ar = acc + r * Dvp + dv0;
                        for (int64_t j = lo; j < hi; j++) {
                            const float *vr = vt + (j - ca) * NL;
                            if (pr[j] != 0.0f) {
                                uk->axpy_rows(ar, 0, 1, &pr[j], vr, (int)nmz);
                                pv += (uint64_t)nm;
                            } else if (uk->nonfinite(vr, nmz) &&
                                       xattn__cpu_score1(&cx, &rws[r], b, j) != -INFINITY)
                                xattn__cpu_add_negligible(ar, vr, nm);
                        }
                    }
                }
            }
            for (int r = 0; r < R; r++)
                uk->store(a->o, xattn__cpu_qrow(&p->o, p, b, i0 + r, h), p->o.sd, acc + r * Dvp, Dv,
                          p->o.dtype, 1.0f);
        }
        xattn__cpu_bind_leave(a->bind, bound);
    }
    w->pv_terms += pv;
}
