// memcheck: a 4-byte load from an address 2 bytes into a float array.
extern "C" __global__ void misaligned_load(const float *a, float *out)
{
    int i = threadIdx.x;
    const float *p = (const float *)((const char *)(a + i) + 2);
    out[i] = *p;
}
