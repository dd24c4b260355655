/*
 * test_cuda_emu: the CUDA kernels of kernels_cuda/ (the same sources nvcc
 * builds, compiled as C++ for the CPU emulator of xattn_cuda_emu.h) against a
 * double-precision reference written here from the semantics of docs/semantics.md, on the
 * mma (tensor-core) and simt paths, for NAIVE, FLASH and SPLITKV and every
 * feature of the problem. Runs without a GPU: it checks the kernels' logic
 * (indexing, masking, tile skipping, the online softmax, fragment layouts, the
 * cp.async pipeline, split/combine), not the hardware.
 *
 * Inputs: random values in the views, NaN everywhere else in their buffers
 * (a read at a wrong address shows). Outputs: a NaN poison pattern first; every
 * element the kernels must write is compared, every other one must still hold
 * the poison. Acceptance as in test_backend_ops: e <= 3r + 1e-5 and
 * m <= 3mr + 1e-4 (r, mr: the reference rounded to the output dtype), NaN
 * positions equal, exact zeros where the reference is exactly 0; LSE within
 * 1e-4 relative, -inf and NaN equal. Every case also checks the executed-work
 * counts the kernels write against an independent walk of the tiles
 * (expected_counts), and the tensor-core ceiling's kernel computes what its
 * FLOP count assumes.
 *
 * Usage: test_cuda_emu [case-substring] [-v]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "xattn_cuda_kernels.h"

/* The wide mma shape's K/V ring stages: the build switch of
 * xattn_cuda_common.cuh (that header is not included here), 2 by default. */
#ifndef XATTN_CUDA_MMA_STAGES
#define XATTN_CUDA_MMA_STAGES 2
#endif

/* The emulator's context (xattn_cuda_emu.cpp; its header redefines CUDA names,
 * so it is not included here): launches, the shared-memory attribute and a
 * device reset, as the kernels' translation unit sees them. */
cudaError_t xattn_emu_run(const void *fn, const std::function<void()> &body, unsigned grid,
                          unsigned block, size_t smem);
cudaError_t xattn_emu_take_error(void);
cudaError_t xattn_emu_func_set_smem(const void *fn, int bytes);
cudaError_t xattn_emu_device_reset(void);
extern unsigned long xattn_emu_attr_calls, xattn_emu_resets;

static int verbose;

/* ---- dtypes ----------------------------------------------------------------- */

static bool is_fp8(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_FP8_E4M3 || dt == XATTN_DTYPE_FP8_E5M2;
}

/* q8_0 K/V (ggml's block_q8_0): addressed by value through the semantics
 * header's byte helpers, as the kernels are. Writing value i sets its int8
 * and its block's d, d = 2^-(6 + block % 3) (a NaN value makes d NaN, so
 * the whole block reads NaN, kernels and reference alike): rows of K/V are
 * whole blocks, and every value of a row is written. */
static bool is_q8(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_Q8_0;
}

static float q8_value(const unsigned char *base, int64_t i)
{
    uint16_t d;
    memcpy(&d, base + xattn_sem_q8_0_d_byte(i), 2);
    return __half2float(__ushort_as_half(d)) * (float)(int8_t)base[xattn_sem_q8_0_qs_byte(i)];
}

static void q8_write(unsigned char *base, int64_t i, float x)
{
    const float dv = isnan(x) ? NAN : ldexpf(1.0f, -(6 + (int)((i / 32) % 3)));
    const uint16_t d = __half_as_ushort(__float2half_rn(dv));
    memcpy(base + xattn_sem_q8_0_d_byte(i), &d, 2);
    const long q = isnan(x) ? 0 : lrintf(x / dv);
    base[xattn_sem_q8_0_qs_byte(i)] = (unsigned char)(int8_t)(q < -127 ? -127 : q > 127 ? 127 : q);
}

/* (q8_0: bytes per value rounded up, for the few callers that size by it) */
static size_t dsz(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_F32 ? 4 : is_fp8(dt) ? 1 : 2;
}

/* An fp8 byte's value from the formats' definitions (OCP: E4M3 bias 7, no
 * infinities, S.1111.111 NaN; E5M2 bias 15, IEEE-like top exponent), by
 * ldexp: independent of the kernels' bit operations. */
static float fp8_value(unsigned x, xattn_dtype dt)
{
    const bool e5 = dt == XATTN_DTYPE_FP8_E5M2;
    const int mb = e5 ? 2 : 3, bias = e5 ? 15 : 7;
    const int e = (int)((x & 0x7fu) >> mb), m = (int)(x & ((1u << mb) - 1u));
    double v;
    if (e5 && e == 31)
        v = m ? NAN : INFINITY;
    else if (!e5 && e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mb);
    else
        v = ldexp((double)((1 << mb) + m), e - bias - mb);
    return (float)((x & 0x80u) ? -v : v);
}

/* The nearest fp8 byte (ties to the even code); NaN -> 0xff (a NaN code in
 * both formats, sign set), past the largest finite value: inf (E5M2) or NaN
 * (E4M3). */
static unsigned char fp8_code(float x, xattn_dtype dt)
{
    if (isnan(x))
        return 0xff;
    const bool e5 = dt == XATTN_DTYPE_FP8_E5M2;
    const unsigned sign = signbit(x) ? 0x80u : 0u;
    const double ax = fabs((double)x), mx = e5 ? 57344.0 : 448.0;
    if (ax > mx)
        return (unsigned char)(e5 ? sign | 0x7cu : 0xffu);
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned c = 0; c < 0x80u; c++) {
        const double v = fp8_value(c, dt);
        if (isnan(v) || isinf(v))
            continue;
        const double d = fabs(v - ax);
        if (d < bd || (d == bd && (c & 1u) == 0)) {
            bd = d;
            best = c;
        }
    }
    return (unsigned char)(sign | best);
}

