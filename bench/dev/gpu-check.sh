#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend (and the OpenCL one where the machine has
# NVIDIA's OpenCL driver) on a machine with an NVIDIA GPU, in one go, within
# one overall deadline: DEADLINE_S seconds (default 450, so that the whole run
# stays under 8 minutes on a 16-core machine with one H200). Every step gets
# at most what is left; a step that no longer fits is reported as not run.
#
#   1. finds the GPU (nvidia-smi); without one it says so and exits 2;
#   2. configures and builds only what it runs (the xattn tool, test_cuda,
#      test_backend_ops) for this GPU's architecture only, Release, with Ninja
#      when there is one; meanwhile nvcc builds bench/dev/gpu_check_gemm.cu, a
#      cuBLAS GEMM (the library itself does not use cuBLAS);
#   3. ceilings: xattn's micro-benchmarks (f32 FMA, the tensor cores' raw
#      mma.sync rate in f16 and bf16, read and copy bandwidth) and cuBLAS's
#      bf16/f16 GEMM on 8192^3 as the peer;
#   4. tests/cuda (interop, a failing launch, every algorithm and dtype
#      against the CPU backend);
#   5. benchmark, Llama-3-8B-like attention (32 query heads, 8 KV heads):
#      FLASH prefill at 1k/4k/16k tokens, head dims 64 and 128, causal and
#      not, f16 and bf16, in TFLOP/s and as a share of the mma.sync ceiling
#      and of cuBLAS's GEMM; decode (1 query token, batch 8) on 8k and 32k KV
#      caches, SPLITKV and FLASH, in GB/s and as a share of the measured copy
#      bandwidth; each row says which kernel ran (mma or simt) and whether its
#      work was counted by the kernels; serving decode (B 8, 32k keys) with a
#      paged cache (page 16), and with fp8 e4m3 and q8_0 caches;
#   6. the benchmark's configurations against the reference, at sizes the CPU
#      reference affords, and paged decode with fp8 and q8_0 caches;
#   7. `xattn tune --backend cuda` on a FLASH prefill and a SPLITKV decode
#      case (f16, D 128): the table of what it tried (path mma/simt, split
#      waves) and the stored winner, which the harness below then runs with;
#      then the cross-backend harness `test_backend_ops -b cuda` (every case x
#      NAIVE/FLASH/SPLITKV/AUTO against the double reference), then again with
#      XATTN_CUDA_FORCE_SIMT=1 (--quick);
#   8. with NVIDIA's OpenCL driver: the harness on -b opencl (--quick) and a
#      few benchmark cells on it;
#   9. prints one self-contained report (also OUT_DIR/report.txt).
#
# Usage: bench/dev/gpu-check.sh        (from anywhere; logs in BUILD_DIR/gpu-check/)
# Environment: BUILD_DIR (default build-gpu/), JOBS (default: all cores),
# DEADLINE_S, CUDA_ARCH (default: this GPU's, from nvidia-smi; else CMake's
# "native"), SKIP_BUILD=1 (reuse BUILD_DIR), BUILD_ONLY=1 (stop after the
# build; without a GPU it builds for CUDA_ARCH, default 90: to check the build
# commands on a machine without one).
# Exit status: 0 all passed, 1 a failure (or a step cut by the deadline),
# 2 no GPU (or nothing could be built).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
DEADLINE_S=${DEADLINE_S:-450}
OUT_DIR=$BUILD_DIR/gpu-check
START=$(date +%s)
RESERVE=8 # seconds kept for the report
# Failures and steps the deadline left out are lines in files, so that
# steps run in the background report them too.
FAILED=""
SKIPPED=""

