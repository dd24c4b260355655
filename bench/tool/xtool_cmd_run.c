/* xattn run: one case, its times, its full record, its error against the
 * reference, and the profiler's exports. The lines "time", "work" and
 * "error" keep the format bench/dev/gpu-check.sh reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"

/* The exports of --json, --csv and --trace. */
typedef struct xtool__run_out {
    const char *path[3];
    int created[3]; /* made empty by the probe: removed when the run fails */
} xtool__run_out;

static const char *const xtool__out_flags[3] = {"--json", "--csv", "--trace"};

/* Checks that every output file can be written before the case runs. */
static int xtool__probe_outputs(const xtool_cli_opts *o, xtool__run_out *out)
{
    memset(out, 0, sizeof *out);
    out->path[0] = o->json_path;
    out->path[1] = o->csv_path;
    out->path[2] = o->trace_path;
    for (int i = 0; i < 3; i++) {
        char err[1200];
        if (out->path[i] &&
            xtool_out_probe(xtool__out_flags[i], out->path[i], &out->created[i], err, sizeof err)) {
            fprintf(stderr, "%s: run: %s\n", xtool_prog, err);
            return XTOOL_EXIT_USAGE;
        }
    }
    return 0;
}

/* A failed run leaves no empty file that the probe made. */
static void xtool__unprobe_outputs(const xtool__run_out *out)
{
    for (int i = 0; i < 3; i++)
        if (out->path[i] && out->created[i])
            remove(out->path[i]);
}

/* Writes the context's records where --json / --csv / --trace asked. */
static int xtool__export_records(xattn_ctx *ctx, const xtool__run_out *out)
{
    const xattn_export_format fmts[] = {XATTN_EXPORT_JSON, XATTN_EXPORT_CSV, XATTN_EXPORT_TRACE};
    const char *names[] = {"records (JSON)", "records (CSV)", "trace"};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        if (!out->path[i])
            continue;
        if (xattn_profiler_export(ctx, fmts[i], out->path[i]) != XATTN_STATUS_OK) {
            fprintf(stderr, "%s: run: %s: %s\n", xtool_prog, xtool__out_flags[i],
                    xattn_last_error());
            rc = XTOOL_EXIT_FAIL;
        } else {
            printf("written  %s: %s\n", names[i], out->path[i]);
        }
    }
    return rc;
}

/* Refuses a case that does not fit the memory available (exit 2): inputs and
 * outputs, and the largest of NAIVE's score matrix (or SPLITKV's partials)
 * and the reference. Returns 0 when it fits or the figure is unknown. */
static int xtool__check_memory(xattn_ctx *ctx, const xtool_cli_opts *o, const xtool_case *c,
                               const xattn_device_info *info)
{
    xtool_target t;
    memset(&t, 0, sizeof t);
    t.info = *info;
    xtool_mem_room room;
    xtool_mem_room_read(ctx, &t, &room);
    xtool_case_mem m;
    xtool_case_mem_estimate(c, c->algo, o->check, o->check_limit, info->compute_units, &m);
    /* device: the tensors and the calls' workspace; host: staging and the reference */
    double dev = m.tensors + m.workspace, host = fmax(m.staging, m.reference);
    char why[160];
    if (xtool_mem_fits(&room, dev, host, "the case", why, sizeof why) == 0)
        return 0;
    char a[32], b[32], w[32], rf[32], st[32];
    xtool_fmt_bytes(m.tensors, a, sizeof a);
    xtool_fmt_bytes(m.workspace, w, sizeof w);
    xtool_fmt_bytes(m.reference, rf, sizeof rf);
    xtool_fmt_bytes(m.staging, st, sizeof st);
    xtool_fmt_bytes(room.device_total, b, sizeof b);
    char parts[320];
    size_t k = (size_t)snprintf(parts, sizeof parts, "inputs and outputs %s", a);
    if (m.workspace > 0 && k < sizeof parts)
        k += (size_t)snprintf(parts + k, sizeof parts - k, "; %s %s",
                              c->algo == XATTN_ALGO_NAIVE ? "naive's B*Hq*Sq*Sk*4-byte score matrix"
                                                          : "the algorithm's workspace",
                              w);
    if (m.reference > 0 && k < sizeof parts)
        k += (size_t)snprintf(parts + k, sizeof parts - k, "; the reference %s", rf);
    if (k < sizeof parts)
        snprintf(parts + k, sizeof parts - k, "; filling the inputs %s at most", st);
    fprintf(stderr,
            "%s: run: not enough memory: %s (%s); the device has %s in all. Nothing was "
            "allocated. Smaller shapes need less%s%s.\n",
            xtool_prog, why, parts, b,
            c->algo == XATTN_ALGO_NAIVE && m.workspace > 0
                ? "; so does --algo flash, which has no score matrix"
                : "",
            m.reference > 0 ? "; so does --no-check or a lower --check-limit (the reference)" : "");
    return XTOOL_EXIT_USAGE;
}

