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

#include "xattn_mpi_bench_core.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: xattn_mpi_bench [--sq N] [--sk N] [--batch B] [--heads H] [--kv-heads H]\n"
            "         [--dim D] [--causal] [--layout zigzag|contiguous] [--iters N]\n"
            "         [--threads T] [--backend cpu|opencl|cuda] [--strategy ring|alltoall|both]\n"
            "         [--single] [--trace FILE] [--dtype f32|f16|bf16]\n");
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
    xattn_dtype dtype = XATTN_DTYPE_F32;
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
        } else if (!strcmp(a, "--dtype")) {
            ok = !strcmp(v, "f32") || !strcmp(v, "f16") || !strcmp(v, "bf16");
            dtype = !strcmp(v, "f16")    ? XATTN_DTYPE_F16
                    : !strcmp(v, "bf16") ? XATTN_DTYPE_BF16
                                         : XATTN_DTYPE_F32;
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

    xattn_mpi_bench_args a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.sq = sq;
    a.sk = sk;
    a.heads = H;
    a.kv_heads = Hkv;
    a.head_dim = a.head_dim_v = D;
    a.causal = causal;
    a.align = XATTN_ALIGN_BOTTOM_RIGHT;
    a.window_left = a.window_right = -1;
    a.layout = layout;
    a.iters = (int)iters;
    a.strategies = strategy == 0   ? XATTN_MPI_BENCH_RING
                   : strategy == 1 ? XATTN_MPI_BENCH_ALLTOALL
                                   : XATTN_MPI_BENCH_RING | XATTN_MPI_BENCH_ALLTOALL;
    a.single = single;
    a.dtype = a.kv_dtype = dtype;
    xattn_mpi_bench_result res;
    char err[512];
    if (xattn_mpi_bench_measure(MPI_COMM_WORLD, ctx, &a, &res, err, sizeof err) !=
        XATTN_STATUS_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        xattn_ctx_destroy(ctx);
        MPI_Finalize();
        return 1;
    }
    if (rank == 0) {
        char what[96];
        snprintf(what, sizeof what, "%s, %lld threads per rank", xattn_backend_name(backend),
                 (long long)threads);
        xattn_mpi_bench_print(stdout, &a, what, &res);
        if (trace) {
            FILE *tf = fopen(trace, "w");
            if (!tf)
                fprintf(stderr, "xattn_mpi_bench: cannot write %s\n", trace);
            else {
                double base = 0;
                int first = 1;
                fprintf(tf, "{\"traceEvents\":[\n");
                xattn_mpi_bench_trace(tf, &res, NULL, &base, &first);
                fprintf(tf, "\n]}\n");
                fclose(tf);
                printf("trace: %s (one process per rank; open in Perfetto)\n", trace);
            }
        }
    }
    xattn_mpi_bench_result_free(&res);
    xattn_ctx_destroy(ctx);
    MPI_Finalize();
    return 0;
}
