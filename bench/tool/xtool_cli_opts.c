/*
 * Command-line parsing of the xattn tool: one pure function for every
 * subcommand (xtool_cli_parse), through getopt_long, plus the parser of
 * --lengths files and the help texts. Nothing here prints, reads files or
 * exits; a fuzz target may call these functions with any input.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cli.h"
#include "xtool_parse.h"

#define XTOOL__C(cmd) (1u << (cmd))
#define XTOOL__DEV XTOOL__C(XTOOL_CLI_DEVICES)
#define XTOOL__RUN XTOOL__C(XTOOL_CLI_RUN)
#define XTOOL__BENCH XTOOL__C(XTOOL_CLI_BENCH)
#define XTOOL__CHECK XTOOL__C(XTOOL_CLI_CHECK)
#define XTOOL__CMP XTOOL__C(XTOOL_CLI_COMPARE)
#define XTOOL__ADV XTOOL__C(XTOOL_CLI_ADVISE)
#define XTOOL__ALL (XTOOL__DEV | XTOOL__RUN | XTOOL__BENCH | XTOOL__CHECK | XTOOL__CMP | XTOOL__ADV)
#define XTOOL__CASE (XTOOL__RUN | XTOOL__BENCH | XTOOL__ADV)

enum {
    O_HELP = 256,
    O_BACKEND,
    O_DEVICE,
    O_ALGO,
    O_DTYPE,
    O_KV_DTYPE,
    O_BATCH,
    O_HEADS,
    O_KV_HEADS,
    O_SQ,
    O_SK,
    O_HEAD_DIM,
    O_HEAD_DIM_V,
    O_LAYOUT,
    O_CAUSAL,
    O_WINDOW,
    O_SOFTCAP,
    O_SOFTMAX_SCALE,
    O_ALIBI,
    O_BIAS,
    O_LSE,
    O_SPLITS,
    O_LENGTHS,
    O_VARLEN,
    O_SEED,
    O_THREADS,
    O_REPS,
    O_MIN_REPS,
    O_MAX_REPS,
    O_WARMUP,
    O_MAX_SPREAD,
    O_CELL_BUDGET,
    O_NO_CHECK,
    O_CHECK_LIMIT,
    O_JSON,
    O_TRACE,
    O_CSV,
    O_SVG,
    O_OUT,
    O_PRESET,
    O_LIST_PRESETS,
    O_SCALE,
    O_MEASURE_CEILINGS,
    O_PROGRESS,
    O_NO_PROGRESS,
    O_QUICK,
    O_CHART,
    O_MEASURE,
    O_FORCE,
    O_FILTER,
    O_VERBOSE,
    O_FAIL_ON_SLOWER,
    O_CPU_SIMD,
    O_CASES,
    O_AB,
    O_AB_ROUNDS
};

typedef struct xtool__flag {
    const char *name;
    int has_arg;
    int id;
    unsigned cmds;
} xtool__flag;

static const xtool__flag xtool__flags[] = {
    {"help", no_argument, O_HELP, XTOOL__ALL},
    {"backend", required_argument, O_BACKEND, XTOOL__CASE | XTOOL__CHECK},
    {"device", required_argument, O_DEVICE, XTOOL__CASE | XTOOL__CHECK},
    {"algo", required_argument, O_ALGO, XTOOL__CASE | XTOOL__CHECK},
    {"dtype", required_argument, O_DTYPE, XTOOL__CASE},
    {"kv-dtype", required_argument, O_KV_DTYPE, XTOOL__CASE},
    {"batch", required_argument, O_BATCH, XTOOL__CASE},
    {"heads", required_argument, O_HEADS, XTOOL__CASE},
    {"kv-heads", required_argument, O_KV_HEADS, XTOOL__CASE},
    {"sq", required_argument, O_SQ, XTOOL__CASE},
    {"sk", required_argument, O_SK, XTOOL__CASE},
    {"head-dim", required_argument, O_HEAD_DIM, XTOOL__CASE},
    {"head-dim-v", required_argument, O_HEAD_DIM_V, XTOOL__CASE},
    {"layout", required_argument, O_LAYOUT, XTOOL__CASE},
    {"causal", optional_argument, O_CAUSAL, XTOOL__CASE},
    {"window", required_argument, O_WINDOW, XTOOL__CASE},
    {"softcap", required_argument, O_SOFTCAP, XTOOL__CASE},
    {"softmax-scale", required_argument, O_SOFTMAX_SCALE, XTOOL__CASE},
    {"alibi", no_argument, O_ALIBI, XTOOL__CASE},
    {"bias", no_argument, O_BIAS, XTOOL__CASE},
    {"lse", no_argument, O_LSE, XTOOL__CASE},
    {"splits", required_argument, O_SPLITS, XTOOL__CASE},
    {"lengths", required_argument, O_LENGTHS, XTOOL__CASE},
    {"varlen", no_argument, O_VARLEN, XTOOL__RUN | XTOOL__BENCH},
    {"seed", required_argument, O_SEED, XTOOL__CASE | XTOOL__CHECK},
    {"threads", required_argument, O_THREADS, XTOOL__CASE | XTOOL__CHECK},
    {"cpu-simd", required_argument, O_CPU_SIMD, XTOOL__CASE | XTOOL__CHECK},
    {"reps", required_argument, O_REPS, XTOOL__CASE},
    {"min-reps", required_argument, O_MIN_REPS, XTOOL__BENCH | XTOOL__ADV},
    {"max-reps", required_argument, O_MAX_REPS, XTOOL__BENCH | XTOOL__ADV},
    {"warmup", required_argument, O_WARMUP, XTOOL__CASE},
    {"max-spread", required_argument, O_MAX_SPREAD, XTOOL__BENCH | XTOOL__ADV},
    {"cell-budget", required_argument, O_CELL_BUDGET, XTOOL__BENCH | XTOOL__ADV},
    {"no-check", no_argument, O_NO_CHECK, XTOOL__RUN | XTOOL__BENCH},
    {"check-limit", required_argument, O_CHECK_LIMIT, XTOOL__RUN | XTOOL__BENCH},
    {"json", required_argument, O_JSON, XTOOL__RUN | XTOOL__ADV | XTOOL__CHECK},
    {"trace", required_argument, O_TRACE, XTOOL__RUN},
    {"csv", required_argument, O_CSV, XTOOL__RUN | XTOOL__CMP},
    {"svg", required_argument, O_SVG, XTOOL__CMP},
    {"out", required_argument, O_OUT, XTOOL__BENCH},
    {"preset", required_argument, O_PRESET, XTOOL__BENCH},
    {"cases", required_argument, O_CASES, XTOOL__BENCH},
    {"list-presets", no_argument, O_LIST_PRESETS, XTOOL__BENCH},
    {"scale", required_argument, O_SCALE, XTOOL__BENCH},
    {"measure-ceilings", no_argument, O_MEASURE_CEILINGS, XTOOL__BENCH | XTOOL__ADV},
    {"progress", no_argument, O_PROGRESS, XTOOL__BENCH | XTOOL__CHECK},
    {"no-progress", no_argument, O_NO_PROGRESS, XTOOL__BENCH | XTOOL__CHECK},
    {"quick", no_argument, O_QUICK, XTOOL__BENCH | XTOOL__CHECK},
    {"chart", required_argument, O_CHART, XTOOL__BENCH},
    {"measure", no_argument, O_MEASURE, XTOOL__DEV},
    {"force", no_argument, O_FORCE, XTOOL__DEV},
    {"filter", required_argument, O_FILTER, XTOOL__CHECK},
    {"verbose", no_argument, O_VERBOSE, XTOOL__CHECK},
    {"fail-on-slower", no_argument, O_FAIL_ON_SLOWER, XTOOL__CMP},
    {"ab", required_argument, O_AB, XTOOL__BENCH},
    {"ab-rounds", required_argument, O_AB_ROUNDS, XTOOL__BENCH},
};
#define XTOOL__NFLAGS (sizeof xtool__flags / sizeof xtool__flags[0])

static const char *const xtool__cmd_names[XTOOL_CLI_CMD_COUNT] = {
    "", "devices", "run", "bench", "check", "compare", "advise"};

xtool_cli_cmd xtool_cli_cmd_from_name(const char *name)
{
    for (int i = 1; name && i < XTOOL_CLI_CMD_COUNT; i++)
        if (!strcmp(name, xtool__cmd_names[i]))
            return (xtool_cli_cmd)i;
    return XTOOL_CLI_NONE;
}

const char *xtool_cli_cmd_name(xtool_cli_cmd cmd)
{
    return cmd > XTOOL_CLI_NONE && cmd < XTOOL_CLI_CMD_COUNT ? xtool__cmd_names[cmd] : "?";
}

/* --cpu-simd names, indexed by their XATTN_OPT_CPU_SIMD value. */
static const char *const xtool__simd_names[] = {"best", "portable", "avx2", "avx512"};
#define XTOOL__NSIMD (int)(sizeof xtool__simd_names / sizeof xtool__simd_names[0])

