"""Gallery kernels: outputs bit-exact against NumPy, statistics against hand counts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.simt import GlobalMemory, gallery


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Single-rounded float32 fma, independent of the interpreter: the float64 product
    of float32 values is exact, and the sum is rounded once with Fraction where the
    float64 sum could double-round (checked exhaustively per element)."""
    from fractions import Fraction
    a64, b64, c64 = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    a64, b64, c64 = np.broadcast_arrays(a64, b64, c64)
    out = np.empty(a64.shape, np.float32)
    for i in np.ndindex(a64.shape):
        exact = Fraction(float(a64[i])) * Fraction(float(b64[i])) + Fraction(float(c64[i]))
        out[i] = _round_fraction_f32(exact)
    return out


def _round_fraction_f32(x) -> np.float32:
    from fractions import Fraction
    f = np.float32(float(x))  # a nearby candidate; fix it up by exact comparison
    cands = [f, np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))]
    best = None
    for c in cands:
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - x)
        even = (int(np.float32(c).view(np.uint32)) & 1) == 0
        key = (d, not even)
        if best is None or key < best[0]:
            best = (key, c)
    return np.float32(best[1])


def _launch(name, kernel, grid, block, arrays, scalars=(), outs=()):
    mem = GlobalMemory()
    ptrs = [mem.to_device(a) for a in arrays]
    optr = [mem.alloc(max(1, nbytes)) for nbytes in outs]
    st_ = gallery.load(name).launch(kernel, grid, block, ptrs + optr + list(scalars), mem)
    return mem, optr, st_


def test_vector_add_and_stats():
    n = 40
    a = np.arange(n, dtype=np.float32) * np.float32(0.1)
    b = np.ones(n, dtype=np.float32) / np.float32(3)
    mem = GlobalMemory()
    pa, pb = mem.to_device(a), mem.to_device(b)
    pc = mem.alloc(4 * n)
    st_ = gallery.load("vector_add").launch("vector_add", 2, 32, [pa, pb, pc, n], mem)
    np.testing.assert_array_equal(mem.from_device(pc, np.float32, n).view(np.uint32),
                                  (a + b).view(np.uint32))
    # hand count: 10 instructions up to the branch for both warps (64 lanes); the body of
    # 11 instructions for warp 0 (32 lanes) and warp 1 (8 lanes); ret for both warps
    assert st_.warp_instructions == 2 * 10 + 2 * 11 + 2
    assert st_.thread_instructions == 64 * 10 + 40 * 11 + 64
    assert st_.divergent_branches == 1
    assert st_.max_stack_depth == 2
    # loads: 2 per warp = 4 requests; warp 0 reads 128 B = 4 sectors per array,
    # warp 1 reads 32 B = 1 sector per array
    assert st_.global_load_requests == 4
    assert st_.global_load_sectors == 2 * (4 + 1)
    assert st_.global_store_requests == 2
    assert st_.global_store_sectors == 4 + 1


def test_divergence_example_masks_and_counts():
    # lanes with x < 4 take the if path; x = lane % 8 gives 16 lanes on each side
    x = (np.arange(32) % 8).astype(np.int32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    pa, pb, pz = (mem.alloc(128) for _ in range(3))
    st_ = gallery.load("divergence").launch("divergence", 1, 32, [px, pa, pb, pz], mem)
    a = mem.from_device(pa, np.int32, 32)
    b = mem.from_device(pb, np.int32, 32)
    z = mem.from_device(pz, np.int32, 32)
    np.testing.assert_array_equal(a, np.where(x < 4, x * 3, x - 4))
    np.testing.assert_array_equal(b, np.where(x < 4, x + 7, x ^ 5))
    np.testing.assert_array_equal(z, x + np.arange(32))
    lines = gallery.source("divergence").splitlines()

    def line_of(text):
        return next(i + 1 for i, ln in enumerate(lines) if ln.strip().startswith(text))
    # the common prefix (17 instructions incl. the branch) runs with 32 lanes
    assert st_.line_thread_instructions[line_of("@%p1 bra")] == 32
    # the if path (A; B) and the else path (X; Y) run with 16 lanes each
    assert st_.line_thread_instructions[line_of("mul.lo.s32 \t%r10")] == 16
    assert st_.line_thread_instructions[line_of("xor.b32")] == 16
    # Z after reconvergence: 32 lanes again
    assert st_.line_thread_instructions[line_of("cvt.u32.u64")] == 32
    assert st_.divergent_branches == 1
    assert st_.max_stack_depth == 3
    # 17 before, bra.uni + 3 (else) + 4 (if: 3 + bra.uni), then 10 after
    assert st_.warp_instructions == 17 + 1 + 3 + 4 + 10
    assert st_.thread_instructions == 32 * 17 + 16 * (1 + 3 + 4) + 32 * 10
