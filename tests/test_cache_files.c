/*
 * test_cache_files: the on-disk caches trust nothing they find on disk
 * (docs/guarantees.md, "Cache files"). For the device-ceilings cache (CPU
 * backend, quick micro-benchmarks) and, when an OpenCL device is there, the
 * program cache:
 *
 *   fifo       a FIFO where a cache file is expected: creating a context (and
 *              the first OpenCL call) returns at once; a watchdog alarm fails
 *              the test if it blocks;
 *   symlink    a cache file that is a symbolic link is not read through; a link
 *              planted at the old predictable temporary name, or at the file's
 *              own name, never makes a write land in the file it points at;
 *   size       a 1000 MiB (sparse) cache file is refused by its size, without
 *              being read; a cache file is counted by the context's allocator
 *              and XATTN_OPT_MEMORY_LIMIT applies to it;
 *   owner      a folder (or file) owned by another user, writable by the group
 *              (on purpose too) or by others, or a cache folder that is a
 *              symbolic link, is not used, with a warning, never an error;
 *   creation   folders the library creates are 0700, files 0600, and no
 *              temporary file is left behind;
 *   format     the program-cache entry parser refuses every truncation and
 *              every flipped byte of a valid entry.
 *
 * "Owned by another user" needs root (chown to uid 65534); without root, a
 * folder root owns ("/") stands in for it and the file case is skipped, as the
 * last line says. Nothing depends on timing: the watchdog only turns a hang
 * into a failure, and is far longer than any step takes.
 *
 * Exit: 0 pass, 1 fail. Last line "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_file.h"
#include "xattn_test.h"
#ifdef XATTN_TEST_HAVE_OPENCL
#include "xattn_backend_opencl.h"
#endif

/* ---- the watchdog: a call that blocks fails the test instead of hanging --- */

static char g_watch_msg[512];

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t w = write(1, g_watch_msg, strlen(g_watch_msg));
    (void)w;
    _exit(1);
}

/* Arms the watchdog for one step; a step that takes `seconds` is hung (each
 * takes well under a second of work; OpenCL source builds take seconds). */
static void watch(const char *step, unsigned seconds)
{
    snprintf(g_watch_msg, sizeof g_watch_msg,
             "FAIL watchdog: %s did not return within %u s (blocked on a cache file?)\n"
             "%d passed, %d failed, %d skipped\n",
             step, seconds, g_passed, g_failed + 1, g_skipped);
    alarm(seconds);
}

static void unwatch(void)
{
    alarm(0);
}

/* ---- warnings through the log callback --------------------------------- */

static char g_warnings[32768];

static void on_log(xattn_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level != XATTN_LOG_WARN)
        return;
    size_t used = strlen(g_warnings);
    snprintf(g_warnings + used, sizeof g_warnings - used, "%s\n", msg);
}

static void warnings_reset(void)
{
    g_warnings[0] = '\0';
}

static int warned(const char *text)
{
    return strstr(g_warnings, text) != NULL;
}

/* ---- files --------------------------------------------------------------- */

static char g_scratch[256];

/* A new private folder under the scratch folder. */
static void fresh_dir(char *out, size_t n, const char *tag)
{
    snprintf(out, n, "%s/%s-XXXXXX", g_scratch, tag);
    if (!mkdtemp(out))
        out[0] = '\0';
}

static int write_file(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, data, n);
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

/* The file's content (NUL-terminated, malloc'd) or NULL. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        if (!got)
            break;
        n += got;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static int file_is(const char *path, const char *content)
{
    char *got = read_file(path, NULL);
    int same = got && !strcmp(got, content);
    free(got);
    return same;
}

/* Number of entries in dir (besides . and ..); names that start with '.' in *hidden. */
static int count_entries(const char *dir, int *hidden)
{
    int n = 0;
    if (hidden)
        *hidden = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        n++;
        if (e->d_name[0] == '.' && hidden)
            (*hidden)++;
    }
    closedir(d);
    return n;
}

