/*
 * Micro-benchmarks behind the CUDA device's ceilings (docs/measurement.md):
 * f32 FMA throughput, the tensor cores' mma.sync rate (f16 and bf16, sm_80+;
 * the kernel is in xattn_cuda_ceil_mma.cu) and read / copy bandwidth, timed
 * with CUDA events on the context's stream. Built for every architecture like
 * the attention kernels.
 */
#include <cuda_runtime.h>

#include "xattn_cuda_kernels.h"

/* 8 independent float4 chains a thread hide the FMA latency (64 FLOPs an
 * iteration); the sum is stored so the loop cannot be dropped. */
__global__ void xattn_cuda_ceil_fma_kernel(float *sink, int iters, float a, float b)
{
    const unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;
    float x[8][4];
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 4; l++)
            x[k][l] = (float)gid * 1e-7f + 0.1f * (float)k + 0.01f * (float)l;
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int k = 0; k < 8; k++)
#pragma unroll
            for (int l = 0; l < 4; l++)
                x[k][l] = fmaf(x[k][l], a, b);
    float s = 0.0f;
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 4; l++)
            s += x[k][l];
    sink[gid] = s;
}

/* Grid-strided 16-byte loads: neighbouring threads read neighbouring float4s. */
__global__ void xattn_cuda_ceil_read_kernel(const float4 *in, size_t n4, float *sink)
{
    const size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (size_t i = gid; i < n4; i += stride) {
        const float4 v = in[i];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
    }
    sink[gid] = acc.x + acc.y + acc.z + acc.w;
}

__global__ void xattn_cuda_ceil_copy_kernel(const float4 *in, float4 *out, size_t n4)
{
    const size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = gid; i < n4; i += stride)
        out[i] = in[i];
}

#define XATTN_CEIL_THREADS 256

/* Times `reps` launches of `launch` between two events; the best one wins. */
template <typename F>
static cudaError_t xattn_cuda_ceil_time(F launch, int reps, cudaStream_t stream, float *best)
{
    cudaEvent_t e0, e1;
    cudaError_t e = cudaEventCreate(&e0);
    if (e != cudaSuccess)
        return e;
    e = cudaEventCreate(&e1);
    if (e != cudaSuccess) {
        cudaEventDestroy(e0);
        return e;
    }
    *best = 0.0f;
    for (int r = 0; r < reps && e == cudaSuccess; r++) {
        e = cudaEventRecord(e0, stream);
        if (e == cudaSuccess) {
            launch();
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaEventRecord(e1, stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(e1);
        float ms = 0.0f;
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, e0, e1);
        if (e == cudaSuccess && (r == 0 || ms < *best))
            *best = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return e;
}

extern "C" cudaError_t xattn_cuda_ceil_fma(float *sink, int blocks, int iters, int reps,
                                           cudaStream_t stream, float *ms)
{
    return xattn_cuda_ceil_time(
        [&] {
            xattn_cuda_ceil_fma_kernel<<<blocks, XATTN_CEIL_THREADS, 0, stream>>>(sink, iters,
                                                                                  0.999f, 0.001f);
        },
        reps, stream, ms);
}

extern "C" cudaError_t xattn_cuda_ceil_mma(float *sink, int bf16, int blocks, int iters, int reps,
                                           cudaStream_t stream, float *ms)
{
    /* 1.0 and 2^-10 in both halves: the accumulators stay exact and finite. */
    const unsigned a = bf16 ? 0x3f803f80u : 0x3c003c00u;
    const unsigned b = bf16 ? 0x3a803a80u : 0x14001400u;
    cudaError_t le = cudaSuccess; /* the launcher takes the launch's error itself */
    cudaError_t e = xattn_cuda_ceil_time(
        [&] {
            const cudaError_t r =
                xattn_cuda_ceil_mma_launch(sink, bf16, blocks, iters, a, b, stream);
            if (le == cudaSuccess)
                le = r;
        },
        reps, stream, ms);
    return e != cudaSuccess ? e : le;
}

extern "C" cudaError_t xattn_cuda_ceil_read(const float4 *buf, size_t bytes, float *sink,
                                            int blocks, int reps, cudaStream_t stream, float *ms)
{
    return xattn_cuda_ceil_time(
        [&] {
            xattn_cuda_ceil_read_kernel<<<blocks, XATTN_CEIL_THREADS, 0, stream>>>(
                buf, bytes / sizeof(float4), sink);
        },
        reps, stream, ms);
}

extern "C" cudaError_t xattn_cuda_ceil_copy(const float4 *buf, float4 *buf2, size_t bytes,
                                            int blocks, int reps, cudaStream_t stream, float *ms)
{
    return xattn_cuda_ceil_time(
        [&] {
            xattn_cuda_ceil_copy_kernel<<<blocks, XATTN_CEIL_THREADS, 0, stream>>>(
                buf, buf2, bytes / sizeof(float4));
        },
        reps, stream, ms);
}
