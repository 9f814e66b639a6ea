// One FP8 dot product of length 32 per warp through mma.sync.m16n8k32 (PTX ISA 9.7.14,
// "Matrix Fragments for mma.m16n8k32"): warp w puts a[32w .. 32w + 31] in row 0 of A,
// b[32w .. 32w + 31] in column 0 of B and c[w] in C[0][0] (every other element 0), and
// stores D[0][0] in d[w]. Lanes 0-3 (groupID 0) hold row 0 of A in registers 0 and 2
// (k = 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3) and column 0 of B in registers 0 and 1.
//
//   nvcc -arch=sm_90 -ptx mma_fp8_dot.cu -o mma_fp8_dot.ptx
__device__ unsigned bytes4(const unsigned char* p) {
    return p[0] | (p[1] << 8) | (p[2] << 16) | ((unsigned)p[3] << 24);
}

__device__ void operands(const unsigned char* a, const unsigned char* b, int w, int lane,
                         unsigned r[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    if (lane < 4) {
        r[0] = bytes4(a + 32 * w + 4 * lane);
        r[1] = bytes4(a + 32 * w + 16 + 4 * lane);
        r[2] = bytes4(b + 32 * w + 4 * lane);
        r[3] = bytes4(b + 32 * w + 16 + 4 * lane);
    }
}

#define DOT_KERNELS(FMT)                                                                   \
extern "C" __global__ void dot_##FMT##_f32(const unsigned char* a, const unsigned char* b, \
                                           const float* c, float* d, int n) {             \
    int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;        \
    if (w >= n) return;                                                                    \
    unsigned r[4];                                                                         \
    operands(a, b, w, lane, r);                                                            \
    float acc = lane == 0 ? c[w] : 0.0f, z = 0.0f, d0, d1, d2, d3;                         \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." #FMT "." #FMT ".f32 "            \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"     \
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)                                  \
                 : "r"(r[0]), "r"(0u), "r"(r[1]), "r"(0u), "r"(r[2]), "r"(r[3]),           \
                   "f"(acc), "f"(z), "f"(z), "f"(z));                                      \
    if (lane == 0) d[w] = d0;                                                              \
}                                                                                          \
extern "C" __global__ void dot_##FMT##_f16(const unsigned char* a, const unsigned char* b, \
                                           const unsigned short* c, unsigned short* d,    \
                                           int n) {                                        \
    int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;        \
    if (w >= n) return;                                                                    \
    unsigned r[4];                                                                         \
    operands(a, b, w, lane, r);                                                            \
    unsigned acc = lane == 0 ? c[w] : 0u, d0, d1;                                          \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f16." #FMT "." #FMT ".f16 "            \
                 "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"                         \
                 : "=r"(d0), "=r"(d1)                                                      \
                 : "r"(r[0]), "r"(0u), "r"(r[1]), "r"(0u), "r"(r[2]), "r"(r[3]),           \
                   "r"(acc), "r"(0u));                                                     \
    if (lane == 0) d[w] = (unsigned short)(d0 & 0xFFFF);                                   \
}

DOT_KERNELS(e4m3)
DOT_KERNELS(e5m2)
