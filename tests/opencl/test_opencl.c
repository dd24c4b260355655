/*
 * test_opencl: what only the OpenCL backend has. The kernels' agreement with
 * the reference is tests/test_backend_ops' job; here:
 *   devices       every device is described (name, vendor, driver, memory, limits)
 *   build_fail    a broken kernel source gives XATTN_STATUS_BUILD_FAILED with the
 *                 build log in the message; a missing source file gives IO
 *   mem_cache     the second call of a configuration builds nothing (build time 0,
 *                 a memory-cache hit), and the build is not in the call's times
 *   disk_cache    a second context loads the binary from the disk cache; a corrupt
 *                 or foreign cache file falls back to a source build, never fails
 *   interop       the caller's cl_context / queue / cl_mem, results read back with
 *                 the caller's own OpenCL calls; wrong objects give errors that
 *                 carry the OpenCL error's name
 *   tiles         XATTN_CL_TILE overrides the tile (results still right); a bad
 *                 value, or one that cannot fit the device (a CPU work-group's
 *                 private arrays), is refused with the variable's name
 *   run_info      phases, device times and workspace bytes of every algorithm
 *   counts        the work the kernels counted equals an independent walk of
 *                 their tiling (causal, window, padded, packed, -inf bias), and
 *                 the record says work_counted with useful <= executed <= possible
 *   tune          stored winners (xattn_opencl_tune_store): used by a new context
 *                 and said in the kernel name; XATTN_CL_TILE overrides; a corrupt,
 *                 stale or unfit entry is ignored with a warning
 *   paged         a paged KV cache (shuffled pages, both pool orders, page sizes
 *                 that do and do not divide the key tiles) gives bit for bit the
 *                 output of the same keys stored contiguously, in every
 *                 algorithm and kernel form, and agrees with the reference; a
 *                 table too large for the kernels' 32-bit index is refused
 *   fp8           every byte of both fp8 formats decodes to its value, times its
 *                 head's k_scale / v_scale, in every algorithm and kernel form
 *   big_buffers   buffers from 4 MiB on (on CPU devices: our own huge-page host
 *                 memory under CL_MEM_USE_HOST_PTR) keep what is written at every
 *                 offset, and FLASH and SPLITKV over K/V of that size agree with
 *                 the CPU backend on the same inputs
 *
 * Usage: test_opencl [test-name]   (no name: all). Exit 77 when no OpenCL
 * device is available (ctest: skipped).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* mmap MAP_ANONYMOUS, MAP_NORESERVE */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../xattn_test.h"
#include "xattn.h"
#include "xattn_backend_opencl.h"
#include "xattn_opencl.h"
#include "xattn_reference.h"

/* ---- a small problem ----------------------------------------------------- */

enum { B = 2, SQ = 5, SK = 37, HQ = 2, HKV = 1, D = 16, DV = 16 };

typedef struct problem {
    xattn_ctx *ctx;
    xattn_buffer *q, *k, *v, *o, *lse;
    xattn_attn_desc d;
    float hq[B * SQ * HQ * D], hk[B * SK * HKV * D], hv[B * SK * HKV * DV];
} problem;

static void fill(float *x, size_t n, unsigned seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0);
    }
}

static void desc_init(problem *p, xattn_algo algo)
{
    xattn_attn_desc_init(&p->d);
    p->d.q = xattn_tensor_bshd(p->q, 0, XATTN_DTYPE_F32, B, SQ, HQ, D);
    p->d.k = xattn_tensor_bshd(p->k, 0, XATTN_DTYPE_F32, B, SK, HKV, D);
    p->d.v = xattn_tensor_bshd(p->v, 0, XATTN_DTYPE_F32, B, SK, HKV, DV);
    p->d.o = xattn_tensor_bshd(p->o, 0, XATTN_DTYPE_F32, B, SQ, HQ, DV);
    xattn_tensor l = {p->lse, 0, XATTN_DTYPE_F32, {B, HQ, SQ, 1}, {HQ * SQ, SQ, 1, 1}};
    p->d.lse = l;
    p->d.causal = 1;
    p->d.algo = algo;
}

/* Buffers of ctx filled with fixed data; 0 on success. */
static int problem_setup(problem *p, xattn_ctx *ctx, xattn_algo algo)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    fill(p->hq, sizeof p->hq / 4, 1);
    fill(p->hk, sizeof p->hk / 4, 2);
    fill(p->hv, sizeof p->hv / 4, 3);
    if (xattn_buffer_alloc(ctx, sizeof p->hq, &p->q) ||
        xattn_buffer_alloc(ctx, sizeof p->hk, &p->k) ||
        xattn_buffer_alloc(ctx, sizeof p->hv, &p->v) ||
        xattn_buffer_alloc(ctx, (size_t)B * SQ * HQ * DV * 4, &p->o) ||
        xattn_buffer_alloc(ctx, (size_t)B * HQ * SQ * 4, &p->lse) ||
        xattn_buffer_write(p->q, 0, p->hq, sizeof p->hq) ||
        xattn_buffer_write(p->k, 0, p->hk, sizeof p->hk) ||
        xattn_buffer_write(p->v, 0, p->hv, sizeof p->hv)) {
        printf("FAIL setup: %s\n", xattn_last_error());
        g_failed++;
        return -1;
    }
    desc_init(p, algo);
    return 0;
}

static void problem_free(problem *p)
{
    xattn_buffer_free(p->q);
    xattn_buffer_free(p->k);
    xattn_buffer_free(p->v);
    xattn_buffer_free(p->o);
    xattn_buffer_free(p->lse);
    memset(p, 0, sizeof *p);
}

/* Max |O - reference| of the last run (1e30 when anything fails). */
static double problem_error(problem *p)
{
    static double ref[B * SQ * HQ * DV];
    static float out[B * SQ * HQ * DV];
    if (xattn_reference_attention(p->ctx, &p->d, ref, NULL) != XATTN_STATUS_OK ||
        xattn_buffer_read(p->d.o.buffer, 0, out, sizeof out) != XATTN_STATUS_OK)
        return 1e30;
    double m = 0.0;
    for (size_t i = 0; i < sizeof out / 4; i++) {
        double e = fabs((double)out[i] - ref[i]);
        if (!(e <= m))
            m = e; /* NaN too */
    }
    return m;
}

static xattn_ctx *cl_ctx(void)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "xattn_ctx_create: %s: %s", xattn_status_name(st),
           xattn_last_error());
    return st == XATTN_STATUS_OK ? ctx : NULL;
}

/* A context whose programs use the tile `tile` (XATTN_CL_TILE; "" = the
 * device's default); the caller unsets XATTN_CL_TILE when done. */
static xattn_ctx *cl_ctx_tile(const char *tile)
{
    if (*tile)
        setenv("XATTN_CL_TILE", tile, 1);
    else
        unsetenv("XATTN_CL_TILE");
    return cl_ctx();
}

/* Number of files ending in .clbin in dir; the first one's path in first. */
static int count_bins(const char *dir, char *first, size_t n)
{
    int count = 0;
    DIR *dd = opendir(dir);
    if (!dd)
        return 0;
    struct dirent *e;
    while ((e = readdir(dd))) {
        size_t len = strlen(e->d_name);
        if (len > 6 && !strcmp(e->d_name + len - 6, ".clbin")) {
            if (!count && first)
                snprintf(first, n, "%s/%s", dir, e->d_name);
            count++;
        }
    }
    closedir(dd);
    return count;
}

static xattn_opencl_cache_stats stats_of(xattn_ctx *ctx)
{
    xattn_opencl_cache_stats s;
    memset(&s, 0, sizeof s);
    xattn_status st = xattn__opencl_cache_stats(ctx, &s);
    EXPECT(st == XATTN_STATUS_OK, "xattn__opencl_cache_stats: %s", xattn_last_error());
    return s;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_devices(void)
{
    int n = 0;
    EXPECT(xattn_device_count(XATTN_BACKEND_OPENCL, &n) == XATTN_STATUS_OK && n >= 1, "n=%d", n);
    for (int i = 0; i < n; i++) {
        xattn_device_info info;
        xattn_status st = xattn_device_get_info(XATTN_BACKEND_OPENCL, i, &info);
        EXPECT(st == XATTN_STATUS_OK, "device %d: %s", i, xattn_last_error());
        if (st != XATTN_STATUS_OK)
            continue;
        printf("  opencl device %d: %s\n", i, info.description);
        EXPECT(info.backend == XATTN_BACKEND_OPENCL && info.index == i, "backend/index");
        EXPECT(info.name[0] && info.vendor[0] && info.driver_version[0] && info.platform[0],
               "name '%s' vendor '%s' driver '%s' platform '%s'", info.name, info.vendor,
               info.driver_version, info.platform);
        EXPECT(strstr(info.description, info.name) != NULL, "description: %s", info.description);
        EXPECT(info.compute_units > 0 && info.global_mem_bytes > 0 && info.local_mem_bytes > 0 &&
                   info.max_work_group_size > 0,
               "CUs %d global %llu local %llu max wg %zu", info.compute_units,
               (unsigned long long)info.global_mem_bytes, (unsigned long long)info.local_mem_bytes,
               info.max_work_group_size);
        EXPECT(info.device_type >= XATTN_DEVICE_TYPE_OTHER &&
                   info.device_type <= XATTN_DEVICE_TYPE_ACCELERATOR,
               "device_type %d", info.device_type);
        EXPECT(info.fp16_supported == 0 || info.fp16_supported == 1, "fp16 flag");
    }
    xattn_ctx *ctx = cl_ctx();
    if (ctx) {
        xattn_device_info info;
        EXPECT(xattn_ctx_device_info(ctx, &info) == XATTN_STATUS_OK && info.name[0],
               "ctx device info");
        EXPECT(xattn_opencl_ctx_queue(ctx) != NULL && xattn_opencl_ctx_context(ctx) != NULL,
               "queue/context accessors");
    }
    xattn_ctx_destroy(ctx);
}

static void write_text(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, n, f);
        fclose(f);
    }
}

