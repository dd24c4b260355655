/*
 * The OpenCL backend's host module: device enumeration across all platforms,
 * contexts (own or the caller's objects, see include/xattn_opencl.h), buffers,
 * programs built per configuration and cached in memory and on disk, and the
 * three algorithms enqueued and timed with OpenCL event profiling. The kernels
 * live in kernels_cl/ and are embedded at build time (xattn_backend_opencl.h).
 * This file holds contexts, buffers and the algorithm driver's operations; the
 * rest is split by concern (xattn_opencl_internal.h lists the files).
 * Over 800 lines because the run (570 lines: plan, prepare, the phases'
 * launches, the executed-work counts) and the ceilings' micro-benchmarks share
 * the accounted scratch buffers (xattn__cl_scratch_new/_free); the next split
 * is the ceilings into a file of their own, with those two in the internal
 * header.
 *
 * Program configuration = (q/o dtype, k/v dtype, D, Dv, tile). D and Dv that
 * are common head sizes are build-time constants (the fast path); any other
 * size is given to the kernels as an argument and only rounds the array sizes
 * up to a power of two (the generic path), which keeps the number of distinct
 * programs small. All six kernels are in every program.
 *
 * Environment:
 *   XATTN_CL_SOURCE_DIR  folder of .cl files replacing the embedded sources
 *   XATTN_CL_TILE        tile override, e.g. "bq=16,bk=32,nt=16,rwg=64,cwg=32,
 *                        naive_local=1,rows=0" (any subset of the keys;
 *                        xattn_opencl_tiles.c)
 *   XATTN_CACHE_DIR      disk cache root ("" disables the disk cache); default
 *                        $XDG_CACHE_HOME/xattn or ~/.cache/xattn. Binaries go
 *                        to <root>/opencl.
 *   XATTN_CL_BINARY_CACHE  auto (default) | on | off: whether program binaries
 *                        are stored after a source build (cached binaries are
 *                        read whenever present, except with off). auto stores
 *                        them unless a driver quirk makes exporting a binary
 *                        costly (PoCL, which also caches kernels itself).
 *
 * Disk cache file: "XATTNCL1", u32 key length, the key (device, vendor,
 * driver, versions, source hash, build options), u64 binary length, the
 * binary, u64 FNV-1a of the binary (xattn_file.c). Files are read and written
 * through xattn_file.c: only from the user's private cache folder, regular
 * files of a bounded size, counted by the context's allocator. Any mismatch,
 * an untrusted folder or file, or a binary the driver refuses falls back to a
 * source build (and a warning), never to an error.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_file.h"
#include "xattn_opencl_internal.h"

/* ---- driver quirks (data, like the tile table) ----------------------------- */

typedef struct xattn_cl_quirk {
    const char *platform;   /* substring of CL_PLATFORM_NAME */
    int slow_binary_export; /* exporting a binary recompiles the kernels: do not store by default */
    const char *why;
} xattn_cl_quirk;

static const xattn_cl_quirk xattn__cl_quirks[] = {
    /* Measured with PoCL 3.1 on 2 cores: clGetProgramInfo(CL_PROGRAM_BINARIES)
     * compiles every kernel once more (~6 s a program, 5x the build), while
     * PoCL's own kernel cache (POCL_KERNEL_CACHE, on by default) already keeps
     * builds and compiled kernels across processes. */
    {"Portable Computing Language", 1,
     "auto: read only; PoCL recompiles every kernel to export a binary, and caches kernels "
     "itself"},
};

int xattn__is_cl_ctx(const xattn_ctx *ctx)
{
    return ctx && ctx->be == &xattn__backend_opencl && ctx->bctx;
}
double xattn__opencl_last_build_ms(xattn_ctx *ctx)
{
    if (!xattn__is_cl_ctx(ctx))
        return -1.0;
    return ((xattn_cl_ctx *)ctx->bctx)->last_build_ms;
}
xattn_status xattn__opencl_cache_stats(xattn_ctx *ctx, xattn_opencl_cache_stats *out)
{
    if (!xattn__is_cl_ctx(ctx) || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "ctx/out: NULL or not an OpenCL context");
    *out = ((xattn_cl_ctx *)ctx->bctx)->stats;
    return XATTN_STATUS_OK;
}
xattn_status xattn__opencl_last_counts(xattn_ctx *ctx, double *qk, double *pv, double *kv_rows)
{
    if (!xattn__is_cl_ctx(ctx) || !qk || !pv || !kv_rows)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "ctx/qk/pv/kv_rows: NULL or not an OpenCL context");
    const xattn__exec *x = &((xattn_cl_ctx *)ctx->bctx)->last_exec;
    *qk = x->qk_pairs;
    *pv = x->pv_pairs;
    *kv_rows = x->kv_rows;
    return XATTN_STATUS_OK;
}
const char *xattn__opencl_cache_dir(xattn_ctx *ctx)
{
    return xattn__is_cl_ctx(ctx) ? ((xattn_cl_ctx *)ctx->bctx)->cache_dir : "";
}
/* ---- context ------------------------------------------------------------- */

void xattn__cl_state_free(xattn_cl_ctx *c)
{
    if (!c)
        return;
    if (c->queue)
        clFinish(c->queue);
    xattn__cl_tune_free(c);
    while (c->progs) {
        xattn_cl_prog *n = c->progs->next;
        xattn__cl_prog_free(c->progs);
        c->progs = n;
    }
    if (c->src_owned)
        for (int i = 0; i < c->nsrc; i++)
            free(c->src_owned[i]);
    free(c->src_owned);
    free(c->src);
    free(c->src_len);
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
}

/* Fills the device facts, tile, sources and cache folder of c (whose context,
 * device and queue are set). */
