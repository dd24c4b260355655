/*
 * The vector micro-kernels, written once over a small vector layer and
 * instantiated per ISA: xattn_cpu_uk_avx2.c and xattn_cpu_uk_avx512.c define
 * the layer and include this file (it is not a normal header: no include
 * guard, included once per ISA).
 *
 * The including file defines:
 *   XV            the vector type of XV_LEN f32 lanes
 *   XV_TARGET     the target attribute of every function here
 *   XV_FN(name)   the ISA-specific name of a function
 *   XV_SIMD       the xattn_cpu_simd value, XV_TABLE the table's name
 *   QK_CB         keys per QK^T register block (the block is 2 vectors of query
 *                 rows x QK_CB keys: 2*QK_CB accumulators)
 *   QK_CB_TAIL    keys per block for the keys that blocks of QK_CB leave (see
 *                 qk_tile; QK_CB itself where every block has QK_CB keys)
 *   PV_RB, PV_DB  rows x vectors of Dv per P.V register block (PV_RB*PV_DB
 *                 accumulators; the decode kernels on K/V in place take 4 rows)
 *   PV_TAIL_BLOCK 1: the last nr % PV_RB rows of pv_tile go as one more block
 *                 over their span of keys; 0: one by one over their own keys
 *   SM_MAX_CHAINS 1 or 2: independent chains of the row maxima in softmax_tile
 *   QR_RB, QR_CB  rows x keys of a few-row QK^T block, QR_RB * QR_CB == XV_LEN
 * and the static inline vector layer xv_* (see the AVX2 file for the list;
 * xv_exp_le0 may assume x <= 0 or NaN, and may be xv_exp).
 */
/* clang-format off: the XV_FN(name)(args) calls inside macros do not reach
 * a fixed point under clang-format 14 (a second pass moves them again), so
 * this file keeps its hand layout; the format gate leaves it alone. */
/* clang-format off */

#define XQ XATTN_CPU_BQ

/* ---- conversions ------------------------------------------------------------ */

