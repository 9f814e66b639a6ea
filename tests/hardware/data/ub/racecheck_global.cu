// racecheck: global-memory races between blocks, each with its corrected twin.

// Each block stores its partial sum, counts itself with an atomic, and the last block to
// arrive adds the partial sums. Without __threadfence() the store of a partial sum is not
// ordered before the count that the last block observes: a race on partial[].
extern "C" __global__ void last_block_sum(const int *x, int *partial, unsigned *count,
                                          int *out)
{
    __shared__ bool last;
    int b = blockIdx.x;
    if (threadIdx.x == 0) {
        partial[b] = x[b] * 2;
        unsigned ticket = atomicAdd(count, 1u);
        last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        int sum = 0;
        for (int i = 0; i < gridDim.x; i++)
            sum += partial[i];
        out[0] = sum;
    }
}

extern "C" __global__ void last_block_sum_fixed(const int *x, int *partial, unsigned *count,
                                                int *out)
{
    __shared__ bool last;
    int b = blockIdx.x;
    if (threadIdx.x == 0) {
        partial[b] = x[b] * 2;
        __threadfence();
        unsigned ticket = atomicAdd(count, 1u);
        last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        __threadfence();
        int sum = 0;
        for (int i = 0; i < gridDim.x; i++)
            sum += partial[i];
        out[0] = sum;
    }
}

// block b reads what block b - 1 wrote, with nothing ordering the two
extern "C" __global__ void neighbour_read(const int *x, int *buf, int *out)
{
    int b = blockIdx.x, t = threadIdx.x;
    buf[b * 32 + t] = x[b * 32 + t] + b;
    if (b > 0)
        out[b * 32 + t] = buf[(b - 1) * 32 + t];
}

extern "C" __global__ void neighbour_read_fixed(const int *x, int *buf, int *out)
{
    int b = blockIdx.x, t = threadIdx.x;
    buf[b * 32 + t] = x[b * 32 + t] + b;
    if (b > 0)
        out[b * 32 + t] = x[(b - 1) * 32 + t] + b - 1;
}

// block 0 publishes 32 values and raises a flag; block 1 waits for the flag and reads
// them. Without __threadfence() on both sides the flag does not order the data.
extern "C" __global__ void flag_publish(const int *x, int *data, volatile int *flag, int *out)
{
    int t = threadIdx.x;
    if (blockIdx.x == 0) {
        data[t] = x[t] * 5;
        __syncthreads();
        if (t == 0)
            *flag = 1;
    } else {
        while (*flag == 0) {
        }
        out[t] = data[t];
    }
}

extern "C" __global__ void flag_publish_fixed(const int *x, int *data, volatile int *flag,
                                              int *out)
{
    int t = threadIdx.x;
    if (blockIdx.x == 0) {
        data[t] = x[t] * 5;
        __syncthreads();
        if (t == 0) {
            __threadfence();
            *flag = 1;
        }
    } else {
        while (*flag == 0) {
        }
        __threadfence();
        out[t] = data[t];
    }
}
