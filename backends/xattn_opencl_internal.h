/*
 * Internals shared by the files of the OpenCL backend's host module (not a
 * public header):
 *   xattn_backend_opencl.c   contexts, buffers, the algorithm driver's
 *                            operations (plan, prepare, phases, finish), the
 *                            ceilings micro-benchmarks, the backend table
 *   xattn_opencl_program.c   devices, kernel sources, programs built per
 *                            configuration and cached in memory and on disk
 *   xattn_opencl_tiles.c     the tile table, XATTN_CL_TILE, fitting a tile to
 *                            a device and the work it implies
 *   xattn_opencl_interop.c   include/xattn_opencl.h: the caller's OpenCL objects
 * The overview (program configurations, environment, disk cache format) is at
 * the top of xattn_backend_opencl.c.
 */
#ifndef XATTN_OPENCL_INTERNAL_H
#define XATTN_OPENCL_INTERNAL_H

#include <stdint.h>

#include "xattn_backend_opencl.h"
#include "xattn_internal.h"
#include "xattn_opencl.h"

/* ---- small helpers ------------------------------------------------------- */

static inline uint64_t xattn__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define XATTN_FNV_INIT 0xcbf29ce484222325ull

static inline void xattn__cl_dev_str(cl_device_id dev, cl_device_info what, char *out, size_t n)
{
    out[0] = '\0';
    size_t got = 0;
    if (clGetDeviceInfo(dev, what, n - 1, out, &got) != CL_SUCCESS)
        out[0] = '\0';
    out[n - 1] = '\0';
}

