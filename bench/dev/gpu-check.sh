#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend (and the OpenCL one where the machine has
# NVIDIA's OpenCL driver) on a machine with an NVIDIA GPU, in one window:
# DEADLINE_S seconds in all (default 345: under 6 minutes on a 16-core machine
# with one H100/H200, the build included). Steps run in the order of what
# their figures are worth, each time-boxed; the build's box leaves the
# correctness steps their share, and those leave the core benchmark its share:
#
#   1. the GPU (nvidia-smi); without one it says so and exits 2 (--dry-run
#      checks everything but the GPU: see below);
#   2. build, this GPU's architecture only, Release, Ninja when there is one:
#      the xattn tool, test_cuda and test_backend_ops (box: what is left after
#      the shares of steps 3-4); meanwhile nvcc builds bench/dev/gpu_check_gemm.cu
#      (cuBLAS; LD_LIBRARY_PATH gets the folder of libcublas);
#   3. correctness, side by side (box 110 s): test_cuda's six subtests
#      (available, interop, launch_fail, algos, paged, fp8) and the
#      cross-backend harness test_backend_ops -b cuda, one process per
#      algorithm, plus XATTN_CUDA_FORCE_SIMT=1 --quick;
#   4. core figures: the ceilings (xattn devices --measure: f32 FMA, mma.sync
#      f16/bf16, read and copy bandwidth), cuBLAS's bf16/f16 GEMM 8192^3 as
#      the peer, and FLASH prefill 4k D 128 causal (bf16, f16) and SPLITKV
#      decode B 8 on a 32k cache (bf16, f16), Llama-3-8B-like heads (32 q, 8 kv);
#   5. extra figures while time is left (a cell that no longer fits is listed
#      as "not run (time)", which is not a failure): the rest of the prefill
#      grid (1k/4k/16k, D 64/128, causal or not), decode 8k and FLASH decode,
#      serving decode (paged 16, fp8 e4m3, q8_0 caches), checks of those
#      configurations against the reference, `xattn tune`, and with NVIDIA's
#      OpenCL driver the harness on -b opencl --quick and two OpenCL cells;
#   6. one self-contained report: OUT_DIR/report.txt.
#
# Outcomes of a step: passed; FAILED (non-zero exit, or a CUDA test that says
# "skipped" while a GPU is visible, e.g. a driver older than the runtime);
# cut (a core step past its box: a failure); not run (time) (an extra step,
# not a failure); not available (no NVIDIA OpenCL driver: not a failure).
#
# Usage: bench/dev/gpu-check.sh [--dry-run]
#   --dry-run  no GPU needed: checks the tools (nvcc, cmake, cuBLAS and its
#              loader path: builds and links the GEMM), the targets and the
#              test_cuda subtests it runs, every xattn and harness command
#              line against a CPU build (XATTN_TOOL, TEST_BACKEND_OPS, or
#              BUILD_DIR's), the outcome rules on synthetic steps, and the
#              time plan against the deadline; prints the commands and boxes.
# Environment: OUT (the device tool's folder: results go to $OUT/gpu-check),
# else OUT_DIR (default BUILD_DIR/gpu-check); BUILD_DIR (default build-gpu/),
# JOBS (default: all cores), DEADLINE_S, CUDA_ARCH (default: this GPU's, from
# nvidia-smi; else 90), SKIP_BUILD=1 (reuse BUILD_DIR), BUILD_ONLY=1.
# Exit status: 0 all passed, 1 a failure (or a core step cut), 2 no GPU (or
# nothing could be built); --dry-run: 0 when every check passes, else 1.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
DRY=0
for arg in "$@"; do
    case $arg in
    --dry-run) DRY=1 ;;
    -h | --help)
        sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "gpu-check: unknown argument '$arg' (--dry-run, --help)" >&2
        exit 2
        ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
DEADLINE_S=${DEADLINE_S:-345}
if [ -n "${OUT:-}" ]; then
    OUT_DIR=$OUT/gpu-check
else
    OUT_DIR=${OUT_DIR:-$BUILD_DIR/gpu-check}
fi
[ $DRY = 1 ] && OUT_DIR=${DRY_OUT_DIR:-$OUT_DIR-dry}
START=$(date +%s)
RESERVE=6      # seconds kept for the report
SHARE_TESTS=110 # the correctness step (tests/cuda and the harness, side by side)
SHARE_CORE=70   # ceilings, cuBLAS and the four core cells
SHARE_BUILD_MIN=60

