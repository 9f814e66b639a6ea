// Memory spaces and vector accesses: float4 loads/stores (ld/st.global.v4), a local
// array indexed by data (.local, through the stack depot), a generic pointer that may
// point to shared or global memory (cvta.shared + generic ld/st), and dynamic shared
// memory (extern __shared__).

extern "C" __global__ void vec4_scale(const float4 *in, float4 *out, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = in[i];
        out[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
    }
}

// out[i] = table[x[i] % 8] where the table lives in local memory (per thread).
extern "C" __global__ void local_table(const int *x, int *out, int n)
{
    int table[8];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 8; ++k) table[k] = (k + 1) * (i + 1);
    if (i < n) out[i] = table[x[i] & 7];
}

// Generic pointers: even warps read through a pointer to shared memory, odd warps
// through a pointer to global memory; blockDim.x = 64.
extern "C" __global__ void generic_pointer(const float *g, float *out)
{
    __shared__ float s[66];
    int t = threadIdx.x;
    s[t] = g[t] * 2.0f;
    if (t < 2) s[64 + t] = g[64 + t] * 2.0f;
    __syncthreads();
    const float *p = ((t >> 5) & 1) ? (g + t) : (s + t);
    out[t] = p[0] + p[1] + p[2];
}

// Dynamic shared memory: reverse each block's slice.
extern "C" __global__ void dyn_reverse(const int *in, int *out)
{
    extern __shared__ int buf[];
    int t = threadIdx.x;
    int base = blockIdx.x * blockDim.x;
    buf[t] = in[base + t];
    __syncthreads();
    out[base + t] = buf[blockDim.x - 1 - t];
}
