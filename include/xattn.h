/*
 * xattn — portable cross-backend attention.
 *
 * One descriptor, three algorithms (NAIVE, FLASH, SPLITKV, plus AUTO), and the
 * same semantics on every backend (CPU, OpenCL, CUDA). Every function that can
 * fail returns an xattn_status; a negative status comes with a message, read
 * through xattn_last_error() on the same thread, that names the field and value.
 * No function of this library aborts or exits on bad input.
 *
 * This header includes no vendor header. Interop with OpenCL and CUDA objects
 * lives in xattn_opencl.h and xattn_cuda.h.
 */
#ifndef XATTN_H
#define XATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- export ------------------------------------------------------------ */

#if defined(XATTN_STATIC_DEFINE)
#define XATTN_API
#elif defined(_WIN32)
#ifdef XATTN_BUILDING
#define XATTN_API __declspec(dllexport)
#else
#define XATTN_API __declspec(dllimport)
#endif
#else
#define XATTN_API __attribute__((visibility("default")))
#endif

/* ---- version ----------------------------------------------------------- */

#define XATTN_VERSION_MAJOR 0
#define XATTN_VERSION_MINOR 1
#define XATTN_VERSION_PATCH 0
#define XATTN_VERSION_NUMBER                                                                       \
    (XATTN_VERSION_MAJOR * 10000 + XATTN_VERSION_MINOR * 100 + XATTN_VERSION_PATCH)

/** Version of the library actually linked, as XATTN_VERSION_NUMBER encodes it. */
XATTN_API unsigned xattn_version_number(void);
/** Version of the library actually linked, as "MAJOR.MINOR.PATCH". */
XATTN_API const char *xattn_version_string(void);

/* ---- status ------------------------------------------------------------ */

/* Codes never change once released. 0 is success, errors are negative. */
#define XATTN_STATUS_MAP(X)                                                                        \
    X(OK, 0, "success")                                                                            \
    X(INVALID_ARGUMENT, -1, "invalid argument")                                                    \
    X(INVALID_DTYPE, -2, "invalid or unsupported data type")                                       \
    X(INVALID_SHAPE, -3, "invalid tensor shape")                                                   \
    X(INVALID_STRIDE, -4, "invalid tensor strides")                                                \
    X(OUT_OF_BOUNDS, -5, "tensor view exceeds its buffer")                                         \
    X(INVALID_LENGTHS, -6, "invalid sequence lengths")                                             \
    X(SIZE_OVERFLOW, -7, "size computation overflows")                                             \
    X(OUT_OF_MEMORY, -8, "out of memory")                                                          \
    X(UNSUPPORTED, -9, "configuration not supported by this backend")                              \
    X(BACKEND_UNAVAILABLE, -10, "backend not compiled in or no usable device")                     \
    X(DEVICE_NOT_FOUND, -11, "no such device")                                                     \
    X(BACKEND, -12, "backend runtime error")                                                       \
    X(BUILD_FAILED, -13, "kernel program build failed")                                            \
    X(WRONG_CONTEXT, -14, "object belongs to another context")                                     \
    X(BUSY, -15, "context is in use by another thread")                                            \
    X(IO, -16, "file input/output error")                                                          \
    X(INTERNAL, -17, "internal error")

typedef enum xattn_status {
#define XATTN__STATUS_ENUM(name, code, text) XATTN_STATUS_##name = code,
    XATTN_STATUS_MAP(XATTN__STATUS_ENUM)
#undef XATTN__STATUS_ENUM
} xattn_status;

/** Short fixed text for a status ("invalid tensor shape"); never NULL. */
XATTN_API const char *xattn_status_string(xattn_status status);
/** Name of a status ("XATTN_STATUS_INVALID_SHAPE"); never NULL. */
XATTN_API const char *xattn_status_name(xattn_status status);
/**
 * Message of the last failing call made by this thread: which field, which
 * value, what was expected, and any native error code and text. Empty after a
 * success. Valid until the next call of this library on this thread.
 */
XATTN_API const char *xattn_last_error(void);

/* ---- logging ----------------------------------------------------------- */

typedef enum xattn_log_level {
    XATTN_LOG_ERROR = 0,
    XATTN_LOG_WARN = 1,
    XATTN_LOG_INFO = 2,
    XATTN_LOG_DEBUG = 3
} xattn_log_level;

typedef void (*xattn_log_fn)(xattn_log_level level, const char *message, void *user);

/**
 * Routes the library's messages (every error message, warnings, and info such
 * as program builds) to fn, for messages at max_level or more severe.
 * fn = NULL restores the default, which prints errors and warnings to stderr
 * only when the environment variable XATTN_LOG is set (to error|warn|info|debug).
 * The callback may be called from any thread that calls into the library,
 * always with the `user` pointer registered with it. Setting a callback (or
 * NULL) is safe while other threads log: when this returns, no thread is still
 * running the previous callback (except when it is called from inside a
 * callback, where it does not wait), so `user` may then be freed.
 */
XATTN_API void xattn_set_log_callback(xattn_log_fn fn, void *user, xattn_log_level max_level);

/* ---- data types -------------------------------------------------------- */

