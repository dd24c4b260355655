/*
 * test_concurrency: the library's thread-safety policy (docs/guarantees.md).
 *
 *  1. Several threads, each with its own context, run attention at the same
 *     time; every result matches the double reference, and each thread's
 *     xattn_last_error() is its own.
 *  2. Two threads on one context: a call that finds the context in use by
 *     another thread returns XATTN_STATUS_BUSY at once, with a message, and
 *     changes nothing; it never races. The long call in progress is not
 *     disturbed (its output matches the reference), and the context is free
 *     again when it returns.
 *  3. Many threads hammering one context with small calls, each on its own
 *     buffers: every call is OK or BUSY, every OK call is correct.
 *
 * The last line is "N passed, N failed, N skipped".
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xattn.h"
#include "xattn_reference.h"
#include "xattn_test.h"
#include "xattn_test_elem.h"

#define F32 XATTN_DTYPE_F32
#define F16 XATTN_DTYPE_F16
#define BF16 XATTN_DTYPE_BF16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- a problem on one context: contiguous BSHD, LSE, reference ------------------ */

typedef struct prob {
    xattn_ctx *ctx;
    int64_t B, Sq, Sk, Hq, Hkv, D;
    xattn_dtype dq, dkv;
    xattn_buffer *q, *k, *v, *o, *l;
    xattn_attn_desc d;
    double *o_ref, *l_ref; /* the reference, computed before any concurrency */
} prob;

static size_t n_o(const prob *p)
{
    return (size_t)(p->B * p->Sq * p->Hq * p->D);
}
static size_t n_l(const prob *p)
{
    return (size_t)(p->B * p->Hq * p->Sq);
}

/* Retries a call that may find the context busy (shared-context tests). */
#define RETRY_BUSY(st, call)                                                                       \
    do {                                                                                           \
        while (((st) = (call)) == XATTN_STATUS_BUSY)                                               \
            sched_yield();                                                                         \
    } while (0)

static xattn_status upload(xattn_ctx *ctx, size_t n, xattn_dtype dt, uint64_t *seed,
                           xattn_buffer **out)
{
    unsigned char *tmp = malloc(n * esz(dt));
    if (!tmp)
        return XATTN_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        put_elem(tmp, dt, i, xattn_test_rng_val(seed));
    xattn_status st;
    RETRY_BUSY(st, xattn_buffer_alloc(ctx, n * esz(dt), out));
    if (st == XATTN_STATUS_OK)
        RETRY_BUSY(st, xattn_buffer_write(*out, 0, tmp, n * esz(dt)));
    free(tmp);
    return st;
}

static void prob_free(prob *p)
{
    xattn_buffer *bs[5] = {p->q, p->k, p->v, p->o, p->l};
    for (int i = 0; i < 5; i++)
        xattn_buffer_free(bs[i]);
    free(p->o_ref);
    free(p->l_ref);
    memset(p, 0, sizeof *p);
}

static xattn_status prob_make(prob *p, xattn_ctx *ctx, int64_t B, int64_t Sq, int64_t Sk,
                              int64_t Hq, int64_t Hkv, int64_t D, xattn_dtype dq, xattn_dtype dkv,
                              int causal, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D;
    p->dq = dq, p->dkv = dkv;
    xattn_status st = upload(ctx, (size_t)(B * Sq * Hq * D), dq, &seed, &p->q);
    if (st == XATTN_STATUS_OK)
        st = upload(ctx, (size_t)(B * Sk * Hkv * D), dkv, &seed, &p->k);
    if (st == XATTN_STATUS_OK)
        st = upload(ctx, (size_t)(B * Sk * Hkv * D), dkv, &seed, &p->v);
    if (st == XATTN_STATUS_OK)
        RETRY_BUSY(st, xattn_buffer_alloc(ctx, n_o(p) * esz(dq), &p->o));
    if (st == XATTN_STATUS_OK)
        RETRY_BUSY(st, xattn_buffer_alloc(ctx, n_l(p) * 4, &p->l));
    if (st != XATTN_STATUS_OK)
        return st;
    xattn_attn_desc *d = &p->d;
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(p->q, 0, dq, B, Sq, Hq, D);
    d->k = xattn_tensor_bshd(p->k, 0, dkv, B, Sk, Hkv, D);
    d->v = xattn_tensor_bshd(p->v, 0, dkv, B, Sk, Hkv, D);
    d->o = xattn_tensor_bshd(p->o, 0, dq, B, Sq, Hq, D);
    xattn_tensor l = {p->l, 0, F32, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}};
    d->lse = l;
    d->causal = causal;
    p->o_ref = malloc(n_o(p) * sizeof(double));
    p->l_ref = malloc(n_l(p) * sizeof(double));
    RETRY_BUSY(st, xattn_reference_attention(ctx, d, p->o_ref, p->l_ref));
    return st;
}

