/*
 * The profiler: one record per attention call while profiling is on, user
 * ranges on the host timeline, and the public functions that read them.
 *
 * Cost per call (profiling on): three clock reads, the record filled in place
 * in a growing array (amortized doubling; no other allocation), the work
 * accounting (O(B + B*Sq/tile_q)), no file I/O. Profiling off: one load of
 * ctx->prof.on in xattn_attention.
 *
 * The record store is the profiler's own bookkeeping on the host: it is not
 * counted by the context's tracking allocator, so that turning profiling on
 * does not change the memory figures it reports.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_internal.h"

void xattn__profiler_init(struct xattn_ctx *ctx)
{
    memset(&ctx->prof, 0, sizeof ctx->prof);
    ctx->prof.t0 = xattn__now();
}

void xattn__profiler_free(struct xattn_ctx *ctx)
{
    free(ctx->prof.recs);
    free(ctx->prof.events);
    ctx->prof.recs = NULL;
    ctx->prof.events = NULL;
    ctx->prof.nrecs = ctx->prof.cap_recs = 0;
    ctx->prof.nevents = ctx->prof.cap_events = 0;
}

static double xattn__prof_us(const struct xattn_ctx *ctx, double t)
{
    return (t - ctx->prof.t0) * 1e6;
}

/* Grows *arr (of *cap elements of `size` bytes) to hold `need`; 0 on failure. */
static int xattn__grow(void **arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 1;
    size_t n = *cap ? *cap : first;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size)
            return 0;
        n *= 2;
    }
    void *p = realloc(*arr, n * size);
    if (!p)
        return 0;
    *arr = p;
    *cap = n;
    return 1;
}

