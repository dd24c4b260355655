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
#ifdef __linux__
#include <sys/sysinfo.h>
#endif

#ifdef XATTN_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef XATTN_HAVE_HWLOC
#include <hwloc.h>
#endif
#if defined(XATTN_HAVE_HWLOC) && defined(XATTN_HAVE_OPENMP)
#define XATTN__CPU_CAN_BIND 1
#endif

#include "xattn_cpu_ceilings.h"
#include "xattn_cpu_kernels.h"
#include "xattn_internal.h"

/* A call's thread placement (xattn_cpu_kernels.h; see "Thread placement"). */
struct xattn_cpu_bind {
#ifdef XATTN__CPU_CAN_BIND
    hwloc_topology_t topo;
    int nt;                 /* the team size it was made for */
    hwloc_bitmap_t *places; /* [nt] thread t's CPUs */
    hwloc_bitmap_t *saved;  /* [nt] thread t's own mask while it is placed (its entry only) */
#else
    int unused;
#endif
};

typedef struct xattn_cpu_ctx {
    xattn_cpu_args call; /* the call in progress (prepare .. finish) */
    xattn_cpu_work work; /* what its kernels counted */
    xattn_cpu_simd simd; /* path in use */
    int num_threads;     /* resolved from XATTN_OPT_NUM_THREADS */
#ifdef XATTN__CPU_CAN_BIND
    /* Thread placement (xattn__cpu_bind_for). */
    hwloc_topology_t topo;      /* loaded on the first placement; NULL before */
    int topo_failed;            /* hwloc could not load it: no placement */
    struct xattn_cpu_bind bind; /* places and saved masks, cap entries each */
    int cap;
    hwloc_bitmap_t caller;     /* the calling thread's mask, read by each call */
    hwloc_bitmap_t places_for; /* the caller's mask the places were made for */
    int places_nt;             /* and the team size (0 = not made) */
    int places_ok;             /* the caller's mask holds nt cores (or PUs) */
#endif
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

/* Memory this process may still use (MemAvailable within its cgroup's
 * limit); 0 when unknown. */
static uint64_t xattn__cpu_free_bytes(void)
{
    uint64_t total, avail;
    return xattn__host_memory(&total, &avail) ? avail : 0;
}

static xattn_status xattn__cpu_probe(void)
{
    return XATTN_STATUS_OK;
}

static int xattn__cpu_device_count(void)
{
    return 1;
}

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
            if (l1d) /* the kernels size their KV tiles from it */
                xattn__cpu_set_l1d_bytes(l1d);
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
             strstr(model, "AMD")     ? "AMD"
             : strstr(model, "Intel") ? "Intel"
                                      : "");
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
             model, packages ? packages : 1, packages > 1 ? "s" : "", cores, pus, numa ? numa : 1,
             numa > 1 ? "s" : "", (unsigned long long)(l1d >> 10), (unsigned long long)(llc >> 10),
             xattn_cpu_simd_name(simd), info->compute_units);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_ctx_create(struct xattn_ctx *ctx)
{
    xattn_status st;
    xattn_cpu_ctx *c = xattn__host_alloc(ctx, sizeof *c, "CPU context", &st);
    if (!c)
        return st;
    memset(c, 0, sizeof *c);
    c->simd = xattn_cpu_simd_detect();
    c->num_threads = xattn__cpu_default_threads();
    ctx->bctx = c;
    return XATTN_STATUS_OK;
}

#ifdef XATTN__CPU_CAN_BIND
static void xattn__cpu_places_free(xattn_cpu_ctx *c)
{
    for (int i = 0; i < c->cap; i++) {
        if (c->bind.saved)
            hwloc_bitmap_free(c->bind.saved[i]);
        if (c->bind.places)
            hwloc_bitmap_free(c->bind.places[i]);
    }
    free(c->bind.saved);
    free(c->bind.places);
    c->bind.saved = NULL;
    c->bind.places = NULL;
    c->cap = 0;
    c->places_nt = 0;
}
#endif