static mode_t mode_of(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 ? sb.st_mode : 0;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

/* chown to a user that is not us (root only); 0 on success. */
static int give_away(const char *path)
{
    return geteuid() == 0 ? lchown(path, 65534, 65534) : -1;
}

/* ---- the ceilings cache (CPU) ------------------------------------------- */

static char g_name[256]; /* the CPU's ceilings file name */
static char *g_entry;    /* a valid ceilings file for it */
static size_t g_entry_len;

/* Creates a CPU context with the cache at dir (watchdog armed); NULL on failure. */
static xattn_ctx *cpu_ctx(const char *dir, const char *step)
{
    setenv("XATTN_CACHE_DIR", dir, 1);
    xattn_ctx *ctx = NULL;
    watch(step, 120);
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    unwatch();
    EXPECT(st == XATTN_STATUS_OK, "%s: %s", step, xattn_last_error());
    return ctx;
}

/* 1 when a context created with the cache at dir finds ceilings there. */
static int ceilings_found(const char *dir, const char *step)
{
    xattn_ctx *ctx = cpu_ctx(dir, step);
    xattn_ceilings c;
    int found = ctx && xattn_ceilings_get(ctx, &c) == XATTN_STATUS_OK && c.from_cache;
    xattn_ctx_destroy(ctx);
    return found;
}

/* Measures (force: even when cached) with the cache at dir; the ceilings in *c. */
static xattn_status measure_in(const char *dir, int force, xattn_ceilings *c, const char *step)
{
    xattn_ctx *ctx = cpu_ctx(dir, step);
    if (!ctx)
        return XATTN_STATUS_INTERNAL;
    memset(c, 0, sizeof *c);
    watch(step, 300);
    xattn_status st = xattn_ceilings_measure(ctx, force, c);
    unwatch();
    xattn_ctx_destroy(ctx);
    return st;
}

static void plant_entry(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    EXPECT(write_file(path, g_entry, g_entry_len, 0600) == 0, "cannot write %s", path);
}

static void test_creation(void)
{
    char base[512], dir[700], mid[600];
    fresh_dir(base, sizeof base, "create");
    snprintf(mid, sizeof mid, "%s/new", base);
    snprintf(dir, sizeof dir, "%s/new/cache", base);
    xattn_ceilings c;
    warnings_reset();
    xattn_status st = measure_in(dir, 0, &c, "measure into a new folder");
    EXPECT(st == XATTN_STATUS_OK, "%s", xattn_last_error());
    EXPECT(!c.from_cache && !strncmp(c.cache_path, dir, strlen(dir)), "cache_path '%s'",
           c.cache_path);
    EXPECT((mode_of(mid) & 07777) == 0700 && (mode_of(dir) & 07777) == 0700,
           "created folders: %04o %04o", (unsigned)(mode_of(mid) & 07777),
           (unsigned)(mode_of(dir) & 07777));
    EXPECT(S_ISREG(mode_of(c.cache_path)) && (mode_of(c.cache_path) & 07777) == 0600,
           "file mode %04o", (unsigned)(mode_of(c.cache_path) & 07777));
    int hidden = 0;
    EXPECT(count_entries(dir, &hidden) == 1 && hidden == 0, "one file, no temporary file left");
    EXPECT(g_warnings[0] == '\0', "no warning: %s", g_warnings);
    const char *slash = strrchr(c.cache_path, '/');
    snprintf(g_name, sizeof g_name, "%s", slash ? slash + 1 : "");
    g_entry = read_file(c.cache_path, &g_entry_len);
    EXPECT(g_entry && g_entry_len > 0, "cannot read %s back", c.cache_path);
    EXPECT(ceilings_found(dir, "context on a trusted cache"), "a new context reads the entry");

    /* A folder reached through a symbolic link among its parents is used. */
    char link[700], via[800];
    snprintf(link, sizeof link, "%s/link-to-new", base);
    EXPECT(symlink(mid, link) == 0, "symlink: %s", strerror(errno));
    snprintf(via, sizeof via, "%s/cache", link);
    EXPECT(ceilings_found(via, "context through a linked parent"),
           "a cache folder under a symbolic link is used");

    /* XATTN_CACHE_DIR="" turns the cache off: nothing read, nothing written. */
    warnings_reset();
    st = measure_in("", 0, &c, "measure with the cache off");
    EXPECT(st == XATTN_STATUS_OK && !c.from_cache && c.cache_path[0] == '\0' &&
               g_warnings[0] == '\0',
           "cache off: path '%s', warnings %s", c.cache_path, g_warnings);
}

static void test_fifo(void)
{
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "fifo");
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    EXPECT(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
    warnings_reset();
    EXPECT(!ceilings_found(dir, "xattn_ctx_create(CPU) with a FIFO as the ceilings file"),
           "a FIFO gives no ceilings");
    EXPECT(warned("FIFO"), "the warning names the FIFO: %s", g_warnings);
    xattn_ceilings c;
    xattn_status st = measure_in(dir, 0, &c, "xattn_ceilings_measure with a FIFO");
    EXPECT(st == XATTN_STATUS_OK && !c.from_cache && !strcmp(c.cache_path, path),
           "measured and stored: %s (path '%s')", xattn_last_error(), c.cache_path);
    EXPECT(S_ISREG(mode_of(path)), "the FIFO was replaced by a regular file");
    EXPECT(ceilings_found(dir, "context after the FIFO was replaced"), "then read back");
}

static void test_symlink(void)
{
    char dir[512], path[1024], victim[1024], victim2[1024], old_tmp[1100];
    fresh_dir(dir, sizeof dir, "link");
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    snprintf(victim, sizeof victim, "%s/victim-valid", g_scratch);
    snprintf(victim2, sizeof victim2, "%s/victim-precious", g_scratch);

    /* Read side: a link to a file holding valid ceilings is not followed. */
    EXPECT(write_file(victim, g_entry, g_entry_len, 0600) == 0, "victim");
    EXPECT(symlink(victim, path) == 0, "symlink: %s", strerror(errno));
    warnings_reset();
    EXPECT(!ceilings_found(dir, "context with a linked ceilings file"),
           "a symbolic link is not read through");
    EXPECT(warned("symbolic link"), "warning: %s", g_warnings);

    /* Write side: links at the file's name and at the old predictable
     * temporary name (PATH.tmp.<pid>) point at files that must not change. */
    const char *precious = "precious: not a cache file\n";
    EXPECT(write_file(victim2, precious, strlen(precious), 0600) == 0, "victim2");
    snprintf(old_tmp, sizeof old_tmp, "%s.tmp.%ld", path, (long)getpid());
    EXPECT(symlink(victim2, old_tmp) == 0, "symlink: %s", strerror(errno));
    xattn_ceilings c;
    xattn_status st = measure_in(dir, 1, &c, "measure over planted links");
    EXPECT(st == XATTN_STATUS_OK && !strcmp(c.cache_path, path), "%s (path '%s')",
           xattn_last_error(), c.cache_path);
    EXPECT(file_is(victim2, precious), "the file behind the planted temporary link is intact");
    EXPECT(file_is(victim, g_entry), "the file behind the linked cache file is intact");
    EXPECT(S_ISREG(mode_of(path)), "the link at the file's name was replaced, not followed");
    EXPECT(S_ISLNK(mode_of(old_tmp)), "the planted link is left alone");

    /* The cache folder itself a symbolic link: not used. */
    char good[512], link[1024];
    fresh_dir(good, sizeof good, "linked");
    plant_entry(good);
    snprintf(link, sizeof link, "%s/cache-link", g_scratch);
    EXPECT(symlink(good, link) == 0, "symlink: %s", strerror(errno));
    warnings_reset();
    EXPECT(!ceilings_found(link, "context on a linked cache folder"),
           "a cache folder that is a symbolic link is not used");
    EXPECT(warned("symbolic link"), "warning: %s", g_warnings);
}

static void test_size(void)
{
    char dir[512], path[1024];
    fresh_dir(dir, sizeof dir, "size");
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    /* 1000 MiB, sparse: valid ceilings, then zeros. */
    EXPECT(write_file(path, g_entry, g_entry_len, 0600) == 0, "write");
    EXPECT(truncate(path, (off_t)1000 << 20) == 0, "truncate: %s", strerror(errno));
    long rss0 = maxrss_kib();
    warnings_reset();
    EXPECT(!ceilings_found(dir, "context with a 1000 MiB ceilings file"),
           "an oversized file gives no ceilings");
    EXPECT(warned("1048576000 bytes, more than"), "refused by its size: %s", g_warnings);
    EXPECT(maxrss_kib() - rss0 < (64 << 10), "not read: max RSS grew %ld KiB", maxrss_kib() - rss0);

    /* Within the bound, the file's bytes are counted by the allocator. */
    size_t pad = 40000;
    char *big = malloc(g_entry_len + pad);
    if (big) {
        memcpy(big, g_entry, g_entry_len);
        memset(big + g_entry_len, '\n', pad);
        EXPECT(write_file(path, big, g_entry_len + pad, 0600) == 0, "rewrite");
        free(big);
        xattn_ctx *ctx = cpu_ctx(dir, "context with a 40 KB ceilings file");
        xattn_ceilings c;
        xattn_mem_stats m;
        if (ctx) {
            EXPECT(xattn_ceilings_get(ctx, &c) == XATTN_STATUS_OK && c.from_cache,
                   "a 40 KB file within the bound is read");
            EXPECT(xattn_ctx_mem_stats(ctx, &m) == XATTN_STATUS_OK &&
                       m.peak_bytes >= g_entry_len + pad,
                   "counted: peak %llu bytes, file %zu", (unsigned long long)m.peak_bytes,
                   g_entry_len + pad);
        }
        xattn_ctx_destroy(ctx);
    }
}

static void test_owner(void)
{
    char dir[512], path[1024];
    xattn_ceilings c;

    /* Group-writable on purpose (a shared team cache), and world-writable with
     * the sticky bit (/tmp's mode): neither is used nor written. */
    static const mode_t modes[] = {0770, 01777, 0720};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        fresh_dir(dir, sizeof dir, "mode");
        plant_entry(dir);
        EXPECT(chmod(dir, modes[i]) == 0, "chmod: %s", strerror(errno));
        warnings_reset();
        EXPECT(!ceilings_found(dir, "context on a shared folder"), "mode %04o: not read",
               (unsigned)modes[i]);
        EXPECT(warned("not trusted") && warned("writable by"), "mode %04o: warning %s",
               (unsigned)modes[i], g_warnings);
        xattn_status st = measure_in(dir, 1, &c, "measure into a shared folder");
        EXPECT(st == XATTN_STATUS_OK && c.cache_path[0] == '\0',
               "mode %04o: measured (%s), not stored (path '%s')", (unsigned)modes[i],
               xattn_last_error(), c.cache_path);
        EXPECT(count_entries(dir, NULL) == 1, "mode %04o: nothing written", (unsigned)modes[i]);
    }

    /* A group-writable file in a private folder. */
    fresh_dir(dir, sizeof dir, "gfile");
    plant_entry(dir);
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    EXPECT(chmod(path, 0660) == 0, "chmod");
    warnings_reset();
    EXPECT(!ceilings_found(dir, "context with a group-writable file"), "file 0660: not read");
    EXPECT(warned("writable by its group"), "warning: %s", g_warnings);

    /* Owned by another user. */
    fresh_dir(dir, sizeof dir, "foreign");
    plant_entry(dir);
    if (give_away(dir) == 0) {
        warnings_reset();
        EXPECT(!ceilings_found(dir, "context on a foreign folder"),
               "a folder owned by uid 65534 is not read");
        EXPECT(warned("owned by uid 65534"), "warning: %s", g_warnings);
        xattn_status st = measure_in(dir, 1, &c, "measure into a foreign folder");
        EXPECT(st == XATTN_STATUS_OK && c.cache_path[0] == '\0', "not stored: '%s'", c.cache_path);
        EXPECT(count_entries(dir, NULL) == 1, "nothing written in a foreign folder");
    } else {
        /* Without root: a folder root owns stands in for another user's. */
        struct stat sb;
        if (stat("/", &sb) == 0 && sb.st_uid != geteuid()) {
            warnings_reset();
            xattn_status st = measure_in("/", 1, &c, "measure into /");
            EXPECT(st == XATTN_STATUS_OK && c.cache_path[0] == '\0' && warned("owned by uid"),
                   "'/': not used (%s), warnings %s", c.cache_path, g_warnings);
        } else {
            SKIP("a folder owned by another user (cannot chown, and '/' is ours)");
        }
    }
    fresh_dir(dir, sizeof dir, "ffile");
    plant_entry(dir);
    snprintf(path, sizeof path, "%s/%s", dir, g_name);
    if (give_away(path) == 0) {
        warnings_reset();
        EXPECT(!ceilings_found(dir, "context with a foreign file"),
               "a file owned by uid 65534 is not read");
        EXPECT(warned("owned by uid 65534"), "warning: %s", g_warnings);
    } else {
        SKIP("a cache file owned by another user (needs root to chown)");
    }
}

