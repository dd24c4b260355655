/*
 * xattn advise: for one shape (and optionally a file of sequence lengths), on
 * every device: naive vs flash vs split-KV measured (time, workspace, peak
 * memory), the roofline position, the padding waste of the padded batch vs a
 * packed one (computed from the lengths, and both measured with FLASH), and a
 * recommendation in plain words. docs/tool.md defines every figure. The plan
 * and the run are here; the report is xtool_advise_report.c, the
 * recommendation xtool_advise_text.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_advise.h"

static const xattn_algo xtool__algos[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};

/* ---- plan: the case, its padding, the output, the devices ------------------------- */

static void xtool__plan_free(xtool_advise_plan *p)
{
    free(p->devs);
    free(p->lq);
    free(p->lk);
}

static int xtool__plan(const xtool_cli_opts *o, xtool_advise_plan *p)
{
    char err[512] = "";
    memset(p, 0, sizeof *p);
    p->o = o;
    int rc = xtool_case_from_opts(o, &p->c, &p->lq, &p->lk, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        return rc;
    }
    p->c.varlen = 0;
    p->has_lengths = p->lq != NULL;
    if (p->has_lengths)
        xtool_padding_waste(p->lq, p->lk, (int)p->c.batch, p->c.sq, p->c.sk, &p->w);
    if (o->json_path && xtool_out_probe("--json", o->json_path, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        return XTOOL_EXIT_USAGE;
    }
    p->nt = xtool_targets_select(o, p->targets, XTOOL_ADVISE_MAX_TARGETS, stdout);
    if (p->nt == 0) {
        int usage = xtool_targets_bad_device(o, err, sizeof err);
        if (usage)
            fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        else
            fprintf(stderr, "%s: advise: no available device among the backends asked for\n",
                    xtool_prog);
        return usage ? XTOOL_EXIT_USAGE : XTOOL_EXIT_FAIL;
    }
    p->devs = calloc((size_t)p->nt, sizeof *p->devs);
    if (!p->devs)
        return XTOOL_EXIT_FAIL;
    xtool_case_describe(&p->c, p->key, sizeof p->key);
    return 0;
}

/* ---- run: each device's algorithms, its packed run, its roofline ------------------- */

/* A context with profiling on (the ceilings measured first with
 * --measure-ceilings) and the case set up on it; 2 for an impossible case. */
static int xtool__device_open(const xtool_advise_plan *p, xtool_advise_dev *d, const char *dname,
                              xattn_ctx **ctx, xtool_case_run *run)
{
    xattn_status st = xtool_ctx_open(p->o, d->t.backend, d->t.device, ctx);
    if (st == XATTN_STATUS_OK)
        st = xattn_profiler_enable(*ctx, 1);
    if (st == XATTN_STATUS_OK && p->o->measure_ceilings) {
        xattn_ceilings cl;
        if (xattn_ceilings_get(*ctx, &cl) != XATTN_STATUS_OK) {
            printf("%-9s measuring the ceilings (seconds)...\n", dname);
            fflush(stdout);
            xattn_ceilings_measure(*ctx, 0, &cl);
        }
    }
    if (st == XATTN_STATUS_OK)
        st = xtool_case_setup(*ctx, &p->c, run);
    if (st == XATTN_STATUS_OK) {
        st = xattn_attention_check(*ctx, &run->desc);
        if (st != XATTN_STATUS_OK && xtool_status_is_usage(st)) {
            fprintf(stderr, "%s: advise: impossible case: %s\n", xtool_prog, xattn_last_error());
            return XTOOL_EXIT_USAGE;
        }
    }
    if (st != XATTN_STATUS_OK) {
        snprintf(d->error, sizeof d->error, "%s", xattn_last_error());
        return XTOOL_EXIT_FAIL;
    }
    return 0;
}

/* naive, flash and splitkv on the set-up case (naive not where its score
 * matrix would take over a quarter of the device's memory). Returns the
 * number of failures (an unsupported algorithm is not one). */
static int xtool__device_algos(const xtool_advise_plan *p, xtool_advise_dev *d, xattn_ctx *ctx,
                               xtool_case_run *run, const xtool_cell_opts *co)
{
    const xtool_case *c = &p->c;
    double scores = 4.0 * (double)c->batch * (double)c->heads * (double)c->sq * (double)c->sk;
    double mem =
        d->t.info.global_mem_bytes ? (double)d->t.info.global_mem_bytes : 16.0 * 1073741824.0;
    int failures = 0;
    for (int ai = 0; ai < 3; ai++) {
        xtool_advise_algo *a = &d->a[ai];
        if (a->algo == XATTN_ALGO_NAIVE && scores > mem / 4) {
            char s1[32];
            xtool_fmt_bytes(scores, s1, sizeof s1);
            snprintf(a->error, sizeof a->error,
                     "not run: its score matrix would take %s, over a quarter of the device's "
                     "memory",
                     s1);
            continue;
        }
        run->desc.algo = a->algo;
        xattn_status mst = xtool_cell_measure(ctx, run, co, &a->cell);
        if (mst != XATTN_STATUS_OK) {
            snprintf(a->error, sizeof a->error, "%s: %s", xattn_status_name(mst),
                     xattn_last_error());
            failures += mst != XATTN_STATUS_UNSUPPORTED;
            continue;
        }
        a->ok = 1;
        if (d->best < 0 || a->cell.t.median < d->a[d->best].cell.t.median)
            d->best = ai;
    }
    return failures;
}

/* The same batch packed (cu_seqlens), with FLASH. */
static void xtool__device_packed(const xtool_advise_plan *p, xtool_advise_dev *d, xattn_ctx *ctx,
                                 const xtool_cell_opts *co)
{
    xtool_case pc = p->c;
    xtool_case_run run;
    memset(&run, 0, sizeof run);
    pc.varlen = 1;
    pc.algo = XATTN_ALGO_FLASH;
    xattn_status pst = xtool_case_setup(ctx, &pc, &run);
    if (pst == XATTN_STATUS_OK)
        pst = xtool_cell_measure(ctx, &run, co, &d->packed);
    if (pst == XATTN_STATUS_OK)
        d->has_packed = 1;
    else
        snprintf(d->packed_error, sizeof d->packed_error, "%s", xattn_last_error());
    xtool_case_teardown(&run);
}

/* The fastest algorithm on the roofline, with the ceilings the library used
 * for its record (f32, or the device's 16-bit ones), else the context's f32
 * figures. */
static void xtool__device_roofline(xtool_advise_dev *d, xattn_ctx *ctx)
{
    if (d->best < 0)
        return;
    const xtool_cell *bc = &d->a[d->best].cell;
    d->fma = bc->fma_ceiling;
    d->bw = bc->bw_ceiling;
    xattn_ceilings cl;
    if ((d->fma <= 0 || d->bw <= 0) && xattn_ceilings_get(ctx, &cl) == XATTN_STATUS_OK) {
        d->fma = cl.fma_f32_gflops;
        d->bw = cl.read_gbps;
    }
    if (bc->has_rec && xtool_roofline_place(bc->rec.flops_executed, bc->rec.bytes_actual, d->fma,
                                            d->bw, &d->roof) == 0) {
        d->roof_ok = 1;
        xtool_roofline_place(bc->rec.flops_useful, bc->rec.bytes_min, d->fma, d->bw, &d->roof_min);
    }
}

/* One device measured and reported. Returns the failures, or -2 for an
 * impossible case (exit 2). */
static int xtool__device(xtool_advise_plan *p, int ti)
{
    const xtool_cli_opts *o = p->o;
    xtool_advise_dev *d = &p->devs[ti];
    d->t = p->targets[ti];
    d->best = -1;
    for (int ai = 0; ai < 3; ai++)
        d->a[ai].algo = xtool__algos[ai];
    char dname[32];
    xtool_target_name(d->t.backend, d->t.device, dname, sizeof dname);
    xattn_ctx *ctx = NULL;
    xtool_case_run run;
    memset(&run, 0, sizeof run);
    int orc = xtool__device_open(p, d, dname, &ctx, &run);
    if (orc) {
        xtool_case_teardown(&run);
        xattn_ctx_destroy(ctx);
        if (orc == XTOOL_EXIT_USAGE)
            return -2;
        printf("\n%s %s: cannot be used: %s\n", dname, d->t.info.name, d->error);
        return 1;
    }
    d->opened = 1;
    printf("\n%s %s\n", dname, d->t.info.name);
    fflush(stdout);
    xtool_cell_opts co = {.warmup = o->warmup,
                          .min_reps = o->min_reps,
                          .max_reps = o->reps,
                          .max_spread = o->max_spread,
                          .budget_s = o->cell_budget};
    int failures = xtool__device_algos(p, d, ctx, &run, &co);
    xtool_case_teardown(&run);
    if (p->has_lengths)
        xtool__device_packed(p, d, ctx, &co);
    xtool__device_roofline(d, ctx);
    xattn_ctx_destroy(ctx);
    xtool_advise_text(&p->c, &p->w, p->has_lengths, d);
    xtool_advise_print_device(p, d);
    return failures;
}

int xtool_cmd_advise(const xtool_cli_opts *o)
{
    xtool_advise_plan p;
    int rc = xtool__plan(o, &p);
    if (rc) {
        xtool__plan_free(&p);
        return rc;
    }
    xtool_advise_print_header(&p);
    int failures = 0;
    for (int ti = 0; ti < p.nt; ti++) {
        int f = xtool__device(&p, ti);
        if (f < 0) {
            xtool__plan_free(&p);
            return XTOOL_EXIT_USAGE;
        }
        failures += f;
    }
    char err[1024];
    if (o->json_path && xtool_advise_write_json(&p, o->json_path, err, sizeof err)) {
        fprintf(stderr, "%s: advise: %s\n", xtool_prog, err);
        failures++;
    }
    xtool__plan_free(&p);
    return failures ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
}
