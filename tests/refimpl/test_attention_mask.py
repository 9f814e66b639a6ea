"""refimpl.attention.mask: MaskOptions validation, and every schedule taking
``mask=MaskOptions(...)`` with the same bytes as the keyword form."""
from __future__ import annotations

import dataclasses
import inspect
import pydoc
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.attention import (
    MaskOptions, attention, attention_backward, flash_v1, flash_v2, flash_v2_backward,
    flash_v3, naive_attention, prepare, split_kv, standard_attention,
)
from refimpl.attention.mask import MASK_FIELDS, as_mask, mask_keywords
from refimpl.kvcache import PagedKVCache, paged_attention

# ----------------------------------------------------------------------- validation
BAD = [
    # (field, value, exception, message fragment)
    ("scale", "0.5", TypeError, "scale"),
    ("scale", True, TypeError, "scale"),
    ("scale", np.array([0.5]), TypeError, "scale"),
    ("scale", float("inf"), ValueError, "finite"),
    ("scale", float("nan"), ValueError, "finite"),
    ("scale", 2**53 + 1, ValueError, "exactly"),
    ("causal", "false", TypeError, "causal"),
    ("causal", 1, TypeError, "causal"),
    ("causal", None, TypeError, "causal"),
    ("causal_alignment", None, TypeError, "causal_alignment"),
    ("causal_alignment", 0, TypeError, "causal_alignment"),
    ("causal_alignment", "diagonal", ValueError, "causal_alignment"),
    ("causal_alignment", "Bottom_Right", ValueError, "causal_alignment"),
    ("window", 5, TypeError, "pair"),
    ("window", "ab", TypeError, "pair"),
    ("window", (1, 2, 3), ValueError, r"\(3 items\)"),
    ("window", (1.0, 0), TypeError, "w_left"),
    ("window", (0, True), TypeError, "w_right"),
    ("window", (-1, 0), ValueError, "w_left"),
    ("window", (0, -2), ValueError, "w_right"),
    ("softcap", "1", TypeError, "softcap"),
    ("softcap", 0.0, ValueError, "softcap"),
    ("softcap", -1.0, ValueError, "softcap"),
    ("softcap", float("inf"), ValueError, "softcap"),
    ("softcap", float("nan"), ValueError, "softcap"),
    ("alibi_slopes", ["a", "b"], TypeError, "alibi_slopes"),
    ("alibi_slopes", [True, False], TypeError, "alibi_slopes"),
    ("alibi_slopes", [1 + 1j], TypeError, "alibi_slopes"),
    ("alibi_slopes", np.float32(0.5), ValueError, "scalar"),
    ("alibi_slopes", [0.5, np.inf], ValueError, "finite"),
    ("alibi_slopes", [np.nan], ValueError, "finite"),
    ("alibi_slopes", [2**53 + 1], ValueError, "exactly"),
    ("key_padding_mask", [1, 0], TypeError, "boolean"),
    ("key_padding_mask", np.ones(3), TypeError, "boolean"),
    ("key_padding_mask", np.bool_(True), ValueError, "scalar"),
    ("query_padding_mask", ["x"], TypeError, "boolean"),
    ("query_padding_mask", np.True_, ValueError, "scalar"),
]


def test_every_field_has_bad_types_and_values():
    """The table covers a wrong type of every field and a wrong value of every field that
    has one (a bool has no wrong values)."""
    for field in MASK_FIELDS:
        kinds = {exc for f, _, exc, _ in BAD if f == field}
        assert TypeError in kinds, field
        assert ValueError in kinds or field == "causal", field


@pytest.mark.parametrize("field,value,exc,match", BAD,
                         ids=[f"{f}={v!r}" for f, v, _, _ in BAD])
def test_bad_field_is_refused(field, value, exc, match):
    with pytest.raises(exc, match=match):
        MaskOptions(**{field: value})
    # the keyword form of a schedule refuses it the same way, before any work
    q = np.zeros((1, 2, 4), np.float32)
    with pytest.raises(exc, match=match):
        flash_v2(q, q, q, **{field: value})


