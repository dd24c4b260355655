/*
 * Validation of the attention descriptor, before any work is done. Every rule
 * returns its own status with a message that names the field as the user wrote
 * it ("k.shape[2]", "seqlens_q[3]"), the value found, and what was expected.
 * Building the problem from a valid descriptor is xattn_problem.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_internal.h"

#define XATTN_MAX_HEAD_DIM 256

static const char *const xattn__dim_names[4] = {"batch", "sequence", "heads", "head dim"};

/* A tensor's dtype, shape, strides, alignment and extent within its buffer. */
static xattn_status xattn__check_view(const struct xattn_ctx *ctx, const xattn_tensor *t,
                                      const char *name)
{
    if (!t->buffer)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s.buffer: NULL (%s is required)", name,
                            name);
    if (!t->buffer->ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s.buffer: its context was destroyed, which freed its memory", name);
    if (t->buffer->ctx != ctx)
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT,
                            "%s.buffer: belongs to another context (a buffer can only be "
                            "used on the context that made it)",
                            name);
    if ((unsigned)t->dtype >= XATTN_DTYPE_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_DTYPE,
                            "%s.dtype: %d is not a dtype (expected f32, f16 or bf16)", name,
                            (int)t->dtype);
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] < 0)
            return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                "%s.shape[%d]: %lld is negative (%s extent)", name, i,
                                (long long)t->shape[i], xattn__dim_names[i]);
        if (t->strides[i] < 0)
            return xattn__error(XATTN_STATUS_INVALID_STRIDE,
                                "%s.strides[%d]: %lld is negative (strides must be >= 0)", name, i,
                                (long long)t->strides[i]);
    }
    /* q8_0 views start on a block (34 bytes, 32 values); the rest of its
     * layout rules are xattn__check_q8_0's. */
    const int q8 = t->dtype == XATTN_DTYPE_Q8_0;
    size_t esize = q8 ? XATTN_Q8_0_BLOCK_BYTES : xattn_dtype_size(t->dtype);
    if (t->offset % esize)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s.offset: %zu bytes is not a multiple of the %s %s size %zu", name,
                            t->offset, xattn_dtype_name(t->dtype), q8 ? "block" : "element", esize);
    /* Element count first: catches absurd shapes even where strides are 0. */
    uint64_t count = 1;
    for (int i = 0; i < 4; i++)
        if (xattn__mul_overflow(count, (uint64_t)t->shape[i], &count))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "%s.shape: [%lld, %lld, %lld, %lld] has more elements than 64 "
                                "bits can count",
                                name, (long long)t->shape[0], (long long)t->shape[1],
                                (long long)t->shape[2], (long long)t->shape[3]);
    if (count == 0)
        return XATTN_STATUS_OK; /* an empty view touches no memory */
    uint64_t last = 0;          /* highest element index the view touches */
    for (int i = 0; i < 4; i++) {
        uint64_t span;
        if (xattn__mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->strides[i], &span) ||
            xattn__add_overflow(last, span, &last))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "%s.strides[%d]: %lld times extent %lld overflows the view's "
                                "element range",
                                name, i, (long long)t->strides[i], (long long)t->shape[i]);
    }
    uint64_t end;
    if (xattn__add_overflow(last, 1, &end) ||
        (end = xattn_dtype_bytes(t->dtype, end)) == UINT64_MAX ||
        xattn__add_overflow(end, (uint64_t)t->offset, &end))
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                            "%s.offset: %zu plus the view's byte extent overflows 64 bits", name,
                            t->offset);
    if (end > t->buffer->size)
        return xattn__error(XATTN_STATUS_OUT_OF_BOUNDS,
                            "%s: the view reaches byte %llu but %s.buffer holds %zu bytes "
                            "(offset %zu, shape [%lld, %lld, %lld, %lld], strides [%lld, %lld, "
                            "%lld, %lld])",
                            name, (unsigned long long)end, name, t->buffer->size, t->offset,
                            (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2],
                            (long long)t->shape[3], (long long)t->strides[0],
                            (long long)t->strides[1], (long long)t->strides[2],
                            (long long)t->strides[3]);
    return XATTN_STATUS_OK;
}

/* The layout of a q8_0 view (k, v, k_new, v_new), whose blocks of 32 values
 * run along the head dim: the head dim a multiple of 32 and contiguous, every
 * other stride (where its extent is above 1) whole blocks. */
static xattn_status xattn__check_q8_0(const xattn_tensor *t, const char *name)
{
    if (t->dtype != XATTN_DTYPE_Q8_0)
        return XATTN_STATUS_OK;
    if (t->shape[3] % XATTN_Q8_0_BLOCK)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "%s.shape[3]: head dim %lld is not a multiple of %d (q8_0 blocks of "
                            "%d values run along the head dim)",
                            name, (long long)t->shape[3], XATTN_Q8_0_BLOCK, XATTN_Q8_0_BLOCK);
    if (t->shape[3] > 1 && t->strides[3] != 1)
        return xattn__error(XATTN_STATUS_INVALID_STRIDE,
                            "%s.strides[3]: %lld, expected 1 (a q8_0 block's 32 values are "
                            "contiguous along the head dim)",
                            name, (long long)t->strides[3]);
    for (int i = 0; i < 3; i++)
        if (t->shape[i] > 1 && t->strides[i] % XATTN_Q8_0_BLOCK)
            return xattn__error(XATTN_STATUS_INVALID_STRIDE,
                                "%s.strides[%d]: %lld values is not a multiple of %d (q8_0 rows "
                                "start on a block)",
                                name, i, (long long)t->strides[i], XATTN_Q8_0_BLOCK);
    return XATTN_STATUS_OK;
}

