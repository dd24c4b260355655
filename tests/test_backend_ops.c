/*
 * test_backend_ops: the cross-backend harness (in the style of ggml's
 * test-backend-ops). Every case of the list below runs on every available
 * backend and every algorithm (NAIVE, FLASH, SPLITKV, AUTO) and is compared
 * with the double-precision reference (xattn_reference_attention).
 *
 * Inputs are fresh random data from a seed printed at start (-s or
 * XATTN_TEST_SEED to reproduce); each case derives its own stream from the seed
 * and its name, so a case rerun alone sees the same data. Every byte of an
 * input buffer outside its view is NaN (a kernel reading a wrong address
 * produces NaN). O and LSE buffers are filled with a NaN "poison" pattern
 * before every run: an element the kernel should write and did not still holds
 * it, and an element outside the rows the kernel may write must still hold it.
 *
 * Acceptance (the constants are below; tests/README.md says why):
 *   O: e = ||out - ref||_2 / ||ref||_2 and m = max |out - ref| over non-NaN
 *      elements; r and mr: the same figures for the reference rounded to the
 *      output dtype (the best any kernel can store). Pass when
 *        e <= 3 r + 1e-5  and  m <= 3 mr + 1e-4.
 *      For f32 outputs r is ~3e-8, so this is "relative L2 < 1e-5"; for f16 and
 *      bf16 a kernel may lose about 3x what the final rounding must (room for
 *      GPU kernels that round P to f16/bf16 before the PV product).
 *      f16/bf16 outputs must also round to nearest: the mean signed error, in
 *      ulps, over >= 256 elements must stay within +-0.2 (truncation: -0.5).
 *      NaN positions must match exactly; where the reference is exactly 0
 *      (padding and fully masked rows) the output must be exactly 0.
 *   LSE (f32): |out - ref| <= 5e-5 * max(1, |ref|); -inf and NaN must match.
 *   Rows the kernel must not write (packed batches: tokens past the last
 *   sequence) and every element outside the O / LSE views keep the poison.
 *
 * Usage: test_backend_ops [-b backend] [-a algo] [-c case-substring] [-s seed]
 *                         [-l] [--quick] [-v]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_reference.h"

/* ---- acceptance constants ---------------------------------------------- */

#define TOL_REL_FACTOR 3.0 /* kernel error may be this many times the rounding error */
#define TOL_REL_FLOOR 1e-5 /* ... plus this (the f32 bound) */
#define TOL_ABS_FACTOR 3.0
#define TOL_ABS_FLOOR 1e-4
#define TOL_LSE 5e-5 /* LSE: relative to max(1, |ref|); worst seen 4.7e-6 */
/* f16/bf16 outputs: the mean signed error, in ulps of the dtype, of at least
 * BIAS_MIN_COUNT elements must stay within TOL_ROUND_BIAS: stores that round to
 * nearest even give ~0 (+-0.3/sqrt(n)), truncation -0.5. */
#define TOL_ROUND_BIAS 0.2
#define BIAS_MIN_COUNT 256

/* Random configurations added to the hand-written list. */
#define N_RANDOM_CASES 120

/* ---- random numbers ------------------------------------------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unif(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static int rng_int(rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* Roughly standard normal (Irwin-Hall of 4), never within 0.01 of zero. */
static double rng_normalish(rng *r)
{
    for (;;) {
        double x = (rng_unif(r) + rng_unif(r) + rng_unif(r) + rng_unif(r) - 2.0) * sqrt(3.0);
        if (fabs(x) >= 0.01)
            return x;
    }
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ---- the case list ------------------------------------------------------- */

enum { L_BSHD, L_BHSD, L_STRIDED, L_DMAJOR };
static const char *const layout_names[] = {"bshd", "bhsd", "strided", "dmajor"};
enum { BIAS_NONE, BIAS_11, BIAS_B1, BIAS_1H, BIAS_BH };
static const char *const bias_names[] = {"", "11", "b1", "1h", "bh"};
enum { LENS_FULL, LENS_PADDED, LENS_VARLEN };
enum { NAN_NONE, NAN_Q, NAN_K, NAN_V, NAN_PAD };
static const char *const nan_names[] = {"", "q", "k", "v", "pad"};
/* Structured inputs whose scores reach the top of f32 (fill_big). */
enum { BIG_NONE, BIG_DOT, BIG_CAPDOT, BIG_CANCEL };
static const char *const big_names[] = {"", "dot", "capdot", "cancel"};

typedef struct tcase {
    xattn_dtype dq, dkv;
    int B, Hq, Hkv, Sq, Sk, D, Dv; /* Dv 0 = D; varlen: Sq/Sk are the longest sequences */
    int layout;
    int causal, align; /* align: XATTN_ALIGN_* */
    int wl, wr;        /* window; -1 = unbounded */
    int bias;          /* BIAS_* */
    xattn_dtype bias_dt;
    int bias_ninf; /* 1: scattered -inf entries, 2: also some whole rows of -inf */
    int alibi;
    float softcap;
    int lens; /* LENS_* */
    int lse;
    float scale;  /* 0 = default */
    int nan_in;   /* NAN_* */
    int nan_last; /* the NaN (K or V) at the sequence's last key, not a random one */
    int splits;   /* num_splits for SPLITKV (0 = automatic) */
    int big;      /* BIG_*: structured q, k (and v) instead of random ones (fill_big) */
    int bigexp;   /* BIG_CANCEL: the q entries are +-2^bigexp */
    int sinks;    /* attention sinks: 1 = a few logits near the scores' (one head -inf),
                   * 2 = large ones (30 and up) that dominate the denominator */
    int page;     /* paged KV cache: tokens per page (0 = contiguous K/V) */
    int pagelay;  /* page layout: 0 = [pages, page, Hkv, D], 1 = [pages, Hkv, page, D],
                   * 2 = K in the first and V in the second */
    int append;   /* tokens per sequence given as k_new/v_new (append, then attend) */
    int kvscale;  /* fp8 K/V: 1 = per-head k_scale/v_scale, 2 = also values over the format's
                   * whole range (subnormals to the largest) under small scales */
    int q8edge;   /* q8_0 K/V: blocks at the format's edges (d 0, f16-subnormal d, qs -128
                   * and 127) written over the quantized values */
    int quick;    /* part of the --quick matrix */
    char name[240];
} tcase;

#define F32 XATTN_DTYPE_F32
#define F16 XATTN_DTYPE_F16
#define BF16 XATTN_DTYPE_BF16
#define FP8E4 XATTN_DTYPE_FP8_E4M3
#define FP8E5 XATTN_DTYPE_FP8_E5M2
#define Q8 XATTN_DTYPE_Q8_0
#define TL XATTN_ALIGN_TOP_LEFT
#define BR XATTN_ALIGN_BOTTOM_RIGHT

static tcase *g_cases;
static int g_ncases, g_capcases;

static void case_name(tcase *c)
{
    char *p = c->name;
    size_t n = sizeof c->name;
    int w = snprintf(p, n, "%s-%s_B%d_H%dx%d_S%dx%d_D%dx%d_%s", xattn_dtype_name(c->dq),
                     xattn_dtype_name(c->dkv), c->B, c->Hq, c->Hkv, c->Sq, c->Sk, c->D, c->Dv,
                     layout_names[c->layout]);
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (w > 0 && (size_t)w < n)                                                                \
            w += snprintf(p + w, n - (size_t)w, __VA_ARGS__);                                      \
    } while (0)
    if (c->causal)
        APPEND("_causal-%s", c->align == TL ? "tl" : "br");
    else if (c->align == TL)
        APPEND("_tl");
    if (c->wl >= 0 || c->wr >= 0)
        APPEND("_win%d,%d", c->wl, c->wr);
    if (c->bias)
        APPEND("_bias-%s-%s%s", bias_names[c->bias], xattn_dtype_name(c->bias_dt),
               c->bias_ninf == 2 ? "-infrows"
               : c->bias_ninf    ? "-inf"
                                 : "");
    if (c->alibi)
        APPEND("_alibi");
    if (c->softcap > 0)
        APPEND("_cap%g", (double)c->softcap);
    if (c->lens == LENS_PADDED)
        APPEND("_padded");
    if (c->lens == LENS_VARLEN)
        APPEND("_varlen");
    if (c->lse)
        APPEND("_lse");
    if (c->scale != 0)
        APPEND("_scale%g", (double)c->scale);
    if (c->nan_in)
        APPEND("_nan-%s%s", nan_names[c->nan_in], c->nan_last ? "-last" : "");
    if (c->splits)
        APPEND("_splits%d", c->splits);
    if (c->big)
        APPEND("_big-%s", big_names[c->big]);
    if (c->bigexp)
        APPEND("-qexp%d", c->bigexp);
    if (c->sinks)
        APPEND("_sinks%d", c->sinks);
    if (c->page)
        APPEND("_paged%d%s", c->page, c->pagelay == 2 ? "-mixed" : c->pagelay == 1 ? "-hsd" : "");
    if (c->append)
        APPEND("_append%d", c->append);
    if (c->kvscale)
        APPEND("_kvscale%s", c->kvscale == 2 ? "-range" : "");
    if (c->q8edge)
        APPEND("_q8edge");
#undef APPEND
}

