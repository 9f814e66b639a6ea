// The branch-divergence example: if (x < 4) { A; B; } else { X; Y; } Z;
// Lanes with x < 4 take the if path, the others the else path; both paths are
// executed by the warp under complementary masks, then the warp reconverges at Z.
// Each statement is a global store, so that nvcc keeps a real branch (it would
// if-convert pure arithmetic into selp).
extern "C" __global__ void divergence(const int *x, int *a, int *b, int *z)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    if (v < 4) {
        a[i] = v * 3;        // A
        b[i] = v + 7;        // B
    } else {
        a[i] = v - 4;        // X
        b[i] = v ^ 5;        // Y
    }
    z[i] = v + i;            // Z
}

// A divergence-heavy kernel: data-dependent trip counts and nested branches.
extern "C" __global__ void divergent_loop(const int *x, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    int acc = 0;
    for (int k = 0; k < (v & 15); ++k) {
        if ((k + v) & 1) {
            acc += k * v;
        } else if (k & 2) {
            acc ^= v >> 1;
        } else {
            acc -= k;
        }
    }
    out[i] = acc;
}
