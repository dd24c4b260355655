/*
 * The xattn command-line tool: devices, run, bench.
 *
 * Exit status: 0 success, 1 a run failed or disagreed with the reference,
 * 2 a bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_case.h"

#define XATTN_EXIT_FAIL 1
#define XATTN_EXIT_USAGE 2

static const char *xattn__prog = "xattn";

static int xattn__usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", xattn__prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see '%s --help')\n", xattn__prog);
    return XATTN_EXIT_USAGE;
}

/* ---- devices ------------------------------------------------------------ */

static void xattn__print_bytes(const char *label, uint64_t b)
{
    if (!b)
        return;
    if (b >= (1ull << 30))
        printf("    %-14s %.1f GiB\n", label, (double)b / (double)(1ull << 30));
    else
        printf("    %-14s %.0f KiB\n", label, (double)b / 1024.0);
}

/* The device's ceilings: from the on-disk cache, or measured (and cached). */
static int xattn__print_ceilings(xattn_backend be, int index, int force)
{
    xattn_ctx *ctx = NULL;
    xattn_ceilings c;
    xattn_status st = xattn_ctx_create(be, index, &ctx);
    if (st == XATTN_STATUS_OK) {
        printf("    %-14s %s\n", "ceilings", force ? "measuring..." : "looking up / measuring...");
        fflush(stdout);
        st = xattn_ceilings_measure(ctx, force, &c);
    }
    if (st != XATTN_STATUS_OK) {
        printf("    %-14s not measured: %s\n", "ceilings", xattn_last_error());
        xattn_ctx_destroy(ctx);
        return st == XATTN_STATUS_UNSUPPORTED ? 0 : XATTN_EXIT_FAIL;
    }
    printf("    %-14s %.1f GFLOP/s", "fma f32", c.fma_f32_gflops);
    if (c.fma_f16_gflops > 0)
        printf(", f16 %.1f", c.fma_f16_gflops);
    if (c.fma_bf16_gflops > 0)
        printf(", bf16 %.1f", c.fma_bf16_gflops);
    printf("\n    %-14s read %.1f GB/s, copy %.1f GB/s\n", "bandwidth", c.read_gbps, c.copy_gbps);
    if (c.from_cache)
        printf("    %-14s from the cache: %s\n", "source", c.cache_path);
    else if (c.cache_path[0])
        printf("    %-14s measured now; cached in %s\n", "source", c.cache_path);
    else
        printf("    %-14s measured now; not cached (no cache folder: set XATTN_CACHE_DIR)\n",
               "source");
    xattn_ctx_destroy(ctx);
    return 0;
}

static int xattn__cmd_devices(int argc, char **argv)
{
    enum { XATTN__DEV_MEASURE = 1, XATTN__DEV_FORCE };
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {"measure", no_argument, 0, XATTN__DEV_MEASURE},
                                         {"force", no_argument, 0, XATTN__DEV_FORCE},
                                         {0, 0, 0, 0}};
    int c, measure = 0, force = 0, rc = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: %s devices [--measure [--force]]\n  Lists every backend, whether it "
                   "is usable here, and its devices.\n"
                   "  --measure   also each device's ceilings (FMA throughput, read and copy\n"
                   "              bandwidth): from the on-disk cache when it has them, else\n"
                   "              measured by the built-in micro-benchmarks (seconds) and cached\n"
                   "  --force     measure again even when the cache has them\n",
                   xattn__prog);
            return 0;
        }
        if (c == XATTN__DEV_MEASURE) {
            measure = 1;
            continue;
        }
        if (c == XATTN__DEV_FORCE) {
            measure = force = 1;
            continue;
        }
        return XATTN_EXIT_USAGE;
    }
    if (optind < argc)
        return xattn__usage_error("devices: unexpected argument '%s'", argv[optind]);
    printf("xattn %s\n", xattn_version_string());
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        if (!xattn_backend_compiled(be)) {
            printf("%-7s not compiled in\n", xattn_backend_name(be));
            continue;
        }
        if (xattn_backend_available(be) != XATTN_STATUS_OK) {
            printf("%-7s unavailable: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        int n = 0;
        xattn_device_count(be, &n);
        printf("%-7s %d device%s\n", xattn_backend_name(be), n, n == 1 ? "" : "s");
        for (int i = 0; i < n; i++) {
            xattn_device_info info;
            if (xattn_device_get_info(be, i, &info) != XATTN_STATUS_OK) {
                printf("  [%d] error: %s\n", i, xattn_last_error());
                continue;
            }
            printf("  [%d] %s\n", i, info.name);
            if (info.vendor[0])
                printf("    %-14s %s\n", "vendor", info.vendor);
            if (info.platform[0])
                printf("    %-14s %s\n", "platform", info.platform);
            if (info.driver_version[0])
                printf("    %-14s %s\n", "driver", info.driver_version);
            printf("    %-14s %d\n", "compute units", info.compute_units);
            xattn__print_bytes("memory", info.global_mem_bytes);
            xattn__print_bytes("local memory", info.local_mem_bytes);
            xattn__print_bytes("cache", info.cache_bytes);
            if (info.cpu_features[0])
                printf("    %-14s %s\n", "simd", info.cpu_features);
            if (info.compute_capability)
                printf("    %-14s %d.%d\n", "compute cap.", info.compute_capability / 10,
                       info.compute_capability % 10);
            printf("    %-14s %s\n", "description", info.description);
            if (measure && xattn__print_ceilings(be, i, force))
                rc = XATTN_EXIT_FAIL;
        }
    }
    return rc;
}

