// FP8 weight dequantisation as LLM inference engines write it (sm_90): each row of
// E4M3 codes has one float scale; two codes at a time go through __nv_fp8x2_e4m3 ->
// __half2 (cvt.rn.f16x2.e4m3x2), then to float and times the scale.
// out[r][c] = float(q[r][c]) * scale[r]; cols even; one thread per pair.
#include <cuda_fp8.h>
#include <cuda_fp16.h>

extern "C" __global__ void dequant_e4m3(const __nv_fp8x2_e4m3 *q, const float *scale,
                                        float2 *out, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int pairs = cols / 2;
    if (i >= rows * pairs) return;
    float s = scale[i / pairs];
    float2 v = __half22float2(__half2(q[i]));
    out[i] = make_float2(v.x * s, v.y * s);
}

// The same for E5M2 codes, one at a time (float(__nv_fp8_e5m2)).
extern "C" __global__ void dequant_e5m2(const __nv_fp8_e5m2 *q, const float *scale,
                                        float *out, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    out[i] = float(q[i]) * scale[i / cols];
}

// The matching quantiser: code = E4M3(x / scale[r]) with saturation to +-448
// (cvt.rn.satfinite.e4m3x2.f32, the first source in the high byte).
extern "C" __global__ void quant_e4m3(const float2 *x, const float *scale,
                                      __nv_fp8x2_e4m3 *q, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int pairs = cols / 2;
    if (i >= rows * pairs) return;
    float inv = 1.0f / scale[i / pairs];
    float2 v = x[i];
    q[i] = __nv_fp8x2_e4m3(make_float2(v.x * inv, v.y * inv));
}
