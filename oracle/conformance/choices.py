"""Documented variants in conformance checks: ``conform --variant CHOICE=OPTION`` (and
``oracle.conformance.conform(..., variant={CHOICE: OPTION})``) selects the option of an
implementation-defined choice that the implementation follows, and a failure is
explained when a documented variant accounts for it.

The choices are those the golden suites mark (``python -m oracle generate --list``), each
mapped here to the keyword arguments of the check that implement its options:

- ``formats.encode`` and ``formats.round_to``: ``e8m0_tie`` (``nearest_even``, ``up``: ties up, as ml_dtypes and
  RCEIL), ``e8m0_zero`` (``min``: 0x00, ``nan``: 0xFF), ``e8m0_negative`` (``nan``,
  ``magnitude``), all for E8M0; ``nan_to_e2m1`` / ``nan_to_e2m3`` / ``nan_to_e3m2`` (what a
  NaN becomes: ``zero``, ``signed_zero``, ``0x8``, and for E2M1 ``0x3``).
- ``scaling.mx_quantize``: ``mx_scale_rule`` (``floor``, ``ceil``, ``even``, ``rceil``)
  and ``mx_inf_block`` (``nan``, ``max``, ``exponent``: the policy for blocks holding Inf
  or NaN; naming one sweeps such blocks).
- ``scaling.nvfp4_quantize``: ``nvfp4_scale_rule`` (``te``, ``te_kernel``, ``torchao``).
- ``attention.attention``: ``causal_alignment`` (``bottom_right``, ``top_left``: PyTorch
  SDPA's ``is_causal``).

When a check fails, every combination of other options of the choices not named is
tried on the deterministic sweep (fewest changed choices first). A combination under
which the implementation passes is named in the report: "every difference matches
e8m0_tie=up, e8m0_zero=nan (documented variants): add --variant e8m0_tie=up --variant
e8m0_zero=nan". Otherwise a combination that removes some kinds of failure is named for
those kinds, and the rest are differences no documented variant explains.
"""
from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, Mapping

from oracle.cases.formats import E8M0_NEGATIVE, E8M0_ZERO, NAN_OPTIONS
from oracle.conformance.report import ConformanceError, ConformanceReport
from oracle.conformance.targets import CHECKS
from refimpl.attention import ALIGNMENTS
from refimpl.formats import get
from refimpl.scaling import INF_BLOCK_POLICIES, NVFP4_RULES

__all__ = ["choices_for", "variant_kwargs", "conform", "explain"]

#: the MX scale rules the suites mark (``mx_scale_rule``)
MX_RULES = ("floor", "ceil", "even", "rceil")
#: at most this many option combinations are tried to explain one failure
MAX_TRIES = 32

Options = dict[str, dict[str, dict[str, Any]]]   # choice -> option -> check keywords

#: choices whose option names what the function computes whatever its keyword says (an
#: SDPA computes top_left under is_causal): an option is tried with the function called
#: with the keyword set to another option, so a function that follows the keyword, and
#: fails only where its answer is wrong, is not credited with a variant
KEYWORD_IGNORED = {"causal_alignment": "causal_alignment"}


def choices_for(target: str, fmt: Any = None) -> Options:
    """The documented choices of ``target`` (for element format ``fmt``), each option
    with the keyword arguments of the check that select it; the default option first."""
    if target in ("formats.encode", "formats.round_to") and fmt is not None:
        f = get(fmt)
        if f.name == "e8m0":
            return {"e8m0_tie": {"nearest_even": {"rounding": "nearest_even"},
                                 "up": {"rounding": "nearest_away"}},
                    "e8m0_zero": {o: {"e8m0_zero": o} for o in E8M0_ZERO},
                    "e8m0_negative": {o: {"e8m0_negative": o} for o in E8M0_NEGATIVE}}
        if not f.has_nan and f.name in ("e2m1", "e2m3", "e3m2"):
            return {f"nan_to_{f.name}": {o: {"nan": v} for o, v in NAN_OPTIONS.items()
                                         if o != "0x3" or f.name == "e2m1"}}
        return {}
    if target == "scaling.mx_quantize":
        return {"mx_scale_rule": {r: {"scale_rule": r} for r in MX_RULES},
                "mx_inf_block": {p: {"inf_block": p} for p in INF_BLOCK_POLICIES}}
    if target == "scaling.nvfp4_quantize":
        return {"nvfp4_scale_rule": {r: {"scale_rule": r} for r in NVFP4_RULES}}
    if target == "attention.attention":
        return {"causal_alignment": {a: {"alignment": a} for a in sorted(ALIGNMENTS)}}
    return {}


