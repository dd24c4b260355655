/* Bench result files read for `xattn compare`, and their cells matched by key
 * through a hash table (xtool_cmp.h). */
#include "xtool_cmp.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cli.h"
#include "xtool_stats.h"

static const char *xtool__jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double xtool__jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* An integer field clamped to int (a crafted file may hold anything). */
static int xtool__jint(json_t *o, const char *k, int dflt)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        return dflt;
    json_int_t x = json_integer_value(v);
    return x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : (int)x;
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

static void xtool__load_avg(json_t *a, double out[3])
{
    for (int i = 0; i < 3; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        out[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
}

int xtool_cmp_parse(const char *text, size_t len, const char *path, xtool_cmp_file *f, char *err,
                    size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    if (!doc) {
        snprintf(err, errlen, "%s: not JSON: %s (line %d)", path, je.text, je.line);
        return XTOOL_EXIT_USAGE;
    }
    const char *schema = xtool__jstr(doc, "schema");
    if (strncmp(schema, "xattn.bench/1", 13) != 0) {
        snprintf(err, errlen,
                 "%s: not an xattn bench result (schema \"%.80s\", expected \"xattn.bench/1\"; "
                 "bench writes it as DIR/results.json)",
                 path, schema);
        json_decref(doc);
        return XTOOL_EXIT_USAGE;
    }
    json_t *results = json_object_get(doc, "results");
    if (!json_is_array(results)) {
        snprintf(err, errlen, "%s: no \"results\" array", path);
        json_decref(doc);
        return XTOOL_EXIT_USAGE;
    }
    snprintf(f->created, sizeof f->created, "%s", xtool__jstr(doc, "created_utc"));
    snprintf(f->host, sizeof f->host, "%s", xtool__jstr(json_object_get(doc, "host"), "hostname"));
    size_t k = 0;
    json_t *d, *devs = json_object_get(doc, "devices");
    size_t i;
    json_array_foreach(devs, i, d)
    {
        if (k < sizeof f->devices)
            k += (size_t)snprintf(f->devices + k, sizeof f->devices - k, "%s%s:%d %s",
                                  i ? ", " : "", xtool__jstr(d, "backend"),
                                  xtool__jint(d, "device", 0), xtool__jstr(d, "name"));
    }
    json_t *load = json_object_get(doc, "load");
    if (json_is_object(load)) {
        f->has_load = 1;
        f->load_cpus = xtool__jint(load, "cpus", 0);
        xtool__load_avg(json_object_get(load, "start"), f->load_start);
        xtool__load_avg(json_object_get(load, "end"), f->load_end);
    }
    size_t n = json_array_size(results);
    if (n > (size_t)INT32_MAX / 2) {
        snprintf(err, errlen, "%s: %zu results: too many", path, n);
        json_decref(doc);
        return XTOOL_EXIT_USAGE;
    }
    f->cells = calloc(n ? n : 1, sizeof *f->cells);
    if (!f->cells) {
        json_decref(doc);
        snprintf(err, errlen, "%s: out of memory for %zu cells", path, n);
        return XTOOL_EXIT_FAIL;
    }
    json_t *r;
    json_array_foreach(results, i, r)
    {
        if (!json_is_object(r))
            continue;
        xtool_cmp_cell *c = &f->cells[f->n];
        int dev = xtool__jint(r, "device", 0);
        snprintf(c->dev, sizeof c->dev, "%.12s:%d", xtool__jstr(r, "backend"), dev);
        snprintf(c->algo, sizeof c->algo, "%s", xtool__jstr(r, "algo"));
        snprintf(c->label, sizeof c->label, "%s", xtool__jstr(r, "case"));
        c->threads = xtool__jint(r, "threads", 0);
        if (c->threads < 0)
            c->threads = 0;
        if (c->threads > 0) /* "cpu:0 t2": the thread count is part of where it ran */
            snprintf(c->device, sizeof c->device, "%s t%d", c->dev, c->threads);
        else
            snprintf(c->device, sizeof c->device, "%s", c->dev);
        c->median = xtool__jnum(r, "median_ms");
        c->min = xtool__jnum(r, "min_ms");
        c->p90 = xtool__jnum(r, "p90_ms");
        c->spread = xtool__jnum(r, "spread");
        c->ok = !strcmp(xtool__jstr(r, "status"), "ok") && isfinite(c->median) &&
                isfinite(c->min) && isfinite(c->p90);
        if (!isfinite(c->spread))
            c->spread = 0;
        c->pct_fma = xtool__jnum(r, "pct_fma_ceiling");
        c->pct_bw = xtool__jnum(r, "pct_bw_ceiling");
        c->pct_fma_per_thread = xtool__jnum(r, "pct_fma_per_thread");
        c->pct_bw_min = xtool__jnum(r, "pct_bw_min_ceiling");
        snprintf(c->kernel, sizeof c->kernel, "%s", xtool__jstr(r, "kernel"));
        json_t *wc = json_object_get(r, "work_counted");
        c->work_counted = json_is_boolean(wc) ? json_is_true(wc) : -1;
        c->hash = xtool__hash(c);
        f->n++;
    }
    json_decref(doc);
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
