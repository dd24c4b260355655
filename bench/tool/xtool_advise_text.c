/* The recommendation of xattn advise, in plain words, from one device's
 * measured figures (xtool_advise.h). */
#include "xtool_advise.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *xtool__algo_word(xattn_algo a)
{
    return a == XATTN_ALGO_NAIVE ? "naive" : a == XATTN_ALGO_FLASH ? "flash" : "split-KV";
}

/* The advice, sentence by sentence. */
typedef struct xtool__text {
    char *s;
    size_t n, k;
} xtool__text;

static void xtool__say(xtool__text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xtool__say(xtool__text *t, const char *fmt, ...)
{
    if (t->k >= t->n)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->s + t->k, t->n - t->k, fmt, ap);
    va_end(ap);
    if (w > 0)
        t->k += (size_t)w;
}

/* "Use flash: 1.5x faster than naive, 2.0x faster than split-KV." */
static void xtool__say_algos(xtool__text *t, const xtool_advise_dev *d)
{
    const xtool_advise_algo *b = &d->a[d->best];
    xtool__say(t, "Use %s", xtool__algo_word(b->algo));
    int first = 1;
    for (int i = 0; i < 3; i++) {
        const xtool_advise_algo *o = &d->a[i];
        if (i == d->best)
            continue;
        if (!o->ok)
            xtool__say(t, "%s %s did not run (%s)", first ? ":" : ";", xtool__algo_word(o->algo),
                       o->error);
        else
            xtool__say(t, "%s %.2fx faster than %s", first ? ":" : ",",
                       o->cell.t.median / b->cell.t.median, xtool__algo_word(o->algo));
        first = 0;
    }
    xtool__say(t, ".");
}

/* Naive's score matrix against the fastest one's workspace. */
static void xtool__say_memory(xtool__text *t, const xtool_advise_dev *d)
{
    const xtool_advise_algo *b = &d->a[d->best], *naive = &d->a[0];
    if (!naive->ok || b->algo == XATTN_ALGO_NAIVE)
        return;
    char ws[32], wb[32];
    xtool_fmt_bytes((double)naive->cell.info.workspace_bytes, ws, sizeof ws);
    xtool_fmt_bytes((double)b->cell.info.workspace_bytes, wb, sizeof wb);
    if (naive->cell.info.workspace_bytes > b->cell.info.workspace_bytes)
        xtool__say(t,
                   " Naive also materializes the B*Hq*Sq*Sk score matrix: %s of workspace "
                   "against %s.",
                   ws, wb);
    else
        xtool__say(t,
                   " At this size naive's score matrix (%s) is still smaller than %s's "
                   "workspace (%s), but it grows with Sq*Sk.",
                   ws, xtool__algo_word(b->algo), wb);
}

/* Split-KV exists for decode: few query rows give FLASH too few work items,
 * and chunks of the keys give every core one. Say so only for such a shape
 * (the library's AUTO rule: Sq <= 8, Sk >= 512); elsewhere a win is not
 * that, and a small one may be noise. */
static void xtool__say_splitkv(xtool__text *t, const xtool_case *c, const xtool_advise_dev *d)
{
    const xtool_advise_algo *b = &d->a[d->best], *flash = &d->a[1];
    const int decode = c->sq <= 8 && c->sk >= 512;
    double over_flash =
        flash->ok && b->cell.t.median > 0 ? flash->cell.t.median / b->cell.t.median : NAN;
    double noise = flash->ok ? b->cell.t.spread + flash->cell.t.spread : 0;
    if (b->algo == XATTN_ALGO_SPLITKV && decode)
        xtool__say(t,
                   " Split-KV pays off here because there are few query rows (Sq = %lld) for %lld "
                   "keys: its chunks keep every core busy.",
                   (long long)c->sq, (long long)c->sk);
    else if (b->algo == XATTN_ALGO_SPLITKV && isfinite(over_flash))
        xtool__say(t,
                   " Split-KV came out ahead of flash by %.2fx, but not for the decode reason: at "
                   "Sq = %lld there are query rows enough for flash to give every core work%s.",
                   over_flash, (long long)c->sq,
                   over_flash - 1 <= fmax(noise, 0.10)
                       ? ", and a margin this small is within what the runs' noise and the "
                         "split's combine step can explain: treat the two as equal (bench --ab "
                         "measures such a difference)"
                       : "");
    else if (c->sq <= 8 && c->sk >= 256 && d->a[2].ok)
        xtool__say(t, " Split-KV does not pay off at Sq = %lld, Sk = %lld on this device.",
                   (long long)c->sq, (long long)c->sk);
}

/* Compute- or memory-bound, and how far from the FMA ceiling (a share above
 * 100% said to be a model error, never quoted as a figure). */
