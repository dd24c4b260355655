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
    default: return 0;
    }
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
