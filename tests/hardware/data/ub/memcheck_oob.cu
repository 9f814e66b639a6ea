// memcheck: out-of-bounds reads that land past the end of a 32-float array and before
// its start (a[i + 128], a[i - 128]); on a GPU they can hit a neighbouring allocation.
extern "C" __global__ void read_past_end(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[i + 128];
}

extern "C" __global__ void read_before_start(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[i - 128];
}