const char *xtool_cli_simd_name(int value)
{
    return value >= 0 && value < XTOOL__NSIMD ? xtool__simd_names[value] : "?";
}

static int xtool__fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return XTOOL_EXIT_USAGE;
}

static int xtool__dbl(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "a,b,c", "a..b" (doubling from a while <= b), or a mix: "16,64..256". */
static int xtool__ilist(const char *flag, const char *arg, int64_t lo, int64_t hi,
                        xtool_cli_ilist *out, char *err, size_t errlen)
{
    out->n = 0;
    const char *p = arg;
    if (!*p)
        return xtool__fail(err, errlen, "--%s: empty value (expected N, N,M,... or A..B)", flag);
    while (*p) {
        char item[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item)
            return xtool__fail(err, errlen,
                               "--%s: '%s' is not a list of integers (N,M,... or A..B)", flag, arg);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len;
        if (*p == ',') {
            p++;
            if (!*p)
                return xtool__fail(err, errlen, "--%s: '%s' ends with a comma", flag, arg);
        }
        char *dots = strstr(item, "..");
        int64_t a, b;
        if (dots) {
            *dots = '\0';
            if (xtool_parse_i64(item, lo, hi, &a) || xtool_parse_i64(dots + 2, lo, hi, &b) || b < a)
                return xtool__fail(err, errlen,
                                   "--%s: '%s' is not a range A..B with %lld <= A <= B <= %lld",
                                   flag, arg, (long long)lo, (long long)hi);
            for (int64_t v = a;; v *= 2) {
                if (out->n >= XTOOL_CLI_MAX_LIST)
                    return xtool__fail(err, errlen, "--%s: more than %d values", flag,
                                       XTOOL_CLI_MAX_LIST);
                out->v[out->n++] = v;
                if (v == 0 || v > b / 2)
                    break;
            }
        } else {
            if (xtool_parse_i64(item, lo, hi, &a))
                return xtool__fail(err, errlen, "--%s: '%s' is not an integer in %lld..%lld", flag,
                                   item, (long long)lo, (long long)hi);
            if (out->n >= XTOOL_CLI_MAX_LIST)
                return xtool__fail(err, errlen, "--%s: more than %d values", flag,
                                   XTOOL_CLI_MAX_LIST);
            out->v[out->n++] = a;
        }
    }
    return 0;
}

static int xtool__dtype(const char *s, xattn_dtype *out)
{
    for (int i = 0; i < XATTN_DTYPE_COUNT; i++)
        if (!strcmp(s, xattn_dtype_name((xattn_dtype)i))) {
            *out = (xattn_dtype)i;
            return 0;
        }
    return -1;
}

/* Splits "a,b" into its items and calls one(item) for each; "all" means every value. */
static int xtool__names(const char *flag, const char *arg, int max, int *n, int *vals,
                        int (*one)(const char *, int *), const char *expected, char *err,
                        size_t errlen)
{
    *n = 0;
    const char *p = arg;
    if (!*p)
        return xtool__fail(err, errlen, "--%s: empty value (expected %s)", flag, expected);
    while (*p) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item)
            return xtool__fail(err, errlen, "--%s: '%s' is not a list of %s", flag, arg, expected);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len;
        if (*p == ',' && !*++p)
            return xtool__fail(err, errlen, "--%s: '%s' ends with a comma", flag, arg);
        int v;
        if (one(item, &v))
            return xtool__fail(err, errlen, "--%s: '%s' is not %s", flag, item, expected);
        int dup = 0;
        for (int i = 0; i < *n; i++)
            dup |= vals[i] == v;
        if (dup)
            continue;
        if (*n >= max)
            return xtool__fail(err, errlen, "--%s: too many values in '%s'", flag, arg);
        vals[(*n)++] = v;
    }
    return 0;
}

