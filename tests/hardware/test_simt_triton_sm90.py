"""PTX that Triton emits for sm_90 (tests/hardware/data/triton_sm90, made by generate.py
there; no test needs Triton) run by the interpreter on gpu="H100", bit for bit against
NumPy references built from refimpl.matmul with the same preset, chained over K in the
order the kernels issue their wgmma.mma_async (k16 steps for FP16, k32 for FP8)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from refimpl import formats
from refimpl import matmul as mm
from refimpl.matmul import presets

DATA = Path(__file__).parent / "data" / "triton_sm90"
META = json.loads((DATA / "metadata.json").read_text())


def chained(a: np.ndarray, b: np.ndarray, step: int, preset: str,
            c: np.ndarray | None = None, acc_format: str = "fp32") -> np.ndarray:
    """A B through ``preset`` one k-step at a time, the accumulator carried in
    ``acc_format`` (values as float32)."""
    acc = c
    for k0 in range(0, a.shape[1], step):
        acc = np.asarray(mm.matmul(a[:, k0:k0 + step].astype(np.float32),
                                   b[k0:k0 + step].astype(np.float32), acc,
                                   accumulate=preset, out_format=acc_format), np.float32)
    return acc


def spot_check(got: np.ndarray, a: np.ndarray, b: np.ndarray, step: int, preset: str,
               c: np.ndarray | None = None, acc_format: str = "fp32", count: int = 24,
               seed: int = 0) -> None:
    """Some outputs against the preset's plain rational model (BlockFMA.dot_reference),
    independent of matmul's vectorised kernels: the same chain over k-steps."""
    model = presets.preset(preset)
    rng = np.random.default_rng(seed)
    for i, j in zip(rng.integers(0, a.shape[0], count), rng.integers(0, b.shape[1], count)):
        acc = 0.0 if c is None else float(c[i, j])
        for k0 in range(0, a.shape[1], step):
            acc = model.dot_reference(a[i, k0:k0 + step], b[k0:k0 + step, j], acc,
                                      acc_format)
        assert float(got[i, j]) == np.float32(acc), (i, j)


def launch(name: str, grid: tuple, args: list, mem: GlobalMemory, text: str | None = None
           ) -> None:
    meta = META[name]
    mod = load_ptx(text if text is not None else (DATA / f"{name}.ptx").read_text())
    mod.launch(meta["kernel"], grid, 32 * meta["num_warps"], args + [0, 0], mem,
               dynamic_shared=meta["shared"], gpu="H100")


_MATMULS = sorted(n for n in META if n.startswith("matmul_") and "masked" not in n)
#: Triton element type -> (refimpl format, wgmma k-step, preset; None: exact integers)
_INPUT = {"*fp16": ("fp16", 16, "H100-FP16"), "*bf16": ("bf16", 16, "H100-BF16"),
          "*fp32": ("tf32", 8, "H100-TF32"), "*fp8e4nv": ("e4m3", 32, "H100-E4M3"),
          "*i8": (None, 32, None)}
_STORE = {"*fp16": np.float16, "*fp32": np.float32, "*i32": np.int32}


