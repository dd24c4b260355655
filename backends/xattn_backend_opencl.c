/*
 * The OpenCL backend's host module: device enumeration across all platforms,
 * contexts (own or the caller's objects, see include/xattn_opencl.h), buffers,
 * programs built per configuration and cached in memory and on disk, and the
 * three algorithms enqueued and timed with OpenCL event profiling. The kernels
 * live in kernels_cl/ and are embedded at build time (xattn_backend_opencl.h).
 *
 * Program configuration = (q/o dtype, k/v dtype, D, Dv, tile). D and Dv that
 * are common head sizes are build-time constants (the fast path); any other
 * size is given to the kernels as an argument and only rounds the array sizes
 * up to a power of two (the generic path), which keeps the number of distinct
 * programs small. All six kernels are in every program.
 *
 * Environment:
 *   XATTN_CL_SOURCE_DIR  folder of .cl files replacing the embedded sources
 *   XATTN_CL_TILE        tile override, e.g. "bq=16,bk=32,nt=16,rwg=64,cwg=32,
 *                        naive_local=1" (any subset of the keys)
 *   XATTN_CACHE_DIR      disk cache root ("" disables the disk cache); default
 *                        $XDG_CACHE_HOME/xattn or ~/.cache/xattn. Binaries go
 *                        to <root>/opencl.
 *   XATTN_CL_BINARY_CACHE  auto (default) | on | off: whether program binaries
 *                        are stored after a source build (cached binaries are
 *                        read whenever present, except with off). auto stores
 *                        them unless a driver quirk makes exporting a binary
 *                        costly (PoCL, which also caches kernels itself).
 *
 * Disk cache file: "XATTNCL1", u32 key length, the key (device, vendor,
 * driver, versions, source hash, build options), u64 binary length, the
 * binary, u64 FNV-1a of the binary (xattn_file.c). Files are read and written
 * through xattn_file.c: only from the user's private cache folder, regular
 * files of a bounded size, counted by the context's allocator. Any mismatch,
 * an untrusted folder or file, or a binary the driver refuses falls back to a
 * source build (and a warning), never to an error.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_backend_opencl.h"
#include "xattn_file.h"
#include "xattn_internal.h"
#include "xattn_opencl.h"

/* ---- OpenCL error names -------------------------------------------------- */

#define XATTN_CL_ERR(c)                                                                            \
    {                                                                                              \
        c, #c                                                                                      \
    }
static const struct {
    cl_int code;
    const char *name;
} xattn__cl_errors[] = {
    XATTN_CL_ERR(CL_SUCCESS),
    XATTN_CL_ERR(CL_DEVICE_NOT_FOUND),
    XATTN_CL_ERR(CL_DEVICE_NOT_AVAILABLE),
    XATTN_CL_ERR(CL_COMPILER_NOT_AVAILABLE),
    XATTN_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE),
    XATTN_CL_ERR(CL_OUT_OF_RESOURCES),
    XATTN_CL_ERR(CL_OUT_OF_HOST_MEMORY),
    XATTN_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE),
    XATTN_CL_ERR(CL_MEM_COPY_OVERLAP),
    XATTN_CL_ERR(CL_IMAGE_FORMAT_MISMATCH),
    XATTN_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED),
    XATTN_CL_ERR(CL_BUILD_PROGRAM_FAILURE),
    XATTN_CL_ERR(CL_MAP_FAILURE),
    XATTN_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET),
    XATTN_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
    XATTN_CL_ERR(CL_COMPILE_PROGRAM_FAILURE),
    XATTN_CL_ERR(CL_LINKER_NOT_AVAILABLE),
    XATTN_CL_ERR(CL_LINK_PROGRAM_FAILURE),
    XATTN_CL_ERR(CL_DEVICE_PARTITION_FAILED),
    XATTN_CL_ERR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE),
    XATTN_CL_ERR(CL_INVALID_VALUE),
    XATTN_CL_ERR(CL_INVALID_DEVICE_TYPE),
    XATTN_CL_ERR(CL_INVALID_PLATFORM),
    XATTN_CL_ERR(CL_INVALID_DEVICE),
    XATTN_CL_ERR(CL_INVALID_CONTEXT),
    XATTN_CL_ERR(CL_INVALID_QUEUE_PROPERTIES),
    XATTN_CL_ERR(CL_INVALID_COMMAND_QUEUE),
    XATTN_CL_ERR(CL_INVALID_HOST_PTR),
    XATTN_CL_ERR(CL_INVALID_MEM_OBJECT),
    XATTN_CL_ERR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR),
    XATTN_CL_ERR(CL_INVALID_IMAGE_SIZE),
    XATTN_CL_ERR(CL_INVALID_SAMPLER),
    XATTN_CL_ERR(CL_INVALID_BINARY),
    XATTN_CL_ERR(CL_INVALID_BUILD_OPTIONS),
    XATTN_CL_ERR(CL_INVALID_PROGRAM),
    XATTN_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE),
    XATTN_CL_ERR(CL_INVALID_KERNEL_NAME),
    XATTN_CL_ERR(CL_INVALID_KERNEL_DEFINITION),
    XATTN_CL_ERR(CL_INVALID_KERNEL),
    XATTN_CL_ERR(CL_INVALID_ARG_INDEX),
    XATTN_CL_ERR(CL_INVALID_ARG_VALUE),
    XATTN_CL_ERR(CL_INVALID_ARG_SIZE),
    XATTN_CL_ERR(CL_INVALID_KERNEL_ARGS),
    XATTN_CL_ERR(CL_INVALID_WORK_DIMENSION),
    XATTN_CL_ERR(CL_INVALID_WORK_GROUP_SIZE),
    XATTN_CL_ERR(CL_INVALID_WORK_ITEM_SIZE),
    XATTN_CL_ERR(CL_INVALID_GLOBAL_OFFSET),
    XATTN_CL_ERR(CL_INVALID_EVENT_WAIT_LIST),
    XATTN_CL_ERR(CL_INVALID_EVENT),
    XATTN_CL_ERR(CL_INVALID_OPERATION),
    XATTN_CL_ERR(CL_INVALID_GL_OBJECT),
    XATTN_CL_ERR(CL_INVALID_BUFFER_SIZE),
    XATTN_CL_ERR(CL_INVALID_MIP_LEVEL),
    XATTN_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE),
    XATTN_CL_ERR(CL_INVALID_PROPERTY),
    XATTN_CL_ERR(CL_INVALID_IMAGE_DESCRIPTOR),
    XATTN_CL_ERR(CL_INVALID_COMPILER_OPTIONS),
    XATTN_CL_ERR(CL_INVALID_LINKER_OPTIONS),
    XATTN_CL_ERR(CL_INVALID_DEVICE_PARTITION_COUNT),
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};
#undef XATTN_CL_ERR

static const char *xattn__cl_err_name(cl_int e)
{
    for (size_t i = 0; i < sizeof xattn__cl_errors / sizeof xattn__cl_errors[0]; i++)
        if (xattn__cl_errors[i].code == e)
            return xattn__cl_errors[i].name;
    return "unknown OpenCL error";
}

/* Maps an OpenCL error onto a status, with "what failed: NAME (code)". */
static xattn_status xattn__cl_fail(cl_int e, const char *what)
{
    xattn_status st = XATTN_STATUS_BACKEND;
    if (e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
        e == CL_INVALID_BUFFER_SIZE)
        st = XATTN_STATUS_OUT_OF_MEMORY;
    return xattn__error(st, "%s failed: %s (%d)", what, xattn__cl_err_name(e), (int)e);
}

#define XATTN_CL_CHECK(call, what)                                                                 \
    do {                                                                                           \
        cl_int xattn__e = (call);                                                                  \
        if (xattn__e != CL_SUCCESS)                                                                \
            return xattn__cl_fail(xattn__e, what);                                                 \
    } while (0)

/* ---- small helpers ------------------------------------------------------- */

static uint64_t xattn__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define XATTN_FNV_INIT 0xcbf29ce484222325ull

static void xattn__cl_dev_str(cl_device_id dev, cl_device_info what, char *out, size_t n)
{
    out[0] = '\0';
    size_t got = 0;
    if (clGetDeviceInfo(dev, what, n - 1, out, &got) != CL_SUCCESS)
        out[0] = '\0';
    out[n - 1] = '\0';
}

static int64_t xattn__ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int xattn__pow2_ceil(int x)
{
    int p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

/* ---- devices ------------------------------------------------------------- */

typedef struct xattn_cl_dev {
    cl_platform_id platform;
    cl_device_id device;
} xattn_cl_dev;

static xattn_cl_dev *xattn__cl_devs;
static int xattn__cl_ndev;

/* Every available device with a compiler, on every platform, in platform order. */
static xattn_status xattn__cl_probe(void)
{
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e != CL_SUCCESS || np == 0)
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE,
                            "no OpenCL platform: clGetPlatformIDs returned %s (%d) and %u "
                            "platforms; is an OpenCL driver (ICD) installed, with its file in "
                            "/etc/OpenCL/vendors?",
                            xattn__cl_err_name(e), (int)e, (unsigned)np);
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "OpenCL probe: out of host memory");
    e = clGetPlatformIDs(np, plats, NULL);
    if (e != CL_SUCCESS) {
        free(plats);
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE, "clGetPlatformIDs failed: %s (%d)",
                            xattn__cl_err_name(e), (int)e);
    }
    int cap = 0, n = 0;
    xattn_cl_dev *devs = NULL;
    char reasons[512] = "";
    for (cl_uint pi = 0; pi < np; pi++) {
        cl_uint nd = 0;
        e = clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (e != CL_SUCCESS || nd == 0) {
            char pname[128];
            pname[0] = '\0';
            clGetPlatformInfo(plats[pi], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
            pname[sizeof pname - 1] = '\0';
            size_t len = strlen(reasons);
            snprintf(reasons + len, sizeof reasons - len, "%splatform '%s': %s (%d)",
                     len ? "; " : "", pname, xattn__cl_err_name(e), (int)e);
            continue;
        }
        cl_device_id *ids = calloc(nd, sizeof *ids);
        if (!ids || clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) {
            free(ids);
            continue;
        }
        for (cl_uint di = 0; di < nd; di++) {
            cl_bool avail = CL_FALSE, comp = CL_FALSE;
            clGetDeviceInfo(ids[di], CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
            clGetDeviceInfo(ids[di], CL_DEVICE_COMPILER_AVAILABLE, sizeof comp, &comp, NULL);
            if (!avail || !comp) {
                char dname[128];
                xattn__cl_dev_str(ids[di], CL_DEVICE_NAME, dname, sizeof dname);
                size_t len = strlen(reasons);
                snprintf(reasons + len, sizeof reasons - len, "%sdevice '%s': %s", len ? "; " : "",
                         dname, !avail ? "not available" : "no compiler");
                continue;
            }
            if (n == cap) {
                int ncap = cap ? 2 * cap : 8;
                xattn_cl_dev *nd2 = realloc(devs, (size_t)ncap * sizeof *devs);
                if (!nd2)
                    break;
                devs = nd2;
                cap = ncap;
            }
            devs[n].platform = plats[pi];
            devs[n].device = ids[di];
            n++;
        }
        free(ids);
    }
    free(plats);
    if (n == 0) {
        free(devs);
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE,
                            "no usable OpenCL device on %u platform%s (%s)", (unsigned)np,
                            np == 1 ? "" : "s", reasons[0] ? reasons : "no devices");
    }
    xattn__cl_devs = devs;
    xattn__cl_ndev = n;
    return XATTN_STATUS_OK;
}

static int xattn__cl_device_count(void)
{
    return xattn__cl_ndev;
}

