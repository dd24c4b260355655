/*
 * xattn bench: cases (a preset, or sweeps from the command line) x algorithms
 * x devices. Each cell is measured (xtool_cell_measure) and checked against
 * the reference, which is computed once per case and reused by every device
 * and algorithm. Outputs: a table on stdout, and in --out DIR results.json,
 * results.csv, chart.svg and trace.json (the profiler's traces of every
 * context, merged).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xtool_bench.h"
#include "xtool_cases_file.h"
#include "xtool_json.h"

#define XTOOL__MAX_TARGETS 32
#define XTOOL__MAX_CASES 1024

/* ---- trace merging ------------------------------------------------------------ */

typedef struct xtool__trace_part {
    char path[4096];
    double offset_us; /* the context's time zero on the bench's timeline */
} xtool__trace_part;

/* Appends the events of one context's trace to f, each shifted to the bench's
 * timeline (a context's trace starts at its creation; metadata events, "ph":
 * "M", have no time). *first: no event written yet. Returns 0 or -1. */
static int xtool__trace_append(FILE *f, const xtool__trace_part *part, int *first, char *err,
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
static int xtool__merge_traces(const xtool__trace_part *parts, int n, const char *out, char *err,
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
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        if (!rc)
            snprintf(err, errlen, "cannot write '%.900s': %s", out, strerror(errno));
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

/* The thread-scaling block after the table (rep->scaling filled). */
static void xtool__scaling_print(const xtool_bench_report *rep, int casew)
{
    if (!rep->n_scaling)
        return;
    printf("\nthread scaling (same device, case and algorithm; speed-up = base median / median; "
           "efficiency = speed-up / thread ratio;\n%%FMA/t = %% of the FMA ceiling pro-rated to "
           "the threads used, ceiling x threads / compute units):\n");
    printf("%-9s %-8s %-*s %9s %10s %10s %8s %6s %11s %7s\n", "device", "algo", casew, "case",
           "threads", "base ms", "ms", "speed-up", "effic", "base %FMA/t", "%FMA/t");
    for (int i = 0; i < rep->n_scaling; i++) {
        const xtool_bench_scaling *sc = &rep->scaling[i];
        const xtool_bench_device *d = &rep->devices[sc->device];
        char dev[32], thr[32], p0[16], p1[16];
        xtool_target_name(d->t.backend, d->t.device, dev, sizeof dev);
        snprintf(thr, sizeof thr, "%d -> %d", sc->threads_base, sc->threads);
        xtool_fmt_pct(sc->pct_fma_per_thread_base, p0, sizeof p0);
        xtool_fmt_pct(sc->pct_fma_per_thread, p1, sizeof p1);
        printf("%-9s %-8s %-*s %9s %10.4f %10.4f %7.2fx %5.0f%% %11s %7s\n", dev,
               xattn_algo_name(sc->algo), casew, rep->cases[sc->case_idx].key, thr, sc->base_ms,
               sc->ms, sc->speedup, 100.0 * sc->efficiency, p0, p1);
    }
}

/* ---- the run ------------------------------------------------------------------- */

typedef struct xtool__ref_slot {
    int done;
    xattn_status st;
    char error[256];
    xtool_case_ref ref;
} xtool__ref_slot;

static int xtool__any_gpu(const xtool_target *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i].info.device_type == XATTN_DEVICE_TYPE_GPU ||
            t[i].info.device_type == XATTN_DEVICE_TYPE_ACCELERATOR)
            return 1;
    return 0;
}

/* % of the FMA ceiling pro-rated to the threads a CPU cell used: the ceiling
 * is measured with every compute unit, so t of n units get t/n of it (at most
 * all of it: more threads than units add no FMA units). */
/* The identity of a result cell: device, case, algorithm, CPU threads. */
static void xtool__result_init(xtool_bench_result *r, int ti, int ci, xattn_algo algo, int threads,
                               const xtool_target *t)
{
    r->device = ti;
    r->case_idx = ci;
    r->algo = algo;
    r->threads = threads;
    r->compute_units = t->info.compute_units;
    r->pct_fma_per_thread = -1;
}

