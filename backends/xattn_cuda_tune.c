/*
 * The CUDA backend's run-time configuration and its stored winners
 * (xattn_cuda_tune.h).
 *
 * One file a winner, <cache root>/cuda/tune-<hash>.txt, named by the FNV-1a
 * hash of its key, read and written through xattn_file.c (trusted folders
 * and files only, bounded size, written to a temporary file then renamed).
 * The file is the key, then the configuration:
 *   xattn-cuda-tune 1
 *   device=NVIDIA H200 / cc=90 / driver=12080      (the device's identity)
 *   algo=flash / dtype=f16 / head_dim=128 / head_dim_v=128
 *   config=path=auto,waves=2
 * A file whose key differs (another driver, a copied file) is stale, one
 * that does not parse is corrupt: each is ignored with a warning, and the
 * default runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn_cuda_tune.h"
#include "xattn_file.h"

#define XATTN__CUDA_TUNE_MAGIC "xattn-cuda-tune 1\n"
#define XATTN__CUDA_TUNE_FILE_MAX ((size_t)4 << 10)

struct xattn__cuda_tuned {
    struct xattn__cuda_tuned *next;
    int algo, dtype;
    int64_t d, dv;
    int found;
    xattn__cuda_cfg cfg;
};

xattn__cuda_cfg xattn__cuda_cfg_default(void)
{
    xattn__cuda_cfg c = {0, XATTN__CUDA_WAVES_DEFAULT};
    return c;
}

xattn_status xattn__cuda_cfg_parse(const char *text, const char *what, xattn__cuda_cfg *cfg)
{
    if (!text || !*text)
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "%s: empty; expected keys path=auto|simt, waves=1..%d", what,
                            XATTN__CUDA_WAVES_MAX);
    xattn__cuda_cfg c = *cfg;
    const char *s = text;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char item[64];
        if (len == 0 || len >= sizeof item)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s='%s': an empty or over-long item at offset %zu", what, text,
                                (size_t)(s - text));
        memcpy(item, s, len);
        item[len] = '\0';
        char *eq = strchr(item, '=');
        if (!eq)
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s='%s': '%s' is not key=value (keys: path, waves)", what, text,
                                item);
        *eq = '\0';
        const char *v = eq + 1;
        if (!strcmp(item, "path")) {
            if (!strcmp(v, "auto"))
                c.simt = 0;
            else if (!strcmp(v, "simt"))
                c.simt = 1;
            else
                return xattn__error(
                    XATTN_STATUS_INVALID_ARGUMENT,
                    "%s='%s': path=%s; expected auto (mma where it applies) or simt", what, text,
                    v);
        } else if (!strcmp(item, "waves")) {
            char *e;
            errno = 0;
            long w = strtol(v, &e, 10);
            if (errno || e == v || *e || w < 1 || w > XATTN__CUDA_WAVES_MAX)
                return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                    "%s='%s': waves=%s; expected an integer in 1..%d", what, text,
                                    v, XATTN__CUDA_WAVES_MAX);
            c.waves = (int)w;
        } else {
            return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                                "%s='%s': unknown key '%s' (keys: path, waves)", what, text, item);
        }
        s += len;
        if (*s == ',') {
            s++;
            if (!*s)
                return xattn__error(XATTN_STATUS_INVALID_ARGUMENT, "%s='%s': a trailing comma",
                                    what, text);
        }
    }
    *cfg = c;
    return XATTN_STATUS_OK;
}

int xattn__cuda_waves_splits(long long base_blocks, int sm_count, int waves)
{
    const long long base = base_blocks > 0 ? base_blocks : 1;
    const long long target = (long long)(waves > 0 ? waves : 1) * (sm_count > 0 ? sm_count : 1);
    const long long s = base >= target ? 1 : (target + base - 1) / base;
    return (int)(s < 1 << 20 ? s : 1 << 20);
}

void xattn__cuda_cfg_format(const xattn__cuda_cfg *cfg, char *out, size_t n)
{
    snprintf(out, n, "path=%s,waves=%d", cfg->simt ? "simt" : "auto", cfg->waves);
}

static const char *xattn__cuda_tune_algo(int algo)
{
    return algo == XATTN_ALGO_FLASH ? "flash" : algo == XATTN_ALGO_SPLITKV ? "splitkv" : NULL;
}

xattn_status xattn__cuda_tune_args(int algo, int dtype, int64_t d, int64_t dv)
{
    if (!xattn__cuda_tune_algo(algo))
        return xattn__error(XATTN_STATUS_INVALID_ARGUMENT,
                            "algo: %d is not flash or splitkv (the CUDA algorithms with a "
                            "run-time choice)",
                            algo);
    if (dtype < 0 || dtype >= XATTN_DTYPE_COUNT)
        return xattn__error(XATTN_STATUS_INVALID_DTYPE, "dtype: %d is not a dtype", dtype);
    if (d < 1 || d > 4096 || dv < 1 || dv > 4096)
        return xattn__error(XATTN_STATUS_INVALID_SHAPE,
                            "head_dim %lld, head_dim_v %lld: each must be in 1..4096", (long long)d,
                            (long long)dv);
    return XATTN_STATUS_OK;
}

xattn_status xattn__cuda_tune_init(xattn__cuda_tune *t, struct xattn_ctx *owner, const char *name,
                                   int cc, int driver)
{
    memset(t, 0, sizeof *t);
    t->owner = owner;
    /* One line a field, no newline inside the name. */
    char clean[256];
    size_t k = 0;
    for (const char *c = name ? name : ""; *c && k < sizeof clean - 1; c++)
        clean[k++] = (*c == '\n' || *c == '\r') ? ' ' : *c;
    clean[k] = '\0';
    snprintf(t->ident, sizeof t->ident, "device=%s\ncc=%d\ndriver=%d\n", clean, cc, driver);
    if (!xattn__cache_root(t->cache_root, sizeof t->cache_root))
        t->cache_root[0] = '\0';
    t->env = xattn__cuda_cfg_default();
    const char *env = getenv("XATTN_CUDA_CONFIG");
    if (env && *env) {
        XATTN_RETURN_IF_ERROR(xattn__cuda_cfg_parse(env, "XATTN_CUDA_CONFIG", &t->env));
        t->env_set = 1;
    }
    return XATTN_STATUS_OK;
}

