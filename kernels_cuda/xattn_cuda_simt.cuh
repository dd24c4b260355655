/*
 * Private to kernels_cuda/: the SIMT score tile shared by NAIVE's qk kernel and
 * the simt flash kernel. 256 threads as 16 x 16; a tile is 64 query rows x 64
 * keys; thread (ty, tx) owns rows ty + 16a and keys tx + 16b (a, b < 4). Q and
 * K are staged in shared memory as f32 in chunks of 32 head dims, converted
 * from any dtype on load (an fp8 K times its head's scale), with any element
 * strides.
 */
#ifndef XATTN_CUDA_SIMT_CUH
#define XATTN_CUDA_SIMT_CUH

#include "xattn_cuda_common.cuh"

#define XATTN_CUDA_SIMT_THREADS 256
#define XATTN_CUDA_SIMT_TILE 64 /* rows and keys per tile */
#define XATTN_CUDA_SIMT_DK 32   /* head dims per staged chunk */
#define XATTN_CUDA_SIMT_LD 33   /* shared row pitch (odd: no bank conflicts) */

/*
 * sc[a][b] = sum_{d < D} Q[row ty+16a][d] * K[key t0+tx+16b][d], unscaled.
 * qidx[r]: element index of row r's Q (d = 0), or -1 for a row that reads
 * nothing (zeros). Keys outside [klo, khi) read nothing (zeros): no padding
 * key or other sequence's token is ever touched (khi <= the sequence's
 * length). Keys are those of sequence b, KV head hk (xattn_cuda_kv_index;
 * k0: the sequence's first token). qs and ks: shared [64][XATTN_CUDA_SIMT_LD]
 * each. Starts with a barrier, so the shared tiles may still be in use by the
 * caller on entry.
 */
__device__ __forceinline__ void xattn_cuda_simt_qk(const xattn_cuda_kparams &P,
                                                   const long long *qidx, int b, int hk, int k0,
                                                   int t0, int klo, int khi, float *qs, float *ks,
                                                   float (&sc)[4][4])
{
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const long long kh = (long long)hk * P.k.sh;
    /* An fp8 cache's values times the head's scale, as the reference's K
     * (1 for other dtypes: x * 1 is x). */
    const float ksc = xattn_cuda_kv_scale(P.k_scale, P.ks_sh, hk);
    /* Key t0 + c at kt + c * ss when the tile lies in one page (or K is
     * contiguous); else each key looks its page up. */
    const long long kt =
        t0 < khi ? xattn_cuda_kv_tile(P, P.k, b, k0, t0, XATTN_CUDA_SIMT_TILE) : -1;
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++)
            sc[a][b] = 0.0f;
    for (int d0 = 0; d0 < P.D; d0 += XATTN_CUDA_SIMT_DK) {
        __syncthreads();
        for (int e = tid; e < XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_DK;
             e += XATTN_CUDA_SIMT_THREADS) {
            int rr = e / XATTN_CUDA_SIMT_DK, dd = e % XATTN_CUDA_SIMT_DK, d = d0 + dd;
            long long qi = qidx[rr];
            qs[rr * XATTN_CUDA_SIMT_LD + dd] =
                (qi >= 0 && d < P.D) ? xattn_cuda_load(P.q.ptr, P.q.dt, qi + (long long)d * P.q.sd)
                                     : 0.0f;
        }
        for (int e = tid; e < XATTN_CUDA_SIMT_TILE * XATTN_CUDA_SIMT_DK;
             e += XATTN_CUDA_SIMT_THREADS) {
            int cc = e / XATTN_CUDA_SIMT_DK, dd = e % XATTN_CUDA_SIMT_DK, d = d0 + dd, j = t0 + cc;
            float x = 0.0f;
            if (j >= klo && j < khi && d < P.D) {
                const long long ki =
                    kt >= 0 ? kt + (long long)cc * P.k.ss : xattn_cuda_kv_index(P, P.k, b, k0, j);
                x = xattn_cuda_load_kv(P.k.ptr, P.k.dt, kh + ki + (long long)d * P.k.sd) * ksc;
            }
            ks[cc * XATTN_CUDA_SIMT_LD + dd] = x;
        }
        __syncthreads();
        const int dn = min(XATTN_CUDA_SIMT_DK, P.D - d0);
#pragma unroll 4
        for (int dd = 0; dd < dn; dd++) {
            float qa[4], kb[4];
#pragma unroll
            for (int a = 0; a < 4; a++)
                qa[a] = qs[(ty + 16 * a) * XATTN_CUDA_SIMT_LD + dd];
#pragma unroll
            for (int b = 0; b < 4; b++)
                kb[b] = ks[(tx + 16 * b) * XATTN_CUDA_SIMT_LD + dd];
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < 4; b++)
                    sc[a][b] = fmaf(qa[a], kb[b], sc[a][b]);
        }
    }
}

/* The packed rows of a block: for tid < 64, row r0 + tid of (sequence b, KV
 * head hk) as a row (keys clipped to [kmin, kmax)) and its Q element index
 * (-1 for rows past R and for padding rows). */
__device__ __forceinline__ void xattn_cuda_simt_rows(const xattn_cuda_kparams &P,
                                                     const xattn_cuda_seq &s, int b, int hk,
                                                     long long r0, long long R, int kmin, int kmax,
                                                     xattn_cuda_row *rows, long long *qidx)
{
    const int tid = threadIdx.x;
    if (tid >= XATTN_CUDA_SIMT_TILE)
        return;
    long long r = r0 + tid;
    xattn_cuda_row rw;
    rw.lo = rw.hi = 0;
    rw.pos = 0;
    rw.slope = 0.0f;
    rw.bias_idx = 0;
    long long qi = -1;
    if (r < R) {
        int i = (int)(r / P.group), h = hk * P.group + (int)(r % P.group);
        xattn_cuda_row_init(P, s, b, h, i, kmin, kmax, &rw);
        if (i < s.Lq)
            qi = xattn_cuda_row_index(P.q, b, s.q0 + i, h);
    }
    rows[tid] = rw;
    qidx[tid] = qi;
}

#endif /* XATTN_CUDA_SIMT_CUH */