/* ---- shared flags ------------------------------------------------------- */

enum {
    XATTN_OPT_KV_DTYPE = 1000,
    XATTN_OPT_HEAD_DIM_V,
    XATTN_OPT_KV_HEADS,
    XATTN_OPT_LAYOUT,
    XATTN_OPT_WINDOW,
    XATTN_OPT_SOFTCAP,
    XATTN_OPT_ALIBI,
    XATTN_OPT_BIAS,
    XATTN_OPT_LSE,
    XATTN_OPT_SPLITS,
    XATTN_OPT_REPS,
    XATTN_OPT_SEED,
    XATTN_OPT_THREADS,
    XATTN_OPT_SCALE,
    XATTN_OPT_NO_CHECK,
    XATTN_OPT_OUT,
    XATTN_OPT_QUICK,
    XATTN_OPT_JSON,
    XATTN_OPT_TRACE,
    XATTN_OPT_CSV
};

static int xattn__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int xattn__parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int xattn__parse_dtype(const char *s, xattn_dtype *out)
{
    for (int i = 0; i < XATTN_DTYPE_COUNT; i++)
        if (!strcmp(s, xattn_dtype_name((xattn_dtype)i))) {
            *out = (xattn_dtype)i;
            return 0;
        }
    return -1;
}

typedef struct xattn_cli {
    xattn_case c;
    xattn_backend backend;
    int device;
    int reps;
    int threads;
    int check;
} xattn_cli;

