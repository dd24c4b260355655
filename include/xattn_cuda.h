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

#ifdef __cplusplus
}
#endif
#endif /* XATTN_CUDA_H */