/* Name lookups through the library's name functions (plain table reads), so
 * that parsing sets no library state. */
static int xtool__one_backend(const char *s, int *v)
{
    for (int b = XATTN_BACKEND_AUTO; b < XATTN_BACKEND_COUNT; b++)
        if (!strcmp(s, xattn_backend_name((xattn_backend)b))) {
            *v = b;
            return 0;
        }
    return -1;
}

static int xtool__one_algo(const char *s, int *v)
{
    for (int a = 0; a < XATTN_ALGO_COUNT; a++)
        if (!strcmp(s, xattn_algo_name((xattn_algo)a))) {
            *v = a;
            return 0;
        }
    return -1;
}

static int xtool__one_dtype(const char *s, int *v)
{
    xattn_dtype d;
    if (xtool__dtype(s, &d))
        return -1;
    *v = (int)d;
    return 0;
}

double xtool_cli_default_check_limit(xtool_cli_cmd cmd)
{
    return cmd == XTOOL_CLI_RUN ? 2e10 : 4e9; /* run: one case, be thorough */
}

static void xtool__defaults(xtool_cli_opts *o, xtool_cli_cmd cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->device = cmd == XTOOL_CLI_RUN ? 0 : -1;
    o->kv_dtype = -1;
    o->align = XATTN_ALIGN_BOTTOM_RIGHT;
    o->window_left = o->window_right = -1;
    o->seed = 42;
    o->reps = cmd == XTOOL_CLI_RUN ? 5 : 200;
    o->min_reps = 5;
    o->warmup = 1;
    o->max_spread = 0.05;
    o->cell_budget = cmd == XTOOL_CLI_ADVISE ? 0.5 : 1.0;
    o->check = 1;
    o->check_limit = xtool_cli_default_check_limit(cmd);
    o->out_dir = "xattn-results";
    o->progress = -1;
    o->metric = XTOOL_METRIC_TIME;
    o->ab_rounds = 5;
}

