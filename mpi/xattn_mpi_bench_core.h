/*
 * The measurement and report of ring attention and the all-to-all under MPI,
 * shared by the developer program xattn_mpi_bench and `xattn bench --mpi`
 * (internal: not installed, not library API). Every rank calls
 * xattn_mpi_bench_measure; rank 0 then holds every rank's stats and prints
 * or writes them.
 */
#ifndef XATTN_MPI_BENCH_CORE_H
#define XATTN_MPI_BENCH_CORE_H

#include <stdio.h>

#include "xattn_mpi.h"

enum { XATTN_MPI_BENCH_RING = 1, XATTN_MPI_BENCH_ALLTOALL = 2 }; /* strategy bits */

/* One problem, the same on every rank (BSHD; random data per rank). */
typedef struct xattn_mpi_bench_args {
    int64_t batch, sq, sk, heads, kv_heads, head_dim, head_dim_v;
    int causal;
    xattn_align align;
    int64_t window_left, window_right; /* -1 = unbounded */
    float softcap, scale;              /* 0 = none / 1/sqrt(D) */
    xattn_mpi_layout layout;
    int iters;      /* timed calls after one warm-up; the fastest job is kept */
    int strategies; /* XATTN_MPI_BENCH_RING | XATTN_MPI_BENCH_ALLTOALL */
    int single;     /* also rank 0 alone with the whole problem, for the ratio */
    uint32_t seed;
    xattn_dtype dtype;    /* q and o; 0 = f32 */
    xattn_dtype kv_dtype; /* k and v */
} xattn_mpi_bench_args;

/* One strategy's figures (rank 0 holds them all; other ranks only `state`). */
typedef struct xattn_mpi_bench_strategy {
    int state;      /* 0 not asked, 1 measured, 2 refused by the library (note says why) */
    char note[256]; /* state 2: the library's message */
    int nranks;
    xattn_mpi_stats *all; /* rank 0: one per rank, the iteration with the fastest job */
    double job_ms;        /* that iteration's slowest rank */
    double compute_ms, comm_ms, wait_ms, stage_ms; /* summed over ranks */
    uint64_t bytes_sent;                           /* summed over ranks */
    double compute_min_ms, compute_max_ms;         /* per rank: the balance */
    double gflops_useful;                          /* over the job's time */
    double model_bytes_per_rank;                   /* docs/scale.md's model */
} xattn_mpi_bench_strategy;

typedef struct xattn_mpi_bench_result {
    xattn_mpi_bench_strategy strat[2]; /* [0] ring, [1] all-to-all */
    double single_ms;                  /* rank 0 alone; -1 not measured */
    char single_note[256];             /* why not, when it was asked for */
} xattn_mpi_bench_result;

extern const char *const xattn_mpi_bench_strategy_names[2]; /* "ring", "alltoall" */

/* Collective: runs args on every rank of comm with ctx (the rank's own
 * context). Returns XATTN_STATUS_OK (res filled; free with
 * xattn_mpi_bench_result_free), or the failing status with err set on every
 * rank (a strategy the library refuses at this shape is not a failure: its
 * state is 2). */
xattn_status xattn_mpi_bench_measure(MPI_Comm comm, xattn_ctx *ctx, const xattn_mpi_bench_args *a,
                                     xattn_mpi_bench_result *res, char *err, size_t errlen);
void xattn_mpi_bench_result_free(xattn_mpi_bench_result *res);

/* Rank 0: one strategy's per-rank, per-step table and its job and balance
 * lines, under a header naming the problem (`what`: backend and threads). */
void xattn_mpi_bench_print(FILE *f, const xattn_mpi_bench_args *a, const char *what,
                           const xattn_mpi_bench_result *res);

/* Rank 0: Chrome / Perfetto trace events of every measured strategy, one
 * process per rank (pid = rank). *base_us: where the events start on the
 * trace's timeline (advanced past them); *first: no comma before the first
 * event (cleared). `label` prefixes the event names (a case's key, or NULL). */
void xattn_mpi_bench_trace(FILE *f, const xattn_mpi_bench_result *res, const char *label,
                           double *base_us, int *first);

/* Waits on a barrier without spinning a core away from a rank that works. */
void xattn_mpi_quiet_barrier(MPI_Comm comm);

#endif
