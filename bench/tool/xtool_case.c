#include "xtool_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_reference.h"

void xtool_case_defaults(xtool_case *c)
{
    memset(c, 0, sizeof *c);
    c->dtype = c->kv_dtype = XATTN_DTYPE_F32;
    c->batch = 1;
    c->heads = c->kv_heads = 8;
    c->sq = c->sk = 256;
    c->head_dim = c->head_dim_v = 64;
    c->align = XATTN_ALIGN_BOTTOM_RIGHT;
    c->window_left = c->window_right = -1;
    c->algo = XATTN_ALGO_AUTO;
    c->seed = 42;
}

/* The tokens of a batch with per-sequence lengths (sums of the query and the
 * key lengths) and a 16-bit fingerprint of the lengths (FNV-1a), so that the
 * same batch gets the same case key. */
static unsigned xtool__lengths_sig(const xtool_case *c, int64_t *tq, int64_t *tk)
{
    uint64_t h = 1469598103934665603ull;
    *tq = *tk = 0;
    for (int64_t b = 0; b < c->batch; b++) {
        int32_t lq = c->seqlens_q ? c->seqlens_q[b] : (int32_t)c->sq;
        int32_t lk = c->seqlens_k ? c->seqlens_k[b] : (int32_t)c->sk;
        *tq += lq;
        *tk += lk;
        h = (h ^ (uint64_t)(uint32_t)lq) * 1099511628211ull;
        h = (h ^ (uint64_t)(uint32_t)lk) * 1099511628211ull;
    }
    return (unsigned)(h & 0xffff);
}

/* The options part of the description (" causal-br win..."), shared by the key and the family. */
static void xtool__describe_opts(const xtool_case *c, char *extra, size_t n)
{
    size_t k = 0;
    extra[0] = '\0';
#define XTOOL__ADD(...)                                                                            \
    do {                                                                                           \
        if (k < n)                                                                                 \
            k += (size_t)snprintf(extra + k, n - k, __VA_ARGS__);                                  \
    } while (0)
    if (c->bhsd)
        XTOOL__ADD(" bhsd");
    if (c->causal)
        XTOOL__ADD(" causal-%s", c->align == XATTN_ALIGN_TOP_LEFT ? "tl" : "br");
    else if ((c->window_left >= 0 || c->window_right >= 0 || c->alibi) &&
             c->align == XATTN_ALIGN_TOP_LEFT)
        XTOOL__ADD(" align-tl");
    if (c->window_left >= 0 || c->window_right >= 0)
        XTOOL__ADD(" win%lld,%lld", (long long)c->window_left, (long long)c->window_right);
    if (c->softcap > 0)
        XTOOL__ADD(" cap%g", (double)c->softcap);
    if (c->scale != 0)
        XTOOL__ADD(" scale%g", (double)c->scale);
    if (c->alibi)
        XTOOL__ADD(" alibi");
    if (c->bias)
        XTOOL__ADD(" bias");
    if (c->lse)
        XTOOL__ADD(" lse");
    if (c->sinks)
        XTOOL__ADD(" sinks");
    if (c->page_size > 0)
        XTOOL__ADD(" page%lld", (long long)c->page_size);
    if (c->append > 0)
        XTOOL__ADD(" append%lld", (long long)c->append);
    if (c->num_splits)
        XTOOL__ADD(" splits%d", c->num_splits);
    if (c->seqlens_q || c->seqlens_k) {
        int64_t tq, tk;
        unsigned h = xtool__lengths_sig(c, &tq, &tk);
        XTOOL__ADD(" %s%lld/%lld#%04x", c->varlen ? "varlen" : "padded", (long long)tq,
                   (long long)tk, h);
    }
#undef XTOOL__ADD
}

int xtool_case_lengths_legend(const xtool_case *c, char *out, size_t n)
{
    if (!c->seqlens_q && !c->seqlens_k)
        return 0;
    int64_t tq, tk;
    unsigned h = xtool__lengths_sig(c, &tq, &tk);
    snprintf(out, n,
             "%s%lld/%lld#%04x: %lld sequences %s, %lld query and %lld key tokens in all (the "
             "sums of their lengths); #%04x is a fingerprint of the lengths: the same batch gets "
             "the same one",
             c->varlen ? "varlen" : "padded", (long long)tq, (long long)tk, h, (long long)c->batch,
             c->varlen ? "packed one after the other (cu_seqlens, no padding)"
                       : "padded to the longest",
             (long long)tq, (long long)tk, h);
    return 1;
}