/* Applies one flag. Returns 0 or XTOOL_EXIT_USAGE with err set. */
static int xtool__apply(xtool_cli_opts *o, int id, const char *name, const char *arg, char *err,
                        size_t errlen)
{
    int64_t v;
    double d;
    int vals[8], n;
    switch (id) {
    case O_HELP: o->help = 1; return 0;
    case O_BACKEND:
        if (xtool__names(name, arg, XATTN_BACKEND_COUNT + 1, &n, vals, xtool__one_backend,
                         "auto, cpu, opencl or cuda", err, errlen))
            return XTOOL_EXIT_USAGE;
        o->n_backends = n;
        for (int i = 0; i < n; i++)
            o->backends[i] = (xattn_backend)vals[i];
        o->given |= XTOOL_GIVEN_BACKEND;
        return 0;
    case O_DEVICE:
        if (xtool_parse_i64(arg, 0, 1023, &v))
            return xtool__fail(err, errlen, "--device: '%s' is not a device index (0..1023)", arg);
        o->device = (int)v;
        o->given |= XTOOL_GIVEN_DEVICE;
        return 0;
    case O_ALGO:
        if (!strcmp(arg, "all")) {
            o->n_algos = 3;
            o->algos[0] = XATTN_ALGO_NAIVE;
            o->algos[1] = XATTN_ALGO_FLASH;
            o->algos[2] = XATTN_ALGO_SPLITKV;
        } else {
            if (xtool__names(name, arg, XATTN_ALGO_COUNT, &n, vals, xtool__one_algo,
                             "auto, naive, flash, splitkv or all", err, errlen))
                return XTOOL_EXIT_USAGE;
            o->n_algos = n;
            for (int i = 0; i < n; i++)
                o->algos[i] = (xattn_algo)vals[i];
        }
        o->given |= XTOOL_GIVEN_ALGO;
        return 0;
    case O_DTYPE:
        if (xtool__names(name, arg, XATTN_DTYPE_COUNT, &n, vals, xtool__one_dtype,
                         "f32, f16 or bf16", err, errlen))
            return XTOOL_EXIT_USAGE;
        o->n_dtypes = n;
        for (int i = 0; i < n; i++)
            o->dtypes[i] = (xattn_dtype)vals[i];
        o->given |= XTOOL_GIVEN_DTYPE;
        return 0;
    case O_KV_DTYPE: {
        xattn_dtype dt;
        if (xtool__dtype(arg, &dt))
            return xtool__fail(err, errlen, "--kv-dtype: '%s' is not f32, f16 or bf16", arg);
        o->kv_dtype = (int)dt;
        o->given |= XTOOL_GIVEN_KV_DTYPE;
        return 0;
    }
    case O_BATCH:
        o->given |= XTOOL_GIVEN_BATCH;
        return xtool__ilist(name, arg, 1, 65536, &o->batch, err, errlen);
    case O_HEADS:
        o->given |= XTOOL_GIVEN_HEADS;
        return xtool__ilist(name, arg, 1, 4096, &o->heads, err, errlen);
    case O_KV_HEADS:
        o->given |= XTOOL_GIVEN_KV_HEADS;
        return xtool__ilist(name, arg, 1, 4096, &o->kv_heads, err, errlen);
    case O_SQ:
        o->given |= XTOOL_GIVEN_SQ;
        return xtool__ilist(name, arg, 0, 1 << 22, &o->sq, err, errlen);
    case O_SK:
        o->given |= XTOOL_GIVEN_SK;
        return xtool__ilist(name, arg, 0, 1 << 22, &o->sk, err, errlen);
    case O_HEAD_DIM:
        o->given |= XTOOL_GIVEN_HEAD_DIM;
        return xtool__ilist(name, arg, 1, 256, &o->head_dim, err, errlen);
    case O_HEAD_DIM_V:
        o->given |= XTOOL_GIVEN_HEAD_DIM_V;
        return xtool__ilist(name, arg, 1, 256, &o->head_dim_v, err, errlen);
    case O_LAYOUT:
        if (!strcmp(arg, "bshd"))
            o->bhsd = 0;
        else if (!strcmp(arg, "bhsd"))
            o->bhsd = 1;
        else
            return xtool__fail(err, errlen, "--layout: '%s' is not bshd or bhsd", arg);
        o->given |= XTOOL_GIVEN_LAYOUT;
        return 0;
    case O_CAUSAL:
        if (!arg || !strcmp(arg, "bottom-right") || !strcmp(arg, "br"))
            o->align = XATTN_ALIGN_BOTTOM_RIGHT;
        else if (!strcmp(arg, "top-left") || !strcmp(arg, "tl"))
            o->align = XATTN_ALIGN_TOP_LEFT;
        else
            return xtool__fail(err, errlen, "--causal: '%s' is not top-left or bottom-right", arg);
        o->causal = 1;
        o->given |= XTOOL_GIVEN_CAUSAL;
        return 0;
    case O_WINDOW: {
        const char *comma = strchr(arg, ',');
        char left[32];
        int64_t l, r;
        size_t len = comma ? (size_t)(comma - arg) : 0;
        if (!comma || len >= sizeof left)
            return xtool__fail(err, errlen,
                               "--window: '%s' is not L,R (keys left and right of the query's "
                               "position; negative = unbounded)",
                               arg);
        memcpy(left, arg, len);
        left[len] = '\0';
        if (xtool_parse_i64(left, INT64_MIN / 2, 1 << 30, &l) ||
            xtool_parse_i64(comma + 1, INT64_MIN / 2, 1 << 30, &r))
            return xtool__fail(err, errlen,
                               "--window: '%s' is not L,R with integers up to 2^30 (negative = "
                               "unbounded)",
                               arg);
        o->window_left = l < 0 ? -1 : l;
        o->window_right = r < 0 ? -1 : r;
        o->given |= XTOOL_GIVEN_WINDOW;
        return 0;
    }
    case O_SOFTCAP:
        if (xtool__dbl(arg, 0, 1e30, &d))
            return xtool__fail(err, errlen, "--softcap: '%s' is not a number >= 0 (0 = off)", arg);
        o->softcap = (float)d;
        o->given |= XTOOL_GIVEN_SOFTCAP;
        return 0;
    case O_SOFTMAX_SCALE:
        if (xtool__dbl(arg, -1e30, 1e30, &d))
            return xtool__fail(err, errlen,
                               "--softmax-scale: '%s' is not a finite number (0 = 1/sqrt(D))", arg);
        o->scale = (float)d;
        o->given |= XTOOL_GIVEN_SCALE;
        return 0;
    case O_ALIBI:
        o->alibi = 1;
        o->given |= XTOOL_GIVEN_ALIBI;
        return 0;
    case O_BIAS:
        o->bias = 1;
        o->given |= XTOOL_GIVEN_BIAS;
        return 0;
    case O_LSE:
        o->lse = 1;
        o->given |= XTOOL_GIVEN_LSE;
        return 0;
    case O_VARLEN:
        o->varlen = 1;
        o->given |= XTOOL_GIVEN_VARLEN;
        return 0;
    case O_SPLITS:
        if (xtool_parse_i64(arg, 0, 4096, &v))
            return xtool__fail(err, errlen, "--splits: '%s' is not an integer in 0..4096", arg);
        o->num_splits = (int)v;
        o->given |= XTOOL_GIVEN_SPLITS;
        return 0;
    case O_LENGTHS:
        if (!*arg)
            return xtool__fail(err, errlen, "--lengths: empty file name");
        o->lengths_path = arg;
        o->given |= XTOOL_GIVEN_LENGTHS;
        return 0;
    case O_SEED:
        if (xtool_parse_i64(arg, 0, INT64_MAX, &v))
            return xtool__fail(err, errlen, "--seed: '%s' is not a non-negative integer", arg);
        o->seed = (uint64_t)v;
        return 0;
    case O_THREADS:
        /* A list for bench (a sweep axis); the other commands take one value (validated). */
        if (xtool__ilist(name, arg, 0, 4096, &o->thread_list, err, errlen))
            return XTOOL_EXIT_USAGE;
        o->threads = (int)o->thread_list.v[0];
        o->given |= XTOOL_GIVEN_THREADS;
        return 0;
    case O_CPU_SIMD:
        for (int i = 0; i < XTOOL__NSIMD; i++)
            if (!strcmp(arg, xtool__simd_names[i])) {
                o->cpu_simd = i;
                return 0;
            }
        return xtool__fail(err, errlen, "--cpu-simd: '%s' is not best, portable, avx2 or avx512",
                           arg);
    case O_REPS:
    case O_MAX_REPS:
        if (xtool_parse_i64(arg, 1, 100000, &v))
            return xtool__fail(err, errlen, "--%s: '%s' is not an integer in 1..100000", name, arg);
        o->reps = (int)v;
        o->given |= XTOOL_GIVEN_REPS;
        return 0;
    case O_MIN_REPS:
        if (xtool_parse_i64(arg, 1, 100000, &v))
            return xtool__fail(err, errlen, "--min-reps: '%s' is not an integer in 1..100000", arg);
        o->min_reps = (int)v;
        return 0;
    case O_WARMUP:
        if (xtool_parse_i64(arg, 0, 1000, &v))
            return xtool__fail(err, errlen, "--warmup: '%s' is not an integer in 0..1000", arg);
        o->warmup = (int)v;
        return 0;
    case O_MAX_SPREAD:
        if (xtool__dbl(arg, 0, 10, &d))
            return xtool__fail(err, errlen,
                               "--max-spread: '%s' is not a number in 0..10 (a ratio: 0.05 = 5%%)",
                               arg);
        o->max_spread = d;
        return 0;
    case O_CELL_BUDGET:
        if (xtool__dbl(arg, 0, 86400, &d))
            return xtool__fail(err, errlen, "--cell-budget: '%s' is not seconds in 0..86400", arg);
        o->cell_budget = d;
        return 0;
    case O_NO_CHECK: o->check = 0; return 0;
    case O_CHECK_LIMIT:
        if (xtool__dbl(arg, 0, 1e18, &d))
            return xtool__fail(err, errlen, "--check-limit: '%s' is not a FLOP count >= 0", arg);
        o->check_limit = d;
        o->given |= XTOOL_GIVEN_CHECK_LIMIT;
        return 0;
    case O_JSON:
    case O_TRACE:
    case O_CSV:
    case O_SVG:
    case O_OUT:
        if (!*arg)
            return xtool__fail(err, errlen, "--%s: empty file name", name);
        *(id == O_JSON    ? &o->json_path
          : id == O_TRACE ? &o->trace_path
          : id == O_CSV   ? &o->csv_path
          : id == O_SVG   ? &o->svg_path
                          : &o->out_dir) = arg;
        return 0;
    case O_PRESET:
        if (!*arg)
            return xtool__fail(err, errlen, "--preset: empty name (see --list-presets)");
        o->preset = arg;
        return 0;
    case O_CASES:
        if (!*arg)
            return xtool__fail(err, errlen, "--cases: empty file name");
        o->cases_path = arg;
        return 0;
    case O_LIST_PRESETS: o->list_presets = 1; return 0;
    case O_SCALE:
        if (xtool__dbl(arg, 1e-4, 64, &d) || d <= 0)
            return xtool__fail(err, errlen,
                               "--scale: '%s' is not a factor in (0, 64] for the preset's lengths "
                               "(the score scale is --softmax-scale)",
                               arg);
        o->len_scale = d;
        o->given |= XTOOL_GIVEN_LEN_SCALE;
        return 0;
    case O_MEASURE_CEILINGS: o->measure_ceilings = 1; return 0;
    case O_PROGRESS: o->progress = 1; return 0;
    case O_NO_PROGRESS: o->progress = 0; return 0;
    case O_QUICK: o->quick = 1; return 0;
    case O_CHART:
        if (!strcmp(arg, "time"))
            o->metric = XTOOL_METRIC_TIME;
        else if (!strcmp(arg, "gflops"))
            o->metric = XTOOL_METRIC_GFLOPS;
        else
            return xtool__fail(err, errlen, "--chart: '%s' is not time or gflops", arg);
        return 0;
    case O_MEASURE: o->measure = 1; return 0;
    case O_FORCE: o->measure = o->force = 1; return 0;
    case O_FILTER: o->filter = arg; return 0;
    case O_VERBOSE: o->verbose = 1; return 0;
    case O_FAIL_ON_SLOWER: o->fail_on_slower = 1; return 0;
    case O_AB:
        if (!*arg)
            return xtool__fail(err, errlen, "--ab: empty path (expected another xattn binary)");
        o->ab_old = arg;
        return 0;
    case O_AB_ROUNDS:
        if (xtool_parse_i64(arg, 1, 1000, &v))
            return xtool__fail(err, errlen, "--ab-rounds: '%s' is not an integer in 1..1000", arg);
        o->ab_rounds = (int)v;
        return 0;
    }
    return xtool__fail(err, errlen, "internal: unhandled flag --%s", name);
}

