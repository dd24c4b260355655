/*
 * Private to kernels_cpu/: the decode driver, SPLITKV's streaming path on K
 * and V read where they lie (xattn_cpu_decode.c), and its own small table of
 * micro-kernels, one per SIMD path that has them (AVX2, AVX-512; the portable
 * path has none and converts tiles, xattn_cpu_splitkv.c).
 *
 * A decode tile is a few query rows (a GQA group times a few positions, at
 * most XATTN__CPU_FEW_ROWS) against up to XATTN_CPU_BK keys of one KV head.
 * Its K and V rows are not copied: the QK^T and the P.V load each vector of
 * them from the caller's arrays and convert it in registers, so the loop
 * reads each byte of the cache once, which is what decode is bound by.
 *
 * fp8 caches (e4m3, e5m2) take the same kernels: a vector of bytes is widened
 * to f16 bits and converted by F16C. Their per-head scales are applied once
 * per query tile, not per element: the K scale folded into the Q rows, the V
 * scale into the output rows as the partial is written (sc->omul).
 *
 * q8_0 caches too: a vector's int8 are widened to f32 and multiplied by their
 * block's d (F16C) as they are loaded; rows are whole blocks of 32, so whole
 * vectors. A NaN or inf d converts to NaN or inf values, so it needs no pass
 * of its own (unlike e4m3's NaN codes): NaN scores from K, the careful P.V
 * from V.
 */
#ifndef XATTN_CPU_DECODE_H
#define XATTN_CPU_DECODE_H

#include "xattn_cpu_common.h"

/* K or V rows of one KV head where they lie: key c's row at element idx +
 * rows[c] of `base` (a paged cache's rows), or at idx + c * stride without
 * rows; n elements of dtype dt each (D or Dv, a multiple of 16). */
typedef struct xattn__cpu_dec_rows {
    const void *base;
    int64_t idx;
    const int64_t *rows;
    int64_t stride;
    xattn_dtype dt;
    int n;
} xattn__cpu_dec_rows;

/* One tile, the arguments of every decode micro-kernel. */
typedef struct xattn__cpu_dec_tile {
    xattn__cpu_dec_rows k, v;
    int nc; /* keys; no key past nc is read */
    int nr; /* query rows, <= XATTN__CPU_FEW_ROWS */
    /* Q rows (pitch ldq, as order_q left them; zero past D and for rows nr ..
     * round_up(nr, 4)). */
    const float *qr;
    int ldq;
    float *st; /* the scores: st[c * XATTN_CPU_BQ + r] */
    float *acc;
    int ldacc;            /* the output rows (Dv-padded, see pv) */
    const int *clo, *chi; /* row r's keys: [clo[r], chi[r]) */
    int v_prefetch;       /* qk asks L1 for the V rows that pv reads next */
} xattn__cpu_dec_tile;

typedef struct xattn__cpu_dec_uk {
    xattn_cpu_simd simd;
    /* Q rows r < round_up(nr, 4) (pitch ldq, n elements) in place into the
     * order in which qk loads K of dtype kdt (bf16: pairs of vectors as
     * their even then their odd elements); once per query tile. */
    void (*order_q)(float *qr, int ldq, int nr, int n, xattn_dtype kdt);
    /* st[c*BQ + r] = sum_d qr[r*ldq + d] * K[c][d], c < nc, r < nr (rows up
     * to round_up(nr, 4) may be written). */
    void (*qk)(const xattn__cpu_dec_tile *t);
    /* acc[r*ldacc + :] += sum_{clo[r] <= c < chi[r]} st[c*BQ + r] * V[c][:],
     * by blocks of 4 rows over their span of keys (junk may be added into
     * rows nr .. round_up(nr, 4)); returns 1, leaving acc as it was, when a
     * sum of the rows < nr is inf or NaN (an inf or NaN in a V row they use):
     * the caller then takes the careful path. */
    int (*pv)(const xattn__cpu_dec_tile *t);
    /* Bit c set when key c's row (c < nc <= 64) holds an e4m3 NaN code
     * (0x7f, 0xff), which the kernels' loads turn into a finite value; 0 for
     * other dtypes (their conversions keep inf and NaN). */
    uint64_t (*nan_keys)(const xattn__cpu_dec_rows *r, int nc);
} xattn__cpu_dec_uk;

/* What the kernels' loads of dtype dt give for an element of value 1: e4m3
 * is converted through f16 bits with its exponent bias 7 short of f16's, so
 * to 2^-8 times the value (exact, subnormals included; xattn_cpu_uk_avx512.c). */
static inline float xattn__cpu_dec_unit(xattn_dtype dt)
{
    return dt == XATTN_DTYPE_FP8_E4M3 ? 0x1p-8f : 1.0f;
}

#if XATTN__CPU_X86
extern const xattn__cpu_dec_uk xattn__cpu_dec_avx2;
extern const xattn__cpu_dec_uk xattn__cpu_dec_avx512;
#endif

/* The decode table of a SIMD path; NULL where it has none (portable). */
const xattn__cpu_dec_uk *xattn__cpu_dec_get(xattn_cpu_simd simd);

/* Whether SPLITKV's streaming path reads K and V in place for p on `simd`:
 * the path has decode kernels, rows are whole vectors, and every query tile
 * has few rows. Decided from the problem alone, so that the workspace is
 * sized for it before the call. */
int xattn__cpu_dec_applies(const xattn_problem *p, xattn_cpu_simd simd);

/* Keys per step for nk KV heads walked together (a multiple of 16 in [16, BK]). */
int64_t xattn__cpu_dec_step(const xattn_problem *p, int64_t nk);

/* After xattn__cpu_attend_begin of each of the nk tile states sc[k] (KV
 * heads hk0 + k): puts their Q rows in the order the kernels want, with the
 * head's K scale (and unit) folded in, and sets sc[k].omul to its V scale. */
void xattn__cpu_dec_begin(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int nk, int64_t hk0);

/* One step: keys [ja, jb) (at most XATTN_CPU_BK) of sequence b for the nk
 * tile states sc[k] of KV heads hk0 + k, each a tile on K and V in place. */
void xattn__cpu_dec_run(const xattn__cpu_ctx *cx, xattn__cpu_scratch *sc, int nk, int64_t b,
                        int64_t hk0, int64_t ja, int64_t jb);

#endif /* XATTN_CPU_DECODE_H */