def test_good_fields_are_normalised_and_frozen():
    slopes = np.array([0.5, 0.25], np.float32)
    pad = np.array([[True, False, True]])
    m = MaskOptions(scale=2, causal=np.True_, window=[np.int64(3), None],
                    alibi_slopes=slopes, key_padding_mask=pad, softcap=np.float32(30))
    assert m.scale == 2.0 and type(m.scale) is float
    assert m.causal is True
    assert m.window == (3, None) and type(m.window[0]) is int
    assert m.softcap == 30.0 and type(m.softcap) is float
    assert m.alibi_slopes.dtype == np.float64
    slopes[0] = 9.0
    pad[0, 0] = False
    assert m.alibi_slopes[0] == 0.5 and m.key_padding_mask[0, 0]  # copies
    with pytest.raises(ValueError):
        m.alibi_slopes[0] = 1.0  # read-only
    with pytest.raises(AttributeError):
        m.causal = False  # type: ignore[misc]
    assert MaskOptions().causal_alignment == "bottom_right"


def test_as_mask_builds_or_passes_through():
    m = MaskOptions(causal=True)
    assert as_mask(m) is m
    assert as_mask(m, causal=False, causal_alignment="bottom_right") is m  # defaults
    built = as_mask(None, causal=True, window=(1, 0))
    assert built.causal and built.window == (1, 0)
    with pytest.raises(TypeError, match="MaskOptions"):
        as_mask({"causal": True})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="both as mask= and as keywords \\(causal, window\\)"):
        as_mask(m, causal=True, window=(1, 0))


# ----------------------------------------------------------------------- schedules
RNG = np.random.default_rng(5)
B, HQ, HKV, SQ, SK, D = 2, 2, 1, 5, 7, 4


def _x(*shape):
    return (RNG.integers(-32, 33, shape) / 16).astype(np.float32)


Q, K, V = _x(B, HQ, SQ, D), _x(B, HKV, SK, D), _x(B, HKV, SK, D)
DO = _x(B, HQ, SQ, D)


def _cache():
    c = PagedKVCache(16, 3, HKV, D)
    for b in range(B):
        c.add_sequence(b)
        c.append(b, K[b].transpose(1, 0, 2), V[b].transpose(1, 0, 2))
    return c


CACHE = _cache()

#: name -> (call with masking keywords or mask=, takes padding masks)
SCHEDULES = {
    "attention": (lambda **m: attention(Q, K, V, return_lse=True, **m), True),
    "attention_float64": (lambda **m: attention(Q, K, V, precision="float64", **m), True),
    "standard_attention": (lambda **m: standard_attention(Q, K, V, return_lse=True, **m),
                           True),
    "naive_attention": (lambda **m: naive_attention(Q, K, V, dtype="bf16", **m), True),
    "flash_v1": (lambda **m: flash_v1(Q, K, V, block=(2, 3), return_lse=True, **m), True),
    "flash_v2": (lambda **m: flash_v2(Q, K, V, block=(2, 3), **m), True),
    "flash_v2_plain": (lambda **m: flash_v2(Q, K, V, block=(4, 2), implementation="plain",
                                            **m), True),
    "flash_v3": (lambda **m: flash_v3(Q, K, V, block=(2, 4), **m), True),
    "flash_v3_fp8": (lambda **m: flash_v3(Q, K, V, block=(2, 4), fp8=True, **m), True),
    "split_kv": (lambda **m: split_kv(Q, K, V, num_splits=2, block=(2, 2), **m), True),
    "paged_attention": (lambda **m: paged_attention(Q, CACHE, [0, 1], block_q=2, **m), False),
}


def _grads(fn):
    def call(**m):
        out, lse = attention(Q, K, V, return_lse=True, **m)
        if not np.isfinite(out).all() or np.isposinf(lse).any():
            return None
        return fn(Q, K, V, out, DO, lse, **m)
    return call


SCHEDULES["attention_backward"] = (_grads(attention_backward), True)
SCHEDULES["flash_v2_backward"] = (_grads(lambda *a, **m: flash_v2_backward(
    *a, block=(2, 3), **m)), True)