/* Cross-field checks: one value per axis where the command runs one case,
 * heads divisible by kv-heads, files where the command needs them. */
static int xtool__validate(xtool_cli_opts *o, char *err, size_t errlen)
{
    const char *cmd = xtool_cli_cmd_name(o->cmd);
    if (o->cmd == XTOOL_CLI_RUN || o->cmd == XTOOL_CLI_ADVISE) {
        const xtool_cli_ilist *l[] = {&o->batch, &o->heads,    &o->kv_heads,  &o->sq,
                                      &o->sk,    &o->head_dim, &o->head_dim_v};
        const char *names[] = {"batch", "heads", "kv-heads", "sq", "sk", "head-dim", "head-dim-v"};
        for (int i = 0; i < 7; i++)
            if (l[i]->n > 1)
                return xtool__fail(err, errlen,
                                   "%s: --%s takes one value here (sweeps are for xattn bench)",
                                   cmd, names[i]);
        if (o->n_dtypes > 1)
            return xtool__fail(err, errlen, "%s: --dtype takes one value here", cmd);
    }
    if (o->cmd != XTOOL_CLI_BENCH && o->thread_list.n > 1)
        return xtool__fail(err, errlen,
                           "%s: --threads takes one value here (a list of thread counts is for "
                           "xattn bench)",
                           cmd);
    if (o->cmd == XTOOL_CLI_RUN) {
        if (o->n_backends > 1)
            return xtool__fail(err, errlen, "run: --backend takes one backend");
        if (o->n_algos > 1)
            return xtool__fail(err, errlen, "run: --algo takes one algorithm");
    }
    if (o->cmd == XTOOL_CLI_ADVISE && o->n_algos)
        return xtool__fail(err, errlen,
                           "advise: --algo is not an option: advise runs naive, flash "
                           "and splitkv");
    if (o->varlen && !o->lengths_path)
        return xtool__fail(err, errlen, "%s: --varlen packs the batch of --lengths FILE; give one",
                           cmd);
    /* Every heads value must be a multiple of every kv-heads value that applies. */
    xtool_cli_ilist hd = o->heads;
    if (!hd.n) {
        hd.n = 1;
        hd.v[0] = 8;
    }
    for (int i = 0; i < hd.n; i++)
        for (int j = 0; j < o->kv_heads.n; j++)
            if (hd.v[i] % o->kv_heads.v[j])
                return xtool__fail(err, errlen,
                                   "%s: %lld query heads are not a multiple of %lld KV heads "
                                   "(--heads, --kv-heads: GQA needs Hq = g * Hkv)",
                                   cmd, (long long)hd.v[i], (long long)o->kv_heads.v[j]);
    if (o->cmd == XTOOL_CLI_COMPARE && o->n_files < 2 && !o->help)
        return xtool__fail(err, errlen,
                           "compare: give at least two result files (xattn bench's results.json)");
    if (o->cmd == XTOOL_CLI_BENCH || o->cmd == XTOOL_CLI_ADVISE) {
        if (o->min_reps > o->reps && (o->given & XTOOL_GIVEN_REPS))
            return xtool__fail(err, errlen, "%s: --min-reps %d is above --max-reps %d", cmd,
                               o->min_reps, o->reps);
        if (o->min_reps > o->reps)
            o->reps = o->min_reps;
    }
    if (o->cases_path && (o->preset || (o->given & XTOOL_GIVEN_CASE_MASK)))
        return xtool__fail(err, errlen,
                           "bench: --cases FILE brings its own cases: it takes no --preset and no "
                           "case flags (--dtype, --sq, --causal, ...)");
    if (o->ab_rounds != 5 && !o->ab_old)
        return xtool__fail(err, errlen, "bench: --ab-rounds needs --ab OLD_XATTN");
    if (o->preset && (o->given & XTOOL_GIVEN_LENGTHS))
        return xtool__fail(err, errlen,
                           "bench: --lengths replaces a preset's lengths only "
                           "without --preset (bert-base-padded has its own)");
    return 0;
}

