/*
 * NAIVE: the "standard" attention in three kernels over a materialized f32
 * score matrix S[B, Hq, Sq, Sk] (Sq/Sk: tensor extents, or the longest
 * sequence in packed mode).
 *   qk:      S = scores with softcap, ALiBi, bias and masks (-inf), for every
 *            key j < Sk of every written row (the whole rectangle: NAIVE skips
 *            nothing; padding rows and keys are -inf).
 *   softmax: in place, one warp per row: P = exp(S - m) / l, LSE = m + log l;
 *            a fully masked row becomes zeros with LSE = -inf; NaN is sticky.
 *   pv:      O = P V, a 64-row x 64-dim tile per block. A chunk of V holding
 *            an inf or NaN takes the careful path (xattn_cuda_common.cuh):
 *            P is 0 at a masked key, and 0 x NaN must not reach the row.
 */
#include "xattn_cuda_simt.cuh"

/* ---- phase 1: scores ------------------------------------------------------ */

/* The 1-D grid of the NAIVE QK and PV kernels, row block fastest: (row block,
 * column block of `ncb`, KV head, sequence). One dimension, because only
 * gridDim.x may be large on every device. */
__device__ __forceinline__ void xattn_cuda_naive_block(const xattn_cuda_kparams &P, int ncb,
                                                       int *rb, int *cb, int *hk, int *b)
{
    unsigned x = blockIdx.x;
    *rb = (int)(x % (unsigned)P.nrb);
    x /= (unsigned)P.nrb;
    *cb = (int)(x % (unsigned)ncb);
    x /= (unsigned)ncb;
    *hk = (int)(x % (unsigned)P.Hkv);
    *b = (int)(x / (unsigned)P.Hkv);
}

/* Block x = ((b * Hkv + hk) * nkb + kb) * nrb + rb: 64 packed rows x 64 keys. */
__global__ void __launch_bounds__(XATTN_CUDA_SIMT_THREADS)
    xattn_cuda_naive_qk_kernel(const xattn_cuda_kparams P, float *S, int nkb)
{
    __shared__ float qs[XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_LD];
    __shared__ float ks[XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_LD];
    __shared__ xattn_cuda_row rows[XATTN_CUDA_SIMT_TILE];
    __shared__ long long qidx[XATTN_CUDA_SIMT_TILE];

    int rb, kb, hk, b;
    xattn_cuda_naive_block(P, nkb, &rb, &kb, &hk, &b);

    const xattn_cuda_seq s = xattn_cuda_seq_load(P, b);
    const long long R = (long long)s.rows * P.group;
    const long long r0 = (long long)rb * XATTN_CUDA_SIMT_TILE;
    const int t0 = kb * XATTN_CUDA_SIMT_TILE;
    if (r0 >= R) {
        xattn_cuda_count_put(P, 0, 0, 0);
        return;
    }
    /* The whole 64 x 64 tile is computed; K rows below Lk are loaded (P.V
     * loads the same V rows, so they are counted here once). */
    xattn_cuda_count_put(P, (unsigned long long)XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_TILE, 0,
                         (unsigned long long)max(0, min(t0 + XATTN_CUDA_SIMT_TILE, s.Lk) - t0));
    xattn_cuda_simt_rows(P, s, b, hk, r0, R, 0, s.Lk, rows, qidx);
    /* (xattn_cuda_simt_qk starts with a barrier: rows/qidx are visible) */

    float sc[4][4];
    xattn_cuda_simt_qk(P, qidx, b, hk, s.k0, t0, 0, s.Lk, qs, ks, sc);

    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int rr = ty + 16 * a;
        const long long r = r0 + rr;
        if (r >= R)
            continue;
        const int i = (int)(r / P.group), h = hk * P.group + (int)(r % P.group);
        const xattn_cuda_row rw = rows[rr];
        float *srow = S + (((long long)b * P.Hq + h) * P.Sq + i) * P.Sk;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int j = t0 + tx + 16 * c;
            if (j < P.Sk)
                srow[j] = xattn_cuda_mod_score(P, rw, sc[a][c] * P.scale, j);
        }
    }
}