def _bytes(result):
    """Every array's dtype, shape and bytes, and the stats, of a result."""
    if result is None:
        return None
    if isinstance(result, np.ndarray):
        return (result.dtype.str, result.shape, result.tobytes())
    return tuple(_bytes(x) if isinstance(x, np.ndarray) else x for x in result)


@st.composite
def masks(draw, padding=True):
    kw = {}
    if draw(st.booleans()):
        kw["scale"] = draw(st.sampled_from([0.25, 1, 0.7]))
    kw["causal"] = draw(st.booleans())
    kw["causal_alignment"] = draw(st.sampled_from(["bottom_right", "top_left"]))
    if draw(st.booleans()):
        bound = st.none() | st.integers(0, 4)
        kw["window"] = (draw(bound), draw(bound))
    if draw(st.booleans()):
        kw["softcap"] = draw(st.sampled_from([1.5, 20.0]))
    if draw(st.booleans()):
        kw["alibi_slopes"] = np.array([0.5, 0.125], np.float32)
    if padding and draw(st.booleans()):
        n = draw(st.lists(st.integers(0, SK), min_size=B, max_size=B))
        kw["key_padding_mask"] = np.arange(SK)[None, :] < np.array(n)[:, None]
    if padding and draw(st.booleans()):
        n = draw(st.lists(st.integers(0, SQ), min_size=B, max_size=B))
        kw["query_padding_mask"] = np.arange(SQ)[None, :] < np.array(n)[:, None]
    return kw


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@settings(max_examples=8)
@given(data=st.data())
def test_mask_object_equals_keywords_byte_for_byte(name, data):
    call, padding = SCHEDULES[name]
    kw = data.draw(masks(padding))
    by_keywords = call(**kw)
    by_mask = call(mask=MaskOptions(**kw))
    assert _bytes(by_mask) == _bytes(by_keywords)


#: the forward schedules whose output row is exact when one key is visible (not FP8,
#: which quantises v; not the gradients)
EXACT_FORWARD = sorted(set(SCHEDULES) - {"flash_v3_fp8", "attention_backward",
                                         "flash_v2_backward"})