/* Applies one shared option; returns 0, or an exit status for a bad value. */
static int xattn__apply_case_opt(xattn_cli *cli, int opt, const char *arg)
{
    xattn_case *c = &cli->c;
    int64_t v;
    switch (opt) {
    case 'b':
        if (xattn_backend_from_name(arg, &cli->backend) != XATTN_STATUS_OK)
            return xattn__usage_error("--backend: '%s' is not auto, cpu, opencl or cuda", arg);
        return 0;
    case 'D':
        if (xattn__parse_i64(arg, 0, 1024, &v))
            return xattn__usage_error("--device: '%s' is not a device index", arg);
        cli->device = (int)v;
        return 0;
    case 'a':
        if (xattn_algo_from_name(arg, &c->algo) != XATTN_STATUS_OK)
            return xattn__usage_error("--algo: '%s' is not auto, naive, flash or splitkv", arg);
        return 0;
    case 't':
        if (xattn__parse_dtype(arg, &c->dtype))
            return xattn__usage_error("--dtype: '%s' is not f32, f16 or bf16", arg);
        c->kv_dtype = c->dtype;
        return 0;
    case XATTN_OPT_KV_DTYPE:
        if (xattn__parse_dtype(arg, &c->kv_dtype))
            return xattn__usage_error("--kv-dtype: '%s' is not f32, f16 or bf16", arg);
        return 0;
    case 'B':
    case 'H':
    case XATTN_OPT_KV_HEADS:
    case 'q':
    case 'k':
    case 'd':
    case XATTN_OPT_HEAD_DIM_V: {
        static const char *names[] = {"--batch", "--heads", "--kv-heads", "--sq",
                                      "--sk", "--head-dim", "--head-dim-v"};
        int idx = opt == 'B' ? 0 : opt == 'H' ? 1 : opt == XATTN_OPT_KV_HEADS ? 2
                  : opt == 'q' ? 3 : opt == 'k' ? 4 : opt == 'd' ? 5 : 6;
        int64_t lo = (idx == 3 || idx == 4) ? 0 : 1;
        int64_t hi = (idx == 5 || idx == 6) ? 256 : (idx == 3 || idx == 4) ? (1 << 22) : 4096;
        if (xattn__parse_i64(arg, lo, hi, &v)) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s: '%%s' is not an integer in %lld..%lld", names[idx],
                     (long long)lo, (long long)hi);
            return xattn__usage_error(msg, arg);
        }
        int64_t *dst[] = {&c->batch, &c->heads, &c->kv_heads, &c->sq, &c->sk, &c->head_dim,
                          &c->head_dim_v};
        *dst[idx] = v;
        return 0;
    }
    case XATTN_OPT_LAYOUT:
        if (!strcmp(arg, "bshd"))
            c->bhsd = 0;
        else if (!strcmp(arg, "bhsd"))
            c->bhsd = 1;
        else
            return xattn__usage_error("--layout: '%s' is not bshd or bhsd", arg);
        return 0;
    case 'c':
        c->causal = 1;
        if (!arg || !strcmp(arg, "bottom-right"))
            c->align = XATTN_ALIGN_BOTTOM_RIGHT;
        else if (!strcmp(arg, "top-left"))
            c->align = XATTN_ALIGN_TOP_LEFT;
        else
            return xattn__usage_error("--causal: '%s' is not top-left or bottom-right", arg);
        return 0;
    case XATTN_OPT_WINDOW: {
        long long l, r;
        char extra;
        if (sscanf(arg, "%lld,%lld%c", &l, &r, &extra) != 2)
            return xattn__usage_error("--window: '%s' is not L,R (negative = unbounded)", arg);
        c->window_left = l;
        c->window_right = r;
        return 0;
    }
    case XATTN_OPT_SOFTCAP:
        if (xattn__parse_float(arg, &c->softcap) || c->softcap < 0)
            return xattn__usage_error("--softcap: '%s' is not a number >= 0", arg);
        return 0;
    case XATTN_OPT_SCALE:
        if (xattn__parse_float(arg, &c->scale))
            return xattn__usage_error("--scale: '%s' is not a finite number", arg);
        return 0;
    case XATTN_OPT_ALIBI: c->alibi = 1; return 0;
    case XATTN_OPT_BIAS: c->bias = 1; return 0;
    case XATTN_OPT_LSE: c->lse = 1; return 0;
    case XATTN_OPT_NO_CHECK: cli->check = 0; return 0;
    case XATTN_OPT_SPLITS:
        if (xattn__parse_i64(arg, 0, 4096, &v))
            return xattn__usage_error("--splits: '%s' is not an integer in 0..4096", arg);
        c->num_splits = (int)v;
        return 0;
    case XATTN_OPT_REPS:
        if (xattn__parse_i64(arg, 1, 100000, &v))
            return xattn__usage_error("--reps: '%s' is not an integer in 1..100000", arg);
        cli->reps = (int)v;
        return 0;
    case XATTN_OPT_THREADS:
        if (xattn__parse_i64(arg, 0, 4096, &v))
            return xattn__usage_error("--threads: '%s' is not an integer in 0..4096", arg);
        cli->threads = (int)v;
        return 0;
    case XATTN_OPT_SEED:
        if (xattn__parse_i64(arg, 0, INT64_MAX, &v))
            return xattn__usage_error("--seed: '%s' is not a non-negative integer", arg);
        c->seed = (uint64_t)v;
        return 0;
    }
    return XATTN_EXIT_USAGE;
}