typedef enum xattn_dtype {
    XATTN_DTYPE_F32 = 0,
    XATTN_DTYPE_F16 = 1,
    XATTN_DTYPE_BF16 = 2,
    /* 8-bit floats for K/V caches only (q, o, bias, lse and sinks are never
     * fp8), each with an optional per-KV-head f32 scale (xattn_attn_desc
     * k_scale / v_scale): the value is the fp8 number times the scale. */
    XATTN_DTYPE_FP8_E4M3 =
        3, /* OCP E4M3 ("fn"): bias 7, max 448, no infinities, S.1111.111 = NaN */
    XATTN_DTYPE_FP8_E5M2 = 4, /* OCP E5M2: bias 15, max 57344, infinities and NaNs as IEEE */
    /* ggml's block_q8_0, for K/V caches only (no k_scale / v_scale): blocks
     * of 32 values along the head dim, each 34 bytes, an IEEE f16 scale d
     * (little-endian) then 32 int8 qs; value i = d * qs[i]. Strides stay in
     * values; value e of a buffer lies at byte (e / 32) * 34 + 2 + e % 32
     * (docs/api.md). */
    XATTN_DTYPE_Q8_0 = 5,
    XATTN_DTYPE_COUNT
} xattn_dtype;

/** Values per q8_0 block and the bytes of one block. */
#define XATTN_Q8_0_BLOCK 32
#define XATTN_Q8_0_BLOCK_BYTES 34

/** "f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "q8_0", or "?" for an invalid value. */
XATTN_API const char *xattn_dtype_name(xattn_dtype dtype);
/** Bytes per element (4, 2 or 1), or 0 for an invalid value and for q8_0,
 * which has no whole number of bytes per value (see xattn_dtype_bytes). */
XATTN_API size_t xattn_dtype_size(xattn_dtype dtype);
/** Bytes that n consecutive values of dtype take: n times the element size,
 * for q8_0 34 bytes per block of 32 (n rounded up to whole blocks); 0 for an
 * invalid dtype; UINT64_MAX when the count overflows 64 bits. */
XATTN_API uint64_t xattn_dtype_bytes(xattn_dtype dtype, uint64_t n);

/* ---- backends and devices ---------------------------------------------- */

typedef enum xattn_backend {
    XATTN_BACKEND_AUTO = -1, /* only for xattn_ctx_create: the best available */
    XATTN_BACKEND_CPU = 0,
    XATTN_BACKEND_OPENCL = 1,
    XATTN_BACKEND_CUDA = 2,
    XATTN_BACKEND_COUNT = 3
} xattn_backend;

/** "cpu", "opencl", "cuda" ("auto" for XATTN_BACKEND_AUTO); "?" otherwise. */
XATTN_API const char *xattn_backend_name(xattn_backend backend);
/** Parses a backend name as xattn_backend_name writes it. */
XATTN_API xattn_status xattn_backend_from_name(const char *name, xattn_backend *out);
/** 1 when this build of the library contains the backend, else 0. */
XATTN_API int xattn_backend_compiled(xattn_backend backend);
/**
 * XATTN_STATUS_OK when the backend is compiled in and has at least one usable
 * device on this machine; otherwise XATTN_STATUS_BACKEND_UNAVAILABLE, with the
 * reason (for example the CUDA driver's message) in xattn_last_error().
 */
XATTN_API xattn_status xattn_backend_available(xattn_backend backend);

/** Description of one device. Grows at its end only (see "ABI" below). */
typedef struct xattn_device_info {
    size_t struct_size; /* set by the library to sizeof(xattn_device_info) */
    xattn_backend backend;
    int index;      /* index within the backend */
    char name[256]; /* "NVIDIA H200", "pthread-Intel(R) Xeon(R) ..." */
    char vendor[128];
    char driver_version[128];  /* driver / runtime version; "" where meaningless */
    char platform[128];        /* OpenCL platform name; CUDA runtime version */
    char description[512];     /* one line for humans, the backend's own summary */
    int compute_units;         /* CPU threads the backend uses, OpenCL CUs, CUDA SMs */
    uint64_t global_mem_bytes; /* device memory (CPU: physical memory) */
    uint64_t local_mem_bytes;  /* OpenCL local / CUDA shared memory per block; CPU: L1d */
    uint64_t cache_bytes;      /* last-level cache (CPU L3, GPU L2); 0 if unknown */
    size_t max_work_group_size;
    int fp16_supported; /* native half arithmetic (cl_khr_fp16 / sm_53+ / AVX512-FP16) */
    int fp64_supported;
    int compute_capability; /* CUDA: major*10+minor; 0 elsewhere */
    char cpu_features[128]; /* CPU: SIMD paths the kernels use ("avx2 fma f16c") */
    int device_type;        /* xattn_device_type */
} xattn_device_info;

typedef enum xattn_device_type {
    XATTN_DEVICE_TYPE_OTHER = 0,
    XATTN_DEVICE_TYPE_CPU = 1,
    XATTN_DEVICE_TYPE_GPU = 2,
    XATTN_DEVICE_TYPE_ACCELERATOR = 3
} xattn_device_type;

