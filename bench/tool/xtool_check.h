/*
 * xattn check, in three steps: the plan (xtool_check_plan.c: the features and
 * the matrix of device x algorithm x feature), the run (xtool_cmd_check.c:
 * every cell against the double-precision reference, outputs poisoned first)
 * and the report (xtool_check_report.c: the matrix, the cases, the details
 * and the JSON, schema xattn.check/1).
 */
#ifndef XTOOL_CHECK_H
#define XTOOL_CHECK_H

#include "xtool.h"

#define XTOOL_CHECK_MAX_TARGETS 32

typedef enum xtool_check_status {
    XTOOL_CHECK_PASS,
    XTOOL_CHECK_FAIL,
    XTOOL_CHECK_UNSUP, /* declared unsupported by the backend: reported, not failed */
    XTOOL_CHECK_ERROR
} xtool_check_status;

typedef struct xtool_check_cell {
    xtool_check_status status;
    double rel_l2, max_abs, bound, lse_err;
    char msg[320];
} xtool_check_cell;

typedef struct xtool_check_plan {
    const xtool_cli_opts *o;
    xtool_target targets[XTOOL_CHECK_MAX_TARGETS];
    int nt;
    xattn_algo algos[XATTN_ALGO_COUNT];
    int na;
    int nf;                  /* features selected */
    const char **names;      /* [nf] their names */
    xtool_case *cases;       /* [nf] their cases */
    xtool_check_cell *cells; /* [nf x nt x na], filled by the run */
} xtool_check_plan;

/* The plan: devices, algorithms, the features --quick and --filter select,
 * their cases. Returns 0, or an exit status with the message printed (p is
 * then freed). */
int xtool_check_plan_make(const xtool_cli_opts *o, xtool_check_plan *p);
void xtool_check_plan_free(xtool_check_plan *p);
/* The cell of feature fi on target ti with algorithm ai. */
xtool_check_cell *xtool_check_cell_at(const xtool_check_plan *p, int fi, int ti, int ai);

/* The matrix, the cases, the details of every cell that did not pass and
 * the counts; counts[status] filled. */
void xtool_check_report(const xtool_check_plan *p, int counts[4]);
/* The cells as JSON (schema xattn.check/1). Returns 0, or -1 with err set. */
int xtool_check_write_json(const xtool_check_plan *p, const int counts[4], const char *path,
                           char *err, size_t errlen);

#endif
