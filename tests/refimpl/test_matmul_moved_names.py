"""Names that moved out of refimpl.matmul.exact, .rounding and .gemm: the old import
paths still work for one release, with a DeprecationWarning naming the new home."""
from __future__ import annotations

import importlib
import warnings
from fractions import Fraction

import pytest

from refimpl import eft
from refimpl.deprecation import deprecated_names
from refimpl.matmul import accumulation, screening

MOVED = [
    ("refimpl.matmul.exact", name, screening, name)
    for name in ("ExactStats", "exact_product_fp32", "exact_row_bounds", "exact_col_norms",
                 "screen_width", "screen_fp32", "resolve_fp32")
] + [
    ("refimpl.matmul.rounding", "add_round_to_odd", eft, "add_round_to_odd"),
    ("refimpl.matmul.gemm", "NAMED", accumulation, "NAMED"),
]


@pytest.mark.parametrize("old_module, name, new_module, new_name", MOVED)
def test_old_path_warns_and_gives_the_same_object(old_module, name, new_module, new_name):
    mod = importlib.import_module(old_module)
    where = f"{new_module.__name__}.{new_name}".replace(".", r"\.")
    with pytest.warns(DeprecationWarning, match=rf"{old_module}\.{name} .*use {where}"):
        old = getattr(mod, name)
    assert old is getattr(new_module, new_name)


def test_old_round_fraction_rounds_like_before():
    from refimpl.matmul.rounding import FP32, Target

    with pytest.warns(DeprecationWarning, match=r"refimpl\.rational\.round_rational"):
        from refimpl.matmul.exact import round_fraction
    # RN to FP32 without an exponent limit (hand-derived): a tie to even, a subnormal,
    # and the overflow threshold, which rounds to 2^128 (the caller's cast gives Inf)
    assert round_fraction(1 + Fraction(1, 2**24)) == 1.0
    assert round_fraction(-Fraction(3, 2**151)) == -(2.0**-149)
    assert round_fraction(Fraction(2**128 - 2**103)) == 2.0**128
    assert round_fraction(Fraction(5, 4), Target("e2m1", 2, 0)) == 1.0


def test_current_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from refimpl.matmul import ExactStats, exact_matmul64, resolve_accumulation  # noqa: F401
        from refimpl.matmul.exact import ExactAccumulation, exact_dot_reference  # noqa: F401
        from refimpl.matmul.gemm import matmul  # noqa: F401


def test_a_dotted_new_name_is_the_full_path():
    getattr_ = deprecated_names("pkg.old", {"f": ("pkg.new.g", 1), "h": ("k", 2)})
    with pytest.warns(DeprecationWarning, match=r"pkg\.old\.f .*use pkg\.new\.g$"):
        assert getattr_("f") == 1
    with pytest.warns(DeprecationWarning, match=r"pkg\.old\.h .*use pkg\.old\.k$"):
        assert getattr_("h") == 2
