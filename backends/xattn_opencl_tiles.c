/*
 * The OpenCL backend's tiles: the tile table (CLBlast-style: data, a row per
 * device class, an XATTN_CL_TILE override), fitting a tile to a device and a
 * problem's head dims, and the work-groups, splits and count segments a tile
 * implies.
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

/* ---- tile table (CLBlast-style: data, a default row, an env override) ----- */

static const xattn_cl_tile_row xattn__cl_tile_table[] = {
    /* CPUs (PoCL): building a program costs seconds and running it little,
     * so one program serves every dtype and head-dim bucket. */
    /* The CPU row runs the row form (rows=16, bk=32: measured best of those tried on PoCL,
     * docs/backends.md "OpenCL on CPU devices"). */
    /* class     type                  bq  bk  nt  rwg  cwg local dtypes dims rows tuned */
    {"cpu", CL_DEVICE_TYPE_CPU, {16, 32, 16, 64, 16, 0, 0, 0, 16, 0}},
    {"gpu", CL_DEVICE_TYPE_GPU, {64, 32, 16, 128, 64, 1, 1, 1, 0, 0}},
    {"default", 0, {32, 16, 16, 64, 32, 1, 1, 1, 0, 0}},
};

/* "bq=16,bk=32": overrides fields of *t; INVALID_ARGUMENT on a bad entry. */
xattn_status xattn__cl_tile_parse(const char *text, xattn_cl_tile *t)
{
    const char *s = text;
    while (*s) {
        char key[16];
        size_t kl = strcspn(s, "=,");
        if (s[kl] != '=' || kl == 0 || kl >= sizeof key)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': expected key=value pairs separated by "
                                "commas (keys bq, bk, nt, rwg, cwg, naive_local, fixed_dtypes, "
                                "fixed_dims, rows)",
                                text);
        memcpy(key, s, kl);
        key[kl] = '\0';
        char *end;
        errno = 0;
        long val = strtol(s + kl + 1, &end, 10);
        int is_flag = !strcmp(key, "naive_local") || !strcmp(key, "fixed_dtypes") ||
                      !strcmp(key, "fixed_dims");
        const int is_rows = !strcmp(key, "rows");
        const long vmin = is_flag || is_rows ? 0 : 1, vmax = is_flag ? 1 : is_rows ? 16 : 4096;
        if (end == s + kl + 1 || (*end && *end != ',') || errno || val < vmin || val > vmax)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': value of '%s' must be an integer in %ld..%ld",
                                text, key, vmin, vmax);
        int *field = !strcmp(key, "bq")             ? &t->bq
                     : !strcmp(key, "bk")           ? &t->bk
                     : !strcmp(key, "nt")           ? &t->nt
                     : !strcmp(key, "rwg")          ? &t->rwg
                     : !strcmp(key, "cwg")          ? &t->cwg
                     : !strcmp(key, "naive_local")  ? &t->naive_local
                     : !strcmp(key, "fixed_dtypes") ? &t->fixed_dtypes
                     : !strcmp(key, "fixed_dims")   ? &t->fixed_dims
                     : is_rows                      ? &t->rows
                                                    : NULL;
        if (!field)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': unknown key '%s' (keys: bq, bk, nt, rwg, "
                                "cwg, naive_local, fixed_dtypes, fixed_dims, rows)",
                                text, key);
        if (field == &t->rwg && (val & (val - 1)))
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': rwg=%ld must be a power of two", text, val);
        *field = (int)val;
        s = *end ? end + 1 : end;
    }
    return XATTN_STATUS_OK;
}

/* Head dims that are build-time constants; any other size takes the generic
 * path with arrays rounded up to a power of two (at least 32). */
