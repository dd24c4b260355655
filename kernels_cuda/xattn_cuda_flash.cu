/*
 * FLASH and SPLITKV entry points: the choice between the mma and simt tile
 * loops (a table of head-dim instantiations, not #ifdefs), the split count,
 * the kernel-side limits, and SPLITKV's combine kernel.
 */
#include <limits.h>
#include <stdio.h>

#include "xattn_cuda_common.cuh"
#include "xattn_cuda_simt.cuh"

/* ---- path choice ---------------------------------------------------------- */

typedef cudaError_t (*xattn_cuda_mma_fn)(const xattn_cuda_kparams &, const xattn_cuda_args *,
                                         unsigned);

struct xattn_cuda_plan {
    int mma;              /* 1: tensor-core path */
    int narrow;           /* the mma path's narrow shape (xattn_cuda_mma_cfg) */
    int dp;               /* padded head dim of the mma instantiation */
    int bm;               /* packed query rows per block */
    int bn;               /* keys per KV tile */
    xattn_cuda_mma_fn fn; /* mma launcher */
    const char *name;
};

static const struct {
    int dp;
    xattn_cuda_mma_fn fn;
    const char *name_f16, *name_bf16;
} xattn_cuda_mma_table[] = {
    {64, xattn_cuda_flash_mma_d64, "mma-d64-f16", "mma-d64-bf16"},
    {80, xattn_cuda_flash_mma_d80, "mma-d80-f16", "mma-d80-bf16"},
    {96, xattn_cuda_flash_mma_d96, "mma-d96-f16", "mma-d96-bf16"},
    {128, xattn_cuda_flash_mma_d128, "mma-d128-f16", "mma-d128-bf16"},
    {256, xattn_cuda_flash_mma_d256, "mma-d256-f16", "mma-d256-bf16"},
};

static xattn_cuda_plan xattn_cuda_plan_of(const xattn_cuda_args *a)
{
    const xattn_problem *p = a->p;
    xattn_cuda_plan pl;
    pl.mma = 0;
    pl.narrow = 0;
    pl.dp = 0;
    pl.bm = XATTN_CUDA_SIMT_BM;
    pl.bn = XATTN_CUDA_SIMT_TILE;
    pl.fn = NULL;
    pl.name = "simt";
    /* K/V of q's 16-bit dtype, or fp8 (converted to q's dtype in the tile load).
     * q8_0 takes the SIMT path: d * qs needs more bits than a 16-bit type holds. */
    const int kv_ok = p->k.dtype == p->q.dtype || p->k.dtype == XATTN_DTYPE_FP8_E4M3 ||
                      p->k.dtype == XATTN_DTYPE_FP8_E5M2;
    if (a->force_simt || a->cc < 80 || !kv_ok || p->q.dtype == XATTN_DTYPE_F32)
        return pl;
    const int dp = xattn_cuda_mma_dp(p->D, p->Dv);
    /* Dynamic tile memory plus the static row table (40 bytes a row). */
    /* The shape asked for (XATTN_CUDA_MMA_SHAPE), else by head dim: narrow for
     * d96 and d128, whose narrow form keeps Q in registers and issues fewer
     * instructions per HMMA (docs/backends.md, "Static measure"), wide for the
     * others. Wide falls back to narrow where its tiles do not fit the device's
     * shared memory, and narrow to simt. */
    int narrow = a->mma_narrow >= 0 ? a->mma_narrow : (dp == 96 || dp == 128);
    if (!narrow &&
        xattn_cuda_mma_smem(dp, 0) + (size_t)xattn_cuda_mma_bm(dp, 0) * 40 > a->smem_optin)
        narrow = 1;
    const int bm = xattn_cuda_mma_bm(dp, narrow);
    if (xattn_cuda_mma_smem(dp, narrow) + (size_t)bm * 40 > a->smem_optin)
        return pl;
    for (size_t t = 0; t < sizeof xattn_cuda_mma_table / sizeof xattn_cuda_mma_table[0]; t++) {
        if (xattn_cuda_mma_table[t].dp != dp)
            continue;
        pl.mma = 1;
        pl.narrow = narrow;
        pl.dp = dp;
        pl.bm = bm;
        pl.bn = xattn_cuda_mma_bn(dp, narrow);
        pl.fn = xattn_cuda_mma_table[t].fn;
        pl.name = p->q.dtype == XATTN_DTYPE_BF16 ? xattn_cuda_mma_table[t].name_bf16
                                                 : xattn_cuda_mma_table[t].name_f16;
    }
    return pl;
}

/* 16-byte cp.async allowed: unit dim stride, 16-byte aligned rows, D and Dv
 * multiples of 8 (a stride over an extent of 1 does not matter). */
