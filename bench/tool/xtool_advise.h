/* xattn advise: one device's measurements, the recommendation drawn from
 * them, and the command's plan. The recommendation is a function of the figures only, so that the
 * tests can give it figures made by hand (tests/tool, tool_unit). */
#ifndef XTOOL_ADVISE_H
#define XTOOL_ADVISE_H

#include "xtool.h"

typedef struct xtool_advise_algo {
    xattn_algo algo;
    int ok;
    char error[256];
    xtool_cell cell;
} xtool_advise_algo;

typedef struct xtool_advise_dev {
    xtool_target t;
    int opened;
    char error[256];
    xtool_advise_algo a[3];
    int best; /* index into a, -1 none */
    int has_packed;
    xtool_cell packed; /* FLASH on the packed batch */
    char packed_error[256];
    double fma, bw; /* ceilings used for the roofline (0 unknown) */
    int roof_ok;
    xtool_roofline roof;     /* the best algorithm's executed work / actual bytes */
    xtool_roofline roof_min; /* useful work / minimum bytes (the shape itself) */
    char advice[2048];
} xtool_advise_dev;

/* 1 when a cell's share of the FMA ceiling is above 100% and its useful
 * work alone (the shape's own FLOPs, not the kernel's count) ran faster than
 * that ceiling: the ceiling was measured low (on a busy machine), not the work
 * over-counted. */
int xtool_advise_ceiling_low(const xtool_cell *c);

/* Writes d->advice from the case, the padding waste (has_lengths: a padded
 * batch from --lengths) and d's measured algorithms, roofline and packed run. */
void xtool_advise_text(const xtool_case *c, const xtool_waste *w, int has_lengths,
                       xtool_advise_dev *d);

/* ---- the command: plan and run in xtool_cmd_advise.c, report in xtool_advise_report.c */

#define XTOOL_ADVISE_MAX_TARGETS 32

typedef struct xtool_advise_plan {
    const xtool_cli_opts *o;
    xtool_case c;     /* the shape, one value of each option */
    int32_t *lq, *lk; /* --lengths: the padded batch, or NULL */
    int has_lengths;
    xtool_waste w; /* its padding waste */
    char key[320];
    xtool_target targets[XTOOL_ADVISE_MAX_TARGETS];
    int nt;
    xtool_advise_dev *devs; /* [nt], filled by the run */
} xtool_advise_plan;

/* The title, and with --lengths the batch and its padding waste. */
void xtool_advise_print_header(const xtool_advise_plan *p);
/* One device's table, kernel, packed run, roofline and advice. */
void xtool_advise_print_device(const xtool_advise_plan *p, const xtool_advise_dev *d);
/* Everything as JSON (schema xattn.advise/1). Returns 0, or -1 with err set. */
int xtool_advise_write_json(const xtool_advise_plan *p, const char *path, char *err, size_t errlen);

#endif
