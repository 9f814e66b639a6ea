// Integer intrinsics (one result per column) and warp intrinsics (__reduce_add_sync,
// __match_any_sync, __activemask, __shfl_sync with a width), checked against Python integers.
extern "C" __global__ void int_intrinsics(const unsigned *x, unsigned *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = x[i];
    int s = (int)v;
    unsigned *o = y + 16 * i;
    o[0] = __popc(v); o[1] = __clz(v); o[2] = __brev(v); o[3] = __byte_perm(v, v * 3u, 0x5140);
    o[4] = __umulhi(v, 12345u); o[5] = __funnelshift_l(v, v * 7u, i & 31); o[6] = __ffs(v);
    o[7] = (unsigned)(s / (i + 1)); o[8] = (v % (unsigned)(i + 3)); o[9] = (unsigned)__mul24(s, 7);
    o[10] = (unsigned)abs(s); o[11] = min(v, 77u); o[12] = (unsigned)max(s, -3);
    o[13] = __sad(v, 5u, 1u); o[14] = (unsigned)__double2int_rn((double)v * 0.5);
    unsigned long long w = (unsigned long long)v * 0x9E3779B97F4A7C15ull;
    o[15] = (unsigned)(w >> 40) + (unsigned)(w / 1000003ull);
}

extern "C" __global__ void warp_intrinsics(const int *x, int *y)
{
    int v = x[threadIdx.x];
    __syncwarp();
    unsigned m = __activemask();
    int s = __reduce_add_sync(0xffffffff, v);
    unsigned mm = __match_any_sync(0xffffffff, v & 3);
    y[threadIdx.x] = s + (int)m + (int)mm + __shfl_sync(0xffffffff, v, 3, 8);
}
