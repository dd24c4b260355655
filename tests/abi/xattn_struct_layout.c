/*
 * xattn_struct_layout: prints, as JSON, the size and alignment of every public
 * struct of xattn.h and xattn_multi.h, and the name, offset and size of each
 * of its fields in declaration order. python/tests/test_struct_layout.py
 * compares this with the ctypes mirrors of the Python binding, and the field
 * names with the header's own declarations (so that a field added to a header
 * but not here fails the test too).
 *
 * Usage: xattn_struct_layout  (JSON on stdout, exit 0)
 */
#include <stddef.h>
#include <stdio.h>

#include "xattn.h"
#include "xattn_multi.h"

static int first_struct = 1;
static int first_field;

static void struct_begin(const char *name, size_t size, size_t align)
{
    printf("%s\n  \"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": [", first_struct ? "" : ",",
           name, size, align);
    first_struct = 0;
    first_field = 1;
}

static void field(const char *name, size_t offset, size_t size)
{
    printf("%s\n    {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu}", first_field ? "" : ",",
           name, offset, size);
    first_field = 0;
}

static void struct_end(void)
{
    printf("]}");
}

/* BEGIN(T) then one F(field) per member of T, in the header's order. */
#define BEGIN(T) struct_begin(#T, sizeof(T), _Alignof(T))
#define F(T, m) field(#m, offsetof(T, m), sizeof(((T *)0)->m))

int main(void)
{
    printf("{");

    BEGIN(xattn_tensor);
    F(xattn_tensor, buffer);
    F(xattn_tensor, offset);
    F(xattn_tensor, dtype);
    F(xattn_tensor, shape);
    F(xattn_tensor, strides);
    struct_end();

    BEGIN(xattn_attn_desc);
    F(xattn_attn_desc, struct_size);
    F(xattn_attn_desc, q);
    F(xattn_attn_desc, k);
    F(xattn_attn_desc, v);
    F(xattn_attn_desc, o);
    F(xattn_attn_desc, lse);
    F(xattn_attn_desc, bias);
    F(xattn_attn_desc, scale);
    F(xattn_attn_desc, softcap);
    F(xattn_attn_desc, alibi_slopes);
    F(xattn_attn_desc, causal);
    F(xattn_attn_desc, align);
    F(xattn_attn_desc, window_left);
    F(xattn_attn_desc, window_right);
    F(xattn_attn_desc, seqlens_q);
    F(xattn_attn_desc, seqlens_k);
    F(xattn_attn_desc, cu_seqlens_q);
    F(xattn_attn_desc, cu_seqlens_k);
    F(xattn_attn_desc, num_seqs);
    F(xattn_attn_desc, algo);
    F(xattn_attn_desc, num_splits);
    F(xattn_attn_desc, sinks);
    F(xattn_attn_desc, block_table);
    F(xattn_attn_desc, max_pages_per_seq);
    F(xattn_attn_desc, k_new);
    F(xattn_attn_desc, v_new);
    F(xattn_attn_desc, k_scale);
    F(xattn_attn_desc, v_scale);
    struct_end();

    BEGIN(xattn_run_info);
    F(xattn_run_info, struct_size);
    F(xattn_run_info, algo_requested);
    F(xattn_run_info, algo_chosen);
    F(xattn_run_info, reason);
    F(xattn_run_info, num_splits);
    F(xattn_run_info, workspace_bytes);
    F(xattn_run_info, device_ms);
    F(xattn_run_info, num_phases);
    F(xattn_run_info, phase_names);
    F(xattn_run_info, phase_ms);
    F(xattn_run_info, build_ms);
    F(xattn_run_info, tile_q);
    F(xattn_run_info, tile_k);
    F(xattn_run_info, device_mem_total);
    F(xattn_run_info, device_mem_free);
    F(xattn_run_info, tile_heads);
    F(xattn_run_info, kernel);
    F(xattn_run_info, matrix_units);
    F(xattn_run_info, append_ms);
    F(xattn_run_info, append_bytes);
    struct_end();

    BEGIN(xattn_record);
    F(xattn_record, struct_size);
    F(xattn_record, seq);
    F(xattn_record, backend);
    F(xattn_record, device);
    F(xattn_record, device_name);
    F(xattn_record, algo_requested);
    F(xattn_record, algo_chosen);
    F(xattn_record, reason);
    F(xattn_record, q_dtype);
    F(xattn_record, kv_dtype);
    F(xattn_record, batch);
    F(xattn_record, heads);
    F(xattn_record, kv_heads);
    F(xattn_record, sq);
    F(xattn_record, sk);
    F(xattn_record, head_dim);
    F(xattn_record, head_dim_v);
    F(xattn_record, causal);
    F(xattn_record, align);
    F(xattn_record, window_left);
    F(xattn_record, window_right);
    F(xattn_record, scale);
    F(xattn_record, softcap);
    F(xattn_record, has_bias);
    F(xattn_record, has_alibi);
    F(xattn_record, has_lse);
    F(xattn_record, varlen);
    F(xattn_record, padded);
    F(xattn_record, num_splits);
    F(xattn_record, range);
    F(xattn_record, host_submit_us);
    F(xattn_record, host_return_us);
    F(xattn_record, device_start_us);
    F(xattn_record, device_end_us);
    F(xattn_record, device_ms);
    F(xattn_record, num_phases);
    F(xattn_record, phase_names);
    F(xattn_record, phase_ms);
    F(xattn_record, phase_start_us);
    F(xattn_record, build_ms);
    F(xattn_record, workspace_bytes);
    F(xattn_record, mem_current_bytes);
    F(xattn_record, mem_peak_bytes);
    F(xattn_record, device_mem_total);
    F(xattn_record, device_mem_free);
    F(xattn_record, flops_dense);
    F(xattn_record, flops_useful);
    F(xattn_record, flops_executed);
    F(xattn_record, bytes_min);
    F(xattn_record, bytes_actual);
    F(xattn_record, gflops_useful);
    F(xattn_record, gflops_executed);
    F(xattn_record, gbytes_per_s);
    F(xattn_record, padding_waste);
    F(xattn_record, pct_fma_ceiling);
    F(xattn_record, pct_bw_ceiling);
    F(xattn_record, tile_q);
    F(xattn_record, tile_k);
    F(xattn_record, tile_heads);
    F(xattn_record, kernel);
    F(xattn_record, matrix_units);
    F(xattn_record, work_counted);
    F(xattn_record, has_sinks);
    F(xattn_record, page_size);
    F(xattn_record, append_tokens);
    F(xattn_record, append_ms);
    F(xattn_record, append_bytes);
    struct_end();

    BEGIN(xattn_device_info);
    F(xattn_device_info, struct_size);
    F(xattn_device_info, backend);
    F(xattn_device_info, index);
    F(xattn_device_info, name);
    F(xattn_device_info, vendor);
    F(xattn_device_info, driver_version);
    F(xattn_device_info, platform);
    F(xattn_device_info, description);
    F(xattn_device_info, compute_units);
    F(xattn_device_info, global_mem_bytes);
    F(xattn_device_info, local_mem_bytes);
    F(xattn_device_info, cache_bytes);
    F(xattn_device_info, max_work_group_size);
    F(xattn_device_info, fp16_supported);
    F(xattn_device_info, fp64_supported);
    F(xattn_device_info, compute_capability);
    F(xattn_device_info, cpu_features);
    F(xattn_device_info, device_type);
    struct_end();

    BEGIN(xattn_mem_stats);
    F(xattn_mem_stats, current_bytes);
    F(xattn_mem_stats, peak_bytes);
    F(xattn_mem_stats, alloc_count);
    F(xattn_mem_stats, limit_bytes);
    struct_end();

    BEGIN(xattn_ceilings);
    F(xattn_ceilings, struct_size);
    F(xattn_ceilings, fma_f32_gflops);
    F(xattn_ceilings, fma_f16_gflops);
    F(xattn_ceilings, fma_bf16_gflops);
    F(xattn_ceilings, read_gbps);
    F(xattn_ceilings, copy_gbps);
    F(xattn_ceilings, from_cache);
    F(xattn_ceilings, cache_path);
    F(xattn_ceilings, mma_f16_gflops);
    F(xattn_ceilings, mma_bf16_gflops);
    F(xattn_ceilings, load_others);
    F(xattn_ceilings, under_load);
    struct_end();

    BEGIN(xattn_multi_part);
    F(xattn_multi_part, backend);
    F(xattn_multi_part, device);
    F(xattn_multi_part, weight);
    F(xattn_multi_part, unit_begin);
    F(xattn_multi_part, unit_end);
    F(xattn_multi_part, calls);
    F(xattn_multi_part, algo_chosen);
    F(xattn_multi_part, device_ms);
    F(xattn_multi_part, copy_ms);
    F(xattn_multi_part, wall_ms);
    struct_end();

    BEGIN(xattn_multi_info);
    F(xattn_multi_info, struct_size);
    F(xattn_multi_info, num_devices);
    F(xattn_multi_info, units);
    F(xattn_multi_info, wall_ms);
    F(xattn_multi_info, stage_in_ms);
    F(xattn_multi_info, stage_out_ms);
    F(xattn_multi_info, part);
    struct_end();

    printf("\n}\n");
    return ferror(stdout) ? 1 : 0;
}
