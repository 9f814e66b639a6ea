// A spin lock taken by every thread in turn (independent thread scheduling, sm_70+):
// correct on Volta and later, where the diverged threads of a warp make progress
// independently; under the lock-step (pre-Volta) SIMT stack the threads that failed to
// take the lock spin forever while the holder waits at the reconvergence point.
__device__ int lock;

__device__ void acquire(int *l)
{
    while (atomicCAS(l, 0, 1) != 0) {
    }
    __threadfence();
}

__device__ void release(int *l)
{
    __threadfence();
    atomicExch(l, 0);
}

// order[k] = index of the thread that entered the critical section k-th; total[0]
// counts the entries (incremented without an atomic: the lock protects it).
extern "C" __global__ void spinlock_order(int *order, volatile int *total, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        acquire(&lock);
        int k = *total;
        order[k] = i;
        *total = k + 1;
        release(&lock);
    }
}

// Warp 1 waits for a flag that warp 0 sets after writing its data (no __syncthreads):
// the waiting warp must not keep the producer from running.
extern "C" __global__ void flag_handoff(volatile int *flag, volatile int *data, int *out)
{
    int t = threadIdx.x;
    if (t >= 32) {
        while (*flag == 0) {
        }
        __threadfence();
        out[t - 32] = data[t - 32];
    } else {
        data[t] = t * t + 1;
        __threadfence();
        if (t == 0)
            *flag = 1;
    }
}