static void xtool__say_roofline(xtool__text *t, const xtool_advise_dev *d)
{
    if (!d->roof_ok) {
        xtool__say(t,
                   " Roofline unknown: no ceilings for this device (run '%s devices --measure').",
                   xtool_prog);
        return;
    }
    const xtool_roofline *r = &d->roof;
    double pct = d->a[d->best].cell.pct_fma >= 0 ? d->a[d->best].cell.pct_fma : -1;
    if (r->compute_bound)
        xtool__say(t,
                   " The call is compute-bound (%.1f FLOP/byte executed, above the ridge at "
                   "%.1f)%s",
                   r->intensity, r->ridge,
                   pct >= 0 ? ""
                            : "; faster arithmetic (more cores, f16/bf16 tensor paths) is what "
                              "helps.");
    else
        xtool__say(t,
                   " The call is memory-bound (%.1f FLOP/byte executed, below the ridge at "
                   "%.1f): bandwidth and fewer bytes (16-bit K/V, GQA) are what help.",
                   r->intensity, r->ridge);
    const char *headroom = pct < 25 ? ": there is headroom in the kernel or the shape is too "
                                      "small to fill the device"
                                    : "";
    if (xtool_stats_over_ceiling(pct))
        xtool__say(t,
                   "%s %.0f%% of the FMA ceiling: above 100%%, an error of the accounting model "
                   "and not a real figure (please report it); the roofline position above is "
                   "not to be trusted.",
                   r->compute_bound ? ", and its record reports" : " Its record reports", pct);
    else if (pct >= 0 && r->compute_bound)
        xtool__say(t, " and runs at %.0f%% of the FMA ceiling%s.", pct, headroom);
    else if (pct >= 0)
        xtool__say(t, " It runs at %.0f%% of the FMA ceiling%s.", pct, headroom);
}

/* What an fp8 or a q8_0 K/V cache would save at this shape: their bytes
 * against the cache's dtype (q8_0: 34 bytes per 32 values, its f16 scales
 * included; only where both head dims are whole blocks of 32), and the time
 * floor of reading K/V once at the measured bandwidth (decode is that read).
 * Said for memory-bound calls and decode shapes (Sq <= 8), where reading
 * K/V is most of the work. */
static void xtool__say_kv_bytes(xtool__text *t, const xtool_case *c, const xtool_advise_dev *d)
{
    const size_t es = xattn_dtype_size(c->kv_dtype); /* 0 for q8_0: nothing smaller to offer */
    if (!d->roof_ok || es <= 1 || (d->roof.compute_bound && c->sq > 8))
        return;
    const double tokens = (double)c->batch * (double)c->sk * (double)c->kv_heads;
    const int64_t dvi = c->head_dim_v > 0 ? c->head_dim_v : c->head_dim;
    const double dv = (double)dvi;
    const double now = tokens * ((double)c->head_dim + dv) * (double)es, fp8 = now / (double)es;
    const int q8_ok = c->head_dim % XATTN_Q8_0_BLOCK == 0 && dvi % XATTN_Q8_0_BLOCK == 0;
    const double q8 = fp8 * XATTN_Q8_0_BLOCK_BYTES / XATTN_Q8_0_BLOCK;
    xtool__say(t,
               " K/V is %.1f MB a call in %s; an fp8 cache (--kv-dtype fp8e4m3 or fp8e5m2, "
               "per-head scales) would hold %.1f MB, %.0f%% fewer bytes",
               now / 1e6, xattn_dtype_name(c->kv_dtype), fp8 / 1e6, 100.0 * (1.0 - fp8 / now));
    if (q8_ok)
        xtool__say(t,
                   ", a q8_0 cache (--kv-dtype q8_0, llama.cpp's blocks of 32 with f16 scales) "
                   "%.1f MB, %.0f%% fewer",
                   q8 / 1e6, 100.0 * (1.0 - q8 / now));
    if (d->bw > 0) {
        xtool__say(t, ": at the measured %.1f GB/s, reading it once takes %.3f ms (fp8)", d->bw,
                   fp8 / (d->bw * 1e6));
        if (q8_ok)
            xtool__say(t, " or %.3f ms (q8_0)", q8 / (d->bw * 1e6));
        xtool__say(t, " instead of %.3f", now / (d->bw * 1e6));
    }
    xtool__say(t,
               "%s (%s on the CPU backend only, and %s decode there is not yet faster than "
               "f16: docs/backends.md).",
               d->roof.compute_bound ? "; this call is compute-bound here, so fewer bytes alone "
                                       "would not make it faster"
                                     : "",
               q8_ok ? "fp8 and q8_0 run" : "fp8 runs", q8_ok ? "their" : "its");
}

/* How much of a padded batch is padding, and whether packing it helped. */
static void xtool__say_padding(xtool__text *t, const xtool_waste *w, const xtool_advise_dev *d)
{
    xtool__say(t, " %.0f%% of the padded batch's attention pairs are padding", 100 * w->pair_waste);
    if (d->has_packed && d->packed.t.median > 0 && d->a[d->best].cell.t.median > 0 && d->a[1].ok) {
        double r = d->a[1].cell.t.median / d->packed.t.median;
        if (r > 1.05)
            xtool__say(t, ": packing the batch (varlen, cu_seqlens) made flash %.2fx faster.", r);
        else
            xtool__say(t,
                       ", but packing (varlen) did not make flash faster here (%.2fx): its "
                       "tiles already skip the padded keys.",
                       r);
    } else {
        xtool__say(t, "; pack the batch (varlen) to skip them.");
    }
}

void xtool_advise_text(const xtool_case *c, const xtool_waste *w, int has_lengths,
                       xtool_advise_dev *d)
{
    xtool__text t = {d->advice, sizeof d->advice, 0};
    d->advice[0] = '\0';
    if (d->best < 0) {
        xtool__say(&t, "No algorithm ran on this device: %s", d->a[1].error);
        return;
    }
    xtool__say_algos(&t, d);
    xtool__say_memory(&t, d);
    xtool__say_splitkv(&t, c, d);
    xtool__say_roofline(&t, d);
    xtool__say_kv_bytes(&t, c, d);
    if (has_lengths && w->pair_waste > 0.0)
        xtool__say_padding(&t, w, d);
}
