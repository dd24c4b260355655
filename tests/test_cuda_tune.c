/*
 * test_cuda_tune: the CUDA backend's run-time configuration and the stored
 * winners of `xattn tune --backend cuda` (backends/xattn_cuda_tune.c), on any
 * machine: the module has no CUDA dependency, and the device's identity
 * (name, compute capability, driver) is given here as a context would give it.
 *
 *   waves     the split count a number of waves asks for (the default 2 is the
 *             kernels' own rule);
 *   parse     XATTN_CUDA_CONFIG's form: keys, values, defaults kept, every
 *             bad item refused with a message naming it; format parses back;
 *   env       XATTN_CUDA_CONFIG set: used for every case, over any winner;
 *             a bad value makes the setup fail naming the variable;
 *   store     a winner is written under <cache>/cuda, read back, used by a
 *             new context's state of the same device (tuned = 1), and by the
 *             storing one from its next lookup on; not used for another case;
 *   stale     the same device with another driver or compute capability does
 *             not find it; an entry of another case copied over the file is
 *             ignored with a warning;
 *   corrupt   garbage, a truncated file, a bad config line: ignored with a
 *             warning, the default used, never an error;
 *   no cache  XATTN_CACHE_DIR="": store says IO, lookups find nothing.
 *
 * Exit: 0 pass, 1 fail. Last line "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_cuda_tune.h"
#include "xattn_test.h"

static int g_warnings;
static char g_last_warning[1024];

static void on_log(xattn_log_level level, const char *message, void *user)
{
    (void)user;
    if (level == XATTN_LOG_WARN) {
        g_warnings++;
        snprintf(g_last_warning, sizeof g_last_warning, "%s", message);
    }
}

static void test_parse(void)
{
    xattn__cuda_cfg c = xattn__cuda_cfg_default();
    EXPECT(c.simt == 0 && c.waves == 2, "default %d %d", c.simt, c.waves);
    EXPECT_OK(xattn__cuda_cfg_parse("path=simt", "X", &c));
    EXPECT(c.simt == 1 && c.waves == 2, "path=simt: %d %d", c.simt, c.waves);
    EXPECT_OK(xattn__cuda_cfg_parse("waves=8,path=auto", "X", &c));
    EXPECT(c.simt == 0 && c.waves == 8, "waves=8,path=auto: %d %d", c.simt, c.waves);
    char text[128];
    xattn__cuda_cfg_format(&c, text, sizeof text);
    EXPECT(!strcmp(text, "path=auto,waves=8"), "format: %s", text);
    xattn__cuda_cfg back = xattn__cuda_cfg_default();
    EXPECT_OK(xattn__cuda_cfg_parse(text, "X", &back));
    EXPECT(back.simt == c.simt && back.waves == c.waves, "format does not parse back");
    static const struct {
        const char *text, *needle;
    } bad[] = {{"", "empty"},
               {"path=mma4", "path=mma4"},
               {"waves=0", "waves=0"},
               {"waves=65", "waves=65"},
               {"waves=2x", "waves=2x"},
               {"tile=3", "unknown key 'tile'"},
               {"path", "not key=value"},
               {"path=simt,", "trailing comma"},
               {",path=simt", "empty"},
               {"path=simt,,waves=2", "empty"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        xattn__cuda_cfg k = xattn__cuda_cfg_default();
        xattn_status st = xattn__cuda_cfg_parse(bad[i].text, "XATTN_CUDA_CONFIG", &k);
        EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), bad[i].needle) &&
                   strstr(xattn_last_error(), "XATTN_CUDA_CONFIG"),
               "'%s': %s: %s", bad[i].text, xattn_status_name(st), xattn_last_error());
        EXPECT(k.simt == 0 && k.waves == 2, "'%s' changed the configuration", bad[i].text);
    }
}

/* The split rule under waves: the kernels' default (2 waves) as it was, and
 * other waves, e.g. 132 SMs, 8 decode blocks (B 8 x 8 KV heads / 8 = 8). */
