/*
 * The CUDA backend's host module: device discovery through the CUDA runtime
 * (linked statically, so that a machine without a driver gets "unavailable"
 * with the driver's message instead of a loader error), one stream per context
 * (its own, or the caller's through xattn_cuda.h), device buffers, workspaces
 * through the tracking allocator, and the three algorithms timed with CUDA
 * events phase by phase. The kernels live in kernels_cuda/ and are reached
 * through the C entry points of xattn_cuda_kernels.h.
 *
 * One file of over 800 lines, not split by concern as the OpenCL host is:
 * nothing this project tests on can run it (CI has no GPU), so a split would
 * be checked by the compiler alone. Split it (device and context, buffers and
 * interop, the driver's operations, ceilings) when a GPU run can check it.
 *
 * Every CUDA failure comes back as XATTN_STATUS_BACKEND (OUT_OF_MEMORY for a
 * failed allocation) with "<CUDA call> failed: <CUDA's text> (<code>)". Calls
 * that change the calling thread's current device restore it before returning.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "xattn_cuda.h"
#include "xattn_cuda_kernels.h"
#include "xattn_cuda_tune.h"
#include "xattn_internal.h"

#define XATTN__CUDA_MAX_DEVICES 64
#define XATTN__CUDA_MIN_CC 75 /* the oldest architecture the kernels are built for */
#define XATTN__CUDA_EVENTS 5

/* Usable devices (compute capability >= 7.5), as CUDA ordinals; set by probe. */
static int xattn__cuda_ndev;
static int xattn__cuda_ordinal[XATTN__CUDA_MAX_DEVICES];

/* Tests: the next attention call launches its first kernel with an invalid
 * configuration, to exercise the launch-error path on a real GPU. */
static atomic_int xattn__cuda_fail_next;

typedef struct xattn_cuda_ctx {
    int ordinal;                        /* CUDA device */
    cudaStream_t stream;                /* where everything is submitted */
    int own_stream;                     /* 0: the caller's (interop) */
    cudaEvent_t ev[XATTN__CUDA_EVENTS]; /* phase boundaries */
    int cc, sm_count;
    size_t smem_optin;
    int pools;      /* cudaMallocAsync usable */
    int force_simt; /* XATTN_CUDA_FORCE_SIMT set */
    int mma_narrow; /* XATTN_CUDA_MMA_SHAPE: 1 narrow (64 rows), 0 wide (128), -1 by head dim */
    /* XATTN_CUDA_CONFIG and the stored winners of `xattn tune` (a pointer:
     * plan's c is const, and it reads the winners on first use). */
    xattn__cuda_tune *tune;
    int ready; /* fully initialized */
    /* Per-call arrays (len_q, len_k, start_q, start_k, alibi, a paged cache's
     * block table): a pinned host staging copy and a device copy, both grown
     * on demand and accounted. The
     * staging copy holds what was last uploaded (meta_bytes, 0 = nothing
     * valid): a call with the same arrays uploads nothing, and meta_ev (set
     * when meta_pending) marks the end of the last upload, before which the
     * staging copy must not change. */
    void *meta_host;
    uint64_t meta_host_cap;
    void *meta_dev;
    uint64_t meta_dev_cap;
    uint64_t meta_bytes;
    cudaEvent_t meta_ev;
    int meta_pending;
    /* Executed-work counters: device slots (3 counts a block) grown on demand
     * and accounted, the 3 sums in pinned host memory, cnt_ev after their copy. */
    unsigned long long *cnt_dev;
    uint64_t cnt_cap; /* slots */
    unsigned long long *cnt_host;
    cudaEvent_t cnt_ev;
    /* Device memory for the records: the total, and the free memory sampled
     * at most every XATTN__CUDA_MEMINFO_S seconds (cudaMemGetInfo is a driver
     * round trip, too slow for every call). */
    uint64_t mem_total, mem_free;
    double mem_free_t; /* xattn__now() of the sample; < 0: none yet */
    /* The call in progress (prepare .. finish; a context serves one call at a
     * time): its kernel arguments, the events recorded so far, whether its
     * kernels count their work, and the device current before it. */
    xattn_cuda_args call;
    const char *path;
    int nev, counting, prev_device;
    long long slots;
} xattn_cuda_ctx;

#define XATTN__CUDA_MEMINFO_S 0.25
#define XATTN__CUDA_CNT_HOST_BYTES 64 /* pinned: the 3 sums, rounded up */

static xattn_status xattn__cuda_fail(xattn_status st, const char *call, cudaError_t e)
{
    (void)cudaGetLastError(); /* clear a non-sticky error: it is reported here */
    return xattn__error(st, "%s failed: %s (%d)", call, cudaGetErrorString(e), (int)e);
}

#define XATTN__CUDA_CALL(call, name)                                                               \
    do {                                                                                           \
        cudaError_t xattn__e = (call);                                                             \
        if (xattn__e != cudaSuccess)                                                               \
            return xattn__cuda_fail(XATTN_STATUS_BACKEND, name, xattn__e);                         \
    } while (0)

/* Makes `ordinal` the thread's current device; *prev receives the old one. */
static xattn_status xattn__cuda_dev_enter(int ordinal, int *prev)
{
    *prev = -1;
    XATTN__CUDA_CALL(cudaGetDevice(prev), "cudaGetDevice");
    if (*prev != ordinal)
        XATTN__CUDA_CALL(cudaSetDevice(ordinal), "cudaSetDevice");
    return XATTN_STATUS_OK;
}

static void xattn__cuda_dev_leave(int ordinal, int prev)
{
    if (prev >= 0 && prev != ordinal)
        (void)cudaSetDevice(prev);
}

/* ---- probe and devices ---------------------------------------------------- */

static xattn_status xattn__cuda_probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE, "cudaGetDeviceCount failed: %s (%d)",
                            cudaGetErrorString(e), (int)e);
    }
    xattn__cuda_ndev = 0;
    int older = 0;
    for (int d = 0; d < n && xattn__cuda_ndev < XATTN__CUDA_MAX_DEVICES; d++) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        if (major * 10 + minor >= XATTN__CUDA_MIN_CC)
            xattn__cuda_ordinal[xattn__cuda_ndev++] = d;
        else
            older++;
    }
    if (xattn__cuda_ndev == 0) {
        if (n == 0)
            return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE, "no CUDA device");
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE,
                            "%d CUDA device%s, none with compute capability 7.5 or newer "
                            "(the kernels are built for sm_75..sm_90)",
                            n, n == 1 ? "" : "s");
    }
    if (older)
        xattn__log(XATTN_LOG_INFO, "cuda: %d device%s older than compute capability 7.5 ignored",
                   older, older == 1 ? "" : "s");
    return XATTN_STATUS_OK;
}

static int xattn__cuda_device_count(void)
{
    return xattn__cuda_ndev;
}

static int xattn__cuda_attr(enum cudaDeviceAttr attr, int dev)
{
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        v = 0;
    }
    return v;
}