xattn_status xattn__cl_state_init(xattn_cl_ctx *c)
{
    xattn__exec_init(&c->last_exec);
    cl_command_queue_properties qp = 0;
    XATTN_CL_CHECK(clGetCommandQueueInfo(c->queue, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL),
                   "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)");
    if (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "queue: out-of-order command queues are not supported (the phases "
                            "of a call depend on each other); pass an in-order queue");
    c->profiling = (qp & CL_QUEUE_PROFILING_ENABLE) != 0;
    XATTN_CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL),
                   "clGetDeviceInfo(CL_DEVICE_TYPE)");
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc,
                    NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units,
                    &c->compute_units, NULL);
    size_t items[3] = {0, 0, 0}; /* the grids are 1-D: dimension 0 bounds a work-group too */
    if (clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL) ==
            CL_SUCCESS &&
        items[0] && items[0] < c->max_wg)
        c->max_wg = items[0];
    if (!c->max_wg)
        c->max_wg = 1;
    if (!c->compute_units)
        c->compute_units = 1;

    char name[256], vendor[128], driver[128], dver[128], pver[128] = "";
    xattn__cl_dev_str(c->device, CL_DEVICE_NAME, name, sizeof name);
    xattn__cl_dev_str(c->device, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    xattn__cl_dev_str(c->device, CL_DRIVER_VERSION, driver, sizeof driver);
    xattn__cl_dev_str(c->device, CL_DEVICE_VERSION, dver, sizeof dver);
    cl_platform_id plat = NULL;
    if (clGetDeviceInfo(c->device, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) == CL_SUCCESS &&
        plat) {
        clGetPlatformInfo(plat, CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
        pver[sizeof pver - 1] = '\0';
    }
    snprintf(c->cache_ident, sizeof c->cache_ident,
             "xattn-opencl-cache 1\ndevice=%s\nvendor=%s\ndriver=%s\ndevice_version=%s\n"
             "platform=%s",
             name, vendor, driver, dver, pver);

    const xattn_cl_tile_row *row = xattn__cl_tile_row_of(c->type);
    c->tile = row->tile;
    c->tile_class = row->device_class;
    const char *env = getenv("XATTN_CL_TILE");
    c->tile_env = env && *env;
    if (!c->tile_env) {
        c->tune = calloc(1, sizeof *c->tune);
        if (!c->tune)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "OpenCL context: out of host memory");
    }
    if (env && *env) {
        XATTN_RETURN_IF_ERROR(xattn__cl_tile_parse(env, &c->tile));
        /* A tile that cannot fit at the smallest head dims is refused here;
         * larger ones shrink it per program (xattn__cl_program). */
        xattn_cl_tile smallest = c->tile;
        xattn_status st = xattn__cl_tile_fit(c, &smallest, 32, 32, env);
        if (st == XATTN_STATUS_UNSUPPORTED) {
            char why[512]; /* a copy: the message is rewritten from it */
            snprintf(why, sizeof why, "%s", xattn_last_error());
            return xattn__error(st, "XATTN_CL_TILE='%s': %s", env, why);
        }
        XATTN_RETURN_IF_ERROR(st);
    }

    XATTN_RETURN_IF_ERROR(xattn__cl_sources_load(c));
    xattn__cl_cache_dir_resolve(c);

    /* Disk cache policy: binaries are always read when present; stored after a
     * source build unless XATTN_CL_BINARY_CACHE says otherwise ("off": neither,
     * "on": always, "auto": unless a quirk makes exporting a binary costly). */
    char pname[128] = "";
    if (plat) {
        clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        pname[sizeof pname - 1] = '\0';
    }
    const xattn_cl_quirk *quirk = NULL;
    for (size_t i = 0; i < sizeof xattn__cl_quirks / sizeof xattn__cl_quirks[0]; i++)
        if (strstr(pname, xattn__cl_quirks[i].platform))
            quirk = &xattn__cl_quirks[i];
    const char *policy = getenv("XATTN_CL_BINARY_CACHE");
    if (!policy || !*policy || !strcmp(policy, "auto")) {
        c->cache_write = !(quirk && quirk->slow_binary_export);
        c->cache_policy = c->cache_write ? "auto: read and store" : quirk->why;
    } else if (!strcmp(policy, "on")) {
        c->cache_write = 1;
        c->cache_policy = "on (XATTN_CL_BINARY_CACHE): read and store";
    } else if (!strcmp(policy, "off")) {
        c->cache_dir[0] = '\0';
        c->cache_policy = "off (XATTN_CL_BINARY_CACHE)";
    } else {
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "XATTN_CL_BINARY_CACHE='%s': expected auto, on or off", policy);
    }
    xattn__log(XATTN_LOG_INFO,
               "opencl: %s; tile row '%s'%s bq=%d bk=%d nt=%d rwg=%d cwg=%d naive_local=%d "
               "fixed_dtypes=%d fixed_dims=%d rows=%d; sources %s; "
               "program cache %s (%s); profiling %s",
               name, c->tile_class, env && *env ? " + XATTN_CL_TILE" : "", c->tile.bq, c->tile.bk,
               c->tile.nt, c->tile.rwg, c->tile.cwg, c->tile.naive_local, c->tile.fixed_dtypes,
               c->tile.fixed_dims, c->tile.rows, c->src_origin,
               c->cache_dir[0] ? c->cache_dir : "memory only", c->cache_policy,
               c->profiling ? "events" : "host clock");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_ctx_create(struct xattn_ctx *ctx)
{
    xattn_status st;
    xattn_cl_ctx *c = xattn__host_alloc(ctx, sizeof *c, "OpenCL context", &st);
    if (!c)
        return st;
    memset(c, 0, sizeof *c);
    c->owner = ctx;
    const xattn_cl_dev *d = &xattn__cl_devs[ctx->device];
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    cl_int e;
    c->device = d->device;
    c->context = clCreateContext(props, 1, &d->device, NULL, NULL, &e);
    if (e != CL_SUCCESS) {
        c->context = NULL;
        st = xattn__cl_fail(e, "clCreateContext");
    } else {
        c->queue = clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, &e);
        if (e != CL_SUCCESS) {
            c->queue = NULL;
            st = xattn__cl_fail(e, "clCreateCommandQueue");
        } else {
            st = xattn__cl_state_init(c);
        }
    }
    if (st != XATTN_STATUS_OK) {
        xattn__cl_state_free(c);
        xattn__host_free(ctx, c, sizeof *c);
        return st;
    }
    ctx->bctx = c;
    return XATTN_STATUS_OK;
}

static void xattn__cl_ctx_destroy(struct xattn_ctx *ctx)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (!c)
        return;
    xattn__cl_state_free(c);
    xattn__host_free(ctx, c, sizeof *c);
    ctx->bctx = NULL;
}

static xattn_status xattn__cl_sync(struct xattn_ctx *ctx)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clFinish(c->queue), "clFinish");
    return XATTN_STATUS_OK;
}

/* ---- buffers ------------------------------------------------------------- */

/*
 * Where a buffer's bytes are, for the aliasing check (xattn_validate.c refuses
 * an output that shares bytes with another view by comparing byte ranges in
 * one address space). A cl_mem has no address of its own, and a sub-buffer
 * (clCreateSubBuffer) is a second cl_mem on bytes of its parent: each buffer
 * is placed through its root object (CL_MEM_ASSOCIATED_MEMOBJECT) at its
 * offset there (CL_MEM_OFFSET).
 *  - A root on host memory (CL_MEM_USE_HOST_PTR: the library's own large
 *    buffers on CPU devices, xattn_buffer_wrap_host, an application's) sits at
 *    its host address (XATTN__MEM_HOST), where a wrap of the same host memory
 *    sits too.
 *  - Any other root gets a range of its own in a numbering of the roots in use
 *    (XATTN__MEM_DEVICE, process-wide): every buffer on it, the root itself or
 *    a sub-buffer, is placed in that range, and the range is given up with
 *    the last of them (xattn__cl_buffer_unplace). The root's handle cannot be
 *    reused meanwhile: each of those buffers holds the root or a sub-buffer of
 *    it, which keeps the root alive (no reference of its own is taken, so
 *    that a wrap holds exactly one).
 * A buffer whose object cannot be asked stays identified by its handle
 * (XATTN__MEM_HANDLE), as before.
 */
typedef struct xattn_cl_root {
    cl_mem mem;
    uint64_t base, refs;
    struct xattn_cl_root *next; /* the bucket's chain */
} xattn_cl_root;

/* The roots in use: a hash table of chains, grown with the count. */
static pthread_mutex_t xattn__cl_roots_lock = PTHREAD_MUTEX_INITIALIZER;
static xattn_cl_root **xattn__cl_roots;
static size_t xattn__cl_nbuckets, xattn__cl_nroots;
static uint64_t xattn__cl_roots_next = (uint64_t)1 << 32; /* the next range's start */

static size_t xattn__cl_root_hash(cl_mem m, size_t nbuckets)
{
    const uint64_t h = ((uint64_t)(uintptr_t)m >> 4) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nbuckets - 1); /* nbuckets: a power of two */
}

/* The root's entry, or NULL; with `add`, a new entry (refs 0) for a root not
 * there, or NULL when there is no memory for it. Under the lock. */
static xattn_cl_root *xattn__cl_root_find(cl_mem root, uint64_t size, int add)
{
    if (xattn__cl_nbuckets) {
        for (xattn_cl_root *r = xattn__cl_roots[xattn__cl_root_hash(root, xattn__cl_nbuckets)]; r;
             r = r->next)
            if (r->mem == root)
                return r;
    }
    /* A new root's range: its size rounded to 4 KiB, and a 4 KiB gap. */
    const uint64_t span = ((size + 4095u) & ~(uint64_t)4095u) + 4096u;
    if (!add || size > UINT64_MAX / 4 || xattn__cl_roots_next > UINT64_MAX / 2 - span)
        return NULL;
    if (xattn__cl_nroots >= xattn__cl_nbuckets) { /* grow: twice the buckets, rehashed */
        const size_t nb = xattn__cl_nbuckets ? 2 * xattn__cl_nbuckets : 64;
        xattn_cl_root **b = calloc(nb, sizeof *b);
        if (!b)
            return NULL;
        for (size_t i = 0; i < xattn__cl_nbuckets; i++)
            while (xattn__cl_roots[i]) {
                xattn_cl_root *r = xattn__cl_roots[i];
                xattn__cl_roots[i] = r->next;
                const size_t h = xattn__cl_root_hash(r->mem, nb);
                r->next = b[h];
                b[h] = r;
            }
        free(xattn__cl_roots);
        xattn__cl_roots = b;
        xattn__cl_nbuckets = nb;
    }
    xattn_cl_root *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    const size_t h = xattn__cl_root_hash(root, xattn__cl_nbuckets);
    r->mem = root;
    r->base = xattn__cl_roots_next;
    r->refs = 0;
    r->next = xattn__cl_roots[h];
    xattn__cl_roots[h] = r;
    xattn__cl_nroots++;
    xattn__cl_roots_next += span;
    return r;
}

