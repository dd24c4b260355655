/*
 * xattn bench, the files in --out DIR: results.json (schema xattn.bench/1,
 * docs/tool.md), results.csv, chart.svg, and trace.json merged from the
 * contexts' traces. JSON and CSV go through the library's writer
 * (xattn_writer.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"
#include "xtool_cases_file.h"
#include "xtool_json.h"
#include "xtool_svg.h"

static const char *xtool__device_type_name(int t)
{
    switch (t) {
    case XATTN_DEVICE_TYPE_CPU: return "cpu";
    case XATTN_DEVICE_TYPE_GPU: return "gpu";
    case XATTN_DEVICE_TYPE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static const char *xtool__bool(int v)
{
    return v ? "true" : "false";
}

/* ---- results.json --------------------------------------------------------------- */

/* Everything before "devices": the file, the run, the machine, the settings. */
static void xtool__json_header(FILE *f, const xtool_bench_report *rep)
{
    const xtool_cli_opts *o = rep->o;
    xtool_json_provenance(f, XTOOL_BENCH_SCHEMA, rep->created, rep->command_line, rep->host,
                          rep->os);
    fprintf(f, ",\n  \"preset\": ");
    xtool_json_str_or_null(f, rep->preset);
    fprintf(f, ",\n  \"length_scale\": ");
    xattn__json_num(f, rep->len_scale);
    fprintf(f, ",\n  \"load\": ");
    if (isfinite(rep->load_start[0]) || isfinite(rep->load_end[0]))
        xtool_json_load(f, rep->cpus, rep->load_start, rep->load_end);
    else
        fputs("null", f);
    fprintf(f,
            ",\n  \"settings\": {\"warmup\": %d, \"min_reps\": %d, \"max_reps\": %d, "
            "\"max_spread\": ",
            o->warmup, o->min_reps, o->reps);
    xattn__json_num(f, o->max_spread);
    xtool_json_field(f, "cell_budget_s", o->cell_budget);
    fprintf(f, ", \"passes\": %d, \"passes_done\": %d, \"budget_s\": ", o->passes,
            rep->passes_done);
    if (o->budget > 0)
        xattn__json_num(f, o->budget);
    else
        fputs("null", f);
    fprintf(f, ", \"budget_hit\": %s", xtool__bool(rep->budget_hit));
    fprintf(f, ", \"check\": %s, \"check_limit_flops\": ", xtool__bool(o->check));
    xattn__json_num(f, o->check_limit);
    fprintf(f, ", \"threads\": %d, \"thread_list\": [", o->threads);
    for (int i = 0; i < o->thread_list.n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)o->thread_list.v[i]);
    fprintf(f, "], \"cpu_simd\": \"%s\", \"seed\": %llu},\n", xtool_cli_simd_name(o->cpu_simd),
            (unsigned long long)o->seed);
}

static void xtool__json_device(FILE *f, const xtool_bench_device *d)
{
    const xattn_device_info *in = &d->t.info;
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"name\": ", xattn_backend_name(d->t.backend),
            d->t.device);
    xattn__json_str(f, in->name);
    const struct {
        const char *key, *value;
    } text[] = {{"vendor", in->vendor},
                {"driver_version", in->driver_version},
                {"platform", in->platform},
                {"description", in->description}};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        xattn__json_key(f, text[i].key);
        xattn__json_str(f, text[i].value);
    }
    fprintf(f, ", \"device_type\": \"%s\", \"compute_units\": %d, \"global_mem_bytes\": %llu, ",
            xtool__device_type_name(in->device_type), in->compute_units,
            (unsigned long long)in->global_mem_bytes);
    fprintf(f, "\"cpu_features\": ");
    xattn__json_str(f, in->cpu_features);
    fprintf(f, ", \"compute_capability\": %d, \"opened\": %s, \"error\": ", in->compute_capability,
            xtool__bool(d->opened));
    xtool_json_str_or_null(f, d->error);
    fprintf(f, ", \"ceilings\": ");
    if (d->has_ceilings)
        xattn__json_ceilings(f, &d->ceilings);
    else
        fputs("null", f);
    fputs("}", f);
}