elapsed() { echo $(($(date +%s) - START)); }
say() { printf '== %s (%ds)\n' "$*" "$(elapsed)"; }
# budget CAP [KEEP]: seconds a step may take: at most CAP, never into the last
# KEEP seconds before the deadline (default: the report's reserve); 0 when
# fewer than 3 are left.
budget() {
    local keep=${2:-0}
    local left=$((DEADLINE_S - $(elapsed) - RESERVE - keep))
    [ "$left" -gt "$1" ] && left=$1
    [ "$left" -lt 3 ] && left=0
    echo "$left"
}

mkdir -p "$OUT_DIR" || exit 2
FAILED="$OUT_DIR/failed.txt"    # failures and core steps cut
NOTRUN="$OUT_DIR/not-run.txt"   # extra steps the time box left out
NOTAVAIL="$OUT_DIR/not-available.txt"
PLAN="$OUT_DIR/commands.txt"    # every command, its box (the dry run's output)
: >"$FAILED"
: >"$NOTRUN"
: >"$NOTAVAIL"
: >"$PLAN"
failed() { echo "  $1" >>"$FAILED"; }
not_run() { echo "  $1" >>"$NOTRUN"; }

# ---- tools -------------------------------------------------------------------
NVCC=""
for n in "${CUDACXX:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do
    [ -n "$n" ] && [ -x "$n" ] && NVCC=$n && break
done
# cuBLAS: the toolkit's library folder, or the pip wheel's (nvidia/cu*/lib or
# nvidia/cublas/lib) of a Python next to the tree.
cublas_dir=""
if [ -n "$NVCC" ]; then
    tk=$(cd "$(dirname "$(readlink -f "$NVCC")")/.." && pwd)
    for d in "$tk"/lib64 "$tk"/lib "$tk"/targets/*/lib /usr/lib/x86_64-linux-gnu /usr/lib64 \
        "$ROOT"/build/*/lib/python3*/site-packages/nvidia/cu*/lib \
        "$ROOT"/build/*/lib/python3*/site-packages/nvidia/cublas/lib; do
        if ls "$d"/libcublas.so* >/dev/null 2>&1; then
            cublas_dir=$d
            break
        fi
    done
fi
cublas_env=()
[ -n "$cublas_dir" ] && cublas_env=(env "LD_LIBRARY_PATH=$cublas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# ---- running a step ------------------------------------------------------------
# Dry run: a command is validated instead of run (see check_cmdline).
DRY_BAD=0
XATTN_CPU=""
TBO_CPU=""
dry_check() { # ok|FAIL what
    printf '  %-4s %s\n' "$1" "$2"
    [ "$1" = ok ] || DRY_BAD=$((DRY_BAD + 1))
}
# A command line of the xattn tool or the harness, checked against a CPU
# build: usage errors (exit 2 / "unknown option") fail, "no cuda backend"
# is what a CPU build says to a valid command.
check_cmdline() { # label command...
    local label=$1 bin=$2 out rc
    shift 2
    case $bin in
    "$XATTN")
        # devices --measure would measure the CPU: only run and tune are tried.
        [ -z "$XATTN_CPU" ] || [ "$1" = devices ] && return 0
        # No GPU for these (a CUDA build on a GPU machine would run them).
        out=$(CUDA_VISIBLE_DEVICES='' timeout 20 "$XATTN_CPU" "$@" 2>&1)
        rc=$?
        if [ $rc = 2 ] || echo "$out" | grep -q "unknown or ambiguous option\|is not \|expected"; then
            dry_check FAIL "$label: xattn $* -> $(echo "$out" | head -1)"
        fi
        ;;
    "$TBO")
        [ -z "$TBO_CPU" ] && return 0
        out=$(CUDA_VISIBLE_DEVICES='' timeout 20 "$TBO_CPU" "$@" 2>&1)
        rc=$?
        # 77: every case skipped, as it must be without the backend.
        if { [ $rc != 0 ] && [ $rc != 77 ]; } || ! echo "$out" | grep -q '^skipped: '; then
            dry_check FAIL "$label: test_backend_ops $* -> exit $rc: $(echo "$out" | tail -1)"
        fi
        ;;
    esac
    return 0
}
# step NAME CAP KIND LOG command...: runs a command in its box. KIND: core
# (cut = failure) or extra (not run = noted). Outcome in $STEP_RC: 0 passed,
# 1 failed, 2 cut or not run. With a GPU visible, a log that says "skipped:"
# or passes nothing is a failure (tests that found no usable device).
STEP_RC=0
step() {
    local name=$1 cap=$2 kind=$3 log=$4 t rc
    shift 4
    t=$(budget "$cap")
    printf '%-34s box %3ss  %s\n' "$name" "$t" "$*" >>"$PLAN"
    if [ "$t" = 0 ]; then
        if [ "$kind" = core ]; then
            failed "$name: cut (no time left in the window)"
        else
            not_run "$name"
        fi
        STEP_RC=2
        return
    fi
    if [ $DRY = 1 ] && [ -z "${STEP_REAL:-}" ]; then
        check_cmdline "$name" "$@"
        echo "(dry run)" >"$log"
        STEP_RC=0
        return
    fi
    timeout -k 5 "$t" "$@" >"$log" 2>&1
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        if [ "$kind" = core ]; then
            failed "$name: cut after its ${t}s box"
        else
            not_run "$name (cut after ${t}s)"
        fi
        STEP_RC=2
    elif [ $rc != 0 ]; then
        failed "$name: exit $rc ($(basename "$log"))"
        STEP_RC=1
    elif grep -q '^skipped: ' "$log" || tail -1 "$log" | grep -q '^0 passed'; then
        failed "$name: skipped or ran nothing with a GPU visible: $(grep -m1 '^skipped: ' "$log" || tail -1 "$log")"
        STEP_RC=1
    else
        STEP_RC=0
    fi
}