static void xattn__copy_str(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* Derived rates; negative where undefined. */
static void xattn__record_derive(const struct xattn_ctx *ctx, xattn_record *r)
{
    r->gflops_useful = r->gflops_executed = r->gbytes_per_s = -1.0;
    r->pct_fma_ceiling = r->pct_bw_ceiling = -1.0;
    if (r->device_ms > 0) {
        const double s = r->device_ms * 1e-3;
        r->gflops_useful = r->flops_useful / s * 1e-9;
        r->gflops_executed = r->flops_executed / s * 1e-9;
        r->gbytes_per_s = r->bytes_actual / s * 1e-9;
    }
    if (ctx->prof.ceil_state != 1 || r->device_ms <= 0)
        return;
    const xattn_ceilings *c = &ctx->prof.ceil;
    /* The ceiling of the units that did the products: the matrix units'
     * (tensor cores) when the kernel says it used them, else the f32 FMA
     * ceiling; the CPU kernels compute in f32 whatever the storage dtype, and
     * other backends use a 16-bit FMA ceiling when the device has one and the
     * inputs are 16-bit. No ceiling for the units used: no share. */
    double fma = c->fma_f32_gflops;
    const int half = r->q_dtype == r->kv_dtype && r->q_dtype != XATTN_DTYPE_F32;
    if (r->matrix_units) {
        fma = !half ? 0.0 : r->q_dtype == XATTN_DTYPE_F16 ? c->mma_f16_gflops : c->mma_bf16_gflops;
    } else if (r->backend != XATTN_BACKEND_CPU && half) {
        if (r->q_dtype == XATTN_DTYPE_F16 && c->fma_f16_gflops > 0)
            fma = c->fma_f16_gflops;
        else if (r->q_dtype == XATTN_DTYPE_BF16 && c->fma_bf16_gflops > 0)
            fma = c->fma_bf16_gflops;
    }
    if (fma > 0)
        r->pct_fma_ceiling = 100.0 * r->gflops_executed / fma;
    if (c->read_gbps > 0)
        r->pct_bw_ceiling = 100.0 * r->gbytes_per_s / c->read_gbps;
}

xattn_record *xattn__profiler_on_call(struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                      const xattn_desc_summary *sum, const xattn_problem *p,
                                      const xattn_run_info *ri, const xattn__exec *exec,
                                      double t_submit, double t_done, uint64_t mem_before)
{
    xattn__profiler *pr = &ctx->prof;
    if (!xattn__grow((void **)&pr->recs, &pr->cap_recs, pr->nrecs + 1, sizeof *pr->recs, 64)) {
        if (pr->dropped++ == 0)
            xattn__log(XATTN_LOG_WARN, "profiler: out of memory storing a record; records are "
                                       "being dropped (read or reset them)");
        pr->next_seq++;
        return NULL;
    }
    xattn__prof_entry *e = &pr->recs[pr->nrecs++];
    e->mem_before_bytes = mem_before;
    xattn_record *r = &e->rec;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;

    /* identity */
    r->seq = pr->next_seq++;
    r->backend = ctx->be->id;
    r->device = ctx->device;
    xattn__copy_str(r->device_name, sizeof r->device_name, ctx->info.name);
    r->algo_requested = ri->algo_requested;
    r->algo_chosen = ri->algo_chosen;
    xattn__copy_str(r->reason, sizeof r->reason, ri->reason);
    r->q_dtype = sum->q_dtype;
    r->kv_dtype = sum->kv_dtype;
    r->batch = sum->B;
    r->heads = sum->Hq;
    r->kv_heads = sum->Hkv;
    r->sq = sum->Sq;
    r->sk = sum->Sk;
    r->head_dim = sum->D;
    r->head_dim_v = sum->Dv;
    r->causal = d->causal;
    r->align = d->align;
    r->window_left = d->window_left;
    r->window_right = d->window_right;
    r->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)sum->D));
    r->softcap = d->softcap;
    r->has_bias = d->bias.buffer != NULL;
    r->has_alibi = d->alibi_slopes != NULL;
    r->has_sinks = d->sinks.buffer != NULL;
    r->page_size = d->block_table ? d->k.shape[1] : 0;
    r->append_tokens = sum->s_new;
    r->append_ms = ri->append_ms;
    r->append_bytes = ri->append_bytes;
    r->has_lse = d->lse.buffer != NULL;
    r->varlen = sum->varlen;
    r->padded = !sum->varlen && (d->seqlens_q != NULL || d->seqlens_k != NULL);
    r->num_splits = ri->num_splits;
    if (pr->depth > 0)
        xattn__copy_str(r->range, sizeof r->range, pr->open[pr->depth - 1].name);

    /* time: the backend's device time ends when the synchronized call returned
     * (docs/measurement.md, "Timeline"); phases follow each other from its start. */
    r->host_submit_us = xattn__prof_us(ctx, t_submit);
    r->device_ms = ri->device_ms > 0 ? ri->device_ms : 0.0;
    r->device_end_us = xattn__prof_us(ctx, t_done);
    r->device_start_us = r->device_end_us - r->device_ms * 1e3;
    if (r->device_start_us < r->host_submit_us) /* a backend clock coarser than ours */
        r->device_start_us = r->host_submit_us;
    r->num_phases = ri->num_phases < 0 ? 0 : ri->num_phases > 4 ? 4 : ri->num_phases;
    double at = r->device_start_us;
    for (int i = 0; i < r->num_phases; i++) {
        xattn__copy_str(r->phase_names[i], sizeof r->phase_names[i], ri->phase_names[i]);
        r->phase_ms[i] = ri->phase_ms[i];
        r->phase_start_us[i] = at;
        at += ri->phase_ms[i] * 1e3;
    }
    r->build_ms = ri->build_ms;
    r->tile_q = ri->tile_q;
    r->tile_k = ri->tile_k;
    r->tile_heads = ri->tile_heads > 1 ? ri->tile_heads : 1;
    xattn__copy_str(r->kernel, sizeof r->kernel, ri->kernel);
    r->matrix_units = ri->matrix_units != 0;

    /* memory */
    r->workspace_bytes = ri->workspace_bytes;
    r->mem_current_bytes = atomic_load(&ctx->mem_current);
    r->mem_peak_bytes = atomic_load(&ctx->mem_peak);
    r->device_mem_total = ri->device_mem_total;
    r->device_mem_free = ri->device_mem_free;

    /* work */
    if (p) {
        xattn__work w;
        xattn__work_account(p, ri, exec, &w);
        r->work_counted = w.counted;
        r->flops_dense = w.flops_dense;
        r->flops_useful = w.flops_useful;
        r->flops_executed = w.flops_executed;
        r->bytes_min = w.bytes_min;
        r->bytes_actual = w.bytes_actual;
        r->padding_waste = w.padding_waste;
    }
    xattn__record_derive(ctx, r);
    r->host_return_us = xattn__prof_us(ctx, xattn__now());
    return r;
}

/* ---- public: records ----------------------------------------------------- */

