/*
 * xattn bench --ab OLD_XATTN: the re-measurement that a comparison of two
 * separate runs cannot give. Every cell of the bench run (device x case x
 * algorithm x CPU threads) is timed ROUNDS times with each build, the two
 * builds one right after the other, their order alternating from round to
 * round (old-new, new-old, ...), so that the machine's drift hits both alike
 * and cancels in each pair's ratio new/old. The verdict comes from those
 * paired ratios (xtool_stats_paired), never from times taken minutes apart.
 *
 * Each side of a pair is a process, `XATTN run --no-check --reps R ...` with
 * the cell's options, whose `time` line gives the median of R timed calls;
 * the new side is this binary run the same way, so both pay the same costs.
 * Writes out_dir/ab.json (schema xattn.ab/1) with every run in the order made.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xtool_bench.h"

#define XTOOL__AB_ARGS 80
#define XTOOL__AB_MIN_EFFECT 0.01 /* a median ratio within 1% of 1 is no change */

typedef struct xtool__ab_cell {
    int target, case_idx, threads;
    xattn_algo algo;
    int ok;
    char error[320];
    int n;          /* pairs made */
    double *old_ms; /* [rounds]: each run's median */
    double *new_ms;
    double *ratio;   /* new / old */
    char *new_first; /* [rounds]: 1 when the round ran the new build first */
    xtool_paired st; /* of the ratios */
    double old_med, new_med;
    xtool_stats old_st, new_st; /* of each build's run medians: their 95% intervals */
    double side_ratio;          /* new_st.median / old_st.median */
    xtool_verdict verdict;      /* the one rule: the two intervals separate */
} xtool__ab_cell;

/* The argv of `run` for one cell: strings kept in buf. */
typedef struct xtool__argv {
    char *v[XTOOL__AB_ARGS + 1];
    int n;
    char buf[4096];
    size_t used;
} xtool__argv;

static void xtool__arg(xtool__argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xtool__arg(xtool__argv *a, const char *fmt, ...)
{
    if (a->n >= XTOOL__AB_ARGS || a->used >= sizeof a->buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(a->buf + a->used, sizeof a->buf - a->used, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof a->buf - a->used)
        return;
    a->v[a->n++] = a->buf + a->used;
    a->used += (size_t)k + 1;
}

/* Writes the lengths of a padded or packed case as "LQ LK" lines. */
static int xtool__write_lengths(const char *path, const xtool_case *c)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# xattn bench --ab: the lengths of %lld sequences (query, key)\n",
            (long long)c->batch);
    for (int64_t b = 0; b < c->batch; b++)
        fprintf(f, "%d %d\n", c->seqlens_q ? c->seqlens_q[b] : (int)c->sq,
                c->seqlens_k ? c->seqlens_k[b] : (int)c->sk);
    return fclose(f);
}

/* `run` options that give the case c (only those that differ from run's
 * defaults, so that an older build that lacks a newer flag still runs the
 * cases it knows). */
static void xtool__case_args(xtool__argv *a, const xtool_case *c, const char *lengths)
{
    xtool__arg(a, "--dtype");
    xtool__arg(a, "%s", xattn_dtype_name(c->dtype));
    if (c->kv_dtype != c->dtype) {
        xtool__arg(a, "--kv-dtype");
        xtool__arg(a, "%s", xattn_dtype_name(c->kv_dtype));
    }
    const char *names[] = {"--batch", "--heads",    "--kv-heads",  "--sq",
                           "--sk",    "--head-dim", "--head-dim-v"};
    const int64_t vals[] = {c->batch, c->heads,    c->kv_heads,  c->sq,
                            c->sk,    c->head_dim, c->head_dim_v};
    for (int i = 0; i < 7; i++) {
        xtool__arg(a, "%s", names[i]);
        xtool__arg(a, "%lld", (long long)vals[i]);
    }
    if (c->bhsd) {
        xtool__arg(a, "--layout");
        xtool__arg(a, "bhsd");
    }
    if (c->causal)
        xtool__arg(a, "--causal=%s",
                   c->align == XATTN_ALIGN_TOP_LEFT ? "top-left" : "bottom-right");
    if (c->window_left >= 0 || c->window_right >= 0) {
        xtool__arg(a, "--window");
        xtool__arg(a, "%lld,%lld", (long long)c->window_left, (long long)c->window_right);
    }
    if (c->softcap > 0) {
        xtool__arg(a, "--softcap");
        xtool__arg(a, "%.9g", (double)c->softcap);
    }
    if (c->scale != 0) {
        xtool__arg(a, "--softmax-scale");
        xtool__arg(a, "%.9g", (double)c->scale);
    }
    if (c->alibi)
        xtool__arg(a, "--alibi");
    if (c->bias)
        xtool__arg(a, "--bias");
    if (c->lse)
        xtool__arg(a, "--lse");
    if (c->num_splits) {
        xtool__arg(a, "--splits");
        xtool__arg(a, "%d", c->num_splits);
    }
    if (lengths) {
        xtool__arg(a, "--lengths");
        xtool__arg(a, "%s", lengths);
        if (c->varlen)
            xtool__arg(a, "--varlen");
    }
    xtool__arg(a, "--seed");
    xtool__arg(a, "%llu", (unsigned long long)c->seed);
}

