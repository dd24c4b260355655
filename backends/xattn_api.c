/*
 * The public entry points: version, contexts, options, buffers, tensor views,
 * the descriptor, and the attention call (validate -> resolve -> choose the
 * algorithm -> the algorithm driver, xattn_driver.c, which runs the backend's
 * device operations).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_internal.h"

#define XATTN__STR2(x) #x
#define XATTN__STR(x) XATTN__STR2(x)

unsigned xattn_version_number(void)
{
    return XATTN_VERSION_NUMBER;
}

const char *xattn_version_string(void)
{
    return XATTN__STR(XATTN_VERSION_MAJOR) "." XATTN__STR(XATTN_VERSION_MINOR) "." XATTN__STR(
        XATTN_VERSION_PATCH);
}

/* ---- names ------------------------------------------------------------- */

const char *xattn_algo_name(xattn_algo algo)
{
    switch (algo) {
    case XATTN_ALGO_AUTO: return "auto";
    case XATTN_ALGO_NAIVE: return "naive";
    case XATTN_ALGO_FLASH: return "flash";
    case XATTN_ALGO_SPLITKV: return "splitkv";
    default: return "?";
    }
}

xattn_status xattn_algo_from_name(const char *name, xattn_algo *out)
{
    xattn__clear_error();
    if (!name || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "name/out: NULL pointer");
    for (int i = 0; i < XATTN_ALGO_COUNT; i++) {
        if (!strcmp(name, xattn_algo_name((xattn_algo)i))) {
            *out = (xattn_algo)i;
            return XATTN_STATUS_OK;
        }
    }
    return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                        "algorithm name '%s' is not one of auto, naive, flash, splitkv", name);
}

/* ---- contexts ----------------------------------------------------------- */

xattn_status xattn__ctx_alloc(const xattn_backend_iface *be, int device, struct xattn_ctx **out)
{
    struct xattn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "allocating a context failed");
    if (pthread_mutex_init(&ctx->buf_lock, NULL) != 0) {
        free(ctx);
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "creating a context's lock failed");
    }
    ctx->be = be;
    ctx->device = device;
    atomic_init(&ctx->mem_current, 0);
    atomic_init(&ctx->mem_peak, 0);
    atomic_init(&ctx->alloc_count, 0);
    atomic_init(&ctx->busy, 0);
    xattn__profiler_init(ctx);
    ctx->info.struct_size = sizeof ctx->info;
    ctx->info.backend = be->id;
    ctx->info.index = device;
    *out = ctx;
    return XATTN_STATUS_OK;
}

void xattn__ctx_free_shell(struct xattn_ctx *ctx)
{
    if (!ctx)
        return;
    xattn__profiler_free(ctx);
    pthread_mutex_destroy(&ctx->buf_lock);
    free(ctx);
}

/* AUTO: CUDA, then an OpenCL GPU, then the CPU. */
static xattn_status xattn__pick_backend(xattn_backend *backend, int *device)
{
    static const xattn_backend order[] = {XATTN_BACKEND_CUDA, XATTN_BACKEND_OPENCL};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (xattn__backend_require(order[i]) != XATTN_STATUS_OK)
            continue;
        const xattn_backend_iface *be = xattn__backend_get(order[i]);
        int n = be->device_count();
        for (int dev = 0; dev < n; dev++) {
            xattn_device_info info;
            memset(&info, 0, sizeof info);
            if (be->device_info(dev, &info) == XATTN_STATUS_OK &&
                (order[i] == XATTN_BACKEND_CUDA || info.device_type == XATTN_DEVICE_TYPE_GPU)) {
                *backend = order[i];
                *device = dev;
                return XATTN_STATUS_OK;
            }
        }
    }
    *backend = XATTN_BACKEND_CPU;
    *device = 0;
    return XATTN_STATUS_OK;
}

