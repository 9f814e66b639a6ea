"""The deprecation helpers: old spellings work with a warning, both spellings refuse."""
from __future__ import annotations

import warnings

import pytest

from refimpl.deprecation import REMOVED_IN, deprecated_names, renamed_arguments


@renamed_arguments({"elem": "fmt"})
def _quantize(x, fmt="e4m3", *, scale=1):
    return (x, fmt, scale)


def test_new_spelling_has_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _quantize(1, fmt="e2m1") == (1, "e2m1", 1)
        assert _quantize(1, "e2m1") == (1, "e2m1", 1)


def test_old_spelling_maps_with_a_warning_naming_both():
    with pytest.warns(DeprecationWarning, match=r"_quantize\(elem=\.\.\.\).*"
                      + REMOVED_IN.replace(".", r"\.") + r".*use fmt="):
        assert _quantize(1, elem="e5m2") == (1, "e5m2", 1)


def test_both_spellings_refused():
    with pytest.raises(TypeError, match="both elem=.*and fmt="):
        _quantize(1, elem="e5m2", fmt="e4m3")


def test_module_names():
    getattr_ = deprecated_names("pkg.mod", {"Old": ("New", 42)})
    with pytest.warns(DeprecationWarning, match=r"pkg\.mod\.Old .*use pkg\.mod\.New"):
        assert getattr_("Old") == 42
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        getattr_("Missing")
