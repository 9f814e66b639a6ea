// memcheck: loc[k] with k = 6 on a 6-float local array (runtime index: the array lives
// in local memory; its frame is padded to 32 bytes, so the read stays in the frame).
extern "C" __global__ void local_overrun(const int *idx, float *out)
{
    float loc[6];
    int t = threadIdx.x;
    for (int j = 0; j < 6; ++j)
        loc[j] = (float)(t * 10 + j);
    out[t] = loc[idx[t]];
}
