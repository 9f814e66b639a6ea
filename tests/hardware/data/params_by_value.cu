// A by-value parameter struct indexed at run time: nvcc takes the parameter's address
// (mov.b64 %rd, param) and reads through it (ld.param.u32 %r, [%rd]), as CUTLASS 2.x
// kernels do with their Params struct.
// nvcc -arch=sm_90a -ptx params_by_value.cu -o params_by_value.ptx
struct Params { int a[78]; int scale; int bias; };
extern "C" __global__ void params_by_value(Params p, int *out)
{
    int i = threadIdx.x;
    out[i] = p.a[i % 78] * p.scale + p.bias;
}
