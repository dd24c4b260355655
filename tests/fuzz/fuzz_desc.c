/*
 * fuzz_desc: a libFuzzer target over the attention descriptor, the view
 * validation and the attention call itself on tiny shapes, on a CPU context.
 *
 * An input is decoded into a whole problem: dimensions, dtypes, layouts
 * (strides and offsets), per-sequence lengths or packed cu_seqlens, masks,
 * bias / LSE views, ALiBi slopes, scale and softcap (NaN and inf included),
 * the algorithm and split count, thread count, SIMD path and memory limit,
 * then a list of raw "mutations" that overwrite any field with any 64-bit
 * value. Buffers are real host memory of exactly the size the views need (or
 * less, when a mutation says so), wrapped without copies, so that
 * AddressSanitizer sees any read or write outside them.
 *
 * Oracles (a failure calls abort(), which libFuzzer and ctest report):
 *  - xattn_attention_check and xattn_attention agree on the status; a failure
 *    has a known status code and a non-empty message, a success an empty one;
 *  - a rejected call leaves the output buffer untouched;
 *  - an accepted call runs (when its work is small) and returns OK, or
 *    OUT_OF_MEMORY only under a memory limit (NAIVE's message names FLASH);
 *  - elements of O and LSE outside the views, and rows no sequence owns, keep
 *    their poison; with "tame" inputs (finite, moderate values, no raw
 *    mutation of a scalar) every written element matches the double
 *    reference (xattn_reference_attention) within a per-dtype bound, NaN and
 *    -inf exactly;
 *  - the context's allocator is back at its starting byte count afterwards;
 *  - serving fields (an input that ends with the serving trailer, below):
 *    sinks, a paged cache (a block table over a shuffled page pool, with
 *    spare pages, -1 past each sequence's pages, shared rows, corrupted or
 *    raw entries and a raw max_pages_per_seq) and an append (k_new/v_new,
 *    wrong heads, lengths or dtype, cache lengths that do not fit): a refused
 *    call leaves the K/V caches untouched, an accepted append changes exactly
 *    its slots of the caches, to k_new/v_new's values.
 *
 * The serving trailer: the last FZ_SV_LEN bytes of an input, when they end
 * with FZ_SV_MAGIC, configure the serving fields and are not part of the main
 * input; inputs without it (the corpus before these fields) decode as before.
 *
 * The same function is linked into a plain driver (fuzz_replay.c) that
 * replays tests/fuzz/corpus/ in every build, with or without clang.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_reference.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest buffer a tensor gets (views that need more are cut to this size,
 * and the validator must say OUT_OF_BOUNDS). */
#define FZ_BUF_CAP ((size_t)1 << 19)
/* Attention runs only when B*S*Hq*Sk*max(D, Dv) (tensor extents) is below this. */
#define FZ_WORK_CAP 300000.0
/* Host arrays (lengths, offsets) are only attached up to this many sequences. */
#define FZ_MAX_SEQS 64
#define FZ_MAX_HEADS 512

enum { T_Q, T_K, T_V, T_O, T_LSE, T_BIAS, T_SINKS, T_KNEW, T_VNEW, T_COUNT };

/* The serving trailer: FZ_SV_LEN bytes, the last two 0xa5 0x5a. */
#define FZ_SV_LEN 32
#define FZ_MAX_TABLE 65536 /* block-table entries the harness allocates at most */

/* ---- failure ---------------------------------------------------------------- */

static const uint8_t *g_data;
static size_t g_size;

static void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_desc: oracle failed: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  input (%zu bytes):", g_size);
    for (size_t i = 0; i < g_size && i < 512; i++)
        fprintf(stderr, "%s%02x", i % 32 ? "" : "\n  ", g_data[i]);
    fprintf(stderr, "\n");
    abort();
}

/* ---- the input reader (zeros once exhausted) -------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned rd_u8(rd *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint32_t rd_u32(rd *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)rd_u8(r) << (8 * i);
    return v;
}

static uint64_t rd_u64(rd *r)
{
    uint64_t lo = rd_u32(r);
    return lo | ((uint64_t)rd_u32(r) << 32);
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- random data ---------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unif(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Values that stress the arithmetic: overflow of f16 and of f32 products,
 * subnormals, signed zeros, infinities, NaN. */
static const float g_special[16] = {0.0f,     -0.0f,     1.0f,  -1.0f,  1e-45f, 1e-38f,
                                    65504.f,  65520.f,   1e18f, -1e18f, 1e19f,  3e38f,
                                    INFINITY, -INFINITY, NAN,   -3e38f};

/* Tame: in [-1, 1], never within 0.01 of 0. Wild: any magnitude, sometimes special. */
static float gen_value(uint64_t *s, int wild, unsigned special_rate)
{
    if (wild && (rng_next(s) & 255) < special_rate)
        return g_special[rng_next(s) & 15];
    double x = 2.0 * rng_unif(s) - 1.0;
    if (fabs(x) < 0.01)
        x = x < 0 ? -0.5 : 0.5;
    if (wild)
        x *= pow(10.0, (double)(int)(rng_next(s) % 40) - 10.0);
    return (float)x;
}

static size_t esz(xattn_dtype t)
{
    return t == XATTN_DTYPE_F32 ? 4 : 2;
}

/* q8_0 K/V (ggml's blocks: 32 values along the head dim in 34 bytes, an f16 d
 * then 32 int8): addressed in values, the bytes by the fuzzer's own formula. */
#define Q8 XATTN_DTYPE_Q8_0
static uint64_t q8_block_byte(uint64_t e)
{
    return e / 32 * 34;
}

/* The first element of a view (its offset, in its dtype's elements). */
static uint64_t elem0(const xattn_tensor *x)
{
    return x->dtype == Q8 ? x->offset / 34 * 32 : x->offset / esz(x->dtype);
}

static void put_elem(unsigned char *base, xattn_dtype t, size_t idx, float v)
{
    if (t == XATTN_DTYPE_F32) {
        memcpy(base + 4 * idx, &v, 4);
    } else {
        uint16_t h = t == XATTN_DTYPE_F16 ? xattn_f32_to_f16(v) : xattn_f32_to_bf16(v);
        memcpy(base + 2 * idx, &h, 2);
    }
}

static double get_elem(const unsigned char *base, xattn_dtype t, size_t idx)
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

static const uint32_t POISON_F32 = 0x7fc5a5a5u;
static const uint16_t POISON_F16 = 0x7e5au, POISON_BF16 = 0x7fe5u;

static void put_poison(unsigned char *base, xattn_dtype t, size_t idx)
{
    if (t == XATTN_DTYPE_F32)
        memcpy(base + 4 * idx, &POISON_F32, 4);
    else
        memcpy(base + 2 * idx, t == XATTN_DTYPE_F16 ? &POISON_F16 : &POISON_BF16, 2);
}

static int is_poison(const unsigned char *base, xattn_dtype t, size_t idx)
{
    if (t == XATTN_DTYPE_F32)
        return !memcmp(base + 4 * idx, &POISON_F32, 4);
    return !memcmp(base + 2 * idx, t == XATTN_DTYPE_F16 ? &POISON_F16 : &POISON_BF16, 2);
}