static void add_case(tcase c)
{
    if (c.Dv == 0)
        c.Dv = c.D;
    case_name(&c);
    for (int i = 0; i < g_ncases; i++)
        if (!strcmp(g_cases[i].name, c.name))
            return; /* the same case built twice by two loops: keep one */
    if (g_ncases == g_capcases) {
        g_capcases = g_capcases ? 2 * g_capcases : 256;
        g_cases = realloc(g_cases, (size_t)g_capcases * sizeof *g_cases);
        if (!g_cases) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    g_cases[g_ncases++] = c;
}

/* Designated initializers after a set of defaults: later fields override. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
#define CASE(...)                                                                                  \
    add_case((tcase){.dq = F32,                                                                    \
                     .dkv = F32,                                                                   \
                     .B = 2,                                                                       \
                     .Hq = 4,                                                                      \
                     .Hkv = 2,                                                                     \
                     .Sq = 33,                                                                     \
                     .Sk = 47,                                                                     \
                     .D = 64,                                                                      \
                     .layout = L_BSHD,                                                             \
                     .align = BR,                                                                  \
                     .wl = -1,                                                                     \
                     .wr = -1,                                                                     \
                     .bias_dt = F32,                                                               \
                     .lse = 1,                                                                     \
                     __VA_ARGS__})

static void build_cases(void)
{
    static const int dims[] = {1, 3, 64, 80, 96, 128, 200, 256};
    static const xattn_dtype dts[][2] = {{F32, F32},  {F16, F16}, {BF16, BF16}, {F32, F16},
                                         {F32, BF16}, {F16, F32}, {BF16, F16},  {F16, BF16}};

    /* Head dims, each dtype pair, both plain layouts; causal on half. */
    for (int i = 0; i < 8; i++) {
        int D = dims[i];
        CASE(.D = D, .quick = (D == 3 || D == 128));
        CASE(.D = D, .dq = F16, .dkv = F16, .layout = L_BHSD, .causal = 1,
             .quick = (D == 64 || D == 256));
        CASE(.D = D, .dq = BF16, .dkv = BF16, .causal = 1, .align = TL, .quick = (D == 80));
    }
    for (int i = 0; i < 8; i++) {
        CASE(.dq = dts[i][0], .dkv = dts[i][1], .D = 96, .Sq = 20, .Sk = 70, .causal = 1,
             .quick = (i == 3 || i == 6));
        CASE(.dq = dts[i][0], .dkv = dts[i][1], .D = 128, .B = 1, .Hq = 2, .Hkv = 1, .Sq = 64,
             .Sk = 64, .layout = L_BHSD);
    }

    /* Dv != D (MLA-like and odd pairs). */
    static const int dpairs[][2] = {{64, 128}, {128, 64}, {3, 80},    {200, 16},
                                    {256, 1},  {1, 256},  {192, 128}, {96, 200}};
    for (int i = 0; i < 8; i++) {
        CASE(.D = dpairs[i][0], .Dv = dpairs[i][1], .causal = i & 1, .quick = (i == 0));
        CASE(.D = dpairs[i][0], .Dv = dpairs[i][1], .dq = F16, .dkv = F16, .layout = L_BHSD,
             .Sq = 17, .Sk = 29);
    }

    /* Sq != Sk, both alignments, with and without causal. */
    static const int sqsk[][2] = {{13, 40}, {40, 13}, {32, 32}, {1, 37}, {37, 1}, {65, 64}};
    for (int i = 0; i < 6; i++)
        for (int al = 0; al < 2; al++) {
            CASE(.Sq = sqsk[i][0], .Sk = sqsk[i][1], .causal = 1, .align = al, .quick = (i == 1));
            CASE(.Sq = sqsk[i][0], .Sk = sqsk[i][1], .causal = 1, .align = al, .dq = F16,
                 .dkv = F16, .D = 80, .lse = 0);
            CASE(.Sq = sqsk[i][0], .Sk = sqsk[i][1], .alibi = 1, .align = al);
        }

    /* Windows: left only, right only, both, a diagonal, with and without causal. */
    static const int wins[][2] = {{8, -1}, {-1, 4}, {4, 2}, {0, 0}, {16, 16}, {0, -1}};
    for (int i = 0; i < 6; i++)
        for (int al = 0; al < 2; al++) {
            CASE(.Sq = 40, .Sk = 56, .wl = wins[i][0], .wr = wins[i][1], .align = al,
                 .quick = (i == 2 && al == 1));
            CASE(.Sq = 56, .Sk = 40, .wl = wins[i][0], .wr = wins[i][1], .align = al, .causal = 1,
                 .dq = BF16, .dkv = BF16);
        }
    /* A window that excludes every key of many rows (fully masked rows). */
    CASE(.Sq = 40, .Sk = 10, .wl = 0, .wr = 0, .align = TL, .quick = 1);
    CASE(.Sq = 40, .Sk = 10, .wl = 2, .wr = -1, .align = TL, .dq = F16, .dkv = F16);
    CASE(.Sq = 30, .Sk = 12, .causal = 1, .align = BR, .quick = 1); /* rows before the keys */

    /* Bias: every broadcast form, f32 and f16, scattered -inf, rows of -inf. */
    for (int f = BIAS_11; f <= BIAS_BH; f++)
        for (int bd = 0; bd < 2; bd++) {
            xattn_dtype bdt = bd ? F16 : F32;
            CASE(.bias = f, .bias_dt = bdt, .bias_ninf = 1, .quick = (f == BIAS_BH));
            CASE(.bias = f, .bias_dt = bdt, .bias_ninf = 2, .causal = 1, .dq = F16, .dkv = F16,
                 .layout = L_BHSD, .quick = (f == BIAS_B1 && bd));
            CASE(.bias = f, .bias_dt = bdt, .Sq = 19, .Sk = 31, .Hq = 6, .Hkv = 3, .dq = BF16,
                 .dkv = BF16, .D = 128);
        }
    CASE(.bias = BIAS_BH, .bias_ninf = 2, .lens = LENS_PADDED, .B = 4, .causal = 1);
    CASE(.bias = BIAS_B1, .bias_dt = F16, .lens = LENS_VARLEN, .B = 4, .causal = 1, .quick = 1);

    /* ALiBi, softcap and their combinations. */
    CASE(.alibi = 1, .causal = 1, .quick = 1);
    CASE(.alibi = 1, .Hq = 8, .Hkv = 8, .dq = F16, .dkv = F16, .Sq = 64, .Sk = 64);
    CASE(.alibi = 1, .causal = 1, .align = TL, .Sq = 48, .Sk = 20, .dq = BF16, .dkv = BF16);
    CASE(.softcap = 5.0f, .scale = 0.5f, .quick = 1);
    CASE(.softcap = 30.0f, .causal = 1, .dq = F16, .dkv = F16, .D = 256);
    CASE(.softcap = 2.0f, .alibi = 1, .bias = BIAS_1H, .bias_ninf = 1, .causal = 1, .wl = 9,
         .dq = BF16, .dkv = BF16, .scale = 0.3f);
    CASE(.softcap = 5.0f, .alibi = 1, .bias = BIAS_BH, .bias_dt = F16, .lens = LENS_PADDED, .B = 3,
         .wl = 5, .wr = 3);

    /* GQA ratios 1/2/4/8 and MQA. */
    static const int heads[][2] = {{8, 8}, {8, 4}, {8, 2}, {8, 1}, {16, 2}, {6, 3}, {3, 1}};
    for (int i = 0; i < 7; i++) {
        CASE(.Hq = heads[i][0], .Hkv = heads[i][1], .Sq = 24, .Sk = 40, .causal = 1,
             .quick = (i == 3));
        CASE(.Hq = heads[i][0], .Hkv = heads[i][1], .Sq = 24, .Sk = 40, .dq = F16, .dkv = F16,
             .layout = L_BHSD, .D = 128);
    }

    /* Padded batches (per-sequence lengths, zero-length sequences). */
    CASE(.lens = LENS_PADDED, .B = 4, .quick = 1);
    CASE(.lens = LENS_PADDED, .B = 5, .causal = 1, .dq = F16, .dkv = F16, .quick = 1);
    CASE(.lens = LENS_PADDED, .B = 4, .causal = 1, .align = TL, .dq = BF16, .dkv = BF16,
         .layout = L_BHSD);
    CASE(.lens = LENS_PADDED, .B = 4, .wl = 6, .wr = 0, .alibi = 1);
    CASE(.lens = LENS_PADDED, .B = 6, .Sq = 70, .Sk = 20, .causal = 1, .D = 128);
    CASE(.lens = LENS_PADDED, .B = 4, .nan_in = NAN_PAD, .causal = 1, .quick = 1);
    CASE(.lens = LENS_PADDED, .B = 4, .nan_in = NAN_PAD, .dq = F16, .dkv = F16, .layout = L_BHSD,
         .bias = BIAS_BH);

    /* Packed variable-length batches. */
    CASE(.lens = LENS_VARLEN, .B = 4, .quick = 1);
    CASE(.lens = LENS_VARLEN, .B = 5, .causal = 1, .dq = F16, .dkv = F16);
    CASE(.lens = LENS_VARLEN, .B = 4, .causal = 1, .align = TL, .dq = BF16, .dkv = BF16,
         .layout = L_BHSD, .Hq = 8, .Hkv = 1);
    CASE(.lens = LENS_VARLEN, .B = 3, .wl = 7, .wr = 7, .alibi = 1, .lse = 1);
    CASE(.lens = LENS_VARLEN, .B = 4, .nan_in = NAN_PAD, .causal = 1, .quick = 1);
    CASE(.lens = LENS_VARLEN, .B = 1, .Sq = 64, .Sk = 64, .D = 128, .dq = F16, .dkv = F16);
    CASE(.lens = LENS_VARLEN, .B = 0);                   /* no sequences: nothing is written */
    CASE(.lens = LENS_VARLEN, .B = 3, .Sq = 0, .Sk = 9); /* every sequence empty */

    /* Layouts with gaps, offsets and a head dim that is not innermost. */
    CASE(.layout = L_STRIDED, .quick = 1);
    CASE(.layout = L_STRIDED, .dq = F16, .dkv = BF16, .causal = 1, .lens = LENS_PADDED, .B = 3);
    CASE(.layout = L_STRIDED, .lens = LENS_VARLEN, .B = 3, .bias = BIAS_BH);
    CASE(.layout = L_DMAJOR, .D = 32, .Sq = 16, .Sk = 24);
    CASE(.layout = L_DMAJOR, .dq = BF16, .dkv = BF16, .causal = 1, .D = 80);

    /* Scales. */
    CASE(.scale = 0.3f);
    CASE(.scale = 1.0f, .dq = F16, .dkv = F16, .D = 16);
    CASE(.scale = -0.125f, .causal = 1);
    /* Scores at the top of f32 (docs/guarantees.md, section 7, "Range"): no partial sum of a
     * dot product may overflow where scale * (q . k) does not. The two cases (q =
     * [1,1,1], k = [.9,.9,-1.7] or, with softcap 30, [.9,-1.9,.9], then a key of 0; V 1 and
     * 0; scale 2e38: the reference gives 1 and 9.4e-14), the same inputs over more rows and
     * keys, then cancelling integer inputs (fill_big) with scores up to 3.3e38 in every
     * dtype, on each kernel path: tiled and few-row QK^T, packed prefill, decode in place and
     * converted, windows and packed batches; and q entries of 2^120 with |scale| <= 1. */
    CASE(.big = BIG_DOT, .B = 1, .Hq = 1, .Hkv = 1, .Sq = 1, .Sk = 2, .D = 3, .Dv = 1,
         .scale = 2e38f, .quick = 1);
    CASE(.big = BIG_CAPDOT, .B = 1, .Hq = 1, .Hkv = 1, .Sq = 1, .Sk = 2, .D = 3, .Dv = 1,
         .scale = 2e38f, .softcap = 30.0f, .quick = 1);
    CASE(.big = BIG_DOT, .Sq = 20, .Sk = 70, .D = 3, .Dv = 5, .scale = 2e38f, .causal = 1);
    CASE(.big = BIG_CAPDOT, .Sq = 1, .Sk = 33, .Hq = 8, .Hkv = 2, .D = 3, .Dv = 2, .dq = F16,
         .dkv = F16, .scale = 2e38f, .softcap = 30.0f);
    CASE(.big = BIG_CANCEL, .scale = 1e38f, .causal = 1, .quick = 1);
    CASE(.big = BIG_CANCEL, .scale = 1.1e38f, .dq = F16, .dkv = F16, .layout = L_BHSD, .D = 128,
         .softcap = 30.0f);
    CASE(.big = BIG_CANCEL, .scale = -1e38f, .dq = BF16, .dkv = BF16, .B = 1, .Hq = 8, .Hkv = 2,
         .Sq = 1, .Sk = 700, .D = 128, .quick = 1);
    CASE(.big = BIG_CANCEL, .scale = 1e38f, .B = 1, .Hq = 8, .Hkv = 2, .Sq = 4, .Sk = 300,
         .causal = 1, .splits = 3);
    CASE(.big = BIG_CANCEL, .scale = 1e38f, .dq = F16, .dkv = F16, .B = 1, .Hq = 8, .Hkv = 2,
         .Sq = 2, .Sk = 300, .D = 72);
    CASE(.big = BIG_CANCEL, .scale = 1.1e38f, .B = 1, .Hq = 2, .Hkv = 1, .Sq = 130, .Sk = 200,
         .D = 80, .causal = 1);
    CASE(.big = BIG_CANCEL, .scale = 1e38f, .dq = BF16, .dkv = BF16, .lens = LENS_VARLEN, .B = 3,
         .wl = 8, .wr = 8, .softcap = 30.0f);
    CASE(.big = BIG_CANCEL, .bigexp = 120, .scale = 1.0f, .dq = BF16, .dkv = BF16);
    CASE(.big = BIG_CANCEL, .bigexp = 120, .scale = 0.25f, .causal = 1, .lens = LENS_PADDED,
         .B = 3);

    /* NaN in the inputs. */
    CASE(.nan_in = NAN_Q, .quick = 1);
    CASE(.nan_in = NAN_Q, .causal = 1, .dq = F16, .dkv = F16);
    CASE(.nan_in = NAN_K, .causal = 1, .quick = 1);
    CASE(.nan_in = NAN_K, .dq = BF16, .dkv = BF16, .Hq = 8, .Hkv = 2, .layout = L_BHSD);
    CASE(.nan_in = NAN_V);
    CASE(.nan_in = NAN_V, .causal = 1, .Sq = 40, .Sk = 40, .quick = 1); /* masked V NaN: unused */
    CASE(.nan_in = NAN_K, .wl = 3, .wr = 3, .Sq = 40, .Sk = 40);        /* masked K NaN: unused */
    CASE(.nan_in = NAN_K, .lens = LENS_VARLEN, .B = 3, .causal = 1, .dq = F16, .dkv = F16);
    CASE(.nan_in = NAN_V, .dq = F16, .dkv = F16, .Sq = 1, .Sk = 600);
    /* Decode with V read in place (SPLITKV's streaming path): the inf/NaN check of the P.V
     * in f32 and bf16, GQA, and a NaN left of a window (masked: unused). */
    CASE(.nan_in = NAN_V, .Hq = 8, .Hkv = 2, .Sq = 1, .Sk = 700);
    CASE(.nan_in = NAN_V, .dq = BF16, .dkv = BF16, .Hq = 8, .Hkv = 2, .Sq = 2, .Sk = 300);
    CASE(.nan_in = NAN_V, .Hq = 4, .Hkv = 1, .Sq = 1, .Sk = 500, .wl = 20, .wr = 0);
    /* The last key's V NaN, hidden by the causal mask from the first query position but
     * inside the keys the P.V of a 4-row block (both positions) walks: only the check of
     * the tile's sums sends it to the careful path, which skips it for that row. */
    CASE(.nan_in = NAN_V, .nan_last = 1, .causal = 1, .Hq = 8, .Hkv = 2, .Sq = 2, .Sk = 300,
         .quick = 1);
    CASE(.nan_in = NAN_V, .nan_last = 1, .causal = 1, .dq = F16, .dkv = F16, .Hq = 8, .Hkv = 2,
         .Sq = 2, .Sk = 300);

    /* Empty problems: Sq = 0 writes nothing; Sk = 0 makes every row fully masked. */
    CASE(.Sq = 0, .Sk = 16, .quick = 1);
    CASE(.Sq = 16, .Sk = 0, .quick = 1);
    CASE(.Sq = 0, .Sk = 0);
    CASE(.Sq = 16, .Sk = 0, .dq = F16, .dkv = F16, .causal = 1, .bias = BIAS_BH);
    CASE(.Sq = 1, .Sk = 0, .dq = BF16, .dkv = BF16, .lse = 0);

    /* Decode shapes (SPLITKV's home): Sq = 1 or a few, long Sk, several split counts. */
    static const int dec_sk[] = {1, 7, 64, 129, 512, 1000, 2048};
    static const int dec_sp[] = {0, 1, 3, 7, 16};
    for (int i = 0; i < 7; i++)
        for (int s = 0; s < 5; s++) {
            if (dec_sk[i] > 512 && s != 0 && s != 3)
                continue;
            CASE(.Sq = 1, .Sk = dec_sk[i], .Hq = 8, .Hkv = 2, .D = 128, .dq = F16, .dkv = F16,
                 .causal = 1, .splits = dec_sp[s], .B = 1,
                 .quick = (dec_sk[i] == 1000 && s == 3) || (dec_sk[i] == 7 && s == 4));
        }
    CASE(.Sq = 1, .Sk = 2048, .Hq = 32, .Hkv = 8, .D = 128, .dq = BF16, .dkv = BF16, .B = 1,
         .splits = 0);
    /* bf16 K/V read in place go by pairs of vectors in even/odd order (uk_template.h):
     * head dims with an odd vector count (a last vector alone) and D != Dv. */
    CASE(.Sq = 1, .Sk = 300, .Hq = 8, .Hkv = 2, .D = 80, .dq = BF16, .dkv = BF16, .B = 1);
    CASE(.Sq = 2, .Sk = 200, .Hq = 4, .Hkv = 1, .D = 48, .Dv = 112, .dq = F32, .dkv = BF16, .B = 1,
         .causal = 1);
    /* More of bf16 decode in place: a last tile of 45 keys (Sk 301) at D 256 with 8 rows
     * per KV head, a NaN in K, and a few positions with a window, ALiBi, softcap, a scale
     * and Dv != D. */
    CASE(.Sq = 1, .Sk = 301, .Hq = 8, .Hkv = 1, .D = 256, .dq = BF16, .dkv = BF16, .B = 1,
         .splits = 3, .lse = 1);
    CASE(.nan_in = NAN_K, .Sq = 1, .Sk = 290, .Hq = 8, .Hkv = 2, .D = 64, .dq = BF16, .dkv = BF16,
         .B = 1);
    CASE(.Sq = 3, .Sk = 250, .Hq = 4, .Hkv = 2, .D = 96, .Dv = 32, .dq = BF16, .dkv = BF16, .B = 2,
         .causal = 1, .wl = 150, .alibi = 1, .softcap = 3.0f, .scale = 0.7f, .lse = 1);
    /* 9 to 16 rows per KV head, read in place too (XATTN__CPU_FEW_ROWS): 12 and 16 rows of
     * bf16 with a last odd vector and a NaN in V, MQA over 16 heads with ALiBi and a window,
     * 10 rows of f32 varlen with Dv != D. */
    CASE(.Sq = 3, .Sk = 333, .Hq = 16, .Hkv = 4, .D = 80, .dq = BF16, .dkv = BF16, .B = 2,
         .causal = 1, .splits = 3, .lse = 1);
    CASE(.nan_in = NAN_V, .nan_last = 1, .Sq = 4, .Sk = 260, .Hq = 8, .Hkv = 2, .D = 64, .dq = BF16,
         .dkv = BF16, .B = 1, .causal = 1);
    CASE(.Sq = 1, .Sk = 777, .Hq = 16, .Hkv = 1, .D = 128, .dq = F16, .dkv = F16, .B = 2,
         .alibi = 1, .wl = 300, .softcap = 4.0f, .splits = 5);
    CASE(.Sq = 5, .Sk = 400, .lens = LENS_VARLEN, .B = 3, .Hq = 4, .Hkv = 2, .D = 48, .Dv = 96,
         .causal = 1, .lse = 1);
    CASE(.Sq = 1, .Sk = 2048, .Hq = 4, .Hkv = 4, .D = 64, .B = 2, .splits = 5, .lse = 1);
    CASE(.Sq = 1, .Sk = 1024, .Hq = 8, .Hkv = 1, .D = 96, .dq = F16, .dkv = F16, .B = 1, .wl = 256,
         .causal = 1, .splits = 4);
    CASE(.Sq = 4, .Sk = 700, .Hq = 8, .Hkv = 2, .D = 128, .dq = F16, .dkv = F16, .B = 2,
         .causal = 1, .splits = 6, .quick = 1);
    CASE(.Sq = 1, .Sk = 800, .lens = LENS_PADDED, .B = 4, .Hq = 4, .Hkv = 1, .D = 64, .dq = F16,
         .dkv = F16, .splits = 8, .quick = 1);
    CASE(.Sq = 1, .Sk = 900, .lens = LENS_VARLEN, .B = 4, .Hq = 4, .Hkv = 2, .D = 64, .splits = 3,
         .alibi = 1, .bias = BIAS_BH, .bias_ninf = 1);
    CASE(.Sq = 1, .Sk = 5, .splits = 16, .B = 1); /* more splits than keys */

    /* Attention sinks: causal both alignments (bottom-right with Sq > Sk leaves rows with no
     * key: O = 0, LSE = the sink), a window with GQA, softcap, ALiBi and padding, a bias with
     * whole -inf rows in a packed batch, and split-KV (the combine folds the sink once: the
     * partials of 5 chunks, some of them empty under the window, hold none). */
    CASE(.sinks = 1, .causal = 1, .lse = 1, .quick = 1);
    CASE(.sinks = 1, .causal = 1, .Sq = 48, .Sk = 20, .dq = F16, .dkv = F16, .lse = 1);
    CASE(.sinks = 1, .causal = 1, .align = TL, .Sq = 20, .Sk = 48, .layout = L_STRIDED, .lse = 1);
    CASE(.sinks = 1, .Hq = 8, .Hkv = 2, .wl = 7, .wr = 0, .softcap = 5.0f, .alibi = 1,
         .lens = LENS_PADDED, .B = 3, .lse = 1, .quick = 1);
    CASE(.sinks = 2, .lens = LENS_VARLEN, .B = 3, .bias = BIAS_1H, .bias_ninf = 2, .causal = 1,
         .lse = 1);
    CASE(.sinks = 2, .Sq = 1, .Sk = 700, .Hq = 8, .Hkv = 2, .wl = 300, .splits = 5, .lse = 1,
         .quick = 1);
    CASE(.sinks = 1, .Sq = 4, .Sk = 600, .Hq = 8, .Hkv = 1, .dq = BF16, .dkv = BF16,
         .lens = LENS_PADDED, .B = 3, .causal = 1, .splits = 4, .lse = 1);
    CASE(.sinks = 1, .Sq = 16, .Sk = 0, .lse = 1); /* no keys at all: LSE = the sink */

    /* Paged KV caches (shuffled page tables over a pool with spare NaN pages; the table's
     * unused entries name a NaN page): page sizes 1, 3 (not a power of two), 16 and 64, both
     * page layouts, padded batches with a sequence of no keys, causal both alignments, a
     * window, GQA, ALiBi, softcap, bias, sinks, Dv != D, f16/bf16, and decode with splits. */
    CASE(.page = 16, .causal = 1, .lse = 1, .quick = 1);
    CASE(.page = 1, .Sq = 5, .Sk = 40, .causal = 1, .align = TL, .lse = 1);
    CASE(.page = 3, .pagelay = 1, .lens = LENS_PADDED, .B = 4, .Hq = 8, .Hkv = 2, .wl = 9, .lse = 1,
         .quick = 1);
    CASE(.page = 16, .pagelay = 1, .dq = F16, .dkv = F16, .D = 80, .Dv = 48, .alibi = 1,
         .softcap = 4.0f, .bias = BIAS_BH, .bias_ninf = 1);
    CASE(.page = 64, .Sq = 70, .Sk = 200, .dq = BF16, .dkv = BF16, .causal = 1, .sinks = 1,
         .lens = LENS_PADDED, .B = 3);
    CASE(.page = 16, .Sq = 1, .Sk = 700, .Hq = 8, .Hkv = 2, .D = 128, .dq = F16, .dkv = F16,
         .lens = LENS_PADDED, .B = 4, .splits = 5, .lse = 1, .quick = 1);
    CASE(.page = 5, .Sq = 4, .Sk = 333, .Hq = 16, .Hkv = 4, .D = 64, .dq = BF16, .dkv = BF16,
         .causal = 1, .splits = 3, .sinks = 2, .lse = 1);
    CASE(.page = 32, .Sq = 1, .Sk = 1024, .Hq = 8, .Hkv = 1, .D = 64, .B = 2, .wl = 256,
         .causal = 1, .splits = 4);
    CASE(.page = 16, .nan_in = NAN_PAD, .lens = LENS_PADDED, .B = 3, .causal = 1);
    /* Decode read in place with K and V in different page layouts and Dv != D: each reads
     * its own rows. */
    CASE(.page = 16, .pagelay = 2, .Sq = 1, .Sk = 500, .Hq = 8, .Hkv = 2, .D = 64, .Dv = 32,
         .dq = F16, .dkv = F16, .lens = LENS_PADDED, .B = 3, .splits = 3, .lse = 1);
    /* fp8 K/V caches (E4M3 and E5M2), with and without per-head scales, values over each
     * format's whole range, NaN in K, decode with splits, paged and appended caches, and the
     * usual masks and modifiers. */
    CASE(.dkv = FP8E4, .causal = 1, .lse = 1, .quick = 1);
    CASE(.dkv = FP8E5, .dq = F16, .Hq = 8, .Hkv = 2, .kvscale = 1, .lse = 1, .quick = 1);
    CASE(.dkv = FP8E4, .dq = BF16, .kvscale = 1, .Sq = 1, .Sk = 700, .Hq = 8, .Hkv = 2, .D = 128,
         .splits = 5, .lens = LENS_PADDED, .B = 3, .lse = 1);
    CASE(.dkv = FP8E5, .kvscale = 2, .Sq = 5, .Sk = 90, .wl = 20, .softcap = 5.0f, .alibi = 1,
         .lse = 1);
    CASE(.dkv = FP8E4, .kvscale = 2, .D = 80, .Dv = 48, .bias = BIAS_BH, .sinks = 1,
         .layout = L_STRIDED);
    CASE(.dkv = FP8E4, .nan_in = NAN_K, .Sq = 4, .Sk = 260, .Hq = 8, .Hkv = 2, .causal = 1);
    CASE(.dkv = FP8E4, .page = 16, .kvscale = 1, .Sq = 1, .Sk = 300, .lens = LENS_PADDED, .B = 3,
         .splits = 3, .quick = 1);
    CASE(.dkv = FP8E5, .append = 2, .Sq = 2, .Sk = 64, .causal = 1, .kvscale = 1);
    /* A NaN code in V under decode with GQA (the CPU's in-place fp8 decode kernels find NaN
     * codes apart from their conversion), seen by every row, and outside a window (unused). */
    CASE(.dkv = FP8E4, .dq = F16, .nan_in = NAN_V, .kvscale = 1, .Sq = 1, .Sk = 700, .Hq = 8,
         .Hkv = 2, .D = 128, .splits = 3, .lse = 1);
    CASE(.dkv = FP8E4, .dq = F16, .nan_in = NAN_V, .Sq = 1, .Sk = 500, .Hq = 4, .Hkv = 1, .D = 128,
         .wl = 20, .wr = 0);
    /* q8_0 K/V caches (ggml's blocks of 32 with an f16 d): blocks at the format's edges (d 0,
     * subnormal d, qs -128 and 127), a NaN d in K and in V, decode with splits, paged (both
     * page layouts) and appended caches, GQA, Dv != D, packed batches and the masks. */
    CASE(.dkv = Q8, .causal = 1, .lse = 1, .quick = 1);
    CASE(.dkv = Q8, .dq = F16, .Hq = 8, .Hkv = 2, .q8edge = 1, .lse = 1, .quick = 1);
    CASE(.dkv = Q8, .dq = BF16, .Sq = 1, .Sk = 700, .Hq = 8, .Hkv = 2, .D = 128, .splits = 5,
         .lens = LENS_PADDED, .B = 3, .lse = 1, .q8edge = 1);
    CASE(.dkv = Q8, .q8edge = 1, .D = 96, .Dv = 32, .bias = BIAS_BH, .sinks = 1,
         .layout = L_STRIDED);
    CASE(.dkv = Q8, .q8edge = 1, .Sq = 5, .Sk = 90, .wl = 20, .softcap = 5.0f, .alibi = 1,
         .lse = 1);
    CASE(.dkv = Q8, .dq = F16, .layout = L_BHSD, .causal = 1, .align = TL, .Sq = 40, .Sk = 30);
    CASE(.dkv = Q8, .lens = LENS_VARLEN, .B = 3, .causal = 1, .Hq = 6, .Hkv = 3);
    CASE(.dkv = Q8, .nan_in = NAN_K, .Sq = 4, .Sk = 260, .Hq = 8, .Hkv = 2, .causal = 1);
    CASE(.dkv = Q8, .nan_in = NAN_V, .Sq = 1, .Sk = 200, .Hq = 8, .Hkv = 2, .splits = 3);
    CASE(.dkv = Q8, .nan_in = NAN_PAD, .lens = LENS_PADDED, .B = 3, .causal = 1);
    CASE(.dkv = Q8, .page = 16, .q8edge = 1, .Sq = 1, .Sk = 300, .lens = LENS_PADDED, .B = 3,
         .splits = 3, .quick = 1);
    CASE(.dkv = Q8, .dq = F16, .page = 5, .pagelay = 2, .Sq = 1, .Sk = 200, .Hq = 8, .Hkv = 2,
         .D = 64, .Dv = 32, .lens = LENS_PADDED, .B = 3, .splits = 2, .lse = 1);
    CASE(.dkv = Q8, .append = 2, .Sq = 2, .Sk = 64, .causal = 1, .lse = 1);
    CASE(.dkv = Q8, .append = 3, .page = 16, .Sq = 3, .Sk = 120, .Hq = 8, .Hkv = 2, .causal = 1,
         .lens = LENS_PADDED, .B = 3, .quick = 1);

    /* Append, then attend (flash_attn_with_kvcache): into contiguous and paged caches,
     * decode and a few speculative positions, padded lengths; the harness also checks that
     * exactly the appended slots of the caches changed. */
    CASE(.append = 1, .Sq = 1, .Sk = 300, .Hq = 8, .Hkv = 2, .lens = LENS_PADDED, .B = 3,
         .splits = 3, .lse = 1, .quick = 1);
    CASE(.append = 4, .Sq = 4, .Sk = 90, .causal = 1, .dq = F16, .dkv = F16, .layout = L_BHSD);
    CASE(.append = 3, .page = 16, .Sq = 3, .Sk = 120, .Hq = 8, .Hkv = 2, .causal = 1,
         .lens = LENS_PADDED, .B = 4, .lse = 1, .quick = 1);
    CASE(.append = 1, .page = 1, .Sq = 1, .Sk = 50, .sinks = 1, .splits = 2);
    CASE(.append = 2, .page = 7, .pagelay = 1, .Sq = 2, .Sk = 64, .dq = BF16, .dkv = BF16,
         .causal = 1, .layout = L_STRIDED);

    /* Medium shapes. */
    CASE(.Sq = 256, .Sk = 256, .Hq = 4, .Hkv = 2, .D = 128, .B = 1, .dq = F16, .dkv = F16,
         .causal = 1, .quick = 1);
    CASE(.Sq = 512, .Sk = 512, .Hq = 2, .Hkv = 1, .D = 64, .B = 1, .lse = 1);
    CASE(.Sq = 300, .Sk = 200, .Hq = 2, .Hkv = 2, .D = 80, .B = 2, .dq = BF16, .dkv = BF16,
         .wl = 32, .wr = 8, .layout = L_BHSD);
}

