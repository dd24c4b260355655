/*
 * Work accounting: FLOPs and bytes of one attention call, computed from the
 * resolved problem alone, so that every backend's records count the same way
 * (docs/measurement.md, "Work").
 *
 * The masks of docs/semantics.md step 6 leave query row i of a sequence (aligned
 * position p, step 3) the keys lo(p) <= j < hi(p) with
 *   lo(p) = max(0, p - left)                      (left < 0: lo = 0)
 *   hi(p) = min(Lk, p + c),  c = min(1 if causal, right + 1 if right >= 0)
 * (xattn_sem_rule in kernels_common/xattn_semantics.h, the same rule the
 * kernels of every backend use). Both ends are non-decreasing in p, so a row's
 * valid keys are one interval and the union over consecutive rows is one
 * interval too. The useful pairs are
 * sum over real rows of max(0, hi - lo): a piecewise linear function of p with
 * breakpoints at p = Lk - c and p = left, summed in closed form per segment.
 */
#include <math.h>
#include <stdint.h>

#include "xattn_internal.h"

static inline int64_t xattn__min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static inline int64_t xattn__max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* sum over integers p in [a, b) of max(0, A + s*p), s in {-1, 0, 1}. */
static __int128 xattn__sum_pos_linear(int64_t a, int64_t b, int64_t A, int s)
{
    if (b <= a)
        return 0;
    if (s == 0)
        return A > 0 ? (__int128)(b - a) * A : 0;
    if (s > 0) { /* A + p > 0  <=>  p >= 1 - A */
        int64_t p0 = xattn__max64(a, 1 - A);
        if (p0 >= b)
            return 0;
        __int128 n = b - p0;
        return n * A + ((__int128)p0 + (b - 1)) * n / 2;
    }
    /* A - p > 0  <=>  p <= A - 1 */
    int64_t p1 = xattn__min64(b, A);
    if (p1 <= a)
        return 0;
    __int128 n = p1 - a;
    return n * A - ((__int128)a + (p1 - 1)) * n / 2;
}

/* Valid pairs of the real rows i in [i0, i1) of a sequence. */
static __int128 xattn__rule_pairs(const xattn_sem_rule *r, int64_t i0, int64_t i1)
{
    if (r->lk <= 0 || i1 <= i0)
        return 0;
    const int64_t P0 = i0 + r->off, P1 = i1 + r->off;
    /* Breakpoints: hi switches from p + c to Lk at p = Lk - c, lo from 0 to
     * p - L at p = L; between them the count is linear. */
    int64_t cut[4] = {P0, xattn__min64(xattn__max64(r->lk - r->reach, P0), P1),
                      xattn__min64(xattn__max64(r->left, P0), P1), P1};
    if (cut[1] > cut[2]) {
        int64_t t = cut[1];
        cut[1] = cut[2];
        cut[2] = t;
    }
    __int128 total = 0;
    for (int k = 0; k < 3; k++) {
        const int64_t a = cut[k], b = cut[k + 1];
        if (b <= a)
            continue;
        const int hi_lin = a < r->lk - r->reach; /* hi = p + c on [a, b) */
        const int lo_lin = a >= r->left;         /* lo = p - L on [a, b) */
        const int64_t A = (hi_lin ? r->reach : r->lk) + (lo_lin ? r->left : 0);
        total += xattn__sum_pos_linear(a, b, A, hi_lin - lo_lin);
    }
    return total;
}

double xattn__useful_pairs(const xattn_problem *p)
{
    __int128 total = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const xattn_sem_rule r = xattn_problem_rule(p, b);
        total += xattn__rule_pairs(&r, 0, r.lq);
    }
    return (double)total * (double)p->Hq;
}

/* The tile walk of one sequence: executed pairs and keys loaded per head. */
static void xattn__rule_tiles(const xattn_sem_rule *r, int64_t tq, int64_t tk, __int128 *pairs,
                              __int128 *keys)
{
    int64_t ia, ib;
    xattn_sem_nonempty_rows(r, &ia, &ib);
    for (int64_t i0 = 0; i0 < r->lq; i0 += tq) {
        const int64_t R = xattn__min64(tq, r->lq - i0);
        const int64_t first = xattn__max64(i0, ia), last = xattn__min64(i0 + R, ib) - 1;
        if (last < first)
            continue; /* every row of the tile is fully masked: nothing runs */
        const int64_t ulo = xattn_sem_lo_at(r, first + r->off);
        const int64_t uhi = xattn_sem_hi_at(r, last + r->off);
        if (uhi <= ulo)
            continue;
        const int64_t t_first = ulo / tk, t_end = (uhi + tk - 1) / tk;
        const int64_t n = xattn__min64(t_end * tk, r->lk) - t_first * tk;
        *pairs += (__int128)R * n;
        *keys += n;
    }
}

double xattn__executed_pairs(const xattn_problem *p, int tile_q, int tile_k)
{
    const int64_t tq = tile_q > 0 ? tile_q : 1, tk = tile_k > 0 ? tile_k : 1;
    __int128 pairs = 0, keys = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const xattn_sem_rule r = xattn_problem_rule(p, b);
        xattn__rule_tiles(&r, tq, tk, &pairs, &keys);
    }
    return (double)pairs * (double)p->Hq;
}

