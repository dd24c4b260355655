/*
 * xattn tune: the autotuner of the OpenCL tiles and of the CUDA run-time
 * configuration. For one case on one device, each algorithm's candidates
 * (xtool_tune_candidates / xtool_tune_cuda_candidates: data, the device's
 * default first) are timed (the median of --reps calls after --warmup, the
 * candidates' calls taken in turn, round by round), the fastest is checked
 * against the reference and stored with xattn_opencl_tune_store /
 * xattn_cuda_tune_store, which every later context of that device then uses
 * for that case (algorithm, dtype, head dims) unless XATTN_CL_TILE /
 * XATTN_CUDA_CONFIG is set. A candidate runs through that variable on a
 * context of its own (it is read when a context is created).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"
#include "xtool_tune.h"

#ifdef XATTN_HAVE_OPENCL
#include "xattn_opencl.h"
#endif
#ifdef XATTN_HAVE_CUDA
#include "xattn_cuda.h"
#endif

#if defined(XATTN_HAVE_OPENCL) || defined(XATTN_HAVE_CUDA)

/* What differs between the backends tune tunes. */
typedef struct xtool__tuner {
    xattn_backend be;
    const char *env;  /* the variable a candidate runs through */
    const char *what; /* "tile", "config" */
    xattn_status (*dflt)(xattn_ctx *, char *, size_t);
    xattn_status (*store)(xattn_ctx *, xattn_algo, xattn_dtype, int64_t, int64_t, const char *);
    xattn_status (*lookup)(xattn_ctx *, xattn_algo, xattn_dtype, int64_t, int64_t, char *, size_t,
                           int *);
} xtool__tuner;

/* One candidate: its context (XATTN_CL_TILE is read when a context is
 * created), its case, its times; or why it did not run. */
typedef struct xtool__tried {
    char tile[256];
    xattn_ctx *ctx;
    xtool_case_run run;
    double *ms;
    int n;
    int ok;
    xtool_stats st;
    char error[256];
} xtool__tried;

static void xtool__fail(xtool__tried *t, xattn_status st)
{
    snprintf(t->error, sizeof t->error, "%s: %s", xattn_status_name(st), xattn_last_error());
    t->ok = 0;
}

/* Opens the candidate's context with XATTN_CL_TILE=tile, sets the case up and
 * makes its warm-up calls (the first with the outputs poisoned). */
static void xtool__open(const xtool__tuner *tu, const xtool_cli_opts *o, int device,
                        const xtool_case *c, xattn_algo algo, xtool__tried *t)
{
    setenv(tu->env, t->tile, 1);
    xattn_status st = xtool_ctx_open(o, tu->be, device, &t->ctx);
    unsetenv(tu->env);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_setup(t->ctx, c, &t->run);
    t->run.desc.algo = algo;
    if (st == XATTN_STATUS_OK)
        st = xtool_cell_poisoned_call(t->ctx, &t->run, NULL);
    for (int w = 1; st == XATTN_STATUS_OK && w < o->warmup; w++)
        st = xattn_attention(t->ctx, &t->run.desc, NULL);
    t->ms = st == XATTN_STATUS_OK ? calloc((size_t)o->reps, sizeof *t->ms) : NULL;
    if (st == XATTN_STATUS_OK && !t->ms)
        st = XATTN_STATUS_OUT_OF_MEMORY;
    t->ok = st == XATTN_STATUS_OK;
    if (!t->ok)
        xtool__fail(t, st);
}

static void xtool__close(xtool__tried *t)
{
    xtool_case_teardown(&t->run);
    xattn_ctx_destroy(t->ctx);
    t->ctx = NULL;
    free(t->ms);
    t->ms = NULL;
}

/* Every candidate open at once, then --reps rounds of one timed call each,
 * in turn: a machine that drifts (load, clocks) drifts for all of them alike,
 * as bench --ab alternates its builds. */
