/*
 * Device ceilings: the backend's micro-benchmarks (FMA throughput, read and
 * copy bandwidth), and their on-disk cache.
 *
 * Cache: one small key=value text file per device in
 *   $XATTN_CACHE_DIR, else $XDG_CACHE_HOME/xattn, else $HOME/.cache/xattn
 * named <backend>-<device>-<hash of the key>.txt. The key holds everything that
 * changes the figures: backend, device name, driver, platform, CPU features,
 * compute units, and whether the quick (test) mode measured them. A file that
 * does not parse, has another key, or holds a non-positive figure is ignored
 * and measured again. Files are written to a temporary name, then renamed.
 * Numbers are read and written in the "C" locale whatever the caller's.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xattn_internal.h"

#define XATTN__CEIL_FORMAT 1

int xattn__ceilings_quick(void)
{
    const char *q = getenv("XATTN_CEILINGS_QUICK");
    return q && !strcmp(q, "1");
}

/* The cache folder; 0 when the environment names none. */
static int xattn__cache_dir(char *out, size_t n)
{
    const char *e = getenv("XATTN_CACHE_DIR");
    if (e && *e)
        return snprintf(out, n, "%s", e) < (int)n;
    e = getenv("XDG_CACHE_HOME");
    if (e && *e)
        return snprintf(out, n, "%s/xattn", e) < (int)n;
    e = getenv("HOME");
    if (e && *e)
        return snprintf(out, n, "%s/.cache/xattn", e) < (int)n;
    return 0;
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

static uint64_t xattn__fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The cache file of ctx's device; 0 when there is no cache folder. */
static int xattn__ceil_path(const struct xattn_ctx *ctx, const char *key, char *path, size_t n)
{
    char dir[400];
    if (!xattn__cache_dir(dir, sizeof dir))
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
    return snprintf(path, n, "%s/%s-%s-%016llx.txt", dir, ctx->be->name, dev,
                    (unsigned long long)xattn__fnv1a(key)) < (int)n;
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

/* 1 when `path` holds a valid entry for `key`. */
static int xattn__ceil_read(const char *path, const char *key, xattn_ceilings *c)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    int format = 0, key_ok = 0, bad = 0;
    unsigned seen = 0;
    char line[2048];
    xattn__c_locale loc;
    xattn__c_locale_enter(&loc);
    while (!bad && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(f)) { /* a line longer than any we write */
            bad = 1;
            break;
        }
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
    bad |= ferror(f);
    fclose(f);
    if (bad || !format || !key_ok || seen != 31)
        return 0;
    c->from_cache = 1;
    snprintf(c->cache_path, sizeof c->cache_path, "%s", path);
    return 1;
}

/* mkdir -p */
static int xattn__mkdirs(const char *dir)
{
    char tmp[512];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return 0;
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return 0;
        *s = '/';
    }
    return !mkdir(tmp, 0755) || errno == EEXIST;
}

static xattn_status xattn__ceil_write(const char *path, const char *key, const xattn_ceilings *c)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (!xattn__mkdirs(dir))
            return xattn__error(XATTN_STATUS_IO, "ceilings cache: cannot create folder '%s': %s",
                                dir, strerror(errno));
    }
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return xattn__error(XATTN_STATUS_IO, "ceilings cache: cannot write '%s': %s", tmp,
                            strerror(errno));
    xattn__c_locale loc;
    xattn__c_locale_enter(&loc);
    fprintf(f,
            "# xattn device ceilings (measured by the built-in micro-benchmarks; delete to "
            "measure again)\nformat=%d\nkey=%s\nfma_f32_gflops=%.17g\nfma_f16_gflops=%.17g\n"
            "fma_bf16_gflops=%.17g\nread_gbps=%.17g\ncopy_gbps=%.17g\nmma_f16_gflops=%.17g\n"
            "mma_bf16_gflops=%.17g\n",
            XATTN__CEIL_FORMAT, key, c->fma_f32_gflops, c->fma_f16_gflops, c->fma_bf16_gflops,
            c->read_gbps, c->copy_gbps, c->mma_f16_gflops, c->mma_bf16_gflops);
    xattn__c_locale_leave(&loc);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        int err = errno;
        remove(tmp);
        return xattn__error(XATTN_STATUS_IO, "ceilings cache: cannot write '%s': %s", path,
                            strerror(err));
    }
    return XATTN_STATUS_OK;
}

/* Reads the cache entry of ctx's device into *c; 0 when there is none. */
static int xattn__ceil_lookup(const struct xattn_ctx *ctx, xattn_ceilings *c)
{
    char key[1200], path[512];
    xattn__ceil_key(ctx, key, sizeof key);
    if (!xattn__ceil_path(ctx, key, path, sizeof path))
        return 0;
    return xattn__ceil_read(path, key, c);
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

xattn_status xattn_ceilings_measure(xattn_ctx *ctx, int force, xattn_ceilings *out)
{
    xattn__clear_error();
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "out" : "ctx");
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
        char key[1200], path[512];
        xattn__ceil_key(ctx, key, sizeof key);
        if (xattn__ceil_path(ctx, key, path, sizeof path)) {
            /* A cache that cannot be written is not the caller's failure. */
            if (xattn__ceil_write(path, key, &c) == XATTN_STATUS_OK)
                snprintf(c.cache_path, sizeof c.cache_path, "%s", path);
            else
                xattn__log(XATTN_LOG_WARN, "%s", xattn_last_error());
            xattn__clear_error();
        }
        ctx->prof.ceil = c;
        ctx->prof.ceil_state = 1;
        *out = c;
    }
    xattn__ctx_leave(ctx);
    return st;
}

xattn_status xattn_ceilings_get(const xattn_ctx *ctx, xattn_ceilings *out)
{
    xattn__clear_error();
    if (!ctx || !out)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", ctx ? "out" : "ctx");
    if (ctx->prof.ceil_state == 1) {
        *out = ctx->prof.ceil;
        return XATTN_STATUS_OK;
    }
    /* An interop context that was never looked up: read the cache now. */
    if (ctx->prof.ceil_state == 0 && xattn__ceil_lookup(ctx, out))
        return XATTN_STATUS_OK;
    return xattn__error(XATTN_STATUS_UNSUPPORTED,
                        "ceilings: none known for %s device %d (%s); run "
                        "xattn_ceilings_measure or `xattn devices --measure`",
                        ctx->be->name, ctx->device, ctx->info.name);
}
