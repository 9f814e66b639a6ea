"""PTX fundamental types (PTX ISA section 5.2.1, "Fundamental Types").

A register holds raw bits: every value travels as an unsigned integer array of the
register's width and is *viewed* as the instruction's type, so that ``mov.b32`` between a
float and an integer register, or an ``add.s32`` on a ``.b32`` register, is exact bit
reinterpretation as in the PTX ISA.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["PtxType", "TYPES", "ptx_type", "UINT_OF_WIDTH"]


@dataclass(frozen=True)
class PtxType:
    """One PTX type: ``kind`` is "s", "u", "b", "f" or "pred"; ``bits`` its width."""

    name: str
    kind: str
    bits: int

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def signed(self) -> bool:
        return self.kind == "s"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @cached_property
    def dtype(self) -> np.dtype:
        """NumPy dtype of a value of this type (bits for .b and low-precision floats)."""
        if self.kind == "pred":
            return np.dtype(np.bool_)
        if self.kind == "s":
            return np.dtype(f"int{self.bits}")
        if self.kind == "f" and self.bits in (32, 64):
            return np.dtype(f"float{self.bits}")
        return np.dtype(f"uint{self.bits}")

    @cached_property
    def storage(self) -> np.dtype:
        """NumPy dtype of a register of this type: unsigned bits of the same width."""
        if self.kind == "pred":
            return np.dtype(np.bool_)
        return np.dtype(f"uint{self.bits}")


UINT_OF_WIDTH = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16),
                 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}

TYPES: dict[str, PtxType] = {}
for _k in ("s", "u", "b"):
    for _b in (8, 16, 32, 64):
        TYPES[f"{_k}{_b}"] = PtxType(f"{_k}{_b}", _k, _b)
for _b in (16, 32, 64):
    TYPES[f"f{_b}"] = PtxType(f"f{_b}", "f", _b)
TYPES["bf16"] = PtxType("bf16", "f", 16)
TYPES["f16x2"] = PtxType("f16x2", "b", 32)   # packed pairs: moved as bits only
TYPES["bf16x2"] = PtxType("bf16x2", "b", 32)
TYPES["pred"] = PtxType("pred", "pred", 1)


def ptx_type(name: str) -> PtxType | None:
    """The type named ``name`` (without the dot), or None if it is not a type."""
    return TYPES.get(name)
