/* SVG charts (hand-written SVG 1.1; text and attributes escaped). */
#include "xtool_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtool.h"

static const char *const xtool__palette[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                               "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                               "#bcbd22", "#17becf"};
static const char *const xtool__dashes[3] = {"", "6,3", "2,2"};

/* Distinct strings in order of first appearance (pointers into the points). */
typedef struct xtool__names {
    const char **v;
    int n;
} xtool__names;

static int xtool__names_index(const xtool__names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return i;
    return -1;
}

static void xtool__names_add(xtool__names *s, const char *name)
{
    if (xtool__names_index(s, name) < 0)
        s->v[s->n++] = name;
}

static double xtool__nice_step(double range, int target)
{
    if (!(range > 0))
        return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw)));
    double f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void xtool__fmt_num(double v, char *out, size_t n)
{
    if (fabs(v) >= 1e5 || (fabs(v) < 1e-3 && v != 0))
        snprintf(out, n, "%.0e", v);
    else
        snprintf(out, n, "%g", v);
}

typedef struct xtool__axis {
    double lo, hi;
    int log; /* 0 linear, 2 log2, 10 log10 */
} xtool__axis;

static double xtool__axis_t(const xtool__axis *a, double v) /* 0..1 */
{
    if (a->log) {
        double l = a->log == 2 ? log2(v) : log10(v), llo = a->log == 2 ? log2(a->lo) : log10(a->lo),
               lhi = a->log == 2 ? log2(a->hi) : log10(a->hi);
        return lhi > llo ? (l - llo) / (lhi - llo) : 0.5;
    }
    return a->hi > a->lo ? (v - a->lo) / (a->hi - a->lo) : 0.5;
}

static int xtool__cmp_pt(const void *a, const void *b)
{
    const xtool_chart_point *p = *(const xtool_chart_point *const *)a;
    const xtool_chart_point *q = *(const xtool_chart_point *const *)b;
    return (p->x > q->x) - (p->x < q->x);
}

static int xtool__usable(const xtool_chart_point *p, int log_y)
{
    return p->panel && p->series && isfinite(p->x) && isfinite(p->y) && (!log_y || p->y > 0) &&
           p->x > 0;
}

/* The line chart's sizes: panels of PW x PH in ncols columns under the
 * title and a legend of leg_rows rows. */
enum { XTOOL__PW = 480, XTOOL__PH = 300, XTOOL__PAD = 16, XTOOL__LEGW = 235 };

typedef struct xtool__line_layout {
    xtool__names panels, series; /* in order of first appearance */
    int ncols, nrows, per_row, top, width, height;
} xtool__line_layout;

/* One panel's plot area and axes. */
typedef struct xtool__panel {
    int ox, oy;             /* its corner */
    int px0, px1, py0, py1; /* the plot area */
    xtool__axis ax, ay;
    double ystep; /* linear y: the tick step */
    const xtool_chart_point **sel;
    int m; /* sel: the panel's points, by x */
} xtool__panel;

static double xtool__px(const xtool__panel *p, double x)
{
    return p->px0 + xtool__axis_t(&p->ax, x) * (p->px1 - p->px0);
}

static double xtool__py(const xtool__panel *p, double y)
{
    return p->py1 - xtool__axis_t(&p->ay, y) * (p->py1 - p->py0);
}

static void xtool__line_layout_make(const xtool_line_chart *c, xtool__line_layout *l)
{
    for (int i = 0; i < c->n; i++)
        if (xtool__usable(&c->pts[i], c->log_y)) {
            xtool__names_add(&l->panels, c->pts[i].panel);
            xtool__names_add(&l->series, c->pts[i].series);
        }
    l->ncols = l->panels.n >= 2 ? 2 : 1;
    l->nrows = l->panels.n ? (l->panels.n + l->ncols - 1) / l->ncols : 1;
    l->width = 2 * XTOOL__PAD + l->ncols * XTOOL__PW;
    l->per_row = (l->width - 2 * XTOOL__PAD) / XTOOL__LEGW;
    if (l->per_row < 1)
        l->per_row = 1;
    int leg_rows = l->series.n ? (l->series.n + l->per_row - 1) / l->per_row : 0;
    l->top = 58 + leg_rows * 20 + 6;
    l->height = l->top + l->nrows * XTOOL__PH + XTOOL__PAD;
}

/* stroke="..." and the dashes of series s: 10 colours, then dashed. */
static void xtool__stroke(FILE *f, int s)
{
    const char *dash = xtool__dashes[(s / 10) % 3];
    fprintf(f, "stroke=\"%s\"%s%s%s", xtool__palette[s % 10], dash[0] ? " stroke-dasharray=\"" : "",
            dash, dash[0] ? "\"" : "");
}

