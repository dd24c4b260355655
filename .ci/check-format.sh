#!/bin/sh
# The format gate: the C and C++ sources git tracks (*.c *.h *.cpp *.cu *.cuh)
# must be clang-format clean with the repository's .clang-format, as
# clang-format 14 (Debian 12's, which .ci/deps.sh installs) formats them:
# another major version formats some lines differently, so it is refused.
#
#   .ci/check-format.sh [FILE...]      no FILE: every tracked source
#   CLANG_FORMAT=/path/to/clang-format-14 .ci/check-format.sh
#
# Prints each file that is not clean (fix one with `clang-format-14 -i FILE`)
# and exits 1; exits 0 when every file is clean, 2 when clang-format 14 cannot
# be found or this is not a git checkout. Run from anywhere inside the checkout.
set -eu
root=$(git rev-parse --show-toplevel 2>/dev/null) || {
    echo "check-format: not inside a git checkout" >&2
    exit 2
}
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-14 clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
fi
if [ -z "$cf" ] || ! "$cf" --version 2>/dev/null | grep -q 'version 14\.'; then
    echo "check-format: needs clang-format 14 (Debian: apt-get install clang-format-14; or set" \
        "CLANG_FORMAT); found: ${cf:-none}${cf:+ ($("$cf" --version 2>/dev/null | head -n 1))}" >&2
    exit 2
fi
cd "$root"
# (the tracked sources' paths hold no spaces)
# shellcheck disable=SC2046
[ $# -gt 0 ] || set -- $(git ls-files -- '*.c' '*.h' '*.cpp' '*.cu' '*.cuh')
bad=0
total=0
for f in "$@"; do
    [ -f "$f" ] || continue
    total=$((total + 1))
    if ! "$cf" --dry-run -Werror --style=file "$f" >/dev/null 2>&1; then
        echo "not clang-format clean: $f"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "check-format: $bad of $total files are not clang-format clean ($cf -i FILE fixes one)"
    exit 1
fi
echo "check-format: $total files clang-format clean"