static const char *xattn__cl_type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (t & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

/* Fills info (everything but struct_size/backend/index) from a device. */
static xattn_status xattn__cl_describe(cl_device_id dev, xattn_device_info *info)
{
    cl_device_type type = 0;
    cl_int e = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "device: clGetDeviceInfo(CL_DEVICE_TYPE) failed: %s (%d)",
                            xattn__cl_err_name(e), (int)e);
    cl_platform_id plat = NULL;
    clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
    cl_uint cus = 0, mhz = 0;
    cl_ulong gmem = 0, lmem = 0, cache = 0, maxalloc = 0;
    size_t maxwg = 0;
    cl_device_fp_config fp64 = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof mhz, &mhz, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);

    char ext[8192], clc[128], ver[128];
    xattn__cl_dev_str(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    xattn__cl_dev_str(dev, CL_DEVICE_OPENCL_C_VERSION, clc, sizeof clc);
    xattn__cl_dev_str(dev, CL_DEVICE_VERSION, ver, sizeof ver);
    xattn__cl_dev_str(dev, CL_DEVICE_NAME, info->name, sizeof info->name);
    xattn__cl_dev_str(dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    xattn__cl_dev_str(dev, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    info->platform[0] = '\0';
    if (plat) {
        clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof info->platform - 1, info->platform, NULL);
        info->platform[sizeof info->platform - 1] = '\0';
    }
    info->compute_units = (int)cus;
    info->global_mem_bytes = gmem;
    info->local_mem_bytes = lmem;
    info->cache_bytes = cache;
    info->max_work_group_size = maxwg;
    info->fp16_supported = strstr(ext, "cl_khr_fp16") != NULL;
    info->fp64_supported = fp64 != 0 || strstr(ext, "cl_khr_fp64") != NULL;
    info->compute_capability = 0;
    info->cpu_features[0] = '\0';
    info->device_type = (type & CL_DEVICE_TYPE_GPU)           ? XATTN_DEVICE_TYPE_GPU
                        : (type & CL_DEVICE_TYPE_CPU)         ? XATTN_DEVICE_TYPE_CPU
                        : (type & CL_DEVICE_TYPE_ACCELERATOR) ? XATTN_DEVICE_TYPE_ACCELERATOR
                                                              : XATTN_DEVICE_TYPE_OTHER;
    snprintf(info->description, sizeof info->description,
             "%s %s; %s, %s; %u CUs @ %u MHz; global %.1f GiB (max alloc %.1f GiB), local %llu "
             "KiB, cache %llu KiB; max work-group %zu; fp16 %s, fp64 %s",
             xattn__cl_type_name(type), info->name, ver, clc, (unsigned)cus, (unsigned)mhz,
             (double)gmem / (1024.0 * 1024.0 * 1024.0),
             (double)maxalloc / (1024.0 * 1024.0 * 1024.0), (unsigned long long)(lmem >> 10),
             (unsigned long long)(cache >> 10), maxwg, info->fp16_supported ? "yes" : "no",
             info->fp64_supported ? "yes" : "no");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_device_info(int index, xattn_device_info *info)
{
    return xattn__cl_describe(xattn__cl_devs[index].device, info);
}

/* ---- tile table (CLBlast-style: data, a default row, an env override) ----- */

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
} xattn_cl_tile;

typedef struct xattn_cl_tile_row {
    const char *device_class;
    cl_device_type type; /* 0: the default row, which matches every device */
    xattn_cl_tile tile;
} xattn_cl_tile_row;

static const xattn_cl_tile_row xattn__cl_tile_table[] = {
    /* CPUs (PoCL): building a program costs seconds and running it little,
     * so one program serves every dtype and head-dim bucket. */
    /* class     type                  bq  bk  nt  rwg  cwg local dtypes dims rows */
    {"cpu", CL_DEVICE_TYPE_CPU, {16, 64, 16, 64, 16, 0, 0, 0, 16}},
    {"gpu", CL_DEVICE_TYPE_GPU, {64, 32, 16, 128, 64, 1, 1, 1, 0}},
    {"default", 0, {32, 16, 16, 64, 32, 1, 1, 1, 0}},
};

/* "bq=16,bk=32": overrides fields of *t; INVALID_ARGUMENT on a bad entry. */
static xattn_status xattn__cl_tile_parse(const char *text, xattn_cl_tile *t)
{
    const char *s = text;
    while (*s) {
        char key[16];
        size_t kl = strcspn(s, "=,");
        if (s[kl] != '=' || kl == 0 || kl >= sizeof key)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': expected key=value pairs separated by "
                                "commas (keys bq, bk, nt, rwg, cwg, naive_local, fixed_dtypes, "
                                "fixed_dims, rows)",
                                text);
        memcpy(key, s, kl);
        key[kl] = '\0';
        char *end;
        errno = 0;
        long val = strtol(s + kl + 1, &end, 10);
        int is_flag = !strcmp(key, "naive_local") || !strcmp(key, "fixed_dtypes") ||
                      !strcmp(key, "fixed_dims");
        const int is_rows = !strcmp(key, "rows");
        const long vmin = is_flag || is_rows ? 0 : 1, vmax = is_flag ? 1 : is_rows ? 16 : 4096;
        if (end == s + kl + 1 || (*end && *end != ',') || errno || val < vmin || val > vmax)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': value of '%s' must be an integer in %ld..%ld",
                                text, key, vmin, vmax);
        int *field = !strcmp(key, "bq")             ? &t->bq
                     : !strcmp(key, "bk")           ? &t->bk
                     : !strcmp(key, "nt")           ? &t->nt
                     : !strcmp(key, "rwg")          ? &t->rwg
                     : !strcmp(key, "cwg")          ? &t->cwg
                     : !strcmp(key, "naive_local")  ? &t->naive_local
                     : !strcmp(key, "fixed_dtypes") ? &t->fixed_dtypes
                     : !strcmp(key, "fixed_dims")   ? &t->fixed_dims
                     : is_rows                      ? &t->rows
                                                    : NULL;
        if (!field)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': unknown key '%s' (keys: bq, bk, nt, rwg, "
                                "cwg, naive_local, fixed_dtypes, fixed_dims, rows)",
                                text, key);
        if (field == &t->rwg && (val & (val - 1)))
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': rwg=%ld must be a power of two", text, val);
        *field = (int)val;
        s = *end ? end + 1 : end;
    }
    return XATTN_STATUS_OK;
}

/* ---- driver quirks (data, like the tile table) ----------------------------- */

typedef struct xattn_cl_quirk {
    const char *platform;   /* substring of CL_PLATFORM_NAME */
    int slow_binary_export; /* exporting a binary recompiles the kernels: do not store by default */
    const char *why;
} xattn_cl_quirk;

static const xattn_cl_quirk xattn__cl_quirks[] = {
    /* Measured with PoCL 3.1 on 2 cores: clGetProgramInfo(CL_PROGRAM_BINARIES)
     * compiles every kernel once more (~6 s a program, 5x the build), while
     * PoCL's own kernel cache (POCL_KERNEL_CACHE, on by default) already keeps
     * builds and compiled kernels across processes. */
    {"Portable Computing Language", 1,
     "auto: read only; PoCL recompiles every kernel to export a binary, and caches kernels "
     "itself"},
};

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
static const char *const xattn__cl_kernel_names[XATTN_CL_NUM_KERNELS] = {
    "xattn_naive_qk",        "xattn_naive_softmax",   "xattn_naive_pv", "xattn_flash",
    "xattn_splitkv_partial", "xattn_splitkv_combine", "xattn_count_sum"};

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

static int xattn__is_cl_ctx(const xattn_ctx *ctx)
{
    return ctx && ctx->be == &xattn__backend_opencl && ctx->bctx;
}

double xattn__opencl_last_build_ms(xattn_ctx *ctx)
{
    if (!xattn__is_cl_ctx(ctx))
        return -1.0;
    return ((xattn_cl_ctx *)ctx->bctx)->last_build_ms;
}

xattn_status xattn__opencl_cache_stats(xattn_ctx *ctx, xattn_opencl_cache_stats *out)
{
    if (!xattn__is_cl_ctx(ctx) || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "ctx/out: NULL or not an OpenCL context");
    *out = ((xattn_cl_ctx *)ctx->bctx)->stats;
    return XATTN_STATUS_OK;
}

xattn_status xattn__opencl_last_counts(xattn_ctx *ctx, double *qk, double *pv, double *kv_rows)
{
    if (!xattn__is_cl_ctx(ctx) || !qk || !pv || !kv_rows)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "ctx/qk/pv/kv_rows: NULL or not an OpenCL context");
    const xattn__exec *x = &((xattn_cl_ctx *)ctx->bctx)->last_exec;
    *qk = x->qk_pairs;
    *pv = x->pv_pairs;
    *kv_rows = x->kv_rows;
    return XATTN_STATUS_OK;
}

const char *xattn__opencl_cache_dir(xattn_ctx *ctx)
{
    return xattn__is_cl_ctx(ctx) ? ((xattn_cl_ctx *)ctx->bctx)->cache_dir : "";
}

/* ---- sources -------------------------------------------------------------- */

static char *xattn__read_file(const char *path, size_t *len, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && (size_t)n <= max && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)n + 1);
            if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            }
            if (buf) {
                buf[n] = '\0';
                *len = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

static xattn_status xattn__cl_sources_load(xattn_cl_ctx *c)
{
    int n = xattn__cl_source_count;
    c->nsrc = n;
    c->src = calloc((size_t)n, sizeof *c->src);
    c->src_len = calloc((size_t)n, sizeof *c->src_len);
    if (!c->src || !c->src_len)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "OpenCL sources: out of host memory");
    const char *dir = getenv("XATTN_CL_SOURCE_DIR");
    if (dir && *dir) {
        c->src_owned = calloc((size_t)n, sizeof *c->src_owned);
        if (!c->src_owned)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "OpenCL sources: out of host memory");
        for (int i = 0; i < n; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, xattn__cl_source_names[i]);
            c->src_owned[i] = xattn__read_file(path, &c->src_len[i], (size_t)16 << 20);
            if (!c->src_owned[i])
                return xattn__error(XATTN_STATUS_IO,
                                    "XATTN_CL_SOURCE_DIR='%s': cannot read %s (%s); the folder "
                                    "must hold every kernel source of the build",
                                    dir, path, strerror(errno));
            c->src[i] = c->src_owned[i];
        }
        snprintf(c->src_origin, sizeof c->src_origin, "XATTN_CL_SOURCE_DIR=%s", dir);
    } else {
        for (int i = 0; i < n; i++) {
            c->src[i] = (const char *)xattn__cl_source_data[i];
            c->src_len[i] = xattn__cl_source_sizes[i];
        }
        snprintf(c->src_origin, sizeof c->src_origin, "embedded");
    }
    uint64_t h = XATTN_FNV_INIT;
    for (int i = 0; i < n; i++) {
        h = xattn__fnv1a(h, xattn__cl_source_names[i], strlen(xattn__cl_source_names[i]) + 1);
        h = xattn__fnv1a(h, c->src[i], c->src_len[i]);
    }
    c->src_hash = h;
    return XATTN_STATUS_OK;
}

/* ---- disk cache ----------------------------------------------------------- */

static void xattn__cl_cache_dir_resolve(xattn_cl_ctx *c)
{
    c->cache_dir[0] = c->cache_root[0] = '\0';
    if (!xattn__cache_root(c->cache_root, sizeof c->cache_root) ||
        snprintf(c->cache_dir, sizeof c->cache_dir, "%s/opencl", c->cache_root) >=
            (int)sizeof c->cache_dir)
        c->cache_dir[0] = '\0';
}

/* The full key of a program (everything that changes its binary) and its file
 * name in the cache folder. */
static void xattn__cl_cache_key(const xattn_cl_ctx *c, const char *options, char *key, size_t keyn,
                                char *name, size_t namen)
{
    snprintf(key, keyn, "%s\nsources=%016llx\noptions=%s", c->cache_ident,
             (unsigned long long)c->src_hash, options);
    uint64_t h = xattn__fnv1a64(XATTN__FNV_INIT, key, strlen(key));
    snprintf(name, namen, "%016llx.clbin", (unsigned long long)h);
}

/* Reads the cached entry `name`: OK with the whole file in *file (*flen bytes,
 * counted by the context's allocator; free with xattn__file_free) and the
 * binary at *file + *off, *blen bytes; ABSENT; or SKIP with why. */
static int xattn__cl_cache_read(xattn_cl_ctx *c, const char *name, const char *key,
                                unsigned char **file, size_t *flen, size_t *off, size_t *blen,
                                char *why, size_t whyn)
{
    int dfd;
    int rc = xattn__cache_dir_open(c->cache_root, "opencl", 0, &dfd, why, whyn);
    if (rc != XATTN__FILE_OK)
        return rc;
    rc = xattn__file_read(dfd, name, XATTN__PROG_FILE_MAX, c->owner, "program cache file", file,
                          flen, why, whyn);
    close(dfd);
    if (rc != XATTN__FILE_OK)
        return rc;
    const char *reason = NULL;
    rc = xattn__prog_entry_parse(*file, *flen, key, off, blen, &reason);
    if (rc != XATTN__FILE_OK) {
        snprintf(why, whyn, "program cache file %s: %s", name, reason);
        xattn__file_free(c->owner, *file, *flen);
        *file = NULL;
    }
    return rc;
}

