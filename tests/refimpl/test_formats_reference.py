"""The vectorised encoder against the exact one-at-a-time reference
(``refimpl.formats.reference.encode_exact``), on inputs placed relative to the TARGET
format: around its smallest subnormal, its subnormal/normal boundary, its max finite and
max +- half an ulp, exact ties with even and odd last bits, and just above and below
(TestFloat practice). The reference itself is checked against brute-force search over
the exhaustively verified value list."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refimpl import formats as F
from refimpl.formats.reference import encode_exact

MODES = ["nearest_even", "nearest_away", "toward_zero", "toward_positive",
         "toward_negative", "stochastic"]

USER = [
    F.Format("e3m4", 3, 4),
    F.Format("e6m9fn", 6, 9, has_inf=False, nan="fn"),
    F.Format("e5m6fnuz", 5, 6, bias=16, has_inf=False, nan="fnuz"),
    F.Format("ue5m3", 5, 3, signed=False, has_inf=False, nan="fn"),
    F.Format("e11m20", 11, 20),
    F.Format("e2m29", 2, 29, has_inf=False, nan="none"),
    F.Format("e9m22", 9, 22, has_inf=False, nan="fn"),
    F.Format("e1m2", 1, 2, has_inf=False, nan="none"),
]
ALL = F.all_formats() + USER


def _ulp_at(fmt: F.Format, mag_code: int) -> Fraction:
    e_field = mag_code >> fmt.man_bits
    e = max(e_field - fmt.bias, fmt.emin) if fmt.subnormals else e_field - fmt.bias
    return Fraction(2) ** (e - fmt.man_bits)


@st.composite
def near_target(draw: st.DrawFn, fmt: F.Format, dtype: type) -> float:
    """A value of ``dtype`` placed relative to ``fmt``'s grid."""
    max_mag = fmt.max_code_magnitude
    kind = draw(st.sampled_from(
        ["code", "mid", "min_sub", "min_normal", "max", "max_half", "beyond", "zero"]
    ))
    if kind in ("code", "mid"):
        c = draw(st.integers(0, max_mag))
        v = fmt.code_magnitude_value(c)
        if kind == "mid":
            v += _ulp_at(fmt, c) / 2  # tie between c and c+1 (c even or odd)
    elif kind == "min_sub":
        v = Fraction(fmt.min_subnormal) * draw(st.sampled_from([0.5, 1, 1.5, 2]))
    elif kind == "min_normal":
        v = Fraction(fmt.min_normal) * draw(st.sampled_from([0.5, 1, 1.5, 2]))
        v -= draw(st.sampled_from([0, 1])) * _ulp_at(fmt, 1 << fmt.man_bits) / 2
    elif kind == "max":
        v = fmt.max_exact
    elif kind == "max_half":
        v = fmt.max_exact + _ulp_at(fmt, max_mag) / 2
    elif kind == "beyond":
        v = fmt.max_exact * draw(st.sampled_from([2, 3, 1000]))
    else:
        v = Fraction(0)
    try:
        fv = float(v)
    except OverflowError:
        fv = float("inf")
    with np.errstate(over="ignore"):
        x = np.array(fv, dtype=np.float64).astype(dtype)  # nearest input value
        steps = draw(st.integers(-3, 3))
        direction = np.array(np.inf if steps > 0 else -np.inf, dtype=dtype)
        for _ in range(abs(steps)):
            x = np.nextafter(x, direction)
        negative = draw(st.booleans()) and (fmt.signed or fmt.has_nan)
    return float(-x if negative else x) if dtype == np.float64 else -x if negative else x