static xattn_status xattn__cuda_device_info(int index, xattn_device_info *info)
{
    const int dev = xattn__cuda_ordinal[index];
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cudaError_t e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaGetDeviceProperties", e);
    /* CUDA 13 removed the clock and L2 fields from cudaDeviceProp. */
    const int clock_khz = xattn__cuda_attr(cudaDevAttrClockRate, dev);
    const int mem_khz = xattn__cuda_attr(cudaDevAttrMemoryClockRate, dev);
    const int bus_bits = xattn__cuda_attr(cudaDevAttrGlobalMemoryBusWidth, dev);
    const int l2 = xattn__cuda_attr(cudaDevAttrL2CacheSize, dev);
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess || cudaRuntimeGetVersion(&rt) != cudaSuccess)
        (void)cudaGetLastError();

    info->backend = XATTN_BACKEND_CUDA;
    info->index = index;
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    snprintf(info->driver_version, sizeof info->driver_version, "%d.%d", drv / 1000,
             (drv % 1000) / 10);
    snprintf(info->platform, sizeof info->platform, "CUDA runtime %d.%d", rt / 1000,
             (rt % 1000) / 10);
    snprintf(info->description, sizeof info->description,
             "%s, sm_%d%d, %d SMs at %d MHz, %.1f GiB at %d MHz x %d bit, L2 %d KiB, "
             "%zu KiB shared/block, CUDA device %d",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, clock_khz / 1000,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), mem_khz / 1000, bus_bits,
             l2 / 1024, prop.sharedMemPerBlockOptin / 1024, dev);
    info->compute_units = prop.multiProcessorCount;
    info->global_mem_bytes = (uint64_t)prop.totalGlobalMem;
    info->local_mem_bytes = (uint64_t)(prop.sharedMemPerBlockOptin ? prop.sharedMemPerBlockOptin
                                                                   : prop.sharedMemPerBlock);
    info->cache_bytes = (uint64_t)(l2 > 0 ? l2 : 0);
    info->max_work_group_size = (size_t)prop.maxThreadsPerBlock;
    info->fp16_supported = 1; /* every sm_75+ device has native half arithmetic */
    info->fp64_supported = 1;
    info->compute_capability = prop.major * 10 + prop.minor;
    info->device_type = XATTN_DEVICE_TYPE_GPU;
    return XATTN_STATUS_OK;
}

/* ---- contexts ------------------------------------------------------------- */

/* Pinned host memory, accounted; NULL with the error set on failure. */
static void *xattn__cuda_pinned_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what,
                                      xattn_status *st)
{
    *st = xattn__mem_acquire(ctx, bytes, what);
    if (*st != XATTN_STATUS_OK)
        return NULL;
    void *ptr = NULL;
    cudaError_t e = cudaMallocHost(&ptr, (size_t)bytes);
    if (e != cudaSuccess) {
        xattn__mem_release(ctx, bytes);
        *st = xattn__cuda_fail(e == cudaErrorMemoryAllocation ? XATTN_STATUS_OUT_OF_MEMORY
                                                              : XATTN_STATUS_BACKEND,
                               "cudaMallocHost", e);
        return NULL;
    }
    return ptr;
}

static void xattn__cuda_pinned_free(struct xattn_ctx *ctx, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    if (cudaFreeHost(ptr) != cudaSuccess)
        (void)cudaGetLastError();
    xattn__mem_release(ctx, bytes);
}

static void xattn__cuda_state_free(struct xattn_ctx *ctx, xattn_cuda_ctx *c)
{
    if (c->ready) /* the caller's stream is synchronized too, not destroyed */
        (void)cudaStreamSynchronize(c->stream);
    if (c->meta_dev) {
        (void)cudaFree(c->meta_dev);
        xattn__mem_release(ctx, c->meta_dev_cap);
    }
    xattn__cuda_pinned_free(ctx, c->meta_host, c->meta_host_cap);
    if (c->cnt_dev) {
        (void)cudaFree(c->cnt_dev);
        xattn__mem_release(ctx, c->cnt_cap * 3u * sizeof *c->cnt_dev);
    }
    if (c->cnt_host)
        xattn__cuda_pinned_free(ctx, c->cnt_host, XATTN__CUDA_CNT_HOST_BYTES);
    for (int i = 0; i < XATTN__CUDA_EVENTS; i++)
        if (c->ev[i])
            (void)cudaEventDestroy(c->ev[i]);
    if (c->meta_ev)
        (void)cudaEventDestroy(c->meta_ev);
    if (c->cnt_ev)
        (void)cudaEventDestroy(c->cnt_ev);
    if (c->own_stream && c->stream)
        (void)cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    if (c->tune) {
        xattn__cuda_tune_free(c->tune);
        free(c->tune);
    }
    xattn__host_free(ctx, c, sizeof *c);
}

/* The backend state of ctx on its device: the caller's stream when
 * `own_stream` is 0, else a new non-blocking stream. */
static xattn_status xattn__cuda_state_init(struct xattn_ctx *ctx, cudaStream_t stream,
                                           int own_stream)
{
    xattn_status st;
    xattn_cuda_ctx *c = xattn__host_alloc(ctx, sizeof *c, "CUDA context state", &st);
    if (!c)
        return st;
    memset(c, 0, sizeof *c);
    c->ordinal = xattn__cuda_ordinal[ctx->device];
    c->stream = stream;
    int prev;
    st = xattn__cuda_dev_enter(c->ordinal, &prev);
    if (st != XATTN_STATUS_OK) {
        xattn__host_free(ctx, c, sizeof *c);
        return st;
    }
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, c->ordinal);
    const char *call = "cudaGetDeviceProperties";
    if (e == cudaSuccess) {
        c->cc = prop.major * 10 + prop.minor;
        c->sm_count = prop.multiProcessorCount;
        c->mem_total = (uint64_t)prop.totalGlobalMem;
        c->mem_free_t = -1.0;
        c->smem_optin =
            prop.sharedMemPerBlockOptin ? prop.sharedMemPerBlockOptin : prop.sharedMemPerBlock;
        c->pools = xattn__cuda_attr(cudaDevAttrMemoryPoolsSupported, c->ordinal);
        if (own_stream) {
            call = "cudaStreamCreateWithFlags";
            e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
            if (e == cudaSuccess)
                c->own_stream = 1;
        }
    }
    for (int i = 0; i < XATTN__CUDA_EVENTS && e == cudaSuccess; i++) {
        call = "cudaEventCreate";
        e = cudaEventCreate(&c->ev[i]);
    }
    /* Untimed events: only waited on. */
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&c->meta_ev, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&c->cnt_ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        st = xattn__cuda_fail(XATTN_STATUS_BACKEND, call, e);
        const int ordinal = c->ordinal;
        xattn__cuda_state_free(ctx, c);
        xattn__cuda_dev_leave(ordinal, prev);
        return st;
    }
    const char *env = getenv("XATTN_CUDA_FORCE_SIMT");
    c->force_simt = env && *env && strcmp(env, "0") != 0;
    /* The mma flash kernel's tile shape: "wide", "narrow", or unset: chosen by
     * head dim (xattn_cuda_flash_plan). */
    env = getenv("XATTN_CUDA_MMA_SHAPE");
    c->mma_narrow = !env || !*env ? -1 : strcmp(env, "narrow") == 0;
    if (env && *env && strcmp(env, "narrow") != 0 && strcmp(env, "wide") != 0) {
        const int ordinal = c->ordinal;
        xattn__cuda_state_free(ctx, c);
        xattn__cuda_dev_leave(ordinal, prev);
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "XATTN_CUDA_MMA_SHAPE=%s: expected wide or narrow", env);
    }
    int drv = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        (void)cudaGetLastError();
    c->tune = calloc(1, sizeof *c->tune);
    st = c->tune ? xattn__cuda_tune_init(c->tune, ctx, prop.name, c->cc, drv)
                 : xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "CUDA context: out of host memory");
    if (st != XATTN_STATUS_OK) {
        const int ordinal = c->ordinal;
        xattn__cuda_state_free(ctx, c);
        xattn__cuda_dev_leave(ordinal, prev);
        return st;
    }
    c->ready = 1;
    xattn__cuda_dev_leave(c->ordinal, prev);
    ctx->bctx = c;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_ctx_create(struct xattn_ctx *ctx)
{
    return xattn__cuda_state_init(ctx, NULL, 1);
}

