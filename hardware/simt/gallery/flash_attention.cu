// FlashAttention-2 forward pass for one head (Dao, "FlashAttention-2: Faster Attention with
// Better Parallelism and Work Partitioning", 2023, Algorithm 1), written for CUDA cores the
// way FA2 organises the work:
//   O = softmax(Q K^T * scale) V,  Q: [n_q, 64], K, V: [n_kv, 64], row-major float32.
// A block of 8 warps owns BLOCK_M = 64 query rows: the Q tile is staged in shared memory
// and each warp keeps the running max m, the running sum l and the output accumulator o
// of its 8 rows in registers. The block loops over K/V tiles of BLOCK_N = 32 rows staged
// in shared memory; lane j of a warp scores key j of the tile, the row max and the row
// sum are butterfly shuffles, probabilities are exp2f of scores pre-multiplied by
// scale * log2(e) (scale_log2), and o and l are rescaled by exp2f(m_old - m_new) when the
// running max grows (online softmax). Each lane accumulates output columns lane and
// lane + 32; the probability of key j is broadcast with __shfl_sync. The division by l
// happens once, at the end.
#include <math.h>

#define D 64
#define BLOCK_M 64
#define BLOCK_N 32
#define WARPS 8
#define ROWS_PER_WARP (BLOCK_M / WARPS)
#define FULL 0xffffffffu

extern "C" __global__ void __launch_bounds__(256) flash_attention_fwd(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    float *__restrict__ O, int n_q, int n_kv, float scale_log2)
{
    __shared__ float sQ[BLOCK_M][D];
    __shared__ float sK[BLOCK_N][D + 1];  // padded: lane j reads row j without conflicts
    __shared__ float sV[BLOCK_N][D];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = blockIdx.x * BLOCK_M;
    for (int i = tid; i < BLOCK_M * D; i += WARPS * 32) {
        int r = i / D, c = i % D;
        sQ[r][c] = (q0 + r < n_q) ? Q[(size_t)(q0 + r) * D + c] : 0.0f;
    }
    float m[ROWS_PER_WARP], l[ROWS_PER_WARP], o0[ROWS_PER_WARP], o1[ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        o0[r] = 0.0f;
        o1[r] = 0.0f;
    }
    for (int kv0 = 0; kv0 < n_kv; kv0 += BLOCK_N) {
        __syncthreads();  // the previous tile is consumed (and sQ is written)
        for (int i = tid; i < BLOCK_N * D; i += WARPS * 32) {
            int r = i / D, c = i % D;
            bool ok = kv0 + r < n_kv;
            sK[r][c] = ok ? K[(size_t)(kv0 + r) * D + c] : 0.0f;
            sV[r][c] = ok ? V[(size_t)(kv0 + r) * D + c] : 0.0f;
        }
        __syncthreads();
        const bool valid = kv0 + lane < n_kv;
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; ++r) {
            const float *q = sQ[warp * ROWS_PER_WARP + r];
            float s = 0.0f;
#pragma unroll 16
            for (int k = 0; k < D; ++k)
                s = fmaf(q[k], sK[lane][k], s);
            s = valid ? s * scale_log2 : -INFINITY;
            float mx = s;
            for (int off = 16; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, off));
            const float m_new = fmaxf(m[r], mx);
            const float p = exp2f(s - m_new);
            float sum = p;
            for (int off = 16; off > 0; off >>= 1)
                sum += __shfl_xor_sync(FULL, sum, off);
            const float alpha = exp2f(m[r] - m_new);  // 0 on the first tile (m = -inf)
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
            float a0 = o0[r] * alpha, a1 = o1[r] * alpha;
#pragma unroll 8
            for (int j = 0; j < BLOCK_N; ++j) {
                const float pj = __shfl_sync(FULL, p, j);
                a0 = fmaf(pj, sV[j][lane], a0);
                a1 = fmaf(pj, sV[j][lane + 32], a1);
            }
            o0[r] = a0;
            o1[r] = a1;
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
        const int row = q0 + warp * ROWS_PER_WARP + r;
        if (row < n_q) {
            O[(size_t)row * D + lane] = o0[r] / l[r];
            O[(size_t)row * D + lane + 32] = o1[r] / l[r];
        }
    }
}

// A two-warp block sum (blockDim.x = 64) as a grid-stride loop, a shuffle tree in each
// warp and the two warp totals combined through shared memory: out[blockIdx.x] =
// (sum of warp 0) + (sum of warp 1), each thread first summing x[i], x[i + 64 * gridDim.x],
// ... in order.
extern "C" __global__ void __launch_bounds__(64) block_sum_2warps(
    const float *__restrict__ x, float *__restrict__ out, int n)
{
    __shared__ float partial[2];
    float v = 0.0f;
    for (int i = blockIdx.x * 64 + threadIdx.x; i < n; i += 64 * gridDim.x)
        v += x[i];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(FULL, v, off);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = partial[0] + partial[1];
}