/* Random configurations, fixed by their own seed (names stay the same from run
 * to run; the data still comes from the run's seed). */
static void add_random_cases(int n)
{
    rng r = {0x5eedfacade01ull};
    static const xattn_dtype dt3[3] = {F32, F16, BF16};
    static const int hkv[3] = {1, 2, 4}, grp[4] = {1, 2, 3, 4};
    static const float caps[3] = {1.0f, 5.0f, 30.0f};
    for (int i = 0; i < n; i++) {
        tcase c;
        memset(&c, 0, sizeof c);
        c.dq = dt3[rng_int(&r, 0, 2)];
        c.dkv = rng_unif(&r) < 0.6 ? c.dq : dt3[rng_int(&r, 0, 2)];
        c.B = rng_int(&r, 1, 3);
        c.Hkv = hkv[rng_int(&r, 0, 2)];
        c.Hq = c.Hkv * grp[rng_int(&r, 0, 3)];
        c.Sq = rng_unif(&r) < 0.1 ? rng_int(&r, 0, 2) : rng_int(&r, 1, 80);
        c.Sk = rng_unif(&r) < 0.1 ? rng_int(&r, 0, 2) : rng_int(&r, 1, 130);
        c.D = rng_unif(&r) < 0.5 ? 16 * rng_int(&r, 1, 16) : rng_int(&r, 1, 256);
        c.Dv = rng_unif(&r) < 0.6 ? c.D : rng_int(&r, 1, 256);
        c.layout = rng_int(&r, 0, 3);
        c.causal = rng_unif(&r) < 0.5;
        c.align = rng_int(&r, 0, 1);
        c.wl = c.wr = -1;
        if (rng_unif(&r) < 0.3) {
            c.wl = rng_int(&r, -1, 24);
            c.wr = rng_int(&r, -1, 24);
        }
        c.bias_dt = F32;
        if (rng_unif(&r) < 0.3) {
            c.bias = rng_int(&r, BIAS_11, BIAS_BH);
            c.bias_dt = rng_unif(&r) < 0.5 ? F32 : F16;
            c.bias_ninf = rng_int(&r, 0, 2);
        }
        c.alibi = rng_unif(&r) < 0.2;
        c.softcap = rng_unif(&r) < 0.2 ? caps[rng_int(&r, 0, 2)] : 0.0f;
        c.scale = rng_unif(&r) < 0.2 ? (float)(rng_int(&r, 1, 20) * 0.05) : 0.0f;
        double u = rng_unif(&r);
        c.lens = u < 0.2 ? LENS_PADDED : u < 0.4 ? LENS_VARLEN : LENS_FULL;
        if (c.lens != LENS_FULL)
            c.B = rng_int(&r, 1, 4);
        c.lse = rng_unif(&r) < 0.7;
        u = rng_unif(&r);
        c.nan_in = u < 0.05                            ? NAN_Q
                   : u < 0.1                           ? NAN_K
                   : (u < 0.15 && c.lens != LENS_FULL) ? NAN_PAD
                                                       : NAN_NONE;
        c.splits = rng_unif(&r) < 0.3 ? rng_int(&r, 1, 9) : 0;
        c.quick = i % 8 == 0;
        add_case(c);
    }
}

