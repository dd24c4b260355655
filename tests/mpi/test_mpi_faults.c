/*
 * Faults across ranks (include/xattn_mpi.h), run under mpiexec with 2..4 ranks
 * against the tests' build of the library (XATTN_MPI_TEST_HOOKS: a function
 * pointer that delays or stalls one rank at a named point, deterministically):
 *
 *  - a timeout leaves no MPI operation on freed memory: one rank stalls at a
 *    ring step's wait (making no MPI call, until the others have returned),
 *    the others time out, and afterwards every rank goes on using MPI and the
 *    ring works;
 *  - slow work is not a lost rank: one rank's compute (or staging) is delayed
 *    fifteen times the timeout and no rank reports a timeout;
 *  - ranks that fail differently return the same status, and ranks that
 *    describe different problems get a message naming the rank and the
 *    values (dtypes and layouts by name);
 *  - a message too large for MPI is refused before anything is allocated;
 *  - the all-to-all sends no LSE when none is asked for.
 *
 * No assertion depends on timing: the stalled rank waits for files the others
 * write after they returned, and the delays only make a wrong deadline trip.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, nanosleep */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xattn_mpi.h"

extern void (*xattn_mpi__test_hook)(const char *where, int rank, int step);

static int g_rank, g_n, g_fail, g_pass;
static xattn_ctx *g_ctx;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("rank %d FAIL %s:%d: ", g_rank, __FILE__, __LINE__);                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            g_fail++;                                                                              \
        } else {                                                                                   \
            g_pass++;                                                                              \
        }                                                                                          \
    } while (0)

/* ---- the hook ------------------------------------------------------------ */

enum { HOOK_SLEEP = 1, HOOK_FILES = 2 };
static const char *g_where;
static int g_who = -1, g_step, g_mode, g_ms;
static char g_dir[256];

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Fires once, on rank g_who at (g_where, g_step): sleeps g_ms, or waits
 * (without any MPI call, so that its MPI operations make no progress) until
 * every other rank has written its file into g_dir. */
static void hook(const char *where, int rank, int step)
{
    if (rank != g_who || strcmp(where, g_where) || step != g_step)
        return;
    g_who = -1;
    if (g_mode == HOOK_SLEEP) {
        sleep_ms(g_ms);
        return;
    }
    for (int p = 0; p < g_n; p++) {
        char f[300];
        snprintf(f, sizeof f, "%s/r%d", g_dir, p);
        while (p != rank && access(f, F_OK) != 0)
            sleep_ms(2);
        remove(f);
    }
}

static void arm(const char *where, int who, int step, int mode, int ms)
{
    g_where = where;
    g_who = who;
    g_step = step;
    g_mode = mode;
    g_ms = ms;
}

/* ---- one problem, sharded --------------------------------------------- */

typedef struct prob {
    int B, Hq, Hkv, D, Dv, sq, sk, causal, lse;
    xattn_mpi_layout layout;
    float *oref, *lref; /* the whole problem on one device */
    xattn_mpi_segment qs[2];
    int64_t sql, skl;
    xattn_buffer *q, *k, *v, *o, *l;
} prob;

static uint32_t g_seed;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static xattn_buffer *upload(const float *a, size_t n)
{
    xattn_buffer *b = NULL;
    float *zero = a ? NULL : calloc(n + 1, sizeof(float)); /* a == NULL: zeros */
    if (xattn_buffer_alloc(g_ctx, (n ? n : 1) * sizeof(float), &b) != XATTN_STATUS_OK ||
        (n && xattn_buffer_write(b, 0, a ? a : zero, n * sizeof(float)) != XATTN_STATUS_OK)) {
        printf("rank %d: upload failed: %s\n", g_rank, xattn_last_error());
        exit(1);
    }
    free(zero);
    return b;
}

