// initcheck: loc[0..n-1] is written, loc[k] is read with k >= n for some threads.
extern "C" __global__ void local_unwritten(const int *n, const int *k, float *out)
{
    float loc[8];
    int t = threadIdx.x;
    for (int j = 0; j < n[t]; ++j)
        loc[j] = (float)(t + j);
    out[t] = loc[k[t]];
}
