/*
 * Ring attention over MPI, built on the public API of xattn.h only.
 *
 * Each rank holds query and key segments (global position ranges, see
 * xattn_mpi_shard). For every (query segment, key segment) pair the global
 * causal / window relation is re-expressed for the block with the public
 * descriptor: a top-left aligned window whose bounds are the global bounds
 * shifted by the segments' offsets (docs/scale.md, "Masks across blocks").
 * Each call yields a partial (O, LSE) per row; the partials are merged on the
 * host in f32 with the log-sum-exp rule, which is exact up to f32 rounding.
 *
 * Over 800 lines: the ring and the all-to-all share one prelude (shards,
 * agreement on the problem), the status agreement with its deadline, the host
 * staging and the merge; kept in one file so that both strategies read the
 * same failure rules (docs/scale.md, "Failures").
 */
#include "xattn_mpi.h"

#include "xattn_host_io.h"

/* CUDA-aware MPI: the ring hands its device buffers to MPI when the library
 * says, at compile time (mpi-ext.h) and at run time, that it takes CUDA
 * memory, and the context is a CUDA one. XATTN_MPI_WITH_CUDA: libxattn has
 * the CUDA backend (xattn_cuda.h's functions exist). */
#if defined(XATTN_MPI_WITH_CUDA) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#if defined(XATTN_MPI_WITH_CUDA) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
#define XATTN_MPI_DEVICE_PATH 1
#include "xattn_cuda.h"
#else
#define XATTN_MPI_DEVICE_PATH 0
#if !defined(XATTN_MPI_WITH_CUDA)
#define XATTN_MPI_NO_DEVICE "xattn was built without the CUDA backend"
#else
#define XATTN_MPI_NO_DEVICE                                                                        \
    "the MPI library is not CUDA-aware (MPIX_CUDA_AWARE_SUPPORT at build time)"
#endif
#endif

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char mpi_err[512];

static xattn_status fail(xattn_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mpi_err, sizeof mpi_err, fmt, ap);
    va_end(ap);
    return st;
}

/* A failure of the library: keep its message, prefixed with what we did. */
static xattn_status fail_lib(xattn_status st, const char *what)
{
    return fail(st, "%s: %s", what, xattn_last_error());
}

const char *xattn_mpi_last_error(void)
{
    return mpi_err;
}

void xattn_mpi_ring_opts_init(xattn_mpi_ring_opts *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->layout = XATTN_MPI_ZIGZAG;
}

static int64_t chunk_start(int64_t len, int64_t k, int64_t c)
{
    return c * len / k;
}

int64_t xattn_mpi_shard(xattn_mpi_layout layout, int64_t len, int nranks, int rank,
                        xattn_mpi_segment seg[2])
{
    if (!seg || len < 0 || nranks < 1 || rank < 0 || rank >= nranks ||
        (layout != XATTN_MPI_CONTIGUOUS && layout != XATTN_MPI_ZIGZAG) ||
        len > INT64_MAX / (2 * (int64_t)nranks))
        return -1;
    if (layout == XATTN_MPI_CONTIGUOUS) {
        seg[0].start = chunk_start(len, nranks, rank);
        seg[0].length = chunk_start(len, nranks, rank + 1) - seg[0].start;
        seg[1].start = seg[0].start + seg[0].length;
        seg[1].length = 0;
    } else {
        int64_t k = 2 * (int64_t)nranks, c1 = k - 1 - rank;
        seg[0].start = chunk_start(len, k, rank);
        seg[0].length = chunk_start(len, k, rank + 1) - seg[0].start;
        seg[1].start = chunk_start(len, k, c1);
        seg[1].length = chunk_start(len, k, c1 + 1) - seg[1].start;
    }
    return seg[0].length + seg[1].length;
}

/* ---- waiting on MPI with a deadline; what a timed-out wait leaves -------- */

static void nap(void)
{
    struct timespec ts = {0, 50000}; /* 50 us: yields the core to the compute */
    nanosleep(&ts, NULL);
}

/*
 * Operations a timed-out call left pending, with the memory they read or write
 * (docs/scale.md, "Failures"): never freed while MPI may still touch it. Each
 * xattn_mpi call (and xattn_mpi_pending) tests them and frees the memory of
 * those that completed; what never completes stays until the process ends.
 */
#define LIMBO_MEM 12
typedef struct limbo {
    struct limbo *next;
    int nreq;
    MPI_Request req[8];
    void *mem[LIMBO_MEM];
    xattn_buffer *buf[2]; /* device buffers MPI reads or writes (CUDA-aware MPI) */
} limbo;

static limbo *g_limbo;
static pthread_mutex_t g_limbo_mu = PTHREAD_MUTEX_INITIALIZER;

static int limbo_done(limbo *e)
{
    int done = 0;
    if (e->nreq == 0)
        return 1;
    if (MPI_Testall(e->nreq, e->req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return 0;
    return done;
}

static void limbo_release(limbo *e)
{
    for (int i = 0; i < LIMBO_MEM; i++)
        free(e->mem[i]);
    xattn_buffer_free(e->buf[0]);
    xattn_buffer_free(e->buf[1]);
    free(e);
}

/* Frees what completed; returns how many entries remain. */
static int limbo_sweep(void)
{
    int left = 0, fin = 0;
    if (MPI_Finalized(&fin) != MPI_SUCCESS || fin)
        return -1;
    pthread_mutex_lock(&g_limbo_mu);
    for (limbo **pp = &g_limbo; *pp;) {
        limbo *e = *pp;
        if (limbo_done(e)) {
            *pp = e->next;
            limbo_release(e);
        } else {
            left++;
            pp = &e->next;
        }
    }
    pthread_mutex_unlock(&g_limbo_mu);
    return left;
}

/* Takes over `nreq` pending requests and the memory they use. The receives
 * among them were cancelled by the caller; sends and collectives cannot be. If
 * the record itself cannot be allocated, the memory is leaked, never freed. */
static void limbo_add(const MPI_Request *req, int nreq, void *const *mem, int nmem,
                      xattn_buffer *b0, xattn_buffer *b1)
{
    limbo *e = calloc(1, sizeof *e);
    if (!e || nreq > 8 || nmem > LIMBO_MEM) {
        free(e);
        return;
    }
    e->nreq = nreq;
    memcpy(e->req, req, (size_t)nreq * sizeof *req);
    memcpy(e->mem, mem, (size_t)nmem * sizeof *mem);
    e->buf[0] = b0;
    e->buf[1] = b1;
    if (limbo_done(e)) {
        limbo_release(e);
        return;
    }
    pthread_mutex_lock(&g_limbo_mu);
    e->next = g_limbo;
    g_limbo = e;
    pthread_mutex_unlock(&g_limbo_mu);
}

int xattn_mpi_pending(void)
{
    return limbo_sweep();
}

/* A wait with a plain deadline (no progress signals): the communicator's
 * duplication and xattn_mpi_stats_gather. On a timeout the request is left
 * pending (*left = 1) for the caller to hand to limbo_add. */
static xattn_status wait_plain(MPI_Request *req, double timeout_ms, const char *what, int *left)
{
    double t0 = MPI_Wtime();
    *left = 0;
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            *left = 1;
            return fail(XATTN_STATUS_BACKEND, "%s: MPI_Test failed", what);
        }
        if (done)
            return XATTN_STATUS_OK;
        if ((MPI_Wtime() - t0) * 1e3 > timeout_ms) {
            *left = 1;
            return fail(XATTN_STATUS_BACKEND,
                        "%s: no completion within %.0f ms (entry_timeout_ms, else timeout_ms); a "
                        "rank stopped taking part (the operation is left pending; its memory is "
                        "the library's)",
                        what, timeout_ms);
        }
        if (spins > 64)
            nap();
    }
}

/* Test builds only (XATTN_MPI_TEST_HOOKS, never installed): a function the
 * tests set to delay or stall one rank at a named point deterministically. */
#ifdef XATTN_MPI_TEST_HOOKS
XATTN_API void (*xattn_mpi__test_hook)(const char *where, int rank, int step);
void (*xattn_mpi__test_hook)(const char *where, int rank, int step) = NULL;
#define HOOK(r, where, step)                                                                       \
    do {                                                                                           \
        if (xattn_mpi__test_hook)                                                                  \
            xattn_mpi__test_hook(where, (r)->rank, step);                                          \
    } while (0)
#else
#define HOOK(r, where, step) ((void)0)
#endif

/* ---- tensors <-> packed host arrays -------------------------------------- */

/* Moves positions [s0, s0+ns) along dimension sdim of t (all of the other
 * dimensions) between its buffer and a packed host array (xattn_host_io.h). */
static xattn_status tensor_io(const xattn_tensor *t, int sdim, int64_t s0, int64_t ns, void *host,
                              int f32, int write, const char *name)
{
    int64_t start[4] = {0, 0, 0, 0}, count[4];
    memcpy(count, t->shape, sizeof count);
    start[sdim] = s0;
    count[sdim] = ns;
    return xattn_host_box_io(t, start, count, host, f32, write, name, mpi_err, sizeof mpi_err);
}

/* ---- the mask mapping ----------------------------------------------------- */

#define UNB INT64_MAX /* an unbounded side */

/* How one batch entry of one (query segment, key segment) block is computed. */
typedef struct block_plan {
    int skip;       /* nothing visible */
    int64_t i0, k0; /* leading query rows / keys of the block left out */
    int64_t lq, lk; /* valid rows / keys after i0 / k0 */
    int64_t wl, wr; /* the block call's window (top-left aligned), -1 = unbounded */
    int full;       /* every valid (row, key) pair is visible: no mask at all */
    int64_t s;      /* row i's aligned position minus key j's is i - j + s (ALiBi) */
} block_plan;

/*
 * Global rule for row gi and key gj of one sequence (lengths Lq, Lk): with
 * p = gi + delta (delta = 0 top-left, Lk - Lq bottom-right), the key is
 * visible when gj <= p (causal), gj >= p - L (window left L >= 0) and
 * gj <= p + R (window right R >= 0). With block offsets qo, ko and local
 * i = gi - qo, j = gj - ko this is  lo <= j - i <= hi  with s = delta + qo - ko,
 * hi = min(s if causal, s + R), lo = s - L. The public API expresses exactly
 * that with a top-left window (WL = -lo, WR = hi) once lo <= 0 <= hi; the
 * other cases are shifted there by leaving out leading rows (hi < 0: rows
 * i < -hi see no key of the block) or leading keys (lo > 0: keys j < lo are
 * seen by no row).
 */
static block_plan plan_block(int64_t Lq, int64_t Lk, int bottom_right, int causal, int64_t L,
                             int64_t R, int64_t qo, int64_t nq, int64_t ko, int64_t nk)
{
    block_plan p;
    memset(&p, 0, sizeof p);
    int64_t vq = Lq - qo < 0 ? 0 : (Lq - qo > nq ? nq : Lq - qo);
    int64_t vk = Lk - ko < 0 ? 0 : (Lk - ko > nk ? nk : Lk - ko);
    if (vq == 0 || vk == 0) {
        p.skip = 1;
        return p;
    }
    int64_t s = (bottom_right ? Lk - Lq : 0) + qo - ko;
    p.s = s;
    int64_t hi = UNB, lo = -UNB;
    if (causal)
        hi = s;
    if (R >= 0 && s + R < hi)
        hi = s + R;
    if (L >= 0)
        lo = s - L;
    /* j - i takes the values -(vq-1) .. vk-1 */
    if (lo > hi || lo > vk - 1 || hi < -(vq - 1)) {
        p.skip = 1;
        return p;
    }
    if (hi < 0) {
        p.i0 = -hi;
        if (lo != -UNB)
            lo += p.i0;
        hi = 0;
    } else if (lo > 0) {
        p.k0 = lo;
        if (hi != UNB)
            hi -= p.k0;
        lo = 0;
    }
    p.lq = vq - p.i0;
    p.lk = vk - p.k0;
    /* a bound no pair reaches is no bound */
    p.wl = (lo == -UNB || -lo >= p.lq - 1) ? -1 : -lo;
    p.wr = (hi == UNB || hi >= p.lk - 1) ? -1 : hi;
    p.full = p.wl < 0 && p.wr < 0 && p.i0 == 0 && p.k0 == 0;
    return p;
}

/* ---- the ring ------------------------------------------------------------ */