static void test_build_fail(void)
{
    char dir[512], cache[512];
    xattn_test_scratch_dir("clsrc", dir, sizeof dir);
    xattn_test_scratch_dir("clcache", cache, sizeof cache);
    EXPECT(dir[0] && cache[0], "mkdtemp");
    /* The real sources, the last one with an #error a compiler must report. */
    for (int i = 0; i < xattn__cl_source_count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, xattn__cl_source_names[i]);
        write_text(path, (const char *)xattn__cl_source_data[i], xattn__cl_source_sizes[i]);
        if (i == xattn__cl_source_count - 1) {
            FILE *f = fopen(path, "ab");
            if (f) {
                fputs("\n#error xattn_broken_source_marker\n", f);
                fclose(f);
            }
        }
    }
    setenv("XATTN_CL_SOURCE_DIR", dir, 1);
    setenv("XATTN_CACHE_DIR", cache, 1);
    xattn_ctx *ctx = cl_ctx();
    problem p;
    if (ctx && problem_setup(&p, ctx, XATTN_ALGO_FLASH) == 0) {
        xattn_status st = xattn_attention(ctx, &p.d, NULL);
        const char *msg = xattn_last_error();
        EXPECT(st == XATTN_STATUS_BUILD_FAILED, "status %s", xattn_status_name(st));
        EXPECT(strstr(msg, "clBuildProgram failed") && strstr(msg, "CL_BUILD_PROGRAM_FAILURE") &&
                   strstr(msg, "build log"),
               "message: %.300s", msg);
        EXPECT(strstr(msg, "xattn_broken_source_marker") != NULL,
               "the build log names the #error: %.600s", msg);
        EXPECT(strstr(msg, "XATTN_CL_SOURCE_DIR") != NULL, "message names the source folder");
        /* The context stays usable: buffers still read back. */
        float x;
        EXPECT(xattn_buffer_read(p.q, 0, &x, sizeof x) == XATTN_STATUS_OK && x == p.hq[0],
               "context usable after a build failure");
        EXPECT(count_bins(cache, NULL, 0) == 0, "nothing cached for a failed build");
        problem_free(&p);
    }
    xattn_ctx_destroy(ctx);

    /* A folder that lacks the sources: IO at context creation, naming the file. */
    char empty[512];
    xattn_test_scratch_dir("clempty", empty, sizeof empty);
    setenv("XATTN_CL_SOURCE_DIR", empty, 1);
    xattn_ctx *bad = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &bad);
    EXPECT(st == XATTN_STATUS_IO && bad == NULL &&
               strstr(xattn_last_error(), xattn__cl_source_names[0]),
           "status %s: %s", xattn_status_name(st), xattn_last_error());
    xattn_ctx_destroy(bad);
    unsetenv("XATTN_CL_SOURCE_DIR");
    unsetenv("XATTN_CACHE_DIR");
    xattn_test_rm_tree(dir);
    xattn_test_rm_tree(cache);
    xattn_test_rm_tree(empty);
}

static void test_mem_cache(void)
{
    setenv("XATTN_CACHE_DIR", "", 1); /* no disk cache: the first build is a source build */
    xattn_ctx *ctx = cl_ctx();
    unsetenv("XATTN_CACHE_DIR");
    problem p;
    if (!ctx || problem_setup(&p, ctx, XATTN_ALGO_FLASH)) {
        xattn_ctx_destroy(ctx);
        return;
    }
    EXPECT(xattn__opencl_cache_dir(ctx)[0] == '\0', "disk cache disabled by XATTN_CACHE_DIR=''");
    xattn_run_info info;
    xattn_status st = xattn_attention(ctx, &p.d, &info);
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    double first = xattn__opencl_last_build_ms(ctx);
    xattn_opencl_cache_stats s1 = stats_of(ctx);
    EXPECT(first > 0.0, "first call built a program: %.3f ms", first);
    EXPECT(s1.source_builds == 1 && s1.memory_hits == 0 && s1.disk_hits == 0,
           "source %llu memory %llu disk %llu", (unsigned long long)s1.source_builds,
           (unsigned long long)s1.memory_hits, (unsigned long long)s1.disk_hits);
    EXPECT(info.device_ms > 0.0 && info.device_ms < first,
           "the build (%.1f ms) is not in the "
           "device time (%.3f ms)",
           first, info.device_ms);
    EXPECT(problem_error(&p) < 1e-5, "error %g", problem_error(&p));

    st = xattn_attention(ctx, &p.d, &info);
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    double second = xattn__opencl_last_build_ms(ctx);
    xattn_opencl_cache_stats s2 = stats_of(ctx);
    EXPECT(second == 0.0, "second call built nothing: %.3f ms", second);
    EXPECT(s2.memory_hits == 1 && s2.source_builds == 1, "memory hits %llu, source builds %llu",
           (unsigned long long)s2.memory_hits, (unsigned long long)s2.source_builds);
    EXPECT(s2.build_ms_total == s1.build_ms_total, "no build time added");
    printf("  source build %.1f ms, then %.3f ms (memory cache); run %.3f ms\n", first, second,
           info.device_ms);

    /* Another algorithm of the same configuration is in the same program. */
    p.d.algo = XATTN_ALGO_NAIVE;
    st = xattn_attention(ctx, &p.d, NULL);
    EXPECT(st == XATTN_STATUS_OK && xattn__opencl_last_build_ms(ctx) == 0.0,
           "NAIVE reuses the program: %s", xattn_last_error());
    problem_free(&p);
    xattn_ctx_destroy(ctx);
}

static void test_disk_cache(void)
{
    char cache[512], sub[600], bin[1200];
    xattn_test_scratch_dir("cldisk", cache, sizeof cache);
    snprintf(sub, sizeof sub, "%s/opencl", cache);
    setenv("XATTN_CACHE_DIR", cache, 1);
    setenv("XATTN_CL_BINARY_CACHE", "on", 1);

    /* 1: a source build, stored. */
    double ms[4] = {0, 0, 0, 0};
    xattn_opencl_cache_stats s[4];
    for (int round = 0; round < 4; round++) {
        if (round == 2 && count_bins(sub, bin, sizeof bin) == 1) {
            /* 3: a corrupt file (one byte of the binary flipped) */
            FILE *f = fopen(bin, "r+b");
            if (f) {
                fseek(f, -20, SEEK_END);
                int ch = fgetc(f);
                fseek(f, -20, SEEK_END);
                fputc(ch ^ 0x5a, f);
                fclose(f);
            }
        } else if (round == 3) {
            /* 4: a file that is not a cache file at all */
            write_text(bin, "not a program binary", 20);
        }
        xattn_ctx *ctx = cl_ctx();
        problem p;
        if (!ctx || problem_setup(&p, ctx, XATTN_ALGO_FLASH)) {
            xattn_ctx_destroy(ctx);
            break;
        }
        EXPECT(!strcmp(xattn__opencl_cache_dir(ctx), sub), "cache dir %s",
               xattn__opencl_cache_dir(ctx));
        xattn_status st = xattn_attention(ctx, &p.d, NULL);
        EXPECT(st == XATTN_STATUS_OK, "round %d: %s", round, xattn_last_error());
        EXPECT(xattn_last_error()[0] == '\0',
               "round %d: a recovered cache problem leaves no "
               "error message: %s",
               round, xattn_last_error());
        EXPECT(problem_error(&p) < 1e-5, "round %d: error %g", round, problem_error(&p));
        ms[round] = xattn__opencl_last_build_ms(ctx);
        s[round] = stats_of(ctx);
        problem_free(&p);
        xattn_ctx_destroy(ctx);
    }
    EXPECT(s[0].source_builds == 1 && s[0].disk_writes == 1 && s[0].disk_hits == 0,
           "round 0: source %llu writes %llu hits %llu", (unsigned long long)s[0].source_builds,
           (unsigned long long)s[0].disk_writes, (unsigned long long)s[0].disk_hits);
    EXPECT(count_bins(sub, NULL, 0) == 1, "one cache file");
    EXPECT(s[1].disk_hits == 1 && s[1].source_builds == 0 && s[1].disk_rejects == 0,
           "round 1 (second context): disk hits %llu, source builds %llu",
           (unsigned long long)s[1].disk_hits, (unsigned long long)s[1].source_builds);
    EXPECT(ms[1] > 0.0 && ms[1] < ms[0], "loading (%.1f ms) is faster than building (%.1f ms)",
           ms[1], ms[0]);
    for (int r = 2; r < 4; r++)
        EXPECT(s[r].disk_rejects == 1 && s[r].source_builds == 1 && s[r].disk_hits == 0,
               "round %d (bad file): rejects %llu, source builds %llu, hits %llu", r,
               (unsigned long long)s[r].disk_rejects, (unsigned long long)s[r].source_builds,
               (unsigned long long)s[r].disk_hits);
    printf("  source build + store %.1f ms; load from disk %.1f ms; after a corrupt file %.1f ms\n",
           ms[0], ms[1], ms[2]);

    /* off: the cache is neither read nor written */
    setenv("XATTN_CL_BINARY_CACHE", "off", 1);
    xattn_ctx *ctx = cl_ctx();
    EXPECT(ctx && xattn__opencl_cache_dir(ctx)[0] == '\0', "XATTN_CL_BINARY_CACHE=off");
    xattn_ctx_destroy(ctx);
    setenv("XATTN_CL_BINARY_CACHE", "sometimes", 1);
    xattn_ctx *bad = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &bad);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT &&
               strstr(xattn_last_error(), "XATTN_CL_BINARY_CACHE"),
           "%s: %s", xattn_status_name(st), xattn_last_error());
    xattn_ctx_destroy(bad);
    unsetenv("XATTN_CL_BINARY_CACHE");
    unsetenv("XATTN_CACHE_DIR");
    xattn_test_rm_tree(cache);
}

/* The first device of the first platform that has one, as the app would pick it. */
static int app_device(cl_platform_id *plat, cl_device_id *dev)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS)
        return -1;
    for (cl_uint i = 0; i < np && i < 16; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, dev, NULL) == CL_SUCCESS) {
            *plat = plats[i];
            return 0;
        }
    return -1;
}

