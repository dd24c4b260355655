/*
 * CUDA kernels: C-callable launch entry points, called by the CUDA backend's
 * host module (backends/xattn_backend_cuda.c). The kernels see only the
 * resolved problem (xattn_problem.h) plus device pointers; they never validate
 * user input. Every entry enqueues on a->stream and returns the launch status
 * (cudaGetLastError after the launch); nothing here synchronizes.
 *
 * Structure (the same as kernels_cpu/): NAIVE runs three kernels over a
 * materialized f32 score matrix; FLASH is a tile loop over KV tiles with an
 * online softmax and per-row valid-key intervals that let whole tiles be
 * skipped; SPLITKV runs the FLASH tile loop on a chunk of keys per split
 * (partial O and LSE in f32), then a combine kernel merges the chunks.
 *
 * FLASH / SPLITKV paths:
 *   - "mma": q and k/v of one 16-bit dtype (f16 or bf16), sm_80 or newer.
 *     Tensor cores (mma.sync m16n8k16, f32 accumulation), tiles staged in
 *     shared memory with cp.async when the rows are 16-byte aligned (plain
 *     loads otherwise); instantiated for padded head dims 64, 80, 96, 128 and
 *     256 (D and Dv up to the padded dim, zero-filled above them).
 *     fp8 K/V (E4M3, E5M2) with f16 or bf16 q run there too: the tile load
 *     converts each byte to q's dtype (exact: every fp8 value is an f16 and
 *     a bf16 value), the K scale multiplies the scores and the V scale the
 *     output.
 *   - "simt": everything else (f32, mixed dtypes, sm_75), any D/Dv <= 256;
 *     fp8 K/V values are converted to f32 and multiplied by their head's
 *     scale as they are loaded (as the reference does).
 *
 * Query rows of one KV head are packed: within a block, row r of sequence b
 * and KV head hk is query position r / group of head hk*group + r % group, so
 * the heads that share a KV head (GQA/MQA) share every K/V tile load.
 */
#ifndef XATTN_CUDA_KERNELS_H
#define XATTN_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "xattn_problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys per split-KV chunk are a multiple of this (every path's KV tile divides it). */
#define XATTN_CUDA_SPLIT_UNIT 64
/* Most splits SPLITKV uses (an explicit p->num_splits is clamped to it). */
#define XATTN_CUDA_MAX_SPLITS 256

typedef struct xattn_cuda_args {
    const xattn_problem *p; /* host; its len/start/alibi arrays are host arrays */
    /* Device addresses of byte 0 of each view's buffer (add p->x.off elements). */
    const void *q, *k, *v;
    void *o;
    float *lse;       /* NULL when !p->has_lse */
    const void *bias; /* NULL when !p->has_bias */
    /* Device copies of p->len_q, len_k, start_q, start_k ([B] each) and of
     * p->alibi ([Hq], NULL when p->alibi is NULL). */
    const int32_t *len_q, *len_k, *start_q, *start_k;
    const float *alibi;
    /* Device address of byte 0 of the sinks buffer (add p->sinks.off
     * elements); NULL when !p->has_sinks. */
    const float *sinks;
    /* fp8 K/V (p->k.dtype FP8_E4M3 / FP8_E5M2): device addresses of byte 0 of
     * the k_scale and v_scale buffers (add p->k_scale.off / v_scale.off
     * elements); NULL when absent (scale 1). */
    const float *k_scale, *v_scale;
    /* Paged KV cache (p->paged): the device copy of p->block_table [B *
     * max_pages], the tokens per page and the table's row length; NULL / 0
     * for contiguous K/V. Key j of sequence b is slot j % page_size of page
     * block_table[b * max_pages + j / page_size] (k/v views: sb = the page
     * stride). Only the entries of pages below ceil(len_k[b] / page_size)
     * are read. */
    const int32_t *block_table;
    int page_size;
    long long max_pages;
    cudaStream_t stream;
    int cc;            /* compute capability, major*10 + minor */
    int sm_count;      /* streaming multiprocessors */
    size_t smem_optin; /* most dynamic shared memory a block may opt in to */
    int force_simt;    /* 1: never take the mma path (tests, comparisons) */
    int mma_narrow;    /* 1 narrow (64 rows), 0 wide (128): XATTN_CUDA_MMA_SHAPE; -1: by head dim */
    int inject_failure; /* tests: launch with an invalid configuration */
    int device;         /* CUDA ordinal (per-device launch attributes are cached) */
    /* Executed-work counters, device [xattn_cuda_count_slots()][3], or NULL:
     * every block of the call's kernels writes its (query row, key) pairs of
     * QK^T and of P.V and the K/V rows it loaded into its own slot. */
    unsigned long long *counts;
} xattn_cuda_args;

/* Kernel-side limits the host checks before calling anything here: Sq, Sk,
 * rows * group and every grid stay within these, or the host returns
 * XATTN_STATUS_UNSUPPORTED. 0 = OK, else a short reason is written to why. */
int xattn_cuda_check_limits(const xattn_cuda_args *a, int splits, char *why, size_t n);