/* Poisons O and LSE (NaN bytes). */
static xattn_status prob_poison(prob *p)
{
    size_t ob = n_o(p) * esz(p->dq), lb = n_l(p) * 4;
    unsigned char *x = malloc(ob > lb ? ob : lb);
    memset(x, 0xff, ob > lb ? ob : lb);
    xattn_status st;
    RETRY_BUSY(st, xattn_buffer_write(p->o, 0, x, ob));
    if (st == XATTN_STATUS_OK)
        RETRY_BUSY(st, xattn_buffer_write(p->l, 0, x, lb));
    free(x);
    return st;
}

/* O and LSE against the reference: relative L2 error of O within the f32 /
 * f16 / bf16 bound (3x the reference's own rounding error + 1e-5), LSE within
 * 1e-5 relative. Returns 1 when they match; *poisoned = 1 when O is untouched
 * poison. */
static int prob_matches(prob *p, int *poisoned, char *why, size_t whyn)
{
    size_t ob = n_o(p) * esz(p->dq), lb = n_l(p) * 4;
    unsigned char *o = malloc(ob), *l = malloc(lb);
    xattn_status st;
    RETRY_BUSY(st, xattn_buffer_read(p->o, 0, o, ob));
    if (st == XATTN_STATUS_OK)
        RETRY_BUSY(st, xattn_buffer_read(p->l, 0, l, lb));
    int ok = st == XATTN_STATUS_OK;
    double e2 = 0, r2 = 0, rnd2 = 0;
    for (size_t i = 0; ok && i < n_o(p); i++) {
        double out = get_elem(o, p->dq, i), ref = p->o_ref[i];
        if (isnan(out)) {
            ok = 0;
            snprintf(why, whyn, "O[%zu] is NaN", i);
            break;
        }
        double rd = (p->dq == F32   ? (double)(float)ref
                     : p->dq == F16 ? xattn_f16_to_f32(xattn_f32_to_f16((float)ref))
                                    : xattn_bf16_to_f32(xattn_f32_to_bf16((float)ref))) -
                    ref;
        e2 += (out - ref) * (out - ref);
        r2 += ref * ref;
        rnd2 += rd * rd;
    }
    if (ok && !(sqrt(e2 / r2) <= 3 * sqrt(rnd2 / r2) + 1e-5)) {
        ok = 0;
        snprintf(why, whyn, "O relative L2 error %.3e", sqrt(e2 / r2));
    }
    for (size_t i = 0; ok && i < n_l(p); i++) {
        float out;
        memcpy(&out, l + 4 * i, 4);
        if (!(fabs(out - p->l_ref[i]) <= 1e-5 * fmax(1.0, fabs(p->l_ref[i])))) {
            ok = 0;
            snprintf(why, whyn, "LSE[%zu] = %g, reference %g", i, (double)out, p->l_ref[i]);
        }
    }
    if (poisoned) {
        *poisoned = 1;
        for (size_t i = 0; i < ob; i++)
            *poisoned &= o[i] == 0xff;
    }
    free(o);
    free(l);
    return ok;
}

/* ---- 1. one context per thread ---------------------------------------------------- */

#define N_OWN 4
#define OWN_ITERS 6

typedef struct own_arg {
    int id;
    int ok_calls;
} own_arg;

