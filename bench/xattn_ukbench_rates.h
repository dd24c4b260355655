/* xattn_ukbench --rates (xattn_ukbench_rates.c). */
#ifndef XATTN_UKBENCH_RATES_H
#define XATTN_UKBENCH_RATES_H

/* Prints the one-core throughput of the vector instructions a decode step
 * could use, each over `reps` repetitions; returns 0. */
int xattn_ukbench_rates(int reps);

#endif
