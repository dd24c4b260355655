/*
 * xattn check: every available device x algorithm x feature on small shapes
 * against the double-precision reference (computed once per feature), with
 * the outputs poisoned (NaN) before the call, and a summary matrix. Exit 1 on
 * any mismatch or error; a configuration a backend declares unsupported is
 * reported, not failed. The plan and the report are xtool_check_plan.c and
 * xtool_check_report.c; this file runs the cells.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_check.h"

/* One call of algo on the set-up case, poisoned first, against the reference. */
static void xtool__check_call(xattn_ctx *ctx, xtool_case_run *run, const xtool_case_ref *ref,
                              xattn_algo algo, xtool_check_cell *cell)
{
    run->desc.algo = algo;
    xattn_status cst = xtool_cell_poisoned_call(ctx, run, NULL);
    xtool_case_error e;
    if (cst == XATTN_STATUS_OK)
        cst = xtool_case_check(run, ref, &e);
    if (cst == XATTN_STATUS_UNSUPPORTED) {
        cell->status = XTOOL_CHECK_UNSUP;
        snprintf(cell->msg, sizeof cell->msg, "%s", xattn_last_error());
        return;
    }
    if (cst != XATTN_STATUS_OK) {
        cell->status = XTOOL_CHECK_ERROR;
        snprintf(cell->msg, sizeof cell->msg, "%s: %s", xattn_status_name(cst), xattn_last_error());
        return;
    }
    cell->rel_l2 = e.rel_l2;
    cell->max_abs = e.max_abs;
    cell->bound = e.bound;
    cell->lse_err = e.lse_max_err;
    cell->status = e.pass ? XTOOL_CHECK_PASS : XTOOL_CHECK_FAIL;
    if (!e.pass)
        snprintf(cell->msg, sizeof cell->msg,
                 "rel L2 %.3e (bound %.3e), max abs %.3e, %d NaN mismatches, %d LSE mismatches "
                 "(max LSE error %.2e)",
                 e.rel_l2, e.bound, e.max_abs, e.nan_mismatch, e.lse_mismatch, e.lse_max_err);
}

/* Every feature x algorithm on one device; ref_done[fi]: 1 computed, -1 failed. */
static void xtool__check_device(const xtool_check_plan *p, int ti, xtool_case_ref *refs,
                                int *ref_done, xtool_progress *prog)
{
    const xtool_target *t = &p->targets[ti];
    xattn_ctx *ctx = NULL;
    xattn_status st = xtool_ctx_open(p->o, t->backend, t->device, &ctx);
    char dname[32];
    xtool_target_name(t->backend, t->device, dname, sizeof dname);
    for (int fi = 0; fi < p->nf; fi++) {
        xtool_case_run run;
        xattn_status sst = st;
        memset(&run, 0, sizeof run);
        if (sst == XATTN_STATUS_OK)
            sst = xtool_case_setup(ctx, &p->cases[fi], &run);
        if (sst == XATTN_STATUS_OK && !ref_done[fi])
            ref_done[fi] =
                xtool_case_ref_compute(&run, 1e18, &refs[fi]) == XATTN_STATUS_OK ? 1 : -1;
        for (int ai = 0; ai < p->na; ai++) {
            xtool_check_cell *cell = xtool_check_cell_at(p, fi, ti, ai);
            char label[128];
            snprintf(label, sizeof label, "%s %s %s", dname, xattn_algo_name(p->algos[ai]),
                     p->names[fi]);
            xtool_progress_draw(prog, label);
            if (sst != XATTN_STATUS_OK) {
                cell->status =
                    sst == XATTN_STATUS_UNSUPPORTED ? XTOOL_CHECK_UNSUP : XTOOL_CHECK_ERROR;
                snprintf(cell->msg, sizeof cell->msg, "%s",
                         st != XATTN_STATUS_OK ? "no context" : xattn_last_error());
            } else if (ref_done[fi] < 0) {
                cell->status = XTOOL_CHECK_ERROR;
                snprintf(cell->msg, sizeof cell->msg, "the reference failed");
            } else {
                xtool__check_call(ctx, &run, &refs[fi], p->algos[ai], cell);
            }
            prog->done++;
        }
        xtool_case_teardown(&run);
    }
    xattn_ctx_destroy(ctx);
}

int xtool_cmd_check(const xtool_cli_opts *o)
{
    char err[1200];
    if (o->json_path && xtool_out_probe("--json", o->json_path, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: check: %s\n", xtool_prog, err);
        return XTOOL_EXIT_USAGE;
    }
    xtool_check_plan p;
    int rc = xtool_check_plan_make(o, &p);
    if (rc)
        return rc;
    xtool_case_ref *refs = calloc((size_t)p.nf, sizeof *refs);
    int *ref_done = calloc((size_t)p.nf, sizeof *ref_done);
    if (!refs || !ref_done) {
        fprintf(stderr, "%s: check: out of memory\n", xtool_prog);
        rc = XTOOL_EXIT_FAIL;
        goto done;
    }
    int ncells = p.nf * p.na * p.nt;
    printf("xattn check %s: %d feature%s x %d algorithm%s x %d device%s = %d cells, against the "
           "double-precision reference\n",
           xattn_version_string(), p.nf, p.nf == 1 ? "" : "s", p.na, p.na == 1 ? "" : "s", p.nt,
           p.nt == 1 ? "" : "s", ncells);
    fflush(stdout);
    xtool_progress prog;
    xtool_progress_init(&prog, o->progress, ncells);
    for (int ti = 0; ti < p.nt; ti++)
        xtool__check_device(&p, ti, refs, ref_done, &prog);
    xtool_progress_done(&prog);
    int counts[4];
    xtool_check_report(&p, counts);
    rc = counts[XTOOL_CHECK_FAIL] || counts[XTOOL_CHECK_ERROR] ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
    if (o->json_path && xtool_check_write_json(&p, counts, o->json_path, err, sizeof err)) {
        fprintf(stderr, "%s: check: %s\n", xtool_prog, err);
        rc = XTOOL_EXIT_FAIL;
    }
    for (int i = 0; i < p.nf && refs; i++)
        xtool_case_ref_free(&refs[i]);
done:
    free(refs);
    free(ref_done);
    xtool_check_plan_free(&p);
    return rc;
}
