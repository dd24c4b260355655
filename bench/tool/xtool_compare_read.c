/* Bench result files read for `xattn compare`, and their cells matched by key
 * through a hash table (xtool_compare_read.h). */
#include "xtool_compare_read.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cli.h"
#include "xtool_json.h"
#include "xtool_stats.h"

/* A string of a file, as compare prints it: control characters (C0, DEL and
 * C1: ESC or CSI would drive the terminal) and bytes that are not UTF-8 become
 * \xHH or \u00HH, so a crafted name shows what it holds and does nothing.
 * Both files go through it, so keys still match. */
static void xtool__clean(char *dst, size_t cap, const char *src)
{
    size_t k = 0;
    if (!cap)
        return;
    for (const unsigned char *p = (const unsigned char *)src; *p && k + 7 < cap; p++) {
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
            k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", p[1]);
            p++;
            continue;
        }
        int cont = 0; /* a UTF-8 sequence: its continuation bytes */
        if (*p >= 0xc2 && *p <= 0xf4)
            cont = *p < 0xe0 ? 1 : *p < 0xf0 ? 2 : 3;
        int ok = *p >= 0x20 && *p != 0x7f && (*p < 0x80 || cont > 0);
        for (int i = 1; ok && i <= cont; i++)
            ok = (p[i] & 0xc0) == 0x80;
        if (!ok) {
            k += (size_t)snprintf(dst + k, cap - k, "\\x%02x", *p);
            continue;
        }
        if (k + (size_t)cont + 1 >= cap)
            break;
        for (int i = 0; i <= cont; i++)
            dst[k++] = (char)p[i];
        p += cont;
    }
    dst[k] = 0;
}

/* FNV-1a over the parts of the match key, with a separator between them. */
static unsigned xtool__hash(const xtool_cmp_cell *c)
{
    uint32_t h = 2166136261u;
    const char *parts[3] = {c->dev, c->algo, c->label};
    for (int i = 0; i < 3; i++) {
        for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++)
            h = (h ^ *p) * 16777619u;
        h = (h ^ 0x1fu) * 16777619u;
    }
    return h;
}

static int xtool__same_key(const xtool_cmp_cell *a, const xtool_cmp_cell *b)
{
    return a->hash == b->hash && !strcmp(a->dev, b->dev) && !strcmp(a->algo, b->algo) &&
           !strcmp(a->label, b->label);
}

/* Builds the table; chains keep the file's order (earlier cells first). */
static int xtool__index(xtool_cmp_file *f)
{
    unsigned nb = 16;
    while (nb < 2u * (unsigned)f->n && nb < (1u << 30))
        nb *= 2;
    f->bucket = malloc(nb * sizeof *f->bucket);
    f->next = malloc((size_t)(f->n ? f->n : 1) * sizeof *f->next);
    if (!f->bucket || !f->next)
        return -1;
    f->nbuckets = nb;
    int *tail = malloc(nb * sizeof *tail);
    if (!tail)
        return -1;
    for (unsigned i = 0; i < nb; i++)
        f->bucket[i] = tail[i] = -1;
    for (int i = 0; i < f->n; i++) {
        unsigned b = f->cells[i].hash & (nb - 1);
        f->next[i] = -1;
        if (tail[b] < 0)
            f->bucket[b] = i;
        else
            f->next[tail[b]] = i;
        tail[b] = i;
    }
    free(tail);
    return 0;
}

static void xtool__load_avg(const xtool_json *a, double out[3])
{
    for (int i = 0; i < 3; i++) {
        const xtool_json *v =
            a && a->type == XTOOL_JSON_ARRAY && (size_t)i < a->n ? &a->items[i] : NULL;
        out[i] = v && v->type == XTOOL_JSON_NUMBER ? v->number : NAN;
    }
}