#define XATTN__CASE_LONGOPTS                                                                  \
    {"backend", required_argument, 0, 'b'}, {"device", required_argument, 0, 'D'},            \
        {"algo", required_argument, 0, 'a'}, {"dtype", required_argument, 0, 't'},            \
        {"kv-dtype", required_argument, 0, XATTN_OPT_KV_DTYPE},                               \
        {"batch", required_argument, 0, 'B'}, {"heads", required_argument, 0, 'H'},           \
        {"kv-heads", required_argument, 0, XATTN_OPT_KV_HEADS},                               \
        {"sq", required_argument, 0, 'q'}, {"sk", required_argument, 0, 'k'},                 \
        {"head-dim", required_argument, 0, 'd'},                                              \
        {"head-dim-v", required_argument, 0, XATTN_OPT_HEAD_DIM_V},                           \
        {"layout", required_argument, 0, XATTN_OPT_LAYOUT},                                   \
        {"causal", optional_argument, 0, 'c'}, {"window", required_argument, 0, XATTN_OPT_WINDOW}, \
        {"softcap", required_argument, 0, XATTN_OPT_SOFTCAP},                                 \
        {"scale", required_argument, 0, XATTN_OPT_SCALE},                                     \
        {"alibi", no_argument, 0, XATTN_OPT_ALIBI}, {"bias", no_argument, 0, XATTN_OPT_BIAS}, \
        {"lse", no_argument, 0, XATTN_OPT_LSE}, {"splits", required_argument, 0, XATTN_OPT_SPLITS}, \
        {"reps", required_argument, 0, XATTN_OPT_REPS},                                       \
        {"threads", required_argument, 0, XATTN_OPT_THREADS},                                 \
        {"seed", required_argument, 0, XATTN_OPT_SEED},                                       \
        {"no-check", no_argument, 0, XATTN_OPT_NO_CHECK}, {"help", no_argument, 0, 'h'}

static const char xattn__case_help[] =
    "  --backend auto|cpu|opencl|cuda   backend (default auto: the best available)\n"
    "  --device N                       device index within the backend (default 0)\n"
    "  --algo auto|naive|flash|splitkv  algorithm (default auto)\n"
    "  --dtype f32|f16|bf16             q/o dtype, and k/v unless --kv-dtype (default f32)\n"
    "  --kv-dtype f32|f16|bf16          k/v dtype\n"
    "  --batch N --heads N --kv-heads N --sq N --sk N --head-dim N --head-dim-v N\n"
    "  --layout bshd|bhsd               memory layout of q, k, v, o (default bshd)\n"
    "  --causal[=top-left|bottom-right] causal mask (default alignment bottom-right)\n"
    "  --window L,R                     sliding window (negative side = unbounded)\n"
    "  --softcap X  --scale X  --alibi  --bias  --lse\n"
    "  --splits N                       SPLITKV chunks (0 = automatic)\n"
    "  --reps N                         timed repetitions (default 5)\n"
    "  --threads N                      CPU worker threads (0 = all)\n"
    "  --seed N                         input data seed (default 42)\n"
    "  --no-check                       skip the comparison with the reference\n";

