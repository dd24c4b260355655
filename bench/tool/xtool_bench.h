/*
 * xattn bench, in three steps with a file each:
 *   plan    (xtool_bench_plan.c)   the command line -> devices, cases, cells;
 *   run     (xtool_bench_run.c)    cells -> results, each row printed as it ends;
 *   report  (xtool_bench_report.c) the table, the notes, the scaling block, and
 *           (xtool_bench_files.c)  results.json (schema xattn.bench/1, documented
 *                                  in docs/tool.md), results.csv, chart.svg, trace.json.
 * xtool_cmd_bench.c runs them; xtool_bench_ab.c is the --ab mode.
 */
#ifndef XTOOL_BENCH_H
#define XTOOL_BENCH_H

#include "xtool.h"
#include "xtool_cases_file.h"
#include "xtool_presets.h"

#define XTOOL_BENCH_SCHEMA "xattn.bench/1"
#define XTOOL_BENCH_MAX_TARGETS 32
#define XTOOL_BENCH_MAX_CASES 1024

typedef enum xtool_cell_status {
    XTOOL_CELL_OK = 0,
    XTOOL_CELL_FAILED = 1,      /* an error, or a mismatch with the reference */
    XTOOL_CELL_UNSUPPORTED = 2, /* the backend cannot run this configuration (its reason) */
    XTOOL_CELL_SKIPPED = 3      /* not attempted (reason in error), e.g. NAIVE's matrix too big */
} xtool_cell_status;

typedef struct xtool_bench_device {
    xtool_target t;
    int opened;
    char error[256];
    int has_ceilings;
    xattn_ceilings ceilings;
} xtool_bench_device;

typedef struct xtool_bench_result {
    int device;   /* index into the devices */
    int case_idx; /* index into the cases */
    xattn_algo algo;
    xtool_cell_status status;
    char error[384];
    xtool_cell cell;
    int check_on;            /* the reference comparison was asked for */
    xtool_ref_mode ref_mode; /* what it covered */
    char check_note[160];
    xtool_case_error err;
    int threads;               /* CPU: worker threads the cell ran with; 0 = not a CPU cell */
    int compute_units;         /* the device's (the ceilings are measured on all of them) */
    double pct_fma_per_thread; /* executed GFLOP/s / (FMA ceiling * min(threads, units) /
                                * units), in %; -1 unknown or not a CPU cell */
    /* Every timed call of every pass, in the order taken (malloc'd, n = cell.t.n;
     * NULL in a report made by hand); cpu_samples the process's CPU time of the
     * same calls (NULL when not taken: cell.cpu.n = 0). cell.t and cell.cpu are
     * their statistics. Freed by xtool_bench_results_free. */
    double *samples, *cpu_samples;
    int passes; /* passes that timed the cell (--passes; fewer when --budget ran out) */
} xtool_bench_result;

/* One line of the thread-scaling block: the same device, case and algorithm
 * at a base (the fewest) thread count and at another. */
typedef struct xtool_bench_scaling {
    int device, case_idx;
    xattn_algo algo;
    int threads_base, threads;
    double base_ms, ms;             /* medians */
    double speedup;                 /* base_ms / ms */
    double efficiency;              /* speedup / (threads / threads_base) */
    double pct_fma_per_thread_base; /* -1 unknown */
    double pct_fma_per_thread;
} xtool_bench_scaling;

typedef struct xtool_bench_report {
    const xtool_cli_opts *o;
    const char *preset; /* NULL: a sweep from the command line */
    double len_scale;
    char command_line[2048];
    char created[40];
    char host[128], os[192];
    double wall_s;
    /* The machine's load (xtool_load_read) before the first cell and after the
     * last: what else ran while the cells were timed. NaN where unknown. */
    double load_start[3], load_end[3];
    int cpus;
    int passes_done; /* the most passes any cell got */
    int budget_hit;  /* --budget ended the passes early */
    xtool_bench_device *devices;
    int n_devices;
    xtool_bench_case *cases;
    int n_cases;
    xtool_bench_result *results;
    int n_results;
    xtool_bench_scaling *scaling;
    int n_scaling;
    const struct xtool_cases_file *cases_file; /* --cases: the file's names and counts, else NULL */
} xtool_bench_report;

/* ---- plan (xtool_bench_plan.c) ------------------------------------------------------ */

typedef struct xtool_bench_plan {
    xtool_cli_opts o;      /* the command line, with the preset's run-wide settings */
    const char *preset;    /* NULL: a sweep from the command line, or a cases file */
    double scale;          /* the preset's length factor */
    const char *scale_why; /* " (--scale)", ... */
    xtool_target targets[XTOOL_BENCH_MAX_TARGETS];
    int nt;
    xtool_bench_case *cases; /* malloc'd, XTOOL_BENCH_MAX_CASES */
    int nc;
    xtool_cases_file cases_file; /* --cases: its names and counts */
    int cells;                   /* device x case x algorithm x CPU thread count */
    char command_line[2048];
} xtool_bench_plan;

/* The plan of a run: the preset, the devices, the cases, the output folder
 * made and checked writable. Returns 0, or an exit status with the message
 * printed (p is then freed). */
