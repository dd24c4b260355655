/*
 * test_reliability_cl: backend faults and resource exhaustion on the OpenCL
 * backend (docs/guarantees.md). Built only when the OpenCL backend is; exits
 * 77 (ctest: skipped) when no OpenCL device is usable.
 *
 *   faults       the application releases its own cl_context, queue and
 *                cl_mem right after handing them over: the library's references
 *                keep them alive, results stay right, and the library drops
 *                exactly its references on xattn_buffer_free / xattn_ctx_destroy;
 *                an image where a buffer is expected is refused with its type;
 *   exhaustion   a buffer beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE and a NAIVE score
 *                matrix beyond it return OUT_OF_MEMORY (NAIVE's message suggests
 *                FLASH), XATTN_OPT_MEMORY_LIMIT holds for buffers and workspaces,
 *                the counters are back afterwards and the context still runs;
 *   serving      paged caches with appends (xattn_test_serving.h): a block table
 *                inside the K cache (wrapped host memory, CL_MEM_USE_HOST_PTR)
 *                that the append writes, a memory-limit sweep (a refused call
 *                writes nothing), an append over another sequence's key, the
 *                append check's memory; a build failure writes nothing either;
 *   no-driver    run with OCL_ICD_VENDORS pointing at an empty folder: the backend
 *                is compiled but unavailable, with the ICD loader's error name and
 *                code in the message; contexts are refused; AUTO falls to the CPU.
 *
 * Usage: test_reliability_cl [faults|exhaustion|serving|no-driver]   (no name: all but
 * no-driver)
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_opencl.h"
#include "xattn_reference.h"
#include "xattn_test.h"
#include "xattn_test_serving.h"

/* The problem of these tests: B=1, Sq=7, Sk=40, Hq=2, Hkv=1, D=Dv=16, f32, BSHD. */
enum { SQ = 7, SK = 40, HQ = 2, HKV = 1, D = 16 };
#define NQ (SQ * HQ * D)
#define NK (SK * HKV * D)
#define NO (SQ * HQ * D)
#define NL (HQ * SQ)

static void fill(float *x, size_t n, unsigned seed)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        if (fabsf(x[i]) < 0.01f)
            x[i] = 0.5f;
    }
}

static void desc_of(xattn_attn_desc *d, xattn_buffer *q, xattn_buffer *k, xattn_buffer *v,
                    xattn_buffer *o, xattn_buffer *l)
{
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 1, SQ, HQ, D);
    d->k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, SK, HKV, D);
    d->v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, SK, HKV, D);
    d->o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 1, SQ, HQ, D);
    xattn_tensor lt = {l, 0, XATTN_DTYPE_F32, {1, HQ, SQ, 1}, {HQ * SQ, SQ, 1, 1}};
    d->lse = lt;
    d->causal = 1;
}

/* Runs d and compares O and LSE with the reference; returns the max error. */
static double run_and_compare(xattn_ctx *ctx, xattn_attn_desc *d, xattn_algo algo)
{
    static double o_ref[NO], l_ref[NL];
    static float o[NO], l[NL];
    d->algo = algo;
    xattn_status st = xattn_attention(ctx, d, NULL);
    EXPECT(st == XATTN_STATUS_OK, "%s: %s: %s", xattn_algo_name(algo), xattn_status_name(st),
           xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return INFINITY;
    st = xattn_reference_attention(ctx, d, o_ref, l_ref);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(d->o.buffer, 0, o, sizeof o);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(d->lse.buffer, 0, l, sizeof l);
    EXPECT(st == XATTN_STATUS_OK, "reading back: %s", xattn_last_error());
    double m = 0;
    for (int i = 0; i < NO; i++)
        m = fmax(m, fabs((double)o[i] - o_ref[i]));
    for (int i = 0; i < NL; i++)
        m = fmax(m, fabs((double)l[i] - l_ref[i]));
    return isnan(m) ? INFINITY : m;
}

static int first_device(cl_platform_id *plat, cl_device_id *dev)
{
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0)
        return 0;
    cl_platform_id ps[16];
    clGetPlatformIDs(np < 16 ? np : 16, ps, NULL);
    for (cl_uint i = 0; i < np && i < 16; i++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, dev, &nd) == CL_SUCCESS && nd > 0) {
            *plat = ps[i];
            return 1;
        }
    }
    return 0;
}

