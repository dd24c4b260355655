/*
 * xattn_multi — one attention descriptor across several devices of one process.
 *
 * The work is split by (batch entry, KV head) pairs — each query head goes with
 * its KV head, so GQA groups stay whole — and, where there are too few pairs
 * for the devices, by blocks of query rows within a pair, in proportion to a
 * weight per device; each device computes whole rows, so the result equals a
 * one-device run within f32 rounding (no merge is needed). Part of libxattn;
 * built on the public API (docs/scale.md, "Several devices in one process").
 */
#ifndef XATTN_MULTI_H
#define XATTN_MULTI_H

#include "xattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XATTN_MULTI_MAX_DEVICES 16

/** What one device did in a multi-device call. */
typedef struct xattn_multi_part {
    xattn_backend backend;
    int device;                   /* index within the backend */
    double weight;                /* the weight its share was computed from */
    int64_t unit_begin, unit_end; /* its units [begin, end): u = (b * Hkv + g) * R + r, row
                                   * block r of R per pair (R = units / (B * Hkv)) */
    int calls;                    /* xattn_attention calls it ran (one per rectangle) */
    xattn_algo algo_chosen;       /* of its last call */
    double device_ms;             /* its calls on the backend's clock, summed */
    double copy_ms;               /* staging to and from it (ctxs[0]: its outputs only) */
    double wall_ms;               /* its whole part, staging included */
} xattn_multi_part;

/** One record per device plus the whole call's. Grow-only. */
typedef struct xattn_multi_info {
    size_t struct_size;
    int num_devices;
    int64_t units;       /* B * Hkv * R (R = 1 unless rows were cut) */
    double wall_ms;      /* the whole call */
    double stage_in_ms;  /* reading the other devices' inputs from ctxs[0] */
    double stage_out_ms; /* writing their outputs into ctxs[0]'s O and LSE */
    xattn_multi_part part[XATTN_MULTI_MAX_DEVICES];
} xattn_multi_info;

/**
 * Runs `d` across `num_ctxs` contexts (1..XATTN_MULTI_MAX_DEVICES, distinct,
 * any backends). The descriptor's tensors are in buffers of ctxs[0]; the other
 * devices' shares are staged through host memory into their own buffers, and
 * every device runs at the same time (one thread each). `weights` (may be
 * NULL): one non-negative weight per context, not all 0; a device's share of
 * the units is its quota units * w / sum(w) rounded by the largest-remainder
 * method (within one unit of the quota; a device of weight 0 gets none).
 * Units are the B * Hkv (batch, KV head) pairs; when there are fewer than 8
 * per device of weight > 0, each pair's query rows are cut into R blocks too
 * (R = ceil(8 * devices / pairs), at most the rows of the longest sequence),
 * where that keeps every row's mask: no ALiBi, and either no causal mask and
 * no window, or a causal mask (bottom-right aligned, or top-left with no
 * sequence longer in queries than in keys). NULL weights: each device's
 * measured f32 FMA ceiling when every context has one (xattn_ceilings_get),
 * else equal weights. From a first call's info, a measured weight is
 * (unit_end - unit_begin) / wall_ms. Padded and packed
 * batches, masks, windows, ALiBi, a bias and LSE as for xattn_attention; a
 * bias with a packed batch is XATTN_STATUS_UNSUPPORTED with more than one
 * context (not done yet).
 * `info` may be NULL. The call is synchronous.
 *
 * A refused or failed call leaves O and LSE unchanged: every device writes
 * its share into scratch memory, and the caller's O and LSE are written only
 * after every device has succeeded (the commit: the byte ranges O and LSE
 * span are read into host images, patched, and written back, one write each).
 * Memory: scratch O and LSE for each device's share on that device, a host
 * copy of each share's O and LSE, and host images of O's and LSE's byte
 * ranges (about twice O and LSE in host memory). The one failure that can
 * still leave a partial write is a fault of ctxs[0]'s own buffer write during
 * the commit (a device lost mid-copy): then O, or O and not LSE (the message
 * says which), may be partly written. When the whole call is one rectangle
 * on ctxs[0], it runs in place as one xattn_attention call, with that call's
 * guarantees and no staging.
 */
XATTN_API xattn_status xattn_attention_multi(xattn_ctx *const *ctxs, int num_ctxs,
                                             const double *weights, const xattn_attn_desc *d,
                                             xattn_multi_info *info);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_MULTI_H */