typedef struct ring {
    MPI_Comm comm;
    int rank, n;
    xattn_ctx *ctx;
    const xattn_attn_desc *d;
    xattn_mpi_ring_opts o;
    int64_t B, Hq, Hkv, D, Dv;
    xattn_dtype qdt, kvdt;
    size_t qes, kves;
    int64_t *Lq, *Lk; /* global lengths [nlen] */
    int64_t nlen;     /* B, or the number of sequences of a packed batch */
    int packed;       /* cu_seqlens: one token stream, sequences at cq/ck */
    int64_t *cq, *ck; /* packed: the global cu_seqlens [nlen + 1] */
    xattn_mpi_segment qseg[2];
    int64_t sq_loc;
    /* per rank: its key segments and block size in bytes (K then V) */
    xattn_mpi_segment (*kseg)[2];
    int64_t *sk_of;
    size_t max_block;
    unsigned char *host[2]; /* ring staging: the block in hand and the next one */
    xattn_buffer *kvbuf;    /* the block in hand on the device */
    xattn_buffer *obuf, *lbuf;
    float *opart, *lpart; /* partials read back, f32 */
    float *acc_o, *acc_l; /* merged result [B, sq_loc, Hq, Dv], [B, Hq, sq_loc] */
    int32_t *sl_q, *sl_k;
    block_plan *plans;
    /* ALiBi (docs/scale.md, "ALiBi across blocks"): tables of the per-key
     * terms, [Hq, 2*kmax] slope*(x - (kmax-1)) then [Hq, kmax] -slope*x */
    xattn_buffer *atab;
    int64_t kmax; /* the longest key segment of any rank */
    int alltoall; /* the all-to-all strategy, not the ring */
    /* CUDA-aware MPI: the blocks travel between kvdev[0] and kvdev[1] */
    int devstage;
    char stage_why[96];
    xattn_buffer *kvdev[2];
    xattn_buffer *blk; /* the block in hand on the device (kvbuf or kvdev[cur]) */
    /* Progress and lifetime (docs/scale.md, "Failures"). A phase is the work
     * between two agreements; phase 0 is the prelude. */
    int comm_ok;   /* r->comm is the private duplicate */
    int phase;     /* agreements passed since the prelude's */
    int idle_sent; /* the last phase in which this rank said it waits */
    int *beats;    /* [n]: "waiting" signals received from each rank */
    int gone;      /* a rank that gave up (its deadline passed), or -1 */
    int step;      /* the ring step in progress (messages, test hooks) */
    int broken;    /* a wait gave up: operations are left pending */
    int npend;     /* ... these: */
    MPI_Request pend[8];
    int agree_in[2], agree_out[2];
    int64_t *sig;          /* the prelude's gathered [status, known, fields] of every rank */
    int want_lse;          /* every rank gave an LSE tensor (agreed in the prelude) */
    int *cnt;              /* the all-to-all's counts and displacements (MPI reads them) */
    unsigned char *a2a[2]; /* the all-to-all's send and receive buffers */
} ring;

/* Progress signals: a rank says "waiting" (1) when it enters the first wait
 * of a phase, and "gone" (2) when it gives up. Payloads in static storage:
 * the sends are never waited for (MPI_Request_free). */
static const int k_beat_idle = 1, k_beat_gone = 2;
#define BEAT_TAG 7101

static void beat_all(ring *r, const int *what)
{
    if (!r->comm_ok)
        return;
    for (int p = 0; p < r->n; p++) {
        MPI_Request q;
        if (p != r->rank && MPI_Isend(what, 1, MPI_INT, p, BEAT_TAG, r->comm, &q) == MPI_SUCCESS)
            MPI_Request_free(&q);
    }
}

static void read_beats(ring *r)
{
    if (!r->beats)
        return;
    for (;;) {
        int flag = 0, v = 0;
        MPI_Status s;
        if (MPI_Iprobe(MPI_ANY_SOURCE, BEAT_TAG, r->comm, &flag, &s) != MPI_SUCCESS || !flag)
            return;
        if (MPI_Recv(&v, 1, MPI_INT, s.MPI_SOURCE, BEAT_TAG, r->comm, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        if (v == k_beat_gone) {
            if (r->gone < 0)
                r->gone = s.MPI_SOURCE;
        } else if (s.MPI_SOURCE >= 0 && s.MPI_SOURCE < r->n) {
            r->beats[s.MPI_SOURCE]++;
        }
    }
}

/* Gives up a wait: cancels the receives (bit i of recv_mask: req[i] is one),
 * keeps every pending request for the cleanup to hand over to limbo_add, and
 * tells the other ranks. */
static void give_up(ring *r, int nreq, MPI_Request *req, unsigned recv_mask)
{
    for (int i = 0; i < nreq; i++) {
        if (req[i] == MPI_REQUEST_NULL)
            continue;
        if (recv_mask & (1u << i))
            MPI_Cancel(&req[i]);
        if (r->npend < 8)
            r->pend[r->npend++] = req[i];
        req[i] = MPI_REQUEST_NULL;
    }
    if (!r->broken)
        beat_all(r, &k_beat_gone);
    r->broken = 1;
}

/*
 * Completes `nreq` requests of the private communicator. The deadline
 * measures lost progress, not slow work: after the prelude every rank is
 * taken to be working until it says it waits in this phase, and the
 * timeout_ms clock runs only while every other rank has said so (it restarts
 * when the last one does). A rank that gave up makes the wait fail at once.
 * In the prelude (phase 0) the deadline counts from the wait's start.
 */
static xattn_status wait_ops(ring *r, int nreq, MPI_Request *req, unsigned recv_mask,
                             const char *what)
{
    int said = 0;
    if (r->phase > 0 && r->idle_sent < r->phase) {
        beat_all(r, &k_beat_idle);
        r->idle_sent = r->phase;
        said = 1;
    }
    double t_ref = MPI_Wtime();
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            give_up(r, nreq, req, recv_mask);
            return fail(XATTN_STATUS_BACKEND, "%s: MPI_Testall failed", what);
        }
        if (said && spins == 0) /* a rank that stops here has said it waits */
            HOOK(r, "wait", r->step);
        if (done)
            return XATTN_STATUS_OK;
        double now = MPI_Wtime();
        read_beats(r);
        if (r->gone >= 0) {
            int g = r->gone;
            give_up(r, nreq, req, recv_mask);
            return fail(XATTN_STATUS_BACKEND,
                        "%s: rank %d gave up (its wait passed timeout_ms); the call cannot "
                        "complete. Its operations are left pending on the call's private "
                        "communicator; the caller's communicator is untouched",
                        what, g);
        }
        if (r->phase > 0 && r->beats)
            for (int p = 0; p < r->n; p++)
                if (p != r->rank && r->beats[p] < r->phase) {
                    t_ref = now; /* a rank is still working: no deadline yet */
                    break;
                }
        double limit = r->phase > 0 ? r->o.timeout_ms : r->o.entry_timeout_ms;
        if ((now - t_ref) * 1e3 > limit) {
            give_up(r, nreq, req, recv_mask);
            return fail(XATTN_STATUS_BACKEND,
                        "%s: no progress for %.0f ms (%s) while %s; a rank stopped "
                        "taking part. The call's operations are left pending on its private "
                        "communicator (their memory is the library's until they complete); the "
                        "caller's communicator is untouched",
                        what, limit, r->phase > 0 ? "timeout_ms" : "entry_timeout_ms",
                        r->phase > 0 ? "every rank said it was waiting" : "entering the call");
        }
        if (spins > 64)
            nap();
    }
}

/* Every rank learns the lowest rank that failed and its status (MINLOC on
 * (rank or INT_MAX, status)); *bad_rank = -1 when none did or the wait failed. */
static xattn_status agree(ring *r, xattn_status mine, int *bad_rank)
{
    *bad_rank = -1;
    r->agree_in[0] = mine == XATTN_STATUS_OK ? INT_MAX : r->rank;
    r->agree_in[1] = (int)mine;
    MPI_Request req;
    if (MPI_Iallreduce(r->agree_in, r->agree_out, 1, MPI_2INT, MPI_MINLOC, r->comm, &req) !=
        MPI_SUCCESS)
        return fail(XATTN_STATUS_BACKEND, "MPI_Iallreduce (status agreement) failed");
    xattn_status st = wait_ops(r, 1, &req, 0, "status agreement");
    if (st != XATTN_STATUS_OK)
        return st;
    r->phase++;
    if (r->agree_out[0] == INT_MAX)
        return XATTN_STATUS_OK;
    *bad_rank = r->agree_out[0];
    return (xattn_status)r->agree_out[1];
}

/* Agrees on a stage's status: every rank returns the status of the lowest
 * rank that failed; the message names it (and keeps this rank's own failure
 * where that differs). */
static xattn_status stage_agree(ring *r, xattn_status mine, const char *stage)
{
    int bad = -1;
    char saved[sizeof mpi_err];
    memcpy(saved, mpi_err, sizeof saved);
    xattn_status all = agree(r, mine, &bad);
    if (all == XATTN_STATUS_OK && bad < 0)
        return XATTN_STATUS_OK;
    if (bad < 0)
        return all; /* the agreement itself failed (timeout): its message stands */
    if (bad == r->rank) {
        memcpy(mpi_err, saved, sizeof saved); /* this rank's own message */
        return all;
    }
    if (mine != XATTN_STATUS_OK)
        return fail(all,
                    "rank %d failed first (%s) during %s; its message is on that rank, and every "
                    "rank returns its status. This rank failed too (%s): %s",
                    bad, xattn_status_name(all), stage, xattn_status_name(mine), saved);
    return fail(all, "rank %d failed (%s) during %s; its message is on that rank", bad,
                xattn_status_name(all), stage);
}

/* How a block call applies ALiBi. LIB: the library's own (the block's local
 * positions give the global distances, s = 0); BEFORE / AFTER: every key of
 * the block lies before (after) every row's position, so ALiBi is a per-key
 * term (a bias from r->atab) plus a per-row constant added to the LSE. */
enum { AL_NONE, AL_LIB, AL_BEFORE, AL_AFTER };

/* One (query range, key range) pair of a block: rows of this rank's Q/O/LSE,
 * keys of the block in hand, and their offsets within the sequence. */
typedef struct pair {
    int64_t qls, nq; /* local rows */
    int64_t kls, nk; /* keys of the block in hand */
    int64_t kg;      /* global key column of the first key (a caller's bias) */
    int64_t qo, ko;  /* positions within the sequence (the mask plan) */
} pair;

#define RING_TAG 7100 /* pairs of ranks exchange in order: one tag suffices */

static size_t block_bytes(const ring *r, int64_t sk)
{
    return (size_t)(r->B * sk * r->Hkv * (r->D + r->Dv)) * r->kves;
}

/* Merges the partial rows of one call into the accumulators. With ALiBi as a
 * per-key bias (mode BEFORE / AFTER) the call's scores lack the per-row
 * constant c(h, i) of the true ALiBi term: O is unchanged and LSE moves by c.
 * `ref` is the key (of the call) whose bias is 0. */
static void merge(ring *r, int64_t qls, int64_t nq, const block_plan *pl, int64_t b0, int64_t nb,
                  int mode, int64_t ref)
{
    for (int64_t bb = 0; bb < nb; bb++) {
        int64_t b = b0 + bb;
        const block_plan *p = &pl[b];
        if (p->skip)
            continue;
        for (int64_t h = 0; h < r->Hq; h++)
            for (int64_t i = p->i0; i < p->i0 + p->lq; i++) {
                float lb = r->lpart[(bb * r->Hq + h) * nq + i];
                float *la = &r->acc_l[(b * r->Hq + h) * r->sq_loc + qls + i];
                float *oa = &r->acc_o[((b * r->sq_loc + qls + i) * r->Hq + h) * r->Dv];
                const float *ob = &r->opart[((bb * nq + i) * r->Hq + h) * r->Dv];
                if (isnan(*la))
                    continue;
                if (isnan(lb)) {
                    *la = NAN;
                    for (int64_t e = 0; e < r->Dv; e++)
                        oa[e] = NAN;
                    continue;
                }
                if (lb == -INFINITY)
                    continue;
                if (mode == AL_BEFORE) /* -slope * (distance to the call's key ref) */
                    lb = (float)((double)lb -
                                 (double)r->d->alibi_slopes[h] * (double)(i + p->s - p->k0 - ref));
                else if (mode == AL_AFTER) /* -slope * (distance to the call's first key) */
                    lb = (float)((double)lb +
                                 (double)r->d->alibi_slopes[h] * (double)(i + p->s - p->k0));
                if (*la == -INFINITY) {
                    *la = lb;
                    memcpy(oa, ob, (size_t)r->Dv * sizeof(float));
                    continue;
                }
                float m = fmaxf(*la, lb);
                float l = m + log1pf(expf(-fabsf(*la - lb)));
                float wa = expf(*la - l), wb = expf(lb - l);
                for (int64_t e = 0; e < r->Dv; e++)
                    oa[e] = oa[e] * wa + ob[e] * wb;
                *la = l;
            }
    }
}

