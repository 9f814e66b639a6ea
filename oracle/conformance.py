"""Ready property tests a user points at their own callable.

>>> from oracle.conformance import check_encoder
>>> check_encoder(my_to_e4m3, "e4m3")          # raises ConformanceError on disagreement

Each check runs in two phases. First a deterministic sweep over the inputs that matter
for the target format (:mod:`oracle.placement`: every value, every rounding tie and its
neighbours, the overflow tie, zeros, infinities, NaNs; every code for a decoder), so a
wrong rounding rule is found every time; the reported counterexample is the simplest
failing input of the sweep (smallest magnitude, positive before negative). Then a
hypothesis search over random placements (:mod:`oracle.strategies`) that shrinks any
failure it finds. The expected answers come from ``refimpl.formats``.

The callable is called with a NumPy array (``vectorized=True``, the default) and must
return an array of the same shape: unsigned codes for an encoder, values for a decoder.
With ``vectorized=False`` it is called with one scalar at a time.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from oracle import placement
from oracle.tolerance import ExactNaNClass, _format_value

__all__ = ["ConformanceError", "check_encoder", "check_decoder", "check_round_to",
           "CHECKS", "resolve_callable"]


class ConformanceError(AssertionError):
    """A callable disagrees with the oracle; ``input``, ``expected`` and ``got`` hold
    the (shrunk) counterexample."""

    def __init__(self, message: str, input: Any = None, expected: Any = None,
                 got: Any = None) -> None:
        super().__init__(message)
        self.input, self.expected, self.got = input, expected, got


@dataclass(frozen=True)
class _Target:
    what: str            # "encoder" / "decoder" / "round_to"
    fmt: Any
    options: str


def _call(fn: Callable, x: np.ndarray, vectorized: bool) -> np.ndarray:
    if vectorized:
        return np.asarray(fn(x))
    return np.array([np.asarray(fn(v)).item() for v in x.reshape(-1)]).reshape(x.shape)


def _as_codes(got: np.ndarray, f, shape: tuple[int, ...]) -> np.ndarray:
    got = np.asarray(got)
    if got.shape != shape:
        raise ConformanceError(f"the encoder returned shape {got.shape} for input shape {shape}")
    if got.dtype.kind not in "ui":
        raise ConformanceError(f"the encoder returned {got.dtype} values; an encoder returns "
                               f"integer codes of {f.name}")
    if (got < 0).any() or (got >= (1 << f.bits)).any():
        bad = int(np.flatnonzero((got < 0) | (got >= (1 << f.bits)))[0])
        raise ConformanceError(f"the encoder returned {int(got.reshape(-1)[bad])} at index "
                               f"{bad}, not a {f.bits}-bit code of {f.name}")
    return got.astype(f.code_dtype)


def _describe_input(v: Any) -> str:
    return _format_value(np.asarray(v).reshape(1)[0], None)


def _fail(t: _Target, x: Any, expected: Any, got: Any, out_fmt: str | None,
          phase: str) -> ConformanceError:
    msg = (f"{t.fmt} {t.what} ({t.options}) disagrees with the oracle "
           f"({phase}):\n  input    {_describe_input(x)}\n"
           f"  expected {_format_value(np.asarray(expected).reshape(1)[0], out_fmt)}\n"
           f"  got      {_format_value(np.asarray(got).reshape(1)[0], out_fmt)}")
    return ConformanceError(msg, x, expected, got)


def _run(t: _Target, inputs: np.ndarray, expect: Callable[[np.ndarray], np.ndarray],
         actual: Callable[[np.ndarray], np.ndarray], out_fmt: str | None,
         strategy: Any, max_examples: int) -> None:
    """Sweep, then hypothesis; raise ConformanceError with the simplest failure."""
    tol = ExactNaNClass()
    want = expect(inputs)
    got = actual(inputs)
    c = tol.compare(got, want, format=out_fmt)
    if c.problem:
        raise ConformanceError(f"{t.fmt} {t.what}: {c.problem}")
    if not c.ok:
        i = int(np.flatnonzero(c.mismatch.reshape(-1))[0])
        raise _fail(t, inputs.reshape(-1)[i], want.reshape(-1)[i], got.reshape(-1)[i],
                    out_fmt, f"sweep of {inputs.size} placed inputs, first of "
                             f"{c.failures} failures")
    if strategy is None or max_examples <= 0:
        return
    from hypothesis import HealthCheck, given, settings

    last: list[Any] = []

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def prop(v: Any) -> None:
        x = np.asarray([v], dtype=inputs.dtype)
        w, g = expect(x), actual(x)
        if not tol.compare(g, w, format=out_fmt).ok:
            last[:] = [x[0], w[0], g[0]]
            raise AssertionError("mismatch")

    try:
        prop()
    except AssertionError:
        if not last:
            raise
        raise _fail(t, *last, out_fmt, "hypothesis, shrunk") from None


def check_encoder(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                  saturate: bool = False, nan: Any = None, dtype: Any = np.float32,
                  vectorized: bool = True, max_examples: int = 200) -> None:
    """Check an encoder ``fn(x) -> codes`` against ``refimpl.formats.encode`` with the
    same options. Inputs of ``dtype`` (float32 by default, float64 to catch double
    rounding) placed relative to ``fmt``; NaN inputs only where the format (or ``nan``)
    defines the answer.

    Raises:
        ConformanceError: the simplest disagreement (input, expected code, code got).
    """
    from refimpl.formats import encode, get

    f = get(fmt)
    dt = np.dtype(dtype)
    with_nan = f.has_nan or nan is not None
    x = placement.sharp_inputs(f, dt)
    if not with_nan:
        x = x[~np.isnan(x)]
    t = _Target("encoder", f.name, f"rounding={rounding}, saturate={saturate}"
                + (f", nan={nan!r}" if nan is not None else ""))

    def expect(a: np.ndarray) -> np.ndarray:
        return encode(a, f, rounding=rounding, saturate=saturate, nan=nan)

    def actual(a: np.ndarray) -> np.ndarray:
        return _as_codes(_call(fn, a, vectorized), f, a.shape)

    from oracle.strategies import floats_near

    _run(t, x, expect, actual, f.name, floats_near(f, dtype=dt, nan=with_nan), max_examples)


def check_decoder(fn: Callable, fmt: Any, *, vectorized: bool = True) -> None:
    """Check a decoder ``fn(codes) -> values`` against ``refimpl.formats.decode`` on
    every code (formats of 16 bits or fewer; a TestFloat sample above). Values are
    compared bitwise as float32 (any float dtype returned is converted exactly when it
    can be), NaNs as one class, and -0.0 must keep its sign."""
    from refimpl.formats import decode, get

    f = get(fmt)
    if f.bits <= 16:
        codes = np.arange(1 << f.bits, dtype=np.int64).astype(f.code_dtype)
    else:
        mags = placement.target_codes(f, exhaustive=False)
        codes = np.concatenate([mags, mags | f.sign_mask]).astype(f.code_dtype)
    t = _Target("decoder", f.name, "every code" if f.bits <= 16 else "sampled codes")

    def actual(c: np.ndarray) -> np.ndarray:
        got = np.asarray(_call(fn, c, vectorized))
        if got.shape != c.shape:
            raise ConformanceError(f"the decoder returned shape {got.shape} for {c.shape}")
        want_dt = np.asarray(decode(c[:1], f)).dtype
        return got.astype(want_dt)

    def expect(c: np.ndarray) -> np.ndarray:
        return decode(c, f)

    _run(t, codes, expect, actual, None, None, 0)


def check_round_to(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                   saturate: bool = False, dtype: Any = np.float32,
                   vectorized: bool = True, max_examples: int = 200) -> None:
    """Check a fake-quantiser ``fn(x) -> x rounded to fmt`` (same dtype as x) against
    ``refimpl.formats.round_to``."""
    from refimpl.formats import get, round_to

    f = get(fmt)
    dt = np.dtype(dtype)
    x = placement.sharp_inputs(f, dt)
    if not f.has_nan:
        x = x[~np.isnan(x)]
    t = _Target("round_to", f.name, f"rounding={rounding}, saturate={saturate}")

    def expect(a: np.ndarray) -> np.ndarray:
        return np.asarray(round_to(a, f, rounding=rounding, saturate=saturate)).astype(dt)

    def actual(a: np.ndarray) -> np.ndarray:
        got = np.asarray(_call(fn, a, vectorized))
        if got.shape != a.shape:
            raise ConformanceError(f"round_to returned shape {got.shape} for {a.shape}")
        return got.astype(dt)

    from oracle.strategies import floats_near

    _run(t, x, expect, actual, None, floats_near(f, dtype=dt, nan=f.has_nan), max_examples)


#: ``python -m oracle conform TARGET``: target -> check
CHECKS: dict[str, Callable[..., None]] = {
    "formats.encode": check_encoder,
    "formats.decode": check_decoder,
    "formats.round_to": check_round_to,
}


def resolve_callable(spec: str) -> Callable:
    """``"package.module:function"`` (or ``module:Class.method``) -> the callable."""
    if ":" not in spec:
        raise ValueError(f"--impl must look like package.module:function, got {spec!r}")
    mod_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ValueError(f"--impl {spec}: cannot import {mod_name!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--impl {spec}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--impl {spec}: {attr} is not callable")
    return obj
