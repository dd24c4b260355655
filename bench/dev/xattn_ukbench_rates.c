/*
 * xattn_ukbench --rates: the throughput of the vector instructions that a
 * decode step could be built from, on one core of this CPU, each on its own:
 * 12 independent chains of the instruction, so that its latency is hidden and
 * only the ports it issues on limit it. The figures answer "would this
 * instruction make the loop cheaper here" before anyone builds a kernel on it
 * (commit bf2146c has the figures of one such question): for instance AVX512-BF16's
 * VDPBF16PS does twice an FMA's multiply-adds per instruction, which pays only
 * if it issues at least half as often.
 */
#include "xattn_cpu_common.h"
#include "xattn_stats.h"
#include "xattn_ukbench_modes.h"

#include <stdio.h>
#include <time.h>

double xattn_ukbench_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if XATTN__CPU_X86

#include <immintrin.h>

#define UKR_ITERS 1000000L /* x 12 instructions: about 2-10 ms a repetition */
/* clang-format off */
#define UKR_12(X, A) X(0, A) X(1, A) X(2, A) X(3, A) X(4, A) X(5, A) \
                     X(6, A) X(7, A) X(8, A) X(9, A) X(10, A) X(11, A)
/* clang-format on */

/*
 * Each loop runs 12 independent instructions per iteration. The empty asm
 * statements make the compiler keep every value in a register and recompute
 * it each iteration.
 *
 * UKR_CHAIN: 12 accumulators a_i = OP(a_i, x, y), x and y "changed" every
 * iteration so that nothing is hoisted (the values themselves do not matter
 * to the timing). UKR_CONVERT: 12 inputs "changed" and their conversions "used"
 * every iteration (a conversion has no chain of its own). CON is the asm
 * constraint of the vectors: "v" (any of the 32 registers) for zmm, "x" for
 * ymm.
 */
#define UKR_DECL(i, VT) VT a##i = {i}; /* distinct, or the compiler merges the chains */
#define UKR_STEP(i, OP) a##i = OP(a##i, x, y);
#define UKR_TOUCH(i, CON) __asm__ volatile("" : "+" CON(a##i));
#define UKR_USE(i, CON) __asm__ volatile("" ::CON(a##i));
#define UKR_CVT(i, CVT) __asm__ volatile("" ::"v"(CVT(a##i)));

#define UKR_CHAIN(NAME, TGT, VT, CON, XT, X0, Y0, OP)                                              \
    static __attribute__((target(TGT), noinline)) void NAME(long n)                                \
    {                                                                                              \
        UKR_12(UKR_DECL, VT)                                                                       \
        XT x = X0, y = Y0;                                                                         \
        for (long it = 0; it < n; it++) {                                                          \
            __asm__ volatile("" : "+" CON(x), "+" CON(y));                                         \
            UKR_12(UKR_STEP, OP)                                                                   \
        }                                                                                          \
        UKR_12(UKR_USE, CON)                                                                       \
    }

#define UKR_CONVERT(NAME, TGT, IT, CON, CVT)                                                       \
    static __attribute__((target(TGT), noinline)) void NAME(long n)                                \
    {                                                                                              \
        UKR_12(UKR_DECL, IT)                                                                       \
        for (long it = 0; it < n; it++) {                                                          \
            UKR_12(UKR_TOUCH, CON)                                                                 \
            UKR_12(UKR_CVT, CVT)                                                                   \
        }                                                                                          \
    }

#define UKR_AVX512 "avx512f,avx512bw,avx512vl,fma,f16c"

/* f32 FMA, 16 and 8 lanes. */
UKR_CHAIN(ukr_fma512, UKR_AVX512, __m512, "v", __m512, _mm512_set1_ps(1.0f), _mm512_set1_ps(0.0f),
          _mm512_fmadd_ps)
UKR_CHAIN(ukr_fma256, "avx2,fma", __m256, "x", __m256, _mm256_set1_ps(1.0f), _mm256_set1_ps(0.0f),
          _mm256_fmadd_ps)
/* VDPBF16PS on a zmm: 32 bf16 pairs' products summed into 16 f32 lanes. Only
 * this program uses AVX512-BF16 (under its own target); the library does not. */
UKR_CHAIN(ukr_dpbf16512, "avx512f,avx512bf16", __m512, "v", __m512bh,
          (__m512bh)_mm512_set1_epi16(0x3f80), (__m512bh)_mm512_set1_epi16(0x3f00),
          _mm512_dpbf16_ps)

/* f16 -> f32, 16 elements (F16C on a zmm); bf16 -> f32, 16 elements, with the
 * shift the in-place kernels use. */
