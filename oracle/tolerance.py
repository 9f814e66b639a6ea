"""Typed tolerances: how an implementation's output is compared with a golden one.

A golden-vector case never carries a bare ``rtol``. Each expected output names the
kind of agreement the specification demands (practice of Berkeley TestFloat and of the
WebGPU CTS acceptance intervals):

- ``exact``: bitwise equality (integer codes, or float bit patterns: ``-0.0`` differs
  from ``+0.0`` and every NaN payload counts).
- ``exact_nan_class``: bitwise equality, except that all NaNs form one class. Used
  where IEEE 754-2019 section 6.2.3 leaves the NaN payload open.
- ``ulp(n, fmt)``: at most ``n`` units in the last place of ``fmt`` at the
  expected value (ulp of the format's binade, clamped at its subnormal spacing).
- ``interval(lo, hi)``: every element inside its acceptance interval ``[lo, hi]``
  (arrays shipped with the case).
- ``allclose(rtol, atol, order)``: ``|got - expected| <= atol + rtol * |expected|``, only
  for results that depend on an implementation's reduction order; ``order`` names the
  order the golden value used.
- ``exact_unless_nan_scale(scales, block_size, axis, scale_format)``: block-scaled
  element codes. Bitwise equality, except that the elements of a block whose (expected)
  scale is NaN (E8M0 0xFF) are don't-care: OCP MX v1.0 section 5.2 makes every element
  of such a block NaN whatever its code, so no reader can use them and libraries write
  different codes there.
- ``relative_to_naive(factor, naive, atol)``: FlashAttention's rule. The largest error
  of the result against the exact reference is at most ``factor`` times the largest
  error of the naive low-precision computation (shipped as ``naive``) plus ``atol``.

Tolerances are frozen dataclasses serialised to JSON in a suite's manifest; array-valued
fields (``lo``, ``hi``, ``naive``, ``scales``) are stored there as the names of other
outputs of the same case and resolved when the case is loaded (``lo``, ``hi``, ``naive``
name reference arrays; ``scales`` names an expected output, read from the golden side).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Mapping, Union

import numpy as np
from tabulate import tabulate

from refimpl.deprecation import REMOVED_IN, deprecated_names, renamed_arguments
from refimpl.formats import FormatLike, decode, get
from refimpl.validation import as_float, as_float64, check_int, check_positive_int

#: an array field given inline, or the name of another output of the same case
ArrayRef = Union[np.ndarray, str]

__all__ = [
    "Tolerance", "ExactTolerance", "ExactNaNClass", "ExactUnlessNaNScale", "Ulp", "Interval",
    "AllClose", "RelativeToNaive", "Comparison", "exact", "exact_nan_class",
    "exact_unless_nan_scale", "ulp", "interval", "allclose", "relative_to_naive",
    "from_json", "compare", "assert_matches", "format_value", "steps_apart", "as_values",
    "softmax_tolerance",
]


# ---------------------------------------------------------------------------------
# helpers on values


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Decode unsigned codes of ``fmt`` with the format registry (lazy: the registry
    lives in ``refimpl.formats``)."""
    return np.asarray(decode(codes, get(fmt)))


def as_values(a: np.ndarray, fmt: str | None) -> np.ndarray:
    """Values as float64 (exact for every format of 32 bits or fewer): unsigned codes
    decoded with ``fmt`` when it is given, other arrays converted.

    Raises:
        ValueError: integers float64 cannot hold exactly, or codes ``fmt`` refuses.
    """
    if fmt is not None and a.dtype.kind == "u":
        a = _decode(a, fmt)
    # integers only when float64 holds them exactly: 2**53 + 1 must not match 2**53
    return as_float64(a, "values")


def _native(a: np.ndarray) -> np.ndarray:
    """``a`` in the machine's byte order (the same values; a copy only when needed)."""
    if a.dtype.isnative:
        return a
    return a.astype(a.dtype.newbyteorder("="))


def _bits(a: np.ndarray) -> np.ndarray:
    """The bit pattern of each element, as unsigned integers (values compare bitwise)."""
    a = np.asarray(a, dtype=np.asarray(a).dtype.newbyteorder("="), order="C")
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}")
    return a