static void xtool__describe_types(const xtool_case *c, char *dv, size_t ndv, char *kv, size_t nkv)
{
    dv[0] = kv[0] = '\0';
    if (c->head_dim_v != c->head_dim)
        snprintf(dv, ndv, "/%lld", (long long)c->head_dim_v);
    if (c->kv_dtype != c->dtype)
        snprintf(kv, nkv, "/%s", xattn_dtype_name(c->kv_dtype));
}

void xtool_case_describe(const xtool_case *c, char *out, size_t n)
{
    char extra[192], dv[32], kv[16];
    xtool__describe_opts(c, extra, sizeof extra);
    xtool__describe_types(c, dv, sizeof dv, kv, sizeof kv);
    snprintf(out, n, "B%lld H%lld/%lld Sq%lld Sk%lld D%lld%s %s%s%s", (long long)c->batch,
             (long long)c->heads, (long long)c->kv_heads, (long long)c->sq, (long long)c->sk,
             (long long)c->head_dim, dv, xattn_dtype_name(c->dtype), kv, extra);
}

void xtool_case_family(const xtool_case *c, char *out, size_t n)
{
    char extra[192], dv[32], kv[16];
    xtool_case cc = *c;
    cc.seqlens_q = cc.seqlens_k = NULL; /* the lengths vary along the family */
    xtool__describe_opts(&cc, extra, sizeof extra);
    xtool__describe_types(c, dv, sizeof dv, kv, sizeof kv);
    const char *kind = c->sq == 1 ? " decode" : c->sq == c->sk ? "" : " Sq!=Sk";
    const char *lens = c->seqlens_q || c->seqlens_k ? (c->varlen ? " varlen" : " padded") : "";
    snprintf(out, n, "B%lld H%lld/%lld D%lld%s %s%s%s%s%s", (long long)c->batch,
             (long long)c->heads, (long long)c->kv_heads, (long long)c->head_dim, dv,
             xattn_dtype_name(c->dtype), kv, kind, extra, lens);
}

/* splitmix64: a small, well-mixed generator, so that a seed reproduces a case. */
static uint64_t xtool__rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float xtool__rng_uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(xtool__rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* n values of dtype dt: a q8_0 cache's values go through ggml's quantizer,
 * whole blocks (a partial last block padded with zeros; the library then
 * refuses a head dim that is not a multiple of 32, naming it). */
static xattn_status xtool__fill_q8_0(xattn_buffer *buf, size_t n, uint64_t *rng, float amp)
{
    const size_t nv = (n + XATTN_Q8_0_BLOCK - 1) / XATTN_Q8_0_BLOCK * XATTN_Q8_0_BLOCK;
    float *x = calloc(nv ? nv : 1, sizeof *x);
    void *h = malloc((size_t)xattn_dtype_bytes(XATTN_DTYPE_Q8_0, nv) + 1);
    xattn_status st = x && h ? XATTN_STATUS_OK : XATTN_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; st == XATTN_STATUS_OK && i < n; i++)
        x[i] = amp * xtool__rng_uniform(rng);
    if (st == XATTN_STATUS_OK)
        st = xattn_quantize_q8_0(x, h, (int64_t)nv);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(buf, 0, h, (size_t)xattn_dtype_bytes(XATTN_DTYPE_Q8_0, n));
    free(x);
    free(h);
    return st;
}

static xattn_status xtool__fill(xattn_buffer *buf, size_t n, xattn_dtype dt, uint64_t *rng,
                                float amp)
{
    if (dt == XATTN_DTYPE_Q8_0)
        return xtool__fill_q8_0(buf, n, rng, amp);
    size_t es = xattn_dtype_size(dt);
    void *h = malloc(n * es);
    if (!h)
        return XATTN_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        float x = amp * xtool__rng_uniform(rng);
        if (dt == XATTN_DTYPE_F32)
            ((float *)h)[i] = x;
        else if (dt == XATTN_DTYPE_F16)
            ((uint16_t *)h)[i] = xattn_f32_to_f16(x);
        else if (dt == XATTN_DTYPE_BF16)
            ((uint16_t *)h)[i] = xattn_f32_to_bf16(x);
        else /* an fp8 K/V cache */
            ((uint8_t *)h)[i] = xattn_f32_to_fp8(x, dt);
    }
    xattn_status st = xattn_buffer_write(buf, 0, h, n * es);
    free(h);
    return st;
}

