/*
 * The AVX2 + FMA + F16C micro-kernels: the vector layer below, then the
 * shared template. Compiled with a target attribute (not -mavx2), so the rest
 * of the library stays portable; chosen at run time from cpuid.
 */
#include "xattn_cpu_decode.h"

#if XATTN__CPU_X86

#include <immintrin.h>

#define XV __m256
#define XV_LEN 8
#define XV_TARGET __attribute__((target("avx2,fma,f16c")))
#define XV_FN(name) xattn__cpu_avx2_##name
#define XV_SIMD XATTN_CPU_SIMD_AVX2
#define XV_TABLE xattn__cpu_uk_avx2
/*
 * 16 ymm registers. An FMA has a latency of 4 cycles and two issue each
 * cycle, so 8 independent sums are the least that keeps both FMA units busy,
 * with nothing to spare for a load that comes late. The register blocks are
 * BLIS's Haswell shape (6 x 16 for sgemm): 12 accumulators, two vectors
 * loaded and each broadcast used by two FMAs, 15 registers in all.
 * QK^T: 2 vectors of query rows x 6 keys, and blocks of 4 keys (8
 * accumulators) for the keys left over.
 */
#define QK_CB 6
#define QK_CB_TAIL 4
/* P.V: 6 rows x 2 vectors of Dv; the last nr % 6 rows of a tile as one more
 * block (4, 2, 1 rows) over their span of keys. */
#define PV_RB 6
#define PV_DB 2
#define PV_TAIL_BLOCK 1
/* softmax_tile: the row maxima in two chains. */
#define SM_MAX_CHAINS 2
/* Few-row QK^T (decode): 4 rows x 2 keys = 8 accumulators (one per lane of
 * the reduced vector) + 2 K vectors + 1 Q vector; the in-place kernels take D
 * two vectors at a time, with twice the K and Q vectors. */
#define QR_RB 4
#define QR_CB 2

static inline XV_TARGET XV xv_zero(void)
{
    return _mm256_setzero_ps();
}
static inline XV_TARGET XV xv_set1(float x)
{
    return _mm256_set1_ps(x);
}
static inline XV_TARGET XV xv_load(const float *p)
{
    return _mm256_loadu_ps(p);
}
static inline XV_TARGET void xv_store(float *p, XV v)
{
    _mm256_storeu_ps(p, v);
}
static inline XV_TARGET void xv_stream(float *p, XV v)
{
    _mm256_stream_ps(p, v);
} /* p 32-aligned */
static inline XV_TARGET XV xv_add(XV a, XV b)
{
    return _mm256_add_ps(a, b);
}
static inline XV_TARGET XV xv_sub(XV a, XV b)
{
    return _mm256_sub_ps(a, b);
}
static inline XV_TARGET XV xv_mul(XV a, XV b)
{
    return _mm256_mul_ps(a, b);
}
/* a * b + c */
static inline XV_TARGET XV xv_fma(XV a, XV b, XV c)
{
    return _mm256_fmadd_ps(a, b, c);
}

/* The running max with NaN sticky: (s > m || s != s) ? s : m. MAXPS alone
 * would drop a NaN in one of its operands. */
static inline XV_TARGET XV xv_max_nan(XV m, XV s)
{
    const XV take =
        _mm256_or_ps(_mm256_cmp_ps(s, m, _CMP_GT_OQ), _mm256_cmp_ps(s, s, _CMP_UNORD_Q));
    return _mm256_blendv_ps(m, s, take);
}

/* -inf lanes become 0 (the max of a fully masked row, see softmax_tile). */
static inline XV_TARGET XV xv_neginf_to_zero(XV x)
{
    const XV ninf = _mm256_castsi256_ps(_mm256_set1_epi32((int)0xff800000u));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, ninf, _CMP_EQ_OQ), x);
}