static int xattn_cuda_view_vec_ok(const void *base, const xattn_view *v, int64_t nb, int64_t ns,
                                  int64_t nh)
{
    const uintptr_t addr = (uintptr_t)base + (uintptr_t)(v->off * 2);
    return v->sd == 1 && addr % 16 == 0 && (nb <= 1 || v->sb % 8 == 0) &&
           (ns <= 1 || v->ss % 8 == 0) && (nh <= 1 || v->sh % 8 == 0);
}

static int xattn_cuda_vec_ok(const xattn_cuda_args *a)
{
    const xattn_problem *p = a->p;
    if (p->D % 8 != 0 || p->Dv % 8 != 0)
        return 0;
    /* Packed batches: rows are tokens of one tensor; any token may be a start.
     * A paged cache: K/V rows are slots of pages (sb: the page stride). */
    const int64_t nb = p->varlen ? 1 : p->B;
    const int64_t nsq = p->varlen ? 2 : p->Sq, nsk = p->varlen ? 2 : p->Sk;
    const int64_t nbk = p->paged ? p->num_pages : nb, nsp = p->paged ? p->page_size : nsk;
    /* fp8 K/V are staged with byte loads (xattn_cuda_mma_stage_fp8): any alignment. */
    const int fp8 = p->k.dtype == XATTN_DTYPE_FP8_E4M3 || p->k.dtype == XATTN_DTYPE_FP8_E5M2;
    return xattn_cuda_view_vec_ok(a->q, &p->q, nb, nsq, p->Hq) &&
           (fp8 || (xattn_cuda_view_vec_ok(a->k, &p->k, nbk, nsp, p->Hkv) &&
                    xattn_cuda_view_vec_ok(a->v, &p->v, nbk, nsp, p->Hkv)));
}

extern "C" const char *xattn_cuda_flash_path(const xattn_cuda_args *a)
{
    return xattn_cuda_plan_of(a).name;
}

extern "C" void xattn_cuda_flash_tiles(const xattn_cuda_args *a, int *tile_q, int *tile_k,
                                       int *tile_heads)
{
    /* A block packs the query heads of one KV head with positions, so its
     * tile in positions of one head is bm / group (at least 1). */
    const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
    const long long g = a->p->group > 0 ? a->p->group : 1;
    *tile_q = (int)(pl.bm / g > 0 ? pl.bm / g : 1);
    *tile_heads = (int)(g < pl.bm ? g : pl.bm);
    *tile_k = pl.bn;
}

static xattn_cuda_kparams xattn_cuda_flash_params(const xattn_cuda_args *a,
                                                  const xattn_cuda_plan &pl, long long *blocks)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P = xattn_cuda_make_params(a);
    P.nrb = (int)xattn_cuda_cdiv(p->Sq * p->group, pl.bm);
    P.vec = pl.mma ? xattn_cuda_vec_ok(a) : 0;
    *blocks = (long long)P.nrb * p->Hkv * p->B;
    return P;
}

extern "C" cudaError_t xattn_cuda_flash(const xattn_cuda_args *a)
{
    const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
    long long blocks;
    const xattn_cuda_kparams P = xattn_cuda_flash_params(a, pl, &blocks);
    if (pl.mma) {
        /* The launcher reads the shape from a->mma_narrow: the plan's. */
        xattn_cuda_args an = *a;
        an.mma_narrow = pl.narrow;
        return pl.fn(P, &an, (unsigned)blocks);
    }
    return xattn_cuda_flash_simt_launch(P, a, (unsigned)blocks);
}

/* ---- limits --------------------------------------------------------------- */

extern "C" int xattn_cuda_check_limits(const xattn_cuda_args *a, int splits, char *why, size_t n)
{
    const xattn_problem *p = a->p;
    const long long big = INT_MAX - 4096; /* positions + a tile stay in int */
    if (p->Sq > big || p->Sk > big || p->B > INT_MAX || p->Hq > INT_MAX) {
        snprintf(why, n, "Sq %lld, Sk %lld, B %lld, Hq %lld: the CUDA kernels take at most %lld",
                 (long long)p->Sq, (long long)p->Sk, (long long)p->B, (long long)p->Hq, big);
        return 1;
    }
    /* Every grid is one-dimensional: at most INT_MAX blocks. Sizes are bounded
     * by the validated views, so these products stay far from overflowing. */
    const long long rows = p->B * p->Hq * p->Sq;
    long long blocks = 0;
    const char *what = "";
    if (p->algo == XATTN_ALGO_NAIVE) {
        const long long nrb = xattn_cuda_cdiv(p->Sq * p->group, 64);
        const long long qk = nrb * xattn_cuda_cdiv(p->Sk, 64) * p->Hkv * p->B;
        const long long pv = nrb * xattn_cuda_cdiv(p->Dv, 64) * p->Hkv * p->B;
        blocks = qk > pv ? qk : pv;
        if (xattn_cuda_cdiv(rows, 8) > blocks)
            blocks = xattn_cuda_cdiv(rows, 8);
        what = "naive";
    } else {
        const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
        blocks =
            xattn_cuda_cdiv(p->Sq * p->group, pl.bm) * p->Hkv * p->B * (splits > 0 ? splits : 1);
        if (splits > 0 && xattn_cuda_cdiv(rows, 4) > blocks)
            blocks = xattn_cuda_cdiv(rows, 4);
        what = p->algo == XATTN_ALGO_SPLITKV ? "splitkv" : "flash";
    }
    if (blocks > INT_MAX) {
        snprintf(why, n, "%s would need %lld thread blocks in one grid (at most %d)", what, blocks,
                 INT_MAX);
        return 1;
    }
    return 0;
}