int xtool_cli_parse(int argc, char **argv, xtool_cli_opts *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return xtool__fail(err, errlen, "internal: no output struct");
    memset(out, 0, sizeof *out);
    if (argc < 1 || !argv || !argv[0])
        return xtool__fail(err, errlen, "no command (devices, run, bench, check, compare, advise)");
    xtool_cli_cmd cmd = xtool_cli_cmd_from_name(argv[0]);
    if (cmd == XTOOL_CLI_NONE)
        return xtool__fail(err, errlen,
                           "'%.64s' is not a command (devices, run, bench, check, compare, advise)",
                           argv[0]);
    xtool__defaults(out, cmd);
    if (argc > 4096)
        return xtool__fail(err, errlen, "%s: too many arguments (%d)", argv[0], argc);

    /* The command's flags, in getopt_long's form. */
    struct option longopts[XTOOL__NFLAGS + 1];
    int nl = 0;
    for (size_t i = 0; i < XTOOL__NFLAGS; i++)
        if (xtool__flags[i].cmds & XTOOL__C(cmd)) {
            longopts[nl].name = xtool__flags[i].name;
            longopts[nl].has_arg = xtool__flags[i].has_arg;
            longopts[nl].flag = NULL;
            longopts[nl].val = xtool__flags[i].id;
            nl++;
        }
    memset(&longopts[nl], 0, sizeof longopts[nl]);

    /* getopt_long permutes its argv: work on a copy of the pointers. */
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av)
        return xtool__fail(err, errlen, "out of memory");
    for (int i = 0; i < argc; i++) {
        if (!argv[i]) {
            free(av);
            return xtool__fail(err, errlen, "argument %d is NULL", i);
        }
        av[i] = argv[i];
    }
    av[argc] = NULL;

    int rc = 0;
    int saved_opterr = opterr;
    opterr = 0; /* messages are ours */
    optind = 0; /* glibc: a full re-initialization of getopt's state */
    for (;;) {
        int li = -1;
        int c = getopt_long(argc, av, ":h", longopts, &li);
        if (c == -1)
            break;
        if (c == 'h') {
            out->help = 1;
            continue;
        }
        if (c == ':' || c == '?') {
            const char *bad = optind > 0 && optind <= argc ? av[optind - 1] : "?";
            if (c == ':')
                rc = xtool__fail(err, errlen, "%s: option '%.80s' needs a value", argv[0], bad);
            else if (optopt && optopt < 256 && bad[0] == '-' && bad[1] != '-')
                rc = xtool__fail(err, errlen, "%s: unknown option '-%c'", argv[0], optopt);
            else if (optopt)
                rc = xtool__fail(err, errlen, "%s: option '%.80s' takes no value", argv[0], bad);
            else if (!strncmp(bad, "--scale", 7) && cmd != XTOOL_CLI_BENCH)
                rc = xtool__fail(err, errlen,
                                 "%s: unknown option '%.80s' (the score scale is --softmax-scale; "
                                 "--scale scales bench presets' lengths)",
                                 argv[0], bad);
            else
                rc = xtool__fail(err, errlen, "%s: unknown or ambiguous option '%.80s'", argv[0],
                                 bad);
            break;
        }
        const char *name = li >= 0 ? longopts[li].name : "?";
        rc = xtool__apply(out, c, name, optarg, err, errlen);
        if (rc)
            break;
    }
    if (!rc) {
        for (int i = optind; i < argc; i++) {
            if (cmd != XTOOL_CLI_COMPARE) {
                rc = xtool__fail(err, errlen, "%s: unexpected argument '%.80s'", argv[0], av[i]);
                break;
            }
            if (out->n_files >= XTOOL_CLI_MAX_FILES) {
                rc = xtool__fail(err, errlen, "compare: at most %d files", XTOOL_CLI_MAX_FILES);
                break;
            }
            out->files[out->n_files++] = av[i];
        }
    }
    opterr = saved_opterr;
    optind = 1;
    free(av);
    if (!rc && !out->help)
        rc = xtool__validate(out, err, errlen);
    return rc;
}