/* ---- the safe-file mechanism itself ------------------------------------- */

static void test_file_module(void)
{
    char dir[512], why[1024];
    fresh_dir(dir, sizeof dir, "module");
    int dfd = -1;
    EXPECT(xattn__cache_dir_open(dir, "sub", 1, &dfd, why, sizeof why) == XATTN__FILE_OK, "%s",
           why);
    if (dfd < 0)
        return;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    EXPECT((mode_of(sub) & 07777) == 0700, "sub folder %04o", (unsigned)(mode_of(sub) & 07777));

    /* Round trip through a temporary file. */
    const char *text = "0123456789abcdef";
    xattn__file_part parts[2] = {{text, 10}, {text + 10, 6}};
    EXPECT(xattn__file_write(dfd, "f", parts, 2, why, sizeof why) == XATTN__FILE_OK, "%s", why);
    unsigned char *data = NULL;
    size_t len = 0;
    EXPECT(xattn__file_read(dfd, "f", 64, NULL, "test file", &data, &len, why, sizeof why) ==
                   XATTN__FILE_OK &&
               len == 16 && !memcmp(data, text, 16) && data[16] == '\0',
           "read back: %s", why);
    xattn__file_free(NULL, data, len);
    EXPECT(xattn__file_read(dfd, "f", 15, NULL, "test file", &data, &len, why, sizeof why) ==
                   XATTN__FILE_SKIP &&
               data == NULL && strstr(why, "more than"),
           "bound: %s", why);
    EXPECT(xattn__file_read(dfd, "none", 64, NULL, "test file", &data, &len, why, sizeof why) ==
               XATTN__FILE_ABSENT,
           "a missing file is ABSENT");

    /* Counted by the context's allocator; the memory limit applies quietly. */
    xattn_ctx *ctx = NULL;
    setenv("XATTN_CACHE_DIR", "", 1);
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) == XATTN_STATUS_OK) {
        xattn_mem_stats m0, m1;
        xattn_ctx_mem_stats(ctx, &m0);
        int rc = xattn__file_read(dfd, "f", 64, ctx, "test file", &data, &len, why, sizeof why);
        xattn_ctx_mem_stats(ctx, &m1);
        EXPECT(rc == XATTN__FILE_OK && m1.current_bytes == m0.current_bytes + 17,
               "counted: %llu -> %llu", (unsigned long long)m0.current_bytes,
               (unsigned long long)m1.current_bytes);
        xattn__file_free(ctx, data, len);
        xattn_ctx_mem_stats(ctx, &m1);
        EXPECT(m1.current_bytes == m0.current_bytes, "released");
        xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, (int64_t)m0.current_bytes + 16);
        xattn_ctx *none = NULL; /* leaves a known last error */
        xattn_ctx_create(XATTN_BACKEND_CPU, 999, &none);
        char before[512];
        snprintf(before, sizeof before, "%s", xattn_last_error());
        rc = xattn__file_read(dfd, "f", 64, ctx, "test file", &data, &len, why, sizeof why);
        EXPECT(before[0] && !strcmp(before, xattn_last_error()),
               "the caller's last error is left as it was: '%s'", xattn_last_error());
        xattn_ctx_mem_stats(ctx, &m1);
        EXPECT(rc == XATTN__FILE_SKIP && strstr(why, "memory limit") &&
                   m1.current_bytes == m0.current_bytes,
               "limit: %s", why);
        xattn_ctx_destroy(ctx);
    }

    /* A FIFO, a device-like link, a folder: refused without blocking. */
    char path[700];
    snprintf(path, sizeof path, "%s/fifo", sub);
    EXPECT(mkfifo(path, 0600) == 0, "mkfifo");
    watch("xattn__file_read on a FIFO", 60);
    EXPECT(xattn__file_read(dfd, "fifo", 64, NULL, "test file", &data, &len, why, sizeof why) ==
                   XATTN__FILE_SKIP &&
               strstr(why, "FIFO"),
           "%s", why);
    unwatch();
    snprintf(path, sizeof path, "%s/zero", sub);
    EXPECT(symlink("/dev/zero", path) == 0, "symlink");
    EXPECT(xattn__file_read(dfd, "zero", 64, NULL, "test file", &data, &len, why, sizeof why) ==
                   XATTN__FILE_SKIP &&
               strstr(why, "symbolic link"),
           "%s", why);
    /* Writing over a link replaces the link; the target is untouched. */
    snprintf(path, sizeof path, "%s/target", dir);
    EXPECT(write_file(path, "keep", 4, 0600) == 0, "target");
    char link[700];
    snprintf(link, sizeof link, "%s/over", sub);
    EXPECT(symlink(path, link) == 0, "symlink");
    EXPECT(xattn__file_write(dfd, "over", parts, 1, why, sizeof why) == XATTN__FILE_OK, "%s", why);
    EXPECT(file_is(path, "keep") && S_ISREG(mode_of(link)), "link replaced, target intact");
    close(dfd);

    /* A file where the subfolder should be; a linked subfolder. */
    char other[512];
    fresh_dir(other, sizeof other, "module2");
    snprintf(path, sizeof path, "%s/sub", other);
    EXPECT(write_file(path, "x", 1, 0600) == 0, "file");
    EXPECT(xattn__cache_dir_open(other, "sub", 1, &dfd, why, sizeof why) == XATTN__FILE_SKIP,
           "a file as the subfolder: %s", why);
    unlink(path);
    EXPECT(symlink(sub, path) == 0, "symlink");
    EXPECT(xattn__cache_dir_open(other, "sub", 1, &dfd, why, sizeof why) == XATTN__FILE_SKIP &&
               strstr(why, "symbolic link"),
           "a linked subfolder: %s", why);
}

