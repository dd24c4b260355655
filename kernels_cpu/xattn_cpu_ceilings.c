/*
 * CPU micro-benchmarks for the device ceilings (docs/measurement.md,
 * "Ceilings"), and the FLASH tile geometry for the work accounting.
 *
 * FMA: every thread runs a loop of independent FMA chains (12 vector
 * accumulators: more than latency x ports on current cores, so the loop is
 * bound by FMA issue, not by latency) on the best SIMD path; the figure is
 * the team's FLOPs over the wall time between two barriers. The 16-bit paths
 * use AVX512-FP16 (fused multiply-add on 32 halves) and AVX512-BF16 (dot
 * products of bf16 pairs into f32, 2 FMAs a lane) when the CPU has them.
 * Bandwidth: each thread streams its contiguous share of an array (the caller
 * sizes it well beyond the last-level cache) with vector loads folded by XOR
 * (read), or copies it with memcpy (copy, counting bytes read + written).
 * Every figure is the best of `runs`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "xattn_cpu_ceilings.h"
#include "xattn_cpu_common.h"

#if XATTN__CPU_X86
#include <cpuid.h>
#include <immintrin.h>
#endif

/* AVX512-FP16 intrinsics usable from a target attribute: GCC 12, and clang
 * once immintrin.h declares them without -mavx512fp16 (16; clang 14 does not). */
