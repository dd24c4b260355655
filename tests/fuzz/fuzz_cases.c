/*
 * libFuzzer target over cases files (`xattn bench --cases`): the JSON reader
 * (bench/tool/xtool_json.c) and the cases-file parser (bench/
 * xtool_cases_file.c), both pure functions of the input bytes. Oracles: no
 * crash, no read beyond the input (ASan: the bytes are copied into an
 * allocation of exactly their size, without a terminating NUL); a refused input
 * has a message that names a line; an accepted one gives cases within the
 * schema's bounds, lengths within their extents, a positive count each, and
 * names that are NUL-terminated.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool_cases_file.h"
#include "xtool_json.h"

#define XATTN_FUZZ_CASES_CAP 64

static void xattn__fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_cases: oracle broken: %s\n", what);
    abort(); /* a fuzz target reports a broken oracle by crashing */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    char err[512];
    xtool_json *v = xtool_json_parse(text, size, err, sizeof err);
    if (!v && strncmp(err, "line ", 5))
        xattn__fuzz_fail("a refused JSON document without 'line N:' in its message");
    xtool_json_free(v);

    static xtool_bench_case cases[XATTN_FUZZ_CASES_CAP];
    memset(cases, 0, sizeof cases);
    xtool_cases_file cf;
    int n = xtool_cases_parse(text, size, 1, cases, XATTN_FUZZ_CASES_CAP, &cf, err, sizeof err);
    if (n < 0) {
        if (!err[0] || !strstr(err, "line "))
            xattn__fuzz_fail("a refused cases file without a line in its message");
        if (cf.entries || cf.n)
            xattn__fuzz_fail("a refused cases file left entries");
        for (int i = 0; i < XATTN_FUZZ_CASES_CAP; i++)
            if (cases[i].lq || cases[i].lk)
                xattn__fuzz_fail("a refused cases file left lengths allocated");
    } else {
        if (n == 0 || n > XATTN_FUZZ_CASES_CAP || cf.n != n || cf.n_file_cases < n)
            xattn__fuzz_fail("an accepted file with an inconsistent number of cases");
        for (int i = 0; i < n; i++) {
            const xtool_case *c = &cases[i].c;
            if (cf.entries[i].count < 1 || c->batch < 1 || c->heads < 1 || c->kv_heads < 1 ||
                c->heads % c->kv_heads || c->head_dim < 1 || c->head_dim > 256 ||
                c->head_dim_v < 1 || c->head_dim_v > 256 || c->sq < 0 || c->sk < 0 ||
                memchr(cf.entries[i].name, '\0', sizeof cf.entries[i].name) == NULL ||
                memchr(cases[i].key, '\0', sizeof cases[i].key) == NULL)
                xattn__fuzz_fail("an accepted case out of the schema's bounds");
            if ((cases[i].lq == NULL) != (cases[i].lk == NULL) || c->seqlens_q != cases[i].lq)
                xattn__fuzz_fail("lengths not owned as documented");
            for (int64_t b = 0; cases[i].lq && b < c->batch; b++)
                if (cases[i].lq[b] < 0 || cases[i].lq[b] > c->sq || cases[i].lk[b] < 0 ||
                    cases[i].lk[b] > c->sk)
                    xattn__fuzz_fail("a length beyond its extent");
            free(cases[i].lq);
            free(cases[i].lk);
        }
        xtool_cases_file_free(&cf);
    }
    free(text);
    return 0;
}
