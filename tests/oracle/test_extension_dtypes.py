"""Arrays of ml_dtypes' types are read as the codes they hold where codes are expected,
and refused, naming both formats, when they hold another format. ml_dtypes is never a
dependency: the tests that need it are skipped without it."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.conformance import ConformanceError, check_encoder, check_mx_quantize
from oracle.extension_dtypes import as_codes_of, extension_format
from refimpl import formats as F


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8, np.int8, "V1", "V2",
                                   np.dtype([("a", np.uint8)])])
def test_numpy_dtypes_are_not_extension_dtypes(dtype) -> None:
    assert extension_format(dtype) is None
    a = np.zeros(3, dtype)
    assert as_codes_of(a, "e4m3") is not None


try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed")

NAMES = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float8_e4m3fnuz": "e4m3fnuz",
         "float8_e5m2fnuz": "e5m2fnuz", "float8_e8m0fnu": "e8m0", "float4_e2m1fn": "e2m1",
         "float6_e2m3fn": "e2m3", "float6_e3m2fn": "e3m2", "bfloat16": "bf16"}


@needs_ml_dtypes
@pytest.mark.parametrize("name, fmt", NAMES.items())
def test_every_code_reads_back_as_itself(name: str, fmt: str) -> None:
    f = F.get(fmt)
    codes = np.arange(1 << f.bits, dtype=np.int64).astype(f.code_dtype)
    arr = codes.view(getattr(ml_dtypes, name)) if f.bits in (8, 16) else \
        F.decode(codes, f).astype(getattr(ml_dtypes, name))
    assert extension_format(arr.dtype) == fmt
    got = as_codes_of(arr, fmt)
    assert got.dtype.kind == "u"
    if f.bits in (8, 16):
        np.testing.assert_array_equal(got, codes)
    else:   # FP4/FP6: the value survives the round trip through ml_dtypes' own cast
        np.testing.assert_array_equal(F.decode(got, f), F.decode(codes, f))


@needs_ml_dtypes
def test_another_format_is_refused_naming_both() -> None:
    a = np.zeros(2, ml_dtypes.float8_e5m2)
    with pytest.raises(ValueError, match="float8_e5m2 .e5m2 values.; expected e4m3 codes"):
        as_codes_of(a, "e4m3")
    b = np.zeros(2, ml_dtypes.int4)
    with pytest.raises(ValueError, match="a format the oracle does not know"):
        as_codes_of(b, "e2m1")


@needs_ml_dtypes
def test_conform_reads_an_ml_dtypes_encoder_as_codes() -> None:
    report = check_encoder(lambda x: x.astype(ml_dtypes.float8_e4m3fn), "e4m3",
                           max_examples=10)
    assert report.compared["codes"] > 0
    with pytest.raises(ConformanceError, match="float8_e5m2"):
        check_encoder(lambda x: x.astype(ml_dtypes.float8_e5m2), "e4m3", max_examples=0)


@needs_ml_dtypes
def test_conform_reads_ml_dtypes_mx_scales() -> None:
    from refimpl.scaling import mx_quantize

    def mx(x):
        q = mx_quantize(x, "e4m3")
        return (q.codes.view(ml_dtypes.float8_e4m3fn),
                q.scales.view(ml_dtypes.float8_e8m0fnu))

    assert check_mx_quantize(mx, "e4m3", max_examples=0).compared["scales"] > 0
