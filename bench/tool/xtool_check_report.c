/*
 * xattn check, the report: the matrix (ok, FAIL, unsup, ERROR; --verbose:
 * every cell's error), the cases, the details of every cell that did not
 * pass, the counts, and the cells as JSON (schema xattn.check/1).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "xtool_check.h"

static const char *const xtool__marks[4] = {"ok", "FAIL", "unsup", "ERROR"};

static void xtool__matrix(const xtool_check_plan *p, int counts[4])
{
    printf("\n%-18s", "feature");
    for (int ti = 0; ti < p->nt; ti++)
        for (int ai = 0; ai < p->na; ai++) {
            char h[48], dname[32];
            xtool_target_name(p->targets[ti].backend, p->targets[ti].device, dname, sizeof dname);
            snprintf(h, sizeof h, "%s/%s", dname, xattn_algo_name(p->algos[ai]));
            printf(" %-15s", h);
        }
    printf("\n");
    for (int fi = 0; fi < p->nf; fi++) {
        printf("%-18s", p->names[fi]);
        for (int ti = 0; ti < p->nt; ti++)
            for (int ai = 0; ai < p->na; ai++) {
                const xtool_check_cell *cell = xtool_check_cell_at(p, fi, ti, ai);
                counts[cell->status]++;
                if (p->o->verbose && cell->status == XTOOL_CHECK_PASS) {
                    char v[24];
                    snprintf(v, sizeof v, "ok %.1e", cell->rel_l2);
                    printf(" %-15s", v);
                } else {
                    printf(" %-15s", xtool__marks[cell->status]);
                }
            }
        printf("\n");
    }
}

void xtool_check_report(const xtool_check_plan *p, int counts[4])
{
    memset(counts, 0, 4 * sizeof *counts);
    xtool__matrix(p, counts);
    printf("\ncases:\n");
    for (int fi = 0; fi < p->nf; fi++) {
        char key[320];
        xtool_case_describe(&p->cases[fi], key, sizeof key);
        printf("  %-18s %s", p->names[fi], key);
        if (p->cases[fi].seqlens_q)
            printf(" (lengths q {37,20,1}, k {53,7,30})");
        printf("\n");
    }
    int problems = 0;
    for (int fi = 0; fi < p->nf; fi++)
        for (int ti = 0; ti < p->nt; ti++)
            for (int ai = 0; ai < p->na; ai++) {
                const xtool_check_cell *cell = xtool_check_cell_at(p, fi, ti, ai);
                if (cell->status == XTOOL_CHECK_PASS)
                    continue;
                if (!problems++)
                    printf("\ndetails:\n");
                char dname[32];
                xtool_target_name(p->targets[ti].backend, p->targets[ti].device, dname,
                                  sizeof dname);
                printf("  %-5s %s %s %s: %s\n", xtool__marks[cell->status], dname,
                       xattn_algo_name(p->algos[ai]), p->names[fi], cell->msg);
            }
    printf("\n%d cells: %d passed, %d failed, %d errors, %d unsupported\n", p->nf * p->nt * p->na,
           counts[XTOOL_CHECK_PASS], counts[XTOOL_CHECK_FAIL], counts[XTOOL_CHECK_ERROR],
           counts[XTOOL_CHECK_UNSUP]);
}

static void xtool__json_cell(FILE *f, const xtool_check_plan *p, int fi, int ti, int ai)
{
    static const char *const names[4] = {"pass", "fail", "unsupported", "error"};
    const xtool_check_cell *cell = xtool_check_cell_at(p, fi, ti, ai);
    char key[320];
    xtool_case_describe(&p->cases[fi], key, sizeof key);
    fprintf(f, "{\"feature\": ");
    xattn__json_str(f, p->names[fi]);
    fprintf(f, ", \"case\": ");
    xattn__json_str(f, key);
    fprintf(f,
            ", \"backend\": \"%s\", \"device\": %d, \"algo\": \"%s\", \"status\": \"%s\", "
            "\"rel_l2\": ",
            xattn_backend_name(p->targets[ti].backend), p->targets[ti].device,
            xattn_algo_name(p->algos[ai]), names[cell->status]);
    if (cell->status == XTOOL_CHECK_PASS || cell->status == XTOOL_CHECK_FAIL)
        xattn__json_num(f, cell->rel_l2);
    else
        fputs("null", f);
    fprintf(f, ", \"message\": ");
    xattn__json_str(f, cell->msg);
    fputs("}", f);
}

int xtool_check_write_json(const xtool_check_plan *p, const int counts[4], const char *path,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"schema\": \"xattn.check/1\",\n  \"xattn_version\": ");
    xattn__json_str(f, xattn_version_string());
    fprintf(f, ",\n  \"cells\": [");
    int k = 0;
    for (int fi = 0; fi < p->nf; fi++)
        for (int ti = 0; ti < p->nt; ti++)
            for (int ai = 0; ai < p->na; ai++) {
                fputs(k++ ? ",\n    " : "\n    ", f);
                xtool__json_cell(f, p, fi, ti, ai);
            }
    fprintf(f,
            "\n  ],\n  \"summary\": {\"cells\": %d, \"passed\": %d, \"failed\": %d, "
            "\"errors\": %d, \"unsupported\": %d}\n}\n",
            p->nf * p->nt * p->na, counts[XTOOL_CHECK_PASS], counts[XTOOL_CHECK_FAIL],
            counts[XTOOL_CHECK_ERROR], counts[XTOOL_CHECK_UNSUP]);
    return xtool_file_close(f, path, err, errlen);
}