elapsed() { echo $(($(date +%s) - START)); }
say() { printf '== %s (%ds)\n' "$*" "$(elapsed)"; }
# budget CAP: seconds a step may take (at most CAP, never past the deadline);
# prints 0 when fewer than 5 are left.
budget() {
    local left=$((DEADLINE_S - $(elapsed) - RESERVE))
    [ "$left" -gt "$1" ] && left=$1
    [ "$left" -lt 5 ] && left=0
    echo "$left"
}
not_run() { echo "  $1" >>"$SKIPPED"; } # what: a step the deadline left out
failed() { echo "  $1" >>"$FAILED"; }

# ---- 1. the GPU -------------------------------------------------------------
gpu=""
driver="?"
cap=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
    case $cap in *[!0-9]* | "") cap="" ;; esac # older drivers: no compute_cap field
fi
if [ -z "$gpu" ]; then
    why="nvidia-smi not found"
    command -v nvidia-smi >/dev/null 2>&1 && why="nvidia-smi lists no GPU: $(nvidia-smi -L 2>&1 | head -1)"
    if [ "${BUILD_ONLY:-0}" != 1 ]; then
        echo "gpu-check: no NVIDIA GPU visible ($why); nothing was run."
        echo "gpu-check: run it on a machine with a GPU and its driver (BUILD_ONLY=1 only builds)."
        exit 2
    fi
    gpu="(none: $why)"
    cap=${cap:-90}
fi
# CMake's "native" needs a visible GPU; a machine without one builds for CUDA_ARCH or 90.
CUDA_ARCH=${CUDA_ARCH:-${cap:-native}}
NVCC=""
for n in "${CUDACXX:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do
    [ -n "$n" ] && [ -x "$n" ] && NVCC=$n && break
done
say "GPU: $gpu, driver $driver; CUDA architecture $CUDA_ARCH; deadline ${DEADLINE_S}s"
if [ -z "$NVCC" ]; then
    echo "gpu-check: nvcc not found (PATH, CUDACXX, /usr/local/cuda/bin): cannot build"
    exit 2
fi
cuda_version=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
mkdir -p "$OUT_DIR"
FAILED="$OUT_DIR/failed.txt"
SKIPPED="$OUT_DIR/skipped.txt"
: >"$FAILED"
: >"$SKIPPED"

