/*
 * Private to kernels_cuda/: what NAIVE, FLASH (simt and mma) and SPLITKV share.
 *
 * - xattn_cuda_kparams: the problem flattened into one by-value kernel
 *   parameter (device pointers with the view offsets applied, strides, flags);
 * - scalar dtype load/store (f16/bf16 are storage only: f32 arithmetic,
 *   round-to-nearest-even on store);
 * - the masking helpers, named after kernels_cpu/'s: xattn_cuda_row_init
 *   gives one query row's interval of valid keys [lo, hi) (causal, window,
 *   len_k and the split's chunk always leave one contiguous interval, which is
 *   what lets whole tiles be skipped), xattn_cuda_mod_score applies softcap,
 *   ALiBi, bias and the mask to one score;
 * - the online-softmax update (xattn_cuda_softmax_rescale) with the NaN rule:
 *   the running max is sticky for NaN, and a -inf max is used as 0 so that a
 *   still fully masked row keeps p = 0 without producing NaN;
 * - the rule for inf/NaN in V (docs/semantics.md step 8): a masked key contributes
 *   nothing, not even 0 x NaN. A tile loads every V row that any of its rows
 *   may see, so the P.V of a tile whose V holds an inf or NaN takes a careful
 *   path (xattn_cuda_key_masked, xattn_cuda_pv_add); the check is one flag
 *   per tile, folded into the barrier that publishes the V tile;
 * - the executed-work counters: one slot per block (xattn_cuda_count_put),
 *   summed by xattn_cuda_count_sum after the call;
 * - the block decode of the flat grid and the packed query rows (see
 *   xattn_cuda_kernels.h).
 */
#ifndef XATTN_CUDA_COMMON_CUH
#define XATTN_CUDA_COMMON_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "xattn_cuda_kernels.h"

#define XATTN_CUDA_INF __int_as_float(0x7f800000)

/* Kernel launches and the dynamic shared memory declaration go through these
 * two macros, so that tests/cuda/xattn_cuda_emu.h can run the very same
 * kernels on the CPU (XATTN_CUDA_EMULATE; it defines both first). */
#ifndef XATTN_CUDA_LAUNCH
#define XATTN_CUDA_LAUNCH(kernel, grid, block, smem, stream, ...)                                  \
    (kernel)<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#endif
#ifndef XATTN_CUDA_DYN_SMEM
#define XATTN_CUDA_DYN_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

/* One tensor view: ptr is the address of the view's element 0 (buffer + off). */
struct xattn_cuda_kview {
    const char *ptr;
    long long sb, ss, sh, sd;
    int dt;
};

struct xattn_cuda_kparams {
    xattn_cuda_kview q, k, v, o, lse, bias;
    const int32_t *len_q, *len_k, *start_q, *start_k; /* device [B] */
    const float *alibi;                               /* device [Hq] or NULL */
    const float *sinks; /* device: head h's sink at sinks[h * sinks_sh]; NULL = none */
    long long sinks_sh;
    /* fp8 K/V: KV head hk's scales at k_scale[hk * ks_sh] / v_scale[hk * vs_sh];
     * NULL = 1 (xattn_cuda_kv_scale). k.dt / v.dt say whether K/V are fp8. */
    const float *k_scale, *v_scale;
    long long ks_sh, vs_sh;
    /* Paged K/V (xattn_cuda_kv_index): device table [B * max_pages]; NULL =
     * contiguous (token start_k[b] + j of batch entry b). */
    const int32_t *pages;
    long long max_pages;
    int page_size;
    int page_shift; /* log2(page_size) for a power of two (no division), else -1 */
    int B, Hq, Hkv, group, D, Dv, Sq, Sk;
    int varlen, has_lse, has_bias, has_alibi, causal, bottom_right, has_mods;
    long long wl, wr; /* < 0 = unbounded; clamped so that p +- w never overflows */
    float scale;
    xattn_sem_mods mods; /* the call's score modifiers, as the problem has them */
    /* FLASH / SPLITKV */
    int nrb;    /* row blocks per (sequence, KV head) */
    int splits; /* 0 = FLASH (write O); > 0 = SPLITKV partial (write part_*) */
    int chunk;  /* keys per split, a multiple of XATTN_CUDA_SPLIT_UNIT */
    float *part_o, *part_lse;
    int vec; /* mma path: every q/k/v row is 16-byte aligned and dense */
    /* Executed work: block x writes cnt[3x .. 3x+2] = (query row, key) pairs
     * of QK^T, of P.V, and K/V rows loaded; NULL = not counted. */
    unsigned long long *cnt;
};