/* An output view must not name one element twice (a zero or too small
 * stride would make the kernels race on it): sorted by stride, each dimension's
 * stride must step past everything the smaller dimensions span. Extents of 1
 * and empty views are exempt. */
static xattn_status xattn__check_distinct(const xattn_tensor *t, const char *name, int ndims)
{
    int idx[4];
    int n = 0;
    for (int i = 0; i < ndims; i++) {
        if (t->shape[i] == 0)
            return XATTN_STATUS_OK;
        if (t->shape[i] > 1)
            idx[n++] = i;
    }
    for (int a = 1; a < n; a++) /* insertion sort by stride, n <= 4 */
        for (int b = a; b > 0 && t->strides[idx[b]] < t->strides[idx[b - 1]]; b--) {
            int tmp = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = tmp;
        }
    uint64_t span = 0; /* highest offset the smaller dimensions reach */
    for (int a = 0; a < n; a++) {
        int i = idx[a];
        if ((uint64_t)t->strides[i] <= span)
            return xattn__error(XATTN_STATUS_INVALID_STRIDE,
                                "%s.strides[%d]: %lld makes the output view write some elements "
                                "more than once (an output's stride must exceed %llu, the span of "
                                "its smaller dimensions)",
                                name, i, (long long)t->strides[i], (unsigned long long)span);
        span += (uint64_t)t->strides[i] * (uint64_t)(t->shape[i] - 1);
    }
    return XATTN_STATUS_OK;
}

/* Byte range [lo, hi) a validated view touches; empty for an empty view. */
static void xattn__view_range(const xattn_tensor *t, uint64_t *lo, uint64_t *hi)
{
    uint64_t last = 0;
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] == 0) {
            *lo = *hi = t->offset;
            return;
        }
        last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    }
    *lo = t->offset;
    *hi = t->offset + xattn_dtype_bytes(t->dtype, last + 1);
}

/* The memory a view's bytes are: *id names it (a handle for HANDLE memory,
 * 0 for memory with addresses) and [*lo, *hi) are the view's bytes in it
 * (addresses, or offsets into the handle). */
static void xattn__view_memory(const xattn_tensor *t, uintptr_t *id, uint64_t *lo, uint64_t *hi)
{
    const struct xattn_buffer *b = t->buffer;
    xattn__view_range(t, lo, hi);
    if (b->mem_space == XATTN__MEM_HANDLE) {
        *id = b->native ? (uintptr_t)b->native : (uintptr_t)b;
    } else {
        *id = 0;
        *lo += (uint64_t)b->mem_base;
        *hi += (uint64_t)b->mem_base;
    }
}

/* An output must not share bytes with an input or with the other output:
 * the kernels read inputs while they write, in no promised order. The check is
 * on the memory the views cover, not on buffer handles: two handles wrapping
 * the same host memory (or the same cl_mem, or overlapping CUDA pointers)
 * alias as surely as one handle does. It is on byte ranges, so two views
 * interleaved in one memory are refused too; give outputs their own memory
 * (or disjoint regions of it). */
static xattn_status xattn__check_disjoint(const xattn_tensor *out, const char *oname,
                                          const xattn_tensor *other, const char *name)
{
    if (!other->buffer || other->buffer->mem_space != out->buffer->mem_space)
        return XATTN_STATUS_OK;
    uintptr_t ia, ib;
    uint64_t a0, a1, b0, b1;
    xattn__view_memory(out, &ia, &a0, &a1);
    xattn__view_memory(other, &ib, &b0, &b1);
    if (ia == ib && a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1) {
        if (other->buffer == out->buffer)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s: bytes [%llu, %llu) of its buffer overlap %s's bytes [%llu, "
                                "%llu) (an output may not share memory with an input or another "
                                "output)",
                                oname, (unsigned long long)(a0 - out->buffer->mem_base),
                                (unsigned long long)(a1 - out->buffer->mem_base), name,
                                (unsigned long long)(b0 - out->buffer->mem_base),
                                (unsigned long long)(b1 - out->buffer->mem_base));
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s: its bytes share memory with %s's, through another buffer handle "
                            "on the same memory (an output may not share memory with an input "
                            "or another output)",
                            oname, name);
    }
    return XATTN_STATUS_OK;
}

