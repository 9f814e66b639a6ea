"""The peer of ``bench simt``: the gallery's 64x64 shared-memory tiled matmul (16x16
tiles, 16 blocks of 256 threads) written for numba's CUDA simulator and timed in a child
process (the simulator is chosen by ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported).

Run as ``python path/to/_numba_peer.py N`` (a file, so that the child imports only numba
and NumPy): prints the best wall time of N launches in seconds, after a warm-up launch,
and the largest error against a float64 product (so a caller sees that it computed the
product). numba is optional, never a dependency; without it this exits with status 3.
"""
import os
import sys
import time

T = 16
cuda = float32 = None  # numba's, set by main() (the simulator rebinds module globals)


def _kernel():
    @cuda.jit
    def matmul_tiled(A, B, C, n):
        sA = cuda.shared.array((T, T), float32)
        sB = cuda.shared.array((T, T), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * T + ty
        col = cuda.blockIdx.x * T + tx
        acc = float32(0.0)
        for t in range(n // T):
            sA[ty, tx] = A[row, t * T + tx]
            sB[ty, tx] = B[t * T + ty, col]
            cuda.syncthreads()
            for k in range(T):
                acc += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        C[row, col] = acc
    return matmul_tiled


def main(argv):
    global cuda, float32
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported
    try:
        import numpy as np
        from numba import cuda, float32
    except Exception as e:  # numba absent or broken
        print(f"numba not importable: {e}", file=sys.stderr)
        return 3
    matmul_tiled = _kernel()
    repeat = max(int(argv[0]) if argv else 1, 1)
    n = 64
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    matmul_tiled[(n // T, n // T), (T, T)](A, B, C, n)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        matmul_tiled[(n // T, n // T), (T, T)](A, B, C, n)
        best = min(best, time.perf_counter() - t0)
    err = float(np.abs(C.astype(np.float64) - A.astype(np.float64) @ B.astype(np.float64)).max())
    print(f"{best:.6f} {err:.3e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
