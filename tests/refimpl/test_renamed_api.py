"""Old spellings of renamed refimpl arguments and names: each still works for one
release, warns with a DeprecationWarning naming the new spelling, and gives the same
bytes as the new spelling (which itself runs without any warning)."""
from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest

from api_warnings import old, quiet
import refimpl.kvcache as K
import refimpl.matmul as M
import refimpl.scaling as S
from refimpl import formats as F
from refimpl.scaling import error as scaling_error
from refimpl.scaling import mx_reference

#: the module (the package's ``simulate`` is the function of that name)
kv_simulate = importlib.import_module("refimpl.kvcache.simulate")

X = np.linspace(-7.0, 7.0, 64, dtype=np.float32).reshape(2, 32)


def same_mx(a, b):
    assert a.fmt == b.fmt and a.block_size == b.block_size and a.axis == b.axis
    assert a.codes.tobytes() == b.codes.tobytes() and a.scales.tobytes() == b.scales.tobytes()


def test_mx_quantize_elem():
    same_mx(old(r"mx_quantize\(elem=.*use fmt=", S.mx_quantize, X, elem="e2m1"),
            quiet(S.mx_quantize, X, fmt="e2m1"))


def test_mx_quantize_both_spellings_refused():
    with pytest.raises(TypeError, match="both elem=.*and fmt="):
        S.mx_quantize(X, elem="e2m1", fmt="e4m3")


def test_element_format_and_scale_exponent_elem():
    assert old("elem", S.element_format, elem="int8") is quiet(S.element_format, fmt="int8")
    amax = np.float32([0.0, 1.0, 448.0, 960.0, np.inf, np.nan])
    c_old, e_old = old("elem", S.mx_scale_exponent, amax, elem="e4m3")
    c_new, e_new = quiet(S.mx_scale_exponent, amax, fmt="e4m3")
    assert c_old.tobytes() == c_new.tobytes() and e_old.tobytes() == e_new.tobytes()


def test_mxarray_elem_keyword_attribute_and_from_packed():
    q = quiet(S.mx_quantize, X, fmt="e2m1")
    same_mx(old(r"elem=", S.MXArray, q.codes, q.scales, elem="e2m1"),
            quiet(S.MXArray, q.codes, q.scales, fmt="e2m1"))
    assert old(r"MXArray\.elem.*MXArray\.fmt", getattr, q, "elem") is q.fmt
    packed = q.packed()
    same_mx(old("elem", S.MXArray.from_packed, packed, q.scales, elem="e2m1", shape=X.shape),
            quiet(S.MXArray.from_packed, packed, q.scales, fmt="e2m1", shape=X.shape))


def test_mx_reference_elem():
    amax = Fraction(957)
    assert old("elem", mx_reference.scale_exponent_exact, amax, elem="e4m3") == \
        quiet(mx_reference.scale_exponent_exact, amax, fmt="e4m3")
    block = [float(v) for v in X[0]]
    assert old("elem", mx_reference.quantize_block, block, elem="e3m2") == \
        quiet(mx_reference.quantize_block, block, fmt="e3m2")


def test_tiled_matmul_tile():
    a = X.reshape(8, 8)[:4, :7]
    b = X.reshape(8, 8)[1:, 3:]
    c_old, st_old = old(r"tiled_matmul\(tile=.*use block=", M.tiled_matmul, a, b,
                        tile=(3, 2, 5))
    c_new, st_new = quiet(M.tiled_matmul, a, b, block=(3, 2, 5))
    assert c_old.tobytes() == c_new.tobytes() and st_old == st_new
    assert st_new.block == (3, 2, 5)
    assert old(r"TiledStats\.tile.*TiledStats\.block", getattr, st_new, "tile") == (3, 2, 5)


def test_renamed_classes():
    assert old(r"refimpl\.scaling\.QuantizationError.*QuantizationMetrics",
               getattr, S, "QuantizationError") is S.QuantizationMetrics
    assert old("QuantizationMetrics", getattr, scaling_error, "QuantizationError") \
        is S.QuantizationMetrics
    assert old(r"refimpl\.matmul\.Exact .*ExactAccumulation", getattr, M, "Exact") \
        is M.ExactAccumulation
    x = np.float32([[1.0, 2.0 ** -24, 2.0 ** -24]])
    y = np.float32([[1.0], [1.0], [1.0]])
    assert quiet(M.matmul, x, y, accumulate=M.ExactAccumulation()).tobytes() == \
        quiet(M.matmul, x, y, accumulate="exact").tobytes()
    assert repr(M.ExactAccumulation()) == "ExactAccumulation()"
    assert quiet(S.quantization_error, X, X)._fields == ("rmse", "max_abs", "sqnr_db")


def test_value_table_format():
    t = quiet(F.value_table, "e2m1")
    assert t.fmt is F.E2M1
    assert old(r"ValueTable\.format.*ValueTable\.fmt", getattr, t, "format") is F.E2M1
    t2 = old("format=", F.ValueTable, format=t.fmt, codes=t.codes, values=t.values,
             classes=t.classes)
    assert t2.fmt is t.fmt and t2.codes.tobytes() == t.codes.tobytes()


def test_seed_example_trace():
    new = quiet(K.paged_example_trace)
    assert [(r.prompt_len, r.output_len) for r in new] == [(128, 0), (1024, 0), (300, 0)]
    for mod in (K, kv_simulate):
        fn = old("paged_example_trace", getattr, mod, "seed_example_trace")
        assert fn() == new