static xattn_status xattn__expect_dim(const xattn_tensor *t, const char *name, int dim,
                                      int64_t want, const char *what)
{
    if (t->shape[dim] != want)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE, "%s.shape[%d]: %lld, expected %s = %lld",
                            name, dim, (long long)t->shape[dim], what, (long long)want);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__check_head_dim(const xattn_tensor *t, const char *name)
{
    if (t->shape[3] < 1 || t->shape[3] > XATTN_MAX_HEAD_DIM)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "%s.shape[3]: head dim %lld out of range (expected 1..%d)", name,
                            (long long)t->shape[3], XATTN_MAX_HEAD_DIM);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__check_positive(const xattn_tensor *t, const char *name, int dim)
{
    if (t->shape[dim] < 1)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "%s.shape[%d]: %lld, the %s extent must be >= 1", name, dim,
                            (long long)t->shape[dim], xattn__dim_names[dim]);
    return XATTN_STATUS_OK;
}

/* cu_seqlens: from 0, non-decreasing, last entry within `tokens`. Returns the
 * longest sequence through *max_len. */
static xattn_status xattn__check_cu(const int32_t *cu, int64_t n, int64_t tokens, const char *name,
                                    const char *tensor, int64_t *max_len)
{
    if (cu[0] != 0)
        return xattn__error(XATTN_STATUS_INVALID_LENGTHS, "%s[0]: %d, expected 0", name,
                            (int)cu[0]);
    *max_len = 0;
    for (int64_t b = 0; b < n; b++) {
        if (cu[b + 1] < cu[b])
            return xattn__error(XATTN_STATUS_INVALID_LENGTHS,
                                "%s[%lld]: %d is less than %s[%lld] = %d (offsets must not "
                                "decrease)",
                                name, (long long)(b + 1), (int)cu[b + 1], name, (long long)b,
                                (int)cu[b]);
        if (cu[b + 1] - cu[b] > *max_len)
            *max_len = cu[b + 1] - cu[b];
    }
    if (cu[n] > tokens)
        return xattn__error(XATTN_STATUS_INVALID_LENGTHS,
                            "%s[%lld]: %d tokens, but %s holds %lld tokens (shape[1])", name,
                            (long long)n, (int)cu[n], tensor, (long long)tokens);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__check_lens(const int32_t *lens, int64_t n, int64_t max, const char *name)
{
    for (int64_t b = 0; b < n; b++)
        if (lens[b] < 0 || lens[b] > max)
            return xattn__error(XATTN_STATUS_INVALID_LENGTHS,
                                "%s[%lld]: %d out of range (expected 0..%lld)", name, (long long)b,
                                (int)lens[b], (long long)max);
    return XATTN_STATUS_OK;
}

/* Two written views must not share bytes (k and v of an append): the same
 * rule as an output against an input. */
static int xattn__same_bytes(const xattn_tensor *a, const xattn_tensor *b)
{
    uintptr_t ia, ib;
    uint64_t a0, a1, b0, b1;
    xattn__view_memory(a, &ia, &a0, &a1);
    xattn__view_memory(b, &ib, &b0, &b1);
    return a->buffer->mem_space == b->buffer->mem_space && ia == ib && a0 < a1 && b0 < b1 &&
           a0 < b1 && b0 < a1;
}

/* The slots [lo, hi) of one page that one sequence's append writes, its keys
 * from key0. */
typedef struct xattn__wseg {
    int64_t page, lo, hi, seq, key0;
} xattn__wseg;

static int xattn__wseg_less(const xattn__wseg *a, const xattn__wseg *b)
{
    return a->page < b->page || (a->page == b->page && a->lo < b->lo);
}

static void xattn__wseg_sift(xattn__wseg *w, uint64_t i, uint64_t n)
{
    for (uint64_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && xattn__wseg_less(&w[c], &w[c + 1]))
            c++;
        if (!xattn__wseg_less(&w[i], &w[c]))
            return;
        const xattn__wseg t = w[i];
        w[i] = w[c];
        w[c] = t;
    }
}

/* In place (heapsort): a sort's own memory would be memory the limit does not see. */
static void xattn__wseg_sort(xattn__wseg *w, uint64_t n)
{
    if (n < 2)
        return;
    for (uint64_t k = n / 2; k-- > 0;)
        xattn__wseg_sift(w, k, n);
    for (uint64_t end = n - 1; end > 0; end--) {
        const xattn__wseg t = w[0];
        w[0] = w[end];
        w[end] = t;
        xattn__wseg_sift(w, 0, end);
    }
}

/*
 * An append into a paged cache writes each slot once, and no slot that a
 * sequence reads in this call as one of its cached keys (a page shared by a
 * prefix may be read by many sequences, written by none). In memory
 * proportional to the pages the append writes, through the context's
 * allocator (counted against XATTN_OPT_MEMORY_LIMIT).
 */