static float to_f32(const unsigned char *base, xattn_dtype dt, int64_t i)
{
    if (is_q8(dt))
        return q8_value(base, i);
    if (is_fp8(dt))
        return fp8_value(base[i], dt);
    if (dt == XATTN_DTYPE_F32) {
        float f;
        memcpy(&f, base + 4 * i, 4);
        return f;
    }
    uint16_t b;
    memcpy(&b, base + 2 * i, 2);
    if (dt == XATTN_DTYPE_F16)
        return __half2float(__ushort_as_half(b));
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void from_f32(unsigned char *base, xattn_dtype dt, int64_t i, float x)
{
    if (is_q8(dt)) {
        q8_write(base, i, x);
        return;
    }
    if (is_fp8(dt)) {
        base[i] = fp8_code(x, dt);
        return;
    }
    if (dt == XATTN_DTYPE_F32) {
        memcpy(base + 4 * i, &x, 4);
        return;
    }
    uint16_t b = dt == XATTN_DTYPE_F16 ? __half_as_ushort(__float2half_rn(x))
                                       : __bfloat16_as_ushort(__float2bfloat16_rn(x));
    memcpy(base + 2 * i, &b, 2);
}

static double round_to(double x, xattn_dtype dt)
{
    unsigned char tmp[4];
    from_f32(tmp, dt, 0, (float)x);
    return to_f32(tmp, dt, 0);
}

/* Poison: a quiet NaN with a payload no arithmetic produces. */
static void poison(unsigned char *base, xattn_dtype dt, int64_t i)
{
    if (is_fp8(dt)) {
        base[i] = 0xff;
        return;
    }
    if (dt == XATTN_DTYPE_F32) {
        uint32_t u = 0x7fc0deadu;
        memcpy(base + 4 * i, &u, 4);
    } else {
        uint16_t u = dt == XATTN_DTYPE_F16 ? 0x7e5a : 0x7fda;
        memcpy(base + 2 * i, &u, 2);
    }
}

static bool is_poison(const unsigned char *base, xattn_dtype dt, int64_t i)
{
    unsigned char tmp[4];
    poison(tmp, dt, 0);
    return memcmp(base + dsz(dt) * i, tmp, dsz(dt)) == 0;
}

/* ---- random numbers ------------------------------------------------------- */

static uint64_t rs;
static uint64_t rnext(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}
static double runif(void)
{
    return (double)(rnext() >> 11) * (1.0 / 9007199254740992.0);
}
static int rint_(int lo, int hi)
{
    return lo + (int)(rnext() % (uint64_t)(hi - lo + 1));
}

/* ---- cases ------------------------------------------------------------------ */

/* L_BLOCKED: BSHD with whole q8_0 blocks of offset and of padding between
 * sequences (offset 32 values, 34 bytes: the view's start is not byte 0). */
enum { L_BSHD, L_BHSD, L_PADDED, L_STRIDED, L_MISALIGNED, L_BLOCKED };
enum { LENS_FULL, LENS_PADDED, LENS_VARLEN };
enum { BIAS_NONE, BIAS_11, BIAS_BH, BIAS_1H, BIAS_B1 };

struct Case {
    std::string name;
    int B = 1, Sq = 17, Sk = 70, Hq = 2, Hkv = 1, D = 64, Dv = 64;
    xattn_dtype dq = XATTN_DTYPE_F16, dkv = XATTN_DTYPE_F16;
    xattn_algo algo = XATTN_ALGO_FLASH;
    int cc = 80, simt = 0, splits = 0, sms = 4;
    int narrow = 0; /* the mma path's shape: 0 wide, 1 narrow (64 rows), -1 by head dim */
    int causal = 0, bottom_right = 1;
    long long wl = -1, wr = -1;
    float softcap = 0.0f, scale = 0.0f;
    int alibi = 0, bias = BIAS_NONE, bias_f16 = 0, bias_ninf = 0;
    int lens = LENS_FULL, layout = L_BSHD, lse = 1;
    int nan = 0; /* 1: one NaN in q, 2: in k, 3: in v */
    /* inf/NaN in V at XATTN_EMU_VBAD_KEYS keys (the same key indices in every
     * sequence, one dim each, every KV head): 1 NaN, 2 +inf, 3 +inf and -inf.
     * Rows that mask such a key must not see it (docs/semantics.md step 8). */
    int vbad = 0;
    /* With a bias: at those keys, a third of the rows get a -inf bias (masked)
     * and a third -200 (unmasked, a weight that underflows in f32 but not in
     * the double reference: the key's inf/NaN must still reach the row). */
    int vbad_bias = 0;
    int vbad_from = 0; /* the inf/NaN keys are chosen in [vbad_from, Sk) */
    /* With a bias: even rows get -200 at every key from bias_tail on (0: off),
     * so that a SPLITKV chunk there weighs 0 in f32 in the combine. */
    int bias_tail = 0;
    /* Attention sinks: 1 = logits near the scores' (the last head -inf: no
     * sink), 2 = large ones (6 + h) that dominate the denominator (and
     * still leave f16 outputs well above f16's underflow). */
    int sinks = 0;
    /* Paged K/V (0: contiguous): the keys move to page pools of `page`
     * tokens in c.layout's order ([pages, page, H, D], or [pages, H, page, D]
     * with L_BHSD), pages shuffled, a NaN page in every unused table entry and
     * NaN in a page's unused slots; the reference reads the contiguous copy.
     * Padded or full lengths only (a paged cache has no packed mode). */
    int page = 0;
    /* fp8 K/V (dkv FP8_E4M3 / E5M2): kvscale = per-KV-head k_scale and
     * v_scale; fp8_range = K/V codes drawn uniformly over every finite code
     * of the format (subnormals and the maxima included), with scales that
     * bring the largest to about 1. */
    int kvscale = 0, fp8_range = 0;
};

#define XATTN_EMU_VBAD_KEYS 3

struct Tensor {
    std::vector<unsigned char> mem;
    xattn_view v;
    int64_t n[4]; /* extents: batch, tokens, heads, dims */
};

static void view_make(Tensor *t, xattn_dtype dt, int64_t nb, int64_t ns, int64_t nh, int64_t nd,
                      int layout, bool fill_nan)
{
    xattn_view &v = t->v;
    memset(&v, 0, sizeof v);
    v.dtype = dt;
    t->n[0] = nb;
    t->n[1] = ns;
    t->n[2] = nh;
    t->n[3] = nd;
    switch (layout) {
    case L_BHSD: v.sd = 1, v.ss = nd, v.sh = ns * nd, v.sb = nh * ns * nd, v.off = 0; break;
    case L_PADDED:
        v.sd = 1, v.sh = nd + 8, v.ss = nh * (nd + 8) + 8, v.sb = ns * v.ss + 16, v.off = 8;
        break;
    case L_STRIDED:
        v.sd = 2, v.sh = 2 * nd + 1, v.ss = nh * v.sh + 3, v.sb = ns * v.ss, v.off = 5;
        break;
    case L_MISALIGNED: v.sd = 1, v.sh = nd, v.ss = nh * nd, v.sb = ns * nh * nd, v.off = 3; break;
    case L_BLOCKED:
        v.sd = 1, v.sh = nd, v.ss = nh * nd, v.sb = ns * nh * nd + 64, v.off = 32;
        break;
    default: v.sd = 1, v.sh = nd, v.ss = nh * nd, v.sb = ns * nh * nd, v.off = 0;
    }
    if (nb == 1)
        v.sb = 0;
    int64_t last =
        v.off + (nb - 1) * v.sb + (ns > 0 ? ns - 1 : 0) * v.ss + (nh - 1) * v.sh + (nd - 1) * v.sd;
    t->mem.assign(is_q8(dt) ? (size_t)((last + 9) / 32 + 2) * 34 : (size_t)(last + 9) * dsz(dt), 0);
    for (int64_t i = 0; i < last + 9; i++) {
        if (fill_nan)
            from_f32(t->mem.data(), dt, i, NAN);
        else
            poison(t->mem.data(), dt, i);
    }
}

static int64_t vidx(const xattn_view &v, int64_t b, int64_t s, int64_t h, int64_t d)
{
    return v.off + b * v.sb + s * v.ss + h * v.sh + d * v.sd;
}

struct Prob {
    Case c;
    int64_t B, Sq, Sk, Bt, Tq, Tk;
    std::vector<int32_t> lq, lk, q0, k0;
    std::vector<float> alibi;
    std::vector<float> sinks;  /* head h at 1 + 2h, NaN between: a wrong index shows */
    std::vector<float> ks, vs; /* fp8 scales, KV head hk at 1 + 2hk, NaN between */
    Tensor q, k, v, o, lse, bias;
    Tensor kc, vc;              /* paged: the contiguous K/V the reference reads */
    std::vector<int32_t> table; /* paged: [B, maxp] */
    int64_t maxp = 0, npages = 0;
    xattn_problem p;
};

/* Moves K/V into shuffled page pools (Case::page): sequence b's pages are
 * table[b * maxp + 0 ..], the entries past them (there is always one more)
 * name a spare page that holds only NaN, as the unused slots of a sequence's
 * last page do: a read of a key the sequence does not have shows. */
static void paginate(Prob *P)
{
    const Case &c = P->c;
    const int64_t ps = c.page, B = P->B;
    int64_t used = 0, longest = 0;
    for (int64_t b = 0; b < B; b++) {
        used += (P->lk[(size_t)b] + ps - 1) / ps;
        longest = std::max<int64_t>(longest, P->lk[(size_t)b]);
    }
    P->maxp = (longest + ps - 1) / ps + 1;
    P->npages = used + 2;
    std::vector<int32_t> perm((size_t)P->npages);
    for (int64_t i = 0; i < P->npages; i++)
        perm[(size_t)i] = (int32_t)i;
    for (int64_t i = P->npages - 1; i > 0; i--)
        std::swap(perm[(size_t)i], perm[(size_t)rint_(0, (int)i)]);
    P->table.assign((size_t)(B * P->maxp), perm[(size_t)used]);
    P->kc = std::move(P->k);
    P->vc = std::move(P->v);
    view_make(&P->k, c.dkv, P->npages, ps, c.Hkv, c.D, c.layout, true);
    view_make(&P->v, c.dkv, P->npages, ps, c.Hkv, c.Dv, c.layout, true);
    const size_t es = dsz(c.dkv);
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t g = 0; g * ps < P->lk[(size_t)b]; g++)
            P->table[(size_t)(b * P->maxp + g)] = perm[(size_t)n++];
        for (int64_t j = 0; j < P->lk[(size_t)b]; j++) {
            const int64_t pg = P->table[(size_t)(b * P->maxp + j / ps)], slot = j % ps;
            if (is_q8(c.dkv)) { /* whole blocks: 34 bytes from each block's d */
                for (int64_t h = 0; h < c.Hkv; h++) {
                    for (int64_t d = 0; d < c.D; d += 32)
                        memcpy(
                            &P->k.mem[(size_t)xattn_sem_q8_0_d_byte(vidx(P->k.v, pg, slot, h, d))],
                            &P->kc.mem[(size_t)xattn_sem_q8_0_d_byte(
                                vidx(P->kc.v, b, P->k0[(size_t)b] + j, h, d))],
                            34);
                    for (int64_t d = 0; d < c.Dv; d += 32)
                        memcpy(
                            &P->v.mem[(size_t)xattn_sem_q8_0_d_byte(vidx(P->v.v, pg, slot, h, d))],
                            &P->vc.mem[(size_t)xattn_sem_q8_0_d_byte(
                                vidx(P->vc.v, b, P->k0[(size_t)b] + j, h, d))],
                            34);
                }
                continue;
            }
            for (int64_t h = 0; h < c.Hkv; h++) {
                for (int64_t d = 0; d < c.D; d++)
                    memcpy(&P->k.mem[(size_t)vidx(P->k.v, pg, slot, h, d) * es],
                           &P->kc.mem[(size_t)vidx(P->kc.v, b, P->k0[(size_t)b] + j, h, d) * es],
                           es);
                for (int64_t d = 0; d < c.Dv; d++)
                    memcpy(&P->v.mem[(size_t)vidx(P->v.v, pg, slot, h, d) * es],
                           &P->vc.mem[(size_t)vidx(P->vc.v, b, P->k0[(size_t)b] + j, h, d) * es],
                           es);
            }
        }
    }
    P->Sk = longest; /* as the library's validation sets it */
}

