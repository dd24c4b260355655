/*
 * test_cuda: tests of the CUDA backend that the cross-backend harness
 * (test_backend_ops) does not cover.
 *
 *   available    no driver/GPU: xattn_backend_available(CUDA) is
 *                BACKEND_UNAVAILABLE with CUDA's own message, and every entry
 *                point that needs a device says so; with a GPU: the device
 *                description is filled in from the CUDA runtime.
 *   interop      a context on the caller's cudaStream_t and the caller's
 *                device pointers: ordering with the caller's own work on the
 *                stream, results against the CPU backend, wrap errors, and the
 *                stream surviving the context.
 *   launch_fail  a kernel launch that fails (forced through the backend's test
 *                hook) comes back as XATTN_STATUS_BACKEND with CUDA's error
 *                text, and the context stays usable; so does a workspace over
 *                the memory limit (OUT_OF_MEMORY).
 *   algos        NAIVE, FLASH, SPLITKV x f32/f16/bf16 (and mixed) on small
 *                shapes against the CPU backend, on the mma and simt paths;
 *                each call's record names the kernel that ran (mma where
 *                the path applies) and carries the work its kernels counted.
 *   paged        paged KV caches (block_table) against the same keys in
 *                contiguous K/V on the same device, every algorithm, mma and
 *                simt, page sizes 3, 16 and 64, a sequence of length 0; each
 *                case runs twice with two shuffled tables of the same size
 *                (the second must be uploaded, not taken for the first).
 *   fp8          fp8 K/V caches (E4M3, E5M2, with and without per-head scales)
 *                against the CPU backend, every algorithm, mma and simt, decode
 *                and prefill; paged fp8 against contiguous on the device.
 *
 * Usage: test_cuda <test>. Without a CUDA device every test but `available`
 * prints "skipped: no CUDA device" and exits 0 (ctest shows it as skipped).
 * The last line is always "N passed, N failed, N skipped".
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "xattn.h"
#include "xattn_cuda.h"

/* Internal hook of the CUDA backend (backends/xattn_backend_cuda.c). */
void xattn__cuda_test_fail_next_launch(void);

static int n_pass, n_fail, n_skip;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        xattn_status st_ = (expr);                                                                 \
        check(st_ == XATTN_STATUS_OK, "%s -> %s %s", #expr, xattn_status_name(st_),                \
              st_ == XATTN_STATUS_OK ? "" : xattn_last_error());                                   \
    } while (0)

static int finish(void)
{
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}

/* ---- host data -------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int is_fp8(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_FP8_E4M3 || dt == XATTN_DTYPE_FP8_E5M2;
}

static size_t dsize(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_F32 ? 4 : is_fp8(dt) ? 1 : 2;
}

static void put(void *base, xattn_dtype dt, size_t i, float x)
{
    if (is_fp8(dt))
        ((uint8_t *)base)[i] = xattn_f32_to_fp8(x, dt);
    else if (dt == XATTN_DTYPE_F32)
        ((float *)base)[i] = x;
    else if (dt == XATTN_DTYPE_F16)
        ((uint16_t *)base)[i] = xattn_f32_to_f16(x);
    else
        ((uint16_t *)base)[i] = xattn_f32_to_bf16(x);
}

static float get(const void *base, xattn_dtype dt, size_t i)
{
    if (is_fp8(dt))
        return xattn_fp8_to_f32(((const uint8_t *)base)[i], dt);
    if (dt == XATTN_DTYPE_F32)
        return ((const float *)base)[i];
    if (dt == XATTN_DTYPE_F16)
        return xattn_f16_to_f32(((const uint16_t *)base)[i]);
    return xattn_bf16_to_f32(((const uint16_t *)base)[i]);
}

/* One dense BSHD problem. */
typedef struct shape {
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    xattn_dtype dq, dkv;
    int causal;
    xattn_algo algo;
    int kvscale; /* fp8 K/V: per-KV-head k_scale / v_scale (0: none) */
} shape;

typedef struct host_case {
    shape s;
    void *q, *k, *v; /* inputs */
    size_t nq, nk, nv, no, nl;
    float ks[16], vs[16]; /* fp8 scales of KV heads 0 .. Hkv - 1 (s.kvscale) */
} host_case;

static void case_init(host_case *c, const shape *s)
{
    c->s = *s;
    c->nq = (size_t)(s->B * s->Sq * s->Hq * s->D);
    c->nk = (size_t)(s->B * s->Sk * s->Hkv * s->D);
    c->nv = (size_t)(s->B * s->Sk * s->Hkv * s->Dv);
    c->no = (size_t)(s->B * s->Sq * s->Hq * s->Dv);
    c->nl = (size_t)(s->B * s->Hq * s->Sq);
    c->q = malloc(c->nq * dsize(s->dq));
    c->k = malloc(c->nk * dsize(s->dkv));
    c->v = malloc(c->nv * dsize(s->dkv));
    for (size_t i = 0; i < c->nq; i++)
        put(c->q, s->dq, i, rnd());
    for (size_t i = 0; i < c->nk; i++)
        put(c->k, s->dkv, i, rnd());
    for (size_t i = 0; i < c->nv; i++)
        put(c->v, s->dkv, i, rnd());
    for (int h = 0; h < 16; h++) {
        c->ks[h] = 0.75f + 0.5f * rnd();
        c->vs[h] = 1.0f + 0.75f * rnd();
    }
}