void xattn__cl_head_dim(int64_t d, int fixed, int *dmax, int *dfix)
{
    static const int fast[] = {32, 64, 80, 96, 128, 256};
    for (size_t i = 0; fixed && i < sizeof fast / sizeof fast[0]; i++) {
        if (d == fast[i]) {
            *dmax = *dfix = fast[i];
            return;
        }
    }
    *dfix = 0;
    *dmax = xattn__pow2_ceil((int)(d < 32 ? 32 : d));
}
void xattn__cl_options(char *out, size_t n, int qdt, int kdt, int dmax, int dfix, int dvmax,
                       int dvfix, const xattn_cl_tile *t)
{
    snprintf(out, n,
             "-cl-std=CL1.2 -DXATTN_QDT=%d -DXATTN_KDT=%d -DXATTN_DMAX=%d -DXATTN_DFIX=%d "
             "-DXATTN_DVMAX=%d -DXATTN_DVFIX=%d -DXATTN_BQ=%d -DXATTN_BK=%d -DXATTN_NT=%d "
             "-DXATTN_RWG=%d -DXATTN_CWG=%d -DXATTN_NAIVE_LOCAL=%d -DXATTN_ROWS=%d",
             qdt, kdt, dmax, dfix, dvmax, dvfix, t->bq, t->bk, t->nt, t->rwg, t->cwg,
             t->naive_local, t->rows);
}
/* Private arrays of FLASH and the SPLITKV partial, per work-item. The
 * work-group form (xattn_attend): the query row (dmax floats), the
 * accumulator (dvmax) and one tile's scores (bk). The row form
 * (xattn_rows_attend): rows query rows and accumulators, the K and V tile
 * (bk rows), in float8 columns, and two arrays of bk + 8 floats. */
static uint64_t xattn__cl_private_bytes(int rows, int bk, int dmax, int dvmax)
{
    if (rows == 0)
        return ((uint64_t)dmax + (uint64_t)dvmax + (uint64_t)bk) * 4u;
    const uint64_t cols = (uint64_t)(dmax + 7) / 8 * 8 + (uint64_t)(dvmax + 7) / 8 * 8;
    return ((uint64_t)(rows + bk) * cols + 2u * ((uint64_t)bk + 8u)) * 4u;
}
/* A CPU device runs a work-group on one thread, and that thread's stack holds
 * the private arrays of all its work-items (PoCL's work-item loops keep them
 * side by side): 4096 x (32 + 32 + 512) floats, 9 MiB, overflowed PoCL's 8 MiB
 * thread stack. A work-group may use at most an eighth of that. */
#define XATTN_CL_CPU_WG_PRIVATE_MAX (1u << 20)
/* Fits a tile to the device: work-group sizes within CL_DEVICE_MAX_WORK_GROUP_SIZE,
 * FLASH's K/V tiles within CL_DEVICE_LOCAL_MEM_SIZE, and on CPU devices a
 * work-group's private arrays within XATTN_CL_CPU_WG_PRIVATE_MAX (bq shrinks;
 * with `refuse_env` set, an XATTN_CL_TILE bq that would have to shrink for
 * that is refused instead). */
