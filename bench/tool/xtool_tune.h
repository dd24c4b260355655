/*
 * xattn tune's candidate tiles (xtool_tune_cands.c): data, in XATTN_CL_TILE's
 * form, each applied over the device's tile table row. Pure: the tests read
 * the table as the command does.
 */
#ifndef XTOOL_TUNE_H
#define XTOOL_TUNE_H

#include "xattn.h"

/* The candidates of algo (NAIVE, FLASH or SPLITKV) for a CPU-class device
 * (cpu_class 1) or a GPU (0), at most cap into out; returns the count (0 for
 * another algo). The table row itself is not among them: tune tries it first. */
int xtool_tune_candidates(xattn_algo algo, int cpu_class, const char **out, int cap);

#endif
