/*
 * Private to kernels_cpu/: what NAIVE, FLASH and SPLITKV share.
 *
 * - dtype load/store in scalar form (the SIMD paths have vector versions);
 * - the micro-kernel table (xattn__cpu_uk): one instance per SIMD path, chosen
 *   once per call from xattn_cpu_args.simd. The algorithms are written once, in
 *   plain C, on top of this table (BLIS's framework / micro-kernel split);
 * - the masking helpers: xattn__cpu_row_init computes, for one query row, the
 *   interval of keys that causal / window / len_k leave valid (the masks of
 *   docs/semantics.md step 6 always leave one contiguous interval, which is what lets
 *   whole tiles be skipped), and xattn__cpu_mod_row applies softcap, ALiBi,
 *   bias and the mask to a run of scores;
 * - the flash tile loop (xattn__cpu_attend), shared by FLASH and SPLITKV.
 *
 * Tile layout of the flash loop (all f32, in the per-thread scratch):
 *   qt  [D][BQ]      the query tile transposed, times xattn__cpu_ctx.qscale
 *   kt  [BK][D]      the K tile, row-major (one key per row)
 *   st  [BK][BQ]     scores transposed: st[c*BQ + r] = score(row r, key c)
 *   vt  [BK][Dvp]    the V tile, rows padded with zeros to Dvp
 *   acc [BQ][Dvp]    the unnormalized output rows
 * Storing the scores transposed makes QK^T an outer product (a Q vector times a
 * broadcast K element, no horizontal sums), and makes the online softmax
 * vertical (one lane per query row), which is what SIMD wants on a CPU.
 */
#ifndef XATTN_CPU_COMMON_H
#define XATTN_CPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "xattn_cpu_kernels.h"

#ifdef XATTN_HAVE_OPENMP
#include <omp.h>
#define XATTN__CPU_TID() omp_get_thread_num()
#else
#define XATTN__CPU_TID() 0
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define XATTN__CPU_X86 1
#else
#define XATTN__CPU_X86 0
#endif

/* Tile sizes (tuning data: override with -D). BQ query rows per tile, BK keys
 * per tile. Both must be multiples of 16 (one AVX-512 vector of f32). Each
 * converted K/V tile serves BQ rows: 64 rather than 32 halves the K/V traffic,
 * which dominates with BSHD strides (one key row per 4 KiB page), at the price
 * of coarser causal tile skipping. */
#ifndef XATTN_CPU_BQ
#define XATTN_CPU_BQ 64
#endif
#ifndef XATTN_CPU_BK
#define XATTN_CPU_BK 64
#endif
/* Query tiles with few rows (decode: a few positions times a GQA group) use
 * uk->qk_rows, whose vectors run along D, rather than the outer product,
 * whose vectors of rows would be mostly empty. XATTN__CPU_FEW_ROWS is the
 * most rows of such a tile (its buffers; the in-place decode kernels take
 * that many). On f32 tiles already converted, the outer product wins from 9
 * rows on, so that few-row tiles stop at XATTN__CPU_FEW_ROWS_TILED there
 * (FLASH f32 H8 Sq12 and Sq16, one KV head per tile: 1.03-1.04x the time
 * with 16); reading K/V in place, the few-row kernels avoid the conversion
 * and win up to 16 (SPLITKV B8 H32/8 Sk8192 Sq4, 16 rows: bf16 0.64x, f16
 * 0.85x, f32 0.68x the time of the tiled path). */
#define XATTN__CPU_FEW_ROWS 16
#define XATTN__CPU_FEW_ROWS_TILED 8
/* The KV tile (keys) for p: XATTN_CPU_BK, halved (down to 16) while the V
 * tile, which the P.V micro-kernel re-reads for every 4-row block of the query
 * tile, would take more than 3/4 of the L1 data cache (D 256: 32 keys on a
 * 48 KiB L1). A multiple of 16, at most XATTN_CPU_BK. */