xattn_status xattn__cl_tile_fit(const xattn_cl_ctx *c, xattn_cl_tile *t, int dmax, int dvmax,
                                const char *refuse_env)
{
    size_t wg = c->max_wg ? c->max_wg : 1;
    while ((size_t)t->bq > wg && t->bq > 1)
        t->bq /= 2;
    while ((size_t)t->nt * (size_t)t->nt > wg && t->nt > 1)
        t->nt /= 2;
    while ((size_t)t->rwg > wg && t->rwg > 1)
        t->rwg /= 2;
    int cmax = xattn__pow2_ceil(dvmax);
    if (t->cwg > cmax)
        t->cwg = cmax;
    while ((size_t)t->cwg > wg && t->cwg > 1)
        t->cwg /= 2;
    /* Leave 1 KiB of local memory for the implementation's own use. FLASH
     * and the SPLITKV partial hold a K and a V tile and 2 x bq counts; NAIVE's
     * qk and pv two nt x (nt + 1) tiles; the softmax and xattn_count_sum rwg
     * values (floats, ulongs). */
    cl_ulong budget = c->local_mem > 1024 ? c->local_mem - 1024 : 0;
#define XATTN_CL_FLASH_LOCAL(t)                                                                    \
    ((cl_ulong)(t)->bk * (cl_ulong)(dmax + dvmax) * 4u + 16u * (cl_ulong)(t)->bq)
    /* (The row form holds no local memory.) */
    while (t->rows == 0 && t->bk > 1 && XATTN_CL_FLASH_LOCAL(t) > budget)
        t->bk /= 2;
    if ((t->rows == 0 && XATTN_CL_FLASH_LOCAL(t) > budget) ||
        2u * (cl_ulong)t->nt * (cl_ulong)(t->nt + 1) * 4u > budget ||
        (cl_ulong)t->rwg * 8u > budget)
        return xattn__error(XATTN_STATUS_UNSUPPORTED,
                            "OpenCL: the device's %llu bytes of local memory cannot hold the "
                            "kernels' arrays (one key of K and V: D array %d + Dv array %d "
                            "floats; NAIVE nt=%d: 2 x nt x (nt + 1) floats; rwg=%d floats)",
                            (unsigned long long)c->local_mem, dmax, dvmax, t->nt, t->rwg);
    if (t->rows > 0) {
        /* The row form: a work-group is one work-item, whose private arrays
         * grow with rows and bk. Every device type: a GPU may run it too. */
        uint64_t wi = xattn__cl_private_bytes(t->rows, t->bk, dmax, dvmax);
        if (refuse_env && wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "XATTN_CL_TILE='%s': rows=%d with bk=%d needs %llu bytes of "
                                "private arrays a work-item (D %d, Dv %d at the smallest head "
                                "dims), more than %u: lower rows or bk",
                                refuse_env, t->rows, t->bk, (unsigned long long)wi, dmax, dvmax,
                                XATTN_CL_CPU_WG_PRIVATE_MAX);
        while (t->bk > 1 && wi > XATTN_CL_CPU_WG_PRIVATE_MAX) {
            t->bk /= 2;
            wi = xattn__cl_private_bytes(t->rows, t->bk, dmax, dvmax);
        }
    } else if (c->type & CL_DEVICE_TYPE_CPU) {
        const uint64_t wi = xattn__cl_private_bytes(0, t->bk, dmax, dvmax);
        if (refuse_env && (uint64_t)t->bq * wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            return xattn__error(
                XATTN_STATUS_INVALID_ARGUMENT,
                "XATTN_CL_TILE='%s': bq=%d work-items x %llu bytes of private arrays each (D %d "
                "+ Dv %d + bk %d floats, at the smallest head dims) need %llu bytes a "
                "work-group; a CPU device runs a work-group on one thread's stack, which allows "
                "%u: lower bq or bk",
                refuse_env, t->bq, (unsigned long long)wi, dmax, dvmax, t->bk,
                (unsigned long long)((uint64_t)t->bq * wi), XATTN_CL_CPU_WG_PRIVATE_MAX);
        while (t->bq > 1 && (uint64_t)t->bq * wi > XATTN_CL_CPU_WG_PRIVATE_MAX)
            t->bq /= 2;
    }
    return XATTN_STATUS_OK;
#undef XATTN_CL_FLASH_LOCAL
}
/* The row form's work-items of FLASH (one split) or one SPLITKV split: row
 * blocks of t->rows of the Sq x group rows of each (b, KV head). */
static uint64_t xattn__cl_row_items(const xattn_problem *p, const xattn_cl_tile *t)
{
    const int64_t group = p->Hkv > 0 ? p->Hq / p->Hkv : 1;
    return (uint64_t)xattn__ceil_div(p->Sq * group, t->rows) * (uint64_t)(p->B * p->Hkv);
}
/* The work-groups of FLASH or one SPLITKV split. */
uint64_t xattn__cl_flash_groups(const xattn_problem *p, const xattn_cl_tile *t)
{
    if (t->rows > 0)
        return xattn__cl_row_items(p, t);
    return (uint64_t)xattn__ceil_div(p->Sq, t->bq) * (uint64_t)(p->B * p->Hq);
}
/* SPLITKV chunks: the caller's count (at most one key per chunk), or enough
 * work-groups to give every compute unit a few, each chunk at least a tile. */
int xattn__cl_num_splits(const xattn_cl_ctx *c, const xattn_problem *p, const xattn_cl_tile *t)
{
    const int bk = t->bk;
    int64_t maxs = p->Sk > 0 ? p->Sk : 1;
    if (p->num_splits > 0)
        return (int)(p->num_splits < maxs ? p->num_splits : maxs);
    int64_t tiles = xattn__ceil_div(p->Sk > 0 ? p->Sk : 1, bk);
    int64_t wgs = (int64_t)xattn__cl_flash_groups(p, t);
    int64_t target = (int64_t)c->compute_units * ((c->type & CL_DEVICE_TYPE_GPU) ? 4 : 2);
    int64_t s = xattn__ceil_div(target, wgs > 0 ? wgs : 1);
    if (s < 2)
        s = 2; /* SPLITKV asked for: split, unless the keys are one tile */
    if (s > 64)
        s = 64;
    if (s > tiles)
        s = tiles;
    return (int)(s < 1 ? 1 : s);
}
/* The tile a program of p would use (the configured tile, fitted to p's head
 * dims and the device), without building anything. */
xattn_status xattn__cl_tile_of(const xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_tile *t)
{
    int dmax, dfix, dvmax, dvfix;
    xattn__cl_tile_base(c, p, t);
    xattn__cl_head_dim(p->D, t->fixed_dims, &dmax, &dfix);
    xattn__cl_head_dim(p->Dv, t->fixed_dims, &dvmax, &dvfix);
    return xattn__cl_tile_fit(c, t, dmax, dvmax, NULL);
}
/* The executed-work count segments of p's kernels (xattn_cl_common.cl,
 * "executed-work counts"): work-groups of the product kernels. */
void xattn__cl_count_segments(const xattn_problem *p, const xattn_cl_tile *t, int splits,
                              uint64_t n[3])
{
    const uint64_t BH = (uint64_t)(p->B * p->Hq);
    n[0] = n[1] = n[2] = 0;
    if (p->algo == XATTN_ALGO_NAIVE) {
        /* One a qk work-group, one a pv row of work-items. */
        const uint64_t ni = (uint64_t)xattn__ceil_div(p->Sq, t->nt);
        n[0] = (uint64_t)xattn__ceil_div(p->Sk, t->nt) * ni * BH;
        n[1] = ni * (uint64_t)t->nt * BH;
    } else {
        const uint64_t g =
            xattn__cl_flash_groups(p, t) * (uint64_t)(p->algo == XATTN_ALGO_SPLITKV ? splits : 1);
        n[0] = n[1] = n[2] = g;
    }
}

/* The table's first row that matches a device type (the last row, the
 * default, matches every device). */
const xattn_cl_tile_row *xattn__cl_tile_row_of(cl_device_type type)
{
    const size_t nrows = sizeof xattn__cl_tile_table / sizeof xattn__cl_tile_table[0];
    for (size_t i = 0; i < nrows; i++)
        if (xattn__cl_tile_table[i].type == 0 || (xattn__cl_tile_table[i].type & type))
            return &xattn__cl_tile_table[i];
    return &xattn__cl_tile_table[nrows - 1];
}

/* ---- stored winners of `xattn tune` ---------------------------------------
 * One file a winner, <cache root>/opencl/tune-<hash>.txt, named by the FNV-1a
 * hash of its key: the context's cache identity (device, vendor, driver,
 * device and platform versions) and the case (algorithm, q dtype, D, Dv).
 * The file is that key, then "tile=" and the tile in XATTN_CL_TILE's form:
 *   xattn-opencl-tune 1
 *   xattn-opencl-cache 1 / device=... / ... (the cache identity's lines)
 *   algo=flash / dtype=f32 / head_dim=64 / head_dim_v=64
 *   tile=bq=16,bk=32,...
 * A file whose key differs (another driver, a copied file) is stale, one that
 * does not parse is corrupt, a tile the fit checks refuse is bad: each is
 * ignored with a warning, and the table's row runs. */

#define XATTN__TUNE_MAGIC "xattn-opencl-tune 1\n"
#define XATTN__TUNE_FILE_MAX ((size_t)8 << 10)

void xattn__cl_tile_format(const xattn_cl_tile *t, char *out, size_t n)
{
    snprintf(out, n,
             "bq=%d,bk=%d,nt=%d,rwg=%d,cwg=%d,naive_local=%d,fixed_dtypes=%d,fixed_dims=%d,rows=%d",
             t->bq, t->bk, t->nt, t->rwg, t->cwg, t->naive_local, t->fixed_dtypes, t->fixed_dims,
             t->rows);
}

static const char *xattn__cl_tune_algo(int algo)
{
    return algo == XATTN_ALGO_NAIVE     ? "naive"
           : algo == XATTN_ALGO_FLASH   ? "flash"
           : algo == XATTN_ALGO_SPLITKV ? "splitkv"
                                        : NULL;
}

/* The key (the file's text before "tile=") and the file name of an entry. */
static void xattn__cl_tune_key(const xattn_cl_ctx *c, int algo, int dtype, int64_t d, int64_t dv,
                               char *key, size_t keyn, char *name, size_t namen)
{
    snprintf(key, keyn, "%s%s\nalgo=%s\ndtype=%s\nhead_dim=%lld\nhead_dim_v=%lld\n",
             XATTN__TUNE_MAGIC, c->cache_ident, xattn__cl_tune_algo(algo),
             xattn_dtype_name((xattn_dtype)dtype), (long long)d, (long long)dv);
    const uint64_t h = xattn__fnv1a64(XATTN__FNV_INIT, key, strlen(key));
    snprintf(name, namen, "tune-%016llx.txt", (unsigned long long)h);
}

/* Parses a tile text over the table's row and checks that it fits the device
 * at head dims d, dv as it stands (the fit checks that refuse XATTN_CL_TILE). */
xattn_status xattn__cl_tile_check(const xattn_cl_ctx *c, const char *text, int64_t d, int64_t dv,
                                  xattn_cl_tile *out)
{
    xattn_cl_tile t = xattn__cl_tile_row_of(c->type)->tile;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_parse(text, &t));
    int dmax, dfix, dvmax, dvfix;
    xattn__cl_head_dim(d, t.fixed_dims, &dmax, &dfix);
    xattn__cl_head_dim(dv, t.fixed_dims, &dvmax, &dvfix);
    xattn_cl_tile fitted = t;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_fit(c, &fitted, dmax, dvmax, text));
    *out = t;
    return XATTN_STATUS_OK;
}

