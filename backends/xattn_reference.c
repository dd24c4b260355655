/*
 * Reference attention in double precision (see include/xattn_reference.h).
 *
 * Deliberately plain: one query row at a time, every score computed, masks
 * evaluated straight from the rules of docs/semantics.md. It shares
 * no code with the kernels: it resolves the public descriptor itself (never
 * xattn_problem), decodes f16/bf16 from their bits itself, and reads the
 * inputs back through the public xattn_buffer_read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_internal.h"
#include "xattn_reference.h"

/* ---- element decoding ---------------------------------------------------- */

static double xattn_ref__f16_bits_to_double(uint16_t h)
{
    int sign = (h >> 15) & 1;
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    double v;
    if (exponent == 0)
        v = ldexp((double)mantissa, -24); /* zero or subnormal */
    else if (exponent == 31)
        v = mantissa ? NAN : INFINITY;
    else
        v = ldexp((double)(mantissa + 1024), exponent - 25);
    return sign ? -v : v;
}

static double xattn_ref__bf16_bits_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

/* An 8-bit float from its fields: exponent bits eb, mantissa bits mb; E4M3
 * has no infinities and one NaN pattern per sign, E5M2 is IEEE-like. */
static double xattn_ref__fp8_to_double(uint8_t x, int eb, int mb)
{
    const int bias = (1 << (eb - 1)) - 1, emax = (1 << eb) - 1;
    const int e = (x >> mb) & emax, m = x & ((1 << mb) - 1);
    double v;
    if (eb == 5 && e == emax)
        v = m ? NAN : INFINITY;
    else if (eb == 4 && e == emax && m == (1 << mb) - 1)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)m / (double)(1 << mb), 1 - bias);
    else
        v = ldexp(1.0 + (double)m / (double)(1 << mb), e - bias);
    return (x & 0x80) ? -v : v;
}

static double xattn_ref__f32_bits_to_double(const unsigned char *p)
{
    float f;
    memcpy(&f, p, sizeof f);
    return (double)f;
}

/* ---- a tensor view read back into host doubles --------------------------- */

typedef struct xattn_ref_view {
    double *data;      /* the view's span, element 0 = the view's first element */
    int64_t stride[4]; /* elements; 0 where the extent is 1 (stride ignored) */
    int64_t shape[4];
} xattn_ref_view;

static void xattn_ref__view_free(xattn_ref_view *v)
{
    free(v->data);
    v->data = NULL;
}

/* Reads every element the view can address (its span) and decodes it. The
 * descriptor was validated, so the span lies inside the buffer. */
static xattn_status xattn_ref__view_read(const xattn_tensor *t, const char *name,
                                         xattn_ref_view *out)
{
    memset(out, 0, sizeof *out);
    int64_t span = 1;
    for (int k = 0; k < 4; k++) {
        out->shape[k] = t->shape[k];
        out->stride[k] = t->shape[k] > 1 ? t->strides[k] : 0;
        if (t->shape[k] <= 0)
            span = 0;
    }
    if (span == 0)
        return XATTN_STATUS_OK; /* nothing to read (Sq or Sk of 0) */
    for (int k = 0; k < 4; k++)
        span += (t->shape[k] - 1) * out->stride[k];

    size_t esize = xattn_dtype_size(t->dtype);
    size_t bytes = (size_t)xattn_dtype_bytes(t->dtype, (uint64_t)span);
    unsigned char *raw = malloc(bytes);
    out->data = malloc((size_t)span * sizeof(double));
    if (!raw || !out->data) {
        free(raw);
        xattn_ref__view_free(out);
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "reference: cannot allocate %zu bytes of host memory to read %s",
                            bytes + (size_t)span * sizeof(double), name);
    }
    xattn_status st = xattn_buffer_read(t->buffer, t->offset, raw, bytes);
    if (st != XATTN_STATUS_OK) {
        free(raw);
        xattn_ref__view_free(out);
        return st;
    }
    for (int64_t e = 0; e < span; e++) {
        const unsigned char *p = raw + (size_t)e * esize;
        uint16_t h;
        switch (t->dtype) {
        case XATTN_DTYPE_Q8_0:
            /* The view starts on a block, so e addresses it as from byte 0:
             * the f16 d (little-endian) times the int8, exact in double. */
            p = raw + xattn_sem_q8_0_d_byte(e);
            h = (uint16_t)(p[0] | (p[1] << 8));
            out->data[e] =
                xattn_ref__f16_bits_to_double(h) * (double)(int8_t)raw[xattn_sem_q8_0_qs_byte(e)];
            break;
        case XATTN_DTYPE_F32: out->data[e] = xattn_ref__f32_bits_to_double(p); break;
        case XATTN_DTYPE_F16:
            memcpy(&h, p, 2);
            out->data[e] = xattn_ref__f16_bits_to_double(h);
            break;
        case XATTN_DTYPE_FP8_E4M3: out->data[e] = xattn_ref__fp8_to_double(*p, 4, 3); break;
        case XATTN_DTYPE_FP8_E5M2: out->data[e] = xattn_ref__fp8_to_double(*p, 5, 2); break;
        default: /* XATTN_DTYPE_BF16; the validator rejected anything else */
            memcpy(&h, p, 2);
            out->data[e] = xattn_ref__bf16_bits_to_double(h);
            break;
        }
    }
    free(raw);
    return XATTN_STATUS_OK;
}