static void xattn__cuda_ctx_destroy(struct xattn_ctx *ctx)
{
    xattn_cuda_ctx *c = ctx->bctx;
    if (!c)
        return;
    int prev;
    const int ordinal = c->ordinal;
    if (xattn__cuda_dev_enter(ordinal, &prev) != XATTN_STATUS_OK)
        xattn__clear_error(); /* destroy goes on: free what can be freed */
    xattn__cuda_state_free(ctx, c);
    xattn__cuda_dev_leave(ordinal, prev);
    ctx->bctx = NULL;
}

static xattn_status xattn__cuda_sync(struct xattn_ctx *ctx)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    /* The legacy default stream (interop with NULL) is the current device's. */
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    cudaError_t e = cudaStreamSynchronize(c->stream);
    xattn__cuda_dev_leave(c->ordinal, prev);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaStreamSynchronize", e);
    return XATTN_STATUS_OK;
}

/* ---- buffers -------------------------------------------------------------- */

static xattn_status xattn__cuda_buffer_alloc(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                             size_t bytes)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    void *ptr = NULL;
    cudaError_t e = cudaMalloc(&ptr, bytes ? bytes : 1);
    xattn__cuda_dev_leave(c->ordinal, prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return xattn__error(
            e == cudaErrorMemoryAllocation ? XATTN_STATUS_OUT_OF_MEMORY : XATTN_STATUS_BACKEND,
            "cudaMalloc of %zu bytes failed: %s (%d)", bytes, cudaGetErrorString(e), (int)e);
    }
    buf->native = ptr;
    buf->host = NULL;
    return XATTN_STATUS_OK;
}

static void xattn__cuda_buffer_release(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    xattn_cuda_ctx *c = ctx->bctx;
    if (!buf->owned || !buf->native)
        return; /* wrapped caller memory stays the caller's */
    int prev;
    if (xattn__cuda_dev_enter(c->ordinal, &prev) != XATTN_STATUS_OK)
        xattn__clear_error();
    /* cudaFree waits for the work in flight on the device. */
    if (cudaFree(buf->native) != cudaSuccess)
        (void)cudaGetLastError();
    xattn__cuda_dev_leave(c->ordinal, prev);
    buf->native = NULL;
}

static xattn_status xattn__cuda_copy(struct xattn_ctx *ctx, void *dst, const void *src,
                                     size_t bytes, enum cudaMemcpyKind kind)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    /* On the context's stream, so that the copy is ordered with its kernels. */
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, c->stream);
    const char *call = "cudaMemcpyAsync";
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(c->stream);
        call = "cudaStreamSynchronize";
    }
    xattn__cuda_dev_leave(c->ordinal, prev);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, call, e);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_buffer_write(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                             size_t offset, const void *src, size_t bytes)
{
    return xattn__cuda_copy(ctx, (char *)buf->native + offset, src, bytes, cudaMemcpyHostToDevice);
}

static xattn_status xattn__cuda_buffer_read(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                            size_t offset, void *dst, size_t bytes)
{
    return xattn__cuda_copy(ctx, dst, (const char *)buf->native + offset, bytes,
                            cudaMemcpyDeviceToHost);
}

static xattn_status xattn__cuda_buffer_copy(struct xattn_ctx *ctx, struct xattn_buffer *dst,
                                            size_t dst_off, struct xattn_buffer *src,
                                            size_t src_off, size_t bytes)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    /* Asynchronous on the context's stream: the kernels that follow see it. */
    cudaError_t e =
        cudaMemcpyAsync((char *)dst->native + dst_off, (const char *)src->native + src_off, bytes,
                        cudaMemcpyDeviceToDevice, c->stream);
    xattn__cuda_dev_leave(c->ordinal, prev);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaMemcpyAsync", e);
    return XATTN_STATUS_OK;
}

/* ---- attention ------------------------------------------------------------ */

/* 1 when the staging copy already holds p's arrays as last uploaded. */
static int xattn__cuda_meta_same(const xattn_cuda_ctx *c, const xattn_problem *p, uint64_t bytes)
{
    if (c->meta_bytes != bytes)
        return 0;
    const size_t B = (size_t)p->B;
    const int32_t *h = c->meta_host;
    const size_t n_alibi = p->alibi ? (size_t)p->Hq : 0;
    return !memcmp(h, p->len_q, B * 4) && !memcmp(h + B, p->len_k, B * 4) &&
           !memcmp(h + 2 * B, p->start_q, B * 4) && !memcmp(h + 3 * B, p->start_k, B * 4) &&
           (!p->alibi || !memcmp(h + 4 * B, p->alibi, n_alibi * 4)) &&
           (!p->paged ||
            !memcmp(h + 4 * B + n_alibi, p->block_table, B * (size_t)p->max_pages * 4));
}

/* Uploads the per-sequence arrays, ALiBi slopes and a paged cache's block
 * table (whole: the kernels never read the entries past a sequence's pages)
 * of p on the stream and points a's device arrays at them. From pinned
 * memory, so the copy is truly asynchronous (a pageable one stages through
 * the driver on the host); and not at all when they equal the last upload,
 * whose device copy later kernels on the stream still see. */
