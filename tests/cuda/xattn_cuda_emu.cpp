/*
 * The CPU emulator's scheduler and PTX semantics (see xattn_cuda_emu.h).
 * Threads of one block are ucontext coroutines that run until they reach a
 * barrier; the scheduler then releases a warp whose lanes all wait at a warp
 * barrier, or the block when all its threads wait at __syncthreads.
 */
#include "xattn_cuda_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <map>
#include <vector>

uint3 xattn_emu_tid, xattn_emu_bid;

namespace
{

enum { RUN, AT_BLOCK, AT_WARP, DONE };

struct Copy {
    void *dst;
    unsigned char data[16];
    int group;
};

struct Thread {
    ucontext_t ctx;
    std::vector<char> stack;
    int state;
    int pred;                  /* __syncthreads_or's predicate (0 for __syncthreads) */
    std::vector<Copy> pending; /* cp.async issued, not yet landed */
    int committed;             /* cp.async groups committed */
};

struct Block {
    std::vector<Thread> th;
    std::vector<xattn_emu_slots> slots;
    std::vector<unsigned char> dyn;
    ucontext_t sched;
    int cur;
    int or_result; /* OR of the predicates at the last block barrier */
    const std::function<void()> *body;
};

Block *blk;
cudaError_t last_error = cudaSuccess;

[[noreturn]] void die(const char *what)
{
    fprintf(stderr, "xattn_cuda_emu: block (%u) thread %d: %s\n", xattn_emu_bid.x,
            blk ? blk->cur : -1, what);
    abort();
}

void entry()
{
    (*blk->body)();
    Thread &t = blk->th[blk->cur];
    if (!t.pending.empty())
        die("cp.async copies never waited for");
    t.state = DONE;
}

void yield_to_scheduler()
{
    Thread &t = blk->th[blk->cur];
    swapcontext(&t.ctx, &blk->sched);
}

uint16_t ld16(uintptr_t row, int elem)
{
    uint16_t v;
    memcpy(&v, (const char *)row + 2 * elem, 2);
    return v;
}

float bits_to_f32(uint16_t b, bool bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)b << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return __half2float(__ushort_as_half(b));
}

/* Out of line: getcontext returns twice, which must not touch the loop's locals. */
__attribute__((noinline)) void start_thread(Thread &t, Block &b)
{
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack.data();
    t.ctx.uc_stack.ss_size = t.stack.size();
    t.ctx.uc_link = &b.sched;
    makecontext(&t.ctx, entry, 0);
    t.state = RUN;
    t.pending.clear();
    t.committed = 0;
}

} // namespace

void xattn_emu_syncthreads(void)
{
    xattn_emu_syncthreads_or(0);
}

int xattn_emu_syncthreads_or(int pred)
{
    Thread &t = blk->th[blk->cur];
    t.pred = pred != 0;
    t.state = AT_BLOCK;
    yield_to_scheduler();
    /* Set when the barrier was released; the next release needs every thread
     * back at a barrier, so it cannot change before this thread reads it. */
    return blk->or_result;
}

void xattn_emu_warp_barrier(void)
{
    blk->th[blk->cur].state = AT_WARP;
    yield_to_scheduler();
}

int xattn_emu_lane(void)
{
    return blk->cur & 31;
}

xattn_emu_slots *xattn_emu_warp_slots(void)
{
    return &blk->slots[blk->cur >> 5];
}

unsigned char *xattn_emu_dyn_smem(void)
{
    return blk->dyn.data();
}