/* ---- phase 2: softmax ----------------------------------------------------- */

/* One warp per row (b, h, i), rows enumerated over B * Hq * Sq. */
__global__ void __launch_bounds__(256)
    xattn_cuda_naive_softmax_kernel(const xattn_cuda_kparams P, float *S)
{
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= (long long)P.B * P.Hq * P.Sq)
        return;
    const int i = (int)(row % P.Sq);
    const int h = (int)((row / P.Sq) % P.Hq);
    const int b = (int)(row / ((long long)P.Sq * P.Hq));
    const xattn_cuda_seq s = xattn_cuda_seq_load(P, b);
    if (i >= s.rows)
        return;
    float *srow = S + row * P.Sk;

    /* Pass 1: this lane's running max and sum, one exp per score. */
    float m = -XATTN_CUDA_INF, l = 0.0f;
    for (int j = lane; j < P.Sk; j += 32) {
        const float x = srow[j];
        if (x != x || m != m) {
            m = x != x ? x : m; /* NaN: sticky from here on */
            l = m;
        } else if (x == -XATTN_CUDA_INF) {
            /* masked: contributes nothing */
        } else if (x > m) {
            l = l * expf(m - x) + 1.0f;
            m = x;
        } else {
            l += expf(x - m);
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
        xattn_cuda_softmax_merge(&m, &l, m2, l2);
    }

    /* Pass 2: probabilities (zeros for a fully masked row), with a real
     * row's sink folded into the denominator. */
    const bool empty = m == -XATTN_CUDA_INF;
    const float m0 = m;
    const float c = i < s.Lq ? xattn_cuda_sink_fold(P, h, &m, &l) : 1.0f;
    const float inv = empty ? 0.0f : c / l;
    for (int j = lane; j < P.Sk; j += 32)
        srow[j] = empty ? 0.0f : expf(srow[j] - m0) * inv;
    if (lane == 0 && P.has_lse)
        ((float *)P.lse.ptr)[xattn_cuda_lse_index(P, b, h, s.q0 + i)] = xattn_sem_lse(m, l);
}

/* ---- phase 3: O = P V ----------------------------------------------------- */

#define XATTN_CUDA_PV_KC 32 /* keys per staged chunk */