/* rows of the segments of a [B, S, H, E] array, packed */
static float *shard(const float *a, int B, int S, int H, int E, const xattn_mpi_segment *seg,
                    int64_t len)
{
    float *out = calloc((size_t)B * (size_t)len * H * E + 1, sizeof(float));
    for (int b = 0; b < B; b++)
        for (int s = 0, at = 0; s < 2; at += (int)seg[s].length, s++)
            memcpy(out + ((size_t)b * len + at) * H * E, a + ((size_t)b * S + seg[s].start) * H * E,
                   (size_t)seg[s].length * H * E * sizeof(float));
    return out;
}

static void prob_make(prob *p)
{
    size_t nq = (size_t)p->B * p->sq * p->Hq * p->D, nk = (size_t)p->B * p->sk * p->Hkv * p->D;
    size_t nv = (size_t)p->B * p->sk * p->Hkv * p->Dv, no = (size_t)p->B * p->sq * p->Hq * p->Dv;
    size_t nl = (size_t)p->B * p->Hq * p->sq;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4);
    g_seed = 777u + (uint32_t)p->sq;
    for (size_t i = 0; i < nq; i++)
        q[i] = rnd();
    for (size_t i = 0; i < nk; i++)
        k[i] = rnd();
    for (size_t i = 0; i < nv; i++)
        v[i] = rnd();
    p->oref = malloc(no * 4);
    p->lref = malloc(nl * 4);
    xattn_buffer *bq = upload(q, nq), *bk = upload(k, nk), *bv = upload(v, nv);
    xattn_buffer *bo = upload(NULL, no), *bl = upload(NULL, nl);
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    d.causal = p->causal;
    d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, p->B, p->sq, p->Hq, p->D);
    d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, p->B, p->sk, p->Hkv, p->D);
    d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, p->B, p->sk, p->Hkv, p->Dv);
    d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, p->B, p->sq, p->Hq, p->Dv);
    d.lse = xattn_tensor_bshd(bl, 0, XATTN_DTYPE_F32, p->B, p->Hq, p->sq, 1);
    if (xattn_attention(g_ctx, &d, NULL) != XATTN_STATUS_OK) {
        printf("rank %d: reference failed: %s\n", g_rank, xattn_last_error());
        exit(1);
    }
    xattn_buffer_read(bo, 0, p->oref, no * 4);
    xattn_buffer_read(bl, 0, p->lref, nl * 4);
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);
    xattn_mpi_segment ks[2];
    p->sql = xattn_mpi_shard(p->layout, p->sq, g_n, g_rank, p->qs);
    p->skl = xattn_mpi_shard(p->layout, p->sk, g_n, g_rank, ks);
    float *lq = shard(q, p->B, p->sq, p->Hq, p->D, p->qs, p->sql);
    float *lk = shard(k, p->B, p->sk, p->Hkv, p->D, ks, p->skl);
    float *lv = shard(v, p->B, p->sk, p->Hkv, p->Dv, ks, p->skl);
    p->q = upload(lq, (size_t)p->B * p->sql * p->Hq * p->D);
    p->k = upload(lk, (size_t)p->B * p->skl * p->Hkv * p->D);
    p->v = upload(lv, (size_t)p->B * p->skl * p->Hkv * p->Dv);
    p->o = upload(NULL, (size_t)p->B * p->sql * p->Hq * p->Dv);
    p->l = upload(NULL, (size_t)p->B * p->Hq * p->sql);
    free(lq);
    free(lk);
    free(lv);
    free(q);
    free(k);
    free(v);
}

static void prob_desc(const prob *p, xattn_attn_desc *d, xattn_mpi_ring_opts *o)
{
    xattn_attn_desc_init(d);
    d->causal = p->causal;
    d->q = xattn_tensor_bshd(p->q, 0, XATTN_DTYPE_F32, p->B, p->sql, p->Hq, p->D);
    d->k = xattn_tensor_bshd(p->k, 0, XATTN_DTYPE_F32, p->B, p->skl, p->Hkv, p->D);
    d->v = xattn_tensor_bshd(p->v, 0, XATTN_DTYPE_F32, p->B, p->skl, p->Hkv, p->Dv);
    d->o = xattn_tensor_bshd(p->o, 0, XATTN_DTYPE_F32, p->B, p->sql, p->Hq, p->Dv);
    if (p->lse)
        d->lse = xattn_tensor_bshd(p->l, 0, XATTN_DTYPE_F32, p->B, p->Hq, p->sql, 1);
    xattn_mpi_ring_opts_init(o);
    o->layout = p->layout;
    o->sq_global = p->sq;
    o->sk_global = p->sk;
}