void xattn__cl_buffer_place(struct xattn_buffer *buf)
{
    cl_mem m = (cl_mem)buf->native, root = NULL;
    size_t origin = 0, size = 0;
    if (!m ||
        clGetMemObjectInfo(m, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof root, &root, NULL) != CL_SUCCESS)
        return;
    if (!root)
        root = m;
    else if (clGetMemObjectInfo(m, CL_MEM_OFFSET, sizeof origin, &origin, NULL) != CL_SUCCESS)
        return;
    cl_mem_flags flags = 0;
    void *host = NULL;
    if (clGetMemObjectInfo(root, CL_MEM_FLAGS, sizeof flags, &flags, NULL) == CL_SUCCESS &&
        (flags & CL_MEM_USE_HOST_PTR) &&
        clGetMemObjectInfo(root, CL_MEM_HOST_PTR, sizeof host, &host, NULL) == CL_SUCCESS && host) {
        buf->mem_space = XATTN__MEM_HOST;
        buf->mem_base = (uintptr_t)host + origin;
        return;
    }
    if (clGetMemObjectInfo(root, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS || !size)
        return;
    pthread_mutex_lock(&xattn__cl_roots_lock);
    xattn_cl_root *r = xattn__cl_root_find(root, (uint64_t)size, 1);
    if (r) { /* else (no memory for the table) the handle identifies it */
        r->refs++;
        buf->aux = root;
        buf->mem_space = XATTN__MEM_DEVICE;
        buf->mem_base = (uintptr_t)(r->base + origin);
    }
    pthread_mutex_unlock(&xattn__cl_roots_lock);
}

void xattn__cl_buffer_unplace(struct xattn_buffer *buf)
{
    const cl_mem root = (cl_mem)buf->aux;
    if (!root)
        return;
    pthread_mutex_lock(&xattn__cl_roots_lock);
    xattn_cl_root *r = xattn__cl_root_find(root, 0, 0);
    if (r && --r->refs == 0) {
        xattn_cl_root **at = &xattn__cl_roots[xattn__cl_root_hash(root, xattn__cl_nbuckets)];
        while (*at != r)
            at = &(*at)->next;
        *at = r->next;
        free(r);
        if (--xattn__cl_nroots == 0) { /* nothing placed: the numbering starts again */
            free(xattn__cl_roots);
            xattn__cl_roots = NULL;
            xattn__cl_nbuckets = 0;
            xattn__cl_roots_next = (uint64_t)1 << 32;
        }
    }
    pthread_mutex_unlock(&xattn__cl_roots_lock);
    buf->aux = NULL;
    buf->mem_space = XATTN__MEM_HANDLE;
    buf->mem_base = 0;
}

/* Frees the host memory of a CL_MEM_USE_HOST_PTR buffer once the runtime
 * has destroyed the buffer (after its last enqueued use). */
static void CL_CALLBACK xattn__cl_free_host(cl_mem m, void *host)
{
    (void)m;
    free(host);
}

/*
 * Whether `bytes` more of device memory can be had, before asking the runtime:
 * a runtime on the host (PoCL, CL_DEVICE_TYPE_CPU) takes them from the
 * process's memory, and when that memory is short it aborts (an address-space
 * limit) or the kernel ends the process once the pages are touched (a cgroup's
 * limit, MemAvailable), where the CPU backend returns OUT_OF_MEMORY: the same
 * check as the CPU backend's (xattn__host_room). Other devices: the global
 * memory less what this context holds (buffers, workspaces; `counted` of the
 * bytes asked for are already in the count), as no portable query of the free
 * memory exists. OUT_OF_MEMORY names `what`, the need and the limit.
 */
static xattn_status xattn__cl_room(const struct xattn_ctx *ctx, uint64_t bytes, uint64_t counted,
                                   const char *what)
{
    const xattn_cl_ctx *c = ctx->bctx;
    if (c->type & CL_DEVICE_TYPE_CPU)
        return xattn__host_room(bytes, what);
    uint64_t held = atomic_load(&ctx->mem_current);
    held = held > counted ? held - counted : 0;
    const uint64_t global = ctx->info.global_mem_bytes;
    if (!global || bytes <= global - (held < global ? held : global))
        return XATTN_STATUS_OK;
    return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                        "%s: %llu MiB, but the device's global memory (CL_DEVICE_GLOBAL_MEM_SIZE "
                        "= %llu MiB) less the %llu MiB this context holds leaves %llu MiB",
                        what, (unsigned long long)((bytes + (1u << 20) - 1) >> 20),
                        (unsigned long long)(global >> 20), (unsigned long long)(held >> 20),
                        (unsigned long long)((held < global ? global - held : 0) >> 20));
}

static xattn_status xattn__cl_buffer_alloc(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                           size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (c->max_alloc && bytes > c->max_alloc)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "bytes: %zu exceed the device's largest allocation "
                            "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu)",
                            bytes, (unsigned long long)c->max_alloc);
    XATTN_RETURN_IF_ERROR(xattn__cl_room(ctx, bytes, bytes, "xattn_buffer_alloc"));
    cl_int e;
    cl_mem m = NULL;
    /* CPU-class devices: from 4 MiB on, the buffer is host memory of ours,
     * 2 MiB aligned and advised for transparent huge pages (as the CPU
     * backend's), handed over with CL_MEM_USE_HOST_PTR. The runtime's own
     * allocations get 4 KiB pages, and SPLITKV decode's K/V rows (256 bytes,
     * KiBs apart in BSHD) then miss the TLB: measured in docs/backends.md.
     * Anything refused falls back to the runtime's allocation. */
    if ((c->type & CL_DEVICE_TYPE_CPU) && bytes >= ((size_t)4 << 20)) {
        void *host = xattn__aligned_alloc(bytes);
        if (host) {
            m = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host,
                               &e);
            if (e == CL_SUCCESS &&
                clSetMemObjectDestructorCallback(m, xattn__cl_free_host, host) != CL_SUCCESS) {
                clReleaseMemObject(m);
                m = NULL;
                e = CL_OUT_OF_HOST_MEMORY;
            }
            if (e != CL_SUCCESS) {
                m = NULL;
                free(host);
            }
        }
    }
    if (!m) {
        m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &e);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clCreateBuffer");
    }
    buf->native = m;
    buf->host = NULL;
    xattn__cl_buffer_place(buf);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_buffer_wrap_host(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                               void *ptr, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    cl_int e;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &e);
    if (e != CL_SUCCESS)
        return xattn__cl_fail(e, "clCreateBuffer(CL_MEM_USE_HOST_PTR)");
    buf->native = m;
    buf->host = NULL; /* reach the memory through the queue (the device may cache it) */
    return XATTN_STATUS_OK;
}

static void xattn__cl_buffer_release(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    (void)ctx;
    xattn__cl_buffer_unplace(buf);
    if (buf->native)
        clReleaseMemObject((cl_mem)buf->native);
    buf->native = NULL;
}

static xattn_status xattn__cl_buffer_write(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                           size_t offset, const void *src, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clEnqueueWriteBuffer(c->queue, (cl_mem)buf->native, CL_TRUE, offset, bytes, src,
                                        0, NULL, NULL),
                   "clEnqueueWriteBuffer");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_buffer_read(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                          size_t offset, void *dst, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clEnqueueReadBuffer(c->queue, (cl_mem)buf->native, CL_TRUE, offset, bytes, dst,
                                       0, NULL, NULL),
                   "clEnqueueReadBuffer");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_buffer_copy(struct xattn_ctx *ctx, struct xattn_buffer *dst,
                                          size_t dst_off, struct xattn_buffer *src, size_t src_off,
                                          size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    /* In order on the context's queue: the kernels enqueued after see it. */
    XATTN_CL_CHECK(clEnqueueCopyBuffer(c->queue, (cl_mem)src->native, (cl_mem)dst->native, src_off,
                                       dst_off, bytes, 0, NULL, NULL),
                   "clEnqueueCopyBuffer");
    return XATTN_STATUS_OK;
}