def _operand(rng, shape, fmt):
    """(device array, exact values as the tensor core reads them)."""
    if fmt is None:
        x = rng.integers(-128, 128, shape).astype(np.int8)
        return x, x.astype(np.int64)
    x = rng.standard_normal(shape).astype(np.float32)
    if fmt == "tf32":       # the tensor core reads the top 19 bits of each word
        return x, (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    codes = np.asarray(formats.encode(x, fmt))
    dev = codes.astype(np.uint8 if fmt == "e4m3" else np.uint16)
    return dev, formats.decode(codes, fmt).astype(np.float32)


@pytest.mark.parametrize("name", _MATMULS)
def test_matmul(name):
    meta = META[name]
    bm, bn, bk = (int(meta["constexprs"][c]) for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    fmt, step, preset = _INPUT[meta["signature"]["a_ptr"]]
    out = _STORE[meta["signature"]["c_ptr"]]
    m, n, k = bm, 2 * bn if bn < 128 else bn, 3 * bk
    rng = np.random.default_rng(len(name))
    (da, a), (db, b) = _operand(rng, (m, k), fmt), _operand(rng, (k, n), fmt)
    mem = GlobalMemory()
    pa, pb = mem.to_device(da), mem.to_device(db)
    pc = mem.calloc(m * n * np.dtype(out).itemsize)
    launch(name, (m // bm, n // bn), [pa, pb, pc, m, n, k, k, n, n], mem)
    got = mem.from_device(pc, out, (m, n))
    if preset is None:
        want = ((a @ b + 2**31) % 2**32 - 2**31).astype(np.int32)
        assert np.array_equal(got, want)
        return
    acc_format = meta["constexprs"]["ACC_TYPE"].replace("float", "fp")   # fp32 or fp16
    acc = chained(a, b, step, preset, np.zeros((m, n), np.float32), acc_format)
    assert np.array_equal(got.view(f"u{got.itemsize}"), acc.astype(out).view(f"u{got.itemsize}"))
    if out == np.float32 or acc_format == "fp16":
        spot_check(got, a, b, step, preset, acc_format=acc_format)
    # the preset is not the exact product rounded once (so the check could fail)
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert not np.array_equal(acc, exact)


def test_attention_step_p_from_registers():
    rng = np.random.default_rng(2)
    # small integers: S = Q K^T is exact and exp2(S - rowmax) a power of two, so every
    # step but the P V product is exact; that one goes through the preset
    q = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    kk = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    v = rng.standard_normal((64, 64)).astype(np.float16)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (q, kk, v)]
    po = mem.calloc(64 * 64 * 4)
    launch("attention_step_fp16", (1,), ptrs + [po], mem)
    got = mem.from_device(po, np.float32, (64, 64))
    s = q.astype(np.float64) @ kk.astype(np.float64).T
    p = np.exp2(s - s.max(axis=1, keepdims=True)).astype(np.float16)
    o = chained(p, v, 16, "H100-FP16")
    assert np.array_equal(got.view(np.uint32), o.view(np.uint32))
    spot_check(got, p, v, 16, "H100-FP16")
    assert (p < 1).any() and (p == 1).any()


def test_attention_forward_loop():
    meta = META["attention_fwd_fp16"]
    n_ctx, bm, bn, d = (int(meta["constexprs"][c]) for c in ("N_CTX", "BLOCK_M", "BLOCK_N",
                                                             "HEAD"))
    rng = np.random.default_rng(3)
    m = 2 * bm
    # small integers: scores exact, every exp2 a power of two (or 0), so the rescaling
    # is exact and only the P V products round (through the preset)
    q = rng.integers(-2, 3, (m, d)).astype(np.float16)
    kk = rng.integers(-2, 3, (n_ctx, d)).astype(np.float16)
    v = rng.standard_normal((n_ctx, d)).astype(np.float16)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (q, kk, v)]
    po = mem.calloc(m * d * 4)
    launch("attention_fwd_fp16", (m // bm,), ptrs + [po], mem)
    got_o = mem.from_device(po, np.float32, (m, d))
    acc = np.zeros((m, d), np.float32)
    mi = np.full(m, -np.inf)
    for j in range(0, n_ctx, bn):
        s = q.astype(np.float64) @ kk[j:j + bn].astype(np.float64).T
        mnew = np.maximum(mi, s.max(axis=1))
        alpha = np.exp2(mi - mnew).astype(np.float32)
        p = np.exp2(s - mnew[:, None]).astype(np.float16)
        scaled = acc * alpha[:, None]
        acc = chained(p, v[j:j + bn], 16, "H100-FP16", scaled)
        mi = mnew
    spot_check(acc, p, v[j:j + bn], 16, "H100-FP16", scaled)
    assert np.array_equal(got_o.view(np.uint32), acc.view(np.uint32))
    assert (mi > s.max(axis=1)).any()     # some rows rescaled by alpha < 1


def _masked_case(text: str | None) -> None:
    m, n, k = 64, 128, 40              # K is not a multiple of BLOCK_K = 32
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb = mem.to_device(a), mem.to_device(b)
    pc = mem.calloc(m * n * 2)
    launch("matmul_masked_fp16", (1, 2), [pa, pb, pc, m, n, k, k, 1, n, 1, n, 1], mem, text)
    got = mem.from_device(pc, np.float16, (m, n))
    # the last block loads zeros past K: the products run over K padded to 64
    ap = np.zeros((m, 64), np.float16)
    ap[:, :k] = a
    bp = np.zeros((64, n), np.float16)
    bp[:k] = b
    acc = chained(ap, bp, 16, "H100-FP16", np.zeros((m, n), np.float32))
    assert np.array_equal(got.view(np.uint16), acc.astype(np.float16).view(np.uint16))


def _dot_scaled_case(text: str | None) -> None:
    rng = np.random.default_rng(5)
    ca = np.asarray(formats.encode(rng.standard_normal((64, 64)).astype(np.float32),
                                   "e4m3"), np.uint8)
    cb = np.asarray(formats.encode(rng.standard_normal((64, 64)).astype(np.float32),
                                   "e4m3"), np.uint8)
    sa = rng.integers(120, 134, (64, 2)).astype(np.uint8)     # E8M0: 2^(s - 127)
    sb = rng.integers(120, 134, (64, 2)).astype(np.uint8)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (ca, sa, cb, sb)]
    pc = mem.calloc(64 * 64 * 4)
    launch("dot_scaled_e4m3", (1,), ptrs + [pc], mem, text)
    got = mem.from_device(pc, np.float32, (64, 64))
    # scaling by a power of two is exact in BF16 here (4 significant bits, no overflow
    # or underflow): the BF16 wgmma then multiplies the exact scaled values
    a = formats.decode(ca, "e4m3").astype(np.float64) * \
        np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    b = formats.decode(cb, "e4m3").astype(np.float64) * \
        np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=1)).T
    acc = chained(a.astype(np.float32), b.astype(np.float32), 16, "H100-BF16")
    assert np.array_equal(got.view(np.uint32), acc.view(np.uint32))
    spot_check(got, a, b, 16, "H100-BF16")


@pytest.mark.parametrize("case", [_masked_case, _dot_scaled_case])
def test_scalar_vector_operands_as_triton_writes_them(case):
    """Triton writes every scalar load and store with a one-element vector ({ %rs1 }),
    which ptxas accepts: the PTX as committed runs."""
    text = (DATA / ("matmul_masked_fp16.ptx" if case is _masked_case
                    else "dot_scaled_e4m3.ptx")).read_text()
    assert re.search(r"(ld|st)\.global\.b\d+ [^\n]*\{ %r[sd]?\d+ \}", text)
    case(None)


def test_tensor_descriptors_built_by_the_kernel():
    """tl.make_tensor_descriptor: each CTA builds its three maps in shared memory with
    tensormap.replace on zeroed bytes, publishes them in its slice of the global scratch
    buffer (metadata's global_scratch_size per CTA, 128-byte aligned), loads A and B
    tiles and stores C through them with TMA; bit for bit against the k16 chain."""
    meta = META["tensor_desc_matmul_fp16"]
    m, n, k = 128, 128, 256
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    grid = (m // 64, n // 64)
    align = meta["global_scratch_align"]
    scratch = mem.calloc(meta["global_scratch_size"] * grid[0] * grid[1] + align)
    scratch += (-scratch) % align
    st = load_ptx((DATA / "tensor_desc_matmul_fp16.ptx").read_text()).launch(
        meta["kernel"], grid, 32 * meta["num_warps"], [pa, pb, pc, m, n, k, scratch, 0], mem,
        dynamic_shared=meta["shared"], gpu="H100")
    got = mem.from_device(pc, np.float32, (m, n))
    want = chained(a, b, 16, "H100-FP16")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    spot_check(got, a, b, 16, "H100-FP16", count=8)
    # per CTA: A and B tiles of 64 x 64 FP16 for each of the k / 64 steps, one C tile
    ctas = grid[0] * grid[1]
    assert sum(st.tma_load_bytes.values()) == ctas * 2 * (k // 64) * 64 * 64 * 2
    assert sum(st.tma_store_bytes.values()) == ctas * 64 * 64 * 4


def test_tensor_descriptors_made_on_the_host():
    """Triton's host TensorDescriptor: each descriptor argument is a 128-byte tensor map
    parameter (made here with encode_tiled as Triton's launcher makes it with
    cuTensorMapEncodeTiled: dimensions innermost first, the box its block shape reversed,
    the swizzle and element type of metadata's tensordesc_meta), then the tensor's shape
    (two .u32) and strides (two .u64); C is stored in two 64 x 32 boxes."""
    from hardware.simt.tensormap import DTYPES, SWIZZLES, encode_tiled
    meta = META["host_desc_matmul_fp16"]
    m, n, k = 128, 128, 256
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    args = []
    for ptr, (rows, cols), d in zip((pa, pb, pc), ((m, k), (k, n), (m, n)),
                                    meta["tensordesc_meta"]):
        tmap = encode_tiled(DTYPES[d["elem_type"]][0], 2, ptr, [cols, rows],
                            [cols * d["elem_size"]], d["block_size"][::-1], [1, 1],
                            swizzle=list(SWIZZLES)[d["swizzle"]])
        args += [tmap, rows, cols, cols, 1]
    assert len(args) + 3 == meta["params"]
    grid = (m // 64, n // 64)
    st = load_ptx((DATA / "host_desc_matmul_fp16.ptx").read_text()).launch(
        meta["kernel"], grid, 32 * meta["num_warps"], args + [k, 0, 0], mem,
        dynamic_shared=meta["shared"], gpu="H100")
    got = mem.from_device(pc, np.float32, (m, n))
    want = chained(a, b, 16, "H100-FP16")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    ctas = grid[0] * grid[1]
    assert sum(st.tma_load_bytes.values()) == ctas * 2 * (k // 64) * 64 * 64 * 2
    assert sum(st.tma_store_bytes.values()) == ctas * 64 * 64 * 4
