/* Writers of bench results: results.json (xattn.bench/1), results.csv, chart.svg. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"
#include "xtool_cases_file.h"
#include "xtool_out_svg.h"

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

static const char *xtool__scope_name(const xtool_bench_result *r)
{
    if (!r->check_on || !r->err.checked)
        return "none";
    return r->ref_mode == XTOOL_REF_SUB ? "sub-batch" : "full";
}

/* `, "key": v`, with null for v negative (undefined) or not finite. */
static void xtool__field_or_null(FILE *f, const char *key, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (v < 0 || !isfinite(v))
        fputs("null", f);
    else
        xattn__json_num(f, v);
}

/* GB/s of the record's minimum bytes (q, K and V once, o) at the median, and that as %
 * of the read bandwidth: the figure of a memory-bound target (decode reads K/V once). */
static double xtool__gbps_min(const xtool_cell *c)
{
    return c->has_rec && c->t.median > 0 ? c->rec.bytes_min / (c->t.median * 1e6) : -1;
}

static double xtool__pct_bw_min(const xtool_cell *c)
{
    double g = xtool__gbps_min(c);
    return g >= 0 && c->bw_ceiling > 0 ? 100.0 * g / c->bw_ceiling : -1;
}

static int xtool__close(FILE *f, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static const char *xtool__device_type_name(int t)
{
    switch (t) {
    case XATTN_DEVICE_TYPE_CPU: return "cpu";
    case XATTN_DEVICE_TYPE_GPU: return "gpu";
    case XATTN_DEVICE_TYPE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
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
    fprintf(f, "%-9s %-8s %-8s %3s %-*s %5s %10s %7s %10s %9s %8s %6s %6s %10s %8s %s\n", "device",
            "algo", "kernel", "thr", casew, "case", "reps", "median ms", "spread", "p90 ms",
            "GFLOP/s", "GB/s", "%FMA", "%BW", "peak mem", "rel err", "check");
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
    fprintf(f,
            "%-9s %-8s %-8.8s %3s %-*s %5d %10.4f %6.1f%%%s %9.4f %9.2f %8.2f %6s %6s %10s %8s "
            "%s%s%s\n",
            dev, algo, kernel, thr, casew, key, c->t.n, c->t.median, 100.0 * c->t.spread,
            c->converged ? " " : "~", c->t.p90, c->gflops_useful, c->gbytes_per_s, fma, bw, pk, err,
            xtool__check_cell(r), r->error[0] ? "  " : "", r->error);
}

void xtool_bench_table_notes(FILE *f, const xtool_bench_report *rep)
{
    int flagged = 0, modelled = 0, measured = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
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
    if (flagged)
        fprintf(f, "!        %d figure%s marked '!': %s\n", flagged, flagged == 1 ? "" : "s",
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
    const double vals[4] = {c->pct_fma, c->pct_bw, r->pct_fma_per_thread, xtool__pct_bw_min(c)};
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

int xtool_bench_write_json(const xtool_bench_report *rep, const char *path, char *err,
                           size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const xtool_cli_opts *o = rep->o;
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"xattn_version\": ", XTOOL_BENCH_SCHEMA);
    xattn__json_str(f, xattn_version_string());
    fprintf(f, ",\n  \"created_utc\": ");
    xattn__json_str(f, rep->created);
    fprintf(f, ",\n  \"command_line\": ");
    xattn__json_str(f, rep->command_line);
    fprintf(f, ",\n  \"host\": {\"hostname\": ");
    xattn__json_str(f, rep->host);
    fprintf(f, ", \"os\": ");
    xattn__json_str(f, rep->os);
    fprintf(f, "},\n  \"preset\": ");
    if (rep->preset)
        xattn__json_str(f, rep->preset);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"length_scale\": ");
    xattn__json_num(f, rep->len_scale);
    fprintf(f, ",\n  \"load\": ");
    if (isfinite(rep->load_start[0]) || isfinite(rep->load_end[0])) {
        fprintf(f, "{\"cpus\": %d, \"start\": [", rep->cpus);
        for (int i = 0; i < 3; i++) {
            fputs(i ? ", " : "", f);
            xattn__json_num(f, rep->load_start[i]);
        }
        fputs("], \"end\": [", f);
        for (int i = 0; i < 3; i++) {
            fputs(i ? ", " : "", f);
            xattn__json_num(f, rep->load_end[i]);
        }
        fputs("]}", f);
    } else {
        fputs("null", f);
    }
    fprintf(f,
            ",\n  \"settings\": {\"warmup\": %d, \"min_reps\": %d, \"max_reps\": %d, "
            "\"max_spread\": ",
            o->warmup, o->min_reps, o->reps);
    xattn__json_num(f, o->max_spread);
    xtool_json_field(f, "cell_budget_s", o->cell_budget);
    fprintf(f, ", \"check\": %s, \"check_limit_flops\": ", o->check ? "true" : "false");
    xattn__json_num(f, o->check_limit);
    fprintf(f, ", \"threads\": %d, \"thread_list\": [", o->threads);
    for (int i = 0; i < o->thread_list.n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)o->thread_list.v[i]);
    fprintf(f, "], \"cpu_simd\": \"%s\", \"seed\": %llu},\n", xtool_cli_simd_name(o->cpu_simd),
            (unsigned long long)o->seed);

    fprintf(f, "  \"devices\": [");
    for (int i = 0; i < rep->n_devices; i++) {
        const xtool_bench_device *d = &rep->devices[i];
        const xattn_device_info *in = &d->t.info;
        fprintf(f, "%s\n    {\"backend\": \"%s\", \"device\": %d, \"name\": ", i ? "," : "",
                xattn_backend_name(d->t.backend), d->t.device);
        xattn__json_str(f, in->name);
        fprintf(f, ", \"vendor\": ");
        xattn__json_str(f, in->vendor);
        fprintf(f, ", \"driver_version\": ");
        xattn__json_str(f, in->driver_version);
        fprintf(f, ", \"platform\": ");
        xattn__json_str(f, in->platform);
        fprintf(f, ", \"description\": ");
        xattn__json_str(f, in->description);
        fprintf(f, ", \"device_type\": \"%s\", \"compute_units\": %d, \"global_mem_bytes\": %llu, ",
                xtool__device_type_name(in->device_type), in->compute_units,
                (unsigned long long)in->global_mem_bytes);
        fprintf(f, "\"cpu_features\": ");
        xattn__json_str(f, in->cpu_features);
        fprintf(f,
                ", \"compute_capability\": %d, \"opened\": %s, \"error\": ", in->compute_capability,
                d->opened ? "true" : "false");
        if (d->error[0])
            xattn__json_str(f, d->error);
        else
            fputs("null", f);
        fprintf(f, ", \"ceilings\": ");
        if (d->has_ceilings) {
            const xattn_ceilings *c = &d->ceilings;
            fprintf(f, "{\"fma_f32_gflops\": ");
            xattn__json_num(f, c->fma_f32_gflops);
            xtool_json_field(f, "fma_f16_gflops", c->fma_f16_gflops);
            xtool_json_field(f, "fma_bf16_gflops", c->fma_bf16_gflops);
            xtool_json_field(f, "mma_f16_gflops", c->mma_f16_gflops);
            xtool_json_field(f, "mma_bf16_gflops", c->mma_bf16_gflops);
            xtool_json_field(f, "read_gbps", c->read_gbps);
            xtool_json_field(f, "copy_gbps", c->copy_gbps);
            fprintf(f, ", \"from_cache\": %s}", c->from_cache ? "true" : "false");
        } else {
            fputs("null", f);
        }
        fputs("}", f);
    }
    fprintf(f, "\n  ],\n  \"results\": [");
    int failed = 0, unsupported = 0, skipped = 0, unchecked = 0, model_errors = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        const xtool_bench_device *d = &rep->devices[r->device];
        const xtool_bench_case *bc = &rep->cases[r->case_idx];
        const xtool_case *c = &bc->c;
        const xtool_cell *cl = &r->cell;
        int has = r->status == XTOOL_CELL_OK || (r->status == XTOOL_CELL_FAILED && cl->t.n > 0);
        failed += r->status == XTOOL_CELL_FAILED;
        unsupported += r->status == XTOOL_CELL_UNSUPPORTED;
        skipped += r->status == XTOOL_CELL_SKIPPED;
        unchecked += r->status == XTOOL_CELL_OK && r->check_on && r->ref_mode == XTOOL_REF_SKIPPED;
        fprintf(f, "%s\n    {\"backend\": \"%s\", \"device\": %d, \"device_name\": ", i ? "," : "",
                xattn_backend_name(d->t.backend), d->t.device);
        xattn__json_str(f, d->t.info.name);
        fprintf(f, ", \"algo\": \"%s\", \"algo_chosen\": ", xattn_algo_name(r->algo));
        if (has && cl->t.n > 0)
            fprintf(f, "\"%s\"", xattn_algo_name(cl->info.algo_chosen));
        else
            fputs("null", f);
        fprintf(f, ", \"case\": ");
        xattn__json_str(f, bc->key);
        fprintf(f, ", \"family\": ");
        xattn__json_str(f, bc->family);
        fprintf(f,
                ", \"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"sq\": %lld, \"sk\": "
                "%lld, \"head_dim\": %lld, \"head_dim_v\": %lld, \"dtype\": \"%s\", \"kv_dtype\": "
                "\"%s\", \"layout\": \"%s\", \"causal\": %s, \"align\": \"%s\", \"window_left\": "
                "%lld, \"window_right\": %lld, \"softcap\": ",
                (long long)c->batch, (long long)c->heads, (long long)c->kv_heads, (long long)c->sq,
                (long long)c->sk, (long long)c->head_dim, (long long)c->head_dim_v,
                xattn_dtype_name(c->dtype), xattn_dtype_name(c->kv_dtype),
                c->bhsd ? "bhsd" : "bshd", c->causal ? "true" : "false",
                c->align == XATTN_ALIGN_TOP_LEFT ? "top_left" : "bottom_right",
                (long long)c->window_left, (long long)c->window_right);
        xattn__json_num(f, c->softcap);
        fprintf(f,
                ", \"alibi\": %s, \"bias\": %s, \"lse\": %s, \"padded\": %s, \"varlen\": %s, "
                "\"num_splits\": %d, \"status\": \"%s\", \"error\": ",
                c->alibi ? "true" : "false", c->bias ? "true" : "false", c->lse ? "true" : "false",
                (c->seqlens_k && !c->varlen) ? "true" : "false", c->varlen ? "true" : "false",
                has && cl->t.n ? cl->info.num_splits : c->num_splits,
                xtool_cell_status_name(r->status));
        if (r->error[0])
            xattn__json_str(f, r->error);
        else
            fputs("null", f);
        if (has && cl->t.n > 0) {
            fprintf(f, ", \"reps\": %d, \"converged\": %s, \"median_ms\": ", cl->t.n,
                    cl->converged ? "true" : "false");
            xattn__json_num(f, cl->t.median);
            xtool_json_field(f, "min_ms", cl->t.min);
            xtool_json_field(f, "p90_ms", cl->t.p90);
            xtool_json_field(f, "max_ms", cl->t.max);
            xtool_json_field(f, "mean_ms", cl->t.mean);
            xtool_json_field(f, "mad_ms", cl->t.mad);
            xtool_json_field(f, "spread", cl->t.spread);
            xtool_json_field(f, "elapsed_s", cl->elapsed_s);
            xtool_json_field(f, "build_ms", cl->build_ms);
            const xattn_record *rc = &cl->rec;
            xtool_json_field(f, "flops_dense", cl->has_rec ? rc->flops_dense : 0);
            xtool_json_field(f, "flops_useful", cl->has_rec ? rc->flops_useful : 0);
            xtool_json_field(f, "flops_executed", cl->has_rec ? rc->flops_executed : 0);
            xtool_json_field(f, "bytes_min", cl->has_rec ? rc->bytes_min : 0);
            xtool_json_field(f, "bytes_actual", cl->has_rec ? rc->bytes_actual : 0);
            xtool__field_or_null(f, "padding_waste", cl->has_rec ? rc->padding_waste : -1);
            xtool_json_field(f, "gflops_useful", cl->gflops_useful);
            xtool_json_field(f, "gflops_executed", cl->gflops_executed);
            xtool_json_field(f, "gbytes_per_s", cl->gbytes_per_s);
            xtool__field_or_null(f, "pct_fma_ceiling", cl->pct_fma);
            xtool__field_or_null(f, "pct_bw_ceiling", cl->pct_bw);
            xtool_json_field(f, "intensity", cl->intensity);
            fprintf(f, ", \"workspace_bytes\": %llu, \"peak_bytes\": %llu",
                    (unsigned long long)cl->info.workspace_bytes,
                    (unsigned long long)cl->peak_bytes);
            xtool__field_or_null(f, "pct_fma_per_thread", r->pct_fma_per_thread);
            xtool__field_or_null(f, "gbytes_min_per_s", xtool__gbps_min(cl));
            xtool__field_or_null(f, "pct_bw_min_ceiling", xtool__pct_bw_min(cl));
            /* the last timed call's phases */
            fprintf(f, ", \"phases\": [");
            for (int k = 0; k < cl->info.num_phases && k < 4; k++) {
                fprintf(f, "%s{\"name\": ", k ? ", " : "");
                xattn__json_str(f, cl->info.phase_names[k]);
                xtool_json_field(f, "ms", cl->info.phase_ms[k]);
                fputs("}", f);
            }
            fputs("]", f);
            /* the kernel variant that ran, and whether the executed work was counted */
            fprintf(f, ", \"kernel\": ");
            if (cl->has_rec && cl->rec.kernel[0])
                xattn__json_str(f, cl->rec.kernel);
            else
                fputs("null", f);
            if (cl->has_rec)
                fprintf(f, ", \"matrix_units\": %s, \"work_counted\": %s",
                        cl->rec.matrix_units ? "true" : "false",
                        cl->rec.work_counted ? "true" : "false");
            else
                fputs(", \"matrix_units\": null, \"work_counted\": null", f);
        } else {
            fprintf(f, ", \"kernel\": null, \"matrix_units\": null, \"work_counted\": null");
            fprintf(f,
                    ", \"reps\": 0, \"converged\": false, \"median_ms\": null, \"min_ms\": null, "
                    "\"p90_ms\": null, \"max_ms\": null, \"mean_ms\": null, \"mad_ms\": null, "
                    "\"spread\": null, \"elapsed_s\": null, \"build_ms\": null, "
                    "\"flops_dense\": null, \"flops_useful\": null, \"flops_executed\": null, "
                    "\"bytes_min\": null, \"bytes_actual\": null, \"padding_waste\": null, "
                    "\"gflops_useful\": null, \"gflops_executed\": null, \"gbytes_per_s\": "
                    "null, \"pct_fma_ceiling\": null, \"pct_bw_ceiling\": null, "
                    "\"intensity\": null, \"workspace_bytes\": null, \"peak_bytes\": null, "
                    "\"pct_fma_per_thread\": null, \"gbytes_min_per_s\": null, "
                    "\"pct_bw_min_ceiling\": null, \"phases\": null");
        }
        fprintf(f, ", \"threads\": ");
        if (r->threads > 0)
            fprintf(f, "%d", r->threads);
        else
            fputs("null", f);
        /* shares of a ceiling above 100%: errors of the accounting model, never real */
        char errs[160];
        int ne = xtool_bench_model_errors(rep, r, errs, sizeof errs);
        model_errors += ne > 0;
        fprintf(f, ", \"model_errors\": [");
        for (char *p = errs, *e; ne && p && *p; p = e ? e + 1 : NULL) {
            e = strchr(p, ';');
            fprintf(f, "%s\"%.*s\"", p == errs ? "" : ", ", e ? (int)(e - p) : (int)strlen(p), p);
        }
        fputs("]", f);
        fprintf(f, ", \"check\": \"%s\", \"check_scope\": \"%s\", \"check_note\": ",
                xtool_bench_check_name(r), xtool__scope_name(r));
        if (r->check_note[0])
            xattn__json_str(f, r->check_note);
        else
            fputs("null", f);
        if (r->err.checked) {
            xtool_json_field(f, "rel_l2", r->err.rel_l2);
            xtool_json_field(f, "max_abs", r->err.max_abs);
            xtool_json_field(f, "rel_l2_bound", r->err.bound);
        } else {
            fprintf(f, ", \"rel_l2\": null, \"max_abs\": null, \"rel_l2_bound\": null");
        }
        fputs("}", f);
    }
    fprintf(f, "\n  ],\n  \"scaling\": [");
    for (int i = 0; i < rep->n_scaling; i++) {
        const xtool_bench_scaling *sc = &rep->scaling[i];
        const xtool_bench_device *d = &rep->devices[sc->device];
        fprintf(f, "%s\n    {\"backend\": \"%s\", \"device\": %d, \"algo\": \"%s\", \"case\": ",
                i ? "," : "", xattn_backend_name(d->t.backend), d->t.device,
                xattn_algo_name(sc->algo));
        xattn__json_str(f, rep->cases[sc->case_idx].key);
        fprintf(f, ", \"threads_base\": %d, \"threads\": %d, \"base_ms\": ", sc->threads_base,
                sc->threads);
        xattn__json_num(f, sc->base_ms);
        xtool_json_field(f, "ms", sc->ms);
        xtool__field_or_null(f, "speedup", sc->speedup);
        xtool__field_or_null(f, "efficiency", sc->efficiency);
        xtool__field_or_null(f, "pct_fma_per_thread_base", sc->pct_fma_per_thread_base);
        xtool__field_or_null(f, "pct_fma_per_thread", sc->pct_fma_per_thread);
        int b0 = xtool_stats_over_ceiling(sc->pct_fma_per_thread_base),
            b1 = xtool_stats_over_ceiling(sc->pct_fma_per_thread);
        fprintf(f, ", \"model_errors\": [%s%s%s]}", b0 ? "\"pct_fma_per_thread_base\"" : "",
                b0 && b1 ? ", " : "", b1 ? "\"pct_fma_per_thread\"" : "");
    }
    fprintf(f,
            "%s],\n  \"summary\": {\"cells\": %d, \"failed\": %d, \"unsupported\": %d, "
            "\"skipped\": %d, \"unchecked\": %d, \"model_errors\": %d, \"wall_s\": ",
            rep->n_scaling ? "\n  " : "", rep->n_results, failed, unsupported, skipped, unchecked,
            model_errors);
    xattn__json_num(f, rep->wall_s);
    fputs("}", f);
    if (rep->cases_file) { /* --cases: the model's cases, counts and totals */
        fprintf(f, ",\n  \"cases_file\": ");
        xtool_cases_summary_json(rep, f);
    }
    fputs("\n}\n", f);
    return xtool__close(f, path, err, errlen);
}