/* ---- attention -------------------------------------------------------------- */

/* bits 8-9: q/o dtype, bits 10-11: k/v dtype (xattn_dtype values, fp8 never) */

/* Device memory of one call, accounted while it is held. */
static xattn_status xattn__cl_scratch_new(struct xattn_ctx *ctx, xattn_cl_scratch *s,
                                          uint64_t bytes, void *init, const char *what, cl_mem *out)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (c->max_alloc && bytes > c->max_alloc)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "%s: %llu bytes exceed the device's largest allocation "
                            "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu)",
                            what, (unsigned long long)bytes, (unsigned long long)c->max_alloc);
    if (bytes > (uint64_t)SIZE_MAX)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW, "%s: %llu bytes do not fit size_t", what,
                            (unsigned long long)bytes);
    XATTN_RETURN_IF_ERROR(xattn__cl_room(ctx, bytes, 0, what));
    XATTN_RETURN_IF_ERROR(xattn__mem_acquire(ctx, bytes, what));
    cl_int e;
    cl_mem m = clCreateBuffer(c->context,
                              init ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE,
                              (size_t)bytes, init, &e);
    if (e != CL_SUCCESS) {
        xattn__mem_release(ctx, bytes);
        xattn_status st = xattn__cl_fail(e, "clCreateBuffer");
        return xattn__error(st, "%s (%s, %llu bytes)", xattn_last_error(), what,
                            (unsigned long long)bytes);
    }
    s->mem[s->n] = m;
    s->bytes[s->n] = bytes;
    s->n++;
    *out = m;
    return XATTN_STATUS_OK;
}

/* Releases the call's buffers: the runtime frees them once the enqueued
 * kernels that use them have finished. */
static void xattn__cl_scratch_free(struct xattn_ctx *ctx, xattn_cl_scratch *s)
{
    for (int i = 0; i < s->n; i++) {
        clReleaseMemObject(s->mem[i]);
        xattn__mem_release(ctx, s->bytes[i]);
    }
    s->n = 0;
}

/* Sets the XATTN_KARGS arguments (xattn_cl_common.cl) of a kernel. */
static cl_int xattn__cl_set_common(cl_kernel k, const xattn_problem *p, cl_mem meta, int count)
{
    cl_int e = CL_SUCCESS;
    cl_uint a = 0;
#define ARG_SET(size, ptr)                                                                         \
    do {                                                                                           \
        cl_int xattn__e2 = clSetKernelArg(k, a, (size), (ptr));                                    \
        if (e == CL_SUCCESS)                                                                       \
            e = xattn__e2;                                                                         \
        a++;                                                                                       \
    } while (0)
#define ARG_MEM(m)                                                                                 \
    do {                                                                                           \
        cl_mem xattn__m = (m);                                                                     \
        ARG_SET(sizeof xattn__m, &xattn__m);                                                       \
    } while (0)
#define ARG_LONG(x)                                                                                \
    do {                                                                                           \
        cl_long xattn__l = (cl_long)(x);                                                           \
        ARG_SET(sizeof xattn__l, &xattn__l);                                                       \
    } while (0)
#define ARG_INT(x)                                                                                 \
    do {                                                                                           \
        cl_int xattn__i = (cl_int)(x);                                                             \
        ARG_SET(sizeof xattn__i, &xattn__i);                                                       \
    } while (0)
#define ARG_FLOAT(x)                                                                               \
    do {                                                                                           \
        cl_float xattn__f = (cl_float)(x);                                                         \
        ARG_SET(sizeof xattn__f, &xattn__f);                                                       \
    } while (0)
#define ARG_VIEW(vw)                                                                               \
    do {                                                                                           \
        ARG_LONG((vw).off);                                                                        \
        ARG_LONG((vw).sb);                                                                         \
        ARG_LONG((vw).ss);                                                                         \
        ARG_LONG((vw).sh);                                                                         \
        ARG_LONG((vw).sd);                                                                         \
    } while (0)
    ARG_MEM((cl_mem)p->q.buf->native);
    ARG_MEM((cl_mem)p->k.buf->native);
    ARG_MEM((cl_mem)p->v.buf->native);
    ARG_MEM((cl_mem)p->o.buf->native);
    ARG_MEM(p->has_lse ? (cl_mem)p->lse.buf->native : meta);
    ARG_MEM(p->has_bias ? (cl_mem)p->bias.buf->native : meta);
    ARG_MEM(meta);
    ARG_MEM(p->has_sinks ? (cl_mem)p->sinks.buf->native : meta);
    ARG_MEM(p->has_k_scale ? (cl_mem)p->k_scale.buf->native : meta);
    ARG_MEM(p->has_v_scale ? (cl_mem)p->v_scale.buf->native : meta);
    ARG_VIEW(p->q);
    ARG_VIEW(p->k);
    ARG_VIEW(p->v);
    ARG_VIEW(p->o);
    ARG_LONG(p->has_lse ? p->lse.off : 0);
    ARG_LONG(p->has_lse ? p->lse.sb : 0);
    ARG_LONG(p->has_lse ? p->lse.sh : 0);
    ARG_LONG(p->has_lse ? p->lse.ss : 0);
    if (p->has_bias) {
        ARG_LONG(p->bias.off);
        ARG_LONG(p->bias.sb);
        ARG_LONG(p->bias.sh);
        ARG_LONG(p->bias.ss);
        ARG_LONG(p->bias.sd);
    } else {
        for (int i = 0; i < 5; i++)
            ARG_LONG(0);
    }
    ARG_LONG(p->has_sinks ? p->sinks.off : 0);
    ARG_LONG(p->has_sinks ? p->sinks.sh : 0);
    ARG_LONG(p->has_k_scale ? p->k_scale.off : 0);
    ARG_LONG(p->has_k_scale ? p->k_scale.sh : 0);
    ARG_LONG(p->has_v_scale ? p->v_scale.off : 0);
    ARG_LONG(p->has_v_scale ? p->v_scale.sh : 0);
    ARG_LONG(p->window_left);
    ARG_LONG(p->window_right);
    ARG_INT(p->B);
    ARG_INT(p->Hq);
    ARG_INT(p->group);
    ARG_INT(p->D);
    ARG_INT(p->Dv);
    ARG_INT(p->Sq);
    ARG_INT(p->Sk);
    int flags = (p->causal ? XATTN_CL_FLAG_CAUSAL : 0) |
                (p->bottom_right ? XATTN_CL_FLAG_BOTTOM_RIGHT : 0) |
                (p->varlen ? XATTN_CL_FLAG_VARLEN : 0) | (p->has_lse ? XATTN_CL_FLAG_LSE : 0) |
                (p->has_bias ? XATTN_CL_FLAG_BIAS : 0) |
                (p->has_bias && p->bias.dtype == XATTN_DTYPE_F16 ? XATTN_CL_FLAG_BIAS_F16 : 0) |
                (p->alibi ? XATTN_CL_FLAG_ALIBI : 0) | (count ? XATTN_CL_FLAG_COUNT : 0) |
                (p->has_sinks ? XATTN_CL_FLAG_SINKS : 0) |
                (p->has_k_scale ? XATTN_CL_FLAG_KSCALE : 0) |
                (p->has_v_scale ? XATTN_CL_FLAG_VSCALE : 0) | ((int)p->q.dtype << 8) |
                /* fp8 and q8_0 K/V are always build constants (XATTN_KDT): no run-time
                 * bits (dtypes past 3 do not fit the two, and would set the next flags) */
                (xattn__dtype_is_kv_only(p->k.dtype) ? 0 : (int)p->k.dtype << 10);
    ARG_INT(flags);
    ARG_FLOAT(p->scale);
    /* The score modifiers travel as one struct (xattn_sem_mods), the same
     * definition on both sides: float and int fields only. */
    ARG_SET(sizeof p->mods, &p->mods);
#undef ARG_VIEW
#undef ARG_FLOAT
#undef ARG_INT
#undef ARG_LONG
#undef ARG_MEM
#undef ARG_SET
    if (e == CL_SUCCESS && a != XATTN_CL_NUM_COMMON_ARGS)
        e = CL_INVALID_ARG_INDEX;
    return e;
}

