/*
 * FLASH / SPLITKV partial, tensor-core path (sm_80+): q and k/v of one 16-bit
 * dtype T (__half or __nv_bfloat16), or q of T with an fp8 K/V cache whose
 * bytes the tile load converts to T (exact; the K scale multiplies the
 * scores, the V scale the output), head dims padded to DP (D, Dv <= DP).
 *
 * One block = BM = 16*MT*NW packed query rows of one (sequence, KV head
 * [, split]); warp w owns rows [16*MT*w, 16*MT*(w+1)). Two shapes
 * (xattn_cuda_mma_cfg, chosen at launch): wide, FlashAttention-2's, 128 rows
 * (MT = 2; d256: 64) with a K/V ring of 2 stages; narrow, 64 rows (MT = 1).
 * Shared memory holds the Q tile [BM][DP] (loaded once; when MT * DP <=
 * XATTN_CUDA_QREG_MAX, 128, a warp then keeps its Q fragments in registers for
 * the whole KV loop, else it reads them with ldmatrix every tile) and the
 * ring: ST stages of one K and one V tile [BN][DP] each, rows padded to
 * LDS = DP + 8 elements so that ldmatrix is free of bank conflicts. The tile
 * loop is the same as the simt path's and the CPU's:
 *
 *   for each KV tile the rows' valid-key intervals reach:
 *     wait for the tile's cp.async group; one barrier publishes it, says every
 *     warp is done with the previous tile, and ORs the threads' "this V tile
 *     holds an inf or NaN" flags (each thread checks what it staged)
 *     (the tile ST - 1 ahead starts loading into the previous tile's stage:
 *     cp.async overlaps all of this tile's work)
 *     S = Q K^T          mma.sync m16n8k16, f32 accumulators in registers
 *     scale, softcap / ALiBi / bias / masks (skipped for a tile every row
 *     sees whole when there are no score mods)
 *     online softmax on the accumulators (a row lives in a quad of lanes), in
 *     log2 units (x = s * log2 e): p = 2^(x - m), so the row's maximum gives
 *     exactly 1; p is rounded to T and packed as P.V's A fragments; O is
 *     divided by the sum of the rounded p that P.V multiplies, LSE takes the
 *     sum of the unrounded p
 *     O += P V           P from the packed fragments;
 *     a V tile holding an inf or NaN takes the careful path instead: every
 *     lane walks its row's keys (P from the quad through shuffles) and skips
 *     the masked ones (xattn_cuda_common.cuh)
 *
 * Executed work: a tile computes 16 * MT rows x BN keys in each product for
 * every warp with a row below R (warps past R only help load).
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16, .f16/.bf16 -> .f32): lane l,
 * g = l / 4, c = l % 4. A (16x16, row): a0 = (g, 2c..2c+1), a1 = (g+8, 2c..),
 * a2 = (g, 2c+8..), a3 = (g+8, 2c+8..). B (16x8, col): b0 = (k 2c..2c+1, n g),
 * b1 = (k 2c+8.., n g). C (16x8): c0,c1 = (g, 2c..2c+1), c2,c3 = (g+8, 2c..).
 * ldmatrix.x4 gives lane l row l/4, columns 2(l%4).. of each of four 8x8
 * matrices whose row addresses lanes 8m..8m+7 supply; .trans transposes each.
 *
 * Global -> shared: 16-byte cp.async.cg per 8 elements when P.vec (every row
 * 16-byte aligned, unit dim stride, D and Dv multiples of 8); otherwise plain
 * 2-byte loads (any strides). Rows and keys outside the valid ranges and dims
 * past D / Dv are written as zeros, never read from global memory. A K/V tile
 * in one page (or contiguous K/V) whose keys are all valid takes a fast path:
 * a thread's chunks share a column, so its addresses are one pointer and a
 * row stride (xattn_cuda_mma_stage_rows; DP 64, 128, 256).
 *
 * The rare paths (score mods, the careful P.V) are run-time loops over keys,
 * not unrolled copies a score: the kernel's code stays small (the static
 * measure of bench/dev/sass-report.py).
 */
#ifndef XATTN_CUDA_FLASH_MMA_CUH
#define XATTN_CUDA_FLASH_MMA_CUH

#include <type_traits>

#include "xattn_cuda_common.cuh"

/* The largest padded head dim whose Q fragments stay in registers. */
#ifndef XATTN_CUDA_QREG_MAX
#define XATTN_CUDA_QREG_MAX 128
#endif

#if defined(XATTN_CUDA_EMULATE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define XATTN_CUDA_MMA_ARCH 1
#else
#define XATTN_CUDA_MMA_ARCH 0
#endif

#if XATTN_CUDA_MMA_ARCH
/* The PTX wrappers (the emulator brings its own). */
#ifndef XATTN_CUDA_EMULATE

__device__ __forceinline__ unsigned xattn_cuda_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void xattn_cuda_cp_async16(void *smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(xattn_cuda_smem_addr(smem)),
                 "l"(__cvta_generic_to_global(gmem))
                 : "memory");
}

__device__ __forceinline__ void xattn_cuda_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void xattn_cuda_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void xattn_cuda_ldsm_x4(unsigned (&r)[4], const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(xattn_cuda_smem_addr(smem)));
}

__device__ __forceinline__ void xattn_cuda_ldsm_x4_trans(unsigned (&r)[4], const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(xattn_cuda_smem_addr(smem)));
}

