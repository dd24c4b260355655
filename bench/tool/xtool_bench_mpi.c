/*
 * xattn bench --mpi: under mpirun, every rank runs each case of the command
 * line (or preset) as its shard of one problem through xattn_mpi (ring
 * attention and/or the head-parallel all-to-all); rank 0 prints each rank's
 * per-step figures and the whole job's (xattn_mpi_bench_core.c, shared with
 * the developer program xattn_mpi_bench) and writes DIR/results.json (schema
 * xattn.bench-mpi/1, docs/tool.md), results.csv and trace.json (one process
 * per rank). Without MPI in the build, --mpi is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"

#ifndef XTOOL_HAVE_MPI

int xtool_bench_mpi(const xtool_cli_opts *o, int argc, char **argv)
{
    (void)o;
    (void)argc;
    (void)argv;
    fprintf(stderr,
            "%s: bench: --mpi: this xattn was built without MPI (configure with an MPI "
            "installed, e.g. Debian's libopenmpi-dev, and -DXATTN_WITH_MPI=AUTO or ON)\n",
            xtool_prog);
    return XTOOL_EXIT_USAGE;
}

#else

#include "xattn_mpi_bench_core.h"
#include "xattn_writer.h"

#define XTOOL_MPI_SCHEMA "xattn.bench-mpi/1"

typedef struct xtool_mpi_case {
    const xtool_bench_case *bc;
    char unsupported[600]; /* "" when it ran */
    int failed;            /* unsupported holds the failure */
    xattn_mpi_bench_args a;
    xattn_mpi_bench_result res; /* rank 0 */
} xtool_mpi_case;

typedef struct xtool_mpi_run {
    const xtool_cli_opts *o;
    int nranks;
    xattn_backend backend;
    int device, threads;
    char command_line[2048], created[40], host[128], os[192];
    xtool_mpi_case *cases;
    int nc;
} xtool_mpi_run;

/* The options that --mpi cannot honour: refused on every rank alike (the
 * command line is the same everywhere). Returns 0 or XTOOL_EXIT_USAGE. */
static int xtool__mpi_options(const xtool_cli_opts *o, int rank, xtool_mpi_run *m)
{
    const char *bad = o->ab_old           ? "--ab"
                      : o->cases_path     ? "--cases"
                      : o->n_algos        ? "--algo (each rank's blocks use the library's choice)"
                      : o->n_backends > 1 ? "more than one --backend"
                      : o->thread_list.n > 1           ? "a list of --threads"
                      : o->passes > 1 || o->budget > 0 ? "--passes and --budget"
                                                       : NULL;
    if (bad) {
        if (rank == 0)
            fprintf(stderr, "%s: bench: --mpi: %s is not supported with --mpi\n", xtool_prog, bad);
        return XTOOL_EXIT_USAGE;
    }
    m->backend = o->n_backends == 1 && o->backends[0] != XATTN_BACKEND_AUTO ? o->backends[0]
                                                                            : XATTN_BACKEND_CPU;
    m->device = o->device >= 0 ? o->device : 0;
    /* one thread per rank unless asked: the ranks share the machine's cores */
    m->threads = o->thread_list.n == 1 ? (int)o->thread_list.v[0] : 1;
    return 0;
}

/* What the MPI path does not run (BSHD problems with dense masks, any dtypes); "" when it does. */
static void xtool__mpi_case_check(const xtool_case *c, char *why, size_t n)
{
    why[0] = '\0';
    if (c->bhsd)
        snprintf(why, n, "--mpi runs BSHD only");
    else if (c->alibi || c->bias)
        snprintf(why, n, "ALiBi and bias are not supported by xattn_mpi's bench");
    else if (c->seqlens_q || c->seqlens_k || c->varlen)
        snprintf(why, n, "padded and packed batches are not done in bench --mpi");
    else if (c->lse)
        snprintf(why, n, "--lse is not done in bench --mpi");
}

