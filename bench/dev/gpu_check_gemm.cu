/*
 * gpu_check_gemm: the dense GEMM rate cuBLAS reaches on this GPU (bf16 and
 * f16 inputs, f32 accumulation), the peer ceiling that bench/gpu-check.sh
 * puts next to xattn's own mma.sync ceiling: what the vendor's library gets
 * out of the tensor cores (on sm_90 with wgmma, which mma.sync cannot issue).
 * Built only by that script (nvcc ... -lcublas); the library does not depend
 * on cuBLAS.
 *
 * Usage: gpu_check_gemm [N [reps]]      (default 8192 20; N x N x N)
 * Prints one line a dtype:
 *   gemm bf16 8192x8192x8192 best 1.234 ms median 1.250 ms 891.2 TFLOP/s
 * (TFLOP/s at the best time, 2 N^3 FLOPs a product). Exit status 1 on error.
 */
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gpu_check_gemm: %s failed: %s\n", #call, cudaGetErrorString(e_));     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define CUBLAS_OK(call)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "gpu_check_gemm: %s failed: status %d\n", #call, (int)s_);             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 8192;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (n < 16 || n > 32768 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: gpu_check_gemm [N (16..32768) [reps (1..1000)]]\n");
        return 2;
    }
    const size_t bytes = (size_t)n * n * 2;
    void *a = NULL, *b = NULL, *c = NULL;
    CUDA_OK(cudaMalloc(&a, bytes));
    CUDA_OK(cudaMalloc(&b, bytes));
    CUDA_OK(cudaMalloc(&c, bytes));
    /* Every 16-bit element 0x3c3c: ~1.06 in f16, ~0.011 in bf16 (finite sums). */
    CUDA_OK(cudaMemset(a, 0x3c, bytes));
    CUDA_OK(cudaMemset(b, 0x3c, bytes));
    cublasHandle_t h;
    CUBLAS_OK(cublasCreate(&h));
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    const float alpha = 1.0f, beta = 0.0f;
    const struct {
        const char *name;
        cudaDataType_t t;
    } dts[] = {{"bf16", CUDA_R_16BF}, {"f16", CUDA_R_16F}};
    for (const auto &dt : dts) {
        std::vector<float> ms;
        for (int r = -3; r < reps; r++) { /* 3 warm-up products */
            CUDA_OK(cudaEventRecord(e0));
            CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, dt.t, n, b,
                                   dt.t, n, &beta, c, dt.t, n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
            CUDA_OK(cudaEventRecord(e1));
            CUDA_OK(cudaEventSynchronize(e1));
            float t = 0.0f;
            CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
            if (r >= 0)
                ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double best = ms.front(), median = ms[ms.size() / 2];
        printf("gemm %s %dx%dx%d best %.3f ms median %.3f ms %.1f TFLOP/s\n", dt.name, n, n, n,
               best, median, 2.0 * n * (double)n * n / (best * 1e-3) * 1e-12);
    }
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
