#!/bin/sh
# Installs the Debian packages that building and testing xattn need, when any
# is missing. Used by bench/quickstart.sh, tests/run-all.sh and .ci/run.
# CUDA is not installed here: the test command's builds compile the CUDA
# backend when nvcc is found (PATH or /usr/local/cuda/bin), and the quick start
# only for a GPU the machine shows (cmake/xattn_cuda.cmake). clang-format-14 and
# cppcheck are the versions the gates (.ci/check-format.sh,
# .ci/check-cppcheck.sh) are written for: Debian 12's. python3-venv: the
# complexity gate's lizard (.ci/check-complexity.sh) and the Python suites
# install from PyPI into virtual environments under build/.
set -eu
PKGS="build-essential cmake ninja-build pkg-config libhwloc-dev libjansson-dev \
clang libclang-rt-14-dev valgrind clang-format-14 cppcheck \
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
openmpi-bin libopenmpi-dev python3-venv"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ] && [ "${CI:-}" != "true" ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "xattn: missing Debian packages:$missing" >&2
    echo "xattn: run as root: apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "xattn: installing Debian packages:${missing:- (none missing; CI refresh)}"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS
