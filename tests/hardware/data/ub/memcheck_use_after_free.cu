// memcheck: the host frees `a` and then launches this copy (use after free); the
// corrected twin (memcheck_use_after_free_fixed.cu, the same kernel) is launched
// before the free.
extern "C" __global__ void copy(const float *a, float *out)
{
    int i = threadIdx.x;
    out[i] = a[i];
}