static void test_waves(void)
{
    EXPECT(xattn__cuda_waves_splits(8, 132, 2) == 33, "8 blocks, 132 SMs, 2 waves: %d",
           xattn__cuda_waves_splits(8, 132, 2));
    EXPECT(xattn__cuda_waves_splits(8, 132, 1) == 17, "1 wave: %d",
           xattn__cuda_waves_splits(8, 132, 1));
    EXPECT(xattn__cuda_waves_splits(8, 132, 16) == 264, "16 waves: %d",
           xattn__cuda_waves_splits(8, 132, 16));
    EXPECT(xattn__cuda_waves_splits(264, 132, 2) == 1, "enough blocks: %d",
           xattn__cuda_waves_splits(264, 132, 2));
    EXPECT(xattn__cuda_waves_splits(1000, 132, 2) == 1, "more than enough: %d",
           xattn__cuda_waves_splits(1000, 132, 2));
    EXPECT(xattn__cuda_waves_splits(0, 0, 0) == 1, "degenerate: %d",
           xattn__cuda_waves_splits(0, 0, 0));
    EXPECT(xattn__cuda_waves_splits(1, 1 << 30, 64) == 1 << 20, "bounded: %d",
           xattn__cuda_waves_splits(1, 1 << 30, 64));
}

static int count_entries(const char *root)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cuda", root);
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += !strncmp(e->d_name, "tune-", 5);
    closedir(d);
    return n;
}

/* The one entry file of the cache, into path. */
static int entry_path(const char *root, char *path, size_t n)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cuda", root);
    DIR *d = opendir(dir);
    int found = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "tune-", 5)) {
            snprintf(path, n, "%s/%s", dir, e->d_name);
            found = 1;
        }
    closedir(d);
    return found;
}

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, len, f);
        fclose(f);
    }
}

static size_t read_file(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t len = f ? fread(out, 1, n - 1, f) : 0;
    if (f)
        fclose(f);
    out[len] = '\0';
    return len;
}

#define DEV "NVIDIA Test GPU"

