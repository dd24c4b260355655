/*
 * ggml_fa: ggml's CPU flash_attn_ext on a decode call, timed, as the peer of
 * `xattn bench` (a benchmark program, never a test; bench/peer-ggml.sh builds
 * it against a ggml it builds itself and runs the two in turns).
 *
 * The call is the one llama.cpp makes for a KV cache with flash attention on:
 *   q    f32 [D, Sq, Hq, B]   (ggml's order, innermost first)
 *   k    [D, Sk, Hkv, B]      f16, q8_0 or f32
 *   v    [D, Sk, Hkv, B]      the same type as k (not transposed)
 *   mask f16 [Sk, Sq, 1, 1]   all zeros (every key visible, as for one decode
 *                             token), broadcast over heads and batch
 *   out  f32 [D, Hq, Sq, B]   (permuted by the op)
 * scale 1/sqrt(D), no ALiBi, no softcap, f32 accumulation asked for as
 * llama.cpp does. With --layout bshd (the default) q, k and v are permuted
 * views of [D, H, S, B] tensors: llama.cpp's cache keeps a token's heads
 * together, which is xattn's BSHD; --layout bhsd makes them contiguous.
 * The output is BSHD ([B, Sq, Hq, D]) either way, as ggml writes it.
 * --thp asks for transparent huge pages on ggml's tensors (see
 * advise_huge_pages): xattn's allocator asks for them, ggml's does not.
 *
 * Inputs are uniform in [-1, 1) from --seed (xattn's tool draws the same
 * distribution, not the same numbers). After --warmup untimed calls, --reps
 * calls are timed on the monotonic clock around ggml_backend_graph_compute,
 * and one JSON line gives the median, min and p90 in ms and the K/V bytes
 * read once per call over the median (q8_0: 34 bytes per 32 values).
 *
 * --check (a small shape is the point: it runs xattn's double-precision
 * reference) also runs xattn's CPU backend on the very same bytes (its
 * buffers wrap ggml's tensors) and prints the max abs difference and the
 * relative L2 error of ggml and of xattn against the reference, and of ggml
 * against xattn. A q8_0 cache is checked only when the xattn it was built
 * against has q8_0 (XATTN_Q8_0_BLOCK).
 *
 *   ggml_fa [--batch 8] [--heads 32] [--kv-heads 8] [--sq 1] [--sk 8192]
 *           [--head-dim 128] [--kv-dtype f16|q8_0|f32] [--layout bshd|bhsd]
 *           [--threads 2] [--warmup 2] [--reps 10] [--seed 42] [--thp] [--check]
 *   ggml_fa --version
 *
 * Exit status: 0; 1 when ggml or xattn fails or the check finds a NaN or an
 * error above its bound; 2 for a bad command line.
 */
#define _DEFAULT_SOURCE /* clock_gettime, madvise */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include "xattn.h"
#include "xattn_reference.h"

typedef struct fa_opts {
    int64_t batch, heads, kv_heads, sq, sk, head_dim;
    enum ggml_type kv_type;
    int bhsd;
    int threads, warmup, reps;
    uint64_t seed;
    int check;
    int thp;
} fa_opts;

typedef struct fa_graph {
    struct ggml_context *ctx;
    ggml_backend_t backend;
    ggml_backend_buffer_t buf;
    struct ggml_cgraph *graph;
    struct ggml_tensor *q, *k, *v, *mask, *out; /* q, k, v: the memory tensors */
} fa_graph;

static const char *kv_type_name(enum ggml_type t)
{
    return t == GGML_TYPE_F16 ? "f16" : t == GGML_TYPE_Q8_0 ? "q8_0" : "f32";
}

static int parse_i64(const char *flag, const char *val, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    long long x = val ? strtoll(val, &end, 10) : 0;
    if (!val || end == val || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "ggml_fa: %s wants an integer in [%lld, %lld], not '%s'\n", flag,
                (long long)lo, (long long)hi, val ? val : "(missing)");
        return 2;
    }
    *out = (int64_t)x;
    return 0;
}

