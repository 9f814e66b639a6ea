"""Kinds of elementwise failure: what differs (one step off, a sign of zero, a NaN
class) and where the input lies (at a rounding tie, in the subnormal range, at the
overflow threshold), so that each distinct bug is reported once with its simplest
counterexample."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from oracle.known_behaviours import encode_behaviour, kind_suffix
from oracle.tolerance import format_value, steps_apart
from refimpl.formats import Format, decode, get, round_to


def describe_input(v: Any) -> str:
    """One input value as a failure report prints it."""
    return format_value(np.asarray(v).reshape(1)[0], None)


def example_text(x: Any, expected: Any, got: Any, out_fmt: Format | None) -> str:
    """The input, expected and got lines of a counterexample."""
    return (f"  input    {describe_input(x)}\n"
            f"  expected {format_value(np.asarray(expected).reshape(1)[0], out_fmt)}\n"
            f"  got      {format_value(np.asarray(got).reshape(1)[0], out_fmt)}")


def difference(e: float, g: float, steps: float) -> str:
    """What differs between an expected and a got value (float64 of each)."""
    if np.isnan(e):
        return "a number where NaN is expected"
    if np.isnan(g):
        return "NaN where a number is expected"
    if abs(e) == abs(g) and np.signbit(e) != np.signbit(g):
        return ("sign difference of zero (+0 vs -0)" if e == 0
                else "sign difference")
    if e == g:
        return "a different encoding of the same value"
    if np.isinf(e) or np.isinf(g):
        return "infinity vs finite (overflow handling)"
    return "one step off" if steps == 1 else "several steps off"


def input_classes(f, x: np.ndarray) -> list[str]:
    """Where each source value lies relative to format ``f``."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    tie = np.zeros(x.shape, dtype=bool)
    finite = np.isfinite(a) & (a <= f.max) & (a > 0)
    if finite.any():
        try:
            lo = np.asarray(round_to(a[finite], f, rounding="toward_zero"), np.float64)
            hi = np.asarray(round_to(a[finite], f, rounding="toward_positive"), np.float64)
            tie[finite] = (lo != hi) & ((lo + hi) / 2 == a[finite])
        except ValueError:
            pass
    out = []
    for v, m, t in zip(x, a, tie):
        special = _special_class(v, ("NaN input", "infinite input", "zero input"))
        if special is not None:
            out.append(special)
        elif m > f.max:
            out.append("above the largest finite value")
        else:
            where = "subnormal range" if m < f.min_normal else "normal range"
            out.append(f"at a rounding tie, {where}" if t else where)
    return out


def code_classes(f, codes: np.ndarray) -> list[str]:
    """The class of each code of ``f`` (a decoder's input)."""
    v = np.asarray(decode(np.asarray(codes).astype(f.code_dtype), f), np.float64)
    return [_special_class(x, ("NaN code", "infinity code", "zero code"))
            or ("subnormal code" if abs(x) < f.min_normal else "normal code") for x in v]


def _special_class(v: float, names: tuple[str, str, str]) -> str | None:
    """``names`` (NaN, infinite, zero) for those values, None for any other."""
    if np.isnan(v):
        return names[0]
    if np.isinf(v):
        return names[1]
    return names[2] if v == 0 else None


def values64(a: np.ndarray, out_fmt: Format | None) -> np.ndarray:
    """Values as float64 (codes of ``out_fmt`` decoded first)."""
    if out_fmt is not None and a.dtype.kind == "u":
        return np.asarray(decode(a, get(out_fmt)), np.float64)
    return a.astype(np.float64)


def failure_kinds(x: np.ndarray, want: np.ndarray, got: np.ndarray, out_fmt: Format | None,
           where: Callable[[np.ndarray], list[str]],
           rounded_to: Format | None = None) -> list[str]:
    """The kind of each failing element: what differs and where its input lies, and the
    known library behaviour it shows (an encoder's codes of ``out_fmt``, or the values
    of a fake-quantiser to ``rounded_to``, read as that format's zero codes)."""
    e, g = values64(want, out_fmt), values64(got, out_fmt)
    steps = steps_apart(got, want, out_fmt)
    kinds = [f"{difference(ev, gv, s)} ({w})" for ev, gv, s, w in zip(e, g, steps, where(x))]
    if rounded_to is not None:
        # a zero value as its code (the known behaviours are about zeros); others: none
        codes = np.where(g == 0, np.where(np.signbit(g), rounded_to.sign_mask, 0), -1)
        fmt: Format | None = rounded_to
    elif out_fmt is not None and np.asarray(got).dtype.kind == "u":
        codes, fmt = np.asarray(got).reshape(-1), out_fmt
    else:
        return kinds
    for i, (xv, cv) in enumerate(zip(np.asarray(x, np.float64).reshape(-1), codes)):
        kinds[i] += kind_suffix(encode_behaviour(xv, cv, fmt))
    return kinds
