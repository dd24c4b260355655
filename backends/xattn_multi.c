/*
 * xattn_attention_multi (include/xattn_multi.h): one descriptor across several
 * contexts, split by (batch entry, KV head) pairs and, where there are too few
 * pairs for the weights, by blocks of query rows within a pair. Built on the
 * public API: each device's share is a set of rectangles (batch range x KV head
 * range, or one pair's query rows), each run as one xattn_attention call; the
 * outputs go to scratch buffers and reach the caller's O and LSE only once
 * every device has succeeded (the commit: one write of each). Only the error
 * reporting (xattn__error) is internal.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xattn_host_io.h"
#include "xattn_internal.h"
#include "xattn_multi.h"

static double mt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A batch range x KV head range, or one (batch, KV head) pair's block of query
 * rows, and what it needs. */
typedef struct mt_rect {
    int64_t b0, nb, g0, ng;
    int rows; /* a row slice: rows [r_lo, r_lo + r_n) of pair (b0, g0) */
    int64_t r_lo, r_n;
    int32_t lq1, lk1;        /* a padded row slice's lengths */
    xattn_attn_desc view;    /* on ctxs[0]'s buffers */
    int32_t *cuq, *cuk;      /* the view's cu_seqlens (packed batches) */
    int skip;                /* no query token: nothing to compute or write */
    int zero;                /* query tokens but no key token: O = 0, LSE = -inf */
    void *hq, *hk, *hv, *hb; /* staged inputs (other devices) */
    void *ho, *hl;           /* its outputs, committed into the caller's O and LSE */
} mt_rect;

#define MT_MAX_RECTS 8 /* a partial pair, at most three rectangles, a partial pair */

typedef struct mt_dev {
    xattn_ctx *ctx;
    int home;
    int direct; /* ctxs[0]'s one rectangle is the whole call: run on the caller's O */
    mt_rect *rects;
    int nrects;
    xattn_multi_part part;
    xattn_status status;
    char err[512];
    pthread_t thread;
    int started;
} mt_dev;

static size_t mt_count(const xattn_tensor *t)
{
    return (size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]);
}

/* Sequence b's query and key lengths. */
static void mt_lens(const xattn_attn_desc *d, int64_t b, int64_t *lq, int64_t *lk)
{
    if (d->cu_seqlens_q) {
        *lq = d->cu_seqlens_q[b + 1] - d->cu_seqlens_q[b];
        *lk = d->cu_seqlens_k[b + 1] - d->cu_seqlens_k[b];
    } else {
        *lq = d->seqlens_q ? d->seqlens_q[b] : d->q.shape[1];
        *lk = d->seqlens_k ? d->seqlens_k[b] : d->k.shape[1];
    }
}

/* Whether a pair's query rows may be cut into slices, each one call, keeping
 * every row's aligned position p (docs/semantics.md, step 3): without a causal
 * mask, a window or ALiBi, p plays no part; under a causal mask a slice is run
 * bottom-right aligned over its first Lk' = p(last row) + 1 keys, which hold
 * every key its rows see. Top-left with more queries than keys would need the
 * keys past Lk' (rows with p >= Lk see all): not cut. */
static int mt_rows_ok(const xattn_attn_desc *d, int64_t B)
{
    if (d->alibi_slopes)
        return 0;
    if (!d->causal)
        return d->window_left < 0 && d->window_right < 0;
    if (d->align == XATTN_ALIGN_BOTTOM_RIGHT)
        return 1;
    for (int64_t b = 0; b < B; b++) {
        int64_t lq, lk;
        mt_lens(d, b, &lq, &lk);
        if (lq > lk)
            return 0;
    }
    return 1;
}

