"""The interpreter's float kernels (:mod:`hardware.simt.rounding`) called directly with
the canonical rounding-mode names (IEEE 754-2019 section 4.3), checked against exact
rational arithmetic (:func:`oracles.round_rational`, :mod:`fractions`); a PTX modifier
name is refused, since the instruction compilers map it to its canonical name once.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from oracles import round_rational
from simt_reference import float_to_int as ref_float_to_int

from hardware.simt import rounding

#: the four IEEE 754-2019 section 4.3 directions by the project's canonical names
CANONICAL = ("nearest_even", "toward_zero", "toward_negative", "toward_positive")
#: the same directions by their PTX modifiers (PTX ISA 9.7.3, "Rounding modifiers")
PTX_NAME = {"nearest_even": "rn", "toward_zero": "rz", "toward_negative": "rm",
            "toward_positive": "rp"}

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def test_modes_are_the_canonical_names():
    assert set(rounding.MODES) == set(CANONICAL)
    assert len(rounding.MODES) == 4


_ONE = np.array([1.0], np.float32)
_KERNELS = {
    "round64_to32": lambda m: rounding.round64_to32(np.array([1.0 + 2.0**-30]), 0, m),
    "add_f32": lambda m: rounding.add_f32(_ONE, _ONE, m),
    "mul_f32": lambda m: rounding.mul_f32(_ONE, _ONE, m),
    "fma_f32": lambda m: rounding.fma_f32(_ONE, _ONE, _ONE, m),
    "div_f32": lambda m: rounding.div_f32(_ONE, np.array([3.0], np.float32), m),
    "sqrt_f32": lambda m: rounding.sqrt_f32(np.array([2.0], np.float32), m),
    "exact_to_float": lambda m: rounding.exact_to_float(Fraction(1, 3), 24, -126, 127, m),
    "fraction_op_f64": lambda m: rounding.fraction_op_f64("add", [np.array([1.0]),
                                                                 np.array([0.0])], m),
    "float_to_int": lambda m: rounding.float_to_int(np.array([1.5]), "s", 32, m),
    "int_to_float": lambda m: rounding.int_to_float(np.array([2**60 + 1]), True, 32, m),
}


@pytest.mark.parametrize("kernel", sorted(_KERNELS))
@pytest.mark.parametrize("name", ["rn", "rz", "rm", "rp", "rna", "floor", ""])
def test_ptx_and_unknown_names_are_refused(kernel, name):
    with pytest.raises(ValueError, match="nearest_even.*toward_zero.*toward_negative.*"
                                         "toward_positive") as err:
        _KERNELS[kernel](name)
    assert repr(name) in str(err.value)


@pytest.mark.parametrize("kernel", sorted(_KERNELS))
@pytest.mark.parametrize("mode", CANONICAL)
def test_canonical_names_are_accepted(kernel, mode):
    _KERNELS[kernel](mode)


def _exact(op: str, a: float, b: float, c: float) -> Fraction | None:
    fa, fb, fc = Fraction(a), Fraction(b), Fraction(c)
    if op == "add":
        return fa + fb
    if op == "mul":
        return fa * fb
    if op == "fma":
        return fa * fb + fc
    if op == "div":
        return None if b == 0 else fa / fb
    return None


@settings(max_examples=40)
@given(st.lists(st.tuples(finite32, finite32, finite32), min_size=1, max_size=20),
       st.sampled_from(CANONICAL), st.sampled_from(["add", "mul", "fma", "div"]))
@example([(1.0, 2.0**-30, 0.0), (-1.0, -2.0**-30, 0.0), (1.0, 3.0, 0.0)],
         "toward_positive", "add")
@example([(1.0, 2.0**-30, 0.0), (-1.0, -2.0**-30, 0.0), (1.0, 3.0, 0.0)],
         "toward_negative", "div")
@example([(float(np.float32(1 + 2**-12)), float(np.float32(1 + 2**-12)), 2.0**-60)],
         "nearest_even", "fma")
def test_f32_kernels_round_once_in_the_named_mode(triples, mode, op):
    a, b, c = (np.array([t[i] for t in triples], np.float32) for i in range(3))
    kernel = {"add": lambda: rounding.add_f32(a, b, mode),
              "mul": lambda: rounding.mul_f32(a, b, mode),
              "fma": lambda: rounding.fma_f32(a, b, c, mode),
              "div": lambda: rounding.div_f32(a, b, mode)}[op]
    with np.errstate(all="ignore"):
        got = np.atleast_1d(kernel())
    for i, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(), c.tolist())):
        exact = _exact(op, x, y, z)
        if exact is None or exact == 0:
            continue
        want = float(round_rational(exact, np.float32, mode))
        assert float(got[i]) == want, (op, mode, x, y, z, float(got[i]), want)


@settings(max_examples=30)
@given(st.lists(st.floats(0, allow_infinity=False, width=32), min_size=1, max_size=20),
       st.sampled_from(CANONICAL))
@example([2.0, 3.0, 1e-45], "toward_positive")
def test_sqrt_f32_in_the_named_mode(xs, mode):
    x = np.array(xs, np.float32)
    got = rounding.sqrt_f32(x, mode)
    for v, g in zip(x.tolist(), got.tolist()):
        if v == 0:
            continue
        # the float32 neighbours of sqrt(v) bracket it; pick by squaring exactly
        r = np.float32(math.sqrt(v))
        lo = r if Fraction(float(r)) ** 2 <= Fraction(v) else np.nextafter(r, np.float32(0))
        hi = lo if Fraction(float(lo)) ** 2 == Fraction(v) else \
            np.nextafter(lo, np.float32(np.inf))
        if lo == hi or mode in ("toward_zero", "toward_negative"):
            want = lo
        elif mode == "toward_positive":
            want = hi
        else:  # nearest: compare v with the square of the midpoint (never a tie)
            mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
            want = lo if Fraction(v) < mid * mid else hi
        assert g == float(want), (v, mode, g, float(want))


@pytest.mark.parametrize("mode", CANONICAL)
def test_float64_slow_path_in_the_named_mode(mode):
    a, b = 1.0, 3.0
    got = float(rounding.fraction_op_f64("div", [np.array([a]), np.array([b])], mode)[0])
    assert got == float(round_rational(Fraction(1, 3), np.float64, mode))
    # an exact zero sum is -0 only toward negative (IEEE 754-2019 section 6.3)
    z = rounding.fraction_op_f64("add", [np.array([1.0]), np.array([-1.0])], mode)[0]
    assert z == 0 and bool(np.signbit(z)) == (mode == "toward_negative")


@pytest.mark.parametrize("mode", CANONICAL)
@pytest.mark.parametrize("x", [2.5, -2.5, 1.5, -0.5, 3.7, -3.7, 1e10, -1e10, float("nan")])
def test_float_to_int_in_the_named_mode(mode, x):
    got = int(rounding.float_to_int(np.array([x]), "s", 32, mode)[0])
    assert got == ref_float_to_int(x, PTX_NAME[mode], 32, True)


@pytest.mark.parametrize("mode", CANONICAL)
@pytest.mark.parametrize("v", [2**60 + 1, -(2**60 + 1), 2**24 + 1, -(2**24 + 3), 7])
def test_int_to_float_in_the_named_mode(mode, v):
    got = float(rounding.int_to_float(np.array([v]), True, 32, mode)[0])
    assert got == float(round_rational(Fraction(v), np.float32, mode))
