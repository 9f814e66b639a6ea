// A thread-block cluster of 4 CTAs sharing one 64 x 64 float tile through TMA multicast
// and distributed shared memory. CTA rank r of the cluster loads rows 16 r .. 16 r + 15
// of the cluster's tile with one cp.async.bulk.tensor .multicast::cluster into every
// CTA's shared memory (ctaMask 0xF), so each CTA's mbarrier expects the four quarters'
// bytes. Each CTA then takes the dot products of the tile's 64 rows with its quarter of
// w (columns 16 r .. 16 r + 15) into part[64]; after a cluster barrier, thread i of
// rank r sums row 16 r + i's four partial products read from the CTAs' part arrays
// (cluster.map_shared_rank: ld.shared::cluster), rank 0 first, and writes
// y = X w for its rows.
// blockDim = 64, grid = (4 * tiles), cluster (4, 1, 1); X is (64 tiles) x 64 floats.
// nvcc -arch=sm_90a -ptx cluster_multicast.cu -o cluster_multicast.ptx
#include <cooperative_groups.h>
#include <cuda.h>
#include <stdint.h>
namespace cg = cooperative_groups;

__device__ __forceinline__ uint32_t smem(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(64)
cluster_multicast_matvec(const __grid_constant__ CUtensorMap mapX, const float *w, float *y)
{
    __shared__ __align__(128) float tile[64 * 64];
    __shared__ float part[64];
    __shared__ __align__(8) uint64_t full;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    int t = threadIdx.x;
    int row0 = (blockIdx.x / 4) * 64;
    if (t == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&full)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(smem(&full)), "r"(64 * 64 * 4) : "memory");
    }
    cluster.sync();   // every CTA's barrier is initialised before any copy signals it
    if (t == 0) {
        uint16_t mask = 0xF;
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                     ".mbarrier::complete_tx::bytes.multicast::cluster"
                     " [%0], [%1, {%2, %3}], [%4], %5;"
                     :: "r"(smem(tile + 16 * 64 * rank)), "l"((uint64_t)&mapX), "r"(0),
                        "r"(row0 + 16 * (int)rank), "r"(smem(&full)), "h"(mask)
                     : "memory");
    }
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(smem(&full)) : "memory");
    float acc = 0.f;
    for (int j = 16 * rank; j < 16 * rank + 16; ++j)
        acc += tile[t * 64 + j] * w[j];
    part[t] = acc;
    cluster.sync();
    int r = 16 * rank + t % 16;
    if (t < 16) {
        float sum = 0.f;
        for (unsigned q = 0; q < 4; ++q)
            sum += cluster.map_shared_rank(part, q)[r];
        y[row0 + r] = sum;
    }
    cluster.sync();   // no CTA exits while another may still read its part
}