/* ---- host side: the parameters of a call ---------------------------------- */

static inline size_t xattn_cuda_dtype_size(int dt)
{
    return dt == XATTN_DTYPE_F32                                      ? 4
           : dt == XATTN_DTYPE_FP8_E4M3 || dt == XATTN_DTYPE_FP8_E5M2 ? 1
                                                                      : 2;
}

static inline xattn_cuda_kview xattn_cuda_make_view(const void *base, const xattn_view &v)
{
    xattn_cuda_kview kv;
    /* (a q8_0 view's offset is whole blocks: its byte is the block's d) */
    const long long at = v.dtype == XATTN_DTYPE_Q8_0
                             ? (long long)xattn_sem_q8_0_d_byte(v.off)
                             : v.off * (long long)xattn_cuda_dtype_size(v.dtype);
    kv.ptr = base ? (const char *)base + at : NULL;
    kv.sb = v.sb;
    kv.ss = v.ss;
    kv.sh = v.sh;
    kv.sd = v.sd;
    kv.dt = (int)v.dtype;
    return kv;
}

/* A window wider than Sq + Sk masks nothing: -1 keeps p +- w within 64 bits. */
static inline long long xattn_cuda_clamp_window(int64_t w, int64_t Sq, int64_t Sk)
{
    return (w < 0 || w >= Sq + Sk + 1) ? -1 : (long long)w;
}

static inline xattn_cuda_kparams xattn_cuda_make_params(const xattn_cuda_args *a)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P;
    P.q = xattn_cuda_make_view(a->q, p->q);
    P.k = xattn_cuda_make_view(a->k, p->k);
    P.v = xattn_cuda_make_view(a->v, p->v);
    P.o = xattn_cuda_make_view(a->o, p->o);
    P.lse = xattn_cuda_make_view(p->has_lse ? a->lse : NULL, p->lse);
    P.bias = xattn_cuda_make_view(p->has_bias ? a->bias : NULL, p->bias);
    P.len_q = a->len_q;
    P.len_k = a->len_k;
    P.start_q = a->start_q;
    P.start_k = a->start_k;
    P.alibi = p->alibi ? a->alibi : NULL;
    P.sinks = p->has_sinks && a->sinks ? a->sinks + p->sinks.off : NULL;
    P.sinks_sh = p->sinks.sh;
    P.k_scale = p->has_k_scale && a->k_scale ? a->k_scale + p->k_scale.off : NULL;
    P.v_scale = p->has_v_scale && a->v_scale ? a->v_scale + p->v_scale.off : NULL;
    P.ks_sh = p->k_scale.sh;
    P.vs_sh = p->v_scale.sh;
    P.pages = a->block_table && a->page_size > 0 ? a->block_table : NULL;
    P.max_pages = P.pages ? a->max_pages : 0;
    P.page_size = P.pages ? a->page_size : 0;
    P.page_shift = -1;
    for (int sh = 0; P.pages && sh < 31; sh++)
        if (P.page_size == 1 << sh)
            P.page_shift = sh;
    P.B = (int)p->B;
    P.Hq = (int)p->Hq;
    P.Hkv = (int)p->Hkv;
    P.group = (int)p->group;
    P.D = (int)p->D;
    P.Dv = (int)p->Dv;
    P.Sq = (int)p->Sq;
    P.Sk = (int)p->Sk;
    P.varlen = p->varlen;
    P.has_lse = p->has_lse && a->lse;
    P.has_bias = p->has_bias && a->bias;
    P.has_alibi = P.alibi != NULL;
    P.causal = p->causal;
    P.bottom_right = p->bottom_right;
    P.mods = p->mods;
    P.has_mods = xattn_sem_mods_any(&P.mods) || P.has_alibi || P.has_bias;
    P.wl = xattn_cuda_clamp_window(p->window_left, p->Sq, p->Sk);
    P.wr = xattn_cuda_clamp_window(p->window_right, p->Sq, p->Sk);
    P.scale = p->scale;
    P.nrb = 0;
    P.splits = 0;
    P.chunk = 0;
    P.part_o = NULL;
    P.part_lse = NULL;
    P.vec = 0;
    P.cnt = a->counts;
    return P;
}

