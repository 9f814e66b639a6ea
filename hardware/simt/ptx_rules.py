"""The PTX ISA's instruction type rules, checked once per module by ``load_ptx``.

PTX ISA 9.0 section 6.1 ("Operand Type Information") and 9.4 ("Type Information for
Instructions and Operands"): every operand has the type of its declaration, and an
operand's type must agree with the type the instruction template gives it:

- bit-size types (``.bN``) agree with any type of the same size;
- signed and unsigned integer types agree when they have the same size;
- floating-point types agree only with the same floating-point type;
- predicates agree only with predicates; integer immediates only with bit-size and
  integer types, floating-point immediates (``0f``/``0d``) only with bit-size and
  floating-point types.

``ld``, ``st`` and ``cvt`` relax this for their data operands (section 9.4.1, "Operand
Size Exceeding Instruction-Type Size"): a bit-size or integer register may be wider than
an integer or bit-size instruction type, a floating-point register only matches the same
floating-point type, and a bit-size register may be wider than any instruction type.
Address registers (6.4.1) are integer or bit-size registers, and a generic or .global
address of a 64-bit module is not a 32-bit register.

On top of that each instruction description of chapter 9.7 lists the types the
instruction takes, the modifiers it requires (``mul.lo``/``.hi``/``.wide`` for integers, a
rounding mode for ``fma``, ``mad.f32``, IEEE ``div``/``sqrt``/``rcp``, for ``cvt`` between
integers and floats and for narrowing float conversions, ``.approx`` for the special
functions, ``.sync`` for the warp collectives), the modifiers it refuses (``.cc`` and
``.lo``/``.hi`` on floats) and the ranges of some immediates (``bfe``/``bfi`` positions
and lengths 0..255, barrier numbers 0..15). :func:`check_module` walks the decoded
kernels and raises :class:`~hardware.simt.errors.PtxTypeError` for the first statement
that breaks one of these rules; a form the tables do not describe is left to the
instruction compilers (which check it or refuse it as unsupported).

The tables were written from the PTX ISA and checked against ``ptxas`` (CUDA 13.0) for
sm_80, sm_90a and sm_100a: every form this module refuses, ptxas refuses too. So are
``atom``/``red`` ``.min``/``.max`` on ``.f32`` and ``.f64`` refused, as ptxas refuses
them for every target (sm_80 to sm_120, PTX ISA 7.8 to 9.0: "Operation .min requires
.u32 or .s32 or .u64 or .s64 or .f16 or .f16x2 or .bf16 or .bf16x2 type"), although the
PTX ISA's table of atom types lists ``.f32`` and ``.f64`` beside them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from .errors import PtxTypeError
from .parser import (SPECIAL_REGISTERS, Addr, FImm, Imm, Instruction, KernelSource,
                     ModuleSource, Pair, Reg, Sink, Sym, Vec)

__all__ = ["RULES", "Rule", "check_module", "check_kernel", "check_instruction"]


# ---------------------------------------------------------------------------------- types

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


# ----------------------------------------------------------------------------- checker


#: the PTX ISA 9.0 sections the rules come from
SECTIONS = {
    "4.5": "Constants",
    "6.1": "Operand Type Information",
    "6.4.1": "Addresses as Operands",
    "9.3": "Predicated Execution",
    "9.4.1": "Operand Size Exceeding Instruction-Type Size",
    "9.7.1": "Integer Arithmetic Instructions",
    "9.7.2": "Extended-Precision Integer Arithmetic Instructions",
    "9.7.3": "Floating-Point Instructions",
    "9.7.4": "Half Precision Floating-Point Instructions",
    "9.7.7": "Comparison and Selection Instructions",
    "9.7.8": "Logic and Shift Instructions",
    "9.7.9": "Data Movement and Conversion Instructions",
    "9.7.13": "Parallel Synchronization and Communication Instructions",
    "9.7.14": "Warp Level Matrix Multiply-Accumulate Instructions",
    "10": "Special Registers",
}


def _err(inst: Instruction, rule: str, section: str) -> PtxTypeError:
    title = SECTIONS.get(section, "")
    where = f"{section} {title}" + (f", {inst.parts[0]}" if section.startswith("9.7") else "")
    return PtxTypeError(f"line {inst.line}: {inst.text!r}: {rule} (PTX ISA {where})")


def _agrees(want: OperandType, have: OperandType) -> bool:
    """PTX ISA 6.4.1: same size and bit-size on either side, or both integers, or the
    same floating-point type; predicates only with predicates."""
    if want.kind == "pred" or have.kind == "pred":
        return want.kind == have.kind
    if want.bits != have.bits:
        return False
    if "b" in (want.kind, have.kind):
        return True
    if want.kind in "su" and have.kind in "su":
        return True
    return want.name == have.name


def _agrees_relaxed(want: OperandType, have: OperandType) -> bool:
    """PTX ISA 9.4 (ld, st, cvt data operands): a register at least as wide as the type;
    bit-size registers match any type, integer registers bit-size and integer types,
    float registers bit-size types or exactly their own type."""
    if want.kind == "pred" or have.kind == "pred":
        return False
    if have.bits < want.bits:
        return False
    if have.kind == "b":
        return True
    if have.kind in "su":
        return want.kind in "bsu"
    if want.kind == "b":
        return True
    return want.name == have.name


class _Checker:
    """The register types of one kernel and the operand checks that use them."""

    def __init__(self, kernel: KernelSource, address_size: int = 64,
                 symbols: dict[str, str] | None = None) -> None:
        self.kernel = kernel
        self.address_size = address_size
        #: the state space of each variable and parameter a symbol operand may name
        self.symbols = dict(symbols or {})
        self.symbols.update({v.name: v.space for v in kernel.variables})
        self.symbols.update({p.name: "param" for p in kernel.params})
        self._types: dict[str, OperandType | None] = {}

    def reg_type(self, name: str) -> OperandType | None:
        """The declared type of register ``name`` (None if undeclared), as the rules
        see it (packed-half registers hold bits)."""
        if name not in self._types:
            t = self.kernel.registers.get(name)
            self._types[name] = (None if t is None else OperandType(
                t.name, _REGISTER_KIND.get(t.name, t.kind), t.bits))
        return self._types[name]

    def operand(self, inst: Instruction, op: object, want: OperandType, relaxed: bool,
                section: str, index: int) -> None:
        """Check one operand ``op`` against the type ``want``."""
        where = f"operand {index + 1}"
        if isinstance(op, Reg):
            if op.name in SPECIAL_REGISTERS:
                if want.kind == "pred" or want.kind == "f" or want.bits > 32:
                    raise _err(inst, f"{where} {op.name} is a 32-bit special register, "
                                     f"not .{want.name}", "10")
                return
            have = self.reg_type(op.name)
            if have is None:
                return  # undeclared registers are reported where they are compiled
            if op.neg and have.kind != "pred":
                raise _err(inst, f"{where}: '!' applies to predicates only", section)
            ok = _agrees_relaxed(want, have) if relaxed else _agrees(want, have)
            if not ok:
                rule = ("a register at least as wide as the type, of a bit-size or "
                        "matching kind" if relaxed else "the same size and a compatible "
                        "type (bit-size types agree with any type of their size, "
                        "integers with integers, floats only with the same float type)")
                raise _err(inst, f"{where} {op.name} is .{have.name} but the instruction "
                                 f"takes .{want.name} there: it needs {rule}",
                           "9.4.1" if relaxed else "6.1")
        elif isinstance(op, Imm):
            if want.kind == "f":
                raise _err(inst, f"{where}: integer immediate {op.value} where .{want.name} "
                                 "is expected (floating-point operands take 0f/0d literals)",
                           "4.5")
        elif isinstance(op, FImm):
            if want.kind not in "bf":
                raise _err(inst, f"{where}: floating-point immediate where .{want.name} is "
                                 "expected", "4.5")
        elif isinstance(op, Vec):
            self.vector(inst, op, want, relaxed, section, index)

    def vector(self, inst: Instruction, op: Vec, want: OperandType, relaxed: bool,
               section: str, index: int) -> None:
        """``mov``'s pack/unpack form: the elements split the type's bits evenly."""
        n = len(op.items)
        if want.kind != "b":
            raise _err(inst, f"operand {index + 1}: a vector operand packs or unpacks a "
                             f"bit-size type, not .{want.name}", "9.7.9")
        if n not in (2, 4) or want.bits % n:
            raise _err(inst, f"operand {index + 1}: a vector of {n} elements cannot make "
                             f".{want.name} (2 or 4 elements of equal width)", "9.7.9")
        part = OperandType(f"b{want.bits // n}", "b", want.bits // n)
        for item in op.items:
            if not isinstance(item, Sink):
                self.operand(inst, item, part, relaxed, section, index)
        _check_fragment(self, inst, op, index, "9.7.9")  # the elements agree, too

    def symbol_space(self, inst: Instruction, name: str, index: int) -> None:
        """PTX ISA 6.4.1: a variable's address is accessed in its own state space, or
        generically when that is .global, .shared or .local (not .const or .param)."""
        have, space = self.symbols[name], _state_space(inst)
        if space == have or (space == "generic" and have in ("global", "shared", "local")):
            return
        raise _err(inst, f"operand {index + 1}: {name} is a .{have} variable, not "
                         f"addressable {'generically' if space == 'generic' else 'in .' + space}",
                   "6.4.1")

    def address(self, inst: Instruction, op: object, index: int) -> None:
        """PTX ISA 6.4.1 and 6.5: an address register is an integer or bit-size register,
        and a generic or .global address in a module of ``.address_size 64`` is 64 bits
        wide (the 32-bit addressing ABI does not exist on sm_90 and later)."""
        if not isinstance(op, Addr):
            raise _err(inst, f"operand {index + 1} must be an address [...]", "6.4.1")
        if isinstance(op.base, Sym) and op.base.name in self.symbols:
            self.symbol_space(inst, op.base.name, index)
        if isinstance(op.base, Reg) and op.base.name not in SPECIAL_REGISTERS:
            have = self.reg_type(op.base.name)
            if have is None:
                return
            if have.kind in ("f", "pred"):
                raise _err(inst, f"operand {index + 1}: {op.base.name} of type .{have.name} "
                                 "cannot be an address (integer or bit-size registers only)",
                           "6.4.1")
            if (_state_space(inst) in ("global", "generic") and self.address_size == 64
                    and have.bits == 32):
                raise _err(inst, f"operand {index + 1}: {op.base.name} is a 32-bit "
                                 f"register: a {_state_space(inst)} address of a module of "
                                 ".address_size 64 is 64 bits (32-bit addressing does not "
                                 "exist on sm_90 and later)", "6.4.1")


_SPACES = ("global", "shared", "local", "const", "param")


def _state_space(inst: Instruction) -> str:
    """The state space an ld/st/atom names (``shared::cta`` is .shared), else generic."""
    for p in inst.parts[1:]:
        head = p.split("::")[0]
        if head in _SPACES:
            return head
    return "generic"


def _asynchronous(inst: Instruction) -> bool:
    """``st.async``/``red.async`` and the mbarrier-completing forms (PTX ISA 9.7.9,
    9.7.13), whose operand lists differ from the plain instruction's."""
    return any(p == "async" or p.startswith("mbarrier") for p in inst.parts[1:])