/* The header: when the file was made, where, on which devices, under what load. */
static void xtool__header(const xtool_json *doc, xtool_cmp_file *f)
{
    xtool__clean(f->created, sizeof f->created, xtool_json_str_of(doc, "created_utc"));
    xtool__clean(f->host, sizeof f->host,
                 xtool_json_str_of(xtool_json_get(doc, "host"), "hostname"));
    size_t k = 0;
    const xtool_json *devs = xtool_json_get(doc, "devices");
    for (size_t i = 0; devs && devs->type == XTOOL_JSON_ARRAY && i < devs->n; i++) {
        const xtool_json *d = &devs->items[i];
        char be[64], name[256];
        xtool__clean(be, sizeof be, xtool_json_str_of(d, "backend"));
        xtool__clean(name, sizeof name, xtool_json_str_of(d, "name"));
        if (k < sizeof f->devices)
            k += (size_t)snprintf(f->devices + k, sizeof f->devices - k, "%s%s:%d %s",
                                  i ? ", " : "", be, xtool_json_int_of(d, "device", 0), name);
    }
    const xtool_json *load = xtool_json_get(doc, "load");
    if (load && load->type == XTOOL_JSON_OBJECT) {
        f->has_load = 1;
        f->load_cpus = xtool_json_int_of(load, "cpus", 0);
        xtool__load_avg(xtool_json_get(load, "start"), f->load_start);
        xtool__load_avg(xtool_json_get(load, "end"), f->load_end);
    }
}

/* One result object as compare uses it; fields of the wrong type read as absent. */
static void xtool__cell(const xtool_json *r, xtool_cmp_cell *c)
{
    int dev = xtool_json_int_of(r, "device", 0);
    char be[64];
    xtool__clean(be, sizeof be, xtool_json_str_of(r, "backend"));
    snprintf(c->dev, sizeof c->dev, "%.12s:%d", be, dev);
    xtool__clean(c->algo, sizeof c->algo, xtool_json_str_of(r, "algo"));
    xtool__clean(c->label, sizeof c->label, xtool_json_str_of(r, "case"));
    c->threads = xtool_json_int_of(r, "threads", 0);
    if (c->threads < 0)
        c->threads = 0;
    if (c->threads > 0) /* "cpu:0 t2": the thread count is part of where it ran */
        snprintf(c->device, sizeof c->device, "%s t%d", c->dev, c->threads);
    else
        snprintf(c->device, sizeof c->device, "%s", c->dev);
    c->median = xtool_json_num_of(r, "median_ms");
    c->min = xtool_json_num_of(r, "min_ms");
    c->p90 = xtool_json_num_of(r, "p90_ms");
    c->spread = xtool_json_num_of(r, "spread");
    /* A time is > 0: a median of 0 or below has no ratio (compare says so). */
    c->ok = !strcmp(xtool_json_str_of(r, "status"), "ok") && isfinite(c->median) && c->median > 0 &&
            isfinite(c->min) && isfinite(c->p90);
    if (!isfinite(c->spread))
        c->spread = 0;
    c->ci_low = xtool_json_num_of(r, "ci_low");
    c->ci_high = xtool_json_num_of(r, "ci_high");
    c->has_ci = c->ok && isfinite(c->ci_low) && isfinite(c->ci_high) && c->ci_low <= c->median &&
                c->median <= c->ci_high;
    c->pct_fma = xtool_json_num_of(r, "pct_fma_ceiling");
    c->pct_bw = xtool_json_num_of(r, "pct_bw_ceiling");
    c->pct_fma_per_thread = xtool_json_num_of(r, "pct_fma_per_thread");
    c->pct_bw_min = xtool_json_num_of(r, "pct_bw_min_ceiling");
    xtool__clean(c->kernel, sizeof c->kernel, xtool_json_str_of(r, "kernel"));
    const xtool_json *wc = xtool_json_get(r, "work_counted");
    c->work_counted = wc && wc->type == XTOOL_JSON_BOOL ? wc->boolean : -1;
    c->hash = xtool__hash(c);
}

int xtool_cmp_parse(const char *text, size_t len, const char *path, xtool_cmp_file *f, char *err,
                    size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    char jerr[256];
    xtool_json *doc = xtool_json_parse(text, len, jerr, sizeof jerr);
    if (!doc) {
        snprintf(err, errlen, "%s: not JSON: %s", path, jerr);
        return XTOOL_EXIT_USAGE;
    }
    const char *schema = xtool_json_str_of(doc, "schema");
    char shown[100];
    xtool__clean(shown, sizeof shown, schema);
    const xtool_json *results = xtool_json_get(doc, "results");
    int rc = 0;
    if (strncmp(schema, "xattn.bench/1", 13) != 0) {
        snprintf(err, errlen,
                 "%s: not an xattn bench result (schema \"%.80s\", expected \"xattn.bench/1\"; "
                 "bench writes it as DIR/results.json)",
                 path, shown);
        rc = XTOOL_EXIT_USAGE;
    } else if (!results || results->type != XTOOL_JSON_ARRAY) {
        snprintf(err, errlen, "%s: no \"results\" array", path);
        rc = XTOOL_EXIT_USAGE;
    } else if (results->n > (size_t)INT32_MAX / 2) {
        snprintf(err, errlen, "%s: %zu results: too many", path, results->n);
        rc = XTOOL_EXIT_USAGE;
    } else if (!(f->cells = calloc(results->n ? results->n : 1, sizeof *f->cells))) {
        snprintf(err, errlen, "%s: out of memory for %zu cells", path, results->n);
        rc = XTOOL_EXIT_FAIL;
    }
    if (rc || !results) {
        xtool_json_free(doc);
        return rc;
    }
    xtool__header(doc, f);
    for (size_t i = 0; i < results->n; i++)
        if (results->items[i].type == XTOOL_JSON_OBJECT) /* anything else is skipped */
            xtool__cell(&results->items[i], &f->cells[f->n++]);
    xtool_json_free(doc);
    if (xtool__index(f)) {
        snprintf(err, errlen, "%s: out of memory indexing %d cells", path, f->n);
        return XTOOL_EXIT_FAIL;
    }
    return 0;
}

