/* One attention case of the xattn tool: its shape and options, the buffers it
 * needs on a context, random inputs from a seed, and its error against the
 * double-precision reference (whole, or a sub-batch when the whole would be
 * too slow). Shared by run, bench, check and advise. */
#ifndef XTOOL_CASE_H
#define XTOOL_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "xattn.h"

typedef struct xtool_case {
    xattn_dtype dtype, kv_dtype;
    int64_t batch, heads, kv_heads, sq, sk, head_dim, head_dim_v;
    int bhsd; /* layout: 0 = BSHD, 1 = BHSD */
    int causal;
    xattn_align align;
    int64_t window_left, window_right;
    float softcap, scale;
    int alibi, bias, lse;
    int sinks;         /* a random sink logit per query head (xattn_attn_desc.sinks) */
    int64_t page_size; /* > 0: K/V in a shuffled pool of pages with a block table */
    int64_t append;    /* > 0: the last `append` keys of each sequence are k_new/v_new */
    /* Per-sequence lengths, [batch] each, owned by the caller; NULL = full
     * length. With varlen = 1 the batch is packed (cu_seqlens) from them
     * instead of padded: both must then be set. */
    const int32_t *seqlens_q;
    const int32_t *seqlens_k;
    int varlen;
    xattn_algo algo;
    int num_splits;
    uint64_t seed;
} xtool_case;

/* Defaults: a small f32 non-causal case (B1 H8/8 Sq256 Sk256 D64). */
void xtool_case_defaults(xtool_case *c);
/* "B1 H8/8 Sq128 Sk128 D64 f32 causal-br": the case key of bench results
 * (every option that changes the problem, never the algorithm). */
void xtool_case_describe(const xtool_case *c, char *out, size_t n);
/* What the lengths part of the key means, for a case with per-sequence
 * lengths ("padded69/69#b92d: 4 sequences padded to the longest, 69 query and
 * 69 key tokens in all ...; #b92d is a fingerprint of the lengths ...").
 * Returns 1, or 0 (out untouched) for a case without them. */
int xtool_case_lengths_legend(const xtool_case *c, char *out, size_t n);
/* The same with the lengths (Sq, Sk) left out: the family that a chart draws
 * as one set of lines against the sequence length. */
void xtool_case_family(const xtool_case *c, char *out, size_t n);

typedef struct xtool_case_run {
    xattn_ctx *ctx;
    xattn_attn_desc desc;
    xattn_buffer *q, *k, *v, *o, *lse, *bias;
    xattn_buffer *sinks, *k_new, *v_new;
    float *alibi;
    int32_t *cu_q, *cu_k; /* packed batches */
    int32_t *block_table; /* paged: [batch, max_pages_per_seq] */
    int32_t *cache_lens;  /* paged or append: seqlens_k of the call (before the append) */
} xtool_case_run;

/* Allocates the case's buffers on ctx and fills them with random data from
 * c->seed (the same data on every backend). */
xattn_status xtool_case_setup(xattn_ctx *ctx, const xtool_case *c, xtool_case_run *r);
void xtool_case_teardown(xtool_case_run *r);

/* How much of the case the reference checks. */
typedef enum xtool_ref_mode {
    XTOOL_REF_SKIPPED = -1, /* too costly even for a sub-batch (see note) */
    XTOOL_REF_FULL = 0,     /* every output element */
    XTOOL_REF_SUB = 1       /* sequence 0 and the query heads of KV head 0 */
} xtool_ref_mode;

typedef struct xtool_case_ref {
    xtool_ref_mode mode;
    double cost_flops; /* what the chosen reference costs (2*pairs*(D+Dv)*heads) */
    char note[160];    /* why a sub-batch or nothing was checked */
    double *o, *lse;   /* dense reference outputs of the checked part (malloc'd) */
} xtool_case_ref;

/* Computes the reference of the case held in r: whole when it costs at most
 * `limit` FLOPs, else a sub-batch when that does, else nothing (mode
 * SKIPPED; not an error). The LSE reference is computed when the case has an LSE. */
xattn_status xtool_case_ref_compute(xtool_case_run *r, double limit, xtool_case_ref *ref);
void xtool_case_ref_free(xtool_case_ref *ref);

typedef struct xtool_case_error {
    double rel_l2, max_abs; /* the kernel's O against the reference */
    double rel_l2_rounded;  /* the reference rounded to the output dtype */
    double bound;           /* the pass bound on rel_l2 */
    int nan_mismatch;       /* NaN in one and not the other */
    double lse_max_err;     /* LSE: max |out - ref| / (1 + |ref|), 0 without LSE */
    int lse_mismatch;       /* LSE: -inf or NaN in one and not the other, or beyond 1e-4 */
    int checked;            /* 0 when the reference was skipped */
    int pass;
} xtool_case_error;

/* Reads O (and LSE) back from r and compares the part that ref checked. The
 * reference may come from another backend's run of the same case. */
xattn_status xtool_case_check(xtool_case_run *r, const xtool_case_ref *ref, xtool_case_error *e);

/* What running a case needs, in bytes (doubles: a case may ask for more
 * than 2^64), so that a command can refuse or skip it before allocating:
 * under Linux's overcommit an allocation that does not fit may succeed and
 * the process be killed later, when its pages are touched. */
typedef struct xtool_case_mem {
    double tensors;   /* q, k, v, o (and lse, bias) on the device, for the whole run */
    double staging;   /* host: the largest copy made while filling them (freed after) */
    double workspace; /* device, during each call: NAIVE's B*Hq*Sq*Sk*4-byte score matrix;
                       * SPLITKV's partials (an estimate); FLASH: small, not counted */
    double reference; /* host, after the calls: the double-precision reference of what
                       * --check covers (whole case or sub-batch; 0 when skipped or off) */
} xtool_case_mem;

/* Estimates what xtool_case_setup, the calls of algo (AUTO: what AUTO picks)
 * and, when check is on, xtool_case_ref_compute with check_limit and
 * xtool_case_check need. threads: the device's compute units (SPLITKV's
 * split count). The peak is tensors + the largest of the other three: they
 * are not held at the same time. */
void xtool_case_mem_estimate(const xtool_case *c, xattn_algo algo, int check, double check_limit,
                             int threads, xtool_case_mem *m);
/* tensors + max(staging, workspace, reference). */
double xtool_case_mem_peak(const xtool_case_mem *m);

/* Dense (2*B*Hq*Sq*Sk*(D+Dv)) FLOPs of the case's rectangle. */
double xtool_case_dense_flops(const xtool_case *c);

#endif
