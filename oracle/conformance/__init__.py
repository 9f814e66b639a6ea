"""Ready property tests a user points at their own callable.

>>> from oracle.conformance import check_encoder
>>> check_encoder(my_to_e4m3, "e4m3")          # raises ConformanceError on disagreement
>>> conform("formats.encode", my_to_e8m0, "e8m0", variant={"e8m0_tie": "up"})

``conform(target, fn, *args, variant=..., **options)`` runs the check of a target with
documented variants selected and names the variants that explain a failure
(:mod:`.choices`); :data:`CONTRACTS` states how each target calls ``fn``
(:mod:`.contracts`, also ``conform --help`` and ``docs/conformance.md``).

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

The checks live by target in :mod:`.formats`, :mod:`.scaling` and :mod:`.tensors`;
:mod:`.phases` runs the sweep and the search, :mod:`.kinds` classifies failures and
:mod:`.report` holds what a check returns or raises.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from oracle.conformance.choices import conform
from oracle.conformance.contracts import CONTRACTS
from oracle.conformance.formats import check_decoder, check_encoder, check_round_to
from oracle.conformance.phases import SEARCH_ROUNDS
from oracle.conformance.report import ConformanceError, ConformanceReport, Failure
from oracle.conformance.scaling import (
    check_mx_quantize, check_nvfp4_quantize, nonfinite_blocks,
)
from oracle.conformance.targets import CHECKS
from oracle.conformance.tensors import check_attention, check_matmul, check_softmax

__all__ = ["ConformanceError", "ConformanceReport", "Failure", "check_encoder",
           "check_decoder", "check_round_to", "check_mx_quantize", "check_nvfp4_quantize",
           "check_matmul", "check_attention", "check_softmax", "CHECKS", "resolve_callable",
           "nonfinite_blocks", "SEARCH_ROUNDS", "conform", "CONTRACTS"]


def resolve_callable(spec: str) -> Callable:
    """``"package.module:function"`` (or ``module:Class.method``) -> the callable.

    Raises:
        ValueError: a malformed spec, a module that cannot be imported or that raises
            while being imported (its exception named, and chained), a missing
            attribute, or one that is not callable.
    """
    if ":" not in spec:
        raise ValueError(f"--impl must look like package.module:function, got {spec!r}")
    mod_name, _, attr = spec.partition(":")
    if not mod_name:
        raise ValueError(f"--impl {spec}: Empty module name")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ValueError(f"--impl {spec}: cannot import {mod_name!r} ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises on import
        raise ValueError(f"--impl {spec}: importing it failed with "
                         f"{type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--impl {spec}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"--impl {spec}: {attr} is not callable")
    return obj
