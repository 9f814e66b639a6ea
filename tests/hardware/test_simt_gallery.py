"""Gallery kernels: outputs bit-exact against NumPy, statistics against hand counts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simt_reference import bf16_codes, f16_codes, fma32, nearest_code, wrap

from hardware.simt import GlobalMemory, StepLimitError, gallery


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


# ----------------------------------------------------------------------------- matmul


def _matmul_ref(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """acc = fma(A[:, p], B[p, :], acc) for p = 0..k-1 (nvcc contracts a*b + acc)."""
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for p in range(A.shape[1]):
        acc = fma32(A[:, p][:, None], B[p, :][None, :], acc)
    return acc


@settings(max_examples=5)
@given(st.integers(0, 2**32 - 1))
def test_matmul_tiled_and_naive_bit_exact(seed):
    rng = np.random.default_rng(seed)
    n = m = 32
    k = 48
    A = rng.standard_normal((n, k)).astype(np.float32)
    B = rng.standard_normal((k, m)).astype(np.float32)
    ref = _matmul_ref(A, B)
    for kernel in ("matmul_tiled", "matmul_naive"):
        mem = GlobalMemory()
        pa, pb = mem.to_device(A), mem.to_device(B)
        pc = mem.alloc(4 * n * m)
        gallery.load("matmul").launch(kernel, (m // 16, n // 16), (16, 16),
                                      [pa, pb, pc, n, m, k], mem)
        C = mem.from_device(pc, np.float32, (n, m))
        np.testing.assert_array_equal(C.view(np.uint32), ref.view(np.uint32), err_msg=kernel)


def test_matmul_tiled_statistics():
    # 64x64, 16x16 tiles: 16 blocks of 8 warps, 4 tile steps, 2 barriers each
    N = 64
    A = np.ones((N, N), np.float32)
    mem = GlobalMemory()
    pa, pb = mem.to_device(A), mem.to_device(A)
    pc = mem.alloc(4 * N * N)
    st_ = gallery.load("matmul").launch("matmul_tiled", (4, 4), (16, 16),
                                        [pa, pb, pc, N, N, N], mem)
    np.testing.assert_array_equal(mem.from_device(pc, np.float32, (N, N)), np.float32(N))
    warps = 16 * 8
    assert st_.barriers == 16 * 4 * 2
    # a warp covers two 16-float rows: each global load touches 2 x 64 B = 4 sectors
    assert st_.global_load_requests == warps * 4 * 2
    assert st_.global_load_sectors == warps * 4 * 2 * 4
    assert st_.global_store_sectors == warps * 4
    # As[ty][p]: two distinct words (one per row), same bank? rows are 64 B apart:
    # word ty*16+p for ty in {2w, 2w+1} -> banks differ by 16: no conflict;
    # Bs[p][tx]: 16 consecutive words, read by both half-warps (broadcast): no conflict
    assert st_.shared_load_bank_conflicts == 0
    assert st_.shared_load_requests == warps * 4 * 16 * 2
    assert st_.simd_efficiency == 1.0
    assert st_.divergent_branches == 0


@pytest.mark.parametrize("kernel,ways", [("transpose_unpadded", 32), ("transpose_padded", 1)])
def test_transpose_bank_conflicts(kernel, ways):
    n = 64
    x = np.arange(n * n, dtype=np.float32).reshape(n, n)
    mem = GlobalMemory()
    pi = mem.to_device(x)
    po = mem.alloc(4 * n * n)
    st_ = gallery.load("matmul").launch(kernel, (2, 2), (32, 32), [pi, po, n], mem)
    np.testing.assert_array_equal(mem.from_device(po, np.float32, (n, n)), x.T)
    warps = 4 * 32
    # the row-wise store is conflict-free; the column read tile[tx][ty] is 32-way
    # unpadded (stride 32 words) and conflict-free padded (stride 33)
    assert st_.shared_store_bank_conflicts == 0
    assert st_.shared_load_wavefronts == warps * ways
    assert st_.shared_load_bank_conflicts == warps * (ways - 1)


# -------------------------------------------------------------------------- traversal


@pytest.mark.parametrize("rows,cols", [(32, 32), (64, 16)])
def test_row_vs_column_traversal(rows, cols):
    rng = np.random.default_rng(rows)
    M = rng.standard_normal((rows, cols)).astype(np.float32)
    res = {}
    for kernel, count in (("row_sums", rows), ("col_sums", cols)):
        mem = GlobalMemory()
        pm = mem.to_device(M)
        po = mem.alloc(4 * count)
        st_ = gallery.load("traversal").launch(kernel, -(-count // 32), 32,
                                               [pm, po, rows, cols], mem)
        out = mem.from_device(po, np.float32, count)
        ref = np.zeros(count, np.float32)
        for j in range(cols if kernel == "row_sums" else rows):
            ref = ref + (M[:, j] if kernel == "row_sums" else M[j, :])
        np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32))
        res[kernel] = st_
    # row_sums: each step, the 32 lanes of a warp read 32 different rows (cols*4 bytes
    # apart, >= 64 B): 32 sectors per request; col_sums: 32 consecutive floats = 4 sectors
    r, c = res["row_sums"], res["col_sums"]
    assert r.global_load_requests == (rows // 32) * cols
    assert r.global_load_sectors == (rows // 32) * cols * 32
    assert c.global_load_requests == -(-cols // 32) * rows
    assert c.global_load_sectors == -(-cols // 32) * rows * (min(cols, 32) * 4 // 32)


# -------------------------------------------------------------------------- reductions


def _shfl_down_tree(v: np.ndarray) -> np.ndarray:
    """v (warps, 32): v += shfl_down(v, off) for off = 16, 8, 4, 2, 1 (out-of-range
    lanes read their own value)."""
    v = v.copy()
    lane = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        src = np.where(lane + off <= 31, lane + off, lane)
        v = (v + v[:, src]).astype(np.float32)
    return v


@pytest.mark.parametrize("build", ["reduction", "reduction_G"])
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_warp_and_block_reductions(build, seed):
    """The optimised build and the -G (debug) build give the same bits: no fma
    contraction is involved, only the order of the additions."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(512).astype(np.float32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    po = mem.alloc(4 * 16)
    gallery.load(build).launch("warp_reduce", 2, 256, [px, po], mem)
    ref = _shfl_down_tree(x.reshape(16, 32))[:, 0]
    np.testing.assert_array_equal(mem.from_device(po, np.float32, 16).view(np.uint32),
                                  ref.view(np.uint32))
    # butterfly: v += shfl_xor(v, mask) for mask = 16..1
    pa = mem.alloc(4 * 512)
    gallery.load(build).launch("warp_allreduce", 2, 256, [px, pa], mem)
    v = x.reshape(16, 32).copy()
    for mask in (16, 8, 4, 2, 1):
        v = (v + v[:, np.arange(32) ^ mask]).astype(np.float32)
    np.testing.assert_array_equal(mem.from_device(pa, np.float32, 512).reshape(16, 32)
                                  .view(np.uint32), v.view(np.uint32))
    # block reduction of n = 500 elements (tail padded with zeros)
    n = 500
    pb = mem.alloc(4 * 2)
    st_ = gallery.load(build).launch("block_reduce", 2, 256, [px, pb, n], mem)
    s = np.where(np.arange(512) < n, x, np.float32(0)).reshape(2, 256)
    for stride in (128, 64, 32):
        s[:, :stride] = s[:, :stride] + s[:, stride:2 * stride]
    ref = _shfl_down_tree(s[:, :32])[:, 0]
    np.testing.assert_array_equal(mem.from_device(pb, np.float32, 2).view(np.uint32),
                                  ref.view(np.uint32))
    assert st_.barriers == 2 * 4  # one after the fill, three in the stride loop


