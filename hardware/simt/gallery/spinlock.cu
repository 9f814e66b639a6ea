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

// The two halves of one warp hand a value to each other through memory: each half
// waits for the other inside its own branch, so neither branch can finish first (a
// livelock under the lock-step SIMT stack, whichever path it runs first).
extern "C" __global__ void warp_handshake(volatile int *flags, int *out)
{
    int lane = threadIdx.x & 31;
    if (lane < 16) {
        flags[0] = 7;
        while (flags[1] == 0) {
        }
        out[lane] = flags[1];
    } else {
        while (flags[0] == 0) {
        }
        flags[1] = flags[0] + 1;
        out[lane] = flags[0];
    }
}