const xtool_cmp_cell *xtool_cmp_find(const xtool_cmp_file *f, const xtool_cmp_cell *c,
                                     long long *probes)
{
    if (!f->bucket)
        return NULL;
    const xtool_cmp_cell *loose = NULL;
    for (int i = f->bucket[c->hash & (f->nbuckets - 1)]; i >= 0; i = f->next[i]) {
        const xtool_cmp_cell *x = &f->cells[i];
        if (probes)
            ++*probes;
        if (!xtool__same_key(x, c))
            continue;
        if (x->threads == c->threads)
            return x;
        if (!loose && (x->threads == 0 || c->threads == 0))
            loose = x;
    }
    return loose;
}

void xtool_cmp_free(xtool_cmp_file *f)
{
    free(f->cells);
    free(f->bucket);
    free(f->next);
    f->cells = NULL;
    f->bucket = f->next = NULL;
    f->n = 0;
}

int xtool_cmp_cell_model_error(const xtool_cmp_cell *c)
{
    return xtool_stats_over_ceiling(c->pct_fma) || xtool_stats_over_ceiling(c->pct_bw) ||
           xtool_stats_over_ceiling(c->pct_fma_per_thread) ||
           xtool_stats_over_ceiling(c->pct_bw_min);
}

/* ---- profile.json ------------------------------------------------------------------ */

/* A stats dict: its median and the interval of the median (ci_low/ci_high,
 * else from its samples, else [min, p90]). */
static void xtool__prof_stat(const xtool_json *d, const char *section_clock, xtool_prof_stat *s)
{
    memset(s, 0, sizeof *s);
    s->lo = s->hi = s->median = NAN;
    snprintf(s->clock, sizeof s->clock, "%s", section_clock);
    if (!d || d->type != XTOOL_JSON_OBJECT) {
        snprintf(s->why, sizeof s->why, "no stats dict");
        return;
    }
    const char *clk = xtool_json_str_of(d, "clock");
    if (clk[0])
        xtool__clean(s->clock, sizeof s->clock, clk);
    s->median = xtool_json_num_of(d, "median");
    s->n = xtool_json_int_of(d, "n", 0);
    if (!isfinite(s->median)) {
        snprintf(s->why, sizeof s->why, "no median");
        return;
    }
    if (!(s->median > 0)) { /* a time or a share: a ratio needs it > 0 */
        snprintf(s->why, sizeof s->why, "a median of %.4g, not > 0", s->median);
        return;
    }
    double lo = xtool_json_num_of(d, "ci_low"), hi = xtool_json_num_of(d, "ci_high");
    s->level = xtool_json_num_of(d, "ci_level");
    const xtool_json *smp = xtool_json_get(d, "samples");
    if (isfinite(lo) && isfinite(hi)) {
        s->from = XTOOL_PROF_CI;
    } else if (smp && smp->type == XTOOL_JSON_ARRAY && smp->n > 0 && smp->n <= (1u << 24)) {
        double *v = malloc(smp->n * sizeof *v);
        size_t k = 0;
        for (size_t i = 0; v && i < smp->n; i++)
            if (smp->items[i].type == XTOOL_JSON_NUMBER && isfinite(smp->items[i].number))
                v[k++] = smp->items[i].number;
        xtool_stats st;
        if (v && k > 0 && xtool_stats_compute(v, (int)k, &st) == 0) {
            lo = st.ci_low;
            hi = st.ci_high;
            s->level = st.ci_level;
            s->n = st.n;
            s->from = XTOOL_PROF_SAMPLES;
        }
        free(v);
    }
    if (!isfinite(lo) || !isfinite(hi)) {
        lo = xtool_json_num_of(d, "min");
        hi = xtool_json_num_of(d, "p90");
        s->level = 0;
        s->from = XTOOL_PROF_MIN_P90;
    }
    if (!isfinite(s->level) || s->level < 0 || s->level > 1)
        s->level = 0;
    if (!isfinite(lo) || !isfinite(hi)) {
        snprintf(s->why, sizeof s->why, "no interval (no ci_low/ci_high, samples, min/p90)");
        return;
    }
    if (!(lo <= s->median && s->median <= hi)) {
        snprintf(s->why, sizeof s->why, "an interval that does not hold its median");
        return;
    }
    s->lo = lo;
    s->hi = hi;
    s->ok = 1;
}

