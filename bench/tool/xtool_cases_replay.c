/* `xattn bench --cases FILE`: loading a cases file and the model's totals after
 * the table (xtool_cases_file.h). */
#include <stdlib.h>
#include <string.h>

#include "xtool_bench.h"
#include "xtool_cases_file.h"

#define XTOOL__CASES_MAX_BYTES (16u << 20)

int xtool_cases_load(const char *path, uint64_t seed, xtool_bench_case *out, int cap,
                     xtool_cases_file *cf, char *err, size_t errlen)
{
    char e2[768] = "";
    char *text = xtool_read_text(path, XTOOL__CASES_MAX_BYTES, e2, sizeof e2);
    if (!text) {
        snprintf(err, errlen, "--cases: %s", e2);
        return -1;
    }
    int n = xtool_cases_parse(text, strlen(text), seed, out, cap, cf, e2, sizeof e2);
    free(text);
    if (n < 0) {
        snprintf(err, errlen, "--cases %.900s: %s", path, e2);
        return -1;
    }
    snprintf(cf->path, sizeof cf->path, "%s", path);
    return n;
}

/* ---- the model's totals ------------------------------------------------------------ */

typedef struct xtool__total {
    int device, threads;
    xattn_algo algo; /* XATTN_ALGO_COUNT: the fastest algorithm per case */
    double ms;       /* sum of count x median */
    double lo, hi;   /* sums of count x the median's interval bounds */
    int unconverged; /* cases whose cell did not converge */
    int64_t calls;
    int missing; /* cases without a usable median */
} xtool__total;

/* One total per device x thread count x algorithm (in the results' order), then
 * per device x thread count the fastest algorithm of each case. Returns the count. */
static int xtool__totals(const xtool_bench_report *rep, xtool__total *t, int cap)
{
    const xtool_cases_file *cf = rep->cases_file;
    int n = 0;
    for (int i = 0; i < rep->n_results; i++) {
        const xtool_bench_result *r = &rep->results[i];
        int k = 0;
        while (k < n &&
               !(t[k].device == r->device && t[k].threads == r->threads && t[k].algo == r->algo))
            k++;
        if (k == n && n < cap) {
            memset(&t[n], 0, sizeof t[n]);
            t[n].device = r->device;
            t[n].threads = r->threads;
            t[n].algo = r->algo;
            n++;
        }
    }
    int n_algo = n;
    for (int k = 0; k < n_algo; k++) {
        int j = n_algo;
        while (j < n && !(t[j].device == t[k].device && t[j].threads == t[k].threads))
            j++;
        if (j == n && n < cap) {
            memset(&t[n], 0, sizeof t[n]);
            t[n].device = t[k].device;
            t[n].threads = t[k].threads;
            t[n].algo = XATTN_ALGO_COUNT;
            n++;
        }
    }
    for (int k = 0; k < n; k++) {
        for (int ci = 0; ci < rep->n_cases && ci < cf->n; ci++) {
            const xtool_cell *best = NULL;
            for (int i = 0; i < rep->n_results; i++) {
                const xtool_bench_result *r = &rep->results[i];
                if (r->case_idx != ci || r->device != t[k].device || r->threads != t[k].threads ||
                    (t[k].algo != XATTN_ALGO_COUNT && r->algo != t[k].algo))
                    continue;
                if (r->status == XTOOL_CELL_OK && r->cell.t.n > 0 &&
                    (!best || r->cell.t.median < best->t.median))
                    best = &r->cell;
            }
            if (!best)
                t[k].missing++;
            else {
                double count = (double)cf->entries[ci].count;
                t[k].ms += best->t.median * count;
                t[k].lo += best->t.ci_low * count;
                t[k].hi += best->t.ci_high * count;
                t[k].unconverged += !best->converged;
                t[k].calls += cf->entries[ci].count;
            }
        }
    }
    return n;
}

#define XTOOL__MAX_TOTALS 256