int xtool_bench_plan_make(const xtool_cli_opts *o, int argc, char **argv, xtool_bench_plan *p);
void xtool_bench_plan_free(xtool_bench_plan *p);
/* The lines before the table: what runs, the scale, the cell rules, what the
 * lengths labels mean, the reference's limit. */
void xtool_bench_plan_print(const xtool_bench_plan *p, FILE *f);
/* Only the scale line (the --ab mode's header has its own first line). */
void xtool_bench_plan_print_scale(const xtool_bench_plan *p, FILE *f);
/* The width of the table's case column. */
int xtool_bench_plan_casew(const xtool_bench_plan *p);

/* ---- run (xtool_bench_run.c) --------------------------------------------------------- */

/* A context's trace file and its time zero on the bench's timeline. */
typedef struct xtool_bench_trace {
    char path[4096];
    double offset_us;
} xtool_bench_trace;

/* Measures every cell of the plan, printing the table as the cells end, into
 * rep (devices and results: capacity p->nt and p->cells); each context's
 * trace is written to traces (capacity p->nt). Returns 0, or -1 out of memory. */
int xtool_bench_run(const xtool_bench_plan *p, xtool_bench_report *rep, xtool_bench_trace *traces,
                    int *ntraces);
/* Frees the results' samples (the array itself stays the caller's). */
void xtool_bench_results_free(xtool_bench_report *rep);

/* bench --mpi (xtool_bench_mpi.c): under mpirun, the cases through xattn_mpi on every
 * rank, rank 0 reporting; refused (exit 2) in a build without MPI. Returns an exit
 * status. */
int xtool_bench_mpi(const xtool_cli_opts *o, int argc, char **argv);

/* ---- report (xtool_bench_report.c, xtool_bench_files.c) ------------------------------ */

/* Fills rep->scaling (capacity rep->n_results) from the results: for each
 * device x case x algorithm measured at several thread counts, the fewest
 * against each other count. Returns the count. */
int xtool_bench_scaling_compute(xtool_bench_report *rep);

/* The algorithms of a case: --algo, else its preset family's, else naive,
 * flash, splitkv. Returns the count (out has XATTN_ALGO_COUNT entries). */
int xtool_bench_case_algos(const xtool_cli_opts *o, const xtool_bench_case *bc, xattn_algo *out);
/* The thread counts a case runs with on a device (XTOOL_CLI_MAX_LIST entries):
 * --threads, else its family's, else all; 0 resolved to the device's compute
 * units, repeats dropped; one entry, 0, off the CPU. Returns the count. */
int xtool_bench_case_threads(const xtool_cli_opts *o, const xtool_bench_case *bc,
                             const xtool_target *t, int *out);

/* bench --ab OLD_XATTN (xtool_bench_ab.c): every cell of the plan timed with
 * OLD_XATTN and with this binary, alternating, judged on the paired ratios;
 * writes out_dir/ab.json. Returns an exit status. */
int xtool_bench_ab(const xtool_bench_plan *p);

/* The table on stdout: its header, one row per cell, and the notes under it
 * (figures flagged as model errors, executed work modelled rather than counted). */
void xtool_bench_table_header(FILE *f, int casew);
void xtool_bench_table_row(FILE *f, const xtool_bench_report *rep, const xtool_bench_result *r,
                           int casew);
void xtool_bench_table_notes(FILE *f, const xtool_bench_report *rep);
/* The thread-scaling block (rep->scaling filled). */
void xtool_bench_scaling_print(FILE *f, const xtool_bench_report *rep, int casew);
/* The closing lines: the check's notes, the load, the count of cells by
 * status and where the files went (trace_note: "trace.json" or what stayed). */
void xtool_bench_summary_print(FILE *f, const xtool_bench_report *rep, const char *trace_note);
/* The cell's shares of a ceiling above 100% (xtool_stats_over_ceiling), as a
 * ';'-separated list of their results.json names in list; returns the count. */
int xtool_bench_model_errors(const xtool_bench_report *rep, const xtool_bench_result *r, char *list,
                             size_t n);

const char *xtool_cell_status_name(xtool_cell_status s);
/* "pass", "fail", "skipped" (reference too costly), "off" (--no-check), "-" (no result) */
const char *xtool_bench_check_name(const xtool_bench_result *r);
/* "full", "sub-batch" or "none": what the reference covered. */
const char *xtool_bench_scope_name(const xtool_bench_result *r);
/* GB/s of the record's minimum bytes (q, K and V once, o) at the median, and
 * that as % of the read bandwidth: the figure of a memory-bound call (decode
 * reads K/V once); -1 unknown. */
double xtool_bench_gbps_min(const xtool_cell *c);
double xtool_bench_pct_bw_min(const xtool_cell *c);

int xtool_bench_write_json(const xtool_bench_report *rep, const char *path, char *err,
                           size_t errlen);
int xtool_bench_write_csv(const xtool_bench_report *rep, const char *path, char *err,
                          size_t errlen);
int xtool_bench_write_chart(const xtool_bench_report *rep, const char *path, char *err,
                            size_t errlen);
/* Merges the contexts' traces into one file, each shifted to the bench's
 * timeline. Returns 0 (the parts removed), or -1 with err set (the parts
 * kept). */
int xtool_bench_merge_traces(const xtool_bench_trace *parts, int n, const char *out, char *err,
                             size_t errlen);

#endif