static cl_uint refcount_mem(cl_mem m)
{
    cl_uint n = 0;
    clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

static cl_uint refcount_queue(cl_command_queue q)
{
    cl_uint n = 0;
    clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

static cl_uint refcount_ctx(cl_context c)
{
    cl_uint n = 0;
    clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

/* ---- faults -------------------------------------------------------------------- */

static void test_faults(void)
{
    cl_platform_id plat;
    cl_device_id dev;
    if (!first_device(&plat, &dev)) {
        EXPECT(0, "no OpenCL device for the application");
        return;
    }
    cl_int e;
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    cl_context cctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    cl_command_queue queue = clCreateCommandQueue(cctx, dev, 0, &e);
    static float hq[NQ], hk[NK], hv[NK], zero[NO];
    fill(hq, NQ, 1), fill(hk, NK, 2), fill(hv, NK, 3);
    cl_mem mq = clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof hq, hq, &e);
    cl_mem mk = clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof hk, hk, &e);
    cl_mem mv = clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof hv, hv, &e);
    cl_mem mo =
        clCreateBuffer(cctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &e);
    cl_mem ml = clCreateBuffer(cctx, CL_MEM_READ_WRITE, NL * sizeof(float), NULL, &e);
    EXPECT(cctx && queue && mq && mk && mv && mo && ml, "the application's OpenCL objects");

    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_opencl_ctx_create(cctx, dev, queue, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "xattn_opencl_ctx_create: %s", xattn_last_error());
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL, *bl = NULL;
    if (st == XATTN_STATUS_OK) {
        cl_mem ms[5] = {mq, mk, mv, mo, ml};
        xattn_buffer **bs[5] = {&bq, &bk, &bv, &bo, &bl};
        for (int i = 0; i < 5; i++)
            EXPECT(xattn_opencl_buffer_wrap(ctx, ms[i], bs[i]) == XATTN_STATUS_OK, "wrap %d: %s", i,
                   xattn_last_error());
    }
    EXPECT(refcount_mem(mq) == 2 && refcount_queue(queue) >= 2 && refcount_ctx(cctx) >= 2,
           "the library holds its own references (mem %u, queue %u, context %u)", refcount_mem(mq),
           refcount_queue(queue), refcount_ctx(cctx));

    /* The application lets go of everything: only the library's references
     * keep the objects alive now. */
    cl_uint q_before = refcount_queue(queue), c_before = refcount_ctx(cctx);
    clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv);
    clReleaseMemObject(mo), clReleaseMemObject(ml);
    clReleaseCommandQueue(queue);
    clReleaseContext(cctx);
    EXPECT(refcount_mem(mq) == 1 && refcount_queue(queue) == q_before - 1 &&
               refcount_ctx(cctx) == c_before - 1,
           "after the application's release: mem %u, queue %u, context %u", refcount_mem(mq),
           refcount_queue(queue), refcount_ctx(cctx));
    if (st == XATTN_STATUS_OK) {
        xattn_attn_desc d;
        desc_of(&d, bq, bk, bv, bo, bl);
        static const xattn_algo algos[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
        for (int a = 0; a < 3; a++) {
            double err = run_and_compare(ctx, &d, algos[a]);
            EXPECT(err < 1e-4, "%s on released application objects: max error %g",
                   xattn_algo_name(algos[a]), err);
        }
        /* xattn_buffer_free drops exactly the library's reference */
        clRetainMemObject(mq);
        cl_uint before = refcount_mem(mq);
        xattn_buffer_free(bq);
        EXPECT(refcount_mem(mq) == before - 1, "xattn_buffer_free: %u -> %u references", before,
               refcount_mem(mq));
        clReleaseMemObject(mq);

        /* an image is not a buffer */
        cl_bool images = CL_FALSE;
        clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images, NULL);
        if (images) {
            cl_image_format fmt = {CL_RGBA, CL_FLOAT};
            cl_image_desc idesc;
            memset(&idesc, 0, sizeof idesc);
            idesc.image_type = CL_MEM_OBJECT_IMAGE2D;
            idesc.image_width = 4;
            idesc.image_height = 4;
            cl_mem img = clCreateImage(cctx, CL_MEM_READ_WRITE, &fmt, &idesc, NULL, &e);
            if (e == CL_SUCCESS) {
                xattn_buffer *bad = NULL;
                st = xattn_opencl_buffer_wrap(ctx, img, &bad);
                EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && bad == NULL &&
                           strstr(xattn_last_error(), "image"),
                       "an image as a buffer: %s: %s", xattn_status_name(st), xattn_last_error());
                clReleaseMemObject(img);
            } else {
                printf("  (clCreateImage failed: %d; image check skipped)\n", e);
            }
        }
        /* xattn_ctx_destroy drops the queue's and context's references */
        clRetainCommandQueue(queue);
        clRetainContext(cctx);
        q_before = refcount_queue(queue);
        c_before = refcount_ctx(cctx);
        xattn_buffer_free(bk), xattn_buffer_free(bv), xattn_buffer_free(bo), xattn_buffer_free(bl);
        xattn_ctx_destroy(ctx);
        EXPECT(refcount_queue(queue) < q_before && refcount_ctx(cctx) < c_before,
               "xattn_ctx_destroy: queue %u -> %u, context %u -> %u references", q_before,
               refcount_queue(queue), c_before, refcount_ctx(cctx));
        clReleaseCommandQueue(queue);
        clReleaseContext(cctx);
    }
    printf("  released application objects: the library's references keep them alive\n");
}