int64_t xattn__cpu_bk(const xattn_problem *p);
/* `keys` (a power-of-two multiple of 16) halved, down to 16, while
 * keys * bytes_per_key exceeds budget: the tile and step sizes above. */
int64_t xattn__cpu_fit_keys(int64_t keys, uint64_t bytes_per_key, uint64_t budget);
/* Largest head dim (256, docs/api.md) rounded up to the padding unit. */
#define XATTN__CPU_DMAX 256
/* f32 rows in scratch are padded to a multiple of 16 floats with zeros, so the
 * vector paths never need tail handling inside the hot loops. */
#define XATTN__CPU_PAD 16

_Static_assert(XATTN_CPU_BQ % 16 == 0 && XATTN_CPU_BQ > 0, "XATTN_CPU_BQ: multiple of 16");
_Static_assert(XATTN_CPU_BK % 16 == 0 && XATTN_CPU_BK > 0, "XATTN_CPU_BK: multiple of 16");

static inline int64_t xattn__cpu_round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}
static inline int64_t xattn__cpu_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static inline int64_t xattn__cpu_max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}
/* a += b (the executed-work counts). */
static inline void xattn__cpu_work_add(xattn_cpu_work *a, const xattn_cpu_work *b)
{
    a->qk_pairs += b->qk_pairs;
    a->pv_terms += b->pv_terms;
    a->kv_rows += b->kv_rows;
}
#ifdef XATTN_HAVE_OPENMP
/* reduction(xattn__cpu_work_sum : w): each thread counts into its own copy of
 * w, summed at the end of the loop. */
#pragma omp declare reduction(xattn__cpu_work_sum:xattn_cpu_work                                   \
                              : xattn__cpu_work_add(&omp_out, &omp_in))                            \
    initializer(omp_priv = (xattn_cpu_work){0, 0, 0})
#endif

static inline int xattn__cpu_is_fp8(xattn_dtype t)
{
    return t == XATTN_DTYPE_FP8_E4M3 || t == XATTN_DTYPE_FP8_E5M2;
}

/* The K/V cache dtypes scaled per head or per block (fp8, q8_0): only the
 * decode driver's in-place reads and the per-head tile loads apply those. */
static inline int xattn__cpu_is_lowp(xattn_dtype t)
{
    return xattn__cpu_is_fp8(t) || t == XATTN_DTYPE_Q8_0;
}

/* Bytes of one element of a K/V/Q array (the kernels' dtypes); q8_0 has no
 * whole number (34 bytes per 32 values): address it through
 * xattn__cpu_start_byte. */
static inline int64_t xattn__cpu_esize(xattn_dtype t)
{
    return t == XATTN_DTYPE_F32 ? 4 : xattn__cpu_is_fp8(t) || t == XATTN_DTYPE_Q8_0 ? 1 : 2;
}

/* Where element e of a buffer of dtype t begins, in bytes; for q8_0 (e the
 * first value of a block) the block's d. */
static inline int64_t xattn__cpu_start_byte(xattn_dtype t, int64_t e)
{
    return t == XATTN_DTYPE_Q8_0 ? xattn_sem_q8_0_d_byte(e) : e * xattn__cpu_esize(t);
}

/* Whether the in-place QK^T asks L1 for the V rows that the P.V reads next
 * (its pf argument): with 16-bit V, yes; with f32 (twice the lines) that
 * measured slower than letting the P.V fetch them (B8 H32/8 D128 Sk32768:
 * 100-105 vs 107-110 ms). */
static inline int xattn__cpu_v_prefetch_in_qk(xattn_dtype v)
{
    return v != XATTN_DTYPE_F32;
}

/* ---- scalar dtype conversions (own copies: kernels share nothing with the
 * reference or the dispatch layer) ------------------------------------------ */

static inline float xattn__cpu_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t xattn__cpu_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float xattn__cpu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31)
        return xattn__cpu_bits_f32(sign | 0x7f800000u | (m << 13));
    return xattn__cpu_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Round to nearest even; overflow gives inf; NaN stays a (quiet) NaN. */