/* An fp8 case's scale tensors [1, 1, Hkv, 1] in two new buffers (freed by
 * the caller); nothing without s.kvscale. */
static xattn_status scales_attach(xattn_ctx *ctx, const host_case *c, xattn_attn_desc *d,
                                  xattn_buffer **bks, xattn_buffer **bvs)
{
    const shape *s = &c->s;
    *bks = *bvs = NULL;
    if (!s->kvscale)
        return XATTN_STATUS_OK;
    const size_t n = (size_t)s->Hkv * 4;
    xattn_status st = xattn_buffer_alloc(ctx, n, bks);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, n, bvs);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(*bks, 0, c->ks, n);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(*bvs, 0, c->vs, n);
    d->k_scale = xattn_tensor_bshd(*bks, 0, XATTN_DTYPE_F32, 1, 1, s->Hkv, 1);
    d->v_scale = xattn_tensor_bshd(*bvs, 0, XATTN_DTYPE_F32, 1, 1, s->Hkv, 1);
    return st;
}

static void case_free(host_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
}

static void desc_fill(xattn_attn_desc *d, const shape *s, xattn_buffer *bq, xattn_buffer *bk,
                      xattn_buffer *bv, xattn_buffer *bo, xattn_buffer *bl)
{
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(bq, 0, s->dq, s->B, s->Sq, s->Hq, s->D);
    d->k = xattn_tensor_bshd(bk, 0, s->dkv, s->B, s->Sk, s->Hkv, s->D);
    d->v = xattn_tensor_bshd(bv, 0, s->dkv, s->B, s->Sk, s->Hkv, s->Dv);
    d->o = xattn_tensor_bshd(bo, 0, s->dq, s->B, s->Sq, s->Hq, s->Dv);
    if (bl) {
        d->lse.buffer = bl;
        d->lse.dtype = XATTN_DTYPE_F32;
        d->lse.shape[0] = s->B;
        d->lse.shape[1] = s->Hq;
        d->lse.shape[2] = s->Sq;
        d->lse.shape[3] = 1;
        d->lse.strides[0] = s->Hq * s->Sq;
        d->lse.strides[1] = s->Sq;
        d->lse.strides[2] = 1;
        d->lse.strides[3] = 1;
    }
    d->causal = s->causal;
    d->algo = s->algo;
}

/* Runs c on ctx through library buffers; o (no elements of dq) and lse (nl
 * floats) receive the results. */
static xattn_status run_on(xattn_ctx *ctx, const host_case *c, void *o, float *lse,
                           xattn_run_info *info)
{
    const shape *s = &c->s;
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, c->nq * dsize(s->dq), &bq);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->nk * dsize(s->dkv), &bk);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->nv * dsize(s->dkv), &bv);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->no * dsize(s->dq), &bo);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->nl * 4, &bl);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bq, 0, c->q, c->nq * dsize(s->dq));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bk, 0, c->k, c->nk * dsize(s->dkv));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bv, 0, c->v, c->nv * dsize(s->dkv));
    xattn_buffer *bks = NULL, *bvs = NULL;
    if (st == XATTN_STATUS_OK) {
        xattn_attn_desc d;
        desc_fill(&d, s, bq, bk, bv, bo, bl);
        st = scales_attach(ctx, c, &d, &bks, &bvs);
        if (st == XATTN_STATUS_OK)
            st = xattn_attention(ctx, &d, info);
    }
    xattn_buffer_free(bks);
    xattn_buffer_free(bvs);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(bo, 0, o, c->no * dsize(s->dq));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(bl, 0, lse, c->nl * 4);
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);
    return st;
}

/* Relative L2 error of o against ref, and the worst LSE difference. */
static double rel_l2(const void *o, const void *ref, xattn_dtype dt, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = get(o, dt, i), b = get(ref, dt, i);
        if (isnan(a) || isnan(b))
            return INFINITY;
        num += (a - b) * (a - b);
        den += b * b;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double lse_err(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i])
                return INFINITY;
            continue;
        }
        double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

/* CUDA vs CPU (both against the same rounding): f32 1e-5, f16 4e-3, bf16 3e-2. */
static double tol(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_F32 ? 1e-5 : dt == XATTN_DTYPE_F16 ? 4e-3 : 3e-2;
}

static xattn_ctx *cpu_ctx;

static int compare_with_cpu(xattn_ctx *ctx, const host_case *c, const char *label)
{
    const shape *s = &c->s;
    void *o = malloc(c->no * dsize(s->dq)), *ro = malloc(c->no * dsize(s->dq));
    float *l = malloc(c->nl * 4), *rl = malloc(c->nl * 4);
    xattn_run_info info, rinfo;
    xattn_status st = run_on(ctx, c, o, l, &info);
    xattn_status rst = run_on(cpu_ctx, c, ro, rl, &rinfo);
    int ok = 0;
    if (st != XATTN_STATUS_OK || rst != XATTN_STATUS_OK) {
        check(0, "%s: cuda %s, cpu %s: %s", label, xattn_status_name(st), xattn_status_name(rst),
              xattn_last_error());
    } else {
        double e = rel_l2(o, ro, s->dq, c->no), le = lse_err(l, rl, c->nl);
        ok = e <= tol(s->dq) && le <= 1e-4;
        check(ok, "%s: rel L2 vs cpu %.2e (<= %.0e), LSE %.2e; %s, %d split(s), %.3f ms", label, e,
              tol(s->dq), le, xattn_algo_name(info.algo_chosen), info.num_splits, info.device_ms);
    }
    free(o);
    free(ro);
    free(l);
    free(rl);
    return ok;
}