static xattn_status xattn__cuda_upload_meta(struct xattn_ctx *ctx, xattn_cuda_ctx *c,
                                            const xattn_problem *p, xattn_cuda_args *a)
{
    const uint64_t B = (uint64_t)p->B;
    const uint64_t n_int = 4 * B, n_alibi = p->alibi ? (uint64_t)p->Hq : 0;
    /* B and Hq are bounded by the views; the table is a host array of
     * n_table entries. */
    const uint64_t n_table = p->paged ? B * (uint64_t)p->max_pages : 0;
    const uint64_t bytes = (n_int + n_alibi + n_table) * 4u;
    if (bytes == 0)
        return XATTN_STATUS_OK;
    if (!xattn__cuda_meta_same(c, p, bytes)) {
        xattn_status st;
        /* The staging copy may still feed the last upload: wait for it. */
        if (c->meta_pending) {
            XATTN__CUDA_CALL(cudaEventSynchronize(c->meta_ev), "cudaEventSynchronize");
            c->meta_pending = 0;
        }
        c->meta_bytes = 0;
        if (bytes > c->meta_host_cap) {
            xattn__cuda_pinned_free(ctx, c->meta_host, c->meta_host_cap);
            c->meta_host = NULL;
            c->meta_host_cap = 0;
            const uint64_t cap = bytes < 4096 ? 4096 : bytes;
            c->meta_host = xattn__cuda_pinned_alloc(ctx, cap, "CUDA per-call arrays (host)", &st);
            if (!c->meta_host)
                return st;
            c->meta_host_cap = cap;
        }
        if (bytes > c->meta_dev_cap) {
            if (c->meta_dev) {
                /* cudaFree waits for the kernels that may still read the old copy. */
                if (cudaFree(c->meta_dev) != cudaSuccess)
                    (void)cudaGetLastError();
                xattn__mem_release(ctx, c->meta_dev_cap);
                c->meta_dev = NULL;
                c->meta_dev_cap = 0;
            }
            uint64_t cap = bytes < 4096 ? 4096 : bytes;
            XATTN_RETURN_IF_ERROR(xattn__mem_acquire(ctx, cap, "CUDA per-call arrays (device)"));
            cudaError_t e = cudaMalloc(&c->meta_dev, cap);
            if (e != cudaSuccess) {
                xattn__mem_release(ctx, cap);
                c->meta_dev = NULL;
                return xattn__cuda_fail(e == cudaErrorMemoryAllocation ? XATTN_STATUS_OUT_OF_MEMORY
                                                                       : XATTN_STATUS_BACKEND,
                                        "cudaMalloc", e);
            }
            c->meta_dev_cap = cap;
        }
        int32_t *h = c->meta_host;
        memcpy(h, p->len_q, B * 4);
        memcpy(h + B, p->len_k, B * 4);
        memcpy(h + 2 * B, p->start_q, B * 4);
        memcpy(h + 3 * B, p->start_k, B * 4);
        if (p->alibi)
            memcpy(h + 4 * B, p->alibi, n_alibi * 4);
        if (p->paged)
            memcpy(h + 4 * B + n_alibi, p->block_table, n_table * 4);
        XATTN__CUDA_CALL(cudaMemcpyAsync(c->meta_dev, h, bytes, cudaMemcpyHostToDevice, c->stream),
                         "cudaMemcpyAsync");
        cudaError_t e = cudaEventRecord(c->meta_ev, c->stream);
        if (e != cudaSuccess) { /* no mark: let the copy finish before going on */
            (void)cudaStreamSynchronize(c->stream);
            return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventRecord", e);
        }
        c->meta_pending = 1;
        c->meta_bytes = bytes;
    }
    const int32_t *d = c->meta_dev;
    a->len_q = d;
    a->len_k = d + B;
    a->start_q = d + 2 * B;
    a->start_k = d + 3 * B;
    a->alibi = p->alibi ? (const float *)(d + 4 * B) : NULL;
    a->block_table = p->paged ? d + 4 * B + n_alibi : NULL;
    return XATTN_STATUS_OK;
}

/* A workspace of `bytes`, accounted, stream-ordered when the device has
 * memory pools. */
static xattn_status xattn__cuda_ws_alloc(struct xattn_ctx *ctx, xattn_cuda_ctx *c, uint64_t bytes,
                                         const char *what, void **out)
{
    *out = NULL;
    /* Checked before asking: the device's free memory (cudaMemGetInfo, on
     * the current device, which the call's prepare or the caller has set),
     * and what the stream-ordered pool keeps reserved but unused (it serves
     * an allocation from that first). A failed query checks nothing: the
     * allocation's own failure is still reported. */
    size_t mfree = 0, mtotal = 0;
    if (cudaMemGetInfo(&mfree, &mtotal) == cudaSuccess) {
        uint64_t spare = 0;
        cudaMemPool_t pool;
        uint64_t reserved = 0, used = 0; /* (the attributes are cuuint64_t) */
        if (c->pools && cudaDeviceGetDefaultMemPool(&pool, c->ordinal) == cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) ==
                cudaSuccess &&
            cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
            reserved > used)
            spare = reserved - used;
        if (bytes > (uint64_t)mfree + spare)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                                "%s: %llu MiB, but the device has %llu MiB free of %llu MiB "
                                "(cudaMemGetInfo, plus %llu MiB its memory pool keeps for reuse)",
                                what, (unsigned long long)((bytes + (1u << 20) - 1) >> 20),
                                (unsigned long long)(mfree >> 20),
                                (unsigned long long)(mtotal >> 20),
                                (unsigned long long)(spare >> 20));
    } else {
        (void)cudaGetLastError();
    }
    XATTN_RETURN_IF_ERROR(xattn__mem_acquire(ctx, bytes, what));
    cudaError_t e =
        c->pools ? cudaMallocAsync(out, (size_t)bytes, c->stream) : cudaMalloc(out, (size_t)bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        xattn__mem_release(ctx, bytes);
        *out = NULL;
        return xattn__error(e == cudaErrorMemoryAllocation ? XATTN_STATUS_OUT_OF_MEMORY
                                                           : XATTN_STATUS_BACKEND,
                            "%s: %s of %llu bytes failed: %s (%d)", what,
                            c->pools ? "cudaMallocAsync" : "cudaMalloc", (unsigned long long)bytes,
                            cudaGetErrorString(e), (int)e);
    }
    return XATTN_STATUS_OK;
}

static void xattn__cuda_ws_free(struct xattn_ctx *ctx, xattn_cuda_ctx *c, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    cudaError_t e = c->pools ? cudaFreeAsync(ptr, c->stream) : cudaFree(ptr);
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    xattn__mem_release(ctx, bytes);
}

/* A failed kernel launch: its CUDA text, and which kernel. */
static xattn_status xattn__cuda_launch_failed(const char *kernel, const char *path, cudaError_t e)
{
    (void)cudaGetLastError();
    return xattn__error(XATTN_STATUS_BACKEND, "%s kernel (%s path) launch failed: %s (%d)", kernel,
                        path, cudaGetErrorString(e), (int)e);
}

/* Counter slots for `slots` blocks plus one for the sums, and the pinned
 * sums; 0 when they cannot be had (the call then goes on uncounted: counting
 * serves the records and must not fail a call). */
static int xattn__cuda_counters(struct xattn_ctx *ctx, xattn_cuda_ctx *c, long long slots)
{
    const uint64_t need = (uint64_t)slots + 1u, triple = 3u * sizeof *c->cnt_dev;
    xattn_status st = XATTN_STATUS_OK;
    if (!c->cnt_host)
        c->cnt_host = xattn__cuda_pinned_alloc(ctx, XATTN__CUDA_CNT_HOST_BYTES,
                                               "CUDA work counters (host)", &st);
    if (c->cnt_host && need > c->cnt_cap) {
        if (c->cnt_dev) {
            if (cudaFree(c->cnt_dev) != cudaSuccess) /* waits for the kernels using it */
                (void)cudaGetLastError();
            xattn__mem_release(ctx, c->cnt_cap * triple);
            c->cnt_dev = NULL;
            c->cnt_cap = 0;
        }
        const uint64_t cap = need < 1024 ? 1024 : need + need / 4;
        st = xattn__mem_acquire(ctx, cap * triple, "CUDA work counters (device)");
        if (st == XATTN_STATUS_OK) {
            cudaError_t e = cudaMalloc((void **)&c->cnt_dev, (size_t)(cap * triple));
            if (e == cudaSuccess) {
                c->cnt_cap = cap;
            } else {
                (void)cudaGetLastError();
                xattn__mem_release(ctx, cap * triple);
                c->cnt_dev = NULL;
                st = XATTN_STATUS_OUT_OF_MEMORY;
            }
        }
    }
    if (st != XATTN_STATUS_OK || !c->cnt_dev) {
        xattn__log(XATTN_LOG_INFO, "cuda: executed work not counted in this call (%s)",
                   st != XATTN_STATUS_OK ? xattn_last_error() : "no memory for the counters");
        xattn__clear_error();
        return 0;
    }
    return 1;
}