/* Writes the program's binary as the entry `name` (a temporary file, then a
 * rename); OK or SKIP with why. */
static int xattn__cl_cache_write(xattn_cl_ctx *c, cl_program prog, const char *name,
                                 const char *key, char *why, size_t whyn)
{
    size_t blen = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) != CL_SUCCESS ||
        blen == 0) {
        snprintf(why, whyn, "the driver gives no program binary");
        return XATTN__FILE_SKIP;
    }
    /* What would not be read back is not written. */
    if (blen > XATTN__PROG_FILE_MAX - XATTN__PROG_HEAD_MAX) {
        snprintf(why, whyn, "the program binary (%zu bytes) is larger than a cache file may be",
                 blen);
        return XATTN__FILE_SKIP;
    }
    unsigned char *bin = xattn__file_alloc(c->owner, blen, "program binary", why, whyn);
    if (!bin)
        return XATTN__FILE_SKIP;
    unsigned char *bins[1] = {bin};
    int rc = XATTN__FILE_SKIP;
    unsigned char head[XATTN__PROG_HEAD_MAX], tail[8];
    size_t hlen = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS)
        snprintf(why, whyn, "clGetProgramInfo(CL_PROGRAM_BINARIES) failed");
    else if (!(hlen = xattn__prog_entry_head(head, tail, key, bin, blen)))
        snprintf(why, whyn, "the program's key is too long");
    else {
        int dfd;
        rc = xattn__cache_dir_open(c->cache_root, "opencl", 1, &dfd, why, whyn);
        if (rc == XATTN__FILE_OK) {
            const xattn__file_part parts[3] = {{head, hlen}, {bin, blen}, {tail, 8}};
            rc = xattn__file_write(dfd, name, parts, 3, why, whyn);
            close(dfd);
        }
    }
    xattn__file_release(c->owner, bin, blen);
    return rc == XATTN__FILE_OK ? XATTN__FILE_OK : XATTN__FILE_SKIP;
}

/* ---- programs --------------------------------------------------------------- */

static void xattn__cl_prog_free(xattn_cl_prog *pg)
{
    if (!pg)
        return;
    for (int i = 0; i < XATTN_CL_NUM_KERNELS; i++)
        if (pg->kernels[i])
            clReleaseKernel(pg->kernels[i]);
    if (pg->program)
        clReleaseProgram(pg->program);
    free(pg);
}

/* Head dims that are build-time constants; any other size takes the generic
 * path with arrays rounded up to a power of two (at least 32). */
static void xattn__cl_head_dim(int64_t d, int fixed, int *dmax, int *dfix)
{
    static const int fast[] = {32, 64, 80, 96, 128, 256};
    for (size_t i = 0; fixed && i < sizeof fast / sizeof fast[0]; i++) {
        if (d == fast[i]) {
            *dmax = *dfix = fast[i];
            return;
        }
    }
    *dfix = 0;
    *dmax = xattn__pow2_ceil((int)(d < 32 ? 32 : d));
}

static void xattn__cl_options(char *out, size_t n, int qdt, int kdt, int dmax, int dfix, int dvmax,
                              int dvfix, const xattn_cl_tile *t)
{
    snprintf(out, n,
             "-cl-std=CL1.2 -DXATTN_QDT=%d -DXATTN_KDT=%d -DXATTN_DMAX=%d -DXATTN_DFIX=%d "
             "-DXATTN_DVMAX=%d -DXATTN_DVFIX=%d -DXATTN_BQ=%d -DXATTN_BK=%d -DXATTN_NT=%d "
             "-DXATTN_RWG=%d -DXATTN_CWG=%d -DXATTN_NAIVE_LOCAL=%d -DXATTN_ROWS=%d",
             qdt, kdt, dmax, dfix, dvmax, dvfix, t->bq, t->bk, t->nt, t->rwg, t->cwg,
             t->naive_local, t->rows);
}

/* Private arrays of FLASH and the SPLITKV partial, per work-item. The
 * work-group form (xattn_attend): the query row (dmax floats), the
 * accumulator (dvmax) and one tile's scores (bk). The row form
 * (xattn_rows_attend): rows query rows and accumulators, the K and V tile
 * (bk rows), in float8 columns, and two arrays of bk + 8 floats. */
static uint64_t xattn__cl_private_bytes(int rows, int bk, int dmax, int dvmax)
{
    if (rows == 0)
        return ((uint64_t)dmax + (uint64_t)dvmax + (uint64_t)bk) * 4u;
    const uint64_t cols = (uint64_t)(dmax + 7) / 8 * 8 + (uint64_t)(dvmax + 7) / 8 * 8;
    return ((uint64_t)(rows + bk) * cols + 2u * ((uint64_t)bk + 8u)) * 4u;
}

/* A CPU device runs a work-group on one thread, and that thread's stack holds
 * the private arrays of all its work-items (PoCL's work-item loops keep them
 * side by side): 4096 x (32 + 32 + 512) floats, 9 MiB, overflowed PoCL's 8 MiB
 * thread stack. A work-group may use at most an eighth of that. */
#define XATTN_CL_CPU_WG_PRIVATE_MAX (1u << 20)

/* Fits a tile to the device: work-group sizes within CL_DEVICE_MAX_WORK_GROUP_SIZE,
 * FLASH's K/V tiles within CL_DEVICE_LOCAL_MEM_SIZE, and on CPU devices a
 * work-group's private arrays within XATTN_CL_CPU_WG_PRIVATE_MAX (bq shrinks;
 * with `refuse_env` set, an XATTN_CL_TILE bq that would have to shrink for
 * that is refused instead). */
static xattn_status xattn__cl_tile_fit(const xattn_cl_ctx *c, xattn_cl_tile *t, int dmax, int dvmax,
                                       const char *refuse_env)
{
    size_t wg = c->max_wg ? c->max_wg : 1;
    while ((size_t)t->bq > wg && t->bq > 1)
        t->bq /= 2;
    while ((size_t)t->nt * (size_t)t->nt > wg && t->nt > 1)
        t->nt /= 2;
    while ((size_t)t->rwg > wg && t->rwg > 1)
        t->rwg /= 2;
    int cmax = xattn__pow2_ceil(dvmax);
    if (t->cwg > cmax)
        t->cwg = cmax;
    while ((size_t)t->cwg > wg && t->cwg > 1)
        t->cwg /= 2;
    /* Leave 1 KiB of local memory for the implementation's own use. FLASH
     * and the SPLITKV partial hold a K and a V tile and 2 x bq counts; NAIVE's
     * qk and pv two nt x (nt + 1) tiles; the softmax and xattn_count_sum rwg
     * values (floats, ulongs). */
    cl_ulong budget = c->local_mem > 1024 ? c->local_mem - 1024 : 0;
#define XATTN_CL_FLASH_LOCAL(t)                                                                    \
    ((cl_ulong)(t)->bk * (cl_ulong)(dmax + dvmax) * 4u + 16u * (cl_ulong)(t)->bq)
    /* (The row form holds no local memory.) */
    while (t->rows == 0 && t->bk > 1 && XATTN_CL_FLASH_LOCAL(t) > budget)
        t->bk /= 2;
    if ((t->rows == 0 && XATTN_CL_FLASH_LOCAL(t) > budget) ||
        2u * (cl_ulong)t->nt * (cl_ulong)(t->nt + 1) * 4u > budget ||
        (cl_ulong)t->rwg * 8u > budget)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "OpenCL: the device's %llu bytes of local memory cannot hold the "
                            "kernels' arrays (one key of K and V: D array %d + Dv array %d "
                            "floats; NAIVE nt=%d: 2 x nt x (nt + 1) floats; rwg=%d floats)",
                            (unsigned long long)c->local_mem, dmax, dvmax, t->nt, t->rwg);
    if (t->rows > 0) {
        /* The row form: a work-group is one work-item, whose private arrays
         * grow with rows and bk. Every device type: a GPU may run it too. */
        uint64_t wi = xattn__cl_private_bytes(t->rows, t->bk, dmax, dvmax);
        if (refuse_env && wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': rows=%d with bk=%d needs %llu bytes of "
                                "private arrays a work-item (D %d, Dv %d at the smallest head "
                                "dims), more than %u: lower rows or bk",
                                refuse_env, t->rows, t->bk, (unsigned long long)wi, dmax, dvmax,
                                XATTN_CL_CPU_WG_PRIVATE_MAX);
        while (t->bk > 1 && wi > XATTN_CL_CPU_WG_PRIVATE_MAX) {
            t->bk /= 2;
            wi = xattn__cl_private_bytes(t->rows, t->bk, dmax, dvmax);
        }
    } else if (c->type & CL_DEVICE_TYPE_CPU) {
        const uint64_t wi = xattn__cl_private_bytes(0, t->bk, dmax, dvmax);
        if (refuse_env && (uint64_t)t->bq * wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            return xattn__error(
                XATTN_STATUS_INVALID_ARGUMENT,
                "XATTN_CL_TILE='%s': bq=%d work-items x %llu bytes of private arrays each (D %d "
                "+ Dv %d + bk %d floats, at the smallest head dims) need %llu bytes a "
                "work-group; a CPU device runs a work-group on one thread's stack, which allows "
                "%u: lower bq or bk",
                refuse_env, t->bq, (unsigned long long)wi, dmax, dvmax, t->bk,
                (unsigned long long)((uint64_t)t->bq * wi), XATTN_CL_CPU_WG_PRIVATE_MAX);
        while (t->bq > 1 && (uint64_t)t->bq * wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            t->bq /= 2;
    }
    return XATTN_STATUS_OK;
#undef XATTN_CL_FLASH_LOCAL
}

/* "clBuildProgram failed: ...; build log: ..." with the log's head. */
static xattn_status xattn__cl_build_error(xattn_cl_ctx *c, cl_program prog, cl_int e,
                                          const char *options)
{
    size_t n = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
        n > 0) {
        log = malloc(n + 1);
        if (log && clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) !=
                       CL_SUCCESS)
            log[0] = '\0';
        if (log)
            log[n] = '\0';
    }
    xattn_status st = (e == CL_OUT_OF_HOST_MEMORY || e == CL_OUT_OF_RESOURCES)
                          ? XATTN_STATUS_OUT_OF_MEMORY
                          : XATTN_STATUS_BUILD_FAILED;
    xattn__error(
        st, "clBuildProgram failed: %s (%d); sources: %s; options: %s; build log:\n%.2800s",
        xattn__cl_err_name(e), (int)e, c->src_origin, options, log && log[0] ? log : "(empty)");
    free(log);
    return st;
}

/* Creates every kernel of pg->program; on failure, the failing kernel's name
 * in *failed and the OpenCL error (no message recorded: the caller decides). */
static cl_int xattn__cl_kernels_create(xattn_cl_prog *pg, const char **failed)
{
    for (int i = 0; i < XATTN_CL_NUM_KERNELS; i++) {
        cl_int e;
        pg->kernels[i] = clCreateKernel(pg->program, xattn__cl_kernel_names[i], &e);
        if (e != CL_SUCCESS) {
            pg->kernels[i] = NULL;
            *failed = xattn__cl_kernel_names[i];
            return e;
        }
    }
    return CL_SUCCESS;
}

/* Builds pg->program for `options`: from the disk cache when a valid binary is
 * there, else from source (then stores the binary). */
