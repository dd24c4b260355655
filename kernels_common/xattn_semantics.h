/*
 * xattn_semantics.h: the one source of the attention semantics
 * (docs/semantics.md), shared by every backend's kernels and by the dispatch
 * layer's work accounting.
 *
 * Written in the subset of C that compiles three ways:
 *   - as C11 (the CPU kernels, xattn_work.c, tests);
 *   - as CUDA C++ (`__host__ __device__`), and as plain C++ for the CUDA
 *     kernels' CPU emulator;
 *   - as OpenCL C 1.2: the build prepends this file to the .cl sources when it
 *     embeds them (kernels_cl/xattn_cl_embed.cmake).
 * So: no headers beyond <stdint.h>/<math.h> in C, no address-space-sensitive
 * pointers other than to private scalars and structs, 64-bit integers through
 * xattn_sem_i64, float math through the XATTN_SEM_* names below.
 *
 * What is here, by step of docs/semantics.md:
 *   step 3   the aligned position of a query row;
 *   step 6   the interval of keys a row sees, and the union over a block of
 *            consecutive rows (what a tiled kernel walks);
 *   steps 2, 4, 5  the score modifiers (softcap, ALiBi, bias) in their order;
 *   step 8   the online-softmax update (the running max, sticky for NaN, and
 *            the factor that rescales what was accumulated), and the attention
 *            sink folded into a finished row or a split-KV combine.
 * A kernel may vectorize a step (the CPU's softcap over a row, the CUDA mma
 * fragments), but it computes what these functions compute, in this order;
 * where it cannot use them directly a comment there says why.
 */
#ifndef XATTN_SEMANTICS_H
#define XATTN_SEMANTICS_H

#if defined(__OPENCL_VERSION__)
#define XATTN_SEM_FN inline
typedef long xattn_sem_i64;
#define XATTN_SEM_TANHF(x) tanh(x)
#define XATTN_SEM_EXPF(x) exp(x)
#define XATTN_SEM_LOGF(x) log(x)
#define XATTN_SEM_LDEXPF(x, e) ldexp(x, e)
#else
#include <math.h>
#include <stdint.h>
#if defined(__CUDACC__)
#define XATTN_SEM_FN __host__ __device__ __forceinline__
#else
#define XATTN_SEM_FN static inline
#endif
typedef int64_t xattn_sem_i64;
#define XATTN_SEM_TANHF(x) tanhf(x)
#define XATTN_SEM_EXPF(x) expf(x)
#define XATTN_SEM_LOGF(x) logf(x)
#define XATTN_SEM_LDEXPF(x, e) ldexpf(x, e)
#endif
#define XATTN_SEM_ISNAN(x) isnan(x)
#define XATTN_SEM_INF INFINITY
#define XATTN_SEM_NAN NAN

/* ---- steps 3 and 6: positions and the keys a row sees ---------------------- */

/*
 * The mask rule of one sequence. The masks of step 6 (j >= Lk; causal j > p;
 * window j < p - left or j > p + right) leave query row i, at aligned position
 * p = i + off, the keys
 *     lo(p) = max(0, p - left)          hi(p) = min(Lk, p + reach)
 * with reach = 1 under a causal mask, right + 1 for a window's right side (the
 * smaller when both), and the unbounded sides made finite but beyond any
 * position (`big`), so that nothing overflows. Both ends grow with p, so a
 * row's keys are one interval, and rows with any key at all are the
 * consecutive positions -reach < p < Lk + left.
 */
typedef struct xattn_sem_rule {
    xattn_sem_i64 lq, lk; /* the sequence's lengths */
    xattn_sem_i64 off;    /* p = i + off: Lk - Lq bottom-right, 0 top-left */
    xattn_sem_i64 left;   /* lo(p) = max(0, p - left) */
    xattn_sem_i64 reach;  /* hi(p) = min(Lk, p + reach) */
} xattn_sem_rule;

/* The rule of a sequence with lengths lq, lk; window sides < 0 are unbounded. */
XATTN_SEM_FN xattn_sem_rule xattn_sem_rule_make(xattn_sem_i64 lq, xattn_sem_i64 lk,
                                                int bottom_right, int causal,
                                                xattn_sem_i64 window_left,
                                                xattn_sem_i64 window_right)
{
    xattn_sem_rule r;
    r.lq = lq;
    r.lk = lk;
    r.off = bottom_right ? lk - lq : 0;
    /* p lies in [-lq, lk + lq): a reach of `big` never binds. */
    const xattn_sem_i64 big = lk + lq + 2;
    r.left = (window_left >= 0 && window_left < big) ? window_left : big;
    xattn_sem_i64 c = big;
    if (causal)
        c = 1;
    if (window_right >= 0 && window_right < big && window_right + 1 < c)
        c = window_right + 1;
    r.reach = c;
    return r;
}

