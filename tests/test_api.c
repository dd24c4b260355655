/*
 * test_api: the public API surface apart from the attention numerics:
 * version, status and name tables, parsing, device enumeration, contexts,
 * buffers (alloc/write/read, zero-copy host wrapping), memory accounting and
 * limits, options, the log callback, and the f16/bf16 conversion helpers.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_reference.h"
#include "xattn_test.h"

/* ---- version, statuses, names ---------------------------------------------- */

static void test_version(void)
{
    EXPECT(xattn_version_number() == XATTN_VERSION_NUMBER, "%u", xattn_version_number());
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", XATTN_VERSION_MAJOR, XATTN_VERSION_MINOR,
             XATTN_VERSION_PATCH);
    EXPECT(!strcmp(xattn_version_string(), want), "'%s' vs '%s'", xattn_version_string(), want);
}

static void test_status_strings(void)
{
    static const struct {
        xattn_status st;
        int code;
        const char *name;
    } all[] = {
#define ROW(name, code, text) {XATTN_STATUS_##name, code, "XATTN_STATUS_" #name},
        XATTN_STATUS_MAP(ROW)
#undef ROW
    };
    size_t n = sizeof all / sizeof all[0];
    EXPECT(n >= 18, "%zu statuses", n);
    EXPECT(XATTN_STATUS_OK == 0, "OK is %d", (int)XATTN_STATUS_OK);
    for (size_t i = 0; i < n; i++) {
        const char *s = xattn_status_string(all[i].st);
        const char *nm = xattn_status_name(all[i].st);
        EXPECT(s && *s && strcmp(s, "unknown status"), "string of %d: '%s'", all[i].code,
               s ? s : "(null)");
        EXPECT(nm && !strcmp(nm, all[i].name), "name of %d: '%s', expected '%s'", all[i].code,
               nm ? nm : "(null)", all[i].name);
        EXPECT((int)all[i].st == all[i].code, "%s", all[i].name);
        if (all[i].code != 0)
            EXPECT(all[i].code < 0, "%s = %d is not negative", all[i].name, all[i].code);
        for (size_t j = 0; j < i; j++)
            EXPECT(all[i].code != all[j].code && strcmp(xattn_status_string(all[j].st), s),
                   "%s and %s share a code or text", all[i].name, all[j].name);
    }
    EXPECT(xattn_status_string(XATTN_STATUS_OUT_OF_MEMORY) != NULL &&
               !strcmp(xattn_status_name(XATTN_STATUS_OUT_OF_MEMORY), "XATTN_STATUS_OUT_OF_MEMORY"),
           "OUT_OF_MEMORY");
    const char *u = xattn_status_string((xattn_status)-999);
    const char *un = xattn_status_name((xattn_status)12345);
    EXPECT(u != NULL && *u, "unknown status string");
    EXPECT(un != NULL && *un, "unknown status name");
}

/* The fp8 helpers: every byte's value decodes and encodes back to itself (NaNs to the
 * format's NaN), the largest values, round to nearest even, and overflow. */
static void test_fp8(void)
{
    const xattn_dtype ts[2] = {XATTN_DTYPE_FP8_E4M3, XATTN_DTYPE_FP8_E5M2};
    for (int t = 0; t < 2; t++)
        for (int b = 0; b < 256; b++) {
            const float x = xattn_fp8_to_f32((uint8_t)b, ts[t]);
            const uint8_t back = xattn_f32_to_fp8(x, ts[t]);
            if (isnan(x))
                EXPECT(isnan(xattn_fp8_to_f32(back, ts[t])), "%s 0x%02x: NaN encodes to 0x%02x",
                       xattn_dtype_name(ts[t]), b, back);
            else
                EXPECT(back == b || (x == 0 && (back & 0x7f) == 0),
                       "%s 0x%02x = %g encodes to 0x%02x", xattn_dtype_name(ts[t]), b, (double)x,
                       back);
        }
    EXPECT(xattn_fp8_to_f32(0x7e, XATTN_DTYPE_FP8_E4M3) == 448.0f, "e4m3 max");
    EXPECT(isnan(xattn_fp8_to_f32(0x7f, XATTN_DTYPE_FP8_E4M3)), "e4m3 NaN");
    EXPECT(xattn_fp8_to_f32(0x01, XATTN_DTYPE_FP8_E4M3) == ldexpf(1.0f, -9), "e4m3 min subnormal");
    EXPECT(xattn_fp8_to_f32(0x7b, XATTN_DTYPE_FP8_E5M2) == 57344.0f, "e5m2 max");
    EXPECT(isinf(xattn_fp8_to_f32(0xfc, XATTN_DTYPE_FP8_E5M2)), "e5m2 -inf");
    EXPECT(xattn_fp8_to_f32(0x01, XATTN_DTYPE_FP8_E5M2) == ldexpf(1.0f, -16), "e5m2 min subnormal");
    /* 464 lies halfway between 448 (even mantissa) and 480 (past the E4M3 maximum). */
    EXPECT(xattn_f32_to_fp8(464.0f, XATTN_DTYPE_FP8_E4M3) == 0x7e, "e4m3 tie to even");
    EXPECT(isnan(xattn_fp8_to_f32(xattn_f32_to_fp8(470.0f, XATTN_DTYPE_FP8_E4M3),
                                  XATTN_DTYPE_FP8_E4M3)),
           "e4m3 overflow is NaN");
    EXPECT(
        isinf(xattn_fp8_to_f32(xattn_f32_to_fp8(1e6f, XATTN_DTYPE_FP8_E5M2), XATTN_DTYPE_FP8_E5M2)),
        "e5m2 overflow is inf");
    EXPECT(xattn_f32_to_fp8(1.0625f, XATTN_DTYPE_FP8_E4M3) == 0x38, "1.0625 ties to 1.0");
    EXPECT(xattn_f32_to_fp8(1.1875f, XATTN_DTYPE_FP8_E4M3) == 0x3a, "1.1875 ties to 1.25");
    EXPECT(isnan(xattn_fp8_to_f32(0x00, XATTN_DTYPE_F16)), "not an fp8 dtype");
}

/* The q8_0 helpers against ggml's quantize_row_q8_0_ref written out here
 * (d = amax / 127 in f32, stored as f16; qs = roundf(x * (1 / d)), the f32
 * d's reciprocal), the layout (d little-endian, then 32 int8), the bound of
 * a round trip, the format's edges and the status on bad n. */