/* ---- host-side element encoding ------------------------------------------ */

/* (q8_0 K/V are built as f32 and quantized at the end of inst_build: q8_finish) */
static size_t esz(xattn_dtype t)
{
    return t == F32 || t == Q8 ? 4 : (t == FP8E4 || t == FP8E5) ? 1 : 2;
}

/* The fp8 formats' fields: mantissa bits, exponent bias, largest finite value. */
static void fp8_format(xattn_dtype t, int *mb, int *bias, double *maxv)
{
    *mb = t == FP8E5 ? 2 : 3;
    *bias = t == FP8E5 ? 15 : 7;
    *maxv = t == FP8E5 ? 57344.0 : 448.0;
}

/* v rounded to nearest-even in an fp8 format, as its byte (the harness's own encoder): too
 * large is inf (E5M2) or NaN (E4M3, which has no infinities). */
static uint8_t fp8_encode(double v, xattn_dtype t)
{
    int mb, bias;
    double maxv;
    fp8_format(t, &mb, &bias, &maxv);
    const uint8_t sign = (v < 0 || (v == 0 && signbit(v))) ? 0x80 : 0;
    const uint8_t nan = t == FP8E5 ? 0x7e : 0x7f, inf = t == FP8E5 ? 0x7c : nan;
    double a = fabs(v);
    if (isnan(v))
        return nan;
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < 1 - bias)
        e = 1 - bias;
    const double q = ldexp(1.0, e - mb);
    const double r = nearbyint(a / q) * q; /* ties to even */
    if (r > maxv)
        return (uint8_t)(sign | inf);
    if (r < ldexp(1.0, 1 - bias)) /* subnormal (or 0) */
        return (uint8_t)(sign | (int)(r / ldexp(1.0, 1 - bias - mb)));
    frexp(r, &e);
    e -= 1;
    const int m = (int)(r / ldexp(1.0, e - mb)) - (1 << mb);
    return (uint8_t)(sign | ((e + bias) << mb) | m);
}

static void put_elem(unsigned char *base, xattn_dtype t, int64_t idx, double v)
{
    if (t == FP8E4 || t == FP8E5) {
        base[idx] = fp8_encode(v, t);
        return;
    }
    if (t == F32 || t == Q8) {
        float f = (float)v;
        memcpy(base + 4 * idx, &f, 4);
    } else {
        uint16_t h = t == F16 ? xattn_f32_to_f16((float)v) : xattn_f32_to_bf16((float)v);
        memcpy(base + 2 * idx, &h, 2);
    }
}

/* Decodes one element for comparison (the harness's own decoding). */
static double get_elem(const unsigned char *base, xattn_dtype t, int64_t idx)
{
    if (t == F32) {
        float f;
        memcpy(&f, base + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, base + 2 * idx, 2);
    if (t == BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* x rounded to nearest-even in dtype t, computed in double (own code). */
static double round_to(double x, xattn_dtype t)
{
    if (t == F32)
        return (double)(float)x;
    if (x == 0 || isnan(x) || isinf(x))
        return x;
    int mant_bits = t == F16 ? 10 : 7, emin = t == F16 ? -14 : -126;
    double maxv = t == F16 ? 65504.0 : 3.38953138925153547590e38;
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    e -= 1;
    if (e < emin)
        e = emin;
    double q = ldexp(1.0, e - mant_bits);
    double r = nearbyint(x / q) * q;
    if (fabs(r) > maxv)
        return x > 0 ? INFINITY : -INFINITY;
    return r;
}

/* The spacing of dtype t's values at x (f16 / bf16; subnormals included). */
static double ulp_of(double x, xattn_dtype t)
{
    int mant_bits = t == F16 ? 10 : 7, emin = t == F16 ? -14 : -126;
    int e;
    frexp(x, &e);
    e -= 1;
    if (e < emin)
        e = emin;
    return ldexp(1.0, e - mant_bits);
}

/* NaN poison patterns for outputs: quiet NaNs with a payload that no
 * arithmetic in a kernel produces. */
static const uint32_t POISON_F32 = 0x7fc5a5a5u;
static const uint16_t POISON_F16 = 0x7e5au;
static const uint16_t POISON_BF16 = 0x7fe5u;

static void fill_poison(unsigned char *p, xattn_dtype t, size_t bytes)
{
    size_t es = esz(t);
    if (es == 1) { /* fp8 inputs: a NaN */
        memset(p, t == FP8E5 ? 0x7e : 0x7f, bytes);
        return;
    }
    for (size_t i = 0; i + es <= bytes; i += es) {
        if (t == F32 || t == Q8)
            memcpy(p + i, &POISON_F32, 4);
        else
            memcpy(p + i, t == F16 ? &POISON_F16 : &POISON_BF16, 2);
    }
}

static int is_poison(const unsigned char *base, xattn_dtype t, int64_t idx)
{
    if (t == F32)
        return !memcmp(base + 4 * idx, &POISON_F32, 4);
    return !memcmp(base + 2 * idx, t == F16 ? &POISON_F16 : &POISON_BF16, 2);
}

/* ---- a case instantiated: host data, lengths and views ------------------- */

typedef struct hview {
    xattn_dtype dt;
    int64_t shape[4], strides[4];
    int64_t off;  /* elements */
    size_t bytes; /* buffer size */
    unsigned char *host;
    xattn_buffer *buf;
} hview;

typedef struct inst {
    const tcase *c;
    int64_t Bp, Tq, Tk; /* tensor batch and lengths (varlen: 1, total tokens) */
    int32_t *lq, *lk;   /* per-sequence lengths */
    int32_t *cuq, *cuk; /* varlen offsets */
    float *slopes;
    hview q, k, v, o, lse, bias, sinks;
    int has_lse, has_bias, has_sinks;
    /* Paged caches and appends (inst_cache): */
    int32_t *lkc;   /* seqlens_k as given: the cache's length before an append */
    int32_t *table; /* block table [B, max_pages] */
    int64_t max_pages;
    hview kn, vn;           /* k_new, v_new */
    hview ks, vs;           /* k_scale, v_scale */
    unsigned char *kx, *vx; /* the caches' bytes expected after the append */
} inst;

static int64_t view_index(const hview *h, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return h->off + i0 * h->strides[0] + i1 * h->strides[1] + i2 * h->strides[2] +
           i3 * h->strides[3];
}

/* Strides for [B, S, H, D] in a layout; the guard after the span stays NaN. */
static void layout_view(hview *h, int layout, xattn_dtype dt, int64_t B, int64_t S, int64_t H,
                        int64_t D)
{
    memset(h, 0, sizeof *h);
    h->dt = dt;
    h->shape[0] = B, h->shape[1] = S, h->shape[2] = H, h->shape[3] = D;
    int64_t *st = h->strides;
    const int64_t u = dt == Q8 ? 32 : 1; /* q8_0: gaps and offsets of whole blocks */
    switch (layout) {
    case L_BHSD: st[3] = 1, st[1] = D, st[2] = S * D, st[0] = H * S * D; break;
    case L_STRIDED:
        st[3] = 1, st[2] = D + 3 * u, st[1] = H * (D + 3 * u) + 5 * u, st[0] = S * st[1] + 7 * u;
        h->off = 3 * u;
        break;
    case L_DMAJOR: /* [B, H, D, S]: the head dim is not innermost */
        st[1] = 1, st[3] = S, st[2] = D * S, st[0] = H * D * S;
        break;
    default: st[3] = 1, st[2] = D, st[1] = H * D, st[0] = S * H * D; break;
    }
}

static void view_alloc_host(hview *h)
{
    int64_t span = 1;
    for (int i = 0; i < 4; i++)
        span += (h->shape[i] > 0 ? h->shape[i] - 1 : 0) * h->strides[i];
    h->bytes = (size_t)(h->off + span) * esz(h->dt) + 64; /* + a guard */
    h->host = malloc(h->bytes);
    fill_poison(h->host, h->dt, h->bytes); /* inputs: NaN wherever the view is not */
}

static void inst_free(inst *in)
{
    hview *vs[11] = {&in->q,     &in->k,  &in->v,  &in->o,  &in->lse, &in->bias,
                     &in->sinks, &in->kn, &in->vn, &in->ks, &in->vs};
    for (int i = 0; i < 11; i++) {
        free(vs[i]->host);
        xattn_buffer_free(vs[i]->buf);
        vs[i]->host = NULL;
        vs[i]->buf = NULL;
    }
    free(in->lq);
    free(in->lk);
    free(in->cuq);
    free(in->cuk);
    free(in->slopes);
    free(in->lkc);
    free(in->table);
    free(in->kx);
    free(in->vx);
    memset(in, 0, sizeof *in);
}

/* Key s of the K/V tensors' batch b as a key number within its sequence (-1: a token no
 * sequence owns). */
static int64_t seq_key(const inst *in, const tcase *c, int64_t b, int64_t s)
{
    if (c->lens != LENS_VARLEN)
        return s;
    for (int q = 0; q < c->B; q++)
        if (s >= in->cuk[q] && s < in->cuk[q + 1])
            return s - in->cuk[q];
    (void)b;
    return -1;
}

/*
 * The `big` cases' q and k (and v), replacing the random ones:
 * - BIG_DOT, BIG_CAPDOT: the inputs. Every query row is [1, 1, 1], key 0 of each
 *   sequence is [.9, .9, -1.7] (BIG_CAPDOT: [.9, -1.9, .9]) and the others 0, V is 1 at key
 *   0 and 0 elsewhere (dims past 3 of q and k are 0). With scale 2e38, scale * q_d * k_d
 *   reaches 3.8e38 while scale * (q . k) is 2e37 (-2e37: -30 after the softcap).
 * - BIG_CANCEL: q = a * M * u and k = u * w, with u in {-1, 1}^D for the case, a = +-1 per
 *   query row, M = 2^bigexp, and w per key pairs of entries (x, -x), x in {+-1, +-2}, plus one
 *   entry t in shuffled places: q . k = a * M * t exactly, and every partial sum of it is an
 *   exact integer times M in f32, in any order, so each score is scale * M * t rounded once.
 *   t is 3 at key 0 of each sequence, -3 at key 1, in -2..2 elsewhere: a row that sees keys
 *   0 and 1 has one top score, 1e38 or more above the others without a softcap. (Ties at
 *   the top, at such magnitudes, would be weighted per SPLITKV chunk rather than per key by
 *   every backend: the chunks' log-sum-exps are f32, docs/guarantees.md.) With M = 1 and
 *   |scale| ~1e38 the terms scale * q_d * k_d reach 2e38 to 3e38, so partial sums of
 *   scale * (q . k) taken term by term overflow f32 in most orders, while no score does.
 *   V is random in [0.25, 1): positive, so that averages over tied keys (a softcap makes
 *   many) are never a cancellation near 0, which the exact-zero and rounding checks of
 *   compare() would take for errors.
 */
static void fill_big(inst *in, const tcase *c, rng *r)
{
    const int D = c->D;
    if (c->big == BIG_DOT || c->big == BIG_CAPDOT) {
        static const double kd[2][3] = {{0.9, 0.9, -1.7}, {0.9, -1.9, 0.9}};
        const double *k0 = kd[c->big == BIG_CAPDOT];
        for (int64_t b = 0; b < in->Bp; b++)
            for (int64_t s = 0; s < in->Tq; s++)
                for (int64_t h = 0; h < c->Hq; h++)
                    for (int64_t d = 0; d < D; d++)
                        put_elem(in->q.host, c->dq, view_index(&in->q, b, s, h, d), d < 3);
        for (int64_t b = 0; b < in->Bp; b++)
            for (int64_t s = 0; s < in->Tk; s++) {
                const int first = seq_key(in, c, b, s) == 0;
                for (int64_t h = 0; h < c->Hkv; h++) {
                    for (int64_t d = 0; d < D; d++)
                        put_elem(in->k.host, c->dkv, view_index(&in->k, b, s, h, d),
                                 first && d < 3 ? k0[d] : 0.0);
                    for (int64_t d = 0; d < c->Dv; d++)
                        put_elem(in->v.host, c->dkv, view_index(&in->v, b, s, h, d), first);
                }
            }
        return;
    }
    signed char *u = malloc((size_t)D);
    int *perm = malloc((size_t)D * sizeof(int));
    double *w = malloc((size_t)D * sizeof(double));
    if (!u || !perm || !w) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int d = 0; d < D; d++)
        u[d] = rng_unif(r) < 0.5 ? -1 : 1;
    const double M = ldexp(1.0, c->bigexp);
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t s = 0; s < in->Tq; s++)
            for (int64_t h = 0; h < c->Hq; h++) {
                const double a = rng_unif(r) < 0.5 ? -M : M;
                for (int64_t d = 0; d < D; d++)
                    put_elem(in->q.host, c->dq, view_index(&in->q, b, s, h, d), a * u[d]);
            }
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t s = 0; s < in->Tk; s++) {
            const int64_t j = seq_key(in, c, b, s);
            for (int64_t h = 0; h < c->Hkv; h++) {
                for (int d = 0; d < D; d++) {
                    perm[d] = d;
                    w[d] = 0.0;
                }
                for (int d = D - 1; d > 0; d--) { /* Fisher-Yates */
                    const int e = rng_int(r, 0, d), t = perm[d];
                    perm[d] = perm[e];
                    perm[e] = t;
                }
                w[perm[0]] = j == 0 ? 3 : j == 1 ? -3 : rng_int(r, -2, 2);
                for (int d = 1; d + 1 < D; d += 2) {
                    const double x = rng_int(r, 1, 2) * (rng_unif(r) < 0.5 ? -1.0 : 1.0);
                    w[perm[d]] = x;
                    w[perm[d + 1]] = -x;
                }
                for (int64_t d = 0; d < D; d++)
                    put_elem(in->k.host, c->dkv, view_index(&in->k, b, s, h, d), u[d] * w[d]);
                for (int64_t d = 0; d < c->Dv; d++)
                    put_elem(in->v.host, c->dkv, view_index(&in->v, b, s, h, d),
                             0.25 + 0.75 * rng_unif(r));
            }
        }
    free(u);
    free(perm);
    free(w);
}

