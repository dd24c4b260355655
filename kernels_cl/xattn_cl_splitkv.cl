/*
 * xattn OpenCL kernels, part 4 of 5: SPLITKV (flash-decoding). The keys of
 * every sequence are cut into `splits` chunks of `chunk` keys; the partial
 * phase runs FLASH's tile loop (xattn_attend) on one chunk and writes a
 * normalized partial output and its LSE into the workspace:
 *   ws_o [splits, B*Hq, Sq, Dv] f32,   ws_l [splits, B*Hq, Sq] f32
 * (a chunk with no visible key writes O = 0, LSE = -inf). The combine phase
 * merges the chunks of each row:
 *   M = max_s lse_s (NaN sticky);  w_s = exp(lse_s - M);
 *   O = sum_s w_s O_s / sum_s w_s;  LSE = M + log(sum_s w_s)
 * and writes O = 0, LSE = -inf for fully masked and padding rows.
 */

#define XATTN_WS_ROW(sp, bh, i) (((long)(sp) * B * Hq + (long)(bh)) * (long)Sq + (long)(i))

#if XATTN_ROWS == 0 /* the row form is xattn_cl_rows.cl's */
/* Partial phase. Work-group: BQ work-items; groups numbered (row tile, bh,
 * split), row tile fastest. */
__kernel __attribute__((reqd_work_group_size(XATTN_BQ, 1, 1))) void
xattn_splitkv_partial(XATTN_KARGS, __global float *ws_o, __global float *ws_l, const int chunk,
                      __global ulong *cnt, const long cnt_at)
{
    __local float ks[XATTN_BK * XATTN_DMAX];
    __local float vs[XATTN_BK * XATTN_DVMAX];
    __local ulong cred[2 * XATTN_BQ];
    const long nt = (Sq + XATTN_BQ - 1) / XATTN_BQ;
    long g = get_group_id(0);
    const long i0 = (g % nt) * XATTN_BQ;
    g /= nt;
    const int bh = (int)(g % ((long)B * Hq)), sp = (int)(g / ((long)B * Hq));
    const int b = bh / Hq, h = bh - b * Hq;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    const long i = i0 + get_local_id(0);
    const int valid = i < s.lq;
    const long kv_lo = (long)sp * chunk;

    /* Rows past the length are the combine's: a group with none of the
     * sequence's rows (i0 >= s.lq) walks no tile, and does not return early
     * (kernel shape, xattn_cl_common.cl). */
    float acc[XATTN_DVMAX];
    const xattn_row_state st =
        xattn_attend(XATTN_KARGS_PASS, ks, vs, b, h, s, i0, kv_lo, kv_lo + chunk, valid, acc, cred,
                     cnt, cnt_at);
    if (valid) {
        const long row = XATTN_WS_ROW(sp, bh, i);
        __global float *out = ws_o + row * XATTN_HDV;
        if (st.m == -INFINITY) { /* no visible key in this chunk */
            for (int c = 0; c < XATTN_HDV; c++)
                out[c] = 0.0f;
            ws_l[row] = -INFINITY;
        } else {
            const float inv = 1.0f / st.l;
            for (int c = 0; c < XATTN_HDV; c++)
                out[c] = acc[c] * inv;
            ws_l[row] = st.m + log(st.l);
        }
    }
}

#endif /* XATTN_ROWS == 0 */

/* Combine phase. Work-group: CWG columns of Dv of one row; groups numbered
 * (column tile, row, bh), column tile fastest. */
__kernel __attribute__((reqd_work_group_size(XATTN_CWG, 1, 1))) void
xattn_splitkv_combine(XATTN_KARGS, __global const float *ws_o, __global const float *ws_l,
                      const int splits)
{
    const long nc = (XATTN_HDV + XATTN_CWG - 1) / XATTN_CWG;
    long g = get_group_id(0);
    const int c = (int)(g % nc) * XATTN_CWG + (int)get_local_id(0);
    g /= nc;
    const int i = (int)(g % Sq), bh = (int)(g / Sq);
    const int b = bh / Hq, h = bh - b * Hq;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    if (i >= s.rows)
        return;
    const int write_lse = c == 0 && (flags & XATTN_F_LSE);
    const long lse_at = XATTN_LSE_AT(b, h, s.sq + i);
    float m = -INFINITY;
    if (i < s.lq)
        for (int sp = 0; sp < splits; sp++)
            m = xattn_max_sticky(m, ws_l[XATTN_WS_ROW(sp, bh, i)]);
    if (m == -INFINITY) { /* padding or fully masked row */
        if (c < XATTN_HDV)
            XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, c), 0.0f);
        float l = 0.0f; /* a real row's LSE: its sink, -inf without one */
        if (i < s.lq)
            xattn_sink_fold(sinks, sink_off, sink_sh, h, flags, &m, &l);
        if (write_lse)
            lse[lse_at] = xattn_sem_lse(m, l);
        return;
    }
    float wsum = 0.0f, acc = 0.0f;
    for (int sp = 0; sp < splits; sp++) {
        const long row = XATTN_WS_ROW(sp, bh, i);
        const float w = exp(ws_l[row] - m);
        wsum += w;
        if (c < XATTN_HDV)
            acc += w * ws_o[row * XATTN_HDV + c];
    }
    /* The chunks' partials hold no sink: it is folded here, once. */
    const float f = xattn_sink_fold(sinks, sink_off, sink_sh, h, flags, &m, &wsum);
    if (c < XATTN_HDV)
        XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, c), acc * f / wsum);
    if (write_lse)
        lse[lse_at] = m + log(wsum);
}