/* ---- exhaustion ----------------------------------------------------------------- */

static void test_exhaustion(void)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "context: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return;
    xattn_device_info info;
    xattn_ctx_device_info(ctx, &info);
    xattn_mem_stats m0, m1;
    xattn_ctx_mem_stats(ctx, &m0);

    /* A buffer larger than the device allows at once. */
    xattn_buffer *huge = NULL;
    st = xattn_buffer_alloc(ctx, (size_t)1 << 62, &huge);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && huge == NULL, "2^62-byte buffer: %s: %s",
           xattn_status_name(st), xattn_last_error());
    printf("  2^62-byte buffer: %s: %s\n", xattn_status_name(st), xattn_last_error());
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.current_bytes == m0.current_bytes, "counters after the refusal: %llu, before %llu",
           (unsigned long long)m1.current_bytes, (unsigned long long)m0.current_bytes);

    /* The problem's buffers, then NAIVE over a score matrix of 64 x 2^32
     * floats (1 TiB, beyond any device), broadcast inputs. */
    xattn_test_problem p;
    xattn_buffer *bo2 = NULL;
    st = xattn_test_problem_make(&p, ctx, 1, SQ, SK, HQ, HKV, D, D, 1, 4);
    const int64_t S = 1 << 16, H = 64;
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (size_t)(S * H) * 2, &bo2);
    EXPECT(st == XATTN_STATUS_OK, "buffers: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK)
        goto done;
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    xattn_tensor tq = {p.q, 0, XATTN_DTYPE_F16, {1, S, H, 1}, {0, 0, 0, 1}};
    xattn_tensor tk = {p.k, 0, XATTN_DTYPE_F32, {1, S, 1, 1}, {0, 0, 0, 1}};
    d.q = tq, d.k = tk, d.v = tk;
    d.o = xattn_tensor_bshd(bo2, 0, XATTN_DTYPE_F16, 1, S, H, 1);
    d.algo = XATTN_ALGO_NAIVE;
    xattn_ctx_mem_stats(ctx, &m0);
    st = xattn_attention(ctx, &d, NULL);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && strstr(msg, "FLASH"),
           "NAIVE with 1 TiB of scores: %s: %s", xattn_status_name(st), msg);
    printf("  NAIVE, Hq=64 Sq=Sk=2^16 (1 TiB of scores): %s: %s\n", xattn_status_name(st), msg);
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.current_bytes == m0.current_bytes,
           "counters after NAIVE's refusal: %llu, before %llu",
           (unsigned long long)m1.current_bytes, (unsigned long long)m0.current_bytes);

    /* The memory limit: workspaces of NAIVE do not fit, FLASH's do. */
    d = p.desc;
    d.causal = 1;
    xattn_run_info ri;
    d.algo = XATTN_ALGO_NAIVE;
    st = xattn_attention(ctx, &d, &ri);
    EXPECT(st == XATTN_STATUS_OK && ri.workspace_bytes > 0, "NAIVE, unlimited: %s",
           xattn_last_error());
    xattn_ctx_mem_stats(ctx, &m0);
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT,
                         (int64_t)(m0.current_bytes + ri.workspace_bytes - 1));
    st = xattn_attention(ctx, &d, NULL);
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && strstr(msg, "XATTN_OPT_MEMORY_LIMIT"),
           "NAIVE one byte short of its workspace: %s: %s", xattn_status_name(st), msg);
    xattn_buffer *extra = NULL;
    st = xattn_buffer_alloc(ctx, (size_t)ri.workspace_bytes, &extra);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "a buffer over the limit: %s", xattn_status_name(st));
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.current_bytes == m0.current_bytes, "counters under the limit: %llu, before %llu",
           (unsigned long long)m1.current_bytes, (unsigned long long)m0.current_bytes);
    double err = run_and_compare(ctx, &d, XATTN_ALGO_FLASH);
    EXPECT(err < 1e-4, "FLASH under the limit: max error %g", err);
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    err = run_and_compare(ctx, &d, XATTN_ALGO_NAIVE);
    EXPECT(err < 1e-4, "NAIVE after the limit is lifted: max error %g", err);
    printf("  memory limit: NAIVE's %llu-byte workspace refused one byte short; FLASH ran\n",
           (unsigned long long)ri.workspace_bytes);
