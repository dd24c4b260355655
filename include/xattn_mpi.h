/*
 * xattn_mpi — ring attention across MPI ranks (context parallelism).
 *
 * An optional component, library `xattn_mpi`, built when CMake finds an MPI
 * (option XATTN_WITH_MPI). It calls only the public API of xattn.h: every
 * rank holds a shard of Q and of K/V along the sequence; the K/V blocks travel
 * around the ring of ranks with non-blocking sends and receives while each
 * rank runs xattn_attention on the block in hand, and each rank merges its
 * partial (O, LSE) pairs exactly (log-sum-exp), as the SPLITKV combine does.
 * The second strategy, xattn_mpi_alltoall_attention, splits heads instead
 * (an all-to-all in and out). docs/scale.md describes the sharding, the mask mapping, the failure
 * rules and the cost model.
 */
#ifndef XATTN_MPI_H
#define XATTN_MPI_H

#include <mpi.h>

#include "xattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a sequence of `len` positions is split over `n` ranks. Both layouts cut
 * it into equal chunks (lengths differ by at most one; chunk c covers
 * [c*len/k, (c+1)*len/k) with k chunks). */
typedef enum xattn_mpi_layout {
    /* k = n chunks; rank r holds chunk r. */
    XATTN_MPI_CONTIGUOUS = 0,
    /* k = 2n chunks; rank r holds chunks r and 2n-1-r, in that order, so that
     * under a causal mask every rank has the same work (Megatron's context
     * parallel layout). */
    XATTN_MPI_ZIGZAG = 1
} xattn_mpi_layout;

/** One run of consecutive global positions held by a rank. */
typedef struct xattn_mpi_segment {
    int64_t start;  /* first global position */
    int64_t length; /* positions (may be 0) */
} xattn_mpi_segment;

/**
 * The positions rank `rank` of `nranks` holds of a sequence of `len`
 * positions: fills seg[0] and seg[1] (seg[1].length = 0 for the contiguous
 * layout) and returns the total number of positions, or -1 for an invalid
 * argument. A rank's local tensors hold seg[0]'s positions then seg[1]'s.
 */
XATTN_API int64_t xattn_mpi_shard(xattn_mpi_layout layout, int64_t len, int nranks, int rank,
                                  xattn_mpi_segment seg[2]);

/** Options of a ring call. Initialize with xattn_mpi_ring_opts_init. */
typedef struct xattn_mpi_ring_opts {
    size_t struct_size;
    xattn_mpi_layout layout; /* default XATTN_MPI_ZIGZAG */
    int64_t sq_global;       /* the whole (padded) query length; required */
    int64_t sk_global;       /* the whole (padded) key length; required */
    /* How long a wait may see no progress, ms; 0 = 60000. It measures lost
     * progress, not slow work: after the first agreement a rank counts as
     * working until it says it waits, and the clock runs only while every
     * other rank has said so (a long block call, a slow staging or an
     * unbalanced batch on another rank never trips it). At the call's start
     * entry_timeout_ms applies instead (below). When it passes, the call
     * returns XATTN_STATUS_BACKEND and tells the other ranks, which then
     * return XATTN_STATUS_BACKEND too ("rank R gave up"); see
     * xattn_mpi_pending for the state it leaves. */
    double timeout_ms;
    /* Appended (read where struct_size covers it): the bound at the call's
     * start, ms, while nothing is known of the other ranks (duplicating the
     * communicator, the first agreement): how much later than this rank the
     * others may enter the call. 0 = timeout_ms. After a timeout there, the
     * duplication stays pending; Open MPI (4.1) may then never complete a
     * later duplication of the same communicator on some ranks: give up the
     * communicator (docs/scale.md, "Failures"). */
    double entry_timeout_ms;
} xattn_mpi_ring_opts;

XATTN_API void xattn_mpi_ring_opts_init(xattn_mpi_ring_opts *o);

#define XATTN_MPI_MAX_STEPS 64

/** What one ring step cost this rank (milliseconds, MPI_Wtime). */
typedef struct xattn_mpi_step_stats {
    double compute_ms; /* xattn_attention calls and the merge of their partials */
    double stage_ms;   /* host staging: the block into device buffers, partials out */
    double comm_ms;    /* posting and polling the ring's sends and receives */
    double wait_ms;    /* blocked after the compute, waiting for the next block */
    double agree_ms;   /* the per-step status agreement (a collective) */
    uint64_t bytes_sent;
    int calls;       /* xattn_attention calls made */
    int skipped;     /* (query segment, key segment) pairs no mask lets through */
    double start_ms; /* when the step began, from the start of the call */
} xattn_mpi_step_stats;

/** One rank's record of a ring call. Grow-only. */
typedef struct xattn_mpi_stats {
    size_t struct_size;
    int rank, nranks, steps;
    double total_ms;          /* the whole call on this rank */
    double setup_ms;          /* validation, agreement, allocation, local K/V read */
    double finish_ms;         /* writing O (and LSE) into the caller's tensors */
    xattn_mpi_step_stats sum; /* all steps added up */
    xattn_mpi_step_stats step[XATTN_MPI_MAX_STEPS]; /* the first XATTN_MPI_MAX_STEPS steps */
    double flops_useful; /* 2*(D+Dv) per visible (query, key) pair, all heads */
    /* Appended: how the ring's K/V blocks travelled on this rank. 1: the
     * backend's device buffers went to MPI directly (CUDA-aware MPI); 0:
     * through host memory, `staging` saying why (e.g. "not a CUDA context";
     * the environment variable XATTN_MPI_STAGING=host forces it). */
    int staging_device;
    char staging[96];
} xattn_mpi_stats;

