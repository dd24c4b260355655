/* Links the installed xattn_mpi through find_package(xattn)'s xattn::xattn_mpi
 * and checks one shard by hand (no MPI_Init needed): 10 positions, 2 ranks,
 * zigzag: rank 0 holds [0, 2) and [7, 10). */
#include <stdio.h>

#include <xattn_mpi.h>

int main(void)
{
    xattn_mpi_segment seg[2];
    int64_t n = xattn_mpi_shard(XATTN_MPI_ZIGZAG, 10, 2, 0, seg);
    if (n != 5 || seg[0].start != 0 || seg[0].length != 2 || seg[1].start != 7 ||
        seg[1].length != 3) {
        fprintf(stderr, "consumer_mpi: unexpected shard (%lld positions)\n", (long long)n);
        return 1;
    }
    printf("consumer_mpi: ok (xattn %s)\n", xattn_version_string());
    return 0;
}
