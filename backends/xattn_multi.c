/*
 * xattn_attention_multi (include/xattn_multi.h): one descriptor across several
 * contexts, split by (batch entry, KV head) pairs. Built on the public API:
 * each device's share is a set of rectangles (batch range x KV head range),
 * each run as one xattn_attention call on views of the caller's tensors
 * (ctxs[0]) or on copies staged through host memory (other devices).
 * Only the error reporting (xattn__error) is internal.
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

/* A batch range x KV head range, and what it needs on another device. */
typedef struct mt_rect {
    int64_t b0, nb, g0, ng;
    xattn_attn_desc view;    /* on ctxs[0]'s buffers */
    int32_t *cuq, *cuk;      /* the view's cu_seqlens (packed batches) */
    int skip;                /* no query token: nothing to compute or write */
    int zero;                /* query tokens but no key token: O = 0, LSE = -inf */
    void *hq, *hk, *hv, *hb; /* staged inputs (other devices) */
    void *ho, *hl;           /* their outputs, to be written into the view */
} mt_rect;

typedef struct mt_dev {
    xattn_ctx *ctx;
    int home;
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
    if (d->cu_seqlens_q) {
        ax = 1;
        q0 = d->cu_seqlens_q[b0];
        k0 = d->cu_seqlens_k[b0];
        r->cuq = malloc((size_t)(nb + 1) * sizeof(int32_t));
        r->cuk = malloc((size_t)(nb + 1) * sizeof(int32_t));
        if (!r->cuq || !r->cuk)
            return 0;
        for (int64_t i = 0; i <= nb; i++) {
            r->cuq[i] = d->cu_seqlens_q[b0 + i] - (int32_t)q0;
            r->cuk[i] = d->cu_seqlens_k[b0 + i] - (int32_t)k0;
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
        if (d->seqlens_q)
            s->seqlens_q = d->seqlens_q + b0;
        if (d->seqlens_k)
            s->seqlens_k = d->seqlens_k + b0;
    }
    s->q.offset += (size_t)(q0 * d->q.strides[ax] + h0 * d->q.strides[2]) * qes;
    s->o.offset += (size_t)(q0 * d->o.strides[ax] + h0 * d->o.strides[2]) * oes;
    s->k.offset += (size_t)(k0 * d->k.strides[ax] + r->g0 * d->k.strides[2]) * kes;
    s->v.offset += (size_t)(k0 * d->v.strides[ax] + r->g0 * d->v.strides[2]) * kes;
    s->q.shape[2] = s->o.shape[2] = nh;
    s->k.shape[2] = s->v.shape[2] = r->ng;
    if (d->lse.buffer) { /* [B, Hq, Sq, 1] or, packed, [1, Hq, Tq, 1] */
        s->lse.offset += (size_t)(h0 * d->lse.strides[1] +
                                  (ax ? q0 * d->lse.strides[2] : b0 * d->lse.strides[0])) *
                         4;
        s->lse.shape[1] = nh;
        if (ax)
            s->lse.shape[2] = s->q.shape[1];
        else
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
    }
    return 1;
}

/* Runs one staged rectangle on another device. */
static xattn_status mt_run_remote(mt_dev *v, mt_rect *r)
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
        if (!src[i]->buffer)
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
        if (v->home) {
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
            v->status = mt_run_remote(v, r);
        }
    }
    v->part.wall_ms += mt_now_ms() - t0;
    return NULL;
}

/* Splits the units [u, end) into rectangles: a partial first batch entry, whole
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
    int64_t G = d->q.shape[2] / Hkv, U = B * Hkv;

    mt_dev dev[XATTN_MULTI_MAX_DEVICES];
    memset(dev, 0, sizeof dev);
    double acc = 0;
    int64_t u = 0;
    for (int i = 0; i < num_ctxs && st == XATTN_STATUS_OK; i++) {
        mt_dev *v = &dev[i];
        acc += w[i];
        int64_t end = i == num_ctxs - 1 ? U : (int64_t)floor((double)U * acc / wsum);
        if (end < u)
            end = u;
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
        v->rects = calloc(4, sizeof(mt_rect));
        if (!v->rects) {
            st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "xattn_attention_multi: rectangles");
            break;
        }
        v->nrects = mt_rects(u, end, Hkv, v->rects);
        for (int j = 0; j < v->nrects; j++)
            if (!mt_view(d, G, &v->rects[j]))
                st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "xattn_attention_multi: views");
        u = end;
    }
    /* 1: the other devices' inputs, read from ctxs[0] (one thread uses it) */
    double t1 = mt_now_ms();
    for (int i = 1; i < num_ctxs && st == XATTN_STATUS_OK; i++)
        for (int j = 0; j < dev[i].nrects && st == XATTN_STATUS_OK; j++) {
            mt_rect *r = &dev[i].rects[j];
            if (r->skip || r->zero)
                continue;
            const xattn_attn_desc *s = &r->view;
            r->hq = malloc(mt_count(&s->q) * xattn_dtype_size(s->q.dtype));
            r->hk = malloc(mt_count(&s->k) * xattn_dtype_size(s->k.dtype));
            r->hv = malloc(mt_count(&s->v) * xattn_dtype_size(s->v.dtype));
            r->ho = malloc(mt_count(&s->o) * xattn_dtype_size(s->o.dtype));
            r->hl = s->lse.buffer ? malloc(mt_count(&s->lse) * 4) : NULL;
            r->hb = s->bias.buffer ? malloc(mt_count(&s->bias) * xattn_dtype_size(s->bias.dtype))
                                   : NULL;
            if (!r->hq || !r->hk || !r->hv || !r->ho || (s->lse.buffer && !r->hl) ||
                (s->bias.buffer && !r->hb)) {
                st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                                  "xattn_attention_multi: host staging for device %d", i);
                break;
            }
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
                st = xattn__error(dev[i].status, "xattn_attention_multi: device %d (%s %d): %s", i,
                                  xattn_backend_name(dev[i].part.backend), dev[i].part.device,
                                  dev[i].err);
    }
    /* 3: their outputs into the caller's O and LSE, and the rows no key reaches */
    double t3 = mt_now_ms();
    for (int i = 0; i < num_ctxs && st == XATTN_STATUS_OK; i++)
        for (int j = 0; j < dev[i].nrects && st == XATTN_STATUS_OK; j++) {
            mt_rect *r = &dev[i].rects[j];
            const xattn_attn_desc *s = &r->view;
            if (r->skip || (i == 0 && !r->zero))
                continue;
            if (r->zero) {
                size_t no = mt_count(&s->o), nl = s->lse.buffer ? mt_count(&s->lse) : 0;
                float *z = calloc(no + nl + 1, sizeof(float));
                if (!z) {
                    st = xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "xattn_attention_multi");
                    break;
                }
                for (size_t k = 0; k < nl; k++)
                    z[no + k] = -INFINITY;
                char err[512];
                static const int64_t zero4[4] = {0, 0, 0, 0};
                st = xattn_host_box_io(&s->o, zero4, s->o.shape, z, 1, 1, "o", err, sizeof err);
                if (st == XATTN_STATUS_OK && nl)
                    st = xattn_host_box_io(&s->lse, zero4, s->lse.shape, z + no, 1, 1, "lse", err,
                                           sizeof err);
                free(z);
                if (st != XATTN_STATUS_OK)
                    st = xattn__error(st, "xattn_attention_multi: %s", err);
                continue;
            }
            st = mt_io(&s->o, r->ho, 1, "o");
            if (st == XATTN_STATUS_OK && s->lse.buffer)
                st = mt_io(&s->lse, r->hl, 1, "lse");
        }
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
