// cuda::memcpy_async of a 1 KiB tile on a block-scope cuda::barrier: nvcc emits a bulk
// copy (cp.async.bulk) that completes on the barrier's mbarrier, the expect-tx of its
// bytes, and an arrival of every thread; each thread then writes twice the element
// mirrored in the tile.
// nvcc -arch=sm_90a -ptx bulk_reverse.cu -o bulk_reverse.ptx
#include <cuda/barrier>
#include <cuda/ptx>
namespace ptx = cuda::ptx;
using barrier = cuda::barrier<cuda::thread_scope_block>;

extern "C" __global__ void bulk_reverse(const float *in, float *out)
{
    __shared__ alignas(128) float tile[256];
    #pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier bar;
    if (threadIdx.x == 0) {
        init(&bar, blockDim.x);
        ptx::fence_proxy_async(ptx::space_shared);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        cuda::memcpy_async(tile, in + blockIdx.x * 256, cuda::aligned_size_t<16>(sizeof(tile)),
                           bar);
    barrier::arrival_token token = bar.arrive();
    bar.wait(std::move(token));
    out[blockIdx.x * 256 + threadIdx.x] = 2.0f * tile[255 - threadIdx.x];
}