static cl_int xattn__cl_arg_mem(cl_kernel k, cl_uint i, cl_mem m)
{
    return clSetKernelArg(k, i, sizeof(cl_mem), &m);
}

static cl_int xattn__cl_arg_int(cl_kernel k, cl_uint i, int v)
{
    cl_int x = v;
    return clSetKernelArg(k, i, sizeof x, &x);
}

/* One phase: a kernel launch, timed when asked. */
static xattn_status xattn__cl_launch(xattn_cl_ctx *c, const xattn_problem *p, cl_kernel k,
                                     cl_mem meta, int kind, size_t local, uint64_t groups,
                                     int timed, int count, xattn_cl_phase *ph)
{
    if (groups == 0)
        return XATTN_STATUS_OK; /* nothing to do (Sk = 0 for the score phase) */
    uint64_t items;
    if (xattn__mul_overflow(groups, (uint64_t)local, &items) || items > (uint64_t)SIZE_MAX)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                            "OpenCL: %s needs %llu work-groups of %zu, more work-items than "
                            "size_t counts",
                            xattn__cl_kernel_names[kind], (unsigned long long)groups, local);
    const size_t global = (size_t)items;
    cl_int e = xattn__cl_set_common(k, p, meta, count);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_BACKEND, "clSetKernelArg(%s) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], xattn__cl_err_name(e), (int)e);
    double t0 = timed && !c->profiling ? xattn__now() : 0.0;
    e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &global, &local, 0, NULL,
                               timed && c->profiling ? &ph->ev : NULL);
    if (e != CL_SUCCESS)
        return xattn__error(e == CL_OUT_OF_RESOURCES || e == CL_MEM_OBJECT_ALLOCATION_FAILURE
                                ? XATTN_STATUS_OUT_OF_MEMORY
                                : XATTN_STATUS_BACKEND,
                            "clEnqueueNDRangeKernel(%s, %zu x %llu work-items) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], local, (unsigned long long)groups,
                            xattn__cl_err_name(e), (int)e);
    if (timed && !c->profiling) {
        e = clFinish(c->queue);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clFinish");
        ph->host_ms = (xattn__now() - t0) * 1e3;
    }
    return XATTN_STATUS_OK;
}

/*
 * Executed-work counts (kernels_cl/xattn_cl_common.cl, "executed-work counts"):
 * a ulong array of the three sums, then three segments that the kernels fill
 * (scores computed, keys added into O, K/V rows loaded). The kernels write
 * them when the call is timed, which synchronizes anyway: reading the sums
 * back then costs one small read, and untimed calls stay asynchronous. The
 * array is allocated either way, so that a call's workspace (and what a memory
 * limit lets through) does not depend on whether times were asked for.
 */
/* Up to this many counts are read back and added on the host (a stack
 * buffer); more are added on the device first (xattn_count_sum). */

static xattn_status xattn__cl_counts_new(struct xattn_ctx *ctx, xattn_cl_scratch *scratch,
                                         xattn_cl_counts *cn, uint64_t n0, uint64_t n1, uint64_t n2,
                                         int poison, uint64_t *ws_bytes)
{
    uint64_t n, bytes;
    if (xattn__add_overflow(n0, n1, &n) || xattn__add_overflow(n, n2, &n) ||
        xattn__add_overflow(n, 3u, &n) || xattn__mul_overflow(n, 8u, &bytes))
        return xattn__error(
            XATTN_STATUS_SIZE_OVERFLOW,
            "OpenCL: the executed-work counts (%llu + %llu + %llu) overflow 64 bits",
            (unsigned long long)n0, (unsigned long long)n1, (unsigned long long)n2);
    XATTN_RETURN_IF_ERROR(
        xattn__cl_scratch_new(ctx, scratch, bytes, NULL, "OpenCL executed-work counts", &cn->mem));
    cn->n[0] = n0;
    cn->n[1] = n1;
    cn->n[2] = n2;
    *ws_bytes += bytes;
    if (poison) { /* a count that no kernel writes shows up as a huge sum */
        const cl_ulong all = ~(cl_ulong)0;
        xattn_cl_ctx *c = ctx->bctx;
        cl_int e = clEnqueueFillBuffer(c->queue, cn->mem, &all, sizeof all, 0, (size_t)bytes, 0,
                                       NULL, NULL);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueFillBuffer (poison counts)");
    }
    return XATTN_STATUS_OK;
}

/* Sets a kernel's (cnt, cnt_at) arguments at index a: the counts array and
 * where the kernel's part starts. */
static cl_int xattn__cl_arg_counts(cl_kernel k, cl_uint a, const xattn_cl_counts *cn, uint64_t at)
{
    cl_long off = (cl_long)at;
    cl_int e = clSetKernelArg(k, a, sizeof cn->mem, &cn->mem);
    return e != CL_SUCCESS ? e : clSetKernelArg(k, a + 1, sizeof off, &off);
}

/* The three sums of the counts (after the call's kernels, in queue order). */
static xattn_status xattn__cl_counts_sum(xattn_cl_ctx *c, xattn_cl_prog *pg,
                                         const xattn_cl_counts *cn, uint64_t sums[3])
{
    const uint64_t n = cn->n[0] + cn->n[1] + cn->n[2];
    cl_int e;
    if (n <= XATTN_CL_COUNT_HOST_MAX) {
        cl_ulong buf[XATTN_CL_COUNT_HOST_MAX];
        if (n && (e = clEnqueueReadBuffer(c->queue, cn->mem, CL_TRUE, 3 * sizeof(cl_ulong),
                                          (size_t)n * sizeof(cl_ulong), buf, 0, NULL, NULL)) !=
                     CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueReadBuffer (executed-work counts)");
        uint64_t at = 0;
        for (int seg = 0; seg < 3; seg++) {
            sums[seg] = 0;
            for (uint64_t i = 0; i < cn->n[seg]; i++)
                sums[seg] += buf[at++];
        }
        return XATTN_STATUS_OK;
    }
    cl_kernel k = pg->kernels[XATTN_CL_K_COUNT_SUM];
    const cl_long n0 = (cl_long)cn->n[0], n1 = (cl_long)cn->n[1], n2 = (cl_long)cn->n[2];
    const size_t local = (size_t)pg->tile.rwg;
    if ((e = clSetKernelArg(k, 0, sizeof cn->mem, &cn->mem)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 1, sizeof n0, &n0)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 2, sizeof n1, &n1)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 3, sizeof n2, &n2)) != CL_SUCCESS)
        return xattn__cl_fail(e, "clSetKernelArg (xattn_count_sum)");
    if ((e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &local, &local, 0, NULL, NULL)) !=
        CL_SUCCESS)
        return xattn__cl_fail(e, "clEnqueueNDRangeKernel (xattn_count_sum)");
    cl_ulong out[3];
    if ((e = clEnqueueReadBuffer(c->queue, cn->mem, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL)) !=
        CL_SUCCESS)
        return xattn__cl_fail(e, "clEnqueueReadBuffer (executed-work counts)");
    for (int seg = 0; seg < 3; seg++)
        sums[seg] = out[seg];
    return XATTN_STATUS_OK;
}

/*
 * The device operations of the algorithm driver (xattn_driver.c). A call
 * enqueues its phases on the context's queue; a timed call waits for the last
 * one and reads the phases' times from their events (or times each phase on
 * the host where the queue has no profiling), and the executed-work counts
 * its kernels wrote.
 */

