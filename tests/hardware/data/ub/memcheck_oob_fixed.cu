// The corrected twin of memcheck_oob.cu: the index wraps into the array.
extern "C" __global__ void read_past_end(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[(i + 128) % 32];
}

extern "C" __global__ void read_before_start(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[(i + 31) % 32];
}
