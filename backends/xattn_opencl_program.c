/*
 * The OpenCL backend: devices (every platform's, in platform order), the
 * kernel sources (embedded, or XATTN_CL_SOURCE_DIR's files), and programs
 * built per configuration, cached in the context's memory and on disk
 * (the disk cache's format: xattn_backend_opencl.c).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_file.h"
#include "xattn_opencl_internal.h"

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

const char *xattn__cl_err_name(cl_int e)
{
    for (size_t i = 0; i < sizeof xattn__cl_errors / sizeof xattn__cl_errors[0]; i++)
        if (xattn__cl_errors[i].code == e)
            return xattn__cl_errors[i].name;
    return "unknown OpenCL error";
}

/* Maps an OpenCL error onto a status, with "what failed: NAME (code)". */
xattn_status xattn__cl_fail(cl_int e, const char *what)
{
    xattn_status st = XATTN_STATUS_BACKEND;
    if (e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
        e == CL_INVALID_BUFFER_SIZE)
        st = XATTN_STATUS_OUT_OF_MEMORY;
    return xattn__error(st, "%s failed: %s (%d)", what, xattn__cl_err_name(e), (int)e);
}

/* ---- devices ------------------------------------------------------------- */

xattn_cl_dev *xattn__cl_devs;
int xattn__cl_ndev;

/* Every available device with a compiler, on every platform, in platform order. */
xattn_status xattn__cl_probe(void)
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

int xattn__cl_device_count(void)
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
xattn_status xattn__cl_describe(cl_device_id dev, xattn_device_info *info)
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

xattn_status xattn__cl_device_info(int index, xattn_device_info *info)
{
    return xattn__cl_describe(xattn__cl_devs[index].device, info);
}

const char *const xattn__cl_kernel_names[XATTN_CL_NUM_KERNELS] = {
    "xattn_naive_qk",        "xattn_naive_softmax",   "xattn_naive_pv", "xattn_flash",
    "xattn_splitkv_partial", "xattn_splitkv_combine", "xattn_count_sum"};
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

xattn_status xattn__cl_sources_load(xattn_cl_ctx *c)
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

void xattn__cl_cache_dir_resolve(xattn_cl_ctx *c)
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

void xattn__cl_prog_free(xattn_cl_prog *pg)
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
xattn_status xattn__cl_program(xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_prog **out)
{
    int dmax, dfix, dvmax, dvfix;
    xattn_cl_tile t;
    xattn__cl_tile_base(c, p, &t);
    xattn__cl_head_dim(p->D, t.fixed_dims, &dmax, &dfix);
    xattn__cl_head_dim(p->Dv, t.fixed_dims, &dvmax, &dvfix);
    const int qdt = t.fixed_dtypes ? (int)p->q.dtype : -1;
    /* fp8 and q8_0 K/V always build their own program (XATTN_KDT 3, 4, 5): the run-time
     * dtype form keeps its two bits and its cheap loads for the 16-bit types. */
    const int kdt = t.fixed_dtypes || xattn__dtype_is_kv_only(p->k.dtype) ? (int)p->k.dtype : -1;
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
