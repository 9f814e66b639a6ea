// The corrected twin of memcheck_misaligned.cu: the bytes are assembled from aligned
// words (little-endian: bytes 2-5 of element i).
extern "C" __global__ void misaligned_load(const float *a, float *out)
{
    int i = threadIdx.x;
    const unsigned *w = (const unsigned *)a;
    unsigned lo = w[i], hi = w[i + 1];
    out[i] = __uint_as_float((lo >> 16) | (hi << 16));
}
