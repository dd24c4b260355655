/* xattn run: one case, its times, its full record, its error against the
 * reference, and the profiler's exports. The lines "time", "work" and
 * "error" keep the format bench/gpu-check.sh reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_tool.h"

/* Writes the context's records where --json / --trace / --csv asked. */
static int xattn__export_records(xattn_ctx *ctx, const xattn_cli_opts *o)
{
    const char *paths[] = {o->json_path, o->csv_path, o->trace_path};
    const xattn_export_format fmts[] = {XATTN_EXPORT_JSON, XATTN_EXPORT_CSV, XATTN_EXPORT_TRACE};
    const char *names[] = {"records (JSON)", "records (CSV)", "trace"};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        if (!paths[i])
            continue;
        if (xattn_profiler_export(ctx, fmts[i], paths[i]) != XATTN_STATUS_OK) {
            fprintf(stderr, "%s: %s\n", xattn_prog, xattn_last_error());
            rc = XATTN_EXIT_FAIL;
        } else {
            printf("written  %s: %s\n", names[i], paths[i]);
        }
    }
    return rc;
}

int xattn_cmd_run(const xattn_cli_opts *o, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    xattn_case c;
    int32_t *lq = NULL, *lk = NULL;
    char err[512] = "";
    int rc = xattn_case_from_opts(o, &c, &lq, &lk, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: run: %s\n", xattn_prog, err);
        return rc;
    }
    xattn_backend be = o->n_backends ? o->backends[0] : XATTN_BACKEND_AUTO;
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_open(o, be, o->device, &ctx) != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: run: %s\n", xattn_prog, xattn_last_error());
        free(lq);
        free(lk);
        return XATTN_EXIT_FAIL;
    }
    xattn_device_info info;
    xattn_ctx_device_info(ctx, &info);
    char desc[320];
    xattn_case_describe(&c, desc, sizeof desc);
    const int forced = o->cpu_simd && xattn_ctx_backend(ctx) == XATTN_BACKEND_CPU;
    printf("device   %s [%d] %s%s%s%s\ncase     %s\n", xattn_backend_name(xattn_ctx_backend(ctx)),
           be == XATTN_BACKEND_AUTO ? info.index : o->device, info.name, forced ? " (" : "",
           forced ? xattn_cli_simd_name(o->cpu_simd) : "", forced ? " kernels)" : "", desc);

    /* Every call of the run is recorded (the warm-up too): the last record is
     * printed, the exports take them all. */
    xattn_profiler_enable(ctx, 1);
    xattn_case_run r;
    xattn_status st = xattn_case_setup(ctx, &c, &r);
    if (st == XATTN_STATUS_OK) {
        st = xattn_attention_check(ctx, &r.desc);
        if (st != XATTN_STATUS_OK && xattn_status_is_usage(st)) {
            fprintf(stderr, "%s: run: impossible case: %s\n", xattn_prog, xattn_last_error());
            xattn_case_teardown(&r);
            xattn_ctx_destroy(ctx);
            free(lq);
            free(lk);
            return XATTN_EXIT_USAGE;
        }
    }
    xattn_cell cell;
    if (st == XATTN_STATUS_OK) {
        xattn_cell_opts co = {.warmup = o->warmup,
                              .min_reps = o->reps,
                              .max_reps = o->reps,
                              .max_spread = -1,
                              .budget_s = 1e30,
                              .poison_first = o->check};
        st = xattn_cell_measure(ctx, &r, &co, &cell);
    }
    if (st != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: run: %s: %s\n", xattn_prog, xattn_status_name(st), xattn_last_error());
        xattn_case_teardown(&r);
        xattn_ctx_destroy(ctx);
        free(lq);
        free(lk);
        return XATTN_EXIT_FAIL;
    }
    const xattn_run_info *ri = &cell.info;
    printf("algo     %s (asked %s): %s\n", xattn_algo_name(ri->algo_chosen),
           xattn_algo_name(ri->algo_requested), ri->reason);
    printf("time     median %.4f ms, min %.4f ms, p90 %.4f ms over %d reps (spread %.1f%%)\n",
           cell.t.median, cell.t.min, cell.t.p90, cell.t.n, 100.0 * cell.t.spread);
    if (cell.build_ms > 0)
        printf("build    %.1f ms of one-off costs (program builds) in the warm-up, not timed\n",
               cell.build_ms);
    for (int i = 0; i < ri->num_phases && i < 4; i++)
        printf("  phase  %-8s %.4f ms\n", ri->phase_names[i], ri->phase_ms[i]);
    if (cell.has_rec) {
        printf("work     %.3f GFLOP useful (%.3f dense), %.2f GFLOP/s useful\n",
               cell.rec.flops_useful * 1e-9, cell.rec.flops_dense * 1e-9, cell.gflops_useful);
        char ws[32], pk[32];
        xattn_fmt_bytes((double)ri->workspace_bytes, ws, sizeof ws);
        xattn_fmt_bytes((double)cell.peak_bytes, pk, sizeof pk);
        printf("memory   workspace %s, context peak %s\n", ws, pk);
        if (cell.pct_fma >= 0)
            printf("roofline %.1f%% of the FMA ceiling, %.1f%% of the read bandwidth at the median "
                   "(%.2f FLOP/byte executed)\n",
                   cell.pct_fma, cell.pct_bw, cell.intensity);
        else
            printf("roofline no ceilings known for this device (run '%s devices --measure')\n",
                   xattn_prog);
        xattn_record_print(stdout, &cell.rec);
    }
    rc = xattn__export_records(ctx, o);
    if (o->check) {
        xattn_case_ref ref;
        xattn_case_error e;
        st = xattn_case_ref_compute(&r, o->check_limit, &ref);
        if (st == XATTN_STATUS_OK)
            st = xattn_case_check(&r, &ref, &e);
        if (st != XATTN_STATUS_OK) {
            fprintf(stderr, "%s: run: reference: %s\n", xattn_prog, xattn_last_error());
            rc = XATTN_EXIT_FAIL;
        } else if (ref.mode == XATTN_REF_SKIPPED) {
            printf("error    not checked: %s\n", ref.note);
        } else {
            printf("error    rel L2 %.3e, max abs %.3e (reference rounded to %s: %.3e) %s%s%s\n",
                   e.rel_l2, e.max_abs, xattn_dtype_name(c.dtype), e.rel_l2_rounded,
                   e.pass ? "PASS" : "FAIL", ref.mode == XATTN_REF_SUB ? "; " : "",
                   ref.mode == XATTN_REF_SUB ? ref.note : "");
            if (c.lse)
                printf("lse      max error %.3e (relative to 1 + |LSE|), %d mismatches\n",
                       e.lse_max_err, e.lse_mismatch);
            if (e.nan_mismatch)
                printf("nan      %d elements NaN in one of output and reference only\n",
                       e.nan_mismatch);
            if (!e.pass)
                rc = XATTN_EXIT_FAIL;
        }
        xattn_case_ref_free(&ref);
    }
    xattn_case_teardown(&r);
    xattn_ctx_destroy(ctx);
    free(lq);
    free(lk);
    return rc;
}