/* `,v`, the field empty where v is undefined (negative) or not known. */
static void xtool__csv_num(FILE *f, double v, int defined)
{
    fputc(',', f);
    if (defined && v >= 0)
        xattn__csv_num(f, v);
}

int xtool_bench_write_csv(const xtool_bench_report *rep, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    fputs("backend,device,device_name,algo,algo_chosen,case,family,batch,heads,kv_heads,sq,sk,"
          "head_dim,head_dim_v,dtype,kv_dtype,layout,causal,align,window_left,window_right,"
          "softcap,alibi,bias,lse,padded,varlen,status,error,reps,converged,median_ms,min_ms,"
          "p90_ms,max_ms,mad_ms,spread,gflops_useful,gflops_executed,gbytes_per_s,"
          "pct_fma_ceiling,pct_bw_ceiling,model_errors,kernel,matrix_units,work_counted,"
          "intensity,flops_useful,bytes_actual,padding_waste,"
          "workspace_bytes,peak_bytes,check,check_scope,rel_l2,max_abs,threads,"
          "pct_fma_per_thread,gbytes_min_per_s,pct_bw_min_ceiling\n",
          f);
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        const xtool_bench_device *d = &rep->devices[r->device];
        const xtool_bench_case *bc = &rep->cases[r->case_idx];
        const xtool_case *c = &bc->c;
        const xtool_cell *cl = &r->cell;
        int has = cl->t.n > 0;
        fprintf(f, "%s,%d,", xattn_backend_name(d->t.backend), d->t.device);
        xattn__csv_str(f, d->t.info.name);
        fprintf(f, ",%s,%s,", xattn_algo_name(r->algo),
                has ? xattn_algo_name(cl->info.algo_chosen) : "");
        xattn__csv_str(f, bc->key);
        fputs(",", f);
        xattn__csv_str(f, bc->family);
        fprintf(
            f, ",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%s,%s,%d,%s,%lld,%lld,%g,%d,%d,%d,%d,%d,%s,",
            (long long)c->batch, (long long)c->heads, (long long)c->kv_heads, (long long)c->sq,
            (long long)c->sk, (long long)c->head_dim, (long long)c->head_dim_v,
            xattn_dtype_name(c->dtype), xattn_dtype_name(c->kv_dtype), c->bhsd ? "bhsd" : "bshd",
            c->causal, c->align == XATTN_ALIGN_TOP_LEFT ? "top_left" : "bottom_right",
            (long long)c->window_left, (long long)c->window_right, (double)c->softcap, c->alibi,
            c->bias, c->lse, c->seqlens_k && !c->varlen, c->varlen,
            xtool_cell_status_name(r->status));
        xattn__csv_str(f, r->error);
        fprintf(f, ",%d,%d", cl->t.n, cl->converged);
        xtool__csv_num(f, cl->t.median, has);
        xtool__csv_num(f, cl->t.min, has);
        xtool__csv_num(f, cl->t.p90, has);
        xtool__csv_num(f, cl->t.max, has);
        xtool__csv_num(f, cl->t.mad, has);
        xtool__csv_num(f, cl->t.spread, has);
        xtool__csv_num(f, cl->gflops_useful, has);
        xtool__csv_num(f, cl->gflops_executed, has);
        xtool__csv_num(f, cl->gbytes_per_s, has);
        xtool__csv_num(f, cl->pct_fma, has);
        xtool__csv_num(f, cl->pct_bw, has);
        char errs[160];
        xtool_bench_model_errors(rep, r, errs, sizeof errs);
        fprintf(f, ",%s,", errs);
        xattn__csv_str(f, has && cl->has_rec ? cl->rec.kernel : "");
        if (has && cl->has_rec)
            fprintf(f, ",%d,%d", cl->rec.matrix_units, cl->rec.work_counted);
        else
            fputs(",,", f);
        xtool__csv_num(f, cl->intensity, has);
        xtool__csv_num(f, cl->rec.flops_useful, has && cl->has_rec);
        xtool__csv_num(f, cl->rec.bytes_actual, has && cl->has_rec);
        xtool__csv_num(f, cl->rec.padding_waste, has && cl->has_rec);
        xtool__csv_num(f, (double)cl->info.workspace_bytes, has);
        xtool__csv_num(f, (double)cl->peak_bytes, has);
        fprintf(f, ",%s,%s", xtool_bench_check_name(r), xtool__scope_name(r));
        xtool__csv_num(f, r->err.rel_l2, r->err.checked);
        xtool__csv_num(f, r->err.max_abs, r->err.checked);
        if (r->threads > 0)
            fprintf(f, ",%d", r->threads);
        else
            fputs(",", f);
        xtool__csv_num(f, r->pct_fma_per_thread, has);
        xtool__csv_num(f, xtool__gbps_min(cl), has);
        xtool__csv_num(f, xtool__pct_bw_min(cl), has);
        fputs("\n", f);
    }
    return xtool__close(f, path, err, errlen);
}