static void test_q8_0(void)
{
    enum { NB = 64, N = NB * 32 };
    static float x[N], y[N];
    static unsigned char blk[NB * 34];
    uint32_t r = 12345u;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        /* magnitudes from 2^-20 to 2^10 by block, so that some d are f16 subnormals */
        x[i] = ldexpf((float)((int)(r >> 8) - (1 << 23)) / (float)(1 << 23), (i / 32) % 31 - 20);
    }
    x[5 * 32 + 7] = 127.0f; /* block 5: d = 1, so 2.5 -> 3 and -2.5 -> -3 (roundf, not rint) */
    for (int j = 0; j < 32; j++)
        x[5 * 32 + j] = j == 7 ? 127.0f : j == 8 ? 2.5f : j == 9 ? -2.5f : 0.0f;
    for (int j = 0; j < 32; j++)
        x[6 * 32 + j] = 0.0f; /* block 6: amax 0 -> d 0, qs 0 */
    EXPECT(xattn_quantize_q8_0(x, blk, N) == XATTN_STATUS_OK, "quantize: %s", xattn_last_error());
    int bad_d = 0, bad_q = 0, bad_rt = 0;
    for (int b = 0; b < NB; b++) {
        const float *v = x + b * 32;
        const unsigned char *k = blk + b * 34;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = xattn_f32_to_f16(d);
        bad_d += k[0] != (h & 0xff) || k[1] != (h >> 8);
        for (int j = 0; j < 32; j++)
            bad_q += (int8_t)k[2 + j] != (int8_t)roundf(v[j] * id);
    }
    EXPECT(!bad_d && !bad_q, "quantize: %d blocks' d and %d qs differ from ggml's rule", bad_d,
           bad_q);
    EXPECT(xattn_dequantize_q8_0(blk, y, N) == XATTN_STATUS_OK, "dequantize: %s",
           xattn_last_error());
    for (int b = 0; b < NB; b++) {
        const unsigned char *k = blk + b * 34;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[b * 32 + j]) > amax ? fabsf(x[b * 32 + j]) : amax;
        const float d = amax / 127.0f, d16 = xattn_f16_to_f32((uint16_t)(k[0] | k[1] << 8));
        /* |x - d16 q| <= |x - d q| + |d - d16| |q| <= d / 2 + 127 |d - d16|, and a
         * little for the f32 products */
        const float bound = 0.5f * d + 127.0f * fabsf(d - d16) + 1e-6f * amax;
        for (int j = 0; j < 32; j++) {
            bad_rt += y[b * 32 + j] != d16 * (float)(int8_t)k[2 + j];
            bad_rt += !(fabsf(y[b * 32 + j] - x[b * 32 + j]) <= bound);
        }
    }
    EXPECT(!bad_rt, "round trip: %d values off d16 * qs or beyond the bound", bad_rt);
    EXPECT((int8_t)blk[5 * 34 + 2 + 8] == 3 && (int8_t)blk[5 * 34 + 2 + 9] == -3 &&
               (int8_t)blk[5 * 34 + 2 + 7] == 127 && blk[5 * 34] == 0x00 && blk[5 * 34 + 1] == 0x3c,
           "block 5: d 1.0 (0x3c00), 127, ties away from zero");
    EXPECT(blk[6 * 34] == 0 && blk[6 * 34 + 1] == 0 && y[6 * 32 + 3] == 0.0f, "amax 0: d 0");

    /* The format's edges, decoded: a subnormal d, qs -128 and 127, a NaN d. */
    unsigned char e[34] = {0x01, 0x00}; /* d = 2^-24 */
    e[2] = 0x80;                        /* -128 */
    e[3] = 0x7f;                        /* 127 */
    float z[32];
    EXPECT(xattn_dequantize_q8_0(e, z, 32) == XATTN_STATUS_OK && z[0] == -128.0f * 0x1p-24f &&
               z[1] == 127.0f * 0x1p-24f && z[2] == 0.0f,
           "subnormal d: %g %g", (double)z[0], (double)z[1]);
    e[0] = 0x00;
    e[1] = 0x7e; /* NaN */
    EXPECT(xattn_dequantize_q8_0(e, z, 32) == XATTN_STATUS_OK && isnan(z[0]) && isnan(z[2]),
           "NaN d");

    /* inf and NaN: their block is NaN, the others are kept, the status names x[i]. */
    x[3 * 32 + 4] = INFINITY;
    EXPECT(xattn_quantize_q8_0(x, blk, N) == XATTN_STATUS_INVALID_ARGUMENT &&
               strstr(xattn_last_error(), "x[100]"),
           "inf: %s", xattn_last_error());
    xattn_dequantize_q8_0(blk, y, N);
    EXPECT(isnan(y[3 * 32]) && isnan(y[3 * 32 + 31]) && y[5 * 32 + 7] == 127.0f,
           "inf's block NaN, the others kept");

    /* Bad n and pointers: refused, nothing written. */
    memset(blk, 0xab, 34);
    EXPECT(xattn_quantize_q8_0(x, blk, 33) == XATTN_STATUS_INVALID_ARGUMENT &&
               strstr(xattn_last_error(), "n: 33"),
           "n 33: %s", xattn_last_error());
    EXPECT(blk[0] == 0xab, "n 33 wrote nothing");
    EXPECT(xattn_quantize_q8_0(x, blk, -32) == XATTN_STATUS_INVALID_ARGUMENT, "n -32");
    EXPECT(xattn_dequantize_q8_0(blk, y, 31) == XATTN_STATUS_INVALID_ARGUMENT, "dequantize n 31");
    EXPECT(xattn_quantize_q8_0(NULL, blk, 32) == XATTN_STATUS_INVALID_ARGUMENT, "NULL x");
    EXPECT(xattn_dequantize_q8_0(blk, NULL, 32) == XATTN_STATUS_INVALID_ARGUMENT, "NULL out");
    EXPECT(xattn_quantize_q8_0(NULL, NULL, 0) == XATTN_STATUS_OK, "n 0");
}

static void test_names(void)
{
    static const char *const dn[] = {"f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "q8_0"};
    static const size_t ds[] = {4, 2, 2, 1, 1, 0}; /* q8_0: no whole bytes per value */
    for (int i = 0; i < XATTN_DTYPE_COUNT; i++) {
        EXPECT(!strcmp(xattn_dtype_name((xattn_dtype)i), dn[i]), "dtype %d: %s", i,
               xattn_dtype_name((xattn_dtype)i));
        EXPECT(xattn_dtype_size((xattn_dtype)i) == ds[i], "dtype %d size %zu", i,
               xattn_dtype_size((xattn_dtype)i));
    }
    EXPECT(!strcmp(xattn_dtype_name(XATTN_DTYPE_COUNT), "?"), "invalid dtype name");
    EXPECT(!strcmp(xattn_dtype_name((xattn_dtype)-1), "?"), "negative dtype name");
    EXPECT(xattn_dtype_size((xattn_dtype)77) == 0, "invalid dtype size");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_Q8_0, 64) == 68, "q8_0: 64 values in 2 blocks");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_Q8_0, 33) == 68, "q8_0: 33 values touch 2 blocks");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_F16, 3) == 6, "f16 bytes");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_FP8_E4M3, 5) == 5, "fp8 bytes");
    EXPECT(xattn_dtype_bytes((xattn_dtype)77, 5) == 0, "invalid dtype bytes");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_F32, UINT64_MAX / 2) == UINT64_MAX, "overflow");
    EXPECT(xattn_dtype_bytes(XATTN_DTYPE_Q8_0, UINT64_MAX) == UINT64_MAX, "q8_0 overflow");

    static const char *const bn[] = {"auto", "cpu", "opencl", "cuda"};
    for (int i = -1; i < XATTN_BACKEND_COUNT; i++) {
        const char *n = xattn_backend_name((xattn_backend)i);
        EXPECT(!strcmp(n, bn[i + 1]), "backend %d: %s", i, n);
        xattn_backend b = (xattn_backend)42;
        EXPECT_OK(xattn_backend_from_name(n, &b));
        EXPECT(b == (xattn_backend)i, "parsed %s as %d", n, (int)b);
    }
    EXPECT(!strcmp(xattn_backend_name((xattn_backend)9), "?"), "invalid backend name");
    xattn_backend b;
    EXPECT(xattn_backend_from_name("vulkan", &b) == XATTN_STATUS_INVALID_ARGUMENT, "vulkan parsed");
    EXPECT(strstr(xattn_last_error(), "vulkan") != NULL, "message: %s", xattn_last_error());
    EXPECT(xattn_backend_from_name(NULL, &b) == XATTN_STATUS_INVALID_ARGUMENT, "NULL name");
    EXPECT(xattn_backend_from_name("cpu", NULL) == XATTN_STATUS_INVALID_ARGUMENT, "NULL out");
    EXPECT(xattn_backend_from_name("CPU ", &b) != XATTN_STATUS_OK, "'CPU ' parsed");

    static const char *const an[] = {"auto", "naive", "flash", "splitkv"};
    for (int i = 0; i < XATTN_ALGO_COUNT; i++) {
        EXPECT(!strcmp(xattn_algo_name((xattn_algo)i), an[i]), "algo %d", i);
        xattn_algo a = (xattn_algo)42;
        EXPECT_OK(xattn_algo_from_name(an[i], &a));
        EXPECT(a == (xattn_algo)i, "parsed %s as %d", an[i], (int)a);
    }
    EXPECT(!strcmp(xattn_algo_name(XATTN_ALGO_COUNT), "?"), "invalid algo name");
    xattn_algo a;
    EXPECT(xattn_algo_from_name("fast", &a) == XATTN_STATUS_INVALID_ARGUMENT, "fast parsed");
    EXPECT(xattn_algo_from_name(NULL, &a) == XATTN_STATUS_INVALID_ARGUMENT, "NULL algo name");
}