xattn_status xattn_ctx_create(xattn_backend backend, int device, xattn_ctx **out)
{
    xattn__clear_error();
    if (!out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "out: NULL pointer");
    *out = NULL;
    if (backend == XATTN_BACKEND_AUTO)
        XATTN_RETURN_IF_ERROR(xattn__pick_backend(&backend, &device));
    XATTN_RETURN_IF_ERROR(xattn__backend_require(backend));
    const xattn_backend_iface *be = xattn__backend_get(backend);
    int n = be->device_count();
    if (device < 0 || device >= n)
        return xattn__error(XATTN_STATUS_DEVICE_NOT_FOUND,
                            "device: index %d out of range (the %s backend has %d device%s)",
                            device, be->name, n, n == 1 ? "" : "s");
    struct xattn_ctx *ctx = NULL;
    XATTN_RETURN_IF_ERROR(xattn__ctx_alloc(be, device, &ctx));
    xattn_status st = be->device_info(device, &ctx->info);
    if (st == XATTN_STATUS_OK)
        st = be->ctx_create(ctx);
    if (st != XATTN_STATUS_OK) {
        xattn__ctx_free_shell(ctx);
        return st;
    }
    ctx->info.struct_size = sizeof ctx->info;
    ctx->info.backend = backend;
    ctx->info.index = device;
    /* The device's measured ceilings, if the on-disk cache has them (records
     * then carry % of ceiling); the only file access a context makes itself. */
    xattn__ceilings_load(ctx);
    *out = ctx;
    xattn__log(XATTN_LOG_INFO, "context created on %s device %d: %s", be->name, device,
               ctx->info.name);
    return XATTN_STATUS_OK;
}

/* Releases a buffer's memory and unlists it; the object stays (the caller
 * frees it, or marks it dead). Called with ctx->buf_lock not held. */
static void xattn__buffer_release_memory(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    ctx->be->buffer_release(ctx, buf);
    if (buf->owned)
        xattn__mem_release(ctx, buf->size);
}

static void xattn__buffer_unlink(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    pthread_mutex_lock(&ctx->buf_lock);
    if (buf->prev)
        buf->prev->next = buf->next;
    else if (ctx->buf_head == buf)
        ctx->buf_head = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
    buf->prev = buf->next = NULL;
    pthread_mutex_unlock(&ctx->buf_lock);
}

/*
 * Buffers still live when their context goes are freed with it: the work on
 * the queue is waited for, each buffer's memory is released (caller memory
 * that was only wrapped is left alone), and each handle becomes dead: it
 * stays valid for xattn_buffer_free, which then frees just the handle, and
 * every other call given it returns an error instead of touching freed
 * memory (include/xattn.h).
 */
void xattn_ctx_destroy(xattn_ctx *ctx)
{
    if (!ctx)
        return;
    size_t live = 0;
    if (ctx->buf_head) {
        if (ctx->be->sync(ctx) != XATTN_STATUS_OK) /* the buffers may be in use on the queue */
            xattn__clear_error();
        for (;;) {
            pthread_mutex_lock(&ctx->buf_lock);
            struct xattn_buffer *b = ctx->buf_head;
            pthread_mutex_unlock(&ctx->buf_lock);
            if (!b)
                break;
            xattn__buffer_unlink(ctx, b);
            xattn__buffer_release_memory(ctx, b);
            b->ctx = NULL;
            b->host = b->native = b->aux = NULL;
            b->size = 0;
            live++;
        }
        xattn__log(XATTN_LOG_WARN,
                   "context destroyed with %zu buffer%s not freed: %s memory was freed with "
                   "the context; give each handle to xattn_buffer_free to free the handle",
                   live, live == 1 ? "" : "s", live == 1 ? "its" : "their");
    }
    ctx->be->ctx_destroy(ctx);
    uint64_t left = atomic_load(&ctx->mem_current);
    if (left)
        xattn__log(XATTN_LOG_WARN,
                   "context destroyed with %llu bytes still counted by its "
                   "allocator (an internal accounting error)",
                   (unsigned long long)left);
    xattn__ctx_free_shell(ctx);
}

xattn_status xattn_ctx_sync(xattn_ctx *ctx)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn_status st = ctx->be->sync(ctx);
    xattn__ctx_leave(ctx);
    return st;
}

xattn_backend xattn_ctx_backend(const xattn_ctx *ctx)
{
    return ctx ? ctx->be->id : XATTN_BACKEND_AUTO;
}