static xattn_tensor xtool__view(const xtool_case *c, xattn_buffer *b, xattn_dtype dt, int64_t bs,
                                int64_t s, int64_t h, int64_t d)
{
    return c->bhsd ? xattn_tensor_bhsd(b, 0, dt, bs, s, h, d)
                   : xattn_tensor_bshd(b, 0, dt, bs, s, h, d);
}

xattn_status xtool_case_setup(xattn_ctx *ctx, const xtool_case *c, xtool_case_run *r)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    uint64_t rng = c->seed;
    xattn_status st;
#define XTOOL__TRY(x)                                                                              \
    do {                                                                                           \
        st = (x);                                                                                  \
        if (st != XATTN_STATUS_OK) {                                                               \
            xtool_case_teardown(r);                                                                \
            return st;                                                                             \
        }                                                                                          \
    } while (0)
    /* Tensor extents: padded [B, S, H, D], or packed [1, T, H, D]. */
    int64_t bs = c->batch, tq = c->sq, tk = c->sk;
    int64_t bias_sq = c->sq, bias_sk = c->sk;
    if (c->varlen) {
        if (!c->seqlens_q || !c->seqlens_k)
            return XATTN_STATUS_INVALID_ARGUMENT;
        r->cu_q = malloc((size_t)(c->batch + 1) * sizeof *r->cu_q);
        r->cu_k = malloc((size_t)(c->batch + 1) * sizeof *r->cu_k);
        if (!r->cu_q || !r->cu_k) {
            xtool_case_teardown(r);
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
        r->cu_q[0] = r->cu_k[0] = 0;
        bias_sq = bias_sk = 0;
        for (int64_t b = 0; b < c->batch; b++) {
            r->cu_q[b + 1] = r->cu_q[b] + c->seqlens_q[b];
            r->cu_k[b + 1] = r->cu_k[b] + c->seqlens_k[b];
            if (c->seqlens_q[b] > bias_sq)
                bias_sq = c->seqlens_q[b];
            if (c->seqlens_k[b] > bias_sk)
                bias_sk = c->seqlens_k[b];
        }
        bs = 1;
        tq = r->cu_q[c->batch];
        tk = r->cu_k[c->batch];
    }
    /* A paged cache and an append (padded batches only, as the library): the
     * call's seqlens_k are the cache lengths before the append, and K/V are a
     * pool of pages [pages, page_size, Hkv, D] when paged. */
    int64_t kv_b = bs, kv_s = tk, max_pages = 0;
    if (c->page_size > 0 || c->append > 0) {
        if (c->varlen || c->append < 0 || c->page_size < 0) {
            xtool_case_teardown(r);
            return XATTN_STATUS_UNSUPPORTED;
        }
        r->cache_lens = malloc((size_t)(c->batch ? c->batch : 1) * sizeof *r->cache_lens);
        if (!r->cache_lens) {
            xtool_case_teardown(r);
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
        int64_t pages = 0;
        for (int64_t b = 0; b < c->batch; b++) {
            int64_t len = c->seqlens_k ? c->seqlens_k[b] : c->sk;
            if (c->append > len) {
                xtool_case_teardown(r);
                return XATTN_STATUS_INVALID_LENGTHS;
            }
            r->cache_lens[b] = (int32_t)(len - c->append);
            if (c->page_size > 0) {
                int64_t n = (len + c->page_size - 1) / c->page_size;
                pages += n;
                max_pages = n > max_pages ? n : max_pages;
            }
        }
        if (c->page_size > 0) {
            max_pages = max_pages ? max_pages : 1;
            kv_b = pages ? pages : 1;
            kv_s = c->page_size;
        }
    }
    /* (K/V bytes through xattn_dtype_bytes: q8_0 has 34 per 32 values) */
    size_t qs = xattn_dtype_size(c->dtype);
    const xattn_dtype kd = c->kv_dtype;
    size_t nq = (size_t)(bs * tq * c->heads * c->head_dim);
    size_t nk = (size_t)(kv_b * kv_s * c->kv_heads * c->head_dim);
    size_t nv = (size_t)(kv_b * kv_s * c->kv_heads * c->head_dim_v);
    size_t no = (size_t)(bs * tq * c->heads * c->head_dim_v);
    /* Buffers of at least one byte: Sq or Sk may be 0. */
    XTOOL__TRY(xattn_buffer_alloc(ctx, nq ? nq * qs : 1, &r->q));
    XTOOL__TRY(xattn_buffer_alloc(ctx, nk ? (size_t)xattn_dtype_bytes(kd, nk) : 1, &r->k));
    XTOOL__TRY(xattn_buffer_alloc(ctx, nv ? (size_t)xattn_dtype_bytes(kd, nv) : 1, &r->v));
    XTOOL__TRY(xattn_buffer_alloc(ctx, no ? no * qs : 1, &r->o));
    if (nq)
        XTOOL__TRY(xtool__fill(r->q, nq, c->dtype, &rng, 1.0f));
    if (nk)
        XTOOL__TRY(xtool__fill(r->k, nk, c->kv_dtype, &rng, 1.0f));
    if (nv)
        XTOOL__TRY(xtool__fill(r->v, nv, c->kv_dtype, &rng, 1.0f));

    xattn_attn_desc *d = &r->desc;
    xattn_attn_desc_init(d);
    d->q = xtool__view(c, r->q, c->dtype, bs, tq, c->heads, c->head_dim);
    d->k = xtool__view(c, r->k, c->kv_dtype, kv_b, kv_s, c->kv_heads, c->head_dim);
    d->v = xtool__view(c, r->v, c->kv_dtype, kv_b, kv_s, c->kv_heads, c->head_dim_v);
    d->o = xtool__view(c, r->o, c->dtype, bs, tq, c->heads, c->head_dim_v);
    if (c->lse) {
        size_t n = (size_t)(bs * c->heads * tq);
        XTOOL__TRY(xattn_buffer_alloc(ctx, n ? n * 4 : 4, &r->lse));
        d->lse = xattn_tensor_bshd(r->lse, 0, XATTN_DTYPE_F32, bs, c->heads, tq, 1);
    }
    if (c->bias) { /* [1, Hq, Sq, Sk] f32, broadcast over the batch */
        size_t n = (size_t)(c->heads * bias_sq * bias_sk);
        XTOOL__TRY(xattn_buffer_alloc(ctx, n ? n * 4 : 4, &r->bias));
        if (n)
            XTOOL__TRY(xtool__fill(r->bias, n, XATTN_DTYPE_F32, &rng, 0.5f));
        d->bias = xattn_tensor_bshd(r->bias, 0, XATTN_DTYPE_F32, 1, c->heads, bias_sq, bias_sk);
    }
    if (c->alibi) { /* the ALiBi paper's geometric slopes */
        r->alibi = malloc((size_t)c->heads * sizeof(float));
        if (!r->alibi) {
            xtool_case_teardown(r);
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
        for (int64_t h = 0; h < c->heads; h++)
            r->alibi[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)c->heads);
        d->alibi_slopes = r->alibi;
    }
    if (c->sinks) { /* [1, 1, Hq, 1] f32 logits, about the size of a score */
        XTOOL__TRY(xattn_buffer_alloc(ctx, (size_t)c->heads * 4, &r->sinks));
        XTOOL__TRY(xtool__fill(r->sinks, (size_t)c->heads, XATTN_DTYPE_F32, &rng, 2.0f));
        d->sinks = xattn_tensor_bshd(r->sinks, 0, XATTN_DTYPE_F32, 1, 1, c->heads, 1);
    }
    if (c->append > 0) { /* k_new/v_new [B, N, Hkv, D/Dv] in the case's layout */
        size_t nkn = (size_t)(bs * c->append * c->kv_heads * c->head_dim);
        size_t nvn = (size_t)(bs * c->append * c->kv_heads * c->head_dim_v);
        XTOOL__TRY(
            xattn_buffer_alloc(ctx, nkn ? (size_t)xattn_dtype_bytes(kd, nkn) : 1, &r->k_new));
        XTOOL__TRY(
            xattn_buffer_alloc(ctx, nvn ? (size_t)xattn_dtype_bytes(kd, nvn) : 1, &r->v_new));
        if (nkn)
            XTOOL__TRY(xtool__fill(r->k_new, nkn, c->kv_dtype, &rng, 1.0f));
        if (nvn)
            XTOOL__TRY(xtool__fill(r->v_new, nvn, c->kv_dtype, &rng, 1.0f));
        d->k_new = xtool__view(c, r->k_new, c->kv_dtype, bs, c->append, c->kv_heads, c->head_dim);
        d->v_new = xtool__view(c, r->v_new, c->kv_dtype, bs, c->append, c->kv_heads, c->head_dim_v);
    }
    if (c->page_size > 0) { /* each sequence's pages: a shuffled share of the pool */
        int32_t *perm = malloc((size_t)kv_b * sizeof *perm);
        r->block_table =
            calloc((size_t)(c->batch ? c->batch : 1) * (size_t)max_pages, sizeof *r->block_table);
        if (!perm || !r->block_table) {
            free(perm);
            xtool_case_teardown(r);
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
        for (int64_t i = 0; i < kv_b; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = kv_b - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t j = (int64_t)(xtool__rng_next(&rng) % (uint64_t)(i + 1));
            int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int64_t next = 0;
        for (int64_t b = 0; b < c->batch; b++) {
            int64_t len = (int64_t)r->cache_lens[b] + c->append;
            for (int64_t g = 0; g < (len + c->page_size - 1) / c->page_size; g++)
                r->block_table[b * max_pages + g] = perm[next++];
        }
        free(perm);
        d->block_table = r->block_table;
        d->max_pages_per_seq = max_pages;
    }
    d->scale = c->scale;
    d->softcap = c->softcap;
    d->causal = c->causal;
    d->align = c->align;
    d->window_left = c->window_left;
    d->window_right = c->window_right;
    if (c->varlen) {
        d->cu_seqlens_q = r->cu_q;
        d->cu_seqlens_k = r->cu_k;
        d->num_seqs = c->batch;
    } else {
        d->seqlens_q = c->seqlens_q;
        d->seqlens_k = r->cache_lens ? r->cache_lens : c->seqlens_k;
    }
    d->algo = c->algo;
    d->num_splits = c->num_splits;
    return XATTN_STATUS_OK;
#undef XTOOL__TRY
}

void xtool_case_teardown(xtool_case_run *r)
{
    xattn_buffer_free(r->q);
    xattn_buffer_free(r->k);
    xattn_buffer_free(r->v);
    xattn_buffer_free(r->o);
    xattn_buffer_free(r->lse);
    xattn_buffer_free(r->bias);
    xattn_buffer_free(r->sinks);
    xattn_buffer_free(r->k_new);
    xattn_buffer_free(r->v_new);
    free(r->alibi);
    free(r->cu_q);
    free(r->cu_k);
    free(r->block_table);
    free(r->cache_lens);
    memset(r, 0, sizeof *r);
}

/* ---- reference ------------------------------------------------------------ */

/* Query-key pairs of sequence b of the descriptor (its rectangle: lengths, not masks). */
static double xtool__pairs(const xattn_attn_desc *d, int64_t b)
{
    if (d->cu_seqlens_q)
        return (double)(d->cu_seqlens_q[b + 1] - d->cu_seqlens_q[b]) *
               (double)(d->cu_seqlens_k[b + 1] - d->cu_seqlens_k[b]);
    double lq = d->seqlens_q ? d->seqlens_q[b] : (double)d->q.shape[1];
    double lk = d->seqlens_k ? d->seqlens_k[b] : (double)d->k.shape[1];
    if (d->k_new.buffer) /* the cache lengths before the append */
        lk += (double)d->k_new.shape[1];
    return lq * lk;
}

/* The descriptor of the sub-batch: sequence 0 and the g = Hq/Hkv query heads
 * that read KV head 0. Views keep their strides (offset 0 is where both start). */
static void xtool__sub_desc(const xattn_attn_desc *d, xattn_attn_desc *s)
{
    *s = *d;
    int64_t g = d->q.shape[2] / (d->k.shape[2] ? d->k.shape[2] : 1);
    s->q.shape[2] = s->o.shape[2] = g;
    s->k.shape[2] = s->v.shape[2] = 1;
    s->k_new.shape[2] = s->v_new.shape[2] = 1;
    s->k_new.shape[0] = s->v_new.shape[0] = 1;
    if (s->sinks.buffer)
        s->sinks.shape[2] = g;
    if (s->lse.buffer)
        s->lse.shape[1] = g;
    if (s->bias.buffer && s->bias.shape[1] != 1)
        s->bias.shape[1] = g;
    if (s->bias.buffer)
        s->bias.shape[0] = 1;
    if (d->cu_seqlens_q) {
        s->num_seqs = d->num_seqs > 0 ? 1 : 0;
        int64_t tq = d->num_seqs > 0 ? d->cu_seqlens_q[1] : 0;
        int64_t tk = d->num_seqs > 0 ? d->cu_seqlens_k[1] : 0;
        s->q.shape[1] = s->o.shape[1] = tq;
        s->k.shape[1] = s->v.shape[1] = tk;
        if (s->lse.buffer)
            s->lse.shape[2] = tq;
    } else {
        s->q.shape[0] = s->o.shape[0] = 1;
        if (!d->block_table) /* a page pool keeps its pages; sequence 0 is row 0 of the table */
            s->k.shape[0] = s->v.shape[0] = 1;
        if (s->lse.buffer)
            s->lse.shape[0] = 1;
    }
}

static double xtool__ref_cost(const xattn_attn_desc *d)
{
    int64_t nb = d->cu_seqlens_q ? d->num_seqs : d->q.shape[0];
    double pairs = 0;
    for (int64_t b = 0; b < nb; b++)
        pairs += xtool__pairs(d, b);
    return 2.0 * pairs * (double)d->q.shape[2] * (double)(d->q.shape[3] + d->v.shape[3]);
}

static size_t xtool__count(const xattn_tensor *t)
{
    return (size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]);
}

xattn_status xtool_case_ref_compute(xtool_case_run *r, double limit, xtool_case_ref *ref)
{
    memset(ref, 0, sizeof *ref);
    xattn_attn_desc sub;
    xtool__sub_desc(&r->desc, &sub);
    double full = xtool__ref_cost(&r->desc), part = xtool__ref_cost(&sub);
    const xattn_attn_desc *d = &r->desc;
    if (full <= limit) {
        ref->mode = XTOOL_REF_FULL;
        ref->cost_flops = full;
    } else if (part <= limit && part < full) {
        ref->mode = XTOOL_REF_SUB;
        ref->cost_flops = part;
        snprintf(
            ref->note, sizeof ref->note,
            "checked sequence 0 x KV head 0 (%.2g of %.2g reference FLOPs; --check-limit %.2g)",
            part, full, limit);
        d = &sub;
    } else {
        ref->mode = XTOOL_REF_SKIPPED;
        ref->cost_flops = 0;
        snprintf(ref->note, sizeof ref->note,
                 "not checked: the reference needs %.2g FLOPs even for one sequence and KV head "
                 "(--check-limit %.2g)",
                 part < full ? part : full, limit);
        return XATTN_STATUS_OK;
    }
    size_t n = xtool__count(&d->o);
    size_t nl = (size_t)(d->q.shape[0] * d->q.shape[1] * d->q.shape[2]);
    ref->o = malloc((n ? n : 1) * sizeof *ref->o);
    if (d->lse.buffer)
        ref->lse = malloc((nl ? nl : 1) * sizeof *ref->lse);
    if (!ref->o || (d->lse.buffer && !ref->lse)) {
        xtool_case_ref_free(ref);
        return XATTN_STATUS_OUT_OF_MEMORY;
    }
    xattn_status st = n ? xattn_reference_attention(r->ctx, d, ref->o, ref->lse) : XATTN_STATUS_OK;
    if (st != XATTN_STATUS_OK)
        xtool_case_ref_free(ref);
    return st;
}

void xtool_case_ref_free(xtool_case_ref *ref)
{
    free(ref->o);
    free(ref->lse);
    ref->o = ref->lse = NULL;
}

static double xtool__round_to(double x, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_F16)
        return xattn_f16_to_f32(xattn_f32_to_f16((float)x));
    if (dt == XATTN_DTYPE_BF16)
        return xattn_bf16_to_f32(xattn_f32_to_bf16((float)x));
    return (float)x;
}

static double xtool__load(const unsigned char *raw, xattn_dtype dt, size_t at)
{
    if (dt == XATTN_DTYPE_F32) {
        float f;
        memcpy(&f, raw + at * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, raw + at * 2, 2);
    return dt == XATTN_DTYPE_F16 ? xattn_f16_to_f32(h) : xattn_bf16_to_f32(h);
}

xattn_status xtool_case_check(xtool_case_run *r, const xtool_case_ref *ref, xtool_case_error *e)
{
    memset(e, 0, sizeof *e);
    if (ref->mode == XTOOL_REF_SKIPPED) {
        e->pass = 1;
        return XATTN_STATUS_OK;
    }
    e->checked = 1;
    xattn_attn_desc sub;
    const xattn_attn_desc *d = &r->desc;
    if (ref->mode == XTOOL_REF_SUB) {
        xtool__sub_desc(&r->desc, &sub);
        d = &sub;
    }
    size_t n = xtool__count(&d->o);
    if (n == 0) {
        e->pass = 1;
        return XATTN_STATUS_OK;
    }
    size_t bytes = xattn_buffer_size(r->o);
    unsigned char *raw = malloc(bytes);
    if (!raw)
        return XATTN_STATUS_OUT_OF_MEMORY;
    xattn_status st = xattn_buffer_read(r->o, 0, raw, bytes);
    if (st == XATTN_STATUS_OK) {
        double num = 0, den = 0, numr = 0;
        const int64_t *sh = d->o.shape, *sd = d->o.strides;
        size_t idx = 0;
        for (int64_t b = 0; b < sh[0]; b++)
            for (int64_t s = 0; s < sh[1]; s++)
                for (int64_t h = 0; h < sh[2]; h++)
                    for (int64_t x = 0; x < sh[3]; x++, idx++) {
                        size_t at = (size_t)(b * sd[0] + s * sd[1] + h * sd[2] + x * sd[3]);
                        double out = xtool__load(raw, d->o.dtype, at), rv = ref->o[idx];
                        if (isnan(rv) || isnan(out)) {
                            e->nan_mismatch += isnan(rv) != isnan(out);
                            continue;
                        }
                        double diff = out - rv, diffr = xtool__round_to(rv, d->o.dtype) - rv;
                        num += diff * diff;
                        numr += diffr * diffr;
                        den += rv * rv;
                        if (fabs(diff) > e->max_abs)
                            e->max_abs = fabs(diff);
                    }
        e->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
        e->rel_l2_rounded = den > 0 ? sqrt(numr / den) : sqrt(numr);
        e->bound = d->o.dtype == XATTN_DTYPE_F32 ? 1e-5 : 3.0 * e->rel_l2_rounded + 1e-5;
        e->pass = !e->nan_mismatch && e->rel_l2 <= e->bound;
    }
    free(raw);
    if (st == XATTN_STATUS_OK && ref->lse && d->lse.buffer) {
        bytes = xattn_buffer_size(r->lse);
        raw = malloc(bytes);
        if (!raw)
            return XATTN_STATUS_OUT_OF_MEMORY;
        st = xattn_buffer_read(r->lse, 0, raw, bytes);
        const int64_t *sh = d->lse.shape, *sd = d->lse.strides;
        size_t idx = 0;
        for (int64_t b = 0; st == XATTN_STATUS_OK && b < sh[0]; b++)
            for (int64_t h = 0; h < sh[1]; h++)
                for (int64_t s = 0; s < sh[2]; s++, idx++) {
                    double out = xtool__load(raw, XATTN_DTYPE_F32,
                                             (size_t)(b * sd[0] + h * sd[1] + s * sd[2]));
                    double rv = ref->lse[idx];
                    if (isnan(rv) || isnan(out) || isinf(rv) || isinf(out)) {
                        int same = (isnan(rv) && isnan(out)) ||
                                   (isinf(rv) && isinf(out) && (rv > 0) == (out > 0));
                        e->lse_mismatch += !same;
                        continue;
                    }
                    double err = fabs(out - rv) / (1.0 + fabs(rv));
                    if (err > e->lse_max_err)
                        e->lse_max_err = err;
                }
        free(raw);
        if (e->lse_max_err > 1e-4)
            e->lse_mismatch++;
        if (e->lse_mismatch)
            e->pass = 0;
    }
    return st;
}

/* ---- memory estimate ------------------------------------------------------- */

void xtool_case_mem_estimate(const xtool_case *c, xattn_algo algo, int check, double check_limit,
                             int threads, xtool_case_mem *m)
{
    memset(m, 0, sizeof *m);
    const double qs = (double)xattn_dtype_size(c->dtype),
                 ks = (double)xattn_dtype_bytes(c->kv_dtype, 1024) / 1024.0; /* q8_0: 34/32 */
    const double B = (double)c->batch, Hq = (double)c->heads, Hkv = (double)c->kv_heads;
    const double D = (double)c->head_dim, Dv = (double)c->head_dim_v;
    /* Tokens of the tensors (xtool_case_setup): padded B x S, or packed sums. */
    double tq = B * (double)c->sq, tk = B * (double)c->sk, pairs = 0, pairs0 = 0, lq0 = 0, lk0 = 0;
    if (c->varlen && c->seqlens_q && c->seqlens_k) {
        tq = tk = 0;
        for (int64_t b = 0; b < c->batch; b++) {
            tq += c->seqlens_q[b];
            tk += c->seqlens_k[b];
        }
    }
    for (int64_t b = 0; b < c->batch; b++) {
        double lq = c->seqlens_q ? c->seqlens_q[b] : (double)c->sq;
        double lk = c->seqlens_k ? c->seqlens_k[b] : (double)c->sk;
        pairs += lq * lk;
        if (b == 0) {
            pairs0 = lq * lk;
            lq0 = lq;
            lk0 = lk;
        }
    }
    const double q = tq * Hq * D * qs, k = tk * Hkv * D * ks, v = tk * Hkv * Dv * ks;
    const double o = tq * Hq * Dv * qs, lse = c->lse ? tq * Hq * 4 : 0;
    const double bias = c->bias ? Hq * (double)c->sq * (double)c->sk * 4 : 0;
    m->tensors = q + k + v + o + lse + bias;
    m->staging = fmax(fmax(q, k), fmax(v, bias));

    if (algo == XATTN_ALGO_AUTO) /* the library's rule: split-KV for decode shapes, else FLASH */
        algo = c->sq <= 8 && c->sk >= 512 ? XATTN_ALGO_SPLITKV : XATTN_ALGO_FLASH;
    const double rows = B * Hq * (double)c->sq;
    if (algo == XATTN_ALGO_NAIVE) {
        m->workspace = rows * (double)c->sk * 4;
    } else if (algo == XATTN_ALGO_SPLITKV) {
        /* Partial O and LSE of every row in every chunk; chunks of at least 256
         * keys, about two per thread over the (sequence, KV head) work items. */
        double splits = c->num_splits;
        if (splits <= 0) {
            double units = B * Hkv > 0 ? B * Hkv : 1;
            splits = fmin(ceil(2.0 * (threads > 0 ? threads : 1) / units), (double)c->sk / 256);
        }
        m->workspace = fmax(splits, 1) * rows * (Dv + 1) * 4;
    }

    if (!check)
        return;
    /* xtool_case_ref_compute's choice: the whole case, sequence 0 x the g query
     * heads of KV head 0, or nothing; then it holds every input it reads (the
     * span of each view) and its outputs in double, and xtool_case_check reads
     * the whole O back. */
    const double g = Hkv > 0 ? Hq / Hkv : Hq;
    const double full = 2.0 * pairs * Hq * (D + Dv), part = 2.0 * pairs0 * g * (D + Dv);
    double ein, eout;
    if (full <= check_limit) {
        ein = (q / qs) + (k + v) / ks + bias / 4;
        eout = tq * Hq * (Dv + (c->lse ? 1 : 0));
    } else if (part <= check_limit && part < full) {
        /* The views keep their strides: a sequence's rows of every head. */
        ein =
            lq0 * Hq * D + lk0 * Hkv * (D + Dv) + (c->bias ? g * (double)c->sq * (double)c->sk : 0);
        eout = lq0 * g * (Dv + (c->lse ? 1 : 0));
    } else {
        return;
    }
    m->reference = 8.0 * (ein + eout) + fmax(o, fmax(q, fmax(k, v)));
}

double xtool_case_mem_peak(const xtool_case_mem *m)
{
    return m->tensors + fmax(m->staging, fmax(m->workspace, m->reference));
}

double xtool_case_dense_flops(const xtool_case *c)
{
    return 2.0 * (double)c->batch * (double)c->heads * (double)c->sq * (double)c->sk *
           (double)(c->head_dim + c->head_dim_v);
}
