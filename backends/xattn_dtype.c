/* Host-side dtype helpers. The kernels and the reference have their own
 * conversions on purpose: the reference shares no code with the kernels. */
#include <math.h>
#include <string.h>

#include "xattn_internal.h"

const char *xattn_dtype_name(xattn_dtype dtype)
{
    switch (dtype) {
    case XATTN_DTYPE_F32: return "f32";
    case XATTN_DTYPE_F16: return "f16";
    case XATTN_DTYPE_BF16: return "bf16";
    case XATTN_DTYPE_FP8_E4M3: return "fp8e4m3";
    case XATTN_DTYPE_FP8_E5M2: return "fp8e5m2";
    case XATTN_DTYPE_Q8_0: return "q8_0";
    default: return "?";
    }
}

size_t xattn_dtype_size(xattn_dtype dtype)
{
    switch (dtype) {
    case XATTN_DTYPE_F32: return 4;
    case XATTN_DTYPE_F16:
    case XATTN_DTYPE_BF16: return 2;
    case XATTN_DTYPE_FP8_E4M3:
    case XATTN_DTYPE_FP8_E5M2: return 1;
    default: return 0; /* invalid, and q8_0 (no whole bytes per value) */
    }
}

uint64_t xattn_dtype_bytes(xattn_dtype dtype, uint64_t n)
{
    if (dtype == XATTN_DTYPE_Q8_0) {
        const uint64_t blocks = n / XATTN_Q8_0_BLOCK + (n % XATTN_Q8_0_BLOCK != 0);
        return blocks > UINT64_MAX / XATTN_Q8_0_BLOCK_BYTES ? UINT64_MAX
                                                            : blocks * XATTN_Q8_0_BLOCK_BYTES;
    }
    const uint64_t es = xattn_dtype_size(dtype);
    return es && n > UINT64_MAX / es ? UINT64_MAX : n * es;
}

static uint32_t xattn__f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float xattn__bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t xattn_f32_to_bf16(float x)
{
    uint32_t u = xattn__f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);            /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float xattn_bf16_to_f32(uint16_t h)
{
    return xattn__bits_f32((uint32_t)h << 16);
}

uint16_t xattn_f32_to_f16(float x)
{
    uint32_t u = xattn__f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (a < 0x33000000u)
            return (uint16_t)sign; /* < half of the smallest subnormal */
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14 .. 24 */
        uint32_t v = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1u)))
            v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((a - 0x38000000u) >> 13); /* rebias exponent 127 -> 15 */
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (v & 1u)))
        v++;
    return (uint16_t)(sign | v);
}

float xattn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        return xattn__bits_f32(sign | 0x7f800000u | (m << 13));
    return xattn__bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

float xattn_fp8_to_f32(uint8_t b, xattn_dtype dtype)
{
    if (!xattn__dtype_is_fp8(dtype))
        return NAN;
    return xattn_sem_fp8_value(b, dtype == XATTN_DTYPE_FP8_E5M2);
}

uint8_t xattn_f32_to_fp8(float x, xattn_dtype dtype)
{
    if (!xattn__dtype_is_fp8(dtype))
        return 0;
    const int e5m2 = dtype == XATTN_DTYPE_FP8_E5M2;
    const int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    const float maxv = e5m2 ? 57344.0f : 448.0f;
    const uint8_t sign = signbit(x) ? 0x80u : 0u, nan = e5m2 ? 0x7eu : 0x7fu;
    const uint8_t over = e5m2 ? 0x7cu : nan; /* inf, or E4M3's NaN */
    if (isnan(x))
        return (uint8_t)(sign | nan);
    const float a = fabsf(x);
    int e;
    (void)frexpf(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < 1 - bias)
        e = 1 - bias;
    /* a / 2^(e - mb) is exact in f32 (a power-of-two scaling), so rintf
     * rounds once, to nearest even (the default rounding mode). */
    const float r = ldexpf(rintf(ldexpf(a, mb - e)), e - mb);
    if (!(r <= maxv))
        return (uint8_t)(sign | over);
    if (r < ldexpf(1.0f, 1 - bias)) /* subnormal or zero */
        return (uint8_t)(sign | (uint8_t)ldexpf(r, bias - 1 + mb));
    (void)frexpf(r, &e);
    e -= 1;
    const int m = (int)ldexpf(r, mb - e) - (1 << mb);
    return (uint8_t)(sign | ((e + bias) << mb) | m);
}