/* The record of the last call on ctx (profiling on): the kernel the path
 * rules pick, and executed work counted by the kernels, at least the useful
 * work. */
static void check_record(xattn_ctx *ctx, const shape *s, int simt, const char *label)
{
    size_t n = 0;
    xattn_record r;
    if (xattn_profiler_count(ctx, &n) != XATTN_STATUS_OK || n == 0 ||
        xattn_profiler_get(ctx, n - 1, &r) != XATTN_STATUS_OK) {
        check(0, "%s: no record: %s", label, xattn_last_error());
        return;
    }
    xattn_device_info info;
    xattn_ctx_device_info(ctx, &info);
    /* fp8 K/V run on q's 16-bit mma kernel, converted in the tile load. */
    const int mma = !simt && s->algo != XATTN_ALGO_NAIVE && (s->dq == s->dkv || is_fp8(s->dkv)) &&
                    s->dq != XATTN_DTYPE_F32 && info.compute_capability >= 80;
    check(!strcmp(r.kernel, mma ? "mma" : "simt") && r.matrix_units == mma && r.work_counted &&
              r.flops_executed >= r.flops_useful && r.flops_useful > 0,
          "%s: record kernel \"%s\" (want %s), matrix_units %d, work_counted %d, executed %.4g >= "
          "useful %.4g",
          label, r.kernel, mma ? "mma" : "simt", r.matrix_units, r.work_counted, r.flops_executed,
          r.flops_useful);
}

/* ---- device presence ------------------------------------------------------ */

/* 1 when a CUDA device is usable; else checks the unavailable path (a real
 * test: the status, CUDA's message, and the entry points that need a device). */
static int have_device(int report)
{
    xattn_status st = xattn_backend_available(XATTN_BACKEND_CUDA);
    if (st == XATTN_STATUS_OK)
        return 1;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    check(st == XATTN_STATUS_BACKEND_UNAVAILABLE, "backend_available(cuda) -> %s",
          xattn_status_name(st));
    check(xattn_backend_compiled(XATTN_BACKEND_CUDA) == 1, "the CUDA backend is compiled in");
    /* CUDA's own text: the driver's message from cudaGetDeviceCount, or the
     * reason no device qualifies. */
    check(strstr(msg, "cuda") != NULL &&
              (strstr(msg, "cudaGetDeviceCount failed: ") != NULL ||
               strstr(msg, "no CUDA device") != NULL || strstr(msg, "compute capability") != NULL),
          "the reason carries CUDA's message: \"%s\"", msg);
    int n = -1;
    st = xattn_device_count(XATTN_BACKEND_CUDA, &n);
    check(st == XATTN_STATUS_OK && n == 0, "device_count(cuda) -> %s, %d", xattn_status_name(st),
          n);
    xattn_ctx *ctx = (xattn_ctx *)1;
    st = xattn_ctx_create(XATTN_BACKEND_CUDA, 0, &ctx);
    check(st == XATTN_STATUS_BACKEND_UNAVAILABLE && ctx == NULL, "ctx_create(cuda) -> %s",
          xattn_status_name(st));
    ctx = (xattn_ctx *)1;
    st = xattn_cuda_ctx_create_on_stream(0, NULL, &ctx);
    check(st == XATTN_STATUS_BACKEND_UNAVAILABLE && ctx == NULL, "cuda_ctx_create_on_stream -> %s",
          xattn_status_name(st));
    check(xattn_cuda_ctx_stream(NULL) == NULL && xattn_cuda_ctx_device_ordinal(NULL) == -1,
          "interop getters on NULL");
    /* Only a clean unavailable path counts as "skipped" (ctest matches the line). */
    if (report && n_fail == 0)
        printf("skipped: no CUDA device (%s)\n", msg);
    return 0;
}

/* ---- tests ---------------------------------------------------------------- */

