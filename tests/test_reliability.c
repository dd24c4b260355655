/*
 * test_reliability: what the library promises when things go wrong or get
 * extreme (docs/guarantees.md names the test of each promise).
 *
 *  - resource exhaustion: NAIVE at a shape whose score matrix cannot be
 *    allocated (OUT_OF_MEMORY / SIZE_OVERFLOW with a message that suggests
 *    FLASH); XATTN_OPT_MEMORY_LIMIT for buffers and for each algorithm's
 *    workspace, to the byte; the allocator's counters back where they were
 *    after every failure; the context usable afterwards;
 *  - size overflows in every product of dimensions, strides and offsets:
 *    a status, never a crash;
 *  - numerical robustness against the double reference, with the harness's
 *    metric (tests/README.md): scores near f32 overflow, -inf in the bias
 *    (whole rows included), NaN and inf in the inputs, Sk = 131072 with FLASH
 *    and SPLITKV in f32;
 *  - determinism: the same inputs give bit-identical outputs, per algorithm
 *    and thread count;
 *  - the library's sources call no abort, exit or assert (scanned here);
 *  - serving inputs that lie (xattn_test_serving.h): a block table inside the
 *    K cache an append writes, a memory-limit sweep over calls with appends
 *    (a refused call writes nothing), an append over another sequence's key,
 *    and the append check's memory counted against the limit.
 *
 * Every check prints FAIL with the reason; the last line is
 * "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE /* mmap's MAP_ANONYMOUS, MAP_NORESERVE */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "xattn.h"
#include "xattn_reference.h"
#include "xattn_test.h"
#include "xattn_test_elem.h"
#include "xattn_test_serving.h"

#define F32 XATTN_DTYPE_F32
#define F16 XATTN_DTYPE_F16
#define BF16 XATTN_DTYPE_BF16

/* ---- random data ------------------------------------------------------------ */

static uint64_t g_seed = 0x5eed0e1ab111ull;

/* x rounded to dtype t (through f32 for f16 / bf16). */
static double round_to(double x, xattn_dtype t)
{
    if (t == F32)
        return (double)(float)x;
    return t == F16 ? xattn_f16_to_f32(xattn_f32_to_f16((float)x))
                    : xattn_bf16_to_f32(xattn_f32_to_bf16((float)x));
}

/* ---- a problem instance: contiguous BSHD tensors, optional bias [1,1,Sq,Sk] -- */

typedef struct prob {
    xattn_ctx *ctx;
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    xattn_dtype dq, dkv;
    int lse, bias;
    float *hq, *hk, *hv, *hb; /* host values, logical BSHD / [Sq, Sk] */
    xattn_buffer *q, *k, *v, *o, *l, *b;
    xattn_attn_desc d;
} prob;

static size_t n_q(const prob *p)
{
    return (size_t)(p->B * p->Sq * p->Hq * p->D);
}
static size_t n_k(const prob *p)
{
    return (size_t)(p->B * p->Sk * p->Hkv * p->D);
}
static size_t n_v(const prob *p)
{
    return (size_t)(p->B * p->Sk * p->Hkv * p->Dv);
}
static size_t n_o(const prob *p)
{
    return (size_t)(p->B * p->Sq * p->Hq * p->Dv);
}
static size_t n_l(const prob *p)
{
    return (size_t)(p->B * p->Hq * p->Sq);
}

static void prob_free(prob *p)
{
    xattn_buffer *bs[6] = {p->q, p->k, p->v, p->o, p->l, p->b};
    for (int i = 0; i < 6; i++)
        xattn_buffer_free(bs[i]);
    free(p->hq);
    free(p->hk);
    free(p->hv);
    free(p->hb);
    memset(p, 0, sizeof *p);
}

/* Host arrays filled with random values (the caller may then change them). */
static int prob_init(prob *p, xattn_ctx *ctx, int64_t B, int64_t Sq, int64_t Sk, int64_t Hq,
                     int64_t Hkv, int64_t D, int64_t Dv, xattn_dtype dq, xattn_dtype dkv, int lse,
                     int bias)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv;
    p->dq = dq, p->dkv = dkv, p->lse = lse, p->bias = bias;
    p->hq = malloc((n_q(p) + 1) * sizeof(float));
    p->hk = malloc((n_k(p) + 1) * sizeof(float));
    p->hv = malloc((n_v(p) + 1) * sizeof(float));
    p->hb = bias ? malloc((size_t)(Sq * Sk + 1) * sizeof(float)) : NULL;
    if (!p->hq || !p->hk || !p->hv || (bias && !p->hb))
        return 0;
    uint64_t s = g_seed++;
    for (size_t i = 0; i < n_q(p); i++)
        p->hq[i] = xattn_test_rng_val(&s);
    for (size_t i = 0; i < n_k(p); i++)
        p->hk[i] = xattn_test_rng_val(&s);
    for (size_t i = 0; i < n_v(p); i++)
        p->hv[i] = xattn_test_rng_val(&s);
    for (int64_t i = 0; bias && i < Sq * Sk; i++)
        p->hb[i] = 0.5f * xattn_test_rng_val(&s);
    return 1;
}

static xattn_status upload(xattn_ctx *ctx, const float *src, size_t n, xattn_dtype dt,
                           xattn_buffer **out)
{
    size_t bytes = (n ? n : 1) * esz(dt);
    unsigned char *tmp = malloc(bytes);
    if (!tmp)
        return XATTN_STATUS_OUT_OF_MEMORY;
    memset(tmp, 0, bytes);
    for (size_t i = 0; i < n; i++)
        put_elem(tmp, dt, i, src[i]);
    xattn_status st = xattn_buffer_alloc(ctx, bytes, out);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(*out, 0, tmp, bytes);
    free(tmp);
    return st;
}

/* Buffers and the descriptor, from the host arrays. */
static xattn_status prob_upload(prob *p)
{
    xattn_status st = upload(p->ctx, p->hq, n_q(p), p->dq, &p->q);
    if (st == XATTN_STATUS_OK)
        st = upload(p->ctx, p->hk, n_k(p), p->dkv, &p->k);
    if (st == XATTN_STATUS_OK)
        st = upload(p->ctx, p->hv, n_v(p), p->dkv, &p->v);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(p->ctx, (n_o(p) ? n_o(p) : 1) * esz(p->dq), &p->o);
    if (st == XATTN_STATUS_OK && p->lse)
        st = xattn_buffer_alloc(p->ctx, (n_l(p) ? n_l(p) : 1) * 4, &p->l);
    if (st == XATTN_STATUS_OK && p->bias)
        st = upload(p->ctx, p->hb, (size_t)(p->Sq * p->Sk), F32, &p->b);
    if (st != XATTN_STATUS_OK)
        return st;
    xattn_attn_desc *d = &p->d;
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(p->q, 0, p->dq, p->B, p->Sq, p->Hq, p->D);
    d->k = xattn_tensor_bshd(p->k, 0, p->dkv, p->B, p->Sk, p->Hkv, p->D);
    d->v = xattn_tensor_bshd(p->v, 0, p->dkv, p->B, p->Sk, p->Hkv, p->Dv);
    d->o = xattn_tensor_bshd(p->o, 0, p->dq, p->B, p->Sq, p->Hq, p->Dv);
    if (p->lse) {
        xattn_tensor l = {p->l, 0, F32, {p->B, p->Hq, p->Sq, 1}, {p->Hq * p->Sq, p->Sq, 1, 1}};
        d->lse = l;
    }
    if (p->bias) {
        xattn_tensor b = {p->b, 0, F32, {1, 1, p->Sq, p->Sk}, {0, 0, p->Sk, 1}};
        d->bias = b;
    }
    return XATTN_STATUS_OK;
}

