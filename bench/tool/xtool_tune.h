/*
 * xattn tune's candidates (xtool_tune_cands.c): data. OpenCL tiles in
 * XATTN_CL_TILE's form, each applied over the device's tile table row; CUDA
 * configurations in XATTN_CUDA_CONFIG's form. Pure: the tests read the
 * tables as the command does.
 */
#ifndef XTOOL_TUNE_H
#define XTOOL_TUNE_H

#include "xattn.h"

/* The candidates of algo (NAIVE, FLASH or SPLITKV) for a CPU-class device
 * (cpu_class 1) or a GPU (0), at most cap into out; returns the count (0 for
 * another algo). The table row itself is not among them: tune tries it first. */
int xtool_tune_candidates(xattn_algo algo, int cpu_class, const char **out, int cap);

/* The CUDA candidates of algo (XATTN_CUDA_CONFIG's form, over the default
 * "path=auto,waves=2"), at most cap into out; returns the count: 0 for NAIVE
 * (no run-time choice) and AUTO. The default itself is not among them. */
int xtool_tune_cuda_candidates(xattn_algo algo, const char **out, int cap);

#endif