# NVIDIA's OpenCL driver (an ICD naming libnvidia-opencl): then the OpenCL
# backend is built too (when CMake finds OpenCL headers and a loader), and the
# ICD loader is shown that driver only, so that OpenCL device 0 (the one the
# harness takes) is the GPU.
ocl_icd=""
for f in /etc/OpenCL/vendors/*.icd; do
    [ -f "$f" ] && grep -qi nvidia "$f" 2>/dev/null && ocl_icd=$f
done
opencl=OFF
if [ -n "$ocl_icd" ]; then
    opencl=AUTO
    mkdir -p "$OUT_DIR/icd"
    cp "$ocl_icd" "$OUT_DIR/icd/"
    export OCL_ICD_VENDORS="$OUT_DIR/icd"
fi

# ---- 2. build ---------------------------------------------------------------
XATTN="$BUILD_DIR/bench/xattn"
GEMM="$OUT_DIR/gpu_check_gemm"
gemm_pid=""
arch_flag="-arch=sm_$CUDA_ARCH"
[ "$CUDA_ARCH" = native ] && arch_flag="-arch=native"
t=$(budget 150)
if [ "$t" -gt 0 ]; then
    timeout -k 5 "$t" "$NVCC" -O2 -std=c++17 "$arch_flag" -o "$GEMM" "$ROOT/bench/dev/gpu_check_gemm.cu" \
        -lcublas >"$OUT_DIR/gemm-build.log" 2>&1 &
    gemm_pid=$!
fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    gen=()
    command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
    # A build folder made with another generator cannot be reused.
    if [ -f "$BUILD_DIR/CMakeCache.txt" ] &&
        ! grep -q "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}\$" "$BUILD_DIR/CMakeCache.txt"; then
        rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
    fi
    t=$(budget 90)
    if [ "$t" = 0 ] || ! timeout -k 5 "$t" cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" \
        -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_BUILD_TYPE=Release -DXATTN_WITH_CUDA=ON \
        -DXATTN_WITH_OPENCL=$opencl -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
        >"$OUT_DIR/configure.log" 2>&1; then
        tail -30 "$OUT_DIR/configure.log"
        echo "gpu-check: configure failed (log: $OUT_DIR/configure.log)"
        exit 2
    fi
    targets=(--target xattn_tool test_cuda test_backend_ops)
    t=$(budget 240)
    if [ "$t" = 0 ] || ! timeout -k 5 "$t" cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}" \
        >"$OUT_DIR/build.log" 2>&1; then
        tail -40 "$OUT_DIR/build.log"
        echo "gpu-check: build failed or passed its ${t}s (log: $OUT_DIR/build.log)"
        exit 2
    fi
fi
gemm_ok=0
if [ -n "$gemm_pid" ] && wait "$gemm_pid"; then
    gemm_ok=1
else
    tail -5 "$OUT_DIR/gemm-build.log" 2>/dev/null
    echo "gpu-check: the cuBLAS GEMM did not build (no cuBLAS peer in the report)"
fi
say "built"
if [ "${BUILD_ONLY:-0}" = 1 ]; then
    echo "gpu-check: BUILD_ONLY=1: built $XATTN, test_cuda, test_backend_ops$([ $gemm_ok = 1 ] && echo ", $GEMM")"
    exit 0
fi
# ---- 3. ceilings ------------------------------------------------------------
# Records of every later run take their shares from this cache.
export XATTN_CACHE_DIR="$OUT_DIR/cache"
rm -rf "$XATTN_CACHE_DIR"
say "ceilings"
t=$(budget 60)
if [ "$t" -gt 0 ]; then
    timeout -k 5 "$t" "$XATTN" devices --measure --force >"$OUT_DIR/devices.txt" 2>&1 ||
        failed "xattn devices --measure (devices.txt)"
else
    not_run "ceilings (xattn devices --measure)"
fi
ceil_file=$(find "$XATTN_CACHE_DIR" -name 'cuda-*.txt' 2>/dev/null | head -1)
ceil() { # key: the CUDA device's ceiling (GFLOP/s or GB/s), 0 if unknown
    local v=""
    [ -n "$ceil_file" ] && v=$(sed -n "s/^$1=//p" "$ceil_file" | head -1)
    echo "${v:-0}"
}
fma32=$(ceil fma_f32_gflops)
mma16=$(ceil mma_f16_gflops)
mmabf=$(ceil mma_bf16_gflops)
readbw=$(ceil read_gbps)
copybw=$(ceil copy_gbps)
gemm_bf16=0
gemm_f16=0
t=$(budget 40)
if [ $gemm_ok = 1 ] && [ "$t" -gt 0 ]; then
    if timeout -k 5 "$t" "$GEMM" 8192 20 >"$OUT_DIR/gemm.log" 2>&1; then
        gemm_bf16=$(awk '$2 == "bf16" { print $(NF-1) * 1000 }' "$OUT_DIR/gemm.log")
        gemm_f16=$(awk '$2 == "f16" { print $(NF-1) * 1000 }' "$OUT_DIR/gemm.log")
    else
        failed "cuBLAS GEMM (gemm.log)"
    fi
elif [ $gemm_ok = 1 ]; then
    not_run "cuBLAS GEMM"
fi

# ---- 4. tests/cuda ----------------------------------------------------------
TESTS="$OUT_DIR/tests.txt"
: >"$TESTS"
run_test() { # name cap command...
    local name=$1 t
    t=$(budget "$2")
    shift 2
    if [ "$t" = 0 ]; then
        printf '  %-24s not run (deadline)\n' "$name" >>"$TESTS"
        not_run "$name"
        return
    fi
    timeout -k 5 "$t" "$@" >"$OUT_DIR/$name.log" 2>&1
    local rc=$?
    if [ $rc = 0 ]; then
        printf '  %-24s %s\n' "$name" "$(tail -1 "$OUT_DIR/$name.log")" >>"$TESTS"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then
        printf '  %-24s not finished in its %ds (deadline): %s\n' "$name" "$t" \
            "$(tail -1 "$OUT_DIR/$name.log")" >>"$TESTS"
        not_run "$name (cut after ${t}s)"
    else
        printf '  %-24s FAILED (exit %d): %s\n' "$name" $rc "$(tail -1 "$OUT_DIR/$name.log")" >>"$TESTS"
        grep -E '^FAIL|FAIL ' "$OUT_DIR/$name.log" | head -10 | sed 's/^/      /' >>"$TESTS"
        failed "$name"
    fi
}
say "tests/cuda"
for t in available interop launch_fail algos; do
    run_test "cuda_$t" 60 "$BUILD_DIR/tests/cuda/test_cuda" "$t"
done

# ---- 5. benchmark -----------------------------------------------------------
# jnum FILE FIELD: a number of the last record of an `xattn run --json` file.
jnum() { grep '"seq"' "$1" 2>/dev/null | tail -1 | sed -n "s/.*\"$2\": \\([-0-9.e+]*\\).*/\\1/p"; }
jstr() { grep '"seq"' "$1" 2>/dev/null | tail -1 | sed -n "s/.*\"$2\": \"\\([^\"]*\\)\".*/\\1/p"; }
PREFILL="$OUT_DIR/prefill.txt"
DECODE="$OUT_DIR/decode.txt"
: >"$PREFILL"
: >"$DECODE"
# bench KIND LABEL DTYPE ALGO REPS BACKEND options...: one cell, a row of the table.
bench() {
    local kind=$1 label=$2 dt=$3 algo=$4 reps=$5 be=$6 t
    shift 6
    local base="$OUT_DIR/bench-$be-$label-$dt-$algo"
    local table=$PREFILL
    [ "$kind" = decode ] && table=$DECODE
    t=$(budget 30)
    if [ "$t" = 0 ]; then
        printf '  %-26s %-4s %-7s %-6s not run (deadline)\n' "$label" "$dt" "$algo" "$be" >>"$table"
        not_run "benchmark $be $label $dt $algo"
        return
    fi
    if ! timeout -k 5 "$t" "$XATTN" run --backend "$be" --no-check --reps "$reps" --algo "$algo" \
        --dtype "$dt" --json "$base.json" "$@" >"$base.log" 2>&1; then
        printf '  %-26s %-4s %-7s %-6s error: %s\n' "$label" "$dt" "$algo" "$be" \
            "$(tail -1 "$base.log" | cut -c1-70)" >>"$table"
        failed "benchmark $be $label $dt $algo"
        return
    fi
    local ms fu fx by kern mu wc
    ms=$(sed -n 's/^time *median \([0-9.]*\) ms.*/\1/p' "$base.log")
    fu=$(jnum "$base.json" flops_useful)
    fx=$(jnum "$base.json" flops_executed)
    by=$(jnum "$base.json" bytes_actual)
    kern=$(jstr "$base.json" kernel)
    mu=$(grep '"seq"' "$base.json" | tail -1 | sed -n 's/.*"matrix_units": \([a-z]*\).*/\1/p')
    wc=$(grep '"seq"' "$base.json" | tail -1 | sed -n 's/.*"work_counted": \([a-z]*\).*/\1/p')
    local mma=$mma16 gemm=$gemm_f16
    [ "$dt" = bf16 ] && mma=$mmabf && gemm=$gemm_bf16
    [ "$mu" = true ] || mma=$fma32 # simt: its products run on the f32 FMA units
    awk -v kind="$kind" -v label="$label" -v dt="$dt" -v algo="$algo" -v be="$be" -v ms="$ms" \
        -v fu="$fu" -v fx="$fx" -v by="$by" -v kern="${kern:-?}" -v wc="$wc" -v mma="$mma" \
        -v gemm="$gemm" -v copy="$copybw" 'function pct(x, c) { return c > 0 ? sprintf("%5.1f%%", 100 * x / c) : "    -" }
        BEGIN {
            t = ms * 1e-3
            k = kern (wc == "true" ? "" : "*")
            if (kind == "prefill") {
                tu = fu / t * 1e-12; tx = fx / t * 1e-12
                printf "  %-26s %-4s %-7s %-6s %-5s %9.3f %8.1f %8.1f %7s %7s\n", label, dt, algo, be,
                       k, ms, tu, tx, pct(tx * 1e3, mma), pct(tx * 1e3, gemm)
            } else {
                gb = by / t * 1e-9
                printf "  %-26s %-4s %-7s %-6s %-5s %9.3f %8.1f %7s\n", label, dt, algo, be, k, ms,
                       gb, pct(gb, copy)
            }
        }' >>"$table"
}
say "benchmark"
for dt in f16 bf16; do
    for s in 1024 4096 16384; do
        reps=10
        [ $s = 16384 ] && reps=4
        for hd in 64 128; do
            for causal in 0 1; do
                c=()
                [ $causal = 1 ] && c=(--causal)
                bench prefill "prefill-${s}-hd${hd}$([ $causal = 1 ] && echo -causal)" $dt flash $reps cuda \
                    --batch 1 --heads 32 --kv-heads 8 --sq $s --sk $s --head-dim $hd "${c[@]}"
            done
        done
    done
    for sk in 8192 32768; do
        for algo in splitkv flash; do
            bench decode "decode-b8-kv${sk}" $dt $algo 20 cuda --batch 8 --heads 32 --kv-heads 8 \
                --sq 1 --sk $sk --head-dim 128
        done
    done