/* What the run has made, freed in one place. */
typedef struct xtool__run {
    const xtool_cli_opts *o;
    xtool_case c;
    int32_t *lq, *lk; /* --lengths */
    xtool__run_out outs;
    xattn_ctx *ctx;
    xattn_device_info info;
    xtool_case_run r;
    int have_run; /* r set up (torn down at the end) */
    xtool_cell cell;
} xtool__run;

/* Ends the run: a failure removes the empty output files the probe made. */
static int xtool__run_end(xtool__run *run, int rc)
{
    if (rc && rc != XTOOL_EXIT_OK)
        xtool__unprobe_outputs(&run->outs);
    if (run->have_run)
        xtool_case_teardown(&run->r);
    xattn_ctx_destroy(run->ctx);
    free(run->lq);
    free(run->lk);
    return rc;
}

/* ---- plan: the case, the outputs, the device, the memory it needs ------------------ */

static int xtool__run_plan(xtool__run *run)
{
    const xtool_cli_opts *o = run->o;
    char err[512] = "";
    int rc = xtool_case_from_opts(o, &run->c, &run->lq, &run->lk, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: run: %s\n", xtool_prog, err);
        return rc;
    }
    if (xtool__probe_outputs(o, &run->outs))
        return XTOOL_EXIT_USAGE;
    xattn_backend be = o->n_backends ? o->backends[0] : XATTN_BACKEND_AUTO;
    xattn_status cst = xtool_ctx_open(o, be, o->device, &run->ctx);
    if (cst != XATTN_STATUS_OK) {
        /* a device index the backend does not have is a bad command line */
        int usage = cst == XATTN_STATUS_DEVICE_NOT_FOUND;
        if (usage)
            fprintf(stderr, "%s: run: --device %d: %s\n", xtool_prog, o->device,
                    xattn_last_error());
        else
            fprintf(stderr, "%s: run: %s\n", xtool_prog, xattn_last_error());
        return usage ? XTOOL_EXIT_USAGE : XTOOL_EXIT_FAIL;
    }
    xattn_ctx_device_info(run->ctx, &run->info);
    char desc[320];
    xtool_case_describe(&run->c, desc, sizeof desc);
    const int forced = o->cpu_simd && xattn_ctx_backend(run->ctx) == XATTN_BACKEND_CPU;
    printf(
        "device   %s [%d] %s%s%s%s\ncase     %s\n", xattn_backend_name(xattn_ctx_backend(run->ctx)),
        be == XATTN_BACKEND_AUTO ? run->info.index : o->device, run->info.name, forced ? " (" : "",
        forced ? xtool_cli_simd_name(o->cpu_simd) : "", forced ? " kernels)" : "", desc);
    char legend[400];
    if (xtool_case_lengths_legend(&run->c, legend, sizeof legend))
        printf("         %s\n", legend);
    return xtool__check_memory(run->ctx, o, &run->c, &run->info);
}

/* ---- run: the calls, every one recorded ----------------------------------------- */

/* The warm-up and the timed calls; the record of every call is kept (the
 * last is printed, the exports take them all). */
static int xtool__run_calls(xtool__run *run)
{
    const xtool_cli_opts *o = run->o;
    xattn_profiler_enable(run->ctx, 1);
    xattn_status st = xtool_case_setup(run->ctx, &run->c, &run->r);
    run->have_run = 1;
    if (st == XATTN_STATUS_OK) {
        st = xattn_attention_check(run->ctx, &run->r.desc);
        if (st != XATTN_STATUS_OK && xtool_status_is_usage(st)) {
            fprintf(stderr, "%s: run: impossible case: %s\n", xtool_prog, xattn_last_error());
            return XTOOL_EXIT_USAGE;
        }
    }
    if (st == XATTN_STATUS_OK) {
        xtool_cell_opts co = {.warmup = o->warmup,
                              .min_reps = o->reps,
                              .max_reps = o->reps,
                              .max_spread = -1,
                              .budget_s = 1e30,
                              .poison_first = o->check,
                              .cpu_time = xattn_ctx_backend(run->ctx) == XATTN_BACKEND_CPU};
        st = xtool_cell_measure(run->ctx, &run->r, &co, &run->cell);
    }
    if (st != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: run: %s: %s\n", xtool_prog, xattn_status_name(st), xattn_last_error());
        return XTOOL_EXIT_FAIL;
    }
    return 0;
}

/* ---- report: the lines, the record, the exports, the error ---------------------- */

/* The time, work and roofline lines are at the median of the timed calls;
 * the phases and the record are the last call's: each line says which. */
