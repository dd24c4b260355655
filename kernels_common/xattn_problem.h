/*
 * The kernel contract: a validated, resolved attention problem, identical for
 * every backend. It lives in kernels_common/ with the semantics header
 * (xattn_semantics.h), the two files that the dispatch layer and every
 * backend's kernels both include. The API layer (xattn_api.c) builds it from the public
 * descriptor after every check has passed, so kernels never validate input and
 * never see the public descriptor. Kernels include this header and nothing
 * else of the dispatch layer.
 *
 * Addressing (all in elements of the tensor's dtype, from the buffer's start):
 *   Q[b, i, h, d]  = q.off + b*q.sb + (start_q[b] + i)*q.ss + h*q.sh + d*q.sd
 *   K/V likewise with start_k; O with start_q.
 *   LSE[b, h, i]   = lse.off + b*lse.sb + h*lse.sh + (start_q[b] + i)*lse.ss
 *   BIAS[b, h, i, j] = bias.off + b*bias.sb + h*bias.sh + i*bias.ss + j*bias.sd
 *     (sb = 0 when the bias has one batch, sh = 0 when it has one head; i and j
 *      are positions within the sequence, also for packed batches)
 *   SINK[h]        = sinks.off + h*sinks.sh (f32; sb = ss = sd = 0)
 * In packed (varlen) mode every sb is 0 and start_q/start_k hold cu_seqlens.
 * A q8_0 K/V (34-byte blocks of 32 values along d, d's stride 1, every other
 * stride and off a multiple of 32) is addressed in values all the same; the
 * bytes of value e are xattn_sem_q8_0_qs_byte(e) / _d_byte(e).
 *
 * Rows written for sequence b: rows_q(b) = varlen ? len_q[b] : Sq. Rows
 * i >= len_q[b] (padding, padded mode only) get O = 0 and LSE = -inf, with or
 * without sinks (a real row that sees no key gets LSE = its head's sink).
 */
#ifndef XATTN_PROBLEM_H
#define XATTN_PROBLEM_H

#include <stdint.h>

#include "xattn.h"
#include "xattn_semantics.h"

typedef struct xattn_view {
    struct xattn_buffer *buf; /* NULL = absent (lse, bias) */
    xattn_dtype dtype;
    int64_t off;            /* elements */
    int64_t sb, ss, sh, sd; /* elements; see addressing above */
} xattn_view;

typedef struct xattn_problem {
    int64_t B;       /* sequences */
    int64_t Hq, Hkv; /* query heads, KV heads; group = Hq / Hkv */
    int64_t group;
    int64_t D, Dv;  /* head dims of q/k and of v/o, 1..256 */
    int64_t Sq, Sk; /* padded: tensor extents; varlen: the longest sequence */

    xattn_view q, k, v, o;
    int has_lse;
    xattn_view lse; /* f32 */
    int has_bias;
    xattn_view bias; /* f32 or f16 */
    int has_sinks;
    xattn_view sinks; /* f32 [Hq]: folded into each row by xattn_sem_sink_fold */

    /* fp8 K/V: per-KV-head f32 scales (kv_scale.sh as for sinks); absent = 1. */
    int has_k_scale, has_v_scale;
    xattn_view k_scale, v_scale;

    const float *alibi;  /* host [Hq] or NULL */
    float scale;         /* resolved (never the 0 "default") */
    xattn_sem_mods mods; /* the call's score modifiers (softcap): xattn_semantics.h */
    int causal;
    int bottom_right;                  /* alignment: p = i + (len_k - len_q) when 1, p = i when 0 */
    int64_t window_left, window_right; /* < 0 = unbounded */

    int varlen;
    const int32_t *len_q;   /* host [B], always set */
    const int32_t *len_k;   /* host [B], always set */
    const int32_t *start_q; /* host [B], 0s in padded mode */
    const int32_t *start_k; /* host [B] */

    /* Paged KV cache (0 = contiguous): key j of sequence b is slot
     * j % page_size of page block_table[b * max_pages + j / page_size]; k.sb
     * and v.sb are then the strides between pages (0 when the pool holds one
     * page) and start_k is all 0. xattn_problem_kv_token gives the address. */
    int paged;
    int64_t page_size, max_pages, num_pages;
    const int32_t *block_table; /* host [B * max_pages] */

    /* Append (done by the driver before the phases, never by the kernels):
     * k_new/v_new [B, s_new, Hkv, D/Dv] go to keys len_k[b] - s_new ..
     * len_k[b] - 1; len_k already counts them. */
    int64_t s_new; /* 0 = no append */
    xattn_view k_new, v_new;

    xattn_algo algo; /* NAIVE, FLASH or SPLITKV: never AUTO here */
    int num_splits;  /* SPLITKV as asked: 0 = the backend chooses */
    int poison;      /* fill workspaces with NaN first (tests) */
} xattn_problem;

/* Rows of sequence b that the kernels write. */
static inline int64_t xattn_problem_rows_q(const xattn_problem *p, int64_t b)
{
    return p->varlen ? (int64_t)p->len_q[b] : p->Sq;
}

/* The mask rule of sequence b (docs/semantics.md, steps 3 and 6; the
 * functions of xattn_semantics.h take it). */
static inline xattn_sem_rule xattn_problem_rule(const xattn_problem *p, int64_t b)
{
    return xattn_sem_rule_make(p->len_q[b], p->len_k[b], p->bottom_right, p->causal, p->window_left,
                               p->window_right);
}

/* The aligned position of query row i of sequence b (docs/semantics.md, step 3). */
static inline int64_t xattn_problem_qpos(const xattn_problem *p, int64_t b, int64_t i)
{
    return p->bottom_right ? i + (int64_t)p->len_k[b] - (int64_t)p->len_q[b] : i;
}

/* The element offset of token j of sequence b, head 0, dim 0, in K or V
 * (view is &p->k or &p->v): add hk * sh + d * sd for a head and a dim. Paged
 * caches look the page up; a kernel that walks consecutive keys may step by
 * view->ss within one page (keys j .. j + n - 1 share a page when
 * j % page_size + n <= page_size). */
static inline int64_t xattn_problem_kv_token(const xattn_problem *p, const xattn_view *v, int64_t b,
                                             int64_t j)
{
    if (p->paged) {
        int64_t page = (int64_t)p->block_table[b * p->max_pages + j / p->page_size];
        return v->off + page * v->sb + (j % p->page_size) * v->ss;
    }
    return v->off + b * v->sb + ((int64_t)p->start_k[b] + j) * v->ss;
}

#endif /* XATTN_PROBLEM_H */