/* The kernel arguments of p on c's device (the per-sequence arrays and the
 * counters are set by prepare). */
static void xattn__cuda_args_of(const xattn_cuda_ctx *c, const xattn_problem *p,
                                const xattn__cuda_cfg *cfg, xattn_cuda_args *a)
{
    memset(a, 0, sizeof *a);
    a->p = p;
    a->q = p->q.buf->native;
    a->k = p->k.buf->native;
    a->v = p->v.buf->native;
    a->o = p->o.buf->native;
    a->lse = p->has_lse ? (float *)p->lse.buf->native : NULL;
    a->bias = p->has_bias ? p->bias.buf->native : NULL;
    a->sinks = p->has_sinks ? (const float *)p->sinks.buf->native : NULL;
    a->k_scale = p->has_k_scale ? (const float *)p->k_scale.buf->native : NULL;
    a->v_scale = p->has_v_scale ? (const float *)p->v_scale.buf->native : NULL;
    a->stream = c->stream;
    a->cc = c->cc;
    a->sm_count = c->sm_count;
    a->smem_optin = c->smem_optin;
    a->force_simt = c->force_simt || cfg->simt;
    a->mma_narrow = c->mma_narrow;
    a->device = c->ordinal;
    /* A paged cache's table is uploaded by prepare (xattn__cuda_upload_meta). */
    a->page_size = p->paged ? (int)p->page_size : 0; /* validated: fits with max_pages */
    a->max_pages = p->paged ? (long long)p->max_pages : 0;
}

/* SPLITKV's split count under cfg: the kernels' rule (two waves of blocks
 * over the SMs, or the caller's num_splits) unless cfg asks for other waves. */
static int xattn__cuda_splits(const xattn_cuda_args *a, const xattn__cuda_cfg *cfg)
{
    const xattn_problem *p = a->p;
    if (p->num_splits > 0 || cfg->waves == XATTN__CUDA_WAVES_DEFAULT)
        return xattn_cuda_splitkv_num_splits(a);
    /* xattn_cuda_count_slots with no split: the blocks of one split. */
    const int s = xattn__cuda_waves_splits(xattn_cuda_count_slots(a, 0), a->sm_count, cfg->waves);
    xattn_problem q = *p; /* the kernels' clamps (chunks, most splits) still apply */
    q.num_splits = s < XATTN_CUDA_MAX_SPLITS ? s : XATTN_CUDA_MAX_SPLITS;
    xattn_cuda_args b = *a;
    b.p = &q;
    return xattn_cuda_splitkv_num_splits(&b);
}

/*
 * The device operations of the algorithm driver (xattn_driver.c). Kernels
 * are enqueued on the context's stream; a timed call records an event before
 * the first phase and after each, and finish waits for the last one. Timed
 * calls (the ones that make records) also count the executed work.
 */
static xattn_status xattn__cuda_plan(const struct xattn_ctx *ctx, const xattn_problem *p,
                                     xattn__plan *plan)
{
    const xattn_cuda_ctx *c = ctx->bctx;
    int tuned = 0;
    const xattn__cuda_cfg cfg =
        xattn__cuda_tune_cfg(c->tune, (int)p->algo, (int)p->q.dtype, p->D, p->Dv, &tuned);
    xattn_cuda_args a;
    xattn__cuda_args_of(c, p, &cfg, &a);
    const int splits = p->algo == XATTN_ALGO_SPLITKV ? xattn__cuda_splits(&a, &cfg) : 0;
    char why[256];
    if (xattn_cuda_check_limits(&a, splits, why, sizeof why))
        return xattn__error(XATTN_STATUS_UNSUPPORTED, "cuda: %s", why);
    plan->splits = splits > 0 ? splits : 1;
    /* The tiles (the model's fallback) and the kernel that runs. */
    if (p->algo != XATTN_ALGO_NAIVE)
        xattn_cuda_flash_tiles(&a, &plan->tile_q, &plan->tile_k, &plan->tile_heads);
    const char *path = p->algo == XATTN_ALGO_NAIVE ? "simt" : xattn_cuda_flash_path(&a);
    plan->matrix_units = !strncmp(path, "mma", 3);
    /* "-tuned": a stored winner of `xattn tune` chose the path or splits. */
    snprintf(plan->kernel, sizeof plan->kernel, "%s%s", plan->matrix_units ? "mma" : "simt",
             tuned ? "-tuned" : "");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_prepare(struct xattn_ctx *ctx, const xattn_problem *p,
                                        xattn__plan *plan, int timed)
{
    xattn_cuda_ctx *c = ctx->bctx;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &c->prev_device));
    xattn_cuda_args *a = &c->call;
    int tuned = 0; /* plan's configuration (the winner is read once, by plan) */
    const xattn__cuda_cfg cfg =
        xattn__cuda_tune_cfg(c->tune, (int)p->algo, (int)p->q.dtype, p->D, p->Dv, &tuned);
    xattn__cuda_args_of(c, p, &cfg, a);
    c->path = p->algo == XATTN_ALGO_NAIVE ? "simt" : xattn_cuda_flash_path(a);
    c->nev = 0;
    xattn_status st = xattn__cuda_upload_meta(ctx, c, p, a);
    if (st != XATTN_STATUS_OK) {
        xattn__cuda_dev_leave(c->ordinal, c->prev_device);
        return st;
    }
    /* Device memory for the records. */
    plan->device_mem_total = c->mem_total;
    const double now = xattn__now();
    if (c->mem_free_t < 0 || now - c->mem_free_t > XATTN__CUDA_MEMINFO_S) {
        size_t mfree = 0, mtotal = 0;
        if (cudaMemGetInfo(&mfree, &mtotal) == cudaSuccess) {
            c->mem_free = mfree;
            c->mem_free_t = now;
        } else {
            (void)cudaGetLastError();
        }
    }
    plan->device_mem_free = c->mem_free;
    c->slots =
        timed ? xattn_cuda_count_slots(a, p->algo == XATTN_ALGO_SPLITKV ? plan->splits : 0) : 0;
    c->counting = timed && xattn__cuda_counters(ctx, c, c->slots);
    a->counts = c->counting ? c->cnt_dev : NULL;
    a->inject_failure = atomic_exchange(&xattn__cuda_fail_next, 0);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_ws_alloc_op(struct xattn_ctx *ctx, const xattn_problem *p,
                                            uint64_t bytes, const char *what, int touch, void **out)
{
    (void)touch; /* device memory: nothing to fault in */
    xattn_cuda_ctx *c = ctx->bctx;
    XATTN_RETURN_IF_ERROR(xattn__cuda_ws_alloc(ctx, c, bytes, what, out));
    if (p->poison) {
        cudaError_t e = cudaMemsetAsync(*out, 0xff, (size_t)bytes, c->stream);
        if (e != cudaSuccess) {
            xattn__cuda_ws_free(ctx, c, *out, bytes);
            *out = NULL;
            return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaMemsetAsync", e);
        }
    }
    return XATTN_STATUS_OK;
}