static void test_interop(void)
{
    cl_platform_id plat;
    cl_device_id dev;
    if (app_device(&plat, &dev)) {
        EXPECT(0, "no OpenCL device for the app");
        return;
    }
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    cl_context cctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    EXPECT(e == CL_SUCCESS, "clCreateContext %d", e);
    /* No profiling on the app's queue: timed calls use the host clock. */
    cl_command_queue queue = clCreateCommandQueue(cctx, dev, 0, &e);
    EXPECT(e == CL_SUCCESS, "clCreateCommandQueue %d", e);

    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_opencl_ctx_create(cctx, dev, queue, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    if (st != XATTN_STATUS_OK) {
        clReleaseCommandQueue(queue);
        clReleaseContext(cctx);
        return;
    }
    EXPECT(xattn_ctx_backend(ctx) == XATTN_BACKEND_OPENCL, "backend");
    EXPECT(xattn_opencl_ctx_queue(ctx) == queue && xattn_opencl_ctx_context(ctx) == cctx,
           "the context runs on the app's queue");

    /* The app's buffers, filled by the app on its queue. */
    problem p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    fill(p.hq, sizeof p.hq / 4, 11);
    fill(p.hk, sizeof p.hk / 4, 12);
    fill(p.hv, sizeof p.hv / 4, 13);
    size_t obytes = (size_t)B * SQ * HQ * DV * 4, lbytes = (size_t)B * HQ * SQ * 4;
    cl_mem mq =
        clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof p.hq, p.hq, &e);
    cl_mem mk =
        clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof p.hk, p.hk, &e);
    cl_mem mv =
        clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof p.hv, p.hv, &e);
    cl_mem mo = clCreateBuffer(cctx, CL_MEM_READ_WRITE, obytes, NULL, &e);
    cl_mem ml = clCreateBuffer(cctx, CL_MEM_READ_WRITE, lbytes, NULL, &e);
    EXPECT(mq && mk && mv && mo && ml, "clCreateBuffer");

    xattn_mem_stats m0, m1;
    xattn_ctx_mem_stats(ctx, &m0);
    st = xattn_opencl_buffer_wrap(ctx, mq, &p.q);
    if (st == XATTN_STATUS_OK)
        st = xattn_opencl_buffer_wrap(ctx, mk, &p.k);
    if (st == XATTN_STATUS_OK)
        st = xattn_opencl_buffer_wrap(ctx, mv, &p.v);
    if (st == XATTN_STATUS_OK)
        st = xattn_opencl_buffer_wrap(ctx, mo, &p.o);
    if (st == XATTN_STATUS_OK)
        st = xattn_opencl_buffer_wrap(ctx, ml, &p.lse);
    EXPECT(st == XATTN_STATUS_OK, "wrap: %s", xattn_last_error());
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.current_bytes == m0.current_bytes, "wrapped memory is the app's, not counted");
    if (st == XATTN_STATUS_OK) {
        EXPECT(xattn_buffer_size(p.o) == obytes && xattn_opencl_buffer_mem(p.o) == mo,
               "size %zu, mem", xattn_buffer_size(p.o));
        for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
            desc_init(&p, (xattn_algo)a);
            xattn_run_info info;
            st = xattn_attention(ctx, &p.d, &info);
            EXPECT(st == XATTN_STATUS_OK, "%s: %s", xattn_algo_name((xattn_algo)a),
                   xattn_last_error());
            EXPECT(info.device_ms > 0.0 && info.num_phases >= 1 && info.phase_ms[0] > 0.0,
                   "%s: host-clock times %.3f ms", xattn_algo_name((xattn_algo)a), info.device_ms);
            /* The app reads the result itself, ordered after attention on its queue. */
            float out[B * SQ * HQ * DV];
            e = clEnqueueReadBuffer(queue, mo, CL_TRUE, 0, obytes, out, 0, NULL, NULL);
            EXPECT(e == CL_SUCCESS, "clEnqueueReadBuffer %d", e);
            static double ref[B * SQ * HQ * DV];
            st = xattn_reference_attention(ctx, &p.d, ref, NULL);
            double m = 0;
            for (size_t i = 0; i < sizeof out / 4; i++) {
                double d = fabs((double)out[i] - ref[i]);
                if (!(d <= m))
                    m = d;
            }
            EXPECT(st == XATTN_STATUS_OK && m < 1e-5, "%s: error %g",
                   xattn_algo_name((xattn_algo)a), m);
            /* Async use: no info, then the app's clFinish orders the work. */
            float zero = 0.0f;
            clEnqueueFillBuffer(queue, mo, &zero, sizeof zero, 0, obytes, 0, NULL, NULL);
            st = xattn_attention(ctx, &p.d, NULL);
            EXPECT(st == XATTN_STATUS_OK, "async: %s", xattn_last_error());
            EXPECT(clFinish(queue) == CL_SUCCESS, "clFinish");
            float out2[B * SQ * HQ * DV];
            clEnqueueReadBuffer(queue, mo, CL_TRUE, 0, obytes, out2, 0, NULL, NULL);
            EXPECT(!memcmp(out, out2, sizeof out), "async result on the app's queue");
        }
    }

    /* Wrong objects. */
    xattn_buffer *bad = NULL;
    st = xattn_opencl_buffer_wrap(ctx, NULL, &bad);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && bad == NULL &&
               strstr(xattn_last_error(), "CL_INVALID_MEM_OBJECT") &&
               strstr(xattn_last_error(), "-38"),
           "NULL cl_mem: %s: %s", xattn_status_name(st), xattn_last_error());
    cl_context other = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &e);
    st = xattn_opencl_buffer_wrap(ctx, foreign, &bad);
    EXPECT(st == XATTN_STATUS_WRONG_CONTEXT && bad == NULL, "foreign cl_mem: %s: %s",
           xattn_status_name(st), xattn_last_error());
    cl_command_queue foreign_q = clCreateCommandQueue(other, dev, 0, &e);
    xattn_ctx *ctx2 = NULL;
    st = xattn_opencl_ctx_create(cctx, dev, foreign_q, &ctx2);
    EXPECT(st == XATTN_STATUS_WRONG_CONTEXT && ctx2 == NULL, "queue of another context: %s: %s",
           xattn_status_name(st), xattn_last_error());
    st = xattn_opencl_ctx_create(NULL, dev, NULL, &ctx2);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && ctx2 == NULL, "NULL context: %s",
           xattn_status_name(st));
    cl_command_queue ooo =
        clCreateCommandQueue(cctx, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &e);
    if (e == CL_SUCCESS) {
        st = xattn_opencl_ctx_create(cctx, dev, ooo, &ctx2);
        EXPECT(st == XATTN_STATUS_UNSUPPORTED && ctx2 == NULL &&
                   strstr(xattn_last_error(), "out-of-order"),
               "out-of-order queue: %s: %s", xattn_status_name(st), xattn_last_error());
        clReleaseCommandQueue(ooo);
    }
    /* No queue: the library makes its own on the app's context. */
    st = xattn_opencl_ctx_create(cctx, dev, NULL, &ctx2);
    EXPECT(st == XATTN_STATUS_OK && xattn_opencl_ctx_queue(ctx2) != NULL &&
               xattn_opencl_ctx_queue(ctx2) != queue,
           "own queue: %s", xattn_last_error());
    if (ctx2) {
        /* A buffer of the app's context wraps into either xattn context. */
        xattn_buffer *w = NULL;
        EXPECT(xattn_opencl_buffer_wrap(ctx2, mq, &w) == XATTN_STATUS_OK, "%s", xattn_last_error());
        xattn_buffer_free(w);
    }
    xattn_ctx_destroy(ctx2);
    xattn_ctx *cpu = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu) == XATTN_STATUS_OK) {
        st = xattn_opencl_buffer_wrap(cpu, mq, &bad);
        EXPECT(st == XATTN_STATUS_WRONG_CONTEXT, "cl_mem into a CPU context: %s",
               xattn_status_name(st));
        EXPECT(xattn_opencl_ctx_queue(cpu) == NULL, "CPU context has no queue");
        xattn_ctx_destroy(cpu);
    }

    const float hq0 = p.hq[0];
    problem_free(&p);
    xattn_ctx_destroy(ctx);
    /* The app's objects outlive the xattn context. */
    float x = 0;
    e = clEnqueueReadBuffer(queue, mq, CL_TRUE, 0, sizeof x, &x, 0, NULL, NULL);
    EXPECT(e == CL_SUCCESS && x == hq0, "app queue and buffer alive after destroy: %d", e);
    clReleaseMemObject(foreign);
    clReleaseCommandQueue(foreign_q);
    clReleaseContext(other);
    clReleaseMemObject(mq);
    clReleaseMemObject(mk);
    clReleaseMemObject(mv);
    clReleaseMemObject(mo);
    clReleaseMemObject(ml);
    clReleaseCommandQueue(queue);
    clReleaseContext(cctx);
}

/* FLASH and SPLITKV at D = Dv = 256 under XATTN_CL_TILE=bq=1024,bk=64,rows=0
 * (set by the caller): on a CPU device a work-group's private arrays, 1024 x
 * (256 + 256 + 64) floats, pass the 1 MiB a work-group may keep on its
 * thread's stack, so bq shrinks for this program; the result stays right.
 * With rows > 0 (the row form) the tile fits and stays. */
static void tiles_big_dims(int cpu_device, int rows)
{
    enum { BS = 1, QS = 6, KS = 40, HD = 256 };
    static float hq[QS * HD], hk[KS * HD], hv[KS * HD], out[QS * HD];
    static double ref[QS * HD];
    fill(hq, QS * HD, 11);
    fill(hk, KS * HD, 12);
    fill(hv, KS * HD, 13);
    xattn_ctx *ctx = cl_ctx();
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    if (!ctx || xattn_buffer_alloc(ctx, sizeof hq, &bq) ||
        xattn_buffer_alloc(ctx, sizeof hk, &bk) || xattn_buffer_alloc(ctx, sizeof hv, &bv) ||
        xattn_buffer_alloc(ctx, sizeof out, &bo) || xattn_buffer_write(bq, 0, hq, sizeof hq) ||
        xattn_buffer_write(bk, 0, hk, sizeof hk) || xattn_buffer_write(bv, 0, hv, sizeof hv)) {
        EXPECT(0, "D=256 setup: %s", xattn_last_error());
    } else {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, BS, QS, 1, HD);
        d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, BS, KS, 1, HD);
        d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, BS, KS, 1, HD);
        d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, BS, QS, 1, HD);
        d.causal = 1;
        EXPECT(xattn_reference_attention(ctx, &d, ref, NULL) == XATTN_STATUS_OK, "reference: %s",
               xattn_last_error());
        for (int a = XATTN_ALGO_FLASH; a <= XATTN_ALGO_SPLITKV; a++) {
            d.algo = (xattn_algo)a;
            xattn_run_info info;
            xattn_status st = xattn_attention(ctx, &d, &info);
            EXPECT(st == XATTN_STATUS_OK, "D=256 %s: %s", xattn_algo_name(d.algo),
                   xattn_last_error());
            double err = 0.0;
            if (st != XATTN_STATUS_OK || xattn_buffer_read(bo, 0, out, sizeof out))
                err = 1e30;
            for (int i = 0; i < QS * HD && err < 1e30; i++) {
                double e = fabs((double)out[i] - ref[i]);
                if (!(e <= err))
                    err = e;
            }
            EXPECT(err < 1e-5, "D=256 %s with bq=1024 (rows=%d): error %g", xattn_algo_name(d.algo),
                   rows, err);
            if (rows)
                EXPECT(info.tile_q == rows && info.tile_k == 64, "D=256 %s rows=%d: tile %dx%d",
                       xattn_algo_name(d.algo), rows, info.tile_q, info.tile_k);
            else if (cpu_device)
                EXPECT(info.tile_q >= 1 && info.tile_q <= 256 && info.tile_k == 64,
                       "D=256 %s: tile %dx%d, expected bq shrunk to <= 256 for the private "
                       "arrays (1024 x 576 floats > 1 MiB)",
                       xattn_algo_name(d.algo), info.tile_q, info.tile_k);
        }
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_ctx_destroy(ctx);
}

static void test_tiles(void)
{
    /* Small tiles: several key tiles per work-group, several row tiles; both
     * FLASH/SPLITKV forms (rows 3: row blocks that straddle heads). */
    for (int rows = 0; rows <= 3; rows += 3) {
        char small[64];
        snprintf(small, sizeof small, "bq=4,bk=8,nt=4,rwg=8,cwg=8,rows=%d", rows);
        setenv("XATTN_CL_TILE", small, 1);
        xattn_ctx *ctx = cl_ctx();
        problem p;
        if (ctx && problem_setup(&p, ctx, XATTN_ALGO_NAIVE) == 0) {
            for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
                p.d.algo = (xattn_algo)a;
                p.d.num_splits = a == XATTN_ALGO_SPLITKV ? 3 : 0;
                xattn_run_info info;
                xattn_status st = xattn_attention(ctx, &p.d, &info);
                EXPECT(st == XATTN_STATUS_OK, "%s: %s", xattn_algo_name((xattn_algo)a),
                       xattn_last_error());
                double err = problem_error(&p);
                EXPECT(err < 1e-5, "%s with small tiles (rows=%d): error %g",
                       xattn_algo_name((xattn_algo)a), rows, err);
                if (a == XATTN_ALGO_SPLITKV)
                    EXPECT(info.num_splits == 3, "splits %d", info.num_splits);
            }
            problem_free(&p);
        }
        xattn_ctx_destroy(ctx);
    }

    /* On a CPU device a work-group keeps its private arrays on one thread's
     * stack: a tile whose FLASH work-group needs more than 1 MiB even at the
     * smallest head dims is refused (4096 x (32 + 32 + 4096) floats, 68 MB,
     * crashed PoCL); a smaller one runs, shrunk where a head dim needs it. */
    xattn_device_info dev;
    const int cpu_device =
        xattn_device_get_info(XATTN_BACKEND_OPENCL, 0, &dev) == XATTN_STATUS_OK &&
        dev.device_type == XATTN_DEVICE_TYPE_CPU;
    setenv("XATTN_CL_TILE", "bq=1024,bk=64,rows=0", 1);
    tiles_big_dims(cpu_device, 0);
    /* The row form at D = 256 with its largest row block. */
    setenv("XATTN_CL_TILE", "bk=64,rows=16", 1);
    tiles_big_dims(cpu_device, 16);

    /* The last: more than 1 MiB of private arrays a work-item in the row
     * form (16 + 4096 rows of 64 floats); the one before, a work-group of
     * the work-group form on a CPU device. */
    const char *bad[] = {"bq=abc",
                         "bq=0",
                         "rwg=24",
                         "tile=4",
                         "bq",
                         "rows=17",
                         "rows=-1",
                         "bq=4096,bk=4096,rows=0",
                         "rows=16,bk=4096"};
    const size_t nbad = sizeof bad / sizeof bad[0];
    for (size_t i = 0; i < nbad; i++) {
        if (!cpu_device && i == nbad - 2)
            continue;
        setenv("XATTN_CL_TILE", bad[i], 1);
        xattn_ctx *b = NULL;
        xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &b);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && b == NULL &&
                   strstr(xattn_last_error(), "XATTN_CL_TILE"),
               "'%s': %s: %s", bad[i], xattn_status_name(st), xattn_last_error());
        xattn_ctx_destroy(b);
    }
    unsetenv("XATTN_CL_TILE");
}