void xtool_cases_summary_print(const xtool_bench_report *rep, FILE *out)
{
    const xtool_cases_file *cf = rep->cases_file;
    if (!cf)
        return;
    xtool__total t[XTOOL__MAX_TOTALS];
    int n = xtool__totals(rep, t, XTOOL__MAX_TOTALS);
    fprintf(out,
            "\nmodel    %s%s%lld attention calls per forward in %d case%s (%s); per device and "
            "algorithm, each case's median x its count, summed (interval: the cases' intervals "
            "x their counts, summed; device clock):\n",
            cf->model[0] ? cf->model : "", cf->model[0] ? ": " : "", (long long)cf->calls, cf->n,
            cf->n == 1 ? "" : "s", cf->path[0] ? cf->path : "the cases file");
    fprintf(out, "%-9s %-8s %3s %8s %14s %25s %9s\n", "device", "algo", "thr", "calls",
            "ms/forward", "interval", "vs best");
    for (int k = 0; k < n; k++) {
        const xtool_bench_device *d = &rep->devices[t[k].device];
        char dev[32], thr[16];
        xtool_target_name(d->t.backend, d->t.device, dev, sizeof dev);
        if (t[k].threads > 0)
            snprintf(thr, sizeof thr, "%d", t[k].threads);
        else
            snprintf(thr, sizeof thr, "-");
        const char *algo = t[k].algo == XATTN_ALGO_COUNT ? "best" : xattn_algo_name(t[k].algo);
        if (t[k].missing) {
            fprintf(out,
                    "%-9s %-8s %3s %8lld %14s  incomplete: %d case%s failed, unsupported or "
                    "skipped\n",
                    dev, algo, thr, (long long)t[k].calls, "-", t[k].missing,
                    t[k].missing == 1 ? "" : "s");
            continue;
        }
        const xtool__total *best = NULL;
        for (int j = 0; j < n; j++)
            if (t[j].device == t[k].device && t[j].threads == t[k].threads &&
                t[j].algo == XATTN_ALGO_COUNT && !t[j].missing)
                best = &t[j];
        char vs[96] = "", iv[64];
        if (t[k].algo == XATTN_ALGO_COUNT)
            snprintf(vs, sizeof vs, "(the fastest algorithm of each case)");
        else if (best && best->ms > 0) {
            double ratio;
            xtool_verdict v = xtool_stats_verdict_ci(best->lo, best->ms, best->hi, t[k].lo, t[k].ms,
                                                     t[k].hi, &ratio);
            snprintf(vs, sizeof vs, "%8.2fx%s", ratio,
                     v == XTOOL_VERDICT_NOISE ? " (within noise)" : "");
        }
        snprintf(iv, sizeof iv, "[%.4f, %.4f]", t[k].lo, t[k].hi);
        fprintf(out, "%-9s %-8s %3s %8lld %14.4f %25s %s%s\n", dev, algo, thr,
                (long long)t[k].calls, t[k].ms, iv, vs,
                t[k].unconverged ? "  ~ a case did not converge" : "");
    }
}

void xtool_cases_summary_json(const xtool_bench_report *rep, FILE *f)
{
    const xtool_cases_file *cf = rep->cases_file;
    fprintf(f, "{\"schema\": \"%s\", \"path\": ", XTOOL_CASES_SCHEMA);
    xattn__json_str(f, cf->path);
    fprintf(f, ", \"model\": ");
    xattn__json_str(f, cf->model);
    fprintf(f, ", \"file_cases\": %d, \"calls\": %lld,\n    \"cases\": [", cf->n_file_cases,
            (long long)cf->calls);
    for (int i = 0; i < cf->n && i < rep->n_cases; i++) {
        const xtool_case *c = &rep->cases[i].c;
        fprintf(f, "%s\n      {\"case\": ", i ? "," : "");
        xattn__json_str(f, rep->cases[i].key);
        fprintf(f, ", \"name\": ");
        xattn__json_str(f, cf->entries[i].name);
        fprintf(f,
                ", \"count\": %lld, \"line\": %d, \"batch\": %lld, \"heads\": %lld, "
                "\"kv_heads\": %lld, \"sq\": %lld, \"sk\": %lld, \"head_dim\": %lld, "
                "\"head_dim_v\": %lld, \"dtype\": \"%s\", \"kv_dtype\": \"%s\"}",
                (long long)cf->entries[i].count, cf->entries[i].line, (long long)c->batch,
                (long long)c->heads, (long long)c->kv_heads, (long long)c->sq, (long long)c->sk,
                (long long)c->head_dim, (long long)c->head_dim_v, xattn_dtype_name(c->dtype),
                xattn_dtype_name(c->kv_dtype));
    }
    fprintf(f, "\n    ],\n    \"totals\": [");
    xtool__total t[XTOOL__MAX_TOTALS];
    int n = xtool__totals(rep, t, XTOOL__MAX_TOTALS);
    for (int k = 0; k < n; k++) {
        const xtool_bench_device *d = &rep->devices[t[k].device];
        fprintf(f,
                "%s\n      {\"backend\": \"%s\", \"device\": %d, \"algo\": \"%s\", \"threads\": ",
                k ? "," : "", xattn_backend_name(d->t.backend), d->t.device,
                t[k].algo == XATTN_ALGO_COUNT ? "best" : xattn_algo_name(t[k].algo));
        if (t[k].threads > 0)
            fprintf(f, "%d", t[k].threads);
        else
            fputs("null", f);
        fprintf(f, ", \"calls\": %lld, \"missing_cases\": %d, \"ms_per_forward\": ",
                (long long)t[k].calls, t[k].missing);
        if (t[k].missing)
            fputs("null, \"ms_low\": null, \"ms_high\": null", f);
        else {
            xattn__json_num(f, t[k].ms);
            xtool_json_field(f, "ms_low", t[k].lo);
            xtool_json_field(f, "ms_high", t[k].hi);
        }
        fprintf(f, ", \"unconverged_cases\": %d}", t[k].unconverged);
    }
    fprintf(f, "\n    ]}");
}
