"""Single PTX instructions at the edges of their range, each against an independent
reference: approximate transcendentals and div.approx against the PTX ISA error bounds
and special values (double-precision libm as the reference), half-precision atomics
against numpy.float16 / exact bfloat16 rounding in thread order, carry chains against
Python integers, min/max with .NaN/.relu/.ftz and cvt .relu against the ISA text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simt_harness import load, run_elementwise
from simt_reference import round_code

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import UnsupportedPtxError


def _unary(opcode: str, x: np.ndarray) -> np.ndarray:
    """``opcode d, a`` once per float32 element."""
    got = run_elementwise(f"{opcode} {{d}}, {{a}}", [x.view(np.uint32)], np.uint32)
    return got.view(np.float32)


_LARGE = [1e3, -1e5, 1e7, 2.0**24 + 2, 1e10, -1e12, 1e15, 1e17, 1e20, -1e25, 3e38,
          -3.4028235e38, 1e30, 2.0**100, 314.0, 7e8]


@pytest.mark.parametrize("op,ref", [("sin", math.sin), ("cos", math.cos)])
def test_sin_cos_approx_large_arguments(op, ref):
    """sin/cos.approx.f32 of any finite argument is a finite value within the documented
    absolute error 2**-20.5 of the exact function (PTX ISA 9.7.3.18-19 bound the error
    on [-100pi, 100pi]; the model reduces every argument exactly, so it holds beyond).
    The reference is the platform's double-precision libm, accurate to about 1e-16."""
    x = np.array(_LARGE, np.float32)
    got = _unary(f"{op}.approx.f32", x).astype(np.float64)
    exp = np.array([ref(float(v)) for v in x])
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - exp)) <= 2.0**-20.5


def test_sin_approx_keeps_the_sign_of_zero():
    """PTX ISA 9.7.3.18 (sin), special values: sin(-0.0) = -0.0, sin(+0.0) = +0.0."""
    got = _unary("sin.approx.f32", np.array([-0.0, 0.0], np.float32))
    assert got.view(np.uint32).tolist() == [0x80000000, 0]


def _binary(opcode: str, x: np.ndarray, y: np.ndarray, dtype=np.float32) -> np.ndarray:
    """``opcode d, a, b`` once per pair of 32-bit elements (raw bits in and out)."""
    got = run_elementwise(f"{opcode} {{d}}, {{a}}, {{b}}", [x.view(np.uint32), y.view(np.uint32)],
                          np.uint32)
    return got.view(dtype)


def test_div_approx_large_divisors():
    """PTX ISA 9.7.3.8 (div): div.approx.f32 computes a * (1/b); for 2**126 < |b| < 2**128
    it returns 0, or NaN when a is infinite (also documented for __fdividef); in
    [2**-126, 2**126] the error is at most 2 ulp."""
    big = np.float32(2.0**127)
    x = np.array([1e38, -3.0, np.inf, 1.0, 7.0, -1e-30, 3e38, 1.0], np.float32)
    y = np.array([big, big * 1.5, big, -big, 3.0, 7e-20, 5.0, 3.4e38], np.float32)
    got = _binary("div.approx.f32", x, y)
    assert got[0] == 0 and got[1] == 0 and np.isnan(got[2]) and got[3] == 0 and got[7] == 0
    exact = x[4:7].astype(np.float64) / y[4:7].astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[4:7] - exact) <= 2 * ulp)
    full = _binary("div.full.f32", x[:2], y[:2])
    assert full[0] != 0       # div.full keeps its accuracy over the full range