static void *own_thread(void *vp)
{
    own_arg *a = vp;
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    EXPECT(st == XATTN_STATUS_OK, "thread %d: context: %s", a->id, xattn_last_error());
    if (st != XATTN_STATUS_OK)
        return NULL;
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1 + a->id % 2);
    static const xattn_dtype dts[3] = {F32, F16, BF16};
    static const xattn_algo algos[4] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV,
                                        XATTN_ALGO_AUTO};
    for (int it = 0; it < OWN_ITERS; it++) {
        prob p;
        uint64_t seed = 1000u * (uint64_t)a->id + (uint64_t)it;
        xattn_dtype dt = dts[(a->id + it) % 3];
        st = prob_make(&p, ctx, 1 + it % 2, 17 + 5 * a->id, 130 + 37 * it, 4, 2, 64, dt, dt,
                       (a->id + it) & 1, seed);
        EXPECT(st == XATTN_STATUS_OK, "thread %d: setup: %s", a->id, xattn_last_error());
        if (st == XATTN_STATUS_OK && prob_poison(&p) == XATTN_STATUS_OK) {
            p.d.algo = algos[(a->id + it) % 4];
            st = xattn_attention(ctx, &p.d, NULL);
            EXPECT(st == XATTN_STATUS_OK, "thread %d: %s: %s", a->id, xattn_algo_name(p.d.algo),
                   xattn_last_error());
            char why[128] = "";
            int ok = st == XATTN_STATUS_OK && prob_matches(&p, NULL, why, sizeof why);
            EXPECT(ok, "thread %d, %s %s: %s", a->id, xattn_algo_name(p.d.algo),
                   xattn_dtype_name(dt), why);
            a->ok_calls += ok;
            /* the error message is per thread: a bad call here, while the
             * other threads succeed, and the next success clears only ours */
            xattn_attn_desc bad = p.d;
            bad.k.shape[3] = 63;
            st = xattn_attention(ctx, &bad, NULL);
            EXPECT(st == XATTN_STATUS_INVALID_SHAPE && strstr(xattn_last_error(), "k.shape[3]"),
                   "thread %d: bad call: %s: \"%s\"", a->id, xattn_status_name(st),
                   xattn_last_error());
            sched_yield();
            EXPECT(strstr(xattn_last_error(), "k.shape[3]") != NULL,
                   "thread %d: the message changed under another thread: \"%s\"", a->id,
                   xattn_last_error());
            st = xattn_attention(ctx, &p.d, NULL);
            EXPECT(st == XATTN_STATUS_OK && xattn_last_error()[0] == '\0',
                   "thread %d: after a success the message is \"%s\"", a->id, xattn_last_error());
        }
        prob_free(&p);
    }
    xattn_ctx_destroy(ctx);
    return NULL;
}

static void test_own_contexts(void)
{
    pthread_t th[N_OWN];
    own_arg args[N_OWN];
    double t0 = now_s();
    for (int i = 0; i < N_OWN; i++) {
        args[i].id = i;
        args[i].ok_calls = 0;
        if (pthread_create(&th[i], NULL, own_thread, &args[i]) != 0) {
            EXPECT(0, "pthread_create");
            th[i] = 0;
        }
    }
    int total = 0;
    for (int i = 0; i < N_OWN; i++) {
        pthread_join(th[i], NULL);
        total += args[i].ok_calls;
    }
    EXPECT(total == N_OWN * OWN_ITERS, "%d of %d calls correct", total, N_OWN * OWN_ITERS);
    printf("  %d threads x %d calls on their own contexts: %d correct (%.2f s)\n", N_OWN, OWN_ITERS,
           total, now_s() - t0);
}

/* ---- 2. a second thread on a busy context ----------------------------------------- */

typedef struct busy_arg {
    prob *big;
    atomic_int started, done;
    xattn_status st;
} busy_arg;

static void *long_call(void *vp)
{
    busy_arg *a = vp;
    atomic_store(&a->started, 1);
    /* the other thread's small call may hold the context for an instant */
    while ((a->st = xattn_attention(a->big->ctx, &a->big->d, NULL)) == XATTN_STATUS_BUSY)
        sched_yield();
    atomic_store(&a->done, 1);
    return NULL;
}

