/*
 * The algorithm driver: one attention call on any backend.
 *
 *   xattn_attention (xattn_api.c)
 *     -> xattn__drive
 *          xattn__plan_make   be->plan (can this backend run it, and how:
 *                             splits, tiles, kernel, its scratch) and the size
 *                             checks of the algorithm's regions
 *          be->prepare        programs, per-sequence arrays, timers
 *          be->ws_alloc       the regions: NAIVE's scores or SPLITKV's partials,
 *                             then the backend's scratch (or its fallback)
 *          be->ready          the backend's own call buffers
 *          append             k_new/v_new into the cache: only here, once
 *                             everything that can refuse the call has
 *                             succeeded (a refused call writes nothing)
 *          be->phase          each phase of the algorithm, in order
 *          be->finish         wait, times, the kernels' counts
 *          be->ws_free        the regions
 *        and fills the run info (phases, times, workspace, tiles, kernel).
 *        Before all of it, the call's own copy of the host arrays the append
 *        and the kernels read (a paged cache's block table, the ALiBi slopes):
 *        the caller's may lie in memory the call writes.
 *   xattn_attention_check -> xattn__plan_make (the same checks, no work)
 *
 * The driver owns the algorithm's structure (its phases and their names, the
 * regions and their sizes, NAIVE's size-overflow check and its hint, the run
 * info); a backend provides device operations only (xattn_internal.h).
 */
#include <stdio.h>
#include <string.h>

#include "xattn_internal.h"

/* The phases of each algorithm, in order, with the run info's names. */
typedef struct xattn__algo_phases {
    int n;
    xattn__phase ph[3];
    const char *names[3];
} xattn__algo_phases;

static const xattn__algo_phases *xattn__phases_of(xattn_algo algo)
{
    static const xattn__algo_phases naive = {
        3, {XATTN__PH_QK, XATTN__PH_SOFTMAX, XATTN__PH_PV}, {"qk", "softmax", "pv"}};
    static const xattn__algo_phases flash = {1, {XATTN__PH_FLASH}, {"flash"}};
    static const xattn__algo_phases splitkv = {
        2, {XATTN__PH_PARTIAL, XATTN__PH_COMBINE}, {"partial", "combine"}};
    switch (algo) {
    case XATTN_ALGO_NAIVE: return &naive;
    case XATTN_ALGO_FLASH: return &flash;
    case XATTN_ALGO_SPLITKV: return &splitkv;
    default: return NULL;
    }
}

/* a * b * c * d with an overflow flag. */
static int xattn__mul4(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t *out)
{
    uint64_t r;
    return xattn__mul_overflow(a, b, &r) || xattn__mul_overflow(r, c, &r) ||
           xattn__mul_overflow(r, d, out);
}

/* Sizes of the algorithm's own regions (bytes), with their overflow checks. */
static xattn_status xattn__regions(const xattn_problem *p, xattn__plan *plan)
{
    const uint64_t BH = (uint64_t)p->B * (uint64_t)p->Hq;
    if (p->algo == XATTN_ALGO_NAIVE) {
        uint64_t bytes;
        if (xattn__mul4(BH, (uint64_t)p->Sq, (uint64_t)p->Sk, 4u, &bytes))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "NAIVE: the score matrix B*Hq*Sq*Sk*4 bytes overflows 64 bits; "
                                "use XATTN_ALGO_FLASH");
        plan->ws_bytes[XATTN__WS_SCORES] = bytes;
    } else if (p->algo == XATTN_ALGO_SPLITKV) {
        uint64_t rows, obytes;
        if (xattn__mul4((uint64_t)(plan->splits > 0 ? plan->splits : 1), BH, (uint64_t)p->Sq, 1u,
                        &rows) ||
            xattn__mul4(rows, (uint64_t)p->Dv, 4u, 1u, &obytes) || rows > UINT64_MAX / 4u)
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "SPLITKV: the partials splits*B*Hq*Sq*(Dv+1)*4 bytes overflow 64 "
                                "bits (%d splits)",
                                plan->splits);
        plan->ws_bytes[XATTN__WS_PART_O] = obytes;
        plan->ws_bytes[XATTN__WS_PART_LSE] = rows * 4u;
    }
    return XATTN_STATUS_OK;
}

/* A paged cache's table entries per sequence in the call's own copy (see
 * xattn__own_arrays): the longest sequence's page count, at least 1. */
