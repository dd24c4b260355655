/*
 * Profiler exports (docs/measurement.md has the formats):
 *   JSON   schema "xattn.records/1": the context, its ceilings, every record
 *          with every field, and the user ranges;
 *   CSV    a header row, then one row a record (phases flattened);
 *   TRACE  Chrome / Perfetto trace-event JSON: one process per device, a host
 *          track (API calls, builds, user ranges), a queue track (the device
 *          time of each call, its phases nested inside), memory counters.
 * Numbers are written in the "C" locale whatever the caller's; strings and
 * numbers go through the writer shared with the xattn tool (xattn_writer.h):
 * strings escaped, bytes that are not valid UTF-8 as U+FFFD, numbers in the
 * shortest form that reads back exactly.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xattn_internal.h"
#include "xattn_writer.h"

/* ---- small writers (strings, numbers: xattn_writer.h) ------------------------ */

/* Microseconds from integer nanoseconds, exactly ("12.345"). */
static void xattn__json_us(FILE *f, long long ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%lld.%03lld", ns / 1000, ns % 1000);
}

static long long xattn__ns(double us)
{
    return isfinite(us) ? llround(us * 1000.0) : 0;
}

static const char *xattn__align_name(xattn_align a)
{
    return a == XATTN_ALIGN_TOP_LEFT ? "top_left" : "bottom_right";
}

/* ---- JSON ------------------------------------------------------------------- */

#define XATTN__JS(key, val) (xattn__json_key(f, key), xattn__json_str(f, val))
#define XATTN__JN(key, val) (xattn__json_key(f, key), xattn__json_num(f, val))
#define XATTN__JI(key, val) (xattn__json_key(f, key), fprintf(f, "%lld", (long long)(val)))
#define XATTN__JU(key, val) (xattn__json_key(f, key), fprintf(f, "%llu", (unsigned long long)(val)))
#define XATTN__JB(key, val) (xattn__json_key(f, key), fputs((val) ? "true" : "false", f))

static void xattn__json_record(FILE *f, const xattn_record *r)
{
    fprintf(f, "{\"seq\": %llu", (unsigned long long)r->seq);
    XATTN__JS("backend", xattn_backend_name(r->backend));
    XATTN__JI("device", r->device);
    XATTN__JS("device_name", r->device_name);
    XATTN__JS("algo_requested", xattn_algo_name(r->algo_requested));
    XATTN__JS("algo_chosen", xattn_algo_name(r->algo_chosen));
    XATTN__JS("reason", r->reason);
    XATTN__JS("q_dtype", xattn_dtype_name(r->q_dtype));
    XATTN__JS("kv_dtype", xattn_dtype_name(r->kv_dtype));
    XATTN__JI("batch", r->batch);
    XATTN__JI("heads", r->heads);
    XATTN__JI("kv_heads", r->kv_heads);
    XATTN__JI("sq", r->sq);
    XATTN__JI("sk", r->sk);
    XATTN__JI("head_dim", r->head_dim);
    XATTN__JI("head_dim_v", r->head_dim_v);
    XATTN__JB("causal", r->causal);
    XATTN__JS("align", xattn__align_name(r->align));
    XATTN__JI("window_left", r->window_left);
    XATTN__JI("window_right", r->window_right);
    XATTN__JN("scale", (double)r->scale);
    XATTN__JN("softcap", (double)r->softcap);
    XATTN__JB("has_bias", r->has_bias);
    XATTN__JB("has_alibi", r->has_alibi);
    XATTN__JB("has_lse", r->has_lse);
    XATTN__JB("varlen", r->varlen);
    XATTN__JB("padded", r->padded);
    XATTN__JI("num_splits", r->num_splits);
    XATTN__JI("tile_q", r->tile_q);
    XATTN__JI("tile_k", r->tile_k);
    XATTN__JI("tile_heads", r->tile_heads);
    XATTN__JS("kernel", r->kernel);
    XATTN__JB("matrix_units", r->matrix_units);
    XATTN__JB("work_counted", r->work_counted);
    XATTN__JB("has_sinks", r->has_sinks);
    XATTN__JI("page_size", r->page_size);
    XATTN__JI("append_tokens", r->append_tokens);
    XATTN__JN("append_ms", r->append_ms);
    XATTN__JU("append_bytes", r->append_bytes);
    XATTN__JS("range", r->range);
    XATTN__JN("host_submit_us", r->host_submit_us);
    XATTN__JN("host_return_us", r->host_return_us);
    XATTN__JN("device_start_us", r->device_start_us);
    XATTN__JN("device_end_us", r->device_end_us);
    XATTN__JN("device_ms", r->device_ms);
    fputs(", \"phases\": [", f);
    for (int i = 0; i < r->num_phases; i++) {
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        xattn__json_str(f, r->phase_names[i]);
        XATTN__JN("ms", r->phase_ms[i]);
        XATTN__JN("start_us", r->phase_start_us[i]);
        fputc('}', f);
    }
    fputc(']', f);
    XATTN__JN("build_ms", r->build_ms);
    XATTN__JU("workspace_bytes", r->workspace_bytes);
    XATTN__JU("mem_current_bytes", r->mem_current_bytes);
    XATTN__JU("mem_peak_bytes", r->mem_peak_bytes);
    XATTN__JU("device_mem_total", r->device_mem_total);
    XATTN__JU("device_mem_free", r->device_mem_free);
    XATTN__JN("flops_dense", r->flops_dense);
    XATTN__JN("flops_useful", r->flops_useful);
    XATTN__JN("flops_executed", r->flops_executed);
    XATTN__JN("bytes_min", r->bytes_min);
    XATTN__JN("bytes_actual", r->bytes_actual);
    XATTN__JN("gflops_useful", r->gflops_useful);
    XATTN__JN("gflops_executed", r->gflops_executed);
    XATTN__JN("gbytes_per_s", r->gbytes_per_s);
    XATTN__JN("padding_waste", r->padding_waste);
    XATTN__JN("pct_fma_ceiling", r->pct_fma_ceiling);
    XATTN__JN("pct_bw_ceiling", r->pct_bw_ceiling);
    fputc('}', f);
}

