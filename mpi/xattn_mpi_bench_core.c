/*
 * The measurement and report shared by xattn_mpi_bench and `xattn bench
 * --mpi` (xattn_mpi_bench_core.h).
 */
#include "xattn_mpi_bench_core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const xattn_mpi_bench_strategy_names[2] = {"ring", "alltoall"};

/* n random values in [-1, 1) of dtype dt, rounded from f32: f16 / bf16 / fp8
 * per value, q8_0 in ggml's blocks of 32 (xattn_dtype_bytes sizes them all;
 * xattn_dtype_size is 0 for q8_0). Values that q8_0 cannot hold (n not whole
 * blocks) stay zero bytes: the library names that shape when it is run. */
static xattn_buffer *rand_buffer(xattn_ctx *ctx, size_t n, uint32_t seed, xattn_dtype dt)
{
    if (n == 0)
        return NULL;
    size_t es = xattn_dtype_size(dt), bytes = (size_t)xattn_dtype_bytes(dt, n);
    float *x = malloc(n * sizeof *x);
    unsigned char *a = calloc(bytes ? bytes : 1, 1);
    xattn_buffer *b = NULL;
    if (!x || !a || !bytes) {
        free(x);
        free(a);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    if (dt == XATTN_DTYPE_Q8_0) {
        if (n % XATTN_Q8_0_BLOCK == 0)
            xattn_quantize_q8_0(x, a, (int64_t)n);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (es == 4) {
                memcpy(a + i * 4, &x[i], 4);
            } else if (es == 2) {
                uint16_t h =
                    dt == XATTN_DTYPE_F16 ? xattn_f32_to_f16(x[i]) : xattn_f32_to_bf16(x[i]);
                memcpy(a + i * 2, &h, 2);
            } else {
                a[i] = xattn_f32_to_fp8(x[i], dt);
            }
        }
    }
    if (xattn_buffer_alloc(ctx, bytes, &b) == XATTN_STATUS_OK)
        xattn_buffer_write(b, 0, a, bytes);
    free(x);
    free(a);
    return b;
}

/* Random Q, K, V and an O of the given lengths, f32, BSHD, in buf[4]; the
 * mask options from a. A length of 0 leaves its buffers NULL (an empty shard). */
static void make_problem(xattn_ctx *ctx, const xattn_mpi_bench_args *a, int64_t sq, int64_t sk,
                         uint32_t seed, xattn_attn_desc *d, xattn_buffer *buf[4])
{
    int64_t B = a->batch, H = a->heads, Hkv = a->kv_heads, D = a->head_dim, Dv = a->head_dim_v;
    buf[0] = rand_buffer(ctx, (size_t)(B * sq * H * D), seed, a->dtype);
    buf[1] = rand_buffer(ctx, (size_t)(B * sk * Hkv * D), seed + 6u, a->kv_dtype);
    buf[2] = rand_buffer(ctx, (size_t)(B * sk * Hkv * Dv), seed + 12u, a->kv_dtype);
    buf[3] = NULL;
    if (sq > 0)
        xattn_buffer_alloc(ctx, (size_t)xattn_dtype_bytes(a->dtype, (uint64_t)(B * sq * H * Dv)),
                           &buf[3]);
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(buf[0], 0, a->dtype, B, sq, H, D);
    d->k = xattn_tensor_bshd(buf[1], 0, a->kv_dtype, B, sk, Hkv, D);
    d->v = xattn_tensor_bshd(buf[2], 0, a->kv_dtype, B, sk, Hkv, Dv);
    d->o = xattn_tensor_bshd(buf[3], 0, a->dtype, B, sq, H, Dv);
    d->causal = a->causal;
    d->align = a->align;
    d->window_left = a->window_left;
    d->window_right = a->window_right;
    d->softcap = a->softcap;
    d->scale = a->scale;
}

static void free_problem(xattn_buffer *buf[4])
{
    for (int i = 0; i < 4; i++)
        xattn_buffer_free(buf[i]);
}

