/*
 * The cache files' one safe mechanism (xattn_file.h says what it trusts):
 * folders opened once and checked through their descriptor, files opened
 * relative to it with O_NOFOLLOW and checked with fstat before a byte is read,
 * temporary files created exclusively, and the program-cache entry format.
 *
 * Everything is done relative to the folder's descriptor (openat, renameat),
 * so that what was checked is what is used: renaming or replacing a path
 * component after the check does not redirect a read or a write.
 */
#include "xattn_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "xattn_internal.h"

uint64_t xattn__fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int xattn__why(char *why, size_t whyn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int xattn__why(char *why, size_t whyn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && whyn)
        vsnprintf(why, whyn, fmt, ap);
    va_end(ap);
    return XATTN__FILE_SKIP;
}

int xattn__cache_root(char *out, size_t n)
{
    const char *e = getenv("XATTN_CACHE_DIR");
    int w;
    if (e) {
        if (!*e)
            return 0; /* the disk caches are off */
        w = snprintf(out, n, "%s", e);
    } else if ((e = getenv("XDG_CACHE_HOME")) && *e) {
        w = snprintf(out, n, "%s/xattn", e);
    } else if ((e = getenv("HOME")) && *e) {
        w = snprintf(out, n, "%s/.cache/xattn", e);
    } else {
        return 0;
    }
    return w > 0 && (size_t)w < n;
}

static const char *xattn__file_type(mode_t m)
{
    if (S_ISDIR(m))
        return "a folder";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISLNK(m))
        return "a symbolic link";
    return "not a regular file";
}

/* The owner and mode checks shared by folders and files. */
static int xattn__trusted(const struct stat *st, const char *kind, const char *dir,
                          const char *name, char *why, size_t whyn)
{
    const char *sep = name ? "/" : "";
    if (!name)
        name = "";
    if (st->st_uid != geteuid())
        return xattn__why(why, whyn,
                          "cache %s %s%s%s is owned by uid %lu, not by this user (uid %lu): not "
                          "trusted",
                          kind, dir, sep, name, (unsigned long)st->st_uid,
                          (unsigned long)geteuid());
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return xattn__why(why, whyn,
                          "cache %s %s%s%s is writable by %s (mode %04o): not trusted; make it "
                          "private (chmod go-w) or set XATTN_CACHE_DIR to a private folder",
                          kind, dir, sep, name, (st->st_mode & S_IWOTH) ? "others" : "its group",
                          (unsigned)(st->st_mode & 07777));
    return XATTN__FILE_OK;
}

/* Checks the folder open as fd (path for messages). */
static int xattn__dir_check(int fd, const char *path, const char *sub, char *why, size_t whyn)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return xattn__why(why, whyn, "cache folder %s%s%s: fstat failed: %s", path, sub ? "/" : "",
                          sub ? sub : "", strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return xattn__why(why, whyn, "cache folder %s%s%s is not a folder", path, sub ? "/" : "",
                          sub ? sub : "");
    return xattn__trusted(&st, "folder", path, sub, why, whyn);
}

/* Creates each missing folder of path with mode 0700 (mkdir -p). */
static int xattn__mkdirs(const char *path, char *why, size_t whyn)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return xattn__why(why, whyn, "cache folder %.200s...: path too long", path);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return xattn__why(why, whyn, "cannot create cache folder %s: %s", tmp, strerror(errno));
        *s = '/';
    }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
        return xattn__why(why, whyn, "cannot create cache folder %s: %s", tmp, strerror(errno));
    return XATTN__FILE_OK;
}

/* The reason an open of a folder or file failed. */
static int xattn__open_failed(int err, const char *kind, const char *dir, const char *name,
                              char *why, size_t whyn)
{
    const char *sep = name ? "/" : "";
    if (!name)
        name = "";
    if (err == ELOOP)
        return xattn__why(why, whyn, "cache %s %s%s%s is a symbolic link: not followed%s", kind,
                          dir, sep, name,
                          strcmp(kind, "folder") ? "" : " (set XATTN_CACHE_DIR to the real path)");
    return xattn__why(why, whyn, "cache %s %s%s%s cannot be opened: %s", kind, dir, sep, name,
                      strerror(err));
}

