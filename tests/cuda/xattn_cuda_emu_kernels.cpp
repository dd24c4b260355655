/* Every kernel source of kernels_cuda/, compiled as C++ for the CPU emulator
 * (xattn_cuda_emu.h): the same code that nvcc builds for the GPU. */
#include "xattn_cuda_emu.h"

#include "xattn_cuda_flash.cu"
#include "xattn_cuda_flash_mma_d128.cu"
#include "xattn_cuda_flash_mma_d256.cu"
#include "xattn_cuda_flash_mma_d64.cu"
#include "xattn_cuda_flash_mma_d80.cu"
#include "xattn_cuda_flash_mma_d96.cu"
#include "xattn_cuda_flash_simt.cu"
#include "xattn_cuda_naive.cu"
