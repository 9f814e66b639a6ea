"""The masking options of attention, in one object shared by the reference and every
schedule: :class:`MaskOptions`.

Every attention function (``attention``, ``standard_attention``, ``naive_attention``,
``flash_v1``, ``flash_v2``, ``flash_v3``, ``split_kv``, the backward passes,
``refimpl.kvcache.paged_attention`` and :func:`refimpl.attention.prepare`) takes
``mask=MaskOptions(...)``. The same options are also accepted one by one as keywords
(``causal=True``, ...), which build the :class:`MaskOptions`; a call gives them either
way, not both (:func:`as_mask`). The functions declare ``mask=`` only: the keywords are
added by the decorator :func:`mask_keywords`, from the fields of :class:`MaskOptions`,
so the list of names and defaults exists once.

Conventions (flash-attention 2 and FlashInfer, Dao 2023, arXiv 2307.08691; the PyTorch
SDPA layout), stated once in :mod:`refimpl.attention.reference`: causal alignment
``"bottom_right"`` by default (row i sees key j iff ``j <= i + Sk - Sq``) or
``"top_left"`` (PyTorch SDPA's ``is_causal``); a sliding window is inclusive on both
sides; padding masks are boolean with ``True`` marking a valid token; ``softcap=None``
is no cap.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, Union

import numpy as np
from refimpl.validation import as_float, as_float_array, check_bool

__all__ = ["MaskOptions", "as_mask", "mask_keywords", "ALIGNMENTS", "MASK_FIELDS"]

#: causal/window alignment names -> description (flash-attention >= 2.1 and FlashInfer use
#: bottom_right; PyTorch SDPA's is_causal uses top_left)
ALIGNMENTS = {
    "bottom_right": "row i is aligned with key i + Sk - Sq (flash-attention >= 2.1, FlashInfer)",
    "top_left": "row i is aligned with key i (PyTorch SDPA is_causal)",
}

Window = Optional[tuple[Optional[int], Optional[int]]]


@dataclass(frozen=True, eq=False)
class MaskOptions:
    """The score-pipeline and masking options of an attention call, validated once.

    Every field is checked when the object is made, as far as it can be without the
    tensors (TypeError for a wrong type, ValueError for a wrong value); the shapes of
    ``alibi_slopes`` and the padding masks are checked against q, k and v by
    :func:`refimpl.attention.prepare`. Arrays are kept as read-only copies, so an object
    cannot change after it was checked. Objects compare by identity.

    Attributes:
        scale: score scale; None (default) is ``1/sqrt(D)``. A finite real number.
        causal: causal mask under ``causal_alignment`` (default False).
        causal_alignment: ``"bottom_right"`` (default; flash-attention >= 2.1,
            FlashInfer) or ``"top_left"`` (PyTorch SDPA ``is_causal``); also aligns the
            window and the ALiBi distance.
        window: ``(w_left, w_right)``, inclusive bounds around the aligned position, each
            an int >= 0 or None (unbounded); None (default) for no window
            (flash-attention's ``window_size`` writes -1 where this writes None).
        softcap: ``cap`` of ``cap * tanh(s / cap)``, a positive finite number, or None
            (default, no cap; flash-attention writes 0.0 for that, refused here).
        alibi_slopes: ALiBi slopes, (Hq,) or (..., Hq) finite reals (float64 copy), or
            None; bias ``-slope * |i + offset - j|``.
        key_padding_mask: bool (..., Sk), True = valid key; None for none.
        query_padding_mask: bool (..., Sq), True = valid query (invalid rows give 0);
            None for none.

    Raises:
        TypeError: a field of the wrong type (a non-bool ``causal``, a non-string
            alignment, a window that is not a pair or holds a non-int, a non-real
            ``scale``/``softcap``, non-numeric slopes, a non-boolean padding mask).
        ValueError: a wrong value (unknown alignment, negative window bound,
            non-finite scale, softcap <= 0 or non-finite, non-finite slopes, a scalar
            slope or mask).
    """

    scale: Optional[float] = None
    causal: bool = False
    causal_alignment: str = "bottom_right"
    window: Window = None
    softcap: Optional[float] = None
    alibi_slopes: Optional[np.ndarray] = None
    key_padding_mask: Optional[np.ndarray] = None
    query_padding_mask: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if self.scale is not None:
            scale = as_float("scale", self.scale)
            if not math.isfinite(scale):
                raise ValueError(f"scale must be finite, got {scale}")
            put("scale", scale)
        put("causal", check_bool("causal", self.causal))
        al = self.causal_alignment
        if not isinstance(al, str):
            raise TypeError(f"causal_alignment must be a string, one of {sorted(ALIGNMENTS)}, "
                            f"got {al!r}")
        if al not in ALIGNMENTS:
            raise ValueError(
                f"causal_alignment must be one of {sorted(ALIGNMENTS)}, got {al!r}")
        put("window", _window(self.window))
        if self.softcap is not None:
            cap = as_float("softcap", self.softcap)
            if not (cap > 0 and math.isfinite(cap)):
                raise ValueError(f"softcap must be a positive finite number or None, got {cap}")
            put("softcap", cap)
        if self.alibi_slopes is not None:
            put("alibi_slopes", _slopes(self.alibi_slopes))
        for name in ("key_padding_mask", "query_padding_mask"):
            if getattr(self, name) is not None:
                put(name, _padding(getattr(self, name), name))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def _window(window: object) -> Window:
    if window is None:
        return None
    left, right = _pair("window", "(w_left, w_right)", window)
    out = []
    for name, w in (("w_left", left), ("w_right", right)):
        if w is None:
            out.append(None)
            continue
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, np.integer)):
            raise TypeError(
                f"window {name} must be an integer >= 0 or None (unbounded), got {w!r}")
        if w < 0:
            raise ValueError(
                f"window {name} must be an integer >= 0 or None (unbounded), got {w!r}")
        out.append(int(w))
    return out[0], out[1]


def _pair(name: str, what: str, value: object) -> tuple[object, object]:
    """The two items of a pair: TypeError for something that is not a sequence (a
    string is not a pair), ValueError for a sequence of another length."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be a pair {what}, got {value!r}")
    if len(value) != 2:  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a pair {what}, got {value!r} "
                         f"({len(value)} items)")  # type: ignore[arg-type]
    first, second = value  # type: ignore[misc]
    return first, second