static int test_available(void)
{
    if (!have_device(0)) {
        printf("no CUDA device: the unavailable path was checked\n");
        return finish();
    }
    int n = 0;
    CHECK_OK(xattn_device_count(XATTN_BACKEND_CUDA, &n));
    check(n >= 1, "device_count(cuda) = %d", n);
    for (int i = 0; i < n; i++) {
        xattn_device_info info;
        memset(&info, 0, sizeof info);
        CHECK_OK(xattn_device_get_info(XATTN_BACKEND_CUDA, i, &info));
        printf("  [%d] %s\n      %s\n      driver %s, %s\n", i, info.name, info.description,
               info.driver_version, info.platform);
        check(info.name[0] && info.compute_capability >= 75 && info.compute_units > 0 &&
                  info.global_mem_bytes > 0 && info.cache_bytes > 0 && info.local_mem_bytes > 0 &&
                  info.max_work_group_size >= 1024 && info.device_type == XATTN_DEVICE_TYPE_GPU,
              "device %d: sm_%d, %d SMs, %llu MiB, L2 %llu KiB", i, info.compute_capability,
              info.compute_units, (unsigned long long)(info.global_mem_bytes >> 20),
              (unsigned long long)(info.cache_bytes >> 10));
    }
    xattn_ctx *ctx = NULL;
    CHECK_OK(xattn_ctx_create(XATTN_BACKEND_CUDA, 0, &ctx));
    check(xattn_cuda_ctx_stream(ctx) != NULL && xattn_cuda_ctx_device_ordinal(ctx) >= 0,
          "an own context has its own stream and a device ordinal");
    xattn_ctx *bad = (xattn_ctx *)1;
    check(xattn_ctx_create(XATTN_BACKEND_CUDA, n, &bad) == XATTN_STATUS_DEVICE_NOT_FOUND &&
              bad == NULL,
          "device index %d -> DEVICE_NOT_FOUND", n);
    xattn_ctx_destroy(ctx);
    return finish();
}

