"""Ready property tests a user points at their own callable.

>>> from oracle.conformance import check_encoder
>>> check_encoder(my_to_e4m3, "e4m3")          # raises ConformanceError on disagreement

Checks (also ``python -m oracle conform TARGET``): ``check_encoder`` (formats.encode),
``check_decoder`` (formats.decode), ``check_round_to`` (formats.round_to),
``check_mx_quantize`` (scaling.mx_quantize), ``check_nvfp4_quantize``
(scaling.nvfp4_quantize), ``check_matmul`` (matmul.matmul: the acceptance interval of
float32 accumulation) and ``check_attention`` (attention.attention: FlashAttention's
2x-naive rule).

Each check runs in two phases. First a deterministic sweep over the inputs that matter
for the target (:mod:`oracle.placement`: every value, every rounding tie and its
neighbours, the overflow tie, zeros, infinities, NaNs; every code for a decoder; special
blocks for block scaling, with Inf and NaN blocks whenever a policy for them is named;
fixed shapes and masks for matmul and attention), so a wrong rounding rule is found every
time. Then a hypothesis search over random placements (:mod:`oracle.strategies`) that
shrinks what it finds. The expected answers come from ``refimpl``.

Every failure is classified into a kind (what differs, e.g. "one step off" or "sign
difference of zero (+0 vs -0)", and where the input lies, e.g. "at a rounding tie,
subnormal range"); the error reports every kind found, each with its simplest
counterexample (smallest magnitude first, positive before negative) and how often it
occurred in the sweep, plus the per-output failure counts, so a second bug is not
hidden behind the first. The hypothesis phase keeps searching past kinds already
found. A callable that raises is a failure of the implementation, reported with the
exception's text. A check that compared nothing fails.

The callable is called with a NumPy array (``vectorized=True``, the default) and must
return an array of the same shape: unsigned codes for an encoder, values for a decoder.
With ``vectorized=False`` it is called with one scalar at a time. Every check returns a
:class:`ConformanceReport` saying how much was compared.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from oracle import placement
from oracle.cases.matmul import bounds, operands, values
from oracle.cases.scaling import special_blocks, tiny_amax_blocks
from oracle.random_stream import CaseRandom
from oracle.tolerance import (
    ExactNaNClass, Interval, RelativeToNaive, format_value, steps_apart,
)
from refimpl.attention import (
    ALIGNMENTS, NAIVE_DTYPES, MaskOptions, attention, naive_attention,
)
from refimpl.deprecation import renamed_arguments
from refimpl.formats import E2M1, decode, encode, get, round_to
from refimpl.matmul import matmul
from refimpl.scaling import INF_BLOCK_POLICIES, NVFP4_RULES, mx_quantize, nvfp4_quantize
from refimpl.validation import check_bool, check_int

__all__ = ["ConformanceError", "ConformanceReport", "Failure", "check_encoder",
           "check_decoder", "check_round_to", "check_mx_quantize", "check_nvfp4_quantize",
           "check_matmul", "check_attention", "CHECKS", "resolve_callable"]

#: hypothesis searches run after the sweep, each continuing past the kinds found so far
SEARCH_ROUNDS = 4


@dataclass
class Failure:
    """One kind of disagreement: its simplest counterexample and how often it occurred
    in the sweep (0 when only the hypothesis search found it)."""

    kind: str
    phase: str
    text: str
    input: Any = None
    expected: Any = None
    got: Any = None
    count: int = 0


class ConformanceError(AssertionError):
    """A callable disagrees with the oracle. ``failures`` lists every kind found
    (simplest first); ``input``, ``expected`` and ``got`` hold the first one's
    counterexample; ``counts`` maps each output to (failed, compared) in the sweep."""

    def __init__(self, message: str, input: Any = None, expected: Any = None,
                 got: Any = None, failures: list[Failure] | None = None,
                 counts: dict[str, tuple[int, int]] | None = None) -> None:
        super().__init__(message)
        self.input, self.expected, self.got = input, expected, got
        self.failures = list(failures or [])
        self.counts = dict(counts or {})


@dataclass
class ConformanceReport:
    """What a passing check compared: ``compared`` maps each output to the number of
    elements the sweep compared; ``examples`` counts the hypothesis examples run."""

    target: str
    compared: dict[str, int] = field(default_factory=dict)
    placed: int = 0
    examples: int = 0

    def summary(self) -> str:
        outs = ", ".join(f"{n} {name}" for name, n in self.compared.items())
        text = f"{self.placed} placed inputs swept ({outs} compared)"
        if self.examples:
            return text + f", then {self.examples} random examples"
        return text + ", no random search (max_examples 0)"


class _Collector:
    """Failures by kind (first found first), per-output counts, examples run."""

    def __init__(self, title: str, target: str) -> None:
        self.title, self.target = title, target
        self.kinds: dict[str, Failure] = {}
        self.counts: dict[str, list[int]] = {}
        self.placed = 0
        self.examples = 0

    def count(self, output: str, compared: int, failed: int) -> None:
        c = self.counts.setdefault(output, [0, 0])
        c[0] += failed
        c[1] += compared

    def add(self, f: Failure) -> None:
        if f.kind in self.kinds:
            self.kinds[f.kind].count += f.count
        else:
            self.kinds[f.kind] = f

    def finish(self) -> ConformanceReport:
        if not self.kinds and not any(c[1] for c in self.counts.values()) \
                and not self.examples:
            raise ConformanceError(f"{self.title}: nothing was compared (an empty sweep "
                                   "and no random examples); this is not a pass")
        if self.kinds:
            raise self.error()
        return ConformanceReport(self.target, {k: v[1] for k, v in self.counts.items()},
                                 self.placed, self.examples)

    def error(self) -> ConformanceError:
        fs = list(self.kinds.values())
        n = len(fs)
        lines = [f"{self.title} disagrees with the oracle: {n} kind{'s' * (n != 1)} "
                 "of failure"]
        if self.counts:
            lines.append("  sweep: " + "; ".join(
                f"{name} {f} of {c} differ" for name, (f, c) in self.counts.items()))
        for i, f in enumerate(fs, 1):
            seen = f"{f.count} in the sweep" if f.count else "found by the random search"
            lines.append(f"[{i}] {f.kind}: {seen}; simplest ({f.phase}):")
            lines.append(f.text)
        first = fs[0]
        return ConformanceError("\n".join(lines), first.input, first.expected, first.got,
                                fs, {k: (v[0], v[1]) for k, v in self.counts.items()})


class _NewKind(Exception):
    """Raised inside a hypothesis example that shows a kind not yet found."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