/* Poisons O and LSE (NaN bytes), runs `algo`, reads O and LSE back. */
static xattn_status prob_run(prob *p, xattn_algo algo, int splits, unsigned char **o_out,
                             float **l_out, xattn_run_info *info)
{
    size_t ob = (n_o(p) ? n_o(p) : 1) * esz(p->dq), lb = (n_l(p) ? n_l(p) : 1) * 4;
    unsigned char *o = malloc(ob);
    float *l = malloc(lb);
    memset(o, 0xff, ob);
    memset(l, 0xff, lb);
    xattn_status st = xattn_buffer_write(p->o, 0, o, ob);
    if (st == XATTN_STATUS_OK && p->lse)
        st = xattn_buffer_write(p->l, 0, l, lb);
    p->d.algo = algo;
    p->d.num_splits = splits;
    if (st == XATTN_STATUS_OK)
        st = xattn_attention(p->ctx, &p->d, info);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(p->o, 0, o, ob);
    if (st == XATTN_STATUS_OK && p->lse)
        st = xattn_buffer_read(p->l, 0, l, lb);
    *o_out = o;
    *l_out = l;
    return st;
}

/*
 * The harness's acceptance (tests/README.md): relative L2 error <= 3 r + 1e-5
 * and max abs error <= 3 mr + 1e-4, where r and mr are the errors of the
 * reference rounded to the output dtype; NaN exactly where the reference has
 * NaN, exact 0 where it has 0; LSE within 1e-5 * max(1, |ref|), inf and NaN
 * exactly. Returns 1 when the output passes; `why` says what failed.
 */
typedef struct metric {
    double rel_l2, max_abs, lse_err;
    int64_t nan_rows;
    char why[256];
} metric;

static int compare_ref(const prob *p, const unsigned char *o, const float *l, const double *o_ref,
                       const double *l_ref, metric *m)
{
    memset(m, 0, sizeof *m);
    double err2 = 0, ref2 = 0, rnd2 = 0, mrnd = 0;
    int ok = 1;
    for (size_t i = 0; i < n_o(p); i++) {
        double ref = o_ref[i], out = get_elem(o, p->dq, i);
        if (isnan(ref) || isnan(out)) {
            if (!(isnan(ref) && isnan(out)) && ok) {
                snprintf(m->why, sizeof m->why, "O[%zu] = %g, reference %g (NaN mismatch)", i, out,
                         ref);
                ok = 0;
            }
            m->nan_rows += isnan(ref) && i % (size_t)p->Dv == 0;
            continue;
        }
        if (isinf(ref) || isinf(out)) {
            if (ref != out && ok) {
                snprintf(m->why, sizeof m->why, "O[%zu] = %g, reference %g", i, out, ref);
                ok = 0;
            }
            continue;
        }
        if (ref == 0.0 && out != 0.0 && ok) {
            snprintf(m->why, sizeof m->why, "O[%zu] = %g, expected exactly 0", i, out);
            ok = 0;
        }
        double e = out - ref, r = round_to(ref, p->dq) - ref;
        err2 += e * e;
        ref2 += ref * ref;
        rnd2 += r * r;
        if (fabs(e) > m->max_abs)
            m->max_abs = fabs(e);
        if (fabs(r) > mrnd)
            mrnd = fabs(r);
    }
    m->rel_l2 = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    double rrel = ref2 > 0 ? sqrt(rnd2 / ref2) : 0;
    if (ok && !(m->rel_l2 <= 3 * rrel + 1e-5)) {
        snprintf(m->why, sizeof m->why, "O relative L2 error %.3e > %.3e", m->rel_l2,
                 3 * rrel + 1e-5);
        ok = 0;
    }
    if (ok && !(m->max_abs <= 3 * mrnd + 1e-4)) {
        snprintf(m->why, sizeof m->why, "O max abs error %.3e > %.3e", m->max_abs, 3 * mrnd + 1e-4);
        ok = 0;
    }
    for (size_t i = 0; p->lse && i < n_l(p); i++) {
        double ref = l_ref[i], out = l[i];
        int good;
        if (isnan(ref) || isnan(out))
            good = isnan(ref) && isnan(out);
        else if (isinf(ref) || isinf(out))
            good = ref == out;
        else {
            double e = fabs(out - ref) / fmax(1.0, fabs(ref));
            if (e > m->lse_err)
                m->lse_err = e;
            good = e <= 1e-5;
        }
        if (!good && ok) {
            snprintf(m->why, sizeof m->why, "LSE[%zu] = %.9g, reference %.9g", i, out, ref);
            ok = 0;
        }
    }
    return ok;
}

/* Runs `algo` and compares with the reference; returns 1 on a pass. */
static int check_algo(prob *p, xattn_algo algo, int splits, const char *what, metric *m_out)
{
    double *o_ref = malloc((n_o(p) + 1) * sizeof(double));
    double *l_ref = malloc((n_l(p) + 1) * sizeof(double));
    unsigned char *o = NULL;
    float *l = NULL;
    metric m;
    memset(&m, 0, sizeof m);
    xattn_status st = xattn_reference_attention(p->ctx, &p->d, o_ref, p->lse ? l_ref : NULL);
    int ok = st == XATTN_STATUS_OK;
    EXPECT(ok, "[%s] reference: %s: %s", what, xattn_status_name(st), xattn_last_error());
    if (ok) {
        st = prob_run(p, algo, splits, &o, &l, NULL);
        ok = st == XATTN_STATUS_OK;
        EXPECT(ok, "[%s] %s: %s: %s", what, xattn_algo_name(algo), xattn_status_name(st),
               xattn_last_error());
    }
    if (ok) {
        ok = compare_ref(p, o, l, o_ref, l_ref, &m);
        EXPECT(ok, "[%s] %s: %s (rel L2 %.2e, max abs %.2e, LSE %.2e)", what, xattn_algo_name(algo),
               m.why, m.rel_l2, m.max_abs, m.lse_err);
    }
    if (m_out)
        *m_out = m;
    free(o_ref);
    free(l_ref);
    free(o);
    free(l);
    return ok;
}

static const xattn_algo g_algos[4] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV,
                                      XATTN_ALGO_AUTO};

/* A small valid FLASH call: the context is still usable. */
static void expect_usable(xattn_ctx *ctx, const char *after)
{
    prob p;
    int ok = prob_init(&p, ctx, 1, 5, 9, 2, 1, 8, 8, F32, F32, 1, 0) &&
             prob_upload(&p) == XATTN_STATUS_OK;
    EXPECT(ok, "after %s: setting up a small problem failed: %s", after, xattn_last_error());
    if (ok)
        check_algo(&p, XATTN_ALGO_FLASH, 0, after, NULL);
    prob_free(&p);
}

static uint64_t mem_current(xattn_ctx *ctx)
{
    xattn_mem_stats m;
    xattn_ctx_mem_stats(ctx, &m);
    return m.current_bytes;
}

/* ---- resource exhaustion ---------------------------------------------------------- */

/* NAIVE whose score matrix (B*Hq*Sq*Sk*4 bytes) no machine has: 2^20-token
 * prefill over 64 heads (2^48 bytes = 256 TiB). The inputs broadcast one row
 * (stride 0), O is real memory (64 MiB of address space, never touched). */
static void test_naive_unallocatable(xattn_ctx *ctx)
{
    const int64_t S = 1 << 20, H = 64;
    float one[4] = {0.5f, -0.25f, 0.125f, 1.0f};
    xattn_buffer *in = NULL, *o = NULL;
    xattn_status st = xattn_buffer_wrap_host(ctx, one, sizeof one, &in);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (size_t)(S * H) * 2, &o);
    EXPECT(st == XATTN_STATUS_OK, "buffers: %s", xattn_last_error());
    if (st != XATTN_STATUS_OK) {
        xattn_buffer_free(in);
        return;
    }
    xattn_attn_desc d;
    xattn_attn_desc_init(&d);
    xattn_tensor bq = {in, 0, F16, {1, S, H, 1}, {0, 0, 0, 1}};
    xattn_tensor bk = {in, 0, F32, {1, S, 1, 1}, {0, 0, 0, 1}};
    d.q = bq;
    d.k = bk;
    d.v = bk;
    d.o = xattn_tensor_bshd(o, 0, F16, 1, S, H, 1);
    d.algo = XATTN_ALGO_NAIVE;
    uint64_t before = mem_current(ctx);
    st = xattn_attention_check(ctx, &d);
    EXPECT(st == XATTN_STATUS_OK, "the descriptor is valid: %s: %s", xattn_status_name(st),
           xattn_last_error());
    char msg[512];
    st = xattn_attention(ctx, &d, NULL);
    snprintf(msg, sizeof msg, "%s", xattn_last_error());
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY || st == XATTN_STATUS_SIZE_OVERFLOW,
           "NAIVE with a 256 TiB score matrix returned %s: %s", xattn_status_name(st), msg);
    EXPECT(strstr(msg, "FLASH") != NULL, "the message does not suggest FLASH: \"%s\"", msg);
    EXPECT(mem_current(ctx) == before, "the allocator holds %llu bytes, %llu before",
           (unsigned long long)mem_current(ctx), (unsigned long long)before);
    printf("  NAIVE, B=1 Hq=64 Sq=Sk=2^20 (256 TiB of scores): %s: %s\n", xattn_status_name(st),
           msg);

    /* B*Hq*Sq*Sk fits in 63 bits but its bytes (times 4) do not: 2^31 + 2
     * query heads over 2^31 - 1 keys. O is real: 4 GiB of address space
     * reserved without backing (never touched: the call fails first). */
