/*
 * The decode micro-kernels (xattn_cpu_decode.h), written once over the vector
 * layer of xattn_cpu_uk_template.h and instantiated per ISA: the AVX2 and
 * AVX-512 files include this file after that one (not a normal header: no
 * include guard, included once per ISA). Besides that file's macros it uses
 * PV_DB (vectors of Dv per P.V block), QR_RB and QR_CB (rows x keys of a
 * QK^T block, QR_RB * QR_CB == XV_LEN) and XV_DEC_TABLE, the table's name.
 */
/* clang-format off: as in xattn_cpu_uk_template.h, the macros keep their
 * hand layout. */
/* clang-format off */

#define XQ XATTN_CPU_BQ

/* Asks L1 for `bytes` of each of rows c < nrows at base + c*pitch. */
static inline XV_TARGET void XV_FN(prefetch_rows)(const char *base, int64_t pitch, int nrows,
                                                  int bytes)
{
    for (int c = 0; c < nrows; c++)
        for (int o = 0; o < bytes; o += 64)
            _mm_prefetch(base + c * pitch + o, _MM_HINT_T0);
}

/* ---- decode kernels on K/V in place (f32, f16, bf16, fp8, q8_0 rows, any row stride) */

/*
 * The few-row QK^T (qk_rows) and the P.V (pv_tile) reading K and V rows where
 * they lie, converting each vector as it is loaded (F16C for f16, a shift and
 * a mask for bf16, a widening, shift (and mask) then F16C for fp8, a widening
 * times the block's d for q8_0): no f32 copy of the tile is written and read
 * back, which is what bounds the decode loop otherwise. Row c at element idx0 + c*stride of
 * `base`, or with rows (a paged cache's rows) at idx0 + rows[c]; n (D or Dv)
 * a multiple of 16. Instantiated per dtype. The P.V's sums are inlined twice,
 * for rows and for a stride, so that the strided loop keeps its induction
 * variables (rows everywhere added 13% to the P.V's instructions, about 5%
 * to a contiguous decode's); the QK^T tests for rows once per 4 keys. (An
 * always_inline QK^T body made GCC 12 drop its prefetches.)
 *
 * The vectors of a row go by pairs (XATTN__LOAD2_<ZIP>: 2 x XV_LEN elements into
 * two vectors), and a last odd one alone (LOADX). With ZIP 1 the pair holds the
 * even-index elements then the odd-index ones (bf16: 1 instruction per vector
 * where widening takes 2, with 16-bit K/V the loop's conversions cost about as
 * much as a third of its FMAs): the QK^T reads Q in the same order (put so once
 * per query tile by order_q_src), and the P.V zips its sums back before it
 * writes them.
 */
#define XATTN__LOAD2_0(LOADE, p, e, lo, hi) /* in order */                                 \
    do {                                                                                       \
        (lo) = LOADE(p, e);                                                                    \
        (hi) = LOADE(p, (e) + XV_LEN);                                                         \
    } while (0)
#define XATTN__LOAD2_1(LOADE, p, e, lo, hi) xv_load2_bf16_eo((p) + (e), &(lo), &(hi)) /* zipped */

/* Element e of a row at p as loaded: XV_LEN elements from e (e a multiple of
 * XV_LEN), per dtype. A q8_0 row is blocks of 32 values along it (f16 d, then
 * 32 int8 qs): its elements are widened to f32 and multiplied by their block's
 * d before the FMAs (one multiply per vector, shared by every row of Q or P
 * that uses it, where a block's partial times d would take one per row), and
 * d * qs is exact in f32, the value the reference computes. */
static inline XV_TARGET XV XV_FN(load_q8_at)(const uint8_t *p, int64_t e)
{
    const uint8_t *d = p + xattn_sem_q8_0_d_byte(e);
    return xv_mul(xv_load_q8((const int8_t *)(p + xattn_sem_q8_0_qs_byte(e))),
                  xv_set1(_cvtsh_ss((unsigned short)(d[0] | (d[1] << 8)))));
}
#define XATTN__AT_f32(p, e) xv_load((p) + (e))
#define XATTN__AT_f16(p, e) xv_load_f16((p) + (e))
#define XATTN__AT_bf16(p, e) xv_load_bf16((p) + (e))
#define XATTN__AT_e4m3(p, e) xv_load_e4m3((p) + (e))
#define XATTN__AT_e5m2(p, e) xv_load_e5m2((p) + (e))
#define XATTN__AT_q8(p, e) XV_FN(load_q8_at)((p), (e))