static void xtool__mpi_args(const xtool_cli_opts *o, const xtool_case *c, xattn_mpi_bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->batch = c->batch;
    a->sq = c->sq;
    a->sk = c->sk;
    a->heads = c->heads;
    a->kv_heads = c->kv_heads;
    a->head_dim = c->head_dim;
    a->head_dim_v = c->head_dim_v > 0 ? c->head_dim_v : c->head_dim;
    a->causal = c->causal;
    a->align = c->align;
    a->window_left = c->window_left;
    a->window_right = c->window_right;
    a->softcap = c->softcap;
    a->scale = c->scale;
    a->layout = XATTN_MPI_ZIGZAG;
    a->iters = o->min_reps;
    a->strategies = o->mpi_strategy == 0   ? XATTN_MPI_BENCH_RING
                    : o->mpi_strategy == 1 ? XATTN_MPI_BENCH_ALLTOALL
                                           : XATTN_MPI_BENCH_RING | XATTN_MPI_BENCH_ALLTOALL;
    a->single = 1;
    a->seed = (uint32_t)c->seed;
    a->dtype = c->dtype;
    a->kv_dtype = c->kv_dtype;
}

/* ---- the files ----------------------------------------------------------------------- */

/* `, "name": value` for each of n numbers (doubles) or strings. */
static void xtool__json_nums(FILE *f, const char *const *names, const double *vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        xattn__json_key(f, names[i]);
        xattn__json_num(f, vals[i]);
    }
}

static void xtool__json_strs(FILE *f, const char *const *names, const char *const *vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        xattn__json_key(f, names[i]);
        xattn__json_str(f, vals[i]);
    }
}

static void xtool__json_step(FILE *f, const xattn_mpi_step_stats *p)
{
    static const char *const names[] = {"compute_ms", "stage_ms", "comm_ms", "wait_ms", "agree_ms"};
    const double vals[] = {p->compute_ms, p->stage_ms, p->comm_ms, p->wait_ms, p->agree_ms};
    fprintf(f, "\"bytes_sent\": %llu, \"calls\": %d, \"skipped\": %d",
            (unsigned long long)p->bytes_sent, p->calls, p->skipped);
    xtool__json_nums(f, names, vals, sizeof vals / sizeof vals[0]);
}