static void inst_cache(inst *in, const tcase *c, rng *r);

/* A q8_0 host image from the f32 one the case was built in (same element
 * numbering; the layouts keep rows and offsets on whole blocks): each block
 * of 32 quantized as ggml does (xattn_quantize_q8_0; a block holding NaN
 * becomes d = NaN), then two guard blocks of NaN. Frees the f32 image. */
static unsigned char *q8_image(unsigned char *f32, size_t f32_bytes, size_t *bytes)
{
    const size_t nel = (f32_bytes - 64) / 4, nblk = (nel + 31) / 32;
    *bytes = (nblk + 2) * 34;
    unsigned char *img = calloc(*bytes, 1);
    float x[32];
    for (size_t i = 0; i < nblk + 2; i++) {
        img[i * 34] = 0x00, img[i * 34 + 1] = 0x7e; /* NaN d */
        if (i >= nblk)
            continue;
        for (size_t j = 0; j < 32; j++)
            if (i * 32 + j < nel)
                memcpy(&x[j], f32 + 4 * (i * 32 + j), 4);
            else
                x[j] = 0.0f;
        (void)xattn_quantize_q8_0(x, img + i * 34, 32); /* NaN blocks: refused, written NaN */
    }
    free(f32);
    return img;
}

/* The q8edge cases: blocks (those not NaN) rewritten at the format's edges: d 0 (a block of
 * amax 0), f16-subnormal d with qs over the whole int8 range, or qs -128 and 127 under the
 * block's own d. */
static void q8_edges(unsigned char *img, size_t bytes, rng *r)
{
    for (size_t i = 0; i + 34 <= bytes; i += 34) {
        unsigned char *blk = img + i;
        if ((blk[1] & 0x7c) == 0x7c) /* inf or NaN d: padding, poison, a NaN case */
            continue;
        const double u = rng_unif(r);
        if (u < 0.1) {
            memset(blk, 0, 34);
        } else if (u < 0.3) {
            const int m = rng_int(r, 1, 0x3ff);
            blk[0] = (unsigned char)(m & 0xff);
            blk[1] = (unsigned char)((m >> 8) | (rng_unif(r) < 0.5 ? 0x80 : 0));
            for (int j = 0; j < 32; j++)
                blk[2 + j] = (unsigned char)rng_int(r, 0, 255);
        } else if (u < 0.5) {
            for (int n = 0; n < 4; n++)
                blk[2 + rng_int(r, 0, 31)] = rng_unif(r) < 0.5 ? 0x80 : 0x7f;
        }
    }
}

/* A q8_0 case's K, V (and k_new, v_new, and the caches expected after an append) turned
 * from f32 into q8_0 blocks. */
static void q8_finish(inst *in, const tcase *c, rng *r)
{
    if (in->kx) {
        size_t nb;
        in->kx = q8_image(in->kx, in->k.bytes, &nb);
        in->vx = q8_image(in->vx, in->v.bytes, &nb);
    }
    hview *hv[4] = {&in->k, &in->v, &in->kn, &in->vn};
    for (int i = 0; i < 4; i++)
        if (hv[i]->host)
            hv[i]->host = q8_image(hv[i]->host, hv[i]->bytes, &hv[i]->bytes);
    if (c->q8edge) /* (not with an append: k_new and the expected caches would differ) */
        for (int i = 0; i < 2; i++)
            q8_edges(hv[i]->host, hv[i]->bytes, r);
}

