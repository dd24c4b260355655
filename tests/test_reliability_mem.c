/*
 * test_reliability_mem: memory that aliases through another object, and
 * memory that is not there (docs/guarantees.md).
 *
 *   alias     an output that shares bytes with an input through another object
 *             on the same memory is refused (INVALID_ARGUMENT, by
 *             xattn_attention_check and xattn_attention alike) and nothing is
 *             written: on OpenCL, o as a sub-buffer (clCreateSubBuffer) of q's
 *             cl_mem, two overlapping sub-buffers of one parent, a sub-buffer of
 *             a buffer the library allocated (small: the runtime's memory; 8 MiB:
 *             host memory of the library's), k_new / v_new as sub-buffers of the
 *             K / V cache of an append, and a cl_mem made on host memory
 *             (CL_MEM_USE_HOST_PTR) against xattn_buffer_wrap_host of the same
 *             memory; on every backend, two xattn_buffer_wrap_host handles on
 *             overlapping host memory. Disjoint sub-buffers of one parent run and
 *             match the reference, and the library drops every reference it took
 *             on a parent once its buffers are freed.
 *   memory    a child process whose address space is limited (RLIMIT_AS, as
 *             `ulimit -v` does) to what it maps plus 256 MiB asks for NAIVE with a
 *             1 GiB score matrix: on the CPU and on OpenCL (PoCL, whose runtime
 *             aborts when an allocation fails) it gets OUT_OF_MEMORY with a
 *             message naming the need and the limit, xattn_ctx_device_memory
 *             reports less than the need, and O, the context's byte count and the
 *             context itself are as before. The child is started afresh (fork and
 *             exec), so that no runtime's threads are lost across the fork; the
 *             parent fails the test when it is killed by a signal. Skipped under
 *             the sanitizers, which map terabytes of shadow memory.
 *
 * OpenCL parts are skipped (counted, with the reason) where no OpenCL device is
 * usable. Usage: test_reliability_mem [alias|memory|mem-child BACKEND]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef XATTN_TEST_HAVE_OPENCL
#include "xattn_opencl.h"
#endif
#include "xattn_reference.h"
#include "xattn_test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define XATTN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define XATTN_TEST_SANITIZED 1
#endif
#endif

/* The alias problem: B=1, Sq=8, Sk=24, Hq=2, Hkv=1, D=Dv=16, f32, BSHD. */
enum { SQ = 8, SK = 24, HQ = 2, HKV = 1, D = 16, SNEW = 4 };
#define NQ (SQ * HQ * D)
#define NK (SK * HKV * D)
#define NO (SQ * HQ * D)
#define NNEW (SNEW * HKV * D)

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = xattn_test_rng_val(&seed);
}

static xattn_buffer *upload(xattn_ctx *ctx, const float *x, size_t n)
{
    xattn_buffer *b = NULL;
    if (xattn_buffer_alloc(ctx, n * sizeof(float), &b) != XATTN_STATUS_OK)
        return NULL;
    if (xattn_buffer_write(b, 0, x, n * sizeof(float)) != XATTN_STATUS_OK) {
        xattn_buffer_free(b);
        return NULL;
    }
    return b;
}

/* q, k, v, o at byte offsets qo and oo of their buffers. */
static void desc_of(xattn_attn_desc *d, xattn_buffer *q, size_t qo, xattn_buffer *k,
                    xattn_buffer *v, xattn_buffer *o, size_t oo)
{
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(q, qo, XATTN_DTYPE_F32, 1, SQ, HQ, D);
    d->k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, SK, HKV, D);
    d->v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, SK, HKV, D);
    d->o = xattn_tensor_bshd(o, oo, XATTN_DTYPE_F32, 1, SQ, HQ, D);
    d->causal = 1;
}

/* Bytes [off, off + n) of buf equal `want`. */
static int same_bytes(xattn_buffer *buf, size_t off, const void *want, size_t n)
{
    void *got = malloc(n);
    int same =
        got && xattn_buffer_read(buf, off, got, n) == XATTN_STATUS_OK && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

/* d is refused as aliasing by the check and by the call, on every algorithm,
 * and the bytes [off, off + n) of `watch` (an input the call would have
 * overwritten) are unchanged. */
static void expect_refused(xattn_ctx *ctx, xattn_attn_desc *d, const char *what,
                           xattn_buffer *watch, size_t off, const void *want, size_t n)
{
    for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
        d->algo = (xattn_algo)a;
        xattn_status st = xattn_attention_check(ctx, d);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT,
               "%s, %s: xattn_attention_check gave %s (%s), expected INVALID_ARGUMENT", what,
               xattn_algo_name(d->algo), xattn_status_name(st), xattn_last_error());
        st = xattn_attention(ctx, d, NULL);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), "share memory"),
               "%s, %s: xattn_attention gave %s (%s), expected INVALID_ARGUMENT naming the "
               "shared memory",
               what, xattn_algo_name(d->algo), xattn_status_name(st), xattn_last_error());
        EXPECT(same_bytes(watch, off, want, n), "%s, %s: the refused call changed the input", what,
               xattn_algo_name(d->algo));
    }
}

