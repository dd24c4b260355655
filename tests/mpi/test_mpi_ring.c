/*
 * Ring attention over MPI (include/xattn_mpi.h), run under mpiexec with 1..4
 * ranks. Every rank computes the whole problem on one device as the
 * reference, runs the ring on its shards, and compares its rows of O and LSE
 * with the reference's (f32 rounding tolerance). Then the failure rules: a bad
 * descriptor on one rank, an allocation failure on one rank and ranks that
 * disagree make every rank return an error, and the ring still works after.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_mpi.h"

static int g_rank, g_n, g_fail, g_pass;
static xattn_mpi_stats g_stats; /* the last call's */
static xattn_ctx *g_ctx;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("rank %d FAIL %s:%d: ", g_rank, __FILE__, __LINE__);                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

typedef struct tcase {
    const char *name;
    int B, Hq, Hkv, D, Dv;
    int sq, sk;
    int causal;
    xattn_align align;
    int wl, wr;
    const int32_t *lq, *lk; /* global lengths or NULL */
    int bhsd;               /* q and o in BHSD layout (strided shards) */
    int bias;               /* an f32 bias [1, Hq, Sq, Sk] with some -inf (2: [1, 1, Sq, Sk]) */
    int packed;             /* lq/lk: the B sequences' lengths in one token stream of
                             * sq / sk tokens (tensors with batch 1) */
    int alibi;              /* ALiBi slopes (gentle: far blocks still weigh) */
    int sinks;              /* attention sinks, one logit per query head */
} tcase;

static const float g_sinks[8] = {0.5f, -1.0f, 2.0f, -INFINITY, 1.0f, 0.0f, -2.0f, 3.0f};

static const float g_slopes[16] = {0.3f, 0.1f, 0.05f, 0.02f, 0.25f, 0.15f, 0.07f, 0.01f,
                                   0.3f, 0.1f, 0.05f, 0.02f, 0.25f, 0.15f, 0.07f, 0.01f};

static uint32_t g_seed;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rand_array(size_t n)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = rnd();
    return a;
}

/* rows [start, start+len) of a [B, S, H, E] array, appended to dst at row *at */
static void take_rows(const float *src, float *dst, int B, int S, int H, int E, int dS,
                      int64_t start, int64_t len, int64_t at)
{
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < len; i++)
            memcpy(dst + (((size_t)b * dS + at + i) * H) * E,
                   src + (((size_t)b * S + start + i) * H) * E, (size_t)H * E * sizeof(float));
}

static xattn_buffer *upload(const float *a, size_t n)
{
    xattn_buffer *buf = NULL;
    if (n == 0)
        return NULL;
    if (xattn_buffer_alloc(g_ctx, n * sizeof(float), &buf) != XATTN_STATUS_OK ||
        xattn_buffer_write(buf, 0, a, n * sizeof(float)) != XATTN_STATUS_OK) {
        printf("rank %d: upload failed: %s\n", g_rank, xattn_last_error());
        exit(1);
    }
    return buf;
}

static int32_t g_cuq[9], g_cuk[9];

static void desc_common(const tcase *c, xattn_attn_desc *d)
{
    xattn_attn_desc_init(d);
    if (c->packed) {
        for (int b = 0; b < c->B; b++) {
            g_cuq[b + 1] = g_cuq[b] + c->lq[b];
            g_cuk[b + 1] = g_cuk[b] + c->lk[b];
        }
        d->cu_seqlens_q = g_cuq;
        d->cu_seqlens_k = g_cuk;
        d->num_seqs = c->B;
    }
    d->causal = c->causal;
    d->align = c->align;
    d->alibi_slopes = c->alibi ? g_slopes : NULL;
    d->window_left = c->wl;
    d->window_right = c->wr;
    if (!c->packed) {
        d->seqlens_q = c->lq;
        d->seqlens_k = c->lk;
    }
}

/* Failure injections for the error cases. */
enum {
    INJ_NONE,
    INJ_BAD_DTYPE,
    INJ_OOM,
    INJ_DISAGREE,
    INJ_OOM_MID,
    INJ_PAGED, /* a block table on one rank: refused, every rank returns the error */
    INJ_FP8,   /* an fp8 cache on one rank: likewise */
    INJ_Q8_0,  /* a q8_0 cache on one rank: likewise */
    INJ_ENV    /* set by the caller */
};

/* Runs one case with one layout; returns the status of the ring call. */
static int g_alltoall; /* run the all-to-all instead of the ring */

