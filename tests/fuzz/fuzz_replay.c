/*
 * fuzz_replay: runs the fuzz target's function (fuzz_desc.c) over files and
 * folders of inputs, without libFuzzer, so that every build (any compiler,
 * with or without sanitizers, under valgrind) replays the corpus that the
 * fuzzer found. An input that breaks an oracle aborts the process.
 *
 * Usage: fuzz_replay FILE|DIR...
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return 0;
    }
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return 0;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "fuzz_replay: %s: no such file or folder\n", argv[i]);
            bad++;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            files += run_file(argv[i]);
            continue;
        }
        DIR *dir = opendir(argv[i]);
        if (!dir) {
            bad++;
            continue;
        }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char **nb = realloc(names, (nn + 1) * sizeof *names);
            if (!nb)
                break;
            names = nb;
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[nn] = malloc(len);
            snprintf(names[nn], len, "%s/%s", argv[i], e->d_name);
            nn++;
        }
        closedir(dir);
        qsort(names, nn, sizeof *names, cmp_str); /* the same order everywhere */
        for (size_t k = 0; k < nn; k++) {
            struct stat fs;
            if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode))
                files += run_file(names[k]);
            free(names[k]);
        }
        free(names);
    }
    printf("fuzz_replay: %d inputs replayed, every oracle held\n", files);
    printf("%d passed, %d failed, 0 skipped\n", files, bad);
    return bad || files == 0 ? 1 : 0;
}
