/*
 * Bench presets. Each preset is one or more families (cases that differ only
 * in their lengths, drawn as one chart panel), at the model's real sizes;
 * --scale multiplies the lengths (and sliding windows), or for BERT and ViT,
 * whose lengths are the point, the batch. docs/tool.md lists them.
 */
#include "xtool_presets.h"

#include "xtool.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cpu-targets: the reference may check a sub-batch of the S2048 cases (8.6e9 FLOPs for
 * sequence 0 x KV head 0 of target 1, seconds of the double-precision loop). */
#define XTOOL_PRESET_TARGETS_CHECK_LIMIT 1e10

typedef struct xtool__preset {
    const char *name;
    int model_sized; /* real-model lengths: --scale defaults to 1/8 without a GPU */
    const char *summary;
    double check_limit;   /* the reference's FLOP limit unless --check-limit; 0 = default */
    int measure_ceilings; /* measure uncached ceilings first */
    int cpu_only;         /* the CPU backend unless --backend */
} xtool__preset;

static const xtool__preset xtool__presets[] = {
    {"default", 0,
     "CPU-sized: Llama-style GQA prefill (B1 H8/2 D64 f32 causal, Sq=Sk 128..1024) and decode "
     "(B4 H8/2 D64 f16, Sq 1, Sk 1k..16k)",
     0, 0, 0},
    {"llama3-8b-prefill", 1, "Llama-3-8B prefill: B1 H32/8 D128 bf16 causal, Sq=Sk 512..8192", 0, 0,
     0},
    {"llama3-8b-decode", 1,
     "Llama-3-8B decode: B8 H32/8 D128 bf16, one query token, KV cache 1k..32k", 0, 0, 0},
    {"mistral-7b-swa", 1,
     "Mistral-7B sliding window: B1 H32/8 D128 bf16 causal, window 4095 left, Sq=Sk 2k..16k", 0, 0,
     0},
    {"gemma2-softcap", 1,
     "Gemma-2-9B: B1 H16/8 D256 bf16 causal, softcap 50, global and 4095-left local layers, "
     "Sq=Sk 1k..8k",
     0, 0, 0},
    {"bert-base-padded", 1,
     "BERT-base: B32 H12 D64 f16, padded batches of realistic lengths (fixed seed) at max 128, "
     "256, 512, and the same batches packed (varlen)",
     0, 0, 0},
    {"vit-b16", 1, "ViT-B/16: B32 H12 D64 f16 non-causal, 197, 577, 1025 tokens (224, 384, 512 px)",
     0, 0, 0},
    {"gpt-oss-20b-decode", 1,
     "gpt-oss-20b decode: B4 H64/8 D64 bf16, one query token, attention sinks, sliding-window "
     "layers (the last 128 keys) and full-attention layers, KV cache 1k..32k",
     0, 0, 0},
    {"llama3-8b-paged-decode", 1,
     "Llama-3-8B paged decode: B16 H32/8 D128 f16, one query token, a KV cache in 16-token "
     "pages (shuffled), ragged lengths (fixed seed) up to 4k and 32k",
     0, 0, 0},
    {"cpu-targets", 0,
     "the CPU speed targets at their real sizes: flash+naive f32 H32/8 D128 S2048 (1 and all "
     "threads), flash causal, flash+naive H12 D64 S1024 (1 and all threads), splitkv decode "
     "H32/8 D128 Sk 8k/32k B1/B8 in f32, f16, bf16; CPU backend only; measures missing "
     "ceilings",
     XTOOL_PRESET_TARGETS_CHECK_LIMIT, 1, 1},
};
#define XTOOL__NPRESETS (int)(sizeof xtool__presets / sizeof xtool__presets[0])

static const xtool__preset *xtool__find(const char *name)
{
    for (int i = 0; i < XTOOL__NPRESETS; i++)
        if (!strcmp(name, xtool__presets[i].name))
            return &xtool__presets[i];
    return NULL;
}

void xtool_presets_list(FILE *f)
{
    fprintf(f, "presets (xattn bench --preset NAME; --scale F multiplies the lengths, for "
               "bert-base-padded and vit-b16 the batch):\n");
    for (int i = 0; i < XTOOL__NPRESETS; i++)
        fprintf(f, "  %-18s %s%s\n", xtool__presets[i].name, xtool__presets[i].summary,
                xtool__presets[i].model_sized ? " [scale 1/8 by default without a GPU]" : "");
}