static void xtool__run_print(const xtool_cell *cell)
{
    const xattn_run_info *ri = &cell->info;
    printf("algo     %s (asked %s): %s\n", xattn_algo_name(ri->algo_chosen),
           xattn_algo_name(ri->algo_requested), ri->reason);
    if (cell->has_rec)
        printf("kernel   %s%s; executed work %s\n",
               cell->rec.kernel[0] ? cell->rec.kernel : "(not said)",
               cell->rec.matrix_units ? " on matrix units (tensor cores)" : "",
               cell->rec.work_counted ? "counted by the kernels as they ran"
                                      : "modelled from the tile sizes (docs/measurement.md), not "
                                        "counted by the kernels");
    printf("time     median %.4f ms, min %.4f ms, p90 %.4f ms over %d reps (spread %.1f%%); "
           "the median's interval [%.4f, %.4f] ms at %.1f%% (device clock)\n",
           cell->t.median, cell->t.min, cell->t.p90, cell->t.n, 100.0 * cell->t.spread,
           cell->t.ci_low, cell->t.ci_high, 100.0 * cell->t.ci_level);
    if (cell->cpu.n > 0)
        printf("cpu      median %.4f ms, interval [%.4f, %.4f] ms of the process's CPU time per "
               "call (every thread; a second clock, less inflated by other processes)\n",
               cell->cpu.median, cell->cpu.ci_low, cell->cpu.ci_high);
    if (cell->build_ms > 0)
        printf("build    %.1f ms of one-off costs (program builds) in the warm-up, not timed\n",
               cell->build_ms);
    for (int i = 0; i < ri->num_phases && i < 4; i++)
        printf("  phase  %-8s %.4f ms (the last call)\n", ri->phase_names[i], ri->phase_ms[i]);
    if (!cell->has_rec)
        return;
    printf("work     %.3f GFLOP useful (%.3f dense), %.2f GFLOP/s useful at the median\n",
           cell->rec.flops_useful * 1e-9, cell->rec.flops_dense * 1e-9, cell->gflops_useful);
    char ws[32], pk[32];
    xtool_fmt_bytes((double)ri->workspace_bytes, ws, sizeof ws);
    xtool_fmt_bytes((double)cell->peak_bytes, pk, sizeof pk);
    printf("memory   workspace %s, context peak %s\n", ws, pk);
    if (cell->pct_fma >= 0) {
        char pf[16], pb[16];
        printf("roofline %s%% of the FMA ceiling, %s%% of the read bandwidth at the median "
               "(%.2f FLOP/byte executed)\n",
               xtool_fmt_pct(cell->pct_fma, pf, sizeof pf),
               xtool_fmt_pct(cell->pct_bw, pb, sizeof pb), cell->intensity);
        if (xtool_stats_over_ceiling(cell->pct_fma) || xtool_stats_over_ceiling(cell->pct_bw) ||
            xtool_stats_over_ceiling(cell->rec.pct_fma_ceiling) ||
            xtool_stats_over_ceiling(cell->rec.pct_bw_ceiling))
            printf("!        %s\n", XTOOL_MODEL_ERROR_NOTE);
    } else
        printf("roofline no ceilings known for this device (run '%s devices --measure')\n",
               xtool_prog);
    xtool_record_print(stdout, &cell->rec);
}

/* The output against the reference: its error line. Returns 0 or XTOOL_EXIT_FAIL. */
static int xtool__run_check(xtool__run *run)
{
    xtool_case_ref ref;
    xtool_case_error e;
    int rc = 0;
    xattn_status st = xtool_case_ref_compute(&run->r, run->o->check_limit, &ref);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_check(&run->r, &ref, &e);
    if (st != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: run: reference: %s\n", xtool_prog, xattn_last_error());
        rc = XTOOL_EXIT_FAIL;
    } else if (ref.mode == XTOOL_REF_SKIPPED) {
        printf("error    %s\n", ref.note); /* the note starts with "not checked" */
    } else {
        printf("error    rel L2 %.3e, max abs %.3e (reference rounded to %s: %.3e) %s%s%s\n",
               e.rel_l2, e.max_abs, xattn_dtype_name(run->c.dtype), e.rel_l2_rounded,
               e.pass ? "PASS" : "FAIL", ref.mode == XTOOL_REF_SUB ? "; " : "",
               ref.mode == XTOOL_REF_SUB ? ref.note : "");
        if (run->c.lse)
            printf("lse      max error %.3e (relative to 1 + |LSE|), %d mismatches\n",
                   e.lse_max_err, e.lse_mismatch);
        if (e.nan_mismatch)
            printf("nan      %d elements NaN in one of output and reference only\n",
                   e.nan_mismatch);
        if (!e.pass)
            rc = XTOOL_EXIT_FAIL;
    }
    xtool_case_ref_free(&ref);
    return rc;
}

int xtool_cmd_run(const xtool_cli_opts *o, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    xtool__run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    int rc = xtool__run_plan(&run);
    if (!rc)
        rc = xtool__run_calls(&run);
    if (rc)
        return xtool__run_end(&run, rc);
    xtool__run_print(&run.cell);
    rc = xtool__export_records(run.ctx, &run.outs);
    if (o->check && xtool__run_check(&run))
        rc = XTOOL_EXIT_FAIL;
    /* the outputs written stay, whatever the check says */
    run.outs.created[0] = run.outs.created[1] = run.outs.created[2] = 0;
    return xtool__run_end(&run, rc);
}
