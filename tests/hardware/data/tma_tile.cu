#include <cuda.h>
#include <cuda/barrier>
#include <cuda/ptx>
namespace ptx = cuda::ptx;
using barrier = cuda::barrier<cuda::thread_scope_block>;

// One 64 x 8 16-bit box per block through the tensor memory accelerator (the tensor map
// says how it is swizzled in shared memory), waited for on a cuda::barrier, then written
// out as it lies in shared memory.
// nvcc -arch=sm_90a -ptx tma_tile.cu -o tma_tile.ptx
extern "C" __global__ void tma_tile(const __grid_constant__ CUtensorMap map, unsigned short *out)
{
    __shared__ alignas(1024) unsigned short tile[8 * 64];
    #pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier bar;
    if (threadIdx.x == 0) {
        init(&bar, blockDim.x);
        ptx::fence_proxy_async(ptx::space_shared);
    }
    __syncthreads();
    barrier::arrival_token token;
    if (threadIdx.x == 0) {
        int c[2] = {int(blockIdx.x) * 64, int(blockIdx.y) * 8};
        ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, tile, &map, c,
                                  cuda::device::barrier_native_handle(bar));
        token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
    } else {
        token = bar.arrive();
    }
    bar.wait(std::move(token));
    int b = (blockIdx.y * gridDim.x + blockIdx.x) * 512;
    for (int i = threadIdx.x; i < 512; i += blockDim.x)
        out[b + i] = tile[i];
}