def _cache_hint(inst: Instruction) -> int:
    """1 if the instruction carries ``.L2::cache_hint`` (a cache-policy operand follows)."""
    return int(any(p.startswith("L2::cache_hint") for p in inst.parts[1:]))


def _type_of_instruction(inst: Instruction) -> list[str]:
    return [p for p in inst.parts[1:] if p in TYPES or p in PACKED_SMALL or p in
            ("u16x2", "s16x2")]


def _slot_type(slot: str, t: OperandType) -> OperandType | None:
    if slot in ("T", "R"):
        return t
    if slot == "W":
        name = f"{t.kind}{2 * t.bits}"
        return TYPES[name]
    if slot == "*":
        return None
    return TYPES[slot]


def _check_rule(chk: _Checker, inst: Instruction, rule: Rule, t: OperandType) -> None:
    mods = set(inst.parts[1:])
    for group in rule.need:
        if not mods & group:
            raise _err(inst, f"{inst.parts[0]}.{t.name} requires one of "
                             f"{', '.join('.' + m for m in sorted(group))}", rule.section)
    bad = mods & rule.forbid
    if bad:
        raise _err(inst, f"modifier .{sorted(bad)[0]} is not allowed on "
                         f"{inst.parts[0]}.{t.name}", rule.section)
    slots = rule.operands
    if len(inst.operands) != len(slots):
        raise _err(inst, f"{inst.parts[0]} takes {len(slots)} operands, not "
                         f"{len(inst.operands)}", rule.section)
    for i, (slot, op) in enumerate(zip(slots, inst.operands)):
        if isinstance(op, Sink):
            continue
        if "|" in slot:
            first, second = slot.split("|")
            if isinstance(op, Pair):
                chk.operand(inst, op.first, _slot_type(first, t), False, rule.section, i)
                chk.operand(inst, op.second, _slot_type(second, t), False, rule.section, i)
                continue
            slot = first
        want = _slot_type(slot, t)
        if want is None:
            continue
        if isinstance(op, Sym) and want.kind == "f" and op.name in chk.symbols:
            raise _err(inst, f"operand {i + 1}: the address of {op.name} is an integer, "
                             f"not .{want.name}", "6.1")
        if isinstance(op, (Sym, Addr)):
            continue  # variable addresses (mov, cvta) and labels: checked by the compiler
        chk.operand(inst, op, want, slot == "R", rule.section, i)
    for index, low, high in rule.imm_range:
        if index < len(inst.operands) and isinstance(inst.operands[index], Imm):
            v = inst.operands[index].value
            if not low <= v <= high:
                raise _err(inst, f"operand {index + 1}: immediate {v} out of range "
                                 f"[{low}..{high}]", rule.section)


