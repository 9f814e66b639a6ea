// Row-wise vs column-wise traversal of a row-major rows x cols float matrix.
// Thread t of the launch owns row t (row_sums) or column t (col_sums).
// In row_sums, consecutive lanes read addresses cols*4 bytes apart at each step
// (uncoalesced); in col_sums they read consecutive words (coalesced).
extern "C" __global__ void row_sums(const float *m, float *out, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += m[r * cols + c];
        out[r] = s;
    }
}

extern "C" __global__ void col_sums(const float *m, float *out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float s = 0.0f;
        for (int r = 0; r < rows; ++r) s += m[r * cols + c];
        out[c] = s;
    }
}
