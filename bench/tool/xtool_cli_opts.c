/*
 * Command-line parsing of the xattn tool: one pure function for every
 * subcommand (xtool_cli_parse), driven by the table of options
 * (xtool_cli_table.c): getopt_long's options, each kind's reading and range
 * check with its message, the defaults, and the values a command takes one of.
 * Nothing here prints, reads files or exits; a fuzz target may call these
 * functions with any input.
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
#include "xtool_cli_table.h"
#include "xtool_parse.h"

xtool_cli_cmd xtool_cli_cmd_from_name(const char *name)
{
    for (int i = 1; name && i < XTOOL_CLI_CMD_COUNT; i++)
        if (!strcmp(name, xtool_cmd_defs[i].name))
            return (xtool_cli_cmd)i;
    return XTOOL_CLI_NONE;
}

const char *xtool_cli_cmd_name(xtool_cli_cmd cmd)
{
    return cmd > XTOOL_CLI_NONE && cmd < XTOOL_CLI_CMD_COUNT ? xtool_cmd_defs[cmd].name : "?";
}

/* The --cpu-simd words are the row's choices, in XATTN_OPT_CPU_SIMD order. */
const char *xtool_cli_simd_name(int value)
{
    for (size_t i = 0; i < xtool_opt_ndefs; i++) {
        const xtool_opt_def *d = &xtool_opt_defs[i];
        if (d->kind != XTOOL_ARG_CHOICE || strcmp(d->name, "cpu-simd"))
            continue;
        for (int k = 0; d->choices[k]; k++)
            if (k == value)
                return d->choices[k];
    }
    return "?";
}

double xtool_cli_default_check_limit(xtool_cli_cmd cmd)
{
    const char *d = xtool_opt_default(cmd, "check-limit");
    return d ? strtod(d, NULL) : 0;
}

int xtool_cli_fail(char *err, size_t errlen, const char *fmt, ...)
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
        return xtool_cli_fail(err, errlen, "--%s: empty value (expected N, N,M,... or A..B)", flag);
    while (*p) {
        char item[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item)
            return xtool_cli_fail(
                err, errlen, "--%s: '%s' is not a list of integers (N,M,... or A..B)", flag, arg);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len;
        if (*p == ',') {
            p++;
            if (!*p)
                return xtool_cli_fail(err, errlen, "--%s: '%s' ends with a comma", flag, arg);
        }
        char *dots = strstr(item, "..");
        int64_t a, b;
        if (dots) {
            *dots = '\0';
            if (xtool_parse_i64(item, lo, hi, &a) || xtool_parse_i64(dots + 2, lo, hi, &b) || b < a)
                return xtool_cli_fail(err, errlen,
                                      "--%s: '%s' is not a range A..B with %lld <= A <= B <= %lld",
                                      flag, arg, (long long)lo, (long long)hi);
            for (int64_t v = a;; v *= 2) {
                if (out->n >= XTOOL_CLI_MAX_LIST)
                    return xtool_cli_fail(err, errlen, "--%s: more than %d values", flag,
                                          XTOOL_CLI_MAX_LIST);
                out->v[out->n++] = v;
                if (v == 0 || v > b / 2)
                    break;
            }
        } else {
            if (xtool_parse_i64(item, lo, hi, &a))
                return xtool_cli_fail(err, errlen, "--%s: '%s' is not an integer in %lld..%lld",
                                      flag, item, (long long)lo, (long long)hi);
            if (out->n >= XTOOL_CLI_MAX_LIST)
                return xtool_cli_fail(err, errlen, "--%s: more than %d values", flag,
                                      XTOOL_CLI_MAX_LIST);
            out->v[out->n++] = a;
        }
    }
    return 0;
}