def _invoke(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the implementation; an exception it raises becomes a ConformanceError with
    its text (a failure of the implementation, not of the check)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any exception is the implementation's
        shapes = ", ".join(str(np.shape(a)) for a in args)
        raise ConformanceError(
            f"the implementation raised {type(exc).__name__}: {exc}\n"
            f"  called with argument shapes {shapes}") from None


def _call(fn: Callable, x: np.ndarray, vectorized: bool) -> np.ndarray:
    if vectorized:
        return np.asarray(_invoke(fn, x))
    return np.array([np.asarray(_invoke(fn, v)).item()
                     for v in x.reshape(-1)]).reshape(x.shape)


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
    return format_value(np.asarray(v).reshape(1)[0], None)


def _example_text(x: Any, expected: Any, got: Any, out_fmt: str | None) -> str:
    return (f"  input    {_describe_input(x)}\n"
            f"  expected {format_value(np.asarray(expected).reshape(1)[0], out_fmt)}\n"
            f"  got      {format_value(np.asarray(got).reshape(1)[0], out_fmt)}")


def _search(strategy: Any, body: Callable[[Any], None], max_examples: int) -> Failure | None:
    """Run ``body`` on examples drawn from ``strategy`` (derandomised, no database); the
    Failure of the example hypothesis shrank a new kind to, or None. A ConformanceError
    (an implementation that raised or returned a wrong shape) is re-raised as it is."""
    # deferred: hypothesis is a test-time dependency, not a runtime one
    from hypothesis import HealthCheck, given, settings

    found: list[BaseException] = []

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def prop(v: Any) -> None:
        try:
            body(v)
        except (_NewKind, ConformanceError) as exc:
            found[:] = [exc]
            raise

    try:
        prop()
    except (_NewKind, ConformanceError):
        exc = found[-1]
        if isinstance(exc, ConformanceError):
            raise exc from None
        return exc.failure  # type: ignore[union-attr]
    return None


def _hunt(col: _Collector, strategy: Any, body: Callable[[Any], None],
          max_examples: int) -> None:
    """Hypothesis rounds; each continues past the kinds found before (``body`` raises
    ``_NewKind`` only for an unseen kind)."""
    if strategy is None or max_examples <= 0:
        return
    for _ in range(SEARCH_ROUNDS):
        f = _search(strategy, body, max_examples)
        if f is None:
            return
        col.add(f)


# ---------------------------------------------------------------------------------
# kinds of elementwise failures


def _difference(e: float, g: float, steps: float) -> str:
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


def _input_classes(f, x: np.ndarray) -> list[str]:
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
        if np.isnan(v):
            out.append("NaN input")
        elif np.isinf(v):
            out.append("infinite input")
        elif v == 0:
            out.append("zero input")
        elif m > f.max:
            out.append("above the largest finite value")
        else:
            where = "subnormal range" if m < f.min_normal else "normal range"
            out.append(f"at a rounding tie, {where}" if t else where)
    return out


def _code_classes(f, codes: np.ndarray) -> list[str]:
    """The class of each code of ``f`` (a decoder's input)."""
    v = np.asarray(decode(np.asarray(codes).astype(f.code_dtype), f), np.float64)
    out = []
    for x in v:
        if np.isnan(x):
            out.append("NaN code")
        elif np.isinf(x):
            out.append("infinity code")
        elif x == 0:
            out.append("zero code")
        else:
            out.append("subnormal code" if abs(x) < f.min_normal else "normal code")
    return out


def _values64(a: np.ndarray, out_fmt: str | None) -> np.ndarray:
    if out_fmt is not None and a.dtype.kind == "u":
        return np.asarray(decode(a, get(out_fmt)), np.float64)
    return a.astype(np.float64)


def _kinds(x: np.ndarray, want: np.ndarray, got: np.ndarray, out_fmt: str | None,
           where: Callable[[np.ndarray], list[str]]) -> list[str]:
    e, g = _values64(want, out_fmt), _values64(got, out_fmt)
    steps = steps_apart(got, want, out_fmt)
    return [f"{_difference(ev, gv, s)} ({w})"
            for ev, gv, s, w in zip(e, g, steps, where(x))]


@dataclass(frozen=True)
class _Target:
    what: str            # "encoder" / "decoder" / "round_to"
    fmt: Any
    options: str

    @property
    def title(self) -> str:
        return f"{self.fmt} {self.what} ({self.options})"


def _run(t: _Target, inputs: np.ndarray, expect: Callable[[np.ndarray], np.ndarray],
         actual: Callable[[np.ndarray], np.ndarray], out_fmt: str | None,
         strategy: Any, max_examples: int,
         where: Callable[[np.ndarray], list[str]]) -> ConformanceReport:
    """Sweep, then hypothesis; every kind of failure found, each with its simplest
    counterexample."""
    col = _Collector(t.title, f"{t.fmt} {t.what}")
    tol = ExactNaNClass()
    want = expect(inputs)
    got = actual(inputs)
    c = tol.compare(got, want, fmt=out_fmt)
    if c.problem:
        raise ConformanceError(f"{t.fmt} {t.what}: {c.problem}")
    col.placed = inputs.size
    col.count("codes" if t.what == "encoder" else "values", inputs.size, c.failures)
    phase = f"sweep of {inputs.size} placed inputs"
    if not c.ok:
        idx = np.flatnonzero(c.mismatch.reshape(-1))
        xs, ws, gs = (a.reshape(-1)[idx] for a in (inputs, want, got))
        for i, kind in enumerate(_kinds(xs, ws, gs, out_fmt, where)):
            if kind in col.kinds:
                col.kinds[kind].count += 1
            else:
                col.add(Failure(kind, phase, _example_text(xs[i], ws[i], gs[i], out_fmt),
                                xs[i], ws[i], gs[i], 1))

    def one(v: Any) -> None:
        col.examples += 1
        x = np.asarray([v], dtype=inputs.dtype)
        w, g = expect(x), actual(x)
        if not tol.compare(g, w, fmt=out_fmt).ok:
            kind = _kinds(x, w, g, out_fmt, where)[0]
            if kind not in col.kinds:
                raise _NewKind(Failure(kind, "hypothesis, shrunk",
                                       _example_text(x[0], w[0], g[0], out_fmt),
                                       x[0], w[0], g[0], 0))

    _hunt(col, strategy, one, max_examples)
    return col.finish()


def _check_max_examples(max_examples: Any) -> int:
    return check_int("max_examples", max_examples, minimum=0)


def check_encoder(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                  saturate: bool = False, nan: Any = None, dtype: Any = np.float32,
                  vectorized: bool = True, max_examples: int = 200) -> ConformanceReport:
    """Check an encoder ``fn(x) -> codes`` against ``refimpl.formats.encode`` with the
    same options. Inputs of ``dtype`` (float32 by default, float64 to catch double
    rounding) placed relative to ``fmt``; NaN inputs only where the format (or ``nan``)
    defines the answer.

    Raises:
        ConformanceError: every kind of disagreement, each with its simplest
            counterexample (input, expected code, code got).
    """
    f = get(fmt)
    dt = np.dtype(dtype)
    saturate = check_bool("saturate", saturate)
    vectorized = check_bool("vectorized", vectorized)
    max_examples = _check_max_examples(max_examples)
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

    # deferred: oracle.strategies imports hypothesis (a test-time dependency)
    from oracle.strategies import floats_near

    return _run(t, x, expect, actual, f.name, floats_near(f, dtype=dt, nan=with_nan),
                max_examples, lambda a: _input_classes(f, a))


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
    t = _Target("decoder", f.name, "every code" if f.bits <= 16 else "sampled codes")

    def actual(c: np.ndarray) -> np.ndarray:
        got = np.asarray(_call(fn, c, vectorized))
        if got.shape != c.shape:
            raise ConformanceError(f"the decoder returned shape {got.shape} for {c.shape}")
        want_dt = np.asarray(decode(c[:1], f)).dtype
        return got.astype(want_dt)

    def expect(c: np.ndarray) -> np.ndarray:
        return decode(c, f)

    return _run(t, codes, expect, actual, None, None, 0, lambda c: _code_classes(f, c))


def check_round_to(fn: Callable, fmt: Any, *, rounding: str = "nearest_even",
                   saturate: bool = False, dtype: Any = np.float32,
                   vectorized: bool = True, max_examples: int = 200) -> ConformanceReport:
    """Check a fake-quantiser ``fn(x) -> x rounded to fmt`` (same dtype as x) against
    ``refimpl.formats.round_to``."""
    f = get(fmt)
    dt = np.dtype(dtype)
    saturate = check_bool("saturate", saturate)
    vectorized = check_bool("vectorized", vectorized)
    max_examples = _check_max_examples(max_examples)
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

    # deferred: oracle.strategies imports hypothesis (a test-time dependency)
    from oracle.strategies import floats_near

    return _run(t, x, expect, actual, None, floats_near(f, dtype=dt, nan=f.has_nan),
                max_examples, lambda a: _input_classes(f, a))


# ---------------------------------------------------------------------------------
# block scaling


def _block_text(x: np.ndarray) -> str:
    finite = x[np.isfinite(x)]
    amax = float(np.abs(finite).max()) if finite.size else float("nan")
    return (f"block of {x.size} float32 values, amax {amax:.9g}"
            + (f", {int(np.sum(~np.isfinite(x)))} non-finite" if finite.size < x.size else ""))


def _block_class(x: np.ndarray) -> str:
    """What kind of block this is (the 'where' of a block-scaling failure)."""
    if np.isnan(x).any():
        return "block holding NaN"
    if np.isinf(x).any():
        return "block holding Inf"
    a = np.abs(x.astype(np.float64))
    amax = float(a.max()) if a.size else 0.0
    if amax == 0:
        return "all-zero block"
    if amax < float(np.finfo(np.float32).tiny):
        return "block with a float32-subnormal amax"
    if amax < 2.0 ** -100:
        return "block with a tiny amax"
    m, _ = np.frexp(amax)
    if m == 0.5:
        return "block whose amax is a power of two"
    return "block"


def nonfinite_blocks(size: int) -> list[np.ndarray]:
    """Float32 blocks holding Inf or NaN, the inputs a special-block policy decides:
    +Inf, -Inf, NaN, both infinities, NaN with Inf, and Inf among zeros. Values are
    fixed (multiples of 1/8 in [-4, 4]), so every run sweeps the same blocks."""
    base = ((np.arange(size) % 17) - 8).astype(np.float32) / np.float32(2)
    out = []
    for vals in ([np.inf], [-np.inf], [np.nan], [np.inf, -np.inf], [np.nan, np.inf]):
        b = base.copy()
        for i, v in enumerate(vals):
            b[(3 + 5 * i) % size] = v
        out.append(b)
    z = np.zeros(size, np.float32)
    z[size // 2] = np.inf
    out.append(z)
    return out


def _compare_blocks(col: _Collector, title: str, x: np.ndarray, block_size: int,
                    outputs: list[tuple[str, np.ndarray, np.ndarray, int]],
                    phase: str, count: bool, nan_scale: int | None,
                    code_fmt: Any = None) -> Failure | None:
    """Compare block-scaled outputs ``(name, got, expected, elements per entry)``
    (scales first, then codes) of ``x`` (rows, n); record counts (``count``) and every
    new kind; return the first new Failure. Codes are not compared in a block whose
    expected scale is the NaN code ``nan_scale`` (no reader can use them) nor, for the
    kind, in a block whose scale already differs. Codes of ``code_fmt`` that differ only
    in the sign bit are a sign difference (of zero: +0 vs -0)."""
    first_new = None
    scale_bad = None
    for name, g, w, per in outputs:
        if g.shape != w.shape:
            raise ConformanceError(f"{title}: {name} have shape {g.shape}, "
                                   f"expected {w.shape}")
        bad = g.astype(np.int64) != w.astype(np.int64)
        care = np.ones(bad.shape, dtype=bool)
        if per > 1 and nan_scale is not None and outputs[0][0] == "scales":
            s_want = outputs[0][2]
            care = np.repeat(s_want != nan_scale, per, axis=-1)[..., :bad.shape[-1]]
        bad &= care
        if count:
            col.count(name, int(care.sum()), int(bad.sum()))
        if per == 1:
            scale_bad = bad
        for r, c in (tuple(int(v) for v in ix) for ix in np.argwhere(bad)):
            blk = c // per
            if per > 1 and scale_bad is not None and scale_bad[r, blk]:
                continue   # follows from the scale
            block = x[r, blk * block_size:(blk + 1) * block_size]
            what = "differ"
            sign = getattr(code_fmt, "sign_mask", 0) if per > 1 else 0
            if sign and int(g[r, c]) ^ int(w[r, c]) == sign:
                what = ("sign difference of zero (+0 vs -0)"
                        if int(w[r, c]) & code_fmt.magnitude_mask == 0 else "sign difference")
            kind = f"{name} {what} ({_block_class(block)})"
            if kind in col.kinds:
                if count:
                    col.kinds[kind].count += 1
                continue
            text = (f"  input    row {r}, {_block_text(block)}\n"
                    f"  {name[:-1]:8} [{r}, {c}]: expected 0x{int(w[r, c]):02X}, "
                    f"got 0x{int(g[r, c]):02X}"
                    + (f" (element value {float(x[r, c]):.9g})" if per == 1 and
                       name == "codes" else ""))
            f = Failure(kind, phase, text, block, w[r, c], g[r, c], int(count))
            if count:
                col.add(f)
            if first_new is None:
                first_new = f
    return first_new


@renamed_arguments({"elem": "fmt"})
def check_mx_quantize(fn: Callable, fmt: Any = "e4m3", *, scale_rule: str = "floor",
                      block_size: int = 32, inf_block: str | None = None,
                      max_examples: int = 100, **_: Any) -> ConformanceReport:
    """Check an MX quantiser ``fn(x) -> (codes, scales)`` for ``x`` float32 of shape
    (rows, n * block_size), blocks along the last axis, against
    ``refimpl.scaling.mx_quantize`` (OCP MX v1.0 section 6.3) with the same rule.
    Element codes and E8M0 scale codes are compared exactly; element codes under an
    expected NaN scale are not compared (no reader can use them). Blocks holding NaN or
    Inf are swept and drawn only when ``inf_block`` names the policy ``fn`` follows, and
    then always (so contradicting policies cannot all pass). The fixed sweep includes blocks
    whose amax lies in 2^-137 .. 2^-119, around the smallest scale 2^-127.

    Raises:
        ConformanceError: every kind of failing block, each with its simplest example.
    """
    # deferred: oracle.strategies imports hypothesis (a test-time dependency)
    from oracle.strategies import BLOCK_KINDS, mx_blocks

    max_examples = _check_max_examples(max_examples)
    if inf_block is not None and inf_block not in INF_BLOCK_POLICIES:
        raise ValueError(f"inf_block must be one of {INF_BLOCK_POLICIES} or None, "
                         f"got {inf_block!r}")
    policy = inf_block or "nan"
    fmt_name = fmt if isinstance(fmt, str) else getattr(fmt, "name", str(fmt))
    opts = f"scale_rule={scale_rule}, block_size={block_size}" + (
        f", inf_block={inf_block}" if inf_block else "")
    title = f"MX {fmt_name} quantiser ({opts})"
    col = _Collector(title, f"MX {fmt_name} quantiser")

    def one(x: np.ndarray, phase: str, count: bool) -> Failure | None:
        q = mx_quantize(x, fmt, block_size=block_size, scale_rule=scale_rule,
                        inf_block=policy)
        got = _invoke(fn, x)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise ConformanceError(f"{title}: the MX quantiser must return (codes, scales)")
        codes, scales = (np.asarray(g) for g in got)
        return _compare_blocks(col, title, x, block_size,
                               [("scales", scales, q.scales, 1),
                                ("codes", codes, q.codes, block_size)],
                               phase, count, 0xFF, q.fmt)

    rng = CaseRandom(0, "conformance")
    # tiny maxima (2^-137 .. 2^-119) around E8M0's smallest scale 2^-127: a quantiser that
    # divides by max(scale, 2^-126) while storing 0x00 differs only there
    blocks = special_blocks(rng, block_size, fmt_name) + tiny_amax_blocks(rng, block_size)
    if inf_block:
        blocks = blocks + nonfinite_blocks(block_size)
    x = np.stack(blocks)
    col.placed = len(blocks)
    one(x, f"sweep of {len(blocks)} special blocks", True)
    kinds = [k for k in BLOCK_KINDS if inf_block or k not in ("nan", "inf")]

    def drawn(v: np.ndarray) -> None:
        col.examples += 1
        f = one(v, "hypothesis, shrunk", False)
        if f is not None:
            raise _NewKind(f)

    _hunt(col, mx_blocks(fmt_name, block_size=block_size, max_blocks=2, rows=1,
                         kinds=kinds), drawn, max_examples)
    return col.finish()


def check_nvfp4_quantize(fn: Callable, *, scale_rule: str = "te", max_examples: int = 100,
                         **_: Any) -> ConformanceReport:
    """Check an NVFP4 quantiser ``fn(x) -> (codes, scales, global_scale)`` for ``x``
    float32 of shape (rows, n * 16), 1x16 blocks along the last axis, against
    ``refimpl.scaling.nvfp4_quantize`` with the same rule (``"te"``, ``"te_kernel"``,
    ``"torchao"``): E2M1 element codes (one per byte) and E4M3 block-scale codes
    exactly, the float32 global scale bitwise. Element codes under an expected NaN
    block scale (0x7F) are not compared.

    Raises:
        ConformanceError: every kind of failing block, each with its simplest example.
    """
    # deferred: oracle.strategies imports hypothesis (a test-time dependency)
    from oracle.strategies import BLOCK_KINDS, nvfp4_blocks

    max_examples = _check_max_examples(max_examples)
    if scale_rule not in NVFP4_RULES:
        raise ValueError(f"scale_rule must be one of {NVFP4_RULES}, got {scale_rule!r}")
    title = f"NVFP4 quantiser (scale_rule={scale_rule}, 1x16 blocks)"
    col = _Collector(title, "NVFP4 quantiser")

    def one(x: np.ndarray, phase: str, count: bool) -> Failure | None:
        if scale_rule == "torchao" and not (np.isfinite(x).all() and np.abs(x).max() > 0):
            return None    # the torchao rule is undefined for a global amax of 0 or Inf
        q = nvfp4_quantize(x, scale_rule=scale_rule)
        got = _invoke(fn, x)
        if not (isinstance(got, tuple) and len(got) == 3):
            raise ConformanceError(f"{title}: the NVFP4 quantiser must return "
                                   "(codes, scales, global_scale)")
        codes, scales, gs = (np.asarray(g) for g in got)
        want_gs = np.asarray(q.global_scale, np.float32).reshape(())
        got_gs = gs.astype(np.float32).reshape(()) if gs.size == 1 else None
        same = got_gs is not None and (
            got_gs.view(np.uint32) == want_gs.view(np.uint32)
            or (np.isnan(got_gs) and np.isnan(want_gs)))
        if count:
            col.count("global_scale", 1, int(not same))
        if not same:
            kind = "global_scale differs"
            f = Failure(kind, phase,
                        f"  input    {x.shape} float32, amax "
                        f"{float(np.nanmax(np.abs(x))) if x.size else 0:.9g}\n"
                        f"  expected {format_value(want_gs[()], None)}\n"
                        f"  got      {gs!r}", x, want_gs, gs, int(count))
            if kind not in col.kinds:
                if count:
                    col.add(f)
                return f
            if count:
                col.kinds[kind].count += 1
        return _compare_blocks(col, title, x, 16,
                               [("scales", scales, q.scales, 1),
                                ("codes", codes, q.codes, 16)],
                               phase, count, 0x7F, E2M1)

    rng = CaseRandom(0, "conformance.nvfp4")
    blocks = special_blocks(rng, 16, "e2m1")
    if scale_rule != "torchao":
        blocks = blocks + nonfinite_blocks(16)[2:3]           # a NaN block
    # each block alone (its own global amax) and all rows together (one global scale)
    col.placed = len(blocks)
    for i, b in enumerate(blocks):
        one(b[None, :], f"sweep, special block {i} alone", True)
    finite = [b for b in blocks if np.isfinite(b).all()]
    one(np.stack(finite), f"sweep, {len(finite)} special blocks as one tensor", True)
    kinds = [k for k in BLOCK_KINDS if k not in ("inf",)
             and (scale_rule != "torchao" or k != "nan")]

    def drawn(v: np.ndarray) -> None:
        col.examples += 1
        f = one(v, "hypothesis, shrunk", False)
        if f is not None:
            raise _NewKind(f)

    _hunt(col, nvfp4_blocks(max_blocks=2, rows=2, kinds=kinds), drawn, max_examples)
    return col.finish()


# ---------------------------------------------------------------------------------
# matmul and attention


def check_matmul(fn: Callable, in_format: Any = "bf16", *, max_examples: int = 30,
                 **_: Any) -> ConformanceReport:
    """Check a float32-accumulating matrix product ``fn(a, b) -> c`` (a, b float32
    arrays holding ``in_format`` values, c float32) against the acceptance interval of
    float32 accumulation in any order around the correctly rounded product
    (``refimpl.matmul``; Higham 2002 section 3.1): each element within
    gamma_K * sum|a_ik b_kj| of the exact value."""
    max_examples = _check_max_examples(max_examples)
    title = f"matmul ({in_format} inputs)"
    col = _Collector(title, "matmul")

    def one(a: np.ndarray, b: np.ndarray, phase: str, count: bool) -> Failure | None:
        c = matmul(a, b)
        lo, hi = bounds(a, b, c)
        got = np.asarray(_invoke(fn, a, b))
        if got.shape != c.shape:
            raise ConformanceError(f"{title}: the product has shape {got.shape}, "
                                   f"expected {c.shape}")
        got = got.astype(np.float32)
        bad = Interval(lo, hi).compare(got, c).mismatch    # NaN bounds: NaN expected
        if count:
            col.count("out", bad.size, int(bad.sum()))
        first_new = None
        for i, j in (tuple(int(v) for v in ix) for ix in np.argwhere(bad)):
            kind = ("non-finite element differs"
                    if not (np.isfinite(c[i, j]) and np.isfinite(got[i, j]))
                    else "outside the acceptance interval of float32 accumulation")
            if kind in col.kinds:
                if count:
                    col.kinds[kind].count += 1
                continue
            f = Failure(kind, phase,
                        f"  element  [{i}, {j}] of a {a.shape} x {b.shape} product "
                        f"(K = {a.shape[1]})\n"
                        f"  expected {float(c[i, j]):.9g} in [{float(lo[i, j]):.9g}, "
                        f"{float(hi[i, j]):.9g}]\n  got      {float(got[i, j]):.9g}",
                        (a, b), c[i, j], got[i, j], int(count))
            if count:
                col.add(f)
            first_new = first_new or f
        return first_new

    fmt = None if in_format in (None, "fp32") else in_format
    shapes = ((4, 8, 4), (8, 64, 8), (16, 300, 8))
    col.placed = len(shapes)
    for n, (m, k, nn) in enumerate(shapes):
        ops = operands(m, k, nn, fmt)(CaseRandom(n, "conformance.matmul"))
        a, b = values(ops["a"], fmt), values(ops["b"], fmt)
        one(a, b, f"sweep, shape {m}x{k}x{nn}", True)
    # deferred: hypothesis is a test-time dependency, not a runtime one
    from hypothesis import strategies as st

    def drawn(shape_seed: tuple[int, int, int, int]) -> None:
        col.examples += 1
        m, k, n, seed = shape_seed
        ops = operands(max(m, 3), k, n, fmt)(CaseRandom(seed, "conformance.matmul"))
        a, b = values(ops["a"], fmt), values(ops["b"], fmt)
        f = one(a, b, "hypothesis, shrunk", False)
        if f is not None:
            raise _NewKind(f)

    _hunt(col, st.tuples(st.integers(1, 8), st.integers(1, 200), st.integers(1, 8),
                         st.integers(0, 2**31)), drawn, max_examples)
    return col.finish()


def _attention_sweep(masks: bool, alignments: tuple[str, ...],
                     window: bool) -> list[dict[str, Any]]:
    """Fixed attention problems (values multiples of 1/64 in [-4, 4], exact in FP16 and
    BF16): GQA, Sq < Sk and Sq > Sk, and with ``masks`` every allowed causal alignment,
    a window and right key padding."""
    r = CaseRandom(0, "conformance.attention")

    def t(*shape: int) -> np.ndarray:
        return r.integers(-256, 257, shape).astype(np.float32) / np.float32(64)

    out = []
    for b, hkv, g, sq, sk, d in ((1, 1, 1, 8, 8, 8), (2, 2, 2, 5, 13, 16),
                                 (1, 1, 3, 17, 6, 8)):
        base = {"q": t(b, hkv * g, sq, d), "k": t(b, hkv, sk, d), "v": t(b, hkv, sk, d),
                "causal": False, "causal_alignment": alignments[0], "window": None,
                "key_padding_mask": None}
        out.append(base)
        if not masks:
            continue
        for al in alignments:
            out.append(dict(base, causal=True, causal_alignment=al))
            if window:
                out.append(dict(base, causal_alignment=al, window=(2, 1)))
        pad = np.arange(sk)[None, :] < np.maximum(1, sk - 1 - np.arange(b))[:, None]
        out.append(dict(base, key_padding_mask=pad))
    return out


def check_attention(fn: Callable, *, dtype: str = "fp16", masks: bool = False,
                    factor: float = 2.0, atol: float = 1e-5, max_examples: int = 30,
                    alignment: str | None = None, window: bool = True,
                    **_: Any) -> ConformanceReport:
    """Check an attention forward ``fn(q, k, v, **options) -> out`` (SDPA layout,
    float32 arrays holding values exact in FP16 and BF16) with FlashAttention's rule:
    max|out - exact| <= factor * max|naive - exact| + atol, ``naive`` being the same
    computation done plainly in ``dtype`` (``"fp16"`` or ``"bf16"``,
    ``refimpl.attention.naive_attention``). With ``masks`` the options ``causal``,
    ``causal_alignment``, ``window`` and ``key_padding_mask`` are swept and drawn and
    passed too; otherwise ``fn(q, k, v)``. ``alignment`` restricts the causal alignment
    to the one ``fn`` implements (``"top_left"``: PyTorch SDPA's ``is_causal``);
    ``window=False`` never passes a sliding window."""
    # deferred: oracle.strategies imports hypothesis (a test-time dependency)
    from oracle.strategies import attention_inputs

    max_examples = _check_max_examples(max_examples)
    masks = check_bool("masks", masks)
    window = check_bool("window", window)
    if dtype not in NAIVE_DTYPES:
        raise ValueError(f"dtype must be one of {NAIVE_DTYPES}, got {dtype!r}")
    if alignment is not None and alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {sorted(ALIGNMENTS)} or None, "
                         f"got {alignment!r}")
    aligns = (alignment,) if alignment else ("bottom_right", "top_left")
    title = f"attention ({factor}x-naive-{dtype} rule)"
    col = _Collector(title, "attention")

    def one(x: dict[str, Any], phase: str, count: bool) -> Failure | None:
        opts = {k: x[k] for k in ("causal", "causal_alignment", "window", "key_padding_mask")}
        if not masks:
            opts = {}
        mask = MaskOptions(**opts)
        want = attention(x["q"], x["k"], x["v"], mask=mask)
        naive = naive_attention(x["q"], x["k"], x["v"], dtype=dtype, mask=mask)
        # the implementation under test takes the options as keywords
        got = np.asarray(_invoke(fn, x["q"], x["k"], x["v"], **opts))
        c = RelativeToNaive(factor, naive, atol).compare(got, want)
        if c.problem:
            raise ConformanceError(f"{title}: {c.problem}")
        if count:
            col.count("out", want.size, c.failures)
        if c.ok:
            return None
        named = [f"{k}={v}" for k, v in opts.items() if k != "key_padding_mask"]
        if opts.get("key_padding_mask") is not None:
            named.append("key padding")
        kind = f"out beyond the bound ({', '.join(named) or 'no masks'})"
        if kind in col.kinds:
            if count:
                col.kinds[kind].count += 1
            return None
        idx = tuple(int(v) for v in np.argwhere(c.mismatch)[0])
        f = Failure(kind, phase,
                    f"  inputs   q {x['q'].shape}, k {x['k'].shape}\n  {c.summary()}\n"
                    f"  element  {list(idx)}: expected {float(want[idx]):.9g}, "
                    f"got {float(got[idx]):.9g}", x, want, got, int(count))
        if count:
            col.add(f)
        return f

    sweep = _attention_sweep(masks, aligns, window)
    col.placed = len(sweep)
    for i, x in enumerate(sweep):
        one(x, f"sweep, problem {i}", True)

    def drawn(x: dict[str, Any]) -> None:
        col.examples += 1
        f = one(x, "hypothesis, shrunk", False)
        if f is not None:
            raise _NewKind(f)

    _hunt(col, attention_inputs(masks=masks, alignments=aligns, window=window), drawn,
          max_examples)
    return col.finish()


#: ``python -m oracle conform TARGET``: target -> check
CHECKS: dict[str, Callable[..., ConformanceReport]] = {
    "formats.encode": check_encoder,
    "formats.decode": check_decoder,
    "formats.round_to": check_round_to,
    "scaling.mx_quantize": check_mx_quantize,
    "scaling.nvfp4_quantize": check_nvfp4_quantize,
    "matmul.matmul": check_matmul,
    "attention.attention": check_attention,
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
