// synccheck: barriers and warp collectives reached by part of their threads, each with
// its corrected twin (suffix _fixed).

// __syncthreads() in divergent code (64 threads): half of each warp takes each branch
extern "C" __global__ void divergent_syncthreads(const int *x, int *out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t % 32 < 16) {
        s[t] = x[t];
        __syncthreads();
    } else {
        s[t] = -x[t];
        __syncthreads();
    }
    out[t] = s[63 - t];
}

extern "C" __global__ void divergent_syncthreads_fixed(const int *x, int *out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t % 32 < 16)
        s[t] = x[t];
    else
        s[t] = -x[t];
    __syncthreads();
    out[t] = s[63 - t];
}

// threads past n return before the barrier the others wait at (64 threads, n = 40)
extern "C" __global__ void early_return(const int *x, int *out, int n)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t >= n)
        return;
    s[t] = x[t];
    __syncthreads();
    out[t] = s[n - 1 - t];
}

extern "C" __global__ void early_return_fixed(const int *x, int *out, int n)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t < n)
        s[t] = x[t];
    __syncthreads();
    if (t < n)
        out[t] = s[n - 1 - t];
}

// __syncwarp() (full mask) reached by 16 lanes only (32 threads)
extern "C" __global__ void syncwarp_half(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    if (t < 16) {
        s[t] = x[t];
        __syncwarp();
        out[t] = s[15 - t];
    }
}

extern "C" __global__ void syncwarp_half_fixed(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    if (t < 16) {
        s[t] = x[t];
        __syncwarp(0xffff);
        out[t] = s[15 - t];
    }
}

// a full-mask shuffle executed by 16 lanes (32 threads)
extern "C" __global__ void shfl_half(const int *x, int *out)
{
    int t = threadIdx.x;
    int v = x[t];
    if (t < 16)
        v += __shfl_xor_sync(0xffffffff, v, 1);
    out[t] = v;
}

extern "C" __global__ void shfl_half_fixed(const int *x, int *out)
{
    int t = threadIdx.x;
    int v = x[t];
    if (t < 16)
        v += __shfl_xor_sync(0x0000ffff, v, 1);
    out[t] = v;
}

// lanes 0-15 shuffle down by 8 with a 16-lane mask: lanes 8-15 read lanes 16-23, which
// are not in the mask (32 threads)
extern "C" __global__ void shfl_outside(const int *x, int *out)
{
    int t = threadIdx.x;
    int v = x[t];
    if (t < 16)
        v += __shfl_down_sync(0x0000ffff, v, 8);
    out[t] = v;
}

extern "C" __global__ void shfl_outside_fixed(const int *x, int *out)
{
    int t = threadIdx.x;
    int v = x[t];
    if (t < 16)
        v += __shfl_down_sync(0x0000ffff, v, 8, 16);
    out[t] = v;
}