/* Lengths, views and random contents of case c, from seed. */
static void inst_build(inst *in, const tcase *c, uint64_t seed)
{
    memset(in, 0, sizeof *in);
    in->c = c;
    rng r = {seed ^ hash_str(c->name)};
    int B = c->B;
    size_t nb = (size_t)(B > 0 ? B : 1);
    in->lq = calloc(nb, sizeof(int32_t));
    in->lk = calloc(nb, sizeof(int32_t));
    in->cuq = calloc(nb + 1, sizeof(int32_t));
    in->cuk = calloc(nb + 1, sizeof(int32_t));
    for (int b = 0; b < B; b++) {
        in->lq[b] = c->Sq, in->lk[b] = c->Sk;
        if (c->lens != LENS_FULL) {
            /* sequence 0 full length, 1 no queries, 2 no keys, the rest random */
            if (b > 0) {
                in->lq[b] = rng_int(&r, 0, c->Sq);
                in->lk[b] = rng_int(&r, 0, c->Sk);
            }
            if (b == 1)
                in->lq[b] = 0;
            if (b == 2)
                in->lk[b] = 0;
        }
        if (in->lk[b] < c->append) /* room for the appended tokens */
            in->lk[b] = c->append;
        in->cuq[b + 1] = in->cuq[b] + in->lq[b];
        in->cuk[b + 1] = in->cuk[b] + in->lk[b];
    }
    if (c->lens == LENS_VARLEN) {
        in->Bp = 1;
        in->Tq = in->cuq[B] + 3; /* tokens past the last sequence: never written */
        in->Tk = in->cuk[B] + 2;
    } else {
        in->Bp = B;
        in->Tq = c->Sq;
        in->Tk = c->Sk;
    }

    layout_view(&in->q, c->layout, c->dq, in->Bp, in->Tq, c->Hq, c->D);
    layout_view(&in->k, c->layout, c->dkv, in->Bp, in->Tk, c->Hkv, c->D);
    layout_view(&in->v, c->layout, c->dkv, in->Bp, in->Tk, c->Hkv, c->Dv);
    layout_view(&in->o, c->layout, c->dq, in->Bp, in->Tq, c->Hq, c->Dv);
    view_alloc_host(&in->q);
    view_alloc_host(&in->k);
    view_alloc_host(&in->v);
    view_alloc_host(&in->o);

    in->has_lse = c->lse;
    if (c->lse) {
        hview *l = &in->lse;
        memset(l, 0, sizeof *l);
        l->dt = F32;
        l->shape[0] = in->Bp, l->shape[1] = c->Hq, l->shape[2] = in->Tq, l->shape[3] = 1;
        int64_t row = c->layout == L_STRIDED ? in->Tq + 2 : in->Tq;
        l->strides[3] = 1, l->strides[2] = 1, l->strides[1] = row;
        l->strides[0] = c->Hq * row + (c->layout == L_STRIDED ? 1 : 0);
        l->off = c->layout == L_STRIDED ? 1 : 0;
        view_alloc_host(l);
    }

    /* q, k, v: random values; NaN where a case asks for it. */
    int64_t Sp = in->Tq, Skp = in->Tk;
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t s = 0; s < Sp; s++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t d = 0; d < c->D; d++)
                    put_elem(in->q.host, c->dq, view_index(&in->q, b, s, h, d), rng_normalish(&r));
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t s = 0; s < Skp; s++)
            for (int64_t h = 0; h < c->Hkv; h++) {
                for (int64_t d = 0; d < c->D; d++)
                    put_elem(in->k.host, c->dkv, view_index(&in->k, b, s, h, d), rng_normalish(&r));
                for (int64_t d = 0; d < c->Dv; d++)
                    put_elem(in->v.host, c->dkv, view_index(&in->v, b, s, h, d), rng_normalish(&r));
            }
    if (c->big)
        fill_big(in, c, &r);
    if (c->kvscale == 2) { /* fp8 values from the subnormals to the largest, both signs */
        int mb, bias;
        double maxv;
        fp8_format(c->dkv, &mb, &bias, &maxv);
        hview *kv[2] = {&in->k, &in->v};
        const int dims[2] = {c->D, c->Dv};
        for (int t = 0; t < 2; t++)
            for (int64_t b = 0; b < in->Bp; b++)
                for (int64_t s = 0; s < Skp; s++)
                    for (int64_t h = 0; h < c->Hkv; h++)
                        for (int64_t d = 0; d < dims[t]; d++) {
                            double x = ldexp(1.0 + rng_unif(&r), rng_int(&r, -bias - mb, bias + 1));
                            x = fmin(x, maxv) * (rng_unif(&r) < 0.5 ? -1.0 : 1.0);
                            put_elem(kv[t]->host, c->dkv, view_index(kv[t], b, s, h, d), x);
                        }
    }
    if (c->nan_in == NAN_PAD) {
        /* Padding rows of q and padding keys of k/v hold NaN: never to be read. */
        for (int b = 0; b < B; b++) {
            int64_t tb = c->lens == LENS_VARLEN ? 0 : b;
            int64_t q0 = c->lens == LENS_VARLEN ? in->cuq[B] : in->lq[b];
            int64_t k0 = c->lens == LENS_VARLEN ? in->cuk[B] : in->lk[b];
            for (int64_t s = q0; s < Sp; s++)
                for (int64_t h = 0; h < c->Hq; h++)
                    for (int64_t d = 0; d < c->D; d++)
                        put_elem(in->q.host, c->dq, view_index(&in->q, tb, s, h, d), NAN);
            for (int64_t s = k0; s < Skp; s++)
                for (int64_t h = 0; h < c->Hkv; h++) {
                    for (int64_t d = 0; d < c->D; d++)
                        put_elem(in->k.host, c->dkv, view_index(&in->k, tb, s, h, d), NAN);
                    for (int64_t d = 0; d < c->Dv; d++)
                        put_elem(in->v.host, c->dkv, view_index(&in->v, tb, s, h, d), NAN);
                }
        }
    } else if (c->nan_in != NAN_NONE && B > 0) {
        /* One NaN in the first sequence that has queries and keys. */
        int b0 = 0;
        while (b0 < B - 1 && (in->lq[b0] == 0 || in->lk[b0] == 0))
            b0++;
        int64_t tb = c->lens == LENS_VARLEN ? 0 : b0;
        int64_t sq0 = c->lens == LENS_VARLEN ? in->cuq[b0] : 0;
        int64_t sk0 = c->lens == LENS_VARLEN ? in->cuk[b0] : 0;
        if (c->nan_in == NAN_Q && in->lq[b0] > 0)
            put_elem(in->q.host, c->dq,
                     view_index(&in->q, tb, sq0 + rng_int(&r, 0, in->lq[b0] - 1),
                                rng_int(&r, 0, c->Hq - 1), rng_int(&r, 0, c->D - 1)),
                     NAN);
        if ((c->nan_in == NAN_K || c->nan_in == NAN_V) && in->lk[b0] > 0) {
            hview *t = c->nan_in == NAN_K ? &in->k : &in->v;
            int dd = c->nan_in == NAN_K ? c->D : c->Dv;
            put_elem(
                t->host, c->dkv,
                view_index(t, tb,
                           sk0 + (c->nan_last ? in->lk[b0] - 1 : rng_int(&r, 0, in->lk[b0] - 1)),
                           rng_int(&r, 0, c->Hkv - 1), rng_int(&r, 0, dd - 1)),
                NAN);
        }
    }

    if (c->bias) {
        hview *bv = &in->bias;
        memset(bv, 0, sizeof *bv);
        bv->dt = c->bias_dt;
        int64_t Bb = (c->bias == BIAS_B1 || c->bias == BIAS_BH) ? B : 1;
        int64_t Hb = (c->bias == BIAS_1H || c->bias == BIAS_BH) ? c->Hq : 1;
        int64_t Sqb = c->Sq + 1, Skb = c->Sk + 3; /* larger than needed: extra never read */
        if (Bb == 0)
            Bb = 1;
        bv->shape[0] = Bb, bv->shape[1] = Hb, bv->shape[2] = Sqb, bv->shape[3] = Skb;
        int64_t rowst = c->layout == L_STRIDED ? Skb + 2 : Skb;
        bv->strides[3] = 1, bv->strides[2] = rowst, bv->strides[1] = Sqb * rowst;
        bv->strides[0] = Hb * Sqb * rowst;
        view_alloc_host(bv);
        for (int64_t b = 0; b < Bb; b++)
            for (int64_t h = 0; h < Hb; h++)
                for (int64_t i = 0; i < c->Sq; i++) {
                    int inf_row = c->bias_ninf == 2 && i % 7 == 3;
                    for (int64_t j = 0; j < c->Sk; j++) {
                        double x = 0.5 * rng_normalish(&r);
                        if (inf_row || (c->bias_ninf && rng_unif(&r) < 0.15))
                            x = -INFINITY;
                        /* keys beyond the sequence (padding) must not be read */
                        if (c->nan_in == NAN_PAD && c->lens != LENS_FULL && Bb > 1 &&
                            (j >= in->lk[b] || i >= in->lq[b]))
                            x = NAN;
                        put_elem(bv->host, bv->dt, view_index(bv, b, h, i, j), x);
                    }
                }
        in->has_bias = 1;
    }
    in->has_sinks = c->sinks != 0;
    if (c->sinks) { /* [1, 1, Hq, 1], every other f32 in the strided layout */
        hview *sv = &in->sinks;
        memset(sv, 0, sizeof *sv);
        sv->dt = F32;
        sv->shape[0] = sv->shape[1] = sv->shape[3] = 1, sv->shape[2] = c->Hq;
        sv->strides[2] = c->layout == L_STRIDED ? 2 : 1;
        sv->strides[0] = sv->strides[1] = c->Hq * sv->strides[2], sv->strides[3] = 1;
        sv->off = c->layout == L_STRIDED ? 1 : 0;
        view_alloc_host(sv);
        for (int64_t h = 0; h < c->Hq; h++) {
            double x = c->sinks == 2 ? 30.0 + (double)h : 1.5 * rng_normalish(&r);
            if (c->sinks == 1 && h % 4 == 3)
                x = -INFINITY; /* a head without a sink */
            put_elem(sv->host, F32, view_index(sv, 0, 0, h, 0), x);
        }
    }
    if (c->kvscale) { /* [1, 1, Hkv, 1] f32 per cache; small under the whole range */
        hview *sv[2] = {&in->ks, &in->vs};
        int mb, bias;
        double maxv;
        fp8_format(c->dkv, &mb, &bias, &maxv);
        for (int t = 0; t < 2; t++) {
            memset(sv[t], 0, sizeof *sv[t]);
            sv[t]->dt = F32;
            sv[t]->shape[0] = sv[t]->shape[1] = sv[t]->shape[3] = 1, sv[t]->shape[2] = c->Hkv;
            sv[t]->strides[2] = 1 + t, sv[t]->strides[0] = sv[t]->strides[1] = 2 * c->Hkv;
            sv[t]->strides[3] = 1;
            view_alloc_host(sv[t]);
            for (int64_t h = 0; h < c->Hkv; h++) {
                double x = 0.5 + 1.5 * rng_unif(&r);
                if (c->kvscale == 2)
                    x *= (t ? 1.0 : 4.0) / maxv;
                put_elem(sv[t]->host, F32, view_index(sv[t], 0, 0, h, 0), x);
            }
        }
    }
    if (c->alibi) {
        in->slopes = malloc((size_t)c->Hq * sizeof(float));
        for (int h = 0; h < c->Hq; h++)
            in->slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / c->Hq);
    }
    inst_cache(in, c, &r);
    if (c->dkv == Q8)
        q8_finish(in, c, &r);
}

/* Element e of a view's dtype copied between host images. */
static void copy_elem(unsigned char *dst, int64_t di, const unsigned char *src, int64_t si,
                      xattn_dtype t)
{
    memcpy(dst + (size_t)di * esz(t), src + (size_t)si * esz(t), esz(t));
}

/*
 * Paged caches and appends, made from the contiguous K/V that inst_build filled:
 * - append: the last `append` keys of each sequence move to k_new/v_new, their slots in the
 *   cache become NaN (the call must overwrite them), and seqlens_k is the shorter length;
 * - page: K and V move into a pool of pages [pages, page, Hkv, D] (or [pages, Hkv, page,
 *   D]) in a shuffled order, with two spare pages of NaN; a table entry past a sequence's
 *   keys names a spare page (never to be read).
 * kx/vx then hold the caches' bytes as they must be after the call.
 */
static void inst_cache(inst *in, const tcase *c, rng *r)
{
    if (!c->page && !c->append)
        return;
    const int B = c->B;
    const int64_t Hkv = c->Hkv;
    in->lkc = calloc((size_t)(B > 0 ? B : 1), sizeof(int32_t));
    for (int b = 0; b < B; b++)
        in->lkc[b] = in->lk[b] - c->append;
    if (c->append) {
        layout_view(&in->kn, c->layout, c->dkv, B, c->append, Hkv, c->D);
        layout_view(&in->vn, c->layout, c->dkv, B, c->append, Hkv, c->Dv);
        view_alloc_host(&in->kn);
        view_alloc_host(&in->vn);
        for (int b = 0; b < B; b++)
            for (int64_t t = 0; t < c->append; t++)
                for (int64_t h = 0; h < Hkv; h++) {
                    const int64_t j = in->lkc[b] + t;
                    for (int64_t d = 0; d < c->D; d++) {
                        copy_elem(in->kn.host, view_index(&in->kn, b, t, h, d), in->k.host,
                                  view_index(&in->k, b, j, h, d), c->dkv);
                        put_elem(in->k.host, c->dkv, view_index(&in->k, b, j, h, d), NAN);
                    }
                    for (int64_t d = 0; d < c->Dv; d++) {
                        copy_elem(in->vn.host, view_index(&in->vn, b, t, h, d), in->v.host,
                                  view_index(&in->v, b, j, h, d), c->dkv);
                        put_elem(in->v.host, c->dkv, view_index(&in->v, b, j, h, d), NAN);
                    }
                }
    }
    if (c->page) {
        const int64_t ps = c->page, used = (c->Sk + ps - 1) / ps;
        const int64_t mp = used + 1, npages = (int64_t)B * used + 2;
        int64_t *perm = malloc((size_t)npages * sizeof *perm);
        in->table = malloc((size_t)(B > 0 ? B : 1) * (size_t)mp * sizeof(int32_t));
        in->max_pages = mp;
        for (int64_t i = 0; i < npages; i++)
            perm[i] = i;
        for (int64_t i = npages - 1; i > 0; i--) { /* Fisher-Yates */
            const int64_t e = rng_int(r, 0, (int)i), t = perm[i];
            perm[i] = perm[e];
            perm[e] = t;
        }
        for (int b = 0; b < B; b++)
            for (int64_t g = 0; g < mp; g++)
                in->table[b * mp + g] =
                    (int32_t)(g < used ? perm[b * used + g] : perm[npages - 1 - (b & 1)]);
        hview *src[2] = {&in->k, &in->v};
        const int64_t dim[2] = {c->D, c->Dv};
        for (int t = 0; t < 2; t++) {
            hview pool;
            memset(&pool, 0, sizeof pool);
            pool.dt = c->dkv;
            pool.shape[0] = npages, pool.shape[1] = ps, pool.shape[2] = Hkv, pool.shape[3] = dim[t];
            int64_t *st = pool.strides;
            const int hsd = c->pagelay == 2 ? t : c->pagelay;
            const int64_t u = c->dkv == Q8 ? 32 : 1; /* q8_0: whole blocks */
            if (hsd)
                st[3] = 1, st[1] = dim[t], st[2] = ps * dim[t], st[0] = Hkv * ps * dim[t] + 2 * u;
            else
                st[3] = 1, st[2] = dim[t], st[1] = Hkv * dim[t], st[0] = ps * Hkv * dim[t];
            pool.off = hsd ? u : 0;
            view_alloc_host(&pool);
            for (int b = 0; b < B; b++)
                for (int64_t j = 0; j < c->Sk; j++)
                    for (int64_t h = 0; h < Hkv; h++)
                        for (int64_t d = 0; d < dim[t]; d++)
                            copy_elem(pool.host,
                                      view_index(&pool, in->table[b * mp + j / ps], j % ps, h, d),
                                      src[t]->host, view_index(src[t], b, j, h, d), c->dkv);
            free(src[t]->host);
            *src[t] = pool;
        }
        free(perm);
    }
    if (c->append) { /* the bytes after the call: the new tokens in their slots */
        in->kx = malloc(in->k.bytes);
        in->vx = malloc(in->v.bytes);
        memcpy(in->kx, in->k.host, in->k.bytes);
        memcpy(in->vx, in->v.host, in->v.bytes);
        for (int b = 0; b < B; b++)
            for (int64_t t = 0; t < c->append; t++)
                for (int64_t h = 0; h < Hkv; h++) {
                    const int64_t j = in->lkc[b] + t;
                    const int64_t pb = c->page ? in->table[b * in->max_pages + j / c->page] : b;
                    const int64_t ps = c->page ? j % c->page : j;
                    for (int64_t d = 0; d < c->D; d++)
                        copy_elem(in->kx, view_index(&in->k, pb, ps, h, d), in->kn.host,
                                  view_index(&in->kn, b, t, h, d), c->dkv);
                    for (int64_t d = 0; d < c->Dv; d++)
                        copy_elem(in->vx, view_index(&in->v, pb, ps, h, d), in->vn.host,
                                  view_index(&in->vn, b, t, h, d), c->dkv);
                }
    }
}

static int inst_upload(inst *in, xattn_ctx *ctx, char *err, size_t errn)
{
    hview *vs[11] = {&in->q,     &in->k,  &in->v,  &in->o,  &in->lse, &in->bias,
                     &in->sinks, &in->kn, &in->vn, &in->ks, &in->vs};
    static const char *const nm[11] = {"q",     "k",     "v",     "o",       "lse",    "bias",
                                       "sinks", "k_new", "v_new", "k_scale", "v_scale"};
    for (int i = 0; i < 11; i++) {
        if (!vs[i]->host)
            continue;
        xattn_status st = xattn_buffer_alloc(ctx, vs[i]->bytes, &vs[i]->buf);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_write(vs[i]->buf, 0, vs[i]->host, vs[i]->bytes);
        if (st != XATTN_STATUS_OK) {
            snprintf(err, errn, "uploading %s (%zu bytes): %s: %s", nm[i], vs[i]->bytes,
                     xattn_status_name(st), xattn_last_error());
            return 0;
        }
    }
    return 1;
}

static xattn_tensor tensor_of(const hview *h)
{
    xattn_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = h->buf;
    t.offset = h->dt == Q8 ? (size_t)h->off / 32 * 34 : (size_t)h->off * esz(h->dt);
    t.dtype = h->dt;
    for (int i = 0; i < 4; i++) {
        t.shape[i] = h->shape[i];
        t.strides[i] = h->strides[i];
    }
    return t;
}