/* The rules shared by the two q8_0 helpers: n a whole number of blocks. */
static xattn_status xattn__q8_0_args(const void *a, const void *b, int64_t n, const char *fn)
{
    if (n < 0 || n % XATTN_Q8_0_BLOCK)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s: n: %lld is not a non-negative multiple of %d (q8_0 goes by "
                            "blocks of %d values)",
                            fn, (long long)n, XATTN_Q8_0_BLOCK, XATTN_Q8_0_BLOCK);
    if (n > 0 && (!a || !b))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: %s: NULL with n = %lld", fn,
                            !a ? "the source" : "the destination", (long long)n);
    return XATTN_STATUS_OK;
}

xattn_status xattn_quantize_q8_0(const float *x, void *blocks, int64_t n)
{
    XATTN_RETURN_IF_ERROR(xattn__q8_0_args(x, blocks, n, "xattn_quantize_q8_0"));
    int64_t bad = -1; /* the first inf or NaN */
    for (int64_t i = 0; i < n / XATTN_Q8_0_BLOCK; i++) {
        const float *v = x + i * XATTN_Q8_0_BLOCK;
        unsigned char *blk = (unsigned char *)blocks + i * XATTN_Q8_0_BLOCK_BYTES;
        /* As ggml's quantize_row_q8_0_ref: the scale from the f32 amax, the
         * quants from the f32 scale's reciprocal (not from the f16 scale). */
        float amax = 0.0f;
        int finite = 1;
        for (int j = 0; j < XATTN_Q8_0_BLOCK; j++) {
            finite &= isfinite(v[j]) != 0;
            amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
        }
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = xattn_f32_to_f16(d);
        if (!finite) {
            if (bad < 0)
                for (int j = 0; j < XATTN_Q8_0_BLOCK && bad < 0; j++)
                    if (!isfinite(v[j]))
                        bad = i * XATTN_Q8_0_BLOCK + j;
            h = 0x7e00u; /* NaN: the block reads back as NaN */
        }
        blk[0] = (unsigned char)(h & 0xffu); /* little-endian, whatever the host */
        blk[1] = (unsigned char)(h >> 8);
        for (int j = 0; j < XATTN_Q8_0_BLOCK; j++)
            blk[2 + j] = finite ? (unsigned char)(int8_t)roundf(v[j] * id) : 0u;
    }
    if (bad >= 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "xattn_quantize_q8_0: x[%lld]: %g has no q8_0 value (its block of "
                            "%d was written as NaN)",
                            (long long)bad, (double)x[bad], XATTN_Q8_0_BLOCK);
    return XATTN_STATUS_OK;
}

xattn_status xattn_dequantize_q8_0(const void *blocks, float *x, int64_t n)
{
    XATTN_RETURN_IF_ERROR(xattn__q8_0_args(blocks, x, n, "xattn_dequantize_q8_0"));
    for (int64_t i = 0; i < n / XATTN_Q8_0_BLOCK; i++) {
        const unsigned char *blk = (const unsigned char *)blocks + i * XATTN_Q8_0_BLOCK_BYTES;
        const float d = xattn_f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
        for (int j = 0; j < XATTN_Q8_0_BLOCK; j++)
            x[i * XATTN_Q8_0_BLOCK + j] = d * (float)(int8_t)blk[2 + j];
    }
    return XATTN_STATUS_OK;
}
