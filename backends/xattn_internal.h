/*
 * Internals of the dispatch layer: contexts, buffers, the backend interface,
 * the tracking allocator and error reporting. Backend host modules include
 * this; kernels do not (they see xattn_problem.h only).
 */
#ifndef XATTN_INTERNAL_H
#define XATTN_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "xattn.h"
#include "xattn_problem.h"

/* ---- errors ------------------------------------------------------------- */

/* Records `status` with a formatted message as this thread's last error, sends
 * it to the log callback, and returns `status`. */
xattn_status xattn__error(xattn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clears this thread's last error (start of every public call). */
void xattn__clear_error(void);
/* Sets this thread's last-error text without logging (restoring a saved one). */
void xattn__set_error_text(const char *text);
/* Logs through the user's callback / XATTN_LOG. */
void xattn__log(xattn_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Propagates an error; debug builds note where it passed. */
#ifndef NDEBUG
#define XATTN_RETURN_IF_ERROR(expr)                                                                \
    do {                                                                                           \
        xattn_status xattn__st = (expr);                                                           \
        if (xattn__st != XATTN_STATUS_OK) {                                                        \
            xattn__log(XATTN_LOG_DEBUG, "  from %s:%d (%s)", __FILE__, __LINE__, #expr);           \
            return xattn__st;                                                                      \
        }                                                                                          \
    } while (0)
#else
#define XATTN_RETURN_IF_ERROR(expr)                                                                \
    do {                                                                                           \
        xattn_status xattn__st = (expr);                                                           \
        if (xattn__st != XATTN_STATUS_OK)                                                          \
            return xattn__st;                                                                      \
    } while (0)
#endif

/* Overflow-checked size arithmetic: return 1 on overflow. */
static inline int xattn__mul_overflow(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static inline int xattn__add_overflow(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}

/* ---- objects ------------------------------------------------------------ */

struct xattn_backend_iface;
struct xattn__exec;
struct xattn__plan;

/* ---- profiler state (xattn_profiler.c) ------------------------------------ */

/* Deepest nesting of user ranges (xattn_range_push beyond it is refused). */
#define XATTN__RANGE_DEPTH 64
#define XATTN__RANGE_NAME 64

/* A user range as the trace shows it (stored only while profiling is on). */
typedef struct xattn__range_event {
    char name[XATTN__RANGE_NAME];
    double start_us, end_us; /* host timeline; end_us < 0 while the range is open */
    int depth;               /* 0 = outermost */
} xattn__range_event;

/* An open range: kept whether or not profiling is on, so that push/pop pair up
 * across xattn_profiler_enable and xattn_profiler_reset. */
typedef struct xattn__range_open {
    char name[XATTN__RANGE_NAME];
    double start_us;
    size_t event; /* index into the events, or SIZE_MAX when not stored */
} xattn__range_open;

/* One stored record plus what only the exports need. */
typedef struct xattn__prof_entry {
    xattn_record rec;
    uint64_t mem_before_bytes; /* the context's allocator when the call was entered */
} xattn__prof_entry;

typedef struct xattn__profiler {
    int on;            /* xattn_profiler_enable */
    double t0;         /* xattn__now() at context creation: origin of the host timeline */
    uint64_t next_seq; /* never reset */
    uint64_t dropped;  /* records lost to a failed allocation */
    xattn__prof_entry *recs;
    size_t nrecs, cap_recs;
    xattn__range_event *events;
    size_t nevents, cap_events;
    xattn__range_open open[XATTN__RANGE_DEPTH];
    int depth;
    /* Device ceilings: 0 = the cache was not looked at yet, 1 = known, 2 = none. */
    int ceil_state;
    xattn_ceilings ceil;
} xattn__profiler;

struct xattn_ctx {
    const struct xattn_backend_iface *be;
    int device;
    void *bctx; /* the backend's own context state */
    xattn_device_info info;

    /* tracking allocator: every byte the library allocates for this context */
    _Atomic uint64_t mem_current;
    _Atomic uint64_t mem_peak;
    _Atomic uint64_t alloc_count;
    /* Options: atomic, since xattn_ctx_get_option and xattn_ctx_mem_stats
     * read them without taking the context while another thread may set them. */
    _Atomic uint64_t mem_limit; /* 0 = none */
    _Atomic int64_t opt_num_threads;
    _Atomic int64_t opt_cpu_simd;
    _Atomic int64_t opt_poison;

    atomic_int busy; /* one thread at a time; see xattn__ctx_enter */

    /* Every live buffer of the context (xattn_ctx_destroy frees what is left). */
    pthread_mutex_t buf_lock;
    struct xattn_buffer *buf_head;

    xattn__profiler prof; /* records, user ranges, ceilings */
};

/* Which memory a buffer's bytes are, so that two handles on the same memory
 * are seen to alias (xattn_validate.c). */
typedef enum xattn__mem_space {
    XATTN__MEM_HANDLE = 0, /* only the backend handle `native` identifies it (cl_mem) */
    XATTN__MEM_HOST = 1,   /* host virtual addresses from mem_base */
    XATTN__MEM_DEVICE = 2  /* device virtual addresses from mem_base (CUDA) */
} xattn__mem_space;

struct xattn_buffer {
    struct xattn_ctx *ctx; /* NULL once the context was destroyed (a dead handle) */
    size_t size;
    int owned;                  /* the library allocated the memory (and counts it) */
    void *host;                 /* host address when the memory is host-visible (CPU backend) */
    void *native;               /* the backend's handle: cl_mem, CUDA device pointer, ... */
    void *aux;                  /* backend-private */
    xattn__mem_space mem_space; /* set by the dispatch layer or the interop constructor */
    uintptr_t mem_base;         /* address of byte 0 in that space (HOST, DEVICE) */
    struct xattn_buffer *prev, *next; /* the context's list */
};

/* For interop constructors in backend modules (xattn_opencl.h, xattn_cuda.h):
 * a context shell with defaults for backend `be` and `device` but no backend
 * state; the caller sets ctx->bctx and ctx->info. On a later failure free it with
 * xattn__ctx_free_shell (which calls nothing of the backend). */
xattn_status xattn__ctx_alloc(const struct xattn_backend_iface *be, int device,
                              struct xattn_ctx **out);
void xattn__ctx_free_shell(struct xattn_ctx *ctx);
/* A buffer object of `size` bytes bound to ctx and listed on it, with no
 * memory attached; the caller sets host/native/aux (and mem_space/mem_base
 * when the memory has an address: the default, HANDLE, identifies it by
 * `native`). `owned` = 0 for caller memory (not counted). On
 * xattn_buffer_free, be->buffer_release is called, then the object is freed
 * and, when owned, the size is released from the allocator. An object whose
 * memory could not be attached goes with xattn__buffer_discard. */
xattn_status xattn__buffer_new(struct xattn_ctx *ctx, size_t size, int owned,
                               struct xattn_buffer **out);
void xattn__buffer_discard(struct xattn_buffer *buf);

/* Marks the context in use by this call; XATTN_STATUS_BUSY if another thread has it. */
xattn_status xattn__ctx_enter(struct xattn_ctx *ctx);
void xattn__ctx_leave(struct xattn_ctx *ctx);

/* ---- tracking allocator ------------------------------------------------- */

/* Accounts `bytes` against the context (limit checked); OUT_OF_MEMORY with a
 * message naming `what` if the limit would be passed. */
xattn_status xattn__mem_acquire(struct xattn_ctx *ctx, uint64_t bytes, const char *what);
void xattn__mem_release(struct xattn_ctx *ctx, uint64_t bytes);
/* Host memory, 64-byte aligned, accounted; NULL with the error set on failure. */
/* Host memory for kernels: 64-byte aligned; from 4 MiB on, aligned to 2 MiB
 * and advised for transparent huge pages (Linux), so that strided K/V walks
 * (BSHD rows one page apart) and big workspaces do not thrash the TLB. NULL
 * when out of memory; release with free(). `bytes` > 0, a multiple of 64. */
void *xattn__aligned_alloc(size_t bytes);
void *xattn__host_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what,
                        xattn_status *status);
void xattn__host_free(struct xattn_ctx *ctx, void *ptr, uint64_t bytes);
/* Host memory: total and what this process may still use (MemAvailable,
 * bounded by its cgroup's limit less usage, every ancestor included, and by
 * what its address-space limit leaves); 0 when nothing could be read.
 * xattn__host_memory_at reads the files under `root` instead of / (tests
 * build such trees), without the address-space limit. */
int xattn__host_memory(uint64_t *total, uint64_t *avail);
/* OUT_OF_MEMORY (naming `what`, the need and the limit) when `bytes` of host
 * memory that are about to be touched exceed what the process can still use:
 * under Linux's default overcommit the allocation itself would succeed and
 * touching it would bring the OOM killer. Allocations under 32 MiB are not
 * checked against MemAvailable and the cgroup; every size is checked against
 * RLIMIT_AS, where a host OpenCL runtime would abort instead of failing. */
xattn_status xattn__host_room(uint64_t bytes, const char *what);
/* RLIMIT_AS (1 when it is finite): the limit, the bytes mapped now and what
 * is left. */
int xattn__addr_room(uint64_t *limit, uint64_t *mapped, uint64_t *room);
int xattn__host_memory_at(const char *root, uint64_t *total, uint64_t *avail);

/* ---- backend interface -------------------------------------------------- */

/* The phases of the algorithms (their names are the run info's). */
typedef enum xattn__phase {
    XATTN__PH_QK = 0,      /* NAIVE: S = Q K^T with the score modifiers and masks */
    XATTN__PH_SOFTMAX = 1, /* NAIVE: P = softmax(S) in place, LSE */
    XATTN__PH_PV = 2,      /* NAIVE: O = P V */
    XATTN__PH_FLASH = 3,   /* FLASH: the tile loop */
    XATTN__PH_PARTIAL = 4, /* SPLITKV: the tile loop of each chunk, partial O and LSE */
    XATTN__PH_COMBINE = 5  /* SPLITKV: the chunks merged into O and LSE */
} xattn__phase;

/* The workspace regions of a call: the algorithm's own, sized by the driver
 * (NAIVE's score matrix S [B, Hq, Sq, Sk] f32; SPLITKV's partial O [splits,
 * B, Hq, Sq, Dv] and partial LSE [splits, B, Hq, Sq], f32), and the scratch
 * the backend asks for in its plan. */
enum {
    XATTN__WS_SCORES = 0,
    XATTN__WS_PART_O = 0,
    XATTN__WS_PART_LSE = 1,
    XATTN__WS_SCRATCH = 2,
    XATTN__WS_COUNT = 3
};

/* What one call runs (xattn_driver.c): the backend's plan, the driver's
 * sizes and allocations, and the times and figures the backend reports. */
typedef struct xattn__plan {
    /* from the backend's plan member */
    int splits; /* SPLITKV chunks (>= 1) */
    int tile_q, tile_k, tile_heads;
    char kernel[32]; /* the kernel variant (xattn_run_info.kernel) */
    int matrix_units;
    uint64_t scratch_bytes;    /* the backend's scratch region (0: none) */
    uint64_t scratch_fallback; /* a smaller scratch it can also run with (0: none) */
    int touch;                 /* fault the algorithm's regions in with this many threads */
    int touch_scratch;         /* ... and the scratch region (0: its first writes do) */
    /* from the driver */
    uint64_t ws_bytes[XATTN__WS_COUNT];
    void *ws[XATTN__WS_COUNT];
    int scratch_is_fallback; /* the scratch region is the fallback's size */
    /* from the backend's prepare / phase / finish */
    double build_ms;     /* one-off costs of this call (program build) */
    uint64_t held_bytes; /* device memory prepare holds for the call */
    double phase_ms[4];
    double device_ms;
    uint64_t device_mem_total, device_mem_free;
} xattn__plan;

/* The algorithm driver: validated problem -> plan -> workspace -> phases ->
 * run info; `exec` gets the kernels' counts. xattn_attention calls it. */
xattn_status xattn__drive(struct xattn_ctx *ctx, const xattn_problem *p, xattn_run_info *info,
                          int timed, struct xattn__exec *exec);
/* The checks a run makes before any work (the backend's plan and the
 * driver's size checks), for xattn_attention_check and xattn__drive. */
xattn_status xattn__plan_make(const struct xattn_ctx *ctx, const xattn_problem *p,
                              xattn__plan *plan);

/*
 * The work one call's kernels did, counted by the kernels as they ran (summed
 * over sequences and heads), so that executed FLOPs and a share of a ceiling
 * follow what really ran (docs/measurement.md, "Executed work"). A count < 0
 * means "not counted": the accounting then uses the tile model of
 * xattn_work.c and the record says so (work_counted = 0).
 */
typedef struct xattn__exec {
    double qk_pairs; /* (query row, key) scores computed: 2*D FLOPs each */
    double pv_pairs; /* (query row, key) terms of P.V computed: 2*Dv FLOPs each */
    double kv_rows;  /* rows of K (and V) read from memory, each load counted, summed
                      * over KV heads (< 0: from the tile model) */
} xattn__exec;

/* Every count "not counted". */
static inline void xattn__exec_init(xattn__exec *x)
{
    x->qk_pairs = x->pv_pairs = x->kv_rows = -1.0;
}

/*
 * One table per backend (ggml's ggml_backend_i). The dispatch layer validates
 * every argument before calling a member, so members can trust their input.
 * Members report failure with xattn__error(), which keeps the native code and
 * text in the message.
 */
typedef struct xattn_backend_iface {
    xattn_backend id;
    const char *name;

    /* Process-wide probe, called once (results cached by the registry): OK when
     * at least one device is usable, else BACKEND_UNAVAILABLE with the reason. */
    xattn_status (*probe)(void);
    /* Number of usable devices (after a successful probe). */
    int (*device_count)(void);
    /* Describe device `index` (0 <= index < device_count()). */
    xattn_status (*device_info)(int index, xattn_device_info *info);

    /* Create the backend state of ctx on device ctx->device (sets ctx->bctx). */
    xattn_status (*ctx_create)(struct xattn_ctx *ctx);
    /* Wait for pending work and free ctx->bctx. */
    void (*ctx_destroy)(struct xattn_ctx *ctx);
    /* Wait for all submitted work. */
    xattn_status (*sync)(struct xattn_ctx *ctx);
    /* Optional: a backend-specific option was set (NULL = none are). Called
     * after the generic range checks; may refuse with UNSUPPORTED. */
    xattn_status (*set_option)(struct xattn_ctx *ctx, xattn_option opt, int64_t value);

    /* Allocate `bytes` of device memory into buf->native (and buf->host when it
     * is host-visible). The dispatch layer has already accounted the bytes. */
    xattn_status (*buffer_alloc)(struct xattn_ctx *ctx, struct xattn_buffer *buf, size_t bytes);
    /* Optional: wrap caller host memory without copying (NULL = UNSUPPORTED). */
    xattn_status (*buffer_wrap_host)(struct xattn_ctx *ctx, struct xattn_buffer *buf, void *ptr,
                                     size_t bytes);
    /* Release what buffer_alloc / buffer_wrap_host created (not caller memory). */
    void (*buffer_release)(struct xattn_ctx *ctx, struct xattn_buffer *buf);
    /* Blocking copies; offset and size are already checked against buf->size. */
    xattn_status (*buffer_write)(struct xattn_ctx *ctx, struct xattn_buffer *buf, size_t offset,
                                 const void *src, size_t bytes);
    xattn_status (*buffer_read)(struct xattn_ctx *ctx, struct xattn_buffer *buf, size_t offset,
                                void *dst, size_t bytes);
    /* A device-side copy between two buffers of ctx, ordered with the queue's
     * work (it may return before it is done); ranges are checked and do not
     * overlap. The append step of a call uses it. */
    xattn_status (*buffer_copy)(struct xattn_ctx *ctx, struct xattn_buffer *dst, size_t dst_off,
                                struct xattn_buffer *src, size_t src_off, size_t bytes);

    /*
     * The device operations the algorithm driver (xattn_driver.c) runs an
     * attention call with; the driver owns everything else (docs/backends.md,
     * "Who calls whom"). A context serves one call at a time, so a backend may
     * keep a call's state in its context between prepare and finish.
     *
     * plan: whether this backend can run p (UNSUPPORTED, or another status,
     *   with a message naming the limit when not) and how: fills the split
     *   count, tiles, kernel variant and the scratch the backend needs beside
     *   the algorithm's regions. Allocates nothing and touches no device:
     *   xattn_attention_check calls it too, so that a check and a run of the
     *   same descriptor agree.
     * prepare: per-call device work before the phases (build or fetch a
     *   program, upload the per-sequence arrays, set up timers and counters);
     *   may report one-off costs in plan->build_ms and memory it holds for the
     *   call in plan->held_bytes. Optional.
     * ws_alloc / ws_free: device memory for a workspace region, through the
     *   tracking allocator; `touch` > 0 asks for the pages to be faulted in
     *   with that many threads (host memory); with p->poison the region is
     *   filled with NaN first.
     * phase: enqueue one phase (xattn__phase) on the context's queue, reading
     *   plan->ws; when `timed`, time it on the backend's own clock.
     * ready: optional, after the regions: the call's own small buffers (the
     *   last step that may refuse; the driver appends k_new/v_new only once it
     *   has returned OK, so that a refused call writes nothing).
     * finish: the end of the call, also after a failed phase (ok = 0: only
     *   release): wait when timed, fill plan->phase_ms / device_ms, the
     *   device's memory figures and the kernels' counts (exec), release what
     *   prepare took.
     */
    xattn_status (*plan)(const struct xattn_ctx *ctx, const xattn_problem *p,
                         struct xattn__plan *plan);
    xattn_status (*prepare)(struct xattn_ctx *ctx, const xattn_problem *p, struct xattn__plan *plan,
                            int timed);
    xattn_status (*ws_alloc)(struct xattn_ctx *ctx, const xattn_problem *p, uint64_t bytes,
                             const char *what, int touch, void **out);
    void (*ws_free)(struct xattn_ctx *ctx, void *ws, uint64_t bytes);
    xattn_status (*ready)(struct xattn_ctx *ctx, const xattn_problem *p, struct xattn__plan *plan);
    xattn_status (*phase)(struct xattn_ctx *ctx, const xattn_problem *p, struct xattn__plan *plan,
                          int phase, int timed);
    xattn_status (*finish)(struct xattn_ctx *ctx, const xattn_problem *p, struct xattn__plan *plan,
                           int timed, int ok, struct xattn__exec *exec);

    /* Optional (NULL = no micro-benchmarks on this backend): measure the
     * device's FMA throughput and memory bandwidth on ctx's device. */
    xattn_status (*measure_ceilings)(struct xattn_ctx *ctx, xattn_ceilings *out);

    /* Optional: the device's total and currently free memory (NULL: host
     * memory for CPU-type devices, else the global memory size for both). */
    xattn_status (*device_memory)(struct xattn_ctx *ctx, uint64_t *total, uint64_t *avail);
} xattn_backend_iface;

/* The registry: the table of a backend compiled into this build, or NULL. */
const xattn_backend_iface *xattn__backend_get(xattn_backend id);

/* Each backend module defines its table (only those compiled in exist). */
extern const xattn_backend_iface xattn__backend_cpu;
#ifdef XATTN_HAVE_OPENCL
extern const xattn_backend_iface xattn__backend_opencl;
#endif
#ifdef XATTN_HAVE_CUDA
extern const xattn_backend_iface xattn__backend_cuda;
#endif

/* OK when `backend` is compiled in and probed usable, else BACKEND_UNAVAILABLE
 * with the probe's reason as the last error. */
xattn_status xattn__backend_require(xattn_backend backend);

/* ---- descriptor validation and resolution (xattn_validate.c) ------------- */

/* Everything derived from a validated descriptor that the dispatch needs. */
/* The 8-bit float K/V dtypes. */
static inline int xattn__dtype_is_fp8(xattn_dtype t)
{
    return t == XATTN_DTYPE_FP8_E4M3 || t == XATTN_DTYPE_FP8_E5M2;
}

/* The dtypes for K/V caches only (fp8, q8_0): never q, o or bias. */
static inline int xattn__dtype_is_kv_only(xattn_dtype t)
{
    return xattn__dtype_is_fp8(t) || t == XATTN_DTYPE_Q8_0;
}

/* The byte where element e (counted from the buffer's byte 0) of dtype t
 * begins: e times the element size; for q8_0, where e is the first value of
 * a block, the block's first byte (its d). */
static inline uint64_t xattn__start_byte(xattn_dtype t, int64_t e)
{
    return t == XATTN_DTYPE_Q8_0 ? (uint64_t)xattn_sem_q8_0_d_byte(e)
                                 : (uint64_t)e * xattn_dtype_size(t);
}

/* The bytes a K/V value takes on average, scales included (q8_0: 34/32). */
static inline double xattn__value_bytes(xattn_dtype t)
{
    return t == XATTN_DTYPE_Q8_0 ? (double)XATTN_Q8_0_BLOCK_BYTES / XATTN_Q8_0_BLOCK
                                 : (double)xattn_dtype_size(t);
}

typedef struct xattn_desc_summary {
    int64_t B, Hq, Hkv, D, Dv, Sq, Sk; /* Sq/Sk: tensor extents, or the longest sequence (varlen) */
    int varlen;
    int64_t rows_total; /* query rows the call writes (0 = nothing to do) */
    xattn_dtype q_dtype, kv_dtype;
    int paged;     /* block_table set: Sk is the longest cache length */
    int64_t s_new; /* tokens appended per sequence (k_new), 0 = none */
} xattn_desc_summary;

/* Checks every rule of the descriptor against ctx; fills *sum on success. */
/*
 * Sized structs (include/xattn.h, "ABI"). The plain symbols keep the 0.1
 * layouts: the end of each struct's last 0.1 field. These never change when a
 * struct grows.
 */
#define XATTN__V1_DEVICE_INFO_SIZE (offsetof(xattn_device_info, device_type) + sizeof(int))
#define XATTN__V1_DESC_SIZE (offsetof(xattn_attn_desc, num_splits) + sizeof(int))
#define XATTN__V1_RUN_INFO_SIZE (offsetof(xattn_run_info, matrix_units) + sizeof(int))
#define XATTN__V1_RECORD_SIZE (offsetof(xattn_record, work_counted) + sizeof(int))
#define XATTN__V1_CEILINGS_SIZE (offsetof(xattn_ceilings, mma_bf16_gflops) + sizeof(double))
/* The smallest descriptor: struct_size and the four tensors it must set. */
#define XATTN__DESC_MIN_SIZE (offsetof(xattn_attn_desc, o) + sizeof(xattn_tensor))

/* Copies min(dst_size, src_size) bytes of a filled struct to the caller's,
 * zeroes the caller's bytes past the library's, and sets the caller's
 * struct_size to the bytes filled. dst_size below a size_t: INVALID_ARGUMENT. */
xattn_status xattn__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size,
                               const char *what);
/* The caller's descriptor as this library's: its bytes over the defaults
 * (a smaller, older descriptor), or refused (one too small, or a larger one
 * whose bytes past the library's fields are not zero). */
xattn_status xattn__desc_in(const xattn_attn_desc *d, xattn_attn_desc *full);

xattn_status xattn__validate(const struct xattn_ctx *ctx, const xattn_attn_desc *d,
                             xattn_desc_summary *sum);
/* Builds the kernel problem of a validated descriptor. Per-sequence arrays
 * are allocated through ctx's allocator into *arrays (4*B int32s) and freed
 * with xattn__problem_free. */
xattn_status xattn__problem_build(struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                  const xattn_desc_summary *sum, xattn_problem *p,
                                  int32_t **arrays);
void xattn__problem_free(struct xattn_ctx *ctx, const xattn_desc_summary *sum, int32_t *arrays);

/* Monotonic clock in seconds. */
double xattn__now(void);

/* ---- measurement (xattn_profiler.c, xattn_work.c, xattn_ceilings.c) ------ */

/* Profiler lifetime: init sets the timeline's origin (xattn__ctx_alloc calls
 * it), free releases the records (xattn_ctx_destroy, xattn__ctx_free_shell). */
void xattn__profiler_init(struct xattn_ctx *ctx);
void xattn__profiler_free(struct xattn_ctx *ctx);

/* Called by xattn_attention after a successful call while profiling is on
 * (inside xattn__ctx_enter): appends the record built from the descriptor,
 * the resolved problem (NULL for a no-op call: no query rows), the backend's
 * run_info, the host times (xattn__now() values: entry of the call and return
 * of the backend) and the allocator's bytes at entry. Returns the stored
 * record, or NULL when it could not be stored (counted in prof.dropped). */
xattn_record *xattn__profiler_on_call(struct xattn_ctx *ctx, const xattn_attn_desc *d,
                                      const xattn_desc_summary *sum, const xattn_problem *p,
                                      const xattn_run_info *ri, const xattn__exec *exec,
                                      double t_submit, double t_done, uint64_t mem_before);

/* Work accounting of one call (docs/measurement.md has the model). */
typedef struct xattn__work {
    double pairs_dense;    /* B*Hq*Sq*Sk (the padded rectangle) */
    double pairs_useful;   /* (i, j) pairs not masked by steps 6-7, times Hq */
    double pairs_executed; /* what the algorithm computed */
    double kv_tile_keys;   /* FLASH/SPLITKV: keys loaded, summed over query tiles and the
                            * K/V loads of each (a load serves ri->tile_heads heads) */
    double flops_dense, flops_useful, flops_executed;
    double bytes_min, bytes_actual;
    double padding_waste; /* 1 - sum(Lq*Lk) / (B*Sq*Sk) */
    int counted;          /* flops_executed came from the kernels' own counts */
} xattn__work;

/* Pairs of (query row, key) that the masks and lengths leave valid, summed
 * over sequences and query heads; O(B), closed form per sequence. */
double xattn__useful_pairs(const xattn_problem *p);
/* Pairs in the tiles a tiled kernel (FLASH, SPLITKV) computes with query tiles
 * of tile_q real rows and key tiles of tile_k keys aligned at multiples of
 * tile_k: a tile runs when one of its rows has a valid key inside it; it counts
 * its real rows times its keys below len_k. Summed over sequences and query
 * heads; O(B * Sq / tile_q). tile_q or tile_k <= 0 count as 1. */
double xattn__executed_pairs(const xattn_problem *p, int tile_q, int tile_k);
/* Everything a record carries about work, for p as run (algorithm, tiles and
 * splits from ri; the kernels' own counts from exec where they gave them). */
void xattn__work_account(const xattn_problem *p, const xattn_run_info *ri, const xattn__exec *exec,
                         xattn__work *w);

/* Device ceilings: looks the context's device up in the on-disk cache (once;
 * sets prof.ceil_state). Never fails: a missing or corrupt entry just leaves
 * the ceilings unknown. */
void xattn__ceilings_load(struct xattn_ctx *ctx);
/* 1 when XATTN_CEILINGS_QUICK=1 asks for short micro-benchmarks (tests). */
int xattn__ceilings_quick(void);

#endif /* XATTN_INTERNAL_H */
