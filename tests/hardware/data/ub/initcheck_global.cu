// initcheck: acc is accumulated into (acc[i] += x[i]) but the host never wrote it.
extern "C" __global__ void accumulate(const float *x, float *acc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    acc[i] += x[i];
}
