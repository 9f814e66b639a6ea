// Warp matrix multiply-accumulate through the nvcuda::wmma API (sm_80): one warp loads
// the fragments, multiplies and stores one tile. blockDim = 32, grid = 1.
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;

// C (16 x 16, float, row-major) = A (16 x 16, half, row-major, leading dimension lda)
// @ B (16 x 16, half, column-major, leading dimension lda).
extern "C" __global__ void wmma_f16(const half *a, const half *b, float *c, int lda)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, lda);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// C (32 x 8, half, column-major) += A (32 x 16, half, column-major) @ B (16 x 8, half,
// row-major): a half-precision accumulator read and written in place.
extern "C" __global__ void wmma_f16_acc(const half *a, const half *b, half *c)
{
    wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, half> fc;
    wmma::load_matrix_sync(fc, c, 32, wmma::mem_col_major);
    wmma::load_matrix_sync(fa, a, 32);
    wmma::load_matrix_sync(fb, b, 8);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 32, wmma::mem_col_major);
}

// C (16 x 16, int, row-major) = A (16 x 16, int8, row-major) @ B (16 x 16, int8,
// column-major): exact integer accumulation.
extern "C" __global__ void wmma_s8(const signed char *a, const signed char *b, int *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
    wmma::fill_fragment(fc, 0);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// C (16 x 16, float, column-major) = A (16 x 16, bf16, row-major) @ B (16 x 16, bf16,
// row-major).
extern "C" __global__ void wmma_bf16(const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                                     float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_col_major);
}

// C (16 x 16, float, row-major) = A (16 x 8) @ B (8 x 16) in TF32: the float inputs are
// rounded to TF32 (cvt.rna.tf32.f32) in the fragment, element by element.
extern "C" __global__ void wmma_tf32(const float *a, const float *b, float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 8);
    wmma::load_matrix_sync(fb, b, 8);
    for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// C (8 x 32, int, row-major) = A (8 x 16, uint8, row-major) @ B (16 x 32, uint8,
// row-major): the m8n32k16 shape with unsigned bytes, exact.
extern "C" __global__ void wmma_u8_wide(const unsigned char *a, const unsigned char *b,
                                        int *c)
{
    wmma::fragment<wmma::matrix_a, 8, 32, 16, unsigned char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 32, 16, unsigned char, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 8, 32, 16, int> fc;
    wmma::fill_fragment(fc, 7);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 32);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 32, wmma::mem_row_major);
}
