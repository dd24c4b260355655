#!/usr/bin/env bash
# How long `xattn compare` takes on two large result files: a benchmark, not a
# test (tests/tool checks the verdicts on the same kind of files, untimed).
# Writes two generated files of N cells each (default 40000; cell i of B is
# 2x slower, 2x faster, the same, or another case, by i mod 4), then times
# compare on them with each binary given, alternating the binaries ROUNDS
# times, and prints each run's seconds and the median per binary.
#
#   bench/dev/compare_scale.sh [-n CELLS] [-r ROUNDS] XATTN [XATTN2 ...]
#
# Exit status 2 for bad usage, 1 when compare fails or its summary is wrong.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

cells=40000
rounds=3
while getopts "n:r:h" opt; do
    case $opt in
        n) cells=$OPTARG ;;
        r) rounds=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [[ $# -lt 1 ]] || ! [[ $cells =~ ^[1-9][0-9]*$ ]] || ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    usage >&2
    exit 2
fi
for x in "$@"; do
    if [[ ! -x $x ]]; then
        echo "compare_scale.sh: $x is not an executable" >&2
        exit 2
    fi
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen() { # which
    awk -v n="$cells" -v w="$1" 'BEGIN {
        printf "{\"schema\": \"xattn.bench/1\", \"created_utc\": \"generated\", "
        printf "\"host\": {\"hostname\": \"gen\"}, \"devices\": [], \"results\": ["
        for (i = 0; i < n; i++) {
            t = 1; sfx = ""
            if (w == "b") { m = i % 4; t = m == 0 ? 2 : m == 1 ? 0.5 : 1; if (m == 3) sfx = " b" }
            printf "%s\n{\"backend\": \"cpu\", \"device\": 0, \"algo\": \"flash\", ", i ? "," : ""
            printf "\"case\": \"B1 H8/8 Sq%d Sk%d D64 f32%s\", \"threads\": 2, ", i, i, sfx
            printf "\"status\": \"ok\", \"median_ms\": %g, \"min_ms\": %g, \"p90_ms\": %g, ", t, t, t
            printf "\"spread\": 0}"
        }
        print "\n]}"
    }'
}
gen a >"$dir/a.json"
gen b >"$dir/b.json"
q=$((cells / 4))
want="B vs A: $((3 * q)) matched: $q faster, $q slower, $q within noise"

declare -A times
for ((r = 1; r <= rounds; r++)); do
    for x in "$@"; do
        t0=$(date +%s.%N)
        if ! "$x" compare "$dir/a.json" "$dir/b.json" >"$dir/out.txt" 2>&1; then
            echo "compare_scale.sh: $x compare failed:" >&2
            tail -3 "$dir/out.txt" >&2
            exit 1
        fi
        t1=$(date +%s.%N)
        if ! grep -q "$want" "$dir/out.txt"; then
            echo "compare_scale.sh: $x: the summary is not '$want':" >&2
            grep '^B vs A:' "$dir/out.txt" >&2 || true
            exit 1
        fi
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        printf 'round %d  %s  %s s\n' "$r" "$x" "$s"
        times[$x]+="$s "
    done
done
for x in "$@"; do
    # shellcheck disable=SC2086
    m=$(printf '%s\n' ${times[$x]} | sort -g | awk '{ v[NR] = $1 } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    printf 'median over %d rounds, %d cells a file: %s  %s s\n' "$rounds" "$cells" "$x" "$m"
done