xattn_status xattn_ctx_device_info_sized(const xattn_ctx *ctx, xattn_device_info *info,
                                         size_t info_size)
{
    xattn__clear_error();
    if (!ctx || !info)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "info" : "ctx");
    return xattn__struct_out(info, info_size, &ctx->info, sizeof ctx->info, "info");
}

xattn_status(xattn_ctx_device_info)(const xattn_ctx *ctx, xattn_device_info *info)
{
    return xattn_ctx_device_info_sized(ctx, info, XATTN__V1_DEVICE_INFO_SIZE);
}

xattn_status xattn_ctx_set_option(xattn_ctx *ctx, xattn_option option, int64_t value)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    switch (option) {
    case XATTN_OPT_NUM_THREADS:
        if (value < 0 || value > 4096)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_OPT_NUM_THREADS: %lld out of range (0 = all, or 1..4096)",
                                (long long)value);
        break;
    case XATTN_OPT_MEMORY_LIMIT:
        if (value < 0)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_OPT_MEMORY_LIMIT: %lld is negative (0 = no limit)",
                                (long long)value);
        break;
    case XATTN_OPT_CPU_SIMD:
        if (value < 0 || value > 3)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_OPT_CPU_SIMD: %lld, expected 0 (best), 1 (portable), 2 "
                                "(avx2) or 3 (avx512)",
                                (long long)value);
        break;
    case XATTN_OPT_POISON:
        if (value != 0 && value != 1)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_OPT_POISON: %lld, expected 0 or 1", (long long)value);
        break;
    default:
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "option: %d is not an option",
                            (int)option);
    }
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn_status st = XATTN_STATUS_OK;
    if (ctx->be->set_option)
        st = ctx->be->set_option(ctx, option, value);
    if (st == XATTN_STATUS_OK) {
        switch (option) {
        case XATTN_OPT_NUM_THREADS: ctx->opt_num_threads = value; break;
        case XATTN_OPT_MEMORY_LIMIT: ctx->mem_limit = (uint64_t)value; break;
        case XATTN_OPT_CPU_SIMD: ctx->opt_cpu_simd = value; break;
        case XATTN_OPT_POISON: ctx->opt_poison = value; break;
        }
    }
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_ctx_get_option(const xattn_ctx *ctx, xattn_option option, int64_t *value)
{
    xattn__clear_error();
    if (!ctx || !value)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "value" : "ctx");
    switch (option) {
    case XATTN_OPT_NUM_THREADS: *value = ctx->opt_num_threads; break;
    case XATTN_OPT_MEMORY_LIMIT: *value = (int64_t)ctx->mem_limit; break;
    case XATTN_OPT_CPU_SIMD: *value = ctx->opt_cpu_simd; break;
    case XATTN_OPT_POISON: *value = ctx->opt_poison; break;
    default:
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "option: %d is not an option",
                            (int)option);
    }
    return XATTN_STATUS_OK;
}

xattn_status xattn_ctx_mem_stats(const xattn_ctx *ctx, xattn_mem_stats *stats)
{
    xattn__clear_error();
    if (!ctx || !stats)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "stats" : "ctx");
    stats->current_bytes = atomic_load(&ctx->mem_current);
    stats->peak_bytes = atomic_load(&ctx->mem_peak);
    stats->alloc_count = atomic_load(&ctx->alloc_count);
    stats->limit_bytes = ctx->mem_limit;
    return XATTN_STATUS_OK;
}

xattn_status xattn_ctx_device_memory(const xattn_ctx *ctx, uint64_t *total, uint64_t *available)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    uint64_t t = 0, a = 0;
    xattn_status st = XATTN_STATUS_OK;
    if (ctx->be->device_memory) {
        /* The busy flag only: the backend may use the context's queue or device. */
        struct xattn_ctx *c = (struct xattn_ctx *)ctx;
        XATTN_RETURN_IF_ERROR(xattn__ctx_enter(c));
        st = ctx->be->device_memory(c, &t, &a);
        xattn__ctx_leave(c);
    } else if (ctx->info.device_type == XATTN_DEVICE_TYPE_CPU) {
        xattn__host_memory(&t, &a);
    } else {
        t = a = ctx->info.global_mem_bytes;
    }
    if (st == XATTN_STATUS_OK) {
        if (total)
            *total = t;
        if (available)
            *available = a;
    }
    return st;
}