#ifdef MAP_NORESERVE
    const int64_t HQ = ((int64_t)1 << 31) + 2;
    size_t obytes = (size_t)HQ * 2;
    void *omem = mmap(NULL, obytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    xattn_buffer *o4 = NULL;
    if (omem != MAP_FAILED && xattn_buffer_wrap_host(ctx, omem, obytes, &o4) == XATTN_STATUS_OK) {
        xattn_tensor hq = {in, 0, F16, {1, 1, HQ, 1}, {0, 0, 0, 1}};
        xattn_tensor hk = {in, 0, F32, {1, ((int64_t)1 << 31) - 1, 1, 1}, {0, 0, 0, 1}};
        d.q = hq;
        d.o = xattn_tensor_bshd(o4, 0, F16, 1, 1, HQ, 1);
        d.k = hk;
        d.v = hk;
        st = xattn_attention(ctx, &d, NULL);
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        EXPECT(st == XATTN_STATUS_SIZE_OVERFLOW || st == XATTN_STATUS_OUT_OF_MEMORY,
               "NAIVE with 2^62 + 2^31 pairs returned %s: %s", xattn_status_name(st), msg);
        EXPECT(strstr(msg, "FLASH") != NULL, "the message does not suggest FLASH: \"%s\"", msg);
        EXPECT(mem_current(ctx) == before, "the allocator holds %llu bytes, %llu before",
               (unsigned long long)mem_current(ctx), (unsigned long long)before);
        printf("  NAIVE, Hq=2^31+2 Sq=1 Sk=2^31-1: %s: %s\n", xattn_status_name(st), msg);
        xattn_buffer_free(o4);
    } else {
        g_skipped++;
        printf("skipped: NAIVE score bytes overflow (cannot reserve 4 GiB of address space)\n");
    }
    if (omem != MAP_FAILED)
        munmap(omem, obytes);
#endif

    /* SPLITKV's partials for 1.8e16 rows: B*Hq*Sq*(Dv+1)*4 wraps around 64
     * bits (Hq = (2^64 + r) / 1028 query heads, Dv = 256) and was once
     * allocated at the wrapped size and overrun. Such a shape needs an O that
     * names its elements more than once: the validator refuses that
     * (INVALID_STRIDE) where it checks outputs; the CPU backend refuses the
     * workspace (SIZE_OVERFLOW) in any case. */
    xattn_buffer *big = NULL;
    static unsigned char zeros[2048];
    st = xattn_buffer_wrap_host(ctx, zeros, sizeof zeros, &big);
    if (st == XATTN_STATUS_OK) {
        int64_t heads = (int64_t)(((unsigned __int128)1 << 64) / 1028 + 1);
        xattn_tensor sq = {big, 0, F32, {1, 1, heads, 256}, {0, 0, 0, 1}};
        xattn_tensor sk = {big, 0, F32, {1, 64, 1, 256}, {0, 0, 0, 1}};
        xattn_tensor so = {big, 0, F32, {1, 1, heads, 256}, {0, 0, 0, 1}};
        xattn_attn_desc_init(&d);
        d.q = sq, d.k = sk, d.v = sk, d.o = so;
        d.algo = XATTN_ALGO_SPLITKV;
        st = xattn_attention(ctx, &d, NULL);
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        EXPECT(st == XATTN_STATUS_SIZE_OVERFLOW || st == XATTN_STATUS_OUT_OF_MEMORY ||
                   st == XATTN_STATUS_INVALID_STRIDE,
               "SPLITKV with 1.8e16 query rows returned %s: %s", xattn_status_name(st), msg);
        EXPECT(mem_current(ctx) == before, "the allocator holds %llu bytes, %llu before",
               (unsigned long long)mem_current(ctx), (unsigned long long)before);
        printf("  SPLITKV, Hq=%lld Dv=256, O aliased: %s: %s\n", (long long)heads,
               xattn_status_name(st), msg);
        xattn_buffer_free(big);
    }
    xattn_buffer_free(in);
    xattn_buffer_free(o);
    expect_usable(ctx, "NAIVE out of memory");
}

/* XATTN_OPT_MEMORY_LIMIT for buffers: to the byte, counters unchanged by refusals. */
static void test_limit_buffers(xattn_ctx *ctx)
{
    xattn_mem_stats m0, m1;
    xattn_ctx_mem_stats(ctx, &m0);
    xattn_status st =
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)m0.current_bytes + 1000);
    EXPECT(st == XATTN_STATUS_OK, "set limit: %s", xattn_last_error());
    xattn_buffer *a = NULL, *b = NULL, *c = NULL;
    st = xattn_buffer_alloc(ctx, 1001, &a);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY && a == NULL, "1001 bytes over a 1000-byte room: %s",
           xattn_status_name(st));
    EXPECT(strstr(xattn_last_error(), "XATTN_OPT_MEMORY_LIMIT") != NULL,
           "the message does not name the limit: \"%s\"", xattn_last_error());
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(
        m1.current_bytes == m0.current_bytes && m1.alloc_count == m0.alloc_count,
        "a refused allocation changed the counters (%llu -> %llu bytes, %llu -> %llu allocations)",
        (unsigned long long)m0.current_bytes, (unsigned long long)m1.current_bytes,
        (unsigned long long)m0.alloc_count, (unsigned long long)m1.alloc_count);
    st = xattn_buffer_alloc(ctx, 600, &a);
    EXPECT(st == XATTN_STATUS_OK, "600 of 1000 bytes: %s", xattn_last_error());
    st = xattn_buffer_alloc(ctx, 401, &b);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "600 + 401 of 1000 bytes: %s", xattn_status_name(st));
    st = xattn_buffer_alloc(ctx, 400, &b);
    EXPECT(st == XATTN_STATUS_OK, "600 + 400 of 1000 bytes (exactly the limit): %s",
           xattn_last_error());
    st = xattn_buffer_alloc(ctx, 1, &c);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "one byte past the limit: %s", xattn_status_name(st));
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.peak_bytes <= m0.current_bytes + 1000 || m1.peak_bytes <= m0.peak_bytes,
           "peak %llu passed the limit", (unsigned long long)m1.peak_bytes);
    xattn_buffer_free(a);
    xattn_buffer_free(b);
    EXPECT(mem_current(ctx) == m0.current_bytes, "after freeing: %llu bytes, %llu before",
           (unsigned long long)mem_current(ctx), (unsigned long long)m0.current_bytes);
    /* A limit below what is held refuses every new byte, and lifting it works. */
    st = xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 1);
    EXPECT(st == XATTN_STATUS_OK, "a limit below current: %s", xattn_last_error());
    st = xattn_buffer_alloc(ctx, 1, &c);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "under a limit below current: %s",
           xattn_status_name(st));
    /* Sizes that cannot be counted or allocated at all. */
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    st = xattn_buffer_alloc(ctx, SIZE_MAX, &c);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY || st == XATTN_STATUS_SIZE_OVERFLOW,
           "SIZE_MAX bytes: %s", xattn_status_name(st));
    st = xattn_buffer_alloc(ctx, (size_t)1 << 62, &c);
    EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "2^62 bytes: %s", xattn_status_name(st));
    EXPECT(mem_current(ctx) == m0.current_bytes,
           "after refused huge buffers: %llu bytes, %llu before",
           (unsigned long long)mem_current(ctx), (unsigned long long)m0.current_bytes);
    int64_t lim = -1;
    xattn_ctx_get_option(ctx, XATTN_OPT_MEMORY_LIMIT, &lim);
    EXPECT(lim == 0, "limit read back %lld", (long long)lim);
    expect_usable(ctx, "buffer limits");
}

