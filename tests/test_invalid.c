/*
 * test_invalid: one test per bad-input rule of the attention descriptor.
 *
 * Each test builds an otherwise valid descriptor, breaks one thing, and checks
 * that xattn_attention_check and xattn_attention both return the exact status
 * and that xattn_last_error() names the field ("q.shape[3]", "seqlens_k[1]").
 * After every bad call a valid call on the same context must succeed (the
 * context stays usable) and leave an empty error message.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_test.h"

/* The fixture: B=2, Sq=8, Sk=12, Hq=4, Hkv=2, D=Dv=16, f32, BSHD, with LSE.
 * Buffers are large (1 MiB) so that reshaped views stay inside them and each
 * test trips only the rule it is about. */
enum { B = 2, SQ = 8, SK = 12, HQ = 4, HKV = 2, D = 16, DV = 16 };
#define BUF_BYTES (1u << 20)

typedef struct fixture {
    xattn_ctx *ctx, *other;
    xattn_buffer *q, *k, *v, *o, *lse, *bias, *foreign;
    int32_t seqlens_q[B], seqlens_k[B];
    int32_t cu_q[B + 1], cu_k[B + 1];
    float slopes[HQ];
    int32_t table[B * 4]; /* a paged cache's block table: 4 pages per sequence */
    int32_t cache_len[B]; /* seqlens_k before an append */
} fixture;

static xattn_tensor bshd(xattn_buffer *buf, xattn_dtype dt, int64_t b, int64_t s, int64_t h,
                         int64_t d)
{
    return xattn_tensor_bshd(buf, 0, dt, b, s, h, d);
}

static void valid_desc(fixture *f, xattn_attn_desc *d)
{
    xattn_attn_desc_init(d);
    d->q = bshd(f->q, XATTN_DTYPE_F32, B, SQ, HQ, D);
    d->k = bshd(f->k, XATTN_DTYPE_F32, B, SK, HKV, D);
    d->v = bshd(f->v, XATTN_DTYPE_F32, B, SK, HKV, DV);
    d->o = bshd(f->o, XATTN_DTYPE_F32, B, SQ, HQ, DV);
    xattn_tensor l = {f->lse, 0, XATTN_DTYPE_F32, {B, HQ, SQ, 1}, {HQ * SQ, SQ, 1, 1}};
    d->lse = l;
}

/* Packed variant: 2 sequences in [1, T, H, D] tensors. */
static void valid_varlen_desc(fixture *f, xattn_attn_desc *d)
{
    xattn_attn_desc_init(d);
    f->cu_q[0] = 0, f->cu_q[1] = 5, f->cu_q[2] = 8;
    f->cu_k[0] = 0, f->cu_k[1] = 7, f->cu_k[2] = 12;
    d->q = bshd(f->q, XATTN_DTYPE_F32, 1, SQ, HQ, D);
    d->k = bshd(f->k, XATTN_DTYPE_F32, 1, SK, HKV, D);
    d->v = bshd(f->v, XATTN_DTYPE_F32, 1, SK, HKV, DV);
    d->o = bshd(f->o, XATTN_DTYPE_F32, 1, SQ, HQ, DV);
    d->cu_seqlens_q = f->cu_q;
    d->cu_seqlens_k = f->cu_k;
    d->num_seqs = B;
}

static void with_bias(fixture *f, xattn_attn_desc *d, xattn_dtype dt, int64_t b, int64_t h,
                      int64_t sq, int64_t sk)
{
    xattn_tensor t = {f->bias, 0, dt, {b, h, sq, sk}, {h * sq * sk, sq * sk, sk, 1}};
    d->bias = t;
}

/* Attention sinks in the bias buffer: [1, 1, h, 1] f32 from byte `off`. */
static void with_sinks(fixture *f, xattn_attn_desc *d, xattn_dtype dt, int64_t h, size_t off)
{
    xattn_tensor t = {f->bias, off, dt, {1, 1, h, 1}, {h, h, 1, 1}};
    d->sinks = t;
}

/* A paged cache: k/v pools of NP pages of PS tokens in the k and v buffers,
 * seqlens_k = {12, 10} (3 pages each); the table's last column is unused and
 * holds a page index no check may read. */
enum { NP = 6, PS = 4, MP = 4 };
static void with_paged(fixture *f, xattn_attn_desc *d)
{
    static const int32_t t[B * MP] = {0, 1, 2, 999, 5, 3, 4, -7};
    memcpy(f->table, t, sizeof t);
    d->k = bshd(f->k, XATTN_DTYPE_F32, NP, PS, HKV, D);
    d->v = bshd(f->v, XATTN_DTYPE_F32, NP, PS, HKV, DV);
    d->block_table = f->table;
    d->max_pages_per_seq = MP;
    d->seqlens_k = f->seqlens_k;
}

/* An append of n tokens per sequence: k_new/v_new in the bias buffer, the
 * caches holding seqlens_k = {12 - n, 10 - n}. */