static xattn_status run_case(const tcase *c, xattn_mpi_layout layout, int inject, int who)
{
    int Bt = c->packed ? 1 : c->B; /* the tensors' batch extent */
    g_seed = 12345u + (uint32_t)c->sq * 31u + (uint32_t)c->sk;
    size_t nq = (size_t)Bt * c->sq * c->Hq * c->D, nk = (size_t)Bt * c->sk * c->Hkv * c->D;
    size_t nv = (size_t)Bt * c->sk * c->Hkv * c->Dv, no = (size_t)Bt * c->sq * c->Hq * c->Dv;
    size_t nl = (size_t)Bt * c->Hq * c->sq;
    float *q = rand_array(nq), *k = rand_array(nk), *v = rand_array(nv);
    float *oref = calloc(no, sizeof(float)), *lref = calloc(nl, sizeof(float));
    int Hb = c->bias == 2 ? 1 : c->Hq; /* the bias's heads */
    size_t nb_ = c->bias ? (size_t)Hb * c->sq * c->sk : 0;
    float *bias = c->bias ? rand_array(nb_) : NULL;
    for (size_t i = 0; i < nb_; i += 7)
        bias[i] = -INFINITY; /* masked pairs, and whole rows of a block now and then */

    /* the reference: the whole problem on one device */
    xattn_buffer *bq = upload(q, nq), *bk = upload(k, nk), *bv = upload(v, nv), *bo, *bl;
    xattn_buffer_alloc(g_ctx, no * sizeof(float), &bo);
    xattn_buffer_alloc(g_ctx, nl * sizeof(float), &bl);
    xattn_attn_desc d;
    desc_common(c, &d);
    d.q = xattn_tensor_bshd(bq, 0, XATTN_DTYPE_F32, Bt, c->sq, c->Hq, c->D);
    d.k = xattn_tensor_bshd(bk, 0, XATTN_DTYPE_F32, Bt, c->sk, c->Hkv, c->D);
    d.v = xattn_tensor_bshd(bv, 0, XATTN_DTYPE_F32, Bt, c->sk, c->Hkv, c->Dv);
    d.o = xattn_tensor_bshd(bo, 0, XATTN_DTYPE_F32, Bt, c->sq, c->Hq, c->Dv);
    d.lse = xattn_tensor_bshd(bl, 0, XATTN_DTYPE_F32, Bt, c->Hq, c->sq, 1);
    xattn_buffer *bsk = c->sinks ? upload(g_sinks, (size_t)c->Hq) : NULL;
    if (bsk)
        d.sinks = xattn_tensor_bshd(bsk, 0, XATTN_DTYPE_F32, 1, 1, c->Hq, 1);
    xattn_buffer *bb = c->bias ? upload(bias, nb_) : NULL;
    if (bb)
        d.bias = xattn_tensor_bshd(bb, 0, XATTN_DTYPE_F32, 1, Hb, c->sq, c->sk);
    xattn_status st = xattn_attention(g_ctx, &d, NULL);
    xattn_buffer_free(bb);
    if (st != XATTN_STATUS_OK) {
        printf("rank %d: reference failed: %s\n", g_rank, xattn_last_error());
        exit(1);
    }
    xattn_buffer_read(bo, 0, oref, no * sizeof(float));
    xattn_buffer_read(bl, 0, lref, nl * sizeof(float));
    xattn_buffer_free(bq);
    xattn_buffer_free(bk);
    xattn_buffer_free(bv);
    xattn_buffer_free(bo);
    xattn_buffer_free(bl);

    /* this rank's shards */
    xattn_mpi_segment qs[2], ks[2];
    int64_t sql = xattn_mpi_shard(layout, c->sq, g_n, g_rank, qs);
    int64_t skl = xattn_mpi_shard(layout, c->sk, g_n, g_rank, ks);
    float *lq_ = calloc((size_t)Bt * sql * c->Hq * c->D + 1, sizeof(float));
    float *lk_ = calloc((size_t)Bt * skl * c->Hkv * c->D + 1, sizeof(float));
    float *lv_ = calloc((size_t)Bt * skl * c->Hkv * c->Dv + 1, sizeof(float));
    for (int s = 0, at = 0; s < 2; at += (int)qs[s].length, s++)
        take_rows(q, lq_, Bt, c->sq, c->Hq, c->D, (int)sql, qs[s].start, qs[s].length, at);
    for (int s = 0, at = 0; s < 2; at += (int)ks[s].length, s++) {
        take_rows(k, lk_, Bt, c->sk, c->Hkv, c->D, (int)skl, ks[s].start, ks[s].length, at);
        take_rows(v, lv_, Bt, c->sk, c->Hkv, c->Dv, (int)skl, ks[s].start, ks[s].length, at);
    }
    size_t nlq = (size_t)Bt * sql * c->Hq, nlk = (size_t)Bt * skl * c->Hkv;
    xattn_buffer *sq_b = NULL, *so_b = NULL, *sl_b = NULL;
    if (sql > 0) {
        if (c->bhsd) { /* the shard stored as [B, H, S, D] */
            float *t = malloc(nlq * c->D * sizeof(float));
            for (int b = 0; b < Bt; b++)
                for (int64_t i = 0; i < sql; i++)
                    for (int h = 0; h < c->Hq; h++)
                        memcpy(t + (((size_t)b * c->Hq + h) * sql + i) * c->D,
                               lq_ + (((size_t)b * sql + i) * c->Hq + h) * c->D,
                               (size_t)c->D * sizeof(float));
            sq_b = upload(t, nlq * c->D);
            free(t);
        } else {
            sq_b = upload(lq_, nlq * c->D);
        }
        xattn_buffer_alloc(g_ctx, nlq * c->Dv * sizeof(float), &so_b);
        xattn_buffer_alloc(g_ctx, nlq * sizeof(float), &sl_b);
    }
    xattn_buffer *sk_b = upload(lk_, nlk * c->D), *sv_b = upload(lv_, nlk * c->Dv), *sb_b = NULL;
    if (c->bias && sql > 0) { /* this rank's query rows, every key */
        float *lb = malloc((size_t)Hb * sql * c->sk * sizeof(float));
        for (int h = 0; h < Hb; h++)
            for (int s_ = 0, at = 0; s_ < 2; at += (int)qs[s_].length, s_++)
                memcpy(lb + ((size_t)h * sql + at) * c->sk,
                       bias + ((size_t)h * c->sq + qs[s_].start) * c->sk,
                       (size_t)qs[s_].length * c->sk * sizeof(float));
        sb_b = upload(lb, (size_t)Hb * sql * c->sk);
        free(lb);
    }
    desc_common(c, &d);
    xattn_tensor (*view)(xattn_buffer *, size_t, xattn_dtype, int64_t, int64_t, int64_t, int64_t) =
        c->bhsd ? xattn_tensor_bhsd : xattn_tensor_bshd;
    d.q = view(sq_b, 0, XATTN_DTYPE_F32, Bt, sql, c->Hq, c->D);
    d.o = view(so_b, 0, XATTN_DTYPE_F32, Bt, sql, c->Hq, c->Dv);
    d.lse = xattn_tensor_bshd(sl_b, 0, XATTN_DTYPE_F32, Bt, c->Hq, sql, 1);
    if (bsk)
        d.sinks = xattn_tensor_bshd(bsk, 0, XATTN_DTYPE_F32, 1, 1, c->Hq, 1);
    d.k = xattn_tensor_bshd(sk_b, 0, XATTN_DTYPE_F32, Bt, skl, c->Hkv, c->D);
    d.v = xattn_tensor_bshd(sv_b, 0, XATTN_DTYPE_F32, Bt, skl, c->Hkv, c->Dv);
    if (c->bias) /* a rank without query rows gives the shape and no buffer */
        d.bias = xattn_tensor_bshd(sb_b, 0, XATTN_DTYPE_F32, 1, Hb, sql, c->sk);
    xattn_mpi_ring_opts o;
    xattn_mpi_ring_opts_init(&o);
    o.layout = layout;
    o.sq_global = c->sq;
    o.sk_global = c->sk;
    if (g_rank == who) {
        if (inject == INJ_BAD_DTYPE)
            d.o.dtype = XATTN_DTYPE_F16; /* q is f32: every backend rejects this */
        if (inject == INJ_DISAGREE)
            d.causal = !d.causal;
        if (inject == INJ_FP8)
            d.k.dtype = d.v.dtype = XATTN_DTYPE_FP8_E4M3;
        if (inject == INJ_Q8_0)
            d.k.dtype = d.v.dtype = XATTN_DTYPE_Q8_0;
        if (inject == INJ_PAGED) {
            static const int32_t table[64] = {0};
            d.block_table = table;
            d.max_pages_per_seq = 1;
        }
        if (inject == INJ_OOM_MID) {
            /* room for the ring's buffers (a K/V block, partial O and LSE of
             * one segment), four times over; NAIVE's scores need far more */
            int64_t seg = (sql + 1) / 2 + 1, kv = c->sk / g_n + 2;
            int64_t room =
                4 * 4 * (Bt * kv * c->Hkv * (c->D + c->Dv) + Bt * seg * c->Hq * (c->Dv + 1));
            xattn_mem_stats ms;
            xattn_ctx_mem_stats(g_ctx, &ms);
            d.algo = XATTN_ALGO_NAIVE;
            xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)ms.current_bytes + room);
        }
        if (inject == INJ_OOM) {
            xattn_mem_stats ms;
            xattn_ctx_mem_stats(g_ctx, &ms);
            xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)ms.current_bytes + 1);
        }
    }
    xattn_mpi_stats stats;
    st = g_alltoall ? xattn_mpi_alltoall_attention(MPI_COMM_WORLD, g_ctx, &d, &o, &stats)
                    : xattn_mpi_ring_attention(MPI_COMM_WORLD, g_ctx, &d, &o, &stats);
    xattn_ctx_set_option(g_ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    g_stats = stats;
    const char *lay =
        g_alltoall ? (layout == XATTN_MPI_ZIGZAG ? "all-to-all zigzag" : "all-to-all contiguous")
                   : (layout == XATTN_MPI_ZIGZAG ? "zigzag" : "contiguous");
    if (inject == INJ_NONE && g_alltoall && (c->Hq % g_n || c->Hkv % g_n)) {
        CHECK(st == XATTN_STATUS_UNSUPPORTED && strstr(xattn_mpi_last_error(), "multiples"),
              "%s/%s: heads not divisible by %d ranks: %s", c->name, lay, g_n,
              xattn_status_name(st));
    } else if (inject == INJ_NONE && !g_alltoall && c->alibi && c->bias) {
        CHECK(st == XATTN_STATUS_UNSUPPORTED && strstr(xattn_mpi_last_error(), "alibi_slopes"),
              "%s/%s: ALiBi with a bias in the ring: %s (%s)", c->name, lay, xattn_status_name(st),
              xattn_mpi_last_error());
    } else if (inject == INJ_NONE && g_alltoall) {
        CHECK(st == XATTN_STATUS_OK, "%s/%s: %s: %s", c->name, lay, xattn_status_name(st),
              xattn_mpi_last_error());
    } else if (inject == INJ_NONE) {
        CHECK(st == XATTN_STATUS_OK, "%s/%s: %s: %s", c->name, lay, xattn_status_name(st),
              xattn_mpi_last_error());
        CHECK(stats.steps == g_n, "%s/%s: %d steps, expected %d", c->name, lay, stats.steps, g_n);
    }
    if (st == XATTN_STATUS_OK && sql > 0) {
        float *o_ = malloc(nlq * c->Dv * sizeof(float)), *l_ = malloc(nlq * sizeof(float));
        xattn_tensor ot = d.o;
        /* read back in the layout it was written in */
        xattn_buffer_read(so_b, 0, o_, nlq * c->Dv * sizeof(float));
        xattn_buffer_read(sl_b, 0, l_, nlq * sizeof(float));
        int bad = 0;
        for (int s = 0, at = 0; s < 2; at += (int)qs[s].length, s++)
            for (int b = 0; b < Bt; b++)
                for (int64_t i = 0; i < qs[s].length; i++)
                    for (int h = 0; h < c->Hq && bad < 5; h++) {
                        int64_t gi = qs[s].start + i, li = at + i;
                        float lr = lref[((size_t)b * c->Hq + h) * c->sq + gi];
                        float lg = l_[((size_t)b * c->Hq + h) * sql + li];
                        /* an infinite LSE must match exactly (the tolerance
                         * below would be infinite too) */
                        int ok = isinf(lr) || isinf(lg)
                                     ? lr == lg
                                     : fabsf(lr - lg) <= 1e-4f * (1.0f + fabsf(lr));
                        if (!ok) {
                            CHECK(0, "%s/%s: lse b%d h%d row %lld: %g, reference %g", c->name, lay,
                                  b, h, (long long)gi, lg, lr);
                            bad++;
                        }
                        for (int e = 0; e < c->Dv; e++) {
                            float r = oref[(((size_t)b * c->sq + gi) * c->Hq + h) * c->Dv + e];
                            size_t off = (size_t)(b * ot.strides[0] + li * ot.strides[1] +
                                                  h * ot.strides[2] + e * ot.strides[3]);
                            float g = o_[off];
                            if (!(fabsf(r - g) <= 2e-5f + 1e-4f * fabsf(r))) {
                                CHECK(0, "%s/%s: o b%d h%d row %lld e%d: %g, reference %g", c->name,
                                      lay, b, h, (long long)gi, e, g, r);
                                bad++;
                                break;
                            }
                        }
                    }
        free(o_);
        free(l_);
    }
    xattn_buffer_free(sq_b);
    xattn_buffer_free(so_b);
    xattn_buffer_free(sl_b);
    xattn_buffer_free(sk_b);
    xattn_buffer_free(sv_b);
    xattn_buffer_free(sb_b);
    xattn_buffer_free(bsk);
    free(bias);
    free(q);
    free(k);
    free(v);
    free(oref);
    free(lref);
    free(lq_);
    free(lk_);
    free(lv_);
    return st;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* argument "opencl": every rank on the OpenCL device (blocks staged
     * through host memory into OpenCL buffers); skipped (77) without one */
    xattn_backend be =
        argc > 1 && !strcmp(argv[1], "opencl") ? XATTN_BACKEND_OPENCL : XATTN_BACKEND_CPU;
    if (xattn_ctx_create(be, 0, &g_ctx) != XATTN_STATUS_OK) {
        printf("rank %d: no %s context: %s\n", g_rank, xattn_backend_name(be), xattn_last_error());
        int rc = be == XATTN_BACKEND_CPU ? 1 : 77;
        MPI_Finalize();
        return rc;
    }
    if (be == XATTN_BACKEND_CPU)
        xattn_ctx_set_option(g_ctx, XATTN_OPT_NUM_THREADS, 1);

    static const int32_t lq2[2] = {20, 9}, lk2[2] = {25, 17};
    static const int32_t lq3[2] = {29, 12}, lk3[2] = {7, 29};
    static const int32_t pk_q[3] = {9, 0, 12}, pk_k[3] = {4, 7, 15}; /* 21 and 26 tokens */
    const tcase cases[] = {
        {"full GQA", 2, 4, 2, 16, 8, 37, 37, 0, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1, NULL, NULL, 0, 0,
         0, 0, 0},
        {"causal top-left", 2, 4, 2, 16, 16, 29, 29, 1, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL, NULL, 0,
         0, 0, 0, 0},
        {"causal bottom-right Sq<Sk", 1, 2, 1, 16, 16, 13, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1,
         NULL, NULL, 0, 0, 0, 0, 0},
        {"causal top-left Sq>Sk", 1, 2, 2, 8, 8, 29, 13, 1, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL,
         NULL, 0, 0, 0, 0, 0},
        {"causal bottom-right padded", 2, 4, 2, 16, 16, 23, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1,
         lq2, lk2, 0, 0, 0, 0, 0},
        {"causal top-left ragged (rows see nothing)", 2, 2, 1, 8, 8, 31, 29, 1,
         XATTN_ALIGN_TOP_LEFT, -1, -1, lq3, lk3, 0, 0, 0, 0, 0},
        {"window 5/3", 2, 4, 4, 16, 16, 41, 41, 0, XATTN_ALIGN_TOP_LEFT, 5, 3, NULL, NULL, 0, 0, 0,
         0, 0},
        {"causal window 4 bottom-right padded", 2, 4, 2, 16, 16, 23, 29, 1,
         XATTN_ALIGN_BOTTOM_RIGHT, 4, -1, lq2, lk2, 0, 0, 0, 0, 0},
        {"window 0/6 bottom-right", 1, 2, 1, 8, 8, 17, 33, 0, XATTN_ALIGN_BOTTOM_RIGHT, 0, 6, NULL,
         NULL, 0, 0, 0, 0, 0},
        {"causal BHSD shards", 2, 4, 2, 16, 16, 27, 27, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1, NULL,
         NULL, 1, 0, 0, 0, 0},
        {"sequence shorter than the ranks", 1, 2, 1, 8, 8, 3, 3, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1,
         -1, NULL, NULL, 0, 0, 0, 0, 0},
        {"one query row", 1, 2, 1, 8, 8, 1, 5, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1, NULL, NULL, 0,
         0, 0, 0, 0},
        {"causal window bias padded", 2, 4, 2, 16, 16, 23, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT, 6, -1,
         lq2, lk2, 0, 1, 0, 0, 0},
        {"packed causal bottom-right", 3, 4, 2, 8, 8, 21, 26, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1,
         pk_q, pk_k, 0, 0, 1, 0, 0},
        {"packed window top-left", 3, 2, 1, 8, 8, 21, 26, 0, XATTN_ALIGN_TOP_LEFT, 3, 2, pk_q, pk_k,
         0, 0, 1, 0, 0},
        {"bias shorter than the ranks", 1, 2, 2, 8, 8, 3, 5, 0, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL,
         NULL, 0, 1, 0, 0, 0},
        {"bias of one head causal", 2, 4, 2, 8, 8, 19, 27, 1, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL,
         NULL, 0, 2, 0, 0, 0},
        {"bias GQA bottom-right", 2, 4, 4, 8, 8, 19, 27, 0, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1, NULL,
         NULL, 0, 1, 0, 0, 0},
        /* ALiBi across blocks: blocks whose keys lie wholly before or after
         * their rows, and diagonal blocks with s != 0 (Sq != Sk, ragged) */
        {"alibi causal top-left", 2, 4, 2, 16, 16, 29, 29, 1, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL,
         NULL, 0, 0, 0, 1, 0},
        {"alibi causal bottom-right Sq<Sk", 1, 4, 2, 16, 16, 13, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT,
         -1, -1, NULL, NULL, 0, 0, 0, 1, 0},
        {"alibi causal top-left Sq>Sk", 1, 2, 2, 8, 8, 29, 13, 1, XATTN_ALIGN_TOP_LEFT, -1, -1,
         NULL, NULL, 0, 0, 0, 1, 0},
        {"alibi full bottom-right Sq>Sk", 2, 4, 4, 8, 8, 37, 23, 0, XATTN_ALIGN_BOTTOM_RIGHT, -1,
         -1, NULL, NULL, 0, 0, 0, 1, 0},
        {"alibi full top-left GQA", 1, 4, 1, 8, 8, 31, 31, 0, XATTN_ALIGN_TOP_LEFT, -1, -1, NULL,
         NULL, 0, 0, 0, 1, 0},
        {"alibi causal bottom-right padded", 2, 4, 2, 16, 16, 23, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT,
         -1, -1, lq2, lk2, 0, 0, 0, 1, 0},
        {"alibi window 5/3 top-left Sq<Sk", 1, 2, 2, 8, 8, 21, 33, 0, XATTN_ALIGN_TOP_LEFT, 5, 3,
         NULL, NULL, 0, 0, 0, 1, 0},
        {"alibi packed causal bottom-right", 3, 4, 2, 8, 8, 21, 26, 1, XATTN_ALIGN_BOTTOM_RIGHT, -1,
         -1, pk_q, pk_k, 0, 0, 1, 1, 0},
        {"alibi packed full top-left", 3, 2, 1, 8, 8, 21, 26, 0, XATTN_ALIGN_TOP_LEFT, -1, -1, pk_q,
         pk_k, 0, 0, 1, 1, 0},
        {"alibi and bias (all-to-all only)", 1, 4, 4, 8, 8, 17, 17, 1, XATTN_ALIGN_TOP_LEFT, -1, -1,
         NULL, NULL, 0, 1, 0, 1, 0},
        /* sinks join each row's denominator once, after the merge; rows that
         * see no key get LSE = sink, padding rows -inf */
        {"sinks causal bottom-right padded", 2, 4, 2, 16, 16, 23, 29, 1, XATTN_ALIGN_BOTTOM_RIGHT,
         -1, -1, lq2, lk2, 0, 0, 0, 0, 1},
        {"sinks causal top-left ragged (rows see nothing)", 2, 2, 1, 8, 8, 31, 29, 1,
         XATTN_ALIGN_TOP_LEFT, -1, -1, lq3, lk3, 0, 0, 0, 0, 1},
        {"sinks packed window alibi", 3, 4, 2, 8, 8, 21, 26, 0, XATTN_ALIGN_TOP_LEFT, 3, 2, pk_q,
         pk_k, 0, 0, 1, 1, 1},
    };
    int ncases = (int)(sizeof cases / sizeof cases[0]);
    for (g_alltoall = 0; g_alltoall < 2; g_alltoall++)
        for (int lay = 0; lay < 2; lay++)
            for (int i = 0; i < ncases; i++) {
                int before = g_fail;
                run_case(&cases[i], (xattn_mpi_layout)lay, INJ_NONE, -1);
                if (g_fail == before)
                    g_pass++;
            }
    /* the all-to-all's failures: one rank's bad descriptor */
    g_alltoall = 1;
    {
        const tcase h4 = {"all-to-all failure",
                          1,
                          12,
                          12,
                          8,
                          8,
                          13,
                          13,
                          1,
                          XATTN_ALIGN_BOTTOM_RIGHT,
                          -1,
                          -1,
                          NULL,
                          NULL,
                          0,
                          0,
                          0,
                          0,
                          0};
        xattn_status fs = run_case(&h4, XATTN_MPI_ZIGZAG, INJ_BAD_DTYPE, g_n - 1);
        CHECK(fs == XATTN_STATUS_INVALID_DTYPE, "all-to-all, bad dtype on rank %d: %s (%s)",
              g_n - 1, xattn_status_name(fs), xattn_mpi_last_error());
        fs = run_case(&h4, XATTN_MPI_ZIGZAG, INJ_NONE, -1);
    }
    g_alltoall = 0;

    /* failures on one rank: every rank returns an error, none hangs */
    const tcase *fc = &cases[1];
    int last = g_n - 1;
    xattn_status st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_BAD_DTYPE, last);
    CHECK(st == XATTN_STATUS_INVALID_DTYPE, "bad dtype on rank %d: %s (%s)", last,
          xattn_status_name(st), xattn_mpi_last_error());
    if (g_rank != last)
        CHECK(strstr(xattn_mpi_last_error(), "rank") != NULL, "message names no rank: %s",
              xattn_mpi_last_error());
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_PAGED, last);
    CHECK(st == XATTN_STATUS_UNSUPPORTED &&
              (g_rank != last || strstr(xattn_mpi_last_error(), "block_table")),
          "a paged cache on rank %d: %s (%s)", last, xattn_status_name(st), xattn_mpi_last_error());
    /* an 8-bit cache on one rank: alone, refused (UNSUPPORTED); beside
     * ranks with f32 caches, a disagreement on the problem, named on every
     * rank with both dtypes */
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_FP8, last);
    CHECK(g_n == 1 ? st == XATTN_STATUS_UNSUPPORTED && strstr(xattn_mpi_last_error(), "fp8")
                   : st == XATTN_STATUS_INVALID_ARGUMENT &&
                         strstr(xattn_mpi_last_error(), "k/v dtype") &&
                         strstr(xattn_mpi_last_error(), "fp8e4m3") &&
                         strstr(xattn_mpi_last_error(), "f32"),
          "an fp8 cache on rank %d: %s (%s)", last, xattn_status_name(st), xattn_mpi_last_error());
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_Q8_0, last);
    CHECK(g_n == 1 ? st == XATTN_STATUS_UNSUPPORTED && strstr(xattn_mpi_last_error(), "q8_0")
                   : st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_mpi_last_error(), "q8_0"),
          "a q8_0 cache on rank %d: %s (%s)", last, xattn_status_name(st), xattn_mpi_last_error());
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_OOM, 0);
    CHECK(st == XATTN_STATUS_OUT_OF_MEMORY, "allocation failure on rank 0: %s (%s)",
          xattn_status_name(st), xattn_mpi_last_error());
    if (g_n > 1) {
        st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_DISAGREE, last);
        CHECK(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_mpi_last_error(), "causal"),
              "ranks disagreeing on causal: %s (%s)", xattn_status_name(st),
              xattn_mpi_last_error());
    }
    /* a rank holding queries but no keys is checked like the others (Sq 8,
     * Sk 3, zigzag: with 4 ranks, rank 3 holds 2 query rows and no key) */
    const tcase qonly = {
        "queries only", 1,    2, 1, 8, 8, 8, 3, 0, XATTN_ALIGN_BOTTOM_RIGHT, -1, -1,
        NULL,           NULL, 0, 0, 0, 0, 0};
    for (int r = 0; r < g_n; r++) {
        xattn_mpi_segment a[2], b[2];
        if (xattn_mpi_shard(XATTN_MPI_ZIGZAG, qonly.sq, g_n, r, a) > 0 &&
            xattn_mpi_shard(XATTN_MPI_ZIGZAG, qonly.sk, g_n, r, b) == 0) {
            st = run_case(&qonly, XATTN_MPI_ZIGZAG, INJ_BAD_DTYPE, r);
            CHECK(st == XATTN_STATUS_INVALID_DTYPE, "bad dtype on rank %d (no keys): %s (%s)", r,
                  xattn_status_name(st), xattn_mpi_last_error());
            break;
        }
    }
    /* a device failure in the middle of the ring: rank `last` runs NAIVE,
     * whose score workspace exceeds its memory limit; the ring's own buffers
     * fit in it */
    const tcase big = {"mid-ring failure",
                       1,
                       4,
                       1,
                       4,
                       4,
                       1024,
                       1024,
                       0,
                       XATTN_ALIGN_BOTTOM_RIGHT,
                       -1,
                       -1,
                       NULL,
                       NULL,
                       0,
                       0,
                       0,
                       0,
                       0};
    st = run_case(&big, XATTN_MPI_ZIGZAG, INJ_OOM_MID, last);
    CHECK(st == XATTN_STATUS_OUT_OF_MEMORY, "allocation failure mid-ring on rank %d: %s (%s)", last,
          xattn_status_name(st), xattn_mpi_last_error());
    if (g_rank != last)
        CHECK(strstr(xattn_mpi_last_error(), "ring step") != NULL, "message names no step: %s",
              xattn_mpi_last_error());
    /* and the ring works after the failures */
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_NONE, -1);

    /* how the blocks travel (CUDA-aware MPI or host staging): on a CPU
     * context always through host memory, and the record says why */
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_NONE, -1);
    CHECK(st == XATTN_STATUS_OK && g_stats.staging_device == 0 &&
              !strcmp(g_stats.staging, "not a CUDA context"),
          "staging: %s: device %d (%s)", xattn_status_name(st), g_stats.staging_device,
          g_stats.staging);
    setenv("XATTN_MPI_STAGING", "host", 1);
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_NONE, -1);
    CHECK(st == XATTN_STATUS_OK && g_stats.staging_device == 0 &&
              !strcmp(g_stats.staging, "XATTN_MPI_STAGING=host"),
          "XATTN_MPI_STAGING=host: %s: device %d (%s)", xattn_status_name(st),
          g_stats.staging_device, g_stats.staging);
    /* the device path demanded where it cannot be had: every rank fails,
     * the rank that asked with the reason */
    if (g_rank == last)
        setenv("XATTN_MPI_STAGING", "device", 1);
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_ENV, -1);
    CHECK(st == XATTN_STATUS_UNSUPPORTED &&
              (g_rank != last ||
               strstr(xattn_mpi_last_error(), "XATTN_MPI_STAGING=device: not a CUDA context")),
          "XATTN_MPI_STAGING=device on rank %d: %s (%s)", last, xattn_status_name(st),
          xattn_mpi_last_error());
    setenv("XATTN_MPI_STAGING", "sometimes", 1);
    st = run_case(fc, XATTN_MPI_ZIGZAG, INJ_ENV, -1);
    CHECK(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_mpi_last_error(), "'sometimes'"),
          "XATTN_MPI_STAGING=sometimes: %s (%s)", xattn_status_name(st), xattn_mpi_last_error());
    unsetenv("XATTN_MPI_STAGING");

    /* a rank that never takes part: the others return a timeout error instead
     * of hanging. The absent rank joins the pending collective (the
     * communicator's duplication) only after every other rank has returned,
     * so the outcome does not depend on timing. */
    if (g_n > 1) {
        if (g_rank != last) {
            xattn_attn_desc dd;
            xattn_attn_desc_init(&dd);
            xattn_mpi_ring_opts to;
            xattn_mpi_ring_opts_init(&to);
            to.sq_global = to.sk_global = 8;
            to.timeout_ms = 200;
            st = xattn_mpi_ring_attention(MPI_COMM_WORLD, g_ctx, &dd, &to, NULL);
            CHECK(st == XATTN_STATUS_BACKEND && strstr(xattn_mpi_last_error(), "timeout_ms"),
                  "a rank absent: %s (%s)", xattn_status_name(st), xattn_mpi_last_error());
            int token = 1;
            MPI_Send(&token, 1, MPI_INT, last, 999, MPI_COMM_WORLD);
        } else {
            for (int r = 0; r < g_n - 1; r++) {
                int token;
                MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
            MPI_Comm late;
            MPI_Request req;
            MPI_Comm_idup(MPI_COMM_WORLD, &late, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            MPI_Comm_free(&late);
        }
    }

    /* arguments */
    xattn_mpi_segment seg[2];
    CHECK(xattn_mpi_shard(XATTN_MPI_ZIGZAG, 10, 0, 0, seg) == -1, "nranks 0 accepted");
    CHECK(xattn_mpi_shard(XATTN_MPI_ZIGZAG, 10, 2, 2, seg) == -1, "rank 2 of 2 accepted");
    /* chunks of 10 in 4: [0,2) [2,5) [5,7) [7,10); rank 0 holds the first and the last */
    CHECK(xattn_mpi_shard(XATTN_MPI_ZIGZAG, 10, 2, 0, seg) == 5 && seg[0].start == 0 &&
              seg[0].length == 2 && seg[1].start == 7 && seg[1].length == 3,
          "zigzag shard of 10 over 2 ranks: [%lld,+%lld) [%lld,+%lld)", (long long)seg[0].start,
          (long long)seg[0].length, (long long)seg[1].start, (long long)seg[1].length);

    int fails = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%d passed, %d failed, 0 skipped (%d ranks, %s; passed cases counted on rank 0, "
               "failed checks on every rank)\n",
               g_pass, fails, g_n, xattn_backend_name(be));
    xattn_ctx_destroy(g_ctx);
    MPI_Finalize();
    return fails ? 1 : 0;
}
