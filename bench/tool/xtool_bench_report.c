/*
 * xattn bench, the report on stdout: the table's header, a row per cell as it
 * finishes and the notes under it, the thread-scaling block, the closing
 * lines; and what the table and the files both say of a cell (its status, its
 * check, its shares of a ceiling above 100%, its figures at the minimum bytes).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xtool_bench.h"

const char *xtool_cell_status_name(xtool_cell_status s)
{
    switch (s) {
    case XTOOL_CELL_OK: return "ok";
    case XTOOL_CELL_FAILED: return "failed";
    case XTOOL_CELL_UNSUPPORTED: return "unsupported";
    default: return "skipped";
    }
}

const char *xtool_bench_check_name(const xtool_bench_result *r)
{
    if (r->status != XTOOL_CELL_OK && !(r->status == XTOOL_CELL_FAILED && r->err.checked))
        return "-";
    if (!r->check_on)
        return "off";
    if (r->ref_mode == XTOOL_REF_SKIPPED)
        return "skipped";
    return r->err.pass ? "pass" : "fail";
}

const char *xtool_bench_scope_name(const xtool_bench_result *r)
{
    if (!r->check_on || !r->err.checked)
        return "none";
    return r->ref_mode == XTOOL_REF_SUB ? "sub-batch" : "full";
}

/* GB/s of the record's minimum bytes (q, K and V once, o) at the median, and that as %
 * of the read bandwidth: the figure of a memory-bound target (decode reads K/V once). */
double xtool_bench_gbps_min(const xtool_cell *c)
{
    return c->has_rec && c->t.median > 0 ? c->rec.bytes_min / (c->t.median * 1e6) : -1;
}

double xtool_bench_pct_bw_min(const xtool_cell *c)
{
    double g = xtool_bench_gbps_min(c);
    return g >= 0 && c->bw_ceiling > 0 ? 100.0 * g / c->bw_ceiling : -1;
}

/* ---- the table on stdout ------------------------------------------------------------ */

static const char *xtool__check_cell(const xtool_bench_result *r)
{
    const char *c = xtool_bench_check_name(r);
    if (!strcmp(c, "pass"))
        return r->ref_mode == XTOOL_REF_SUB ? "ok*" : "ok";
    if (!strcmp(c, "fail"))
        return "FAIL";
    if (!strcmp(c, "skipped"))
        return "skip";
    return "-";
}

void xtool_bench_table_header(FILE *f, int casew)
{
    fprintf(f, "%-9s %-8s %-8s %3s %-*s %5s %10s %7s %10s %10s %9s %8s %6s %6s %10s %8s %s\n",
            "device", "algo", "kernel", "thr", casew, "case", "reps", "median ms", "+-CI", "p90 ms",
            "CPU ms", "GFLOP/s", "GB/s", "%FMA", "%BW", "peak mem", "rel err", "check");
}

void xtool_bench_table_row(FILE *f, const xtool_bench_report *rep, const xtool_bench_result *r,
                           int casew)
{
    const xtool_bench_device *d = &rep->devices[r->device];
    char dev[32];
    xtool_target_name(d->t.backend, d->t.device, dev, sizeof dev);
    const char *key = rep->cases[r->case_idx].key;
    char thr[16];
    if (r->threads > 0)
        snprintf(thr, sizeof thr, "%d", r->threads);
    else
        snprintf(thr, sizeof thr, "-");
    if (r->status != XTOOL_CELL_OK && r->cell.t.n == 0) {
        fprintf(f, "%-9s %-8s %-8s %3s %-*s %s: %s\n", dev, xattn_algo_name(r->algo), "-", thr,
                casew, key, xtool_cell_status_name(r->status), r->error);
        return;
    }
    const xtool_cell *c = &r->cell;
    char pk[32], fma[16], bw[16], err[16];
    xtool_fmt_bytes((double)c->peak_bytes, pk, sizeof pk);
    xtool_fmt_pct(c->pct_fma, fma, sizeof fma);
    xtool_fmt_pct(c->pct_bw, bw, sizeof bw);
    if (r->err.checked)
        snprintf(err, sizeof err, "%.1e", r->err.rel_l2);
    else
        snprintf(err, sizeof err, "-");
    char algo[32];
    if (r->algo == XATTN_ALGO_AUTO) /* what AUTO chose */
        snprintf(algo, sizeof algo, "auto:%s", xattn_algo_name(c->info.algo_chosen));
    else
        snprintf(algo, sizeof algo, "%s", xattn_algo_name(r->algo));
    const char *kernel = c->has_rec && c->rec.kernel[0] ? c->rec.kernel : "-";
    char cpu[24];
    if (c->cpu.n > 0)
        snprintf(cpu, sizeof cpu, "%10.4f", c->cpu.median);
    else
        snprintf(cpu, sizeof cpu, "%10s", "-");
    char ci[24]; /* the interval's half-width in % of the median, 7 characters */
    double hw = 100.0 * xtool_stats_ci_halfwidth(&c->t);
    if (hw < 999.95)
        snprintf(ci, sizeof ci, "%6.1f%%", hw);
    else
        snprintf(ci, sizeof ci, "%7s", ">999%");
    fprintf(f,
            "%-9s %-8s %-8.8s %3s %-*s %5d %10.4f %s%s %9.4f %s %9.2f %8.2f %6s %6s %10s %8s "
            "%s%s%s\n",
            dev, algo, kernel, thr, casew, key, c->t.n, c->t.median, ci, c->converged ? " " : "~",
            c->t.p90, cpu, c->gflops_useful, c->gbytes_per_s, fma, bw, pk, err,
            xtool__check_cell(r), r->error[0] ? "  " : "", r->error);
}

