/*
 * test_host_memory: what xattn_ctx_device_memory reports for the CPU, read
 * from fake /proc and /sys trees (xattn__host_memory_at), so that cgroup v1
 * and v2 limits, their ancestors, "max", a namespaced mount and missing files
 * are each checked without needing a cgroup of the machine's own; then the
 * public call on the real machine (available within total).
 *
 * The last line is "N passed, N failed, N skipped".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xattn.h"
#include "xattn_internal.h"
#include "xattn_test.h"

static char g_root[256];

/* Writes root/path (creating its folders) with `text`. */
static void put(const char *path, const char *text)
{
    char full[1024];
    snprintf(full, sizeof full, "%s%s", g_root, path);
    for (char *s = full + strlen(g_root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(full, 0700);
            *s = '/';
        }
    }
    FILE *f = fopen(full, "w");
    if (!f) {
        printf("FAIL cannot write %s\n", full);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void fresh_root(const char *name)
{
    snprintf(g_root, sizeof g_root, "%s/xattn-hostmem-%ld-%s",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), name);
    mkdir(g_root, 0700);
    put("/proc/meminfo", "MemTotal:       16384000 kB\nMemFree:  100 kB\n"
                         "MemAvailable:   8192000 kB\n");
}

static const char *MOUNTS_V1 =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n";
static const char *MOUNTS_V2 = "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";

int main(void)
{
    uint64_t t, a;
    const uint64_t KB = 1024, GB = 1024ull * 1024 * 1024;

    /* No cgroup files: MemAvailable. */
    fresh_root("plain");
    EXPECT(xattn__host_memory_at(g_root, &t, &a) == 1, "plain");
    EXPECT(t == 16384000 * KB && a == 8192000 * KB, "plain: total %llu avail %llu",
           (unsigned long long)t, (unsigned long long)a);

    /* cgroup v1: the group's limit binds (2 GiB, 0.5 GiB used). */
    fresh_root("v1");
    put("/proc/self/mountinfo", MOUNTS_V1);
    put("/proc/self/cgroup", "5:devices:/\n4:memory:/jobs/a1\n0::/\n");
    put("/sys/fs/cgroup/memory/jobs/a1/memory.limit_in_bytes", "2147483648\n");
    put("/sys/fs/cgroup/memory/jobs/a1/memory.usage_in_bytes", "536870912\n");
    put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("/sys/fs/cgroup/memory/memory.usage_in_bytes", "6000000000\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 2 * GB - GB / 2, "v1 limit: avail %llu", (unsigned long long)a);

    /* ... and an ancestor's tighter limit binds too. */
    put("/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "1073741824\n");
    put("/sys/fs/cgroup/memory/jobs/memory.usage_in_bytes", "805306368\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == GB / 4, "v1 ancestor: avail %llu", (unsigned long long)a);

    /* Usage at or above the limit: nothing is available. */
    put("/sys/fs/cgroup/memory/jobs/memory.usage_in_bytes", "1073741824\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 0, "v1 full: avail %llu", (unsigned long long)a);

    /* cgroup v2: memory.max, "max" meaning none; a limit above MemAvailable
     * does not raise it. */
    fresh_root("v2");
    put("/proc/self/mountinfo", MOUNTS_V2);
    put("/proc/self/cgroup", "0::/user.slice/job.scope\n");
    put("/sys/fs/cgroup/user.slice/job.scope/memory.max", "max\n");
    put("/sys/fs/cgroup/user.slice/job.scope/memory.current", "100\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 8192000 * KB, "v2 max: avail %llu", (unsigned long long)a);
    put("/sys/fs/cgroup/user.slice/memory.max", "3221225472\n");
    put("/sys/fs/cgroup/user.slice/memory.current", "1073741824\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 2 * GB, "v2 ancestor: avail %llu", (unsigned long long)a);
    put("/sys/fs/cgroup/user.slice/memory.max", "99999999999999\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 8192000 * KB, "v2 loose limit: avail %llu", (unsigned long long)a);

    /* A container's view: the mount's root is the group itself. */
    fresh_root("ns");
    put("/proc/self/mountinfo",
        "30 23 0:27 /docker/abc /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
    put("/proc/self/cgroup", "0::/docker/abc\n");
    put("/sys/fs/cgroup/memory.max", "1073741824\n");
    put("/sys/fs/cgroup/memory.current", "0\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == GB, "namespaced: avail %llu", (unsigned long long)a);

    /* Garbage in the files: ignored, never a crash. */
    put("/sys/fs/cgroup/memory.max", "lots\n");
    xattn__host_memory_at(g_root, &t, &a);
    EXPECT(a == 8192000 * KB, "garbage: avail %llu", (unsigned long long)a);

    /* Nothing readable at all. */
    snprintf(g_root, sizeof g_root, "/nonexistent-xattn-root");
    EXPECT(xattn__host_memory_at(g_root, &t, &a) == 0 && t == 0 && a == 0, "nothing");

    /* The public call on this machine. */
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &ctx) == XATTN_STATUS_OK) {
        uint64_t tt = 0, aa = 0;
        EXPECT(xattn_ctx_device_memory(ctx, &tt, &aa) == XATTN_STATUS_OK, "%s", xattn_last_error());
        EXPECT(tt > 0 && aa > 0 && aa <= tt, "cpu: total %llu available %llu",
               (unsigned long long)tt, (unsigned long long)aa);
        EXPECT(xattn_ctx_device_memory(ctx, NULL, NULL) == XATTN_STATUS_OK, "NULL outputs");
        xattn_ctx_destroy(ctx);
    } else {
        EXPECT(0, "cpu context: %s", xattn_last_error());
    }
    EXPECT(xattn_ctx_device_memory(NULL, &t, &a) == XATTN_STATUS_INVALID_ARGUMENT, "NULL ctx");

    return xattn_test_summary();
}