int xattn__cache_dir_open(const char *root, const char *sub, int create, int *dfd, char *why,
                          size_t whyn)
{
    const int dflags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    *dfd = -1;
    int fd = open(root, dflags);
    if (fd < 0 && errno == ENOENT) {
        if (!create)
            return XATTN__FILE_ABSENT;
        if (xattn__mkdirs(root, why, whyn) != XATTN__FILE_OK)
            return XATTN__FILE_SKIP;
        fd = open(root, dflags);
    }
    if (fd < 0) {
        int err = errno;
        struct stat ls;
        if (err == ENOTDIR && lstat(root, &ls) == 0 && S_ISLNK(ls.st_mode))
            err = ELOOP; /* O_DIRECTORY may report a link to a file so */
        return xattn__open_failed(err, "folder", root, NULL, why, whyn);
    }
    if (xattn__dir_check(fd, root, NULL, why, whyn) != XATTN__FILE_OK) {
        close(fd);
        return XATTN__FILE_SKIP;
    }
    if (sub) {
        if (create && mkdirat(fd, sub, 0700) != 0 && errno != EEXIST) {
            int err = errno;
            close(fd);
            return xattn__why(why, whyn, "cannot create cache folder %s/%s: %s", root, sub,
                              strerror(err));
        }
        int sfd = openat(fd, sub, dflags);
        int err = errno;
        struct stat ls;
        if (sfd < 0 && err == ENOTDIR && fstatat(fd, sub, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(ls.st_mode))
            err = ELOOP;
        close(fd);
        if (sfd < 0) {
            if (err == ENOENT)
                return XATTN__FILE_ABSENT;
            return xattn__open_failed(err, "folder", root, sub, why, whyn);
        }
        if (xattn__dir_check(sfd, root, sub, why, whyn) != XATTN__FILE_OK) {
            close(sfd);
            return XATTN__FILE_SKIP;
        }
        fd = sfd;
    }
    *dfd = fd;
    return XATTN__FILE_OK;
}

int xattn__file_read(int dfd, const char *name, size_t max, struct xattn_ctx *ctx, const char *what,
                     unsigned char **data, size_t *len, char *why, size_t whyn)
{
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return XATTN__FILE_ABSENT;
        return xattn__open_failed(errno, "file", name, NULL, why, whyn);
    }
    struct stat st;
    int rc = XATTN__FILE_OK;
    if (fstat(fd, &st) != 0)
        rc = xattn__why(why, whyn, "cache file %s: fstat failed: %s", name, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = xattn__why(why, whyn, "cache file %s is %s, not a regular file: not read", name,
                        xattn__file_type(st.st_mode));
    else if (xattn__trusted(&st, "file", name, NULL, why, whyn) != XATTN__FILE_OK)
        rc = XATTN__FILE_SKIP;
    else if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max)
        rc = xattn__why(why, whyn,
                        "cache file %s holds %llu bytes, more than a %s may (%zu): not read", name,
                        (unsigned long long)st.st_size, what, max);
    if (rc != XATTN__FILE_OK) {
        close(fd);
        return rc;
    }
    const size_t size = (size_t)st.st_size;
    char awhy[600];
    unsigned char *buf = xattn__file_alloc(ctx, (uint64_t)size + 1, what, awhy, sizeof awhy);
    if (!buf) {
        close(fd);
        return xattn__why(why, whyn, "cache file %s not read: %s", name, awhy);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? xattn__why(why, whyn, "cache file %s: read failed: %s", name,
                                    strerror(errno))
                       : xattn__why(why, whyn, "cache file %s shrank while being read", name);
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (rc != XATTN__FILE_OK) {
        xattn__file_free(ctx, buf, size);
        return rc;
    }
    buf[size] = '\0';
    *data = buf;
    *len = size;
    return XATTN__FILE_OK;
}

void *xattn__file_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what, char *why,
                        size_t whyn)
{
    if (!ctx) {
        void *p = bytes <= SIZE_MAX ? malloc((size_t)bytes) : NULL;
        if (!p)
            xattn__why(why, whyn, "%s: out of host memory for %llu bytes", what,
                       (unsigned long long)bytes);
        return p;
    }
    /* Checked here first so that a cache file that does not fit is a warning,
     * not an error message left in the caller's call. */
    uint64_t used = atomic_load(&ctx->mem_current);
    if (ctx->mem_limit && (used > ctx->mem_limit || bytes > ctx->mem_limit - used)) {
        xattn__why(why, whyn,
                   "%s: %llu bytes would pass the context's memory limit "
                   "(XATTN_OPT_MEMORY_LIMIT = %llu, %llu in use)",
                   what, (unsigned long long)bytes, (unsigned long long)ctx->mem_limit,
                   (unsigned long long)used);
        return NULL;
    }
    char saved[4096];
    snprintf(saved, sizeof saved, "%s", xattn_last_error());
    xattn_status st;
    void *p = xattn__host_alloc(ctx, bytes, what, &st);
    if (!p) {
        xattn__why(why, whyn, "%s", xattn_last_error());
        xattn__set_error_text(saved);
    }
    return p;
}

