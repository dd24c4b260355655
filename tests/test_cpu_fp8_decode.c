/*
 * fp8 K/V caches in the CPU's decode path: SPLITKV decode on each SIMD path
 * reads fp8 K and V in place and converts them in registers, with the
 * per-head scales applied once per tile (docs/backends.md). Its output and
 * LSE must equal, to f32 rounding, those of FLASH on the portable path (which
 * converts every tile through a table of the exact values; test_backend_ops
 * checks that one against the reference), over every byte of the formats,
 * per-head scales, a window, sinks, Dv != D and a few positions, and with
 * e4m3's NaN codes (0x7f, 0xff: finite out of the in-register conversion) in
 * K and V both inside and outside the window: NaN exactly where the code is
 * used (a K code: the rows of its head; a V code: its column of them), and
 * nowhere else.
 *
 * q8_0 caches (ggml's blocks of 32: f16 d, 32 int8) take the same kernels,
 * each block's int8 widened and multiplied by its d as loaded: the same
 * checks over quantized values with every int8 (-128 too) and subnormal,
 * tiny and large d, and a NaN d in K and in V (a V block's NaN d: its 32
 * columns of the rows that use it).
 */
#define _POSIX_C_SOURCE 200809L
#include "xattn_test.h"

typedef struct {
    const char *name;
    xattn_dtype dt;
    int Sq, D, Dv, window_left, sinks, nan;
} fcase;

static const fcase cases[] = {
    {"e4m3_decode", XATTN_DTYPE_FP8_E4M3, 1, 128, 128, -1, 0, 0},
    {"e5m2_decode", XATTN_DTYPE_FP8_E5M2, 1, 64, 32, -1, 1, 0},
    {"e4m3_spec4_window", XATTN_DTYPE_FP8_E4M3, 4, 64, 64, 100, 1, 0},
    /* NaN codes in K and V: used (row NaN) and outside the window (unused) */
    {"e4m3_nan_codes", XATTN_DTYPE_FP8_E4M3, 1, 64, 48, 150, 0, 1},
    {"e4m3_nan_codes_spec2", XATTN_DTYPE_FP8_E4M3, 2, 32, 32, 150, 1, 1},
    {"q8_0_decode", XATTN_DTYPE_Q8_0, 1, 128, 128, -1, 0, 0},
    {"q8_0_dv32_sinks", XATTN_DTYPE_Q8_0, 1, 64, 32, -1, 1, 0},
    {"q8_0_spec4_window", XATTN_DTYPE_Q8_0, 4, 64, 96, 100, 1, 0},
    {"q8_0_nan_d", XATTN_DTYPE_Q8_0, 1, 64, 64, 150, 0, 1},
    {"q8_0_nan_d_spec2", XATTN_DTYPE_Q8_0, 2, 32, 64, 150, 1, 1},
};

enum { B = 2, HQ = 8, HKV = 2 };
static const int32_t lens[B] = {333, 200};

/* One call on ctx; O and LSE into o, lse. */
static xattn_status run(xattn_ctx *ctx, const fcase *c, xattn_algo algo, int Sk, const float *q,
                        const uint8_t *k, const uint8_t *v, const float *ks, const float *vs,
                        const float *sinks, float *o, float *lse)
{
    const size_t qn = (size_t)B * c->Sq * HQ * c->D, on = (size_t)B * c->Sq * HQ * c->Dv;
    const size_t kn = xattn_dtype_bytes(c->dt, (uint64_t)B * Sk * HKV * c->D),
                 vn = xattn_dtype_bytes(c->dt, (uint64_t)B * Sk * HKV * c->Dv);
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL, *bs = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, qn * 4, &bq);
    if (!st)
        st = xattn_buffer_alloc(ctx, kn, &bk);
    if (!st)
        st = xattn_buffer_alloc(ctx, vn, &bv);
    if (!st)
        st = xattn_buffer_alloc(ctx, on * 4, &bo);
    if (!st)
        st = xattn_buffer_alloc(ctx, (size_t)B * HQ * c->Sq * 4, &bl);
    if (!st)
        st = xattn_buffer_alloc(ctx, (size_t)(HQ + 2 * HKV) * 4, &bs);
    if (!st) {
        xattn_buffer_write(bq, 0, q, qn * 4);
        xattn_buffer_write(bk, 0, k, kn);
        xattn_buffer_write(bv, 0, v, vn);
        xattn_buffer_write(bs, 0, sinks, (size_t)HQ * 4);
        xattn_buffer_write(bs, (size_t)HQ * 4, ks, (size_t)HKV * 4);
        xattn_buffer_write(bs, (size_t)(HQ + HKV) * 4, vs, (size_t)HKV * 4);
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, B, c->Sq, HQ, c->D);
        d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, B, c->Sq, HQ, c->Dv);
        d.lse = xattn_tensor_bhsd(bl, 0, XATTN_DTYPE_F32, B, HQ, c->Sq, 1);
        d.k = xattn_tensor_bshd(bk, 0, c->dt, B, Sk, HKV, c->D);
        d.v = xattn_tensor_bshd(bv, 0, c->dt, B, Sk, HKV, c->Dv);
        if (c->dt != XATTN_DTYPE_Q8_0) { /* (q8_0 blocks carry their scales) */
            d.k_scale = xattn_tensor_bshd(bs, HQ * 4, XATTN_DTYPE_F32, 1, 1, HKV, 1);
            d.v_scale = xattn_tensor_bshd(bs, (HQ + HKV) * 4, XATTN_DTYPE_F32, 1, 1, HKV, 1);
        }
        d.seqlens_k = lens;
        d.causal = 1;
        d.window_left = c->window_left;
        if (c->sinks)
            d.sinks = xattn_tensor_bshd(bs, 0, XATTN_DTYPE_F32, 1, 1, HQ, 1);
        d.algo = algo;
        d.num_splits = algo == XATTN_ALGO_SPLITKV ? 3 : 0;
        st = xattn_attention(ctx, &d, NULL);
        if (!st)
            st = xattn_buffer_read(bo, 0, o, on * 4);
        if (!st)
            st = xattn_buffer_read(bl, 0, lse, (size_t)B * HQ * c->Sq * 4);
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);
    xattn_buffer_free(bs);
    return st;
}

