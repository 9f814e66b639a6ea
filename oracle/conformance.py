"""Ready property tests a user points at their own callable.

>>> from oracle.conformance import check_encoder
>>> check_encoder(my_to_e4m3, "e4m3")          # raises ConformanceError on disagreement

Checks (also ``python -m oracle conform TARGET``): ``check_encoder`` (formats.encode),
``check_decoder`` (formats.decode), ``check_round_to`` (formats.round_to),
``check_mx_quantize`` (scaling.mx_quantize), ``check_matmul`` (matmul.matmul: the
acceptance interval of float32 accumulation) and ``check_attention``
(attention.attention: FlashAttention's 2x-naive rule).

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
           "check_mx_quantize", "check_matmul", "check_attention", "CHECKS",
           "resolve_callable"]


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


def _search(strategy: Any, body: Callable[[Any], None], max_examples: int) -> None:
    """Run ``body`` on examples drawn from ``strategy`` (derandomised, no database) and
    re-raise the ConformanceError of the example hypothesis shrank to, unwrapped."""
    from hypothesis import HealthCheck, given, settings

    failure: list[ConformanceError] = []

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def prop(v: Any) -> None:
        try:
            body(v)
        except ConformanceError as exc:
            failure[:] = [exc]
            raise

    try:
        prop()
    except ConformanceError:
        raise failure[-1] from None


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

    def one(v: Any) -> None:
        x = np.asarray([v], dtype=inputs.dtype)
        w, g = expect(x), actual(x)
        if not tol.compare(g, w, format=out_fmt).ok:
            raise _fail(t, x[0], w[0], g[0], out_fmt, "hypothesis, shrunk")

    _search(strategy, one, max_examples)


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


def _mx_block_text(x: np.ndarray) -> str:
    finite = x[np.isfinite(x)]
    amax = float(np.abs(finite).max()) if finite.size else float("nan")
    return (f"block of {x.size} float32 values, amax {amax:.9g}"
            + (f", {int(np.sum(~np.isfinite(x)))} non-finite" if finite.size < x.size else ""))


def check_mx_quantize(fn: Callable, elem: Any = "e4m3", *, scale_rule: str = "floor",
                      block_size: int = 32, inf_block: str | None = None,
                      max_examples: int = 100, **_: Any) -> None:
    """Check an MX quantiser ``fn(x) -> (codes, scales)`` for ``x`` float32 of shape
    (rows, n * block_size), blocks along the last axis, against
    ``refimpl.scaling.mx_quantize`` (OCP MX v1.0 section 6.3) with the same rule.
    Element codes and E8M0 scale codes are compared exactly. Blocks holding NaN or Inf
    are included only when ``inf_block`` names the policy ``fn`` follows.

    Raises:
        ConformanceError: the simplest failing block, with the element or scale that
            differs.
    """
    from refimpl.scaling import mx_quantize

    from oracle.cases.scaling import special_blocks
    from oracle.random_stream import CaseRandom
    from oracle.strategies import BLOCK_KINDS, mx_blocks

    policy = inf_block or "nan"
    opts = f"scale_rule={scale_rule}, block_size={block_size}" + (
        f", inf_block={inf_block}" if inf_block else "")

    def one(x: np.ndarray, phase: str) -> None:
        q = mx_quantize(x, elem, block_size=block_size, scale_rule=scale_rule,
                        inf_block=policy)
        got = fn(x)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise ConformanceError("the MX quantiser must return (codes, scales)")
        codes, scales = (np.asarray(g) for g in got)
        for name, g, w in (("scales", scales, q.scales), ("codes", codes, q.codes)):
            if g.shape != w.shape:
                raise ConformanceError(f"{name}: shape {g.shape}, expected {w.shape}")
            bad = np.argwhere(g.astype(np.int64) != w.astype(np.int64))
            if bad.size:
                r, c = (int(v) for v in bad[0])
                blk = c if name == "scales" else c // block_size
                block = x[r, blk * block_size:(blk + 1) * block_size]
                raise ConformanceError(
                    f"MX {elem} quantiser ({opts}) disagrees with the oracle ({phase}):\n"
                    f"  input    row {r}, {_mx_block_text(block)}\n"
                    f"  {name[:-1]:8} [{r}, {c}]: expected 0x{int(w[r, c]):02X}, "
                    f"got 0x{int(g[r, c]):02X}"
                    + (f" (element value {float(x[r, c]):.9g})" if name == "codes" else ""),
                    block, w[r, c], g[r, c])

    elem_name = elem if isinstance(elem, str) else getattr(elem, "name", str(elem))
    blocks = special_blocks(CaseRandom(0, "conformance"), block_size, elem_name)
    for i, b in enumerate(blocks):
        one(b[None, :], f"sweep, special block {i}")
    kinds = [k for k in BLOCK_KINDS if inf_block or k not in ("nan", "inf")]
    if max_examples <= 0:
        return
    _search(mx_blocks(elem_name, block_size=block_size, max_blocks=2, rows=1, kinds=kinds),
            lambda x: one(x, "hypothesis, shrunk"), max_examples)


def check_matmul(fn: Callable, in_format: Any = "bf16", *, max_examples: int = 30,
                 **_: Any) -> None:
    """Check a float32-accumulating matrix product ``fn(a, b) -> c`` (a, b float32
    arrays holding ``in_format`` values, c float32) against the acceptance interval of
    float32 accumulation in any order around the correctly rounded product
    (``refimpl.matmul``; Higham 2002 section 3.1): each element within
    gamma_K * sum|a_ik b_kj| of the exact value."""
    from refimpl.matmul import matmul

    from oracle.cases.matmul import _bounds, _operands, _values
    from oracle.random_stream import CaseRandom
    from oracle.tolerance import Interval

    def one(a: np.ndarray, b: np.ndarray, phase: str) -> None:
        c = matmul(a, b)
        lo, hi = _bounds(a, b, c)
        got = np.asarray(fn(a, b))
        if got.shape != c.shape:
            raise ConformanceError(f"the product has shape {got.shape}, expected {c.shape}")
        got = got.astype(np.float32)
        bad = Interval(lo, hi).compare(got, c).mismatch    # NaN bounds: NaN expected
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise ConformanceError(
                f"matmul ({in_format} inputs, K = {a.shape[1]}) is outside the acceptance "
                f"interval of float32 accumulation ({phase}):\n"
                f"  element  [{i}, {j}] of a {a.shape} x {b.shape} product\n"
                f"  expected {float(c[i, j]):.9g} in [{float(lo[i, j]):.9g}, "
                f"{float(hi[i, j]):.9g}]\n  got      {float(got[i, j]):.9g}",
                (a, b), c[i, j], got[i, j])

    fmt = None if in_format in (None, "fp32") else in_format
    for n, (m, k, nn) in enumerate(((4, 8, 4), (8, 64, 8), (16, 300, 8))):
        ops = _operands(m, k, nn, fmt)(CaseRandom(n, "conformance.matmul"))
        a, b = _values(ops["a"], fmt), _values(ops["b"], fmt)
        one(a, b, f"sweep, shape {m}x{k}x{nn}")
    if max_examples <= 0:
        return
    from hypothesis import strategies as st

    def drawn(shape_seed: tuple[int, int, int, int]) -> None:
        m, k, n, seed = shape_seed
        ops = _operands(max(m, 3), k, n, fmt)(CaseRandom(seed, "conformance.matmul"))
        a, b = _values(ops["a"], fmt), _values(ops["b"], fmt)
        one(a, b, "hypothesis, shrunk")

    _search(st.tuples(st.integers(1, 8), st.integers(1, 200), st.integers(1, 8),
                      st.integers(0, 2**31)), drawn, max_examples)


def check_attention(fn: Callable, *, dtype: str = "fp16", masks: bool = False,
                    factor: float = 2.0, atol: float = 1e-5, max_examples: int = 30,
                    **_: Any) -> None:
    """Check an attention forward ``fn(q, k, v, **options) -> out`` (SDPA layout,
    float32 arrays holding values exact in FP16 and BF16) with FlashAttention's rule:
    max|out - exact| <= factor * max|naive - exact| + atol, ``naive`` being the same
    computation done plainly in ``dtype`` (``refimpl.attention.naive_attention``).
    With ``masks`` the options ``causal``, ``causal_alignment``, ``window`` and
    ``key_padding_mask`` are drawn and passed too; otherwise ``fn(q, k, v)``."""
    from refimpl.attention import attention, naive_attention

    from oracle.strategies import attention_inputs
    from oracle.tolerance import RelativeToNaive

    def one(x: dict[str, Any], phase: str) -> None:
        opts = {k: x[k] for k in ("causal", "causal_alignment", "window", "key_padding_mask")}
        if not masks:
            opts = {}
        want = attention(x["q"], x["k"], x["v"], **opts)
        naive = naive_attention(x["q"], x["k"], x["v"], dtype=dtype, **opts)
        got = np.asarray(fn(x["q"], x["k"], x["v"], **opts))
        c = RelativeToNaive(factor, naive, atol).compare(got, want)
        if not c.ok:
            where = ""
            if c.mismatch is not None:
                idx = tuple(int(v) for v in np.argwhere(c.mismatch)[0])
                where = (f"\n  element  {list(idx)}: expected {float(want[idx]):.9g}, "
                         f"got {float(got[idx]):.9g}")
            shapes = f"q {x['q'].shape}, k {x['k'].shape}"
            named = [f"{k}={v}" for k, v in opts.items() if k != "key_padding_mask"]
            if opts.get("key_padding_mask") is not None:
                named.append("key padding")
            raise ConformanceError(
                f"attention ({', '.join(named) or 'no masks'}) "
                f"fails the {factor}x-naive-{dtype} rule ({phase}):\n  inputs   {shapes}\n"
                f"  {c.summary()}{where}", x, want, got)

    _search(attention_inputs(masks=masks), lambda x: one(x, "hypothesis, shrunk"),
            max(1, max_examples))


#: ``python -m oracle conform TARGET``: target -> check
CHECKS: dict[str, Callable[..., None]] = {
    "formats.encode": check_encoder,
    "formats.decode": check_decoder,
    "formats.round_to": check_round_to,
    "scaling.mx_quantize": check_mx_quantize,
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