static XV_TARGET void XV_FN(load)(float *dst, const void *base, int64_t idx, int64_t stride,
                                  int64_t n, xattn_dtype dt, float mul)
{
    int64_t t = 0;
    if (stride == 1) {
        const XV mv = xv_set1(mul);
        if (dt == XATTN_DTYPE_F32) {
            const float *s = (const float *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store(dst + t, xv_mul(xv_load(s + t), mv));
        } else if (dt == XATTN_DTYPE_F16) {
            const uint16_t *s = (const uint16_t *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store(dst + t, xv_mul(xv_load_f16(s + t), mv));
        } else if (dt == XATTN_DTYPE_BF16) {
            const uint16_t *s = (const uint16_t *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store(dst + t, xv_mul(xv_load_bf16(s + t), mv));
        } /* fp8: element by element below */
    }
    for (; t < n; t++)
        dst[t] = mul * xattn__cpu_load1(base, idx + t * stride, dt);
}

/*
 * A K or V tile: rows c < nc at element idx0 + c*rstride (elements of a row
 * contiguous) into tile + c*ld as f32, n per row, zeros from n to zero_to.
 * With `check`, returns 1 when a converted element is inf or NaN (x*0 summed
 * into a vector: NaN iff one was), folded into the conversion so that the
 * tile is not read a second time.
 */
/* One row of load_rows for a source of element type T read by LOADX: with
 * `check`, four independent x*0 sums (NaN iff an element is inf or NaN), so
 * that the check is not one chain of FMA latencies along the row. */
#define XATTN__LOAD_ROW(T, LOADX)                                                              \
    {                                                                                          \
        const T *s = (const T *)base + idx;                                                    \
        if (!check) {                                                                          \
            for (; t + XV_LEN <= n; t += XV_LEN)                                               \
                xv_store(dst + t, LOADX(s + t));                                               \
        } else {                                                                               \
            for (; t + 4 * XV_LEN <= n; t += 4 * XV_LEN) {                                     \
                const XV x0 = LOADX(s + t), x1 = LOADX(s + t + XV_LEN);                        \
                const XV x2 = LOADX(s + t + 2 * XV_LEN), x3 = LOADX(s + t + 3 * XV_LEN);       \
                z0 = xv_fma(x0, zero, z0);                                                     \
                z1 = xv_fma(x1, zero, z1);                                                     \
                z2 = xv_fma(x2, zero, z2);                                                     \
                z3 = xv_fma(x3, zero, z3);                                                     \
                xv_store(dst + t, x0);                                                         \
                xv_store(dst + t + XV_LEN, x1);                                                \
                xv_store(dst + t + 2 * XV_LEN, x2);                                            \
                xv_store(dst + t + 3 * XV_LEN, x3);                                            \
            }                                                                                  \
            for (; t + XV_LEN <= n; t += XV_LEN) {                                             \
                const XV x = LOADX(s + t);                                                     \
                z0 = xv_fma(x, zero, z0);                                                      \
                xv_store(dst + t, x);                                                          \
            }                                                                                  \
        }                                                                                      \
    }

/*
 * A K or V tile: rows c < nc at element idx0 + c*rstride (elements of a row
 * contiguous) into tile + c*ld as f32, n per row, zeros from n to zero_to.
 * With `check`, returns 1 when a converted element is inf or NaN (x*0 summed
 * into vectors: NaN iff one was), folded into the conversion so that the
 * tile is not read a second time.
 */
static XV_TARGET int XV_FN(load_rows)(float *tile, int64_t ld, const void *base, int64_t idx0,
                                      int64_t rstride, int64_t n, int64_t zero_to, int64_t nc,
                                      xattn_dtype dt, int check)
{
    const XV zero = xv_zero();
    XV z0 = zero, z1 = zero, z2 = zero, z3 = zero;
    for (int64_t c = 0; c < nc; c++) {
        float *dst = tile + c * ld;
        const int64_t idx = idx0 + c * rstride;
        int64_t t = 0;
        if (dt == XATTN_DTYPE_F32)
            XATTN__LOAD_ROW(float, xv_load)
        else if (dt == XATTN_DTYPE_F16)
            XATTN__LOAD_ROW(uint16_t, xv_load_f16)
        else if (dt == XATTN_DTYPE_BF16)
            XATTN__LOAD_ROW(uint16_t, xv_load_bf16)
        for (; t < n; t++) {
            dst[t] = xattn__cpu_load1(base, idx + t, dt);
            z0 = xv_add(z0, xv_set1(dst[t] * 0.0f));
        }
        for (; t < zero_to; t++)
            dst[t] = 0.0f;
    }
    if (!check)
        return 0;
    const float sum = xv_hsum(xv_add(xv_add(z0, z1), xv_add(z2, z3)));
    return sum != sum;
}
#undef XATTN__LOAD_ROW

static XV_TARGET void XV_FN(store)(void *base, int64_t idx, int64_t stride, const float *src,
                                   int64_t n, xattn_dtype dt, float mul)
{
    int64_t t = 0;
    if (stride == 1) {
        const XV mv = xv_set1(mul);
        if (dt == XATTN_DTYPE_F32) {
            float *d = (float *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store(d + t, xv_mul(xv_load(src + t), mv));
        } else if (dt == XATTN_DTYPE_F16) {
            uint16_t *d = (uint16_t *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store_f16(d + t, xv_mul(xv_load(src + t), mv));
        } else {
            uint16_t *d = (uint16_t *)base + idx;
            for (; t + XV_LEN <= n; t += XV_LEN)
                xv_store_bf16(d + t, xv_mul(xv_load(src + t), mv));
        }
    }
    for (; t < n; t++)
        xattn__cpu_store1(base, idx + t * stride, dt, mul * src[t]);
}

/* ---- score modifications --------------------------------------------------- */

/*
 * tanh(x), Cephes-style: x + x^3 P(x^2) for |x| < 0.625 (no cancellation near
 * 0), else sign(x) (1 - 2 / (exp(2|x|) + 1)). Max relative error 1.4e-7
 * (measured against double tanh); NaN stays NaN, +-inf gives +-1.
 */
static inline XV_TARGET XV XV_FN(tanh)(XV x)
{
    const XV ax = xv_abs(x);
    const XV z = xv_mul(x, x);
    XV p = xv_set1(-5.70498872745e-3f);
    p = xv_fma(p, z, xv_set1(2.06390887954e-2f));
    p = xv_fma(p, z, xv_set1(-5.37397155531e-2f));
    p = xv_fma(p, z, xv_set1(1.33314422036e-1f));
    p = xv_fma(p, z, xv_set1(-3.33332819422e-1f));
    const XV small = xv_fma(xv_mul(p, z), x, x);
    const XV e = xv_exp(xv_add(ax, ax));
    const XV one = xv_set1(1.0f);
    const XV big = xv_copysign(xv_sub(one, xv_div(xv_set1(2.0f), xv_add(e, one))), x);
    return xv_select_lt(ax, xv_set1(0.625f), small, big);
}

/* x = cap * tanh(x / cap) (docs/semantics.md step 2). */
static XV_TARGET void XV_FN(softcap)(float *x, int64_t n, float cap)
{
    const XV cv = xv_set1(cap);
    int64_t t = 0;
    for (; t + XV_LEN <= n; t += XV_LEN)
        xv_store(x + t, xv_mul(cv, XV_FN(tanh)(xv_div(xv_load(x + t), cv))));
    if (t < n) {
        float lanes[XV_LEN];
        for (int k = 0; k < XV_LEN; k++)
            lanes[k] = t + k < n ? x[t + k] : 0.0f;
        xv_store(lanes, xv_mul(cv, XV_FN(tanh)(xv_div(xv_load(lanes), cv))));
        for (int k = 0; t + k < n; k++)
            x[t + k] = lanes[k];
    }
}

/* ---- FLASH tile kernels ----------------------------------------------------- */

/* NV vectors of query rows (r0 .. r0+NV*XV_LEN-1) x CB keys (c0 ..): NV*CB
 * accumulators, each broadcast K element used by NV FMAs. */
#define XATTN__QK_BLOCK(NAME, NV, CB)                                                          \
    static inline XV_TARGET void XV_FN(NAME)(float *st, const float *qt, const float *kt,      \
                                             int ldk, int D, int c0, int r0)                   \
    {                                                                                          \
        XV a[NV][CB];                                                                          \
        _Pragma("GCC unroll 16") for (int c = 0; c < CB; c++)                                 \
            _Pragma("GCC unroll 2") for (int x = 0; x < NV; x++) a[x][c] = xv_zero();         \
        const float *kp = kt + (int64_t)c0 * ldk;                                              \
        const float *qp = qt + r0;                                                             \
        for (int d = 0; d < D; d++) {                                                          \
            XV q[NV];                                                                          \
            _Pragma("GCC unroll 2") for (int x = 0; x < NV; x++) q[x] =                       \
                xv_load(qp + d * XQ + x * XV_LEN);                                             \
            _Pragma("GCC unroll 16") for (int c = 0; c < CB; c++)                             \
            {                                                                                  \
                const XV kb = xv_set1(kp[c * ldk + d]);                                        \
                _Pragma("GCC unroll 2") for (int x = 0; x < NV; x++) a[x][c] =                \
                    xv_fma(q[x], kb, a[x][c]);                                                 \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 16") for (int c = 0; c < CB; c++)                                 \
            _Pragma("GCC unroll 2") for (int x = 0; x < NV; x++)                              \
                xv_store(st + (c0 + c) * XQ + r0 + x * XV_LEN, a[x][c]);                       \
    }

XATTN__QK_BLOCK(qk_2xC, 2, QK_CB)
XATTN__QK_BLOCK(qk_1xC, 1, QK_CB)
#if QK_CB_TAIL != QK_CB
XATTN__QK_BLOCK(qk_2xT, 2, QK_CB_TAIL)
XATTN__QK_BLOCK(qk_1xT, 1, QK_CB_TAIL)
#endif
#undef XATTN__QK_BLOCK

/*
 * Keys go by blocks of QK_CB. Where QK_CB_TAIL differs (AVX2: 6 keys a block,
 * 12 accumulators, and blocks of 4 for the rest), round_up(nc, QK_CB_TAIL) is
 * cut exactly into blocks of QK_CB followed by one or two of QK_CB_TAIL: every
 * multiple of 4 is 6a + 4b with b <= 2, so no block runs past round_up(nc, 4)
 * (the contract allows round_up(nc, 16)), and no more than 3 keys past nc are
 * computed, as with blocks of 4.
 */
static XV_TARGET void XV_FN(qk_tile)(float *st, const float *qt, const float *kt, int ldk, int D,
                                     int nc, int nr)
{
    const int nrv = (nr + XV_LEN - 1) / XV_LEN;
#if QK_CB_TAIL != QK_CB
    _Static_assert(QK_CB == 6 && QK_CB_TAIL == 4, "an exact cut of round_up(nc, 4)");
    const int nct = (nc + QK_CB_TAIL - 1) / QK_CB_TAIL * QK_CB_TAIL;
    int ntail = 0;
    while ((nct - ntail * QK_CB_TAIL) % QK_CB)
        ntail++;
    const int nmain = nct - ntail * QK_CB_TAIL;
#else
    const int nmain = (nc + QK_CB - 1) / QK_CB * QK_CB;
#endif
    int rv = 0;
    for (; rv + 2 <= nrv; rv += 2) {
        for (int c0 = 0; c0 < nmain; c0 += QK_CB)
            XV_FN(qk_2xC)(st, qt, kt, ldk, D, c0, rv * XV_LEN);
#if QK_CB_TAIL != QK_CB
        for (int t = 0; t < ntail; t++)
            XV_FN(qk_2xT)(st, qt, kt, ldk, D, nmain + t * QK_CB_TAIL, rv * XV_LEN);
#endif
    }
    for (; rv < nrv; rv++) {
        for (int c0 = 0; c0 < nmain; c0 += QK_CB)
            XV_FN(qk_1xC)(st, qt, kt, ldk, D, c0, rv * XV_LEN);
#if QK_CB_TAIL != QK_CB
        for (int t = 0; t < ntail; t++)
            XV_FN(qk_1xT)(st, qt, kt, ldk, D, nmain + t * QK_CB_TAIL, rv * XV_LEN);
#endif
    }
}

/*
 * QK^T for few query rows (decode: the GQA group of one position). The outer
 * product above spends a whole vector of rows on each K element, 4 of 16
 * lanes useful for a group of 4; here the vectors run along D instead, every
 * lane useful: a block of QR_RB rows x QR_CB keys keeps one accumulator per
 * (row, key), and one transposing reduction turns the XV_LEN accumulators into
 * the block's XV_LEN scores. qr holds the rows row-major (pitch ldq, zero past
 * D and for rows nr .. round_up(nr, QR_RB)); kt rows up to round_up(nc, QR_CB)
 * are readable and D is padded with zeros to n (a multiple of 16) floats.
 */
static XV_TARGET void XV_FN(qk_rows)(float *st, const float *qr, int ldq, int nr, const float *kt,
                                     int ldk, int n, int nc)
{
    /* Accumulator c*QR_RB + r, so that the reduced lanes hold key by key the
     * 4 rows' scores, one group of 4 per st row (xv_store4s). */
    _Static_assert(QR_RB * QR_CB == XV_LEN && QR_RB == 4, "one accumulator per lane");
    const int nd = n / XV_LEN;
    for (int r0 = 0; r0 < nr; r0 += QR_RB)
        for (int c0 = 0; c0 < nc; c0 += QR_CB) {
            XV a[XV_LEN];
#pragma GCC unroll 16
            for (int k = 0; k < XV_LEN; k++)
                a[k] = xv_zero();
            const float *kp = kt + (int64_t)c0 * ldk, *qp = qr + (int64_t)r0 * ldq;
            for (int v = 0; v < nd; v++) {
                XV kv[QR_CB];
#pragma GCC unroll 16
                for (int c = 0; c < QR_CB; c++)
                    kv[c] = xv_load(kp + (int64_t)c * ldk + v * XV_LEN);
#pragma GCC unroll 16
                for (int r = 0; r < QR_RB; r++) {
                    const XV q = xv_load(qp + (int64_t)r * ldq + v * XV_LEN);
#pragma GCC unroll 16
                    for (int c = 0; c < QR_CB; c++)
                        a[c * QR_RB + r] = xv_fma(q, kv[c], a[c * QR_RB + r]);
                }
            }
            xv_store4s(st + c0 * XQ + r0, XQ, xv_reduce_lanes(a));
        }
}

/* softmax_tile for at most 4 rows (decode: one position of a GQA group of 4):
 * a vector holds 4 rows of XV_LEN / 4 keys, so that no lane is idle (the
 * general path spends a whole vector, and its exp, on each key). */
static XV_TARGET void XV_FN(softmax_rows4)(float *st, int nc, float *m, float *l, float *alpha)
{
    const int G = XV_LEN / 4;
    const XV mo = xv_bcast4(m);
    XV mx = mo;
    int c = 0;
    for (; c + G <= nc; c += G)
        mx = xv_max_nan(mx, xv_load4s(st + c * XQ, XQ));
    for (; c < nc; c++) /* the last keys: every group holds the same key */
        mx = xv_max_nan(mx, xv_bcast4(st + c * XQ));
    mx = xv_fold4_max_nan(mx);
    const XV mu = xv_neginf_to_zero(mx);
    XV sum = xv_zero(), tail = xv_zero();
    for (c = 0; c + G <= nc; c += G) {
        const XV p = xv_exp_le0(xv_sub(xv_load4s(st + c * XQ, XQ), mu));
        xv_store4s(st + c * XQ, XQ, p);
        sum = xv_add(sum, p);
    }
    for (; c < nc; c++) {
        const XV p = xv_exp_le0(xv_sub(xv_bcast4(st + c * XQ), mu));
        xv_store4(st + c * XQ, p);
        tail = xv_add(tail, p);
    }
    const XV al = xv_exp_le0(xv_sub(mo, mu));
    sum = xv_add(xv_fold4_add(sum), tail);
    xv_store4(l, xv_fma(xv_bcast4(l), al, sum));
    xv_store4(m, mx);
    xv_store4(alpha, al);
}

static XV_TARGET void XV_FN(softmax_tile)(float *st, int nc, int nr, float *m, float *l,
                                          float *alpha)
{
    if (nr <= 4) {
        XV_FN(softmax_rows4)(st, nc, m, l, alpha);
        return;
    }
    const int nrv = (nr + XV_LEN - 1) / XV_LEN;
    for (int rv = 0; rv < nrv; rv++) {
        const int o = rv * XV_LEN;
        const XV mo = xv_load(m + o);
        XV mx = mo;
#if SM_MAX_CHAINS == 2
        /* Two chains of maxima: one is a chain of the max's latency (3
         * dependent instructions on AVX2) key after key. */
        XV mx1 = mo;
        int k = 0;
        for (; k + 2 <= nc; k += 2) {
            mx = xv_max_nan(mx, xv_load(st + k * XQ + o));
            mx1 = xv_max_nan(mx1, xv_load(st + (k + 1) * XQ + o));
        }
        if (k < nc)
            mx = xv_max_nan(mx, xv_load(st + k * XQ + o));
        mx = xv_max_nan(mx, mx1);
#else
        for (int c = 0; c < nc; c++)
            mx = xv_max_nan(mx, xv_load(st + c * XQ + o));
#endif
        const XV mu = xv_neginf_to_zero(mx);
        const XV al = xv_exp_le0(xv_sub(mo, mu));
        XV sum0 = xv_zero(), sum1 = xv_zero();
        int c = 0;
        for (; c + 2 <= nc; c += 2) {
            const XV p0 = xv_exp_le0(xv_sub(xv_load(st + c * XQ + o), mu));
            const XV p1 = xv_exp_le0(xv_sub(xv_load(st + (c + 1) * XQ + o), mu));
            xv_store(st + c * XQ + o, p0);
            xv_store(st + (c + 1) * XQ + o, p1);
            sum0 = xv_add(sum0, p0);
            sum1 = xv_add(sum1, p1);
        }
        for (; c < nc; c++) {
            const XV p0 = xv_exp_le0(xv_sub(xv_load(st + c * XQ + o), mu));
            xv_store(st + c * XQ + o, p0);
            sum0 = xv_add(sum0, p0);
        }
        xv_store(l + o, xv_fma(xv_load(l + o), al, xv_add(sum0, sum1)));
        xv_store(m + o, mx);
        xv_store(alpha + o, al);
    }
}

/* acc rows r0..r0+NR-1, Dv vectors v0..v0+NB-1, keys c in [lo, hi). */
#define XATTN__PV_BLOCK(NAME, NR, NB)                                                          \
    static inline XV_TARGET void XV_FN(NAME)(float *acc, int ldacc, const float *st,           \
                                             const float *vt, int ldv, int r0, int v0, int lo, \
                                             int hi)                                           \
    {                                                                                          \
        XV a[NR][NB];                                                                          \
        _Pragma("GCC unroll 16") for (int r = 0; r < NR; r++)                                 \
            _Pragma("GCC unroll 16") for (int x = 0; x < NB; x++)                             \
                a[r][x] = xv_load(acc + (int64_t)(r0 + r) * ldacc + (v0 + x) * XV_LEN);        \
        for (int c = lo; c < hi; c++) {                                                        \
            const float *vp = vt + (int64_t)c * ldv + v0 * XV_LEN;                             \
            const float *pp = st + c * XQ + r0;                                                \
            XV v[NB];                                                                          \
            _Pragma("GCC unroll 16") for (int x = 0; x < NB; x++) v[x] = xv_load(vp + x * XV_LEN); \
            _Pragma("GCC unroll 16") for (int r = 0; r < NR; r++)                             \
            {                                                                                  \
                const XV pb = xv_set1(pp[r]);                                                  \
                _Pragma("GCC unroll 16") for (int x = 0; x < NB; x++)                         \
                    a[r][x] = xv_fma(pb, v[x], a[r][x]);                                       \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 16") for (int r = 0; r < NR; r++)                                 \
            _Pragma("GCC unroll 16") for (int x = 0; x < NB; x++)                             \
                xv_store(acc + (int64_t)(r0 + r) * ldacc + (v0 + x) * XV_LEN, a[r][x]);        \
    }

XATTN__PV_BLOCK(pv_RxB, PV_RB, PV_DB)
XATTN__PV_BLOCK(pv_Rx1, PV_RB, 1)
XATTN__PV_BLOCK(pv_1xB, 1, PV_DB)
XATTN__PV_BLOCK(pv_1x1, 1, 1)
#if PV_RB != 4 /* the tail block's 4 and 2 rows */
XATTN__PV_BLOCK(pv_4xB, 4, PV_DB)
XATTN__PV_BLOCK(pv_4x1, 4, 1)
XATTN__PV_BLOCK(pv_2xB, 2, PV_DB)
XATTN__PV_BLOCK(pv_2x1, 2, 1)
#endif

/* Rows r0 .. r0+nb-1 (nb PV_RB, 4, 2 or 1) over keys [lo, hi): every vector
 * of Dv, by blocks of PV_DB vectors. */
static inline XV_TARGET void XV_FN(pv_rows)(float *acc, int ldacc, const float *st, const float *vt,
                                            int ldv, int nv, int r0, int nb, int lo, int hi)
{
    int v = 0;
    for (; v + PV_DB <= nv; v += PV_DB)
        switch (nb) {
        case PV_RB: XV_FN(pv_RxB)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
#if PV_RB != 4
        case 4: XV_FN(pv_4xB)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
        case 2: XV_FN(pv_2xB)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
#endif
        default: XV_FN(pv_1xB)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
        }
    for (; v < nv; v++)
        switch (nb) {
        case PV_RB: XV_FN(pv_Rx1)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
#if PV_RB != 4
        case 4: XV_FN(pv_4x1)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
        case 2: XV_FN(pv_2x1)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
#endif
        default: XV_FN(pv_1x1)(acc, ldacc, st, vt, ldv, r0, v, lo, hi); break;
        }
}

/* The span of keys of rows r .. e-1: [*lo, *hi), empty (lo >= hi) when none
 * of them has a key. */
static inline void XV_FN(pv_span)(const int *clo, const int *chi, int r, int e, int *lo, int *hi)
{
    *lo = INT32_MAX;
    *hi = 0;
    for (int k = r; k < e; k++)
        if (clo[k] < chi[k]) {
            *lo = clo[k] < *lo ? clo[k] : *lo;
            *hi = chi[k] > *hi ? chi[k] : *hi;
        }
}

static XV_TARGET void XV_FN(pv_tile)(float *acc, int ldacc, const float *st, const float *vt,
                                     int ldv, int n, int nr, const int *clo, const int *chi)
{
    const int nv = (n + XV_LEN - 1) / XV_LEN;
    int r = 0, lo, hi;
    /* Blocks of PV_RB rows over their span of keys, then the rest: the
     * table's pv_block and pv_tail_block, which the executed-work count
     * follows (xattn__cpu_pv_pairs). Each block takes every vector of Dv
     * before the next block starts: with the vectors outermost instead, so
     * that a slab of V stayed in L1 for all the blocks, the AVX2 P.V measured
     * no faster (89-91% of the FMA rate against 91-94%, xattn_ukbench
     * --prefill at D 64 and 128). */
    for (; r + PV_RB <= nr; r += PV_RB) {
        XV_FN(pv_span)(clo, chi, r, r + PV_RB, &lo, &hi);
        if (lo < hi)
            XV_FN(pv_rows)(acc, ldacc, st, vt, ldv, nv, r, PV_RB, lo, hi);
    }
#if PV_TAIL_BLOCK
    /* The last nr % PV_RB rows as one more block over their span, by 4, 2
     * and 1 rows (alone, each of those rows would load V for 1 or 2 FMAs). */
    XV_FN(pv_span)(clo, chi, r, nr, &lo, &hi);
    if (lo < hi)
        for (int nb = 4; nb >= 1; nb /= 2)
            if (r + nb <= nr) {
                XV_FN(pv_rows)(acc, ldacc, st, vt, ldv, nv, r, nb, lo, hi);
                r += nb;
            }
#else
    for (; r < nr; r++)
        if (clo[r] < chi[r])
            XV_FN(pv_rows)(acc, ldacc, st, vt, ldv, nv, r, 1, clo[r], chi[r]);
#endif
}

static XV_TARGET int XV_FN(nonfinite)(const float *x, int64_t n)
{
    /* x * 0 is 0 for finite x and NaN for inf/NaN; the sum is NaN iff any is. */
    XV z = xv_zero();
    const XV zero = xv_zero();
    int64_t t = 0;
    for (; t + XV_LEN <= n; t += XV_LEN)
        z = xv_fma(xv_load(x + t), zero, z);
    float s = xv_hsum(z);
    for (; t < n; t++)
        s += x[t] * 0.0f;
    return s != s;
}

/* ---- row kernels (NAIVE softmax, the inf/NaN paths) --------------------------- */

static XV_TARGET void XV_FN(axpy_rows)(float *acc, int ldacc, int nr, const float *coef,
                                       const float *v, int n)
{
    for (int r = 0; r < nr; r++) {
        if (coef[r] == 0.0f)
            continue;
        const XV cv = xv_set1(coef[r]);
        float *a = acc + (int64_t)r * ldacc;
        for (int t = 0; t < n; t += XV_LEN)
            xv_store(a + t, xv_fma(cv, xv_load(v + t), xv_load(a + t)));
    }
}

static XV_TARGET void XV_FN(copy_stream)(float *dst, const float *src, int64_t n)
{
    int64_t t = 0;
    if (((uintptr_t)dst & 63u) == 0)
        for (; t + XV_LEN <= n; t += XV_LEN)
            xv_stream(dst + t, xv_load(src + t));
    for (; t < n; t++)
        dst[t] = src[t];
}

static XV_TARGET void XV_FN(stream_fence)(void) { _mm_sfence(); }

static XV_TARGET float XV_FN(row_max)(const float *x, int64_t n)
{
    XV mx = xv_set1(-INFINITY);
    int64_t t = 0;
    for (; t + XV_LEN <= n; t += XV_LEN)
        mx = xv_max_nan(mx, xv_load(x + t));
    float lanes[XV_LEN];
    xv_store(lanes, mx);
    float m = -INFINITY;
    for (int k = 0; k < XV_LEN; k++)
        m = (lanes[k] > m || lanes[k] != lanes[k]) ? lanes[k] : m;
    for (; t < n; t++)
        m = (x[t] > m || x[t] != x[t]) ? x[t] : m;
    return m;
}

static XV_TARGET float XV_FN(exp_sum)(float *x, int64_t n, float m)
{
    const XV mv = xv_set1(m);
    XV sum = xv_zero();
    int64_t t = 0;
    for (; t + XV_LEN <= n; t += XV_LEN) {
        const XV p = xv_exp_le0(xv_sub(xv_load(x + t), mv));
        xv_store(x + t, p);
        sum = xv_add(sum, p);
    }
    if (t < n) { /* the tail through one padded vector: -inf lanes give 0 */
        float lanes[XV_LEN];
        for (int k = 0; k < XV_LEN; k++)
            lanes[k] = t + k < n ? x[t + k] : -INFINITY;
        const XV p = xv_exp_le0(xv_sub(xv_load(lanes), mv));
        xv_store(lanes, p);
        sum = xv_add(sum, p);
        for (int k = 0; t + k < n; k++)
            x[t + k] = lanes[k];
    }
    return xv_hsum(sum);
}

static XV_TARGET void XV_FN(scale)(float *x, int64_t n, float a)
{
    const XV av = xv_set1(a);
    int64_t t = 0;
    for (; t + XV_LEN <= n; t += XV_LEN)
        xv_store(x + t, xv_mul(xv_load(x + t), av));
    for (; t < n; t++)
        x[t] *= a;
}

const xattn__cpu_uk XV_TABLE = {
    .simd = XV_SIMD,
    .load = XV_FN(load),
    .store = XV_FN(store),
    .load_rows = XV_FN(load_rows),
    .qk_tile = XV_FN(qk_tile),
    .qk_rows = XV_FN(qk_rows),
    .softmax_tile = XV_FN(softmax_tile),
    .pv_tile = XV_FN(pv_tile),
    .pv_block = PV_RB,
    .pv_tail_block = PV_TAIL_BLOCK,
    .nonfinite = XV_FN(nonfinite),
    .axpy_rows = XV_FN(axpy_rows),
    .copy_stream = XV_FN(copy_stream),
    .stream_fence = XV_FN(stream_fence),
    .row_max = XV_FN(row_max),
    .exp_sum = XV_FN(exp_sum),
    .scale = XV_FN(scale),
    .softcap = XV_FN(softcap),
};

#undef XQ
#undef XATTN__PV_BLOCK
/* clang-format on */