/* ---- devices and contexts --------------------------------------------------- */

static void test_devices(void)
{
    EXPECT(xattn_backend_compiled(XATTN_BACKEND_CPU) == 1, "CPU not compiled in");
    EXPECT_OK(xattn_backend_available(XATTN_BACKEND_CPU));
    EXPECT(xattn_backend_compiled((xattn_backend)7) == 0, "backend 7 compiled");
    EXPECT(xattn_backend_available((xattn_backend)7) != XATTN_STATUS_OK, "backend 7 available");
    for (int be = 0; be < XATTN_BACKEND_COUNT; be++) {
        int count = -1;
        EXPECT_OK(xattn_device_count((xattn_backend)be, &count));
        xattn_status av = xattn_backend_available((xattn_backend)be);
        if (av != XATTN_STATUS_OK) {
            EXPECT(av == XATTN_STATUS_BACKEND_UNAVAILABLE, "%s: %s", xattn_backend_name(be),
                   xattn_status_name(av));
            EXPECT(xattn_last_error()[0] != '\0', "%s unavailable without a reason",
                   xattn_backend_name(be));
            printf("note: %s unavailable: %s\n", xattn_backend_name(be), xattn_last_error());
            EXPECT(count == 0, "%s unavailable but %d devices", xattn_backend_name(be), count);
            xattn_device_info info;
            EXPECT(xattn_device_get_info((xattn_backend)be, 0, &info) ==
                       XATTN_STATUS_BACKEND_UNAVAILABLE,
                   "info of an unavailable backend");
            continue;
        }
        EXPECT(count >= 1, "%s available with %d devices", xattn_backend_name(be), count);
        for (int i = 0; i < count; i++) {
            xattn_device_info info;
            memset(&info, 0xab, sizeof info);
            EXPECT_OK(xattn_device_get_info((xattn_backend)be, i, &info));
            EXPECT(info.struct_size == sizeof info, "struct_size %zu", info.struct_size);
            EXPECT(info.backend == (xattn_backend)be && info.index == i, "identity");
            EXPECT(info.name[0] != '\0' && memchr(info.name, 0, sizeof info.name),
                   "empty or unterminated name");
            EXPECT(info.compute_units >= 1, "%s compute units %d", info.name, info.compute_units);
            EXPECT(info.global_mem_bytes > 0, "%s memory 0", info.name);
            printf("device %s %d: %s (%d compute units, %llu MiB)\n", xattn_backend_name(be), i,
                   info.name, info.compute_units,
                   (unsigned long long)(info.global_mem_bytes >> 20));
        }
        xattn_device_info info;
        EXPECT(xattn_device_get_info((xattn_backend)be, count, &info) ==
                   XATTN_STATUS_DEVICE_NOT_FOUND,
               "device %d of %s found", count, xattn_backend_name(be));
        EXPECT(xattn_device_get_info((xattn_backend)be, -1, &info) == XATTN_STATUS_DEVICE_NOT_FOUND,
               "device -1 found");
        EXPECT(xattn_device_get_info((xattn_backend)be, 0, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
               "NULL info accepted");
    }
    EXPECT(xattn_device_count(XATTN_BACKEND_CPU, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
           "NULL count accepted");
}

static void test_contexts(void)
{
    xattn_ctx_destroy(NULL); /* a no-op */
    xattn_buffer_free(NULL);
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    EXPECT(xattn_ctx_backend(ctx) == XATTN_BACKEND_CPU, "backend %d", xattn_ctx_backend(ctx));
    xattn_device_info info, info0;
    EXPECT_OK(xattn_ctx_device_info(ctx, &info));
    EXPECT_OK(xattn_device_get_info(XATTN_BACKEND_CPU, 0, &info0));
    EXPECT(!strcmp(info.name, info0.name) && info.name[0], "ctx device '%s' vs '%s'", info.name,
           info0.name);
    EXPECT_OK(xattn_ctx_sync(ctx));
    EXPECT(xattn_ctx_sync(NULL) == XATTN_STATUS_INVALID_ARGUMENT, "sync(NULL)");
    EXPECT(xattn_ctx_device_info(ctx, NULL) == XATTN_STATUS_INVALID_ARGUMENT, "info NULL");
    xattn_ctx_destroy(ctx);

    xattn_ctx *bad = (xattn_ctx *)&info; /* must stay untouched on failure */
    EXPECT(xattn_ctx_create(XATTN_BACKEND_CPU, 5, &bad) == XATTN_STATUS_DEVICE_NOT_FOUND,
           "CPU device 5");
    EXPECT(bad == NULL, "out not cleared on failure");
    EXPECT(strstr(xattn_last_error(), "device") != NULL, "message: %s", xattn_last_error());
    EXPECT(xattn_ctx_create(XATTN_BACKEND_CPU, 0, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
           "NULL out");
    EXPECT(xattn_ctx_create((xattn_backend)9, 0, &bad) != XATTN_STATUS_OK, "backend 9");

    xattn_ctx *any = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_AUTO, 0, &any));
    if (any) {
        xattn_backend b = xattn_ctx_backend(any);
        EXPECT(b >= XATTN_BACKEND_CPU && b < XATTN_BACKEND_COUNT, "AUTO gave %d", (int)b);
        printf("note: XATTN_BACKEND_AUTO picked %s\n", xattn_backend_name(b));
        xattn_ctx_destroy(any);
    }
    for (int be = 1; be < XATTN_BACKEND_COUNT; be++)
        if (xattn_backend_available((xattn_backend)be) != XATTN_STATUS_OK) {
            xattn_ctx *c = NULL;
            EXPECT(xattn_ctx_create((xattn_backend)be, 0, &c) == XATTN_STATUS_BACKEND_UNAVAILABLE,
                   "creating an unavailable %s context", xattn_backend_name(be));
        }
}

static void test_options(void)
{
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    int64_t v = -7;
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1));
    EXPECT_OK(xattn_ctx_get_option(ctx, XATTN_OPT_NUM_THREADS, &v));
    EXPECT(v == 1, "NUM_THREADS read back %lld", (long long)v);
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 0));
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1));
    EXPECT_OK(xattn_ctx_get_option(ctx, XATTN_OPT_POISON, &v));
    EXPECT(v == 1, "POISON read back %lld", (long long)v);
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, 1)); /* portable: always there */
    EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, 0));

    static const struct {
        xattn_option opt;
        int64_t value;
    } bad[] = {{XATTN_OPT_NUM_THREADS, -1},  {XATTN_OPT_NUM_THREADS, 1 << 20},
               {XATTN_OPT_MEMORY_LIMIT, -5}, {XATTN_OPT_CPU_SIMD, 4},
               {XATTN_OPT_CPU_SIMD, -1},     {XATTN_OPT_POISON, 2},
               {(xattn_option)0, 1},         {(xattn_option)99, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT_OK(xattn_ctx_get_option(ctx, XATTN_OPT_NUM_THREADS, &v));
        int64_t before = v;
        xattn_status st = xattn_ctx_set_option(ctx, bad[i].opt, bad[i].value);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "option %d = %lld: %s", (int)bad[i].opt,
               (long long)bad[i].value, xattn_status_name(st));
        EXPECT(xattn_last_error()[0] != '\0', "no message for option %d", (int)bad[i].opt);
        EXPECT_OK(xattn_ctx_get_option(ctx, XATTN_OPT_NUM_THREADS, &v));
        EXPECT(v == before, "a rejected option changed NUM_THREADS");
    }
    EXPECT(xattn_ctx_get_option(ctx, (xattn_option)99, &v) == XATTN_STATUS_INVALID_ARGUMENT,
           "get unknown option");
    EXPECT(xattn_ctx_get_option(ctx, XATTN_OPT_POISON, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
           "get NULL");
    EXPECT(xattn_ctx_set_option(NULL, XATTN_OPT_POISON, 0) == XATTN_STATUS_INVALID_ARGUMENT,
           "set on NULL ctx");
    xattn_ctx_destroy(ctx);
}