def _ordinal(a: np.ndarray, fmt: str | None) -> np.ndarray:
    """Position on the number line counted in representable steps (sign-magnitude bits
    to a signed integer), so the distance of two values is how many ulps apart they are.
    Integer data without a format are their own ordinal."""
    a = np.asarray(a, order="C")
    if a.dtype.kind == "f":
        bits = _bits(a).astype(np.uint64)
        shift = np.uint64(8 * a.dtype.itemsize - 1)
        mag = (bits & ((np.uint64(1) << shift) - np.uint64(1))).astype(np.float64)
        return np.where((bits >> shift) != 0, -mag, mag)
    if fmt is not None and a.dtype.kind == "u":
        f = get(fmt)
        c = a.astype(np.int64)
        if f.signed:
            return np.where(c & f.sign_mask, -(c & f.magnitude_mask), c).astype(np.float64)
        return c.astype(np.float64)
    return a.astype(np.float64)


def steps_apart(actual: np.ndarray, expected: np.ndarray, fmt: str | None) -> np.ndarray:
    """How many representable steps of the arrays' own type (or of ``fmt`` for codes)
    lie between each pair of elements (float64)."""
    return np.abs(_ordinal(actual, fmt) - _ordinal(expected, fmt))


def _isnan(a: np.ndarray, fmt: str | None) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.isnan(a)
    if fmt is not None:
        return np.isnan(_decode(a, fmt))
    return np.zeros(a.shape, dtype=bool)


def _format_precision(fmt: str) -> tuple[int, int]:
    """(mantissa bits, emin) of a format, from the registry; float64 is built in."""
    name = fmt.lower()
    if name in ("fp64", "float64", "binary64"):
        return 52, -1022

    f = get(fmt)
    return int(f.man_bits), int(f.emin)


def ulp_of(x: np.ndarray, fmt: str) -> np.ndarray:
    """The ulp of ``fmt`` at each value of ``x`` (float64): 2^(max(e, emin) - p) where
    x = m * 2^e with 1 <= |m| < 2 and p the number of stored mantissa bits (IEEE 754-2019
    section 2.1: ulp). Zero and subnormals get the subnormal spacing; non-finite values
    get NaN."""
    man, emin = _format_precision(fmt)
    x = as_float64(x)
    finite = np.isfinite(x)
    # frexp is exact: it reads the exponent bits, no logarithm involved
    _, e = np.frexp(np.where(finite & (x != 0), x, 1.0))
    e = np.where(x == 0, emin, np.maximum(e.astype(np.int64) - 1, emin))
    out = np.ldexp(1.0, (e - man).astype(np.int32))
    return np.where(finite, out, np.nan)


# ---------------------------------------------------------------------------------
# comparison result


@dataclass
class Comparison:
    """The outcome of comparing one output with its golden value.

    ``mismatch`` is a boolean array of the expected shape (None when the arrays could
    not be compared elementwise, e.g. a shape or dtype mismatch, described by
    ``problem``); ``error`` holds the per-element error measure named ``error_label``.
    """

    ok: bool
    tolerance: "Tolerance"
    mismatch: np.ndarray | None = None
    error: np.ndarray | None = None
    error_label: str = "error"
    problem: str | None = None
    detail: str = ""

    @property
    def failures(self) -> int:
        if self.ok:
            return 0
        if self.mismatch is None:
            return 1
        return int(np.count_nonzero(self.mismatch))

    def summary(self) -> str:
        if self.ok:
            return f"ok ({self.tolerance.describe()})"
        if self.problem is not None:
            return self.problem
        n = self.failures
        total = self.mismatch.size if self.mismatch is not None else 0
        text = f"{n} of {total} elements outside {self.tolerance.describe()}"
        return f"{text}; {self.detail}" if self.detail else text


def format_value(v: Any, fmt: str | None) -> str:
    """A human-readable value: codes in hex with their decoded value, floats with their
    bit pattern so a -0.0 or a NaN payload is visible."""
    if isinstance(v, np.generic) and v.dtype.kind == "u":
        width = 2 * v.dtype.itemsize
        text = f"0x{int(v):0{width}X}"
        if fmt is not None:
            try:
                text += f" ({float(_decode(np.asarray([v]), fmt)[0]):.9g})"
            except (ValueError, ImportError):
                pass
        return text
    if isinstance(v, np.generic) and v.dtype.kind == "f":
        bits = int(np.asarray(v).reshape(1).view(f"u{v.dtype.itemsize}")[0])
        return f"{float(v):.9g} [0x{bits:0{2 * v.dtype.itemsize}X}]"
    return str(v)


