// Half-precision arithmetic: binary16 scalar and packed (f16x2) ops, bfloat16 with a
// comparison (nvcc inlines an asm block with a register named without %).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void halfk(const __half *x, __half *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hfma(__hadd(x[i], __float2half(1.0f)), x[i], __hneg(x[n - 1 - i]));
}
extern "C" __global__ void half2k(const __half2 *x, __half2 *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hmul2(__hadd2(x[i], x[n - 1 - i]), __hmax2(x[i], x[0]));
}
extern "C" __global__ void bf16k(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __hlt(x[i], x[0]) ? __hfma(x[i], x[i], x[0]) : __hsub(x[i], x[0]);
}
