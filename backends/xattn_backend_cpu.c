/*
 * The CPU backend's host module: one device (the machine), host memory
 * buffers, workspaces through the tracking allocator, the SIMD path chosen from
 * cpuid, and the three algorithms timed phase by phase on the monotonic clock.
 * The kernels themselves live in kernels_cpu/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef XATTN_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef XATTN_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "xattn_cpu_kernels.h"
#include "xattn_internal.h"

typedef struct xattn_cpu_ctx {
    xattn_cpu_simd simd; /* path in use */
    int num_threads;     /* resolved from XATTN_OPT_NUM_THREADS */
} xattn_cpu_ctx;

static int xattn__cpu_default_threads(void)
{
#ifdef XATTN_HAVE_OPENMP
    int n = omp_get_max_threads();
    return n > 0 ? n : 1;
#else
    return 1;
#endif
}

static xattn_status xattn__cpu_probe(void) { return XATTN_STATUS_OK; }

static int xattn__cpu_device_count(void) { return 1; }

/* The model name from /proc/cpuinfo where hwloc is absent. */
static void xattn__cpu_model_fallback(char *out, size_t n)
{
    snprintf(out, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static xattn_status xattn__cpu_device_info(int index, xattn_device_info *info)
{
    (void)index;
    int cores = 0, pus = 0, packages = 0, numa = 0;
    uint64_t l1d = 0, llc = 0;
    char model[256] = "";
#ifdef XATTN_HAVE_HWLOC
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
            pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
            packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
            numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
            hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
            const char *m = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
            if (m)
                snprintf(model, sizeof model, "%s", m);
            hwloc_obj_t c1 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L1CACHE, 0);
            if (c1 && c1->attr)
                l1d = c1->attr->cache.size;
            static const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE};
            for (size_t i = 0; i < 2 && !llc; i++) {
                hwloc_obj_t c = hwloc_get_obj_by_type(topo, levels[i], 0);
                if (c && c->attr)
                    llc = c->attr->cache.size;
            }
        }
        hwloc_topology_destroy(topo);
    }
#endif
    if (!model[0])
        xattn__cpu_model_fallback(model, sizeof model);
    if (!pus) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        pus = n > 0 ? (int)n : 1;
    }
    if (!cores)
        cores = pus;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    if (!l1d) {
        long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
        l1d = v > 0 ? (uint64_t)v : 0;
    }
    if (!llc) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v <= 0)
            v = sysconf(_SC_LEVEL2_CACHE_SIZE);
        llc = v > 0 ? (uint64_t)v : 0;
    }
#endif
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    xattn_cpu_simd simd = xattn_cpu_simd_detect();

    snprintf(info->name, sizeof info->name, "%s", model);
    snprintf(info->vendor, sizeof info->vendor, "%s",
             strstr(model, "AMD") ? "AMD" : strstr(model, "Intel") ? "Intel" : "");
    snprintf(info->platform, sizeof info->platform, "xattn CPU (OpenMP %s, hwloc %s)",
#ifdef XATTN_HAVE_OPENMP
             "yes",
#else
             "no",
#endif
#ifdef XATTN_HAVE_HWLOC
             "yes"
#else
             "no"
#endif
    );
    info->compute_units = xattn__cpu_default_threads();
    info->global_mem_bytes = (pages > 0 && psize > 0) ? (uint64_t)pages * (uint64_t)psize : 0;
    info->local_mem_bytes = l1d;
    info->cache_bytes = llc;
    info->max_work_group_size = 1;
    info->fp16_supported = 0;
    info->fp64_supported = 1;
    info->device_type = XATTN_DEVICE_TYPE_CPU;
    snprintf(info->cpu_features, sizeof info->cpu_features, "%s",
             simd == XATTN_CPU_SIMD_AVX512 ? "avx512f avx2 fma f16c"
             : simd == XATTN_CPU_SIMD_AVX2 ? "avx2 fma f16c"
                                           : "portable");
    snprintf(info->description, sizeof info->description,
             "%s; %d package%s, %d cores, %d threads, %d NUMA node%s; L1d %llu KiB, LLC %llu "
             "KiB; kernels: %s, %d worker threads",
             model, packages ? packages : 1, packages > 1 ? "s" : "", cores, pus,
             numa ? numa : 1, numa > 1 ? "s" : "", (unsigned long long)(l1d >> 10),
             (unsigned long long)(llc >> 10), xattn_cpu_simd_name(simd),
             info->compute_units);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_ctx_create(struct xattn_ctx *ctx)
{
    xattn_status st;
    xattn_cpu_ctx *c = xattn__host_alloc(ctx, sizeof *c, "CPU context", &st);
    if (!c)
        return st;
    c->simd = xattn_cpu_simd_detect();
    c->num_threads = xattn__cpu_default_threads();
    ctx->bctx = c;
    return XATTN_STATUS_OK;
}

