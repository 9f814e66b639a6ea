"""Calls that check warnings, shared by the tests of renamed arguments and names (the
tests directory is on ``sys.path``: ``from api_warnings import old, quiet``)."""
from __future__ import annotations

import warnings

import pytest


def quiet(fn, *args, **kwargs):
    """Call with warnings as errors: the new spelling must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def old(match, fn, *args, **kwargs):
    """Call an old spelling: it must warn with a DeprecationWarning matching ``match``."""
    with pytest.warns(DeprecationWarning, match=match):
        return fn(*args, **kwargs)
