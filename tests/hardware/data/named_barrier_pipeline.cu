// A warp-specialised pipeline on named barriers whose ids and thread counts are
// registers (as CUTLASS's NamedBarrier emits them: bar.sync %r, %r / bar.arrive %r, %r),
// with setmaxnreg: warpgroup 0 gives registers up (dec 40) and fills a two-stage ring in
// shared memory; warpgroups 1 and 2 take them (inc 232) and each accumulates
// acc += stage[s][(t + wg) % 128] * wg over the stages. Barrier 1 + s: stage s full
// (producer arrives, consumers sync); barrier 3 + s: stage s free (consumers arrive,
// producer syncs); 384 threads each.
// nvcc -arch=sm_90a -ptx named_barrier_pipeline.cu -o named_barrier_pipeline.ptx
__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(n) : "memory"); }
extern "C" __global__ void __launch_bounds__(384) named_barrier_pipeline(const float* in, float* out, int iters) {
  __shared__ float stage[2][128];
  int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    for (int i = 0; i < iters; ++i) {
      int s = i % 2;
      if (i >= 2) named_sync(3 + s, 384);        // wait until both consumers freed stage s
      stage[s][t] = in[i * 128 + t];
      named_arrive(1 + s, 384);                  // stage s full
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float acc = 0.f;
    for (int i = 0; i < iters; ++i) {
      int s = i % 2;
      named_sync(1 + s, 384);
      acc += stage[s][(t + wg) % 128] * (float)wg;
      named_arrive(3 + s, 384);
    }
    out[(wg - 1) * 128 + t] = acc;
  }
}
