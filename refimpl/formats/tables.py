"""Value tables: every code of a small format with its value and class."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator, Tuple

import numpy as np

from ..deprecation import REMOVED_IN, renamed_arguments
from .decode import decode_table
from .registry import FormatLike, get
from .types import Format


@dataclass(frozen=True)
class ValueTable:
    """Every code of ``fmt`` in order: ``codes`` (code dtype), ``values`` (the decoded
    values, float32 for the registered formats) and ``classes`` (one of
    ``refimpl.formats.CLASSES``: "zero", "subnormal", "normal", "inf", "nan")."""

    fmt: Format
    codes: np.ndarray
    values: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return int(self.codes.size)

    @property
    def format(self) -> Format:
        """Deprecated spelling of :attr:`fmt`."""
        warnings.warn(f"ValueTable.format is deprecated and will be removed in {REMOVED_IN}; "
                      "use ValueTable.fmt", DeprecationWarning, stacklevel=2)
        return self.fmt

    def rows(self) -> Iterator[Tuple[int, float, str]]:
        """(code, value, class) per code."""
        for c, v, k in zip(self.codes.tolist(), self.values.tolist(), self.classes.tolist()):
            yield c, v, k


# the keyword spelling ValueTable(format=...) of the constructor
ValueTable.__init__ = renamed_arguments({"format": "fmt"})(  # type: ignore[method-assign]
    ValueTable.__init__)


def value_table(fmt: FormatLike) -> ValueTable:
    """Every code of ``fmt`` (16 bits or fewer) with its value and class.

    A code's class comes from its fields, not its value: exponent field 0 with a
    non-zero mantissa is "subnormal" (formats with subnormals), the zero codes are "zero",
    E8M0's 0x00 is "normal" (2^-127).

    Raises:
        ValueError: the format is wider than 16 bits.
    """
    f = get(fmt)
    values = decode_table(f)
    codes = np.arange(1 << f.bits, dtype=np.int64)
    mag = codes & f.magnitude_mask
    e_field = mag >> f.man_bits
    classes = np.full(codes.shape, "normal", dtype="<U9")
    if f.subnormals:
        classes[(e_field == 0) & (mag != 0)] = "subnormal"
    classes[values == 0] = "zero"
    classes[np.isinf(values)] = "inf"
    classes[np.isnan(values)] = "nan"
    classes.setflags(write=False)
    return ValueTable(f, codes.astype(f.code_dtype), values, classes)