static int parse_args(int argc, char **argv, fa_opts *o)
{
    *o = (fa_opts){8, 32, 8, 1, 8192, 128, GGML_TYPE_F16, 0, 2, 2, 10, 42, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        int rc = 0;
        if (!strcmp(a, "--version")) {
            printf("ggml %s (commit %s)\n", ggml_version(), ggml_commit());
            exit(0);
        }
        if (!strcmp(a, "--thp")) {
            o->thp = 1;
            continue;
        }
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (!strcmp(a, "--kv-dtype")) {
            if (val && !strcmp(val, "f16")) {
                o->kv_type = GGML_TYPE_F16;
            } else if (val && !strcmp(val, "q8_0")) {
                o->kv_type = GGML_TYPE_Q8_0;
            } else if (val && !strcmp(val, "f32")) {
                o->kv_type = GGML_TYPE_F32;
            } else {
                fprintf(stderr, "ggml_fa: --kv-dtype wants f16, q8_0 or f32, not '%s'\n",
                        val ? val : "(missing)");
                return 2;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--layout")) {
            if (val && (!strcmp(val, "bshd") || !strcmp(val, "bhsd"))) {
                o->bhsd = !strcmp(val, "bhsd");
            } else {
                fprintf(stderr, "ggml_fa: --layout wants bshd or bhsd, not '%s'\n",
                        val ? val : "(missing)");
                return 2;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--batch")) {
            rc = parse_i64(a, val, 1, 1 << 16, &o->batch);
        } else if (!strcmp(a, "--heads")) {
            rc = parse_i64(a, val, 1, 1 << 12, &o->heads);
        } else if (!strcmp(a, "--kv-heads")) {
            rc = parse_i64(a, val, 1, 1 << 12, &o->kv_heads);
        } else if (!strcmp(a, "--sq")) {
            rc = parse_i64(a, val, 1, 1 << 20, &o->sq);
        } else if (!strcmp(a, "--sk")) {
            rc = parse_i64(a, val, 1, 1 << 24, &o->sk);
        } else if (!strcmp(a, "--head-dim")) {
            rc = parse_i64(a, val, 1, 1024, &o->head_dim);
        } else if (!strcmp(a, "--threads")) {
            rc = parse_i64(a, val, 1, 1024, &x);
            o->threads = (int)x;
        } else if (!strcmp(a, "--warmup")) {
            rc = parse_i64(a, val, 0, 1000, &x);
            o->warmup = (int)x;
        } else if (!strcmp(a, "--reps")) {
            rc = parse_i64(a, val, 1, 100000, &x);
            o->reps = (int)x;
        } else if (!strcmp(a, "--seed")) {
            rc = parse_i64(a, val, 0, INT64_MAX, &x);
            o->seed = (uint64_t)x;
        } else {
            fprintf(stderr,
                    "ggml_fa: unknown option '%s' (see the comment at the top of "
                    "bench/peers/ggml_fa.c)\n",
                    a);
            return 2;
        }
        if (rc) {
            return rc;
        }
        i++;
    }
    if (o->heads % o->kv_heads) {
        fprintf(stderr, "ggml_fa: --heads %lld is not a multiple of --kv-heads %lld\n",
                (long long)o->heads, (long long)o->kv_heads);
        return 2;
    }
    if (o->kv_type == GGML_TYPE_Q8_0 && o->head_dim % 32) {
        fprintf(stderr, "ggml_fa: --kv-dtype q8_0 needs --head-dim a multiple of 32, not %lld\n",
                (long long)o->head_dim);
        return 2;
    }
    return 0;
}

/* splitmix64, then 24 bits to a float in [-1, 1). */
static float rng_uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) / 8388608.0f - 1.0f;
}

/* Fills a tensor of rows of `row` values with uniform values, converted to
 * its type a chunk of rows at a time (a 32k-token cache is a GiB in f16). */
static int fill(struct ggml_tensor *t, int64_t row, uint64_t *rng)
{
    const int64_t rows = ggml_nelements(t) / row;
    const int64_t chunk_rows = row >= 65536 ? 1 : 65536 / row;
    const size_t row_bytes = ggml_row_size(t->type, row);
    float *src = malloc((size_t)(chunk_rows * row) * sizeof(float));
    void *dst = malloc((size_t)chunk_rows * row_bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        fprintf(stderr, "ggml_fa: out of host memory filling %s\n", t->name);
        return 1;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
        const int64_t nr = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
        for (int64_t i = 0; i < nr * row; i++) {
            src[i] = rng_uniform(rng);
        }
        if (t->type == GGML_TYPE_F32) {
            memcpy(dst, src, (size_t)(nr * row) * sizeof(float));
        } else if (t->type == GGML_TYPE_F16) {
            ggml_fp32_to_fp16_row(src, dst, nr * row);
        } else {
            ggml_quantize_chunk(t->type, src, dst, 0, nr, row, NULL);
        }
        ggml_backend_tensor_set(t, dst, (size_t)r0 * row_bytes, (size_t)nr * row_bytes);
    }
    free(src);
    free(dst);
    return 0;
}

