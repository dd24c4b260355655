#!/bin/sh
# pocl_target.sh TEST_OPENCL COMMAND [ARGS...]: runs COMMAND as one of the
# reruns with PoCL compiling the kernels for another CPU model (the caller
# sets POCL_KERNELLIB_NAME and XATTN_TEST_POCL_CPU; tests/opencl/CMakeLists.txt).
# Exit 77 (skipped) when OpenCL device 0 is not PoCL compiling for that model,
# as `TEST_OPENCL devices` finds.
probe=$1
shift
"$probe" devices
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
exec "$@"