/** Number of devices of a backend (0 when the backend is not available). */
XATTN_API xattn_status xattn_device_count(xattn_backend backend, int *count);
/** Fills info for device `index` of `backend`. */
XATTN_API xattn_status xattn_device_get_info(xattn_backend backend, int index,
                                             xattn_device_info *info);

/* ---- contexts ---------------------------------------------------------- */

typedef struct xattn_ctx xattn_ctx;

/**
 * Creates a context on device `device` of `backend` (XATTN_BACKEND_AUTO picks
 * CUDA, then OpenCL on a GPU, then the CPU; device is then ignored). The
 * context owns one queue/stream; calls on it are ordered. A context must not be
 * used by two threads at once: a call that finds it in use returns
 * XATTN_STATUS_BUSY instead of racing.
 */
XATTN_API xattn_status xattn_ctx_create(xattn_backend backend, int device, xattn_ctx **out);
/**
 * Waits for pending work and frees everything the context owns, buffers still
 * live included: their memory is freed (memory only wrapped is left to its
 * owner), and each such handle becomes dead. A dead handle may only be given to
 * xattn_buffer_free, which then frees the handle itself (do so, or its few
 * bytes leak); any other call given one returns XATTN_STATUS_INVALID_ARGUMENT.
 * NULL is a no-op.
 */
XATTN_API void xattn_ctx_destroy(xattn_ctx *ctx);
/** Waits until all work submitted on the context has finished. */
XATTN_API xattn_status xattn_ctx_sync(xattn_ctx *ctx);
/** The backend the context runs on. */
XATTN_API xattn_backend xattn_ctx_backend(const xattn_ctx *ctx);
/** Fills info for the context's device. */
XATTN_API xattn_status xattn_ctx_device_info(const xattn_ctx *ctx, xattn_device_info *info);

typedef enum xattn_option {
    /* CPU: worker threads (0 = all the backend sees; default 0). */
    XATTN_OPT_NUM_THREADS = 1,
    /* Bytes the context may hold at once through its allocator (0 = no limit).
     * Allocations beyond it fail with XATTN_STATUS_OUT_OF_MEMORY. */
    XATTN_OPT_MEMORY_LIMIT = 2,
    /* CPU: SIMD path: 0 = best the CPU has, 1 = portable C only, 2 = AVX2+FMA,
     * 3 = AVX-512. Asking for a path the CPU lacks is XATTN_STATUS_UNSUPPORTED. */
    XATTN_OPT_CPU_SIMD = 3,
    /* Poison outputs and workspaces with NaN before each call (tests). 0/1. */
    XATTN_OPT_POISON = 4
} xattn_option;

/** Sets an option; unknown options and out-of-range values are rejected. */
XATTN_API xattn_status xattn_ctx_set_option(xattn_ctx *ctx, xattn_option option, int64_t value);
/** Reads an option's current value. */
XATTN_API xattn_status xattn_ctx_get_option(const xattn_ctx *ctx, xattn_option option,
                                            int64_t *value);

typedef struct xattn_mem_stats {
    uint64_t current_bytes; /* bytes the context's allocator holds now */
    uint64_t peak_bytes;    /* most it held at once since creation or the last reset */
    uint64_t alloc_count;   /* allocations made */
    uint64_t limit_bytes;   /* XATTN_OPT_MEMORY_LIMIT, 0 = none */
} xattn_mem_stats;

/** Memory held by the context, through the tracking allocator every byte goes through. */
XATTN_API xattn_status xattn_ctx_mem_stats(const xattn_ctx *ctx, xattn_mem_stats *stats);
/** Sets the peak to the current value. */
XATTN_API xattn_status xattn_ctx_reset_peak(xattn_ctx *ctx);

/**
 * Memory of the context's device, in bytes: its `total` and what this process
 * can still use of it now (`available`); either pointer may be NULL, and a
 * figure is 0 where the backend cannot tell. CPU, and OpenCL devices of the
 * CPU type: physical memory, and the kernel's MemAvailable bounded by the
 * process's cgroup memory limit less the cgroup's usage (cgroup v1 and v2,
 * every ancestor's limit). CUDA: the driver's free and total memory. Other
 * OpenCL devices: the global memory size for both (OpenCL has no free figure).
 * Programs check an allocation against `available` before making it (the
 * tool does for `xattn run` and `bench`); the library itself checks a
 * workspace it is about to fault in.
 */
XATTN_API xattn_status xattn_ctx_device_memory(const xattn_ctx *ctx, uint64_t *total,
                                               uint64_t *available);

/* ---- buffers ----------------------------------------------------------- */

typedef struct xattn_buffer xattn_buffer;

/** Allocates `bytes` of device memory on the context (counted by its allocator). */
XATTN_API xattn_status xattn_buffer_alloc(xattn_ctx *ctx, size_t bytes, xattn_buffer **out);
/**
 * Wraps caller memory without copying. The caller keeps ownership and must keep
 * it alive until xattn_buffer_free. On the CPU the kernels read and write it in
 * place; OpenCL uses CL_MEM_USE_HOST_PTR; CUDA returns XATTN_STATUS_UNSUPPORTED
 * (wrap a device pointer with xattn_cuda.h instead).
 */
XATTN_API xattn_status xattn_buffer_wrap_host(xattn_ctx *ctx, void *ptr, size_t bytes,
                                              xattn_buffer **out);