static xattn_status xattn__open_ctx(const xattn_cli *cli, xattn_backend backend, int device,
                                    xattn_ctx **ctx)
{
    xattn_status st = xattn_ctx_create(backend, device, ctx);
    if (st == XATTN_STATUS_OK && cli->threads && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(*ctx, XATTN_OPT_NUM_THREADS, cli->threads);
    return st;
}

static int xattn__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct xattn_timing {
    double median_ms, min_ms, p90_ms, spread; /* spread: (p90 - min) / median */
    int reps;
    xattn_run_info info;
} xattn_timing;

/* One warm-up (program builds and first-touch happen there), then `reps`
 * synchronous calls, or until `budget_s` is spent (at least 3). */
static xattn_status xattn__time_case(xattn_ctx *ctx, xattn_case_run *r, int reps, double budget_s,
                                     xattn_timing *t)
{
    memset(t, 0, sizeof *t);
    xattn_status st = xattn_attention(ctx, &r->desc, &t->info);
    if (st != XATTN_STATUS_OK)
        return st;
    double *ms = malloc((size_t)reps * sizeof *ms);
    if (!ms)
        return XATTN_STATUS_OUT_OF_MEMORY;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double start = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    int n = 0;
    while (n < reps) {
        st = xattn_attention(ctx, &r->desc, &t->info);
        if (st != XATTN_STATUS_OK)
            break;
        ms[n++] = t->info.device_ms;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (budget_s > 0 && n >= 3 && (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - start > budget_s)
            break;
    }
    if (n > 0) {
        qsort(ms, (size_t)n, sizeof *ms, xattn__cmp_double);
        t->reps = n;
        t->min_ms = ms[0];
        t->median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
        t->p90_ms = ms[(int)floor(0.9 * (n - 1) + 0.5)];
        t->spread = t->median_ms > 0 ? (t->p90_ms - t->min_ms) / t->median_ms : 0;
    }
    free(ms);
    return st;
}

/* ---- run ---------------------------------------------------------------- */

/* Writes the context's records where --json / --trace / --csv asked. */
static int xattn__export_records(xattn_ctx *ctx, const char *json, const char *trace,
                                 const char *csv)
{
    const char *paths[] = {json, csv, trace};
    const xattn_export_format fmts[] = {XATTN_EXPORT_JSON, XATTN_EXPORT_CSV, XATTN_EXPORT_TRACE};
    const char *names[] = {"records (JSON)", "records (CSV)", "trace"};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        if (!paths[i])
            continue;
        if (xattn_profiler_export(ctx, fmts[i], paths[i]) != XATTN_STATUS_OK) {
            fprintf(stderr, "%s: %s\n", xattn__prog, xattn_last_error());
            rc = XATTN_EXIT_FAIL;
        } else {
            printf("written  %s: %s\n", names[i], paths[i]);
        }
    }
    return rc;
}

static int xattn__cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {XATTN__CASE_LONGOPTS,
                                         {"json", required_argument, 0, XATTN_OPT_JSON},
                                         {"trace", required_argument, 0, XATTN_OPT_TRACE},
                                         {"csv", required_argument, 0, XATTN_OPT_CSV},
                                         {0, 0, 0, 0}};
    xattn_cli cli = {.backend = XATTN_BACKEND_AUTO, .reps = 5, .check = 1};
    xattn_case_defaults(&cli.c);
    const char *json_path = NULL, *trace_path = NULL, *csv_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h') {
            printf("usage: %s run [options]\n  Runs one attention case and prints its time, "
                   "work rate and error against the reference.\n\n%s"
                   "  --json FILE                      the profiler's records (schema "
                   "xattn.records/1)\n"
                   "  --trace FILE                     a Chrome/Perfetto trace of the run\n"
                   "  --csv FILE                       the records as CSV\n",
                   xattn__prog, xattn__case_help);
            return 0;
        }
        if (opt == '?')
            return XATTN_EXIT_USAGE;
        if (opt == XATTN_OPT_JSON || opt == XATTN_OPT_TRACE || opt == XATTN_OPT_CSV) {
            *(opt == XATTN_OPT_JSON ? &json_path : opt == XATTN_OPT_TRACE ? &trace_path
                                                                           : &csv_path) = optarg;
            continue;
        }
        int rc = xattn__apply_case_opt(&cli, opt, optarg);
        if (rc)
            return rc;
    }
    if (optind < argc)
        return xattn__usage_error("run: unexpected argument '%s'", argv[optind]);

    xattn_ctx *ctx = NULL;
    if (xattn__open_ctx(&cli, cli.backend, cli.device, &ctx) != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: %s\n", xattn__prog, xattn_last_error());
        return XATTN_EXIT_FAIL;
    }
    xattn_device_info info;
    xattn_ctx_device_info(ctx, &info);
    char desc[256];
    xattn_case_describe(&cli.c, desc, sizeof desc);
    printf("device   %s [%d] %s\ncase     %s\n", xattn_backend_name(xattn_ctx_backend(ctx)),
           cli.device, info.name, desc);

    xattn_case_run r;
    xattn_timing t;
    int rc = 0;
    /* Every call of the run is recorded (the warm-up too): the last record
     * gives the work and roofline lines, the exports take them all. */
    xattn_profiler_enable(ctx, 1);
    xattn_status st = xattn_case_setup(ctx, &cli.c, &r);
    if (st == XATTN_STATUS_OK)
        st = xattn__time_case(ctx, &r, cli.reps, 0, &t);
    if (st != XATTN_STATUS_OK) {
        fprintf(stderr, "%s: %s: %s\n", xattn__prog, xattn_status_name(st), xattn_last_error());
        xattn_case_teardown(&r);
        xattn_ctx_destroy(ctx);
        return XATTN_EXIT_FAIL;
    }
    double useful = xattn_case_useful_flops(&cli.c);
    printf("algo     %s (asked %s): %s\n", xattn_algo_name(t.info.algo_chosen),
           xattn_algo_name(t.info.algo_requested), t.info.reason);
    printf("time     median %.4f ms, min %.4f ms, p90 %.4f ms over %d reps\n", t.median_ms,
           t.min_ms, t.p90_ms, t.reps);
    for (int i = 0; i < t.info.num_phases; i++)
        printf("  phase  %-8s %.4f ms\n", t.info.phase_names[i], t.info.phase_ms[i]);
    printf("work     %.3f GFLOP useful (%.3f dense), %.2f GFLOP/s useful\n", useful * 1e-9,
           xattn_case_dense_flops(&cli.c) * 1e-9,
           t.median_ms > 0 ? useful / (t.median_ms * 1e-3) * 1e-9 : 0.0);
    xattn_mem_stats ms;
    xattn_ctx_mem_stats(ctx, &ms);
    printf("memory   workspace %.3f MiB, context peak %.3f MiB\n",
           (double)t.info.workspace_bytes / 1048576.0, (double)ms.peak_bytes / 1048576.0);
    if (t.info.num_splits)
        printf("splits   %d\n", t.info.num_splits);
    size_t nrec = 0;
    xattn_record rec;
    if (xattn_profiler_count(ctx, &nrec) == XATTN_STATUS_OK && nrec &&
        xattn_profiler_get(ctx, nrec - 1, &rec) == XATTN_STATUS_OK) {
        printf("record   executed %.3f GFLOP (%.2f GFLOP/s), bytes min %.2f MB, est. actual "
               "%.2f MB (%.2f GB/s), padding waste %.1f%%\n",
               rec.flops_executed * 1e-9, rec.gflops_executed, rec.bytes_min * 1e-6,
               rec.bytes_actual * 1e-6, rec.gbytes_per_s, 100.0 * rec.padding_waste);
        if (rec.pct_fma_ceiling >= 0)
            printf("roofline %.1f%% of the FMA ceiling, %.1f%% of the read bandwidth "
                   "(last call)\n",
                   rec.pct_fma_ceiling, rec.pct_bw_ceiling);
        else
            printf("roofline no ceilings known for this device (run '%s devices --measure')\n",
                   xattn__prog);
    }
    if (xattn__export_records(ctx, json_path, trace_path, csv_path))
        rc = XATTN_EXIT_FAIL;
    if (cli.check) {
        double *ref = NULL;
        xattn_case_error e;
        st = xattn_case_reference(&r, &ref);
        if (st == XATTN_STATUS_OK)
            st = xattn_case_compare(&r, ref, &e);
        free(ref);
        if (st != XATTN_STATUS_OK) {
            fprintf(stderr, "%s: reference: %s\n", xattn__prog, xattn_last_error());
            rc = XATTN_EXIT_FAIL;
        } else {
            printf("error    rel L2 %.3e, max abs %.3e (reference rounded to %s: %.3e) %s\n",
                   e.rel_l2, e.max_abs, xattn_dtype_name(cli.c.dtype), e.rel_l2_rounded,
                   e.pass ? "PASS" : "FAIL");
            if (!e.pass)
                rc = XATTN_EXIT_FAIL;
        }
    }
    xattn_case_teardown(&r);
    xattn_ctx_destroy(ctx);
    return rc;
}