/* One block call over batch entries [b0, b0+nb), all with the plan of entry pb. */
static xattn_status block_call(ring *r, const pair *pr, int64_t sk_blk, int64_t b0, int64_t nb,
                               const block_plan *pb, int mode, xattn_mpi_step_stats *ss)
{
    const xattn_attn_desc *d = r->d;
    int64_t qls = pr->qls, nq = pr->nq, kls = pr->kls, ko = pr->kg, nk = pr->nk;
    xattn_attn_desc c;
    xattn_attn_desc_init(&c);
    int64_t i0 = pb->i0, k0 = pb->k0, rq = nq - i0, rk = nk - k0;
    c.q = d->q;
    c.q.offset += (size_t)((b0 * d->q.strides[0] + (qls + i0) * d->q.strides[1]) * (int64_t)r->qes);
    c.q.shape[0] = nb;
    c.q.shape[1] = rq;
    int64_t kst[4] = {sk_blk * r->Hkv * r->D, r->Hkv * r->D, r->D, 1};
    int64_t vst[4] = {sk_blk * r->Hkv * r->Dv, r->Hkv * r->Dv, r->Dv, 1};
    size_t vbase = (size_t)(r->B * sk_blk * r->Hkv * r->D) * r->kves;
    c.k = xattn_tensor_bshd(r->blk, 0, r->kvdt, nb, rk, r->Hkv, r->D);
    memcpy(c.k.strides, kst, sizeof kst);
    c.k.offset = (size_t)(b0 * kst[0] + (kls + k0) * kst[1]) * r->kves;
    c.v = xattn_tensor_bshd(r->blk, 0, r->kvdt, nb, rk, r->Hkv, r->Dv);
    memcpy(c.v.strides, vst, sizeof vst);
    c.v.offset = vbase + (size_t)(b0 * vst[0] + (kls + k0) * vst[1]) * r->kves;
    /* partials: obuf [nb, nq, Hq, Dv], lbuf [nb, Hq, nq, 1]; rows from i0 */
    c.o = xattn_tensor_bshd(r->obuf, 0, r->qdt, nb, rq, r->Hq, r->Dv);
    c.o.strides[0] = nq * r->Hq * r->Dv;
    c.o.offset = (size_t)(i0 * r->Hq * r->Dv) * r->qes;
    c.lse = xattn_tensor_bshd(r->lbuf, (size_t)i0 * 4, XATTN_DTYPE_F32, nb, r->Hq, rq, 1);
    c.lse.strides[0] = r->Hq * nq;
    c.lse.strides[1] = nq;
    c.lse.strides[2] = 1;
    if (d->bias.buffer) { /* rows qls + i0.., global key columns ko + k0.. */
        int64_t bb0 = d->bias.shape[0] > 1 ? b0 : 0;
        c.bias = d->bias;
        c.bias.offset += (size_t)((bb0 * d->bias.strides[0] + (qls + i0) * d->bias.strides[2] +
                                   (ko + k0) * d->bias.strides[3]) *
                                  (int64_t)xattn_dtype_size(d->bias.dtype));
        if (d->bias.shape[0] > 1)
            c.bias.shape[0] = nb;
        c.bias.shape[2] = rq;
        c.bias.shape[3] = rk;
    }
    int64_t ref = 0;
    if (mode == AL_BEFORE || mode == AL_AFTER) {
        /* the per-key ALiBi term as a bias [1, Hq, rq, rk] that repeats along
         * the rows (stride 0); BEFORE is 0 at key `ref`, the last valid key,
         * AFTER at key 0: the keys nearest the rows, so that the terms that
         * weigh most are the smallest (f32 rounding as on one device) */
        for (int64_t bb = 0; bb < nb; bb++)
            if (!r->plans[b0 + bb].skip && r->plans[b0 + bb].lk - 1 > ref)
                ref = r->plans[b0 + bb].lk - 1;
        int64_t w = mode == AL_BEFORE ? 2 * r->kmax : r->kmax;
        size_t at = mode == AL_BEFORE ? (size_t)(r->kmax - 1 - ref) : (size_t)(r->Hq * 2 * r->kmax);
        c.bias = xattn_tensor_bshd(r->atab, at * 4, XATTN_DTYPE_F32, 1, 1, 1, 1);
        int64_t shp[4] = {1, r->Hq, rq, rk}, str[4] = {0, w, 0, 1};
        memcpy(c.bias.shape, shp, sizeof shp);
        memcpy(c.bias.strides, str, sizeof str);
    }
    c.alibi_slopes = mode == AL_LIB ? d->alibi_slopes : NULL;
    c.scale = d->scale;
    c.softcap = d->softcap;
    c.algo = d->algo;
    c.num_splits = d->num_splits;
    c.align = XATTN_ALIGN_TOP_LEFT;
    c.window_left = pb->full ? -1 : pb->wl;
    c.window_right = pb->full ? -1 : pb->wr;
    for (int64_t bb = 0; bb < nb; bb++) {
        const block_plan *p = &r->plans[b0 + bb];
        r->sl_q[bb] = p->skip ? 0 : (int32_t)p->lq;
        r->sl_k[bb] = p->skip ? 0 : (int32_t)p->lk;
    }
    c.seqlens_q = r->sl_q;
    c.seqlens_k = r->sl_k;
    xattn_run_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    double t0 = MPI_Wtime();
    /* with `info` the call is synchronous, so t1 - t0 is its whole cost */
    xattn_status st = xattn_attention(r->ctx, &c, &info);
    if (st != XATTN_STATUS_OK)
        return fail_lib(st, "xattn_attention on a ring block");
    double t1 = MPI_Wtime();
    /* partial rows back to the host (the read waits for the call) */
    xattn_tensor ot = xattn_tensor_bshd(r->obuf, 0, r->qdt, nb, nq, r->Hq, r->Dv);
    xattn_tensor lt = xattn_tensor_bshd(r->lbuf, 0, XATTN_DTYPE_F32, nb, r->Hq, nq, 1);
    st = tensor_io(&ot, 1, 0, nq, r->opart, 1, 0, "partial O");
    if (st == XATTN_STATUS_OK)
        st = tensor_io(&lt, 2, 0, nq, r->lpart, 1, 0, "partial LSE");
    if (st != XATTN_STATUS_OK)
        return st;
    double t2 = MPI_Wtime();
    merge(r, qls, nq, r->plans, b0, nb, mode, ref);
    double t3 = MPI_Wtime();
    ss->compute_ms += ((t1 - t0) + (t3 - t2)) * 1e3;
    ss->stage_ms += (t2 - t1) * 1e3;
    ss->calls++;
    return XATTN_STATUS_OK;
}

static double pair_flops(const ring *r)
{
    /* every visible (row, key) pair of the whole problem, counted once */
    double f = 0;
    for (int64_t b = 0; b < r->nlen; b++) {
        for (int64_t i = 0; i < r->Lq[b]; i++) {
            int64_t s = (r->d->align == XATTN_ALIGN_BOTTOM_RIGHT ? r->Lk[b] - r->Lq[b] : 0) + i;
            int64_t hi = r->Lk[b] - 1, lo = 0;
            if (r->d->causal && s < hi)
                hi = s;
            if (r->d->window_right >= 0 && s + r->d->window_right < hi)
                hi = s + r->d->window_right;
            if (r->d->window_left >= 0 && s - r->d->window_left > lo)
                lo = s - r->d->window_left;
            if (hi >= lo)
                f += (double)(hi - lo + 1);
        }
    }
    return f * 2.0 * (double)(r->D + r->Dv) * (double)r->Hq;
}

/* Lets MPI move the next block between calls. */
static void poll(MPI_Request *req, int nreq, xattn_mpi_step_stats *ss)
{
    if (nreq > 0) {
        double t0 = MPI_Wtime();
        int done;
        MPI_Testall(nreq, req, &done, MPI_STATUSES_IGNORE);
        ss->comm_ms += (MPI_Wtime() - t0) * 1e3;
    }
}

/* The calls of one pair for batch entries [b0, b0+nb), or for sequence `seq`
 * of a packed batch (seq >= 0; its plan in plans[0]). */
static xattn_status run_pair(ring *r, const pair *pr, int64_t sk_blk, int64_t b0, int64_t nb,
                             int64_t seq, int mode, xattn_mpi_step_stats *ss)
{
    int bottom_right = r->d->align == XATTN_ALIGN_BOTTOM_RIGHT;
    if (seq >= 0) {
        r->plans[0] =
            plan_block(r->Lq[seq], r->Lk[seq], bottom_right, r->d->causal, r->d->window_left,
                       r->d->window_right, pr->qo, pr->nq, pr->ko, pr->nk);
        if (r->plans[0].skip) {
            ss->skipped++;
            return XATTN_STATUS_OK;
        }
        return block_call(r, pr, sk_blk, 0, 1, &r->plans[0], mode, ss);
    }
    int any = 0, same = 1;
    const block_plan *first = NULL;
    for (int64_t b = b0; b < b0 + nb; b++) {
        block_plan *p = &r->plans[b];
        *p = plan_block(r->Lq[b], r->Lk[b], bottom_right, r->d->causal, r->d->window_left,
                        r->d->window_right, pr->qo, pr->nq, pr->ko, pr->nk);
        if (p->skip)
            continue;
        any = 1;
        if (!first)
            first = p;
        else if (p->i0 != first->i0 || p->k0 != first->k0 || p->wl != first->wl ||
                 p->wr != first->wr)
            same = 0;
    }
    if (!any) {
        ss->skipped++;
        return XATTN_STATUS_OK;
    }
    if (same)
        return block_call(r, pr, sk_blk, b0, nb, first, mode, ss);
    /* batch entries need different shifts (bottom-right with unequal
     * Lk - Lq): one call each */
    for (int64_t b = b0; b < b0 + nb; b++) {
        if (r->plans[b].skip)
            continue;
        xattn_status st = block_call(r, pr, sk_blk, b, 1, &r->plans[b], mode, ss);
        if (st != XATTN_STATUS_OK)
            return st;
    }
    return XATTN_STATUS_OK;
}

/* One pair, with ALiBi made exact across blocks: where row i's aligned
 * position minus key j's is i - j + s with s != 0, the library's ALiBi on the
 * block's local positions would use |i - j|. The s leading keys (s > 0) lie
 * before every row's position, and the -s leading rows (s < 0) see every key
 * after theirs: those parts take ALiBi as a per-key bias plus a per-row LSE
 * shift (AL_BEFORE / AL_AFTER); the rest has s = 0 and takes the library's. */
static xattn_status alibi_pair(ring *r, const pair *pr, int64_t sk_blk, int64_t b0, int64_t nb,
                               int64_t seq, xattn_mpi_step_stats *ss)
{
    if (!r->d->alibi_slopes)
        return run_pair(r, pr, sk_blk, b0, nb, seq, AL_NONE, ss);
    int bottom_right = r->d->align == XATTN_ALIGN_BOTTOM_RIGHT;
    int64_t e = seq >= 0 ? seq : b0;
    int64_t s = (bottom_right ? r->Lk[e] - r->Lq[e] : 0) + pr->qo - pr->ko;
    if (seq < 0)
        for (int64_t b = b0 + 1; b < b0 + nb; b++)
            if ((bottom_right ? r->Lk[b] - r->Lq[b] : 0) != s - pr->qo + pr->ko) {
                /* entries with different shifts split differently: one by one */
                for (int64_t b1 = b0; b1 < b0 + nb; b1++) {
                    xattn_status st = alibi_pair(r, pr, sk_blk, b1, 1, -1, ss);
                    if (st != XATTN_STATUS_OK)
                        return st;
                }
                return XATTN_STATUS_OK;
            }
    pair a = *pr, rest = *pr;
    int mode;
    int64_t m;
    if (s > 0) { /* keys [0, m) lie before every row's position */
        m = s < pr->nk ? s : pr->nk;
        a.nk = m;
        rest.kls += m;
        rest.kg += m;
        rest.ko += m;
        rest.nk -= m;
        mode = AL_BEFORE;
    } else if (s < 0) { /* rows [0, m) lie before every key */
        m = -s < pr->nq ? -s : pr->nq;
        a.nq = m;
        rest.qls += m;
        rest.qo += m;
        rest.nq -= m;
        mode = AL_AFTER;
    } else {
        return run_pair(r, pr, sk_blk, b0, nb, seq, AL_LIB, ss);
    }
    xattn_status st = run_pair(r, &a, sk_blk, b0, nb, seq, mode, ss);
    if (st == XATTN_STATUS_OK && rest.nk > 0 && rest.nq > 0)
        st = run_pair(r, &rest, sk_blk, b0, nb, seq, AL_LIB, ss);
    return st;
}

/* All (query segment, key segment) pairs of one block. */
static xattn_status compute_block(ring *r, int src, MPI_Request *req, int nreq,
                                  xattn_mpi_step_stats *ss)
{
    int64_t sk_blk = r->sk_of[src];
    int64_t qls = 0;
    for (int qs = 0; qs < 2; qs++) {
        int64_t qo = r->qseg[qs].start, nq = r->qseg[qs].length, kls = 0;
        for (int ks = 0; ks < 2; ks++) {
            int64_t ko = r->kseg[src][ks].start, nk = r->kseg[src][ks].length;
            if (nq == 0 || nk == 0) {
                kls += nk;
                continue;
            }
            if (r->packed) {
                /* each sequence's part of the two segments is its own block */
                for (int64_t q = 0; q < r->nlen; q++) {
                    int64_t qa = qo > r->cq[q] ? qo : r->cq[q];
                    int64_t qb = qo + nq < r->cq[q + 1] ? qo + nq : r->cq[q + 1];
                    int64_t ka = ko > r->ck[q] ? ko : r->ck[q];
                    int64_t kb = ko + nk < r->ck[q + 1] ? ko + nk : r->ck[q + 1];
                    if (qa >= qb || ka >= kb)
                        continue;
                    pair pr = {qls + (qa - qo), qb - qa,      kls + (ka - ko), kb - ka, ka,
                               qa - r->cq[q],   ka - r->ck[q]};
                    xattn_status st = alibi_pair(r, &pr, sk_blk, 0, 1, q, ss);
                    if (st != XATTN_STATUS_OK)
                        return st;
                    poll(req, nreq, ss);
                }
                kls += nk;
                continue;
            }
            pair pr = {qls, nq, kls, nk, ko, qo, ko};
            xattn_status st = alibi_pair(r, &pr, sk_blk, 0, r->B, -1, ss);
            if (st != XATTN_STATUS_OK)
                return st;
            poll(req, nreq, ss);
            kls += nk;
        }
        qls += nq;
    }
    return XATTN_STATUS_OK;
}

