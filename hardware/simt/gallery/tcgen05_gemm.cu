// An FP16 GEMM for sm_100a with Blackwell's fifth-generation tensor cores, written the
// way hand-written kernels use them through inline PTX (PTX ISA 9.1, section 9.7.16):
// warp 0 allocates 64 columns of Tensor Memory for the 128 x 64 FP32 accumulator; the
// block stages each k16 slice of A (128 x 16) and B (64 x 16) in shared memory in the
// canonical K-major layout without swizzling (core matrices of 8 rows x 16 bytes, LBO 128,
// SBO 256); one elected thread issues tcgen05.mma kind::f16 and commits it to an mbarrier
// that every thread waits on; each warp then loads its 32 lanes of D with tcgen05.ld and
// stores them. One CTA of 128 threads per 128 x 64 tile of C; grid = (N / 64, M / 128).
//
//   nvcc -arch=sm_100a -ptx tcgen05_gemm.cu -o tcgen05_gemm.ptx
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// canonical K-major, no swizzle: element (r, k) of a rows x 16 tile of 16-bit values
__device__ __forceinline__ uint32_t kmajor(uint32_t r, uint32_t k)
{
    return (r / 8) * 256 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2;
}

// shared-memory descriptor (PTX ISA Table 40): start, LBO, SBO, bits 46-48 = 0b001
__device__ __forceinline__ uint64_t sdesc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) |
           ((uint64_t)(256 >> 4) << 32) | (1ull << 46);
}

#define LD16(taddr, v)                                                                \
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 "                            \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, [%16];"             \
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]),     \
          "=r"(v[6]), "=r"(v[7]), "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]),   \
          "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15]) : "r"(taddr))

extern "C" __global__ void __launch_bounds__(128)
tcgen05_gemm_f16(const __half *A, const __half *B, float *C, int M, int N, int K)
{
    __shared__ __align__(1024) uint8_t sa[128 * 16 * 2];
    __shared__ __align__(1024) uint8_t sb[64 * 16 * 2];
    __shared__ __align__(8) uint64_t bar;
    __shared__ uint32_t slot;
    const int tid = threadIdx.x, warp = tid / 32;
    const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 64;
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 64;"
                     :: "r"(smem_u32(&slot)));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (tid == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;");
    const uint32_t taddr = slot;
    // instruction descriptor (Table 42): D f32, A = B = f16, K-major, N >> 3, M >> 4
    const uint32_t idesc = (1u << 4) | ((64u >> 3) << 17) | ((128u >> 4) << 24);
    uint32_t phase = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = tid; i < 128 * 16; i += 128) {
            int r = i / 16, k = i % 16;
            *(__half *)(sa + kmajor(r, k)) = A[(size_t)(row0 + r) * K + k0 + k];
        }
        for (int i = tid; i < 64 * 16; i += 128) {
            int n = i % 64, k = i / 64;
            *(__half *)(sb + kmajor(n, k)) = B[(size_t)(k0 + k) * N + col0 + n];
        }
        asm volatile("fence.proxy.async.shared::cta;");
        __syncthreads();
        if (tid == 0) {
            asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                         "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
                         :: "r"(taddr), "l"(sdesc(smem_u32(sa))), "l"(sdesc(smem_u32(sb))),
                            "r"(idesc), "r"(k0));
            asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster"
                         ".b64 [%0];" :: "r"(smem_u32(&bar)));
        }
        uint32_t done = 0;
        while (!done) {
            asm volatile("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.b32 %0, 1, 0, p;\n\t}"
                         : "=r"(done) : "r"(smem_u32(&bar)), "r"(phase));
        }
        phase ^= 1;
        asm volatile("tcgen05.fence::after_thread_sync;");
    }
    const uint32_t mine = taddr + ((uint32_t)(warp * 32) << 16);
    float *out = C + (size_t)(row0 + tid) * N + col0;
    for (int c = 0; c < 64; c += 16) {
        uint32_t v[16];
        LD16(mine + c, v);
        asm volatile("tcgen05.wait::ld.sync.aligned;");
        for (int j = 0; j < 16; ++j)
            out[c + j] = __uint_as_float(v[j]);
    }
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    if (warp == 0)
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 64;" :: "r"(taddr));
}