@renamed_arguments({"format": "fmt"})
def failure_rows(
    comparison: Comparison,
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    fmt: str | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    input_formats: Mapping[str, str | None] | None = None,
    limit: int = 10,
) -> list[list[str]]:
    """Rows (index, input, expected, got, error) for the first ``limit`` failing
    elements, in C order. ``input`` shows the element of each input of the same shape."""
    if comparison.ok or comparison.mismatch is None:
        return []
    rows = []
    idx = np.argwhere(comparison.mismatch)[:limit]
    for index in map(tuple, idx):
        shown = []
        for name, arr in (inputs or {}).items():
            if arr.shape == expected.shape:
                f = (input_formats or {}).get(name)
                shown.append(f"{name}={format_value(arr[index], f)}")
        err = comparison.error[index] if comparison.error is not None else float("nan")
        rows.append([
            str(list(int(i) for i in index)),
            ", ".join(shown) or "-",
            format_value(expected[index], fmt),
            format_value(actual[index], fmt),
            f"{float(err):.4g}",
        ])
    return rows


# ---------------------------------------------------------------------------------
# tolerance kinds


def _json_key(f: Any) -> str:
    """The manifest key of a dataclass field (the suite's schema: ``Ulp.fmt`` is stored
    as ``"format"``)."""
    return f.metadata.get("json", f.name)


def _warn_renamed(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in {REMOVED_IN}; use {new}",
                  DeprecationWarning, stacklevel=3)


class Tolerance:
    """Base of the tolerance kinds. ``compare`` never raises on bad data: it returns a
    failed :class:`Comparison` naming the problem."""

    kind: ClassVar[str] = ""
    error_label: ClassVar[str] = "error"

    def describe(self) -> str:
        parts = []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v = f"<array {v.shape}>"
            parts.append(f"{_json_key(f)}={v}")
        return f"{self.kind}({', '.join(parts)})"

    # -- serialisation -------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                raise ValueError(
                    f"{self.kind}.{f.name} holds an array; in a suite it must name "
                    "another output of the case")
            out[_json_key(f)] = v
        return out

    def references(self) -> tuple[str, ...]:
        """Names of the reference arrays this tolerance reads (interval bounds, naive
        result)."""
        return tuple(getattr(self, f.name) for f in fields(self)
                     if f.metadata.get("array") and not f.metadata.get("output")
                     and isinstance(getattr(self, f.name), str))

    def output_references(self) -> tuple[str, ...]:
        """Names of expected outputs this tolerance reads (golden side), e.g. the block
        scales of ``exact_unless_nan_scale``."""
        return tuple(getattr(self, f.name) for f in fields(self)
                     if f.metadata.get("output") and isinstance(getattr(self, f.name), str))

    def resolve(self, outputs: Mapping[str, np.ndarray]) -> "Tolerance":
        """Replace output names in array fields by the arrays themselves."""
        changes = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.metadata.get("array") and isinstance(v, str):
                if v not in outputs:
                    raise ValueError(f"{self.kind} tolerance refers to output {v!r}, "
                                   f"which the case does not have")
                changes[f.name] = outputs[v]
        return replace(self, **changes) if changes else self

    # -- comparison ----------------------------------------------------------------
    @renamed_arguments({"format": "fmt"})
    def compare(self, actual: Any, expected: Any, *, fmt: FormatLike | None = None
                ) -> Comparison:
        """Compare ``actual`` with ``expected``; ``fmt`` (a Format or its name) is the
        low-precision format when both hold unsigned codes."""
        # values are compared, not byte orders: a big-endian '>f4' result holds the
        # same float32 values as the little-endian one a suite stores
        actual = _native(np.asarray(actual))
        expected = _native(np.asarray(expected))
        if actual.shape != expected.shape:
            return Comparison(False, self, problem=(
                f"shape {actual.shape} differs from the expected {expected.shape}"))
        if self._needs_same_dtype() and actual.dtype != expected.dtype:
            return Comparison(False, self, problem=(
                f"dtype {actual.dtype} differs from the expected {expected.dtype}"))
        for f in fields(self):
            v = getattr(self, f.name)
            if f.metadata.get("array"):
                if isinstance(v, str):
                    return Comparison(False, self, problem=(
                        f"{self.kind} tolerance field {f.name!r} still names output {v!r};"
                        " resolve it against the case's outputs first"))
                if not self._array_shape_ok(f.name, np.shape(v), expected.shape):
                    return Comparison(False, self, problem=(
                        f"{self.kind} tolerance field {f.name!r} has shape {np.shape(v)},"
                        f" expected {expected.shape}"))
        try:
            if isinstance(fmt, str) and "u" in (actual.dtype.kind, expected.dtype.kind):
                fmt = get(fmt)  # codes to read: the name is resolved once, here
            return self._compare(actual, expected, fmt)
        except ValueError as exc:  # values no comparison can use exactly (2**53 + 1)
            return Comparison(False, self, problem=str(exc))

    def _needs_same_dtype(self) -> bool:
        return False

    def _array_shape_ok(self, name: str, shape: tuple[int, ...],
                        expected: tuple[int, ...]) -> bool:
        return shape in ((), expected)

    def _compare(self, actual: np.ndarray, expected: np.ndarray,
                 fmt: str | None) -> Comparison:  # pragma: no cover - abstract
        raise NotImplementedError