static xattn_status xattn__cl_build(xattn_cl_ctx *c, xattn_cl_prog *pg, const char *options,
                                    const char **how)
{
    cl_int e;
    char key[2048], name[64], why[1600];
    int use_disk = c->cache_dir[0] != '\0';
    if (use_disk) {
        xattn__cl_cache_key(c, options, key, sizeof key, name, sizeof name);
        unsigned char *file = NULL;
        size_t flen = 0, off = 0, blen = 0;
        int rc = xattn__cl_cache_read(c, name, key, &file, &flen, &off, &blen, why, sizeof why);
        if (rc == XATTN__FILE_OK) {
            const unsigned char *bins[1] = {file + off};
            cl_int bst = CL_SUCCESS;
            pg->program =
                clCreateProgramWithBinary(c->context, 1, &c->device, &blen, bins, &bst, &e);
            xattn__file_free(c->owner, file, flen);
            if (e == CL_SUCCESS && bst == CL_SUCCESS)
                e = clBuildProgram(pg->program, 1, &c->device, options, NULL, NULL);
            else if (e == CL_SUCCESS)
                e = bst;
            const char *failed = NULL;
            if (e == CL_SUCCESS) {
                e = xattn__cl_kernels_create(pg, &failed);
                if (e == CL_SUCCESS) {
                    c->stats.disk_hits++;
                    *how = "binary from the disk cache";
                    xattn__log(XATTN_LOG_DEBUG, "opencl: program loaded from %s/%s", c->cache_dir,
                               name);
                    return XATTN_STATUS_OK;
                }
            }
            for (int i = 0; i < XATTN_CL_NUM_KERNELS; i++) {
                if (pg->kernels[i])
                    clReleaseKernel(pg->kernels[i]);
                pg->kernels[i] = NULL;
            }
            if (pg->program)
                clReleaseProgram(pg->program);
            pg->program = NULL;
            snprintf(why, sizeof why,
                     "program cache file %s: the driver refused its binary (%s, %d)", name,
                     xattn__cl_err_name(e), (int)e);
            rc = XATTN__FILE_SKIP;
        }
        if (rc == XATTN__FILE_SKIP) {
            c->stats.disk_rejects++;
            xattn__log(XATTN_LOG_WARN,
                       "opencl: program cache in %s: %s; building from source instead",
                       c->cache_dir, why);
        }
    }

    pg->program = clCreateProgramWithSource(c->context, (cl_uint)c->nsrc, c->src, c->src_len, &e);
    if (e != CL_SUCCESS) {
        pg->program = NULL;
        return xattn__cl_fail(e, "clCreateProgramWithSource");
    }
    e = clBuildProgram(pg->program, 1, &c->device, options, NULL, NULL);
    if (e != CL_SUCCESS)
        return xattn__cl_build_error(c, pg->program, e, options);
    const char *failed = "";
    e = xattn__cl_kernels_create(pg, &failed);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_BUILD_FAILED,
                            "clCreateKernel(%s) failed: %s (%d); sources: %s", failed,
                            xattn__cl_err_name(e), (int)e, c->src_origin);
    c->stats.source_builds++;
    *how = "compiled from source";
    if (use_disk && c->cache_write) {
        if (xattn__cl_cache_write(c, pg->program, name, key, why, sizeof why) == XATTN__FILE_OK)
            c->stats.disk_writes++;
        else
            xattn__log(XATTN_LOG_WARN, "opencl: program binary not cached in %s: %s", c->cache_dir,
                       why);
    }
    return XATTN_STATUS_OK;
}

/* The program for a problem's configuration, from memory, disk or source. */
static xattn_status xattn__cl_program(xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_prog **out)
{
    int dmax, dfix, dvmax, dvfix;
    xattn_cl_tile t = c->tile;
    xattn__cl_head_dim(p->D, t.fixed_dims, &dmax, &dfix);
    xattn__cl_head_dim(p->Dv, t.fixed_dims, &dvmax, &dvfix);
    const int qdt = t.fixed_dtypes ? (int)p->q.dtype : -1;
    const int kdt = t.fixed_dtypes ? (int)p->k.dtype : -1;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_fit(c, &t, dmax, dvmax, NULL));
    char key[512];
    xattn__cl_options(key, sizeof key, qdt, kdt, dmax, dfix, dvmax, dvfix, &t);
    for (xattn_cl_prog *pg = c->progs; pg; pg = pg->next) {
        if (!strcmp(pg->key, key)) {
            c->stats.memory_hits++;
            *out = pg;
            return XATTN_STATUS_OK;
        }
    }

    double t0 = xattn__now();
    xattn_cl_prog *pg = NULL;
    xattn_status st = XATTN_STATUS_OK;
    const char *how = "";
    /* A kernel may run with fewer work-items than the device maximum (registers,
     * private memory): shrink the offending size and rebuild, a few times at most. */
    for (int attempt = 0; attempt < 4; attempt++) {
        pg = calloc(1, sizeof *pg);
        if (!pg)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "OpenCL program: out of host memory");
        snprintf(pg->key, sizeof pg->key, "%s", key);
        pg->tile = t;
        pg->dmax = dmax;
        pg->dvmax = dvmax;
        char options[512];
        xattn__cl_options(options, sizeof options, qdt, kdt, dmax, dfix, dvmax, dvfix, &t);
        st = xattn__cl_build(c, pg, options, &how);
        if (st != XATTN_STATUS_OK)
            break;
        size_t need[XATTN_CL_NUM_KERNELS] = {(size_t)t.nt * t.nt,
                                             (size_t)t.rwg,
                                             (size_t)t.nt * t.nt,
                                             (size_t)(t.rows ? 1 : t.bq),
                                             (size_t)(t.rows ? 1 : t.bq),
                                             (size_t)t.cwg,
                                             (size_t)t.rwg};
        int fits = 1;
        for (int i = 0; i < XATTN_CL_NUM_KERNELS; i++) {
            size_t kwg = 0;
            if (clGetKernelWorkGroupInfo(pg->kernels[i], c->device, CL_KERNEL_WORK_GROUP_SIZE,
                                         sizeof kwg, &kwg, NULL) != CL_SUCCESS ||
                kwg >= need[i])
                continue;
            fits = 0;
            switch (i) {
            case XATTN_CL_K_QK:
            case XATTN_CL_K_PV: t.nt = t.nt > 1 ? t.nt / 2 : 1; break;
            case XATTN_CL_K_SOFTMAX:
            case XATTN_CL_K_COUNT_SUM: t.rwg = t.rwg > 1 ? t.rwg / 2 : 1; break;
            case XATTN_CL_K_COMBINE: t.cwg = t.cwg > 1 ? t.cwg / 2 : 1; break;
            default: t.bq = t.bq > 1 ? t.bq / 2 : 1; break;
            }
            xattn__log(XATTN_LOG_INFO,
                       "opencl: kernel %s allows %zu work-items, fewer than %zu; rebuilding "
                       "with a smaller tile",
                       xattn__cl_kernel_names[i], kwg, need[i]);
        }
        if (fits)
            break;
        xattn__cl_prog_free(pg);
        pg = NULL;
    }
    if (st == XATTN_STATUS_OK && !pg)
        st = xattn__error(XATTN_STATUS_UNSUPPORTED,
                          "OpenCL: no tile of the kernels fits the device's work-group limits "
                          "(options %s)",
                          key);
    double ms = (xattn__now() - t0) * 1e3;
    c->last_build_ms += ms;
    c->stats.build_ms_total += ms;
    if (st != XATTN_STATUS_OK) {
        xattn__cl_prog_free(pg);
        return st;
    }
    pg->next = c->progs;
    c->progs = pg;
    xattn__log(XATTN_LOG_INFO,
               "opencl: program built in %.1f ms (%s; q/o %s, k/v %s, D %lld, Dv %lld; tile "
               "bq=%d bk=%d nt=%d rwg=%d cwg=%d naive_local=%d)",
               ms, how, xattn_dtype_name(p->q.dtype), xattn_dtype_name(p->k.dtype), (long long)p->D,
               (long long)p->Dv, pg->tile.bq, pg->tile.bk, pg->tile.nt, pg->tile.rwg, pg->tile.cwg,
               pg->tile.naive_local);
    *out = pg;
    return XATTN_STATUS_OK;
}

/* ---- context ------------------------------------------------------------- */

static void xattn__cl_state_free(xattn_cl_ctx *c)
{
    if (!c)
        return;
    if (c->queue)
        clFinish(c->queue);
    while (c->progs) {
        xattn_cl_prog *n = c->progs->next;
        xattn__cl_prog_free(c->progs);
        c->progs = n;
    }
    if (c->src_owned)
        for (int i = 0; i < c->nsrc; i++)
            free(c->src_owned[i]);
    free(c->src_owned);
    free(c->src);
    free(c->src_len);
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
}

/* Fills the device facts, tile, sources and cache folder of c (whose context,
 * device and queue are set). */
static xattn_status xattn__cl_state_init(xattn_cl_ctx *c)
{
    xattn__exec_init(&c->last_exec);
    cl_command_queue_properties qp = 0;
    XATTN_CL_CHECK(clGetCommandQueueInfo(c->queue, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL),
                   "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)");
    if (qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "queue: out-of-order command queues are not supported (the phases "
                            "of a call depend on each other); pass an in-order queue");
    c->profiling = (qp & CL_QUEUE_PROFILING_ENABLE) != 0;
    XATTN_CL_CHECK(clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL),
                   "clGetDeviceInfo(CL_DEVICE_TYPE)");
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc,
                    NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units,
                    &c->compute_units, NULL);
    size_t items[3] = {0, 0, 0}; /* the grids are 1-D: dimension 0 bounds a work-group too */
    if (clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL) ==
            CL_SUCCESS &&
        items[0] && items[0] < c->max_wg)
        c->max_wg = items[0];
    if (!c->max_wg)
        c->max_wg = 1;
    if (!c->compute_units)
        c->compute_units = 1;

    char name[256], vendor[128], driver[128], dver[128], pver[128] = "";
    xattn__cl_dev_str(c->device, CL_DEVICE_NAME, name, sizeof name);
    xattn__cl_dev_str(c->device, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    xattn__cl_dev_str(c->device, CL_DRIVER_VERSION, driver, sizeof driver);
    xattn__cl_dev_str(c->device, CL_DEVICE_VERSION, dver, sizeof dver);
    cl_platform_id plat = NULL;
    if (clGetDeviceInfo(c->device, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL) == CL_SUCCESS &&
        plat) {
        clGetPlatformInfo(plat, CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
        pver[sizeof pver - 1] = '\0';
    }
    snprintf(c->cache_ident, sizeof c->cache_ident,
             "xattn-opencl-cache 1\ndevice=%s\nvendor=%s\ndriver=%s\ndevice_version=%s\n"
             "platform=%s",
             name, vendor, driver, dver, pver);

    const xattn_cl_tile_row *row = NULL;
    size_t nrows = sizeof xattn__cl_tile_table / sizeof xattn__cl_tile_table[0];
    for (size_t i = 0; i < nrows && !row; i++)
        if (xattn__cl_tile_table[i].type == 0 || (xattn__cl_tile_table[i].type & c->type))
            row = &xattn__cl_tile_table[i];
    c->tile = row->tile;
    c->tile_class = row->device_class;
    const char *env = getenv("XATTN_CL_TILE");
    if (env && *env) {
        XATTN_RETURN_IF_ERROR(xattn__cl_tile_parse(env, &c->tile));
        /* A tile that cannot fit at the smallest head dims is refused here;
         * larger ones shrink it per program (xattn__cl_program). */
        xattn_cl_tile smallest = c->tile;
        xattn_status st = xattn__cl_tile_fit(c, &smallest, 32, 32, env);
        if (st == XATTN_STATUS_UNSUPPORTED) {
            char why[512]; /* a copy: the message is rewritten from it */
            snprintf(why, sizeof why, "%s", xattn_last_error());
            return xattn__error(st, "XATTN_CL_TILE='%s': %s", env, why);
        }
        XATTN_RETURN_IF_ERROR(st);
    }

    XATTN_RETURN_IF_ERROR(xattn__cl_sources_load(c));
    xattn__cl_cache_dir_resolve(c);

    /* Disk cache policy: binaries are always read when present; stored after a
     * source build unless XATTN_CL_BINARY_CACHE says otherwise ("off": neither,
     * "on": always, "auto": unless a quirk makes exporting a binary costly). */
    char pname[128] = "";
    if (plat) {
        clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        pname[sizeof pname - 1] = '\0';
    }
    const xattn_cl_quirk *quirk = NULL;
    for (size_t i = 0; i < sizeof xattn__cl_quirks / sizeof xattn__cl_quirks[0]; i++)
        if (strstr(pname, xattn__cl_quirks[i].platform))
            quirk = &xattn__cl_quirks[i];
    const char *policy = getenv("XATTN_CL_BINARY_CACHE");
    if (!policy || !*policy || !strcmp(policy, "auto")) {
        c->cache_write = !(quirk && quirk->slow_binary_export);
        c->cache_policy = c->cache_write ? "auto: read and store" : quirk->why;
    } else if (!strcmp(policy, "on")) {
        c->cache_write = 1;
        c->cache_policy = "on (XATTN_CL_BINARY_CACHE): read and store";
    } else if (!strcmp(policy, "off")) {
        c->cache_dir[0] = '\0';
        c->cache_policy = "off (XATTN_CL_BINARY_CACHE)";
    } else {
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "XATTN_CL_BINARY_CACHE='%s': expected auto, on or off", policy);
    }
    xattn__log(XATTN_LOG_INFO,
               "opencl: %s; tile row '%s'%s bq=%d bk=%d nt=%d rwg=%d cwg=%d naive_local=%d "
               "fixed_dtypes=%d fixed_dims=%d rows=%d; sources %s; "
               "program cache %s (%s); profiling %s",
               name, c->tile_class, env && *env ? " + XATTN_CL_TILE" : "", c->tile.bq, c->tile.bk,
               c->tile.nt, c->tile.rwg, c->tile.cwg, c->tile.naive_local, c->tile.fixed_dtypes,
               c->tile.fixed_dims, c->tile.rows, c->src_origin,
               c->cache_dir[0] ? c->cache_dir : "memory only", c->cache_policy,
               c->profiling ? "events" : "host clock");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_ctx_create(struct xattn_ctx *ctx)
{
    xattn_status st;
    xattn_cl_ctx *c = xattn__host_alloc(ctx, sizeof *c, "OpenCL context", &st);
    if (!c)
        return st;
    memset(c, 0, sizeof *c);
    c->owner = ctx;
    const xattn_cl_dev *d = &xattn__cl_devs[ctx->device];
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    cl_int e;
    c->device = d->device;
    c->context = clCreateContext(props, 1, &d->device, NULL, NULL, &e);
    if (e != CL_SUCCESS) {
        c->context = NULL;
        st = xattn__cl_fail(e, "clCreateContext");
    } else {
        c->queue = clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, &e);
        if (e != CL_SUCCESS) {
            c->queue = NULL;
            st = xattn__cl_fail(e, "clCreateCommandQueue");
        } else {
            st = xattn__cl_state_init(c);
        }
    }
    if (st != XATTN_STATUS_OK) {
        xattn__cl_state_free(c);
        xattn__host_free(ctx, c, sizeof *c);
        return st;
    }
    ctx->bctx = c;
    return XATTN_STATUS_OK;
}

