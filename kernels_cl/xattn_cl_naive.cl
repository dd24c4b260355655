/*
 * xattn OpenCL kernels, part 2 of 5: NAIVE, the "standard" attention in three
 * phases over a materialized f32 score matrix S[B, Hq, Sq, Sk] (the workspace):
 *   xattn_naive_qk       S = scores with every modifier, masked keys -inf
 *   xattn_naive_softmax  row-wise softmax in place, LSE written
 *   xattn_naive_pv       O = P V
 * Rows i >= len_q are never scored; the softmax writes their LSE (-inf) and
 * the PV phase their zeros (padded batches only: in packed batches those rows
 * belong to the next sequence). Keys j >= len_k are neither written nor read.
 *
 * qk and pv come in two forms, chosen per device class by the host's tile
 * table (XATTN_NAIVE_LOCAL): GPUs stage NT x NT tiles of the operands in local
 * memory; CPUs (PoCL) read global memory directly, which their caches serve
 * better than emulated local memory, with float8 loads along D for qk and
 * eight output columns a work-item for pv (contiguous rows).
 */

#ifndef XATTN_NAIVE_LOCAL
#define XATTN_NAIVE_LOCAL 1
#endif
/* pv: output columns a work-item (the global form takes eight, in float8). */
#if XATTN_NAIVE_LOCAL
#define XATTN_PV_COLS 1
#else
#define XATTN_PV_COLS 8
#endif

/* Index of S[bh, i, j]. */
#define XATTN_S_AT(bh, i, j) (((long)(bh) * Sq + (long)(i)) * (long)Sk + (long)(j))

/* The score of (i, j) from its dot product; -inf outside the row's keys. */
inline float xattn_naive_score(XATTN_KARGS, float dot, int b, int h, xattn_seq s, long i, long j)
{
    const xattn_sem_rule rule = xattn_rule_of(s, flags, win_l, win_r);
    long lo, hi;
    xattn_row_range(&rule, i, 0, s.lk, &lo, &hi);
    if (j < lo || j >= hi)
        return -INFINITY;
    const float bv =
        (flags & XATTN_F_BIAS) ? xattn_bias_load(bias, XATTN_BIAS_AT(b, h, i, j), flags) : 0.0f;
    return xattn_mod_score(dot * scale, mods, xattn_alibi_slope(meta, B, h, flags),
                           xattn_sem_pos(&rule, i), j, bv);
}

/* The grids are one-dimensional (dimension 0 is the only one every driver
 * allows to be large): a work-group number is split into its tile numbers. */

/* Phase 1. Work-group: NT x NT work-items on NT rows x NT keys of one (b, h);
 * groups numbered (key tile, row tile, bh), key tile fastest. */
__kernel __attribute__((reqd_work_group_size(XATTN_NT * XATTN_NT, 1, 1))) void
xattn_naive_qk(XATTN_KARGS, __global float *S, __global ulong *cnt, const long cnt_at)
{
    const long nj = (Sk + XATTN_NT - 1) / XATTN_NT, ni = (Sq + XATTN_NT - 1) / XATTN_NT;
    long g = get_group_id(0);
    const long jt = g % nj;
    g /= nj;
    const long it = g % ni;
    const int bh = (int)(g / ni);
    const int b = bh / Hq, h = bh - b * Hq, kh = h / group;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    const int tj = get_local_id(0) % XATTN_NT, ti = get_local_id(0) / XATTN_NT;
    const long i0 = it * XATTN_NT, j0 = jt * XATTN_NT;
    const long i = i0 + ti, j = j0 + tj;
#if XATTN_NAIVE_LOCAL
    /* Q and K staged through local memory, NT columns of D at a time. */
    __local float qs[XATTN_NT][XATTN_NT + 1];
    __local float ks[XATTN_NT][XATTN_NT + 1];
    /* A tile with nothing to score runs no step, and no return (kernel
     * shape, xattn_cl_common.cl): `active` is the same for the whole group. */
    const int active = i0 < s.lq && j0 < s.lk;
    const int dend = active ? XATTN_HD : 0;
    const long jl = j0 + ti; /* the key this work-item loads */
    const long ka = jl < s.lk ? XATTN_K_TOK(b, s, jl) + (long)kh * k_sh : 0;
    float dot = 0.0f;
    for (int d0 = 0; d0 < dend; d0 += XATTN_NT) {
        const int d = d0 + tj;
        qs[ti][tj] = (i < s.lq && d < XATTN_HD)
                         ? XATTN_LOAD_Q(q, XATTN_Q_AT(b, s.sq + i, h, d)) : 0.0f;
        ks[ti][tj] = (jl < s.lk && d < XATTN_HD)
                         ? XATTN_LOAD_KV(k, ka + (long)d * k_sd) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int dd = 0; dd < XATTN_NT; dd++)
            dot += qs[ti][dd] * ks[tj][dd];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < s.lq && j < s.lk)
        S[XATTN_S_AT(bh, i, j)] = xattn_naive_score(XATTN_KARGS_PASS, dot, b, h, s, i, j);
    /* Every work-item of a tile that runs computes a dot product, padding
     * lanes (rows or keys past the sequence, zeros) included. */
    if (get_local_id(0) == 0 && (flags & XATTN_F_COUNT))
        cnt[cnt_at + get_group_id(0)] = active ? (ulong)(XATTN_NT * XATTN_NT) : 0;