int xtool_preset_exists(const char *name)
{
    return xtool__find(name) != NULL;
}

int xtool_preset_model_sized(const char *name)
{
    const xtool__preset *p = xtool__find(name);
    return p && p->model_sized;
}

void xtool_preset_get_settings(const char *name, xtool_preset_settings *out)
{
    memset(out, 0, sizeof *out);
    const xtool__preset *p = name ? xtool__find(name) : NULL;
    if (!p)
        return;
    out->model_sized = p->model_sized;
    out->check_limit = p->check_limit;
    out->measure_ceilings = p->measure_ceilings;
    out->cpu_only = p->cpu_only;
}

static int xtool__fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Lengths scaled: 1 stays 1 (decode), others to a multiple of 16 when >= 16. */
static int64_t xtool__scale_len(int64_t len, double s)
{
    if (len <= 1 || s == 1.0)
        return len;
    double v = (double)len * s;
    if (v >= 16)
        return (int64_t)(floor(v / 16 + 0.5) * 16);
    return v < 1 ? 1 : (int64_t)floor(v + 0.5);
}

static int64_t xtool__scale_window(int64_t w, double s)
{
    if (w < 0 || s == 1.0)
        return w;
    int64_t v = (int64_t)floor((double)(w + 1) * s + 0.5) - 1;
    return v < 0 ? 0 : v;
}

static int64_t xtool__scale_batch(int64_t b, double s)
{
    int64_t v = (int64_t)floor((double)b * s + 0.5);
    return v < 1 ? 1 : v;
}

/* A list of prototypes under construction. */
typedef struct xtool__protos {
    xtool_bench_case *v;
    int n, cap;
} xtool__protos;

static int xtool__push(xtool__protos *p, const xtool_case *c, const char *label, const int32_t *lq,
                       const int32_t *lk)
{
    if (p->n >= p->cap)
        return -1;
    xtool_bench_case *b = &p->v[p->n];
    memset(b, 0, sizeof *b);
    b->c = *c;
    b->c.seqlens_q = b->c.seqlens_k = NULL;
    if (lq || lk) {
        b->lq = malloc((size_t)c->batch * sizeof *b->lq);
        b->lk = malloc((size_t)c->batch * sizeof *b->lk);
        if (!b->lq || !b->lk) {
            free(b->lq);
            free(b->lk);
            return -1;
        }
        for (int64_t i = 0; i < c->batch; i++) {
            b->lq[i] = lq ? lq[i] : (int32_t)c->sq;
            b->lk[i] = lk ? lk[i] : (int32_t)c->sk;
        }
        b->c.seqlens_q = b->lq;
        b->c.seqlens_k = b->lk;
    }
    snprintf(b->family, sizeof b->family, "%s", label ? label : "");
    p->n++;
    return 0;
}

static void xtool__base(xtool_case *c, int64_t b, int64_t hq, int64_t hkv, int64_t d,
                        xattn_dtype dt, int causal)
{
    xtool_case_defaults(c);
    c->batch = b;
    c->heads = hq;
    c->kv_heads = hkv;
    c->head_dim = c->head_dim_v = d;
    c->dtype = c->kv_dtype = dt;
    c->causal = causal;
    c->align = XATTN_ALIGN_BOTTOM_RIGHT;
}

/* Pushes one family: the base case at each length (sq = 1 for decode, else sq = sk). */
static int xtool__family(xtool__protos *p, const xtool_case *base, const char *label,
                         const int64_t *lens, int nlens, int decode, double s, int quick)
{
    for (int i = 0; i < nlens && (!quick || i < 2); i++) {
        xtool_case c = *base;
        c.sk = xtool__scale_len(lens[i], s);
        c.sq = decode ? 1 : c.sk;
        if (xtool__push(p, &c, label, NULL, NULL))
            return -1;
    }
    return 0;
}

/* Sets the algorithms and CPU thread counts of the cases pushed since `from`. */
static void xtool__family_runs(xtool__protos *p, int from, const xattn_algo *algos, int na,
                               const int *threads, int nth)
{
    for (int i = from; i < p->n; i++) {
        xtool_bench_case *b = &p->v[i];
        b->n_algos = na;
        for (int a = 0; a < na; a++)
            b->algos[a] = algos[a];
        b->n_threads = nth;
        for (int t = 0; t < nth; t++)
            b->threads[t] = threads[t];
    }
}