/**
 * Ring attention over the ranks of `comm` (collective: every rank calls it).
 *
 * `d` describes this rank's shards, in the order xattn_mpi_shard gives:
 *   q [B, sq_local, Hq, D], o [B, sq_local, Hq, Dv], lse (optional) [B, Hq, sq_local, 1],
 *   k [B, sk_local, Hkv, D], v [B, sk_local, Hkv, Dv],
 * in buffers of `ctx` (any backend; K/V blocks travel through host memory, or
 * as the CUDA buffers themselves with a CUDA-aware MPI: stats->staging_device).
 * A rank whose shard is empty gives shape[1] = 0 (its buffer may then be NULL)
 * but the other extents, dtypes and options like every rank. seqlens_q and
 * seqlens_k, when given, are the GLOBAL lengths [B] (every rank the same);
 * causal, align, window_left/right, scale and softcap mean what they mean for
 * one device over the whole sequence. A bias, when given, holds this rank's
 * query rows (shard order) against every global key: [Bb, Hb, >= sq_local,
 * >= sk_global]. Packed batches: cu_seqlens_q/k are the GLOBAL offsets into
 * one token stream of sq_global / sk_global tokens (tensors of batch 1), and
 * the stream is sharded like a sequence. ALiBi slopes: [Hq], every rank
 * the same (docs/scale.md, "ALiBi across blocks"). Not supported
 * (XATTN_STATUS_UNSUPPORTED): a bias with a packed batch, and ALiBi with a
 * bias in the ring.
 *
 * Every rank returns the same status: a failure on one rank (a bad descriptor,
 * an allocation or device error) makes every rank return the status of the
 * lowest-numbered rank that failed, with its message there and elsewhere a
 * message naming that rank (and a rank's own different failure, if any).
 * Ranks that describe different problems all return
 * XATTN_STATUS_INVALID_ARGUMENT naming the field, the rank that differs and
 * both values. Message sizes are checked before anything is staged
 * (XATTN_STATUS_SIZE_OVERFLOW past 2^31-1 bytes per MPI message). A wait
 * without progress for opts->timeout_ms returns XATTN_STATUS_BACKEND
 * instead of hanging (the one case where ranks may return different
 * statuses: xattn_mpi_pending).
 * `stats` may be NULL. Messages: xattn_mpi_last_error().
 */
XATTN_API xattn_status xattn_mpi_ring_attention(MPI_Comm comm, xattn_ctx *ctx,
                                                const xattn_attn_desc *d,
                                                const xattn_mpi_ring_opts *opts,
                                                xattn_mpi_stats *stats);

/**
 * The head-parallel all-to-all (DeepSpeed-Ulysses' layout change), the second
 * strategy: same arguments, shards and failure rules as the ring. One
 * MPI_Ialltoallv gives each rank the whole sequences of Q, K and V for its
 * Hq/n query heads and Hkv/n KV heads, one xattn_attention call computes them
 * with the caller's semantics unchanged, and a second all-to-all returns each
 * rank its rows of O (and LSE). Needs Hq and Hkv to be multiples of the number
 * of ranks (else XATTN_STATUS_UNSUPPORTED on every rank), and memory on each
 * device for the whole sequence of its heads. The LSE travels back only when
 * the ranks give an lse tensor (all of them, or none). A bias (the ring's layout)
 * travels with Q, K and V, by heads; every rank gives its shape and dtype
 * (no buffer where it holds no query rows). The stats hold one step.
 */
XATTN_API xattn_status xattn_mpi_alltoall_attention(MPI_Comm comm, xattn_ctx *ctx,
                                                    const xattn_attn_desc *d,
                                                    const xattn_mpi_ring_opts *opts,
                                                    xattn_mpi_stats *stats);

/**
 * Gathers every rank's stats to rank 0 of `comm` (collective): on rank 0,
 * `all` must hold one entry per rank; elsewhere it may be NULL.
 */
XATTN_API xattn_status xattn_mpi_stats_gather(MPI_Comm comm, const xattn_mpi_stats *mine,
                                              xattn_mpi_stats *all, double timeout_ms);

/**
 * After a timeout: the number of timed-out calls of this process whose MPI
 * operations (on their private duplicate communicators) have not all
 * completed yet; -1 after MPI_Finalize. The library owns the memory
 * those operations use (host blocks, agreement arrays, counts; on the
 * CUDA-aware path the two device blocks, so destroy that context only when
 * this returns 0 or after MPI_Finalize) and frees it as they complete; each
 * xattn_mpi call and this function test them. A timed-out call leaves the
 * caller's communicator untouched (but for a timeout while duplicating it:
 * entry_timeout_ms): the application may go on using it and
 * MPI, call xattn_mpi again (a new call uses a new duplicate) or MPI_Abort.
 * Operations a vanished rank never completes stay pending until the process
 * ends (the private duplicate is never freed).
 */
XATTN_API int xattn_mpi_pending(void);

/** Message of the last failing xattn_mpi call on this thread ("" after a success). */
XATTN_API const char *xattn_mpi_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* XATTN_MPI_H */