/* Block x = ((b * Hkv + hk) * ndb + db) * nrb + rb: 64 packed rows x 64 dims. */
__global__ void __launch_bounds__(XATTN_CUDA_SIMT_THREADS)
    xattn_cuda_naive_pv_kernel(const xattn_cuda_kparams P, const float *S, int ndb)
{
    __shared__ float ps[XATTN_CUDA_SIMT_TILE][XATTN_CUDA_PV_KC + 1];
    __shared__ float vs[XATTN_CUDA_PV_KC][XATTN_CUDA_SIMT_TILE + 1];
    __shared__ long long prow[XATTN_CUDA_SIMT_TILE];
    __shared__ xattn_cuda_row rows[XATTN_CUDA_SIMT_TILE];
    __shared__ long long qidx[XATTN_CUDA_SIMT_TILE];

    int rb, db, hk, b;
    xattn_cuda_naive_block(P, ndb, &rb, &db, &hk, &b);

    const xattn_cuda_seq s = xattn_cuda_seq_load(P, b);
    const long long R = (long long)s.rows * P.group;
    const long long r0 = (long long)rb * XATTN_CUDA_SIMT_TILE;
    if (r0 >= R) {
        xattn_cuda_count_put(P, 0, 0, 0);
        return;
    }
    /* 64 rows x every chunk of keys below Lk; the dim blocks db > 0 compute
     * the same pairs' other output dims (a pair counts 2*Dv FLOPs once). */
    xattn_cuda_count_put(
        P, 0,
        db == 0
            ? (unsigned long long)XATTN_CUDA_SIMT_TILE *
                  (unsigned long long)(xattn_cuda_cdiv(s.Lk, XATTN_CUDA_PV_KC) * XATTN_CUDA_PV_KC)
            : 0ull,
        0);
    /* The rows' valid keys, for the careful path (qidx is unused). */
    xattn_cuda_simt_rows(P, s, b, hk, r0, R, 0, s.Lk, rows, qidx);
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    if (tid < XATTN_CUDA_SIMT_TILE) {
        const long long r = r0 + tid;
        long long pr = -1;
        if (r < R) {
            const int i = (int)(r / P.group), h = hk * P.group + (int)(r % P.group);
            pr = (((long long)b * P.Hq + h) * P.Sq + i) * P.Sk;
        }
        prow[tid] = pr;
    }
    const int d0 = db * XATTN_CUDA_SIMT_TILE;
    const long long vh = (long long)hk * P.v.sh;
    const float vsc = xattn_cuda_kv_scale(P.v_scale, P.vs_sh, hk); /* fp8 V; else 1 */

    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            acc[a][c] = 0.0f;

    /* Keys j >= Lk have p = 0 and their V rows are never read. */
    for (int j0 = 0; j0 < s.Lk; j0 += XATTN_CUDA_PV_KC) {
        __syncthreads();
        for (int e = tid; e < XATTN_CUDA_SIMT_TILE * XATTN_CUDA_PV_KC;
             e += XATTN_CUDA_SIMT_THREADS) {
            const int rr = e / XATTN_CUDA_PV_KC, jj = e % XATTN_CUDA_PV_KC, j = j0 + jj;
            const long long pr = prow[rr];
            ps[rr][jj] = (pr >= 0 && j < s.Lk) ? S[pr + j] : 0.0f;
        }
        int bad = 0;
        /* The chunk's V rows: one page look-up when it lies in one page. */
        const long long vt = xattn_cuda_kv_tile(P, P.v, b, s.k0, j0, XATTN_CUDA_PV_KC);
        for (int e = tid; e < XATTN_CUDA_PV_KC * XATTN_CUDA_SIMT_TILE;
             e += XATTN_CUDA_SIMT_THREADS) {
            const int jj = e / XATTN_CUDA_SIMT_TILE, dd = e % XATTN_CUDA_SIMT_TILE;
            const int j = j0 + jj, d = d0 + dd;
            float x = 0.0f;
            if (j < s.Lk && d < P.Dv) {
                const long long vi =
                    vt >= 0 ? vt + (long long)jj * P.v.ss : xattn_cuda_kv_index(P, P.v, b, s.k0, j);
                x = xattn_cuda_load_kv(P.v.ptr, P.v.dt, vh + vi + (long long)d * P.v.sd) * vsc;
            }
            bad |= !isfinite(x);
            vs[jj][dd] = x;
        }
        if (__syncthreads_or(bad)) {
            /* Careful path: each row's own unmasked keys only. */
            for (int jj = 0; jj < XATTN_CUDA_PV_KC; jj++) {
#pragma unroll
                for (int a = 0; a < 4; a++) {
                    const int rr = ty + 16 * a;
                    if (xattn_cuda_key_masked(P, rows[rr], j0 + jj))
                        continue;
                    const float pa = ps[rr][jj];
#pragma unroll
                    for (int c = 0; c < 4; c++)
                        acc[a][c] = xattn_cuda_pv_add(acc[a][c], pa, vs[jj][tx + 16 * c]);
                }
            }
            continue;
        }
#pragma unroll 4
        for (int jj = 0; jj < XATTN_CUDA_PV_KC; jj++) {
            float pa[4], vb[4];
#pragma unroll
            for (int a = 0; a < 4; a++)
                pa[a] = ps[ty + 16 * a][jj];
#pragma unroll
            for (int c = 0; c < 4; c++)
                vb[c] = vs[jj][tx + 16 * c];
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int c = 0; c < 4; c++)
                    acc[a][c] = fmaf(pa[a], vb[c], acc[a][c]);
        }
    }