static void test_prog_entry(void)
{
    const char *key = "device=test\noptions=-DX=1";
    unsigned char bin[37], head[XATTN__PROG_HEAD_MAX], tail[8], entry[XATTN__PROG_HEAD_MAX + 64];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)(i * 7 + 1);
    size_t hlen = xattn__prog_entry_head(head, tail, key, bin, sizeof bin);
    EXPECT(hlen == 20 + strlen(key), "header %zu bytes", hlen);
    size_t n = hlen + sizeof bin + 8;
    memcpy(entry, head, hlen);
    memcpy(entry + hlen, bin, sizeof bin);
    memcpy(entry + hlen + sizeof bin, tail, 8);
    size_t off = 0, blen = 0;
    const char *reason = NULL;
    EXPECT(xattn__prog_entry_parse(entry, n, key, &off, &blen, &reason) == XATTN__FILE_OK &&
               off == hlen && blen == sizeof bin && !memcmp(entry + off, bin, blen),
           "round trip: %s", reason ? reason : "");
    int bad = 0;
    for (size_t cut = 0; cut < n; cut++)
        bad += xattn__prog_entry_parse(entry, cut, key, &off, &blen, &reason) != XATTN__FILE_SKIP;
    EXPECT(bad == 0, "%d truncations accepted", bad);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        entry[i] ^= 0x10;
        bad += xattn__prog_entry_parse(entry, n, key, &off, &blen, &reason) != XATTN__FILE_SKIP;
        entry[i] ^= 0x10;
    }
    EXPECT(bad == 0, "%d flipped bytes accepted", bad);
    EXPECT(xattn__prog_entry_parse(entry, n, "device=other", &off, &blen, &reason) ==
                   XATTN__FILE_SKIP &&
               strstr(reason, "another device"),
           "key: %s", reason);
}