/*
 * XATTN_OPT_MEMORY_LIMIT for workspaces: each algorithm needs its per-sequence
 * arrays (16 bytes a sequence) and its workspace (run_info.workspace_bytes);
 * with exactly that much room the call runs, with one byte less it returns
 * OUT_OF_MEMORY naming the workspace, leaves O untouched and the counters
 * where they were.
 */
static void test_limit_workspaces(xattn_ctx *ctx)
{
    prob p;
    if (!prob_init(&p, ctx, 2, 24, 700, 4, 2, 32, 32, F16, F16, 1, 0) ||
        prob_upload(&p) != XATTN_STATUS_OK) {
        EXPECT(0, "setup: %s", xattn_last_error());
        prob_free(&p);
        return;
    }
    static const char *const ws_name[3] = {"NAIVE score matrix", "FLASH scratch",
                                           "SPLITKV scratch"};
    for (int a = 0; a < 3; a++) {
        xattn_algo algo = g_algos[a];
        xattn_run_info info;
        unsigned char *o = NULL;
        float *l = NULL;
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
        xattn_status st = prob_run(&p, algo, 0, &o, &l, &info);
        EXPECT(st == XATTN_STATUS_OK, "%s unlimited: %s", xattn_algo_name(algo),
               xattn_last_error());
        free(o);
        free(l);
        uint64_t arrays = (uint64_t)p.B * 16, ws = info.workspace_bytes;
        uint64_t cur = mem_current(ctx);
        EXPECT(ws > 0, "%s: workspace_bytes 0", xattn_algo_name(algo));
        if (algo == XATTN_ALGO_NAIVE)
            EXPECT(ws == (uint64_t)(p.B * p.Hq * p.Sq * p.Sk) * 4, "NAIVE workspace %llu bytes",
                   (unsigned long long)ws);
        /* one byte short: refused */
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)(cur + arrays + ws - 1));
        st = prob_run(&p, algo, 0, &o, &l, NULL);
        EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "%s, one byte short of its workspace: %s",
               xattn_algo_name(algo), xattn_status_name(st));
        const char *msg = xattn_last_error();
        EXPECT(strstr(msg, ws_name[a]) != NULL && strstr(msg, "XATTN_OPT_MEMORY_LIMIT") != NULL,
               "%s: the message names neither the workspace nor the limit: \"%s\"",
               xattn_algo_name(algo), msg);
        if (algo == XATTN_ALGO_NAIVE)
            EXPECT(strstr(msg, "XATTN_ALGO_FLASH") != NULL, "NAIVE: no FLASH hint: \"%s\"", msg);
        /* prob_run read O back after poisoning it: still all poison */
        int untouched = 1;
        unsigned char *raw = malloc(n_o(&p) * 2);
        xattn_buffer_read(p.o, 0, raw, n_o(&p) * 2);
        for (size_t i = 0; i < n_o(&p) * 2; i++)
            untouched &= raw[i] == 0xff;
        free(raw);
        EXPECT(untouched, "%s: a call refused for memory wrote O", xattn_algo_name(algo));
        EXPECT(mem_current(ctx) == cur, "%s: %llu bytes held after the refusal, %llu before",
               xattn_algo_name(algo), (unsigned long long)mem_current(ctx),
               (unsigned long long)cur);
        free(o);
        free(l);
        /* the per-sequence arrays alone do not fit either */
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)(cur + arrays - 1));
        st = prob_run(&p, algo, 0, &o, &l, NULL);
        EXPECT(st == XATTN_STATUS_OUT_OF_MEMORY, "%s, no room for the lengths: %s",
               xattn_algo_name(algo), xattn_status_name(st));
        free(o);
        free(l);
        /* exactly enough: runs, and the peak reaches the limit at most */
        xattn_ctx_reset_peak(ctx);
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)(cur + arrays + ws));
        char what[64];
        snprintf(what, sizeof what, "%s at exactly its memory", xattn_algo_name(algo));
        check_algo(&p, algo, 0, what, NULL);
        xattn_mem_stats ms;
        xattn_ctx_mem_stats(ctx, &ms);
        EXPECT(ms.peak_bytes <= cur + arrays + ws && ms.current_bytes == cur,
               "%s: peak %llu over the limit %llu, or %llu held after", xattn_algo_name(algo),
               (unsigned long long)ms.peak_bytes, (unsigned long long)(cur + arrays + ws),
               (unsigned long long)ms.current_bytes);
        printf("  %-8s workspace %8llu bytes: refused one byte short, ran at the limit\n",
               xattn_algo_name(algo), (unsigned long long)ws);
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    prob_free(&p);
    expect_usable(ctx, "workspace limits");
}

/* ---- size overflows ----------------------------------------------------------------- */

#define ANY_ERROR 1 /* SIZE_OVERFLOW, OUT_OF_BOUNDS or INVALID_SHAPE */
typedef struct ovf_case {
    const char *name;
    int want;          /* a status, or ANY_ERROR */
    const char *field; /* the message names it */
} ovf_case;

/* Every product of dimensions, strides and offsets that can overflow: a
 * status, never a crash, and the context usable after each. */
