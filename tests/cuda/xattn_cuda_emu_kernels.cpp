/* Every kernel source of kernels_cuda/, compiled as C++ for the CPU emulator
 * (xattn_cuda_emu.h): the same code that nvcc builds for the GPU. Not the
 * event-timed wrappers of xattn_cuda_ceilings.cu (the emulator has no clock);
 * the tensor-core ceiling's kernel is here. */
#include "xattn_cuda_emu.h"

#include "xattn_cuda_ceil_mma.cu"
#include "xattn_cuda_flash.cu"
#include "xattn_cuda_flash_mma_d128.cu"
#include "xattn_cuda_flash_mma_d256.cu"
#include "xattn_cuda_flash_mma_d64.cu"
#include "xattn_cuda_flash_mma_d80.cu"
#include "xattn_cuda_flash_mma_d96.cu"
#include "xattn_cuda_flash_simt.cu"
#include "xattn_cuda_naive.cu"