/* Runs argv (stdout and stderr into out) and returns its exit status, or -1. */
static int xtool__spawn(char *const *argv, char *out, size_t n)
{
    int fd[2];
    out[0] = '\0';
    if (pipe(fd) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, 0);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    /* The first n - 1 bytes (a run prints about 3 KiB); the rest is drained. */
    size_t len = 0;
    char chunk[4096];
    for (;;) {
        ssize_t got = read(fd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t take = (size_t)got < n - 1 - len ? (size_t)got : n - 1 - len;
        memcpy(out + len, chunk, take);
        len += take;
    }
    out[len] = '\0';
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The median of `xattn run`'s time line: "time     median M ms, ...". */
static int xtool__parse_median(const char *out, double *ms)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        double v;
        if (!strncmp(p, "time ", 5) && sscanf(p + 5, " median %lf ms", &v) == 1 && v >= 0) {
            *ms = v;
            return 0;
        }
    }
    return -1;
}

/* The last non-empty line of out (a failed run's message). */
static void xtool__last_line(const char *out, char *line, size_t n)
{
    size_t len = strlen(out);
    while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
        len--;
    size_t start = len;
    while (start && out[start - 1] != '\n')
        start--;
    snprintf(line, n, "%.*s", (int)(len - start), out + start);
}

static double xtool__median_of(const double *v, int n)
{
    xtool_stats s;
    return n > 0 && xtool_stats_compute(v, n, &s) == 0 ? s.median : NAN;
}

/* The --ab run: the builds, the protocol, the cells and what came of them. */
typedef struct xtool__ab {
    const xtool_bench_plan *p;
    const xtool_cli_opts *o;
    char self[4096];       /* this binary: the new build */
    char old_version[128]; /* OLD_XATTN --version */
    int rounds, reps;
    xtool__ab_cell *cells;
    int n; /* cells made */
    double *store;
    char *order;
    char created[40], host[128], os[192];
    double load_start[3], load_end[3];
    int failed, faster, slower;
    xtool_progress prog;
} xtool__ab;

/* ---- plan: the two builds and the cells --------------------------------------------- */

/* This binary's path, and OLD_XATTN checked to be an xattn binary. Returns 0
 * or an exit status with the message printed. */
static int xtool__ab_builds(xtool__ab *ab)
{
    const xtool_cli_opts *o = ab->o;
    ssize_t sl = readlink("/proc/self/exe", ab->self, sizeof ab->self - 1);
    if (sl <= 0) {
        fprintf(stderr,
                "%s: bench --ab: cannot find this program's own path (/proc/self/exe): %s\n",
                xtool_prog, strerror(errno));
        return XTOOL_EXIT_FAIL;
    }
    ab->self[sl] = '\0';
    if (access(o->ab_old, X_OK) != 0) {
        fprintf(stderr, "%s: bench: --ab: '%s' is not an executable (%s)\n", xtool_prog, o->ab_old,
                strerror(errno));
        return XTOOL_EXIT_USAGE;
    }
    char out[16384];
    char *ver_argv[] = {(char *)o->ab_old, "--version", NULL};
    int vrc = xtool__spawn(ver_argv, out, sizeof out);
    xtool__last_line(out, ab->old_version, sizeof ab->old_version);
    if (vrc != 0 || strncmp(out, "xattn ", 6) != 0) {
        fprintf(stderr,
                "%s: bench: --ab: '%s' is not an xattn binary ('%s --version' exited %d: %.80s)\n",
                xtool_prog, o->ab_old, o->ab_old, vrc, ab->old_version);
        return XTOOL_EXIT_USAGE;
    }
    return 0;
}