/* Step 3: the aligned position of query row i. */
XATTN_SEM_FN xattn_sem_i64 xattn_sem_pos(const xattn_sem_rule *r, xattn_sem_i64 i)
{
    return i + r->off;
}

XATTN_SEM_FN xattn_sem_i64 xattn_sem_lo_at(const xattn_sem_rule *r, xattn_sem_i64 pos)
{
    const xattn_sem_i64 lo = pos - r->left;
    return lo > 0 ? lo : 0;
}

XATTN_SEM_FN xattn_sem_i64 xattn_sem_hi_at(const xattn_sem_rule *r, xattn_sem_i64 pos)
{
    const xattn_sem_i64 hi = pos + r->reach;
    return hi < r->lk ? hi : r->lk;
}

/* Step 6: the keys [*lo, *hi) row i sees; empty (*lo == *hi) for a padding row
 * (i >= lq) or a row every key of which is masked. */
XATTN_SEM_FN void xattn_sem_row_keys(const xattn_sem_rule *r, xattn_sem_i64 i, xattn_sem_i64 *lo,
                                     xattn_sem_i64 *hi)
{
    const xattn_sem_i64 pos = xattn_sem_pos(r, i);
    xattn_sem_i64 a = xattn_sem_lo_at(r, pos), b = xattn_sem_hi_at(r, pos);
    if (i < 0 || i >= r->lq || b < a)
        b = a = (a < r->lk ? a : r->lk);
    *lo = a;
    *hi = b;
}

/* The rows with at least one key: [*ia, *ib) (empty when none). */
XATTN_SEM_FN void xattn_sem_nonempty_rows(const xattn_sem_rule *r, xattn_sem_i64 *ia,
                                          xattn_sem_i64 *ib)
{
    xattn_sem_i64 a = 1 - r->reach - r->off, b = r->lk + r->left - r->off;
    if (a < 0)
        a = 0;
    if (b > r->lq)
        b = r->lq;
    if (r->lk <= 0 || b < a)
        b = a;
    *ia = a;
    *ib = b;
}

/*
 * The union of the keys of rows [i0, i1): one interval [*lo, *hi), since
 * both ends grow with the row. Rows without keys (padding, fully masked) do
 * not count: the union is from the first row that has keys to the last one.
 * Returns 0 (and an empty interval) when no row of the block has a key: the
 * block is skipped.
 */
XATTN_SEM_FN int xattn_sem_block_keys(const xattn_sem_rule *r, xattn_sem_i64 i0, xattn_sem_i64 i1,
                                      xattn_sem_i64 *lo, xattn_sem_i64 *hi)
{
    xattn_sem_i64 ia, ib;
    xattn_sem_nonempty_rows(r, &ia, &ib);
    const xattn_sem_i64 first = i0 > ia ? i0 : ia, last = (i1 < ib ? i1 : ib) - 1;
    if (last < first) {
        *lo = *hi = 0;
        return 0;
    }
    *lo = xattn_sem_lo_at(r, xattn_sem_pos(r, first));
    *hi = xattn_sem_hi_at(r, xattn_sem_pos(r, last));
    return 1;
}

/* Whether every row of [i0, i1) sees every key of [j0, j1): the tile needs no
 * mask (the intersection of the rows' intervals is [lo(i1-1), hi(i0))). */
XATTN_SEM_FN int xattn_sem_block_covers(const xattn_sem_rule *r, xattn_sem_i64 i0, xattn_sem_i64 i1,
                                        xattn_sem_i64 j0, xattn_sem_i64 j1)
{
    if (i0 < 0 || i1 > r->lq || i1 <= i0)
        return 0;
    return xattn_sem_lo_at(r, xattn_sem_pos(r, i1 - 1)) <= j0 &&
           xattn_sem_hi_at(r, xattn_sem_pos(r, i0)) >= j1;
}

/* ---- steps 2, 4, 5: the score modifiers ------------------------------------- */