/* Reads the entry of a case: 1 with *t, 0 when there is none or it is
 * ignored (with a warning through the log callback saying why). The caller's
 * last error is kept. */
static int xattn__cl_tune_read(const xattn_cl_ctx *c, int algo, int dtype, int64_t d, int64_t dv,
                               xattn_cl_tile *t)
{
    if (!c->cache_root[0] || !xattn__cl_tune_algo(algo))
        return 0;
    char key[1400], name[64], why[512] = "", stale[160], tile_text[256];
    xattn__cl_tune_key(c, algo, dtype, d, dv, key, sizeof key, name, sizeof name);
    snprintf(stale, sizeof stale, "algo %s, dtype %s, D %lld, Dv %lld", xattn__cl_tune_algo(algo),
             xattn_dtype_name((xattn_dtype)dtype), (long long)d, (long long)dv);
    int rc = xattn__tune_entry_read(c->cache_root, "opencl", name, c->owner, XATTN__TUNE_FILE_MAX,
                                    XATTN__TUNE_MAGIC, key, "tile=", stale, tile_text,
                                    sizeof tile_text, why, sizeof why);
    if (rc == XATTN__FILE_ABSENT)
        return 0;
    int found = 0;
    if (rc == XATTN__FILE_OK) {
        char saved[512];
        snprintf(saved, sizeof saved, "%s", xattn_last_error());
        if (xattn__cl_tile_check(c, tile_text, d, dv, t) == XATTN_STATUS_OK) {
            t->tuned = 1;
            found = 1;
            xattn__log(XATTN_LOG_INFO,
                       "opencl: tuned tile for %s %s D %lld Dv %lld: %s (%s/opencl/%s)",
                       xattn__cl_tune_algo(algo), xattn_dtype_name((xattn_dtype)dtype),
                       (long long)d, (long long)dv, tile_text, c->cache_root, name);
        } else {
            snprintf(why, sizeof why, "bad tile: %s", xattn_last_error());
        }
        xattn__set_error_text(saved);
    }
    if (!found)
        xattn__log(XATTN_LOG_WARN, "opencl: tuned tile %s/opencl/%s ignored: %s", c->cache_root,
                   name, why);
    return found;
}