static void with_append(fixture *f, xattn_attn_desc *d, int64_t n)
{
    for (int b = 0; b < B; b++)
        f->cache_len[b] = f->seqlens_k[b] - (int32_t)n;
    d->k_new = xattn_tensor_bshd(f->bias, 0, XATTN_DTYPE_F32, B, n, HKV, D);
    d->v_new = xattn_tensor_bshd(f->bias, 1u << 16, XATTN_DTYPE_F32, B, n, HKV, DV);
    d->seqlens_k = f->cache_len;
}

/* An fp8 cache's scales: f32 [1, 1, Hkv, 1] in the bias buffer from byte `off`. */
static xattn_tensor scale_view(fixture *f, size_t off)
{
    xattn_tensor t = {f->bias, off, XATTN_DTYPE_F32, {1, 1, HKV, 1}, {HKV, HKV, 1, 1}};
    return t;
}

/* q8_0 K/V (blocks of 32 along the head dim): q, k, v, o with D = Dv = 32. */
enum { DQ8 = 32, Q8_SPAN = B * SK * HKV * DQ8 / 32 * 34 }; /* k's bytes: 48 blocks */
static void with_q8(fixture *f, xattn_attn_desc *d)
{
    d->q = bshd(f->q, XATTN_DTYPE_F32, B, SQ, HQ, DQ8);
    d->k = bshd(f->k, XATTN_DTYPE_Q8_0, B, SK, HKV, DQ8);
    d->v = bshd(f->v, XATTN_DTYPE_Q8_0, B, SK, HKV, DQ8);
    d->o = bshd(f->o, XATTN_DTYPE_F32, B, SQ, HQ, DQ8);
}

/* A q8_0 append of n tokens: k_new, v_new in the bias buffer (v_new from a block). */
static void with_q8_append(fixture *f, xattn_attn_desc *d, int64_t n)
{
    with_q8(f, d);
    with_append(f, d, n);
    d->k_new = xattn_tensor_bshd(f->bias, 0, XATTN_DTYPE_Q8_0, B, n, HKV, DQ8);
    d->v_new = xattn_tensor_bshd(f->bias, 34 * 2000, XATTN_DTYPE_Q8_0, B, n, HKV, DQ8);
}

/* A valid call must work on the context and clear the error message. */
static void expect_usable(fixture *f, const char *after)
{
    xattn_attn_desc d;
    valid_desc(f, &d);
    d.algo = XATTN_ALGO_FLASH;
    xattn_status st = xattn_attention(f->ctx, &d, NULL);
    EXPECT(st == XATTN_STATUS_OK, "after '%s': a valid call returned %s: %s", after,
           xattn_status_name(st), xattn_last_error());
    if (st == XATTN_STATUS_OK)
        EXPECT(xattn_last_error()[0] == '\0', "after '%s': error message left after success: %s",
               after, xattn_last_error());
}

static void expect_bad(fixture *f, const char *name, const xattn_attn_desc *d, xattn_status want,
                       const char *field)
{
    xattn_status st = xattn_attention_check(f->ctx, d);
    EXPECT(st == want, "[%s] xattn_attention_check returned %s, expected %s (message: %s)", name,
           xattn_status_name(st), xattn_status_name(want), xattn_last_error());
    EXPECT(strstr(xattn_last_error(), field) != NULL,
           "[%s] check: message does not name '%s': \"%s\"", name, field, xattn_last_error());
    st = xattn_attention(f->ctx, d, NULL);
    EXPECT(st == want, "[%s] xattn_attention returned %s, expected %s (message: %s)", name,
           xattn_status_name(st), xattn_status_name(want), xattn_last_error());
    EXPECT(strstr(xattn_last_error(), field) != NULL,
           "[%s] attention: message does not name '%s': \"%s\"", name, field, xattn_last_error());
    xattn_run_info info;
    st = xattn_attention(f->ctx, d, &info);
    EXPECT(st == want, "[%s] xattn_attention with info returned %s", name, xattn_status_name(st));
    expect_usable(f, name);
}