/* Runs d (FLASH) and compares O with the reference: the max error. */
static double run_vs_reference(xattn_ctx *ctx, xattn_attn_desc *d)
{
    static double ref[NO];
    static float o[NO];
    d->algo = XATTN_ALGO_FLASH;
    xattn_status st = xattn_attention(ctx, d, NULL);
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return INFINITY;
    st = xattn_reference_attention(ctx, d, ref, NULL);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(d->o.buffer, d->o.offset, o, sizeof o);
    EXPECT(st == XATTN_STATUS_OK, "reference / read back: %s", xattn_last_error());
    double m = 0;
    for (int i = 0; i < NO; i++)
        m = fmax(m, fabs((double)o[i] - ref[i]));
    return isnan(m) ? INFINITY : m;
}

/* ---- alias: host memory through two handles (every backend) --------------- */

static void alias_host(xattn_backend be)
{
    const char *bn = xattn_backend_name(be);
    xattn_ctx *ctx = NULL;
    if (xattn_backend_available(be) != XATTN_STATUS_OK ||
        xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
        SKIP("alias, host memory on %s: %s", bn, xattn_last_error());
        return;
    }
    static float hq[NQ], hk[NK];
    fill(hq, NQ, 1), fill(hk, NK, 2);
    float *mem = aligned_alloc(4096, 4 * 4096);
    xattn_buffer *k = upload(ctx, hk, NK), *v = upload(ctx, hk, NK), *h1 = NULL, *h2 = NULL;
    EXPECT(mem && k && v, "%s: buffers", bn);
    if (mem && k && v) {
        memcpy(mem, hq, sizeof hq);
        /* the second handle starts 64 bytes into the first one's memory */
        if (xattn_buffer_wrap_host(ctx, mem, 4 * 4096, &h1) == XATTN_STATUS_OK &&
            xattn_buffer_wrap_host(ctx, (char *)mem + 64, 4 * 4096 - 64, &h2) == XATTN_STATUS_OK) {
            xattn_attn_desc d;
            desc_of(&d, h1, 0, k, v, h2, 0);
            char what[96];
            snprintf(what, sizeof what, "%s: o wrapped 64 bytes into q's host memory", bn);
            expect_refused(ctx, &d, what, h1, 0, hq, sizeof hq);
            /* Past q's last byte: disjoint, runs. */
            desc_of(&d, h1, 0, k, v, h2, sizeof hq);
            double err = run_vs_reference(ctx, &d);
            EXPECT(err < 1e-4, "%s: o in the same host memory past q's bytes: max error %g", bn,
                   err);
        } else {
            SKIP("alias, host memory on %s: cannot wrap host memory: %s", bn, xattn_last_error());
        }
    }
    xattn_buffer_free(h1);
    xattn_buffer_free(h2);
    xattn_buffer_free(k);
    xattn_buffer_free(v);
    xattn_ctx_destroy(ctx);
    free(mem);
}

/* ---- alias: OpenCL sub-buffers ----------------------------------------------- */

#ifdef XATTN_TEST_HAVE_OPENCL
static cl_uint refcount(cl_mem m)
{
    cl_uint n = 0;
    clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL);
    return n;
}

/* A sub-buffer [origin, origin + size) of parent, or NULL. */
static cl_mem sub_of(cl_mem parent, size_t origin, size_t size)
{
    cl_buffer_region r = {origin, size};
    cl_int e;
    cl_mem m = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    EXPECT(e == CL_SUCCESS && m, "clCreateSubBuffer(origin %zu, size %zu): %d", origin, size,
           (int)e);
    return e == CL_SUCCESS ? m : NULL;
}

