/*
 * The common preamble of the C test programs: the EXPECT family and its
 * counters, the closing line "N passed, N failed, N skipped" that every test
 * program ends with, random inputs from a seed, scratch folders, and a small
 * attention problem on a context (contiguous BSHD tensors filled with random
 * values). Header-only: each test program is one translation unit and
 * includes it once.
 *
 * The counters are atomic and a failure's lines are printed under stdout's
 * lock, so that EXPECT may be called from several threads (test_concurrency).
 */
#ifndef XATTN_TEST_H
#define XATTN_TEST_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scratch-folder helpers and the locking of stdout need POSIX; a test
 * program asks for it (_POSIX_C_SOURCE 200809L or _GNU_SOURCE) before its
 * first include, and stdio.h above has then defined _POSIX_C_SOURCE. */
#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200809L
#define XATTN_TEST_POSIX 1
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#define XATTN_TEST_LOCK_STDOUT() flockfile(stdout)
#define XATTN_TEST_UNLOCK_STDOUT() funlockfile(stdout)
#else
#define XATTN_TEST_LOCK_STDOUT() ((void)0)
#define XATTN_TEST_UNLOCK_STDOUT() ((void)0)
#endif

#include "xattn.h"

static atomic_int g_passed, g_failed, g_skipped;

/* Counts a check; on failure prints the file, the line, the condition and a
 * printf-style message. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (cond) {                                                                                \
            g_passed++;                                                                            \
        } else {                                                                                   \
            g_failed++;                                                                            \
            XATTN_TEST_LOCK_STDOUT();                                                              \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            XATTN_TEST_UNLOCK_STDOUT();                                                            \
        }                                                                                          \
    } while (0)

/* A library call that must succeed: on failure, its status and message. */
#define EXPECT_OK(expr)                                                                            \
    do {                                                                                           \
        xattn_status st_ = (expr);                                                                 \
        EXPECT(st_ == XATTN_STATUS_OK, "%s returned %s: %s", #expr, xattn_status_name(st_),        \
               xattn_last_error());                                                                \
    } while (0)

/* Counts a check that could not run here, and says why. */
#define SKIP(...)                                                                                  \
    do {                                                                                           \
        g_skipped++;                                                                               \
        printf("SKIP ");                                                                           \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* Prints the closing line and returns the program's exit status (1 when a
 * check failed). */
static inline int xattn_test_summary(void)
{
    int failed = atomic_load(&g_failed);
    printf("%d passed, %d failed, %d skipped\n", atomic_load(&g_passed), failed,
           atomic_load(&g_skipped));
    return failed ? 1 : 0;
}

/* ---- random inputs ---------------------------------------------------------- */

/* splitmix64: the next 64 random bits of the stream *s. */
static inline uint64_t xattn_test_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1], never within 0.01 of 0 (such a draw becomes +-0.5). */
static inline float xattn_test_rng_val(uint64_t *s)
{
    double x = 2.0 * ((double)(xattn_test_rng_next(s) >> 11) * 0x1.0p-53) - 1.0;
    if (fabs(x) < 0.01)
        x = x < 0 ? -0.5 : 0.5;
    return (float)x;
}

/* ---- scratch folders ----------------------------------------------------------- */

#ifdef XATTN_TEST_POSIX

/* A fresh private folder $TMPDIR/xattn-TAG-XXXXXX (or /tmp); out[0] is '\0'
 * when it cannot be made. */
static inline void xattn_test_scratch_dir(const char *tag, char *out, size_t n)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/xattn-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(out))
        out[0] = '\0';
}

/* Removes a file or a folder and everything under it; links are removed, not
 * followed, and folders a test made unreadable are opened up first. */
static inline void xattn_test_rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        remove(path);
        return;
    }
    chmod(path, 0700);
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4096];
            int k = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (k > 0 && (size_t)k < sizeof sub)
                xattn_test_rm_tree(sub);
        }
        closedir(dir);
    }
    rmdir(path);
}
#endif /* XATTN_TEST_POSIX */

/* ---- a small problem on a context --------------------------------------------- */

/* q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv] and o [B, Sq, Hq, Dv]
 * in f32, contiguous BSHD, with an optional f32 LSE [B, Hq, Sq]. The inputs
 * hold random values from the seed; the host copies stay in hq, hk, hv (the
 * logical BSHD order) for the test's own expectations. */
