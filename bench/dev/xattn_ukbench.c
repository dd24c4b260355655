/*
 * xattn_ukbench: the CPU decode micro-kernels alone, on one thread, with K and
 * V resident where the chosen size puts them (L1 by default). It times what
 * SPLITKV's in-place decode path runs per KV tile: the few-row QK^T reading K
 * where it lies (the decode table's qk), the online softmax (uk->softmax_tile)
 * and the P.V reading V where it lies (the decode table's pv), for each SIMD
 * path the CPU runs. The result is the decode loop's compute rate in K+V bytes per
 * second per core: what the loop could stream at most if memory cost nothing,
 * to set against the read ceiling of `xattn devices --measure`
 * (docs/benchmarks-cpu.md). With --rates, the throughput of single vector
 * instructions instead (xattn_ukbench_rates.c); with --memory, one core's
 * memory latency and misses in flight (xattn_ukbench_memory.c); with
 * --prefill, the prefill micro-kernels against the core's FMA rate
 * (xattn_ukbench_prefill.c). A
 * kernel-tuning tool: its tests (tool_ukbench*) check that it runs and
 * reports, never its figures.
 */
#include "xattn_cpu_decode.h"
#include "xattn_parse.h"
#include "xattn_stats.h"
#include "xattn_ukbench_modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ukb_opts {
    int D, rows, tile, reps;
    int64_t keys, stride; /* stride 0: D (rows back to back) */
} ukb_opts;

typedef struct ukb_bufs {
    void *k, *v;
    float *qr, *st, *acc, m[XATTN_CPU_BQ], l[XATTN_CPU_BQ], alpha[XATTN_CPU_BQ];
    int clo[XATTN__CPU_FEW_ROWS], chi[XATTN__CPU_FEW_ROWS];
} ukb_bufs;

enum { UKB_QK = 1, UKB_SOFTMAX = 2, UKB_PV = 4 };
enum { UKB_MIB_MIN = 64, UKB_MIB_MAX = 8192 }; /* --memory's buffer */

/* One pass over the keys, tile by tile, running the parts in `what`. */
static void ukb_pass(const xattn__cpu_uk *uk, const ukb_opts *o, ukb_bufs *b, xattn_dtype dt,
                     int what)
{
    const xattn__cpu_dec_uk *dk = xattn__cpu_dec_get(uk->simd);
    const int64_t ldk = xattn__cpu_round_up(o->D, 16);
    /* As the library does (xattn_cpu_decode.c), on contiguous K/V. */
    xattn__cpu_dec_tile t;
    memset(&t, 0, sizeof t);
    t.k.base = b->k;
    t.k.stride = o->stride;
    t.k.dt = dt;
    t.k.n = o->D;
    t.v = t.k;
    t.v.base = b->v;
    t.nc = o->tile;
    t.nr = o->rows;
    t.qr = b->qr;
    t.ldq = (int)ldk;
    t.st = b->st;
    t.acc = b->acc;
    t.ldacc = (int)ldk;
    t.clo = b->clo;
    t.chi = b->chi;
    t.v_prefetch = xattn__cpu_v_prefetch_in_qk(dt);
    for (int64_t j = 0; j + o->tile <= o->keys; j += o->tile) {
        t.k.idx = t.v.idx = j * o->stride;
        if (what & UKB_QK)
            dk->qk(&t);
        if (what & UKB_SOFTMAX) {
            uk->softmax_tile(b->st, o->tile, o->rows, b->m, b->l, b->alpha);
            for (int r = 0; r < o->rows; r++)
                b->m[r] = 0.0f; /* keep the next tile's rescale on the usual path */
        }
        if ((what & UKB_PV) && dk->pv(&t)) {
            fprintf(stderr, "xattn_ukbench: the P.V saw a non-finite sum\n");
            exit(1);
        }
    }
}

