/*
 * xattn compare A.json B.json ...: the cells of bench result files matched by
 * (backend, device index, algorithm, case), each file against the first. A
 * difference is real only beyond both runs' noise (xattn_stats_verdict).
 * JSON is read with jansson; without it, compare says it is not available.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_out_svg.h"
#include "xattn_tool.h"

#ifndef XATTN_TOOL_HAVE_JANSSON

int xattn_cmd_compare(const xattn_cli_opts *o)
{
    (void)o;
    fprintf(stderr,
            "%s: compare is not available in this build: it reads JSON with jansson, which was "
            "not found when xattn was configured (Debian: apt-get install libjansson-dev, then "
            "configure again)\n",
            xattn_prog);
    return XATTN_EXIT_FAIL;
}

#else
#include <jansson.h>

typedef struct xattn__cmp_cell {
    char key[512];   /* "cpu:0|flash|B1 H8/2 ..." */
    char device[32]; /* "cpu:0" */
    char algo[16];
    char label[320]; /* the case */
    int threads;     /* CPU worker threads of the cell; 0 = not recorded (older files, GPUs) */
    char shown[512]; /* "cpu:0 t2|flash|B1 ...": the chart's bar label */
    int ok;          /* status ok with a median */
    double median, min, p90, spread;
} xattn__cmp_cell;

typedef struct xattn__cmp_file {
    const char *path;
    char created[40], host[128], devices[512];
    xattn__cmp_cell *cells;
    int n;
} xattn__cmp_file;

static const char *xattn__jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double xattn__jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Loads a bench result file. Returns 0, or an exit status with err set. */
static int xattn__load(const char *path, xattn__cmp_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) {
        snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
        return XATTN_EXIT_USAGE;
    }
    const char *schema = xattn__jstr(doc, "schema");
    if (strncmp(schema, "xattn.bench/1", 13) != 0) {
        snprintf(err, errlen,
                 "%s: not an xattn bench result (schema \"%s\", expected \"xattn.bench/1\"; "
                 "bench writes it as DIR/results.json)",
                 path, schema);
        json_decref(doc);
        return XATTN_EXIT_USAGE;
    }
    json_t *results = json_object_get(doc, "results");
    if (!json_is_array(results)) {
        snprintf(err, errlen, "%s: no \"results\" array", path);
        json_decref(doc);
        return XATTN_EXIT_USAGE;
    }
    snprintf(f->created, sizeof f->created, "%s", xattn__jstr(doc, "created_utc"));
    snprintf(f->host, sizeof f->host, "%s", xattn__jstr(json_object_get(doc, "host"), "hostname"));
    size_t k = 0;
    json_t *d, *devs = json_object_get(doc, "devices");
    size_t i;
    json_array_foreach(devs, i, d)
    {
        if (k < sizeof f->devices)
            k += (size_t)snprintf(f->devices + k, sizeof f->devices - k, "%s%s:%d %s",
                                  i ? ", " : "", xattn__jstr(d, "backend"),
                                  (int)json_integer_value(json_object_get(d, "device")),
                                  xattn__jstr(d, "name"));
    }
    size_t n = json_array_size(results);
    f->cells = calloc(n ? n : 1, sizeof *f->cells);
    if (!f->cells) {
        json_decref(doc);
        snprintf(err, errlen, "out of memory");
        return XATTN_EXIT_FAIL;
    }
    json_t *r;
    json_array_foreach(results, i, r)
    {
        xattn__cmp_cell *c = &f->cells[f->n];
        if (!json_is_object(r))
            continue;
        snprintf(c->device, sizeof c->device, "%s:%d", xattn__jstr(r, "backend"),
                 (int)json_integer_value(json_object_get(r, "device")));
        snprintf(c->algo, sizeof c->algo, "%s", xattn__jstr(r, "algo"));
        snprintf(c->label, sizeof c->label, "%s", xattn__jstr(r, "case"));
        json_t *th = json_object_get(r, "threads");
        c->threads = json_is_integer(th) ? (int)json_integer_value(th) : 0;
        if (c->threads > 0) /* "cpu:0 t2": the thread count is part of where it ran */
            snprintf(c->device, sizeof c->device, "%s:%d t%d", xattn__jstr(r, "backend"),
                     (int)json_integer_value(json_object_get(r, "device")), c->threads);
        snprintf(c->key, sizeof c->key, "%s:%d|%s|%s", xattn__jstr(r, "backend"),
                 (int)json_integer_value(json_object_get(r, "device")), c->algo, c->label);
        snprintf(c->shown, sizeof c->shown, "%s|%s|%s", c->device, c->algo, c->label);
        c->median = xattn__jnum(r, "median_ms");
        c->min = xattn__jnum(r, "min_ms");
        c->p90 = xattn__jnum(r, "p90_ms");
        c->spread = xattn__jnum(r, "spread");
        c->ok = !strcmp(xattn__jstr(r, "status"), "ok") && isfinite(c->median) &&
                isfinite(c->min) && isfinite(c->p90);
        if (!isfinite(c->spread))
            c->spread = 0;
        f->n++;
    }
    json_decref(doc);
    return 0;
}

