/*
 * The input side of `xattn compare`: a bench result file (schema
 * xattn.bench/1) read into cells, and the cells of one file found by the key
 * of a cell of another (a hash table, so that two files of n cells match in
 * O(n)). Parsing works on the file's text and touches nothing else, so that a
 * fuzz target can call it (tests/fuzz/fuzz_compare.c). The text is read with
 * the tool's JSON reader (xtool_json.h).
 */
#ifndef XTOOL_COMPARE_READ_H
#define XTOOL_COMPARE_READ_H

#include <stddef.h>

/* One result cell of a bench file, as compare uses it. */
typedef struct xtool_cmp_cell {
    char dev[24];    /* "cpu:0": backend and device index (the match key's first part) */
    char device[40]; /* "cpu:0 t2": dev and the CPU thread count, as the table shows it */
    char algo[16];
    char label[320]; /* the case key */
    int threads;     /* CPU worker threads of the cell; 0 = not recorded (older files, GPUs) */
    int ok;          /* status "ok" with a median, a min and a p90 */
    double median, min, p90, spread;
    /* The median's confidence interval (ci_low, ci_high: NaN where the file has
     * none, files from before it): has_ci when both are finite, ordered and
     * around the median. */
    double ci_low, ci_high;
    int has_ci;
    /* Shares of the device's ceilings, in % (NaN where the file has none). A share
     * above 100% is an accounting-model error, never a real figure. */
    double pct_fma, pct_bw, pct_fma_per_thread, pct_bw_min;
    char kernel[32];  /* the kernel variant that ran; "" where the file does not say */
    int work_counted; /* 1 counted by the kernels, 0 modelled, -1 not recorded */
    unsigned hash;    /* of dev, algo and label */
} xtool_cmp_cell;

typedef struct xtool_cmp_file {
    const char *path;
    char created[40], host[128], devices[512];
    int has_load;                      /* the file recorded the machine's load */
    int load_cpus;                     /* CPUs the load is relative to (0 unknown) */
    double load_start[3], load_end[3]; /* /proc/loadavg: 1, 5 and 15 minutes */
    xtool_cmp_cell *cells;
    int n;
    int *bucket, *next; /* the hash table over cells: heads and chains, -1 ends */
    unsigned nbuckets;  /* a power of two */
} xtool_cmp_file;

/* The most bytes compare reads from one file (xtool_read_text). */
#define XTOOL_CMP_MAX_BYTES ((size_t)1 << 30)

/*
 * Parses the text of a bench result file (len bytes, NUL not needed) into f;
 * `path` names it in messages and is kept in f->path. Returns 0, 2 with a
 * message in err when the text is not a bench result file (not JSON, another
 * schema, no results array), or 1 when out of memory. Cells that are not
 * objects are skipped; fields of the wrong type read as absent. f is
 * released with xtool_cmp_free whatever the result.
 */
int xtool_cmp_parse(const char *text, size_t len, const char *path, xtool_cmp_file *f, char *err,
                    size_t errlen);

/* The cell of f that matches c: the same backend, device index, algorithm and
 * case, with the same thread count; or, where one of the two did not record
 * it (files from before the thread axis), the first cell of that key in f's
 * order. NULL when none. When probes is not NULL, the number of cells of f
 * that were looked at is added to it (the tests check that matching two files
 * stays linear in their size). */
const xtool_cmp_cell *xtool_cmp_find(const xtool_cmp_file *f, const xtool_cmp_cell *c,
                                     long long *probes);

void xtool_cmp_free(xtool_cmp_file *f);

/* 1 when one of the cell's shares of a ceiling is above 100% (xtool_stats_over_ceiling). */
int xtool_cmp_cell_model_error(const xtool_cmp_cell *c);

/* ---- profile.json (schema xattn.profile/1, written by the Python package) ---------- */

/* Where a figure's interval came from. */
typedef enum xtool_prof_from {
    XTOOL_PROF_CI = 0,      /* the stats dict's ci_low, ci_high */
    XTOOL_PROF_SAMPLES = 1, /* computed here from its "samples" (xtool_stats_median_ci) */
    XTOOL_PROF_MIN_P90 = 2  /* neither: [min, p90], a weaker stand-in (older files) */
} xtool_prof_from;

/* One stats dict of a profile, as compare judges it. ok: a finite median inside
 * a finite interval lo <= median <= hi; else why says what was missing. */
typedef struct xtool_prof_stat {
    int ok;
    double median, lo, hi, level; /* level: the interval's coverage; 0 unknown */
    int n;
    xtool_prof_from from;
    char clock[32]; /* the dict's (or its section's) "clock"; "" not said */
    char why[64];
} xtool_prof_stat;

typedef struct xtool_prof_layer {
    char name[160];
    xtool_prof_stat attn; /* rows[i].attention_ms */
} xtool_prof_layer;

typedef struct xtool_prof_file {
    const char *path;
    char model[256], device[64], version[40];
    int calls; /* attention calls per forward; -1 not said */
    xtool_prof_stat attention_ms, attention_share;
    xtool_prof_layer *layers;
    int n_layers;
} xtool_prof_file;

/*
 * Parses the text of a profile.json (schema xattn.profile/1) into f, like
 * xtool_cmp_parse: 0; 2 with a message when the text is not JSON, not a
 * profile, or has no "forward" object with an "attention_ms" stats dict; 1
 * out of memory. Layers without a name are skipped; a stats dict that is
 * unusable is kept with ok = 0. Pure; release with xtool_prof_free.
 */
int xtool_prof_parse(const char *text, size_t len, const char *path, xtool_prof_file *f, char *err,
                     size_t errlen);
void xtool_prof_free(xtool_prof_file *f);
/* The layer of f named name, or NULL. */
const xtool_prof_layer *xtool_prof_find(const xtool_prof_file *f, const char *name);

#endif
