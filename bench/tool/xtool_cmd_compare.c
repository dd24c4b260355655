/*
 * xattn compare A.json B.json ...: the cells of bench result files matched by
 * (backend, device index, algorithm, case), each file against the first. A
 * difference is real only beyond both runs' noise (xtool_stats_verdict). The
 * plan is reading the files (xtool_compare_read.c); here, matching each file
 * against the first and the report: the table, the CSV and the chart.
 * The files are read with the tool's JSON reader (xtool_compare_read.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"
#include "xtool_svg.h"

#include "xtool_compare_read.h"

/* xtool__cmp_load's answer when every file is a profile.json. */
#define XTOOL__PROFILES 100

/* Reads and parses one result file: 0, or an exit status with err set (2 for
 * a file that cannot be read or is not a bench result file). A profile.json
 * (schema xattn.profile/N) is not parsed: *profile set, its text kept in
 * *keep (the caller frees it). */
static int xtool__load(const char *path, xtool_cmp_file *f, int *profile, char **keep, char *err,
                       size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    *profile = 0;
    char *text = xtool_read_text(path, XTOOL_CMP_MAX_BYTES, err, errlen);
    if (!text)
        return XTOOL_EXIT_USAGE;
    int rc = xtool_cmp_parse(text, strlen(text), path, f, err, errlen);
    if (rc == XTOOL_EXIT_USAGE && strstr(err, "(schema \"xattn.profile/")) {
        *profile = 1;
        *keep = text;
        return 0;
    }
    free(text);
    return rc;
}

/* The load a file recorded (bench writes /proc/loadavg at its start and end). */
static void xtool__print_load(const xtool_cmp_file *f)
{
    if (!f->has_load || !isfinite(f->load_start[0]) || !isfinite(f->load_end[0])) {
        printf("   load not recorded in this file\n");
        return;
    }
    printf("   load %.2f at the start, %.2f at the end (1-minute average", f->load_start[0],
           f->load_end[0]);
    if (f->load_cpus > 0)
        printf(", %d CPUs", f->load_cpus);
    printf(")\n");
}

/* 1 when the files' mean 1-minute loads differ by more than a quarter of the
 * CPUs (or by more than 1 where the count is unknown). */
static int xtool__loads_differ(const xtool_cmp_file *files, int nf)
{
    double lo = INFINITY, hi = -INFINITY;
    int cpus = 0;
    for (int i = 0; i < nf; i++) {
        const xtool_cmp_file *f = &files[i];
        if (!f->has_load || !isfinite(f->load_start[0]) || !isfinite(f->load_end[0]))
            continue;
        double m = 0.5 * (f->load_start[0] + f->load_end[0]);
        lo = fmin(lo, m);
        hi = fmax(hi, m);
        if (f->load_cpus > cpus)
            cpus = f->load_cpus;
    }
    return hi - lo > (cpus > 0 ? 0.25 * cpus : 1.0);
}

/* Where the matched cells go besides the table: the CSV file and the chart's bars. */
typedef struct xtool__cmp_out {
    FILE *csv;
    xtool_ratio_bar *bars; /* NULL: no chart */
    char (*shown)[400];    /* the bars' labels, "device|algo|case" */
    char (*groups)[64];    /* "B vs A", per file */
    int nb, flagged;
} xtool__cmp_out;

static void xtool__cmp_csv(FILE *csv, const xtool_cmp_file *a, const xtool_cmp_file *b,
                           const xtool_cmp_cell *ca, const xtool_cmp_cell *cb, double ratio,
                           xtool_verdict v, int merr)
{
    xattn__csv_str(csv, a->path);
    fputc(',', csv);
    xattn__csv_str(csv, b->path);
    fprintf(csv, ",%s,%s,", ca->device, ca->algo);
    xattn__csv_str(csv, ca->label);
    const double nums[5] = {ca->median, cb->median, ratio, ca->spread, cb->spread};
    for (int k = 0; k < 5; k++) {
        fputc(',', csv);
        xattn__csv_num(csv, nums[k]);
    }
    fprintf(csv, ",%s,%d,", xtool_verdict_name(v), merr);
    xattn__csv_str(csv, ca->kernel);
    fputc(',', csv);
    xattn__csv_str(csv, cb->kernel);
    int ci = ca->has_ci && cb->has_ci;
    const double iv[4] = {ca->ci_low, ca->ci_high, cb->ci_low, cb->ci_high};
    for (int k = 0; k < 4; k++) {
        fputc(',', csv);
        if (ci)
            xattn__csv_num(csv, iv[k]);
    }
    fprintf(csv, ",%s\n", ci ? "interval" : "min-p90");
}