static inline int64_t xattn__ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static inline int xattn__pow2_ceil(int x)
{
    int p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

typedef struct xattn_cl_dev {
    cl_platform_id platform;
    cl_device_id device;
} xattn_cl_dev;
typedef struct xattn_cl_tile {
    int bq;           /* FLASH/SPLITKV query rows per work-group (one work-item each) */
    int bk;           /* FLASH/SPLITKV keys per local-memory tile */
    int nt;           /* NAIVE qk/pv tile edge (work-group nt x nt) */
    int rwg;          /* NAIVE softmax work-items per row (power of two) */
    int cwg;          /* SPLITKV combine work-items along Dv */
    int naive_local;  /* NAIVE qk/pv: 1 = tiles staged in local memory, 0 = straight
                         from global memory (CPUs, whose local memory is emulated) */
    int fixed_dtypes; /* 1 = dtypes are build constants (a program per dtype pair),
                         0 = read at run time (one program for all) */
    int fixed_dims;   /* 1 = common head dims (32 64 80 96 128 256) are build constants,
                         0 = every head dim is an argument (power-of-two buckets) */
    int rows;         /* FLASH/SPLITKV form: 0 = work-groups of bq work-items, a row each,
                         K/V tiles in local memory (GPUs); R > 0 = one work-item a
                         work-group, R rows of a KV head each, K/V tiles in private
                         memory, no barrier (CPU devices; kernels_cl/xattn_cl_rows.cl) */
    int tuned;        /* 1 = a stored winner of `xattn tune` (not a build option) */
} xattn_cl_tile;

/* A stored winner looked up (xattn_opencl_tiles.c): found or not, per
 * (algorithm, dtype, D, Dv), so that a context reads each entry once. */
typedef struct xattn_cl_tuned {
    struct xattn_cl_tuned *next;
    int algo, dtype;
    int64_t d, dv;
    int found;
    xattn_cl_tile tile;
} xattn_cl_tuned;
typedef struct xattn_cl_tune_memo {
    xattn_cl_tuned *head;
} xattn_cl_tune_memo;

/* A row of the tile table (xattn_opencl_tiles.c). */
typedef struct xattn_cl_tile_row {
    const char *device_class;
    cl_device_type type; /* 0: the default row, which matches every device */
    xattn_cl_tile tile;
} xattn_cl_tile_row;
/* ---- context state ------------------------------------------------------- */

enum {
    XATTN_CL_K_QK,
    XATTN_CL_K_SOFTMAX,
    XATTN_CL_K_PV,
    XATTN_CL_K_FLASH,
    XATTN_CL_K_PARTIAL,
    XATTN_CL_K_COMBINE,
    XATTN_CL_K_COUNT_SUM,
    XATTN_CL_NUM_KERNELS
};

extern const char *const xattn__cl_kernel_names[XATTN_CL_NUM_KERNELS];

/* One built program: the configuration asked for (key) and as built. */
typedef struct xattn_cl_prog {
    struct xattn_cl_prog *next;
    char key[512];      /* build options of the configuration asked for */
    xattn_cl_tile tile; /* as built (may be smaller than asked, to fit the device) */
    int dmax, dvmax;
    cl_program program;
    cl_kernel kernels[XATTN_CL_NUM_KERNELS];
} xattn_cl_prog;

typedef struct xattn_cl_scratch {
    cl_mem mem[4];
    uint64_t bytes[4];
    int n;
} xattn_cl_scratch;

typedef struct xattn_cl_phase {
    const char *name;
    cl_event ev;
    double host_ms; /* queues without profiling: timed on the host */
} xattn_cl_phase;

typedef struct xattn_cl_counts {
    cl_mem mem;
    uint64_t n[3]; /* segment lengths */
} xattn_cl_counts;

/* The call in progress (prepare .. finish; a context serves one call at a
 * time): its program, the buffers it holds (the per-sequence arrays, the
 * counts), and its phases' events. */
typedef struct xattn_cl_call {
    struct xattn_cl_prog *pg;
    xattn_cl_scratch held;
    cl_mem meta;
    xattn_cl_counts counts;
    int count; /* the kernels write their counts (timed calls) */
    xattn_cl_phase ph[3];
} xattn_cl_call;

typedef struct xattn_cl_ctx {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
    int profiling; /* the queue has CL_QUEUE_PROFILING_ENABLE */

    /* device facts the dispatch needs */
    cl_device_type type;
    size_t max_wg;
    cl_ulong local_mem, max_alloc;
    cl_uint compute_units;
    char cache_ident[1024]; /* device, vendor, driver, platform version: the disk-cache key */

    xattn_cl_tile tile; /* from the table (and XATTN_CL_TILE) */
    const char *tile_class;
    int tile_env;             /* XATTN_CL_TILE is set: stored winners are not used */
    xattn_cl_tune_memo *tune; /* stored winners read so far (a pointer: plan's c is const) */

    /* kernel sources: embedded, or XATTN_CL_SOURCE_DIR's files */
    int nsrc;
    const char **src;
    size_t *src_len;
    char **src_owned; /* files read from XATTN_CL_SOURCE_DIR (else NULL) */
    char src_origin[512];
    uint64_t src_hash;

    char cache_dir[1024]; /* "" = no disk cache; else <cache_root>/opencl */
    char cache_root[1024];
    int cache_write; /* store binaries after source builds (XATTN_CL_BINARY_CACHE) */
    const char *cache_policy;
    struct xattn_ctx *owner; /* whose allocator counts the cache files' bytes */

    xattn_cl_prog *progs;
    xattn_opencl_cache_stats stats;
    double last_build_ms;  /* of the last attention call */
    xattn__exec last_exec; /* the last attention call's counts (tests) */
    xattn_cl_call call;
} xattn_cl_ctx;

#define XATTN_CL_FLAG_CAUSAL 1
#define XATTN_CL_FLAG_BOTTOM_RIGHT 2
#define XATTN_CL_FLAG_VARLEN 4
#define XATTN_CL_FLAG_LSE 8
#define XATTN_CL_FLAG_BIAS 16
#define XATTN_CL_FLAG_BIAS_F16 32
#define XATTN_CL_FLAG_ALIBI 64
#define XATTN_CL_FLAG_COUNT 128    /* the kernels write their executed-work counts */
#define XATTN_CL_FLAG_SINKS 4096   /* bits 8-11 are the dtypes */
#define XATTN_CL_FLAG_KSCALE 8192  /* fp8 K/V: k_scale is set */
#define XATTN_CL_FLAG_VSCALE 16384 /* fp8 K/V: v_scale is set */
#define XATTN_CL_NUM_COMMON_ARGS 57
#define XATTN_CL_COUNT_HOST_MAX 512

/* ---- functions across the files ------------------------------------------ */

#define XATTN_CL_CHECK(call, what)                                                                 \
    do {                                                                                           \
        cl_int xattn__e = (call);                                                                  \
        if (xattn__e != CL_SUCCESS)                                                                \
            return xattn__cl_fail(xattn__e, what);                                                 \
    } while (0)

/* The devices every platform offers (xattn__cl_probe). */
extern xattn_cl_dev *xattn__cl_devs;
extern int xattn__cl_ndev;

/* xattn_opencl_program.c */
const char *xattn__cl_err_name(cl_int e);
xattn_status xattn__cl_fail(cl_int e, const char *what);
xattn_status xattn__cl_probe(void);
int xattn__cl_device_count(void);
xattn_status xattn__cl_describe(cl_device_id dev, xattn_device_info *info);
xattn_status xattn__cl_device_info(int index, xattn_device_info *info);
xattn_status xattn__cl_sources_load(xattn_cl_ctx *c);
void xattn__cl_cache_dir_resolve(xattn_cl_ctx *c);
void xattn__cl_prog_free(xattn_cl_prog *pg);
xattn_status xattn__cl_program(xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_prog **out);

/* xattn_opencl_tiles.c */
const xattn_cl_tile_row *xattn__cl_tile_row_of(cl_device_type type);
xattn_status xattn__cl_tile_parse(const char *text, xattn_cl_tile *t);
void xattn__cl_head_dim(int64_t d, int fixed, int *dmax, int *dfix);
void xattn__cl_options(char *out, size_t n, int qdt, int kdt, int dmax, int dfix, int dvmax,
                       int dvfix, const xattn_cl_tile *t);
xattn_status xattn__cl_tile_fit(const xattn_cl_ctx *c, xattn_cl_tile *t, int dmax, int dvmax,
                                const char *refuse_env);
uint64_t xattn__cl_flash_groups(const xattn_problem *p, const xattn_cl_tile *t);
int xattn__cl_num_splits(const xattn_cl_ctx *c, const xattn_problem *p, const xattn_cl_tile *t);
xattn_status xattn__cl_tile_of(const xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_tile *t);
void xattn__cl_count_segments(const xattn_problem *p, const xattn_cl_tile *t, int splits,
                              uint64_t n[3]);
void xattn__cl_tile_base(const xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_tile *t);
void xattn__cl_tune_free(xattn_cl_ctx *c);
void xattn__cl_tile_format(const xattn_cl_tile *t, char *out, size_t n);
xattn_status xattn__cl_tile_check(const xattn_cl_ctx *c, const char *text, int64_t d, int64_t dv,
                                  xattn_cl_tile *out);

/* xattn_backend_opencl.c */
int xattn__is_cl_ctx(const xattn_ctx *ctx);
void xattn__cl_state_free(xattn_cl_ctx *c);
xattn_status xattn__cl_state_init(xattn_cl_ctx *c);
/* Where the bytes of buf's cl_mem (buf->native) are, for the aliasing check
 * of xattn_validate.c: through the root object of a sub-buffer and the
 * sub-buffer's offset in it (see the definition). Unplace undoes it (the
 * buffer's release does). */
void xattn__cl_buffer_place(struct xattn_buffer *buf);
void xattn__cl_buffer_unplace(struct xattn_buffer *buf);

#endif /* XATTN_OPENCL_INTERNAL_H */