def _slopes(slopes: object) -> np.ndarray:
    raw = np.asarray(slopes)
    if raw.dtype.kind not in "fiuO":
        raise TypeError(f"alibi_slopes must hold real numbers, got dtype {raw.dtype}")
    s = as_float_array(raw, "alibi_slopes").astype(np.float64)
    if s.ndim == 0:
        raise ValueError(f"alibi_slopes must have shape (Hq,) or (..., Hq), got a scalar "
                         f"{slopes!r}")
    if not np.isfinite(s).all():
        raise ValueError("alibi_slopes must be finite")
    return _frozen(s)


def _padding(mask: object, name: str) -> np.ndarray:
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"{name} must be a boolean array (True = valid), got dtype {m.dtype}")
    if m.ndim == 0:
        raise ValueError(f"{name} must have shape (..., seq), got a scalar")
    return _frozen(m)


#: the fields of :class:`MaskOptions`, in order (the keywords every attention function
#: accepts in place of ``mask=``)
MASK_FIELDS = tuple(f.name for f in dataclasses.fields(MaskOptions))


def _is_default(name: str, value: object) -> bool:
    if name == "causal":
        return isinstance(value, (bool, np.bool_)) and not value
    if name == "causal_alignment":
        return isinstance(value, str) and value == "bottom_right"
    return value is None


