#include "xattn_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_reference.h"

void xattn_case_defaults(xattn_case *c)
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

void xattn_case_describe(const xattn_case *c, char *out, size_t n)
{
    char extra[128] = "";
    size_t k = 0;
    if (c->causal)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " causal-%s",
                              c->align == XATTN_ALIGN_TOP_LEFT ? "tl" : "br");
    if (c->window_left >= 0 || c->window_right >= 0)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " win%lld,%lld",
                              (long long)c->window_left, (long long)c->window_right);
    if (c->softcap > 0)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " cap%g", (double)c->softcap);
    if (c->alibi)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " alibi");
    if (c->bias)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " bias");
    if (c->seqlens_k)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " padded");
    char dv[32] = "";
    if (c->head_dim_v != c->head_dim)
        snprintf(dv, sizeof dv, "/%lld", (long long)c->head_dim_v);
    char kv[16] = "";
    if (c->kv_dtype != c->dtype)
        snprintf(kv, sizeof kv, "/%s", xattn_dtype_name(c->kv_dtype));
    snprintf(out, n, "B%lld H%lld/%lld Sq%lld Sk%lld D%lld%s %s%s%s%s", (long long)c->batch,
             (long long)c->heads, (long long)c->kv_heads, (long long)c->sq, (long long)c->sk,
             (long long)c->head_dim, dv, xattn_dtype_name(c->dtype), kv, c->bhsd ? " bhsd" : "",
             extra);
}

/* splitmix64: a small, well-mixed generator, so that a seed reproduces a case. */
static uint64_t xattn__rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float xattn__rng_uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(xattn__rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static xattn_status xattn__fill(xattn_buffer *buf, size_t n, xattn_dtype dt, uint64_t *rng,
                                float amp)
{
    size_t es = xattn_dtype_size(dt);
    void *h = malloc(n * es);
    if (!h)
        return XATTN_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        float x = amp * xattn__rng_uniform(rng);
        if (dt == XATTN_DTYPE_F32)
            ((float *)h)[i] = x;
        else if (dt == XATTN_DTYPE_F16)
            ((uint16_t *)h)[i] = xattn_f32_to_f16(x);
        else
            ((uint16_t *)h)[i] = xattn_f32_to_bf16(x);
    }
    xattn_status st = xattn_buffer_write(buf, 0, h, n * es);
    free(h);
    return st;
}

static xattn_tensor xattn__view(const xattn_case *c, xattn_buffer *b, xattn_dtype dt, int64_t s,
                                int64_t h, int64_t d)
{
    return c->bhsd ? xattn_tensor_bhsd(b, 0, dt, c->batch, s, h, d)
                   : xattn_tensor_bshd(b, 0, dt, c->batch, s, h, d);
}

xattn_status xattn_case_setup(xattn_ctx *ctx, const xattn_case *c, xattn_case_run *r)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    uint64_t rng = c->seed;
    size_t qs = xattn_dtype_size(c->dtype), ks = xattn_dtype_size(c->kv_dtype);
    size_t nq = (size_t)(c->batch * c->sq * c->heads * c->head_dim);
    size_t nk = (size_t)(c->batch * c->sk * c->kv_heads * c->head_dim);
    size_t nv = (size_t)(c->batch * c->sk * c->kv_heads * c->head_dim_v);
    size_t no = (size_t)(c->batch * c->sq * c->heads * c->head_dim_v);
    xattn_status st;