void xattn__cuda_tune_free(xattn__cuda_tune *t)
{
    while (t->memo) {
        xattn__cuda_tuned *n = t->memo->next;
        free(t->memo);
        t->memo = n;
    }
}

/* The key (the file's text before "config=") and the file name of an entry. */
static void xattn__cuda_tune_key(const xattn__cuda_tune *t, int algo, int dtype, int64_t d,
                                 int64_t dv, char *key, size_t keyn, char *name, size_t namen)
{
    snprintf(key, keyn, "%s%salgo=%s\ndtype=%s\nhead_dim=%lld\nhead_dim_v=%lld\n",
             XATTN__CUDA_TUNE_MAGIC, t->ident, xattn__cuda_tune_algo(algo),
             xattn_dtype_name((xattn_dtype)dtype), (long long)d, (long long)dv);
    const uint64_t h = xattn__fnv1a64(XATTN__FNV_INIT, key, strlen(key));
    snprintf(name, namen, "tune-%016llx.txt", (unsigned long long)h);
}

int xattn__cuda_tune_read(const xattn__cuda_tune *t, int algo, int dtype, int64_t d, int64_t dv,
                          xattn__cuda_cfg *cfg)
{
    if (!t->cache_root[0] || !xattn__cuda_tune_algo(algo) || dtype < 0 ||
        dtype >= XATTN_DTYPE_COUNT)
        return 0;
    char key[1024], name[64], why[512] = "", stale[160], line[128];
    xattn__cuda_tune_key(t, algo, dtype, d, dv, key, sizeof key, name, sizeof name);
    snprintf(stale, sizeof stale, "algo %s, dtype %s, D %lld, Dv %lld", xattn__cuda_tune_algo(algo),
             xattn_dtype_name((xattn_dtype)dtype), (long long)d, (long long)dv);
    int rc = xattn__tune_entry_read(t->cache_root, "cuda", name, t->owner,
                                    XATTN__CUDA_TUNE_FILE_MAX, XATTN__CUDA_TUNE_MAGIC, key,
                                    "config=", stale, line, sizeof line, why, sizeof why);
    if (rc == XATTN__FILE_ABSENT)
        return 0;
    int found = 0;
    if (rc == XATTN__FILE_OK) {
        char saved[512];
        snprintf(saved, sizeof saved, "%s", xattn_last_error());
        xattn__cuda_cfg c = xattn__cuda_cfg_default();
        if (xattn__cuda_cfg_parse(line, "config", &c) == XATTN_STATUS_OK) {
            *cfg = c;
            found = 1;
            xattn__log(XATTN_LOG_INFO,
                       "cuda: tuned configuration for %s %s D %lld Dv %lld: %s (%s/cuda/%s)",
                       xattn__cuda_tune_algo(algo), xattn_dtype_name((xattn_dtype)dtype),
                       (long long)d, (long long)dv, line, t->cache_root, name);
        } else {
            snprintf(why, sizeof why, "corrupt: %s", xattn_last_error());
        }
        xattn__set_error_text(saved);
    }
    if (!found)
        xattn__log(XATTN_LOG_WARN, "cuda: tuned configuration %s/cuda/%s ignored: %s",
                   t->cache_root, name, why);
    return found;
}