/* ---- buffers and memory ------------------------------------------------------ */

static void test_buffers(void)
{
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    enum { N = 4096 };
    unsigned char src[N], dst[N];
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 37 + 11);
    xattn_buffer *buf = NULL;
    EXPECT_OK(xattn_buffer_alloc(ctx, N, &buf));
    if (buf) {
        EXPECT(xattn_buffer_size(buf) == N, "size %zu", xattn_buffer_size(buf));
        EXPECT_OK(xattn_buffer_write(buf, 0, src, N));
        memset(dst, 0, N);
        EXPECT_OK(xattn_buffer_read(buf, 0, dst, N));
        EXPECT(!memcmp(src, dst, N), "roundtrip differs");
        /* partial writes and reads at offsets */
        unsigned char patch[100];
        memset(patch, 0x5c, sizeof patch);
        EXPECT_OK(xattn_buffer_write(buf, 1000, patch, sizeof patch));
        EXPECT_OK(xattn_buffer_read(buf, 990, dst, 120));
        EXPECT(!memcmp(dst, src + 990, 10) && dst[10] == 0x5c && dst[109] == 0x5c &&
                   !memcmp(dst + 110, src + 1100, 10),
               "partial write/read");
        EXPECT(xattn_buffer_read(buf, N - 10, dst, 11) == XATTN_STATUS_OUT_OF_BOUNDS,
               "read past the end");
        EXPECT(xattn_buffer_write(buf, N + 1, src, 0) == XATTN_STATUS_OUT_OF_BOUNDS,
               "offset past the end");
        EXPECT(xattn_buffer_write(buf, SIZE_MAX, src, 2) == XATTN_STATUS_OUT_OF_BOUNDS,
               "offset overflowing");
        EXPECT(xattn_buffer_read(buf, 0, NULL, 4) == XATTN_STATUS_INVALID_ARGUMENT, "NULL dst");
        EXPECT_OK(xattn_buffer_write(buf, N, src, 0)); /* empty at the end: fine */
        xattn_buffer_free(buf);
    }
    EXPECT(xattn_buffer_alloc(ctx, 0, &buf) == XATTN_STATUS_INVALID_ARGUMENT, "0 bytes");
    EXPECT(xattn_buffer_alloc(NULL, 8, &buf) == XATTN_STATUS_INVALID_ARGUMENT, "NULL ctx");
    EXPECT(xattn_buffer_alloc(ctx, 8, NULL) == XATTN_STATUS_INVALID_ARGUMENT, "NULL out");
    EXPECT(xattn_buffer_read(NULL, 0, dst, 1) == XATTN_STATUS_INVALID_ARGUMENT, "NULL buf");
    EXPECT(xattn_buffer_size(NULL) == 0, "size of NULL");
    xattn_ctx_destroy(ctx);
}

/* A small attention problem on buffers q, k, v, o (f32, BSHD) of ctx. */
enum { TB = 1, TS = 16, TH = 2, TD = 8 };

static void small_desc(xattn_attn_desc *d, xattn_buffer *q, xattn_buffer *k, xattn_buffer *v,
                       xattn_buffer *o)
{
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, TB, TS, TH, TD);
    d->k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, TB, TS, TH, TD);
    d->v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, TB, TS, TH, TD);
    d->o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, TB, TS, TH, TD);
    d->causal = 1;
}

static void test_wrap_host(void)
{
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    enum { N = TB * TS * TH * TD };
    static float q[N], k[N], v[N], o[N];
    for (int i = 0; i < N; i++) {
        q[i] = (float)sin(0.37 * i + 0.1);
        k[i] = (float)cos(0.11 * i + 0.3);
        v[i] = (float)sin(0.05 * i + 1.0) + 0.25f;
        o[i] = NAN;
    }
    xattn_mem_stats m0, m1;
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &m0));
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    EXPECT_OK(xattn_buffer_wrap_host(ctx, q, sizeof q, &bq));
    EXPECT_OK(xattn_buffer_wrap_host(ctx, k, sizeof k, &bk));
    EXPECT_OK(xattn_buffer_wrap_host(ctx, v, sizeof v, &bv));
    EXPECT_OK(xattn_buffer_wrap_host(ctx, o, sizeof o, &bo));
    xattn_buffer *bnull = NULL;
    EXPECT(xattn_buffer_wrap_host(ctx, NULL, 16, &bnull) == XATTN_STATUS_INVALID_ARGUMENT &&
               bnull == NULL,
           "wrapping NULL");
    EXPECT(xattn_buffer_wrap_host(ctx, q, 0, &bnull) == XATTN_STATUS_INVALID_ARGUMENT &&
               bnull == NULL,
           "wrapping 0 bytes");
    if (bq && bk && bv && bo) {
        EXPECT_OK(xattn_ctx_mem_stats(ctx, &m1));
        EXPECT(m1.current_bytes - m0.current_bytes < sizeof q,
               "wrapping caller memory counted %llu bytes as allocated",
               (unsigned long long)(m1.current_bytes - m0.current_bytes));
        /* writes through the buffer land in the caller's memory */
        float one = 3.5f;
        EXPECT_OK(xattn_buffer_write(bv, sizeof(float) * 5, &one, sizeof one));
        EXPECT(v[5] == 3.5f, "write through a wrapped buffer not visible: %g", (double)v[5]);
        v[5] = 0.75f;
        float back = 0;
        EXPECT_OK(xattn_buffer_read(bv, sizeof(float) * 5, &back, sizeof back));
        EXPECT(back == 0.75f, "caller's write not visible through the buffer: %g", (double)back);

        xattn_attn_desc d;
        small_desc(&d, bq, bk, bv, bo);
        EXPECT_OK(xattn_attention(ctx, &d, NULL));
        EXPECT_OK(xattn_ctx_sync(ctx));
        double ref[N];
        EXPECT_OK(xattn_reference_attention(ctx, &d, ref, NULL));
        double maxerr = 0;
        int nan = 0;
        for (int i = 0; i < N; i++) {
            nan += isnan(o[i]);
            if (fabs(o[i] - ref[i]) > maxerr)
                maxerr = fabs(o[i] - ref[i]);
        }
        EXPECT(nan == 0 && maxerr < 1e-5,
               "kernel output not in the caller's memory (%d NaN, max error %g)", nan, maxerr);
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_ctx_destroy(ctx);
}

