/* Internals shared by the subcommands of the xattn tool: devices to run on,
 * the measurement of one cell, memory, files, the progress bar, output
 * helpers. Each section names the file that implements it. */
#ifndef XTOOL_H
#define XTOOL_H

#include <stdint.h>
#include <stdio.h>

#include "xattn.h"
#include "xattn_writer.h"
#include "xtool_case.h"
#include "xtool_cli.h"
#include "xtool_stats.h"

extern const char *xtool_prog; /* "xattn" */

/* ---- devices to run on (xtool_targets.c) ---------------------------------- */

typedef struct xtool_target {
    xattn_backend backend;
    int device;
    xattn_device_info info;
} xtool_target;

/* The devices the options select: every device of every available backend
 * (or of --backend), or only --device N. Backends that are not available
 * are reported to `notes` (may be NULL) with the reason. Returns the count. */
int xtool_targets_select(const xtool_cli_opts *o, xtool_target *out, int cap, FILE *notes);
/* When xtool_targets_select found nothing because --device N is beyond the
 * devices of every available backend asked for: a bad command line. Returns
 * 1 and writes the message (naming --device) to err; else 0. */
int xtool_targets_bad_device(const xtool_cli_opts *o, char *err, size_t errlen);
/* A context on the target, with --threads and --cpu-simd applied on the CPU. */
xattn_status xtool_ctx_open(const xtool_cli_opts *o, xattn_backend be, int device, xattn_ctx **ctx);
/* "cpu:0" */
void xtool_target_name(xattn_backend be, int device, char *out, size_t n);

/* ---- one measured cell (xtool_measure.c) ----------------------------------- */

typedef struct xtool_cell_opts {
    int warmup, min_reps, max_reps;
    double max_spread; /* stop once MAD / median <= this (after min_reps) */
    double budget_s;   /* ... or once the timed calls took this long (at least 2 calls) */
    int poison_first;  /* make the first call (a warm-up one, or an extra untimed call
                        * when warmup is 0) with the outputs poisoned (NaN): an element
                        * that no call writes then fails the check that follows */
    int cpu_time;      /* also take the process's CPU time around each timed call
                        * (CLOCK_PROCESS_CPUTIME_ID, every thread of the process) */
    double *keep_ms;   /* when not NULL: every timed call's time, in the order taken
                        * (max_reps entries); keep_cpu_ms the same for the CPU time */
    double *keep_cpu_ms;
} xtool_cell_opts;

typedef struct xtool_cell {
    xtool_stats t;       /* device time of the timed calls, ms */
    int converged;       /* n >= min_reps and the interval narrow (xtool_stats_ci_narrow) */
    xtool_stats cpu;     /* the process's CPU time per timed call, ms (cpu.n = 0: not taken) */
    double elapsed_s;    /* wall time of the timed calls */
    double build_ms;     /* one-off costs paid in the warm-up (program builds) */
    xattn_run_info info; /* the last call's */
    xattn_record rec;    /* the last call's record */
    int has_rec;
    uint64_t peak_bytes; /* the context allocator's peak during the cell (buffers + workspace) */
    /* from the record's work and the median time */
    double gflops_useful, gflops_executed, gbytes_per_s;
    double pct_fma, pct_bw;         /* % of the device's ceilings; -1 when unknown */
    double fma_ceiling, bw_ceiling; /* the ceilings those use (GFLOP/s, GB/s); 0 unknown */
    double intensity;               /* flops_executed / bytes_actual */
} xtool_cell;

/* The figures of a cell derived from its record and t.median (GFLOP/s, GB/s,
 * shares of the ceilings, intensity): again after t changed (pooled passes). */
void xtool_cell_derive(xtool_cell *c);
/* Warm-up calls, then timed calls (profiling must be on for the record). */
xattn_status xtool_cell_measure(xattn_ctx *ctx, xtool_case_run *r, const xtool_cell_opts *o,
                                xtool_cell *out);
/* One call with the outputs poisoned (NaN) first, so that an element the
 * kernel does not write fails the check; info may be NULL. */
xattn_status xtool_cell_poisoned_call(xattn_ctx *ctx, xtool_case_run *r, xattn_run_info *info);

/* ---- memory: will it fit (xtool_memroom.c) -------------------------------- */

/* What the process can still allocate, in bytes (0 = unknown): on the
 * context's device, and on the host (the same memory for a CPU device). */
typedef struct xtool_mem_room {
    double device, host;
    double device_total;
    int same; /* the device's memory is the host's (CPU backend, CPU-type OpenCL) */
} xtool_mem_room;
/* Reads it now (xattn_ctx_device_memory; the host's through a CPU context
 * when the device is not the CPU). */
void xtool_mem_room_read(xattn_ctx *ctx, const xtool_target *t, xtool_mem_room *r);
/* 0 when device_bytes on the device and host_bytes on the host fit what r
 * says is available (an unknown figure fits anything); else -1 with the
 * message "needs X for WHAT, Y available" in msg. */
int xtool_mem_fits(const xtool_mem_room *r, double device_bytes, double host_bytes,
                   const char *what, char *msg, size_t n);

/* ---- output files (xtool_files.c) ------------------------------------------- */