static void inst_desc(const inst *in, xattn_attn_desc *d)
{
    const tcase *c = in->c;
    xattn_attn_desc_init(d);
    d->q = tensor_of(&in->q);
    d->k = tensor_of(&in->k);
    d->v = tensor_of(&in->v);
    d->o = tensor_of(&in->o);
    if (in->has_lse)
        d->lse = tensor_of(&in->lse);
    if (in->has_bias)
        d->bias = tensor_of(&in->bias);
    if (in->has_sinks)
        d->sinks = tensor_of(&in->sinks);
    d->scale = c->scale;
    d->softcap = c->softcap;
    d->alibi_slopes = in->slopes;
    d->causal = c->causal;
    d->align = (xattn_align)c->align;
    d->window_left = c->wl;
    d->window_right = c->wr;
    if (c->lens == LENS_PADDED) {
        d->seqlens_q = in->lq;
        d->seqlens_k = in->lk;
    }
    if (c->page || c->append) /* a cache's lengths: always given */
        d->seqlens_k = in->lkc;
    if (c->page) {
        d->block_table = in->table;
        d->max_pages_per_seq = in->max_pages;
    }
    if (c->append) {
        d->k_new = tensor_of(&in->kn);
        d->v_new = tensor_of(&in->vn);
    }
    if (c->kvscale) {
        d->k_scale = tensor_of(&in->ks);
        d->v_scale = tensor_of(&in->vs);
    }
    if (c->lens == LENS_VARLEN) {
        d->cu_seqlens_q = in->cuq;
        d->cu_seqlens_k = in->cuk;
        d->num_seqs = c->B;
    }
}

/* ---- comparison ------------------------------------------------------------ */

typedef struct cmp cmp;
static void why(cmp *r, const char *fmt, ...);

/* After an append: the caches hold the new tokens in their slots, and every other byte as
 * it was (bytes, so that NaN payloads compare too). */
static void check_append(const inst *in, cmp *r)
{
    const hview *cache[2] = {&in->k, &in->v};
    const unsigned char *want[2] = {in->kx, in->vx};
    for (int t = 0; t < 2; t++) {
        unsigned char *got = malloc(cache[t]->bytes);
        xattn_status st = xattn_buffer_read(cache[t]->buf, 0, got, cache[t]->bytes);
        size_t e = 0;
        while (st == XATTN_STATUS_OK && e < cache[t]->bytes && got[e] == want[t][e])
            e++;
        if (st != XATTN_STATUS_OK)
            why(r, "append: reading %s back: %s", t ? "v" : "k", xattn_last_error());
        else if (e < cache[t]->bytes)
            why(r, "append: %s cache byte %zu is %02x, expected %02x (element %zu)", t ? "v" : "k",
                e, got[e], want[t][e], e / esz(cache[t]->dt));
        free(got);
    }
}

typedef struct cmp {
    int fail;
    double rel_l2, max_abs, rel_rnd, max_rnd, lse_err, round_bias;
    char why[600];
} cmp;

static void why(cmp *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(cmp *r, const char *fmt, ...)
{
    r->fail = 1;
    size_t n = strlen(r->why);
    if (n >= sizeof r->why - 2)
        return;
    if (n)
        r->why[n++] = ';', r->why[n++] = ' ', r->why[n] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why + n, sizeof r->why - n, fmt, ap);
    va_end(ap);
}

/* Compares the O (and LSE) buffers read back in out_o/out_lse with the reference. */
static void compare(const inst *in, const unsigned char *out_o, const unsigned char *out_lse,
                    const double *o_ref, const double *lse_ref, const unsigned char *written,
                    cmp *r)
{
    const tcase *c = in->c;
    const hview *o = &in->o;
    size_t nel = o->bytes / esz(o->dt);
    unsigned char *touched = calloc(nel ? nel : 1, 1);
    double err2 = 0, ref2 = 0, rnd2 = 0;
    double bias_sum = 0; /* f16/bf16: mean of (out - ref) * sign(ref) in units of the dtype's ulp */
    int64_t bias_n = 0;
    int64_t n_unwritten = 0, n_nan = 0, n_zero = 0, n_clobber = 0;
    memset(r, 0, sizeof *r);
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t s = 0; s < in->Tq; s++)
            for (int64_t h = 0; h < c->Hq; h++)
                for (int64_t e = 0; e < c->Dv; e++) {
                    int64_t idx = view_index(o, b, s, h, e);
                    touched[idx] = 1;
                    if (!written[b * in->Tq + s]) {
                        if (!is_poison(out_o, o->dt, idx) && n_clobber++ == 0)
                            why(r, "O[%lld,%lld,%lld,%lld] written in a row no sequence owns",
                                (long long)b, (long long)s, (long long)h, (long long)e);
                        continue;
                    }
                    double ref = o_ref[((b * in->Tq + s) * c->Hq + h) * c->Dv + e];
                    if (is_poison(out_o, o->dt, idx)) {
                        if (n_unwritten++ == 0)
                            why(r, "O[%lld,%lld,%lld,%lld] not written (still poison)",
                                (long long)b, (long long)s, (long long)h, (long long)e);
                        continue;
                    }
                    double out = get_elem(out_o, o->dt, idx);
                    if (isnan(ref) != isnan(out)) {
                        if (n_nan++ == 0)
                            why(r, "O[%lld,%lld,%lld,%lld] = %g, reference %g (NaN mismatch)",
                                (long long)b, (long long)s, (long long)h, (long long)e, out, ref);
                        continue;
                    }
                    if (isnan(ref))
                        continue;
                    if (ref == 0.0 && out != 0.0) {
                        if (n_zero++ == 0)
                            why(r,
                                "O[%lld,%lld,%lld,%lld] = %g, expected exactly 0 (masked "
                                "or padding row)",
                                (long long)b, (long long)s, (long long)h, (long long)e, out);
                    }
                    double dlt = out - ref, rd = round_to(ref, o->dt) - ref;
                    if (o->dt != F32 && isfinite(out) && ref != 0.0) {
                        /* A store's rounding error is within half an ulp; an
                         * element whose reference nearly cancels to 0 (its
                         * ulp tiny) can be thousands of ulps off by the f32
                         * arithmetic alone, which the L2 and max bounds judge:
                         * clamped, so that one such element cannot read as a
                         * rounding bias (seed 884265484: one at -3384 ulp). */
                        double u = (ref > 0 ? dlt : -dlt) / ulp_of(ref, o->dt);
                        bias_sum += u < -1.0 ? -1.0 : u > 1.0 ? 1.0 : u;
                        bias_n++;
                    }
                    err2 += dlt * dlt;
                    ref2 += ref * ref;
                    rnd2 += rd * rd;
                    if (!(fabs(dlt) <= r->max_abs))
                        r->max_abs = fabs(dlt);
                    if (fabs(rd) > r->max_rnd)
                        r->max_rnd = fabs(rd);
                }
    for (size_t e = 0; e < nel; e++)
        if (!touched[e] && !is_poison(out_o, o->dt, (int64_t)e) && n_clobber++ == 0)
            why(r, "O buffer element %zu, outside the view, was overwritten", e);
    free(touched);
    if (n_unwritten > 1 || n_nan > 1 || n_zero > 1 || n_clobber > 1)
        why(r, "(%lld unwritten, %lld NaN mismatches, %lld non-zero masked, %lld clobbered)",
            (long long)n_unwritten, (long long)n_nan, (long long)n_zero, (long long)n_clobber);
    r->rel_l2 = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
    r->rel_rnd = ref2 > 0 ? sqrt(rnd2 / ref2) : 0;
    double tol_rel = TOL_REL_FACTOR * r->rel_rnd + TOL_REL_FLOOR;
    double tol_abs = TOL_ABS_FACTOR * r->max_rnd + TOL_ABS_FLOOR;
    if (!(r->rel_l2 <= tol_rel))
        why(r, "O rel L2 error %.3e > %.3e (rounded reference: %.3e)", r->rel_l2, tol_rel,
            r->rel_rnd);
    if (!(r->max_abs <= tol_abs))
        why(r, "O max abs error %.3e > %.3e (rounded reference: %.3e)", r->max_abs, tol_abs,
            r->max_rnd);
    r->round_bias = bias_n ? bias_sum / (double)bias_n : 0.0;
    /* reported only when the error is otherwise within bounds: its own symptom */
    if (!r->fail && bias_n >= BIAS_MIN_COUNT && !(fabs(r->round_bias) <= TOL_ROUND_BIAS))
        why(r,
            "O is biased by %.3f ulp over %lld elements (round to nearest even gives ~0; "
            "truncation gives -0.5)",
            r->round_bias, (long long)bias_n);

    if (!in->has_lse)
        return;
    const hview *l = &in->lse;
    nel = l->bytes / 4;
    touched = calloc(nel ? nel : 1, 1);
    int64_t n_bad = 0;
    n_clobber = 0;
    for (int64_t b = 0; b < in->Bp; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t s = 0; s < in->Tq; s++) {
                int64_t idx = view_index(l, b, h, s, 0);
                touched[idx] = 1;
                if (!written[b * in->Tq + s]) {
                    if (!is_poison(out_lse, F32, idx) && n_clobber++ == 0)
                        why(r, "LSE[%lld,%lld,%lld] written in a row no sequence owns",
                            (long long)b, (long long)h, (long long)s);
                    continue;
                }
                double ref = lse_ref[(b * c->Hq + h) * in->Tq + s];
                if (is_poison(out_lse, F32, idx)) {
                    if (n_bad++ == 0)
                        why(r, "LSE[%lld,%lld,%lld] not written (still poison)", (long long)b,
                            (long long)h, (long long)s);
                    continue;
                }
                double out = get_elem(out_lse, F32, idx);
                int ok;
                if (isnan(ref) || isnan(out))
                    ok = isnan(ref) && isnan(out);
                else if (isinf(ref) || isinf(out))
                    ok = ref == out;
                else {
                    double e = fabs(out - ref) / fmax(1.0, fabs(ref));
                    if (e > r->lse_err)
                        r->lse_err = e;
                    ok = e <= TOL_LSE;
                }
                if (!ok && n_bad++ == 0)
                    why(r, "LSE[%lld,%lld,%lld] = %.9g, reference %.9g", (long long)b, (long long)h,
                        (long long)s, out, ref);
            }
    for (size_t e = 0; e < nel; e++)
        if (!touched[e] && !is_poison(out_lse, F32, (int64_t)e) && n_clobber++ == 0)
            why(r, "LSE buffer element %zu, outside the view, was overwritten", e);
    if (n_bad > 1)
        why(r, "(%lld bad LSE values)", (long long)n_bad);
    free(touched);
}

/* ---- the driver ------------------------------------------------------------ */

enum { NALGO = 4 };
static const xattn_algo g_algos[NALGO] = {XATTN_ALGO_NAIVE, XATTN_ALGO_FLASH, XATTN_ALGO_SPLITKV,
                                          XATTN_ALGO_AUTO};

typedef struct tally {
    int run, passed, failed, skipped;
    double worst_rel, worst_abs; /* f16/bf16 outputs: error / rounding error, the largest */
    double worst_f32;            /* f32 outputs: the largest relative L2 error */
    double worst_lse;            /* LSE: the largest |out - ref| / max(1, |ref|) */
} tally;

/* What runs: a backend, and for the CPU each SIMD path it can take. */
typedef struct target {
    xattn_backend be;
    int simd;      /* XATTN_OPT_CPU_SIMD value; 0 = the backend's default */
    char name[32]; /* "cpu", "cpu:portable", "cpu:avx2", "opencl", "cuda" */
    tally t[NALGO];
} target;

static int g_verbose;
static double g_ref_seconds; /* time spent in the reference, for the summary */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *g_prog = "test_backend_ops";

static int case_selected(const tcase *c, const char *filter, int exact, int quick)
{
    if (quick && !c->quick)
        return 0;
    if (!filter)
        return 1;
    return exact ? !strcmp(c->name, filter) : strstr(c->name, filter) != NULL;
}