/* BAD(name, status, field, statements that break the descriptor `d`) */
#define BAD(name, status, field, ...)                                                              \
    do {                                                                                           \
        xattn_attn_desc d;                                                                         \
        valid_desc(&f, &d);                                                                        \
        __VA_ARGS__;                                                                               \
        expect_bad(&f, name, &d, XATTN_STATUS_##status, field);                                    \
    } while (0)
#define BAD_VARLEN(name, status, field, ...)                                                       \
    do {                                                                                           \
        xattn_attn_desc d;                                                                         \
        valid_varlen_desc(&f, &d);                                                                 \
        __VA_ARGS__;                                                                               \
        expect_bad(&f, name, &d, XATTN_STATUS_##status, field);                                    \
    } while (0)
/* GOOD(name, statements): edge cases that are valid. */
#define GOOD(name, ...)                                                                            \
    do {                                                                                           \
        xattn_attn_desc d;                                                                         \
        valid_desc(&f, &d);                                                                        \
        __VA_ARGS__;                                                                               \
        xattn_status st = xattn_attention_check(f.ctx, &d);                                        \
        EXPECT(st == XATTN_STATUS_OK, "[%s] valid descriptor rejected: %s: %s", name,              \
               xattn_status_name(st), xattn_last_error());                                         \
        st = xattn_attention(f.ctx, &d, NULL);                                                     \
        EXPECT(st == XATTN_STATUS_OK, "[%s] valid call failed: %s: %s", name,                      \
               xattn_status_name(st), xattn_last_error());                                         \
    } while (0)

static int setup(fixture *f)
{
    memset(f, 0, sizeof *f);
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &f->ctx);
    if (st == XATTN_STATUS_OK)
        st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &f->other);
    xattn_buffer **bufs[7] = {&f->q, &f->k, &f->v, &f->o, &f->lse, &f->bias, &f->foreign};
    float *fill = malloc(BUF_BYTES);
    if (!fill)
        return 0;
    for (size_t i = 0; i < BUF_BYTES / sizeof(float); i++)
        fill[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int i = 0; i < 7 && st == XATTN_STATUS_OK; i++) {
        st = xattn_buffer_alloc(i == 6 ? f->other : f->ctx, BUF_BYTES, bufs[i]);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_write(*bufs[i], 0, fill, BUF_BYTES);
    }
    free(fill);
    if (st != XATTN_STATUS_OK) {
        printf("setup failed: %s: %s\n", xattn_status_name(st), xattn_last_error());
        return 0;
    }
    for (int b = 0; b < B; b++) {
        f->seqlens_q[b] = SQ - b;
        f->seqlens_k[b] = SK - 2 * b;
    }
    for (int h = 0; h < HQ; h++)
        f->slopes[h] = 0.5f / (float)(h + 1);
    return 1;
}

static void teardown(fixture *f)
{
    xattn_buffer *bufs[7] = {f->q, f->k, f->v, f->o, f->lse, f->bias, f->foreign};
    for (int i = 0; i < 7; i++)
        xattn_buffer_free(bufs[i]);
    xattn_ctx_destroy(f->ctx);
    xattn_ctx_destroy(f->other);
}