cudaError_t xattn_emu_take_error(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

void xattn_emu_cp_async(void *smem, const void *gmem)
{
    if ((uintptr_t)smem % 16 || (uintptr_t)gmem % 16)
        die("cp.async with an address that is not 16-byte aligned");
    Thread &t = blk->th[blk->cur];
    Copy c;
    c.dst = smem;
    memcpy(c.data, gmem, 16); /* global memory is read-only during a kernel */
    c.group = t.committed;
    t.pending.push_back(c);
}

void xattn_emu_cp_commit(void)
{
    blk->th[blk->cur].committed++;
}

void xattn_emu_cp_wait(int n)
{
    /* Every committed group but the n most recent has landed. */
    Thread &t = blk->th[blk->cur];
    std::vector<Copy> keep;
    for (const Copy &c : t.pending) {
        if (c.group < t.committed - n)
            memcpy(c.dst, c.data, 16);
        else
            keep.push_back(c);
    }
    t.pending.swap(keep);
}

void xattn_emu_ldsm_x4(unsigned (&r)[4], const void *smem, bool trans)
{
    xattn_emu_slots *s = xattn_emu_warp_slots();
    const int lane = xattn_emu_lane();
    if ((uintptr_t)smem % 16)
        die("ldmatrix row address not 16-byte aligned");
    s->p[lane] = (uintptr_t)smem;
    xattn_emu_warp_barrier();
    /* Matrix i's rows come from lanes 8i..8i+7. Without .trans lane l holds
     * row l/4, columns 2(l%4), 2(l%4)+1; with .trans, column l/4 of rows
     * 2(l%4) and 2(l%4)+1. The lower column / row goes to the low half. */
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uintptr_t row = s->p[8 * i + lane / 4];
            lo = ld16(row, 2 * (lane % 4));
            hi = ld16(row, 2 * (lane % 4) + 1);
        } else {
            lo = ld16(s->p[8 * i + 2 * (lane % 4)], lane / 4);
            hi = ld16(s->p[8 * i + 2 * (lane % 4) + 1], lane / 4);
        }
        r[i] = (unsigned)lo | ((unsigned)hi << 16);
    }
    xattn_emu_warp_barrier();
}

void xattn_emu_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, bool bf16)
{
    xattn_emu_slots *s = xattn_emu_warp_slots();
    const int lane = xattn_emu_lane();
    for (int i = 0; i < 4; i++)
        s->u[lane][i] = a[i];
    s->u[lane][4] = b0;
    s->u[lane][5] = b1;
    xattn_emu_warp_barrier();
    /* PTX ISA, mma.m16n8k16 with .f16/.bf16 inputs: lane l, g = l/4, q = l%4.
     * A: a0 (g, 2q..2q+1), a1 (g+8, 2q..), a2 (g, 2q+8..), a3 (g+8, 2q+8..).
     * B: b0 (k 2q..2q+1, n g), b1 (k 2q+8..2q+9, n g).
     * C/D: c0, c1 (g, 2q..2q+1), c2, c3 (g+8, 2q..2q+1). */
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l / 4, q = l % 4;
        const uint32_t *u = s->u[l];
        const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * q, 2 * q, 2 * q + 8, 2 * q + 8};
        for (int i = 0; i < 4; i++) {
            A[ar[i]][ac[i]] = bits_to_f32((uint16_t)(u[i] & 0xffff), bf16);
            A[ar[i]][ac[i] + 1] = bits_to_f32((uint16_t)(u[i] >> 16), bf16);
        }
        B[2 * q][g] = bits_to_f32((uint16_t)(u[4] & 0xffff), bf16);
        B[2 * q + 1][g] = bits_to_f32((uint16_t)(u[4] >> 16), bf16);
        B[2 * q + 8][g] = bits_to_f32((uint16_t)(u[5] & 0xffff), bf16);
        B[2 * q + 9][g] = bits_to_f32((uint16_t)(u[5] >> 16), bf16);
    }
    const int g = lane / 4, q = lane % 4;
    const int dr[4] = {g, g, g + 8, g + 8}, dc[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
    float d[4];
    for (int i = 0; i < 4; i++) {
        float acc = c[i];
        for (int k = 0; k < 16; k++)
            acc = fmaf(A[dr[i]][k], B[k][dc[i]], acc);
        d[i] = acc;
    }
    xattn_emu_warp_barrier();
    for (int i = 0; i < 4; i++)
        c[i] = d[i];
}