/* n values of q8_0 at x: quantized random values (ggml's rounding) with
 * block b's values spread over 2^-6 .. 2^2 by block, then a few bytes set by hand:
 * qs -128 (which quantizing never gives) and subnormal d. */
static void fill_q8(uint8_t *x, size_t n, uint64_t *rng)
{
    float *f = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        f[i] = xattn_test_rng_val(rng) * ldexpf(1.0f, (int)((i / 32) % 9) - 6);
    EXPECT_OK(xattn_quantize_q8_0(f, x, (int64_t)n));
    free(f);
    for (size_t blk = 0; blk < n / 32; blk++) {
        uint8_t *b = x + blk * 34;
        if (blk % 7 == 3)
            b[2 + (blk % 32)] = 0x80; /* qs -128 */
        if (blk % 11 == 5) {          /* a subnormal d, either sign */
            b[0] = (uint8_t)(xattn_test_rng_next(rng) >> 24);
            b[1] = (uint8_t)((blk & 1) << 7 | (xattn_test_rng_next(rng) >> 62));
        }
    }
}

/* Puts the NaN d of the q8_0 block holding value col of the row of (b, key,
 * KV head) of a cache with n values per row, or sets that value's fp8 byte to
 * code. */
static void put_nan(uint8_t *x, xattn_dtype dt, int Sk, int n, int b, int key, int h, int col,
                    uint8_t code)
{
    const size_t e = (((size_t)b * Sk + key) * HKV + h) * n + col;
    if (dt == XATTN_DTYPE_Q8_0) {
        x[e / 32 * 34] = 0x01; /* f16 0x7e01 */
        x[e / 32 * 34 + 1] = 0x7e;
    } else {
        x[e] = code;
    }
}

