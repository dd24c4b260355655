/* A profiler record printed field by field (run; xtool.h). */
#include <stdio.h>

#include "xtool.h"

void xtool_record_print(FILE *f, const xattn_record *r)
{
    char a[32], b[32], c[32];
    /* one call: its own time and the figures derived from it, not the median's */
    fprintf(f,
            "record   #%llu on %s:%d %s, range \"%s\" (the last call: its own time and figures, "
            "not the median's)\n",
            (unsigned long long)r->seq, xattn_backend_name(r->backend), r->device, r->device_name,
            r->range);
    fprintf(f, "  identity   algo %s (asked %s): %s\n", xattn_algo_name(r->algo_chosen),
            xattn_algo_name(r->algo_requested), r->reason);
    fprintf(f,
            "  shape      B%lld Hq%lld Hkv%lld Sq%lld Sk%lld D%lld Dv%lld, q %s, kv %s, "
            "scale %g, softcap %g\n",
            (long long)r->batch, (long long)r->heads, (long long)r->kv_heads, (long long)r->sq,
            (long long)r->sk, (long long)r->head_dim, (long long)r->head_dim_v,
            xattn_dtype_name(r->q_dtype), xattn_dtype_name(r->kv_dtype), (double)r->scale,
            (double)r->softcap);
    fprintf(f,
            "  options    causal %d (%s), window %lld,%lld, bias %d, alibi %d, lse %d, varlen %d, "
            "padded %d, splits %d, tiles %dx%d\n",
            r->causal, r->align == XATTN_ALIGN_TOP_LEFT ? "top-left" : "bottom-right",
            (long long)r->window_left, (long long)r->window_right, r->has_bias, r->has_alibi,
            r->has_lse, r->varlen, r->padded, r->num_splits, r->tile_q, r->tile_k);
    fprintf(f, "  cache      sinks %d, page size %lld (0 = contiguous), append %lld tokens",
            r->has_sinks, (long long)r->page_size, (long long)r->append_tokens);
    if (r->append_tokens > 0) {
        xtool_fmt_bytes((double)r->append_bytes, a, sizeof a);
        fprintf(f, " (%s written in %.4f ms, not in device time)", a, r->append_ms);
    }
    fprintf(f, "\n");
    fprintf(
        f, "  time       host %.1f..%.1f us, device %.1f..%.1f us, device %.4f ms, build %.3f ms\n",
        r->host_submit_us, r->host_return_us, r->device_start_us, r->device_end_us, r->device_ms,
        r->build_ms);
    for (int i = 0; i < r->num_phases && i < 4; i++)
        fprintf(f, "  phase      %-8s %.4f ms (from %.1f us)\n", r->phase_names[i], r->phase_ms[i],
                r->phase_start_us[i]);
    xtool_fmt_bytes((double)r->workspace_bytes, a, sizeof a);
    xtool_fmt_bytes((double)r->mem_current_bytes, b, sizeof b);
    xtool_fmt_bytes((double)r->mem_peak_bytes, c, sizeof c);
    fprintf(f, "  memory     workspace %s, context now %s, peak %s", a, b, c);
    if (r->device_mem_total) {
        xtool_fmt_bytes((double)r->device_mem_total, a, sizeof a);
        xtool_fmt_bytes((double)r->device_mem_free, b, sizeof b);
        fprintf(f, ", device %s (%s free)", a, b);
    }
    fprintf(f, "\n");
    fprintf(f,
            "  work       FLOPs dense %.4g, useful %.4g, executed %.4g; bytes min %.4g, actual "
            "%.4g\n",
            r->flops_dense, r->flops_useful, r->flops_executed, r->bytes_min, r->bytes_actual);
    fprintf(f, "  derived    %.2f GFLOP/s useful, %.2f executed, %.2f GB/s, padding waste %.1f%%",
            r->gflops_useful, r->gflops_executed, r->gbytes_per_s, 100.0 * r->padding_waste);
    char pf[16], pb[16];
    if (r->pct_fma_ceiling >= 0)
        fprintf(f, ", %s%% of the FMA ceiling, %s%% of the bandwidth\n",
                xtool_fmt_pct(r->pct_fma_ceiling, pf, sizeof pf),
                xtool_fmt_pct(r->pct_bw_ceiling, pb, sizeof pb));
    else
        fprintf(f, ", no ceilings known (run '%s devices --measure')\n", xtool_prog);
}