#else
    /* The work-items inside the sequence compute a dot product; work-item 0
     * (row i0, key j0) counts them before it may leave. */
    if (get_local_id(0) == 0 && (flags & XATTN_F_COUNT))
        cnt[cnt_at + get_group_id(0)] = (ulong)clamp(s.lq - i0, 0L, (long)XATTN_NT) *
                                        (ulong)clamp(s.lk - j0, 0L, (long)XATTN_NT);
    if (i >= s.lq || j >= s.lk)
        return;
    const long qa = XATTN_Q_AT(b, s.sq + i, h, 0);
    const long ka = XATTN_K_TOK(b, s, j) + (long)kh * k_sh;
    float dot = 0.0f;
    int d = 0;
    if (q_sd == 1 && k_sd == 1) { /* contiguous rows: eight elements a load */
        float8 d8 = 0.0f;
        for (; d + 8 <= XATTN_HD; d += 8)
            d8 += XATTN_LOAD8_Q(q, qa + d) * XATTN_LOAD8_KV(k, ka + d);
        dot = xattn_hsum8(d8);
    }
    for (; d < XATTN_HD; d++)
        dot += XATTN_LOAD_Q(q, qa + d * q_sd) * XATTN_LOAD_KV(k, ka + d * k_sd);
    S[XATTN_S_AT(bh, i, j)] = xattn_naive_score(XATTN_KARGS_PASS, dot, b, h, s, i, j);
#endif
}

/* Tree reductions over the work-group (XATTN_RWG is a power of two). */
inline float xattn_wg_max_sticky(__local float *red, float x)
{
    const int lid = get_local_id(0);
    red[lid] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = XATTN_RWG / 2; n > 0; n >>= 1) {
        if (lid < n)
            red[lid] = xattn_max_sticky(red[lid], red[lid + n]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    x = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return x;
}

inline float xattn_wg_sum(__local float *red, float x)
{
    const int lid = get_local_id(0);
    red[lid] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = XATTN_RWG / 2; n > 0; n >>= 1) {
        if (lid < n)
            red[lid] += red[lid + n];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    x = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return x;
}

/* Phase 2. Work-group: XATTN_RWG work-items on one row; groups numbered
 * (row, bh), row fastest. */
__kernel __attribute__((reqd_work_group_size(XATTN_RWG, 1, 1))) void
xattn_naive_softmax(XATTN_KARGS, __global float *S)
{
    __local float red[XATTN_RWG];
    const int lid = get_local_id(0);
    const long g = get_group_id(0);
    const int i = (int)(g % Sq), bh = (int)(g / Sq);
    const int b = bh / Hq, h = bh - b * Hq;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    /* Rows past the sequence (packed batches: the next one's) write nothing;
     * padding rows only their LSE. Both still take part in the reductions,
     * over no keys (kernel shape, xattn_cl_common.cl). */
    const int in_seq = i < s.rows;
    const int n = i < s.lq ? s.lk : 0;
    __global float *row = S + XATTN_S_AT(bh, i, 0);
    float m = -INFINITY;
    for (int j = lid; j < n; j += XATTN_RWG)
        m = xattn_max_sticky(m, row[j]);
    m = xattn_wg_max_sticky(red, m);
    float sum = 0.0f;
    if (m != -INFINITY) {
        for (int j = lid; j < n; j += XATTN_RWG) {
            const float e = exp(row[j] - m);
            row[j] = e;
            sum += e;
        }
    }
    sum = xattn_wg_sum(red, sum);
    const int seen = m != -INFINITY;
    /* A real row folds its head's sink into the denominator (a padding row
     * keeps LSE = -inf). m and sum are the same on every work-item. */
    const float c =
        i < s.lq ? xattn_sink_fold(sinks, sink_off, sink_sh, h, flags, &m, &sum) : 1.0f;
    if (!seen) { /* fully masked (or padding): P = 0 */
        for (int j = lid; j < n; j += XATTN_RWG)
            row[j] = 0.0f;
    } else {
        const float inv = c / sum;
        for (int j = lid; j < n; j += XATTN_RWG)
            row[j] *= inv;
    }
    if (lid == 0 && in_seq && (flags & XATTN_F_LSE))
        lse[XATTN_LSE_AT(b, h, s.sq + i)] = xattn_sem_lse(m, sum);
}

/* Phase 3. Work-group: NT x NT work-items on NT rows x NT columns of Dv of
 * one (b, h); groups numbered (column tile, row tile, bh). A key with P = 0
 * (masked) adds nothing, not even 0 * NaN. */
__kernel __attribute__((reqd_work_group_size(XATTN_NT * XATTN_NT, 1, 1))) void
xattn_naive_pv(XATTN_KARGS, __global const float *P, __global ulong *cnt, const long cnt_at)
{
    /* Columns a work-item: 1 (local form), 8 (global form, float8). */
    const long nc = (XATTN_HDV + XATTN_PV_COLS * XATTN_NT - 1) / (XATTN_PV_COLS * XATTN_NT),
               ni = (Sq + XATTN_NT - 1) / XATTN_NT;
    long g = get_group_id(0);
    const long ct = g % nc;
    g /= nc;
    const long it = g % ni;
    const int bh = (int)(g / ni);
    const int b = bh / Hq, h = bh - b * Hq, kh = h / group;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    const int tc = get_local_id(0) % XATTN_NT, ti = get_local_id(0) / XATTN_NT;
    const long i0 = it * XATTN_NT, i = i0 + ti;
    const int c = ((int)(ct * XATTN_NT) + tc) * XATTN_PV_COLS;
    ulong keys = 0; /* keys this row added into O (counted in column 0) */
#if XATTN_NAIVE_LOCAL
    float acc = 0.0f;
    /* P and V staged through local memory, NT keys at a time. */
    __local float ps[XATTN_NT][XATTN_NT + 1];
    __local float vs[XATTN_NT][XATTN_NT + 1];
    /* Blocks of padding rows, or past the sequence, read nothing; no return
     * (kernel shape, xattn_cl_common.cl). */
    const long jend = i0 < s.lq ? s.lk : 0;
    for (long j0 = 0; j0 < jend; j0 += XATTN_NT) {
        ps[ti][tc] = (i < s.lq && j0 + tc < s.lk) ? P[XATTN_S_AT(bh, i, j0 + tc)] : 0.0f;
        vs[ti][tc] = (j0 + ti < s.lk && c < XATTN_HDV)
                         ? XATTN_LOAD_KV(v, XATTN_V_TOK(b, s, j0 + ti) + (long)kh * v_sh +
                                                (long)c * v_sd)
                         : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int jj = 0; jj < XATTN_NT; jj++) {
            const float pj = ps[ti][jj];
            acc += pj != 0.0f ? pj * vs[jj][tc] : 0.0f;
        }
        keys += XATTN_NT; /* every lane of the tile, padding included */
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < s.rows && c < XATTN_HDV)
        XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, c), i < s.lq ? acc : 0.0f);
