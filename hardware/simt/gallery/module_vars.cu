// Module variables: a __constant__ table, a __device__ array with an initialiser and a
// __device__ counter updated with atomics (persisting across launches).
__constant__ float coeffs[4] = {1.0f, 0.5f, 0.25f, 0.125f};
__device__ int counter;
__device__ float table[3] = {3.0f, -1.0f, 2.5f};
extern "C" __global__ void poly(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = ((coeffs[3] * v + coeffs[2]) * v + coeffs[1]) * v + coeffs[0] + table[i % 3];
        atomicAdd(&counter, 1);
    }
}
