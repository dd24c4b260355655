/* xattn bench: the results of a run and their writers (results.json schema
 * xattn.bench/1, results.csv, chart.svg). docs/tool.md documents the schema. */
#ifndef XATTN_BENCH_H
#define XATTN_BENCH_H

#include "xattn_presets.h"
#include "xattn_tool.h"

#define XATTN_BENCH_SCHEMA "xattn.bench/1"

typedef enum xattn_cell_status {
    XATTN_CELL_OK = 0,
    XATTN_CELL_FAILED = 1,      /* an error, or a mismatch with the reference */
    XATTN_CELL_UNSUPPORTED = 2, /* the backend cannot run this configuration (its reason) */
    XATTN_CELL_SKIPPED = 3      /* not attempted (reason in error), e.g. NAIVE's matrix too big */
} xattn_cell_status;

typedef struct xattn_bench_device {
    xattn_target t;
    int opened;
    char error[256];
    int has_ceilings;
    xattn_ceilings ceilings;
} xattn_bench_device;

typedef struct xattn_bench_result {
    int device;   /* index into the devices */
    int case_idx; /* index into the cases */
    xattn_algo algo;
    xattn_cell_status status;
    char error[384];
    xattn_cell cell;
    int check_on;            /* the reference comparison was asked for */
    xattn_ref_mode ref_mode; /* what it covered */
    char check_note[160];
    xattn_case_error err;
} xattn_bench_result;

typedef struct xattn_bench_report {
    const xattn_cli_opts *o;
    const char *preset; /* NULL: a sweep from the command line */
    double len_scale;
    char command_line[2048];
    char created[40];
    char host[128], os[192];
    double wall_s;
    xattn_bench_device *devices;
    int n_devices;
    xattn_bench_case *cases;
    int n_cases;
    xattn_bench_result *results;
    int n_results;
} xattn_bench_report;

const char *xattn_cell_status_name(xattn_cell_status s);
/* "pass", "fail", "skipped" (reference too costly), "off" (--no-check), "-" (no result) */
const char *xattn_bench_check_name(const xattn_bench_result *r);

int xattn_bench_write_json(const xattn_bench_report *rep, const char *path, char *err,
                           size_t errlen);
int xattn_bench_write_csv(const xattn_bench_report *rep, const char *path, char *err,
                          size_t errlen);
int xattn_bench_write_chart(const xattn_bench_report *rep, const char *path, char *err,
                            size_t errlen);

#endif