int main(void)
{
    fixture f;
    if (!setup(&f)) {
        printf("0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    expect_usable(&f, "setup");

    /* ---- NULL arguments ---- */
    {
        xattn_attn_desc d;
        valid_desc(&f, &d);
        xattn_status st = xattn_attention(NULL, &d, NULL);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "NULL ctx: %s", xattn_status_name(st));
        EXPECT(strstr(xattn_last_error(), "ctx") != NULL, "NULL ctx message: %s",
               xattn_last_error());
        st = xattn_attention_check(NULL, &d);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "NULL ctx (check): %s", xattn_status_name(st));
        st = xattn_attention(f.ctx, NULL, NULL);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "NULL desc: %s", xattn_status_name(st));
        EXPECT(strstr(xattn_last_error(), "desc") != NULL, "NULL desc message: %s",
               xattn_last_error());
        st = xattn_attention_check(f.ctx, NULL);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT, "NULL desc (check): %s", xattn_status_name(st));
        expect_usable(&f, "NULL ctx/desc");
    }
    BAD("q.buffer NULL", INVALID_ARGUMENT, "q.buffer", d.q.buffer = NULL);
    BAD("k.buffer NULL", INVALID_ARGUMENT, "k.buffer", d.k.buffer = NULL);
    BAD("v.buffer NULL", INVALID_ARGUMENT, "v.buffer", d.v.buffer = NULL);
    BAD("o.buffer NULL", INVALID_ARGUMENT, "o.buffer", d.o.buffer = NULL);

    /* ---- struct_size ---- */
    BAD("struct_size 0", INVALID_ARGUMENT, "struct_size", d.struct_size = 0);
    /* A larger descriptor is a newer caller's (test_abi); one far larger is
     * garbage, refused before a byte past the library's is read. */
    BAD("struct_size far too large", INVALID_ARGUMENT, "struct_size",
        d.struct_size = (size_t)1 << 40);

    /* ---- dtypes ---- */
    BAD("q.dtype invalid", INVALID_DTYPE, "q.dtype", d.q.dtype = (xattn_dtype)7);
    BAD("k.dtype negative", INVALID_DTYPE, "k.dtype", d.k.dtype = (xattn_dtype)-1);
    BAD("v.dtype = COUNT", INVALID_DTYPE, "v.dtype", d.v.dtype = XATTN_DTYPE_COUNT);
    BAD("o.dtype != q.dtype", INVALID_DTYPE, "o.dtype", d.o.dtype = XATTN_DTYPE_F16);
    BAD("v.dtype != k.dtype", INVALID_DTYPE, "v.dtype", d.v.dtype = XATTN_DTYPE_BF16);
    BAD("bias bf16", INVALID_DTYPE, "bias.dtype",
        with_bias(&f, &d, XATTN_DTYPE_BF16, 1, 1, SQ, SK));
    BAD("bias invalid dtype", INVALID_DTYPE, "bias.dtype",
        with_bias(&f, &d, (xattn_dtype)9, 1, 1, SQ, SK));
    BAD("lse f16", INVALID_DTYPE, "lse.dtype", d.lse.dtype = XATTN_DTYPE_F16);

    /* ---- shapes ---- */
    BAD("B = 0", INVALID_SHAPE, "q.shape[0]", d.q.shape[0] = 0);
    BAD("B < 0", INVALID_SHAPE, "q.shape[0]", d.q.shape[0] = -2);
    BAD("Sq < 0", INVALID_SHAPE, "q.shape[1]", d.q.shape[1] = -1);
    BAD("Hq = 0", INVALID_SHAPE, "q.shape[2]", d.q.shape[2] = 0);
    BAD("Hkv = 0", INVALID_SHAPE, "k.shape[2]", d.k.shape[2] = 0; d.v.shape[2] = 0);
    BAD("D = 0", INVALID_SHAPE, "q.shape[3]", d.q.shape[3] = 0; d.k.shape[3] = 0);
    BAD("Dv = 0", INVALID_SHAPE, "v.shape[3]", d.v.shape[3] = 0; d.o.shape[3] = 0);
    BAD("D = 257", INVALID_SHAPE, "q.shape[3]", d.q = bshd(f.q, XATTN_DTYPE_F32, B, SQ, HQ, 257);
        d.k = bshd(f.k, XATTN_DTYPE_F32, B, SK, HKV, 257));
    BAD("Dv = 300", INVALID_SHAPE, "v.shape[3]", d.v = bshd(f.v, XATTN_DTYPE_F32, B, SK, HKV, 300);
        d.o = bshd(f.o, XATTN_DTYPE_F32, B, SQ, HQ, 300));
    BAD("k.D != q.D", INVALID_SHAPE, "k.shape[3]",
        d.k = bshd(f.k, XATTN_DTYPE_F32, B, SK, HKV, D + 1));
    BAD("o.Dv != v.Dv", INVALID_SHAPE, "o.shape[3]",
        d.o = bshd(f.o, XATTN_DTYPE_F32, B, SQ, HQ, DV + 8));
    BAD("v heads != k heads", INVALID_SHAPE, "v.shape[2]",
        d.v = bshd(f.v, XATTN_DTYPE_F32, B, SK, HKV + 1, DV));
    BAD("o heads != q heads", INVALID_SHAPE, "o.shape[2]",
        d.o = bshd(f.o, XATTN_DTYPE_F32, B, SQ, HQ * 2, DV));
    BAD("Hq % Hkv != 0", INVALID_SHAPE, "k.shape[2]", d.k = bshd(f.k, XATTN_DTYPE_F32, B, SK, 3, D);
        d.v = bshd(f.v, XATTN_DTYPE_F32, B, SK, 3, DV));
    BAD("Hkv > Hq", INVALID_SHAPE, "k.shape[2]", d.k = bshd(f.k, XATTN_DTYPE_F32, B, SK, 8, D);
        d.v = bshd(f.v, XATTN_DTYPE_F32, B, SK, 8, DV));
    BAD("k batch mismatch", INVALID_SHAPE, "k.shape[0]",
        d.k = bshd(f.k, XATTN_DTYPE_F32, B + 1, SK, HKV, D));
    BAD("o batch mismatch", INVALID_SHAPE, "o.shape[0]",
        d.o = bshd(f.o, XATTN_DTYPE_F32, 1, SQ, HQ, DV));
    BAD("v length mismatch", INVALID_SHAPE, "v.shape[1]",
        d.v = bshd(f.v, XATTN_DTYPE_F32, B, SK - 1, HKV, DV));
    BAD("o length mismatch", INVALID_SHAPE, "o.shape[1]",
        d.o = bshd(f.o, XATTN_DTYPE_F32, B, SQ + 1, HQ, DV));

    /* ---- strides, views, buffers ---- */
    BAD("negative stride", INVALID_STRIDE, "k.strides[1]", d.k.strides[1] = -HKV * D);
    BAD("negative stride (d)", INVALID_STRIDE, "q.strides[3]", d.q.strides[3] = -1);
    BAD("view overruns buffer (offset)", OUT_OF_BOUNDS, "q.buffer", d.q.offset = BUF_BYTES - 64);
    BAD("view overruns buffer (strides)", OUT_OF_BOUNDS, "v.buffer",
        d.v.strides[0] = BUF_BYTES / 4);
    BAD("view overruns buffer (o)", OUT_OF_BOUNDS, "o.buffer",
        d.o = bshd(f.o, XATTN_DTYPE_F32, B, 64, 64, 256));
    BAD("misaligned offset f32", INVALID_ARGUMENT, "q.offset", d.q.offset = 2);
    BAD("misaligned offset f16", INVALID_ARGUMENT, "k.offset", d.k.dtype = XATTN_DTYPE_F16;
        d.v.dtype = XATTN_DTYPE_F16; d.k.offset = 3);
    BAD("buffer of another context", WRONG_CONTEXT, "k.buffer", d.k.buffer = f.foreign);
    BAD("o buffer of another context", WRONG_CONTEXT, "o.buffer", d.o.buffer = f.foreign);
    BAD("shape 2^40 x 2^40", SIZE_OVERFLOW, "q.shape", d.q.shape[0] = (int64_t)1 << 40;
        d.q.shape[1] = (int64_t)1 << 40; d.q.strides[0] = 0; d.q.strides[1] = 0);
    BAD("stride times extent overflows", SIZE_OVERFLOW, "k.strides[1]",
        d.k.strides[1] = (int64_t)1 << 62);

    /* ---- padded lengths ---- */
    BAD("seqlens_q[1] > Sq", INVALID_LENGTHS, "seqlens_q[1]", f.seqlens_q[1] = SQ + 1;
        d.seqlens_q = f.seqlens_q);
    BAD("seqlens_q[0] < 0", INVALID_LENGTHS, "seqlens_q[0]", f.seqlens_q[0] = -1;
        f.seqlens_q[1] = SQ; d.seqlens_q = f.seqlens_q);
    BAD("seqlens_k[1] > Sk", INVALID_LENGTHS, "seqlens_k[1]", f.seqlens_q[0] = SQ;
        f.seqlens_k[1] = SK + 5; d.seqlens_k = f.seqlens_k);
    BAD("seqlens_k[1] < 0", INVALID_LENGTHS, "seqlens_k[1]", f.seqlens_k[1] = -3;
        d.seqlens_k = f.seqlens_k);
    f.seqlens_k[1] = SK;

    /* ---- packed lengths ---- */
    BAD_VARLEN("cu_seqlens_q[0] != 0", INVALID_LENGTHS, "cu_seqlens_q[0]", f.cu_q[0] = 1);
    BAD_VARLEN("cu_seqlens_k decreasing", INVALID_LENGTHS, "cu_seqlens_k[2]", f.cu_k[2] = 6);
    BAD_VARLEN("cu_seqlens_q beyond tokens", INVALID_LENGTHS, "cu_seqlens_q[2]",
               f.cu_q[2] = SQ + 1);
    BAD_VARLEN("cu_seqlens_k beyond tokens", INVALID_LENGTHS, "cu_seqlens_k[2]",
               f.cu_k[2] = SK + 1);
    BAD_VARLEN("only cu_seqlens_q", INVALID_ARGUMENT, "cu_seqlens_k", d.cu_seqlens_k = NULL);
    BAD_VARLEN("only cu_seqlens_k", INVALID_ARGUMENT, "cu_seqlens_q", d.cu_seqlens_q = NULL);
    BAD_VARLEN("seqlens and cu_seqlens", INVALID_ARGUMENT, "seqlens_q", d.seqlens_q = f.seqlens_q);
    BAD_VARLEN("num_seqs < 0", INVALID_ARGUMENT, "num_seqs", d.num_seqs = -1);
    BAD_VARLEN("varlen batch != 1", INVALID_SHAPE, "q.shape[0]",
               d.q = bshd(f.q, XATTN_DTYPE_F32, 2, SQ, HQ, D));
    BAD_VARLEN("varlen bias batch", INVALID_SHAPE, "bias.shape[0]",
               with_bias(&f, &d, XATTN_DTYPE_F32, 3, 1, SQ, SK));

    /* ---- scalars ---- */
    BAD("softcap < 0", INVALID_ARGUMENT, "softcap", d.softcap = -1.0f);
    BAD("softcap NaN", INVALID_ARGUMENT, "softcap", d.softcap = NAN);
    BAD("softcap inf", INVALID_ARGUMENT, "softcap", d.softcap = INFINITY);
    BAD("scale NaN", INVALID_ARGUMENT, "scale", d.scale = NAN);
    BAD("scale inf", INVALID_ARGUMENT, "scale", d.scale = -INFINITY);
    BAD("alibi slope NaN", INVALID_ARGUMENT, "alibi_slopes[2]", f.slopes[2] = NAN;
        d.alibi_slopes = f.slopes);
    BAD("alibi slope inf", INVALID_ARGUMENT, "alibi_slopes[0]", f.slopes[2] = 0.1f;
        f.slopes[0] = INFINITY; d.alibi_slopes = f.slopes);
    f.slopes[0] = 0.5f;
    BAD("causal = 2", INVALID_ARGUMENT, "causal", d.causal = 2);
    BAD("align = 7", INVALID_ARGUMENT, "align", d.align = (xattn_align)7);
    BAD("algo = COUNT", INVALID_ARGUMENT, "algo", d.algo = XATTN_ALGO_COUNT);
    BAD("algo = -1", INVALID_ARGUMENT, "algo", d.algo = (xattn_algo)-1);
    BAD("num_splits < 0", INVALID_ARGUMENT, "num_splits", d.num_splits = -1);

    /* ---- bias and lse shapes ---- */
    BAD("bias batch 3 of 2", INVALID_SHAPE, "bias.shape[0]",
        with_bias(&f, &d, XATTN_DTYPE_F32, 3, 1, SQ, SK));
    BAD("bias heads 2 of 4", INVALID_SHAPE, "bias.shape[1]",
        with_bias(&f, &d, XATTN_DTYPE_F32, 1, 2, SQ, SK));
    BAD("bias rows < Sq", INVALID_SHAPE, "bias.shape[2]",
        with_bias(&f, &d, XATTN_DTYPE_F32, B, HQ, SQ - 1, SK));
    BAD("bias cols < Sk", INVALID_SHAPE, "bias.shape[3]",
        with_bias(&f, &d, XATTN_DTYPE_F16, 1, HQ, SQ, SK - 1));
    BAD("bias overruns buffer", OUT_OF_BOUNDS, "bias.buffer",
        with_bias(&f, &d, XATTN_DTYPE_F32, B, HQ, 4096, 4096));
    BAD("lse batch", INVALID_SHAPE, "lse.shape[0]", d.lse.shape[0] = 1);
    BAD("lse heads", INVALID_SHAPE, "lse.shape[1]", d.lse.shape[1] = HKV);
    BAD("lse rows", INVALID_SHAPE, "lse.shape[2]", d.lse.shape[2] = SQ + 1);
    BAD("lse last dim", INVALID_SHAPE, "lse.shape[3]", d.lse.shape[3] = 2);
    BAD("lse negative stride", INVALID_STRIDE, "lse.strides[2]", d.lse.strides[2] = -1);
    BAD("lse buffer of another context", WRONG_CONTEXT, "lse.buffer", d.lse.buffer = f.foreign);

    /* ---- attention sinks ---- */
    BAD("sinks f16", INVALID_DTYPE, "sinks.dtype", with_sinks(&f, &d, XATTN_DTYPE_F16, HQ, 0));
    BAD("sinks per KV head", INVALID_SHAPE, "sinks.shape[2]",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HKV, 0));
    BAD("sinks batch 2", INVALID_SHAPE, "sinks.shape[0]",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.shape[0] = 2);
    BAD("sinks last dim 2", INVALID_SHAPE, "sinks.shape[3]",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.shape[3] = 2);
    BAD("sinks negative stride", INVALID_STRIDE, "sinks.strides[2]",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.strides[2] = -1);
    BAD("sinks overrun buffer", OUT_OF_BOUNDS, "sinks.buffer",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, BUF_BYTES - 8));
    BAD("sinks offset unaligned", INVALID_ARGUMENT, "sinks.offset",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 2));
    BAD("sinks buffer of another context", WRONG_CONTEXT, "sinks.buffer",
        with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.buffer = f.foreign);
    BAD("sinks overlap o", INVALID_ARGUMENT, "sinks", with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.buffer = f.o);
    BAD("sinks overlap lse", INVALID_ARGUMENT, "sinks", with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0);
        d.sinks.buffer = f.lse);
    GOOD("sinks", with_sinks(&f, &d, XATTN_DTYPE_F32, HQ, 0); d.seqlens_q = f.seqlens_q;
         d.seqlens_k = f.seqlens_k);

    /* ---- paged KV caches ---- */
    BAD("paged page out of range", OUT_OF_BOUNDS, "block_table[1][2]", with_paged(&f, &d);
        f.table[MP + 2] = NP);
    BAD("paged negative page", OUT_OF_BOUNDS, "block_table[0][0]", with_paged(&f, &d);
        f.table[0] = -1);
    BAD("paged table too short", INVALID_LENGTHS, "seqlens_k[0]", with_paged(&f, &d);
        d.max_pages_per_seq = 2);
    BAD("paged max_pages_per_seq 0", INVALID_ARGUMENT, "max_pages_per_seq", with_paged(&f, &d);
        d.max_pages_per_seq = 0);
    BAD("paged without seqlens_k", INVALID_ARGUMENT, "seqlens_k", with_paged(&f, &d);
        d.seqlens_k = NULL);
    BAD("paged negative length", INVALID_LENGTHS, "seqlens_k[1]", with_paged(&f, &d);
        f.cache_len[0] = 4; f.cache_len[1] = -1; d.seqlens_k = f.cache_len);
    BAD("paged v pool of other pages", INVALID_SHAPE, "v.shape[0]", with_paged(&f, &d);
        d.v.shape[0] = NP - 1);
    BAD("paged v page size", INVALID_SHAPE, "v.shape[1]", with_paged(&f, &d); d.v.shape[1] = 2);
    BAD("paged pool overruns buffer", OUT_OF_BOUNDS, "k", with_paged(&f, &d);
        d.k.shape[0] = BUF_BYTES / (PS * HKV * D * 4) + 1);
    BAD_VARLEN("paged packed batch", UNSUPPORTED, "block_table", with_paged(&f, &d);
               d.seqlens_k = NULL);
    GOOD("paged (unused table entries are not read)", with_paged(&f, &d));

    /* ---- append (k_new / v_new) ---- */
    BAD("append past the cache", INVALID_LENGTHS, "seqlens_k[0]", with_append(&f, &d, 2);
        f.cache_len[0] = SK - 1);
    BAD("append without seqlens_k", INVALID_ARGUMENT, "seqlens_k", with_append(&f, &d, 2);
        d.seqlens_k = NULL);
    BAD("append k_new only", INVALID_ARGUMENT, "v_new.buffer", with_append(&f, &d, 2);
        d.v_new.buffer = NULL);
    BAD("append dtype", INVALID_DTYPE, "k_new.dtype", with_append(&f, &d, 2);
        d.k_new.dtype = XATTN_DTYPE_F16);
    BAD("append heads", INVALID_SHAPE, "k_new.shape[2]", with_append(&f, &d, 2);
        d.k_new.shape[2] = HQ);
    BAD("append v_new length", INVALID_SHAPE, "v_new.shape[1]", with_append(&f, &d, 2);
        d.v_new.shape[1] = 3);
    BAD("append v_new batch", INVALID_SHAPE, "v_new.shape[0]", with_append(&f, &d, 2);
        d.v_new.shape[0] = 1);
    BAD("append k_new in the cache", INVALID_ARGUMENT, "k_new", with_append(&f, &d, 2);
        d.k_new.buffer = f.k);
    BAD("append k and v one memory", INVALID_ARGUMENT, "v", with_append(&f, &d, 2);
        d.v.buffer = f.k);
    BAD("append cache batch stride 0", INVALID_STRIDE, "k.strides[0]", with_append(&f, &d, 2);
        d.k.strides[0] = 0);
    BAD("append k_new overlaps o", INVALID_ARGUMENT, "k_new", with_append(&f, &d, 2);
        d.k_new.buffer = f.o);
    BAD_VARLEN("append packed batch", UNSUPPORTED, "k_new",
               d.k_new = xattn_tensor_bshd(f.bias, 0, XATTN_DTYPE_F32, 1, 2, HKV, D);
               d.v_new = xattn_tensor_bshd(f.bias, 1u << 16, XATTN_DTYPE_F32, 1, 2, HKV, DV));
    BAD("paged append into a shared slot", INVALID_ARGUMENT, "block_table", with_paged(&f, &d);
        with_append(&f, &d, 2); f.cache_len[0] = f.cache_len[1] = 6; f.table[MP + 1] = 1);
    GOOD("append", with_append(&f, &d, 2));
    GOOD("append of 0 tokens", with_append(&f, &d, 0));
    GOOD("paged append", with_paged(&f, &d); with_append(&f, &d, 2));

    /* ---- fp8 K/V caches and their scales ---- */