static void test_size_overflows(xattn_ctx *ctx)
{
    /* inputs share one buffer; each output has its own (outputs may not
     * overlap anything) */
    static float mem[4096], omem[1024], lmem[256];
    xattn_buffer *buf = NULL, *obuf = NULL, *lbuf = NULL;
    if (xattn_buffer_wrap_host(ctx, mem, sizeof mem, &buf) != XATTN_STATUS_OK ||
        xattn_buffer_wrap_host(ctx, omem, sizeof omem, &obuf) != XATTN_STATUS_OK ||
        xattn_buffer_wrap_host(ctx, lmem, sizeof lmem, &lbuf) != XATTN_STATUS_OK) {
        EXPECT(0, "wrap: %s", xattn_last_error());
        xattn_buffer_free(buf);
        xattn_buffer_free(obuf);
        return;
    }
    /* 16 GiB of address space for case 5's O, reserved without backing */
    size_t big_o_bytes = (size_t)1 << 34;
    void *big_o = MAP_FAILED;
    xattn_buffer *big_obuf = NULL;
#ifdef MAP_NORESERVE
    big_o = mmap(NULL, big_o_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (big_o != MAP_FAILED)
        xattn_buffer_wrap_host(ctx, big_o, big_o_bytes, &big_obuf);
#endif
    const int64_t big = (int64_t)1 << 40, huge = INT64_MAX;
    const size_t offs[3] = {SIZE_MAX - 3, SIZE_MAX / 2 + 1, (SIZE_MAX / 4) * 4};
    int n = 0;
    for (int c = 0; c < 40; c++) {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(buf, 0, F32, 1, 4, 2, 8);
        d.k = xattn_tensor_bshd(buf, 0, F32, 1, 6, 1, 8);
        d.v = xattn_tensor_bshd(buf, 0, F32, 1, 6, 1, 8);
        d.o = xattn_tensor_bshd(obuf, 0, F32, 1, 4, 2, 8);
        xattn_tensor *all[4] = {&d.q, &d.k, &d.v, &d.o};
        ovf_case oc = {NULL, ANY_ERROR, NULL};
        switch (c) {
        /* each dimension of every tensor huge (strides kept as the layout) */
        case 0:
        case 1:
        case 2:
        case 3: {
            for (int t = 0; t < 4; t++) {
                all[t]->shape[c] = huge;
            }
            /* the element count is checked before the head-dim range */
            oc = (ovf_case){"one dimension INT64_MAX", XATTN_STATUS_SIZE_OVERFLOW, "q.shape"};
            break;
        }
        /* B, S, H huge with zero strides: counts fit, products of the problem do not */
        case 4:
            for (int t = 0; t < 4; t++) {
                all[t]->shape[0] = big;
                memset(all[t]->strides, 0, sizeof all[t]->strides);
            }
            d.q.shape[1] = d.o.shape[1] = big;
            d.k.shape[1] = d.v.shape[1] = 1 << 30;
            oc = (ovf_case){"B*Sq*H*D", XATTN_STATUS_SIZE_OVERFLOW, "q.shape"};
            break;
        case 5: /* 2^33 query rows (O: 16 GiB of f16) times 2^31 - 1 keys */
            if (!big_obuf) {
                g_skipped++;
                printf("skipped: B*Hq*Sq*Sk overflow (cannot reserve 16 GiB of address space)\n");
                continue;
            }
            for (int t = 0; t < 3; t++)
                memset(all[t]->strides, 0, sizeof all[t]->strides);
            d.q.shape[1] = (int64_t)1 << 21, d.q.shape[2] = (int64_t)1 << 12;
            d.q.dtype = F16;
            d.v.shape[3] = 1;
            d.k.shape[1] = d.v.shape[1] = ((int64_t)1 << 31) - 1;
            d.o = xattn_tensor_bshd(big_obuf, 0, F16, 1, (int64_t)1 << 21, (int64_t)1 << 12, 1);
            oc = (ovf_case){"Hq*Sq*Sk", XATTN_STATUS_SIZE_OVERFLOW, "B*Hq*Sq*Sk"};
            break;
        case 6:
            for (int t = 0; t < 4; t++)
                memset(all[t]->strides, 0, sizeof all[t]->strides);
            d.q.shape[1] = d.o.shape[1] = (int64_t)1 << 31;
            oc = (ovf_case){"Sq > INT32_MAX", XATTN_STATUS_INVALID_SHAPE, "q.shape[1]"};
            break;
        case 7:
            for (int t = 0; t < 4; t++) {
                memset(all[t]->strides, 0, sizeof all[t]->strides);
                all[t]->shape[0] = big, all[t]->shape[1] = big;
            }
            d.q.shape[2] = d.o.shape[2] = big;
            oc = (ovf_case){"element count of q", XATTN_STATUS_SIZE_OVERFLOW, "q.shape"};
            break;
        /* strides huge, on each dimension and each tensor */
        case 8:
        case 9:
        case 10:
        case 11:
        case 12:
        case 13:
        case 14:
        case 15:
            all[(c - 8) / 2]->strides[(c - 8) % 2 ? 1 : 3] = huge;
            oc = (ovf_case){"stride INT64_MAX", XATTN_STATUS_SIZE_OVERFLOW, "strides"};
            break;
        case 16:
        case 17:
        case 18:
        case 19:
            all[c - 16]->strides[1] = (int64_t)1 << 60; /* the span fits, its bytes may not */
            oc = (ovf_case){"stride 2^60", ANY_ERROR, NULL};
            break;
        case 20:
        case 21:
        case 22:
        case 23:
            all[c - 20]->strides[0] = (int64_t)1 << 33;
            all[c - 20]->shape[0] = 1 << 20;
            for (int t = 0; t < 4; t++)
                all[t]->shape[0] = 1 << 20;
            oc = (ovf_case){"stride x extent beyond the buffer", ANY_ERROR, NULL};
            break;
        /* offsets near SIZE_MAX */
        case 24:
        case 25:
        case 26:
        case 27:
        case 28:
        case 29:
            all[(c - 24) % 4]->offset = offs[(c - 24) % 3];
            oc = (ovf_case){"offset near SIZE_MAX", ANY_ERROR, NULL};
            break;
        /* optional tensors */
        case 30: {
            xattn_tensor b = {buf, 0, F32, {1, 1, big, big}, {0, 0, 0, 0}};
            d.bias = b;
            oc = (ovf_case){"bias element count", XATTN_STATUS_SIZE_OVERFLOW, "bias.shape"};
            break;
        }
        case 31: {
            xattn_tensor b = {buf, SIZE_MAX - 3, F32, {1, 1, 4, 6}, {24, 24, 6, 1}};
            d.bias = b;
            oc = (ovf_case){"bias offset", XATTN_STATUS_SIZE_OVERFLOW, "bias"};
            break;
        }
        case 32: {
            xattn_tensor b = {buf, 0, F32, {1, 1, 4, 6}, {0, 0, huge, 1}};
            d.bias = b;
            oc = (ovf_case){"bias stride", XATTN_STATUS_SIZE_OVERFLOW, "bias.strides[2]"};
            break;
        }
        case 33: {
            xattn_tensor l = {lbuf, 0, F32, {1, 2, 4, 1}, {8, 4, huge / 2, 1}};
            d.lse = l;
            oc = (ovf_case){"lse stride", ANY_ERROR, "lse"};
            break;
        }
        case 34: {
            xattn_tensor l = {lbuf, SIZE_MAX - 3, F32, {1, 2, 4, 1}, {8, 4, 1, 1}};
            d.lse = l;
            oc = (ovf_case){"lse offset", XATTN_STATUS_SIZE_OVERFLOW, "lse"};
            break;
        }
        /* packed batches: offsets at the int32 limit */
        case 35:
        case 36: {
            static int32_t cuq[3], cuk[3];
            cuq[0] = cuk[0] = 0;
            cuq[1] = INT32_MAX;
            cuq[2] = INT32_MAX;
            cuk[1] = 3, cuk[2] = c == 35 ? 6 : INT32_MAX;
            d.cu_seqlens_q = cuq;
            d.cu_seqlens_k = cuk;
            d.num_seqs = 2;
            oc = (ovf_case){"cu_seqlens at INT32_MAX", XATTN_STATUS_INVALID_LENGTHS, "cu_seqlens"};
            break;
        }
        case 37:
            d.window_left = INT64_MAX;
            d.window_right = INT64_MAX;
            d.causal = 1;
            oc = (ovf_case){"windows of INT64_MAX (valid)", XATTN_STATUS_OK, NULL};
            break;
        case 38:
            d.q.shape[3] = d.k.shape[3] = (int64_t)1 << 62;
            oc = (ovf_case){"D 2^62", XATTN_STATUS_SIZE_OVERFLOW, "q.shape"};
            break;
        default: { /* negative shapes near INT64_MIN */
            d.k.shape[1] = INT64_MIN;
            oc = (ovf_case){"shape INT64_MIN", XATTN_STATUS_INVALID_SHAPE, "k.shape[1]"};
            break;
        }
        }
        xattn_status st = xattn_attention_check(ctx, &d);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        if (oc.want == XATTN_STATUS_OK) {
            EXPECT(st == XATTN_STATUS_OK, "[%d %s] %s: %s", c, oc.name, xattn_status_name(st), msg);
            st = xattn_attention(ctx, &d, NULL);
            EXPECT(st == XATTN_STATUS_OK, "[%d %s] run: %s: %s", c, oc.name, xattn_status_name(st),
                   xattn_last_error());
        } else if (oc.want != ANY_ERROR)
            EXPECT(st == (xattn_status)oc.want, "[%d %s] %s, expected %s: %s", c, oc.name,
                   xattn_status_name(st), xattn_status_name((xattn_status)oc.want), msg);
        else
            EXPECT(st == XATTN_STATUS_SIZE_OVERFLOW || st == XATTN_STATUS_OUT_OF_BOUNDS ||
                       st == XATTN_STATUS_INVALID_SHAPE,
                   "[%d %s] %s: %s", c, oc.name, xattn_status_name(st), msg);
        if (oc.field && st != XATTN_STATUS_OK)
            EXPECT(strstr(msg, oc.field) != NULL, "[%d %s] the message does not name %s: \"%s\"", c,
                   oc.name, oc.field, msg);
        if (st != XATTN_STATUS_OK) {
            EXPECT(msg[0] != '\0', "[%d %s] no message", c, oc.name);
            xattn_status st2 = xattn_attention(ctx, &d, NULL);
            EXPECT(st2 == st, "[%d %s] xattn_attention returned %s, the check %s", c, oc.name,
                   xattn_status_name(st2), xattn_status_name(st));
        }
        n++;
    }
    /* buffer copies with offset + bytes past SIZE_MAX */
    xattn_status st = xattn_buffer_read(buf, SIZE_MAX, mem, 16);
    EXPECT(st == XATTN_STATUS_OUT_OF_BOUNDS, "read at SIZE_MAX: %s", xattn_status_name(st));
    st = xattn_buffer_write(buf, 16, mem, SIZE_MAX - 8);
    EXPECT(st == XATTN_STATUS_OUT_OF_BOUNDS, "write of SIZE_MAX - 8 bytes: %s",
           xattn_status_name(st));
    st = xattn_buffer_read(buf, sizeof mem, mem, 0);
    EXPECT(st == XATTN_STATUS_OK, "an empty read at the end: %s", xattn_status_name(st));
    xattn_buffer_free(buf);
    xattn_buffer_free(obuf);
    xattn_buffer_free(lbuf);
    xattn_buffer_free(big_obuf);
    if (big_o != MAP_FAILED)
        munmap(big_o, big_o_bytes);
    printf("  %d descriptors with overflowing sizes: statuses, no crash\n", n);
    expect_usable(ctx, "size overflows");
}

/* ---- numerical robustness ------------------------------------------------------- */

static void scale_inputs(prob *p, float sq_mag, float sk_mag)
{
    for (size_t i = 0; i < n_q(p); i++)
        p->hq[i] *= sq_mag;
    for (size_t i = 0; i < n_k(p); i++)
        p->hk[i] *= sk_mag;
}

/* Scores near the top of f32: q, k ~ 1e18 give scores ~1e36 (FLT_MAX is
 * 3.4e38): every algorithm matches the reference. Beyond (q, k ~ 1e19, scores
 * ~1e39) the f32 score overflows to +inf: then the row is NaN (as PyTorch's
 * f32 softmax gives), never a wrong finite value; with a softcap such scores
 * are capped and match again. */
static void test_large_magnitudes(xattn_ctx *ctx)
{
    static const struct {
        float mag_q, mag_k, scale, softcap;
        xattn_dtype dq, dkv;
        int overflow; /* the f32 score can overflow */
        const char *name;
    } cs[] = {
        {1e18f, 1e18f, 0.0f, 0.0f, F32, F32, 0, "q,k ~1e18 (scores ~1e36)"},
        {1.0f, 1.0f, 1e36f, 0.0f, F32, F32, 0, "scale 1e36"},
        {1e18f, 1e18f, 0.0f, 0.0f, F32, BF16, 0, "q f32 ~1e18, k bf16 ~1e18"},
        {3e4f, 3e4f, 1.0f, 0.0f, F16, F16, 0, "f16 q,k ~3e4 (scores ~1e10)"},
        {1e18f, 1e18f, -1.0f, 0.0f, F32, F32, 0, "scale -1, scores ~-1e36..1e36"},
        {1e19f, 1e19f, 0.0f, 30.0f, F32, F32, 0, "q,k ~1e19 with softcap 30"},
        {1e19f, 1e19f, 1.0f, 0.0f, F32, F32, 1, "q,k ~1e19 (scores beyond FLT_MAX)"},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        prob p;
        if (!prob_init(&p, ctx, 2, 9, 70, 2, 1, 64, 64, cs[c].dq, cs[c].dkv, 1, 0)) {
            EXPECT(0, "setup");
            prob_free(&p);
            continue;
        }
        scale_inputs(&p, cs[c].mag_q, cs[c].mag_k);
        if (prob_upload(&p) != XATTN_STATUS_OK) {
            EXPECT(0, "upload: %s", xattn_last_error());
            prob_free(&p);
            continue;
        }
        p.d.scale = cs[c].scale;
        p.d.softcap = cs[c].softcap;
        for (int a = 0; a < 4; a++) {
            char what[128];
            snprintf(what, sizeof what, "%s, %s", cs[c].name, xattn_algo_name(g_algos[a]));
            if (!cs[c].overflow) {
                check_algo(&p, g_algos[a], a == 2 ? 3 : 0, what, NULL);
                continue;
            }
            /* overflow: each row matches the reference or is entirely NaN */
            double *o_ref = malloc(n_o(&p) * sizeof(double));
            double *l_ref = malloc(n_l(&p) * sizeof(double));
            unsigned char *o = NULL;
            float *l = NULL;
            xattn_reference_attention(ctx, &p.d, o_ref, l_ref);
            xattn_status st = prob_run(&p, g_algos[a], a == 2 ? 3 : 0, &o, &l, NULL);
            EXPECT(st == XATTN_STATUS_OK, "[%s] %s", what, xattn_last_error());
            int64_t rows = p.B * p.Sq * p.Hq, nan_rows = 0, bad = 0;
            for (int64_t r = 0; r < rows && st == XATTN_STATUS_OK; r++) {
                int64_t b = r / (p.Sq * p.Hq), s = (r / p.Hq) % p.Sq, h = r % p.Hq;
                int all_nan = isnan(l[(b * p.Hq + h) * p.Sq + s]);
                double e2 = 0, r2 = 0;
                for (int64_t e = 0; e < p.Dv; e++) {
                    double out = get_elem(o, p.dq, (size_t)(r * p.Dv + e)),
                           ref = o_ref[r * p.Dv + e];
                    all_nan &= isnan(out);
                    e2 += (out - ref) * (out - ref);
                    r2 += ref * ref;
                }
                if (all_nan)
                    nan_rows++;
                else if (!(sqrt(e2 / r2) <= 1e-5))
                    bad++;
            }
            EXPECT(bad == 0, "[%s] %lld rows neither NaN nor the reference's", what,
                   (long long)bad);
            printf("  %s: %lld of %lld rows NaN (f32 score overflow), the rest match\n", what,
                   (long long)nan_rows, (long long)rows);
            free(o_ref);
            free(l_ref);
            free(o);
            free(l);
        }
        prob_free(&p);
    }
}

/* -inf in the bias: scattered, whole rows (O = 0, LSE = -inf exactly), every
 * key of a causal row's valid range, and together with a softcap. */
static void test_neginf_bias(xattn_ctx *ctx)
{
    for (int variant = 0; variant < 3; variant++) {
        prob p;
        if (!prob_init(&p, ctx, 2, 33, 80, 4, 2, 32, 48, variant == 1 ? F16 : F32,
                       variant == 1 ? F16 : F32, 1, 1)) {
            EXPECT(0, "setup");
            prob_free(&p);
            continue;
        }
        uint64_t s = 99 + (uint64_t)variant;
        for (int64_t i = 0; i < p.Sq; i++)
            for (int64_t j = 0; j < p.Sk; j++) {
                float *x = &p.hb[i * p.Sk + j];
                if (i % 5 == 2)
                    *x = -INFINITY; /* whole row */
                else if ((xattn_test_rng_next(&s) & 7) == 0)
                    *x = -INFINITY;
                /* causal, bottom-right: keys 0..i+47 valid; mask the valid ones of row 7 */
                if (i == 7 && j <= i + (p.Sk - p.Sq))
                    *x = -INFINITY;
            }
        if (prob_upload(&p) != XATTN_STATUS_OK) {
            EXPECT(0, "upload: %s", xattn_last_error());
            prob_free(&p);
            continue;
        }
        p.d.causal = 1;
        if (variant == 2)
            p.d.softcap = 5.0f;
        for (int a = 0; a < 4; a++) {
            char what[96];
            metric m;
            snprintf(what, sizeof what, "-inf bias (%s), %s", variant == 1 ? "f16" : "f32",
                     xattn_algo_name(g_algos[a]));
            if (check_algo(&p, g_algos[a], a == 2 ? 2 : 0, what, &m)) {
                /* masked rows are exact: the metric requires O == 0 and LSE == -inf */
            }
        }
        prob_free(&p);
    }
}

/* NaN (and inf) in the inputs propagate as the reference says: a NaN in a
 * query row or in a used key makes the row NaN; a NaN in a key or value that
 * the masks or a -inf bias exclude never reaches the output. */
static void test_nan_inputs(xattn_ctx *ctx)
{
    static const struct {
        const char *name;
        int tensor; /* 0 q, 1 k, 2 v */
        int64_t s, h, e;
        float val;
        int causal;
        int bias_key; /* -1: no bias; else this key gets -inf in every row */
    } cs[] = {
        {"NaN in q row 3", 0, 3, 1, 5, NAN, 0, -1},
        {"NaN in k at a used key", 1, 10, 0, 7, NAN, 0, -1},
        {"NaN in v at a used key", 2, 10, 0, 0, NAN, 0, -1},
        {"+inf in q", 0, 4, 0, 1, INFINITY, 0, -1},
        {"-inf in k", 1, 2, 0, 3, -INFINITY, 0, -1},
        {"+inf in v", 2, 11, 1, 2, INFINITY, 0, -1},
        {"NaN in k at key 44 (masked for row 0, used by row 1)", 1, 44, 0, 2, NAN, 1, -1},
        {"NaN in v at key 44 (masked for row 0, used by row 1)", 2, 44, 1, 2, NAN, 1, -1},
        {"NaN in k at a key with -inf bias", 1, 12, 0, 2, NAN, 0, 12},
        {"NaN in v at a key with -inf bias", 2, 12, 1, 9, NAN, 0, 12},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        prob p;
        /* causal cases: Sq = 2, Sk = 45, bottom-right: row i sees keys <= i + 43 */
        int64_t Sq = cs[c].causal ? 2 : 8;
        if (!prob_init(&p, ctx, 1, Sq, 45, 2, 2, 16, 16, F32, F32, 1, cs[c].bias_key >= 0)) {
            EXPECT(0, "setup");
            prob_free(&p);
            continue;
        }
        float *t = cs[c].tensor == 0 ? p.hq : cs[c].tensor == 1 ? p.hk : p.hv;
        int64_t H = cs[c].tensor == 0 ? p.Hq : p.Hkv, Dd = cs[c].tensor == 2 ? p.Dv : p.D;
        int64_t s = cs[c].tensor == 0 ? cs[c].s % Sq : cs[c].s;
        t[(s * H + cs[c].h) * Dd + cs[c].e] = cs[c].val;
        if (cs[c].bias_key >= 0)
            for (int64_t i = 0; i < p.Sq; i++)
                p.hb[i * p.Sk + cs[c].bias_key] = -INFINITY;
        if (prob_upload(&p) != XATTN_STATUS_OK) {
            EXPECT(0, "upload: %s", xattn_last_error());
            prob_free(&p);
            continue;
        }
        p.d.causal = cs[c].causal;
        for (int a = 0; a < 4; a++) {
            char what[128];
            metric m;
            snprintf(what, sizeof what, "%s, %s", cs[c].name, xattn_algo_name(g_algos[a]));
            check_algo(&p, g_algos[a], a == 2 ? 2 : 0, what, &m);
        }
        prob_free(&p);
    }
}

/* NaN or inf in V at a key that is not masked but whose weight exp(s - m)
 * is below f32's smallest number (the score 95 below the row's max): in the
 * reference (double) the weight is tiny but positive, so the row is NaN, or
 * +-inf in that column; a skipped key would give a finite row. */
static void test_nan_v_negligible_weight(xattn_ctx *ctx)
{
    static const float vals[3] = {NAN, INFINITY, -INFINITY};
    for (int vi = 0; vi < 3; vi++) {
        prob p;
        if (!prob_init(&p, ctx, 1, 1, 3, 1, 1, 1, 4, F32, F32, 1, 0)) {
            EXPECT(0, "setup");
            prob_free(&p);
            return;
        }
        p.hq[0] = 10.0f;
        p.hk[0] = 10.0f; /* score 100 */
        p.hk[1] = 0.5f;  /* score 5: weight e^-95, 0 in f32 */
        p.hk[2] = 1.0f;  /* score 10 */
        p.hv[1 * 4 + 2] = vals[vi];
        if (prob_upload(&p) != XATTN_STATUS_OK) {
            EXPECT(0, "upload: %s", xattn_last_error());
            prob_free(&p);
            return;
        }
        p.d.scale = 1.0f;
        for (int a = 0; a < 3; a++) {
            char what[96];
            snprintf(what, sizeof what, "%g in V at a key of weight e^-95, %s", (double)vals[vi],
                     xattn_algo_name(g_algos[a]));
            check_algo(&p, g_algos[a], 0, what, NULL);
        }
        prob_free(&p);
    }
}

/* Sk = 131072 in f32, decode-like (Sq 1..4): FLASH and SPLITKV (automatic and
 * 16 splits) within the f32 bound of the harness. */
static void test_long_sk(xattn_ctx *ctx)
{
    static const struct {
        int64_t Sq, Hq, Hkv;
        int causal;
    } cs[] = {{1, 1, 1, 0}, {4, 2, 1, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        prob p;
        const int64_t Sk = 131072;
        if (!prob_init(&p, ctx, 1, cs[c].Sq, Sk, cs[c].Hq, cs[c].Hkv, 64, 64, F32, F32, 1, 0) ||
            prob_upload(&p) != XATTN_STATUS_OK) {
            EXPECT(0, "setup Sk=131072: %s", xattn_last_error());
            prob_free(&p);
            continue;
        }
        free(p.hk), p.hk = NULL; /* 32 MiB each: the buffers hold them now */
        free(p.hv), p.hv = NULL;
        p.d.causal = cs[c].causal;
        static const struct {
            xattn_algo a;
            int splits;
        } runs[] = {{XATTN_ALGO_FLASH, 0}, {XATTN_ALGO_SPLITKV, 0}, {XATTN_ALGO_SPLITKV, 16}};
        for (int r = 0; r < 3; r++) {
            char what[96];
            metric m;
            snprintf(what, sizeof what, "Sk=131072 Sq=%lld Hq=%lld, %s splits %d",
                     (long long)cs[c].Sq, (long long)cs[c].Hq, xattn_algo_name(runs[r].a),
                     runs[r].splits);
            if (check_algo(&p, runs[r].a, runs[r].splits, what, &m))
                printf("  %s: rel L2 %.2e, max abs %.2e, LSE %.2e\n", what, m.rel_l2, m.max_abs,
                       m.lse_err);
        }
        prob_free(&p);
    }
}

/* ---- determinism ----------------------------------------------------------------- */

/* The same inputs twice give bit-identical O and LSE, for every algorithm and
 * thread count; NAIVE and FLASH (and SPLITKV with a fixed split count) also
 * give the same bits whatever the thread count. */
static void test_determinism(xattn_ctx *ctx)
{
    prob p;
    if (!prob_init(&p, ctx, 2, 37, 300, 4, 2, 64, 64, F16, F16, 1, 1) ||
        prob_upload(&p) != XATTN_STATUS_OK) {
        EXPECT(0, "setup: %s", xattn_last_error());
        prob_free(&p);
        return;
    }
    p.d.causal = 1;
    p.d.softcap = 20.0f;
    static const int threads[3] = {1, 2, 3};
    size_t ob = n_o(&p) * 2, lb = n_l(&p) * 4;
    for (int a = 0; a < 4; a++) {
        for (int fixed = 0; fixed < (g_algos[a] == XATTN_ALGO_SPLITKV ? 2 : 1); fixed++) {
            int splits = fixed ? 4 : 0;
            unsigned char *first_o = NULL;
            float *first_l = NULL;
            int same_across = 1;
            for (int t = 0; t < 3; t++) {
                xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, threads[t]);
                unsigned char *o1, *o2;
                float *l1, *l2;
                xattn_status st1 = prob_run(&p, g_algos[a], splits, &o1, &l1, NULL);
                xattn_status st2 = prob_run(&p, g_algos[a], splits, &o2, &l2, NULL);
                EXPECT(st1 == XATTN_STATUS_OK && st2 == XATTN_STATUS_OK, "%s: %s",
                       xattn_algo_name(g_algos[a]), xattn_last_error());
                EXPECT(!memcmp(o1, o2, ob) && !memcmp(l1, l2, lb),
                       "%s (splits %d), %d threads: two runs differ", xattn_algo_name(g_algos[a]),
                       splits, threads[t]);
                if (!first_o) {
                    first_o = o1, first_l = l1;
                } else {
                    same_across &= !memcmp(first_o, o1, ob) && !memcmp(first_l, l1, lb);
                    free(o1);
                    free(l1);
                }
                free(o2);
                free(l2);
            }
            int must = g_algos[a] == XATTN_ALGO_NAIVE || g_algos[a] == XATTN_ALGO_FLASH || fixed;
            if (must)
                EXPECT(same_across, "%s (splits %d): 1, 2 and 3 threads give different bits",
                       xattn_algo_name(g_algos[a]), splits);
            printf("  %-8s splits %d: identical run to run; across 1/2/3 threads: %s\n",
                   xattn_algo_name(g_algos[a]), splits, same_across ? "identical" : "differ");
            free(first_o);
            free(first_l);
        }
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 0);
    prob_free(&p);
}

/* ---- no abort / exit in the library --------------------------------------------- */

/* Scans one source file (comments, strings and character constants blanked)
 * for a call of a function that ends the process. */
static int scan_file(const char *path, char *hit, size_t hitn)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *t = malloc(cap);
    int c;
    while (t && (c = fgetc(f)) != EOF) {
        if (n + 1 >= cap) {
            char *nt = realloc(t, cap *= 2);
            if (!nt) {
                free(t);
                t = NULL;
                break;
            }
            t = nt;
        }
        t[n++] = (char)c;
    }
    fclose(f);
    if (!t)
        return -1;
    t[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '/' && t[i + 1] == '/') {
            while (i < n && t[i] != '\n')
                t[i++] = ' ';
        } else if (t[i] == '/' && t[i + 1] == '*') {
            t[i] = t[i + 1] = ' ';
            for (i += 2; i < n && !(t[i] == '*' && t[i + 1] == '/'); i++)
                if (t[i] != '\n')
                    t[i] = ' ';
            if (i < n)
                t[i] = t[i + 1] = ' ', i++;
        } else if (t[i] == '"' || t[i] == '\'') {
            char q = t[i];
            for (i++; i < n && t[i] != q; i++) {
                if (t[i] == '\\' && i + 1 < n)
                    t[i++] = ' ';
                if (t[i] != '\n')
                    t[i] = ' ';
            }
        }
    }
    static const char *const bad[] = {"abort",  "exit",           "_Exit", "quick_exit",
                                      "assert", "__builtin_trap", "raise"};
    int found = 0, line = 1;
    for (size_t i = 0; i < n && !found; i++) {
        if (t[i] == '\n')
            line++;
        int start = (t[i] == '_' || (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z')) &&
                    (i == 0 || !(t[i - 1] == '_' || (t[i - 1] >= 'a' && t[i - 1] <= 'z') ||
                                 (t[i - 1] >= 'A' && t[i - 1] <= 'Z') ||
                                 (t[i - 1] >= '0' && t[i - 1] <= '9')));
        if (!start)
            continue;
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            size_t len = strlen(bad[k]), j = i + len;
            if (strncmp(t + i, bad[k], len))
                continue;
            char nx = t[j];
            if (nx == '_' || (nx >= 'a' && nx <= 'z') || (nx >= 'A' && nx <= 'Z') ||
                (nx >= '0' && nx <= '9'))
                continue;
            while (t[j] == ' ' || t[j] == '\t')
                j++;
            if (t[j] == '(') {
                snprintf(hit, hitn, "%s:%d: %s(", path, line, bad[k]);
                found = 1;
            }
        }
    }
    free(t);
    return found;
}

