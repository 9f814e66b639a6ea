// Sum reductions: a warp-shuffle tree within each warp, and a block reduction through
// shared memory (tree in shared memory, then the last warp with shuffles).

// out[w] = sum of the 32 elements of warp w, by shfl.sync.down (xor tree order:
// lane 0 ends with ((x0+x16)+(x8+x24))+...).
extern "C" __global__ void warp_reduce(const float *x, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) out[i >> 5] = v;
}

// Butterfly all-reduce: every lane ends with the warp total.
extern "C" __global__ void warp_allreduce(const float *x, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int mask = 16; mask > 0; mask >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, mask);
    out[i] = v;
}

// Block reduction with blockDim.x = 256: shared-memory tree down to 32 values, then
// one warp finishes with shuffles. out[blockIdx.x] = block sum.
extern "C" __global__ void block_reduce(const float *x, float *out, int n)
{
    __shared__ float s[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    s[t] = (i < n) ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride >= 32; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t < 32) {
        float v = s[t];
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (t == 0) out[blockIdx.x] = v;
    }
}

// Warp vote: ballot of x > 0 and count of positive elements per warp.
extern "C" __global__ void warp_vote(const int *x, unsigned *ballots, int *counts)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned b = __ballot_sync(0xffffffffu, x[i] > 0);
    int all = __all_sync(0xffffffffu, x[i] > 0);
    int any = __any_sync(0xffffffffu, x[i] > 0);
    if ((threadIdx.x & 31) == 0) {
        ballots[i >> 5] = b;
        counts[i >> 5] = __popc(b) + 100 * all + 1000 * any;
    }
}