static void xattn__cl_ctx_destroy(struct xattn_ctx *ctx)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (!c)
        return;
    xattn__cl_state_free(c);
    xattn__host_free(ctx, c, sizeof *c);
    ctx->bctx = NULL;
}

static xattn_status xattn__cl_sync(struct xattn_ctx *ctx)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clFinish(c->queue), "clFinish");
    return XATTN_STATUS_OK;
}

/* ---- buffers ------------------------------------------------------------- */

static xattn_status xattn__cl_buffer_alloc(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                           size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (c->max_alloc && bytes > c->max_alloc)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "bytes: %zu exceed the device's largest allocation "
                            "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu)",
                            bytes, (unsigned long long)c->max_alloc);
    cl_int e;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e != CL_SUCCESS)
        return xattn__cl_fail(e, "clCreateBuffer");
    buf->native = m;
    buf->host = NULL;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_buffer_wrap_host(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                               void *ptr, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    cl_int e;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &e);
    if (e != CL_SUCCESS)
        return xattn__cl_fail(e, "clCreateBuffer(CL_MEM_USE_HOST_PTR)");
    buf->native = m;
    buf->host = NULL; /* reach the memory through the queue (the device may cache it) */
    return XATTN_STATUS_OK;
}

static void xattn__cl_buffer_release(struct xattn_ctx *ctx, struct xattn_buffer *buf)
{
    (void)ctx;
    if (buf->native)
        clReleaseMemObject((cl_mem)buf->native);
    buf->native = NULL;
}

static xattn_status xattn__cl_buffer_write(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                           size_t offset, const void *src, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clEnqueueWriteBuffer(c->queue, (cl_mem)buf->native, CL_TRUE, offset, bytes, src,
                                        0, NULL, NULL),
                   "clEnqueueWriteBuffer");
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_buffer_read(struct xattn_ctx *ctx, struct xattn_buffer *buf,
                                          size_t offset, void *dst, size_t bytes)
{
    xattn_cl_ctx *c = ctx->bctx;
    XATTN_CL_CHECK(clEnqueueReadBuffer(c->queue, (cl_mem)buf->native, CL_TRUE, offset, bytes, dst,
                                       0, NULL, NULL),
                   "clEnqueueReadBuffer");
    return XATTN_STATUS_OK;
}

/* ---- attention -------------------------------------------------------------- */

#define XATTN_CL_FLAG_CAUSAL 1
#define XATTN_CL_FLAG_BOTTOM_RIGHT 2
#define XATTN_CL_FLAG_VARLEN 4
#define XATTN_CL_FLAG_LSE 8
#define XATTN_CL_FLAG_BIAS 16
#define XATTN_CL_FLAG_BIAS_F16 32
#define XATTN_CL_FLAG_ALIBI 64
#define XATTN_CL_FLAG_COUNT 128 /* the kernels write their executed-work counts */
/* bits 8-9: q/o dtype, bits 10-11: k/v dtype (xattn_dtype values) */
#define XATTN_CL_NUM_COMMON_ARGS 48

/* Device memory of one call, accounted while it is held. */
static xattn_status xattn__cl_scratch_new(struct xattn_ctx *ctx, xattn_cl_scratch *s,
                                          uint64_t bytes, void *init, const char *what, cl_mem *out)
{
    xattn_cl_ctx *c = ctx->bctx;
    if (c->max_alloc && bytes > c->max_alloc)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "%s: %llu bytes exceed the device's largest allocation "
                            "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu)",
                            what, (unsigned long long)bytes, (unsigned long long)c->max_alloc);
    if (bytes > (uint64_t)SIZE_MAX)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW, "%s: %llu bytes do not fit size_t", what,
                            (unsigned long long)bytes);
    XATTN_RETURN_IF_ERROR(xattn__mem_acquire(ctx, bytes, what));
    cl_int e;
    cl_mem m = clCreateBuffer(c->context,
                              init ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE,
                              (size_t)bytes, init, &e);
    if (e != CL_SUCCESS) {
        xattn__mem_release(ctx, bytes);
        xattn_status st = xattn__cl_fail(e, "clCreateBuffer");
        return xattn__error(st, "%s (%s, %llu bytes)", xattn_last_error(), what,
                            (unsigned long long)bytes);
    }
    s->mem[s->n] = m;
    s->bytes[s->n] = bytes;
    s->n++;
    *out = m;
    return XATTN_STATUS_OK;
}

/* Releases the call's buffers: the runtime frees them once the enqueued
 * kernels that use them have finished. */
static void xattn__cl_scratch_free(struct xattn_ctx *ctx, xattn_cl_scratch *s)
{
    for (int i = 0; i < s->n; i++) {
        clReleaseMemObject(s->mem[i]);
        xattn__mem_release(ctx, s->bytes[i]);
    }
    s->n = 0;
}

/* Sets the XATTN_KARGS arguments (xattn_cl_common.cl) of a kernel. */
static cl_int xattn__cl_set_common(cl_kernel k, const xattn_problem *p, cl_mem meta, int count)
{
    cl_int e = CL_SUCCESS;
    cl_uint a = 0;
#define ARG_SET(size, ptr)                                                                         \
    do {                                                                                           \
        cl_int xattn__e2 = clSetKernelArg(k, a, (size), (ptr));                                    \
        if (e == CL_SUCCESS)                                                                       \
            e = xattn__e2;                                                                         \
        a++;                                                                                       \
    } while (0)
#define ARG_MEM(m)                                                                                 \
    do {                                                                                           \
        cl_mem xattn__m = (m);                                                                     \
        ARG_SET(sizeof xattn__m, &xattn__m);                                                       \
    } while (0)
#define ARG_LONG(x)                                                                                \
    do {                                                                                           \
        cl_long xattn__l = (cl_long)(x);                                                           \
        ARG_SET(sizeof xattn__l, &xattn__l);                                                       \
    } while (0)
#define ARG_INT(x)                                                                                 \
    do {                                                                                           \
        cl_int xattn__i = (cl_int)(x);                                                             \
        ARG_SET(sizeof xattn__i, &xattn__i);                                                       \
    } while (0)
#define ARG_FLOAT(x)                                                                               \
    do {                                                                                           \
        cl_float xattn__f = (cl_float)(x);                                                         \
        ARG_SET(sizeof xattn__f, &xattn__f);                                                       \
    } while (0)
#define ARG_VIEW(vw)                                                                               \
    do {                                                                                           \
        ARG_LONG((vw).off);                                                                        \
        ARG_LONG((vw).sb);                                                                         \
        ARG_LONG((vw).ss);                                                                         \
        ARG_LONG((vw).sh);                                                                         \
        ARG_LONG((vw).sd);                                                                         \
    } while (0)
    ARG_MEM((cl_mem)p->q.buf->native);
    ARG_MEM((cl_mem)p->k.buf->native);
    ARG_MEM((cl_mem)p->v.buf->native);
    ARG_MEM((cl_mem)p->o.buf->native);
    ARG_MEM(p->has_lse ? (cl_mem)p->lse.buf->native : meta);
    ARG_MEM(p->has_bias ? (cl_mem)p->bias.buf->native : meta);
    ARG_MEM(meta);
    ARG_VIEW(p->q);
    ARG_VIEW(p->k);
    ARG_VIEW(p->v);
    ARG_VIEW(p->o);
    ARG_LONG(p->has_lse ? p->lse.off : 0);
    ARG_LONG(p->has_lse ? p->lse.sb : 0);
    ARG_LONG(p->has_lse ? p->lse.sh : 0);
    ARG_LONG(p->has_lse ? p->lse.ss : 0);
    if (p->has_bias) {
        ARG_LONG(p->bias.off);
        ARG_LONG(p->bias.sb);
        ARG_LONG(p->bias.sh);
        ARG_LONG(p->bias.ss);
        ARG_LONG(p->bias.sd);
    } else {
        for (int i = 0; i < 5; i++)
            ARG_LONG(0);
    }
    ARG_LONG(p->window_left);
    ARG_LONG(p->window_right);
    ARG_INT(p->B);
    ARG_INT(p->Hq);
    ARG_INT(p->group);
    ARG_INT(p->D);
    ARG_INT(p->Dv);
    ARG_INT(p->Sq);
    ARG_INT(p->Sk);
    int flags = (p->causal ? XATTN_CL_FLAG_CAUSAL : 0) |
                (p->bottom_right ? XATTN_CL_FLAG_BOTTOM_RIGHT : 0) |
                (p->varlen ? XATTN_CL_FLAG_VARLEN : 0) | (p->has_lse ? XATTN_CL_FLAG_LSE : 0) |
                (p->has_bias ? XATTN_CL_FLAG_BIAS : 0) |
                (p->has_bias && p->bias.dtype == XATTN_DTYPE_F16 ? XATTN_CL_FLAG_BIAS_F16 : 0) |
                (p->alibi ? XATTN_CL_FLAG_ALIBI : 0) | (count ? XATTN_CL_FLAG_COUNT : 0) |
                ((int)p->q.dtype << 8) | ((int)p->k.dtype << 10);
    ARG_INT(flags);
    ARG_FLOAT(p->scale);
    ARG_FLOAT(p->softcap);
#undef ARG_VIEW
#undef ARG_FLOAT
#undef ARG_INT
#undef ARG_LONG
#undef ARG_MEM
#undef ARG_SET
    if (e == CL_SUCCESS && a != XATTN_CL_NUM_COMMON_ARGS)
        e = CL_INVALID_ARG_INDEX;
    return e;
}

static cl_int xattn__cl_arg_mem(cl_kernel k, cl_uint i, cl_mem m)
{
    return clSetKernelArg(k, i, sizeof(cl_mem), &m);
}

static cl_int xattn__cl_arg_int(cl_kernel k, cl_uint i, int v)
{
    cl_int x = v;
    return clSetKernelArg(k, i, sizeof x, &x);
}

