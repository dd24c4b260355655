/*
 * xattn OpenCL kernels, part 5 of 5: the row form of FLASH and the SPLITKV
 * partial, for CPU-class devices (XATTN_ROWS > 0; the tile table's `rows`).
 *
 * A CPU OpenCL implementation (PoCL's pthread device, Intel's CPU runtime)
 * runs a work-group as loops over its work-items on one thread; a barrier
 * splits the kernel into regions, each its own work-item loop, with every
 * private array kept per work-item in memory between them, and its "local
 * memory" is ordinary cache. The work-group form (xattn_cl_flash.cl: one
 * work-item a row, K/V staged through local memory behind two barriers a
 * tile) is a GPU's shape; on PoCL it measured about 4% of the device's own
 * FMA ceiling (docs/backends.md, "OpenCL on CPU devices").
 *
 * The row form is a CPU's shape: one work-item a work-group, no barrier and
 * no local memory. A work-item owns XATTN_ROWS rows of one KV head, taken in
 * the order (query row, head of the KV head's group), head fastest: with
 * grouped-query attention the rows of a work-item are first the heads that
 * share its K/V (which see the same keys), then consecutive query rows. It
 * walks the union of its rows' keys (xattn_sem_block_keys) in tiles on the
 * grid of multiples of XATTN_BK, as the work-group form does, converts each
 * K/V tile once to f32 rows of float8 in private memory (cache), and every
 * row of the work-item reads the tile from there: K and V are read from
 * global memory once per XATTN_ROWS rows. The products run along D with
 * float8 (the explicit vector the compiler maps to the CPU's SIMD), four
 * keys at a time for q.k, and the accumulator of a float8 column stays in a
 * register across the tile's keys for p.v.
 *
 * The arithmetic is the work-group form's, in its order per row: s = (q . k)
 * * scale, xattn_mod_score, the online softmax of xattn_softmax_tile (a key
 * whose score is -inf adds nothing, not even 0 * NaN); only the order of the
 * additions inside a dot product differs (float8 lanes, then their sum).
 *
 * Executed-work counts (xattn_cl_common.cl): one count a work-item, in three
 * segments of get_global_size(0) elements: scores computed, keys added into
 * O, K/V rows loaded (the union's keys, once per work-item).
 */

#if XATTN_ROWS > 0

/* float8 columns of D and Dv: the arrays' sizes, and the columns in use
 * (the last one zero-padded, so that it adds nothing). */
#define XATTN_DMAX8 ((XATTN_DMAX + 7) / 8)
#define XATTN_DVMAX8 ((XATTN_DVMAX + 7) / 8)
#define XATTN_D8 ((XATTN_HD + 7) / 8)
#define XATTN_DV8 ((XATTN_HDV + 7) / 8)

/* The sums of eight vectors, as one vector: lane i = the sum of xi's lanes
 * (pairwise, as a transpose; three rounds of adds instead of eight sums). */
inline float8 xattn_hsum8x8(float8 x0, float8 x1, float8 x2, float8 x3, float8 x4, float8 x5,
                            float8 x6, float8 x7)
{
    const float8 a01 = (float8)(x0.lo, x1.lo) + (float8)(x0.hi, x1.hi);
    const float8 a23 = (float8)(x2.lo, x3.lo) + (float8)(x2.hi, x3.hi);
    const float8 a45 = (float8)(x4.lo, x5.lo) + (float8)(x4.hi, x5.hi);
    const float8 a67 = (float8)(x6.lo, x7.lo) + (float8)(x6.hi, x7.hi);
    const float8 b0 = (float8)(a01.even, a23.even) + (float8)(a01.odd, a23.odd);
    const float8 b1 = (float8)(a45.even, a67.even) + (float8)(a45.odd, a67.odd);
    return (float8)(b0.even, b1.even) + (float8)(b0.odd, b1.odd);
}

inline float xattn_hmax8(float8 x)
{
    const float4 a = fmax(x.lo, x.hi);
    const float2 b = fmax(a.lo, a.hi);
    return fmax(b.x, b.y);
}

