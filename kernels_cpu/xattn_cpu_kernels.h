/*
 * CPU kernels (OpenMP + SIMD): entry points called by the CPU backend's host
 * module (backends/xattn_backend_cpu.c). Kernels see only the resolved problem
 * (xattn_problem.h) plus base pointers; they never validate user input.
 *
 * Threading: each entry runs its own `#pragma omp parallel` with
 * a->num_threads threads (1 when OpenMP is absent). When a->bind is set, each
 * thread of each region calls xattn__cpu_bind_enter first and
 * xattn__cpu_bind_leave last, so that no thread is bound outside a region.
 * SIMD: a->simd picks the path; the portable path runs anywhere, the AVX2+FMA
 * (with F16C) and AVX-512 paths are compiled with target attributes and chosen
 * at run time by the host module from cpuid.
 */
#ifndef XATTN_CPU_KERNELS_H
#define XATTN_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "xattn_problem.h"

typedef enum xattn_cpu_simd {
    XATTN_CPU_SIMD_PORTABLE = 1,
    XATTN_CPU_SIMD_AVX2 = 2,  /* AVX2 + FMA + F16C */
    XATTN_CPU_SIMD_AVX512 = 3 /* AVX-512F (+ the AVX2 set) */
} xattn_cpu_simd;

/* What the CPU has, from cpuid: the best xattn_cpu_simd it can run. */
xattn_cpu_simd xattn_cpu_simd_detect(void);
/* "portable", "avx2", "avx512". */
const char *xattn_cpu_simd_name(xattn_cpu_simd s);

/*
 * Thread placement for the length of one parallel region (the CPU backend
 * makes it; xattn_backend_cpu.c): thread t of a team of the planned size
 * saves its own CPU mask and binds itself to its place, then puts the mask
 * back before the region ends. NULL: no placement (both calls do nothing).
 */
typedef struct xattn_cpu_bind xattn_cpu_bind;
/* At the top of a region, by each thread: 1 when it bound itself. */
int xattn__cpu_bind_enter(const xattn_cpu_bind *b);
/* At the bottom of the region, by each thread, with enter's result. */
void xattn__cpu_bind_leave(const xattn_cpu_bind *b, int bound);

typedef struct xattn_cpu_args {
    const xattn_problem *p;
    /* Buffer base addresses (byte 0 of each view's buffer); add p->x.off elements. */
    const void *q, *k, *v;
    void *o;
    float *lse;                     /* NULL when !p->has_lse */
    const void *bias;               /* NULL when !p->has_bias */
    const float *sinks;             /* NULL when !p->has_sinks */
    const float *k_scale, *v_scale; /* fp8 caches' per-head scales; NULL = absent */
    int num_threads;                /* >= 1 */
    xattn_cpu_simd simd;
    const xattn_cpu_bind *bind; /* the threads' placement, NULL = none */
} xattn_cpu_args;

/*
 * The work the kernels did, counted as they ran (per-thread counters summed at
 * the end of each parallel region: a few additions per tile, nothing in the
 * inner loops). A pair is a real query row (i < len_q) and a real key
 * (j < len_k) that a product's loops covered, masked or not; lanes that a
 * micro-kernel computes only as padding (up to a vector width or a register
 * block, zero rows or keys past the sequence's lengths) are not counted. Each
 * entry point adds to the counts it is given.
 */
typedef struct xattn_cpu_work {
    uint64_t qk_pairs; /* scores computed: D multiply-adds each */
    uint64_t pv_terms; /* P.V terms (row, key, column of V): one multiply-add each */
    uint64_t kv_rows;  /* K/V rows (one key of one KV head) the tile loop loaded,
                        * converted, or read in place, each time it did; 0 from NAIVE */
} xattn_cpu_work;

/* The L1 data cache size (bytes, per core) the tile sizes are chosen from:
 * the CPU backend sets it from hwloc once; 32 KiB until then. A machine
 * property, so process-wide. */
void xattn__cpu_set_l1d_bytes(uint64_t bytes);
uint64_t xattn_cpu_l1d_bytes(void);