/* This rank's rows of O (and LSE) against the reference: mismatches. */
static int prob_check(const prob *p)
{
    size_t no = (size_t)p->B * p->sql * p->Hq * p->Dv, nl = (size_t)p->B * p->Hq * p->sql;
    float *o = malloc(no * 4 + 4), *l = malloc(nl * 4 + 4);
    xattn_buffer_read(p->o, 0, o, no * 4);
    xattn_buffer_read(p->l, 0, l, nl * 4);
    int bad = 0;
    for (int b = 0; b < p->B; b++)
        for (int s = 0, at = 0; s < 2; at += (int)p->qs[s].length, s++)
            for (int64_t i = 0; i < p->qs[s].length; i++)
                for (int h = 0; h < p->Hq; h++) {
                    int64_t gi = p->qs[s].start + i, li = at + i;
                    for (int e = 0; e < p->Dv; e++) {
                        float r = p->oref[(((size_t)b * p->sq + gi) * p->Hq + h) * p->Dv + e];
                        float g = o[(((size_t)b * p->sql + li) * p->Hq + h) * p->Dv + e];
                        bad += !(fabsf(r - g) <= 2e-5f + 1e-4f * fabsf(r));
                    }
                    if (p->lse) {
                        float r = p->lref[((size_t)b * p->Hq + h) * p->sq + gi];
                        float g = l[((size_t)b * p->Hq + h) * p->sql + li];
                        bad += !(fabsf(r - g) <= 1e-4f * (1.0f + fabsf(r)));
                    }
                }
    free(o);
    free(l);
    return bad;
}

static void prob_free(prob *p)
{
    xattn_buffer_free(p->q);
    xattn_buffer_free(p->k);
    xattn_buffer_free(p->v);
    xattn_buffer_free(p->o);
    xattn_buffer_free(p->l);
    free(p->oref);
    free(p->lref);
}

typedef xattn_status (*strategy)(MPI_Comm, xattn_ctx *, const xattn_attn_desc *,
                                 const xattn_mpi_ring_opts *, xattn_mpi_stats *);

/* ---- the cases ----------------------------------------------------------- */

/* One rank stalls in a ring step's wait without calling MPI until the others
 * have timed out and returned: their pending operations must keep their
 * memory, and MPI (and the ring) must work afterwards on every rank. */
static void crash_after_timeout(void)
{
    int last = g_n - 1;
    /* blocks of 4 MiB: far past any eager limit, so that the transfers with
     * the stalled rank stay pending */
    prob p = {1, 1, 1,        64, 64, g_n, 8192 * g_n, 0, 1, XATTN_MPI_CONTIGUOUS,
              0, 0, {{0, 0}}, 0,  0,  0,   0,          0, 0, 0};
    prob_make(&p);
    if (g_rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/xattn-mpi-faults-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(g_dir)) {
            printf("mkdtemp failed\n");
            exit(1);
        }
    }
    MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    xattn_attn_desc d;
    xattn_mpi_ring_opts o;
    prob_desc(&p, &d, &o);
    o.timeout_ms = 200;
    o.entry_timeout_ms = 600000; /* however late a loaded rank enters */
    arm("wait", last, 0, HOOK_FILES, 0);
    xattn_status st = xattn_mpi_ring_attention(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
    CHECK(st == XATTN_STATUS_BACKEND && strstr(xattn_mpi_last_error(), "timeout_ms"),
          "a rank stalled at step 0's wait: %s (%s)", xattn_status_name(st),
          xattn_mpi_last_error());
    if (g_rank != last) {
        char f[300];
        snprintf(f, sizeof f, "%s/r%d", g_dir, g_rank);
        FILE *fp = fopen(f, "w");
        if (fp)
            fclose(fp);
    }
    /* the application goes on with MPI: the stalled rank's transfers now
     * complete into the others' (kept) buffers */
    MPI_Barrier(MPI_COMM_WORLD);
    int sum = 0, one = g_rank;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == g_n * (g_n - 1) / 2, "MPI_Allreduce after the timeout: %d", sum);
    for (int i = 0; i < 20; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        xattn_mpi_pending(); /* tests the kept operations: frees the completed */
    }
    /* and the ring works again, on a new private communicator */
    prob_desc(&p, &d, &o);
    st = xattn_mpi_ring_attention(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
    CHECK(st == XATTN_STATUS_OK && prob_check(&p) == 0, "the ring after a timeout: %s (%s)",
          xattn_status_name(st), xattn_mpi_last_error());
    if (g_rank == 0)
        rmdir(g_dir);
    prob_free(&p);
}