static void test_run_info(void)
{
    xattn_ctx *ctx = cl_ctx();
    problem p;
    if (!ctx || problem_setup(&p, ctx, XATTN_ALGO_NAIVE)) {
        xattn_ctx_destroy(ctx);
        return;
    }
    static const char *phases[4][3] = {
        {0}, {"qk", "softmax", "pv"}, {"flash"}, {"partial", "combine"}};
    static const int nph[4] = {0, 3, 1, 2};
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        p.d.algo = (xattn_algo)a;
        p.d.num_splits = 0;
        xattn_mem_stats before, after;
        xattn_ctx_mem_stats(ctx, &before);
        xattn_ctx_reset_peak(ctx);
        xattn_ctx_mem_stats(ctx, &before);
        xattn_run_info info;
        xattn_status st = xattn_attention(ctx, &p.d, &info);
        xattn_ctx_mem_stats(ctx, &after);
        EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
        const char *name = xattn_algo_name((xattn_algo)a);
        EXPECT(info.num_phases == nph[a], "%s: %d phases", name, info.num_phases);
        double sum = 0.0;
        for (int i = 0; i < info.num_phases && i < 3; i++) {
            EXPECT(!strcmp(info.phase_names[i], phases[a][i]), "%s: phase %d is '%s'", name, i,
                   info.phase_names[i]);
            EXPECT(info.phase_ms[i] > 0.0, "%s: phase %s %.4f ms", name, info.phase_names[i],
                   info.phase_ms[i]);
            sum += info.phase_ms[i];
        }
        EXPECT(info.device_ms > 0.0 && info.device_ms >= sum * 0.999,
               "%s: device %.4f ms, phases %.4f ms", name, info.device_ms, sum);
        EXPECT(after.current_bytes == before.current_bytes, "%s: workspace released", name);
        /* The peak holds the workspace (and the dispatch's small host arrays). */
        EXPECT(after.peak_bytes - before.current_bytes >= info.workspace_bytes &&
                   after.peak_bytes - before.current_bytes <= info.workspace_bytes + 4096,
               "%s: peak grew by %llu, workspace %llu", name,
               (unsigned long long)(after.peak_bytes - before.current_bytes),
               (unsigned long long)info.workspace_bytes);
        if (a == XATTN_ALGO_NAIVE)
            EXPECT(info.workspace_bytes >= (uint64_t)B * HQ * SQ * SK * 4, "NAIVE scores %llu",
                   (unsigned long long)info.workspace_bytes);
        if (a == XATTN_ALGO_FLASH)
            EXPECT(info.workspace_bytes < (uint64_t)B * HQ * SQ * SK * 4,
                   "FLASH needs no score matrix: %llu", (unsigned long long)info.workspace_bytes);
        if (a == XATTN_ALGO_SPLITKV)
            EXPECT(info.num_splits >= 1, "splits %d", info.num_splits);
        EXPECT(problem_error(&p) < 1e-5, "%s: error %g", name, problem_error(&p));
    }
    /* A memory limit that the NAIVE score matrix passes: OUT_OF_MEMORY, usable after. */
    xattn_mem_stats cur;
    xattn_ctx_mem_stats(ctx, &cur);
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)cur.current_bytes + 256);
    p.d.algo = XATTN_ALGO_NAIVE;
    xattn_status st = xattn_attention(ctx, &p.d, NULL);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && strstr(xattn_last_error(), "NAIVE"), "%s: %s",
           xattn_status_name(st), xattn_last_error());
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    EXPECT(xattn_attention(ctx, &p.d, NULL) == XATTN_STATUS_OK, "usable after OUT_OF_MEMORY: %s",
           xattn_last_error());
    problem_free(&p);
    xattn_ctx_destroy(ctx);
}

/* ---- executed-work counts ----------------------------------------------------- */

/*
 * The kernels count what they compute (xattn_cl_common.cl, "executed-work
 * counts"). An independent walk of the same tiling on the host gives what
 * they must have counted, per head:
 *   FLASH     each group of bq rows walks the union of its rows' keys in tiles
 *             of bk from the first such key, loading every tile; a row scores
 *             its keys in the tile and adds into O those a -inf bias leaves
 *   SPLITKV   the same on each chunk of ceil(Sk / splits) keys
 *   NAIVE     global form: every (row, key) of the sequence scored, and the
 *             keys with P != 0 added; local form: whole nt x nt tiles of both
 *             products for every tile that holds a row (and a key)
 */
typedef struct cnt_case {
    const char *name;
    int B, Sq, Sk; /* packed: the longest sequences */
    int causal;
    int64_t wl, wr;
    int padded, packed, bias_inf;
    int32_t lq[4], lk[4];
} cnt_case;

typedef struct cnt_walk {
    double qk, pv, kv;
} cnt_walk;

enum { CH = 2, CD = 16, CDV = 8, CNT = 4, CBQ = 4, CBK = 8 };

/* The keys [*lo, *hi) of row i inside [kmin, kmax) (semantics step 6,
 * bottom-right alignment, the default). */
static void cnt_row(const cnt_case *c, int64_t lq, int64_t lk, int64_t i, int64_t kmin,
                    int64_t kmax, int64_t *lo, int64_t *hi)
{
    const int64_t pos = i + lk - lq;
    int64_t a = 0, b = lk;
    if (c->causal && pos + 1 < b)
        b = pos + 1;
    if (c->wl >= 0 && pos - c->wl > a)
        a = pos - c->wl;
    if (c->wr >= 0 && pos + c->wr + 1 < b)
        b = pos + c->wr + 1;
    b = b < kmax ? b : kmax;
    a = a > kmin ? a : kmin;
    a = a < kmax ? a : kmax;
    *lo = a;
    *hi = b > a ? b : a;
}

static int cnt_bias_inf(int64_t i, int64_t j)
{
    return (i * 7 + j * 3) % 5 == 0;
}

/* Keys j0 <= j < j1 of row i that the bias does not mask. */
static double cnt_added(const cnt_case *c, int64_t i, int64_t j0, int64_t j1)
{
    double n = 0;
    for (int64_t j = j0; j < j1; j++)
        n += !(c->bias_inf && cnt_bias_inf(i, j));
    return n;
}

/* The row form (XATTN_CL_TILE rows = R > 0): a work-item takes R rows of the
 * KV head, in the order (query row, head), head fastest, and loads the union
 * of their keys once for all CH heads; counts for all heads. */
static void cnt_walk_rows(const cnt_case *c, int64_t lq, int64_t lk, int splits, int64_t chunk,
                          int R, cnt_walk *w)
{
    for (int sp = 0; sp < splits; sp++) {
        const int64_t kmin = splits > 1 ? sp * chunk : 0, kmax = splits > 1 ? kmin + chunk : lk;
        for (int64_t v0 = 0; v0 < lq * CH; v0 += R) {
            const int64_t ia = v0 / CH, v1 = v0 + R < lq * CH ? v0 + R : lq * CH;
            const int64_t ib = (v1 - 1) / CH;
            int64_t ulo, uhi, lo, hi;
            cnt_row(c, lq, lk, ia, kmin, kmax, &ulo, &hi);
            cnt_row(c, lq, lk, ib, kmin, kmax, &lo, &uhi);
            for (int64_t j0 = ulo; j0 < uhi; j0 += CBK) {
                const int64_t j1 = j0 + CBK < uhi ? j0 + CBK : uhi;
                w->kv += (double)(j1 - j0);
                for (int64_t v = v0; v < v1; v++) {
                    const int64_t i = v / CH;
                    cnt_row(c, lq, lk, i, kmin, kmax, &lo, &hi);
                    const int64_t a = lo > j0 ? lo : j0, b = hi < j1 ? hi : j1;
                    if (b > a) {
                        w->qk += (double)(b - a);
                        w->pv += cnt_added(c, i, a, b);
                    }
                }
            }
        }
    }
}

/* FLASH (splits = 1) or the SPLITKV partial, one sequence and head. */
static void cnt_walk_tiles(const cnt_case *c, int64_t lq, int64_t lk, int splits, int64_t chunk,
                           cnt_walk *w)
{
    for (int sp = 0; sp < splits; sp++) {
        const int64_t kmin = splits > 1 ? sp * chunk : 0, kmax = splits > 1 ? kmin + chunk : lk;
        for (int64_t i0 = 0; i0 < lq; i0 += CBQ) {
            const int64_t i1 = i0 + CBQ < lq ? i0 + CBQ : lq;
            int64_t ulo, uhi, lo, hi;
            cnt_row(c, lq, lk, i0, kmin, kmax, &ulo, &hi);
            cnt_row(c, lq, lk, i1 - 1, kmin, kmax, &lo, &uhi);
            for (int64_t j0 = ulo; j0 < uhi; j0 += CBK) {
                const int64_t j1 = j0 + CBK < uhi ? j0 + CBK : uhi;
                w->kv += (double)(j1 - j0);
                for (int64_t i = i0; i < i1; i++) {
                    cnt_row(c, lq, lk, i, kmin, kmax, &lo, &hi);
                    const int64_t a = lo > j0 ? lo : j0, b = hi < j1 ? hi : j1;
                    if (b > a) {
                        w->qk += (double)(b - a);
                        w->pv += cnt_added(c, i, a, b);
                    }
                }
            }
        }
    }
}

static void cnt_walk_naive(const cnt_case *c, int64_t lq, int64_t lk, int local, cnt_walk *w)
{
    const int64_t rows = (lq + CNT - 1) / CNT * CNT, keys = (lk + CNT - 1) / CNT * CNT;
    if (local) {
        w->qk += (double)(rows * keys);
        w->pv += (double)(rows * keys);
        return;
    }
    w->qk += (double)(lq * lk);
    for (int64_t i = 0; i < lq; i++) {
        int64_t lo, hi;
        cnt_row(c, lq, lk, i, 0, lk, &lo, &hi);
        w->pv += cnt_added(c, i, lo, hi);
    }
}

/* Every algorithm on one case, with small tiles in one NAIVE form and one
 * FLASH/SPLITKV form (rows 0: work-groups; R > 0: the row form). */