static int test_interop(void)
{
    if (!have_device(1)) {
        n_skip++;
        return finish();
    }
    const shape s = {
        2, 77, 130, 8, 2, 128, 128, XATTN_DTYPE_F16, XATTN_DTYPE_F16, 1, XATTN_ALGO_FLASH, 0};
    host_case c;
    case_init(&c, &s);
    const size_t bq = c.nq * 2, bk = c.nk * 2, bv = c.nv * 2, bo = c.no * 2, bl = c.nl * 4;

    cudaStream_t stream;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
          "cudaStreamCreateWithFlags");
    void *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dl = NULL;
    int ok = cudaMalloc(&dq, bq) == cudaSuccess && cudaMalloc(&dk, bk) == cudaSuccess &&
             cudaMalloc(&dv, bv) == cudaSuccess && cudaMalloc(&dout, bo) == cudaSuccess &&
             cudaMalloc(&dl, bl) == cudaSuccess;
    check(ok, "cudaMalloc of the caller's tensors");
    if (!ok)
        return finish();
    cudaMemcpy(dq, c.q, bq, cudaMemcpyHostToDevice);
    cudaMemcpy(dk, c.k, bk, cudaMemcpyHostToDevice);
    cudaMemcpy(dv, c.v, bv, cudaMemcpyHostToDevice);

    xattn_ctx *ctx = NULL;
    CHECK_OK(xattn_cuda_ctx_create_on_stream(0, (void *)stream, &ctx));
    if (!ctx)
        return finish();
    check(xattn_cuda_ctx_stream(ctx) == (void *)stream,
          "the context submits to the caller's stream");
    xattn_buffer *wq = NULL, *wk = NULL, *wv = NULL, *wo = NULL, *wl = NULL;
    CHECK_OK(xattn_cuda_buffer_wrap(ctx, dq, bq, &wq));
    CHECK_OK(xattn_cuda_buffer_wrap(ctx, dk, bk, &wk));
    CHECK_OK(xattn_cuda_buffer_wrap(ctx, dv, bv, &wv));
    CHECK_OK(xattn_cuda_buffer_wrap(ctx, dout, bo, &wo));
    CHECK_OK(xattn_cuda_buffer_wrap(ctx, dl, bl, &wl));
    check(xattn_cuda_buffer_device_ptr(wo) == dout && xattn_buffer_size(wo) == bo,
          "a wrapped buffer is the caller's pointer and size");
    xattn_mem_stats ms;
    CHECK_OK(xattn_ctx_mem_stats(ctx, &ms));
    check(ms.current_bytes < bq, "wrapped memory is not counted (%llu bytes held)",
          (unsigned long long)ms.current_bytes);

    /* The caller's work and ours on one stream, in order: poison O on the
     * stream, attention without info (asynchronous), read O on the stream. */
    xattn_attn_desc d;
    desc_fill(&d, &s, wq, wk, wv, wo, wl);
    void *o = malloc(bo), *ro = malloc(bo);
    float *l = malloc(bl), *rl = malloc(bl);
    check(cudaMemsetAsync(dout, 0xff, bo, stream) == cudaSuccess, "caller's memset on the stream");
    CHECK_OK(xattn_attention(ctx, &d, NULL));
    check(cudaMemcpyAsync(o, dout, bo, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
              cudaMemcpyAsync(l, dl, bl, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
              cudaStreamSynchronize(stream) == cudaSuccess,
          "caller's copies on the stream");
    xattn_run_info rinfo;
    CHECK_OK(run_on(cpu_ctx, &c, ro, rl, &rinfo));
    double e = rel_l2(o, ro, s.dq, c.no), le = lse_err(l, rl, c.nl);
    check(e <= tol(s.dq) && le <= 1e-4, "interop result vs cpu: rel L2 %.2e, LSE %.2e", e, le);

    /* Timed: info forces a synchronous call with event times. */
    xattn_run_info info;
    CHECK_OK(xattn_attention(ctx, &d, &info));
    check(info.device_ms > 0.0 && info.num_phases == 1 && !strcmp(info.phase_names[0], "flash"),
          "run info: %.3f ms, %d phase(s) '%s'", info.device_ms, info.num_phases,
          info.phase_names[0]);

    /* Wrap errors. */
    xattn_buffer *w = (xattn_buffer *)1;
    void *host = malloc(64);
    check(xattn_cuda_buffer_wrap(ctx, host, 64, &w) == XATTN_STATUS_INVALID_ARGUMENT && w == NULL,
          "wrapping a host pointer -> INVALID_ARGUMENT: %s", xattn_last_error());
    check(xattn_cuda_buffer_wrap(ctx, NULL, 64, &w) == XATTN_STATUS_INVALID_ARGUMENT,
          "wrapping NULL -> INVALID_ARGUMENT");
    check(xattn_cuda_buffer_wrap(ctx, dq, 0, &w) == XATTN_STATUS_INVALID_ARGUMENT,
          "wrapping 0 bytes -> INVALID_ARGUMENT");
    check(xattn_buffer_wrap_host(ctx, host, 64, &w) == XATTN_STATUS_UNSUPPORTED,
          "xattn_buffer_wrap_host on CUDA -> UNSUPPORTED: %s", xattn_last_error());
    check(xattn_cuda_buffer_wrap(cpu_ctx, dq, bq, &w) == XATTN_STATUS_INVALID_ARGUMENT,
          "wrapping on a CPU context -> INVALID_ARGUMENT");
    check(xattn_cuda_ctx_stream(cpu_ctx) == NULL, "a CPU context has no CUDA stream");
    free(host);

    /* The caller's memory and stream outlive the wrappers and the context. */
    xattn_buffer_free(wq);
    xattn_buffer_free(wk);
    xattn_buffer_free(wv);
    xattn_buffer_free(wo);
    xattn_buffer_free(wl);
    xattn_ctx_destroy(ctx);
    check(cudaStreamQuery(stream) == cudaSuccess, "the caller's stream is alive and idle");
    check(cudaMemcpy(o, dout, bo, cudaMemcpyDeviceToHost) == cudaSuccess,
          "the caller's memory is still allocated");
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
    cudaFree(dl);
    cudaStreamDestroy(stream);
    free(o);
    free(ro);
    free(l);
    free(rl);
    case_free(&c);
    return finish();
}

static int test_launch_fail(void)
{
    if (!have_device(1)) {
        n_skip++;
        return finish();
    }
    xattn_ctx *ctx = NULL;
    CHECK_OK(xattn_ctx_create(XATTN_BACKEND_CUDA, 0, &ctx));
    if (!ctx)
        return finish();
    const shape s = {1, 33, 70, 4, 4, 64, 64, XATTN_DTYPE_F32, XATTN_DTYPE_F32, 0, XATTN_ALGO_FLASH,
                     0};
    host_case c;
    case_init(&c, &s);
    void *o = malloc(c.no * 4);
    float *l = malloc(c.nl * 4);
    xattn_run_info info;
    xattn__cuda_test_fail_next_launch();
    xattn_status st = run_on(ctx, &c, o, l, &info);
    const char *text = cudaGetErrorString(cudaErrorInvalidConfiguration);
    check(st == XATTN_STATUS_BACKEND && strstr(xattn_last_error(), text) != NULL,
          "a failing launch -> %s: \"%s\" (CUDA's text: \"%s\")", xattn_status_name(st),
          xattn_last_error(), text);
    compare_with_cpu(ctx, &c, "the context is usable after a failed launch");

    /* NAIVE over the memory limit: OUT_OF_MEMORY, and the context goes on. */
    shape sn = s;
    sn.algo = XATTN_ALGO_NAIVE;
    host_case cn;
    case_init(&cn, &sn);
    xattn_mem_stats ms;
    CHECK_OK(xattn_ctx_mem_stats(ctx, &ms));
    CHECK_OK(xattn_ctx_set_option(
        ctx, XATTN_OPT_MEMORY_LIMIT,
        (int64_t)(ms.current_bytes + 4 * (cn.nq + cn.nk + cn.nv + cn.no + cn.nl) + 4096)));
    st = run_on(ctx, &cn, o, l, &info);
    check(st == XATTN_STATUS_OUT_OF_MEMORY, "NAIVE scores over the memory limit -> %s: %s",
          xattn_status_name(st), xattn_last_error());
    CHECK_OK(xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0));
    compare_with_cpu(ctx, &cn, "NAIVE after lifting the limit");
    CHECK_OK(xattn_ctx_mem_stats(ctx, &ms));
    check(ms.peak_bytes > 0, "peak bytes %llu", (unsigned long long)ms.peak_bytes);
    case_free(&cn);
    free(o);
    free(l);
    case_free(&c);
    xattn_ctx_destroy(ctx);
    return finish();
}

/* A CUDA context with the profiler on, on the SIMT path only when simt (the
 * backend reads XATTN_CUDA_FORCE_SIMT when a context is created; the caller
 * unsets it when done); NULL after a failed check. */
