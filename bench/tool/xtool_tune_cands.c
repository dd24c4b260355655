/*
 * The candidate tiles of xattn tune (xtool_tune.h): the table. Changing a row
 * changes what tune tries, nothing else.
 */
#include <stddef.h>

#include "xtool_tune.h"

/* Keys over the device's table row (XATTN_CL_TILE's form). CPU-class devices
 * (PoCL, Intel's CPU runtime) run FLASH/SPLITKV in the row form (rows > 0:
 * one work-item a block of rows, K/V tiles in private memory) and NAIVE's
 * products from global memory; GPUs in work-groups with K/V tiles in local
 * memory. Each list tries the other form once, in case a device is not what
 * its type says. */
static const char *const xtool__cpu_flash[] = {
    "rows=4,bk=32",  "rows=8,bk=16",  "rows=8,bk=32",      "rows=8,bk=64",
    "rows=16,bk=16", "rows=16,bk=64", "rows=0,bq=16,bk=32"};
static const char *const xtool__gpu_flash[] = {"rows=0,bq=32,bk=16",  "rows=0,bq=32,bk=32",
                                               "rows=0,bq=64,bk=16",  "rows=0,bq=64,bk=64",
                                               "rows=0,bq=128,bk=32", "rows=8,bk=32"};
static const char *const xtool__cpu_naive[] = {"nt=8,naive_local=0", "nt=32,naive_local=0",
                                               "nt=16,naive_local=1", "nt=16,rwg=16"};
static const char *const xtool__gpu_naive[] = {"nt=8,naive_local=1", "nt=32,naive_local=1",
                                               "nt=16,rwg=256", "nt=16,naive_local=0"};
static const char *const xtool__cpu_splitkv_extra[] = {"cwg=64"};
static const char *const xtool__gpu_splitkv_extra[] = {"cwg=32", "cwg=128"};

#define XTOOL__N(a) (int)(sizeof(a) / sizeof((a)[0]))

int xtool_tune_candidates(xattn_algo algo, int cpu_class, const char **out, int cap)
{
    int n = 0;
#define XTOOL__ADD(list)                                                                           \
    for (int i = 0; i < XTOOL__N(list) && n < cap; i++)                                            \
    out[n++] = (list)[i]
    if (algo == XATTN_ALGO_NAIVE) {
        if (cpu_class) {
            XTOOL__ADD(xtool__cpu_naive);
        } else {
            XTOOL__ADD(xtool__gpu_naive);
        }
    } else if (algo == XATTN_ALGO_FLASH || algo == XATTN_ALGO_SPLITKV) {
        if (cpu_class) {
            XTOOL__ADD(xtool__cpu_flash);
        } else {
            XTOOL__ADD(xtool__gpu_flash);
        }
        if (algo == XATTN_ALGO_SPLITKV && cpu_class) {
            XTOOL__ADD(xtool__cpu_splitkv_extra);
        } else if (algo == XATTN_ALGO_SPLITKV) {
            XTOOL__ADD(xtool__gpu_splitkv_extra);
        }
    }
#undef XTOOL__ADD
    return n;
}

/* CUDA: what a run can choose without recompiling (xattn_cuda.h): the SIMT
 * kernels instead of the tensor-core ones (FLASH and the SPLITKV partial;
 * the same kernels where mma does not apply: f32, sm_75), and for SPLITKV
 * the waves of blocks over the SMs its split count aims at (the default 2). */
static const char *const xtool__cuda_flash[] = {"path=simt"};
static const char *const xtool__cuda_splitkv[] = {"waves=1",  "waves=4",   "waves=8",
                                                  "waves=16", "path=simt", "path=simt,waves=4"};

int xtool_tune_cuda_candidates(xattn_algo algo, const char **out, int cap)
{
    int n = 0;
    const char *const *list = NULL;
    int len = 0;
    if (algo == XATTN_ALGO_FLASH) {
        list = xtool__cuda_flash;
        len = XTOOL__N(xtool__cuda_flash);
    } else if (algo == XATTN_ALGO_SPLITKV) {
        list = xtool__cuda_splitkv;
        len = XTOOL__N(xtool__cuda_splitkv);
    }
    for (int i = 0; i < len && n < cap; i++)
        out[n++] = list[i];
    return n;
}