def _checked(mask: object) -> MaskOptions:
    if not isinstance(mask, MaskOptions):
        raise TypeError(f"mask must be a refimpl.attention.MaskOptions or None, got "
                        f"{type(mask).__name__}")
    return mask


def _resolve(mask: Optional[MaskOptions], given: dict[str, object]) -> MaskOptions:
    """``mask``, or the :class:`MaskOptions` built from the keywords ``given`` (the
    rules of :func:`as_mask`)."""
    if mask is None:
        return MaskOptions(**given)  # type: ignore[arg-type]
    mask = _checked(mask)
    both = [name for name in MASK_FIELDS
            if name in given and not _is_default(name, given[name])]
    if both:
        raise TypeError(f"masking options given both as mask= and as keywords "
                        f"({', '.join(both)}); put them in the MaskOptions")
    return mask


F = TypeVar("F", bound=Callable[..., Any])


def mask_keywords(fn: Optional[F] = None, *,
                  exclude: tuple[str, ...] = ()) -> Union[F, Callable[[F], F]]:
    """Decorator: ``fn``, which takes ``mask=`` (a :class:`MaskOptions` or None), also
    accepts the fields of :class:`MaskOptions` one by one as keyword-only arguments
    (same names, meanings and defaults; ``exclude`` names fields it does not take).

    The keywords given build ``mask`` by the rules of :func:`as_mask` and ``fn`` is
    called with ``mask=`` only; with no such keyword the call reaches ``fn`` unchanged.
    The wrapper's ``__signature__`` is ``fn``'s with the keywords inserted after
    ``mask`` (taken from :func:`dataclasses.fields` of :class:`MaskOptions`), so
    :func:`inspect.signature` and :func:`help` show each one with its default. Any other
    keyword reaches ``fn`` and fails there as usual (TypeError naming it).

    Raises (at decoration): TypeError if ``fn`` has no ``mask`` parameter or already
    has one of the field names; ValueError for an unknown name in ``exclude``.
    """
    unknown = sorted(set(exclude) - set(MASK_FIELDS))
    if unknown:
        raise ValueError(f"exclude names no MaskOptions field: {unknown}")

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        names = [n for n in sig.parameters]
        if "mask" not in names:
            raise TypeError(f"{fn.__qualname__} has no mask parameter")
        clash = sorted(set(names) & set(MASK_FIELDS))
        if clash:
            raise TypeError(f"{fn.__qualname__} already has parameters {clash}")
        at = names.index("mask")
        # where a positional mask stands in *args (None: keyword-only)
        pos = at if params[at].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                        inspect.Parameter.POSITIONAL_OR_KEYWORD) else None
        fields = [f for f in dataclasses.fields(MaskOptions) if f.name not in exclude]
        extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                   default=f.default, annotation=f.type) for f in fields]
        taken = tuple(f.name for f in fields)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in taken if name in kwargs}
            if given:
                if pos is not None and len(args) > pos:
                    args = args[:pos] + (_resolve(args[pos], given),) + args[pos + 1:]
                else:
                    kwargs["mask"] = _resolve(kwargs.get("mask"), given)
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=params[:at + 1] + extra + params[at + 1:])
        return wrapper  # type: ignore[return-value]

    return decorate if fn is None else decorate(fn)


@mask_keywords
def as_mask(mask: Optional[MaskOptions] = None) -> MaskOptions:
    """The :class:`MaskOptions` of a call: ``mask`` when given, else one built from the
    keywords (the fields of :class:`MaskOptions`: same names, same defaults).

    With ``mask``, every keyword must keep its default value (``mask`` is then the
    whole story; a keyword passed at its default value is indistinguishable from one not
    passed and changes nothing).

    Raises:
        TypeError: ``mask`` is not a :class:`MaskOptions`; ``mask`` and a keyword other
            than its default were both given; a keyword's type (see
            :class:`MaskOptions`).
        ValueError: a keyword's value (see :class:`MaskOptions`).
    """
    return MaskOptions() if mask is None else _checked(mask)
