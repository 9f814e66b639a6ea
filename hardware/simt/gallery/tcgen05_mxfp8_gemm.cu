// An MXFP8 block-scaled GEMM for sm_100a (PTX ISA 9.1, sections 9.7.16.9.2 tcgen05.cp and
// 9.7.16.10.7 block scaling): C = (A x SA)(B x SB) with E4M3 A (M x K, row-major) and B
// (K x N, row-major) and one E8M0 scale per 32 elements along K: SA (M x K/32, row-major)
// and SB (K/32 x N, row-major). Warp 0 allocates 128 columns of Tensor Memory: the
// 128 x 64 FP32 accumulator in columns 0-63, the scale tiles of A and B in columns 64 and
// 68. For each k128 chunk the block stages A (128 x 128 bytes) and B (64 x 128 bytes,
// K-major) in the canonical K-major layout without swizzling (LBO 128, SBO 1024) and the
// two scale tiles (32 rows of 16 bytes: row r, byte 4 c + j holds the scale of row
// 32 c + r of A, or column 32 c + r of B, for the chunk's K-block j); one thread copies
// the tiles into Tensor Memory with tcgen05.cp.32x128b.warpx4 (duplicated into the four
// lane quarters) and issues four tcgen05.mma kind::mxf8f6f4.block_scale.scale_vec::1X,
// k32 each, whose scale factor IDs j pick byte j of the scale cells, then commits them to
// an mbarrier that every thread waits on. Each warp finally loads its 32 lanes of D with
// tcgen05.ld. One CTA of 128 threads per 128 x 64 tile of C; grid = (N / 64, M / 128);
// K a multiple of 128.
//
//   nvcc -arch=sm_100a -ptx tcgen05_mxfp8_gemm.cu -o tcgen05_mxfp8_gemm.ptx
#include <stdint.h>

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// canonical K-major, no swizzle: byte k of row r of a rows x 128-byte tile
__device__ __forceinline__ uint32_t kmajor(uint32_t r, uint32_t k)
{
    return (r / 8) * 1024 + (k / 16) * 128 + (r % 8) * 16 + (k % 16);
}

// shared-memory descriptor (PTX ISA Table 40): start, LBO, SBO, bits 46-48 = 0b001
__device__ __forceinline__ uint64_t sdesc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32) | (1ull << 46);
}

#define LD16(taddr, v)                                                                \
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 "                            \
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, [%16];"             \
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]),     \
          "=r"(v[6]), "=r"(v[7]), "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]),   \
          "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15]) : "r"(taddr))

extern "C" __global__ void __launch_bounds__(128)
tcgen05_gemm_mxfp8(const uint8_t *A, const uint8_t *SA, const uint8_t *B,
                   const uint8_t *SB, float *C, int M, int N, int K)
{
    __shared__ __align__(1024) uint8_t sa[128 * 128];
    __shared__ __align__(1024) uint8_t sb[64 * 128];
    __shared__ __align__(128) uint8_t sfa[32 * 16];
    __shared__ __align__(128) uint8_t sfb[32 * 16];
    __shared__ __align__(8) uint64_t bar;
    __shared__ uint32_t slot;
    const int tid = threadIdx.x, warp = tid / 32;
    const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 64;
    const int kb = K / 32;
    if (warp == 0) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 128;"
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
    const uint32_t taddr = slot, tsfa = slot + 64, tsfb = slot + 68;
    uint32_t phase = 0;
    for (int k0 = 0; k0 < K; k0 += 128) {
        for (int i = tid; i < 128 * 128; i += 128) {
            int r = i / 128, k = i % 128;
            sa[kmajor(r, k)] = A[(size_t)(row0 + r) * K + k0 + k];
        }
        for (int i = tid; i < 64 * 128; i += 128) {
            int n = i % 64, k = i / 64;
            sb[kmajor(n, k)] = B[(size_t)(k0 + k) * N + col0 + n];
        }
        for (int i = tid; i < 32 * 16; i += 128) {
            int r = i / 16, c = (i % 16) / 4, j = i % 4;
            sfa[i] = SA[(size_t)(row0 + 32 * c + r) * kb + k0 / 32 + j];
            sfb[i] = c < 2 ? SB[(size_t)(k0 / 32 + j) * N + col0 + 32 * c + r] : 0;
        }
        asm volatile("fence.proxy.async.shared::cta;");
        __syncthreads();
        if (tid == 0) {
            asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;"
                         :: "r"(tsfa), "l"(sdesc(smem_u32(sfa), 0, 128)));
            asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;"
                         :: "r"(tsfb), "l"(sdesc(smem_u32(sfb), 0, 128)));
            for (int j = 0; j < 4; ++j) {
                // instruction descriptor (Table 43): SFB ID j (bits 4-5), A = B = E4M3,
                // N >> 3, UE8M0 scales (bit 23), M >> 7 (bits 27-28), SFA ID j (29-30)
                const uint32_t idesc = ((uint32_t)j << 4) | ((64u >> 3) << 17) | (1u << 23) |
                                       ((128u >> 7) << 27) | ((uint32_t)j << 29);
                asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %6, 0;\n\t"
                             "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale."
                             "scale_vec::1X [%0], %1, %2, %3, [%4], [%5], p;\n\t}"
                             :: "r"(taddr), "l"(sdesc(smem_u32(sa) + 256 * j, 128, 1024)),
                                "l"(sdesc(smem_u32(sb) + 256 * j, 128, 1024)), "r"(idesc),
                                "r"(tsfa), "r"(tsfb), "r"(k0 + j));
            }
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
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 128;" :: "r"(taddr));
}