/* The document, the title and the legend: one entry per series, the same
 * colour in every panel. */
static void xtool__line_head(FILE *f, const xtool_line_chart *c, const xtool__line_layout *l)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n",
            l->width, l->height, l->width, l->height);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", l->width,
            l->height);
    fprintf(f, "<text class=\"title\" x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
            XTOOL__PAD);
    xtool_xml_text(f, c->title);
    fprintf(f, "</text>\n");
    if (c->subtitle && *c->subtitle) {
        fprintf(f, "<text class=\"subtitle\" x=\"%d\" y=\"44\" font-size=\"11\" fill=\"#555555\">",
                XTOOL__PAD);
        xtool_xml_text(f, c->subtitle);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "<g class=\"legend\">\n");
    for (int s = 0; s < l->series.n; s++) {
        int lx = XTOOL__PAD + (s % l->per_row) * XTOOL__LEGW, ly = 58 + (s / l->per_row) * 20;
        fprintf(f, "<g class=\"legend-item\" data-series=\"");
        xtool_xml_text(f, l->series.v[s]);
        fprintf(f, "\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke-width=\"2.5\" ", lx, ly,
                lx + 26, ly);
        xtool__stroke(f, s);
        fprintf(f, "/><text x=\"%d\" y=\"%d\" font-size=\"12\">", lx + 32, ly + 4);
        xtool_xml_text(f, l->series.v[s]);
        fprintf(f, "</text></g>\n");
    }
    fprintf(f, "</g>\n");
}

/* The panel's points, by x, and its axes: x log2 when the values span 4x or
 * more; y log10 (whole decades) or linear from 0 with a round step. */
static void xtool__panel_axes(const xtool_line_chart *c, const char *panel, xtool__panel *p)
{
    p->m = 0;
    for (int i = 0; i < c->n; i++)
        if (xtool__usable(&c->pts[i], c->log_y) && !strcmp(c->pts[i].panel, panel))
            p->sel[p->m++] = &c->pts[i];
    qsort(p->sel, (size_t)p->m, sizeof *p->sel, xtool__cmp_pt);
    xtool__axis ax = {p->sel[0]->x, p->sel[p->m - 1]->x, 0}, ay = {INFINITY, -INFINITY, 0};
    for (int i = 0; i < p->m; i++) {
        ay.lo = fmin(ay.lo, p->sel[i]->y);
        ay.hi = fmax(ay.hi, p->sel[i]->y);
    }
    if (ax.hi / ax.lo >= 4)
        ax.log = 2;
    else if (ax.hi == ax.lo) {
        ax.lo *= 0.5;
        ax.hi *= 1.5;
    } else {
        double pad = 0.05 * (ax.hi - ax.lo);
        ax.lo -= pad;
        ax.hi += pad;
    }
    p->ystep = 0;
    if (c->log_y) {
        ay.log = 10;
        ay.lo = pow(10, floor(log10(ay.lo)));
        ay.hi = pow(10, ceil(log10(ay.hi)));
        if (ay.hi <= ay.lo)
            ay.hi = ay.lo * 10;
    } else {
        ay.lo = 0;
        p->ystep = xtool__nice_step(ay.hi > 0 ? ay.hi : 1, 5);
        ay.hi = ceil((ay.hi > 0 ? ay.hi * 1.02 : 1) / p->ystep) * p->ystep;
    }
    p->ax = ax;
    p->ay = ay;
}

/* A grid line across the plot at y, with its label on the left. */
static void xtool__y_tick(FILE *f, const xtool__panel *p, double v)
{
    char lab[32];
    double y = xtool__py(p, v);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">",
            p->px0, y, p->px1, y, p->px0 - 5, y + 3);
    xtool__fmt_num(v, lab, sizeof lab);
    xtool_xml_text(f, lab);
    fprintf(f, "</text>\n");
}

/* The y ticks (log: 1, 2, 5 in each decade, or decades only beyond two),
 * and x ticks at the panel's distinct x values (at most 12). */
static void xtool__panel_ticks(FILE *f, const xtool__panel *p)
{
    if (p->ay.log) {
        double decades = log10(p->ay.hi / p->ay.lo);
        static const double mults[3] = {1, 2, 5};
        for (double d = p->ay.lo; d <= p->ay.hi * 1.0001; d *= 10)
            for (int k = 0; k < 3; k++)
                if (d * mults[k] <= p->ay.hi * 1.0001 && !(k > 0 && decades > 2))
                    xtool__y_tick(f, p, d * mults[k]);
    } else {
        for (double v = 0; v <= p->ay.hi * 1.0001; v += p->ystep)
            xtool__y_tick(f, p, v);
    }
    int nx = 0;
    double xs[64];
    for (int i = 0; i < p->m && nx < 64; i++)
        if (nx == 0 || xs[nx - 1] != p->sel[i]->x)
            xs[nx++] = p->sel[i]->x;
    int stride = nx > 12 ? (nx + 11) / 12 : 1;
    for (int i = 0; i < nx; i += stride) {
        char lab[32];
        double x = xtool__px(p, xs[i]);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#dddddd\"/>"
                "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">",
                x, p->py0, x, p->py1, x, p->py1 + 14);
        xtool__fmt_num(xs[i], lab, sizeof lab);
        xtool_xml_text(f, lab);
        fprintf(f, "</text>\n");
    }
}

