/* One attention case of the xattn tool: its shape and options, the buffers it
 * needs on a context, random inputs from a seed, and its error against the
 * double-precision reference. Shared by `run` and `bench`. */
#ifndef XATTN_CASE_H
#define XATTN_CASE_H

#include <stdint.h>

#include "xattn.h"

typedef struct xattn_case {
    xattn_dtype dtype, kv_dtype;
    int64_t batch, heads, kv_heads, sq, sk, head_dim, head_dim_v;
    int bhsd;          /* layout: 0 = BSHD, 1 = BHSD */
    int causal;
    xattn_align align;
    int64_t window_left, window_right;
    float softcap, scale;
    int alibi, bias, lse;
    int32_t *seqlens_k; /* optional [batch] (owned by the caller) */
    xattn_algo algo;
    int num_splits;
    uint64_t seed;
} xattn_case;

/* Defaults: a small f32 non-causal case. */
void xattn_case_defaults(xattn_case *c);
/* "B1 H8/8 Sq128 Sk128 D64 f32 causal-br" */
void xattn_case_describe(const xattn_case *c, char *out, size_t n);

typedef struct xattn_case_run {
    xattn_ctx *ctx;
    xattn_attn_desc desc;
    xattn_buffer *q, *k, *v, *o, *lse, *bias;
    float *alibi;
} xattn_case_run;

/* Allocates the case's buffers on ctx and fills them with random data. */
xattn_status xattn_case_setup(xattn_ctx *ctx, const xattn_case *c, xattn_case_run *r);
void xattn_case_teardown(xattn_case_run *r);

typedef struct xattn_case_error {
    double rel_l2, max_abs;           /* the kernel's error against the reference */
    double rel_l2_rounded;            /* the reference rounded to the output dtype */
    int nan_mismatch;                 /* NaN in one and not the other */
    int pass;
} xattn_case_error;

/* The reference output of the case (dense [B, Sq, Hq, Dv] doubles, malloc'd;
 * the caller frees it). Slow on purpose: the plain double-precision loop. */
xattn_status xattn_case_reference(xattn_case_run *r, double **ref);
/* Reads O back and compares it with `ref` from xattn_case_reference of the
 * same case (same seed, so any backend's run of it). */
xattn_status xattn_case_compare(xattn_case_run *r, const double *ref, xattn_case_error *e);

/* Dense (2*Hq*Sq*Sk*(D+Dv)*B) and useful FLOPs (unmasked pairs only). */
double xattn_case_dense_flops(const xattn_case *c);
double xattn_case_useful_flops(const xattn_case *c);

#endif