#define FP8KV(dt) (d.k.dtype = d.v.dtype = (dt))
#define SCALE(field, off) (d.field = scale_view(&f, (off)))
    BAD("q fp8", INVALID_DTYPE, "q.dtype", d.q.dtype = d.o.dtype = XATTN_DTYPE_FP8_E4M3);
    BAD("k fp8, v f32", INVALID_DTYPE, "v.dtype", d.k.dtype = XATTN_DTYPE_FP8_E5M2);
    BAD("k_scale without fp8", INVALID_ARGUMENT, "k_scale", SCALE(k_scale, 0));
    BAD("k_scale f16", INVALID_DTYPE, "k_scale.dtype", FP8KV(XATTN_DTYPE_FP8_E4M3);
        SCALE(k_scale, 0); d.k_scale.dtype = XATTN_DTYPE_F16);
    BAD("v_scale per query head", INVALID_SHAPE, "v_scale.shape[2]", FP8KV(XATTN_DTYPE_FP8_E4M3);
        SCALE(v_scale, 0); d.v_scale.shape[2] = HQ);
    BAD("v_scale overruns buffer", OUT_OF_BOUNDS, "v_scale", FP8KV(XATTN_DTYPE_FP8_E4M3);
        SCALE(v_scale, BUF_BYTES - 4));
    BAD("k_scale overlaps o", INVALID_ARGUMENT, "k_scale", FP8KV(XATTN_DTYPE_FP8_E5M2);
        SCALE(k_scale, 0); d.k_scale.buffer = f.o);
    BAD("k_scale overlaps lse", INVALID_ARGUMENT, "k_scale", FP8KV(XATTN_DTYPE_FP8_E5M2);
        SCALE(k_scale, 0); d.k_scale.buffer = f.lse);
    GOOD("fp8e4m3 with scales", FP8KV(XATTN_DTYPE_FP8_E4M3); SCALE(k_scale, 0); SCALE(v_scale, 64));
    GOOD("fp8e5m2 without scales", FP8KV(XATTN_DTYPE_FP8_E5M2));