/* The cell's identity and case: where it ran, what it ran, how it ended. */
static void xtool__json_result_case(FILE *f, const xtool_bench_report *rep,
                                    const xtool_bench_result *r, int timed)
{
    const xtool_bench_device *d = &rep->devices[r->device];
    const xtool_bench_case *bc = &rep->cases[r->case_idx];
    const xtool_case *c = &bc->c;
    const xtool_cell *cl = &r->cell;
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"device_name\": ",
            xattn_backend_name(d->t.backend), d->t.device);
    xattn__json_str(f, d->t.info.name);
    fprintf(f, ", \"algo\": \"%s\", \"algo_chosen\": ", xattn_algo_name(r->algo));
    xtool_json_str_or_null(f, timed ? xattn_algo_name(cl->info.algo_chosen) : NULL);
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
            xattn_dtype_name(c->dtype), xattn_dtype_name(c->kv_dtype), c->bhsd ? "bhsd" : "bshd",
            xtool__bool(c->causal), c->align == XATTN_ALIGN_TOP_LEFT ? "top_left" : "bottom_right",
            (long long)c->window_left, (long long)c->window_right);
    xattn__json_num(f, c->softcap);
    fprintf(f,
            ", \"alibi\": %s, \"bias\": %s, \"lse\": %s, \"padded\": %s, \"varlen\": %s, "
            "\"num_splits\": %d, \"status\": \"%s\", \"error\": ",
            xtool__bool(c->alibi), xtool__bool(c->bias), xtool__bool(c->lse),
            xtool__bool(c->seqlens_k && !c->varlen), xtool__bool(c->varlen),
            timed ? cl->info.num_splits : c->num_splits, xtool_cell_status_name(r->status));
    xtool_json_str_or_null(f, r->error);
}

/* A list of n numbers: [a, b, ...]. */
static void xtool__json_nums(FILE *f, const double *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        xattn__json_num(f, v[i]);
    }
    fputc(']', f);
}

/* A stats dict (docs/tool.md): n, median, min, max, p90, mad, spread, ci_low,
 * ci_high, ci_level, converged, samples (NULL: an empty list). */