/* Runs case c on ctx for every selected algorithm and tallies the outcomes. */
static void run_case(xattn_ctx *ctx, target *tg, const tcase *c, uint64_t seed, int algo_mask)
{
    const char *tn = tg->name;
    inst in;
    double case_t0 = now_s();
    char err[800] = "";
    char line[1024];
    int w = 0;
    inst_build(&in, c, seed);
    w += snprintf(line + w, sizeof line - (size_t)w, "  %-12s %s:", tn, c->name);
    xattn_attn_desc d;
    double *o_ref = NULL, *lse_ref = NULL;
    unsigned char *written = NULL, *out_o = NULL, *out_lse = NULL;
    int setup_ok = inst_upload(&in, ctx, err, sizeof err);
    int unsupported = 0; /* the backend refuses the case (its check, through the reference) */
    if (setup_ok) {
        inst_desc(&in, &d);
        size_t no = (size_t)(in.Bp * in.Tq * c->Hq * c->Dv), nl = (size_t)(in.Bp * c->Hq * in.Tq);
        o_ref = malloc((no ? no : 1) * sizeof(double));
        lse_ref = malloc((nl ? nl : 1) * sizeof(double));
        written = malloc(in.Bp * in.Tq > 0 ? (size_t)(in.Bp * in.Tq) : 1);
        out_o = malloc(in.o.bytes);
        out_lse = in.has_lse ? malloc(in.lse.bytes) : NULL;
        double t0 = now_s();
        xattn_status st = xattn_reference_attention(ctx, &d, o_ref, lse_ref);
        g_ref_seconds += now_s() - t0;
        if (st == XATTN_STATUS_OK)
            st = xattn_reference_rows_written(ctx, &d, written);
        if (st != XATTN_STATUS_OK) {
            snprintf(err, sizeof err, "reference: %s: %s", xattn_status_name(st),
                     xattn_last_error());
            setup_ok = 0;
            unsupported = st == XATTN_STATUS_UNSUPPORTED;
        }
    }
    for (int a = 0; a < NALGO; a++) {
        if (!(algo_mask & (1 << a)))
            continue;
        tally *t = &tg->t[a];
        t->run++;
        const char *an = xattn_algo_name(g_algos[a]);
        if (unsupported) {
            t->skipped++;
            w += snprintf(line + w, sizeof line - (size_t)w, " %s unsupported", an);
            printf("unsupported: %s %s %s: %s\n", tn, an, c->name, err);
            continue;
        }
        if (!setup_ok) {
            t->failed++;
            w += snprintf(line + w, sizeof line - (size_t)w, " %s FAIL", an);
            printf("FAIL %s %s %s: %s\n", tn, an, c->name, err);
            printf("  rerun: %s -b %s -a %s -c %s -s %llu\n", g_prog, tn, an, c->name,
                   (unsigned long long)seed);
            continue;
        }
        d.algo = g_algos[a];
        d.num_splits = g_algos[a] == XATTN_ALGO_SPLITKV ? c->splits : 0;
        /* poison O and LSE (and keep the host copies poisoned too) */
        fill_poison(in.o.host, in.o.dt, in.o.bytes);
        xattn_status st = xattn_buffer_write(in.o.buf, 0, in.o.host, in.o.bytes);
        if (st == XATTN_STATUS_OK && in.has_lse) {
            fill_poison(in.lse.host, F32, in.lse.bytes);
            st = xattn_buffer_write(in.lse.buf, 0, in.lse.host, in.lse.bytes);
        }
        xattn_run_info info;
        memset(&info, 0, sizeof info);
        if (st == XATTN_STATUS_OK)
            st = xattn_attention(ctx, &d, &info);
        if (st == XATTN_STATUS_UNSUPPORTED) {
            t->skipped++;
            w += snprintf(line + w, sizeof line - (size_t)w, " %s unsupported", an);
            printf("unsupported: %s %s %s: %s\n", tn, an, c->name, xattn_last_error());
            continue;
        }
        cmp r;
        memset(&r, 0, sizeof r);
        if (st != XATTN_STATUS_OK) {
            why(&r, "xattn_attention: %s: %s", xattn_status_name(st), xattn_last_error());
        } else {
            st = xattn_buffer_read(in.o.buf, 0, out_o, in.o.bytes);
            if (st == XATTN_STATUS_OK && in.has_lse)
                st = xattn_buffer_read(in.lse.buf, 0, out_lse, in.lse.bytes);
            if (st != XATTN_STATUS_OK)
                why(&r, "reading back: %s: %s", xattn_status_name(st), xattn_last_error());
            else
                compare(&in, out_o, out_lse, o_ref, lse_ref, written, &r);
            if (!r.fail && c->append)
                check_append(&in, &r);
            if (g_algos[a] != XATTN_ALGO_AUTO && info.algo_chosen != g_algos[a])
                why(&r, "run_info.algo_chosen = %s, asked for %s",
                    xattn_algo_name(info.algo_chosen), an);
            if (g_algos[a] == XATTN_ALGO_AUTO && (info.algo_chosen == XATTN_ALGO_AUTO ||
                                                  (unsigned)info.algo_chosen >= XATTN_ALGO_COUNT))
                why(&r, "run_info.algo_chosen = %d after AUTO", (int)info.algo_chosen);
        }
        if (r.fail) {
            t->failed++;
            w += snprintf(line + w, sizeof line - (size_t)w, " %s FAIL", an);
            printf("FAIL %s %s %s: %s\n", tn, an, c->name, r.why);
            printf("  errors: rel_l2 %.3e (rounded ref %.3e) max_abs %.3e (rounded ref %.3e) "
                   "lse %.3e rounding bias %.3f ulp\n",
                   r.rel_l2, r.rel_rnd, r.max_abs, r.max_rnd, r.lse_err, r.round_bias);
            printf("  rerun: %s -b %s -a %s -c %s -s %llu\n", g_prog, tn, an, c->name,
                   (unsigned long long)seed);
        } else {
            t->passed++;
            t->worst_lse = fmax(t->worst_lse, r.lse_err);
            if (in.o.dt == F32) {
                t->worst_f32 = fmax(t->worst_f32, r.rel_l2);
            } else if (r.rel_rnd > 0) {
                t->worst_rel = fmax(t->worst_rel, r.rel_l2 / r.rel_rnd);
                if (r.max_rnd > 0)
                    t->worst_abs = fmax(t->worst_abs, r.max_abs / r.max_rnd);
            }
            if (w < (int)sizeof line)
                w += snprintf(line + w, sizeof line - (size_t)w, " %s ok(%.1e,lse %.1e)", an,
                              r.rel_l2, r.lse_err);
        }
    }
    if (g_verbose)
        printf("%s [%.0f ms]\n", line, 1e3 * (now_s() - case_t0));
    fflush(stdout);
    free(o_ref);
    free(lse_ref);
    free(written);
    free(out_o);
    free(out_lse);
    inst_free(&in);
}

static void usage(void)
{
    printf(
        "usage: %s [-b backend] [-a algo] [-c case] [-s seed] [-l] [--quick] [-v]\n"
        "  -b  cpu | cpu:default | cpu:portable | cpu:avx2 | opencl | cuda (default: every\n"
        "      available backend; cpu = the default SIMD path, then the portable and AVX2 ones)\n"
        "  -a  naive | flash | splitkv | auto (default: all four)\n"
        "  -c  run the cases whose name contains this (an exact name runs that case)\n"
        "  -s  seed (default: XATTN_TEST_SEED, else from the clock)\n"
        "  -l  list the cases and exit\n"
        "  --quick  a smaller matrix for slow backends\n"
        "  -v  one line per case and backend\n",
        g_prog);
}

int main(int argc, char **argv)
{
    const char *bfilter = NULL, *afilter = NULL, *cfilter = NULL;
    int list = 0, quick = 0;
    uint64_t seed = 0;
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-b") && i + 1 < argc)
            bfilter = argv[++i];
        else if (!strcmp(a, "-a") && i + 1 < argc)
            afilter = argv[++i];
        else if (!strcmp(a, "-c") && i + 1 < argc)
            cfilter = argv[++i];
        else if (!strcmp(a, "-s") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(a, "-l"))
            list = 1;
        else if (!strcmp(a, "--quick"))
            quick = 1;
        else if (!strcmp(a, "-v"))
            g_verbose = 1;
        else {
            usage();
            return !strcmp(a, "-h") || !strcmp(a, "--help") ? 0 : 2;
        }
    }
    if (!have_seed) {
        const char *env = getenv("XATTN_TEST_SEED");
        if (env && *env)
            seed = strtoull(env, NULL, 0);
        else
            seed = ((uint64_t)time(NULL) * 2654435761u) ^ (uint64_t)getpid();
        seed &= 0xffffffffull; /* short enough to type */
    }

    build_cases();
    add_random_cases(N_RANDOM_CASES);
    int exact = 0;
    if (cfilter)
        for (int i = 0; i < g_ncases; i++)
            if (!strcmp(g_cases[i].name, cfilter))
                exact = 1;
    if (list) {
        int n = 0;
        for (int i = 0; i < g_ncases; i++)
            if (case_selected(&g_cases[i], cfilter, exact, quick)) {
                printf("%s\n", g_cases[i].name);
                n++;
            }
        printf("%d cases\n", n);
        return 0;
    }

    int algo_mask = 0;
    for (int a = 0; a < NALGO; a++)
        if (!afilter || !strcmp(afilter, xattn_algo_name(g_algos[a])))
            algo_mask |= 1 << a;
    if (!algo_mask) {
        fprintf(stderr, "unknown algorithm '%s'\n", afilter);
        return 2;
    }
    if (bfilter) {
        static const char *const known[] = {"cpu",      "cpu:default", "cpu:portable",
                                            "cpu:avx2", "opencl",      "cuda"};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok |= !strcmp(bfilter, known[i]);
        if (!ok) {
            fprintf(stderr, "unknown backend '%s'\n", bfilter);
            return 2;
        }
    }
    int nsel = 0;
    for (int i = 0; i < g_ncases; i++)
        nsel += case_selected(&g_cases[i], cfilter, exact, quick);
    printf("test_backend_ops: xattn %s, seed %llu (reproduce with -s %llu or XATTN_TEST_SEED), "
           "%d of %d cases%s\n",
           xattn_version_string(), (unsigned long long)seed, (unsigned long long)seed, nsel,
           g_ncases, quick ? " (--quick)" : "");
    if (nsel == 0) {
        fprintf(stderr, "no case matches '%s'\n", cfilter ? cfilter : "");
        return 2;
    }

    int nalgos = 0;
    for (int a = 0; a < NALGO; a++)
        nalgos += (algo_mask >> a) & 1;

    /* Targets: every backend; the CPU once per SIMD path (default = the best). */
    static target targets[8];
    int ntargets = 0;
    static const struct {
        xattn_backend be;
        int simd;
        const char *name;
    } all[] = {{XATTN_BACKEND_CPU, 0, "cpu:default"},
               {XATTN_BACKEND_CPU, 1, "cpu:portable"},
               {XATTN_BACKEND_CPU, 2, "cpu:avx2"},
               {XATTN_BACKEND_OPENCL, 0, "opencl"},
               {XATTN_BACKEND_CUDA, 0, "cuda"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *bn = xattn_backend_name(all[i].be);
        /* -b cpu selects every CPU path; -b cpu:avx2 only that one */
        if (bfilter && strcmp(bfilter, all[i].name) && strcmp(bfilter, bn))
            continue;
        target *tg = &targets[ntargets++];
        tg->be = all[i].be;
        tg->simd = all[i].simd;
        snprintf(tg->name, sizeof tg->name, "%s", all[i].name);
    }

    int reported_unavailable[XATTN_BACKEND_COUNT] = {0};
    for (int ti = 0; ti < ntargets; ti++) {
        target *tg = &targets[ti];
        xattn_status st = xattn_backend_available(tg->be);
        xattn_ctx *ctx = NULL;
        if (st == XATTN_STATUS_OK)
            st = xattn_ctx_create(tg->be, 0, &ctx);
        if (st == XATTN_STATUS_OK && tg->simd) {
            st = xattn_ctx_set_option(ctx, XATTN_OPT_CPU_SIMD, tg->simd);
            if (st == XATTN_STATUS_UNSUPPORTED) {
                /* this CPU lacks the path: nothing to test, not a failure */
                printf("note: %s: %s\n", tg->name, xattn_last_error());
                xattn_ctx_destroy(ctx);
                tg->name[0] = '\0';
                continue;
            }
        }
        if (st != XATTN_STATUS_OK) {
            if (!reported_unavailable[tg->be]++) {
                /* the library's reason usually starts with the backend's name already */
                const char *why_text = xattn_last_error();
                size_t bl = strlen(xattn_backend_name(tg->be));
                if (!strncmp(why_text, xattn_backend_name(tg->be), bl) && why_text[bl] == ':')
                    printf("skipped: %s\n", why_text);
                else
                    printf("skipped: %s: %s\n", xattn_backend_name(tg->be), why_text);
            }
            for (int a = 0; a < NALGO; a++)
                if (algo_mask & (1 << a))
                    tg->t[a].skipped += nsel;
            xattn_ctx_destroy(ctx);
            continue;
        }
        xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1); /* NaN workspaces too */
        xattn_device_info info;
        memset(&info, 0, sizeof info);
        xattn_ctx_device_info(ctx, &info);
        printf("%s: device 0: %s (%d compute units)\n", tg->name, info.name, info.compute_units);
        fflush(stdout);
        double t0 = now_s(), r0 = g_ref_seconds;
        for (int i = 0; i < g_ncases; i++)
            if (case_selected(&g_cases[i], cfilter, exact, quick))
                run_case(ctx, tg, &g_cases[i], seed, algo_mask);
        printf("%s: %d cases x %d algorithms in %.1f s (%.1f s of it in the reference)\n", tg->name,
               nsel, nalgos, now_s() - t0, g_ref_seconds - r0);
        xattn_ctx_destroy(ctx);
    }

    int passed = 0, failed = 0, skipped = 0;
    printf("\n%-13s %-8s %5s %6s %6s %7s  %-8s %-8s %s\n", "target", "algo", "run", "passed",
           "failed", "skipped", "f32 L2", "LSE", "f16/bf16 err/rounding (L2, max)");
    for (int ti = 0; ti < ntargets; ti++)
        for (int a = 0; a < NALGO; a++) {
            const tally *t = &targets[ti].t[a];
            if (!targets[ti].name[0] || (!t->run && !t->skipped))
                continue;
            printf("%-13s %-8s %5d %6d %6d %7d  %-8.1e %-8.1e %.2f, %.2f\n", targets[ti].name,
                   xattn_algo_name(g_algos[a]), t->run, t->passed, t->failed, t->skipped,
                   t->worst_f32, t->worst_lse, t->worst_rel, t->worst_abs);
            passed += t->passed;
            failed += t->failed;
            skipped += t->skipped;
        }
    printf("(worst over the passing runs: f32 relative L2 error, LSE error relative to max(1, "
           "|LSE|),\n"
           " f16/bf16 error divided by the error of the reference rounded to the dtype)\n");
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed)
        return 1;
    return passed == 0 && skipped > 0 ? 77 : 0; /* 77: ctest's SKIP_RETURN_CODE */
}