#undef FP8KV

    /* ---- q8_0 K/V caches: the layout of the blocks, their bytes ---- */
    BAD("q q8_0", INVALID_DTYPE, "q.dtype", with_q8(&f, &d); d.q.dtype = XATTN_DTYPE_Q8_0;
        d.o.dtype = XATTN_DTYPE_Q8_0);
    BAD("k q8_0, D 16", INVALID_SHAPE, "k.shape[3]", d.k.dtype = d.v.dtype = XATTN_DTYPE_Q8_0);
    BAD("v q8_0, Dv 48", INVALID_SHAPE, "v.shape[3]", with_q8(&f, &d); d.v.shape[3] = 48;
        d.o.shape[3] = 48);
    BAD("k q8_0, head dim stride 2", INVALID_STRIDE, "k.strides[3]", with_q8(&f, &d);
        d.k.strides[3] = 2; d.k.strides[2] = 64; d.k.strides[1] = 128; d.k.strides[0] = 2048);
    BAD("v q8_0, head stride 40", INVALID_STRIDE, "v.strides[2]", with_q8(&f, &d);
        d.v.strides[2] = 40);
    BAD("k q8_0, offset inside a block", INVALID_ARGUMENT, "k.offset", with_q8(&f, &d);
        d.k.offset = 32);
    BAD("k q8_0 overruns its buffer by a block", OUT_OF_BOUNDS, "k", with_q8(&f, &d);
        d.k.offset = (BUF_BYTES - Q8_SPAN) / 34 * 34 + 34);
    BAD("k_scale with q8_0", INVALID_ARGUMENT, "k_scale", with_q8(&f, &d); SCALE(k_scale, 0));
    BAD("k_new q8_0, token stride 48", INVALID_STRIDE, "k_new.strides[1]",
        with_q8_append(&f, &d, 2);
        d.k_new.strides[1] = 48; d.k_new.strides[0] = 96);
    BAD("v_new q8_0, Dv 16", INVALID_SHAPE, "v_new.shape[3]", with_q8_append(&f, &d, 2);
        d.v_new.shape[3] = 16);
    GOOD("q8_0", with_q8(&f, &d));
    GOOD("q8_0 up to the buffer's last byte", with_q8(&f, &d);
         d.k.offset = (BUF_BYTES - Q8_SPAN) / 34 * 34);
    GOOD("q8_0 paged", with_paged(&f, &d); d.q = bshd(f.q, XATTN_DTYPE_F32, B, SQ, HQ, DQ8);
         d.o = bshd(f.o, XATTN_DTYPE_F32, B, SQ, HQ, DQ8);
         d.k = bshd(f.k, XATTN_DTYPE_Q8_0, NP, PS, HKV, DQ8);
         d.v = bshd(f.v, XATTN_DTYPE_Q8_0, NP, PS, HKV, DQ8));
    GOOD("q8_0 append", with_q8_append(&f, &d, 2));
