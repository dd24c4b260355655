/*
 * FLASH / SPLITKV partial, SIMT path: any dtypes (q/o and k/v independently),
 * any D and Dv up to 256, any element strides, any architecture.
 *
 * One block = 64 packed query rows of one (sequence, KV head[, split]). The
 * tile loop walks the KV tiles of 64 keys that the rows' valid-key intervals
 * reach (whole tiles outside them are skipped):
 *   S = Q K^T (xattn_cuda_simt_qk), scale, softcap / ALiBi / bias / masks
 *   (xattn_cuda_mod_score), the online-softmax update per row (4 threads per
 *   row), then O += P V with V staged 16 keys at a time (a chunk holding an
 *   inf or NaN takes the careful path of xattn_cuda_common.cuh). The
 *   accumulator of a row lives in registers: thread (ty, tx) owns rows
 *   ty + 16a and output dims tx + 16c (c < ceil(Dv/16) <= 16).
 *
 * Executed work: every tile computes all 64 rows x 64 keys of QK^T and P.V.
 */
#include "xattn_cuda_simt.cuh"

#define XATTN_CUDA_SIMT_VK 16 /* keys per staged V chunk */
#define XATTN_CUDA_SIMT_NC 16 /* output dim groups per thread: 256 / 16 */

/* Two 256-thread blocks an SM on sm_80+ (at most 128 registers a thread,
 * 165 without the bound): one block alternates between barriers and per-row
 * softmax work that leaves most warps idle, and a second block fills those
 * gaps. sm_75 keeps one: its 64 KB of shared memory an SM hold one block of
 * 36 KB anyway. A build switch (-DXATTN_CUDA_SIMT_MIN_BLOCKS=1) gives the
 * unbounded kernel back for an A/B on a GPU. */
#ifndef XATTN_CUDA_SIMT_MIN_BLOCKS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define XATTN_CUDA_SIMT_MIN_BLOCKS 1
#else
#define XATTN_CUDA_SIMT_MIN_BLOCKS 2
#endif
#endif