/* The CPU speed targets (issue 7), at their real sizes:
 *   1. flash f32 non-causal, Hq 32, Hkv 8, D 128, Sq = Sk = 2048, B1 (and naive);
 *   2. flash causal, the same shape;
 *   3. flash D 64, Sq = Sk = 1024, 12 heads, B1 (and naive);
 *   4. splitkv decode: Sq 1, Hq 32, Hkv 8, D 128, Sk 8192 and 32768, B1 and B8, in f32,
 *      f16 and bf16;
 *   targets 1 and 3 at one thread and at all (the 1 -> n scaling block). */
static int xtool__cpu_targets(double s, int quick, xtool__protos *p)
{
    static const xattn_algo prefill[] = {XATTN_ALGO_FLASH, XATTN_ALGO_NAIVE};
    static const xattn_algo flash[] = {XATTN_ALGO_FLASH};
    static const xattn_algo decode[] = {XATTN_ALGO_SPLITKV};
    static const int one_and_all[] = {1, 0}, all[] = {0};
    static const xattn_dtype dts[] = {XATTN_DTYPE_F32, XATTN_DTYPE_F16, XATTN_DTYPE_BF16};
    xtool_case c;
    int from = p->n;
    static const int64_t l2048[] = {2048}, l1024[] = {1024}, ldec[] = {8192, 32768};
    xtool__base(&c, 1, 32, 8, 128, XATTN_DTYPE_F32, 0);
    if (xtool__family(p, &c, "target 1", l2048, 1, 0, s, quick))
        return -1;
    xtool__family_runs(p, from, prefill, 2, one_and_all, 2);
    from = p->n;
    c.causal = 1;
    if (xtool__family(p, &c, "target 2", l2048, 1, 0, s, quick))
        return -1;
    xtool__family_runs(p, from, flash, 1, all, 1);
    from = p->n;
    xtool__base(&c, 1, 12, 12, 64, XATTN_DTYPE_F32, 0);
    if (xtool__family(p, &c, "target 3", l1024, 1, 0, s, quick))
        return -1;
    xtool__family_runs(p, from, prefill, 2, one_and_all, 2);
    for (int d = 0; d < 3; d++)
        for (int64_t b = 1; b <= 8; b *= 8) {
            from = p->n;
            xtool__base(&c, b, 32, 8, 128, dts[d], 0);
            if (xtool__family(p, &c, "target 4 decode", ldec, 2, 1, s, quick))
                return -1;
            xtool__family_runs(p, from, decode, 1, all, 1);
        }
    return 0;
}

/* BERT-like sentence lengths: log-normal around max/4 (sigma 0.7), within
 * [8, max], from a fixed seed per (max, batch), so that every run and every
 * machine benchmarks the same batch. */
static void xtool__bert_lengths(int64_t max, int64_t batch, int32_t *out)
{
    uint64_t s = 0x5eedb0e7ull ^ ((uint64_t)max << 20) ^ (uint64_t)batch;
    for (int64_t i = 0; i < batch; i++) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            uint64_t z = (s += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            u[k] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
        }
        double g = sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
        double len = exp(log((double)max / 4.0) + 0.7 * g);
        int64_t l = (int64_t)floor(len + 0.5);
        if (l < 8)
            l = 8;
        if (l > max)
            l = max;
        out[i] = (int32_t)l;
    }
}

/* Serving-like ragged KV lengths: uniform in [max/8, max] from a fixed seed
 * per (max, batch), the first sequence at max. */
static void xtool__ragged_lengths(int64_t max, int64_t batch, int32_t *out)
{
    uint64_t s = 0x9a6edull ^ ((uint64_t)max << 20) ^ (uint64_t)batch;
    int64_t lo = max / 8 > 1 ? max / 8 : 1;
    for (int64_t i = 0; i < batch; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[i] = (int32_t)(i == 0 ? max : lo + (int64_t)(z % (uint64_t)(max - lo + 1)));
    }
}