/* ---- the OpenCL program cache -------------------------------------------- */

#ifdef XATTN_TEST_HAVE_OPENCL
enum { SQ = 16, SK = 24, H = 2, D = 16 };

typedef struct clrun {
    xattn_status st;
    xattn_opencl_cache_stats stats;
    uint64_t peak_over; /* the call's peak over the bytes held before it */
    char error[512];
    int wrong; /* O differs from the CPU's */
} clrun;

static float g_q[SQ * H * D], g_k[SK * H * D], g_v[SK * H * D], g_ref[SQ * H * D];
static char g_call_error[512]; /* xattn_last_error() right after the last attention call */

static xattn_status run_on(xattn_ctx *ctx, float *out, uint64_t limit_extra, uint64_t *peak_over)
{
    xattn_buffer *b[4] = {NULL, NULL, NULL, NULL};
    size_t sizes[4] = {sizeof g_q, sizeof g_k, sizeof g_v, sizeof g_ref};
    xattn_status st = XATTN_STATUS_OK;
    for (int i = 0; i < 4 && st == XATTN_STATUS_OK; i++)
        st = xattn_buffer_alloc(ctx, sizes[i], &b[i]);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(b[0], 0, g_q, sizeof g_q);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(b[1], 0, g_k, sizeof g_k);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(b[2], 0, g_v, sizeof g_v);
    if (st == XATTN_STATUS_OK) {
        xattn_attn_desc d;
        xattn_attn_desc_init(&d);
        d.q = xattn_tensor_bshd(b[0], 0, XATTN_DTYPE_F32, 1, SQ, H, D);
        d.k = xattn_tensor_bshd(b[1], 0, XATTN_DTYPE_F32, 1, SK, H, D);
        d.v = xattn_tensor_bshd(b[2], 0, XATTN_DTYPE_F32, 1, SK, H, D);
        d.o = xattn_tensor_bshd(b[3], 0, XATTN_DTYPE_F32, 1, SQ, H, D);
        d.algo = XATTN_ALGO_FLASH;
        xattn_mem_stats m;
        xattn_ctx_mem_stats(ctx, &m);
        if (limit_extra)
            xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT,
                                 (int64_t)(m.current_bytes + limit_extra));
        xattn_ctx_reset_peak(ctx);
        st = xattn_attention(ctx, &d, NULL);
        snprintf(g_call_error, sizeof g_call_error, "%s", xattn_last_error());
        xattn_mem_stats m2;
        xattn_ctx_mem_stats(ctx, &m2);
        if (peak_over)
            *peak_over = m2.peak_bytes - m.current_bytes;
        if (limit_extra)
            xattn_ctx_set_option(ctx, XATTN_OPT_MEMORY_LIMIT, 0);
    }
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_read(b[3], 0, out, sizeof g_ref);
    for (int i = 0; i < 4; i++)
        xattn_buffer_free(b[i]);
    return st;
}