xattn_status xattn_ctx_reset_peak(xattn_ctx *ctx)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    atomic_store(&ctx->mem_peak, atomic_load(&ctx->mem_current));
    return XATTN_STATUS_OK;
}

/* ---- buffers ------------------------------------------------------------ */

xattn_status xattn__buffer_new(struct xattn_ctx *ctx, size_t size, int owned,
                               struct xattn_buffer **out)
{
    struct xattn_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "allocating a buffer object failed");
    b->ctx = ctx;
    b->size = size;
    b->owned = owned;
    b->mem_space = XATTN__MEM_HANDLE;
    pthread_mutex_lock(&ctx->buf_lock);
    b->next = ctx->buf_head;
    if (b->next)
        b->next->prev = b;
    ctx->buf_head = b;
    pthread_mutex_unlock(&ctx->buf_lock);
    *out = b;
    return XATTN_STATUS_OK;
}

void xattn__buffer_discard(struct xattn_buffer *buf)
{
    if (!buf)
        return;
    xattn__buffer_unlink(buf->ctx, buf);
    free(buf);
}

xattn_status xattn_buffer_alloc(xattn_ctx *ctx, size_t bytes, xattn_buffer **out)
{
    xattn__clear_error();
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "out" : "ctx");
    *out = NULL;
    if (bytes == 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "bytes: 0 (a buffer needs a size)");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    struct xattn_buffer *b = NULL;
    xattn_status st = xattn__mem_acquire(ctx, bytes, "xattn_buffer_alloc");
    if (st == XATTN_STATUS_OK) {
        st = xattn__buffer_new(ctx, bytes, 1, &b);
        if (st == XATTN_STATUS_OK)
            st = ctx->be->buffer_alloc(ctx, b, bytes);
        if (st == XATTN_STATUS_OK) {
            /* Host-visible memory has an address; device memory of the CUDA
             * backend lives in its unified address space; an OpenCL buffer is
             * known only by its cl_mem. */
            if (b->host) {
                b->mem_space = XATTN__MEM_HOST;
                b->mem_base = (uintptr_t)b->host;
            } else if (ctx->be->id == XATTN_BACKEND_CUDA) {
                b->mem_space = XATTN__MEM_DEVICE;
                b->mem_base = (uintptr_t)b->native;
            }
        } else {
            xattn__buffer_discard(b);
            b = NULL;
            xattn__mem_release(ctx, bytes);
        }
    }
    xattn__ctx_leave(ctx);
    *out = b;
    return st;
}

xattn_status xattn_buffer_wrap_host(xattn_ctx *ctx, void *ptr, size_t bytes, xattn_buffer **out)
{
    xattn__clear_error();
    if (!ctx || !out || !ptr)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL",
                            !ctx   ? "ctx"
                            : !out ? "out"
                                   : "ptr");
    *out = NULL;
    if (bytes == 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "bytes: 0 (a buffer needs a size)");
    if (!ctx->be->buffer_wrap_host)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "xattn_buffer_wrap_host: the %s backend cannot wrap host memory",
                            ctx->be->name);
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    struct xattn_buffer *b = NULL;
    xattn_status st = xattn__buffer_new(ctx, bytes, 0, &b);
    if (st == XATTN_STATUS_OK) {
        st = ctx->be->buffer_wrap_host(ctx, b, ptr, bytes);
        if (st == XATTN_STATUS_OK) {
            b->mem_space = XATTN__MEM_HOST;
            b->mem_base = (uintptr_t)ptr;
        } else {
            xattn__buffer_discard(b);
            b = NULL;
        }
    }
    xattn__ctx_leave(ctx);
    *out = b;
    return st;
}

void xattn_buffer_free(xattn_buffer *buf)
{
    if (!buf)
        return;
    struct xattn_ctx *ctx = buf->ctx;
    if (ctx) { /* NULL: a dead handle, whose memory went with its context */
        xattn__buffer_unlink(ctx, buf);
        xattn__buffer_release_memory(ctx, buf);
    }
    free(buf);
}