static xattn_cl_tuned *xattn__cl_tune_memo_find(const xattn_cl_ctx *c, int algo, int dtype,
                                                int64_t d, int64_t dv)
{
    for (xattn_cl_tuned *e = c->tune ? c->tune->head : NULL; e; e = e->next)
        if (e->algo == algo && e->dtype == dtype && e->d == d && e->dv == dv)
            return e;
    return NULL;
}

/* The tile a problem starts from before fitting: XATTN_CL_TILE's or the
 * table's row (c->tile), or the stored winner of p's case when there is one
 * and XATTN_CL_TILE is not set. */
void xattn__cl_tile_base(const xattn_cl_ctx *c, const xattn_problem *p, xattn_cl_tile *t)
{
    *t = c->tile;
    if (c->tile_env || !c->tune)
        return;
    const int algo = (int)p->algo, dtype = (int)p->q.dtype;
    xattn_cl_tuned *e = xattn__cl_tune_memo_find(c, algo, dtype, p->D, p->Dv);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) /* out of host memory: the table's row, read again next time */
            return;
        e->algo = algo;
        e->dtype = dtype;
        e->d = p->D;
        e->dv = p->Dv;
        e->found = xattn__cl_tune_read(c, algo, dtype, p->D, p->Dv, &e->tile);
        e->next = c->tune->head;
        c->tune->head = e;
    }
    if (e->found)
        *t = e->tile;
}

