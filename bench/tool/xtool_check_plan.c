/*
 * xattn check, the plan: the features (each a change to the small base case),
 * and the matrix of devices x algorithms x features to run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_check.h"

typedef struct xtool__feature {
    const char *name;
    int quick; /* in --quick */
    void (*apply)(xtool_case *c);
} xtool__feature;

static const int32_t xtool__pad_q[3] = {37, 20, 1}, xtool__pad_k[3] = {53, 7, 30};

static void f_basic(xtool_case *c)
{
    (void)c;
}
static void f_causal_br(xtool_case *c)
{
    c->causal = 1;
}
static void f_causal_tl(xtool_case *c)
{
    c->causal = 1;
    c->align = XATTN_ALIGN_TOP_LEFT;
}
static void f_causal_long_q(xtool_case *c) /* Sq > Sk bottom-right: fully masked rows */
{
    c->sq = 53;
    c->sk = 37;
    c->causal = 1;
    c->lse = 1;
}
static void f_window(xtool_case *c)
{
    c->window_left = 8;
    c->window_right = 4;
}
static void f_window_causal(xtool_case *c)
{
    c->causal = 1;
    c->window_left = 16;
    c->window_right = 0;
}
static void f_window_tl(xtool_case *c)
{
    c->align = XATTN_ALIGN_TOP_LEFT;
    c->window_left = 5;
    c->window_right = 11;
}
static void f_bias(xtool_case *c)
{
    c->bias = 1;
}
static void f_alibi(xtool_case *c)
{
    c->alibi = 1;
    c->causal = 1;
}
static void f_alibi_nc(xtool_case *c)
{
    c->alibi = 1;
}
static void f_softcap(xtool_case *c)
{
    c->softcap = 5.0f;
}
static void f_scale(xtool_case *c)
{
    c->scale = 0.5f;
}
static void f_gqa(xtool_case *c)
{
    c->heads = 8;
    c->kv_heads = 2;
}
static void f_mqa(xtool_case *c)
{
    c->kv_heads = 1;
}
static void f_padded(xtool_case *c)
{
    c->batch = 3;
    c->seqlens_q = xtool__pad_q;
    c->seqlens_k = xtool__pad_k;
    c->lse = 1;
}
static void f_padded_causal(xtool_case *c)
{
    f_padded(c);
    c->causal = 1;
}
static void f_varlen(xtool_case *c)
{
    f_padded(c);
    c->varlen = 1;
}
static void f_varlen_causal(xtool_case *c)
{
    f_varlen(c);
    c->causal = 1;
    c->heads = 8;
    c->kv_heads = 2;
}
static void f_f16(xtool_case *c)
{
    c->dtype = c->kv_dtype = XATTN_DTYPE_F16;
}
static void f_bf16(xtool_case *c)
{
    c->dtype = c->kv_dtype = XATTN_DTYPE_BF16;
}
static void f_bf16_causal(xtool_case *c)
{
    f_bf16(c);
    c->causal = 1;
    c->heads = 8;
    c->kv_heads = 2;
}
static void f_mixed(xtool_case *c)
{
    c->kv_dtype = XATTN_DTYPE_F16;
}
static void f_mixed_bf16(xtool_case *c)
{
    c->dtype = XATTN_DTYPE_F16;
    c->kv_dtype = XATTN_DTYPE_BF16;
}
static void f_dv(xtool_case *c)
{
    c->head_dim_v = 32;
}
static void f_odd_dim(xtool_case *c)
{
    c->head_dim = c->head_dim_v = 17;
}
static void f_d128(xtool_case *c)
{
    c->head_dim = c->head_dim_v = 128;
}
static void f_d256(xtool_case *c)
{
    c->head_dim = c->head_dim_v = 256;
    c->causal = 1;
}
static void f_bhsd(xtool_case *c)
{
    c->bhsd = 1;
    c->causal = 1;
    c->lse = 1;
}
static void f_lse(xtool_case *c)
{
    c->lse = 1;
}
static void f_decode(xtool_case *c)
{
    c->sq = 1;
    c->sk = 300;
    c->causal = 1;
    c->lse = 1;
}
static void f_long_kv(xtool_case *c)
{
    c->sq = 4;
    c->sk = 1000;
    c->causal = 1;
    c->heads = 8;
    c->kv_heads = 2;
}
static void f_splits(xtool_case *c)
{
    c->sq = 16;
    c->sk = 200;
    c->num_splits = 3;
    c->lse = 1;
}
static void f_sk0(xtool_case *c)
{
    c->sk = 0;
    c->lse = 1;
}
static void f_everything(xtool_case *c)
{
    f_varlen(c);
    c->causal = 1;
    c->window_left = 12;
    c->window_right = 0;
    c->softcap = 8.0f;
    c->alibi = 1;
    c->bias = 1;
    c->heads = 6;
    c->kv_heads = 2;
    c->dtype = XATTN_DTYPE_BF16;
    c->kv_dtype = XATTN_DTYPE_F16;
    c->head_dim_v = 40;
}

