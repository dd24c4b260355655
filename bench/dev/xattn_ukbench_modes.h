/* xattn_ukbench's other modes: --rates (xattn_ukbench_rates.c) and --memory
 * (xattn_ukbench_memory.c). */
#ifndef XATTN_UKBENCH_MODES_H
#define XATTN_UKBENCH_MODES_H

#include <stdint.h>

/* Prints the one-core throughput of the vector instructions a decode step
 * could use, each over `reps` repetitions; returns 0. */
int xattn_ukbench_rates(int reps);

/* Prints one core's memory latency and how many of its own misses it keeps in
 * flight: dependent loads over `mib` MiB, 1 to 48 chains at once, best of
 * `reps`; returns 0, or 1 (with a message) when the buffer cannot be had. */
int xattn_ukbench_memory(int64_t mib, int reps);

#endif