/* Step 2: cap * tanh(s / cap), or s when cap is 0 (off). */
XATTN_SEM_FN float xattn_sem_softcap(float s, float cap)
{
    return cap > 0.0f ? cap * XATTN_SEM_TANHF(s / cap) : s;
}

/* Step 4: the ALiBi term of key j for a row at position pos. */
XATTN_SEM_FN float xattn_sem_alibi(float slope, xattn_sem_i64 pos, xattn_sem_i64 j)
{
    const xattn_sem_i64 dist = pos > j ? pos - j : j - pos;
    return -slope * (float)dist;
}

/*
 * The score modifiers that are parameters of the whole call, in one struct
 * that every backend hands to its kernels as it is (the CPU by pointer, CUDA
 * inside its argument struct, OpenCL as one by-value kernel argument), so
 * that a new modifier is a field here, a step in xattn_sem_modify, a term in
 * xattn_sem_mods_any, the line of xattn__problem_build that fills it, and the
 * reference: no kernel signature changes. Per-head and per-element inputs
 * (the ALiBi slopes, the bias tensor) stay apart, since a backend stages them
 * in its own memory. Only 32-bit float and int fields, so that the host's and
 * an OpenCL device's layouts agree.
 */
typedef struct xattn_sem_mods {
    float softcap; /* step 2: cap * tanh(s / cap); 0 = off */
} xattn_sem_mods;

/* Whether any modifier of m can change a score (1), or none is on (0): a
 * kernel may then skip xattn_sem_modify for keys that need no ALiBi or bias. */
XATTN_SEM_FN int xattn_sem_mods_any(const xattn_sem_mods *m)
{
    return m->softcap > 0.0f;
}

/* Steps 2, 4 and 5 on the scaled score s = (q . k) * scale of a key the masks
 * leave (step 6 is the caller's: a masked key's score is -inf and nothing of
 * it is read). slope is 0 without ALiBi, bias 0 without a bias tensor. A
 * kernel that vectorizes the softcap (the CPU) calls this with a copy of m
 * whose softcap is 0, after its own vector pass, and with m itself when
 * xattn_sem_mods_any says another modifier is on (so that a new modifier is
 * applied in its order without a vector form). */
XATTN_SEM_FN float xattn_sem_modify(const xattn_sem_mods *m, float s, float slope,
                                    xattn_sem_i64 pos, xattn_sem_i64 j, float bias)
{
    s = xattn_sem_softcap(s, m->softcap);
    if (slope != 0.0f)
        s += xattn_sem_alibi(slope, pos, j);
    return s + bias;
}

/* ---- step 8: the online softmax ------------------------------------------------ */

/* max(a, b) where a NaN on either side wins and stays (a NaN score makes its
 * row NaN). */
XATTN_SEM_FN float xattn_sem_sticky_max(float a, float b)
{
    if (XATTN_SEM_ISNAN(a) || XATTN_SEM_ISNAN(b))
        return XATTN_SEM_NAN;
    return a > b ? a : b;
}

/*
 * A row's running max *m (-inf before any key) meets a tile whose own max is
 * tile_max: *m becomes the sticky max of both. Returns the value to subtract
 * from the tile's scores before exp (the new max, or 0 while it is still -inf:
 * every weight so far is 0), and sets *alpha to the factor that rescales the
 * running sum and accumulator: exp(m_old - m_new), which is 0 while m_old was
 * -inf, 1 when the max did not move, NaN once a NaN was seen.
 */
XATTN_SEM_FN float xattn_sem_online_max(float *m, float tile_max, float *alpha)
{
    const float m_old = *m;
    const float m_new = xattn_sem_sticky_max(m_old, tile_max);
    const float m_use = m_new == -XATTN_SEM_INF ? 0.0f : m_new;
    *alpha = XATTN_SEM_EXPF(m_old - m_use);
    *m = m_new;
    return m_use;
}

/* The log-sum-exp of a finished row: m + log(l), -inf for a fully masked row
 * (m = -inf, l = 0). */
XATTN_SEM_FN float xattn_sem_lse(float m, float l)
{
    return m == -XATTN_SEM_INF ? -XATTN_SEM_INF : m + XATTN_SEM_LOGF(l);
}

