// Double-buffered tiled GEMM with asynchronous copies (cp.async, sm_80): while the tile
// k is multiplied from one shared buffer, tile k + 1 streams into the other.
// C (n x m) = A (n x k) @ B (k x m), row-major floats; n, m, k multiples of 16;
// blockDim = (16, 16), grid = (m / 16, n / 16).
#include <cuda_pipeline.h>
#define TILE 16

extern "C" __global__ void cp_async_gemm(const float *A, const float *B, float *C,
                                         int n, int m, int k)
{
    __shared__ __align__(16) float As[2][TILE][TILE];
    __shared__ __align__(16) float Bs[2][TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    int tiles = k / TILE;
    __pipeline_memcpy_async(&As[0][ty][tx], &A[row * k + tx], sizeof(float));
    __pipeline_memcpy_async(&Bs[0][ty][tx], &B[ty * m + col], sizeof(float));
    __pipeline_commit();
    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        int cur = t & 1, nxt = cur ^ 1;
        if (t + 1 < tiles) {
            int k1 = (t + 1) * TILE;
            __pipeline_memcpy_async(&As[nxt][ty][tx], &A[row * k + k1 + tx], sizeof(float));
            __pipeline_memcpy_async(&Bs[nxt][ty][tx], &B[(k1 + ty) * m + col], sizeof(float));
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);   // tile t has landed (tile t + 1 may still be in flight)
        __syncthreads();
        for (int p = 0; p < TILE; ++p) acc += As[cur][ty][p] * Bs[cur][p][tx];
        __syncthreads();
    }
    C[row * m + col] = acc;
}

// 16-byte copies with zero fill: each thread copies 4 floats of a row of length len
// into a shared row of 4 * blockDim.x floats; the bytes past len are filled with zeros
// (src-size < cp-size); out gets the shared row back.
extern "C" __global__ void cp_async_zero_fill(const float *src, float *out, int len)
{
    extern __shared__ __align__(16) float row[];
    int i = 4 * threadIdx.x;
    int avail = len - i;
    int bytes = avail >= 4 ? 16 : (avail > 0 ? 4 * avail : 0);
    const float *p = bytes ? &src[i] : src;
    unsigned dst = (unsigned)__cvta_generic_to_shared(&row[i]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(p), "r"(bytes));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    for (int j = 0; j < 4; ++j) out[i + j] = row[i + j];
}

// A bug the interpreter reports: the tile is read before the wait (a race on hardware).
extern "C" __global__ void cp_async_race(const float *A, float *out)
{
    __shared__ __align__(16) float tile[32];
    __pipeline_memcpy_async(&tile[threadIdx.x], &A[threadIdx.x], sizeof(float));
    __pipeline_commit();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % 32];
    __pipeline_wait_prior(0);
}