/* Median over reps of the ns per key and KV head of `what`; *best the
 * fastest rep (a shared machine only ever adds time). */
static double ukb_time(const xattn__cpu_uk *uk, const ukb_opts *o, ukb_bufs *b, xattn_dtype dt,
                       int what, double *best)
{
    double t[64];
    const int64_t per = (o->keys / o->tile) * o->tile;
    int64_t passes = 1;
    ukb_pass(uk, o, b, dt, what); /* warm-up, and the pass count for ~10 ms */
    const double t0 = xattn_now_s();
    ukb_pass(uk, o, b, dt, what);
    const double one = xattn_now_s() - t0;
    if (one > 0)
        passes = (int64_t)(0.01 / one) + 1;
    for (int r = 0; r < o->reps; r++) {
        const double s = xattn_now_s();
        for (int64_t p = 0; p < passes; p++)
            ukb_pass(uk, o, b, dt, what);
        t[r] = (xattn_now_s() - s) * 1e9 / (double)(passes * per);
    }
    xattn_stats sm;
    xattn_stats_compute(t, o->reps, &sm);
    if (best)
        *best = sm.min;
    return sm.median;
}

static int ukb_run(const xattn__cpu_uk *uk, const ukb_opts *o, xattn_dtype dt)
{
    const int64_t es = xattn__cpu_esize(dt), ldk = xattn__cpu_round_up(o->D, 16);
    const size_t kv = (size_t)(o->keys * o->stride * es);
    ukb_bufs b;
    memset(&b, 0, sizeof b);
    b.k = aligned_alloc(4096, (kv + 4095) / 4096 * 4096);
    b.v = aligned_alloc(4096, (kv + 4095) / 4096 * 4096);
    b.qr = aligned_alloc(64, (size_t)(XATTN__CPU_FEW_ROWS * ldk) * 4);
    b.st = aligned_alloc(64, (size_t)((o->tile + XATTN__CPU_PAD) * XATTN_CPU_BQ) * 4);
    b.acc = aligned_alloc(64, (size_t)(XATTN__CPU_FEW_ROWS * ldk) * 4);
    if (!b.k || !b.v || !b.qr || !b.st || !b.acc) {
        fprintf(stderr, "xattn_ukbench: out of memory\n");
        return 1;
    }
    uint32_t s = 12345u;
    for (int64_t i = 0; i < o->keys * o->stride; i++)
        for (int w = 0; w < 2; w++) {
            s = s * 1664525u + 1013904223u;
            const float x = (float)(s >> 8) / 16777216.0f - 0.5f;
            void *dst = w ? b.v : b.k;
            if (dt == XATTN_DTYPE_F32)
                ((float *)dst)[i] = x;
            else
                ((uint16_t *)dst)[i] =
                    dt == XATTN_DTYPE_F16 ? xattn_f32_to_f16(x) : xattn_f32_to_bf16(x);
        }
    memset(b.qr, 0, (size_t)(XATTN__CPU_FEW_ROWS * ldk) * 4);
    for (int r = 0; r < o->rows; r++)
        for (int d = 0; d < o->D; d++)
            b.qr[r * ldk + d] = 0.01f * (float)((r * 7 + d) % 13);
    xattn__cpu_dec_get(uk->simd)->order_q(b.qr, (int)ldk, o->rows, o->D, dt); /* once */
    memset(b.st, 0, (size_t)((o->tile + XATTN__CPU_PAD) * XATTN_CPU_BQ) * 4);
    memset(b.acc, 0, (size_t)(XATTN__CPU_FEW_ROWS * ldk) * 4);
    for (int r = 0; r < XATTN_CPU_BQ; r++) {
        b.m[r] = 0.0f;
        b.l[r] = 0.0f;
    }
    for (int r = 0; r < XATTN__CPU_FEW_ROWS; r++) {
        b.clo[r] = 0;
        b.chi[r] = r < o->rows ? o->tile : 0;
    }
    double best;
    const double qk = ukb_time(uk, o, &b, dt, UKB_QK, NULL);
    const double pv = ukb_time(uk, o, &b, dt, UKB_PV, NULL);
    const double all = ukb_time(uk, o, &b, dt, UKB_QK | UKB_SOFTMAX | UKB_PV, &best);
    const double bytes = 2.0 * (double)(o->D * es); /* a key's K and V row */
    printf("%-8s %-5s %4d %4d %5d %8lld %8lld %8.2f %8.2f %8.2f %8.2f %8.2f\n",
           xattn_cpu_simd_name(uk->simd), xattn_dtype_name(dt), o->D, o->rows, o->tile,
           (long long)o->keys, (long long)o->stride, qk, pv, all, bytes / all, bytes / best);
    free(b.k);
    free(b.v);
    free(b.qr);
    free(b.st);
    free(b.acc);
    return 0;
}

