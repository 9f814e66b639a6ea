"""A format name is resolved to its Format once, at the public boundary, and the object
travels inside (oracle.conformance, oracle.tolerance)."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import check_encoder
from oracle.tolerance import exact
from refimpl.formats import encode, get, registry


@pytest.fixture
def name_lookups(monkeypatch):
    """The number of times a format *name* is looked up in the registry."""
    calls = []
    key = registry._key

    def counting(name):
        calls.append(name)
        return key(name)
    monkeypatch.setattr(registry, "_key", counting)
    return calls


def test_check_encoder_resolves_the_name_once(name_lookups):
    f = get("e4m3")
    name_lookups.clear()
    check_encoder(lambda x: encode(x, f), "e4m3", max_examples=3)
    assert name_lookups == ["e4m3"]


def test_compare_of_codes_resolves_the_name_once(name_lookups):
    codes = np.arange(256, dtype=np.uint8)
    got = codes.copy()
    got[[3, 200]] ^= 1
    c = exact().compare(got, codes, fmt="e4m3")
    assert not c.ok and int(c.mismatch.sum()) == 2
    assert name_lookups == ["e4m3"]


def test_compare_of_codes_with_an_unknown_name_is_a_problem():
    codes = np.zeros(4, dtype=np.uint8)
    c = exact().compare(codes, codes, fmt="e9m9")
    assert not c.ok and "e9m9" in c.problem