static void xtool__json_stats(FILE *f, const xtool_stats *t, int converged, const double *samples)
{
    fprintf(f, "{\"n\": %d", t->n);
    const struct {
        const char *key;
        double v;
    } nums[] = {{"median", t->median}, {"min", t->min},         {"max", t->max},
                {"p90", t->p90},       {"mad", t->mad},         {"spread", t->spread},
                {"ci_low", t->ci_low}, {"ci_high", t->ci_high}, {"ci_level", t->ci_level}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        xtool_json_field(f, nums[i].key, nums[i].v);
    fprintf(f, ", \"converged\": %s, \"samples\": ", xtool__bool(converged));
    xtool__json_nums(f, samples, samples ? t->n : 0);
    fputc('}', f);
}

/* The timed calls' statistics, the record's work and the figures derived
 * from them, the last call's phases and kernel. */
static void xtool__json_result_timing(FILE *f, const xtool_cli_opts *o, const xtool_bench_result *r)
{
    const xtool_cell *cl = &r->cell;
    const xattn_record *rc = &cl->rec;
    fprintf(f, ", \"reps\": %d, \"converged\": %s, \"passes\": %d", cl->t.n,
            xtool__bool(cl->converged), r->passes);
    xtool_json_field(f, "ci_low", cl->t.ci_low);
    xtool_json_field(f, "ci_high", cl->t.ci_high);
    xtool_json_field(f, "ci_level", cl->t.ci_level);
    fputs(", \"clock\": \"device\", \"samples\": ", f);
    xtool__json_nums(f, r->samples, r->samples ? cl->t.n : 0);
    fputs(", \"cpu_time\": ", f);
    if (cl->cpu.n > 0)
        xtool__json_stats(
            f, &cl->cpu, cl->cpu.n >= o->min_reps && xtool_stats_ci_narrow(&cl->cpu, o->max_spread),
            r->cpu_samples);
    else
        fputs("null", f);
    const struct {
        const char *key;
        double v;
    } nums[] = {{"median_ms", cl->t.median},
                {"min_ms", cl->t.min},
                {"p90_ms", cl->t.p90},
                {"max_ms", cl->t.max},
                {"mean_ms", cl->t.mean},
                {"mad_ms", cl->t.mad},
                {"spread", cl->t.spread},
                {"elapsed_s", cl->elapsed_s},
                {"build_ms", cl->build_ms},
                {"flops_dense", cl->has_rec ? rc->flops_dense : 0},
                {"flops_useful", cl->has_rec ? rc->flops_useful : 0},
                {"flops_executed", cl->has_rec ? rc->flops_executed : 0},
                {"bytes_min", cl->has_rec ? rc->bytes_min : 0},
                {"bytes_actual", cl->has_rec ? rc->bytes_actual : 0}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        xtool_json_field(f, nums[i].key, nums[i].v);
    xtool_json_field_or_null(f, "padding_waste", cl->has_rec ? rc->padding_waste : -1);
    xtool_json_field(f, "gflops_useful", cl->gflops_useful);
    xtool_json_field(f, "gflops_executed", cl->gflops_executed);
    xtool_json_field(f, "gbytes_per_s", cl->gbytes_per_s);
    xtool_json_field_or_null(f, "pct_fma_ceiling", cl->pct_fma);
    xtool_json_field_or_null(f, "pct_bw_ceiling", cl->pct_bw);
    xtool_json_field(f, "intensity", cl->intensity);
    fprintf(f, ", \"workspace_bytes\": %llu, \"peak_bytes\": %llu",
            (unsigned long long)cl->info.workspace_bytes, (unsigned long long)cl->peak_bytes);
    xtool_json_field_or_null(f, "pct_fma_per_thread", r->pct_fma_per_thread);
    xtool_json_field_or_null(f, "gbytes_min_per_s", xtool_bench_gbps_min(cl));
    xtool_json_field_or_null(f, "pct_bw_min_ceiling", xtool_bench_pct_bw_min(cl));
    fprintf(f, ", \"phases\": [");
    for (int k = 0; k < cl->info.num_phases && k < 4; k++) {
        fprintf(f, "%s{\"name\": ", k ? ", " : "");
        xattn__json_str(f, cl->info.phase_names[k]);
        xtool_json_field(f, "ms", cl->info.phase_ms[k]);
        fputs("}", f);
    }
    fputs("], \"kernel\": ", f);
    xtool_json_str_or_null(f, cl->has_rec ? rc->kernel : NULL);
    if (cl->has_rec)
        fprintf(f, ", \"matrix_units\": %s, \"work_counted\": %s", xtool__bool(rc->matrix_units),
                xtool__bool(rc->work_counted));
    else
        fputs(", \"matrix_units\": null, \"work_counted\": null", f);
}

/* A cell without timed calls: every figure null. */
static void xtool__json_result_untimed(FILE *f)
{
    fprintf(f, ", \"kernel\": null, \"matrix_units\": null, \"work_counted\": null");
    fprintf(f, ", \"reps\": 0, \"converged\": false, \"passes\": 0, \"ci_low\": null, "
               "\"ci_high\": null, \"ci_level\": null, \"clock\": \"device\", \"samples\": [], "
               "\"cpu_time\": null");
    fprintf(f, ", \"median_ms\": null, \"min_ms\": null, "
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

/* Threads, the shares of a ceiling above 100% (errors of the accounting
 * model, never real figures), and the check. Returns 1 when a share is
 * flagged. */
static int xtool__json_result_check(FILE *f, const xtool_bench_report *rep,
                                    const xtool_bench_result *r)
{
    fprintf(f, ", \"threads\": ");
    if (r->threads > 0)
        fprintf(f, "%d", r->threads);
    else
        fputs("null", f);
    char errs[160];
    int ne = xtool_bench_model_errors(rep, r, errs, sizeof errs);
    fprintf(f, ", \"model_errors\": [");
    for (char *p = errs, *e; ne && p && *p; p = e ? e + 1 : NULL) {
        e = strchr(p, ';');
        fprintf(f, "%s\"%.*s\"", p == errs ? "" : ", ", e ? (int)(e - p) : (int)strlen(p), p);
    }
    fprintf(f, "], \"check\": \"%s\", \"check_scope\": \"%s\", \"check_note\": ",
            xtool_bench_check_name(r), xtool_bench_scope_name(r));
    xtool_json_str_or_null(f, r->check_note);
    if (r->err.checked) {
        xtool_json_field(f, "rel_l2", r->err.rel_l2);
        xtool_json_field(f, "max_abs", r->err.max_abs);
        xtool_json_field(f, "rel_l2_bound", r->err.bound);
    } else {
        fprintf(f, ", \"rel_l2\": null, \"max_abs\": null, \"rel_l2_bound\": null");
    }
    fputs("}", f);
    return ne > 0;
}

static void xtool__json_scaling(FILE *f, const xtool_bench_report *rep)
{
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
        xtool_json_field_or_null(f, "speedup", sc->speedup);
        xtool_json_field_or_null(f, "efficiency", sc->efficiency);
        xtool_json_field_or_null(f, "pct_fma_per_thread_base", sc->pct_fma_per_thread_base);
        xtool_json_field_or_null(f, "pct_fma_per_thread", sc->pct_fma_per_thread);
        int b0 = xtool_stats_over_ceiling(sc->pct_fma_per_thread_base),
            b1 = xtool_stats_over_ceiling(sc->pct_fma_per_thread);
        fprintf(f, ", \"model_errors\": [%s%s%s]}", b0 ? "\"pct_fma_per_thread_base\"" : "",
                b0 && b1 ? ", " : "", b1 ? "\"pct_fma_per_thread\"" : "");
    }
    fprintf(f, "%s]", rep->n_scaling ? "\n  " : "");
}

int xtool_bench_write_json(const xtool_bench_report *rep, const char *path, char *err,
                           size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    xtool__json_header(f, rep);
    fprintf(f, "  \"devices\": [");
    for (int i = 0; i < rep->n_devices; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        xtool__json_device(f, &rep->devices[i]);
    }
    fprintf(f, "\n  ],\n  \"results\": [");
    int failed = 0, unsupported = 0, skipped = 0, unchecked = 0, model_errors = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        int timed =
            (r->status == XTOOL_CELL_OK || r->status == XTOOL_CELL_FAILED) && r->cell.t.n > 0;
        failed += r->status == XTOOL_CELL_FAILED;
        unsupported += r->status == XTOOL_CELL_UNSUPPORTED;
        skipped += r->status == XTOOL_CELL_SKIPPED;
        unchecked += r->status == XTOOL_CELL_OK && r->check_on && r->ref_mode == XTOOL_REF_SKIPPED;
        fputs(i ? ",\n    " : "\n    ", f);
        xtool__json_result_case(f, rep, r, timed);
        if (timed)
            xtool__json_result_timing(f, rep->o, r);
        else
            xtool__json_result_untimed(f);
        model_errors += xtool__json_result_check(f, rep, r);
    }
    xtool__json_scaling(f, rep);
    fprintf(f,
            ",\n  \"summary\": {\"cells\": %d, \"failed\": %d, \"unsupported\": %d, "
            "\"skipped\": %d, \"unchecked\": %d, \"model_errors\": %d, \"wall_s\": ",
            rep->n_results, failed, unsupported, skipped, unchecked, model_errors);
    xattn__json_num(f, rep->wall_s);
    fputs("}", f);
    if (rep->cases_file) { /* --cases: the model's cases, counts and totals */
        fprintf(f, ",\n  \"cases_file\": ");
        xtool_cases_summary_json(rep, f);
    }
    fputs("\n}\n", f);
    return xtool_file_close(f, path, err, errlen);
}

/* ---- results.csv, chart.svg --------------------------------------------------------- */

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
          "pct_fma_per_thread,gbytes_min_per_s,pct_bw_min_ceiling,ci_low_ms,ci_high_ms,ci_level,"
          "passes,cpu_median_ms,cpu_ci_low_ms,cpu_ci_high_ms\n",
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
        fprintf(f, ",%s,%s", xtool_bench_check_name(r), xtool_bench_scope_name(r));
        xtool__csv_num(f, r->err.rel_l2, r->err.checked);
        xtool__csv_num(f, r->err.max_abs, r->err.checked);
        if (r->threads > 0)
            fprintf(f, ",%d", r->threads);
        else
            fputs(",", f);
        xtool__csv_num(f, r->pct_fma_per_thread, has);
        xtool__csv_num(f, xtool_bench_gbps_min(cl), has);
        xtool__csv_num(f, xtool_bench_pct_bw_min(cl), has);
        xtool__csv_num(f, cl->t.ci_low, has);
        xtool__csv_num(f, cl->t.ci_high, has);
        xtool__csv_num(f, cl->t.ci_level, has);
        fprintf(f, ",%d", has ? r->passes : 0);
        xtool__csv_num(f, cl->cpu.median, has && cl->cpu.n > 0);
        xtool__csv_num(f, cl->cpu.ci_low, has && cl->cpu.n > 0);
        xtool__csv_num(f, cl->cpu.ci_high, has && cl->cpu.n > 0);
        fputs("\n", f);
    }
    return xtool_file_close(f, path, err, errlen);
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
    xtool_line_chart chart = {
        title, sub, "key length Sk (tokens)", gflops ? "useful GFLOP/s" : "median ms", !gflops,
        pts,   m};
    int rc = xtool_svg_line_chart(path, &chart, err, errlen);
    free(pts);
    free(names);
    return rc;
}