int xtool_prof_parse(const char *text, size_t len, const char *path, xtool_prof_file *f, char *err,
                     size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    f->calls = -1;
    char jerr[256];
    xtool_json *doc = xtool_json_parse(text, len, jerr, sizeof jerr);
    if (!doc) {
        snprintf(err, errlen, "%s: not JSON: %s", path, jerr);
        return XTOOL_EXIT_USAGE;
    }
    const char *schema = xtool_json_str_of(doc, "schema");
    char shown[100];
    xtool__clean(shown, sizeof shown, schema);
    const xtool_json *fwd = xtool_json_get(doc, "forward");
    int rc = 0;
    if (strncmp(schema, "xattn.profile/1", 15) != 0) {
        snprintf(err, errlen,
                 "%s: not an xattn profile (schema \"%.80s\", expected \"xattn.profile/1\", "
                 "written by the Python package's profile as DIR/profile.json)",
                 path, shown);
        rc = XTOOL_EXIT_USAGE;
    } else if (!fwd || fwd->type != XTOOL_JSON_OBJECT || !xtool_json_get(fwd, "attention_ms") ||
               xtool_json_get(fwd, "attention_ms")->type != XTOOL_JSON_OBJECT) {
        snprintf(err, errlen, "%s: no \"forward\" object with an \"attention_ms\" stats dict",
                 path);
        rc = XTOOL_EXIT_USAGE;
    }
    if (rc) {
        xtool_json_free(doc);
        return rc;
    }
    xtool__clean(f->model, sizeof f->model, xtool_json_str_of(doc, "model"));
    xtool__clean(f->device, sizeof f->device, xtool_json_str_of(doc, "device"));
    xtool__clean(f->version, sizeof f->version, xtool_json_str_of(doc, "xattn_version"));
    f->calls = xtool_json_int_of(doc, "calls", -1);
    const char *fclock = xtool_json_str_of(fwd, "clock");
    xtool__prof_stat(xtool_json_get(fwd, "attention_ms"), fclock, &f->attention_ms);
    xtool__prof_stat(xtool_json_get(fwd, "attention_share"), fclock, &f->attention_share);
    const xtool_json *layers = xtool_json_get(doc, "layers");
    const xtool_json *rows = xtool_json_get(layers, "rows");
    if (rows && rows->type == XTOOL_JSON_ARRAY && rows->n > 0) {
        if (rows->n > (size_t)INT32_MAX / 2 || !(f->layers = calloc(rows->n, sizeof *f->layers))) {
            snprintf(err, errlen, "%s: out of memory for %zu layers", path, rows->n);
            xtool_json_free(doc);
            return XTOOL_EXIT_FAIL;
        }
        const char *lclock = xtool_json_str_of(layers, "clock");
        for (size_t i = 0; i < rows->n; i++) {
            const xtool_json *r = &rows->items[i];
            const char *name = xtool_json_str_of(r, "layer");
            if (r->type != XTOOL_JSON_OBJECT || !name[0])
                continue;
            xtool_prof_layer *L = &f->layers[f->n_layers++];
            xtool__clean(L->name, sizeof L->name, name);
            xtool__prof_stat(xtool_json_get(r, "attention_ms"), lclock[0] ? lclock : fclock,
                             &L->attn);
        }
    }
    xtool_json_free(doc);
    return 0;
}

void xtool_prof_free(xtool_prof_file *f)
{
    free(f->layers);
    f->layers = NULL;
    f->n_layers = 0;
}

const xtool_prof_layer *xtool_prof_find(const xtool_prof_file *f, const char *name)
{
    for (int i = 0; i < f->n_layers; i++)
        if (!strcmp(f->layers[i].name, name))
            return &f->layers[i];
    return NULL;
}