int xtool_cli_parse_lengths(const char *text, int32_t *lq, int32_t *lk, int cap, int *n, char *err,
                            size_t errlen)
{
    *n = 0;
    int line = 0;
    const char *p = text;
    while (p && *p) {
        line++;
        size_t len = strcspn(p, "\n");
        char buf[128];
        if (len >= sizeof buf)
            return xtool__fail(err, errlen, "line %d: too long (expected \"L\" or \"LQ LK\")",
                               line);
        memcpy(buf, p, len);
        buf[len] = '\0';
        p += len;
        if (*p == '\n')
            p++;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *tok[3] = {0};
        int nt = 0;
        for (char *s = buf; *s;) {
            while (*s == ' ' || *s == '\t' || *s == '\r' || *s == ',')
                s++;
            if (!*s)
                break;
            if (nt == 3)
                break;
            tok[nt++] = s;
            while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != ',')
                s++;
            if (*s)
                *s++ = '\0';
        }
        if (nt == 0)
            continue;
        if (nt > 2)
            return xtool__fail(err, errlen,
                               "line %d: more than two numbers (expected \"L\" or "
                               "\"LQ LK\")",
                               line);
        int64_t a, b = -1;
        if (xtool_parse_i64(tok[0], 0, 1 << 22, &a) ||
            (nt == 2 && xtool_parse_i64(tok[1], 0, 1 << 22, &b)))
            return xtool__fail(
                err, errlen,
                "line %d: '%s' is not a length (integers 0..4194304; \"L\" or "
                "\"LQ LK\")",
                line, nt == 2 && !xtool_parse_i64(tok[0], 0, 1 << 22, &a) ? tok[1] : tok[0]);
        if (*n >= cap)
            return xtool__fail(err, errlen, "line %d: more than %d sequences", line, cap);
        if (nt == 2) {
            lq[*n] = (int32_t)a;
            lk[*n] = (int32_t)b;
        } else {
            lq[*n] = -1;
            lk[*n] = (int32_t)a;
        }
        (*n)++;
    }
    if (*n == 0)
        return xtool__fail(err, errlen, "no lengths (one sequence a line: \"L\" or \"LQ LK\")");
    return 0;
}

/* ---- help ----------------------------------------------------------------- */

#define XTOOL__HELP_CASE                                                                           \
    "case:\n"                                                                                      \
    "  --dtype f32|f16|bf16             q/o dtype, and k/v unless --kv-dtype (default f32)\n"      \
    "  --kv-dtype f32|f16|bf16          k/v dtype\n"                                               \
    "  --batch N  --heads N  --kv-heads N (default 1, 8, = heads)\n"                               \
    "  --sq N  --sk N                   query and key lengths (default 256; --sk defaults to "     \
    "--sq)\n"                                                                                      \
    "  --head-dim N  --head-dim-v N     D and Dv, 1..256 (default 64; Dv defaults to D)\n"         \
    "  --layout bshd|bhsd               memory layout of q, k, v, o (default bshd)\n"              \
    "  --causal[=top-left|bottom-right] causal mask (default alignment bottom-right)\n"            \
    "  --window L,R                     sliding window around the query's position (negative = "   \
    "unbounded)\n"                                                                                 \
    "  --softcap X                      logit softcap X*tanh(s/X) (0 = off)\n"                     \
    "  --softmax-scale X                score scale (0 = 1/sqrt(D))\n"                             \
    "  --alibi  --bias  --lse           ALiBi slopes, an f32 bias [1,Hq,Sq,Sk], the LSE output\n"  \
    "  --splits N                       SPLITKV chunks (0 = automatic)\n"                          \
    "  --lengths FILE                   a padded batch: one sequence a line, \"L\" (key length, "  \
    "and\n"                                                                                        \
    "                                   query length unless --sq is given) or \"LQ LK\"; the "     \
    "batch\n"                                                                                      \
    "                                   size is the number of lines\n"                             \
    "  --seed N                         input data seed (default 42)\n"

static const char xtool__help_devices[] =
    "usage: xattn devices [--measure [--force]]\n"
    "  Lists every backend, whether it is usable here, and its devices.\n"
    "  --measure   also each device's ceilings (FMA throughput, read and copy bandwidth):\n"
    "              from the on-disk cache when it has them, else measured by the built-in\n"
    "              micro-benchmarks (seconds) and cached; bench and advise use them for % of\n"
    "              ceiling and the roofline\n"
    "  --force     measure again even when the cache has them\n";

static const char xtool__help_run[] =
    "usage: xattn run [options]\n"
    "  Runs one attention case: a warm-up call, then --reps timed calls; prints the time,\n"
    "  the phases, the full profiler record of the last call (work, bytes, memory, % of the\n"
    "  device's ceilings) and the error against the double-precision reference.\n"
    "  With no options: a small f32 case on the best available device.\n\n"
    "where:\n"
    "  --backend auto|cpu|opencl|cuda   backend (default auto: CUDA, then an OpenCL GPU, then "
    "the CPU)\n"
    "  --device N                       device index within the backend (default 0)\n"
    "  --algo auto|naive|flash|splitkv  algorithm (default auto)\n"
    "  --threads N                      CPU worker threads (0 = all)\n"
    "  --cpu-simd PATH                  CPU kernels: best (default), portable, avx2 or avx512\n"
    "                                   (a path the CPU lacks is an error)\n" XTOOL__HELP_CASE
    "  --varlen                         pack the --lengths batch (cu_seqlens) instead of padding\n"
    "measurement and outputs:\n"
    "  --reps N                         timed calls (default 5)\n"
    "  --warmup N                       untimed calls first (default 1)\n"
    "  --no-check                       skip the comparison with the reference\n"
    "  --check-limit F                  check a sub-batch (sequence 0, KV head 0) when the full\n"
    "                                   reference would need more than F FLOPs (default 2e10);\n"
    "                                   skip when that is still above F\n"
    "  --json FILE  --csv FILE          the profiler's records (schema xattn.records/1, "
    "docs/measurement.md)\n"
    "  --trace FILE                     a Chrome/Perfetto trace of the run\n"
    "exit status: 0 ok, 1 the run failed or disagrees with the reference, 2 bad command line\n";