__global__ void __launch_bounds__(XATTN_CUDA_SIMT_THREADS, XATTN_CUDA_SIMT_MIN_BLOCKS)
    xattn_cuda_flash_simt_kernel(const xattn_cuda_kparams P)
{
    constexpr int BM = XATTN_CUDA_SIMT_TILE, BN = XATTN_CUDA_SIMT_TILE;
    /* qs | ks during S = QK^T; vs [VK][Dv] during O += PV (same memory). */
    __shared__ float tiles[2 * XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_LD];
    __shared__ float ss[BM][BN + 1];
    __shared__ xattn_cuda_row rows[BM];
    __shared__ long long qidx[BM];
    __shared__ float rm[BM], rl[BM], ralpha[BM];
    static_assert(2 * XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_LD >= XATTN_CUDA_SIMT_VK * 256,
                  "the V chunk must fit in the Q/K tiles");
    float *qs = tiles, *ks = tiles + XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_LD, *vs = tiles;

    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const xattn_cuda_blk blk = xattn_cuda_block_decode(P);
    const xattn_cuda_seq s = xattn_cuda_seq_load(P, blk.b);
    const int g = P.group;
    const long long R = (long long)s.rows * g;
    const long long r0 = (long long)blk.rb * BM;
    if (r0 >= R) {
        xattn_cuda_count_put(P, 0, 0, 0);
        return;
    }
    int kmin, kmax;
    xattn_cuda_split_range(P, s, blk.split, &kmin, &kmax);
    xattn_cuda_simt_rows(P, s, blk.b, blk.hk, r0, R, kmin, kmax, rows, qidx);
    if (tid < BM) {
        rm[tid] = -XATTN_CUDA_INF;
        rl[tid] = 0.0f;
    }

    /* Keys any row of the block may see: [lo(first row), hi(last real row)). */
    int lo_u = 0, hi_u = 0;
    {
        const long long rlast = (r0 + BM < R ? r0 + BM : R) - 1;
        const int i_first = (int)(r0 / g);
        const int i_last = min((int)(rlast / g), s.Lq - 1);
        /* The union of the rows' keys (semantics header: rows without keys
         * do not count; none at all: no tile to run). */
        if (i_first <= i_last)
            xattn_cuda_block_range(P, s, i_first, i_last + 1, kmin, kmax, &lo_u, &hi_u);
    }
    __syncthreads();

    const long long vh = (long long)blk.hk * P.v.sh;
    const float vsc = xattn_cuda_kv_scale(P.v_scale, P.vs_sh, blk.hk); /* fp8 V; else 1 */
    const int ncv = (P.Dv + 15) / 16;
    float acc[4][XATTN_CUDA_SIMT_NC];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++)
            acc[a][c] = 0.0f;

    for (int t0 = lo_u / BN * BN; t0 < hi_u; t0 += BN) {
        /* S = Q K^T, then scale, score mods and masks. */
        float sc[4][4];
        xattn_cuda_simt_qk(P, qidx, blk.b, blk.hk, s.k0, t0, lo_u, hi_u, qs, ks, sc);
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const xattn_cuda_row rw = rows[ty + 16 * a];
#pragma unroll
            for (int c = 0; c < 4; c++)
                ss[ty + 16 * a][tx + 16 * c] =
                    xattn_cuda_mod_score(P, rw, sc[a][c] * P.scale, t0 + tx + 16 * c);
        }
        __syncthreads();

        /* Online softmax: 4 threads per row, 16 keys each. */
        {
            const int rr = tid >> 2, part = tid & 3;
            float *srow = &ss[rr][part * 16];
            float tmax = -XATTN_CUDA_INF;
#pragma unroll
            for (int c = 0; c < 16; c++)
                tmax = xattn_cuda_sticky_max(tmax, srow[c]);
            tmax = xattn_cuda_sticky_max(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
            tmax = xattn_cuda_sticky_max(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
            float m = rm[rr], alpha;
            const float mu = xattn_cuda_softmax_rescale(&m, tmax, &alpha);
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < 16; c++) {
                const float pr = expf(srow[c] - mu);
                srow[c] = pr;
                sum += pr;
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if (part == 0) {
                rm[rr] = m;
                rl[rr] = rl[rr] * alpha + sum;
                ralpha[rr] = alpha;
            }
        }
        __syncthreads();
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const float al = ralpha[ty + 16 * a];
#pragma unroll
            for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++)
                acc[a][c] *= al;
        }

        /* O += P V, 16 keys at a time. Keys outside [lo_u, hi_u) read nothing. */
        for (int kc = 0; kc < BN; kc += XATTN_CUDA_SIMT_VK) {
            __syncthreads(); /* tiles free: QK^T or the previous chunk is done */
            int bad = 0;
            /* The chunk's V rows: one page look-up when it lies in one page
             * (a chunk at or past hi_u reads nothing: no look-up). */
            const long long vt = t0 + kc < hi_u ? xattn_cuda_kv_tile(P, P.v, blk.b, s.k0, t0 + kc,
                                                                     XATTN_CUDA_SIMT_VK)
                                                : -1;
            for (int e = tid; e < XATTN_CUDA_SIMT_VK * P.Dv; e += XATTN_CUDA_SIMT_THREADS) {
                const int jj = e / P.Dv, d = e - jj * P.Dv, j = t0 + kc + jj;
                float x = 0.0f;
                if (j >= lo_u && j < hi_u) {
                    const long long vi = vt >= 0 ? vt + (long long)jj * P.v.ss
                                                 : xattn_cuda_kv_index(P, P.v, blk.b, s.k0, j);
                    x = xattn_cuda_load_kv(P.v.ptr, P.v.dt, vh + vi + (long long)d * P.v.sd) * vsc;
                }
                bad |= !isfinite(x);
                vs[e] = x;
            }
            if (__syncthreads_or(bad)) {
                /* Careful path: each row's own unmasked keys only. */
                for (int jj = 0; jj < XATTN_CUDA_SIMT_VK; jj++) {
                    const float *vrow = vs + jj * P.Dv;
#pragma unroll
                    for (int a = 0; a < 4; a++) {
                        if (xattn_cuda_key_masked(P, rows[ty + 16 * a], t0 + kc + jj))
                            continue;
                        const float pa = ss[ty + 16 * a][kc + jj];
#pragma unroll
                        for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++) {
                            const int d = tx + 16 * c;
                            if (c < ncv && d < P.Dv)
                                acc[a][c] = xattn_cuda_pv_add(acc[a][c], pa, vrow[d]);
                        }
                    }
                }
                continue;
            }