void xattn_mpi_quiet_barrier(MPI_Comm comm)
{
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(comm, &r);
    while (!done) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Rank 0: the sums, the balance and the model of a strategy's gathered stats. */
static void summarize(const xattn_mpi_bench_args *a, int strat, xattn_mpi_bench_strategy *s)
{
    int n = s->nranks;
    s->compute_min_ms = 1e300;
    for (int r = 0; r < n; r++) {
        const xattn_mpi_stats *st = &s->all[r];
        s->compute_ms += st->sum.compute_ms;
        s->comm_ms += st->sum.comm_ms;
        s->wait_ms += st->sum.wait_ms;
        s->stage_ms += st->sum.stage_ms;
        s->bytes_sent += st->sum.bytes_sent;
        if (st->sum.compute_ms < s->compute_min_ms)
            s->compute_min_ms = st->sum.compute_ms;
        if (st->sum.compute_ms > s->compute_max_ms)
            s->compute_max_ms = st->sum.compute_ms;
    }
    s->gflops_useful = s->job_ms > 0 ? s->all[0].flops_useful / (s->job_ms * 1e6) : 0;
    /* the model's bytes per rank (docs/scale.md): the ring moves n-1 blocks of K/V, the
     * all-to-all (n-1)/n of this rank's Q, K, V in and O out */
    double B = (double)a->batch;
    /* bytes of one head's row of K plus V (and of Q plus O): q8_0 has no bytes per value */
    double qrow = (double)(xattn_dtype_bytes(a->dtype, (uint64_t)a->head_dim) +
                           xattn_dtype_bytes(a->dtype, (uint64_t)a->head_dim_v)),
           kvrow = (double)(xattn_dtype_bytes(a->kv_dtype, (uint64_t)a->head_dim) +
                            xattn_dtype_bytes(a->kv_dtype, (uint64_t)a->head_dim_v));
    if (strat == 0)
        s->model_bytes_per_rank =
            (double)(n - 1) * B * (double)a->sk / n * (double)a->kv_heads * kvrow;
    else
        s->model_bytes_per_rank =
            (double)(n - 1) / n * B / n *
            ((double)a->sq * (double)a->heads * qrow + (double)a->sk * (double)a->kv_heads * kvrow);
}

/* One strategy: a warm-up, a->iters timed calls, the fastest job's stats
 * gathered to rank 0. */
static xattn_status measure_one(MPI_Comm comm, xattn_ctx *ctx, const xattn_mpi_bench_args *a,
                                int strat, const xattn_attn_desc *d, const xattn_mpi_ring_opts *o,
                                xattn_mpi_bench_strategy *s, char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &s->nranks);
    xattn_mpi_stats best;
    memset(&best, 0, sizeof best);
    double best_job = -1;
    for (int it = 0; it <= a->iters; it++) { /* iteration 0 warms up */
        xattn_mpi_stats st;
        xattn_mpi_quiet_barrier(comm);
        xattn_status rc = strat ? xattn_mpi_alltoall_attention(comm, ctx, d, o, &st)
                                : xattn_mpi_ring_attention(comm, ctx, d, o, &st);
        if (rc == XATTN_STATUS_UNSUPPORTED) { /* every rank returns the same status */
            s->state = 2;
            snprintf(s->note, sizeof s->note, "%s", xattn_mpi_last_error());
            return XATTN_STATUS_OK;
        }
        if (rc != XATTN_STATUS_OK) {
            snprintf(err, errlen, "%s failed on rank %d: %s: %s",
                     xattn_mpi_bench_strategy_names[strat], rank, xattn_status_name(rc),
                     xattn_mpi_last_error());
            return rc;
        }
        /* keep the fastest job (the slowest rank decides), the same iteration everywhere */
        double job;
        MPI_Allreduce(&st.total_ms, &job, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (it >= 1 && (best_job < 0 || job < best_job)) {
            best = st;
            best_job = job;
        }
    }
    if (rank == 0) {
        s->all = calloc((size_t)s->nranks, sizeof *s->all);
        if (!s->all) {
            snprintf(err, errlen, "out of memory");
            return XATTN_STATUS_OUT_OF_MEMORY;
        }
    }
    xattn_status rc = xattn_mpi_stats_gather(comm, &best, s->all, 60000);
    if (rc != XATTN_STATUS_OK) {
        snprintf(err, errlen, "gathering the stats failed: %s", xattn_mpi_last_error());
        return rc;
    }
    s->state = 1;
    s->job_ms = best_job;
    if (rank == 0)
        summarize(a, strat, s);
    return XATTN_STATUS_OK;
}

xattn_status xattn_mpi_bench_measure(MPI_Comm comm, xattn_ctx *ctx, const xattn_mpi_bench_args *a,
                                     xattn_mpi_bench_result *res, char *err, size_t errlen)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    memset(res, 0, sizeof *res);
    res->single_ms = -1;
    xattn_mpi_segment qs[2], ks[2];
    int64_t sql = xattn_mpi_shard(a->layout, a->sq, n, rank, qs);
    int64_t skl = xattn_mpi_shard(a->layout, a->sk, n, rank, ks);
    xattn_buffer *bufs[4];
    xattn_attn_desc d;
    make_problem(ctx, a, sql, skl, a->seed + 1u + (uint32_t)rank, &d, bufs);
    xattn_mpi_ring_opts o;
    xattn_mpi_ring_opts_init(&o);
    o.layout = a->layout;
    o.sq_global = a->sq;
    o.sk_global = a->sk;
    o.timeout_ms = 600000;
    xattn_status rc = XATTN_STATUS_OK;
    for (int strat = 0; strat < 2 && rc == XATTN_STATUS_OK; strat++)
        if (a->strategies & (1 << strat))
            rc = measure_one(comm, ctx, a, strat, &d, &o, &res->strat[strat], err, errlen);
    free_problem(bufs);
    if (rc == XATTN_STATUS_OK && a->single) {
        xattn_mpi_quiet_barrier(comm);
        if (rank == 0) {
            xattn_buffer *b1[4];
            xattn_attn_desc s1;
            make_problem(ctx, a, a->sq, a->sk, a->seed + 3u, &s1, b1);
            for (int it = 0; it <= a->iters; it++) {
                double t0 = MPI_Wtime();
                xattn_status st = xattn_attention(ctx, &s1, NULL);
                if (st != XATTN_STATUS_OK) /* before the sync, whose success clears the message */
                    snprintf(res->single_note, sizeof res->single_note, "%s: %s",
                             xattn_status_name(st), xattn_last_error());
                xattn_ctx_sync(ctx);
                double ms = (MPI_Wtime() - t0) * 1e3;
                if (st != XATTN_STATUS_OK) { /* said, not fatal: the ranks' figures stand */
                    res->single_ms = -1;
                    break;
                }
                if (it >= 1 && (res->single_ms < 0 || ms < res->single_ms))
                    res->single_ms = ms;
            }
            free_problem(b1);
        }
        xattn_mpi_quiet_barrier(comm);
    }
    if (rc != XATTN_STATUS_OK)
        xattn_mpi_bench_result_free(res);
    return rc;
}