void xtool_bench_table_notes(FILE *f, const xtool_bench_report *rep)
{
    int flagged = 0, modelled = 0, measured = 0, unconverged = 0, cpu = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        unconverged += r->cell.t.n > 0 && !r->cell.converged;
        cpu += r->cell.cpu.n > 0;
        char list[160];
        flagged += xtool_bench_model_errors(rep, r, list, sizeof list) > 0;
        if (r->cell.t.n > 0 && r->cell.has_rec) {
            measured++;
            modelled += !r->cell.rec.work_counted;
        }
    }
    for (int i = 0; i < rep->n_scaling; i++)
        flagged += xtool_stats_over_ceiling(rep->scaling[i].pct_fma_per_thread_base) ||
                   xtool_stats_over_ceiling(rep->scaling[i].pct_fma_per_thread);
    if (measured)
        fprintf(f,
                "+-CI     half the width of the median's confidence interval (95%%; [min, max] "
                "below 6 calls), relative to the median; median, +-CI and p90 on the device's "
                "own clock%s\n",
                cpu ? "; CPU ms: the process's CPU time per call, every thread (a second clock, "
                      "less inflated by other processes)"
                    : "");
    if (unconverged)
        fprintf(f,
                "~        %d cell%s not converged: the interval stayed wider than +-%.1f%% "
                "(--max-spread) until the cell's budget or --max-reps ended it; its median is "
                "less certain\n",
                unconverged, unconverged == 1 ? "" : "s", 100.0 * rep->o->max_spread);
    int low = 0; /* devices whose ceilings were measured under load */
    for (int d = 0; d < rep->n_devices; d++)
        low += rep->devices[d].has_ceilings && rep->devices[d].ceilings.under_load;
    if (flagged)
        fprintf(f, "!        %d figure%s marked '!': %s%s\n", flagged, flagged == 1 ? "" : "s",
                low ? "here most likely ceilings measured under load, so too low (measured "
                      "again by the next run with --measure-ceilings); otherwise "
                    : "",
                XTOOL_MODEL_ERROR_NOTE);
    if (modelled)
        fprintf(f,
                "work     %d of %d cells: executed work (GFLOP/s executed, %%FMA, intensity) is "
                "modelled from the kernels' tile sizes (docs/measurement.md), not counted by the "
                "kernels as they ran ('work_counted': false)\n",
                modelled, measured);
}

int xtool_bench_model_errors(const xtool_bench_report *rep, const xtool_bench_result *r, char *list,
                             size_t n)
{
    (void)rep;
    const xtool_cell *c = &r->cell;
    if (n)
        list[0] = '\0';
    if (c->t.n == 0)
        return 0;
    const char *names[4] = {"pct_fma_ceiling", "pct_bw_ceiling", "pct_fma_per_thread",
                            "pct_bw_min_ceiling"};
    const double vals[4] = {c->pct_fma, c->pct_bw, r->pct_fma_per_thread,
                            xtool_bench_pct_bw_min(c)};
    int count = 0;
    size_t k = 0;
    for (int i = 0; i < 4; i++)
        if (xtool_stats_over_ceiling(vals[i])) {
            if (k < n)
                k += (size_t)snprintf(list + k, n - k, "%s%s", count ? ";" : "", names[i]);
            count++;
        }
    return count;
}

