"""PTX that Triton emits for sm_100 (tests/hardware/data/triton_sm100, made by
generate.py there; no test needs Triton) run by the interpreter on gpu="B200": the
matmul tutorial kernel, whose tl.dot Triton lowers to tcgen05.alloc, tcgen05.st of the
zero accumulator, tcgen05.mma kind::f16 per k16 slice, tcgen05.commit to an mbarrier
and tcgen05.ld of D. Checked bit for bit against refimpl.matmul with B200-FP16 chained
over k16 steps, and against float64 within the preset's truncation bound."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from refimpl import formats
from test_simt_triton_sm90 import chained

DATA = Path(__file__).parent / "data" / "triton_sm100"
META = json.loads((DATA / "metadata.json").read_text())


#: Triton element type -> (NumPy-side maker of the inputs, refimpl format, k-step,
#: preset; None for exact integers)
_INPUT = {
    "*fp16": (lambda x: x.astype(np.float16), 16, "B200-FP16"),
    "*bf16": (lambda x: formats.encode(x, "bf16").astype(np.uint16), 16, "B200-BF16"),
    "*fp8e4nv": (lambda x: formats.encode(x, "e4m3").astype(np.uint8), 32,
                 "B200-E4M3-TCGEN05"),
    "*fp32": (lambda x: formats.decode(formats.encode(x, "tf32"), "tf32").astype(np.float32),
              8, "B200-TF32"),
    "*i8": (lambda x: np.clip(np.round(x * 40), -128, 127).astype(np.int8), 32, None),
}
_VALUES = {"*bf16": "bf16", "*fp8e4nv": "e4m3"}


@pytest.mark.parametrize("name", sorted(n for n in META if n.startswith("matmul_")
                                         and n != "matmul_fp16"))
def test_triton_matmul_kinds_tcgen05(name):
    meta = META[name]
    ty = meta["signature"]["a_ptr"]
    make, step, preset = _INPUT[ty]
    m, n, k = 128, int(meta["constexprs"]["BLOCK_N"]), 2 * int(meta["constexprs"]["BLOCK_K"])
    rng = np.random.default_rng(1)
    ca, cb = make(rng.standard_normal((m, k))), make(rng.standard_normal((k, n)))
    got = _launch(name, ca, cb, m, n, k, np.int32 if preset is None else np.float32)
    if preset is None:
        assert np.array_equal(got, ca.astype(np.int64) @ cb.astype(np.int64))
        return
    fmt = _VALUES.get(ty)
    a = formats.decode(ca, fmt).astype(np.float32) if fmt else ca.astype(np.float32)
    b = formats.decode(cb, fmt).astype(np.float32) if fmt else cb.astype(np.float32)
    assert np.array_equal(got, chained(a, b, step, preset))


def _launch(name: str, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int,
            out: type) -> np.ndarray:
    meta = META[name]
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    bm, bn = int(meta["constexprs"]["BLOCK_M"]), int(meta["constexprs"]["BLOCK_N"])
    load_ptx((DATA / f"{name}.ptx").read_text()).launch(
        meta["kernel"], (m // bm, n // bn), 32 * meta["num_warps"],
        [pa, pb, pc, m, n, k, k, n, n, 0, 0], mem, dynamic_shared=meta["shared"],
        gpu="B200")
    return mem.from_device(pc, out, (m, n))


@pytest.mark.parametrize("shape", [(128, 128, 64), (256, 64, 96)])
def test_triton_matmul_fp16_tcgen05(shape):
    m, n, k = shape
    meta = META["matmul_fp16"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.calloc(m * n * 4)
    bm, bn = int(meta["constexprs"]["BLOCK_M"]), int(meta["constexprs"]["BLOCK_N"])
    load_ptx((DATA / "matmul_fp16.ptx").read_text()).launch(
        meta["kernel"], (m // bm, n // bn), 32 * meta["num_warps"],
        [pa, pb, pc, m, n, k, k, n, n, 0, 0], mem, dynamic_shared=meta["shared"],
        gpu="B200")
    got = mem.from_device(pc, np.float32, (m, n))
    acc = chained(a, b, 16, "B200-FP16")   # the kernel's order: k16 steps
    assert np.array_equal(got, acc)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert (np.abs(got - a64 @ b64) <= k / 16 * 2 ** -22 * (np.abs(a64) @ np.abs(b64))).all()


def test_triton_attention_step_p_from_tensor_memory():
    """O = exp2(Q K^T - rowmax) V: Triton stores P (fp16) into Tensor Memory and uses it
    as the [a-tmem] operand of the second tcgen05.mma."""
    meta = META["attention_step_fp16"]
    m, n, h = 128, 64, 64
    rng = np.random.default_rng(0)
    # small integers: S = Q K^T is exact and each exp2(S - rowmax) a power of two (or 0),
    # so the reference does not depend on the ex2.approx model
    q, k = (rng.integers(-1, 2, s).astype(np.float16) for s in ((m, h), (n, h)))
    v = rng.standard_normal((n, h)).astype(np.float16)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (q, k, v)] + [mem.calloc(m * h * 4)]
    load_ptx((DATA / "attention_step_fp16.ptx").read_text()).launch(
        meta["kernel"], 1, 32 * meta["num_warps"], ptrs + [0, 0], mem,
        dynamic_shared=meta["shared"], gpu="B200")
    o = mem.from_device(ptrs[3], np.float32, (m, h))
    s = chained(q.astype(np.float32), k.T.astype(np.float32), 16, "B200-FP16")
    p = np.exp2(s - s.max(axis=1, keepdims=True)).astype(np.float16)
    assert np.array_equal(o, chained(p.astype(np.float32), v.astype(np.float32), 16,
                                     "B200-FP16"))


def test_triton_softmax_sm100_pair_arithmetic():
    """Row softmax: add/sub/mul.f32x2, three-input max.f32, redux.sync.max.f32 and
    ex2.approx; within a few float32 ulps of float64 (ex2.approx's documented error)."""
    meta = META["softmax_fp32"]
    x = np.random.default_rng(0).standard_normal((4, 1024)).astype(np.float32)
    x[1, 7] = 30.0                       # a dominant entry
    mem = GlobalMemory()
    px, py = mem.to_device(x), mem.calloc(x.nbytes)
    load_ptx((DATA / "softmax_fp32.ptx").read_text()).launch(
        meta["kernel"], 4, 32 * meta["num_warps"], [px, py, 0, 0], mem,
        dynamic_shared=meta["shared"], gpu="B200")
    y = mem.from_device(py, np.float32, x.shape)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert (np.abs(y - ref) <= 2 ** -19 * ref + 2 ** -40).all()


def test_dot_scaled_with_block_m_64_scales_in_bf16():
    """tl.dot_scaled with BLOCK_M = 64 for sm_100: Triton widens the E4M3 operands to
    BF16 with cvt.rn.bf16x2.e4m3x2, applies the E8M0 scales per 32 along K in BF16
    (exact here: four significant bits, no overflow or underflow) and multiplies with
    tcgen05.mma kind::f16 (M = 64); bit for bit against the B200-BF16 chain over k16 of
    the exactly scaled values."""
    meta = META["bf16_scaled_dot_e4m3_m64"]
    m, n, k = 64, 128, 128
    rng = np.random.default_rng(8)
    ca = np.asarray(formats.encode(rng.standard_normal((m, k)), "e4m3"), np.uint8)
    cb = np.asarray(formats.encode(rng.standard_normal((k, n)), "e4m3"), np.uint8)
    sa = rng.integers(120, 134, (m, k // 32)).astype(np.uint8)    # E8M0: 2^(s - 127)
    sb = rng.integers(120, 134, (n, k // 32)).astype(np.uint8)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (ca, sa, cb, sb)]
    pc = mem.calloc(m * n * 4)
    load_ptx((DATA / "bf16_scaled_dot_e4m3_m64.ptx").read_text()).launch(
        meta["kernel"], 1, 32 * meta["num_warps"], ptrs + [pc, 0, 0], mem,
        dynamic_shared=meta["shared"], gpu="B200")
    got = mem.from_device(pc, np.float32, (m, n))
    a = formats.decode(ca, "e4m3").astype(np.float64) * \
        np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    b = formats.decode(cb, "e4m3").astype(np.float64) * \
        np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=1)).T
    want = chained(a.astype(np.float32), b.astype(np.float32), 16, "B200-BF16")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_warp_specialized_matmul():
    """tl.range(..., warp_specialize=True) for sm_100: the warps go to their partitions
    (TMA loads, tcgen05.mma, the default partition's tcgen05.ld epilogue and TMA store)
    through brx.idx over a .branchtargets list, each partition with its own copy of
    setmaxnreg, the epilogue reading D after waiting on the last commit's mbarrier only;
    host tensor descriptors encoded as Triton's launcher encodes them. Bit for bit
    against the B200-FP16 chain over k16."""
    from hardware.simt.tensormap import DTYPES, SWIZZLES, encode_tiled
    meta = META["warp_specialized_matmul_fp16"]
    m, n, k = 128, 256, 256
    rng = np.random.default_rng(9)
    a = rng.standard_normal((m, k)).astype(np.float16)
    bt = rng.standard_normal((n, k)).astype(np.float16)       # B as N rows of K
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(bt), mem.calloc(m * n * 4)
    args = []
    for ptr, (rows, cols), d in zip((pa, pb, pc), ((m, k), (n, k), (m, n)),
                                    meta["tensordesc_meta"]):
        tmap = encode_tiled(DTYPES[d["elem_type"]][0], 2, ptr, [cols, rows],
                            [cols * d["elem_size"]], d["block_size"][::-1], [1, 1],
                            swizzle=list(SWIZZLES)[d["swizzle"]])
        args += [tmap, rows, cols, cols, 1]
    assert len(args) + 3 == meta["params"]
    st = load_ptx((DATA / "warp_specialized_matmul_fp16.ptx").read_text()).launch(
        meta["kernel"], (m // 128, n // 128), 32 * meta["num_warps"], args + [k, 0, 0], mem,
        dynamic_shared=meta["shared"], gpu="B200")
    got = mem.from_device(pc, np.float32, (m, n))
    assert np.array_equal(got.view(np.uint32),
                          chained(a, bt.T, 16, "B200-FP16").view(np.uint32))
    assert sum(st.tma_load_bytes.values()) == (n // 128) * 2 * 128 * k * 2