/* ---- executed work -------------------------------------------------------- */

extern "C" long long xattn_cuda_count_slots(const xattn_cuda_args *a, int splits)
{
    const xattn_problem *p = a->p;
    if (p->algo == XATTN_ALGO_NAIVE) {
        long long qk, pv;
        xattn_cuda_naive_blocks(p, &qk, &pv);
        return qk + pv;
    }
    /* The blocks of xattn_cuda_flash_params (times the splits). */
    const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
    return xattn_cuda_cdiv(p->Sq * p->group, pl.bm) * p->Hkv * p->B * (splits > 0 ? splits : 1);
}

#define XATTN_CUDA_COUNT_THREADS 512

/* One block: out[k] = sum over the slots of cnt[3 * slot + k]. */
__global__ void __launch_bounds__(XATTN_CUDA_COUNT_THREADS)
    xattn_cuda_count_sum_kernel(const unsigned long long *cnt, long long slots,
                                unsigned long long *out)
{
    __shared__ unsigned long long part[3][XATTN_CUDA_COUNT_THREADS];
    const int tid = threadIdx.x;
    unsigned long long s0 = 0, s1 = 0, s2 = 0;
    for (long long i = tid; i < slots; i += XATTN_CUDA_COUNT_THREADS) {
        s0 += cnt[3 * i];
        s1 += cnt[3 * i + 1];
        s2 += cnt[3 * i + 2];
    }
    part[0][tid] = s0;
    part[1][tid] = s1;
    part[2][tid] = s2;
    for (int w = XATTN_CUDA_COUNT_THREADS / 2; w > 0; w >>= 1) {
        __syncthreads();
        if (tid < w)
            for (int k = 0; k < 3; k++)
                part[k][tid] += part[k][tid + w];
    }
    if (tid == 0)
        for (int k = 0; k < 3; k++)
            out[k] = part[k][0];
}

extern "C" cudaError_t xattn_cuda_count_sum(const xattn_cuda_args *a, long long slots,
                                            unsigned long long *out)
{
    XATTN_CUDA_LAUNCH(xattn_cuda_count_sum_kernel, 1u,
                      xattn_cuda_threads(a, XATTN_CUDA_COUNT_THREADS), 0, a->stream, a->counts,
                      slots, out);
    return cudaGetLastError();
}

/* ---- SPLITKV -------------------------------------------------------------- */

extern "C" int xattn_cuda_splitkv_num_splits(const xattn_cuda_args *a)
{
    const xattn_problem *p = a->p;
    const long long units = p->Sk > 0 ? xattn_cuda_cdiv(p->Sk, XATTN_CUDA_SPLIT_UNIT) : 1;
    long long s;
    if (p->num_splits > 0) {
        s = p->num_splits;
    } else {
        /* Enough blocks for two waves over the SMs. */
        const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
        const long long base = xattn_cuda_cdiv(p->Sq * p->group, pl.bm) * p->Hkv * p->B;
        const long long target = 2LL * (a->sm_count > 0 ? a->sm_count : 1);
        s = base >= target ? 1 : xattn_cuda_cdiv(target, base > 0 ? base : 1);
    }
    if (s > units)
        s = units;
    if (s > XATTN_CUDA_MAX_SPLITS)
        s = XATTN_CUDA_MAX_SPLITS;
    if (s < 1)
        s = 1;
    /* Whole chunks of XATTN_CUDA_SPLIT_UNIT keys: trailing splits that would
     * be empty are dropped. */
    const int chunk = xattn_cuda_split_chunk((int)p->Sk, (int)s);
    s = p->Sk > 0 ? xattn_cuda_cdiv(p->Sk, chunk) : 1;
    return (int)s;
}