/* One row of n elements of k or v (element stride sd, from element `at`)
 * into n8 float8 columns, zero-padded: whole columns with vector loads where
 * the row is contiguous, the rest one element at a time. */
#define XATTN_ROWS_LOAD(LOAD1, LOAD8, p, at, sd, n, dst)                                       \
    do {                                                                                       \
        int c_ = 0;                                                                            \
        if ((sd) == 1)                                                                         \
            for (; c_ < (n) / 8; c_++)                                                         \
                (dst)[c_] = LOAD8(p, (at) + 8 * c_);                                           \
        for (; c_ < ((n) + 7) / 8; c_++) {                                                     \
            float t_[8];                                                                       \
            for (int e_ = 0; e_ < 8; e_++) {                                                   \
                const int d_ = 8 * c_ + e_;                                                    \
                t_[e_] = d_ < (n) ? LOAD1(p, (at) + (long)d_ * (sd)) : 0.0f;                   \
            }                                                                                  \
            (dst)[c_] = vload8(0, t_);                                                         \
        }                                                                                      \
    } while (0)

/*
 * The tile loop of the XATTN_ROWS rows of work-item row block v0 (rows v0,
 * v0 + 1, ... in the order (query row, head of the group)) of KV head kh of
 * sequence b, over keys [kmin, kmax). Leaves each row's m, l and
 * unnormalized acc; a row past the problem or the sequence's length has no
 * key. cnt3 gets this work-item's counts.
 */