# ---- the dry run's own checks ------------------------------------------------------
if [ $DRY = 1 ]; then
    echo "gpu-check --dry-run: results in $OUT_DIR"
    echo "tools:"
    for tool in cmake timeout awk sed grep; do
        if command -v $tool >/dev/null 2>&1; then dry_check ok "$tool"; else dry_check FAIL "$tool not found"; fi
    done
    if [ -n "$NVCC" ]; then dry_check ok "nvcc: $NVCC"; else dry_check FAIL "nvcc not found (PATH, CUDACXX, /usr/local/cuda/bin)"; fi
    if [ -n "$cublas_dir" ]; then dry_check ok "libcublas in $cublas_dir"; else dry_check FAIL "libcublas not found"; fi
    echo "targets and tests:"
    for tgt in xattn_tool test_cuda test_backend_ops; do
        if grep -rqsE "(add_executable|xattn_add_test_executable)\($tgt( |\)|\$)" "$ROOT"/CMakeLists.txt \
            "$ROOT"/bench "$ROOT"/tests --include=CMakeLists.txt; then
            dry_check ok "CMake target $tgt"
        else
            dry_check FAIL "CMake target $tgt not defined"
        fi
    done
    for t in available interop launch_fail algos paged fp8; do
        if grep -q "!strcmp(argv\[1\], \"$t\")" "$ROOT/tests/cuda/test_cuda.c"; then
            dry_check ok "test_cuda $t"
        else
            dry_check FAIL "test_cuda has no subtest $t"
        fi
    done
    # A CPU build's tool and harness, for the command lines.
    for c in "${XATTN_TOOL:-}" "$BUILD_DIR/bench/xattn" "$ROOT"/build/*/bench/xattn; do
        [ -n "$c" ] && [ -x "$c" ] && XATTN_CPU=$c && break
    done
    for c in "${TEST_BACKEND_OPS:-}" "$BUILD_DIR/tests/test_backend_ops" "$ROOT"/build/*/tests/test_backend_ops; do
        [ -n "$c" ] && [ -x "$c" ] && TBO_CPU=$c && break
    done
    if [ -n "$XATTN_CPU" ]; then dry_check ok "command lines checked with $XATTN_CPU"; else dry_check FAIL "no built xattn (XATTN_TOOL) to check the command lines"; fi
    if [ -n "$TBO_CPU" ]; then dry_check ok "harness lines checked with $TBO_CPU"; else echo "  note no built test_backend_ops (TEST_BACKEND_OPS): harness lines not checked"; fi
    # The outcome rules, on synthetic steps (run for real: STEP_REAL=1).
    echo "outcome rules:"
    sv_failed=$FAILED sv_notrun=$NOTRUN
    FAILED=$OUT_DIR/rules-failed.txt NOTRUN=$OUT_DIR/rules-notrun.txt
    : >"$FAILED"
    : >"$NOTRUN"
    expect() { # want name cap kind command...
        local want=$1
        shift
        STEP_REAL=1 step "$1" "$2" "$3" "$OUT_DIR/rules-$1.log" "${@:4}"
        if [ "$STEP_RC" = "$want" ]; then
            dry_check ok "rule $1 -> $want"
        else
            dry_check FAIL "rule $1: outcome $STEP_RC, expected $want"
        fi
    }
    expect 0 passes 10 core sh -c 'echo "3 passed, 0 failed, 0 skipped"'
    expect 1 skipped-no-device 10 core sh -c 'echo "skipped: no CUDA device (driver too old)"; echo "0 passed, 0 failed, 1 skipped"'
    expect 1 passes-nothing 10 core sh -c 'echo "0 passed, 0 failed, 71 skipped"'
    expect 1 exits-1 10 core sh -c 'echo "1 passed, 1 failed, 0 skipped"; exit 1'
    expect 2 core-cut 3 core sleep 30
    expect 2 extra-cut 3 extra sleep 30
    n_f=$(wc -l <"$FAILED") n_n=$(wc -l <"$NOTRUN")
    if [ "$n_f" = 4 ] && [ "$n_n" = 1 ]; then
        dry_check ok "a core step cut is a failure, an extra step cut is not"
    else
        dry_check FAIL "failure list $n_f lines (want 4), not-run list $n_n (want 1)"
    fi
    FAILED=$sv_failed NOTRUN=$sv_notrun
