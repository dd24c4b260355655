#!/bin/sh
# The whole test suite: installs what is missing (Debian), then builds and
# tests twice: the release build (every backend found: CPU, OpenCL on PoCL,
# CUDA compiled and its tests skipped without a GPU; the OpenCL tests run again
# with PoCL compiling for two other CPU models, ctest label pocl-targets) and the
# AddressSanitizer + UndefinedBehaviorSanitizer build (CPU and OpenCL), then
# the clang libFuzzer build's short fuzz runs (descriptors and command lines).
# With CI=true, warnings are errors.
set -eu
cd "$(dirname "$0")/.."
.ci/deps.sh
if [ "${CI:-}" = "true" ]; then rel=ci; san=ci-asan; else rel=release; san=asan; fi
# Kernel program caches shared by both builds within this run (PoCL compiles
# slowly; the second build's tests then reuse the first one's programs).
mkdir -p build
XATTN_CACHE_DIR="$(pwd)/build/xattn-cache"
POCL_CACHE_DIR="$(pwd)/build/pocl-cache"
export XATTN_CACHE_DIR POCL_CACHE_DIR
jobs=$(nproc 2>/dev/null || echo 2)
for preset in "$rel" "$san"; do
    echo "== $preset: configure, build, test"
    cmake --preset "$preset"
    cmake --build --preset "$preset" -j "$jobs"
    ctest --preset "$preset" -j 1
done
echo "== fuzz: configure, build, short fuzz runs"
cmake --preset fuzz
cmake --build --preset fuzz -j "$jobs"
ctest --preset fuzz -j 1
echo "== all suites passed (presets $rel, $san and fuzz)"