static xattn__cuda_tuned *xattn__cuda_memo_find(const xattn__cuda_tune *t, int algo, int dtype,
                                                int64_t d, int64_t dv)
{
    for (xattn__cuda_tuned *e = t->memo; e; e = e->next)
        if (e->algo == algo && e->dtype == dtype && e->d == d && e->dv == dv)
            return e;
    return NULL;
}

xattn__cuda_cfg xattn__cuda_tune_cfg(xattn__cuda_tune *t, int algo, int dtype, int64_t d,
                                     int64_t dv, int *tuned)
{
    *tuned = 0;
    if (t->env_set)
        return t->env;
    if (!xattn__cuda_tune_algo(algo))
        return xattn__cuda_cfg_default();
    xattn__cuda_tuned *e = xattn__cuda_memo_find(t, algo, dtype, d, dv);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) /* out of host memory: the default, read again next time */
            return xattn__cuda_cfg_default();
        e->algo = algo;
        e->dtype = dtype;
        e->d = d;
        e->dv = dv;
        e->found = xattn__cuda_tune_read(t, algo, dtype, d, dv, &e->cfg);
        e->next = t->memo;
        t->memo = e;
    }
    if (!e->found)
        return xattn__cuda_cfg_default();
    *tuned = 1;
    return e->cfg;
}

xattn_status xattn__cuda_tune_store(xattn__cuda_tune *t, int algo, int dtype, int64_t d, int64_t dv,
                                    const xattn__cuda_cfg *cfg)
{
    XATTN_RETURN_IF_ERROR(xattn__cuda_tune_args(algo, dtype, d, dv));
    if (!t->cache_root[0])
        return xattn__error(XATTN_STATUS_IO,
                            "no cache folder (XATTN_CACHE_DIR is empty, or no XDG_CACHE_HOME or "
                            "HOME names one): the tuned configuration cannot be stored");
    char key[1024], name[64], text[128], why[512] = "";
    xattn__cuda_tune_key(t, algo, dtype, d, dv, key, sizeof key, name, sizeof name);
    xattn__cuda_cfg_format(cfg, text, sizeof text);
    if (xattn__tune_entry_write(t->cache_root, "cuda", name, key, "config=", text, why,
                                sizeof why) != XATTN__FILE_OK)
        return xattn__error(XATTN_STATUS_IO, "tuned configuration not stored in %s/cuda/%s: %s",
                            t->cache_root, name, why);
    xattn__cuda_tuned *e = xattn__cuda_memo_find(t, algo, dtype, d, dv);
    if (e) {
        e->found = 1;
        e->cfg = *cfg;
    }
    return XATTN_STATUS_OK;
}
