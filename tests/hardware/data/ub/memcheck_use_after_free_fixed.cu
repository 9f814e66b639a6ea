// The corrected twin of memcheck_use_after_free.cu: the same kernel, launched before
// the host frees its input.
extern "C" __global__ void copy(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[i];
}