/* ---- contexts that live across inputs --------------------------------------- */

static xattn_ctx *g_ctx, *g_other;
static int g_verbose, g_ran, g_compared; /* XATTN_FUZZ_VERBOSE=1: one line per input */
static xattn_buffer *g_foreign;          /* a buffer of g_other: WRONG_CONTEXT */
static unsigned char g_foreign_mem[4096];

static void fz_teardown(void)
{
    xattn_buffer_free(g_foreign);
    xattn_ctx_destroy(g_ctx);
    xattn_ctx_destroy(g_other);
    g_foreign = NULL;
    g_ctx = g_other = NULL;
}

static int fz_setup(void)
{
    if (g_ctx)
        return 1;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &g_ctx) != XATTN_STATUS_OK ||
        xattn_ctx_create(XATTN_BACKEND_CPU, 0, &g_other) != XATTN_STATUS_OK ||
        xattn_buffer_wrap_host(g_other, g_foreign_mem, sizeof g_foreign_mem, &g_foreign) !=
            XATTN_STATUS_OK) {
        fprintf(stderr, "fuzz_desc: cannot create CPU contexts: %s\n", xattn_last_error());
        abort();
    }
    atexit(fz_teardown);
    const char *v = getenv("XATTN_FUZZ_VERBOSE");
    g_verbose = v && v[0] == '1';
    return 1;
}

/* ---- one decoded input ---------------------------------------------------------- */

typedef struct fz_tensor {
    int sel;            /* 0 own buffer, 1 NULL, 2 another context's, 3 q's buffer */
    uint64_t shrink;    /* bytes taken off the exact size the view needs */
    unsigned char *mem; /* the host memory (own buffer) */
    size_t bytes;
    xattn_buffer *buf;
} fz_tensor;

typedef struct fz_input {
    xattn_attn_desc d;
    fz_tensor t[T_COUNT];
    int has_lse, has_bias;
    int wild;           /* raw / extreme values: no comparison with the reference */
    int scalar_mutated; /* a raw mutation hit a scalar or a length */
    int struct_mutated; /* a raw mutation hit a shape, stride, offset or buffer */
    int inf_rows;       /* whole bias rows of -inf */
    int ninject;        /* NaN / inf placed into q, k, v or the bias */
    unsigned inj_t[3], inj_code[3];
    uint32_t inj_idx[3];
    unsigned neginf_rate, special_rate;
    uint64_t seed;
    /* host arrays, reallocated to their exact length before the call */
    int32_t lens_q[FZ_MAX_SEQS], lens_k[FZ_MAX_SEQS];
    int want_seqlens_q, want_seqlens_k, want_cu, want_alibi;
    int64_t nseq_arr; /* entries of seqlens (padded) */
    int32_t *seqlens_q, *seqlens_k, *cu_q, *cu_k;
    float *slopes;
    float slope_vals[FZ_MAX_HEADS];
    int lay_kv;
    /* serving fields */
    int has_sinks, has_append, paged;
    int32_t *table;
    size_t table_len;
} fz_input;

/* Strides of a [b, s, h, d] view in one of four layouts; returns an extra
 * element offset (the strided layout starts 2 elements in). */
static int64_t layout_strides(int layout, int64_t s, int64_t h, int64_t d, int64_t st[4])
{
    switch (layout & 3) {
    case 1: /* BHSD */ st[3] = 1, st[1] = d, st[2] = s * d, st[0] = h * s * d; return 0;
    case 2: /* gaps between heads, rows and batches */
        st[3] = 1, st[2] = d + 1, st[1] = h * (d + 1) + 3, st[0] = s * st[1] + 5;
        return 2;
    case 3: /* the head dim not innermost */
        st[1] = 1, st[3] = s, st[2] = d * s, st[0] = h * d * s;
        return 0;
    default: /* BSHD */ st[3] = 1, st[2] = d, st[1] = h * d, st[0] = s * h * d; return 0;
    }
}

static void set_view(xattn_tensor *t, xattn_dtype dt, int layout, int64_t b, int64_t s, int64_t h,
                     int64_t d)
{
    t->dtype = dt;
    t->shape[0] = b, t->shape[1] = s, t->shape[2] = h, t->shape[3] = d;
    int64_t off = layout_strides(layout, s, h, d, t->strides);
    if (dt == Q8 && (layout & 3) == 2) { /* q8_0's gaps and offset: whole blocks */
        int64_t *st = t->strides;
        st[3] = 1, st[2] = d + 32, st[1] = h * st[2] + 96, st[0] = s * st[1] + 160;
        off = 64;
    }
    t->offset = dt == Q8 ? (size_t)(off / 32 * 34) : (size_t)off * esz(dt);
}

/* Bytes a view needs from its buffer's start; 0 with *ok = 0 when that does
 * not fit in 64 bits (the validator must then say SIZE_OVERFLOW). */
static uint64_t view_need(const xattn_tensor *t, int *ok)
{
    *ok = 1;
    if ((unsigned)t->dtype >= XATTN_DTYPE_COUNT)
        return 4096;
    uint64_t last = 0;
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] <= 0)
            return t->offset ? t->offset : 1;
        if (t->strides[i] < 0)
            return 4096;
    }
    for (int i = 0; i < 4; i++) {
        uint64_t span;
        if (__builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->strides[i], &span) ||
            __builtin_add_overflow(last, span, &last)) {
            *ok = 0;
            return 0;
        }
    }
    uint64_t end;
    if (t->dtype == Q8) { /* whole blocks of 34 bytes */
        if (__builtin_add_overflow(last, 32, &end) ||
            __builtin_mul_overflow(end / 32, (uint64_t)34, &end) ||
            __builtin_add_overflow(end, (uint64_t)t->offset, &end)) {
            *ok = 0;
            return 0;
        }
        return end;
    }
    if (__builtin_add_overflow(last, 1, &end) ||
        __builtin_mul_overflow(end, (uint64_t)esz(t->dtype), &end) ||
        __builtin_add_overflow(end, (uint64_t)t->offset, &end)) {
        *ok = 0;
        return 0;
    }
    return end;
}