static void test_memory(void)
{
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    if (!ctx)
        return;
    xattn_mem_stats s0, s1, s2, s3;
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &s0));
    EXPECT(s0.peak_bytes >= s0.current_bytes, "peak below current");
    EXPECT(s0.limit_bytes == 0, "a limit by default: %llu", (unsigned long long)s0.limit_bytes);
    xattn_buffer *a = NULL, *b = NULL;
    EXPECT_OK(xattn_buffer_alloc(ctx, 1 << 20, &a));
    EXPECT_OK(xattn_buffer_alloc(ctx, 3 << 20, &b));
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &s1));
    EXPECT(s1.current_bytes >= s0.current_bytes + (4u << 20), "current %llu -> %llu",
           (unsigned long long)s0.current_bytes, (unsigned long long)s1.current_bytes);
    EXPECT(s1.peak_bytes >= s1.current_bytes, "peak %llu < current %llu",
           (unsigned long long)s1.peak_bytes, (unsigned long long)s1.current_bytes);
    EXPECT(s1.alloc_count >= s0.alloc_count + 2, "alloc_count %llu -> %llu",
           (unsigned long long)s0.alloc_count, (unsigned long long)s1.alloc_count);
    xattn_buffer_free(b);
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &s2));
    EXPECT(s2.current_bytes == s1.current_bytes - (3u << 20), "free: current %llu -> %llu",
           (unsigned long long)s1.current_bytes, (unsigned long long)s2.current_bytes);
    EXPECT(s2.peak_bytes == s1.peak_bytes, "free changed the peak");
    EXPECT_OK(xattn_ctx_reset_peak(ctx));
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &s3));
    EXPECT(s3.peak_bytes == s3.current_bytes, "reset_peak: peak %llu, current %llu",
           (unsigned long long)s3.peak_bytes, (unsigned long long)s3.current_bytes);
    EXPECT(xattn_ctx_reset_peak(NULL) == XATTN_STATUS_INVALID_ARGUMENT, "reset_peak(NULL)");
    EXPECT(xattn_ctx_mem_stats(ctx, NULL) == XATTN_STATUS_INVALID_ARGUMENT, "stats NULL");

    /* an attention call's workspace shows in the peak and is released after */
    enum { S = 128, H = 4, Dh = 32 };
    size_t bytes = (size_t)S * H * Dh * 4;
    xattn_buffer *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    float *host = malloc(bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        host[i] = (float)((i * 7919u) % 101) / 50.0f - 1.0f;
    EXPECT_OK(xattn_buffer_alloc(ctx, bytes, &q));
    EXPECT_OK(xattn_buffer_alloc(ctx, bytes, &k));
    EXPECT_OK(xattn_buffer_alloc(ctx, bytes, &v));
    EXPECT_OK(xattn_buffer_alloc(ctx, bytes, &o));
    if (q && k && v && o) {
        xattn_buffer_write(q, 0, host, bytes);
        xattn_buffer_write(k, 0, host, bytes);
        xattn_buffer_write(v, 0, host, bytes);
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 1, S, H, Dh);
        d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, S, H, Dh);
        d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, S, H, Dh);
        d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 1, S, H, Dh);
        d.algo = XATTN_ALGO_NAIVE; /* score workspace: H*S*S*4 = 256 KiB */
        xattn_mem_stats before, after;
        EXPECT_OK(xattn_ctx_reset_peak(ctx));
        EXPECT_OK(xattn_ctx_mem_stats(ctx, &before));
        xattn_run_info info;
        EXPECT_OK(xattn_attention(ctx, &d, &info));
        EXPECT_OK(xattn_ctx_mem_stats(ctx, &after));
        EXPECT(after.current_bytes == before.current_bytes,
               "attention leaked %lld bytes of workspace",
               (long long)(after.current_bytes - before.current_bytes));
        EXPECT(after.peak_bytes >= before.current_bytes + (uint64_t)H * S * S * 4,
               "NAIVE's score matrix not in the peak (%llu -> %llu)",
               (unsigned long long)before.current_bytes, (unsigned long long)after.peak_bytes);
        EXPECT(info.workspace_bytes >= (uint64_t)H * S * S * 4, "workspace_bytes %llu",
               (unsigned long long)info.workspace_bytes);

        /* memory limit: the workspace no longer fits -> OUT_OF_MEMORY, ctx usable */
        EXPECT_OK(
            xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)after.current_bytes + 4096));
        int64_t lim = 0;
        EXPECT_OK(xattn_ctx_get_option(ctx, XATTN_OPT_MEMORY_LIMIT, &lim));
        EXPECT(lim == (int64_t)after.current_bytes + 4096, "limit read back %lld", (long long)lim);
        xattn_mem_stats ls;
        EXPECT_OK(xattn_ctx_mem_stats(ctx, &ls));
        EXPECT(ls.limit_bytes == (uint64_t)lim, "stats limit %llu",
               (unsigned long long)ls.limit_bytes);
        xattn_status st = xattn_attention(ctx, &d, NULL);
        EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "NAIVE over the limit: %s", xattn_status_name(st));
        EXPECT(strstr(xattn_last_error(), "limit") != NULL, "message: %s", xattn_last_error());
        xattn_buffer *big = NULL;
        st = xattn_buffer_alloc(ctx, 1 << 20, &big);
        EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && big == NULL, "alloc over the limit: %s",
               xattn_status_name(st));
        EXPECT_OK(xattn_ctx_mem_stats(ctx, &ls));
        EXPECT(ls.current_bytes == after.current_bytes, "failed calls changed current bytes");
        xattn_buffer *small = NULL;
        EXPECT_OK(xattn_buffer_alloc(ctx, 1024, &small)); /* still fits */
        xattn_buffer_free(small);
        EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0));
        EXPECT_OK(xattn_attention(ctx, &d, NULL)); /* usable again */
        EXPECT_OK(xattn_ctx_sync(ctx));
    }
    free(host);
    xattn_buffer_free(q);
    xattn_buffer_free(k);
    xattn_buffer_free(v);
    xattn_buffer_free(o);
    xattn_buffer_free(a);
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &s3));
    EXPECT(s3.current_bytes == s0.current_bytes, "after freeing all: %llu bytes, started at %llu",
           (unsigned long long)s3.current_bytes, (unsigned long long)s0.current_bytes);
    xattn_ctx_destroy(ctx);
}

