// The corrected twin of memcheck_local.cu: the index is clamped to the array.
extern "C" __global__ void local_overrun(const int *idx, float *out)
{
    float loc[6];
    int t = threadIdx.x;
    for (int j = 0; j < 6; ++j)
        loc[j] = (float)(t * 10 + j);
    out[t] = loc[min(idx[t], 5)];
}
