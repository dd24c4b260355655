/* The tracking allocator: every byte the library allocates for a context is
 * accounted here (buffers, workspaces, backend scratch), so that a context's
 * current and peak figures are complete and a memory limit can be enforced. */
#include <stdlib.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "xattn_internal.h"

xattn_status xattn__mem_acquire(struct xattn_ctx *ctx, uint64_t bytes, const char *what)
{
    uint64_t cur = atomic_load(&ctx->mem_current);
    for (;;) {
        uint64_t next;
        if (xattn__add_overflow(cur, bytes, &next))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "%s: %llu bytes overflow the context's byte count", what,
                                (unsigned long long)bytes);
        if (ctx->mem_limit && next > ctx->mem_limit)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                                "%s: %llu bytes would exceed the context's memory limit "
                                "(XATTN_OPT_MEMORY_LIMIT = %llu, %llu in use)",
                                what, (unsigned long long)bytes,
                                (unsigned long long)ctx->mem_limit, (unsigned long long)cur);
        if (atomic_compare_exchange_weak(&ctx->mem_current, &cur, next)) {
            uint64_t peak = atomic_load(&ctx->mem_peak);
            while (next > peak && !atomic_compare_exchange_weak(&ctx->mem_peak, &peak, next)) {
            }
            atomic_fetch_add(&ctx->alloc_count, 1);
            return XATTN_STATUS_OK;
        }
    }
}

void xattn__mem_release(struct xattn_ctx *ctx, uint64_t bytes)
{
    atomic_fetch_sub(&ctx->mem_current, bytes);
}

/* Host allocations account at least one byte (one exists even for a size of
 * 0), and xattn__host_free releases by the same rule, so that a caller that
 * asks for max(n, 1) bytes and frees n is still balanced when n is 0. */
void *xattn__aligned_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < 2 * huge)
        return aligned_alloc(64, bytes);
    const size_t rounded = (bytes + huge - 1) & ~(huge - 1);
    if (rounded < bytes)
        return NULL;
    void *p = aligned_alloc(huge, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p)
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

void *xattn__host_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what,
                        xattn_status *status)
{
    if (bytes == 0)
        bytes = 1;
    xattn_status st = xattn__mem_acquire(ctx, bytes, what);
    if (st != XATTN_STATUS_OK) {
        *status = st;
        return NULL;
    }
    /* aligned_alloc wants a multiple of the alignment; round up, and never 0. */
    uint64_t rounded = (bytes + 63u) & ~(uint64_t)63u;
    if (rounded < bytes || rounded > (uint64_t)SIZE_MAX) {
        xattn__mem_release(ctx, bytes);
        *status = xattn__error(XATTN_STATUS_SIZE_OVERFLOW, "%s: %llu bytes do not fit in size_t",
                               what, (unsigned long long)bytes);
        return NULL;
    }
    void *p = xattn__aligned_alloc(rounded ? (size_t)rounded : 64);
    if (!p) {
        xattn__mem_release(ctx, bytes);
        *status = xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                               "%s: allocating %llu bytes of host memory failed", what,
                               (unsigned long long)bytes);
        return NULL;
    }
    *status = XATTN_STATUS_OK;
    return p;
}

void xattn__host_free(struct xattn_ctx *ctx, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    free(ptr);
    xattn__mem_release(ctx, bytes ? bytes : 1);
}

xattn_status xattn__ctx_enter(struct xattn_ctx *ctx)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&ctx->busy, &expected, 1))
        return xattn__error(XATTN_STATUS_BUSY,
                            "ctx: the context is in use by another thread; a context serves "
                            "one thread at a time (create one context per thread)");
    return XATTN_STATUS_OK;
}

void xattn__ctx_leave(struct xattn_ctx *ctx) { atomic_store(&ctx->busy, 0); }