#if XATTN__CPU_X86 &&                                                                              \
    ((defined(__clang__) && (__clang_major__ >= 16 || defined(__AVX512FP16__))) ||                 \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
#define XATTN__CPU_HAVE_FP16_ISA 1
#else
#define XATTN__CPU_HAVE_FP16_ISA 0
#endif

void xattn__cpu_tile_sizes(const xattn_problem *p, int *tile_q, int *tile_k, int *tile_heads)
{
    if (tile_heads)
        *tile_heads = (int)xattn__cpu_qtiling_of(p).heads;
    /* A query tile packs the heads of a GQA group with positions; every head
     * of it sees the same keys, so per head it is a tile of `pos` positions. */
    if (tile_q)
        *tile_q = (int)xattn__cpu_qtiling_of(p).pos;
    if (tile_k)
        *tile_k = (int)xattn__cpu_bk(p);
}

static double xattn__cpu_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- FMA loops: each returns a value that depends on every FMA ------------ */

#define XATTN__ACC 12

static float xattn__fma_portable(int64_t iters)
{
    float acc[16];
    for (int k = 0; k < 16; k++)
        acc[k] = 0.5f + 0.01f * (float)k;
    const float b = 0.999999f, c = 1e-6f;
    for (int64_t i = 0; i < iters; i++)
        for (int k = 0; k < 16; k++)
            acc[k] = acc[k] * b + c;
    float s = 0;
    for (int k = 0; k < 16; k++)
        s += acc[k];
    return s;
}

#if XATTN__CPU_X86
__attribute__((target("avx2,fma"))) static float xattn__fma_avx2(int64_t iters)
{
    __m256 a[XATTN__ACC];
    for (int k = 0; k < XATTN__ACC; k++)
        a[k] = _mm256_set1_ps(0.5f + 0.01f * (float)k);
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int64_t i = 0; i < iters; i++) {
        a[0] = _mm256_fmadd_ps(a[0], b, c);
        a[1] = _mm256_fmadd_ps(a[1], b, c);
        a[2] = _mm256_fmadd_ps(a[2], b, c);
        a[3] = _mm256_fmadd_ps(a[3], b, c);
        a[4] = _mm256_fmadd_ps(a[4], b, c);
        a[5] = _mm256_fmadd_ps(a[5], b, c);
        a[6] = _mm256_fmadd_ps(a[6], b, c);
        a[7] = _mm256_fmadd_ps(a[7], b, c);
        a[8] = _mm256_fmadd_ps(a[8], b, c);
        a[9] = _mm256_fmadd_ps(a[9], b, c);
        a[10] = _mm256_fmadd_ps(a[10], b, c);
        a[11] = _mm256_fmadd_ps(a[11], b, c);
    }
    __m256 s = a[0];
    for (int k = 1; k < XATTN__ACC; k++)
        s = _mm256_add_ps(s, a[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

__attribute__((target("avx512f"))) static float xattn__fma_avx512(int64_t iters)
{
    __m512 a[XATTN__ACC];
    for (int k = 0; k < XATTN__ACC; k++)
        a[k] = _mm512_set1_ps(0.5f + 0.01f * (float)k);
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int64_t i = 0; i < iters; i++) {
        a[0] = _mm512_fmadd_ps(a[0], b, c);
        a[1] = _mm512_fmadd_ps(a[1], b, c);
        a[2] = _mm512_fmadd_ps(a[2], b, c);
        a[3] = _mm512_fmadd_ps(a[3], b, c);
        a[4] = _mm512_fmadd_ps(a[4], b, c);
        a[5] = _mm512_fmadd_ps(a[5], b, c);
        a[6] = _mm512_fmadd_ps(a[6], b, c);
        a[7] = _mm512_fmadd_ps(a[7], b, c);
        a[8] = _mm512_fmadd_ps(a[8], b, c);
        a[9] = _mm512_fmadd_ps(a[9], b, c);
        a[10] = _mm512_fmadd_ps(a[10], b, c);
        a[11] = _mm512_fmadd_ps(a[11], b, c);
    }
    __m512 s = a[0];
    for (int k = 1; k < XATTN__ACC; k++)
        s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512bf16"))) static float xattn__fma_bf16(int64_t iters)
{
    __m512 a[XATTN__ACC];
    for (int k = 0; k < XATTN__ACC; k++)
        a[k] = _mm512_set1_ps(0.01f * (float)k);
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
    for (int64_t i = 0; i < iters; i++) {
        a[0] = _mm512_dpbf16_ps(a[0], x, y);
        a[1] = _mm512_dpbf16_ps(a[1], x, y);
        a[2] = _mm512_dpbf16_ps(a[2], x, y);
        a[3] = _mm512_dpbf16_ps(a[3], x, y);
        a[4] = _mm512_dpbf16_ps(a[4], x, y);
        a[5] = _mm512_dpbf16_ps(a[5], x, y);
        a[6] = _mm512_dpbf16_ps(a[6], x, y);
        a[7] = _mm512_dpbf16_ps(a[7], x, y);
        a[8] = _mm512_dpbf16_ps(a[8], x, y);
        a[9] = _mm512_dpbf16_ps(a[9], x, y);
        a[10] = _mm512_dpbf16_ps(a[10], x, y);
        a[11] = _mm512_dpbf16_ps(a[11], x, y);
    }
    __m512 s = a[0];
    for (int k = 1; k < XATTN__ACC; k++)
        s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}

#if XATTN__CPU_HAVE_FP16_ISA
__attribute__((target("avx512f,avx512fp16"))) static float xattn__fma_f16(int64_t iters)
{
    __m512h a[XATTN__ACC];
    for (int k = 0; k < XATTN__ACC; k++) /* 1.0 + k/1024 */
        a[k] = _mm512_castsi512_ph(_mm512_set1_epi16((short)(0x3c00 + k)));
    /* b = 0.99951, c = 2^-10: every chain converges to about 2, never overflows. */
    const __m512h b = _mm512_castsi512_ph(_mm512_set1_epi16(0x3bff));
    const __m512h c = _mm512_castsi512_ph(_mm512_set1_epi16(0x1400));
    for (int64_t i = 0; i < iters; i++) {
        a[0] = _mm512_fmadd_ph(a[0], b, c);
        a[1] = _mm512_fmadd_ph(a[1], b, c);
        a[2] = _mm512_fmadd_ph(a[2], b, c);
        a[3] = _mm512_fmadd_ph(a[3], b, c);
        a[4] = _mm512_fmadd_ph(a[4], b, c);
        a[5] = _mm512_fmadd_ph(a[5], b, c);
        a[6] = _mm512_fmadd_ph(a[6], b, c);
        a[7] = _mm512_fmadd_ph(a[7], b, c);
        a[8] = _mm512_fmadd_ph(a[8], b, c);
        a[9] = _mm512_fmadd_ph(a[9], b, c);
        a[10] = _mm512_fmadd_ph(a[10], b, c);
        a[11] = _mm512_fmadd_ph(a[11], b, c);
    }
    __m512h s = a[0];
    for (int k = 1; k < XATTN__ACC; k++)
        s = _mm512_add_ph(s, a[k]);
    uint16_t out[32];
    _mm512_storeu_si512((void *)out, _mm512_castph_si512(s));
    return (float)(out[0] ^ out[31]);
}
#endif

static int xattn__cpu_has_leaf7(unsigned sub, unsigned reg, unsigned bit)
{
    unsigned r[4] = {0, 0, 0, 0};
    if (!__get_cpuid_count(7, sub, &r[0], &r[1], &r[2], &r[3]))
        return 0;
    return (r[reg] >> bit) & 1u;
}
#endif /* XATTN__CPU_X86 */

typedef float (*xattn__fma_fn)(int64_t iters);

/* Results land here so that no loop is dead code; per thread, since two
 * contexts may measure at once. */
static _Thread_local volatile float xattn__fma_sink;

/* Team FLOP rate of fn: calibrated on one thread to last about `seconds`. */
static double xattn__fma_bench(xattn__fma_fn fn, double flops_per_iter, int nt, double seconds,
                               int runs, const xattn_cpu_bind *bind)
{
    int64_t iters = 1024;
    for (;;) {
        double t0 = xattn__cpu_clock();
        xattn__fma_sink += fn(iters);
        double dt = xattn__cpu_clock() - t0;
        if (dt > 0.01 || iters > ((int64_t)1 << 40)) {
            double scale = seconds / (dt > 1e-9 ? dt : 1e-9);
            if (scale > 1.0)
                iters = (int64_t)((double)iters * scale);
            break;
        }
        iters *= 4;
    }
    double best = 0.0;
    for (int r = 0; r < runs; r++) {
        double t0 = 0, t1 = 0;
        int team = 1;
        float sum = 0.0f;
        (void)nt;
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(+ : sum)
#endif
        {
            const int bound = xattn__cpu_bind_enter(bind);
#ifdef XATTN_HAVE_OPENMP
#pragma omp barrier
#pragma omp master
            {
                team = omp_get_num_threads();
                t0 = xattn__cpu_clock();
            }
#pragma omp barrier
#else
            t0 = xattn__cpu_clock();
#endif
            sum += fn(iters);
#ifdef XATTN_HAVE_OPENMP
#pragma omp barrier
#pragma omp master
#endif
            t1 = xattn__cpu_clock();
            xattn__cpu_bind_leave(bind, bound);
        }
        xattn__fma_sink += sum;
        double rate = (double)team * (double)iters * flops_per_iter / (t1 - t0) * 1e-9;
        if (rate > best)
            best = rate;
    }
    return best;
}

double xattn__cpu_ceiling_fma_f32(xattn_cpu_simd simd, int nt, double seconds, int runs,
                                  const xattn_cpu_bind *bind)
{
#if XATTN__CPU_X86
    if (simd == XATTN_CPU_SIMD_AVX512)
        return xattn__fma_bench(xattn__fma_avx512, XATTN__ACC * 16 * 2, nt, seconds, runs, bind);
    if (simd == XATTN_CPU_SIMD_AVX2)
        return xattn__fma_bench(xattn__fma_avx2, XATTN__ACC * 8 * 2, nt, seconds, runs, bind);
#else
    (void)simd;
#endif
    return xattn__fma_bench(xattn__fma_portable, 16 * 2, nt, seconds, runs, bind);
}

double xattn__cpu_ceiling_fma_f16(int nt, double seconds, int runs, const xattn_cpu_bind *bind)
{
#if XATTN__CPU_X86 && XATTN__CPU_HAVE_FP16_ISA
    if (xattn_cpu_simd_detect() == XATTN_CPU_SIMD_AVX512 && xattn__cpu_has_leaf7(0, 3, 23))
        return xattn__fma_bench(xattn__fma_f16, XATTN__ACC * 32 * 2, nt, seconds, runs, bind);
#endif
    (void)nt, (void)seconds, (void)runs, (void)bind;
    return 0.0;
}

double xattn__cpu_ceiling_fma_bf16(int nt, double seconds, int runs, const xattn_cpu_bind *bind)
{
#if XATTN__CPU_X86
    if (xattn_cpu_simd_detect() == XATTN_CPU_SIMD_AVX512 && xattn__cpu_has_leaf7(1, 0, 5))
        return xattn__fma_bench(xattn__fma_bf16, XATTN__ACC * 16 * 4, nt, seconds, runs, bind);
#endif
    (void)nt, (void)seconds, (void)runs, (void)bind;
    return 0.0;
}

/* ---- bandwidth -------------------------------------------------------------- */

/* Thread t's share [*a, *b) of n bytes, in whole 256-byte blocks (so that the
 * read loops can cut it into 4 streams of whole 64-byte lines). */
static void xattn__share(size_t n, int nt, int t, size_t *a, size_t *b)
{
    size_t blocks = n / 256;
    *a = blocks * (size_t)t / (size_t)nt * 256;
    *b = blocks * (size_t)(t + 1) / (size_t)nt * 256;
}

/* The read loops walk 4 streams at once (the 4 quarters of the share): more
 * misses in flight than one stream gets from the prefetchers alone. n is a
 * multiple of 256. */
static uint64_t xattn__read_portable(const char *p, size_t n)
{
    const size_t q = n / 4 / 8;
    const uint64_t *w0 = (const uint64_t *)(const void *)p, *w1 = w0 + q, *w2 = w1 + q,
                   *w3 = w2 + q;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i < q; i += 2) {
        a0 ^= w0[i] ^ w0[i + 1];
        a1 ^= w1[i] ^ w1[i + 1];
        a2 ^= w2[i] ^ w2[i + 1];
        a3 ^= w3[i] ^ w3[i + 1];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

#if XATTN__CPU_X86
__attribute__((target("avx2"))) static uint64_t xattn__read_avx2(const char *p, size_t n)
{
    const size_t q = n / 4;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < q; i += 64) {
        const char *s = p + i;
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(const void *)s));
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(const void *)(s + 32)));
        s += q;
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(const void *)s));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(const void *)(s + 32)));
        s += q;
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(const void *)s));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(const void *)(s + 32)));
        s += q;
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(const void *)s));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(const void *)(s + 32)));
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
}

