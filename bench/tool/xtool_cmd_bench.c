/*
 * xattn bench: cases (a preset, a sweep from the command line, or a cases
 * file) x algorithms x devices: the plan, the run of its cells, the report on
 * stdout and in --out DIR (xtool_bench.h has the steps and their files).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"

/* results.json, results.csv, chart.svg and trace.json; *trace_note says what
 * holds the traces. Returns 0, or XTOOL_EXIT_FAIL when a file was not written. */
static int xtool__bench_files(const xtool_bench_report *rep, const xtool_bench_trace *traces,
                              int ntraces, const char **trace_note)
{
    typedef int (*writer)(const xtool_bench_report *, const char *, char *, size_t);
    static const struct {
        const char *name;
        writer write;
    } files[] = {{"results.json", xtool_bench_write_json},
                 {"results.csv", xtool_bench_write_csv},
                 {"chart.svg", xtool_bench_write_chart}};
    const char *dir = rep->o->out_dir;
    char path[4200], err[1024];
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (files[i].write(rep, path, err, sizeof err)) {
            fprintf(stderr, "%s: bench: %s\n", xtool_prog, err);
            rc = XTOOL_EXIT_FAIL;
        }
    }
    snprintf(path, sizeof path, "%s/trace.json", dir);
    *trace_note = "trace.json";
    if (ntraces && xtool_bench_merge_traces(traces, ntraces, path, err, sizeof err)) {
        printf("note     %s\n", err);
        *trace_note = "trace-*.json";
    }
    return rc;
}

/* The plan's cells run and reported. */
static int xtool__bench_cells(const xtool_bench_plan *p, double wall0)
{
    xtool_bench_report rep;
    memset(&rep, 0, sizeof rep);
    rep.o = &p->o;
    rep.preset = p->preset;
    rep.len_scale = p->scale;
    snprintf(rep.command_line, sizeof rep.command_line, "%s", p->command_line);
    xtool_utc_now(rep.created, sizeof rep.created);
    xtool_load_read(rep.load_start);
    rep.cpus = xtool_cpus_available();
    xtool_host_describe(rep.host, sizeof rep.host, rep.os, sizeof rep.os);
    rep.cases = p->cases;
    rep.n_cases = p->nc;
    rep.n_devices = p->nt;
    rep.cases_file = p->o.cases_path ? &p->cases_file : NULL;
    size_t cells = (size_t)(p->cells ? p->cells : 1);
    rep.devices = calloc((size_t)p->nt, sizeof *rep.devices);
    rep.results = calloc(cells, sizeof *rep.results);
    rep.scaling = calloc(cells, sizeof *rep.scaling);
    xtool_bench_trace *traces = calloc((size_t)p->nt, sizeof *traces);
    int ntraces = 0, rc = XTOOL_EXIT_FAIL;
    if (!rep.devices || !rep.results || !rep.scaling || !traces ||
        xtool_bench_run(p, &rep, traces, &ntraces)) {
        fprintf(stderr, "%s: bench: out of memory\n", xtool_prog);
        goto done;
    }
    int casew = xtool_bench_plan_casew(p);
    xtool_bench_scaling_compute(&rep);
    xtool_bench_scaling_print(stdout, &rep, casew);
    xtool_bench_table_notes(stdout, &rep);
    xtool_cases_summary_print(&rep, stdout);
    rep.wall_s = xtool_now_s() - wall0;
    xtool_load_read(rep.load_end);
    rc = XTOOL_EXIT_OK;
    for (int i = 0; i < rep.n_results; i++)
        if (rep.results[i].status == XTOOL_CELL_FAILED)
            rc = XTOOL_EXIT_FAIL;
    const char *trace_note;
    if (xtool__bench_files(&rep, traces, ntraces, &trace_note))
        rc = XTOOL_EXIT_FAIL;
    xtool_bench_summary_print(stdout, &rep, trace_note);
done:
    free(traces);
    xtool_bench_results_free(&rep);
    free(rep.results);
    free(rep.scaling);
    free(rep.devices);
    return rc;
}

int xtool_cmd_bench(const xtool_cli_opts *o, int argc, char **argv)
{
    if (o->list_presets) {
        xtool_presets_list(stdout);
        return XTOOL_EXIT_OK;
    }
    if (o->mpi)
        return xtool_bench_mpi(o, argc, argv);
    double wall0 = xtool_now_s();
    xtool_bench_plan plan;
    int rc = xtool_bench_plan_make(o, argc, argv, &plan);
    if (rc)
        return rc;
    if (plan.o.ab_old) { /* the A/B re-measurement instead of the cells */
        xtool_bench_plan_print_scale(&plan, stdout);
        rc = xtool_bench_ab(&plan);
    } else {
        xtool_bench_plan_print(&plan, stdout);
        rc = xtool__bench_cells(&plan, wall0);
    }
    xtool_bench_plan_free(&plan);
    return rc;
}
