// memcheck: s[tid + 32] on a 32-float static shared array lands in the dynamic shared
// array that follows it (silent on a GPU).
extern "C" __global__ void shared_overrun(const float *x, float *out)
{
    __shared__ float s[32];
    extern __shared__ float dyn[];
    int t = threadIdx.x;
    dyn[t] = 0.0f;
    s[t] = x[t];
    __syncthreads();
    s[t + 32] = 2.0f * x[t];
    __syncthreads();
    out[t] = s[t] + dyn[t];
}
