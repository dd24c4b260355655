/*
 * The xattn command-line tool: the parsed command line, shared by every
 * subcommand, and the entry points of the subcommands.
 *
 * Parsing (xattn_cli_opts.c) is a pure function of argv: it fills
 * xattn_cli_opts and an error message and does nothing else (no output, no
 * file access, no exit), so that a fuzz target can call it.
 *
 * Exit statuses of the tool: 0 success, 1 a run failed or disagreed with the
 * reference, 2 a bad command line (unknown flag, bad value, impossible shape,
 * unreadable input file).
 */
#ifndef XATTN_CLI_H
#define XATTN_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "xattn.h"

#define XATTN_EXIT_OK 0
#define XATTN_EXIT_FAIL 1
#define XATTN_EXIT_USAGE 2

#define XATTN_CLI_MAX_LIST 32  /* values of one list flag (--sq 128,256,...) */
#define XATTN_CLI_MAX_FILES 16 /* files given to compare */

typedef enum xattn_cli_cmd {
    XATTN_CLI_NONE = 0,
    XATTN_CLI_DEVICES,
    XATTN_CLI_RUN,
    XATTN_CLI_BENCH,
    XATTN_CLI_CHECK,
    XATTN_CLI_COMPARE,
    XATTN_CLI_ADVISE,
    XATTN_CLI_CMD_COUNT
} xattn_cli_cmd;

/* A list of integers given as "a,b,c" or "a..b" (doubling from a up to b). */
typedef struct xattn_cli_ilist {
    int n;
    int64_t v[XATTN_CLI_MAX_LIST];
} xattn_cli_ilist;

/* Bits of xattn_cli_opts.given: which case fields the command line set, so
 * that they override a preset's. */
enum {
    XATTN_GIVEN_BACKEND = 1u << 0,
    XATTN_GIVEN_DEVICE = 1u << 1,
    XATTN_GIVEN_ALGO = 1u << 2,
    XATTN_GIVEN_DTYPE = 1u << 3,
    XATTN_GIVEN_KV_DTYPE = 1u << 4,
    XATTN_GIVEN_BATCH = 1u << 5,
    XATTN_GIVEN_HEADS = 1u << 6,
    XATTN_GIVEN_KV_HEADS = 1u << 7,
    XATTN_GIVEN_SQ = 1u << 8,
    XATTN_GIVEN_SK = 1u << 9,
    XATTN_GIVEN_HEAD_DIM = 1u << 10,
    XATTN_GIVEN_HEAD_DIM_V = 1u << 11,
    XATTN_GIVEN_LAYOUT = 1u << 12,
    XATTN_GIVEN_CAUSAL = 1u << 13,
    XATTN_GIVEN_WINDOW = 1u << 14,
    XATTN_GIVEN_SOFTCAP = 1u << 15,
    XATTN_GIVEN_SCALE = 1u << 16,
    XATTN_GIVEN_ALIBI = 1u << 17,
    XATTN_GIVEN_BIAS = 1u << 18,
    XATTN_GIVEN_LSE = 1u << 19,
    XATTN_GIVEN_SPLITS = 1u << 20,
    XATTN_GIVEN_LENGTHS = 1u << 21,
    XATTN_GIVEN_VARLEN = 1u << 22,
    XATTN_GIVEN_REPS = 1u << 23,
    XATTN_GIVEN_LEN_SCALE = 1u << 24,
    XATTN_GIVEN_THREADS = 1u << 25,
    XATTN_GIVEN_CHECK_LIMIT = 1u << 26,
    /* every flag that changes the shape or the options of the case (bits 3..22) */
    XATTN_GIVEN_CASE_MASK = 0x7ffff8u
};

typedef enum xattn_cli_metric {
    XATTN_METRIC_TIME = 0,  /* chart: median ms, log scale */
    XATTN_METRIC_GFLOPS = 1 /* chart: useful GFLOP/s */
} xattn_cli_metric;

