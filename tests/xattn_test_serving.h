/*
 * Serving inputs that lie, shared by test_reliability (CPU) and
 * test_reliability_cl (OpenCL): a paged KV cache with an append, on any
 * context (docs/guarantees.md names each check).
 *
 *   table in the cache   the block table lies inside the K cache (wrapped host
 *                        memory) where the append writes: the call runs on the
 *                        table it validated, and the result is the reference's;
 *   refusals write none  a memory limit that refuses the call (a sweep of limits
 *                        below what the call needs, every algorithm, paged and
 *                        contiguous): OK, or OUT_OF_MEMORY with K and V unchanged;
 *   shared pages         an append to a slot another sequence reads (a shared
 *                        page) is refused naming the sequences, page and slot;
 *                        the cache is unchanged; a shared prefix that no one
 *                        writes runs;
 *   check memory         the append's overlap check counts against
 *                        XATTN_OPT_MEMORY_LIMIT and grows with the pages written.
 *
 * Include after xattn_test.h and xattn_reference.h.
 */
#ifndef XATTN_TEST_SERVING_H
#define XATTN_TEST_SERVING_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn.h"
#include "xattn_reference.h"

/* The pool of these checks: 5 pages of 4 slots, 1 KV head of 4 dims, f32;
 * one query row per sequence, 2 query heads. */
enum { SV_PAGES = 5, SV_PS = 4, SV_D = 4, SV_HQ = 2, SV_POOL = SV_PAGES * SV_PS * SV_D };

static const xattn_algo sv_algos[3] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV};

static void sv_fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = xattn_test_rng_val(&seed);
}

static xattn_buffer *sv_upload(xattn_ctx *ctx, const float *x, size_t n)
{
    xattn_buffer *b = NULL;
    if (xattn_buffer_alloc(ctx, n * sizeof(float), &b) != XATTN_STATUS_OK)
        return NULL;
    if (x && xattn_buffer_write(b, 0, x, n * sizeof(float)) != XATTN_STATUS_OK) {
        xattn_buffer_free(b);
        return NULL;
    }
    return b;
}

/* Max |o - reference| over B sequences of one row, SV_HQ heads, SV_D dims. */
static double sv_error(xattn_ctx *ctx, const xattn_attn_desc *d, int64_t B)
{
    double oref[4 * SV_HQ * SV_D];
    float o[4 * SV_HQ * SV_D];
    const size_t n = (size_t)(B * SV_HQ * SV_D);
    if (xattn_reference_attention(ctx, d, oref, NULL) != XATTN_STATUS_OK ||
        xattn_buffer_read(d->o.buffer, 0, o, n * sizeof(float)) != XATTN_STATUS_OK)
        return INFINITY;
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)o[i] - oref[i]));
    return isnan(m) ? INFINITY : m;
}

/* A paged (or contiguous: table NULL) cache of B sequences with an append of
 * s_new tokens: the caller's buffers and descriptor. */
typedef struct sv_call {
    xattn_buffer *q, *k, *v, *o, *kn, *vn;
    xattn_attn_desc d;
} sv_call;

static void sv_free(sv_call *c)
{
    xattn_buffer *bs[6] = {c->q, c->k, c->v, c->o, c->kn, c->vn};
    for (int i = 0; i < 6; i++)
        xattn_buffer_free(bs[i]);
    memset(c, 0, sizeof *c);
}

/* k may be given (a wrapped pool); otherwise made. Contiguous (table NULL):
 * k and v are [B, SV_PAGES * SV_PS, 1, D]. */