#define XATTN__TRY(x)                  \
    do {                               \
        st = (x);                      \
        if (st != XATTN_STATUS_OK) {   \
            xattn_case_teardown(r);    \
            return st;                 \
        }                              \
    } while (0)
    /* Buffers of at least one byte: Sq or Sk may be 0. */
    XATTN__TRY(xattn_buffer_alloc(ctx, nq ? nq * qs : 1, &r->q));
    XATTN__TRY(xattn_buffer_alloc(ctx, nk ? nk * ks : 1, &r->k));
    XATTN__TRY(xattn_buffer_alloc(ctx, nv ? nv * ks : 1, &r->v));
    XATTN__TRY(xattn_buffer_alloc(ctx, no ? no * qs : 1, &r->o));
    if (nq)
        XATTN__TRY(xattn__fill(r->q, nq, c->dtype, &rng, 1.0f));
    if (nk)
        XATTN__TRY(xattn__fill(r->k, nk, c->kv_dtype, &rng, 1.0f));
    if (nv)
        XATTN__TRY(xattn__fill(r->v, nv, c->kv_dtype, &rng, 1.0f));

    xattn_attn_desc *d = &r->desc;
    xattn_attn_desc_init(d);
    d->q = xattn__view(c, r->q, c->dtype, c->sq, c->heads, c->head_dim);
    d->k = xattn__view(c, r->k, c->kv_dtype, c->sk, c->kv_heads, c->head_dim);
    d->v = xattn__view(c, r->v, c->kv_dtype, c->sk, c->kv_heads, c->head_dim_v);
    d->o = xattn__view(c, r->o, c->dtype, c->sq, c->heads, c->head_dim_v);
    if (c->lse) {
        size_t n = (size_t)(c->batch * c->heads * c->sq);
        XATTN__TRY(xattn_buffer_alloc(ctx, n ? n * 4 : 4, &r->lse));
        d->lse = xattn_tensor_bshd(r->lse, 0, XATTN_DTYPE_F32, c->batch, c->heads, c->sq, 1);
    }
    if (c->bias) { /* [1, Hq, Sq, Sk] f32, broadcast over the batch */
        size_t n = (size_t)(c->heads * c->sq * c->sk);
        XATTN__TRY(xattn_buffer_alloc(ctx, n ? n * 4 : 4, &r->bias));
        if (n)
            XATTN__TRY(xattn__fill(r->bias, n, XATTN_DTYPE_F32, &rng, 0.5f));
        d->bias = xattn_tensor_bshd(r->bias, 0, XATTN_DTYPE_F32, 1, c->heads, c->sq, c->sk);
    }
    if (c->alibi) { /* the ALiBi paper's geometric slopes */
        r->alibi = malloc((size_t)c->heads * sizeof(float));
        if (!r->alibi) {
            xattn_case_teardown(r);
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
        for (int64_t h = 0; h < c->heads; h++)
            r->alibi[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)c->heads);
        d->alibi_slopes = r->alibi;
    }
    d->scale = c->scale;
    d->softcap = c->softcap;
    d->causal = c->causal;
    d->align = c->align;
    d->window_left = c->window_left;
    d->window_right = c->window_right;
    d->seqlens_k = c->seqlens_k;
    d->algo = c->algo;
    d->num_splits = c->num_splits;
    return XATTN_STATUS_OK;
#undef XATTN__TRY
}

void xattn_case_teardown(xattn_case_run *r)
{
    xattn_buffer_free(r->q);
    xattn_buffer_free(r->k);
    xattn_buffer_free(r->v);
    xattn_buffer_free(r->o);
    xattn_buffer_free(r->lse);
    xattn_buffer_free(r->bias);
    free(r->alibi);
    memset(r, 0, sizeof *r);
}

static double xattn__round_to(double x, xattn_dtype dt)
{
    if (dt == XATTN_DTYPE_F16)
        return xattn_f16_to_f32(xattn_f32_to_f16((float)x));
    if (dt == XATTN_DTYPE_BF16)
        return xattn_bf16_to_f32(xattn_f32_to_bf16((float)x));
    return (float)x;
}

static size_t xattn__out_count(const xattn_attn_desc *d)
{
    return (size_t)(d->o.shape[0] * d->o.shape[1] * d->o.shape[2] * d->o.shape[3]);
}