/* ---- the reference on hand-computed values ------------------------------------ */

/* Two queries, two keys, one head, D = Dv = 2, scale 1:
 *   q0 = [1, 0], q1 = [0, 1]; k0 = [1, 0], k1 = [0, 1]; v0 = [1, 2], v1 = [3, 5]
 * so that s = [[1, 0], [0, 1]] before any modification. */
typedef struct ref_fixture {
    xattn_ctx *ctx;
    xattn_buffer *q, *k, *v, *o, *lse, *bias;
} ref_fixture;

static void ref_desc(ref_fixture *f, xattn_attn_desc *d)
{
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(f->q, 0, XATTN_DTYPE_F32, 1, 2, 1, 2);
    d->k = xattn_tensor_bshd(f->k, 0, XATTN_DTYPE_F32, 1, 2, 1, 2);
    d->v = xattn_tensor_bshd(f->v, 0, XATTN_DTYPE_F32, 1, 2, 1, 2);
    d->o = xattn_tensor_bshd(f->o, 0, XATTN_DTYPE_F32, 1, 2, 1, 2);
    xattn_tensor l = {f->lse, 0, XATTN_DTYPE_F32, {1, 1, 2, 1}, {2, 2, 1, 1}};
    d->lse = l;
    d->scale = 1.0f;
}

/* o_want: 2 rows x 2; lse_want: 2 rows. NaN means "must be NaN". */
static void expect_ref(ref_fixture *f, const xattn_attn_desc *d, const char *what,
                       const double o_want[4], const double lse_want[2])
{
    double o[4], lse[2];
    xattn_status st = xattn_reference_attention(f->ctx, d, o, lse);
    EXPECT(st == XATTN_STATUS_OK, "[%s] reference: %s: %s", what, xattn_status_name(st),
           xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return;
    for (int i = 0; i < 4; i++)
        EXPECT(isnan(o_want[i]) ? isnan(o[i]) : fabs(o[i] - o_want[i]) < 1e-12,
               "[%s] O[%d] = %.15g, expected %.15g", what, i, o[i], o_want[i]);
    for (int i = 0; i < 2; i++)
        EXPECT(isnan(lse_want[i])   ? isnan(lse[i])
               : isinf(lse_want[i]) ? lse[i] == lse_want[i]
                                    : fabs(lse[i] - lse_want[i]) < 1e-12,
               "[%s] LSE[%d] = %.15g, expected %.15g", what, i, lse[i], lse_want[i]);
}

/* O and LSE of a row with scores s0, s1 over v0 = [1, 2], v1 = [3, 5]. */
static void softmax_row(double s0, double s1, double *o, double *lse)
{
    double m = fmax(s0, s1), e0 = exp(s0 - m), e1 = exp(s1 - m), l = e0 + e1;
    o[0] = (e0 * 1 + e1 * 3) / l;
    o[1] = (e0 * 2 + e1 * 5) / l;
    *lse = m + log(l);
}

static void test_reference(void)
{
    ref_fixture f;
    memset(&f, 0, sizeof f);
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &f.ctx));
    if (!f.ctx)
        return;
    const float q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 5};
    xattn_buffer **bufs[6] = {&f.q, &f.k, &f.v, &f.o, &f.lse, &f.bias};
    for (int i = 0; i < 6; i++)
        EXPECT_OK(xattn_buffer_alloc(f.ctx, 64, bufs[i]));
    if (!f.q || !f.k || !f.v || !f.o || !f.lse || !f.bias)
        return;
    EXPECT_OK(xattn_buffer_write(f.q, 0, q, sizeof q));
    EXPECT_OK(xattn_buffer_write(f.k, 0, k, sizeof k));
    EXPECT_OK(xattn_buffer_write(f.v, 0, v, sizeof v));

    xattn_attn_desc d;
    double o[4], lse[2];
    const double ninf = -INFINITY;

    ref_desc(&f, &d); /* plain */
    softmax_row(1, 0, o, lse);
    softmax_row(0, 1, o + 2, lse + 1);
    expect_ref(&f, &d, "plain", o, lse);

    d.causal = 1; /* row 0 sees k0 only */
    {
        double ow[4] = {1, 2, o[2], o[3]}, lw[2] = {1, lse[1]};
        expect_ref(&f, &d, "causal", ow, lw);
        d.align = XATTN_ALIGN_TOP_LEFT;
        expect_ref(&f, &d, "causal top-left", ow, lw);
    }

    ref_desc(&f, &d); /* default scale 1/sqrt(2) */
    d.scale = 0.0f;
    softmax_row(1 / sqrt(2.0), 0, o, lse);
    softmax_row(0, 1 / sqrt(2.0), o + 2, lse + 1);
    expect_ref(&f, &d, "default scale", o, lse);

    ref_desc(&f, &d); /* softcap 0.5: s = 0.5 tanh(s / 0.5) */
    d.softcap = 0.5f;
    softmax_row(0.5 * tanh(2.0), 0, o, lse);
    softmax_row(0, 0.5 * tanh(2.0), o + 2, lse + 1);
    expect_ref(&f, &d, "softcap", o, lse);

    ref_desc(&f, &d); /* ALiBi slope 0.75: s -= 0.75 |i - j| */
    const float slope[1] = {0.75f};
    d.alibi_slopes = slope;
    softmax_row(1, -0.75, o, lse);
    softmax_row(-0.75, 1, o + 2, lse + 1);
    expect_ref(&f, &d, "alibi", o, lse);

    ref_desc(&f, &d); /* window (0, 0): the diagonal only */
    d.window_left = 0;
    d.window_right = 0;
    {
        double ow[4] = {1, 2, 3, 5}, lw[2] = {1, 1};
        expect_ref(&f, &d, "window 0,0", ow, lw);
    }

    ref_desc(&f, &d); /* bias [[0.5, -inf], [-inf, -inf]]: row 1 fully masked */
    const float bias[4] = {0.5f, -INFINITY, -INFINITY, -INFINITY};
    EXPECT_OK(xattn_buffer_write(f.bias, 0, bias, sizeof bias));
    xattn_tensor bt = {f.bias, 0, XATTN_DTYPE_F32, {1, 1, 2, 2}, {4, 4, 2, 1}};
    d.bias = bt;
    {
        double ow[4] = {1, 2, 0, 0}, lw[2] = {1.5, ninf};
        expect_ref(&f, &d, "bias", ow, lw);
    }

    ref_desc(&f, &d); /* padding: seqlens_q = 1 -> row 1 is O = 0, LSE = -inf */
    const int32_t lq[1] = {1}, lk0[1] = {0};
    d.seqlens_q = lq;
    softmax_row(1, 0, o, lse);
    {
        double ow[4] = {o[0], o[1], 0, 0}, lw[2] = {lse[0], ninf};
        expect_ref(&f, &d, "padded query", ow, lw);
    }
    ref_desc(&f, &d); /* no keys: every row fully masked */
    d.seqlens_k = lk0;
    {
        double ow[4] = {0, 0, 0, 0}, lw[2] = {ninf, ninf};
        expect_ref(&f, &d, "no keys", ow, lw);
    }

    ref_desc(&f, &d); /* f16 and bf16 inputs decode to the same values */
    const uint16_t qh[4] = {0x3c00, 0, 0, 0x3c00}, vh[4] = {0x3c00, 0x4000, 0x4200, 0x4500};
    const uint16_t kb[4] = {0x3f80, 0, 0, 0x3f80}, vb[4] = {0x3f80, 0x4000, 0x4040, 0x40a0};
    xattn_buffer *hq = NULL, *hk = NULL, *hv = NULL;
    EXPECT_OK(xattn_buffer_alloc(f.ctx, 64, &hq));
    EXPECT_OK(xattn_buffer_alloc(f.ctx, 64, &hk));
    EXPECT_OK(xattn_buffer_alloc(f.ctx, 64, &hv));
    if (hq && hk && hv) {
        xattn_buffer_write(hq, 0, qh, sizeof qh);
        xattn_buffer_write(hk, 0, kb, sizeof kb);
        xattn_buffer_write(hv, 0, vb, sizeof vb);
        d.q = xattn_tensor_bshd(hq, 0, XATTN_DTYPE_F16, 1, 2, 1, 2);
        d.o = xattn_tensor_bshd(f.o, 0, XATTN_DTYPE_F16, 1, 2, 1, 2);
        d.k = xattn_tensor_bshd(hk, 0, XATTN_DTYPE_BF16, 1, 2, 1, 2);
        d.v = xattn_tensor_bshd(hv, 0, XATTN_DTYPE_BF16, 1, 2, 1, 2);
        softmax_row(1, 0, o, lse);
        softmax_row(0, 1, o + 2, lse + 1);
        expect_ref(&f, &d, "f16 q, bf16 k/v", o, lse);
        /* f16 v as well (through a separate descriptor: k and v share a dtype) */
        xattn_buffer_write(hv, 0, vh, sizeof vh);
        xattn_buffer_write(hk, 0, qh, sizeof qh);
        d.k.dtype = XATTN_DTYPE_F16;
        d.v.dtype = XATTN_DTYPE_F16;
        expect_ref(&f, &d, "f16 everywhere", o, lse);
    }
    xattn_buffer_free(hq);
    xattn_buffer_free(hk);
    xattn_buffer_free(hv);

    ref_desc(&f, &d); /* NaN in q1 -> row 1 NaN, row 0 untouched */
    const float qn[4] = {1, 0, NAN, 1};
    EXPECT_OK(xattn_buffer_write(f.q, 0, qn, sizeof qn));
    softmax_row(1, 0, o, lse);
    {
        double ow[4] = {o[0], o[1], NAN, NAN}, lw[2] = {lse[0], NAN};
        expect_ref(&f, &d, "NaN query", ow, lw);
    }
    /* ... unless the NaN sits where the row is masked: causal row 0 never sees k1 */
    EXPECT_OK(xattn_buffer_write(f.q, 0, q, sizeof q));
    const float kn[4] = {1, 0, NAN, 1}, vn[4] = {1, 2, NAN, 5};
    EXPECT_OK(xattn_buffer_write(f.k, 0, kn, sizeof kn));
    EXPECT_OK(xattn_buffer_write(f.v, 0, vn, sizeof vn));
    d.causal = 1;
    {
        double ow[4] = {1, 2, NAN, NAN}, lw[2] = {1, NAN};
        expect_ref(&f, &d, "masked NaN key", ow, lw);
    }

    /* argument checks */
    EXPECT(xattn_reference_attention(f.ctx, &d, NULL, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
           "NULL o_ref");
    d.q.dtype = (xattn_dtype)9;
    EXPECT(xattn_reference_attention(f.ctx, &d, o, NULL) == XATTN_STATUS_INVALID_DTYPE,
           "the reference validates the descriptor");
    unsigned char w[2];
    ref_desc(&f, &d);
    EXPECT_OK(xattn_reference_rows_written(f.ctx, &d, w));
    EXPECT(w[0] == 1 && w[1] == 1, "padded mode writes every row");
    const int32_t cu_q[2] = {0, 1}, cu_k[2] = {0, 2};
    d.q = xattn_tensor_bshd(f.q, 0, XATTN_DTYPE_F32, 1, 2, 1, 2);
    d.lse.buffer = NULL;
    d.cu_seqlens_q = cu_q;
    d.cu_seqlens_k = cu_k;
    d.num_seqs = 1;
    EXPECT_OK(xattn_reference_rows_written(f.ctx, &d, w));
    EXPECT(w[0] == 1 && w[1] == 0, "packed: token 1 is past cu_seqlens_q[1] (%d %d)", w[0], w[1]);

    for (int i = 0; i < 6; i++)
        xattn_buffer_free(*bufs[i]);
    xattn_ctx_destroy(f.ctx);
}