#pragma unroll
    for (int a = 0; a < 4; a++) {
        const long long r = r0 + ty + 16 * a;
        if (r >= R)
            continue;
        const int i = (int)(r / P.group), h = hk * P.group + (int)(r % P.group);
        const long long oi = xattn_cuda_row_index(P.o, b, s.q0 + i, h);
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int d = d0 + tx + 16 * c;
            if (d < P.Dv)
                xattn_cuda_store(P.o.ptr, P.o.dt, oi + (long long)d * P.o.sd, acc[a][c]);
        }
    }
}

/* ---- launchers ------------------------------------------------------------ */

static long long xattn_cuda_naive_nrb(const xattn_problem *p)
{
    return xattn_cuda_cdiv(p->Sq * p->group, XATTN_CUDA_SIMT_TILE);
}

void xattn_cuda_naive_blocks(const xattn_problem *p, long long *qk, long long *pv)
{
    const long long nrb = xattn_cuda_naive_nrb(p);
    *qk = nrb * xattn_cuda_cdiv(p->Sk, XATTN_CUDA_SIMT_TILE) * p->Hkv * p->B;
    *pv = nrb * xattn_cuda_cdiv(p->Dv, XATTN_CUDA_SIMT_TILE) * p->Hkv * p->B;
}

extern "C" cudaError_t xattn_cuda_naive_qk(const xattn_cuda_args *a, float *scores)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P = xattn_cuda_make_params(a);
    P.nrb = (int)xattn_cuda_naive_nrb(p);
    const long long nkb = xattn_cuda_cdiv(p->Sk, XATTN_CUDA_SIMT_TILE);
    const long long blocks = (long long)P.nrb * nkb * p->Hkv * p->B;
    if (blocks == 0)
        return cudaSuccess;
    XATTN_CUDA_LAUNCH(xattn_cuda_naive_qk_kernel, (unsigned)blocks,
                      xattn_cuda_threads(a, XATTN_CUDA_SIMT_THREADS), 0, a->stream, P, scores,
                      (int)nkb);
    return cudaGetLastError();
}

extern "C" cudaError_t xattn_cuda_naive_softmax(const xattn_cuda_args *a, float *scores)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P = xattn_cuda_make_params(a);
    P.cnt = NULL; /* the softmax computes no products */
    const long long blocks = xattn_cuda_cdiv(p->B * p->Hq * p->Sq, 8);
    if (blocks == 0)
        return cudaSuccess;
    XATTN_CUDA_LAUNCH(xattn_cuda_naive_softmax_kernel, (unsigned)blocks, xattn_cuda_threads(a, 256),
                      0, a->stream, P, scores);
    return cudaGetLastError();
}

extern "C" cudaError_t xattn_cuda_naive_pv(const xattn_cuda_args *a, const float *probs)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P = xattn_cuda_make_params(a);
    P.nrb = (int)xattn_cuda_naive_nrb(p);
    if (P.cnt) { /* the slots after the QK kernel's */
        long long qk_blocks, pv_blocks;
        xattn_cuda_naive_blocks(p, &qk_blocks, &pv_blocks);
        P.cnt += 3 * qk_blocks;
    }
    const long long ndb = xattn_cuda_cdiv(p->Dv, XATTN_CUDA_SIMT_TILE);
    const long long blocks = (long long)P.nrb * ndb * p->Hkv * p->B;
    if (blocks == 0)
        return cudaSuccess;
    XATTN_CUDA_LAUNCH(xattn_cuda_naive_pv_kernel, (unsigned)blocks,
                      xattn_cuda_threads(a, XATTN_CUDA_SIMT_THREADS), 0, a->stream, P, probs,
                      (int)ndb);
    return cudaGetLastError();
}
