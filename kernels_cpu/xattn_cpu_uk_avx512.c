/*
 * The AVX-512 micro-kernels (F, DQ, BW, VL): the vector layer below, then the
 * shared template. Compiled with a target attribute, chosen at run time.
 */
#include "xattn_cpu_decode.h"

#if XATTN__CPU_X86

#include <immintrin.h>

#define XV __m512
#define XV_LEN 16
#define XV_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c")))
#define XV_FN(name) xattn__cpu_avx512_##name
#define XV_SIMD XATTN_CPU_SIMD_AVX512
#define XV_TABLE xattn__cpu_uk_avx512
/* 32 zmm registers: 2x8 accumulators + 2 query vectors + 1 broadcast. With
 * BQ = 32 one block covers the whole query tile. */
#define QK_CB 8
#define QK_CB_TAIL QK_CB
/* 4 rows x 4 vectors = 16 accumulators + 4 V vectors + 1 broadcast; the last
 * nr % 4 rows one by one. */
#define PV_RB 4
#define PV_DB 4
#define PV_TAIL_BLOCK 0
#define SM_MAX_CHAINS 1
/* Few-row QK^T (decode): 4 rows x 4 keys = 16 accumulators (one per lane of
 * the reduced vector) + 4 K vectors + 1 Q vector; the in-place kernels take D
 * two vectors at a time, with twice the K and Q vectors. */
#define QR_RB 4
#define QR_CB 4

static inline XV_TARGET XV xv_zero(void)
{
    return _mm512_setzero_ps();
}
static inline XV_TARGET XV xv_set1(float x)
{
    return _mm512_set1_ps(x);
}
static inline XV_TARGET XV xv_load(const float *p)
{
    return _mm512_loadu_ps(p);
}
static inline XV_TARGET void xv_store(float *p, XV v)
{
    _mm512_storeu_ps(p, v);
}
static inline XV_TARGET void xv_stream(float *p, XV v)
{
    _mm512_stream_ps(p, v);
} /* p 64-aligned */
static inline XV_TARGET XV xv_add(XV a, XV b)
{
    return _mm512_add_ps(a, b);
}
static inline XV_TARGET XV xv_sub(XV a, XV b)
{
    return _mm512_sub_ps(a, b);
}
static inline XV_TARGET XV xv_mul(XV a, XV b)
{
    return _mm512_mul_ps(a, b);
}
static inline XV_TARGET XV xv_fma(XV a, XV b, XV c)
{
    return _mm512_fmadd_ps(a, b, c);
}

/* (s > m || s != s) ? s : m — NaN sticky, see the AVX2 file. */
static inline XV_TARGET XV xv_max_nan(XV m, XV s)
{
    const __mmask16 take =
        _mm512_cmp_ps_mask(s, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take, m, s);
}

static inline XV_TARGET XV xv_neginf_to_zero(XV x)
{
    const __mmask16 ninf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    return _mm512_mask_blend_ps(ninf, x, _mm512_setzero_ps());
}

/* Four-float groups (a few-row tile: 4 query rows of a key per group): group g
 * of the vector is p[g*stride .. +3]; fold4 combines the groups so that every
 * group holds the result over all of them. */
static inline XV_TARGET XV xv_load4s(const float *p, int64_t stride)
{
    XV v = _mm512_castps128_ps512(_mm_loadu_ps(p));
    v = _mm512_insertf32x4(v, _mm_loadu_ps(p + stride), 1);
    v = _mm512_insertf32x4(v, _mm_loadu_ps(p + 2 * stride), 2);
    return _mm512_insertf32x4(v, _mm_loadu_ps(p + 3 * stride), 3);
}
static inline XV_TARGET void xv_store4s(float *p, int64_t stride, XV v)
{
    _mm_storeu_ps(p, _mm512_castps512_ps128(v));
    _mm_storeu_ps(p + stride, _mm512_extractf32x4_ps(v, 1));
    _mm_storeu_ps(p + 2 * stride, _mm512_extractf32x4_ps(v, 2));
    _mm_storeu_ps(p + 3 * stride, _mm512_extractf32x4_ps(v, 3));
}
static inline XV_TARGET XV xv_bcast4(const float *p)
{
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
}
static inline XV_TARGET void xv_store4(float *p, XV v)
{
    _mm_storeu_ps(p, _mm512_castps512_ps128(v));
}
static inline XV_TARGET XV xv_fold4_add(XV v)
{
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
}
static inline XV_TARGET XV xv_fold4_max_nan(XV v)
{
    v = xv_max_nan(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    return xv_max_nan(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
}

static inline XV_TARGET float xv_hsum(XV v)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* lane k of the result = the sum of the lanes of a[k], k < 16: a transposing
 * reduction tree (unpack within 128-bit lanes, then across them), 45
 * instructions for 16 sums instead of 16 separate horizontal sums. */
static inline XV_TARGET XV xv_reduce_lanes(const XV *a)
{
    XV b[8], c[4];
    for (int i = 0; i < 8; i++) /* per 128-bit lane: x0+x2, y0+y2, x1+x3, y1+y3 */
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) { /* per 128-bit lane: the lane's sums of a[4i..4i+3] */
        const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
        c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    /* Fold the four 128-bit lanes: c[i] lane L holds a partial of a[4i..4i+3]. */
    const XV d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const XV d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* exp(x): the same algorithm and accuracy as the AVX2 xv_exp (max rel. error 1.2e-7);
 * 2^n applied with SCALEF. */
static inline XV_TARGET XV xv_exp(XV x)
{
    const XV hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.3365447505531f);
    XV xc = _mm512_max_ps(lo, _mm512_min_ps(hi, x)); /* NaN kept: x is the second operand */
    const XV fx = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    XV r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
    XV y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const XV res = _mm512_scalef_ps(y, fx);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    return _mm512_mask_blend_ps(under, res, _mm512_setzero_ps());
}

/* exp(x) for x <= 0 or NaN: xv_exp itself here. */
static inline XV_TARGET XV xv_exp_le0(XV x)
{
    return xv_exp(x);
}

static inline XV_TARGET XV xv_div(XV a, XV b)
{
    return _mm512_div_ps(a, b);
}
static inline XV_TARGET XV xv_abs(XV x)
{
    return _mm512_abs_ps(x);
}
static inline XV_TARGET XV xv_copysign(XV mag, XV s)
{
    const XV sign = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign, mag), _mm512_and_ps(sign, s));
}
static inline XV_TARGET XV xv_select_lt(XV a, XV b, XV x, XV y)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}