/** Frees a buffer (the memory itself only if the library allocated it). NULL is a no-op;
 * a handle whose context was destroyed is freed too (xattn_ctx_destroy). */
XATTN_API void xattn_buffer_free(xattn_buffer *buf);
/** Copies `bytes` from host memory into the buffer at byte `offset` (blocking). */
XATTN_API xattn_status xattn_buffer_write(xattn_buffer *buf, size_t offset, const void *src,
                                          size_t bytes);
/** Copies `bytes` from the buffer at byte `offset` into host memory (blocking). */
XATTN_API xattn_status xattn_buffer_read(xattn_buffer *buf, size_t offset, void *dst, size_t bytes);
/** Size in bytes (0 for NULL). */
XATTN_API size_t xattn_buffer_size(const xattn_buffer *buf);

/* ---- tensors ----------------------------------------------------------- */

/**
 * A view into a buffer. Q, K, V, O use the logical order [B, S, H, D]
 * (batch, sequence, heads, head dim) whatever the memory layout: strides, in
 * elements, give the layout, so BSHD (FlashAttention) and BHSD (PyTorch) both
 * work without copies. Strides may not be negative. A stride is ignored where
 * the extent is 1.
 */
typedef struct xattn_tensor {
    xattn_buffer *buffer; /* NULL means "absent" for optional tensors */
    size_t offset;        /* bytes from the start of the buffer */
    xattn_dtype dtype;
    int64_t shape[4];
    int64_t strides[4]; /* elements */
} xattn_tensor;

/** A contiguous [B, S, H, D] view in BSHD layout (FlashAttention, HF). */
XATTN_API xattn_tensor xattn_tensor_bshd(xattn_buffer *buf, size_t offset, xattn_dtype dtype,
                                         int64_t b, int64_t s, int64_t h, int64_t d);
/** A [B, S, H, D] view of memory laid out as BHSD (PyTorch's [B, H, S, D]). */
XATTN_API xattn_tensor xattn_tensor_bhsd(xattn_buffer *buf, size_t offset, xattn_dtype dtype,
                                         int64_t b, int64_t s, int64_t h, int64_t d);

/* ---- attention --------------------------------------------------------- */

typedef enum xattn_algo {
    XATTN_ALGO_AUTO = 0,
    XATTN_ALGO_NAIVE = 1,   /* S = QK^T materialized, softmax, O = PV: three phases */
    XATTN_ALGO_FLASH = 2,   /* tiled, online softmax, O(Sq) extra memory */
    XATTN_ALGO_SPLITKV = 3, /* Sk split into chunks, partial O/LSE, then combine */
    XATTN_ALGO_COUNT
} xattn_algo;

/** "auto", "naive", "flash", "splitkv"; "?" otherwise. */
XATTN_API const char *xattn_algo_name(xattn_algo algo);
XATTN_API xattn_status xattn_algo_from_name(const char *name, xattn_algo *out);

typedef enum xattn_align {
    /* Query row i sits at key position p = i (PyTorch's is_causal). */
    XATTN_ALIGN_TOP_LEFT = 0,
    /* p = i + Lk - Lq: the last query row sees the last key (FlashAttention). */
    XATTN_ALIGN_BOTTOM_RIGHT = 1
} xattn_align;

/**
 * The attention problem. Initialize with xattn_attn_desc_init, then set fields.
 *
 * Shapes (logical order, see xattn_tensor):
 *   q [B, Sq, Hq, D]   k [B, Sk, Hkv, D]   v [B, Sk, Hkv, Dv]   o [B, Sq, Hq, Dv]
 *   lse (optional, f32) [B, Hq, Sq, 1]  — shape[3] must be 1
 *   bias (optional, f32 or f16) [Bb, Hb, Sq', Sk'] with Bb in {1, B}, Hb in {1, Hq},
 *     Sq' >= Sq and Sk' >= Sk; added to the scores; may hold -inf.
 * Packed variable-length batches (cu_seqlens_q and cu_seqlens_k set):
 *   q [1, Tq, Hq, D], k/v [1, Tk, Hkv, D], o [1, Tq, Hq, Dv], lse [1, Hq, Tq, 1];
 *   sequence b holds tokens cu[b] .. cu[b+1]-1; B is num_seqs.
 * Dtypes: q and o share one dtype, k and v share one (which may differ from q's).
 * D and Dv: 1..256. Hq must be a multiple of Hkv (GQA; Hkv = 1 is MQA).
 *
 * Semantics for sequence b, head h, query row i, key j (lengths Lq, Lk):
 *   s = (q_i . k_j) * scale; softcap: s = cap*tanh(s/cap); p = i (top-left) or
 *   i + Lk - Lq (bottom-right); ALiBi: s += -slope[h]*|p - j|; bias: s += bias;
 *   masked (s = -inf) when j >= Lk, causal and j > p, window and j < p - left or
 *   j > p + right. Rows i >= Lq (padding) give O = 0 and LSE = -inf; a row with
 *   every score -inf gives O = 0 and LSE = -inf; a NaN score makes its row NaN;
 *   a masked key contributes nothing (not even 0 * NaN from its V row).
 *   docs/semantics.md writes these rules out step by step.
 */