/* One matched cell: its row, its CSV line, its bar. A share of a ceiling
 * above 100% in either file is a model error: flagged, never shown as a
 * figure. A different kernel variant is worth knowing when reading the ratio. */
static void xtool__cmp_row(xtool__cmp_out *out, const xtool_cmp_file *a, const xtool_cmp_file *b,
                           int fi, int nf, const xtool_cmp_cell *ca, const xtool_cmp_cell *cb,
                           double ratio, xtool_verdict v)
{
    int merr = xtool_cmp_cell_model_error(ca) || xtool_cmp_cell_model_error(cb);
    out->flagged += merr;
    char kern[96] = "";
    if (ca->kernel[0] && cb->kernel[0] && strcmp(ca->kernel, cb->kernel))
        snprintf(kern, sizeof kern, "  (kernel %s -> %s)", ca->kernel, cb->kernel);
    printf("%-9s %-8s %-50.50s %11.4f %11.4f %7.3fx  %s%s%s\n", ca->device, ca->algo, ca->label,
           ca->median, cb->median, ratio,
           v == XTOOL_VERDICT_NOISE ? "~ (within noise)" : xtool_verdict_name(v), merr ? "  !" : "",
           kern);
    if (out->csv)
        xtool__cmp_csv(out->csv, a, b, ca, cb, ratio, v, merr);
    if (!out->bars)
        return;
    snprintf(out->shown[out->nb], sizeof out->shown[out->nb], "%s|%s|%s", ca->device, ca->algo,
             ca->label);
    xtool_ratio_bar *bar = &out->bars[out->nb];
    bar->label = out->shown[out->nb++];
    bar->group = nf > 2 ? out->groups[fi] : "";
    bar->ratio = ratio;
    double noise = ca->spread + cb->spread;
    if (ca->has_ci && cb->has_ci && ca->median > 0 && cb->median > 0)
        noise = 0.5 *
                ((ca->ci_high - ca->ci_low) / ca->median + (cb->ci_high - cb->ci_low) / cb->median);
    bar->lo = 1.0 - noise > 0.01 ? 1.0 - noise : 0.01;
    bar->hi = 1.0 + noise;
    bar->verdict = (int)v;
}

/* File fi against the first: the table and its summary. Returns the number
 * of cells really slower. */