_HALF_ATOM_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3)
{
    .reg .b16 %rs<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    ld.param.u64 %rd4, [p3];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6];
    mov.b32 {%rs1, %rs2}, %r2;
    atom.global.add.noftz.f16 %rs3, [%rd1], %rs1;
    atom.global.add.noftz.bf16 %rs3, [%rd2], %rs2;
    atom.global.add.noftz.f16x2 %r3, [%rd3], %r2;
    ret;
}
"""


def test_half_precision_atomic_add():
    """atomicAdd on __half, __half2 and __nv_bfloat16 (atom.add.noftz.{f16,f16x2,bf16},
    PTX ISA 9.7.13.4): round to nearest even, subnormals kept, each half of a pair added
    on its own; lanes apply in thread order."""
    rng = np.random.default_rng(21)
    lo = (rng.standard_normal(32) * 300).astype(np.float16)
    lo[:3] = [np.float16(6e-8), np.float16(6e-8), np.float16(-1.5e-7)]  # subnormals
    hi_f = (rng.standard_normal(32) * 8).astype(np.float32)
    hi_bits = (hi_f.view(np.uint32) >> 16).astype(np.uint16)        # bf16 by truncation
    packed = lo.view(np.uint16).astype(np.uint32) | (hi_bits.astype(np.uint32) << 16)
    mem = GlobalMemory()
    p_h = mem.to_device(np.zeros(1, np.uint16))
    p_b = mem.to_device(np.zeros(1, np.uint16))
    p_2 = mem.to_device(np.zeros(2, np.uint16))
    p_x = mem.to_device(packed)
    load(_HALF_ATOM_PTX).launch("k", 1, 32, [p_h, p_b, p_2, p_x], mem)
    h = np.float16(0.0)
    for v in lo:  # float64 sums of two binary16 values are exact; one rounding to f16
        h = np.float16(np.float64(h) + np.float64(v))
    b = 0.0
    for bits in hi_bits:
        # the float64 sum of two bfloat16 values is exact; one rounding to bfloat16
        code = round_code("bf16", b + float(np.uint32(int(bits) << 16).view(np.float32)))
        b = float(np.uint32(code << 16).view(np.float32))
    h_lo = np.float16(0.0)
    h_hi = 0.0
    for v, bits in zip(lo, hi_bits):
        h_lo = np.float16(np.float64(h_lo) + np.float64(v))
        h_hi = float(np.float16(h_hi + float(np.uint16(bits).view(np.float16))))
    assert mem.from_device(p_h, np.uint16, 1)[0] == h.view(np.uint16)
    got_b = np.uint32(int(mem.from_device(p_b, np.uint16, 1)[0]) << 16).view(np.float32)
    assert float(got_b) == b
    assert mem.from_device(p_2, np.uint16, 2).tolist() == [
        int(h_lo.view(np.uint16)), int(np.float16(h_hi).view(np.uint16))]


_CARRY_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    ld.param.u64 %rd3, [p2];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 16;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd5];
    ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd6];
    add.cc.u32 %r10, %r2, %r6;
    addc.cc.u32 %r11, %r3, %r7;
    addc.cc.u32 %r12, %r4, %r8;
    addc.u32 %r13, %r5, %r9;
    sub.cc.u32 %r14, %r2, %r6;
    subc.cc.u32 %r15, %r3, %r7;
    subc.cc.u32 %r16, %r4, %r8;
    subc.u32 %r17, %r5, %r9;
    mul.wide.u32 %rd7, %r1, 64;
    add.s64 %rd8, %rd3, %rd7;
    st.global.v4.u32 [%rd8], {%r10, %r11, %r12, %r13};
    st.global.v4.u32 [%rd8+16], {%r14, %r15, %r16, %r17};
    ld.global.v2.u64 {%rd10, %rd11}, [%rd5];
    ld.global.v2.u64 {%rd12, %rd13}, [%rd6];
    mad.lo.cc.u64 %rd14, %rd10, %rd12, %rd11;
    madc.hi.cc.u64 %rd15, %rd10, %rd12, %rd13;
    addc.u64 %rd16, 0, 0;
    st.global.v2.u64 [%rd8+32], {%rd14, %rd15};
    st.global.u64 [%rd8+48], %rd16;
    ret;
}
"""


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_carry_chains(seed):
    """add.cc/addc and sub.cc/subc (PTX ISA 9.7.2: subc computes a - (b + CC.CF)) as
    128-bit addition and subtraction of 32-bit limbs; mad.lo.cc/madc.hi.cc/addc on
    64-bit operands: lo(a*b) + c, then hi(a*b) + d + carry, then the final carry."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    a[0], b[0] = [0xFFFFFFFF] * 4, [1, 0, 0, 0]           # carry through every limb
    a[1], b[1] = [0, 0, 0, 0], [1, 0, 0, 0]               # borrow through every limb
    a[2], b[2] = [0xFFFFFFFF] * 4, [0xFFFFFFFF] * 4
    mem = GlobalMemory()
    pa, pb, po = mem.to_device(a), mem.to_device(b), mem.alloc(64 * 32)
    load(_CARRY_PTX).launch("k", 1, 32, [pa, pb, po], mem)
    out = mem.from_device(po, np.uint32, 16 * 32).reshape(32, 16)
    m128 = (1 << 128) - 1
    m64 = (1 << 64) - 1
    for i in range(32):
        x = sum(int(a[i, k]) << (32 * k) for k in range(4))
        y = sum(int(b[i, k]) << (32 * k) for k in range(4))
        limbs = lambda v: [(v >> (32 * k)) & 0xFFFFFFFF for k in range(4)]  # noqa: E731
        assert out[i, 0:4].tolist() == limbs((x + y) & m128)
        assert out[i, 4:8].tolist() == limbs((x - y) & m128)
        a0, a1, b0, b1 = x & m64, x >> 64, y & m64, y >> 64
        lo = ((a0 * b0) & m64) + a1
        hi = ((a0 * b0) >> 64) + b1 + (lo >> 64)
        got = [int(v) for v in out[i, 8:14].view(np.uint64)]
        assert got == [lo & m64, hi & m64, hi >> 64]


def test_min_max_nan_modifier_and_relu():
    """PTX ISA min/max: with .NaN the result is the canonical NaN when either input is
    NaN (f32, f16x2); without it a NaN input is ignored; max.relu.s32 clamps a negative
    result to 0; min.ftz.f16x2 flushes subnormal inputs to signed zeros."""
    nan = np.float32(np.nan)
    x = np.array([nan, 1.0, -2.0, nan, -0.0], np.float32)
    y = np.array([3.0, nan, 5.0, nan, 0.0], np.float32)
    got = _binary("max.NaN.f32", x, y).view(np.uint32)
    assert got.tolist() == [0x7FFFFFFF, 0x7FFFFFFF, np.float32(5.0).view(np.uint32), 0x7FFFFFFF, 0]
    got = _binary("min.f32", x, y).view(np.uint32)
    assert got.tolist()[:3] == [np.float32(v).view(np.uint32) for v in (3.0, 1.0, -2.0)]
    # integer relu and packed halves through raw bits
    a = np.array([-5, 7, -1, 3], np.int32)
    b = np.array([-9, 2, -3, -8], np.int32)
    assert _binary("max.relu.s32", a, b, np.int32).tolist() == [0, 7, 0, 3]
    h = lambda *v: np.array(v, np.float16).view(np.uint16).astype(np.uint32)  # noqa: E731
    a2 = h(np.nan, 1.0, 6e-8, 2.0) | (h(1.0, np.nan, -6e-8, -0.0) << 16)
    b2 = h(1.0, 4.0, 1e-7, -3.0) | (h(-1.0, 0.5, 0.0, 0.0) << 16)
    got = _binary("max.NaN.f16x2", a2, b2, np.uint32)
    assert [int(v) & 0xFFFF for v in got] == [0x7FFF, int(h(4.0)[0]), int(h(1e-7)[0]),
                                              int(h(2.0)[0])]
    assert [int(v) >> 16 for v in got] == [int(h(1.0)[0]), 0x7FFF, 0, 0]
    got = _binary("min.ftz.f16x2", a2, b2, np.uint32) & 0xFFFF
    assert int(got[2]) == 0  # both low halves subnormal: flushed to +0 (min gives 6e-8)


def test_register_declaration_without_space():
    """cuda_fp16's h2sqrt inline asm declares ``.reg.b16 hl, hu;`` (no space)."""
    x = np.array([0x12345678, 0xFFFF0000], np.uint32)
    y = np.array([0, 1], np.uint32)
    got = run_elementwise("{{.reg.b16 hl, hu;\n .reg.b32 t;\n mov.b32 {{hl, hu}}, {a};\n"
                          " mov.b32 t, {{hu, hl}};\n xor.b32 {d}, t, {b};}}", [x, y], np.uint32)
    assert got.tolist() == [0x56781234, 0x0000FFFF ^ 1]