typedef struct xattn_attn_desc {
    size_t struct_size; /* set by xattn_attn_desc_init (see "ABI" below) */

    xattn_tensor q, k, v, o;
    xattn_tensor lse;  /* optional (buffer NULL = not written) */
    xattn_tensor bias; /* optional additive bias / mask */

    float scale;               /* 0 = default 1/sqrt(D) */
    float softcap;             /* 0 = off; else s = softcap * tanh(s / softcap), softcap > 0 */
    const float *alibi_slopes; /* optional host array [Hq] */

    int causal;           /* 0 or 1 */
    xattn_align align;    /* causal, window and ALiBi alignment; default BOTTOM_RIGHT */
    int64_t window_left;  /* < 0 = unbounded (default) */
    int64_t window_right; /* < 0 = unbounded (default) */

    /* Padded batches: optional host arrays [B] of per-sequence lengths,
     * 0 <= seqlens_q[b] <= Sq and 0 <= seqlens_k[b] <= Sk. NULL = full length. */
    const int32_t *seqlens_q;
    const int32_t *seqlens_k;

    /* Packed batches: host arrays [num_seqs + 1], non-decreasing, from 0, within
     * the tensors' token counts. Both set or both NULL; excludes seqlens_*. */
    const int32_t *cu_seqlens_q;
    const int32_t *cu_seqlens_k;
    int64_t num_seqs;

    xattn_algo algo; /* default AUTO */
    int num_splits;  /* SPLITKV chunks; 0 = chosen from the shape and device */

    /* Appended: optional attention sinks (buffer NULL = none), f32, shape
     * [1, 1, Hq, 1]: one logit per query head that joins each row's softmax
     * denominator and never its output (docs/semantics.md, step 8). */
    xattn_tensor sinks;

    /* Appended: a paged KV cache (docs/api.md, "Paged KV cache"), as
     * FlashAttention's block_table and vLLM's. When block_table is set, k and v
     * are page pools: k [num_pages, page_size, Hkv, D], v [num_pages,
     * page_size, Hkv, Dv] (their strides give any order of the last three
     * dims, e.g. [num_pages, Hkv, page_size, D]), and key j of sequence b is
     * slot j % page_size of page block_table[b * max_pages_per_seq +
     * j / page_size]. Pages need not be contiguous nor in order, and several
     * sequences may read one page (a shared prefix). seqlens_k (the cache
     * lengths) is required; packed batches (cu_seqlens_*) are not allowed.
     * The table is a host array: the library checks every page index it will
     * use and copies the table to the device with the call. */
    const int32_t *block_table; /* host [B, max_pages_per_seq] or NULL */
    int64_t max_pages_per_seq;  /* the table's row length, >= 1 when paged */

    /* Appended: append, then attend (flash_attn_with_kvcache's k and v).
     * k_new [B, S_new, Hkv, D] and v_new [B, S_new, Hkv, Dv], in k's dtype,
     * are written into the cache (k and v, paged or not) at positions
     * seqlens_k[b] .. seqlens_k[b] + S_new - 1 of each sequence b, and the
     * call then attends over seqlens_k[b] + S_new keys. seqlens_k is required
     * and is not changed: the caller advances its lengths. Both set or both
     * absent (buffer NULL). Rotary embedding is not applied: rotate k_new
     * (and q) before the call. */
    xattn_tensor k_new, v_new;

    /* Appended: the scales of an fp8 K/V cache (dtype FP8_E4M3 or FP8_E5M2),
     * f32 [1, 1, Hkv, 1], one per KV head, as FlashAttention 3's descale_k /
     * descale_v: K[.., h, d] = fp8 value * k_scale[h] (V likewise). Optional
     * (buffer NULL = 1); only with an fp8 k. */
    xattn_tensor k_scale, v_scale;
} xattn_attn_desc;

/** Fills d with defaults: no tensors, scale 1/sqrt(D), no masks, AUTO. */
XATTN_API void xattn_attn_desc_init(xattn_attn_desc *d);

/** What one call did. Grows at its end only (see "ABI" below). */
typedef struct xattn_run_info {
    size_t struct_size; /* set by the library */
    xattn_algo algo_requested;
    xattn_algo algo_chosen;
    char reason[160];         /* why AUTO chose algo_chosen */
    int num_splits;           /* SPLITKV: chunks used; else 0 */
    uint64_t workspace_bytes; /* extra device memory the call allocated */
    double device_ms;         /* whole call on the backend's own clock (after sync) */
    int num_phases;
    char phase_names[4][16]; /* "qk", "softmax", "pv" | "partial", "combine" | "flash" */
    double phase_ms[4];
    /* Appended for the measurement model; 0 where a backend does not know. */
    double build_ms;           /* one-off costs paid in this call (program build, module
                                * load); never included in device_ms */
    int tile_q, tile_k;        /* FLASH/SPLITKV tiles used, for executed-work accounting:
                                * query positions (of one head) and keys per tile (the
                                * CPU also gives NAIVE's blocks of query rows and keys) */
    uint64_t device_mem_total; /* device memory, bytes, where the backend knows */
    uint64_t device_mem_free;
    int tile_heads;   /* query heads of one GQA group that share each loaded K/V
                       * tile (GQA packing); 0 or 1: every head loads its own */
    char kernel[32];  /* the kernel variant that ran: the CPU's SIMD path
                       * ("avx512", "avx2", "portable"), CUDA's "mma" or "simt",
                       * OpenCL's kernel form; "" where a backend does not say */
    int matrix_units; /* 1 when the products ran on matrix units (tensor cores):
                       * shares of the FMA ceiling then use the matrix ceiling */
    /* Appended: the append step (xattn_attn_desc.k_new), before the phases and
     * not included in device_ms: host-clock time of its copies (0 when not
     * timed or no append) and the bytes it wrote into the cache. */
    double append_ms;
    uint64_t append_bytes;
} xattn_run_info;

