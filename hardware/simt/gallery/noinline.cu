// Device functions that stay calls (__noinline__), built with -lineinfo (noinline.ptx)
// and with -G (noinline_G.ptx): the .loc directives inside the called functions, a
// nested call, a loop and a void function writing through a pointer.
__device__ __noinline__ int collatz_steps(int x)
{
    int steps = 0;
    while (x > 1 && steps < 1000) {
        x = (x & 1) ? 3 * x + 1 : x / 2;
        ++steps;
    }
    return steps;
}

__device__ __noinline__ float scale_add(float x, float s, int k)
{
    float r = x * s;
    for (int i = 0; i < k; ++i)
        r += 1.0f;
    return r + (float)collatz_steps(k + 1);
}

__device__ __noinline__ void store_pair(int *out, int i, int a, int b)
{
    out[2 * i] = a;
    out[2 * i + 1] = b;
}

extern "C" __global__ void noinline_calls(const float *x, float *y, int *pairs, float s,
                                          int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int k = i % 7;
        y[i] = scale_add(x[i], s, k);
        store_pair(pairs, i, collatz_steps(i + 1), k);
    }
}
