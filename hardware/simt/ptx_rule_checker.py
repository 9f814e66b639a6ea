"""The checks of :mod:`hardware.simt.ptx_rules` that every instruction shares: the
agreement of an operand's declared type with the type its slot wants (PTX ISA 6.4.1 and
9.4, strict and relaxed), the register types of a kernel (:class:`_Checker`), and the
table-driven check of one instruction against its :data:`RULES` forms."""
from __future__ import annotations

from .errors import PtxTypeError
from .parser import (Addr, FImm, Imm, Instruction, KernelSource, Pair, Reg, SPECIAL_REGISTERS,
                     Sink, Sym, Vec)
from .ptx_rule_table import OperandType, PACKED_SMALL, RULES, Rule, TYPES, _REGISTER_KIND


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
