/* From the parsed command line to cases: the single case of run and advise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"

static int64_t xtool__first(const xtool_cli_ilist *l, int64_t dflt)
{
    return l->n ? l->v[0] : dflt;
}

int xtool_case_from_opts(const xtool_cli_opts *o, xtool_case *c, int32_t **lq, int32_t **lk,
                         char *err, size_t errlen)
{
    xtool_case_defaults(c);
    *lq = *lk = NULL;
    c->dtype = o->n_dtypes ? o->dtypes[0] : XATTN_DTYPE_F32;
    c->kv_dtype = o->kv_dtype >= 0 ? (xattn_dtype)o->kv_dtype : c->dtype;
    c->batch = xtool__first(&o->batch, 1);
    c->heads = xtool__first(&o->heads, 8);
    c->kv_heads = xtool__first(&o->kv_heads, c->heads);
    c->sq = xtool__first(&o->sq, 256);
    c->sk = xtool__first(&o->sk, c->sq);
    c->head_dim = xtool__first(&o->head_dim, 64);
    c->head_dim_v = xtool__first(&o->head_dim_v, c->head_dim);
    c->bhsd = o->bhsd;
    c->causal = o->causal;
    c->align = o->align;
    c->window_left = o->window_left;
    c->window_right = o->window_right;
    c->softcap = o->softcap;
    c->scale = o->scale;
    c->alibi = o->alibi;
    c->bias = o->bias;
    c->lse = o->lse;
    c->sinks = o->sinks;
    c->page_size = o->page_size;
    c->append = o->append;
    c->num_splits = o->num_splits;
    c->seed = o->seed;
    c->algo = o->n_algos ? o->algos[0] : XATTN_ALGO_AUTO;
    if (!o->lengths_path) {
        if (c->append > c->sk) {
            snprintf(err, errlen, "--append %lld: more than the %lld keys of --sk",
                     (long long)c->append, (long long)c->sk);
            return XTOOL_EXIT_USAGE;
        }
        return 0;
    }
    if (o->varlen && (c->page_size || c->append)) {
        snprintf(err, errlen,
                 "--%s with --varlen: the library takes a paged cache or an append with padded "
                 "batches only (drop --varlen)",
                 c->page_size ? "page-size" : "append");
        return XTOOL_EXIT_USAGE;
    }

    int n = 0;
    int64_t sq_fixed = (o->given & XTOOL_GIVEN_SQ) ? c->sq : 0;
    int rc = xtool_lengths_load(o->lengths_path, sq_fixed, lq, lk, &n, err, errlen);
    if (rc)
        return rc;
    if ((o->given & XTOOL_GIVEN_BATCH) && c->batch != n) {
        snprintf(err, errlen, "--batch %lld but --lengths %s has %d sequences", (long long)c->batch,
                 o->lengths_path, n);
        goto usage;
    }
    c->batch = n;
    int32_t mq = 0, mk = 0;
    for (int i = 0; i < n; i++) {
        mq = (*lq)[i] > mq ? (*lq)[i] : mq;
        mk = (*lk)[i] > mk ? (*lk)[i] : mk;
    }
    if (!(o->given & XTOOL_GIVEN_SQ))
        c->sq = mq;
    if (!(o->given & XTOOL_GIVEN_SK))
        c->sk = mk;
    else if (c->sk < mk) {
        snprintf(err, errlen, "--sk %lld is shorter than the longest key length %d in --lengths %s",
                 (long long)c->sk, mk, o->lengths_path);
        goto usage;
    }
    for (int i = 0; i < n; i++)
        if (c->append > (*lk)[i]) {
            snprintf(err, errlen,
                     "--append %lld: more than the %d keys of sequence %d in --lengths %s",
                     (long long)c->append, (*lk)[i], i, o->lengths_path);
            goto usage;
        }
    c->seqlens_q = *lq;
    c->seqlens_k = *lk;
    c->varlen = o->varlen;
    return 0;
usage:
    free(*lq);
    free(*lk);
    *lq = *lk = NULL;
    return XTOOL_EXIT_USAGE;
}

/* Statuses of xattn_attention_check that mean the command line asked for an
 * impossible problem (exit 2) rather than a failure of the run (exit 1). */
int xtool_status_is_usage(xattn_status st)
{
    switch (st) {
    case XATTN_STATUS_INVALID_ARGUMENT:
    case XATTN_STATUS_INVALID_DTYPE:
    case XATTN_STATUS_INVALID_SHAPE:
    case XATTN_STATUS_INVALID_STRIDE:
    case XATTN_STATUS_OUT_OF_BOUNDS:
    case XATTN_STATUS_INVALID_LENGTHS:
    case XATTN_STATUS_SIZE_OVERFLOW: return 1;
    default: return 0;
    }
}