/* Frees what no MPI operation reads or writes (release() does the rest). */
static void ring_free(ring *r)
{
    free(r->Lq);
    free(r->Lk);
    free(r->cq);
    free(r->ck);
    free((void *)r->kseg);
    free(r->sk_of);
    xattn_buffer_free(r->kvbuf);
    xattn_buffer_free(r->obuf);
    xattn_buffer_free(r->lbuf);
    free(r->opart);
    free(r->lpart);
    free(r->acc_o);
    free(r->acc_l);
    free(r->sl_q);
    free(r->sl_k);
    free(r->plans);
    xattn_buffer_free(r->atab);
}

/* This rank's own checks of its descriptor, before any agreement. */
static xattn_status check_local(ring *r)
{
    const xattn_attn_desc *d = r->d;
    if (!r->ctx)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "ctx: NULL");
    if (!d)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "d: NULL");
    if (!d->cu_seqlens_q != !d->cu_seqlens_k)
        return fail(XATTN_STATUS_INVALID_ARGUMENT,
                    "cu_seqlens_q and cu_seqlens_k: both set (a packed batch) or both NULL");
    /* The shards are rows of ordinary k/v views: a page pool, or an append
     * into a cache, is one rank's memory layout the ring does not cut. */
    if (d->struct_size >= offsetof(xattn_attn_desc, v_new) + sizeof d->v_new &&
        (d->block_table || d->k_new.buffer))
        return fail(XATTN_STATUS_UNSUPPORTED,
                    "%s: paged KV caches and appends are not supported across ranks yet",
                    d->block_table ? "block_table" : "k_new");
    if (d->k.dtype == XATTN_DTYPE_FP8_E4M3 || d->k.dtype == XATTN_DTYPE_FP8_E5M2 ||
        d->k.dtype == XATTN_DTYPE_Q8_0)
        return fail(XATTN_STATUS_UNSUPPORTED,
                    "k.dtype: %s K/V caches are not supported across ranks yet",
                    xattn_dtype_name(d->k.dtype));
    r->packed = d->cu_seqlens_q != NULL;
    if (r->packed && (d->seqlens_q || d->seqlens_k || d->bias.buffer))
        return fail(d->bias.buffer ? XATTN_STATUS_UNSUPPORTED : XATTN_STATUS_INVALID_ARGUMENT,
                    d->bias.buffer ? "bias: not supported with a packed batch across ranks yet"
                                   : "seqlens_q/k: not with cu_seqlens (a packed batch)");
    if (r->packed && (d->num_seqs < 1 || d->num_seqs > (1 << 24)))
        return fail(XATTN_STATUS_INVALID_LENGTHS, "num_seqs: %lld, expected 1..2^24",
                    (long long)d->num_seqs);
    if (!r->alltoall && d->alibi_slopes && (d->bias.buffer || d->bias.shape[0]))
        return fail(XATTN_STATUS_UNSUPPORTED,
                    "alibi_slopes with a bias: not supported across ranks (the ring applies "
                    "ALiBi of some blocks as a bias of its own); add the ALiBi terms to the bias");
    if (r->o.sq_global < 1 || r->o.sk_global < 1 || r->o.sq_global > INT32_MAX ||
        r->o.sk_global > INT32_MAX)
        return fail(XATTN_STATUS_INVALID_SHAPE,
                    "opts.sq_global / sk_global: %lld / %lld, expected 1..2^31-1",
                    (long long)r->o.sq_global, (long long)r->o.sk_global);
    if (r->o.layout != XATTN_MPI_CONTIGUOUS && r->o.layout != XATTN_MPI_ZIGZAG)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "opts.layout: %d, expected 0 or 1",
                    (int)r->o.layout);
    if (d->causal != 0 && d->causal != 1)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "causal: %d, expected 0 or 1", d->causal);
    if (d->align != XATTN_ALIGN_TOP_LEFT && d->align != XATTN_ALIGN_BOTTOM_RIGHT)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "align: %d, expected 0 or 1", (int)d->align);
    xattn_mpi_segment ks[2];
    int64_t want_q = xattn_mpi_shard(r->o.layout, r->o.sq_global, r->n, r->rank, r->qseg);
    int64_t want_k = xattn_mpi_shard(r->o.layout, r->o.sk_global, r->n, r->rank, ks);
    r->sq_loc = want_q;
    const char *lay = r->o.layout == XATTN_MPI_ZIGZAG ? "zigzag" : "contiguous";
    if (d->q.shape[1] != want_q || d->o.shape[1] != want_q)
        return fail(XATTN_STATUS_INVALID_SHAPE,
                    "q/o.shape[1]: %lld/%lld, but rank %d's %s shard of sq_global %lld holds "
                    "%lld positions",
                    (long long)d->q.shape[1], (long long)d->o.shape[1], r->rank, lay,
                    (long long)r->o.sq_global, (long long)want_q);
    if (d->k.shape[1] != want_k || d->v.shape[1] != want_k)
        return fail(XATTN_STATUS_INVALID_SHAPE,
                    "k/v.shape[1]: %lld/%lld, but rank %d's %s shard of sk_global %lld holds "
                    "%lld positions",
                    (long long)d->k.shape[1], (long long)d->v.shape[1], r->rank, lay,
                    (long long)r->o.sk_global, (long long)want_k);
    /* bias: this rank's query rows (in shard order) against every global key */
    if (d->bias.buffer && want_q > 0 &&
        (d->bias.shape[2] < want_q || d->bias.shape[3] < r->o.sk_global))
        return fail(XATTN_STATUS_INVALID_SHAPE,
                    "bias.shape[2..3]: %lld x %lld, expected at least this rank's %lld query rows "
                    "x sk_global %lld keys",
                    (long long)d->bias.shape[2], (long long)d->bias.shape[3], (long long)want_q,
                    (long long)r->o.sk_global);
    if (d->lse.buffer && d->lse.shape[2] != want_q)
        return fail(XATTN_STATUS_INVALID_SHAPE, "lse.shape[2]: %lld, expected %lld",
                    (long long)d->lse.shape[2], (long long)want_q);
    for (int i = 0; i < 4; i++)
        if (d->q.shape[i] < 0 || d->k.shape[i] < 0 || d->v.shape[i] < 0 || d->o.shape[i] < 0)
            return fail(XATTN_STATUS_INVALID_SHAPE, "a negative extent in q, k, v or o");
    r->B = d->q.shape[0];
    r->Hq = d->q.shape[2];
    r->D = d->q.shape[3];
    r->Hkv = d->k.shape[2];
    r->Dv = d->v.shape[3];
    r->qdt = d->q.dtype;
    r->kvdt = d->k.dtype;
    r->qes = xattn_dtype_size(r->qdt);
    r->kves = xattn_dtype_size(r->kvdt);
    if (r->B < 1 || r->Hq < 1 || r->Hkv < 1 || r->D < 1 || r->Dv < 1 || r->qes == 0 ||
        r->kves == 0 || r->B > (1 << 20) || r->Hq > (1 << 16) || r->D > 4096 || r->Dv > 4096)
        return fail(XATTN_STATUS_INVALID_SHAPE,
                    "q/k/v: batch %lld, heads %lld/%lld, head dims %lld/%lld or dtypes out of "
                    "range",
                    (long long)r->B, (long long)r->Hq, (long long)r->Hkv, (long long)r->D,
                    (long long)r->Dv);
    /* The library checks this rank's descriptor (global lengths left out:
     * they exceed the local extents). An empty shard is replaced by a
     * one-position stand-in of the same extents and dtypes, so that a rank
     * holding only queries (or only keys) is checked all the same. */
    xattn_attn_desc c = *d;
    c.seqlens_q = c.seqlens_k = NULL;
    c.cu_seqlens_q = c.cu_seqlens_k = NULL; /* global token offsets: checked below */
    c.num_seqs = 0;
    xattn_buffer *stand_in = NULL;
    if (want_q == 0 || want_k == 0) {
        size_t bytes = (size_t)(r->B * (r->Hq * (r->D + r->Dv + 1) + r->Hkv * (r->D + r->Dv))) * 4;
        xattn_status st = xattn_buffer_alloc(r->ctx, bytes, &stand_in);
        if (st != XATTN_STATUS_OK)
            return fail_lib(st, "a stand-in for an empty shard");
        size_t at = 0;
        if (want_q == 0) {
            c.bias.buffer = NULL; /* no query row: nothing of it is read */
            c.q = xattn_tensor_bshd(stand_in, at, d->q.dtype, r->B, 1, r->Hq, r->D);
            at += (size_t)(r->B * r->Hq * r->D) * 4;
            c.o = xattn_tensor_bshd(stand_in, at, d->o.dtype, r->B, 1, r->Hq, r->Dv);
            at += (size_t)(r->B * r->Hq * r->Dv) * 4;
            if (d->lse.buffer || d->lse.shape[0])
                c.lse = xattn_tensor_bshd(stand_in, at, d->lse.dtype, r->B, r->Hq, 1, 1);
            at += (size_t)(r->B * r->Hq) * 4;
        }
        if (want_k == 0) {
            c.k = xattn_tensor_bshd(stand_in, at, d->k.dtype, r->B, 1, r->Hkv, r->D);
            at += (size_t)(r->B * r->Hkv * r->D) * 4;
            c.v = xattn_tensor_bshd(stand_in, at, d->v.dtype, r->B, 1, r->Hkv, r->Dv);
        }
    }
    xattn_status cst = xattn_attention_check(r->ctx, &c);
    xattn_buffer_free(stand_in);
    if (cst != XATTN_STATUS_OK)
        return fail_lib(cst, "this rank's descriptor");
    if (r->packed && r->B != 1)
        return fail(XATTN_STATUS_INVALID_SHAPE, "q.shape[0]: %lld, a packed batch has 1",
                    (long long)r->B);
    r->nlen = r->packed ? d->num_seqs : r->B;
    r->Lq = calloc((size_t)r->nlen, sizeof *r->Lq);
    r->Lk = calloc((size_t)r->nlen, sizeof *r->Lk);
    if (r->packed) {
        r->cq = calloc((size_t)r->nlen + 1, sizeof *r->cq);
        r->ck = calloc((size_t)r->nlen + 1, sizeof *r->ck);
    }
    if (!r->Lq || !r->Lk || (r->packed && (!r->cq || !r->ck)))
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "lengths");
    if (r->packed) {
        const int32_t *cu[2] = {d->cu_seqlens_q, d->cu_seqlens_k};
        int64_t *to[2] = {r->cq, r->ck}, tot[2] = {r->o.sq_global, r->o.sk_global};
        for (int w = 0; w < 2; w++) {
            if (cu[w][0] != 0)
                return fail(XATTN_STATUS_INVALID_LENGTHS, "cu_seqlens_%c[0]: %d, expected 0",
                            w ? 'k' : 'q', (int)cu[w][0]);
            for (int64_t b = 0; b <= r->nlen; b++) {
                to[w][b] = cu[w][b];
                if (b > 0 && (cu[w][b] < cu[w][b - 1] || cu[w][b] > tot[w]))
                    return fail(XATTN_STATUS_INVALID_LENGTHS,
                                "cu_seqlens_%c[%lld]: %d, expected %d..%lld (non-decreasing, "
                                "within the %s tokens)",
                                w ? 'k' : 'q', (long long)b, (int)cu[w][b], (int)cu[w][b - 1],
                                (long long)tot[w], w ? "sk_global" : "sq_global");
            }
        }
        for (int64_t b = 0; b < r->nlen; b++) {
            r->Lq[b] = r->cq[b + 1] - r->cq[b];
            r->Lk[b] = r->ck[b + 1] - r->ck[b];
        }
        return XATTN_STATUS_OK;
    }
    for (int64_t b = 0; b < r->B; b++) {
        r->Lq[b] = d->seqlens_q ? d->seqlens_q[b] : r->o.sq_global;
        r->Lk[b] = d->seqlens_k ? d->seqlens_k[b] : r->o.sk_global;
        if (r->Lq[b] < 0 || r->Lq[b] > r->o.sq_global)
            return fail(XATTN_STATUS_INVALID_LENGTHS, "seqlens_q[%lld]: %lld, expected 0..%lld",
                        (long long)b, (long long)r->Lq[b], (long long)r->o.sq_global);
        if (r->Lk[b] < 0 || r->Lk[b] > r->o.sk_global)
            return fail(XATTN_STATUS_INVALID_LENGTHS, "seqlens_k[%lld]: %lld, expected 0..%lld",
                        (long long)b, (long long)r->Lk[b], (long long)r->o.sk_global);
    }
    return XATTN_STATUS_OK;
}