/* After finish, which gave the thread its previous device back. */
static void xattn__cuda_ws_free_op(struct xattn_ctx *ctx, void *ws, uint64_t bytes)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    const int entered = xattn__cuda_dev_enter(c->ordinal, &prev) == XATTN_STATUS_OK;
    if (!entered)
        xattn__clear_error();
    xattn__cuda_ws_free(ctx, c, ws, bytes);
    if (entered)
        xattn__cuda_dev_leave(c->ordinal, prev);
}

/* A timed call's mark: an event after what was enqueued so far. */
static xattn_status xattn__cuda_mark(xattn_cuda_ctx *c)
{
    if (c->nev >= XATTN__CUDA_EVENTS)
        return xattn__error(XATTN_STATUS_INTERNAL, "cuda: more phases than events");
    cudaError_t e = cudaEventRecord(c->ev[c->nev], c->stream);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventRecord", e);
    c->nev++;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_phase_op(struct xattn_ctx *ctx, const xattn_problem *p,
                                         xattn__plan *plan, int phase, int timed)
{
    (void)p;
    xattn_cuda_ctx *c = ctx->bctx;
    const xattn_cuda_args *a = &c->call;
    float *const *ws = (float *const *)plan->ws;
    /* Events around the kernels only: the device time excludes the uploads
     * and the workspace, as on the CPU backend. */
    if (timed && c->nev == 0)
        XATTN_RETURN_IF_ERROR(xattn__cuda_mark(c));
    cudaError_t e = cudaSuccess;
    const char *name = "?";
    switch ((xattn__phase)phase) {
    case XATTN__PH_QK: e = xattn_cuda_naive_qk(a, ws[XATTN__WS_SCORES]), name = "qk"; break;
    case XATTN__PH_SOFTMAX:
        e = xattn_cuda_naive_softmax(a, ws[XATTN__WS_SCORES]), name = "softmax";
        break;
    case XATTN__PH_PV: e = xattn_cuda_naive_pv(a, ws[XATTN__WS_SCORES]), name = "pv"; break;
    case XATTN__PH_FLASH: e = xattn_cuda_flash(a), name = "flash"; break;
    case XATTN__PH_PARTIAL:
        e = xattn_cuda_splitkv_partial(a, plan->splits, ws[XATTN__WS_PART_O],
                                       ws[XATTN__WS_PART_LSE]);
        name = "splitkv partial";
        break;
    case XATTN__PH_COMBINE:
        e = xattn_cuda_splitkv_combine(a, plan->splits, ws[XATTN__WS_PART_O],
                                       ws[XATTN__WS_PART_LSE]);
        name = "splitkv combine";
        break;
    }
    if (e != cudaSuccess)
        return xattn__cuda_launch_failed(name, c->path, e);
    return timed ? xattn__cuda_mark(c) : XATTN_STATUS_OK;
}

static xattn_status xattn__cuda_finish(struct xattn_ctx *ctx, const xattn_problem *p,
                                       xattn__plan *plan, int timed, int ok, xattn__exec *exec)
{
    (void)p;
    xattn_cuda_ctx *c = ctx->bctx;
    xattn_status st = XATTN_STATUS_OK;
    cudaError_t e = cudaSuccess;
    /* The counts, summed on the device after the last mark (not timed) and
     * copied to pinned memory; read once cnt_ev has passed. */
    if (ok && c->counting) {
        unsigned long long *sums = c->cnt_dev + 3 * c->slots;
        e = xattn_cuda_count_sum(&c->call, c->slots, sums);
        if (e != cudaSuccess)
            st = xattn__cuda_launch_failed("count", c->path, e);
        else if ((e = cudaMemcpyAsync(c->cnt_host, sums, 3 * sizeof *sums, cudaMemcpyDeviceToHost,
                                      c->stream)) != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaMemcpyAsync (work counts)", e);
        else if ((e = cudaEventRecord(c->cnt_ev, c->stream)) != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventRecord", e);
    }
    /* Timed: wait for the last event; a kernel that faulted reports here. */
    if (ok && st == XATTN_STATUS_OK && timed && c->nev > 0) {
        e = cudaEventSynchronize(c->ev[c->nev - 1]);
        if (e != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "kernel execution (cudaEventSynchronize)",
                                  e);
        for (int k = 0; st == XATTN_STATUS_OK && k + 1 < c->nev && k < 4; k++) {
            float ms = 0.0f;
            if ((e = cudaEventElapsedTime(&ms, c->ev[k], c->ev[k + 1])) != cudaSuccess)
                st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventElapsedTime", e);
            plan->phase_ms[k] = ms;
        }
        float total = 0.0f;
        if (st == XATTN_STATUS_OK &&
            (e = cudaEventElapsedTime(&total, c->ev[0], c->ev[c->nev - 1])) != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventElapsedTime", e);
        plan->device_ms = total;
    }
    if (ok && st == XATTN_STATUS_OK && c->counting) {
        e = cudaEventSynchronize(c->cnt_ev);
        if (e != cudaSuccess) {
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaEventSynchronize (work counts)", e);
        } else {
            exec->qk_pairs = (double)c->cnt_host[0];
            exec->pv_pairs = (double)c->cnt_host[1];
            exec->kv_rows = (double)c->cnt_host[2];
        }
    }
    xattn__cuda_dev_leave(c->ordinal, c->prev_device);
    return st;
}

/* ---- ceilings: FMA throughput and bandwidth micro-benchmarks --------------- */

static xattn_status xattn__cuda_ceilings_run(struct xattn_ctx *ctx, xattn_cuda_ctx *c,
                                             xattn_ceilings *out)
{
    const int quick = xattn__ceilings_quick();
    const int reps = quick ? 2 : 5;
    /* Enough blocks to fill every SM several times over. */
    const int blocks = (c->sm_count > 0 ? c->sm_count : 1) * 8;
    /* Bandwidth arrays far beyond the L2: 1 GiB (64 MiB quick), within free memory. */
    uint64_t bytes = quick ? (64u << 20) : (1024u << 20);
    size_t mfree = 0, mtotal = 0;
    if (cudaMemGetInfo(&mfree, &mtotal) == cudaSuccess)
        while (bytes > mfree / 4 && bytes > (1u << 20))
            bytes /= 2;
    else
        (void)cudaGetLastError();
    const uint64_t sink_bytes = (uint64_t)blocks * 256u * sizeof(float);
    void *in = NULL, *outb = NULL, *sink = NULL;
    xattn_status st = xattn__cuda_ws_alloc(ctx, c, bytes, "ceilings input", &in);
    if (st == XATTN_STATUS_OK)
        st = xattn__cuda_ws_alloc(ctx, c, bytes, "ceilings output", &outb);
    if (st == XATTN_STATUS_OK)
        st = xattn__cuda_ws_alloc(ctx, c, sink_bytes, "ceilings sink", &sink);
    cudaError_t e = cudaSuccess;
    if (st == XATTN_STATUS_OK) {
        e = cudaMemsetAsync(in, 0, (size_t)bytes, c->stream);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(outb, 0, (size_t)bytes, c->stream);
        if (e != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaMemsetAsync (ceilings)", e);
    }
    if (st == XATTN_STATUS_OK) {
        /* Grow the FMA loop until one launch takes >= 20 ms (5 ms quick). */
        int iters = 256;
        float ms = 0.0f;
        for (;;) {
            e = xattn_cuda_ceil_fma(sink, blocks, iters, 1, c->stream, &ms);
            if (e != cudaSuccess || ms >= (quick ? 5.0f : 20.0f) || iters >= (1 << 24))
                break;
            iters *= 4;
        }
        if (e == cudaSuccess)
            e = xattn_cuda_ceil_fma(sink, blocks, iters, reps, c->stream, &ms);
        if (e == cudaSuccess && ms > 0.0f)
            out->fma_f32_gflops = (double)blocks * 256.0 * iters * 64.0 / (ms * 1e-3) * 1e-9;
        /* The tensor cores' mma.sync rate (sm_80+; 0 = none), f16 then bf16,
         * grown the same way: the ceiling of the mma path's products. */
        for (int bf = 0; bf < 2 && e == cudaSuccess && c->cc >= 80; bf++) {
            int it = 64;
            float mms = 0.0f;
            for (;;) {
                e = xattn_cuda_ceil_mma(sink, bf, blocks, it, 1, c->stream, &mms);
                if (e != cudaSuccess || mms >= (quick ? 5.0f : 20.0f) || it >= (1 << 24))
                    break;
                it *= 4;
            }
            if (e == cudaSuccess)
                e = xattn_cuda_ceil_mma(sink, bf, blocks, it, reps, c->stream, &mms);
            if (e == cudaSuccess && mms > 0.0f)
                *(bf ? &out->mma_bf16_gflops : &out->mma_f16_gflops) =
                    (double)blocks * XATTN_CUDA_CEIL_MMA_WARPS * it * XATTN_CUDA_CEIL_MMA_CHAINS *
                    4096.0 / (mms * 1e-3) * 1e-9;
        }
        if (e == cudaSuccess)
            e = xattn_cuda_ceil_read(in, (size_t)bytes, sink, blocks, reps, c->stream, &ms);
        if (e == cudaSuccess && ms > 0.0f)
            out->read_gbps = (double)bytes / (ms * 1e-3) * 1e-9;
        if (e == cudaSuccess)
            e = xattn_cuda_ceil_copy(in, outb, (size_t)bytes, blocks, reps, c->stream, &ms);
        if (e == cudaSuccess && ms > 0.0f)
            out->copy_gbps = 2.0 * (double)bytes / (ms * 1e-3) * 1e-9;
        if (e != cudaSuccess)
            st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "ceilings micro-benchmark", e);
    }
    /* No SIMT f16/bf16 FMA rate (0 = unknown): the kernels' 16-bit products
     * run on the tensor cores (mma_*, for records with matrix_units) or, on
     * the simt path, in f32. */
    out->fma_f16_gflops = 0;
    out->fma_bf16_gflops = 0;
    xattn__cuda_ws_free(ctx, c, sink, sink_bytes);
    xattn__cuda_ws_free(ctx, c, outb, bytes);
    xattn__cuda_ws_free(ctx, c, in, bytes);
    if (st == XATTN_STATUS_OK && (e = cudaStreamSynchronize(c->stream)) != cudaSuccess)
        st = xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaStreamSynchronize (ceilings)", e);
    return st;
}

static xattn_status xattn__cuda_measure_ceilings(struct xattn_ctx *ctx, xattn_ceilings *out)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    xattn_status st = xattn__cuda_ceilings_run(ctx, c, out);
    xattn__cuda_dev_leave(c->ordinal, prev);
    return st;
}

static xattn_status xattn__cuda_device_memory(struct xattn_ctx *ctx, uint64_t *total,
                                              uint64_t *avail)
{
    xattn_cuda_ctx *c = ctx->bctx;
    int prev;
    XATTN_RETURN_IF_ERROR(xattn__cuda_dev_enter(c->ordinal, &prev));
    size_t mfree = 0, mtotal = 0;
    cudaError_t e = cudaMemGetInfo(&mfree, &mtotal);
    xattn__cuda_dev_leave(c->ordinal, prev);
    if (e != cudaSuccess)
        return xattn__cuda_fail(XATTN_STATUS_BACKEND, "cudaMemGetInfo", e);
    *total = mtotal;
    *avail = mfree;
    return XATTN_STATUS_OK;
}

const xattn_backend_iface xattn__backend_cuda = {
    .id = XATTN_BACKEND_CUDA,
    .name = "cuda",
    .probe = xattn__cuda_probe,
    .device_count = xattn__cuda_device_count,
    .device_info = xattn__cuda_device_info,
    .ctx_create = xattn__cuda_ctx_create,
    .ctx_destroy = xattn__cuda_ctx_destroy,
    .sync = xattn__cuda_sync,
    .set_option = NULL,
    .buffer_alloc = xattn__cuda_buffer_alloc,
    .buffer_wrap_host = NULL, /* host memory: use xattn_buffer_write (see xattn_cuda.h) */
    .buffer_release = xattn__cuda_buffer_release,
    .buffer_write = xattn__cuda_buffer_write,
    .buffer_read = xattn__cuda_buffer_read,
    .buffer_copy = xattn__cuda_buffer_copy,
    .plan = xattn__cuda_plan,
    .prepare = xattn__cuda_prepare,
    .ws_alloc = xattn__cuda_ws_alloc_op,
    .ws_free = xattn__cuda_ws_free_op,
    .phase = xattn__cuda_phase_op,
    .finish = xattn__cuda_finish,
    .measure_ceilings = xattn__cuda_measure_ceilings,
    .device_memory = xattn__cuda_device_memory,
};

/* ---- tests ---------------------------------------------------------------- */

/* Makes the next attention call on any CUDA context fail at its first launch
 * (an invalid block size), so that tests see a real CUDA launch error come
 * back as a status. Not part of the public API. */
void xattn__cuda_test_fail_next_launch(void);
void xattn__cuda_test_fail_next_launch(void)
{
    atomic_store(&xattn__cuda_fail_next, 1);
}

/* ---- interop (xattn_cuda.h) ----------------------------------------------- */

static int xattn__cuda_is_ctx(const xattn_ctx *ctx)
{
    return ctx && ctx->be == &xattn__backend_cuda && ctx->bctx;
}

xattn_status xattn_cuda_ctx_create_on_stream(int device, void *stream, xattn_ctx **out)
{
    xattn__clear_error();
    if (!out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "out: NULL pointer");
    *out = NULL;
    XATTN_RETURN_IF_ERROR(xattn__backend_require(XATTN_BACKEND_CUDA));
    if (device < 0 || device >= xattn__cuda_ndev)
        return xattn__error(XATTN_STATUS_DEVICE_NOT_FOUND,
                            "device: index %d out of range (the cuda backend has %d device%s)",
                            device, xattn__cuda_ndev, xattn__cuda_ndev == 1 ? "" : "s");
    const int ordinal = xattn__cuda_ordinal[device];
    if (stream) {
        int sdev = -1;
        cudaError_t e = cudaStreamGetDevice((cudaStream_t)stream, &sdev);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "stream: not a usable CUDA stream (cudaStreamGetDevice failed: "
                                "%s (%d))",
                                cudaGetErrorString(e), (int)e);
        }
        if (sdev != ordinal)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "stream: belongs to CUDA device %d, but backend device %d is "
                                "CUDA device %d",
                                sdev, device, ordinal);
    }
    struct xattn_ctx *ctx;
    XATTN_RETURN_IF_ERROR(xattn__ctx_alloc(&xattn__backend_cuda, device, &ctx));
    xattn_status st = xattn__cuda_device_info(device, &ctx->info);
    if (st == XATTN_STATUS_OK)
        st = xattn__cuda_state_init(ctx, (cudaStream_t)stream, 0);
    if (st != XATTN_STATUS_OK) {
        xattn__ctx_free_shell(ctx);
        return st;
    }
    ctx->info.struct_size = sizeof ctx->info;
    *out = ctx;
    xattn__log(XATTN_LOG_INFO, "context created on cuda device %d (%s) on the caller's stream %p",
               device, ctx->info.name, stream);
    return XATTN_STATUS_OK;
}

