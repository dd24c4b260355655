/* The registry: which backends this build contains, and whether each has a
 * usable device on this machine (probed once, then cached). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "xattn_internal.h"

static const xattn_backend_iface *const xattn__backends[XATTN_BACKEND_COUNT] = {
    [XATTN_BACKEND_CPU] = &xattn__backend_cpu,
#ifdef XATTN_HAVE_OPENCL
    [XATTN_BACKEND_OPENCL] = &xattn__backend_opencl,
#endif
#ifdef XATTN_HAVE_CUDA
    [XATTN_BACKEND_CUDA] = &xattn__backend_cuda,
#endif
};

const xattn_backend_iface *xattn__backend_get(xattn_backend id)
{
    if ((int)id < 0 || id >= XATTN_BACKEND_COUNT)
        return NULL;
    return xattn__backends[id];
}

/*
 * Each backend is probed the first time something asks for it, once per
 * process: a CPU context never loads the OpenCL ICD loader and its drivers
 * (PoCL alone brings LLVM: tens of MB and a signal stack in the probing
 * thread) nor the CUDA runtime. AUTO and `xattn devices` ask for every one.
 */
static pthread_once_t xattn__probe_once[XATTN_BACKEND_COUNT] = {
    PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
_Static_assert(XATTN_BACKEND_COUNT == 3, "one PTHREAD_ONCE_INIT per backend");
static xattn_status xattn__probe_status[XATTN_BACKEND_COUNT];
static char xattn__probe_reason[XATTN_BACKEND_COUNT][1024];

static void xattn__probe_one(int i)
{
    /* Probing must not leave a message behind for the caller's own call. */
    char saved[sizeof xattn__probe_reason[0]];
    snprintf(saved, sizeof saved, "%s", xattn_last_error());
    const xattn_backend_iface *be = xattn__backends[i];
    if (!be) {
        xattn__probe_status[i] = XATTN_STATUS_BACKEND_UNAVAILABLE;
        snprintf(xattn__probe_reason[i], sizeof xattn__probe_reason[i],
                 "%s: backend not compiled into this build of xattn",
                 xattn_backend_name((xattn_backend)i));
    } else {
        xattn__clear_error();
        xattn_status st = be->probe();
        if (st == XATTN_STATUS_OK && be->device_count() <= 0) {
            st = XATTN_STATUS_BACKEND_UNAVAILABLE;
            xattn__error(st, "no device");
        }
        xattn__probe_status[i] = st == XATTN_STATUS_OK ? st : XATTN_STATUS_BACKEND_UNAVAILABLE;
        if (st != XATTN_STATUS_OK)
            snprintf(xattn__probe_reason[i], sizeof xattn__probe_reason[i], "%s: %s", be->name,
                     xattn_last_error());
    }
    xattn__set_error_text(saved);
}

static void xattn__probe_cpu(void)
{
    xattn__probe_one(XATTN_BACKEND_CPU);
}
static void xattn__probe_opencl(void)
{
    xattn__probe_one(XATTN_BACKEND_OPENCL);
}
static void xattn__probe_cuda(void)
{
    xattn__probe_one(XATTN_BACKEND_CUDA);
}
static void (*const xattn__probe_fns[XATTN_BACKEND_COUNT])(void) = {
    [XATTN_BACKEND_CPU] = xattn__probe_cpu,
    [XATTN_BACKEND_OPENCL] = xattn__probe_opencl,
    [XATTN_BACKEND_CUDA] = xattn__probe_cuda,
};

/* Returns OK or BACKEND_UNAVAILABLE with the probe's reason as the last error. */
static xattn_status xattn__backend_usable(xattn_backend backend)
{
    if ((int)backend < 0 || backend >= XATTN_BACKEND_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "backend: %d is not a backend (expected 0..%d)", (int)backend,
                            XATTN_BACKEND_COUNT - 1);
    pthread_once(&xattn__probe_once[backend], xattn__probe_fns[backend]);
    if (xattn__probe_status[backend] != XATTN_STATUS_OK)
        return xattn__error(XATTN_STATUS_BACKEND_UNAVAILABLE, "%s", xattn__probe_reason[backend]);
    return XATTN_STATUS_OK;
}

xattn_status xattn__backend_require(xattn_backend backend)
{
    return xattn__backend_usable(backend);
}

const char *xattn_backend_name(xattn_backend backend)
{
    switch (backend) {
    case XATTN_BACKEND_AUTO: return "auto";
    case XATTN_BACKEND_CPU: return "cpu";
    case XATTN_BACKEND_OPENCL: return "opencl";
    case XATTN_BACKEND_CUDA: return "cuda";
    default: return "?";
    }
}

xattn_status xattn_backend_from_name(const char *name, xattn_backend *out)
{
    xattn__clear_error();
    if (!name || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "name/out: NULL pointer");
    for (int i = -1; i < XATTN_BACKEND_COUNT; i++) {
        if (!strcmp(name, xattn_backend_name((xattn_backend)i))) {
            *out = (xattn_backend)i;
            return XATTN_STATUS_OK;
        }
    }
    return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                        "backend name '%s' is not one of auto, cpu, opencl, cuda", name);
}

int xattn_backend_compiled(xattn_backend backend)
{
    return xattn__backend_get(backend) != NULL;
}

xattn_status xattn_backend_available(xattn_backend backend)
{
    xattn__clear_error();
    return xattn__backend_usable(backend);
}

xattn_status xattn_device_count(xattn_backend backend, int *count)
{
    xattn__clear_error();
    if (!count)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "count: NULL pointer");
    *count = 0;
    if ((int)backend < 0 || backend >= XATTN_BACKEND_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "backend: %d is not a backend (expected 0..%d)", (int)backend,
                            XATTN_BACKEND_COUNT - 1);
    if (xattn__backend_usable(backend) == XATTN_STATUS_OK)
        *count = xattn__backends[backend]->device_count();
    xattn__clear_error();
    return XATTN_STATUS_OK;
}

xattn_status xattn_device_get_info_sized(xattn_backend backend, int index,
                                         xattn_device_info *caller_info, size_t info_size)
{
    xattn__clear_error();
    if (!caller_info)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "info: NULL pointer");
    if (info_size < sizeof(size_t))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "info: struct size %zu is smaller than its struct_size field",
                            info_size);
    XATTN_RETURN_IF_ERROR(xattn__backend_usable(backend));
    const xattn_backend_iface *be = xattn__backends[backend];
    int n = be->device_count();
    if (index < 0 || index >= n)
        return xattn__error(XATTN_STATUS_DEVICE_NOT_FOUND,
                            "device: index %d out of range (the %s backend has %d device%s)", index,
                            be->name, n, n == 1 ? "" : "s");
    xattn_device_info full, *info = &full;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->backend = backend;
    info->index = index;
    XATTN_RETURN_IF_ERROR(be->device_info(index, info));
    return xattn__struct_out(caller_info, info_size, info, sizeof *info, "info");
}

xattn_status(xattn_device_get_info)(xattn_backend backend, int index, xattn_device_info *info)
{
    return xattn_device_get_info_sized(backend, index, info, XATTN__V1_DEVICE_INFO_SIZE);
}
