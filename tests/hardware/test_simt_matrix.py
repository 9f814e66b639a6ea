"""Warp-matrix instructions (hardware/simt/matrix.py) against independent references.

The fragment tables are transcribed here from the PTX ISA text (9.7.14.5.x, "Matrix
Fragments for mma.m...": the row/col formulas of each operand), written case by case
rather than in the module's compact form; a product is checked element by element
against numpy integer matmul (exact), against float64 matmul for small integers (every
tensor-core model is exact there), and against refimpl.matmul's preset of the chosen GPU
otherwise (the arithmetic the interpreter must delegate)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from simt_reference import round_code

from hardware.simt import (ExecutionError, GlobalMemory, LaunchError, UnsupportedPtxError,
                           load_ptx)
from hardware.simt.matrix import mma_layout
from refimpl import matmul as mm

# ------------------------------------------------------- ISA fragment tables (by hand)


def isa_m16n8k16_f16_a(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) if i < 4 else t * 2 + (i & 1) + 8
    return 0, row, col


def isa_m16n8k16_f16_b(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 1) if i < 2 else t * 2 + (i & 1) + 8
    return 0, row, g


def isa_m16n8_c(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (g if i < 2 else g + 8), t * 2 + (i & 1)


def isa_m16n8k8_f16_a(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (g if i in (0, 1) else g + 8), t * 2 + (i & 1)


def isa_m16n8k8_f16_b(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, t * 2 + i, g


def isa_m16n8k4_tf32_a(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (g if i == 0 else g + 8), t


def isa_m16n8k4_tf32_b(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, t, g


def isa_m16n8k8_tf32_a(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (g if i in (0, 2) else g + 8), (t if i in (0, 1) else t + 4)


def isa_m16n8k8_tf32_b(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (t if i == 0 else t + 4), g


def isa_m16n8k32_i8_a(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (0 <= i < 4 or 8 <= i < 12) else g + 8
    col = t * 4 + (i & 3) if i < 8 else t * 4 + (i & 3) + 16
    return 0, row, col


def isa_m16n8k32_i8_b(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 4 + (i & 3) if i < 4 else t * 4 + (i & 3) + 16
    return 0, row, g


def isa_m16n8k16_i8_a(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, (g if i < 4 else g + 8), t * 4 + (i & 3)


def isa_m16n8k16_i8_b(lane, i):
    g, t = lane >> 2, lane % 4
    return 0, t * 4 + i, g


def _mma884_group(lane):
    # MMA computation 1: lanes 0-3 and 16-19; 2: 4-7 and 20-23; ...
    return {0: 0, 1: 1, 2: 2, 3: 3}[(lane % 16) // 4]


def isa_m8n8k4_a_row(lane, i):
    return _mma884_group(lane), (lane % 4 if lane < 16 else lane % 4 + 4), i


def isa_m8n8k4_a_col(lane, i):
    return _mma884_group(lane), (i % 4 if lane < 16 else i % 4 + 4), lane % 4


def isa_m8n8k4_b_row(lane, i):
    return _mma884_group(lane), lane % 4, (i if lane < 16 else i + 4)


def isa_m8n8k4_b_col(lane, i):
    return _mma884_group(lane), i, (lane % 4 if lane < 16 else lane % 4 + 4)


def isa_m8n8k4_c_f16(lane, i):
    return _mma884_group(lane), (lane % 4 if lane < 16 else lane % 4 + 4), i


def isa_m8n8k4_c_f32(lane, i):
    x = (lane & 0b1) + (i & 0b10)
    return _mma884_group(lane), (x if lane < 16 else x + 4), (i & 0b100) + (lane & 0b10) + (i & 0b1)


ISA = {  # (shape, operand, bits, layout) -> (elements per lane, formula)
    ("m16n8k16", "a", 16, "row"): (8, isa_m16n8k16_f16_a),
    ("m16n8k16", "b", 16, "col"): (4, isa_m16n8k16_f16_b),
    ("m16n8k16", "c", 32, "row"): (4, isa_m16n8_c),
    ("m16n8k16", "c", 16, "row"): (4, isa_m16n8_c),
    ("m16n8k8", "a", 16, "row"): (4, isa_m16n8k8_f16_a),
    ("m16n8k8", "b", 16, "col"): (2, isa_m16n8k8_f16_b),
    ("m16n8k8", "c", 32, "row"): (4, isa_m16n8_c),
    ("m16n8k4", "a", 32, "row"): (2, isa_m16n8k4_tf32_a),
    ("m16n8k4", "b", 32, "col"): (1, isa_m16n8k4_tf32_b),
    ("m16n8k4", "c", 32, "row"): (4, isa_m16n8_c),
    ("m16n8k8", "a", 32, "row"): (4, isa_m16n8k8_tf32_a),
    ("m16n8k8", "b", 32, "col"): (2, isa_m16n8k8_tf32_b),
    ("m16n8k32", "a", 8, "row"): (16, isa_m16n8k32_i8_a),
    ("m16n8k32", "b", 8, "col"): (8, isa_m16n8k32_i8_b),
    ("m16n8k32", "c", 32, "row"): (4, isa_m16n8_c),
    ("m16n8k32", "c", 16, "row"): (4, isa_m16n8_c),
    ("m16n8k16", "a", 8, "row"): (8, isa_m16n8k16_i8_a),
    ("m16n8k16", "b", 8, "col"): (4, isa_m16n8k16_i8_b),
    ("m8n8k4", "a", 16, "row"): (4, isa_m8n8k4_a_row),
    ("m8n8k4", "a", 16, "col"): (4, isa_m8n8k4_a_col),
    ("m8n8k4", "b", 16, "row"): (4, isa_m8n8k4_b_row),
    ("m8n8k4", "b", 16, "col"): (4, isa_m8n8k4_b_col),
    ("m8n8k4", "c", 16, "row"): (8, isa_m8n8k4_c_f16),
    ("m8n8k4", "c", 32, "row"): (8, isa_m8n8k4_c_f32),
}
DIMS = {"m8n8k4": (8, 8, 4, 4), "m16n8k4": (16, 8, 4, 1), "m16n8k8": (16, 8, 8, 1),
        "m16n8k16": (16, 8, 16, 1), "m16n8k32": (16, 8, 32, 1)}


def isa_table(shape, operand, bits, layout):
    n, f = ISA[(shape, operand, bits, layout)]
    return [[f(lane, i) for i in range(n)] for lane in range(32)]


@pytest.mark.parametrize("key", sorted(ISA))
def test_fragment_tables_match_the_isa_and_cover_each_element_once(key):
    shape, operand, bits, layout = key
    table = isa_table(*key)
    got = mma_layout(shape, operand, bits, layout)
    assert got.tolist() == [[list(x) for x in row] for row in table]
    m, n, k, probs = DIMS[shape]
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]
    seen = sorted(tuple(x) for row in table for x in row)
    assert seen == [(p, r, c) for p in range(probs) for r in range(rows) for c in range(cols)]


# --------------------------------------------------------------------- the harness


def pack(elems: np.ndarray, bits: int) -> np.ndarray:
    """(32, n) element codes -> (32, n * bits / 32) uint32 registers, lowest first."""
    per = 32 // bits
    e = elems.astype(np.uint64) & np.uint64((1 << bits) - 1)
    e = e.reshape(32, -1, per)
    out = np.zeros(e.shape[:2], np.uint64)
    for k in range(per):
        out |= e[:, :, k] << np.uint64(k * bits)
    return out.astype(np.uint32)


def unpack(regs: np.ndarray, bits: int) -> np.ndarray:
    per = 32 // bits
    r = regs.astype(np.uint64)
    out = np.zeros((32, r.shape[1] * per), np.uint64)
    for k in range(per):
        out[:, k::per] = (r >> np.uint64(k * bits)) & np.uint64((1 << bits) - 1)
    return out


def to_fragment(mats: np.ndarray, key) -> np.ndarray:
    """mats: (problems, rows, cols) codes -> (32, n) per the ISA table."""
    table = isa_table(*key)
    return np.array([[mats[p, r, c] for (p, r, c) in row] for row in table])


def from_fragment(elems: np.ndarray, key, shape) -> np.ndarray:
    out = np.zeros(shape, elems.dtype)
    for lane, row in enumerate(isa_table(*key)):
        for i, (p, r, c) in enumerate(row):
            out[p, r, c] = elems[lane, i]
    return out


def run_mma(simt_lanes, text, shape, types, A, B, C, layouts=("row", "col"), gpu="H100",
            target="sm_90"):
    """A (P, M, K), B (P, K, N), C (P, M, N) as codes; types = (d, a, b, c) bit widths."""
    m, n, k, probs = DIMS[shape]
    db, ab, bb, cb = types
    ra = pack(to_fragment(A, (shape, "a", ab, layouts[0])), min(ab, 32))
    rb = pack(to_fragment(B, (shape, "b", bb, layouts[1])), min(bb, 32))
    rc = pack(to_fragment(C, (shape, "c", cb, "row")), cb)
    nd = len(isa_table(shape, "c", db, "row")[0]) * db // 32
    out = simt_lanes(text, {"a": ra, "b": rb, "c": rc}, {"d": (nd, np.uint32)}, gpu=gpu,
                     target=target)["d"]
    return from_fragment(unpack(out, db), (shape, "c", db, "row"), (probs, m, n))


# ----------------------------------------------------------------- integer products


@pytest.mark.parametrize("shape,atype,btype", [("m16n8k32", "s8", "s8"),
                                               ("m16n8k32", "u8", "s8"),
                                               ("m16n8k16", "s8", "u8"),
                                               ("m16n8k16", "u8", "u8")])
def test_integer_mma_is_exact(simt_lanes, shape, atype, btype):
    rng = np.random.default_rng(7)
    m, n, k, _ = DIMS[shape]

    def draw(t, size):
        return rng.integers(-128, 128, size) if t == "s8" else rng.integers(0, 256, size)
    A, B = draw(atype, (1, m, k)), draw(btype, (1, k, n))
    C = rng.integers(-2**31, 2**31 - 2**20, (1, m, n))
    text = f"mma.sync.aligned.{shape}.row.col.s32.{atype}.{btype}.s32 {{d}}, {{a}}, {{b}}, {{c}}"
    got = run_mma(simt_lanes, text, shape, (32, 8, 8, 32), A & 0xFF, B & 0xFF, C & 0xFFFFFFFF)
    want = (C + A @ B) & 0xFFFFFFFF     # Python integers: exact, then two's complement
    assert (got == want).all()


def test_integer_mma_satfinite_clamps_and_plain_wraps(simt_lanes):
    m, n, k, _ = DIMS["m16n8k32"]
    A = np.full((1, m, k), 127)
    B = np.full((1, k, n), 127)                     # each dot product is 32 * 127**2
    C = np.full((1, m, n), 2**31 - 1)
    C[0, 0, 0] = -2**31
    base = "mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.s8.s32 {{d}}, {{a}}, {{b}}, {{c}}"
    wrap = run_mma(simt_lanes, base.format(sat=""), "m16n8k32", (32, 8, 8, 32), A, B,
                   C & 0xFFFFFFFF)
    sat = run_mma(simt_lanes, base.format(sat=".satfinite"), "m16n8k32", (32, 8, 8, 32), A,
                  B, C & 0xFFFFFFFF)
    exact = C + 32 * 127 * 127
    assert (wrap == exact & 0xFFFFFFFF).all()
    assert (sat == np.clip(exact, -2**31, 2**31 - 1) & 0xFFFFFFFF).all()
    assert sat[0, 0, 1] == 2**31 - 1 and sat[0, 0, 0] == (-2**31 + 32 * 127 * 127) & 0xFFFFFFFF


# ------------------------------------------------------------ floating-point products


def f16_codes(x):
    return np.asarray(x, np.float16).view(np.uint16).astype(np.int64)


def f32_codes(x):
    return np.asarray(x, np.float32).view(np.uint32).astype(np.int64)


def bf16_codes(x):
    # values exactly representable in bfloat16: the top half of their float32 bits
    b = np.asarray(x, np.float32).view(np.uint32)
    assert (b & 0xFFFF == 0).all()
    return (b >> 16).astype(np.int64)


def fp8_codes(x, fmt):
    # values exactly representable in the FP8 format: their codes from its definition
    return np.array([round_code(fmt, float(v)) for v in x.ravel()], np.int64).reshape(x.shape)


def preset_product(gpu, fmt, A, B, C, out="fp32"):
    name = {("H100", "E4M3"): "H100-E4M3-MMA"}.get((gpu, fmt), f"{gpu}-{fmt}")
    return mm.matmul(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                     accumulate=name, out_format=out)


FLOAT_CASES = [
    # shape, ptx types, element bits (d, a, b, c), format, encoder of a/b, gpu
    ("m16n8k16", "f32.f16.f16.f32", (32, 16, 16, 32), "FP16", f16_codes, "H100"),
    ("m16n8k16", "f32.f16.f16.f32", (32, 16, 16, 32), "FP16", f16_codes, "A100"),
    ("m16n8k16", "f16.f16.f16.f16", (16, 16, 16, 16), "FP16", f16_codes, "H100"),
    ("m16n8k16", "f32.f16.f16.f16", (32, 16, 16, 16), "FP16", f16_codes, "A100"),
    ("m16n8k8", "f32.f16.f16.f32", (32, 16, 16, 32), "FP16", f16_codes, "T4"),
    ("m16n8k16", "f32.bf16.bf16.f32", (32, 16, 16, 32), "BF16", bf16_codes, "A100"),
    ("m16n8k8", "f32.bf16.bf16.f32", (32, 16, 16, 32), "BF16", bf16_codes, "H100"),
    ("m16n8k4", "f32.tf32.tf32.f32", (32, 32, 32, 32), "TF32", f32_codes, "A100"),
    ("m16n8k8", "f32.tf32.tf32.f32", (32, 32, 32, 32), "TF32", f32_codes, "H100"),
]


def _inputs(kind, fmt, shape, rng):
    m, n, k, probs = DIMS[shape]
    if kind == "int":        # small integers: every model is exact
        A = rng.integers(-8, 9, (probs, m, k)).astype(np.float64)
        B = rng.integers(-8, 9, (probs, k, n)).astype(np.float64)
        C = rng.integers(-64, 65, (probs, m, n)).astype(np.float64)
        return A, B, C
    from refimpl import formats
    f = {"FP16": "fp16", "BF16": "bf16", "TF32": "tf32", "E4M3": "e4m3", "E5M2": "e5m2"}[fmt]

    def rnd(shape_):
        return formats.round_to(rng.standard_normal(shape_) * 4, f).astype(np.float64)
    C = rng.standard_normal((probs, m, n)).astype(np.float32).astype(np.float64)
    return rnd((probs, m, k)), rnd((probs, k, n)), C


@pytest.mark.parametrize("kind", ["int", "random"])
@pytest.mark.parametrize("case", FLOAT_CASES, ids=lambda c: f"{c[0]}.{c[1]}.{c[5]}")
def test_float_mma_uses_the_gpu_preset(simt_lanes, case, kind):
    shape, types, bits, fmt, enc, gpu = case
    rng = np.random.default_rng(3)
    A, B, C = _inputs(kind, fmt, shape, rng)
    dt, ct = types.split(".")[0], types.split(".")[3]
    if ct == "f16":
        C = C.astype(np.float16).astype(np.float64)
    cenc = f16_codes if ct == "f16" else f32_codes
    text = f"mma.sync.aligned.{shape}.row.col.{types} {{d}}, {{a}}, {{b}}, {{c}}"
    got = run_mma(simt_lanes, text, shape, bits, enc(A), enc(B), cenc(C), gpu=gpu)
    vals = got.astype(np.uint16).view(np.float16) if dt == "f16" else \
        got.astype(np.uint32).view(np.float32)
    want = preset_product(gpu, fmt, A, B, C, "fp16" if dt == "f16" else "fp32")
    assert (vals.astype(np.float32).view(np.uint32) == want.view(np.uint32)).all()
    if kind == "int":
        assert (vals.astype(np.float64) == A @ B + C).all()


def test_tf32_operands_drop_the_low_13_bits(simt_lanes):
    rng = np.random.default_rng(5)
    A = rng.integers(-8, 9, (1, 16, 8)).astype(np.float64)
    B = rng.integers(-8, 9, (1, 8, 8)).astype(np.float64)
    noise = rng.integers(1, 2**13, (1, 16, 8))
    text = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d}, {a}, {b}, {c}"
    got = run_mma(simt_lanes, text, "m16n8k8", (32, 32, 32, 32), f32_codes(A) | noise,
                  f32_codes(B), f32_codes(np.zeros((1, 16, 8))), gpu="A100")
    assert (got.astype(np.uint32).view(np.float32) == A @ B).all()


@pytest.mark.parametrize("acc", ["f32", "f16"])
@pytest.mark.parametrize("fmt,gpu", [("e4m3", "H100"), ("e5m2", "H100"), ("e4m3", "B200"),
                                     ("e5m2", "L40S")])
def test_fp8_mma_m16n8k32(simt_lanes, fmt, gpu, acc):
    from refimpl import formats
    rng = np.random.default_rng(11)
    A = formats.round_to(rng.standard_normal((1, 16, 32)) * 3, fmt).astype(np.float64)
    B = formats.round_to(rng.standard_normal((1, 32, 8)) * 3, fmt).astype(np.float64)
    C = rng.standard_normal((1, 16, 8)).astype(np.float16 if acc == "f16" else np.float32)
    C = C.astype(np.float64)
    cb = 32 if acc == "f32" else 16
    text = (f"mma.sync.aligned.m16n8k32.row.col.{acc}.{fmt}.{fmt}.{acc} "
            "{d}, {a}, {b}, {c}")
    got = run_mma(simt_lanes, text, "m16n8k32", (cb, 8, 8, cb),
                  fp8_codes(A, fmt), fp8_codes(B, fmt),
                  (f32_codes if acc == "f32" else f16_codes)(C), gpu=gpu)
    vals = got.astype(np.uint32).view(np.float32) if acc == "f32" else \
        got.astype(np.uint16).view(np.float16).astype(np.float32)
    name = f"{gpu}-{fmt.upper()}" + ("-MMA" if gpu == "H100" else "")
    want = mm.matmul(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32),
                     accumulate=name, out_format="fp32" if acc == "f32" else "fp16")
    assert (vals.view(np.uint32) == want.view(np.uint32)).all()


def _fp8_probe_operands():
    """A (16 x 32), B (32 x 8), C (16 x 8) holding the hand-derived FP8 probes of
    tests/refimpl/test_matmul_fp8_mma.py at chosen outputs (the other entries unchecked)."""
    A, B, C = np.zeros((1, 16, 32)), np.zeros((1, 32, 8)), np.zeros((1, 16, 8))
    # column 0: products 2, 2^-10, 2^-11 at k = 0, 1, 2 (rows 0-2), C = 0, -1, -1.5
    B[0, :3, 0] = [2.0, 2.0**-5, 2.0**-6]
    for r in range(3):
        A[0, r, :3] = [1.0, 2.0**-5, 2.0**-5]
    C[0, 1, 0], C[0, 2, 0] = -1.0, -1.5
    # row 4, column 1: 2^-11 at k = 0, 2 at k = 2, 2^-10 at k = 3
    A[0, 4, [0, 2, 3]] = [2.0**-5, 1.0, 2.0**-5]
    B[0, [0, 2, 3], 1] = [2.0**-6, 2.0, 2.0**-5]
    # row 5, column 0: products 2 (k = 0) and 2^-9 * 2^-5 = 2^-14 (k = 1)
    A[0, 5, :2] = [1.0, 2.0**-9]
    # rows 6 and 7, columns 2 and 3: 256, 2^-17 (k = 0, 1) and -256 at k = 31 or k = 4
    for r, col, where in ((6, 2, 31), (7, 3, 4)):
        A[0, r, [0, 1, where]] = [16.0, 2.0**-9, -16.0]
        B[0, [0, 1, where], col] = [16.0, 2.0**-8, 16.0]
    return A, B, C


#: (row, column) -> (H100 f32, H100 f16, B200 f32, B200 f16), derived by hand: FP16
#: accumulators and B200's FP32 round each interleaved half (k = 0, 1 mod 4, then 2, 3
#: mod 4, F = 25) into the accumulator and add C last with one round to nearest; H100's
#: FP32 path is one block of 32 with F = 13 (grid 2^(eta - 13)) into E8M13.
FP8_PROBES = {
    # 2 + 2^-10 ties to 2 in FP16, 2 + 2^-11 rounds to 2 again; FP32 keeps 2 + 3 * 2^-11
    (0, 0): (2 + 3 * 2.0**-11, 2.0, 2 + 3 * 2.0**-11, 2.0),
    (1, 0): (1 + 3 * 2.0**-11, 1.0, 1 + 3 * 2.0**-11, 1.0),
    (2, 0): (0.5 + 3 * 2.0**-11, 0.5, 0.5 + 3 * 2.0**-11, 0.5),
    # halves swapped: d1 = 2^-11, then RN16(2 + 3 * 2^-11) = 2 + 2^-9
    (4, 1): (2 + 3 * 2.0**-11, 2 + 2.0**-9, 2 + 3 * 2.0**-11, 2 + 2.0**-9),
    # F = 13 drops 2^-14 below 2 (grid 2^-12); F = 25 keeps it; FP16 (ulp 2^-9) drops it
    (5, 0): (2.0, 2.0, 2 + 2.0**-14, 2.0),
    # the first half 256 + 2^-17 rounds to 256 before -256 (k = 31) cancels it: 0
    (6, 2): (0.0, 0.0, 0.0, 0.0),
    # -256 in the first half (k = 4): 2^-17 survives where F = 25 (H100 f32: F = 13, 0)
    (7, 3): (0.0, 2.0**-17, 2.0**-17, 2.0**-17),
}


@pytest.mark.parametrize("acc", ["f32", "f16"])
@pytest.mark.parametrize("gpu", ["H100", "H200", "B200"])
def test_fp8_mma_m16n8k32_hand_derived_probes(simt_lanes, gpu, acc):
    A, B, C = _fp8_probe_operands()
    cb = 32 if acc == "f32" else 16
    text = f"mma.sync.aligned.m16n8k32.row.col.{acc}.e4m3.e4m3.{acc} {{d}}, {{a}}, {{b}}, {{c}}"
    got = run_mma(simt_lanes, text, "m16n8k32", (cb, 8, 8, cb), fp8_codes(A, "e4m3"),
                  fp8_codes(B, "e4m3"), (f32_codes if acc == "f32" else f16_codes)(C), gpu=gpu)
    vals = got.astype(np.uint32).view(np.float32) if acc == "f32" else \
        got.astype(np.uint16).view(np.float16).astype(np.float32)
    col = {"f32": 0, "f16": 1}[acc] + (2 if gpu == "B200" else 0)
    for (r, c), want in FP8_PROBES.items():
        assert vals[0, r, c] == want[col], (gpu, acc, r, c, vals[0, r, c], want[col])


#: nvcc's PTX (sm_90) of tests/hardware/data/mma_fp8_dot.cu: one FP8 dot product of
#: length 32 per warp through mma.sync.m16n8k32, D[0][0] of each warp stored
FP8_DOT_PTX = Path(__file__).parent / "data" / "mma_fp8_dot.ptx"


@pytest.mark.parametrize("acc", ["f32", "f16"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("gpu", ["H100", "H200", "B200"])
def test_nvcc_mma_fp8_kernel_hand_derived_probes(gpu, fmt, acc):
    # the probes of FP8_PROBES as one dot product per warp (their values are E5M2 values
    # too, with the same results: the products' exponents differ but stay in the
    # same grids), through the compiler's fragment set-up and mma.sync
    A, B, C = _fp8_probe_operands()
    keys = sorted(FP8_PROBES)
    a = np.stack([A[0, r, :] for r, _ in keys])
    b = np.stack([B[0, :, c] for _, c in keys])
    cs = np.array([C[0, r, c] for r, c in keys])
    mem = GlobalMemory()
    ca = np.asarray(fp8_codes(a, fmt), np.uint8)
    cbits = cs.astype(np.float32) if acc == "f32" else cs.astype(np.float16).view(np.uint16)
    ptrs = [mem.to_device(x) for x in (ca, np.asarray(fp8_codes(b, fmt), np.uint8), cbits)]
    out = mem.alloc(len(keys) * (4 if acc == "f32" else 2))
    load_ptx(FP8_DOT_PTX.read_text()).launch(f"dot_{fmt}_{acc}", (2,), (128,),
                                             ptrs + [out, len(keys)], mem, gpu=gpu)
    got = mem.from_device(out, np.float32 if acc == "f32" else np.float16, (len(keys),))
    col = {"f32": 0, "f16": 1}[acc] + (2 if gpu == "B200" else 0)
    for i, key in enumerate(keys):
        assert float(got[i]) == FP8_PROBES[key][col], (gpu, fmt, acc, key, got[i])


@pytest.mark.parametrize("gpu", ["H100", "H200", "B200"])
def test_nvcc_mma_fp8_kernel_reproduces_published_gpu_outputs(gpu):
    # the sample of published real-GPU outputs of tests/refimpl/data (its file names the
    # source and licence): the same kernel shape, one dot product per warp
    data = json.loads((Path(__file__).parents[1] / "refimpl" / "data" /
                       "mma_fp8_published.json").read_text())
    module = load_ptx(FP8_DOT_PTX.read_text())
    for fmt in ("e4m3", "e5m2"):
        for acc, ftype, ctype in (("fp32", np.float32, np.float32),
                                  ("fp16", np.float16, np.float16)):
            cases = [x for x in data["cases"] if (x["gpu"], x["format"], x["accumulator"])
                     == (gpu, fmt, acc)]
            assert cases
            mem = GlobalMemory()
            a = np.frombuffer(bytes.fromhex("".join(x["a"] for x in cases)), np.uint8)
            b = np.frombuffer(bytes.fromhex("".join(x["b"] for x in cases)), np.uint8)
            c = np.array([float.fromhex(x["c"]) for x in cases]).astype(ctype)
            ptrs = [mem.to_device(np.ascontiguousarray(x)) for x in (a, b, c)]
            out = mem.alloc(len(cases) * np.dtype(ftype).itemsize)
            module.launch(f"dot_{fmt}_{acc.replace('fp', 'f')}", (-(-len(cases) // 4),),
                          (128,), ptrs + [out, len(cases)], mem, gpu=gpu)
            got = mem.from_device(out, ftype, (len(cases),)).astype(np.float64)
            want = np.array([float.fromhex(x["d"]) for x in cases])
            assert (got == want).all(), (fmt, acc, got, want)


@pytest.mark.parametrize("alay,blay", [("row", "col"), ("col", "row"), ("row", "row"),
                                       ("col", "col")])
@pytest.mark.parametrize("acc", ["f32", "f16"])
def test_m8n8k4_four_products_per_warp(simt_lanes, alay, blay, acc):
    rng = np.random.default_rng(13)
    A = rng.integers(-8, 9, (4, 8, 4)).astype(np.float64)
    B = rng.integers(-8, 9, (4, 4, 8)).astype(np.float64)
    C = rng.integers(-50, 50, (4, 8, 8)).astype(np.float64)
    cb = 32 if acc == "f32" else 16
    cenc = f32_codes if acc == "f32" else f16_codes
    text = (f"mma.sync.aligned.m8n8k4.{alay}.{blay}.{acc}.f16.f16.{acc} "
            "{d}, {a}, {b}, {c}")
    got = run_mma(simt_lanes, text, "m8n8k4", (cb, 16, 16, cb), f16_codes(A), f16_codes(B),
                  cenc(C), layouts=(alay, blay), gpu="V100", target="sm_70")
    vals = got.astype(np.uint32).view(np.float32) if acc == "f32" else \
        got.astype(np.uint16).view(np.float16).astype(np.float64)
    assert (vals == A @ B + C).all()
    assert (np.asarray(vals, np.float32) ==
            preset_product("V100", "FP16", A, B, C, "fp32" if acc == "f32" else "fp16")).all()


def test_a_gpu_without_a_preset_is_refused_at_launch(simt_lanes):
    z = np.zeros((32, 4), np.uint32)
    text = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d}, {a}, {b}, {c}"
    with pytest.raises(LaunchError, match="V100.*no tensor-core preset"):
        simt_lanes(text, {"a": z, "b": z[:, :2], "c": z}, {"d": (4, np.uint32)}, gpu="V100")
    with pytest.raises(LaunchError, match="gpu must be one of"):
        simt_lanes(text, {"a": z, "b": z[:, :2], "c": z}, {"d": (4, np.uint32)}, gpu="X1")


@pytest.mark.parametrize("text,why", [
    ("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32 {d}, {a}, {b}, {c}", ".row.col only"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32 {d}, {a}, {b}, {c}", "not supported"),
    ("mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {d}, {a}, {b}, {c}", "in .f32 only"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {d}, {a}, {b}, {c}", "mixed"),
    ("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {d}, {a}, {b}, {c}", "shape"),
    ("mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32 {d}, {a}, {b}, {c}", ".s4 elements"),
    ("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {d}, {a}, {b}, {c}", ".f64 elements"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32 {d}, {a}, {b}, {c}",
     ".kind"),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {d}, {a}, {b}, {c}, {a0}, 0x0",
     "sparse"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {b}, {a}, {b}, {c}", "registers"),
])
def test_unsupported_forms_are_refused_at_load(simt_lanes, text, why):
    z = np.zeros((32, 4), np.uint32)
    with pytest.raises(UnsupportedPtxError, match=why):
        simt_lanes(text, {"a": z, "b": z[:, :2], "c": z}, {"d": (4, np.uint32)})


def test_partial_warp_is_refused(simt_lanes):
    z = np.zeros((16, 4), np.uint32)
    text = "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {d}, {a}, {b}, {c}"
    with pytest.raises(ExecutionError, match="partial warp"):
        simt_lanes(text, {"a": z[:, :2], "b": z[:, :1], "c": z}, {"d": (4, np.uint32)},
                   threads=16)


# ------------------------------------------------------ ldmatrix, stmatrix, movmatrix

# shared memory holds 8 matrices of 8 x 8 16-bit values, value = 1000 j + 10 r + c for
# matrix j, row r, column c; the rows are stored in a permuted order so that each row
# address is really used
_PERM = [5, 2, 7, 0, 3, 6, 1, 4]


def _smem_rows():
    """(bytes of shared memory, address of row r of matrix j)."""
    mem = np.zeros(8 * 8 * 8, np.uint16)
    addr = {}
    for j in range(4):
        for r in range(8):
            slot = j * 8 + _PERM[r]
            mem[slot * 8: slot * 8 + 8] = [1000 * j + 10 * r + c for c in range(8)]
            addr[j, r] = slot * 16
    return mem, addr


def _setup_smem(mem: np.ndarray) -> str:
    words = mem.view(np.uint32)
    return "\n\t".join(f"st.shared.u32 [smem+{4 * i}], {int(w)};" for i, w in enumerate(words)
                       if w)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragments(simt_lanes, num, trans):
    mem, addr = _smem_rows()
    # lane 8 j + r gives the address of row r of matrix j; the others give garbage that
    # must not be used (x1/x2 read only lanes 0-7 / 0-15)
    lane_addr = np.array([[addr[(lane // 8, lane % 8)] if lane < 8 * num else 3]
                          for lane in range(32)], np.uint32)
    setup = _setup_smem(mem) + "\n\tbar.sync 0;\n\tmov.u32 %r30, smem;\n\tadd.u32 %r31, %r30, {p0};"
    text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
            "{d}, [%r31]")
    out = simt_lanes(setup.replace("{p0}", "%r1") + "\n\t" + text.replace("{d}", "{d}"),
                     {"p": lane_addr}, {"d": (num, np.uint32)}, shared=len(mem) * 2)["d"]
    for lane in range(32):
        for j in range(num):
            # ISA figure: lane t holds row t // 4, columns 2 (t % 4) and 2 (t % 4) + 1;
            # with .trans, column t // 4 of rows 2 (t % 4) and 2 (t % 4) + 1
            if trans:
                lo = 1000 * j + 10 * (2 * (lane % 4)) + lane // 4
                hi = 1000 * j + 10 * (2 * (lane % 4) + 1) + lane // 4
            else:
                lo = 1000 * j + 10 * (lane // 4) + 2 * (lane % 4)
                hi = lo + 1
            assert out[lane, j] == lo | (hi << 16), (lane, j)


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_inverts_ldmatrix(simt_lanes, trans):
    rng = np.random.default_rng(2)
    regs = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    lane_addr = np.array([[(lane // 8) * 128 + _PERM[lane % 8] * 16] for lane in range(32)],
                         np.uint32)
    t = ".trans" if trans else ""
    setup = "mov.u32 %r30, smem;\n\tadd.u32 %r31, %r30, %r1;"
    text = (f"stmatrix.sync.aligned.m8n8.x4{t}.shared.b16 [%r31], {{v}};\n\tbar.sync 0;\n\t"
            f"ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{d}}, [%r31]")
    out = simt_lanes(setup + "\n\t" + text, {"p": lane_addr, "v": regs},
                     {"d": (4, np.uint32)}, shared=512)["d"]
    assert (out == regs).all()


def test_stmatrix_layout(simt_lanes):
    # lane t stores the pair (row t // 4, columns 2 (t % 4), + 1) of each matrix
    regs = np.array([[(1000 * j + 10 * (lane // 4) + 2 * (lane % 4)) |
                      ((1000 * j + 10 * (lane // 4) + 2 * (lane % 4) + 1) << 16)
                      for j in range(2)] for lane in range(32)], np.uint32)
    lane_addr = np.array([[(lane // 8) * 128 + 16 * (lane % 8)] for lane in range(32)],
                         np.uint32)
    text = ("mov.u32 %r30, smem;\n\tadd.u32 %r31, %r30, %r1;\n\t"
            "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r31], {v};\n\tbar.sync 0;\n\t"
            "shl.b32 %r32, %r0, 3;\n\tadd.u32 %r32, %r32, %r30;\n\t"
            "ld.shared.v2.u32 {d}, [%r32]")
    out = simt_lanes(text, {"p": lane_addr, "v": regs}, {"d": (2, np.uint32)},
                     shared=256)["d"]
    halves = out.reshape(-1).view(np.uint16)      # shared memory as 128 values
    want = [1000 * j + 10 * r + c for j in range(2) for r in range(8) for c in range(8)]
    assert halves.tolist() == want


def test_movmatrix_transposes(simt_lanes):
    # lane t holds row t // 4, columns 2 (t % 4), 2 (t % 4) + 1 of M[r][c] = 10 r + c
    a = np.array([[(10 * (lane // 4) + 2 * (lane % 4)) | ((10 * (lane // 4) + 2 * (lane % 4) + 1) << 16)]
                  for lane in range(32)], np.uint32)
    out = simt_lanes("movmatrix.sync.aligned.m8n8.trans.b16 {d0}, {a0}", {"a": a},
                     {"d": (1, np.uint32)})["d"][:, 0]
    for lane in range(32):
        r, c = lane // 4, 2 * (lane % 4)           # of the transpose: M[c][r], M[c+1][r]
        assert out[lane] == (10 * c + r) | ((10 * (c + 1) + r) << 16)


def test_ldmatrix_misaligned_row_is_a_fault(simt_lanes):
    lane_addr = np.full((32, 1), 8, np.uint32)
    text = ("mov.u32 %r30, smem;\n\tadd.u32 %r31, %r30, %r1;\n\t"
            "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {d}, [%r31]")
    with pytest.raises(ExecutionError, match="16-byte aligned"):
        simt_lanes(text, {"p": lane_addr}, {"d": (1, np.uint32)}, shared=256)


# ----------------------------------------------------------------------------- wmma


def test_wmma_needs_one_address_per_warp():
    ptx = """.version 9.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd1, %rd1, %rd2;
    wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%rd1], 16;
    ret;
}
"""
    from hardware.simt import GlobalMemory
    mem = GlobalMemory()
    p = mem.alloc(4096)
    with pytest.raises(ExecutionError, match="different addresses"):
        load_ptx(ptx).launch("k", 1, 32, [p], mem)