static xattn_ctx *cuda_ctx_profiled(int simt)
{
    setenv("XATTN_CUDA_FORCE_SIMT", simt ? "1" : "0", 1);
    xattn_ctx *ctx = NULL;
    CHECK_OK(xattn_ctx_create(XATTN_BACKEND_CUDA, 0, &ctx));
    if (ctx)
        CHECK_OK(xattn_profiler_enable(ctx, 1));
    return ctx;
}

static int test_algos(void)
{
    if (!have_device(1)) {
        n_skip++;
        return finish();
    }
    static const struct {
        xattn_dtype dq, dkv;
        int64_t D, Dv;
    } kinds[] = {
        {XATTN_DTYPE_F32, XATTN_DTYPE_F32, 64, 64},
        {XATTN_DTYPE_F16, XATTN_DTYPE_F16, 128, 128},
        {XATTN_DTYPE_BF16, XATTN_DTYPE_BF16, 80, 80},
        {XATTN_DTYPE_F16, XATTN_DTYPE_F16, 96, 96},
        {XATTN_DTYPE_BF16, XATTN_DTYPE_BF16, 256, 256},
        {XATTN_DTYPE_F16, XATTN_DTYPE_F16, 40, 24},
        {XATTN_DTYPE_F16, XATTN_DTYPE_BF16, 64, 64},
        {XATTN_DTYPE_F32, XATTN_DTYPE_F16, 3, 5},
    };
    static const xattn_algo algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    for (int simt = 0; simt < 2; simt++) {
        xattn_ctx *ctx = cuda_ctx_profiled(simt);
        if (!ctx)
            break;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
                for (int causal = 0; causal < 2; causal++) {
                    shape s = {
                        2,           causal ? 45 : 1, 300,          8,      2,        kinds[k].D,
                        kinds[k].Dv, kinds[k].dq,     kinds[k].dkv, causal, algos[a], 0};
                    host_case c;
                    case_init(&c, &s);
                    char label[160];
                    snprintf(label, sizeof label, "%s q=%s kv=%s D=%lld Dv=%lld %s Sq=%lld%s",
                             simt ? "simt" : "auto-path", xattn_dtype_name(s.dq),
                             xattn_dtype_name(s.dkv), (long long)s.D, (long long)s.Dv,
                             xattn_algo_name(s.algo), (long long)s.Sq, causal ? " causal" : "");
                    compare_with_cpu(ctx, &c, label);
                    check_record(ctx, &s, simt, label);
                    case_free(&c);
                }
        xattn_ctx_destroy(ctx);
    }
    unsetenv("XATTN_CUDA_FORCE_SIMT");
    return finish();
}

/* ---- paged KV cache ---------------------------------------------------------- */

/* Runs c on ctx with K/V from the host arrays k and v, [n0, n1, Hkv, D / Dv]
 * BSHD: contiguous (table NULL, n0 = B, n1 = Sk) or page pools (n0 pages of n1
 * tokens, table [B, maxp]); lens: the sequences' key counts. */
static xattn_status run_kv(xattn_ctx *ctx, const host_case *c, const void *k, const void *v,
                           int64_t n0, int64_t n1, const int32_t *lens, const int32_t *table,
                           int64_t maxp, void *o, float *lse)
{
    const shape *s = &c->s;
    const size_t nk = (size_t)(n0 * n1 * s->Hkv * s->D), nv = (size_t)(n0 * n1 * s->Hkv * s->Dv);
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, c->nq * dsize(s->dq), &bq);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, nk * dsize(s->dkv), &bk);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, nv * dsize(s->dkv), &bv);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->no * dsize(s->dq), &bo);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, c->nl * 4, &bl);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bq, 0, c->q, c->nq * dsize(s->dq));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bk, 0, k, nk * dsize(s->dkv));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bv, 0, v, nv * dsize(s->dkv));
    if (st == XATTN_STATUS_OK) {
        xattn_attn_desc d;
        desc_fill(&d, s, bq, bk, bv, bo, bl);
        d.k = xattn_tensor_bshd(bk, 0, s->dkv, n0, n1, s->Hkv, s->D);
        d.v = xattn_tensor_bshd(bv, 0, s->dkv, n0, n1, s->Hkv, s->Dv);
        d.seqlens_k = lens;
        d.block_table = table;
        d.max_pages_per_seq = table ? maxp : 0;
        xattn_buffer *bks = NULL, *bvs = NULL;
        st = scales_attach(ctx, c, &d, &bks, &bvs);
        if (st == XATTN_STATUS_OK)
            st = xattn_attention(ctx, &d, NULL);
        xattn_buffer_free(bks);
        xattn_buffer_free(bvs);
    }
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(bo, 0, o, c->no * dsize(s->dq));
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(bl, 0, lse, c->nl * 4);
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);
    return st;
}

/* table [B, maxp] for pages of ps tokens: each sequence's pages from a
 * shuffled pool of npages, the entries past them naming the last (spare)
 * page; kp / vp: the pools, c's keys moved in, NaN in every other slot. */