/* The cell of f that matches c: the same key (device, algorithm, case) and
 * the same thread count, or, where one of the two files did not record it
 * (files from before the thread axis), the first cell of that key. */
static const xattn__cmp_cell *xattn__find(const xattn__cmp_file *f, const xattn__cmp_cell *c)
{
    const xattn__cmp_cell *loose = NULL;
    for (int i = 0; i < f->n; i++) {
        const xattn__cmp_cell *x = &f->cells[i];
        if (strcmp(x->key, c->key))
            continue;
        if (x->threads == c->threads)
            return x;
        if (!loose && (x->threads == 0 || c->threads == 0))
            loose = x;
    }
    return loose;
}

int xattn_cmd_compare(const xattn_cli_opts *o)
{
    xattn__cmp_file files[XATTN_CLI_MAX_FILES];
    int nf = 0, rc = XATTN_EXIT_OK;
    char err[1024];
    for (int i = 0; i < o->n_files; i++) {
        int lrc = xattn__load(o->files[i], &files[nf], err, sizeof err);
        if (lrc) {
            fprintf(stderr, "%s: compare: %s\n", xattn_prog, err);
            for (int j = 0; j < nf; j++)
                free(files[j].cells);
            return lrc;
        }
        nf++;
    }
    FILE *csv = NULL;
    if (o->csv_path) {
        csv = fopen(o->csv_path, "w");
        if (!csv) {
            fprintf(stderr, "%s: compare: cannot write '%s'\n", xattn_prog, o->csv_path);
            for (int j = 0; j < nf; j++)
                free(files[j].cells);
            return XATTN_EXIT_FAIL;
        }
        fputs("file_a,file_b,device,algo,case,a_median_ms,b_median_ms,ratio,a_spread,b_spread,"
              "verdict\n",
              csv);
    }
    int cap = 0;
    for (int i = 1; i < nf; i++)
        cap += files[0].n;
    xattn_ratio_bar *bars = calloc((size_t)(cap ? cap : 1), sizeof *bars);
    char(*groups)[64] = calloc((size_t)(nf ? nf : 1), sizeof *groups);
    int nb = 0, slower_total = 0;
    for (int i = 0; i < nf; i++)
        printf("%c: %s (%s, %s; %s)\n", 'A' + i, files[i].path, files[i].host, files[i].created,
               files[i].devices);
    for (int fi = 1; fi < nf; fi++) {
        const xattn__cmp_file *a = &files[0], *b = &files[fi];
        char grp = (char)('A' + fi);
        if (groups)
            snprintf(groups[fi], sizeof groups[fi], "%c vs A", grp);
        printf("\n%c vs A (ratio = %c median / A median; real only when the [min, p90] intervals "
               "do not overlap and |ratio - 1| > both spreads):\n",
               grp, grp);
        char bms[16];
        snprintf(bms, sizeof bms, "%c ms", grp);
        printf("%-9s %-8s %-50s %11s %11s %8s  %s\n", "device", "algo", "case", "A ms", bms,
               "ratio", "verdict");
        int matched = 0, faster = 0, slower = 0, only_a = 0, only_b = 0, unusable = 0;
        double logsum = 0;
        for (int ci = 0; ci < a->n; ci++) {
            const xattn__cmp_cell *ca = &a->cells[ci];
            const xattn__cmp_cell *cb = xattn__find(b, ca);
            if (!cb) {
                only_a++;
                continue;
            }
            if (!ca->ok || !cb->ok) {
                unusable++;
                continue;
            }
            double ratio;
            xattn_verdict v = xattn_stats_verdict(ca->min, ca->median, ca->p90, ca->spread, cb->min,
                                                  cb->median, cb->p90, cb->spread, &ratio);
            matched++;
            faster += v == XATTN_VERDICT_FASTER;
            slower += v == XATTN_VERDICT_SLOWER;
            if (ratio > 0 && isfinite(ratio))
                logsum += log(ratio);
            printf("%-9s %-8s %-50.50s %11.4f %11.4f %7.3fx  %s\n", ca->device, ca->algo, ca->label,
                   ca->median, cb->median, ratio,
                   v == XATTN_VERDICT_NOISE ? "~ (within noise)" : xattn_verdict_name(v));
            if (csv) {
                xattn_csv_str(csv, a->path);
                fputc(',', csv);
                xattn_csv_str(csv, b->path);
                fprintf(csv, ",%s,%s,", ca->device, ca->algo);
                xattn_csv_str(csv, ca->label);
                fprintf(csv, ",%.9g,%.9g,%.9g,%.6g,%.6g,%s\n", ca->median, cb->median, ratio,
                        ca->spread, cb->spread, xattn_verdict_name(v));
            }
            if (bars) {
                xattn_ratio_bar *bar = &bars[nb++];
                bar->label = ca->shown;
                bar->group = nf > 2 && groups ? groups[fi] : "";
                bar->ratio = ratio;
                double noise = ca->spread + cb->spread;
                bar->lo = 1.0 - noise > 0.01 ? 1.0 - noise : 0.01;
                bar->hi = 1.0 + noise;
                bar->verdict = (int)v;
            }
        }
        for (int ci = 0; ci < b->n; ci++)
            only_b += xattn__find(a, &b->cells[ci]) == NULL;
        printf("%c vs A: %d matched: %d faster, %d slower, %d within noise; geometric mean ratio "
               "%.3f; %d only in A, %d only in %c, %d without a result in one of them\n",
               grp, matched, faster, slower, matched - faster - slower,
               matched ? exp(logsum / matched) : 1.0, only_a, only_b, grp, unusable);
        if (matched == 0)
            printf("%c vs A: no cell in common (same backend, device index, algorithm and case)\n",
                   grp);
        slower_total += slower;
    }
    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "%s: compare: cannot write '%s'\n", xattn_prog, o->csv_path);
        rc = XATTN_EXIT_FAIL;
    }
    if (o->svg_path && bars) {
        /* The bars' labels read "device|algo|case". */
        char title[256];
        snprintf(title, sizeof title, "xattn compare: %d file%s against %s", nf - 1,
                 nf > 2 ? "s" : "", files[0].path);
        if (xattn_svg_ratio_chart(o->svg_path, title, bars, nb, err, sizeof err)) {
            fprintf(stderr, "%s: compare: %s\n", xattn_prog, err);
            rc = XATTN_EXIT_FAIL;
        } else {
            printf("written  %s\n", o->svg_path);
        }
    }
    if (o->fail_on_slower && slower_total && rc == XATTN_EXIT_OK)
        rc = XATTN_EXIT_FAIL;
    free(bars);
    free(groups);
    for (int j = 0; j < nf; j++)
        free(files[j].cells);
    return rc;
}
#endif