static void ukb_usage(FILE *f)
{
    fprintf(f,
            "usage: xattn_ukbench [--dtype f32|f16|bf16|all] [--head-dim N] [--rows N]\n"
            "                     [--tile N] [--keys N] [--stride N] [--reps N]\n"
            "       xattn_ukbench --rates [--reps N]\n"
            "       xattn_ukbench --memory [--mib N] [--reps N]\n"
            "       xattn_ukbench --prefill [--head-dim N] [--reps N]\n"
            "  Times the CPU decode micro-kernels (few-row QK^T and P.V reading K/V in place,\n"
            "  the online softmax) on one thread, for each SIMD path this CPU runs.\n"
            "  --head-dim  D = Dv, a multiple of 16 up to %d (default 128)\n"
            "  --rows      query rows per KV head, 1..%d (default 4: a GQA group of 4)\n"
            "  --tile      keys per tile, a multiple of 16 up to %d (default 64)\n"
            "  --keys      keys walked (default 64: K and V in L1; 2048 at D 128 f16 is 1 MiB)\n"
            "  --stride    elements from one key's row to the next (default D; 8*D is BSHD\n"
            "              with 8 KV heads)\n"
            "  --reps      timed repetitions of about 10 ms each (default 9)\n"
            "Columns: medians of the ns per key and KV head for the QK^T, the P.V and the\n"
            "whole tile (the three, with the softmax), the K+V bytes the whole tile consumes\n"
            "per ns (GB/s on one core), and the same for the fastest repetition.\n"
            "--rates: ns per instruction, on one core, of the vector instructions a decode\n"
            "step could use (FMA, AVX512-BF16 VDPBF16PS, the f16 and bf16 conversions),\n"
            "each alone with its latency hidden.\n"
            "--memory: one core's memory latency, and the misses it keeps in flight: 1 to\n"
            "48 chains of dependent loads at once over --mib MiB (default 1024, %d..%d),\n"
            "random lines, so that no hardware prefetcher helps.\n"
            "--prefill: GFLOP/s of the prefill micro-kernels (FLASH's QK^T, P.V and whole\n"
            "tile, NAIVE's two products) on one thread, operands in L1/L2, against the FMA\n"
            "rate of the same vector width measured in the same run.\n",
            XATTN__CPU_DMAX, XATTN__CPU_FEW_ROWS, XATTN_CPU_BK, UKB_MIB_MIN, UKB_MIB_MAX);
}

