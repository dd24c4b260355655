/*
 * xattn_attention_multi (include/xattn_multi.h): one descriptor across the CPU
 * and an OpenCL device (a second CPU context where OpenCL is unavailable,
 * which still checks the split), compared with one device's result: padded
 * and packed batches, GQA, causal, windows, ALiBi, LSE, strided layouts,
 * uneven and zero weights, and the bad arguments.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_multi.h"

static int g_fail, g_pass;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

static uint32_t g_seed = 99;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static xattn_buffer *rand_buf(xattn_ctx *c, size_t n)
{
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = rnd();
    xattn_buffer *b = NULL;
    xattn_buffer_alloc(c, n * sizeof(float), &b);
    xattn_buffer_write(b, 0, a, n * sizeof(float));
    free(a);
    return b;
}

typedef struct mcase {
    const char *name;
    int B, Hq, Hkv, D, sq, sk;
    int causal, wl, wr, alibi, bhsd, packed;
    const int32_t *lq, *lk; /* padded lengths, or packed per-sequence lengths */
    int bias;               /* 1: [1, Hq, Sq, Sk] (broadcast over the batch), 2: [B, 1, Sq, Sk] */
    int split;              /* every device of weight > 0 must get query rows */
    int top_left;           /* causal/window alignment top-left (default: bottom-right) */
} mcase;

static xattn_multi_info g_last; /* the last run's record */