/* One raw mutation: any field of the descriptor gets any value. */
static void mutate(fz_input *in, unsigned id, uint64_t val)
{
    xattn_attn_desc *d = &in->d;
    if (id < 6 * 8) {
        int t = (int)(id % 6), what = (int)(id / 6);
        xattn_tensor *x = t == T_Q     ? &d->q
                          : t == T_K   ? &d->k
                          : t == T_V   ? &d->v
                          : t == T_O   ? &d->o
                          : t == T_LSE ? &d->lse
                                       : &d->bias;
        int k = (int)(val & 3);
        in->struct_mutated = 1;
        switch (what) {
        case 0: x->shape[k] = (int64_t)(val >> 2); break;
        case 1: x->strides[k] = (int64_t)(val >> 2); break;
        case 2: x->offset = (size_t)val; break;
        case 3:
            x->dtype = (xattn_dtype)(int)val;
            in->scalar_mutated = 1;
            break;
        case 4: in->t[t].sel = (int)(val % 4); break;
        case 5: in->t[t].shrink = val % 4096; break;
        case 6: x->shape[k] += (int8_t)(val >> 8); break;
        default: x->strides[k] += (int8_t)(val >> 8); break;
        }
        return;
    }
    in->scalar_mutated = 1;
    switch ((id - 48) % 13) {
    case 0: d->struct_size = (size_t)val; break;
    case 1: d->num_seqs = (int64_t)val; break;
    case 2: d->window_left = (int64_t)val; break;
    case 3: d->window_right = (int64_t)val; break;
    case 4: d->num_splits = (int)val; break;
    case 5: d->causal = (int)val; break;
    case 6: d->align = (xattn_align)(int)val; break;
    case 7: d->algo = (xattn_algo)(int)val; break;
    case 8: d->scale = bits_f32((uint32_t)val); break;
    case 9: d->softcap = bits_f32((uint32_t)val); break;
    case 10: { /* one length entry */
        int32_t v = (int32_t)(val >> 32);
        unsigned i = (unsigned)((val >> 8) % FZ_MAX_SEQS);
        if (val & 1)
            in->lens_k[i] = v;
        else
            in->lens_q[i] = v;
        break;
    }
    case 11: in->slope_vals[(val >> 8) % FZ_MAX_HEADS] = g_special[val & 15]; break;
    default: /* attach / detach host arrays: padded and packed at once, one alone */
        in->want_seqlens_q = (int)(val & 1);
        in->want_seqlens_k = (int)((val >> 1) & 1);
        in->want_cu = (int)((val >> 2) & 3); /* 0 none, 1 both, 2 only q, 3 only k */
        in->want_alibi = (int)((val >> 4) & 1);
        break;
    }
}

static void decode(fz_input *in, rd *r)
{
    memset(in, 0, sizeof *in);
    xattn_attn_desc *d = &in->d;
    xattn_attn_desc_init(d);
    unsigned c0 = rd_u8(r), c1 = rd_u8(r), c2 = rd_u8(r);
    int varlen = (c0 >> 2) & 1;
    in->want_seqlens_q = !varlen && (c0 & 1);
    in->want_seqlens_k = !varlen && ((c0 >> 1) & 1);
    in->want_cu = varlen;
    in->has_lse = (c0 >> 3) & 1;
    in->has_bias = (c0 >> 4) & 1;
    in->want_alibi = (c0 >> 5) & 1;
    in->wild = (c0 >> 6) & 1;
    int mutations = (c0 >> 7) & 1;

    d->algo = (xattn_algo)(c1 & 3);
    d->causal = (c1 >> 2) & 1;
    d->align = (xattn_align)((c1 >> 3) & 1);
    int lay_q = (int)(c2 & 3), lay_kv = (int)((c2 >> 2) & 3);
    in->lay_kv = lay_kv;

    int64_t B = 1 + rd_u8(r) % 4;
    int64_t Sq = rd_u8(r) % 33;
    unsigned skb = rd_u8(r);
    int64_t Sk = skb < 240 ? skb % 65 : (int64_t)(skb - 239) * 70; /* up to 1120: SPLITKV */
    int64_t Hkv = 1 + rd_u8(r) % 4, Hq = Hkv * (1 + rd_u8(r) % 4);
    int64_t D = 1 + rd_u8(r);
    unsigned dvb = rd_u8(r);
    int64_t Dv = dvb == 0 ? D : dvb == 255 ? 256 : (int64_t)dvb;
    unsigned dtb = rd_u8(r);
    xattn_dtype dq = (xattn_dtype)(dtb % 3), dkv = (xattn_dtype)((dtb / 3) % 3);
    if (dtb >= 240) { /* a q8_0 cache: head dims made whole blocks, unless bit 3 says not */
        dkv = Q8;
        if (!(dtb & 8)) {
            D = D < 224 ? (D + 31) / 32 * 32 : 256;
            Dv = Dv < 224 ? (Dv + 31) / 32 * 32 : 256;
        }
    }
    xattn_dtype dbias = (dtb / 9) & 1 ? XATTN_DTYPE_F16 : XATTN_DTYPE_F32;

    for (int b = 0; b < FZ_MAX_SEQS; b++) {
        in->lens_q[b] = (int32_t)(b < B ? rd_u8(r) % (Sq + 1) : 0);
        in->lens_k[b] = (int32_t)(b < B ? rd_u8(r) % (Sk + 1) : 0);
    }
    int64_t Bp = B, Tq = Sq, Tk = Sk;
    if (varlen) {
        Bp = 1;
        Tq = Tk = 0;
        for (int b = 0; b < B; b++) {
            Tq += in->lens_q[b];
            Tk += in->lens_k[b];
        }
        Tq += rd_u8(r) % 3; /* tokens no sequence owns: never written */
        Tk += rd_u8(r) % 3;
        d->num_seqs = B;
    }
    set_view(&d->q, dq, lay_q, Bp, Tq, Hq, D);
    set_view(&d->o, dq, lay_q, Bp, Tq, Hq, Dv);
    set_view(&d->k, dkv, lay_kv, Bp, Tk, Hkv, D);
    set_view(&d->v, dkv, lay_kv, Bp, Tk, Hkv, Dv);
    if (in->has_lse) {
        xattn_tensor *l = &d->lse;
        l->dtype = XATTN_DTYPE_F32;
        int64_t row = Tq + (lay_q == 2 ? 2 : 0);
        l->shape[0] = Bp, l->shape[1] = Hq, l->shape[2] = Tq, l->shape[3] = 1;
        l->strides[0] = Hq * row, l->strides[1] = row, l->strides[2] = 1, l->strides[3] = 1;
    }
    if (in->has_bias) {
        unsigned bb = rd_u8(r);
        xattn_tensor *x = &d->bias;
        int64_t Bb = (bb & 1) ? B : 1, Hb = (bb & 2) ? Hq : 1;
        int64_t Sqb = Sq + ((bb >> 2) & 1), Skb = Sk + ((bb >> 3) & 3);
        x->dtype = dbias;
        x->shape[0] = Bb, x->shape[1] = Hb, x->shape[2] = Sqb, x->shape[3] = Skb;
        x->strides[3] = 1, x->strides[2] = Skb, x->strides[1] = Sqb * Skb;
        x->strides[0] = Hb * Sqb * Skb;
        in->inf_rows = (bb >> 5) & 1;
        in->neginf_rate = rd_u8(r) / 2;
    }
    if ((c1 >> 4) & 1)
        d->window_left = in->wild ? (int64_t)rd_u64(r) : (int64_t)(rd_u8(r) % 40) - 1;
    if ((c1 >> 5) & 1)
        d->window_right = in->wild ? (int64_t)rd_u64(r) : (int64_t)(rd_u8(r) % 40) - 1;
    if ((c1 >> 6) & 1)
        d->softcap = in->wild ? bits_f32(rd_u32(r)) : 0.5f + (float)(rd_u8(r) % 50);
    if ((c1 >> 7) & 1)
        d->scale = in->wild ? bits_f32(rd_u32(r)) : (float)(int8_t)rd_u8(r) / 512.0f;
    d->num_splits = in->wild ? (int)rd_u32(r) : (int)(rd_u8(r) % 20);
    for (int h = 0; h < FZ_MAX_HEADS; h++)
        in->slope_vals[h] =
            h < Hq ? (in->wild ? bits_f32(rd_u32(r)) : (float)rd_u8(r) / 255.0f) : 0.25f;
    in->seed = rd_u64(r);
    in->special_rate = in->wild ? rd_u8(r) : 0;
    unsigned ninj = rd_u8(r);
    in->ninject = ninj < 192 ? 0 : 1 + (int)(ninj % 3);
    for (int i = 0; i < in->ninject; i++) {
        in->inj_t[i] = rd_u8(r) % 4;
        in->inj_idx[i] = rd_u32(r);
        in->inj_code[i] = rd_u8(r) % 3;
    }
    if (mutations) {
        unsigned n = rd_u8(r) % 8;
        for (unsigned i = 0; i < n; i++) {
            unsigned id = rd_u8(r);
            mutate(in, id, rd_u64(r));
        }
    }
}