unsigned long xattn_emu_attr_calls, xattn_emu_resets;
/* The current context's MaxDynamicSharedMemorySize of each kernel that set it. */
static std::map<const void *, int> smem_attr;

cudaError_t xattn_emu_func_set_smem(const void *fn, int bytes)
{
    xattn_emu_attr_calls++;
    if (!fn || bytes < 0 || bytes > 227 * 1024)
        return cudaErrorInvalidValue;
    smem_attr[fn] = bytes;
    return cudaSuccess;
}

cudaError_t xattn_emu_device_reset(void)
{
    xattn_emu_resets++;
    smem_attr.clear();
    last_error = cudaSuccess;
    return cudaSuccess;
}

cudaError_t xattn_emu_run(const void *fn, const std::function<void()> &body, unsigned grid,
                          unsigned block, size_t smem)
{
    if (block == 0 || block > 1024 || grid == 0 || grid > 0x7fffffffu || smem > 227 * 1024) {
        last_error = cudaErrorInvalidConfiguration;
        return last_error;
    }
    if (smem > 48 * 1024) {
        const auto it = smem_attr.find(fn);
        if (it == smem_attr.end() || (size_t)it->second < smem) {
            last_error = cudaErrorInvalidValue; /* what a GPU's launch reports */
            return last_error;
        }
    }
    Block b;
    blk = &b;
    b.body = &body;
    b.th.resize(block);
    b.slots.resize((block + 31) / 32);
    for (Thread &t : b.th)
        t.stack.resize(256 * 1024);
    for (unsigned bx = 0; bx < grid; bx++) {
        xattn_emu_bid = make_uint3(bx, 0, 0);
        b.dyn.assign(smem + 16, 0xff);
        for (unsigned i = 0; i < block; i++)
            start_thread(b.th[i], b);
        for (;;) {
            for (unsigned i = 0; i < block; i++) {
                if (b.th[i].state != RUN)
                    continue;
                b.cur = (int)i;
                xattn_emu_tid = make_uint3(i, 0, 0);
                swapcontext(&b.sched, &b.th[i].ctx);
            }
            /* Everyone is done or waiting: release a full warp barrier, or
             * the block barrier, or report a deadlock. */
            unsigned done = 0, at_block = 0;
            bool released = false;
            for (unsigned w = 0; w * 32 < block; w++) {
                unsigned lanes = 0, at_warp = 0, exited = 0;
                for (unsigned i = w * 32; i < block && i < w * 32 + 32; i++) {
                    lanes++;
                    at_warp += b.th[i].state == AT_WARP;
                    exited += b.th[i].state == DONE;
                }
                if (at_warp && exited) {
                    b.cur = (int)(w * 32);
                    die("warp collective (shuffle/ldmatrix/mma/__syncwarp) with exited lanes");
                }
                if (at_warp && at_warp == lanes) {
                    for (unsigned i = w * 32; i < block && i < w * 32 + 32; i++)
                        b.th[i].state = RUN;
                    released = true;
                }
            }
            if (released)
                continue;
            for (unsigned i = 0; i < block; i++) {
                done += b.th[i].state == DONE;
                at_block += b.th[i].state == AT_BLOCK;
            }
            if (done == block)
                break;
            if (done + at_block == block) {
                int any = 0;
                for (unsigned i = 0; i < block; i++)
                    if (b.th[i].state == AT_BLOCK) {
                        any |= b.th[i].pred;
                        b.th[i].state = RUN;
                    }
                b.or_result = any;
                continue;
            }
            die("deadlock: threads wait at different barriers (divergent __syncthreads or a "
                "warp collective that not all lanes reach)");
        }
    }
    blk = NULL;
    return cudaSuccess;
}