/* m wrapped; the test's own reference is dropped (the library holds one). */
static xattn_buffer *wrap(xattn_ctx *ctx, cl_mem m)
{
    xattn_buffer *b = NULL;
    if (!m)
        return NULL;
    xattn_status st = xattn_opencl_buffer_wrap(ctx, m, &b);
    EXPECT(st == XATTN_STATUS_OK, "xattn_opencl_buffer_wrap: %s", xattn_last_error());
    clReleaseMemObject(m);
    return b;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static void alias_cl_subbuffers(void)
{
    xattn_ctx *ctx = NULL;
    if (xattn_backend_available(XATTN_BACKEND_OPENCL) != XATTN_STATUS_OK ||
        xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx) != XATTN_STATUS_OK) {
        SKIP("alias, OpenCL sub-buffers: no OpenCL device: %s", xattn_last_error());
        return;
    }
    cl_context cc = xattn_opencl_ctx_context(ctx);
    cl_device_id dev = NULL;
    clGetCommandQueueInfo(xattn_opencl_ctx_queue(ctx), CL_QUEUE_DEVICE, sizeof dev, &dev, NULL);
    cl_uint align_bits = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    const size_t align = align_bits >= 8 ? align_bits / 8 : 128;

    static float hq[NQ], hk[NK], hv[NK], hnew[NNEW], ho[NO];
    fill(hq, NQ, 11), fill(hk, NK, 12), fill(hv, NK, 13), fill(hnew, NNEW, 14);
    for (int i = 0; i < NO; i++)
        ho[i] = 7.0f;
    xattn_buffer *k = upload(ctx, hk, NK), *v = upload(ctx, hv, NK);
    EXPECT(k && v, "k, v: %s", xattn_last_error());

    /* The parent: q's bytes first, then room for o at the next aligned origin. */
    const size_t qbytes = sizeof hq, obytes = sizeof ho, o_at = round_up(qbytes, align);
    cl_int e;
    cl_mem parent = clCreateBuffer(cc, CL_MEM_READ_WRITE, o_at + obytes, NULL, &e);
    EXPECT(e == CL_SUCCESS, "clCreateBuffer: %d", (int)e);
    xattn_buffer *bq = parent ? (clRetainMemObject(parent), wrap(ctx, parent)) : NULL;
    if (bq && k && v && xattn_buffer_write(bq, 0, hq, qbytes) == XATTN_STATUS_OK) {
        xattn_attn_desc d;
        /* 1. o a sub-buffer over q's first bytes. */
        xattn_buffer *bo = wrap(ctx, sub_of(parent, 0, obytes));
        if (bo) {
            desc_of(&d, bq, 0, k, v, bo, 0);
            expect_refused(ctx, &d, "o as a sub-buffer of q's cl_mem", bq, 0, hq, qbytes);
        }
        xattn_buffer_free(bo);
        /* 2. Two sub-buffers of one parent that overlap (q one of them). */
        const size_t o2 = align < qbytes ? align : 0;
        xattn_buffer *sq = wrap(ctx, sub_of(parent, 0, qbytes));
        bo = wrap(ctx, sub_of(parent, o2, obytes));
        if (sq && bo) {
            desc_of(&d, sq, 0, k, v, bo, 0);
            expect_refused(ctx, &d, "q and o overlapping sub-buffers of one cl_mem", bq, 0, hq,
                           qbytes);
        }
        xattn_buffer_free(bo);
        /* 3. o a sub-buffer past q's bytes: disjoint, runs and is right. */
        bo = wrap(ctx, sub_of(parent, o_at, obytes));
        if (sq && bo) {
            desc_of(&d, sq, 0, k, v, bo, 0);
            double err = run_vs_reference(ctx, &d);
            EXPECT(err < 1e-4, "o a sub-buffer disjoint from q's: max error %g", err);
            desc_of(&d, bq, 0, k, v, bo, 0);
            err = run_vs_reference(ctx, &d);
            EXPECT(err < 1e-4, "o a sub-buffer of q's cl_mem past q's bytes: max error %g", err);
        }
        xattn_buffer_free(bo);
        xattn_buffer_free(sq);
    }
    xattn_buffer_free(bq);
    EXPECT(!parent || refcount(parent) == 1,
           "the parent cl_mem holds %u references once every buffer on it is freed, expected 1 "
           "(the test's own)",
           parent ? refcount(parent) : 0);
    if (parent)
        clReleaseMemObject(parent);

    /* 4. A sub-buffer of a buffer the library allocated: small (the runtime's
     *    memory) and 8 MiB (on a CPU device, host memory of the library's). */
    static const size_t sizes[2] = {sizeof hq, (size_t)8 << 20};
    for (int s = 0; s < 2; s++) {
        xattn_buffer *lq = NULL, *bo = NULL;
        if (xattn_buffer_alloc(ctx, sizes[s], &lq) != XATTN_STATUS_OK ||
            xattn_buffer_write(lq, 0, hq, qbytes) != XATTN_STATUS_OK) {
            EXPECT(0, "xattn_buffer_alloc(%zu): %s", sizes[s], xattn_last_error());
        } else {
            bo = wrap(ctx, sub_of(xattn_opencl_buffer_mem(lq), 0, obytes));
            if (bo) {
                xattn_attn_desc d;
                desc_of(&d, lq, 0, k, v, bo, 0);
                char what[96];
                snprintf(what, sizeof what, "o a sub-buffer of the library's %zu-byte buffer",
                         sizes[s]);
                expect_refused(ctx, &d, what, lq, 0, hq, qbytes);
            }
        }
        xattn_buffer_free(bo);
        xattn_buffer_free(lq);
    }

    /* 5. An append whose k_new (then v_new) is a sub-buffer of the K (V) cache. */
    xattn_buffer *kc = upload(ctx, hk, NK), *vc = upload(ctx, hv, NK),
                 *kn = upload(ctx, hnew, NNEW), *bq2 = upload(ctx, hq, NQ),
                 *bo2 = upload(ctx, ho, NO);
    if (kc && vc && kn && bq2 && bo2) {
        static const int32_t lens[1] = {SK - SNEW};
        for (int which = 0; which < 2; which++) {
            xattn_buffer *cache = which ? vc : kc;
            xattn_buffer *sub =
                wrap(ctx, sub_of(xattn_opencl_buffer_mem(cache), 0, NNEW * sizeof(float)));
            if (!sub)
                continue;
            xattn_attn_desc d;
            desc_of(&d, bq2, 0, kc, vc, bo2, 0);
            d.seqlens_k = lens;
            d.k_new = xattn_tensor_bshd(which ? kn : sub, 0, XATTN_DTYPE_F32, 1, SNEW, HKV, D);
            d.v_new = xattn_tensor_bshd(which ? sub : kn, 0, XATTN_DTYPE_F32, 1, SNEW, HKV, D);
            expect_refused(ctx, &d,
                           which ? "v_new as a sub-buffer of the V cache"
                                 : "k_new as a sub-buffer of the K cache",
                           cache, 0, which ? hv : hk, sizeof hk);
            EXPECT(same_bytes(bo2, 0, ho, sizeof ho), "the refused append wrote o");
            xattn_buffer_free(sub);
        }
    } else {
        EXPECT(0, "append buffers: %s", xattn_last_error());
    }
    xattn_buffer_free(kc), xattn_buffer_free(vc), xattn_buffer_free(kn);
    xattn_buffer_free(bq2), xattn_buffer_free(bo2);

    /* 6. A cl_mem on host memory (CL_MEM_USE_HOST_PTR) and xattn_buffer_wrap_host
     *    of the same memory: one memory, two objects. */
    float *host = aligned_alloc(4096, 4 * 4096);
    xattn_buffer *hq_buf = NULL, *ho_buf = NULL;
    if (host) {
        memcpy(host, hq, qbytes);
        cl_mem um = clCreateBuffer(cc, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 4 * 4096, host, &e);
        EXPECT(e == CL_SUCCESS, "clCreateBuffer(CL_MEM_USE_HOST_PTR): %d", (int)e);
        if (e == CL_SUCCESS &&
            xattn_buffer_wrap_host(ctx, host, 4 * 4096, &hq_buf) == XATTN_STATUS_OK) {
            ho_buf = wrap(ctx, sub_of(um, 0, obytes));
            if (ho_buf) {
                xattn_attn_desc d;
                desc_of(&d, hq_buf, 0, k, v, ho_buf, 0);
                expect_refused(ctx, &d,
                               "o a sub-buffer of a USE_HOST_PTR cl_mem on q's wrapped host memory",
                               hq_buf, 0, hq, qbytes);
            }
            xattn_buffer_free(ho_buf);
            ho_buf = wrap(ctx, (clRetainMemObject(um), um));
            if (ho_buf) {
                xattn_attn_desc d;
                desc_of(&d, hq_buf, 0, k, v, ho_buf, 0);
                expect_refused(ctx, &d, "o a USE_HOST_PTR cl_mem on q's wrapped host memory",
                               hq_buf, 0, hq, qbytes);
                desc_of(&d, hq_buf, 0, k, v, ho_buf, o_at);
                double err = run_vs_reference(ctx, &d);
                EXPECT(err < 1e-4, "o past q's bytes of the same host memory: max error %g", err);
            }
            xattn_buffer_free(ho_buf);
        } else if (e == CL_SUCCESS) {
            EXPECT(0, "xattn_buffer_wrap_host: %s", xattn_last_error());
        }
        xattn_buffer_free(hq_buf);
        if (e == CL_SUCCESS) {
            EXPECT(refcount(um) == 1, "the USE_HOST_PTR cl_mem holds %u references, expected 1",
                   refcount(um));
            clReleaseMemObject(um);
        }
    }
    xattn_buffer_free(k);
    xattn_buffer_free(v);
    xattn_ctx_destroy(ctx);
    free(host);
}
#endif /* XATTN_TEST_HAVE_OPENCL */