int xtool_bench_scaling_compute(xtool_bench_report *rep)
{
    rep->n_scaling = 0;
    if (!rep->scaling)
        return 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *a = &rep->results[i];
        if (a->status != XTOOL_CELL_OK || a->threads <= 0 || a->cell.t.n == 0)
            continue;
        /* a is the base of its group when no earlier usable cell of the group has fewer
         * threads, or as few (the first of equals wins) */
        int base = 1;
        for (int j = 0; j < rep->n_results && base; j++) {
            const xtool_bench_result *b = &rep->results[j];
            if (j == i || b->status != XTOOL_CELL_OK || b->threads <= 0 || b->cell.t.n == 0 ||
                b->device != a->device || b->case_idx != a->case_idx || b->algo != a->algo)
                continue;
            base = !(b->threads < a->threads || (b->threads == a->threads && j < i));
        }
        if (!base)
            continue;
        for (int j = 0; j < rep->n_results; j++) {
            const xtool_bench_result *b = &rep->results[j];
            if (b->status != XTOOL_CELL_OK || b->threads <= a->threads || b->cell.t.n == 0 ||
                b->device != a->device || b->case_idx != a->case_idx || b->algo != a->algo)
                continue;
            xtool_bench_scaling *sc = &rep->scaling[rep->n_scaling++];
            memset(sc, 0, sizeof *sc);
            sc->device = a->device;
            sc->case_idx = a->case_idx;
            sc->algo = a->algo;
            sc->threads_base = a->threads;
            sc->threads = b->threads;
            sc->base_ms = a->cell.t.median;
            sc->ms = b->cell.t.median;
            sc->speedup = sc->ms > 0 ? sc->base_ms / sc->ms : -1;
            sc->efficiency =
                sc->speedup > 0 ? sc->speedup * (double)a->threads / (double)b->threads : -1;
            sc->pct_fma_per_thread_base = a->pct_fma_per_thread;
            sc->pct_fma_per_thread = b->pct_fma_per_thread;
        }
    }
    return rep->n_scaling;
}

/* The thread-scaling block after the table (rep->scaling filled). */
void xtool_bench_scaling_print(FILE *f, const xtool_bench_report *rep, int casew)
{
    if (!rep->n_scaling)
        return;
    fprintf(f,
            "\nthread scaling (same device, case and algorithm; speed-up = base median / median; "
            "efficiency = speed-up / thread ratio;\n%%FMA/t = %% of the FMA ceiling pro-rated to "
            "the threads used, ceiling x threads / compute units):\n");
    fprintf(f, "%-9s %-8s %-*s %9s %10s %10s %8s %6s %11s %7s\n", "device", "algo", casew, "case",
            "threads", "base ms", "ms", "speed-up", "effic", "base %FMA/t", "%FMA/t");
    for (int i = 0; i < rep->n_scaling; i++) {
        const xtool_bench_scaling *sc = &rep->scaling[i];
        const xtool_bench_device *d = &rep->devices[sc->device];
        char dev[32], thr[32], p0[16], p1[16];
        xtool_target_name(d->t.backend, d->t.device, dev, sizeof dev);
        snprintf(thr, sizeof thr, "%d -> %d", sc->threads_base, sc->threads);
        xtool_fmt_pct(sc->pct_fma_per_thread_base, p0, sizeof p0);
        xtool_fmt_pct(sc->pct_fma_per_thread, p1, sizeof p1);
        fprintf(f, "%-9s %-8s %-*s %9s %10.4f %10.4f %7.2fx %5.0f%% %11s %7s\n", dev,
                xattn_algo_name(sc->algo), casew, rep->cases[sc->case_idx].key, thr, sc->base_ms,
                sc->ms, sc->speedup, 100.0 * sc->efficiency, p0, p1);
    }
}

void xtool_bench_summary_print(FILE *f, const xtool_bench_report *rep, const char *trace_note)
{
    const xtool_cli_opts *o = rep->o;
    int failed = 0, unsupported = 0, skipped = 0, sub = 0, unchecked = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        failed += r->status == XTOOL_CELL_FAILED;
        unsupported += r->status == XTOOL_CELL_UNSUPPORTED;
        skipped += r->status == XTOOL_CELL_SKIPPED;
        sub += r->check_on && r->ref_mode == XTOOL_REF_SUB;
        unchecked += r->check_on && r->ref_mode == XTOOL_REF_SKIPPED;
    }
    if (sub)
        fprintf(f,
                "ok*      checked on a sub-batch: sequence 0 and the query heads of KV head 0 (the "
                "whole case is above --check-limit %g FLOPs)\n",
                o->check_limit);
    if (unchecked)
        fprintf(f, "skip     not checked: the reference is above --check-limit even for a "
                   "sub-batch\n");
    xtool_load_print(f, rep->cpus, rep->load_start, rep->load_end);
    if (rep->o->passes > 1)
        fprintf(f, "passes   %d of %d%s: each cell's samples pooled over its passes\n",
                rep->passes_done, rep->o->passes,
                rep->budget_hit ? " (--budget spent: later passes cut short)" : "");
    fprintf(f,
            "%d cells: %d ok, %d failed, %d unsupported, %d skipped; %.1f s; written to "
            "%s/{results.json,results.csv,chart.svg,%s}\n",
            rep->n_results, rep->n_results - failed - unsupported - skipped, failed, unsupported,
            skipped, rep->wall_s, o->out_dir, trace_note);
}