static void test_shared_busy(void)
{
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    if (st != XATTN_STATUS_OK) {
        EXPECT(0, "context: %s", xattn_last_error());
        return;
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1);
    prob big, small;
    /* NAIVE over 2 x 8 x 512 x 2048: a call of a few hundred ms on one thread */
    st = prob_make(&big, ctx, 1, 512, 2048, 8, 2, 64, F32, F32, 0, 7);
    if (st == XATTN_STATUS_OK)
        st = prob_make(&small, ctx, 1, 9, 33, 2, 1, 16, F16, F16, 1, 8);
    if (st != XATTN_STATUS_OK) {
        EXPECT(0, "setup: %s", xattn_last_error());
        prob_free(&big);
        xattn_ctx_destroy(ctx);
        return;
    }
    big.d.algo = XATTN_ALGO_NAIVE;
    small.d.algo = XATTN_ALGO_FLASH;
    xattn_mem_stats m0;
    xattn_ctx_mem_stats(ctx, &m0);

    int busy_seen = 0, ok_seen = 0, busy_other = 0, tries = 0;
    double t_call = 0;
    for (tries = 0; tries < 5 && !busy_seen; tries++) {
        prob_poison(&big);
        prob_poison(&small);
        busy_arg a;
        a.big = &big;
        atomic_init(&a.started, 0);
        atomic_init(&a.done, 0);
        a.st = XATTN_STATUS_INTERNAL;
        pthread_t th;
        double t0 = now_s();
        if (pthread_create(&th, NULL, long_call, &a) != 0) {
            EXPECT(0, "pthread_create");
            break;
        }
        while (!atomic_load(&a.started))
            sched_yield();
        int ok_try = 0;
        /* While the long call runs: every call that uses the context is BUSY
         * (or OK, when it slipped in before or after); none waits or races. */
        int bad_msg = 0, bad_status = 0, bad_query = 0;
        while (!atomic_load(&a.done)) {
            st = xattn_attention(ctx, &small.d, NULL);
            if (st == XATTN_STATUS_BUSY) {
                busy_seen++;
                bad_msg += strstr(xattn_last_error(), "another thread") == NULL;
            } else if (st == XATTN_STATUS_OK) {
                ok_seen++;
                ok_try++;
            } else {
                bad_status++;
                EXPECT(0, "a call on a busy context returned %s: %s", xattn_status_name(st),
                       xattn_last_error());
            }
            unsigned char tmp[64];
            xattn_status s2 = xattn_buffer_read(small.q, 0, tmp, sizeof tmp);
            xattn_status s3 = xattn_buffer_write(small.o, 0, tmp, 0); /* empty: no-op */
            xattn_status s4 = xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1);
            xattn_status s5 = xattn_ctx_sync(ctx);
            xattn_buffer *nb = NULL;
            xattn_status s6 = xattn_buffer_alloc(ctx, 256, &nb);
            xattn_buffer_free(nb);
            xattn_status s7 = xattn_profiler_enable(ctx, 0);
            const xattn_status ss[6] = {s2, s3, s4, s5, s6, s7};
            for (int k = 0; k < 6; k++) {
                if (ss[k] != XATTN_STATUS_OK && ss[k] != XATTN_STATUS_BUSY && bad_status++ == 0)
                    EXPECT(0, "call %d on a busy context returned %s", k, xattn_status_name(ss[k]));
                busy_other += ss[k] == XATTN_STATUS_BUSY;
            }
            /* queries that take nothing still answer */
            xattn_mem_stats ms;
            bad_query += xattn_ctx_mem_stats(ctx, &ms) != XATTN_STATUS_OK;
            bad_query += xattn_attention_check(ctx, &small.d) != XATTN_STATUS_OK;
            struct timespec pause = {0, 100000}; /* 0.1 ms */
            nanosleep(&pause, NULL);
        }
        EXPECT(bad_msg == 0, "%d BUSY refusals without a message that says why", bad_msg);
        EXPECT(bad_status == 0, "%d calls on a busy context returned neither OK nor BUSY",
               bad_status);
        EXPECT(bad_query == 0, "%d queries (mem_stats, attention_check) failed while busy",
               bad_query);
        pthread_join(th, NULL);
        t_call = now_s() - t0;
        EXPECT(a.st == XATTN_STATUS_OK, "the long call: %s", xattn_status_name(a.st));
        char why[128] = "";
        EXPECT(prob_matches(&big, NULL, why, sizeof why),
               "the long call's output was disturbed: %s", why);
        int poisoned = 0;
        int ok = prob_matches(&small, &poisoned, why, sizeof why);
        EXPECT(ok_try ? ok : poisoned, "the small call's output: %s (OK calls %d, untouched %d)",
               why, ok_try, poisoned);
    }
    EXPECT(busy_seen > 0, "no BUSY in %d tries of a %.0f ms call", tries, 1e3 * t_call);
    /* free again: a call now runs */
    st = xattn_attention(ctx, &small.d, NULL);
    EXPECT(st == XATTN_STATUS_OK, "after the long call the context is still busy: %s",
           xattn_status_name(st));
    xattn_mem_stats m1;
    xattn_ctx_mem_stats(ctx, &m1);
    EXPECT(m1.current_bytes == m0.current_bytes, "the allocator holds %llu bytes, %llu before",
           (unsigned long long)m1.current_bytes, (unsigned long long)m0.current_bytes);
    printf("  one context, a %.0f ms NAIVE call: %d attention calls refused BUSY, %d ran, %d "
           "other calls BUSY\n",
           1e3 * t_call, busy_seen, ok_seen, busy_other);
    prob_free(&big);
    prob_free(&small);
    xattn_ctx_destroy(ctx);
}