/* c += a * b for one m16n8k16 tile. */
template <typename T>
__device__ __forceinline__ void xattn_cuda_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1);

template <>
__device__ __forceinline__ void xattn_cuda_mma<__half>(float (&c)[4], const unsigned (&a)[4],
                                                       unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void xattn_cuda_mma<__nv_bfloat16>(float (&c)[4], const unsigned (&a)[4],
                                                              unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif /* XATTN_CUDA_EMULATE */

/* The NaN-sticky max of docs/semantics.md (NaN when either is NaN, else the
 * larger): one max.NaN instruction on sm_80+ instead of two NaN tests and a
 * compare a score (the emulator takes the semantics header's function). */
#ifdef XATTN_CUDA_EMULATE
static inline float xattn_cuda_max_nan(float a, float b)
{
    return xattn_sem_sticky_max(a, b);
}
#else
__device__ __forceinline__ float xattn_cuda_max_nan(float a, float b)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
#endif

/* s[n][i] for run-time n and i, by selects (a register array indexed at run
 * time would go to local memory): the compact cold paths use it. */
template <int NS>
__device__ __forceinline__ float xattn_cuda_pick(const float (&s)[NS][4], int n, int i)
{
    float r = 0.0f;
#pragma unroll
    for (int k = 0; k < NS; k++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            r = (k == n && e == i) ? s[k][e] : r;
    return r;
}

/* w[n][h] for run-time n and h, by selects (the careful P.V path). */
template <int NS>
__device__ __forceinline__ unsigned xattn_cuda_pick2(const unsigned (&w)[NS][2], int n, int h)
{
    unsigned r = 0u;
#pragma unroll
    for (int k = 0; k < NS; k++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            r = (k == n && e == h) ? w[k][e] : r;
    return r;
}

/* Two f32 as one register of two T, `lo` in the low half (the lower k index). */
template <typename T> __device__ __forceinline__ unsigned xattn_cuda_pack2(float lo, float hi);

template <> __device__ __forceinline__ unsigned xattn_cuda_pack2<__half>(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    unsigned u;
    memcpy(&u, &h, 4);
    return u;
}

template <> __device__ __forceinline__ unsigned xattn_cuda_pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    unsigned u;
    memcpy(&u, &h, 4);
    return u;
}

/* A T's bits as f32. */
template <typename T> __device__ __forceinline__ float xattn_cuda_bits_f32(unsigned short u);
template <> __device__ __forceinline__ float xattn_cuda_bits_f32<__half>(unsigned short u)
{
    return __half2float(__ushort_as_half(u));
}
template <> __device__ __forceinline__ float xattn_cuda_bits_f32<__nv_bfloat16>(unsigned short u)
{
    return __uint_as_float((unsigned)u << 16);
}

/* Bit 15 (31) set when the T in the low (high) half of w is an inf or NaN:
 * its exponent field plus the field's lowest bit carries into the sign bit
 * only when every exponent bit is set, and the low half's carry stops at bit
 * 15. Two instructions a pair, OR-accumulated by the caller. */
template <typename T> __device__ __forceinline__ unsigned xattn_cuda_nonfinite2(unsigned w)
{
    constexpr bool H = std::is_same<T, __half>::value;
    constexpr unsigned EM = H ? 0x7c007c00u : 0x7f807f80u, LSB = H ? 0x04000400u : 0x00800080u;
    return (w & EM) + LSB;
}

/*
 * 1 when an element this thread staged into the tile by
 * xattn_cuda_mma_stage<DP, NT> (same nrows and vec) is an inf or NaN. Only the
 * thread's own copies are read: after its cp.async wait they are visible to
 * it without a barrier.
 */
template <int DP, int NT, typename T>
__device__ __forceinline__ int xattn_cuda_mma_nonfinite(const unsigned short *tile, int nrows,
                                                        int vec)
{
    constexpr int LDS = DP + 8, CH = DP / 8;
    const int tid = threadIdx.x;
    unsigned bad = 0;
    /* One load at a time: this runs while the O and S fragments hold most
     * registers (unrolled, the loads made the d64 kernel spill). */
    if (vec) {
#pragma unroll 1
        for (int e = tid; e < nrows * CH; e += NT) {
            const uint4 u = *reinterpret_cast<const uint4 *>(tile + (e / CH) * LDS + (e % CH) * 8);
            bad |= xattn_cuda_nonfinite2<T>(u.x) | xattn_cuda_nonfinite2<T>(u.y) |
                   xattn_cuda_nonfinite2<T>(u.z) | xattn_cuda_nonfinite2<T>(u.w);
        }
    } else {
#pragma unroll 1
        for (int e = tid; e < nrows * DP; e += NT)
            bad |= xattn_cuda_nonfinite2<T>(tile[(e / DP) * LDS + e % DP]);
    }
    return (bad & 0x80008000u) != 0;
}

/*
 * Stages `nrows` rows of `width` valid dims into a shared tile [nrows][LDS] of
 * DP columns. gidx(rr) gives row rr's element index (d = 0), or -1 for a row
 * that reads nothing. Vector path: 16-byte cp.async (the caller commits);
 * else 2-byte loads with element stride sd. Zeros everywhere else.
 */
template <int DP, int NT, typename IdxFn>
__device__ __forceinline__ void xattn_cuda_mma_stage(unsigned short *tile, int nrows,
                                                     const char *base, long long sd, int width,
                                                     int vec, IdxFn gidx)
{
    constexpr int LDS = DP + 8, CH = DP / 8;
    const int tid = threadIdx.x;
    /* Loops, not unrolled: the general path's index arithmetic once in the
     * code (the contiguous tiles of the KV loop take xattn_cuda_mma_stage_rows). */
    if (vec) {
#pragma unroll 1
        for (int e = tid; e < nrows * CH; e += NT) {
            const int rr = e / CH, d0 = (e % CH) * 8;
            unsigned short *dst = tile + rr * LDS + d0;
            const long long gi = gidx(rr);
            if (gi >= 0 && d0 < width)
                xattn_cuda_cp_async16(dst, base + (gi + d0) * 2);
            else
                *reinterpret_cast<uint4 *>(dst) = make_uint4(0u, 0u, 0u, 0u);
        }
    } else {
        const unsigned short *src = reinterpret_cast<const unsigned short *>(base);
#pragma unroll 1
        for (int e = tid; e < nrows * DP; e += NT) {
            const int rr = e / DP, d = e % DP;
            const long long gi = gidx(rr);
            tile[rr * LDS + d] =
                (gi >= 0 && d < width) ? src[gi + (long long)d * sd] : (unsigned short)0;
        }
    }
}

/* Whether xattn_cuda_mma_stage_rows applies to a tile of NR rows: a thread's
 * 16-byte chunks then share one column (NT a multiple of the chunks a row). */
template <int DP, int NT, int NR> struct xattn_cuda_mma_rows_ok {
    enum { value = NT % (DP / 8) == 0 && (NR * (DP / 8)) % NT == 0 };
};

/*
 * The fast path of xattn_cuda_mma_stage for a tile whose NR rows are all valid
 * and evenly spaced: row rr at element row0 + rr * ss, unit dim stride, 16-byte
 * aligned rows (P.vec). A thread's chunks share a column d0 and step by NT /
 * CH rows, so its addresses are one pointer and a stride: NR * CH / NT
 * cp.async a thread, no index arithmetic a chunk. Dims past `width` are zeros.
 */
template <int DP, int NT, int NR>
__device__ __forceinline__ void xattn_cuda_mma_stage_rows(unsigned short *tile, const char *base,
                                                          long long row0, long long ss, int width)
{
    constexpr int LDS = DP + 8, CH = DP / 8, STEP = NT / CH, N = NR * CH / NT;
    static_assert(xattn_cuda_mma_rows_ok<DP, NT, NR>::value, "chunks of one column a thread");
    const int tid = threadIdx.x, rr0 = tid / CH, d0 = (tid % CH) * 8;
    unsigned short *dst = tile + rr0 * LDS + d0;
    if (d0 < width) {
        const char *src = base + (row0 + rr0 * ss + d0) * 2;
        const long long step = (long long)STEP * ss * 2;
#pragma unroll
        for (int i = 0; i < N; i++)
            xattn_cuda_cp_async16(dst + i * STEP * LDS, src + i * step);
    } else {
#pragma unroll
        for (int i = 0; i < N; i++)
            *reinterpret_cast<uint4 *>(dst + i * STEP * LDS) = make_uint4(0u, 0u, 0u, 0u);
    }
}

/*
 * xattn_cuda_mma_stage for an fp8 K or V (base: bytes; E5M2 when e5m2, else
 * E4M3): each byte converted to T, which holds every fp8 value exactly (the
 * scale is applied to the scores and the output, not here). The same
 * element-to-thread mapping as xattn_cuda_mma_stage with the same vec (eight
 * elements a thread, as one 16-byte store, or one element a thread), so that
 * xattn_cuda_mma_nonfinite reads only what this thread wrote; plain byte
 * loads with any element stride (no cp.async: the conversion needs the
 * values in registers).
 */
template <int DP, int NT, typename T, typename IdxFn>
__device__ __forceinline__ void xattn_cuda_mma_stage_fp8(unsigned short *tile, int nrows,
                                                         const char *base, long long sd, int width,
                                                         int vec, int e5m2, IdxFn gidx)
{
    constexpr int LDS = DP + 8, CH = DP / 8;
    const int tid = threadIdx.x;
    const unsigned char *src = reinterpret_cast<const unsigned char *>(base);
    if (vec) {
#pragma unroll 1
        for (int e = tid; e < nrows * CH; e += NT) {
            const int rr = e / CH, d0 = (e % CH) * 8;
            const long long gi = gidx(rr);
            float f[8];
#pragma unroll
            for (int c = 0; c < 8; c++)
                f[c] = gi >= 0 && d0 + c < width
                           ? xattn_cuda_fp8_to_f32(src[gi + (long long)(d0 + c) * sd], e5m2)
                           : 0.0f;
            *reinterpret_cast<uint4 *>(tile + rr * LDS + d0) =
                make_uint4(xattn_cuda_pack2<T>(f[0], f[1]), xattn_cuda_pack2<T>(f[2], f[3]),
                           xattn_cuda_pack2<T>(f[4], f[5]), xattn_cuda_pack2<T>(f[6], f[7]));
        }
    } else {
#pragma unroll 1
        for (int e = tid; e < nrows * DP; e += NT) {
            const int rr = e / DP, d = e % DP;
            const long long gi = gidx(rr);
            const float f = (gi >= 0 && d < width)
                                ? xattn_cuda_fp8_to_f32(src[gi + (long long)d * sd], e5m2)
                                : 0.0f;
            tile[rr * LDS + d] = (unsigned short)(xattn_cuda_pack2<T>(f, 0.0f) & 0xffffu);
        }
    }
}

#endif /* XATTN_CUDA_MMA_ARCH */

/* FP8 = 1: K/V are fp8 (E4M3 or E5M2, P.k.dt), converted to T in the tile
 * load, with the scales on the scores and the output. A template parameter,
 * not a run-time test, so that the 16-bit kernels keep their registers (the
 * run-time form took d64 from 128 to 157 on sm_80). */
template <int DP, typename T, int FP8, int NARROW>
__global__ void __launch_bounds__(32 * xattn_cuda_mma_cfg<DP>::NW)
    xattn_cuda_flash_mma_kernel(const xattn_cuda_kparams P)
{
#if XATTN_CUDA_MMA_ARCH
    constexpr int MT = xattn_cuda_mma_pick<DP, NARROW>::MT, NW = xattn_cuda_mma_cfg<DP>::NW;
    constexpr int ST = xattn_cuda_mma_pick<DP, NARROW>::ST; /* K/V ring stages */
    constexpr int BN = xattn_cuda_mma_pick<DP, NARROW>::BN, NT = 32 * NW;
    constexpr int BM = xattn_cuda_mma_pick<DP, NARROW>::BM;
    constexpr int LDS = xattn_cuda_mma_pick<DP, NARROW>::LDS;
    constexpr int NS = BN / 8; /* n8 tiles of S per m16 tile */
    constexpr int NO = DP / 8; /* n8 tiles of O per m16 tile */
    constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
    static_assert(DP % 16 == 0 && BN % 16 == 0 && XATTN_CUDA_SPLIT_UNIT % BN == 0, "tile shape");
    static_assert(ST >= 1 && ST <= 3, "K/V ring stages");
    static_assert(BM <= NT, "one thread per row for the row setup");

    XATTN_CUDA_DYN_SMEM(unsigned char, xattn_cuda_dyn_smem);
    /* Q [BM][LDS], then the ring: K of stage 0 .. ST-1, V of stage 0 .. ST-1. */
    unsigned short *qs = reinterpret_cast<unsigned short *>(xattn_cuda_dyn_smem);
    unsigned short *const ks0 = qs + BM * LDS;
    unsigned short *const vs0 = ks0 + ST * BN * LDS;
    __shared__ xattn_cuda_row rows[BM];
    __shared__ long long qidx[BM];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int gq = lane >> 2, cq = lane & 3; /* fragment row group, column pair */
    const xattn_cuda_blk blk = xattn_cuda_block_decode(P);
    const xattn_cuda_seq s = xattn_cuda_seq_load(P, blk.b);
    /* An fp8 K's head scale multiplies the scores (its tile holds the bare
     * fp8 values, exact in T). */
    const float qk_scale =
        FP8 ? P.scale * xattn_cuda_kv_scale(P.k_scale, P.ks_sh, blk.hk) : P.scale;
    /* Scores are kept in log2 units (s * log2 e): p = 2^(x - m), one subtraction
     * an element; m and LSE convert back. */
    const float scale2 = qk_scale * LOG2E;
    const int g = P.group;
    const long long R = (long long)s.rows * g;
    const long long r0 = (long long)blk.rb * BM;
    if (r0 >= R) {
        xattn_cuda_count_put(P, 0, 0, 0);
        return;
    }
    int kmin, kmax;
    xattn_cuda_split_range(P, s, blk.split, &kmin, &kmax);

    if (tid < BM) {
        const long long r = r0 + tid;
        xattn_cuda_row rw;
        rw.lo = rw.hi = 0;
        rw.pos = 0;
        rw.slope = 0.0f;
        rw.bias_idx = 0;
        long long qi = -1;
        if (r < R) {
            const int i = (int)(r / g), h = blk.hk * g + (int)(r % g);
            xattn_cuda_row_init(P, s, blk.b, h, i, kmin, kmax, &rw);
            if (i < s.Lq)
                qi = xattn_cuda_row_index(P.q, blk.b, s.q0 + i, h);
        }
        rows[tid] = rw;
        qidx[tid] = qi;
    }

    /* Union of the rows' intervals [lo_u, hi_u) (the tiles to visit), and
     * their intersection [lo_all, hi_all) when every row of the block is a
     * real row (a tile inside it needs no mask). */
    int lo_u = 0, hi_u = 0, lo_all = 0, hi_all = 0;
    {
        const long long rend = r0 + BM < R ? r0 + BM : R;
        const int i_first = (int)(r0 / g);
        const int i_lastrow = (int)((rend - 1) / g);
        const int i_last = min(i_lastrow, s.Lq - 1);
        if (i_first <= i_last) {
            /* The union (semantics header: rows without keys do not count;
             * none at all: no tile to run), and the intersection from the
             * first and last rows. */
            xattn_cuda_block_range(P, s, i_first, i_last + 1, kmin, kmax, &lo_u, &hi_u);
            int unused;
            xattn_cuda_row_range(P, s, i_first, kmin, kmax, &unused, &hi_all);
            xattn_cuda_row_range(P, s, i_last, kmin, kmax, &lo_all, &unused);
            if (rend != r0 + BM || i_lastrow != i_last)
                lo_all = hi_all = 0; /* rows past R or padding rows: always mask */
        }
    }
    __syncthreads();

    float o[MT][NO][4];
    /* l: the row sum of p (for LSE); lr: of p rounded to T, the weights P.V
     * multiplies (for O, so that they sum to 1). */
    float m[MT][2], l[MT][2], lr[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int n = 0; n < NO; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[mt][n][e] = 0.0f;
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            m[mt][hr] = -XATTN_CUDA_INF;
            l[mt][hr] = 0.0f;
            lr[mt][hr] = 0.0f;
        }
    }

    const long long kh = (long long)blk.hk * P.k.sh, vh = (long long)blk.hk * P.v.sh;
    const int k0 = s.k0;
    auto qrow = [&](int rr) -> long long { return qidx[rr]; };
    /* Tile t's K / V rows (t < hi_u): key t + cc at base + cc * ss when the
     * tile lies in one page (contiguous K/V, or a page size that is a
     * multiple of BN: one table look-up a tile), else a look-up per key. */
    /* fp8 K/V (both of one dtype, E5M2 or E4M3): converted to T as they are
     * staged; `if constexpr` leaves the 16-bit kernels as they were. */
    auto load_k = [&](int t, unsigned short *ks) {
        const long long kt = xattn_cuda_kv_tile(P, P.k, blk.b, k0, t, BN);
        auto kidx = [&](int cc) -> long long {
            const int j = t + cc;
            if (j < lo_u || j >= hi_u)
                return -1;
            return kh + (kt >= 0 ? kt + (long long)cc * P.k.ss
                                 : xattn_cuda_kv_index(P, P.k, blk.b, k0, j));
        };
        if constexpr (FP8)
            xattn_cuda_mma_stage_fp8<DP, NT, T>(ks, BN, P.k.ptr, P.k.sd, P.D, P.vec,
                                                P.k.dt == XATTN_DTYPE_FP8_E5M2, kidx);
        else {
            /* A tile in one page (or contiguous K/V) whose keys are all
             * valid: the fast path. */
            if constexpr (xattn_cuda_mma_rows_ok<DP, NT, BN>::value) {
                if (P.vec && kt >= 0 && t >= lo_u && t + BN <= hi_u) {
                    xattn_cuda_mma_stage_rows<DP, NT, BN>(ks, P.k.ptr, kh + kt, P.k.ss, P.D);
                    return;
                }
            }
            xattn_cuda_mma_stage<DP, NT>(ks, BN, P.k.ptr, P.k.sd, P.D, P.vec, kidx);
        }
    };
    auto load_v = [&](int t, unsigned short *vs) {
        const long long vt = xattn_cuda_kv_tile(P, P.v, blk.b, k0, t, BN);
        auto vidx = [&](int cc) -> long long {
            const int j = t + cc;
            if (j < lo_u || j >= hi_u)
                return -1;
            return vh + (vt >= 0 ? vt + (long long)cc * P.v.ss
                                 : xattn_cuda_kv_index(P, P.v, blk.b, k0, j));
        };
        if constexpr (FP8)
            xattn_cuda_mma_stage_fp8<DP, NT, T>(vs, BN, P.v.ptr, P.v.sd, P.Dv, P.vec,
                                                P.v.dt == XATTN_DTYPE_FP8_E5M2, vidx);
        else {
            /* A tile in one page (or contiguous K/V) whose keys are all
             * valid: the fast path. */
            if constexpr (xattn_cuda_mma_rows_ok<DP, NT, BN>::value) {
                if (P.vec && vt >= 0 && t >= lo_u && t + BN <= hi_u) {
                    xattn_cuda_mma_stage_rows<DP, NT, BN>(vs, P.v.ptr, vh + vt, P.v.ss, P.Dv);
                    return;
                }
            }
            xattn_cuda_mma_stage<DP, NT>(vs, BN, P.v.ptr, P.v.sd, P.Dv, P.vec, vidx);
        }
    };

    const int t_begin = lo_u / BN * BN;
    const int ntiles = t_begin < hi_u ? (int)xattn_cuda_cdiv(hi_u - t_begin, BN) : 0;
    /* The ring: tile i lives in stage i % ST and is commit group i (Q joins
     * group 0). ST >= 2: the prologue issues tiles 0 .. ST-2, iteration i
     * issues tile i + ST - 1 (after the barrier that says every warp is done
     * with tile i - 1, whose stage it takes), and tile i has landed once at
     * most ST - 2 groups are pending. ST = 1: iteration i issues tile i + 1
     * after a second barrier, at its end. */
    constexpr int WAIT = ST >= 2 ? ST - 2 : 0;
    if (ntiles > 0) {
        xattn_cuda_mma_stage<DP, NT>(qs, BM, P.q.ptr, P.q.sd, P.D, P.vec, qrow);
#pragma unroll
        for (int i = 0; i < (ST >= 2 ? ST - 1 : 1); i++) {
            if (i < ntiles) {
                load_k(t_begin + i * BN, ks0 + i * BN * LDS);
                load_v(t_begin + i * BN, vs0 + i * BN * LDS);
            }
            xattn_cuda_cp_async_commit(); /* group i: tile i (maybe empty) */
        }
    }

    /* A warp whose rows all lie past R (decode, short groups) only helps
     * load the tiles. */
    const bool live = r0 + warp * 16 * MT < R;
    /* Q's A fragments stay in registers across the KV loop when MT * DP <=
     * 128 (4 * DP / 16 registers an m16 tile): the narrow shape up to d128,
     * the wide one at d64. Else they are read from shared memory each tile:
     * d256 (its O accumulators alone take 128 registers), and the wide shape
     * from d80 (in registers, d96 spills 20 bytes, d128 140 on sm_90). */
    constexpr bool QREG = MT * DP <= XATTN_CUDA_QREG_MAX;
    unsigned qa[MT][QREG ? DP / 16 : 1][4];
    if (QREG && ntiles > 0) {
        xattn_cuda_cp_async_wait<WAIT>(); /* Q and tile 0 have landed */
        __syncthreads();
        if (live) {
#pragma unroll
            for (int kk = 0; kk < (QREG ? DP / 16 : 1); kk++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    xattn_cuda_ldsm_x4(qa[mt][kk],
                                       qs + (warp * 16 * MT + mt * 16 + (lane & 15)) * LDS +
                                           kk * 16 + (lane >> 4) * 8);
        }
    }
#pragma unroll 1
    for (int it = 0; it < ntiles; it++) {
        const int t = t_begin + it * BN;
        const int st = ST == 1 ? 0 : it % ST;
        const unsigned short *ks = ks0 + st * BN * LDS, *vs = vs0 + st * BN * LDS;
        float sacc[MT][NS][4]; /* S */
        /* P rounded to T, packed as the A fragments of P.V take it: pk[mt][n][hr]
         * holds keys n*8 + 2c, +1 of row g + 8 hr (the registers of S are
         * free once P is packed: fewer live in P.V with two m16 tiles a warp). */
        unsigned pk[MT][NS][2];
        xattn_cuda_cp_async_wait<WAIT>(); /* tile it (and Q) have landed */
        /* The one barrier of a tile (ST >= 2): tile it is published, every
         * warp is done with tile it - 1, and one flag says whether the V tile
         * holds an inf or NaN (each thread checks what it staged). */
        const int vbad = __syncthreads_or(xattn_cuda_mma_nonfinite<DP, NT, T>(vs, BN, P.vec));
        if constexpr (ST >= 2) {
            const int nx = it + ST - 1, sx = nx % ST;
            if (nx < ntiles) {
                load_k(t_begin + nx * BN, ks0 + sx * BN * LDS);
                load_v(t_begin + nx * BN, vs0 + sx * BN * LDS);
            }
            xattn_cuda_cp_async_commit(); /* group nx (maybe empty) */
        }

        /* S = Q K^T */
        if (live) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        sacc[mt][n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < DP / 16; kk++) {
                unsigned a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if constexpr (QREG) {
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            a[mt][e] = qa[mt][QREG ? kk : 0][e];
                    } else {
                        xattn_cuda_ldsm_x4(a[mt],
                                           qs + (warp * 16 * MT + mt * 16 + (lane & 15)) * LDS +
                                               kk * 16 + (lane >> 4) * 8);
                    }
                }
#pragma unroll
                for (int nn = 0; nn < BN / 16; nn++) {
                    unsigned b[4];
                    xattn_cuda_ldsm_x4(b, ks + (nn * 16 + (lane & 7) + (lane >> 4) * 8) * LDS +
                                              kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        xattn_cuda_mma<T>(sacc[mt][2 * nn], a[mt], b[0], b[1]);
                        xattn_cuda_mma<T>(sacc[mt][2 * nn + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        if (live) {
            /* Scale, score mods, masks. */
            const bool full = t >= lo_all && t + BN <= hi_all && !P.has_mods;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    if (full) {
#pragma unroll
                        for (int n = 0; n < NS; n++) {
                            sacc[mt][n][2 * hr] *= scale2;
                            sacc[mt][n][2 * hr + 1] *= scale2;
                        }
                    } else if (!P.has_mods) {
                        /* The row's keys from shared memory (registers kept
                         * for the accumulators: two m16 tiles a warp). */
                        const xattn_cuda_row &rw = rows[warp * 16 * MT + mt * 16 + gq + 8 * hr];
                        const int lo = rw.lo, hi = rw.hi;
#pragma unroll
                        for (int n = 0; n < NS; n++)
#pragma unroll
                            for (int e2 = 0; e2 < 2; e2++) {
                                const int j = t + n * 8 + cq * 2 + e2;
                                float &x = sacc[mt][n][2 * hr + e2];
                                x = (j >= lo && j < hi) ? x * scale2 : -XATTN_CUDA_INF;
                            }
                    } else {
                        /* Score mods: a run-time loop over this lane's keys
                         * (the mods' code once, not once a score). */
                        const xattn_cuda_row rw = rows[warp * 16 * MT + mt * 16 + gq + 8 * hr];
#pragma unroll 1
                        for (int n = 0; n < NS; n++) {
                            const int j = t + n * 8 + cq * 2;
                            const float x0 = xattn_cuda_pick<NS>(sacc[mt], n, 2 * hr);
                            const float x1 = xattn_cuda_pick<NS>(sacc[mt], n, 2 * hr + 1);
                            const float y0 = xattn_cuda_mod_score(P, rw, x0 * qk_scale, j) * LOG2E;
                            const float y1 =
                                xattn_cuda_mod_score(P, rw, x1 * qk_scale, j + 1) * LOG2E;
#pragma unroll
                            for (int k = 0; k < NS; k++)
                                if (k == n) {
                                    sacc[mt][k][2 * hr] = y0;
                                    sacc[mt][k][2 * hr + 1] = y1;
                                }
                        }
                    }
                }
            }

            /* Online softmax: a row's BN scores are spread over the 4 lanes of a quad. */
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    float tmax = -XATTN_CUDA_INF;
#pragma unroll
                    for (int n = 0; n < NS; n++) {
                        tmax = xattn_cuda_max_nan(tmax, sacc[mt][n][2 * hr]);
                        tmax = xattn_cuda_max_nan(tmax, sacc[mt][n][2 * hr + 1]);
                    }
                    tmax = xattn_cuda_max_nan(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
                    tmax = xattn_cuda_max_nan(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
                    float alpha;
                    const float mu = xattn_cuda_softmax_rescale2(&m[mt][hr], tmax, &alpha);
                    float rs = 0.0f, rsr = 0.0f;
#pragma unroll
                    for (int n = 0; n < NS; n++) {
                        /* x - mu: the row's maximum gives 2^0 = 1 exactly. (The
                         * former fmaf(x, LOG2E, -mu * LOG2E) was off by the
                         * rounding of mu * LOG2E: an output ulp at large scores.) */
                        const float p0 = exp2f(sacc[mt][n][2 * hr] - mu);
                        const float p1 = exp2f(sacc[mt][n][2 * hr + 1] - mu);
                        rs += p0 + p1;
                        const unsigned u = xattn_cuda_pack2<T>(p0, p1);
                        const float r0 = xattn_cuda_bits_f32<T>((unsigned short)(u & 0xffffu));
                        const float r1 = xattn_cuda_bits_f32<T>((unsigned short)(u >> 16));
                        pk[mt][n][hr] = u;
                        rsr += r0 + r1;
                    }
                    /* this lane's part of the row sums */
                    l[mt][hr] = l[mt][hr] * alpha + rs;
                    lr[mt][hr] = lr[mt][hr] * alpha + rsr;
#pragma unroll
                    for (int n = 0; n < NO; n++) {
                        o[mt][n][2 * hr] *= alpha;
                        o[mt][n][2 * hr + 1] *= alpha;
                    }
                }
            }
        }

        /* O += P V; the careful path for a V tile with an inf or NaN. */
        if (live && vbad) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const xattn_cuda_row rw = rows[warp * 16 * MT + mt * 16 + gq + 8 * hr];
                    /* A run-time loop over the tile's keys (the body once in
                     * the code: this path is cold). */
#pragma unroll 1
                    for (int kb = 0; kb < BN; kb++) {
                        /* Key kb = n*8 + 2*src + e2 of the row: quad lane src
                         * holds it in its sacc[n][2*hr + e2]. */
                        const int n = kb >> 3, src = (kb >> 1) & 3, e2 = kb & 1;
                        const unsigned w = xattn_cuda_pick2<NS>(pk[mt], n, hr);
                        const float mine =
                            xattn_cuda_bits_f32<T>((unsigned short)(e2 ? w >> 16 : w & 0xffffu));
                        const float p = __shfl_sync(0xffffffffu, mine, (lane & ~3) | src);
                        if (xattn_cuda_key_masked(P, rw, t + kb))
                            continue;
                        const unsigned short *vrow = vs + kb * LDS;
#pragma unroll
                        for (int nd = 0; nd < NO; nd++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                float &acc = o[mt][nd][2 * hr + e];
                                acc = xattn_cuda_pv_add(
                                    acc, p, xattn_cuda_bits_f32<T>(vrow[nd * 8 + cq * 2 + e]));
                            }
                    }
                }
            }
        } else if (live) {
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                unsigned a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    a[mt][0] = pk[mt][2 * kk][0];
                    a[mt][1] = pk[mt][2 * kk][1];
                    a[mt][2] = pk[mt][2 * kk + 1][0];
                    a[mt][3] = pk[mt][2 * kk + 1][1];
                }
#pragma unroll
                for (int dp = 0; dp < DP / 16; dp++) {
                    unsigned b[4];
                    xattn_cuda_ldsm_x4_trans(
                        b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dp * 16 +
                               (lane >> 4) * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        xattn_cuda_mma<T>(o[mt][2 * dp], a[mt], b[0], b[1]);
                        xattn_cuda_mma<T>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        if constexpr (ST == 1) {
            __syncthreads(); /* every warp is done with tile it */
            if (it + 1 < ntiles) {
                load_k(t + BN, ks0);
                load_v(t + BN, vs0);
            }
            xattn_cuda_cp_async_commit(); /* group it + 1 (maybe empty) */
        }
    }
    xattn_cuda_cp_async_wait<0>();
    {
        /* What the loop above ran, from its bounds (no counter lives through the
         * loop): its tiles, and the keys of [lo_u, hi_u) that it loaded. */
        const long long tiles = ntiles;
        const long long live_warps = min((long long)NW, xattn_cuda_cdiv(R - r0, 16 * MT));
        const unsigned long long pairs = (unsigned long long)(tiles * live_warps * 16 * MT * BN);
        xattn_cuda_count_put(P, pairs, pairs, tiles ? (unsigned long long)(hi_u - lo_u) : 0ull);
    }

    /* Row sums over the quad, then O = acc / lr, LSE = m + log l. */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            l[mt][hr] += __shfl_xor_sync(0xffffffffu, l[mt][hr], 1);
            l[mt][hr] += __shfl_xor_sync(0xffffffffu, l[mt][hr], 2);
            lr[mt][hr] += __shfl_xor_sync(0xffffffffu, lr[mt][hr], 1);
            lr[mt][hr] += __shfl_xor_sync(0xffffffffu, lr[mt][hr], 2);
        }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const long long r = r0 + warp * 16 * MT + mt * 16 + gq + 8 * hr;
            if (r >= R)
                continue;
            const int i = (int)(r / g), h = blk.hk * g + (int)(r % g);
            const float mm = m[mt][hr];
            const bool empty = mm == -XATTN_CUDA_INF;
            /* The max in natural units with the LSE's sum ll and the
             * output's sum llr; FLASH folds the sink into both. */
            float me = mm * LN2, ll = l[mt][hr], mo = me, llr = lr[mt][hr];
            float c = 1.0f;
            if (P.splits == 0 && i < s.Lq) {
                (void)xattn_cuda_sink_fold(P, h, &me, &ll);
                c = xattn_cuda_sink_fold(P, h, &mo, &llr);
            }
            /* An fp8 V's head scale joins the normalization. */
            const float inv =
                empty ? 0.0f
                      : (FP8 ? c / llr * xattn_cuda_kv_scale(P.v_scale, P.vs_sh, blk.hk) : c / llr);
            const float lse = xattn_sem_lse(me, ll);
            if (P.splits > 0) {
                const long long pr = xattn_cuda_part_row(P, blk.split, blk.b, h, i);
                float *po = P.part_o + pr * P.Dv;
#pragma unroll
                for (int n = 0; n < NO; n++)
#pragma unroll
                    for (int e2 = 0; e2 < 2; e2++) {
                        const int d = n * 8 + cq * 2 + e2;
                        if (d < P.Dv)
                            po[d] = empty ? 0.0f : o[mt][n][2 * hr + e2] * inv;
                    }
                if (cq == 0)
                    P.part_lse[pr] = lse;
            } else {
                const long long oi = xattn_cuda_row_index(P.o, blk.b, s.q0 + i, h);
#pragma unroll
                for (int n = 0; n < NO; n++)
#pragma unroll
                    for (int e2 = 0; e2 < 2; e2++) {
                        const int d = n * 8 + cq * 2 + e2;
                        if (d < P.Dv)
                            xattn_cuda_store(P.o.ptr, P.o.dt, oi + (long long)d * P.o.sd,
                                             empty ? 0.0f : o[mt][n][2 * hr + e2] * inv);
                    }
                if (cq == 0 && P.has_lse)
                    ((float *)P.lse.ptr)[xattn_cuda_lse_index(P, blk.b, h, s.q0 + i)] = lse;
            }
        }
    }
#endif /* XATTN_CUDA_MMA_ARCH */
}

/* Host launcher of one head-dim instantiation (f16 or bf16 from P.q.dt, fp8 K/V
 * from P.k.dt, the shape from a->mma_narrow). */
template <int DP, int NARROW>
static cudaError_t xattn_cuda_flash_mma_launch_shape(const xattn_cuda_kparams &P,
                                                     const xattn_cuda_args *a, unsigned nblocks)
{
    const int smem = xattn_cuda_mma_pick<DP, NARROW>::SMEM;
    const unsigned threads = xattn_cuda_threads(a, 32 * xattn_cuda_mma_cfg<DP>::NW);
    const int bf = P.q.dt == XATTN_DTYPE_BF16;
    const int fp8 = P.k.dt == XATTN_DTYPE_FP8_E4M3 || P.k.dt == XATTN_DTYPE_FP8_E5M2;
    void (*kernel)(const xattn_cuda_kparams) =
        bf ? (fp8 ? xattn_cuda_flash_mma_kernel<DP, __nv_bfloat16, 1, NARROW>
                  : xattn_cuda_flash_mma_kernel<DP, __nv_bfloat16, 0, NARROW>)
           : (fp8 ? xattn_cuda_flash_mma_kernel<DP, __half, 1, NARROW>
                  : xattn_cuda_flash_mma_kernel<DP, __half, 0, NARROW>);
    if (smem > 48 * 1024) {
        /* Before every launch that needs it, never cached: the attribute
         * belongs to the function in the device's current (primary) context,
         * and a cudaDeviceReset by the host program destroys that context
         * with the attribute, so a "done" flag kept here would outlive it and
         * the next launch would fail. The call is host-side bookkeeping of
         * the driver (no GPU round trip), cheap next to the launch itself;
         * two threads setting the same value at once is harmless. */
        const cudaError_t e =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
    }
    XATTN_CUDA_LAUNCH(kernel, nblocks, threads, smem, a->stream, P);
    return cudaGetLastError();
}

template <int DP>
static cudaError_t xattn_cuda_flash_mma_launch(const xattn_cuda_kparams &P,
                                               const xattn_cuda_args *a, unsigned nblocks)
{
    if (nblocks == 0)
        return cudaSuccess;
    return a->mma_narrow ? xattn_cuda_flash_mma_launch_shape<DP, 1>(P, a, nblocks)
                         : xattn_cuda_flash_mma_launch_shape<DP, 0>(P, a, nblocks);
}

#endif /* XATTN_CUDA_FLASH_MMA_CUH */