static int xtool__preset_protos(const char *name, double s, int quick, xtool__protos *p)
{
    xtool_case c;
    if (!strcmp(name, "default")) {
        static const int64_t pre[] = {128, 256, 512, 1024}, dec[] = {1024, 4096, 16384};
        xtool__base(&c, 1, 8, 2, 64, XATTN_DTYPE_F32, 1);
        if (xtool__family(p, &c, "prefill", pre, 4, 0, s, quick))
            return -1;
        xtool__base(&c, 4, 8, 2, 64, XATTN_DTYPE_F16, 1);
        return xtool__family(p, &c, "decode", dec, 3, 1, s, quick);
    }
    if (!strcmp(name, "llama3-8b-prefill")) {
        static const int64_t l[] = {512, 1024, 2048, 4096, 8192};
        xtool__base(&c, 1, 32, 8, 128, XATTN_DTYPE_BF16, 1);
        return xtool__family(p, &c, "llama3-8b prefill", l, 5, 0, s, quick);
    }
    if (!strcmp(name, "llama3-8b-decode")) {
        static const int64_t l[] = {1024, 4096, 16384, 32768};
        xtool__base(&c, 8, 32, 8, 128, XATTN_DTYPE_BF16, 1);
        return xtool__family(p, &c, "llama3-8b decode", l, 4, 1, s, quick);
    }
    if (!strcmp(name, "mistral-7b-swa")) {
        static const int64_t l[] = {2048, 4096, 8192, 16384};
        xtool__base(&c, 1, 32, 8, 128, XATTN_DTYPE_BF16, 1);
        c.window_left = xtool__scale_window(4095, s);
        c.window_right = 0;
        return xtool__family(p, &c, "mistral-7b swa", l, 4, 0, s, quick);
    }
    if (!strcmp(name, "gemma2-softcap")) {
        static const int64_t l[] = {1024, 2048, 4096, 8192};
        xtool__base(&c, 1, 16, 8, 256, XATTN_DTYPE_BF16, 1);
        c.softcap = 50.0f;
        if (xtool__family(p, &c, "gemma2 global", l, 4, 0, s, quick))
            return -1;
        c.window_left = xtool__scale_window(4095, s);
        c.window_right = 0;
        return xtool__family(p, &c, "gemma2 local", l, 4, 0, s, quick);
    }
    if (!strcmp(name, "bert-base-padded")) {
        static const int64_t maxes[] = {128, 256, 512};
        xtool__base(&c, xtool__scale_batch(32, s), 12, 12, 64, XATTN_DTYPE_F16, 0);
        int32_t *lens = malloc((size_t)c.batch * sizeof *lens);
        if (!lens)
            return -1;
        for (int varlen = 0; varlen < 2; varlen++)
            for (int i = 0; i < 3 && (!quick || i < 2); i++) {
                c.sq = c.sk = maxes[i];
                c.varlen = varlen;
                xtool__bert_lengths(maxes[i], c.batch, lens);
                if (xtool__push(p, &c, varlen ? "bert-base packed" : "bert-base padded", lens,
                                lens)) {
                    free(lens);
                    return -1;
                }
            }
        free(lens);
        return 0;
    }
    if (!strcmp(name, "gpt-oss-20b-decode")) {
        /* The window is the model's 128 keys at every --scale: it is not a length. */
        static const int64_t l[] = {1024, 4096, 16384, 32768};
        xtool__base(&c, 4, 64, 8, 64, XATTN_DTYPE_BF16, 1);
        c.sinks = 1;
        c.window_left = 127;
        c.window_right = 0;
        if (xtool__family(p, &c, "gpt-oss-20b sliding", l, 4, 1, s, quick))
            return -1;
        c.window_left = c.window_right = -1;
        return xtool__family(p, &c, "gpt-oss-20b full", l, 4, 1, s, quick);
    }
    if (!strcmp(name, "llama3-8b-paged-decode")) {
        static const int64_t maxes[] = {4096, 32768};
        xtool__base(&c, 16, 32, 8, 128, XATTN_DTYPE_F16, 1);
        c.page_size = 16;
        c.sq = 1;
        int32_t lq[16], lk[16];
        for (int i = 0; i < 2 && (!quick || i < 1); i++) {
            c.sk = xtool__scale_len(maxes[i], s);
            xtool__ragged_lengths(c.sk, c.batch, lk);
            for (int b = 0; b < 16; b++)
                lq[b] = 1;
            if (xtool__push(p, &c, "llama3-8b paged decode", lq, lk))
                return -1;
        }
        return 0;
    }
    if (!strcmp(name, "cpu-targets"))
        return xtool__cpu_targets(s, quick, p);
    if (!strcmp(name, "vit-b16")) {
        static const int64_t l[] = {197, 577, 1025};
        xtool__base(&c, xtool__scale_batch(32, s), 12, 12, 64, XATTN_DTYPE_F16, 0);
        return xtool__family(p, &c, "vit-b16", l, 3, 0, 1.0, quick);
    }
    return -1;
}