static xattn_status xattn__check_range(const xattn_buffer *buf, size_t offset, size_t bytes,
                                       const void *ptr, const char *what)
{
    if (!buf)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "buf: NULL");
    if (!buf->ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "buf: its context was destroyed, which freed its memory (only "
                            "xattn_buffer_free may be given it now)");
    if (!ptr && bytes)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", what);
    if (offset > buf->size || bytes > buf->size - offset)
        return xattn__error(XATTN_STATUS_OUT_OF_BOUNDS,
                            "offset/bytes: [%zu, %zu + %zu) exceeds the buffer's %zu bytes", offset,
                            offset, bytes, buf->size);
    return XATTN_STATUS_OK;
}

xattn_status xattn_buffer_write(xattn_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    xattn__clear_error();
    XATTN_RETURN_IF_ERROR(xattn__check_range(buf, offset, bytes, src, "src"));
    if (!bytes)
        return XATTN_STATUS_OK;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(buf->ctx));
    xattn_status st = buf->ctx->be->buffer_write(buf->ctx, buf, offset, src, bytes);
    xattn__ctx_leave(buf->ctx);
    return st;
}

xattn_status xattn_buffer_read(xattn_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    xattn__clear_error();
    XATTN_RETURN_IF_ERROR(xattn__check_range(buf, offset, bytes, dst, "dst"));
    if (!bytes)
        return XATTN_STATUS_OK;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(buf->ctx));
    xattn_status st = buf->ctx->be->buffer_read(buf->ctx, buf, offset, dst, bytes);
    xattn__ctx_leave(buf->ctx);
    return st;
}

size_t xattn_buffer_size(const xattn_buffer *buf)
{
    return buf ? buf->size : 0;
}

/* ---- tensors and the descriptor ----------------------------------------- */

xattn_tensor xattn_tensor_bshd(xattn_buffer *buf, size_t offset, xattn_dtype dtype, int64_t b,
                               int64_t s, int64_t h, int64_t d)
{
    /* Unsigned products: absurd extents wrap instead of being undefined, and
     * the validator then refuses the view (SIZE_OVERFLOW or OUT_OF_BOUNDS). */
    uint64_t hd = (uint64_t)h * (uint64_t)d, shd = (uint64_t)s * hd;
    xattn_tensor t = {buf, offset, dtype, {b, s, h, d}, {(int64_t)shd, (int64_t)hd, d, 1}};
    return t;
}

xattn_tensor xattn_tensor_bhsd(xattn_buffer *buf, size_t offset, xattn_dtype dtype, int64_t b,
                               int64_t s, int64_t h, int64_t d)
{
    uint64_t sd = (uint64_t)s * (uint64_t)d, hsd = (uint64_t)h * sd;
    xattn_tensor t = {buf, offset, dtype, {b, s, h, d}, {(int64_t)hsd, d, (int64_t)sd, 1}};
    return t;
}

static void xattn__desc_defaults(xattn_attn_desc *d)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->align = XATTN_ALIGN_BOTTOM_RIGHT;
    d->window_left = -1;
    d->window_right = -1;
    d->algo = XATTN_ALGO_AUTO;
}

void xattn_attn_desc_init_sized(xattn_attn_desc *d, size_t desc_size)
{
    if (!d || desc_size < sizeof(size_t))
        return;
    xattn_attn_desc full;
    xattn__desc_defaults(&full);
    /* A descriptor smaller than the smallest one still gets its bytes; the
     * call then refuses it by its struct_size. */
    (void)xattn__struct_out(d, desc_size, &full, sizeof full, "desc");
}

void(xattn_attn_desc_init)(xattn_attn_desc *d)
{
    xattn_attn_desc_init_sized(d, XATTN__V1_DESC_SIZE);
}

xattn_status xattn__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size,
                               const char *what)
{
    if (dst_size < sizeof(size_t))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s: struct size %zu is smaller than its struct_size field", what,
                            dst_size);
    const size_t n = dst_size < src_size ? dst_size : src_size;
    memcpy(dst, src, n);
    if (dst_size > n)
        memset((unsigned char *)dst + n, 0, dst_size - n);
    memcpy(dst, &n, sizeof n); /* struct_size: the bytes this library filled */
    return XATTN_STATUS_OK;
}

