// racecheck: shared-memory races between the warps of a block, each kernel with its
// corrected twin (suffix _fixed). Launched with one block of 64 threads (two warps).

// RAW between warps: each thread reads the word the other warp wrote, no barrier.
extern "C" __global__ void swap_halves(const int *x, int *out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    out[t] = s[(t + 32) % 64];
}

extern "C" __global__ void swap_halves_fixed(const int *x, int *out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    out[t] = s[(t + 32) % 64];
}

// a non-atomic read-modify-write of one shared word by all 64 threads
extern "C" __global__ void count_plain(int *out)
{
    __shared__ int c;
    if (threadIdx.x == 0)
        c = 0;
    __syncthreads();
    c = c + 1;
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = c;
}

extern "C" __global__ void count_atomic(int *out)
{
    __shared__ int c;
    if (threadIdx.x == 0)
        c = 0;
    __syncthreads();
    atomicAdd(&c, 1);
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = c;
}

// warp 0 writes shared memory and exits; warp 1 reads it without a barrier
extern "C" __global__ void write_then_exit(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    if (t < 32) {
        s[t] = x[t] * 3;
        return;
    }
    out[t - 32] = s[63 - t];
}

extern "C" __global__ void write_then_exit_fixed(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    if (t < 32)
        s[t] = x[t] * 3;
    __syncthreads();
    if (t < 32)
        return;
    out[t - 32] = s[63 - t];
}

// lanes of one warp exchange values through shared memory without __syncwarp
// (launched with 32 threads): a hazard under independent thread scheduling
extern "C" __global__ void reverse_warp(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    s[t] = x[t] + 1;
    out[t] = s[31 - t];
}

extern "C" __global__ void reverse_warp_fixed(const int *x, int *out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    s[t] = x[t] + 1;
    __syncwarp();
    out[t] = s[31 - t];
}

// byte-sized elements: neighbouring threads write bytes of one 32-bit word (64 threads);
// without the barrier a thread reads the byte another warp wrote
extern "C" __global__ void reverse_bytes(const unsigned char *x, unsigned char *out)
{
    __shared__ unsigned char s[64];
    int t = threadIdx.x;
    s[t] = x[t] + 1;
    out[t] = s[63 - t];
}

extern "C" __global__ void reverse_bytes_fixed(const unsigned char *x, unsigned char *out)
{
    __shared__ unsigned char s[64];
    int t = threadIdx.x;
    s[t] = x[t] + 1;
    __syncthreads();
    out[t] = s[63 - t];
}