static const xtool__feature xtool__features[] = {
    {"basic", 1, f_basic},
    {"causal-br", 1, f_causal_br},
    {"causal-tl", 1, f_causal_tl},
    {"causal-sq>sk", 0, f_causal_long_q},
    {"window", 0, f_window},
    {"window-causal", 1, f_window_causal},
    {"window-tl", 0, f_window_tl},
    {"bias", 1, f_bias},
    {"alibi-causal", 0, f_alibi},
    {"alibi", 0, f_alibi_nc},
    {"softcap", 1, f_softcap},
    {"scale", 0, f_scale},
    {"gqa", 1, f_gqa},
    {"mqa", 0, f_mqa},
    {"padded", 1, f_padded},
    {"padded-causal", 0, f_padded_causal},
    {"varlen", 1, f_varlen},
    {"varlen-causal-gqa", 0, f_varlen_causal},
    {"f16", 1, f_f16},
    {"bf16", 1, f_bf16},
    {"bf16-causal-gqa", 0, f_bf16_causal},
    {"f32q-f16kv", 0, f_mixed},
    {"f16q-bf16kv", 0, f_mixed_bf16},
    {"dv!=d", 1, f_dv},
    {"d17", 0, f_odd_dim},
    {"d128", 0, f_d128},
    {"d256-causal", 0, f_d256},
    {"bhsd", 0, f_bhsd},
    {"lse", 1, f_lse},
    {"decode", 1, f_decode},
    {"long-kv", 0, f_long_kv},
    {"splits3", 0, f_splits},
    {"sk0", 0, f_sk0},
    {"everything", 0, f_everything},
};
#define XTOOL__NFEAT (int)(sizeof xtool__features / sizeof xtool__features[0])

/* The base case of every feature: B2 H4 Sq37 Sk53 D64 f32 (odd sizes on purpose). */
static void xtool__base_case(xtool_case *c, uint64_t seed)
{
    xtool_case_defaults(c);
    c->batch = 2;
    c->heads = c->kv_heads = 4;
    c->sq = 37;
    c->sk = 53;
    c->seed = seed;
}

int xtool_check_plan_make(const xtool_cli_opts *o, xtool_check_plan *p)
{
    char err[1200];
    memset(p, 0, sizeof *p);
    p->o = o;
    p->nt = xtool_targets_select(o, p->targets, XTOOL_CHECK_MAX_TARGETS, stdout);
    if (p->nt == 0) {
        if (xtool_targets_bad_device(o, err, sizeof err)) {
            fprintf(stderr, "%s: check: %s\n", xtool_prog, err);
            return XTOOL_EXIT_USAGE;
        }
        fprintf(stderr, "%s: check: no available device among the backends asked for\n",
                xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    static const xattn_algo every[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV,
                                       XATTN_ALGO_AUTO};
    p->na = o->n_algos ? o->n_algos : 4;
    for (int i = 0; i < p->na; i++)
        p->algos[i] = o->n_algos ? o->algos[i] : every[i];
    p->names = calloc(XTOOL__NFEAT, sizeof *p->names);
    p->cases = calloc(XTOOL__NFEAT, sizeof *p->cases);
    if (!p->names || !p->cases) {
        fprintf(stderr, "%s: check: out of memory\n", xtool_prog);
        xtool_check_plan_free(p);
        return XTOOL_EXIT_FAIL;
    }
    for (int i = 0; i < XTOOL__NFEAT; i++) {
        if ((o->quick && !xtool__features[i].quick) ||
            (o->filter && !strstr(xtool__features[i].name, o->filter)))
            continue;
        p->names[p->nf] = xtool__features[i].name;
        xtool__base_case(&p->cases[p->nf], o->seed);
        xtool__features[i].apply(&p->cases[p->nf]);
        p->nf++;
    }
    if (p->nf == 0) {
        fprintf(stderr, "%s: check: no feature matches --filter '%s'\n", xtool_prog,
                o->filter ? o->filter : "");
        xtool_check_plan_free(p);
        return XTOOL_EXIT_USAGE;
    }
    p->cells = calloc((size_t)p->nf * (size_t)p->nt * (size_t)p->na, sizeof *p->cells);
    if (!p->cells) {
        fprintf(stderr, "%s: check: out of memory\n", xtool_prog);
        xtool_check_plan_free(p);
        return XTOOL_EXIT_FAIL;
    }
    return 0;
}

void xtool_check_plan_free(xtool_check_plan *p)
{
    free(p->names);
    free(p->cases);
    free(p->cells);
    p->names = NULL;
    p->cases = NULL;
    p->cells = NULL;
}

xtool_check_cell *xtool_check_cell_at(const xtool_check_plan *p, int fi, int ti, int ai)
{
    return &p->cells[((size_t)fi * (size_t)p->nt + (size_t)ti) * (size_t)p->na + (size_t)ai];
}