static void xattn__json_ctx_ceilings(FILE *f, const struct xattn_ctx *ctx)
{
    if (ctx->prof.ceil_state != 1)
        fputs("null", f);
    else
        xattn__json_ceilings(f, &ctx->prof.ceil);
}

static void xattn__export_json(FILE *f, const struct xattn_ctx *ctx, double now_us)
{
    const xattn__profiler *pr = &ctx->prof;
    const xattn_device_info *in = &ctx->info;
    fputs("{\n  \"schema\": \"xattn.records/1\",\n  \"library_version\": ", f);
    xattn__json_str(f, xattn_version_string());
    fputs(",\n  \"context\": {\"backend\": ", f);
    xattn__json_str(f, ctx->be->name);
    XATTN__JI("device", ctx->device);
    XATTN__JS("device_name", in->name);
    XATTN__JS("vendor", in->vendor);
    XATTN__JS("driver_version", in->driver_version);
    XATTN__JS("platform", in->platform);
    XATTN__JS("description", in->description);
    XATTN__JS("cpu_features", in->cpu_features);
    XATTN__JI("compute_units", in->compute_units);
    XATTN__JU("global_mem_bytes", in->global_mem_bytes);
    XATTN__JN("exported_at_us", now_us);
    fputs("},\n  \"ceilings\": ", f);
    xattn__json_ctx_ceilings(f, ctx);
    fprintf(f, ",\n  \"dropped_records\": %llu,\n  \"records\": [",
            (unsigned long long)pr->dropped);
    for (size_t i = 0; i < pr->nrecs; i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        xattn__json_record(f, &pr->recs[i].rec);
    }
    fputs(pr->nrecs ? "\n  ],\n  \"ranges\": [" : "],\n  \"ranges\": [", f);
    for (size_t i = 0; i < pr->nevents; i++) {
        const xattn__range_event *e = &pr->events[i];
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        xattn__json_str(f, e->name);
        XATTN__JN("start_us", e->start_us);
        XATTN__JN("end_us", e->end_us >= 0 ? e->end_us : now_us);
        XATTN__JI("depth", e->depth);
        XATTN__JB("open", e->end_us < 0);
        fputc('}', f);
    }
    fputs(pr->nevents ? "\n  ]\n}\n" : "]\n}\n", f);
}

/* ---- CSV -------------------------------------------------------------------- */

