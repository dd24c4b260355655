/*
 * xattn reference attention: a plain double-precision implementation of the
 * semantics documented in xattn.h (xattn_attn_desc), written for clarity, not
 * speed. It shares no code with the kernels (its own f16/bf16 decoding, its own
 * masking) and reads its inputs through xattn_buffer_read, so it checks any
 * backend. Tests and `xattn check` compare every kernel with it.
 */
#ifndef XATTN_REFERENCE_H
#define XATTN_REFERENCE_H

#include "xattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Computes attention for descriptor d in double precision.
 *
 * d is first validated with xattn_attention_check(ctx, d); a bad descriptor
 * returns that status and message. The inputs (q, k, v, bias) are read from
 * d's buffers with xattn_buffer_read, so this works on any backend; the output
 * tensors o and lse of d are not touched.
 *
 * Output layout, with B' = d->q.shape[0] and S' = d->q.shape[1] (packed varlen
 * batches: B' = 1 and S' = the total token count of q):
 *   o_ref   dense [B', S', Hq, Dv] doubles, logical order (row-major);
 *   lse_ref dense [B', Hq, S'] doubles (natural log), or NULL when not wanted.
 * Every element is set:
 *   - padding rows (padded mode, i >= seqlens_q[b]): O = 0, LSE = -inf;
 *   - fully masked rows (every score -inf): O = 0, LSE = -inf;
 *   - rows with a NaN score that is not masked: O row and LSE are NaN;
 *   - rows the kernels never write (packed mode: tokens at or beyond
 *     cu_seqlens_q[num_seqs]): O = 0, LSE = -inf, and
 *     xattn_reference_rows_written() reports them as 0.
 * Keys whose score is -inf (masked, beyond the sequence's length, or given a
 * -inf bias) contribute nothing: their K and V values are never used, so
 * NaN or garbage stored there does not reach the output.
 *
 * Host scratch memory of the reference is plain malloc, not accounted to ctx
 * (the reference is not a device computation). Returns XATTN_STATUS_OK,
 * INVALID_ARGUMENT for a NULL o_ref, OUT_OF_MEMORY when the scratch cannot be
 * allocated, or any status of xattn_attention_check / xattn_buffer_read.
 */
XATTN_API xattn_status xattn_reference_attention(xattn_ctx *ctx, const xattn_attn_desc *d,
                                                 double *o_ref, double *lse_ref);

/**
 * Fills written[b * S' + s] (B' x S' bytes, same B' and S' as above) with 1
 * for every logical row (b, s) of o (and of lse) that xattn_attention writes,
 * and 0 for the rows it leaves untouched (packed mode: tokens at or beyond
 * cu_seqlens_q[num_seqs]; in padded mode every row is written, padding rows as
 * zeros). Validates d like xattn_reference_attention.
 */
XATTN_API xattn_status xattn_reference_rows_written(const xattn_ctx *ctx, const xattn_attn_desc *d,
                                                    unsigned char *written);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_REFERENCE_H */