/* The argv of one side (0 old, 1 new) of a cell: `BUILD run` with the
 * cell's options. */
static void xtool__ab_argv(const xtool__ab *ab, const xtool__ab_cell *c, const char *lengths,
                           int side, xtool__argv *a)
{
    const xtool_cli_opts *o = ab->o;
    const xtool_target *t = &ab->p->targets[c->target];
    memset(a, 0, sizeof *a);
    xtool__arg(a, "%s", side ? ab->self : o->ab_old);
    xtool__arg(a, "run");
    xtool__arg(a, "--backend");
    xtool__arg(a, "%s", xattn_backend_name(t->backend));
    xtool__arg(a, "--device");
    xtool__arg(a, "%d", t->device);
    xtool__arg(a, "--algo");
    xtool__arg(a, "%s", xattn_algo_name(c->algo));
    xtool__arg(a, "--no-check");
    xtool__arg(a, "--warmup");
    xtool__arg(a, "%d", o->warmup);
    xtool__arg(a, "--reps");
    xtool__arg(a, "%d", ab->reps);
    if (c->threads > 0) {
        xtool__arg(a, "--threads");
        xtool__arg(a, "%d", c->threads);
    }
    if (o->cpu_simd && t->backend == XATTN_BACKEND_CPU) {
        xtool__arg(a, "--cpu-simd");
        xtool__arg(a, "%s", xtool_cli_simd_name(o->cpu_simd));
    }
    xtool__case_args(a, &ab->p->cases[c->case_idx].c, lengths[0] ? lengths : NULL);
    a->v[a->n] = NULL;
}

static void xtool__ab_header(const xtool__ab *ab)
{
    const xtool_cli_opts *o = ab->o;
    printf("xattn bench %s --ab: %s%s, %d cells, each timed %d times with each build\n",
           xattn_version_string(), ab->p->preset ? "preset " : "a sweep from the command line",
           ab->p->preset ? ab->p->preset : "", ab->p->cells, ab->rounds);
    printf("old      %s (%s)\nnew      %s (xattn %s)\n", o->ab_old, ab->old_version, ab->self,
           xattn_version_string());
    printf("protocol each round runs the cell with both builds back to back, old first in odd "
           "rounds and new first in even ones, each as 'xattn run --no-check --warmup %d --reps "
           "%d'; old ms and new ms: the medians of each build's runs, with their 95%% "
           "order-statistic intervals ([min, max] up to 5 rounds); ratio = new / old; a change "
           "is real only when the two intervals separate, else within noise. 'paired' is the "
           "interval (>= 90%%) of the median of the pairs' ratios new/old, where the machine's "
           "drift cancels; its verdict (beyond %.0f%% of 1) is in ab.json as paired_verdict\n",
           o->warmup, ab->reps, 100 * XTOOL__AB_MIN_EFFECT);
    printf("%-9s %-8s %3s %-44s %10s %10s %8s %19s  %s\n", "device", "algo", "thr", "case",
           "old ms", "new ms", "ratio", "paired", "verdict");
    fflush(stdout);
}

/* ---- run: the rounds of a cell ------------------------------------------------------ */

/* The rounds of one cell, old and new back to back, alternating which goes
 * first; the paired ratios judged. */
static void xtool__ab_measure(xtool__ab *ab, xtool__ab_cell *c, xtool__argv args[2],
                              const char *label)
{
    char out[16384];
    for (int r = 0; r < ab->rounds && c->ok; r++) {
        xtool_progress_draw(&ab->prog, label);
        /* old first in rounds 1, 3, 5, ... (r even), new first in the others */
        c->new_first[r] = r % 2 == 1;
        for (int k = 0; k < 2 && c->ok; k++) {
            int side = c->new_first[r] ? 1 - k : k;
            int src = xtool__spawn(args[side].v, out, sizeof out);
            double ms = NAN;
            if (src != 0 || xtool__parse_median(out, &ms) || !(ms > 0)) {
                char last[256];
                xtool__last_line(out, last, sizeof last);
                c->ok = 0;
                snprintf(c->error, sizeof c->error, "%s build, round %d: %s", side ? "new" : "old",
                         r + 1,
                         src != 0 ? last : "no time above the run line's resolution (0.1 us)");
                break;
            }
            (side ? c->new_ms : c->old_ms)[r] = ms;
        }
        if (c->ok) {
            c->ratio[r] = c->new_ms[r] / c->old_ms[r];
            c->n = r + 1;
        }
    }
    if (c->ok) {
        xtool_stats_paired(c->ratio, c->n, XTOOL__AB_MIN_EFFECT, &c->st);
        c->old_med = xtool__median_of(c->old_ms, c->n);
        c->new_med = xtool__median_of(c->new_ms, c->n);
        xtool_stats_compute(c->old_ms, c->n, &c->old_st);
        xtool_stats_compute(c->new_ms, c->n, &c->new_st);
        c->verdict = xtool_stats_verdict_ci(c->old_st.ci_low, c->old_st.median, c->old_st.ci_high,
                                            c->new_st.ci_low, c->new_st.median, c->new_st.ci_high,
                                            &c->side_ratio);
    }
}

