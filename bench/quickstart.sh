#!/bin/sh
# The quick start: installs the Debian packages that are missing, builds the
# library and the xattn tool only (CMake preset `quick`, in build/quick: no
# tests, and CUDA only for a GPU this machine shows), then runs the default
# benchmark on every available backend. The first run on a machine measures
# each device's ceilings (seconds each, cached for the next runs) so that the
# table shows shares of them. Extra arguments go to `xattn bench` (try --help).
# The whole test suite is tests/run-all.sh.
set -eu
cd "$(dirname "$0")/.."
now() { date +%s; }
t0=$(now)
echo "quickstart: [1/3] Debian packages (.ci/deps.sh installs only what is missing)"
.ci/deps.sh
t1=$(now)
echo "quickstart: [2/3] configure and build the library and the tool (preset quick, build/quick)"
mkdir -p build
if ! cmake --preset quick >build/quick-configure.log 2>&1; then
    cat build/quick-configure.log >&2
    exit 1
fi
# The configure step's own summary: the backends found, and what was done about CUDA.
sed -n 's/^-- xattn: /  /p; s/^-- xattn backends: /  backends: /p' build/quick-configure.log
if [ -t 1 ]; then
    cmake --build --preset quick # ninja's one status line
elif ! cmake --build --preset quick >build/quick-build.log 2>&1; then
    tail -n 40 build/quick-build.log >&2
    exit 1
fi
t2=$(now)
echo "quickstart: packages $((t1 - t0)) s, configure and build $((t2 - t1)) s"
echo "quickstart: [3/3] build/quick/bench/xattn bench --measure-ceilings${*:+ $*}"
exec build/quick/bench/xattn bench --measure-ceilings "$@"
