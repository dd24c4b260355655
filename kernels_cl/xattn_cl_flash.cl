/*
 * xattn OpenCL kernels, part 3 of 5: FLASH, tiled attention with an online
 * softmax, in the structure of kernels_cpu's (xattn__cpu_attend): a
 * work-group owns one (b, h) and XATTN_BQ consecutive query rows, one
 * work-item per row. Each row knows its visible keys [lo, hi)
 * (xattn_row_range); the work-group walks the union of its rows' keys
 * (xattn_sem_block_keys) in tiles on the grid of multiples of XATTN_BK, the
 * first and last trimmed to the union, as the CPU and CUDA kernels do, so
 * tiles that the causal mask, the window or the length rule out for every row
 * are never loaded. Per tile:
 *   xattn_load_tile     K and V rows into local memory, converted to f32
 *   scores              s = (q . k) * scale, xattn_mod_score, -inf outside [lo, hi)
 *   xattn_softmax_tile  m' = max(m, max_j s_j) (NaN sticky); alpha = exp(m - m')
 *                       (0 while m = -inf); l = l alpha + sum_j exp(s_j - m');
 *                       acc = acc alpha + sum_j exp(s_j - m') v_j
 * SPLITKV's partial phase runs the same loop (xattn_attend) on one chunk of
 * the keys.
 */

/* A row's online-softmax state besides its accumulator. */
typedef struct xattn_row_state {
    float m, l;
} xattn_row_state;

/* Stages keys [j0, j0 + nk) of K and V in local memory, rows of XATTN_DMAX /
 * XATTN_DVMAX floats; every work-item of the group takes a share
 * (kernels_cpu: xattn__cpu_load_tile). A tile inside one page (always, for
 * contiguous K/V) steps from its first row; one that crosses pages looks
 * each row's page up. */
inline void xattn_load_tile(XATTN_KARGS, __local float *ks, __local float *vs, int b, int kh,
                            xattn_seq s, long j0, int nk)
{
    const int lid = get_local_id(0);
    const int one = xattn_kv_one_page(s, j0, nk);
    const long ka = XATTN_K_TOK(b, s, j0) + (long)kh * k_sh;
    const long va = XATTN_V_TOK(b, s, j0) + (long)kh * v_sh;
    for (int e = lid; e < nk * XATTN_HD; e += XATTN_BQ) {
        const int r = e / XATTN_HD, d = e - r * XATTN_HD;
        const long at = one ? ka + (long)r * k_ss : XATTN_K_TOK(b, s, j0 + r) + (long)kh * k_sh;
        ks[r * XATTN_DMAX + d] = XATTN_LOAD_KV(k, at + (long)d * k_sd);
    }
    for (int e = lid; e < nk * XATTN_HDV; e += XATTN_BQ) {
        const int r = e / XATTN_HDV, d = e - r * XATTN_HDV;
        const long at = one ? va + (long)r * v_ss : XATTN_V_TOK(b, s, j0 + r) + (long)kh * v_sh;
        vs[r * XATTN_DVMAX + d] = XATTN_LOAD_KV(v, at + (long)d * v_sd);
    }
}

/* The online-softmax update of one row with the scores sc[0..nk) of a tile
 * and the tile's V rows. A masked key (-inf) adds nothing, not even 0 * NaN;
 * *keys counts those that were added. */
inline void xattn_softmax_tile(xattn_row_state *st, float *acc, const float *sc, int nk,
                               __local const float *vs, int dv_n, uint *keys)
{
    float tmax = -INFINITY;
    for (int jj = 0; jj < nk; jj++)
        tmax = xattn_sem_sticky_max(tmax, sc[jj]);
    if (st->m == -INFINITY && tmax == -INFINITY)
        return; /* every key so far masked: nothing to add */
    float alpha;
    const float mu = xattn_sem_online_max(&st->m, tmax, &alpha);
    if (alpha != 1.0f) {
        st->l *= alpha;
        for (int c = 0; c < dv_n; c++)
            acc[c] *= alpha;
    }
    for (int jj = 0; jj < nk; jj++) {
        if (sc[jj] == -INFINITY)
            continue;
        const float pj = exp(sc[jj] - mu);
        st->l += pj;
        (*keys)++;
        __local const float *vr = vs + jj * XATTN_DVMAX;
        for (int c = 0; c < dv_n; c++)
            acc[c] += pj * vr[c];
    }
}