/* One phase: a kernel launch, timed when asked. */
static xattn_status xattn__cl_launch(xattn_cl_ctx *c, const xattn_problem *p, cl_kernel k,
                                     cl_mem meta, int kind, size_t local, uint64_t groups,
                                     int timed, int count, xattn_cl_phase *ph)
{
    if (groups == 0)
        return XATTN_STATUS_OK; /* nothing to do (Sk = 0 for the score phase) */
    uint64_t items;
    if (xattn__mul_overflow(groups, (uint64_t)local, &items) || items > (uint64_t)SIZE_MAX)
        return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                            "OpenCL: %s needs %llu work-groups of %zu, more work-items than "
                            "size_t counts",
                            xattn__cl_kernel_names[kind], (unsigned long long)groups, local);
    const size_t global = (size_t)items;
    cl_int e = xattn__cl_set_common(k, p, meta, count);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_BACKEND, "clSetKernelArg(%s) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], xattn__cl_err_name(e), (int)e);
    double t0 = timed && !c->profiling ? xattn__now() : 0.0;
    e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &global, &local, 0, NULL,
                               timed && c->profiling ? &ph->ev : NULL);
    if (e != CL_SUCCESS)
        return xattn__error(e == CL_OUT_OF_RESOURCES || e == CL_MEM_OBJECT_ALLOCATION_FAILURE
                                ? XATTN_STATUS_OUT_OF_MEMORY
                                : XATTN_STATUS_BACKEND,
                            "clEnqueueNDRangeKernel(%s, %zu x %llu work-items) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], local, (unsigned long long)groups,
                            xattn__cl_err_name(e), (int)e);
    if (timed && !c->profiling) {
        e = clFinish(c->queue);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clFinish");
        ph->host_ms = (xattn__now() - t0) * 1e3;
    }
    return XATTN_STATUS_OK;
}

/*
 * Executed-work counts (kernels_cl/xattn_cl_common.cl, "executed-work counts"):
 * a ulong array of the three sums, then three segments that the kernels fill
 * (scores computed, keys added into O, K/V rows loaded). The kernels write
 * them when the call is timed, which synchronizes anyway: reading the sums
 * back then costs one small read, and untimed calls stay asynchronous. The
 * array is allocated either way, so that a call's workspace (and what a memory
 * limit lets through) does not depend on whether times were asked for.
 */
/* Up to this many counts are read back and added on the host (a stack
 * buffer); more are added on the device first (xattn_count_sum). */
#define XATTN_CL_COUNT_HOST_MAX 512

static xattn_status xattn__cl_counts_new(struct xattn_ctx *ctx, xattn_cl_scratch *scratch,
                                         xattn_cl_counts *cn, uint64_t n0, uint64_t n1, uint64_t n2,
                                         int poison, uint64_t *ws_bytes)
{
    uint64_t n, bytes;
    if (xattn__add_overflow(n0, n1, &n) || xattn__add_overflow(n, n2, &n) ||
        xattn__add_overflow(n, 3u, &n) || xattn__mul_overflow(n, 8u, &bytes))
        return xattn__error(
            XATTN_STATUS_SIZE_OVERFLOW,
            "OpenCL: the executed-work counts (%llu + %llu + %llu) overflow 64 bits",
            (unsigned long long)n0, (unsigned long long)n1, (unsigned long long)n2);
    XATTN_RETURN_IF_ERROR(
        xattn__cl_scratch_new(ctx, scratch, bytes, NULL, "OpenCL executed-work counts", &cn->mem));
    cn->n[0] = n0;
    cn->n[1] = n1;
    cn->n[2] = n2;
    *ws_bytes += bytes;
    if (poison) { /* a count that no kernel writes shows up as a huge sum */
        const cl_ulong all = ~(cl_ulong)0;
        xattn_cl_ctx *c = ctx->bctx;
        cl_int e = clEnqueueFillBuffer(c->queue, cn->mem, &all, sizeof all, 0, (size_t)bytes, 0,
                                       NULL, NULL);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueFillBuffer (poison counts)");
    }
    return XATTN_STATUS_OK;
}

/* Sets a kernel's (cnt, cnt_at) arguments at index a: the counts array and
 * where the kernel's part starts. */
static cl_int xattn__cl_arg_counts(cl_kernel k, cl_uint a, const xattn_cl_counts *cn, uint64_t at)
{
    cl_long off = (cl_long)at;
    cl_int e = clSetKernelArg(k, a, sizeof cn->mem, &cn->mem);
    return e != CL_SUCCESS ? e : clSetKernelArg(k, a + 1, sizeof off, &off);
}

/* The three sums of the counts (after the call's kernels, in queue order). */
static xattn_status xattn__cl_counts_sum(xattn_cl_ctx *c, xattn_cl_prog *pg,
                                         const xattn_cl_counts *cn, uint64_t sums[3])
{
    const uint64_t n = cn->n[0] + cn->n[1] + cn->n[2];
    cl_int e;
    if (n <= XATTN_CL_COUNT_HOST_MAX) {
        cl_ulong buf[XATTN_CL_COUNT_HOST_MAX];
        if (n && (e = clEnqueueReadBuffer(c->queue, cn->mem, CL_TRUE, 3 * sizeof(cl_ulong),
                                          (size_t)n * sizeof(cl_ulong), buf, 0, NULL, NULL)) !=
                     CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueReadBuffer (executed-work counts)");
        uint64_t at = 0;
        for (int seg = 0; seg < 3; seg++) {
            sums[seg] = 0;
            for (uint64_t i = 0; i < cn->n[seg]; i++)
                sums[seg] += buf[at++];
        }
        return XATTN_STATUS_OK;
    }
    cl_kernel k = pg->kernels[XATTN_CL_K_COUNT_SUM];
    const cl_long n0 = (cl_long)cn->n[0], n1 = (cl_long)cn->n[1], n2 = (cl_long)cn->n[2];
    const size_t local = (size_t)pg->tile.rwg;
    if ((e = clSetKernelArg(k, 0, sizeof cn->mem, &cn->mem)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 1, sizeof n0, &n0)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 2, sizeof n1, &n1)) != CL_SUCCESS ||
        (e = clSetKernelArg(k, 3, sizeof n2, &n2)) != CL_SUCCESS)
        return xattn__cl_fail(e, "clSetKernelArg (xattn_count_sum)");
    if ((e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &local, &local, 0, NULL, NULL)) !=
        CL_SUCCESS)
        return xattn__cl_fail(e, "clEnqueueNDRangeKernel (xattn_count_sum)");
    cl_ulong out[3];
    if ((e = clEnqueueReadBuffer(c->queue, cn->mem, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL)) !=
        CL_SUCCESS)
        return xattn__cl_fail(e, "clEnqueueReadBuffer (executed-work counts)");
    for (int seg = 0; seg < 3; seg++)
        sums[seg] = out[seg];
    return XATTN_STATUS_OK;
}

/* The row form's work-items of FLASH (one split) or one SPLITKV split: row
 * blocks of t->rows of the Sq x group rows of each (b, KV head). */
static uint64_t xattn__cl_row_items(const xattn_problem *p, const xattn_cl_tile *t)
{
    const int64_t group = p->Hkv > 0 ? p->Hq / p->Hkv : 1;
    return (uint64_t)xattn__ceil_div(p->Sq * group, t->rows) * (uint64_t)(p->B * p->Hkv);
}

/* The work-groups of FLASH or one SPLITKV split. */
static uint64_t xattn__cl_flash_groups(const xattn_problem *p, const xattn_cl_tile *t)
{
    if (t->rows > 0)
        return xattn__cl_row_items(p, t);
    return (uint64_t)xattn__ceil_div(p->Sq, t->bq) * (uint64_t)(p->B * p->Hq);
}

/* SPLITKV chunks: the caller's count (at most one key per chunk), or enough
 * work-groups to give every compute unit a few, each chunk at least a tile. */
static int xattn__cl_num_splits(const xattn_cl_ctx *c, const xattn_problem *p,
                                const xattn_cl_tile *t)
{
    const int bk = t->bk;
    int64_t maxs = p->Sk > 0 ? p->Sk : 1;
    if (p->num_splits > 0)
        return (int)(p->num_splits < maxs ? p->num_splits : maxs);
    int64_t tiles = xattn__ceil_div(p->Sk > 0 ? p->Sk : 1, bk);
    int64_t wgs = (int64_t)xattn__cl_flash_groups(p, t);
    int64_t target = (int64_t)c->compute_units * ((c->type & CL_DEVICE_TYPE_GPU) ? 4 : 2);
    int64_t s = xattn__ceil_div(target, wgs > 0 ? wgs : 1);
    if (s < 2)
        s = 2; /* SPLITKV asked for: split, unless the keys are one tile */
    if (s > 64)
        s = 64;
    if (s > tiles)
        s = tiles;
    return (int)(s < 1 ? 1 : s);
}

/*
 * The device operations of the algorithm driver (xattn_driver.c). A call
 * enqueues its phases on the context's queue; a timed call waits for the last
 * one and reads the phases' times from their events (or times each phase on
 * the host where the queue has no profiling), and the executed-work counts
 * its kernels wrote.
 */

/* The tile a program of p would use (the configured tile, fitted to p's head
 * dims and the device), without building anything. */
static xattn_status xattn__cl_tile_of(const xattn_cl_ctx *c, const xattn_problem *p,
                                      xattn_cl_tile *t)
{
    int dmax, dfix, dvmax, dvfix;
    *t = c->tile;
    xattn__cl_head_dim(p->D, t->fixed_dims, &dmax, &dfix);
    xattn__cl_head_dim(p->Dv, t->fixed_dims, &dvmax, &dvfix);
    return xattn__cl_tile_fit(c, t, dmax, dvmax, NULL);
}

/* The plan's figures that follow from a tile. */
static void xattn__cl_plan_tile(const xattn_cl_ctx *c, const xattn_problem *p,
                                const xattn_cl_tile *t, xattn__plan *plan)
{
    /* The kernel form: the tile table's device class, and NAIVE's qk/pv form
     * (tiles staged in local memory, or read from global memory). */
    snprintf(plan->kernel, sizeof plan->kernel, "cl-%s%s", c->tile_class,
             p->algo != XATTN_ALGO_NAIVE ? (t->rows ? "-rows" : "")
             : t->naive_local            ? "-local"
                                         : "-global");
    if (p->algo != XATTN_ALGO_NAIVE) {
        plan->tile_q = t->bq;
        plan->tile_k = t->bk;
        plan->tile_heads = 1;
        if (t->rows > 0) {
            /* A work-item's rows: the heads of a KV head's group first, then
             * query rows (the model's tile of tile_q rows x tile_heads heads;
             * the kernels count what they ran either way). */
            const int group = p->Hkv > 0 ? (int)(p->Hq / p->Hkv) : 1;
            plan->tile_heads = t->rows < group ? t->rows : group;
            plan->tile_q = t->rows / plan->tile_heads;
        }
    }
    if (p->algo == XATTN_ALGO_SPLITKV)
        plan->splits = xattn__cl_num_splits(c, p, t);
}

static xattn_status xattn__cl_plan(const struct xattn_ctx *ctx, const xattn_problem *p,
                                   xattn__plan *plan)
{
    const xattn_cl_ctx *c = ctx->bctx;
    if (p->B * p->Hq > INT32_MAX)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "OpenCL: B*Hq = %lld exceeds the kernels' 32-bit (b, h) index",
                            (long long)(p->B * p->Hq));
    xattn_cl_tile t;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_of(c, p, &t));
    xattn__cl_plan_tile(c, p, &t, plan);
    return XATTN_STATUS_OK;
}

/* The executed-work count segments of p's kernels (xattn_cl_common.cl,
 * "executed-work counts"): work-groups of the product kernels. */
static void xattn__cl_count_segments(const xattn_problem *p, const xattn_cl_tile *t, int splits,
                                     uint64_t n[3])
{
    const uint64_t BH = (uint64_t)(p->B * p->Hq);
    n[0] = n[1] = n[2] = 0;
    if (p->algo == XATTN_ALGO_NAIVE) {
        /* One a qk work-group, one a pv row of work-items. */
        const uint64_t ni = (uint64_t)xattn__ceil_div(p->Sq, t->nt);
        n[0] = (uint64_t)xattn__ceil_div(p->Sk, t->nt) * ni * BH;
        n[1] = ni * (uint64_t)t->nt * BH;
    } else {
        const uint64_t g =
            xattn__cl_flash_groups(p, t) * (uint64_t)(p->algo == XATTN_ALGO_SPLITKV ? splits : 1);
        n[0] = n[1] = n[2] = g;
    }
}