int xtool_bench_write_chart(const xtool_bench_report *rep, const char *path, char *err,
                            size_t errlen)
{
    int n = rep->n_results;
    xtool_chart_point *pts = calloc((size_t)(n > 0 ? n : 1), sizeof *pts);
    char(*names)[64] = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
    if (!pts || !names) {
        free(pts);
        free(names);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int m = 0;
    int gflops = rep->o->metric == XTOOL_METRIC_GFLOPS;
    for (int i = 0; i < n; i++) {
        const xtool_bench_result *r = &rep->results[i];
        if (r->cell.t.n == 0 || r->status == XTOOL_CELL_SKIPPED ||
            r->status == XTOOL_CELL_UNSUPPORTED)
            continue;
        const xtool_bench_device *d = &rep->devices[r->device];
        /* A device that ran several thread counts: one series per count. */
        int several = 0;
        for (int j = 0; j < n && !several && r->threads > 0; j++)
            several = rep->results[j].device == r->device && rep->results[j].threads > 0 &&
                      rep->results[j].threads != r->threads;
        char thr[16] = "";
        if (several)
            snprintf(thr, sizeof thr, " t%d", r->threads);
        snprintf(names[m], sizeof names[m], "%s:%d %s%s", xattn_backend_name(d->t.backend),
                 d->t.device, xattn_algo_name(r->algo), thr);
        pts[m].panel = rep->cases[r->case_idx].family;
        pts[m].series = names[m];
        pts[m].x = (double)rep->cases[r->case_idx].c.sk;
        pts[m].y = gflops ? r->cell.gflops_useful : r->cell.t.median;
        m++;
    }
    char title[160], sub[512];
    snprintf(title, sizeof title, "xattn bench%s%s: %s", rep->preset ? " --preset " : "",
             rep->preset ? rep->preset : "", gflops ? "useful GFLOP/s" : "median time per call");
    size_t k = (size_t)snprintf(sub, sizeof sub, "%s, xattn %s, %s;", rep->created,
                                xattn_version_string(), rep->host);
    for (int i = 0; i < rep->n_devices && k < sizeof sub; i++)
        k += (size_t)snprintf(sub + k, sizeof sub - k, " %s:%d %s%s",
                              xattn_backend_name(rep->devices[i].t.backend),
                              rep->devices[i].t.device, rep->devices[i].t.info.name,
                              i + 1 < rep->n_devices ? "," : "");
    int rc =
        xtool_svg_line_chart(path, title, sub, "key length Sk (tokens)",
                             gflops ? "useful GFLOP/s" : "median ms", !gflops, pts, m, err, errlen);
    free(pts);
    free(names);
    return rc;
}
