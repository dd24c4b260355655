/*
 * xattn CUDA interop: run attention on the application's own cudaStream_t and
 * on its own device memory, without copies.
 *
 * These functions exist when xattn was built with the CUDA backend
 * (xattn_backend_compiled(XATTN_BACKEND_CUDA) == 1). This header includes no
 * CUDA header: streams and device pointers are passed as `void *` (a
 * cudaStream_t is a pointer; cast it: `(void *)stream`).
 *
 * Device indices are the CUDA backend's (0 .. xattn_device_count - 1): the
 * usable CUDA devices (compute capability 7.5 or newer) in CUDA's order. Use
 * xattn_cuda_ctx_device_ordinal for the CUDA device ordinal behind a context.
 *
 * Environment: XATTN_CUDA_FORCE_SIMT=1 makes contexts created afterwards run
 * FLASH and SPLITKV on the SIMT kernels even where the tensor-core ones apply
 * (f16/bf16 on sm_80+), to compare the two paths.
 */
#ifndef XATTN_CUDA_H
#define XATTN_CUDA_H

#include "xattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Creates a CUDA context on backend device `device` that submits all its work
 * (kernels, copies, workspace allocations) to the caller's `stream`, in order
 * with the caller's own work on it. NULL means the legacy default stream. The
 * caller keeps ownership of the stream and must keep it alive until
 * xattn_ctx_destroy, which synchronizes it but does not destroy it.
 * Errors: BACKEND_UNAVAILABLE (no driver or device, with CUDA's message),
 * DEVICE_NOT_FOUND, INVALID_ARGUMENT (out is NULL, or the stream is invalid or
 * belongs to another device), BACKEND (a CUDA call failed; its text is in the
 * message).
 */
XATTN_API xattn_status xattn_cuda_ctx_create_on_stream(int device, void *stream, xattn_ctx **out);

/** The cudaStream_t the context submits to (its own or the caller's); NULL for
 * a context that is not a CUDA context (and for the legacy default stream). */
XATTN_API void *xattn_cuda_ctx_stream(const xattn_ctx *ctx);

/** The CUDA device ordinal of a CUDA context (for cudaSetDevice), or -1 for a
 * context of another backend. */
XATTN_API int xattn_cuda_ctx_device_ordinal(const xattn_ctx *ctx);

/**
 * Wraps `bytes` of the caller's CUDA device memory at `device_ptr` (from
 * cudaMalloc, cudaMallocAsync or cudaMallocManaged, on the context's device)
 * as a buffer, without copying. The caller keeps ownership: xattn_buffer_free
 * releases only the wrapper, and the memory must stay allocated until then.
 * Wrapped memory is not counted by the context's allocator.
 * Errors: INVALID_ARGUMENT (NULL arguments, bytes == 0, a context of another
 * backend, a host pointer, or memory of another device), BUSY.
 */
XATTN_API xattn_status xattn_cuda_buffer_wrap(xattn_ctx *ctx, void *device_ptr, size_t bytes,
                                              xattn_buffer **out);

/** The CUDA device address of a buffer of a CUDA context (its own allocation or
 * the wrapped pointer); NULL for NULL or a buffer of another backend. */
XATTN_API void *xattn_cuda_buffer_device_ptr(const xattn_buffer *buf);

/*
 * Tuned configurations (`xattn tune --backend cuda`). What a CUDA run can
 * choose without recompiling is a configuration, text of the form
 * "path=auto,waves=2" (keys not given keep the default):
 *   path   auto: FLASH and the SPLITKV partial on the tensor-core (mma) kernels
 *          where they apply (f16/bf16 on sm_80+), else SIMT; simt: SIMT always.
 *   waves  SPLITKV without an explicit split count: split the keys so that the
 *          grid reaches waves x SMs blocks (1..64; default 2).
 * XATTN_CUDA_CONFIG (read when a context is created; a bad value makes context
 * creation fail with INVALID_ARGUMENT naming it) sets one for every case. A
 * stored winner is a file under the cache folder (<XATTN_CACHE_DIR>/cuda),
 * kept per device name, compute capability, driver version, algorithm, q
 * dtype and head dims (D, Dv); every CUDA context of that device then runs
 * that case with it, unless XATTN_CUDA_CONFIG is set, and says so in the run
 * info's kernel ("mma-tuned", "simt-tuned"). A stale or corrupt entry is
 * ignored with a warning through the log callback. XATTN_CUDA_FORCE_SIMT=1
 * still forces SIMT.
 */

/** The default configuration, every key, into config (n bytes). Errors:
 * WRONG_CONTEXT for a non-CUDA context, INVALID_ARGUMENT for a NULL or short buffer. */
XATTN_API xattn_status xattn_cuda_config_default(xattn_ctx *ctx, char *config, size_t n);

/**
 * Stores `config` as the winner of (this context's device, compute capability
 * and driver, algo, dtype, head_dim, head_dim_v); replaces an earlier one.
 * algo: FLASH or SPLITKV (NAIVE has no run-time choice). INVALID_ARGUMENT for
 * a config that does not parse (naming the key), IO when there is no cache
 * folder or the file cannot be written; BUSY while another thread uses ctx.
 */
XATTN_API xattn_status xattn_cuda_tune_store(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                             int64_t head_dim, int64_t head_dim_v,
                                             const char *config);

/**
 * The stored winner of a case: *found = 1 and the configuration (every key)
 * in config (n bytes), or *found = 0 when there is none or it is ignored (a
 * warning through the log callback says why).
 */
XATTN_API xattn_status xattn_cuda_tune_lookup(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                              int64_t head_dim, int64_t head_dim_v, char *config,
                                              size_t n, int *found);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_CUDA_H */