static double xattn_ref__at(const xattn_ref_view *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return v->data[i0 * v->stride[0] + i1 * v->stride[1] + i2 * v->stride[2] + i3 * v->stride[3]];
}

/* ---- the descriptor, resolved -------------------------------------------- */

typedef struct xattn_ref_seq {
    int64_t len_q, len_k;     /* Lq, Lk */
    int64_t start_q, start_k; /* first token (packed mode), else 0 */
    int64_t rows;             /* rows of the output this sequence owns */
} xattn_ref_seq;

static int xattn_ref__varlen(const xattn_attn_desc *d)
{
    return d->cu_seqlens_q != NULL;
}

static int64_t xattn_ref__num_seqs(const xattn_attn_desc *d)
{
    return xattn_ref__varlen(d) ? d->num_seqs : d->q.shape[0];
}

static xattn_ref_seq xattn_ref__seq(const xattn_attn_desc *d, int64_t b)
{
    xattn_ref_seq s;
    if (xattn_ref__varlen(d)) {
        s.start_q = d->cu_seqlens_q[b];
        s.start_k = d->cu_seqlens_k[b];
        s.len_q = (int64_t)d->cu_seqlens_q[b + 1] - d->cu_seqlens_q[b];
        s.len_k = (int64_t)d->cu_seqlens_k[b + 1] - d->cu_seqlens_k[b];
        s.rows = s.len_q;
    } else {
        s.start_q = 0;
        s.start_k = 0;
        s.len_q = d->seqlens_q ? d->seqlens_q[b] : d->q.shape[1];
        s.len_k = d->seqlens_k ? d->seqlens_k[b] : d->k.shape[1];
        if (d->k_new.buffer) /* the appended tokens follow the cached ones */
            s.len_k += d->k_new.shape[1];
        s.rows = d->q.shape[1];
    }
    return s;
}

/* Element (key j of sequence b, KV head hk, dim c) of K or V: an appended
 * token from k_new/v_new (read before the call writes it), a paged cache's
 * page through the block table, or the tensor itself. */
static double xattn_ref__kv(const xattn_attn_desc *d, const xattn_ref_view *cache,
                            const xattn_ref_view *fresh, const xattn_ref_view *scale, int64_t b,
                            int64_t start_k, int64_t j, int64_t hk, int64_t c)
{
    /* An fp8 cache's per-head scale (1 when absent): exact in double. */
    if (scale->data)
        return xattn_ref__at(scale, 0, 0, hk, 0) *
               xattn_ref__kv(d, cache, fresh, &(xattn_ref_view){0}, b, start_k, j, hk, c);
    if (d->k_new.buffer && j >= d->seqlens_k[b])
        return xattn_ref__at(fresh, b, j - d->seqlens_k[b], hk, c);
    if (d->block_table) {
        const int64_t ps = d->k.shape[1];
        return xattn_ref__at(cache, d->block_table[b * d->max_pages_per_seq + j / ps], j % ps, hk,
                             c);
    }
    return xattn_ref__at(cache, xattn_ref__varlen(d) ? 0 : b, start_k + j, hk, c);
}

/* Is key j masked for the row at aligned position p (rule 6 of the semantics)? */
static int xattn_ref__masked(const xattn_attn_desc *d, int64_t p, int64_t j, int64_t len_k)
{
    if (j >= len_k)
        return 1;
    if (d->causal && j > p)
        return 1;
    /* j - p cannot overflow (both are sequence positions); p +/- window could. */
    if (d->window_left >= 0 && p - j > d->window_left)
        return 1;
    if (d->window_right >= 0 && j - p > d->window_right)
        return 1;
    return 0;
}