/* ---- report: a row per cell, the summary, ab.json ----------------------------------- */

static void xtool__ab_row(xtool__ab *ab, const xtool__ab_cell *c, const char *dname,
                          const char *key)
{
    char thr[16];
    if (c->threads > 0)
        snprintf(thr, sizeof thr, "%d", c->threads);
    else
        snprintf(thr, sizeof thr, "-");
    if (!c->ok) {
        ab->failed++;
        printf("%-9s %-8s %3s %-44.44s failed: %s\n", dname, xattn_algo_name(c->algo), thr, key,
               c->error);
    } else {
        char iv[48];
        if (c->st.confidence > 0)
            snprintf(iv, sizeof iv, "[%.3f, %.3f]", c->st.lo, c->st.hi);
        else
            snprintf(iv, sizeof iv, "(too few)");
        ab->faster += c->verdict == XTOOL_VERDICT_FASTER;
        ab->slower += c->verdict == XTOOL_VERDICT_SLOWER;
        printf("%-9s %-8s %3s %-44.44s %10.4f %10.4f %7.3fx %19s  %s  old [%.4f, %.4f] new "
               "[%.4f, %.4f]\n",
               dname, xattn_algo_name(c->algo), thr, key, c->old_med, c->new_med, c->side_ratio, iv,
               c->verdict == XTOOL_VERDICT_NOISE ? "~ (within noise)"
                                                 : xtool_verdict_name(c->verdict),
               c->old_st.ci_low, c->old_st.ci_high, c->new_st.ci_low, c->new_st.ci_high);
    }
    fflush(stdout);
}

static void xtool__ab_summary(const xtool__ab *ab)
{
    int ok_cells = ab->n - ab->failed;
    double logsum = 0;
    for (int i = 0; i < ab->n; i++)
        if (ab->cells[i].ok)
            logsum += log(ab->cells[i].st.median);
    printf("new vs old: %d cells: %d faster, %d slower, %d within noise, %d failed; geometric "
           "mean of the median ratios %.3f\n",
           ab->n, ab->faster, ab->slower, ok_cells - ab->faster - ab->slower, ab->failed,
           ok_cells ? exp(logsum / ok_cells) : 1.0);
    xtool_load_print(stdout, xtool_cpus_available(), ab->load_start, ab->load_end);
    if (isfinite(ab->load_start[0]) && isfinite(ab->load_end[0]))
        printf("         both builds ran under the same load, pair by pair\n");
}

static void xtool__ab_json_header(FILE *f, const xtool__ab *ab)
{
    xtool_json_provenance(f, "xattn.ab/1", ab->created, ab->p->command_line, ab->host, ab->os);
    fprintf(f, ",\n  \"load\": ");
    xtool_json_load(f, xtool_cpus_available(), ab->load_start, ab->load_end);
    fprintf(f, ",\n  \"old\": ");
    xattn__json_str(f, ab->o->ab_old);
    fprintf(f, ", \"old_version\": ");
    xattn__json_str(f, ab->old_version);
    fprintf(f, ", \"new\": ");
    xattn__json_str(f, ab->self);
    fprintf(f, ",\n  \"rounds\": %d, \"warmup\": %d, \"reps\": %d, \"min_effect\": ", ab->rounds,
            ab->o->warmup, ab->reps);
    xattn__json_num(f, XTOOL__AB_MIN_EFFECT);
    fprintf(f, ", \"confidence_target\": 0.9,\n  \"cells\": [");
}