void xattn__file_release(struct xattn_ctx *ctx, void *p, uint64_t bytes)
{
    if (!p)
        return;
    if (ctx)
        xattn__host_free(ctx, p, bytes);
    else
        free(p);
}

void xattn__file_free(struct xattn_ctx *ctx, unsigned char *data, size_t len)
{
    xattn__file_release(ctx, data, (uint64_t)len + 1);
}

/* A name no one can predict often enough to matter; O_EXCL makes a clash (or a
 * planted file or link of that name) a retry, never a file that is reused. */
static void xattn__tmp_name(char *out, size_t n, const char *name)
{
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed[4] = {(uint64_t)getpid(), atomic_fetch_add(&counter, 1),
                        (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                        (uint64_t)(uintptr_t)&ts};
    uint64_t h = xattn__fnv1a64(XATTN__FNV_INIT, seed, sizeof seed);
    snprintf(out, n, ".%s.%016llx.tmp", name, (unsigned long long)h);
}

int xattn__file_write(int dfd, const char *name, const xattn__file_part *parts, int nparts,
                      char *why, size_t whyn)
{
    char tmp[320];
    if (strlen(name) > 256)
        return xattn__why(why, whyn, "cache file name %.40s...: too long", name);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        xattn__tmp_name(tmp, sizeof tmp, name);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return xattn__why(why, whyn, "cannot create a temporary file for %s: %s", name,
                              strerror(errno));
    }
    if (fd < 0)
        return xattn__why(why, whyn, "cannot create a temporary file for %s: 100 names taken",
                          name);
    int err = 0;
    for (int i = 0; i < nparts && !err; i++) {
        const unsigned char *p = parts[i].data;
        size_t left = parts[i].len;
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && renameat(dfd, tmp, dfd, name) != 0)
        err = errno;
    if (err) {
        unlinkat(dfd, tmp, 0);
        return xattn__why(why, whyn, "cannot write cache file %s: %s", name, strerror(err));
    }
    return XATTN__FILE_OK;
}

/* ---- program-cache entries ------------------------------------------------ */

int xattn__prog_entry_parse(const unsigned char *buf, size_t n, const char *key, size_t *bin_off,
                            size_t *bin_len, const char **reason)
{
    const size_t klen = strlen(key);
    uint32_t fk = 0;
    uint64_t blen = 0, sum = 0;
    *bin_off = *bin_len = 0;
    if (n < 8 || memcmp(buf, XATTN__PROG_MAGIC, 8) != 0) {
        *reason = "not a program-cache file";
        return XATTN__FILE_SKIP;
    }
    *reason = "truncated or corrupt";
    if (n < 12)
        return XATTN__FILE_SKIP;
    memcpy(&fk, buf + 8, 4);
    if ((size_t)fk > n - 12)
        return XATTN__FILE_SKIP;
    if ((size_t)fk != klen || memcmp(buf + 12, key, klen) != 0) {
        *reason = "written for another device, driver, source or build options";
        return XATTN__FILE_SKIP;
    }
    const size_t head = 12 + klen + 8;
    if (n - 12 - klen < 8 + 8)
        return XATTN__FILE_SKIP;
    memcpy(&blen, buf + 12 + klen, 8);
    if (blen == 0 || blen != (uint64_t)(n - head - 8))
        return XATTN__FILE_SKIP;
    memcpy(&sum, buf + head + blen, 8);
    if (sum != xattn__fnv1a64(XATTN__FNV_INIT, buf + head, (size_t)blen))
        return XATTN__FILE_SKIP;
    *bin_off = head;
    *bin_len = (size_t)blen;
    *reason = NULL;
    return XATTN__FILE_OK;
}

