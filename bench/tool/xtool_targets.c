/* The devices a command runs on, and a context on one of them with the
 * command line's CPU settings applied (xtool.h). */
#include <stdio.h>
#include <string.h>

#include "xtool.h"

void xtool_target_name(xattn_backend be, int device, char *out, size_t n)
{
    snprintf(out, n, "%s:%d", xattn_backend_name(be), device);
}

int xtool_targets_select(const xtool_cli_opts *o, xtool_target *out, int cap, FILE *notes)
{
    int count = 0;
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        int wanted = o->n_backends == 0;
        for (int i = 0; i < o->n_backends; i++)
            wanted |= o->backends[i] == be || o->backends[i] == XATTN_BACKEND_AUTO;
        if (!wanted)
            continue;
        if (xattn_backend_available(be) != XATTN_STATUS_OK) {
            if (notes)
                fprintf(notes, "%-7s skipped: %s\n", xattn_backend_name(be), xattn_last_error());
            continue;
        }
        int nd = 0;
        xattn_device_count(be, &nd);
        for (int d = 0; d < nd && count < cap; d++) {
            if (o->device >= 0 && d != o->device)
                continue;
            out[count].backend = be;
            out[count].device = d;
            memset(&out[count].info, 0, sizeof out[count].info);
            if (xattn_device_get_info(be, d, &out[count].info) != XATTN_STATUS_OK)
                snprintf(out[count].info.name, sizeof out[count].info.name, "?");
            count++;
        }
        if (o->device >= nd && notes)
            fprintf(notes, "%-7s skipped: no device %d (it has %d)\n", xattn_backend_name(be),
                    o->device, nd);
    }
    return count;
}

int xtool_targets_bad_device(const xtool_cli_opts *o, char *err, size_t errlen)
{
    if (o->device < 0)
        return 0;
    size_t k = 0;
    int any = 0;
    err[0] = '\0';
    for (int b = 0; b < XATTN_BACKEND_COUNT; b++) {
        xattn_backend be = (xattn_backend)b;
        int wanted = o->n_backends == 0;
        for (int i = 0; i < o->n_backends; i++)
            wanted |= o->backends[i] == be || o->backends[i] == XATTN_BACKEND_AUTO;
        int nd = 0;
        if (!wanted || xattn_backend_available(be) != XATTN_STATUS_OK ||
            xattn_device_count(be, &nd) != XATTN_STATUS_OK)
            continue;
        if (o->device < nd)
            return 0;
        if (k < errlen)
            k += (size_t)snprintf(err + k, errlen - k, "%s%s has %d", any ? ", " : "",
                                  xattn_backend_name(be), nd);
        any = 1;
    }
    if (!any)
        return 0;
    char list[256];
    snprintf(list, sizeof list, "%s", err);
    snprintf(err, errlen, "--device %d: no backend asked for has such a device (%s)", o->device,
             list);
    return 1;
}

/* More worker threads than the CPU has compute units run many times slower
 * (they share cores, and every OpenMP barrier waits for a descheduled one):
 * said once per process, not silently. */
static void xtool__warn_threads(const xtool_cli_opts *o, xattn_ctx *ctx)
{
    static int warned;
    xattn_device_info info;
    if (warned || xattn_ctx_device_info(ctx, &info) != XATTN_STATUS_OK || info.compute_units <= 0)
        return;
    int most = o->threads;
    for (int i = 0; i < o->thread_list.n; i++)
        if (o->thread_list.v[i] > most)
            most = (int)o->thread_list.v[i];
    if (most <= info.compute_units)
        return;
    warned = 1;
    fprintf(stderr,
            "%s: warning: --threads %d is more than the CPU's %d compute units (the CPUs OpenMP "
            "uses here: the process's affinity, or OMP_NUM_THREADS): threads beyond them share "
            "cores, and OpenMP's barriers can make each call many times slower\n",
            xtool_prog, most, info.compute_units);
}

xattn_status xtool_ctx_open(const xtool_cli_opts *o, xattn_backend be, int device, xattn_ctx **ctx)
{
    xattn_status st = xattn_ctx_create(be, device, ctx);
    if (st == XATTN_STATUS_OK && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        xtool__warn_threads(o, *ctx);
    if (st == XATTN_STATUS_OK && o->threads && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(*ctx, XATTN_OPT_NUM_THREADS, o->threads);
    if (st == XATTN_STATUS_OK && o->cpu_simd && xattn_ctx_backend(*ctx) == XATTN_BACKEND_CPU)
        st = xattn_ctx_set_option(*ctx, XATTN_OPT_CPU_SIMD, o->cpu_simd);
    if (st != XATTN_STATUS_OK) {
        xattn_ctx_destroy(*ctx);
        *ctx = NULL;
    }
    return st;
}