static int xtool__cmp_pair(xtool__cmp_out *out, const xtool_cmp_file *files, int fi, int nf)
{
    const xtool_cmp_file *a = &files[0], *b = &files[fi];
    char grp = (char)('A' + fi);
    if (out->groups)
        snprintf(out->groups[fi], sizeof out->groups[fi], "%c vs A", grp);
    printf("\n%c vs A (ratio = %c median / A median, on the device clock; faster or slower only "
           "where the two medians' confidence intervals separate, else within noise; a cell of a "
           "file written before the intervals falls back to the older rule: [min, p90] intervals "
           "disjoint and |ratio - 1| > both spreads):\n",
           grp, grp);
    char bms[16];
    snprintf(bms, sizeof bms, "%c ms", grp);
    printf("%-9s %-8s %-50s %11s %11s %8s  %s\n", "device", "algo", "case", "A ms", bms, "ratio",
           "verdict");
    int matched = 0, faster = 0, slower = 0, only_a = 0, only_b = 0, unusable = 0, old_rule = 0;
    double logsum = 0;
    for (int ci = 0; ci < a->n; ci++) {
        const xtool_cmp_cell *ca = &a->cells[ci];
        const xtool_cmp_cell *cb = xtool_cmp_find(b, ca, NULL);
        if (!cb || !ca->ok || !cb->ok) {
            only_a += !cb;
            unusable += cb != NULL;
            /* a non-positive median: said, never turned into a ratio */
            const xtool_cmp_cell *np = !cb                                         ? NULL
                                       : isfinite(ca->median) && !(ca->median > 0) ? ca
                                       : isfinite(cb->median) && !(cb->median > 0) ? cb
                                                                                   : NULL;
            if (np)
                printf("%-9s %-8s %-50.50s  not compared: the %c median is %.4g ms, not > 0\n",
                       ca->device, ca->algo, ca->label, np == ca ? 'A' : grp, np->median);
            continue;
        }
        double ratio;
        xtool_verdict v;
        if (ca->has_ci && cb->has_ci) {
            v = xtool_stats_verdict_ci(ca->ci_low, ca->median, ca->ci_high, cb->ci_low, cb->median,
                                       cb->ci_high, &ratio);
        } else {
            old_rule++;
            v = xtool_stats_verdict(ca->min, ca->median, ca->p90, ca->spread, cb->min, cb->median,
                                    cb->p90, cb->spread, &ratio);
        }
        matched++;
        faster += v == XTOOL_VERDICT_FASTER;
        slower += v == XTOOL_VERDICT_SLOWER;
        if (ratio > 0 && isfinite(ratio))
            logsum += log(ratio);
        xtool__cmp_row(out, a, b, fi, nf, ca, cb, ratio, v);
    }
    for (int ci = 0; ci < b->n; ci++)
        only_b += xtool_cmp_find(a, &b->cells[ci], NULL) == NULL;
    printf("%c vs A: %d matched: %d faster, %d slower, %d within noise; geometric mean ratio "
           "%.3f; %d only in A, %d only in %c, %d without a result in one of them\n",
           grp, matched, faster, slower, matched - faster - slower,
           matched ? exp(logsum / matched) : 1.0, only_a, only_b, grp, unusable);
    if (old_rule)
        printf("%c vs A: %d of %d matched cell%s judged by the older [min, p90] rule: %s\n", grp,
               old_rule, matched, old_rule == 1 ? "" : "s",
               "a file without the medians' intervals (ci_low, ci_high), written by an older "
               "xattn bench");
    if (matched == 0)
        printf("%c vs A: no cell in common (same backend, device index, algorithm and case)\n",
               grp);
    return slower;
}

/* The files' headers, and the drift that compare cannot see. */
static void xtool__cmp_header(const xtool_cmp_file *files, int nf)
{
    for (int i = 0; i < nf; i++) {
        printf("%c: %s (%s, %s; %s)\n", 'A' + i, files[i].path, files[i].host, files[i].created,
               files[i].devices);
        xtool__print_load(&files[i]);
    }
    /* Two separate runs: the spread inside each is measured, the drift of the
     * machine between them is not, and a busy hour moves every cell alike. */
    printf("note: each file is a separate run; compare measures the spread inside each run but "
           "not the machine's drift between them%s, so a verdict holds only if the machine was "
           "as quiet for every run. To measure a change, alternate the two builds cell by cell: "
           "xattn bench --ab OLD_XATTN (with the same options).\n",
           xtool__loads_differ(files, nf) ? " (and the loads above differ)" : "");
}

/* The files read, the outputs checked writable: 0 or an exit status with
 * the message printed (the files freed). */
static int xtool__cmp_load(const xtool_cli_opts *o, xtool_cmp_file *files, int *nf, char **texts)
{
    int profiles = 0;
    char err[1024];
    *nf = 0;
    if ((o->svg_path && xtool_out_probe("--svg", o->svg_path, NULL, err, sizeof err)) ||
        (o->csv_path && xtool_out_probe("--csv", o->csv_path, NULL, err, sizeof err))) {
        fprintf(stderr, "%s: compare: %s\n", xtool_prog, err);
        return XTOOL_EXIT_USAGE;
    }
    for (int i = 0; i < o->n_files; i++) {
        err[0] = '\0';
        int is_profile = 0;
        int lrc = xtool__load(o->files[i], &files[*nf], &is_profile, &texts[i], err, sizeof err);
        profiles += is_profile;
        if (!lrc && profiles && profiles != i + 1) {
            snprintf(err, sizeof err,
                     "cannot compare a profile.json (schema xattn.profile/1) with a bench result "
                     "file (results.json): give files of one kind (%s)",
                     o->files[i]);
            lrc = XTOOL_EXIT_USAGE;
        }
        if (lrc) {
            for (int j = 0; j <= i; j++) {
                free(texts[j]);
                texts[j] = NULL;
            }
            fprintf(stderr, "%s: compare: %s\n", xtool_prog, err);
            xtool_cmp_free(&files[*nf]);
            for (int j = 0; j < *nf; j++)
                xtool_cmp_free(&files[j]);
            return lrc;
        }
        ++*nf;
    }
    if (profiles > 0) { /* every file a profile.json: none parsed here */
        for (int j = 0; j < *nf; j++)
            xtool_cmp_free(&files[j]);
        *nf = 0;
        return XTOOL__PROFILES;
    }
    return 0;
}

