/*
 * A validated descriptor resolved into the kernel contract
 * (kernels_common/xattn_problem.h): views in elements, the per-sequence
 * lengths and starts in one array through the context's allocator, the scale,
 * the masks. Validation (xattn_validate.c) has already checked every rule and
 * every size, so nothing here can fail but the allocation.
 */
#include <math.h>
#include <string.h>

#include "xattn_internal.h"

static xattn_view xattn__view_of(const xattn_tensor *t, int varlen)
{
    xattn_view v;
    v.buf = t->buffer;
    v.dtype = t->dtype;
    /* (a q8_0 view's offset is whole 34-byte blocks of 32 values) */
    v.off = t->dtype == XATTN_DTYPE_Q8_0
                ? (int64_t)(t->offset / XATTN_Q8_0_BLOCK_BYTES) * XATTN_Q8_0_BLOCK
                : (int64_t)(t->offset / xattn_dtype_size(t->dtype));
    /* A stride is ignored where the extent is 1; 0 keeps kernels from using it. */
    v.sb = (varlen || t->shape[0] == 1) ? 0 : t->strides[0];
    v.ss = t->strides[1];
    v.sh = t->shape[2] == 1 ? 0 : t->strides[2];
    v.sd = t->strides[3];
    return v;
}

xattn_status xattn__problem_build(struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                  const xattn_desc_summary *sum, xattn_problem *p, int32_t **arrays)
{
    memset(p, 0, sizeof *p);
    p->B = sum->B;
    p->Hq = sum->Hq;
    p->Hkv = sum->Hkv;
    p->group = sum->Hq / sum->Hkv;
    p->D = sum->D;
    p->Dv = sum->Dv;
    p->Sq = sum->Sq;
    p->Sk = sum->Sk;
    p->varlen = sum->varlen;
    p->q = xattn__view_of(&d->q, sum->varlen);
    p->k = xattn__view_of(&d->k, sum->varlen);
    p->v = xattn__view_of(&d->v, sum->varlen);
    p->o = xattn__view_of(&d->o, sum->varlen);
    if (d->lse.buffer) {
        /* lse is [B, Hq, Sq, 1]: its dims 1 and 2 are (head, row). */
        p->has_lse = 1;
        p->lse.buf = d->lse.buffer;
        p->lse.dtype = XATTN_DTYPE_F32;
        p->lse.off = (int64_t)(d->lse.offset / 4);
        p->lse.sb = (sum->varlen || d->lse.shape[0] == 1) ? 0 : d->lse.strides[0];
        p->lse.sh = d->lse.shape[1] == 1 ? 0 : d->lse.strides[1];
        p->lse.ss = d->lse.strides[2];
        p->lse.sd = 0;
    }
    if (d->bias.buffer) {
        p->has_bias = 1;
        p->bias.buf = d->bias.buffer;
        p->bias.dtype = d->bias.dtype;
        p->bias.off = (int64_t)(d->bias.offset / xattn_dtype_size(d->bias.dtype));
        p->bias.sb = d->bias.shape[0] == 1 ? 0 : d->bias.strides[0];
        p->bias.sh = d->bias.shape[1] == 1 ? 0 : d->bias.strides[1];
        p->bias.ss = d->bias.strides[2];
        p->bias.sd = d->bias.strides[3];
    }
    if (d->sinks.buffer) {
        /* sinks is [1, 1, Hq, 1]: only its head stride is used. */
        p->has_sinks = 1;
        p->sinks.buf = d->sinks.buffer;
        p->sinks.dtype = XATTN_DTYPE_F32;
        p->sinks.off = (int64_t)(d->sinks.offset / 4);
        p->sinks.sh = d->sinks.shape[2] == 1 ? 0 : d->sinks.strides[2];
    }
    if (sum->paged) {
        p->paged = 1;
        p->page_size = d->k.shape[1];
        p->max_pages = d->max_pages_per_seq;
        p->num_pages = d->k.shape[0];
        p->block_table = d->block_table;
    }
    if (sum->s_new) {
        p->s_new = sum->s_new;
        p->k_new = xattn__view_of(&d->k_new, 0);
        p->v_new = xattn__view_of(&d->v_new, 0);
    }
    xattn_view *sv[2] = {&p->k_scale, &p->v_scale};
    const xattn_tensor *sct[2] = {&d->k_scale, &d->v_scale};
    for (int i = 0; i < 2; i++) {
        if (!sct[i]->buffer)
            continue;
        sv[i]->buf = sct[i]->buffer; /* [1, 1, Hkv, 1]: only its head stride is used */
        sv[i]->dtype = XATTN_DTYPE_F32;
        sv[i]->off = (int64_t)(sct[i]->offset / 4);
        sv[i]->sh = sct[i]->shape[2] == 1 ? 0 : sct[i]->strides[2];
    }
    p->has_k_scale = d->k_scale.buffer != NULL;
    p->has_v_scale = d->v_scale.buffer != NULL;
    p->alibi = d->alibi_slopes;
    p->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)sum->D));
    p->mods.softcap = d->softcap;
    p->causal = d->causal;
    p->bottom_right = d->align == XATTN_ALIGN_BOTTOM_RIGHT;
    p->window_left = d->window_left;
    p->window_right = d->window_right;
    p->num_splits = d->num_splits;
    p->poison = (int)ctx->opt_poison;

    /* Per-sequence arrays: len_q, len_k, start_q, start_k. */
    int64_t B = sum->B;
    xattn_status st;
    uint64_t bytes = (uint64_t)(B > 0 ? B : 1) * 4u * sizeof(int32_t);
    int32_t *a = xattn__host_alloc(ctx, bytes, "per-sequence lengths", &st);
    if (!a)
        return st;
    int32_t *lq = a, *lk = a + B, *sq = a + 2 * B, *sk = a + 3 * B;
    for (int64_t b = 0; b < B; b++) {
        if (sum->varlen) {
            sq[b] = d->cu_seqlens_q[b];
            sk[b] = d->cu_seqlens_k[b];
            lq[b] = d->cu_seqlens_q[b + 1] - d->cu_seqlens_q[b];
            lk[b] = d->cu_seqlens_k[b + 1] - d->cu_seqlens_k[b];
        } else {
            sq[b] = 0;
            sk[b] = 0;
            lq[b] = d->seqlens_q ? d->seqlens_q[b] : (int32_t)sum->Sq;
            /* An append's tokens join the cache (validated to fit). */
            lk[b] = d->seqlens_k ? d->seqlens_k[b] + (int32_t)sum->s_new : (int32_t)sum->Sk;
        }
    }
    p->len_q = lq;
    p->len_k = lk;
    p->start_q = sq;
    p->start_k = sk;
    *arrays = a;
    return XATTN_STATUS_OK;
}

void xattn__problem_free(struct xattn_ctx *ctx, const xattn_desc_summary *sum, int32_t *arrays)
{
    uint64_t bytes = (uint64_t)(sum->B > 0 ? sum->B : 1) * 4u * sizeof(int32_t);
    xattn__host_free(ctx, arrays, bytes);
}