static void xattn__cpu_ctx_destroy(struct xattn_ctx *ctx)
{
    xattn__host_free(ctx, ctx->bctx, sizeof(xattn_cpu_ctx));
    ctx->bctx = NULL;
}

static xattn_status xattn__cpu_sync(struct xattn_ctx *ctx)
{
    (void)ctx; /* CPU calls complete before they return */
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_set_option(struct xattn_ctx *ctx, xattn_option opt, int64_t value)
{
    xattn_cpu_ctx *c = ctx->bctx;
    if (opt == XATTN_OPT_NUM_THREADS) {
        c->num_threads = value ? (int)value : xattn__cpu_default_threads();
    } else if (opt == XATTN_OPT_CPU_SIMD) {
        xattn_cpu_simd best = xattn_cpu_simd_detect();
        if (value == 0) {
            c->simd = best;
        } else if ((int)value > (int)best) {
            return xattn__error(XATTN_STATUS_UNSUPPORTED,
                                "XATTN_OPT_CPU_SIMD: %s asked for, but this CPU supports at "
                                "most %s",
                                xattn_cpu_simd_name((xattn_cpu_simd)value),
                                xattn_cpu_simd_name(best));
        } else {
            c->simd = (xattn_cpu_simd)value;
        }
    }
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_buffer_alloc(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                            size_t bytes)
{
    (void)ctx;
    size_t rounded = (bytes + 63u) & ~(size_t)63u;
    if (rounded < bytes)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW, "bytes: %zu cannot be rounded up to 64",
                            bytes);
    void *p = aligned_alloc(64, rounded);
    if (!p)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "bytes: allocating %zu bytes of host memory failed", bytes);
    buf->host = p;
    buf->native = p;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_buffer_wrap_host(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                                void *ptr, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    buf->host = ptr;
    buf->native = ptr;
    return XATTN_STATUS_OK;
}

static void xattn__cpu_buffer_release(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    (void)ctx;
    if (buf->owned)
        free(buf->host);
    buf->host = NULL;
}

static xattn_status xattn__cpu_buffer_write(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                            size_t offset, const void *src, size_t bytes)
{
    (void)ctx;
    memmove((char *)buf->host + offset, src, bytes);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_buffer_read(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                           size_t offset, void *dst, size_t bytes)
{
    (void)ctx;
    memmove(dst, (const char *)buf->host + offset, bytes);
    return XATTN_STATUS_OK;
}

static void xattn__cpu_phase(xattn_run_info *info, const char *name, double t0, double t1)
{
    int k = info->num_phases++;
    snprintf(info->phase_names[k], sizeof info->phase_names[k], "%s", name);
    info->phase_ms[k] = (t1 - t0) * 1e3;
}

/* Workspace through the tracking allocator, with a hint when it is the
 * materialized score matrix that does not fit. */
static void *xattn__cpu_workspace(struct xattn_ctx *ctx, uint64_t bytes, const char *what,
                                  xattn_status *st)
{
    void *ws = xattn__host_alloc(ctx, bytes ? bytes : 1, what, st);
    if (!ws && !strcmp(what, "NAIVE score matrix")) {
        char cause[1024]; /* the message is rewritten in place: copy it first */
        snprintf(cause, sizeof cause, "%s", xattn_last_error());
        *st = xattn__error(*st, "%s; NAIVE materializes B*Hq*Sq*Sk f32 scores: use "
                                "XATTN_ALGO_FLASH, whose memory does not grow with Sq*Sk",
                           cause);
    }
    return ws;
}

static xattn_status xattn__cpu_attention(struct xattn_ctx *ctx, const xattn_problem *p,
                                         xattn_run_info *info, int timed)
{
    (void)timed; /* CPU calls are synchronous: always timed */
    xattn_cpu_ctx *c = ctx->bctx;
    xattn_cpu_args a;
    memset(&a, 0, sizeof a);
    a.p = p;
    a.q = p->q.buf->host;
    a.k = p->k.buf->host;
    a.v = p->v.buf->host;
    a.o = p->o.buf->host;
    a.lse = p->has_lse ? (float *)p->lse.buf->host : NULL;
    a.bias = p->has_bias ? p->bias.buf->host : NULL;
    a.num_threads = c->num_threads > 0 ? c->num_threads : 1;
    a.simd = c->simd;

    xattn_status st = XATTN_STATUS_OK;
    if (p->algo == XATTN_ALGO_NAIVE) {
        uint64_t bytes;
        if (xattn__mul_overflow((uint64_t)p->B * (uint64_t)p->Hq, (uint64_t)p->Sq, &bytes) ||
            xattn__mul_overflow(bytes, (uint64_t)p->Sk, &bytes) ||
            xattn__mul_overflow(bytes, 4u, &bytes))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "NAIVE: the score matrix B*Hq*Sq*Sk*4 bytes overflows 64 bits; "
                                "use XATTN_ALGO_FLASH");
        float *s = xattn__cpu_workspace(ctx, bytes, "NAIVE score matrix", &st);
        if (!s)
            return st;
        info->workspace_bytes = bytes;
        double t1 = xattn__now();
        xattn_cpu_naive_qk(&a, s);
        double t2 = xattn__now();
        xattn_cpu_naive_softmax(&a, s);
        double t3 = xattn__now();
        xattn_cpu_naive_pv(&a, s);
        double t4 = xattn__now();
        xattn__host_free(ctx, s, bytes);
        xattn__cpu_phase(info, "qk", t1, t2);
        xattn__cpu_phase(info, "softmax", t2, t3);
        xattn__cpu_phase(info, "pv", t3, t4);
    } else if (p->algo == XATTN_ALGO_FLASH) {
        uint64_t bytes = xattn_cpu_flash_workspace_bytes(p, a.num_threads);
        void *ws = xattn__cpu_workspace(ctx, bytes, "FLASH scratch", &st);
        if (!ws)
            return st;
        info->workspace_bytes = bytes;
        double t1 = xattn__now();
        uint64_t tiles = 0;
        int tile_k = 0;
        xattn_cpu_flash(&a, ws, &tiles, &tile_k);
        double t2 = xattn__now();
        xattn__host_free(ctx, ws, bytes);
        xattn__cpu_phase(info, "flash", t1, t2);
    } else if (p->algo == XATTN_ALGO_SPLITKV) {
        int splits = xattn_cpu_splitkv_num_splits(p, a.num_threads);
        uint64_t bytes = xattn_cpu_splitkv_workspace_bytes(p, splits, a.num_threads);
        void *ws = xattn__cpu_workspace(ctx, bytes, "SPLITKV partials", &st);
        if (!ws)
            return st;
        info->workspace_bytes = bytes;
        info->num_splits = splits;
        double t1 = xattn__now();
        xattn_cpu_splitkv_partial(&a, splits, ws);
        double t2 = xattn__now();
        xattn_cpu_splitkv_combine(&a, splits, ws);
        double t3 = xattn__now();
        xattn__host_free(ctx, ws, bytes);
        xattn__cpu_phase(info, "partial", t1, t2);
        xattn__cpu_phase(info, "combine", t2, t3);
    } else {
        return xattn__error(XATTN_STATUS_INTERNAL, "algo: %d reached the CPU backend",
                            (int)p->algo);
    }
    /* The device time is the kernels' time; workspace allocation is not in it. */
    for (int i = 0; i < info->num_phases; i++)
        info->device_ms += info->phase_ms[i];
    return XATTN_STATUS_OK;
}

const xattn_backend_iface xattn__backend_cpu = {
    .id = XATTN_BACKEND_CPU,
    .name = "cpu",
    .probe = xattn__cpu_probe,
    .device_count = xattn__cpu_device_count,
    .device_info = xattn__cpu_device_info,
    .ctx_create = xattn__cpu_ctx_create,
    .ctx_destroy = xattn__cpu_ctx_destroy,
    .sync = xattn__cpu_sync,
    .set_option = xattn__cpu_set_option,
    .buffer_alloc = xattn__cpu_buffer_alloc,
    .buffer_wrap_host = xattn__cpu_buffer_wrap_host,
    .buffer_release = xattn__cpu_buffer_release,
    .buffer_write = xattn__cpu_buffer_write,
    .buffer_read = xattn__cpu_buffer_read,
    .attention = xattn__cpu_attention,
};
