/* xattn advise: one device's measurements and the recommendation drawn from
 * them. The recommendation is a function of the figures only, so that the
 * tests can give it figures made by hand (tests/tool, tool_unit). */
#ifndef XTOOL_ADVICE_H
#define XTOOL_ADVICE_H

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
    char advice[1024];
} xtool_advise_dev;

/* Writes d->advice from the case, the padding waste (has_lengths: a padded
 * batch from --lengths) and d's measured algorithms, roofline and packed run. */
void xtool_advise_text(const xtool_case *c, const xtool_waste *w, int has_lengths,
                       xtool_advise_dev *d);

#endif