xattn_status xattn__desc_in(const xattn_attn_desc *d, xattn_attn_desc *full)
{
    xattn__desc_defaults(full);
    if (!d)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "desc: NULL");
    const size_t n = d->struct_size;
    if (n < XATTN__DESC_MIN_SIZE)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "desc.struct_size: %zu, below the smallest descriptor (%zu bytes: "
                            "struct_size and q, k, v, o); initialize the descriptor with "
                            "xattn_attn_desc_init",
                            n, (size_t)XATTN__DESC_MIN_SIZE);
    if (n > sizeof *full) {
        /* A newer caller's fields past ours: only their defaults (zero) are
         * understood. A struct_size far past ours is a garbage descriptor. */
        if (n > 64 * sizeof *full)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "desc.struct_size: %zu, far larger than this library's "
                                "descriptor (%zu bytes); initialize it with xattn_attn_desc_init",
                                n, sizeof *full);
        const unsigned char *extra = (const unsigned char *)d + sizeof *full;
        for (size_t i = 0; i < n - sizeof *full; i++)
            if (extra[i])
                return xattn__error(XATTN_STATUS_UNSUPPORTED,
                                    "desc: byte %zu of a %zu-byte descriptor is set, past the %zu "
                                    "bytes this library version knows (a field from a newer "
                                    "xattn.h); use a newer library or leave it at its default",
                                    sizeof *full + i, n, sizeof *full);
    }
    memcpy(full, d, n < sizeof *full ? n : sizeof *full);
    full->struct_size = sizeof *full;
    return XATTN_STATUS_OK;
}

/* AUTO: split-KV for decode-like shapes (few query rows, a long KV), where
 * FLASH would leave most of the device idle; FLASH otherwise. NAIVE is never
 * chosen automatically: it only wins on memory-rich tiny shapes and its
 * O(Sq*Sk) workspace is the risk AUTO exists to avoid. */
static xattn_algo xattn__choose_algo(const xattn_desc_summary *s, char *reason, size_t n)
{
    if (s->Sq <= 8 && s->Sk >= 512) {
        snprintf(reason, n,
                 "splitkv: decode shape (Sq %lld <= 8, Sk %lld >= 512): splitting the KV "
                 "length gives every core work",
                 (long long)s->Sq, (long long)s->Sk);
        return XATTN_ALGO_SPLITKV;
    }
    snprintf(reason, n, "flash: Sq %lld, Sk %lld: O(Sq) memory and masked tiles skipped",
             (long long)s->Sq, (long long)s->Sk);
    return XATTN_ALGO_FLASH;
}

/* The algorithm a call runs: the caller's, or AUTO's choice, with the reason. */
static xattn_algo xattn__resolve_algo(const xattn_attn_desc *d, const xattn_desc_summary *sum,
                                      char *reason, size_t n)
{
    if (d->algo == XATTN_ALGO_AUTO)
        return xattn__choose_algo(sum, reason, n);
    snprintf(reason, n, "%s: asked for by the caller", xattn_algo_name(d->algo));
    return d->algo;
}

/*
 * The same checks as a run, with no work: the descriptor's rules, then the
 * backend's plan and the driver's size checks for the algorithm the run would
 * choose (xattn__plan_make), so that a check and a run of one descriptor
 * return the same status and message.
 */
xattn_status xattn_attention_check(const xattn_ctx *ctx, const xattn_attn_desc *caller_desc)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    xattn_attn_desc full;
    XATTN_RETURN_IF_ERROR(xattn__desc_in(caller_desc, &full));
    const xattn_attn_desc *d = &full;
    xattn_desc_summary sum;
    XATTN_RETURN_IF_ERROR(xattn__validate(ctx, d, &sum));
    if (sum.rows_total == 0)
        return XATTN_STATUS_OK;
    char reason[160];
    /* The per-sequence arrays go through the context's allocator (counted,
     * and limited, as a run's are); the cast touches only its counters. */
    struct xattn_ctx *c = (struct xattn_ctx *)ctx;
    xattn_problem p;
    int32_t *arrays = NULL;
    xattn_status st = xattn__problem_build(c, d, &sum, &p, &arrays);
    if (st == XATTN_STATUS_OK) {
        p.algo = xattn__resolve_algo(d, &sum, reason, sizeof reason);
        xattn__plan plan;
        st = xattn__plan_make(ctx, &p, &plan);
        xattn__problem_free(c, &sum, arrays);
    }
    return st;
}