/* The problem's signature: what every rank must give alike. */
enum {
    F_BATCH,
    F_HQ,
    F_HKV,
    F_D,
    F_DV,
    F_QDT,
    F_KVDT,
    F_SQ,
    F_SK,
    F_LAYOUT,
    F_CAUSAL,
    F_ALIGN,
    F_WL,
    F_WR,
    F_SCALE,
    F_SOFTCAP,
    F_LQ,
    F_LK,
    F_ALIBI,
    F_BIAS,
    F_LSE,
    NSIG
};
static const char *const sig_names[NSIG] = {"batch",
                                            "Hq",
                                            "Hkv",
                                            "D",
                                            "Dv",
                                            "q dtype",
                                            "k/v dtype",
                                            "sq_global",
                                            "sk_global",
                                            "layout",
                                            "causal",
                                            "align",
                                            "window_left",
                                            "window_right",
                                            "scale",
                                            "softcap",
                                            "seqlens_q (or cu_seqlens_q)",
                                            "seqlens_k (or cu_seqlens_k)",
                                            "alibi_slopes",
                                            "bias (given, shape[0..1], dtype)",
                                            "lse (given or not)"};

/* How one signature field reads in a message: names, not enum numbers. */
static void sig_text(int f, int64_t v, char *out, size_t cap)
{
    switch (f) {
    case F_QDT:
    case F_KVDT: snprintf(out, cap, "%s", xattn_dtype_name((xattn_dtype)v)); return;
    case F_LAYOUT:
        snprintf(out, cap, "%s",
                 v == XATTN_MPI_ZIGZAG       ? "zigzag"
                 : v == XATTN_MPI_CONTIGUOUS ? "contiguous"
                                             : "an invalid layout");
        return;
    case F_ALIGN:
        snprintf(out, cap, "%s",
                 v == XATTN_ALIGN_TOP_LEFT       ? "top-left"
                 : v == XATTN_ALIGN_BOTTOM_RIGHT ? "bottom-right"
                                                 : "an invalid alignment");
        return;
    case F_WL:
    case F_WR:
        if (v < 0) {
            snprintf(out, cap, "unbounded (%lld)", (long long)v);
            return;
        }
        break;
    case F_SCALE:
    case F_SOFTCAP: {
        int32_t bits = (int32_t)v;
        float x;
        memcpy(&x, &bits, 4);
        snprintf(out, cap, "%.9g", (double)x);
        return;
    }
    case F_LQ:
    case F_LK:
    case F_ALIBI:
        snprintf(out, cap, v ? "a list (digest %llx)" : "none", (unsigned long long)v);
        return;
    case F_BIAS:
        if (!v)
            snprintf(out, cap, "none");
        else
            snprintf(out, cap, "[%lld, %lld, ...] %s", (long long)((v / 16) / 65536),
                     (long long)((v / 16) % 65536), xattn_dtype_name((xattn_dtype)(v % 16 - 1)));
        return;
    case F_LSE: snprintf(out, cap, "%s", v ? "given" : "not given"); return;
    default: break;
    }
    snprintf(out, cap, "%lld", (long long)v);
}

/* This rank's signature; known[f] = 0 where a field could not be read (a
 * descriptor that failed its checks before the lengths were read). */
static void signature(const ring *r, int local_ok, int64_t *v, int *known)
{
    const xattn_attn_desc *d = r->d;
    memset(v, 0, NSIG * sizeof *v);
    for (int f = 0; f < NSIG; f++)
        known[f] = d != NULL;
    v[F_SQ] = r->o.sq_global;
    v[F_SK] = r->o.sk_global;
    v[F_LAYOUT] = r->o.layout;
    known[F_SQ] = known[F_SK] = known[F_LAYOUT] = 1;
    if (!d)
        return;
    v[F_BATCH] = d->q.shape[0];
    v[F_HQ] = d->q.shape[2];
    v[F_HKV] = d->k.shape[2];
    v[F_D] = d->q.shape[3];
    v[F_DV] = d->v.shape[3];
    v[F_QDT] = d->q.dtype;
    v[F_KVDT] = d->k.dtype;
    v[F_CAUSAL] = d->causal;
    v[F_ALIGN] = d->align;
    v[F_WL] = d->window_left;
    v[F_WR] = d->window_right;
    float sc = d->scale, cap = d->softcap;
    int32_t sci, capi;
    memcpy(&sci, &sc, 4);
    memcpy(&capi, &cap, 4);
    v[F_SCALE] = sci;
    v[F_SOFTCAP] = capi;
    /* the all-to-all sends bias rows: every rank must know its shape */
    int given = d->bias.buffer || d->bias.shape[0];
    v[F_BIAS] =
        r->alltoall && given
            ? ((d->bias.shape[0] * 65536 + d->bias.shape[1]) * 16 + (int64_t)d->bias.dtype + 1)
            : 0;
    v[F_LSE] = d->lse.buffer || d->lse.shape[0];
    /* the lengths and slopes: read only from a descriptor that passed */
    known[F_LQ] = known[F_LK] = known[F_ALIBI] = local_ok && r->Lq && r->Lk;
    if (!known[F_LQ])
        return;
    uint64_t hq = 1469598103934665603ull, hk = hq, ha = 0;
    hq = (hq ^ (uint64_t)(r->packed ? -r->nlen : r->nlen)) * 1099511628211ull;
    for (int64_t b = 0; b < r->nlen; b++) {
        hq = (hq ^ (uint64_t)r->Lq[b]) * 1099511628211ull;
        hk = (hk ^ (uint64_t)r->Lk[b]) * 1099511628211ull;
    }
    if (d->alibi_slopes) {
        ha = 1469598103934665603ull;
        for (int64_t h = 0; h < r->Hq; h++) {
            uint32_t bits;
            memcpy(&bits, &d->alibi_slopes[h], 4);
            ha = (ha ^ bits) * 1099511628211ull;
        }
        ha |= 2;
    }
    v[F_LQ] = (int64_t)(hq >> 1) | 1;
    v[F_LK] = (int64_t)(hk >> 1) | 1;
    v[F_ALIBI] = (int64_t)(ha >> 1);
}

/*
 * The prelude's agreement: one MPI_Iallgather of every rank's local status
 * and problem signature. Every rank sees the same table, so every rank
 * decides alike: ranks that describe different problems get
 * XATTN_STATUS_INVALID_ARGUMENT naming the field, the first rank that
 * differs and both values; otherwise the status of the lowest rank that
 * failed its own checks.
 */
static xattn_status agree_problem(ring *r, xattn_status mine)
{
    enum { W = NSIG + 2 };
    char saved[sizeof mpi_err];
    memcpy(saved, mpi_err, sizeof saved);
    r->sig = calloc((size_t)(r->n + 1) * W, sizeof *r->sig);
    if (!r->sig) /* the others would wait for this rank: nothing else to do */
        mine = fail(XATTN_STATUS_OUT_OF_MEMORY, "the problem agreement's table");
    int64_t v[NSIG], *me = r->sig ? r->sig + (size_t)r->n * W : v;
    int known[NSIG];
    signature(r, mine == XATTN_STATUS_OK, v, known);
    if (!r->sig)
        return mine;
    me[0] = mine;
    me[1] = 0;
    for (int f = 0; f < NSIG; f++) {
        me[2 + f] = v[f];
        me[1] |= (int64_t)known[f] << f;
    }
    MPI_Request req;
    if (MPI_Iallgather(me, W, MPI_INT64_T, r->sig, W, MPI_INT64_T, r->comm, &req) != MPI_SUCCESS)
        return fail(XATTN_STATUS_BACKEND, "MPI_Iallgather (problem agreement) failed");
    xattn_status st = wait_ops(r, 1, &req, 0, "problem agreement");
    if (st != XATTN_STATUS_OK)
        return st;
    for (int f = 0; f < NSIG; f++) {
        int ref = -1;
        for (int p = 0; p < r->n; p++) {
            const int64_t *e = r->sig + (size_t)p * W;
            if (!((e[1] >> f) & 1))
                continue;
            if (ref < 0) {
                ref = p;
                continue;
            }
            int64_t a = r->sig[(size_t)ref * W + 2 + f], b = e[2 + f];
            if (a == b)
                continue;
            char ta[64], tb[64];
            sig_text(f, a, ta, sizeof ta);
            sig_text(f, b, tb, sizeof tb);
            return fail(XATTN_STATUS_INVALID_ARGUMENT,
                        "ranks disagree on %s: rank %d has %s where rank %d has %s; every rank "
                        "must describe the same problem",
                        sig_names[f], p, tb, ref, ta);
        }
    }
    for (int p = 0; p < r->n; p++) {
        xattn_status s = (xattn_status)r->sig[(size_t)p * W];
        if (s == XATTN_STATUS_OK)
            continue;
        if (p == r->rank) {
            memcpy(mpi_err, saved, sizeof saved);
            return s;
        }
        if (mine != XATTN_STATUS_OK)
            return fail(s,
                        "rank %d failed first (%s) during the descriptor checks; its message is "
                        "on that rank, and every rank returns its status. This rank failed too "
                        "(%s): %s",
                        p, xattn_status_name(s), xattn_status_name(mine), saved);
        return fail(s,
                    "rank %d failed (%s) during the descriptor checks; its message is on that "
                    "rank",
                    p, xattn_status_name(s));
    }
    return XATTN_STATUS_OK;
}

/* The per-key ALiBi terms (AL_BEFORE / AL_AFTER) for every head, on the
 * device: [Hq, 2*kmax] slope*(x - (kmax-1)), then [Hq, kmax] -slope*x. */
static xattn_status alibi_tables(ring *r)
{
    int64_t k = r->kmax, w = 3 * k;
    float *t = malloc((size_t)(r->Hq * w) * sizeof(float));
    if (!t)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "ALiBi tables");
    float *a = t, *b = t + r->Hq * 2 * k;
    for (int64_t h = 0; h < r->Hq; h++) {
        double sl = r->d->alibi_slopes[h];
        for (int64_t x = 0; x < 2 * k; x++)
            a[h * 2 * k + x] = (float)(sl * (double)(x - (k - 1)));
        for (int64_t x = 0; x < k; x++)
            b[h * k + x] = (float)(-sl * (double)x);
    }
    size_t bytes = (size_t)(r->Hq * w) * sizeof(float);
    xattn_status st = xattn_buffer_alloc(r->ctx, bytes, &r->atab);
    if (st == XATTN_STATUS_OK)
        st = xattn_buffer_write(r->atab, 0, t, bytes);
    free(t);
    return st;
}

/* How this rank's K/V blocks travel (docs/scale.md, "CUDA-aware MPI"):
 * r->devstage = 1 hands the device buffers to MPI_Isend / MPI_Irecv. The
 * environment variable XATTN_MPI_STAGING = host | device | auto (default)
 * forces host staging, or demands the device path (an error where it cannot
 * be had, with the reason). */
static xattn_status choose_staging(ring *r)
{
    const char *env = getenv("XATTN_MPI_STAGING");
    int want = 0; /* 0 auto, 1 host, 2 device */
    if (env && *env) {
        if (!strcmp(env, "host"))
            want = 1;
        else if (!strcmp(env, "device"))
            want = 2;
        else if (strcmp(env, "auto"))
            return fail(XATTN_STATUS_INVALID_ARGUMENT,
                        "XATTN_MPI_STAGING: '%.64s', expected host, device or auto", env);
    }
    const char *no = NULL;
    if (want == 1)
        no = "XATTN_MPI_STAGING=host";
    else if (xattn_ctx_backend(r->ctx) != XATTN_BACKEND_CUDA)
        no = "not a CUDA context";
#if XATTN_MPI_DEVICE_PATH
    else if (MPIX_Query_cuda_support() != 1)
        no = "MPIX_Query_cuda_support() says the MPI library takes no CUDA memory";
#else
    else
        no = XATTN_MPI_NO_DEVICE;
#endif
    if (no && want == 2)
        return fail(XATTN_STATUS_UNSUPPORTED, "XATTN_MPI_STAGING=device: %s", no);
    r->devstage = no == NULL;
    snprintf(r->stage_why, sizeof r->stage_why, "%s", no ? no : "CUDA-aware MPI");
    return XATTN_STATUS_OK;
}

/* The device address MPI gets for a buffer (the device path only). */
static void *mpi_ptr(ring *r, int which)
{
#if XATTN_MPI_DEVICE_PATH
    return xattn_cuda_buffer_device_ptr(r->kvdev[which]);
#else
    (void)r;
    (void)which;
    return NULL;
#endif
}

