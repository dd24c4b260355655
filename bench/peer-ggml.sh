#!/usr/bin/env bash
# xattn's CPU decode against ggml's CPU flash_attn_ext (the kernel llama.cpp
# runs with flash attention on), on the same shapes, threads and K/V dtypes,
# the two run in turns cell by cell (a benchmark, never a test: nothing in
# tests/ or .ci/ needs ggml).
#
#   bench/peer-ggml.sh [-x XATTN] [-r ROUNDS] [-n REPS] [-t THREADS]
#                      [-s SK_LIST] [-d DTYPES] [-l LAYOUTS] [-C CACHE_DIR] [-P] [-k]
#
#   -x XATTN     the xattn tool (default build/release/bench/xattn); its
#                libxattn.so and this repository's include/ build the peer
#   -r ROUNDS    rounds of every cell, each round xattn and ggml back to
#                back, alternating which goes first (default 5)
#   -n REPS      timed calls per run, after one untimed call (default 5)
#   -t THREADS   threads for both (default 2; OMP_NUM_THREADS is set too)
#   -s SK_LIST   key lengths, comma list (default 8192,32768)
#   -d DTYPES    K/V dtypes, comma list of f16, q8_0, fp8e4m3, fp8e5m2, f32
#                (default f16,q8_0,fp8e4m3; ggml has no fp8 cache, so fp8
#                cells run xattn alone)
#   -l LAYOUTS   bshd (a token's heads together: llama.cpp's cache), bhsd
#                (each head's keys together), comma list (default bshd,bhsd)
#   -C DIR       where ggml is fetched and built, outside the repository
#                (default ${XDG_CACHE_HOME:-$HOME/.cache}/xattn-peers)
#   -P           ggml's tensors on transparent huge pages (madvise), as
#                xattn's allocator asks; ggml's own allocator (llama.cpp's
#                cache) does not, so by default it gets what the system's
#                THP setting gives (4 KiB pages where it is "madvise")
#   -k           skip the check of both outputs against xattn's reference
#
# The shape is llama-3-8B decode: B 8, 32 query / 8 KV heads, D 128, Sq 1,
# q and o f32 (as ggml takes them).
#
# ggml comes from the llama-cpp-python sdist on PyPI (it vendors llama.cpp;
# pip download, checked against a pinned SHA-256), built once with cmake
# (Release, GGML_NATIVE, CPU backend only: no llama, tests or examples).
# bench/peers/ggml_fa.c is compiled against it and libxattn each time.
# Prints the machine and its load, the check, then one table: per cell the
# median over the rounds of each side's median time, the median of the
# rounds' ratios xattn/ggml with their range, GB/s of K/V read once, and
# for a non-f16 dtype xattn's time over its own f16 time in the same round.
# Exit status 2 for bad usage, 1 when a step fails.
set -euo pipefail

LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

repo=$(cd "$(dirname "$0")/.." && pwd)
xattn=$repo/build/release/bench/xattn
rounds=5
reps=5
threads=2
sks=8192,32768
dtypes=f16,q8_0,fp8e4m3
layouts=bshd,bhsd
cache=${XDG_CACHE_HOME:-$HOME/.cache}/xattn-peers
do_check=1
ggml_thp=()
pages="as ggml allocates them"
while getopts "x:r:n:t:s:d:l:C:Pkh" opt; do
    case $opt in
        x) xattn=$OPTARG ;;
        r) rounds=$OPTARG ;;
        n) reps=$OPTARG ;;
        t) threads=$OPTARG ;;
        s) sks=$OPTARG ;;
        d) dtypes=$OPTARG ;;
        l) layouts=$OPTARG ;;
        C) cache=$OPTARG ;;
        P)
            ggml_thp=(--thp)
            pages="on huge pages (-P)"
            ;;
        k) do_check=0 ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [[ $# -gt 0 ]]; then
    echo "peer-ggml.sh: unexpected argument '$1'" >&2
    exit 2
fi
for pair in "-r:$rounds" "-n:$reps" "-t:$threads"; do
    if ! [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]]; then
        echo "peer-ggml.sh: ${pair%%:*} wants a positive count, not '${pair#*:}'" >&2
        exit 2
    fi
done
IFS=, read -r -a sk_list <<<"$sks"
IFS=, read -r -a dt_list <<<"$dtypes"
IFS=, read -r -a lay_list <<<"$layouts"
for lay in "${lay_list[@]}"; do
    if [[ $lay != bshd && $lay != bhsd ]]; then
        echo "peer-ggml.sh: -l wants bshd or bhsd, not '$lay'" >&2
        exit 2
    fi
done
for sk in "${sk_list[@]}"; do
    if ! [[ $sk =~ ^[1-9][0-9]*$ ]]; then
        echo "peer-ggml.sh: -s wants positive key lengths, not '$sk'" >&2
        exit 2
    fi
done
for dt in "${dt_list[@]}"; do
    case $dt in
        f16 | q8_0 | fp8e4m3 | fp8e5m2 | f32) ;;
        *)
            echo "peer-ggml.sh: -d wants f16, q8_0, fp8e4m3, fp8e5m2 or f32, not '$dt'" >&2
            exit 2
            ;;
    esac