xattn_status xattn_case_reference(xattn_case_run *r, double **ref)
{
    size_t n = xattn__out_count(&r->desc);
    *ref = malloc((n ? n : 1) * sizeof **ref);
    if (!*ref)
        return XATTN_STATUS_OUT_OF_MEMORY;
    xattn_status st = n ? xattn_reference_attention(r->ctx, &r->desc, *ref, NULL) : XATTN_STATUS_OK;
    if (st != XATTN_STATUS_OK) {
        free(*ref);
        *ref = NULL;
    }
    return st;
}

xattn_status xattn_case_compare(xattn_case_run *r, const double *ref, xattn_case_error *e)
{
    memset(e, 0, sizeof *e);
    const xattn_attn_desc *d = &r->desc;
    size_t n = xattn__out_count(d);
    if (n == 0) {
        e->pass = 1;
        return XATTN_STATUS_OK;
    }
    size_t es = xattn_dtype_size(d->o.dtype);
    unsigned char *raw = malloc(n * es);
    if (!raw)
        return XATTN_STATUS_OUT_OF_MEMORY;
    xattn_status st = xattn_buffer_read(r->o, 0, raw, n * es);
    if (st == XATTN_STATUS_OK) {
        double num = 0, den = 0, numr = 0;
        const int64_t *sh = d->o.shape, *sd = d->o.strides;
        size_t idx = 0;
        for (int64_t b = 0; b < sh[0]; b++)
            for (int64_t s = 0; s < sh[1]; s++)
                for (int64_t h = 0; h < sh[2]; h++)
                    for (int64_t x = 0; x < sh[3]; x++, idx++) {
                        size_t at = (size_t)(b * sd[0] + s * sd[1] + h * sd[2] + x * sd[3]);
                        double out;
                        if (d->o.dtype == XATTN_DTYPE_F32)
                            out = ((float *)raw)[at];
                        else if (d->o.dtype == XATTN_DTYPE_F16)
                            out = xattn_f16_to_f32(((uint16_t *)raw)[at]);
                        else
                            out = xattn_bf16_to_f32(((uint16_t *)raw)[at]);
                        double rv = ref[idx];
                        if (isnan(rv) || isnan(out)) {
                            e->nan_mismatch += isnan(rv) != isnan(out);
                            continue;
                        }
                        double diff = out - rv, diffr = xattn__round_to(rv, d->o.dtype) - rv;
                        num += diff * diff;
                        numr += diffr * diffr;
                        den += rv * rv;
                        if (fabs(diff) > e->max_abs)
                            e->max_abs = fabs(diff);
                    }
        e->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
        e->rel_l2_rounded = den > 0 ? sqrt(numr / den) : sqrt(numr);
        double bound = d->o.dtype == XATTN_DTYPE_F32 && d->k.dtype == XATTN_DTYPE_F32
                           ? 1e-5
                           : 3.0 * e->rel_l2_rounded + 1e-5;
        e->pass = !e->nan_mismatch && e->rel_l2 <= bound;
    }
    free(raw);
    return st;
}

double xattn_case_dense_flops(const xattn_case *c)
{
    return 2.0 * (double)c->batch * (double)c->heads * (double)c->sq * (double)c->sk *
           (double)(c->head_dim + c->head_dim_v);
}

double xattn_case_useful_flops(const xattn_case *c)
{
    double pairs = 0;
    for (int64_t b = 0; b < c->batch; b++) {
        int64_t lk = c->seqlens_k ? c->seqlens_k[b] : c->sk, lq = c->sq;
        for (int64_t i = 0; i < lq; i++) {
            int64_t p = c->align == XATTN_ALIGN_BOTTOM_RIGHT ? i + lk - lq : i;
            int64_t lo = 0, hi = lk - 1;
            if (c->causal && p < hi)
                hi = p;
            if (c->window_right >= 0 && p + c->window_right < hi)
                hi = p + c->window_right;
            if (c->window_left >= 0 && p - c->window_left > lo)
                lo = p - c->window_left;
            if (hi >= lo)
                pairs += (double)(hi - lo + 1);
        }
    }
    return 2.0 * (double)c->heads * pairs * (double)(c->head_dim + c->head_dim_v);
}