static void prob_build(Prob *P, const Case &c)
{
    P->c = c;
    const int B = c.B;
    P->B = B;
    P->lq.assign(B, c.Sq);
    P->lk.assign(B, c.Sk);
    P->q0.assign(B, 0);
    P->k0.assign(B, 0);
    if (c.lens != LENS_FULL) {
        for (int b = 0; b < B; b++) {
            P->lq[b] = rint_(0, c.Sq);
            P->lk[b] = rint_(0, c.Sk);
        }
        if (B >= 3) { /* a full sequence, an empty query, an empty key set */
            P->lq[0] = c.Sq;
            P->lk[0] = c.Sk;
            P->lq[1] = 0;
            P->lk[2] = 0;
        }
        if (B >= 4) { /* padding rows next to real rows that see every key */
            P->lq[3] = c.Sq / 2;
            P->lk[3] = c.Sk;
        }
    }
    if (c.lens == LENS_VARLEN) {
        int64_t tq = 0, tk = 0, mq = 0, mk = 0;
        for (int b = 0; b < B; b++) {
            P->q0[b] = (int32_t)tq;
            P->k0[b] = (int32_t)tk;
            tq += P->lq[b];
            tk += P->lk[b];
            mq = P->lq[b] > mq ? P->lq[b] : mq;
            mk = P->lk[b] > mk ? P->lk[b] : mk;
        }
        P->Bt = 1, P->Tq = tq > 0 ? tq : 1, P->Tk = tk > 0 ? tk : 1, P->Sq = mq, P->Sk = mk;
    } else {
        P->Bt = B, P->Tq = c.Sq, P->Tk = c.Sk, P->Sq = c.Sq, P->Sk = c.Sk;
    }
    view_make(&P->q, c.dq, P->Bt, P->Tq, c.Hq, c.D, c.layout, true);
    view_make(&P->k, c.dkv, P->Bt, P->Tk, c.Hkv, c.D, c.layout, true);
    view_make(&P->v, c.dkv, P->Bt, P->Tk, c.Hkv, c.Dv, c.layout, true);
    view_make(&P->o, c.dq, P->Bt, P->Tq, c.Hq, c.Dv, c.layout, false);
    for (int64_t b = 0; b < P->Bt; b++) {
        for (int64_t s = 0; s < P->Tq; s++)
            for (int64_t h = 0; h < c.Hq; h++)
                for (int64_t d = 0; d < c.D; d++)
                    from_f32(P->q.mem.data(), c.dq, vidx(P->q.v, b, s, h, d),
                             (float)(2 * runif() - 1));
        for (int64_t s = 0; s < P->Tk; s++)
            for (int64_t h = 0; h < c.Hkv; h++) {
                for (int64_t d = 0; d < c.D; d++)
                    from_f32(P->k.mem.data(), c.dkv, vidx(P->k.v, b, s, h, d),
                             (float)(2 * runif() - 1));
                for (int64_t d = 0; d < c.Dv; d++)
                    from_f32(P->v.mem.data(), c.dkv, vidx(P->v.v, b, s, h, d),
                             (float)(2 * runif() - 1));
            }
    }
    if (c.fp8_range) {
        /* Uniform over the finite codes: bytes written as they are. */
        auto code = [&]() {
            for (;;) {
                const unsigned x = (unsigned)(rnext() & 0xffu);
                if (!isnan(fp8_value(x, c.dkv)) && !isinf(fp8_value(x, c.dkv)))
                    return (unsigned char)x;
            }
        };
        for (int64_t b = 0; b < P->Bt; b++)
            for (int64_t s = 0; s < P->Tk; s++)
                for (int64_t h = 0; h < c.Hkv; h++) {
                    for (int64_t d = 0; d < c.D; d++)
                        P->k.mem[(size_t)vidx(P->k.v, b, s, h, d)] = code();
                    for (int64_t d = 0; d < c.Dv; d++)
                        P->v.mem[(size_t)vidx(P->v.v, b, s, h, d)] = code();
                }
    }
    if (c.kvscale) {
        const double mx = c.dkv == XATTN_DTYPE_FP8_E5M2 ? 57344.0 : 448.0;
        P->ks.assign((size_t)(2 * c.Hkv + 1), NAN);
        P->vs.assign((size_t)(2 * c.Hkv + 1), NAN);
        for (int h = 0; h < c.Hkv; h++) {
            const double base = c.fp8_range ? 1.0 / mx : 1.0;
            P->ks[(size_t)(1 + 2 * h)] = (float)(base * (0.5 + runif()));
            P->vs[(size_t)(1 + 2 * h)] = (float)(base * (0.25 + 2 * runif()));
        }
    }
    /* Padding tokens of padded batches hold NaN: the kernels must not read them. */
    if (c.lens == LENS_PADDED) {
        for (int b = 0; b < B; b++) {
            for (int64_t s = P->lq[b]; s < P->Tq; s++)
                for (int64_t h = 0; h < c.Hq; h++)
                    for (int64_t d = 0; d < c.D; d++)
                        from_f32(P->q.mem.data(), c.dq, vidx(P->q.v, b, s, h, d), NAN);
            for (int64_t s = P->lk[b]; s < P->Tk; s++)
                for (int64_t h = 0; h < c.Hkv; h++) {
                    for (int64_t d = 0; d < c.D; d++)
                        from_f32(P->k.mem.data(), c.dkv, vidx(P->k.v, b, s, h, d), NAN);
                    for (int64_t d = 0; d < c.Dv; d++)
                        from_f32(P->v.mem.data(), c.dkv, vidx(P->v.v, b, s, h, d), NAN);
                }
        }
    }
    if (c.nan) {
        int b = 0;
        while (b < B - 1 && (P->lq[b] == 0 || P->lk[b] == 0))
            b++;
        int64_t tb = c.lens == LENS_VARLEN ? 0 : b;
        if (c.nan == 1 && P->lq[b] > 0)
            from_f32(P->q.mem.data(), c.dq,
                     vidx(P->q.v, tb, P->q0[b] + rint_(0, P->lq[b] - 1), rint_(0, c.Hq - 1),
                          rint_(0, c.D - 1)),
                     NAN);
        if (c.nan >= 2 && P->lk[b] > 0) {
            Tensor &t = c.nan == 2 ? P->k : P->v;
            from_f32(t.mem.data(), c.dkv,
                     vidx(t.v, tb, P->k0[b] + rint_(0, P->lk[b] - 1), rint_(0, c.Hkv - 1),
                          rint_(0, (c.nan == 2 ? c.D : c.Dv) - 1)),
                     NAN);
        }
    }
    std::vector<int64_t> bad_keys;
    if (c.vbad) {
        for (int n = 0; n < XATTN_EMU_VBAD_KEYS && P->Sk > 0; n++)
            bad_keys.push_back(rint_(c.vbad_from, (int)P->Sk - 1));
        for (int64_t b = 0; b < B; b++) {
            const int64_t tb = c.lens == LENS_VARLEN ? 0 : b;
            for (size_t n = 0; n < bad_keys.size(); n++) {
                if (bad_keys[n] >= P->lk[b])
                    continue;
                const float x = c.vbad == 1 ? NAN : (c.vbad == 3 && n % 2) ? -INFINITY : INFINITY;
                for (int64_t h = 0; h < c.Hkv; h++)
                    from_f32(P->v.mem.data(), c.dkv,
                             vidx(P->v.v, tb, P->k0[b] + bad_keys[n], h, rint_(0, c.Dv - 1)), x);
            }
        }
    }
    if (c.page)
        paginate(P);
    /* LSE [B, Hq, Sq] (varlen: [1, Hq, Tq]), f32, with a gap between heads. */
    {
        xattn_view &l = P->lse.v;
        memset(&l, 0, sizeof l);
        l.dtype = XATTN_DTYPE_F32;
        l.ss = 1;
        l.sh = P->Tq + 3;
        l.sb = P->Bt > 1 ? c.Hq * l.sh : 0;
        l.off = 2;
        int64_t n = l.off + (P->Bt - 1) * l.sb + (c.Hq - 1) * l.sh + P->Tq + 4;
        P->lse.mem.assign((size_t)n * 4, 0);
        for (int64_t i = 0; i < n; i++)
            poison(P->lse.mem.data(), XATTN_DTYPE_F32, i);
    }
    /* Bias [Bb, Hb, Sq + 1, Sk + 3] broadcast by zero strides. */
    if (c.bias) {
        xattn_view &bv = P->bias.v;
        memset(&bv, 0, sizeof bv);
        bv.dtype = c.bias_f16 ? XATTN_DTYPE_F16 : XATTN_DTYPE_F32;
        const int64_t Bb = (c.bias == BIAS_BH || c.bias == BIAS_B1) ? B : 1;
        const int64_t Hb = (c.bias == BIAS_BH || c.bias == BIAS_1H) ? c.Hq : 1;
        const int64_t sq = P->Sq + 1, sk = P->Sk + 3;
        bv.off = 1;
        bv.sd = 1;
        bv.ss = sk;
        bv.sh = Hb > 1 ? sq * sk : 0;
        bv.sb = Bb > 1 ? Hb * sq * sk : 0;
        const int64_t n = 1 + Bb * Hb * sq * sk + 2;
        P->bias.mem.assign((size_t)n * dsz(bv.dtype), 0);
        for (int64_t i = 0; i < n; i++)
            from_f32(P->bias.mem.data(), bv.dtype, i, NAN);
        for (int64_t b = 0; b < Bb; b++)
            for (int64_t h = 0; h < Hb; h++)
                for (int64_t i = 0; i < sq; i++) {
                    const bool row_ninf = c.bias_ninf == 2 && rint_(0, 5) == 0;
                    for (int64_t j = 0; j < sk; j++) {
                        float x = (float)(4 * runif() - 2);
                        if (row_ninf || (c.bias_ninf && rint_(0, 9) == 0))
                            x = -INFINITY;
                        from_f32(P->bias.mem.data(), bv.dtype,
                                 bv.off + b * bv.sb + h * bv.sh + i * bv.ss + j, x);
                    }
                    for (int64_t j = c.bias_tail; c.bias_tail && i % 2 == 0 && j < sk; j++)
                        from_f32(P->bias.mem.data(), bv.dtype,
                                 bv.off + b * bv.sb + h * bv.sh + i * bv.ss + j, -200.0f);
                    for (int64_t j : bad_keys) {
                        const int kind = c.vbad_bias ? rint_(0, 2) : 0;
                        if (kind)
                            from_f32(P->bias.mem.data(), bv.dtype,
                                     bv.off + b * bv.sb + h * bv.sh + i * bv.ss + j,
                                     kind == 1 ? -INFINITY : -200.0f);
                    }
                }
    }
    if (c.alibi) {
        P->alibi.resize(c.Hq);
        for (int h = 0; h < c.Hq; h++)
            P->alibi[h] = (float)pow(2.0, -8.0 * (h + 1) / c.Hq);
    }

    if (c.sinks) {
        P->sinks.assign((size_t)(2 * c.Hq + 1), NAN);
        for (int h = 0; h < c.Hq; h++)
            P->sinks[(size_t)(1 + 2 * h)] = c.sinks == 2         ? 6.0f + (float)h
                                            : h == c.Hq - 1 && h ? -INFINITY
                                                                 : (float)(2.0 * runif() - 0.5);
    }

    xattn_problem &p = P->p;
    memset(&p, 0, sizeof p);
    p.B = B;
    p.Hq = c.Hq;
    p.Hkv = c.Hkv;
    p.group = c.Hq / c.Hkv;
    p.D = c.D;
    p.Dv = c.Dv;
    p.Sq = P->Sq;
    p.Sk = P->Sk;
    p.q = P->q.v;
    p.k = P->k.v;
    p.v = P->v.v;
    p.o = P->o.v;
    p.has_lse = c.lse;
    p.lse = P->lse.v;
    p.has_bias = c.bias != BIAS_NONE;
    if (p.has_bias)
        p.bias = P->bias.v;
    p.alibi = c.alibi ? P->alibi.data() : NULL;
    p.has_sinks = c.sinks != 0;
    if (p.has_sinks) {
        p.sinks.dtype = XATTN_DTYPE_F32;
        p.sinks.off = 1;
        p.sinks.sh = 2;
    }
    p.has_k_scale = p.has_v_scale = c.kvscale;
    if (c.kvscale) {
        p.k_scale.dtype = p.v_scale.dtype = XATTN_DTYPE_F32;
        p.k_scale.off = p.v_scale.off = 1;
        p.k_scale.sh = p.v_scale.sh = 2;
    }
    p.scale = c.scale != 0.0f ? c.scale : (float)(1.0 / sqrt((double)c.D));
    p.mods.softcap = c.softcap;
    p.causal = c.causal;
    p.bottom_right = c.bottom_right;
    p.window_left = c.wl;
    p.window_right = c.wr;
    p.varlen = c.lens == LENS_VARLEN;
    p.len_q = P->lq.data();
    p.len_k = P->lk.data();
    p.start_q = P->q0.data();
    p.start_k = P->k0.data();
    if (c.page) {
        p.paged = 1;
        p.page_size = c.page;
        p.max_pages = P->maxp;
        p.num_pages = P->npages;
        p.block_table = P->table.data();
    }
    p.algo = c.algo;
    p.num_splits = c.splits;
    p.poison = 1;
}