static int sv_make(sv_call *c, xattn_ctx *ctx, int64_t B, int64_t s_new, const int32_t *table,
                   int64_t mp, const int32_t *lens, xattn_buffer *k)
{
    memset(c, 0, sizeof *c);
    float x[4 * SV_POOL];
    const int64_t S = SV_PAGES * SV_PS, nkv = table ? SV_POOL : B * S * SV_D;
    sv_fill(x, (size_t)nkv, 11);
    c->k = k ? k : sv_upload(ctx, x, (size_t)nkv);
    sv_fill(x, (size_t)nkv, 12);
    c->v = sv_upload(ctx, x, (size_t)nkv);
    sv_fill(x, (size_t)(B * SV_HQ * SV_D), 13);
    c->q = sv_upload(ctx, x, (size_t)(B * SV_HQ * SV_D));
    c->o = sv_upload(ctx, NULL, (size_t)(B * SV_HQ * SV_D));
    sv_fill(x, (size_t)(B * s_new * SV_D), 14);
    c->kn = sv_upload(ctx, x, (size_t)(B * s_new * SV_D));
    sv_fill(x, (size_t)(B * s_new * SV_D), 15);
    c->vn = sv_upload(ctx, x, (size_t)(B * s_new * SV_D));
    if (!c->k || !c->v || !c->q || !c->o || !c->kn || !c->vn)
        return 0;
    xattn_attn_desc *d = &c->d;
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(c->q, 0, XATTN_DTYPE_F32, B, 1, SV_HQ, SV_D);
    d->o = xattn_tensor_bshd(c->o, 0, XATTN_DTYPE_F32, B, 1, SV_HQ, SV_D);
    if (table) {
        d->k = xattn_tensor_bshd(c->k, 0, XATTN_DTYPE_F32, SV_PAGES, SV_PS, 1, SV_D);
        d->v = xattn_tensor_bshd(c->v, 0, XATTN_DTYPE_F32, SV_PAGES, SV_PS, 1, SV_D);
        d->block_table = table;
        d->max_pages_per_seq = mp;
    } else {
        d->k = xattn_tensor_bshd(c->k, 0, XATTN_DTYPE_F32, B, S, 1, SV_D);
        d->v = xattn_tensor_bshd(c->v, 0, XATTN_DTYPE_F32, B, S, 1, SV_D);
    }
    d->k_new = xattn_tensor_bshd(c->kn, 0, XATTN_DTYPE_F32, B, s_new, 1, SV_D);
    d->v_new = xattn_tensor_bshd(c->vn, 0, XATTN_DTYPE_F32, B, s_new, 1, SV_D);
    d->seqlens_k = lens;
    return 1;
}

/* The K and V caches' bytes (n floats each). */
static int sv_snapshot(const sv_call *c, size_t n, float *k, float *v)
{
    return xattn_buffer_read(c->k, 0, k, n * sizeof(float)) == XATTN_STATUS_OK &&
           xattn_buffer_read(c->v, 0, v, n * sizeof(float)) == XATTN_STATUS_OK;
}

static void sv_restore(const sv_call *c, size_t n, const float *k, const float *v)
{
    xattn_buffer_write(c->k, 0, k, n * sizeof(float));
    xattn_buffer_write(c->v, 0, v, n * sizeof(float));
}

/* ---- the block table inside the K cache -------------------------------------- */

/* Sequence 0 has 2 cached keys on page 1 and appends 2: its keys 2 and 3 go to
 * page 1, slots 2 and 3, where the table itself lies (wrapped host memory).
 * The append overwrites the table with k_new's bits (as int32, page numbers
 * far out of the pool); the call must use the table it validated. */
static void sv_test_table_in_cache(xattn_ctx *ctx)
{
    const size_t at = (size_t)(1 * SV_PS + 2) * SV_D; /* page 1, slot 2, as floats */
    float *pool = aligned_alloc(4096, 4096);          /* SV_POOL floats fit in one page */
    float init[SV_POOL];
    sv_fill(init, SV_POOL, 21);
    int ok_all = 1;
    for (int a = 0; a < 3 && pool; a++) {
        memcpy(pool, init, sizeof init);
        const int32_t one = 1;
        memcpy(&pool[at], &one, sizeof one); /* the table: {1} */
        const int32_t *table = (const int32_t *)(void *)&pool[at];
        const int32_t lens[1] = {2};
        xattn_buffer *kb = NULL;
        sv_call c;
        if (xattn_buffer_wrap_host(ctx, pool, 4096, &kb) != XATTN_STATUS_OK ||
            !sv_make(&c, ctx, 1, 2, table, 1, lens, kb)) {
            EXPECT(0, "table in the cache: setup: %s", xattn_last_error());
            xattn_buffer_free(kb);
            break;
        }
        c.d.algo = sv_algos[a];
        xattn_status st = xattn_attention(ctx, &c.d, NULL);
        xattn_ctx_sync(ctx);
        EXPECT(st == XATTN_STATUS_OK, "%s, the table inside the K cache: %s: %s",
               xattn_algo_name(sv_algos[a]), xattn_status_name(st), xattn_last_error());
        /* The reference on the table as it was validated. */
        xattn_attn_desc ref = c.d;
        ref.block_table = &one;
        const double err = st == XATTN_STATUS_OK ? sv_error(ctx, &ref, 1) : INFINITY;
        EXPECT(err < 1e-5, "%s, the table inside the K cache: max error %g",
               xattn_algo_name(sv_algos[a]), err);
        /* k_new went where the validated table said (page 1, slots 2 and 3). */
        float kn[2 * SV_D], got[2 * SV_D];
        xattn_buffer_read(c.kn, 0, kn, sizeof kn);
        xattn_buffer_read(kb, at * sizeof(float), got, sizeof got);
        EXPECT(!memcmp(kn, got, sizeof kn), "%s: k_new is not at page 1, slots 2-3",
               xattn_algo_name(sv_algos[a]));
        ok_all &= st == XATTN_STATUS_OK && err < 1e-5;
        sv_free(&c);
    }
    EXPECT(pool != NULL, "aligned_alloc");
    free(pool);
    printf("  block table inside the K cache, overwritten by the append: %s\n",
           ok_all ? "ran on the validated table, reference's result (3 algorithms)" : "FAILED");
}

