"""Hypothesis strategies for testing other implementations against the oracle.

Practice (TestFloat; hypothesis for numeric code): draw *codes* and decode them rather
than drawing floats and filtering; weight the draw towards special values; place float
inputs relative to the TARGET format; keep the sharp values first so shrinking ends on
the simplest one.

- :func:`codes`: codes of any format, about half of them special (zeros, smallest and
  largest subnormal, smallest normal, one, largest finite, Inf, NaN, both signs).
- :func:`floats_near`: float32/float64/float16 values placed relative to a format.
- :func:`mx_blocks` / :func:`nvfp4_blocks`: tensors whose blocks are drawn from the
  cases block scaling gets wrong (all zero, amax a power of two and one ulp below, one
  huge outlier with the rest tiny, subnormal amax, NaN or Inf inside).
- :func:`attention_inputs`: q, k, v in the SDPA layout with GQA head groups, lengths
  not multiples of any block, and masking options (causal with either alignment,
  sliding window, key padding).
- :func:`kvcache_ops`: valid sequences of paged-KV-cache operations (add, append,
  fork, free).

Requires hypothesis (a runtime dependency of the package); importing this module imports it.

Example::

    from hypothesis import given
    from oracle import strategies
    from refimpl.formats import encode

    @given(strategies.floats_near("e4m3", shape=64))
    def test_my_encoder(x):
        assert (my_to_e4m3(x) == encode(x, "e4m3")).all()

Hypothesis profiles for numeric tests, registered with one call in a ``conftest.py``::

    from oracle.strategies import register_profiles
    register_profiles()      # ci (when CI is set) / dev, or HYPOTHESIS_PROFILE
"""
from __future__ import annotations

from typing import Any, Sequence

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from oracle import placement
from oracle.random_stream import CaseRandom
from refimpl.deprecation import renamed_arguments
from refimpl.formats import decode, get

__all__ = ["special_codes", "codes", "floats_near", "mx_blocks", "nvfp4_blocks",
           "attention_inputs", "kvcache_ops", "BLOCK_KINDS", "PROFILES", "register_profiles"]

#: too_slow: exact references are slow by design; data_too_large: block strategies
#: (hundreds of drawn values an example) overrun the buffer of older hypothesis releases
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

#: the hypothesis profiles numeric tests use (oracle practice: a derandomised CI
#: profile that prints the reproduction blob, a local one, a thorough one)
PROFILES: dict[str, dict[str, Any]] = {
    "ci": dict(derandomize=True, deadline=None, database=None, print_blob=True,
               max_examples=50, suppress_health_check=_SUPPRESSED),
    "dev": dict(deadline=None, max_examples=50, suppress_health_check=_SUPPRESSED),
    "thorough": dict(deadline=None, max_examples=2000, suppress_health_check=_SUPPRESSED),
}


def register_profiles(load: bool = True) -> str | None:
    """Register :data:`PROFILES` with hypothesis and, with ``load``, load one:
    ``HYPOTHESIS_PROFILE`` when set, else ``ci`` when the ``CI`` environment variable is
    set, else ``dev``. Returns the profile loaded (None without ``load``).

    Raises:
        ValueError: ``HYPOTHESIS_PROFILE`` names no profile of :data:`PROFILES`.
    """
    for name, options in PROFILES.items():
        settings.register_profile(name, **options)
    if not load:
        return None
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    if name not in PROFILES:
        raise ValueError(f"HYPOTHESIS_PROFILE={name!r}: known profiles are "
                         f"{', '.join(PROFILES)}")
    settings.load_profile(name)
    return name


def _fmt(fmt: Any):
    return get(fmt)


def special_codes(fmt: Any) -> list[int]:
    """The special codes of ``fmt`` (both signs where signed), simplest first: zero,
    smallest subnormal, largest subnormal, smallest normal, one, largest finite, Inf,
    NaN codes."""
    f = _fmt(fmt)
    man = 1 << f.man_bits
    mags = [0, 1, man - 1, man, f.bias << f.man_bits, f.max_code_magnitude]
    if f.max_code_magnitude < f.magnitude_mask:            # Inf and/or NaN magnitudes
        mags += [f.max_code_magnitude + 1, f.magnitude_mask]
    if not f.subnormals:
        mags = [0, 1, f.bias << f.man_bits, f.max_code_magnitude, f.magnitude_mask]
    out: list[int] = []
    for m in mags:
        if 0 <= m <= f.magnitude_mask:
            for c in ([m, m | f.sign_mask] if f.signed else [m]):
                if c not in out:
                    out.append(c)
    return out


def _code_element(fmt: Any) -> st.SearchStrategy[int]:
    f = _fmt(fmt)
    return st.one_of(st.sampled_from(special_codes(f)), st.integers(0, (1 << f.bits) - 1))


