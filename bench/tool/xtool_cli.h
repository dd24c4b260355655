/*
 * The xattn command-line tool: the parsed command line, shared by every
 * subcommand, and the entry points of the subcommands.
 *
 * Parsing (xtool_cli_opts.c) is a pure function of argv: it fills
 * xtool_cli_opts and an error message and does nothing else (no output, no
 * file access, no exit), so that a fuzz target can call it. The options are a
 * table (xtool_cli_table.c) that drives the parsing, the checks of each
 * value, --help and the manual's option list (xtool_cli_help.c).
 *
 * Exit statuses of the tool: 0 success, 1 a run failed or disagreed with the
 * reference, 2 a bad command line (unknown flag, bad value, impossible shape,
 * unreadable input file).
 */
#ifndef XTOOL_CLI_H
#define XTOOL_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xattn.h"

#define XTOOL_EXIT_OK 0
#define XTOOL_EXIT_FAIL 1
#define XTOOL_EXIT_USAGE 2

#define XTOOL_CLI_MAX_LIST 32  /* values of one list flag (--sq 128,256,...) */
#define XTOOL_CLI_MAX_FILES 16 /* files given to compare */

typedef enum xtool_cli_cmd {
    XTOOL_CLI_NONE = 0,
    XTOOL_CLI_DEVICES,
    XTOOL_CLI_RUN,
    XTOOL_CLI_BENCH,
    XTOOL_CLI_CHECK,
    XTOOL_CLI_COMPARE,
    XTOOL_CLI_ADVISE,
    XTOOL_CLI_TUNE,
    XTOOL_CLI_CMD_COUNT
} xtool_cli_cmd;

/* A list of integers given as "a,b,c" or "a..b" (doubling from a up to b). */
typedef struct xtool_cli_ilist {
    int n;
    int64_t v[XTOOL_CLI_MAX_LIST];
} xtool_cli_ilist;

/* Bits of xtool_cli_opts.given: which case fields the command line set, so
 * that they override a preset's. */
enum {
    XTOOL_GIVEN_BACKEND = 1u << 0,
    XTOOL_GIVEN_DEVICE = 1u << 1,
    XTOOL_GIVEN_ALGO = 1u << 2,
    XTOOL_GIVEN_DTYPE = 1u << 3,
    XTOOL_GIVEN_KV_DTYPE = 1u << 4,
    XTOOL_GIVEN_BATCH = 1u << 5,
    XTOOL_GIVEN_HEADS = 1u << 6,
    XTOOL_GIVEN_KV_HEADS = 1u << 7,
    XTOOL_GIVEN_SQ = 1u << 8,
    XTOOL_GIVEN_SK = 1u << 9,
    XTOOL_GIVEN_HEAD_DIM = 1u << 10,
    XTOOL_GIVEN_HEAD_DIM_V = 1u << 11,
    XTOOL_GIVEN_LAYOUT = 1u << 12,
    XTOOL_GIVEN_CAUSAL = 1u << 13,
    XTOOL_GIVEN_WINDOW = 1u << 14,
    XTOOL_GIVEN_SOFTCAP = 1u << 15,
    XTOOL_GIVEN_SCALE = 1u << 16,
    XTOOL_GIVEN_ALIBI = 1u << 17,
    XTOOL_GIVEN_BIAS = 1u << 18,
    XTOOL_GIVEN_LSE = 1u << 19,
    XTOOL_GIVEN_SPLITS = 1u << 20,
    XTOOL_GIVEN_LENGTHS = 1u << 21,
    XTOOL_GIVEN_VARLEN = 1u << 22,
    XTOOL_GIVEN_REPS = 1u << 23,
    XTOOL_GIVEN_LEN_SCALE = 1u << 24,
    XTOOL_GIVEN_THREADS = 1u << 25,
    XTOOL_GIVEN_CHECK_LIMIT = 1u << 26,
    XTOOL_GIVEN_SINKS = 1u << 27,
    XTOOL_GIVEN_PAGE_SIZE = 1u << 28,
    XTOOL_GIVEN_APPEND = 1u << 29,
    /* every flag that changes the shape or the options of the case (bits 3..22, 27..29) */
    XTOOL_GIVEN_CASE_MASK = 0x387ffff8u
};

typedef enum xtool_cli_metric {
    XTOOL_METRIC_TIME = 0,  /* chart: median ms, log scale */
    XTOOL_METRIC_GFLOPS = 1 /* chart: useful GFLOP/s */
} xtool_cli_metric;