static void paginate(const host_case *c, const int32_t *lens, int64_t ps, int64_t maxp,
                     int64_t npages, int32_t *table, void *kp, void *vp)
{
    const shape *s = &c->s;
    const size_t es = dsize(s->dkv);
    int32_t *perm = malloc((size_t)npages * sizeof *perm);
    for (int64_t i = 0; i < npages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = npages - 2; i > 0; i--) { /* the spare page stays last */
        const int64_t j = (int64_t)((rnd() + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1);
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < (size_t)(npages * ps * s->Hkv * s->D); i++)
        put(kp, s->dkv, i, NAN);
    for (size_t i = 0; i < (size_t)(npages * ps * s->Hkv * s->Dv); i++)
        put(vp, s->dkv, i, NAN);
    int64_t n = 0;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t g = 0; g < maxp; g++)
            table[b * maxp + g] = g * ps < lens[b] ? perm[n++] : (int32_t)(npages - 1);
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t j = 0; j < lens[b]; j++) {
            const int64_t pg = table[b * maxp + j / ps], slot = j % ps;
            for (int64_t h = 0; h < s->Hkv; h++) {
                const int64_t src = (b * s->Sk + j) * s->Hkv + h,
                              dst = (pg * ps + slot) * s->Hkv + h;
                memcpy((char *)kp + (size_t)(dst * s->D) * es,
                       (const char *)c->k + (size_t)(src * s->D) * es, (size_t)s->D * es);
                memcpy((char *)vp + (size_t)(dst * s->Dv) * es,
                       (const char *)c->v + (size_t)(src * s->Dv) * es, (size_t)s->Dv * es);
            }
        }
    free(perm);
}

static int test_paged(void)
{
    if (!have_device(1)) {
        n_skip++;
        return finish();
    }
    static const struct {
        xattn_dtype dt;
        int64_t D;
    } kinds[] = {{XATTN_DTYPE_F16, 128}, {XATTN_DTYPE_BF16, 256}, {XATTN_DTYPE_F32, 64}};
    static const xattn_algo algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    static const int64_t page_sizes[] = {3, 16, 64};
    const int32_t lens[3] = {300, 0, 137};
    for (int simt = 0; simt < 2; simt++) {
        setenv("XATTN_CUDA_FORCE_SIMT", simt ? "1" : "0", 1);
        xattn_ctx *ctx = NULL;
        CHECK_OK(xattn_ctx_create(XATTN_BACKEND_CUDA, 0, &ctx));
        if (!ctx)
            break;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
                for (int causal = 0; causal < 2; causal++) {
                    const xattn_dtype dt = kinds[k].dt;
                    shape s = {3,  causal ? 5 : 1, 300,      8, 2, kinds[k].D, kinds[k].D, dt,
                               dt, causal,         algos[a], 0};
                    host_case c;
                    case_init(&c, &s);
                    void *o = malloc(c.no * dsize(dt)), *ro = malloc(c.no * dsize(dt));
                    float *l = malloc(c.nl * 4), *rl = malloc(c.nl * 4);
                    xattn_status rst = run_kv(ctx, &c, c.k, c.v, s.B, s.Sk, lens, NULL, 0, ro, rl);
                    check(rst == XATTN_STATUS_OK, "contiguous %s %s: %s", xattn_dtype_name(dt),
                          xattn_algo_name(s.algo), xattn_last_error());
                    for (size_t pi = 0; rst == XATTN_STATUS_OK && pi < 3; pi++) {
                        const int64_t ps = page_sizes[pi], maxp = (s.Sk + ps - 1) / ps + 1;
                        int64_t npages = 1;
                        for (int64_t b = 0; b < s.B; b++)
                            npages += (lens[b] + ps - 1) / ps;
                        int32_t *table = malloc((size_t)(s.B * maxp) * sizeof *table);
                        void *kp = malloc((size_t)(npages * ps * s.Hkv * s.D) * dsize(dt));
                        void *vp = malloc((size_t)(npages * ps * s.Hkv * s.Dv) * dsize(dt));
                        for (int again = 0; again < 2; again++) {
                            paginate(&c, lens, ps, maxp, npages, table, kp, vp);
                            xattn_status st =
                                run_kv(ctx, &c, kp, vp, npages, ps, lens, table, maxp, o, l);
                            const double e =
                                st == XATTN_STATUS_OK ? rel_l2(o, ro, dt, c.no) : INFINITY;
                            const double le =
                                st == XATTN_STATUS_OK ? lse_err(l, rl, c.nl) : INFINITY;
                            check(e <= tol(dt) && le <= 1e-4,
                                  "%s %s %s Sq=%lld page %lld table %d: %s, rel L2 vs "
                                  "contiguous %.2e, LSE %.2e",
                                  simt ? "simt" : "auto-path", xattn_dtype_name(dt),
                                  xattn_algo_name(s.algo), (long long)s.Sq, (long long)ps,
                                  again + 1, xattn_status_name(st), e, le);
                        }
                        free(table);
                        free(kp);
                        free(vp);
                    }
                    free(o);
                    free(ro);
                    free(l);
                    free(rl);
                    case_free(&c);
                }
        xattn_ctx_destroy(ctx);
    }
    unsetenv("XATTN_CUDA_FORCE_SIMT");
    return finish();
}

/* ---- fp8 K/V caches ------------------------------------------------------------ */

