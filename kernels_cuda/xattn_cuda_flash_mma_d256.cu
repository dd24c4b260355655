/* The tensor-core flash kernel for head dims padded to 256 (f16 and bf16). One
 * file per head dim so that the instantiations compile in parallel. */
#include "xattn_cuda_flash_mma.cuh"

cudaError_t xattn_cuda_flash_mma_d256(const xattn_cuda_kparams &P, const xattn_cuda_args *a,
                                      unsigned nblocks)
{
    return xattn_cuda_flash_mma_launch<256>(P, a, nblocks);
}