/* The rectangle's views of the caller's tensors. */
static int mt_view(const xattn_attn_desc *d, int64_t G, mt_rect *r)
{
    xattn_attn_desc *s = &r->view;
    *s = *d;
    size_t qes = xattn_dtype_size(d->q.dtype), kes = xattn_dtype_size(d->k.dtype);
    size_t oes = xattn_dtype_size(d->o.dtype);
    int64_t h0 = r->g0 * G, nh = r->ng * G, b0 = r->b0, nb = r->nb;
    int64_t q0 = b0, k0 = b0; /* first index along the batch (padded) or token (packed) axis */
    int ax = 0;               /* that axis in q/k/v/o */
    int64_t rq = 0;           /* a padded row slice's first row */
    int64_t lk1 = 0;          /* a row slice's keys */
    if (r->rows) {
        int64_t lq, lk;
        mt_lens(d, b0, &lq, &lk);
        int64_t in = lq - r->r_lo; /* the slice's rows that are not padding */
        in = in < 0 ? 0 : in > r->r_n ? r->r_n : in;
        lk1 = lk;
        if (d->causal) { /* keep p = off + i' with p' = i' + Lk' - Lq' (bottom-right) */
            int64_t off = r->r_lo + (d->align == XATTN_ALIGN_BOTTOM_RIGHT ? lk - lq : 0);
            lk1 = off + in;
            lk1 = lk1 < 0 ? 0 : lk1 > lk ? lk : lk1;
            s->align = XATTN_ALIGN_BOTTOM_RIGHT;
        }
        r->lq1 = (int32_t)in;
        r->lk1 = (int32_t)lk1;
    }
    if (d->cu_seqlens_q) {
        ax = 1;
        q0 = d->cu_seqlens_q[b0] + (r->rows ? r->r_lo : 0);
        k0 = d->cu_seqlens_k[b0];
        r->cuq = malloc((size_t)(nb + 1) * sizeof(int32_t));
        r->cuk = malloc((size_t)(nb + 1) * sizeof(int32_t));
        if (!r->cuq || !r->cuk)
            return 0;
        if (r->rows) {
            r->cuq[0] = r->cuk[0] = 0;
            r->cuq[1] = (int32_t)r->r_n;
            r->cuk[1] = (int32_t)lk1;
        } else {
            for (int64_t i = 0; i <= nb; i++) {
                r->cuq[i] = d->cu_seqlens_q[b0 + i] - (int32_t)q0;
                r->cuk[i] = d->cu_seqlens_k[b0 + i] - (int32_t)k0;
            }
        }
        s->cu_seqlens_q = r->cuq;
        s->cu_seqlens_k = r->cuk;
        s->num_seqs = nb;
        s->q.shape[1] = s->o.shape[1] = r->cuq[nb];
        s->k.shape[1] = s->v.shape[1] = r->cuk[nb];
        r->skip = r->cuq[nb] == 0;
        r->zero = !r->skip && r->cuk[nb] == 0;
    } else {
        s->q.shape[0] = s->k.shape[0] = s->v.shape[0] = s->o.shape[0] = nb;
        if (r->rows) {
            rq = r->r_lo;
            s->q.shape[1] = s->o.shape[1] = r->r_n;
            s->seqlens_q = &r->lq1;
            s->seqlens_k = &r->lk1;
        } else {
            if (d->seqlens_q)
                s->seqlens_q = d->seqlens_q + b0;
            if (d->seqlens_k)
                s->seqlens_k = d->seqlens_k + b0;
        }
    }
    s->q.offset +=
        (size_t)(q0 * d->q.strides[ax] + rq * d->q.strides[1] + h0 * d->q.strides[2]) * qes;
    s->o.offset +=
        (size_t)(q0 * d->o.strides[ax] + rq * d->o.strides[1] + h0 * d->o.strides[2]) * oes;
    s->k.offset += (size_t)(k0 * d->k.strides[ax] + r->g0 * d->k.strides[2]) * kes;
    s->v.offset += (size_t)(k0 * d->v.strides[ax] + r->g0 * d->v.strides[2]) * kes;
    s->q.shape[2] = s->o.shape[2] = nh;
    s->k.shape[2] = s->v.shape[2] = r->ng;
    if (d->lse.buffer) { /* [B, Hq, Sq, 1] or, packed, [1, Hq, Tq, 1] */
        s->lse.offset += (size_t)(h0 * d->lse.strides[1] +
                                  (ax ? q0 * d->lse.strides[2]
                                      : b0 * d->lse.strides[0] + rq * d->lse.strides[2])) *
                         4;
        s->lse.shape[1] = nh;
        s->lse.shape[2] = s->q.shape[1];
        if (!ax)
            s->lse.shape[0] = nb;
    }
    if (d->alibi_slopes)
        s->alibi_slopes = d->alibi_slopes + h0;
    if (d->sinks.buffer) { /* [1, 1, Hq, 1]: the rectangle's heads (one device only) */
        s->sinks.offset += (size_t)(h0 * d->sinks.strides[2]) * 4;
        s->sinks.shape[2] = nh;
    }
    if (d->bias.buffer) { /* [Bb, Hb, Sq', Sk']: slice the extents that are not broadcast */
        size_t bes = xattn_dtype_size(d->bias.dtype);
        if (d->bias.shape[0] > 1) {
            s->bias.offset += (size_t)(b0 * d->bias.strides[0]) * bes;
            s->bias.shape[0] = nb;
        }
        if (d->bias.shape[1] > 1) {
            s->bias.offset += (size_t)(h0 * d->bias.strides[1]) * bes;
            s->bias.shape[1] = nh;
        }
        if (r->rows && !ax && d->bias.shape[2] > 1) {
            s->bias.offset += (size_t)(rq * d->bias.strides[2]) * bes;
            s->bias.shape[2] = r->r_n;
        }
    }
    return 1;
}