done
if [[ ! -x $xattn ]]; then
    echo "peer-ggml.sh: $xattn is not an executable (build xattn first, or give -x)" >&2
    exit 2
fi
xattn=$(cd "$(dirname "$xattn")" && pwd)/$(basename "$xattn")
xlib=$(dirname "$(dirname "$xattn")")
if [[ ! -e $xlib/libxattn.so ]]; then
    echo "peer-ggml.sh: no libxattn.so in $xlib (the build folder of $xattn)" >&2
    exit 2
fi
case $cache in
    "$repo" | "$repo"/*)
        echo "peer-ggml.sh: -C $cache is inside the repository; give a folder outside it" >&2
        exit 2
        ;;
esac

# ---- ggml: fetch the sdist, build the CPU library once ----
mkdir -p "$cache"
sdist=$cache/llama_cpp_python-$LCP_VERSION.tar.gz
src=$cache/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp
gbuild=$cache/ggml-build-$LCP_VERSION
glib=$gbuild/ggml/src
if [[ ! -f $sdist ]]; then
    echo "fetching llama-cpp-python $LCP_VERSION (sdist, about 75 MB) into $cache" >&2
    python3 -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$LCP_VERSION" -d "$cache" >&2
fi
if ! echo "$LCP_SHA256  $sdist" | sha256sum -c --status; then
    echo "peer-ggml.sh: $sdist does not have the pinned SHA-256; remove it to fetch again" >&2
    exit 1
fi
if [[ ! -f $src/ggml/include/ggml.h ]]; then
    tar -xzf "$sdist" -C "$cache"
fi
if [[ ! -e $glib/libggml-cpu.so ]]; then
    echo "building ggml's CPU library in $gbuild (minutes)" >&2
    # ggml's own CMakeLists, as the top project, wants a ggml.pc.in that the
    # sdist does not ship; as a subproject it builds no tests or examples.
    mkdir -p "$cache/ggml-wrap"
    cat >"$cache/ggml-wrap/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.14)
project(ggml_peer C CXX ASM)
add_subdirectory(${GGML_SRC} ggml)
EOF
    if ! { cmake -S "$cache/ggml-wrap" -B "$gbuild" -DGGML_SRC="$src/ggml" \
        -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
        -DGGML_CCACHE=OFF -DGGML_BLAS=OFF &&
        cmake --build "$gbuild" -j "$(nproc)"; } >"$gbuild.log" 2>&1; then
        echo "peer-ggml.sh: building ggml failed; the log is $gbuild.log" >&2
        exit 1
    fi
fi
ggml_fa=$cache/ggml_fa
${CC:-cc} -O2 -std=c11 -Wall -Wextra -o "$ggml_fa" "$repo/bench/peers/ggml_fa.c" \
    -I"$src/ggml/include" -I"$repo/include" \
    -L"$glib" -lggml -lggml-base -lggml-cpu -L"$xlib" -lxattn -lm \
    -Wl,-rpath,"$glib" -Wl,-rpath,"$xlib"
llama_commit=$(git -C "$src" rev-parse --short=9 HEAD 2>/dev/null || echo unknown)

# ---- the machine ----
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; threads $threads"
echo "xattn:   $("$xattn" --version 2>&1 | head -1) ($xattn)"
echo "ggml:    $("$ggml_fa" --version) (llama-cpp-python $LCP_VERSION's llama.cpp $llama_commit)"
echo "load at start: $(load)"
# xattn's measured ceilings of this machine (cached after the first time).
echo "xattn's CPU ceilings: $("$xattn" devices --measure 2>/dev/null |
    awk '/^[a-z]/ { cpu = ($1 == "cpu") } cpu && /bandwidth/ { $1 = ""; print; exit }')"
has_q8=0
if "$xattn" run --help 2>&1 | grep -q q8_0; then
    has_q8=1
fi

export OMP_NUM_THREADS=$threads
shape=(--batch 8 --heads 32 --kv-heads 8 --sq 1 --head-dim 128)

# ---- the check: both outputs against xattn's double-precision reference ----
if [[ $do_check == 1 ]]; then
    echo
    echo "check (B2 H8/2 Sq1 Sk1000 D128, the same bytes in both; max abs and rel L2 vs the reference):"
    for lay in "${lay_list[@]}"; do
        for dt in "${dt_list[@]}"; do
            [[ $dt == fp8* ]] && continue
            "$ggml_fa" --check --batch 2 --heads 8 --kv-heads 2 --sq 1 --sk 1000 \
                --head-dim 128 --layout "$lay" --kv-dtype "$dt" --threads "$threads" || exit 1
        done
    done
fi

# ---- the timed cells, in turns ----
xattn_ms() { # sk layout dtype
    local out
    if [[ $3 == q8_0 && $has_q8 == 0 ]]; then
        echo na
        return 0
    fi
    out=$("$xattn" run --backend cpu --threads "$threads" "${shape[@]}" --sk "$1" \
        --layout "$2" --dtype f32 --kv-dtype "$3" --no-check --warmup 1 --reps "$reps" 2>&1) || {
        echo "peer-ggml.sh: xattn run failed (Sk $1, $2, $3):" >&2
        echo "$out" | tail -5 >&2
        return 1
    }
    echo "$out" | awk '/^time / { print $3; exit }'
}
ggml_ms() { # sk layout dtype
    local out
    if [[ $3 == fp8* ]]; then
        echo na
        return 0
    fi
    out=$("$ggml_fa" "${shape[@]}" --sk "$1" --layout "$2" --kv-dtype "$3" \
        --threads "$threads" --warmup 1 --reps "$reps" "${ggml_thp[@]}") || {
        echo "peer-ggml.sh: ggml_fa failed (Sk $1, $2, $3)" >&2
        return 1
    }
    echo "$out" | sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p'
}

cells=()
for sk in "${sk_list[@]}"; do
    for lay in "${lay_list[@]}"; do
        for dt in "${dt_list[@]}"; do
            cells+=("$sk,$lay,$dt")
        done
    done
done
declare -A X G
for ((r = 1; r <= rounds; r++)); do
    echo "round $r/$rounds (load $(load))" >&2
    for c in "${cells[@]}"; do
        IFS=, read -r sk lay dt <<<"$c"
        if ((r % 2)); then
            X[$c,$r]=$(xattn_ms "$sk" "$lay" "$dt")
            G[$c,$r]=$(ggml_ms "$sk" "$lay" "$dt")
        else
            G[$c,$r]=$(ggml_ms "$sk" "$lay" "$dt")
            X[$c,$r]=$(xattn_ms "$sk" "$lay" "$dt")
        fi
    done
done

# median of its arguments ("na" where none is a number), then min and max
stats() {
    printf '%s\n' "$@" | { grep -v '^na$' || true; } | sort -g | awk '{ v[++n] = $1 }
        END {
            if (!n) { print "na na na"; exit }
            m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            print m, v[1], v[n]
        }'
}
ratios() { # A B: per round A/B, "na" where either is
    local -n a=$1 b=$2
    local key=$3 r
    for ((r = 1; r <= rounds; r++)); do
        awk -v x="${a[$key,$r]}" -v y="${b[$key,$r]}" \
            'BEGIN { if (x == "na" || y == "na" || y == 0) print "na"; else print x / y }'
    done
}
gbps() { # sk dtype ms: K/V bytes once over the time
    awk -v sk="$1" -v dt="$2" -v ms="$3" 'BEGIN {
        if (ms == "na") { print "-"; exit }
        per = dt == "f32" ? 4 : dt == "f16" ? 2 : dt == "q8_0" ? 34 / 32 : 1
        printf "%.1f", 8 * sk * 8 * (128 + 128) * per / (ms * 1e6) }'
}
fmt_ratio() { # median lo hi
    if [[ $1 == na ]]; then
        echo "-"
    else
        awk -v m="$1" -v l="$2" -v h="$3" 'BEGIN { printf "%.2f (%.2f-%.2f)", m, l, h }'
    fi
}
fmt_ms() { awk -v m="$1" 'BEGIN { if (m == "na") print "-"; else printf "%.1f", m }'; }

echo
echo "load at end: $(load)"
echo
echo "B8 H32/8 Sq1 D128, q/o f32, $threads threads; medians over $rounds rounds of $reps calls each;" \
    "ggml's tensors $pages"
echo
echo "| Sk | layout | K/V | xattn ms | ggml ms | xattn/ggml | xattn GB/s | ggml GB/s | xattn vs its f16 |"
echo "|---|---|---|---|---|---|---|---|---|"
declare -A XF # xattn's f16 time of the same round, under each other dtype's key
for c in "${cells[@]}"; do
    IFS=, read -r sk lay dt <<<"$c"
    xs=()
    gs=()
    for ((r = 1; r <= rounds; r++)); do
        xs+=("${X[$c,$r]}")
        gs+=("${G[$c,$r]}")
    done
    read -r xm _ _ <<<"$(stats "${xs[@]}")"
    read -r gm _ _ <<<"$(stats "${gs[@]}")"
    mapfile -t xg < <(ratios X G "$c")
    read -r rm rl rh <<<"$(stats "${xg[@]}")"
    self="-"
    # shellcheck disable=SC2034 # XF is read through ratios' nameref
    if [[ $dt != f16 && -n ${X[$sk,$lay,f16,1]+set} ]]; then
        for ((r = 1; r <= rounds; r++)); do
            XF[$c,$r]=${X[$sk,$lay,f16,$r]}
        done
        mapfile -t xf < <(ratios X XF "$c")
        read -r fm fl fh <<<"$(stats "${xf[@]}")"
        self=$(fmt_ratio "$fm" "$fl" "$fh")
    fi
    echo "| $sk | $lay | $dt | $(fmt_ms "$xm") | $(fmt_ms "$gm") | $(fmt_ratio "$rm" "$rl" "$rh") |" \
        "$(gbps "$sk" "$dt" "$xm") | $(gbps "$sk" "$dt" "$gm") | $self |"
done
