"""sm_100 floating-point additions (hardware.simt.isa.sm100): the .f32x2 pair
arithmetic, three-input and xorsign min/max, floating-point redux.sync. Expected values
are numpy float32 operations on each element (exact rounding of one binary32
operation), Fraction-derived directed roundings, and ptxas verdicts for the forms and
targets."""
from __future__ import annotations

import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import PtxError, PtxTypeError

PTXAS = shutil.which("ptxas")


def head(target: str = "sm_100a", version: str = "8.8") -> str:
    return f".version {version}\n.target {target}\n.address_size 64\n"


def ptxas_ok(src: str, arch: str) -> bool | None:
    if PTXAS is None:
        return None
    r = subprocess.run([PTXAS, f"-arch={arch}", "-", "-o", "/dev/null"], input=src,
                       capture_output=True, text=True)
    return r.returncode == 0


# each thread reads three 64-bit words from in (a, b, c) and writes one to out
PAIR = """.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 24;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.u64 %rd5, [%rd4];
    ld.global.u64 %rd6, [%rd4+8];
    ld.global.u64 %rd7, [%rd4+16];
    {inst};
    mul.wide.u32 %rd9, %r1, 8;
    add.u64 %rd10, %rd1, %rd9;
    st.global.u64 [%rd10], %rd8;
    ret;
}}
"""


def run_pair(inst: str, a, b, c, target="sm_100a"):
    src = head(target) + PAIR.format(inst=inst)
    assert ptxas_ok(src, target) in (None, True)
    n = a.shape[0]
    words = np.stack([a, b, c], axis=1).astype(np.float32).reshape(n, 6)
    mem = GlobalMemory()
    out = mem.calloc(8 * n)
    inp = mem.to_device(np.ascontiguousarray(words).view(np.uint8).ravel())
    load_ptx(src).launch("k", 1, n, [out, inp], mem)
    return mem.from_device(out, np.float32, 2 * n).reshape(n, 2)


def _values(n, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, 2)) * 2.0 ** rng.integers(-20, 20, (n, 2))).astype(np.float32)
    x[0] = [np.inf, -0.0]
    x[1] = [np.nan, 1e-40]     # 1e-40 is subnormal
    x[2] = [3.4e38, -3.4e38]
    return x


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_f32x2_rn_is_two_float32_operations(op):
    a, b, c = _values(32, 1), _values(32, 2), _values(32, 3)
    got = run_pair(f"{op}.rn.f32x2 %rd8, %rd5, %rd6", a, b, c)
    with np.errstate(all="ignore"):
        want = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](a, b, dtype=np.float32)
    want = np.where(np.isnan(want), np.uint32(0x7FFFFFFF).view(np.float32), want)
    assert (bits(got) == bits(want)).all()
    # no rounding modifier: .rn
    got2 = run_pair(f"{op}.f32x2 %rd8, %rd5, %rd6", a, b, c)
    assert (bits(got2) == bits(want)).all()


def _directed(exact: Fraction, mode: str) -> np.float32:
    """The float32 neighbour of ``exact`` in the direction ``mode`` (normal range)."""
    f = np.float32(float(exact))
    if Fraction(float(f)) == exact:
        return f
    lo = f if Fraction(float(f)) < exact else np.nextafter(f, np.float32(-np.inf))
    hi = np.nextafter(lo, np.float32(np.inf))
    if mode == "rz":
        return lo if exact > 0 else hi
    return lo if mode == "rm" else hi


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_f32x2_directed_rounding_per_element(mode):
    a = np.array([[1.0, -1.0], [3.0, -7.0]], np.float32)
    b = np.array([[2.0 ** -30, 2.0 ** -30], [1.0 / 3, 1.0 / 3]], np.float32)
    c = np.array([[0.25, -0.25], [2.0 ** -29, -2.0 ** -29]], np.float32)
    got_add = run_pair(f"add.{mode}.f32x2 %rd8, %rd5, %rd6", a, b, c)
    got_fma = run_pair(f"fma.{mode}.f32x2 %rd8, %rd5, %rd6, %rd7", a, b, c)
    for i in range(2):
        for j in range(2):
            fa, fb, fc = (Fraction(float(x[i, j])) for x in (a, b, c))
            assert bits(got_add[i, j]) == bits(_directed(fa + fb, mode)), (i, j)
            assert bits(got_fma[i, j]) == bits(_directed(fa * fb + fc, mode)), (i, j)


