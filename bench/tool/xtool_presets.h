/* Bench presets: the default preset and real models' attention shapes. */
#ifndef XTOOL_PRESETS_H
#define XTOOL_PRESETS_H

#include <stddef.h>
#include <stdio.h>

#include "xtool_case.h"
#include "xtool_cli.h"

#define XTOOL_BENCH_MAX_THREADS 8 /* thread counts a preset's family may list */

typedef struct xtool_bench_case {
    xtool_case c;
    char family[256]; /* the chart panel: cases that differ only in their lengths */
    char key[320];    /* xtool_case_describe */
    int32_t *lq, *lk; /* owned per-sequence lengths (padded/packed batches) or NULL */
    /* What the preset runs this family with; the command line's --algo and
     * --threads override them. 0 = the run's (--algo, or naive,flash,splitkv;
     * --threads, or all). Thread counts apply to the CPU backend only. */
    int n_algos;
    xattn_algo algos[XATTN_ALGO_COUNT];
    int n_threads;
    int threads[XTOOL_BENCH_MAX_THREADS]; /* 0 = all */
} xtool_bench_case;

/* Settings a preset brings for the whole run (the command line wins). */
typedef struct xtool_preset_settings {
    int model_sized;      /* real-model lengths: --scale defaults to 1/8 without a GPU */
    double check_limit;   /* the reference's --check-limit; 0 = the tool's default */
    int measure_ceilings; /* measure a device's ceilings when not cached (% of ceiling is
                           * the point of the preset) */
    int cpu_only;         /* runs on the CPU backend unless --backend says otherwise */
} xtool_preset_settings;

/* Lists the presets (name, what they run, sizes) to f. */
void xtool_presets_list(FILE *f);
/* 1 when a preset of that name exists. */
int xtool_preset_exists(const char *name);
/* 1 when the preset's lengths are real-model sizes (so that --scale applies by default). */
int xtool_preset_model_sized(const char *name);
/* The preset's run-wide settings (zeros for an unknown name). */
void xtool_preset_get_settings(const char *name, xtool_preset_settings *out);

/*
 * The cases of a bench run: the preset's (NULL = "default") with the
 * command line's overrides and sweep axes, or, when the command line gives
 * case flags and no preset, the product of its lists. `len_scale` multiplies
 * the preset's lengths (batch for bert-base-padded and vit-b16). Appends to
 * out (cap entries) and returns the count, or -1 with err set (exit 2).
 */
int xtool_bench_cases(const xtool_cli_opts *o, const char *preset, double len_scale,
                      xtool_bench_case *out, int cap, char *err, size_t errlen);
void xtool_bench_cases_free(xtool_bench_case *cases, int n);

#endif