/* ---- a refused call writes nothing --------------------------------------------- */

static uint64_t sv_in_use(xattn_ctx *ctx)
{
    xattn_mem_stats m;
    xattn_ctx_mem_stats(ctx, &m);
    return m.current_bytes;
}

/* For each algorithm, paged and contiguous: the unlimited call's workspace,
 * then limits from one byte short of it down to 64 bytes above what is in use:
 * every call returns OK or OUT_OF_MEMORY, and one refused leaves K and V as
 * they were. NAIVE and SPLITKV one byte short must be refused. */
static void sv_test_refusal_writes_nothing(xattn_ctx *ctx)
{
    static const int32_t table[4] = {3, 0, 2, 4};
    int refused = 0, calls = 0, written = 0;
    for (int paged = 0; paged < 2; paged++)
        for (int a = 0; a < 3; a++) {
            const int32_t lens[2] = {3, 5};
            sv_call c;
            const size_t n = paged ? SV_POOL : 2 * SV_PAGES * SV_PS * SV_D;
            if (!sv_make(&c, ctx, 2, 2, paged ? table : NULL, 2, lens, NULL)) {
                EXPECT(0, "refusals: setup: %s", xattn_last_error());
                sv_free(&c);
                return;
            }
            float *k0 = malloc(n * sizeof(float)), *v0 = malloc(n * sizeof(float));
            float *k1 = malloc(n * sizeof(float)), *v1 = malloc(n * sizeof(float));
            xattn_run_info ri;
            c.d.algo = sv_algos[a];
            xattn_status st = XATTN_STATUS_INTERNAL;
            if (k0 && v0 && k1 && v1 && sv_snapshot(&c, n, k0, v0))
                st = xattn_attention(ctx, &c.d, &ri);
            EXPECT(st == XATTN_STATUS_OK, "%s %s, unlimited: %s", paged ? "paged" : "contiguous",
                   xattn_algo_name(sv_algos[a]), xattn_last_error());
            const uint64_t ws = st == XATTN_STATUS_OK ? ri.workspace_bytes : 0;
            for (int step = 0; st == XATTN_STATUS_OK && ws > 0 && step < 12; step++) {
                /* ws - 1, then shares of it, then 64 bytes */
                const uint64_t room = step == 0 ? ws - 1 : step == 11 ? 64 : ws * (11 - step) / 11;
                sv_restore(&c, n, k0, v0);
                xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)(sv_in_use(ctx) + room));
                xattn_status r = xattn_attention(ctx, &c.d, NULL);
                char msg[512];
                snprintf(msg, sizeof msg, "%s", xattn_last_error());
                xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
                calls++;
                EXPECT(r == XATTN_STATUS_OK || r == XATTN_STATUS_OUT_OF_MEMORY,
                       "%s %s, %llu bytes of room: %s: %s", paged ? "paged" : "contiguous",
                       xattn_algo_name(sv_algos[a]), (unsigned long long)room, xattn_status_name(r),
                       msg);
                if (step == 0 && sv_algos[a] != XATTN_ALGO_FLASH)
                    EXPECT(r == XATTN_STATUS_OUT_OF_MEMORY,
                           "%s %s, one byte short of its %llu-byte workspace: %s",
                           paged ? "paged" : "contiguous", xattn_algo_name(sv_algos[a]),
                           (unsigned long long)ws, xattn_status_name(r));
                if (r != XATTN_STATUS_OUT_OF_MEMORY)
                    continue;
                refused++;
                const int same = sv_snapshot(&c, n, k1, v1) && !memcmp(k0, k1, n * sizeof(float)) &&
                                 !memcmp(v0, v1, n * sizeof(float));
                written += !same;
                EXPECT(same,
                       "%s %s, %llu bytes of room: refused (%s), but the K/V cache was written",
                       paged ? "paged" : "contiguous", xattn_algo_name(sv_algos[a]),
                       (unsigned long long)room, msg);
            }
            if (st == XATTN_STATUS_OK) { /* with room for what it needs, it runs */
                sv_restore(&c, n, k0, v0);
                xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT,
                                     (int64_t)(sv_in_use(ctx) + ws + 4096));
                xattn_status r = xattn_attention(ctx, &c.d, NULL);
                xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
                EXPECT(r == XATTN_STATUS_OK, "%s %s, room for its %llu-byte workspace: %s: %s",
                       paged ? "paged" : "contiguous", xattn_algo_name(sv_algos[a]),
                       (unsigned long long)ws, xattn_status_name(r), xattn_last_error());
                const double err = r == XATTN_STATUS_OK ? sv_error(ctx, &c.d, 2) : INFINITY;
                EXPECT(err < 1e-5, "%s %s under the limit: max error %g",
                       paged ? "paged" : "contiguous", xattn_algo_name(sv_algos[a]), err);
            }
            free(k0), free(v0), free(k1), free(v1);
            sv_free(&c);
        }
    EXPECT(refused > 0, "no call was refused");
    printf("  memory-limit sweep with appends: %d of %d calls refused, %d of them wrote the "
           "cache\n",
           refused, calls, written);
}