void *xattn_cuda_ctx_stream(const xattn_ctx *ctx)
{
    if (!xattn__cuda_is_ctx(ctx))
        return NULL;
    return (void *)((const xattn_cuda_ctx *)ctx->bctx)->stream;
}

int xattn_cuda_ctx_device_ordinal(const xattn_ctx *ctx)
{
    if (!xattn__cuda_is_ctx(ctx))
        return -1;
    return ((const xattn_cuda_ctx *)ctx->bctx)->ordinal;
}

xattn_status xattn_cuda_buffer_wrap(xattn_ctx *ctx, void *device_ptr, size_t bytes,
                                    xattn_buffer **out)
{
    xattn__clear_error();
    if (!ctx || !out || !device_ptr)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL",
                            !ctx   ? "ctx"
                            : !out ? "out"
                                   : "device_ptr");
    *out = NULL;
    if (!xattn__cuda_is_ctx(ctx))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "ctx: a %s context; xattn_cuda_buffer_wrap needs a CUDA context",
                            ctx->be->name);
    if (bytes == 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "bytes: 0 (a buffer needs a size)");
    const xattn_cuda_ctx *c = ctx->bctx;
    struct cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    cudaError_t e = cudaPointerGetAttributes(&attr, device_ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "device_ptr: %p is not CUDA memory (cudaPointerGetAttributes failed: "
                            "%s (%d))",
                            device_ptr, cudaGetErrorString(e), (int)e);
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "device_ptr: %p is %s memory, not CUDA device memory (copy host data "
                            "in with xattn_buffer_write)",
                            device_ptr,
                            attr.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host");
    if (attr.type == cudaMemoryTypeDevice && attr.device != c->ordinal)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "device_ptr: %p is memory of CUDA device %d; the context is on CUDA "
                            "device %d",
                            device_ptr, attr.device, c->ordinal);
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    struct xattn_buffer *b = NULL;
    xattn_status st = xattn__buffer_new(ctx, bytes, 0, &b);
    if (st == XATTN_STATUS_OK) {
        b->native = device_ptr;
        b->host = NULL;
        b->aux = NULL;
        b->mem_space = XATTN__MEM_DEVICE; /* device pointers alias by address */
        b->mem_base = (uintptr_t)device_ptr;
    }
    xattn__ctx_leave(ctx);
    *out = b;
    return st;
}

