/* Host staging of tensor boxes (xattn_host_io.h). */
#include "xattn_host_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float hio_to_f32(const void *p, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == XATTN_DTYPE_F16 ? xattn_f16_to_f32(h) : xattn_bf16_to_f32(h);
}

static void hio_from_f32(float f, void *p, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_F32) {
        memcpy(p, &f, 4);
        return;
    }
    uint16_t h = dt == XATTN_DTYPE_F16 ? xattn_f32_to_f16(f) : xattn_f32_to_bf16(f);
    memcpy(p, &h, 2);
}

xattn_status xattn_host_box_io(const xattn_tensor *t, const int64_t start[4],
                               const int64_t count[4], void *host, int f32, int write,
                               const char *name, char *err, size_t errlen)
{
    size_t es = xattn_dtype_size(t->dtype);
    for (int i = 0; i < 4; i++)
        if (count[i] <= 0)
            return XATTN_STATUS_OK;
    if (!t->buffer || es == 0) {
        snprintf(err, errlen, "%s: no buffer or invalid dtype", name);
        return XATTN_STATUS_INVALID_ARGUMENT;
    }
    uint64_t first = 0, span = 1;
    for (int i = 0; i < 4; i++) {
        if (start[i] < 0 || t->strides[i] < 0) {
            snprintf(err, errlen, "%s: negative start or stride", name);
            return XATTN_STATUS_INVALID_ARGUMENT;
        }
        first += (uint64_t)start[i] * (uint64_t)t->strides[i];
        span += (uint64_t)(count[i] - 1) * (uint64_t)t->strides[i];
    }
    uint64_t lo = t->offset + first * es, bytes = span * es;
    if (lo + bytes > xattn_buffer_size(t->buffer) || lo + bytes < lo) {
        snprintf(err, errlen, "%s: the box reaches byte %llu of a %zu-byte buffer", name,
                 (unsigned long long)(lo + bytes), xattn_buffer_size(t->buffer));
        return XATTN_STATUS_OUT_OF_BOUNDS;
    }
    unsigned char *tmp = malloc((size_t)bytes), *h = host;
    if (!tmp) {
        snprintf(err, errlen, "%s: %llu bytes of host staging", name, (unsigned long long)bytes);
        return XATTN_STATUS_OUT_OF_MEMORY;
    }
    /* writes too: the range may hold bytes that are not the box's */
    xattn_status st = xattn_buffer_read(t->buffer, (size_t)lo, tmp, (size_t)bytes);
    if (st != XATTN_STATUS_OK) {
        snprintf(err, errlen, "%s: %s", name, xattn_last_error());
        free(tmp);
        return st;
    }
    size_t hes = f32 ? 4 : es, n = 0;
    int row_copy = !f32 && (t->strides[3] == 1 || count[3] == 1);
    for (int64_t a = 0; a < count[0]; a++)
        for (int64_t b = 0; b < count[1]; b++)
            for (int64_t c = 0; c < count[2]; c++) {
                size_t base = (size_t)((a * t->strides[0] + b * t->strides[1] + c * t->strides[2]) *
                                       (int64_t)es);
                if (row_copy) { /* a contiguous innermost row moves in one copy */
                    size_t row = (size_t)count[3] * es;
                    if (write)
                        memcpy(tmp + base, h + n * hes, row);
                    else
                        memcpy(h + n * hes, tmp + base, row);
                    n += (size_t)count[3];
                    continue;
                }
                for (int64_t e = 0; e < count[3]; e++, n++) {
                    unsigned char *p = tmp + base + (size_t)(e * t->strides[3]) * es;
                    if (write) {
                        if (f32)
                            hio_from_f32(((const float *)host)[n], p, t->dtype);
                        else
                            memcpy(p, h + n * hes, es);
                    } else {
                        if (f32)
                            ((float *)host)[n] = hio_to_f32(p, t->dtype);
                        else
                            memcpy(h + n * hes, p, es);
                    }
                }
            }
    if (write) {
        st = xattn_buffer_write(t->buffer, (size_t)lo, tmp, (size_t)bytes);
        if (st != XATTN_STATUS_OK)
            snprintf(err, errlen, "%s: %s", name, xattn_last_error());
    }
    free(tmp);
    return st;
}