def test_f32x2_ftz_flushes_inputs_and_results_of_each_half():
    tiny = np.float32(2.0 ** -130)  # subnormal
    a = np.array([[tiny, 2.0 ** -100], [1.0, -tiny]], np.float32)
    b = np.array([[0.0, 2.0 ** -30], [tiny, -0.0]], np.float32)
    c = np.zeros_like(a)
    got = run_pair("mul.rn.ftz.f32x2 %rd8, %rd5, %rd6", a, b, c)
    # tiny*0 -> +0; 2^-130 product flushed to +0; 1*tiny: input flushed -> +0;
    # -tiny * -0: input flushed to -0, (-0)(-0) = +0
    assert (bits(got) == bits(np.zeros((2, 2), np.float32))).all()
    plain = run_pair("mul.rn.f32x2 %rd8, %rd5, %rd6", a, b, c)
    assert plain[0, 1] == np.float32(2.0 ** -130) and plain[1, 0] == tiny


def test_f32x2_forms_and_targets_follow_ptxas():
    bad = ["add.rn.sat.f32x2 %rd8, %rd5, %rd6", "fma.f32x2 %rd8, %rd5, %rd6, %rd7",
           "mul.rn.ftz.sat.f32x2 %rd8, %rd5, %rd6", "add.rn.f32x2 %rd8, %rd5, %r3"]
    for inst in bad:
        src = head() + PAIR.format(inst=inst)
        assert ptxas_ok(src, "sm_100a") in (None, False), inst
        with pytest.raises(PtxError):
            load_ptx(src)
    good = head("sm_90a") + PAIR.format(inst="add.rn.f32x2 %rd8, %rd5, %rd6")
    assert ptxas_ok(good, "sm_90a") in (None, False)
    with pytest.raises(PtxTypeError, match="sm_100 or higher"):
        load_ptx(good)
    for target in ("sm_100", "sm_120a"):
        src = head(target) + PAIR.format(inst="sub.rm.ftz.f32x2 %rd8, %rd5, %rd6")
        assert ptxas_ok(src, target) in (None, True)
        load_ptx(src)


SCALAR = """.visible .entry k(.param .u64 out, .param .u64 in)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 12;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.global.f32 %f2, [%rd4+4];
    ld.global.f32 %f3, [%rd4+8];
{body}
    mul.wide.u32 %rd9, %r1, 4;
    add.u64 %rd10, %rd1, %rd9;
    st.global.f32 [%rd10], %f4;
    ret;
}}
"""


def run_scalar(body: str, x: np.ndarray, threads=None, target="sm_100a", version="8.8"):
    src = head(target, version) + SCALAR.format(body=body)
    assert ptxas_ok(src, target) in (None, True)
    n = threads or x.shape[0]
    mem = GlobalMemory()
    out = mem.calloc(4 * n)
    inp = mem.to_device(np.ascontiguousarray(x, np.float32).view(np.uint8).ravel())
    load_ptx(src).launch("k", 1, n, [out, inp], mem)
    return mem.from_device(out, np.float32, n)


NAN = np.float32(np.nan)
CANON = np.uint32(0x7FFFFFFF)


def _max_number(a, b, nan_mode, is_min=False):
    """IEEE 754-2019 maximumNumber/minimumNumber of two python floats with -0 < +0."""
    import math
    if math.isnan(a) or math.isnan(b):
        if nan_mode or (math.isnan(a) and math.isnan(b)):
            return float("nan")
        return b if math.isnan(a) else a
    key = lambda v: (v, math.copysign(1.0, v))
    return min(a, b, key=key) if is_min else max(a, b, key=key)


def _triples():
    specials = [0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf, 1e-40]
    t = [(a, b, c) for a in specials for b in specials for c in specials]
    return np.array(t, np.float32)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("mods", ["", ".NaN", ".abs", ".NaN.abs", ".ftz"])
def test_three_input_min_max_exhaustive_specials(op, mods):
    x = _triples()
    got = run_scalar(f"    {op}{mods}.f32 %f4, %f1, %f2, %f3;", x)
    for i, (a, b, c) in enumerate(x.tolist()):
        if ".ftz" in mods:
            a, b, c = (0.0 * np.sign(v) if v == v and 0 < abs(v) < 2.0 ** -126 else v
                       for v in (a, b, c))
            a, b, c = (float(np.copysign(0.0, np.float32(v))) if v == 0 else v
                       for v in (a, b, c))
        if ".abs" in mods:
            a, b, c = abs(a), abs(b), abs(c)
        nan_mode = ".NaN" in mods
        want = _max_number(_max_number(a, b, nan_mode, op == "min"), c, nan_mode, op == "min")
        if want != want:
            assert bits(got[i]) == CANON, (a, b, c)
        else:
            assert bits(got[i]) == bits(np.float32(want)), (a, b, c, got[i], want)