/* The panel's title (cut on a character boundary), frame and axis labels. */
static void xtool__panel_frame(FILE *f, const xtool_line_chart *c, const char *panel,
                               const xtool__panel *p)
{
    fprintf(f, "<g class=\"panel\" data-panel=\"");
    xtool_xml_text(f, panel);
    fprintf(f, "\">\n<text x=\"%d\" y=\"%d\" font-size=\"12\" font-weight=\"bold\">", p->px0,
            p->oy + 20);
    char ptitle[72];
    snprintf(ptitle, sizeof ptitle, "%s", panel);
    if (strlen(panel) >= sizeof ptitle)
        for (int k = (int)sizeof ptitle - 2; k > 0 && (ptitle[k] & 0xc0) == 0x80; k--)
            ptitle[k] = '\0';
    xtool_xml_text(f, ptitle);
    fprintf(f, "</text>\n");
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" "
            "stroke=\"#333333\"/>\n",
            p->px0, p->py0, p->px1 - p->px0, p->py1 - p->py0);
    xtool__panel_ticks(f, p);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">",
            (p->px0 + p->px1) / 2, p->py1 + 32);
    xtool_xml_text(f, c->x_label);
    fprintf(f, "%s</text>\n", p->ax.log ? " (log scale)" : "");
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 %d %d)\">",
            p->ox + 16, (p->py0 + p->py1) / 2, p->ox + 16, (p->py0 + p->py1) / 2);
    xtool_xml_text(f, c->y_label);
    fprintf(f, "%s</text>\n", p->ay.log ? " (log scale)" : "");
}

/* One polyline for series s in the panel, with a marker and a tooltip per point. */
static void xtool__panel_series(FILE *f, const xtool__panel *p, const char *name, int s)
{
    int cnt = 0;
    for (int i = 0; i < p->m; i++)
        cnt += !strcmp(p->sel[i]->series, name);
    if (!cnt)
        return;
    fprintf(f, "<polyline class=\"series\" data-series=\"");
    xtool_xml_text(f, name);
    fprintf(f, "\" fill=\"none\" stroke-width=\"2\" ");
    xtool__stroke(f, s);
    fprintf(f, " points=\"");
    for (int i = 0; i < p->m; i++)
        if (!strcmp(p->sel[i]->series, name))
            fprintf(f, "%.1f,%.1f ", xtool__px(p, p->sel[i]->x), xtool__py(p, p->sel[i]->y));
    fprintf(f, "\"/>\n");
    for (int i = 0; i < p->m; i++)
        if (!strcmp(p->sel[i]->series, name)) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                    xtool__px(p, p->sel[i]->x), xtool__py(p, p->sel[i]->y), xtool__palette[s % 10]);
            xtool_xml_text(f, name);
            fprintf(f, ": %g at %g</title></circle>\n", p->sel[i]->y, p->sel[i]->x);
        }
}

int xtool_svg_line_chart(const char *path, const xtool_line_chart *c, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    int cap = c->n > 0 ? c->n : 1;
    const char **pool = malloc((size_t)(2 * cap) * sizeof *pool);
    const xtool_chart_point **sel = malloc((size_t)cap * sizeof *sel);
    if (!pool || !sel) {
        free(pool);
        free(sel);
        fclose(f);
        snprintf(err, errlen, "out of memory writing '%s'", path);
        return -1;
    }
    xtool__line_layout l = {{pool, 0}, {pool + cap, 0}, 0, 0, 0, 0, 0, 0};
    xtool__line_layout_make(c, &l);
    xtool__line_head(f, c, &l);
    for (int pi = 0; pi < l.panels.n; pi++) {
        xtool__panel p;
        p.ox = XTOOL__PAD + (pi % l.ncols) * XTOOL__PW;
        p.oy = l.top + (pi / l.ncols) * XTOOL__PH;
        p.px0 = p.ox + 70; /* margins: left 70, right 18, top 34, bottom 46 */
        p.px1 = p.ox + XTOOL__PW - 18;
        p.py0 = p.oy + 34;
        p.py1 = p.oy + XTOOL__PH - 46;
        p.sel = sel;
        xtool__panel_axes(c, l.panels.v[pi], &p);
        xtool__panel_frame(f, c, l.panels.v[pi], &p);
        for (int s = 0; s < l.series.n; s++)
            xtool__panel_series(f, &p, l.series.v[s], s);
        fprintf(f, "</g>\n");
    }
    if (l.panels.n == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">no results to draw</text>\n",
                XTOOL__PAD, l.top + 20);
    fprintf(f, "</svg>\n");
    free(pool);
    free(sel);
    return xtool_file_close(f, path, err, errlen);
}

