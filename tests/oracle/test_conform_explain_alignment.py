"""A failure is credited to a documented variant only when the variant explains it: the
options are tried on the deterministic sweep, so a kind that only the random search
found is never "explained"; and for ``causal_alignment`` an option is credited only to a
function that computes it whatever its keyword says (an SDPA under ``is_causal``), not
to one that follows the keyword and is wrong in a corner. The sweep places causal
problems with right key padding, where bottom_right aligns each batch entry to its
valid keys. The functions are the reference attention with the option forced, or with
bottom_right aligned to all Sk keys (written as top_left with the window (None, Sk - Sq),
the same visible keys)."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_attention
from oracle.conformance.choices import choices_for, conform, explain
from oracle.conformance.report import Failure
from refimpl.attention import attention


def top_left_always(q, k, v, causal=False, causal_alignment=None, **opts):
    return attention(q, k, v, causal=causal, causal_alignment="top_left", **opts)


def padding_ignored_in_alignment(q, k, v, causal=False, causal_alignment="bottom_right",
                                 window=None, key_padding_mask=None):
    sq, sk = q.shape[2], k.shape[2]
    if causal and causal_alignment == "bottom_right" and key_padding_mask is not None \
            and window is None and sk >= sq:
        return attention(q, k, v, causal_alignment="top_left", window=(None, sk - sq),
                         key_padding_mask=key_padding_mask)
    return attention(q, k, v, causal=causal, causal_alignment=causal_alignment,
                     window=window, key_padding_mask=key_padding_mask)


def test_the_reference_conforms_with_masks() -> None:
    conform("attention.attention", attention, dtype="fp32", masks=True, max_examples=0)


def test_a_function_computing_top_left_is_credited_with_it() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("attention.attention", top_left_always, dtype="fp32", masks=True,
                max_examples=0)
    assert err.value.explanation == (
        "every difference matches causal_alignment=top_left (documented variant, not a "
        "bug): add --variant causal_alignment=top_left")


def test_bottom_right_without_the_valid_key_count_fails_plainly() -> None:
    with pytest.raises(ConformanceError) as err:
        conform("attention.attention", padding_ignored_in_alignment, dtype="fp32",
                masks=True, max_examples=0)
    assert err.value.explanation is None
    kinds = [f.kind for f in err.value.failures]
    assert kinds and all("causal_alignment=bottom_right" in k and "key padding" in k
                         for k in kinds)


def test_a_kind_only_the_random_search_found_is_not_explained() -> None:
    table = choices_for("attention.attention")
    found = ConformanceError("x", failures=[Failure("out beyond the bound", "hypothesis",
                                                    "", count=0)])
    kw = {"dtype": "fp32", "masks": True, "max_examples": 0}
    # the sweep passes under every option: nothing may be credited for this kind
    assert explain(check_attention, attention, (), kw, table, set(), found) is None
