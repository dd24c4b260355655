#!/bin/sh
# The whole test suite: installs what is missing (Debian), then builds and
# tests: the release build (every backend found: CPU, OpenCL on PoCL,
# CUDA compiled and its tests skipped without a GPU; the OpenCL tests run again
# with PoCL compiling for two other CPU models, ctest label pocl-targets) and the
# AddressSanitizer + UndefinedBehaviorSanitizer build (CPU and OpenCL), the
# ThreadSanitizer build of the concurrency tests, then the clang libFuzzer
# build's short fuzz runs (descriptors, command lines, cache and cases files),
# and the Python package's suites in a virtual environment.
# With CI=true, warnings are errors.
set -eu
cd "$(dirname "$0")/.."
.ci/deps.sh
if [ "${CI:-}" = "true" ]; then rel=ci; san=ci-asan; tsan=ci-tsan; else rel=release; san=asan; tsan=tsan; fi
# Kernel program caches shared by both builds within this run (PoCL compiles
# slowly; the second build's tests then reuse the first one's programs).
mkdir -p build
XATTN_CACHE_DIR="$(pwd)/build/xattn-cache"
POCL_CACHE_DIR="$(pwd)/build/pocl-cache"
export XATTN_CACHE_DIR POCL_CACHE_DIR
jobs=$(nproc 2>/dev/null || echo 2)
for preset in "$rel" "$san" "$tsan"; do
    echo "== $preset: configure, build, test"
    cmake --preset "$preset"
    # The ThreadSanitizer preset runs the tests labelled threads only: build just them.
    if [ "$preset" = "$tsan" ]; then target="--target test_concurrency test_affinity"; else target=""; fi
    # shellcheck disable=SC2086
    cmake --build --preset "$preset" -j "$jobs" $target
    ctest --preset "$preset" -j 1
done
echo "== fuzz: configure, build, short fuzz runs"
cmake --preset fuzz
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz -j 1
# The Python package and its pytest suites (python/tests; docs/python.md): a
# virtual environment in build/, the package built and installed by pip, then
# pytest with the release build's tool for the cases-file replays. Where Python
# or PyPI is out of reach the stage says so and is skipped (never in CI).
echo "== python: environment, pip install ./python, pytest suites"
py_rc=0
python/tests/setup-env.sh "$(pwd)/build/py-venv" || py_rc=$?
if [ "$py_rc" -eq 3 ] && [ "${CI:-}" != "true" ]; then
    echo "== python: SKIPPED (see the line above)"
elif [ "$py_rc" -ne 0 ]; then
    exit 1
else
    (cd python && XATTN_TOOL="$(pwd)/../build/$rel/bench/xattn" ../build/py-venv/bin/python -m pytest -q -rs tests)
fi
echo "== all suites passed (presets $rel, $san, $tsan and fuzz; python)"
