/* The progress bar on stderr (xtool.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "xtool.h"

void xtool_progress_init(xtool_progress *p, int setting, int total)
{
    memset(p, 0, sizeof *p);
    p->on = setting < 0 ? isatty(STDERR_FILENO) : setting;
    p->total = total;
    p->start = xtool_now_s();
}

void xtool_progress_draw(xtool_progress *p, const char *label)
{
    if (!p->on || p->total <= 0)
        return;
    const int width = 24;
    int fill = (int)((double)p->done / p->total * width);
    double el = xtool_now_s() - p->start;
    char eta[32] = "";
    if (p->done > 0 && p->done < p->total)
        snprintf(eta, sizeof eta, ", ~%.0f s left", el / p->done * (p->total - p->done));
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r\033[K[%s] %d/%d %.0f s%s  %.60s", bar, p->done, p->total, el, eta,
            label ? label : "");
    fflush(stderr);
    p->drawn = 1;
}

void xtool_progress_clear(xtool_progress *p)
{
    if (p->on && p->drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        p->drawn = 0;
    }
}

void xtool_progress_done(xtool_progress *p)
{
    xtool_progress_clear(p);
}
