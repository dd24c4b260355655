/*
 * xattn_mpi_bench: times ring attention (xattn_mpi_ring_attention) and the
 * head-parallel all-to-all (xattn_mpi_alltoall_attention, --strategy) under
 * mpiexec and prints, on rank 0, each rank's per-step compute / staging /
 * communication / wait breakdown and bytes sent, the whole job's figures, and
 * (--single) the same problem run by rank 0 alone on one device for the ratio.
 *
 *   mpiexec -np 2 xattn_mpi_bench --sq 16384 --heads 4 --dim 64 --causal --single
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xattn_mpi.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: xattn_mpi_bench [--sq N] [--sk N] [--batch B] [--heads H] [--kv-heads H]\n"
            "         [--dim D] [--causal] [--layout zigzag|contiguous] [--iters N]\n"
            "         [--threads T] [--backend cpu|opencl|cuda] [--strategy ring|alltoall|both]\n"
            "         [--single] [--trace FILE]\n");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static xattn_buffer *rand_buffer(xattn_ctx *ctx, size_t n, uint32_t seed)
{
    if (n == 0)
        return NULL;
    float *a = malloc(n * sizeof(float));
    xattn_buffer *b = NULL;
    if (!a)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    if (xattn_buffer_alloc(ctx, n * sizeof(float), &b) == XATTN_STATUS_OK)
        xattn_buffer_write(b, 0, a, n * sizeof(float));
    free(a);
    return b;
}

/* Random Q, K, V and an O of the given lengths, f32, BSHD, in buf[4]. */
static void make_problem(xattn_ctx *ctx, int64_t B, int64_t sq, int64_t sk, int64_t H, int64_t Hkv,
                         int64_t D, int causal, uint32_t seed, xattn_attn_desc *d,
                         xattn_buffer *buf[4])
{
    buf[0] = rand_buffer(ctx, (size_t)(B * sq * H * D), seed);
    buf[1] = rand_buffer(ctx, (size_t)(B * sk * Hkv * D), seed + 6u);
    buf[2] = rand_buffer(ctx, (size_t)(B * sk * Hkv * D), seed + 12u);
    buf[3] = NULL;
    if (sq > 0)
        xattn_buffer_alloc(ctx, (size_t)(B * sq * H * D) * sizeof(float), &buf[3]);
    xattn_attn_desc_init(d);
    d->q = xattn_tensor_bshd(buf[0], 0, XATTN_DTYPE_F32, B, sq, H, D);
    d->k = xattn_tensor_bshd(buf[1], 0, XATTN_DTYPE_F32, B, sk, Hkv, D);
    d->v = xattn_tensor_bshd(buf[2], 0, XATTN_DTYPE_F32, B, sk, Hkv, D);
    d->o = xattn_tensor_bshd(buf[3], 0, XATTN_DTYPE_F32, B, sq, H, D);
    d->causal = causal;
}

static void free_problem(xattn_buffer *buf[4])
{
    for (int i = 0; i < 4; i++)
        xattn_buffer_free(buf[i]);
}

/*
 * Chrome / Perfetto trace events of the gathered stats: one process per rank
 * (pid = rank), thread 1 the rank's own work, thread 2 the ring's transfer in
 * flight. Within a step the phases are laid end to end from their summed
 * durations (posting, staging, compute, waiting, agreeing), at the step's
 * measured start; the transfer spans the step up to the end of its wait.
 */