static int64_t xattn__table_width(const xattn_problem *p)
{
    int64_t width = 1;
    for (int64_t b = 0; b < p->B; b++) {
        const int64_t n = ((int64_t)p->len_k[b] + p->page_size - 1) / p->page_size;
        width = n > width ? n : width;
    }
    return width;
}

xattn_status xattn__plan_make(const struct xattn_ctx *ctx, const xattn_problem *p,
                              xattn__plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->splits = 1;
    if (!xattn__phases_of(p->algo))
        return xattn__error(XATTN_STATUS_INTERNAL, "algo: %d reached the driver", (int)p->algo);
    /* The backend plans the table the run uses (a check plans the caller's):
     * its rows are the longest sequence's pages. */
    xattn_problem run = *p;
    if (run.paged)
        run.max_pages = xattn__table_width(p);
    XATTN_RETURN_IF_ERROR(ctx->be->plan(ctx, &run, plan));
    if (p->algo != XATTN_ALGO_SPLITKV)
        plan->splits = 0;
    else if (plan->splits < 1)
        return xattn__error(XATTN_STATUS_INTERNAL, "%s: planned %d splits", ctx->be->name,
                            plan->splits);
    return xattn__regions(p, plan);
}

static void xattn__free_regions(struct xattn_ctx *ctx, xattn__plan *plan)
{
    for (int r = 0; r < XATTN__WS_COUNT; r++) {
        if (plan->ws[r])
            ctx->be->ws_free(ctx, plan->ws[r], plan->ws_bytes[r]);
        plan->ws[r] = NULL;
    }
}

/* The regions through the backend's allocator. NAIVE's score matrix that does
 * not fit gets the hint; a scratch that does not fit falls back to the
 * smaller one the backend named, if any (an optimization refused is not the
 * call's error). */
static xattn_status xattn__alloc_regions(struct xattn_ctx *ctx, const xattn_problem *p,
                                         xattn__plan *plan)
{
    static const char *const what_naive[] = {"NAIVE score matrix"};
    static const char *const what_skv[] = {"SPLITKV partial O", "SPLITKV partial LSE"};
    const char *const *what = p->algo == XATTN_ALGO_NAIVE ? what_naive : what_skv;
    for (int r = 0; r < XATTN__WS_SCRATCH; r++) {
        if (!plan->ws_bytes[r])
            continue;
        xattn_status st =
            ctx->be->ws_alloc(ctx, p, plan->ws_bytes[r], what[r], plan->touch, &plan->ws[r]);
        if (st == XATTN_STATUS_OUT_OF_MEMORY && p->algo == XATTN_ALGO_NAIVE)
            return xattn__error(st,
                                "%s; NAIVE materializes B*Hq*Sq*Sk f32 scores: use "
                                "XATTN_ALGO_FLASH, whose memory does not grow with Sq*Sk",
                                xattn_last_error());
        XATTN_RETURN_IF_ERROR(st);
    }
    if (!plan->scratch_bytes)
        return XATTN_STATUS_OK;
    static const char *const what_scratch[] = {"NAIVE scratch", "FLASH scratch", "SPLITKV scratch"};
    const char *sname = what_scratch[p->algo == XATTN_ALGO_NAIVE   ? 0
                                     : p->algo == XATTN_ALGO_FLASH ? 1
                                                                   : 2];
    plan->ws_bytes[XATTN__WS_SCRATCH] = plan->scratch_bytes;
    xattn_status st = ctx->be->ws_alloc(ctx, p, plan->scratch_bytes, sname, plan->touch_scratch,
                                        &plan->ws[XATTN__WS_SCRATCH]);
    if (st != XATTN_STATUS_OK && plan->scratch_fallback &&
        plan->scratch_fallback < plan->scratch_bytes) {
        xattn__clear_error();
        plan->ws_bytes[XATTN__WS_SCRATCH] = plan->scratch_fallback;
        plan->scratch_is_fallback = 1;
        st = ctx->be->ws_alloc(ctx, p, plan->scratch_fallback, sname, plan->touch_scratch,
                               &plan->ws[XATTN__WS_SCRATCH]);
    }
    if (st != XATTN_STATUS_OK)
        plan->ws_bytes[XATTN__WS_SCRATCH] = 0;
    return st;
}

/* One view's copy of the append: runs of contiguous bytes, merged while both
 * sides continue, through the backend's device-side copy. */
