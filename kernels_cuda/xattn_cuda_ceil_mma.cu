/*
 * The tensor-core ceiling's kernel (sm_80+): each warp issues mma.sync
 * m16n8k16 (f16 or bf16 inputs, f32 accumulation: the instruction of the
 * FLASH mma path) on XATTN_CUDA_CEIL_MMA_CHAINS independent accumulators, so
 * that the products' latency is hidden and the rate is the units' own. Timed
 * by xattn_cuda_ceil_mma (xattn_cuda_ceilings.cu); apart from it so that the
 * CPU emulator of tests/cuda can check what one iteration computes.
 */
#include "xattn_cuda_flash_mma.cuh"

template <typename T>
__global__ void __launch_bounds__(32 * XATTN_CUDA_CEIL_MMA_WARPS)
    xattn_cuda_ceil_mma_kernel(float *sink, int iters, unsigned a_bits, unsigned b_bits)
{
#if XATTN_CUDA_MMA_ARCH
    /* Fragments from the arguments (the compiler cannot fold them); the sum of
     * the accumulators is stored, so no product can be dropped. */
    const unsigned a[4] = {a_bits, a_bits, a_bits, a_bits};
    float c[XATTN_CUDA_CEIL_MMA_CHAINS][4];
#pragma unroll
    for (int k = 0; k < XATTN_CUDA_CEIL_MMA_CHAINS; k++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            c[k][e] = 0.0f;
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int k = 0; k < XATTN_CUDA_CEIL_MMA_CHAINS; k++)
            xattn_cuda_mma<T>(c[k], a, b_bits, b_bits);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < XATTN_CUDA_CEIL_MMA_CHAINS; k++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            s += c[k][e];
    sink[blockIdx.x * (32 * XATTN_CUDA_CEIL_MMA_WARPS) + threadIdx.x] = s;
#else
    (void)iters, (void)a_bits, (void)b_bits;
    sink[blockIdx.x * (32 * XATTN_CUDA_CEIL_MMA_WARPS) + threadIdx.x] = 0.0f;
#endif
}

extern "C" cudaError_t xattn_cuda_ceil_mma_launch(float *sink, int bf16, int blocks, int iters,
                                                  unsigned a_bits, unsigned b_bits,
                                                  cudaStream_t stream)
{
    void (*kernel)(float *, int, unsigned, unsigned) =
        bf16 ? xattn_cuda_ceil_mma_kernel<__nv_bfloat16> : xattn_cuda_ceil_mma_kernel<__half>;
    XATTN_CUDA_LAUNCH(kernel, (unsigned)blocks, 32u * XATTN_CUDA_CEIL_MMA_WARPS, 0, stream, sink,
                      iters, a_bits, b_bits);
    return cudaGetLastError();
}