static void xattn__export_csv(FILE *f, const struct xattn_ctx *ctx)
{
    fputs("seq,backend,device,device_name,algo_requested,algo_chosen,reason,q_dtype,kv_dtype,"
          "batch,heads,kv_heads,sq,sk,head_dim,head_dim_v,causal,align,window_left,"
          "window_right,scale,softcap,has_bias,has_alibi,has_lse,varlen,padded,num_splits,"
          "tile_q,tile_k,range,host_submit_us,host_return_us,device_start_us,device_end_us,"
          "device_ms,num_phases",
          f);
    for (int i = 0; i < 4; i++)
        fprintf(f, ",phase%d_name,phase%d_ms,phase%d_start_us", i, i, i);
    fputs(",build_ms,workspace_bytes,mem_current_bytes,mem_peak_bytes,device_mem_total,"
          "device_mem_free,flops_dense,flops_useful,flops_executed,bytes_min,bytes_actual,"
          "gflops_useful,gflops_executed,gbytes_per_s,padding_waste,pct_fma_ceiling,"
          "pct_bw_ceiling,kernel,matrix_units,work_counted,has_sinks,page_size,append_tokens,"
          "append_ms,append_bytes\n",
          f);
    for (size_t n = 0; n < ctx->prof.nrecs; n++) {
        const xattn_record *r = &ctx->prof.recs[n].rec;
        fprintf(f, "%llu,%s,%d,", (unsigned long long)r->seq, xattn_backend_name(r->backend),
                r->device);
        xattn__csv_str(f, r->device_name);
        fprintf(f, ",%s,%s,", xattn_algo_name(r->algo_requested), xattn_algo_name(r->algo_chosen));
        xattn__csv_str(f, r->reason);
        fprintf(f, ",%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d,%s,%lld,%lld,",
                xattn_dtype_name(r->q_dtype), xattn_dtype_name(r->kv_dtype), (long long)r->batch,
                (long long)r->heads, (long long)r->kv_heads, (long long)r->sq, (long long)r->sk,
                (long long)r->head_dim, (long long)r->head_dim_v, r->causal,
                xattn__align_name(r->align), (long long)r->window_left, (long long)r->window_right);
        xattn__csv_num(f, (double)r->scale);
        fputc(',', f);
        xattn__csv_num(f, (double)r->softcap);
        fprintf(f, ",%d,%d,%d,%d,%d,%d,%d,%d,", r->has_bias, r->has_alibi, r->has_lse, r->varlen,
                r->padded, r->num_splits, r->tile_q, r->tile_k);
        xattn__csv_str(f, r->range);
        const double times[] = {r->host_submit_us, r->host_return_us, r->device_start_us,
                                r->device_end_us, r->device_ms};
        for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
            fputc(',', f);
            xattn__csv_num(f, times[i]);
        }
        fprintf(f, ",%d", r->num_phases);
        for (int i = 0; i < 4; i++) {
            fputc(',', f);
            if (i < r->num_phases) {
                xattn__csv_str(f, r->phase_names[i]);
                fputc(',', f);
                xattn__csv_num(f, r->phase_ms[i]);
                fputc(',', f);
                xattn__csv_num(f, r->phase_start_us[i]);
            } else {
                fputs(",,", f);
            }
        }
        fputc(',', f);
        xattn__csv_num(f, r->build_ms);
        fprintf(f, ",%llu,%llu,%llu,%llu,%llu", (unsigned long long)r->workspace_bytes,
                (unsigned long long)r->mem_current_bytes, (unsigned long long)r->mem_peak_bytes,
                (unsigned long long)r->device_mem_total, (unsigned long long)r->device_mem_free);
        const double work[] = {r->flops_dense,     r->flops_useful,  r->flops_executed,
                               r->bytes_min,       r->bytes_actual,  r->gflops_useful,
                               r->gflops_executed, r->gbytes_per_s,  r->padding_waste,
                               r->pct_fma_ceiling, r->pct_bw_ceiling};
        for (size_t i = 0; i < sizeof work / sizeof work[0]; i++) {
            fputc(',', f);
            xattn__csv_num(f, work[i]);
        }
        fputc(',', f);
        xattn__csv_str(f, r->kernel);
        fprintf(f, ",%d,%d,%d,%lld,%lld,", r->matrix_units, r->work_counted, r->has_sinks,
                (long long)r->page_size, (long long)r->append_tokens);
        xattn__csv_num(f, r->append_ms);
        fprintf(f, ",%llu\n", (unsigned long long)r->append_bytes);
    }
}

/* ---- trace ------------------------------------------------------------------- */

enum { XATTN__TID_HOST = 1, XATTN__TID_QUEUE = 2 };

