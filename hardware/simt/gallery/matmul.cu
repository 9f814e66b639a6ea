// C = A @ B for row-major float matrices: A is n x k, B is k x m, C is n x m.
#define TILE 16

// One thread per output element, fma accumulation over k in order.
extern "C" __global__ void matmul_naive(const float *A, const float *B, float *C,
                                        int n, int m, int k)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < m) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p) acc += A[row * k + p] * B[p * m + col];
        C[row * m + col] = acc;
    }
}

// Shared-memory tiled version (16 x 16 tiles, blockDim = (16, 16)); n, m, k must be
// multiples of TILE. Same accumulation order as matmul_naive.
extern "C" __global__ void matmul_tiled(const float *A, const float *B, float *C,
                                        int n, int m, int k)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < k; t += TILE) {
        As[ty][tx] = A[row * k + t + tx];
        Bs[ty][tx] = B[(t + ty) * m + col];
        __syncthreads();
#pragma unroll
        for (int p = 0; p < TILE; ++p) acc += As[ty][p] * Bs[p][tx];
        __syncthreads();
    }
    C[row * m + col] = acc;
}

// Transpose through a shared tile: the unpadded tile [32][32] read by column has
// 32-way bank conflicts; the padded tile [32][33] has none. blockDim = (32, 32).
extern "C" __global__ void transpose_unpadded(const float *in, float *out, int n)
{
    __shared__ float tile[32][32];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void transpose_padded(const float *in, float *out, int n)
{
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