/* ---- memory: a workspace beyond the address-space limit ---------------------- */

/* The child: NAIVE with a 1 GiB score matrix under RLIMIT_AS = mapped + 256 MiB.
 * Exits 0 (passed), 1 (failed) or 77 (the backend is not here). */
static int mem_child(const char *backend)
{
    xattn_backend be = !strcmp(backend, "opencl") ? XATTN_BACKEND_OPENCL : XATTN_BACKEND_CPU;
    xattn_ctx *ctx = NULL;
    if (xattn_backend_available(be) != XATTN_STATUS_OK ||
        xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
        printf("SKIP memory, %s: %s\n", backend, xattn_last_error());
        return 77;
    }
    /* Warm up at a small size: the program is built and the runtime's threads
     * are started before the limit. */
    xattn_test_problem small, big;
    EXPECT_OK(xattn_test_problem_make(&small, ctx, 1, 16, 16, 2, 1, 16, 16, 0, 3));
    small.desc.algo = XATTN_ALGO_NAIVE;
    EXPECT_OK(xattn_attention(ctx, &small.desc, NULL));
    /* 2 heads x 4096 x 32768 f32 scores = 1 GiB; the inputs are 4.5 MiB. */
    const int64_t Sq = 4096, Sk = 32768;
    xattn_status st = xattn_test_problem_make(&big, ctx, 1, Sq, Sk, 2, 1, 16, 16, 0, 4);
    EXPECT(st == XATTN_STATUS_OK, "the problem: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK) {
        xattn_test_problem_free(&small);
        xattn_ctx_destroy(ctx);
        return xattn_test_summary();
    }
    float *pattern = malloc(big.no * sizeof(float));
    for (size_t i = 0; pattern && i < big.no; i++)
        pattern[i] = 7.0f;
    EXPECT(pattern &&
               xattn_buffer_write(big.o, 0, pattern, big.no * sizeof(float)) == XATTN_STATUS_OK,
           "o's pattern: %s", xattn_last_error());
    /* The same call with an append of 4 tokens at the end of the K/V caches. */
    static float hnew[4 * 16];
    fill(hnew, 4 * 16, 5);
    xattn_buffer *kn = upload(ctx, hnew, 4 * 16), *vn = upload(ctx, hnew, 4 * 16);
    EXPECT(kn && vn, "k_new, v_new: %s", xattn_last_error());
    xattn_attn_desc app = big.desc;
    static const int32_t lens[1] = {32768 - 4};
    app.seqlens_k = lens;
    app.k_new = xattn_tensor_bshd(kn, 0, XATTN_DTYPE_F32, 1, 4, 1, 16);
    app.v_new = xattn_tensor_bshd(vn, 0, XATTN_DTYPE_F32, 1, 4, 1, 16);
    app.algo = XATTN_ALGO_NAIVE;
    xattn_mem_stats before, after;
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &before));

    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    int ok = f && fscanf(f, "%llu", &pages) == 1;
    if (f)
        fclose(f);
    struct rlimit old = {RLIM_INFINITY, RLIM_INFINITY}, lim;
    ok = ok && getrlimit(RLIMIT_AS, &old) == 0;
    const uint64_t mapped = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
    lim = old;
    lim.rlim_cur = (rlim_t)(mapped + ((uint64_t)256 << 20));
    if (!ok || (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < lim.rlim_cur) ||
        setrlimit(RLIMIT_AS, &lim) != 0) {
        printf("SKIP memory, %s: cannot lower RLIMIT_AS (%s)\n", backend, strerror(errno));
        free(pattern);
        xattn_buffer_free(kn);
        xattn_buffer_free(vn);
        xattn_test_problem_free(&big);
        xattn_test_problem_free(&small);
        xattn_ctx_destroy(ctx);
        return 77;
    }
    big.desc.algo = XATTN_ALGO_NAIVE;
    st = xattn_attention(ctx, &big.desc, NULL);
    char msg[1024], amsg[1024];
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    uint64_t total = 0, avail = 0;
    xattn_status dst = xattn_ctx_device_memory(ctx, &total, &avail);
    xattn_status ast = kn && vn ? xattn_attention(ctx, &app, NULL) : XATTN_STATUS_OUT_OF_MEMORY;
    snprintf(amsg, sizeof amsg, "%s", xattn_last_error());
    setrlimit(RLIMIT_AS, &old);

    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY,
           "%s: NAIVE with 1 GiB of scores under RLIMIT_AS: %s (%s)", backend,
           xattn_status_name(st), msg);
    EXPECT(strstr(msg, "NAIVE score matrix") && strstr(msg, "1024 MiB") && strstr(msg, "RLIMIT_AS"),
           "%s: the message names the need and the limit: %s", backend, msg);
    EXPECT(dst == XATTN_STATUS_OK && avail < ((uint64_t)1 << 30),
           "%s: xattn_ctx_device_memory reports %llu MiB available under the limit (%s)", backend,
           (unsigned long long)(avail >> 20), xattn_status_name(dst));
    EXPECT_OK(xattn_ctx_mem_stats(ctx, &after));
    EXPECT(after.current_bytes == before.current_bytes,
           "%s: the context holds %llu bytes after the refusal, %llu before", backend,
           (unsigned long long)after.current_bytes, (unsigned long long)before.current_bytes);
    EXPECT(pattern && same_bytes(big.o, 0, pattern, big.no * sizeof(float)),
           "%s: the refused call wrote o", backend);
    EXPECT(ast == XATTN_STATUS_OUT_OF_MEMORY && strstr(amsg, "RLIMIT_AS"),
           "%s: NAIVE with an append under RLIMIT_AS: %s (%s)", backend, xattn_status_name(ast),
           amsg);
    EXPECT(same_bytes(big.k, 0, big.hk, big.nk * sizeof(float)) &&
               same_bytes(big.v, 0, big.hv, big.nv * sizeof(float)),
           "%s: the refused append wrote the K/V cache", backend);
    /* The context still runs. */
    small.desc.algo = XATTN_ALGO_FLASH;
    EXPECT_OK(xattn_attention(ctx, &small.desc, NULL));
    free(pattern);
    xattn_buffer_free(kn);
    xattn_buffer_free(vn);
    xattn_test_problem_free(&big);
    xattn_test_problem_free(&small);
    xattn_ctx_destroy(ctx);
    return xattn_test_summary();
}

