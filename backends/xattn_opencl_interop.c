/*
 * The OpenCL backend's interop (include/xattn_opencl.h): contexts on the
 * caller's context, device and queue, and buffers on the caller's cl_mem.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_opencl_internal.h"

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
        xattn__cl_buffer_place(buf); /* a sub-buffer aliases its parent */
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
