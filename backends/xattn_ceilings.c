/*
 * Device ceilings: the backend's micro-benchmarks (FMA throughput, read and
 * copy bandwidth), and their on-disk cache.
 *
 * Cache: one small key=value text file per device in the cache root
 * ($XATTN_CACHE_DIR, else $XDG_CACHE_HOME/xattn, else $HOME/.cache/xattn; ""
 * turns it off) named <backend>-<device>-<hash of the key>.txt. The key holds
 * everything that changes the figures: backend, device name, driver, platform,
 * CPU features, compute units, and whether the quick (test) mode measured
 * them. Files are read and written through xattn_file.c, which trusts only
 * the user's private folder and regular files of a bounded size; a file that
 * is not trusted, does not parse, has another key, or holds a non-positive
 * figure is ignored with a warning and measured again.
 * Numbers are read and written in the "C" locale whatever the caller's.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_file.h"
#include "xattn_internal.h"

#define XATTN__CEIL_FORMAT 1

int xattn__ceilings_quick(void)
{
    const char *q = getenv("XATTN_CEILINGS_QUICK");
    return q && !strcmp(q, "1");
}

static void xattn__key_part(char *dst, size_t *k, size_t n, const char *name, const char *v)
{
    int w = snprintf(dst + *k, n - *k, "%s%s=", *k ? ";" : "", name);
    if (w < 0 || (size_t)w >= n - *k)
        return;
    *k += (size_t)w;
    for (; *v && *k + 1 < n; v++) /* one line, no separators inside values */
        dst[(*k)++] = (*v == '\n' || *v == '\r' || *v == ';') ? ' ' : *v;
    dst[*k] = '\0';
}

static void xattn__ceil_key(const struct xattn_ctx *ctx, char *key, size_t n)
{
    const xattn_device_info *in = &ctx->info;
    char units[32];
    snprintf(units, sizeof units, "%d", in->compute_units);
    size_t k = 0;
    key[0] = '\0';
    xattn__key_part(key, &k, n, "backend", ctx->be->name);
    xattn__key_part(key, &k, n, "device", in->name);
    xattn__key_part(key, &k, n, "driver", in->driver_version);
    xattn__key_part(key, &k, n, "platform", in->platform);
    xattn__key_part(key, &k, n, "features", in->cpu_features);
    xattn__key_part(key, &k, n, "units", units);
    xattn__key_part(key, &k, n, "mode", xattn__ceilings_quick() ? "quick" : "full");
}

/* The cache root, the file name of ctx's device within it, and the file's
 * whole path (a cache_path); 0 when there is no cache folder. */
typedef struct xattn__ceil_loc {
    char root[400], name[128];
    char path[sizeof((xattn_ceilings *)0)->cache_path];
} xattn__ceil_loc;

static int xattn__ceil_where(const struct xattn_ctx *ctx, const char *key, xattn__ceil_loc *l)
{
    if (!xattn__cache_root(l->root, sizeof l->root))
        return 0;
    char dev[41];
    size_t k = 0;
    for (const char *c = ctx->info.name; *c && k < sizeof dev - 1; c++) {
        char ch = *c;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '-';
        dev[k++] = ok ? ch : '_';
    }
    dev[k] = '\0';
    uint64_t h = xattn__fnv1a64(XATTN__FNV_INIT, key, strlen(key));
    int w = snprintf(l->name, sizeof l->name, "%s-%s-%016llx.txt", ctx->be->name, dev,
                     (unsigned long long)h);
    if (w < 0 || (size_t)w >= sizeof l->name)
        return 0;
    w = snprintf(l->path, sizeof l->path, "%s/%s", l->root, l->name);
    return w > 0 && (size_t)w < sizeof l->path;
}

/* Runs with the thread's locale switched to "C" (number formatting). */
typedef struct xattn__c_locale {
    locale_t c, old;
} xattn__c_locale;

static void xattn__c_locale_enter(xattn__c_locale *l)
{
    l->c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    l->old = l->c ? uselocale(l->c) : (locale_t)0;
}

