"""The descriptor of a binary floating-point format.

A format is fully described by its sign, exponent and mantissa widths, its exponent bias
and how it spends its special codes (IEEE 754-2019 section 3.4 for the IEEE layout; OCP
OFP8 rev 1.0 section 5 for the "fn" layout; the "fnuz" layout of AMD MI300 uses the
negative-zero code as its only NaN). Everything else (largest value, smallest normal,
code widths, the NaN code) is derived from those fields, so two tables can never drift.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..validation import check_bool, check_int

#: How a format spends its special codes.
#: - ``"ieee"``: the all-ones exponent holds Inf (mantissa 0) and NaNs (mantissa != 0).
#: - ``"fn"``: no Inf; the single all-ones magnitude (per sign) is NaN (OCP E4M3, E8M0).
#: - ``"fnuz"``: no Inf, no negative zero; the code 1000...0 is the only NaN.
#: - ``"none"``: every code is a finite number (MX FP6/FP4 elements).
NAN_KINDS = ("ieee", "fn", "fnuz", "none")

#: Value classes reported by :func:`refimpl.formats.value_table`.
CLASSES = ("zero", "subnormal", "normal", "inf", "nan")


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: ``(-1)^s * 2^(E - bias) * 1.M`` for normal codes.

    Special-value policy first: ``nan`` names how NaN is encoded (``NAN_KINDS``);
    ``has_inf`` is true exactly for the ``"ieee"`` layout. Signed formats keep
    subnormals (exponent field 0: ``2^(1 - bias) * 0.M``) and, unless ``nan == "fnuz"``,
    a negative zero. A format with ``subnormals=False`` (only meaningful for the unsigned
    scale format E8M0) treats exponent field 0 as a normal exponent and has no zero.

    Args:
        name: canonical lowercase name (``"e4m3"``); user formats may choose any.
        exp_bits: exponent field width, >= 1.
        man_bits: stored mantissa (fraction) width, >= 0.
        bias: exponent bias; ``None`` gives the IEEE bias ``2^(exp_bits-1) - 1``.
        signed: whether a sign bit exists (E8M0 is unsigned).
        has_inf: whether +-Inf exist (requires ``nan == "ieee"``).
        nan: the NaN layout, one of ``NAN_KINDS``.
        subnormals: whether exponent field 0 encodes subnormals (and zero).
        storage_bits: the width the code is stored in, when wider than ``bits``
            (TF32: 19 significant bits held in 32); informational only.

    Integer fields take ints or NumPy integers (stored as ints); flags take bools or
    ``numpy.bool_`` (stored as bools).

    Raises:
        TypeError: a width, bias or flag of the wrong type (a float, a string).
        ValueError: inconsistent fields, more than 32 bits, or values that float64
            cannot hold exactly (decoding must be exact).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int | None = None
    signed: bool = True
    has_inf: bool = True
    nan: str = "ieee"
    subnormals: bool = True
    storage_bits: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Format.name must be a non-empty string")
        # NumPy integers and bools are taken as the Python values they equal, so that
        # Format("x", np.int64(4), 3) == Format("x", 4, 3) (same hash, same codes)
        for attr in ("exp_bits", "man_bits", "bias", "storage_bits"):
            v = getattr(self, attr)
            if v is not None or attr in ("exp_bits", "man_bits"):
                object.__setattr__(self, attr, check_int(f"Format.{attr}", v))
        for attr in ("signed", "has_inf", "subnormals"):
            object.__setattr__(self, attr, check_bool(f"Format.{attr}", getattr(self, attr)))
        if self.exp_bits < 1:
            raise ValueError(f"Format.exp_bits must be >= 1, got {self.exp_bits}")
        if self.exp_bits > 32 or self.man_bits > 32:
            # before any 2^exp_bits is formed
            raise ValueError(f"formats are limited to 32 bits, got exp_bits={self.exp_bits}, "
                             f"man_bits={self.man_bits}")
        if self.bias is None:
            object.__setattr__(self, "bias", (1 << (self.exp_bits - 1)) - 1)
        if self.man_bits < 0:
            raise ValueError(f"Format.man_bits must be >= 0, got {self.man_bits}")
        if self.nan not in NAN_KINDS:
            raise ValueError(f"Format.nan must be one of {NAN_KINDS}, got {self.nan!r}")
        if self.has_inf != (self.nan == "ieee"):
            raise ValueError(
                "Format.has_inf must be True exactly when nan == 'ieee' "
                f"(got has_inf={self.has_inf}, nan={self.nan!r})"
            )
        if self.nan == "ieee" and self.man_bits == 0:
            raise ValueError("an 'ieee' NaN layout needs at least one mantissa bit")
        if self.nan == "fnuz" and not self.signed:
            raise ValueError("the 'fnuz' NaN layout needs a sign bit")
        if self.signed and not self.subnormals:
            raise ValueError("signed formats must keep subnormals (and zero)")
        if self.bits > 32:
            raise ValueError(f"formats are limited to 32 bits, got {self.bits}")
        if self.bits < 2:
            raise ValueError("a format needs at least 2 bits")
        if self.emax > 1023 or self.emin - self.man_bits < -1074 or self.man_bits > 52:
            raise ValueError(
                f"format {self.name!r} has values float64 cannot hold exactly "
                f"(emax={self.emax}, smallest exponent {self.emin - self.man_bits}, "
                f"man_bits={self.man_bits})"
            )
        if self.max_code_magnitude < 1:
            raise ValueError(f"format {self.name!r} has no finite non-zero value")

    # ----- widths and codes -------------------------------------------------
    @property
    def bits(self) -> int:
        """Significant code width: sign + exponent + mantissa."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def code_dtype(self) -> type[np.unsignedinteger]:
        """uint8 for <= 8 bits, uint16 for <= 16, uint32 above."""
        return np.uint8 if self.bits <= 8 else np.uint16 if self.bits <= 16 else np.uint32

    @property
    def value_dtype(self) -> type[np.floating]:
        """float32 when every value is exactly a float32, else float64."""
        fits = self.man_bits <= 23 and self.emax <= 127 and self.emin - self.man_bits >= -149
        return np.float32 if fits else np.float64

    @property
    def sign_mask(self) -> int:
        return (1 << (self.bits - 1)) if self.signed else 0

    @property
    def is_binary32_top_half(self) -> bool:
        """Whether every code is the top 16 bits of the binary32 of its value: bfloat16's
        layout (sign, 8 exponent bits with binary32's bias, 7 fraction bits, IEEE Inf and
        NaN, subnormals), which the codec converts by bit arithmetic."""
        return (self.bits == 16 and self.signed and self.exp_bits == 8
                and self.man_bits == 7 and self.bias == 127 and self.nan == "ieee"
                and self.subnormals)

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.exp_bits + self.man_bits)) - 1

    @property
    def max_code_magnitude(self) -> int:
        """Magnitude bits of the largest finite code."""
        all_ones = self.magnitude_mask
        if self.nan == "ieee":
            return all_ones - (1 << self.man_bits)  # top exponent reserved
        if self.nan == "fn":
            return all_ones - 1  # only the all-ones magnitude is NaN
        return all_ones

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.subnormals and self.nan != "fnuz"

    @property
    def has_zero(self) -> bool:
        return self.subnormals

    def nan_code(self, negative: bool = False) -> int:
        """The NaN code this codec emits: the quiet NaN for "ieee", the all-ones
        magnitude for "fn" (sign kept, as OCP E4M3 has 0x7F and 0xFF), 100...0 for "fnuz".

        Raises:
            ValueError: the format has no NaN.
        """
        if self.nan == "none":
            raise ValueError(f"format {self.name!r} has no NaN")
        if self.nan == "fnuz":
            return self.sign_mask
        sign = self.sign_mask if negative else 0
        if self.nan == "fn":
            return sign | self.magnitude_mask
        quiet = 1 << (self.man_bits - 1)
        return sign | (((1 << self.exp_bits) - 1) << self.man_bits) | quiet

    def inf_code(self, negative: bool = False) -> int:
        """The code of +-Inf.

        Raises:
            ValueError: the format has no Inf.
        """
        if not self.has_inf:
            raise ValueError(f"format {self.name!r} has no Inf")
        return (self.sign_mask if negative else 0) | (
            ((1 << self.exp_bits) - 1) << self.man_bits
        )

    # ----- exponent range and values ----------------------------------------
    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value."""
        return (1 - self.bias) if self.subnormals else -self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite value."""
        top_field = self.max_code_magnitude >> self.man_bits
        return top_field - self.bias

    @property
    def max_exact(self) -> Fraction:
        """Largest finite value, exactly."""
        return self.code_magnitude_value(self.max_code_magnitude)

    @property
    def max(self) -> float:
        """Largest finite value."""
        return float(self.max_exact)

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value, ``2^emin``."""
        return float(Fraction(2) ** self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value (``2^(emin - man_bits)``; ``min_normal`` without
        subnormals)."""
        if not self.subnormals:
            return self.min_normal
        return float(Fraction(2) ** (self.emin - self.man_bits))

    @property
    def eps(self) -> float:
        """Distance from 1.0 to the next larger value, ``2^-man_bits``."""
        return float(Fraction(2) ** -self.man_bits)

    def code_magnitude_value(self, magnitude: int) -> Fraction:
        """Exact value of a finite code's magnitude bits (the format's defining formula)."""
        e_field = magnitude >> self.man_bits
        m_field = magnitude & ((1 << self.man_bits) - 1)
        if self.subnormals and e_field == 0:
            return Fraction(m_field, 1 << self.man_bits) * Fraction(2) ** self.emin
        return (1 + Fraction(m_field, 1 << self.man_bits)) * Fraction(2) ** (e_field - self.bias)

    def __str__(self) -> str:
        return self.name