void *xattn_cuda_buffer_device_ptr(const xattn_buffer *buf)
{
    if (!buf || !xattn__cuda_is_ctx(buf->ctx))
        return NULL;
    return buf->native;
}

/* ---- include/xattn_cuda.h: tuned configurations ----------------------------- */

static xattn_status xattn__cuda_text_out(const char *text, char *out, size_t n)
{
    if (strlen(text) >= n)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "n: %zu bytes, the configuration "
                            "needs %zu",
                            n, strlen(text) + 1);
    memcpy(out, text, strlen(text) + 1);
    return XATTN_STATUS_OK;
}

xattn_status xattn_cuda_config_default(xattn_ctx *ctx, char *config, size_t n)
{
    xattn__clear_error();
    if (!config || n == 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "config: NULL or empty buffer");
    if (!xattn__cuda_is_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT, "ctx: not a CUDA context");
    char text[128];
    const xattn__cuda_cfg d = xattn__cuda_cfg_default();
    xattn__cuda_cfg_format(&d, text, sizeof text);
    return xattn__cuda_text_out(text, config, n);
}

xattn_status xattn_cuda_tune_store(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                   int64_t head_dim, int64_t head_dim_v, const char *config)
{
    xattn__clear_error();
    if (!xattn__cuda_is_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT, "ctx: not a CUDA context");
    XATTN_RETURN_IF_ERROR(xattn__cuda_tune_args((int)algo, (int)dtype, head_dim, head_dim_v));
    xattn__cuda_cfg cfg = xattn__cuda_cfg_default();
    XATTN_RETURN_IF_ERROR(xattn__cuda_cfg_parse(config, "config", &cfg));
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx)); /* the memo of stored winners is the call's */
    xattn_cuda_ctx *c = ctx->bctx;
    xattn_status st =
        xattn__cuda_tune_store(c->tune, (int)algo, (int)dtype, head_dim, head_dim_v, &cfg);
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_cuda_tune_lookup(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                    int64_t head_dim, int64_t head_dim_v, char *config, size_t n,
                                    int *found)
{
    xattn__clear_error();
    if (!config || n == 0 || !found)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL or empty",
                            !found ? "found" : "config");
    *found = 0;
    config[0] = '\0';
    if (!xattn__cuda_is_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT, "ctx: not a CUDA context");
    XATTN_RETURN_IF_ERROR(xattn__cuda_tune_args((int)algo, (int)dtype, head_dim, head_dim_v));
    xattn_cuda_ctx *c = ctx->bctx;
    xattn__cuda_cfg cfg;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx)); /* the file is read into the context's memory */
    const int got =
        xattn__cuda_tune_read(c->tune, (int)algo, (int)dtype, head_dim, head_dim_v, &cfg);
    xattn__ctx_leave(ctx);
    if (!got)
        return XATTN_STATUS_OK;
    char text[128];
    xattn__cuda_cfg_format(&cfg, text, sizeof text);
    XATTN_RETURN_IF_ERROR(xattn__cuda_text_out(text, config, n));
    *found = 1;
    return XATTN_STATUS_OK;
}
