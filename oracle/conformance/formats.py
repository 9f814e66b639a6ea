"""Conformance of number-format codecs: ``check_encoder`` (formats.encode),
``check_decoder`` (formats.decode) and ``check_round_to`` (formats.round_to)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from oracle import placement
from oracle.conformance.kinds import code_classes, input_classes
from oracle.conformance.phases import (
    Target, as_codes, call_impl, check_max_examples, run_check,
)
from oracle.cases.formats import e8m0_conventions
from oracle.conformance.report import ConformanceError, ConformanceReport
from refimpl.formats import decode, encode, get, round_to
from refimpl.validation import check_bool

__all__ = ["check_encoder", "check_decoder", "check_round_to"]


def _rounding_check(what: str, fmt: Any, rounding: str, saturate: bool, nan: Any,
                    dtype: Any, vectorized: bool, max_examples: int, e8m0_zero: str,
                    e8m0_negative: str) -> tuple:
    """What an encoder's and a fake-quantiser's checks share: the format, dtype and
    placed inputs (NaNs only where the format or ``nan`` defines the answer), the
    target, the expected codes under the options (E8M0's documented conventions
    included), and the validated flags."""
    f = get(fmt)
    dt = np.dtype(dtype)
    saturate = check_bool("saturate", saturate)
    vectorized = check_bool("vectorized", vectorized)
    max_examples = check_max_examples(max_examples)
    with_nan = f.has_nan or nan is not None
    x = placement.sharp_inputs(f, dt)
    if not with_nan:
        x = x[~np.isnan(x)]
    conventions = {"zero": e8m0_zero, "negative": e8m0_negative}
    e8m0_conventions(np.zeros(0, dt), np.zeros(0, f.code_dtype), f, **conventions)
    t = Target(what, f.name, f"rounding={rounding}, saturate={saturate}"
               + (f", nan={nan!r}" if nan is not None else "")
               + (f", e8m0_zero={e8m0_zero}" if e8m0_zero != "min" else "")
               + (f", e8m0_negative={e8m0_negative}" if e8m0_negative != "nan" else ""))

    def codes(a: np.ndarray) -> np.ndarray:
        out = encode(a, f, rounding=rounding, saturate=saturate, nan=nan)
        return e8m0_conventions(a, out, f, rounding=rounding, saturate=saturate,
                                **conventions)

    return f, dt, x, t, codes, vectorized, max_examples, with_nan


def check_encoder(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                  saturate: bool = False, nan: Any = None, dtype: Any = np.float32,
                  vectorized: bool = True, max_examples: int = 200,
                  e8m0_zero: str = "min", e8m0_negative: str = "nan") -> ConformanceReport:
    """Check an encoder ``fn(x) -> codes`` against ``refimpl.formats.encode`` with the
    same options. Inputs of ``dtype`` (float32 by default, float64 to catch double
    rounding) placed relative to ``fmt``; NaN inputs only where the format (or ``nan``)
    defines the answer. For E8M0, ``e8m0_zero`` (``"min"``: 0x00, or ``"nan"``) and
    ``e8m0_negative`` (``"nan"``: 0xFF, or ``"magnitude"``: the code of |x|) name the
    documented variants (``oracle.cases.formats``); ``rounding="nearest_away"`` is the
    ``e8m0_tie=up`` variant.

    Raises:
        ConformanceError: every kind of disagreement, each with its simplest
            counterexample (input, expected code, code got).
    """
    f, dt, x, t, expect, vectorized, max_examples, with_nan = _rounding_check(
        "encoder", fmt, rounding, saturate, nan, dtype, vectorized, max_examples,
        e8m0_zero, e8m0_negative)

    def actual(a: np.ndarray) -> np.ndarray:
        return as_codes(call_impl(fn, a, vectorized), f, a.shape)

    # deferred: oracle.strategies imports hypothesis, only when a check runs
    from oracle.strategies import floats_near

    return run_check(t, x, expect, actual, f, floats_near(f, dtype=dt, nan=with_nan),
                max_examples, lambda a: input_classes(f, a))


def check_decoder(fn: Callable, fmt: Any, *, vectorized: bool = True) -> ConformanceReport:
    """Check a decoder ``fn(codes) -> values`` against ``refimpl.formats.decode`` on
    every code (formats of 16 bits or fewer; a TestFloat sample above). Values are
    compared bitwise as float32 (any float dtype returned is converted exactly when it
    can be), NaNs as one class, and -0.0 must keep its sign."""
    f = get(fmt)
    vectorized = check_bool("vectorized", vectorized)
    if f.bits <= 16:
        codes = np.arange(1 << f.bits, dtype=np.int64).astype(f.code_dtype)
    else:
        mags = placement.target_codes(f, exhaustive=False)
        codes = np.concatenate([mags, mags | f.sign_mask]).astype(f.code_dtype)
    t = Target("decoder", f.name, "every code" if f.bits <= 16 else "sampled codes")

    def actual(c: np.ndarray) -> np.ndarray:
        got = np.asarray(call_impl(fn, c, vectorized))
        if got.shape != c.shape:
            raise ConformanceError(f"the decoder returned shape {got.shape} for {c.shape}")
        want_dt = np.asarray(decode(c[:1], f)).dtype
        return got.astype(want_dt)

    def expect(c: np.ndarray) -> np.ndarray:
        return decode(c, f)

    return run_check(t, codes, expect, actual, None, None, 0, lambda c: code_classes(f, c))


def check_round_to(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                   saturate: bool = False, nan: Any = None, dtype: Any = np.float32,
                   vectorized: bool = True, max_examples: int = 200,
                   e8m0_zero: str = "min", e8m0_negative: str = "nan") -> ConformanceReport:
    """Check a fake-quantiser ``fn(x) -> x rounded to fmt`` (same dtype as x) against
    ``refimpl.formats.round_to``: the decoded value of the code :func:`check_encoder`
    expects with the same options (``nan``, ``e8m0_zero`` and ``e8m0_negative`` name
    the same documented variants), so NaN inputs are swept only where the format (or
    ``nan``) defines the answer."""
    f, dt, x, t, codes, vectorized, max_examples, with_nan = _rounding_check(
        "round_to", fmt, rounding, saturate, nan, dtype, vectorized, max_examples,
        e8m0_zero, e8m0_negative)

    def expect(a: np.ndarray) -> np.ndarray:
        if nan is None and e8m0_zero == "min" and e8m0_negative == "nan":
            return np.asarray(round_to(a, f, rounding=rounding, saturate=saturate)).astype(dt)
        return np.asarray(decode(codes(a), f)).astype(dt)

    def actual(a: np.ndarray) -> np.ndarray:
        got = np.asarray(call_impl(fn, a, vectorized))
        if got.shape != a.shape:
            raise ConformanceError(f"round_to returned shape {got.shape} for {a.shape}")
        return got.astype(dt)

    # deferred: oracle.strategies imports hypothesis, only when a check runs
    from oracle.strategies import floats_near

    return run_check(t, x, expect, actual, None, floats_near(f, dtype=dt, nan=with_nan),
                max_examples, lambda a: input_classes(f, a), rounded_to=f)