/* ---- trace.json ----------------------------------------------------------------------- */

/* Appends the events of one context's trace to f, each shifted to the bench's
 * timeline (a context's trace starts at its creation; metadata events, "ph":
 * "M", have no time). *first: no event written yet. Returns 0 or -1. */
static int xtool__trace_append(FILE *f, const xtool_bench_trace *part, int *first, char *err,
                               size_t errlen)
{
    char rerr[256] = "";
    char *text = xtool_read_text(part->path, (size_t)1 << 30, rerr, sizeof rerr);
    xtool_json *doc = text ? xtool_json_parse(text, strlen(text), rerr, sizeof rerr) : NULL;
    free(text);
    const xtool_json *ev = xtool_json_get(doc, "traceEvents");
    if (!ev || ev->type != XTOOL_JSON_ARRAY) {
        snprintf(err, errlen, "cannot read the trace %.700s: %.200s", part->path,
                 doc ? "no traceEvents array" : rerr);
        xtool_json_free(doc);
        return -1;
    }
    for (size_t k = 0; k < ev->n; k++) {
        const xtool_json *e = &ev->items[k];
        fputs(*first ? "\n" : ",\n", f);
        *first = 0;
        if (e->type != XTOOL_JSON_OBJECT || !strcmp(xtool_json_str_of(e, "ph"), "M")) {
            xtool_json_write(f, e);
            continue;
        }
        fputc('{', f);
        for (size_t m = 0; m < e->n; m++) {
            const xtool_json *v = &e->items[m];
            fputs(m ? ", " : "", f);
            xattn__json_str(f, e->keys[m]);
            fputs(": ", f);
            if (!strcmp(e->keys[m], "ts") && v->type == XTOOL_JSON_NUMBER)
                xattn__json_num(f, v->number + part->offset_us);
            else
                xtool_json_write(f, v);
        }
        fputc('}', f);
    }
    xtool_json_free(doc);
    return 0;
}

/* Merges the per-context traces into one file. Returns 0 (the parts removed)
 * or -1 with err set (the parts kept). */
int xtool_bench_merge_traces(const xtool_bench_trace *parts, int n, const char *out, char *err,
                             size_t errlen)
{
    FILE *f = fopen(out, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%.900s': %s", out, strerror(errno));
        return -1;
    }
    fputs("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"schema\": \"xattn.trace/1\", "
          "\"merged_by\": \"xattn bench\"}, \"traceEvents\": [",
          f);
    int first = 1, rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = xtool__trace_append(f, &parts[i], &first, err, errlen);
    fputs("\n]}\n", f);
    char cerr[1024];
    if (xtool_file_close(f, out, cerr, sizeof cerr)) {
        if (!rc)
            snprintf(err, errlen, "%s", cerr);
        rc = -1;
    }
    if (rc) {
        remove(out);
        return -1;
    }
    for (int i = 0; i < n; i++)
        remove(parts[i].path);
    return 0;
}
