/*
 * The CUDA backend's run-time configuration and `xattn tune`'s stored winners
 * for it (xattn_cuda_tune.c). Plain C with no CUDA header: built in every
 * build, so that parsing, the store and the lookup are tested on machines
 * without a GPU or a CUDA toolkit (tests/test_cuda_tune.c).
 *
 * What a CUDA run can choose without recompiling: the path of FLASH and the
 * SPLITKV partial (the tensor-core mma kernels where they apply, or the SIMT
 * ones) and, for SPLITKV, how many splits cut the keys (as a number of waves
 * of blocks over the SMs that the grid should reach). The tiles and warps of
 * each path are fixed at build time (one instantiation a padded head dim).
 * A configuration is text, "path=auto,waves=2" (keys not given keep the
 * default): XATTN_CUDA_CONFIG's form, and a stored winner's.
 */
#ifndef XATTN_CUDA_TUNE_H
#define XATTN_CUDA_TUNE_H

#include <stdint.h>

#include "xattn_internal.h"

#define XATTN__CUDA_WAVES_DEFAULT 2 /* the split rule's two waves over the SMs */
#define XATTN__CUDA_WAVES_MAX 64

typedef struct xattn__cuda_cfg {
    int simt;  /* 1: the SIMT kernels even where the mma ones apply */
    int waves; /* SPLITKV without an explicit split count: splits so that the
                  grid reaches waves x SMs blocks (1..XATTN__CUDA_WAVES_MAX) */
} xattn__cuda_cfg;

/* The default configuration (what runs without XATTN_CUDA_CONFIG or a stored winner). */
xattn__cuda_cfg xattn__cuda_cfg_default(void);

/* Parses text over *cfg (keys not given are kept). INVALID_ARGUMENT naming
 * `what` (the variable or argument) and the key or value otherwise. */
xattn_status xattn__cuda_cfg_parse(const char *text, const char *what, xattn__cuda_cfg *cfg);

/* The split count SPLITKV asks for under `waves` (before the kernels' clamps
 * to whole 64-key chunks and at most 256 splits): enough splits that
 * base_blocks x splits reaches waves x sm_count blocks; 1 when one split
 * already does. base_blocks: the blocks of one split (at least 1 is assumed). */
int xattn__cuda_waves_splits(long long base_blocks, int sm_count, int waves);

/* Every key, in the form the parser reads. */
void xattn__cuda_cfg_format(const xattn__cuda_cfg *cfg, char *out, size_t n);

/* The state of one context: the device's identity (the key of its stored
 * winners), the cache folder, XATTN_CUDA_CONFIG when set, and the winners
 * read so far (each case's file is read once). */
typedef struct xattn__cuda_tuned xattn__cuda_tuned;
typedef struct xattn__cuda_tune {
    char ident[512];      /* "device=...\ncc=...\ndriver=...\n" */
    char cache_root[400]; /* "" = no cache folder */
    int env_set;          /* XATTN_CUDA_CONFIG given: it overrides every stored winner */
    xattn__cuda_cfg env;
    struct xattn_ctx *owner; /* counts the bytes of the files read (may be NULL) */
    xattn__cuda_tuned *memo;
} xattn__cuda_tune;

/* Sets *t up for a device (name, compute capability major*10+minor, CUDA
 * driver version as cudaDriverGetVersion gives it) and reads
 * XATTN_CUDA_CONFIG (INVALID_ARGUMENT naming the variable when it does not
 * parse). */
xattn_status xattn__cuda_tune_init(xattn__cuda_tune *t, struct xattn_ctx *owner, const char *name,
                                   int cc, int driver);
void xattn__cuda_tune_free(xattn__cuda_tune *t);

/* The configuration a case runs with: XATTN_CUDA_CONFIG's, else the stored
 * winner of (algo, q dtype, D, Dv) when there is one (*tuned = 1), else the
 * default. A stale, corrupt or unreadable entry is ignored with a warning
 * through the log callback. The caller's last error is kept. */
xattn__cuda_cfg xattn__cuda_tune_cfg(xattn__cuda_tune *t, int algo, int dtype, int64_t d,
                                     int64_t dv, int *tuned);

/* Stores cfg as the winner of a case (<cache root>/cuda/tune-<hash>.txt),
 * replacing an earlier one; this context uses it from its next call on.
 * INVALID_ARGUMENT for an algorithm other than FLASH or SPLITKV, a bad
 * dtype or head dims; IO when there is no cache folder or the file cannot be
 * written. */
xattn_status xattn__cuda_tune_store(xattn__cuda_tune *t, int algo, int dtype, int64_t d, int64_t dv,
                                    const xattn__cuda_cfg *cfg);

/* Reads the stored winner of a case from disk (not the memo): 1 with *cfg, 0
 * when there is none or it is ignored (with a warning saying why). */
int xattn__cuda_tune_read(const xattn__cuda_tune *t, int algo, int dtype, int64_t d, int64_t dv,
                          xattn__cuda_cfg *cfg);

/* The arguments of the public store and lookup: INVALID_ARGUMENT /
 * INVALID_DTYPE / INVALID_SHAPE naming the bad one. */
xattn_status xattn__cuda_tune_args(int algo, int dtype, int64_t d, int64_t dv);

#endif
