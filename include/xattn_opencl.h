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

/*
 * Tuned tiles (`xattn tune`). A tile is text in XATTN_CL_TILE's form
 * ("bq=16,bk=32,rows=16"; keys not given keep the device's table row). A
 * stored winner is a file under the cache folder (<XATTN_CACHE_DIR>/opencl),
 * kept per device, driver, algorithm, q dtype and head dims (D, Dv); every
 * OpenCL context of that device then runs that case with it, unless
 * XATTN_CL_TILE is set, and says so in the run info's kernel
 * ("cl-cpu-tuned-rows"). A stale, corrupt or unfit entry is ignored with a
 * warning through the log callback.
 */

/**
 * The device's tile table row, in XATTN_CL_TILE's form (every key), into
 * tile (n bytes). Errors: WRONG_CONTEXT for a non-OpenCL context,
 * INVALID_ARGUMENT for a NULL or short buffer.
 */
XATTN_API xattn_status xattn_opencl_tile_default(xattn_ctx *ctx, char *tile, size_t n);

/**
 * Stores `tile` as the winner of (this context's device and driver, algo,
 * dtype, head_dim, head_dim_v); replaces an earlier one. The tile must parse
 * and fit the device at those head dims (INVALID_ARGUMENT or UNSUPPORTED
 * otherwise, naming the key); IO when there is no cache folder or the file
 * cannot be written. algo: NAIVE, FLASH or SPLITKV. Like every call on a
 * context: BUSY while another thread uses it.
 */
XATTN_API xattn_status xattn_opencl_tune_store(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                               int64_t head_dim, int64_t head_dim_v,
                                               const char *tile);

/**
 * The stored winner of a case: *found = 1 and the tile (every key) in tile
 * (n bytes), or *found = 0 when there is none or it is ignored (a warning
 * through the log callback says why).
 */
XATTN_API xattn_status xattn_opencl_tune_lookup(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                                int64_t head_dim, int64_t head_dim_v, char *tile,
                                                size_t n, int *found);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_OPENCL_H */