/**
 * Validates the descriptor (every view, shape, stride, dtype, length, and the
 * size arithmetic) and submits attention on the context's queue. Bad input
 * returns a specific status before any work is done, with a message naming the
 * field. `info` may be NULL; when given, the call is synchronous and its times
 * are filled in.
 */
XATTN_API xattn_status xattn_attention(xattn_ctx *ctx, const xattn_attn_desc *d,
                                       xattn_run_info *info);

/**
 * Runs every check a call makes before it allocates (the descriptor's rules,
 * the backend's limits, the driver's size checks) without running anything:
 * the same status and message as xattn_attention would return, but for
 * what only a run can meet (an allocation refused, a device fault).
 */
XATTN_API xattn_status xattn_attention_check(const xattn_ctx *ctx, const xattn_attn_desc *d);

/* ---- measurement: records, user ranges, exports, ceilings -------------- */

/**
 * One attention call as the profiler saw it (docs/measurement.md).
 * Times on the host timeline are microseconds on the monotonic clock since the
 * context was created; device times come from the backend's own timer (CPU
 * clock, OpenCL event profiling, CUDA events) and are placed on the host
 * timeline. Grows at its end only (see "ABI" below).
 */
typedef struct xattn_record {
    size_t struct_size;
    /* identity */
    uint64_t seq; /* 0, 1, 2, ... per context, never reused after a reset */
    xattn_backend backend;
    int device;
    char device_name[128];
    xattn_algo algo_requested, algo_chosen;
    char reason[160];
    xattn_dtype q_dtype, kv_dtype;
    int64_t batch, heads, kv_heads, sq, sk, head_dim, head_dim_v; /* sq/sk: longest sequence */
    int causal;
    xattn_align align;
    int64_t window_left, window_right;
    float scale, softcap;
    int has_bias, has_alibi, has_lse, varlen, padded, num_splits;
    char range[64]; /* innermost user range open at submit; "" if none */
    /* time */
    double host_submit_us;                 /* when xattn_attention was entered */
    double host_return_us;                 /* when it returned */
    double device_start_us, device_end_us; /* the backend's timer, on the host timeline */
    double device_ms;
    int num_phases;
    char phase_names[4][16];
    double phase_ms[4];
    double phase_start_us[4]; /* on the host timeline */
    double build_ms;          /* one-off costs in this call, apart from device_ms */
    /* memory */
    uint64_t workspace_bytes;
    uint64_t mem_current_bytes, mem_peak_bytes; /* the context's allocator after the call */
    uint64_t device_mem_total, device_mem_free; /* 0 where unknown */
    /* work */
    double flops_dense;    /* 2*Hq*Sq*Sk*(D+Dv) per sequence, padded rectangle */
    double flops_useful;   /* only the (i, j) pairs that masks and lengths allow */
    double flops_executed; /* what the algorithm computed (skipped tiles excluded) */
    double bytes_min;      /* Q, K, V read once, O (and LSE) written once */
    double bytes_actual;   /* the algorithm's estimated traffic (NAIVE: + scores) */
    /* derived (negative where undefined, e.g. no ceiling measured) */
    double gflops_useful, gflops_executed, gbytes_per_s;
    double padding_waste;   /* share of the dense rectangle on padding rows/columns */
    double pct_fma_ceiling; /* executed GFLOP/s / the device's FMA ceiling, in % */
    double pct_bw_ceiling;  /* actual GB/s / the device's read bandwidth, in % */
    /* appended */
    int tile_q, tile_k;    /* FLASH/SPLITKV tiles the executed work was counted with */
    int tile_heads;        /* query heads sharing each K/V tile load (bytes_actual) */
    char kernel[32];       /* as xattn_run_info.kernel */
    int matrix_units;      /* as xattn_run_info.matrix_units */
    int work_counted;      /* 1: flops_executed (and the K/V part of bytes_actual) were
                            * counted by the kernels as they ran; 0: computed from the
                            * tile model of docs/measurement.md */
    int has_sinks;         /* the call had attention sinks (xattn_attn_desc.sinks) */
    int64_t page_size;     /* paged KV cache: tokens per page; 0 = contiguous K/V */
    int64_t append_tokens; /* tokens appended per sequence (k_new's S_new); 0 = none */
    double append_ms;      /* the append step's time (xattn_run_info.append_ms) */
    uint64_t append_bytes; /* bytes the append step wrote into the cache */
} xattn_record;

