/*
 * xattn_overhead: what profiling costs. Runs one case (by default a ~1-5 ms
 * FLASH call on the CPU) N times with the profiler off and on, alternating
 * call by call so that drifts of the machine hit both alike, and prints the
 * median host time of each, their relative difference, and the profiler's own
 * bookkeeping time per record (from the records: host_return - device_end,
 * the time between the backend's return and xattn_attention's).
 *
 *   xattn_overhead [--backend cpu] [--sq N] [--sk N] [--heads N] [--head-dim N]
 *                  [--algo flash] [--causal] [--reps N] [--threads N]
 *
 * Exit status 0 (the figure is a measurement, not a verdict); 1 on an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xtool_case.h"
#include "xtool_parse.h"
#include "xtool_stats.h"

/* The median of n >= 1 samples (the tool's definition, xtool_stats.c). */
static double xattn__median(const double *v, int n)
{
    xtool_stats sm;
    xtool_stats_compute(v, n, &sm);
    return sm.median;
}

/* The command line into the case, the backend, the repetitions and the
 * threads. Returns 0, or 2 with the usage printed. */
static int xattn__args(int argc, char **argv, xtool_case *c, xattn_backend *backend, int64_t *reps,
                       int64_t *threads)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        int ok = 1;
        if (!strcmp(a, "--causal")) {
            c->causal = 1;
            continue;
        }
        if (!v) {
            ok = 0;
        } else if (!strcmp(a, "--backend")) {
            ok = xattn_backend_from_name(v, backend) == XATTN_STATUS_OK;
        } else if (!strcmp(a, "--algo")) {
            ok = xattn_algo_from_name(v, &c->algo) == XATTN_STATUS_OK;
        } else if (!strcmp(a, "--sq") && (ok = !xtool_parse_i64(v, 1, 1 << 20, &x))) {
            c->sq = x;
        } else if (!strcmp(a, "--sk") && (ok = !xtool_parse_i64(v, 1, 1 << 22, &x))) {
            c->sk = x;
        } else if (!strcmp(a, "--heads") && (ok = !xtool_parse_i64(v, 1, 256, &x))) {
            c->heads = c->kv_heads = x;
        } else if (!strcmp(a, "--head-dim") && (ok = !xtool_parse_i64(v, 1, 256, &x))) {
            c->head_dim = c->head_dim_v = x;
        } else if (!strcmp(a, "--reps") && (ok = !xtool_parse_i64(v, 10, 1000000, &x))) {
            *reps = x;
        } else if (!strcmp(a, "--threads") && (ok = !xtool_parse_i64(v, 0, 4096, &x))) {
            *threads = x;
        } else {
            ok = 0;
        }
        if (!ok) {
            fprintf(stderr,
                    "usage: %s [--backend B] [--algo A] [--sq N] [--sk N] [--heads N] "
                    "[--head-dim N] [--causal] [--reps N] [--threads N]\n(bad or unknown '%s')\n",
                    argv[0], a);
            return 2;
        }
        i++;
    }
    return 0;
}

/* reps pairs of calls, profiling off and on, alternating which goes first;
 * each call's host time in ms. Returns the pairs made (fewer on an error). */
static int xattn__pairs(xattn_ctx *ctx, const xattn_attn_desc *desc, int64_t reps, double *t_off,
                        double *t_on, xattn_status *st)
{
    xattn_run_info info;
    /* Warm-up: thread placement, first touch, caches. */
    for (int i = 0; i < 5 && *st == XATTN_STATUS_OK; i++)
        *st = xattn_attention(ctx, desc, &info);
    int n = 0;
    for (; n < reps && *st == XATTN_STATUS_OK; n++) {
        for (int on = 0; on < 2 && *st == XATTN_STATUS_OK; on++) {
            int prof = (n & 1) ? !on : on;
            xattn_profiler_enable(ctx, prof);
            double t0 = xtool_now_s();
            *st = xattn_attention(ctx, desc, &info);
            double dt = xtool_now_s() - t0;
            (prof ? t_on : t_off)[n] = dt * 1e3;
        }
    }
    return n;
}

/* The medians off and on, the paired difference, and the records' own
 * bookkeeping (host_return - device_end); book is scratch of n entries. */
static void xattn__report(xattn_ctx *ctx, const xtool_case *c, xattn_backend backend, int n,
                          double *t_off, double *t_on, double *book)
{
    size_t nrec = 0;
    xattn_profiler_count(ctx, &nrec);
    int nb = 0;
    for (size_t i = 0; i < nrec && nb < n; i++) {
        xattn_record rec;
        if (xattn_profiler_get(ctx, i, &rec) == XATTN_STATUS_OK)
            book[nb++] = rec.host_return_us - rec.device_end_us;
    }
    /* Paired: each on-call against the off-call made next to it. */
    double *diff = book; /* reused once its median is taken */
    const double m_book = nb ? xattn__median(book, nb) : 0.0;
    for (int i = 0; i < n; i++)
        diff[i] = t_on[i] - t_off[i];
    const double m_diff = xattn__median(diff, n);
    const double m_off = xattn__median(t_off, n), m_on = xattn__median(t_on, n);
    char desc[256];
    xtool_case_describe(c, desc, sizeof desc);
    printf("case        %s on %s (%s)\n", desc, xattn_backend_name(backend),
           xattn_algo_name(c->algo));
    printf("calls       %d with profiling off, %d on, alternating\n", n, n);
    printf("median      off %.4f ms, on %.4f ms\n", m_off, m_on);
    printf("overhead    %+.3f%% (difference of the medians; noise of the machine included)\n",
           100.0 * (m_on - m_off) / m_off);
    printf("paired      %+.3f%% (median of on - off over adjacent pairs)\n",
           100.0 * m_diff / m_off);
    printf("bookkeeping %.2f us a record (median host_return - device_end) = %.4f%% of the "
           "median call\n",
           m_book, 100.0 * m_book * 1e-3 / m_off);
}

int main(int argc, char **argv)
{
    xtool_case c;
    xtool_case_defaults(&c);
    c.heads = c.kv_heads = 4;
    c.sq = c.sk = 384;
    c.algo = XATTN_ALGO_FLASH;
    xattn_backend backend = XATTN_BACKEND_CPU;
    int64_t reps = 400, threads = 0;
    if (xattn__args(argc, argv, &c, &backend, &reps, &threads))
        return 2;
    xattn_ctx *ctx = NULL;
    xtool_case_run r;
    memset(&r, 0, sizeof r);
    xattn_status st = xattn_ctx_create(backend, 0, &ctx);
    if (st == XATTN_STATUS_OK && threads && backend == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, threads);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_setup(ctx, &c, &r);
    double *t_off = malloc((size_t)reps * sizeof *t_off);
    double *t_on = malloc((size_t)reps * sizeof *t_on);
    double *book = malloc((size_t)reps * sizeof *book);
    int rc = 1;
    if (st != XATTN_STATUS_OK || !t_off || !t_on || !book) {
        fprintf(stderr, "xattn_overhead: %s\n",
                st != XATTN_STATUS_OK ? xattn_last_error() : "out of memory");
    } else {
        int n = xattn__pairs(ctx, &r.desc, reps, t_off, t_on, &st);
        if (st != XATTN_STATUS_OK) {
            fprintf(stderr, "xattn_overhead: %s\n", xattn_last_error());
        } else {
            xattn__report(ctx, &c, backend, n, t_off, t_on, book);
            rc = 0;
        }
    }
    free(t_off);
    free(t_on);
    free(book);
    if (r.ctx)
        xtool_case_teardown(&r);
    xattn_ctx_destroy(ctx);
    return rc;
}
