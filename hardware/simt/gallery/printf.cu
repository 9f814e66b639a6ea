// Device printf (vprintf) with the conversions of printf_formats.h, and a device-side
// assert (__assertfail).
#include <cassert>
#include <cstdio>
#include "printf_formats.h"

extern "C" __global__ void printf_formats(const int *iv, const long long *lv,
                                          const double *dv, const float *fv, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        PRINTF_ROW_INT(i, iv[i], lv[i]);
        PRINTF_ROW_LONG(i, iv[i], lv[i]);
        PRINTF_ROW_FLOAT(i, dv[i], fv[i]);
    }
}

extern "C" __global__ void assert_positive(const int *v, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(v[i] > 0);
        out[i] = 2 * v[i];
    }
}
