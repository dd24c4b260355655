/*
 * xattn check: every available device x algorithm x feature on small shapes
 * against the double-precision reference (computed once per feature), with
 * the outputs poisoned (NaN) before the call, and a summary matrix. Exit 1 on
 * any mismatch or error; a configuration a backend declares unsupported is
 * reported, not failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"

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

enum { XTOOL__C_PASS, XTOOL__C_FAIL, XTOOL__C_UNSUP, XTOOL__C_ERROR };

typedef struct xtool__check_cell {
    int status;
    double rel_l2, max_abs, bound, lse_err;
    char msg[320];
} xtool__check_cell;

int xtool_cmd_check(const xtool_cli_opts *o)
{
    xtool_target targets[32];
    char perr[1200];
    if (o->json_path && xtool_out_probe("--json", o->json_path, NULL, perr, sizeof perr)) {
        fprintf(stderr, "%s: check: %s\n", xtool_prog, perr);
        return XTOOL_EXIT_USAGE;
    }
    int nt = xtool_targets_select(o, targets, 32, stdout);
    if (nt == 0) {
        if (xtool_targets_bad_device(o, perr, sizeof perr)) {
            fprintf(stderr, "%s: check: %s\n", xtool_prog, perr);
            return XTOOL_EXIT_USAGE;
        }
        fprintf(stderr, "%s: check: no available device among the backends asked for\n",
                xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    xattn_algo algos[XATTN_ALGO_COUNT];
    int na = 0;
    if (o->n_algos)
        for (int i = 0; i < o->n_algos; i++)
            algos[na++] = o->algos[i];
    else {
        algos[na++] = XATTN_ALGO_NAIVE;
        algos[na++] = XATTN_ALGO_FLASH;
        algos[na++] = XATTN_ALGO_SPLITKV;
        algos[na++] = XATTN_ALGO_AUTO;
    }
    int feat[XTOOL__NFEAT], nf = 0;
    for (int i = 0; i < XTOOL__NFEAT; i++) {
        if (o->quick && !xtool__features[i].quick)
            continue;
        if (o->filter && !strstr(xtool__features[i].name, o->filter))
            continue;
        feat[nf++] = i;
    }
    if (nf == 0) {
        fprintf(stderr, "%s: check: no feature matches --filter '%s'\n", xtool_prog,
                o->filter ? o->filter : "");
        return XTOOL_EXIT_USAGE;
    }
    xtool_case *cases = calloc((size_t)nf, sizeof *cases);
    xtool_case_ref *refs = calloc((size_t)nf, sizeof *refs);
    int *ref_done = calloc((size_t)nf, sizeof *ref_done);
    xtool__check_cell *cells = calloc((size_t)nf * (size_t)nt * (size_t)na, sizeof *cells);
    if (!cases || !refs || !ref_done || !cells) {
        free(cases);
        free(refs);
        free(ref_done);
        free(cells);
        fprintf(stderr, "%s: check: out of memory\n", xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    for (int i = 0; i < nf; i++) {
        xtool_case *c = &cases[i];
        xtool_case_defaults(c);
        c->batch = 2;
        c->heads = c->kv_heads = 4;
        c->sq = 37;
        c->sk = 53;
        c->seed = o->seed;
        xtool__features[feat[i]].apply(c);
    }
    printf("xattn check %s: %d feature%s x %d algorithm%s x %d device%s = %d cells, against the "
           "double-precision reference\n",
           xattn_version_string(), nf, nf == 1 ? "" : "s", na, na == 1 ? "" : "s", nt,
           nt == 1 ? "" : "s", nf * na * nt);
    fflush(stdout);
    xtool_progress prog;
    xtool_progress_init(&prog, o->progress, nf * na * nt);
    for (int ti = 0; ti < nt; ti++) {
        xattn_ctx *ctx = NULL;
        xattn_status st = xtool_ctx_open(o, targets[ti].backend, targets[ti].device, &ctx);
        char dname[32];
        xtool_target_name(targets[ti].backend, targets[ti].device, dname, sizeof dname);
        for (int fi = 0; fi < nf; fi++) {
            xtool_case_run run;
            xattn_status sst = st;
            memset(&run, 0, sizeof run);
            if (sst == XATTN_STATUS_OK)
                sst = xtool_case_setup(ctx, &cases[fi], &run);
            if (sst == XATTN_STATUS_OK && !ref_done[fi]) {
                ref_done[fi] = 1;
                if (xtool_case_ref_compute(&run, 1e18, &refs[fi]) != XATTN_STATUS_OK)
                    ref_done[fi] = -1;
            }
            for (int ai = 0; ai < na; ai++) {
                xtool__check_cell *cell = &cells[((size_t)fi * nt + ti) * na + ai];
                char label[128];
                snprintf(label, sizeof label, "%s %s %s", dname, xattn_algo_name(algos[ai]),
                         xtool__features[feat[fi]].name);
                xtool_progress_draw(&prog, label);
                if (sst != XATTN_STATUS_OK) {
                    cell->status =
                        sst == XATTN_STATUS_UNSUPPORTED ? XTOOL__C_UNSUP : XTOOL__C_ERROR;
                    snprintf(cell->msg, sizeof cell->msg, "%s",
                             st != XATTN_STATUS_OK ? "no context" : xattn_last_error());
                } else if (ref_done[fi] < 0) {
                    cell->status = XTOOL__C_ERROR;
                    snprintf(cell->msg, sizeof cell->msg, "the reference failed");
                } else {
                    run.desc.algo = algos[ai];
                    xattn_status cst = xtool_cell_poisoned_call(ctx, &run, NULL);
                    xtool_case_error e;
                    if (cst == XATTN_STATUS_OK)
                        cst = xtool_case_check(&run, &refs[fi], &e);
                    if (cst == XATTN_STATUS_UNSUPPORTED) {
                        cell->status = XTOOL__C_UNSUP;
                        snprintf(cell->msg, sizeof cell->msg, "%s", xattn_last_error());
                    } else if (cst != XATTN_STATUS_OK) {
                        cell->status = XTOOL__C_ERROR;
                        snprintf(cell->msg, sizeof cell->msg, "%s: %s", xattn_status_name(cst),
                                 xattn_last_error());
                    } else {
                        cell->rel_l2 = e.rel_l2;
                        cell->max_abs = e.max_abs;
                        cell->bound = e.bound;
                        cell->lse_err = e.lse_max_err;
                        cell->status = e.pass ? XTOOL__C_PASS : XTOOL__C_FAIL;
                        if (!e.pass)
                            snprintf(cell->msg, sizeof cell->msg,
                                     "rel L2 %.3e (bound %.3e), max abs %.3e, %d NaN mismatches, "
                                     "%d LSE mismatches (max LSE error %.2e)",
                                     e.rel_l2, e.bound, e.max_abs, e.nan_mismatch, e.lse_mismatch,
                                     e.lse_max_err);
                    }
                }
                prog.done++;
            }
            xtool_case_teardown(&run);
        }
        xattn_ctx_destroy(ctx);
    }
    xtool_progress_done(&prog);

    /* The matrix. */
    static const char *const marks[4] = {"ok", "FAIL", "unsup", "ERROR"};
    printf("\n%-18s", "feature");
    for (int ti = 0; ti < nt; ti++)
        for (int ai = 0; ai < na; ai++) {
            char h[48];
            char dname[32];
            xtool_target_name(targets[ti].backend, targets[ti].device, dname, sizeof dname);
            snprintf(h, sizeof h, "%s/%s", dname, xattn_algo_name(algos[ai]));
            printf(" %-15s", h);
        }
    printf("\n");
    int counts[4] = {0};
    for (int fi = 0; fi < nf; fi++) {
        printf("%-18s", xtool__features[feat[fi]].name);
        for (int ti = 0; ti < nt; ti++)
            for (int ai = 0; ai < na; ai++) {
                const xtool__check_cell *cell = &cells[((size_t)fi * nt + ti) * na + ai];
                counts[cell->status]++;
                if (o->verbose && cell->status == XTOOL__C_PASS) {
                    char v[24];
                    snprintf(v, sizeof v, "ok %.1e", cell->rel_l2);
                    printf(" %-15s", v);
                } else {
                    printf(" %-15s", marks[cell->status]);
                }
            }
        printf("\n");
    }
    printf("\ncases:\n");
    for (int fi = 0; fi < nf; fi++) {
        char key[320];
        xtool_case_describe(&cases[fi], key, sizeof key);
        printf("  %-18s %s", xtool__features[feat[fi]].name, key);
        if (cases[fi].seqlens_q)
            printf(" (lengths q {37,20,1}, k {53,7,30})");
        printf("\n");
    }
    int problems = 0;
    for (int fi = 0; fi < nf; fi++)
        for (int ti = 0; ti < nt; ti++)
            for (int ai = 0; ai < na; ai++) {
                const xtool__check_cell *cell = &cells[((size_t)fi * nt + ti) * na + ai];
                if (cell->status == XTOOL__C_PASS)
                    continue;
                if (!problems++)
                    printf("\ndetails:\n");
                char dname[32];
                xtool_target_name(targets[ti].backend, targets[ti].device, dname, sizeof dname);
                printf("  %-5s %s %s %s: %s\n", marks[cell->status], dname,
                       xattn_algo_name(algos[ai]), xtool__features[feat[fi]].name, cell->msg);
            }
    printf("\n%d cells: %d passed, %d failed, %d errors, %d unsupported\n", nf * nt * na,
           counts[XTOOL__C_PASS], counts[XTOOL__C_FAIL], counts[XTOOL__C_ERROR],
           counts[XTOOL__C_UNSUP]);

    int rc = counts[XTOOL__C_FAIL] || counts[XTOOL__C_ERROR] ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
    if (o->json_path) {
        FILE *f = fopen(o->json_path, "w");
        if (!f) {
            fprintf(stderr, "%s: check: cannot write '%s'\n", xtool_prog, o->json_path);
            rc = XTOOL_EXIT_FAIL;
        } else {
            fprintf(f, "{\n  \"schema\": \"xattn.check/1\",\n  \"xattn_version\": ");
            xattn__json_str(f, xattn_version_string());
            fprintf(f, ",\n  \"cells\": [");
            int k = 0;
            for (int fi = 0; fi < nf; fi++)
                for (int ti = 0; ti < nt; ti++)
                    for (int ai = 0; ai < na; ai++) {
                        const xtool__check_cell *cell = &cells[((size_t)fi * nt + ti) * na + ai];
                        char key[320];
                        xtool_case_describe(&cases[fi], key, sizeof key);
                        fprintf(f, "%s\n    {\"feature\": ", k++ ? "," : "");
                        xattn__json_str(f, xtool__features[feat[fi]].name);
                        fprintf(f, ", \"case\": ");
                        xattn__json_str(f, key);
                        fprintf(f,
                                ", \"backend\": \"%s\", \"device\": %d, \"algo\": \"%s\", "
                                "\"status\": \"%s\", \"rel_l2\": ",
                                xattn_backend_name(targets[ti].backend), targets[ti].device,
                                xattn_algo_name(algos[ai]),
                                cell->status == XTOOL__C_PASS    ? "pass"
                                : cell->status == XTOOL__C_FAIL  ? "fail"
                                : cell->status == XTOOL__C_UNSUP ? "unsupported"
                                                                 : "error");
                        if (cell->status == XTOOL__C_PASS || cell->status == XTOOL__C_FAIL)
                            xattn__json_num(f, cell->rel_l2);
                        else
                            fputs("null", f);
                        fprintf(f, ", \"message\": ");
                        xattn__json_str(f, cell->msg);
                        fputs("}", f);
                    }
            fprintf(f,
                    "\n  ],\n  \"summary\": {\"cells\": %d, \"passed\": %d, \"failed\": %d, "
                    "\"errors\": %d, \"unsupported\": %d}\n}\n",
                    nf * nt * na, counts[XTOOL__C_PASS], counts[XTOOL__C_FAIL],
                    counts[XTOOL__C_ERROR], counts[XTOOL__C_UNSUP]);
            if (fclose(f) != 0)
                rc = XTOOL_EXIT_FAIL;
        }
    }
    for (int i = 0; i < nf; i++)
        xtool_case_ref_free(&refs[i]);
    free(cases);
    free(refs);
    free(ref_done);
    free(cells);
    return rc;
}