#else
    /* Columns c .. c + 7 of the row: eight accumulators, V eight elements a
     * load where its rows are contiguous. */
    float8 acc8 = 0.0f;
    if (i < s.lq && c < XATTN_HDV) {
        long lo, hi; /* P is 0 outside the row's keys */
        const xattn_sem_rule rule = xattn_rule_of(s, flags, win_l, win_r);
        xattn_row_range(&rule, i, 0, s.lk, &lo, &hi);
        __global const float *pr = P + XATTN_S_AT(bh, i, 0);
        /* Keys in runs that share a page (one run for contiguous V): va is
         * the run's V address less j * v_ss, so that key j is va + j * v_ss. */
        if (v_sd == 1 && c + 8 <= XATTN_HDV) {
            for (long j = lo; j < hi;) {
                const long je = xattn_kv_run_end(s, j, hi);
                const long va = XATTN_V_TOK(b, s, j) + (long)kh * v_sh + c - j * v_ss;
                for (; j < je; j++) {
                    const float pj = pr[j];
                    if (pj != 0.0f) {
                        acc8 += pj * XATTN_LOAD8_KV(v, va + j * v_ss);
                        keys++;
                    }
                }
            }
        } else {
            float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            const int nc8 = min(8, XATTN_HDV - c);
            for (long j = lo; j < hi;) {
                const long je = xattn_kv_run_end(s, j, hi);
                const long va =
                    XATTN_V_TOK(b, s, j) + (long)kh * v_sh + (long)c * v_sd - j * v_ss;
                for (; j < je; j++) {
                    const float pj = pr[j];
                    if (pj != 0.0f) {
                        for (int e = 0; e < nc8; e++)
                            a[e] += pj * XATTN_LOAD_KV(v, va + j * v_ss + e * v_sd);
                        keys++;
                    }
                }
            }
            acc8 = vload8(0, a);
        }
    }
    if (i < s.rows && c < XATTN_HDV) {
        float a[8];
        vstore8(i < s.lq ? acc8 : (float8)(0.0f), 0, a);
        for (int e = 0; e < 8 && c + e < XATTN_HDV; e++)
            XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, c + e), a[e]);
    }
#endif
    /* One count a row of work-items: (bh, row tile, row in the tile). */
    if (ct == 0 && tc == 0 && (flags & XATTN_F_COUNT))
        cnt[cnt_at + ((long)bh * ni + it) * XATTN_NT + ti] = keys;
}