static void counts_case(const cnt_case *c, int naive_local, int row_form, int cpu_device)
{
    char tile[112];
    snprintf(tile, sizeof tile, "bq=%d,bk=%d,nt=%d,rwg=8,cwg=8,naive_local=%d,rows=%d", CBQ, CBK,
             CNT, naive_local, row_form);
    setenv("XATTN_CL_TILE", tile, 1);
    xattn_ctx *ctx = cl_ctx();
    unsetenv("XATTN_CL_TILE");
    if (!ctx)
        return;
    int32_t cuq[5] = {0}, cuk[5] = {0};
    int64_t maxk = 0;
    for (int b = 0; b < c->B; b++) {
        cuq[b + 1] = cuq[b] + c->lq[b];
        cuk[b + 1] = cuk[b] + c->lk[b];
        maxk = c->lk[b] > maxk ? c->lk[b] : maxk;
    }
    const int64_t Bt = c->packed ? 1 : c->B, Tq = c->packed ? cuq[c->B] : c->Sq,
                  Tk = c->packed ? cuk[c->B] : c->Sk;
    const size_t nq = (size_t)(Bt * Tq * CH * CD), nk = (size_t)(Bt * Tk * CD),
                 nv = (size_t)(Bt * Tk * CDV), no = (size_t)(Bt * Tq * CH * CDV),
                 nb = (size_t)(c->Sq * c->Sk);
    float *hq = malloc(nq * 4), *hk = malloc(nk * 4), *hv = malloc(nv * 4), *hb = malloc(nb * 4);
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bb = NULL;
    if (!hq || !hk || !hv || !hb || xattn_buffer_alloc(ctx, nq * 4, &bq) ||
        xattn_buffer_alloc(ctx, nk * 4, &bk) || xattn_buffer_alloc(ctx, nv * 4, &bv) ||
        xattn_buffer_alloc(ctx, no * 4, &bo) || xattn_buffer_alloc(ctx, nb * 4, &bb)) {
        EXPECT(0, "%s: setup: %s", c->name, xattn_last_error());
        goto out;
    }
    fill(hq, nq, 21);
    fill(hk, nk, 22);
    fill(hv, nv, 23);
    for (int64_t i = 0; i < c->Sq; i++)
        for (int64_t j = 0; j < c->Sk; j++)
            hb[i * c->Sk + j] = cnt_bias_inf(i, j) ? -INFINITY : 0.25f;
    if (xattn_buffer_write(bq, 0, hq, nq * 4) || xattn_buffer_write(bk, 0, hk, nk * 4) ||
        xattn_buffer_write(bv, 0, hv, nv * 4) || xattn_buffer_write(bb, 0, hb, nb * 4)) {
        EXPECT(0, "%s: writes: %s", c->name, xattn_last_error());
        goto out;
    }

    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, Bt, Tq, CH, CD);
    d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, Bt, Tk, 1, CD);
    d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, Bt, Tk, 1, CDV);
    d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, Bt, Tq, CH, CDV);
    if (c->bias_inf) { /* [Sq, Sk], the same for every sequence and head */
        xattn_tensor t = {bb, 0, XATTN_DTYPE_F32, {1, 1, c->Sq, c->Sk}, {0, 0, c->Sk, 1}};
        d.bias = t;
    }
    d.causal = c->causal;
    d.window_left = c->wl;
    d.window_right = c->wr;
    if (c->padded) {
        d.seqlens_q = c->lq;
        d.seqlens_k = c->lk;
    }
    if (c->packed) {
        d.cu_seqlens_q = cuq;
        d.cu_seqlens_k = cuk;
        d.num_seqs = c->B;
    }
    /* Poisoned outputs: a count that no kernel writes would be huge. */
    EXPECT(xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1) == XATTN_STATUS_OK &&
               xattn_profiler_enable(ctx, 1) == XATTN_STATUS_OK,
           "options: %s", xattn_last_error());
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        d.algo = (xattn_algo)a;
        d.num_splits = a == XATTN_ALGO_SPLITKV ? 3 : 0;
        const char *an = xattn_algo_name(d.algo);
        xattn_run_info info;
        xattn_record r;
        size_t nrec = 0;
        double qk = 0, pv = 0, kv = 0;
        xattn_profiler_reset(ctx);
        if (xattn_attention(ctx, &d, &info) != XATTN_STATUS_OK ||
            xattn_profiler_count(ctx, &nrec) != XATTN_STATUS_OK || nrec != 1 ||
            xattn_profiler_get(ctx, 0, &r) != XATTN_STATUS_OK ||
            xattn__opencl_last_counts(ctx, &qk, &pv, &kv) != XATTN_STATUS_OK) {
            EXPECT(0, "%s %s: %s (%zu records)", c->name, an, xattn_last_error(), nrec);
            continue;
        }
        /* The row form's tile: R rows, the group's CH heads first. */
        const int tq = row_form == 0 ? CBQ : row_form < CH ? 1 : row_form / CH;
        EXPECT(a == XATTN_ALGO_NAIVE || (info.tile_q == tq && info.tile_k == CBK),
               "%s %s rows=%d: ran tile %dx%d, the walk assumes %dx%d", c->name, an, row_form,
               info.tile_q, info.tile_k, tq, CBK);
        const int splits = a == XATTN_ALGO_SPLITKV ? info.num_splits : 1;
        const int64_t chunk = ((c->packed ? maxk : c->Sk) + splits - 1) / splits;
        cnt_walk w = {0, 0, 0};
        double possible = 0; /* pairs the kernels could compute at most */
        for (int b = 0; b < c->B; b++) {
            const int64_t lq = c->padded || c->packed ? c->lq[b] : c->Sq;
            const int64_t lk = c->padded || c->packed ? c->lk[b] : c->Sk;
            const int64_t rows = (lq + CNT - 1) / CNT * CNT, keys = (lk + CNT - 1) / CNT * CNT;
            if (a == XATTN_ALGO_NAIVE)
                cnt_walk_naive(c, lq, lk, naive_local, &w);
            else if (row_form == 0)
                cnt_walk_tiles(c, lq, lk, splits, chunk, &w);
            else
                cnt_walk_rows(c, lq, lk, splits, chunk, row_form, &w);
            possible +=
                a == XATTN_ALGO_NAIVE && naive_local ? (double)(rows * keys) : (double)(lq * lk);
        }
        const char *form = a != XATTN_ALGO_NAIVE ? (row_form ? " (rows)" : "")
                           : naive_local         ? " (local)"
                                                 : " (global)";
        /* The row form's walk is over every head of the KV head already. */
        const double heads = a != XATTN_ALGO_NAIVE && row_form ? 1.0 : CH;
        w.qk *= heads;
        w.pv *= heads;
        w.kv *= heads;
        EXPECT(qk == w.qk && pv == w.pv && kv == (a == XATTN_ALGO_NAIVE ? -1.0 : w.kv),
               "%s %s%s: counted qk %.0f pv %.0f kv %.0f, the walk %.0f %.0f %.0f", c->name, an,
               form, qk, pv, kv, w.qk, w.pv, a == XATTN_ALGO_NAIVE ? -1.0 : w.kv);
        EXPECT(r.work_counted == 1 && r.flops_executed == 2.0 * CD * qk + 2.0 * CDV * pv,
               "%s %s%s: record work_counted %d, executed %.0f", c->name, an, form, r.work_counted,
               r.flops_executed);
        /* NAIVE's local form computes whole tiles: padding lanes may pass dense.
         * Useful work counts the pairs that a -inf bias masks (only the masks
         * of semantics step 6 and padding leave the model's useful pairs), and
         * the kernels add none of them into O: there executed may be lower. */
        const int padding_lanes = a == XATTN_ALGO_NAIVE && naive_local;
        EXPECT((c->bias_inf || r.flops_useful <= r.flops_executed) &&
                   r.flops_executed <= 2.0 * (CD + CDV) * CH * possible &&
                   (padding_lanes || r.flops_executed <= r.flops_dense),
               "%s %s%s: useful %.0f, executed %.0f, possible %.0f, dense %.0f", c->name, an, form,
               r.flops_useful, r.flops_executed, 2.0 * (CD + CDV) * CH * possible, r.flops_dense);
        /* The kernel form: the tile row's device class, and NAIVE's form. */
        const char *suffix = a != XATTN_ALGO_NAIVE ? (row_form ? "-rows" : "")
                             : naive_local         ? "-local"
                                                   : "-global";
        const size_t kl = strlen(info.kernel), sl = strlen(suffix);
        char cpu_form[32];
        snprintf(cpu_form, sizeof cpu_form, "cl-cpu%s", suffix);
        EXPECT(!strncmp(info.kernel, "cl-", 3) && kl > 3 + sl &&
                   !strcmp(info.kernel + kl - sl, suffix) &&
                   (sl || (!strstr(info.kernel, "-local") && !strstr(info.kernel, "-global") &&
                           !strstr(info.kernel, "-rows"))) &&
                   !strcmp(r.kernel, info.kernel) &&
                   (!cpu_device || !strcmp(info.kernel, cpu_form)),
               "%s %s: kernel '%s', record '%s'", c->name, an, info.kernel, r.kernel);
    }
out:
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bb);
    free(hq);
    free(hk);
    free(hv);
    free(hb);
    xattn_ctx_destroy(ctx);
}

static void test_counts(void)
{
    static const cnt_case cases[] = {
        {"causal", 2, 9, 21, 1, -1, -1, 0, 0, 0, {0}, {0}},
        {"window", 2, 13, 17, 0, 4, 1, 0, 0, 0, {0}, {0}},
        {"causal-window", 1, 11, 30, 1, 6, -1, 0, 0, 0, {0}, {0}},
        {"padded", 3, 9, 21, 1, -1, -1, 1, 0, 0, {9, 4, 0}, {21, 7, 13}},
        {"packed", 3, 7, 12, 1, -1, -1, 0, 1, 0, {5, 7, 3}, {11, 6, 12}},
        {"packed-window", 3, 7, 12, 0, 2, 3, 0, 1, 0, {5, 7, 3}, {11, 6, 12}},
        {"bias-inf", 2, 9, 21, 0, -1, -1, 0, 0, 1, {0}, {0}},
        /* more than XATTN_CL_COUNT_HOST_MAX counts: added on the device */
        {"long", 2, 64, 72, 1, -1, -1, 0, 0, 0, {0}, {0}},
    };
    xattn_device_info dev;
    const int cpu_device =
        xattn_device_get_info(XATTN_BACKEND_OPENCL, 0, &dev) == XATTN_STATUS_OK &&
        dev.device_type == XATTN_DEVICE_TYPE_CPU;
    /* rows 3: a work-item's rows straddle query rows (CH = 2 heads). */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int local = 0; local <= 1; local++)
            counts_case(&cases[i], local, local ? 3 : 0, cpu_device);

    /* Calls without times are not counted (and stay asynchronous). */
    xattn_ctx *ctx = cl_ctx();
    problem p;
    if (ctx && problem_setup(&p, ctx, XATTN_ALGO_FLASH) == 0) {
        double qk = 0, pv = 0, kv = 0;
        EXPECT(xattn_attention(ctx, &p.d, NULL) == XATTN_STATUS_OK &&
                   xattn_ctx_sync(ctx) == XATTN_STATUS_OK &&
                   xattn__opencl_last_counts(ctx, &qk, &pv, &kv) == XATTN_STATUS_OK && qk == -1.0 &&
                   pv == -1.0 && kv == -1.0,
               "untimed call: %s; counts %g %g %g", xattn_last_error(), qk, pv, kv);
        problem_free(&p);
    }
    xattn_ctx_destroy(ctx);
}