static void test_no_abort(void)
{
#ifdef XATTN_SOURCE_DIR
    static const char *const dirs[] = {"backends", "kernels_cpu", "kernels_cl", "kernels_cuda",
                                       "include"};
    int files = 0, hits = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char dpath[1024];
        snprintf(dpath, sizeof dpath, "%s/%s", XATTN_SOURCE_DIR, dirs[i]);
        DIR *dir = opendir(dpath);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            const char *dot = strrchr(e->d_name, '.');
            if (!dot || (strcmp(dot, ".c") && strcmp(dot, ".h") && strcmp(dot, ".cl") &&
                         strcmp(dot, ".cu") && strcmp(dot, ".cuh")))
                continue;
            char path[2048], hit[2200];
            snprintf(path, sizeof path, "%s/%s", dpath, e->d_name);
            int r = scan_file(path, hit, sizeof hit);
            if (r < 0)
                continue;
            files++;
            if (r > 0) {
                hits++;
                EXPECT(0, "the library may end the process: %s", hit);
            }
        }
        closedir(dir);
    }
    EXPECT(files > 10, "only %d library source files found under %s", files, XATTN_SOURCE_DIR);
    if (!hits)
        g_passed++;
    printf("  %d library source files: no abort/exit/_Exit/quick_exit/assert/raise/__builtin_trap "
           "call\n",
           files);