done
# Serving decode: a paged cache (page 16) and 8-bit caches, against the f16 rows above.
for kv in page16 fp8e4m3 q8_0; do
    opt=(--kv-dtype "$kv")
    [ $kv = page16 ] && opt=(--page-size 16)
    bench decode "decode-b8-kv32768-$kv" f16 splitkv 20 cuda --batch 8 --heads 32 --kv-heads 8 \
        --sq 1 --sk 32768 --head-dim 128 "${opt[@]}"
done

# ---- 6. checks against the reference -----------------------------------------
say "checks against the reference"
CHECKS="$OUT_DIR/checks.txt"
: >"$CHECKS"
check() { # label backend options...
    local label=$1 be=$2 t
    shift 2
    local log="$OUT_DIR/check-$be-$label.log"
    t=$(budget 40)
    if [ "$t" = 0 ]; then
        printf '  %-36s not run (deadline)\n' "$label" >>"$CHECKS"
        not_run "check $label"
        return
    fi
    timeout -k 5 "$t" "$XATTN" run --backend "$be" --reps 2 --json "$log.json" "$@" >"$log" 2>&1
    local rc=$? err kern
    err=$(sed -n 's/^error *//p' "$log")
    kern=$(jstr "$log.json" kernel)
    [ -z "$err" ] && err="no result (exit $rc): $(tail -1 "$log" | cut -c1-70)"
    [ $rc -ne 0 ] && failed "check $label"
    printf '  %-36s [%s] %s\n' "$label" "${kern:-?}" "$err" >>"$CHECKS"
}
for dt in f16 bf16; do
    for hd in 64 128; do
        check "prefill-1k-hd$hd-$dt-causal" cuda --algo flash --dtype $dt --batch 1 --heads 8 \
            --kv-heads 2 --sq 1024 --sk 1024 --head-dim $hd --causal
    done
    check "prefill-16k-slice-hd128-$dt-causal" cuda --algo flash --dtype $dt --batch 1 --heads 4 \
        --kv-heads 1 --sq 128 --sk 16384 --head-dim 128 --causal
    check "decode-32k-$dt-splitkv" cuda --algo splitkv --dtype $dt --batch 1 --heads 32 \
        --kv-heads 8 --sq 1 --sk 32768 --head-dim 128