/* One OpenCL context and FLASH call with the cache at dir. */
static clrun cl_run(const char *dir, const char *policy, uint64_t limit_extra, const char *step)
{
    clrun r;
    memset(&r, 0, sizeof r);
    setenv("XATTN_CACHE_DIR", dir, 1);
    setenv("XATTN_CL_BINARY_CACHE", policy, 1);
    xattn_ctx *ctx = NULL;
    watch(step, 300);
    r.st = xattn_ctx_create(XATTN_BACKEND_OPENCL, 0, &ctx);
    if (r.st == XATTN_STATUS_OK) {
        static float out[SQ * H * D];
        r.st = run_on(ctx, out, limit_extra, &r.peak_over);
        for (size_t i = 0; r.st == XATTN_STATUS_OK && i < SQ * H * D; i++)
            r.wrong += !(fabsf(out[i] - g_ref[i]) <= 1e-5f);
        xattn__opencl_cache_stats(ctx, &r.stats);
    }
    unwatch();
    snprintf(r.error, sizeof r.error, "%s", ctx ? g_call_error : xattn_last_error());
    xattn_ctx_destroy(ctx);
    return r;
}

#define EXPECT_RUN(r, hits, rejects, what)                                                         \
    EXPECT((r).st == XATTN_STATUS_OK && !(r).wrong && (r).error[0] == '\0' &&                      \
               (r).stats.disk_hits == (hits) && (r).stats.disk_rejects == (rejects),               \
           "%s: %s '%s', %d wrong, disk hits %llu rejects %llu source builds %llu", what,          \
           xattn_status_name((r).st), (r).error, (r).wrong,                                        \
           (unsigned long long)(r).stats.disk_hits, (unsigned long long)(r).stats.disk_rejects,    \
           (unsigned long long)(r).stats.source_builds)