@pytest.mark.parametrize("build", ["reduction", "reduction_G"])
def test_warp_vote(build):
    x = np.zeros(64, np.int32)
    x[[0, 3, 31]] = 1          # warp 0: three positive lanes
    x[32:] = 5                 # warp 1: all positive
    mem = GlobalMemory()
    px = mem.to_device(x)
    pb, pc = mem.alloc(8), mem.alloc(8)
    gallery.load(build).launch("warp_vote", 1, 64, [px, pb, pc], mem)
    np.testing.assert_array_equal(mem.from_device(pb, np.uint32, 2),
                                  [(1 << 0) | (1 << 3) | (1 << 31), 0xFFFFFFFF])
    np.testing.assert_array_equal(mem.from_device(pc, np.int32, 2), [3 + 1000, 32 + 100 + 1000])


# -------------------------------------------------------------------------- atomics


@settings(max_examples=10)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3000))
def test_histogram(seed, n):
    data = np.random.default_rng(seed).integers(0, 256, n).astype(np.uint8)
    mem = GlobalMemory()
    pd = mem.to_device(data)
    ph = mem.calloc(256 * 4)   # zeroed: the kernel adds to it
    st_ = gallery.load("histogram").launch("histogram", 3, 128, [pd, ph, n], mem)
    np.testing.assert_array_equal(mem.from_device(ph, np.uint32, 256),
                                  np.bincount(data, minlength=256))
    assert st_.atomic_requests > 0