static void xtool__time_all(const xtool__tuner *tu, const xtool_cli_opts *o, int device,
                            const xtool_case *c, xattn_algo algo, xtool__tried *t, int n)
{
    for (int i = 0; i < n; i++)
        xtool__open(tu, o, device, c, algo, &t[i]);
    for (int r = 0; r < o->reps; r++)
        for (int i = 0; i < n; i++) {
            if (!t[i].ok)
                continue;
            xattn_run_info info;
            xattn_status st = xattn_attention(t[i].ctx, &t[i].run.desc, &info);
            if (st != XATTN_STATUS_OK) {
                xtool__fail(&t[i], st);
                continue;
            }
            t[i].ms[t[i].n++] = info.device_ms;
        }
    for (int i = 0; i < n; i++) {
        if (t[i].ok && (t[i].n == 0 || xtool_stats_compute(t[i].ms, t[i].n, &t[i].st))) {
            t[i].ok = 0;
            snprintf(t[i].error, sizeof t[i].error, "no timed call");
        }
        xtool__close(&t[i]);
    }
}

/* The winner's output against the reference; 0 when it agrees. */
static int xtool__verify(const xtool__tuner *tu, const xtool_cli_opts *o, int device,
                         const xtool_case *c, xattn_algo algo, const char *tile, char *why,
                         size_t whyn)
{
    xattn_ctx *ctx = NULL;
    xtool_case_run run;
    memset(&run, 0, sizeof run);
    xtool_case_ref ref;
    memset(&ref, 0, sizeof ref);
    xtool_case_error e;
    memset(&e, 0, sizeof e);
    setenv(tu->env, tile, 1);
    xattn_status st = xtool_ctx_open(o, tu->be, device, &ctx);
    unsetenv(tu->env);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_setup(ctx, c, &run);
    if (st == XATTN_STATUS_OK) {
        run.desc.algo = algo;
        st = xtool_cell_poisoned_call(ctx, &run, NULL);
    }
    /* The reference's budget of `xattn run` (tune has no --check-limit). */
    const double limit = xtool_cli_default_check_limit(XTOOL_CLI_RUN);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_ref_compute(&run, limit, &ref);
    if (st == XATTN_STATUS_OK)
        st = xtool_case_check(&run, &ref, &e);
    int rc = 0;
    if (st != XATTN_STATUS_OK) {
        snprintf(why, whyn, "%s: %s", xattn_status_name(st), xattn_last_error());
        rc = 1;
    } else if (e.checked && !e.pass) {
        snprintf(why, whyn, "rel. L2 error %.3g over the bound %.3g", e.rel_l2, e.bound);
        rc = 1;
    } else {
        snprintf(why, whyn, "%s", e.checked ? "agrees with the reference" : "not checked");
    }
    xtool_case_ref_free(&ref);
    xtool_case_teardown(&run);
    xattn_ctx_destroy(ctx);
    return rc;
}

/* One algorithm: every candidate, the table, the winner checked and stored.
 * Returns the failures. */