def _result(tol: Tolerance, mismatch: np.ndarray, error: np.ndarray,
            detail: str = "") -> Comparison:
    return Comparison(not bool(mismatch.any()), tol, mismatch, error, tol.error_label,
                      detail=detail)


@dataclass(frozen=True)
class ExactTolerance(Tolerance):
    """Bitwise equality, dtype included (byte order aside: a big-endian array with the
    same values matches)."""

    kind: ClassVar[str] = "exact"
    error_label: ClassVar[str] = "steps apart"

    def _needs_same_dtype(self) -> bool:
        return True

    def _compare(self, actual, expected, fmt):
        mismatch = _bits(actual) != _bits(expected)
        return _result(self, mismatch, steps_apart(actual, expected, fmt))


@dataclass(frozen=True)
class ExactNaNClass(Tolerance):
    """Bitwise equality with every NaN (any sign, any payload, any NaN code of
    ``fmt``) in one class."""

    kind: ClassVar[str] = "exact_nan_class"
    error_label: ClassVar[str] = "steps apart"

    def _needs_same_dtype(self) -> bool:
        return True

    def _compare(self, actual, expected, fmt):
        both_nan = _isnan(actual, fmt) & _isnan(expected, fmt)
        mismatch = (_bits(actual) != _bits(expected)) & ~both_nan
        steps = steps_apart(actual, expected, fmt)
        return _result(self, mismatch, np.where(mismatch, steps, 0.0))