/* ---- logging ----------------------------------------------------------------- */

typedef struct log_capture {
    int count;
    int level;
    char last[1024];
} log_capture;

static void log_fn(xattn_log_level level, const char *msg, void *user)
{
    log_capture *c = user;
    c->count++;
    c->level = (int)level;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

static void test_log(void)
{
    log_capture cap;
    memset(&cap, 0, sizeof cap);
    xattn_set_log_callback(log_fn, &cap, XATTN_LOG_ERROR);
    xattn_ctx *ctx = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
    int before = cap.count;
    xattn_buffer *b = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, 0, &b);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "alloc 0: %s", xattn_status_name(st));
    EXPECT(cap.count == before + 1, "callback called %d times for one error", cap.count - before);
    EXPECT(cap.level == XATTN_LOG_ERROR, "level %d", cap.level);
    EXPECT(strstr(cap.last, xattn_last_error()) != NULL,
           "logged '%s' does not carry the error '%s'", cap.last, xattn_last_error());
    /* a descriptor error reaches the callback with its field name */
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    st = xattn_attention(ctx, &d, NULL);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "empty descriptor: %s", xattn_status_name(st));
    EXPECT(strstr(cap.last, "q.buffer") != NULL, "logged: %s", cap.last);
    /* successes log no error */
    before = cap.count;
    xattn_mem_stats ms;
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &ms));
    EXPECT(cap.count == before, "a success logged an error");
    /* info messages appear at INFO */
    memset(&cap, 0, sizeof cap);
    xattn_set_log_callback(log_fn, &cap, XATTN_LOG_DEBUG);
    xattn_ctx *c2 = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &c2));
    EXPECT(cap.count >= 1, "no info message on context creation at DEBUG level");
    xattn_ctx_destroy(c2);
    /* NULL restores the default: our callback is no longer called */
    xattn_set_log_callback(NULL, NULL, XATTN_LOG_ERROR);
    before = cap.count;
    st = xattn_buffer_alloc(ctx, 0, &b);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "alloc 0");
    EXPECT(cap.count == before, "callback called after being removed");
    xattn_ctx_destroy(ctx);
}

/* ---- f16 / bf16 conversions --------------------------------------------------- */

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Round-to-nearest-even of x onto a format with `mant` fraction bits, minimum
 * normal exponent emin and largest finite value maxv, in double (own code). */
static double rne(double x, int mant, int emin, double maxv)
{
    if (x == 0 || isnan(x) || isinf(x))
        return x;
    int e;
    frexp(x, &e);
    e -= 1;
    if (e < emin)
        e = emin;
    double q = ldexp(1.0, e - mant);
    double r = nearbyint(x / q) * q;
    /* IEEE overflow: round to inf when |x| >= maxv + half an ulp of maxv */
    if (fabs(r) > maxv)
        return copysign(INFINITY, x);
    return r;
}