static void xattn__c_locale_leave(xattn__c_locale *l)
{
    if (l->c) {
        uselocale(l->old);
        freelocale(l->c);
    }
}

static int xattn__parse_pos(const char *v, double *out, int allow_zero)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < 0 || (!allow_zero && x == 0))
        return 0;
    *out = x;
    return 1;
}

int xattn__ceil_parse(const char *text, size_t n, const char *key, xattn_ceilings *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    int format = 0, key_ok = 0, bad = 0;
    unsigned seen = 0;
    char line[2048];
    xattn__c_locale loc;
    xattn__c_locale_enter(&loc);
    size_t pos = 0;
    while (!bad && pos < n) {
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - (text + pos)) : n - pos;
        /* a line longer than any we write, or a NUL inside one */
        if (len >= sizeof line || memchr(text + pos, '\0', len)) {
            bad = 1;
            break;
        }
        memcpy(line, text + pos, len);
        line[len] = '\0';
        pos += len + (nl != NULL);
        if (!len || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            bad = 1;
            break;
        }
        *eq = '\0';
        const char *k = line, *v = eq + 1;
        if (!strcmp(k, "format"))
            format = !strcmp(v, "1");
        else if (!strcmp(k, "key"))
            key_ok = !strcmp(v, key);
        else if (!strcmp(k, "fma_f32_gflops"))
            bad |= !xattn__parse_pos(v, &c->fma_f32_gflops, 0), seen |= 1;
        else if (!strcmp(k, "fma_f16_gflops"))
            bad |= !xattn__parse_pos(v, &c->fma_f16_gflops, 1), seen |= 2;
        else if (!strcmp(k, "fma_bf16_gflops"))
            bad |= !xattn__parse_pos(v, &c->fma_bf16_gflops, 1), seen |= 4;
        else if (!strcmp(k, "read_gbps"))
            bad |= !xattn__parse_pos(v, &c->read_gbps, 0), seen |= 8;
        else if (!strcmp(k, "copy_gbps"))
            bad |= !xattn__parse_pos(v, &c->copy_gbps, 0), seen |= 16;
        else if (!strcmp(k, "mma_f16_gflops")) /* optional: 0 when absent */
            bad |= !xattn__parse_pos(v, &c->mma_f16_gflops, 1);
        else if (!strcmp(k, "mma_bf16_gflops"))
            bad |= !xattn__parse_pos(v, &c->mma_bf16_gflops, 1);
        /* other keys (measured_at, notes) are informative */
    }
    xattn__c_locale_leave(&loc);
    return !bad && format && key_ok && seen == 31;
}

size_t xattn__ceil_format(char *out, size_t n, const char *key, const xattn_ceilings *c)
{
    xattn__c_locale loc;
    xattn__c_locale_enter(&loc);
    int w =
        snprintf(out, n,
                 "# xattn device ceilings (measured by the built-in micro-benchmarks; delete "
                 "to measure again)\nformat=%d\nkey=%s\nfma_f32_gflops=%.17g\n"
                 "fma_f16_gflops=%.17g\nfma_bf16_gflops=%.17g\nread_gbps=%.17g\n"
                 "copy_gbps=%.17g\nmma_f16_gflops=%.17g\nmma_bf16_gflops=%.17g\n",
                 XATTN__CEIL_FORMAT, key, c->fma_f32_gflops, c->fma_f16_gflops, c->fma_bf16_gflops,
                 c->read_gbps, c->copy_gbps, c->mma_f16_gflops, c->mma_bf16_gflops);
    xattn__c_locale_leave(&loc);
    return w > 0 && (size_t)w < n ? (size_t)w : 0;
}

/* Reads the cache entry of ctx's device into *c; 0 when there is none (an
 * entry that is there but not used is a warning). The file's bytes are
 * counted by ctx's allocator while they are parsed. */