/* ---- reference (docs/semantics.md), in double ------------------ */

static void reference(const Prob &P, std::vector<double> &O, std::vector<double> &L)
{
    const Case &c = P.c;
    const xattn_problem &p = P.p;
    const Tensor &K = c.page ? P.kc : P.k, &V = c.page ? P.vc : P.v;
    O.assign((size_t)(P.B * P.Sq * c.Hq * c.Dv), 0.0);
    L.assign((size_t)(P.B * P.Sq * c.Hq), -INFINITY);
    std::vector<double> s(P.Sk > 0 ? P.Sk : 1);
    for (int64_t b = 0; b < P.B; b++) {
        const int64_t Lq = P.lq[b], Lk = P.lk[b];
        const int64_t tb = p.varlen ? 0 : b;
        for (int64_t h = 0; h < c.Hq; h++) {
            const int64_t hk = h / (c.Hq / c.Hkv);
            /* An fp8 cache's value times its head's scale, an f32 product
             * (docs/semantics.md); 1 without scales. */
            const float ksc = c.kvscale ? P.ks[(size_t)(1 + 2 * hk)] : 1.0f;
            const float vsc = c.kvscale ? P.vs[(size_t)(1 + 2 * hk)] : 1.0f;
            /* The sink joins the denominator only; -inf is no sink. */
            const double sink = c.sinks ? (double)P.sinks[(size_t)(1 + 2 * h)] : -INFINITY;
            for (int64_t i = 0; i < Lq; i++) {
                const int64_t pos = c.bottom_right ? i + Lk - Lq : i;
                double m = -INFINITY;
                bool nan = false;
                for (int64_t j = 0; j < Lk; j++) {
                    bool masked = (c.causal && j > pos) || (c.wl >= 0 && j < pos - c.wl) ||
                                  (c.wr >= 0 && j > pos + c.wr);
                    if (masked) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    double dot = 0.0;
                    for (int64_t d = 0; d < c.D; d++)
                        dot +=
                            (double)to_f32(P.q.mem.data(), c.dq, vidx(p.q, tb, P.q0[b] + i, h, d)) *
                            (double)(to_f32(K.mem.data(), c.dkv,
                                            vidx(K.v, tb, P.k0[b] + j, hk, d)) *
                                     ksc);
                    double x = dot * p.scale;
                    if (c.softcap > 0)
                        x = c.softcap * tanh(x / c.softcap);
                    if (c.alibi)
                        x += -(double)P.alibi[h] * fabs((double)(pos - j));
                    if (c.bias)
                        x += to_f32(P.bias.mem.data(), p.bias.dtype,
                                    p.bias.off + b * p.bias.sb + h * p.bias.sh + i * p.bias.ss +
                                        j * p.bias.sd);
                    s[j] = x;
                    if (isnan(x))
                        nan = true;
                    else if (x > m)
                        m = x;
                }
                double *orow = &O[(size_t)(((b * P.Sq + i) * c.Hq + h) * c.Dv)];
                double &lse = L[(size_t)((b * c.Hq + h) * P.Sq + i)];
                if (nan || (isnan(sink) && m != -INFINITY)) {
                    for (int64_t d = 0; d < c.Dv; d++)
                        orow[d] = NAN;
                    lse = NAN;
                    continue;
                }
                if (m == -INFINITY) {
                    lse = sink; /* O = 0; LSE = the sink (-inf without one) */
                    continue;
                }
                if (sink > m)
                    m = sink; /* the max over the sink too: nothing overflows */
                double sum = exp(sink - m);
                for (int64_t j = 0; j < Lk; j++) {
                    if (s[j] == -INFINITY)
                        continue;
                    double w = exp(s[j] - m);
                    sum += w;
                    for (int64_t d = 0; d < c.Dv; d++)
                        orow[d] += w * (double)(to_f32(V.mem.data(), c.dkv,
                                                       vidx(V.v, tb, P.k0[b] + j, hk, d)) *
                                                vsc);
                }
                for (int64_t d = 0; d < c.Dv; d++)
                    orow[d] /= sum;
                lse = m + log(sum);
            }
        }
    }
}

/* ---- running the kernels as the host module does --------------------------- */

struct Counts {
    unsigned long long qk = 0, pv = 0, kv = 0;
};

static cudaError_t run_kernels(xattn_cuda_args &a, Prob &P, int splits)
{
    const Case &c = P.c;
    std::vector<float> ws, wl;
    const size_t rows = (size_t)P.p.B * (size_t)P.p.Hq * (size_t)P.p.Sq;
    if (c.algo == XATTN_ALGO_NAIVE) {
        ws.assign(rows * (size_t)P.p.Sk + 1, NAN); /* the driver's score matrix */
        cudaError_t e = xattn_cuda_naive_qk(&a, ws.data());
        if (e == cudaSuccess)
            e = xattn_cuda_naive_softmax(&a, ws.data());
        if (e == cudaSuccess)
            e = xattn_cuda_naive_pv(&a, ws.data());
        return e;
    }
    if (c.algo == XATTN_ALGO_FLASH)
        return xattn_cuda_flash(&a);
    /* The driver's partial O and partial LSE regions. */
    ws.assign((size_t)splits * rows * (size_t)P.p.Dv + 1, NAN);
    wl.assign((size_t)splits * rows + 1, NAN);
    cudaError_t e = xattn_cuda_splitkv_partial(&a, splits, ws.data(), wl.data());
    if (e == cudaSuccess)
        e = xattn_cuda_splitkv_combine(&a, splits, ws.data(), wl.data());
    return e;
}

/* Runs the case's kernels; *cnt receives the counts they wrote, summed by the
 * counting kernel (*unwritten: counter slots no block wrote). */
static cudaError_t run(Prob &P, std::string &path, int &splits_used, Counts *cnt, long *unwritten)
{
    const Case &c = P.c;
    xattn_cuda_args a;
    memset(&a, 0, sizeof a);
    a.p = &P.p;
    a.q = P.q.mem.data();
    a.k = P.k.mem.data();
    a.v = P.v.mem.data();
    a.o = P.o.mem.data();
    a.lse = c.lse ? (float *)P.lse.mem.data() : NULL;
    a.bias = c.bias ? P.bias.mem.data() : NULL;
    a.len_q = P.lq.data();
    a.len_k = P.lk.data();
    a.start_q = P.q0.data();
    a.start_k = P.k0.data();
    a.alibi = c.alibi ? P.alibi.data() : NULL;
    a.sinks = c.sinks ? P.sinks.data() : NULL;
    a.k_scale = c.kvscale ? P.ks.data() : NULL;
    a.v_scale = c.kvscale ? P.vs.data() : NULL;
    a.block_table = c.page ? P.table.data() : NULL;
    a.page_size = c.page;
    a.max_pages = c.page ? P.maxp : 0;
    a.stream = 0;
    a.cc = c.cc;
    a.sm_count = c.sms;
    a.smem_optin = c.cc >= 90 ? 227 * 1024 : c.cc >= 80 ? 99 * 1024 : 64 * 1024;
    a.force_simt = c.simt;
    a.mma_narrow = c.narrow;
    const int splits = c.algo == XATTN_ALGO_SPLITKV ? xattn_cuda_splitkv_num_splits(&a) : 0;
    splits_used = splits;
    char why[256];
    if (xattn_cuda_check_limits(&a, splits, why, sizeof why)) {
        fprintf(stderr, "limits: %s\n", why);
        return cudaErrorInvalidValue;
    }
    path = c.algo == XATTN_ALGO_NAIVE ? "simt" : xattn_cuda_flash_path(&a);
    /* Counter slots start as a pattern no count takes: each must be written. */
    const unsigned long long junk = 0xfeedfacecafebeefull;
    const long long slots = xattn_cuda_count_slots(&a, splits);
    std::vector<unsigned long long> counts((size_t)(3 * slots + 1), junk), out(3, junk);
    a.counts = counts.data();
    cudaError_t e = run_kernels(a, P, splits);
    if (e == cudaSuccess)
        e = xattn_cuda_count_sum(&a, slots, out.data());
    *unwritten = 0;
    for (long long i = 0; i < 3 * slots; i++)
        *unwritten += counts[(size_t)i] == junk;
    *unwritten += counts[(size_t)(3 * slots)] != junk; /* a slot past the end */
    cnt->qk = out[0];
    cnt->pv = out[1];
    cnt->kv = out[2];
    return e;
}

