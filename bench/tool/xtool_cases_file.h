/*
 * `xattn bench --cases FILE`: replays a cases file (schema xattn.cases/1,
 * docs/python.md), the distinct attention calls of a model's forward pass with
 * how often each ran, as the Python package's capture writes it. Each case of
 * the file becomes one bench case (its inputs are random data from the seed:
 * the file carries shapes and options, not tensors), and after the table the
 * model's attention time per forward is summed: each case's median times its
 * count, per device and algorithm.
 */
#ifndef XTOOL_CASES_FILE_H
#define XTOOL_CASES_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xtool_presets.h"

#define XTOOL_CASES_SCHEMA "xattn.cases/1"
#define XTOOL_CASES_MAX 1024 /* cases in one file */

typedef struct xtool_cases_entry {
    char name[128]; /* the file's "name" (several joined with " + " when merged) */
    int64_t count;  /* calls of the case per forward */
    int line;       /* where the case starts in the file */
} xtool_cases_entry;

typedef struct xtool_cases_file {
    char path[1024];
    char model[128];
    int n;                      /* entries: one per bench case, same index */
    xtool_cases_entry *entries; /* malloc'd */
    int n_file_cases;           /* cases in the file (more than n when some were merged) */
    int64_t calls;              /* sum of the counts */
} xtool_cases_file;

struct xtool_bench_report;

/*
 * Parses the text of a cases file into bench cases (at most cap), with their
 * names and counts in *cf. Cases the tool cannot tell apart (the same key)
 * are merged, their counts added. Returns the number of cases, or -1 with a
 * message in err naming the line and the field ("line 12: cases[3].heads: ...").
 * A pure function (no I/O, no library state), for the fuzz target.
 */
int xtool_cases_parse(const char *text, size_t len, uint64_t seed, xtool_bench_case *out, int cap,
                      xtool_cases_file *cf, char *err, size_t errlen);
/* Reads the file, then xtool_cases_parse; errors as "FILE: line N: ...". */
int xtool_cases_load(const char *path, uint64_t seed, xtool_bench_case *out, int cap,
                     xtool_cases_file *cf, char *err, size_t errlen);
void xtool_cases_file_free(xtool_cases_file *cf);

/* The model's attention time per forward, per device x algorithm x thread count
 * (and the fastest algorithm per case), printed after bench's table. */
void xtool_cases_summary_print(const struct xtool_bench_report *rep, FILE *out);
/* The same as the results.json member "cases_file" (its value, an object). */
void xtool_cases_summary_json(const struct xtool_bench_report *rep, FILE *f);

#endif