@pytest.mark.parametrize("name", EXACT_FORWARD)
def test_mask_reaches_every_schedule(name):
    """Top-left causal: query row 0 sees key 0 alone, so its weight is exactly 1 and its
    output is exactly v[0], while without the mask it is not."""
    call, _ = SCHEDULES[name]
    out = call(mask=MaskOptions(causal=True, causal_alignment="top_left"))
    out = out if isinstance(out, np.ndarray) else out[0]
    want = np.repeat(V[:, :, :1], HQ // HKV, axis=1)[:, :, 0]
    # (naive_attention too: v[0] holds multiples of 1/16, exact in BF16)
    assert np.array_equal(out[:, :, 0], want)
    plain = call()
    plain = plain if isinstance(plain, np.ndarray) else plain[0]
    assert not np.array_equal(plain[:, :, 0], want)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_mask_and_keywords_together_are_refused(name):
    call, _ = SCHEDULES[name]
    with pytest.raises(TypeError, match="both as mask= and as keywords"):
        call(mask=MaskOptions(), causal=True)
    with pytest.raises(TypeError, match="MaskOptions"):
        call(mask={"causal": True})


def test_prepare_takes_the_mask():
    m = MaskOptions(causal=True, window=(2, None), softcap=3.0, scale=0.5)
    a = prepare(Q, K, V, mask=m)
    b = prepare(Q, K, V, causal=True, window=(2, None), softcap=3.0, scale=0.5)
    assert (a.causal, a.window, a.softcap, a.scale) == (True, (2, None), 3.0, 0.5)
    assert (b.causal, b.window, b.softcap, b.scale) == (True, (2, None), 3.0, 0.5)
    with pytest.raises(ValueError, match="alibi_slopes must have shape"):
        prepare(Q, K, V, mask=MaskOptions(alibi_slopes=np.ones(3)))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(2, 7\)"):
        prepare(Q, K, V, mask=MaskOptions(key_padding_mask=np.ones((2, 6), bool)))


def test_paged_attention_refuses_padding_masks():
    with pytest.raises(ValueError, match="no padding masks"):
        paged_attention(Q, CACHE, [0, 1], mask=MaskOptions(
            key_padding_mask=np.ones((B, SK), bool)))


# ------------------------------------------------------------- keywords of MaskOptions
PADDING = ("key_padding_mask", "query_padding_mask")
#: every public function taking mask=, and the fields it does not take as keywords
PUBLIC = [(attention, ()), (standard_attention, ()), (naive_attention, ()),
          (flash_v1, ()), (flash_v2, ()), (flash_v3, ()), (split_kv, ()),
          (attention_backward, ()), (flash_v2_backward, ()), (prepare, ()), (as_mask, ()),
          (paged_attention, PADDING)]


def _help_signature(fn) -> str:
    """The signature help() shows for ``fn``, as one line (Python 3.13 spreads a long
    signature over one line per parameter)."""
    lines = pydoc.render_doc(fn, renderer=pydoc.plaintext).splitlines()[2:]
    shown, depth = [], 0
    for line in lines:
        shown.append(line.strip())
        depth += line.count("(") - line.count(")")
        if depth <= 0:
            break
    return " ".join(shown)


@pytest.mark.parametrize("fn, without", PUBLIC, ids=[f.__name__ for f, _ in PUBLIC])
def test_signature_shows_every_field_after_mask(fn, without):
    params = inspect.signature(fn).parameters
    names = list(params)
    want = [f for f in dataclasses.fields(MaskOptions) if f.name not in without]
    at = names.index("mask")
    assert names[at + 1:at + 1 + len(want)] == [f.name for f in want]
    for f in want:
        assert params[f.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[f.name].default is f.default
    # by hand, from the documented defaults of MaskOptions
    assert params["causal"].default is False
    assert params["causal_alignment"].default == "bottom_right"
    assert not set(without) & set(names)
    # the list exists once: the function itself declares mask= only
    own = inspect.signature(inspect.unwrap(fn)).parameters
    assert "mask" in own and not set(own) & set(MASK_FIELDS)
    shown = _help_signature(fn)
    for f in want:
        assert re.search(rf"\b{f.name}\b[^,=]*= ?{re.escape(repr(f.default))}", shown), f.name


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_unknown_keyword_is_refused_by_name(name):
    call, _ = SCHEDULES[name]
    with pytest.raises(TypeError, match="unexpected keyword argument 'causl'"):
        call(causl=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'causl'"):
        call(mask=MaskOptions(), causl=True)


def test_paged_attention_takes_no_padding_keyword():
    for name in PADDING:
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
            paged_attention(Q, CACHE, [0, 1], **{name: np.ones((B, SK), bool)})


def test_mask_stays_keyword_only():
    with pytest.raises(TypeError, match="positional"):
        flash_v2(Q, K, V, MaskOptions())  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        prepare(Q, K, V, MaskOptions())  # type: ignore[misc]
    m = MaskOptions(causal=True)
    assert as_mask(m) is m and as_mask(mask=m) is m  # as_mask: positional or keyword
    with pytest.raises(TypeError, match=r"both as mask= and as keywords \(softcap\)"):
        as_mask(m, softcap=2.0)
    with pytest.raises(TypeError, match=r"both as mask= and as keywords \(softcap\)"):
        as_mask(mask=m, softcap=2.0)


def test_mask_keyword_at_its_default_with_mask_changes_nothing():
    m = MaskOptions(causal=True, causal_alignment="top_left")
    a = flash_v2(Q, K, V, block=(2, 3), mask=m)
    b = flash_v2(Q, K, V, block=(2, 3), mask=m, causal=False, window=None)
    c = flash_v2(Q, K, V, block=(2, 3), causal=True, causal_alignment="top_left")
    assert _bytes(a) == _bytes(b) == _bytes(c)


def test_mask_keywords_refuses_bad_decoration():
    with pytest.raises(TypeError, match="no mask parameter"):
        mask_keywords(lambda q, *, block=1: q)
    with pytest.raises(TypeError, match="already has"):
        mask_keywords(lambda q, *, mask=None, causal=False: q)
    with pytest.raises(ValueError, match="padding"):
        mask_keywords(exclude=("padding",))