static xattn_status xattn__check_append_slots(const struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                              int64_t B, int64_t s_new, int64_t ps, int64_t mp)
{
    const int32_t *lens = d->seqlens_k, *table = d->block_table;
    uint64_t n = 0; /* page pieces written: at most s_new / ps + 2 per sequence */
    for (int64_t b = 0; b < B; b++)
        n += (uint64_t)(((int64_t)lens[b] + s_new - 1) / ps - (int64_t)lens[b] / ps + 1);
    /* (n <= B * (s_new + 1), and B * s_new elements of k_new exist in 64 bits) */
    uint64_t bytes;
    if (xattn__mul_overflow(n, (uint64_t)sizeof(xattn__wseg), &bytes))
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                            "k_new.shape[1]: %lld tokens for %lld sequences is more than an "
                            "append can check",
                            (long long)s_new, (long long)B);
    xattn_status st;
    /* the cast touches only the context's counters */
    xattn__wseg *w = xattn__host_alloc((struct xattn_ctx *)ctx, bytes,
                                       "the append's slot check (one entry per page written)", &st);
    if (!w)
        return st;
    uint64_t i = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = lens[b]; j < (int64_t)lens[b] + s_new;) {
            const int64_t lo = j % ps, left = (int64_t)lens[b] + s_new - j;
            const int64_t hi = lo + left < ps ? lo + left : ps;
            xattn__wseg e = {table[b * mp + j / ps], lo, hi, b, j};
            w[i++] = e;
            j += hi - lo;
        }
    xattn__wseg_sort(w, n);
    st = XATTN_STATUS_OK;
    /* Two writes of one slot: overlapping pieces, next to each other once sorted. */
    for (uint64_t k = 1, top = 0; k < n && st == XATTN_STATUS_OK; k++) {
        if (w[k].page == w[top].page && w[k].lo < w[top].hi) {
            const xattn__wseg *a = &w[top], *c = &w[k];
            st = xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                              "block_table: sequence %lld's appended key %lld and sequence "
                              "%lld's appended key %lld go to the same cache slot (page %lld, "
                              "slot %lld): sequences that append must not share the pages they "
                              "write",
                              (long long)a->seq, (long long)(a->key0 + c->lo - a->lo),
                              (long long)c->seq, (long long)c->key0, (long long)c->page,
                              (long long)c->lo);
        }
        if (w[k].page != w[top].page || w[k].hi > w[top].hi)
            top = k;
    }
    /* A write of a slot some sequence reads as a cached key: the first written
     * piece of each page read (pieces of a page are disjoint, sorted by lo). */
    for (int64_t b = 0; b < B && st == XATTN_STATUS_OK; b++)
        for (int64_t g = 0; g * ps < (int64_t)lens[b] && st == XATTN_STATUS_OK; g++) {
            const int64_t page = table[b * mp + g];
            const int64_t read_hi = (int64_t)lens[b] - g * ps < ps ? (int64_t)lens[b] - g * ps : ps;
            uint64_t lo = 0, hi = n; /* first piece with page >= this one */
            while (lo < hi) {
                const uint64_t mid = lo + (hi - lo) / 2;
                if (w[mid].page < page)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == n || w[lo].page != page || w[lo].lo >= read_hi)
                continue;
            const xattn__wseg *c = &w[lo];
            if (c->seq == b)
                st = xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                  "block_table: sequence %lld appends its key %lld to page %lld "
                                  "slot %lld, where its own cached key %lld is (its row of the "
                                  "table holds page %lld twice)",
                                  (long long)b, (long long)c->key0, (long long)page,
                                  (long long)c->lo, (long long)(g * ps + c->lo), (long long)page);
            else
                st = xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                  "block_table: sequence %lld appends its key %lld to page %lld "
                                  "slot %lld, which sequence %lld reads as its cached key %lld in "
                                  "this call (a page shared by several sequences may be read by "
                                  "all of them and written by none: give the appending sequence "
                                  "its own copy of the page)",
                                  (long long)c->seq, (long long)c->key0, (long long)page,
                                  (long long)c->lo, (long long)b, (long long)(g * ps + c->lo));
        }
    xattn__host_free((struct xattn_ctx *)ctx, w, bytes);
    return st;
}

/*
 * A paged cache (block_table) and an append (k_new/v_new): shapes, the table's
 * page indices for every key a sequence has, room for the appended tokens, and
 * no cache slot written twice or both written and read. B, Hkv, D, Dv are known; *Sk becomes the
 * longest sequence after the append (the kernels' key extent).
 */
