"""The instructions whose type rules a table row cannot state (PTX ISA 9.7): setp's
comparison and boolean operators, ld/st data and vector operands, cvt between the
integer, float and packed low-precision classes, atom/red operations per type, barrier
numbers and counts, dp4a/dp2a, ldmatrix/stmatrix shapes and redux. ``FORMS`` maps each
opcode to its check; :func:`hardware.simt.ptx_rules.check_instruction` calls it."""
from __future__ import annotations

import re
from typing import Callable

from .parser import Addr, Imm, Instruction, Pair, Reg, SPECIAL_REGISTERS, Sink, Vec
from .ptx_rule_checker import (_Checker, _agrees, _agrees_relaxed, _asynchronous, _cache_hint,
                               _check_table, _err, _state_space, _type_of_instruction)
from .ptx_rule_table import (OperandType, PACKED_SMALL, TYPES, _BOOL, _CMP_FLOAT_ONLY,
                             _CMP_INT, _CMP_UNSIGNED, _FLOAT_ROUND, _HALF, _INT_ROUND,
                             _LDST_TYPES, _SETP_TYPES)


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


# -------------------------------------------------------------------------- table

FORMS: dict[str, Callable[[_Checker, Instruction], None]] = {
    "setp": _check_setp, "ld": _check_ld_st, "ldu": _check_ld_st, "st": _check_ld_st,
    "cvt": _check_cvt, "atom": _check_atom, "red": _check_atom, "bar": _check_bar,
    "barrier": _check_bar, "redux": _check_redux, "dp4a": _check_dot, "dp2a": _check_dot,
    "ldmatrix": _check_ldmatrix, "stmatrix": _check_ldmatrix,
}