inline void xattn_rows_attend(XATTN_KARGS, int b, int kh, xattn_seq s, long v0, long kmin,
                              long kmax, float8 acc[XATTN_ROWS][XATTN_DVMAX8],
                              float m[XATTN_ROWS], float l[XATTN_ROWS], uint cnt3[3])
{
    const xattn_sem_rule rule = xattn_rule_of(s, flags, win_l, win_r);
    const long nv = (long)Sq * group; /* rows of a KV head: (query row, head) */
    float8 qv[XATTN_ROWS][XATTN_DMAX8];
    long lo[XATTN_ROWS], hi[XATTN_ROWS], pos[XATTN_ROWS], irow[XATTN_ROWS];
    float slope[XATTN_ROWS];
    int head[XATTN_ROWS];
    for (int r = 0; r < XATTN_ROWS; r++) {
        const long vr = v0 + r, i = vr / group;
        const int h = kh * group + (int)(vr - i * group);
        const int valid = vr < nv && i < s.lq;
        irow[r] = i;
        head[r] = h;
        pos[r] = xattn_sem_pos(&rule, i);
        slope[r] = valid ? xattn_alibi_slope(meta, B, h, flags) : 0.0f;
        if (valid)
            xattn_row_range(&rule, i, kmin, kmax, &lo[r], &hi[r]);
        else
            lo[r] = hi[r] = kmin;
        if (valid)
            XATTN_ROWS_LOAD(XATTN_LOAD_Q, XATTN_LOAD8_Q, q, XATTN_Q_AT(b, s.sq + i, h, 0), q_sd,
                            XATTN_HD, qv[r]);
        else
            for (int c = 0; c < XATTN_D8; c++)
                qv[r][c] = (float8)(0.0f);
        for (int c = 0; c < XATTN_DV8; c++)
            acc[r][c] = (float8)(0.0f);
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }

    /* The union of the rows' keys (the query rows [ia, ib]), clipped to
     * [kmin, kmax); empty when no row has a key. */
    long ulo, uhi;
    const long ia = v0 / group, ib = (min(v0 + XATTN_ROWS, nv) - 1) / group;
    if (v0 < nv && xattn_sem_block_keys(&rule, ia, ib + 1, &ulo, &uhi)) {
        ulo = max(ulo, kmin);
        uhi = max(ulo, min(uhi, kmax));
    } else {
        ulo = uhi = kmin;
    }

    float8 kt[XATTN_BK][XATTN_DMAX8], vt[XATTN_BK][XATTN_DVMAX8];
    float sc[XATTN_BK + 8], pr[XATTN_BK + 8]; /* + the last vector's spare lanes */
    uint n_qk = 0, n_pv = 0, n_kv = 0;
    for (long t0 = ulo / XATTN_BK * XATTN_BK; t0 < uhi; t0 += XATTN_BK) {
        const long j0 = max(t0, ulo);
        const int nk = (int)(min(t0 + XATTN_BK, uhi) - j0);
        /* The rows step by the token stride within a page (the whole tile
         * for contiguous K/V); a paged tile looks a page up where it enters
         * one (`left`: the keys left in the current page). */
        long ka = XATTN_K_TOK(b, s, j0) + (long)kh * k_sh;
        long va = XATTN_V_TOK(b, s, j0) + (long)kh * v_sh;
        int left = s.ps > 0 ? s.ps - (int)j0 % s.ps : nk;
        for (int jj = 0; jj < nk; jj++) {
            if (left == 0) {
                ka = XATTN_K_TOK(b, s, j0 + jj) + (long)kh * k_sh;
                va = XATTN_V_TOK(b, s, j0 + jj) + (long)kh * v_sh;
                left = s.ps;
            }
            XATTN_ROWS_LOAD(XATTN_LOAD_KV, XATTN_LOAD8_KV, k, ka, k_sd, XATTN_HD, kt[jj]);
            XATTN_ROWS_LOAD(XATTN_LOAD_KV, XATTN_LOAD8_KV, v, va, v_sd, XATTN_HDV, vt[jj]);
            ka += k_ss;
            va += v_ss;
            left--;
        }
        n_kv += nk;
        for (int r = 0; r < XATTN_ROWS; r++) {
            /* This row's keys in the tile: [a, e) (empty for a row with none). */
            const int a = (int)(max(lo[r], j0) - j0), e = (int)(min(hi[r], j0 + nk) - j0);
            if (a >= e)
                continue;
            n_qk += (uint)(e - a);
            /* q . k, eight keys at a time: one load of q for eight of k, and
             * eight independent sums (an FMA's latency is several cycles). */
            int jj = a;
            for (; jj + 8 <= e; jj += 8) {
                float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
                float8 s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
                for (int c = 0; c < XATTN_D8; c++) {
                    const float8 q8 = qv[r][c];
                    s0 += q8 * kt[jj][c];
                    s1 += q8 * kt[jj + 1][c];
                    s2 += q8 * kt[jj + 2][c];
                    s3 += q8 * kt[jj + 3][c];
                    s4 += q8 * kt[jj + 4][c];
                    s5 += q8 * kt[jj + 5][c];
                    s6 += q8 * kt[jj + 6][c];
                    s7 += q8 * kt[jj + 7][c];
                }
                vstore8(xattn_hsum8x8(s0, s1, s2, s3, s4, s5, s6, s7), 0, sc + jj);
            }
            for (; jj < e; jj++) {
                float8 s0 = 0.0f;
                for (int c = 0; c < XATTN_D8; c++)
                    s0 += qv[r][c] * kt[jj][c];
                sc[jj] = xattn_hsum8(s0);
            }
            float tmax = -INFINITY;
            jj = a;
            if (!(flags & XATTN_F_BIAS) && !xattn_sem_mods_any(&mods) && slope[r] == 0.0f) {
                /* No call modifier, ALiBi or bias: xattn_mod_score leaves s = (q . k) *
                 * scale as it is; eight at a time, the max sticky for NaN. */
                float8 mx = -INFINITY;
                int8 nan8 = 0;
                for (; jj + 8 <= e; jj += 8) {
                    const float8 x = vload8(0, sc + jj) * scale;
                    vstore8(x, 0, sc + jj);
                    mx = fmax(mx, x);
                    nan8 |= isnan(x);
                }
                tmax = any(nan8) ? NAN : xattn_hmax8(mx);
            }
            for (; jj < e; jj++) {
                const long j = j0 + jj;
                const float bv =
                    (flags & XATTN_F_BIAS)
                        ? xattn_bias_load(bias, XATTN_BIAS_AT(b, head[r], irow[r], j), flags)
                        : 0.0f;
                sc[jj] = xattn_mod_score(sc[jj] * scale, mods, slope[r], pos[r], j, bv);
                tmax = xattn_sem_sticky_max(tmax, sc[jj]);
            }
            /* The online-softmax update (xattn_softmax_tile's, in its order). */
            if (m[r] == -INFINITY && tmax == -INFINITY)
                continue; /* every key so far masked: nothing to add */
            float alpha;
            const float mu = xattn_sem_online_max(&m[r], tmax, &alpha);
            if (alpha != 1.0f) {
                l[r] *= alpha;
                for (int c = 0; c < XATTN_DV8; c++)
                    acc[r][c] *= alpha;
            }
            /* The weights, eight at a time (exp of a vector), then added up
             * in key order; a masked key's weight is never read. */
            for (jj = e; jj < e + 8; jj++)
                sc[jj] = -INFINITY; /* the last vector's spare lanes */
            for (jj = a; jj < e; jj += 8)
                vstore8(exp(vload8(0, sc + jj) - mu), 0, pr + jj);
            int masked = 0;
            float lsum = l[r]; /* in registers: l[r] and n_pv are memory */
            uint added = 0;
            for (jj = a; jj < e; jj++) {
                if (sc[jj] == -INFINITY) {
                    masked = 1;
                    continue;
                }
                lsum += pr[jj];
                added++;
            }
            l[r] = lsum;
            n_pv += added;
            /* p . v: eight float8 columns of the accumulator at a time, held in
             * registers across the tile's keys (eight independent sums). */
            int c = 0;
            if (!masked) {
                for (; c + 8 <= XATTN_DV8; c += 8) {
                    float8 o0 = acc[r][c], o1 = acc[r][c + 1], o2 = acc[r][c + 2],
                           o3 = acc[r][c + 3], o4 = acc[r][c + 4], o5 = acc[r][c + 5],
                           o6 = acc[r][c + 6], o7 = acc[r][c + 7];
                    for (jj = a; jj < e; jj++) {
                        const float p = pr[jj];
                        o0 += p * vt[jj][c];
                        o1 += p * vt[jj][c + 1];
                        o2 += p * vt[jj][c + 2];
                        o3 += p * vt[jj][c + 3];
                        o4 += p * vt[jj][c + 4];
                        o5 += p * vt[jj][c + 5];
                        o6 += p * vt[jj][c + 6];
                        o7 += p * vt[jj][c + 7];
                    }
                    acc[r][c] = o0;
                    acc[r][c + 1] = o1;
                    acc[r][c + 2] = o2;
                    acc[r][c + 3] = o3;
                    acc[r][c + 4] = o4;
                    acc[r][c + 5] = o5;
                    acc[r][c + 6] = o6;
                    acc[r][c + 7] = o7;
                }
            }
            for (; c < XATTN_DV8; c++) {
                float8 o8 = acc[r][c];
                for (jj = a; jj < e; jj++)
                    if (!masked || sc[jj] != -INFINITY)
                        o8 += pr[jj] * vt[jj][c];
                acc[r][c] = o8;
            }
        }
    }
    cnt3[0] = n_qk;
    cnt3[1] = n_pv;
    cnt3[2] = n_kv;
}