static xattn_status xattn__cl_prepare(struct xattn_ctx *ctx, const xattn_problem *p,
                                      xattn__plan *plan, int timed)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    memset(call, 0, sizeof *call);
    c->last_build_ms = 0.0;
    xattn__exec_init(&c->last_exec);
    xattn_status st = xattn__cl_program(c, p, &call->pg);
    plan->build_ms = c->last_build_ms;
    if (st != XATTN_STATUS_OK)
        return st;
    /* The program may run a smaller tile than planned (a kernel that allows
     * fewer work-items than the device's maximum, found by building). */
    xattn__cl_plan_tile(c, p, &call->pg->tile, plan);

    call->count = timed;
    return XATTN_STATUS_OK;
}

/*
 * The call's own small buffers, made before its first kernel: after the
 * driver's regions, so that a region that does not fit (NAIVE's score matrix,
 * with its hint) is the error a user sees, not the counts sized from it.
 */
static xattn_status xattn__cl_call_buffers(struct xattn_ctx *ctx, const xattn_problem *p,
                                           xattn__plan *plan)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    /* Per-call parameters: lengths, starts and ALiBi slopes, copied at
     * creation so that the host arrays may go as soon as the call returns. */
    const size_t nmeta = (size_t)(4 * p->B + p->Hq);
    int32_t *meta_host = malloc(nmeta * sizeof(int32_t));
    if (!meta_host)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "OpenCL: per-call parameters: out of host memory");
    for (int64_t b = 0; b < p->B; b++) {
        meta_host[b] = p->len_q[b];
        meta_host[p->B + b] = p->len_k[b];
        meta_host[2 * p->B + b] = p->start_q[b];
        meta_host[3 * p->B + b] = p->start_k[b];
    }
    for (int64_t h = 0; h < p->Hq; h++) {
        float slope = p->alibi ? p->alibi[h] : 0.0f;
        memcpy(&meta_host[4 * p->B + h], &slope, sizeof slope);
    }
    xattn_status st = xattn__cl_scratch_new(ctx, &call->held, nmeta * sizeof(int32_t),
                                            meta_host, "OpenCL per-call parameters", &call->meta);
    free(meta_host);
    /* The counts array exists in every call (a call's memory does not depend
     * on whether it is timed); the kernels write it only in timed calls. */
    uint64_t seg[3];
    xattn__cl_count_segments(p, &call->pg->tile, plan->splits, seg);
    uint64_t held = 0;
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_counts_new(ctx, &call->held, &call->counts, seg[0], seg[1], seg[2],
                                  call->count && p->poison, &held);
    if (st != XATTN_STATUS_OK) {
        xattn__cl_scratch_free(ctx, &call->held);
        return st;
    }
    plan->held_bytes = nmeta * sizeof(int32_t) + held;
    return XATTN_STATUS_OK;
}

/* A workspace region: a buffer of its own, accounted; NaN first with p->poison. */
static xattn_status xattn__cl_ws_alloc(struct xattn_ctx *ctx, const xattn_problem *p,
                                       uint64_t bytes, const char *what, int touch, void **out)
{
    (void)touch; /* device memory: nothing to fault in */
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_scratch one = {{NULL}, {0}, 0};
    cl_mem m = NULL;
    XATTN_RETURN_IF_ERROR(xattn__cl_scratch_new(ctx, &one, bytes, NULL, what, &m));
    if (p->poison) {
        const float nanv = NAN;
        cl_int e = clEnqueueFillBuffer(c->queue, m, &nanv, sizeof nanv, 0, (size_t)bytes, 0,
                                       NULL, NULL);
        if (e != CL_SUCCESS) {
            xattn__cl_scratch_free(ctx, &one);
            return xattn__cl_fail(e, "clEnqueueFillBuffer (poison)");
        }
    }
    *out = m;
    return XATTN_STATUS_OK;
}

static void xattn__cl_ws_free(struct xattn_ctx *ctx, void *ws, uint64_t bytes)
{
    clReleaseMemObject((cl_mem)ws);
    xattn__mem_release(ctx, bytes);
}

static xattn_status xattn__cl_phase(struct xattn_ctx *ctx, const xattn_problem *p,
                                    xattn__plan *plan, int phase, int timed)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    if (!call->meta)
        XATTN_RETURN_IF_ERROR(xattn__cl_call_buffers(ctx, p, plan));
    const xattn_cl_tile *t = &call->pg->tile;
    cl_kernel *kn = call->pg->kernels;
    const cl_mem ws0 = (cl_mem)plan->ws[0], ws1 = (cl_mem)plan->ws[1];
    const uint64_t BH = (uint64_t)(p->B * p->Hq);
    const cl_uint a = XATTN_CL_NUM_COMMON_ARGS;
    const int count = call->count;
    const xattn_cl_counts *cn = &call->counts;
    cl_int e = CL_SUCCESS;
    int kind, slot = 0;
    size_t local;
    uint64_t groups;
    switch ((xattn__phase)phase) {
    case XATTN__PH_QK: /* tiles of keys x rows x (b, h) */
        kind = XATTN_CL_K_QK;
        local = (size_t)t->nt * (size_t)t->nt;
        groups = (uint64_t)xattn__ceil_div(p->Sk, t->nt) *
                 (uint64_t)xattn__ceil_div(p->Sq, t->nt) * BH;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 1, cn, 3);
        break;
    case XATTN__PH_SOFTMAX: /* rows x (b, h) */
        kind = XATTN_CL_K_SOFTMAX;
        local = (size_t)t->rwg;
        groups = (uint64_t)p->Sq * BH;
        slot = 1;
        e = xattn__cl_arg_mem(kn[kind], a, ws0);
        break;
    case XATTN__PH_PV: /* tiles of Dv columns x rows x (b, h) */
        kind = XATTN_CL_K_PV;
        local = (size_t)t->nt * (size_t)t->nt;
        groups = (uint64_t)xattn__ceil_div(p->Dv, t->nt) *
                 (uint64_t)xattn__ceil_div(p->Sq, t->nt) * BH;
        slot = 2;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 1, cn, 3 + cn->n[0]);
        break;
    case XATTN__PH_FLASH:
        kind = XATTN_CL_K_FLASH;
        local = t->rows ? 1 : (size_t)t->bq;
        groups = xattn__cl_flash_groups(p, t);
        e = xattn__cl_arg_counts(kn[kind], a, cn, 3);
        break;
    case XATTN__PH_PARTIAL: {
        kind = XATTN_CL_K_PARTIAL;
        local = t->rows ? 1 : (size_t)t->bq;
        groups = xattn__cl_flash_groups(p, t) * (uint64_t)plan->splits;
        const int64_t chunk = xattn__ceil_div(p->Sk > 0 ? p->Sk : 1, plan->splits);
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS &&
            (e = xattn__cl_arg_mem(kn[kind], a + 1, ws1)) == CL_SUCCESS &&
            (e = xattn__cl_arg_int(kn[kind], a + 2, (int)chunk)) == CL_SUCCESS)
            e = xattn__cl_arg_counts(kn[kind], a + 3, cn, 3);
        break;
    }
    case XATTN__PH_COMBINE:
        kind = XATTN_CL_K_COMBINE;
        local = (size_t)t->cwg;
        groups = (uint64_t)xattn__ceil_div(p->Dv, t->cwg) * (uint64_t)p->Sq * BH;
        slot = 1;
        if ((e = xattn__cl_arg_mem(kn[kind], a, ws0)) == CL_SUCCESS &&
            (e = xattn__cl_arg_mem(kn[kind], a + 1, ws1)) == CL_SUCCESS)
            e = xattn__cl_arg_int(kn[kind], a + 2, plan->splits);
        break;
    default:
        return xattn__error(XATTN_STATUS_INTERNAL, "OpenCL: phase %d", phase);
    }
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_BACKEND, "clSetKernelArg(%s) failed: %s (%d)",
                            xattn__cl_kernel_names[kind], xattn__cl_err_name(e), (int)e);
    return xattn__cl_launch(c, p, kn[kind], call->meta, kind, local, groups, timed, count,
                            &call->ph[slot]);
}

static xattn_status xattn__cl_finish(struct xattn_ctx *ctx, const xattn_problem *p,
                                     xattn__plan *plan, int timed, int ok, xattn__exec *exec)
{
    xattn_cl_ctx *c = ctx->bctx;
    xattn_cl_call *call = &c->call;
    xattn_status st = XATTN_STATUS_OK;
    cl_int e;
    if (ok && (e = clFlush(c->queue)) != CL_SUCCESS)
        st = xattn__cl_fail(e, "clFlush");
    if (ok && st == XATTN_STATUS_OK && timed && c->profiling) {
        cl_event last = NULL;
        for (int i = 0; i < 3; i++)
            if (call->ph[i].ev)
                last = call->ph[i].ev;
        if (last && (e = clWaitForEvents(1, &last)) != CL_SUCCESS)
            st = xattn__cl_fail(e, "clWaitForEvents");
    }
    if (ok && st == XATTN_STATUS_OK && call->count) {
        uint64_t sums[3];
        st = xattn__cl_counts_sum(c, call->pg, &call->counts, sums);
        if (st == XATTN_STATUS_OK) {
            exec->qk_pairs = (double)sums[0];
            exec->pv_pairs = (double)sums[1];
            /* NAIVE reads K and V rows per score, not per tile: not counted */
            exec->kv_rows = p->algo == XATTN_ALGO_NAIVE ? -1.0 : (double)sums[2];
            c->last_exec = *exec;
        }
    }
    cl_ulong first = 0, lastend = 0;
    for (int i = 0; i < 3; i++) {
        xattn_cl_phase *ph = &call->ph[i];
        if (ok && st == XATTN_STATUS_OK && timed) {
            if (c->profiling && ph->ev) {
                cl_ulong t0 = 0, t1 = 0;
                if (clGetEventProfilingInfo(ph->ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                            NULL) == CL_SUCCESS &&
                    clGetEventProfilingInfo(ph->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                            NULL) == CL_SUCCESS &&
                    t1 >= t0) {
                    plan->phase_ms[i] = (double)(t1 - t0) * 1e-6;
                    if (!first || t0 < first)
                        first = t0;
                    if (t1 > lastend)
                        lastend = t1;
                }
            } else if (!c->profiling) {
                plan->phase_ms[i] = ph->host_ms;
                plan->device_ms += ph->host_ms;
            }
        }
        if (ph->ev)
            clReleaseEvent(ph->ev);
        ph->ev = NULL;
    }
    if (first && lastend > first)
        plan->device_ms = (double)(lastend - first) * 1e-6;
    /* The device's memory (OpenCL 1.2 has no query for free memory). */
    plan->device_mem_total = ctx->info.global_mem_bytes;
    xattn__cl_scratch_free(ctx, &call->held);
    return st;
}

/* ---- ceilings: FMA throughput and bandwidth micro-benchmarks ---------------- */

/* Runs `k` over `global` work-items `reps` times and returns the best time in
 * seconds, from event profiling when the queue has it, else the host clock. */
