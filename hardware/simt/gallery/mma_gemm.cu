// Tensor-core GEMMs written the way hand-tuned kernels write them: tiles staged in
// shared memory, fragments loaded with ldmatrix, products by mma.sync (sm_80).
// One warp computes a 16 x 16 tile of C; blockDim = 32, grid = (N / 16, M / 16).
#include <cuda_fp16.h>
#include <stdint.h>

// C (M x N, float, row-major) = A (M x K, half, row-major) @ B (K x N, half, row-major);
// M, N multiples of 16, K a multiple of 16. Per 16-wide k step: A's 16 x 16 tile by
// ldmatrix.x4, B's 16 x 16 tile by ldmatrix.x4.trans, two m16n8k16 products.
extern "C" __global__ void mma_gemm_f16(const half *A, const half *B, float *C,
                                        int M, int N, int K)
{
    __shared__ __align__(16) half As[16][16];
    __shared__ __align__(16) half Bs[16][16];
    int lane = threadIdx.x;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = lane; i < 256; i += 32) {
            int r = i / 16, c = i % 16;
            As[r][c] = A[(m0 + r) * K + k0 + c];
            Bs[r][c] = B[(k0 + r) * N + n0 + c];
        }
        __syncwarp();
        uint32_t a[4], b[4];
        // lanes 0-15 give rows 0-15 of columns 0-7, lanes 16-31 of columns 8-15
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(&As[lane % 16][(lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
        uint32_t pb = (uint32_t)__cvta_generic_to_shared(&Bs[lane % 16][(lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(pb));
        for (int j = 0; j < 2; ++j) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                           "r"(b[2 * j]), "r"(b[2 * j + 1]));
        }
        __syncwarp();
    }
    int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 2; ++j) {
        int col = n0 + j * 8 + 2 * t;
        C[(m0 + g) * N + col] = acc[j][0];
        C[(m0 + g) * N + col + 1] = acc[j][1];
        C[(m0 + g + 8) * N + col] = acc[j][2];
        C[(m0 + g + 8) * N + col + 1] = acc[j][3];
    }
}

// C (M x N, int, row-major) = A (M x K, int8, row-major) @ B, with B given transposed
// (Bt: N x K, int8, row-major); K a multiple of 32. Per 32-wide k step: A's 16 x 32
// bytes and Bt's 16 x 32 bytes by ldmatrix.x4 (8-bit data moved as 16-bit pairs), two
// m16n8k32 products with exact int32 accumulation.
extern "C" __global__ void mma_gemm_s8(const int8_t *A, const int8_t *Bt, int *C,
                                       int M, int N, int K)
{
    __shared__ __align__(16) int8_t As[16][32];
    __shared__ __align__(16) int8_t Bs[16][32];
    int lane = threadIdx.x;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    int acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    for (int k0 = 0; k0 < K; k0 += 32) {
        for (int i = lane; i < 512; i += 32) {
            int r = i / 32, c = i % 32;
            As[r][c] = A[(m0 + r) * K + k0 + c];
            Bs[r][c] = Bt[(n0 + r) * K + k0 + c];
        }
        __syncwarp();
        uint32_t a[4], b[4];
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(&As[lane % 16][(lane / 16) * 16]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
        // matrices: Bt rows 0-7 (k 0-15), rows 0-7 (k 16-31), rows 8-15 (k 0-15), ...
        uint32_t pb = (uint32_t)__cvta_generic_to_shared(
            &Bs[(lane / 16) * 8 + lane % 8][((lane / 8) % 2) * 16]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(pb));
        for (int j = 0; j < 2; ++j) {
            asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+r"(acc[j][0]), "+r"(acc[j][1]), "+r"(acc[j][2]), "+r"(acc[j][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                           "r"(b[2 * j]), "r"(b[2 * j + 1]));
        }
        __syncwarp();
    }
    int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 2; ++j) {
        int col = n0 + j * 8 + 2 * t;
        C[(m0 + g) * N + col] = acc[j][0];
        C[(m0 + g) * N + col + 1] = acc[j][1];
        C[(m0 + g + 8) * N + col] = acc[j][2];
        C[(m0 + g + 8) * N + col + 1] = acc[j][3];
    }
}

// The pattern of FlashAttention-2 style kernels: the next k step's tiles stream into a
// second shared buffer with 16-byte cp.async.cg copies (one per lane per tile) while
// the current step is multiplied; cp.async.wait_group 1 before the fragments are
// read. Same layout and result as mma_gemm_f16.
extern "C" __global__ void mma_gemm_f16_pipelined(const half *A, const half *B, float *C,
                                                  int M, int N, int K)
{
    __shared__ __align__(16) half As[2][16][16];
    __shared__ __align__(16) half Bs[2][16][16];
    int lane = threadIdx.x;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    int r = lane / 2, c = (lane % 2) * 8;             // lane's 16-byte piece of a tile
    float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    int steps = K / 16;
    for (int s = 0; s <= steps; ++s) {
        if (s < steps) {                              // issue step s into buffer s % 2
            int k0 = s * 16;
            uint32_t da = (uint32_t)__cvta_generic_to_shared(&As[s % 2][r][c]);
            uint32_t db = (uint32_t)__cvta_generic_to_shared(&Bs[s % 2][r][c]);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                         :: "r"(da), "l"(&A[(m0 + r) * K + k0 + c]));
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                         :: "r"(db), "l"(&B[(k0 + r) * N + n0 + c]));
        }
        asm volatile("cp.async.commit_group;");
        if (s == 0) continue;
        asm volatile("cp.async.wait_group 1;");       // step s - 1 has landed
        __syncwarp();
        int buf = (s - 1) % 2;
        uint32_t a[4], b[4];
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(&As[buf][lane % 16][(lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
        uint32_t pb = (uint32_t)__cvta_generic_to_shared(&Bs[buf][lane % 16][(lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(pb));
        for (int j = 0; j < 2; ++j) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                           "r"(b[2 * j]), "r"(b[2 * j + 1]));
        }
        __syncwarp();
    }
    int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 2; ++j) {
        int col = n0 + j * 8 + 2 * t;
        C[(m0 + g) * N + col] = acc[j][0];
        C[(m0 + g) * N + col + 1] = acc[j][1];
        C[(m0 + g + 8) * N + col] = acc[j][2];
        C[(m0 + g + 8) * N + col + 1] = acc[j][3];
    }
}