/* ---- main ------------------------------------------------------------------- */

typedef struct test_entry {
    const char *name;
    void (*fn)(void);
} test_entry;

/* ---- tune: stored winners of `xattn tune` --------------------------------- */

static char g_warn[2048];
static void tune_log(xattn_log_level level, const char *message, void *user)
{
    (void)user;
    if (level == XATTN_LOG_WARN)
        snprintf(g_warn, sizeof g_warn, "%s", message);
}

/* Runs algo on a new context: 0 when it ran right; its kernel and record's
 * kernel into kernel (the record must agree). */
static int tune_run(xattn_algo algo, char *kernel, size_t n)
{
    xattn_ctx *ctx = cl_ctx();
    problem p;
    int rc = -1;
    kernel[0] = '\0';
    if (ctx && problem_setup(&p, ctx, algo) == 0) {
        xattn_run_info info;
        xattn_record r;
        size_t nrec = 0;
        if (xattn_profiler_enable(ctx, 1) == XATTN_STATUS_OK &&
            xattn_attention(ctx, &p.d, &info) == XATTN_STATUS_OK &&
            xattn_profiler_count(ctx, &nrec) == XATTN_STATUS_OK && nrec == 1 &&
            xattn_profiler_get(ctx, 0, &r) == XATTN_STATUS_OK) {
            double err = problem_error(&p);
            EXPECT(err < 1e-5, "%s: error %g", info.kernel, err);
            EXPECT(!strcmp(info.kernel, r.kernel), "run info '%s', record '%s'", info.kernel,
                   r.kernel);
            /* The reason says "tuned" exactly when a stored winner ran. */
            EXPECT(!strstr(info.kernel, "-tuned") == !strstr(info.reason, "tiles: tuned") &&
                       !strcmp(info.reason, r.reason),
                   "kernel '%s', reason '%s', record's reason '%s'", info.kernel, info.reason,
                   r.reason);
            snprintf(kernel, n, "%s", info.kernel);
            rc = 0;
        } else {
            EXPECT(0, "%s: %s", xattn_algo_name(algo), xattn_last_error());
        }
        problem_free(&p);
    }
    xattn_ctx_destroy(ctx);
    return rc;
}

/* Rewrites the single tune-*.txt file of dir with `text`. */
static int tune_rewrite(const char *dir, const char *text)
{
    DIR *dh = opendir(dir);
    char path[1200] = "";
    int n = 0;
    struct dirent *e;
    while (dh && (e = readdir(dh)))
        if (!strncmp(e->d_name, "tune-", 5) && ++n == 1)
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (dh)
        closedir(dh);
    FILE *f = n == 1 ? fopen(path, "wb") : NULL;
    EXPECT(f != NULL, "%d tune files in %s", n, dir);
    if (!f)
        return -1;
    fputs(text, f);
    fclose(f);
    return 0;
}

static void test_tune(void)
{
    char cache[512], sub[600], kernel[64], tile[256], entry[4096];
    xattn_test_scratch_dir("cltune", cache, sizeof cache);
    snprintf(sub, sizeof sub, "%s/opencl", cache);
    setenv("XATTN_CACHE_DIR", cache, 1);
    unsetenv("XATTN_CL_TILE");

    xattn_ctx *ctx = cl_ctx();
    if (!ctx)
        return;
    int found = 1;
    EXPECT(xattn_opencl_tile_default(ctx, tile, sizeof tile) == XATTN_STATUS_OK &&
               strstr(tile, "bq=") && strstr(tile, "rows="),
           "default tile '%s': %s", tile, xattn_last_error());
    EXPECT(xattn_opencl_tune_lookup(ctx, XATTN_ALGO_FLASH, XATTN_DTYPE_F32, D, DV, tile,
                                    sizeof tile, &found) == XATTN_STATUS_OK &&
               !found,
           "lookup before any store: found %d '%s'", found, tile);
    /* Refused: a bad tile, AUTO, a head dim of 0, a short buffer. */
    EXPECT(xattn_opencl_tune_store(ctx, XATTN_ALGO_FLASH, XATTN_DTYPE_F32, D, DV, "bq=abc") ==
                   XATTN_STATUS_INVALID_ARGUMENT &&
               strstr(xattn_last_error(), "bq"),
           "bad tile: %s", xattn_last_error());
    EXPECT(xattn_opencl_tune_store(ctx, XATTN_ALGO_AUTO, XATTN_DTYPE_F32, D, DV, "bq=4") ==
               XATTN_STATUS_INVALID_ARGUMENT,
           "auto: %s", xattn_last_error());
    EXPECT(xattn_opencl_tune_store(ctx, XATTN_ALGO_FLASH, XATTN_DTYPE_F32, 0, DV, "bq=4") ==
               XATTN_STATUS_INVALID_SHAPE,
           "D 0: %s", xattn_last_error());
    EXPECT(xattn_opencl_tile_default(ctx, tile, 8) == XATTN_STATUS_INVALID_ARGUMENT,
           "short buffer: %s", xattn_last_error());
    /* Stored, and read back whole. */
    const char *won = "bq=4,bk=8,rows=3";
    EXPECT(xattn_opencl_tune_store(ctx, XATTN_ALGO_FLASH, XATTN_DTYPE_F32, D, DV, won) ==
               XATTN_STATUS_OK,
           "store: %s", xattn_last_error());
    EXPECT(xattn_opencl_tune_lookup(ctx, XATTN_ALGO_FLASH, XATTN_DTYPE_F32, D, DV, tile,
                                    sizeof tile, &found) == XATTN_STATUS_OK &&
               found && strstr(tile, "bq=4,bk=8,") && strstr(tile, "rows=3"),
           "lookup: found %d '%s' %s", found, tile, xattn_last_error());
    xattn_ctx_destroy(ctx);
    FILE *f = NULL;
    {
        DIR *dh = opendir(sub);
        struct dirent *e;
        char path[1200] = "";
        while (dh && (e = readdir(dh)))
            if (!strncmp(e->d_name, "tune-", 5))
                snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
        if (dh)
            closedir(dh);
        f = path[0] ? fopen(path, "rb") : NULL;
    }
    size_t elen = f ? fread(entry, 1, sizeof entry - 1, f) : 0;
    entry[elen] = '\0';
    if (f)
        fclose(f);
    EXPECT(elen > 0 && strstr(entry, "algo=flash\n") && strstr(entry, "tile=bq=4,bk=8,"),
           "the entry: '%s'", entry);

    /* A new context runs FLASH with it, and says so; NAIVE (no entry) not. */
    if (tune_run(XATTN_ALGO_FLASH, kernel, sizeof kernel) == 0)
        EXPECT(strstr(kernel, "-tuned"), "FLASH with a stored tile: kernel '%s'", kernel);
    if (tune_run(XATTN_ALGO_NAIVE, kernel, sizeof kernel) == 0)
        EXPECT(!strstr(kernel, "-tuned"), "NAIVE without one: kernel '%s'", kernel);
    /* XATTN_CL_TILE overrides it. */
    setenv("XATTN_CL_TILE", "bq=8,bk=8,rows=0", 1);
    if (tune_run(XATTN_ALGO_FLASH, kernel, sizeof kernel) == 0)
        EXPECT(!strstr(kernel, "-tuned") && !strstr(kernel, "-rows"),
               "XATTN_CL_TILE over a stored tile: kernel '%s'", kernel);
    unsetenv("XATTN_CL_TILE");

    /* Ignored with a warning: corrupt, stale (another driver), a bad tile, a
     * tile line too long. */
    char stale[4096], badtile[4096];
    snprintf(stale, sizeof stale, "%s", entry);
    char *drv = strstr(stale, "driver=");
    if (drv)
        drv[7] = drv[7] == 'X' ? 'Y' : 'X';
    snprintf(badtile, sizeof badtile, "%s", entry);
    char *tl = strstr(badtile, "tile=");
    if (tl)
        snprintf(tl, (size_t)(sizeof badtile - (size_t)(tl - badtile)), "tile=rows=17\n");
    /* A tile line longer than any tile (60 x "bq=4," then "bk=8"): its
     * first 255 bytes would parse, so it must not be cut to them. */
    char longtile[4096];
    snprintf(longtile, sizeof longtile, "%s", entry);
    tl = strstr(longtile, "tile=");
    if (tl) {
        size_t at = (size_t)(tl - longtile) + 5;
        for (int k = 0; k < 60 && at + 8 < sizeof longtile; k++, at += 5)
            memcpy(longtile + at, "bq=4,", 5);
        snprintf(longtile + at, sizeof longtile - at, "bk=8\n");
    }
    const char *bad[4] = {"\x01garbage\n", stale, badtile, longtile};
    const char *why[4] = {"corrupt", "stale", "bad tile", "corrupt"};
    xattn_set_log_callback(tune_log, NULL, XATTN_LOG_WARN);
    for (int i = 0; i < 4; i++) {
        g_warn[0] = '\0';
        if (tune_rewrite(sub, bad[i]) || tune_run(XATTN_ALGO_FLASH, kernel, sizeof kernel))
            continue;
        EXPECT(!strstr(kernel, "-tuned") && strstr(g_warn, "ignored") && strstr(g_warn, why[i]),
               "%s entry: kernel '%s', warning '%s'", why[i], kernel, g_warn);
    }
    xattn_set_log_callback(NULL, NULL, XATTN_LOG_WARN);
    unsetenv("XATTN_CACHE_DIR");
}

/* ---- paged KV caches ------------------------------------------------------ */

/* Three sequences (one without keys), GQA, Dv != D, padded q: the same keys
 * once contiguous [PB, PSK, PHKV, D] and once in shuffled pages of a pool.
 * Key slots past a sequence's length and the pages no sequence uses hold NaN,
 * the block table's unused entries an index far outside the pool: a kernel
 * that reads any of them spoils the comparison or faults. */
enum { PB = 3, PSQ = 3, PHQ = 4, PHKV = 2, PD = 16, PDV = 12, PSK = 37, PMAXP = 40 };
static const int32_t g_plq[PB] = {3, 2, 3}, g_plk[PB] = {37, 0, 21};

typedef struct paged_bufs {
    xattn_buffer *q, *kc, *vc, *kp, *vp, *o, *lse;
    int32_t table[PB * PMAXP];
    int64_t pages;
} paged_bufs;

/* The pool for page size ps in order `bhsd` (0: [pages, ps, Hkv, D], 1:
 * [pages, Hkv, ps, D]): returns the tensor of a pool buffer with n dims. */
static xattn_tensor pool_tensor(xattn_buffer *buf, int64_t pages, int64_t ps, int bhsd, int64_t n)
{
    xattn_tensor t = {buf, 0, XATTN_DTYPE_F32, {pages, ps, PHKV, n}, {0, 0, 0, 1}};
    t.strides[0] = ps * PHKV * n;
    t.strides[1] = bhsd ? n : PHKV * n;
    t.strides[2] = bhsd ? ps * n : n;
    return t;
}