/* ---- overrides and sweep axes ------------------------------------------------ */

enum {
    XTOOL__AX_DTYPE,
    XTOOL__AX_BATCH,
    XTOOL__AX_HEADS,
    XTOOL__AX_KV_HEADS,
    XTOOL__AX_SQ,
    XTOOL__AX_SK,
    XTOOL__AX_D,
    XTOOL__AX_DV,
    XTOOL__NAX
};

/* The shape of one point of the sweep (idx: the axes' positions): the
 * command line's values over the prototype's. Kv heads follow heads, Sk
 * follows Sq and Dv follows D where the prototype had them equal and the
 * command line does not set them. */
static void xtool__sweep_shape(const xtool_cli_opts *o, const xtool_bench_case *proto,
                               int preset_mode, const int *idx, xtool_case *c)
{
    int has_lengths = proto->lq != NULL;
    if (o->n_dtypes)
        c->dtype = c->kv_dtype = o->dtypes[idx[XTOOL__AX_DTYPE]];
    if (o->kv_dtype >= 0)
        c->kv_dtype = (xattn_dtype)o->kv_dtype;
    if (!has_lengths && o->batch.n)
        c->batch = o->batch.v[idx[XTOOL__AX_BATCH]];
    if (o->heads.n) {
        c->heads = o->heads.v[idx[XTOOL__AX_HEADS]];
        if (!o->kv_heads.n && !preset_mode)
            c->kv_heads = c->heads;
    }
    if (o->kv_heads.n)
        c->kv_heads = o->kv_heads.v[idx[XTOOL__AX_KV_HEADS]];
    if (!has_lengths) {
        int self = proto->c.sq == proto->c.sk;
        if (o->sq.n) {
            c->sq = o->sq.v[idx[XTOOL__AX_SQ]];
            if (self && !o->sk.n)
                c->sk = c->sq;
        }
        if (o->sk.n)
            c->sk = o->sk.v[idx[XTOOL__AX_SK]];
    }
    if (o->head_dim.n) {
        c->head_dim = o->head_dim.v[idx[XTOOL__AX_D]];
        if (!o->head_dim_v.n && proto->c.head_dim_v == proto->c.head_dim)
            c->head_dim_v = c->head_dim;
    }
    if (o->head_dim_v.n)
        c->head_dim_v = o->head_dim_v.v[idx[XTOOL__AX_DV]];
}

/* The single-valued case options the command line gives, over the prototype's. */
static void xtool__sweep_options(const xtool_cli_opts *o, xtool_case *c)
{
    if (o->given & XTOOL_GIVEN_LAYOUT)
        c->bhsd = o->bhsd;
    if (o->given & XTOOL_GIVEN_CAUSAL) {
        c->causal = 1;
        c->align = o->align;
    }
    if (o->given & XTOOL_GIVEN_WINDOW) {
        c->window_left = o->window_left;
        c->window_right = o->window_right;
    }
    if (o->given & XTOOL_GIVEN_SOFTCAP)
        c->softcap = o->softcap;
    if (o->given & XTOOL_GIVEN_SCALE)
        c->scale = o->scale;
    c->alibi |= o->alibi;
    c->bias |= o->bias;
    c->lse |= o->lse;
    c->sinks |= o->sinks;
    if (o->given & XTOOL_GIVEN_PAGE_SIZE)
        c->page_size = o->page_size;
    if (o->given & XTOOL_GIVEN_APPEND)
        c->append = o->append;
    if (o->given & XTOOL_GIVEN_SPLITS)
        c->num_splits = o->num_splits;
    c->seed = o->seed;
}