static void run(xattn_ctx **ctxs, int n, const double *w, const mcase *c)
{
    xattn_ctx *home = ctxs[0];
    int64_t B = c->packed ? 1 : c->B, tq = c->sq, tk = c->sk;
    int32_t cuq[9] = {0}, cuk[9] = {0};
    if (c->packed) {
        for (int b = 0; b < c->B; b++) {
            cuq[b + 1] = cuq[b] + c->lq[b];
            cuk[b + 1] = cuk[b] + c->lk[b];
        }
        tq = cuq[c->B];
        tk = cuk[c->B];
    }
    size_t nq = (size_t)(B * tq * c->Hq * c->D), nk = (size_t)(B * tk * c->Hkv * c->D);
    size_t nl = (size_t)(B * c->Hq * tq);
    xattn_buffer *q = rand_buf(home, nq), *k = rand_buf(home, nk), *v = rand_buf(home, nk);
    xattn_buffer *o1 = rand_buf(home, nq), *l1 = rand_buf(home, nl);
    xattn_buffer *o2 = rand_buf(home, nq), *l2 = rand_buf(home, nl);
    float slopes[16];
    for (int h = 0; h < 16; h++)
        slopes[h] = 0.05f * (float)(h + 1);
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    xattn_tensor (*view)(xattn_buffer *, size_t, xattn_dtype, int64_t, int64_t, int64_t, int64_t) =
        c->bhsd ? xattn_tensor_bhsd : xattn_tensor_bshd;
    d.q = view(q, 0, XATTN_DTYPE_F32, B, tq, c->Hq, c->D);
    d.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, B, tk, c->Hkv, c->D);
    d.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, B, tk, c->Hkv, c->D);
    d.o = view(o1, 0, XATTN_DTYPE_F32, B, tq, c->Hq, c->D);
    d.lse = xattn_tensor_bshd(l1, 0, XATTN_DTYPE_F32, B, c->Hq, tq, 1);
    d.causal = c->causal;
    if (c->top_left)
        d.align = XATTN_ALIGN_TOP_LEFT;
    d.window_left = c->wl;
    d.window_right = c->wr;
    if (c->alibi)
        d.alibi_slopes = slopes;
    if (c->packed) {
        d.cu_seqlens_q = cuq;
        d.cu_seqlens_k = cuk;
        d.num_seqs = c->B;
    } else {
        d.seqlens_q = c->lq;
        d.seqlens_k = c->lk;
    }
    xattn_buffer *bb = NULL;
    if (c->bias) {
        int64_t Bb = c->bias == 2 ? B : 1, Hb = c->bias == 1 ? c->Hq : 1;
        size_t n_ = (size_t)(Bb * Hb * tq * tk);
        float *t = malloc(n_ * sizeof(float));
        for (size_t i = 0; i < n_; i++)
            t[i] = i % 5 == 0 ? -INFINITY : rnd();
        xattn_buffer_alloc(home, n_ * sizeof(float), &bb);
        xattn_buffer_write(bb, 0, t, n_ * sizeof(float));
        free(t);
        d.bias = xattn_tensor_bshd(bb, 0, XATTN_DTYPE_F32, Bb, Hb, tq, tk);
    }
    xattn_status st = xattn_attention(home, &d, NULL);
    CHECK(st == XATTN_STATUS_OK, "%s: one device: %s", c->name, xattn_last_error());
    d.o.buffer = o2;
    d.lse.buffer = l2;
    xattn_multi_info info;
    st = xattn_attention_multi(ctxs, n, w, &d, &info);
    CHECK(st == XATTN_STATUS_OK, "%s: multi: %s", c->name, xattn_last_error());
    float *a = malloc(nq * 4), *b = malloc(nq * 4), *la = malloc(nl * 4), *lb = malloc(nl * 4);
    xattn_buffer_read(o1, 0, a, nq * 4);
    xattn_buffer_read(o2, 0, b, nq * 4);
    xattn_buffer_read(l1, 0, la, nl * 4);
    xattn_buffer_read(l2, 0, lb, nl * 4);
    int bad = 0;
    for (size_t i = 0; i < nq && bad < 3; i++)
        if (!(fabsf(a[i] - b[i]) <= 2e-5f + 1e-4f * fabsf(a[i]))) {
            CHECK(0, "%s (%d devices): o[%zu] %g, one device %g", c->name, n, i, b[i], a[i]);
            bad++;
        }
    for (size_t i = 0; i < nl && bad < 6; i++)
        if (!(la[i] == lb[i] || fabsf(la[i] - lb[i]) <= 1e-4f * (1 + fabsf(la[i])))) {
            CHECK(0, "%s (%d devices): lse[%zu] %g, one device %g", c->name, n, i, lb[i], la[i]);
            bad++;
        }
    /* the shares partition the (batch, KV head) pairs in order */
    int64_t u = 0;
    for (int i = 0; i < n && st == XATTN_STATUS_OK; i++) {
        CHECK(info.part[i].unit_begin == u && info.part[i].unit_end >= u,
              "%s: device %d units %lld..%lld", c->name, i, (long long)info.part[i].unit_begin,
              (long long)info.part[i].unit_end);
        u = info.part[i].unit_end;
        if (w && w[i] == 0)
            CHECK(info.part[i].unit_end == info.part[i].unit_begin && info.part[i].calls == 0,
                  "%s: device %d of weight 0 ran %d calls", c->name, i, info.part[i].calls);
    }
    /* units: (batch, KV head) pairs, each cut into R blocks of query rows */
    int64_t pairs = (int64_t)c->B * c->Hkv;
    CHECK(st != XATTN_STATUS_OK ||
              (u == info.units && info.units >= pairs && info.units % pairs == 0),
          "%s: units %lld of %lld (%lld pairs)", c->name, (long long)u, (long long)info.units,
          (long long)pairs);
    /* largest remainder: every share within one unit of its quota */
    double wsum = 0;
    for (int i = 0; i < n && w; i++)
        wsum += w[i];
    for (int i = 0; i < n && w && st == XATTN_STATUS_OK; i++) {
        double quota = (double)info.units * w[i] / wsum;
        double got = (double)(info.part[i].unit_end - info.part[i].unit_begin);
        CHECK(fabs(got - quota) < 1, "%s: device %d got %g units, quota %g", c->name, i, got,
              quota);
        if (c->split && w[i] > 0)
            CHECK(got > 0 && info.part[i].calls > 0, "%s: device %d of weight %g got no query rows",
                  c->name, i, w[i]);
    }
    if (!bad)
        g_pass++;
    g_last = info;
    free(a);
    free(b);
    free(la);
    free(lb);
    xattn_buffer *all[] = {q, k, v, o1, l1, o2, l2, bb};
    for (int i = 0; i < 8; i++)
        xattn_buffer_free(all[i]);
}