/* The CSV's header and the chart's arrays. Returns 0 or XTOOL_EXIT_FAIL. */
static int xtool__cmp_open(const xtool_cli_opts *o, const xtool_cmp_file *files, int nf,
                           xtool__cmp_out *out)
{
    memset(out, 0, sizeof *out);
    if (o->csv_path) {
        out->csv = fopen(o->csv_path, "w");
        if (!out->csv) {
            fprintf(stderr, "%s: compare: cannot write '%s'\n", xtool_prog, o->csv_path);
            return XTOOL_EXIT_FAIL;
        }
        fputs("file_a,file_b,device,algo,case,a_median_ms,b_median_ms,ratio,a_spread,b_spread,"
              "verdict,model_error,a_kernel,b_kernel,a_ci_low,a_ci_high,b_ci_low,b_ci_high,rule\n",
              out->csv);
    }
    int cap = 0;
    for (int i = 1; i < nf; i++)
        cap += files[0].n;
    out->bars = calloc((size_t)(cap ? cap : 1), sizeof *out->bars);
    out->shown = calloc((size_t)(cap ? cap : 1), sizeof *out->shown);
    out->groups = calloc((size_t)(nf ? nf : 1), sizeof *out->groups);
    if (!out->bars || !out->shown || !out->groups) {
        free(out->bars);
        free(out->shown);
        out->bars = NULL; /* no chart, the table still */
        out->shown = NULL;
    }
    return 0;
}

/* The chart of the ratios (labels "device|algo|case"). Returns 0 or XTOOL_EXIT_FAIL. */
static int xtool__cmp_chart(const xtool_cli_opts *o, const xtool_cmp_file *files, int nf,
                            const xtool__cmp_out *out)
{
    char title[256], err[1024];
    snprintf(title, sizeof title, "xattn compare: %d file%s against %s", nf - 1, nf > 2 ? "s" : "",
             files[0].path);
    if (xtool_svg_ratio_chart(o->svg_path, title, out->bars, out->nb, err, sizeof err)) {
        fprintf(stderr, "%s: compare: %s\n", xtool_prog, err);
        return XTOOL_EXIT_FAIL;
    }
    printf("written  %s\n", o->svg_path);
    return 0;
}

/* ---- profile.json: a model's attention before and after ----------------------------- */

static const char *xtool__prof_from_name(xtool_prof_from f)
{
    switch (f) {
    case XTOOL_PROF_CI: return "";
    case XTOOL_PROF_SAMPLES: return "s";
    default: return "p";
    }
}

/* One figure of two profiles: its row. Returns the verdict (-1 not judged). */
static int xtool__prof_row(const char *what, const xtool_prof_stat *a, const xtool_prof_stat *b,
                           int share, int *fallbacks)
{
    printf("%-36.36s ", what);
    if (!a->ok || !b->ok) {
        printf("not compared: %s in %s\n", !a->ok ? a->why : b->why, !a->ok ? "A" : "B");
        return -1;
    }
    if (a->clock[0] && b->clock[0] && strcmp(a->clock, b->clock)) {
        printf("not compared: A on the %s clock, B on the %s clock\n", a->clock, b->clock);
        return -1;
    }
    double ratio;
    xtool_verdict v =
        xtool_stats_verdict_ci(a->lo, a->median, a->hi, b->lo, b->median, b->hi, &ratio);
    const double k = share ? 100.0 : 1.0;
    char ia[64], ib[64];
    snprintf(ia, sizeof ia, "[%.4g, %.4g]%s", k * a->lo, k * a->hi, xtool__prof_from_name(a->from));
    snprintf(ib, sizeof ib, "[%.4g, %.4g]%s", k * b->lo, k * b->hi, xtool__prof_from_name(b->from));
    *fallbacks |= (1 << a->from) | (1 << b->from);
    const char *word = v == XTOOL_VERDICT_NOISE    ? "~ (within noise)"
                       : v == XTOOL_VERDICT_FASTER ? (share ? "lower" : "faster")
                                                   : (share ? "higher" : "slower");
    printf("%10.4g %-23s %10.4g %-23s %7.3fx  %s\n", k * a->median, ia, k * b->median, ib, ratio,
           word);
    return (int)v;
}