size_t xattn__prog_entry_head(unsigned char *head, unsigned char tail[8], const char *key,
                              const void *bin, size_t bin_len)
{
    const size_t klen = strlen(key);
    if (klen > XATTN__PROG_HEAD_MAX - 20)
        return 0;
    const uint32_t k32 = (uint32_t)klen;
    const uint64_t b64 = bin_len, sum = xattn__fnv1a64(XATTN__FNV_INIT, bin, bin_len);
    memcpy(head, XATTN__PROG_MAGIC, 8);
    memcpy(head + 8, &k32, 4);
    memcpy(head + 12, key, klen);
    memcpy(head + 12 + klen, &b64, 8);
    memcpy(tail, &sum, 8);
    return 20 + klen;
}

/* ---- tune entries ---------------------------------------------------------- */

int xattn__tune_entry_read(const char *root, const char *sub, const char *name,
                           struct xattn_ctx *owner, size_t max, const char *magic, const char *key,
                           const char *field, const char *stale, char *value, size_t valuen,
                           char *why, size_t whyn)
{
    int dfd;
    int rc = xattn__cache_dir_open(root, sub, 0, &dfd, why, whyn);
    unsigned char *file = NULL;
    size_t flen = 0;
    if (rc == XATTN__FILE_OK) {
        rc = xattn__file_read(dfd, name, max, owner, "tune entry", &file, &flen, why, whyn);
        close(dfd);
    }
    if (rc != XATTN__FILE_OK)
        return rc == XATTN__FILE_ABSENT ? rc : XATTN__FILE_SKIP;
    const size_t ml = strlen(magic), kl = strlen(key), fl = strlen(field);
    const char *text = (const char *)file; /* NUL-terminated by xattn__file_read */
    rc = XATTN__FILE_SKIP;
    if (flen < ml || memcmp(text, magic, ml)) {
        snprintf(why, whyn, "not a tune entry (corrupt)");
    } else if (flen <= kl + fl + 1 || memcmp(text, key, kl) || memcmp(text + kl, field, fl)) {
        snprintf(why, whyn, "stale or corrupt: not the entry of this device, driver and case (%s)",
                 stale);
    } else {
        const char *v = text + kl + fl;
        const size_t vl = flen - kl - fl; /* with its newline */
        if (text[flen - 1] != '\n' || strlen(v) != vl || memchr(v, '\n', vl - 1) ||
            vl - 1 >= valuen) {
            snprintf(why, whyn,
                     "corrupt: the %.*s line is not one line of at most %zu bytes ending the file",
                     (int)(fl - 1), field, valuen - 1);
        } else {
            memcpy(value, v, vl - 1);
            value[vl - 1] = '\0';
            rc = XATTN__FILE_OK;
        }
    }
    xattn__file_free(owner, file, flen);
    return rc;
}

int xattn__tune_entry_write(const char *root, const char *sub, const char *name, const char *key,
                            const char *field, const char *value, char *why, size_t whyn)
{
    int dfd;
    int rc = xattn__cache_dir_open(root, sub, 1, &dfd, why, whyn);
    if (rc == XATTN__FILE_OK) {
        const xattn__file_part parts[4] = {
            {key, strlen(key)}, {field, strlen(field)}, {value, strlen(value)}, {"\n", 1}};
        rc = xattn__file_write(dfd, name, parts, 4, why, whyn);
        close(dfd);
    }
    return rc == XATTN__FILE_OK ? rc : XATTN__FILE_SKIP;
}
