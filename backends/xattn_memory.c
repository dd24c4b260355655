/* The tracking allocator: every byte the library allocates for a context is
 * accounted here (buffers, workspaces, backend scratch), so that a context's
 * current and peak figures are complete and a memory limit can be enforced. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <sys/resource.h>

#include "xattn_internal.h"

xattn_status xattn__mem_acquire(struct xattn_ctx *ctx, uint64_t bytes, const char *what)
{
    uint64_t cur = atomic_load(&ctx->mem_current);
    for (;;) {
        uint64_t next;
        if (xattn__add_overflow(cur, bytes, &next))
            return xattn__error(XATTN_STATUS_SIZE_OVERFLOW,
                                "%s: %llu bytes overflow the context's byte count", what,
                                (unsigned long long)bytes);
        if (ctx->mem_limit && next > ctx->mem_limit)
            return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                                "%s: %llu bytes would exceed the context's memory limit "
                                "(XATTN_OPT_MEMORY_LIMIT = %llu, %llu in use)",
                                what, (unsigned long long)bytes, (unsigned long long)ctx->mem_limit,
                                (unsigned long long)cur);
        if (atomic_compare_exchange_weak(&ctx->mem_current, &cur, next)) {
            uint64_t peak = atomic_load(&ctx->mem_peak);
            while (next > peak && !atomic_compare_exchange_weak(&ctx->mem_peak, &peak, next)) {
            }
            atomic_fetch_add(&ctx->alloc_count, 1);
            return XATTN_STATUS_OK;
        }
    }
}

void xattn__mem_release(struct xattn_ctx *ctx, uint64_t bytes)
{
    atomic_fetch_sub(&ctx->mem_current, bytes);
}

/* Host allocations account at least one byte (one exists even for a size of
 * 0), and xattn__host_free releases by the same rule, so that a caller that
 * asks for max(n, 1) bytes and frees n is still balanced when n is 0. */
void *xattn__aligned_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < 2 * huge)
        return aligned_alloc(64, bytes);
    const size_t rounded = (bytes + huge - 1) & ~(huge - 1);
    if (rounded < bytes)
        return NULL;
    void *p = aligned_alloc(huge, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p)
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

void *xattn__host_alloc(struct xattn_ctx *ctx, uint64_t bytes, const char *what,
                        xattn_status *status)
{
    if (bytes == 0)
        bytes = 1;
    xattn_status st = xattn__mem_acquire(ctx, bytes, what);
    if (st != XATTN_STATUS_OK) {
        *status = st;
        return NULL;
    }
    /* aligned_alloc wants a multiple of the alignment; round up, and never 0. */
    uint64_t rounded = (bytes + 63u) & ~(uint64_t)63u;
    if (rounded < bytes || rounded > (uint64_t)SIZE_MAX) {
        xattn__mem_release(ctx, bytes);
        *status = xattn__error(XATTN_STATUS_SIZE_OVERFLOW, "%s: %llu bytes do not fit in size_t",
                               what, (unsigned long long)bytes);
        return NULL;
    }
    void *p = xattn__aligned_alloc(rounded ? (size_t)rounded : 64);
    if (!p) {
        xattn__mem_release(ctx, bytes);
        *status = xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                               "%s: allocating %llu bytes of host memory failed", what,
                               (unsigned long long)bytes);
        return NULL;
    }
    *status = XATTN_STATUS_OK;
    return p;
}

void xattn__host_free(struct xattn_ctx *ctx, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    free(ptr);
    xattn__mem_release(ctx, bytes ? bytes : 1);
}

xattn_status xattn__ctx_enter(struct xattn_ctx *ctx)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&ctx->busy, &expected, 1))
        return xattn__error(XATTN_STATUS_BUSY,
                            "ctx: the context is in use by another thread; a context serves "
                            "one thread at a time (create one context per thread)");
    return XATTN_STATUS_OK;
}

void xattn__ctx_leave(struct xattn_ctx *ctx)
{
    atomic_store(&ctx->busy, 0);
}

/* ---- memory available to the process ------------------------------------- */

/* The first unsigned number in file root/path (a cgroup value); "max" reads
 * as UINT64_MAX. 0 when unreadable. */