static void test_store_lookup(const char *root)
{
    setenv("XATTN_CACHE_DIR", root, 1);
    unsetenv("XATTN_CUDA_CONFIG");
    xattn__cuda_tune t;
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 90, 12080));
    int tuned = -1;
    xattn__cuda_cfg c =
        xattn__cuda_tune_cfg(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 128, 128, &tuned);
    EXPECT(tuned == 0 && c.simt == 0 && c.waves == 2, "nothing stored: tuned %d, %d %d", tuned,
           c.simt, c.waves);
    /* Store: refused arguments first. */
    xattn__cuda_cfg w = {1, 8};
    EXPECT(xattn__cuda_tune_store(&t, XATTN_ALGO_NAIVE, XATTN_DTYPE_F16, 128, 128, &w) ==
               XATTN_STATUS_INVALID_ARGUMENT,
           "naive stored: %s", xattn_last_error());
    EXPECT(xattn__cuda_tune_store(&t, XATTN_ALGO_FLASH, 7, 128, 128, &w) ==
               XATTN_STATUS_INVALID_DTYPE,
           "dtype 7 stored: %s", xattn_last_error());
    EXPECT(xattn__cuda_tune_store(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 0, 128, &w) ==
               XATTN_STATUS_INVALID_SHAPE,
           "D 0 stored: %s", xattn_last_error());
    EXPECT(count_entries(root) == 0, "a refused store wrote a file");
    EXPECT_OK(xattn__cuda_tune_store(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 128, &w));
    EXPECT(count_entries(root) == 1, "entries after store: %d", count_entries(root));
    /* The storing state uses it from its next lookup on (the memo had no entry
     * for splitkv yet, so this reads the file). */
    c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 128, &tuned);
    EXPECT(tuned == 1 && c.simt == 1 && c.waves == 8, "after store: tuned %d, %d %d", tuned, c.simt,
           c.waves);
    /* A memo entry that said "none" is updated by a store. */
    xattn__cuda_cfg w2 = {1, 2};
    EXPECT_OK(xattn__cuda_tune_store(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 128, 128, &w2));
    c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 128, 128, &tuned);
    EXPECT(tuned == 1 && c.simt == 1, "memo not updated by store: tuned %d", tuned);
    xattn__cuda_tune_free(&t);

    /* A new context of the same device finds both; other cases do not. */
    g_warnings = 0;
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 90, 12080));
    c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 128, &tuned);
    EXPECT(tuned == 1 && c.simt == 1 && c.waves == 8, "new state: tuned %d, %d %d", tuned, c.simt,
           c.waves);
    static const struct {
        int algo, dtype;
        int64_t d, dv;
    } other[] = {{XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 128, 128},
                 {XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 64, 64},
                 {XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 64},
                 {XATTN_ALGO_NAIVE, XATTN_DTYPE_F16, 128, 128}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        c = xattn__cuda_tune_cfg(&t, other[i].algo, other[i].dtype, other[i].d, other[i].dv,
                                 &tuned);
        EXPECT(tuned == 0 && c.simt == 0 && c.waves == 2, "case %zu found another's winner", i);
    }
    EXPECT(g_warnings == 0, "warnings for absent entries: %s", g_last_warning);
    xattn__cuda_tune_free(&t);

    /* Another driver, compute capability or device name: not found. */
    static const struct {
        const char *name;
        int cc, drv;
    } ids[] = {{DEV, 90, 12090}, {DEV, 80, 12080}, {"NVIDIA Other", 90, 12080}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        EXPECT_OK(xattn__cuda_tune_init(&t, NULL, ids[i].name, ids[i].cc, ids[i].drv));
        c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 128, &tuned);
        EXPECT(tuned == 0 && c.simt == 0, "identity %zu found the winner of another", i);
        xattn__cuda_tune_free(&t);
    }

    /* XATTN_CUDA_CONFIG overrides every winner; a bad one fails the setup. */
    setenv("XATTN_CUDA_CONFIG", "waves=3", 1);
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 90, 12080));
    c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_F16, 128, 128, &tuned);
    EXPECT(tuned == 0 && c.simt == 0 && c.waves == 3, "env: tuned %d, %d %d", tuned, c.simt,
           c.waves);
    xattn__cuda_tune_free(&t);
    setenv("XATTN_CUDA_CONFIG", "path=tensor", 1);
    xattn_status st = xattn__cuda_tune_init(&t, NULL, DEV, 90, 12080);
    EXPECT(st == XATTN_STATUS_INVALID_ARGUMENT && strstr(xattn_last_error(), "XATTN_CUDA_CONFIG"),
           "bad env: %s: %s", xattn_status_name(st), xattn_last_error());
    xattn__cuda_tune_free(&t);
    unsetenv("XATTN_CUDA_CONFIG");
}

