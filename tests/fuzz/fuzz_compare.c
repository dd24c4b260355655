/*
 * libFuzzer target over the input of `xattn compare`: the text of a bench
 * result file (bench/tool/xtool_compare_read.c, xtool_cmp_parse), and the matching of its
 * cells through the hash table. The input is the file's bytes, as they are.
 *
 * Oracles: no crash and no access outside the input (ASan, UBSan); a status
 * of 0, 1 or 2, with a message whenever it is not 0; every cell's strings
 * terminated within their arrays; an "ok" cell has a finite median, min and
 * p90; every cell is found in its own file, under its own key; a cell found
 * as itself is "within noise" against itself, as compare promises for a file
 * compared with itself; the file's index is freed whatever the result.
 * The same bytes are read as a profile.json too (xtool_prof_parse): the same
 * status oracles, terminated strings, and every usable figure a finite median
 * inside its finite interval, within noise against itself.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_compare_read.h"
#include "xtool_stats.h"

static void xattn__fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_compare: oracle broken: %s\n", what);
    abort(); /* a fuzz target reports a broken oracle by crashing */
}

static int xattn__terminated(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void xattn__fuzz_stat(const xtool_prof_stat *s)
{
    if (!xattn__terminated(s->clock, sizeof s->clock) || !xattn__terminated(s->why, sizeof s->why))
        xattn__fuzz_fail("a profile figure's string is not terminated");
    if (!s->ok)
        return;
    if (!(isfinite(s->median) && isfinite(s->lo) && isfinite(s->hi) && s->lo <= s->median &&
          s->median <= s->hi))
        xattn__fuzz_fail("a usable profile figure outside its interval");
    if (xtool_stats_verdict_ci(s->lo, s->median, s->hi, s->lo, s->median, s->hi, NULL) !=
        XTOOL_VERDICT_NOISE)
        xattn__fuzz_fail("a profile figure is faster or slower than itself");
}

static void xattn__fuzz_profile(const uint8_t *data, size_t size)
{
    xtool_prof_file p;
    char err[512];
    err[0] = '\0';
    int rc = xtool_prof_parse((const char *)data, size, "fuzz", &p, err, sizeof err);
    if (rc != 0 && rc != 1 && rc != 2)
        xattn__fuzz_fail("xtool_prof_parse returned neither 0, 1 nor 2");
    if (rc != 0 && err[0] == '\0')
        xattn__fuzz_fail("xtool_prof_parse failed without a message");
    if (!xattn__terminated(p.model, sizeof p.model) ||
        !xattn__terminated(p.device, sizeof p.device))
        xattn__fuzz_fail("a profile header string is not terminated");
    if (rc == 0) {
        xattn__fuzz_stat(&p.attention_ms);
        xattn__fuzz_stat(&p.attention_share);
        for (int i = 0; i < p.n_layers; i++) {
            if (!xattn__terminated(p.layers[i].name, sizeof p.layers[i].name))
                xattn__fuzz_fail("a layer name is not terminated");
            if (xtool_prof_find(&p, p.layers[i].name) == NULL)
                xattn__fuzz_fail("a layer is not found in its own profile");
            xattn__fuzz_stat(&p.layers[i].attn);
        }
    }
    xtool_prof_free(&p);
    if (p.layers)
        xattn__fuzz_fail("xtool_prof_free left pointers behind");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xtool_cmp_file f;
    char err[512];
    err[0] = '\0';
    int rc = xtool_cmp_parse((const char *)data, size, "fuzz", &f, err, sizeof err);
    if (rc != 0 && rc != 1 && rc != 2)
        xattn__fuzz_fail("xtool_cmp_parse returned neither 0, 1 nor 2");
    if (rc != 0 && err[0] == '\0')
        xattn__fuzz_fail("xtool_cmp_parse failed without a message");
    if (!xattn__terminated(f.created, sizeof f.created) ||
        !xattn__terminated(f.host, sizeof f.host) ||
        !xattn__terminated(f.devices, sizeof f.devices))
        xattn__fuzz_fail("a header string is not terminated");
    if (rc == 0) {
        if (f.n < 0 || (size_t)f.n > size)
            xattn__fuzz_fail("more cells than bytes");
        for (int i = 0; i < f.n; i++) {
            const xtool_cmp_cell *c = &f.cells[i];
            if (!xattn__terminated(c->dev, sizeof c->dev) ||
                !xattn__terminated(c->device, sizeof c->device) ||
                !xattn__terminated(c->algo, sizeof c->algo) ||
                !xattn__terminated(c->label, sizeof c->label) ||
                !xattn__terminated(c->kernel, sizeof c->kernel))
                xattn__fuzz_fail("a cell's string is not terminated");
            if (c->ok && !(isfinite(c->median) && isfinite(c->min) && isfinite(c->p90)))
                xattn__fuzz_fail("an ok cell without finite times");
            if (c->threads < 0)
                xattn__fuzz_fail("a negative thread count");
            long long probes = 0;
            const xtool_cmp_cell *x = xtool_cmp_find(&f, c, &probes);
            if (!x)
                xattn__fuzz_fail("a cell is not found in its own file");
            if (strcmp(x->dev, c->dev) || strcmp(x->algo, c->algo) || strcmp(x->label, c->label))
                xattn__fuzz_fail("a cell was matched with another key");
            if (probes < 1 || probes > f.n)
                xattn__fuzz_fail("a match looked at more cells than the file has");
            double ratio;
            if (x == c && c->ok &&
                xtool_stats_verdict(c->min, c->median, c->p90, c->spread, c->min, c->median, c->p90,
                                    c->spread, &ratio) != XTOOL_VERDICT_NOISE)
                xattn__fuzz_fail("a cell is faster or slower than itself");
            (void)xtool_cmp_cell_model_error(c);
        }
    }
    xtool_cmp_free(&f);
    if (f.cells || f.bucket || f.next)
        xattn__fuzz_fail("xtool_cmp_free left pointers behind");
    xattn__fuzz_profile(data, size);
    return 0;
}