/*
 * With profiling on, every successful call leaves a record (xattn_profiler.c).
 * Its host times come from xattn__now(): t_submit when the call is entered,
 * t_done when the backend's (then synchronized) call has returned; the
 * backend's device_ms is laid on the host timeline as ending at t_done. While
 * profiling, calls are timed even when `info` is NULL, so that records always
 * carry device times (backends with asynchronous queues then wait for each call).
 */
static xattn_status xattn__attention(xattn_ctx *ctx, const xattn_attn_desc *caller_desc,
                                     xattn_run_info *ri, int timed_by_caller)
{
    /* The clock is read before anything else; whether profiling is on is read
     * only once the context is ours (another thread may be switching it). */
    const double t_submit = xattn__now();
    memset(ri, 0, sizeof *ri);
    ri->struct_size = sizeof *ri;

    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    xattn_attn_desc full;
    XATTN_RETURN_IF_ERROR(xattn__desc_in(caller_desc, &full));
    const xattn_attn_desc *d = &full;
    xattn_desc_summary sum;
    XATTN_RETURN_IF_ERROR(xattn__validate(ctx, d, &sum));
    ri->algo_requested = d->algo;
    const xattn_algo algo = xattn__resolve_algo(d, &sum, ri->reason, sizeof ri->reason);
    ri->algo_chosen = algo;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    const int prof = ctx->prof.on;
    if (sum.rows_total == 0 && sum.s_new == 0) {
        /* Sq = 0 or no query tokens: a valid no-op (recorded, with no work). */
        if (prof)
            xattn__profiler_on_call(ctx, d, &sum, NULL, ri, NULL, t_submit, xattn__now(),
                                    atomic_load(&ctx->mem_current));
        xattn__ctx_leave(ctx);
        return XATTN_STATUS_OK;
    }

    const uint64_t mem_before = prof ? atomic_load(&ctx->mem_current) : 0;
    xattn_problem p;
    int32_t *arrays = NULL;
    xattn_status st = xattn__problem_build(ctx, d, &sum, &p, &arrays);
    if (st == XATTN_STATUS_OK) {
        p.algo = algo;
        xattn__exec exec;
        xattn__exec_init(&exec);
        st = xattn__drive(ctx, &p, ri, timed_by_caller || prof, &exec);
        xattn_record *rec = NULL;
        if (prof && st == XATTN_STATUS_OK)
            rec = xattn__profiler_on_call(ctx, d, &sum, &p, ri, &exec, t_submit, xattn__now(),
                                          mem_before);
        xattn__problem_free(ctx, &sum, arrays);
        if (rec) /* the context's bytes once the call has given back what it took */
            rec->mem_current_bytes = atomic_load(&ctx->mem_current);
    }
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_attention_sized(xattn_ctx *ctx, const xattn_attn_desc *d, xattn_run_info *info,
                                   size_t info_size)
{
    xattn__clear_error();
    if (info && info_size < sizeof(size_t))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "info: struct size %zu is smaller than its struct_size field",
                            info_size);
    xattn_run_info ri;
    xattn_status st = xattn__attention(ctx, d, &ri, info != NULL);
    /* The caller's info is written whatever the status, as it always was
     * (the algorithm and reason are known before a late failure). */
    if (info)
        (void)xattn__struct_out(info, info_size, &ri, sizeof ri, "info");
    return st;
}

xattn_status(xattn_attention)(xattn_ctx *ctx, const xattn_attn_desc *d, xattn_run_info *info)
{
    return xattn_attention_sized(ctx, d, info, XATTN__V1_RUN_INFO_SIZE);
}