/* Writes this work-item's counts (with XATTN_F_COUNT): element w of each of
 * the three segments. */
inline void xattn_rows_count(__global ulong *cnt, long cnt_at, int flags, const uint cnt3[3])
{
    if (flags & XATTN_F_COUNT) {
        const long w = get_global_id(0), n = get_global_size(0);
        cnt[cnt_at + w] = cnt3[0];
        cnt[cnt_at + n + w] = cnt3[1];
        cnt[cnt_at + 2 * n + w] = cnt3[2];
    }
}

/* FLASH, row form. One work-item a work-group; work-items numbered (row
 * block, (b, KV head)), row block fastest: ceil(Sq * group / XATTN_ROWS) x
 * B * Hkv of them. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
xattn_flash(XATTN_KARGS, __global ulong *cnt, const long cnt_at)
{
    const long nv = (long)Sq * group, nw = (nv + XATTN_ROWS - 1) / XATTN_ROWS;
    const long g = get_global_id(0);
    const int bk = (int)(g / nw), Hkv = Hq / group;
    const int b = bk / Hkv, kh = bk - b * Hkv;
    const long v0 = (g % nw) * XATTN_ROWS;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);

    float8 acc[XATTN_ROWS][XATTN_DVMAX8];
    float m[XATTN_ROWS], l[XATTN_ROWS];
    uint cnt3[3];
    xattn_rows_attend(XATTN_KARGS_PASS, b, kh, s, v0, 0, s.lk, acc, m, l, cnt3);
    xattn_rows_count(cnt, cnt_at, flags, cnt3);
    for (int r = 0; r < XATTN_ROWS; r++) {
        const long vr = v0 + r, i = vr / group;
        const int h = kh * group + (int)(vr - i * group);
        if (vr >= nv || i >= s.rows)
            continue;
        if (i >= s.lq) {
            xattn_write_empty_row(XATTN_KARGS_PASS, b, h, s, i);
            continue;
        }
        float mr = m[r], lr = l[r];
        const int seen = mr != -INFINITY;
        const float c = xattn_sink_fold(sinks, sink_off, sink_sh, h, flags, &mr, &lr);
        const float inv = seen ? c / lr : 0.0f;
        for (int c8 = 0; c8 < XATTN_DV8; c8++) {
            float t[8];
            vstore8(seen ? acc[r][c8] * inv : (float8)(0.0f), 0, t);
            for (int e = 0; e < 8 && 8 * c8 + e < XATTN_HDV; e++)
                XATTN_STORE_O(o, XATTN_O_AT(b, s.sq + i, h, 8 * c8 + e), t[e]);
        }
        if (flags & XATTN_F_LSE)
            lse[XATTN_LSE_AT(b, h, s.sq + i)] = xattn_sem_lse(mr, lr);
    }
}

/* The SPLITKV partial phase, row form: work-items numbered (row block,
 * (b, KV head), split), row block fastest. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
xattn_splitkv_partial(XATTN_KARGS, __global float *ws_o, __global float *ws_l, const int chunk,
                      __global ulong *cnt, const long cnt_at)
{
    const long nv = (long)Sq * group, nw = (nv + XATTN_ROWS - 1) / XATTN_ROWS;
    const int Hkv = Hq / group;
    long g = get_global_id(0);
    const long v0 = (g % nw) * XATTN_ROWS;
    g /= nw;
    const int bk = (int)(g % ((long)B * Hkv)), sp = (int)(g / ((long)B * Hkv));
    const int b = bk / Hkv, kh = bk - b * Hkv;
    const xattn_seq s = xattn_seq_of(meta, B, b, flags, Sq);
    const long kv_lo = (long)sp * chunk;

    float8 acc[XATTN_ROWS][XATTN_DVMAX8];
    float m[XATTN_ROWS], l[XATTN_ROWS];
    uint cnt3[3];
    xattn_rows_attend(XATTN_KARGS_PASS, b, kh, s, v0, kv_lo, kv_lo + chunk, acc, m, l, cnt3);
    xattn_rows_count(cnt, cnt_at, flags, cnt3);
    /* Rows past the length are the combine's. */
    for (int r = 0; r < XATTN_ROWS; r++) {
        const long vr = v0 + r, i = vr / group;
        const int h = kh * group + (int)(vr - i * group);
        if (vr >= nv || i >= s.lq)
            continue;
        const long row = XATTN_WS_ROW(sp, b * Hq + h, i);
        __global float *out = ws_o + row * XATTN_HDV;
        if (m[r] == -INFINITY) { /* no visible key in this chunk */
            for (int c = 0; c < XATTN_HDV; c++)
                out[c] = 0.0f;
            ws_l[row] = -INFINITY;
        } else {
            const float inv = 1.0f / l[r];
            for (int c8 = 0; c8 < XATTN_DV8; c8++) {
                float t[8];
                vstore8(acc[r][c8] * inv, 0, t);
                for (int e = 0; e < 8 && 8 * c8 + e < XATTN_HDV; e++)
                    out[8 * c8 + e] = t[e];
            }
            ws_l[row] = xattn_sem_lse(m[r], l[r]);
        }
    }
}

#endif /* XATTN_ROWS > 0 */
