"""The parsed form of PTX (PTX ISA chapters 4, 5 and 11): operands, decoded
instructions, parameters, variables, kernels and modules, as :mod:`hardware.simt.parser`
builds them and every instruction compiler reads them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .types import PtxType


@dataclass(frozen=True)
class Reg:
    """A register (or special register such as ``%tid.x``); ``neg`` for ``!%p``."""
    name: str
    neg: bool = False


@dataclass(frozen=True)
class Imm:
    """An integer immediate (decimal, hex, octal or binary; may be negative)."""
    value: int


@dataclass(frozen=True)
class FImm:
    """A floating-point immediate given by its bits: ``0fXXXXXXXX`` (``width`` 32), or
    ``0dXXXXXXXXXXXXXXXX`` and decimal literals such as ``1.5`` or ``1e-3`` (``width``
    64: PTX ISA 4.5.2, a decimal literal is a double-precision value, rounded to
    nearest from its decimal text)."""
    bits: int
    width: int


@dataclass(frozen=True)
class Sym:
    """A symbol: a label, a ``.shared``/``.local`` variable or a ``.param`` name."""
    name: str


@dataclass(frozen=True)
class Addr:
    """``[base+offset]``: base is a Reg, a Sym or None (an absolute address). ``offset``
    is the literal taken modulo 2^64 as a signed 64-bit value (address arithmetic is
    64-bit: ``[%rd1+0xFFFFFFFFFFFFFFFF]`` is ``[%rd1+-1]``)."""
    base: Union[Reg, Sym, None]
    offset: int


@dataclass(frozen=True)
class TensorAddr:
    """``[map, {c0, c1, ...}]``: a tensor map's address (a register or a symbol) and the
    coordinates of a ``cp.async.bulk.tensor`` (PTX ISA 9.7.9.25.5.2)."""
    base: Union[Reg, Sym]
    coords: "Vec"


@dataclass(frozen=True)
class Vec:
    """``{a, b, ...}`` vector operand."""
    items: tuple


@dataclass(frozen=True)
class Pair:
    """``d|p``: two destinations (setp's complement predicate, shfl's valid predicate)."""
    first: "Operand"
    second: "Operand"


@dataclass(frozen=True)
class Sink:
    """``_``: a destination whose value is discarded."""


Operand = Union[Reg, Imm, FImm, Sym, Addr, Vec, Pair, Sink, TensorAddr]

#: special registers (PTX ISA chapter 10) that kernels may read
SPECIAL_REGISTERS = frozenset(
    [f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"]
    + ["%laneid", "%warpid", "%nwarpid", "%lanemask_eq", "%lanemask_lt", "%lanemask_le",
       "%lanemask_gt", "%lanemask_ge", "%warpsize", "%dynamic_smem_size",
       "%total_smem_size"]
)


@dataclass(frozen=True)
class Instruction:
    """One decoded instruction. ``opcode`` is the whole dotted name (``ld.global.v4.f32``),
    ``parts`` its dot-separated pieces, ``guard`` the predicate register and negation."""
    line: int
    text: str
    opcode: str
    parts: tuple[str, ...]
    operands: tuple
    guard: Reg | None = None

    def where(self) -> str:
        return f"line {self.line}: {self.text!r}"


@dataclass(frozen=True)
class Param:
    name: str
    type: PtxType
    nbytes: int
    align: int
    offset: int


@dataclass(frozen=True)
class Variable:
    """A ``.shared``, ``.local``, ``.global`` or ``.const`` variable: byte size (0 for an
    ``.extern`` dynamic shared array) and, for module-level ``.global``/``.const``
    variables, the initial bytes (zeros when not initialised)."""
    name: str
    space: str
    align: int
    nbytes: int
    extern: bool = False
    init: bytes | None = None


@dataclass
class KernelSource:
    name: str
    line: int
    params: list[Param] = field(default_factory=list)
    registers: dict[str, PtxType] = field(default_factory=dict)
    variables: list[Variable] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    directives: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: ``label: .branchtargets L1, L2, ...;`` lists (PTX ISA 11.5.1): the label's
    #: internal name -> the internal names of its targets, for ``brx.idx``
    branch_tables: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class ModuleSource:
    version: str = ""
    target: str = ""
    address_size: int = 64
    variables: list[Variable] = field(default_factory=list)
    kernels: dict[str, KernelSource] = field(default_factory=dict)