/* ---- executed work, walked on the host ----------------------------------------- */

/* The valid keys of row i of sequence b within [kmin, kmax), by testing every
 * key against docs/semantics.md step 6; false when there is none. */
static bool row_keys(const Prob &P, int64_t b, int64_t i, int64_t kmin, int64_t kmax, int64_t *lo,
                     int64_t *hi)
{
    const Case &c = P.c;
    const int64_t Lq = P.lq[b], Lk = P.lk[b];
    const int64_t pos = c.bottom_right ? i + Lk - Lq : i;
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int64_t j = kmin; j < kmax && j < Lk; j++) {
        if ((c.causal && j > pos) || (c.wl >= 0 && j < pos - c.wl) || (c.wr >= 0 && j > pos + c.wr))
            continue;
        *lo = j < *lo ? j : *lo;
        *hi = j + 1 > *hi ? j + 1 : *hi;
    }
    return *hi > *lo;
}

/*
 * What the kernels compute, from their documented tile shapes (not from the
 * kernel code): a FLASH / SPLITKV block holds BM packed query rows of one
 * (sequence, KV head, split) and visits the KV tiles of BN keys that meet the
 * union of its real rows' valid keys; in each, the simt path computes all
 * 64 x 64 pairs of QK^T and of P.V, the mma path 16 rows x BN keys per warp
 * that owns a row below rows * group. K/V rows loaded: the keys of each
 * visited tile within the union. NAIVE: every 64 x 64 tile of QK^T of a row
 * block with a row (its K rows below Lk loaded), and P.V over the keys below
 * Lk rounded up to its chunks of 32.
 */
static Counts expected_counts(const Prob &P, const std::string &path, int splits)
{
    const Case &c = P.c;
    const int64_t g = c.Hq / c.Hkv;
    Counts n;
    const bool mma = path.compare(0, 3, "mma") == 0;
    /* The mma shapes (docs/backends.md): wide 128 rows (d256: 64) in warps of
     * 32 rows (d256: 16), 64-key tiles (d96, d128, d256: 32), a ring of
     * XATTN_CUDA_MMA_STAGES stages (d256: 2); narrow 64 rows, warps of 16,
     * 64-key tiles (d256: 32). The wide shape falls back to the narrow one
     * when its tiles, (BM + 2 ST BN) (DP + 8) 2 bytes, and 40 bytes a row do
     * not fit the device's shared memory. The simt path: 64 x 64. */
    int dp = 0;
    if (mma)
        dp = atoi(path.c_str() + 5);
    const int64_t wbm = dp <= 128 ? 128 : 64, wbn = dp >= 96 ? 32 : 64;
    const int64_t wst = dp == 256 ? 2 : XATTN_CUDA_MMA_STAGES;
    const int64_t optin = c.cc >= 90 ? 227 * 1024 : 99 * 1024;
    /* Unset (-1), the head dim chooses: narrow for d96 and d128. */
    const bool asked = c.narrow > 0 || (c.narrow < 0 && (dp == 96 || dp == 128));
    const bool narrow = asked || (wbm + 2 * wst * wbn) * (dp + 8) * 2 + wbm * 40 > optin;
    const int64_t BM = !mma ? 64 : narrow ? 64 : wbm;
    const int64_t BN = !mma ? 64 : narrow ? (dp == 256 ? 32 : 64) : wbn;
    const int64_t WR = BM / 4;
    const int64_t nrb = (P.Sq * g + BM - 1) / BM;
    for (int64_t b = 0; b < P.B; b++) {
        const int64_t Lq = P.lq[b], Lk = P.lk[b];
        const int64_t R = (c.lens == LENS_VARLEN ? Lq : P.Sq) * g;
        for (int64_t hk = 0; hk < c.Hkv; hk++)
            for (int64_t rb = 0; rb < nrb; rb++) {
                const int64_t r0 = rb * BM;
                if (r0 >= R)
                    continue;
                if (c.algo == XATTN_ALGO_NAIVE) {
                    n.qk += (unsigned long long)(((P.Sk + 63) / 64) * 64 * 64);
                    n.kv += (unsigned long long)Lk;
                    n.pv += (unsigned long long)(64 * ((Lk + 31) / 32) * 32);
                    continue;
                }
                const int64_t nsplit = splits > 0 ? splits : 1;
                const int64_t units = P.Sk > 0 ? (P.Sk + 63) / 64 : 1;
                const int64_t chunk = splits > 0 ? (units + nsplit - 1) / nsplit * 64 : Lk;
                for (int64_t sp = 0; sp < nsplit; sp++) {
                    const int64_t kmin = std::min(sp * chunk, Lk);
                    const int64_t kmax = splits > 0 ? std::min(kmin + chunk, Lk) : Lk;
                    int64_t ulo = INT64_MAX, uhi = INT64_MIN;
                    for (int64_t r = r0; r < r0 + BM && r < R; r++) {
                        int64_t lo, hi;
                        if (r / g < Lq && row_keys(P, b, r / g, kmin, kmax, &lo, &hi)) {
                            ulo = std::min(ulo, lo);
                            uhi = std::max(uhi, hi);
                        }
                    }
                    if (uhi <= ulo)
                        continue;
                    int64_t tiles = 0;
                    for (int64_t t = ulo / BN * BN; t < uhi; t += BN) {
                        tiles++;
                        n.kv += (unsigned long long)(std::min(t + BN, uhi) - std::max(t, ulo));
                    }
                    const int64_t rows_done =
                        mma ? std::min<int64_t>(4, (R - r0 + WR - 1) / WR) * WR : BM;
                    n.qk += (unsigned long long)(tiles * rows_done * BN);
                    n.pv += (unsigned long long)(tiles * rows_done * BN);
                }
            }
    }
    return n;
}

/* ---- comparison ------------------------------------------------------------ */

static bool check(Prob &P, const std::vector<double> &O, const std::vector<double> &L,
                  std::string &msg)
{
    const Case &c = P.c;
    const xattn_problem &p = P.p;
    double num = 0, den = 0, rnum = 0, mx = 0, rmx = 0, lerr = 0;
    long bad_nan = 0, bad_zero = 0, bad_lse = 0, bad_outside = 0;
    const int64_t no = (int64_t)(P.o.mem.size() / dsz(c.dq));
    std::vector<char> written((size_t)no, 0);
    const int64_t nl = (int64_t)(P.lse.mem.size() / 4);
    std::vector<char> lwritten((size_t)nl, 0);
    for (int64_t b = 0; b < P.B; b++) {
        const int64_t rows = p.varlen ? P.lq[b] : P.Sq, tb = p.varlen ? 0 : b;
        for (int64_t h = 0; h < c.Hq; h++)
            for (int64_t i = 0; i < rows; i++) {
                for (int64_t d = 0; d < c.Dv; d++) {
                    const int64_t oi = vidx(p.o, tb, P.q0[b] + i, h, d);
                    written[(size_t)oi] = 1;
                    const double out = to_f32(P.o.mem.data(), c.dq, oi);
                    const double ref = O[(size_t)(((b * P.Sq + i) * c.Hq + h) * c.Dv + d)];
                    if (isnan(ref) || isnan(out)) {
                        bad_nan += isnan(ref) != isnan(out);
                        continue;
                    }
                    if (isinf(ref) || isinf(out)) { /* inf in V: the same inf */
                        bad_nan += out != ref;
                        continue;
                    }
                    if (ref == 0.0 && out != 0.0) {
                        bad_zero++;
                        continue;
                    }
                    const double rr = round_to(ref, c.dq);
                    num += (out - ref) * (out - ref);
                    den += ref * ref;
                    rnum += (rr - ref) * (rr - ref);
                    mx = fmax(mx, fabs(out - ref));
                    rmx = fmax(rmx, fabs(rr - ref));
                }
                if (!c.lse)
                    continue;
                const int64_t li =
                    p.lse.off + tb * p.lse.sb + h * p.lse.sh + (P.q0[b] + i) * p.lse.ss;
                lwritten[(size_t)li] = 1;
                const float out = ((const float *)P.lse.mem.data())[li];
                const double ref = L[(size_t)((b * c.Hq + h) * P.Sq + i)];
                if (isnan(ref) || isnan(out) || isinf(ref) || isinf(out)) {
                    const bool same = (isnan(ref) && isnan(out)) || (double)out == ref;
                    bad_lse += !same;
                } else {
                    const double e = fabs(out - ref) / fmax(1.0, fabs(ref));
                    lerr = fmax(lerr, e);
                    bad_lse += e > 1e-4;
                }
            }
    }
    for (int64_t i = 0; i < no; i++)
        if (!written[(size_t)i] && !is_poison(P.o.mem.data(), c.dq, i))
            bad_outside++;
    for (int64_t i = 0; i < nl; i++)
        if (!lwritten[(size_t)i] && !is_poison(P.lse.mem.data(), XATTN_DTYPE_F32, i))
            bad_outside++;
    const double e = den > 0 ? sqrt(num / den) : sqrt(num),
                 r = den > 0 ? sqrt(rnum / den) : sqrt(rnum);
    const bool ok = e <= 3 * r + 1e-5 && mx <= 3 * rmx + 1e-4 && !bad_nan && !bad_zero &&
                    !bad_lse && !bad_outside;
    char buf[320];
    snprintf(buf, sizeof buf,
             "e %.2e (3r+1e-5 = %.2e) m %.2e (3mr+1e-4 = %.2e) lse %.1e; nan %ld zero %ld "
             "lse %ld outside %ld",
             e, 3 * r + 1e-5, mx, 3 * rmx + 1e-4, lerr, bad_nan, bad_zero, bad_lse, bad_outside);
    msg = buf;
    return ok;
}