static void write_trace(FILE *f, const xattn_mpi_stats *all, int n, const char *strategy,
                        double base_us, int *first)
{
    for (int r = 0; r < n; r++) {
        const xattn_mpi_stats *s = &all[r];
        fprintf(f,
                "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":"
                "\"rank %d\"}}",
                *first ? "" : ",\n", r, r);
        *first = 0;
        double setup_us = s->setup_ms * 1e3;
        fprintf(f,
                ",\n{\"ph\":\"X\",\"name\":\"%s setup\",\"pid\":%d,\"tid\":1,\"ts\":%.1f,"
                "\"dur\":%.1f}",
                strategy, r, base_us, setup_us);
        for (int t = 0; t < s->steps && t < XATTN_MPI_MAX_STEPS; t++) {
            const xattn_mpi_step_stats *p = &s->step[t];
            const char *names[5] = {"post", "stage", "compute", "wait", "agree"};
            double durs[5] = {p->comm_ms, p->stage_ms, p->compute_ms, p->wait_ms, p->agree_ms};
            double ts = base_us + p->start_ms * 1e3;
            for (int k = 0; k < 5; k++) {
                if (durs[k] <= 0)
                    continue;
                fprintf(f,
                        ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":1,\"ts\":%.1f,"
                        "\"dur\":%.1f,\"args\":{\"step\":%d,\"strategy\":\"%s\"}}",
                        names[k], r, ts, durs[k] * 1e3, t, strategy);
                ts += durs[k] * 1e3;
            }
            if (p->bytes_sent > 0)
                fprintf(f,
                        ",\n{\"ph\":\"X\",\"name\":\"transfer\",\"pid\":%d,\"tid\":2,"
                        "\"ts\":%.1f,\"dur\":%.1f,\"args\":{\"step\":%d,\"bytes\":%llu}}",
                        r, base_us + p->start_ms * 1e3,
                        (p->comm_ms + p->stage_ms + p->compute_ms + p->wait_ms) * 1e3, t,
                        (unsigned long long)p->bytes_sent);
        }
    }
}

