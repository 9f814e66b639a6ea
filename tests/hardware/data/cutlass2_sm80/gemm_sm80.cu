// A CUTLASS 2.x device GEMM for sm_80 (cutlass::gemm::device::Gemm: FP16 A row-major and
// B column-major, FP32 accumulation and C/D row-major, threadblock 128 x 128 x 32, warps
// 64 x 64 x 32, mma.sync m16n8k16, a three-stage cp.async pipeline, the linear-combination
// epilogue D = alpha acc + beta C). Compiled twice by generate.py: with -ptx for the kernel
// (gemm_sm80.ptx), and as a host program that fills the kernel's Params with CUTLASS's own
// host code (as Gemm::initialize does, without a device) and writes them out.
#include <cstdio>
#include <cstdlib>
#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/device_kernel.h"
using Gemm = cutlass::gemm::device::Gemm<
    cutlass::half_t, cutlass::layout::RowMajor, cutlass::half_t, cutlass::layout::ColumnMajor,
    float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;
using GemmKernel = Gemm::GemmKernel;
template __global__ void cutlass::Kernel<GemmKernel>(typename GemmKernel::Params);

int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  auto pa = (cutlass::half_t*)strtoull(argv[4], 0, 0);
  auto pb = (cutlass::half_t*)strtoull(argv[5], 0, 0);
  auto pc = (float*)strtoull(argv[6], 0, 0);
  auto pd = (float*)strtoull(argv[7], 0, 0);
  float alpha = atof(argv[8]), beta = atof(argv[9]);
  cutlass::gemm::GemmCoord problem(M, N, K);
  Gemm::Arguments args(problem, {pa, K}, {pb, K}, {pc, N}, {pd, N}, {alpha, beta});
  if (Gemm::can_implement(args) != cutlass::Status::kSuccess) {
    std::fprintf(stderr, "cannot implement\n");
    return 2;
  }
  Gemm::ThreadblockSwizzle swizzle;
  cutlass::gemm::GemmCoord tiled = swizzle.get_tiled_shape(
      problem, {Gemm::ThreadblockShape::kM, Gemm::ThreadblockShape::kN,
                Gemm::ThreadblockShape::kK}, 1);
  GemmKernel::Params params(problem, tiled, args.ref_A.non_const_ref(),
                            args.ref_B.non_const_ref(), args.ref_C.non_const_ref(), args.ref_D,
                            args.epilogue, nullptr);
  dim3 grid = swizzle.get_grid_shape(tiled);
  std::printf("grid %u %u %u block %d 1 1 smem %d params %zu\n", grid.x, grid.y, grid.z,
              GemmKernel::kThreadCount, (int)sizeof(GemmKernel::SharedStorage), sizeof(params));
  std::printf("PARAMS ");
  for (size_t i = 0; i < sizeof(params); ++i)
    std::printf("%02x", reinterpret_cast<unsigned char const*>(&params)[i]);
  std::printf("\n");
  return 0;
}