int xtool_svg_ratio_chart(const char *path, const char *title, const xtool_ratio_bar *bars, int n,
                          char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const int LABW = 470, BARW = 420, RH = 18, PAD = 16, TOP = 64;
    int W = PAD * 2 + LABW + BARW + 70, H = TOP + (n > 0 ? n : 1) * RH + 50;
    /* The axis runs from a power of two to a power of two that hold every
     * ratio (a bar at 0.294x needs the axis to reach 0.25x), with a tick at
     * each power of two in between: no bar runs past it. */
    double lo = 0.5, hi = 2.0;
    for (int i = 0; i < n; i++) {
        if (isfinite(bars[i].ratio) && bars[i].ratio > 0) {
            lo = fmin(lo, bars[i].ratio);
            hi = fmax(hi, bars[i].ratio);
        }
    }
    lo = fmax(pow(2, floor(log2(lo))), 0x1p-30);
    hi = fmin(pow(2, ceil(log2(hi))), 0x1p30);
    xtool__axis ax = {lo, hi, 2};
    int bx0 = PAD + LABW, bx1 = bx0 + BARW;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            W, H, W, H, W, H);
    fprintf(f, "<text class=\"title\" x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
            PAD);
    xtool_xml_text(f, title);
    fprintf(f,
            "</text>\n<text x=\"%d\" y=\"44\" font-size=\"11\" fill=\"#555555\">median time "
            "ratio (log scale; &lt; 1 is faster); green/red: beyond both runs' noise (grey "
            "band), grey: within it</text>\n",
            PAD);
    /* ratio ticks at powers of two (1 among them), the axis line under the bars */
    int nticks = (int)lround(log2(hi / lo)) + 1, stride = nticks > 12 ? (nticks + 11) / 12 : 1;
    fprintf(f,
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n",
            bx0, TOP + n * RH, bx1, TOP + n * RH);
    for (int k = 0; k < nticks; k++) {
        double t = lo * pow(2, k);
        if (k % stride && t != 1.0 && k != nticks - 1)
            continue;
        double x = bx0 + xtool__axis_t(&ax, t) * BARW;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%gx</text>\n",
                x, TOP - 4, x, TOP + n * RH, t == 1.0 ? "#333333" : "#dddddd", x, TOP + n * RH + 14,
                t);
    }
    static const char *const colors[3] = {"#7f7f7f", "#2ca02c", "#d62728"};
    double x1 = bx0 + xtool__axis_t(&ax, 1.0) * BARW;
    for (int i = 0; i < n; i++) {
        const xtool_ratio_bar *b = &bars[i];
        int y = TOP + i * RH;
        int v = b->verdict >= 0 && b->verdict <= 2 ? b->verdict : 0;
        fprintf(f, "<g class=\"bar\" data-verdict=\"%s\">",
                v == 1   ? "faster"
                : v == 2 ? "slower"
                         : "noise");
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">", bx0 - 6,
                y + RH - 5);
        if (b->group && *b->group) {
            xtool_xml_text(f, b->group);
            fprintf(f, " | ");
        }
        xtool_xml_text(f, b->label);
        fprintf(f, "</text>");
        if (isfinite(b->lo) && isfinite(b->hi) && b->lo > 0 && b->hi > b->lo) {
            double a = bx0 + xtool__axis_t(&ax, fmax(b->lo, lo)) * BARW;
            double z = bx0 + xtool__axis_t(&ax, fmin(b->hi, hi)) * BARW;
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#e6e6e6\"/>",
                    a, y + 2, z - a, RH - 4);
        }
        if (isfinite(b->ratio) && b->ratio > 0) {
            double xr = bx0 + fmin(fmax(xtool__axis_t(&ax, b->ratio), 0), 1) * BARW;
            double a = fmin(x1, xr), w = fabs(xr - x1);
            fprintf(f,
                    "<rect class=\"ratio\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                    "fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%.3fx</text>",
                    a, y + 4, w < 1 ? 1 : w, RH - 8, colors[v], bx1 + 6, y + RH - 5, b->ratio);
        }
        fprintf(f, "</g>\n");
    }
    if (n == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">no cells in common</text>\n", PAD,
                TOP + 14);
    fprintf(f, "</svg>\n");
    return xtool_file_close(f, path, err, errlen);
}