static xattn_status setup(ring *r)
{
    xattn_status cs = choose_staging(r);
    if (cs != XATTN_STATUS_OK)
        return cs;
    r->kseg = calloc((size_t)r->n, sizeof *r->kseg);
    r->sk_of = calloc((size_t)r->n, sizeof *r->sk_of);
    if (!r->kseg || !r->sk_of)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "ring tables");
    int64_t max_nq = 1;
    for (int p = 0; p < r->n; p++) {
        r->sk_of[p] = xattn_mpi_shard(r->o.layout, r->o.sk_global, r->n, p, r->kseg[p]);
        if (block_bytes(r, r->sk_of[p]) > r->max_block)
            r->max_block = block_bytes(r, r->sk_of[p]);
        for (int k = 0; k < 2; k++)
            if (r->kseg[p][k].length > r->kmax)
                r->kmax = r->kseg[p][k].length;
    }
    for (int s = 0; s < 2; s++)
        if (r->qseg[s].length > max_nq)
            max_nq = r->qseg[s].length;
    size_t nacc = (size_t)(r->B * (r->sq_loc ? r->sq_loc : 1) * r->Hq);
    size_t npart = (size_t)(r->B * max_nq * r->Hq);
    r->host[0] = malloc(r->max_block ? r->max_block : 1);
    r->host[1] = malloc(r->max_block ? r->max_block : 1);
    r->opart = malloc(npart * (size_t)r->Dv * sizeof(float));
    r->lpart = malloc(npart * sizeof(float));
    r->acc_o = calloc(nacc * (size_t)r->Dv, sizeof(float));
    r->acc_l = malloc(nacc * sizeof(float));
    r->sl_q = calloc((size_t)r->B, sizeof(int32_t));
    r->sl_k = calloc((size_t)r->B, sizeof(int32_t));
    r->plans = calloc((size_t)r->B, sizeof(block_plan));
    if (!r->host[0] || !r->host[1] || !r->opart || !r->lpart || !r->acc_o || !r->acc_l ||
        !r->sl_q || !r->sl_k || !r->plans)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "ring host buffers (%zu-byte blocks)",
                    r->max_block);
    for (size_t i = 0; i < nacc; i++)
        r->acc_l[i] = -INFINITY;
    if (r->sq_loc > 0) {
        xattn_status st = xattn_buffer_alloc(r->ctx, r->max_block ? r->max_block : 1, &r->kvbuf);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_alloc(r->ctx, npart * (size_t)r->Dv * r->qes, &r->obuf);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_alloc(r->ctx, npart * sizeof(float), &r->lbuf);
        if (st == XATTN_STATUS_OK && r->d->alibi_slopes && r->kmax > 0)
            st = alibi_tables(r);
        if (st != XATTN_STATUS_OK)
            return fail_lib(st, "ring device buffers");
    }
    /* this rank's own K/V block, packed: K [B, sk, Hkv, D] then V [B, sk, Hkv, Dv] */
    int64_t sk = r->sk_of[r->rank];
    xattn_status st = tensor_io(&r->d->k, 1, 0, sk, r->host[0], 0, 0, "k");
    if (st == XATTN_STATUS_OK)
        st = tensor_io(&r->d->v, 1, 0, sk,
                       r->host[0] + (size_t)(r->B * sk * r->Hkv * r->D) * r->kves, 0, 0, "v");
    if (st == XATTN_STATUS_OK && r->devstage) {
        /* every rank relays blocks, also one without query rows: both device
         * buffers everywhere, this rank's own block in the first */
        size_t bytes = r->max_block ? r->max_block : 1;
        st = xattn_buffer_alloc(r->ctx, bytes, &r->kvdev[0]);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_alloc(r->ctx, bytes, &r->kvdev[1]);
        if (st == XATTN_STATUS_OK)
            st = xattn_buffer_write(r->kvdev[0], 0, r->host[0], block_bytes(r, sk));
        if (st == XATTN_STATUS_OK) /* MPI reads it from the device: the copy must be done */
            st = xattn_ctx_sync(r->ctx);
        if (st != XATTN_STATUS_OK)
            return fail_lib(st, "the ring's device buffers for CUDA-aware MPI");
        if (!mpi_ptr(r, 0) || !mpi_ptr(r, 1))
            return fail(XATTN_STATUS_BACKEND, "no device address for the ring's buffers");
    }
    return st;
}

/* Attention sinks (docs/semantics.md, step 8) join each row's denominator
 * once: folded into the merged rows, never into a block's partial (the block
 * calls run without them). Padding rows, and tokens of a packed stream past
 * its last sequence, keep O = 0 and LSE = -inf. */
static xattn_status fold_sinks(ring *r)
{
    int64_t Hq = r->Hq, start[4] = {0, 0, 0, 0}, count[4] = {1, 1, Hq, 1};
    float *sink = malloc((size_t)Hq * sizeof(float));
    if (!sink)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "sinks");
    xattn_status st =
        xattn_host_box_io(&r->d->sinks, start, count, sink, 1, 0, "sinks", mpi_err, sizeof mpi_err);
    for (int64_t b = 0; b < r->B && st == XATTN_STATUS_OK; b++)
        for (int s = 0, at = 0; s < 2; at += (int)r->qseg[s].length, s++)
            for (int64_t i = 0; i < r->qseg[s].length; i++) {
                int64_t gi = r->qseg[s].start + i, li = at + i;
                if (gi >= (r->packed ? r->cq[r->nlen] : r->Lq[b]))
                    continue; /* not a real row */
                for (int64_t h = 0; h < Hq; h++) {
                    float *la = &r->acc_l[(b * Hq + h) * r->sq_loc + li];
                    float *oa = &r->acc_o[((b * r->sq_loc + li) * Hq + h) * r->Dv];
                    double L = *la, k = sink[h];
                    if (isnan(L) || k == -INFINITY)
                        continue;
                    if (L == -INFINITY) { /* no key: only the sink, O stays 0 */
                        *la = sink[h];
                        continue;
                    }
                    double m = isnan(k) ? k : (L > k ? L : k), l = exp(L - m) + exp(k - m);
                    double w = exp(L - m) / l; /* NaN for a NaN or +inf sink */
                    for (int64_t e = 0; e < r->Dv; e++)
                        oa[e] = (float)(oa[e] * w);
                    *la = (float)(m + log(l));
                }
            }
    free(sink);
    return st;
}

static xattn_status finish(ring *r)
{
    if (r->sq_loc == 0)
        return XATTN_STATUS_OK;
    if (r->d->sinks.buffer) {
        xattn_status ss = fold_sinks(r);
        if (ss != XATTN_STATUS_OK)
            return ss;
    }
    xattn_status st = tensor_io(&r->d->o, 1, 0, r->sq_loc, r->acc_o, 1, 1, "o");
    if (st == XATTN_STATUS_OK && r->d->lse.buffer)
        st = tensor_io(&r->d->lse, 2, 0, r->sq_loc, r->acc_l, 1, 1, "lse");
    return st;
}

/* Message sizes, checked before anything is allocated or staged: MPI counts
 * are ints. Every rank computes every rank's sizes from the agreed problem,
 * so every rank decides alike without a further agreement. */
static xattn_status check_sizes(ring *r)
{
    const double lim = (double)INT32_MAX;
    int n = r->n;
    double qes = (double)r->qes, kes = (double)r->kves;
    if (!r->alltoall) {
        for (int p = 0; p < n; p++) {
            xattn_mpi_segment s[2];
            int64_t sk = xattn_mpi_shard(r->o.layout, r->o.sk_global, n, p, s);
            double blk = (double)r->B * (double)sk * (double)r->Hkv * (double)(r->D + r->Dv) * kes;
            if (blk > lim)
                return fail(XATTN_STATUS_SIZE_OVERFLOW,
                            "rank %d's K/V block is %.0f bytes, more than one MPI message "
                            "(2^31-1 bytes); use more ranks. Refused before any staging",
                            p, blk);
        }
        return XATTN_STATUS_OK;
    }
    const xattn_tensor *bt = &r->d->bias;
    int has_bias = bt->buffer || bt->shape[0];
    double hq = (double)(r->Hq / n), hk = (double)(r->Hkv / n), B = (double)r->B;
    double Bb = has_bias ? (double)bt->shape[0] : 0, Hb = has_bias ? (double)bt->shape[1] : 0;
    double hb = Hb == 1 ? 1 : hq,
           brow = has_bias ? (double)r->o.sk_global * (double)xattn_dtype_size(bt->dtype) : 0;
    double qrow = hq * (double)r->D * qes, kvrow = hk * (double)(r->D + r->Dv) * kes;
    double orow = hq * (double)r->Dv * qes + (r->want_lse ? hq * 4 : 0);
    double Sq = (double)r->o.sq_global, Sk = (double)r->o.sk_global;
    double in_all = B * (Sq * qrow + Sk * kvrow) + Bb * hb * Sq * brow, out_all = B * Sq * orow;
    for (int p = 0; p < n; p++) {
        xattn_mpi_segment s[2];
        double sq = (double)xattn_mpi_shard(r->o.layout, r->o.sq_global, n, p, s);
        double sk = (double)xattn_mpi_shard(r->o.layout, r->o.sk_global, n, p, s);
        double in_one = B * (sq * qrow + sk * kvrow) + Bb * hb * sq * brow, out_one = B * sq * orow;
        double worst = in_all;
        if (n * in_one > worst)
            worst = n * in_one;
        if (out_all > worst)
            worst = out_all;
        if (n * out_one > worst)
            worst = n * out_one;
        if (worst > lim)
            return fail(XATTN_STATUS_SIZE_OVERFLOW,
                        "the all-to-all moves %.0f bytes through rank %d, more than MPI's int "
                        "counts and displacements reach (2^31-1 bytes); use more ranks or the "
                        "ring. Refused before any staging",
                        worst, p);
    }
    return XATTN_STATUS_OK;
}

/* Shared by both strategies: a private communicator, this rank's checks and
 * every rank's agreement on them and on the problem. *dup_ok = 0: the
 * duplicate does not exist (r->comm not to be freed). */
static xattn_status prelude(ring *r, MPI_Comm comm, xattn_ctx *ctx, const xattn_attn_desc *d,
                            const xattn_mpi_ring_opts *opts, xattn_mpi_stats *S, int alltoall,
                            int *dup_ok, int *dup_left)
{
    mpi_err[0] = 0;
    memset(S, 0, sizeof *S);
    *dup_ok = 0;
    *dup_left = 0;
    r->ctx = ctx;
    r->d = d;
    r->alltoall = alltoall;
    r->gone = -1;
    r->step = -1; /* not in a ring step */
    /* a caller's struct of an older, shorter version: its fields only */
    xattn_mpi_ring_opts_init(&r->o);
    if (opts) {
        size_t n =
            opts->struct_size >= offsetof(xattn_mpi_ring_opts, timeout_ms) + sizeof(double) &&
                    opts->struct_size < sizeof r->o
                ? opts->struct_size
                : sizeof r->o;
        memcpy(&r->o, opts, n);
    }
    if (!(r->o.timeout_ms > 0)) /* 0, negative or NaN */
        r->o.timeout_ms = 60000;
    if (!(r->o.entry_timeout_ms > 0))
        r->o.entry_timeout_ms = r->o.timeout_ms;
    if (MPI_Comm_rank(comm, &r->rank) != MPI_SUCCESS || MPI_Comm_size(comm, &r->n) != MPI_SUCCESS)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "comm: not a valid communicator");
    S->struct_size = sizeof *S;
    S->rank = r->rank;
    S->nranks = r->n;
    /* a private communicator: these messages never meet the caller's */
    MPI_Request dreq;
    if (MPI_Comm_idup(comm, &r->comm, &dreq) != MPI_SUCCESS)
        return fail(XATTN_STATUS_BACKEND, "MPI_Comm_idup failed");
    xattn_status st =
        wait_plain(&dreq, r->o.entry_timeout_ms, "duplicating the communicator", dup_left);
    if (st != XATTN_STATUS_OK) {
        if (*dup_left)
            r->pend[r->npend++] = dreq;
        return st;
    }
    *dup_ok = 1;
    r->comm_ok = 1;
    r->beats = calloc((size_t)r->n, sizeof *r->beats);
    st = r->beats ? check_local(r) : fail(XATTN_STATUS_OUT_OF_MEMORY, "progress counters");
    if (st == XATTN_STATUS_OK && alltoall && (r->Hq % r->n || r->Hkv % r->n))
        st = fail(XATTN_STATUS_UNSUPPORTED,
                  "the all-to-all splits heads over the ranks: Hq %lld and Hkv %lld must be "
                  "multiples of the %d ranks (use the ring)",
                  (long long)r->Hq, (long long)r->Hkv, r->n);
    /* every rank sees every rank's status and signature: every rank fails alike */
    st = agree_problem(r, st);
    if (st == XATTN_STATUS_OK) {
        r->phase = 1;
        r->want_lse = d->lse.buffer || d->lse.shape[0];
        st = check_sizes(r);
    }
    return st;
}

/* Receives the remaining "waiting" signals of the other ranks (every rank
 * sent one per phase), so that none is left on the communicator. */
static void drain_beats(ring *r)
{
    if (!r->beats || r->broken)
        return;
    double t0 = MPI_Wtime();
    for (long spins = 0;; spins++) {
        int all = 1;
        for (int p = 0; p < r->n; p++)
            if (p != r->rank && r->beats[p] < r->idle_sent)
                all = 0;
        if (all)
            return;
        read_beats(r);
        if ((MPI_Wtime() - t0) * 1e3 > r->o.timeout_ms) {
            r->broken = 1; /* keep the communicator: a signal may still arrive */
            return;
        }
        if (spins > 64)
            nap();
    }
}

/* The end of every call: frees what no MPI operation uses; after a wait gave
 * up, hands the pending operations and the memory they may still read or
 * write (the ring's host blocks, the CUDA-aware path's device blocks, the
 * all-to-all's buffers and counts, the agreement's arrays inside r) to
 * limbo_add, and keeps the private communicator (a late rank may still
 * address it). */