/* Four-float groups (see the AVX-512 file): 2 groups of 4 lanes. */
static inline XV_TARGET XV xv_load4s(const float *p, int64_t stride)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(p + stride),
                                1);
}
static inline XV_TARGET void xv_store4s(float *p, int64_t stride, XV v)
{
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    _mm_storeu_ps(p + stride, _mm256_extractf128_ps(v, 1));
}
static inline XV_TARGET XV xv_bcast4(const float *p)
{
    return _mm256_broadcast_ps((const __m128 *)p);
}
static inline XV_TARGET void xv_store4(float *p, XV v)
{
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
}
static inline XV_TARGET XV xv_fold4_add(XV v)
{
    return _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
}
static inline XV_TARGET XV xv_fold4_max_nan(XV v)
{
    return xv_max_nan(v, _mm256_permute2f128_ps(v, v, 1));
}

static inline XV_TARGET float xv_hsum(XV v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* lane k of the result = the sum of the lanes of a[k], k < 8 (a transposing
 * reduction tree: 7 adds and 10 shuffles for 8 sums). */
static inline XV_TARGET XV xv_reduce_lanes(const XV *a)
{
    XV b[4], c[2];
    for (int i = 0; i < 4; i++) /* per 128-bit lane: x0+x2, y0+y2, x1+x3, y1+y3 */
        b[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 2; i++) { /* per 128-bit lane: the lane's sums of a[4i..4i+3] */
        const __m256d x = _mm256_castps_pd(b[2 * i]), y = _mm256_castps_pd(b[2 * i + 1]);
        c[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20),
                         _mm256_permute2f128_ps(c[0], c[1], 0x31));
}

/* exp(x) = 2^fx * exp(r) for fx = round(x * log2(e)): r = x - fx * ln 2 in two
 * steps (Cody-Waite), then exp(r) by the polynomial. Shared by xv_exp and
 * xv_exp_le0, which differ only in how they get fx and build 2^fx. */
static inline XV_TARGET XV xv_exp_poly(XV fx, XV xc)
{
    XV r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    XV y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return y;
}

/*
 * exp(x), Cephes-style: x = n*ln2 + r with |r| <= ln2/2 (ln2 split in two so
 * that r is exact), exp(r) by a degree-6 polynomial, 2^n built in the exponent
 * bits. Max relative error 1.2e-7 (about 1 ulp), measured against double exp
 * over [-87.3, 88.3].
 * x < -87.33 (incl. -inf) gives exactly 0 (results would be denormal, < 1.2e-38,
 * which is nothing next to a softmax sum >= 1); NaN gives NaN; x > 88.37 is
 * clamped (the kernels only pass x <= 0).
 */
static inline XV_TARGET XV xv_exp(XV x)
{
    const XV hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447505531f);
    /* MINPS/MAXPS return the second operand when one is NaN: x second keeps NaN. */
    XV xc = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
    const XV fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const XV y = xv_exp_poly(fx, xc);
    const __m256i n = _mm256_cvtps_epi32(fx);
    const XV pow2n =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
    const XV res = _mm256_mul_ps(y, pow2n);
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), res);
}

/*
 * exp(x) for x <= 0 or NaN (the softmax's s - max): xv_exp's polynomial and
 * accuracy in 16 instructions where xv_exp takes 19. No upper clamp; n =
 * round(x * log2(e)) comes from adding 1.5 * 2^23, whose low mantissa bits
 * then hold n, both as a float (less the constant) and as the bits that 2^n
 * is built from; below -88 (incl. -inf) n is -127, whose 2^n has the bits of
 * 0, so the result is exactly 0 without a compare and a mask (from -87.68 to
 * -87.34 it is 2^-126 times the polynomial, a subnormal f32). NaN gives NaN.
 */
static inline XV_TARGET XV xv_exp_le0(XV x)
{
    const XV magic = _mm256_set1_ps(12582912.0f);           /* 1.5 * 2^23 */
    const XV xc = _mm256_max_ps(_mm256_set1_ps(-88.0f), x); /* NaN kept: x second */
    const XV t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    const XV fx = _mm256_sub_ps(t, magic);
    const XV y = xv_exp_poly(fx, xc);
    /* bits(t) = bits(1.5 * 2^23) + n; shifted by 23 the constant's bits fall out. */
    const __m256i e = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127));
    return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
}