fi

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
    if [ "${BUILD_ONLY:-0}" != 1 ] && [ $DRY = 0 ]; then
        echo "gpu-check: no NVIDIA GPU visible ($why); nothing was run."
        echo "gpu-check: run it on a machine with a GPU and its driver (--dry-run checks it without one)."
        exit 2
    fi
    gpu="(none: $why)"
    cap=${cap:-90}
fi
CUDA_ARCH=${CUDA_ARCH:-${cap:-90}}
say "GPU: $gpu, driver $driver; CUDA architecture $CUDA_ARCH; window ${DEADLINE_S}s"
if [ -z "$NVCC" ]; then
    echo "gpu-check: nvcc not found (PATH, CUDACXX, /usr/local/cuda/bin): cannot build"
    [ $DRY = 1 ] || exit 2
fi
cuda_version=$("${NVCC:-false}" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')

# NVIDIA's OpenCL driver (an ICD naming libnvidia-opencl): then the OpenCL
# backend is built too, and the ICD loader is shown that driver only, so that
# OpenCL device 0 (the one the harness takes) is the GPU.
ocl_icd=""
for f in /etc/OpenCL/vendors/*.icd; do
    [ -f "$f" ] && grep -qi nvidia "$f" 2>/dev/null && ocl_icd=$f
done
opencl=OFF
if [ -n "$ocl_icd" ]; then
    opencl=AUTO
    mkdir -p "$BUILD_DIR/icd"
    cp "$ocl_icd" "$BUILD_DIR/icd/"
    export OCL_ICD_VENDORS="$BUILD_DIR/icd"
fi

# ---- 2. build ---------------------------------------------------------------
XATTN="$BUILD_DIR/bench/xattn"
TBO="$BUILD_DIR/tests/test_backend_ops"
TEST_CUDA="$BUILD_DIR/tests/cuda/test_cuda"
GEMM="$BUILD_DIR/gpu_check_gemm"
[ $DRY = 1 ] && GEMM="$OUT_DIR/gpu_check_gemm"
mkdir -p "$BUILD_DIR" 2>/dev/null
gemm_pid=""
t=$(budget 60)
if [ -n "$NVCC" ] && [ "$t" -gt 0 ]; then
    # Host code only: a few seconds. The dry run builds it too (it needs no GPU).
    timeout -k 5 "$t" "$NVCC" -O2 -std=c++17 "-arch=sm_$CUDA_ARCH" -o "$GEMM" \
        "$ROOT/bench/dev/gpu_check_gemm.cu" ${cublas_dir:+"-L$cublas_dir"} -lcublas \
        >"$OUT_DIR/gemm-build.log" 2>&1 &
    gemm_pid=$!
fi
# The build's box: what the window has left after the correctness and the
# core figures' shares.
build_box=$((DEADLINE_S - RESERVE - SHARE_TESTS - SHARE_CORE - $(elapsed)))
[ $build_box -lt $SHARE_BUILD_MIN ] && build_box=$SHARE_BUILD_MIN
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    gen=()
    command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
    # A build folder made with another generator cannot be reused.
    if [ $DRY = 0 ] && [ -f "$BUILD_DIR/CMakeCache.txt" ] &&
        ! grep -q "CMAKE_GENERATOR:INTERNAL=${gen[1]:-Unix Makefiles}\$" "$BUILD_DIR/CMakeCache.txt"; then
        rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
    fi
    b0=$(elapsed)
    step configure 60 core "$OUT_DIR/configure.log" cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" \
        -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_BUILD_TYPE=Release -DXATTN_WITH_CUDA=ON \
        -DXATTN_WITH_OPENCL=$opencl -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH"
    if [ $STEP_RC != 0 ]; then
        tail -30 "$OUT_DIR/configure.log"
        echo "gpu-check: configure failed (log: $OUT_DIR/configure.log)"
        exit 2
    fi
    step build $((build_box - ($(elapsed) - b0))) core "$OUT_DIR/build.log" \
        cmake --build "$BUILD_DIR" -j "$JOBS" --target xattn_tool test_cuda test_backend_ops
    if [ $STEP_RC != 0 ]; then
        tail -40 "$OUT_DIR/build.log"
        echo "gpu-check: build failed or passed its box (log: $OUT_DIR/build.log)"
        exit 2
    fi
fi
gemm_ok=0
if [ -n "$gemm_pid" ] && wait "$gemm_pid"; then
    gemm_ok=1
else
    tail -5 "$OUT_DIR/gemm-build.log" 2>/dev/null
    failed "the cuBLAS GEMM did not build (gemm-build.log)"
fi
if [ $DRY = 1 ]; then
    echo "cuBLAS:"
    if [ $gemm_ok = 1 ] && ! "${cublas_env[@]}" ldd "$GEMM" 2>/dev/null | grep -q 'libcublas.*not found'; then
        dry_check ok "the GEMM builds and finds libcublas with LD_LIBRARY_PATH=$cublas_dir"
    else
        dry_check FAIL "the GEMM did not build or link libcublas ($OUT_DIR/gemm-build.log)"
    fi
fi
say "built"
if [ "${BUILD_ONLY:-0}" = 1 ] && [ $DRY = 0 ]; then
    echo "gpu-check: BUILD_ONLY=1: built $XATTN, test_cuda, test_backend_ops$([ $gemm_ok = 1 ] && echo ", $GEMM")"
    exit 0
fi

# ---- 3. correctness, side by side ---------------------------------------------
# The tests' CPU references take most of the time: one process each, on the
# machine's cores; each keeps its outcome in a file.
export XATTN_CACHE_DIR="$BUILD_DIR/xattn-cache" # no tuned or measured state from before
rm -rf "$XATTN_CACHE_DIR"
TESTS="$OUT_DIR/tests.txt"
: >"$TESTS"
say "correctness: tests/cuda and the harness"
test_step() { # name command...: a background correctness step; its line goes to tests.txt
    local name=$1
    shift
    step "$name" $((SHARE_TESTS - 5)) core "$OUT_DIR/$name.log" "$@"
    local what
    case $STEP_RC in
    0) what=$(tail -1 "$OUT_DIR/$name.log") ;;
    1) what="FAILED: $(tail -1 "$OUT_DIR/$name.log")" ;;
    *) what="cut (box)" ;;
    esac
    printf '  %-22s %s\n' "$name" "$what" >"$OUT_DIR/$name.line"
    [ $STEP_RC = 1 ] && grep -E '^FAIL' "$OUT_DIR/$name.log" | head -5 | sed 's/^/      /' >>"$OUT_DIR/$name.line"
}
names=()
for t in available interop launch_fail algos paged fp8; do
    test_step "cuda_$t" "$TEST_CUDA" "$t" &
    names+=("cuda_$t")
done
for algo in naive flash splitkv auto; do
    test_step "harness_cuda_$algo" "$TBO" -b cuda -a $algo &
    names+=("harness_cuda_$algo")
done
test_step harness_cuda_simt env XATTN_CUDA_FORCE_SIMT=1 "$TBO" -b cuda --quick &
names+=(harness_cuda_simt)
wait
for n in "${names[@]}"; do cat "$OUT_DIR/$n.line" >>"$TESTS" 2>/dev/null; done

# ---- 4. core figures, then 5. extra ones ------------------------------------------
say "ceilings"
step ceilings 45 core "$OUT_DIR/devices.txt" "$XATTN" devices --measure --force
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
if [ $gemm_ok = 1 ]; then
    step "cuBLAS GEMM" 25 core "$OUT_DIR/gemm.log" "${cublas_env[@]}" "$GEMM" 8192 10
    if [ $STEP_RC = 0 ] && [ $DRY = 0 ]; then
        gemm_bf16=$(awk '$2 == "bf16" { print $(NF-1) * 1000 }' "$OUT_DIR/gemm.log")
        gemm_f16=$(awk '$2 == "f16" { print $(NF-1) * 1000 }' "$OUT_DIR/gemm.log")
    fi
fi

# jnum FILE FIELD: a number of the last record of an `xattn run --json` file.
jnum() { grep '"seq"' "$1" 2>/dev/null | tail -1 | sed -n "s/.*\"$2\": \\([-0-9.e+]*\\).*/\\1/p"; }
jstr() { grep '"seq"' "$1" 2>/dev/null | tail -1 | sed -n "s/.*\"$2\": \"\\([^\"]*\\)\".*/\\1/p"; }
PREFILL="$OUT_DIR/prefill.txt"
DECODE="$OUT_DIR/decode.txt"
: >"$PREFILL"
: >"$DECODE"
# bench KIND CLASS LABEL DTYPE ALGO REPS BACKEND options...: one cell, a row of the table.
bench() {
    local kind=$1 class=$2 label=$3 dt=$4 algo=$5 reps=$6 be=$7
    shift 7
    local base="$OUT_DIR/bench-$be-$label-$dt-$algo"
    local table=$PREFILL
    [ "$kind" = decode ] && table=$DECODE
    step "bench $be $label $dt $algo" 25 "$class" "$base.log" "$XATTN" run --backend "$be" \
        --no-check --reps "$reps" --algo "$algo" --dtype "$dt" --json "$base.json" "$@"
    case $STEP_RC in
    1)
        printf '  %-26s %-4s %-7s %-6s error: %s\n' "$label" "$dt" "$algo" "$be" \
            "$(tail -1 "$base.log" | cut -c1-70)" >>"$table"
        return
        ;;
    2)
        printf '  %-26s %-4s %-7s %-6s not run (time)\n' "$label" "$dt" "$algo" "$be" >>"$table"
        return
        ;;
    esac
    [ $DRY = 1 ] && printf '  %-26s %-4s %-7s %-6s (dry run)\n' "$label" "$dt" "$algo" "$be" >>"$table" && return
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
    awk -v kind="$kind" -v label="$label" -v dt="$dt" -v algo="$algo" -v be="$be" -v ms="${ms:-0}" \
        -v fu="${fu:-0}" -v fx="${fx:-0}" -v by="${by:-0}" -v kern="${kern:-?}" -v wc="$wc" -v mma="$mma" \
        -v gemm="$gemm" -v copy="$copybw" 'function pct(x, c) { return c > 0 ? sprintf("%5.1f%%", 100 * x / c) : "    -" }
        BEGIN {
            t = ms * 1e-3
            if (t <= 0) t = 1e30
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
LLAMA=(--batch 1 --heads 32 --kv-heads 8)
DEC=(--batch 8 --heads 32 --kv-heads 8 --sq 1 --head-dim 128)
say "core benchmark"
for dt in bf16 f16; do
    bench prefill core "prefill-4096-hd128-causal" $dt flash 8 cuda "${LLAMA[@]}" --sq 4096 \
        --sk 4096 --head-dim 128 --causal
    bench decode core "decode-b8-kv32768" $dt splitkv 20 cuda "${DEC[@]}" --sk 32768
done

# ---- 5. extra figures --------------------------------------------------------------
say "extra figures (while time is left)"
for kv in page16 fp8e4m3 q8_0; do
    opt=(--kv-dtype "$kv")
    [ $kv = page16 ] && opt=(--page-size 16)
    bench decode extra "decode-b8-kv32768-$kv" f16 splitkv 20 cuda "${DEC[@]}" --sk 32768 "${opt[@]}"
done
for dt in bf16 f16; do
    for s in 4096 1024 16384; do
        reps=8
        [ $s = 16384 ] && reps=3
        for hd in 128 64; do
            for causal in 1 0; do
                [ $s = 4096 ] && [ $hd = 128 ] && [ $causal = 1 ] && continue # a core cell
                c=()
                [ $causal = 1 ] && c=(--causal)
                bench prefill extra "prefill-${s}-hd${hd}$([ $causal = 1 ] && echo -causal)" $dt flash \
                    $reps cuda "${LLAMA[@]}" --sq $s --sk $s --head-dim $hd "${c[@]}"
            done
        done
    done
    bench decode extra "decode-b8-kv32768" $dt flash 20 cuda "${DEC[@]}" --sk 32768
    bench decode extra "decode-b8-kv8192" $dt splitkv 20 cuda "${DEC[@]}" --sk 8192
done

CHECKS="$OUT_DIR/checks.txt"
: >"$CHECKS"
check() { # label options...: xattn run against the fp64 reference
    local label=$1
    shift
    local log="$OUT_DIR/check-$label.log"
    step "check $label" 30 extra "$log" "$XATTN" run --backend cuda --reps 2 --json "$log.json" "$@"
    local err kern
    case $STEP_RC in
    2) printf '  %-36s not run (time)\n' "$label" >>"$CHECKS" ;;
    *)
        err=$(sed -n 's/^error *//p' "$log")
        kern=$(jstr "$log.json" kernel)
        [ -z "$err" ] && err="no result: $(tail -1 "$log" | cut -c1-70)"
        printf '  %-36s [%s] %s\n' "$label" "${kern:-?}" "$err" >>"$CHECKS"
        ;;
    esac
}
say "checks against the reference"
for dt in bf16 f16; do
    check "prefill-1k-hd128-$dt-causal" --algo flash --dtype $dt --batch 1 --heads 8 --kv-heads 2 \
        --sq 1024 --sk 1024 --head-dim 128 --causal
    check "decode-32k-$dt-splitkv" --algo splitkv --dtype $dt --batch 1 --heads 32 --kv-heads 8 \
        --sq 1 --sk 32768 --head-dim 128