int main(void)
{
    xattn_ctx *cpu = NULL, *other = NULL, *cpu2 = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu) != XATTN_STATUS_OK ||
        xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu2) != XATTN_STATUS_OK) {
        printf("no CPU context: %s\n", xattn_last_error());
        return 1;
    }
    int have_cl = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &other) == XATTN_STATUS_OK;
    if (!have_cl) {
        printf("OpenCL unavailable (%s): a second CPU context stands in\n", xattn_last_error());
        other = cpu2;
    }
    static const int32_t lq[3] = {17, 5, 0}, lk[3] = {21, 9, 30};
    static const int32_t pq[4] = {7, 0, 5, 3}, pk[4] = {9, 4, 0, 6};
    static const int32_t lq4[3] = {12, 3, 8}, lk4[3] = {15, 0, 9};
    static const int32_t lq1[1] = {23}, lk1[1] = {31}, pq1[1] = {37}, pk1[1] = {45};
    const mcase cases[] = {
        {"padded GQA causal", 3, 8, 4, 16, 17, 30, 1, -1, -1, 0, 0, 0, lq, lk, 0, 0, 0},
        {"full MQA", 2, 4, 1, 8, 9, 13, 0, -1, -1, 0, 0, 0, NULL, NULL, 0, 0, 0},
        {"window ALiBi BHSD", 2, 6, 3, 16, 19, 19, 0, 4, 2, 1, 1, 0, NULL, NULL, 0, 0, 0},
        {"packed causal (empty sequences)", 4, 4, 2, 8, 0, 0, 1, -1, -1, 0, 0, 1, pq, pk, 0, 0, 0},
        {"bias per head, causal GQA", 3, 6, 3, 8, 11, 14, 1, -1, -1, 0, 0, 0, NULL, NULL, 1, 0, 0},
        {"bias per batch entry, padded", 3, 4, 2, 8, 12, 15, 0, 5, -1, 0, 0, 0, lq4, lk4, 2, 0, 0},
        /* one (batch, KV head) pair: cut along query rows, every device gets some */
        {"one MQA sequence, causal", 1, 4, 1, 16, 40, 52, 1, -1, -1, 0, 0, 0, NULL, NULL, 0, 1, 0},
        {"one MQA sequence, causal top-left", 1, 4, 1, 8, 40, 52, 1, -1, -1, 0, 0, 0, NULL, NULL, 0,
         1, 1},
        {"one MQA sequence, causal, more queries than keys", 1, 2, 1, 8, 50, 20, 1, -1, -1, 0, 0, 0,
         NULL, NULL, 0, 1, 0},
        {"one MQA sequence, full, BHSD", 1, 2, 1, 8, 33, 17, 0, -1, -1, 0, 1, 0, NULL, NULL, 0, 1,
         0},
        {"one padded sequence, causal, left window, bias per head", 1, 2, 1, 8, 30, 40, 1, 6, -1, 0,
         0, 0, lq1, lk1, 1, 1, 0},
        {"one packed sequence, causal", 1, 4, 1, 8, 0, 0, 1, -1, -1, 0, 0, 1, pq1, pk1, 0, 1, 0},
        {"two GQA pairs, causal", 1, 4, 2, 8, 21, 21, 1, -1, -1, 0, 0, 0, NULL, NULL, 0, 1, 0},
    };
    xattn_ctx *two[2] = {cpu, other}, *three[3] = {cpu, other, cpu2};
    static const double even[2] = {1, 1}, uneven[2] = {1, 3}, none0[2] = {0, 1}, none1[2] = {1, 0};
    static const double w3[3] = {2, 1, 1};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(two, 2, even, &cases[i]);
        run(two, 2, uneven, &cases[i]);
        run(two, 2, none0, &cases[i]);
        run(two, 2, none1, &cases[i]);
        run(two, 2, NULL, &cases[i]);
        run(three, have_cl ? 3 : 2, have_cl ? w3 : even, &cases[i]);
    }

    /* Shares round to the nearest (largest remainder): weights {100, 1} over
     * one unit (ALiBi without a causal mask: its rows are not cut) give it to
     * device 0. */
    {
        static const mcase one = {
            "one pair, ALiBi", 1, 2, 1, 8, 9, 11, 0, -1, -1, 1, 0, 0, NULL, NULL, 0, 0, 0};
        static const double w100[2] = {100, 1}, w1_100[2] = {1, 100};
        run(two, 2, w100, &one);
        CHECK(g_last.units == 1 && g_last.part[0].unit_end == 1 && g_last.part[1].calls == 0,
              "weights {100, 1}, one unit: device 0 has units %lld..%lld of %lld",
              (long long)g_last.part[0].unit_begin, (long long)g_last.part[0].unit_end,
              (long long)g_last.units);
        run(two, 2, w1_100, &one);
        CHECK(g_last.part[0].unit_end == 0 && g_last.part[1].unit_end == 1,
              "weights {1, 100}, one unit: device 1 has units %lld..%lld",
              (long long)g_last.part[1].unit_begin, (long long)g_last.part[1].unit_end);
        static const mcase five = {"five pairs", 5, 2, 1, 8,    4,    6, 0, -1,
                                   -1,           1, 0, 0, NULL, NULL, 0, 0, 0};
        static const double w3x[3] = {1, 1, 1};
        xattn_ctx *tri[3] = {cpu, other, cpu2};
        run(tri, have_cl ? 3 : 2, w3x, &five); /* 5/3 or 5/2 each: 2, 2, 1 or 3, 2 */
        CHECK(g_last.part[0].unit_end - g_last.part[0].unit_begin == (have_cl ? 2 : 3),
              "five units over equal weights: device 0 got %lld",
              (long long)(g_last.part[0].unit_end - g_last.part[0].unit_begin));
    }

    /* A failed call leaves O and LSE as they were: the second device runs
     * out of memory (a 4 KiB limit) after ctxs[0] has computed its share. */
    {
        xattn_ctx *lim = NULL;
        CHECK(xattn_ctx_create(XATTN_BACKEND_CPU, 0, &lim) == XATTN_STATUS_OK, "context: %s",
              xattn_last_error());
        CHECK(xattn_ctx_set_option(lim, XATTN_OPT_MEMORY_LIMIT, 4096) == XATTN_STATUS_OK,
              "memory limit: %s", xattn_last_error());
        const int64_t B = 3, S = 40, H = 4, D = 16;
        size_t n = (size_t)(B * S * H * D), nl = (size_t)(B * H * S);
        xattn_buffer *q = rand_buf(cpu, n), *k = rand_buf(cpu, n), *v = rand_buf(cpu, n);
        xattn_buffer *o = rand_buf(cpu, n), *l = rand_buf(cpu, nl);
        float *before = malloc((n + nl) * 4), *after = malloc((n + nl) * 4);
        xattn_buffer_read(o, 0, before, n * 4);
        xattn_buffer_read(l, 0, before + n, nl * 4);
        xattn_attn_desc fd;
        xattn_attn_desc_init(&fd);
        fd.q = xattn_tensor_bshd(q, 0, XATTN_DTYPE_F32, B, S, H, D);
        fd.k = xattn_tensor_bshd(k, 0, XATTN_DTYPE_F32, B, S, H, D);
        fd.v = xattn_tensor_bshd(v, 0, XATTN_DTYPE_F32, B, S, H, D);
        fd.o = xattn_tensor_bshd(o, 0, XATTN_DTYPE_F32, B, S, H, D);
        fd.lse = xattn_tensor_bshd(l, 0, XATTN_DTYPE_F32, B, H, S, 1);
        fd.causal = 1;
        xattn_ctx *pair[2] = {cpu, lim};
        static const double ws[3][2] = {{1, 1}, {3, 1}, {1, 100}};
        for (int t = 0; t < 3; t++) {
            xattn_multi_info mi;
            xattn_status st = xattn_attention_multi(pair, 2, ws[t], &fd, &mi);
            char msg[600];
            snprintf(msg, sizeof msg, "%s", xattn_last_error());
            xattn_buffer_read(o, 0, after, n * 4);
            xattn_buffer_read(l, 0, after + n, nl * 4);
            size_t changed = 0;
            for (size_t i = 0; i < n + nl; i++)
                changed += memcmp(&before[i], &after[i], 4) != 0;
            CHECK(st == XATTN_STATUS_OUT_OF_MEMORY && strstr(msg, "device 1") &&
                      strstr(msg, "unchanged"),
                  "weights {%g, %g}: a device out of memory: %s (%s)", ws[t][0], ws[t][1],
                  xattn_status_name(st), msg);
            CHECK(changed == 0, "weights {%g, %g}: a failed call changed %zu of %zu O/LSE elements",
                  ws[t][0], ws[t][1], changed, n + nl);
            if (changed == 0 && st == XATTN_STATUS_OUT_OF_MEMORY)
                g_pass++;
        }
        free(before);
        free(after);
        xattn_buffer *all[] = {q, k, v, o, l};
        for (int i = 0; i < 5; i++)
            xattn_buffer_free(all[i]);
        xattn_ctx_destroy(lim);
    }

    /* A 0.1 descriptor (an older caller, or an FFI through the plain
     * xattn_attn_desc_init symbol), on the heap at exactly its size: read
     * only up to its struct_size (valgrind or ASan see a read past it). */
    {
        const size_t v1 = offsetof(xattn_attn_desc, num_splits) + sizeof(int);
        unsigned char *od = malloc(v1);
        xattn_buffer *ob = rand_buf(cpu, 4 * 2 * 4 * 8 * 4);
        if (od) {
            xattn_attn_desc full;
            xattn_attn_desc_init(&full);
            full.q = xattn_tensor_bshd(ob, 0, XATTN_DTYPE_F32, 2, 4, 2, 8);
            full.k = xattn_tensor_bshd(ob, 512, XATTN_DTYPE_F32, 2, 4, 2, 8);
            full.v = xattn_tensor_bshd(ob, 1024, XATTN_DTYPE_F32, 2, 4, 2, 8);
            full.o = xattn_tensor_bshd(ob, 1536, XATTN_DTYPE_F32, 2, 4, 2, 8);
            full.causal = 1;
            full.struct_size = v1;
            memcpy(od, &full, v1);
            xattn_status st =
                xattn_attention_multi(two, 2, even, (const xattn_attn_desc *)(void *)od, NULL);
            CHECK(st == XATTN_STATUS_OK, "0.1 descriptor: %s (%s)", xattn_status_name(st),
                  xattn_last_error());
            if (st == XATTN_STATUS_OK)
                g_pass++;
        }
        free(od);
        xattn_buffer_free(ob);
    }

    /* bad arguments */
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    xattn_buffer *b = rand_buf(cpu, 4096);
    d.q = xattn_tensor_bshd(b, 0, XATTN_DTYPE_F32, 1, 4, 2, 8);
    d.k = xattn_tensor_bshd(b, 256, XATTN_DTYPE_F32, 1, 4, 2, 8);
    d.v = xattn_tensor_bshd(b, 512, XATTN_DTYPE_F32, 1, 4, 2, 8);
    d.o = xattn_tensor_bshd(b, 1024, XATTN_DTYPE_F32, 1, 4, 2, 8);
    xattn_ctx *dup[2] = {cpu, cpu}, *nul[2] = {cpu, NULL};
    static const double neg[2] = {1, -1}, zero[2] = {0, 0}, nan_w[2] = {1, NAN};
    CHECK(xattn_attention_multi(NULL, 1, NULL, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
          "NULL ctxs");
    CHECK(xattn_attention_multi(two, 0, NULL, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT &&
              strstr(xattn_last_error(), "num_ctxs"),
          "0 contexts: %s", xattn_last_error());
    CHECK(xattn_attention_multi(two, 17, NULL, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
          "17 contexts");
    CHECK(xattn_attention_multi(dup, 2, NULL, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT &&
              strstr(xattn_last_error(), "ctxs[1]"),
          "a context twice: %s", xattn_last_error());
    CHECK(xattn_attention_multi(nul, 2, NULL, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
          "a NULL context");
    CHECK(xattn_attention_multi(two, 2, neg, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT &&
              strstr(xattn_last_error(), "weights[1]"),
          "negative weight: %s", xattn_last_error());
    CHECK(xattn_attention_multi(two, 2, nan_w, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
          "NaN weight");
    CHECK(xattn_attention_multi(two, 2, zero, &d, NULL) == XATTN_STATUS_INVALID_ARGUMENT,
          "all weights 0");
    {
        int32_t cu[2] = {0, 4};
        xattn_attn_desc pd = d;
        pd.cu_seqlens_q = pd.cu_seqlens_k = cu;
        pd.num_seqs = 1;
        pd.bias = xattn_tensor_bshd(b, 2048, XATTN_DTYPE_F32, 1, 1, 4, 4);
        CHECK(xattn_attention_multi(two, 2, NULL, &pd, NULL) == XATTN_STATUS_UNSUPPORTED &&
                  strstr(xattn_last_error(), "bias"),
              "bias with a packed batch across devices: %s", xattn_last_error());
    }
    {
        xattn_attn_desc sd = d; /* sinks [1, 1, 2, 1]: not split across devices yet */
        sd.sinks = xattn_tensor_bshd(b, 3072, XATTN_DTYPE_F32, 1, 1, 2, 1);
        CHECK(xattn_attention_multi(two, 2, NULL, &sd, NULL) == XATTN_STATUS_UNSUPPORTED &&
                  strstr(xattn_last_error(), "sinks"),
              "sinks across devices: %s", xattn_last_error());
    }
    {
        /* An append into the cache [1, 4, 2, 8] holding 3 tokens: one device's memory. */
        static int32_t held[1] = {3};
        xattn_attn_desc ad = d;
        ad.seqlens_k = held;
        ad.k_new = xattn_tensor_bshd(b, 1536, XATTN_DTYPE_F32, 1, 1, 2, 8);
        ad.v_new = xattn_tensor_bshd(b, 1600, XATTN_DTYPE_F32, 1, 1, 2, 8);
        CHECK(xattn_attention_multi(two, 2, NULL, &ad, NULL) == XATTN_STATUS_UNSUPPORTED &&
                  strstr(xattn_last_error(), "k_new"),
              "append across devices: %s", xattn_last_error());
    }
    {
        xattn_attn_desc fd = d; /* an fp8 cache: its scales are per KV head, not cut yet */
        fd.k.dtype = fd.v.dtype = XATTN_DTYPE_FP8_E5M2;
        CHECK(xattn_attention_multi(two, 2, NULL, &fd, NULL) == XATTN_STATUS_UNSUPPORTED &&
                  strstr(xattn_last_error(), "fp8"),
              "fp8 across devices: %s", xattn_last_error());
    }
    {
        xattn_attn_desc qd = d; /* a q8_0 cache (head dim 32, blocks of 34 bytes): not cut */
        qd.q = xattn_tensor_bshd(b, 0, XATTN_DTYPE_F32, 1, 4, 2, 32);
        qd.k = xattn_tensor_bshd(b, 34 * 40, XATTN_DTYPE_Q8_0, 1, 4, 2, 32);
        qd.v = xattn_tensor_bshd(b, 34 * 60, XATTN_DTYPE_Q8_0, 1, 4, 2, 32);
        qd.o = xattn_tensor_bshd(b, 4096, XATTN_DTYPE_F32, 1, 4, 2, 32);
        CHECK(xattn_attention_multi(two, 2, NULL, &qd, NULL) == XATTN_STATUS_UNSUPPORTED &&
                  strstr(xattn_last_error(), "q8_0"),
              "q8_0 across devices: %s", xattn_last_error());
    }
    d.o.shape[3] = 7; /* the library's own check names the field */
    CHECK(xattn_attention_multi(two, 2, NULL, &d, NULL) == XATTN_STATUS_INVALID_SHAPE &&
              strstr(xattn_last_error(), "o."),
          "bad o: %s", xattn_last_error());
    xattn_buffer_free(b);

    printf("%d passed, %d failed, 0 skipped (%s)\n", g_pass, g_fail,
           have_cl ? "CPU + OpenCL" : "CPU + CPU");
    if (have_cl)
        xattn_ctx_destroy(other);
    xattn_ctx_destroy(cpu2);
    xattn_ctx_destroy(cpu);
    return g_fail ? 1 : 0;
}