__host__ __device__ static inline long long xattn_cuda_cdiv(long long a, long long b)
{
    return (a + b - 1) / b;
}

/* Keys per split for `splits` splits (the same on host and device). */
static inline int xattn_cuda_split_chunk(int Sk, int splits)
{
    long long units = xattn_cuda_cdiv(Sk, XATTN_CUDA_SPLIT_UNIT);
    if (units < 1)
        units = 1;
    return (int)(xattn_cuda_cdiv(units, splits) * XATTN_CUDA_SPLIT_UNIT);
}

/* ---- device side ---------------------------------------------------------- */

/*
 * The exact f32 value of an fp8 byte x (E5M2 when e5m2, else E4M3), as
 * xattn_sem_fp8_value of the semantics header but with bit operations in
 * place of ldexp: a normal number's exponent and mantissa bits, shifted to
 * f32's places, are an f32 whose exponent field is short by the bias
 * difference (E4M3: 127 - 7 = 120, E5M2: 127 - 15 = 112); a subnormal is its
 * mantissa times 2^-9 (E4M3) or 2^-16 (E5M2). E4M3 has no infinity and
 * S.1111.111 is NaN; E5M2's top exponent is inf (mantissa 0) or NaN.
 */
__device__ __forceinline__ float xattn_cuda_fp8_to_f32(unsigned x, int e5m2)
{
    const unsigned em = x & 0x7fu, mb = e5m2 ? 2u : 3u;
    float v;
    if (em < (1u << mb))
        v = (float)em * (e5m2 ? 1.52587890625e-5f : 0.001953125f); /* 2^-16, 2^-9 */
    else if (e5m2 ? em >= 0x7cu : em == 0x7fu)
        v = e5m2 && em == 0x7cu ? XATTN_CUDA_INF : __int_as_float(0x7fc00000);
    else
        v = __uint_as_float((em << (23u - mb)) + ((e5m2 ? 112u : 120u) << 23));
    return __uint_as_float(__float_as_uint(v) | ((x & 0x80u) << 24));
}

__device__ __forceinline__ float xattn_cuda_load(const char *base, int dt, long long idx)
{
    if (dt == XATTN_DTYPE_F32)
        return ((const float *)base)[idx];
    unsigned short u = ((const unsigned short *)base)[idx];
    if (dt == XATTN_DTYPE_F16)
        return __half2float(__ushort_as_half(u));
    return __uint_as_float((unsigned)u << 16);
}