done
check "prefill-16k-slice-hd128-bf16-causal" --algo flash --dtype bf16 --batch 1 --heads 4 \
    --kv-heads 1 --sq 128 --sk 16384 --head-dim 128 --causal
for kv in fp8e4m3 q8_0; do
    check "decode-8k-paged16-$kv-splitkv" --algo splitkv --dtype f16 --kv-dtype $kv --batch 4 \
        --heads 32 --kv-heads 8 --sq 1 --sk 8192 --head-dim 128 --page-size 16
done
check "prefill-1k-f32-simt" --algo flash --dtype f32 --batch 1 --heads 4 --kv-heads 1 --sq 1024 \
    --sk 1024 --head-dim 128 --causal

say "tune"
TUNE="$OUT_DIR/tune.txt"
: >"$TUNE"
tune() { # label options...
    local label=$1
    shift
    step "tune $label" 40 extra "$OUT_DIR/tune-$label.log" "$XATTN" tune --backend cuda --reps 5 "$@"
    case $STEP_RC in
    2) echo "  $label: not run (time)" >>"$TUNE" ;;
    *) { echo "  $label:"; sed -n '/^flash\|^splitkv/,$p' "$OUT_DIR/tune-$label.log" | sed 's/^/    /'; } >>"$TUNE" ;;
    esac
}
tune flash-1k-hd128-f16-causal --algo flash --dtype f16 --batch 1 --heads 8 --kv-heads 2 \
    --sq 1024 --sk 1024 --head-dim 128 --causal