/* ---- one sequence's append over another's keys ------------------------------------ */

static void sv_test_shared_page(xattn_ctx *ctx)
{
    /* Sequences 0 and 1 share page 3 with 2 and 4 cached keys: sequence 0's
     * key 2 goes to page 3, slot 2, which sequence 1 reads as its key 2. */
    static const int32_t table[4] = {3, 0, 3, 1};
    const int32_t lens[2] = {2, 4};
    sv_call c;
    float k0[SV_POOL], v0[SV_POOL], k1[SV_POOL], v1[SV_POOL];
    if (!sv_make(&c, ctx, 2, 1, table, 2, lens, NULL) || !sv_snapshot(&c, SV_POOL, k0, v0)) {
        EXPECT(0, "shared page: setup: %s", xattn_last_error());
        sv_free(&c);
        return;
    }
    char msg[1024] = "";
    for (int a = 0; a < 3; a++) {
        c.d.algo = sv_algos[a];
        xattn_status st = xattn_attention(ctx, &c.d, NULL);
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(msg, "sequence 0") &&
                   strstr(msg, "sequence 1") && strstr(msg, "page 3") && strstr(msg, "slot 2"),
               "%s: an append over another sequence's key: %s: %s", xattn_algo_name(sv_algos[a]),
               xattn_status_name(st), msg);
        EXPECT(sv_snapshot(&c, SV_POOL, k1, v1) && !memcmp(k0, k1, sizeof k0) &&
                   !memcmp(v0, v1, sizeof v0),
               "%s: the refused call wrote the cache", xattn_algo_name(sv_algos[a]));
    }
    xattn_status st = xattn_attention_check(ctx, &c.d);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && !strcmp(msg, xattn_last_error()),
           "xattn_attention_check differs: %s: %s", xattn_status_name(st), xattn_last_error());
    printf("  append over another sequence's key: %s\n", msg);

    /* A sequence whose table row holds one page twice appends over its own
     * cached key. */
    static const int32_t twice[2] = {3, 3};
    const int32_t len4[1] = {4};
    sv_call s;
    if (sv_make(&s, ctx, 1, 1, twice, 2, len4, NULL)) {
        st = xattn_attention(ctx, &s.d, NULL);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), "sequence 0") &&
                   strstr(xattn_last_error(), "page 3") && strstr(xattn_last_error(), "slot 0"),
               "an append over the sequence's own key: %s: %s", xattn_status_name(st),
               xattn_last_error());
    }
    sv_free(&s);

    /* A shared prefix that no one writes: both sequences read page 3 whole
     * and append to pages of their own. */
    const int32_t full[2] = {4, 4};
    c.d.seqlens_k = full;
    for (int a = 0; a < 3; a++) {
        sv_restore(&c, SV_POOL, k0, v0);
        c.d.algo = sv_algos[a];
        st = xattn_attention(ctx, &c.d, NULL);
        EXPECT(st == XATTN_STATUS_OK, "%s, a shared prefix read by two: %s: %s",
               xattn_algo_name(sv_algos[a]), xattn_status_name(st), xattn_last_error());
        const double err = st == XATTN_STATUS_OK ? sv_error(ctx, &c.d, 2) : INFINITY;
        EXPECT(err < 1e-5, "%s, a shared prefix: max error %g", xattn_algo_name(sv_algos[a]), err);
    }
    sv_free(&c);
}

