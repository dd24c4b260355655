/*
 * xattn_ukbench --memory: one core's memory latency, and how many of its own
 * cache misses it keeps in flight.
 *
 * Every 64-byte line of a large buffer holds the index of the next line in
 * one random cycle through all of them, so that no hardware prefetcher can
 * guess the next address. c chains step together: one chain gives the
 * latency; c chains keep up to c misses in flight, until the core runs out of
 * places to track them (its L1 fill buffers). A second table touches random
 * lines independently, with loads and with each software prefetch hint: on
 * Intel cores a software prefetch takes one of the same places, so it cannot
 * bring more than the loads do.
 *
 * What either plateau gives in GB/s is what one core can pull from memory by
 * its own accesses; a streaming loop gets more only through the L2's
 * hardware streamer, which follows ascending addresses within a 4 KiB page
 * (the message of commit 52d92a6 has the figures and what they ruled out).
 */
#include "xattn_stats.h"
#include "xattn_ukbench_modes.h"

#include <stdio.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define UKM_MAX_CHAINS 48
#define UKM_LINE 64 /* bytes; one index per line, the rest unused */

/* xorshift64: a fixed seed, so that every run walks the same cycle. */
static uint64_t ukm_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Steps every chain `steps` times; the sum keeps the loads live. */
static uint64_t ukm_walk(const uint64_t *a, uint64_t *pos, int c, int64_t steps)
{
    for (int64_t i = 0; i < steps; i++)
        for (int j = 0; j < c; j++)
            pos[j] = a[pos[j] * (UKM_LINE / 8)];
    uint64_t x = 0;
    for (int j = 0; j < c; j++)
        x += pos[j];
    return x;
}

/* Touches the lines idx[0..n) of a, each on its own (no load waits for
 * another): kind 0 loads them, 1-4 ask for them with __builtin_prefetch of
 * locality 3 (x86 PREFETCHT0), 2 (T1), 1 (T2) and 0 (NTA). */
static uint64_t ukm_touch(const uint64_t *a, const uint32_t *idx, uint64_t n, int kind)
{
    uint64_t x = 0;
    const uint64_t *l;
    switch (kind) {
    case 0:
        for (uint64_t i = 0; i < n; i++)
            x += a[(uint64_t)idx[i] * (UKM_LINE / 8)];
        break;
#define UKM_PF(K, LOC)                                                                             \
    case K:                                                                                        \
        for (uint64_t i = 0; i < n; i++) {                                                         \
            l = a + (uint64_t)idx[i] * (UKM_LINE / 8);                                             \
            __builtin_prefetch(l, 0, LOC);                                                         \
        }                                                                                          \
        break;
        UKM_PF(1, 3)
        UKM_PF(2, 2)
        UKM_PF(3, 1)
        UKM_PF(4, 0)
#undef UKM_PF
    default: break;
    }
    return x;
}