/*
 * The tile loop for row i0 + lid of (b, h), over keys [kmin, kmax) of the
 * sequence (kernels_cpu: xattn__cpu_attend). Every work-item of the group
 * calls it: the loop bounds are the group's, so the barriers are uniform.
 * Leaves this row's m, l and unnormalized acc; `valid` is 0 for a row past
 * the sequence's length (it only helps load the tiles). With XATTN_F_COUNT
 * the group's counts go to cnt (xattn_cl_common.cl, "executed-work counts"):
 * the scores computed, the keys added into O and the K/V rows loaded; cred
 * is 2 x XATTN_BQ of local memory for adding them up.
 */
inline xattn_row_state xattn_attend(XATTN_KARGS, __local float *ks, __local float *vs, int b,
                                    int h, xattn_seq s, long i0, long kmin, long kmax, int valid,
                                    float *acc, __local ulong *cred, __global ulong *cnt,
                                    long cnt_at)
{
    const int kh = h / group;
    const xattn_sem_rule rule = xattn_rule_of(s, flags, win_l, win_r);
    const long i = i0 + get_local_id(0), pos = xattn_sem_pos(&rule, i);
    const float slope = xattn_alibi_slope(meta, B, h, flags);

    /* This row's keys, and the union over the group's rows (semantics
     * header: empty when no row of the group has a key), clipped to
     * [kmin, kmax). */
    long lo, hi, ulo, uhi;
    xattn_row_range(&rule, i, kmin, kmax, &lo, &hi);
    if (xattn_sem_block_keys(&rule, i0, i0 + XATTN_BQ, &ulo, &uhi)) {
        ulo = max(ulo, kmin);
        uhi = max(ulo, min(uhi, kmax));
    } else {
        ulo = uhi = kmin;
    }

    float qv[XATTN_DMAX];
    for (int d = 0; d < XATTN_HD; d++)
        qv[d] = valid ? XATTN_LOAD_Q(q, XATTN_Q_AT(b, s.sq + i, h, d)) : 0.0f;
    for (int c = 0; c < XATTN_HDV; c++)
        acc[c] = 0.0f;
    xattn_row_state st;
    st.m = -INFINITY;
    st.l = 0.0f;

    float sc[XATTN_BK];
    uint n_qk = 0, n_pv = 0, n_kv = 0; /* this row's counts (n_kv: the group's) */
    /* Key tiles on the grid of multiples of XATTN_BK, the first and last
     * trimmed to the union: the tiles the CPU and CUDA kernels walk. */
    for (long t0 = ulo / XATTN_BK * XATTN_BK; t0 < uhi; t0 += XATTN_BK) {
        const long j0 = max(t0, ulo);
        const int nk = (int)(min(t0 + XATTN_BK, uhi) - j0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is no longer read */
        xattn_load_tile(XATTN_KARGS_PASS, ks, vs, b, kh, s, j0, nk);
        n_kv += nk;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!valid || j0 >= hi || j0 + nk <= lo)
            continue; /* no key of this tile is visible to this row */
        n_qk += (uint)(min(hi, j0 + nk) - max(lo, j0)); /* the dot products below */
        for (int jj = 0; jj < nk; jj++) {
            const long j = j0 + jj;
            float x = -INFINITY;
            if (j >= lo && j < hi) {
                __local const float *kr = ks + jj * XATTN_DMAX;
                float dot = 0.0f;
                for (int d = 0; d < XATTN_HD; d++)
                    dot += qv[d] * kr[d];
                const float bv = (flags & XATTN_F_BIAS)
                                     ? xattn_bias_load(bias, XATTN_BIAS_AT(b, h, i, j), flags)
                                     : 0.0f;
                x = xattn_mod_score(dot * scale, mods, slope, pos, j, bv);
            }
            sc[jj] = x;
        }
        xattn_softmax_tile(&st, acc, sc, nk, vs, XATTN_HDV, &n_pv);
    }

    /* The group's counts: work-item 0 adds up the rows' (one barrier, every
     * work-item reaches it whether or not counts are asked for). */
    const int lid = get_local_id(0);
    cred[lid] = n_qk;
    cred[XATTN_BQ + lid] = n_pv;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0 && (flags & XATTN_F_COUNT)) {
        ulong sqk = 0, spv = 0;
        for (int r = 0; r < XATTN_BQ; r++) {
            sqk += cred[r];
            spv += cred[XATTN_BQ + r];
        }
        const long g = get_group_id(0), ng = get_num_groups(0);
        cnt[cnt_at + g] = sqk;
        cnt[cnt_at + ng + g] = spv;
        cnt[cnt_at + 2 * ng + g] = n_kv;
    }
    return st;
}