static const char xtool__help_bench[] =
    "usage: xattn bench [--preset NAME] [options]\n"
    "  Benchmarks cases x algorithms x devices. With no options: the 'default' preset on\n"
    "  every device of every available backend with naive, flash and splitkv.\n"
    "  Each cell: --warmup calls, then timed calls until the relative spread (MAD / median)\n"
    "  is at most --max-spread (after --min-reps) or --cell-budget seconds are spent or\n"
    "  --max-reps calls are made; then one more call checked against the reference.\n"
    "  Writes DIR/results.json (schema xattn.bench/1, docs/tool.md), results.csv, chart.svg\n"
    "  and trace.json, and prints a table.\n\n"
    "where and what:\n"
    "  --preset NAME                    a preset (--list-presets); flags below override it\n"
    "                                   (--algo and --threads replace a family's own)\n"
    "  --cases FILE                     replay a captured model's attention calls (a cases file,\n"
    "                                   schema xattn.cases/1, from the Python package's capture)\n"
    "                                   and sum them into the model's attention time per forward\n"
    "  --scale F                        multiply the preset's lengths by F (default: 1 with a\n"
    "                                   GPU among the devices, else 0.125; 'default' is 1)\n"
    "  --quick                          fewer lengths (the first two of each family)\n"
    "  --backend LIST                   cpu,opencl,cuda (default: every available one)\n"
    "  --device N                       only device N of each backend (default: every device)\n"
    "  --algo LIST                      naive,flash,splitkv,auto or all (default all three)\n"
    "  --threads LIST                   CPU worker threads, a sweep axis: 1,2 or 1..8 (0 = all);\n"
    "                                   CPU cells only: other backends run once, without it;\n"
    "                                   several counts add a thread-scaling block\n"
    "  --cpu-simd PATH                  CPU kernels: best (default), portable, avx2 or avx512\n"
    "                                   (a path the CPU lacks is an error)\n"
    "sweep axes (lists: 128,256 or 128..4096 doubling; --sk follows --sq unless given):\n"
    "  --dtype LIST  --batch LIST  --heads LIST  --kv-heads LIST  --sq LIST  --sk LIST\n"
    "  --head-dim LIST  --head-dim-v LIST, and the single-valued case flags:\n" XTOOL__HELP_CASE
    "  --varlen                         pack the --lengths batch instead of padding it\n"
    "measurement:\n"
    "  --warmup N (1)  --min-reps N (5)  --max-reps N (200)  --max-spread R (0.05)\n"
    "  --cell-budget S                  seconds of timed calls per cell (default 1)\n"
    "  --no-check                       skip the reference; --check-limit F as for run (default "
    "4e9)\n"
    "  --measure-ceilings               measure each device's ceilings first when not cached\n"
    "outputs:\n"
    "  --out DIR                        output folder (default xattn-results)\n"
    "  --chart time|gflops              the chart's y axis (default time)\n"
    "  --progress / --no-progress       progress bar on stderr (default: when a terminal)\n"
    "A/B re-measurement (instead of the cells above; writes DIR/ab.json):\n"
    "  --ab OLD_XATTN                   every cell timed with OLD_XATTN and with this xattn,\n"
    "                                   alternating run by run ('xattn run --reps MIN_REPS'\n"
    "                                   each), judged on the paired ratios new/old\n"
    "  --ab-rounds N                    pairs per cell (default 5, the fewest that can judge)\n"
    "exit status: 0 ok, 1 a cell failed or disagreed with the reference, 2 bad command line\n";

static const char xtool__help_check[] =
    "usage: xattn check [options]\n"
    "  Runs every available backend x algorithm x feature (causal in both alignments,\n"
    "  windows, bias, ALiBi, softcap, GQA/MQA, padded and packed batches, f16/bf16 and mixed\n"
    "  dtypes, Dv != D, odd head dims, BHSD, LSE, decode) on small shapes against the\n"
    "  double-precision reference, with outputs poisoned first, and prints a matrix.\n"
    "  --backend LIST  --device N  --algo LIST   restrict the matrix\n"
    "  --filter TEXT                   only features whose name contains TEXT\n"
    "  --quick                         a smaller set of features\n"
    "  --threads N  --cpu-simd PATH  --seed N  --verbose (every cell's error)\n"
    "  --json FILE                     the matrix as JSON\n"
    "exit status: 0 all passed, 1 a mismatch or a failure, 2 bad command line\n";

static const char xtool__help_compare[] =
    "usage: xattn compare A.json B.json [C.json ...] [--svg FILE] [--csv FILE]\n"
    "  Matches the cells of xattn bench result files (same backend, device index, algorithm\n"
    "  and case) and prints the ratio of each file's median to the first file's. A change\n"
    "  is real only when the two [min, p90] intervals do not overlap and the ratio is\n"
    "  beyond both runs' relative spread; otherwise it is within noise. The drift of the\n"
    "  machine between two separate runs is not measured (each file's load is shown): to\n"
    "  measure a change, alternate the builds cell by cell with xattn bench --ab OLD_XATTN.\n"
    "  --svg FILE          a chart of the ratios\n"
    "  --csv FILE          the table as CSV\n"
    "  --fail-on-slower    exit 1 when a cell is really slower than in A\n"
    "exit status: 0, 1 (--fail-on-slower and a real slowdown, or a file cannot be used),\n"
    "2 bad command line or unreadable file\n";

static const char xtool__help_advise[] =
    "usage: xattn advise [options]\n"
    "  For one shape: on every device of every available backend, measures naive, flash\n"
    "  and splitkv (time and workspace memory), places the shape on the device's roofline\n"
    "  (arithmetic intensity vs the ridge point FMA ceiling / bandwidth), and with\n"
    "  --lengths the padding waste of the padded batch vs a packed (varlen) one, measured\n"
    "  both ways; then recommends.\n\n"
    "  --backend LIST  --device N  --threads N  --cpu-simd PATH  --json FILE\n" XTOOL__HELP_CASE
    "  --cell-budget S (0.5)  --max-spread R  --min-reps N  --max-reps N  --warmup N\n"
    "  --measure-ceilings               measure the ceilings when not cached (seconds)\n";

const char *xtool_cli_help_text(xtool_cli_cmd cmd)
{
    switch (cmd) {
    case XTOOL_CLI_DEVICES: return xtool__help_devices;
    case XTOOL_CLI_RUN: return xtool__help_run;
    case XTOOL_CLI_BENCH: return xtool__help_bench;
    case XTOOL_CLI_CHECK: return xtool__help_check;
    case XTOOL_CLI_COMPARE: return xtool__help_compare;
    case XTOOL_CLI_ADVISE: return xtool__help_advise;
    default: return "";
    }
}
