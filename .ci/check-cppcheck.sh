#!/bin/sh
# The static-analysis gate: cppcheck (Debian 12's 2.10, which .ci/deps.sh
# installs) over the C and C++ sources git tracks, with the checks of its
# classes warning, portability and performance, and the project's
# suppressions (.ci/cppcheck-suppressions.txt: each one a finding that was
# judged and why). Any other finding fails the gate.
#
#   .ci/check-cppcheck.sh [FILE...]     no FILE: every tracked .c and .cpp
#   CPPCHECK=/path/to/cppcheck .ci/check-cppcheck.sh
#
# Prints the findings as FILE:LINE: severity (id): message and exits 1 when
# there is one; exits 0 when there is none, 2 when cppcheck cannot be found or
# this is not a git checkout. Another cppcheck version may find other things:
# it is used, with a warning. A finding that is a false positive is suppressed
# where it stands (a `// cppcheck-suppress id` comment on the line above) or in
# the suppressions file, with the reason.
set -eu
root=$(git rev-parse --show-toplevel 2>/dev/null) || {
    echo "check-cppcheck: not inside a git checkout" >&2
    exit 2
}
cc=${CPPCHECK:-cppcheck}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "check-cppcheck: needs cppcheck (Debian: apt-get install cppcheck; or set CPPCHECK)" >&2
    exit 2
fi
version=$("$cc" --version 2>/dev/null | sed 's/^Cppcheck //')
case $version in
2.10*) ;;
*) echo "check-cppcheck: warning: cppcheck $version, not 2.10 (Debian 12's): its findings may differ" >&2 ;;
esac
cd "$root"
# (the tracked sources' paths hold no spaces)
# shellcheck disable=SC2046
[ $# -gt 0 ] || set -- $(git ls-files -- '*.c' '*.cpp')
supp=""
if [ -f .ci/cppcheck-suppressions.txt ]; then
    supp="--suppressions-list=.ci/cppcheck-suppressions.txt"
fi
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
if "$cc" -q -j "$jobs" --std=c11 --enable=warning,portability,performance --inline-suppr \
    $supp --error-exitcode=1 --template='{file}:{line}: {severity} ({id}): {message}' \
    -I include -I backends -I kernels_common -I kernels_cpu -I bench/tool -I tests "$@"; then
    echo "check-cppcheck: $# files, no finding"
else
    echo "check-cppcheck: findings above (cppcheck $version; suppressions: .ci/cppcheck-suppressions.txt)"
    exit 1
fi