def variant_kwargs(target: str, fmt: Any, selected: Mapping[str, str]) -> dict[str, Any]:
    """The check keywords of the options ``selected`` ({choice: option}).

    Raises:
        ValueError: a choice ``target`` (with ``fmt``) does not have, or an option the
            choice does not have, listing the known ones.
    """
    table = choices_for(target, fmt)
    out: dict[str, Any] = {}
    for choice, option in selected.items():
        if choice not in table:
            names = ", ".join(table) or "none"
            raise ValueError(f"--variant {choice}={option}: {target}"
                             + (f" ({fmt})" if fmt is not None else "")
                             + f" has no choice {choice!r}; its choices: {names}")
        if option not in table[choice]:
            raise ValueError(f"--variant {choice}={option}: unknown option {option!r} of "
                             f"{choice}; allowed: {', '.join(table[choice])}")
        out.update(table[choice][option])
    return out


def _current(table: Options, kw: Mapping[str, Any],
             defaults: Mapping[str, Any]) -> dict[str, str | None]:
    """The option of each choice that the check keywords ``kw`` select (None: none)."""
    out: dict[str, str | None] = {}
    for choice, options in table.items():
        out[choice] = next((o for o, keys in options.items()
                            if all(kw.get(k, defaults.get(k)) == v for k, v in keys.items())),
                           None)
    return out


def _ignoring(fn: Callable, chosen: Mapping[str, str], table: Options) -> Callable:
    """``fn`` called with the keyword of each :data:`KEYWORD_IGNORED` choice of
    ``chosen`` set to another option than the one tried."""
    subs = {KEYWORD_IGNORED[c]: next(x for x in table[c] if x != o)
            for c, o in chosen.items() if c in KEYWORD_IGNORED and len(table[c]) > 1}
    if not subs:
        return fn

    def called_with_another_option(*a: Any, **k: Any) -> Any:
        return fn(*a, **{**k, **{key: v for key, v in subs.items() if key in k}})

    return called_with_another_option


def _kinds(check: Callable[..., ConformanceReport], fn: Callable, args: tuple,
           kw: dict[str, Any]) -> set[str] | None:
    """The kinds of failure of the sweep under ``kw`` (empty: it passes); None when the
    check cannot run with these options."""
    try:
        check(fn, *args, **{**kw, "max_examples": 0})
    except ConformanceError as exc:
        return {f.kind for f in exc.failures} if exc.failures else None
    except ValueError:
        return None
    return set()


