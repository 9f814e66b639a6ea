// Edge cases of ordinary CUDA C, each checked against the C / PTX ISA semantics:
// float->int conversions of NaN, negative and out-of-range values (cvt saturates, NaN -> 0),
// int8/int16 sign extension with a negative-going 64-bit index, C division and remainder
// of negative numbers, width < 32 shuffles, ballot under divergence, continue/break in
// divergent loops, atomicCAS loops with atomicInc/atomicDec wrap-around, an early return
// before __syncthreads, atomicAdd on float in global vs shared memory, double tanh/rsqrt,
// and device-function calls (double sin/cos slow path, a __noinline__ function).
extern "C" __global__ void float_to_int_edges(const float *x, const double *y, int *oi,
    unsigned *ou, long long *ol, unsigned long long *oul)
{
    int i = threadIdx.x; float v = x[i]; double w = y[i];
    oi[5*i] = (int)v; oi[5*i+1] = __float2int_rn(v); oi[5*i+2] = __float2int_rd(v);
    oi[5*i+3] = __float2int_ru(v); oi[5*i+4] = (int)w;
    ou[2*i] = (unsigned)v; ou[2*i+1] = (unsigned)w;
    ol[i] = (long long)v; oul[i] = (unsigned long long)v;
}

extern "C" __global__ void narrow_divmod(const signed char *a, const short *b, const int *p,
    const int *q, const long long *r, const long long *s, int *o, long long *ol, long long base)
{
    int i = threadIdx.x;
    long long j = base - (long long)i;          // negative-going 64-bit index
    o[6*i] = a[j]; o[6*i+1] = b[j]; o[6*i+2] = (unsigned char)a[j];
    o[6*i+3] = p[i] / q[i]; o[6*i+4] = p[i] % q[i]; o[6*i+5] = (int)((unsigned)p[i] / (unsigned)q[i]);
    ol[2*i] = r[i] / s[i]; ol[2*i+1] = r[i] % s[i];
}

extern "C" __global__ void sub_warp_shuffles(const int *x, int *o)
{
    int i = threadIdx.x; int v = x[i];
    int s8 = v;
    for (int m = 4; m >= 1; m >>= 1) s8 += __shfl_xor_sync(0xffffffff, s8, m, 8);
    int s16 = v;
    for (int m = 8; m >= 1; m >>= 1) s16 += __shfl_xor_sync(0xffffffff, s16, m, 16);
    o[5*i] = s8; o[5*i+1] = s16;
    o[5*i+2] = __shfl_up_sync(0xffffffff, v, 3, 8);
    o[5*i+3] = __shfl_down_sync(0xffffffff, v, 5, 16);
    o[5*i+4] = __shfl_sync(0xffffffff, v, i + 5, 4);
}

extern "C" __global__ void divergent_ballot(const int *x, unsigned *o)
{
    int v = x[threadIdx.x];
    unsigned r;
    if (v & 1) {
        unsigned m = __activemask();
        unsigned b = __ballot_sync(m, v > 10);
        r = b + 1000u * __popc(b) + 7u * __any_sync(m, v > 20) + 11u * __all_sync(m, v > 0);
    } else {
        unsigned m = __activemask();
        r = m ^ __ballot_sync(m, v < 5);
    }
    o[threadIdx.x] = r;
}

extern "C" __global__ void continue_break(const int *x, int *o)
{
    int i = threadIdx.x; int n = x[i]; int acc = 0;
    for (int k = 0; k < 40; ++k) {
        if ((k + i) % 3 == 0) continue;
        if (i & 1) { acc += k * 3; if (acc > n) break; }
        else { acc ^= k; if (k > n) { acc += 100; break; } }
    }
    o[i] = acc;
}