static inline XV_TARGET XV xv_div(XV a, XV b)
{
    return _mm256_div_ps(a, b);
}
static inline XV_TARGET XV xv_abs(XV x)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
}
/* |mag| with the sign of s. */
static inline XV_TARGET XV xv_copysign(XV mag, XV s)
{
    const XV sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, s));
}
/* (a < b) ? x : y, lane by lane (false for NaN). */
static inline XV_TARGET XV xv_select_lt(XV a, XV b, XV x, XV y)
{
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}

static inline XV_TARGET XV xv_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline XV_TARGET XV xv_load_bf16(const uint16_t *p)
{
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* 2 x XV_LEN bf16 as the even-index then the odd-index elements; see the
 * AVX-512 file. */
static inline XV_TARGET void xv_load2_bf16_eo(const uint16_t *p, XV *even, XV *odd)
{
    const __m256i w = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}
static inline XV_TARGET void xv_unzip(XV a, XV b, XV *even, XV *odd)
{
    /* per 128-bit lane (a0 a2 b0 b2 | a4 a6 b4 b6), then the 64-bit pairs in order */
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline XV_TARGET void xv_zip(XV even, XV odd, XV *a, XV *b)
{
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    *a = _mm256_permute2f128_ps(lo, hi, 0x20);
    *b = _mm256_permute2f128_ps(lo, hi, 0x31);
}

/* fp8 to f32 in registers, as in the AVX-512 file (e4m3: the value times
 * 2^-8, NaN codes finite, see there). */
static inline XV_TARGET XV xv_load_e5m2(const uint8_t *p)
{
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_cvtph_ps(_mm_slli_epi16(w, 8));
}
static inline XV_TARGET XV xv_load_e4m3(const uint8_t *p)
{
    const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16((short)0xbfff)));
}
/* XV_LEN int8 at p widened to f32 (a q8_0 block's qs; the decode kernels
 * multiply by the block's d). */
static inline XV_TARGET XV xv_load_q8(const int8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
/* Bytes: m = max(m, p[t] | 0x80) over t < n (n a multiple of 16): a lane of
 * m is 0xff iff one of its bytes is an e4m3 NaN code. */
#define XB __m256i
static inline XV_TARGET XB xb_zero(void)
{
    return _mm256_setzero_si256();
}
static inline XV_TARGET XB xb_or80_max(XB m, const uint8_t *p, int n)
{
    const XB hi = _mm256_set1_epi8((char)0x80);
    int t = 0;
    for (; t + 32 <= n; t += 32)
        m = _mm256_max_epu8(m, _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(p + t)), hi));
    if (t < n) /* 16 bytes; the upper lanes 0x80 */
        m = _mm256_max_epu8(
            m,
            _mm256_or_si256(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(p + t))), hi));
    return m;
}
static inline XV_TARGET int xb_any_ff(XB m)
{
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(m, _mm256_set1_epi8(-1))) != 0;
}

static inline XV_TARGET void xv_store_f16(uint16_t *p, XV v)
{
    _mm_storeu_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* Round to nearest even on the bits; NaN is kept quiet (| 0x40 in the top half). */
static inline XV_TARGET void xv_store_bf16(uint16_t *p, XV v)
{
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, qnan, isnan);
    /* 8 x 32-bit (each < 65536) -> 8 x 16-bit: pack per 128-bit lane, then reorder. */
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

#include "xattn_cpu_uk_template.h"
#define XV_DEC_TABLE xattn__cpu_dec_avx2
#include "xattn_cpu_dec_template.h"

#else
typedef int xattn__cpu_uk_avx2_unused; /* not x86-64 GCC/Clang: portable path only */
#endif