def explain(check: Callable[..., ConformanceReport], fn: Callable, args: tuple,
            kw: dict[str, Any], table: Options, fixed: set[str],
            error: ConformanceError) -> str | None:
    """A note naming the documented variants that account for ``error`` (all of it or
    some of its kinds), or None when none does."""
    defaults = {k: p.default for k, p in inspect.signature(check).parameters.items()
                if p.default is not inspect.Parameter.empty}
    current = _current(table, kw, defaults)
    free = [c for c in table if c not in fixed]
    # the options are tried on the sweep: a kind only the random search found cannot be
    # explained by one (the sweep passes under every option)
    kinds = {f.kind for f in error.failures if f.count}
    if not free or not kinds:
        return None
    tries = 0
    partial: tuple[int, dict[str, str], set[str]] | None = None
    for n in range(1, len(free) + 1):
        passed = []
        for subset in itertools.combinations(free, n):
            alts = [[o for o in table[c] if o != current[c]] for c in subset]
            for combo in itertools.product(*alts):
                if tries >= MAX_TRIES:
                    break
                tries += 1
                chosen = dict(zip(subset, combo))
                extra: dict[str, Any] = {}
                for c, o in chosen.items():
                    extra.update(table[c][o])
                left = _kinds(check, _ignoring(fn, chosen, table), args, {**kw, **extra})
                if left is None:
                    continue
                if not left:
                    passed.append(chosen)
                gone = kinds - left
                if gone and not (left - kinds) and (partial is None
                                                    or len(gone) > partial[0]):
                    partial = (len(gone), chosen, gone)
        if passed and len(kinds) == len(error.failures):
            best = passed[0]
            flags = " ".join(f"--variant {c}={o}" for c, o in best.items())
            named = ", ".join(f"{c}={o}" for c, o in best.items())
            return (f"every difference matches {named} (documented variant"
                    f"{'s' * (len(best) > 1)}, not a bug): add {flags}")
        if passed:               # the sweep's kinds, not those of the random search
            partial = (len(kinds), passed[0], kinds)
            break
    if partial is not None:
        _, chosen, gone = partial
        numbers = [str(i) for i, f in enumerate(error.failures, 1) if f.kind in gone]
        flags = " ".join(f"--variant {c}={o}" for c, o in chosen.items())
        named = ", ".join(f"{c}={o}" for c, o in chosen.items())
        return (f"kind{'s' * (len(numbers) > 1)} [{'], ['.join(numbers)}] match"
                f"{'es' * (len(numbers) == 1)} {named} (documented variant"
                f"{'s' * (len(chosen) > 1)}): {flags} accounts for "
                f"{'them' if len(numbers) > 1 else 'it'}; the other kinds match no "
                f"documented variant")
    return None


def conform(target: str, fn: Callable, *args: Any, variant: Mapping[str, str] | None = None,
            explain_failures: bool = True, **kwargs: Any) -> ConformanceReport:
    """Run the check of ``target`` (``oracle.conformance.CHECKS``) on ``fn`` with the
    documented options ``variant`` ({choice: option}) selected; a failure names the
    variants that account for it (``explain_failures``).

    Raises:
        ConformanceError: ``fn`` disagrees; the message ends with the explanation, also
            in the error's ``explanation`` attribute (None when no variant explains it).
        ValueError: an unknown target, choice or option, or an option that contradicts a
            keyword given.
    """
    if target not in CHECKS:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(CHECKS)}")
    check = CHECKS[target]
    fmt = args[0] if args else None
    selected = dict(variant or {})
    extra = variant_kwargs(target, fmt, selected)
    for k, v in extra.items():
        if k in kwargs and kwargs[k] is not None and kwargs[k] != v:
            raise ValueError(f"the variant sets {k}={v!r} but {k}={kwargs[k]!r} was given")
    kw = {**kwargs, **extra}
    try:
        return check(fn, *args, **kw)
    except ConformanceError as exc:
        note = None
        if explain_failures and exc.failures:
            table = choices_for(target, fmt)
            # a choice the caller fixed, by --variant or by the option itself
            # (--scale-rule ceil), is not varied
            fixed = set(selected) | {c for c, options in table.items()
                                     if any(kwargs.get(k) is not None
                                            for keys in options.values() for k in keys)}
            note = explain(check, fn, args, kw, table, fixed, exc)
        if note is None:
            exc.explanation = None
            raise
        err = ConformanceError(f"{exc}\n{note}", exc.input, exc.expected, exc.got,
                               exc.failures, exc.counts)
        err.explanation = note
        raise err from None