/* Splits "a,b" into its items and calls one(item) for each; repeats are dropped. */
static int xtool__names(const char *flag, const char *arg, int max, int *n, int *vals,
                        int (*one)(const char *, int *), const char *expected, char *err,
                        size_t errlen)
{
    *n = 0;
    const char *p = arg;
    if (!*p)
        return xtool_cli_fail(err, errlen, "--%s: empty value (expected %s)", flag, expected);
    while (*p) {
        char item[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item)
            return xtool_cli_fail(err, errlen, "--%s: '%s' is not a list of %s", flag, arg,
                                  expected);
        memcpy(item, p, len);
        item[len] = '\0';
        p += len;
        if (*p == ',' && !*++p)
            return xtool_cli_fail(err, errlen, "--%s: '%s' ends with a comma", flag, arg);
        int v;
        if (one(item, &v))
            return xtool_cli_fail(err, errlen, "--%s: '%s' is not %s", flag, item, expected);
        int dup = 0;
        for (int i = 0; i < *n; i++)
            dup |= vals[i] == v;
        if (dup)
            continue;
        if (*n >= max)
            return xtool_cli_fail(err, errlen, "--%s: too many values in '%s'", flag, arg);
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

/* q's dtypes (f32, f16, bf16: the fp8 ones are for K/V only). */
static int xtool__one_dtype(const char *s, int *v)
{
    for (int i = 0; i < XATTN_DTYPE_FP8_E4M3; i++)
        if (!strcmp(s, xattn_dtype_name((xattn_dtype)i))) {
            *v = i;
            return 0;
        }
    return -1;
}

/* K/V's dtypes: every dtype. */
static int xtool__one_kv_dtype(const char *s, int *v)
{
    for (int i = 0; i < XATTN_DTYPE_COUNT; i++)
        if (!strcmp(s, xattn_dtype_name((xattn_dtype)i))) {
            *v = i;
            return 0;
        }
    return -1;
}

/* "the commands that take a list" of a row: its commands without .one_value. */
static void xtool__list_cmds(const xtool_opt_def *d, char *out, size_t n)
{
    size_t k = 0;
    int count = 0, total = 0;
    for (int c = 1; c < XTOOL_CLI_CMD_COUNT; c++)
        total += (d->cmds & ~d->one_value & XTOOL_CMD_BIT(c)) != 0;
    out[0] = '\0';
    for (int c = 1; c < XTOOL_CLI_CMD_COUNT && k < n; c++) {
        if (!(d->cmds & ~d->one_value & XTOOL_CMD_BIT(c)))
            continue;
        count++;
        k += (size_t)snprintf(out + k, n - k, "%s%s",
                              count == 1       ? ""
                              : count == total ? " and "
                                               : ", ",
                              xtool_cli_cmd_name((xtool_cli_cmd)c));
    }
}

/* A list-valued option given several values where the command takes one. */
static int xtool__one_value(const xtool_cli_opts *o, const xtool_opt_def *d, int n, char *err,
                            size_t errlen)
{
    if (n <= 1 || !(d->one_value & XTOOL_CMD_BIT(o->cmd)))
        return 0;
    char cmds[64];
    xtool__list_cmds(d, cmds, sizeof cmds);
    return xtool_cli_fail(err, errlen, "%s: --%s takes one value here (a list is for xattn %s)",
                          xtool_cli_cmd_name(o->cmd), d->name, cmds);
}

/* ---- the custom parsers of the table ------------------------------------------- */

int xtool_opt_parse_backend(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                            size_t errlen)
{
    int vals[XATTN_BACKEND_COUNT + 1], n;
    if (xtool__names(d->name, arg, XATTN_BACKEND_COUNT + 1, &n, vals, xtool__one_backend,
                     "auto, cpu, opencl or cuda", err, errlen))
        return XTOOL_EXIT_USAGE;
    o->n_backends = n;
    for (int i = 0; i < n; i++)
        o->backends[i] = (xattn_backend)vals[i];
    return xtool__one_value(o, d, n, err, errlen);
}

int xtool_opt_parse_algo(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                         size_t errlen)
{
    int vals[XATTN_ALGO_COUNT], n;
    if (!strcmp(arg, "all")) {
        n = 3;
        vals[0] = XATTN_ALGO_NAIVE;
        vals[1] = XATTN_ALGO_FLASH;
        vals[2] = XATTN_ALGO_SPLITKV;
    } else if (xtool__names(d->name, arg, XATTN_ALGO_COUNT, &n, vals, xtool__one_algo,
                            "auto, naive, flash, splitkv or all", err, errlen)) {
        return XTOOL_EXIT_USAGE;
    }
    o->n_algos = n;
    for (int i = 0; i < n; i++)
        o->algos[i] = (xattn_algo)vals[i];
    return xtool__one_value(o, d, n, err, errlen);
}

int xtool_opt_parse_dtype(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                          size_t errlen)
{
    int vals[XATTN_DTYPE_COUNT], n;
    if (xtool__names(d->name, arg, XATTN_DTYPE_COUNT, &n, vals, xtool__one_dtype,
                     "f32, f16 or bf16", err, errlen))
        return XTOOL_EXIT_USAGE;
    o->n_dtypes = n;
    for (int i = 0; i < n; i++)
        o->dtypes[i] = (xattn_dtype)vals[i];
    return xtool__one_value(o, d, n, err, errlen);
}

int xtool_opt_parse_kv_dtype(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                             size_t errlen)
{
    int v;
    if (xtool__one_kv_dtype(arg, &v))
        return xtool_cli_fail(err, errlen,
                              "--%s: '%s' is not f32, f16, bf16, fp8e4m3, fp8e5m2 or q8_0", d->name,
                              arg);
    o->kv_dtype = v;
    return 0;
}

int xtool_opt_parse_causal(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                           size_t errlen)
{
    if (!arg || !strcmp(arg, "bottom-right") || !strcmp(arg, "br"))
        o->align = XATTN_ALIGN_BOTTOM_RIGHT;
    else if (!strcmp(arg, "top-left") || !strcmp(arg, "tl"))
        o->align = XATTN_ALIGN_TOP_LEFT;
    else
        return xtool_cli_fail(err, errlen, "--%s: '%s' is not top-left or bottom-right", d->name,
                              arg);
    o->causal = 1;
    return 0;
}

int xtool_opt_parse_window(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                           size_t errlen)
{
    const char *comma = strchr(arg, ',');
    char left[32];
    int64_t l, r;
    size_t len = comma ? (size_t)(comma - arg) : 0;
    if (!comma || len >= sizeof left)
        return xtool_cli_fail(err, errlen,
                              "--%s: '%s' is not L,R (keys left and right of the query's "
                              "position; negative = unbounded)",
                              d->name, arg);
    memcpy(left, arg, len);
    left[len] = '\0';
    if (xtool_parse_i64(left, INT64_MIN / 2, 1 << 30, &l) ||
        xtool_parse_i64(comma + 1, INT64_MIN / 2, 1 << 30, &r))
        return xtool_cli_fail(err, errlen,
                              "--%s: '%s' is not L,R with integers up to 2^30 (negative = "
                              "unbounded)",
                              d->name, arg);
    o->window_left = l < 0 ? -1 : l;
    o->window_right = r < 0 ? -1 : r;
    return 0;
}

/* A list for bench (a sweep axis); the other commands take one value. */
int xtool_opt_parse_threads(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                            size_t errlen)
{
    if (xtool__ilist(d->name, arg, 0, 4096, &o->thread_list, err, errlen))
        return XTOOL_EXIT_USAGE;
    o->threads = (int)o->thread_list.v[0];
    return xtool__one_value(o, d, o->thread_list.n, err, errlen);
}

int xtool_opt_parse_force(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                          size_t errlen)
{
    (void)d;
    (void)arg;
    (void)err;
    (void)errlen;
    o->measure = o->force = 1;
    return 0;
}

/* ---- the common kinds ---------------------------------------------------------- */

/* "--NAME: 'VALUE' is not EXPECTED", EXPECTED from the row or its range. */
static int xtool__bad_value(const xtool_opt_def *d, const char *arg, char *err, size_t errlen)
{
    char expected[160];
    if (d->expected)
        snprintf(expected, sizeof expected, "%s", d->expected);
    else if (d->kind == XTOOL_ARG_INT || d->kind == XTOOL_ARG_U64)
        snprintf(expected, sizeof expected, "an integer in %lld..%lld", (long long)d->ilo,
                 (long long)d->ihi);
    else
        snprintf(expected, sizeof expected, "a number in %g..%g", d->dlo, d->dhi);
    return xtool_cli_fail(err, errlen, "--%s: '%s' is not %s", d->name, arg, expected);
}

static int xtool__choice(const xtool_opt_def *d, const char *arg, int *out, char *err,
                         size_t errlen)
{
    int n = 0;
    for (; d->choices[n]; n++)
        if (!strcmp(arg, d->choices[n])) {
            *out = n;
            return 0;
        }
    char words[160];
    size_t k = 0;
    for (int i = 0; i < n && k < sizeof words; i++)
        k += (size_t)snprintf(words + k, sizeof words - k, "%s%s",
                              i == 0       ? ""
                              : i == n - 1 ? " or "
                                           : ", ",
                              d->choices[i]);
    return xtool_cli_fail(err, errlen, "--%s: '%s' is not %s", d->name, arg, words);
}

/* Reads one option's value into o. Returns 0 or XTOOL_EXIT_USAGE with err set. */
static int xtool__apply(xtool_cli_opts *o, const xtool_opt_def *d, const char *arg, char *err,
                        size_t errlen)
{
    void *field = (char *)o + d->off; /* the row's field, of the kind's type */
    int64_t v;
    double x;
    switch (d->kind) {
    case XTOOL_ARG_FLAG: *(int *)field = d->ival; return 0;
    case XTOOL_ARG_INT:
    case XTOOL_ARG_U64:
        if (xtool_parse_i64(arg, d->ilo, d->ihi, &v))
            return xtool__bad_value(d, arg, err, errlen);
        if (d->kind == XTOOL_ARG_INT)
            *(int *)field = (int)v;
        else
            *(uint64_t *)field = (uint64_t)v;
        return 0;
    case XTOOL_ARG_NUM:
    case XTOOL_ARG_FLOAT:
        if (xtool__dbl(arg, d->dlo, d->dhi, &x))
            return xtool__bad_value(d, arg, err, errlen);
        if (d->kind == XTOOL_ARG_NUM)
            *(double *)field = x;
        else
            *(float *)field = (float)x;
        return 0;
    case XTOOL_ARG_LIST: {
        xtool_cli_ilist *l = field;
        if (xtool__ilist(d->name, arg, d->ilo, d->ihi, l, err, errlen))
            return XTOOL_EXIT_USAGE;
        return xtool__one_value(o, d, l->n, err, errlen);
    }
    case XTOOL_ARG_CHOICE: return xtool__choice(d, arg, field, err, errlen);
    case XTOOL_ARG_TEXT:
        if (!*arg && !d->ival)
            return xtool_cli_fail(err, errlen, "--%s: empty %s", d->name,
                                  d->expected ? d->expected : "value");
        *(const char **)field = arg;
        return 0;
    case XTOOL_ARG_CUSTOM: return d->parse(o, d, arg, err, errlen);
    }
    return xtool_cli_fail(err, errlen, "internal: --%s has no kind", d->name);
}

/* The rows of a command (refusals included), in getopt_long's form; longopts
 * has room for every row and one terminator. .val is the row's index. */
static int xtool__longopts(xtool_cli_cmd cmd, struct option *longopts)
{
    int nl = 0;
    for (size_t i = 0; i < xtool_opt_ndefs; i++) {
        const xtool_opt_def *d = &xtool_opt_defs[i];
        if (!(d->cmds & XTOOL_CMD_BIT(cmd)))
            continue;
        longopts[nl].name = d->name;
        longopts[nl].has_arg = d->refused || d->optional_value        ? optional_argument
                               : d->kind == XTOOL_ARG_FLAG || !d->arg ? no_argument
                                                                      : required_argument;
        longopts[nl].flag = NULL;
        longopts[nl].val = 256 + (int)i;
        nl++;
    }
    memset(&longopts[nl], 0, sizeof longopts[nl]);
    return nl;
}

/* Every field at its default: zeros, the sentinels of "not given", then each
 * row's default through its own parser (so that help and behaviour agree). */
static int xtool__defaults(xtool_cli_opts *o, xtool_cli_cmd cmd, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->device = -1; /* every device (run's row has its own default) */
    o->kv_dtype = -1;
    o->align = XATTN_ALIGN_BOTTOM_RIGHT;
    o->window_left = o->window_right = -1;
    o->progress = -1;
    o->check = 1;
    for (size_t i = 0; i < xtool_opt_ndefs; i++) {
        const xtool_opt_def *d = &xtool_opt_defs[i];
        if ((d->cmds & XTOOL_CMD_BIT(cmd)) && d->dflt && !d->refused &&
            xtool__apply(o, d, d->dflt, err, errlen))
            return xtool_cli_fail(err, errlen, "internal: --%s's default '%s' does not parse",
                                  d->name, d->dflt);
    }
    return 0;
}

/* The rules between options (each option's own value is checked as it is
 * read): heads divisible by kv-heads, files where the command needs them,
 * options that need or exclude another. */
static int xtool__cross_check(xtool_cli_opts *o, char *err, size_t errlen)
{
    const char *cmd = xtool_cli_cmd_name(o->cmd);
    if (o->varlen && !o->lengths_path)
        return xtool_cli_fail(err, errlen,
                              "%s: --varlen packs the batch of --lengths FILE; give one", cmd);
    /* Every heads value must be a multiple of every kv-heads value that applies. */
    xtool_cli_ilist hd = o->heads;
    if (!hd.n) {
        hd.n = 1;
        hd.v[0] = 8;
    }
    for (int i = 0; i < hd.n; i++)
        for (int j = 0; j < o->kv_heads.n; j++)
            if (hd.v[i] % o->kv_heads.v[j])
                return xtool_cli_fail(err, errlen,
                                      "%s: %lld query heads are not a multiple of %lld KV heads "
                                      "(--heads, --kv-heads: GQA needs Hq = g * Hkv)",
                                      cmd, (long long)hd.v[i], (long long)o->kv_heads.v[j]);
    if (o->cmd == XTOOL_CLI_COMPARE && o->n_files < 2 && !o->help)
        return xtool_cli_fail(
            err, errlen, "compare: give at least two result files (xattn bench's results.json)");
    if (o->cmd == XTOOL_CLI_BENCH || o->cmd == XTOOL_CLI_ADVISE) {
        if (o->min_reps > o->reps && (o->given & XTOOL_GIVEN_REPS))
            return xtool_cli_fail(err, errlen, "%s: --min-reps %d is above --max-reps %d", cmd,
                                  o->min_reps, o->reps);
        if (o->min_reps > o->reps)
            o->reps = o->min_reps;
    }
    if (o->cases_path && (o->preset || (o->given & XTOOL_GIVEN_CASE_MASK)))
        return xtool_cli_fail(
            err, errlen,
            "bench: --cases FILE brings its own cases: it takes no --preset and no "
            "case flags (--dtype, --sq, --causal, ...)");
    const char *ab_rounds = xtool_opt_default(o->cmd, "ab-rounds");
    if (ab_rounds && o->ab_rounds != atoi(ab_rounds) && !o->ab_old)
        return xtool_cli_fail(err, errlen, "bench: --ab-rounds needs --ab OLD_XATTN");
    if (o->ab_old && (o->passes > 1 || o->budget > 0))
        return xtool_cli_fail(err, errlen,
                              "bench: --passes and --budget do not apply to --ab (its rounds "
                              "already alternate the two builds; --ab-rounds sets how many)");
    if (o->preset && (o->given & XTOOL_GIVEN_LENGTHS))
        return xtool_cli_fail(err, errlen,
                              "bench: --lengths replaces a preset's lengths only "
                              "without --preset (bert-base-padded has its own)");
    return 0;
}

/* The message of getopt_long's complaint about av[optind - 1]. */
static int xtool__getopt_error(int c, int argc, char **av, const char *cmd, char *err,
                               size_t errlen)
{
    const char *bad = optind > 0 && optind <= argc ? av[optind - 1] : "?";
    if (c == ':')
        return xtool_cli_fail(err, errlen, "%s: option '%.80s' needs a value", cmd, bad);
    if (optopt && optopt < 256 && bad[0] == '-' && bad[1] != '-')
        return xtool_cli_fail(err, errlen, "%s: unknown option '-%c'", cmd, optopt);
    if (optopt)
        return xtool_cli_fail(err, errlen, "%s: option '%.80s' takes no value", cmd, bad);
    return xtool_cli_fail(err, errlen, "%s: unknown or ambiguous option '%.80s'", cmd, bad);
}

/* The options of argv (a copy: getopt_long permutes it), then the operands. */
static int xtool__read_args(int argc, char **av, xtool_cli_opts *out, char *err, size_t errlen)
{
    struct option longopts[XTOOL_OPT_MAX_DEFS + 1];
    xtool__longopts(out->cmd, longopts);
    const char *cmd = av[0];
    int rc = 0;
    int saved_opterr = opterr;
    opterr = 0; /* messages are ours */
    optind = 0; /* glibc: a full re-initialization of getopt's state */
    for (;;) {
        int c = getopt_long(argc, av, ":h", longopts, NULL);
        if (c == -1)
            break;
        if (c == 'h') {
            out->help = 1;
            continue;
        }
        if (c == ':' || c == '?') {
            rc = xtool__getopt_error(c, argc, av, cmd, err, errlen);
            break;
        }
        const xtool_opt_def *d = &xtool_opt_defs[c - 256];
        if (d->refused) {
            rc = xtool_cli_fail(err, errlen, "%s: --%s is not an option here: %s", cmd, d->name,
                                d->refused);
            break;
        }
        rc = xtool__apply(out, d, optarg, err, errlen);
        if (rc)
            break;
        out->given |= d->given;
    }
    for (int i = optind; !rc && i < argc; i++) {
        if (out->cmd != XTOOL_CLI_COMPARE)
            rc = xtool_cli_fail(err, errlen, "%s: unexpected argument '%.80s'", cmd, av[i]);
        else if (out->n_files >= XTOOL_CLI_MAX_FILES)
            rc = xtool_cli_fail(err, errlen, "compare: at most %d files", XTOOL_CLI_MAX_FILES);
        else
            out->files[out->n_files++] = av[i];
    }
    opterr = saved_opterr;
    optind = 1;
    return rc;
}

int xtool_cli_parse(int argc, char **argv, xtool_cli_opts *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out)
        return xtool_cli_fail(err, errlen, "internal: no output struct");
    memset(out, 0, sizeof *out);
    if (argc < 1 || !argv || !argv[0])
        return xtool_cli_fail(err, errlen,
                              "no command (devices, run, bench, check, compare, advise, tune)");
    xtool_cli_cmd cmd = xtool_cli_cmd_from_name(argv[0]);
    if (cmd == XTOOL_CLI_NONE)
        return xtool_cli_fail(
            err, errlen,
            "'%.64s' is not a command (devices, run, bench, check, compare, advise, tune)",
            argv[0]);
    int rc = xtool__defaults(out, cmd, err, errlen);
    if (rc)
        return rc;
    if (argc > 4096)
        return xtool_cli_fail(err, errlen, "%s: too many arguments (%d)", argv[0], argc);
    /* getopt_long permutes its argv: work on a copy of the pointers. */
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av)
        return xtool_cli_fail(err, errlen, "out of memory");
    for (int i = 0; i < argc; i++) {
        if (!argv[i]) {
            free(av);
            return xtool_cli_fail(err, errlen, "argument %d is NULL", i);
        }
        av[i] = argv[i];
    }
    av[argc] = NULL;
    rc = xtool__read_args(argc, av, out, err, errlen);
    free(av);
    if (!rc && !out->help)
        rc = xtool__cross_check(out, err, errlen);
    return rc;
}