static void xattn__cpu_ctx_destroy(struct xattn_ctx *ctx)
{
#ifdef XATTN__CPU_CAN_BIND
    xattn_cpu_ctx *c = ctx->bctx;
    if (c) {
        xattn__cpu_places_free(c);
        hwloc_bitmap_free(c->caller);
        hwloc_bitmap_free(c->places_for);
        if (c->topo)
            hwloc_topology_destroy(c->topo);
    }
#endif
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
    void *p = xattn__aligned_alloc(rounded ? rounded : 64);
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

static xattn_status xattn__cpu_buffer_copy(struct xattn_ctx *ctx, struct xattn_buffer *dst,
                                           size_t dst_off, struct xattn_buffer *src, size_t src_off,
                                           size_t bytes)
{
    (void)ctx;
    memcpy((char *)dst->host + dst_off, (const char *)src->host + src_off, bytes);
    return XATTN_STATUS_OK;
}

/*
 * Thread placement (hwloc), region by region, only where the user asks for it
 * (XATTN_CPU_BIND=1). A placed call hands the kernels a xattn_cpu_bind: in
 * each of the call's parallel regions, thread t of the team first saves its
 * own CPU mask and binds itself to core t of the CPUs the calling thread may
 * run on (to PU t when the caller's mask holds fewer cores than threads; no
 * placement when it holds fewer PUs), as OMP_PROC_BIND=close would do within
 * the caller's mask; at the end of the region, before the team's closing
 * barrier, it puts its saved mask back. So no thread is ever bound outside a
 * region of the library: the calling thread and the OpenMP runtime's workers,
 * which belong to the host process and serve its own OpenMP code too, leave
 * every call as they entered it, whatever its status, and a worker the runtime
 * starts (from the calling thread, at the top of a region) inherits the
 * caller's own mask.
 *
 * Not by default: binding that must be undone at every call costs more than it
 * gains on the machines measured. On the shared 2-core VM (load 3; each
 * call's host wall time on the monotonic clock, calls alternating placed and
 * not): a decode step (B1 H8/2 Sk512 D64 f32, SPLITKV, 2
 * threads) took 34 us unbound and 73 us placed region by region (+36 us, 95%
 * CI 35..37); a causal prefill (S512 H8 D64, FLASH) 4.0 ms unbound and 8.0 ms
 * placed (medians; the paired difference within noise, its interval -0.6..3.8
 * ms). A thread that moves itself onto a core another process is running on
 * waits for that core; binding the team once for good, as earlier versions
 * did, avoided that but changed the host's threads for good. An earlier
 * design that bound and restored in regions of its own (two more team
 * wake-ups a call) cost 8 us a decode step at load 1.
 *
 * Thread 0 is the calling thread: it is placed too, because a floating caller
 * that the scheduler puts on a worker's core makes every barrier wait a time
 * slice. Nothing is placed, even with XATTN_CPU_BIND=1, when the team has one
 * thread, when the call is made from inside an OpenMP parallel region (the
 * host's threads are the host's), when the user places threads through the
 * runtime (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY), or
 * without hwloc or OpenMP (docs/api.md, "Threads").
 */
#ifdef XATTN__CPU_CAN_BIND
/* Whether calls are placed: XATTN_CPU_BIND=1, read at each call, and no
 * placement of the user's through the OpenMP runtime. */
static int xattn__cpu_bind_wanted(void)
{
    static const char *const user_env[] = {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                           "KMP_AFFINITY"};
    const char *e = getenv("XATTN_CPU_BIND");
    if (!e || strcmp(e, "1") != 0)
        return 0;
    for (size_t i = 0; i < sizeof user_env / sizeof user_env[0]; i++)
        if (getenv(user_env[i]))
            return 0;
    return 1;
}

/* The topology (loaded once per context) and the bitmaps of nt threads;
 * 0 when either cannot be had (then nothing is placed). */
static int xattn__cpu_bind_state(xattn_cpu_ctx *c, int nt)
{
    if (c->topo_failed)
        return 0;
    if (!c->topo) {
        if (hwloc_topology_init(&c->topo) != 0) {
            c->topo = NULL;
            c->topo_failed = 1;
            return 0;
        }
        if (hwloc_topology_load(c->topo) != 0) {
            hwloc_topology_destroy(c->topo);
            c->topo = NULL;
            c->topo_failed = 1;
            return 0;
        }
    }
    if (!c->caller)
        c->caller = hwloc_bitmap_alloc();
    if (!c->places_for)
        c->places_for = hwloc_bitmap_alloc();
    if (!c->caller || !c->places_for)
        return 0;
    if (nt <= c->cap)
        return 1;
    xattn__cpu_places_free(c);
    c->bind.saved = calloc((size_t)nt, sizeof *c->bind.saved);
    c->bind.places = calloc((size_t)nt, sizeof *c->bind.places);
    if (!c->bind.saved || !c->bind.places) {
        xattn__cpu_places_free(c);
        return 0;
    }
    c->cap = nt;
    for (int i = 0; i < nt; i++) {
        c->bind.saved[i] = hwloc_bitmap_alloc();
        c->bind.places[i] = hwloc_bitmap_alloc();
        if (!c->bind.saved[i] || !c->bind.places[i]) {
            xattn__cpu_places_free(c);
            return 0;
        }
    }
    return 1;
}

/* Thread t's CPUs within the caller's mask (c->caller): the caller's part of
 * the t-th core that has one, else of the t-th PU. Kept while the caller's
 * mask and the team size stay the same. Returns 0 when the mask holds fewer
 * PUs than threads. */
static int xattn__cpu_places(xattn_cpu_ctx *c, int nt)
{
    if (c->places_nt == nt && hwloc_bitmap_isequal(c->places_for, c->caller))
        return c->places_ok;
    hwloc_bitmap_copy(c->places_for, c->caller);
    c->places_nt = nt;
    c->places_ok = 0;
    static const hwloc_obj_type_t types[] = {HWLOC_OBJ_CORE, HWLOC_OBJ_PU};
    for (size_t k = 0; k < 2 && !c->places_ok; k++) {
        const int count = hwloc_get_nbobjs_by_type(c->topo, types[k]);
        int n = 0;
        for (int i = 0; i < count && n < nt; i++) {
            hwloc_obj_t o = hwloc_get_obj_by_type(c->topo, types[k], (unsigned)i);
            if (o && o->cpuset && hwloc_bitmap_intersects(o->cpuset, c->caller))
                hwloc_bitmap_and(c->bind.places[n++], o->cpuset, c->caller);
        }
        c->places_ok = n == nt;
    }
    return c->places_ok;
}
#endif

/* The placement of a call (or of the ceilings' micro-benchmarks) on nt
 * threads, from the calling thread's mask now; NULL when the call is not
 * placed (see above). */
static const xattn_cpu_bind *xattn__cpu_bind_for(xattn_cpu_ctx *c, int nt)
{
#ifdef XATTN__CPU_CAN_BIND
    if (nt < 2 || omp_in_parallel() || !xattn__cpu_bind_wanted() || !xattn__cpu_bind_state(c, nt))
        return NULL;
    if (hwloc_get_cpubind(c->topo, c->caller, HWLOC_CPUBIND_THREAD) != 0 ||
        !xattn__cpu_places(c, nt))
        return NULL;
    c->bind.topo = c->topo;
    c->bind.nt = nt;
    return &c->bind;
#else
    (void)c;
    (void)nt;
    return NULL;
#endif
}

int xattn__cpu_bind_enter(const xattn_cpu_bind *b)
{
#ifdef XATTN__CPU_CAN_BIND
    if (!b)
        return 0;
    const int t = omp_get_thread_num();
    /* A smaller team than planned (a thread limit): not placed. */
    if (omp_get_num_threads() != b->nt || t >= b->nt)
        return 0;
    if (hwloc_get_cpubind(b->topo, b->saved[t], HWLOC_CPUBIND_THREAD) != 0 ||
        hwloc_bitmap_isequal(b->saved[t], b->places[t]))
        return 0;
    return hwloc_set_cpubind(b->topo, b->places[t], HWLOC_CPUBIND_THREAD) == 0;
#else
    (void)b;
    return 0;
#endif
}

void xattn__cpu_bind_leave(const xattn_cpu_bind *b, int bound)
{
#ifdef XATTN__CPU_CAN_BIND
    if (bound &&
        hwloc_set_cpubind(b->topo, b->saved[omp_get_thread_num()], HWLOC_CPUBIND_THREAD) != 0)
        xattn__log(XATTN_LOG_WARN, "cpu: a thread's own CPU mask could not be put back");
#else
    (void)b;
    (void)bound;
#endif
}

/*
 * The device operations of the algorithm driver (xattn_driver.c). The CPU
 * runs each phase synchronously, timed on the monotonic clock; a call's
 * arguments and the kernels' counts live in the context between prepare and
 * finish (a context serves one call at a time).
 */
static xattn_status xattn__cpu_plan(const struct xattn_ctx *ctx, const xattn_problem *p,
                                    xattn__plan *plan)
{
    const xattn_cpu_ctx *c = ctx->bctx;
    const int nt = c->num_threads > 0 ? c->num_threads : 1;
    snprintf(plan->kernel, sizeof plan->kernel, "%s", xattn_cpu_simd_name(c->simd));
    if (p->algo == XATTN_ALGO_NAIVE) {
        /* Its blocks: query rows x keys of a QK^T tile (one head each). The
         * score matrix is faulted in by the kernel's threads, outside the
         * phase timers (docs/measurement.md). */
        xattn__cpu_naive_blocks(&plan->tile_q, &plan->tile_k);
        plan->tile_heads = 1;
        plan->touch = nt;
    } else if (p->algo == XATTN_ALGO_FLASH) {
        /* Packed K/V panels when they pay, and the per-thread scratch alone
         * when the memory limit (or the machine) refuses the larger one. Not
         * faulted in ahead: the packing's first writes fault the panels in,
         * inside the timer, as the prefill figures in docs/benchmarks-cpu.md
         * were measured. */
        const uint64_t plain = xattn__cpu_flash_workspace_bytes(p, nt, 0);
        const uint64_t packed =
            xattn__cpu_flash_packs(p) ? xattn__cpu_flash_workspace_bytes(p, nt, 1) : UINT64_MAX;
        if (plain == UINT64_MAX)
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "FLASH: the CPU scratch size overflows 64 bits");
        plan->scratch_bytes = packed != UINT64_MAX ? packed : plain;
        plan->scratch_fallback = packed != UINT64_MAX ? plain : 0;
        xattn__cpu_tile_sizes(p, &plan->tile_q, &plan->tile_k, &plan->tile_heads);
    } else {
        /* A decode step's partials and tile states (7.4 MiB then, 1.1 MiB
         * now at B1 H32/8 D128) took ~0.7 ms to fault in, a quarter of a B1
         * Sk8192 f16 call on the 2-core VM: both are faulted in ahead. */
        plan->splits = xattn__cpu_splitkv_num_splits(p, c->simd, nt);
        plan->scratch_bytes = xattn__cpu_splitkv_scratch_bytes(p, c->simd, nt);
        if (plan->scratch_bytes == UINT64_MAX)
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "SPLITKV: the CPU scratch size overflows 64 bits");
        plan->touch = plan->touch_scratch = nt;
        xattn__cpu_tile_sizes(p, &plan->tile_q, NULL, &plan->tile_heads);
        plan->tile_k = xattn__cpu_splitkv_tile_k(p, c->simd);
    }
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_prepare(struct xattn_ctx *ctx, const xattn_problem *p,
                                       xattn__plan *plan, int timed)
{
    (void)plan;
    (void)timed; /* CPU calls are synchronous: always timed */
    xattn_cpu_ctx *c = ctx->bctx;
    xattn_cpu_args *a = &c->call;
    memset(a, 0, sizeof *a);
    a->p = p;
    a->q = p->q.buf->host;
    a->k = p->k.buf->host;
    a->v = p->v.buf->host;
    a->o = p->o.buf->host;
    a->lse = p->has_lse ? (float *)p->lse.buf->host : NULL;
    a->bias = p->has_bias ? p->bias.buf->host : NULL;
    a->sinks = p->has_sinks ? (const float *)p->sinks.buf->host : NULL;
    a->k_scale = p->has_k_scale ? (const float *)p->k_scale.buf->host : NULL;
    a->v_scale = p->has_v_scale ? (const float *)p->v_scale.buf->host : NULL;
    a->num_threads = c->num_threads > 0 ? c->num_threads : 1;
    a->simd = c->simd;
    memset(&c->work, 0, sizeof c->work);
    a->bind = xattn__cpu_bind_for(c, a->num_threads);
    return XATTN_STATUS_OK;
}