done
check "prefill-1k-f32-simt" cuda --algo flash --dtype f32 --batch 1 --heads 4 --kv-heads 1 \
    --sq 1024 --sk 1024 --head-dim 128 --causal
check "naive-1k-f16" cuda --algo naive --dtype f16 --batch 1 --heads 4 --kv-heads 1 --sq 1024 \
    --sk 1024 --head-dim 128 --causal
for kv in fp8e4m3 fp8e5m2 q8_0; do
    check "decode-8k-paged16-$kv-splitkv" cuda --algo splitkv --dtype f16 --kv-dtype $kv \
        --batch 4 --heads 32 --kv-heads 8 --sq 1 --sk 8192 --head-dim 128 --page-size 16
done
check "prefill-1k-paged64-f16-causal" cuda --algo flash --dtype f16 --batch 2 --heads 8 \
    --kv-heads 2 --sq 1024 --sk 1024 --head-dim 128 --causal --page-size 64

# ---- 7. the tuner, then the harness ----------------------------------------------
# The tuner stores its winners in this run's cache: the harness's cases of the
# same dtype and head dims then run with them.
say "tune"
TUNE="$OUT_DIR/tune.txt"
: >"$TUNE"
tune() { # label options...
    local label=$1 t
    shift
    t=$(budget 45)
    if [ "$t" = 0 ]; then
        echo "  $label: not run (deadline)" >>"$TUNE"
        not_run "tune $label"
        return
    fi
    timeout -k 5 "$t" "$XATTN" tune --backend cuda --reps 5 "$@" >"$OUT_DIR/tune-$label.log" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && failed "tune $label (exit $rc, tune-$label.log)"
    { echo "  $label (exit $rc):"; sed -n '/^flash\|^splitkv/,$p' "$OUT_DIR/tune-$label.log" |
        sed 's/^/    /'; } >>"$TUNE"
}
tune flash-1k-hd128-f16-causal --algo flash --dtype f16 --batch 1 --heads 8 --kv-heads 2 \
    --sq 1024 --sk 1024 --head-dim 128 --causal
