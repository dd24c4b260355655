/*
 * Out-of-bounds reads of the OpenCL kernels, made deterministic: K and V are
 * wrapped host memory (CL_MEM_USE_HOST_PTR) that ends exactly where a
 * PROT_NONE guard page begins, so a kernel that reads one key past the
 * sequence faults instead of reading a neighbour's bytes. On a CPU device
 * (PoCL) the kernels read the host memory in place; a runtime that copies it
 * cannot fault here, and the test then only checks the values.
 *
 * The shape is the one that once read past the keys: causal top-left with a
 * left window and Lq > Lk, so rows far down see no key at all (their window
 * lies wholly past the sequence) and a work-group's union of key ranges must
 * still stay inside it. Every algorithm runs, compared with the reference.
 *
 * Exit: 0 pass, 1 fail, 77 no OpenCL device. Last line "N passed, N failed,
 * N skipped".
 */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_reference.h"

enum { SQ = 48, SK = 16, D = 64 }; /* K and V: SK * D * 4 = 4096 bytes each */

static int passed, failed;

static void check(int ok, const char *what, const char *detail)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: %s\n", what, detail);
    }
}

/* `bytes` (a multiple of the page size) of read-write memory followed by a
 * PROT_NONE page; returns the start, or NULL. */
static void *guarded_alloc(size_t bytes, void **base, size_t *len)
{
    long page = sysconf(_SC_PAGESIZE);
    *len = bytes + (size_t)page;
    void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect((char *)p + bytes, (size_t)page, PROT_NONE) != 0) {
        munmap(p, *len);
        return NULL;
    }
    *base = p;
    return p;
}

int main(void)
{
    if (xattn_backend_available(XATTN_BACKEND_OPENCL) != XATTN_STATUS_OK) {
        printf("skipped: opencl: %s\n0 passed, 0 failed, 1 skipped\n", xattn_last_error());
        return 77;
    }
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx) != XATTN_STATUS_OK) {
        printf("FAIL ctx: %s\n0 passed, 1 failed, 0 skipped\n", xattn_last_error());
        return 1;
    }
    const size_t kv_bytes = (size_t)SK * D * sizeof(float);
    void *kbase, *vbase;
    size_t klen, vlen;
    float *k = guarded_alloc(kv_bytes, &kbase, &klen);
    float *v = guarded_alloc(kv_bytes, &vbase, &vlen);
    float *q = malloc((size_t)SQ * D * sizeof(float));
    double *ref = malloc((size_t)SQ * D * sizeof(double));
    float *o = malloc((size_t)SQ * D * sizeof(float));
    if (!k || !v || !q || !ref || !o) {
        printf("FAIL setup: out of memory\n0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    unsigned s = 12345u;
    for (int i = 0; i < SQ * D; i++)
        q[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
    for (int i = 0; i < SK * D; i++) {
        k[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
        v[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
    }
    xattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    xattn_status st = xattn_buffer_alloc(ctx, (size_t)SQ * D * 4, &bq);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(bq, 0, q, (size_t)SQ * D * 4);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_wrap_host(ctx, k, kv_bytes, &bk);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_wrap_host(ctx, v, kv_bytes, &bv);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (size_t)SQ * D * 4, &bo);
    check(st == XATTN_STATUS_OK, "buffers", xattn_last_error());

    static const struct {
        int causal;
        xattn_align align;
        int64_t wl, wr;
    } shapes[] = {
        {1, XATTN_ALIGN_TOP_LEFT, 4, -1},  /* rows i >= 20 see no key */
        {1, XATTN_ALIGN_TOP_LEFT, 11, 3},
        {0, XATTN_ALIGN_TOP_LEFT, 2, 2},   /* window only */
        {1, XATTN_ALIGN_BOTTOM_RIGHT, 3, -1},
    };
    for (size_t c = 0; st == XATTN_STATUS_OK && c < sizeof shapes / sizeof shapes[0]; c++) {
        for (int a = XATTN_ALGO_NAIVE; a <= XATTN_ALGO_SPLITKV; a++) {
            xattn_attn_desc d;
            xattn_attn_desc_init(&d);
            d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, 1, SQ, 1, D);
            d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, 1, SK, 1, D);
            d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, 1, SK, 1, D);
            d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, 1, SQ, 1, D);
            d.causal = shapes[c].causal;
            d.align = shapes[c].align;
            d.window_left = shapes[c].wl;
            d.window_right = shapes[c].wr;
            d.algo = (xattn_algo)a;
            char what[96];
            snprintf(what, sizeof what, "shape %zu %s", c, xattn_algo_name((xattn_algo)a));
            st = xattn_attention(ctx, &d, NULL);
            if (st == XATTN_STATUS_OK)
                st = xattn_ctx_sync(ctx);
            if (st == XATTN_STATUS_OK)
                st = xattn_buffer_read(bo, 0, o, (size_t)SQ * D * 4);
            if (st == XATTN_STATUS_OK)
                st = xattn_reference_attention(ctx, &d, ref, NULL);
            if (st != XATTN_STATUS_OK) {
                check(0, what, xattn_last_error());
                continue;
            }
            double num = 0, den = 0;
            for (int i = 0; i < SQ * D; i++) {
                double e = (double)o[i] - ref[i];
                num += e * e;
                den += ref[i] * ref[i];
            }
            double rel = den > 0 ? sqrt(num / den) : sqrt(num);
            char detail[96];
            snprintf(detail, sizeof detail, "rel L2 %.3e against the reference", rel);
            check(rel < 1e-5, what, detail);
        }
    }
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_ctx_destroy(ctx);
    munmap(kbase, klen);
    munmap(vbase, vlen);
    free(q);
    free(ref);
    free(o);
    printf("%d passed, %d failed, 0 skipped\n", passed, failed);
    return failed ? 1 : 0;
}