/* Host memory through the tracking allocator; every byte of a workspace is
 * touched (here with `touch` threads, or by the kernels' writes), so it is
 * first checked against the memory the process can still use. */
static xattn_status xattn__cpu_ws_alloc(struct xattn_ctx *ctx, const xattn_problem *p,
                                        uint64_t bytes, const char *what, int touch, void **out)
{
    (void)p; /* the kernels poison what they use (p->poison) */
    XATTN_RETURN_IF_ERROR(xattn__host_room(bytes, what));
    xattn_status st;
    void *ws = xattn__host_alloc(ctx, bytes, what, &st); /* >= 1 byte */
    if (!ws)
        return st;
    if (touch > 0)
        xattn__cpu_prefault(ws, bytes, touch, ((xattn_cpu_ctx *)ctx->bctx)->call.bind);
    *out = ws;
    return XATTN_STATUS_OK;
}

static void xattn__cpu_ws_free(struct xattn_ctx *ctx, void *ws, uint64_t bytes)
{
    xattn__host_free(ctx, ws, bytes);
}

static xattn_status xattn__cpu_phase(struct xattn_ctx *ctx, const xattn_problem *p,
                                     xattn__plan *plan, int phase, int timed)
{
    (void)timed;
    xattn_cpu_ctx *c = ctx->bctx;
    const xattn_cpu_args *a = &c->call;
    void *const *ws = plan->ws;
    int slot = 0;
    const double t0 = xattn__now();
    switch ((xattn__phase)phase) {
    case XATTN__PH_QK: xattn__cpu_naive_qk(a, ws[XATTN__WS_SCORES], &c->work); break;
    case XATTN__PH_SOFTMAX:
        xattn__cpu_naive_softmax(a, ws[XATTN__WS_SCORES]);
        slot = 1;
        break;
    case XATTN__PH_PV:
        xattn__cpu_naive_pv(a, ws[XATTN__WS_SCORES], &c->work);
        slot = 2;
        break;
    case XATTN__PH_FLASH:
        xattn__cpu_flash(a, ws[XATTN__WS_SCRATCH],
                         !plan->scratch_is_fallback && plan->scratch_fallback != 0, &c->work);
        break;
    case XATTN__PH_PARTIAL:
        xattn__cpu_splitkv_partial(a, plan->splits, ws[XATTN__WS_PART_O], ws[XATTN__WS_PART_LSE],
                                   ws[XATTN__WS_SCRATCH], &c->work);
        break;
    case XATTN__PH_COMBINE:
        xattn__cpu_splitkv_combine(a, plan->splits, ws[XATTN__WS_PART_O], ws[XATTN__WS_PART_LSE]);
        slot = 1;
        break;
    }
    plan->phase_ms[slot] = (xattn__now() - t0) * 1e3;
    (void)p;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cpu_finish(struct xattn_ctx *ctx, const xattn_problem *p,
                                      xattn__plan *plan, int timed, int ok, xattn__exec *exec)
{
    (void)timed;
    xattn_cpu_ctx *c = ctx->bctx;
    c->call.bind = NULL;
    if (!ok)
        return XATTN_STATUS_OK;
    /* The device time is the kernels' time; workspace allocation is not in it. */
    plan->device_ms = plan->phase_ms[0] + plan->phase_ms[1] + plan->phase_ms[2];
    /* The kernels' own counts (docs/measurement.md, "Executed work"); NAIVE
     * loads no K/V tiles (its K/V traffic is modelled with the score matrix). */
    exec->qk_pairs = (double)c->work.qk_pairs;
    exec->pv_pairs = p->Dv > 0 ? (double)c->work.pv_terms / (double)p->Dv : 0.0;
    if (p->algo != XATTN_ALGO_NAIVE)
        exec->kv_rows = (double)c->work.kv_rows;
    /* Free RAM from one sysinfo call (no file access on the call path; the page
     * cache does not count as free here). */
    plan->device_mem_total = ctx->info.global_mem_bytes;
#ifdef __linux__
    struct sysinfo si;
    if (sysinfo(&si) == 0)
        plan->device_mem_free = (uint64_t)si.freeram * (uint64_t)si.mem_unit;
#endif
    return XATTN_STATUS_OK;
}

/*
 * Ceilings: FMA throughput (f32 on the best SIMD path; f16/bf16 where the CPU
 * has AVX512-FP16 / AVX512-BF16) and read/copy bandwidth, on all the threads
 * the backend sees (a context set to fewer threads reaches a lower share).
 * Bandwidth arrays: max(4 x LLC, 256 MiB) each (32 MiB in quick mode), at most
 * 2 GiB and a quarter of the free memory for both, through the allocator.
 */
static xattn_status xattn__cpu_measure_ceilings(struct xattn_ctx *ctx, xattn_ceilings *out)
{
    xattn_cpu_ctx *c = ctx->bctx;
    const int quick = xattn__ceilings_quick();
    const int nt = xattn__cpu_default_threads();
    const xattn_cpu_bind *bind = xattn__cpu_bind_for(c, nt);
    const double secs = quick ? 0.02 : 0.2;
    const int runs = quick ? 2 : 3;
    out->fma_f32_gflops = xattn__cpu_ceiling_fma_f32(xattn_cpu_simd_detect(), nt, secs, runs, bind);
    out->fma_f16_gflops = xattn__cpu_ceiling_fma_f16(nt, secs, runs, bind);
    out->fma_bf16_gflops = xattn__cpu_ceiling_fma_bf16(nt, secs, runs, bind);

    const uint64_t mib = 1ull << 20;
    uint64_t bytes = quick ? 32 * mib : 4 * ctx->info.cache_bytes;
    if (!quick && bytes < 256 * mib)
        bytes = 256 * mib;
    if (bytes > 2048 * mib)
        bytes = 2048 * mib;
    const uint64_t avail = xattn__cpu_free_bytes();
    if (avail && 2 * bytes > avail / 4)
        bytes = avail / 8;
    if (ctx->mem_limit) {
        uint64_t cur = atomic_load(&ctx->mem_current);
        uint64_t room = ctx->mem_limit > cur ? ctx->mem_limit - cur : 0;
        if (2 * bytes > room)
            bytes = room / 2;
    }
    bytes &= ~(uint64_t)4095;
    if (bytes < 4 * mib)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "ceilings: only %llu bytes are free for the bandwidth arrays (free "
                            "memory or XATTN_OPT_MEMORY_LIMIT); 8 MiB at least are needed",
                            (unsigned long long)(2 * bytes));
    xattn_status st;
    void *src = xattn__host_alloc(ctx, bytes, "ceilings: bandwidth array", &st);
    if (!src)
        return st;
    void *dst = xattn__host_alloc(ctx, bytes, "ceilings: bandwidth array", &st);
    if (!dst) {
        xattn__host_free(ctx, src, bytes);
        return st;
    }
    xattn__cpu_ceiling_touch(src, (size_t)bytes, nt, bind);
    xattn__cpu_ceiling_touch(dst, (size_t)bytes, nt, bind);
    const int bw_runs = quick ? 3 : 5;
    out->read_gbps = xattn__cpu_ceiling_read(src, (size_t)bytes, nt, bw_runs, bind);
    out->copy_gbps = xattn__cpu_ceiling_copy(dst, src, (size_t)bytes, nt, bw_runs, bind);
    xattn__host_free(ctx, dst, bytes);
    xattn__host_free(ctx, src, bytes);
    xattn__log(XATTN_LOG_INFO,
               "cpu ceilings (%d threads, %s, arrays of %llu MiB): fma f32 %.1f GFLOP/s, f16 "
               "%.1f, bf16 %.1f; read %.1f GB/s, copy %.1f GB/s",
               nt, xattn_cpu_simd_name(xattn_cpu_simd_detect()), (unsigned long long)(bytes / mib),
               out->fma_f32_gflops, out->fma_f16_gflops, out->fma_bf16_gflops, out->read_gbps,
               out->copy_gbps);
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
    .buffer_copy = xattn__cpu_buffer_copy,
    .plan = xattn__cpu_plan,
    .prepare = xattn__cpu_prepare,
    .ws_alloc = xattn__cpu_ws_alloc,
    .ws_free = xattn__cpu_ws_free,
    .phase = xattn__cpu_phase,
    .finish = xattn__cpu_finish,
    .measure_ceilings = xattn__cpu_measure_ceilings,
};
