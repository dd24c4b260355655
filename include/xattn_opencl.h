/*
 * xattn — OpenCL interop: run attention on the application's own OpenCL
 * context, device and command queue, and on its own cl_mem buffers, without
 * copies. Everything else (descriptors, attention, buffers, statistics) is
 * the plain xattn.h API on the context these functions return.
 *
 * Kernels are OpenCL C 1.2; every device of an OpenCL 1.2+ platform works.
 */
#ifndef XATTN_OPENCL_H
#define XATTN_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#ifdef __APPLE__
#include <OpenCL/cl.h>
#else
#include <CL/cl.h>
#endif

#include "xattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Creates an xattn context on the caller's OpenCL objects. `context` must
 * contain `device`. `queue` (optional) must belong to `context` and `device`
 * and be in-order; attention is then enqueued on it, ordered with the
 * caller's own work. NULL makes the library create its own queue. The objects
 * are retained by the context and released by xattn_ctx_destroy; the caller
 * keeps its own references.
 *
 * Device times come from OpenCL event profiling: on a caller queue created
 * without CL_QUEUE_PROFILING_ENABLE, timed calls wait for each phase and time
 * it on the host clock instead.
 *
 * Errors: INVALID_ARGUMENT for a NULL or invalid object (with the OpenCL
 * error's name and code), WRONG_CONTEXT when the objects do not belong
 * together, UNSUPPORTED for an out-of-order queue.
 */
XATTN_API xattn_status xattn_opencl_ctx_create(cl_context context, cl_device_id device,
                                               cl_command_queue queue, xattn_ctx **out);

/**
 * Wraps a caller's cl_mem (a buffer of the context's cl_context) as an
 * xattn_buffer of the cl_mem's full size, without copying. The buffer is
 * retained until xattn_buffer_free; the caller keeps its own reference. The
 * memory is the caller's and is not counted by the context's allocator.
 *
 * Errors: INVALID_ARGUMENT for an invalid cl_mem or a non-buffer object (with
 * the OpenCL error's name and code), WRONG_CONTEXT for a cl_mem of another
 * cl_context or a non-OpenCL xattn context.
 */
XATTN_API xattn_status xattn_opencl_buffer_wrap(xattn_ctx *ctx, cl_mem mem, xattn_buffer **out);

/** The cl_mem behind an xattn buffer of an OpenCL context (NULL otherwise). Not retained. */
XATTN_API cl_mem xattn_opencl_buffer_mem(const xattn_buffer *buf);

/** The command queue of an OpenCL context (NULL otherwise). Not retained. */
XATTN_API cl_command_queue xattn_opencl_ctx_queue(const xattn_ctx *ctx);

/** The cl_context of an OpenCL context (NULL otherwise). Not retained. */
XATTN_API cl_context xattn_opencl_ctx_context(const xattn_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_OPENCL_H */
