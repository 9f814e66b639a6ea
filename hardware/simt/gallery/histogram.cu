// Histogram of byte values with atomics: a per-block shared histogram (atomicAdd on
// shared memory), merged into the global histogram with atomicAdd on global memory.
extern "C" __global__ void histogram(const unsigned char *data, unsigned *hist, int n)
{
    __shared__ unsigned local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}

// Direct global atomics: max, min and a compare-and-swap claim of the first slot.
extern "C" __global__ void atomics(const int *x, int *result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicMax(&result[0], x[i]);
        atomicMin(&result[1], x[i]);
        atomicCAS(&result[2], -1, i);
        atomicXor(&result[3], x[i]);
        int old = atomicAdd(&result[4], 1);
        result[8 + i] = old < n ? 1 : 0;
    }
}