/* ---- NAIVE: three phases over a materialized f32 score matrix ------------ */

/* Writes zeros over a freshly allocated workspace with num_threads threads:
 * the pages are faulted in (and placed near the threads, first touch) as
 * part of the allocation, before the phase timers start. */
void xattn__cpu_prefault(void *ptr, uint64_t bytes, int num_threads, const xattn_cpu_bind *bind);
/* Bytes of the score workspace: B*Hq*Sq*Sk*4 (the caller checked overflow). */
uint64_t xattn__cpu_naive_workspace_bytes(const xattn_problem *p);
/* Phase 1: S[b,h,i,j] = score with softcap, ALiBi, bias and masks (-inf). */
void xattn__cpu_naive_qk(const xattn_cpu_args *a, float *scores, xattn_cpu_work *w);
/* Phase 2: row-wise softmax in place; writes LSE; fully masked rows become 0s. */
void xattn__cpu_naive_softmax(const xattn_cpu_args *a, float *scores);
/* Phase 3: O = P V (padding rows and fully masked rows get 0). */
void xattn__cpu_naive_pv(const xattn_cpu_args *a, const float *probs, xattn_cpu_work *w);
/* NAIVE's blocks (for the record): query rows per block and keys per QK^T tile. */
void xattn__cpu_naive_blocks(int *rows, int *keys);

/* ---- FLASH: tiled, online softmax ---------------------------------------- */

/* Whether FLASH should pack K and V once per call (1) rather than convert each
 * tile for every query tile that visits it (0): when several query tiles
 * share each KV head (prefill) and the packed copy is not too big. */
int xattn__cpu_flash_packs(const xattn_problem *p);
/* Workspace bytes for FLASH: per-thread scratch (tiles of Q, K, V, S, the
 * accumulator), plus with `pack` the packed f32 K/V panels; UINT64_MAX when
 * that overflows 64 bits. */
uint64_t xattn__cpu_flash_workspace_bytes(const xattn_problem *p, int num_threads, int pack);
/* Runs FLASH; `ws` holds xattn__cpu_flash_workspace_bytes(p, a->num_threads, pack) bytes.
 * Adds the work done to *w. */
void xattn__cpu_flash(const xattn_cpu_args *a, void *ws, int pack, xattn_cpu_work *w);

/* ---- SPLITKV: partial O/LSE per KV chunk, then combine -------------------- */

/* The split count the kernels would use for p on the SIMD path `simd`
 * (p->num_splits if > 0, clamped). */
int xattn__cpu_splitkv_num_splits(const xattn_problem *p, xattn_cpu_simd simd, int num_threads);
/* Bytes of the per-thread scratch of the partial phase (which depends on the
 * SIMD path's kernels: the decode path reads K/V in place where it has them);
 * UINT64_MAX when that overflows 64 bits. The partials themselves, partial O
 * [splits, B, Hq, Sq, Dv] and partial LSE [splits, B, Hq, Sq] f32, are the
 * driver's regions (xattn_driver.c). */
uint64_t xattn__cpu_splitkv_scratch_bytes(const xattn_problem *p, xattn_cpu_simd simd,
                                          int num_threads);
/* Phase 1: each (b, h, split) chunk writes its partial O and LSE; adds the work
 * done to *w. `scratch` holds xattn__cpu_splitkv_scratch_bytes(p, a->simd,
 * a->num_threads) bytes. */
void xattn__cpu_splitkv_partial(const xattn_cpu_args *a, int splits, float *opart, float *lpart,
                                void *scratch, xattn_cpu_work *w);
/* The keys per step of SPLITKV's tile loop for p on the SIMD path `simd`: the KV
 * tile, or the shorter step of the decode path that walks the KV heads of a
 * sequence together. */
int xattn__cpu_splitkv_tile_k(const xattn_problem *p, xattn_cpu_simd simd);
/* Phase 2: merge the partials into O and LSE. */
void xattn__cpu_splitkv_combine(const xattn_cpu_args *a, int splits, const float *opart,
                                const float *lpart);

#endif /* XATTN_CPU_KERNELS_H */