/* fp8 K/V (E4M3, E5M2) with and without per-head scales against the CPU
 * backend on the same bytes, every algorithm, mma (f16 / bf16 q) and simt
 * (forced, and f32 q), prefill and decode with splits, GQA, D != Dv, D 256;
 * then the same keys in shuffled pages of 16 against contiguous on the
 * device. */
static int test_fp8(void)
{
    if (!have_device(1)) {
        n_skip++;
        return finish();
    }
    static const struct {
        xattn_dtype dq, dkv;
        int64_t D, Dv;
        int kvscale;
    } kinds[] = {
        {XATTN_DTYPE_F16, XATTN_DTYPE_FP8_E4M3, 128, 128, 1},
        {XATTN_DTYPE_BF16, XATTN_DTYPE_FP8_E5M2, 64, 64, 1},
        {XATTN_DTYPE_F16, XATTN_DTYPE_FP8_E5M2, 256, 256, 0},
        {XATTN_DTYPE_BF16, XATTN_DTYPE_FP8_E4M3, 96, 80, 1},
        {XATTN_DTYPE_F32, XATTN_DTYPE_FP8_E4M3, 80, 48, 1},
    };
    static const xattn_algo algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    const int32_t lens[2] = {300, 137};
    for (int simt = 0; simt < 2; simt++) {
        xattn_ctx *ctx = cuda_ctx_profiled(simt);
        if (!ctx)
            break;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
                for (int causal = 0; causal < 2; causal++) {
                    shape s = {2,
                               causal ? 45 : 1,
                               300,
                               8,
                               2,
                               kinds[k].D,
                               kinds[k].Dv,
                               kinds[k].dq,
                               kinds[k].dkv,
                               causal,
                               algos[a],
                               kinds[k].kvscale};
                    host_case c;
                    case_init(&c, &s);
                    char label[160];
                    snprintf(label, sizeof label, "fp8 %s q=%s kv=%s%s D=%lld Dv=%lld %s Sq=%lld%s",
                             simt ? "simt" : "auto-path", xattn_dtype_name(s.dq),
                             xattn_dtype_name(s.dkv), s.kvscale ? " scaled" : "", (long long)s.D,
                             (long long)s.Dv, xattn_algo_name(s.algo), (long long)s.Sq,
                             causal ? " causal" : "");
                    compare_with_cpu(ctx, &c, label);
                    check_record(ctx, &s, simt, label);
                    /* Pages of 16 against contiguous, both on the device. */
                    const int64_t ps = 16, maxp = s.Sk / ps + 2;
                    const int64_t npages = (lens[0] + ps - 1) / ps + (lens[1] + ps - 1) / ps + 1;
                    void *o = malloc(c.no * dsize(s.dq)), *ro = malloc(c.no * dsize(s.dq));
                    float *l = malloc(c.nl * 4), *rl = malloc(c.nl * 4);
                    int32_t *table = malloc((size_t)(s.B * maxp) * sizeof *table);
                    void *kp = malloc((size_t)(npages * ps * s.Hkv * s.D));
                    void *vp = malloc((size_t)(npages * ps * s.Hkv * s.Dv));
                    xattn_status st = run_kv(ctx, &c, c.k, c.v, s.B, s.Sk, lens, NULL, 0, ro, rl);
                    if (st == XATTN_STATUS_OK) {
                        paginate(&c, lens, ps, maxp, npages, table, kp, vp);
                        st = run_kv(ctx, &c, kp, vp, npages, ps, lens, table, maxp, o, l);
                    }
                    const double e = st == XATTN_STATUS_OK ? rel_l2(o, ro, s.dq, c.no) : INFINITY;
                    const double le = st == XATTN_STATUS_OK ? lse_err(l, rl, c.nl) : INFINITY;
                    check(e <= tol(s.dq) && le <= 1e-4,
                          "%s, paged 16 vs contiguous: %s, rel L2 %.2e, LSE %.2e", label,
                          xattn_status_name(st), e, le);
                    free(o);
                    free(ro);
                    free(l);
                    free(rl);
                    free(table);
                    free(kp);
                    free(vp);
                    case_free(&c);
                }
        xattn_ctx_destroy(ctx);
    }
    unsetenv("XATTN_CUDA_FORCE_SIMT");
    return finish();
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s available|interop|launch_fail|algos|paged|fp8\n", argv[0]);
        return 2;
    }
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu_ctx) != XATTN_STATUS_OK) {
        printf("FAIL: no CPU context: %s\n0 passed, 1 failed, 0 skipped\n", xattn_last_error());
        return 1;
    }
    int rc;
    if (!strcmp(argv[1], "available"))
        rc = test_available();
    else if (!strcmp(argv[1], "interop"))
        rc = test_interop();
    else if (!strcmp(argv[1], "launch_fail"))
        rc = test_launch_fail();
    else if (!strcmp(argv[1], "algos"))
        rc = test_algos();
    else if (!strcmp(argv[1], "paged"))
        rc = test_paged();
    else if (!strcmp(argv[1], "fp8"))
        rc = test_fp8();
    else {
        fprintf(stderr, "unknown test '%s'\n", argv[1]);
        rc = 2;
    }
    xattn_ctx_destroy(cpu_ctx);
    return rc;
}
