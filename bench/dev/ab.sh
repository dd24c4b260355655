#!/usr/bin/env bash
# Alternating A/B of two builds of the xattn tool on one case, for a machine
# whose speed drifts from minute to minute (a shared VM): the two binaries run
# one after the other, ROUNDS times, and each pair gives a ratio new/old of the
# run's median time (or its minimum). The median of the ratios is what to
# quote; a ratio between two runs minutes apart is not (docs/benchmarks-cpu.md).
#
#   bench/ab.sh [-n ROUNDS] [-s median|min] OLD NEW [xattn run options...]
#
# OLD and NEW are xattn binaries (e.g. a worktree's build/release/bench/xattn);
# the options after them go to `xattn run`, which is given --no-check.
# Prints one line per pair, then the medians. Exit status 2 for bad usage,
# 1 when a run fails.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

rounds=5
stat=median
while getopts "n:s:h" opt; do
    case $opt in
        n) rounds=$OPTARG ;;
        s) stat=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [[ $# -lt 2 ]]; then
    usage >&2
    exit 2
fi
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "ab.sh: -n wants a positive count, not '$rounds'" >&2
    exit 2
fi
if [[ $stat != median && $stat != min ]]; then
    echo "ab.sh: -s wants median or min, not '$stat'" >&2
    exit 2
fi
old=$1 new=$2
shift 2
for x in "$old" "$new"; do
    if [[ ! -x $x ]]; then
        echo "ab.sh: $x is not an executable" >&2
        exit 2
    fi
done

# The time line of `xattn run`: "time     median M ms, min N ms, p90 ...".
one() {
    local out
    if ! out=$("$1" run --no-check "${@:2}" 2>&1); then
        echo "ab.sh: $1 run ${*:2} failed:" >&2
        echo "$out" | tail -5 >&2
        return 1
    fi
    echo "$out" | awk -v s="$stat" '/^time / {
        for (i = 1; i < NF; i++) if ($i == s) { print $(i + 1); exit } }'
}

ratios=()
olds=()
news=()
for ((r = 1; r <= rounds; r++)); do
    a=$(one "$old" "$@")
    b=$(one "$new" "$@")
    if [[ -z $a || -z $b ]]; then
        echo "ab.sh: no time line in the output of xattn run" >&2
        exit 1
    fi
    q=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')
    printf 'pair %2d  old %9.4f ms  new %9.4f ms  new/old %s\n' "$r" "$a" "$b" "$q"
    olds+=("$a")
    news+=("$b")
    ratios+=("$q")
done

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf 'medians over %d pairs (%s of each run): old %s ms, new %s ms, new/old %s\n' \
    "$rounds" "$stat" "$(median "${olds[@]}")" "$(median "${news[@]}")" "$(median "${ratios[@]}")"
