/*
 * xattn_multi — one attention descriptor across several devices of one process.
 *
 * The work is split by (batch entry, KV head) pairs — each query head goes with
 * its KV head, so GQA groups stay whole — in proportion to a weight per
 * device; each device computes whole rows, so the result equals a one-device
 * run within f32 rounding (no merge is needed). Part of libxattn; built on the
 * public API (docs/scale.md, "Several devices in one process").
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
    int64_t unit_begin, unit_end; /* its (batch, KV head) pairs: u = b * Hkv + g */
    int calls;                    /* xattn_attention calls it ran (one per rectangle) */
    xattn_algo algo_chosen;       /* of its last call */
    double device_ms;             /* its calls on the backend's clock, summed */
    double copy_ms;               /* host staging to and from it (0 for ctxs[0]) */
    double wall_ms;               /* its whole part, staging included */
} xattn_multi_part;

/** One record per device plus the whole call's. Grow-only. */
typedef struct xattn_multi_info {
    size_t struct_size;
    int num_devices;
    int64_t units;       /* B * Hkv */
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
 * the B * Hkv (batch, KV head) pairs is proportional to it (a device may get
 * none). NULL: each device's measured f32 FMA ceiling when every context has
 * one (xattn_ceilings_get), else equal weights. From a first call's info, a
 * measured weight is (unit_end - unit_begin) / wall_ms. Padded and packed
 * batches, masks, windows, ALiBi, a bias and LSE as for xattn_attention; a
 * bias with a packed batch is XATTN_STATUS_UNSUPPORTED with more than one
 * context (not done yet).
 * `info` may be NULL. The call is synchronous.
 */
XATTN_API xattn_status xattn_attention_multi(xattn_ctx *const *ctxs, int num_ctxs,
                                             const double *weights, const xattn_attn_desc *d,
                                             xattn_multi_info *info);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_MULTI_H */