static void test_corrupt(const char *root)
{
    setenv("XATTN_CACHE_DIR", root, 1);
    xattn__cuda_tune t;
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 86, 12080));
    xattn__cuda_cfg w = {0, 16};
    EXPECT_OK(xattn__cuda_tune_store(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &w));
    xattn__cuda_tune_free(&t);
    char path[1024], good[4096];
    if (!entry_path(root, path, sizeof path)) {
        EXPECT(0, "no entry written in %s/cuda", root);
        return;
    }
    const size_t len = read_file(path, good, sizeof good);
    EXPECT(strstr(good, "cc=86\n") && strstr(good, "config=path=auto,waves=16\n"),
           "entry text:\n%s", good);
    /* The good entry is used. */
    int tuned = 0;
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 86, 12080));
    xattn__cuda_cfg c =
        xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &tuned);
    EXPECT(tuned == 1 && c.waves == 16, "good entry: tuned %d waves %d", tuned, c.waves);
    xattn__cuda_tune_free(&t);

    char stale[4096];
    snprintf(stale, sizeof stale, "%s", good);
    char *dl = strstr(stale, "head_dim=64\n");
    if (dl)
        memcpy(dl, "head_dim=32\n", 12); /* another case's entry under this name */
    char badcfg[4096];
    snprintf(badcfg, sizeof badcfg, "%s", good);
    char *cl = strstr(badcfg, "config=");
    if (cl)
        snprintf(cl, sizeof badcfg - (size_t)(cl - badcfg), "config=path=warp\n");
    char twolines[4200];
    snprintf(twolines, sizeof twolines, "%swaves=2\n", good);
    const struct {
        const char *text;
        size_t len;
        const char *why;
    } cases[] = {{"garbage\n", 8, "corrupt"},
                 {good, len / 2, "corrupt"},
                 {good, len - 1, "corrupt"}, /* the last newline cut */
                 {stale, strlen(stale), "stale"},
                 {badcfg, strlen(badcfg), "path=warp"},
                 {twolines, strlen(twolines), "one line"},
                 {"", 0, "corrupt"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text, cases[i].len);
        g_warnings = 0;
        g_last_warning[0] = '\0';
        xattn__set_error_text("kept");
        EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 86, 12080));
        c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &tuned);
        EXPECT(tuned == 0 && c.simt == 0 && c.waves == 2, "case %zu used: tuned %d waves %d", i,
               tuned, c.waves);
        EXPECT(g_warnings == 1 && strstr(g_last_warning, "ignored") &&
                   strstr(g_last_warning, cases[i].why),
               "case %zu: %d warnings, last: %s", i, g_warnings, g_last_warning);
        /* Read once a context: the second lookup warns no more. */
        c = xattn__cuda_tune_cfg(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &tuned);
        EXPECT(g_warnings == 1, "case %zu: read twice", i);
        xattn__cuda_tune_free(&t);
    }
    /* A store replaces a corrupt entry. */
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 86, 12080));
    EXPECT_OK(xattn__cuda_tune_store(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &w));
    EXPECT(xattn__cuda_tune_read(&t, XATTN_ALGO_SPLITKV, XATTN_DTYPE_BF16, 64, 64, &c) == 1 &&
               c.waves == 16,
           "entry not replaced");
    xattn__cuda_tune_free(&t);
}

static void test_no_cache(void)
{
    setenv("XATTN_CACHE_DIR", "", 1);
    xattn__cuda_tune t;
    EXPECT_OK(xattn__cuda_tune_init(&t, NULL, DEV, 90, 12080));
    xattn__cuda_cfg w = {1, 4};
    xattn_status st = xattn__cuda_tune_store(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 64, 64, &w);
    EXPECT(st == XATTN_STATUS_IO && strstr(xattn_last_error(), "cache folder"), "%s: %s",
           xattn_status_name(st), xattn_last_error());
    int tuned = 1;
    (void)xattn__cuda_tune_cfg(&t, XATTN_ALGO_FLASH, XATTN_DTYPE_F16, 64, 64, &tuned);
    EXPECT(tuned == 0, "found without a cache");
    xattn__cuda_tune_free(&t);
}

int main(void)
{
    xattn_set_log_callback(on_log, NULL, XATTN_LOG_WARN);
    char root[512];
    xattn_test_scratch_dir("cudatune", root, sizeof root);
    if (!root[0]) {
        SKIP("no scratch folder");
        return xattn_test_summary();
    }
    test_parse();
    test_waves();
    test_store_lookup(root);
    char root2[600];
    snprintf(root2, sizeof root2, "%s/other", root);
    test_corrupt(root2);
    test_no_cache();
    xattn_test_rm_tree(root);
    return xattn_test_summary();
}