__device__ __forceinline__ void xattn_cuda_store(const char *cbase, int dt, long long idx, float x)
{
    char *base = (char *)cbase;
    if (dt == XATTN_DTYPE_F32)
        ((float *)base)[idx] = x;
    else if (dt == XATTN_DTYPE_F16)
        ((unsigned short *)base)[idx] = __half_as_ushort(__float2half_rn(x));
    else
        ((unsigned short *)base)[idx] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/* The scale of KV head hk of an fp8 cache's K (scales = P.k_scale, sh =
 * P.ks_sh) or V: 1 when absent (and for 16/32-bit K/V, which have none). */
__device__ __forceinline__ float xattn_cuda_kv_scale(const float *scales, long long sh, int hk)
{
    return scales ? scales[(long long)hk * sh] : 1.0f;
}

/* xattn_cuda_load for K and V, which may also be fp8 or q8_0 (a separate
 * function, so that the loads of q and the bias, inlined everywhere, stay as
 * they were). q8_0 (ggml's block_q8_0): idx counts values from a block's
 * start (xattn_cuda_make_view); the semantics header's helpers give the
 * bytes of the value's int8 and of its block's f16 d, which is 2-byte
 * aligned (blocks are 34 bytes). */
__device__ __forceinline__ float xattn_cuda_load_kv(const char *base, int dt, long long idx)
{
    if (dt == XATTN_DTYPE_FP8_E4M3 || dt == XATTN_DTYPE_FP8_E5M2)
        return xattn_cuda_fp8_to_f32(((const unsigned char *)base)[idx],
                                     dt == XATTN_DTYPE_FP8_E5M2);
    if (dt == XATTN_DTYPE_Q8_0) {
        const unsigned short d = ((const unsigned short *)base)[xattn_sem_q8_0_d_byte(idx) / 2];
        return __half2float(__ushort_as_half(d)) *
               (float)((const signed char *)base)[xattn_sem_q8_0_qs_byte(idx)];
    }
    return xattn_cuda_load(base, dt, idx);
}

/* max with NaN sticky: once m is NaN it stays NaN; a NaN x makes it NaN. */
__device__ __forceinline__ float xattn_cuda_sticky_max(float m, float x)
{
    return xattn_sem_sticky_max(m, x);
}

/*
 * The online-softmax update of one row for a new tile whose (sticky) max is
 * tile_max: m becomes max(m, tile_max); returns the value to subtract from the
 * tile's scores before exp (m, or 0 while m is still -inf), and *alpha, the
 * factor for the old l and accumulator (exp(m_old - m_new): 0 when m_old was
 * -inf, NaN once a NaN was seen).
 */
__device__ __forceinline__ float xattn_cuda_softmax_rescale(float *m, float tile_max, float *alpha)
{
    return xattn_sem_online_max(m, tile_max, alpha);
}

/* The same update with scores in log2 units (the mma path): *alpha is
 * 2^(m_old - m_new). */
__device__ __forceinline__ float xattn_cuda_softmax_rescale2(float *m, float tile_max, float *alpha)
{
    float m_old = *m;
    float m_new = xattn_cuda_sticky_max(m_old, tile_max);
    float m_use = m_new == -XATTN_CUDA_INF ? 0.0f : m_new;
    *alpha = exp2f(m_old - m_use);
    *m = m_new;
    return m_use;
}

/* One sequence of the batch. */
struct xattn_cuda_seq {
    int Lq, Lk; /* lengths */
    int q0, k0; /* first token in the tensors (start_q / start_k) */
    int rows;   /* query rows written: Sq (padded) or Lq (varlen) */
};

/* Folds head h's sink into a finished real row's (*m, *l) (xattn_sem_sink_fold
 * of the semantics header) and returns the factor for its accumulator: 1
 * without sinks. Only where a row is finished: a SPLITKV chunk's partial holds
 * no sink, the combine folds it once. */
__device__ __forceinline__ float xattn_cuda_sink_fold(const xattn_cuda_kparams &P, int h, float *m,
                                                      float *l)
{
    if (!P.sinks)
        return 1.0f;
    return xattn_sem_sink_fold(m, l, P.sinks[(long long)h * P.sinks_sh]);
}

__device__ __forceinline__ xattn_cuda_seq xattn_cuda_seq_load(const xattn_cuda_kparams &P, int b)
{
    xattn_cuda_seq s;
    s.Lq = P.len_q[b];
    s.Lk = P.len_k[b];
    s.q0 = P.start_q[b];
    s.k0 = P.start_k[b];
    s.rows = P.varlen ? s.Lq : P.Sq;
    return s;
}

/* One query row (b, h, i); lo == hi: no valid key (padding rows included). */
struct xattn_cuda_row {
    int lo, hi;         /* valid keys: lo <= j < hi */
    long long pos;      /* aligned position p (docs/semantics.md step 3) */
    float slope;        /* ALiBi slope of head h (when P.has_alibi) */
    long long bias_idx; /* element index of bias[b, h, i, 0] (when P.has_bias) */
};

/*
 * The valid keys of row i of sequence s, clipped to [kmin, kmax): docs/semantics.md
 * step 6 (j >= Lk, causal, window) as one interval. Both ends are
 * non-decreasing in i for the real rows (i < Lq), so the union of the
 * intervals of rows i0..i1 is within [lo(i0), hi(i1)) and their intersection
 * is [lo(i1), hi(i0)): the tile loop's bounds and its "no mask" test.
 */
__device__ __forceinline__ xattn_sem_rule xattn_cuda_rule(const xattn_cuda_kparams &P,
                                                          const xattn_cuda_seq &s)
{
    return xattn_sem_rule_make(s.Lq, s.Lk, P.bottom_right, P.causal, P.wl, P.wr);
}

__device__ __forceinline__ void xattn_cuda_row_range(const xattn_cuda_kparams &P,
                                                     const xattn_cuda_seq &s, int i, int kmin,
                                                     int kmax, int *lo, int *hi)
{
    const xattn_sem_rule r = xattn_cuda_rule(P, s);
    xattn_sem_i64 a, b;
    xattn_sem_row_keys(&r, i, &a, &b);
    a = a < kmin ? kmin : a > kmax ? kmax : a;
    b = b > kmax ? kmax : b < a ? a : b;
    *lo = (int)a;
    *hi = (int)b;
}

/* The union of the keys of rows [i0, i1) of sequence s, clipped to
 * [kmin, kmax): the tiles a row block visits (xattn_sem_block_keys: rows
 * without keys do not count); lo == hi when no row has one. */
__device__ __forceinline__ void xattn_cuda_block_range(const xattn_cuda_kparams &P,
                                                       const xattn_cuda_seq &s, int i0, int i1,
                                                       int kmin, int kmax, int *lo, int *hi)
{
    const xattn_sem_rule r = xattn_cuda_rule(P, s);
    xattn_sem_i64 a, b;
    if (!xattn_sem_block_keys(&r, i0, i1, &a, &b)) {
        *lo = *hi = 0;
        return;
    }
    a = a < kmin ? kmin : a;
    b = b > kmax ? kmax : b;
    if (b <= a)
        a = b = 0;
    *lo = (int)a;
    *hi = (int)b;
}

__device__ __forceinline__ void xattn_cuda_row_init(const xattn_cuda_kparams &P,
                                                    const xattn_cuda_seq &s, int b, int h, int i,
                                                    int kmin, int kmax, xattn_cuda_row *rw)
{
    xattn_cuda_row_range(P, s, i, kmin, kmax, &rw->lo, &rw->hi);
    rw->pos = P.bottom_right ? (long long)i + s.Lk - s.Lq : (long long)i;
    rw->slope = P.has_alibi ? P.alibi[h] : 0.0f;
    rw->bias_idx =
        P.has_bias ? (long long)b * P.bias.sb + (long long)h * P.bias.sh + (long long)i * P.bias.ss
                   : 0;
}

/* docs/semantics.md steps 2-6 for the scaled score s of key j of row rw. The mask is
 * tested first, so nothing is read for a masked key. */
__device__ __forceinline__ float xattn_cuda_mod_score(const xattn_cuda_kparams &P,
                                                      const xattn_cuda_row &rw, float s, int j)
{
    if (j < rw.lo || j >= rw.hi)
        return -XATTN_CUDA_INF;
    const float bias =
        P.has_bias ? xattn_cuda_load(P.bias.ptr, P.bias.dt, rw.bias_idx + (long long)j * P.bias.sd)
                   : 0.0f;
    return xattn_sem_modify(&P.mods, s, P.has_alibi ? rw.slope : 0.0f, rw.pos, j, bias);
}

/* Flat grid: block x = ((b * splits + split) * Hkv + hk) * nrb + rb', row block
 * rb = nrb - 1 - rb' (the longest causal rows start first). */
struct xattn_cuda_blk {
    int rb, hk, split, b;
};

__device__ __forceinline__ xattn_cuda_blk xattn_cuda_block_decode(const xattn_cuda_kparams &P)
{
    unsigned x = blockIdx.x;
    unsigned nrb = (unsigned)P.nrb, hkv = (unsigned)P.Hkv;
    unsigned ns = P.splits > 0 ? (unsigned)P.splits : 1u;
    xattn_cuda_blk k;
    k.rb = (int)(nrb - 1u - x % nrb);
    x /= nrb;
    k.hk = (int)(x % hkv);
    x /= hkv;
    k.split = (int)(x % ns);
    k.b = (int)(x / ns);
    return k;
}

/* Element index of Q/O row (token t, head h) and of K/V row (token t, KV head hk). */
__device__ __forceinline__ long long xattn_cuda_row_index(const xattn_cuda_kview &v, int b, int t,
                                                          int h)
{
    return (long long)b * v.sb + (long long)t * v.ss + (long long)h * v.sh;
}

/* Element index of key j of sequence b (KV head 0, dim 0) in K or V (view v
 * is P.k or P.v; k0: the sequence's first token, contiguous K/V only). A
 * paged cache looks the key's page up in the table; the callers only ask for
 * keys below the sequence's length, whose table entries the host validated. */
__device__ __forceinline__ long long
xattn_cuda_kv_index(const xattn_cuda_kparams &P, const xattn_cuda_kview &v, int b, int k0, int j)
{
    if (P.pages) {
        const int n = P.page_shift >= 0 ? j >> P.page_shift : j / P.page_size;
        const int pg = P.pages[(long long)b * P.max_pages + n];
        return (long long)pg * v.sb + (long long)(j - n * P.page_size) * v.ss;
    }
    return (long long)b * v.sb + (long long)(k0 + j) * v.ss;
}

/* A tile of keys [t, t + n) with t below the sequence's length: the element
 * index of key t when every key of the tile lies in t's page (always for
 * contiguous K/V; then key t + c is at the result + c * v.ss: one table
 * look-up a tile), or -1 when the tile crosses a page boundary (each key then
 * looks its own page up, xattn_cuda_kv_index). Tiles start at multiples of
 * their size, so a page size that is a multiple of the tile never crosses. */
__device__ __forceinline__ long long xattn_cuda_kv_tile(const xattn_cuda_kparams &P,
                                                        const xattn_cuda_kview &v, int b, int k0,
                                                        int t, int n)
{
    if (P.pages) {
        const int slot = P.page_shift >= 0 ? t & (P.page_size - 1) : t % P.page_size;
        if (slot + n > P.page_size)
            return -1;
    }
    return xattn_cuda_kv_index(P, v, b, k0, t);
}

/* Element index of LSE[b, h, token t]. */
__device__ __forceinline__ long long xattn_cuda_lse_index(const xattn_cuda_kparams &P, int b, int h,
                                                          int t)
{
    return (long long)b * P.lse.sb + (long long)h * P.lse.sh + (long long)t * P.lse.ss;
}

/* Partial O / LSE of split `sp` of row (b, h, i) in the SPLITKV workspace. */
__device__ __forceinline__ long long xattn_cuda_part_row(const xattn_cuda_kparams &P, int sp, int b,
                                                         int h, int i)
{
    return (((long long)sp * P.B + b) * P.Hq + h) * P.Sq + i;
}

/* The key range [kmin, kmax) of a block: its split's chunk, or all keys. */
__device__ __forceinline__ void xattn_cuda_split_range(const xattn_cuda_kparams &P,
                                                       const xattn_cuda_seq &s, int split,
                                                       int *kmin, int *kmax)
{
    if (P.splits > 0) {
        long long lo = (long long)split * P.chunk;
        long long hi = lo + P.chunk;
        *kmin = (int)(lo < s.Lk ? lo : s.Lk);
        *kmax = (int)(hi < s.Lk ? hi : s.Lk);
    } else {
        *kmin = 0;
        *kmax = s.Lk;
    }
}

/* Merges the softmax state (m2, l2) into (m, l): the max is NaN-sticky, and
 * a -inf side contributes nothing. */
__device__ __forceinline__ void xattn_cuda_softmax_merge(float *m, float *l, float m2, float l2)
{
    float mn = xattn_cuda_sticky_max(*m, m2);
    float mu = mn == -XATTN_CUDA_INF ? 0.0f : mn;
    *l = *l * expf(*m - mu) + l2 * expf(m2 - mu);
    *m = mn;
}

/* docs/semantics.md step 8 in the careful P.V: key j of row rw is masked (it
 * contributes nothing) when it lies outside the row's interval or its bias is
 * -inf, i.e. exactly when xattn_cuda_mod_score gives -inf. */
__device__ __forceinline__ bool xattn_cuda_key_masked(const xattn_cuda_kparams &P,
                                                      const xattn_cuda_row &rw, int j)
{
    if (j < rw.lo || j >= rw.hi)
        return true;
    return P.has_bias && xattn_cuda_load(P.bias.ptr, P.bias.dt,
                                         rw.bias_idx + (long long)j * P.bias.sd) == -XATTN_CUDA_INF;
}

/* acc + p * v for an unmasked key in the careful P.V. A weight p that
 * underflowed to 0 is a tiny positive weight in the reference: v's inf and
 * NaN still pass (tiny x inf = inf), its finite values add nothing. */
__device__ __forceinline__ float xattn_cuda_pv_add(float acc, float p, float v)
{
    if (p != 0.0f)
        return fmaf(p, v, acc);
    return isfinite(v) ? acc : acc + v;
}

/* Writes this block's executed-work counts (thread 0; every block, also one
 * that had nothing to do, so that the slots need no clearing). */
__device__ __forceinline__ void xattn_cuda_count_put(const xattn_cuda_kparams &P,
                                                     unsigned long long qk, unsigned long long pv,
                                                     unsigned long long kv)
{
    if (P.cnt && threadIdx.x == 0) {
        unsigned long long *c = P.cnt + 3ull * blockIdx.x;
        c[0] = qk;
        c[1] = pv;
        c[2] = kv;
    }
}

/* ---- internal launchers (C++ linkage; one per kernel family) ------------- */

/* Row blocks of the simt flash kernel. */
#define XATTN_CUDA_SIMT_BM 64

/* Tile configuration of the mma flash kernel per padded head dim DP: NW
 * warps, BN keys per KV tile (a divisor of XATTN_CUDA_SPLIT_UNIT), and the
 * two shapes a launch picks between (xattn_cuda_args.mma_narrow):
 *   wide   (default): MT_W m16 tiles a warp, BN_W keys a tile, a K/V ring
 *          of ST_W stages;
 *   narrow: MT_N, BN_N, ST_N (the 64-row shape).
 * Rows per block: 16 * MT * NW. A ring of ST >= 2 stages loads the K and V
 * tiles ST - 1 tiles ahead (one barrier a tile); ST = 1 loads a tile once
 * the previous one is done with (two barriers a tile). Build switch:
 * -DXATTN_CUDA_MMA_STAGES=3 for a 3-stage ring in the wide shape. */
#ifndef XATTN_CUDA_MMA_STAGES
#define XATTN_CUDA_MMA_STAGES 2 /* the wide shape's ring: 2 or 3 */
#endif
template <int DP> struct xattn_cuda_mma_cfg;
template <> struct xattn_cuda_mma_cfg<64> {
    enum {
        NW = 4,
        MT_W = 2,
        BN_W = 64,
        ST_W = XATTN_CUDA_MMA_STAGES,
        MT_N = 1,
        BN_N = 64,
        ST_N = 2
    };
};
template <> struct xattn_cuda_mma_cfg<80> {
    enum {
        NW = 4,
        MT_W = 2,
        BN_W = 64,
        ST_W = XATTN_CUDA_MMA_STAGES,
        MT_N = 1,
        BN_N = 64,
        ST_N = 2
    };
};
/* d96: 128 x 64 tiles spill on sm_80 (24 / 72 bytes, 255 registers): 128 x
 * 32 in the wide shape. */
template <> struct xattn_cuda_mma_cfg<96> {
    enum {
        NW = 4,
        MT_W = 2,
        BN_W = 32,
        ST_W = XATTN_CUDA_MMA_STAGES,
        MT_N = 1,
        BN_N = 64,
        ST_N = 2
    };
};
/* d128: 128 x 64 tiles (FlashAttention-2's) need 255 registers a thread and
 * spill (28 / 56 bytes on sm_90): the wide shape takes 128 x 32 tiles (246,
 * no spill; FlashAttention-2's tile on sm_86 / sm_89). */
template <> struct xattn_cuda_mma_cfg<128> {
    enum {
        NW = 4,
        MT_W = 2,
        BN_W = 32,
        ST_W = XATTN_CUDA_MMA_STAGES,
        MT_N = 1,
        BN_N = 64,
        ST_N = 2
    };
};
/* d256: two m16 tiles a warp would need 256 O accumulators a thread; both
 * shapes keep 64 rows, the narrow one without a ring (its shared memory fits
 * the 99 KB parts, sm_86 / sm_89). */
template <> struct xattn_cuda_mma_cfg<256> {
    enum { NW = 4, MT_W = 1, BN_W = 32, ST_W = 2, MT_N = 1, BN_N = 32, ST_N = 1 };
};

template <int DP, int NARROW> struct xattn_cuda_mma_pick {
    enum {
        MT = NARROW ? xattn_cuda_mma_cfg<DP>::MT_N : xattn_cuda_mma_cfg<DP>::MT_W,
        BN = NARROW ? xattn_cuda_mma_cfg<DP>::BN_N : xattn_cuda_mma_cfg<DP>::BN_W,
        ST = NARROW ? xattn_cuda_mma_cfg<DP>::ST_N : xattn_cuda_mma_cfg<DP>::ST_W,
        BM = 16 * MT * xattn_cuda_mma_cfg<DP>::NW,
        LDS = DP + 8, /* shared row pitch in elements: 16-byte rows, odd in 16-byte units */
        SMEM = (BM + 2 * ST * BN) * LDS * 2
    };
};

/* The padded head dims with an mma instantiation. */
static inline int xattn_cuda_mma_dp(int64_t D, int64_t Dv)
{
    int64_t d = D > Dv ? D : Dv;
    return d <= 64 ? 64 : d <= 80 ? 80 : d <= 96 ? 96 : d <= 128 ? 128 : 256;
}

#define XATTN_CUDA_MMA_PICK(DP, F)                                                                 \
    (narrow ? (int)xattn_cuda_mma_pick<DP, 1>::F : (int)xattn_cuda_mma_pick<DP, 0>::F)
static inline int xattn_cuda_mma_bm(int dp, int narrow)
{
    switch (dp) {
    case 64: return XATTN_CUDA_MMA_PICK(64, BM);
    case 80: return XATTN_CUDA_MMA_PICK(80, BM);
    case 96: return XATTN_CUDA_MMA_PICK(96, BM);
    case 128: return XATTN_CUDA_MMA_PICK(128, BM);
    default: return XATTN_CUDA_MMA_PICK(256, BM);
    }
}

static inline int xattn_cuda_mma_bn(int dp, int narrow)
{
    switch (dp) {
    case 64: return XATTN_CUDA_MMA_PICK(64, BN);
    case 80: return XATTN_CUDA_MMA_PICK(80, BN);
    case 96: return XATTN_CUDA_MMA_PICK(96, BN);
    case 128: return XATTN_CUDA_MMA_PICK(128, BN);
    default: return XATTN_CUDA_MMA_PICK(256, BN);
    }
}

static inline size_t xattn_cuda_mma_smem(int dp, int narrow)
{
    switch (dp) {
    case 64: return XATTN_CUDA_MMA_PICK(64, SMEM);
    case 80: return XATTN_CUDA_MMA_PICK(80, SMEM);
    case 96: return XATTN_CUDA_MMA_PICK(96, SMEM);
    case 128: return XATTN_CUDA_MMA_PICK(128, SMEM);
    default: return XATTN_CUDA_MMA_PICK(256, SMEM);
    }
}
#undef XATTN_CUDA_MMA_PICK

/* Blocks of NAIVE's QK kernel and of its PV kernel (counter slots: the QK
 * kernel's first, then the PV kernel's). */
void xattn_cuda_naive_blocks(const xattn_problem *p, long long *qk, long long *pv);

/* Launch the flash tile loop (FLASH when P.splits == 0, SPLITKV partial
 * otherwise) on nblocks blocks; P.nrb is already set for the kernel's BM. */
cudaError_t xattn_cuda_flash_simt_launch(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                         unsigned nblocks);
cudaError_t xattn_cuda_flash_mma_d64(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                     unsigned nblocks);
cudaError_t xattn_cuda_flash_mma_d80(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                     unsigned nblocks);
cudaError_t xattn_cuda_flash_mma_d96(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                     unsigned nblocks);
cudaError_t xattn_cuda_flash_mma_d128(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                      unsigned nblocks);
cudaError_t xattn_cuda_flash_mma_d256(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                      unsigned nblocks);

/* Threads per block of a launch: `threads`, or an invalid count when a test
 * asked for a failing launch. */
static inline unsigned xattn_cuda_threads(const xattn_cuda_args *a, unsigned threads)
{
    return a->inject_failure ? 4096u : threads;
}

#endif /* XATTN_CUDA_COMMON_CUH */
