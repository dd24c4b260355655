/*
 * xattn bench, the plan: the command line (and a preset's run-wide settings)
 * become the devices, the cases and the cells to run, and the lines that say
 * so before the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"

static int xtool__any_gpu(const xtool_target *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i].info.device_type == XATTN_DEVICE_TYPE_GPU ||
            t[i].info.device_type == XATTN_DEVICE_TYPE_ACCELERATOR)
            return 1;
    return 0;
}

int xtool_bench_case_algos(const xtool_cli_opts *o, const xtool_bench_case *bc, xattn_algo *out)
{
    int n = 0;
    if (o->n_algos)
        for (int i = 0; i < o->n_algos; i++)
            out[n++] = o->algos[i];
    else if (bc->n_algos)
        for (int i = 0; i < bc->n_algos; i++)
            out[n++] = bc->algos[i];
    else {
        out[n++] = XATTN_ALGO_NAIVE;
        out[n++] = XATTN_ALGO_FLASH;
        out[n++] = XATTN_ALGO_SPLITKV;
    }
    return n;
}

int xtool_bench_case_threads(const xtool_cli_opts *o, const xtool_bench_case *bc,
                             const xtool_target *t, int *out)
{
    if (t->backend != XATTN_BACKEND_CPU) {
        out[0] = 0;
        return 1;
    }
    int asked[XTOOL_CLI_MAX_LIST], na = 0;
    if (o->thread_list.n)
        for (int i = 0; i < o->thread_list.n; i++)
            asked[na++] = (int)o->thread_list.v[i];
    else if (bc->n_threads)
        for (int i = 0; i < bc->n_threads && i < XTOOL_BENCH_MAX_THREADS; i++)
            asked[na++] = bc->threads[i];
    else
        asked[na++] = o->threads;
    int units = t->info.compute_units > 0 ? t->info.compute_units : 1;
    int n = 0;
    for (int i = 0; i < na; i++) {
        int v = asked[i] > 0 ? asked[i] : units, dup = 0;
        for (int j = 0; j < n; j++)
            dup |= out[j] == v;
        if (!dup)
            out[n++] = v;
    }
    return n;
}

/* The preset to run (NULL for a sweep or a cases file) and the command line
 * with the preset's run-wide settings where the command line does not set
 * them. Returns 0, or 2 with the message printed. */
static int xtool__plan_preset(const xtool_cli_opts *o, xtool_bench_plan *p)
{
    const char *preset = o->preset;
    int custom = (o->given & XTOOL_GIVEN_CASE_MASK) != 0;
    if (!preset && !custom && !o->cases_path)
        preset = "default";
    if (preset && !xtool_preset_exists(preset)) {
        fprintf(stderr, "%s: bench: no preset '%s'\n", xtool_prog, preset);
        xtool_presets_list(stderr);
        return XTOOL_EXIT_USAGE;
    }
    if (!preset && (o->given & XTOOL_GIVEN_LEN_SCALE)) {
        fprintf(stderr, "%s: bench: --scale scales a preset's lengths; give --preset NAME too\n",
                xtool_prog);
        return XTOOL_EXIT_USAGE;
    }
    p->preset = preset;
    p->o = *o;
    xtool_preset_settings ps;
    xtool_preset_get_settings(preset, &ps);
    if (ps.check_limit > 0 && !(o->given & XTOOL_GIVEN_CHECK_LIMIT))
        p->o.check_limit = ps.check_limit;
    if (ps.measure_ceilings)
        p->o.measure_ceilings = 1;
    if (ps.cpu_only && !(o->given & XTOOL_GIVEN_BACKEND)) {
        p->o.n_backends = 1;
        p->o.backends[0] = XATTN_BACKEND_CPU;
    }
    return 0;
}

