#include "xtool_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double xtool_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double xtool_cpu_now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int xtool__cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double xtool__median_sorted(const double *v, int n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int xtool_stats_compute(const double *samples, int n, xtool_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0 || !samples)
        return -1;
    double *v = malloc((size_t)n * 2 * sizeof *v);
    if (!v)
        return -1;
    memcpy(v, samples, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, xtool__cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    out->n = n;
    out->min = v[0];
    out->max = v[n - 1];
    out->mean = sum / n;
    out->median = xtool__median_sorted(v, n);
    int k = (int)ceil(0.9 * n) - 1;
    out->p90 = v[k < 0 ? 0 : k];
    double *dev = v + n;
    for (int i = 0; i < n; i++)
        dev[i] = fabs(v[i] - out->median);
    qsort(dev, (size_t)n, sizeof *dev, xtool__cmp_d);
    out->mad = xtool__median_sorted(dev, n);
    out->spread = out->median > 0 ? out->mad / out->median : 0;
    xtool_stats_median_ci(v, n, &out->ci_low, &out->ci_high, &out->ci_level);
    free(v);
    return 0;
}

void xtool_stats_median_ci(const double *sorted, int n, double *lo, double *hi, double *level)
{
    *lo = *hi = NAN;
    *level = 0;
    if (n < 1 || !sorted)
        return;
    *lo = sorted[0];
    *hi = sorted[n - 1];
    /* [min, max] (l = 1) covers the median with 1 - 2 P(B <= 0) = 1 - 2^(1-n). */
    *level = 1.0 - 2.0 * pow(0.5, n);
    if (n <= 5)
        return;
    /* cdf = P(Binomial(n, 1/2) <= l - 1), grown term by term; l grows while
     * the coverage stays at 95% or more. */
    double term = pow(0.5, n), cdf = 0;
    for (int l = 1; 2 * l <= n; l++) {
        cdf += term; /* adds P(B = l - 1) */
        term = term * (double)(n - (l - 1)) / (double)l;
        double cover = 1.0 - 2.0 * cdf;
        if (cover < 0.95)
            break;
        *lo = sorted[l - 1];
        *hi = sorted[n - l];
        *level = cover;
    }
}

int xtool_stats_ci_narrow(const xtool_stats *s, double target)
{
    return s->n >= 5 && s->median > 0 && isfinite(s->ci_low) && isfinite(s->ci_high) &&
           (s->ci_high - s->ci_low) / s->median <= 2.0 * target;
}

double xtool_stats_ci_halfwidth(const xtool_stats *s)
{
    return s->median > 0 && isfinite(s->ci_low) && isfinite(s->ci_high)
               ? 0.5 * (s->ci_high - s->ci_low) / s->median
               : 0;
}

xtool_verdict xtool_stats_verdict_ci(double a_lo, double a_median, double a_hi, double b_lo,
                                     double b_median, double b_hi, double *ratio)
{
    double r = a_median > 0 ? b_median / a_median : (b_median > 0 ? INFINITY : 1.0);
    if (ratio)
        *ratio = r;
    if (!isfinite(a_lo) || !isfinite(a_hi) || !isfinite(b_lo) || !isfinite(b_hi))
        return XTOOL_VERDICT_NOISE;
    if (b_hi < a_lo)
        return XTOOL_VERDICT_FASTER;
    if (a_hi < b_lo)
        return XTOOL_VERDICT_SLOWER;
    return XTOOL_VERDICT_NOISE;
}

xtool_verdict xtool_stats_verdict(double a_min, double a_median, double a_p90, double a_spread,
                                  double b_min, double b_median, double b_p90, double b_spread,
                                  double *ratio)
{
    double r = a_median > 0 ? b_median / a_median : (b_median > 0 ? INFINITY : 1.0);
    if (ratio)
        *ratio = r;
    double noise = (a_spread > 0 ? a_spread : 0) + (b_spread > 0 ? b_spread : 0);
    if (b_min > a_p90 && r - 1.0 > noise)
        return XTOOL_VERDICT_SLOWER;
    if (b_p90 < a_min && 1.0 - r > noise)
        return XTOOL_VERDICT_FASTER;
    return XTOOL_VERDICT_NOISE;
}

const char *xtool_verdict_name(xtool_verdict v)
{
    switch (v) {
    case XTOOL_VERDICT_FASTER: return "faster";
    case XTOOL_VERDICT_SLOWER: return "slower";
    default: return "noise";
    }
}

int xtool_stats_paired(const double *ratios, int n, double min_effect, xtool_paired *out)
{
    memset(out, 0, sizeof *out);
    out->lo = out->hi = NAN;
    out->verdict = XTOOL_VERDICT_NOISE;
    if (n < 1 || !ratios)
        return -1;
    for (int i = 0; i < n; i++)
        if (!(ratios[i] > 0) || !isfinite(ratios[i]))
            return -1;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return -1;
    memcpy(v, ratios, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, xtool__cmp_d);
    out->n = n;
    out->median = xtool__median_sorted(v, n);
    /* cdf = P(Binomial(n, 1/2) <= k - 1), grown term by term. */
    double term = pow(0.5, n), cdf = 0;
    for (int k = 1; 2 * k <= n + 1; k++) {
        cdf += term; /* adds P(X = k - 1) */
        term = term * (double)(n - (k - 1)) / (double)k;
        double cover = 1.0 - 2.0 * cdf;
        if (cover < 0.90)
            break;
        out->lo = v[k - 1];
        out->hi = v[n - k];
        out->confidence = cover;
    }
    free(v);
    if (out->confidence > 0) {
        if (out->hi < 1.0 && 1.0 - out->median > min_effect)
            out->verdict = XTOOL_VERDICT_FASTER;
        else if (out->lo > 1.0 && out->median - 1.0 > min_effect)
            out->verdict = XTOOL_VERDICT_SLOWER;
    }
    return 0;
}

int xtool_stats_over_ceiling(double pct)
{
    return isfinite(pct) && pct > 100.0;
}

int xtool_padding_waste(const int32_t *lq, const int32_t *lk, int n, int64_t sq_pad, int64_t sk_pad,
                        xtool_waste *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0 || sq_pad <= 0 || sk_pad <= 0)
        return -1;
    double useful = 0;
    for (int i = 0; i < n; i++) {
        useful += (double)lq[i] * (double)lk[i];
        out->tokens_q += lq[i];
        out->tokens_k += lk[i];
    }
    out->pairs_useful = useful;
    out->pairs_padded = (double)n * (double)sq_pad * (double)sk_pad;
    out->pair_waste = 1.0 - useful / out->pairs_padded;
    out->token_waste = 1.0 - (double)out->tokens_q / ((double)n * (double)sq_pad);
    return 0;
}

int xtool_roofline_place(double flops, double bytes, double fma_gflops, double bw_gbps,
                         xtool_roofline *out)
{
    memset(out, 0, sizeof *out);
    if (!(flops > 0) || !(bytes > 0) || !(fma_gflops > 0) || !(bw_gbps > 0))
        return -1;
    out->intensity = flops / bytes;
    out->ridge = fma_gflops / bw_gbps;
    out->compute_bound = out->intensity >= out->ridge;
    double mem_roof = out->intensity * bw_gbps;
    out->attainable_gflops = mem_roof < fma_gflops ? mem_roof : fma_gflops;
    return 0;
}