/* One rank's work is delayed fifteen times the timeout (the compute of a
 * ring step, the ring's setup, the all-to-all's compute): the others wait at
 * the agreement and must not report a timeout. */
static void slow_rank_is_not_lost(void)
{
    int last = g_n - 1;
    static const struct {
        const char *where;
        int step, alltoall;
    } at[] = {{"compute", 1, 0}, {"setup", -1, 0}, {"compute", 0, 1}};
    for (int i = 0; i < 3; i++) {
        prob p = {1, 12, 12,       16, 16, 24, 24, 1, 1, XATTN_MPI_CONTIGUOUS,
                  0, 0,  {{0, 0}}, 0,  0,  0,  0,  0, 0, 0};
        prob_make(&p);
        xattn_attn_desc d;
        xattn_mpi_ring_opts o;
        prob_desc(&p, &d, &o);
        o.timeout_ms = 100;
        o.entry_timeout_ms = 600000; /* however late a loaded rank enters */
        arm(at[i].where, last, at[i].step < g_n ? at[i].step : 0, HOOK_SLEEP, 1500);
        strategy fn = at[i].alltoall ? xattn_mpi_alltoall_attention : xattn_mpi_ring_attention;
        xattn_status st = fn(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
        g_who = -1;
        CHECK(st == XATTN_STATUS_OK && prob_check(&p) == 0,
              "%s: rank %d's %s delayed 1500 ms with timeout_ms 100: %s (%s)",
              at[i].alltoall ? "all-to-all" : "ring", last, at[i].where, xattn_status_name(st),
              xattn_mpi_last_error());
        prob_free(&p);
    }
}

/* Ranks that fail their own checks differently return one status. */
static void same_status(void)
{
    int last = g_n - 1;
    for (int a2a = 0; a2a < 2; a2a++) {
        /* rank 0: o in f16 (INVALID_DTYPE); the last rank: a wrong LSE shape
         * (INVALID_SHAPE): every rank returns rank 0's status */
        prob p = {1, 12, 12,       8, 8, 13, 13, 1, 1, XATTN_MPI_ZIGZAG,
                  0, 0,  {{0, 0}}, 0, 0, 0,  0,  0, 0, 0};
        prob_make(&p);
        xattn_attn_desc d;
        xattn_mpi_ring_opts o;
        prob_desc(&p, &d, &o);
        if (g_rank == 0)
            d.o.dtype = XATTN_DTYPE_F16;
        if (g_rank == last && g_n > 1)
            d.lse.shape[2] += 1;
        strategy fn = a2a ? xattn_mpi_alltoall_attention : xattn_mpi_ring_attention;
        xattn_status st = fn(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
        const char *m = xattn_mpi_last_error();
        CHECK(st == XATTN_STATUS_INVALID_DTYPE &&
                  (g_rank == 0 || (strstr(m, "rank 0") && (g_rank != last || strstr(m, "SHAPE")))),
              "%s: INVALID_DTYPE on rank 0, INVALID_SHAPE on rank %d: %s (%s)",
              a2a ? "all-to-all" : "ring", last, xattn_status_name(st), m);
        /* the reported form: UNSUPPORTED on most ranks (heads the all-to-all
         * cannot split), INVALID_SHAPE on the last one */
        if (a2a && g_n > 1) {
            prob_free(&p);
            prob p3 = {1, g_n + 1, g_n + 1,  8, 8, 13, 13, 1, 1, XATTN_MPI_ZIGZAG,
                       0, 0,       {{0, 0}}, 0, 0, 0,  0,  0, 0, 0};
            p = p3;
            prob_make(&p);
            prob_desc(&p, &d, &o);
            if (g_rank == last)
                d.lse.shape[2] += 1;
            st = fn(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
            m = xattn_mpi_last_error();
            CHECK(st == XATTN_STATUS_UNSUPPORTED &&
                      (g_rank == 0 ||
                       (strstr(m, "rank 0") && (g_rank != last || strstr(m, "SHAPE")))),
                  "all-to-all: UNSUPPORTED on rank 0, INVALID_SHAPE on rank %d: %s (%s)", last,
                  xattn_status_name(st), m);
        }
        prob_free(&p);
    }
}

/* Ranks that describe different problems: the message names the rank that
 * differs and both values, by name. */
static void disagreement_named(void)
{
    if (g_n < 2)
        return;
    int last = g_n - 1;
    char want[32];
    snprintf(want, sizeof want, "rank %d", last);
    /* the last rank shards for the contiguous layout, the others for zigzag */
    prob p = {1,  2,  2,        8, 8,
              29, 29, 1,        1, g_rank == last ? XATTN_MPI_CONTIGUOUS : XATTN_MPI_ZIGZAG,
              0,  0,  {{0, 0}}, 0, 0,
              0,  0,  0,        0, 0};
    prob_make(&p);
    xattn_attn_desc d;
    xattn_mpi_ring_opts o;
    prob_desc(&p, &d, &o);
    xattn_status st = xattn_mpi_ring_attention(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
    const char *m = xattn_mpi_last_error();
    CHECK(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(m, "layout") && strstr(m, "zigzag") &&
              strstr(m, "contiguous") && strstr(m, want),
          "layouts zigzag / contiguous on rank %d: %s (%s)", last, xattn_status_name(st), m);
    prob_free(&p);
    /* the last rank gives f16 tensors, the others f32 */
    prob p2 = {1, 2, 2, 8, 8, 29, 29, 1, 1, XATTN_MPI_ZIGZAG, 0, 0, {{0, 0}}, 0, 0, 0, 0, 0, 0, 0};
    prob_make(&p2);
    prob_desc(&p2, &d, &o);
    if (g_rank == last)
        d.q.dtype = d.k.dtype = d.v.dtype = d.o.dtype = XATTN_DTYPE_F16;
    st = xattn_mpi_alltoall_attention(MPI_COMM_WORLD, g_ctx, &d, &o, NULL);
    m = xattn_mpi_last_error();
    CHECK(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(m, "dtype") && strstr(m, "f16") &&
              strstr(m, "f32") && strstr(m, want),
          "dtypes f32 / f16 on rank %d: %s (%s)", last, xattn_status_name(st), m);
    prob_free(&p2);
}

/* A K/V block (the ring) or an all-to-all past 2^31-1 bytes: refused on
 * every rank before anything is staged. K and V are stride-0 views of a
 * small buffer, and the context may allocate almost nothing: a check that
 * came after the staging would fail on that limit instead. */
static void size_first(void)
{
    int64_t skl = 300000, sk = skl * g_n; /* 300000 x 12 x 256 x 4 bytes: 3.7 GB per rank */
    int H = 12, D = 128;
    xattn_buffer *q = upload(NULL, (size_t)H * D), *kv = upload(NULL, (size_t)D);
    xattn_buffer *o = upload(NULL, (size_t)H * D);
    for (int a2a = 0; a2a < 2; a2a++) {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, 1, 1, H, D);
        d.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, 1, 1, H, D);
        d.k = xattn_tensor_bshd(kv, 0, XATTN_DTYPE_F32, 1, skl, H, D);
        d.v = d.k;
        for (int i = 0; i < 3; i++)
            d.k.strides[i] = d.v.strides[i] = 0;
        xattn_mpi_ring_opts opt;
        xattn_mpi_ring_opts_init(&opt);
        opt.layout = XATTN_MPI_CONTIGUOUS;
        opt.sq_global = g_n;
        opt.sk_global = sk;
        xattn_mem_stats ms;
        xattn_ctx_mem_stats(g_ctx, &ms);
        xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)ms.current_bytes + 65536);
        strategy fn = a2a ? xattn_mpi_alltoall_attention : xattn_mpi_ring_attention;
        xattn_status st = fn(MPI_COMM_WORLD, g_ctx, &d, &opt, NULL);
        xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, 0);
        CHECK(st == XATTN_STATUS_SIZE_OVERFLOW && strstr(xattn_mpi_last_error(), "2^31"),
              "%s: 3.7 GB per rank: %s (%s)", a2a ? "all-to-all" : "ring", xattn_status_name(st),
              xattn_mpi_last_error());
    }
    xattn_buffer_free(q);
    xattn_buffer_free(kv);
    xattn_buffer_free(o);
}