static int64_t clamp_dim(int64_t v)
{
    return v >= 0 && v <= 4096 ? v : 1;
}

/* The serving fields from the trailer, over the decoded (and mutated) input:
 * sinks [1, 1, Hq, 1], k_new/v_new [B, S_new, Hkv, D/Dv], and for a paged cache
 * K/V re-viewed as pools [pages, page, Hkv, D] with a block table. The cache
 * lengths (seqlens_k) leave room for the appended tokens unless told not to. */
static void decode_serving(fz_input *in, rd *r)
{
    xattn_attn_desc *d = &in->d;
    unsigned f = rd_u8(r), g = rd_u8(r);
    in->has_sinks = f & 1;
    in->paged = (f >> 1) & 1;
    in->has_append = (f >> 2) & 1;
    const int64_t B = clamp_dim(d->q.shape[0]), Hq = clamp_dim(d->q.shape[2]);
    const int64_t Hkv = clamp_dim(d->k.shape[2]), D = clamp_dim(d->k.shape[3]);
    const int64_t Dv = clamp_dim(d->v.shape[3]);
    if (in->has_sinks) {
        xattn_tensor *x = &d->sinks;
        const int64_t h = Hq + ((f >> 3) & 1); /* one head too many */
        x->dtype = (f >> 4) & 1 ? XATTN_DTYPE_F16 : XATTN_DTYPE_F32;
        x->shape[0] = x->shape[1] = x->shape[3] = 1;
        x->shape[2] = h;
        x->strides[0] = x->strides[1] = h;
        x->strides[2] = x->strides[3] = 1;
    }
    const int64_t s_new = in->has_append ? rd_u8(r) % 5 : 0;
    if (in->has_append) {
        xattn_dtype dt = (f >> 5) & 1 ? (xattn_dtype)((d->k.dtype + 1) % 3) : d->k.dtype;
        dt = (unsigned)dt < 3 || dt == Q8 ? dt : XATTN_DTYPE_F32;
        set_view(&d->k_new, dt, in->lay_kv, B, s_new, Hkv + ((g >> 1) & 1), D);
        set_view(&d->v_new, dt, in->lay_kv, B, s_new + ((g >> 2) & 1), Hkv, Dv);
    }
    if (in->paged || in->has_append) {
        in->want_seqlens_k = !((g >> 3) & 1); /* else: no cache lengths, which both need */
        if (!((g >> 4) & 1))                  /* else: the lengths as they are, maybe no room */
            for (int b = 0; b < FZ_MAX_SEQS; b++)
                in->lens_k[b] = in->lens_k[b] >= s_new ? in->lens_k[b] - (int32_t)s_new : 0;
    }
    if (!in->paged)
        return;
    const int64_t page = 1 + rd_u8(r) % 17, spare = rd_u8(r) % 3;
    const int64_t Bt = d->q.shape[0] >= 1 && d->q.shape[0] <= FZ_MAX_SEQS ? d->q.shape[0] : 1;
    int64_t need[FZ_MAX_SEQS], pages = spare, mp = 1;
    for (int64_t b = 0; b < Bt; b++) {
        const int64_t len = (int64_t)in->lens_k[b] + s_new;
        need[b] = len > 0 && len <= 4096 ? (len + page - 1) / page : 0;
        pages += need[b];
        mp = need[b] > mp ? need[b] : mp;
    }
    mp += rd_u8(r) % 2;
    if (pages < 1)
        pages = 1;
    set_view(&d->k, d->k.dtype, in->lay_kv, pages, page, Hkv, D);
    set_view(&d->v, d->v.dtype, in->lay_kv, pages, page, Hkv, Dv);
    if ((g >> 7) & 1) { /* a raw row length: invalid ones are refused before any read */
        int64_t raw = (int64_t)rd_u64(r);
        if (raw >= 1 && raw <= INT32_MAX && raw * page <= INT32_MAX && Bt * raw > FZ_MAX_TABLE)
            raw = 1 + raw % 64;
        mp = raw;
    }
    const int valid_mp = mp >= 1 && mp <= INT32_MAX && mp * page <= INT32_MAX;
    in->table_len = valid_mp ? (size_t)(Bt * mp) : 1;
    in->table = malloc(in->table_len * sizeof *in->table);
    for (size_t i = 0; i < in->table_len; i++)
        in->table[i] = -1; /* past a sequence's pages: never read */
    /* each sequence's pages: a shuffled share of the pool */
    uint64_t seed = rd_u64(r);
    int32_t *perm = malloc((size_t)pages * sizeof *perm);
    for (int64_t i = 0; i < pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_next(&seed) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t next = 0;
    if (valid_mp)
        for (int64_t b = 0; b < Bt; b++)
            for (int64_t k = 0; k < need[b] && k < mp && next < pages; k++)
                in->table[b * mp + k] = perm[next++];
    free(perm);
    if (valid_mp && ((g >> 5) & 1)) /* a shared prefix: rows read sequence 0's pages */
        for (int64_t b = 1; b < Bt; b++)
            for (int64_t k = 0; k < need[b] && k < need[0] && k < mp; k++)
                in->table[b * mp + k] = in->table[k];
    const unsigned corrupt = rd_u8(r);
    const uint32_t at = rd_u32(r), val = rd_u32(r);
    if (corrupt < 64) /* any entry, any value: out of range or a page another one uses */
        in->table[at % in->table_len] =
            (int32_t)(corrupt & 1 ? val : val % (uint32_t)(pages + 2) - 1);
    d->max_pages_per_seq = mp;
    if (!((g >> 6) & 1)) /* else: paged views without their table */
        d->block_table = in->table;
}

/* Host arrays of exactly the length the validator reads (0 = detached). */
static void attach_arrays(fz_input *in)
{
    xattn_attn_desc *d = &in->d;
    int64_t Bq = d->q.shape[0];
    if ((in->want_seqlens_q || in->want_seqlens_k) && Bq >= 1 && Bq <= FZ_MAX_SEQS) {
        if (in->want_seqlens_q) {
            in->seqlens_q = malloc((size_t)Bq * sizeof(int32_t));
            memcpy(in->seqlens_q, in->lens_q, (size_t)Bq * sizeof(int32_t));
            d->seqlens_q = in->seqlens_q;
        }
        if (in->want_seqlens_k) {
            in->seqlens_k = malloc((size_t)Bq * sizeof(int32_t));
            memcpy(in->seqlens_k, in->lens_k, (size_t)Bq * sizeof(int32_t));
            d->seqlens_k = in->seqlens_k;
        }
    }
    if (in->want_cu) {
        /* num_seqs beyond the arrays we hold is only passed when the
         * validator rejects it before reading (negative or > INT32_MAX). */
        int64_t n = d->num_seqs;
        if (n >= 0 && n <= INT32_MAX && n > FZ_MAX_SEQS)
            n = d->num_seqs = n % (FZ_MAX_SEQS + 1);
        size_t len = (size_t)(n >= 0 && n <= FZ_MAX_SEQS ? n : 0) + 1;
        in->cu_q = malloc(len * sizeof(int32_t));
        in->cu_k = malloc(len * sizeof(int32_t));
        in->cu_q[0] = in->cu_k[0] = 0;
        for (size_t b = 1; b < len; b++) {
            /* wrap-around of a mutated length is what a fuzzer is for */
            in->cu_q[b] = (int32_t)((uint32_t)in->cu_q[b - 1] + (uint32_t)in->lens_q[b - 1]);
            in->cu_k[b] = (int32_t)((uint32_t)in->cu_k[b - 1] + (uint32_t)in->lens_k[b - 1]);
        }
        if (in->want_cu != 3)
            d->cu_seqlens_q = in->cu_q;
        if (in->want_cu != 2)
            d->cu_seqlens_k = in->cu_k;
    }
    int64_t Hq = d->q.shape[2];
    if (in->want_alibi && Hq >= 1 && Hq <= FZ_MAX_HEADS) {
        in->slopes = malloc((size_t)Hq * sizeof(float));
        memcpy(in->slopes, in->slope_vals, (size_t)Hq * sizeof(float));
        d->alibi_slopes = in->slopes;
    }
}

static xattn_tensor *tensor_of(xattn_attn_desc *d, int t)
{
    switch (t) {
    case T_Q: return &d->q;
    case T_K: return &d->k;
    case T_V: return &d->v;
    case T_O: return &d->o;
    case T_LSE: return &d->lse;
    case T_SINKS: return &d->sinks;
    case T_KNEW: return &d->k_new;
    case T_VNEW: return &d->v_new;
    default: return &d->bias;
    }
}

/* Real host memory for each tensor, wrapped on the context. */
static void make_buffers(fz_input *in)
{
    xattn_attn_desc *d = &in->d;
    uint64_t s = in->seed;
    for (int t = 0; t < T_COUNT; t++) {
        xattn_tensor *x = tensor_of(d, t);
        fz_tensor *ft = &in->t[t];
        if ((t == T_LSE && !in->has_lse) || (t == T_BIAS && !in->has_bias) ||
            (t == T_SINKS && !in->has_sinks) || ((t == T_KNEW || t == T_VNEW) && !in->has_append))
            continue;
        int ok;
        uint64_t need = view_need(x, &ok);
        if (!ok || need > FZ_BUF_CAP)
            need = 4096; /* the view cannot fit: the validator must refuse it */
        uint64_t bytes = need > ft->shrink ? need - ft->shrink : 1;
        ft->bytes = (size_t)bytes;
        ft->mem = malloc(ft->bytes);
        xattn_dtype dt = (unsigned)x->dtype < XATTN_DTYPE_COUNT ? x->dtype : XATTN_DTYPE_F32;
        if (dt == Q8) { /* blocks: d = a value / 127 (special ones included), random qs */
            for (size_t i = 0; i < ft->bytes; i++)
                ft->mem[i] = (unsigned char)rng_next(&s);
            for (size_t i = 0; i + 34 <= ft->bytes; i += 34) {
                const uint16_t h =
                    xattn_f32_to_f16(gen_value(&s, in->wild, in->special_rate) / 127.0f);
                ft->mem[i] = (unsigned char)(h & 0xff), ft->mem[i + 1] = (unsigned char)(h >> 8);
            }
            if (xattn_buffer_wrap_host(g_ctx, ft->mem, ft->bytes, &ft->buf) != XATTN_STATUS_OK)
                fz_fail("xattn_buffer_wrap_host(%zu bytes): %s", ft->bytes, xattn_last_error());
            x->buffer = ft->buf;
            continue;
        }
        size_t n = ft->bytes / esz(dt);
        memset(ft->mem, 0x5a, ft->bytes);
        for (size_t e = 0; e < n; e++) {
            float v;
            if (t == T_O || t == T_LSE) {
                put_poison(ft->mem, dt, e);
                continue;
            }
            if (t == T_BIAS) {
                v = gen_value(&s, in->wild, in->special_rate);
                if ((rng_next(&s) & 255) < in->neginf_rate)
                    v = -INFINITY;
            } else {
                v = gen_value(&s, in->wild, in->special_rate);
            }
            put_elem(ft->mem, dt, e, v);
        }
        if (xattn_buffer_wrap_host(g_ctx, ft->mem, ft->bytes, &ft->buf) != XATTN_STATUS_OK)
            fz_fail("xattn_buffer_wrap_host(%zu bytes): %s", ft->bytes, xattn_last_error());
        x->buffer = ft->buf;
    }
    /* Whole rows of -inf in the bias (fully masked rows through the bias). */
    if (in->has_bias && in->inf_rows && (unsigned)d->bias.dtype < XATTN_DTYPE_COUNT) {
        xattn_tensor *x = &d->bias;
        size_t n = in->t[T_BIAS].bytes / esz(x->dtype);
        for (int64_t i = 1; i < x->shape[2] && i < 64; i += 3)
            for (int64_t j = 0; j < x->shape[3] && j < 2048; j++) {
                uint64_t idx = (uint64_t)i * (uint64_t)x->strides[2] +
                               (uint64_t)j * (uint64_t)x->strides[3] + x->offset / esz(x->dtype);
                if (idx < n)
                    put_elem(in->t[T_BIAS].mem, x->dtype, (size_t)idx, -INFINITY);
            }
    }
    /* Single NaN / +inf / -inf values: they propagate as the reference says. */
    static const float inj_val[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < in->ninject; i++) {
        int t = in->inj_t[i] == 3 ? T_BIAS : (int)in->inj_t[i];
        xattn_tensor *x = tensor_of(d, t);
        fz_tensor *ft = &in->t[t];
        if (!ft->mem || (unsigned)x->dtype >= XATTN_DTYPE_COUNT)
            continue;
        if (x->dtype == Q8) { /* a block's d: NaN, +inf or -inf */
            static const uint16_t inj_d[3] = {0x7e00, 0x7c00, 0xfc00};
            const size_t nb = ft->bytes / 34;
            if (nb) {
                const size_t at = in->inj_idx[i] % nb * 34;
                ft->mem[at] = (unsigned char)(inj_d[in->inj_code[i]] & 0xff);
                ft->mem[at + 1] = (unsigned char)(inj_d[in->inj_code[i]] >> 8);
            }
            continue;
        }
        size_t n = ft->bytes / esz(x->dtype);
        if (n)
            put_elem(ft->mem, x->dtype, in->inj_idx[i] % n, inj_val[in->inj_code[i]]);
    }
    /* Buffer selection: absent, another context's, or aliasing q's. */
    for (int t = 0; t < T_COUNT; t++) {
        xattn_tensor *x = tensor_of(d, t);
        if (!x->buffer)
            continue;
        switch (in->t[t].sel) {
        case 1: x->buffer = NULL; break;
        case 2: x->buffer = g_foreign; break;
        case 3: x->buffer = d->q.buffer ? d->q.buffer : x->buffer; break;
        default: break;
        }
    }
}

static void free_input(fz_input *in)
{
    for (int t = 0; t < T_COUNT; t++) {
        xattn_buffer_free(in->t[t].buf);
        free(in->t[t].mem);
    }
    free(in->seqlens_q);
    free(in->seqlens_k);
    free(in->cu_q);
    free(in->cu_k);
    free(in->slopes);
    free(in->table);
}

/* ---- oracles --------------------------------------------------------------------- */

static void check_status(xattn_status st, const char *what)
{
    const char *msg = xattn_last_error();
    if ((int)st > 0 || (int)st < (int)XATTN_STATUS_INTERNAL ||
        strncmp(xattn_status_name(st), "XATTN_STATUS_", 13) != 0)
        fz_fail("%s returned an unknown status %d", what, (int)st);
    if (st == XATTN_STATUS_OK && msg[0])
        fz_fail("%s succeeded but left the message \"%s\"", what, msg);
    if (st != XATTN_STATUS_OK && !msg[0])
        fz_fail("%s returned %s without a message", what, xattn_status_name(st));
    if (st == XATTN_STATUS_INTERNAL)
        fz_fail("%s returned XATTN_STATUS_INTERNAL: %s", what, msg);
}

static double work_of(const xattn_attn_desc *d)
{
    double w = 1.0;
    const int64_t f[5] = {d->q.shape[0], d->q.shape[1], d->q.shape[2], d->k.shape[1],
                          d->q.shape[3] > d->v.shape[3] ? d->q.shape[3] : d->v.shape[3]};
    for (int i = 0; i < 5; i++)
        w *= f[i] > 0 ? (double)f[i] : 1.0;
    if (d->block_table) /* a page pool: the keys are the table's, not k.shape[1] */
        w *= (double)(d->max_pages_per_seq > 0 && d->max_pages_per_seq < 4096 ? d->max_pages_per_seq
                                                                              : 1);
    if (d->cu_seqlens_q)
        w += (double)d->num_seqs * 64.0; /* per-sequence loops */
    else
        w += (double)d->q.shape[0] * (double)d->q.shape[2] * 64.0;
    return w;
}

/* Marks the elements of an output view; returns 0 when two of them alias. */
static int mark_view(const xattn_tensor *x, size_t nel, unsigned char *mark)
{
    for (int64_t i0 = 0; i0 < x->shape[0]; i0++)
        for (int64_t i1 = 0; i1 < x->shape[1]; i1++)
            for (int64_t i2 = 0; i2 < x->shape[2]; i2++)
                for (int64_t i3 = 0; i3 < x->shape[3]; i3++) {
                    uint64_t idx = x->offset / esz(x->dtype) + (uint64_t)(i0 * x->strides[0]) +
                                   (uint64_t)(i1 * x->strides[1]) + (uint64_t)(i2 * x->strides[2]) +
                                   (uint64_t)(i3 * x->strides[3]);
                    if (idx >= nel)
                        fz_fail("validated view element %llu beyond the buffer's %zu",
                                (unsigned long long)idx, nel);
                    if (mark[idx])
                        return 0;
                    mark[idx] = 1;
                }
    return 1;
}

/* The element index of view element (i0, i1, i2, i3). */
static size_t vidx(const xattn_tensor *x, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (size_t)elem0(x) + (size_t)(i0 * x->strides[0] + i1 * x->strides[1] +
                                       i2 * x->strides[2] + i3 * x->strides[3]);
}

/* Compares O and LSE with the double reference, and checks the poison outside
 * the views and in rows no sequence owns. */
static void compare_reference(fz_input *in)
{
    xattn_attn_desc *d = &in->d;
    const xattn_tensor *o = &d->o, *l = &d->lse;
    const int64_t Bp = o->shape[0], S = o->shape[1], Hq = o->shape[2], Dv = o->shape[3];
    const size_t no = (size_t)(Bp * S * Hq * Dv), nl = (size_t)(Bp * Hq * S);
    double *o_ref = malloc((no ? no : 1) * sizeof(double));
    double *lse_ref = malloc((nl ? nl : 1) * sizeof(double));
    unsigned char *written = malloc(Bp * S > 0 ? (size_t)(Bp * S) : 1);
    xattn_status st = xattn_reference_attention(g_ctx, d, o_ref, in->has_lse ? lse_ref : NULL);
    if (st == XATTN_STATUS_OK)
        st = xattn_reference_rows_written(g_ctx, d, written);
    if (st != XATTN_STATUS_OK)
        fz_fail("the reference failed on a descriptor the library ran: %s: %s",
                xattn_status_name(st), xattn_last_error());

    /* Tolerances per output dtype (q, k, v in [-1, 1]; see the header). */
    const double tol = o->dtype == XATTN_DTYPE_F32   ? 2e-3
                       : o->dtype == XATTN_DTYPE_F16 ? 4e-3
                                                     : 1.6e-2;
    const unsigned char *om = in->t[T_O].mem;
    for (int64_t b = 0; b < Bp; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t e = 0; e < Dv; e++) {
                    size_t idx = vidx(o, b, s, h, e);
                    if (!written[b * S + s]) {
                        if (!is_poison(om, o->dtype, idx))
                            fz_fail("O[%lld,%lld,%lld,%lld] written in a row no sequence owns",
                                    (long long)b, (long long)s, (long long)h, (long long)e);
                        continue;
                    }
                    double ref = o_ref[((b * S + s) * Hq + h) * Dv + e];
                    double out = get_elem(om, o->dtype, idx);
                    int bad;
                    if (isnan(ref) || isnan(out))
                        bad = !(isnan(ref) && isnan(out)) || is_poison(om, o->dtype, idx);
                    else if (isinf(ref) || isinf(out))
                        bad = ref != out;
                    else if (ref == 0.0)
                        bad = out != 0.0;
                    else
                        bad = !(fabs(out - ref) <= tol * (1.0 + fabs(ref)));
                    if (bad)
                        fz_fail("O[%lld,%lld,%lld,%lld] = %.9g, reference %.9g (algo %d, %s)",
                                (long long)b, (long long)s, (long long)h, (long long)e, out, ref,
                                (int)d->algo, xattn_dtype_name(o->dtype));
                }
    if (in->has_lse) {
        const unsigned char *lm = in->t[T_LSE].mem;
        for (int64_t b = 0; b < Bp; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t s = 0; s < S; s++) {
                    size_t idx = vidx(l, b, h, s, 0);
                    if (!written[b * S + s]) {
                        if (!is_poison(lm, XATTN_DTYPE_F32, idx))
                            fz_fail("LSE[%lld,%lld,%lld] written in a row no sequence owns",
                                    (long long)b, (long long)h, (long long)s);
                        continue;
                    }
                    double ref = lse_ref[(b * Hq + h) * S + s];
                    double out = get_elem(lm, XATTN_DTYPE_F32, idx);
                    int bad;
                    if (isnan(ref) || isnan(out))
                        bad = !(isnan(ref) && isnan(out)) || is_poison(lm, XATTN_DTYPE_F32, idx);
                    else if (isinf(ref) || isinf(out))
                        bad = ref != out;
                    else
                        bad = !(fabs(out - ref) <= 1e-3 * fmax(1.0, fabs(ref)));
                    if (bad)
                        fz_fail("LSE[%lld,%lld,%lld] = %.9g, reference %.9g (algo %d)",
                                (long long)b, (long long)h, (long long)s, out, ref, (int)d->algo);
                }
    }
    free(o_ref);
    free(lse_ref);
    free(written);
}

/* Elements of an output buffer outside its view keep the poison. */
static void check_outside(const fz_tensor *ft, const xattn_tensor *x, const unsigned char *mark,
                          const char *name)
{
    size_t n = ft->bytes / esz(x->dtype);
    for (size_t e = 0; e < n; e++)
        if (!mark[e] && !is_poison(ft->mem, x->dtype, e))
            fz_fail("element %zu of the %s buffer, outside the view, was written", e, name);
}

/* Buffer read/write with fuzzed ranges: in range copies, out of range is refused. */
static void fuzz_copy(rd *r, fz_input *in)
{
    const fz_tensor *ft = &in->t[T_Q];
    if (!ft->buf)
        return;
    uint64_t off = rd_u64(r), bytes = rd_u64(r);
    unsigned mode = rd_u8(r);
    if (mode & 1)
        off %= ft->bytes + 8;
    if (mode & 2)
        bytes %= ft->bytes + 8;
    unsigned char *tmp = calloc(ft->bytes, 1);
    int in_range = off <= ft->bytes && bytes <= ft->bytes - off;
    xattn_status st = (mode & 4) ? xattn_buffer_write(ft->buf, (size_t)off, tmp, (size_t)bytes)
                                 : xattn_buffer_read(ft->buf, (size_t)off, tmp, (size_t)bytes);
    check_status(st, "xattn_buffer_read/write");
    if (in_range != (st == XATTN_STATUS_OK))
        fz_fail("buffer copy [%llu, +%llu) of a %zu-byte buffer returned %s",
                (unsigned long long)off, (unsigned long long)bytes, ft->bytes,
                xattn_status_name(st));
    if (!in_range && st != XATTN_STATUS_OUT_OF_BOUNDS)
        fz_fail("an out-of-range copy returned %s, expected OUT_OF_BOUNDS", xattn_status_name(st));
    free(tmp);
}

/* The K/V caches after an accepted append: the snapshot taken before the call
 * with k_new/v_new's elements written at each sequence's slots seqlens_k[b] ..
 * seqlens_k[b] + S_new - 1 (through the block table when paged) must equal the
 * caches' memory: those slots hold the new tokens and nothing else changed. */
static void check_append(fz_input *in, unsigned char *snap_k, unsigned char *snap_v)
{
    const xattn_attn_desc *d = &in->d;
    const int64_t B = d->q.shape[0], s_new = d->k_new.shape[1], es = (int64_t)esz(d->k.dtype);
    for (int kv = 0; kv < 2; kv++) {
        const xattn_tensor *c = kv ? &d->v : &d->k, *n = kv ? &d->v_new : &d->k_new;
        const fz_tensor *fc = &in->t[kv ? T_V : T_K], *fn = &in->t[kv ? T_VNEW : T_KNEW];
        unsigned char *snap = kv ? snap_v : snap_k;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < s_new; t++) {
                const int64_t j = (int64_t)d->seqlens_k[b] + t;
                int64_t page = b, slot = j;
                if (d->block_table) {
                    page = d->block_table[b * d->max_pages_per_seq + j / c->shape[1]];
                    slot = j % c->shape[1];
                }
                for (int64_t h = 0; h < c->shape[2]; h++)
                    if (d->k.dtype == Q8) /* whole blocks */
                        for (int64_t e = 0; e < c->shape[3]; e += 32)
                            memcpy(snap + q8_block_byte(vidx(c, page, slot, h, e)),
                                   fn->mem + q8_block_byte(vidx(n, b, t, h, e)), 34);
                    else
                        for (int64_t e = 0; e < c->shape[3]; e++)
                            memcpy(snap + (size_t)es * vidx(c, page, slot, h, e),
                                   fn->mem + (size_t)es * vidx(n, b, t, h, e), (size_t)es);
            }
        if (memcmp(snap, fc->mem, fc->bytes)) {
            size_t e = 0;
            while (e < fc->bytes && snap[e] == fc->mem[e])
                e++;
            fz_fail("after an append, byte %zu of the %s cache is not what the append should "
                    "leave (S_new %lld, %s)",
                    e, kv ? "v" : "k", (long long)s_new, d->block_table ? "paged" : "contiguous");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    g_ran = g_compared = 0;
    g_data = data;
    g_size = size;
    /* the serving trailer, when the input ends with it */
    const uint8_t *sv = NULL;
    if (size >= FZ_SV_LEN + 3 && data[size - 2] == 0xa5 && data[size - 1] == 0x5a) {
        size -= FZ_SV_LEN;
        sv = data + size;
    }
    rd r = {data, size};
    xattn_mem_stats m0;
    xattn_ctx_mem_stats(g_ctx, &m0);

    /* options first: SIMD path, threads, memory limit, poisoned workspaces */
    unsigned opt = size > 2 ? data[2] : 0;
    int64_t simd = (opt >> 5) & 3;
    xattn_status st = xattn_ctx_set_option(g_ctx, XATTN_OPT_CPU_SIMD, simd);
    if (st != XATTN_STATUS_OK && st != XATTN_STATUS_UNSUPPORTED)
        fz_fail("XATTN_OPT_CPU_SIMD %lld: %s", (long long)simd, xattn_status_name(st));
    xattn_ctx_set_option(g_ctx, XATTN_OPT_NUM_THREADS, 1 + ((opt >> 4) & 1));
    xattn_ctx_set_option(g_ctx, XATTN_OPT_POISON, 1);

    fz_input *in = calloc(1, sizeof *in);
    decode(in, &r);
    if (sv) {
        rd rs = {sv, FZ_SV_LEN - 2};
        decode_serving(in, &rs);
    }
    attach_arrays(in);
    make_buffers(in);
    xattn_attn_desc *d = &in->d;

    int limited = 0;
    if (opt & 0x80) {
        /* a limit a little above what is held now: per-call arrays and
         * workspaces may or may not fit */
        xattn_mem_stats m;
        xattn_ctx_mem_stats(g_ctx, &m);
        int64_t lim = (int64_t)m.current_bytes + (int64_t)(rd_u32(&r) % 200000u) + 1;
        if (xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, lim) == XATTN_STATUS_OK)
            limited = 1;
    }

    /* a fuzzed option call: out-of-range values are refused */
    {
        int option = (int)(rd_u8(&r) % 6);
        int64_t value = (int64_t)rd_u64(&r);
        if (option == XATTN_OPT_NUM_THREADS && value >= 0 && value <= 4096)
            value = 1; /* valid but slow values stay small */
        if (option == XATTN_OPT_MEMORY_LIMIT && value >= 0)
            value = 0;
        if (option == XATTN_OPT_POISON && (value == 0 || value == 1))
            value = 1;
        st = xattn_ctx_set_option(g_ctx, (xattn_option)option, value);
        check_status(st, "xattn_ctx_set_option");
    }

    /* the measurement model on fuzzed shapes: records with work accounting */
    const int prof = rd_u8(&r) & 1;
    if (prof && xattn_profiler_enable(g_ctx, 1) != XATTN_STATUS_OK)
        fz_fail("xattn_profiler_enable: %s", xattn_last_error());
    const int want_info = size > 0 && (data[size - 1] & 1); /* the main input's last byte */
    xattn_status st_check = xattn_attention_check(g_ctx, d);
    check_status(st_check, "xattn_attention_check");
    const double work = work_of(d);
    if (st_check != XATTN_STATUS_OK || work <= FZ_WORK_CAP) {
        /* the caches, when an append may write them (the harness's own memory) */
        unsigned char *snap_k = NULL, *snap_v = NULL;
        const int watch = in->has_append && in->t[T_K].mem && in->t[T_V].mem &&
                          in->t[T_K].sel == 0 && in->t[T_V].sel == 0;
        if (watch) {
            snap_k = malloc(in->t[T_K].bytes);
            snap_v = malloc(in->t[T_V].bytes);
            memcpy(snap_k, in->t[T_K].mem, in->t[T_K].bytes);
            memcpy(snap_v, in->t[T_V].mem, in->t[T_V].bytes);
        }
        /* a rejected call must not touch the output */
        unsigned char *o_before = NULL;
        if (st_check != XATTN_STATUS_OK && in->t[T_O].mem) {
            o_before = malloc(in->t[T_O].bytes);
            memcpy(o_before, in->t[T_O].mem, in->t[T_O].bytes);
        }
        xattn_run_info info;
        memset(&info, 0, sizeof info);
        st = xattn_attention(g_ctx, d, want_info ? &info : NULL);
        check_status(st, "xattn_attention");
        if (st_check != XATTN_STATUS_OK) {
            if (st != st_check)
                fz_fail("xattn_attention returned %s, xattn_attention_check %s",
                        xattn_status_name(st), xattn_status_name(st_check));
            if (o_before && memcmp(o_before, in->t[T_O].mem, in->t[T_O].bytes))
                fz_fail("a rejected call (%s) wrote its output", xattn_status_name(st));
            if (watch && (memcmp(snap_k, in->t[T_K].mem, in->t[T_K].bytes) ||
                          memcmp(snap_v, in->t[T_V].mem, in->t[T_V].bytes)))
                fz_fail("a rejected call (%s) wrote the K/V cache", xattn_status_name(st));
        } else if (st == XATTN_STATUS_OUT_OF_MEMORY) {
            if (!limited)
                fz_fail("OUT_OF_MEMORY without a memory limit on a tiny problem: %s",
                        xattn_last_error());
            if (d->algo == XATTN_ALGO_NAIVE && strstr(xattn_last_error(), "NAIVE score") &&
                !strstr(xattn_last_error(), "FLASH"))
                fz_fail("NAIVE's out-of-memory message does not suggest FLASH: %s",
                        xattn_last_error());
        } else if (st != XATTN_STATUS_OK) {
            fz_fail("a validated call failed: %s: %s", xattn_status_name(st), xattn_last_error());
        } else if (d->q.shape[1] > 0 && d->q.shape[0] > 0) {
            g_ran = 1;
            if (watch && in->t[T_KNEW].sel == 0 && in->t[T_VNEW].sel == 0 && d->k_new.buffer &&
                d->v_new.buffer)
                check_append(in, snap_k, snap_v);
            /* it ran: the outputs, when they are the input's own and alias nothing */
            if (want_info && d->algo != XATTN_ALGO_AUTO && info.algo_chosen != d->algo)
                fz_fail("run_info.algo_chosen %d, asked for %d", (int)info.algo_chosen,
                        (int)d->algo);
            int own = in->t[T_O].sel == 0 && (!in->has_lse || in->t[T_LSE].sel == 0) &&
                      d->o.buffer && (!in->has_lse || d->lse.buffer);
            if (own) {
                size_t no = in->t[T_O].bytes / esz(d->o.dtype);
                unsigned char *mo = calloc(no ? no : 1, 1);
                int distinct = mark_view(&d->o, no, mo);
                unsigned char *ml = NULL;
                if (distinct && in->has_lse) {
                    size_t nl = in->t[T_LSE].bytes / 4;
                    ml = calloc(nl ? nl : 1, 1);
                    distinct = mark_view(&d->lse, nl, ml);
                }
                if (distinct) {
                    check_outside(&in->t[T_O], &d->o, mo, "o");
                    if (in->has_lse)
                        check_outside(&in->t[T_LSE], &d->lse, ml, "lse");
                    if (!in->wild && !in->scalar_mutated && in->special_rate == 0) {
                        compare_reference(in);
                        g_compared = 1;
                    }
                }
                free(mo);
                free(ml);
            }
        }
        free(o_before);
        free(snap_k);
        free(snap_v);
    }
    if (g_verbose)
        fprintf(stderr, "fuzz_desc: check %s%s%s, work %.0f, algo %d: %s\n",
                xattn_status_name(st_check), g_ran ? ", ran" : "", g_compared ? ", compared" : "",
                work, (int)d->algo, st_check != XATTN_STATUS_OK ? xattn_last_error() : "");
    if (prof) {
        size_t nrec = 0;
        xattn_profiler_count(g_ctx, &nrec);
        if (nrec) {
            xattn_record rec;
            if (xattn_profiler_get(g_ctx, nrec - 1, &rec) != XATTN_STATUS_OK)
                fz_fail("xattn_profiler_get: %s", xattn_last_error());
            if (!(rec.flops_useful <= rec.flops_dense * (1 + 1e-9)) || rec.flops_useful < 0)
                fz_fail("record: useful FLOPs %g beyond the dense %g", rec.flops_useful,
                        rec.flops_dense);
        }
        xattn_profiler_reset(g_ctx);
        xattn_profiler_enable(g_ctx, 0);
    }
    fuzz_copy(&r, in);

    free_input(in);
    free(in);
    xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    xattn_mem_stats m1;
    xattn_ctx_mem_stats(g_ctx, &m1);
    if (m1.current_bytes != m0.current_bytes)
        fz_fail("the context holds %llu bytes after the input, %llu before",
                (unsigned long long)m1.current_bytes, (unsigned long long)m0.current_bytes);
    return 0;
}