/**
 * Turns recording on (1) or off (0) for the context; off by default. While on,
 * every successful xattn_attention leaves a record, and calls are timed even
 * when their `info` is NULL (on backends with asynchronous queues each call
 * then waits for its completion). Costs < 1% of a call of 1 ms or more: no
 * allocation beyond the amortized growth of the record array, no file access.
 */
XATTN_API xattn_status xattn_profiler_enable(xattn_ctx *ctx, int on);
/** Number of records held. */
XATTN_API xattn_status xattn_profiler_count(const xattn_ctx *ctx, size_t *count);
/** Copies record `index` (0 = oldest held). */
XATTN_API xattn_status xattn_profiler_get(const xattn_ctx *ctx, size_t index, xattn_record *rec);
/** Drops every record and every closed user-range event (sequence numbers go
 * on; ranges still open stay open and are closed by their pop). */
XATTN_API xattn_status xattn_profiler_reset(xattn_ctx *ctx);
/**
 * Opens a named user range (the app's own phase) on the context's host track;
 * records made while it is the innermost open range carry its name. Names are
 * truncated to 63 bytes; at most 64 ranges can be open at once. Ranges nest
 * whether profiling is on or off; their events are kept only while it is on.
 */
XATTN_API xattn_status xattn_range_push(xattn_ctx *ctx, const char *name);
/** Closes the innermost open range; XATTN_STATUS_INVALID_ARGUMENT if none is open. */
XATTN_API xattn_status xattn_range_pop(xattn_ctx *ctx);

typedef enum xattn_export_format {
    XATTN_EXPORT_JSON = 0, /* versioned schema, docs/measurement.md */
    XATTN_EXPORT_CSV = 1,  /* one row a record, a header row */
    XATTN_EXPORT_TRACE = 2 /* Chrome / Perfetto trace event JSON */
} xattn_export_format;

/** Writes every record (and, for traces, ranges and memory counters) to `path`;
 * XATTN_STATUS_IO when the file cannot be written. */
XATTN_API xattn_status xattn_profiler_export(const xattn_ctx *ctx, xattn_export_format format,
                                             const char *path);

/** A device's measured ceilings, from the built-in micro-benchmarks. */
typedef struct xattn_ceilings {
    size_t struct_size;
    double fma_f32_gflops; /* peak f32 FMA throughput (2 FLOPs an FMA) */
    double fma_f16_gflops; /* 0 where the device has no faster 16-bit path */
    double fma_bf16_gflops;
    double read_gbps; /* streaming read bandwidth */
    double copy_gbps; /* read + write bandwidth (bytes moved / s) */
    int from_cache;   /* 1 when loaded from the on-disk cache */
    char cache_path[512];
    /* Appended: dense f16 / bf16 products on the device's matrix units (tensor
     * cores), f32 accumulation; 0 where the device has none or the backend
     * does not measure them. Runs with matrix_units = 1 are shares of these. */
    double mma_f16_gflops;
    double mma_bf16_gflops;
    /* Appended: the load they were measured under. load_others: the share
     * (0..1) of the host's CPU time that other processes used while the
     * micro-benchmarks ran; -1 when not known (not Linux, the quick test mode,
     * or an entry cached before it was recorded). under_load: 1 when that
     * share was above 10% on a device that runs on the host's CPUs, where the
     * figures are then likely low: such ceilings are still used, and the next
     * xattn_ceilings_measure (force 0) measures them again. */
    double load_others;
    int under_load;
} xattn_ceilings;

/**
 * The context's device ceilings: from the on-disk cache (keyed by device
 * identity) unless `force` is 1 or no valid entry exists, in which case the
 * micro-benchmarks run (seconds) and the cache is written. Records made
 * afterwards carry % of ceiling. Cache folder: $XATTN_CACHE_DIR ("" = none),
 * else $XDG_CACHE_HOME/xattn, else ~/.cache/xattn, used only when it is the
 * user's own and private (docs/guarantees.md); a cache that cannot be written
 * is not an error (cache_path is then ""). A cached entry flagged under_load
 * is measured again (force 0 too); the new figures replace it unless they were
 * measured under a heavier load. XATTN_CEILINGS_QUICK=1 shortens the
 * micro-benchmarks (tests; cached apart). XATTN_STATUS_UNSUPPORTED when the
 * backend has no micro-benchmarks.
 */
XATTN_API xattn_status xattn_ceilings_measure(xattn_ctx *ctx, int force, xattn_ceilings *out);
/** The ceilings known to the context (loaded from the cache at creation, or measured);
 * XATTN_STATUS_UNSUPPORTED when none are known yet (run xattn_ceilings_measure). */
XATTN_API xattn_status xattn_ceilings_get(const xattn_ctx *ctx, xattn_ceilings *out);

/* ---- host-side conversion helpers ------------------------------------- */

/** f32 -> f16 / bf16 bits, round to nearest even (NaN stays NaN). */
XATTN_API uint16_t xattn_f32_to_f16(float x);
XATTN_API uint16_t xattn_f32_to_bf16(float x);
XATTN_API float xattn_f16_to_f32(uint16_t h);
XATTN_API float xattn_bf16_to_f32(uint16_t h);
/** f32 -> fp8 byte (dtype XATTN_DTYPE_FP8_E4M3 or _E5M2), round to nearest
 * even; beyond the largest finite value: NaN for E4M3 (it has no infinity),
 * inf for E5M2, as PyTorch's float8 casts. 0 for another dtype. */