int xattn_ukbench_memory(int64_t mib, int reps)
{
    const uint64_t lines = (uint64_t)mib * (1u << 20) / UKM_LINE;
    uint64_t *a = NULL;
    uint32_t *order = malloc(lines * sizeof *order);
    if (!order || posix_memalign((void **)&a, 2u << 20, lines * UKM_LINE) != 0) {
        fprintf(stderr, "xattn_ukbench: cannot allocate %lld MiB for --memory\n", (long long)mib);
        free(order);
        return 1;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Huge pages, so that the walk measures memory and not page walks. */
    (void)madvise(a, lines * UKM_LINE, MADV_HUGEPAGE);
#endif
    /* A random cycle: a shuffled order of the lines, each pointing at the next. */
    uint64_t seed = 88172645463325252ull;
    for (uint64_t i = 0; i < lines; i++)
        order[i] = (uint32_t)i;
    for (uint64_t i = lines - 1; i > 0; i--) {
        const uint64_t j = ukm_next(&seed) % (i + 1);
        const uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (uint64_t i = 0; i < lines; i++)
        a[(uint64_t)order[i] * (UKM_LINE / 8)] = order[(i + 1) % lines];

    static const int chains[] = {1, 2, 4, 8, 12, 16, 24, 32, 48};
    printf("%-7s %10s %10s %10s   (one thread, %lld MiB, random lines)\n", "chains", "ns/step",
           "in flight", "GB/s", (long long)mib);
    /* Every repetition walks lines of the cycle that no recent one walked:
     * its chains take adjacent segments from `cursor` on, which then moves
     * past them. A line comes round again only after the whole buffer, so it
     * is in no cache then (the default 1 GiB is several times any LLC this
     * was run on). */
    uint64_t sink = 0, cursor = 0;
    double latency = 0.0; /* 1 chain's ns/step */
    for (size_t k = 0; k < sizeof chains / sizeof chains[0]; k++) {
        const int c = chains[k];
        /* About 4 million loads a repetition (0.2-1 s), in all chains. */
        int64_t steps = (int64_t)(lines / 4u < 4000000u ? lines / 4u : 4000000u) / c;
        if (steps < 1)
            steps = 1;
        double t[64];
        for (int r = 0; r < reps; r++) {
            uint64_t pos[UKM_MAX_CHAINS];
            for (int j = 0; j < c; j++)
                pos[j] = order[(cursor + (uint64_t)j * (uint64_t)steps) % lines];
            cursor = (cursor + (uint64_t)c * (uint64_t)steps) % lines;
            const double s = xattn_now_s();
            sink += ukm_walk(a, pos, c, steps);
            t[r] = (xattn_now_s() - s) * 1e9 / (double)steps;
        }
        xattn_stats sm;
        xattn_stats_compute(t, reps, &sm);
        /* The fastest repetition: a shared machine only ever adds time. In
         * flight (Little's law): lines per ns times the latency. */
        if (c == 1)
            latency = sm.min;
        printf("%-7d %10.1f %10.1f %10.2f\n", c, sm.min, (double)c * latency / sm.min,
               (double)c * UKM_LINE / sm.min);
    }
    printf("(ns/step: the fastest repetition's time for one load of every chain; 1 chain\n"
           " is the latency. In flight: the misses outstanding on average, chains x latency /\n"
           " ns/step. GB/s: 64-byte lines per ns.)\n\n");

    /* The same lines touched independently: random indices, read in order
     * from an array (which the streamer fetches), so only the core's own
     * limit on misses in flight bounds loads and software prefetches. */
    static const char *const kinds[] = {"loads", "prefetch T0", "prefetch T1", "prefetch T2",
                                        "prefetch NTA"};
    const uint64_t n = lines / 4u < 4000000u ? lines / 4u : 4000000u;
    uint32_t *idx = malloc(n * sizeof *idx);
    if (!idx) {
        fprintf(stderr, "xattn_ukbench: cannot allocate the index array for --memory\n");
        free(a);
        free(order);
        return 1;
    }
    printf("%-13s %10s %10s   (independent random lines, %llu a repetition)\n", "access",
           "in flight", "GB/s", (unsigned long long)n);
    for (int kind = 0; kind < 5; kind++) {
        double t[64];
        for (int r = 0; r < reps; r++) {
            for (uint64_t i = 0; i < n; i++) /* distinct, fresh lines: the cursor moves on */
                idx[i] = order[(cursor + i) % lines];
            cursor = (cursor + n) % lines;
            const double s = xattn_now_s();
            sink += ukm_touch(a, idx, n, kind);
            t[r] = (xattn_now_s() - s) * 1e9 / (double)n; /* ns per line */
        }
        xattn_stats sm;
        xattn_stats_compute(t, reps, &sm);
        printf("%-13s %10.1f %10.2f\n", kinds[kind], latency / sm.min, UKM_LINE / sm.min);
    }
    printf("(one core; the plateau of either table is what that core's own misses bring.\n"
           " A streaming loop gets more only from the hardware streamer; checksum %llu)\n",
           (unsigned long long)(sink & 0xff));
    free(idx);
    free(a);
    free(order);
    return 0;
}