static void graph_free(fa_graph *g)
{
    if (g->buf) {
        ggml_backend_buffer_free(g->buf);
    }
    if (g->backend) {
        ggml_backend_free(g->backend);
    }
    if (g->ctx) {
        ggml_free(g->ctx);
    }
}

/* A [D, S, H, B] view of a tensor stored as [D, H, S, B] (bshd), or the
 * tensor itself (bhsd). */
static struct ggml_tensor *as_dshb(struct ggml_context *ctx, struct ggml_tensor *t, int bhsd)
{
    return bhsd ? t : ggml_permute(ctx, t, 0, 2, 1, 3);
}

/* Asks for transparent huge pages on the tensors' memory before it is first
 * touched, as xattn's allocator does for its buffers; ggml's CPU buffers do
 * not, so where THP is "madvise" (a common default) ggml runs on 4 KiB pages
 * unless this is given. Advice only: a refusal is not an error. */
static void advise_huge_pages(ggml_backend_buffer_t buf)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t base = (uintptr_t)ggml_backend_buffer_get_base(buf);
    const uintptr_t end = base + ggml_backend_buffer_get_size(buf);
    const uintptr_t a = (base + huge - 1) & ~(huge - 1), e = end & ~(huge - 1);
    if (e > a && madvise((void *)a, (size_t)(e - a), MADV_HUGEPAGE) != 0) {
        fprintf(stderr, "ggml_fa: madvise(MADV_HUGEPAGE) refused; 4 KiB pages\n");
    }
#else
    (void)buf;
    fprintf(stderr, "ggml_fa: --thp needs Linux's MADV_HUGEPAGE; 4 KiB pages\n");
#endif
}