xattn_status xattn_profiler_enable(xattn_ctx *ctx, int on)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    if (on != 0 && on != 1)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "on: %d, expected 0 or 1", on);
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    ctx->prof.on = on;
    /* Interop contexts skip xattn_ctx_create: look the ceilings up here. */
    if (on && ctx->prof.ceil_state == 0)
        xattn__ceilings_load(ctx);
    xattn__ctx_leave(ctx);
    return XATTN_STATUS_OK;
}

xattn_status xattn_profiler_count(const xattn_ctx *ctx, size_t *count)
{
    xattn__clear_error();
    if (!ctx || !count)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "count" : "ctx");
    /* Readers take the context like calls do: a call on another thread may be
     * growing the record array (BUSY rather than a read of freed memory). The
     * cast touches only the busy flag. */
    struct xattn_ctx *c = (struct xattn_ctx *)ctx;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(c));
    *count = ctx->prof.nrecs;
    xattn__ctx_leave(c);
    return XATTN_STATUS_OK;
}

xattn_status xattn_profiler_get_sized(const xattn_ctx *ctx, size_t index, xattn_record *out,
                                      size_t rec_size)
{
    xattn__clear_error();
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "rec" : "ctx");
    if (rec_size < sizeof(size_t))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "rec: struct size %zu is smaller than its struct_size field", rec_size);
    struct xattn_ctx *c = (struct xattn_ctx *)ctx; /* the busy flag only, as above */
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(c));
    size_t n = ctx->prof.nrecs;
    xattn_record rec;
    if (index < n)
        rec = ctx->prof.recs[index].rec;
    xattn__ctx_leave(c);
    if (index >= n)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "index: %zu, but the context holds %zu record%s", index, n,
                            n == 1 ? "" : "s");
    return xattn__struct_out(out, rec_size, &rec, sizeof rec, "rec");
}

xattn_status(xattn_profiler_get)(const xattn_ctx *ctx, size_t index, xattn_record *rec)
{
    return xattn_profiler_get_sized(ctx, index, rec, XATTN__V1_RECORD_SIZE);
}

xattn_status xattn_profiler_reset(xattn_ctx *ctx)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn__profiler *pr = &ctx->prof;
    pr->nrecs = 0;
    pr->dropped = 0;
    /* Closed range events go; the events of ranges still open stay, so that
     * their pop closes them. */
    size_t kept = 0;
    for (int k = 0; k < pr->depth; k++) {
        size_t ev = pr->open[k].event;
        if (ev == SIZE_MAX)
            continue;
        pr->events[kept] = pr->events[ev];
        pr->open[k].event = kept++;
    }
    pr->nevents = kept;
    xattn__ctx_leave(ctx);
    return XATTN_STATUS_OK;
}

/* ---- public: user ranges --------------------------------------------------- */

xattn_status xattn_range_push(xattn_ctx *ctx, const char *name)
{
    xattn__clear_error();
    if (!ctx || !name)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "name" : "ctx");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn__profiler *pr = &ctx->prof;
    xattn_status st = XATTN_STATUS_OK;
    if (pr->depth >= XATTN__RANGE_DEPTH) {
        st = xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                          "name: range '%s' would nest %d deep; at most %d ranges can be open",
                          name, pr->depth + 1, XATTN__RANGE_DEPTH);
    } else {
        xattn__range_open *o = &pr->open[pr->depth];
        xattn__copy_str(o->name, sizeof o->name, name);
        o->start_us = xattn__prof_us(ctx, xattn__now());
        o->event = SIZE_MAX;
        if (pr->on && xattn__grow((void **)&pr->events, &pr->cap_events, pr->nevents + 1,
                                  sizeof *pr->events, 16)) {
            xattn__range_event *e = &pr->events[pr->nevents];
            memcpy(e->name, o->name, sizeof e->name);
            e->start_us = o->start_us;
            e->end_us = -1.0;
            e->depth = pr->depth;
            o->event = pr->nevents++;
        }
        pr->depth++;
    }
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_range_pop(xattn_ctx *ctx)
{
    xattn__clear_error();
    if (!ctx)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn__profiler *pr = &ctx->prof;
    xattn_status st = XATTN_STATUS_OK;
    if (pr->depth == 0) {
        st = xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                          "xattn_range_pop: no range is open (every push was already popped)");
    } else {
        xattn__range_open *o = &pr->open[--pr->depth];
        if (o->event != SIZE_MAX)
            pr->events[o->event].end_us = xattn__prof_us(ctx, xattn__now());
    }
    xattn__ctx_leave(ctx);
    return st;
}