/* The plan's figures that follow from a tile. */
static void xattn__cl_plan_tile(const xattn_cl_ctx *c, const xattn_problem *p,
                                const xattn_cl_tile *t, xattn__plan *plan)
{
    /* The kernel form: the tile table's device class, "-tuned" for a stored
     * winner of `xattn tune`, and the form (FLASH/SPLITKV's row form, NAIVE's
     * qk/pv tiles staged in local memory or read from global memory). */
    snprintf(plan->kernel, sizeof plan->kernel, "cl-%s%s%s", c->tile_class,
             t->tuned ? "-tuned" : "",
             p->algo != XATTN_ALGO_NAIVE ? (t->rows ? "-rows" : "")
             : t->naive_local            ? "-local"
                                         : "-global");
    if (p->algo != XATTN_ALGO_NAIVE) {
        plan->tile_q = t->bq;
        plan->tile_k = t->bk;
        plan->tile_heads = 1;
        if (t->rows > 0) {
            /* A work-item's rows: the heads of a KV head's group first, then
             * query rows (the model's tile of tile_q rows x tile_heads heads;
             * the kernels count what they ran either way). */
            const int group = p->Hkv > 0 ? (int)(p->Hq / p->Hkv) : 1;
            plan->tile_heads = t->rows < group ? t->rows : group;
            plan->tile_q = t->rows / plan->tile_heads;
        }
    }
    if (p->algo == XATTN_ALGO_SPLITKV)
        plan->splits = xattn__cl_num_splits(c, p, t);
}

/* Elements of the per-call parameters (kernels_cl/xattn_cl_common.cl,
 * XATTN_KARGS): lengths and starts, the page header, the ALiBi slopes, and a
 * paged cache's block table. */
static int64_t xattn__cl_meta_count(const xattn_problem *p)
{
    return 4 * p->B + 3 + p->Hq + (p->paged ? p->B * p->max_pages : 0);
}

static xattn_status xattn__cl_plan(const struct xattn_ctx *ctx, const xattn_problem *p,
                                   xattn__plan *plan)
{
    const xattn_cl_ctx *c = ctx->bctx;
    /* The kernels index the per-call parameters (with a paged cache's block
     * table, xattn__cl_call_buffers) with 32-bit ints. */
    if (xattn__cl_meta_count(p) > INT32_MAX)
        return xattn__error(
            XATTN_STATUS_UNSUPPORTED,
            "OpenCL: B * the longest sequence's pages = %lld*%lld block-table entries exceed "
            "the kernels' 32-bit index",
            (long long)p->B, (long long)p->max_pages);
    if (p->B * p->Hq > INT32_MAX)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "OpenCL: B*Hq = %lld exceeds the kernels' 32-bit (b, h) index",
                            (long long)(p->B * p->Hq));
    xattn_cl_tile t;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_of(c, p, &t));
    xattn__cl_plan_tile(c, p, &t, plan);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_prepare(struct xattn_ctx *ctx, const xattn_problem *p,
                                      xattn__plan *plan, int timed)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    memset(call, 0, sizeof *call);
    c->last_build_ms = 0.0;
    xattn__exec_init(&c->last_exec);
    xattn_status st = xattn__cl_program(c, p, &call->pg);
    plan->build_ms = c->last_build_ms;
    if (st != XATTN_STATUS_OK)
        return st;
    /* The program may run a smaller tile than planned (a kernel that allows
     * fewer work-items than the device's maximum, found by building). */
    xattn_cl_tile base, ran = call->pg->tile;
    xattn__cl_tile_base(c, p, &base);
    ran.tuned = base.tuned; /* a program serves every tile of its build options */
    xattn__cl_plan_tile(c, p, &ran, plan);

    call->count = timed;
    return XATTN_STATUS_OK;
}

/*
 * The call's own small buffers, made before its first kernel: after the
 * driver's regions, so that a region that does not fit (NAIVE's score matrix,
 * with its hint) is the error a user sees, not the counts sized from it.
 */
static xattn_status xattn__cl_call_buffers(struct xattn_ctx *ctx, const xattn_problem *p,
                                           xattn__plan *plan)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    /* Per-call parameters: lengths, starts, the page header, ALiBi slopes and
     * a paged cache's block table, copied at creation so that the host arrays
     * may go as soon as the call returns (the plan checked the size). */
    const size_t nmeta = (size_t)xattn__cl_meta_count(p);
    int32_t *meta_host = malloc(nmeta * sizeof(int32_t));
    if (!meta_host)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "OpenCL: per-call parameters: out of host memory");
    for (int64_t b = 0; b < p->B; b++) {
        meta_host[b] = p->len_q[b];
        meta_host[p->B + b] = p->len_k[b];
        meta_host[2 * p->B + b] = p->start_q[b];
        meta_host[3 * p->B + b] = p->start_k[b];
    }
    /* The page header: page size (0 = contiguous K/V), the table's row
     * length, and where the table starts (after the slopes). */
    const int64_t table_at = 4 * p->B + 3 + p->Hq;
    meta_host[4 * p->B] = p->paged ? (int32_t)p->page_size : 0;
    meta_host[4 * p->B + 1] = p->paged ? (int32_t)p->max_pages : 0;
    meta_host[4 * p->B + 2] = (int32_t)table_at;
    for (int64_t h = 0; h < p->Hq; h++) {
        float slope = p->alibi ? p->alibi[h] : 0.0f;
        memcpy(&meta_host[4 * p->B + 3 + h], &slope, sizeof slope);
    }
    if (p->paged)
        memcpy(&meta_host[table_at], p->block_table,
               (size_t)(p->B * p->max_pages) * sizeof(int32_t));
    xattn_status st = xattn__cl_scratch_new(ctx, &call->held, nmeta * sizeof(int32_t), meta_host,
                                            "OpenCL per-call parameters", &call->meta);
    free(meta_host);
    /* The counts array exists in every call (a call's memory does not depend
     * on whether it is timed); the kernels write it only in timed calls. */
    uint64_t seg[3];
    xattn__cl_count_segments(p, &call->pg->tile, plan->splits, seg);
    uint64_t held = 0;
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_counts_new(ctx, &call->held, &call->counts, seg[0], seg[1], seg[2],
                                  call->count && p->poison, &held);
    if (st != XATTN_STATUS_OK) {
        xattn__cl_scratch_free(ctx, &call->held);
        return st;
    }
    plan->held_bytes = nmeta * sizeof(int32_t) + held;
    return XATTN_STATUS_OK;
}

/* The driver's last step that may refuse (xattn_driver.c appends k_new/v_new
 * only after it): the call's own buffers. */
static xattn_status xattn__cl_ready(struct xattn_ctx *ctx, const xattn_problem *p,
                                    xattn__plan *plan)
{
    const xattn_cl_ctx *c = ctx->bctx;
    return c->call.meta ? XATTN_STATUS_OK : xattn__cl_call_buffers(ctx, p, plan);
}

/* A workspace region: a buffer of its own, accounted; NaN first with p->poison. */
static xattn_status xattn__cl_ws_alloc(struct xattn_ctx *ctx, const xattn_problem *p,
                                       uint64_t bytes, const char *what, int touch, void **out)
{
    (void)touch; /* device memory: nothing to fault in */
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_scratch one = {{NULL}, {0}, 0};
    cl_mem m = NULL;
    XATTN_RETURN_IF_ERROR(xattn__cl_scratch_new(ctx, &one, bytes, NULL, what, &m));
    if (p->poison) {
        const float nanv = NAN;
        cl_int e =
            clEnqueueFillBuffer(c->queue, m, &nanv, sizeof nanv, 0, (size_t)bytes, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            xattn__cl_scratch_free(ctx, &one);
            return xattn__cl_fail(e, "clEnqueueFillBuffer (poison)");
        }
    }
    *out = m;
    return XATTN_STATUS_OK;
}

static void xattn__cl_ws_free(struct xattn_ctx *ctx, void *ws, uint64_t bytes)
{
    clReleaseMemObject((cl_mem)ws);
    xattn__mem_release(ctx, bytes);
}