/* Fills the contiguous and paged K (n = PD) or V (n = PDV) for page size ps. */
static int paged_fill(xattn_ctx *ctx, paged_bufs *pb, int64_t ps, int bhsd, int64_t n,
                      unsigned seed, xattn_buffer **contig, xattn_buffer **pool)
{
    const size_t cn = (size_t)PB * PSK * PHKV * (size_t)n, pn = (size_t)pb->pages * ps * PHKV * n;
    float *c = malloc(cn * 4), *p = malloc(pn * 4);
    int rc = -1;
    if (c && p) {
        fill(c, cn, seed);
        for (size_t e = 0; e < pn; e++)
            p[e] = NAN;
        const xattn_tensor pt = pool_tensor(NULL, pb->pages, ps, bhsd, n);
        for (int b = 0; b < PB; b++)
            for (int64_t j = 0; j < PSK; j++)
                for (int h = 0; h < PHKV; h++)
                    for (int64_t d = 0; d < n; d++) {
                        float *src = &c[(((size_t)b * PSK + j) * PHKV + h) * n + d];
                        if (j >= g_plk[b]) {
                            *src = NAN; /* past the length: never read */
                            continue;
                        }
                        const int64_t page = pb->table[b * PMAXP + j / ps];
                        p[page * pt.strides[0] + (j % ps) * pt.strides[1] + h * pt.strides[2] + d] =
                            *src;
                    }
        if (xattn_buffer_alloc(ctx, cn * 4, contig) == XATTN_STATUS_OK &&
            xattn_buffer_alloc(ctx, pn * 4, pool) == XATTN_STATUS_OK &&
            xattn_buffer_write(*contig, 0, c, cn * 4) == XATTN_STATUS_OK &&
            xattn_buffer_write(*pool, 0, p, pn * 4) == XATTN_STATUS_OK)
            rc = 0;
    }
    free(c);
    free(p);
    return rc;
}

static void paged_free(paged_bufs *pb)
{
    xattn_buffer *all[] = {pb->q, pb->kc, pb->vc, pb->kp, pb->vp, pb->o, pb->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        xattn_buffer_free(all[i]);
    memset(pb, 0, sizeof *pb);
}

/* Runs d and reads O and LSE back; 0 on success. */
static int paged_run(xattn_ctx *ctx, const xattn_attn_desc *d, const paged_bufs *pb, float *o,
                     float *lse, const char *what)
{
    xattn_status st = xattn_attention(ctx, d, NULL);
    EXPECT(st == XATTN_STATUS_OK, "%s: %s: %s", what, xattn_status_name(st), xattn_last_error());
    if (st != XATTN_STATUS_OK ||
        xattn_buffer_read(pb->o, 0, o, sizeof(float) * PB * PSQ * PHQ * PDV) ||
        xattn_buffer_read(pb->lse, 0, lse, sizeof(float) * PB * PHQ * PSQ))
        return -1;
    return 0;
}

static void paged_case(xattn_ctx *ctx, const char *tile, int64_t ps, int bhsd)
{
    paged_bufs pb;
    memset(&pb, 0, sizeof pb);
    /* Pages of every sequence from a shuffled pool with two spare pages. */
    int64_t used = 0;
    for (int b = 0; b < PB; b++)
        used += (g_plk[b] + ps - 1) / ps;
    pb.pages = used + 2;
    int32_t *perm = malloc((size_t)pb.pages * sizeof(int32_t));
    if (!perm) {
        EXPECT(0, "out of host memory");
        return;
    }
    for (int64_t i = 0; i < pb.pages; i++)
        perm[i] = (int32_t)i;
    uint32_t r = (uint32_t)(ps * 7 + bhsd);
    for (int64_t i = pb.pages - 1; i > 0; i--) {
        r = r * 1664525u + 1013904223u;
        const int64_t k = (int64_t)(r >> 8) % (i + 1);
        const int32_t t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    int64_t next = 0;
    for (int b = 0; b < PB; b++)
        for (int64_t g = 0; g < PMAXP; g++)
            pb.table[b * PMAXP + g] =
                g < (g_plk[b] + ps - 1) / ps ? perm[next++] : 1000000007 /* never read */;
    free(perm);

    static float hq[PB * PSQ * PHQ * PD];
    fill(hq, sizeof hq / 4, 21);
    if (xattn_buffer_alloc(ctx, sizeof hq, &pb.q) || xattn_buffer_write(pb.q, 0, hq, sizeof hq) ||
        xattn_buffer_alloc(ctx, sizeof(float) * PB * PSQ * PHQ * PDV, &pb.o) ||
        xattn_buffer_alloc(ctx, sizeof(float) * PB * PHQ * PSQ, &pb.lse) ||
        paged_fill(ctx, &pb, ps, bhsd, PD, 22, &pb.kc, &pb.kp) ||
        paged_fill(ctx, &pb, ps, bhsd, PDV, 23, &pb.vc, &pb.vp)) {
        EXPECT(0, "paged setup: %s", xattn_last_error());
        paged_free(&pb);
        return;
    }
    static const float slopes[PHQ] = {0.5f, 0.25f, 0.125f, 0.0625f};
    xattn_attn_desc c;
    xattn_attn_desc_init(&c);
    c.q = xattn_tensor_bshd(pb.q, 0, XATTN_DTYPE_F32, PB, PSQ, PHQ, PD);
    c.k = xattn_tensor_bshd(pb.kc, 0, XATTN_DTYPE_F32, PB, PSK, PHKV, PD);
    c.v = xattn_tensor_bshd(pb.vc, 0, XATTN_DTYPE_F32, PB, PSK, PHKV, PDV);
    c.o = xattn_tensor_bshd(pb.o, 0, XATTN_DTYPE_F32, PB, PSQ, PHQ, PDV);
    xattn_tensor l = {pb.lse, 0, XATTN_DTYPE_F32, {PB, PHQ, PSQ, 1}, {PHQ * PSQ, PSQ, 1, 1}};
    c.lse = l;
    c.seqlens_q = g_plq;
    c.seqlens_k = g_plk;
    static float o_c[PB * PSQ * PHQ * PDV], o_p[PB * PSQ * PHQ * PDV];
    static float l_c[PB * PHQ * PSQ], l_p[PB * PHQ * PSQ];
    static double ref[PB * PSQ * PHQ * PDV];
    for (int opt = 0; opt < 2; opt++) {
        /* 0: causal (bottom-right) with ALiBi; 1: a two-sided window, softcap. */
        c.causal = opt == 0;
        c.alibi_slopes = opt == 0 ? slopes : NULL;
        c.window_left = opt == 0 ? -1 : 9;
        c.window_right = opt == 0 ? -1 : 2;
        c.softcap = opt == 0 ? 0.0f : 2.5f;
        for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
            c.algo = (xattn_algo)a;
            c.num_splits = a == XATTN_ALGO_SPLITKV ? 3 : 0;
            xattn_attn_desc p = c;
            p.k = pool_tensor(pb.kp, pb.pages, ps, bhsd, PD);
            p.v = pool_tensor(pb.vp, pb.pages, ps, bhsd, PDV);
            p.block_table = pb.table;
            p.max_pages_per_seq = PMAXP;
            char what[160];
            snprintf(what, sizeof what, "tile '%s', page size %lld%s, options %d, %s", tile,
                     (long long)ps, bhsd ? " (pages [Hkv, ps, D])" : "", opt,
                     xattn_algo_name(c.algo));
            if (paged_run(ctx, &c, &pb, o_c, l_c, what) || paged_run(ctx, &p, &pb, o_p, l_p, what))
                continue;
            EXPECT(!memcmp(o_c, o_p, sizeof o_c) && !memcmp(l_c, l_p, sizeof l_c),
                   "%s: paged output differs from contiguous", what);
            double err = 1e30;
            if (xattn_reference_attention(ctx, &p, ref, NULL) == XATTN_STATUS_OK) {
                err = 0.0;
                for (size_t i = 0; i < sizeof o_p / 4; i++) {
                    const double e = fabs((double)o_p[i] - ref[i]);
                    if (!(e <= err))
                        err = e;
                }
            }
            EXPECT(err < 1e-5, "%s: paged error %g against the reference", what, err);
        }
    }
    paged_free(&pb);
}

/* A block table whose rows are too long for the kernels' 32-bit index of
 * their parameters runs: the call uploads only the entries its sequences use
 * (here one a sequence); the table's 8 GiB are reserved address space of which
 * only those two entries are touched. */
static void paged_too_large(xattn_ctx *ctx)
{
    const int64_t mp = ((int64_t)1 << 30) + 1;
    const size_t bytes = (size_t)(2 * mp) * sizeof(int32_t);
    int32_t *table = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) {
        printf("SKIP paged table too large: mmap of %zu bytes failed\n", bytes);
        return;
    }
    table[0] = 0;
    table[mp] = 1;
    static const int32_t lq[2] = {1, 1}, lk[2] = {1, 1};
    xattn_buffer *q = NULL, *kv = NULL, *o = NULL;
    if (xattn_buffer_alloc(ctx, 2 * PD * 4, &q) || xattn_buffer_alloc(ctx, 2 * PD * 4, &kv) ||
        xattn_buffer_alloc(ctx, 2 * PD * 4, &o)) {
        EXPECT(0, "setup: %s", xattn_last_error());
    } else {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 2, 1, 1, PD);
        d.k = xattn_tensor_bshd(kv, 0, XATTN_DTYPE_F32, 2, 1, 1, PD);
        d.v = d.k;
        d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 2, 1, 1, PD);
        d.seqlens_q = lq;
        d.seqlens_k = lk;
        d.block_table = table;
        d.max_pages_per_seq = mp;
        const xattn_status st = xattn_attention(ctx, &d, NULL);
        EXPECT(st == XATTN_STATUS_OK, "a table of 2 x (2^30 + 1) entries, one used a row: %s: %s",
               xattn_status_name(st), xattn_last_error());
    }
    xattn_buffer_free(q);
    xattn_buffer_free(kv);
    xattn_buffer_free(o);
    munmap(table, bytes);
}

static void test_paged(void)
{
    /* The default tile (the row form on CPU devices), then small tiles of
     * both forms: key tiles of 8 that pages of 1 and 3 cross and pages of 8,
     * 16 and 64 do not (the one-page fast path), and both NAIVE forms. */
    const char *tiles[] = {"", "bq=4,bk=8,nt=4,rwg=8,cwg=8,rows=0,naive_local=1",
                           "bq=4,bk=8,nt=4,rwg=8,cwg=8,rows=3,naive_local=0"};
    const int64_t sizes[] = {1, 3, 8, 16, 64};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        xattn_ctx *ctx = cl_ctx_tile(tiles[t]);
        for (size_t i = 0; ctx && i < sizeof sizes / sizeof sizes[0]; i++)
            for (int bhsd = 0; bhsd < 2; bhsd++)
                paged_case(ctx, tiles[t], sizes[i], bhsd);
        if (ctx && t == 0)
            paged_too_large(ctx);
        xattn_ctx_destroy(ctx);
    }
    unsetenv("XATTN_CL_TILE");
}

/* ---- fp8 K/V caches -------------------------------------------------------- */

/*
 * Every byte of both fp8 formats through the kernels' decoders, exactly: one
 * key, FH heads of FD dims, head h holding codes FD*h .. FD*h + FD - 1 in its
 * K and V rows. With one key the softmax weight is exactly 1, so O[i, h, d]
 * is V's value times v_scale[h] (inf and NaN codes included); query row i of
 * head h is one-hot at dim i, so its LSE is K's dim i times k_scale[h] (K
 * holds 0 for the codes that are not finite, which would spoil the dot
 * product). Every algorithm, both kernel forms (row form and work-group form
 * with NAIVE's local-memory tiles).
 */
