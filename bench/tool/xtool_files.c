/* Files: the check that an output can be written before any work, reading a
 * text file whole, a --lengths file, a folder (xtool.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xtool.h"

int xtool_out_probe(const char *flag, const char *path, int *created, char *err, size_t errlen)
{
    struct stat sb;
    int existed = stat(path, &sb) == 0;
    if (created)
        *created = 0;
    if (existed && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: '%s' is a folder, not a file", flag, path);
        return XTOOL_EXIT_USAGE;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot write '%s': %s", flag, path, strerror(errno));
        return XTOOL_EXIT_USAGE;
    }
    close(fd);
    if (created)
        *created = !existed;
    return 0;
}

int xtool_file_close(FILE *f, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

char *xtool_read_text(const char *path, size_t max_bytes, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) {
            if (ferror(f)) {
                snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
                free(buf);
                buf = NULL;
            }
            break;
        }
        if (cap >= max_bytes) {
            snprintf(err, errlen, "'%s' is larger than %zu bytes", path, max_bytes);
            free(buf);
            buf = NULL;
            break;
        }
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        if (!err[0])
            snprintf(err, errlen, "out of memory reading '%s'", path);
        return NULL;
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        snprintf(err, errlen, "'%s' is not a text file (it holds NUL bytes)", path);
        free(buf);
        return NULL;
    }
    return buf;
}

int xtool_lengths_load(const char *path, int64_t sq_fixed, int32_t **lq, int32_t **lk, int *n,
                       char *err, size_t errlen)
{
    enum { XTOOL__MAX_SEQS = 65536 };
    err[0] = '\0';
    *lq = *lk = NULL;
    char e2[256] = "";
    char *text = xtool_read_text(path, 8u << 20, e2, sizeof e2);
    if (!text) {
        snprintf(err, errlen, "--lengths: %s", e2);
        return XTOOL_EXIT_USAGE;
    }
    int32_t *q = malloc(XTOOL__MAX_SEQS * sizeof *q), *k = malloc(XTOOL__MAX_SEQS * sizeof *k);
    if (!q || !k) {
        free(text);
        free(q);
        free(k);
        snprintf(err, errlen, "--lengths: out of memory");
        return XTOOL_EXIT_FAIL;
    }
    int rc = xtool_cli_parse_lengths(text, q, k, XTOOL__MAX_SEQS, n, e2, sizeof e2);
    free(text);
    if (rc) {
        snprintf(err, errlen, "--lengths %s: %s", path, e2);
        free(q);
        free(k);
        return rc;
    }
    for (int i = 0; i < *n; i++) {
        if (q[i] < 0)
            q[i] = sq_fixed > 0 ? (int32_t)sq_fixed : k[i];
        else if (sq_fixed > 0 && q[i] > sq_fixed) {
            snprintf(err, errlen,
                     "--lengths %s: sequence %d has %d query tokens, more than --sq %lld", path,
                     i + 1, q[i], (long long)sq_fixed);
            free(q);
            free(k);
            return XTOOL_EXIT_USAGE;
        }
    }
    *lq = q;
    *lk = k;
    return 0;
}

int xtool_mkdir(const char *path)
{
    if (mkdir(path, 0777) == 0)
        return 0;
    if (errno == EEXIST) {
        struct stat s;
        if (stat(path, &s) == 0 && S_ISDIR(s.st_mode))
            return 0;
        errno = ENOTDIR;
    }
    return -1;
}