static xattn_status xattn__cl_time_kernel(xattn_cl_ctx *c, cl_kernel k, size_t global,
                                          size_t local, int reps, double *best)
{
    *best = 0;
    for (int r = 0; r < reps; r++) {
        cl_event ev = NULL;
        double t0 = xattn__now();
        cl_int e = clEnqueueNDRangeKernel(c->queue, k, 1, NULL, &global, &local, 0, NULL, &ev);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clEnqueueNDRangeKernel (ceilings)");
        e = clWaitForEvents(1, &ev);
        double secs = xattn__now() - t0;
        cl_ulong a = 0, b = 0;
        if (e == CL_SUCCESS && c->profiling &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) ==
                CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) ==
                CL_SUCCESS &&
            b > a)
            secs = (double)(b - a) * 1e-9;
        clReleaseEvent(ev);
        if (e != CL_SUCCESS)
            return xattn__cl_fail(e, "clWaitForEvents (ceilings)");
        if (r == 0 || secs < *best)
            *best = secs;
    }
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_measure_ceilings(struct xattn_ctx *ctx, xattn_ceilings *out)
{
    xattn_cl_ctx *c = ctx->bctx;
    const int quick = xattn__ceilings_quick();
    cl_int e;
    const char *src = (const char *)xattn__cl_ceil_source_data[0];
    size_t len = xattn__cl_ceil_source_sizes[0];
    cl_program prog = clCreateProgramWithSource(c->context, 1, &src, &len, &e);
    if (e != CL_SUCCESS)
        return xattn__cl_fail(e, "clCreateProgramWithSource (ceilings)");
    double tb = xattn__now();
    e = clBuildProgram(prog, 1, &c->device, "-cl-fast-relaxed-math", NULL, NULL);
    xattn__log(XATTN_LOG_INFO, "OpenCL: ceilings program built in %.1f ms",
               (xattn__now() - tb) * 1e3);
    if (e != CL_SUCCESS) {
        xattn_status st = xattn__cl_fail(e, "clBuildProgram (ceilings)");
        clReleaseProgram(prog);
        return st;
    }
    cl_kernel kf = clCreateKernel(prog, "xattn_ceil_fma", &e);
    cl_kernel kr = e == CL_SUCCESS ? clCreateKernel(prog, "xattn_ceil_read", &e) : NULL;
    cl_kernel kc = e == CL_SUCCESS ? clCreateKernel(prog, "xattn_ceil_copy", &e) : NULL;
    xattn_status st = e == CL_SUCCESS ? XATTN_STATUS_OK : xattn__cl_fail(e, "clCreateKernel");

    /* Enough work-items to fill every compute unit several times over. */
    size_t wg = c->max_wg < 256 ? c->max_wg : 256;
    size_t global = (size_t)(c->compute_units ? c->compute_units : 1) * wg * 8;
    /* Bandwidth arrays well beyond any cache: 256 MiB (32 MiB quick), within
     * the device's largest allocation. */
    uint64_t bytes = quick ? (32u << 20) : (256u << 20);
    while (bytes > c->max_alloc / 2 && bytes > (1u << 20))
        bytes /= 2;
    xattn_cl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    cl_mem bin = NULL, bout = NULL, bsink = NULL;
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, bytes, NULL, "ceilings input", &bin);
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, bytes, NULL, "ceilings output", &bout);
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_scratch_new(ctx, &scratch, (uint64_t)global * 4u, NULL, "ceilings sink",
                                   &bsink);
    if (st == XATTN_STATUS_OK) {
        const float zero = 0.0f;
        e = clEnqueueFillBuffer(c->queue, bin, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clEnqueueFillBuffer(c->queue, bout, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
        if (e == CL_SUCCESS)
            e = clFinish(c->queue);
        if (e != CL_SUCCESS)
            st = xattn__cl_fail(e, "clEnqueueFillBuffer (ceilings)");
    }
    int reps = quick ? 2 : 5;
    if (st == XATTN_STATUS_OK) {
        /* Grow the loop until one launch takes >= 20 ms (5 ms quick), so that
         * launch overhead does not count. */
        int iters = 256;
        float a = 0.999f, b = 0.001f;
        double secs = 0;
        for (;;) {
            if ((e = clSetKernelArg(kf, 0, sizeof bsink, &bsink)) != CL_SUCCESS ||
                (e = clSetKernelArg(kf, 1, sizeof iters, &iters)) != CL_SUCCESS ||
                (e = clSetKernelArg(kf, 2, sizeof a, &a)) != CL_SUCCESS ||
                (e = clSetKernelArg(kf, 3, sizeof b, &b)) != CL_SUCCESS) {
                st = xattn__cl_fail(e, "clSetKernelArg (ceilings)");
                break;
            }
            st = xattn__cl_time_kernel(c, kf, global, wg, 1, &secs);
            if (st != XATTN_STATUS_OK || secs >= (quick ? 0.005 : 0.02) || iters >= (1 << 24))
                break;
            iters *= 4;
        }
        if (st == XATTN_STATUS_OK)
            st = xattn__cl_time_kernel(c, kf, global, wg, reps, &secs);
        if (st == XATTN_STATUS_OK && secs > 0)
            out->fma_f32_gflops = (double)global * (double)iters * 64.0 / secs * 1e-9;
    }
    if (st == XATTN_STATUS_OK) {
        cl_ulong n4 = bytes / 16u;
        cl_int per_item = (c->type & CL_DEVICE_TYPE_CPU) ? 1 : 0;
        double secs = 0;
        if ((e = clSetKernelArg(kr, 0, sizeof bin, &bin)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 1, sizeof bsink, &bsink)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 2, sizeof n4, &n4)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 0, sizeof bin, &bin)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 1, sizeof bout, &bout)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 2, sizeof n4, &n4)) != CL_SUCCESS ||
            (e = clSetKernelArg(kr, 3, sizeof per_item, &per_item)) != CL_SUCCESS ||
            (e = clSetKernelArg(kc, 3, sizeof per_item, &per_item)) != CL_SUCCESS)
            st = xattn__cl_fail(e, "clSetKernelArg (ceilings)");
        if (st == XATTN_STATUS_OK)
            st = xattn__cl_time_kernel(c, kr, global, wg, reps, &secs);
        if (st == XATTN_STATUS_OK && secs > 0)
            out->read_gbps = (double)bytes / secs * 1e-9;
        if (st == XATTN_STATUS_OK)
            st = xattn__cl_time_kernel(c, kc, global, wg, reps, &secs);
        if (st == XATTN_STATUS_OK && secs > 0)
            out->copy_gbps = 2.0 * (double)bytes / secs * 1e-9;
    }
    /* No 16-bit arithmetic is assumed: the kernels compute in f32 on OpenCL. */
    out->fma_f16_gflops = 0;
    out->fma_bf16_gflops = 0;
    xattn__cl_scratch_free(ctx, &scratch);
    if (kf)
        clReleaseKernel(kf);
    if (kr)
        clReleaseKernel(kr);
    if (kc)
        clReleaseKernel(kc);
    clReleaseProgram(prog);
    return st;
}

const xattn_backend_iface xattn__backend_opencl = {
    .id = XATTN_BACKEND_OPENCL,
    .name = "opencl",
    .probe = xattn__cl_probe,
    .device_count = xattn__cl_device_count,
    .device_info = xattn__cl_device_info,
    .ctx_create = xattn__cl_ctx_create,
    .ctx_destroy = xattn__cl_ctx_destroy,
    .sync = xattn__cl_sync,
    .set_option = NULL,
    .buffer_alloc = xattn__cl_buffer_alloc,
    .buffer_wrap_host = xattn__cl_buffer_wrap_host,
    .buffer_release = xattn__cl_buffer_release,
    .buffer_write = xattn__cl_buffer_write,
    .buffer_read = xattn__cl_buffer_read,
    .plan = xattn__cl_plan,
    .prepare = xattn__cl_prepare,
    .ws_alloc = xattn__cl_ws_alloc,
    .ws_free = xattn__cl_ws_free,
    .phase = xattn__cl_phase,
    .finish = xattn__cl_finish,
    .measure_ceilings = xattn__cl_measure_ceilings,
};

/* ---- interop (include/xattn_opencl.h) -------------------------------------- */

xattn_status xattn_opencl_ctx_create(cl_context context, cl_device_id device,
                                     cl_command_queue queue, xattn_ctx **out)
{
    xattn__clear_error();
    if (!out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "out: NULL pointer");
    *out = NULL;
    if (!context || !device)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL",
                            !context ? "context" : "device");
    cl_uint ndev = 0;
    cl_int e = clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof ndev, &ndev, NULL);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "context: clGetContextInfo failed: %s (%d)", xattn__cl_err_name(e),
                            (int)e);
    cl_device_type type;
    e = clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "device: clGetDeviceInfo failed: %s (%d)", xattn__cl_err_name(e),
                            (int)e);
    cl_device_id *devs = calloc(ndev ? ndev : 1, sizeof *devs);
    if (!devs)
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY, "out of host memory");
    int found = 0;
    if (clGetContextInfo(context, CL_CONTEXT_DEVICES, ndev * sizeof *devs, devs, NULL) ==
        CL_SUCCESS)
        for (cl_uint i = 0; i < ndev; i++)
            found |= devs[i] == device;
    free(devs);
    if (!found)
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT,
                            "device: not one of the devices of the given cl_context");
    if (queue) {
        cl_context qc = NULL;
        cl_device_id qd = NULL;
        e = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL);
        if (e == CL_SUCCESS)
            e = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qd, &qd, NULL);
        if (e != CL_SUCCESS)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "queue: clGetCommandQueueInfo failed: %s (%d)",
                                xattn__cl_err_name(e), (int)e);
        if (qc != context || qd != device)
            return xattn__error(XATTN_STATUS_WRONG_CONTEXT,
                                "queue: belongs to another %s than the one given",
                                qc != context ? "cl_context" : "device");
    }

    /* The device's index among the enumerated ones, if it is one of them. */
    int count = 0, index = -1;
    xattn_device_count(XATTN_BACKEND_OPENCL, &count);
    for (int i = 0; i < count && i < xattn__cl_ndev; i++)
        if (xattn__cl_devs[i].device == device)
            index = i;

    xattn_ctx *ctx;
    XATTN_RETURN_IF_ERROR(xattn__ctx_alloc(&xattn__backend_opencl, index, &ctx));
    xattn_status st = xattn__cl_describe(device, &ctx->info);
    if (st != XATTN_STATUS_OK) {
        xattn__ctx_free_shell(ctx);
        return st;
    }
    xattn_cl_ctx *c = xattn__host_alloc(ctx, sizeof *c, "OpenCL context", &st);
    if (!c) {
        xattn__ctx_free_shell(ctx);
        return st;
    }
    memset(c, 0, sizeof *c);
    c->owner = ctx;
    clRetainContext(context);
    c->context = context;
    c->device = device;
    if (queue) {
        clRetainCommandQueue(queue);
        c->queue = queue;
    } else {
        c->queue = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &e);
        if (e != CL_SUCCESS) {
            c->queue = NULL;
            st = xattn__cl_fail(e, "clCreateCommandQueue");
        }
    }
    if (st == XATTN_STATUS_OK)
        st = xattn__cl_state_init(c);
    if (st != XATTN_STATUS_OK) {
        xattn__cl_state_free(c);
        xattn__host_free(ctx, c, sizeof *c);
        xattn__ctx_free_shell(ctx);
        return st;
    }
    ctx->bctx = c;
    ctx->info.struct_size = sizeof ctx->info;
    ctx->info.backend = XATTN_BACKEND_OPENCL;
    ctx->info.index = index;
    *out = ctx;
    xattn__log(XATTN_LOG_INFO, "context created on the caller's OpenCL objects: %s%s",
               ctx->info.name, queue ? " (caller's queue)" : "");
    return XATTN_STATUS_OK;
}

xattn_status xattn_opencl_buffer_wrap(xattn_ctx *ctx, cl_mem mem, xattn_buffer **out)
{
    xattn__clear_error();
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", !ctx ? "ctx" : "out");
    *out = NULL;
    if (!xattn__is_cl_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT,
                            "ctx: a %s context cannot wrap a cl_mem (an OpenCL context is needed)",
                            ctx->be->name);
    xattn_cl_ctx *c = ctx->bctx;
    cl_mem_object_type mt = 0;
    cl_int e = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof mt, &mt, NULL);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "mem: not a valid cl_mem: clGetMemObjectInfo failed: %s (%d)",
                            xattn__cl_err_name(e), (int)e);
    if (mt != CL_MEM_OBJECT_BUFFER)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "mem: an image or pipe (CL_MEM_TYPE 0x%x), expected a buffer",
                            (unsigned)mt);
    cl_context mc = NULL;
    size_t size = 0;
    e = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof mc, &mc, NULL);
    if (e == CL_SUCCESS)
        e = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (e != CL_SUCCESS)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "mem: clGetMemObjectInfo failed: %s (%d)", xattn__cl_err_name(e),
                            (int)e);
    if (mc != c->context)
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT,
                            "mem: the cl_mem belongs to another cl_context than the xattn "
                            "context's");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn_buffer *buf;
    xattn_status st = xattn__buffer_new(ctx, size, 0, &buf);
    if (st == XATTN_STATUS_OK) {
        clRetainMemObject(mem);
        buf->native = mem;
        *out = buf;
    }
    xattn__ctx_leave(ctx);
    return st;
}

cl_mem xattn_opencl_buffer_mem(const xattn_buffer *buf)
{
    return buf && xattn__is_cl_ctx(buf->ctx) ? (cl_mem)buf->native : NULL;
}

cl_command_queue xattn_opencl_ctx_queue(const xattn_ctx *ctx)
{
    return xattn__is_cl_ctx(ctx) ? ((const xattn_cl_ctx *)ctx->bctx)->queue : NULL;
}

cl_context xattn_opencl_ctx_context(const xattn_ctx *ctx)
{
    return xattn__is_cl_ctx(ctx) ? ((const xattn_cl_ctx *)ctx->bctx)->context : NULL;
}