static xattn_status xattn__cl_phase(struct xattn_ctx *ctx, const xattn_problem *p,
                                    xattn__plan *plan, int phase, int timed)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    if (!call->meta)
        XATTN_RETURN_IF_ERROR(xattn__cl_call_buffers(ctx, p, plan));
    const xattn_cl_tile *t = &call->pg->tile;
    cl_kernel *kn = call->pg->kernels;
    const cl_mem ws0 = (cl_mem)plan->ws[0], ws1 = (cl_mem)plan->ws[1];
    const uint64_t BH = (uint64_t)(p->B * p->Hq);
    const cl_uint a = XATTN_CL_NUM_COMMON_ARGS;
    const int count = call->count;
    const xattn_cl_counts *cn = &call->counts;
    cl_int e = CL_SUCCESS;
    int kind, slot = 0;
    size_t local;
    uint64_t groups;
    switch ((xattn__phase)phase) {
    case XATTN__PH_QK: /* tiles of keys x rows x (b, h) */
        kind = XATTN_CL_K_QK;
        local = (size_t)t->nt * (size_t)t->nt;
        groups =
            (uint64_t)xattn__ceil_div(p->Sk, t->nt) * (uint64_t)xattn__ceil_div(p->Sq, t->nt) * BH;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 1, cn, 3);
        break;
    case XATTN__PH_SOFTMAX: /* rows x (b, h) */
        kind = XATTN_CL_K_SOFTMAX;
        local = (size_t)t->rwg;
        groups = (uint64_t)p->Sq * BH;
        slot = 1;
        e = xattn__cl_arg_mem(kn[kind], a, ws0);
        break;
    case XATTN__PH_PV: /* tiles of Dv columns x rows x (b, h) */
        kind = XATTN_CL_K_PV;
        local = (size_t)t->nt * (size_t)t->nt;
        /* A work-item of the global form takes eight columns (float8). */
        groups = (uint64_t)xattn__ceil_div(p->Dv, (int64_t)t->nt * (t->naive_local ? 1 : 8)) *
                 (uint64_t)xattn__ceil_div(p->Sq, t->nt) * BH;
        slot = 2;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 1, cn, 3 + cn->n[0]);
        break;
    case XATTN__PH_FLASH:
        kind = XATTN_CL_K_FLASH;
        local = t->rows ? 1 : (size_t)t->bq;
        groups = xattn__cl_flash_groups(p, t);
        e = xattn__cl_arg_counts(kn[kind], a, cn, 3);
        break;
    case XATTN__PH_PARTIAL: {
        kind = XATTN_CL_K_PARTIAL;
        local = t->rows ? 1 : (size_t)t->bq;
        groups = xattn__cl_flash_groups(p, t) * (uint64_t)plan->splits;
        const int64_t chunk = xattn__ceil_div(p->Sk > 0 ? p->Sk : 1, plan->splits);
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS &&
            (e = xattn__cl_arg_mem(kn[kind], a + 1, ws1)) == CL_SUCCESS &&
            (e = xattn__cl_arg_int(kn[kind], a + 2, (int)chunk)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 3, cn, 3);
        break;
    }
    case XATTN__PH_COMBINE:
        kind = XATTN_CL_K_COMBINE;
        local = (size_t)t->cwg;
        groups = (uint64_t)xattn__ceil_div(p->Dv, t->cwg) * (uint64_t)p->Sq * BH;
        slot = 1;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS &&
            (e = xattn__cl_arg_mem(kn[kind], a + 1, ws1)) == CL_SUCCESS)
            e = xattn__cl_arg_int(kn[kind], a + 2, plan->splits);
        break;
    default: return xattn__error(XATTN_STATUS_INTERNAL, "OpenCL: phase %d", phase);
    }
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_BACKEND, "clSetKernelArg(%s) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], xattn__cl_err_name(e), (int)e);
    return xattn__cl_launch(c, p, kn[kind], call->meta, kind, local, groups, timed, count,
                            &call->ph[slot]);
}

static xattn_status xattn__cl_finish(struct xattn_ctx *ctx, const xattn_problem *p,
                                     xattn__plan *plan, int timed, int ok, xattn__exec *exec)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    xattn_status st = XATTN_STATUS_OK;
    cl_int e;
    if (ok && (e = clFlush(c->queue)) != CL_SUCCESS)
        st = xattn__cl_fail(e, "clFlush");
    if (ok && st == XATTN_STATUS_OK && timed && c->profiling) {
        cl_event last = NULL;
        for (int i = 0; i < 3; i++)
            if (call->ph[i].ev)
                last = call->ph[i].ev;
        if (last && (e = clWaitForEvents(1, &last)) != CL_SUCCESS)
            st = xattn__cl_fail(e, "clWaitForEvents");
    }
    if (ok && st == XATTN_STATUS_OK && call->count) {
        uint64_t sums[3];
        st = xattn__cl_counts_sum(c, call->pg, &call->counts, sums);
        if (st == XATTN_STATUS_OK) {
            exec->qk_pairs = (double)sums[0];
            exec->pv_pairs = (double)sums[1];
            /* NAIVE reads K and V rows per score, not per tile: not counted */
            exec->kv_rows = p->algo == XATTN_ALGO_NAIVE ? -1.0 : (double)sums[2];
            c->last_exec = *exec;
        }
    }
    cl_ulong first = 0, lastend = 0;
    for (int i = 0; i < 3; i++) {
        xattn_cl_phase *ph = &call->ph[i];
        if (ok && st == XATTN_STATUS_OK && timed) {
            if (c->profiling && ph->ev) {
                cl_ulong t0 = 0, t1 = 0;
                if (clGetEventProfilingInfo(ph->ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                            NULL) == CL_SUCCESS &&
                    clGetEventProfilingInfo(ph->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                            NULL) == CL_SUCCESS &&
                    t1 >= t0) {
                    plan->phase_ms[i] = (double)(t1 - t0) * 1e-6;
                    if (!first || t0 < first)
                        first = t0;
                    if (t1 > lastend)
                        lastend = t1;
                }
            } else if (!c->profiling) {
                plan->phase_ms[i] = ph->host_ms;
                plan->device_ms += ph->host_ms;
            }
        }
        if (ph->ev)
            clReleaseEvent(ph->ev);
        ph->ev = NULL;
    }
    if (first && lastend > first)
        plan->device_ms = (double)(lastend - first) * 1e-6;
    /* The device's memory (OpenCL 1.2 has no query for free memory). */
    plan->device_mem_total = ctx->info.global_mem_bytes;
    xattn__cl_scratch_free(ctx, &call->held);
    return st;
}

/* ---- ceilings: FMA throughput and bandwidth micro-benchmarks ---------------- */

/* Runs `k` over `global` work-items `reps` times and returns the best time in
 * seconds, from event profiling when the queue has it, else the host clock. */
static xattn_status xattn__cl_time_kernel(xattn_cl_ctx *c, cl_kernel k, size_t global, size_t local,
                                          int reps, double *best)
{
    *best = 0;
    for (int r = 0; r < reps; r++) {
        cl_event ev = NULL;
        double t0 = xattn__now();
        cl_int e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &global, &local, 0, NULL, &ev);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueNDRangeKernel (ceilings)");
        e = clWaitForEvents(1, &ev);
        double secs = xattn__now() - t0;
        cl_ulong a = 0, b = 0;
        if (e == CL_SUCCESS && c->profiling &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) ==
                CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) ==
                CL_SUCCESS &&
            b > a)
            secs = (double)(b - a) * 1e-9;
        clReleaseEvent(ev);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clWaitForEvents (ceilings)");
        if (r == 0 || secs < *best)
            *best = secs;
    }
    return XATTN_STATUS_OK;
}

/* One shape of the FMA micro-benchmark: grows the loop until one launch takes
 * >= 20 ms (5 ms quick), so that launch overhead does not count, then the
 * best of `reps` launches in GFLOP/s. */
static xattn_status xattn__cl_fma_shape(xattn_cl_ctx *c, cl_kernel k, cl_mem sink, size_t global,
                                        size_t local, double flops_per, int quick, int reps,
                                        double *gflops)
{
    int iters = 64;
    float a = 0.999f, b = 0.001f;
    double secs = 0;
    xattn_status st = XATTN_STATUS_OK;
    *gflops = 0;
    for (;;) {
        cl_int e;
        if ((e = clSetKernelArg(k, 0, sizeof sink, &sink)) != CL_SUCCESS ||
            (e = clSetKernelArg(k, 1, sizeof iters, &iters)) != CL_SUCCESS ||
            (e = clSetKernelArg(k, 2, sizeof a, &a)) != CL_SUCCESS ||
            (e = clSetKernelArg(k, 3, sizeof b, &b)) != CL_SUCCESS)
            return xattn__cl_fail(e, "clSetKernelArg (ceilings)");
        st = xattn__cl_time_kernel(c, k, global, local, 1, &secs);
        if (st != XATTN_STATUS_OK || secs >= (quick ? 0.005 : 0.02) || iters >= (1 << 24))
            break;
        iters *= 4;
    }
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_time_kernel(c, k, global, local, reps, &secs);
    if (st == XATTN_STATUS_OK && secs > 0)
        *gflops = (double)global * (double)iters * flops_per / secs * 1e-9;
    return st;
}