/* ---- 3. many threads, one context, small calls ------------------------------------ */

#define N_HAMMER 4
#define HAMMER_CALLS 60

typedef struct hammer_arg {
    prob *p;
    int id, ok, busy, wrong;
} hammer_arg;

static void *hammer_thread(void *vp)
{
    hammer_arg *a = vp;
    for (int i = 0; i < HAMMER_CALLS; i++) {
        xattn_status st = xattn_attention(a->p->ctx, &a->p->d, NULL);
        if (st == XATTN_STATUS_BUSY) {
            a->busy++;
            continue;
        }
        if (st != XATTN_STATUS_OK) {
            a->wrong++;
            EXPECT(0, "hammer %d: %s: %s", a->id, xattn_status_name(st), xattn_last_error());
            continue;
        }
        a->ok++;
        char why[128] = "";
        if (!prob_matches(a->p, NULL, why, sizeof why)) {
            a->wrong++;
            EXPECT(0, "hammer %d: %s", a->id, why);
        }
    }
    return NULL;
}

static void test_hammer(void)
{
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        EXPECT(0, "context: %s", xattn_last_error());
        return;
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1);
    prob ps[N_HAMMER];
    hammer_arg args[N_HAMMER];
    pthread_t th[N_HAMMER];
    int ready = 1;
    for (int i = 0; i < N_HAMMER; i++) {
        static const xattn_algo algos[4] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV,
                                            XATTN_ALGO_AUTO};
        xattn_status st = prob_make(&ps[i], ctx, 1, 8 + i, 70 + 20 * i, 2, 1, 32, i & 1 ? F16 : F32,
                                    i & 1 ? F16 : F32, i & 1, 100u + (uint64_t)i);
        ps[i].d.algo = algos[i];
        EXPECT(st == XATTN_STATUS_OK, "setup %d: %s", i, xattn_last_error());
        ready &= st == XATTN_STATUS_OK;
        args[i] = (hammer_arg){&ps[i], i, 0, 0, 0};
    }
    int ok = 0, busy = 0, wrong = 0;
    if (ready) {
        for (int i = 0; i < N_HAMMER; i++)
            if (pthread_create(&th[i], NULL, hammer_thread, &args[i]) != 0)
                EXPECT(0, "pthread_create");
        for (int i = 0; i < N_HAMMER; i++) {
            pthread_join(th[i], NULL);
            ok += args[i].ok;
            busy += args[i].busy;
            wrong += args[i].wrong;
        }
    }
    EXPECT(wrong == 0 && ok > 0, "%d calls correct, %d wrong", ok, wrong);
    EXPECT(ok + busy == N_HAMMER * HAMMER_CALLS || !ready, "%d + %d calls of %d", ok, busy,
           N_HAMMER * HAMMER_CALLS);
    printf("  %d threads x %d calls on one context: %d ran (all correct), %d refused BUSY\n",
           N_HAMMER, HAMMER_CALLS, ok, busy);
    for (int i = 0; i < N_HAMMER; i++)
        prob_free(&ps[i]);
    xattn_ctx_destroy(ctx);
}