tune splitkv-decode-b8-kv32768-f16 --algo splitkv --dtype f16 --batch 8 --heads 32 --kv-heads 8 \
    --sq 1 --sk 32768 --head-dim 128

# One process per algorithm, side by side: the CPU reference is most of the
# time, and the machine has the cores (the benchmark is done by now).
say "harness"
for algo in naive flash splitkv auto; do
    run_test "harness_cuda_$algo" 150 "$BUILD_DIR/tests/test_backend_ops" -b cuda -a $algo &
done
run_test harness_cuda_simt 150 env XATTN_CUDA_FORCE_SIMT=1 "$BUILD_DIR/tests/test_backend_ops" \
    -b cuda --quick &
wait

# ---- 8. OpenCL on the GPU -------------------------------------------------------
ocl_line="no NVIDIA OpenCL driver (no ICD naming it in /etc/OpenCL/vendors)"
ocl_state=$(grep -m1 '^opencl ' "$OUT_DIR/devices.txt" 2>/dev/null)
if [ -n "$ocl_icd" ] && ! echo "$ocl_state" | grep -Eq '^opencl +[0-9]+ device'; then
    ocl_line="NVIDIA's ICD is there ($ocl_icd), but: ${ocl_state:-the OpenCL backend was not built (configure.log)}"