static void xtool__per_thread(xtool_bench_result *r)
{
    const xtool_cell *c = &r->cell;
    r->pct_fma_per_thread = -1;
    if (r->threads <= 0 || r->compute_units <= 0 || c->fma_ceiling <= 0 || c->pct_fma < 0)
        return;
    int used = r->threads < r->compute_units ? r->threads : r->compute_units;
    r->pct_fma_per_thread =
        100.0 * c->gflops_executed / (c->fma_ceiling * (double)used / (double)r->compute_units);
}

/* The algorithms of a case: --algo, else its preset family's, else naive, flash, splitkv. */
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

/* The thread counts a case runs with on a device: --threads, else its preset
 * family's, else all; 0 resolved to the device's compute units, repeats
 * dropped. Threads are a CPU setting: any other device gets one entry, 0. */
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

int xtool_cmd_bench(const xtool_cli_opts *o, int argc, char **argv)
{
    if (o->list_presets) {
        xtool_presets_list(stdout);
        return XTOOL_EXIT_OK;
    }
    double wall0 = xtool_now_s();
    char err[1024] = "";
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

    /* A preset's run-wide settings, where the command line does not set them. */
    xtool_cli_opts eff = *o;
    xtool_preset_settings ps;
    xtool_preset_get_settings(preset, &ps);
    if (ps.check_limit > 0 && !(o->given & XTOOL_GIVEN_CHECK_LIMIT))
        eff.check_limit = ps.check_limit;
    if (ps.measure_ceilings)
        eff.measure_ceilings = 1;
    if (ps.cpu_only && !(o->given & XTOOL_GIVEN_BACKEND)) {
        eff.n_backends = 1;
        eff.backends[0] = XATTN_BACKEND_CPU;
    }
    o = &eff;

    xtool_bench_report rep;
    memset(&rep, 0, sizeof rep);
    rep.o = o;
    rep.preset = preset;
    xtool_command_line(argc, argv, rep.command_line, sizeof rep.command_line);
    xtool_utc_now(rep.created, sizeof rep.created);
    xtool_load_read(rep.load_start);
    rep.cpus = xtool_cpus_online();
    xtool_host_describe(rep.host, sizeof rep.host, rep.os, sizeof rep.os);

    xtool_target targets[XTOOL__MAX_TARGETS];
    int nt = xtool_targets_select(o, targets, XTOOL__MAX_TARGETS, stdout);
    if (nt == 0) {
        if (xtool_targets_bad_device(o, err, sizeof err)) {
            fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
            return XTOOL_EXIT_USAGE;
        }
        fprintf(stderr, "%s: bench: no available device among the backends asked for\n",
                xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    double scale = 1.0;
    const char *scale_why = "";
    if (o->len_scale > 0) {
        scale = o->len_scale;
        scale_why = " (--scale)";
    } else if (preset && xtool_preset_model_sized(preset)) {
        int gpu = xtool__any_gpu(targets, nt);
        scale = gpu ? 1.0 : 0.125;
        scale_why = gpu ? " (a GPU is among the devices)"
                        : " (no GPU among the devices: lengths at 1/8; --scale 1 for the "
                          "model's real sizes)";
    }
    rep.len_scale = scale;

    xtool_bench_case *cases = calloc(XTOOL__MAX_CASES, sizeof *cases);
    if (!cases) {
        fprintf(stderr, "%s: bench: out of memory\n", xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    xtool_cases_file cf; /* --cases */
    memset(&cf, 0, sizeof cf);
    int nc = o->cases_path
                 ? xtool_cases_load(o->cases_path, o->seed, cases, XTOOL__MAX_CASES, &cf, err,
                                    sizeof err)
                 : xtool_bench_cases(o, preset, scale, cases, XTOOL__MAX_CASES, err, sizeof err);
    rep.cases_file = o->cases_path ? &cf : NULL;
    if (nc < 0) {
        fprintf(stderr, "%s: %s\n", xtool_prog, err);
        free(cases);
        return XTOOL_EXIT_USAGE;
    }
    /* Cells: every device x case x its algorithms x its thread counts (CPU only). */
    int cells = 0, n_algo_total = 0;
    for (int ci = 0; ci < nc; ci++) {
        xattn_algo al[XATTN_ALGO_COUNT];
        int na = xtool_bench_case_algos(o, &cases[ci], al);
        n_algo_total += na;
        for (int ti = 0; ti < nt; ti++) {
            int th[XTOOL_CLI_MAX_LIST];
            cells += na * xtool_bench_case_threads(o, &cases[ci], &targets[ti], th);
        }
    }
    if (xtool_mkdir(o->out_dir)) {
        fprintf(stderr, "%s: bench: --out: cannot create the folder '%s': %s\n", xtool_prog,
                o->out_dir, strerror(errno));
        xtool_bench_cases_free(cases, nc);
        xtool_cases_file_free(&cf);
        free(cases);
        return XTOOL_EXIT_USAGE;
    }
    {
        /* The folder may exist and not be writable: find out before the cells run. */
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/%s", o->out_dir, o->ab_old ? "ab.json" : "results.json");
        if (xtool_out_probe("--out", probe, NULL, err, sizeof err)) {
            fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
            xtool_bench_cases_free(cases, nc);
            free(cases);
            return XTOOL_EXIT_USAGE;
        }
    }
    if (o->ab_old) { /* the A/B re-measurement instead of the cells */
        if (preset && (scale != 1.0 || xtool_preset_model_sized(preset)))
            printf("lengths  scale %g%s\n", scale, scale_why);
        int rc = xtool_bench_ab(o, preset, rep.command_line, targets, nt, cases, nc, cells);
        xtool_bench_cases_free(cases, nc);
        free(cases);
        return rc;
    }

    xtool_bench_device *devs = calloc((size_t)nt, sizeof *devs);
    xtool_bench_result *results = calloc((size_t)(cells ? cells : 1), sizeof *results);
    xtool_bench_scaling *scaling = calloc((size_t)(cells ? cells : 1), sizeof *scaling);
    xtool__ref_slot *refs = calloc((size_t)(nc ? nc : 1), sizeof *refs);
    xtool__trace_part *parts = calloc((size_t)nt, sizeof *parts);
    if (!devs || !results || !scaling || !refs || !parts) {
        fprintf(stderr, "%s: bench: out of memory\n", xtool_prog);
        free(devs);
        free(results);
        free(scaling);
        free(refs);
        free(parts);
        xtool_bench_cases_free(cases, nc);
        xtool_cases_file_free(&cf);
        free(cases);
        return XTOOL_EXIT_FAIL;
    }
    rep.devices = devs;
    rep.n_devices = nt;
    rep.cases = cases;
    rep.n_cases = nc;
    rep.results = results;
    rep.scaling = scaling;

    int casew = 4;
    for (int i = 0; i < nc; i++)
        casew = (int)strlen(cases[i].key) > casew ? (int)strlen(cases[i].key) : casew;
    if (casew > 64)
        casew = 64;
    /* "2 cases x 3 algorithms x 1 device" when every case runs the same algorithms,
     * then the CPU thread counts when more than the default */
    int uniform = 1;
    for (int ci = 1; ci < nc; ci++) {
        xattn_algo a0[XATTN_ALGO_COUNT], a1[XATTN_ALGO_COUNT];
        uniform &=
            xtool_bench_case_algos(o, &cases[0], a0) == xtool_bench_case_algos(o, &cases[ci], a1);
    }
    int per_case_algos = nc ? n_algo_total / nc : 0;
    char algo_txt[48], thr_txt[160] = "";
    if (uniform)
        snprintf(algo_txt, sizeof algo_txt, "%d algorithm%s", per_case_algos,
                 per_case_algos == 1 ? "" : "s");
    else
        snprintf(algo_txt, sizeof algo_txt, "their algorithms");
    if (o->thread_list.n > 1) {
        size_t k = (size_t)snprintf(thr_txt, sizeof thr_txt, ", CPU threads ");
        for (int i = 0; i < o->thread_list.n && k < sizeof thr_txt; i++)
            k += (size_t)snprintf(thr_txt + k, sizeof thr_txt - k, "%s%lld", i ? "," : "",
                                  (long long)o->thread_list.v[i]);
        if (k < sizeof thr_txt)
            snprintf(thr_txt + k, sizeof thr_txt - k, " (0 = all)");
    } else if (!o->thread_list.n) {
        for (int ci = 0; ci < nc && !thr_txt[0]; ci++)
            if (cases[ci].n_threads > 1)
                snprintf(thr_txt, sizeof thr_txt, ", CPU thread counts per family");
    }
    printf("xattn bench %s: %s%s, %d case%s x %s x %d device%s%s = %d cells\n",
           xattn_version_string(),
           preset          ? "preset "
           : o->cases_path ? "cases file "
                           : "a sweep from the command line",
           preset          ? preset
           : o->cases_path ? o->cases_path
                           : "",
           nc, nc == 1 ? "" : "s", algo_txt, nt, nt == 1 ? "" : "s", thr_txt, cells);
    if (preset && (scale != 1.0 || xtool_preset_model_sized(preset)))
        printf("lengths  scale %g%s\n", scale, scale_why);
    printf("cells    warm-up %d, then %d..%d timed calls until MAD/median <= %g or %g s; "
           "reference %s\n",
           o->warmup, o->min_reps, o->reps, o->max_spread, o->cell_budget,
           o->check ? "on (once per case, reused by every device and algorithm)" : "off");
    for (int ci = 0, shown = 0; ci < nc && shown < 8; ci++) { /* what padded69/69#b92d means */
        char legend[400];
        if (xtool_case_lengths_legend(&cases[ci].c, legend, sizeof legend)) {
            printf("lengths  %s\n", legend);
            shown++;
        }
    }
    if (o->check && o->check_limit != xtool_cli_default_check_limit(XTOOL_CLI_BENCH))
        printf("check    --check-limit %g FLOPs%s\n", o->check_limit,
               (o->given & XTOOL_GIVEN_CHECK_LIMIT) ? "" : " (the preset's)");

    xtool_progress prog;
    xtool_progress_init(&prog, o->progress, cells);
    int nr = 0, failures = 0, sub = 0, skipped_ref = 0;
    double t_first = -1;
    int nparts = 0;
    for (int ti = 0; ti < nt; ti++) {
        xtool_bench_device *bd = &devs[ti];
        bd->t = targets[ti];
        char dname[32];
        xtool_target_name(bd->t.backend, bd->t.device, dname, sizeof dname);
        xattn_ctx *ctx = NULL;
        double t_open = xtool_now_s();
        xattn_status st = xtool_ctx_open(o, bd->t.backend, bd->t.device, &ctx);
        if (st == XATTN_STATUS_OK && o->measure_ceilings) {
            xattn_ceilings c;
            xtool_progress_clear(&prog);
            if (xattn_ceilings_get(ctx, &c) != XATTN_STATUS_OK) {
                printf("%-9s measuring the ceilings (seconds)...\n", dname);
                fflush(stdout);
                if (xattn_ceilings_measure(ctx, 0, &c) != XATTN_STATUS_OK)
                    printf("%-9s ceilings not measured: %s\n", dname, xattn_last_error());
            }
        }
        if (st == XATTN_STATUS_OK)
            st = xattn_profiler_enable(ctx, 1);
        if (st != XATTN_STATUS_OK) {
            snprintf(bd->error, sizeof bd->error, "%s", xattn_last_error());
            xtool_progress_clear(&prog);
            printf("%-9s cannot be used: %s\n", dname, bd->error);
            for (int ci = 0; ci < nc; ci++) {
                xattn_algo algos[XATTN_ALGO_COUNT];
                int na = xtool_bench_case_algos(o, &cases[ci], algos);
                int th[XTOOL_CLI_MAX_LIST];
                int nth = xtool_bench_case_threads(o, &cases[ci], &bd->t, th);
                for (int hi = 0; hi < nth; hi++)
                    for (int ai = 0; ai < na; ai++) {
                        xtool_bench_result *r = &results[nr++];
                        xtool__result_init(r, ti, ci, algos[ai], th[hi], &bd->t);
                        r->status = XTOOL_CELL_FAILED;
                        snprintf(r->error, sizeof r->error, "no context: %s", bd->error);
                        failures++;
                        prog.done++;
                    }
            }
            xattn_ctx_destroy(ctx);
            continue;
        }
        if (t_first < 0)
            t_first = t_open;
        bd->opened = 1;
        bd->has_ceilings = xattn_ceilings_get(ctx, &bd->ceilings) == XATTN_STATUS_OK;
        xtool_progress_clear(&prog);
        if (bd->has_ceilings)
            printf("%-9s %s: ceilings %.1f GFLOP/s f32 FMA, %.1f GB/s read%s\n", dname,
                   bd->t.info.name, bd->ceilings.fma_f32_gflops, bd->ceilings.read_gbps,
                   bd->ceilings.from_cache ? " (cached)" : "");
        else
            printf("%-9s %s: no ceilings known (run '%s devices --measure' once, or bench "
                   "--measure-ceilings)\n",
                   dname, bd->t.info.name, xtool_prog);
        if (ti == 0 || !devs[ti - 1].opened)
            xtool_bench_table_header(stdout, casew);
        fflush(stdout);

        for (int ci = 0; ci < nc; ci++) {
            xtool_bench_case *bc = &cases[ci];
            xtool_case_run run;
            memset(&run, 0, sizeof run);
            /* Inputs and outputs that do not fit the memory available: the case's
             * cells are skipped, and nothing is allocated (an allocation beyond it
             * may succeed and the OOM killer end the run when its pages are touched). */
            char mem_skip[320] = "";
            xtool_mem_room room;
            xtool_case_mem cm;
            xtool_mem_room_read(ctx, &bd->t, &room);
            xtool_case_mem_estimate(&bc->c, XATTN_ALGO_FLASH, 0, 0, bd->t.info.compute_units, &cm);
            char why[200];
            if (xtool_mem_fits(&room, cm.tensors, cm.staging, "its inputs and outputs", why,
                               sizeof why))
                snprintf(mem_skip, sizeof mem_skip, "%s", why);
            xattn_status sst =
                mem_skip[0] ? XATTN_STATUS_OUT_OF_MEMORY : xtool_case_setup(ctx, &bc->c, &run);
            if (sst == XATTN_STATUS_OK)
                sst = xattn_attention_check(ctx, &run.desc);
            char setup_error[384] = "";
            if (sst != XATTN_STATUS_OK)
                snprintf(setup_error, sizeof setup_error, "%s",
                         mem_skip[0] ? mem_skip : xattn_last_error());
            xattn_algo algos[XATTN_ALGO_COUNT];
            int na = xtool_bench_case_algos(o, bc, algos);
            int th[XTOOL_CLI_MAX_LIST];
            int nth = xtool_bench_case_threads(o, bc, &bd->t, th);
            xattn_status tst = XATTN_STATUS_OK; /* the thread count applied */
            char thread_error[320] = "";
            for (int cell = 0; cell < nth * na; cell++) {
                int hi = cell / na, ai = cell % na;
                if (ai == 0 && th[hi] > 0 && sst == XATTN_STATUS_OK) {
                    thread_error[0] = '\0';
                    tst = xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, th[hi]);
                    if (tst != XATTN_STATUS_OK)
                        snprintf(thread_error, sizeof thread_error, "threads %d: %s", th[hi],
                                 xattn_last_error());
                }
                xtool_bench_result *r = &results[nr++];
                xtool__result_init(r, ti, ci, algos[ai], th[hi], &bd->t);
                char label[400];
                if (th[hi] > 0)
                    snprintf(label, sizeof label, "%s %s t%d %s", dname, xattn_algo_name(algos[ai]),
                             th[hi], bc->key);
                else
                    snprintf(label, sizeof label, "%s %s %s", dname, xattn_algo_name(algos[ai]),
                             bc->key);
                xtool_progress_draw(&prog, label);
                if (mem_skip[0]) {
                    r->status = XTOOL_CELL_SKIPPED;
                    snprintf(r->error, sizeof r->error, "%s", mem_skip);
                } else if (sst != XATTN_STATUS_OK || tst != XATTN_STATUS_OK) {
                    xattn_status bad = sst != XATTN_STATUS_OK ? sst : tst;
                    r->status = bad == XATTN_STATUS_UNSUPPORTED ? XTOOL_CELL_UNSUPPORTED
                                                                : XTOOL_CELL_FAILED;
                    snprintf(r->error, sizeof r->error, "%s",
                             sst != XATTN_STATUS_OK ? setup_error : thread_error);
                } else {
                    /* NAIVE materializes B*Hq*Sq*Sk f32 scores: skip it where that is more
                     * than a quarter of the device's memory. */
                    double scores = 4.0 * (double)bc->c.batch * (double)bc->c.heads *
                                    (double)bc->c.sq * (double)bc->c.sk;
                    double mem = bd->t.info.global_mem_bytes ? (double)bd->t.info.global_mem_bytes
                                                             : 16.0 * 1073741824.0;
                    /* ... and any algorithm whose workspace does not fit what is
                     * available now, the case's buffers allocated. */
                    xtool_case_mem wm;
                    xtool_case_mem_estimate(&bc->c, algos[ai], 0, 0, th[hi] ? th[hi] : 1, &wm);
                    xtool_mem_room_read(ctx, &bd->t, &room);
                    char wwhy[200];
                    if (algos[ai] == XATTN_ALGO_NAIVE && scores > mem / 4) {
                        char s1[32], s2[32];
                        xtool_fmt_bytes(scores, s1, sizeof s1);
                        xtool_fmt_bytes(mem, s2, sizeof s2);
                        r->status = XTOOL_CELL_SKIPPED;
                        snprintf(r->error, sizeof r->error,
                                 "naive's score matrix would take %s, over a quarter of the "
                                 "device's %s",
                                 s1, s2);
                    } else if (xtool_mem_fits(&room, wm.workspace, 0,
                                              algos[ai] == XATTN_ALGO_NAIVE
                                                  ? "naive's score matrix"
                                                  : "the algorithm's workspace",
                                              wwhy, sizeof wwhy)) {
                        r->status = XTOOL_CELL_SKIPPED;
                        snprintf(r->error, sizeof r->error, "%s", wwhy);
                    } else {
                        run.desc.algo = algos[ai];
                        xtool_cell_opts co = {o->warmup,     o->min_reps,    o->reps,
                                              o->max_spread, o->cell_budget, o->check};
                        xattn_range_push(ctx, bc->key);
                        xattn_status mst = xtool_cell_measure(ctx, &run, &co, &r->cell);
                        xattn_range_pop(ctx);
                        if (mst != XATTN_STATUS_OK) {
                            r->status = mst == XATTN_STATUS_UNSUPPORTED ? XTOOL_CELL_UNSUPPORTED
                                                                        : XTOOL_CELL_FAILED;
                            snprintf(r->error, sizeof r->error, "%s: %s", xattn_status_name(mst),
                                     xattn_last_error());
                            memset(&r->cell, 0, sizeof r->cell);
                        } else {
                            xtool__per_thread(r);
                        }
                        if (mst == XATTN_STATUS_OK && o->check) {
                            r->check_on = 1;
                            xtool__ref_slot *slot = &refs[ci];
                            xtool_case_mem rm;
                            char rwhy[200];
                            if (!slot->done) {
                                /* A reference that does not fit is not computed: the
                                 * cells of the case are not checked, and say why. */
                                xtool_case_mem_estimate(&bc->c, algos[ai], 1, o->check_limit, 1,
                                                        &rm);
                                xtool_mem_room_read(ctx, &bd->t, &room);
                                if (xtool_mem_fits(&room, 0, rm.reference, "the reference", rwhy,
                                                   sizeof rwhy)) {
                                    slot->done = 1;
                                    slot->st = XATTN_STATUS_OK;
                                    memset(&slot->ref, 0, sizeof slot->ref);
                                    slot->ref.mode = XTOOL_REF_SKIPPED;
                                    snprintf(slot->ref.note, sizeof slot->ref.note,
                                             "not checked: %.140s", rwhy);
                                }
                            }
                            if (!slot->done) {
                                slot->done = 1;
                                slot->st = xtool_case_ref_compute(&run, o->check_limit, &slot->ref);
                                if (slot->st != XATTN_STATUS_OK)
                                    snprintf(slot->error, sizeof slot->error, "reference: %s",
                                             xattn_last_error());
                            }
                            if (slot->st != XATTN_STATUS_OK) {
                                r->status = XTOOL_CELL_FAILED;
                                snprintf(r->error, sizeof r->error, "%s", slot->error);
                            } else {
                                r->ref_mode = slot->ref.mode;
                                snprintf(r->check_note, sizeof r->check_note, "%s", slot->ref.note);
                                xattn_status cst = xtool_case_check(&run, &slot->ref, &r->err);
                                if (cst != XATTN_STATUS_OK) {
                                    r->status = XTOOL_CELL_FAILED;
                                    snprintf(r->error, sizeof r->error, "check: %s",
                                             xattn_last_error());
                                } else if (!r->err.pass) {
                                    r->status = XTOOL_CELL_FAILED;
                                    snprintf(r->error, sizeof r->error,
                                             "disagrees with the reference: rel L2 %.2e > %.2e%s",
                                             r->err.rel_l2, r->err.bound,
                                             r->err.nan_mismatch   ? ", NaN mismatches"
                                             : r->err.lse_mismatch ? ", LSE mismatches"
                                                                   : "");
                                }
                                sub += r->ref_mode == XTOOL_REF_SUB;
                                skipped_ref += r->ref_mode == XTOOL_REF_SKIPPED;
                            }
                        }
                    }
                }
                failures += r->status == XTOOL_CELL_FAILED;
                prog.done++;
                xtool_progress_clear(&prog);
                xtool_bench_table_row(stdout, &rep, r, casew);
                fflush(stdout);
            }
            xtool_case_teardown(&run); /* a no-op after a failed setup */
        }
        /* This context's trace, shifted onto the bench's timeline when merged. */
        xtool__trace_part *pt = &parts[nparts];
        snprintf(pt->path, sizeof pt->path, "%s/trace-%s-%d.json", o->out_dir,
                 xattn_backend_name(bd->t.backend), bd->t.device);
        pt->offset_us = (t_open - t_first) * 1e6;
        if (xattn_profiler_export(ctx, XATTN_EXPORT_TRACE, pt->path) == XATTN_STATUS_OK)
            nparts++;
        else
            printf("%-9s trace not written: %s\n", dname, xattn_last_error());
        xattn_ctx_destroy(ctx);
    }
    xtool_progress_done(&prog);
    rep.n_results = nr;
    xtool_bench_scaling_compute(&rep);
    xtool__scaling_print(&rep, casew);
    xtool_bench_table_notes(stdout, &rep);
    xtool_cases_summary_print(&rep, stdout);
    rep.wall_s = xtool_now_s() - wall0;
    xtool_load_read(rep.load_end);

    int rc = failures ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", o->out_dir);
    if (xtool_bench_write_json(&rep, path, err, sizeof err)) {
        fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
        rc = XTOOL_EXIT_FAIL;
    }
    snprintf(path, sizeof path, "%s/results.csv", o->out_dir);
    if (xtool_bench_write_csv(&rep, path, err, sizeof err)) {
        fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
        rc = XTOOL_EXIT_FAIL;
    }
    snprintf(path, sizeof path, "%s/chart.svg", o->out_dir);
    if (xtool_bench_write_chart(&rep, path, err, sizeof err)) {
        fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
        rc = XTOOL_EXIT_FAIL;
    }
    snprintf(path, sizeof path, "%s/trace.json", o->out_dir);
    const char *trace_note = "trace.json";
    if (nparts && xtool__merge_traces(parts, nparts, path, err, sizeof err)) {
        printf("note     %s\n", err);
        trace_note = "trace-*.json";
    }

    int unsupported = 0, skipped = 0;
    for (int i = 0; i < nr; i++) {
        unsupported += results[i].status == XTOOL_CELL_UNSUPPORTED;
        skipped += results[i].status == XTOOL_CELL_SKIPPED;
    }
    if (sub)
        printf("ok*      checked on a sub-batch: sequence 0 and the query heads of KV head 0 (the "
               "whole case is above --check-limit %g FLOPs)\n",
               o->check_limit);
    if (skipped_ref)
        printf("skip     not checked: the reference is above --check-limit even for a sub-batch\n");
    if (isfinite(rep.load_start[0]) && isfinite(rep.load_end[0]))
        printf("load     %.2f at the start, %.2f at the end (1-minute load average, %d CPUs): "
               "other work on the machine slows the cells down\n",
               rep.load_start[0], rep.load_end[0], rep.cpus);
    printf("%d cells: %d ok, %d failed, %d unsupported, %d skipped; %.1f s; written to "
           "%s/{results.json,results.csv,chart.svg,%s}\n",
           nr, nr - failures - unsupported - skipped, failures, unsupported, skipped, rep.wall_s,
           o->out_dir, trace_note);

    for (int i = 0; i < nc; i++)
        xtool_case_ref_free(&refs[i].ref);
    free(refs);
    free(parts);
    free(results);
    free(scaling);
    free(devs);
    xtool_bench_cases_free(cases, nc);
    xtool_cases_file_free(&cf);
    free(cases);
    return rc;
}