def test_atomics_kernel():
    n = 100
    x = np.random.default_rng(1).integers(-1000, 1000, n).astype(np.int32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    init = np.zeros(8 + n, np.int32)
    init[0] = np.iinfo(np.int32).min
    init[1] = np.iinfo(np.int32).max
    init[2] = -1
    pr = mem.to_device(init)
    gallery.load("histogram").launch("atomics", 2, 64, [px, pr, n], mem)
    r = mem.from_device(pr, np.int32, 8 + n)
    assert r[0] == x.max() and r[1] == x.min()
    assert 0 <= r[2] < n                       # some thread claimed the slot
    assert r[3] == np.bitwise_xor.reduce(x)
    assert r[4] == n                           # every thread added 1
    np.testing.assert_array_equal(r[8:], 1)    # each saw a distinct old value < n


# -------------------------------------------------------------------------- conversions


SPECIALS = np.array([0.0, -0.0, 1.0, -1.5, 448.0, 464.0, 480.0, 1e6, -1e6, np.inf, -np.inf,
                     np.nan, 2.0**-9, 2.0**-10, 3 * 2.0**-11, 57344.0, 61440.0, 1e-30,
                     65504.0, 65520.0, 3.0e38, 1.00390625, 1.01171875], np.float32)


@pytest.mark.parametrize("ptx", ["convert", "convert_sm80"])
@settings(max_examples=10)
@given(values=st.lists(st.floats(width=32, allow_nan=True), min_size=2, max_size=64))
def test_conversions(ptx, values):
    x = np.concatenate([SPECIALS, np.array(values, np.float32)])
    if x.size % 2:
        x = np.append(x, np.float32(0.5))
    n = x.size
    mem = GlobalMemory()
    px = mem.to_device(x)
    # convert_sm80: nvcc's software FP8 path (integer bit manipulation) on sm_80
    conv = gallery.load(ptx)
    out = mem.alloc(2 * n)
    conv.launch("to_bf16", 1, 128, [px, out, n], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.uint16, n), bf16_codes(x))
    conv.launch("to_fp16", 1, 128, [px, out, n], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.uint16, n), f16_codes(x))
    for kernel, fmt in (("to_e4m3", "e4m3"), ("to_e5m2", "e5m2")):
        conv.launch(kernel, 1, 128, [px, out, n // 2], mem)
        got = mem.from_device(out, np.uint16, n // 2)
        codes = np.array([nearest_code(fmt, float(v)) for v in x], np.uint16)
        # x[2i] goes to the low byte, x[2i+1] to the high byte
        np.testing.assert_array_equal(got, codes[0::2] | (codes[1::2] << 8), err_msg=kernel)


def test_float_to_int_modes():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 3e9, -3e9, np.nan, np.inf, -np.inf,
                  1e-40, 2147483520.0], np.float32)
    n = x.size
    mem = GlobalMemory()
    px = mem.to_device(x)
    po = mem.alloc(16 * n)
    gallery.load("convert").launch("float_to_int", 1, 32, [px, po, n], mem)
    got = mem.from_device(po, np.int32, (n, 4))
    with np.errstate(invalid="ignore"):
        for j, f in enumerate((np.rint, np.trunc, np.floor, np.ceil)):
            r = f(x.astype(np.float64))
            ref = np.where(np.isnan(r), 0, np.clip(r, -2**31, 2**31 - 1)).astype(np.int64)
            np.testing.assert_array_equal(got[:, j], ref)


def test_bf16_round_trip():
    x = np.linspace(-3, 3, 50).astype(np.float32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    po = mem.alloc(4 * 50)
    gallery.load("convert").launch("bf16_round_trip", 1, 64, [px, po, np.float32(1.7), 50], mem)
    prod = (x * np.float32(1.7)).astype(np.float32)
    ref = (bf16_codes(prod).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(mem.from_device(po, np.float32, 50), ref)


# ------------------------------------------------------------------ memory spaces


def test_vec4_local_generic_dynamic_shared():
    mod = gallery.load("memory_spaces")
    mem = GlobalMemory()
    x = np.arange(4 * 40, dtype=np.float32) * np.float32(0.37)
    px = mem.to_device(x)
    po = mem.alloc(4 * 4 * 40)
    st_ = mod.launch("vec4_scale", 2, 32, [px, po, 1.5, 40], mem)
    np.testing.assert_array_equal(mem.from_device(po, np.float32, 160), x * np.float32(1.5))
    # 16-byte accesses: a full warp reads 512 B = 16 sectors per request
    assert st_.global_load_requests == 2
    assert st_.global_load_sectors == 16 + 8 * 16 // 32

    xi = np.random.default_rng(0).integers(0, 1000, 70).astype(np.int32)
    pxi = mem.to_device(xi)
    poi = mem.alloc(4 * 70)
    st_ = mod.launch("local_table", 3, 32, [pxi, poi, 70], mem)
    i = np.arange(70)
    np.testing.assert_array_equal(mem.from_device(poi, np.int32, 70), ((xi & 7) + 1) * (i + 1))
    assert st_.local_requests > 0

    g = np.random.default_rng(1).standard_normal(66).astype(np.float32)
    pg = mem.to_device(g)
    pout = mem.alloc(4 * 64)
    mod.launch("generic_pointer", 1, 64, [pg, pout], mem)
    s = g * np.float32(2)
    t = np.arange(64)
    src = np.where((t >> 5) & 1, 0, 1)  # even warps read shared (2*g), odd warps global g
    vals = np.where(src[:, None] == 1, s[t[:, None] + np.arange(3)], g[t[:, None] + np.arange(3)])
    ref = (vals[:, 0] + vals[:, 1]) + vals[:, 2]
    np.testing.assert_array_equal(mem.from_device(pout, np.float32, 64), ref.astype(np.float32))

    v = np.arange(96, dtype=np.int32)
    pv = mem.to_device(v)
    pr = mem.alloc(4 * 96)
    mod.launch("dyn_reverse", 3, 32, [pv, pr], mem, dynamic_shared=128)
    np.testing.assert_array_equal(mem.from_device(pr, np.int32, 96),
                                  v.reshape(3, 32)[:, ::-1].ravel())


def test_blocks_run_in_waves(monkeypatch):
    # a grid larger than one wave runs in several batches of blocks; results and
    # statistics are the same as in one wave
    import hardware.simt.module as module
    data = np.random.default_rng(5).integers(0, 256, 5000).astype(np.uint8)
    results = []
    for limit in (1 << 17, 128):
        monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", limit)
        mem = GlobalMemory()
        pd = mem.to_device(data)
        ph = mem.calloc(1024)
        st_ = gallery.load("histogram").launch("histogram", 5, 64, [pd, ph, 5000], mem)
        results.append((mem.from_device(ph, np.uint32, 256), st_))
    np.testing.assert_array_equal(results[0][0], np.bincount(data, minlength=256))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    a, b = results[0][1], results[1][1]
    assert (a.warp_instructions, a.thread_instructions, a.barriers, a.shared_load_wavefronts) == \
        (b.warp_instructions, b.thread_instructions, b.barriers, b.shared_load_wavefronts)


def test_metrics_use_profiler_names():
    mem = GlobalMemory()
    n = 64
    x = np.arange(n * n, dtype=np.float32)
    pi, po = mem.to_device(x), mem.alloc(4 * n * n)
    st_ = gallery.load("matmul").launch("transpose_unpadded", (2, 2), (32, 32), [pi, po, n], mem)
    m = st_.metrics()
    assert m["smsp__inst_executed.sum"] == st_.warp_instructions
    assert m["smsp__thread_inst_executed.sum"] == st_.thread_instructions
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == st_.global_load_sectors
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == st_.global_load_requests
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] == st_.global_store_sectors
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 128 * 31
    assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] == 128 * 32
    # 32-bit loads by full warps reading 128 contiguous bytes: 4 sectors per request
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum.per_request"] == 4.0


def test_package_docstring_example():
    import doctest

    import hardware.simt
    assert doctest.testmod(hardware.simt).failed == 0


def test_struct_parameter():
    # struct P { float scale; int n; float bias; } passed by value: 12 bytes
    x = np.linspace(-2, 2, 50).astype(np.float32)
    p = np.zeros(3, np.uint32)
    p[0] = np.float32(1.25).view(np.uint32)
    p[1] = 50
    p[2] = np.float32(-0.5).view(np.uint32)
    mem = GlobalMemory()
    px, py = mem.to_device(x), mem.alloc(4 * 50)
    gallery.load("struct_param").launch("affine", 1, 64, [px, py, p.tobytes()], mem)
    ref = fma32(np.float32(1.25), x, np.float32(-0.5))
    np.testing.assert_array_equal(mem.from_device(py, np.float32, 50), ref)
    from hardware.simt import LaunchError
    with pytest.raises(LaunchError, match="12-byte aggregate"):
        gallery.load("struct_param").launch("affine", 1, 64, [px, py, 3], mem)


# --------------------------------------------------------------------- intrinsics

M32 = 2**32


def _int_intrinsics_ref(v: int, i: int) -> list[int]:
    """CUDA Math API definitions of the intrinsics, in Python integers."""
    s = v - M32 if v >> 31 else v

    def byte_perm(x, y, c):
        src = x | (y << 32)
        return sum(((src >> (8 * ((c >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
    w = (v * 0x9E3779B97F4A7C15) % 2**64
    q = abs(s) // (i + 1) * (1 if s >= 0 else -1)
    s24 = ((s & 0xFFFFFF) ^ 0x800000) - 0x800000
    return [bin(v).count("1"), 32 - v.bit_length(), int(f"{v:032b}"[::-1], 2),
            byte_perm(v, (v * 3) % M32, 0x5140), (v * 12345) >> 32,
            (((((v * 7) % M32) << 32) | v) << (i & 31) >> 32) & 0xFFFFFFFF,
            (v & -v).bit_length(), q % M32, v % (i + 3), (s24 * 7) % M32, abs(s) % M32,
            min(v, 77), max(s, -3) % M32, (abs(s - 5) + 1) % M32,
            # __double2int_rn(v / 2): ties to even, saturated to the int range
            min(v // 2 + (v & 1 and (v // 2) & 1), 2**31 - 1) % M32,
            ((w >> 40) + (w // 1000003)) % M32]


@settings(max_examples=10)
@given(st.lists(st.integers(0, M32 - 1), min_size=1, max_size=100))
@example([0xFFFFFFFF, 0, 1, 0x80000000, 0x7FFFFFFF])
def test_int_intrinsics(values):
    u = np.array(values, np.uint32)
    n = u.size
    mem = GlobalMemory()
    pu, pv = mem.to_device(u), mem.alloc(64 * n)
    gallery.load("intrinsics").launch("int_intrinsics", 1, 128, [pu, pv, n], mem)
    got = mem.from_device(pv, np.uint32, (n, 16))
    ref = np.array([_int_intrinsics_ref(int(a), i) for i, a in enumerate(values)], np.uint64)
    np.testing.assert_array_equal(got, ref.astype(np.uint32))


def test_warp_intrinsics():
    xi = np.random.default_rng(4).integers(0, 100, 64).astype(np.int32)
    mem = GlobalMemory()
    px, py = mem.to_device(xi), mem.alloc(4 * 64)
    gallery.load("intrinsics").launch("warp_intrinsics", 1, 64, [px, py], mem)
    ref = []
    for t in range(64):
        xs = xi[32 * (t // 32): 32 * (t // 32) + 32].astype(np.int64)
        lane = t % 32
        match = sum(1 << k for k in range(32) if (xs[k] & 3) == (xs[lane] & 3))
        ref.append((int(xs.sum()) + 0xFFFFFFFF + match + int(xs[(lane & ~7) | 3])) % M32)
    np.testing.assert_array_equal(mem.from_device(py, np.uint32, 64), ref)


def test_module_variables_constant_and_device():
    mod = gallery.load("module_vars")
    mem = GlobalMemory()
    x = np.linspace(-1, 1, 10).astype(np.float32)
    px, py = mem.to_device(x), mem.alloc(40)
    st_ = mod.launch("poly", 1, 32, [px, py, 10], mem)
    c = np.float32([1.0, 0.5, 0.25, 0.125])
    table = np.float32([3.0, -1.0, 2.5])
    h = fma32(x, fma32(x, fma32(x, c[3], c[2]), c[1]), c[0])
    ref = table[np.arange(10) % 3] + h
    np.testing.assert_array_equal(mem.from_device(py, np.float32, 10), ref)
    assert st_.constant_requests == 4      # four ld.const by one warp
    counter = mod.symbol_address("counter", mem)
    assert mem.read(counter, np.int32, 1)[0] == 10
    # __constant__ data set by the host (cudaMemcpyToSymbol) is seen by the next launch
    mem.write(mod.symbol_address("coeffs", mem), np.float32([0, 0, 0, 0]))
    mod.launch("poly", 1, 32, [px, py, 10], mem)
    np.testing.assert_array_equal(mem.from_device(py, np.float32, 10), table[np.arange(10) % 3])
    assert mem.read(counter, np.int32, 1)[0] == 20


# --------------------------------------------------------------- half precision


@settings(max_examples=10)
@given(st.integers(0, 2**32 - 1))
def test_half_precision_kernels(seed):
    rng = np.random.default_rng(seed)
    mod = gallery.load("half_precision")
    mem = GlobalMemory()
    n = 64
    x = (rng.standard_normal(n) * 3).astype(np.float16)
    px, py = mem.to_device(x), mem.alloc(2 * n)
    mod.launch("halfk", 1, 64, [px, py, n], mem)
    # f16 sums and products are exact in float64, and a*b + c of these magnitudes is
    # too (spread < 53 bits), so one rounding float64 -> float16 is the reference
    x64 = x.astype(np.float64)
    h = (x64 + 1).astype(np.float16).astype(np.float64)
    ref = (h * x64 - x64[::-1]).astype(np.float16)
    np.testing.assert_array_equal(mem.from_device(py, np.uint16, n), ref.view(np.uint16))
    x2 = rng.standard_normal(2 * n).astype(np.float16)
    px2, py2 = mem.to_device(x2), mem.alloc(4 * n)
    mod.launch("half2k", 1, 64, [px2, py2, n], mem)
    xx = x2.reshape(n, 2).astype(np.float64)
    s = (xx + xx[::-1]).astype(np.float16).astype(np.float64)
    mx = np.maximum(xx, xx[0])
    ref2 = (s * mx).astype(np.float16)
    np.testing.assert_array_equal(mem.from_device(py2, np.uint16, 2 * n), ref2.view(np.uint16).ravel())
    # bf16: x < x0 ? fma(x, x, x0) : x - x0, values given as bf16 codes
    xb = bf16_codes(rng.standard_normal(n).astype(np.float32))
    pb, pyb = mem.to_device(xb), mem.alloc(2 * n)
    mod.launch("bf16k", 1, 64, [pb, pyb, n], mem)
    v = (xb.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    exact = np.where(v < v[0], v * v + v[0], v - v[0])      # exact in float64 here
    np.testing.assert_array_equal(mem.from_device(pyb, np.uint16, n), bf16_codes(exact))


def test_summary_report():
    x = (np.arange(32) % 8).astype(np.int32)
    mem = GlobalMemory()
    px = mem.to_device(x)
    pa, pb, pz = (mem.alloc(128) for _ in range(3))
    st_ = gallery.load("divergence").launch("divergence", 1, 32, [px, pa, pb, pz], mem)
    text = st_.summary(gallery.source("divergence"), top=40)
    # SIMD efficiency from the hand counts of test_divergence_example_masks_and_counts:
    # (32 * 17 + 16 * 8 + 32 * 10) / (32 * 35) = 992 / 1120 = 0.8857
    assert "smsp__inst_executed.sum" in text and "SIMD efficiency 0.886" in text
    assert "mul.lo.s32 %r10, %r1, 3;" in text     # the if path, shown with its PTX text


# ------------------------------------------------------ device functions, debug builds


def _collatz(x: int) -> int:
    steps = 0
    while x > 1 and steps < 1000:
        x = 3 * x + 1 if x & 1 else x // 2
        steps += 1
    return steps


@pytest.mark.parametrize("build", ["noinline", "noinline_G"])
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_noinline_device_functions(build, seed):
    """__noinline__ functions called from a kernel built with -lineinfo and with -G:
    .loc directives inside the called bodies must not swallow instructions (they did:
    scale_add returned 0). Reference: float32 steps in NumPy (no fma in either build:
    checked below), Collatz counts in Python."""
    assert "fma" not in gallery.source(build)
    rng = np.random.default_rng(seed)
    n = 45
    x = rng.standard_normal(n).astype(np.float32)
    s = np.float32(rng.uniform(-3, 3))
    mem = GlobalMemory()
    px, py, pp = mem.to_device(x), mem.alloc(4 * n), mem.alloc(8 * n)
    gallery.load(build).launch("noinline_calls", 2, 32, [px, py, pp, float(s), n], mem)
    ref = np.empty(n, np.float32)
    for i in range(n):
        k = i % 7
        r = np.float32(x[i] * s)
        for _ in range(k):
            r = np.float32(r + np.float32(1))
        ref[i] = np.float32(r + np.float32(_collatz(k + 1)))
    np.testing.assert_array_equal(mem.from_device(py, np.float32, n).view(np.uint32),
                                  ref.view(np.uint32))
    pairs = mem.from_device(pp, np.int32, (n, 2))
    assert pairs[:, 0].tolist() == [_collatz(i + 1) for i in range(n)]
    assert pairs[:, 1].tolist() == [i % 7 for i in range(n)]


#: the inputs of printf_host.c (doubles and floats by their bits)
_PRINTF_INTS = [0, 1, -1, 7, 255, -255, 65537, 2**31 - 1, -2**31, 1000, -42, 4096]
_PRINTF_LONGS = [0, 1, -1, 2**53 + 1, -2**63, 2**63 - 1, 2**32, -2**32 - 1, 123456789012,
                 -5, 77, 2**40]
_PRINTF_DOUBLE_BITS = [0x0, 0x8000000000000000, 0x3FF8000000000000, 0xC002000000000000,
                       0x3FB999999999999A, 0x7FF0000000000000, 0xFFF0000000000000,
                       0x7FF8000000000000, 0xFFF8000000000000, 0x1, 0x7E37E43C8800759C,
                       0x3FC0000000000000]
_PRINTF_FLOAT_BITS = [0x3F800000, 0xBF000000, 0x3EAAAAAB, 0x4B000001, 0x1, 0x7F7FFFFF,
                      0x3DCCCCCD, 0xC2F6E979, 0x3F000000, 0x40490FDB, 0x80000000,
                      0x447A0000]


def _printf_args(mem, ints, longs, doubles, floats) -> list:
    """Device pointers to the four argument arrays of printf_formats."""
    return [mem.to_device(a) for a in (ints, longs, doubles, floats)]


def test_printf_kernel_matches_the_host_c_library():
    """Device printf (vprintf) of every conversion, flag, width, precision and length
    modifier against the output of the same printf calls run by the host C library
    (printf_host.c, its output committed as printf_host.txt). A warp prints each call
    for all its threads in thread order, then the next call."""
    n = len(_PRINTF_INTS)
    mem = GlobalMemory()
    ptrs = _printf_args(mem, np.array(_PRINTF_INTS, np.int32),
                        np.array(_PRINTF_LONGS, np.int64),
                        np.array(_PRINTF_DOUBLE_BITS, np.uint64),
                        np.array(_PRINTF_FLOAT_BITS, np.uint32))
    st_ = gallery.load("printf").launch("printf_formats", 1, 32, ptrs + [n], mem)
    expected = (gallery.directory() / "printf_host.txt").read_text()
    assert len(expected.splitlines()) == 3 * n
    assert st_.stdout.splitlines() == expected.splitlines()
    assert st_.stdout == expected


def test_printf_order_follows_the_warps():
    """Two warps: each printf call is printed for warp 0's threads, then warp 1's (the
    warps run together at one pc); the rows are those of the host output."""
    n = 40
    ints = (list(range(-20, 20)))
    mem = GlobalMemory()
    ptrs = _printf_args(mem, np.array(ints, np.int32), np.zeros(n, np.int64),
                        np.zeros(n, np.float64), np.zeros(n, np.float32))
    st_ = gallery.load("printf").launch("printf_formats", 2, 32, ptrs + [n], mem)
    lines = st_.stdout.splitlines()
    assert len(lines) == 3 * n
    assert [int(ln.split(":")[0]) for ln in lines] == list(range(n)) * 3
    # "%d: %d|..." of the first call: thread i prints ints[i]
    assert [int(ln.split(": ")[1].split("|")[0]) for ln in lines[:n]] == ints


def test_device_assert_names_kernel_thread_and_message():
    from hardware.simt import DeviceAssertionError
    v = np.array([3, 1, 4, 1, -5, 9, 2, -6], np.int32)
    mem = GlobalMemory()
    pv, po = mem.to_device(v), mem.alloc(4 * 8)
    with pytest.raises(DeviceAssertionError) as e:
        gallery.load("printf").launch("assert_positive", 2, 4, [pv, po, 8], mem)
    msg = str(e.value)
    # the first failing thread is v[4]: block 1, thread 0
    assert "kernel assert_positive, block (1, 0, 0), thread (0, 0, 0)" in msg
    assert "`v[i] > 0`" in msg and "printf.cu:22" in msg
    assert "assert_positive(const int *, int *, int)" in msg
    ok = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
    mem.write(pv, ok)
    gallery.load("printf").launch("assert_positive", 2, 4, [pv, po, 8], mem)
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 8), 2 * ok)


# ------------------------------------------------------ independent thread scheduling


@pytest.mark.parametrize("grid,block,n", [(1, 32, 32), (1, 8, 5),
                                          pytest.param(2, 48, 80, marks=pytest.mark.slow)])
def test_spin_lock_completes_under_independent_scheduling(grid, block, n):
    """Every thread takes a global spin lock (atomicCAS loop), appends its index to
    order[] at position *total and increments *total without an atomic: the lock makes
    that race-free, so total = n and order is a permutation of the thread indices.
    Under the lock-step SIMT stack the threads that failed to take the lock spin forever
    while the holder waits at their reconvergence point."""
    mod = gallery.load("spinlock")
    mem = GlobalMemory()
    order, total = mem.alloc(4 * n), mem.calloc(4)
    mod.launch("spinlock_order", grid, block, [order, total, n], mem)
    assert mem.from_device(total, np.int32, 1)[0] == n
    assert sorted(mem.from_device(order, np.int32, n).tolist()) == list(range(n))


def test_spin_lock_livelocks_in_lockstep_mode():
    mod = gallery.load("spinlock")
    mem = GlobalMemory()
    order, total = mem.alloc(4 * 32), mem.calloc(4)
    with pytest.raises(StepLimitError, match="warp 0 of block"):
        mod.launch("spinlock_order", 1, 32, [order, total, 32], mem, max_steps=20_000,
                   scheduling="lockstep")


@pytest.mark.parametrize("scheduling", ["independent", "lockstep"])
def test_flag_handoff_between_warps(scheduling):
    """Warp 1 spins on a flag (laid out at a lower pc than warp 0's producer code): the
    waiting warp gives way to the producer under independent scheduling."""
    mod = gallery.load("spinlock")
    mem = GlobalMemory()
    flag, data, out = mem.calloc(4), mem.alloc(4 * 32), mem.alloc(4 * 32)
    if scheduling == "lockstep":
        with pytest.raises(StepLimitError, match="warp 1 of block"):
            mod.launch("flag_handoff", 1, 64, [flag, data, out], mem, max_steps=20_000,
                       scheduling=scheduling)
        return
    mod.launch("flag_handoff", 1, 64, [flag, data, out], mem, scheduling=scheduling)
    t = np.arange(32)
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32), t * t + 1)


@pytest.mark.parametrize("block", [32, 64, 48])
def test_warp_halves_hand_over_through_memory(block):
    """Lanes 0-15 publish 7 and wait for the other half's answer (7 + 1); lanes 16-31
    wait for the 7 first: two sibling paths of one branch that each spin until the
    other has run. Under independent scheduling they run in turn."""
    mod = gallery.load("spinlock")
    mem = GlobalMemory()
    flags, out = mem.calloc(8), mem.alloc(4 * 32)
    mod.launch("warp_handshake", 1, block, [flags, out], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32),
                                  [8] * 16 + [7] * 16)
    with pytest.raises(StepLimitError):
        mod.launch("warp_handshake", 1, block, [mem.calloc(8), out], mem,
                   max_steps=20_000, scheduling="lockstep")


def test_scheduling_option_is_checked():
    from hardware.simt import LaunchError
    mod = gallery.load("spinlock")
    assert mod.default_scheduling == "independent"      # .target sm_90
    mem = GlobalMemory()
    with pytest.raises(LaunchError, match="scheduling must be one of"):
        mod.launch("flag_handoff", 1, 64, [mem.alloc(4), mem.alloc(128), mem.alloc(128)],
                   mem, scheduling="volta")


def _divergent_loop(v: int) -> int:
    """divergence.cu's divergent_loop for one element, in 32-bit C int arithmetic."""
    acc = 0
    for k in range(v & 15):
        if (k + v) & 1:
            acc += k * v
        elif k & 2:
            acc ^= v >> 1
        else:
            acc -= k
        acc = wrap(acc, 32, True)
    return acc


def test_independent_scheduling_keeps_short_divergent_loops_converged():
    """Loops shorter than YIELD_AFTER iterations: the C result under both schedulings,
    and the same statistics as the plain SIMT stack (nothing yields)."""
    x = np.random.default_rng(5).integers(0, 2**31, 300).astype(np.int32)
    runs = []
    for scheduling in ("independent", "lockstep"):
        mem = GlobalMemory()
        px, po = mem.to_device(x), mem.alloc(4 * 300)
        st_ = gallery.load("divergence").launch("divergent_loop", 2, 256, [px, po, 300], mem,
                                                scheduling=scheduling)
        runs.append((mem.from_device(po, np.int32, 300), st_))
    want = [_divergent_loop(int(v)) for v in x]
    assert runs[0][0].tolist() == want and runs[1][0].tolist() == want
    assert runs[0][1].metrics() == runs[1][1].metrics()
    assert runs[0][1].line_warp_instructions == runs[1][1].line_warp_instructions