/* Checks, before any work, that the file `path` given to `flag` can be
 * written: opens it for appending (creating it, never truncating an
 * existing one) and closes it. Returns 0 (*created = 1 when it did not
 * exist), or XTOOL_EXIT_USAGE with a message naming the flag. */
int xtool_out_probe(const char *flag, const char *path, int *created, char *err, size_t errlen);

/* ---- inputs (xtool_files.c; xtool_case_opts.c) ---------------------------- */

/* Reads --lengths FILE into malloc'd arrays (q lengths; k lengths). A line
 * with one number gives both unless sq_fixed > 0, in which case every query
 * length is sq_fixed. Returns 0 or XTOOL_EXIT_USAGE with err set. */
int xtool_lengths_load(const char *path, int64_t sq_fixed, int32_t **lq, int32_t **lk, int *n,
                       char *err, size_t errlen);
/* Closes a file that was written: 0, or -1 with "cannot write 'PATH': why" in
 * err when a write or the close failed. */
int xtool_file_close(FILE *f, const char *path, char *err, size_t errlen);
/* Reads a whole file (NUL-terminated, malloc'd); NULL with err set on failure. */
char *xtool_read_text(const char *path, size_t max_bytes, char *err, size_t errlen);

/* The single case of run and advise from the options (first value of each
 * list; --lengths loaded into lq and lk, which the caller frees). Returns 0 or
 * an exit status with err set. */
int xtool_case_from_opts(const xtool_cli_opts *o, xtool_case *c, int32_t **lq, int32_t **lk,
                         char *err, size_t errlen);
/* 1 when a status of xattn_attention_check means an impossible case (exit 2). */
int xtool_status_is_usage(xattn_status st);

/* ---- progress bar on stderr (xtool_progress.c) --------------------------- */

typedef struct xtool_progress {
    int on;
    int total, done;
    double start;
    int drawn;
} xtool_progress;

void xtool_progress_init(xtool_progress *p, int setting, int total);
void xtool_progress_draw(xtool_progress *p, const char *label);
void xtool_progress_clear(xtool_progress *p); /* before printing a line on stdout */
void xtool_progress_done(xtool_progress *p);

/* ---- output helpers (xtool_text.c, xtool_host.c, xtool_record_print.c) ---- */

/* JSON and CSV strings and numbers: xattn__json_str, xattn__json_num,
 * xattn__csv_str, xattn__csv_num (xattn_writer.h, the library's writer,
 * compiled into the tool). */
/* `, "key": v` (v as xattn__json_num writes it): a field after the first. */
void xtool_json_field(FILE *f, const char *key, double v);
/* The same with null where v is negative (undefined) or not finite. */
void xtool_json_field_or_null(FILE *f, const char *key, double v);
/* A JSON string, or null for NULL or "". */
void xtool_json_str_or_null(FILE *f, const char *s);
void xtool_xml_text(FILE *f, const char *s); /* escaped XML character data / attribute */
void xtool_fmt_bytes(double bytes, char *out, size_t n); /* "2.1 MiB" */
/* A share of a ceiling, in %: "-" when unknown (negative), "41.3", or "125.3!"
 * above 100 (a model error, xtool_stats_over_ceiling: never printed plainly). */
const char *xtool_fmt_pct(double pct, char *out, size_t n);
/* Shell-quoted command line: "xattn bench --sq '128,256'". */
void xtool_command_line(int argc, char **argv, char *out, size_t n);
/* The machine: "hostname, Linux 6.1 x86_64". */
void xtool_host_describe(char *host, size_t nhost, char *os, size_t nos);
/* Current UTC time, ISO 8601. */
void xtool_utc_now(char *out, size_t n);
/* The machine's load: /proc/loadavg's 1, 5 and 15-minute averages. Returns 0,
 * or -1 where it cannot be read (then NaN). */
int xtool_load_read(double out[3]);
/* CPUs online (the load averages are relative to them); 0 unknown. */
int xtool_cpus_online(void);
/* CPUs this process may run on (its affinity mask); the online count where
 * the mask cannot be read; 0 unknown. */
int xtool_cpus_available(void);
/* 1 when the machine was oversubscribed: the 1-minute load at the start or
 * the end above cpus - 0.5 (cpus: those available to the process); 0 when
 * not, or unknown. */
int xtool_load_busy(int cpus, const double start[3], const double end[3]);
/* The load line of a report ("load     0.52 at the start, ..."), ending with
 * the oversubscription sentence when busy; nothing when unknown. */
void xtool_load_print(FILE *f, int cpus, const double start[3], const double end[3]);
/* The opening of the JSON files that record a run (results.json, ab.json):
 * `{` and the members schema, xattn_version, created_utc, command_line and
 * host {hostname, os}; the caller goes on with `,\n  "...": `. */
void xtool_json_provenance(FILE *f, const char *schema, const char *created,
                           const char *command_line, const char *host, const char *os);
/* The load member's value: {"cpus": N, "start": [1, 5, 15 min], "end": [...],
 * "busy": B} (busy: xtool_load_busy). */
void xtool_json_load(FILE *f, int cpus, const double start[3], const double end[3]);
/* mkdir -p for one level; 0 on success or when it exists. */
int xtool_mkdir(const char *path);

/* Prints every field of a record, grouped like docs/measurement.md, saying
 * that it is one call's (run prints the last one's after the median's figures). */
void xtool_record_print(FILE *f, const xattn_record *r);

#endif