#else
    g_skipped++;
    printf("skipped: source scan (XATTN_SOURCE_DIR not defined)\n");
#endif
}

/* ---- backends that are compiled in but cannot run here ------------------------- */

/* A backend without a driver or device (CUDA on a machine without a GPU,
 * OpenCL without an ICD) says so with BACKEND_UNAVAILABLE and the native
 * reason; contexts on it are refused the same way; AUTO still gives a context. */
static void test_unavailable_backends(void)
{
    static const xattn_backend bes[3] = {XATTN_BACKEND_CPU, XATTN_BACKEND_OPENCL,
                                         XATTN_BACKEND_CUDA};
    for (int i = 0; i < 3; i++) {
        xattn_status st = xattn_backend_available(bes[i]);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", xattn_last_error());
        printf("  %-6s compiled %d: %s%s%s\n", xattn_backend_name(bes[i]),
               xattn_backend_compiled(bes[i]), xattn_status_name(st), msg[0] ? ": " : "", msg);
        if (bes[i] == XATTN_BACKEND_CPU)
            EXPECT(st == XATTN_STATUS_OK, "the CPU backend is always there: %s", msg);
        if (st == XATTN_STATUS_OK)
            continue;
        EXPECT(st == XATTN_STATUS_BACKEND_UNAVAILABLE && msg[0], "%s: %s without a reason",
               xattn_backend_name(bes[i]), xattn_status_name(st));
        int n = -1;
        xattn_device_count(bes[i], &n);
        EXPECT(n == 0, "%s: %d devices while unavailable", xattn_backend_name(bes[i]), n);
        xattn_ctx *ctx = NULL;
        st = xattn_ctx_create(bes[i], 0, &ctx);
        EXPECT(st == XATTN_STATUS_BACKEND_UNAVAILABLE && ctx == NULL && xattn_last_error()[0],
               "%s: context on an unavailable backend: %s", xattn_backend_name(bes[i]),
               xattn_status_name(st));
        xattn_ctx_destroy(ctx);
    }
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_AUTO, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK && ctx, "AUTO: %s", xattn_last_error());
    xattn_ctx_destroy(ctx);
}

int main(void)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    if (st != XATTN_STATUS_OK) {
        printf("cannot create a CPU context: %s\n0 passed, 1 failed, 0 skipped\n",
               xattn_last_error());
        return 1;
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1);
    printf("resource exhaustion\n");
    test_naive_unallocatable(ctx);
    test_limit_buffers(ctx);
    test_limit_workspaces(ctx);
    printf("size overflows\n");
    test_size_overflows(ctx);
    printf("numerical robustness\n");
    test_large_magnitudes(ctx);
    test_neginf_bias(ctx);
    test_nan_inputs(ctx);
    test_nan_v_negligible_weight(ctx);
    test_long_sk(ctx);
    printf("determinism\n");
    test_determinism(ctx);
    printf("serving inputs\n");
    sv_test_all(ctx);
    printf("backends\n");
    test_unavailable_backends();
    printf("no abort/exit\n");
    test_no_abort();
    xattn_mem_stats m;
    xattn_ctx_mem_stats(ctx, &m);
    EXPECT(m.current_bytes < 4096, "the context holds %llu bytes at the end",
           (unsigned long long)m.current_bytes);
    xattn_ctx_destroy(ctx);
    return xattn_test_summary();
}