static void release(ring *r)
{
    ring_free(r);
    drain_beats(r);
    if (!r->broken) {
        if (r->comm_ok)
            MPI_Comm_free(&r->comm);
        free(r->beats);
        free(r->sig);
        free(r->cnt);
        free(r->a2a[0]);
        free(r->a2a[1]);
        free(r->host[0]);
        free(r->host[1]);
        xattn_buffer_free(r->kvdev[0]);
        xattn_buffer_free(r->kvdev[1]);
        free(r);
        return;
    }
    void *keep[] = {r->host[0], r->host[1], r->a2a[0], r->a2a[1], r->cnt, r->sig, r->beats, r};
    limbo_add(r->pend, r->npend, keep, (int)(sizeof keep / sizeof keep[0]), r->kvdev[0],
              r->kvdev[1]);
}

static xattn_status ring_body(ring *r, xattn_mpi_stats *S, double t_start, xattn_status st)
{
    if (st == XATTN_STATUS_OK) {
        HOOK(r, "setup", -1);
        st = stage_agree(r, setup(r), "allocation");
    }
    S->setup_ms = (MPI_Wtime() - t_start) * 1e3;
    if (st != XATTN_STATUS_OK) {
        release(r);
        S->total_ms = (MPI_Wtime() - t_start) * 1e3;
        return st;
    }
    S->flops_useful = r->rank == 0 ? pair_flops(r) : 0;
    S->staging_device = r->devstage;
    snprintf(S->staging, sizeof S->staging, "%s", r->stage_why);

    int right = (r->rank + 1) % r->n, left = (r->rank - 1 + r->n) % r->n;
    int cur = 0;
    for (int t = 0; t < r->n && st == XATTN_STATUS_OK; t++) {
        xattn_mpi_step_stats ss;
        memset(&ss, 0, sizeof ss);
        ss.start_ms = (MPI_Wtime() - t_start) * 1e3;
        r->step = t;
        int src = (r->rank - t + r->n) % r->n, nsrc = (r->rank - t - 1 + r->n) % r->n;
        MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int nreq = 0;
        xattn_status mine = XATTN_STATUS_OK;
        double t0 = MPI_Wtime();
        if (t + 1 < r->n) {
            /* the block in hand goes right while the next one comes from the
             * left (sizes checked in the prelude: under 2^31 bytes) */
            size_t out = block_bytes(r, r->sk_of[src]), in = block_bytes(r, r->sk_of[nsrc]);
            /* CUDA-aware MPI: the device buffers themselves. The block
             * calls are synchronous, so the buffer received into is no
             * longer read by the previous step's compute. */
            void *sp = r->devstage ? mpi_ptr(r, cur) : r->host[cur];
            void *rp = r->devstage ? mpi_ptr(r, cur ^ 1) : r->host[cur ^ 1];
            if (MPI_Isend(sp, (int)out, MPI_BYTE, right, RING_TAG, r->comm, &req[0]) !=
                    MPI_SUCCESS ||
                MPI_Irecv(rp, (int)in, MPI_BYTE, left, RING_TAG, r->comm, &req[1]) != MPI_SUCCESS)
                mine = fail(XATTN_STATUS_BACKEND, "posting the ring's send/receive failed");
            nreq = 2;
            ss.bytes_sent = out;
        }
        ss.comm_ms += (MPI_Wtime() - t0) * 1e3;
        HOOK(r, "compute", t);
        if (mine == XATTN_STATUS_OK && r->sq_loc > 0 && r->sk_of[src] > 0 && r->devstage) {
            r->blk = r->kvdev[cur]; /* already on the device: no staging */
            mine = compute_block(r, src, req, nreq, &ss);
        } else if (mine == XATTN_STATUS_OK && r->sq_loc > 0 && r->sk_of[src] > 0) {
            double s0 = MPI_Wtime();
            r->blk = r->kvbuf;
            mine = xattn_buffer_write(r->kvbuf, 0, r->host[cur], block_bytes(r, r->sk_of[src]));
            if (mine != XATTN_STATUS_OK)
                mine = fail_lib(mine, "staging a K/V block");
            ss.stage_ms += (MPI_Wtime() - s0) * 1e3;
            if (mine == XATTN_STATUS_OK)
                mine = compute_block(r, src, req, nreq, &ss);
        }
        if (nreq) {
            double w0 = MPI_Wtime();
            /* req[1] is the receive: cancelled if the wait gives up */
            xattn_status ws = wait_ops(r, nreq, req, 2u, "ring send/receive");
            ss.wait_ms += (MPI_Wtime() - w0) * 1e3;
            if (ws != XATTN_STATUS_OK) {
                st = ws;
                S->steps = t + 1;
                break;
            }
        }
        double a0 = MPI_Wtime();
        char what[32];
        snprintf(what, sizeof what, "ring step %d", t);
        st = stage_agree(r, mine, what);
        ss.agree_ms = (MPI_Wtime() - a0) * 1e3;
        cur ^= 1;
        if (t < XATTN_MPI_MAX_STEPS)
            S->step[t] = ss;
        S->steps = t + 1;
        S->sum.compute_ms += ss.compute_ms;
        S->sum.stage_ms += ss.stage_ms;
        S->sum.comm_ms += ss.comm_ms;
        S->sum.wait_ms += ss.wait_ms;
        S->sum.agree_ms += ss.agree_ms;
        S->sum.bytes_sent += ss.bytes_sent;
        S->sum.calls += ss.calls;
        S->sum.skipped += ss.skipped;
    }
    if (st == XATTN_STATUS_OK) {
        double f0 = MPI_Wtime();
        r->step = r->n;
        st = stage_agree(r, finish(r), "writing O/LSE");
        S->finish_ms = (MPI_Wtime() - f0) * 1e3;
    }
    release(r);
    S->total_ms = (MPI_Wtime() - t_start) * 1e3;
    return st;
}

/* ---- the head-parallel all-to-all ---------------------------------------- */

/* Rows [0, len) of a packed [B, len, H, E] block (E in bytes) copied to rows at
 * the global positions of segments seg of a [B, S, H, E] one, or back (gather). */
static void scatter_rows(unsigned char *full, int64_t S, const unsigned char *part,
                         const xattn_mpi_segment seg[2], int64_t B, size_t rowbytes, int back)
{
    int64_t len = seg[0].length + seg[1].length;
    for (int64_t b = 0; b < B; b++)
        for (int k = 0, at = 0; k < 2; at += (int)seg[k].length, k++) {
            unsigned char *f = full + (size_t)(b * S + seg[k].start) * rowbytes;
            unsigned char *p = (unsigned char *)part + (size_t)(b * len + at) * rowbytes;
            if (back)
                memcpy(p, f, (size_t)seg[k].length * rowbytes);
            else
                memcpy(f, p, (size_t)seg[k].length * rowbytes);
        }
}

/* Heads [h0, h0+nh) of a packed [rows, H, E] array (E elements of es bytes). */
static void take_heads(unsigned char *dst, const unsigned char *src, int64_t rows, int64_t H,
                       int64_t h0, int64_t nh, int64_t E, size_t es, int back)
{
    size_t n = (size_t)(nh * E) * es;
    for (int64_t r = 0; r < rows; r++) {
        unsigned char *a = dst + (size_t)r * n;
        unsigned char *b = (unsigned char *)src + (size_t)((r * H + h0) * E) * es;
        if (back)
            memcpy(b, a, n);
        else
            memcpy(a, b, n);
    }
}

static xattn_status alltoallv(ring *r, const void *sbuf, const int64_t *scount, void *rbuf,
                              const int64_t *rcount, const char *what, double *ms)
{
    /* MPI reads the counts until the operation completes: r owns them */
    free(r->cnt);
    int *sc = r->cnt = calloc((size_t)r->n * 4, sizeof(int));
    if (!sc)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "%s: counts", what);
    int *sd = sc + r->n, *rc = sd + r->n, *rd = rc + r->n;
    int64_t so = 0, ro = 0;
    for (int i = 0; i < r->n; i++) {
        if (scount[i] > INT32_MAX || rcount[i] > INT32_MAX || so > INT32_MAX || ro > INT32_MAX) {
            /* not reached: check_sizes refused such problems on every rank */
            return fail(XATTN_STATUS_SIZE_OVERFLOW,
                        "%s: more than 2^31-1 bytes for one rank; use more ranks", what);
        }
        sc[i] = (int)scount[i];
        sd[i] = (int)so;
        rc[i] = (int)rcount[i];
        rd[i] = (int)ro;
        so += scount[i];
        ro += rcount[i];
    }
    double t0 = MPI_Wtime();
    MPI_Request req;
    xattn_status st = XATTN_STATUS_OK;
    if (MPI_Ialltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, r->comm, &req) !=
        MPI_SUCCESS)
        st = fail(XATTN_STATUS_BACKEND, "%s: MPI_Ialltoallv failed", what);
    else
        st = wait_ops(r, 1, &req, 0, what);
    if (st == XATTN_STATUS_OK)
        r->phase++; /* work follows: a new phase (every rank alike) */
    *ms += (MPI_Wtime() - t0) * 1e3;
    return st;
}

