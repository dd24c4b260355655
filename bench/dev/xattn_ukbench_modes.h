/* xattn_ukbench's other modes: --rates (xattn_ukbench_rates.c), --memory
 * (xattn_ukbench_memory.c) and --prefill (xattn_ukbench_prefill.c). */
#ifndef XATTN_UKBENCH_MODES_H
#define XATTN_UKBENCH_MODES_H

#include <stdint.h>

#include "xattn_cpu_kernels.h"

/* Prints the one-core throughput of the vector instructions a decode step
 * could use, each over `reps` repetitions; returns 0. */
int xattn_ukbench_rates(int reps);

/* Prints one core's memory latency and how many of its own misses it keeps in
 * flight: dependent loads over `mib` MiB, 1 to 48 chains at once, best of
 * `reps`; returns 0, or 1 (with a message) when the buffer cannot be had. */
int xattn_ukbench_memory(int64_t mib, int reps);

/* The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): time
 * the thread spent waiting for a core that other processes held is not in it. */
double xattn_ukbench_cpu_s(void);

/* One core's f32 FMA rate at the vector width of `simd` (AVX2: ymm, AVX-512:
 * zmm), in GFLOP/s (2 per multiply-add) at the median and the fastest of
 * `reps` repetitions of about 1 ms on the thread's CPU time; returns -1 for a
 * path without FMA vectors (portable) or one this CPU lacks. */
int xattn_ukbench_fma_gflops(xattn_cpu_simd simd, int reps, double *median, double *best);

/* Prints the prefill micro-kernels' rates (FLASH's QK^T, P.V and tile, NAIVE's
 * two products) at head dim D on one thread against that FMA rate, for each
 * SIMD path this CPU runs; returns 0, or 1 when memory runs out. */
int xattn_ukbench_prefill(int D, int reps);

#endif
