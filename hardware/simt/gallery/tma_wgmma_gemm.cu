// A warp-specialised Hopper GEMM: a producer warp loads the operand tiles with the tensor
// memory accelerator (cp.async.bulk.tensor, 128-byte swizzle, as the tensor maps say)
// into a ring of shared-memory stages, each guarded by a "full" mbarrier (the tiles'
// bytes have landed: complete_tx) and an "empty" one (the consumers are done with it);
// one consumer warpgroup waits for each stage, runs four wgmma.mma_async m64n64k16 on it
// through matrix descriptors, waits for them and releases the stage.
// blockDim = 160 (warps 0-3: the consumer warpgroup, warp 4: the producer);
// grid = (N / 64, M / 64); K a multiple of 64.
// nvcc -arch=sm_90a -ptx tma_wgmma_gemm.cu -o tma_wgmma_gemm.ptx
#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define STAGES 2
#define TILE_BYTES (64 * 64 * 2)

__device__ __forceinline__ uint32_t smem(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(smem(bar)), "r"(parity) : "memory");
}

// one box of the map at (c0, c1) (elements; c0 the contiguous dimension) into dst,
// completing on bar
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int c0, int c1,
                                         uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                 ".mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(smem(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem(bar))
                 : "memory");
}

// a K-major (A) or N-major (B) 128-byte-swizzled operand: rows of 128 bytes, 8-row
// groups 1024 bytes apart (stride byte offset), swizzle mode 1 (128 B)
__device__ __forceinline__ uint64_t desc128(const void *p)
{
    uint64_t a = smem(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

#define WGMMA_F16(d, da, db)                                                          \
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "               \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                     \
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "          \
        "%32, %33, 1, 1, 1, 0, 1;"                                                    \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),     \
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),   \
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),            \
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),            \
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),            \
          "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])             \
        : "l"(da), "l"(db) : "memory")

// C (M x N, float) = A (M x K, half, row-major) @ B (K x N, half, row-major).
// mapA: A as {K, M} with 64 x 64 boxes; mapB: B as {N, K} with 64 x 64 boxes; both
// CU_TENSOR_MAP_SWIZZLE_128B, so A's tile lands K-major and B's N-major in the
// canonical swizzled layouts wgmma reads.
extern "C" __global__ void __launch_bounds__(160) tma_wgmma_gemm_f16(
    const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
    float *C, int M, int N, int K)
{
    __shared__ __align__(1024) half As[STAGES][64 * 64];
    __shared__ __align__(1024) half Bs[STAGES][64 * 64];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    int t = threadIdx.x, warp = t / 32;
    int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64, nk = K / 64;
    if (t == 0) {
        for (int s = 0; s < STAGES; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&full[s])));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 128;" :: "r"(smem(&empty[s])));
        }
        // the initialised barriers are visible to the async proxy (the copies' complete_tx)
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == 4) {                       // producer
        if (t == 128) {
            for (int kb = 0; kb < nk; ++kb) {
                int s = kb % STAGES;
                if (kb >= STAGES)          // the consumers released this stage's last use
                    mbar_wait(&empty[s], (kb / STAGES - 1) & 1);
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                             :: "r"(smem(&full[s])), "r"(2 * TILE_BYTES) : "memory");
                tma_load(As[s], &mapA, kb * 64, m0, &full[s]);
                tma_load(Bs[s], &mapB, n0, kb * 64, &full[s]);
            }
        }
        return;
    }
    float d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0.f;
    for (int kb = 0; kb < nk; ++kb) {
        int s = kb % STAGES;
        mbar_wait(&full[s], (kb / STAGES) & 1);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        for (int kk = 0; kk < 4; ++kk)     // A: 32 bytes along each row; B: 16 rows down
            WGMMA_F16(d, desc128((const char *)As[s] + kk * 32),
                      desc128((const char *)Bs[s] + kk * 16 * 128));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(smem(&empty[s]))
                     : "memory");
    }
    // accumulator fragment: warp w rows 16 w.., lane (g, q): element i at row
    // g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2
    int g = (t % 32) / 4, q = t % 4;
    for (int i = 0; i < 32; ++i) {
        int r = 16 * warp + g + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * q + (i % 2);
        C[(size_t)(m0 + r) * N + n0 + c] = d[i];
    }
}