/* ---- global state under threads (run under ThreadSanitizer in CI) ---------- */

#define LOG_MAGIC 0x5a17u
#define LOG_ROUNDS 2000

static atomic_int g_log_calls, g_log_bad;
static atomic_int g_log_stop;

static void log_check(xattn_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    atomic_fetch_add(&g_log_calls, 1);
    if (!user || *(const unsigned *)user != LOG_MAGIC)
        atomic_fetch_add(&g_log_bad, 1);
}

static atomic_int g_log_rounds;

/* Registers and unregisters until the callback has run LOG_ROUNDS times (so
 * that the race was really run), or a bound on the rounds is reached. */
static void *log_setter(void *vp)
{
    unsigned *x = vp;
    int i = 0;
    for (; i < 1000000 && (i < LOG_ROUNDS || atomic_load(&g_log_calls) < LOG_ROUNDS); i++) {
        xattn_set_log_callback(log_check, x, XATTN_LOG_DEBUG);
        sched_yield();
        xattn_set_log_callback(NULL, NULL, XATTN_LOG_ERROR);
    }
    atomic_store(&g_log_rounds, i);
    atomic_store(&g_log_stop, 1);
    return NULL;
}

static void *log_caller(void *vp)
{
    (void)vp;
    while (!atomic_load(&g_log_stop))
        xattn_attention(NULL, NULL, NULL); /* an error: logged */
    return NULL;
}

/* One thread registers and unregisters a callback while others log: the
 * callback always gets its own user pointer (it got NULL before the fix). */
