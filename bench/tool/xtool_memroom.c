/* What the process can still allocate, and whether a case's parts fit it
 * (xtool.h). */
#include <stdio.h>
#include <string.h>

#include "xtool.h"

void xtool_mem_room_read(xattn_ctx *ctx, const xtool_target *t, xtool_mem_room *r)
{
    memset(r, 0, sizeof *r);
    uint64_t total = 0, avail = 0;
    if (xattn_ctx_device_memory(ctx, &total, &avail) == XATTN_STATUS_OK) {
        r->device = (double)avail;
        r->device_total = (double)total;
    }
    r->same = t->info.device_type == XATTN_DEVICE_TYPE_CPU;
    if (r->same) {
        r->host = r->device;
        return;
    }
    /* The host's figure through a CPU context, made once: bench reads it before
     * every case and cell of a GPU (the tool is single-threaded). */
    static xattn_ctx *cpu;
    static int tried;
    if (!tried) {
        tried = 1;
        if (xattn_ctx_create(XATTN_BACKEND_CPU, 0, &cpu) != XATTN_STATUS_OK)
            cpu = NULL;
    }
    if (cpu && xattn_ctx_device_memory(cpu, NULL, &avail) == XATTN_STATUS_OK)
        r->host = (double)avail;
}

int xtool_mem_fits(const xtool_mem_room *r, double device_bytes, double host_bytes,
                   const char *what, char *msg, size_t n)
{
    char need[32], have[32];
    if (r->same) {
        double all = device_bytes + host_bytes;
        if (r->host <= 0 || all <= r->host)
            return 0;
        xtool_fmt_bytes(all, need, sizeof need);
        xtool_fmt_bytes(r->host, have, sizeof have);
        snprintf(msg, n, "needs %s for %s, %s available", need, what, have);
        return -1;
    }
    if (r->device > 0 && device_bytes > r->device) {
        xtool_fmt_bytes(device_bytes, need, sizeof need);
        xtool_fmt_bytes(r->device, have, sizeof have);
        snprintf(msg, n, "needs %s of device memory for %s, %s available", need, what, have);
        return -1;
    }
    if (r->host > 0 && host_bytes > r->host) {
        xtool_fmt_bytes(host_bytes, need, sizeof need);
        xtool_fmt_bytes(r->host, have, sizeof have);
        snprintf(msg, n, "needs %s of host memory for %s, %s available", need, what, have);
        return -1;
    }
    return 0;
}