static int xattn__ceil_lookup(const struct xattn_ctx *ctx, xattn_ceilings *c)
{
    char key[1200], why[1024];
    xattn__ceil_loc l;
    xattn__ceil_key(ctx, key, sizeof key);
    if (!xattn__ceil_where(ctx, key, &l))
        return 0;
    int dfd;
    int rc = xattn__cache_dir_open(l.root, NULL, 0, &dfd, why, sizeof why);
    if (rc == XATTN__FILE_SKIP)
        xattn__log(XATTN_LOG_WARN, "ceilings cache not used: %s", why);
    if (rc != XATTN__FILE_OK)
        return 0;
    /* Only the byte counters change: a const context is not otherwise touched. */
    struct xattn_ctx *counted = (struct xattn_ctx *)ctx;
    unsigned char *text = NULL;
    size_t len = 0;
    rc = xattn__file_read(dfd, l.name, XATTN__CEIL_FILE_MAX, counted, "ceilings cache file", &text,
                          &len, why, sizeof why);
    close(dfd);
    if (rc == XATTN__FILE_SKIP)
        xattn__log(XATTN_LOG_WARN, "ceilings cache in %s: %s", l.root, why);
    if (rc != XATTN__FILE_OK)
        return 0;
    int ok = xattn__ceil_parse((const char *)text, len, key, c);
    xattn__file_free(counted, text, len);
    if (!ok) {
        xattn__log(XATTN_LOG_WARN,
                   "ceilings cache file %s does not hold valid ceilings for this device: not "
                   "used (xattn_ceilings_measure measures and rewrites it)",
                   l.path);
        return 0;
    }
    c->from_cache = 1;
    memcpy(c->cache_path, l.path, sizeof c->cache_path);
    return 1;
}

/* Stores *c as ctx's device entry; 1 on success, else 0 after a warning. */
static int xattn__ceil_store(const struct xattn_ctx *ctx, xattn_ceilings *c)
{
    char key[1200], why[1024], text[2048];
    xattn__ceil_loc l;
    xattn__ceil_key(ctx, key, sizeof key);
    if (!xattn__ceil_where(ctx, key, &l))
        return 0;
    size_t len = xattn__ceil_format(text, sizeof text, key, c);
    int dfd = -1;
    int rc = len ? xattn__cache_dir_open(l.root, NULL, 1, &dfd, why, sizeof why) : XATTN__FILE_SKIP;
    if (!len)
        snprintf(why, sizeof why, "the entry for %s does not fit %zu bytes", l.path, sizeof text);
    if (rc == XATTN__FILE_OK) {
        xattn__file_part part = {text, len};
        rc = xattn__file_write(dfd, l.name, &part, 1, why, sizeof why);
        close(dfd);
    }
    if (rc != XATTN__FILE_OK) {
        /* A cache that cannot be written is not the caller's failure. */
        xattn__log(XATTN_LOG_WARN, "ceilings not cached: %s", why);
        return 0;
    }
    memcpy(c->cache_path, l.path, sizeof c->cache_path);
    return 1;
}

void xattn__ceilings_load(struct xattn_ctx *ctx)
{
    xattn_ceilings c;
    if (xattn__ceil_lookup(ctx, &c)) {
        ctx->prof.ceil = c;
        ctx->prof.ceil_state = 1;
    } else {
        ctx->prof.ceil_state = 2;
    }
}