done:
    xattn_test_problem_free(&p);
    xattn_buffer_free(bo2);
    xattn_ctx_mem_stats(ctx, &m1);
    xattn_ctx_destroy(ctx);
}

/* ---- serving inputs -------------------------------------------------------------- */

/* Copies from/name to to/name, with an #error at the end when `broken`. */
static int copy_source(const char *from_dir, const char *name, const char *to_dir, int broken)
{
    char from[2048], to[2048], buf[4096];
    snprintf(from, sizeof from, "%s/%s", from_dir, name);
    snprintf(to, sizeof to, "%s/%s", to_dir, name);
    FILE *fi = fopen(from, "rb"), *fo = fopen(to, "wb");
    size_t got;
    while (fi && fo && (got = fread(buf, 1, sizeof buf, fi)) > 0)
        fwrite(buf, 1, got, fo);
    if (fo && broken)
        fputs("\n#error xattn_reliability_broken_source\n", fo);
    const int ok = fi && fo;
    if (fi)
        fclose(fi);
    if (fo)
        fclose(fo);
    return ok;
}

/* The kernel sources in a folder of their own (XATTN_CL_SOURCE_DIR), each .cl
 * with an #error: every build fails. The repository is found from this file's
 * path; 0 when its sources are not there. */
static int broken_sources(char *dir, size_t n)
{
    char root[1024], cl[1100], common[1100];
    snprintf(root, sizeof root, "%s", __FILE__);
    char *cut = strstr(root, "/tests/test_reliability_cl.c");
    if (!cut)
        return 0;
    *cut = '\0';
    snprintf(cl, sizeof cl, "%s/kernels_cl", root);
    snprintf(common, sizeof common, "%s/kernels_common", root);
    DIR *in = opendir(cl);
    if (!in)
        return 0;
    xattn_test_scratch_dir("relclsrc", dir, n);
    int files = dir[0] && copy_source(common, "xattn_semantics.h", dir, 0);
    struct dirent *e;
    while (files && (e = readdir(in)) != NULL) {
        const char *dot = strrchr(e->d_name, '.');
        if (dot && !strcmp(dot, ".cl"))
            files = copy_source(cl, e->d_name, dir, 1) ? files + 1 : 0;
    }
    closedir(in);
    return files;
}

