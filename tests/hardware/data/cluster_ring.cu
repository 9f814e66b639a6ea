// Distributed shared memory across a thread-block cluster of 4 CTAs: each CTA fills its
// shared tile, the cluster synchronises, then every thread adds twice the element after
// its own in the tile of the next CTA (rank + 1 mod cluster size), read through
// cluster.map_shared_rank. Thread 0 of each CTA records its cluster rank, the cluster
// size, its index in the cluster and its rank in the grid.
// nvcc -arch=sm_90a -ptx cluster_ring.cu -o cluster_ring.ptx
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void __cluster_dims__(4, 1, 1)
cluster_ring(const int *in, int *out, unsigned *ranks)
{
    __shared__ int tile[128];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    unsigned n = cluster.num_blocks();
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[gid];
    cluster.sync();
    int *peer = cluster.map_shared_rank(tile, (rank + 1) % n);
    out[gid] = tile[threadIdx.x] + 2 * peer[(threadIdx.x + 1) % blockDim.x];
    if (threadIdx.x == 0) {
        ranks[blockIdx.x * 4 + 0] = rank;
        ranks[blockIdx.x * 4 + 1] = n;
        ranks[blockIdx.x * 4 + 2] = cluster.block_index().x;
        ranks[blockIdx.x * 4 + 3] = cg::this_grid().block_rank();
    }
    cluster.sync();  // no CTA exits while another may still read its shared memory
}