def test_three_input_needs_sm100_and_ptx_8_8():
    body = "    max.f32 %f4, %f1, %f2, %f3;"
    for target, version in (("sm_90a", "8.8"), ("sm_100a", "8.7")):
        src = head(target, version) + SCALAR.format(body=body)
        assert ptxas_ok(src, target) in (None, False)
        with pytest.raises(PtxTypeError):
            load_ptx(src)
    src = head() + SCALAR.format(body="    max.xorsign.abs.f32 %f4, %f1, %f2, %f3;")
    assert ptxas_ok(src, "sm_100a") in (None, False)
    with pytest.raises(PtxTypeError, match="xorsign"):
        load_ptx(src)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("nan", ["", ".NaN"])
def test_xorsign_abs(op, nan):
    x = _triples()[:, :2].copy()
    x = np.concatenate([x, np.zeros((x.shape[0], 1), np.float32)], axis=1)
    got = run_scalar(f"    {op}{nan}.xorsign.abs.f32 %f4, %f1, %f2;", x, target="sm_90a",
                     version="8.0")
    for i, (a, b, _) in enumerate(x.tolist()):
        m = _max_number(abs(a), abs(b), bool(nan), op == "min")
        if m != m:
            assert bits(got[i]) == CANON
            continue
        s = (bits(np.float32(a)) ^ bits(np.float32(b))) & np.uint32(0x80000000)
        assert bits(got[i]) == ((bits(np.float32(m)) & np.uint32(0x7FFFFFFF)) | s), (a, b)


REDUX = """    and.b32 %r2, %r1, 31;
    setp.lt.u32 %p1, %r2, {first};
    mov.f32 %f4, 0f00000000;
    @%p1 bra $L_end;
    redux.sync.{op}.f32 %f4, %f1, {mask};
$L_end:
"""


@pytest.mark.parametrize("op", ["max", "min", "max.abs", "min.abs.NaN", "max.NaN"])
@pytest.mark.parametrize("case", ["random", "zeros", "somenan", "allnan"])
def test_redux_f32(op, case):
    rng = np.random.default_rng(7)
    x = np.zeros((64, 3), np.float32)
    v = rng.standard_normal(64).astype(np.float32)
    if case == "zeros":
        v = np.where(np.arange(64) % 2, np.float32(-0.0), np.float32(0.0))
    if case == "somenan":
        v[[3, 40]] = np.nan
    if case == "allnan":
        v[:] = np.nan
    x[:, 0] = v
    first = 5
    got = run_scalar(REDUX.format(op=op, first=first, mask="0xFFFFFFE0"), x)
    is_min = op.startswith("min")
    for w in range(2):
        lanes = [float(a) for a in v[w * 32 + first:(w + 1) * 32]]
        if ".abs" in op or "abs" in op.split("."):
            lanes = [abs(a) for a in lanes]
        acc = float("nan")
        for a in lanes:
            acc = _max_number(acc, a, False, is_min)
        if "NaN" in op and any(a != a for a in lanes):
            acc = float("nan")
        for lane in range(first, 32):
            r = got[w * 32 + lane]
            if acc != acc:
                assert bits(r) == CANON
            else:
                assert bits(r) == bits(np.float32(acc)), (w, lane, r, acc)
        assert (bits(got[w * 32:w * 32 + first]) == 0).all()


def test_redux_f32_forms_and_targets():
    body = REDUX.format(op="max", first=0, mask="0xFFFFFFFF")
    for target in ("sm_90a", "sm_100", "sm_120a"):
        src = head(target) + SCALAR.format(body=body)
        assert ptxas_ok(src, target) in (None, False)
        with pytest.raises(PtxTypeError, match="redux.f32"):
            load_ptx(src)
    for op in ("add", "max.ftz"):
        src = head() + SCALAR.format(body=REDUX.format(op=op, first=0, mask="0xFFFFFFFF"))
        assert ptxas_ok(src, "sm_100a") in (None, False)
        with pytest.raises(PtxError):
            load_ptx(src)