tune splitkv-decode-b8-kv32768-f16 --algo splitkv --dtype f16 "${DEC[@]}" --sk 32768

# OpenCL on the GPU: "not available" without NVIDIA's driver (not a failure).
ocl_line=""
if [ -z "$ocl_icd" ]; then
    ocl_line="not available: no NVIDIA OpenCL driver (no ICD naming it in /etc/OpenCL/vendors)"
    echo "  OpenCL: no NVIDIA OpenCL driver" >>"$NOTAVAIL"
else
    ocl_state=$(grep -m1 '^opencl ' "$OUT_DIR/devices.txt" 2>/dev/null)
    if [ $DRY = 0 ] && ! echo "$ocl_state" | grep -Eq '^opencl +[0-9]+ device'; then
        ocl_line="FAILED: NVIDIA's ICD is there ($ocl_icd), but: ${ocl_state:-the OpenCL backend was not built (configure.log)}"
        failed "OpenCL: driver present, backend unusable"
    else
        ocl_line="NVIDIA OpenCL: $ocl_icd (harness and the opencl rows of the tables)"
        say "OpenCL"
        step harness_opencl 60 extra "$OUT_DIR/harness_opencl.log" "$TBO" -b opencl --quick
        printf '  %-22s %s\n' harness_opencl "$(tail -1 "$OUT_DIR/harness_opencl.log")" >>"$TESTS"
        bench prefill extra "prefill-4096-hd128-causal" bf16 flash 4 opencl "${LLAMA[@]}" --sq 4096 \
            --sk 4096 --head-dim 128 --causal
        bench decode extra "decode-b8-kv32768" bf16 splitkv 10 opencl "${DEC[@]}" --sk 32768
    fi