void xattn_mpi_bench_result_free(xattn_mpi_bench_result *res)
{
    for (int i = 0; i < 2; i++) {
        free(res->strat[i].all);
        res->strat[i].all = NULL;
    }
}

static const char *const long_names[2] = {"ring attention", "all-to-all"};

void xattn_mpi_bench_print(FILE *f, const xattn_mpi_bench_args *a, const char *what,
                           const xattn_mpi_bench_result *res)
{
    for (int strat = 0; strat < 2; strat++) {
        const xattn_mpi_bench_strategy *s = &res->strat[strat];
        if (s->state == 2)
            fprintf(f, "%s: not run at this shape: %s\n", long_names[strat], s->note);
        if (s->state != 1)
            continue;
        int n = s->nranks;
        fprintf(f,
                "%s: %d ranks, %s layout, %s, B %lld, Sq %lld, Sk %lld, Hq %lld, Hkv %lld, "
                "D %lld, Dv %lld, %s%s%s, %s; best of %d\n",
                long_names[strat], n, a->layout == XATTN_MPI_ZIGZAG ? "zigzag" : "contiguous",
                a->causal ? "causal" : "full", (long long)a->batch, (long long)a->sq,
                (long long)a->sk, (long long)a->heads, (long long)a->kv_heads,
                (long long)a->head_dim, (long long)a->head_dim_v, xattn_dtype_name(a->dtype),
                a->kv_dtype != a->dtype ? ", k/v " : "",
                a->kv_dtype != a->dtype ? xattn_dtype_name(a->kv_dtype) : "", what, a->iters);
        fprintf(f, "%4s %4s %10s %10s %10s %10s %10s %12s %5s %5s\n", "rank", "step", "compute_ms",
                "stage_ms", "comm_ms", "wait_ms", "agree_ms", "bytes_sent", "calls", "skip");
        for (int r = 0; r < n; r++) {
            const xattn_mpi_stats *st = &s->all[r];
            for (int t = 0; t < st->steps && t < XATTN_MPI_MAX_STEPS; t++) {
                const xattn_mpi_step_stats *p = &st->step[t];
                fprintf(f, "%4d %4d %10.2f %10.2f %10.2f %10.2f %10.2f %12llu %5d %5d\n", r, t,
                        p->compute_ms, p->stage_ms, p->comm_ms, p->wait_ms, p->agree_ms,
                        (unsigned long long)p->bytes_sent, p->calls, p->skipped);
            }
            fprintf(f,
                    "%4d  all %10.2f %10.2f %10.2f %10.2f %10.2f %12llu %5d %5d  total %.2f ms "
                    "(setup %.2f, finish %.2f)\n",
                    r, st->sum.compute_ms, st->sum.stage_ms, st->sum.comm_ms, st->sum.wait_ms,
                    st->sum.agree_ms, (unsigned long long)st->sum.bytes_sent, st->sum.calls,
                    st->sum.skipped, st->total_ms, st->setup_ms, st->finish_ms);
        }
        fprintf(f,
                "job: %.2f ms (slowest rank), compute %.2f ms summed over ranks, wait %.2f ms, "
                "%.1f MB sent, %.2f useful GFLOP/s\n",
                s->job_ms, s->compute_ms, s->wait_ms, (double)s->bytes_sent / 1e6,
                s->gflops_useful);
        fprintf(f, "balance: compute per rank %.2f .. %.2f ms (max/min %.3f)\n", s->compute_min_ms,
                s->compute_max_ms,
                s->compute_min_ms > 0 ? s->compute_max_ms / s->compute_min_ms : 0.0);
        fprintf(f, "model bytes sent per rank: %.1f MB\n", s->model_bytes_per_rank / 1e6);
        /* how the blocks travelled: one line when every rank did the same */
        int same = 1;
        for (int r = 1; r < n; r++)
            same &= s->all[r].staging_device == s->all[0].staging_device &&
                    !strcmp(s->all[r].staging, s->all[0].staging);
        for (int r = 0; r < (same ? 1 : n); r++) {
            fprintf(f, "staging: %s (%s)", s->all[r].staging_device ? "device" : "host",
                    s->all[r].staging);
            if (same)
                fprintf(f, " on every rank\n");
            else
                fprintf(f, " on rank %d\n", r);
        }
    }
    if (res->single_ms > 0) {
        fprintf(f, "single: rank 0 alone, the whole problem in one call: %.2f ms\n",
                res->single_ms);
        for (int strat = 0; strat < 2; strat++)
            if (res->strat[strat].state == 1)
                fprintf(f, "%s: job / single = %.3f\n", long_names[strat],
                        res->strat[strat].job_ms / res->single_ms);
    } else if (a->single)
        fprintf(f, "single: rank 0 alone could not run the whole problem (%s)\n", res->single_note);
    const xattn_mpi_bench_strategy *r0 = &res->strat[0], *r1 = &res->strat[1];
    if (r0->state == 1 && r1->state == 1)
        fprintf(f, "cheaper at this shape, measured: %s (%.2f ms against %.2f ms)\n",
                r0->job_ms <= r1->job_ms ? "ring" : "all-to-all",
                r0->job_ms <= r1->job_ms ? r0->job_ms : r1->job_ms,
                r0->job_ms <= r1->job_ms ? r1->job_ms : r0->job_ms);
}