static inline uint16_t xattn__cpu_f32_to_f16(float f)
{
    uint32_t u = xattn__cpu_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {    /* below 2^-14: subnormal half or zero */
        if (a <= 0x33000000u) /* <= 2^-25: ties to even, i.e. to 0 */
            return (uint16_t)sign;
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        unsigned shift = 126u - (a >> 23); /* 14..24 */
        uint32_t v = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1u)))
            v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = a - 0x38000000u; /* rebias 127 -> 15 */
    v = (v + 0x0fffu + ((v >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | v);
}

static inline float xattn__cpu_bf16_to_f32(uint16_t h)
{
    return xattn__cpu_bits_f32((uint32_t)h << 16);
}

static inline uint16_t xattn__cpu_f32_to_bf16(float f)
{
    uint32_t u = xattn__cpu_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Element idx of a buffer of dtype dt, as f32. */
static inline float xattn__cpu_load1(const void *base, int64_t idx, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_F32)
        return ((const float *)base)[idx];
    if (xattn__cpu_is_fp8(dt))
        return xattn_sem_fp8_value(((const uint8_t *)base)[idx], dt == XATTN_DTYPE_FP8_E5M2);
    if (dt == XATTN_DTYPE_Q8_0) { /* d * qs, exact in f32 */
        const uint8_t *d = (const uint8_t *)base + xattn_sem_q8_0_d_byte(idx);
        return xattn__cpu_f16_to_f32((uint16_t)(d[0] | (d[1] << 8))) *
               (float)((const int8_t *)base)[xattn_sem_q8_0_qs_byte(idx)];
    }
    uint16_t h = ((const uint16_t *)base)[idx];
    return dt == XATTN_DTYPE_F16 ? xattn__cpu_f16_to_f32(h) : xattn__cpu_bf16_to_f32(h);
}

static inline void xattn__cpu_store1(void *base, int64_t idx, xattn_dtype dt, float v)
{
    if (dt == XATTN_DTYPE_F32)
        ((float *)base)[idx] = v;
    else
        ((uint16_t *)base)[idx] =
            dt == XATTN_DTYPE_F16 ? xattn__cpu_f32_to_f16(v) : xattn__cpu_f32_to_bf16(v);
}

/* ---- the micro-kernel table ------------------------------------------------ */

/*
 * One per SIMD path (portable C, AVX2+FMA+F16C, AVX-512). Conventions:
 * "Dvp-padded" rows are multiples of XATTN__CPU_PAD floats with zero padding.
 */
typedef struct xattn__cpu_uk {
    xattn_cpu_simd simd;
    /* dst[t] = mul * x[idx + t*stride], t < n, x of dtype dt at `base`. */
    void (*load)(float *dst, const void *base, int64_t idx, int64_t stride, int64_t n,
                 xattn_dtype dt, float mul);
    /* A tile: rows c < nc at element idx0 + c*rstride of `base` (contiguous
     * elements) to tile + c*ld, n converted elements each, zeros up to zero_to;
     * with `check`, returns 1 when one of them is inf or NaN. NULL: the
     * caller loops over load (and nonfinite). */
    int (*load_rows)(float *tile, int64_t ld, const void *base, int64_t idx0, int64_t rstride,
                     int64_t n, int64_t zero_to, int64_t nc, xattn_dtype dt, int check);
    /* x[idx + t*stride] = mul * src[t] rounded to dt (nearest even). */
    void (*store)(void *base, int64_t idx, int64_t stride, const float *src, int64_t n,
                  xattn_dtype dt, float mul);

    /* FLASH / SPLITKV tile micro-kernels (layout in the header comment). */
    /* st[c*BQ + r] = sum_{d<D} qt[d*BQ + r] * kt[c*ldk + d] for c < nc, r < nr.
     * May also write rows up to round_up(nc, 16) and lanes up to round_up(nr, 16)
     * (kt rows and qt lanes there must be finite, e.g. zero). */
    void (*qk_tile)(float *st, const float *qt, const float *kt, int ldk, int D, int nc, int nr);
    /* The same scores for nr <= XATTN__CPU_FEW_ROWS rows from row-major Q:
     * st[c*BQ + r] = sum_{d<n} qr[r*ldq + d] * kt[c*ldk + d], n a multiple of
     * 16 (rows of qr zero past D and for rows nr .. round_up(nr, 4); kt zero
     * past D, rows up to round_up(nc, 16) readable). NULL: use qk_tile. */
    void (*qk_rows)(float *st, const float *qr, int ldq, int nr, const float *kt, int ldk, int n,
                    int nc);
    /* The online-softmax update for keys c < nc of rows r < nr (lanes up to
     * round_up(nr, 16) may be touched): m_new = max(m, max_c st) with NaN
     * sticky; st becomes exp(st - m_new) (a -inf m_new is used as 0 so that a
     * still fully masked row stays at p = 0 without producing NaN);
     * alpha = exp(m_old - m_new); l = l*alpha + sum_c p. */
    void (*softmax_tile)(float *st, int nc, int nr, float *m, float *l, float *alpha);
    /* acc[r*ldacc + :] += sum_{clo[r] <= c < chi[r]} st[c*BQ + r] * vt[c*ldv + :]
     * over n columns (n <= ldv; vt and acc padded to ldv). Keys outside a row's
     * own range may be visited when they are inside another row's of the same
     * pv_block-row block: their p is 0 there, so V must be finite (see nonfinite). */
    void (*pv_tile)(float *acc, int ldacc, const float *st, const float *vt, int ldv, int n, int nr,
                    const int *clo, const int *chi);
    /* How pv_tile walks the rows, for the executed-work count
     * (xattn__cpu_pv_pairs): blocks of pv_block rows over the span from their
     * lowest clo to their highest chi, the last nr % pv_block rows as one
     * more block over their span when pv_tail_block is 1, else one by one
     * over their own keys (pv_block 1: every row over its own keys). */
    int pv_block, pv_tail_block;
    /* 1 when x[0..n) holds an inf or NaN. */
    int (*nonfinite)(const float *x, int64_t n);

    /* Row micro-kernels: the softmax phase of NAIVE, the inf/NaN paths (n a
     * multiple of 16, rows zero-padded where noted). */
    /* acc[r*ldacc + :n] += coef[r] * v for r < nr; rows with coef[r] == 0 are
     * skipped (so a masked key never touches the output, even if V holds NaN). */
    void (*axpy_rows)(float *acc, int ldacc, int nr, const float *coef, const float *v, int n);
    /* dst[0..n) = src[0..n), with non-temporal (streaming) stores where dst is
     * 64-byte aligned: for results written once and read much later from
     * memory (NAIVE's score matrix), which then skip the read-for-ownership
     * of every line. NULL: memcpy. A thread that used it calls stream_fence
     * before others read what it wrote. */
    void (*copy_stream)(float *dst, const float *src, int64_t n);
    void (*stream_fence)(void);
    /* max of x[0..n) with NaN sticky (-inf for n = 0). */
    float (*row_max)(const float *x, int64_t n);
    /* x = exp(x - m) in place; returns the sum. */
    float (*exp_sum)(float *x, int64_t n, float m);
    /* x *= a. */
    void (*scale)(float *x, int64_t n, float a);
    /* x = cap * tanh(x / cap) (the softcap, step 2 of the semantics). */
    void (*softcap)(float *x, int64_t n, float cap);
} xattn__cpu_uk;

extern const xattn__cpu_uk xattn__cpu_uk_portable;
#if XATTN__CPU_X86
extern const xattn__cpu_uk xattn__cpu_uk_avx2;
extern const xattn__cpu_uk xattn__cpu_uk_avx512;
#endif

/* uk->load_rows, or its loop over uk->load (and nonfinite) where the table has
 * none; fp8 rows through a 256-entry table of their values times `mul` (1
 * for every other dtype); q8_0 rows (idx0 and rstride whole blocks, n a
 * multiple of 32) block by block. */
int xattn__cpu_load_rows(const struct xattn__cpu_uk *uk, float *tile, int64_t ld, const void *base,
                         int64_t idx0, int64_t rstride, int64_t n, int64_t zero_to, int64_t nc,
                         xattn_dtype dt, int check, float mul);

/* The table for a SIMD path (the portable one for anything this build lacks). */
const xattn__cpu_uk *xattn__cpu_uk_get(xattn_cpu_simd simd);

/* ---- per-call context, rows, masking -------------------------------------- */

typedef struct xattn__cpu_ctx {
    const xattn_problem *p;
    const xattn_cpu_args *a;
    const xattn__cpu_uk *uk;
    /* The call's score modifiers in two parts: the softcap that the callers
     * run on whole vectors (vcap, 0 = none), and what xattn__cpu_mod_row
     * applies key by key through xattn_sem_modify (rmods: everything, softcap
     * included, when the call has a modifier without a vector form here). */
    float vcap;
    xattn_sem_mods rmods;
    int mods;    /* ALiBi, bias or rmods present: valid scores need xattn__cpu_mod_row */
    int64_t Dvp; /* Dv rounded up to XATTN__CPU_PAD */
    int64_t ldk; /* row pitch of the K tile: D rounded up to XATTN__CPU_PAD, zero-padded */
    /* The scale in two factors, qscale * post (see xattn__cpu_ctx_init): q is
     * multiplied by qscale as it is loaded, each dot product by post (skipped
     * where post is 1). */
    float qscale, post;
} xattn__cpu_ctx;

void xattn__cpu_ctx_init(xattn__cpu_ctx *cx, const xattn_cpu_args *a);

/* One query row (b, h, i) of a real (non-padding) row. */
typedef struct xattn__cpu_row {
    int64_t h;        /* query head */
    int64_t i;        /* row within its sequence */
    int64_t pos;      /* aligned position p (docs/semantics.md step 3) */
    int64_t lo, hi;   /* valid keys: lo <= j < hi (lo == hi: none) */
    float slope;      /* ALiBi slope of head h (used when p->alibi) */
    int64_t bias_idx; /* element index of bias[b, h, i, 0] (when p->has_bias) */
} xattn__cpu_row;

/* Fills rw for row i of (b, h) and clips its valid keys to [kmin, kmax). */
void xattn__cpu_row_init(const xattn__cpu_ctx *cx, xattn__cpu_row *rw, int64_t b, int64_t h,
                         int64_t i, int64_t kmin, int64_t kmax);

/* For the scores s[t*stride] of keys j0 + t (t < n) of row rw: ALiBi and bias
 * and cx->rmods on the valid keys, -inf on the others (docs/semantics.md steps
 * 2-6). The vectorized softcap comes before: the callers run uk->softcap with
 * cx->vcap on the raw scores first when it is not 0 (a masked score is
 * overwritten with -inf here anyway). */
void xattn__cpu_mod_row(const xattn__cpu_ctx *cx, const xattn__cpu_row *rw, float *s,
                        int64_t stride, int64_t j0, int64_t n);

/* Element indices of the first element of a row of Q/O (row i of sequence b,
 * head h), of K/V (key j of sequence b, KV head hk), and of LSE. */
static inline int64_t xattn__cpu_qrow(const xattn_view *v, const xattn_problem *p, int64_t b,
                                      int64_t i, int64_t h)
{
    return v->off + b * v->sb + ((int64_t)p->start_q[b] + i) * v->ss + h * v->sh;
}
static inline int64_t xattn__cpu_krow(const xattn_view *v, const xattn_problem *p, int64_t b,
                                      int64_t j, int64_t hk)
{
    return xattn_problem_kv_token(p, v, b, j) + hk * v->sh; /* looks the page up when paged */
}
/* Of the n keys j .. j+n-1 of sequence b, how many from j on lie one row
 * stride (v->ss) apart from key j in K or V (view v), so that one krow and
 * the stride address them: all n with contiguous K/V; with a paged cache, up
 * to the end of j's page, and on through the next pages while the table
 * names pages that follow each other in the pool at that stride (page ids
 * k, k+1, ... with the slots at the row stride, as in [pages, page_size, Hkv,
 * D]). Only the table entries of keys < j + n are read. Loops over
 * consecutive keys go by these runs. */
static inline int64_t xattn__cpu_krun(const xattn_problem *p, const xattn_view *v, int64_t b,
                                      int64_t j, int64_t n)
{
    if (!p->paged)
        return n;
    int64_t run = p->page_size - j % p->page_size;
    if (run < n && v->sb == p->page_size * v->ss) {
        const int32_t *pg = p->block_table + b * p->max_pages + j / p->page_size;
        for (; run < n && pg[1] == pg[0] + 1; pg++)
            run += p->page_size;
    }
    return run < n ? run : n;
}
static inline int64_t xattn__cpu_lse_idx(const xattn_problem *p, int64_t b, int64_t h, int64_t i)
{
    return p->lse.off + b * p->lse.sb + h * p->lse.sh + ((int64_t)p->start_q[b] + i) * p->lse.ss;
}

/* The score of row rw of sequence b and key j, recomputed on its own (dot
 * product, softcap, ALiBi, bias, masks: -inf when masked). For the rare key
 * whose weight is 0 next to a V row holding inf or NaN: only a -inf score
 * means "contributes nothing"; a weight that merely underflowed in f32 is
 * still a positive weight in the reference (double), so the key's inf and NaN
 * entries reach the output (xattn__cpu_add_negligible). */
float xattn__cpu_score1(const xattn__cpu_ctx *cx, const xattn__cpu_row *rw, int64_t b, int64_t j);
/* acc += (a positive weight too small for f32) * v: +-inf and NaN entries of v
 * pass (tiny * inf = inf, tiny * NaN = NaN), finite ones add nothing. */
void xattn__cpu_add_negligible(float *acc, const float *v, int64_t n);

/* Asks L2 for n elements of K (or V) rows ja .. ja+nc-1 of (b, hk). Hardware
 * prefetchers follow one stream within a page; with BSHD a head's rows are a
 * few hundred bytes every Hkv*D elements, so without this tile loads wait on
 * memory. Strided rows (sd != 1) are left alone. */
void xattn__cpu_prefetch_rows(const xattn_problem *p, const xattn_view *v, const void *base,
                              int64_t n, int64_t b, int64_t hk, int64_t ja, int64_t nc);

/* Writes O = 0 (and LSE = -inf) for row i of (b, h): padding and fully masked rows. */
void xattn__cpu_write_empty_row(const xattn__cpu_ctx *cx, int64_t b, int64_t h, int64_t i);

/* What converted elements of view v (p->k or p->v) at KV head hk are
 * multiplied by: an fp8 cache's per-head scale, else 1. */
float xattn__cpu_kv_mul(const xattn__cpu_ctx *cx, const xattn_view *v, int64_t hk);

/* Head h's sink logit; -inf (no sink) without sinks. */
float xattn__cpu_sink(const xattn__cpu_ctx *cx, int64_t h);

/* Writes a finished real row i of (b, h) from its running max m (-inf when it
 * saw no key), sum l and accumulator acc (Dv values relative to m, not read
 * when m is -inf): folds the head's sink in (xattn_sem_sink_fold), then
 * O = acc * c / l and the LSE. */
void xattn__cpu_write_row(const xattn__cpu_ctx *cx, int64_t b, int64_t h, int64_t i, float m,
                          float l, const float *acc);

/* ---- the flash tile loop (FLASH and SPLITKV) ------------------------------- */

/* Views of one thread's scratch. */
typedef struct xattn__cpu_scratch {
    float *qt, *kt, *vt, *st, *acc, *m, *l, *alpha, *tmp;
    float *qr; /* [XATTN__CPU_FEW_ROWS][ldk] row-major Q of a few-row tile */
    /* The query tile in progress (xattn__cpu_attend_begin): its rows, KV
     * head, the union [ulo, uhi) of its rows' valid keys, and whether it
     * uses uk->qk_rows. */
    int R, few;
    int few_max; /* the most rows with few = 1 (xattn__cpu_scratch_map*) */
    int64_t hk, ulo, uhi;
    int *clo, *chi;
    xattn__cpu_row *rows;
    xattn_cpu_work *work; /* where the tile loop counts its work (set by the caller) */
    /* What the output rows are multiplied by as they are written (1 from
     * xattn__cpu_attend_begin; the decode driver's V scale, see
     * xattn_cpu_decode.h). */
    float omul;
} xattn__cpu_scratch;

/* Bytes of one thread's scratch (a multiple of 64). */
uint64_t xattn__cpu_scratch_bytes(const xattn_problem *p);
/* Carves the scratch at `base` (64-byte aligned, xattn__cpu_scratch_bytes long). */
void xattn__cpu_scratch_map(xattn__cpu_scratch *sc, void *base, const xattn_problem *p);
/* The same with fewer sections, for tile states that never use them:
 * XATTN__CPU_SC_NO_KV leaves out kt and vt (NULL: the caller gives every tile
 * its K/V), XATTN__CPU_SC_FEW is for tiles of at most XATTN__CPU_FEW_ROWS
 * rows (no qt, which is NULL, and acc for that many rows). */
#define XATTN__CPU_SC_NO_KV 1
#define XATTN__CPU_SC_FEW 2 /* few up to XATTN__CPU_FEW_ROWS, else _TILED */
uint64_t xattn__cpu_scratch_bytes_without(const xattn_problem *p, int without);
void xattn__cpu_scratch_map_without(xattn__cpu_scratch *sc, void *base, const xattn_problem *p,
                                    int without);

/*
 * Query tiles pack the heads of a KV group (GQA/MQA): a tile holds rows
 * (h, i) for nh heads h0 .. h0+nh-1 that share KV head h0 / group, times np
 * positions i0 .. i0+np-1, so each converted K/V tile serves all of them
 * (FlashAttention's "pack GQA"). With nh = min(group, BQ) heads, a tile spans
 * BQ / nh positions: for decode (one position) the K/V traffic drops by the
 * group size, and under causal masks tiles are skipped at a finer grain.
 */
typedef struct xattn__cpu_qtiling {
    int64_t heads;   /* heads per tile (nh) */
    int64_t pos;     /* positions per tile (np) */
    int64_t hblocks; /* head blocks per KV head: ceil(group / heads) */
} xattn__cpu_qtiling;

static inline xattn__cpu_qtiling xattn__cpu_qtiling_of(const xattn_problem *p)
{
    xattn__cpu_qtiling t;
    t.heads = xattn__cpu_min(p->group, XATTN_CPU_BQ);
    t.pos = XATTN_CPU_BQ / t.heads;
    t.hblocks = (p->group + t.heads - 1) / t.heads;
    return t;
}

/*
 * The tile loop for one query tile of (b): rows r = hh*np + ii for heads
 * h0 + hh (hh < nh) and real positions i0 + ii (ii < np), nh*np <= BQ, keys
 * restricted to [kmin, kmax). On return sc->rows[r] names each row, sc->acc
 * holds the unnormalized output rows, sc->m the running max (-inf: no valid
 * key; NaN: a NaN score) and sc->l the sum of exp(s - m); the work done is
 * added to *sc->work. `kv`: the packed K/V (NULL: each tile is loaded and
 * converted here).
 */
/*
 * K and V packed once per call (FLASH prefill: every query tile of a KV head
 * reads the same tiles): for each (sequence b, KV head hk, key tile t) one
 * f32 K tile [BK][ldk] and one V tile [BK][Dvp], zero past the keys and dims,
 * contiguous, plus a flag per tile telling whether its V holds inf or NaN.
 * Tile (b, hk, t) is number (tile0[b] * Hkv + hk * ntiles(b) + t); one zero
 * tile follows the last, so a tile read from an offset row may run past its
 * end (those rows' scores are never used).
 */
typedef struct xattn__cpu_kvpack {
    const float *k, *v;
    const unsigned char *vbad;
    const int64_t *tile0; /* [B + 1]: prefix sums of ceil(len_k[b] / BK) */
} xattn__cpu_kvpack;

/* Packs key tile t of (b, hk): K into kt [BK][ldk], V into vt [BK][Dvp], zero
 * past the sequence's keys; returns 1 when the tile's V holds inf or NaN. */
int xattn__cpu_pack_tile(const xattn__cpu_ctx *cx, int64_t b, int64_t hk, int64_t t, float *kt,
                         float *vt);

void xattn__cpu_attend(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b, int64_t h0,
                       int nh, int64_t i0, int np, int64_t kmin, int64_t kmax,
                       const xattn__cpu_kvpack *kv);

/* The two halves of xattn__cpu_attend, for callers that walk several query
 * tiles over the same KV tiles (SPLITKV decode: every KV head of a sequence
 * over one contiguous stream of keys). begin: rows, masks, the Q tile, and
 * sc->ulo/uhi (equal when nothing is valid). tile: the keys [t0, min(t1,
 * t0+BK)) clipped to [ulo, uhi); kt/vt point at its first key (row pitches kpitch,
 * vpitch, K zero past D, rows readable up to a multiple of 16 keys, vbad: V
 * holds inf/NaN), or are NULL to load and convert it here. (K and V read
 * where they lie are the decode driver's, xattn_cpu_decode.h.) Returns 1 when
 * the tile was computed (sc->R rows), 0 when skipped. Counts its work into
 * *sc->work: the K/V rows only where it loads them (tiles given by the caller
 * are counted there). */
void xattn__cpu_attend_begin(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                             int64_t h0, int nh, int64_t i0, int np, int64_t kmin, int64_t kmax);

/* rows[c] = the element offset of key j + c of sequence b in K or V (view
 * v; head 0: add hk * v->sh), c < n, by runs (xattn__cpu_krun). */
void xattn__cpu_token_rows(const xattn_problem *p, const xattn_view *v, int64_t b, int64_t j,
                           int64_t n, int64_t *rows);

int xattn__cpu_attend_tile(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b, int64_t t0,
                           int64_t t1, const float *kt, int64_t kpitch, const float *vt,
                           int64_t vpitch, int vbad);

/* The steps of a tile that every K/V source shares (attend_tile, and the
 * decode driver's tile on K/V in place). ranges: each row's keys of [ja, jb)
 * as local numbers in sc->clo/chi; returns 0 when no row has one, *full = 1
 * when every row has them all. softmax: on the tile's raw scores st (nc
 * keys from ja), the rest of the scale, the softcap, ALiBi/bias/masks, the
 * online-softmax update and the rescale of acc. pv_careful: O += P V over
 * each row's own keys only, on converted V rows (vt, pitch vpitch) that may
 * hold inf or NaN; counts its pairs. */
int xattn__cpu_tile_ranges(xattn__cpu_scratch *sc, int64_t ja, int64_t jb, int *full);
void xattn__cpu_tile_softmax(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t ja, int nc,
                             int full);
void xattn__cpu_tile_pv_careful(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int64_t b,
                                int64_t ja, const float *vt, int64_t vpitch);

/* The (row, key) pairs a P.V over rows r < nr with keys [clo[r], chi[r])
 * computes when it walks blocks of `block` rows over their span of keys (rows
 * with no keys left out of the span; a block without keys skipped); the last
 * nr % block rows go one by one over their own keys (tail_alone) or as one
 * more block. */
uint64_t xattn__cpu_pv_pairs(const int *clo, const int *chi, int nr, int block, int tail_alone);

/* Fills bytes with NaN (workspace poisoning for tests). */
void xattn__cpu_poison(void *ptr, uint64_t bytes, int num_threads);

#endif /* XATTN_CPU_COMMON_H */