elif [ -n "$ocl_icd" ]; then
    ocl_dev=$(sed -n '/^opencl/,$p' "$OUT_DIR/devices.txt" | grep -m1 '^  \[0\]' | sed 's/^  \[0\] //')
    ocl_line="NVIDIA OpenCL device 0: $ocl_dev (harness and the opencl rows of the tables)"
    say "OpenCL"
    run_test harness_opencl 90 "$BUILD_DIR/tests/test_backend_ops" -b opencl --quick
    for dt in f16 bf16; do
        bench prefill "prefill-4096-hd128-causal" $dt flash 4 opencl --batch 1 --heads 32 \
            --kv-heads 8 --sq 4096 --sk 4096 --head-dim 128 --causal
        bench decode "decode-b8-kv32768" $dt splitkv 10 opencl --batch 8 --heads 32 --kv-heads 8 \
            --sq 1 --sk 32768 --head-dim 128
    done
fi

# ---- 9. the report --------------------------------------------------------------
{
    echo
    echo "xattn gpu-check: $gpu, driver $driver, CUDA $cuda_version, sm_$CUDA_ARCH"
    echo "  $(date -u +%Y-%m-%dT%H:%MZ), $(elapsed) s of a ${DEADLINE_S} s deadline, $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no git")"
    echo "ceilings (xattn's micro-benchmarks; cuBLAS as the peer):"
    awk -v f="$fma32" -v m16="$mma16" -v mbf="$mmabf" -v r="$readbw" -v c="$copybw" \
        -v g16="$gemm_f16" -v gbf="$gemm_bf16" 'BEGIN {
        printf "  f32 FMA %.1f TFLOP/s; mma.sync f16 %.1f, bf16 %.1f TFLOP/s\n", f / 1e3, m16 / 1e3, mbf / 1e3
        printf "  cuBLAS GEMM 8192^3 f16 %.1f, bf16 %.1f TFLOP/s\n", g16 / 1e3, gbf / 1e3
        printf "  read %.0f GB/s, copy %.0f GB/s\n", r, c }'
    echo "tests:"
    cat "$TESTS"
    echo "prefill, FLASH (B1, 32 q / 8 kv heads; TFLOP/s at the median; causal counts half the"
    echo "pairs as useful; % of the ceiling of the units the kernel used: mma.sync (mma) or the"
    echo "f32 FMA (simt), and of cuBLAS's GEMM; * = work from the tile model, not counted):"
    printf '  %-26s %-4s %-7s %-6s %-5s %9s %8s %8s %7s %7s\n' shape dtype algo back kern "median ms" \
        useful executed "%ceil" "%gemm"
    cat "$PREFILL"
    echo "decode (B8, 1 query token, 32 q / 8 kv heads, D 128; GB/s of the estimated traffic at"
    echo "the median, % of the measured copy bandwidth):"
    printf '  %-26s %-4s %-7s %-6s %-5s %9s %8s %7s\n' shape dtype algo back kern "median ms" "GB/s" "%copy"
    cat "$DECODE"
    echo "checks (xattn run against the fp64 reference; [kernel]; in brackets after the error: the"
    echo "reference rounded to the dtype):"
    cat "$CHECKS"
    echo "xattn tune --backend cuda (median ms of 5 alternating rounds; the winner is checked"
    echo "against the reference and stored; the harness ran with it):"
    cat "$TUNE"
    echo "OpenCL: $ocl_line"
    if [ -s "$SKIPPED" ]; then
        echo "not run or cut (deadline):"
        cat "$SKIPPED"
    fi
    if [ -s "$FAILED" ]; then
        echo "failed:"
        cat "$FAILED"
    fi
    if [ -s "$FAILED" ] || [ -s "$SKIPPED" ]; then
        echo "gpu-check: FAILURES or steps not run (logs in $OUT_DIR)"
    else
        echo "gpu-check: all passed"
    fi
} | tee "$OUT_DIR/report.txt"
[ -s "$FAILED" ] || [ -s "$SKIPPED" ] && exit 1
exit 0