static int xtool__tune_algo(const xtool__tuner *tu, const xtool_cli_opts *o, int device,
                            const xtool_case *c, xattn_algo algo, const char *dflt, int cpu_class)
{
    const char *cand[32];
    int nc = tu->be == XATTN_BACKEND_CUDA ? xtool_tune_cuda_candidates(algo, cand, 32)
                                          : xtool_tune_candidates(algo, cpu_class, cand, 32);
    if (nc == 0) {
        printf("\n%s: nothing to tune on %s (no run-time choice)\n", xattn_algo_name(algo),
               xattn_backend_name(tu->be));
        return 0;
    }
    xtool__tried *t = calloc((size_t)nc + 1, sizeof *t);
    if (!t)
        return 1;
    snprintf(t[0].tile, sizeof t[0].tile, "%s", dflt);
    for (int i = 0; i < nc; i++)
        snprintf(t[i + 1].tile, sizeof t[i + 1].tile, "%s", cand[i]);
    const int n = nc + 1;
    printf("\n%s (%s: %s)\n  %-28s %10s %10s %10s %8s %7s  %s\n", xattn_algo_name(algo),
           tu->be == XATTN_BACKEND_CUDA ? "default" : "table row", dflt, tu->what, "median ms",
           "min", "p90", "spread", "vs row", "verdict");
    int best = -1, failures = 0;
    xtool__time_all(tu, o, device, c, algo, t, n);
    /* The winner: the fastest candidate that is faster than the table row
     * beyond both runs' noise (compare's rule); else the row itself. */
    xtool_verdict v[64] = {XTOOL_VERDICT_NOISE};
    for (int i = 0; i < n && i < 64; i++) {
        if (!t[i].ok)
            continue;
        double ratio = 1.0;
        if (i > 0 && t[0].ok)
            v[i] = xtool_stats_verdict(t[0].st.min, t[0].st.median, t[0].st.p90, t[0].st.spread,
                                       t[i].st.min, t[i].st.median, t[i].st.p90, t[i].st.spread,
                                       &ratio);
        const int beats = !t[0].ok || v[i] == XTOOL_VERDICT_FASTER;
        if ((i == 0 || beats) && (best < 0 || t[i].st.median < t[best].st.median))
            best = i;
    }
    for (int i = 0; i < n; i++) {
        const char *label = i > 0                          ? t[i].tile
                            : tu->be == XATTN_BACKEND_CUDA ? "default"
                                                           : "table row";
        if (!t[i].ok) {
            printf("  %-28s not run: %s\n", label, t[i].error);
            /* A tile the device cannot take is refused before anything runs. */
            failures += strncmp(t[i].error, "XATTN_STATUS_INVALID_ARGUMENT", 29) != 0 &&
                        strncmp(t[i].error, "XATTN_STATUS_UNSUPPORTED", 24) != 0;
            continue;
        }
        char vs[16] = "-";
        if (t[0].ok && t[i].st.median > 0)
            snprintf(vs, sizeof vs, "%.2fx", t[0].st.median / t[i].st.median);
        printf("  %-28s %10.3f %10.3f %10.3f %7.1f%% %7s  %-6s%s\n", label, t[i].st.median,
               t[i].st.min, t[i].st.p90, 100.0 * t[i].st.spread, vs,
               i == 0 || i >= 64 ? "" : xtool_verdict_name(v[i]), i == best ? "  <- winner" : "");
    }
    if (best < 0) {
        printf("  no candidate ran: nothing stored\n");
        free(t);
        return failures + 1;
    }
    char why[512];
    if (xtool__verify(tu, o, device, c, algo, t[best].tile, why, sizeof why)) {
        printf("  the fastest, %s, disagrees with the reference (%s): not stored\n", t[best].tile,
               why);
        free(t);
        return failures + 1;
    }
    xattn_ctx *ctx = NULL;
    xattn_status st = xtool_ctx_open(o, tu->be, device, &ctx);
    char stored[256] = "";
    int found = 0;
    if (st == XATTN_STATUS_OK)
        st = tu->store(ctx, algo, c->dtype, c->head_dim, c->head_dim_v, t[best].tile);
    if (st == XATTN_STATUS_OK)
        st = tu->lookup(ctx, algo, c->dtype, c->head_dim, c->head_dim_v, stored, sizeof stored,
                        &found);
    if (st == XATTN_STATUS_OK && found)
        printf("  stored for %s %s D %lld Dv %lld (%s): %s\n", xattn_algo_name(algo),
               xattn_dtype_name(c->dtype), (long long)c->head_dim, (long long)c->head_dim_v, why,
               stored);
    else {
        printf("  not stored: %s\n",
               st == XATTN_STATUS_OK ? "not found after storing" : xattn_last_error());
        failures++;
    }
    xattn_ctx_destroy(ctx);
    free(t);
    return failures;
}

