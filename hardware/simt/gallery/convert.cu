// Low-precision conversions: float -> bf16 and float -> FP8 (E4M3 / E5M2, two per
// instruction, saturating to the largest finite value) and back.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_fp16.h>

extern "C" __global__ void to_bf16(const float *x, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
        out[i] = __bfloat16_as_ushort(h);
    }
}

extern "C" __global__ void to_fp16(const float *x, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __half_as_ushort(__float2half_rn(x[i]));
}

// Pairs (x[2i], x[2i+1]) -> one 16-bit word: x[2i] in the low byte, x[2i+1] high.
extern "C" __global__ void to_e4m3(const float *x, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 v = make_float2(x[2 * i], x[2 * i + 1]);
        __nv_fp8x2_storage_t s = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
        out[i] = s;
    }
}

extern "C" __global__ void to_e5m2(const float *x, unsigned short *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 v = make_float2(x[2 * i], x[2 * i + 1]);
        __nv_fp8x2_storage_t s = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E5M2);
        out[i] = s;
    }
}

// Round trip float -> bf16 -> float, with a scale applied in float.
extern "C" __global__ void bf16_round_trip(const float *x, float *out, float scale, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __bfloat162float(__float2bfloat16_rn(x[i] * scale));
}

// Integer conversions with the rounding modes of the cvt instruction.
extern "C" __global__ void float_to_int(const float *x, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[4 * i + 0] = __float2int_rn(v);
        out[4 * i + 1] = __float2int_rz(v);
        out[4 * i + 2] = __float2int_rd(v);
        out[4 * i + 3] = __float2int_ru(v);
    }
}