def _check_table(chk: _Checker, inst: Instruction) -> None:
    rules = RULES[inst.parts[0]]
    types = _type_of_instruction(inst)
    if len(types) != 1:
        return  # multi-type forms (dp4a, vector packed types) are the compilers' to check
    if types[0] not in TYPES:
        return
    t = TYPES[types[0]]
    mods = set(inst.parts[1:])
    forms = [r for r in rules if not r.when or mods & r.when]
    if not forms:
        return
    match = [r for r in forms if t.name in r.types]
    if match:
        # a type with forms of several operand counts (min/max.f32): the one that fits
        fit = [r for r in match if len(r.operands) == len(inst.operands)]
        _check_rule(chk, inst, (fit or match)[0], t)
        return
    allowed = sorted({x for r in forms for x in r.types})
    raise _err(inst, f"{inst.parts[0]} does not take type .{t.name} (it takes "
                     f"{', '.join('.' + x for x in allowed)})", forms[0].section)


# ---------------------------------------------------------------------------- setp


def _check_setp(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.7.1 setp: ``setp.CmpOp{.BoolOp}.type p[|q], a, b{, {!}c}``."""
    types = _type_of_instruction(inst)
    sec = "9.7.7"
    if len(types) != 1 or types[0] not in _SETP_TYPES:
        raise _err(inst, f"setp takes one of the types {', '.join(_SETP_TYPES)}", sec)
    t = TYPES[types[0]]
    mods = set(inst.parts[1:])
    cmp = mods & (_CMP_INT | _CMP_UNSIGNED | _CMP_FLOAT_ONLY)
    if len(cmp) != 1:
        raise _err(inst, "setp needs exactly one comparison operator", sec)
    (c,) = cmp
    kind_ok = {"b": {"eq", "ne"}, "s": _CMP_INT, "u": _CMP_INT | _CMP_UNSIGNED,
               "f": _CMP_INT | _CMP_FLOAT_ONLY}[t.kind]
    if c not in kind_ok:
        raise _err(inst, f"comparison .{c} is not defined for .{t.name}", sec)
    has_bool = bool(mods & _BOOL)
    n = len(inst.operands)
    if n not in (3, 4) or (n == 4) != has_bool:
        raise _err(inst, "setp with a boolean operator (.and/.or/.xor) takes a fourth, "
                         "predicate operand, and only then", sec)
    pred = TYPES["pred"]
    d = inst.operands[0]
    for p in ((d.first, d.second) if isinstance(d, Pair) else (d,)):
        if not isinstance(p, Sink):
            chk.operand(inst, p, pred, False, sec, 0)
    for i in (1, 2):
        chk.operand(inst, inst.operands[i], t, False, sec, i)
    if n == 4:
        chk.operand(inst, inst.operands[3], pred, False, sec, 3)


# ----------------------------------------------------------------------------- ld/st


def _vector_width(inst: Instruction) -> int:
    for p in inst.parts[1:]:
        if p in ("v2", "v4", "v8"):
            return int(p[1])
    return 1


def _check_data(chk: _Checker, inst: Instruction, op: object, t: OperandType, n: int,
                sec: str, index: int) -> None:
    if n > 1:
        if not isinstance(op, Vec) or len(op.items) != n:
            raise _err(inst, f"operand {index + 1} must be a vector of {n} elements", sec)
        _check_vector_elements(chk, inst, op, t, sec, index)
        return
    if isinstance(op, Vec):
        raise _err(inst, f"operand {index + 1}: a vector needs .v2/.v4", sec)
    chk.operand(inst, op, t, True, sec, index)


def _check_vector_elements(chk: _Checker, inst: Instruction, op: Vec, t: OperandType,
                           sec: str, index: int) -> None:
    """The elements of an ld/st vector: each at least as wide as the type, and all of
    types that agree with each other (ptxas passes predicate elements; so do we)."""
    seen: list[tuple[str, OperandType]] = []
    for item in op.items:
        have = chk.reg_type(item.name) if isinstance(item, Reg) else None
        if have is None:
            continue
        if have.kind == "pred":
            if t.kind == "f":
                raise _err(inst, f"operand {index + 1}: predicate element {item.name} in a "
                                 f"vector of .{t.name}", sec)
            continue
        if have.bits < t.bits:
            raise _err(inst, f"operand {index + 1}: element {item.name} is .{have.name}, "
                             f"narrower than .{t.name}", "9.4.1")
        for name, other in seen:
            if not _agrees(other, have):
                raise _err(inst, f"operand {index + 1}: vector elements {name} (.{other.name})"
                                 f" and {item.name} (.{have.name}) are of different types",
                           sec)
        seen.append((item.name, have))
    # ptxas types the vector as a bit-size one if any element is, else as its elements
    typed = [h for _, h in seen if h.kind == "b"] or [h for _, h in seen]
    if typed and not _agrees_relaxed(t, typed[0]):
        raise _err(inst, f"operand {index + 1}: a vector of .{typed[0].name} elements cannot "
                         f"hold .{t.name}", "9.4.1")


def _check_ld_st(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.9.8-9.7.9.10 ld, ldu, st: one type of :data:`_LDST_TYPES`, the data
    operand(s) by the relaxed rules of 9.4, an integer or bit-size address register."""
    sec = {"ld": "9.7.9", "ldu": "9.7.9", "st": "9.7.9"}[inst.parts[0]]
    if _asynchronous(inst):
        return  # st.async and friends: operands of their own (the compiler's to check)
    types = _type_of_instruction(inst)
    if not types:
        return
    t_name = types[-1]
    if t_name not in _LDST_TYPES:
        if t_name in ("f16", "bf16", "f16x2", "bf16x2", "pred", "tf32"):
            raise _err(inst, f"{inst.parts[0]} does not take .{t_name} (use the bit-size "
                             "type of its width)", sec)
        return
    if not 2 <= len(inst.operands) <= 2 + _cache_hint(inst):
        raise _err(inst, f"{inst.parts[0]} takes a data operand and an address", sec)
    t = TYPES[t_name]
    n = _vector_width(inst)
    if "nc" in inst.parts[1:] and _state_space(inst) != "global":
        raise _err(inst, ".nc requires the .global state space", sec)
    if "volatile" in inst.parts[1:] and _state_space(inst) == "local":
        raise _err(inst, ".volatile does not apply to the .local state space", sec)
    if inst.parts[0] == "st":
        chk.address(inst, inst.operands[0], 0)
        _check_data(chk, inst, inst.operands[1], t, n, sec, 1)
    else:
        _check_data(chk, inst, inst.operands[0], t, n, sec, 0)
        chk.address(inst, inst.operands[1], 1)


# ------------------------------------------------------------------------------- cvt


def _cvt_class(name: str) -> str:
    if name in PACKED_SMALL:
        return "packed"
    t = TYPES.get(name)
    if t is None:
        return "other"
    return "float" if t.kind == "f" else "int"


#: widening float conversions that take no rounding modifier (PTX ISA 9.7.9.21)
_WIDENING = {("f32", "f16"), ("f64", "f16"), ("f64", "f32")}
_FLOAT_RANK = {"f16": 0, "bf16": 0, "tf32": 1, "f32": 1, "f64": 2}


def _check_cvt(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.9.21 cvt: ``cvt{.irnd|.frnd}{.ftz}{.sat}.dtype.atype d, a``.

    Rounding: integer-to-float and narrowing float conversions need a float rounding
    mode (.rn/.rz/.rm/.rp), float-to-integer an integer one (.rni/.rzi/.rmi/.rpi);
    integer-to-integer and widening float conversions take none, a float-to-same-float
    conversion at most an integer one. Operands follow the relaxed rules of 9.4."""
    sec = "9.7.9"
    types = [p for p in inst.parts[1:] if p in TYPES or p in PACKED_SMALL]
    if len(types) != 2 or any(p in ("pred",) or p.startswith("b") and p in TYPES and
                              p != "bf16" and p != "bf16x2" for p in types):
        if any(p in ("pred", "b8", "b16", "b32", "b64") for p in types):
            raise _err(inst, "cvt converts between numeric types (.s/.u/.f, not .b or "
                             ".pred)", sec)
        named = [p for p in inst.parts[1:] if p in TYPES or re.fullmatch(r"u?e\dm\dx\d", p)]
        if len(named) < 2:
            raise _err(inst, "cvt takes two types, the destination's and the source's", sec)
        return
    dname, sname = types
    dc, sc = _cvt_class(dname), _cvt_class(sname)
    mods = set(inst.parts[1:])
    frnd, irnd = mods & (_FLOAT_ROUND | {"rna", "rs"}), mods & _INT_ROUND
    if dc == "int" and sc == "int":
        if frnd or irnd:
            raise _err(inst, "an integer-to-integer cvt takes no rounding modifier", sec)
    elif dc == "float" and sc == "int":
        if irnd or not frnd:
            raise _err(inst, "an integer-to-float cvt requires .rn, .rz, .rm or .rp", sec)
    elif dc == "int" and sc == "float":
        if frnd or not irnd:
            raise _err(inst, "a float-to-integer cvt requires .rni, .rzi, .rmi or .rpi", sec)
    elif dc == "float" and sc == "float" and "x2" not in dname and dname != "tf32":
        if dname == sname:
            if frnd:
                raise _err(inst, "a cvt between the same float type takes at most an "
                                 "integer rounding (.rni/.rzi/.rmi/.rpi)", sec)
        elif (dname, sname) in _WIDENING:
            if frnd or irnd:
                raise _err(inst, f"the widening cvt .{dname}.{sname} takes no rounding "
                                 "modifier", sec)
        elif (dname in _FLOAT_RANK and sname in _FLOAT_RANK
              and _FLOAT_RANK[dname] < _FLOAT_RANK[sname] and (irnd or not frnd)):
            raise _err(inst, f"the narrowing cvt .{dname}.{sname} requires .rn, .rz, .rm "
                             "or .rp", sec)
    elif dname in ("f16x2", "bf16x2") and sc in ("float", "packed") and not (frnd or irnd):
        raise _err(inst, f"cvt to .{dname} requires a rounding modifier", sec)
    elif dname == "tf32" and not frnd:
        raise _err(inst, "cvt to .tf32 requires a rounding modifier", sec)
    elif dc == "packed" and sname in ("f32", "f16x2", "bf16x2"):
        if "satfinite" not in mods and dname != "ue8m0x2":
            raise _err(inst, f"cvt to .{dname} requires .satfinite", sec)
        if not frnd:
            raise _err(inst, f"cvt to .{dname} requires a rounding modifier", sec)
    _check_cvt_operands(chk, inst, dname, sname, sec)


def _check_cvt_operands(chk: _Checker, inst: Instruction, dname: str, sname: str,
                        sec: str) -> None:
    ops = inst.operands
    pair_src = dname in ("f16x2", "bf16x2") + tuple(PACKED_SMALL) and sname == "f32"
    want_n = 3 if pair_src else 2
    if pair_src and len(ops) == 2:
        raise _err(inst, f"cvt.{dname}.f32 packs two sources: d, a, b", sec)
    if len(ops) < 2:
        raise _err(inst, "cvt takes a destination and a source", sec)
    if len(ops) != want_n:
        return  # other forms (.x4 with random bits...) are the compiler's to check
    for i, name in [(0, dname)] + [(k, sname) for k in range(1, want_n)]:
        op = ops[i]
        if isinstance(op, Sink):
            continue
        if name in PACKED_SMALL:
            bits = PACKED_SMALL[name]
            want = OperandType(f"b{bits}", "b", bits)
            if isinstance(op, Reg) and op.name not in SPECIAL_REGISTERS:
                have = chk.reg_type(op.name)
                if have is not None and not (have.kind == "b" and have.bits == bits):
                    raise _err(inst, f"operand {i + 1} {op.name} is .{have.name}: .{name} "
                                     f"travels in a .b{bits} register", sec)
            else:
                chk.operand(inst, op, want, False, sec, i)
            continue
        chk.operand(inst, op, TYPES[name], "tf32" not in (dname, sname), sec, i)


# ---------------------------------------------------------------------------- atom


#: the types each atomic operation takes (PTX ISA 9.7.13 atom, red; checked with ptxas,
#: which refuses .min/.max on .f32 and .f64 for every target)
_ATOM_TYPES = {
    "add": ("u32", "s32", "u64", "f32", "f64") + _HALF,
    "min": ("u32", "s32", "u64", "s64") + _HALF,
    "max": ("u32", "s32", "u64", "s64") + _HALF,
    "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
    "cas": ("b16", "b32", "b64", "b128"), "exch": ("b32", "b64", "b128"),
    "inc": ("u32",), "dec": ("u32",),
}


def _check_atom(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.13 atom/red: ``atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}``
    (red has no ``d``): the operation's types, ``.noftz`` on scalar half adds, the
    operands of the instruction type, the address of :meth:`_Checker.address`."""
    sec = "9.7.13"
    if _asynchronous(inst):
        return  # red.async: operands of its own (the compiler's to check)
    mods = set(inst.parts[1:])
    ops = [p for p in inst.parts[1:] if p in _ATOM_TYPES]
    types = _type_of_instruction(inst)
    if len(ops) > 1 or len(types) != 1 or mods & {"v2", "v4", "v8"}:
        return  # vector and other forms are the compiler's to check
    if not ops:
        raise _err(inst, f"{inst.parts[0]} requires an operation (one of "
                         f"{', '.join('.' + x for x in _ATOM_TYPES)})", sec)
    space = _state_space(inst)
    if space not in ("global", "shared", "generic"):
        raise _err(inst, f"{inst.parts[0]} works on .global, .shared or generic addresses, "
                         f"not .{space}", sec)
    op, t_name = ops[0], types[0]
    if t_name not in _ATOM_TYPES[op]:
        raise _err(inst, f"{inst.parts[0]}.{op} takes "
                         f"{', '.join('.' + x for x in _ATOM_TYPES[op])}, not .{t_name}", sec)
    if t_name in _HALF and "noftz" not in mods:
        raise _err(inst, f"{inst.parts[0]}.{op}.{t_name} requires .noftz", sec)
    if t_name in _HALF and op in ("min", "max"):
        # ptxas: "Vector modifier required" (sm_90 and later; before: sm_90 required)
        raise _err(inst, f"{inst.parts[0]}.{op}.{t_name} exists only as a vector operation "
                         f"(.v2, .v4 or .v8; sm_90 and later)", sec)
    t = TYPES[t_name]
    n_data = 2 if op == "cas" else 1
    has_d = inst.parts[0] == "atom"
    want = (1 if has_d else 0) + 1 + n_data
    hint = _cache_hint(inst)
    if not want <= len(inst.operands) <= want + hint:
        raise _err(inst, f"{inst.parts[0]}.{op} takes {want} operands, not "
                         f"{len(inst.operands)}", sec)
    if has_d and not isinstance(inst.operands[0], Sink):
        chk.operand(inst, inst.operands[0], t, False, sec, 0)
    a = 1 if has_d else 0
    chk.address(inst, inst.operands[a], a)
    for i in range(a + 1, want):
        chk.operand(inst, inst.operands[i], t, False, sec, i)


def _check_bar(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.13 bar, barrier: ``bar{.cta}.sync|.arrive|.red a{, b}`` with a barrier
    number 0..15 and a thread count that is a multiple of the warp size;
    ``bar.warp`` exists only with ``.sync``."""
    sec = "9.7.13"
    mods = set(inst.parts[1:])
    if "warp" in mods:
        if "sync" not in mods:
            raise _err(inst, "bar.warp requires .sync", sec)
        if inst.operands and isinstance(inst.operands[0], Reg):
            chk.operand(inst, inst.operands[0], TYPES["u32"], False, sec, 0)
        return
    if "cluster" in mods:
        return  # barrier.cluster.arrive/wait: checked by hardware.simt.cluster
    if not mods & {"sync", "arrive", "red"}:
        raise _err(inst, f"{inst.parts[0]} requires .sync, .arrive or .red", sec)
    if "red" in mods:
        return  # bar.red d, a, {b,} {!}c: the compiler checks its operands
    ops = inst.operands
    # ptxas reads these immediates as 32-bit words (2**32 is barrier 0)
    if ops and isinstance(ops[0], Imm) and not 0 <= ops[0].value % (1 << 32) <= 15:
        raise _err(inst, f"barrier number {ops[0].value} out of range [0..15]", sec)
    count = ops[1].value % (1 << 32) if len(ops) > 1 and isinstance(ops[1], Imm) else 32
    if count == 0 or count % 32:
        raise _err(inst, f"thread count {ops[1].value} is not a positive multiple of the "
                         "warp size (32)", sec)
    for i, op in enumerate(ops[:2]):
        if isinstance(op, Reg):
            chk.operand(inst, op, TYPES["u32"], False, sec, i)


def _check_dot(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.1 dp4a, dp2a: ``dp4a.atype.btype d, a, b, c`` with .u32/.s32 types
    and 32-bit operands; dp2a also takes .lo or .hi."""
    sec = "9.7.1"
    types = _type_of_instruction(inst)
    if len(types) != 2 or any(x not in ("u32", "s32") for x in types):
        raise _err(inst, f"{inst.parts[0]} takes two types of .u32/.s32 (a's and b's)", sec)
    if inst.parts[0] == "dp2a" and not set(inst.parts[1:]) & {"lo", "hi"}:
        raise _err(inst, "dp2a requires .lo or .hi", sec)
    if len(inst.operands) != 4:
        raise _err(inst, f"{inst.parts[0]} takes 4 operands", sec)
    for i, op in enumerate(inst.operands):
        chk.operand(inst, op, TYPES["u32"], False, sec, i)


def _check_ldmatrix(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.14.5 ldmatrix/stmatrix ``.sync.aligned.shape.num{.trans}{.ss}.type``:
    .sync, .aligned, a shape and .x1/.x2/.x4 required, .shared only, and for .m8n8 the
    type .b16 with a vector of as many 32-bit registers as matrices."""
    sec = "9.7.14"
    name = inst.parts[0]
    mods = inst.parts[1:]
    for group in (("sync",), ("aligned",), ("x1", "x2", "x4")):
        if not set(mods) & set(group):
            raise _err(inst, f"{name} requires {' or '.join('.' + g for g in group)}", sec)
    shapes = [m for m in mods if re.fullmatch(r"m\d+n\d+", m)]
    if not shapes:
        raise _err(inst, f"{name} requires a shape (.m8n8...)", sec)
    if _state_space(inst) not in ("shared", "generic"):
        raise _err(inst, f"{name} reads and writes .shared memory only", sec)
    if shapes != ["m8n8"]:
        return
    types = _type_of_instruction(inst)
    if types != ["b16"]:
        raise _err(inst, f"{name}.m8n8 takes the type .b16", sec)
    n = int(next(m for m in mods if m in ("x1", "x2", "x4"))[1])
    ops = inst.operands
    if len(ops) != 2:
        raise _err(inst, f"{name} takes 2 operands", sec)
    vec, addr = (ops[0], ops[1]) if name == "ldmatrix" else (ops[1], ops[0])
    vi = 0 if name == "ldmatrix" else 1
    if not isinstance(vec, Vec) or len(vec.items) != n:
        raise _err(inst, f"operand {vi + 1} must be a vector of {n} registers", sec)
    for item in vec.items:
        if not (isinstance(item, Reg) and (chk.reg_type(item.name) or TYPES["b32"]).kind
                == "pred"):  # ptxas passes predicate elements
            chk.operand(inst, item, TYPES["b32"], False, sec, vi)
    if not isinstance(addr, Addr):  # the address is .shared by default: 32 bits will do
        raise _err(inst, f"operand {2 - vi} must be an address [...]", sec)


def _check_redux(chk: _Checker, inst: Instruction) -> None:
    """PTX ISA 9.7.13 redux.sync: an operation is required; the types by operation."""
    if not set(inst.parts[1:]) & {"add", "min", "max", "and", "or", "xor"}:
        raise _err(inst, "redux requires an operation (.add, .min, .max, .and, .or, .xor)",
                   "9.7.13")
    _check_table(chk, inst)


# ---------------------------------------------------------------------------- driver

_SPECIAL: dict[str, Callable[[_Checker, Instruction], None]] = {
    "setp": _check_setp, "ld": _check_ld_st, "ldu": _check_ld_st, "st": _check_ld_st,
    "cvt": _check_cvt, "atom": _check_atom, "red": _check_atom, "bar": _check_bar,
    "barrier": _check_bar, "redux": _check_redux, "dp4a": _check_dot, "dp2a": _check_dot,
    "ldmatrix": _check_ldmatrix, "stmatrix": _check_ldmatrix,
}


#: the warp-matrix instructions, whose vector operands hold a fragment
_FRAGMENT_OPCODES = frozenset({"mma", "wmma", "ldmatrix", "stmatrix", "movmatrix"})


def _check_fragment(chk: _Checker, inst: Instruction, op: Vec, index: int,
                    section: str = "9.7.14") -> None:
    """A fragment's (a vector's) registers are all of one size and agreeing types (PTX
    ISA 9.7.14, 9.7.9 mov; ptxas passes predicate elements, and so do we)."""
    first: tuple[str, OperandType] | None = None
    for item in op.items:
        have = chk.reg_type(item.name) if isinstance(item, Reg) else None
        if have is None or have.kind == "pred":
            continue
        if first is None:
            first = (item.name, have)
        elif not _agrees(first[1], have):
            raise _err(inst, f"operand {index + 1}: vector elements {first[0]} "
                             f"(.{first[1].name}) and {item.name} (.{have.name}) do not "
                             "agree", section)


def check_instruction(chk: _Checker, inst: Instruction) -> None:
    """Raise :class:`PtxTypeError` if ``inst`` breaks a type rule of its opcode."""
    head = inst.parts[0]
    special = _SPECIAL.get(head)
    if special is not None:
        special(chk, inst)
    elif head in RULES:
        _check_table(chk, inst)
    if inst.guard is not None and inst.guard.name in chk.kernel.registers:
        g = chk.reg_type(inst.guard.name)
        if g is not None and g.kind != "pred":
            raise _err(inst, f"guard {inst.guard.name} is .{g.name}, not a predicate", "9.3")
    for i, op in enumerate(inst.operands):
        if isinstance(op, Vec) and head in _FRAGMENT_OPCODES:
            _check_fragment(chk, inst, op, i)
        if isinstance(op, Addr) and isinstance(op.base, Reg):
            have = chk.reg_type(op.base.name)
            if have is not None and have.kind in ("f", "pred"):
                raise _err(inst, f"operand {i + 1}: {op.base.name} of type .{have.name} "
                                 "cannot be an address (integer or bit-size registers only)",
                           "6.4.1")


def check_kernel(kernel: KernelSource, address_size: int = 64,
                 symbols: dict[str, str] | None = None) -> None:
    """Check every instruction of one kernel (see the module docstring); ``symbols``:
    the state space of each module-level variable."""
    chk = _Checker(kernel, address_size, symbols)
    for inst in kernel.instructions:
        try:
            check_instruction(chk, inst)
        except (KeyError, IndexError, AttributeError, TypeError):
            continue  # a form the tables do not describe: the compiler decides


def check_module(src: ModuleSource) -> None:
    """Check every kernel of a parsed module; raise :class:`PtxTypeError` naming the
    line, the statement and the rule of the first instruction that breaks one."""
    symbols = {v.name: v.space for v in src.variables}
    for kernel in src.kernels.values():
        check_kernel(kernel, src.address_size, symbols)
