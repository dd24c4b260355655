/* xattn advise: one device's measurements and the recommendation drawn from
 * them. The recommendation is a function of the figures only, so that the
 * tests can give it figures made by hand (tests/tool, tool_unit). */
#ifndef XATTN_ADVICE_H
#define XATTN_ADVICE_H

#include "xattn_tool.h"

typedef struct xattn_advise_algo {
    xattn_algo algo;
    int ok;
    char error[256];
    xattn_cell cell;
} xattn_advise_algo;

typedef struct xattn_advise_dev {
    xattn_target t;
    int opened;
    char error[256];
    xattn_advise_algo a[3];
    int best; /* index into a, -1 none */
    int has_packed;
    xattn_cell packed; /* FLASH on the packed batch */
    char packed_error[256];
    double fma, bw; /* ceilings used for the roofline (0 unknown) */
    int roof_ok;
    xattn_roofline roof;     /* the best algorithm's executed work / actual bytes */
    xattn_roofline roof_min; /* useful work / minimum bytes (the shape itself) */
    char advice[1024];
} xattn_advise_dev;

/* Writes d->advice from the case, the padding waste (has_lengths: a padded
 * batch from --lengths) and d's measured algorithms, roofline and packed run. */
void xattn_advise_text(const xattn_case *c, const xattn_waste *w, int has_lengths,
                       xattn_advise_dev *d);

#endif