/* A profile's line in the header. */
static void xtool__prof_header(char tag, const xtool_prof_file *f)
{
    printf("%c: %s (model %s, device %s, xattn %s", tag, f->path, f->model[0] ? f->model : "?",
           f->device[0] ? f->device : "?", f->version[0] ? f->version : "?");
    if (f->calls >= 0)
        printf(", %d attention calls per forward", f->calls);
    printf(")\n");
}

/* The layers of a that b has too. */
static int xtool__prof_common(const xtool_prof_file *a, const xtool_prof_file *b)
{
    int common = 0;
    for (int i = 0; i < a->n_layers; i++)
        common += xtool_prof_find(b, a->layers[i].name) != NULL;
    return common;
}

/* 0 when a and b are profiles of one model (the same name where both say it,
 * and a layer in common where both have layers); else -1, the message printed. */
static int xtool__prof_same_model(const xtool_prof_file *a, const xtool_prof_file *b)
{
    int common = xtool__prof_common(a, b);
    if ((a->model[0] && b->model[0] && strcmp(a->model, b->model)) ||
        (a->n_layers > 0 && b->n_layers > 0 && common == 0)) {
        fprintf(stderr,
                "%s: compare: %s and %s are profiles of different models (\"%s\" and \"%s\"; "
                "%d layer%s in common): compare profiles of one model, before and after a "
                "change\n",
                xtool_prog, a->path, b->path, a->model, b->model, common, common == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

/* Profile fi against the first (of one model). Returns the count of figures
 * really slower (attention time per forward and per layer). */
static int xtool__prof_pair(const xtool_prof_file *a, const xtool_prof_file *b, int fi)
{
    char grp = (char)('A' + fi);
    int common = xtool__prof_common(a, b);
    printf("\n%c vs A (ratio = %c median / A median; faster or slower only where the medians' "
           "intervals separate, else within noise; shares in %% of the forward):\n",
           grp, grp);
    char bm[16], bi[24];
    snprintf(bm, sizeof bm, "%c median", grp);
    snprintf(bi, sizeof bi, "%c interval", grp);
    printf("%-36s %10s %-23s %10s %-23s %8s  %s\n", "figure", "A median", "A interval", bm, bi,
           "ratio", "verdict");
    int fallbacks = 0, slower = 0, faster = 0, noise = 0, layers = 0;
    int v = xtool__prof_row("attention ms per forward", &a->attention_ms, &b->attention_ms, 0,
                            &fallbacks);
    int total_slower = v == XTOOL_VERDICT_SLOWER;
    xtool__prof_row("attention share of the forward, %", &a->attention_share, &b->attention_share,
                    1, &fallbacks);
    for (int i = 0; i < a->n_layers; i++) {
        const xtool_prof_layer *lb = xtool_prof_find(b, a->layers[i].name);
        if (!lb)
            continue;
        char what[200];
        snprintf(what, sizeof what, "layer %s ms", a->layers[i].name);
        v = xtool__prof_row(what, &a->layers[i].attn, &lb->attn, 0, &fallbacks);
        layers++;
        slower += v == XTOOL_VERDICT_SLOWER;
        faster += v == XTOOL_VERDICT_FASTER;
        noise += v == XTOOL_VERDICT_NOISE;
    }
    printf("%c vs A: %d layer%s matched: %d faster, %d slower, %d within noise, %d not compared; "
           "%d only in A, %d only in %c\n",
           grp, layers, layers == 1 ? "" : "s", faster, slower, noise,
           layers - faster - slower - noise, a->n_layers - common, b->n_layers - common, grp);
    if (fallbacks & (1 << XTOOL_PROF_SAMPLES))
        printf("s        interval computed here from the file's samples (a file without ci_low, "
               "ci_high)\n");
    if (fallbacks & (1 << XTOOL_PROF_MIN_P90))
        printf("p        [min, p90] stands in for the interval: a file without ci_low, ci_high "
               "or samples (an older profile); a weaker rule than the confidence interval\n");
    if (a->calls >= 0 && b->calls >= 0 && a->calls != b->calls)
        printf("note     A makes %d attention calls per forward, %c %d\n", a->calls, grp, b->calls);
    return slower + total_slower;
}

/* compare on profile.json files: each against the first. */
static int xtool__cmp_profiles(const xtool_cli_opts *o, char **texts)
{
    if (o->svg_path || o->csv_path) {
        fprintf(stderr,
                "%s: compare: --svg and --csv are for bench result files, not for "
                "profile.json\n",
                xtool_prog);
        return XTOOL_EXIT_USAGE;
    }
    xtool_prof_file files[XTOOL_CLI_MAX_FILES];
    int nf = 0, rc = XTOOL_EXIT_OK, slower = 0;
    char err[1024];
    for (int i = 0; i < o->n_files && rc == XTOOL_EXIT_OK; i++) {
        int prc =
            xtool_prof_parse(texts[i], strlen(texts[i]), o->files[i], &files[nf], err, sizeof err);
        nf++;
        if (prc) {
            fprintf(stderr, "%s: compare: %s\n", xtool_prog, err);
            rc = prc;
        }
    }
    for (int fi = 1; fi < nf && rc == XTOOL_EXIT_OK; fi++)
        if (xtool__prof_same_model(&files[0], &files[fi]))
            rc = XTOOL_EXIT_USAGE;
    if (rc == XTOOL_EXIT_OK) {
        for (int i = 0; i < nf; i++)
            xtool__prof_header((char)('A' + i), &files[i]);
        printf("clock    each figure on the clock its file names (\"clock\"), else the attention "
               "calls' wall time inside the forward as the profile took it; a figure whose files "
               "name different clocks is not compared\n");
        for (int fi = 1; fi < nf; fi++)
            slower += xtool__prof_pair(&files[0], &files[fi], fi);
        if (rc == XTOOL_EXIT_OK && o->fail_on_slower && slower)
            rc = XTOOL_EXIT_FAIL;
    }
    for (int i = 0; i < nf; i++)
        xtool_prof_free(&files[i]);
    return rc;
}

int xtool_cmd_compare(const xtool_cli_opts *o)
{
    xtool_cmp_file files[XTOOL_CLI_MAX_FILES];
    int nf;
    char *texts[XTOOL_CLI_MAX_FILES] = {0};
    int rc = xtool__cmp_load(o, files, &nf, texts);
    if (rc == XTOOL__PROFILES) {
        rc = xtool__cmp_profiles(o, texts);
        for (int i = 0; i < o->n_files; i++)
            free(texts[i]);
        return rc;
    }
    if (rc)
        return rc;
    xtool__cmp_out out;
    rc = xtool__cmp_open(o, files, nf, &out);
    int slower = 0;
    if (!rc) {
        xtool__cmp_header(files, nf);
        for (int fi = 1; fi < nf; fi++)
            slower += xtool__cmp_pair(&out, files, fi, nf);
        if (out.flagged)
            printf("!        %d matched cell%s marked '!' report%s a share of a ceiling above "
                   "100%% in one of the files: %s\n",
                   out.flagged, out.flagged == 1 ? "" : "s", out.flagged == 1 ? "s" : "",
                   XTOOL_MODEL_ERROR_NOTE);
        if (out.csv && fclose(out.csv) != 0) {
            fprintf(stderr, "%s: compare: cannot write '%s'\n", xtool_prog, o->csv_path);
            rc = XTOOL_EXIT_FAIL;
        }
        if (o->svg_path && out.bars && xtool__cmp_chart(o, files, nf, &out))
            rc = XTOOL_EXIT_FAIL;
        if (o->fail_on_slower && slower && rc == XTOOL_EXIT_OK)
            rc = XTOOL_EXIT_FAIL;
    }
    free(out.bars);
    free(out.groups);
    free(out.shown);
    for (int j = 0; j < nf; j++)
        xtool_cmp_free(&files[j]);
    return rc;
}
