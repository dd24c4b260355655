/*
 * What the measurement layer needs from the CPU kernels: the tile geometry of
 * FLASH/SPLITKV (executed-work accounting) and the micro-benchmarks behind the
 * device ceilings (backends/xattn_ceilings.c caches their results).
 *
 * Each benchmark runs `runs` times and returns the best figure; threads run
 * under `#pragma omp parallel num_threads(nt)` (1 thread without OpenMP),
 * placed by `bind` for each region (NULL: not placed; xattn_cpu_kernels.h).
 */
#ifndef XATTN_CPU_CEILINGS_H
#define XATTN_CPU_CEILINGS_H

#include <stddef.h>

#include "xattn_cpu_kernels.h"

/* The FLASH/SPLITKV tiles of p, as the work accounting counts them: query
 * positions per tile (of one head), keys per tile, and the query heads of a
 * GQA group packed into one tile (they share its K/V loads). */
void xattn__cpu_tile_sizes(const xattn_problem *p, int *tile_q, int *tile_k, int *tile_heads);

/* f32 FMA throughput, GFLOP/s (an FMA is 2 FLOPs), on SIMD path `simd` with
 * many independent accumulators per thread; each run lasts about `seconds`. */
double xattn__cpu_ceiling_fma_f32(xattn_cpu_simd simd, int nt, double seconds, int runs,
                                  const xattn_cpu_bind *bind);
/* The same with AVX512-FP16 (vfmadd*ph) and AVX512-BF16 (vdpbf16ps, 2 FMAs a
 * lane); 0 when the CPU or the compiler lacks the instructions. */
double xattn__cpu_ceiling_fma_f16(int nt, double seconds, int runs, const xattn_cpu_bind *bind);
double xattn__cpu_ceiling_fma_bf16(int nt, double seconds, int runs, const xattn_cpu_bind *bind);

/* Fills buf (bytes, 64-byte aligned) with the same static split across
 * threads as the bandwidth loops, so pages land on their readers' NUMA nodes. */
void xattn__cpu_ceiling_touch(void *buf, size_t bytes, int nt, const xattn_cpu_bind *bind);
/* Streaming read bandwidth over buf, GB/s (bytes read / s). */
double xattn__cpu_ceiling_read(const void *buf, size_t bytes, int nt, int runs,
                               const xattn_cpu_bind *bind);
/* Copy bandwidth src -> dst (bytes each), GB/s counting bytes read + written. */
double xattn__cpu_ceiling_copy(void *dst, const void *src, size_t bytes, int nt, int runs,
                               const xattn_cpu_bind *bind);

#endif /* XATTN_CPU_CEILINGS_H */