/* ---- NAIVE: three phases over a materialized f32 score matrix ------------ */

/* The score matrix S [B, Hq, Sq, Sk] f32 is the driver's region
 * (backends/xattn_driver.c). Phase 1: S[b,h,i,j] = score with softcap, ALiBi, bias and masks
 * (-inf). */
cudaError_t xattn_cuda_naive_qk(const xattn_cuda_args *a, float *scores);
/* Phase 2: row-wise softmax in place; writes LSE; fully masked rows become 0s. */
cudaError_t xattn_cuda_naive_softmax(const xattn_cuda_args *a, float *scores);
/* Phase 3: O = P V (padding rows and fully masked rows get 0). */
cudaError_t xattn_cuda_naive_pv(const xattn_cuda_args *a, const float *probs);

/* ---- FLASH: tiled, online softmax ---------------------------------------- */

/* "mma-d128-f16", "simt", ...: the kernel FLASH and SPLITKV would use. */
const char *xattn_cuda_flash_path(const xattn_cuda_args *a);
cudaError_t xattn_cuda_flash(const xattn_cuda_args *a);
/* The tile sizes FLASH and the SPLITKV partial use for `a` (executed-work
 * accounting): query positions of one head per tile, keys per tile, and the
 * query heads of a GQA group that share each K/V tile. */
void xattn_cuda_flash_tiles(const xattn_cuda_args *a, int *tile_q, int *tile_k, int *tile_heads);
/* Ceilings micro-benchmarks (xattn_cuda_ceilings.cu) on the current device and
 * `stream`: best time in ms of an f32 FMA loop over `threads` threads of
 * `iters` iterations (64 FLOPs each), of reading `bytes` from `buf`, and of
 * copying `bytes` from `buf` to `buf2`. */
cudaError_t xattn_cuda_ceil_fma(float *sink, int blocks, int iters, int reps, cudaStream_t stream,
                                float *ms);
cudaError_t xattn_cuda_ceil_read(const float4 *buf, size_t bytes, float *sink, int blocks, int reps,
                                 cudaStream_t stream, float *ms);
cudaError_t xattn_cuda_ceil_copy(const float4 *buf, float4 *buf2, size_t bytes, int blocks,
                                 int reps, cudaStream_t stream, float *ms);

/* Ceiling of the tensor cores (sm_80+): best time in ms of mma.sync
 * m16n8k16 (f16 or bf16 inputs, f32 accumulation) over `blocks` blocks of
 * XATTN_CUDA_CEIL_MMA_WARPS warps, `iters` iterations of
 * XATTN_CUDA_CEIL_MMA_CHAINS independent products a warp (4096 FLOPs each).
 * cudaErrorInvalidDeviceFunction below sm_80. */
#define XATTN_CUDA_CEIL_MMA_WARPS 8
#define XATTN_CUDA_CEIL_MMA_CHAINS 8
cudaError_t xattn_cuda_ceil_mma(float *sink, int bf16, int blocks, int iters, int reps,
                                cudaStream_t stream, float *ms);
/* One untimed launch of that kernel (xattn_cuda_ceil_mma.cu): every thread
 * stores the sum of its accumulators after `iters` iterations on A and B
 * fragments whose registers all hold a_bits / b_bits (two 16-bit values). */
cudaError_t xattn_cuda_ceil_mma_launch(float *sink, int bf16, int blocks, int iters,
                                       unsigned a_bits, unsigned b_bits, cudaStream_t stream);

/* ---- executed work -------------------------------------------------------- */

/* Counter slots (blocks) of the kernels the algorithm a->p->algo runs with
 * `splits` (SPLITKV; 0 otherwise): the size of a->counts in triples. */
long long xattn_cuda_count_slots(const xattn_cuda_args *a, int splits);
/* out[0..2] (device) = the sums over `slots` triples of a->counts: QK^T
 * pairs, P.V pairs, K/V rows loaded. One small kernel on a->stream. */
cudaError_t xattn_cuda_count_sum(const xattn_cuda_args *a, long long slots,
                                 unsigned long long *out);

/* ---- SPLITKV: partial O/LSE per KV chunk, then combine ------------------- */

/* Splits the kernels use: p->num_splits when > 0 (clamped to the number of
 * XATTN_CUDA_SPLIT_UNIT chunks and XATTN_CUDA_MAX_SPLITS), else chosen from
 * the SM count, the blocks one split already has, and Sk. */
int xattn_cuda_splitkv_num_splits(const xattn_cuda_args *a);
/* Phase 1: each (b, KV head, row block, split) writes its partial O
 * [splits, B, Hq, Sq, Dv] and partial LSE [splits, B, Hq, Sq], f32 (the
 * driver's regions). */
cudaError_t xattn_cuda_splitkv_partial(const xattn_cuda_args *a, int splits, float *part_o,
                                       float *part_lse);
/* Phase 2: merge the partials into O and LSE. */
cudaError_t xattn_cuda_splitkv_combine(const xattn_cuda_args *a, int splits, const float *part_o,
                                       const float *part_lse);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_CUDA_KERNELS_H */