#undef SCALE

    /* ---- valid edge cases (must not be rejected) ---- */
    GOOD("Sq = 0", d.q.shape[1] = 0; d.o.shape[1] = 0; d.lse.shape[2] = 0);
    GOOD("Sk = 0", d.k.shape[1] = 0; d.v.shape[1] = 0);
    GOOD("zero-length sequences", f.seqlens_q[0] = 0; f.seqlens_k[1] = 0; d.seqlens_q = f.seqlens_q;
         d.seqlens_k = f.seqlens_k);
    f.seqlens_q[0] = SQ, f.seqlens_k[1] = SK;
    GOOD("lse absent", d.lse.buffer = NULL);
    GOOD("bias broadcast", with_bias(&f, &d, XATTN_DTYPE_F16, 1, HQ, SQ + 3, SK + 5));
    GOOD("negative scale", d.scale = -0.25f);
    GOOD("stride ignored where extent is 1", d.q = bshd(f.q, XATTN_DTYPE_F32, B, 1, HQ, D);
         d.o = bshd(f.o, XATTN_DTYPE_F32, B, 1, HQ, DV); d.q.strides[1] = 123456;
         d.lse.shape[2] = 1);
    GOOD("window and causal", d.causal = 1; d.window_left = 0; d.window_right = 0);
    {
        xattn_attn_desc d;
        valid_varlen_desc(&f, &d);
        d.num_seqs = 0;
        f.cu_q[0] = 0, f.cu_k[0] = 0;
        xattn_status st = xattn_attention(f.ctx, &d, NULL);
        EXPECT(st == XATTN_STATUS_OK, "[num_seqs = 0] valid call failed: %s: %s",
               xattn_status_name(st), xattn_last_error());
    }

    teardown(&f);
    return xattn_test_summary();
}
