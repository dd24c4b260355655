/* SVG charts of the xattn tool: bench's lines against the sequence length
 * (one panel per family, one polyline per series) and compare's ratios. */
#ifndef XTOOL_SVG_H
#define XTOOL_SVG_H

#include <stddef.h>

typedef struct xtool_chart_point {
    const char *panel;  /* the family */
    const char *series; /* "cpu:0 flash" */
    double x, y;
} xtool_chart_point;

/* A line chart: one panel per distinct panel name (in order of first
 * appearance), one <polyline class="series" data-series="..."> per series
 * present in a panel, a shared legend (one <g class="legend-item"
 * data-series="..."> per series). */
typedef struct xtool_line_chart {
    const char *title, *subtitle; /* subtitle may be NULL */
    const char *x_label, *y_label;
    int log_y; /* y on a log scale (all y > 0) */
    const xtool_chart_point *pts;
    int n;
} xtool_line_chart;

/* Writes chart c to path. Points with y not finite or (log_y) not positive
 * are left out. Returns 0, or -1 with err set when the file cannot be
 * written. */
int xtool_svg_line_chart(const char *path, const xtool_line_chart *c, char *err, size_t errlen);

typedef struct xtool_ratio_bar {
    const char *label; /* the case */
    const char *group; /* "B vs A" */
    double ratio;      /* B median / A median */
    double lo, hi;     /* the noise band around 1 (1 - spread, 1 + spread) */
    int verdict;       /* xtool_verdict */
} xtool_ratio_bar;

/* Writes compare's chart: one horizontal bar a row on a log2 ratio axis
 * around 1, coloured by verdict, with the noise band drawn behind it. */
int xtool_svg_ratio_chart(const char *path, const char *title, const xtool_ratio_bar *bars, int n,
                          char *err, size_t errlen);

#endif