/* Runs one rectangle into scratch outputs on its device and reads them back to
 * the host (r->ho, r->hl); inputs: the caller's, in place (ctxs[0]), or copies
 * staged through the host (other devices). */
static xattn_status mt_run(mt_dev *v, mt_rect *r)
{
    const xattn_attn_desc *s = &r->view;
    xattn_attn_desc c = *s;
    /* inputs first (q, k, v, bias: written), then outputs (o, lse: read back) */
    xattn_buffer *b[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    const xattn_tensor *src[6] = {&s->q, &s->k, &s->v, &s->bias, &s->o, &s->lse};
    xattn_tensor *dst[6] = {&c.q, &c.k, &c.v, &c.bias, &c.o, &c.lse};
    void *host[6] = {r->hq, r->hk, r->hv, r->hb, r->ho, r->hl};
    xattn_status st = XATTN_STATUS_OK;
    double t0 = mt_now_ms(), copy = 0;
    for (int i = 0; i < 6 && st == XATTN_STATUS_OK; i++) {
        if (!src[i]->buffer || (v->home && i < 4))
            continue;
        size_t bytes = mt_count(src[i]) * xattn_dtype_size(src[i]->dtype);
        st = xattn_buffer_alloc(v->ctx, bytes, &b[i]);
        if (st == XATTN_STATUS_OK && i < 4)
            st = xattn_buffer_write(b[i], 0, host[i], bytes);
        *dst[i] = xattn_tensor_bshd(b[i], 0, src[i]->dtype, src[i]->shape[0], src[i]->shape[1],
                                    src[i]->shape[2], src[i]->shape[3]);
    }
    copy += mt_now_ms() - t0;
    xattn_run_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (st == XATTN_STATUS_OK)
        st = xattn_attention(v->ctx, &c, &info);
    if (st == XATTN_STATUS_OK) {
        v->part.device_ms += info.device_ms;
        v->part.algo_chosen = info.algo_chosen;
        v->part.calls++;
        double t1 = mt_now_ms();
        st = xattn_buffer_read(b[4], 0, r->ho, mt_count(&s->o) * xattn_dtype_size(s->o.dtype));
        if (st == XATTN_STATUS_OK && b[5])
            st = xattn_buffer_read(b[5], 0, r->hl, mt_count(&s->lse) * 4);
        copy += mt_now_ms() - t1;
    }
    if (st != XATTN_STATUS_OK)
        snprintf(v->err, sizeof v->err, "%s", xattn_last_error());
    for (int i = 0; i < 6; i++)
        xattn_buffer_free(b[i]);
    v->part.copy_ms += copy;
    return st;
}

static void *mt_worker(void *arg)
{
    mt_dev *v = arg;
    double t0 = mt_now_ms();
    for (int i = 0; i < v->nrects && v->status == XATTN_STATUS_OK; i++) {
        mt_rect *r = &v->rects[i];
        if (r->skip || r->zero)
            continue;
        if (v->direct) {
            xattn_run_info info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            v->status = xattn_attention(v->ctx, &r->view, &info);
            if (v->status != XATTN_STATUS_OK) {
                snprintf(v->err, sizeof v->err, "%s", xattn_last_error());
                break;
            }
            v->part.device_ms += info.device_ms;
            v->part.algo_chosen = info.algo_chosen;
            v->part.calls++;
        } else {
            v->status = mt_run(v, r);
        }
    }
    v->part.wall_ms += mt_now_ms() - t0;
    return NULL;
}

/* Splits the pairs [u, end) into rectangles: a partial first batch entry, whole
 * entries, a partial last one. */
static int mt_rects(int64_t u, int64_t end, int64_t Hkv, mt_rect *out)
{
    int n = 0;
    while (u < end) {
        mt_rect r;
        memset(&r, 0, sizeof r);
        r.b0 = u / Hkv;
        r.g0 = u % Hkv;
        if (r.g0 != 0 || end - u < Hkv) {
            r.nb = 1;
            r.ng = Hkv - r.g0 < end - u ? Hkv - r.g0 : end - u;
            u += r.ng;
        } else {
            r.nb = (end - u) / Hkv;
            r.ng = Hkv;
            u += r.nb * Hkv;
        }
        out[n++] = r;
    }
    return n;
}

/* Row blocks [ra, rb) of pair p, of R: one rectangle. */
static mt_rect mt_slice(const xattn_attn_desc *d, int64_t p, int64_t ra, int64_t rb, int64_t R,
                        int64_t Hkv)
{
    mt_rect r;
    memset(&r, 0, sizeof r);
    r.b0 = p / Hkv;
    r.g0 = p % Hkv;
    r.nb = r.ng = 1;
    r.rows = 1;
    int64_t lq, lk, L = d->q.shape[1]; /* padded: every row, padding included */
    if (d->cu_seqlens_q) {
        mt_lens(d, r.b0, &lq, &lk);
        L = lq;
    }
    r.r_lo = ra * L / R;
    r.r_n = rb * L / R - r.r_lo;
    return r;
}

/* The units [u0, u1) of R row blocks per pair as rectangles. */
static int mt_share(const xattn_attn_desc *d, int64_t u0, int64_t u1, int64_t R, int64_t Hkv,
                    mt_rect *out)
{
    if (R == 1)
        return mt_rects(u0, u1, Hkv, out);
    int n = 0;
    int64_t p0 = u0 / R, p1 = u1 / R, ra = u0 % R, rb = u1 % R;
    if (u0 >= u1)
        return 0;
    if (p0 == p1) {
        out[n++] = mt_slice(d, p0, ra, rb, R, Hkv);
        return n;
    }
    if (ra > 0)
        out[n++] = mt_slice(d, p0++, ra, R, R, Hkv);
    n += mt_rects(p0, p1, Hkv, out + n);
    if (rb > 0)
        out[n++] = mt_slice(d, p1, 0, rb, R, Hkv);
    return n;
}

static void mt_free(mt_dev *dev, int n)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dev[i].nrects; j++) {
            mt_rect *r = &dev[i].rects[j];
            free(r->cuq);
            free(r->cuk);
            free(r->hq);
            free(r->hk);
            free(r->hv);
            free(r->hb);
            free(r->ho);
            free(r->hl);
        }
        free(dev[i].rects);
    }
}