#define UKR_BF16_SHIFT(w) _mm512_slli_epi32((w), 16)
UKR_CONVERT(ukr_cvtph512, UKR_AVX512, __m256i, "x", _mm512_cvtph_ps)
UKR_CONVERT(ukr_bf16shift512, UKR_AVX512, __m512i, "v", UKR_BF16_SHIFT)

typedef struct ukr_op {
    const char *name, *what;
    double per; /* multiply-adds (or elements converted) per instruction */
    const char *unit;
    void (*fn)(long);
    int (*have)(void);
} ukr_op;

static int ukr_have512(void)
{
    return xattn_cpu_simd_detect() >= XATTN_CPU_SIMD_AVX512;
}
static int ukr_have256(void)
{
    return xattn_cpu_simd_detect() >= XATTN_CPU_SIMD_AVX2;
}
static int ukr_havebf16(void)
{
    __builtin_cpu_init();
    return ukr_have512() && __builtin_cpu_supports("avx512bf16");
}

/* ns per instruction: the median of reps repetitions (and the fastest). */
static double ukr_time(void (*fn)(long), int reps, double *best)
{
    double t[64];
    fn(UKR_ITERS / 10); /* warm-up: the vector units powered up */
    for (int r = 0; r < reps; r++) {
        const double s = xattn_now_s();
        fn(UKR_ITERS);
        t[r] = (xattn_now_s() - s) * 1e9 / (12.0 * (double)UKR_ITERS);
    }
    xattn_stats sm;
    xattn_stats_compute(t, reps, &sm);
    *best = sm.min;
    return sm.median;
}

int xattn_ukbench_rates(int reps)
{
    static const ukr_op ops[] = {
        {"fma512", "VFMADD zmm, f32", 16, "MAC", ukr_fma512, ukr_have512},
        {"dpbf16-512", "VDPBF16PS zmm, bf16 pairs", 32, "MAC", ukr_dpbf16512, ukr_havebf16},
        {"fma256", "VFMADD ymm, f32", 8, "MAC", ukr_fma256, ukr_have256},
        {"cvtph-512", "VCVTPH2PS zmm, f16 -> f32", 16, "elt", ukr_cvtph512, ukr_have512},
        {"bf16shift-512", "VPSLLD zmm, bf16 -> f32", 16, "elt", ukr_bf16shift512, ukr_have512},
    };
    printf("%-14s %-27s %9s %9s %12s\n", "op", "instruction", "ns/instr", "best", "per ns");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (!ops[i].have()) {
            printf("%-14s %-27s %9s\n", ops[i].name, ops[i].what, "(not on this CPU)");
            continue;
        }
        double best;
        const double med = ukr_time(ops[i].fn, reps, &best);
        printf("%-14s %-27s %9.3f %9.3f %8.1f %-3s\n", ops[i].name, ops[i].what, med, best,
               ops[i].per / med, ops[i].unit);
    }
    printf("(one thread; 12 independent instructions per iteration, so latency is hidden;\n"
           " per ns: multiply-adds or converted elements at the median)\n");
    return 0;
}

int xattn_ukbench_fma_gflops(xattn_cpu_simd simd, int reps, double *median, double *best)
{
    void (*fn)(long) = simd == XATTN_CPU_SIMD_AVX512 ? ukr_fma512
                       : simd == XATTN_CPU_SIMD_AVX2 ? ukr_fma256
                                                     : NULL;
    const double lanes = simd == XATTN_CPU_SIMD_AVX512 ? 16 : 8;
    if (!fn || (int)xattn_cpu_simd_detect() < (int)simd)
        return -1;
    double t[64];
    fn(UKR_ITERS / 10);
    for (int r = 0; r < reps; r++) { /* on the thread's clock, as xattn_ukbench --prefill */
        const double s = xattn_ukbench_cpu_s();
        fn(UKR_ITERS / 10);
        t[r] = (xattn_ukbench_cpu_s() - s) * 1e9 / (1.2 * (double)UKR_ITERS);
    }
    xattn_stats sm;
    xattn_stats_compute(t, reps, &sm);
    *median = 2.0 * lanes / sm.median;
    *best = 2.0 * lanes / sm.min;
    return 0;
}

#else

int xattn_ukbench_fma_gflops(xattn_cpu_simd simd, int reps, double *median, double *best)
{
    (void)simd;
    (void)reps;
    (void)median;
    (void)best;
    return -1;
}

int xattn_ukbench_rates(int reps)
{
    (void)reps;
    printf("(--rates measures x86 vector instructions; this CPU is not x86)\n");
    return 0;
}

#endif