static void test_opencl(void)
{
    int n = 0;
    if (xattn_device_count(XATTN_BACKEND_OPENCL, &n) != XATTN_STATUS_OK || n < 1) {
        SKIP("OpenCL program cache (no OpenCL device)");
        return;
    }
    uint32_t s = 7;
    float *all[3] = {g_q, g_k, g_v};
    size_t lens[3] = {SQ * H * D, SK * H * D, SK * H * D};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < lens[t]; i++) {
            s = s * 1664525u + 1013904223u;
            all[t][i] = (float)((double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0);
        }
    xattn_ctx *cpu = NULL;
    setenv("XATTN_CACHE_DIR", "", 1);
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu) != XATTN_STATUS_OK ||
        run_on(cpu, g_ref, 0, NULL) != XATTN_STATUS_OK) {
        EXPECT(0, "CPU reference run: %s", xattn_last_error());
        xattn_ctx_destroy(cpu);
        return;
    }
    xattn_ctx_destroy(cpu);

    /* A first context stores the binary; its file is the target of the attacks. */
    char dir[512], sub[600], bin[900], name[256] = "";
    fresh_dir(dir, sizeof dir, "cl");
    snprintf(sub, sizeof sub, "%s/opencl", dir);
    clrun r = cl_run(dir, "on", 0, "first OpenCL call (source build, stored)");
    EXPECT(r.st == XATTN_STATUS_OK && r.stats.disk_writes == 1, "stored: %s", r.error);
    DIR *dd = opendir(sub);
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (strstr(e->d_name, ".clbin"))
            snprintf(name, sizeof name, "%s", e->d_name);
    if (dd)
        closedir(dd);
    snprintf(bin, sizeof bin, "%s/%s", sub, name);
    EXPECT(name[0] && (mode_of(sub) & 07777) == 0700 && (mode_of(bin) & 07777) == 0600,
           "folder %04o, file %04o", (unsigned)(mode_of(sub) & 07777),
           (unsigned)(mode_of(bin) & 07777));
    size_t elen = 0;
    char *entry = name[0] ? read_file(bin, &elen) : NULL;
    if (!entry) {
        EXPECT(0, "no program-cache file in %s", sub);
        return;
    }
    r = cl_run(dir, "auto", 0, "OpenCL call with the stored binary");
    EXPECT_RUN(r, 1, 0, "a valid entry is loaded");
    EXPECT(r.peak_over >= elen, "the file's %zu bytes are counted: the call's peak is %llu over",
           elen, (unsigned long long)r.peak_over);

    /* The context's memory limit applies to the file. */
    warnings_reset();
    r = cl_run(dir, "auto", elen / 2, "OpenCL call with a memory limit under the file's size");
    EXPECT_RUN(r, 0, 1, "limit");
    EXPECT(warned("memory limit"), "warning: %s", g_warnings);

    /* FIFO */
    unlink(bin);
    EXPECT(mkfifo(bin, 0600) == 0, "mkfifo");
    warnings_reset();
    r = cl_run(dir, "auto", 0, "first OpenCL call with a FIFO as the program-cache file");
    EXPECT_RUN(r, 0, 1, "FIFO");
    EXPECT(warned("FIFO"), "warning: %s", g_warnings);

    /* 1000 MiB, sparse: refused by its size, not read. */
    unlink(bin);
    EXPECT(write_file(bin, entry, elen, 0600) == 0 && truncate(bin, (off_t)1000 << 20) == 0,
           "sparse file");
    long rss0 = maxrss_kib();
    warnings_reset();
    r = cl_run(dir, "auto", 0, "OpenCL call with a 1000 MiB program-cache file");
    EXPECT_RUN(r, 0, 1, "oversized");
    EXPECT(warned("1048576000 bytes, more than"), "warning: %s", g_warnings);
    EXPECT(maxrss_kib() - rss0 < (256 << 10), "not read: max RSS grew %ld KiB",
           maxrss_kib() - rss0);

    /* A link to a valid entry is not read through; writes replace the link
     * and never follow a link planted at the old temporary name. */
    char victim[700], victim2[700], old_tmp[1000];
    snprintf(victim, sizeof victim, "%s/cl-victim-valid", g_scratch);
    snprintf(victim2, sizeof victim2, "%s/cl-victim-precious", g_scratch);
    const char *precious = "precious: not a program\n";
    EXPECT(write_file(victim, entry, elen, 0600) == 0, "victim");
    EXPECT(write_file(victim2, precious, strlen(precious), 0600) == 0, "victim2");
    unlink(bin);
    EXPECT(symlink(victim, bin) == 0, "symlink");
    snprintf(old_tmp, sizeof old_tmp, "%s.tmp%ld", bin, (long)getpid());
    EXPECT(symlink(victim2, old_tmp) == 0, "symlink");
    warnings_reset();
    r = cl_run(dir, "on", 0, "OpenCL call over planted links");
    EXPECT_RUN(r, 0, 1, "linked entry");
    EXPECT(warned("symbolic link"), "warning: %s", g_warnings);
    size_t vlen = 0;
    char *v = read_file(victim, &vlen);
    EXPECT(v && vlen == elen && !memcmp(v, entry, elen), "the linked file is intact");
    free(v);
    EXPECT(file_is(victim2, precious), "the file behind the planted temporary link is intact");
    EXPECT(S_ISREG(mode_of(bin)) && r.stats.disk_writes == 1, "the link was replaced by a file");
    unlink(old_tmp);

    /* The opencl folder writable by the group, then owned by another user. */
    EXPECT(write_file(bin, entry, elen, 0600) == 0, "restore");
    EXPECT(chmod(sub, 0770) == 0, "chmod");
    warnings_reset();
    r = cl_run(dir, "auto", 0, "OpenCL call with a group-writable cache folder");
    EXPECT_RUN(r, 0, 1, "group-writable folder");
    EXPECT(warned("writable by its group"), "warning: %s", g_warnings);
    EXPECT(chmod(sub, 0700) == 0, "chmod");
    if (give_away(sub) == 0) {
        warnings_reset();
        r = cl_run(dir, "auto", 0, "OpenCL call with a foreign cache folder");
        EXPECT_RUN(r, 0, 1, "foreign folder");
        EXPECT(warned("owned by uid 65534"), "warning: %s", g_warnings);
    } else {
        SKIP("OpenCL cache folder owned by another user (needs root to chown)");
    }
    free(entry);
    unsetenv("XATTN_CL_BINARY_CACHE");
}
#endif

int main(void)
{
    xattn_test_scratch_dir("test-cache", g_scratch, sizeof g_scratch);
    if (!g_scratch[0]) {
        printf("cannot create a scratch folder\n0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    signal(SIGALRM, on_alarm);
    setvbuf(stdout, NULL, _IONBF, 0);
    setenv("XATTN_CEILINGS_QUICK", "1", 1);
    xattn_set_log_callback(on_log, NULL, XATTN_LOG_WARN);
    printf("running as uid %lu\n", (unsigned long)geteuid());

    test_creation();
    if (g_entry) {
        test_fifo();
        test_symlink();
        test_size();
        test_owner();
    }
    test_file_module();
    test_prog_entry();
#ifdef XATTN_TEST_HAVE_OPENCL
    test_opencl();
#else
    SKIP("OpenCL program cache (not built)");
#endif
    free(g_entry);
    xattn_test_rm_tree(g_scratch);
    return xattn_test_summary();
}