#pragma unroll 2
            for (int jj = 0; jj < XATTN_CUDA_SIMT_VK; jj++) {
                float pa[4];
#pragma unroll
                for (int a = 0; a < 4; a++)
                    pa[a] = ss[ty + 16 * a][kc + jj];
                const float *vrow = vs + jj * P.Dv;
#pragma unroll
                for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++) {
                    if (c < ncv) {
                        const int d = tx + 16 * c;
                        const float vv = d < P.Dv ? vrow[d] : 0.0f;
#pragma unroll
                        for (int a = 0; a < 4; a++)
                            acc[a][c] = fmaf(pa[a], vv, acc[a][c]);
                    }
                }
            }
        }
    }
    __syncthreads(); /* rm / rl of the last tile */
    {
        /* What the loop above ran, from its bounds: its tiles, and the keys of
         * [lo_u, hi_u) that it loaded. */
        const int t_begin = lo_u / BN * BN;
        const long long tiles = t_begin < hi_u ? xattn_cuda_cdiv(hi_u - t_begin, BN) : 0;
        const unsigned long long pairs = (unsigned long long)(tiles * BM * BN);
        xattn_cuda_count_put(P, pairs, pairs, tiles ? (unsigned long long)(hi_u - lo_u) : 0ull);
    }

    /* O = acc / l (0 for an empty row), LSE = m + log l (-inf when empty);
     * FLASH folds the sink into a real row first (O = acc * c / l). */
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int rr = ty + 16 * a;
        const long long r = r0 + rr;
        if (r >= R)
            continue;
        const int i = (int)(r / g), h = blk.hk * g + (int)(r % g);
        float m = rm[rr], l = rl[rr];
        const bool empty = m == -XATTN_CUDA_INF;
        const float c = P.splits == 0 && i < s.Lq ? xattn_cuda_sink_fold(P, h, &m, &l) : 1.0f;
        const float inv = empty ? 0.0f : c / l;
        const float lse = xattn_sem_lse(m, l);
        if (P.splits > 0) {
            const long long pr = xattn_cuda_part_row(P, blk.split, blk.b, h, i);
            float *po = P.part_o + pr * P.Dv;
#pragma unroll
            for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++) {
                const int d = tx + 16 * c;
                if (c < ncv && d < P.Dv)
                    po[d] = empty ? 0.0f : acc[a][c] * inv;
            }
            if (tx == 0)
                P.part_lse[pr] = lse;
        } else {
            const long long oi = xattn_cuda_row_index(P.o, blk.b, s.q0 + i, h);
#pragma unroll
            for (int c = 0; c < XATTN_CUDA_SIMT_NC; c++) {
                const int d = tx + 16 * c;
                if (c < ncv && d < P.Dv)
                    xattn_cuda_store(P.o.ptr, P.o.dt, oi + (long long)d * P.o.sd,
                                     empty ? 0.0f : acc[a][c] * inv);
            }
            if (tx == 0 && P.has_lse)
                ((float *)P.lse.ptr)[xattn_cuda_lse_index(P, blk.b, h, s.q0 + i)] = lse;
        }
    }
}

cudaError_t xattn_cuda_flash_simt_launch(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                         unsigned nblocks)
{
    if (nblocks == 0)
        return cudaSuccess;
    XATTN_CUDA_LAUNCH(xattn_cuda_flash_simt_kernel, nblocks,
                      xattn_cuda_threads(a, XATTN_CUDA_SIMT_THREADS), 0, a->stream, P);
    return cudaGetLastError();
}