/* Moves a whole view tensor between ctxs[0] and a packed host array. */
static xattn_status mt_io(const xattn_tensor *t, void *host, int write, const char *name)
{
    static const int64_t zero[4] = {0, 0, 0, 0};
    char err[512];
    xattn_status st = xattn_host_box_io(t, zero, t->shape, host, 0, write, name, err, sizeof err);
    if (st != XATTN_STATUS_OK)
        return xattn__error(st, "xattn_attention_multi: staging %s", err);
    return st;
}

/* The bytes a tensor's elements span in its buffer (strides are >= 0). */
static uint64_t mt_span(const xattn_tensor *t)
{
    uint64_t span = 1;
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] <= 0)
            return 0;
        span += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
    }
    return span * xattn_dtype_size(t->dtype);
}

/* Puts a view's elements, packed in logical order in src (NULL: each `fill`),
 * into img, a copy of the view's buffer from byte `base`. */
static void mt_patch(const xattn_tensor *t, uint64_t base, unsigned char *img,
                     const unsigned char *src, const void *fill)
{
    size_t es = xattn_dtype_size(t->dtype), n = 0;
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t e = 0; e < t->shape[3]; e++, n++) {
                    size_t at = (size_t)(t->offset - base) +
                                (size_t)(a * t->strides[0] + b * t->strides[1] + c * t->strides[2] +
                                         e * t->strides[3]) *
                                    es;
                    memcpy(img + at, src ? src + n * es : (const unsigned char *)fill, es);
                }
}