void xattn__cl_tune_free(xattn_cl_ctx *c)
{
    if (!c->tune)
        return;
    while (c->tune->head) {
        xattn_cl_tuned *n = c->tune->head->next;
        free(c->tune->head);
        c->tune->head = n;
    }
    free(c->tune);
    c->tune = NULL;
}

/* ---- include/xattn_opencl.h: the stored winners ---------------------------- */

static xattn_status xattn__cl_tune_args(const xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                        int64_t d, int64_t dv, xattn_cl_ctx **c)
{
    if (!xattn__is_cl_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT, "ctx: not an OpenCL context");
    if (!xattn__cl_tune_algo((int)algo))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "algo: %d is not naive, flash or splitkv", (int)algo);
    if ((int)dtype < 0 || dtype >= XATTN_DTYPE_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_DTYPE, "dtype: %d is not a dtype", (int)dtype);
    if (d < 1 || d > 4096 || dv < 1 || dv > 4096)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "head_dim %lld, head_dim_v %lld: each must be in 1..4096", (long long)d,
                            (long long)dv);
    *c = ctx->bctx;
    return XATTN_STATUS_OK;
}

xattn_status xattn_opencl_tile_default(xattn_ctx *ctx, char *tile, size_t n)
{
    xattn__clear_error();
    if (!tile || n == 0)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "tile: NULL or empty buffer");
    if (!xattn__is_cl_ctx(ctx))
        return xattn__error(XATTN_STATUS_WRONG_CONTEXT, "ctx: not an OpenCL context");
    const xattn_cl_ctx *c = ctx->bctx;
    char text[256];
    xattn__cl_tile_format(&xattn__cl_tile_row_of(c->type)->tile, text, sizeof text);
    if (strlen(text) >= n)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "n: %zu bytes, the tile needs %zu", n,
                            strlen(text) + 1);
    memcpy(tile, text, strlen(text) + 1);
    return XATTN_STATUS_OK;
}