/* A paged append whose program does not build: BUILD_FAILED, the cache as it was. */
static void test_serving_build_failed(void)
{
    char dir[512] = "", cache[512] = "";
    if (!broken_sources(dir, sizeof dir)) {
        SKIP("build failure: the kernel sources are not beside this test's source");
        if (dir[0])
            xattn_test_rm_tree(dir);
        return;
    }
    xattn_test_scratch_dir("relclcache", cache, sizeof cache);
    setenv("XATTN_CL_SOURCE_DIR", dir, 1);
    setenv("XATTN_CACHE_DIR", cache, 1);
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "context on broken sources: %s", xattn_last_error());
    static const int32_t table[4] = {3, 0, 2, 4};
    const int32_t lens[2] = {3, 5};
    sv_call c;
    float k0[SV_POOL], v0[SV_POOL], k1[SV_POOL], v1[SV_POOL];
    if (st == XATTN_STATUS_OK && sv_make(&c, ctx, 2, 2, table, 2, lens, NULL) &&
        sv_snapshot(&c, SV_POOL, k0, v0)) {
        int written = 0;
        for (int a = 0; a < 3; a++) {
            c.d.algo = sv_algos[a];
            st = xattn_attention(ctx, &c.d, NULL);
            EXPECT(st == XATTN_STATUS_BUILD_FAILED, "%s on broken sources: %s: %.200s",
                   xattn_algo_name(sv_algos[a]), xattn_status_name(st), xattn_last_error());
            const int same = sv_snapshot(&c, SV_POOL, k1, v1) && !memcmp(k0, k1, sizeof k0) &&
                             !memcmp(v0, v1, sizeof v0);
            written += !same;
            EXPECT(same, "%s: the call that failed to build wrote the cache",
                   xattn_algo_name(sv_algos[a]));
        }
        printf("  paged append whose program fails to build (3 algorithms): %s, %d wrote the "
               "cache\n",
               xattn_status_name(st), written);
    }
    sv_free(&c);
    xattn_ctx_destroy(ctx);
    unsetenv("XATTN_CL_SOURCE_DIR");
    unsetenv("XATTN_CACHE_DIR");
    xattn_test_rm_tree(dir);
    xattn_test_rm_tree(cache);
}

static void test_serving(void)
{
    test_serving_build_failed();
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "context: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return;
    sv_test_all(ctx);
    xattn_ctx_destroy(ctx);
}

/* ---- no driver ---------------------------------------------------------------- */

static int test_no_driver(void)
{
    EXPECT(xattn_backend_compiled(XATTN_BACKEND_OPENCL) == 1, "the OpenCL backend is compiled in");
    xattn_status st = xattn_backend_available(XATTN_BACKEND_OPENCL);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    EXPECT(st == XATTN_STATUS_BACKEND_UNAVAILABLE,
           "without an ICD: %s (is OCL_ICD_VENDORS set "
           "to an empty folder?)",
           xattn_status_name(st));
    EXPECT(strstr(msg, "CL_") != NULL && strstr(msg, "(-") != NULL,
           "the message carries the OpenCL error's name and code: \"%s\"", msg);
    printf("  no OpenCL driver: %s: %s\n", xattn_status_name(st), msg);
    int n = -1;
    xattn_device_count(XATTN_BACKEND_OPENCL, &n);
    EXPECT(n == 0, "device count %d", n);
    xattn_ctx *ctx = NULL;
    st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    EXPECT(st == XATTN_STATUS_BACKEND_UNAVAILABLE && ctx == NULL && xattn_last_error()[0],
           "context on a missing driver: %s: %s", xattn_status_name(st), xattn_last_error());
    st = xattn_ctx_create(XATTN_BACKEND_AUTO, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK && xattn_ctx_backend(ctx) != XATTN_BACKEND_OPENCL,
           "AUTO without OpenCL: %s", xattn_last_error());
    xattn_ctx_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *which = argc > 1 ? argv[1] : NULL;
    if (which && !strcmp(which, "no-driver")) {
        test_no_driver();
    } else {
        if (xattn_backend_available(XATTN_BACKEND_OPENCL) != XATTN_STATUS_OK) {
            printf("skipped: opencl: %s\n0 passed, 0 failed, 1 skipped\n", xattn_last_error());
            return 77;
        }
        if (!which || !strcmp(which, "faults")) {
            printf("faults\n");
            test_faults();
        }
        if (!which || !strcmp(which, "exhaustion")) {
            printf("exhaustion\n");
            test_exhaustion();
        }
        if (!which || !strcmp(which, "serving")) {
            printf("serving\n");
            test_serving();
        }
    }
    return xattn_test_summary();
}