def test_cvt_relu_to_half():
    """cvt.rn.relu.{f16,bf16}.f32 (PTX ISA cvt): negative values become +0, NaN stays
    the canonical NaN; it used to be ignored."""
    x = np.array([-1.5, 2.0, np.nan, -1e-9], np.float32)
    for fmt, two in (("f16", np.float16(2.0).view(np.uint16)), ("bf16", 0x4000)):
        got = run_elementwise(f"cvt.rn.relu.{fmt}.f32 %rs5, {{a}};\n\tcvt.u32.u16 {{d}}, %rs5",
                              [x.view(np.uint32)], np.uint32).tolist()
        assert got == [0, int(two), 0x7FFF, 0], fmt


_CVT_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p){
.reg .f32 %f<2>; .reg .b16 %h<2>; .reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
mov.f32 %f1, 0f3F800000;
cvt.MOD.f16.f32 %h1, %f1;
st.global.b16 [%rd1], %h1;
ret;
}"""


@pytest.mark.parametrize("modifier", ["rna", "rs", "rna.satfinite"])
def test_cvt_modifier_not_defined_for_the_conversion_is_refused(modifier):
    # PTX ISA 9.7.9.21: .rna rounds only into .tf32, .rs only into packed low-precision
    # types; a scalar f32 -> f16 cvt carrying either is not PTX and must not run as .rn
    with pytest.raises(UnsupportedPtxError, match=r"cvt modifier \.r"):
        load_ptx(_CVT_PTX.replace("MOD", modifier))


def test_cvt_scalar_modifiers_still_load():
    for modifier in ("rn", "rz", "rm", "rp", "rn.satfinite", "rn.relu", "rn.ftz.sat"):
        load_ptx(_CVT_PTX.replace("MOD", modifier))