@dataclass(frozen=True)
class ExactUnlessNaNScale(Tolerance):
    """Block-scaled element codes: bitwise equality (dtype included), except in the
    blocks whose expected scale is NaN, where any element code is accepted.

    Special values: OCP MX v1.0 section 5.2: when the shared scale X is NaN, every
    element of the block decodes to NaN regardless of its code, so those codes carry no
    information and are don't-care. Blocks with a finite scale compare bitwise (a
    ``-0`` code differs from ``+0``).

    Args:
        scales: the block scales, or the name of the case's expected scales output
            (one scale per ``block_size`` consecutive elements along ``axis``; the last
            block may be short).
        block_size: elements per scale (32 in OCP MX).
        axis: the axis the blocks run along.
        scale_format: the format of the scale codes (``e8m0``); a float array of
            scales is used as it is.
    """

    scales: ArrayRef = field(default="scales", metadata={"array": True, "output": True})
    block_size: int = 32
    axis: int = -1
    scale_format: str = "e8m0"
    kind: ClassVar[str] = "exact_unless_nan_scale"
    error_label: ClassVar[str] = "steps apart"

    def __post_init__(self) -> None:
        check_int("exact_unless_nan_scale: axis", self.axis)
        check_positive_int("exact_unless_nan_scale: block_size", self.block_size)

    def _needs_same_dtype(self) -> bool:
        return True

    def _array_shape_ok(self, name, shape, expected):
        if not expected:
            return False
        ax = self.axis if self.axis >= 0 else self.axis + len(expected)
        if not 0 <= ax < len(expected):
            return False
        want = list(expected)
        want[ax] = -(-expected[ax] // self.block_size)
        return shape == tuple(want)

    def dont_care(self, shape: tuple[int, ...]) -> np.ndarray:
        """Boolean mask of the elements (of an array of ``shape``) under a NaN scale."""
        s = np.asarray(self.scales)
        nan = _isnan(s, self.scale_format if s.dtype.kind == "u" else None)
        ax = self.axis if self.axis >= 0 else self.axis + len(shape)
        mask = np.repeat(nan, self.block_size, axis=ax)
        return np.take(mask, np.arange(shape[ax]), axis=ax)

    def _compare(self, actual, expected, fmt):
        mismatch = (_bits(actual) != _bits(expected)) & ~self.dont_care(expected.shape)
        steps = steps_apart(actual, expected, fmt)
        return _result(self, mismatch, np.where(mismatch, steps, 0.0))


@dataclass(frozen=True)
class Ulp(Tolerance):
    """At most ``n`` ulps of ``fmt`` at the expected value. NaN matches NaN only;
    an infinity matches only the same infinity. (In a manifest ``fmt`` is stored under
    the key ``"format"``.)"""

    n: float = 0
    fmt: str = field(default="fp32", metadata={"json": "format"})
    kind: ClassVar[str] = "ulp"
    error_label: ClassVar[str] = "ulp"

    def __post_init__(self) -> None:
        if not as_float("ulp: n", self.n) >= 0:
            raise ValueError(f"ulp: n must be a non-negative number, got {self.n!r}")

    def _compare(self, actual, expected, fmt):
        a = as_values(actual, fmt)
        e = as_values(expected, fmt)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(a - e) / ulp_of(e, self.fmt)
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(e) & (a == e)
        err = np.where(both_nan | same_inf, 0.0, err)
        err = np.where(np.isnan(err), np.inf, err)
        return _result(self, err > self.n, err)

    @property
    def format(self) -> str:
        """Deprecated spelling of :attr:`fmt`."""
        _warn_renamed("Ulp.format", "Ulp.fmt")
        return self.fmt


# the keyword spelling Ulp(format=...) of the constructor
Ulp.__init__ = renamed_arguments({"format": "fmt"})(Ulp.__init__)  # type: ignore[method-assign]


@dataclass(frozen=True)
class Interval(Tolerance):
    """``lo <= got <= hi`` elementwise (bounds inclusive; a NaN bound pair means the
    result must be NaN)."""

    lo: ArrayRef = field(default="lo", metadata={"array": True})
    hi: ArrayRef = field(default="hi", metadata={"array": True})
    kind: ClassVar[str] = "interval"
    error_label: ClassVar[str] = "distance outside"

    def _compare(self, actual, expected, fmt):
        a = as_values(actual, fmt)
        lo = np.broadcast_to(as_float64(self.lo, "lo"), a.shape)
        hi = np.broadcast_to(as_float64(self.hi, "hi"), a.shape)
        with np.errstate(invalid="ignore"):
            dist = np.maximum(lo - a, a - hi)
        want_nan = np.isnan(lo) & np.isnan(hi)
        dist = np.where(want_nan, np.where(np.isnan(a), 0.0, np.inf),
                        np.where(np.isnan(a), np.inf, np.maximum(dist, 0.0)))
        dist = np.where(np.isnan(dist), 0.0, dist)  # inf - inf at an infinite bound
        return _result(self, dist > 0, dist)


@dataclass(frozen=True)
class AllClose(Tolerance):
    """``|got - expected| <= atol + rtol * |expected|``; NaN matches NaN and infinities
    must be equal. ``order`` records the reduction order the golden value used."""

    rtol: float = 0.0
    atol: float = 0.0
    order: str = ""
    kind: ClassVar[str] = "allclose"
    error_label: ClassVar[str] = "abs error"

    def __post_init__(self) -> None:
        if not (as_float("allclose: rtol", self.rtol) >= 0
                and as_float("allclose: atol", self.atol) >= 0):
            raise ValueError("allclose: rtol and atol must be non-negative")
        if not self.order:
            raise ValueError("allclose: name the reduction order the golden value used "
                             "(allclose is only for order-dependent results)")

    def _compare(self, actual, expected, fmt):
        a = as_values(actual, fmt)
        e = as_values(expected, fmt)
        with np.errstate(invalid="ignore"):
            err = np.abs(a - e)
            bad = ~(err <= self.atol + self.rtol * np.abs(e))
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(e) & (a == e)
        ok = both_nan | same_inf
        bad |= ~np.isfinite(a) | ~np.isfinite(e)   # non-finite matches only itself
        err = np.where(ok, 0.0, np.where(np.isnan(err), np.inf, err))
        return _result(self, bad & ~ok, err)


@dataclass(frozen=True)
class RelativeToNaive(Tolerance):
    """FlashAttention's acceptance rule: max|got - expected| <= factor * max|naive -
    expected| + atol, where ``naive`` is the same computation done the plain way in the
    low precision. Elements above the bound are reported."""

    factor: float = 2.0
    naive: ArrayRef = field(default="naive", metadata={"array": True})
    atol: float = 0.0
    kind: ClassVar[str] = "relative_to_naive"
    error_label: ClassVar[str] = "abs error"

    def __post_init__(self) -> None:
        if not (as_float("relative_to_naive: factor", self.factor) > 0
                and as_float("relative_to_naive: atol", self.atol) >= 0):
            raise ValueError("relative_to_naive: factor must be > 0 and atol >= 0")

    def _compare(self, actual, expected, fmt):
        a = as_values(actual, fmt)
        e = as_values(expected, fmt)
        n = np.broadcast_to(as_values(np.asarray(self.naive), fmt), e.shape)
        with np.errstate(invalid="ignore"):
            naive_err = np.abs(n - e)
            err = np.abs(a - e)
        naive_err = np.where(np.isnan(n) & np.isnan(e), 0.0, naive_err)
        finite = naive_err[np.isfinite(naive_err)]
        bound = self.factor * (float(finite.max()) if finite.size else 0.0) + self.atol
        err = np.where(np.isnan(a) & np.isnan(e), 0.0, np.where(np.isnan(err), np.inf, err))
        return _result(self, err > bound, err,
                       detail=f"bound {bound:.4g} = {self.factor} x naive max error + {self.atol}")


# ---------------------------------------------------------------------------------
# constructors and JSON


def exact() -> ExactTolerance:
    return ExactTolerance()


def exact_nan_class() -> ExactNaNClass:
    return ExactNaNClass()


def exact_unless_nan_scale(scales: ArrayRef = "scales", block_size: int = 32,
                           axis: int = -1, scale_format: str = "e8m0") -> ExactUnlessNaNScale:
    return ExactUnlessNaNScale(scales, block_size, axis, scale_format)


@renamed_arguments({"format": "fmt"})
def ulp(n: float, fmt: str = "fp32") -> Ulp:
    return Ulp(n, fmt)


def interval(lo: ArrayRef, hi: ArrayRef) -> Interval:
    return Interval(lo, hi)


def allclose(rtol: float, atol: float = 0.0, *, order: str) -> AllClose:
    return AllClose(rtol, atol, order)


def relative_to_naive(factor: float, naive: ArrayRef, atol: float = 0.0) -> RelativeToNaive:
    return RelativeToNaive(factor, naive, atol)


KINDS: dict[str, type[Tolerance]] = {
    cls.kind: cls for cls in (ExactTolerance, ExactNaNClass, ExactUnlessNaNScale, Ulp, Interval,
                              AllClose, RelativeToNaive)
}

def from_json(obj: Any) -> Tolerance:
    """Rebuild a tolerance from its manifest form; a malformed one is a ValueError that
    says which field is wrong."""
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        raise ValueError(f"tolerance must be an object with a 'kind', got {obj!r}")
    cls = KINDS.get(obj["kind"])
    if cls is None:
        raise ValueError(f"unknown tolerance kind {obj['kind']!r}; known: {', '.join(KINDS)}")
    names = {_json_key(f): f for f in fields(cls)}
    extra = set(obj) - set(names) - {"kind"}
    missing = set(names) - set(obj)
    if extra or missing:
        raise ValueError(f"{cls.kind} tolerance: unexpected fields {sorted(extra)}, "
                         f"missing fields {sorted(missing)}")
    kwargs = {}
    for name, f in names.items():
        v = obj[name]
        if f.metadata.get("array"):
            if not isinstance(v, str):
                raise ValueError(f"{cls.kind}.{name} must name an output, got {v!r}")
        elif name in ("format", "order", "scale_format"):
            if not isinstance(v, str):
                raise ValueError(f"{cls.kind}.{name} must be a string, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{cls.kind}.{name} must be a finite number, got {v!r}")
        elif f.type in ("int", int) and not isinstance(v, int):
            raise ValueError(f"{cls.kind}.{name} must be an integer, got {v!r}")
        kwargs[f.name] = v
    return cls(**kwargs)


@renamed_arguments({"format": "fmt"})
def compare(actual: Any, expected: Any, tolerance: Tolerance, *,
            fmt: str | None = None) -> Comparison:
    """Compare ``actual`` with ``expected`` under ``tolerance``; ``fmt`` names the
    low-precision format when both hold unsigned codes.

    Raises:
        TypeError: ``tolerance`` is not a :class:`Tolerance`."""
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"tolerance must be a Tolerance (exact(), ulp(n, fmt), ...), got "
                        f"{type(tolerance).__name__}")
    return tolerance.compare(actual, expected, fmt=fmt)