typedef struct xattn_test_problem {
    xattn_ctx *ctx;
    int64_t B, Sq, Sk, Hq, Hkv, D, Dv;
    float *hq, *hk, *hv;
    xattn_buffer *q, *k, *v, *o, *lse;
    xattn_attn_desc desc;
    size_t nq, nk, nv, no, nl; /* elements of each tensor */
} xattn_test_problem;

static inline void xattn_test_problem_free(xattn_test_problem *p)
{
    xattn_buffer *bufs[5] = {p->q, p->k, p->v, p->o, p->lse};
    for (int i = 0; i < 5; i++)
        xattn_buffer_free(bufs[i]);
    free(p->hq);
    free(p->hk);
    free(p->hv);
    memset(p, 0, sizeof *p);
}

static inline xattn_status xattn_test__upload(xattn_ctx *ctx, const float *x, size_t n,
                                              xattn_buffer **out)
{
    xattn_status st = xattn_buffer_alloc(ctx, (n ? n : 1) * sizeof(float), out);
    if (st == XATTN_STATUS_OK && n)
        st = xattn_buffer_write(*out, 0, x, n * sizeof(float));
    return st;
}

/* Makes the problem on ctx (a valid descriptor in p->desc, non-causal, the
 * default scale). Returns the first failing status (p is then freed). */
static inline xattn_status xattn_test_problem_make(xattn_test_problem *p, xattn_ctx *ctx, int64_t B,
                                                   int64_t Sq, int64_t Sk, int64_t Hq, int64_t Hkv,
                                                   int64_t D, int64_t Dv, int lse, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->B = B, p->Sq = Sq, p->Sk = Sk, p->Hq = Hq, p->Hkv = Hkv, p->D = D, p->Dv = Dv;
    p->nq = (size_t)(B * Sq * Hq * D);
    p->nk = (size_t)(B * Sk * Hkv * D);
    p->nv = (size_t)(B * Sk * Hkv * Dv);
    p->no = (size_t)(B * Sq * Hq * Dv);
    p->nl = (size_t)(B * Hq * Sq);
    p->hq = malloc((p->nq + 1) * sizeof(float));
    p->hk = malloc((p->nk + 1) * sizeof(float));
    p->hv = malloc((p->nv + 1) * sizeof(float));
    if (!p->hq || !p->hk || !p->hv) {
        xattn_test_problem_free(p);
        return XATTN_STATUS_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < p->nq; i++)
        p->hq[i] = xattn_test_rng_val(&seed);
    for (size_t i = 0; i < p->nk; i++)
        p->hk[i] = xattn_test_rng_val(&seed);
    for (size_t i = 0; i < p->nv; i++)
        p->hv[i] = xattn_test_rng_val(&seed);
    xattn_status st = xattn_test__upload(ctx, p->hq, p->nq, &p->q);
    if (st == XATTN_STATUS_OK)
        st = xattn_test__upload(ctx, p->hk, p->nk, &p->k);
    if (st == XATTN_STATUS_OK)
        st = xattn_test__upload(ctx, p->hv, p->nv, &p->v);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_alloc(ctx, (p->no ? p->no : 1) * sizeof(float), &p->o);
    if (st == XATTN_STATUS_OK && lse)
        st = xattn_buffer_alloc(ctx, (p->nl ? p->nl : 1) * sizeof(float), &p->lse);
    if (st != XATTN_STATUS_OK) {
        xattn_test_problem_free(p);
        return st;
    }
    xattn_attn_desc *d = &p->desc;
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(p->q, 0, XATTN_DTYPE_F32, B, Sq, Hq, D);
    d->k = xattn_tensor_bshd(p->k, 0, XATTN_DTYPE_F32, B, Sk, Hkv, D);
    d->v = xattn_tensor_bshd(p->v, 0, XATTN_DTYPE_F32, B, Sk, Hkv, Dv);
    d->o = xattn_tensor_bshd(p->o, 0, XATTN_DTYPE_F32, B, Sq, Hq, Dv);
    if (lse) {
        xattn_tensor l = {p->lse, 0, XATTN_DTYPE_F32, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}};
        d->lse = l;
    }
    return XATTN_STATUS_OK;
}

#endif /* XATTN_TEST_H */