/* Key c's row: rows[c], or c * stride without rows (folded per inlined copy). */
#define XATTN__SRC_ROW(rows, stride, c) ((rows) ? (rows)[c] : (int64_t)(c) * (stride))
/* The address of element off of an array of T (off a whole number of q8_0
 * blocks with BLK), and the bytes of n elements. */
#define XATTN__ROWP(BLK, p, off) ((p) + ((BLK) ? xattn_sem_q8_0_d_byte(off) : (off)))
#define XATTN__ROWB(BLK, T, n)                                                                 \
    ((BLK) ? xattn_sem_q8_0_d_byte(n) : (n) * (int64_t)sizeof(T))
#define XATTN__ROWBI(BLK, T, n) ((BLK) ? (int)xattn_sem_q8_0_d_byte(n) : (n) * (int)sizeof(T))

#define XATTN__SRC_KERNELS(SFX, T, ZIP, BLK)                                                   \
    static XV_TARGET void XV_FN(qk_body_##SFX)(                                                \
        float *st, const float *qr, int ldq, int nr, const T *k, const int64_t *rows,          \
        int64_t kstride, int n, int nc, const T *pf, const int64_t *pfrows, int64_t pfstride,  \
        int pfbytes)                                                                           \
    {                                                                                          \
        const int nd = n / XV_LEN;                                                             \
        for (int r0 = 0; r0 < nr; r0 += QR_RB)                                                 \
            for (int c0 = 0; c0 < nc; c0 += QR_CB) {                                           \
                XV a[XV_LEN];                                                                  \
                _Pragma("GCC unroll 16") for (int x = 0; x < XV_LEN; x++) a[x] = xv_zero();    \
                const T *kp[QR_CB];                                                            \
                for (int c = 0; c < QR_CB; c++) /* past nc: the last key again (unused) */    \
                    kp[c] = XATTN__ROWP(                                                       \
                        BLK, k, XATTN__SRC_ROW(rows, kstride, c0 + c < nc ? c0 + c : nc - 1)); \
                if (r0 == 0) {                                                                 \
                    /* The next block's K rows: this block's loads alone keep too              \
                     * few misses in flight (B8 H32/8 D128 Sk32768, medians of 5:              \
                     * f16 71 -> 65 ms, bf16 67 -> 60 ms; 8 keys ahead gained less). */        \
                    const int nnext = (int)xattn__cpu_min(QR_CB, nc - c0 - QR_CB);             \
                    if (!rows && nnext > 0)                                                    \
                        XV_FN(prefetch_rows)(                                                  \
                            (const char *)XATTN__ROWP(BLK, k, (c0 + QR_CB) * kstride),         \
                            XATTN__ROWB(BLK, T, kstride), nnext, XATTN__ROWBI(BLK, T, n));     \
                    for (int c = 0; rows && c < nnext; c++)                                    \
                        XV_FN(prefetch_rows)(                                                  \
                            (const char *)XATTN__ROWP(BLK, k, rows[c0 + QR_CB + c]), 0, 1,     \
                            XATTN__ROWBI(BLK, T, n));                                          \
                    /* the block's V rows, read next by the P.V */                             \
                    if (pf && !pfrows)                                                         \
                        XV_FN(prefetch_rows)(                                                  \
                            (const char *)XATTN__ROWP(BLK, pf, c0 * pfstride),                 \
                            XATTN__ROWB(BLK, T, pfstride),                                     \
                            (int)xattn__cpu_min(QR_CB, nc - c0), pfbytes);                     \
                    for (int c = c0; pf && pfrows && c < c0 + QR_CB && c < nc; c++)            \
                        XV_FN(prefetch_rows)(                                                  \
                            (const char *)XATTN__ROWP(BLK, pf, pfrows[c]), 0, 1, pfbytes);     \
                }                                                                              \
                const float *qp = qr + (int64_t)r0 * ldq;                                      \
                int v = 0;                                                                     \
                for (; v + 2 <= nd; v += 2) {                                                  \
                    XV k0[QR_CB], k1[QR_CB];                                                   \
                    _Pragma("GCC unroll 16") for (int c = 0; c < QR_CB; c++)                  \
                        XATTN__LOAD2_##ZIP(XATTN__AT_##SFX, kp[c], v * XV_LEN, k0[c], k1[c]);  \
                    _Pragma("GCC unroll 16") for (int r = 0; r < QR_RB; r++)                  \
                    {                                                                          \
                        const XV q0 = xv_load(qp + (int64_t)r * ldq + v * XV_LEN);             \
                        const XV q1 = xv_load(qp + (int64_t)r * ldq + (v + 1) * XV_LEN);       \
                        _Pragma("GCC unroll 16") for (int c = 0; c < QR_CB; c++)              \
                            a[c * QR_RB + r] =                                                 \
                                xv_fma(q1, k1[c], xv_fma(q0, k0[c], a[c * QR_RB + r]));        \
                    }                                                                          \
                }                                                                              \
                if (v < nd) {                                                                  \
                    XV kv[QR_CB];                                                              \
                    _Pragma("GCC unroll 16") for (int c = 0; c < QR_CB; c++) kv[c] =           \
                        XATTN__AT_##SFX(kp[c], v * XV_LEN);                                    \
                    _Pragma("GCC unroll 16") for (int r = 0; r < QR_RB; r++)                  \
                    {                                                                          \
                        const XV q = xv_load(qp + (int64_t)r * ldq + v * XV_LEN);              \
                        _Pragma("GCC unroll 16") for (int c = 0; c < QR_CB; c++)              \
                            a[c * QR_RB + r] = xv_fma(q, kv[c], a[c * QR_RB + r]);             \
                    }                                                                          \
                }                                                                              \
                xv_store4s(st + c0 * XQ + r0, XQ, xv_reduce_lanes(a));                         \
            }                                                                                  \
    }                                                                                          \
    /* The sums over keys [lo, hi) of p * V for 4 rows x nb <= PV_DB vectors of \
     * Dv (v0 ..), written to t (rows r0.., pitch ldt); fin becomes NaN when  \
     * one of the first nvalid rows' sums is inf or NaN. Always inlined, so     \
     * that a call with nb == PV_DB unrolls and keeps the 4 x PV_DB sums in     \
     * registers (with nb a run-time count, GCC 12 kept them in memory: a load  \
     * and a store around every FMA, half the decode time). */                 \
    static inline __attribute__((always_inline)) XV_TARGET void XV_FN(pv_src4_##SFX)(         \
        float *t, int ldt, const float *st, const T *vsrc, const int64_t *rows,                \
        int64_t vstride, int r0, int v0, int nb, int lo, int hi, int nvalid, XV *fin)          \
    {                                                                                          \
        XV a[4][PV_DB];                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                   \
            _Pragma("GCC unroll 8") for (int x = 0; x < nb; x++) a[r][x] = xv_zero();         \
        for (int c = lo; c < hi; c++) {                                                        \
            /* (q8_0: the row's start, and vector v0 as an element offset) */                 \
            const T *vp = XATTN__ROWP(BLK, vsrc, XATTN__SRC_ROW(rows, vstride, c)) +            \
                          ((BLK) ? 0 : v0 * XV_LEN);                                           \
            const int e0 = (BLK) ? v0 * XV_LEN : 0;                                            \
            const float *pp = st + c * XQ + r0;                                                \
            XV vv[PV_DB];                                                                      \
            _Pragma("GCC unroll 8") for (int x = 0; x + 2 <= nb; x += 2)                      \
                XATTN__LOAD2_##ZIP(XATTN__AT_##SFX, vp, e0 + x * XV_LEN, vv[x], vv[x + 1]);    \
            if (nb % 2)                                                                        \
                vv[nb - 1] = XATTN__AT_##SFX(vp, e0 + (nb - 1) * XV_LEN);                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                               \
            {                                                                                  \
                const XV pb = xv_set1(pp[r]);                                                  \
                _Pragma("GCC unroll 8") for (int x = 0; x < nb; x++) a[r][x] =                \
                    xv_fma(pb, vv[x], a[r][x]);                                                \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                   \
        {                                                                                      \
            if (r < nvalid) /* x * 0 is NaN for x inf or NaN */                                \
                _Pragma("GCC unroll 8") for (int x = 0; x < nb; x++) *fin =                   \
                    xv_fma(a[r][x], xv_zero(), *fin);                                          \
            if (ZIP)                                                                           \
                _Pragma("GCC unroll 8") for (int x = 0; x + 2 <= nb; x += 2)                  \
                    xv_zip(a[r][x], a[r][x + 1], &a[r][x], &a[r][x + 1]);                      \
            _Pragma("GCC unroll 8") for (int x = 0; x < nb; x++)                              \
                xv_store(t + (int64_t)(r0 + r) * ldt + (v0 + x) * XV_LEN, a[r][x]);            \
        }                                                                                      \
    }                                                                                          \
    /* The sums of pv_rows (below) into t, by blocks of 4 rows; used[] marks    \
     * the blocks with keys, fin collects the inf/NaN check. */                  \
    static inline __attribute__((always_inline)) XV_TARGET void XV_FN(pv_sums_##SFX)(         \
        float *t, int ldt, int *used, XV *fin, const float *st, const T *vsrc,                 \
        const int64_t *rows, int64_t vstride, int nv, int nr, const int *clo, const int *chi)  \
    {                                                                                          \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                   \
            int lo = INT32_MAX, hi = 0;                                                        \
            for (int k = r0; k < r0 + 4 && k < nr; k++)                                        \
                if (clo[k] < chi[k]) {                                                         \
                    lo = clo[k] < lo ? clo[k] : lo;                                            \
                    hi = chi[k] > hi ? chi[k] : hi;                                            \
                }                                                                              \
            if (lo >= hi)                                                                      \
                continue;                                                                      \
            used[r0 / 4] = 1;                                                                  \
            int v = 0;                                                                         \
            for (; v + PV_DB <= nv; v += PV_DB) /* constant width: registers */                \
                XV_FN(pv_src4_##SFX)(t, ldt, st, vsrc, rows, vstride, r0, v, PV_DB, lo, hi,    \
                                     nr - r0, fin);                                            \
            for (; v < nv; v++)                                                                \
                XV_FN(pv_src4_##SFX)(t, ldt, st, vsrc, rows, vstride, r0, v, 1, lo, hi,        \
                                     nr - r0, fin);                                            \
        }                                                                                      \
    }                                                                                          \
    static XV_TARGET void XV_FN(qk_rows_##SFX)(float *st, const float *qr, int ldq, int nr,    \
                                               const T *k, const int64_t *rows,                \
                                               int64_t kstride, int n, int nc, const T *pf,    \
                                               const int64_t *pfrows, int64_t pfstride,        \
                                               int pfbytes)                                    \
    {                                                                                          \
        if (rows)                                                                              \
            XV_FN(qk_body_##SFX)(st, qr, ldq, nr, k, rows, 0, n, nc, pf, pfrows, 0, pfbytes);  \
        else                                                                                   \
            XV_FN(qk_body_##SFX)(st, qr, ldq, nr, k, NULL, kstride, n, nc, pf, NULL, pfstride, \
                                 pfbytes);                                                     \
    }                                                                                          \
    /* pv_tile's contract for nr <= XATTN__CPU_FEW_ROWS padded rows (rows nr ..  \
     * round_up(nr, 4) of acc exist, p = 0), with the inf/NaN check of V         \
     * folded in: the tile's sums go to a local buffer first, and only when      \
     * they are all finite into acc (returns 0); an inf or NaN in a V row the    \
     * rows use makes a sum inf or NaN (0 * inf is NaN), and then acc is left    \
     * as it was (returns 1) for the careful path. This replaced a separate      \
     * pass over V. */                                                           \
    static XV_TARGET int XV_FN(pv_rows_##SFX)(float *acc, int ldacc, const float *st,          \
                                              const T *vsrc, const int64_t *rows,              \
                                              int64_t vstride, int n, int nr, const int *clo,  \
                                              const int *chi)                                  \
    {                                                                                          \
        const int nv = n / XV_LEN, ldt = XATTN__CPU_DMAX;                                      \
        float t[XATTN__CPU_FEW_ROWS * XATTN__CPU_DMAX];                                        \
        int used[XATTN__CPU_FEW_ROWS / 4] = {0};                                               \
        XV fin = xv_zero();                                                                    \
        if (rows)                                                                              \
            XV_FN(pv_sums_##SFX)(t, ldt, used, &fin, st, vsrc, rows, 0, nv, nr, clo, chi);     \
        else                                                                                   \
            XV_FN(pv_sums_##SFX)(t, ldt, used, &fin, st, vsrc, NULL, vstride, nv, nr, clo,     \
                                 chi);                                                         \
        const float f = xv_hsum(fin);                                                          \
        if (f != f)                                                                            \
            return 1;                                                                          \
        for (int r0 = 0; r0 < nr; r0 += 4)                                                     \
            if (used[r0 / 4])                                                                  \
                for (int r = r0; r < r0 + 4; r++)                                              \
                    for (int x = 0; x < nv; x++) {                                             \
                        float *ap = acc + (int64_t)r * ldacc + x * XV_LEN;                     \
                        xv_store(ap, xv_add(xv_load(ap), xv_load(t + r * ldt + x * XV_LEN)));  \
                    }                                                                          \
        return 0;                                                                              \
    }

XATTN__SRC_KERNELS(f32, float, 0, 0)
XATTN__SRC_KERNELS(f16, uint16_t, 0, 0)
XATTN__SRC_KERNELS(bf16, uint16_t, 1, 0)
XATTN__SRC_KERNELS(e4m3, uint8_t, 0, 0)
XATTN__SRC_KERNELS(e5m2, uint8_t, 0, 0)
XATTN__SRC_KERNELS(q8, uint8_t, 0, 1)
#undef XATTN__SRC_KERNELS
#undef XATTN__LOAD2_0
#undef XATTN__LOAD2_1

/* Q rows r < round_up(nr, QR_RB) (pitch ldq, n elements) in place into the
 * order the kernels load K of dtype dt: for bf16, each pair of vectors as its
 * even-index then its odd-index elements (xv_load2_bf16_eo); other dtypes are
 * loaded in order, and Q stays as it is. */
static XV_TARGET void XV_FN(dec_order_q)(float *qr, int ldq, int nr, int n, xattn_dtype dt)
{
    if (dt != XATTN_DTYPE_BF16)
        return;
    const int nd = n / XV_LEN, nrq = (nr + QR_RB - 1) / QR_RB * QR_RB;
    for (int r = 0; r < nrq; r++)
        for (int v = 0; v + 2 <= nd; v += 2) { /* a last odd vector stays in order */
            float *q = qr + (int64_t)r * ldq + v * XV_LEN;
            XV e, o;
            xv_unzip(xv_load(q), xv_load(q + XV_LEN), &e, &o);
            xv_store(q, e);
            xv_store(q + XV_LEN, o);
        }
}

/* The kernels of t's K (V) dtype on its rows; the QK^T also asks L1 for the
 * V rows of the keys it reads (t->v_prefetch: V of K's dtype). */
#define XATTN__DEC_QK(SFX, T, BLK)                                                             \
    XV_FN(qk_rows_##SFX)(t->st, t->qr, t->ldq, t->nr,                                          \
                         XATTN__ROWP(BLK, (const T *)t->k.base, t->k.idx), t->k.rows,          \
                         t->k.stride, t->k.n, t->nc,                                           \
                         t->v_prefetch ? XATTN__ROWP(BLK, (const T *)t->v.base, t->v.idx)      \
                                       : NULL,                                                 \
                         t->v.rows, t->v.stride, XATTN__ROWBI(BLK, T, t->v.n))
#define XATTN__DEC_PV(SFX, T, BLK)                                                             \
    XV_FN(pv_rows_##SFX)(t->acc, t->ldacc, t->st,                                              \
                         XATTN__ROWP(BLK, (const T *)t->v.base, t->v.idx), t->v.rows,          \
                         t->v.stride, t->v.n, t->nr, t->clo, t->chi)

static XV_TARGET void XV_FN(dec_qk)(const xattn__cpu_dec_tile *t)
{
    if (t->k.dt == XATTN_DTYPE_F32)
        XATTN__DEC_QK(f32, float, 0);
    else if (t->k.dt == XATTN_DTYPE_F16)
        XATTN__DEC_QK(f16, uint16_t, 0);
    else if (t->k.dt == XATTN_DTYPE_BF16)
        XATTN__DEC_QK(bf16, uint16_t, 0);
    else if (t->k.dt == XATTN_DTYPE_FP8_E4M3)
        XATTN__DEC_QK(e4m3, uint8_t, 0);
    else if (t->k.dt == XATTN_DTYPE_FP8_E5M2)
        XATTN__DEC_QK(e5m2, uint8_t, 0);
    else
        XATTN__DEC_QK(q8, uint8_t, 1);
}

static XV_TARGET int XV_FN(dec_pv)(const xattn__cpu_dec_tile *t)
{
    if (t->v.dt == XATTN_DTYPE_F32)
        return XATTN__DEC_PV(f32, float, 0);
    if (t->v.dt == XATTN_DTYPE_F16)
        return XATTN__DEC_PV(f16, uint16_t, 0);
    if (t->v.dt == XATTN_DTYPE_BF16)
        return XATTN__DEC_PV(bf16, uint16_t, 0);
    if (t->v.dt == XATTN_DTYPE_FP8_E4M3)
        return XATTN__DEC_PV(e4m3, uint8_t, 0);
    if (t->v.dt == XATTN_DTYPE_FP8_E5M2)
        return XATTN__DEC_PV(e5m2, uint8_t, 0);
    return XATTN__DEC_PV(q8, uint8_t, 1);
}

/* One pass of byte maxima over the rows (a few instructions per 64 bytes,
 * read from L1 right after or before the kernels read them), then, only
 * when a NaN code is there, row by row. */
static XV_TARGET uint64_t XV_FN(dec_nan_keys)(const xattn__cpu_dec_rows *r, int nc)
{
    if (r->dt != XATTN_DTYPE_FP8_E4M3)
        return 0;
    const uint8_t *b = (const uint8_t *)r->base + r->idx;
    XB m = xb_zero();
    for (int c = 0; c < nc; c++)
        m = xb_or80_max(m, b + XATTN__SRC_ROW(r->rows, r->stride, c), r->n);
    if (!xb_any_ff(m))
        return 0;
    uint64_t keys = 0;
    for (int c = 0; c < nc; c++)
        if (xb_any_ff(xb_or80_max(xb_zero(), b + XATTN__SRC_ROW(r->rows, r->stride, c), r->n)))
            keys |= 1ull << c;
    return keys;
}

#undef XATTN__DEC_QK
#undef XATTN__DEC_PV
#undef XATTN__SRC_ROW
#undef XATTN__ROWP
#undef XATTN__ROWB
#undef XATTN__ROWBI
#undef XATTN__AT_f32
#undef XATTN__AT_f16
#undef XATTN__AT_bf16
#undef XATTN__AT_e4m3
#undef XATTN__AT_e5m2
#undef XATTN__AT_q8

const xattn__cpu_dec_uk XV_DEC_TABLE = {
    .simd = XV_SIMD,
    .order_q = XV_FN(dec_order_q),
    .qk = XV_FN(dec_qk),
    .pv = XV_FN(dec_pv),
    .nan_keys = XV_FN(dec_nan_keys),
};

#undef XQ
#undef XB
/* clang-format on */
