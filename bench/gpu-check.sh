#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend on a machine with an NVIDIA GPU, in one go
# (about 5 minutes on one H200, 8 at most: every step has a time limit).
#
#   1. builds xattn with CUDA for this GPU's architecture only (BUILD_DIR,
#      default build-gpu/), Release;
#   2. tests: tests/cuda (interop on a caller's stream and device pointers, a
#      failing launch, every algorithm and dtype against the CPU backend), the
#      cross-backend harness `test_backend_ops -b cuda` (every case of the
#      matrix x NAIVE/FLASH/SPLITKV/AUTO against the double-precision
#      reference, tensor-core paths where they apply), and the harness again
#      with XATTN_CUDA_FORCE_SIMT=1 (the SIMT path on the same cases);
#   3. checks the benchmark's configurations against the reference at sizes
#      the CPU reference can afford (each dtype x head dim x causal at 1k
#      tokens, a 16k-key causal prefill slice, the decode shapes);
#   4. benchmarks Llama-3-8B-like attention (32 query heads, 8 KV heads):
#      prefill at 1k/4k/16k tokens, head dim 64 and 128, causal and not, f16
#      and bf16 (FLASH), and decode (1 query token, batch 8) on an 8k and a
#      32k KV cache (SPLITKV and FLASH), without the reference;
#   5. prints the GPU, the driver, the test summaries, and a table last.
#
# Usage: bench/gpu-check.sh            (from anywhere; results in BUILD_DIR/gpu-check/)
# Environment: BUILD_DIR, JOBS (default: all cores), CUDA_ARCH (default: this
# GPU's, from nvidia-smi; else CMake's "native"), SKIP_BUILD=1 (reuse BUILD_DIR).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
OUT_DIR=$BUILD_DIR/gpu-check
START=$(date +%s)
status=0

say() { printf '== %s (%ds)\n' "$*" $(($(date +%s) - START)); }