static xattn_status xattn__check_cache(const struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                       int64_t B, int64_t Hkv, int64_t D, int64_t Dv, int64_t *Sk)
{
    const int paged = d->block_table != NULL;
    const int append = d->k_new.buffer || d->v_new.buffer;
    int64_t s_new = 0;
    if ((paged || append) && !d->seqlens_k)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "seqlens_k: NULL, but %s needs each sequence's cache length",
                            paged ? "a paged cache (block_table)" : "an append (k_new/v_new)");
    if (append) {
        if (!d->k_new.buffer || !d->v_new.buffer)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s.buffer: NULL while %s is set (an append needs both)",
                                d->k_new.buffer ? "v_new" : "k_new",
                                d->k_new.buffer ? "k_new" : "v_new");
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->k_new, "k_new"));
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->v_new, "v_new"));
        if (d->k_new.dtype != d->k.dtype || d->v_new.dtype != d->k.dtype)
            return xattn__error(
                XATTN_STATUS_INVALID_DTYPE,
                "%s.dtype: %s differs from the cache's k.dtype %s (appended "
                "tokens are stored as they are)",
                d->k_new.dtype != d->k.dtype ? "k_new" : "v_new",
                xattn_dtype_name(d->k_new.dtype != d->k.dtype ? d->k_new.dtype : d->v_new.dtype),
                xattn_dtype_name(d->k.dtype));
        XATTN_RETURN_IF_ERROR(xattn__check_q8_0(&d->k_new, "k_new"));
        XATTN_RETURN_IF_ERROR(xattn__check_q8_0(&d->v_new, "v_new"));
        s_new = d->k_new.shape[1];
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->k_new, "k_new", 0, B, "q's batch q.shape[0]"));
        XATTN_RETURN_IF_ERROR(
            xattn__expect_dim(&d->k_new, "k_new", 2, Hkv, "k's heads k.shape[2]"));
        XATTN_RETURN_IF_ERROR(
            xattn__expect_dim(&d->k_new, "k_new", 3, D, "q's head dim q.shape[3]"));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v_new, "v_new", 0, B, "q's batch q.shape[0]"));
        XATTN_RETURN_IF_ERROR(
            xattn__expect_dim(&d->v_new, "v_new", 1, s_new, "k_new's length k_new.shape[1]"));
        XATTN_RETURN_IF_ERROR(
            xattn__expect_dim(&d->v_new, "v_new", 2, Hkv, "k's heads k.shape[2]"));
        XATTN_RETURN_IF_ERROR(
            xattn__expect_dim(&d->v_new, "v_new", 3, Dv, "v's head dim v.shape[3]"));
        /* The cache is written: each of its elements must be one place, and the
         * new tokens must not be read from memory being written. */
        XATTN_RETURN_IF_ERROR(xattn__check_distinct(&d->k, "k", 4));
        XATTN_RETURN_IF_ERROR(xattn__check_distinct(&d->v, "v", 4));
        if (xattn__same_bytes(&d->k, &d->v))
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "v: its bytes overlap k's, and an append writes both (give the "
                                "K and V caches their own memory)");
        static const char *const wn[2] = {"k", "v"};
        const xattn_tensor *w[2] = {&d->k, &d->v};
        for (int i = 0; i < 2; i++) {
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->k_new, "k_new"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->v_new, "v_new"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->q, "q"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->bias, "bias"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->sinks, "sinks"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->k_scale, "k_scale"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(w[i], wn[i], &d->v_scale, "v_scale"));
        }
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->k_new, "k_new"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->v_new, "v_new"));
        if (d->lse.buffer) {
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->k_new, "k_new"));
            XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->v_new, "v_new"));
        }
    }
    if (!paged) {
        if (append)
            for (int64_t b = 0; b < B; b++)
                if ((int64_t)d->seqlens_k[b] + s_new > d->k.shape[1])
                    return xattn__error(XATTN_STATUS_INVALID_LENGTHS,
                                        "seqlens_k[%lld]: %d cached plus %lld appended tokens do "
                                        "not fit the cache's %lld positions (k.shape[1])",
                                        (long long)b, (int)d->seqlens_k[b], (long long)s_new,
                                        (long long)d->k.shape[1]);
        return XATTN_STATUS_OK;
    }

    const int64_t pages = d->k.shape[0], ps = d->k.shape[1], mp = d->max_pages_per_seq;
    if (ps < 1)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "k.shape[1]: %lld, a paged cache's page size must be >= 1",
                            (long long)ps);
    XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v, "v", 0, pages, "k's pages k.shape[0]"));
    if (mp < 1 || mp > INT32_MAX || (uint64_t)mp * (uint64_t)ps > (uint64_t)INT32_MAX)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "max_pages_per_seq: %lld out of range (expected 1.., with "
                            "max_pages_per_seq * page_size %lld within %d positions)",
                            (long long)mp, (long long)ps, INT32_MAX);
    int64_t longest = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t len = (int64_t)d->seqlens_k[b] + s_new;
        if (d->seqlens_k[b] < 0)
            return xattn__error(XATTN_STATUS_INVALID_LENGTHS, "seqlens_k[%lld]: %d is negative",
                                (long long)b, (int)d->seqlens_k[b]);
        if (len > mp * ps)
            return xattn__error(XATTN_STATUS_INVALID_LENGTHS,
                                "seqlens_k[%lld]: %lld keys%s need %lld pages of %lld, but "
                                "block_table has max_pages_per_seq = %lld per sequence",
                                (long long)b, (long long)len, s_new ? " (with the append)" : "",
                                (long long)((len + ps - 1) / ps), (long long)ps, (long long)mp);
        for (int64_t g = 0; g < (len + ps - 1) / ps; g++) {
            int32_t page = d->block_table[b * mp + g];
            if (page < 0 || page >= pages)
                return xattn__error(XATTN_STATUS_OUT_OF_BOUNDS,
                                    "block_table[%lld][%lld]: page %d out of range (the pool "
                                    "k.shape[0] holds pages 0..%lld; sequence %lld uses %lld "
                                    "pages)",
                                    (long long)b, (long long)g, (int)page, (long long)pages - 1,
                                    (long long)b, (long long)((len + ps - 1) / ps));
        }
        if (len > longest)
            longest = len;
    }
    *Sk = longest;
    if (append && B > 0 && s_new > 0)
        return xattn__check_append_slots(ctx, d, B, s_new, ps, mp);
    return XATTN_STATUS_OK;
}