static xattn_status xattn__ceilings_measure(xattn_ctx *ctx, int force, xattn_ceilings *out)
{
    if (force != 0 && force != 1)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "force: %d, expected 0 or 1", force);
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(ctx));
    xattn_status st = XATTN_STATUS_OK;
    xattn_ceilings c;
    if (!force && xattn__ceil_lookup(ctx, &c)) {
        ctx->prof.ceil = c;
        ctx->prof.ceil_state = 1;
        *out = c;
        xattn__ctx_leave(ctx);
        return XATTN_STATUS_OK;
    }
    if (!ctx->be->measure_ceilings) {
        st = xattn__error(XATTN_STATUS_UNSUPPORTED,
                          "xattn_ceilings_measure: the %s backend has no micro-benchmarks in "
                          "this build",
                          ctx->be->name);
        xattn__ctx_leave(ctx);
        return st;
    }
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    st = ctx->be->measure_ceilings(ctx, &c);
    if (st == XATTN_STATUS_OK &&
        !(c.fma_f32_gflops > 0 && isfinite(c.fma_f32_gflops) && c.read_gbps > 0 &&
          isfinite(c.read_gbps) && c.copy_gbps > 0 && isfinite(c.copy_gbps) &&
          c.fma_f16_gflops >= 0 && c.fma_bf16_gflops >= 0 && c.mma_f16_gflops >= 0 &&
          isfinite(c.mma_f16_gflops) && c.mma_bf16_gflops >= 0 && isfinite(c.mma_bf16_gflops)))
        st = xattn__error(XATTN_STATUS_INTERNAL,
                          "ceilings: the %s micro-benchmarks gave fma %g GFLOP/s, read %g GB/s, "
                          "copy %g GB/s; expected positive figures",
                          ctx->be->name, c.fma_f32_gflops, c.read_gbps, c.copy_gbps);
    if (st == XATTN_STATUS_OK) {
        c.from_cache = 0;
        c.cache_path[0] = '\0';
        xattn__ceil_store(ctx, &c);
        ctx->prof.ceil = c;
        ctx->prof.ceil_state = 1;
        *out = c;
    }
    xattn__ctx_leave(ctx);
    return st;
}

static xattn_status xattn__ceilings_get(const xattn_ctx *ctx, xattn_ceilings *out)
{
    /* Taken like a call (BUSY while another thread measures): the ceilings
     * are written by xattn_ceilings_measure. The cast touches only the flag. */
    struct xattn_ctx *c = (struct xattn_ctx *)ctx;
    XATTN_RETURN_IF_ERROR(xattn__ctx_enter(c));
    int known = ctx->prof.ceil_state == 1;
    if (known)
        *out = ctx->prof.ceil;
    /* An interop context that was never looked up: read the cache now. */
    else if (ctx->prof.ceil_state == 0)
        known = xattn__ceil_lookup(ctx, out);
    xattn__ctx_leave(c);
    if (known)
        return XATTN_STATUS_OK;
    return xattn__error(XATTN_STATUS_UNSUPPORTED,
                        "ceilings: none known for %s device %d (%s); run "
                        "xattn_ceilings_measure or `xattn devices --measure`",
                        ctx->be->name, ctx->device, ctx->info.name);
}

static xattn_status xattn__ceilings_out_ok(const xattn_ctx *ctx, const xattn_ceilings *out,
                                           size_t out_size)
{
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "out" : "ctx");
    if (out_size < sizeof(size_t))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "out: struct size %zu is smaller than its struct_size field", out_size);
    return XATTN_STATUS_OK;
}

xattn_status xattn_ceilings_measure_sized(xattn_ctx *ctx, int force, xattn_ceilings *out,
                                          size_t out_size)
{
    xattn__clear_error();
    XATTN_RETURN_IF_ERROR(xattn__ceilings_out_ok(ctx, out, out_size));
    xattn_ceilings c;
    XATTN_RETURN_IF_ERROR(xattn__ceilings_measure(ctx, force, &c));
    return xattn__struct_out(out, out_size, &c, sizeof c, "out");
}

xattn_status xattn_ceilings_get_sized(const xattn_ctx *ctx, xattn_ceilings *out, size_t out_size)
{
    xattn__clear_error();
    XATTN_RETURN_IF_ERROR(xattn__ceilings_out_ok(ctx, out, out_size));
    xattn_ceilings c;
    XATTN_RETURN_IF_ERROR(xattn__ceilings_get(ctx, &c));
    return xattn__struct_out(out, out_size, &c, sizeof c, "out");
}

xattn_status(xattn_ceilings_measure)(xattn_ctx *ctx, int force, xattn_ceilings *out)
{
    return xattn_ceilings_measure_sized(ctx, force, out, XATTN__V1_CEILINGS_SIZE);
}

xattn_status(xattn_ceilings_get)(const xattn_ctx *ctx, xattn_ceilings *out)
{
    return xattn_ceilings_get_sized(ctx, out, XATTN__V1_CEILINGS_SIZE);
}
