/*
 * test_ceilings_load: device ceilings measured under load (docs/measurement.md,
 * "Ceilings"). The logic only: the load figure of each measurement is injected
 * through XATTN_CEILINGS_LOAD (and the quick micro-benchmarks run), so nothing
 * here depends on the machine's real load, its speed or its CPU model.
 *
 *   file      the cache file's load_others= line: written when known, read
 *             back bit for bit, absent in an older file (load unknown, entry
 *             still valid), and a value that is not a share 0..1 makes the
 *             file invalid (ignored and measured again, like any bad file);
 *   share     other processes' share of the CPU time from /proc/stat-style
 *             deltas: clamped to 0..1, unknown for a too-short interval;
 *   flag      a CPU device's ceilings measured with more than 10% of the CPUs
 *             busy with other work are flagged under_load, in the file and in
 *             a new context reading it; the next xattn_ceilings_measure
 *             (force 0) measures them again: kept when the new load is
 *             heavier, replaced otherwise; an entry that is not flagged (or an
 *             older one without a load) is trusted as before.
 *
 * Exit: 0 pass, 1 fail. Last line "N passed, N failed, N skipped".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattn_test.h"

#include "xattn_file.h"

static char g_scratch[512];
static char g_log[4096];

static void on_log(xattn_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)user;
    size_t k = strlen(g_log);
    snprintf(g_log + k, sizeof g_log - k, "%s\n", msg);
}

/* ---- the file ------------------------------------------------------------------- */

static const char *const k_key = "backend=cpu;device=test";

static void test_file(void)
{
    static const char *const base = "format=1\nkey=backend=cpu;device=test\n"
                                    "fma_f32_gflops=100\nfma_f16_gflops=0\nfma_bf16_gflops=0\n"
                                    "read_gbps=20\ncopy_gbps=15\n";
    xattn_ceilings c, back;
    /* An entry written before the load was recorded: valid, load unknown. */
    EXPECT(xattn__ceil_parse(base, strlen(base), k_key, &c), "an entry without load_others");
    EXPECT(c.load_others == -1 && !c.under_load, "load %g, under_load %d", c.load_others,
           c.under_load);
    char text[4096];
    size_t n = xattn__ceil_format(text, sizeof text, k_key, &c);
    EXPECT(n && !strstr(text, "load_others"), "an unknown load is not written: %s", text);

    /* A recorded load round-trips bit for bit. */
    c.load_others = 0.4242424242424242;
    n = xattn__ceil_format(text, sizeof text, k_key, &c);
    EXPECT(n && strstr(text, "\nload_others=0.4242"), "load written: %s", text);
    EXPECT(n && xattn__ceil_parse(text, n, k_key, &back) && back.load_others == c.load_others &&
               !back.under_load,
           "load read back: %.17g", back.load_others);

    /* A load that is not a share 0..1 makes the whole file invalid. */
    static const char *const bad[] = {"1.5", "-0.1", "nan", "inf", "", "0.3x", "1e309", "0x1p-1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char f[1024];
        snprintf(f, sizeof f, "%sload_others=%s\n", base, bad[i]);
        EXPECT(!xattn__ceil_parse(f, strlen(f), k_key, &back), "load_others=%s accepted", bad[i]);
    }
    static const char *const good[] = {"0", "1", "0.1", "1e-3"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char f[1024];
        snprintf(f, sizeof f, "%sload_others=%s\n", base, good[i]);
        EXPECT(xattn__ceil_parse(f, strlen(f), k_key, &back) &&
                   back.load_others == strtod(good[i], NULL),
               "load_others=%s refused", good[i]);
    }
}

/* ---- the share --------------------------------------------------------------------- */

static void test_share(void)
{
    /* 2 CPUs for 1 s: 2 CPU-seconds in all, 1.5 busy, 0.5 of them this process's. */
    EXPECT(xattn__ceil_load_share(1.5, 2.0, 0.5) == 0.5, "%g",
           xattn__ceil_load_share(1.5, 2.0, 0.5));
    EXPECT(xattn__ceil_load_share(2.0, 2.0, 2.0) == 0, "all of it ours");
    /* This process's clock and the kernel's ticks disagree a little: clamped. */
    EXPECT(xattn__ceil_load_share(1.9, 2.0, 2.0) == 0, "self above busy");
    EXPECT(xattn__ceil_load_share(2.5, 2.0, 0.0) == 1, "busy above total");
    EXPECT(xattn__ceil_load_share(0.1, 0.1, 0.0) == -1, "0.1 CPU-seconds is too short to tell");
    EXPECT(xattn__ceil_load_share(0.1, 0.0, 0.0) == -1, "no time at all");
    EXPECT(xattn__ceil_load_share(NAN, 2.0, 0.0) == -1, "NaN");
}

/* ---- flag and measure again ------------------------------------------------------- */

/* Measures on a new CPU context with the load `load` injected ("" leaves it
 * unset); the ceilings in *c, the library's messages in g_log. */