typedef struct xtool_cli_opts {
    xtool_cli_cmd cmd;
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
    xtool_cli_ilist thread_list;

    /* the case (lists are sweep axes for bench; run takes one value each) */
    int n_algos;
    xattn_algo algos[XATTN_ALGO_COUNT];
    int n_dtypes;
    xattn_dtype dtypes[XATTN_DTYPE_COUNT];
    int kv_dtype; /* -1 = same as dtype */
    xtool_cli_ilist batch, heads, kv_heads, sq, sk, head_dim, head_dim_v;
    int bhsd;
    int causal;
    xattn_align align;
    int64_t window_left, window_right;
    float softcap, scale;
    int alibi, bias, lse, varlen;
    int sinks;     /* --sinks: random per-head sink logits */
    int page_size; /* --page-size: a paged K/V cache of this many tokens a page; 0 = contiguous */
    int append;    /* --append: tokens per sequence given as k_new/v_new */
    int num_splits;
    const char *lengths_path; /* --lengths FILE: read by the command, not the parser */
    uint64_t seed;

    /* measurement */
    int reps; /* run: timed repetitions; bench/advise: the most (--max-reps) */
    int min_reps;
    int warmup;
    double max_spread;  /* stop when MAD / median is at most this */
    double cell_budget; /* seconds of timed repetitions per cell */
    int passes;         /* bench: the whole set of cells this many times, in turns */
    double budget;      /* bench: seconds for the whole run; no pass starts after (0 = none) */
    int check;          /* compare with the reference (default on) */
    double check_limit; /* FLOPs the reference may spend on one case */

    /* outputs */
    const char *json_path, *trace_path, *csv_path, *svg_path;
    const char *out_dir;

    /* bench */
    const char *preset;
    const char *cases_path; /* --cases FILE: a captured model's cases (xtool_cases_file.h) */
    int list_presets;
    double len_scale; /* --scale; 0 = automatic */
    int measure_ceilings;
    int progress; /* -1 auto (stderr is a terminal), 0 off, 1 on */
    int quick;
    int metric; /* xtool_cli_metric */

    /* devices */
    int measure, force;

    /* check */
    const char *filter;
    int verbose;

    /* compare */
    int n_files;
    const char *files[XTOOL_CLI_MAX_FILES];
    int fail_on_slower;

    /* bench --ab OLD_XATTN: the A/B re-measurement against another build */
    const char *ab_old;
    int ab_rounds; /* pairs of runs per cell (default 5) */

    /* bench --mpi: every rank of mpirun runs the cases through xattn_mpi */
    int mpi;
    int mpi_strategy; /* 0 ring, 1 alltoall, 2 both (xtool_bench_mpi.c) */
} xtool_cli_opts;

/* Command name ("bench") -> enum; XTOOL_CLI_NONE when unknown. */
xtool_cli_cmd xtool_cli_cmd_from_name(const char *name);
const char *xtool_cli_cmd_name(xtool_cli_cmd cmd);

/*
 * Parses a subcommand's command line: argv[0] is the subcommand name
 * ("devices", "run", "bench", "check", "compare", "advise", "tune"), argv[1..] its
 * flags and arguments. Fills *out (defaults first, then the flags) and
 * returns 0, or returns XTOOL_EXIT_USAGE (2) with a one-line message in err
 * (unknown command or flag, a bad value, an impossible shape such as heads
 * not a multiple of kv-heads). A pure function: it reads argv (without
 * permuting it), writes *out and err, and nothing else: no output, no file
 * access, no exit. Pointers in *out point into argv's strings.
 */
int xtool_cli_parse(int argc, char **argv, xtool_cli_opts *out, char *err, size_t errlen);

/* The default --check-limit of a command (FLOPs the reference may spend). */
double xtool_cli_default_check_limit(xtool_cli_cmd cmd);

/* The --cpu-simd name of an XATTN_OPT_CPU_SIMD value ("best" for 0; "?" out of range). */
const char *xtool_cli_simd_name(int value);

/* The --help text of a subcommand (made once, kept for the process), and the
 * same written to f. */
const char *xtool_cli_help_text(xtool_cli_cmd cmd);
void xtool_cli_help_print(FILE *f, xtool_cli_cmd cmd);
/* 'xattn --help': the commands. */
void xtool_cli_commands_print(FILE *f);
/* The manual's option list (markdown tables, one per section), as docs/tool.md
 * holds it between its "options" markers. */
void xtool_cli_manual_print(FILE *f);

/*
 * Parses the text of a --lengths file: one sequence a line, "L" or "LQ LK"
 * (blank lines and '#' comments ignored). A line with one number gives the key
 * length and, unless the case fixes --sq, the query length too. Fills lq/lk
 * (cap entries each; lq[i] = -1 where the line had one number) and *n.
 * Returns 0, or 2 with a message naming the line. Pure, like xtool_cli_parse.
 */
int xtool_cli_parse_lengths(const char *text, int32_t *lq, int32_t *lk, int cap, int *n, char *err,
                            size_t errlen);

/* Subcommands (argc/argv as for xtool_cli_parse); each returns an exit status. */
int xtool_cmd_devices(const xtool_cli_opts *o);
int xtool_cmd_run(const xtool_cli_opts *o, int argc, char **argv);
int xtool_cmd_bench(const xtool_cli_opts *o, int argc, char **argv);
int xtool_cmd_check(const xtool_cli_opts *o);
int xtool_cmd_compare(const xtool_cli_opts *o);
int xtool_cmd_advise(const xtool_cli_opts *o);
int xtool_cmd_tune(const xtool_cli_opts *o);

#endif
