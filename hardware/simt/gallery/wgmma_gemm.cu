// Warpgroup GEMMs for sm_90a written the way hand-written Hopper kernels write them:
// operand tiles staged in shared memory in the canonical 128-byte-swizzled layouts,
// matrix descriptors built in the kernel, wgmma.mma_async by inline PTX.
// One warpgroup (blockDim = 128) computes a 64 x 64 tile of C; grid = (N / 64, M / 64).
#include <cuda_fp16.h>
#include <stdint.h>

// 16-byte chunk c of a 128-byte row r of a swizzled tile: the chunk index XOR the row
// within the 8-row (1024-byte) pattern (PTX ISA, wgmma shared memory layouts)
__device__ __forceinline__ uint32_t swz128(uint32_t r, uint32_t c)
{
    return r * 128 + ((c ^ (r % 8)) * 16);
}

__device__ __forceinline__ uint64_t desc128(const void *smem, uint32_t sbo)
{
    uint64_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

#define WGMMA_F16(d, da, db, ta, tb)                                                  \
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "               \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                     \
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "          \
        "%32, %33, 1, 1, 1, " #ta ", " #tb ";"                                        \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),     \
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),   \
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),            \
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),            \
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),            \
          "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])             \
        : "l"(da), "l"(db))

// C (M x N, float) = A (M x K, half, row-major) @ B (K x N, half, row-major); M, N
// multiples of 64, K a multiple of 64. Per 64-wide k block: A's 64 x 64 tile K-major and
// B's 64 x 64 tile N-major, both 128-byte swizzled (8 KiB each); four m64n64k16 per block.
extern "C" __global__ void __launch_bounds__(128) wgmma_gemm_f16(
    const half *A, const half *B, float *C, int M, int N, int K)
{
    __shared__ __align__(1024) half As[64 * 64];
    __shared__ __align__(1024) half Bs[64 * 64];
    int t = threadIdx.x;
    int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0.f;
    for (int k0 = 0; k0 < K; k0 += 64) {
        // 512 chunks of 16 bytes per tile, 4 per thread
        for (int i = t; i < 512; i += 128) {
            int r = i / 8, c = i % 8;
            uint4 va = *(const uint4 *)(A + (size_t)(m0 + r) * K + k0 + c * 8);
            uint4 vb = *(const uint4 *)(B + (size_t)(k0 + r) * N + n0 + c * 8);
            *(uint4 *)((char *)As + swz128(r, c)) = va;   // row r of A: m, chunk: k
            *(uint4 *)((char *)Bs + swz128(r, c)) = vb;   // row r of B: k, chunk: n
        }
        asm volatile("fence.proxy.async.shared::cta;");
        __syncthreads();
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        for (int kk = 0; kk < 4; ++kk) {
            // A: the next 16 k are 32 bytes further along each row; B: 16 rows further
            uint64_t da = desc128((const char *)As + kk * 32, 1024);
            uint64_t db = desc128((const char *)Bs + kk * 16 * 128, 1024);
            WGMMA_F16(d, da, db, 0, 1);
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();
    }
    // accumulator fragment: warp w rows 16 w.., lane (g, q): element i at row
    // g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2
    int w = t / 32, g = (t % 32) / 4, q = t % 4;
    for (int i = 0; i < 32; ++i) {
        int r = 16 * w + g + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * q + (i % 2);
        C[(size_t)(m0 + r) * N + n0 + c] = d[i];
    }
}

// C (M x N, int32) = A (M x K, int8, row-major) @ B, with B given as Bt (N x K, int8,
// row-major: B K-major, as integer wgmma requires); M, N multiples of 64, K a multiple
// of 128. A comes from registers (each thread loads its m64nNk32 A fragment: 16 bytes,
// four per register), Bt's 64 x 128 tile is staged 128-byte swizzled; .satfinite
// clamps the sums to the int32 range.
extern "C" __global__ void __launch_bounds__(128) wgmma_gemm_s8(
    const int8_t *A, const int8_t *Bt, int *C, int M, int N, int K)
{
    __shared__ __align__(1024) int8_t Bs[64 * 128];
    int t = threadIdx.x;
    int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    int w = t / 32, g = (t % 32) / 4, q = t % 4;
    int d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0;
    for (int k0 = 0; k0 < K; k0 += 128) {
        for (int i = t; i < 512; i += 128) {
            int r = i / 8, c = i % 8;
            *(uint4 *)((char *)Bs + swz128(r, c)) =
                *(const uint4 *)(Bt + (size_t)(n0 + r) * K + k0 + c * 16);
        }
        asm volatile("fence.proxy.async.shared::cta;");
        __syncthreads();
        for (int kk = 0; kk < 4; ++kk) {
            // A fragment element i: row 16 w + g + 8 ((i / 4) % 2), column
            // 4 q + i % 4 + 16 (i / 8) of this k32 step
            uint32_t a[4];
            for (int j = 0; j < 4; ++j) {
                int r = 16 * w + g + 8 * (j % 2), c = k0 + kk * 32 + 4 * q + 16 * (j / 2);
                a[j] = *(const uint32_t *)(A + (size_t)(m0 + r) * K + c);
            }
            uint64_t db = desc128(Bs + kk * 32, 1024);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8.satfinite "
                "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                "{%32,%33,%34,%35}, %36, 1;"
                : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]),
                  "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]),
                  "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                  "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]),
                  "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]),
                  "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]),
                  "+r"(d[31])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        }
        __syncthreads();
    }
    for (int i = 0; i < 32; ++i) {
        int r = 16 * w + g + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * q + (i % 2);
        C[(size_t)(m0 + r) * N + n0 + c] = d[i];
    }
}