static xattn_status xattn__cl_measure_ceilings(struct xattn_ctx *ctx, xattn_ceilings *out)
{
    xattn_cl_ctx *c = ctx->bctx;
    const int quick = xattn__ceilings_quick();
    cl_int e;
    const char *src = (const char *)xattn__cl_ceil_source_data[0];
    size_t len = xattn__cl_ceil_source_sizes[0];
    cl_program prog = clCreateProgramWithSource(c->context, 1, &src, &len, &e);
    if (e != CL_SUCCESS)
        return xattn__cl_fail(e, "clCreateProgramWithSource (ceilings)");
    double tb = xattn__now();
    e = clBuildProgram(prog, 1, &c->device, "-cl-fast-relaxed-math", NULL, NULL);
    xattn__log(XATTN_LOG_INFO, "OpenCL: ceilings program built in %.1f ms",
               (xattn__now() - tb) * 1e3);
    if (e != CL_SUCCESS) {
        xattn_status st = xattn__cl_fail(e, "clBuildProgram (ceilings)");
        clReleaseProgram(prog);
        return st;
    }
    cl_kernel kf = clCreateKernel(prog, "xattn_ceil_fma", &e);
    cl_kernel kf8 = e == CL_SUCCESS ? clCreateKernel(prog, "xattn_ceil_fma8", &e) : NULL;
    cl_kernel kr = e == CL_SUCCESS ? clCreateKernel(prog, "xattn_ceil_read", &e) : NULL;
    cl_kernel kc = e == CL_SUCCESS ? clCreateKernel(prog, "xattn_ceil_copy", &e) : NULL;
    xattn_status st = e == CL_SUCCESS ? XATTN_STATUS_OK : xattn__cl_fail(e, "clCreateKernel");

    /* Enough work-items to fill every compute unit several times over. */
    size_t wg = c->max_wg < 256 ? c->max_wg : 256;
    size_t global = (size_t)(c->compute_units ? c->compute_units : 1) * wg * 8;
    /* Bandwidth arrays well beyond any cache: 256 MiB (32 MiB quick), within
     * the device's largest allocation. */
    uint64_t bytes = quick ? (32u << 20) : (256u << 20);
    while (bytes > c->max_alloc / 2 && bytes > (1u << 20))
        bytes /= 2;
    xattn_cl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    cl_mem bin = NULL, bout = NULL, bsink = NULL;
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, bytes, NULL, "ceilings input", &bin);
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, bytes, NULL, "ceilings output", &bout);
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, (uint64_t)global * 4u, NULL, "ceilings sink",
                                   &bsink);
    if (st == XATTN_STATUS_OK) {
        const float zero = 0.0f;
        e = clEnqueueFillBuffer(c->queue, bin, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clEnqueueFillBuffer(c->queue, bout, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clFinish(c->queue);
        if (e != CL_SUCCESS)
            st = xattn__cl_fail(e, "clEnqueueFillBuffer (ceilings)");
    }
    int reps = quick ? 2 : 5;
    /* The FMA ceiling must bound what the attention kernels reach, so it is
     * the best of a few shapes (the GPU's: float4 chains over large
     * work-groups; the CPU row form's: float8 chains, one or a few work-items
     * a group) and of a few rounds over them, each the best of its launches:
     * on a shared machine one round may meet a busy minute. */
    static const struct {
        int fma8;         /* 0: xattn_ceil_fma, 1: xattn_ceil_fma8 */
        size_t local;     /* 0: wg */
        double flops_per; /* a work-item's FLOPs an iteration */
    } shapes[] = {{0, 0, 64.0}, {1, 1, 192.0}, {1, 8, 192.0}};
    const int rounds = quick ? 1 : 3;
    for (int r = 0; r < rounds && st == XATTN_STATUS_OK; r++)
        for (size_t v = 0; v < sizeof shapes / sizeof shapes[0] && st == XATTN_STATUS_OK; v++) {
            size_t local = shapes[v].local ? shapes[v].local : wg;
            if (local > c->max_wg)
                continue;
            double gf = 0;
            st = xattn__cl_fma_shape(c, shapes[v].fma8 ? kf8 : kf, bsink, global, local,
                                     shapes[v].flops_per, quick, quick ? reps : 3, &gf);
            xattn__log(XATTN_LOG_INFO,
                       "OpenCL: FMA ceiling, %s, %zu work-items a group: %.1f "
                       "GFLOP/s",
                       shapes[v].fma8 ? "float8 x 12 chains" : "float4 x 8 chains", local, gf);
            if (st == XATTN_STATUS_OK && gf > out->fma_f32_gflops)
                out->fma_f32_gflops = gf;
        }
    if (st == XATTN_STATUS_OK) {
        cl_ulong n4 = bytes / 16u;
        cl_int per_item = (c->type & CL_DEVICE_TYPE_CPU) ? 1 : 0;
        double secs = 0;
        if ((e = clSetKernelArg(kr, 0, sizeof bin, &bin)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 1, sizeof bsink, &bsink)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 2, sizeof n4, &n4)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 0, sizeof bin, &bin)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 1, sizeof bout, &bout)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 2, sizeof n4, &n4)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 3, sizeof per_item, &per_item)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 3, sizeof per_item, &per_item)) != CL_SUCCESS)
            st = xattn__cl_fail(e, "clSetKernelArg (ceilings)");
        if (st == XATTN_STATUS_OK)
            st = xattn__cl_time_kernel(c, kr, global, wg, reps, &secs);
        if (st == XATTN_STATUS_OK && secs > 0)
            out->read_gbps = (double)bytes / secs * 1e-9;
        if (st == XATTN_STATUS_OK)
            st = xattn__cl_time_kernel(c, kc, global, wg, reps, &secs);
        if (st == XATTN_STATUS_OK && secs > 0)
            out->copy_gbps = 2.0 * (double)bytes / secs * 1e-9;
    }
    /* No 16-bit arithmetic is assumed: the kernels compute in f32 on OpenCL. */
    out->fma_f16_gflops = 0;
    out->fma_bf16_gflops = 0;
    xattn__cl_scratch_free(ctx, &scratch);
    if (kf)
        clReleaseKernel(kf);
    if (kf8)
        clReleaseKernel(kf8);
    if (kr)
        clReleaseKernel(kr);
    if (kc)
        clReleaseKernel(kc);
    clReleaseProgram(prog);
    return st;
}

const xattn_backend_iface xattn__backend_opencl = {
    .id = XATTN_BACKEND_OPENCL,
    .name = "opencl",
    .probe = xattn__cl_probe,
    .device_count = xattn__cl_device_count,
    .device_info = xattn__cl_device_info,
    .ctx_create = xattn__cl_ctx_create,
    .ctx_destroy = xattn__cl_ctx_destroy,
    .sync = xattn__cl_sync,
    .set_option = NULL,
    .buffer_alloc = xattn__cl_buffer_alloc,
    .buffer_wrap_host = xattn__cl_buffer_wrap_host,
    .buffer_release = xattn__cl_buffer_release,
    .buffer_write = xattn__cl_buffer_write,
    .buffer_read = xattn__cl_buffer_read,
    .buffer_copy = xattn__cl_buffer_copy,
    .plan = xattn__cl_plan,
    .prepare = xattn__cl_prepare,
    .ws_alloc = xattn__cl_ws_alloc,
    .ws_free = xattn__cl_ws_free,
    .ready = xattn__cl_ready,
    .phase = xattn__cl_phase,
    .finish = xattn__cl_finish,
    .measure_ceilings = xattn__cl_measure_ceilings,
};