/* The commit: every rectangle's output into a host image of the caller's O
 * (and LSE), then one write of each. Everything that can be refused (the
 * images' memory, reading O and LSE) happens before the first write. */
static xattn_status mt_commit(const xattn_attn_desc *d, mt_dev *dev, int n)
{
    const xattn_tensor *t[2] = {&d->o, &d->lse};
    unsigned char *img[2] = {NULL, NULL};
    uint64_t bytes[2] = {mt_span(&d->o), d->lse.buffer ? mt_span(&d->lse) : 0};
    xattn_status st = XATTN_STATUS_OK;
    for (int k = 0; k < 2 && st == XATTN_STATUS_OK; k++) {
        if (!bytes[k])
            continue;
        img[k] = malloc((size_t)bytes[k]);
        if (!img[k])
            st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                              "xattn_attention_multi: %llu bytes for the %s commit (O is "
                              "unchanged)",
                              (unsigned long long)bytes[k], k ? "lse" : "o");
        else if ((st = xattn_buffer_read(t[k]->buffer, t[k]->offset, img[k], (size_t)bytes[k])) !=
                 XATTN_STATUS_OK)
            st = xattn__error(st, "xattn_attention_multi: reading %s for the commit: %s",
                              k ? "lse" : "o", xattn_last_error());
    }
    if (st == XATTN_STATUS_OK) {
        static const unsigned char zero[8] = {0};
        const float ninf = -INFINITY;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < dev[i].nrects; j++) {
                const mt_rect *r = &dev[i].rects[j];
                if (r->skip)
                    continue;
                mt_patch(&r->view.o, d->o.offset, img[0], r->zero ? NULL : r->ho, zero);
                if (img[1])
                    mt_patch(&r->view.lse, d->lse.offset, img[1], r->zero ? NULL : r->hl, &ninf);
            }
        /* Past this point only a fault of ctxs[0]'s own buffer write can fail:
         * docs/scale.md says what it leaves. */
        for (int k = 0; k < 2 && st == XATTN_STATUS_OK; k++)
            if (img[k] && (st = xattn_buffer_write(t[k]->buffer, t[k]->offset, img[k],
                                                   (size_t)bytes[k])) != XATTN_STATUS_OK)
                st = xattn__error(st, "xattn_attention_multi: writing %s (the commit) failed: %s%s",
                                  k ? "lse" : "o", xattn_last_error(), k ? " (o was written)" : "");
    }
    free(img[0]);
    free(img[1]);
    return st;
}

