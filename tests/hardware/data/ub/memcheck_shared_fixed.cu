// The corrected twin of memcheck_shared.cu: the second value goes to dyn[tid].
extern "C" __global__ void shared_overrun(const float *x, float *out)
{
    __shared__ float s[32];
    extern __shared__ float dyn[];
    int t = threadIdx.x;
    dyn[t] = 0.0f;
    s[t] = x[t];
    __syncthreads();
    dyn[t] = 2.0f * x[t];
    __syncthreads();
    out[t] = s[t] + dyn[t];
}