/* O = 0, LSE = -inf: padding and fully masked rows (kernels_cpu:
 * xattn__cpu_write_empty_row). */
inline void xattn_write_empty_row(XATTN_KARGS, int b, int h, xattn_seq s, long i)
{
    for (int c = 0; c < XATTN_HDV; c++)
        XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, c), 0.0f);
    if (flags & XATTN_F_LSE)
        lse[XATTN_LSE_AT(b, h, s.sq + i)] = -INFINITY;
}

/* Writes a finished real row i from its max m (-inf: it saw no key), sum l
 * and accumulator acc (XATTN_HDV values, not read when m is -inf): folds the
 * head's sink in, then O = acc * c / l and the LSE (kernels_cpu:
 * xattn__cpu_write_row). No key: O = 0, LSE = the sink (-inf without one). */
inline void xattn_write_row(XATTN_KARGS, int b, int h, xattn_seq s, long i, float m, float l,
                            const float *acc)
{
    const int seen = m != -INFINITY;
    const float c = xattn_sink_fold(sinks, sink_off, sink_sh, h, flags, &m, &l);
    const float f = seen ? c / l : 0.0f;
    for (int ch = 0; ch < XATTN_HDV; ch++)
        XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, ch), seen ? acc[ch] * f : 0.0f);
    if (flags & XATTN_F_LSE)
        lse[XATTN_LSE_AT(b, h, s.sq + i)] = xattn_sem_lse(m, l);
}

#if XATTN_ROWS == 0 /* the row form is xattn_cl_rows.cl's */
/* FLASH. Work-group: BQ work-items; groups numbered (row tile, bh), row tile
 * fastest, in one dimension (the only one every driver allows to be large). */
__kernel __attribute__((reqd_work_group_size(XATTN_BQ, 1, 1))) void
xattn_flash(XATTN_KARGS, __global ulong *cnt, const long cnt_at)
{
    __local float ks[XATTN_BK * XATTN_DMAX];
    __local float vs[XATTN_BK * XATTN_DVMAX];
    __local ulong cred[2 * XATTN_BQ];
    const long nt = (Sq + XATTN_BQ - 1) / XATTN_BQ, g = get_group_id(0);
    const int bh = (int)(g / nt);
    const int b = bh / Hq, h = bh - b * Hq;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    const long i0 = (g % nt) * XATTN_BQ;
    const long i = i0 + get_local_id(0);
    const int valid = i < s.lq;

    /* A group with no row of the sequence (i0 >= s.rows >= s.lq) walks no
     * tile; it does not return early (kernel shape, xattn_cl_common.cl). */
    float acc[XATTN_DVMAX];
    const xattn_row_state st = xattn_attend(XATTN_KARGS_PASS, ks, vs, b, h, s, i0, 0, s.lk, valid,
                                            acc, cred, cnt, cnt_at);
    if (i < s.rows) {
        if (!valid)
            xattn_write_empty_row(XATTN_KARGS_PASS, b, h, s, i);
        else
            xattn_write_row(XATTN_KARGS_PASS, b, h, s, i, st.m, st.l, acc);
    }
}
#endif /* XATTN_ROWS == 0 */