__attribute__((target("avx512f"))) static uint64_t xattn__read_avx512(const char *p, size_t n)
{
    const size_t q = n / 4;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < q; i += 64) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512((const void *)(p + q + i)));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512((const void *)(p + 2 * q + i)));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512((const void *)(p + 3 * q + i)));
    }
    __m512i s = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_or_epi64(s);
}
#endif

typedef uint64_t (*xattn__read_fn)(const char *p, size_t n);

static _Thread_local volatile uint64_t xattn__read_sink; /* per thread, as above */

void xattn__cpu_ceiling_touch(void *buf, size_t bytes, int nt, const xattn_cpu_bind *bind)
{
    (void)nt;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Huge pages: fewer faults while touching, fewer TLB misses while streaming. */
    {
        const uintptr_t page = 4096, a = ((uintptr_t)buf + page - 1) & ~(page - 1);
        const uintptr_t e = ((uintptr_t)buf + bytes) & ~(page - 1);
        if (e > a)
            madvise((void *)a, (size_t)(e - a), MADV_HUGEPAGE);
    }
#endif
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt)
#endif
    {
        const int bound = xattn__cpu_bind_enter(bind);
        int t = 0, team = 1;
#ifdef XATTN_HAVE_OPENMP
        t = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        size_t a, b;
        xattn__share(bytes, team, t, &a, &b);
        memset((char *)buf + a, 1 + t, b - a);
        xattn__cpu_bind_leave(bind, bound);
    }
}