static int graph_build(const fa_opts *o, fa_graph *g)
{
    const int64_t D = o->head_dim;
    struct ggml_init_params ip = {
        .mem_size = ggml_tensor_overhead() * 16 + ggml_graph_overhead(),
        .mem_buffer = NULL,
        .no_alloc = true,
    };
    memset(g, 0, sizeof(*g));
    g->ctx = ggml_init(ip);
    g->backend = ggml_backend_cpu_init();
    if (!g->ctx || !g->backend) {
        fprintf(stderr, "ggml_fa: ggml_init or ggml_backend_cpu_init failed\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(g->backend, o->threads);

    if (o->bhsd) {
        g->q = ggml_new_tensor_4d(g->ctx, GGML_TYPE_F32, D, o->sq, o->heads, o->batch);
        g->k = ggml_new_tensor_4d(g->ctx, o->kv_type, D, o->sk, o->kv_heads, o->batch);
        g->v = ggml_new_tensor_4d(g->ctx, o->kv_type, D, o->sk, o->kv_heads, o->batch);
    } else {
        g->q = ggml_new_tensor_4d(g->ctx, GGML_TYPE_F32, D, o->heads, o->sq, o->batch);
        g->k = ggml_new_tensor_4d(g->ctx, o->kv_type, D, o->kv_heads, o->sk, o->batch);
        g->v = ggml_new_tensor_4d(g->ctx, o->kv_type, D, o->kv_heads, o->sk, o->batch);
    }
    g->mask = ggml_new_tensor_4d(g->ctx, GGML_TYPE_F16, o->sk, o->sq, 1, 1);
    ggml_set_name(g->q, "q");
    ggml_set_name(g->k, "k");
    ggml_set_name(g->v, "v");
    ggml_set_name(g->mask, "mask");

    g->out = ggml_flash_attn_ext(g->ctx, as_dshb(g->ctx, g->q, o->bhsd),
                                 as_dshb(g->ctx, g->k, o->bhsd), as_dshb(g->ctx, g->v, o->bhsd),
                                 g->mask, 1.0f / sqrtf((float)D), 0.0f, 0.0f);
    ggml_prec_set_acc(g->out, GGML_PREC_F32);
    g->graph = ggml_new_graph(g->ctx);
    ggml_build_forward_expand(g->graph, g->out);

    g->buf = ggml_backend_alloc_ctx_tensors(g->ctx, g->backend);
    if (!g->buf) {
        fprintf(stderr, "ggml_fa: cannot allocate the tensors (%.2f GiB of K/V)\n",
                2.0 * (double)ggml_nbytes(g->k) / (1 << 30));
        return 1;
    }
    if (o->thp) {
        advise_huge_pages(g->buf);
    }
    uint64_t rng = o->seed;
    if (fill(g->q, D, &rng) || fill(g->k, D, &rng) || fill(g->v, D, &rng)) {
        return 1;
    }
    /* An all-zero f16 mask: every key visible. */
    ggml_backend_tensor_memset(g->mask, 0, 0, ggml_nbytes(g->mask));
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int time_calls(const fa_opts *o, fa_graph *g)
{
    double *t = malloc((size_t)o->reps * sizeof(double));
    if (!t) {
        return 1;
    }
    for (int i = 0; i < o->warmup + o->reps; i++) {
        const double t0 = now_ms();
        const enum ggml_status st = ggml_backend_graph_compute(g->backend, g->graph);
        const double t1 = now_ms();
        if (st != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "ggml_fa: ggml_backend_graph_compute: %s\n", ggml_status_to_string(st));
            free(t);
            return 1;
        }
        if (i >= o->warmup) {
            t[i - o->warmup] = t1 - t0;
        }
    }
    qsort(t, (size_t)o->reps, sizeof(double), cmp_double);
    const int n = o->reps;
    const double median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    const int p90 = (int)ceil(0.9 * n) - 1; /* nearest rank, as xattn's bench */
    const double kv_bytes = (double)(ggml_nbytes(g->k) + ggml_nbytes(g->v));
    printf("{\"peer\": \"ggml\", \"ggml\": \"%s\", \"ggml_commit\": \"%s\", "
           "\"case\": \"B%lld H%lld/%lld Sq%lld Sk%lld D%lld\", \"kv_dtype\": \"%s\", "
           "\"layout\": \"%s\", \"thp\": %d, \"threads\": %d, \"warmup\": %d, \"reps\": %d, "
           "\"median_ms\": %.4f, \"min_ms\": %.4f, \"p90_ms\": %.4f, \"kv_bytes\": %.0f, "
           "\"kv_gbytes_per_s\": %.3f}\n",
           ggml_version(), ggml_commit(), (long long)o->batch, (long long)o->heads,
           (long long)o->kv_heads, (long long)o->sq, (long long)o->sk, (long long)o->head_dim,
           kv_type_name(o->kv_type), o->bhsd ? "bhsd" : "bshd", o->thp, o->threads, o->warmup,
           o->reps, median, t[0], t[p90], kv_bytes, kv_bytes / (median * 1e6));
    free(t);
    return 0;
}

/* ---- --check: xattn on the same bytes, both against xattn's reference ---- */

typedef struct diff {
    double max_abs, rel_l2;
    int nan;
} diff;

static diff diff_of(const float *a, const double *b, size_t n)
{
    diff d = {0, 0, 0};
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = a[i], y = b[i];
        if (isnan(x) || isnan(y)) {
            d.nan = 1;
            continue;
        }
        const double e = fabs(x - y);
        d.max_abs = e > d.max_abs ? e : d.max_abs;
        num += e * e;
        den += y * y;
    }
    d.rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    return d;
}

static int xattn_fail(const char *what, xattn_status st)
{
    fprintf(stderr, "ggml_fa: xattn %s: %s: %s\n", what, xattn_status_name(st), xattn_last_error());
    return 1;
}

static int kv_xattn_dtype(enum ggml_type t, xattn_dtype *out)
{
    switch (t) {
    case GGML_TYPE_F32: *out = XATTN_DTYPE_F32; return 0;
    case GGML_TYPE_F16: *out = XATTN_DTYPE_F16; return 0;
#ifdef XATTN_Q8_0_BLOCK
    case GGML_TYPE_Q8_0: *out = XATTN_DTYPE_Q8_0; return 0;
#endif
    default: return 1;
    }
}

static xattn_tensor view(xattn_buffer *b, xattn_dtype dt, int bhsd, int64_t B, int64_t S, int64_t H,
                         int64_t D)
{
    return bhsd ? xattn_tensor_bhsd(b, 0, dt, B, S, H, D) : xattn_tensor_bshd(b, 0, dt, B, S, H, D);
}

static int check(const fa_opts *o, fa_graph *g)
{
    xattn_dtype kvdt;
    if (kv_xattn_dtype(o->kv_type, &kvdt)) {
        printf("{\"check\": \"not run\", \"why\": \"the xattn this was built against has no "
               "q8_0 K/V\"}\n");
        return 0;
    }
    const size_t n_out = (size_t)ggml_nelements(g->out);
    float *o_ggml = malloc(n_out * sizeof(float));
    float *o_xattn = malloc(n_out * sizeof(float));
    double *o_ref = malloc(n_out * sizeof(double));
    xattn_ctx *ctx = NULL;
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    int rc = 1;
    xattn_status st;
    if (!o_ggml || !o_xattn || !o_ref) {
        fprintf(stderr, "ggml_fa: out of host memory for the check\n");
        goto done;
    }
    if (ggml_backend_graph_compute(g->backend, g->graph) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "ggml_fa: ggml_backend_graph_compute failed\n");
        goto done;
    }
    ggml_backend_tensor_get(g->out, o_ggml, 0, n_out * sizeof(float));

    if ((st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx)) != XATTN_STATUS_OK) {
        rc = xattn_fail("context", st);
        goto done;
    }
    if ((st = xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, o->threads)) ||
        (st = xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1)) ||
        (st = xattn_buffer_wrap_host(ctx, g->q->data, ggml_nbytes(g->q), &bq)) ||
        (st = xattn_buffer_wrap_host(ctx, g->k->data, ggml_nbytes(g->k), &bk)) ||
        (st = xattn_buffer_wrap_host(ctx, g->v->data, ggml_nbytes(g->v), &bv)) ||
        (st = xattn_buffer_wrap_host(ctx, o_xattn, n_out * sizeof(float), &bo))) {
        rc = xattn_fail("setup", st);
        goto done;
    }
    const int64_t B = o->batch, D = o->head_dim;
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = view(bq, XATTN_DTYPE_F32, o->bhsd, B, o->sq, o->heads, D);
    d.k = view(bk, kvdt, o->bhsd, B, o->sk, o->kv_heads, D);
    d.v = view(bv, kvdt, o->bhsd, B, o->sk, o->kv_heads, D);
    d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, B, o->sq, o->heads, D);
    d.scale = 1.0f / sqrtf((float)D);
    xattn_run_info info;
    memset(&info, 0, sizeof(info));
    if ((st = xattn_attention(ctx, &d, &info)) != XATTN_STATUS_OK) {
        rc = xattn_fail("attention", st);
        goto done;
    }
    if ((st = xattn_reference_attention(ctx, &d, o_ref, NULL)) != XATTN_STATUS_OK) {
        rc = xattn_fail("reference", st);
        goto done;
    }
    const diff gr = diff_of(o_ggml, o_ref, n_out);
    const diff xr = diff_of(o_xattn, o_ref, n_out);
    for (size_t i = 0; i < n_out; i++) { /* the reference is spent: xattn's output in its place */
        o_ref[i] = o_xattn[i];
    }
    const diff gx = diff_of(o_ggml, o_ref, n_out);
    /* A loose sanity bound, not a test: both accumulate in f32 (ggml an f16
     * V in f16, and a q8_0 K against q quantized to q8_0), so they differ
     * from the double reference by far more than f32 rounding, but an error
     * of 1% of the output's norm means they computed different things. */
    const int ok = !gr.nan && !xr.nan && gr.rel_l2 < 1e-2 && xr.rel_l2 < 1e-2;
    printf("{\"check\": \"%s\", \"case\": \"B%lld H%lld/%lld Sq%lld Sk%lld D%lld\", "
           "\"kv_dtype\": \"%s\", \"layout\": \"%s\", \"xattn_algo\": \"%s\", "
           "\"ggml_vs_ref\": {\"max_abs\": %.3e, \"rel_l2\": %.3e}, "
           "\"xattn_vs_ref\": {\"max_abs\": %.3e, \"rel_l2\": %.3e}, "
           "\"ggml_vs_xattn\": {\"max_abs\": %.3e, \"rel_l2\": %.3e}}\n",
           ok ? "ok" : "FAIL", (long long)B, (long long)o->heads, (long long)o->kv_heads,
           (long long)o->sq, (long long)o->sk, (long long)D, kv_type_name(o->kv_type),
           o->bhsd ? "bhsd" : "bshd", xattn_algo_name(info.algo_chosen), gr.max_abs, gr.rel_l2,
           xr.max_abs, xr.rel_l2, gx.max_abs, gx.rel_l2);
    rc = ok ? 0 : 1;
done:
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_ctx_destroy(ctx);
    free(o_ggml);
    free(o_xattn);
    free(o_ref);
    return rc;
}

int main(int argc, char **argv)
{
    fa_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) {
        return rc;
    }
    fa_graph g;
    rc = graph_build(&o, &g);
    if (!rc) {
        rc = o.check ? check(&o, &g) : time_calls(&o, &g);
    }
    graph_free(&g);
    return rc;
}