# ---- GPU and build ----------------------------------------------------------
gpu="(nvidia-smi not found)"
driver="?"
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
fi
CUDA_ARCH=${CUDA_ARCH:-${cap:-native}}
say "GPU: $gpu, driver $driver; building for CUDA architecture $CUDA_ARCH"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    gen=""
    command -v ninja >/dev/null 2>&1 && gen="-G Ninja"
    nvcc_opt=""
    [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1 &&
        nvcc_opt="-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc"
    # shellcheck disable=SC2086
    if ! timeout 60 cmake -S "$ROOT" -B "$BUILD_DIR" $gen $nvcc_opt -DCMAKE_BUILD_TYPE=Release \
            -DXATTN_WITH_CUDA=ON -DXATTN_WITH_OPENCL=OFF -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
            >"$BUILD_DIR.configure.log" 2>&1; then
        cat "$BUILD_DIR.configure.log"
        echo "gpu-check: configure failed"
        exit 1
    fi
    if ! timeout 240 cmake --build "$BUILD_DIR" -j "$JOBS" >"$BUILD_DIR.build.log" 2>&1; then
        tail -40 "$BUILD_DIR.build.log"
        echo "gpu-check: build failed (or took over 4 minutes)"
        exit 1
    fi
fi
mkdir -p "$OUT_DIR"
XATTN="$BUILD_DIR/bench/xattn"
say "built"
"$XATTN" devices 2>&1 | sed -n '/^cuda/,$p' | tee "$OUT_DIR/devices.txt"

# ---- tests -------------------------------------------------------------------
run_test() { # name timeout command...
    local name=$1 limit=$2
    shift 2
    if timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1; then
        printf '  %-28s %s\n' "$name" "$(tail -1 "$OUT_DIR/$name.log")"
    else
        printf '  %-28s FAILED (exit %d): %s\n' "$name" $? "$(tail -1 "$OUT_DIR/$name.log")"
        grep -E '^FAIL|FAIL ' "$OUT_DIR/$name.log" | head -20
        status=1
    fi
}
say "tests"
for t in available interop launch_fail algos; do
    run_test "cuda_$t" 120 "$BUILD_DIR/tests/cuda/test_cuda" "$t"
done
run_test harness_cuda 200 "$BUILD_DIR/tests/test_backend_ops" -b cuda
run_test harness_cuda_simt 150 env XATTN_CUDA_FORCE_SIMT=1 "$BUILD_DIR/tests/test_backend_ops" -b cuda --quick
sed -n '/^backend/,/passed/p' "$OUT_DIR/harness_cuda.log" | tail -8

# ---- checks against the reference (sizes the CPU reference affords) --------
say "checks against the reference"
CHECKS="$OUT_DIR/checks.txt"
: >"$CHECKS"
check() { # label, xattn run options...
    local label=$1
    shift
    local log="$OUT_DIR/check-$label.log"
    timeout 60 "$XATTN" run --backend cuda --reps 2 "$@" >"$log" 2>&1
    local rc=$?
    local err
    err=$(sed -n 's/^error *//p' "$log")
    [ -z "$err" ] && err="no result (exit $rc): $(tail -1 "$log")"
    [ $rc -ne 0 ] && status=1
    printf '  %-34s %s\n' "$label" "$err" | tee -a "$CHECKS"
}
for dt in f16 bf16; do
    for hd in 64 128; do
        for causal in 0 1; do
            c=""
            [ $causal = 1 ] && c="--causal"
            check "prefill-1k-hd$hd-$dt${c:+-causal}" --algo flash --dtype $dt --batch 1 --heads 8 \
                --kv-heads 2 --sq 1024 --sk 1024 --head-dim $hd $c
        done
    done
    check "prefill-16k-slice-hd128-$dt-causal" --algo flash --dtype $dt --batch 1 --heads 4 \
        --kv-heads 1 --sq 128 --sk 16384 --head-dim 128 --causal
    for sk in 8192 32768; do
        check "decode-${sk}-$dt-splitkv" --algo splitkv --dtype $dt --batch 1 --heads 32 \
            --kv-heads 8 --sq 1 --sk $sk --head-dim 128
    done
done
check "prefill-1k-f32-simt" --algo flash --dtype f32 --batch 1 --heads 4 --kv-heads 1 \
    --sq 1024 --sk 1024 --head-dim 128 --causal
check "naive-1k-f16" --algo naive --dtype f16 --batch 1 --heads 4 --kv-heads 1 --sq 1024 \
    --sk 1024 --head-dim 128 --causal

# ---- benchmark ---------------------------------------------------------------
say "benchmark"
CSV="$OUT_DIR/bench.csv"
echo "shape,dtype,algo,median_ms,tflops_useful" >"$CSV"
bench() { # shape-label dtype algo reps options...
    local label=$1 dt=$2 algo=$3 reps=$4
    shift 4
    local log="$OUT_DIR/bench-$label-$dt-$algo.log"
    if ! timeout 90 "$XATTN" run --backend cuda --no-check --reps "$reps" --algo "$algo" \
            --dtype "$dt" "$@" >"$log" 2>&1; then
        echo "$label,$dt,$algo,error: $(tail -1 "$log" | tr ',' ';' | cut -c1-60),-" >>"$CSV"
        status=1
        return
    fi
    local ms gf
    ms=$(sed -n 's/^time *median \([0-9.]*\) ms.*/\1/p' "$log")
    gf=$(sed -n 's/.*GFLOP useful.*, \([0-9.]*\) GFLOP\/s useful.*/\1/p' "$log")
    echo "$label,$dt,$algo,$ms,$(awk -v g="$gf" 'BEGIN { printf "%.1f", g / 1000 }')" >>"$CSV"
}
for dt in f16 bf16; do
    for s in 1024 4096 16384; do
        reps=10
        [ $s = 16384 ] && reps=4
        for hd in 64 128; do
            for causal in 0 1; do
                c=""
                [ $causal = 1 ] && c="--causal"
                bench "prefill-${s}-hd${hd}${c:+-causal}" $dt flash $reps --batch 1 --heads 32 \
                    --kv-heads 8 --sq $s --sk $s --head-dim $hd $c
            done
        done
    done
    for sk in 8192 32768; do
        for algo in splitkv flash; do
            bench "decode-b8-kv${sk}" $dt $algo 20 --batch 8 --heads 32 --kv-heads 8 --sq 1 \
                --sk $sk --head-dim 128
        done
    done
done

# ---- summary: the table last -------------------------------------------------
echo
echo "xattn gpu-check: $gpu, driver $driver, $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - START)) s"
echo "tests:"
for f in cuda_available cuda_interop cuda_launch_fail cuda_algos harness_cuda harness_cuda_simt; do
    [ -f "$OUT_DIR/$f.log" ] && printf '  %-20s %s\n' "$f" "$(tail -1 "$OUT_DIR/$f.log")"
done
echo "checks (rel L2 vs the fp64 reference; in brackets: the reference rounded to the dtype):"
cat "$CHECKS"
echo "benchmark (Llama-3-8B-like: 32 q heads, 8 kv heads; TFLOP/s on useful work, causal = half):"
awk -F, 'NR == 1 { printf "  %-30s %-5s %-8s %10s %9s\n", "shape", "dtype", "algo", "median ms", "TFLOP/s"; next }
         { printf "  %-30s %-5s %-8s %10s %9s\n", $1, $2, $3, $4, $5 }' "$CSV"
[ $status = 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILURES (logs in $OUT_DIR)"
exit $status