/* The all-to-all without an LSE tensor sends exactly the LSE's bytes less. */
static void alltoall_no_lse(void)
{
    uint64_t bytes[2] = {0, 0};
    for (int lse = 1; lse >= 0; lse--) {
        prob p = {2, 12, 12,       8, 8, 21, 21, 1, lse, XATTN_MPI_ZIGZAG,
                  0, 0,  {{0, 0}}, 0, 0, 0,  0,  0, 0,   0};
        prob_make(&p);
        xattn_attn_desc d;
        xattn_mpi_ring_opts o;
        prob_desc(&p, &d, &o);
        xattn_mpi_stats s;
        xattn_status st = xattn_mpi_alltoall_attention(MPI_COMM_WORLD, g_ctx, &d, &o, &s);
        CHECK(st == XATTN_STATUS_OK && prob_check(&p) == 0, "all-to-all, lse %d: %s (%s)", lse,
              xattn_status_name(st), xattn_mpi_last_error());
        bytes[lse] = s.sum.bytes_sent;
        prob_free(&p);
    }
    /* the LSE of my heads for every other rank's rows: B * Hq/n * iq floats */
    uint64_t want = 0;
    for (int i = 0; i < g_n; i++) {
        xattn_mpi_segment s[2];
        int64_t iq = xattn_mpi_shard(XATTN_MPI_ZIGZAG, 21, g_n, i, s);
        if (i != g_rank)
            want += (uint64_t)(2 * (12 / g_n) * iq * 4);
    }
    CHECK(bytes[1] - bytes[0] == want,
          "all-to-all bytes sent with / without LSE: %llu / %llu, expected a difference of "
          "%llu",
          (unsigned long long)bytes[1], (unsigned long long)bytes[0], (unsigned long long)want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &g_ctx) != XATTN_STATUS_OK) {
        printf("rank %d: no CPU context: %s\n", g_rank, xattn_last_error());
        MPI_Finalize();
        return 1;
    }
    xattn_ctx_set_option(g_ctx, XATTN_OPT_NUM_THREADS, 1);
    xattn_mpi__test_hook = hook;
    const char *only = argc > 1 ? argv[1] : "";
    if (g_n > 1 && (!*only || !strcmp(only, "crash")))
        crash_after_timeout();
    if (g_n > 1 && (!*only || !strcmp(only, "slow")))
        slow_rank_is_not_lost();
    if (!*only || !strcmp(only, "status"))
        same_status();
    if (!*only || !strcmp(only, "names"))
        disagreement_named();
    if (!*only || !strcmp(only, "size"))
        size_first();
    if (!*only || !strcmp(only, "lse"))
        alltoall_no_lse();
    int fails = 0, passes = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_pass, &passes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%d passed, %d failed, 0 skipped (%d ranks; checks counted on every rank; "
               "timed-out calls with operations still pending on rank 0: %d)\n",
               passes, fails, g_n, xattn_mpi_pending());
    xattn_ctx_destroy(g_ctx);
    MPI_Finalize();
    return fails ? 1 : 0;
}