int main(void)
{
    static const char *simd_names[] = {"portable", "avx2", "avx512"};
    uint64_t rng = 4242;
    const int Sk = 333;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const fcase *c = &cases[ci];
        const size_t qn = (size_t)B * c->Sq * HQ * c->D, on = (size_t)B * c->Sq * HQ * c->Dv;
        const size_t kn = (size_t)B * Sk * HKV * c->D, vn = (size_t)B * Sk * HKV * c->Dv;
        const size_t ln = (size_t)B * HQ * c->Sq;
        float *q = malloc(qn * 4), sinks[HQ], ks[HKV], vs[HKV];
        const size_t kb = xattn_dtype_bytes(c->dt, kn), vb = xattn_dtype_bytes(c->dt, vn);
        uint8_t *k = calloc(kb, 1), *v = calloc(vb, 1);
        const int e4 = c->dt == XATTN_DTYPE_FP8_E4M3, q8 = c->dt == XATTN_DTYPE_Q8_0;
        for (size_t i = 0; i < qn; i++)
            q[i] = xattn_test_rng_val(&rng);
        /* Every byte but the NaN codes (and e5m2's inf/NaN), both signs,
         * subnormals to the largest, under small scales (e4m3 up to 448). */
        for (int t = 0; q8 && t < 2; t++)
            fill_q8(t ? v : k, t ? vn : kn, &rng);
        for (int t = 0; !q8 && t < 2; t++) {
            uint8_t *x = t ? v : k;
            for (size_t i = 0, n = t ? vn : kn; i < n; i++) {
                uint8_t b = (uint8_t)(xattn_test_rng_next(&rng) >> 24);
                if (e4 ? (b & 0x7f) == 0x7f : (b & 0x7c) == 0x7c)
                    b ^= 0x08;
                x[i] = b;
            }
        }
        for (int h = 0; h < HKV; h++) {
            ks[h] = (e4 ? 0.02f : 2e-5f) * (float)(h + 1);
            vs[h] = (e4 ? 0.5f : 1e-3f) / (float)(h + 1);
        }
        for (int h = 0; h < HQ; h++)
            sinks[h] = xattn_test_rng_val(&rng);
        int nan_k_row = -1, nan_v_row = -1; /* (b, KV head) whose rows must be NaN */
        if (c->nan) {
            /* K: sequence 1, KV head 0, key 190 (in the window of the last
             * position 199), and key 10 (outside: unused). */
            put_nan(k, c->dt, Sk, c->D, 1, 190, 0, 5, 0x7f);
            put_nan(k, c->dt, Sk, c->D, 1, 10, 0, 7, 0xff);
            /* V: sequence 0, KV head 1, key 300 (used), key 20 (unused); a
             * q8_0 NaN d: the block of columns 32 .. 63 of key 300. */
            put_nan(v, c->dt, Sk, c->Dv, 0, 300, 1, q8 ? 40 : 9, 0xff);
            put_nan(v, c->dt, Sk, c->Dv, 0, 20, 1, 1, 0x7f);
            nan_k_row = 1 * HKV + 0;
            nan_v_row = 0 * HKV + 1;
        }
        float *o0 = malloc(on * 4), *l0 = malloc(ln * 4), *o1 = malloc(on * 4),
              *l1 = malloc(ln * 4);
        xattn_ctx *ref = NULL;
        EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ref));
        EXPECT_OK(xattn_ctx_set_option(ref, XATTN_OPT_CPU_SIMD, 1));
        EXPECT_OK(run(ref, c, XATTN_ALGO_FLASH, Sk, q, k, v, ks, vs, sinks, o0, l0));
        xattn_ctx_destroy(ref);
        /* What the NaN codes reach is NaN (a K code: the rows of its head; a
         * V code: their column 9, a q8_0 NaN d its block's columns 32 .. 63),
         * all else finite. */
        for (size_t i = 0; i < on; i++) {
            const size_t row = i / (size_t)c->Dv, b = row / ((size_t)c->Sq * HQ);
            const int bh = (int)(b * HKV + (row % HQ) / (HQ / HKV));
            const size_t col = i % (size_t)c->Dv;
            const int want =
                bh == nan_k_row || (bh == nan_v_row && (q8 ? col / 32 == 1 : col == 9));
            if ((o0[i] != o0[i]) != want) {
                EXPECT(0, "%s: the portable FLASH row %zu is %s", c->name, row,
                       want ? "not NaN" : "NaN");
                break;
            }
        }
        for (int si = 1; si <= 3; si++) {
            xattn_ctx *ctx = NULL;
            EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx));
            xattn_status st = xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, si);
            if (st == XATTN_STATUS_UNSUPPORTED) {
                SKIP("cpu:%s: %s", simd_names[si - 1], xattn_last_error());
                xattn_ctx_destroy(ctx);
                continue;
            }
            EXPECT_OK(st);
            EXPECT_OK(xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1));
            for (size_t i = 0; i < on; i++)
                o1[i] = 12345.0f;
            st = run(ctx, c, XATTN_ALGO_SPLITKV, Sk, q, k, v, ks, vs, sinks, o1, l1);
            double md = 0.0;
            int nan_bad = 0;
            for (size_t i = 0; i < on; i++) {
                nan_bad |= (o1[i] != o1[i]) != (o0[i] != o0[i]);
                if (o0[i] == o0[i])
                    md = fmax(md, fabs((double)o1[i] - o0[i]) / (1.0 + fabs((double)o0[i])));
            }
            for (size_t i = 0; i < ln; i++) {
                nan_bad |= (l1[i] != l1[i]) != (l0[i] != l0[i]);
                if (l0[i] == l0[i])
                    md = fmax(md, fabs((double)l1[i] - l0[i]) / (1.0 + fabs((double)l0[i])));
            }
            EXPECT(st == XATTN_STATUS_OK && !nan_bad && md <= 2e-5,
                   "cpu:%s %s splitkv: %s, NaN rows %s, largest difference to portable flash "
                   "%.3g",
                   simd_names[si - 1], c->name, xattn_status_name(st), nan_bad ? "differ" : "agree",
                   md);
            xattn_ctx_destroy(ctx);
        }
        free(q);
        free(k);
        free(v);
        free(o0);
        free(l0);
        free(o1);
        free(l1);
    }
    return xattn_test_summary();
}