@renamed_arguments({"format": "fmt"})
def assert_matches(actual: Any, expected: Any, tolerance: Tolerance, *,
                   fmt: str | None = None,
                   inputs: Mapping[str, np.ndarray] | None = None,
                   limit: int = 10) -> None:
    """Raise AssertionError with a table of the failing elements (index, input,
    expected, got, error) unless ``actual`` matches ``expected`` under ``tolerance``.

    >>> assert_matches(np.float32([1.0]), np.float32([1.0]), exact())
    """
    comparison = compare(actual, expected, tolerance, fmt=fmt)
    if comparison.ok:
        return
    message = comparison.summary()
    if comparison.mismatch is not None:
        rows = failure_rows(comparison, np.asarray(actual), np.asarray(expected),
                            fmt=fmt, inputs=inputs, limit=limit)
        table = tabulate(rows, headers=["index", "input", "expected", "got",
                                        comparison.error_label])
        message = f"{message}\n{table}"
    raise AssertionError(message)


__getattr__ = deprecated_names(__name__, {"Exact": ("ExactTolerance", ExactTolerance)})


def softmax_tolerance(x: Any, axis: int = -1) -> Ulp:
    """The public acceptance rule for a float32 softmax of ``x`` along ``axis``:
    ``ulp(n, "fp32")`` at the correctly rounded softmax, with

        n = 8 + L + 2 * ceil(D),   D = max |x_i - max_j x_j|,

    ``L`` the length along ``axis`` and ``D`` the largest distance of a finite entry
    from its row's maximum over all rows (``-inf`` entries are masked: their output is
    exactly 0; a fully masked row is all zeros).

    Derivation (first order, u = 2^-24, Higham 2002 sections 2.2 and 4.2), for a float32
    evaluation of ``y_i = e^(x_i - m) / sum_j e^(x_j - m)`` in any summation order: the
    subtraction gives ``(x_i - m)(1 + d_i)``, ``|d_i| <= u``, an absolute error of at
    most ``D u`` that ``exp`` turns into a relative error ``e_i``, ``|e_i| <= D u``;
    the quotient then carries ``e_i - sum_j y_j e_j``, at most ``2 D u``. A sum of
    ``L`` positive terms adds at most ``(L - 1) u``; ``exp`` within 2 ulps adds at most
    ``4 u`` to the numerator and to the denominator; the division ``u``. In all less
    than ``(2 D + L + 8) u`` relative, and one ulp of a float32 value is more than
    ``u`` relative to it, so fewer than ``2 D + L + 8`` ulps.

    The golden softmax cases record their own ``n`` in the manifest (``8 + L +`` a bound
    on ``D`` from their construction).

    Raises:
        ValueError: ``x`` is empty along ``axis``, or holds NaN or ``+inf``.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    a = np.moveaxis(a, axis, -1)
    if a.shape[-1] == 0:
        raise ValueError("softmax_tolerance: x is empty along axis")
    if np.isnan(a).any() or np.isposinf(a).any():
        raise ValueError("softmax_tolerance: x holds NaN or +inf (no softmax is defined)")
    finite = np.isfinite(a)
    m = np.max(np.where(finite, a, -np.inf), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        spread = np.where(finite, m - a, 0.0)
    worst = float(spread.max()) if spread.size else 0.0
    return Ulp(8 + a.shape[-1] + 2 * int(np.ceil(worst)), "fp32")