static void xtool__json_strategy(FILE *f, const xtool_mpi_case *mc, int strat)
{
    const xattn_mpi_bench_strategy *s = &mc->res.strat[strat];
    fprintf(f, "{\"strategy\": \"%s\", \"state\": \"%s\"", xattn_mpi_bench_strategy_names[strat],
            s->state == 1 ? "measured" : "refused");
    if (s->state == 2) {
        xattn__json_key(f, "note");
        xattn__json_str(f, s->note);
        fputs("}", f);
        return;
    }
    static const char *const names[] = {"job_ms",         "compute_ms",    "comm_ms",
                                        "wait_ms",        "stage_ms",      "compute_min_ms",
                                        "compute_max_ms", "useful_gflops", "model_bytes_per_rank"};
    double vals[] = {s->job_ms,         s->compute_ms,    s->comm_ms,
                     s->wait_ms,        s->stage_ms,      s->compute_min_ms,
                     s->compute_max_ms, s->gflops_useful, s->model_bytes_per_rank};
    xtool__json_nums(f, names, vals, sizeof vals / sizeof vals[0]);
    fprintf(f, ", \"bytes_sent\": %llu", (unsigned long long)s->bytes_sent);
    xattn__json_key(f, "job_over_single");
    xattn__json_num(f, mc->res.single_ms > 0 ? s->job_ms / mc->res.single_ms : -1);
    fputs(", \"ranks\": [", f);
    for (int r = 0; r < s->nranks; r++) {
        const xattn_mpi_stats *st = &s->all[r];
        fprintf(f, "%s\n      {\"rank\": %d, \"steps\": %d, \"total_ms\": ", r ? "," : "", st->rank,
                st->steps);
        xattn__json_num(f, st->total_ms);
        xattn__json_key(f, "setup_ms");
        xattn__json_num(f, st->setup_ms);
        xattn__json_key(f, "finish_ms");
        xattn__json_num(f, st->finish_ms);
        xattn__json_key(f, "staging");
        xattn__json_str(f, st->staging_device ? "device" : "host");
        xattn__json_key(f, "staging_note");
        xattn__json_str(f, st->staging);
        fputs(", \"sum\": {", f);
        xtool__json_step(f, &st->sum);
        fputs("}, \"step\": [", f);
        for (int t = 0; t < st->steps && t < XATTN_MPI_MAX_STEPS; t++) {
            fprintf(f, "%s{\"step\": %d, \"start_ms\": ", t ? ", " : "", t);
            xattn__json_num(f, st->step[t].start_ms);
            fputs(", ", f);
            xtool__json_step(f, &st->step[t]);
            fputs("}", f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
}

static int xtool__mpi_write_json(const xtool_mpi_run *m, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static const char *const names[] = {"xattn_version", "created", "command_line", "host", "os"};
    const char *const vals[] = {xattn_version_string(), m->created, m->command_line, m->host,
                                m->os};
    fprintf(f, "{\"schema\": \"%s\"", XTOOL_MPI_SCHEMA);
    xtool__json_strs(f, names, vals, sizeof vals / sizeof vals[0]);
    fprintf(f, ", \"ranks\": %d, \"backend\": \"%s\", \"device\": %d, \"threads_per_rank\": %d",
            m->nranks, xattn_backend_name(m->backend), m->device, m->threads);
    fprintf(f, ", \"layout\": \"zigzag\", \"timed_calls\": %d,\n  \"cases\": [", m->o->min_reps);
    for (int i = 0; i < m->nc; i++) {
        const xtool_mpi_case *mc = &m->cases[i];
        const xattn_mpi_bench_args *a = &mc->a;
        fprintf(f, "%s\n   {\"case\": ", i ? "," : "");
        xattn__json_str(f, mc->bc->key);
        fprintf(f,
                ", \"batch\": %lld, \"sq\": %lld, \"sk\": %lld, \"heads\": %lld, "
                "\"kv_heads\": %lld, \"head_dim\": %lld, \"head_dim_v\": %lld, \"causal\": %s, "
                "\"dtype\": \"%s\", \"kv_dtype\": \"%s\"",
                (long long)a->batch, (long long)a->sq, (long long)a->sk, (long long)a->heads,
                (long long)a->kv_heads, (long long)a->head_dim, (long long)a->head_dim_v,
                a->causal ? "true" : "false", xattn_dtype_name(a->dtype),
                xattn_dtype_name(a->kv_dtype));
        if (mc->unsupported[0]) {
            fprintf(f, ", \"status\": \"%s\", \"note\": ", mc->failed ? "failed" : "unsupported");
            xattn__json_str(f, mc->unsupported);
            fputs("}", f);
            continue;
        }
        fputs(", \"status\": \"ok\", \"single_ms\": ", f);
        xattn__json_num(f, mc->res.single_ms);
        fputs(", \"strategies\": [", f);
        int first = 1;
        for (int s = 0; s < 2; s++) {
            if (!mc->res.strat[s].state)
                continue;
            fputs(first ? "\n    " : ",\n    ", f);
            first = 0;
            xtool__json_strategy(f, mc, s);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
    return fclose(f) ? -1 : 0;
}

static int xtool__mpi_write_csv(const xtool_mpi_run *m, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("case,strategy,rank,step,compute_ms,stage_ms,comm_ms,wait_ms,agree_ms,bytes_sent,calls,"
          "skipped\n",
          f);
    for (int i = 0; i < m->nc; i++)
        for (int s = 0; s < 2; s++) {
            const xattn_mpi_bench_strategy *st = &m->cases[i].res.strat[s];
            for (int r = 0; st->state == 1 && r < st->nranks; r++)
                for (int t = -1; t < st->all[r].steps && t < XATTN_MPI_MAX_STEPS; t++) {
                    const xattn_mpi_step_stats *p = t < 0 ? &st->all[r].sum : &st->all[r].step[t];
                    xattn__csv_str(f, m->cases[i].bc->key);
                    fprintf(f, ",%s,%d,", xattn_mpi_bench_strategy_names[s], r);
                    if (t < 0)
                        fputs("all", f);
                    else
                        fprintf(f, "%d", t);
                    double v[] = {p->compute_ms, p->stage_ms, p->comm_ms, p->wait_ms, p->agree_ms};
                    for (int k = 0; k < 5; k++) {
                        fputc(',', f);
                        xattn__csv_num(f, v[k]);
                    }
                    fprintf(f, ",%llu,%d,%d\n", (unsigned long long)p->bytes_sent, p->calls,
                            p->skipped);
                }
        }
    return fclose(f) ? -1 : 0;
}

static int xtool__mpi_write_trace(const xtool_mpi_run *m, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double base = 0;
    int first = 1;
    fputs("{\"traceEvents\":[\n", f);
    for (int i = 0; i < m->nc; i++)
        if (!m->cases[i].unsupported[0])
            xattn_mpi_bench_trace(f, &m->cases[i].res, m->cases[i].bc->key, &base, &first);
    fputs("\n]}\n", f);
    return fclose(f) ? -1 : 0;
}

static int xtool__mpi_files(const xtool_mpi_run *m)
{
    static const struct {
        const char *name;
        int (*write)(const xtool_mpi_run *, const char *);
    } files[] = {{"results.json", xtool__mpi_write_json},
                 {"results.csv", xtool__mpi_write_csv},
                 {"trace.json", xtool__mpi_write_trace}};
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", m->o->out_dir, files[i].name);
        if (files[i].write(m, path)) {
            fprintf(stderr, "%s: bench: cannot write %s: %s\n", xtool_prog, path, strerror(errno));
            rc = XTOOL_EXIT_FAIL;
        }
    }
    printf("files    %s/results.json (schema %s), results.csv, trace.json (one process per "
           "rank)\n",
           m->o->out_dir, XTOOL_MPI_SCHEMA);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------- */

/* Every rank agrees on ok (1) or not (0): a failure anywhere stops everyone. */
static int xtool__mpi_all_ok(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* The cases run on every rank; rank 0 prints and keeps the figures. */
static int xtool__mpi_cases(xtool_mpi_run *m, int rank, xattn_ctx *ctx)
{
    int rc = XTOOL_EXIT_OK;
    for (int i = 0; i < m->nc; i++) {
        xtool_mpi_case *mc = &m->cases[i];
        xtool__mpi_args(m->o, &mc->bc->c, &mc->a);
        xtool__mpi_case_check(&mc->bc->c, mc->unsupported, sizeof mc->unsupported);
        if (rank == 0)
            printf("\ncase     %s\n", mc->bc->key);
        if (mc->unsupported[0]) {
            if (rank == 0)
                printf("unsupported: %s\n", mc->unsupported);
            continue;
        }
        char err[512], what[96];
        xattn_status st =
            xattn_mpi_bench_measure(MPI_COMM_WORLD, ctx, &mc->a, &mc->res, err, sizeof err);
        if (st != XATTN_STATUS_OK) { /* every rank returns the same status */
            fprintf(stderr, "%s: bench: --mpi: rank %d: %s\n", xtool_prog, rank, err);
            snprintf(mc->unsupported, sizeof mc->unsupported, "%s", err);
            mc->failed = 1;
            rc = XTOOL_EXIT_FAIL;
            continue;
        }
        if (rank == 0) {
            snprintf(what, sizeof what, "%s device %d, %d thread%s per rank",
                     xattn_backend_name(m->backend), m->device, m->threads,
                     m->threads == 1 ? "" : "s");
            xattn_mpi_bench_print(stdout, &mc->a, what, &mc->res);
            fflush(stdout);
        }
    }
    return rc;
}

static int xtool__mpi_main(const xtool_cli_opts *o, int argc, char **argv, int rank,
                           xtool_mpi_run *m)
{
    char err[1024] = "";
    int rc = xtool__mpi_options(o, rank, m);
    if (rc)
        return rc;
    xtool_bench_case *cases = calloc(XTOOL_BENCH_MAX_CASES, sizeof *cases);
    if (!cases) {
        fprintf(stderr, "%s: bench: out of memory\n", xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    /* the command line's case, or a preset's at --scale (1 by default: the ranks split it) */
    int nc = xtool_bench_cases(o, o->preset, o->len_scale > 0 ? o->len_scale : 1.0, cases,
                               XTOOL_BENCH_MAX_CASES, err, sizeof err);
    if (nc < 0) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", xtool_prog, err);
        free(cases);
        return XTOOL_EXIT_USAGE;
    }
    m->cases = calloc((size_t)(nc ? nc : 1), sizeof *m->cases);
    for (int i = 0; m->cases && i < nc; i++)
        m->cases[i].bc = &cases[i];
    m->nc = nc;
    /* rank 0 makes the output folder; a rank without a context stops everyone */
    int ok = m->cases != NULL;
    if (rank == 0 && ok) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/results.json", o->out_dir);
        if (xtool_mkdir(o->out_dir) || xtool_out_probe("--out", probe, NULL, err, sizeof err)) {
            fprintf(stderr, "%s: bench: --out: cannot write in '%s'%s%s\n", xtool_prog, o->out_dir,
                    err[0] ? ": " : "", err);
            ok = 0;
            rc = XTOOL_EXIT_USAGE;
        }
    }
    xattn_ctx *ctx = NULL;
    if (ok && xattn_ctx_create(m->backend, m->device, &ctx) != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: bench: --mpi: rank %d: no %s device %d: %s\n", xtool_prog, rank,
                xattn_backend_name(m->backend), m->device, xattn_last_error());
        ok = 0;
    }
    if (ctx && m->backend == XATTN_BACKEND_CPU)
        xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, m->threads);
    if (!xtool__mpi_all_ok(ok)) {
        rc = rc ? rc : XTOOL_EXIT_FAIL;
    } else {
        xtool_command_line(argc, argv, m->command_line, sizeof m->command_line);
        xtool_utc_now(m->created, sizeof m->created);
        xtool_host_describe(m->host, sizeof m->host, m->os, sizeof m->os);
        if (rank == 0)
            printf("xattn bench %s --mpi: %d rank%s, %s device %d, %d thread%s per rank, %d "
                   "case%s, strategy %s, zigzag layout; warm-up 1, best of %d timed calls; "
                   "each case also on rank 0 alone\n",
                   xattn_version_string(), m->nranks, m->nranks == 1 ? "" : "s",
                   xattn_backend_name(m->backend), m->device, m->threads,
                   m->threads == 1 ? "" : "s", nc, nc == 1 ? "" : "s",
                   o->mpi_strategy == 0   ? "ring"
                   : o->mpi_strategy == 1 ? "alltoall"
                                          : "both",
                   o->min_reps);
        rc = xtool__mpi_cases(m, rank, ctx);
        if (rank == 0) {
            printf("\n");
            if (xtool__mpi_files(m))
                rc = XTOOL_EXIT_FAIL;
        }
    }
    xattn_ctx_destroy(ctx);
    for (int i = 0; m->cases && i < nc; i++)
        xattn_mpi_bench_result_free(&m->cases[i].res);
    free(m->cases);
    xtool_bench_cases_free(cases, nc);
    free(cases);
    return rc;
}

int xtool_bench_mpi(const xtool_cli_opts *o, int argc, char **argv)
{
    int inited = 0, rank = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "%s: bench: --mpi: MPI_Init failed\n", xtool_prog);
        return XTOOL_EXIT_FAIL;
    }
    xtool_mpi_run m;
    memset(&m, 0, sizeof m);
    m.o = o;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m.nranks);
    int rc = xtool__mpi_main(o, argc, argv, rank, &m);
    /* every rank's exit status is the worst of them (mpirun reports the first nonzero) */
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}

#endif