/* Waits on a barrier without spinning a core away from the rank that works. */
static void quiet_barrier(MPI_Comm comm)
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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int64_t sq = 8192, sk = -1, B = 1, H = 4, Hkv = -1, D = 64, iters = 3, threads = 1;
    int causal = 0, single = 0, strategy = 0; /* 0 ring, 1 all-to-all, 2 both */
    const char *trace = NULL;
    xattn_mpi_layout layout = XATTN_MPI_ZIGZAG;
    xattn_backend backend = XATTN_BACKEND_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int ok = 1;
        if (!strcmp(a, "--sq"))
            ok = parse_i64(v, 1, 1 << 30, &sq), i++;
        else if (!strcmp(a, "--sk"))
            ok = parse_i64(v, 1, 1 << 30, &sk), i++;
        else if (!strcmp(a, "--batch"))
            ok = parse_i64(v, 1, 1 << 16, &B), i++;
        else if (!strcmp(a, "--heads"))
            ok = parse_i64(v, 1, 1 << 12, &H), i++;
        else if (!strcmp(a, "--kv-heads"))
            ok = parse_i64(v, 1, 1 << 12, &Hkv), i++;
        else if (!strcmp(a, "--dim"))
            ok = parse_i64(v, 1, 256, &D), i++;
        else if (!strcmp(a, "--iters"))
            ok = parse_i64(v, 1, 1000, &iters), i++;
        else if (!strcmp(a, "--threads"))
            ok = parse_i64(v, 0, 1024, &threads), i++;
        else if (!strcmp(a, "--causal"))
            causal = 1;
        else if (!strcmp(a, "--single"))
            single = 1;
        else if (!strcmp(a, "--trace"))
            trace = v, ok = *v != 0, i++;
        else if (!strcmp(a, "--strategy")) {
            ok = !strcmp(v, "ring") || !strcmp(v, "alltoall") || !strcmp(v, "both");
            strategy = !strcmp(v, "ring") ? 0 : !strcmp(v, "alltoall") ? 1 : 2;
            i++;
        } else if (!strcmp(a, "--layout")) {
            ok = !strcmp(v, "zigzag") || !strcmp(v, "contiguous");
            layout = !strcmp(v, "contiguous") ? XATTN_MPI_CONTIGUOUS : XATTN_MPI_ZIGZAG;
            i++;
        } else if (!strcmp(a, "--backend")) {
            ok = xattn_backend_from_name(v, &backend) == XATTN_STATUS_OK;
            i++;
        } else
            ok = 0;
        if (!ok) {
            if (rank == 0) {
                fprintf(stderr, "xattn_mpi_bench: bad argument '%s %s'\n", a, v);
                usage();
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (sk < 0)
        sk = sq;
    if (Hkv < 0)
        Hkv = H;
    if (H % Hkv) {
        if (rank == 0)
            fprintf(stderr, "xattn_mpi_bench: --heads %lld is not a multiple of --kv-heads %lld\n",
                    (long long)H, (long long)Hkv);
        MPI_Finalize();
        return 2;
    }
    xattn_ctx *ctx = NULL;
    if (xattn_ctx_create(backend, 0, &ctx) != XATTN_STATUS_OK) {
        fprintf(stderr, "rank %d: no %s context: %s\n", rank, xattn_backend_name(backend),
                xattn_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (backend == XATTN_BACKEND_CPU)
        xattn_ctx_set_option(ctx, XATTN_OPT_NUM_THREADS, threads);

    xattn_mpi_segment qs[2], ks[2];
    int64_t sql = xattn_mpi_shard(layout, sq, n, rank, qs);
    int64_t skl = xattn_mpi_shard(layout, sk, n, rank, ks);
    xattn_buffer *bufs[4];
    xattn_attn_desc d;
    make_problem(ctx, B, sql, skl, H, Hkv, D, causal, 1u + (uint32_t)rank, &d, bufs);
    xattn_mpi_ring_opts o;
    xattn_mpi_ring_opts_init(&o);
    o.layout = layout;
    o.sq_global = sq;
    o.sk_global = sk;
    o.timeout_ms = 600000;
    static const char *names[2] = {"ring attention", "all-to-all"};
    double job_ms[2] = {-1, -1}, trace_base = 0;
    FILE *tf = NULL;
    int tfirst = 1;
    if (rank == 0 && trace) {
        tf = fopen(trace, "w");
        if (!tf)
            fprintf(stderr, "xattn_mpi_bench: cannot write %s\n", trace);
        else
            fprintf(tf, "{\"traceEvents\":[\n");
    }
    for (int strat = 0; strat < 2; strat++) {
        if (strategy != 2 && strategy != strat)
            continue;
        xattn_mpi_stats best;
        memset(&best, 0, sizeof best);
        double best_job = -1;
        for (int64_t it = 0; it <= iters; it++) { /* iteration 0 warms up */
            xattn_mpi_stats s;
            quiet_barrier(MPI_COMM_WORLD);
            xattn_status st = strat ? xattn_mpi_alltoall_attention(MPI_COMM_WORLD, ctx, &d, &o, &s)
                                    : xattn_mpi_ring_attention(MPI_COMM_WORLD, ctx, &d, &o, &s);
            if (st != XATTN_STATUS_OK) {
                fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, names[strat],
                        xattn_status_name(st), xattn_mpi_last_error());
                MPI_Finalize();
                return 1;
            }
            /* keep the fastest job (the slowest rank decides), same iteration everywhere */
            double job;
            MPI_Allreduce(&s.total_ms, &job, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (it >= 1 && (best_job < 0 || job < best_job)) {
                best = s;
                best_job = job;
            }
        }
        xattn_mpi_stats *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
        xattn_mpi_stats_gather(MPI_COMM_WORLD, &best, all, 60000);

        if (rank == 0) {
            printf("%s: %d ranks, %s layout, %s, B %lld, Sq %lld, Sk %lld, Hq %lld, "
                   "Hkv %lld, D %lld, f32, %s, %lld threads per rank; best of %lld\n",
                   names[strat], n, layout == XATTN_MPI_ZIGZAG ? "zigzag" : "contiguous",
                   causal ? "causal" : "full", (long long)B, (long long)sq, (long long)sk,
                   (long long)H, (long long)Hkv, (long long)D, xattn_backend_name(backend),
                   (long long)threads, (long long)iters);
            printf("%4s %4s %10s %10s %10s %10s %10s %12s %5s %5s\n", "rank", "step", "compute_ms",
                   "stage_ms", "comm_ms", "wait_ms", "agree_ms", "bytes_sent", "calls", "skip");
            double job = 0, compute = 0, wait = 0;
            uint64_t bytes = 0;
            for (int r = 0; r < n; r++) {
                const xattn_mpi_stats *s = &all[r];
                for (int t = 0; t < s->steps && t < XATTN_MPI_MAX_STEPS; t++) {
                    const xattn_mpi_step_stats *p = &s->step[t];
                    printf("%4d %4d %10.2f %10.2f %10.2f %10.2f %10.2f %12llu %5d %5d\n", r, t,
                           p->compute_ms, p->stage_ms, p->comm_ms, p->wait_ms, p->agree_ms,
                           (unsigned long long)p->bytes_sent, p->calls, p->skipped);
                }
                printf("%4d  all %10.2f %10.2f %10.2f %10.2f %10.2f %12llu %5d %5d  total %.2f ms "
                       "(setup %.2f, finish %.2f)\n",
                       r, s->sum.compute_ms, s->sum.stage_ms, s->sum.comm_ms, s->sum.wait_ms,
                       s->sum.agree_ms, (unsigned long long)s->sum.bytes_sent, s->sum.calls,
                       s->sum.skipped, s->total_ms, s->setup_ms, s->finish_ms);
                if (s->total_ms > job)
                    job = s->total_ms;
                compute += s->sum.compute_ms;
                wait += s->sum.wait_ms;
                bytes += s->sum.bytes_sent;
            }
            double flops = all[0].flops_useful;
            printf("job: %.2f ms (slowest rank), compute %.2f ms summed over ranks, wait %.2f ms, "
                   "%.1f MB sent, %.2f useful GFLOP/s\n",
                   job, compute, wait, (double)bytes / 1e6, flops / (job * 1e6));
            double lo = 1e300, hi = 0;
            for (int r = 0; r < n; r++) {
                lo = all[r].sum.compute_ms < lo ? all[r].sum.compute_ms : lo;
                hi = all[r].sum.compute_ms > hi ? all[r].sum.compute_ms : hi;
            }
            printf("balance: compute per rank %.2f .. %.2f ms (max/min %.3f)\n", lo, hi,
                   lo > 0 ? hi / lo : 0.0);
            job_ms[strat] = job;
            if (tf) { /* one strategy after the other on the trace's timeline */
                write_trace(tf, all, n, strat ? "all-to-all" : "ring", trace_base, &tfirst);
                trace_base += job * 1e3 + 1000;
            }
            free(all);
        }
    }
    double single_ms = -1;
    if (single) {
        quiet_barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            xattn_buffer *b1[4];
            xattn_attn_desc s1;
            make_problem(ctx, B, sq, sk, H, Hkv, D, causal, 3u, &s1, b1);
            for (int64_t it = 0; it <= iters; it++) {
                double t0 = MPI_Wtime();
                xattn_attention(ctx, &s1, NULL);
                xattn_ctx_sync(ctx);
                double ms = (MPI_Wtime() - t0) * 1e3;
                if (it >= 1 && (single_ms < 0 || ms < single_ms))
                    single_ms = ms;
            }
            free_problem(b1);
        }
        quiet_barrier(MPI_COMM_WORLD);
    }

    if (tf) {
        fprintf(tf, "\n]}\n");
        fclose(tf);
        printf("trace: %s (one process per rank; open in Perfetto)\n", trace);
    }
    if (rank == 0) {
        if (single_ms > 0)
            printf("single: rank 0 alone, the whole problem in one call: %.2f ms\n", single_ms);
        for (int strat = 0; strat < 2; strat++)
            if (job_ms[strat] > 0 && single_ms > 0)
                printf("%s: job / single = %.3f\n", names[strat], job_ms[strat] / single_ms);
        if (job_ms[0] > 0 && job_ms[1] > 0)
            printf("cheaper at this shape, measured: %s (%.2f ms against %.2f ms)\n",
                   job_ms[0] <= job_ms[1] ? "ring" : "all-to-all",
                   job_ms[0] <= job_ms[1] ? job_ms[0] : job_ms[1],
                   job_ms[0] <= job_ms[1] ? job_ms[1] : job_ms[0]);
        /* the model's bytes per rank (docs/scale.md): the ring moves n-1 blocks of K/V, the
         * all-to-all (n-1)/n of this rank's Q, K, V in and O out */
        double ring_b = (double)(n - 1) * (double)B * (double)sk / n * (double)Hkv * 2.0 * D * 4;
        double a2a_b = (double)(n - 1) / n * (double)B * (double)sq / n *
                       ((double)H * 2.0 * D + (double)Hkv * 2.0 * D) * 4;
        printf("model bytes sent per rank: ring %.1f MB, all-to-all %.1f MB%s\n", ring_b / 1e6,
               a2a_b / 1e6,
               (H % n || Hkv % n) ? " (the all-to-all needs heads divisible by the ranks)" : "");
    }
    free_problem(bufs);
    xattn_ctx_destroy(ctx);
    MPI_Finalize();
    return 0;
}