extern "C" __global__ void cas_loops(const float *x, float *mx, double *sum, unsigned *cnt)
{
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    int *addr = (int *)mx;
    int old = *addr, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= v) break;
        old = atomicCAS(addr, assumed, __float_as_int(v));
    } while (assumed != old);
    unsigned long long *a2 = (unsigned long long *)sum;
    unsigned long long o2 = *a2, as2;
    do {
        as2 = o2;
        o2 = atomicCAS(a2, as2, __double_as_longlong((double)v + __longlong_as_double(as2)));
    } while (as2 != o2);
    atomicInc(cnt, 5u);
    atomicDec(cnt + 1, 3u);
}

extern "C" __global__ void early_return_sync(const float *x, float *o, int n)
{
    __shared__ float s[128];
    int t = threadIdx.x;
    if (t >= n) return;
    s[t] = x[t];
    __syncthreads();
    o[t] = s[(t + 1) % n] + s[t];
}

extern "C" __global__ void float_atomic_add(const float *x, float *global_sum, float *shared_sum)
{
    __shared__ float acc;
    if (threadIdx.x == 0) acc = 0.0f;
    __syncthreads();
    atomicAdd(global_sum, x[threadIdx.x]);
    atomicAdd(&acc, x[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) *shared_sum = acc;
}

extern "C" __global__ void double_math(const double *x, double *o)
{
    // tanh and rsqrt refine the rcp.approx.ftz.f64 / rsqrt.approx.f64 seeds
    double a = x[threadIdx.x];
    o[3*threadIdx.x] = tanh(a);
    o[3*threadIdx.x+1] = rsqrt(fabs(a));
    o[3*threadIdx.x+2] = 1.0 / a;
}

__device__ __noinline__ int collatz_steps(int v)
{
    int s = 0;
    while (v != 1 && s < 1000) { v = (v & 1) ? 3 * v + 1 : v >> 1; ++s; }
    return s;
}

extern "C" __global__ void device_calls(const double *x, const int *v, double *o, int *steps)
{
    // double sin/cos call nvcc's argument-reduction slow path (.func with carry chains
    // and a local array) for large arguments; collatz_steps is a __noinline__ .func
    int i = threadIdx.x;
    o[2*i] = sin(x[i]);
    o[2*i+1] = cos(x[i]);
    steps[i] = collatz_steps(v[i]);
}

struct Triple { int a; float b; long long c; };
__device__ __noinline__ int first_negative(const int *v, int n)
{
    for (int k = 0; k < n; ++k) { if (v[k] < 0) return k; }
    return -1;
}
__device__ __noinline__ Triple make_triple(int x, float y)
{
    Triple p; p.a = x * 3; p.b = y * 0.5f; p.c = (long long)x << 33; return p;
}
__device__ __noinline__ void bump(int *p, int k) { atomicAdd(p, k); }
__device__ __noinline__ int nested(const int *v, int n, int *count)
{
    int r = first_negative(v, n);
    bump(count, r < 0 ? 100 : r);
    return r * 2 + first_negative(v + 1, n - 1);
}
__device__ __noinline__ float no_arguments() { return 2.5f; }

extern "C" __global__ void call_forms(const int *v, int *o, long long *ol, float *of, int *count)
{
    // early return from a loop, a struct return value, a void function, nested calls,
    // a function without arguments, calls under divergence
    int i = threadIdx.x;
    const int *row = v + 8 * i;
    o[2*i] = first_negative(row, 8);
    o[2*i+1] = (i & 1) ? nested(row, 8, count) : first_negative(row + 2, 6);
    Triple p = make_triple(i, (float)o[2*i]);
    ol[i] = p.c + p.a;
    of[i] = p.b + no_arguments();
}

extern "C" __global__ void int8_dot(const int *a, const int *b, int *o, unsigned *ou)
{
    // __dp4a / __dp2a_lo / __dp2a_hi: byte and half-word dot products with accumulate
    int i = threadIdx.x;
    o[3*i] = __dp4a(a[i], b[i], i * 1000 - 5000);
    o[3*i+1] = __dp2a_lo(a[i], b[i], -i);
    o[3*i+2] = (int)__dp2a_hi((unsigned)a[i], (unsigned)b[i], (unsigned)i);
    ou[i] = __dp4a((unsigned)a[i], (unsigned)b[i], (unsigned)i);
}
