#!/bin/sh
# test_symbols: the names the libraries give the linker (ctest "symbols", label abi).
#
#   test_symbols.sh INCLUDE_DIR LIBXATTN_SO LIBXATTN_A HEADERS [LIBXATTN_MPI_SO]
#
# HEADERS: the public headers (space-separated, in INCLUDE_DIR) whose XATTN_API
# functions this build must export (xattn_opencl.h / xattn_cuda.h only when
# that backend is compiled). Fails when
# - libxattn.so (or libxattn_mpi.so) exports a name that does not start with
#   xattn_ (libxattn_mpi.so: xattn_mpi_), or one that no public header declares;
# - a function a public header declares XATTN_API is not exported;
# - libxattn.a has a global name that does not start with xattn_ (C++ names
#   of the CUDA objects are read through their mangling: _Z<n>xattn_...;
#   AddressSanitizer's __odr_asan.xattn_... markers name an xattn_ global);
# - an internal global of libxattn.a uses the public prefix xattn_ (not xattn__)
#   and is not in the PUBLIC_PREFIX_INTERNALS list below (or the CUDA family
#   exempt there), or one listed there is gone (the list only shrinks: rename
#   to xattn__ and drop the line).
# Exits 77 (skipped) when nm is not installed.
set -eu
if [ $# -lt 4 ]; then
    echo "usage: $0 INCLUDE_DIR LIBXATTN_SO LIBXATTN_A HEADERS [LIBXATTN_MPI_SO]" >&2
    exit 2
fi
inc=$1 so=$2 ar=$3 headers=$4 mpi=${5:-}
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm (binutils) not found"; exit 77; }
for f in "$so" "$ar" $mpi; do
    [ -f "$f" ] || { echo "FAIL $f: not built (build the library targets first)"; exit 1; }
done

# Internal globals still named with the public prefix: the CPU kernels' entry
# points that the tools under bench/dev and test_cpu_uk also call, and the host
# I/O shared with MPI. To be renamed xattn__cpu_* / xattn__host_box_io.
PUBLIC_PREFIX_INTERNALS="
xattn_cpu_l1d_bytes xattn_cpu_simd_detect xattn_cpu_simd_name
xattn_host_box_io
"
# The CUDA kernels' host entry points (kernels_cuda, built only where nvcc is
# found) are all named xattn_cuda_*: exempt as a family until they are renamed
# xattn__cuda_* (the public xattn_cuda_* functions are exported and declared in
# xattn_cuda.h, which the checks above cover).
PUBLIC_PREFIX_FAMILIES='^xattn_cuda_'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 passed=0
check() { # NAME FILE-OF-OFFENDERS MESSAGE
    if [ -s "$2" ]; then
        sed "s/^/FAIL $1: $3: /" "$2"
        fail=$((fail + 1))
    else
        echo "ok   $1"
        passed=$((passed + 1))
    fi
}

# The XATTN_API functions of the given headers (declarations may span lines).
for h in $headers; do
    grep -v '^[[:space:]]*#' "$inc/$h" | tr '\n' ' ' | grep -o 'XATTN_API[^;{]*' |
        sed 's/(.*//' | grep -o '[A-Za-z0-9_]*[[:space:]]*$' | tr -d ' '
done | sort -u >"$tmp/declared"
[ -s "$tmp/declared" ] || { echo "FAIL no XATTN_API declaration found in $headers"; exit 1; }
# Every name any public header declares (for "exported but undeclared").
cat "$inc"/*.h | grep -o '\bxattn_[A-Za-z0-9_]*' | sort -u >"$tmp/mentioned"

exports() { nm -D --defined-only "$1" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' | sort -u; }

exports "$so" >"$tmp/so"
[ -s "$tmp/so" ] || { echo "FAIL $so exports nothing (or nm cannot read it)"; exit 1; }
grep -v '^xattn_' "$tmp/so" >"$tmp/x" || true
check "libxattn.so: exports start with xattn_" "$tmp/x" "exported"
comm -23 "$tmp/so" "$tmp/mentioned" >"$tmp/x"
check "libxattn.so: exports are declared in a public header" "$tmp/x" "exported, in no header"
comm -23 "$tmp/declared" "$tmp/so" >"$tmp/x"
check "libxattn.so: every XATTN_API function of $headers is exported" "$tmp/x" "not exported"

nm -g --defined-only "$ar" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/ar"
[ -s "$tmp/ar" ] || { echo "FAIL $ar has no global symbol (or nm cannot read it)"; exit 1; }
grep -v -e '^xattn_' -e '^_Z[0-9]*xattn_' -e '^_Z[0-9]*__device_stub__Z[0-9]*xattn_' \
    -e '^__odr_asan[._]xattn_' "$tmp/ar" >"$tmp/x" || true
check "libxattn.a: globals start with xattn_" "$tmp/x" "global"
echo "$PUBLIC_PREFIX_INTERNALS" | tr ' ' '\n' | grep . | sort -u >"$tmp/allowed"
grep '^xattn_' "$tmp/ar" | grep -v '^xattn__' | comm -23 - "$tmp/so" |
    grep -v -e "$PUBLIC_PREFIX_FAMILIES" >"$tmp/internal" || true
comm -23 "$tmp/internal" "$tmp/allowed" >"$tmp/x"
check "libxattn.a: internal globals are named xattn__" "$tmp/x" "internal with the public prefix"
comm -13 "$tmp/internal" "$tmp/allowed" >"$tmp/x"
check "test_symbols.sh: PUBLIC_PREFIX_INTERNALS lists only current names" "$tmp/x" \
    "renamed or gone: drop it from the list"

if [ -n "$mpi" ]; then
    exports "$mpi" >"$tmp/mpi"
    grep -v '^xattn_mpi_' "$tmp/mpi" >"$tmp/x" || true
    check "libxattn_mpi.so: exports start with xattn_mpi_" "$tmp/x" "exported"
    grep -v '^[[:space:]]*#' "$inc/xattn_mpi.h" | tr '\n' ' ' | grep -o 'XATTN_API[^;{]*' |
        sed 's/(.*//' | grep -o '[A-Za-z0-9_]*[[:space:]]*$' | tr -d ' ' | sort -u |
        comm -23 - "$tmp/mpi" >"$tmp/x"
    check "libxattn_mpi.so: every XATTN_API function of xattn_mpi.h is exported" "$tmp/x" \
        "not exported"
fi
echo "$passed passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