static xattn_status xattn__append_view(struct xattn_ctx *ctx, const xattn_problem *p,
                                       const xattn_view *cache, const xattn_view *src, int64_t dim,
                                       uint64_t *bytes)
{
    /* (q8_0 has sd 1 on both sides: its pieces are whole rows of blocks) */
    const xattn_dtype dt = cache->dtype;
    const int64_t run = cache->sd == 1 && src->sd == 1 ? dim : 1; /* elements per piece */
    const uint64_t rb = xattn_dtype_bytes(dt, (uint64_t)run);     /* bytes per piece */
    uint64_t d0 = 0, s0 = 0, n = 0;                               /* the pending run, bytes */
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t t = 0; t < p->s_new; t++) {
            const int64_t j = (int64_t)p->len_k[b] - p->s_new + t;
            const int64_t dtok = xattn_problem_kv_token(p, cache, b, j);
            const int64_t stok = src->off + b * src->sb + t * src->ss;
            for (int64_t h = 0; h < p->Hkv; h++)
                for (int64_t e = 0; e < dim; e += run) {
                    const uint64_t db = xattn__start_byte(dt, dtok + h * cache->sh + e * cache->sd);
                    const uint64_t sb = xattn__start_byte(dt, stok + h * src->sh + e * src->sd);
                    if (n && db == d0 + n && sb == s0 + n) {
                        n += rb;
                        continue;
                    }
                    if (n)
                        XATTN_RETURN_IF_ERROR(
                            ctx->be->buffer_copy(ctx, cache->buf, d0, src->buf, s0, n));
                    d0 = db;
                    s0 = sb;
                    n = rb;
                }
        }
    if (n)
        XATTN_RETURN_IF_ERROR(ctx->be->buffer_copy(ctx, cache->buf, d0, src->buf, s0, n));
    *bytes += (uint64_t)p->B * (uint64_t)p->s_new * (uint64_t)p->Hkv *
              xattn_dtype_bytes(dt, (uint64_t)dim);
    return XATTN_STATUS_OK;
}

/* The append step (xattn_attn_desc.k_new): the new tokens into the cache,
 * on the context's queue before the phases, once the plan, the program, the
 * regions and the backend's call buffers have all succeeded (a refused call
 * writes nothing). */
static xattn_status xattn__append(struct xattn_ctx *ctx, const xattn_problem *p, int timed,
                                  xattn_run_info *info)
{
    if (!p->s_new)
        return XATTN_STATUS_OK;
    if (!ctx->be->buffer_copy)
        return xattn__error(XATTN_STATUS_UNSUPPORTED, "%s: k_new: this backend cannot append",
                            ctx->be->name);
    const double t0 = xattn__now();
    uint64_t bytes = 0;
    XATTN_RETURN_IF_ERROR(xattn__append_view(ctx, p, &p->k, &p->k_new, p->D, &bytes));
    XATTN_RETURN_IF_ERROR(xattn__append_view(ctx, p, &p->v, &p->v_new, p->Dv, &bytes));
    if (timed) {
        XATTN_RETURN_IF_ERROR(ctx->be->sync(ctx));
        info->append_ms = (xattn__now() - t0) * 1000.0;
    }
    info->append_bytes = bytes;
    return XATTN_STATUS_OK;
}

/*
 * The call's own copy of the host arrays that the append and the kernels read
 * after validation: a paged cache's table (only the entries the sequences use,
 * rows of the longest sequence's page count) and the ALiBi slopes, through the
 * tracking allocator. The caller's arrays may lie in memory the call writes (a
 * K/V cache wrapped from host memory that an append writes, or o): what was
 * validated is what is used.
 */
static xattn_status xattn__own_arrays(struct xattn_ctx *ctx, xattn_problem *p, void **mem,
                                      uint64_t *bytes)
{
    const int64_t w = p->paged ? xattn__table_width(p) : 0; /* table entries per sequence */
    const uint64_t n_table = (uint64_t)p->B * (uint64_t)w;
    const uint64_t n_alibi = p->alibi ? (uint64_t)p->Hq : 0;
    *mem = NULL;
    *bytes = (n_table + n_alibi) * 4u;
    if (!*bytes)
        return XATTN_STATUS_OK;
    xattn_status st;
    unsigned char *m = xattn__host_alloc(ctx, *bytes, "the call's block table and slopes", &st);
    if (!m)
        return st;
    if (p->paged) {
        int32_t *t = (int32_t *)(void *)m;
        for (int64_t b = 0; b < p->B; b++) {
            const int64_t n = ((int64_t)p->len_k[b] + p->page_size - 1) / p->page_size;
            for (int64_t g = 0; g < w; g++) /* past a sequence's pages: never read */
                t[b * w + g] = g < n ? p->block_table[b * p->max_pages + g] : 0;
        }
        p->block_table = t;
        p->max_pages = w;
    }
    if (p->alibi) {
        float *a = (float *)(void *)(m + n_table * 4u);
        memcpy(a, p->alibi, (size_t)n_alibi * sizeof *a);
        p->alibi = a;
    }
    *mem = m;
    return XATTN_STATUS_OK;
}

static xattn_status xattn__run(struct xattn_ctx *ctx, const xattn_problem *p, xattn_run_info *info,
                               int timed, struct xattn__exec *exec);

xattn_status xattn__drive(struct xattn_ctx *ctx, const xattn_problem *caller_p,
                          xattn_run_info *info, int timed, struct xattn__exec *exec)
{
    xattn_problem p = *caller_p;
    void *mem;
    uint64_t bytes;
    XATTN_RETURN_IF_ERROR(xattn__own_arrays(ctx, &p, &mem, &bytes));
    xattn_status st = xattn__run(ctx, &p, info, timed, exec);
    if (mem)
        xattn__host_free(ctx, mem, bytes);
    return st;
}

static xattn_status xattn__run(struct xattn_ctx *ctx, const xattn_problem *p, xattn_run_info *info,
                               int timed, struct xattn__exec *exec)
{
    xattn__plan plan;
    XATTN_RETURN_IF_ERROR(xattn__plan_make(ctx, p, &plan));
    int64_t rows = 0; /* an append with no query row attends to nothing */
    for (int64_t b = 0; b < p->B && !rows; b++)
        rows = xattn_problem_rows_q(p, b);
    if (!rows)
        return xattn__append(ctx, p, timed, info);
    const xattn__algo_phases *ph = xattn__phases_of(p->algo);
    const xattn_backend_iface *be = ctx->be;

    xattn_status st = be->prepare ? be->prepare(ctx, p, &plan, timed) : XATTN_STATUS_OK;
    const int prepared = st == XATTN_STATUS_OK;
    /* prepare may have changed the tile or the number of splits (a program
     * that allows fewer work-items than planned): the regions follow it. */
    if (st == XATTN_STATUS_OK)
        st = xattn__regions(p, &plan);
    if (st == XATTN_STATUS_OK)
        st = xattn__alloc_regions(ctx, p, &plan);
    if (st == XATTN_STATUS_OK && be->ready)
        st = be->ready(ctx, p, &plan);
    /* Nothing is written before this point. */
    if (st == XATTN_STATUS_OK)
        st = xattn__append(ctx, p, timed, info);
    for (int k = 0; k < ph->n && st == XATTN_STATUS_OK; k++)
        st = be->phase(ctx, p, &plan, ph->ph[k], timed);
    if (prepared) {
        /* Always called once prepared: it releases what prepare took. */
        xattn_status fst = be->finish(ctx, p, &plan, timed, st == XATTN_STATUS_OK, exec);
        if (st == XATTN_STATUS_OK)
            st = fst;
    }
    uint64_t ws_total = plan.held_bytes;
    for (int r = 0; r < XATTN__WS_COUNT; r++)
        ws_total += plan.ws_bytes[r];
    xattn__free_regions(ctx, &plan);

    info->build_ms = plan.build_ms;
    if (st != XATTN_STATUS_OK)
        return st;
    info->num_splits = p->algo == XATTN_ALGO_SPLITKV ? plan.splits : 0;
    info->workspace_bytes = ws_total;
    info->num_phases = ph->n;
    for (int k = 0; k < ph->n; k++) {
        snprintf(info->phase_names[k], sizeof info->phase_names[k], "%s", ph->names[k]);
        info->phase_ms[k] = timed ? plan.phase_ms[k] : 0.0;
    }
    info->device_ms = timed ? plan.device_ms : 0.0;
    info->tile_q = plan.tile_q;
    info->tile_k = plan.tile_k;
    info->tile_heads = plan.tile_heads;
    snprintf(info->kernel, sizeof info->kernel, "%s", plan.kernel);
    /* A stored winner of `xattn tune` ran ("cl-cpu-tuned-rows", "mma-tuned"):
     * the reason says so beside the algorithm's. */
    if (strstr(plan.kernel, "tuned")) {
        const size_t n = strlen(info->reason);
        snprintf(info->reason + n, sizeof info->reason - n, "%stiles: tuned (xattn tune)",
                 n ? "; " : "");
    }
    info->matrix_units = plan.matrix_units;
    info->device_mem_total = plan.device_mem_total;
    info->device_mem_free = plan.device_mem_free;
    return XATTN_STATUS_OK;
}