/* Every point of the product of the command line's lists, from one prototype. */
static int xtool__expand(const xtool_cli_opts *o, const xtool_bench_case *proto, int preset_mode,
                         xtool__protos *out, char *err, size_t errlen)
{
    const xtool_cli_ilist *lists[XTOOL__NAX] = {NULL,   &o->batch, &o->heads,    &o->kv_heads,
                                                &o->sq, &o->sk,    &o->head_dim, &o->head_dim_v};
    int count[XTOOL__NAX], idx[XTOOL__NAX] = {0};
    for (int a = 0; a < XTOOL__NAX; a++) {
        int n = a == XTOOL__AX_DTYPE ? o->n_dtypes : lists[a]->n;
        count[a] = n > 0 ? n : 1;
    }
    if (proto->lq && ((preset_mode && o->batch.n) || o->sq.n > 1 || o->sk.n > 1))
        return xtool__fail(err, errlen,
                           "bench: a batch of given lengths fixes --batch, and --sq/--sk take "
                           "one value with it");
    for (;;) {
        xtool_case c = proto->c;
        xtool__sweep_shape(o, proto, preset_mode, idx, &c);
        if (c.heads % c.kv_heads)
            return xtool__fail(err, errlen,
                               "bench: %lld query heads are not a multiple of %lld KV heads (set "
                               "--kv-heads too)",
                               (long long)c.heads, (long long)c.kv_heads);
        xtool__sweep_options(o, &c);
        if (xtool__push(out, &c, proto->family, proto->lq, proto->lk))
            return xtool__fail(err, errlen, "bench: too many cases (at most %d)", out->cap);
        xtool__family_runs(out, out->n - 1, proto->algos, proto->n_algos, proto->threads,
                           proto->n_threads);
        int a = 0;
        while (a < XTOOL__NAX && ++idx[a] == count[a])
            idx[a++] = 0;
        if (a == XTOOL__NAX)
            break;
    }
    return 0;
}

void xtool_bench_cases_free(xtool_bench_case *cases, int n)
{
    for (int i = 0; i < n; i++) {
        free(cases[i].lq);
        free(cases[i].lk);
        cases[i].lq = cases[i].lk = NULL;
    }
}

int xtool_bench_cases(const xtool_cli_opts *o, const char *preset, double len_scale,
                      xtool_bench_case *out, int cap, char *err, size_t errlen)
{
    enum { XTOOL__PROTO_CAP = 64 };
    xtool_bench_case protos_v[XTOOL__PROTO_CAP];
    xtool__protos protos = {protos_v, 0, XTOOL__PROTO_CAP};
    int preset_mode = preset != NULL;
    if (preset_mode) {
        if (!xtool__find(preset))
            return xtool__fail(err, errlen, "bench: no preset '%s' (see --list-presets)", preset);
        if (xtool__preset_protos(preset, len_scale, o->quick, &protos)) {
            xtool_bench_cases_free(protos.v, protos.n);
            return xtool__fail(err, errlen, "bench: preset '%s' could not be built (out of memory)",
                               preset);
        }
    } else {
        /* A sweep from the command line: one prototype, the lists expand it. */
        xtool_case c;
        int32_t *lq = NULL, *lk = NULL;
        xtool_cli_opts first = *o;
        first.sq.n = o->sq.n > 1 ? 1 : o->sq.n;
        first.sk.n = o->sk.n > 1 ? 1 : o->sk.n;
        if (xtool_case_from_opts(&first, &c, &lq, &lk, err, errlen))
            return -1;
        if (!lq) { /* the axes below set these */
            c.sq = c.sk = 256;
        }
        int rc = xtool__push(&protos, &c, NULL, lq, lk);
        free(lq);
        free(lk);
        if (rc)
            return xtool__fail(err, errlen, "bench: out of memory");
    }
    xtool__protos res = {out, 0, cap};
    for (int i = 0; i < protos.n; i++)
        if (xtool__expand(o, &protos.v[i], preset_mode, &res, err, errlen)) {
            xtool_bench_cases_free(protos.v, protos.n);
            xtool_bench_cases_free(res.v, res.n);
            return -1;
        }
    xtool_bench_cases_free(protos.v, protos.n);
    /* Keys, families, and duplicates (overrides can collapse a family) dropped. */
    int n = 0;
    for (int i = 0; i < res.n; i++) {
        xtool_bench_case *b = &out[i];
        xtool_case_describe(&b->c, b->key, sizeof b->key);
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup = !strcmp(out[j].key, b->key);
        if (dup) {
            free(b->lq);
            free(b->lk);
            continue;
        }
        char fam[160];
        xtool_case_family(&b->c, fam, sizeof fam);
        char label[64];
        snprintf(label, sizeof label, "%s", b->family);
        if (label[0])
            snprintf(b->family, sizeof b->family, "%s: %s", label, fam);
        else
            snprintf(b->family, sizeof b->family, "%s", fam);
        if (n != i)
            out[n] = *b;
        n++;
    }
    return n;
}