/* Best rate of `runs` passes: mode 0 reads buf, mode 1 copies src -> dst. */
static double xattn__bw_bench(int mode, void *dst, const void *src, size_t bytes, int nt, int runs,
                              const xattn_cpu_bind *bind)
{
    xattn__read_fn rd = xattn__read_portable;
#if XATTN__CPU_X86
    xattn_cpu_simd simd = xattn_cpu_simd_detect();
    rd = simd == XATTN_CPU_SIMD_AVX512 ? xattn__read_avx512
         : simd == XATTN_CPU_SIMD_AVX2 ? xattn__read_avx2
                                       : xattn__read_portable;
#endif
    double best = 0.0;
    for (int r = 0; r < runs; r++) {
        double t0 = 0, t1 = 0;
        uint64_t x = 0;
        (void)nt;
#ifdef XATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nt) reduction(^ : x)
#endif
        {
            const int bound = xattn__cpu_bind_enter(bind);
            int t = 0, team = 1;
#ifdef XATTN_HAVE_OPENMP
            t = omp_get_thread_num();
            team = omp_get_num_threads();
#pragma omp barrier
#pragma omp master
            t0 = xattn__cpu_clock();
#pragma omp barrier
#else
            t0 = xattn__cpu_clock();
#endif
            size_t a, b;
            xattn__share(bytes, team, t, &a, &b);
            if (mode == 0)
                x ^= rd((const char *)src + a, b - a);
            else
                memcpy((char *)dst + a, (const char *)src + a, b - a);
#ifdef XATTN_HAVE_OPENMP
#pragma omp barrier
#pragma omp master
#endif
            t1 = xattn__cpu_clock();
            xattn__cpu_bind_leave(bind, bound);
        }
        xattn__read_sink ^= x;
        double moved = (double)(bytes / 256 * 256) * (mode == 0 ? 1.0 : 2.0);
        double rate = moved / (t1 - t0) * 1e-9;
        if (rate > best)
            best = rate;
    }
    return best;
}

double xattn__cpu_ceiling_read(const void *buf, size_t bytes, int nt, int runs,
                               const xattn_cpu_bind *bind)
{
    return xattn__bw_bench(0, NULL, buf, bytes, nt, runs, bind);
}

double xattn__cpu_ceiling_copy(void *dst, const void *src, size_t bytes, int nt, int runs,
                               const xattn_cpu_bind *bind)
{
    return xattn__bw_bench(1, dst, src, bytes, nt, runs, bind);
}