static inline XV_TARGET XV xv_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline XV_TARGET XV xv_load_bf16(const uint16_t *p)
{
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* 2 x XV_LEN bf16 at p as two vectors, the elements of even index then those
 * of odd index: a shift and a mask, where xv_load_bf16 widens with a shuffle
 * (half the conversion work of the decode loop; the order is undone by
 * xv_zip, and xv_unzip puts Q in the same order). */
static inline XV_TARGET void xv_load2_bf16_eo(const uint16_t *p, XV *even, XV *odd)
{
    const __m512i w = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}
/* x = (a, b) in order -> its even and odd elements. */
static inline XV_TARGET void xv_unzip(XV a, XV b, XV *even, XV *odd)
{
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    *even = _mm512_permutex2var_ps(a, ie, b);
    *odd = _mm512_permutex2var_ps(a, _mm512_add_epi32(ie, _mm512_set1_epi32(1)), b);
}
/* The inverse of xv_unzip. */
static inline XV_TARGET void xv_zip(XV even, XV odd, XV *a, XV *b)
{
    const __m512i ia = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    *a = _mm512_permutex2var_ps(even, ia, odd);
    *b = _mm512_permutex2var_ps(even, _mm512_add_epi32(ia, _mm512_set1_epi32(8)), odd);
}

/* fp8 to f32 in registers (the decode kernels' loads). e5m2 is the top byte
 * of an f16, so a shift makes the f16 and F16C converts it, exactly (zeros,
 * subnormals, inf, NaN). e4m3's bits (s eeee mmm, bias 7) go into an f16 as
 * s 0 eeee mmm 0000000: the sign-extended byte shifted by 7 has the sign in
 * bits 15 and 14, and the mask clears bit 14. That f16 is the value times
 * 2^-8 (bias 15 against 7), subnormals included, so the decode driver
 * multiplies the scale by 2^8 instead (xattn__cpu_dec_unit); the NaN codes
 * (0x7f, 0xff) come out finite and are found by xb_or80_max instead. */
static inline XV_TARGET XV xv_load_e5m2(const uint8_t *p)
{
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
    return _mm512_cvtph_ps(_mm256_slli_epi16(w, 8));
}
static inline XV_TARGET XV xv_load_e4m3(const uint8_t *p)
{
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
    return _mm512_cvtph_ps(
        _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16((short)0xbfff)));
}
/* XV_LEN int8 at p widened to f32 (a q8_0 block's qs; the decode kernels
 * multiply by the block's d). */
static inline XV_TARGET XV xv_load_q8(const int8_t *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
/* Bytes: m = max(m, p[t] | 0x80) over t < n (n a multiple of 16), so that
 * a lane of m is 0xff iff one of its bytes is an e4m3 NaN code. */
#define XB __m512i
static inline XV_TARGET XB xb_zero(void)
{
    return _mm512_setzero_si512();
}
static inline XV_TARGET XB xb_or80_max(XB m, const uint8_t *p, int n)
{
    const XB hi = _mm512_set1_epi8((char)0x80);
    int t = 0;
    for (; t + 64 <= n; t += 64)
        m = _mm512_max_epu8(m, _mm512_or_si512(_mm512_loadu_si512(p + t), hi));
    if (t < n) /* 16, 32 or 48 bytes; the rest of the lanes 0x80 */
        m = _mm512_max_epu8(
            m, _mm512_or_si512(_mm512_maskz_loadu_epi8(~0ull >> (64 - (n - t)), p + t), hi));
    return m;
}
static inline XV_TARGET int xb_any_ff(XB m)
{
    return _mm512_cmpeq_epi8_mask(m, _mm512_set1_epi8(-1)) != 0;
}

static inline XV_TARGET void xv_store_f16(uint16_t *p, XV v)
{
    _mm256_storeu_si256((__m256i *)p,
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline XV_TARGET void xv_store_bf16(uint16_t *p, XV v)
{
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, qnan);
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

#include "xattn_cpu_uk_template.h"
#define XV_DEC_TABLE xattn__cpu_dec_avx512
#include "xattn_cpu_dec_template.h"

#else
typedef int xattn__cpu_uk_avx512_unused; /* not x86-64 GCC/Clang: portable path only */
#endif