static int xattn__read_u64(const char *root, const char *path, uint64_t *out)
{
    char full[2048];
    if (snprintf(full, sizeof full, "%s%s", root, path) >= (int)sizeof full)
        return 0;
    FILE *f = fopen(full, "re");
    if (!f)
        return 0;
    char line[64];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    if (!strncmp(line, "max", 3)) {
        *out = UINT64_MAX;
        return 1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line, &end, 10);
    if (errno || end == line)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

/* root/proc/NAME opened for reading (root "" is the real /proc; tests give a
 * fake tree); NULL when it cannot be. */
static FILE *xattn__proc_open(const char *root, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/proc/%s", root, name);
    return fopen(path, "re");
}

/* Where the cgroup hierarchy holding `controller` ("" = the v2 unified one)
 * is mounted and which group is the mount's root, from
 * root/proc/self/mountinfo; 0 when it is not mounted. */
static int xattn__cgroup_mount(const char *root, const char *controller, char *mpoint, size_t n,
                               char *mroot, size_t nr)
{
    FILE *f = xattn__proc_open(root, "self/mountinfo");
    if (!f)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint options... - fstype source superoptions */
        char r[512], m[512], fstype[64], super[1024];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %511s %511s", r, m) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
            continue;
        if (controller[0] == '\0') {
            found = !strcmp(fstype, "cgroup2");
        } else if (!strcmp(fstype, "cgroup")) {
            char *save = NULL; /* super options: rw,memory[,...] */
            for (char *t = strtok_r(super, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
                found = !strcmp(t, controller);
        }
        if (found) {
            snprintf(mpoint, n, "%s", m);
            snprintf(mroot, nr, "%s", r);
        }
    }
    fclose(f);
    return found;
}

/* The process's group in the v1 memory hierarchy (v2 = 0) or the v2 one
 * (v2 = 1), from root/proc/self/cgroup; 0 when it has none. */
static int xattn__cgroup_group(const char *root, int v2, char *out, size_t n)
{
    FILE *f = xattn__proc_open(root, "self/cgroup");
    if (!f)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        char *ctrls = c1 + 1;
        if (v2) {
            found = !strcmp(line, "0") && ctrls[0] == '\0';
        } else {
            char *save = NULL;
            for (char *t = strtok_r(ctrls, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
                found = !strcmp(t, "memory");
        }
        if (found)
            snprintf(out, n, "%s", c2 + 1);
    }
    fclose(f);
    return found;
}

/* The tightest (limit - usage) over the process's memory cgroup and its
 * ancestors (each limit binds), in the v1 (memory.limit_in_bytes) and v2
 * (memory.max) hierarchies; UINT64_MAX when no limit is set or none can be
 * read. `root` prefixes every path ("" for the real files; tests point it at
 * a tree of their own). */
static uint64_t xattn__cgroup_room(const char *root)
{
    uint64_t room = UINT64_MAX;
    for (int v2 = 0; v2 < 2; v2++) {
        char group[1024], mount[512], mroot[512], dir[1600];
        if (!xattn__cgroup_group(root, v2, group, sizeof group) ||
            !xattn__cgroup_mount(root, v2 ? "" : "memory", mount, sizeof mount, mroot,
                                 sizeof mroot))
            continue;
        /* A mount of a sub-group (containers) shows the group's path below it. */
        const char *rel = group;
        const size_t rl = strlen(mroot);
        if (rl > 1 && !strncmp(group, mroot, rl) && (group[rl] == '/' || group[rl] == '\0'))
            rel = group + rl;
        const size_t ml = strlen(mount);
        snprintf(dir, sizeof dir, "%s%s", mount, rel);
        for (;;) { /* the group, then each ancestor up to the mount */
            size_t len = strlen(dir);
            while (len > ml && dir[len - 1] == '/')
                dir[--len] = '\0';
            char lp[1700], up[1700];
            snprintf(lp, sizeof lp, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
            snprintf(up, sizeof up, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
            uint64_t lim, use;
            /* v1 writes "no limit" as a huge page-rounded number, v2 as "max". */
            if (xattn__read_u64(root, lp, &lim) && lim < ((uint64_t)1 << 60) &&
                xattn__read_u64(root, up, &use)) {
                const uint64_t r = lim > use ? lim - use : 0;
                if (r < room)
                    room = r;
            }
            if (len <= ml)
                break;
            char *slash = strrchr(dir + ml, '/');
            if (!slash)
                break;
            *slash = '\0';
        }
    }
    return room;
}

int xattn__host_memory_at(const char *root, uint64_t *total, uint64_t *avail)
{
    *total = *avail = 0;
    FILE *f = xattn__proc_open(root, "meminfo");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
                *total = (uint64_t)kb * 1024u;
            else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
                *avail = (uint64_t)kb * 1024u;
        }
        fclose(f);
    }
#ifdef _SC_AVPHYS_PAGES
    if (root[0] == '\0' && (*total == 0 || *avail == 0)) {
        long pages = sysconf(_SC_PHYS_PAGES), apages = sysconf(_SC_AVPHYS_PAGES),
             psize = sysconf(_SC_PAGESIZE);
        if (*total == 0 && pages > 0 && psize > 0)
            *total = (uint64_t)pages * (uint64_t)psize;
        if (*avail == 0 && apages > 0 && psize > 0)
            *avail = (uint64_t)apages * (uint64_t)psize;
    }
#endif
    if (*total == 0 && *avail == 0)
        return 0;
    const uint64_t room = xattn__cgroup_room(root);
    if (room != UINT64_MAX && (room < *avail || *avail == 0))
        *avail = room;
    return 1;
}

/* The process's address-space limit (RLIMIT_AS, `ulimit -v`): 1 with the
 * limit, the bytes mapped now (/proc/self/statm) and what is left when the
 * limit is finite; 0 when there is none or nothing could be read. */
int xattn__addr_room(uint64_t *limit, uint64_t *mapped, uint64_t *room)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return 0;
    unsigned long long pages = 0;
    const int ok = fscanf(f, "%llu", &pages) == 1;
    fclose(f);
    const long psize = sysconf(_SC_PAGESIZE);
    if (!ok || psize <= 0)
        return 0;
    *limit = (uint64_t)rl.rlim_cur;
    *mapped = (uint64_t)pages * (uint64_t)psize;
    *room = *limit > *mapped ? *limit - *mapped : 0;
    return 1;
}

int xattn__host_memory(uint64_t *total, uint64_t *avail)
{
    int ok = xattn__host_memory_at("", total, avail);
    uint64_t limit, mapped, room;
    if (ok && xattn__addr_room(&limit, &mapped, &room) && (room < *avail || *avail == 0))
        *avail = room;
    return ok;
}

xattn_status xattn__host_room(uint64_t bytes, const char *what)
{
    /* Under an address-space limit an allocation beyond it fails, which the
     * CPU backend would report, but an OpenCL runtime on the host (PoCL) may
     * end the process instead: checked at every size (getrlimit alone when
     * there is no limit). The slack covers the 2 MiB rounding of large
     * allocations and the allocator's own mappings. */
    uint64_t limit, mapped, room;
    const uint64_t slack = (uint64_t)4 << 20;
    if (xattn__addr_room(&limit, &mapped, &room) && (bytes > room || room - bytes < slack))
        return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                            "%s: %llu MiB (%llu bytes), but this process's address-space limit "
                            "(RLIMIT_AS, ulimit -v) of %llu MiB leaves %llu MiB with %llu MiB "
                            "mapped (%llu MiB kept free for the allocator); raise the limit or "
                            "make the call smaller",
                            what, (unsigned long long)((bytes + (1u << 20) - 1) >> 20),
                            (unsigned long long)bytes, (unsigned long long)(limit >> 20),
                            (unsigned long long)(room >> 20), (unsigned long long)(mapped >> 20),
                            (unsigned long long)(slack >> 20));
    /* Small allocations cannot end a process alone; reading the files costs
     * tens of microseconds, nothing beside faulting in 32 MiB. */
    if (bytes < ((uint64_t)32 << 20))
        return XATTN_STATUS_OK;
    uint64_t total, avail;
    if (!xattn__host_memory_at("", &total, &avail) || avail == 0 || bytes <= avail)
        return XATTN_STATUS_OK;
    return xattn__error(XATTN_STATUS_OUT_OF_MEMORY,
                        "%s: %llu MiB, but only %llu MiB of memory are available to this "
                        "process (MemAvailable, within its cgroup's limit); the pages would be "
                        "touched, and the kernel would end the process instead of the "
                        "allocation failing",
                        what, (unsigned long long)(bytes >> 20), (unsigned long long)(avail >> 20));
}