typedef struct xattn_cli_opts {
    xattn_cli_cmd cmd;
    int help;       /* --help: print the command's help, do nothing else */
    unsigned given; /* XATTN_GIVEN_* */

    /* where to run */
    int n_backends;
    xattn_backend backends[XATTN_BACKEND_COUNT + 1]; /* XATTN_BACKEND_AUTO allowed for run */
    int device;   /* device index; -1 = every device of each backend (bench/check/advise) */
    int threads;  /* CPU worker threads, 0 = all (bench: the first value of thread_list) */
    int cpu_simd; /* --cpu-simd: the XATTN_OPT_CPU_SIMD value (0 = the best path) */
    /* bench: --threads as a sweep axis ("1,2", "0" = all); n = 0 when not given.
     * run, check and advise take one value. */
    xattn_cli_ilist thread_list;

    /* the case (lists are sweep axes for bench; run takes one value each) */
    int n_algos;
    xattn_algo algos[XATTN_ALGO_COUNT];
    int n_dtypes;
    xattn_dtype dtypes[XATTN_DTYPE_COUNT];
    int kv_dtype; /* -1 = same as dtype */
    xattn_cli_ilist batch, heads, kv_heads, sq, sk, head_dim, head_dim_v;
    int bhsd;
    int causal;
    xattn_align align;
    int64_t window_left, window_right;
    float softcap, scale;
    int alibi, bias, lse, varlen;
    int num_splits;
    const char *lengths_path; /* --lengths FILE: read by the command, not the parser */
    uint64_t seed;

    /* measurement */
    int reps; /* run: timed repetitions; bench/advise: the most (--max-reps) */
    int min_reps;
    int warmup;
    double max_spread;  /* stop when MAD / median is at most this */
    double cell_budget; /* seconds of timed repetitions per cell */
    int check;          /* compare with the reference (default on) */
    double check_limit; /* FLOPs the reference may spend on one case */

    /* outputs */
    const char *json_path, *trace_path, *csv_path, *svg_path;
    const char *out_dir;

    /* bench */
    const char *preset;
    const char *cases_path; /* --cases FILE: a captured model's cases (xattn_cases_file.h) */
    int list_presets;
    double len_scale; /* --scale; 0 = automatic */
    int measure_ceilings;
    int progress; /* -1 auto (stderr is a terminal), 0 off, 1 on */
    int quick;
    xattn_cli_metric metric;

    /* devices */
    int measure, force;

    /* check */
    const char *filter;
    int verbose;

    /* compare */
    int n_files;
    const char *files[XATTN_CLI_MAX_FILES];
    int fail_on_slower;

    /* bench --ab OLD_XATTN: the A/B re-measurement against another build */
    const char *ab_old;
    int ab_rounds; /* pairs of runs per cell (default 5) */
} xattn_cli_opts;

/* Command name ("bench") -> enum; XATTN_CLI_NONE when unknown. */
xattn_cli_cmd xattn_cli_cmd_from_name(const char *name);
const char *xattn_cli_cmd_name(xattn_cli_cmd cmd);

/*
 * Parses a subcommand's command line: argv[0] is the subcommand name
 * ("devices", "run", "bench", "check", "compare", "advise"), argv[1..] its
 * flags and arguments. Fills *out (defaults first, then the flags) and
 * returns 0, or returns XATTN_EXIT_USAGE (2) with a one-line message in err
 * (unknown command or flag, a bad value, an impossible shape such as heads
 * not a multiple of kv-heads). A pure function: it reads argv (without
 * permuting it), writes *out and err, and nothing else: no output, no file
 * access, no exit. Pointers in *out point into argv's strings.
 */
int xattn_cli_parse(int argc, char **argv, xattn_cli_opts *out, char *err, size_t errlen);

/* The default --check-limit of a command (FLOPs the reference may spend). */
double xattn_cli_default_check_limit(xattn_cli_cmd cmd);

/* The --cpu-simd name of an XATTN_OPT_CPU_SIMD value ("best" for 0; "?" out of range). */
const char *xattn_cli_simd_name(int value);

/* The --help text of a subcommand (static storage). */
const char *xattn_cli_help_text(xattn_cli_cmd cmd);

/*
 * Parses the text of a --lengths file: one sequence a line, "L" or "LQ LK"
 * (blank lines and '#' comments ignored). A line with one number gives the key
 * length and, unless the case fixes --sq, the query length too. Fills lq/lk
 * (cap entries each; lq[i] = -1 where the line had one number) and *n.
 * Returns 0, or 2 with a message naming the line. Pure, like xattn_cli_parse.
 */
int xattn_cli_parse_lengths(const char *text, int32_t *lq, int32_t *lk, int cap, int *n, char *err,
                            size_t errlen);

/* Subcommands (argc/argv as for xattn_cli_parse); each returns an exit status. */
int xattn_cmd_devices(const xattn_cli_opts *o);
int xattn_cmd_run(const xattn_cli_opts *o, int argc, char **argv);
int xattn_cmd_bench(const xattn_cli_opts *o, int argc, char **argv);
int xattn_cmd_check(const xattn_cli_opts *o);
int xattn_cmd_compare(const xattn_cli_opts *o);
int xattn_cmd_advise(const xattn_cli_opts *o);

#endif