static xattn_status alltoall_body(ring *r, xattn_mpi_stats *S, double t_start, xattn_status st)
{
    int n = r->n;
    int64_t B = r->B, hq = r->Hq / (n ? n : 1), hk = r->Hkv / (n ? n : 1), D = r->D, Dv = r->Dv;
    int64_t Sq = r->o.sq_global, Sk = r->o.sk_global, sq = r->sq_loc;
    size_t qes = r->qes, kes = r->kves;
    xattn_mpi_segment(*qsg)[2] = NULL, (*ksg)[2] = NULL;
    int64_t *sc = NULL, *rc = NULL;
    unsigned char *mine = NULL, *sbuf = NULL, *rbuf = NULL, *full = NULL, *back = NULL;
    xattn_buffer *dev = NULL;
    xattn_status mst = XATTN_STATUS_OK;
    xattn_mpi_step_stats *ss = &S->step[0];
    int64_t sk = 0;
    /* sizes of everything (identical arithmetic on every rank) */
    size_t qrow = (size_t)(hq * D) * qes, krow = (size_t)(hk * D) * kes,
           vrow = (size_t)(hk * Dv) * kes, orow = (size_t)(hq * Dv) * qes;
    size_t fq = (size_t)(B * Sq) * qrow, fk = (size_t)(B * Sk) * krow, fv = (size_t)(B * Sk) * vrow;
    /* the LSE travels back only where the caller asked for it (every rank alike) */
    size_t lrow = r->want_lse ? 4 : 0;
    size_t fo = (size_t)(B * Sq) * orow, fl = (size_t)(B * hq * Sq) * lrow;
    /* a bias: this rank's rows [Bb, Hb, sq, Sk] go out by heads; each rank
     * gets whole sequences [Bb, hb, Sq, Sk] of its heads (of the one head
     * when Hb = 1, which every rank then receives whole) */
    const xattn_tensor *bt = &r->d->bias;
    int has_bias = bt->buffer || bt->shape[0];
    int64_t Bb = has_bias ? bt->shape[0] : 0, Hb = has_bias ? bt->shape[1] : 0;
    int64_t hb = Hb == 1 ? 1 : hq;
    size_t bes = has_bias ? xattn_dtype_size(bt->dtype) : 0, brow = (size_t)Sk * bes;
    size_t fb = (size_t)(Bb * hb * Sq) * brow, mb = (size_t)(Bb * Hb * sq) * brow;
    size_t sb_out = (size_t)(n * Bb * hb * sq) * brow; /* my bias rows, to every rank */
    if (st == XATTN_STATUS_OK) {
        qsg = calloc((size_t)n, sizeof *qsg);
        ksg = calloc((size_t)n, sizeof *ksg);
        sc = calloc((size_t)n * 2, sizeof *sc);
        rc = sc ? sc + n : NULL;
        if (qsg && ksg && sc)
            for (int i = 0; i < n; i++) {
                xattn_mpi_shard(r->o.layout, Sq, n, i, qsg[i]);
                xattn_mpi_shard(r->o.layout, Sk, n, i, ksg[i]);
            }
        sk = ksg ? ksg[r->rank][0].length + ksg[r->rank][1].length : 0;
        size_t mq = (size_t)(B * sq * r->Hq * D) * qes, mk = (size_t)(B * sk * r->Hkv * D) * kes;
        size_t mv = (size_t)(B * sk * r->Hkv * Dv) * kes;
        mine = malloc(mq + mk + mv + mb + 1);
        /* sbuf: my rows for every rank out, then my rows of O/LSE in; rbuf: every
         * rank's rows of my heads in, then O/LSE rows out */
        size_t back_in =
            (size_t)(B * sq) * (size_t)(r->Hq * Dv) * qes + (size_t)(B * r->Hq * sq) * lrow;
        sbuf = r->a2a[0] =
            malloc((mq + mk + mv + sb_out > back_in ? mq + mk + mv + sb_out : back_in) + 1);
        rbuf = r->a2a[1] = malloc((fq + fk + fv + fb > fo + fl ? fq + fk + fv + fb : fo + fl) + 1);
        full = malloc(fq + fk + fv + fo + fl + fb + 1);
        back = malloc(back_in + 1);
        if (!qsg || !ksg || !sc || !mine || !sbuf || !rbuf || !full || !back)
            mst = fail(XATTN_STATUS_OUT_OF_MEMORY, "all-to-all host buffers (%zu bytes)",
                       fq + fk + fv + fo + fl + fb);
        if (mst == XATTN_STATUS_OK) {
            mst = xattn_buffer_alloc(r->ctx, fq + fk + fv + fo + fl + fb, &dev);
            if (mst != XATTN_STATUS_OK)
                mst = fail_lib(mst, "all-to-all device buffer");
        }
        if (mst == XATTN_STATUS_OK)
            mst = tensor_io(&r->d->q, 1, 0, sq, mine, 0, 0, "q");
        if (mst == XATTN_STATUS_OK)
            mst = tensor_io(&r->d->k, 1, 0, sk, mine + mq, 0, 0, "k");
        if (mst == XATTN_STATUS_OK)
            mst = tensor_io(&r->d->v, 1, 0, sk, mine + mq + mk, 0, 0, "v");
        if (mst == XATTN_STATUS_OK && mb) {
            int64_t b0[4] = {0, 0, 0, 0}, bc[4] = {Bb, Hb, sq, Sk};
            mst = xattn_host_box_io(bt, b0, bc, mine + mq + mk + mv, 0, 0, "bias", mpi_err,
                                    sizeof mpi_err);
        }
        if (mst == XATTN_STATUS_OK) { /* to rank j: my rows of its heads, q | k | v | bias */
            unsigned char *p = sbuf;
            for (int j = 0; j < n; j++) {
                take_heads(p, mine, B * sq, r->Hq, j * hq, hq, D, qes, 0);
                p += (size_t)(B * sq) * qrow;
                take_heads(p, mine + mq, B * sk, r->Hkv, j * hk, hk, D, kes, 0);
                p += (size_t)(B * sk) * krow;
                take_heads(p, mine + mq + mk, B * sk, r->Hkv, j * hk, hk, Dv, kes, 0);
                p += (size_t)(B * sk) * vrow;
                for (int64_t b = 0; b < Bb; b++) { /* [Bb, Hb, sq, Sk]: heads of rank j */
                    size_t part = (size_t)(hb * sq) * brow;
                    memcpy(p,
                           mine + mq + mk + mv +
                               (size_t)(b * Hb + (Hb == 1 ? 0 : j * hq)) * (size_t)sq * brow,
                           part);
                    p += part;
                }
                sc[j] = (int64_t)(B * (sq * (int64_t)qrow + sk * (int64_t)(krow + vrow))) +
                        (int64_t)((size_t)(Bb * hb * sq) * brow);
                int64_t iq = qsg[j][0].length + qsg[j][1].length;
                int64_t ik = ksg[j][0].length + ksg[j][1].length;
                rc[j] = (int64_t)(B * (iq * (int64_t)qrow + ik * (int64_t)(krow + vrow))) +
                        (int64_t)((size_t)(Bb * hb * iq) * brow);
                if (j != r->rank)
                    ss->bytes_sent += (uint64_t)sc[j];
            }
        }
        st = stage_agree(r, mst, "allocation");
    }
    S->setup_ms = (MPI_Wtime() - t_start) * 1e3;
    ss->start_ms = S->setup_ms;
    if (st == XATTN_STATUS_OK)
        st = alltoallv(r, sbuf, sc, rbuf, rc, "all-to-all of Q, K, V", &ss->comm_ms);
    if (st == XATTN_STATUS_OK) {
        /* whole sequences of my heads, in global order */
        const unsigned char *p = rbuf;
        for (int i = 0; i < n; i++) {
            int64_t iq = qsg[i][0].length + qsg[i][1].length;
            int64_t ik = ksg[i][0].length + ksg[i][1].length;
            scatter_rows(full, Sq, p, qsg[i], B, qrow, 0);
            p += (size_t)(B * iq) * qrow;
            scatter_rows(full + fq, Sk, p, ksg[i], B, krow, 0);
            p += (size_t)(B * ik) * krow;
            scatter_rows(full + fq + fk, Sk, p, ksg[i], B, vrow, 0);
            p += (size_t)(B * ik) * vrow;
            scatter_rows(full + fq + fk + fv + fo + fl, Sq, p, qsg[i], Bb * hb, brow, 0);
            p += (size_t)(Bb * hb * iq) * brow;
        }
        double t0 = MPI_Wtime();
        mst = xattn_buffer_write(dev, 0, full, fq + fk + fv);
        if (mst == XATTN_STATUS_OK && fb)
            mst =
                xattn_buffer_write(dev, fq + fk + fv + fo + fl, full + fq + fk + fv + fo + fl, fb);
        if (mst != XATTN_STATUS_OK)
            mst = fail_lib(mst, "staging the gathered Q, K, V");
        double t1 = MPI_Wtime();
        xattn_attn_desc c = *r->d; /* the whole sequences: the caller's semantics unchanged */
        if (c.alibi_slopes)        /* this rank's query heads */
            c.alibi_slopes += r->rank * hq;
        if (c.sinks.buffer) { /* [1, 1, Hq, 1]: this rank's heads */
            c.sinks.offset += (size_t)(r->rank * hq * c.sinks.strides[2]) * sizeof(float);
            c.sinks.shape[2] = hq;
        }
        if (has_bias) {
            c.bias = xattn_tensor_bshd(dev, fq + fk + fv + fo + fl, bt->dtype, 1, 1, 1, 1);
            int64_t shp[4] = {Bb, hb, Sq, Sk}, str[4] = {hb * Sq * Sk, Sq * Sk, Sk, 1};
            memcpy(c.bias.shape, shp, sizeof shp);
            memcpy(c.bias.strides, str, sizeof str);
        }
        c.q = xattn_tensor_bshd(dev, 0, r->qdt, B, Sq, hq, D);
        c.k = xattn_tensor_bshd(dev, fq, r->kvdt, B, Sk, hk, D);
        c.v = xattn_tensor_bshd(dev, fq + fk, r->kvdt, B, Sk, hk, Dv);
        c.o = xattn_tensor_bshd(dev, fq + fk + fv, r->qdt, B, Sq, hq, Dv);
        if (r->want_lse)
            c.lse = xattn_tensor_bshd(dev, fq + fk + fv + fo, XATTN_DTYPE_F32, B, hq, Sq, 1);
        else
            memset(&c.lse, 0, sizeof c.lse);
        HOOK(r, "compute", 0);
        xattn_run_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (mst == XATTN_STATUS_OK) {
            mst = xattn_attention(r->ctx, &c, &info);
            if (mst != XATTN_STATUS_OK)
                mst = fail_lib(mst, "xattn_attention on this rank's heads");
            else
                ss->calls = 1;
        }
        double t2 = MPI_Wtime();
        if (mst == XATTN_STATUS_OK) {
            mst = xattn_buffer_read(dev, fq + fk + fv, full + fq + fk + fv, fo + fl);
            if (mst != XATTN_STATUS_OK)
                mst = fail_lib(mst, "reading O and LSE back");
        }
        ss->compute_ms += (t2 - t1) * 1e3;
        ss->stage_ms += (t1 - t0 + MPI_Wtime() - t2) * 1e3;
        st = stage_agree(r, mst, "the attention on each rank's heads");
    }
    if (st == XATTN_STATUS_OK) { /* to rank i: its rows of my heads, O | LSE */
        unsigned char *p = rbuf, *O = full + fq + fk + fv, *L = O + fo;
        for (int i = 0; i < n; i++) {
            int64_t iq = qsg[i][0].length + qsg[i][1].length;
            scatter_rows(O, Sq, p, qsg[i], B, orow, 1);
            p += (size_t)(B * iq) * orow;
            /* LSE [B, hq, Sq]: rows are single floats per (b, h) */
            if (lrow)
                scatter_rows(L, Sq, p, qsg[i], B * hq, 4, 1);
            p += (size_t)(B * hq * iq) * lrow;
            sc[i] = (int64_t)(B * iq) * (int64_t)orow + B * hq * iq * (int64_t)lrow;
            rc[i] = (int64_t)(B * sq) * (int64_t)orow + B * hq * sq * (int64_t)lrow;
            if (i != r->rank)
                ss->bytes_sent += (uint64_t)sc[i];
        }
        st = alltoallv(r, rbuf, sc, sbuf, rc, "all-to-all of O and LSE", &ss->comm_ms);
    }
    if (st == XATTN_STATUS_OK) {
        /* from rank j: my rows of its heads -> O [B, sq, Hq, Dv], LSE [B, Hq, sq] */
        double f0 = MPI_Wtime();
        unsigned char *p = sbuf, *O = back,
                      *L = back + (size_t)(B * sq) * (size_t)(r->Hq * Dv) * qes;
        for (int j = 0; j < n; j++) {
            take_heads(p, O, B * sq, r->Hq, j * hq, hq, Dv, qes, 1);
            p += (size_t)(B * sq) * orow;
            for (int64_t b = 0; b < B && lrow; b++)
                memcpy(L + (size_t)((b * r->Hq + j * hq) * sq) * 4, p + (size_t)(b * hq * sq) * 4,
                       (size_t)(hq * sq) * 4);
            p += (size_t)(B * hq * sq) * lrow;
        }
        mst = sq ? tensor_io(&r->d->o, 1, 0, sq, O, 0, 1, "o") : XATTN_STATUS_OK;
        if (mst == XATTN_STATUS_OK && sq && lrow)
            mst = tensor_io(&r->d->lse, 2, 0, sq, L, 1, 1, "lse");
        st = stage_agree(r, mst, "writing O/LSE");
        S->finish_ms = (MPI_Wtime() - f0) * 1e3;
    }
    S->steps = 1;
    S->sum = *ss;
    snprintf(S->staging, sizeof S->staging, "the all-to-all stages through host memory");
    S->flops_useful = r->rank == 0 && r->Lq ? pair_flops(r) : 0;
    xattn_buffer_free(dev);
    free(qsg);
    free(ksg);
    free(sc);
    free(mine);
    free(full);
    free(back);
    release(r); /* sbuf, rbuf and the counts: freed, or kept while MPI may use them */
    S->total_ms = (MPI_Wtime() - t_start) * 1e3;
    return st;
}

/* Both strategies: the shared prelude, then the strategy's own body. */
static xattn_status run_strategy(MPI_Comm comm, xattn_ctx *ctx, const xattn_attn_desc *d,
                                 const xattn_mpi_ring_opts *opts, xattn_mpi_stats *stats,
                                 int alltoall)
{
    double t_start = MPI_Wtime();
    xattn_mpi_stats local;
    memset(&local, 0, sizeof local);
    xattn_mpi_stats *S = stats ? stats : &local;
    limbo_sweep(); /* what earlier timed-out calls left, where it completed since */
    /* on the heap: a timed-out call leaves MPI operations that write into it */
    ring *r = calloc(1, sizeof *r);
    if (!r) {
        memset(S, 0, sizeof *S);
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "the call's state");
    }
    int dup_ok, dup_left;
    xattn_status st = prelude(r, comm, ctx, d, opts, S, alltoall, &dup_ok, &dup_left);
    if (!dup_ok) {
        ring_free(r);
        if (dup_left) { /* the duplication is pending: it writes r->comm */
            void *keep[] = {r->beats, r};
            limbo_add(r->pend, r->npend, keep, 2, NULL, NULL);
        } else {
            free(r);
        }
        return st;
    }
    return alltoall ? alltoall_body(r, S, t_start, st) : ring_body(r, S, t_start, st);
}

xattn_status xattn_mpi_ring_attention(MPI_Comm comm, xattn_ctx *ctx, const xattn_attn_desc *d,
                                      const xattn_mpi_ring_opts *opts, xattn_mpi_stats *stats)
{
    return run_strategy(comm, ctx, d, opts, stats, 0);
}

xattn_status xattn_mpi_alltoall_attention(MPI_Comm comm, xattn_ctx *ctx, const xattn_attn_desc *d,
                                          const xattn_mpi_ring_opts *opts, xattn_mpi_stats *stats)
{
    return run_strategy(comm, ctx, d, opts, stats, 1);
}

xattn_status xattn_mpi_stats_gather(MPI_Comm comm, const xattn_mpi_stats *mine,
                                    xattn_mpi_stats *all, double timeout_ms)
{
    int rank, n;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &n) != MPI_SUCCESS)
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "comm: not a valid communicator");
    if (!mine || (rank == 0 && !all))
        return fail(XATTN_STATUS_INVALID_ARGUMENT, "%s: NULL", !mine ? "mine" : "all (rank 0)");
    limbo_sweep();
    /* library memory on both sides: a timed-out gather may complete later */
    size_t one = sizeof *mine;
    unsigned char *buf = malloc(one * (size_t)(rank == 0 ? n + 1 : 1));
    if (!buf)
        return fail(XATTN_STATUS_OUT_OF_MEMORY, "stats gather buffers");
    memcpy(buf, mine, one);
    MPI_Request req;
    if (MPI_Igather(buf, (int)one, MPI_BYTE, rank == 0 ? buf + one : NULL, (int)one, MPI_BYTE, 0,
                    comm, &req) != MPI_SUCCESS) {
        free(buf);
        return fail(XATTN_STATUS_BACKEND, "MPI_Igather failed");
    }
    int left = 0;
    xattn_status st = wait_plain(&req, timeout_ms > 0 ? timeout_ms : 60000, "stats gather", &left);
    if (st == XATTN_STATUS_OK && rank == 0)
        memcpy(all, buf + one, one * (size_t)n);
    if (left) {
        void *keep[] = {buf};
        limbo_add(&req, 1, keep, 1, NULL, NULL);
    } else {
        free(buf);
    }
    return st;
}