/* ---- the case list ---------------------------------------------------------- */

static std::vector<Case> cases(void)
{
    std::vector<Case> v;
    auto add = [&](Case c, const char *name) {
        static const char *an[] = {"auto", "naive", "flash", "splitkv"};
        static const char *dn[] = {"f32", "f16", "bf16", "e4m3", "e5m2", "q8_0"};
        char buf[256];
        snprintf(buf, sizeof buf, "%s_%s_%s%s_q%s_kv%s_D%dDv%d", name, an[c.algo],
                 c.simt ? "simt" : "auto", c.cc < 80 ? "75" : "", dn[c.dq], dn[c.dkv], c.D, c.Dv);
        c.name = buf;
        v.push_back(c);
    };
    const xattn_algo algos[] = {XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV, XATTN_ALGO_NAIVE};
    /* Every mma head dim, both 16-bit dtypes, vector and plain loads. */
    for (int dp : {64, 80, 96, 128, 256}) {
        Case c;
        c.D = c.Dv = dp;
        c.Sq = 20;
        c.Sk = 75;
        c.causal = 1;
        c.Hq = 2;
        add(c, "mma_dims");
        c.dq = c.dkv = XATTN_DTYPE_BF16;
        c.layout = L_MISALIGNED;
        c.causal = 0;
        add(c, "mma_dims_plain");
    }
    /* The tile staging's fast path (whole tiles of valid keys, d64/d128/d256)
     * with head dims below the padded one: the dims past D / Dv are zeros. */
    for (int d : {40, 120, 200}) {
        Case c;
        c.D = d, c.Dv = d - 16;
        c.Sq = 18, c.Sk = 140, c.Hq = 2;
        c.dq = c.dkv = d == 120 ? XATTN_DTYPE_BF16 : XATTN_DTYPE_F16;
        add(c, "mma_fast_staging_narrow");
    }
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            Case c;
            c.algo = al;
            c.simt = simt;
            /* GQA, causal top-left with Sq > Sk (empty rows), padded lengths. */
            c.B = 3, c.Sq = 40, c.Sk = 33, c.Hq = 4, c.Hkv = 2, c.D = 64, c.Dv = 64;
            c.causal = 1, c.bottom_right = 0, c.lens = LENS_PADDED;
            add(c, "gqa_padded_causal_tl");
            /* Bottom-right, window, ALiBi, softcap, f16 bias broadcast over B. */
            Case d;
            d.algo = al, d.simt = simt;
            d.B = 2, d.Sq = 23, d.Sk = 90, d.Hq = 4, d.Hkv = 1, d.D = 80, d.Dv = 80;
            d.causal = 1, d.wl = 20, d.wr = 3, d.alibi = 1, d.softcap = 3.0f;
            d.bias = BIAS_1H, d.bias_f16 = 1, d.bias_ninf = 1;
            add(d, "mqa_window_alibi_softcap_bias");
            /* Packed varlen, bias rows of -inf, D != Dv, BHSD. */
            Case e;
            e.algo = al, e.simt = simt;
            e.B = 4, e.Sq = 30, e.Sk = 70, e.Hq = 2, e.Hkv = 2, e.D = 96, e.Dv = 40;
            e.lens = LENS_VARLEN, e.bias = BIAS_BH, e.bias_ninf = 2, e.layout = L_BHSD;
            add(e, "varlen_bias_dv");
            /* Decode shape with many keys, padded strides (vector loads). */
            Case f;
            f.algo = al, f.simt = simt;
            f.B = 2, f.Sq = 1, f.Sk = 300, f.Hq = 8, f.Hkv = 2, f.D = 128, f.Dv = 128;
            f.layout = L_PADDED, f.dq = f.dkv = XATTN_DTYPE_BF16, f.sms = 8;
            add(f, "decode");
            /* NaN in q / k / v. */
            for (int n = 1; n <= 3; n++) {
                Case g;
                g.algo = al, g.simt = simt, g.nan = n, g.Sq = 9, g.Sk = 50, g.causal = n == 2;
                add(g, n == 1 ? "nan_q" : n == 2 ? "nan_k" : "nan_v");
            }
        }
        /* The simt path's own dtypes: f32, mixed, tiny and odd head dims, strides. */
        Case h;
        h.algo = al, h.dq = XATTN_DTYPE_F32, h.dkv = XATTN_DTYPE_F32, h.D = 3, h.Dv = 5;
        h.Sq = 19, h.Sk = 65, h.Hq = 3, h.Hkv = 1, h.causal = 1, h.bottom_right = 1;
        h.layout = L_STRIDED, h.bias = BIAS_B1, h.B = 2;
        add(h, "f32_odd_strided");
        Case m;
        m.algo = al, m.dq = XATTN_DTYPE_F16, m.dkv = XATTN_DTYPE_BF16, m.D = 200, m.Dv = 256;
        m.Sq = 10, m.Sk = 40, m.wl = 5, m.wr = 5, m.scale = 0.3f;
        add(m, "mixed_d200");
        Case s;
        s.algo = al, s.dq = s.dkv = XATTN_DTYPE_F16, s.cc = 75, s.D = 64, s.Dv = 64, s.causal = 1;
        add(s, "sm75");
        Case f1;
        f1.algo = al, f1.dq = XATTN_DTYPE_F32, f1.dkv = XATTN_DTYPE_F16, f1.D = 1, f1.Dv = 1;
        f1.Sq = 5, f1.Sk = 129, f1.lse = 0;
        add(f1, "d1_nolse");
    }
    /* Whole tiles without masks (the no-mask fast path) next to masked ones:
     * a left window without score mods, padded rows in a block of full
     * tiles, long causal rows over several row blocks, a group of 8 heads. */
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            Case c;
            c.algo = al, c.simt = simt, c.Sq = 64, c.Sk = 256, c.wl = 30, c.D = c.Dv = 64;
            add(c, "window_nomods");
            Case d;
            d.algo = al, d.simt = simt, d.B = 4, d.lens = LENS_PADDED, d.Sq = 40, d.Sk = 150;
            d.D = d.Dv = 128, d.Hq = 2, d.Hkv = 2;
            add(d, "padded_nomods");
            Case e;
            e.algo = al, e.simt = simt, e.Sq = 200, e.Sk = 200, e.causal = 1, e.Hq = 1;
            e.dq = e.dkv = XATTN_DTYPE_BF16;
            add(e, "causal_long");
            Case f;
            f.algo = al, f.simt = simt, f.Sq = 20, f.Sk = 100, f.Hq = 8, f.Hkv = 1, f.causal = 1;
            f.bottom_right = 0, f.wr = 2, f.D = f.Dv = 96;
            add(f, "gqa8_window_right");
        }
    }
    /* Attention sinks on every path: rows with no key (bottom-right, Sq > Sk)
     * get LSE = the sink, with GQA, a window, ALiBi, softcap and padding; a
     * packed batch with -inf bias rows; decode with large sinks and split-KV
     * (the combine folds the sink once, the partials hold none). */
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            Case c;
            c.algo = al, c.simt = simt, c.sinks = 1;
            c.B = 3, c.Sq = 40, c.Sk = 33, c.Hq = 4, c.Hkv = 2, c.causal = 1, c.wl = 9;
            c.lens = LENS_PADDED, c.alibi = 1, c.softcap = 5.0f;
            add(c, "sinks_gqa_padded_window");
            Case e;
            e.algo = al, e.simt = simt, e.sinks = 2;
            e.B = 3, e.Sq = 30, e.Sk = 70, e.Hq = 2, e.Hkv = 2, e.D = 96, e.Dv = 40;
            e.lens = LENS_VARLEN, e.bias = BIAS_BH, e.bias_ninf = 2;
            add(e, "sinks_varlen_bias");
            Case f;
            f.algo = al, f.simt = simt, f.sinks = 1, f.splits = al == XATTN_ALGO_SPLITKV ? 5 : 0;
            f.B = 2, f.Sq = 1, f.Sk = 300, f.Hq = 8, f.Hkv = 2, f.D = 128, f.Dv = 128;
            f.dq = f.dkv = XATTN_DTYPE_BF16, f.wl = 100;
            add(f, "sinks_decode");
        }
    }

    /* SPLITKV with explicit split counts, including more than the keys allow. */
    for (int sp : {1, 3, 7, 50}) {
        Case c;
        c.algo = XATTN_ALGO_SPLITKV, c.splits = sp, c.Sq = 3, c.Sk = 200, c.Hq = 4, c.Hkv = 2;
        c.causal = 1;
        add(c, sp == 1 ? "splits1" : sp == 3 ? "splits3" : sp == 7 ? "splits7" : "splits50");
    }
    /* Sk = 0 and fully masked rows everywhere (window right < 0 of the diagonal). */
    Case z;
    z.Sk = 0, z.Sq = 4;
    add(z, "sk0");
    Case w;
    w.causal = 1, w.bottom_right = 0, w.Sq = 70, w.Sk = 10;
    add(w, "causal_tl_sq_gt_sk");
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            /* A diagonal window past the keys' end: whole row blocks whose rows
             * all see nothing (their empty intervals sit at Lk = 70, inside a
             * tile) must run no tile. */
            Case d;
            d.algo = al, d.simt = simt, d.Sq = 200, d.Sk = 70, d.Hq = 1, d.Hkv = 1;
            d.bottom_right = 0, d.wl = 0, d.wr = 0;
            add(d, "diag_window_past_end");
        }
    }
    for (int simt = 0; simt < 2; simt++) {
        /* SPLITKV's combine: the second chunk of even rows weighs e^-200 (0 in
         * f32) and holds +inf in V: the reference's row is +inf there. */
        Case t;
        t.algo = XATTN_ALGO_SPLITKV, t.simt = simt, t.splits = 2, t.Sq = 8, t.Sk = 128;
        t.bias = BIAS_11, t.bias_tail = 64, t.vbad = 2, t.vbad_from = 64;
        add(t, "vinf_split_tiny");
    }
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            /* inf / NaN in V at keys that some rows of a tile mask and others
             * see: causal, window, -inf bias (with -200 biases: a weight that
             * underflows in f32 still brings the key's inf / NaN); vector and
             * plain staging on the mma path, every dtype path. */
            Case a;
            a.algo = al, a.simt = simt, a.causal = 1, a.Sq = 70, a.Sk = 70, a.vbad = 1;
            add(a, "vnan_causal");
            Case b = a;
            b.dq = b.dkv = XATTN_DTYPE_BF16, b.layout = L_MISALIGNED, b.D = b.Dv = 128, b.vbad = 3;
            b.B = 3, b.lens = LENS_PADDED;
            add(b, "vinf_causal_plain");
            Case d;
            d.algo = al, d.simt = simt, d.Sq = 40, d.Sk = 130, d.wl = 8, d.wr = 4, d.vbad = 2;
            d.Hq = 4, d.Hkv = 2;
            add(d, "vinf_window");
            Case e;
            e.algo = al, e.simt = simt, e.Sq = 30, e.Sk = 100, e.bias = BIAS_BH, e.vbad = 1;
            e.vbad_bias = 1, e.B = 2, e.D = e.Dv = 96;
            add(e, "vnan_bias");
            Case f = e;
            f.vbad = 3, f.lens = LENS_VARLEN, f.B = 3, f.dq = f.dkv = XATTN_DTYPE_BF16;
            add(f, "vinf_bias_tiny_varlen");
            Case h;
            h.algo = al, h.simt = simt, h.dq = h.dkv = XATTN_DTYPE_F32, h.causal = 1, h.Sq = 33;
            h.Sk = 33, h.vbad = 3, h.D = 40, h.Dv = 24;
            add(h, "vinf_causal_f32");
            /* Near one-hot rows at large scores: the row's maximum must weigh
             * exactly 1, so the output is the argmax key's V exactly. */
            for (int big = 0; big < 4; big++) {
                Case o;
                o.algo = al, o.simt = simt, o.Sq = 24, o.Sk = 150, o.Hq = 4, o.Hkv = 2;
                o.dq = o.dkv = big & 1 ? XATTN_DTYPE_BF16 : XATTN_DTYPE_F16;
                o.scale = big & 2 ? 1e4f : 1e3f, o.causal = big == 3;
                add(o, big == 0   ? "onehot_f16_s1e3"
                       : big == 1 ? "onehot_bf16_s1e3"
                       : big == 2 ? "onehot_f16_s1e4"
                                  : "onehot_bf16_s1e4_causal");
            }
        }
    }
    /* Paged K/V on every path: page sizes 1, 3 (not a power of two) and 16,
     * shuffled tables, both stride orders, GQA, a sequence of length 0 and
     * padded ones, causal bottom-right with sinks. */
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            for (int ps : {1, 3, 16}) {
                Case c;
                c.algo = al, c.simt = simt, c.page = ps, c.sinks = 1;
                c.B = 4, c.Sq = 5, c.Sk = 70, c.Hq = 4, c.Hkv = 2, c.causal = 1;
                c.lens = LENS_PADDED, c.layout = ps == 3 ? L_BHSD : L_BSHD;
                add(c, ps == 1   ? "paged1_gqa_padded"
                       : ps == 3 ? "paged3_gqa_padded_hsd"
                                 : "paged16_gqa_padded");
                /* Top-left causal, a window, ALiBi, softcap, a bias, D != Dv. */
                Case d;
                d.algo = al, d.simt = simt, d.page = ps;
                d.B = 3, d.Sq = 20, d.Sk = 90, d.Hq = 2, d.Hkv = 1, d.D = 96, d.Dv = 64;
                d.causal = 1, d.bottom_right = 0, d.wl = 30, d.alibi = 1, d.softcap = 4.0f;
                d.bias = BIAS_BH, d.lens = LENS_PADDED, d.layout = ps == 16 ? L_BHSD : L_BSHD;
                add(d, ps == 1 ? "paged1_mods" : ps == 3 ? "paged3_mods" : "paged16_mods_hsd");
            }
            /* Decode: pages a KV tile fits in (one look-up a tile: 64 and 128
             * for the 64-key tiles, 32 for mma-d256's 32-key tiles), vector
             * loads, split-KV with explicit splits, f32 and misaligned
             * (plain loads) pools. */
            for (int ps : {16, 64, 128}) {
                Case f;
                f.algo = al, f.simt = simt, f.page = ps,
                f.splits = al == XATTN_ALGO_SPLITKV ? 5 : 0;
                f.B = 3, f.Sq = 1, f.Sk = 300, f.Hq = 8, f.Hkv = 2, f.D = f.Dv = 128;
                f.lens = LENS_PADDED, f.layout = L_PADDED, f.dq = f.dkv = XATTN_DTYPE_BF16;
                f.sms = 8;
                add(f, ps == 16   ? "paged16_decode"
                       : ps == 64 ? "paged64_decode"
                                  : "paged128_decode");
            }
            Case g;
            g.algo = al, g.simt = simt, g.page = 32, g.D = g.Dv = 256, g.Sq = 3, g.Sk = 150;
            g.B = 2, g.causal = 1, g.lens = LENS_PADDED;
            add(g, "paged32_d256");
            Case h;
            h.algo = al, h.simt = simt, h.page = 5, h.layout = L_MISALIGNED, h.vbad = 1;
            h.Sq = 30, h.Sk = 100, h.causal = 1, h.dq = h.dkv = XATTN_DTYPE_BF16;
            add(h, "paged5_plain_vnan");
        }
        Case m;
        m.algo = al, m.page = 7, m.dq = XATTN_DTYPE_F32, m.dkv = XATTN_DTYPE_F16, m.D = 3;
        m.Dv = 5, m.Sq = 19, m.Sk = 65, m.Hq = 3, m.Hkv = 1, m.layout = L_STRIDED, m.B = 2;
        m.lens = LENS_PADDED;
        add(m, "paged7_mixed_strided");
    }
    /* fp8 K/V caches (E4M3, E5M2) on every path: the mma path converts the
     * bytes to q's 16-bit dtype in the tile load (vector and plain mappings)
     * and scales scores and output; simt and NAIVE scale each value. With
     * and without per-head scales, every finite code (subnormals, maxima),
     * NaN codes in K, inf in E5M2's V, GQA, padding, paged (page sizes 3
     * and 16, both stride orders), decode with explicit splits, D != Dv,
     * sinks and a window, D 256. */
    const xattn_dtype e4 = XATTN_DTYPE_FP8_E4M3, e5 = XATTN_DTYPE_FP8_E5M2;
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            Case a;
            a.algo = al, a.simt = simt, a.dkv = e4, a.kvscale = 1;
            a.B = 3, a.Sq = 33, a.Sk = 90, a.Hq = 4, a.Hkv = 2, a.causal = 1;
            a.lens = LENS_PADDED;
            add(a, "fp8_gqa_padded_scaled");
            Case b;
            b.algo = al, b.simt = simt, b.dq = XATTN_DTYPE_BF16, b.dkv = e5, b.kvscale = 1;
            b.fp8_range = 1, b.page = 16, b.splits = al == XATTN_ALGO_SPLITKV ? 5 : 0;
            b.B = 3, b.Sq = 1, b.Sk = 300, b.Hq = 8, b.Hkv = 2, b.D = b.Dv = 128;
            b.lens = LENS_PADDED, b.layout = L_PADDED, b.sms = 8;
            add(b, "fp8_range_paged16_decode");
            Case d = b;
            d.dq = XATTN_DTYPE_F16, d.dkv = e4, d.page = 3, d.layout = L_BHSD;
            add(d, "fp8_range_paged3_decode_hsd");
            Case e;
            e.algo = al, e.simt = simt, e.dkv = e5, e.nan = 2, e.Sq = 20, e.Sk = 70;
            e.causal = 1, e.vbad = 3, e.Hq = 2, e.Hkv = 1;
            add(e, "fp8_nan_k_inf_v_unscaled");
            Case f;
            f.algo = al, f.simt = simt, f.dq = XATTN_DTYPE_BF16, f.dkv = e4, f.kvscale = 1;
            f.fp8_range = 1, f.layout = L_MISALIGNED, f.Sq = 30, f.Sk = 100, f.wl = 40;
            f.sinks = 1, f.D = 80, f.Dv = 48, f.Hq = 4, f.Hkv = 1;
            add(f, "fp8_range_plain_window_sinks_dv");
            Case g;
            g.algo = al, g.simt = simt, g.dkv = e5, g.kvscale = 1, g.D = g.Dv = 256;
            g.Sq = 3, g.Sk = 150, g.B = 2, g.causal = 1, g.page = 32, g.lens = LENS_PADDED;
            add(g, "fp8_paged32_d256");
        }
        /* f32 q takes the simt path: each value times its scale. */
        Case h;
        h.algo = al, h.dq = XATTN_DTYPE_F32, h.dkv = e4, h.kvscale = 1, h.fp8_range = 1;
        h.B = 2, h.Sq = 19, h.Sk = 65, h.Hq = 3, h.Hkv = 1, h.D = 40, h.Dv = 24;
        h.layout = L_STRIDED, h.lens = LENS_VARLEN;
        add(h, "fp8_f32q_strided_varlen");
    }
    /* q8_0 K/V caches (ggml's blocks of 32 with an f16 d): the SIMT and NAIVE
     * loads (the mma path is not taken: d * qs needs more bits than q's
     * 16-bit type), blocks with three different d, GQA, padding, paged (page
     * sizes 3 and 16, both stride orders), decode with explicit splits, a NaN
     * d in K, f32 q with a window, sinks and D != Dv. */
    const xattn_dtype q8 = XATTN_DTYPE_Q8_0;
    for (xattn_algo al : algos) {
        for (int simt = 0; simt < 2; simt++) {
            Case a;
            a.algo = al, a.simt = simt, a.dkv = q8;
            a.B = 3, a.Sq = 33, a.Sk = 90, a.Hq = 4, a.Hkv = 2, a.causal = 1;
            a.lens = LENS_PADDED, a.layout = L_BLOCKED;
            add(a, "q8_gqa_padded_offset");
            Case b;
            b.algo = al, b.simt = simt, b.dq = XATTN_DTYPE_BF16, b.dkv = q8, b.page = 16;
            b.splits = al == XATTN_ALGO_SPLITKV ? 5 : 0;
            b.B = 3, b.Sq = 1, b.Sk = 300, b.Hq = 8, b.Hkv = 2, b.D = b.Dv = 128;
            b.lens = LENS_PADDED, b.sms = 8;
            add(b, "q8_paged16_decode");
            Case d = b;
            d.dq = XATTN_DTYPE_F16, d.page = 3, d.layout = L_BHSD;
            add(d, "q8_paged3_decode_hsd");
            Case e;
            e.algo = al, e.simt = simt, e.dkv = q8, e.nan = 2, e.Sq = 20, e.Sk = 70;
            e.causal = 1, e.Hq = 2, e.Hkv = 1;
            add(e, "q8_nan_k");
        }
        Case f;
        f.algo = al, f.dq = XATTN_DTYPE_F32, f.dkv = q8, f.Sq = 30, f.Sk = 100, f.wl = 40;
        f.sinks = 1, f.D = 96, f.Dv = 32, f.Hq = 4, f.Hkv = 1, f.lens = LENS_VARLEN, f.B = 2;
        add(f, "q8_f32q_window_sinks_dv_varlen");
    }
    /* Both mma shapes: every case that takes the mma path runs again with the
     * narrow one (64 rows; d256: no K/V ring), and with the shape its head dim
     * chooses when none is asked for. d256 at cc 80 (99 KB of shared
     * memory here) falls back to the narrow shape: its wide one (the ring)
     * runs at cc 90. */
    const size_t n0 = v.size();
    for (size_t i = 0; i < n0; i++) {
        const Case c = v[i];
        const bool f16 = c.dq == XATTN_DTYPE_F16 || c.dq == XATTN_DTYPE_BF16;
        const bool kv =
            c.dkv == c.dq || c.dkv == XATTN_DTYPE_FP8_E4M3 || c.dkv == XATTN_DTYPE_FP8_E5M2;
        if (c.simt || c.algo == XATTN_ALGO_NAIVE || !f16 || !kv || c.cc < 80)
            continue;
        Case n = c;
        n.narrow = 1;
        n.name = c.name + "_narrow";
        v.push_back(n);
        /* XATTN_CUDA_MMA_SHAPE unset: the shape by head dim. */
        Case h = c;
        h.narrow = -1;
        h.name = c.name + "_byhd";
        v.push_back(h);
        if (std::max(c.D, c.Dv) > 128) {
            Case w = c;
            w.cc = 90;
            w.name = c.name + "_cc90";
            v.push_back(w);
        }
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else
            filter = argv[i];
    }
    int pass = 0, fail = 0;
    for (const Case &c : cases()) {
        if (filter && !strstr(c.name.c_str(), filter))
            continue;
        rs = 0x2545F4914F6CDD1Dull ^ std::hash<std::string>()(c.name);
        Prob P;
        prob_build(&P, c);
        std::vector<double> O, L;
        reference(P, O, L);
        std::string path, msg;
        int splits = 0;
        Counts got;
        long unwritten = 0;
        cudaError_t e = run(P, path, splits, &got, &unwritten);
        bool ok = e == cudaSuccess && check(P, O, L, msg);
        if (e != cudaSuccess)
            msg = "launch failed";
        if (e == cudaSuccess) {
            const Counts want = expected_counts(P, path, splits);
            char cbuf[256];
            if (got.qk != want.qk || got.pv != want.pv || got.kv != want.kv || unwritten) {
                snprintf(
                    cbuf, sizeof cbuf,
                    "; counts qk %llu pv %llu kv %llu, walk %llu %llu %llu, %ld slots unwritten",
                    got.qk, got.pv, got.kv, want.qk, want.pv, want.kv, unwritten);
                ok = false;
                msg += cbuf;
            } else if (verbose) {
                snprintf(cbuf, sizeof cbuf, "; counts qk %llu pv %llu kv %llu", got.qk, got.pv,
                         got.kv);
                msg += cbuf;
            }
        }
        printf("%s %-64s [%s%s] %s\n", ok ? "ok  " : "FAIL", c.name.c_str(), path.c_str(),
               splits ? (", " + std::to_string(splits) + " splits").c_str() : "", msg.c_str());
        fflush(stdout);
        if (ok)
            pass++;
        else
            fail++;
    }
    if (!filter || strstr("ceil_mma", filter)) {
        /* The tensor-core ceiling's kernel: 2 blocks, 3 iterations on A = 1
         * and B = 0.5 (f16 / bf16 bits): every accumulator element gains
         * 16 * 0.5 per product, so a thread's sum is CHAINS * 4 * 3 * 8 when
         * each iteration issues the CHAINS products the FLOP count assumes. */
        for (int bf = 0; bf < 2; bf++) {
            const int nt = 2 * 32 * XATTN_CUDA_CEIL_MMA_WARPS;
            std::vector<float> sink((size_t)nt + 1, NAN);
            const unsigned a1 = bf ? 0x3f803f80u : 0x3c003c00u, bh = bf ? 0x3f003f00u : 0x38003800u;
            cudaError_t e = xattn_cuda_ceil_mma_launch(sink.data(), bf, 2, 3, a1, bh, 0);
            const float want = (float)(XATTN_CUDA_CEIL_MMA_CHAINS * 4 * 3 * 8);
            int bad = e != cudaSuccess || !isnan(sink[(size_t)nt]);
            for (int i = 0; i < nt; i++)
                bad += sink[(size_t)i] != want;
            printf("%s ceil_mma_%s: %d of %d sums differ from %g\n", bad ? "FAIL" : "ok  ",
                   bf ? "bf16" : "f16", bad, nt, (double)want);
            if (bad)
                fail++;
            else
                pass++;
        }
    }
    if (!filter || strstr("smem_attr_reset", filter)) {
        /* The mma kernels over 48 KB of dynamic shared memory (d128 and d256
         * on cc >= 80) need the function's shared-memory attribute in the
         * current context; cudaDeviceReset drops it with the context. A launch
         * before and after a reset must both succeed, and match the reference
         * (the emulator fails a launch whose attribute is missing, as a GPU
         * does). And the emulator's own rule is checked: without the
         * attribute a 64 KB launch fails. */
        for (int dp : {128, 256}) {
            Case c;
            c.name = "smem_attr_reset_d" + std::to_string(dp);
            c.D = c.Dv = dp, c.Sq = 40, c.Sk = 90, c.cc = 90;
            rs = 0x2545F4914F6CDD1Dull ^ std::hash<std::string>()(c.name);
            /* Each round must set the attribute (the kernel needs over 48 KB;
             * were it to need less, the case would be moot and fails). */
            std::string msg;
            int bad = 0;
            for (int round = 0; round < 3 && !bad; round++) {
                if (round > 0)
                    xattn_emu_device_reset();
                Prob P;
                prob_build(&P, c);
                std::vector<double> O, L;
                reference(P, O, L);
                std::string path, m;
                int splits = 0;
                Counts got;
                long unwritten = 0;
                const unsigned long calls = xattn_emu_attr_calls;
                cudaError_t e = run(P, path, splits, &got, &unwritten);
                if (e != cudaSuccess || path.compare(0, 3, "mma") != 0 ||
                    xattn_emu_attr_calls == calls || !check(P, O, L, m)) {
                    bad = 1;
                    msg = "round " + std::to_string(round) + " (after " + std::to_string(round) +
                          " resets): " + "error " + std::to_string((int)e) + " [" + path + "] " + m;
                }
            }
            printf("%s %-64s %s\n", bad ? "FAIL" : "ok  ", c.name.c_str(), msg.c_str());
            bad ? fail++ : pass++;
        }
        {
            static int dummy;
            auto body = []() {};
            xattn_emu_device_reset();
            const cudaError_t e0 = xattn_emu_run(&dummy, body, 1, 32, 64 * 1024);
            (void)xattn_emu_take_error();
            const cudaError_t e1 = xattn_emu_func_set_smem(&dummy, 64 * 1024);
            const cudaError_t e2 = xattn_emu_run(&dummy, body, 1, 32, 64 * 1024);
            xattn_emu_device_reset();
            const cudaError_t e3 = xattn_emu_run(&dummy, body, 1, 32, 64 * 1024);
            const cudaError_t e4 = xattn_emu_run(&dummy, body, 1, 32, 48 * 1024);
            (void)xattn_emu_take_error();
            const int bad = e0 != cudaErrorInvalidValue || e1 != cudaSuccess || e2 != cudaSuccess ||
                            e3 != cudaErrorInvalidValue || e4 != cudaSuccess;
            printf("%s %-64s %d %d %d %d %d\n", bad ? "FAIL" : "ok  ", "smem_attr_emulated_rule",
                   (int)e0, (int)e1, (int)e2, (int)e3, (int)e4);
            bad ? fail++ : pass++;
        }
    }
    printf("%d passed, %d failed, 0 skipped\n", pass, fail);
    return fail ? 1 : 0;
}