/* Opens a trace event: {"name": ..., "cat": ..., "ph": ..., "pid", "tid", "ts". */
static void xattn__ev_open(FILE *f, int *first, const char *name, const char *cat, char ph, int pid,
                           int tid, long long ts_ns)
{
    fputs(*first ? "\n    {\"name\": " : ",\n    {\"name\": ", f);
    *first = 0;
    xattn__json_str(f, name);
    fprintf(f, ", \"cat\": \"%s\", \"ph\": \"%c\", \"pid\": %d, \"tid\": %d, \"ts\": ", cat, ph,
            pid, tid);
    xattn__json_us(f, ts_ns);
}

static void xattn__ev_dur(FILE *f, long long dur_ns)
{
    fputs(", \"dur\": ", f);
    xattn__json_us(f, dur_ns < 0 ? 0 : dur_ns);
}

static void xattn__ev_meta(FILE *f, int *first, const char *what, int pid, int tid,
                           const char *value)
{
    xattn__ev_open(f, first, what, "__metadata", 'M', pid, tid, 0);
    fputs(", \"args\": {\"name\": ", f);
    xattn__json_str(f, value);
    fputs("}}", f);
}

static void xattn__ev_memory(FILE *f, int *first, int pid, long long ts_ns, uint64_t cur,
                             uint64_t peak)
{
    xattn__ev_open(f, first, "memory", "memory", 'C', pid, 0, ts_ns);
    fprintf(f, ", \"args\": {\"current_bytes\": %llu, \"peak_bytes\": %llu}}",
            (unsigned long long)cur, (unsigned long long)peak);
}

static void xattn__export_trace(FILE *f, const struct xattn_ctx *ctx, double now_us)
{
    const xattn__profiler *pr = &ctx->prof;
    /* One process per device: distinct across backends and devices so that
     * traces of several contexts can be merged. */
    const int pid = 1000 * ((int)ctx->be->id + 1) + ctx->device;
    char label[400];
    int first = 1;
    fputs("{\n  \"displayTimeUnit\": \"ms\",\n  \"otherData\": {\"schema\": \"xattn.trace/1\", "
          "\"library_version\": ",
          f);
    xattn__json_str(f, xattn_version_string());
    fputs("},\n  \"traceEvents\": [", f);
    snprintf(label, sizeof label, "%s:%d %s", ctx->be->name, ctx->device, ctx->info.name);
    xattn__ev_meta(f, &first, "process_name", pid, 0, label);
    xattn__ev_meta(f, &first, "thread_name", pid, XATTN__TID_HOST, "host");
    xattn__ev_meta(f, &first, "thread_name", pid, XATTN__TID_QUEUE, "queue 0");

    /* User ranges on the host track. */
    for (size_t i = 0; i < pr->nevents; i++) {
        const xattn__range_event *e = &pr->events[i];
        long long s = xattn__ns(e->start_us), t = xattn__ns(e->end_us >= 0 ? e->end_us : now_us);
        xattn__ev_open(f, &first, e->name, "range", 'X', pid, XATTN__TID_HOST, s);
        xattn__ev_dur(f, t - s);
        fprintf(f, ", \"args\": {\"depth\": %d, \"open\": %s}}", e->depth,
                e->end_us < 0 ? "true" : "false");
    }

    uint64_t peak = 0;
    for (size_t n = 0; n < pr->nrecs; n++) {
        const xattn__prof_entry *en = &pr->recs[n];
        const xattn_record *r = &en->rec;
        const long long hs = xattn__ns(r->host_submit_us), he = xattn__ns(r->host_return_us);
        const long long ds = xattn__ns(r->device_start_us), de = xattn__ns(r->device_end_us);

        /* The API call on the host track, with a program build nested in it. */
        snprintf(label, sizeof label, "xattn_attention #%llu", (unsigned long long)r->seq);
        xattn__ev_open(f, &first, label, "api", 'X', pid, XATTN__TID_HOST, hs);
        xattn__ev_dur(f, he - hs);
        fprintf(f, ", \"args\": {\"seq\": %llu, \"algo\": \"%s\", \"range\": ",
                (unsigned long long)r->seq, xattn_algo_name(r->algo_chosen));
        xattn__json_str(f, r->range);
        fputs("}}", f);
        if (r->build_ms > 0) {
            long long b = xattn__ns(r->build_ms * 1e3);
            xattn__ev_open(f, &first, "build", "build", 'X', pid, XATTN__TID_HOST, hs);
            xattn__ev_dur(f, b < he - hs ? b : he - hs);
            fputs("}", f);
        }

        /* The device time on the queue track, the phases nested inside it. */
        snprintf(label, sizeof label, "%s #%llu", xattn_algo_name(r->algo_chosen),
                 (unsigned long long)r->seq);
        xattn__ev_open(f, &first, label, "attention", 'X', pid, XATTN__TID_QUEUE, ds);
        xattn__ev_dur(f, de - ds);
        snprintf(label, sizeof label, "B%lld Hq%lld/%lld Sq%lld Sk%lld D%lld/%lld %s/%s%s",
                 (long long)r->batch, (long long)r->heads, (long long)r->kv_heads, (long long)r->sq,
                 (long long)r->sk, (long long)r->head_dim, (long long)r->head_dim_v,
                 xattn_dtype_name(r->q_dtype), xattn_dtype_name(r->kv_dtype),
                 r->causal ? " causal" : "");
        fprintf(f, ", \"args\": {\"seq\": %llu, \"shape\": ", (unsigned long long)r->seq);
        xattn__json_str(f, label);
        fputs(", \"reason\": ", f);
        xattn__json_str(f, r->reason);
        XATTN__JN("device_ms", r->device_ms);
        XATTN__JN("gflops_useful", r->gflops_useful);
        XATTN__JN("gflops_executed", r->gflops_executed);
        XATTN__JN("gbytes_per_s", r->gbytes_per_s);
        XATTN__JN("pct_fma_ceiling", r->pct_fma_ceiling);
        XATTN__JN("pct_bw_ceiling", r->pct_bw_ceiling);
        XATTN__JU("workspace_bytes", r->workspace_bytes);
        fputs("}}", f);
        for (int i = 0; i < r->num_phases; i++) {
            long long ps = xattn__ns(r->phase_start_us[i]);
            long long pe = xattn__ns(r->phase_start_us[i] + r->phase_ms[i] * 1e3);
            ps = ps < ds ? ds : ps > de ? de : ps;
            pe = pe < ps ? ps : pe > de ? de : pe;
            xattn__ev_open(f, &first, r->phase_names[i], "phase", 'X', pid, XATTN__TID_QUEUE, ps);
            xattn__ev_dur(f, pe - ps);
            fputs(", \"args\": {\"ms\": ", f);
            xattn__json_num(f, r->phase_ms[i]);
            fputs("}}", f);
        }

        /* Memory: before the call, while its workspace is held, after it. */
        if (en->mem_before_bytes > peak)
            peak = en->mem_before_bytes;
        xattn__ev_memory(f, &first, pid, hs, en->mem_before_bytes, peak);
        uint64_t during = en->mem_before_bytes + r->workspace_bytes;
        if (during > peak)
            peak = during;
        xattn__ev_memory(f, &first, pid, ds, during, peak);
        peak = r->mem_peak_bytes;
        xattn__ev_memory(f, &first, pid, de > he ? de : he, r->mem_current_bytes, peak);
    }
    fputs("\n  ]\n}\n", f);
}