/* ---- memory of the append's check ------------------------------------------------ */

/* 2^20 tokens appended (k_new with strides 0) to pages of one slot: the check
 * needs an entry per page written, counted against the limit (in use + 4 KiB:
 * refused, nothing held after); the same tokens on one page of 2^20 slots need
 * one entry and pass under the same limit. */
static void sv_test_check_memory(xattn_ctx *ctx)
{
    enum { N = 1 << 20 };
    int32_t *table = malloc((size_t)N * sizeof(int32_t));
    const int32_t lens[1] = {0};
    xattn_buffer *k = NULL, *v = NULL, *one = NULL, *q = NULL, *o = NULL;
    const float x = 0.5f;
    xattn_status st = table ? XATTN_STATUS_OK : XATTN_STATUS_OUT_OF_MEMORY;
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (size_t)N * sizeof(float), &k);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (size_t)N * sizeof(float), &v);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, sizeof x, &one);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(one, 0, &x, sizeof x);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, sizeof x, &q);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, sizeof x, &o);
    EXPECT(st == XATTN_STATUS_OK, "check memory: setup: %s", xattn_last_error());
    if (st == XATTN_STATUS_OK) {
        for (int32_t i = 0; i < N; i++)
            table[i] = i;
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 1, 1, 1, 1);
        d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 1, 1, 1, 1);
        d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, N, 1, 1, 1);
        d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, N, 1, 1, 1);
        xattn_tensor kn = {one, 0, XATTN_DTYPE_F32, {1, N, 1, 1}, {0, 0, 0, 0}};
        d.k_new = kn, d.v_new = kn;
        d.seqlens_k = lens;
        d.block_table = table;
        d.max_pages_per_seq = N;
        st = xattn_attention_check(ctx, &d);
        EXPECT(st == XATTN_STATUS_OK, "2^20 one-slot pages, unlimited: %s: %s",
               xattn_status_name(st), xattn_last_error());
        const uint64_t before = sv_in_use(ctx);
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)(before + 4096));
        st = xattn_attention_check(ctx, &d);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && strstr(msg, "XATTN_OPT_MEMORY_LIMIT"),
               "2^20 pages written, limit at in use + 4 KiB: %s: %s", xattn_status_name(st), msg);
        EXPECT(sv_in_use(ctx) == before, "the check holds %llu bytes after its refusal",
               (unsigned long long)(sv_in_use(ctx) - before));
        printf("  append check over 2^20 pages, limit at in use + 4 KiB: %s: %.160s\n",
               xattn_status_name(st), msg);
        /* The same tokens on one page of 2^20 slots. */
        d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, 1, N, 1, 1);
        d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, 1, N, 1, 1);
        d.max_pages_per_seq = 1;
        st = xattn_attention_check(ctx, &d);
        EXPECT(st == XATTN_STATUS_OK, "2^20 tokens on one page, limit at in use + 4 KiB: %s: %s",
               xattn_status_name(st), xattn_last_error());
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    }
    xattn_buffer_free(k), xattn_buffer_free(v), xattn_buffer_free(one);
    xattn_buffer_free(q), xattn_buffer_free(o);
    free(table);
}

static void sv_test_all(xattn_ctx *ctx)
{
    sv_test_table_in_cache(ctx);
    sv_test_refusal_writes_nothing(ctx);
    sv_test_shared_page(ctx);
    sv_test_check_memory(ctx);
}

#endif
