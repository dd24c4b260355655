/*
 * Micro-benchmarks behind the device ceilings (docs/measurement.md): f32 FMA
 * throughput, streaming read bandwidth and copy bandwidth. Built as their own
 * program, apart from the attention kernels, only when ceilings are measured.
 */

/* 8 independent float4 chains per work-item hide the FMA latency; the result
 * is written so that the compiler cannot drop the loop. 64 FLOPs an iteration. */
__kernel void xattn_ceil_fma(__global float *out, int iters, float a, float b)
{
    const size_t gid = get_global_id(0);
    float4 x0 = (float4)((float)gid * 1e-7f), x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float4 x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    for (int i = 0; i < iters; i++) {
        x0 = fma(x0, (float4)a, (float4)b);
        x1 = fma(x1, (float4)a, (float4)b);
        x2 = fma(x2, (float4)a, (float4)b);
        x3 = fma(x3, (float4)a, (float4)b);
        x4 = fma(x4, (float4)a, (float4)b);
        x5 = fma(x5, (float4)a, (float4)b);
        x6 = fma(x6, (float4)a, (float4)b);
        x7 = fma(x7, (float4)a, (float4)b);
    }
    float4 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    out[gid] = s.x + s.y + s.z + s.w;
}

/* The shape the FLASH row form (xattn_cl_rows.cl) proves a CPU-class device
 * vectorizes: explicit float8 (one 256-bit register), 12 independent chains
 * per work-item (two FMA pipes x a latency of 4-6 cycles need 8-12 in flight;
 * 12 chains plus a and b stay within AVX2's 16 registers), no barrier, run
 * with one work-item a work-group like the row form, where PoCL's work-item
 * loops and vectorizer have nothing to do. 192 FLOPs an iteration. */
__kernel void xattn_ceil_fma8(__global float *out, int iters, float a, float b)
{
    const size_t gid = get_global_id(0);
    const float8 va = (float8)a, vb = (float8)b;
    float8 x0 = (float8)((float)gid * 1e-7f), x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float8 x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    float8 x8 = x0 + 0.8f, x9 = x0 + 0.9f, x10 = x0 + 1.0f, x11 = x0 + 1.1f;
    for (int i = 0; i < iters; i++) {
        x0 = fma(x0, va, vb);
        x1 = fma(x1, va, vb);
        x2 = fma(x2, va, vb);
        x3 = fma(x3, va, vb);
        x4 = fma(x4, va, vb);
        x5 = fma(x5, va, vb);
        x6 = fma(x6, va, vb);
        x7 = fma(x7, va, vb);
        x8 = fma(x8, va, vb);
        x9 = fma(x9, va, vb);
        x10 = fma(x10, va, vb);
        x11 = fma(x11, va, vb);
    }
    float8 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) + ((x8 + x9) + (x10 + x11));
    float4 t = s.lo + s.hi;
    out[gid] = (t.x + t.y) + (t.z + t.w);
}

/* The access pattern suits the device: on GPUs (per_item = 0) each
 * work-group streams one contiguous chunk with its work-items reading
 * neighbouring float4s (coalesced); on CPU devices (per_item = 1) each
 * work-item streams its own contiguous range, since a CPU runtime runs a
 * work-group's items one after another within a thread. */
#define XATTN_CEIL_RANGE(n4, per_item)                                              \
    const ulong units = per_item ? get_global_size(0) : get_num_groups(0);         \
    const ulong unit = per_item ? get_global_id(0) : get_group_id(0);              \
    const ulong step = per_item ? 1 : get_local_size(0);                           \
    const ulong chunk = (n4 + units - 1) / units, end = min(n4, (unit + 1) * chunk); \
    const ulong first = unit * chunk + (per_item ? 0 : get_local_id(0))

__kernel void xattn_ceil_read(__global const float4 *in, __global float *out, ulong n4,
                              int per_item)
{
    XATTN_CEIL_RANGE(n4, per_item);
    float4 acc = (float4)(0.0f);
    for (ulong i = first; i < end; i += step)
        acc += in[i];
    out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w;
}

__kernel void xattn_ceil_copy(__global const float4 *in, __global float4 *out, ulong n4,
                              int per_item)
{
    XATTN_CEIL_RANGE(n4, per_item);
    for (ulong i = first; i < end; i += step)
        out[i] = in[i];
}
