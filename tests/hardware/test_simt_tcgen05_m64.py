"""tcgen05.mma with M = 64 and .cta_group::1 (hardware/simt/tcgen05.py, data path layout F
of hardware/simt/tcgen05_layouts.py) against layouts written out by hand from PTX ISA
9.7.16.10.5 (the table: organisation 4x1 with half the data path, lane alignment 0 or 16;
Figure 215) and exact products.

The hand-written kernel of test_simt_tcgen05.py (one thread issues the mma, every warp
reads its 32-lane quarter with tcgen05.ld.32x32b.x8) runs with M = 64 in the instruction
descriptor: row 16 q + i of D must come back in lane 32 q + a + i (a = 0 or 16, the lane
of d-tmem) and the other 16 lanes of each quarter stay zero. Triton's sm_100 matmul with
BLOCK_M = 64 (tests/hardware/data/triton_sm100) emits M = 64 and reads D with
tcgen05.ld.16x32bx2 from the lower 16 lanes of each quarter: it runs bit for bit against
refimpl.matmul with the B200 presets chained over Triton's k-steps."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, load_ptx
from refimpl import formats
from test_simt_tcgen05 import (B_START, KINDS, LBO, SBO, SRC, _bytes, assert_ptxas_accepts,
                               f16, idesc, image, image_bytes, smem_desc)
from test_simt_triton_sm90 import chained

DATA = Path(__file__).parent / "data" / "triton_sm100"
META = json.loads((DATA / "metadata.json").read_text())
#: the mma at lane 16 of the allocation: d-tmem = taddr + (16 << 16)
AT16 = SRC.replace("  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n",
                   "  add.u32 %r14, %r8, 1048576;\n"
                   "  tcgen05.mma.cta_group::1.kind::f16 [%r14], %rd4, %rd5, %r9, %p3;\n")


def _launch(img: np.ndarray, desc: int, src: str = SRC) -> np.ndarray:
    mem = GlobalMemory()
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 8 * 4)
    load_ptx(src).launch("k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                                       smem_desc(B_START, LBO, SBO), desc, 0], mem,
                         gpu="B200")
    return mem.from_device(po, np.uint32, (128, 8))


def _layout_f(d: np.ndarray, align: int) -> np.ndarray:
    """The 128 lanes x N columns of Tensor Memory holding a 64 x N D in layout F, written
    out from the ISA's description: quarter q, lanes 32 q + align .. + 15, rows
    16 q .. 16 q + 15; every other lane empty (zero)."""
    out = np.zeros((128, d.shape[1]), d.dtype)
    for q in range(4):
        for i in range(16):
            out[32 * q + align + i] = d[16 * q + i]
    return out


@pytest.mark.parametrize("align", [0, 16])
def test_m64_f16_d_in_layout_f(align):
    rng = np.random.default_rng(7)
    a = rng.integers(-4, 5, (64, 16))
    b = rng.integers(-4, 5, (16, 8))
    got = _launch(image(f16(a), f16(b.T)), idesc(8, m=64), AT16 if align else SRC)
    assert np.array_equal(got.view(np.float32), _layout_f((a @ b).astype(np.float32), align))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_m64_other_kinds_small_integers_exact(kind):
    k, eb, code, dcode, enc = KINDS[kind]
    rng = np.random.default_rng(8)
    a = rng.integers(-4, 5, (64, k))
    b = rng.integers(-4, 5, (k, 8))
    img = image_bytes(_bytes(enc(a), eb), _bytes(enc(b.T), eb), eb)
    got = _launch(img, idesc(8, m=64, atype=code, btype=code, dtype=dcode),
                  SRC.replace("kind::f16", f"kind::{kind}"))
    got = got.view(np.int32) if kind == "i8" else got.view(np.float32)
    assert np.array_equal(got, _layout_f((a @ b).astype(got.dtype), 0))


def test_m64_d_lane_must_be_0_or_16():
    src = SRC.replace("  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n",
                      "  add.u32 %r14, %r8, 524288;\n"
                      "  tcgen05.mma.cta_group::1.kind::f16 [%r14], %rd4, %rd5, %r9, %p3;\n")
    img = image(f16(np.ones((64, 16))), f16(np.ones((8, 16))))
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*d-tmem "
                                             r"0x80000 has lane 8; D of M = 64 starts at "
                                             r"lane 0 or 16 \(Layout F"):
        _launch(img, idesc(8, m=64), src)
    # M = 128 keeps lane 0 only
    with pytest.raises(ExecutionError, match=r"line \d+ .*has lane 16; D of M = 128 starts "
                                             r"at lane 0 \(Layout D"):
        _launch(image(f16(np.ones((128, 16))), f16(np.ones((8, 16)))), idesc(8), AT16)


def test_m32_needs_ws():
    img = image(f16(np.ones((64, 16))), f16(np.ones((8, 16))))
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*M = 32 is not "
                                             r"a tcgen05.mma.cta_group::1 shape"):
        _launch(img, idesc(8, m=32))


def test_m64_kernel_is_accepted_by_ptxas(tmp_path):
    assert_ptxas_accepts(tmp_path, AT16)


#: Triton element type -> (input maker, k-step, preset; None: exact integers)
_TRITON = {
    "*fp16": (lambda x: x.astype(np.float16), 16, "B200-FP16"),
    "*fp32": (lambda x: formats.decode(formats.encode(x, "tf32"), "tf32").astype(np.float32),
              8, "B200-TF32"),
    "*fp8e4nv": (lambda x: formats.encode(x, "e4m3").astype(np.uint8), 32,
                 "B200-E4M3-TCGEN05"),
    "*i8": (lambda x: np.clip(np.round(x * 40), -128, 127).astype(np.int8), 32, None),
}


@pytest.mark.parametrize("name", sorted(n for n in META if n.startswith("matmul_")
                                         and n.endswith("_m64")))
def test_triton_block_m_64_bit_for_bit(name):
    meta = META[name]
    src = (DATA / f"{name}.ptx").read_text()
    assert "16x32bx2" in src        # D read from 16 lanes of each quarter, two halves of N
    ty = meta["signature"]["a_ptr"]
    make, step, preset = _TRITON[ty]
    bk = int(meta["constexprs"]["BLOCK_K"])
    m, n, k = 128, 128, 2 * bk
    rng = np.random.default_rng(11)
    ca, cb = make(rng.standard_normal((m, k))), make(rng.standard_normal((k, n)))
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(ca), mem.to_device(cb), mem.calloc(m * n * 4)
    load_ptx(src).launch(meta["kernel"], (m // 64, n // 64), 32 * meta["num_warps"],
                         [pa, pb, pc, m, n, k, k, n, n, 0, 0], mem,
                         dynamic_shared=meta["shared"], gpu="B200")
    got = mem.from_device(pc, np.int32 if preset is None else np.float32, (m, n))
    if preset is None:
        assert np.array_equal(got, ca.astype(np.int64) @ cb.astype(np.int64))
        return
    a = formats.decode(ca, "e4m3") if ty == "*fp8e4nv" else ca
    b = formats.decode(cb, "e4m3") if ty == "*fp8e4nv" else cb
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert np.array_equal(got, chained(a, b, step, preset))
    # and within the truncating FP32 accumulation's bound of the exact float64 product
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(got - exact) <= 2 ** -20 * (np.abs(a) @ np.abs(b)) + 1e-30).all()


def test_triton_attention_step_m64_p_from_tensor_memory():
    """BLOCK_M = 64: Triton stores P (fp16, two to a cell) into Tensor Memory with
    tcgen05.st.16x32bx2 and makes it the [a-tmem] operand of an M = 64 tcgen05.mma, so A
    is read in layout F's rows (the lane alignment of D)."""
    meta = META["attention_step_fp16_m64"]
    src = (DATA / "attention_step_fp16_m64.ptx").read_text()
    assert "kind::f16 [ %r288 + 0 ], [ %r212 + 0 ]" in src
    m, n, h = 64, 64, 64
    rng = np.random.default_rng(0)
    # small integers: S = Q K^T exact, each exp2(S - rowmax) a power of two (or 0)
    q, k = (rng.integers(-1, 2, s).astype(np.float16) for s in ((m, h), (n, h)))
    v = rng.standard_normal((n, h)).astype(np.float16)
    mem = GlobalMemory()
    ptrs = [mem.to_device(x) for x in (q, k, v)] + [mem.calloc(m * h * 4)]
    load_ptx(src).launch(meta["kernel"], 1, 32 * meta["num_warps"], ptrs + [0, 0], mem,
                         dynamic_shared=meta["shared"], gpu="B200")
    o = mem.from_device(ptrs[3], np.float32, (m, h))
    s = q.astype(np.float64) @ k.T.astype(np.float64)          # exact: |s| <= 64
    p = np.exp2(s - s.max(axis=1, keepdims=True)).astype(np.float16)
    assert np.array_equal(o, chained(p.astype(np.float32), v.astype(np.float32), 16,
                                     "B200-FP16"))