static void memory_limit(const char *self, const char *backend)
{
#ifdef XATTN_TEST_SANITIZED
    (void)self;
    SKIP("memory, %s: RLIMIT_AS cannot be lowered under a sanitizer (shadow memory)", backend);
#else
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "mem-child", backend, (char *)NULL);
        _exit(126);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        EXPECT(0, "memory, %s: fork/wait: %s", backend, strerror(errno));
        return;
    }
    if (WIFSIGNALED(status)) {
        EXPECT(0, "memory, %s: the child was killed by signal %d (%s) instead of refusing", backend,
               WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else if (WEXITSTATUS(status) == 77) {
        SKIP("memory, %s: see the child's line above", backend);
    } else {
        EXPECT(WEXITSTATUS(status) == 0, "memory, %s: the child failed (exit %d)", backend,
               WEXITSTATUS(status));
    }
#endif
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "mem-child") && argc > 2)
        return mem_child(argv[2]);
    if (!*what || !strcmp(what, "alias")) {
        alias_host(XATTN_BACKEND_CPU);
        alias_host(XATTN_BACKEND_OPENCL);
#ifdef XATTN_TEST_HAVE_OPENCL
        alias_cl_subbuffers();
#else
        SKIP("alias, OpenCL sub-buffers: the OpenCL backend is not built");
#endif
    }
    if (!*what || !strcmp(what, "memory")) {
        memory_limit("/proc/self/exe", "cpu");
        memory_limit("/proc/self/exe", "opencl");
    }
    return xattn_test_summary();
}
