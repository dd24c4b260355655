/* xattn devices [--measure [--force]]: backends, devices, their description
 * and measured ceilings. */
#include <stdio.h>

#include "xtool.h"

static void xtool__print_bytes(const char *label, uint64_t b)
{
    if (!b)
        return;
    char s[32];
    xtool_fmt_bytes((double)b, s, sizeof s);
    printf("    %-14s %s\n", label, s);
}

/* The device's ceilings: from the on-disk cache, or measured (and cached). */
static int xtool__print_ceilings(xattn_backend be, int index, int force)
{
    xattn_ctx *ctx = NULL;
    xattn_ceilings c;
    xattn_status st = xattn_ctx_create(be, index, &ctx);
    if (st == XATTN_STATUS_OK) {
        printf("    %-14s %s\n", "ceilings", force ? "measuring..." : "looking up / measuring...");
        fflush(stdout);
        st = xattn_ceilings_measure(ctx, force, &c);
    }
    if (st != XATTN_STATUS_OK) {
        printf("    %-14s not measured: %s\n", "ceilings", xattn_last_error());
        xattn_ctx_destroy(ctx);
        return st == XATTN_STATUS_UNSUPPORTED ? 0 : XTOOL_EXIT_FAIL;
    }
    printf("    %-14s %.1f GFLOP/s", "fma f32", c.fma_f32_gflops);
    if (c.fma_f16_gflops > 0)
        printf(", f16 %.1f", c.fma_f16_gflops);
    if (c.fma_bf16_gflops > 0)
        printf(", bf16 %.1f", c.fma_bf16_gflops);
    if (c.mma_f16_gflops > 0 || c.mma_bf16_gflops > 0)
        printf("\n    %-14s f16 %.1f GFLOP/s, bf16 %.1f (dense products, f32 accumulation)",
               "matrix units", c.mma_f16_gflops, c.mma_bf16_gflops);
    printf("\n    %-14s read %.1f GB/s, copy %.1f GB/s\n", "bandwidth", c.read_gbps, c.copy_gbps);
    printf("    %-14s %.1f FLOP/byte (f32 FMA ceiling / read bandwidth)\n", "ridge point",
           c.read_gbps > 0 ? c.fma_f32_gflops / c.read_gbps : 0.0);
    if (c.from_cache)
        printf("    %-14s from the cache: %s\n", "source", c.cache_path);
    else if (c.cache_path[0])
        printf("    %-14s measured now; cached in %s\n", "source", c.cache_path);
    else
        printf("    %-14s measured now; not cached (no cache folder: set XATTN_CACHE_DIR)\n",
               "source");
    if (c.load_others >= 0)
        printf("    %-14s %.0f%% of the CPUs busy with other work while measured%s\n", "load",
               100 * c.load_others,
               c.under_load ? ": measured under load, likely low (measured again next time)" : "");
    xattn_ctx_destroy(ctx);
    return 0;
}

int xtool_cmd_devices(const xtool_cli_opts *o)
{
    int rc = 0;
    printf("xattn %s\n", xattn_version_string());
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        if (!xattn_backend_compiled(be)) {
            printf("%-7s not compiled in\n", xattn_backend_name(be));
            continue;
        }
        if (xattn_backend_available(be) != XATTN_STATUS_OK) {
            printf("%-7s unavailable: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        int n = 0;
        xattn_device_count(be, &n);
        printf("%-7s %d device%s\n", xattn_backend_name(be), n, n == 1 ? "" : "s");
        for (int i = 0; i < n; i++) {
            xattn_device_info info;
            if (xattn_device_get_info(be, i, &info) != XATTN_STATUS_OK) {
                printf("  [%d] error: %s\n", i, xattn_last_error());
                rc = XTOOL_EXIT_FAIL;
                continue;
            }
            printf("  [%d] %s\n", i, info.name);
            if (info.vendor[0])
                printf("    %-14s %s\n", "vendor", info.vendor);
            if (info.platform[0])
                printf("    %-14s %s\n", "platform", info.platform);
            if (info.driver_version[0])
                printf("    %-14s %s\n", "driver", info.driver_version);
            printf("    %-14s %d\n", "compute units", info.compute_units);
            xtool__print_bytes("memory", info.global_mem_bytes);
            xtool__print_bytes("local memory", info.local_mem_bytes);
            xtool__print_bytes("cache", info.cache_bytes);
            if (info.cpu_features[0])
                printf("    %-14s %s\n", "simd", info.cpu_features);
            if (info.compute_capability)
                printf("    %-14s %d.%d\n", "compute cap.", info.compute_capability / 10,
                       info.compute_capability % 10);
            printf("    %-14s %s\n", "description", info.description);
            if (o->measure && xtool__print_ceilings(be, i, o->force))
                rc = XTOOL_EXIT_FAIL;
        }
    }
    return rc;
}