def _check(fmt: F.Format, xs: list, dtype: type, mode: str, saturate: bool,
           rbits: list | None, nbits: int) -> None:
    arr = np.array(xs, dtype=dtype)
    kw: dict = {"rounding": mode, "saturate": saturate}
    if not fmt.has_nan:
        kw["nan"] = "zero"
    if mode == "stochastic":
        got = F.encode(arr, fmt, random_bits=(np.array(rbits, np.uint64), nbits), **kw)
    else:
        got = F.encode(arr, fmt, **kw)
    for i, x in enumerate(arr.tolist()):
        extra = {"random_bits": rbits[i], "nbits": nbits} if mode == "stochastic" else {}
        want = encode_exact(float(x), fmt, **kw, **extra)
        assert int(got[i]) == want, (
            f"{fmt.name} {mode} sat={saturate} {dtype.__name__} x={x!r}: "
            f"{int(got[i]):#x} != {want:#x}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
@settings(max_examples=40)
@given(data=st.data())
def test_vectorised_matches_reference(fmt: F.Format, data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    mode = data.draw(st.sampled_from(MODES), label="mode")
    saturate = data.draw(st.booleans(), label="saturate")
    xs = data.draw(st.lists(near_target(fmt, dtype), min_size=1, max_size=24), label="xs")
    nbits = data.draw(st.integers(1, 32), label="N") if mode == "stochastic" else 0
    rbits = (data.draw(st.lists(st.integers(0, 2**nbits - 1), min_size=len(xs),
                                max_size=len(xs)), label="R")
             if mode == "stochastic" else None)
    _check(fmt, xs, dtype, mode, saturate, rbits, nbits)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vectorised_matches_reference_on_specials(fmt: F.Format, dtype: type) -> None:
    xs = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0,
          float(np.finfo(dtype).tiny), float(np.finfo(dtype).smallest_subnormal),
          float(np.finfo(dtype).max), -float(np.finfo(dtype).max)]
    if not fmt.signed and not fmt.has_nan:
        xs = [x for x in xs if not np.signbit(x)]
    for mode in MODES[:-1]:
        for saturate in (False, True):
            _check(fmt, xs, dtype, mode, saturate, None, 0)


# --- the reference against brute force over the (exhaustively checked) value list ---

SMALL = [f for f in ALL if f.bits <= 8]


def _brute_force(fmt: F.Format, a: Fraction, mode: str, negative: bool) -> int | str:
    """Magnitude code nearest to a >= 0 by searching every value; "overflow" when the
    result lies beyond the largest finite value (rounding with unbounded exponent)."""
    vals = F.decode(np.arange(fmt.max_code_magnitude + 1), fmt).tolist()
    grid = [(Fraction(v), c) for c, v in enumerate(vals)]
    beyond = fmt.max_exact + _ulp_at(fmt, fmt.max_code_magnitude)
    grid.append((beyond, fmt.max_code_magnitude + 1))  # unbounded-exponent successor
    if not fmt.subnormals and a < grid[0][0]:
        return 0
    lo = max((g for g in grid if g[0] <= a), default=None)
    hi = min((g for g in grid if g[0] >= a), default=None)
    if hi is None:
        return "overflow" if mode not in ("toward_zero",) else fmt.max_code_magnitude
    if lo == hi:
        pick = lo
    elif mode == "nearest_even":
        d_lo, d_hi = a - lo[0], hi[0] - a
        pick = lo if d_lo < d_hi else hi if d_hi < d_lo else (lo if lo[1] % 2 == 0 else hi)
    elif mode == "nearest_away":
        pick = lo if a - lo[0] < hi[0] - a else hi
    elif mode == "toward_zero":
        pick = lo
    elif mode == "toward_positive":
        pick = lo if negative else hi
    else:
        pick = hi if negative else lo
    return "overflow" if pick[1] > fmt.max_code_magnitude else pick[1]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
@settings(max_examples=30)
@given(data=st.data())
@example(data=None)
def test_reference_matches_brute_force(fmt: F.Format, data: st.DataObject | None) -> None:
    if data is None:
        xs = [float(fmt.max_exact + _ulp_at(fmt, fmt.max_code_magnitude) / 2)]
        modes = MODES[:-1]
    else:
        xs = data.draw(st.lists(near_target(fmt, np.float64), min_size=1, max_size=10))
        modes = [data.draw(st.sampled_from(MODES[:-1]))]
    for mode in modes:
        for x in xs:
            if np.isinf(x) or x != x:
                continue
            negative = x < 0
            if negative and not fmt.signed:
                continue
            want = _brute_force(fmt, abs(Fraction(x)), mode, negative)
            got = encode_exact(x, fmt, rounding=mode, saturate=True)
            got_mag = got & fmt.magnitude_mask
            if want == "overflow":
                assert got_mag == fmt.max_code_magnitude  # saturated
                if fmt.nan != "none":
                    unsat = encode_exact(x, fmt, rounding=mode)
                    assert unsat & fmt.magnitude_mask != fmt.max_code_magnitude or \
                        mode in ("toward_zero",) or \
                        (mode == "toward_negative") != negative
            else:
                if fmt.nan == "fnuz" and want == 0:
                    assert got == 0
                else:
                    assert got_mag == want, f"{fmt.name} {mode} {x!r}: {got:#x} vs {want:#x}"


# --- user formats decode by their formula through the same code path ---

@pytest.mark.parametrize("fmt", USER + [F.TF32, F.FP32], ids=lambda f: f.name)
def test_user_and_wide_format_decode(fmt: F.Format) -> None:
    rng = np.random.default_rng(1)
    n = 1 << fmt.bits
    codes = np.arange(n) if n <= 1 << 16 else rng.integers(0, n, 4000, dtype=np.int64)
    vals = F.decode(codes, fmt)
    assert vals.dtype == fmt.value_dtype
    assert F.encode(np.array([1.0]), fmt).dtype == fmt.code_dtype
    with np.errstate(invalid="ignore"):  # NaN codes of a format without NaN: "zero"
        back = F.encode(vals.astype(np.float64), fmt, nan="zero" if not fmt.has_nan else None)
    for c, v, b in zip(codes.tolist(), vals.tolist(), back.tolist()):
        mag = c & fmt.magnitude_mask
        neg = fmt.signed and bool(c & fmt.sign_mask)
        e_field = mag >> fmt.man_bits
        is_nan = ((fmt.nan == "ieee" and e_field == (1 << fmt.exp_bits) - 1 and
                   mag & ((1 << fmt.man_bits) - 1))
                  or (fmt.nan == "fn" and mag == fmt.magnitude_mask)
                  or (fmt.nan == "fnuz" and c == fmt.sign_mask))
        if is_nan:
            assert v != v
            continue
        if fmt.nan == "ieee" and e_field == (1 << fmt.exp_bits) - 1:
            assert v == (-np.inf if neg else np.inf)
            continue
        mf = Fraction(mag & ((1 << fmt.man_bits) - 1), 2**fmt.man_bits)
        if e_field == 0 and fmt.subnormals:
            want = mf * Fraction(2) ** (1 - fmt.bias)
        else:
            want = (1 + mf) * Fraction(2) ** (e_field - fmt.bias)
        assert Fraction(v) == (-want if neg else want), f"{fmt.name} {c:#x}"
        assert b == c, f"{fmt.name}: {c:#x} decodes to {v!r}, which encodes to {b:#x}"


# --- the lookup-table fast path against the bit-manipulation path it is built from ---

@pytest.mark.parametrize("fmt", [f for f in ALL if f.bits <= 16], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES[:-1])
def test_table_path_matches_bit_path_on_random_patterns(fmt: F.Format, mode: str) -> None:
    from refimpl.formats.encode import encode_float64
    from refimpl.formats.rounding import resolve_nan

    rng = np.random.default_rng(11)
    policy = resolve_nan("zero" if not fmt.has_nan else None, fmt)
    for dtype, uint, width in ((np.float32, np.uint32, 32), (np.float64, np.uint64, 64)):
        raw = rng.integers(0, 2**62, 4000, dtype=np.int64).astype(np.uint64)
        raw = (raw << np.uint64(2)) ^ raw  # cover all 64 bits
        bits = (raw >> np.uint64(64 - width)).astype(uint) if width == 32 else raw
        # half the patterns: exponents near the format's range, low bits cleared or set
        x = bits.view(dtype).copy()
        with np.errstate(invalid="ignore", over="ignore"):  # inf/NaN patterns drawn too
            near = np.ldexp(np.abs(x[:2000]) % 4 + 0.5,
                            rng.integers(fmt.emin - fmt.man_bits - 3, fmt.emax + 3, 2000))
        x[:2000] = near.astype(dtype) * np.where(rng.random(2000) < 0.5, -1, 1)
        if not fmt.signed and not fmt.has_nan:
            x = np.abs(x)
        kw = {"nan": "zero"} if not fmt.has_nan else {}
        with np.errstate(invalid="ignore"):
            want = encode_float64(x.astype(np.float64), fmt, mode, False, policy)
        got = F.encode(x, fmt, rounding=mode, **kw)
        assert np.array_equal(got, want), (dtype, x[got != want][:4])