int main(int argc, char **argv)
{
    ukb_opts o = {128, 4, 64, 9, 64, 0};
    const char *dts = "all";
    int rates = 0, memory = 0, prefill = 0;
    int64_t mib = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int64_t v = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ukb_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--rates")) {
            rates = 1;
            continue;
        }
        if (!strcmp(a, "--memory")) {
            memory = 1;
            continue;
        }
        if (!strcmp(a, "--prefill")) {
            prefill = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "xattn_ukbench: %s needs a value\n", a);
            return 2;
        }
        const char *val = argv[++i];
        int ok = 1;
        if (!strcmp(a, "--dtype")) {
            dts = val;
            ok = !strcmp(val, "all") || !strcmp(val, "f32") || !strcmp(val, "f16") ||
                 !strcmp(val, "bf16");
        } else if (!strcmp(a, "--head-dim")) {
            ok = !xattn_parse_i64(val, 16, XATTN__CPU_DMAX, &v) && v % 16 == 0;
            o.D = (int)v;
        } else if (!strcmp(a, "--rows")) {
            ok = !xattn_parse_i64(val, 1, XATTN__CPU_FEW_ROWS, &v);
            o.rows = (int)v;
        } else if (!strcmp(a, "--tile")) {
            ok = !xattn_parse_i64(val, 16, XATTN_CPU_BK, &v) && v % 16 == 0;
            o.tile = (int)v;
        } else if (!strcmp(a, "--keys")) {
            ok = !xattn_parse_i64(val, 16, 1L << 24, &v);
            o.keys = v;
        } else if (!strcmp(a, "--stride")) {
            ok = !xattn_parse_i64(val, 0, 1L << 16, &v);
            o.stride = v;
        } else if (!strcmp(a, "--mib")) {
            ok = !xattn_parse_i64(val, UKB_MIB_MIN, UKB_MIB_MAX, &mib);
        } else if (!strcmp(a, "--reps")) {
            ok = !xattn_parse_i64(val, 1, 64, &v);
            o.reps = (int)v;
        } else {
            fprintf(stderr, "xattn_ukbench: unknown option %s\n", a);
            ukb_usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "xattn_ukbench: bad value for %s: %s\n", a, val);
            return 2;
        }
    }
    if (rates + memory + prefill > 1) {
        fprintf(stderr, "xattn_ukbench: --rates, --memory and --prefill are separate runs\n");
        return 2;
    }
    if (rates)
        return xattn_ukbench_rates(o.reps);
    if (memory)
        return xattn_ukbench_memory(mib, o.reps);
    if (prefill)
        return xattn_ukbench_prefill(o.D, o.reps);
    if (o.stride == 0)
        o.stride = o.D;
    if (o.stride < o.D) {
        fprintf(stderr, "xattn_ukbench: --stride %lld is shorter than a row (%d)\n",
                (long long)o.stride, o.D);
        return 2;
    }
    if (o.keys < o.tile) {
        fprintf(stderr, "xattn_ukbench: --keys %lld is less than one tile (%d)\n",
                (long long)o.keys, o.tile);
        return 2;
    }
    printf("%-8s %-5s %4s %4s %5s %8s %8s %8s %8s %8s %8s %8s\n", "simd", "kv", "D", "rows", "tile",
           "keys", "stride", "qk ns", "pv ns", "tile ns", "GB/s", "best");
    const xattn_cpu_simd best = xattn_cpu_simd_detect();
    int ran = 0;
    for (int s = XATTN_CPU_SIMD_AVX512; s >= XATTN_CPU_SIMD_PORTABLE; s--) {
        if (s > (int)best)
            continue;
        const xattn__cpu_uk *uk = xattn__cpu_uk_get((xattn_cpu_simd)s);
        if (uk->simd != (xattn_cpu_simd)s || !xattn__cpu_dec_get(uk->simd))
            continue; /* no in-place decode kernels on this path */
        static const xattn_dtype all[3] = {XATTN_DTYPE_F32, XATTN_DTYPE_F16, XATTN_DTYPE_BF16};
        for (int t = 0; t < 3; t++)
            if (!strcmp(dts, "all") || !strcmp(dts, xattn_dtype_name(all[t]))) {
                if (ukb_run(uk, &o, all[t]))
                    return 1;
                ran = 1;
            }
    }
    if (!ran)
        printf("(no SIMD path with the in-place decode kernels on this CPU)\n");
    return 0;
}
