/*
 * test_check_agrees: xattn_attention_check and xattn_attention return the same
 * status and the same message for one descriptor, on every backend, at the
 * backends' own limits and the driver's size checks as well as at the
 * descriptor's rules. The check runs the validation, the problem building,
 * the backend's plan and the driver's region sizes, which is everything a
 * call does before it allocates; the only statuses a run may add are those of
 * its allocations and of the device (docs/api.md).
 *
 * Cases, on each available backend (CPU always; OpenCL and CUDA where they
 * have a device):
 *   valid          a small problem: both OK (the run really runs)
 *   bad view       q's head dim differs from k's: both refuse it alike
 *   NAIVE bytes    2^31 + 2 query heads over 2^31 - 1 keys: B*Hq*Sq*Sk fits in
 *                  63 bits, its bytes do not (SIZE_OVERFLOW from the driver);
 *                  OpenCL refuses B*Hq above its 32-bit index first
 *                  (UNSUPPORTED from its plan); both alike
 *   FLASH heads    the same 2^31 + 2 heads with FLASH: OpenCL's plan refuses,
 *                  and the run must refuse the same way (the CPU would run it:
 *                  only its check is asked)
 * O for the huge cases is 4 GiB of address space reserved without backing and
 * never touched (each call fails before any work).
 *
 * The last line is "N passed, N failed, N skipped".
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "xattn.h"
#include "xattn_test.h"

/* Check, then run (unless `run` is 0 and the check passed: a case too big to
 * run); the two statuses and messages must be equal. Returns the status. */
static xattn_status agree(xattn_ctx *ctx, const xattn_attn_desc *d, const char *what, int run)
{
    const char *bn = xattn_backend_name(xattn_ctx_backend(ctx));
    xattn_status sc = xattn_attention_check(ctx, d);
    char mc[512];
    snprintf(mc, sizeof mc, "%s", xattn_last_error());
    if (sc == XATTN_STATUS_OK && !run) {
        printf("  %-7s %-12s check %s (not run: too big for this test)\n", bn, what,
               xattn_status_name(sc));
        return sc;
    }
    xattn_status sr = xattn_attention(ctx, d, NULL);
    char mr[512];
    snprintf(mr, sizeof mr, "%s", xattn_last_error());
    EXPECT(sc == sr && !strcmp(mc, mr), "%s %s: check %s \"%s\", run %s \"%s\"", bn, what,
           xattn_status_name(sc), mc, xattn_status_name(sr), mr);
    printf("  %-7s %-12s %s%s%s\n", bn, what, xattn_status_name(sc), sc ? ": " : "", mc);
    return sc;
}

static void on_backend(xattn_backend be)
{
    const char *bn = xattn_backend_name(be);
    xattn_ctx *ctx = NULL;
    if (xattn_backend_available(be) != XATTN_STATUS_OK ||
        xattn_ctx_create(be, 0, &ctx) != XATTN_STATUS_OK) {
        SKIP("%s: %s", bn, xattn_last_error());
        return;
    }
    enum { S = 16, H = 2, D = 8 };
    xattn_buffer *in = NULL, *o = NULL;
    static float zeros[S * H * D];
    if (xattn_buffer_alloc(ctx, sizeof zeros, &in) != XATTN_STATUS_OK ||
        xattn_buffer_write(in, 0, zeros, sizeof zeros) != XATTN_STATUS_OK ||
        xattn_buffer_alloc(ctx, sizeof zeros, &o) != XATTN_STATUS_OK) {
        EXPECT(0, "%s setup: %s", bn, xattn_last_error());
        xattn_buffer_free(in);
        xattn_ctx_destroy(ctx);
        return;
    }
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.q = xattn_tensor_bshd(in, 0, XATTN_DTYPE_F32, 1, S, H, D);
    d.k = d.q;
    d.v = d.q;
    d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 1, S, H, D);
    for (int a = 0; a < 3; a++) {
        static const xattn_algo algos[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};
        static const char *const names[3] = {"valid naive", "valid flash", "valid splitkv"};
        d.algo = algos[a];
        EXPECT(agree(ctx, &d, names[a], 1) == XATTN_STATUS_OK, "%s: %s", bn, names[a]);
    }
    xattn_attn_desc bad = d;
    bad.q = xattn_tensor_bshd(in, 0, XATTN_DTYPE_F32, 1, S / 2, H, D / 2);
    EXPECT(agree(ctx, &bad, "bad view", 1) != XATTN_STATUS_OK, "%s: bad view accepted", bn);

    /* 2^31 + 2 heads of one f16 element each: 4 GiB of O, never touched. */
    const int64_t HQ = ((int64_t)1 << 31) + 2;
    const size_t obytes = (size_t)HQ * 2;
    void *omem = mmap(NULL, obytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    xattn_buffer *o4 = NULL;
    if (omem == MAP_FAILED || xattn_buffer_wrap_host(ctx, omem, obytes, &o4) != XATTN_STATUS_OK) {
        SKIP("%s: the huge cases (cannot map 4 GiB of O: %s)", bn,
             omem == MAP_FAILED ? "mmap failed" : xattn_last_error());
    } else {
        xattn_attn_desc h = d;
        xattn_tensor hq = {in, 0, XATTN_DTYPE_F16, {1, 1, HQ, 1}, {0, 0, 0, 1}};
        xattn_tensor hk = {in, 0, XATTN_DTYPE_F32, {1, ((int64_t)1 << 31) - 1, 1, 1}, {0, 0, 0, 1}};
        h.q = hq;
        h.k = hk;
        h.v = hk;
        h.o = xattn_tensor_bshd(o4, 0, XATTN_DTYPE_F16, 1, 1, HQ, 1);
        h.algo = XATTN_ALGO_NAIVE;
        xattn_status st = agree(ctx, &h, "NAIVE bytes", 0);
        EXPECT(st == XATTN_STATUS_SIZE_OVERFLOW || st == XATTN_STATUS_UNSUPPORTED,
               "%s NAIVE bytes: %s", bn, xattn_status_name(st));
        h.algo = XATTN_ALGO_FLASH;
        h.k = xattn_tensor_bshd(in, 0, XATTN_DTYPE_F32, 1, S, 1, 1);
        h.k.strides[2] = 0;
        h.v = h.k;
        st = agree(ctx, &h, "FLASH heads", 0);
        if (be == XATTN_BACKEND_OPENCL)
            EXPECT(st == XATTN_STATUS_UNSUPPORTED, "OpenCL FLASH with 2^31 + 2 heads: %s",
                   xattn_status_name(st));
        xattn_buffer_free(o4);
    }
    if (omem != MAP_FAILED)
        munmap(omem, obytes);
    xattn_buffer_free(in);
    xattn_buffer_free(o);
    xattn_ctx_destroy(ctx);
}

int main(void)
{
    on_backend(XATTN_BACKEND_CPU);
    on_backend(XATTN_BACKEND_OPENCL);
    on_backend(XATTN_BACKEND_CUDA);
    return xattn_test_summary();
}