static void test_f16(void)
{
    static const struct {
        float x;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.5f, 0x3800},
        {65504.0f, 0x7bff},
        {65519.99f, 0x7bff},
        {65520.0f, 0x7c00}, /* ties to even away to inf */
        {1e9f, 0x7c00},
        {-1e9f, 0xfc00},
        {0x1p-14f, 0x0400},        /* smallest normal */
        {0x1p-24f, 0x0001},        /* smallest subnormal */
        {0x1p-25f, 0x0000},        /* tie -> even (0) */
        {0x1.8p-25f, 0x0001},      /* above the tie */
        {0x3p-24f, 0x0003},        /* subnormal */
        {0x1.ffcp-15f, 0x0400},    /* 1023.5 subnormal ulps: tie -> even (the smallest normal) */
        {0x1.ff8p-15f, 0x03ff},    /* the largest subnormal */
        {1.0f + 0x1p-11f, 0x3c00}, /* tie -> even (down) */
        {1.0f + 0x3p-11f, 0x3c02}, /* tie -> even (up) */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},
        {0.333333343f, 0x3555},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = xattn_f32_to_f16(cases[i].x);
        EXPECT(h == cases[i].h, "f32_to_f16(%a) = 0x%04x, expected 0x%04x", (double)cases[i].x, h,
               cases[i].h);
    }
    EXPECT(xattn_f32_to_f16(INFINITY) == 0x7c00, "inf");
    EXPECT(xattn_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    uint16_t hn = xattn_f32_to_f16(NAN);
    EXPECT((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff), "NaN -> 0x%04x", hn);
    hn = xattn_f32_to_f16(bits_f32(0x7f800001u)); /* NaN with only a low payload bit */
    EXPECT((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff), "low-payload NaN -> 0x%04x (inf?)", hn);
    EXPECT(xattn_f16_to_f32(0x0001) == 0x1p-24f, "subnormal decode");
    EXPECT(xattn_f16_to_f32(0x03ff) == 0x3ffp-24f, "largest subnormal decode");
    EXPECT(xattn_f16_to_f32(0x7bff) == 65504.0f, "max decode");
    EXPECT(isinf(xattn_f16_to_f32(0xfc00)) && xattn_f16_to_f32(0xfc00) < 0, "-inf decode");
    EXPECT(isnan(xattn_f16_to_f32(0x7e00)), "NaN decode");
    EXPECT(signbit(xattn_f16_to_f32(0x8000)) && xattn_f16_to_f32(0x8000) == 0, "-0 decode");

    /* every f16 value survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = xattn_f16_to_f32((uint16_t)h);
        uint16_t back = xattn_f32_to_f16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? !(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h)
            if (bad++ < 5)
                printf("  f16 0x%04x -> %a -> 0x%04x\n", h, (double)f, back);
    }
    EXPECT(bad == 0, "%d f16 values do not round-trip", bad);

    /* random f32 values (all exponents) against an independent rounding */
    uint64_t s = 0x12345678u;
    bad = 0;
    for (int i = 0; i < 400000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        /* bias towards the f16 range: exponent in [127-30, 127+17] */
        if (i & 1)
            u = (u & 0x807fffffu) | ((uint32_t)(97 + (s >> 20) % 48) << 23);
        float x = bits_f32(u);
        if (isnan(x))
            continue;
        double want = rne((double)x, 10, -14, 65504.0);
        float got = xattn_f16_to_f32(xattn_f32_to_f16(x));
        if (!(got == (float)want) || signbit(got) != signbit(x))
            if (bad++ < 5)
                printf("  f16(%a) = %a, expected %a\n", (double)x, (double)got, want);
    }
    EXPECT(bad == 0, "%d f32 -> f16 conversions differ from round-to-nearest-even", bad);
}

static void test_bf16(void)
{
    EXPECT(xattn_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    EXPECT(xattn_f32_to_bf16(-2.0f) == 0xc000, "-2.0");
    EXPECT(xattn_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie -> even (down)");
    EXPECT(xattn_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82, "tie -> even (up)");
    EXPECT(xattn_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81, "above the tie");
    EXPECT(xattn_f32_to_bf16(FLT_MAX) == 0x7f80, "FLT_MAX rounds to inf: 0x%04x",
           xattn_f32_to_bf16(FLT_MAX));
    EXPECT(xattn_f32_to_bf16(INFINITY) == 0x7f80, "inf");
    EXPECT(xattn_f32_to_bf16(-INFINITY) == 0xff80, "-inf");
    EXPECT(xattn_f32_to_bf16(-0.0f) == 0x8000, "-0");
    EXPECT(xattn_f32_to_bf16(0x1p-133f) == 0x0001, "subnormal bf16");
    uint16_t n = xattn_f32_to_bf16(bits_f32(0x7f800001u)); /* would truncate to inf */
    EXPECT((n & 0x7f80) == 0x7f80 && (n & 0x7f), "low-payload NaN -> 0x%04x", n);
    n = xattn_f32_to_bf16(bits_f32(0xffc00000u));
    EXPECT((n & 0x7f80) == 0x7f80 && (n & 0x7f) && (n & 0x8000), "-NaN -> 0x%04x", n);
    EXPECT(xattn_bf16_to_f32(0x3f80) == 1.0f, "decode 1");
    EXPECT(isnan(xattn_bf16_to_f32(0x7fc0)), "decode NaN");
    EXPECT(xattn_bf16_to_f32(0x0001) == 0x1p-133f, "decode subnormal");

    int bad = 0, bad_decode = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = xattn_bf16_to_f32((uint16_t)h);
        if (f32_bits(f) != h << 16 && bad_decode++ < 5)
            printf("  bf16 0x%04x decodes to 0x%08x\n", h, f32_bits(f));
        uint16_t back = xattn_f32_to_bf16(f);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !((back & 0x7f80) == 0x7f80 && (back & 0x7f)) : back != h)
            if (bad++ < 5)
                printf("  bf16 0x%04x -> 0x%04x\n", h, back);
    }
    EXPECT(bad_decode == 0, "%d bf16 values decode wrongly", bad_decode);
    EXPECT(bad == 0, "%d bf16 values do not round-trip", bad);

    uint64_t s = 0x9abcdefu;
    bad = 0;
    for (int i = 0; i < 400000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float x = bits_f32((uint32_t)(s >> 32));
        if (isnan(x))
            continue;
        double want = rne((double)x, 7, -126, 3.38953138925153547590e38);
        float got = xattn_bf16_to_f32(xattn_f32_to_bf16(x));
        if (!(got == (float)want) || signbit(got) != signbit(x))
            if (bad++ < 5)
                printf("  bf16(%a) = %a, expected %a\n", (double)x, (double)got, want);
    }
    EXPECT(bad == 0, "%d f32 -> bf16 conversions differ from round-to-nearest-even", bad);
}

int main(void)
{
    printf("test_api: xattn %s\n", xattn_version_string());
    test_version();
    test_status_strings();
    test_names();
    test_fp8();
    test_q8_0();
    test_devices();
    test_contexts();
    test_options();
    test_buffers();
    test_wrap_host();
    test_memory();
    test_log();
    test_reference();
    test_f16();
    test_bf16();
    return xattn_test_summary();
}