fi

# ---- 6. the report --------------------------------------------------------------
{
    echo
    echo "xattn gpu-check$([ $DRY = 1 ] && echo " --dry-run"): $gpu, driver $driver, CUDA ${cuda_version:-?}, sm_$CUDA_ARCH"
    echo "  $(date -u +%Y-%m-%dT%H:%MZ), $(elapsed) s of a ${DEADLINE_S} s window, $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no git")"
    echo "ceilings (xattn's micro-benchmarks, wall-clock of CUDA events; cuBLAS as the peer):"
    awk -v f="$fma32" -v m16="$mma16" -v mbf="$mmabf" -v r="$readbw" -v c="$copybw" \
        -v g16="$gemm_f16" -v gbf="$gemm_bf16" 'BEGIN {
        printf "  f32 FMA %.1f TFLOP/s; mma.sync f16 %.1f, bf16 %.1f TFLOP/s\n", f / 1e3, m16 / 1e3, mbf / 1e3
        printf "  cuBLAS GEMM 8192^3 (best of 10) f16 %.1f, bf16 %.1f TFLOP/s\n", g16 / 1e3, gbf / 1e3
        printf "  read %.0f GB/s, copy %.0f GB/s\n", r, c }'
    echo "tests (tests/cuda and the harness against the double reference):"
    cat "$TESTS"
    echo "prefill, FLASH (B1, 32 q / 8 kv heads; TFLOP/s at the median of the reps, CUDA events;"
    echo "causal counts half the pairs as useful; % of the ceiling of the units the kernel used:"
    echo "mma.sync (mma) or the f32 FMA (simt), and of cuBLAS's GEMM; * = work from the tile model):"
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
    echo "xattn tune --backend cuda (median ms of 5 alternating rounds; the winner is stored):"
    cat "$TUNE"
    echo "OpenCL: $ocl_line"
    if [ -s "$NOTRUN" ]; then
        echo "not run (time box; not failures):"
        cat "$NOTRUN"
    fi
    if [ -s "$FAILED" ]; then
        echo "failed:"
        cat "$FAILED"
    fi
    if [ -s "$FAILED" ]; then
        echo "gpu-check: FAILURES (logs in $OUT_DIR)"
    elif [ $DRY = 1 ]; then
        echo "gpu-check: dry run: the commands above would run (commands.txt: each with its box)"
    else
        echo "gpu-check: all passed"
    fi
} | tee "$OUT_DIR/report.txt"
if [ $DRY = 1 ]; then
    # The time plan: the core steps' boxes must fit the window with the build's minimum.
    core=$((SHARE_BUILD_MIN + SHARE_TESTS + SHARE_CORE + RESERVE))
    echo "time plan: build >= ${SHARE_BUILD_MIN}s (the window's rest), correctness ${SHARE_TESTS}s, core figures ${SHARE_CORE}s, report ${RESERVE}s = ${core}s of ${DEADLINE_S}s"
    if [ $core -le "$DEADLINE_S" ] && [ "$DEADLINE_S" -le 350 ]; then
        dry_check ok "the core steps fit the window; the window (plus 10 s of kill grace) fits 6 minutes"
    else
        dry_check FAIL "the time plan: ${core}s of core steps, window ${DEADLINE_S}s (6 minutes = 360)"
    fi
    n=$(wc -l <"$PLAN")
    if [ "$n" -gt 20 ]; then dry_check ok "$n commands planned (commands.txt)"; else dry_check FAIL "only $n commands planned"; fi
    echo "gpu-check --dry-run: $DRY_BAD check(s) failed"
    [ $DRY_BAD = 0 ] && exit 0
    exit 1
fi
[ -s "$FAILED" ] && exit 1
exit 0