/* ---- entry -------------------------------------------------------------------- */

xattn_status xattn_profiler_export(const xattn_ctx *ctx, xattn_export_format format,
                                   const char *path)
{
    xattn__clear_error();
    if (!ctx || !path)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "path" : "ctx");
    if (format != XATTN_EXPORT_JSON && format != XATTN_EXPORT_CSV && format != XATTN_EXPORT_TRACE)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "format: %d, expected XATTN_EXPORT_JSON, _CSV or _TRACE", (int)format);
    /* Take the context like a call does (see xattn_profiler_count). */
    struct xattn_ctx *busy = (struct xattn_ctx *)ctx;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(busy));
    FILE *f = fopen(path, "w");
    if (!f) {
        xattn__ctx_leave(busy);
        return xattn__error(XATTN_STATUS_IO, "path: cannot open '%s' for writing: %s", path,
                            strerror(errno));
    }
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    const double now_us = (xattn__now() - ctx->prof.t0) * 1e6;
    if (format == XATTN_EXPORT_JSON)
        xattn__export_json(f, ctx, now_us);
    else if (format == XATTN_EXPORT_CSV)
        xattn__export_csv(f, ctx);
    else
        xattn__export_trace(f, ctx, now_us);
    if (c) {
        uselocale(old);
        freelocale(c);
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    xattn__ctx_leave(busy);
    if (err)
        return xattn__error(XATTN_STATUS_IO, "path: writing '%s' failed: %s", path, strerror(err));
    return XATTN_STATUS_OK;
}