/* The devices, and the preset's length scale that depends on them. */
static int xtool__plan_targets(xtool_bench_plan *p)
{
    char err[512];
    p->nt = xtool_targets_select(&p->o, p->targets, XTOOL_BENCH_MAX_TARGETS, stdout);
    if (p->nt == 0) {
        if (xtool_targets_bad_device(&p->o, err, sizeof err)) {
            fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
            return XTOOL_EXIT_USAGE;
        }
        fprintf(stderr, "%s: bench: no available device among the backends asked for\n",
                xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    p->scale = 1.0;
    p->scale_why = "";
    if (p->o.len_scale > 0) {
        p->scale = p->o.len_scale;
        p->scale_why = " (--scale)";
    } else if (p->preset && xtool_preset_model_sized(p->preset)) {
        int gpu = xtool__any_gpu(p->targets, p->nt);
        p->scale = gpu ? 1.0 : 0.125;
        p->scale_why = gpu ? " (a GPU is among the devices)"
                           : " (no GPU among the devices: lengths at 1/8; --scale 1 for the "
                             "model's real sizes)";
    }
    return 0;
}

/* The cases (the preset's, the sweep's or the cases file's) and the cells:
 * every device x case x its algorithms x its thread counts (CPU only). */
static int xtool__plan_cases(xtool_bench_plan *p)
{
    char err[1024] = "";
    const xtool_cli_opts *o = &p->o;
    p->cases = calloc(XTOOL_BENCH_MAX_CASES, sizeof *p->cases);
    if (!p->cases) {
        fprintf(stderr, "%s: bench: out of memory\n", xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    p->nc = o->cases_path ? xtool_cases_load(o->cases_path, o->seed, p->cases,
                                             XTOOL_BENCH_MAX_CASES, &p->cases_file, err, sizeof err)
                          : xtool_bench_cases(o, p->preset, p->scale, p->cases,
                                              XTOOL_BENCH_MAX_CASES, err, sizeof err);
    if (p->nc < 0) {
        p->nc = 0;
        fprintf(stderr, "%s: %s\n", xtool_prog, err);
        return XTOOL_EXIT_USAGE;
    }
    for (int ci = 0; ci < p->nc; ci++) {
        xattn_algo al[XATTN_ALGO_COUNT];
        int na = xtool_bench_case_algos(o, &p->cases[ci], al);
        for (int ti = 0; ti < p->nt; ti++) {
            int th[XTOOL_CLI_MAX_LIST];
            p->cells += na * xtool_bench_case_threads(o, &p->cases[ci], &p->targets[ti], th);
        }
    }
    return 0;
}

/* The output folder exists and can be written, before any cell runs. */
static int xtool__plan_out_dir(const xtool_cli_opts *o)
{
    char err[1024];
    if (xtool_mkdir(o->out_dir)) {
        fprintf(stderr, "%s: bench: --out: cannot create the folder '%s': %s\n", xtool_prog,
                o->out_dir, strerror(errno));
        return XTOOL_EXIT_USAGE;
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/%s", o->out_dir, o->ab_old ? "ab.json" : "results.json");
    if (xtool_out_probe("--out", probe, NULL, err, sizeof err)) {
        fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
        return XTOOL_EXIT_USAGE;
    }
    return 0;
}

int xtool_bench_plan_make(const xtool_cli_opts *o, int argc, char **argv, xtool_bench_plan *p)
{
    memset(p, 0, sizeof *p);
    xtool_command_line(argc, argv, p->command_line, sizeof p->command_line);
    int rc = xtool__plan_preset(o, p);
    if (!rc)
        rc = xtool__plan_targets(p);
    if (!rc)
        rc = xtool__plan_cases(p);
    if (!rc)
        rc = xtool__plan_out_dir(&p->o);
    if (rc)
        xtool_bench_plan_free(p);
    return rc;
}

void xtool_bench_plan_free(xtool_bench_plan *p)
{
    if (p->cases)
        xtool_bench_cases_free(p->cases, p->nc);
    free(p->cases);
    xtool_cases_file_free(&p->cases_file);
    p->cases = NULL;
    p->nc = 0;
}

int xtool_bench_plan_casew(const xtool_bench_plan *p)
{
    int casew = 4;
    for (int i = 0; i < p->nc; i++)
        casew = (int)strlen(p->cases[i].key) > casew ? (int)strlen(p->cases[i].key) : casew;
    return casew > 64 ? 64 : casew;
}

void xtool_bench_plan_print_scale(const xtool_bench_plan *p, FILE *f)
{
    if (p->preset && (p->scale != 1.0 || xtool_preset_model_sized(p->preset)))
        fprintf(f, "lengths  scale %g%s\n", p->scale, p->scale_why);
}

/* "3 algorithms" when every case runs as many, then the CPU thread counts
 * when more than the default. */
static void xtool__plan_axes(const xtool_bench_plan *p, char *algo_txt, size_t na, char *thr_txt,
                             size_t nt)
{
    const xtool_cli_opts *o = &p->o;
    int uniform = 1, total = 0;
    for (int ci = 0; ci < p->nc; ci++) {
        xattn_algo a0[XATTN_ALGO_COUNT], a1[XATTN_ALGO_COUNT];
        int n = xtool_bench_case_algos(o, &p->cases[ci], a1);
        total += n;
        uniform &= xtool_bench_case_algos(o, &p->cases[0], a0) == n;
    }
    int per_case = p->nc ? total / p->nc : 0;
    if (uniform)
        snprintf(algo_txt, na, "%d algorithm%s", per_case, per_case == 1 ? "" : "s");
    else
        snprintf(algo_txt, na, "their algorithms");
    thr_txt[0] = '\0';
    if (o->thread_list.n > 1) {
        size_t k = (size_t)snprintf(thr_txt, nt, ", CPU threads ");
        for (int i = 0; i < o->thread_list.n && k < nt; i++)
            k += (size_t)snprintf(thr_txt + k, nt - k, "%s%lld", i ? "," : "",
                                  (long long)o->thread_list.v[i]);
        if (k < nt)
            snprintf(thr_txt + k, nt - k, " (0 = all)");
    } else if (!o->thread_list.n) {
        for (int ci = 0; ci < p->nc && !thr_txt[0]; ci++)
            if (p->cases[ci].n_threads > 1)
                snprintf(thr_txt, nt, ", CPU thread counts per family");
    }
}

void xtool_bench_plan_print(const xtool_bench_plan *p, FILE *f)
{
    const xtool_cli_opts *o = &p->o;
    char algo_txt[48], thr_txt[160];
    xtool__plan_axes(p, algo_txt, sizeof algo_txt, thr_txt, sizeof thr_txt);
    fprintf(f, "xattn bench %s: %s%s, %d case%s x %s x %d device%s%s = %d cells\n",
            xattn_version_string(),
            p->preset       ? "preset "
            : o->cases_path ? "cases file "
                            : "a sweep from the command line",
            p->preset       ? p->preset
            : o->cases_path ? o->cases_path
                            : "",
            p->nc, p->nc == 1 ? "" : "s", algo_txt, p->nt, p->nt == 1 ? "" : "s", thr_txt,
            p->cells);
    xtool_bench_plan_print_scale(p, f);
    fprintf(f,
            "cells    warm-up %d, then %d..%d timed calls until the median's 95%% interval is "
            "within +-%g%% or %g s; reference %s\n",
            o->warmup, o->min_reps > 5 ? o->min_reps : 5, o->reps, 100.0 * o->max_spread,
            o->cell_budget,
            o->check ? "on (once per case, reused by every device and algorithm)" : "off");
    if (o->passes > 1 || o->budget > 0) {
        fprintf(f, "passes   %d, in turns over the cells of each device, samples pooled",
                o->passes);
        if (o->budget > 0)
            fprintf(f, "; no pass after the first starts once %g s are spent", o->budget);
        fputc('\n', f);
    }
    for (int ci = 0, shown = 0; ci < p->nc && shown < 8; ci++) { /* what padded69/69#b92d means */
        char legend[400];
        if (xtool_case_lengths_legend(&p->cases[ci].c, legend, sizeof legend)) {
            fprintf(f, "lengths  %s\n", legend);
            shown++;
        }
    }
    if (o->check && o->check_limit != xtool_cli_default_check_limit(XTOOL_CLI_BENCH))
        fprintf(f, "check    --check-limit %g FLOPs%s\n", o->check_limit,
                (o->given & XTOOL_GIVEN_CHECK_LIMIT) ? "" : " (the preset's)");
}
