/*
 * A CPU emulator for the CUDA kernels of kernels_cuda/, so that their logic
 * runs (and is checked against a reference) on machines without a GPU.
 *
 * Included before the kernel sources, compiled as plain C++ (g++/clang++):
 * every thread of a block is a coroutine (ucontext); __syncthreads and the
 * warp-collective operations (shuffles, ldmatrix, mma.sync) are barriers of
 * the block or of the warp, and a barrier that cannot be reached (divergent
 * __syncthreads, a warp collective with exited lanes) aborts with a message.
 * The PTX the tensor-core kernel uses is emulated from the PTX ISA's
 * definitions: ldmatrix (.x4, with and without .trans, rows 16-byte aligned),
 * mma.sync.m16n8k16 (f16/bf16 -> f32, the fragment layouts of the ISA), and
 * cp.async whose copies land only at the cp.async.wait_group that covers
 * them, so that a read of a tile before its wait sees stale data. Dynamic
 * shared memory starts as 0xff bytes (NaN in every dtype) in every block.
 * __syncthreads_or returns the OR of the predicates of the block's threads.
 *
 * Not emulated: timing, memory-model races between blocks, and the
 * arithmetic's exact rounding order inside one mma.
 */
#ifndef XATTN_CUDA_EMU_H
#define XATTN_CUDA_EMU_H

#define XATTN_CUDA_EMULATE 1

/* Shared memory declared in a kernel: one static copy (blocks run one at a time). */
#define __shared__ static

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

/* ---- the running thread ---------------------------------------------------- */

extern uint3 xattn_emu_tid, xattn_emu_bid;
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#define threadIdx xattn_emu_tid
#define blockIdx xattn_emu_bid

void xattn_emu_syncthreads(void);
int xattn_emu_syncthreads_or(int pred);
void xattn_emu_warp_barrier(void);
int xattn_emu_lane(void);

/* Per-warp exchange slots for the collectives. */
struct xattn_emu_slots {
    uint32_t u[32][12];
    uintptr_t p[32];
};
xattn_emu_slots *xattn_emu_warp_slots(void);

#define __syncthreads() xattn_emu_syncthreads()
static inline int __syncthreads_or(int pred)
{
    return xattn_emu_syncthreads_or(pred);
}

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    (void)mask;
    xattn_emu_warp_barrier();
}

/* Lane src's v (every lane of the warp must take part). */
template <typename V> static inline V xattn_emu_shfl(V v, int src)
{
    static_assert(sizeof(V) == 4, "32-bit shuffles only");
    xattn_emu_slots *s = xattn_emu_warp_slots();
    const int lane = xattn_emu_lane();
    memcpy(&s->u[lane][0], &v, 4);
    xattn_emu_warp_barrier();
    V r;
    memcpy(&r, &s->u[src & 31][0], 4);
    xattn_emu_warp_barrier();
    return r;
}
static inline float __shfl_xor_sync(unsigned, float v, int m)
{
    return xattn_emu_shfl(v, xattn_emu_lane() ^ m);
}
static inline int __shfl_xor_sync(unsigned, int v, int m)
{
    return xattn_emu_shfl(v, xattn_emu_lane() ^ m);
}
static inline float __shfl_sync(unsigned, float v, int src)
{
    return xattn_emu_shfl(v, src);
}

static inline float __int_as_float(int x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline float __uint_as_float(unsigned x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned x;
    memcpy(&x, &f, 4);
    return x;
}
#define __expf(x) expf(x)
static inline int min(int a, int b)
{
    return a < b ? a : b;
}
static inline int max(int a, int b)
{
    return a > b ? a : b;
}
static inline long long min(long long a, long long b)
{
    return a < b ? a : b;
}
static inline long long max(long long a, long long b)
{
    return a > b ? a : b;
}

/* ---- the PTX of the tensor-core kernel ------------------------------------ */

void xattn_emu_cp_async(void *smem, const void *gmem);
void xattn_emu_cp_commit(void);
void xattn_emu_cp_wait(int n);
void xattn_emu_ldsm_x4(unsigned (&r)[4], const void *smem, bool trans);
void xattn_emu_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, bool bf16);

static inline void xattn_cuda_cp_async16(void *smem, const void *gmem)
{
    xattn_emu_cp_async(smem, gmem);
}
static inline void xattn_cuda_cp_async_commit(void)
{
    xattn_emu_cp_commit();
}
template <int N> static inline void xattn_cuda_cp_async_wait(void)
{
    xattn_emu_cp_wait(N);
}
static inline void xattn_cuda_ldsm_x4(unsigned (&r)[4], const void *smem)
{
    xattn_emu_ldsm_x4(r, smem, false);
}
static inline void xattn_cuda_ldsm_x4_trans(unsigned (&r)[4], const void *smem)
{
    xattn_emu_ldsm_x4(r, smem, true);
}
template <typename T>
static inline void xattn_cuda_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    xattn_emu_mma(c, a, b0, b1, std::is_same<T, __nv_bfloat16>::value);
}

/* ---- launches ---------------------------------------------------------------- */

/* Runs body on every thread of every block; returns the launch status. fn is
 * the kernel (its shared-memory attribute): as on a GPU, a launch with more
 * than 48 KB of dynamic shared memory fails (cudaErrorInvalidValue) unless
 * cudaFuncSetAttribute(fn, MaxDynamicSharedMemorySize) allowed that much in
 * the current context; cudaDeviceReset drops the context's attributes. */
cudaError_t xattn_emu_run(const void *fn, const std::function<void()> &body, unsigned grid,
                          unsigned block, size_t smem);
unsigned char *xattn_emu_dyn_smem(void);
cudaError_t xattn_emu_take_error(void);
cudaError_t xattn_emu_func_set_smem(const void *fn, int bytes);
cudaError_t xattn_emu_device_reset(void);
/* Emulated context's counters: attribute calls and resets seen so far. */
extern unsigned long xattn_emu_attr_calls, xattn_emu_resets;

#define XATTN_CUDA_DYN_SMEM(type, name) type *name = (type *)xattn_emu_dyn_smem()
#define XATTN_CUDA_LAUNCH(kernel, grid, block, smem, stream, ...)                                  \
    ((void)(stream), xattn_emu_run(                                                                \
                         reinterpret_cast<const void *>(kernel), [&]() { (kernel)(__VA_ARGS__); }, \
                         (unsigned)(grid), (unsigned)(block), (size_t)(smem)))
#define cudaGetLastError() xattn_emu_take_error()
#define cudaFuncSetAttribute(kernel, attr, value)                                                  \
    ((void)(attr), xattn_emu_func_set_smem(reinterpret_cast<const void *>(kernel), (int)(value)))
#define cudaDeviceReset() xattn_emu_device_reset()

#endif /* XATTN_CUDA_EMU_H */