/*
 * The attention sink (step 8): a per-head logit that joins the softmax's
 * denominator and never the output. A finished row, or a split-KV combine
 * over its chunks, holds the running max *m (-inf when the row saw no key)
 * and the sum *l of exp(s - *m); the accumulated output acc is relative to
 * the same *m. Folding the sink in:
 *     m' = max(m, sink) (NaN sticky),  l' = l * exp(m - m') + exp(sink - m')
 * and returns c = exp(m - m'): the output is then acc * c / l' and the LSE
 * xattn_sem_lse(m', l') = log(sum exp(s) + exp(sink)). Taking m' over the
 * sink too keeps a large sink from overflowing. A row that saw no key gets
 * m' = sink, l' = 1 and c = 0: O = 0 and LSE = sink (-inf for a sink of
 * -inf, which is no sink at all). The sink is not softcapped, and is folded
 * once per row: a split-KV combine folds it after merging its chunks, never
 * into a chunk.
 */
XATTN_SEM_FN float xattn_sem_sink_fold(float *m, float *l, float sink)
{
    const float m_old = *m;
    if (m_old == -XATTN_SEM_INF) {
        *m = sink;
        *l = 1.0f;
        return 0.0f;
    }
    const float m_new = xattn_sem_sticky_max(m_old, sink);
    const float c = XATTN_SEM_EXPF(m_old - m_new);
    *l = *l * c + XATTN_SEM_EXPF(sink - m_new);
    *m = m_new;
    return c;
}

/* ---- K/V dtypes: an 8-bit float's value ------------------------------------ */

/*
 * The exact f32 value of an fp8 byte (every fp8 number is an f32 number):
 * E4M3 (e5m2 = 0), the OCP "fn" form: sign, 4 exponent bits (bias 7), 3
 * mantissa bits, subnormals m * 2^-9, no infinities, S.1111.111 is NaN (max
 * 448); E5M2 (e5m2 = 1): sign, 5 exponent bits (bias 15), 2 mantissa bits,
 * subnormals m * 2^-16, exponent 31 is inf (m = 0) or NaN (max 57344). The
 * per-head scale of a cache multiplies this value (docs/semantics.md).
 */
XATTN_SEM_FN float xattn_sem_fp8_value(unsigned int byte, int e5m2)
{
    const unsigned int mb = e5m2 ? 2u : 3u, top = e5m2 ? 31u : 15u;
    const unsigned int e = (byte & 0x7fu) >> mb, m = byte & ((1u << mb) - 1u);
    float v;
    if (e5m2 && e == top)
        v = m ? XATTN_SEM_NAN : XATTN_SEM_INF;
    else if (!e5m2 && e == top && m == 7u)
        v = XATTN_SEM_NAN;
    else if (e == 0u) /* subnormal: m * 2^(1 - bias - mb) */
        v = XATTN_SEM_LDEXPF((float)m, e5m2 ? -16 : -9);
    else /* (2^mb + m) * 2^(e - bias - mb) */
        v = XATTN_SEM_LDEXPF((float)((1u << mb) + m), (int)e - (e5m2 ? 17 : 10));
    return (byte & 0x80u) ? -v : v;
}

/* ---- K/V dtypes: where a q8_0 value lies ----------------------------------- */

/*
 * q8_0 (ggml's block_q8_0): blocks of 32 values along the head dim, each 34
 * bytes, an IEEE f16 scale d (little-endian) followed by 32 int8 qs; value i
 * of a block is d * qs[i]. Addresses stay in values (elements): value e of a
 * buffer (e counted from the buffer's byte 0, offsets are whole blocks) has
 * its qs at byte (e / 32) * 34 + 2 + e % 32 and its block's d at byte
 * (e / 32) * 34. The one formula of docs/api.md: every backend and the
 * reference address q8_0 through these two.
 */
#define XATTN_SEM_Q8_0_BLOCK 32
#define XATTN_SEM_Q8_0_BLOCK_BYTES 34

XATTN_SEM_FN xattn_sem_i64 xattn_sem_q8_0_d_byte(xattn_sem_i64 e)
{
    return e / XATTN_SEM_Q8_0_BLOCK * XATTN_SEM_Q8_0_BLOCK_BYTES;
}

XATTN_SEM_FN xattn_sem_i64 xattn_sem_q8_0_qs_byte(xattn_sem_i64 e)
{
    return xattn_sem_q8_0_d_byte(e) + 2 + e % XATTN_SEM_Q8_0_BLOCK;
}

#endif /* XATTN_SEMANTICS_H */