/* One cell, with every run in the order it was made. */
static void xtool__ab_json_cell(FILE *f, const xtool__ab *ab, const xtool__ab_cell *c)
{
    const xtool_target *t = &ab->p->targets[c->target];
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"algo\": \"%s\", \"case\": ",
            xattn_backend_name(t->backend), t->device, xattn_algo_name(c->algo));
    xattn__json_str(f, ab->p->cases[c->case_idx].key);
    fprintf(f, ", \"threads\": ");
    if (c->threads > 0)
        fprintf(f, "%d", c->threads);
    else
        fputs("null", f);
    fprintf(f, ", \"status\": \"%s\", \"error\": ", c->ok ? "ok" : "failed");
    xtool_json_str_or_null(f, c->ok ? NULL : c->error);
    fprintf(f, ",\n     \"runs\": [");
    for (int r = 0, first = 1; r < c->n; r++)
        for (int k = 0; k < 2; k++, first = 0) {
            int side = c->new_first[r] ? 1 - k : k;
            fprintf(f, "%s{\"round\": %d, \"build\": \"%s\", \"median_ms\": ", first ? "" : ", ",
                    r + 1, side ? "new" : "old");
            xattn__json_num(f, (side ? c->new_ms : c->old_ms)[r]);
            fputc('}', f);
        }
    fprintf(f, "],\n     \"ratios\": [");
    for (int r = 0; r < c->n; r++) {
        fputs(r ? ", " : "", f);
        xattn__json_num(f, c->ratio[r]);
    }
    fputs("]", f);
    if (c->ok) {
        xtool_json_field(f, "old_median_ms", c->old_med);
        xtool_json_field(f, "new_median_ms", c->new_med);
        xtool_json_field(f, "median_ratio", c->st.median);
        xtool_json_field(f, "interval_lo", c->st.lo);
        xtool_json_field(f, "interval_hi", c->st.hi);
        xtool_json_field(f, "confidence", c->st.confidence);
        fprintf(f, ", \"paired_verdict\": \"%s\"", xtool_verdict_name(c->st.verdict));
        const xtool_stats *sides[2] = {&c->old_st, &c->new_st};
        const char *names[2] = {"old", "new"};
        for (int k = 0; k < 2; k++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ci_low", names[k]);
            xtool_json_field(f, key, sides[k]->ci_low);
            snprintf(key, sizeof key, "%s_ci_high", names[k]);
            xtool_json_field(f, key, sides[k]->ci_high);
            snprintf(key, sizeof key, "%s_ci_level", names[k]);
            xtool_json_field(f, key, sides[k]->ci_level);
        }
        xtool_json_field(f, "ratio", c->side_ratio);
        fprintf(f, ", \"verdict\": \"%s\"}", xtool_verdict_name(c->verdict));
    } else {
        fprintf(f, ", \"old_median_ms\": null, \"new_median_ms\": null, \"median_ratio\": "
                   "null, \"interval_lo\": null, \"interval_hi\": null, \"confidence\": "
                   "null, \"paired_verdict\": null, \"old_ci_low\": null, \"old_ci_high\": "
                   "null, \"old_ci_level\": null, \"new_ci_low\": null, \"new_ci_high\": null, "
                   "\"new_ci_level\": null, \"ratio\": null, \"verdict\": null}");
    }
}

/* out_dir/ab.json (schema xattn.ab/1). Returns 0 or XTOOL_EXIT_FAIL. */
static int xtool__ab_json(const xtool__ab *ab)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/ab.json", ab->o->out_dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: bench --ab: cannot write '%s': %s\n", xtool_prog, path,
                strerror(errno));
        return XTOOL_EXIT_FAIL;
    }
    xtool__ab_json_header(f, ab);
    for (int i = 0; i < ab->n; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        xtool__ab_json_cell(f, ab, &ab->cells[i]);
    }
    int ok_cells = ab->n - ab->failed;
    fprintf(f,
            "\n  ],\n  \"summary\": {\"cells\": %d, \"faster\": %d, \"slower\": %d, \"noise\": %d, "
            "\"failed\": %d}\n}\n",
            ab->n, ab->faster, ab->slower, ok_cells - ab->faster - ab->slower, ab->failed);
    char err[1200];
    if (xtool_file_close(f, path, err, sizeof err)) {
        fprintf(stderr, "%s: bench --ab: %s\n", xtool_prog, err);
        return XTOOL_EXIT_FAIL;
    }
    printf("written  %s\n", path);
    return 0;
}

/* ---- the mode ----------------------------------------------------------------------- */

