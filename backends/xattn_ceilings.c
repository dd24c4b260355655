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
 *
 * Load: each measurement records the share of the host's CPU time that other
 * processes used while the micro-benchmarks ran (Linux: /proc/stat's busy time
 * less this process's CPU time, over the same interval), as load_others=
 * (absent from entries written before it was recorded: those stay valid, load
 * unknown). On a device that runs on the host's CPUs, a share above
 * XATTN__CEIL_LOAD_FLAG marks the entry under_load: it is used (the shares of
 * it are then likely high), and the next xattn_ceilings_measure without force
 * measures again; the new figures replace the entry unless they were measured
 * under a heavier load still. A GPU's own loops do not share the host's CPUs,
 * so its load is recorded but never flags it. The quick (test) mode records
 * no load; XATTN_CEILINGS_LOAD=<share> stands in for the measured share
 * (tests of this logic, which must not depend on the machine's real load).
 */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xattn_file.h"
#include "xattn_internal.h"

#define XATTN__CEIL_FORMAT 1
/* Other processes' share of the host's CPU time above which a ceiling
 * measured on a CPU device is flagged under_load. */
#define XATTN__CEIL_LOAD_FLAG 0.10

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
    c->load_others = -1; /* not recorded */
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
        else if (!strcmp(k, "load_others")) /* optional: a share, 0..1 */
            bad |= !xattn__parse_pos(v, &c->load_others, 1) || c->load_others > 1;
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
    /* The load, when known: other processes' share of the host's CPU time. */
    if (w > 0 && (size_t)w < n && c->load_others >= 0 && c->load_others <= 1) {
        int w2 = snprintf(out + w, n - (size_t)w, "load_others=%.17g\n", c->load_others);
        w = w2 > 0 ? w + w2 : -1;
    }
    xattn__c_locale_leave(&loc);
    return w > 0 && (size_t)w < n ? (size_t)w : 0;
}

/* Whether ceilings measured with c->load_others are to be trusted: a device on
 * the host's CPUs measured while other processes took a share of them is not. */
static void xattn__ceil_flag(const struct xattn_ctx *ctx, xattn_ceilings *c)
{
    c->under_load =
        ctx->info.device_type == XATTN_DEVICE_TYPE_CPU && c->load_others > XATTN__CEIL_LOAD_FLAG;
}

/* The host's CPU time (seconds, all CPUs): busy (with steal: another guest's
 * time) and in all, from /proc/stat; and this process's own CPU time. */
typedef struct xattn__cpu_times {
    double busy, total, self;
} xattn__cpu_times;

static int xattn__cpu_times_now(xattn__cpu_times *t)
{
    char buf[512];
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    long hz = sysconf(_SC_CLK_TCK);
    if (n <= 4 || hz <= 0 || strncmp(buf, "cpu ", 4))
        return 0;
    buf[n] = '\0';
    /* user nice system idle iowait irq softirq steal (guest time is in user) */
    double v[8] = {0};
    char *p = buf + 4;
    int k = 0;
    for (; k < 8; k++) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p || errno)
            break;
        v[k] = (double)x / (double)hz;
        p = end;
    }
    struct timespec ts;
    if (k < 4 || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
        return 0;
    t->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    t->total = t->busy + v[3] + v[4];
    t->self = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return 1;
}

double xattn__ceil_load_share(double busy, double total, double self)
{
    if (!(total >= 0.2) || !isfinite(total) || !isfinite(busy) || !isfinite(self))
        return -1;
    double others = busy - self;
    return others <= 0 ? 0 : others >= total ? 1 : others / total;
}

/* XATTN_CEILINGS_LOAD: a share 0..1 recorded in place of the measured one
 * (tests); 1 when set and valid. */
static int xattn__ceil_load_override(double *share)
{
    const char *e = getenv("XATTN_CEILINGS_LOAD");
    if (!e || !*e)
        return 0;
    xattn__c_locale loc;
    xattn__c_locale_enter(&loc);
    double x;
    int ok = xattn__parse_pos(e, &x, 1) && x <= 1;
    xattn__c_locale_leave(&loc);
    if (!ok) {
        xattn__log(XATTN_LOG_WARN, "XATTN_CEILINGS_LOAD=%s: not a share 0..1, ignored", e);
        return 0;
    }
    *share = x;
    return 1;
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
    xattn__ceil_flag(ctx, c);
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
    xattn_ceilings c, cached;
    /* A cached entry is used unless it was measured under load: that one is
     * measured again, and kept if the new figures' load is heavier still. */
    int have_cached = !force && xattn__ceil_lookup(ctx, &cached);
    if (have_cached && !cached.under_load) {
        ctx->prof.ceil = cached;
        ctx->prof.ceil_state = 1;
        *out = cached;
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
    xattn__cpu_times t0, t1;
    int timed = !xattn__ceilings_quick() && xattn__cpu_times_now(&t0);
    st = ctx->be->measure_ceilings(ctx, &c);
    c.load_others =
        timed && xattn__cpu_times_now(&t1)
            ? xattn__ceil_load_share(t1.busy - t0.busy, t1.total - t0.total, t1.self - t0.self)
            : -1;
    double injected;
    if (xattn__ceil_load_override(&injected))
        c.load_others = injected;
    xattn__ceil_flag(ctx, &c);
    if (st == XATTN_STATUS_OK &&
        !(c.fma_f32_gflops > 0 && isfinite(c.fma_f32_gflops) && c.read_gbps > 0 &&
          isfinite(c.read_gbps) && c.copy_gbps > 0 && isfinite(c.copy_gbps) &&
          c.fma_f16_gflops >= 0 && c.fma_bf16_gflops >= 0 && c.mma_f16_gflops >= 0 &&
          isfinite(c.mma_f16_gflops) && c.mma_bf16_gflops >= 0 && isfinite(c.mma_bf16_gflops)))
        st = xattn__error(XATTN_STATUS_INTERNAL,
                          "ceilings: the %s micro-benchmarks gave fma %g GFLOP/s, read %g GB/s, "
                          "copy %g GB/s; expected positive figures",
                          ctx->be->name, c.fma_f32_gflops, c.read_gbps, c.copy_gbps);
    if (st != XATTN_STATUS_OK && have_cached) {
        /* The entry flagged under load is still better than none. */
        xattn__log(XATTN_LOG_WARN, "ceilings not measured again (%s): the cached ones are kept",
                   xattn_last_error());
        xattn__clear_error();
        st = XATTN_STATUS_OK;
        c = cached;
    } else if (st == XATTN_STATUS_OK && have_cached && c.under_load &&
               c.load_others > cached.load_others) {
        xattn__log(XATTN_LOG_INFO,
                   "ceilings measured again under a heavier load (%.0f%% of the CPUs busy with "
                   "other work, %.0f%% when cached): the cached ones are kept",
                   100 * c.load_others, 100 * cached.load_others);
        c = cached;
    } else if (st == XATTN_STATUS_OK) {
        c.from_cache = 0;
        c.cache_path[0] = '\0';
        xattn__ceil_store(ctx, &c);
    }
    if (st == XATTN_STATUS_OK) {
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