xattn_status xattn__validate(const struct xattn_ctx *ctx, const xattn_attn_desc *d,
                             xattn_desc_summary *sum)
{
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    if (!d)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "desc: NULL");
    /* d is the library's own copy (xattn__desc_in): struct_size was checked
     * there, against the sizes this library accepts. */

    XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->q, "q"));
    XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->k, "k"));
    XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->v, "v"));
    XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->o, "o"));

    if (xattn__dtype_is_kv_only(d->q.dtype))
        return xattn__error(XATTN_STATUS_INVALID_DTYPE,
                            "q.dtype: %s is a K/V cache dtype (q and o are f32, f16 or bf16)",
                            xattn_dtype_name(d->q.dtype));
    if (d->o.dtype != d->q.dtype)
        return xattn__error(XATTN_STATUS_INVALID_DTYPE,
                            "o.dtype: %s differs from q.dtype %s (q and o share one dtype)",
                            xattn_dtype_name(d->o.dtype), xattn_dtype_name(d->q.dtype));
    if (d->v.dtype != d->k.dtype)
        return xattn__error(XATTN_STATUS_INVALID_DTYPE,
                            "v.dtype: %s differs from k.dtype %s (k and v share one dtype)",
                            xattn_dtype_name(d->v.dtype), xattn_dtype_name(d->k.dtype));
    XATTN_RETURN_IF_ERROR(xattn__check_q8_0(&d->k, "k"));
    XATTN_RETURN_IF_ERROR(xattn__check_q8_0(&d->v, "v"));

    /* Heads and head dims. */
    XATTN_RETURN_IF_ERROR(xattn__check_positive(&d->q, "q", 2));
    XATTN_RETURN_IF_ERROR(xattn__check_positive(&d->k, "k", 2));
    XATTN_RETURN_IF_ERROR(xattn__check_head_dim(&d->q, "q"));
    XATTN_RETURN_IF_ERROR(xattn__check_head_dim(&d->v, "v"));
    int64_t Hq = d->q.shape[2], Hkv = d->k.shape[2], D = d->q.shape[3], Dv = d->v.shape[3];
    XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->k, "k", 3, D, "q's head dim q.shape[3]"));
    XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v, "v", 2, Hkv, "k's heads k.shape[2]"));
    XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->o, "o", 2, Hq, "q's heads q.shape[2]"));
    XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->o, "o", 3, Dv, "v's head dim v.shape[3]"));
    if (Hq % Hkv)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "k.shape[2]: %lld KV heads do not divide q.shape[2] = %lld query "
                            "heads (GQA needs Hq to be a multiple of Hkv)",
                            (long long)Hkv, (long long)Hq);

    /* Batch and lengths. */
    int varlen = d->cu_seqlens_q || d->cu_seqlens_k;
    if (varlen && (d->block_table || d->k_new.buffer || d->v_new.buffer))
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "%s: not supported with packed batches (cu_seqlens_q/cu_seqlens_k); "
                            "give q as [B, Sq, Hq, D] with seqlens_q",
                            d->block_table ? "block_table" : "k_new");
    int64_t B, Sq, Sk;
    if (varlen) {
        if (!d->cu_seqlens_q || !d->cu_seqlens_k)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s: NULL while %s is set (packed batches need both)",
                                d->cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                                d->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
        if (d->seqlens_q || d->seqlens_k)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s: cannot be combined with cu_seqlens_q/cu_seqlens_k (padded "
                                "and packed batches exclude each other)",
                                d->seqlens_q ? "seqlens_q" : "seqlens_k");
        if (d->num_seqs < 0 || d->num_seqs > INT32_MAX)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "num_seqs: %lld out of range (expected 0..%d for a packed batch)",
                                (long long)d->num_seqs, INT32_MAX);
        static const char *const nm[4] = {"q", "k", "v", "o"};
        const xattn_tensor *ts[4] = {&d->q, &d->k, &d->v, &d->o};
        for (int i = 0; i < 4; i++)
            if (ts[i]->shape[0] != 1)
                return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                    "%s.shape[0]: %lld, expected 1 (a packed batch holds its "
                                    "sequences along shape[1])",
                                    nm[i], (long long)ts[i]->shape[0]);
        B = d->num_seqs;
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->o, "o", 1, d->q.shape[1], "q.shape[1]"));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v, "v", 1, d->k.shape[1], "k.shape[1]"));
        XATTN_RETURN_IF_ERROR(
            xattn__check_cu(d->cu_seqlens_q, B, d->q.shape[1], "cu_seqlens_q", "q", &Sq));
        XATTN_RETURN_IF_ERROR(
            xattn__check_cu(d->cu_seqlens_k, B, d->k.shape[1], "cu_seqlens_k", "k", &Sk));
    } else {
        XATTN_RETURN_IF_ERROR(xattn__check_positive(&d->q, "q", 0));
        B = d->q.shape[0];
        if (!d->block_table) { /* a page pool's shape[0] counts pages, not sequences */
            XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->k, "k", 0, B, "q's batch q.shape[0]"));
            XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v, "v", 0, B, "q's batch q.shape[0]"));
        }
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->o, "o", 0, B, "q's batch q.shape[0]"));
        Sq = d->q.shape[1];
        Sk = d->k.shape[1];
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->v, "v", 1, Sk,
                                                d->block_table ? "k's page size k.shape[1]"
                                                               : "k's length k.shape[1]"));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->o, "o", 1, Sq, "q's length q.shape[1]"));
        if (Sq > INT32_MAX || Sk > INT32_MAX)
            return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                "%s.shape[1]: %lld is longer than the %d positions a sequence "
                                "may have",
                                Sq > INT32_MAX ? "q" : "k", (long long)(Sq > INT32_MAX ? Sq : Sk),
                                INT32_MAX);
        if (d->seqlens_q)
            XATTN_RETURN_IF_ERROR(xattn__check_lens(d->seqlens_q, B, Sq, "seqlens_q"));
        if (d->seqlens_k && !d->block_table)
            XATTN_RETURN_IF_ERROR(xattn__check_lens(d->seqlens_k, B, Sk, "seqlens_k"));
    }
    XATTN_RETURN_IF_ERROR(xattn__check_cache(ctx, d, B, Hkv, D, Dv, &Sk));

    /* Optional outputs and inputs. */
    if (d->lse.buffer) {
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->lse, "lse"));
        if (d->lse.dtype != XATTN_DTYPE_F32)
            return xattn__error(XATTN_STATUS_INVALID_DTYPE, "lse.dtype: %s, expected f32",
                                xattn_dtype_name(d->lse.dtype));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->lse, "lse", 0, d->q.shape[0], "q.shape[0]"));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->lse, "lse", 1, Hq, "q's heads q.shape[2]"));
        XATTN_RETURN_IF_ERROR(xattn__expect_dim(&d->lse, "lse", 2, d->q.shape[1], "q.shape[1]"));
        if (d->lse.shape[3] != 1)
            return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                "lse.shape[3]: %lld, expected 1 (lse is [B, Hq, Sq, 1])",
                                (long long)d->lse.shape[3]);
    }
    if (d->bias.buffer) {
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->bias, "bias"));
        if (d->bias.dtype != XATTN_DTYPE_F32 && d->bias.dtype != XATTN_DTYPE_F16)
            return xattn__error(XATTN_STATUS_INVALID_DTYPE,
                                "bias.dtype: %s not supported (expected f32 or f16)",
                                xattn_dtype_name(d->bias.dtype));
        if (d->bias.shape[0] != 1 && d->bias.shape[0] != B)
            return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                "bias.shape[0]: %lld does not broadcast over %lld sequences "
                                "(expected 1 or %lld)",
                                (long long)d->bias.shape[0], (long long)B, (long long)B);
        if (d->bias.shape[1] != 1 && d->bias.shape[1] != Hq)
            return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                "bias.shape[1]: %lld does not broadcast over %lld query heads "
                                "(expected 1 or %lld)",
                                (long long)d->bias.shape[1], (long long)Hq, (long long)Hq);
        if (d->bias.shape[2] < Sq || d->bias.shape[3] < Sk)
            return xattn__error(
                XATTN_STATUS_INVALID_SHAPE,
                "bias.shape[%d]: %lld is shorter than the %s length %lld",
                d->bias.shape[2] < Sq ? 2 : 3,
                (long long)(d->bias.shape[2] < Sq ? d->bias.shape[2] : d->bias.shape[3]),
                d->bias.shape[2] < Sq ? "query" : "key",
                (long long)(d->bias.shape[2] < Sq ? Sq : Sk));
    }

    if (d->sinks.buffer) {
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, &d->sinks, "sinks"));
        if (d->sinks.dtype != XATTN_DTYPE_F32)
            return xattn__error(XATTN_STATUS_INVALID_DTYPE, "sinks.dtype: %s, expected f32",
                                xattn_dtype_name(d->sinks.dtype));
        for (int i = 0; i < 4; i++)
            if (d->sinks.shape[i] != (i == 2 ? Hq : 1))
                return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                    "sinks.shape[%d]: %lld, expected %lld (sinks is [1, 1, Hq, 1] "
                                    "with Hq = %lld query heads)",
                                    i, (long long)d->sinks.shape[i], (long long)(i == 2 ? Hq : 1),
                                    (long long)Hq);
    }

    /* The scales of an fp8 cache: f32 [1, 1, Hkv, 1], only with fp8 K/V. */
    static const char *const scn[2] = {"k_scale", "v_scale"};
    const xattn_tensor *sct[2] = {&d->k_scale, &d->v_scale};
    for (int i = 0; i < 2; i++) {
        if (!sct[i]->buffer)
            continue;
        if (!xattn__dtype_is_fp8(d->k.dtype))
            return xattn__error(
                XATTN_STATUS_INVALID_ARGUMENT,
                "%s: set, but k.dtype is %s (scales are for fp8 caches%s)", scn[i],
                xattn_dtype_name(d->k.dtype),
                d->k.dtype == XATTN_DTYPE_Q8_0 ? "; q8_0 blocks carry their own f16 scales" : "");
        XATTN_RETURN_IF_ERROR(xattn__check_view(ctx, sct[i], scn[i]));
        if (sct[i]->dtype != XATTN_DTYPE_F32)
            return xattn__error(XATTN_STATUS_INVALID_DTYPE, "%s.dtype: %s, expected f32", scn[i],
                                xattn_dtype_name(sct[i]->dtype));
        for (int k = 0; k < 4; k++)
            if (sct[i]->shape[k] != (k == 2 ? Hkv : 1))
                return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                                    "%s.shape[%d]: %lld, expected %lld (%s is [1, 1, Hkv, 1] with "
                                    "Hkv = %lld KV heads)",
                                    scn[i], k, (long long)sct[i]->shape[k],
                                    (long long)(k == 2 ? Hkv : 1), scn[i], (long long)Hkv);
    }

    /* Outputs: each element written once, and no memory shared with inputs. */
    XATTN_RETURN_IF_ERROR(xattn__check_distinct(&d->o, "o", 4));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->q, "q"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->k, "k"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->v, "v"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->bias, "bias"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->sinks, "sinks"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->k_scale, "k_scale"));
    XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->o, "o", &d->v_scale, "v_scale"));
    if (d->lse.buffer) {
        XATTN_RETURN_IF_ERROR(xattn__check_distinct(&d->lse, "lse", 3));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->o, "o"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->q, "q"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->k, "k"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->v, "v"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->bias, "bias"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->sinks, "sinks"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->k_scale, "k_scale"));
        XATTN_RETURN_IF_ERROR(xattn__check_disjoint(&d->lse, "lse", &d->v_scale, "v_scale"));
    }

    /* Scalars and flags. */
    if (!isfinite(d->scale))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "scale: %g is not finite (0 selects 1/sqrt(D))", (double)d->scale);
    if (!isfinite(d->softcap) || d->softcap < 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "softcap: %g, expected a finite value >= 0 (0 = off)",
                            (double)d->softcap);
    if (d->alibi_slopes)
        for (int64_t h = 0; h < Hq; h++)
            if (!isfinite(d->alibi_slopes[h]))
                return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                    "alibi_slopes[%lld]: %g is not finite", (long long)h,
                                    (double)d->alibi_slopes[h]);
    if (d->causal != 0 && d->causal != 1)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "causal: %d, expected 0 or 1",
                            d->causal);
    if (d->align != XATTN_ALIGN_TOP_LEFT && d->align != XATTN_ALIGN_BOTTOM_RIGHT)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "align: %d, expected XATTN_ALIGN_TOP_LEFT (0) or "
                            "XATTN_ALIGN_BOTTOM_RIGHT (1)",
                            (int)d->align);
    if ((unsigned)d->algo >= XATTN_ALGO_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "algo: %d, expected AUTO (0), NAIVE (1), FLASH (2) or SPLITKV (3)",
                            (int)d->algo);
    if (d->num_splits < 0 || d->num_splits > 4096)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "num_splits: %d out of range (expected 0 = automatic, or 1..4096)",
                            d->num_splits);

    /* Work sizes every algorithm indexes with: B*Hq*Sq rows of Dv, B*Hq*Sq*Sk pairs. */
    uint64_t rows, pairs;
    if (xattn__mul_overflow((uint64_t)B, (uint64_t)Hq, &rows) ||
        xattn__mul_overflow(rows, (uint64_t)Sq, &rows) ||
        xattn__mul_overflow(rows, (uint64_t)Sk, &pairs) || pairs > (uint64_t)INT64_MAX)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                            "shape: B*Hq*Sq*Sk = %lld*%lld*%lld*%lld overflows 63 bits",
                            (long long)B, (long long)Hq, (long long)Sq, (long long)Sk);

    memset(sum, 0, sizeof *sum);
    sum->B = B;
    sum->Hq = Hq;
    sum->Hkv = Hkv;
    sum->D = D;
    sum->Dv = Dv;
    sum->Sq = Sq;
    sum->Sk = Sk;
    sum->varlen = varlen;
    sum->rows_total = varlen ? (int64_t)d->cu_seqlens_q[B] * Hq : (int64_t)rows;
    sum->q_dtype = d->q.dtype;
    sum->kv_dtype = d->k.dtype;
    sum->paged = d->block_table != NULL;
    sum->s_new = d->k_new.buffer ? d->k_new.shape[1] : 0;
    return XATTN_STATUS_OK;
}
