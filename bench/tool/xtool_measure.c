/* One measured cell: warm-up, repetitions until the noise is under a bound or
 * the cell's budget is spent, and the figures derived from the record. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"

xattn_status xtool_cell_measure(xattn_ctx *ctx, xtool_case_run *r, const xtool_cell_opts *o,
                                xtool_cell *out)
{
    memset(out, 0, sizeof *out);
    out->pct_fma = out->pct_bw = -1;
    xattn_ctx_reset_peak(ctx);
    xattn_status st = XATTN_STATUS_OK;
    if (o->poison_first) {
        st = xtool_cell_poisoned_call(ctx, r, &out->info);
        if (st != XATTN_STATUS_OK)
            return st;
        out->build_ms += out->info.build_ms;
    }
    for (int i = o->poison_first ? 1 : 0; i < o->warmup; i++) {
        st = xattn_attention(ctx, &r->desc, &out->info);
        if (st != XATTN_STATUS_OK)
            return st;
        out->build_ms += out->info.build_ms;
    }
    int cap = o->max_reps > 0 ? o->max_reps : 1;
    double *ms = malloc((size_t)cap * sizeof *ms);
    if (!ms)
        return XATTN_STATUS_OUT_OF_MEMORY;
    double *cpu = o->cpu_time ? malloc((size_t)cap * sizeof *cpu) : NULL;
    if (o->cpu_time && !cpu) {
        free(ms);
        return XATTN_STATUS_OUT_OF_MEMORY;
    }
    double t0 = xtool_now_s();
    int n = 0;
    while (n < cap) {
        double c0 = cpu ? xtool_cpu_now_s() : 0;
        st = xattn_attention(ctx, &r->desc, &out->info);
        if (st != XATTN_STATUS_OK)
            break;
        if (cpu)
            cpu[n] = (xtool_cpu_now_s() - c0) * 1e3;
        out->build_ms += out->info.build_ms;
        ms[n++] = out->info.device_ms;
        out->elapsed_s = xtool_now_s() - t0;
        if (n >= o->min_reps && n >= 5) {
            xtool_stats_compute(ms, n, &out->t);
            if (xtool_stats_ci_narrow(&out->t, o->max_spread))
                break;
        }
        if (n >= 2 && out->elapsed_s >= o->budget_s)
            break;
    }
    if (n > 0) {
        xtool_stats_compute(ms, n, &out->t);
        if (cpu)
            xtool_stats_compute(cpu, n, &out->cpu);
        /* Converged only when the median's interval became narrow with at least
         * --min-reps (and 5) calls: a cell stopped by its budget or --max-reps
         * first is not. */
        out->converged = n >= o->min_reps && xtool_stats_ci_narrow(&out->t, o->max_spread);
        if (o->keep_ms)
            memcpy(o->keep_ms, ms, (size_t)n * sizeof *ms);
        if (o->keep_cpu_ms && cpu)
            memcpy(o->keep_cpu_ms, cpu, (size_t)n * sizeof *cpu);
    }
    free(ms);
    free(cpu);
    if (st != XATTN_STATUS_OK)
        return st;

    xattn_mem_stats m;
    if (xattn_ctx_mem_stats(ctx, &m) == XATTN_STATUS_OK)
        out->peak_bytes = m.peak_bytes;
    size_t count = 0;
    if (xattn_profiler_count(ctx, &count) == XATTN_STATUS_OK && count &&
        xattn_profiler_get(ctx, count - 1, &out->rec) == XATTN_STATUS_OK)
        out->has_rec = 1;
    xtool_cell_derive(out);
    return XATTN_STATUS_OK;
}

void xtool_cell_derive(xtool_cell *out)
{
    out->pct_fma = out->pct_bw = -1;
    out->gflops_useful = out->gflops_executed = out->gbytes_per_s = 0;
    out->fma_ceiling = out->bw_ceiling = out->intensity = 0;
    double med = out->t.median;
    if (out->has_rec && med > 0) {
        const xattn_record *rec = &out->rec;
        out->gflops_useful = rec->flops_useful / (med * 1e6);
        out->gflops_executed = rec->flops_executed / (med * 1e6);
        out->gbytes_per_s = rec->bytes_actual / (med * 1e6);
        /* The record's % uses the ceiling the library picked for this call
         * (f32 or f16/bf16); recover that ceiling and apply it to the median. */
        if (rec->pct_fma_ceiling > 0 && rec->gflops_executed > 0) {
            out->fma_ceiling = rec->gflops_executed * 100.0 / rec->pct_fma_ceiling;
            out->pct_fma = 100.0 * out->gflops_executed / out->fma_ceiling;
        }
        if (rec->pct_bw_ceiling > 0 && rec->gbytes_per_s > 0) {
            out->bw_ceiling = rec->gbytes_per_s * 100.0 / rec->pct_bw_ceiling;
            out->pct_bw = 100.0 * out->gbytes_per_s / out->bw_ceiling;
        }
    }
    if (out->has_rec && out->rec.bytes_actual > 0)
        out->intensity = out->rec.flops_executed / out->rec.bytes_actual;
}

xattn_status xtool_cell_poisoned_call(xattn_ctx *ctx, xtool_case_run *r, xattn_run_info *info)
{
    int64_t old = 0;
    xattn_ctx_get_option(ctx, XATTN_OPT_POISON, &old);
    xattn_status st = xattn_ctx_set_option(ctx, XATTN_OPT_POISON, 1);
    if (st != XATTN_STATUS_OK)
        return st;
    st = xattn_attention(ctx, &r->desc, info);
    xattn_ctx_set_option(ctx, XATTN_OPT_POISON, old);
    return st;
}