static void test_log_callback_race(void)
{
    unsigned *x = malloc(sizeof *x);
    if (!x) {
        EXPECT(0, "out of memory");
        return;
    }
    *x = LOG_MAGIC;
    pthread_t set, call[2];
    atomic_store(&g_log_stop, 0);
    int made = pthread_create(&set, NULL, log_setter, x) == 0;
    for (int i = 0; i < 2; i++)
        made &= pthread_create(&call[i], NULL, log_caller, NULL) == 0;
    EXPECT(made, "pthread_create");
    pthread_join(set, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(call[i], NULL);
    /* Unregistered: the pointer may go, and the callback must not run again. */
    *x = 0;
    free(x);
    const int before = atomic_load(&g_log_calls);
    xattn_attention(NULL, NULL, NULL);
    EXPECT(atomic_load(&g_log_calls) == before, "the callback ran after it was unregistered");
    EXPECT(atomic_load(&g_log_bad) == 0, "%d of %d callbacks got another registration's pointer",
           atomic_load(&g_log_bad), atomic_load(&g_log_calls));
    EXPECT(atomic_load(&g_log_calls) >= LOG_ROUNDS, "only %d callbacks ran in %d registrations",
           atomic_load(&g_log_calls), atomic_load(&g_log_rounds));
    printf("  %d registrations against two logging threads: %d callbacks, %d with a wrong "
           "pointer\n",
           atomic_load(&g_log_rounds), atomic_load(&g_log_calls), atomic_load(&g_log_bad));
}

typedef struct opt_arg {
    prob *p;
    atomic_int *stop;
    int bad;
} opt_arg;

static void *opt_setter(void *vp)
{
    opt_arg *a = vp;
    for (int i = 0; i < 400; i++) {
        xattn_status st =
            xattn_ctx_set_option(a->p->ctx, XATTN_OPT_MEMORY_LIMIT, i & 1 ? 0 : ((int64_t)1 << 40));
        st = st == XATTN_STATUS_OK ? xattn_profiler_enable(a->p->ctx, i & 1) : st;
        if (st != XATTN_STATUS_OK && st != XATTN_STATUS_BUSY)
            a->bad++;
    }
    atomic_store(a->stop, 1);
    return NULL;
}

static void *opt_reader(void *vp)
{
    opt_arg *a = vp;
    while (!atomic_load(a->stop)) {
        int64_t v = -1;
        xattn_mem_stats ms;
        if (xattn_ctx_get_option(a->p->ctx, XATTN_OPT_MEMORY_LIMIT, &v) != XATTN_STATUS_OK ||
            (v != 0 && v != ((int64_t)1 << 40)))
            a->bad++;
        if (xattn_ctx_mem_stats(a->p->ctx, &ms) != XATTN_STATUS_OK ||
            (ms.limit_bytes != 0 && ms.limit_bytes != (1ull << 40)))
            a->bad++;
    }
    return NULL;
}

static void *opt_runner(void *vp)
{
    opt_arg *a = vp;
    while (!atomic_load(a->stop)) {
        xattn_status st = xattn_attention(a->p->ctx, &a->p->d, NULL);
        if (st != XATTN_STATUS_OK && st != XATTN_STATUS_BUSY)
            a->bad++;
    }
    return NULL;
}

/* Options and profiling switched while another thread reads them and a third
 * runs calls: every read sees a value that was set, every call is OK or BUSY
 * (and ThreadSanitizer sees no race). */
static void test_options_race(void)
{
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) != XATTN_STATUS_OK) {
        EXPECT(0, "context: %s", xattn_last_error());
        return;
    }
    xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, 1);
    prob p;
    if (prob_make(&p, ctx, 1, 4, 64, 2, 1, 32, F32, F32, 0, 7) != XATTN_STATUS_OK) {
        EXPECT(0, "setup: %s", xattn_last_error());
        xattn_ctx_destroy(ctx);
        return;
    }
    atomic_int stop = 0;
    opt_arg args[3] = {{&p, &stop, 0}, {&p, &stop, 0}, {&p, &stop, 0}};
    void *(*fns[3])(void *) = {opt_setter, opt_reader, opt_runner};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&th[i], NULL, fns[i], &args[i]) != 0) {
            EXPECT(0, "pthread_create");
            atomic_store(&stop, 1);
        }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    EXPECT(args[0].bad + args[1].bad + args[2].bad == 0, "setter %d, reader %d, runner %d bad",
           args[0].bad, args[1].bad, args[2].bad);
    prob_free(&p);
    xattn_ctx_destroy(ctx);
}

static void *ceil_thread(void *vp)
{
    xattn_ctx *ctx = vp;
    xattn_ceilings c;
    if (xattn_ceilings_measure(ctx, 1, &c) != XATTN_STATUS_OK || !(c.fma_f32_gflops > 0))
        return (void *)1;
    return NULL;
}

/* Two contexts measure their ceilings at the same time (quick mode). */
static void test_ceilings_race(void)
{
    xattn_ctx *ctx[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx[i]) != XATTN_STATUS_OK) {
            EXPECT(0, "context: %s", xattn_last_error());
            xattn_ctx_destroy(ctx[0]);
            return;
        }
    pthread_t th[2];
    void *ret[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, ceil_thread, ctx[i]) != 0)
            EXPECT(0, "pthread_create");
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], &ret[i]);
    EXPECT(ret[0] == NULL && ret[1] == NULL, "a concurrent ceilings measurement failed");
    for (int i = 0; i < 2; i++)
        xattn_ctx_destroy(ctx[i]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("one context per thread\n");
    test_own_contexts();
    printf("one context, two threads\n");
    test_shared_busy();
    printf("one context, many threads\n");
    test_hammer();
    printf("the log callback changed while threads log\n");
    test_log_callback_race();
    printf("options and profiling switched during calls\n");
    test_options_race();
    printf("two contexts measure ceilings at once\n");
    test_ceilings_race();
    return xattn_test_summary();
}