def codes(fmt: Any, *, shape: int | tuple[int, ...] | None = None
          ) -> st.SearchStrategy[Any]:
    """Codes of ``fmt``: an int when ``shape`` is None, else an array of the format's
    code dtype. About half the draws are special codes."""
    f = _fmt(fmt)
    if shape is None:
        return _code_element(f)

    return arrays(np.dtype(f.code_dtype), shape, elements=_code_element(f))


def _random_near(f, dtype: np.dtype) -> st.SearchStrategy[float]:
    src_man, lo, hi = placement.random_span(f, dtype)

    def build(e: int, m: int, neg: bool) -> Any:
        with np.errstate(over="ignore", under="ignore"):
            v = np.ldexp(1.0 + m * 2.0 ** -src_man, e)
            return dtype.type(-v if neg else v)

    return st.builds(build, st.integers(lo, hi), st.integers(0, (1 << src_man) - 1),
                     st.booleans())


def floats_near(fmt: Any, *, dtype: Any = np.float32, nan: bool = True,
                shape: int | tuple[int, ...] | None = None) -> st.SearchStrategy[Any]:
    """Values of ``dtype`` placed relative to ``fmt``: its values, every rounding tie,
    the neighbours of each tie, the overflow tie, zeros, infinities (and NaNs unless
    ``nan=False``), mixed with random values whose exponents span the format's range.
    A scalar of ``dtype`` when ``shape`` is None, else an array."""
    f = _fmt(fmt)
    dt = np.dtype(dtype)
    sharp = placement.sharp_inputs(f, dt)
    if not nan:
        sharp = sharp[~np.isnan(sharp)]
    element = st.one_of(st.sampled_from([dt.type(v) for v in sharp]), _random_near(f, dt))
    if shape is None:
        return element

    return arrays(dt, shape, elements=element)


#: the kinds of block :func:`mx_blocks` draws
BLOCK_KINDS = ("random", "zero", "pow2_amax", "below_pow2_amax", "outlier", "subnormal",
               "nan", "inf", "exact")


@st.composite
def _block(draw, fmt: Any, size: int, kinds: Sequence[str]) -> np.ndarray:
    f = _fmt(fmt) if fmt != "int8" else None
    kind = draw(st.sampled_from(list(kinds)))
    scale_exp = draw(st.integers(-20, 20))
    raw = draw(st.lists(st.integers(-(1 << 20), 1 << 20), min_size=size, max_size=size))
    x = np.ldexp(np.array(raw, dtype=np.float64), scale_exp - 20).astype(np.float32)
    pos = draw(st.integers(0, size - 1))
    if kind == "zero":
        x[:] = 0.0
        if draw(st.booleans()):
            x[pos] = -0.0
    elif kind in ("pow2_amax", "below_pow2_amax"):
        p = np.float32(np.ldexp(1.0, scale_exp))
        x = np.clip(x, -p, p) * np.float32(0.5)
        x[pos] = p if kind == "pow2_amax" else np.nextafter(p, np.float32(0))
    elif kind == "outlier":
        x = x * np.float32(2.0 ** -12)
        x[pos] = np.float32(np.ldexp(draw(st.sampled_from([1.0, -1.5, 1.75])), scale_exp + 12))
    elif kind == "subnormal":
        tiny = np.float32(np.ldexp(1.0, draw(st.integers(-149, -127))))
        x = (np.sign(x) * tiny).astype(np.float32)
    elif kind == "nan":
        x[pos] = np.nan
    elif kind == "inf":
        x[pos] = draw(st.sampled_from([np.inf, -np.inf]))
    elif kind == "exact" and f is not None:
        # already representable: element values times a power-of-two scale
        c = draw(st.lists(st.integers(0, f.max_code_magnitude), min_size=size, max_size=size))

        v = decode(np.array(c, dtype=f.code_dtype), f).astype(np.float64)
        signs = np.where(np.array(raw) < 0, -1.0, 1.0)
        x = np.ldexp(v * signs, scale_exp).astype(np.float32)
    return x


@renamed_arguments({"elem": "fmt"})
@st.composite
def mx_blocks(draw, fmt: Any = "e4m3", *, block_size: int = 32, min_blocks: int = 1,
              max_blocks: int = 4, rows: int | None = None,
              kinds: Sequence[str] = BLOCK_KINDS) -> np.ndarray:
    """A float32 array of shape (rows, n * block_size) (1-D when ``rows`` is None) whose
    blocks along the last axis are each drawn from ``kinds`` (:data:`BLOCK_KINDS`)."""
    n = draw(st.integers(min_blocks, max_blocks))
    nrows = 1 if rows is None else rows
    blocks = [draw(_block(fmt, block_size, kinds)) for _ in range(n * nrows)]
    x = np.concatenate(blocks).reshape(nrows, n * block_size)
    return x[0] if rows is None else x