int xtool_cmd_tune(const xtool_cli_opts *o)
{
    xattn_backend be = o->n_backends > 0 ? o->backends[0] : XATTN_BACKEND_OPENCL;
    xtool__tuner tu;
    memset(&tu, 0, sizeof tu);
    tu.be = be;
#ifdef XATTN_HAVE_OPENCL
    if (be == XATTN_BACKEND_OPENCL) {
        tu.env = "XATTN_CL_TILE";
        tu.what = "tile";
        tu.dflt = xattn_opencl_tile_default;
        tu.store = xattn_opencl_tune_store;
        tu.lookup = xattn_opencl_tune_lookup;
    }
#endif
#ifdef XATTN_HAVE_CUDA
    if (be == XATTN_BACKEND_CUDA) {
        tu.env = "XATTN_CUDA_CONFIG";
        tu.what = "config";
        tu.dflt = xattn_cuda_config_default;
        tu.store = xattn_cuda_tune_store;
        tu.lookup = xattn_cuda_tune_lookup;
    }
#endif
    if (be != XATTN_BACKEND_OPENCL && be != XATTN_BACKEND_CUDA) {
        fprintf(stderr,
                "%s: tune: --backend %s: not supported; tune tunes the OpenCL tiles "
                "(--backend opencl) and the CUDA configuration (--backend cuda)\n",
                xtool_prog, xattn_backend_name(be));
        return XTOOL_EXIT_USAGE;
    }
    if (!tu.env) {
        fprintf(stderr, "%s: tune: --backend %s: this build has no %s backend\n", xtool_prog,
                xattn_backend_name(be), xattn_backend_name(be));
        return XTOOL_EXIT_FAIL;
    }
    for (int i = 0; i < o->n_algos; i++)
        if (o->algos[i] == XATTN_ALGO_AUTO) {
            fprintf(stderr, "%s: tune: --algo auto: give naive, flash or splitkv\n", xtool_prog);
            return XTOOL_EXIT_USAGE;
        }
    xtool_case c;
    int32_t *lq = NULL, *lk = NULL;
    char err[512] = "";
    int rc = xtool_case_from_opts(o, &c, &lq, &lk, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: tune: %s\n", xtool_prog, err);
        return rc;
    }
    if (xattn_backend_available(be) != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: tune: %s unavailable: %s\n", xtool_prog, xattn_backend_name(be),
                xattn_last_error());
        free(lq);
        free(lk);
        return XTOOL_EXIT_FAIL;
    }
    const int device = o->device >= 0 ? o->device : 0;
    xattn_device_info info;
    xattn_ctx *ctx = NULL;
    char dflt[256] = "";
    xattn_status st = xattn_device_get_info(be, device, &info);
    /* The variable of the caller's environment: set aside while tuning. */
    const char *env = getenv(tu.env);
    char *saved = env ? strdup(env) : NULL;
    unsetenv(tu.env);
    if (st == XATTN_STATUS_OK)
        st = xtool_ctx_open(o, be, device, &ctx);
    if (st == XATTN_STATUS_OK)
        st = tu.dflt(ctx, dflt, sizeof dflt);
    xattn_ctx_destroy(ctx);
    int failures = 0;
    int usage = 0;
    if (st != XATTN_STATUS_OK) {
        /* --device N beyond the backend's devices is a bad command line. */
        usage = st == XATTN_STATUS_DEVICE_NOT_FOUND;
        fprintf(stderr, "%s: tune: %s%s:%d: %s\n", xtool_prog, usage ? "--device: " : "",
                xattn_backend_name(be), device, xattn_last_error());
        failures = 1;
    } else {
        char key[512];
        xtool_case_describe(&c, key, sizeof key);
        const int cpu_class = info.device_type != XATTN_DEVICE_TYPE_GPU;
        printf("xattn tune: %s:%d %s (%s, driver %s)\ncase: %s; median of %d calls after %d "
               "warm-up\n",
               xattn_backend_name(be), device, info.name,
               be == XATTN_BACKEND_CUDA ? "path and split candidates"
               : cpu_class              ? "CPU-class candidates"
                                        : "GPU candidates",
               info.driver_version, key, o->reps, o->warmup);
        if (saved)
            printf("(%s=%s is set aside while tuning; it still overrides the stored "
                   "winners)\n",
                   tu.env, saved);
        static const xattn_algo all[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
        const int na = o->n_algos > 0 ? o->n_algos : 3;
        for (int i = 0; i < na; i++)
            failures += xtool__tune_algo(&tu, o, device, &c, o->n_algos > 0 ? o->algos[i] : all[i],
                                         dflt, cpu_class);
    }
    if (saved) {
        setenv(tu.env, saved, 1);
        free(saved);
    }
    free(lq);
    free(lk);
    return usage ? XTOOL_EXIT_USAGE : failures ? XTOOL_EXIT_FAIL : XTOOL_EXIT_OK;
}

#else /* neither OpenCL nor CUDA */

int xtool_cmd_tune(const xtool_cli_opts *o)
{
    (void)o;
    fprintf(stderr,
            "%s: tune: this build has neither an OpenCL nor a CUDA backend (the ones "
            "tune can tune)\n",
            xtool_prog);
    return XTOOL_EXIT_FAIL;
}

#endif