/* ---- bench -------------------------------------------------------------- */

/* The default preset: small enough to run on every backend in well under two
 * minutes on 2 cores, and shaped like what people run: Llama-style GQA
 * prefill, causal and not, and a decode step against a KV cache. */
static int xattn__default_cases(xattn_case *cases, int quick)
{
    int n = 0;
    xattn_case c;
    xattn_case_defaults(&c);
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = c.head_dim_v = 64;
    int64_t lens[] = {256, 1024};
    for (int li = 0; li < (quick ? 1 : 2); li++)
        for (int causal = 0; causal < 2; causal++) {
            c.sq = c.sk = lens[li];
            c.causal = causal;
            cases[n++] = c;
        }
    c.causal = 0;
    c.sq = 1;
    c.sk = quick ? 2048 : 8192;
    cases[n++] = c;
    c.sq = c.sk = quick ? 256 : 1024;
    c.causal = 1;
    c.dtype = c.kv_dtype = XATTN_DTYPE_F16;
    cases[n++] = c;
    return n;
}

static int xattn__cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {XATTN__CASE_LONGOPTS,
                                         {"out", required_argument, 0, XATTN_OPT_OUT},
                                         {"quick", no_argument, 0, XATTN_OPT_QUICK},
                                         {0, 0, 0, 0}};
    xattn_cli cli = {.backend = XATTN_BACKEND_AUTO, .reps = 20, .check = 1};
    xattn_case_defaults(&cli.c);
    const char *out_dir = "xattn-results";
    int quick = 0, custom = 0, only_backend = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h') {
            printf("usage: %s bench [--quick] [--out DIR] [options]\n"
                   "  With no case options, runs the default preset (Llama-style GQA prefill at\n"
                   "  256 and 1024 tokens, causal and not, a decode step on an 8k KV cache, and an\n"
                   "  f16 causal prefill) with every algorithm on every available backend, checks\n"
                   "  each against the reference, prints a table and writes DIR/results.csv and\n"
                   "  DIR/results.json (default DIR: xattn-results). With case options, benches\n"
                   "  that one case instead.\n\n%s"
                   "  --out DIR                        output folder\n"
                   "  --quick                          a smaller preset\n",
                   xattn__prog, xattn__case_help);
            return 0;
        }
        if (opt == '?')
            return XATTN_EXIT_USAGE;
        if (opt == XATTN_OPT_OUT) {
            out_dir = optarg;
            continue;
        }
        if (opt == XATTN_OPT_QUICK) {
            quick = 1;
            continue;
        }
        if (opt == 'b')
            only_backend = 1;
        else if (opt != XATTN_OPT_REPS && opt != XATTN_OPT_THREADS && opt != XATTN_OPT_NO_CHECK &&
                 opt != 'a' && opt != 'D')
            custom = 1;
        int rc = xattn__apply_case_opt(&cli, opt, optarg);
        if (rc)
            return rc;
    }
    if (optind < argc)
        return xattn__usage_error("bench: unexpected argument '%s'", argv[optind]);

    xattn_case cases[16];
    int ncases = custom ? (cases[0] = cli.c, 1) : xattn__default_cases(cases, quick);
    if (mkdir(out_dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "%s: --out: cannot create '%s': %s\n", xattn__prog, out_dir,
                strerror(errno));
        return XATTN_EXIT_USAGE;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/results.csv", out_dir);
    FILE *csv = fopen(path, "w");
    snprintf(path, sizeof path, "%s/results.json", out_dir);
    FILE *json = fopen(path, "w");
    if (!csv || !json) {
        fprintf(stderr, "%s: cannot write in '%s': %s\n", xattn__prog, out_dir, strerror(errno));
        if (csv)
            fclose(csv);
        if (json)
            fclose(json);
        return XATTN_EXIT_FAIL;
    }
    fprintf(csv, "backend,device,algo,case,median_ms,min_ms,p90_ms,spread,reps,useful_gflops,"
                 "gflops_per_s,workspace_bytes,rel_l2,max_abs,pass\n");
    fprintf(json, "{\n  \"tool\": \"xattn bench\",\n  \"version\": \"%s\",\n  \"results\": [",
            xattn_version_string());

    printf("%-7s %-8s %-44s %10s %10s %9s %10s %9s %s\n", "backend", "algo", "case", "median ms",
           "p90 ms", "GFLOP/s", "workspace", "rel err", "check");
    int failures = 0, rows = 0;
    double **refs = calloc((size_t)ncases, sizeof *refs);
    for (int b = 0; b < XATTN_BACKEND_COUNT && refs; b++) {
        xattn_backend be = (xattn_backend)b;
        if (only_backend && cli.backend != XATTN_BACKEND_AUTO && be != cli.backend)
            continue;
        if (xattn_backend_available(be) != XATTN_STATUS_OK) {
            printf("%-7s skipped: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        xattn_ctx *ctx;
        if (xattn__open_ctx(&cli, be, cli.device, &ctx) != XATTN_STATUS_OK) {
            printf("%-7s skipped: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        xattn_device_info info;
        xattn_ctx_device_info(ctx, &info);
        for (int ci = 0; ci < ncases; ci++) {
            for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
                if (cli.c.algo != XATTN_ALGO_AUTO && a != (int)cli.c.algo)
                    continue;
                xattn_case c = cases[ci];
                c.algo = (xattn_algo)a;
                char desc[256];
                xattn_case_describe(&c, desc, sizeof desc);
                xattn_case_run r;
                xattn_timing t;
                xattn_case_error e = {0};
                xattn_status st = xattn_case_setup(ctx, &c, &r);
                if (st == XATTN_STATUS_OK)
                    st = xattn__time_case(ctx, &r, cli.reps, 1.0, &t);
                if (st == XATTN_STATUS_OK && cli.check) {
                    if (!refs[ci])
                        st = xattn_case_reference(&r, &refs[ci]);
                    if (st == XATTN_STATUS_OK)
                        st = xattn_case_compare(&r, refs[ci], &e);
                }
                if (st != XATTN_STATUS_OK) {
                    printf("%-7s %-8s %-44s error: %s\n", xattn_backend_name(be),
                           xattn_algo_name(c.algo), desc, xattn_last_error());
                    failures++;
                    xattn_case_teardown(&r);
                    continue;
                }
                double useful = xattn_case_useful_flops(&c);
                double rate = t.median_ms > 0 ? useful / (t.median_ms * 1e-3) * 1e-9 : 0;
                const char *verdict = !cli.check ? "-" : e.pass ? "ok" : "FAIL";
                if (cli.check && !e.pass)
                    failures++;
                printf("%-7s %-8s %-44s %10.3f %10.3f %9.1f %8.2fMB %9.1e %s\n",
                       xattn_backend_name(be), xattn_algo_name(c.algo), desc, t.median_ms,
                       t.p90_ms, rate, (double)t.info.workspace_bytes / 1e6, e.rel_l2, verdict);
                fflush(stdout);
                fprintf(csv, "%s,\"%s\",%s,\"%s\",%.6f,%.6f,%.6f,%.4f,%d,%.6f,%.3f,%llu,%.3e,%.3e,%d\n",
                        xattn_backend_name(be), info.name, xattn_algo_name(c.algo), desc,
                        t.median_ms, t.min_ms, t.p90_ms, t.spread, t.reps, useful * 1e-9, rate,
                        (unsigned long long)t.info.workspace_bytes, e.rel_l2, e.max_abs,
                        cli.check ? e.pass : -1);
                fprintf(json,
                        "%s\n    {\"backend\": \"%s\", \"device\": \"%s\", \"algo\": \"%s\", "
                        "\"case\": \"%s\", \"median_ms\": %.6f, \"min_ms\": %.6f, \"p90_ms\": "
                        "%.6f, \"spread\": %.4f, \"reps\": %d, \"useful_gflop\": %.6f, "
                        "\"gflops_per_s\": %.3f, \"workspace_bytes\": %llu, \"rel_l2\": %.3e, "
                        "\"max_abs\": %.3e, \"checked\": %s, \"pass\": %s}",
                        rows ? "," : "", xattn_backend_name(be), info.name,
                        xattn_algo_name(c.algo), desc, t.median_ms, t.min_ms, t.p90_ms, t.spread,
                        t.reps, useful * 1e-9, rate, (unsigned long long)t.info.workspace_bytes,
                        e.rel_l2, e.max_abs, cli.check ? "true" : "false",
                        (!cli.check || e.pass) ? "true" : "false");
                rows++;
                xattn_case_teardown(&r);
            }
        }
        xattn_ctx_destroy(ctx);
    }
    if (refs)
        for (int ci = 0; ci < ncases; ci++)
            free(refs[ci]);
    free(refs);
    fprintf(json, "\n  ]\n}\n");
    fclose(csv);
    fclose(json);
    printf("%d results, %d failed; written to %s/results.csv and %s/results.json\n", rows,
           failures, out_dir, out_dir);
    return failures ? XATTN_EXIT_FAIL : 0;
}

/* ---- main --------------------------------------------------------------- */

static void xattn__help(void)
{
    printf("usage: %s <command> [options]\n\n"
           "commands:\n"
           "  devices   list backends and devices\n"
           "  run       run one attention case, with its time and error against the reference\n"
           "  bench     the default benchmark on every available backend (or one case)\n\n"
           "'%s <command> --help' shows a command's options. '%s --version' prints the "
           "version.\n",
           xattn__prog, xattn__prog, xattn__prog);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        xattn__help();
        return XATTN_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        xattn__help();
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("xattn %s\n", xattn_version_string());
        return 0;
    }
    if (!strcmp(cmd, "devices"))
        return xattn__cmd_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return xattn__cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return xattn__cmd_bench(argc - 1, argv + 1);
    return xattn__usage_error("'%s' is not a command (devices, run, bench)", cmd);
}