static xattn_status xattn__cl_tune_store(xattn_cl_ctx *c, xattn_algo algo, xattn_dtype dtype,
                                         int64_t head_dim, int64_t head_dim_v, const char *tile)
{
    xattn_cl_tile t;
    XATTN_RETURN_IF_ERROR(xattn__cl_tile_check(c, tile, head_dim, head_dim_v, &t));
    if (!c->cache_root[0])
        return xattn__error(XATTN_STATUS_IO,
                            "no cache folder (XATTN_CACHE_DIR is empty, or no XDG_CACHE_HOME or "
                            "HOME names one): the tuned tile cannot be stored");
    char key[1400], name[64], text[256], why[512] = "";
    xattn__cl_tune_key(c, (int)algo, (int)dtype, head_dim, head_dim_v, key, sizeof key, name,
                       sizeof name);
    xattn__cl_tile_format(&t, text, sizeof text);
    if (xattn__tune_entry_write(c->cache_root, "opencl", name, key, "tile=", text, why,
                                sizeof why) != XATTN__FILE_OK)
        return xattn__error(XATTN_STATUS_IO, "tuned tile not stored in %s/opencl/%s: %s",
                            c->cache_root, name, why);
    /* This context uses it from its next call on, as a new one would. */
    xattn_cl_tuned *e = xattn__cl_tune_memo_find(c, (int)algo, (int)dtype, head_dim, head_dim_v);
    if (e) {
        e->found = 1;
        e->tile = t;
        e->tile.tuned = 1;
    }
    return XATTN_STATUS_OK;
}

xattn_status xattn_opencl_tune_store(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                     int64_t head_dim, int64_t head_dim_v, const char *tile)
{
    xattn__clear_error();
    xattn_cl_ctx *c = NULL;
    XATTN_RETURN_IF_ERROR(xattn__cl_tune_args(ctx, algo, dtype, head_dim, head_dim_v, &c));
    if (!tile || !*tile)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "tile: NULL or empty");
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx)); /* the memo of stored winners is the call's */
    xattn_status st = xattn__cl_tune_store(c, algo, dtype, head_dim, head_dim_v, tile);
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_opencl_tune_lookup(xattn_ctx *ctx, xattn_algo algo, xattn_dtype dtype,
                                      int64_t head_dim, int64_t head_dim_v, char *tile, size_t n,
                                      int *found)
{
    xattn__clear_error();
    if (!tile || n == 0 || !found)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL or empty",
                            !found ? "found" : "tile");
    *found = 0;
    tile[0] = '\0';
    xattn_cl_ctx *c = NULL;
    XATTN_RETURN_IF_ERROR(xattn__cl_tune_args(ctx, algo, dtype, head_dim, head_dim_v, &c));
    xattn_cl_tile t;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx)); /* the file is read into the context's memory */
    const int got = xattn__cl_tune_read(c, (int)algo, (int)dtype, head_dim, head_dim_v, &t);
    xattn__ctx_leave(ctx);
    if (!got)
        return XATTN_STATUS_OK;
    char text[256];
    xattn__cl_tile_format(&t, text, sizeof text);
    if (strlen(text) >= n)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "n: %zu bytes, the tile needs %zu", n,
                            strlen(text) + 1);
    memcpy(tile, text, strlen(text) + 1);
    *found = 1;
    return XATTN_STATUS_OK;
}