static xattn_status measure(const char *load, int force, xattn_ceilings *c)
{
    if (*load)
        setenv("XATTN_CEILINGS_LOAD", load, 1);
    else
        unsetenv("XATTN_CEILINGS_LOAD");
    g_log[0] = '\0';
    xattn_ctx *ctx = NULL;
    xattn_status st = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx);
    if (st == XATTN_STATUS_OK)
        st = xattn_ceilings_measure(ctx, force, c);
    xattn_ctx_destroy(ctx);
    unsetenv("XATTN_CEILINGS_LOAD");
    return st;
}

/* What a new context finds in the cache (get): 1 when it has ceilings. */
static int cached(xattn_ceilings *c)
{
    xattn_ctx *ctx = NULL;
    int ok = xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) == XATTN_STATUS_OK &&
             xattn_ceilings_get(ctx, c) == XATTN_STATUS_OK;
    xattn_ctx_destroy(ctx);
    return ok;
}

static void test_flag(void)
{
    xattn_ceilings a, b, c;
    /* Measured with 60% of the CPUs busy with other work: flagged, and so in the file. */
    EXPECT_OK(measure("0.6", 0, &a));
    EXPECT(!a.from_cache && a.under_load && a.load_others == 0.6 && a.cache_path[0],
           "first: from_cache %d, under_load %d, load %g", a.from_cache, a.under_load,
           a.load_others);
    EXPECT(cached(&b) && b.from_cache && b.under_load && b.load_others == 0.6,
           "a new context reads the flag: from_cache %d, under_load %d, load %g", b.from_cache,
           b.under_load, b.load_others);

    /* Measured again (force 0), under a heavier load still: the entry stays. */
    EXPECT_OK(measure("0.9", 0, &b));
    EXPECT(strstr(g_log, "measured again under a heavier load"),
           "a flagged entry is measured again; log: %s", g_log);
    EXPECT(b.from_cache && b.under_load && b.load_others == 0.6 &&
               b.fma_f32_gflops == a.fma_f32_gflops && b.read_gbps == a.read_gbps,
           "heavier load: the cached entry kept (from_cache %d, load %g)", b.from_cache,
           b.load_others);

    /* Measured again on a quieter machine: replaced, no longer flagged. */
    EXPECT_OK(measure("0.02", 0, &b));
    EXPECT(!b.from_cache && !b.under_load && b.load_others == 0.02,
           "quieter: from_cache %d, under_load %d, load %g", b.from_cache, b.under_load,
           b.load_others);
    /* ... and then trusted: not measured again, whatever the load now. */
    EXPECT_OK(measure("0.9", 0, &c));
    EXPECT(c.from_cache && !c.under_load && c.load_others == 0.02 &&
               c.fma_f32_gflops == b.fma_f32_gflops,
           "trusted: from_cache %d, load %g", c.from_cache, c.load_others);

    /* The threshold: above 10% flags, 10% does not. */
    EXPECT_OK(measure("0.1", 1, &c));
    EXPECT(!c.from_cache && !c.under_load, "10%%: under_load %d", c.under_load);
    EXPECT_OK(measure("0.11", 1, &c));
    EXPECT(!c.from_cache && c.under_load, "11%%: under_load %d", c.under_load);

    /* The quick mode records no load of its own; a bad override is ignored with a warning. */
    EXPECT_OK(measure("", 1, &c));
    EXPECT(c.load_others == -1 && !c.under_load, "quick, no override: load %g", c.load_others);
    EXPECT_OK(measure("busy", 1, &c));
    EXPECT(c.load_others == -1 && strstr(g_log, "XATTN_CEILINGS_LOAD=busy"),
           "bad override: load %g, log %s", c.load_others, g_log);

    /* An entry cached before the load was recorded: read, trusted, not measured again. */
    EXPECT_OK(measure("0.5", 1, &a));
    FILE *f = fopen(a.cache_path, "r");
    char text[4096] = "", kept[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "load_others=", 12))
            snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "%s\n", line);
    EXPECT(n && strlen(kept) < n, "the entry had a load line: %s", text);
    f = fopen(a.cache_path, "w");
    if (f) {
        fputs(kept, f);
        fclose(f);
    }
    EXPECT(cached(&b) && b.from_cache && b.load_others == -1 && !b.under_load &&
               b.fma_f32_gflops == a.fma_f32_gflops,
           "older entry: from_cache %d, load %g", b.from_cache, b.load_others);
    EXPECT_OK(measure("0.9", 0, &c));
    EXPECT(c.from_cache && c.load_others == -1, "older entry trusted: from_cache %d", c.from_cache);
}

int main(void)
{
    xattn_test_scratch_dir("test-ceil", g_scratch, sizeof g_scratch);
    if (!g_scratch[0]) {
        printf("cannot create a scratch folder\n0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    setenv("XATTN_CACHE_DIR", g_scratch, 1);
    setenv("XATTN_CEILINGS_QUICK", "1", 1);
    xattn_set_log_callback(on_log, NULL, XATTN_LOG_INFO);
    test_file();
    test_share();
    test_flag();
    xattn_test_rm_tree(g_scratch);
    return xattn_test_summary();
}