void xattn__work_account(const xattn_problem *p, const xattn_run_info *ri, const xattn__exec *exec,
                         xattn__work *w)
{
    const double Hq = (double)p->Hq, Hkv = (double)p->Hkv, D = (double)p->D, Dv = (double)p->Dv;
    const double qs = (double)xattn_dtype_size(p->q.dtype);
    const double ks = xattn__value_bytes(p->k.dtype); /* q8_0: 34/32, its scales included */
    const int64_t tq = ri->tile_q > 0 ? ri->tile_q : 1, tk = ri->tile_k > 0 ? ri->tile_k : 1;
    const int tiled = p->algo == XATTN_ALGO_FLASH || p->algo == XATTN_ALGO_SPLITKV;

    __int128 useful = 0, tiles_pairs = 0, keys = 0, real_pairs = 0;
    double rows_out = 0, rows_read = 0, keys_read = 0, bias_min = 0;
    int64_t max_lq = 0, max_lk = 0;
    for (int64_t b = 0; b < p->B; b++) {
        const xattn_sem_rule r = xattn_problem_rule(p, b);
        useful += xattn__rule_pairs(&r, 0, r.lq);
        if (tiled)
            xattn__rule_tiles(&r, tq, tk, &tiles_pairs, &keys);
        real_pairs += (__int128)r.lq * r.lk;
        max_lq = xattn__max64(max_lq, r.lq);
        max_lk = xattn__max64(max_lk, r.lk);
        rows_out += (double)xattn_problem_rows_q(p, b);
        /* The minimum reads: Q rows that see a key, keys that some row sees. */
        int64_t ia, ib;
        xattn_sem_nonempty_rows(&r, &ia, &ib);
        if (ib > ia) {
            rows_read += (double)(ib - ia);
            keys_read +=
                (double)(xattn_sem_hi_at(&r, ib - 1 + r.off) - xattn_sem_lo_at(&r, ia + r.off));
        }
        if (p->has_bias && p->bias.sb != 0)
            bias_min += (double)r.lq * (double)r.lk;
    }
    const double dense = (double)p->B * (double)p->Sq * (double)p->Sk * Hq;
    w->pairs_dense = dense;
    w->pairs_useful = (double)useful * Hq;
    w->pairs_executed = tiled ? (double)tiles_pairs * Hq : dense;
    /* A K/V tile load serves tile_heads query heads of one group (GQA
     * packing): ceil(group / tile_heads) loads per KV head. */
    const double th = ri->tile_heads > 1 ? (double)ri->tile_heads : 1.0;
    const double loads = Hkv * ceil((Hq / Hkv) / th);
    w->kv_tile_keys = tiled ? (double)keys * loads : 0.0;
    const double per_pair = 2.0 * (D + Dv);
    w->flops_dense = per_pair * w->pairs_dense;
    w->flops_useful = per_pair * w->pairs_useful;
    w->flops_executed = per_pair * w->pairs_executed;
    w->counted = exec && exec->qk_pairs >= 0 && exec->pv_pairs >= 0;
    if (w->counted) {
        /* What the kernels counted as they ran replaces the model. */
        w->pairs_executed = exec->qk_pairs;
        w->flops_executed = 2.0 * D * exec->qk_pairs + 2.0 * Dv * exec->pv_pairs;
    }
    if (tiled && exec && exec->kv_rows >= 0)
        w->kv_tile_keys = exec->kv_rows;
    w->padding_waste =
        (p->B > 0 && p->Sq > 0 && p->Sk > 0)
            ? 1.0 - (double)real_pairs / ((double)p->B * (double)p->Sq * (double)p->Sk)
            : 0.0;

    /* Bytes. */
    const double out_bytes = rows_out * Hq * (Dv * qs + (p->has_lse ? 4.0 : 0.0));
    double bias_es = 0, bias_heads = 1;
    if (p->has_bias) {
        bias_es = (double)xattn_dtype_size(p->bias.dtype);
        bias_heads = p->bias.sh != 0 ? Hq : 1.0;
        if (p->bias.sb == 0) /* one bias for every sequence: read once at most */
            bias_min = (double)max_lq * (double)max_lk;
    }
    const double bias_bytes_min = bias_min * bias_heads * bias_es;
    /* Sinks: one f32 per query head. A paged cache: the block table's entries
     * of the pages each sequence uses. An append: k_new/v_new read and
     * written into the cache, before the kernels read the cache. */
    double cache_bytes = p->has_sinks ? Hq * 4.0 : 0.0;
    if (p->paged && p->page_size > 0)
        for (int64_t b = 0; b < p->B; b++)
            cache_bytes += 4.0 * (double)((p->len_k[b] + p->page_size - 1) / p->page_size);
    if (p->s_new > 0)
        cache_bytes += 2.0 * (double)p->B * (double)p->s_new * Hkv * (D + Dv) * ks;
    w->bytes_min = rows_read * Hq * D * qs + keys_read * Hkv * (D + Dv) * ks + out_bytes +
                   bias_bytes_min + cache_bytes;
    /* Every kernel reads the bias of the pairs it does not mask, once. */
    const double bias_bytes = p->has_bias ? w->pairs_useful * bias_es : 0.0;
    const double q_bytes = rows_read * Hq * D * qs;
    if (p->algo == XATTN_ALGO_NAIVE) {
        /* The score matrix: written by qk, read and written by softmax, read by pv. */
        const double scores = dense * 4.0;
        w->bytes_actual = w->bytes_min - bias_bytes_min + bias_bytes + 4.0 * scores;
    } else {
        /* K and V tiles are loaded once per query tile and K/V load (above). */
        double actual =
            q_bytes + w->kv_tile_keys * (D + Dv) * ks + out_bytes + bias_bytes + cache_bytes;
        if (p->algo == XATTN_ALGO_SPLITKV) {
            /* Partial O and LSE of every chunk: written, then read by combine. */
            double splits = ri->num_splits > 0 ? (double)ri->num_splits : 1.0;
            double real_rows = 0;
            for (int64_t b = 0; b < p->B; b++)
                real_rows += (double)p->len_q[b];
            actual += 2.0 * splits * real_rows * Hq * (Dv + 1.0) * 4.0;
        }
        w->bytes_actual = actual;
    }
}
