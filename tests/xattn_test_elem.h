/* Element access for tests that build their inputs by hand: one f32, f16 or
 * bf16 element at an element index of a byte buffer, through the library's
 * own conversion helpers. Shared by test_reliability.c and test_concurrency.c. */
#ifndef XATTN_TEST_ELEM_H
#define XATTN_TEST_ELEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "xattn.h"

static inline size_t esz(xattn_dtype t)
{
    return t == XATTN_DTYPE_F32 ? 4 : 2;
}

static inline void put_elem(unsigned char *base, xattn_dtype t, size_t idx, float v)
{
    if (t == XATTN_DTYPE_F32) {
        memcpy(base + 4 * idx, &v, 4);
    } else {
        uint16_t h = t == XATTN_DTYPE_F16 ? xattn_f32_to_f16(v) : xattn_f32_to_bf16(v);
        memcpy(base + 2 * idx, &h, 2);
    }
}

static inline double get_elem(const unsigned char *base, xattn_dtype t, size_t idx)
{
    if (t == XATTN_DTYPE_F32) {
        float f;
        memcpy(&f, base + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, base + 2 * idx, 2);
    return t == XATTN_DTYPE_F16 ? xattn_f16_to_f32(h) : xattn_bf16_to_f32(h);
}

#endif /* XATTN_TEST_ELEM_H */