extern "C" cudaError_t xattn_cuda_splitkv_partial(const xattn_cuda_args *a, int splits,
                                                  float *part_o, float *part_lse)
{
    const xattn_cuda_plan pl = xattn_cuda_plan_of(a);
    long long blocks;
    xattn_cuda_kparams P = xattn_cuda_flash_params(a, pl, &blocks);
    P.splits = splits;
    P.chunk = xattn_cuda_split_chunk(P.Sk, splits);
    P.part_o = part_o;
    P.part_lse = part_lse;
    blocks *= splits;
    if (pl.mma) {
        /* The launcher reads the shape from a->mma_narrow: the plan's. */
        xattn_cuda_args an = *a;
        an.mma_narrow = pl.narrow;
        return pl.fn(P, &an, (unsigned)blocks);
    }
    return xattn_cuda_flash_simt_launch(P, a, (unsigned)blocks);
}

/* One warp per row (b, h, i): O = sum_s w_s O_s / sum_s w_s with
 * w_s = exp(LSE_s - max LSE), LSE = max + log sum w_s; the max is NaN-sticky
 * and an all -inf row is empty (O = 0, LSE = -inf). A weight that underflows
 * to 0 still passes its split's inf and NaN (xattn_cuda_pv_add), as the
 * reference's tiny positive weight does; an empty split's O is 0. */
__global__ void __launch_bounds__(128)
    xattn_cuda_splitkv_combine_kernel(const xattn_cuda_kparams P, const float *part_o,
                                      const float *part_lse)
{
    __shared__ float wsh[4][XATTN_CUDA_MAX_SPLITS];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 4 + w;
    if (row >= (long long)P.B * P.Hq * P.Sq)
        return;
    const int i = (int)(row % P.Sq);
    const int h = (int)((row / P.Sq) % P.Hq);
    const int b = (int)(row / ((long long)P.Sq * P.Hq));
    const xattn_cuda_seq s = xattn_cuda_seq_load(P, b);
    if (i >= s.rows)
        return;
    const int ns = P.splits;

    float M = -XATTN_CUDA_INF;
    for (int sp = lane; sp < ns; sp += 32)
        M = xattn_cuda_sticky_max(M, part_lse[xattn_cuda_part_row(P, sp, b, h, i)]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        M = xattn_cuda_sticky_max(M, __shfl_xor_sync(0xffffffffu, M, off));
    const bool empty = M == -XATTN_CUDA_INF;
    float W = 0.0f;
    for (int sp = lane; sp < ns; sp += 32) {
        const float wt = empty ? 0.0f : expf(part_lse[xattn_cuda_part_row(P, sp, b, h, i)] - M);
        wsh[w][sp] = wt;
        W += wt;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        W += __shfl_xor_sync(0xffffffffu, W, off);
    __syncwarp();

    /* The partials hold no sink: a real row folds it here, once. */
    float Ms = M, Ws = W;
    const float c = i < s.Lq ? xattn_cuda_sink_fold(P, h, &Ms, &Ws) : 1.0f;
    const float inv = empty ? 0.0f : c / Ws;
    const long long oi = xattn_cuda_row_index(P.o, b, s.q0 + i, h);
    const long long stride = (long long)P.B * P.Hq * P.Sq * P.Dv; /* between splits */
    const float *po = part_o + xattn_cuda_part_row(P, 0, b, h, i) * P.Dv;
    for (int d = lane; d < P.Dv; d += 32) {
        float acc = 0.0f;
        if (!empty)
            for (int sp = 0; sp < ns; sp++)
                acc = xattn_cuda_pv_add(acc, wsh[w][sp], po[sp * stride + d]);
        xattn_cuda_store(P.o.ptr, P.o.dt, oi + (long long)d * P.o.sd, acc * inv);
    }
    if (lane == 0 && P.has_lse)
        ((float *)P.lse.ptr)[xattn_cuda_lse_index(P, b, h, s.q0 + i)] = xattn_sem_lse(Ms, Ws);
}

extern "C" cudaError_t xattn_cuda_splitkv_combine(const xattn_cuda_args *a, int splits,
                                                  const float *part_o, const float *part_lse)
{
    const xattn_problem *p = a->p;
    xattn_cuda_kparams P = xattn_cuda_make_params(a);
    P.splits = splits;
    P.cnt = NULL; /* the combine computes no products */
    const long long rows = p->B * p->Hq * p->Sq;
    const long long blocks = xattn_cuda_cdiv(rows, 4);
    if (blocks == 0)
        return cudaSuccess;
    XATTN_CUDA_LAUNCH(xattn_cuda_splitkv_combine_kernel, (unsigned)blocks,
                      xattn_cuda_threads(a, 128), 0, a->stream, P, part_o, part_lse);
    return cudaGetLastError();
}