/* ---- public entry points ------------------------------------------------- */

xattn_status xattn_reference_rows_written(const xattn_ctx *ctx, const xattn_attn_desc *d,
                                          unsigned char *written)
{
    xattn_status st = xattn_attention_check(ctx, d);
    if (st != XATTN_STATUS_OK)
        return st;
    if (!written)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "written: NULL pointer");
    int64_t Bp = d->q.shape[0], Sp = d->q.shape[1];
    if (!xattn_ref__varlen(d)) {
        memset(written, 1, (size_t)(Bp * Sp));
        return XATTN_STATUS_OK;
    }
    memset(written, 0, (size_t)(Bp * Sp));
    int64_t end = d->num_seqs > 0 ? d->cu_seqlens_q[d->num_seqs] : 0;
    for (int64_t t = 0; t < end && t < Sp; t++)
        written[t] = 1;
    return XATTN_STATUS_OK;
}

xattn_status xattn_reference_attention(xattn_ctx *ctx, const xattn_attn_desc *caller_desc,
                                       double *o_ref, double *lse_ref)
{
    xattn_status st = xattn_attention_check(ctx, caller_desc);
    if (st != XATTN_STATUS_OK)
        return st;
    /* The library's own copy: a caller's older (smaller) descriptor has no
     * sinks field to read. */
    xattn_attn_desc full;
    XATTN_RETURN_IF_ERROR(xattn__desc_in(caller_desc, &full));
    const xattn_attn_desc *d = &full;
    if (!o_ref)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "o_ref: NULL pointer");

    const int64_t Bp = d->q.shape[0], Sp = d->q.shape[1];
    const int64_t Hq = d->q.shape[2], D = d->q.shape[3];
    const int64_t Hkv = d->k.shape[2], Dv = d->v.shape[3];
    const int64_t group = Hq / Hkv;
    const int64_t nseq = xattn_ref__num_seqs(d);
    const int has_bias = d->bias.buffer != NULL;
    const int has_sinks = d->sinks.buffer != NULL;
    const double scale = d->scale != 0.0f ? (double)d->scale : 1.0 / sqrt((double)D);
    const double cap = (double)d->softcap;
    const int bottom_right = d->align == XATTN_ALIGN_BOTTOM_RIGHT;

    /* Every row starts as "O = 0, LSE = -inf": padding rows, rows no sequence
     * owns, and fully masked rows keep it. */
    for (int64_t e = 0; e < Bp * Sp * Hq * Dv; e++)
        o_ref[e] = 0.0;
    if (lse_ref)
        for (int64_t e = 0; e < Bp * Hq * Sp; e++)
            lse_ref[e] = -INFINITY;

    xattn_ref_view q, k, v, bias, sinks, k_new, v_new, k_scale, v_scale;
    memset(&k_scale, 0, sizeof k_scale);
    memset(&v_scale, 0, sizeof v_scale);
    memset(&sinks, 0, sizeof sinks);
    memset(&k_new, 0, sizeof k_new);
    memset(&v_new, 0, sizeof v_new);
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    memset(&bias, 0, sizeof bias);
    double *scores = NULL, *acc = NULL;
    st = xattn_ref__view_read(&d->q, "q", &q);
    if (st == XATTN_STATUS_OK)
        st = xattn_ref__view_read(&d->k, "k", &k);
    if (st == XATTN_STATUS_OK)
        st = xattn_ref__view_read(&d->v, "v", &v);
    if (st == XATTN_STATUS_OK && has_bias)
        st = xattn_ref__view_read(&d->bias, "bias", &bias);
    if (st == XATTN_STATUS_OK && has_sinks)
        st = xattn_ref__view_read(&d->sinks, "sinks", &sinks);
    if (st == XATTN_STATUS_OK && d->k_new.buffer)
        st = xattn_ref__view_read(&d->k_new, "k_new", &k_new);
    if (st == XATTN_STATUS_OK && d->v_new.buffer)
        st = xattn_ref__view_read(&d->v_new, "v_new", &v_new);
    if (st == XATTN_STATUS_OK && d->k_scale.buffer)
        st = xattn_ref__view_read(&d->k_scale, "k_scale", &k_scale);
    if (st == XATTN_STATUS_OK && d->v_scale.buffer)
        st = xattn_ref__view_read(&d->v_scale, "v_scale", &v_scale);
    if (st != XATTN_STATUS_OK)
        goto done;

    /* The most keys a sequence can have: a paged table's reach, or the
     * tensor's length (an append fits in it, as validated). */
    int64_t max_k = d->block_table ? d->max_pages_per_seq * d->k.shape[1] : d->k.shape[1];
    if (max_k < 1)
        max_k = 1;
    scores = malloc((size_t)max_k * sizeof(double));
    acc = malloc((size_t)Dv * sizeof(double));
    if (!scores || !acc) {
        st =
            xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                         "reference: cannot allocate %lld scores of host memory", (long long)max_k);
        goto done;
    }

    for (int64_t b = 0; b < nseq; b++) {
        xattn_ref_seq s = xattn_ref__seq(d, b);
        int64_t tb = xattn_ref__varlen(d) ? 0 : b; /* batch index of the tensors */
        int64_t bb = has_bias && d->bias.shape[0] > 1 ? b : 0;
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / group;
            int64_t hb = has_bias && d->bias.shape[1] > 1 ? h : 0;
            /* The sink joins the denominator only; -inf is no sink at all. */
            const double sink = has_sinks ? xattn_ref__at(&sinks, 0, 0, h, 0) : -INFINITY;
            for (int64_t i = 0; i < s.rows && i < s.len_q; i++) {
                int64_t tok = s.start_q + i; /* row within the tensors */
                double *orow = o_ref + ((tb * Sp + tok) * Hq + h) * Dv;
                double *lse = lse_ref ? lse_ref + (tb * Hq + h) * Sp + tok : NULL;
                int64_t p = bottom_right ? i + s.len_k - s.len_q : i;

                /* Steps 1-6: the scores of row i; -inf where masked. */
                double m = -INFINITY;
                int has_nan = 0;
                for (int64_t j = 0; j < s.len_k; j++) {
                    if (xattn_ref__masked(d, p, j, s.len_k)) {
                        scores[j] = -INFINITY;
                        continue;
                    }
                    double dot = 0.0;
                    for (int64_t c = 0; c < D; c++)
                        dot += xattn_ref__at(&q, tb, tok, h, c) *
                               xattn_ref__kv(d, &k, &k_new, &k_scale, b, s.start_k, j, hk, c);
                    double sc = dot * scale;
                    if (cap > 0.0)
                        sc = cap * tanh(sc / cap);
                    if (d->alibi_slopes)
                        sc += -(double)d->alibi_slopes[h] * fabs((double)(p - j));
                    if (has_bias)
                        sc += xattn_ref__at(&bias, bb, hb, i, j);
                    scores[j] = sc;
                    if (isnan(sc))
                        has_nan = 1;
                    else if (sc > m)
                        m = sc;
                }

                /* Step 8: softmax and the weighted sum of V. */
                if (has_nan || (isnan(sink) && m != -INFINITY)) {
                    for (int64_t c = 0; c < Dv; c++)
                        orow[c] = NAN;
                    if (lse)
                        *lse = NAN;
                    continue;
                }
                if (m == -INFINITY) {
                    /* Fully masked: O = 0, LSE = -inf, or the sink's logit
                     * when there is one (the sink alone in the softmax). */
                    if (lse)
                        *lse = sink;
                    continue;
                }
                /* The max over the scores and the sink, so that a large sink
                 * cannot overflow exp. */
                if (sink > m)
                    m = sink;
                double sum = exp(sink - m);
                for (int64_t c = 0; c < Dv; c++)
                    acc[c] = 0.0;
                for (int64_t j = 0; j < s.len_k; j++) {
                    if (scores[j] == -INFINITY)
                        continue; /* masked keys contribute nothing */
                    double w = exp(scores[j] - m);
                    sum += w;
                    for (int64_t c = 0; c < Dv; c++)
                        acc[c] +=
                            w * xattn_ref__kv(d, &v, &v_new, &v_scale, b, s.start_k, j, hk, c);
                }
                for (int64_t c = 0; c < Dv; c++)
                    orow[c] = acc[c] / sum;
                if (lse)
                    *lse = m + log(sum);
            }
        }
    }
    xattn__clear_error();

done:
    free(scores);
    free(acc);
    xattn_ref__view_free(&q);
    xattn_ref__view_free(&k);
    xattn_ref__view_free(&v);
    xattn_ref__view_free(&bias);
    xattn_ref__view_free(&sinks);
    xattn_ref__view_free(&k_new);
    xattn_ref__view_free(&v_new);
    xattn_ref__view_free(&k_scale);
    xattn_ref__view_free(&v_scale);
    return st;
}