XATTN_API uint8_t xattn_f32_to_fp8(float x, xattn_dtype dtype);
/** The exact f32 value of an fp8 byte; NaN for another dtype. */
XATTN_API float xattn_fp8_to_f32(uint8_t b, xattn_dtype dtype);
/** n floats (a multiple of 32) -> n / 32 q8_0 blocks of 34 bytes, as ggml's
 * quantize_row_q8_0_ref: per block d = amax / 127 in f32, stored as f16
 * (round to nearest even), qs[i] = roundf(x[i] * (1 / d)) (0 where d is 0).
 * A block holding an inf or NaN is written with d = NaN and qs 0 (it reads
 * back as NaN) and the call returns XATTN_STATUS_INVALID_ARGUMENT naming the
 * first such x[i]; n not a multiple of 32 (or negative), or a NULL pointer
 * with n > 0: XATTN_STATUS_INVALID_ARGUMENT, nothing written. */
XATTN_API xattn_status xattn_quantize_q8_0(const float *x, void *blocks, int64_t n);
/** n / 32 q8_0 blocks -> n floats, x[i] = f16 d * qs[i] (exact in f32);
 * the same rules on n. */
XATTN_API xattn_status xattn_dequantize_q8_0(const void *blocks, float *x, int64_t n);

/* ---- ABI: structs that grow ------------------------------------------------
 *
 * The structs the library fills (xattn_device_info, xattn_run_info,
 * xattn_record, xattn_ceilings) and the descriptor it reads (xattn_attn_desc)
 * begin with `struct_size` and only ever grow at the end. The entry points
 * that take them come in two forms:
 *
 *   - the `_sized` functions take the caller's sizeof: the library reads and
 *     writes only min(caller's size, its own) bytes, gives the fields the
 *     caller has and it does not know their defaults (0), and sets the
 *     caller's struct_size to the bytes it filled;
 *   - the plain names are macros over the `_sized` functions with the sizeof
 *     of this header's structs, so that C and C++ callers need do nothing. The
 *     plain symbols (what a function pointer or an FFI such as ctypes gets)
 *     keep the 0.1 layouts for ever.
 *
 * So a program built against an older header runs with a newer library, and
 * one built against a newer header learns from struct_size which fields an
 * older library filled. A descriptor larger than the library's is accepted
 * only when the bytes past the library's fields are zero (new fields left at
 * their defaults); otherwise the call returns XATTN_STATUS_UNSUPPORTED.
 *
 * Stable: every function and type in this header, the statuses and their
 * numbers, and the layouts of xattn_tensor and xattn_mem_stats (which do not
 * grow). Experimental: the fields marked "appended" may still change meaning
 * in 0.x releases (they are measured figures, see docs/measurement.md), and
 * the interop headers xattn_opencl.h / xattn_cuda.h.
 */
XATTN_API xattn_status xattn_device_get_info_sized(xattn_backend backend, int index,
                                                   xattn_device_info *info, size_t info_size);
XATTN_API xattn_status xattn_ctx_device_info_sized(const xattn_ctx *ctx, xattn_device_info *info,
                                                   size_t info_size);
XATTN_API void xattn_attn_desc_init_sized(xattn_attn_desc *d, size_t desc_size);
XATTN_API xattn_status xattn_attention_sized(xattn_ctx *ctx, const xattn_attn_desc *d,
                                             xattn_run_info *info, size_t info_size);
XATTN_API xattn_status xattn_profiler_get_sized(const xattn_ctx *ctx, size_t index,
                                                xattn_record *rec, size_t rec_size);
XATTN_API xattn_status xattn_ceilings_measure_sized(xattn_ctx *ctx, int force, xattn_ceilings *out,
                                                    size_t out_size);
XATTN_API xattn_status xattn_ceilings_get_sized(const xattn_ctx *ctx, xattn_ceilings *out,
                                                size_t out_size);

#define xattn_device_get_info(backend, index, info)                                                \
    xattn_device_get_info_sized((backend), (index), (info), sizeof(xattn_device_info))
#define xattn_ctx_device_info(ctx, info)                                                           \
    xattn_ctx_device_info_sized((ctx), (info), sizeof(xattn_device_info))
#define xattn_attn_desc_init(d) xattn_attn_desc_init_sized((d), sizeof(xattn_attn_desc))
#define xattn_attention(ctx, d, info)                                                              \
    xattn_attention_sized((ctx), (d), (info), sizeof(xattn_run_info))
#define xattn_profiler_get(ctx, index, rec)                                                        \
    xattn_profiler_get_sized((ctx), (index), (rec), sizeof(xattn_record))
#define xattn_ceilings_measure(ctx, force, out)                                                    \
    xattn_ceilings_measure_sized((ctx), (force), (out), sizeof(xattn_ceilings))
#define xattn_ceilings_get(ctx, out) xattn_ceilings_get_sized((ctx), (out), sizeof(xattn_ceilings))

#ifdef __cplusplus
}
#endif
#endif /* XATTN_H */
