// initcheck: only threads 0-31 fill the 64-float shared array, all 64 read it back.
extern "C" __global__ void shared_unwritten(const float *x, float *out)
{
    __shared__ float s[64];
    int t = threadIdx.x;
    if (t < 32)
        s[t] = x[t];
    __syncthreads();
    out[t] = s[t];
}