enum { FH = 4, FD = 64 };

static void fp8_case(xattn_ctx *ctx, xattn_dtype dt, xattn_algo algo, const char *tile)
{
    float hq[FD * FH * FD], ks[FH], vs[FH], o[FD * FH * FD], lse[FH * FD];
    uint8_t hk[FH * FD], hv[FH * FD];
    for (int c = 0; c < FH * FD; c++) {
        const float x = xattn_fp8_to_f32((uint8_t)c, dt);
        hv[c] = (uint8_t)c;
        hk[c] = isfinite(x) ? (uint8_t)c : 0;
    }
    for (int i = 0; i < FD; i++)
        for (int h = 0; h < FH; h++)
            for (int d = 0; d < FD; d++)
                hq[(i * FH + h) * FD + d] = d == i ? 1.0f : 0.0f;
    for (int h = 0; h < FH; h++) {
        ks[h] = 3.0f + (float)h;
        vs[h] = ldexpf(1.0f, -1 - h);
    }
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL, *bks = NULL,
                 *bvs = NULL;
    int ok = xattn_buffer_alloc(ctx, sizeof hq, &bq) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof hk, &bk) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof hv, &bv) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof o, &bo) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof lse, &bl) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof ks, &bks) == XATTN_STATUS_OK &&
             xattn_buffer_alloc(ctx, sizeof vs, &bvs) == XATTN_STATUS_OK &&
             xattn_buffer_write(bq, 0, hq, sizeof hq) == XATTN_STATUS_OK &&
             xattn_buffer_write(bk, 0, hk, sizeof hk) == XATTN_STATUS_OK &&
             xattn_buffer_write(bv, 0, hv, sizeof hv) == XATTN_STATUS_OK &&
             xattn_buffer_write(bks, 0, ks, sizeof ks) == XATTN_STATUS_OK &&
             xattn_buffer_write(bvs, 0, vs, sizeof vs) == XATTN_STATUS_OK;
    EXPECT(ok, "fp8 buffers: %s", xattn_last_error());
    if (ok) {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, 1, FD, FH, FD);
        d.k = xattn_tensor_bshd(bk, 0, dt, 1, 1, FH, FD);
        d.v = xattn_tensor_bshd(bv, 0, dt, 1, 1, FH, FD);
        d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, 1, FD, FH, FD);
        const xattn_tensor l = {bl, 0, XATTN_DTYPE_F32, {1, FH, FD, 1}, {FH * FD, FD, 1, 1}};
        d.lse = l;
        d.k_scale = xattn_tensor_bshd(bks, 0, XATTN_DTYPE_F32, 1, 1, FH, 1);
        d.v_scale = xattn_tensor_bshd(bvs, 0, XATTN_DTYPE_F32, 1, 1, FH, 1);
        d.scale = 1.0f;
        d.algo = algo;
        const xattn_status st = xattn_attention(ctx, &d, NULL);
        EXPECT(st == XATTN_STATUS_OK, "fp8 %s %s tile '%s': %s: %s", xattn_dtype_name(dt),
               xattn_algo_name(algo), tile, xattn_status_name(st), xattn_last_error());
        if (st == XATTN_STATUS_OK && xattn_buffer_read(bo, 0, o, sizeof o) == XATTN_STATUS_OK &&
            xattn_buffer_read(bl, 0, lse, sizeof lse) == XATTN_STATUS_OK) {
            int bad_o = 0, bad_l = 0, first = -1;
            for (int i = 0; i < FD; i++)
                for (int h = 0; h < FH; h++) {
                    const float wl = xattn_fp8_to_f32(hk[h * FD + i], dt) * ks[h];
                    if (lse[h * FD + i] != wl) {
                        bad_l++;
                        first = first < 0 ? h * FD + i : first;
                    }
                    for (int c = 0; c < FD; c++) {
                        const float want = xattn_fp8_to_f32(hv[h * FD + c], dt) * vs[h];
                        const float got = o[(i * FH + h) * FD + c];
                        if (isnan(want) ? !isnan(got) : got != want) {
                            bad_o++;
                            first = first < 0 ? h * FD + c : first;
                        }
                    }
                }
            EXPECT(!bad_o && !bad_l,
                   "fp8 %s %s tile '%s': %d outputs and %d LSEs differ from the codes' values "
                   "(first at code 0x%02x)",
                   xattn_dtype_name(dt), xattn_algo_name(algo), tile, bad_o, bad_l, first);
        }
    }
    xattn_buffer *all[] = {bq, bk, bv, bo, bl, bks, bvs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        xattn_buffer_free(all[i]);
}

static void test_fp8(void)
{
    const char *tiles[] = {"", "bq=4,bk=8,nt=4,rwg=8,cwg=8,rows=0,naive_local=1"};
    const xattn_algo algos[] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        xattn_ctx *ctx = cl_ctx_tile(tiles[t]);
        for (int e5 = 0; ctx && e5 < 2; e5++)
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
                fp8_case(ctx, e5 ? XATTN_DTYPE_FP8_E5M2 : XATTN_DTYPE_FP8_E4M3, algos[a], tiles[t]);
        xattn_ctx_destroy(ctx);
    }
    unsetenv("XATTN_CL_TILE");
}

static void test_big_buffers(void)
{
    xattn_ctx *ctx = cl_ctx();
    if (!ctx)
        return;
    /* An odd size past 4 MiB: the host allocation is rounded up to 2 MiB. */
    const size_t n = ((size_t)6 << 20) / sizeof(float) + 3;
    float *w = malloc(n * sizeof *w), *r = malloc(n * sizeof *r);
    xattn_buffer *b = NULL;
    if (w && r && xattn_buffer_alloc(ctx, n * sizeof(float), &b) == XATTN_STATUS_OK) {
        for (size_t i = 0; i < n; i++)
            w[i] = (float)i;
        EXPECT_OK(xattn_buffer_write(b, 0, w, n * sizeof(float)));
        const size_t tail = ((size_t)5 << 20) / sizeof(float);
        for (size_t i = tail; i < n; i++)
            w[i] = -(float)i;
        EXPECT_OK(
            xattn_buffer_write(b, tail * sizeof(float), w + tail, (n - tail) * sizeof(float)));
        memset(r, 0, n * sizeof *r);
        EXPECT_OK(xattn_buffer_read(b, 0, r, n * sizeof(float)));
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (r[i] != w[i])
                bad = i;
        EXPECT(bad == n, "element %zu of %zu: %g, wrote %g", bad, n, bad < n ? r[bad] : 0.0,
               bad < n ? w[bad] : 0.0);
    } else {
        EXPECT(0, "6 MiB buffer: %s", xattn_last_error());
    }
    xattn_buffer_free(b);
    free(w);
    free(r);

    /* K and V of 4.4 MiB each (Sk 9000, 2 KV heads, D 64, f32). */
    xattn_ctx *cpu = NULL;
    EXPECT_OK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu));
    xattn_test_problem pc, pg;
    if (cpu &&
        xattn_test_problem_make(&pc, cpu, 1, 3, 9000, 4, 2, 64, 64, 0, 7) == XATTN_STATUS_OK) {
        if (xattn_test_problem_make(&pg, ctx, 1, 3, 9000, 4, 2, 64, 64, 0, 7) == XATTN_STATUS_OK) {
            float *oc = malloc(pc.no * sizeof *oc), *og = malloc(pc.no * sizeof *og);
            for (int a = XATTN_ALGO_FLASH; a <= XATTN_ALGO_SPLITKV && oc && og; a++) {
                pc.desc.algo = pg.desc.algo = (xattn_algo)a;
                EXPECT_OK(xattn_attention(cpu, &pc.desc, NULL));
                EXPECT_OK(xattn_attention(ctx, &pg.desc, NULL));
                EXPECT_OK(xattn_buffer_read(pc.o, 0, oc, pc.no * sizeof(float)));
                EXPECT_OK(xattn_buffer_read(pg.o, 0, og, pc.no * sizeof(float)));
                double num = 0, den = 0;
                for (size_t i = 0; i < pc.no; i++) {
                    num += ((double)og[i] - oc[i]) * ((double)og[i] - oc[i]);
                    den += (double)oc[i] * oc[i];
                }
                EXPECT(den > 0 && sqrt(num / den) < 1e-5, "%s: rel. L2 %g from the CPU backend",
                       xattn_algo_name((xattn_algo)a), den > 0 ? sqrt(num / den) : -1.0);
            }
            free(oc);
            free(og);
            xattn_test_problem_free(&pg);
        } else {
            EXPECT(0, "OpenCL problem: %s", xattn_last_error());
        }
        xattn_test_problem_free(&pc);
    } else {
        EXPECT(0, "CPU problem: %s", xattn_last_error());
    }
    xattn_ctx_destroy(cpu);
    xattn_ctx_destroy(ctx);
}

static const test_entry tests[] = {
    {"devices", test_devices},     {"build_fail", test_build_fail},
    {"mem_cache", test_mem_cache}, {"disk_cache", test_disk_cache},
    {"interop", test_interop},     {"tiles", test_tiles},
    {"run_info", test_run_info},   {"counts", test_counts},
    {"tune", test_tune},           {"big_buffers", test_big_buffers},
    {"paged", test_paged},         {"fp8", test_fp8},
};

/* XATTN_TEST_POCL_CPU=haswell: this run is one of the reruns with PoCL
 * compiling the kernels for another CPU model (POCL_KERNELLIB_NAME, see
 * tests/opencl/CMakeLists.txt). 1 when OpenCL device 0 is PoCL compiling for
 * that model (its name is "pthread-<model>-<cpu>"), else 0 with the reason:
 * another driver, or a host that lacks the model's instructions (PoCL then
 * falls back to the best model the host has). */
static int pocl_cpu_as_asked(void)
{
    const char *want = getenv("XATTN_TEST_POCL_CPU");
    if (!want || !*want)
        return 1;
    xattn_device_info info;
    if (xattn_device_get_info(XATTN_BACKEND_OPENCL, 0, &info) != XATTN_STATUS_OK) {
        printf("SKIP: OpenCL device 0: %s\n", xattn_last_error());
        return 0;
    }
    char pat[96];
    snprintf(pat, sizeof pat, "-%s-", want);
    if (!strstr(info.name, pat)) {
        const char *lib = getenv("POCL_KERNELLIB_NAME");
        printf("SKIP: OpenCL device 0 is '%s', not PoCL compiling for %s "
               "(POCL_KERNELLIB_NAME=%s)\n",
               info.name, want, lib ? lib : "");
        return 0;
    }
    printf("OpenCL device 0: %s\n", info.name);
    return 1;
}

int main(int argc, char **argv)
{
    if (xattn_backend_available(XATTN_BACKEND_OPENCL) != XATTN_STATUS_OK) {
        printf("SKIP: OpenCL backend unavailable: %s\n", xattn_last_error());
        return 77;
    }
    if (!pocl_cpu_as_asked())
        return 77;
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name))
            continue;
        int before = g_failed;
        printf("%s\n", tests[i].name);
        tests[i].fn();
        printf("%s: %s\n", tests[i].name, g_failed == before ? "ok" : "FAILED");
        ran++;
    }
    if (!ran) {
        printf("unknown test '%s'; tests:", argc > 1 ? argv[1] : "");
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
            printf(" %s", tests[i].name);
        printf("\n");
        return 2;
    }
    return xattn_test_summary();
}
