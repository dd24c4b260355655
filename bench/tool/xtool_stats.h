/* Statistics of the xattn tool: sample summaries, the noise rule of
 * `compare`, padding waste of a batch, and the roofline position. Pure
 * functions (docs/tool.md defines each figure), and the clock that the tool
 * and its helpers take their samples with. */
#ifndef XTOOL_STATS_H
#define XTOOL_STATS_H

#include <stdint.h>

/* Monotonic seconds. */
double xtool_now_s(void);
/* The process's CPU time in seconds (CLOCK_PROCESS_CPUTIME_ID: every thread of
 * the process; other processes inflate it far less than the wall clock). */
double xtool_cpu_now_s(void);

typedef struct xtool_stats {
    int n;
    double min, max, mean, median, p90;
    double mad;    /* median absolute deviation from the median */
    double spread; /* relative spread: mad / median (0 when the median is 0) */
    /* The distribution-free confidence interval of the median from order
     * statistics (docs/measurement.md): the sorted samples of ranks l and
     * n + 1 - l, l the largest with coverage 1 - 2 P(Binomial(n, 1/2) <= l - 1)
     * >= 0.95; [min, max] when n <= 5, whose coverage 1 - 2^(1-n) is below. */
    double ci_low, ci_high;
    double ci_level; /* the interval's real coverage */
} xtool_stats;

/* Summarizes n samples (n >= 1; the array is not modified). p90 is the
 * nearest-rank 90th percentile: the sorted sample at index ceil(0.9 n) - 1. */
int xtool_stats_compute(const double *samples, int n, xtool_stats *out);

/* The 95% order-statistic interval of the median of n sorted samples (n >= 1):
 * the 1-based ranks l and n + 1 - l into *lo and *hi, the coverage into
 * *level. n <= 5 gives [min, max] with coverage 1 - 2^(1-n). */
void xtool_stats_median_ci(const double *sorted, int n, double *lo, double *hi, double *level);

/* The "converged" flag of a cell: n >= 5 and (ci_high - ci_low) / median <=
 * 2 * target (target: the cell's spread bound, --max-spread). */
int xtool_stats_ci_narrow(const xtool_stats *s, double target);
/* (ci_high - ci_low) / 2 / median: the interval's relative half-width (0 when
 * the median is not positive). */
double xtool_stats_ci_halfwidth(const xtool_stats *s);

typedef enum xtool_verdict {
    XTOOL_VERDICT_NOISE = 0,  /* within both runs' noise */
    XTOOL_VERDICT_FASTER = 1, /* B really faster than A */
    XTOOL_VERDICT_SLOWER = 2  /* B really slower than A */
} xtool_verdict;

/* The noise rule of `compare`: with ratio = B.median / A.median, a change is
 * real when the [min, p90] intervals of A and B do not overlap AND
 * |ratio - 1| exceeds A.spread + B.spread. */
xtool_verdict xtool_stats_verdict(double a_min, double a_median, double a_p90, double a_spread,
                                  double b_min, double b_median, double b_p90, double b_spread,
                                  double *ratio);
const char *xtool_verdict_name(xtool_verdict v);

/* The one verdict rule (docs/measurement.md): B is faster than A only when
 * the two intervals separate (B.hi < A.lo), slower when A.hi < B.lo; else
 * within noise. ratio = B.median / A.median. Any non-finite figure: noise. */
xtool_verdict xtool_stats_verdict_ci(double a_lo, double a_median, double a_hi, double b_lo,
                                     double b_median, double b_hi, double *ratio);

/* The re-measurement of `xattn bench --ab`: n paired ratios new/old, each
 * from two runs made back to back (in alternating order), so that the
 * machine's drift between the pairs cancels. The interval [lo, hi] is the
 * distribution-free confidence interval of the median ratio from order
 * statistics: the tightest [x(k), x(n+1-k)] of the sorted ratios whose
 * coverage 1 - 2 P(Binomial(n, 1/2) <= k - 1) is at least 90%; none exists
 * below 5 pairs. A change is real when the whole interval lies on one side
 * of 1 and the median ratio is more than min_effect away from 1. */
typedef struct xtool_paired {
    int n;
    double median;     /* median of the ratios */
    double lo, hi;     /* the interval (NaN without one) */
    double confidence; /* its coverage; 0 when n is too small for 90% */
    xtool_verdict verdict;
} xtool_paired;
/* Returns 0, or -1 when n < 1 or a ratio is not positive and finite. */
int xtool_stats_paired(const double *ratios, int n, double min_effect, xtool_paired *out);

/* 1 when pct, a share of a device's ceiling in %, is above 100: never a real
 * figure, an error of the accounting model (work or bytes over-counted, or a
 * ceiling that does not apply, such as data served from caches), which the
 * tool flags wherever it prints or writes one. */
int xtool_stats_over_ceiling(double pct);
/* The footnote the tool prints under a table with a flagged share. */
#define XTOOL_MODEL_ERROR_NOTE                                                                     \
    "a share of a ceiling above 100% is not a real figure but an error of the accounting "         \
    "model (executed work or bytes over-counted, or data served from caches faster than the "      \
    "measured streaming bandwidth); please report it with the result file"

/* Padding of a padded batch of n sequences with query lengths lq[i] and key
 * lengths lk[i], padded to sq_pad x sk_pad (at least the longest):
 *   pair_waste  = 1 - sum_i lq_i * lk_i / (n * sq_pad * sk_pad)
 *     (the share of the dense attention rectangle on padding; masks not
 *      counted; the same figure as the records' padding_waste)
 *   token_waste = 1 - sum_i lq_i / (n * sq_pad)
 *     (the share of padded query tokens: what the linear layers waste)
 * Returns 0, or -1 when n <= 0 or a padded extent is 0. */
typedef struct xtool_waste {
    double pair_waste, token_waste;
    double pairs_padded, pairs_useful; /* n*sq*sk and sum lq*lk */
    int64_t tokens_q, tokens_k;        /* sums of the lengths */
} xtool_waste;
int xtool_padding_waste(const int32_t *lq, const int32_t *lk, int n, int64_t sq_pad, int64_t sk_pad,
                        xtool_waste *out);

/* Roofline: intensity = flops / bytes (FLOP a byte); ridge = fma_gflops /
 * bw_gbps; compute-bound when intensity >= ridge. The attainable rate is
 * min(fma, intensity * bw). Returns -1 when a figure is not positive. */
typedef struct xtool_roofline {
    double intensity, ridge, attainable_gflops;
    int compute_bound;
} xtool_roofline;
int xtool_roofline_place(double flops, double bytes, double fma_gflops, double bw_gbps,
                         xtool_roofline *out);

#endif
