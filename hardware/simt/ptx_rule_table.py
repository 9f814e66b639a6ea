"""The tables of :mod:`hardware.simt.ptx_rules`: operand types as the rules see them
(:class:`OperandType`) and, per opcode, the forms PTX ISA 9.0 chapter 9.7 lists
(:data:`RULES`: the types an instruction takes, the modifiers it requires or refuses,
its operand slots and immediate ranges)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class OperandType:
    """A type as the rules see it: ``kind`` is "b", "s", "u", "f" or "pred"."""

    name: str
    kind: str
    bits: int


def _types() -> dict[str, OperandType]:
    out = {f"{k}{b}": OperandType(f"{k}{b}", k, b) for k in "bsu" for b in (8, 16, 32, 64)}
    out["b128"] = OperandType("b128", "b", 128)
    for name, bits in (("f16", 16), ("bf16", 16), ("f32", 32), ("f64", 64), ("f16x2", 32),
                       ("bf16x2", 32), ("tf32", 32)):
        out[name] = OperandType(name, "f", bits)
    out["pred"] = OperandType("pred", "pred", 1)
    return out


#: instruction types (PTX ISA 5.2.1 "Fundamental Types" and the packed types of 5.2.5)
TYPES: dict[str, OperandType] = _types()
#: the packed low-precision conversion types (9.7.9.21 cvt): held in .b16 (.b8 for
#: e2m1x2) registers of exactly that size
PACKED_SMALL = {"e4m3x2": 16, "e5m2x2": 16, "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16,
                "e2m1x2": 8}
#: what a register declared with a packed type is, for the rules (it holds bits)
_REGISTER_KIND = {"f16x2": "b", "bf16x2": "b"}

_FLOAT_ROUND = frozenset({"rn", "rz", "rm", "rp"})
_INT_ROUND = frozenset({"rni", "rzi", "rmi", "rpi"})
_INTS16 = ("s16", "u16", "s32", "u32", "s64", "u64")
_SINTS16 = ("s16", "s32", "s64")
_HALF = ("f16", "f16x2", "bf16", "bf16x2")


# ------------------------------------------------------------------------------- rules

@dataclass(frozen=True)
class Rule:
    """One form of an instruction (PTX ISA 9.7, the instruction's "Syntax" block).

    ``types``: the instruction types the form takes (one type suffix). ``operands``: a
    slot per operand, each a type expression: ``T`` the instruction type, ``W`` the
    integer type of twice its width (``.wide`` results), ``R`` the instruction type with
    ld/st/cvt's relaxed rules, ``*`` unchecked, or a fixed type name (``u32``, ``b32``,
    ``pred``); ``T|pred`` admits ``d|p`` pairs. ``need``: groups of modifiers of which
    the instruction must carry one.
    ``forbid``: modifiers this form must not carry. ``imm_range``: operand index ->
    (low, high) bounds of an immediate there. ``section``: the PTX ISA section."""

    types: tuple[str, ...]
    operands: tuple[str, ...]
    section: str
    need: tuple[frozenset, ...] = ()
    forbid: frozenset = frozenset()
    imm_range: tuple[tuple[int, int, int], ...] = ()
    when: frozenset = frozenset()   # the form applies when one of these modifiers is present


def _r(types: Iterable[str], operands: str, section: str, need: Iterable[Iterable[str]] = (),
       forbid: Iterable[str] = (), imm_range: Iterable[tuple[int, int, int]] = (),
       when: Iterable[str] = ()) -> Rule:
    return Rule(tuple(types), tuple(operands.split()), section,
                tuple(frozenset(g) for g in need), frozenset(forbid), tuple(imm_range),
                frozenset(when))


_ARITH_INT = _INTS16
_FLOAT = ("f32", "f64")
_CMP_INT = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
_CMP_UNSIGNED = frozenset({"lo", "ls", "hi", "hs"})
_CMP_FLOAT_ONLY = frozenset({"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"})
_BOOL = frozenset({"and", "or", "xor"})
#: modifiers a floating-point arithmetic form must not carry (carry, .lo/.hi/.wide, the
#: integer roundings of cvt)
_INT_ONLY = frozenset({"cc", "lo", "hi", "wide", "rni", "rzi", "rmi", "rpi"})

#: the forms of each opcode, tried in order: the first whose ``when`` matches (an
#: empty ``when`` always does) and whose ``types`` hold the instruction type applies
RULES: dict[str, tuple[Rule, ...]] = {
    "add": (_r(_ARITH_INT, "T T T", "9.7.1"),
            _r(_FLOAT, "T T T", "9.7.3", forbid=_INT_ONLY),
            _r(_HALF, "T T T", "9.7.4", forbid=_INT_ONLY)),
    "sub": (_r(_ARITH_INT, "T T T", "9.7.1"),
            _r(_FLOAT, "T T T", "9.7.3", forbid=_INT_ONLY),
            _r(_HALF, "T T T", "9.7.4", forbid=_INT_ONLY)),
    "addc": (_r(("s32", "u32", "s64", "u64"), "T T T", "9.7.2"),),
    "subc": (_r(("s32", "u32", "s64", "u64"), "T T T", "9.7.2"),),
    "mul": (_r(("s16", "u16", "s32", "u32"), "W T T", "9.7.1", when={"wide"}),
            _r(_ARITH_INT, "T T T", "9.7.1", need=[{"lo", "hi"}]),
            _r(_FLOAT, "T T T", "9.7.3", forbid=_INT_ONLY),
            _r(_HALF, "T T T", "9.7.4", forbid=_INT_ONLY)),
    "mad": (_r(("s16", "u16", "s32", "u32"), "W T T W", "9.7.1", when={"wide"}),
            _r(_ARITH_INT, "T T T T", "9.7.1", need=[{"lo", "hi"}]),
            _r(_FLOAT, "T T T T", "9.7.3", need=[_FLOAT_ROUND], forbid=_INT_ONLY)),
    "madc": (_r(("s32", "u32", "s64", "u64"), "T T T T", "9.7.2", need=[{"lo", "hi"}]),),
    "fma": (_r(_FLOAT, "T T T T", "9.7.3", need=[_FLOAT_ROUND], forbid=_INT_ONLY),
            _r(_HALF, "T T T T", "9.7.4", need=[{"rn"}], forbid=_INT_ONLY)),
    "div": (_r(_ARITH_INT, "T T T", "9.7.1"),
            _r(("f32",), "T T T", "9.7.3", need=[_FLOAT_ROUND | {"approx", "full"}]),
            _r(("f64",), "T T T", "9.7.3", need=[_FLOAT_ROUND])),
    "rem": (_r(_ARITH_INT, "T T T", "9.7.1"),),
    "abs": (_r(_SINTS16, "T T", "9.7.1"),
            _r(_FLOAT, "T T", "9.7.3"),
            _r(_HALF, "T T", "9.7.4")),
    "neg": (_r(_SINTS16, "T T", "9.7.1"),
            _r(_FLOAT, "T T", "9.7.3"),
            _r(_HALF, "T T", "9.7.4")),
    "min": (_r(_ARITH_INT, "T T T", "9.7.1"),
            _r(_FLOAT, "T T T", "9.7.3"),
            _r(("f32",), "T T T T", "9.7.3"),  # three inputs (sm_100, PTX ISA 8.8)
            _r(_HALF, "T T T", "9.7.4")),
    "max": (_r(_ARITH_INT, "T T T", "9.7.1"),
            _r(_FLOAT, "T T T", "9.7.3"),
            _r(("f32",), "T T T T", "9.7.3"),  # three inputs (sm_100, PTX ISA 8.8)
            _r(_HALF, "T T T", "9.7.4")),
    "popc": (_r(("b32", "b64"), "u32 T", "9.7.1"),),
    "clz": (_r(("b32", "b64"), "u32 T", "9.7.1"),),
    "bfind": (_r(("u32", "u64", "s32", "s64"), "u32 T", "9.7.1"),),
    "brev": (_r(("b32", "b64"), "T T", "9.7.1"),),
    "bfe": (_r(("u32", "u64", "s32", "s64"), "T T u32 u32", "9.7.1",
               imm_range=[(2, 0, 255), (3, 0, 255)]),),
    "bfi": (_r(("b32", "b64"), "T T T u32 u32", "9.7.1",
               imm_range=[(3, 0, 255), (4, 0, 255)]),),
    "sad": (_r(_ARITH_INT, "T T T T", "9.7.1"),),
    "and": (_r(("pred", "b16", "b32", "b64"), "T T T", "9.7.8"),),
    "or": (_r(("pred", "b16", "b32", "b64"), "T T T", "9.7.8"),),
    "xor": (_r(("pred", "b16", "b32", "b64"), "T T T", "9.7.8"),),
    "not": (_r(("pred", "b16", "b32", "b64"), "T T", "9.7.8"),),
    "cnot": (_r(("b16", "b32", "b64"), "T T", "9.7.8"),),
    "lop3": (_r(("b32",), "T T T T *", "9.7.8"),),
    "shf": (_r(("b32",), "T T T u32", "9.7.8", need=[{"l", "r"}, {"wrap", "clamp"}]),),
    "shl": (_r(("b16", "b32", "b64"), "T T u32", "9.7.8"),),
    "shr": (_r(("b16", "b32", "b64") + _INTS16, "T T u32", "9.7.8"),),
    "prmt": (_r(("b32",), "T T T b32", "9.7.9"),),
    "copysign": (_r(_FLOAT, "T T T", "9.7.3"),),
    "testp": (_r(_FLOAT, "pred T", "9.7.3"),),
    "sqrt": (_r(("f32",), "T T", "9.7.3", need=[_FLOAT_ROUND | {"approx"}]),
             _r(("f64",), "T T", "9.7.3", need=[_FLOAT_ROUND], forbid={"approx"})),
    "rcp": (_r(("f64",), "T T", "9.7.3", need=[{"ftz"}], when={"approx"}),
            _r(("f32",), "T T", "9.7.3", need=[_FLOAT_ROUND | {"approx"}]),
            _r(("f64",), "T T", "9.7.3", need=[_FLOAT_ROUND | {"approx"}])),
    "rsqrt": (_r(_FLOAT, "T T", "9.7.3", need=[{"approx"}]),),
    "sin": (_r(("f32",), "T T", "9.7.3", need=[{"approx"}]),),
    "cos": (_r(("f32",), "T T", "9.7.3", need=[{"approx"}]),),
    "lg2": (_r(("f32",), "T T", "9.7.3", need=[{"approx"}]),),
    "ex2": (_r(("f32",), "T T", "9.7.3", need=[{"approx"}], forbid={"sat"}),
            _r(_HALF, "T T", "9.7.4", need=[{"approx"}])),
    "tanh": (_r(("f32",) + _HALF, "T T", "9.7.3", need=[{"approx"}]),),
    "selp": (_r(("b16", "b32", "b64") + _INTS16 + _FLOAT, "T T T pred", "9.7.7"),),
    "mov": (_r(("pred", "b16", "b32", "b64") + _INTS16 + _FLOAT, "T T", "9.7.9"),),
    "cvta": (_r(("u64",), "T T", "9.7.9",
                need=[{"global", "shared", "local", "const", "param"}]),),
    "isspacep": (_r(("b32",), "pred *", "9.7.9"),),
    "activemask": (_r(("b32",), "T", "9.7.13"),),
    "match": (_r(("b32", "b64"), "b32|pred T u32", "9.7.13", need=[{"sync"}, {"any", "all"}]),),
    "shfl": (_r(("b32",), "T|pred T b32 b32 u32", "9.7.13",
                need=[{"sync"}, {"up", "down", "bfly", "idx"}]),),
    "vote": (_r(("b32",), "T pred u32", "9.7.13", need=[{"sync"}], when={"ballot"}),
             _r(("pred",), "T pred u32", "9.7.13", need=[{"sync"}, {"all", "any", "uni"}])),
    "redux": (_r(("b32",), "T T u32", "9.7.13", need=[{"sync"}], when={"and", "or", "xor"}),
              _r(("u32", "s32"), "T T u32", "9.7.13", need=[{"sync"}], when={"add"}),
              _r(("u32", "s32", "f32"), "T T u32", "9.7.13", need=[{"sync"}],
                 when={"min", "max"})),

}

_SETP_TYPES = ("b16", "b32", "b64") + _INTS16 + _FLOAT + _HALF
_LDST_TYPES = tuple(f"{k}{b}" for k in "bsu" for b in (8, 16, 32, 64)) + ("b128", "f32", "f64")