/* The next cell, its arrays in the store. */
static xtool__ab_cell *xtool__ab_cell_new(xtool__ab *ab, int ti, int ci, int threads,
                                          xattn_algo algo)
{
    xtool__ab_cell *c = &ab->cells[ab->n];
    size_t at = (size_t)ab->n * (size_t)ab->rounds;
    c->old_ms = ab->store + at * 3;
    c->new_ms = c->old_ms + ab->rounds;
    c->ratio = c->new_ms + ab->rounds;
    c->new_first = ab->order + at;
    ab->n++;
    c->target = ti;
    c->case_idx = ci;
    c->threads = threads;
    c->algo = algo;
    c->ok = 1;
    return c;
}

/* Every cell of one case on one device. Returns 0, or XTOOL_EXIT_FAIL when
 * the lengths file for both builds cannot be written. */
static int xtool__ab_case(xtool__ab *ab, int ti, int ci)
{
    const xtool_target *t = &ab->p->targets[ti];
    const xtool_bench_case *bc = &ab->p->cases[ci];
    char dname[32], lengths[4200] = "";
    xtool_target_name(t->backend, t->device, dname, sizeof dname);
    if (bc->c.seqlens_q || bc->c.seqlens_k) {
        snprintf(lengths, sizeof lengths, "%s/ab-lengths-%d.txt", ab->o->out_dir, ci);
        if (xtool__write_lengths(lengths, &bc->c)) {
            fprintf(stderr, "%s: bench --ab: cannot write '%s': %s\n", xtool_prog, lengths,
                    strerror(errno));
            return XTOOL_EXIT_FAIL;
        }
    }
    xattn_algo algos[XATTN_ALGO_COUNT];
    int na = xtool_bench_case_algos(ab->o, bc, algos);
    int th[XTOOL_CLI_MAX_LIST];
    int nth = xtool_bench_case_threads(ab->o, bc, t, th);
    for (int hi = 0; hi < nth; hi++)
        for (int ai = 0; ai < na && ab->n < ab->p->cells; ai++) {
            xtool__ab_cell *c = xtool__ab_cell_new(ab, ti, ci, th[hi], algos[ai]);
            xtool__argv args[2]; /* 0 old, 1 new */
            for (int s = 0; s < 2; s++)
                xtool__ab_argv(ab, c, lengths, s, &args[s]);
            char label[400];
            snprintf(label, sizeof label, "%s %s %s", dname, xattn_algo_name(c->algo), bc->key);
            xtool__ab_measure(ab, c, args, label);
            ab->prog.done++;
            xtool_progress_clear(&ab->prog);
            xtool__ab_row(ab, c, dname, bc->key);
        }
    return 0;
}

int xtool_bench_ab(const xtool_bench_plan *p)
{
    xtool__ab ab;
    memset(&ab, 0, sizeof ab);
    ab.p = p;
    ab.o = &p->o;
    int rc = xtool__ab_builds(&ab);
    if (rc)
        return rc;
    ab.rounds = ab.o->ab_rounds > 0 ? ab.o->ab_rounds : 5;
    ab.reps = ab.o->min_reps > 0 ? ab.o->min_reps : 5;
    size_t cells = (size_t)(p->cells ? p->cells : 1);
    ab.cells = calloc(cells, sizeof *ab.cells);
    ab.store = calloc(cells * (size_t)ab.rounds * 3, sizeof *ab.store);
    ab.order = calloc(cells * (size_t)ab.rounds, 1);
    if (!ab.cells || !ab.store || !ab.order) {
        fprintf(stderr, "%s: bench --ab: out of memory\n", xtool_prog);
        rc = XTOOL_EXIT_FAIL;
        goto done;
    }
    xtool_utc_now(ab.created, sizeof ab.created);
    xtool_host_describe(ab.host, sizeof ab.host, ab.os, sizeof ab.os);
    xtool_load_read(ab.load_start);
    xtool__ab_header(&ab);
    xtool_progress_init(&ab.prog, ab.o->progress, p->cells);
    for (int ti = 0; ti < p->nt && !rc; ti++)
        for (int ci = 0; ci < p->nc && !rc; ci++)
            rc = xtool__ab_case(&ab, ti, ci);
    xtool_progress_done(&ab.prog);
    if (rc)
        goto done;
    xtool_load_read(ab.load_end);
    xtool__ab_summary(&ab);
    rc = ab.failed ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
    if (xtool__ab_json(&ab))
        rc = XTOOL_EXIT_FAIL;
done:
    free(ab.cells);
    free(ab.store);
    free(ab.order);
    return rc;
}