/*
 * Thread 1 is the rank's own work, thread 2 the ring's transfer in flight.
 * Within a step the phases are laid end to end from their summed durations
 * (posting, staging, compute, waiting, agreeing), at the step's measured
 * start; the transfer spans the step up to the end of its wait.
 */
void xattn_mpi_bench_trace(FILE *f, const xattn_mpi_bench_result *res, const char *label,
                           double *base_us, int *first)
{
    const char *sep = label && *label ? " " : "";
    label = label ? label : "";
    for (int strat = 0; strat < 2; strat++) {
        const xattn_mpi_bench_strategy *s = &res->strat[strat];
        if (s->state != 1)
            continue;
        const char *sn = xattn_mpi_bench_strategy_names[strat];
        for (int r = 0; r < s->nranks; r++) {
            const xattn_mpi_stats *st = &s->all[r];
            fprintf(f,
                    "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":"
                    "\"rank %d\"}}",
                    *first ? "" : ",\n", r, r);
            *first = 0;
            fprintf(f,
                    ",\n{\"ph\":\"X\",\"name\":\"%s%s%s setup\",\"pid\":%d,\"tid\":1,\"ts\":%.1f,"
                    "\"dur\":%.1f}",
                    label, sep, sn, r, *base_us, st->setup_ms * 1e3);
            for (int t = 0; t < st->steps && t < XATTN_MPI_MAX_STEPS; t++) {
                const xattn_mpi_step_stats *p = &st->step[t];
                const char *names[5] = {"post", "stage", "compute", "wait", "agree"};
                double durs[5] = {p->comm_ms, p->stage_ms, p->compute_ms, p->wait_ms, p->agree_ms};
                double ts = *base_us + p->start_ms * 1e3;
                for (int k = 0; k < 5; k++) {
                    if (durs[k] <= 0)
                        continue;
                    fprintf(f,
                            ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":1,\"ts\":%.1f,"
                            "\"dur\":%.1f,\"args\":{\"step\":%d,\"strategy\":\"%s\"}}",
                            names[k], r, ts, durs[k] * 1e3, t, sn);
                    ts += durs[k] * 1e3;
                }
                if (p->bytes_sent > 0)
                    fprintf(f,
                            ",\n{\"ph\":\"X\",\"name\":\"transfer\",\"pid\":%d,\"tid\":2,"
                            "\"ts\":%.1f,\"dur\":%.1f,\"args\":{\"step\":%d,\"bytes\":%llu}}",
                            r, *base_us + p->start_ms * 1e3,
                            (p->comm_ms + p->stage_ms + p->compute_ms + p->wait_ms) * 1e3, t,
                            (unsigned long long)p->bytes_sent);
            }
        }
        *base_us += s->job_ms * 1e3 + 1000; /* one after the other on the timeline */
    }
}