xattn_status xattn_attention_multi(xattn_ctx *const *ctxs, int num_ctxs, const double *weights,
                                   const xattn_attn_desc *d, xattn_multi_info *info)
{
    double t_start = mt_now_ms();
    if (!ctxs || !d)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "xattn_attention_multi: %s is NULL",
                            !ctxs ? "ctxs" : "d");
    if (num_ctxs < 1 || num_ctxs > XATTN_MULTI_MAX_DEVICES)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "num_ctxs: %d, expected 1..%d (XATTN_MULTI_MAX_DEVICES)", num_ctxs,
                            XATTN_MULTI_MAX_DEVICES);
    for (int i = 0; i < num_ctxs; i++) {
        if (!ctxs[i])
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctxs[%d]: NULL", i);
        for (int j = 0; j < i; j++)
            if (ctxs[j] == ctxs[i])
                return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                    "ctxs[%d]: the same context as ctxs[%d] (each device once)", i,
                                    j);
    }
    double w[XATTN_MULTI_MAX_DEVICES], wsum = 0;
    if (weights) {
        for (int i = 0; i < num_ctxs; i++) {
            if (!(weights[i] >= 0) || isinf(weights[i]))
                return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                    "weights[%d]: %g, expected a finite value >= 0", i, weights[i]);
            w[i] = weights[i];
            wsum += w[i];
        }
        if (!(wsum > 0))
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "weights: all 0, at least one device needs a share");
    } else {
        int all = 1;
        for (int i = 0; i < num_ctxs; i++) {
            xattn_ceilings c;
            memset(&c, 0, sizeof c);
            c.struct_size = sizeof c;
            w[i] = 1;
            if (xattn_ceilings_get(ctxs[i], &c) == XATTN_STATUS_OK && c.fma_f32_gflops > 0)
                w[i] = c.fma_f32_gflops;
            else
                all = 0;
        }
        for (int i = 0; i < num_ctxs; i++) {
            if (!all)
                w[i] = 1;
            wsum += w[i];
        }
    }
    xattn_status st = xattn_attention_check(ctxs[0], d);
    if (st != XATTN_STATUS_OK)
        return st; /* its message names the field */
    /* The caller's descriptor may be an older, smaller one (struct_size): a
     * whole one of ours, its fields past the caller's at their defaults (the
     * check refused nonzero bytes past ours). */
    xattn_attn_desc whole;
    xattn_attn_desc_init(&whole);
    memcpy(&whole, d, d->struct_size < sizeof whole ? d->struct_size : sizeof whole);
    whole.struct_size = sizeof whole;
    d = &whole;
    /* d passed the check: its struct_size covers the fields read here. */
    if (num_ctxs > 1 && d->struct_size >= offsetof(xattn_attn_desc, sinks) + sizeof d->sinks &&
        d->sinks.buffer)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "sinks: attention sinks are not supported across several devices yet "
                            "(run the call on one)");
    /* A page pool and its table, or an append into a cache, are one device's
     * memory: the rectangles' slicing of k/v by batch does not apply. */
    if (d->struct_size >= offsetof(xattn_attn_desc, v_new) + sizeof d->v_new &&
        (d->block_table || d->k_new.buffer))
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "%s: paged KV caches and appends are not supported by "
                            "xattn_attention_multi yet (call xattn_attention on one device)",
                            d->block_table ? "block_table" : "k_new");
    if (xattn__dtype_is_kv_only(d->k.dtype))
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "k.dtype: %s K/V caches are not supported by xattn_attention_multi "
                            "yet (call xattn_attention on one device)",
                            xattn_dtype_name(d->k.dtype));
    if (num_ctxs > 1 && d->bias.buffer && d->cu_seqlens_q)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "bias: not supported with a packed batch across several devices yet "
                            "(run it on one)");
    int64_t B = d->cu_seqlens_q ? d->num_seqs : d->q.shape[0], Hkv = d->k.shape[2];
    int64_t G = d->q.shape[2] / Hkv, P = B * Hkv;
    /* Too few pairs for the devices: cut each pair's query rows into R blocks
     * (as many as give every device about 1/8 of a pair's precision). */
    int npos = 0;
    for (int i = 0; i < num_ctxs; i++)
        npos += w[i] > 0;
    int64_t R = 1;
    if (npos > 1 && P > 0 && P < 8 * (int64_t)npos && mt_rows_ok(d, B)) {
        int64_t L = d->q.shape[1]; /* the most rows of one sequence */
        if (d->cu_seqlens_q) {
            L = 0;
            for (int64_t b = 0; b < B; b++) {
                int64_t lq, lk;
                mt_lens(d, b, &lq, &lk);
                L = lq > L ? lq : L;
            }
        }
        R = (8 * (int64_t)npos + P - 1) / P;
        R = R > L ? L : R;
        R = R < 1 ? 1 : R;
    }
    int64_t U = P * R;
    /* Shares by the largest-remainder method: each device gets the floor of
     * its quota U * w / sum(w), and the units left go one each to the largest
     * remainders (the lower index first on a tie), so a share is within one
     * unit of its quota and a device of weight 0 gets none. */
    int64_t cnt[XATTN_MULTI_MAX_DEVICES], given = 0;
    double rem[XATTN_MULTI_MAX_DEVICES];
    for (int i = 0; i < num_ctxs; i++) {
        double q = (double)U * (w[i] / wsum);
        cnt[i] = (int64_t)floor(q);
        cnt[i] = cnt[i] < 0 ? 0 : cnt[i] > U ? U : cnt[i];
        rem[i] = w[i] > 0 ? q - (double)cnt[i] : -2;
        given += cnt[i];
    }
    for (int i = num_ctxs - 1; i >= 0 && given > U; i--) { /* rounding of the quotas */
        int64_t take = cnt[i] < given - U ? cnt[i] : given - U;
        cnt[i] -= take;
        given -= take;
    }
    while (given < U) {
        int best = -1;
        for (int i = 0; i < num_ctxs; i++)
            if (rem[i] > -1 && (best < 0 || rem[i] > rem[best]))
                best = i;
        if (best < 0) { /* every positive weight had its extra unit: start again */
            for (int i = 0; i < num_ctxs; i++)
                if (w[i] > 0)
                    rem[i] = w[i];
            continue;
        }
        cnt[best]++;
        rem[best] = -1.5;
        given++;
    }

    mt_dev dev[XATTN_MULTI_MAX_DEVICES];
    memset(dev, 0, sizeof dev);
    int64_t u = 0;
    int computing = 0, zeros = 0;
    for (int i = 0; i < num_ctxs && st == XATTN_STATUS_OK; i++) {
        mt_dev *v = &dev[i];
        int64_t end = u + cnt[i];
        v->ctx = ctxs[i];
        v->home = i == 0;
        v->part.backend = xattn_ctx_backend(ctxs[i]);
        xattn_device_info di;
        memset(&di, 0, sizeof di);
        di.struct_size = sizeof di;
        if (xattn_ctx_device_info(ctxs[i], &di) == XATTN_STATUS_OK)
            v->part.device = di.index;
        v->part.weight = w[i];
        v->part.unit_begin = u;
        v->part.unit_end = end;
        v->rects = calloc(MT_MAX_RECTS, sizeof(mt_rect));
        if (!v->rects) {
            st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "xattn_attention_multi: rectangles");
            break;
        }
        v->nrects = mt_share(d, u, end, R, Hkv, v->rects);
        for (int j = 0; j < v->nrects; j++) {
            if (!mt_view(d, G, &v->rects[j])) {
                st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "xattn_attention_multi: views");
                break;
            }
            zeros += v->rects[j].zero;
            computing += !v->rects[j].skip && !v->rects[j].zero;
        }
        u = end;
    }
    /* One rectangle on ctxs[0] and nothing else to write: one xattn_attention
     * call on the caller's tensors, whose own guarantees hold (no staging). */
    dev[0].direct = st == XATTN_STATUS_OK && computing == 1 && zeros == 0 && dev[0].nrects == 1 &&
                    !dev[0].rects[0].skip && !dev[0].rects[0].zero;
    /* 1: host memory for every output and the other devices' inputs, read from
     * ctxs[0] (one thread uses it) */
    double t1 = mt_now_ms();
    for (int i = 0; i < num_ctxs && st == XATTN_STATUS_OK && !dev[0].direct; i++)
        for (int j = 0; j < dev[i].nrects && st == XATTN_STATUS_OK; j++) {
            mt_rect *r = &dev[i].rects[j];
            if (r->skip || r->zero)
                continue;
            const xattn_attn_desc *s = &r->view;
            int in = i > 0;
            r->ho = malloc(mt_count(&s->o) * xattn_dtype_size(s->o.dtype));
            r->hl = s->lse.buffer ? malloc(mt_count(&s->lse) * 4) : NULL;
            if (in) {
                r->hq = malloc(mt_count(&s->q) * xattn_dtype_size(s->q.dtype));
                r->hk = malloc(mt_count(&s->k) * xattn_dtype_size(s->k.dtype));
                r->hv = malloc(mt_count(&s->v) * xattn_dtype_size(s->v.dtype));
                r->hb = s->bias.buffer
                            ? malloc(mt_count(&s->bias) * xattn_dtype_size(s->bias.dtype))
                            : NULL;
            }
            if (!r->ho || (s->lse.buffer && !r->hl) ||
                (in && (!r->hq || !r->hk || !r->hv || (s->bias.buffer && !r->hb)))) {
                st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                                  "xattn_attention_multi: host staging for device %d", i);
                break;
            }
            if (!in)
                continue;
            st = mt_io(&s->q, r->hq, 0, "q");
            if (st == XATTN_STATUS_OK)
                st = mt_io(&s->k, r->hk, 0, "k");
            if (st == XATTN_STATUS_OK)
                st = mt_io(&s->v, r->hv, 0, "v");
            if (st == XATTN_STATUS_OK && s->bias.buffer)
                st = mt_io(&s->bias, r->hb, 0, "bias");
        }
    double t2 = mt_now_ms();
    /* 2: every device at once; ctxs[0] on this thread */
    if (st == XATTN_STATUS_OK) {
        for (int i = 1; i < num_ctxs; i++)
            dev[i].started = pthread_create(&dev[i].thread, NULL, mt_worker, &dev[i]) == 0;
        mt_worker(&dev[0]);
        for (int i = 1; i < num_ctxs; i++) {
            if (dev[i].started)
                pthread_join(dev[i].thread, NULL);
            else
                mt_worker(&dev[i]); /* no thread to be had: run it here, after */
        }
        for (int i = 0; i < num_ctxs && st == XATTN_STATUS_OK; i++)
            if (dev[i].status != XATTN_STATUS_OK)
                st = xattn__error(dev[i].status,
                                  "xattn_attention_multi: device %d (%s %d): %s (o and lse are "
                                  "unchanged)",
                                  i, xattn_backend_name(dev[i].part.backend), dev[i].part.device,
                                  dev[i].err);
    }
    /* 3: the commit: every output, and the rows no key reaches, into the
     * caller's O and LSE, only now that every device has succeeded */
    double t3 = mt_now_ms();
    if (st == XATTN_STATUS_OK && !dev[0].direct)
        st = mt_commit(d, dev, num_ctxs);
    double t4 = mt_now_ms();
    if (info) {
        memset(info, 0, sizeof *info);
        info->struct_size = sizeof *info;
        info->num_devices = num_ctxs;
        info->units = U;
        info->stage_in_ms = t2 - t1;
        info->stage_out_ms = t4 - t3;
        for (int i = 0; i < num_ctxs; i++)
            info->part[i] = dev[i].part;
        info->wall_ms = mt_now_ms() - t_start;
    }
    mt_free(dev, num_ctxs);
    return st;
}