def nvfp4_blocks(*, min_blocks: int = 1, max_blocks: int = 4, rows: int | None = None,
                 kinds: Sequence[str] = BLOCK_KINDS) -> st.SearchStrategy[np.ndarray]:
    """Like :func:`mx_blocks` with NVFP4's 16-element blocks and E2M1 elements."""
    return mx_blocks("e2m1", block_size=16, min_blocks=min_blocks, max_blocks=max_blocks,
                     rows=rows, kinds=kinds)


@st.composite
def attention_inputs(draw, *, max_batch: int = 2, max_kv_heads: int = 2,
                     max_group: int = 3, max_seq: int = 33,
                     dims: Sequence[int] = (1, 8, 16), masks: bool = True,
                     allow_empty: bool = False,
                     alignments: Sequence[str] = ("bottom_right", "top_left"),
                     window: bool = True) -> dict[str, Any]:
    """A dict with ``q`` (B, Hq, Sq, D), ``k`` and ``v`` (B, Hkv, Sk, D) float32 and the
    options of ``refimpl.attention.attention``: ``causal``, ``causal_alignment``,
    ``window`` and ``key_padding_mask`` (B, Sk) bool, True = keep, right-padded (the first
    n_b keys of batch entry b are valid, as in variable-length kernels). Values are multiples
    of 1/64 in [-4, 4] (exact in every format from BF16 up) with an optional common
    logit offset; Hq = Hkv * group (GQA/MQA). ``alignments`` are the causal alignments
    drawn (an implementation that knows only one passes just that one); ``window=False``
    never draws a sliding window."""
    b = draw(st.integers(1, max_batch))
    hkv = draw(st.integers(1, max_kv_heads))
    group = draw(st.integers(1, max_group))
    sq = draw(st.integers(1, max_seq))
    sk = draw(st.integers(0 if allow_empty else 1, max_seq))
    d = draw(st.sampled_from(list(dims)))
    seed = draw(st.integers(0, 2 ** 32 - 1))

    r = CaseRandom(seed, "attention_inputs")

    def t(*shape: int) -> np.ndarray:
        return (r.integers(-256, 257, shape).astype(np.float32) / np.float32(64))

    out: dict[str, Any] = {"q": t(b, hkv * group, sq, d), "k": t(b, hkv, sk, d),
                           "v": t(b, hkv, sk, d), "causal": False,
                           "causal_alignment": "bottom_right", "window": None,
                           "key_padding_mask": None}
    if masks:
        out["causal"] = draw(st.booleans())
        out["causal_alignment"] = draw(st.sampled_from(list(alignments)))
        if window and draw(st.booleans()):
            out["window"] = (draw(st.integers(0, max_seq)), draw(st.integers(0, max_seq)))
        if draw(st.booleans()) and sk:
            # right padding, flash-attention's variable-length convention
            valid = np.array([draw(st.integers(0, sk)) for _ in range(b)])
            out["key_padding_mask"] = np.arange(sk)[None, :] < valid[:, None]
    return out


@st.composite
def kvcache_ops(draw, *, max_ops: int = 30, max_seqs: int = 6, max_tokens: int = 40,
                fork: bool = True) -> list[tuple]:
    """A valid sequence of paged-KV-cache operations over sequence ids 0, 1, ...:
    ``("add", seq, prompt_len)``, ``("append", seq, n)``, ``("fork", parent, child)``,
    ``("free", seq)``. Operations only name live sequences; whether they fit in the
    pool is left to the cache under test (out-of-blocks must fail atomically)."""
    live: list[int] = []
    next_id = 0
    ops: list[tuple] = []
    for _ in range(draw(st.integers(1, max_ops))):
        choices = ["add"] if len(live) < max_seqs else []
        if live:
            choices += ["append", "append", "free"] + (["fork"] if fork and
                                                       len(live) < max_seqs else [])
        if not choices:
            break
        op = draw(st.sampled_from(choices))
        if op == "add":
            ops.append(("add", next_id, draw(st.integers(0, max_tokens))))
            live.append(next_id)
            next_id += 1
        elif op == "append":
            ops.append(("append", draw(st.sampled_from(live)), draw(st.integers(1, 20))))
        elif op == "fork":
            ops.append(("fork", draw(st.sampled_from(live)), next_id))
            live.append(next_id)
            next_id += 1
        else:
            victim = draw(st.sampled_from(live))
            ops.append(("free", victim))
            live.remove(victim)
    return ops
