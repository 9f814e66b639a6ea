"""Parse the PTX text that ``nvcc -ptx`` emits into kernels of decoded instructions.

PTX ISA (version 9.0) chapters 4 (syntax), 5 (state spaces, types, variables), 9
(instructions) and 11 (directives). Accepted: ``.version/.target/.address_size``,
``.visible .entry`` kernels with ``.param`` lists and performance directives
(``.maxntid``, ``.reqntid``, ``.minnctapersm``, ``.maxnreg``...), ``.reg`` declarations
(including the ``%r<N>`` range form), ``.shared`` arrays (module or kernel scope, and
``.extern .shared`` dynamic arrays), ``.local`` arrays, labels, predicate guards
``@%p`` / ``@!%p``, ``{ }`` scopes from inline asm (registers declared inside are local to
the scope), ``//`` and ``/* */`` comments, ``.pragma``, ``.file`` and ``.loc`` (each
line directive ends where its grammar ends, not only at a newline), and the ``call``
instructions the inliner leaves for the CUDA runtime functions. Text a statement's
grammar does not consume is refused (an empty list item, a repeated modifier), and so
are declarations beyond the CUDA limits (:data:`MAX_REGISTERS`,
:data:`MAX_VARIABLE_BYTES`, :data:`MAX_PARAM_BYTES`).

Declarations follow the rules ptxas enforces: registers, variables, parameters and labels
share one name space per ``{ }`` scope (a name declared twice in one scope is refused;
one declared in a nested scope hides the outer one, labels included, and sibling scopes
may reuse a name), ``.align`` is a power of two, only ``.extern`` arrays may be empty,
and initialisers are typed (:func:`_initial_element`). Literals (PTX ISA 4.5): integers
are 64-bit, decimal floats are doubles (:class:`FImm`), address offsets are taken
modulo 2^64 (:class:`Addr`).
Everything else is an :class:`~hardware.simt.errors.UnsupportedPtxError` or a
:class:`~hardware.simt.errors.PtxSyntaxError` naming the line.
"""
from __future__ import annotations

import itertools
import math
import re
import struct
from dataclasses import dataclass, field, replace
from typing import Iterator, Union

import numpy as np

from .errors import PtxSyntaxError, UnsupportedPtxError
from .types import PtxType, ptx_type

__all__ = [
    "Reg", "Imm", "FImm", "Sym", "Addr", "Vec", "Pair", "Sink", "TensorAddr", "Operand",
    "Instruction", "Param", "Variable", "KernelSource", "ModuleSource", "parse_ptx",
    "SPECIAL_REGISTERS",
]

# ----------------------------------------------------------------------------- operands


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


@dataclass
class ModuleSource:
    version: str = ""
    target: str = ""
    address_size: int = 64
    variables: list[Variable] = field(default_factory=list)
    kernels: dict[str, KernelSource] = field(default_factory=dict)


# ---------------------------------------------------------------------------- scanning

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LABEL = re.compile(r"^[A-Za-z_$%][\w$]*$")
_IDENT = r"[A-Za-z_$%][\w$]*"


def _strip_comments(text: str) -> str:
    # keep newlines inside block comments so that line numbers stay right
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


#: directives without a terminator (PTX ISA 11.2 / 11.5: ``.version``, ``.target``,
#: ``.address_size``, ``.file``, ``.loc``): each ends where its grammar ends, which is
#: usually, but not necessarily, the end of its line (inlined code may follow on the
#: same line). An optional ``;`` after one is accepted.
_NUM = r"(?:0[xX][0-9a-fA-F]+|[0-9]+)"
LINE_DIRECTIVES = {
    ".version": re.compile(r"\.version[ \t]+[0-9]+\.[0-9]+"),
    ".target": re.compile(r"\.target[ \t]+\w+(?:[ \t]*,[ \t]*\w+)*"),
    ".address_size": re.compile(r"\.address_size[ \t]+[0-9]+"),
    ".file": re.compile(rf"\.file[ \t]+{_NUM}[ \t]+\"[^\"\n]*\""
                        rf"(?:[ \t]*,[ \t]*{_NUM}[ \t]*,[ \t]*{_NUM})?"),
    ".loc": re.compile(rf"\.loc[ \t]+{_NUM}[ \t]+{_NUM}[ \t]+{_NUM}"
                       rf"(?:[ \t]*,[ \t]*function_name[ \t]+[A-Za-z_$][\w$]*"
                       rf"(?:[ \t]*\+[ \t]*{_NUM})?[ \t]*,[ \t]*inlined_at[ \t]+{_NUM}"
                       rf"[ \t]+{_NUM}[ \t]+{_NUM})?"),
}
_LINE_DIRECTIVE_START = re.compile(r"\.(?:version|target|address_size|file|loc)(?![\w$])")
_DIRECTIVE_END = re.compile(r"[ \t]*;?")


def _statements(text: str) -> Iterator[tuple[int, str, str]]:
    """Yield (line, statement text, terminator) with terminator one of ``; { } :``.

    The directives of :data:`LINE_DIRECTIVES` are matched against their grammar and
    yielded with terminator ``;``; one that does not match it is a PtxSyntaxError (the
    scanner never lets a directive swallow the text after it)."""
    buf: list[str] = []
    line = 1
    start = 1
    i = 0
    n = len(text)
    depth_paren = 0
    blank = True            # nothing but whitespace in buf (kept up to date: joining
    while i < n:            # buf per character would be quadratic in DWARF sections)
        ch = text[i]
        if ch == "\n":
            line += 1
        if ch == "." and blank:
            m = _LINE_DIRECTIVE_START.match(text, i)
            if m:
                head = m.group(0)
                d = LINE_DIRECTIVES[head].match(text, i)
                if d is None:
                    eol = text.find("\n", i)
                    bad = text[i: eol if eol >= 0 else n].strip()
                    raise PtxSyntaxError(f"line {line}: malformed {head} directive "
                                         f"{bad[:80]!r}")
                yield line, " ".join(d.group(0).split()), ";"
                line += d.group(0).count("\n")
                buf = []
                i = _DIRECTIVE_END.match(text, d.end()).end()
                continue
        if blank:
            start = line
        if ch == '"':  # string (in .pragma): copy through
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            buf.append(text[i:j + 1])
            blank = False
            i = j + 1
            continue
        if ch == "(":
            depth_paren += 1
        elif ch == ")":
            depth_paren -= 1
        if depth_paren == 0 and ch in ";{}":
            # a '{' that opens a vector operand follows an opcode/comma inside a statement
            stmt = "".join(buf).strip()
            if ch == "{" and stmt and ((not stmt.startswith(".") and not stmt.endswith(")"))
                                       or stmt.endswith("=")):
                buf.append(ch)
                i += 1
                continue
            if ch == "}" and "{" in stmt and stmt.count("{") > stmt.count("}"):
                buf.append(ch)
                i += 1
                continue
            yield start, stmt, ch
            buf = []
            blank = True
            i += 1
            continue
        if ch == ":" and depth_paren == 0:
            stmt = "".join(buf).strip()
            nxt = text[i + 1] if i + 1 < n else ""
            prv = text[i - 1] if i else ""
            if nxt != ":" and prv != ":" and _LABEL.match(stmt):
                yield start, stmt, ":"
                buf = []
                blank = True
                i += 1
                continue
        buf.append(ch)
        if blank and not ch.isspace():
            blank = False
        i += 1
    if "".join(buf).strip():
        raise PtxSyntaxError(f"line {start}: statement not terminated by ';': "
                             f"{''.join(buf).strip()[:60]!r}")


_PRAGMA = re.compile(r'\.pragma\s+"[^"]*"(?:\s*,\s*"[^"]*")*')


def _check_pragma(stmt: str, line: int) -> None:
    """``.pragma "string" {, "string"}`` (PTX ISA 11.7.1); anything else is refused."""
    if not _PRAGMA.fullmatch(stmt):
        raise PtxSyntaxError(f"line {line}: malformed .pragma {stmt[:80]!r}")


def check_line_directive(stmt: str, line: int) -> None:
    """Refuse a ``.version/.target/.address_size/.file/.loc`` statement with anything
    its grammar does not consume."""
    head = stmt.split()[0] if stmt.split() else ""
    rx = LINE_DIRECTIVES.get(head)
    if rx is None or not rx.fullmatch(stmt):
        raise PtxSyntaxError(f"line {line}: malformed {head} directive {stmt[:80]!r} "
                             "(text after a directive's operands is not consumed)")


# ---------------------------------------------------------------------------- operands


def _split_top(s: str, sep: str = ",", keep_empty: bool = False) -> list[str]:
    """The items of ``s`` between top-level separators, stripped; an empty last item
    (a trailing separator) is dropped unless ``keep_empty``."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip() or (keep_empty and out):
        out.append("".join(cur).strip())
    return out


def _split_list(s: str, line: int, what: str) -> list[str]:
    """The comma-separated items of ``s``; an empty item (``a,,b`` or a trailing comma)
    is a PtxSyntaxError: every token of a statement must be consumed."""
    items = _split_top(s, keep_empty=True)
    if any(not x for x in items):
        raise PtxSyntaxError(f"line {line}: empty item in the list of {what}: {s[:80]!r}")
    return items


#: integer literals are 64-bit (PTX ISA 4.5.1): signed or unsigned, so a value must lie
#: in [-2^63, 2^64)
INT_LITERAL_RANGE = (-(1 << 63), 1 << 64)
_INT_FORMS = ((re.compile(r"0[xX][0-9a-fA-F]+"), 16), (re.compile(r"0[bB][01]+"), 2),
              (re.compile(r"0[0-7]+"), 8), (re.compile(r"0|[1-9][0-9]*"), 10))


def _int_literal(tok: str) -> int | None:
    """The value of a PTX integer literal (hex, binary, octal or decimal, an optional
    sign and ``U`` suffix: PTX ISA 4.5.1), None if ``tok`` is not one (``08`` and a
    lower-case ``u`` are not)."""
    t = tok.strip()
    if t.endswith("U"):
        t = t[:-1]
    neg = t.startswith("-")
    if t[:1] in "+-" and t:
        t = t[1:].lstrip()
    for rx, base in _INT_FORMS:
        if rx.fullmatch(t):
            v = int(t[2:] if base == 2 else t, base)
            return -v if neg else v
    return None


def _checked_int(v: int, tok: str, line: int, text: str) -> int:
    lo, hi = INT_LITERAL_RANGE
    if not lo <= v < hi:
        raise PtxSyntaxError(f"line {line}: integer literal {tok!r} does not fit 64 bits "
                             f"(PTX ISA 4.5.1: integer constants are 64-bit) in {text!r}")
    return v


def _wrap64(v: int) -> int:
    """``v`` modulo 2^64 as a signed 64-bit value."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


#: a decimal floating-point literal (PTX ISA 4.5.2): digits with a '.', an exponent, or
#: both; there is no size suffix
_DECIMAL_FLOAT = re.compile(r"-?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                            r"|[0-9]+[eE][-+]?[0-9]+)")
_NUM_OFFSET = r"(?:0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)U?"
_ADDRESS = re.compile(rf"({_IDENT}(?:\.[xyz])?)(?:\+(-?{_NUM_OFFSET}))?|({_NUM_OFFSET})")


def decimal_float(t: str, line: int, text: str) -> FImm:
    """The double-precision literal ``t`` (decimal text rounded to nearest even, as
    C's ``strtod``); a value too large for a double is a PtxSyntaxError."""
    v = float(t)
    if math.isinf(v):
        raise PtxSyntaxError(f"line {line}: decimal float literal {t!r} overflows a "
                             f"double (PTX ISA 4.5.2: decimal literals are .f64) in {text!r}")
    return FImm(struct.unpack("<Q", struct.pack("<d", v))[0], 64)


def parse_operand(tok: str, line: int, text: str) -> Operand:
    """Decode one operand token (see the operand classes above)."""
    t = tok.strip()
    if not t:
        raise PtxSyntaxError(f"line {line}: empty operand in {text!r}")
    if t == "_":
        return Sink()
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].replace(" ", "").replace("\t", "")
        items = _split_top(inner)
        if len(items) == 2 and items[1].startswith("{") and items[1].endswith("}"):
            base = parse_operand(items[0], line, text)
            coords = parse_operand(items[1], line, text)
            if not isinstance(base, (Reg, Sym)) or base.__class__ is Reg and base.neg:
                raise PtxSyntaxError(f"line {line}: a tensor address is [map, {{coords}}]: "
                                     f"{t!r} in {text!r}")
            return TensorAddr(base, coords)
        m = _ADDRESS.fullmatch(inner)
        if not m:
            raise UnsupportedPtxError(f"line {line}: unsupported address operand {t!r} "
                                      f"in {text!r} (an address is [reg], [var], [reg+imm], "
                                      "[var+imm] or [imm]; a negative offset is written "
                                      "+-imm)")
        base_s, off_s, abs_s = m.groups()
        if base_s is None:
            base = None
            off_s = abs_s
        elif base_s.startswith("%"):
            base = Reg(base_s)
        else:
            base = Sym(base_s)
        off = _checked_int(_int_literal(off_s), off_s, line, text) if off_s else 0
        return Addr(base, _wrap64(off))
    if t.startswith("{") and t.endswith("}"):
        return Vec(tuple(parse_operand(x, line, text)
                         for x in _split_list(t[1:-1], line, "vector elements")))
    if "|" in t:
        a, b = t.split("|", 1)
        first, second = parse_operand(a, line, text), parse_operand(b, line, text)
        if isinstance(second, Pair):
            raise PtxSyntaxError(f"line {line}: at most two destinations d|p: {t!r} "
                                 f"in {text!r}")
        return Pair(first, second)
    if t.startswith("!"):
        inner = parse_operand(t[1:], line, text)
        if not isinstance(inner, Reg) or inner.neg:
            raise PtxSyntaxError(f"line {line}: '!' applies to predicates only: {t!r}")
        return Reg(inner.name, True)
    m = re.fullmatch(r"0([fFdD])([0-9a-fA-F]+)", t)
    if m:
        width = 32 if m.group(1) in "fF" else 64
        if len(m.group(2)) != width // 4:
            raise PtxSyntaxError(f"line {line}: float literal {t!r} needs {width // 4} "
                                 "hex digits")
        return FImm(int(m.group(2), 16), width)
    v = _int_literal(t)
    if v is not None:
        return Imm(_checked_int(v, t, line, text))
    if re.fullmatch(r"%[A-Za-z_$][\w$]*(?:\.[xyz])?", t):
        return Reg(t)
    if re.fullmatch(_IDENT, t):
        return Sym(t)
    if _DECIMAL_FLOAT.fullmatch(t):
        return decimal_float(t, line, text)
    raise PtxSyntaxError(f"line {line}: cannot parse operand {t!r} in {text!r}")


# ------------------------------------------------------------------------ declarations


def _parse_reg_decl(stmt: str, line: int) -> list[tuple[str, PtxType]]:
    m = re.fullmatch(r"\.reg\s*(?:\.v[24]\s+)?\.(\w+)\s+(.+)", stmt, re.S)
    if not m:
        raise PtxSyntaxError(f"line {line}: malformed register declaration {stmt!r}")
    if re.match(r"\.reg\s+\.v[24]", stmt):
        raise UnsupportedPtxError(f"line {line}: vector registers are not supported: {stmt!r}")
    typ = ptx_type(m.group(1))
    if typ is None:
        raise UnsupportedPtxError(f"line {line}: register type .{m.group(1)} is not "
                                  f"supported: {stmt!r}")
    out = []
    for name in _split_list(m.group(2), line, "registers declared"):
        r = re.fullmatch(rf"({_IDENT})<(\d+)>", name)
        if r:
            count = int(r.group(2))
            if count > MAX_REGISTERS:
                raise UnsupportedPtxError(
                    f"line {line}: {stmt[:60]!r} declares {count} registers; at most "
                    f"{MAX_REGISTERS} per kernel are supported")
            out += [(f"{r.group(1)}{k}", typ) for k in range(count)]
        elif re.fullmatch(_IDENT, name):
            out.append((name, typ))
        else:
            raise PtxSyntaxError(f"line {line}: bad register name {name!r} in {stmt!r}")
    return out


def _parse_variable(stmt: str, line: int) -> Variable:
    """``[.extern] .shared|.local|.global|.const [.align N] .type name[[N]] [= init]``
    (PTX ISA 5.4): the alignment a power of two, an array at least one element long
    unless it is an ``.extern`` one (whose size the launch gives), and an initialiser
    only on ``.global``/``.const`` variables."""
    m = re.fullmatch(
        rf"((?:\.(?:visible|extern|weak)\s+)*)\.(shared|local|global|const)\s+"
        rf"(?:\.align\s+(\d+)\s+)?\.(\w+)\s+({_IDENT})\s*(?:\[(\d*)\])?\s*(?:=\s*(.*))?",
        stmt, re.S)
    if not m:
        raise UnsupportedPtxError(f"line {line}: unsupported variable declaration {stmt!r}")
    linkage, space, align, tname, name, count, init = m.groups()
    words = (linkage or "").split()
    if len(words) > 1:
        raise PtxSyntaxError(f"line {line}: more than one linkage directive (.visible, "
                             f".extern, .weak): {stmt[:80]!r}")
    extern = words == [".extern"]
    if count == "" and init is not None and not extern:
        # an array sized by its initialiser (PTX ISA 5.4.4): one element per value
        inner = init.strip()[1:-1] if init.strip().startswith("{") else ""
        count = str(len(_split_list(inner, line, "initial values"))) if inner.strip() else ""
    typ = ptx_type(tname)
    if typ is None or typ.kind == "pred":
        raise UnsupportedPtxError(f"line {line}: variable type .{tname} in {stmt!r} "
                                  "(a .pred variable must be a .reg)")
    if align is not None:
        _check_align(int(align), line, stmt)
    if count == "" or count == "0":
        if not extern:
            raise PtxSyntaxError(f"line {line}: array {name}[{count}] of no size (only "
                                 f".extern arrays may be unsized or empty): {stmt[:80]!r}")
        n = 0
    else:
        n = int(count) if count is not None else 1
    if extern and space != "shared":
        raise UnsupportedPtxError(f"line {line}: .extern .{space} variable {name} is "
                                  "defined in another module")
    nbytes = n * typ.bytes
    limit = MAX_VARIABLE_BYTES[space]
    if nbytes > limit:
        raise UnsupportedPtxError(
            f"line {line}: .{space} variable {name} of {nbytes} bytes exceeds the "
            f"{limit} bytes {_LIMIT_SOURCE[space]}")
    data = None
    if init is not None and space not in ("global", "const"):
        raise PtxSyntaxError(f"line {line}: .{space} variables cannot be initialised "
                             f"(PTX ISA 5.4.4): {stmt[:80]!r}")
    if space in ("global", "const"):
        elements = None if count is None else n
        data = (_initial_bytes(init, typ, elements, line, stmt) if init is not None
                else bytes(nbytes))
    return Variable(name, space, int(align) if align else typ.bytes, nbytes, extern, data)


def _check_align(align: int, line: int, stmt: str) -> None:
    """``.align N``: N must be a power of two (PTX ISA 5.4.5)."""
    if align < 1 or align & (align - 1):
        raise PtxSyntaxError(f"line {line}: .align {align} is not a power of two in "
                             f"{stmt[:80]!r}")


#: the most registers a kernel may declare (its threads each hold all of them)
MAX_REGISTERS = 1 << 16
#: the largest variable of each state space (CUDA C Programming Guide, "Technical
#: Specifications per Compute Capability"; a .global variable bounded by this
#: interpreter's memory, not by the device's)
MAX_VARIABLE_BYTES = {"shared": 48 << 10, "local": 512 << 10, "const": 64 << 10,
                      "global": 1 << 30}
_LIMIT_SOURCE = {
    "shared": "of static shared memory per block (larger arrays must be dynamic: "
              "extern __shared__)",
    "local": "of local memory per thread",
    "const": "of constant memory",
    "global": "a .global variable may have in this interpreter",
}
#: kernel parameters: at most 32764 bytes (CUDA 12.1+, compute capability 7.0+)
MAX_PARAM_BYTES = 32764


def _initial_bytes(init: str, typ: PtxType, count: int | None, line: int,
                   stmt: str) -> bytes:
    """The bytes of the initialiser of a scalar (``count`` None: ``= 1``) or of an array
    of ``count`` elements (``= {1, 2}``; missing elements are zero), each element
    stored as ``typ`` by :func:`_initial_element` (PTX ISA 5.4.4, "Initializers")."""
    text = init.strip()
    if count is None:
        if text.startswith("{"):
            raise PtxSyntaxError(f"line {line}: a scalar variable takes a single value, "
                                 f"not a list, as its initialiser: {stmt[:80]!r}")
        items = [text]
    else:
        if not (text.startswith("{") and text.endswith("}")) or "{" in text[1:-1] \
                or "}" in text[1:-1]:
            raise PtxSyntaxError(f"line {line}: the initialiser of an array is one list "
                                 f"{{a, b, ...}}: {stmt[:80]!r}")
        items = _split_list(text[1:-1], line, "initial values")
        if len(items) > count:
            raise PtxSyntaxError(f"line {line}: {len(items)} initial values for an array "
                                 f"of {count} elements: {stmt[:80]!r}")
    out = bytearray()
    for x in items:
        v = _initial_element(parse_operand(x, line, stmt), typ, x, line, stmt)
        out += v.to_bytes(typ.bytes, "little")
    return bytes(out) + bytes(typ.bytes * (count or 1) - len(out))


def _initial_element(op: Operand, typ: PtxType, x: str, line: int, stmt: str) -> int:
    """The bits one initial value stores in a variable of type ``typ`` (as ptxas
    assembles them): an integer literal is taken modulo 2^bits and may initialise
    integer and bit-size types only; a floating-point literal initialises .f32, .f64
    and bit-size types only: a 64-bit variable takes the literal's bits (a 0f literal
    zero-extended), a variable of 32 bits or fewer the literal rounded to .f32 (to
    nearest even; a 0f literal as it is), truncated to its width. .f16/.bf16 variables
    cannot be initialised."""
    def refuse(why: str) -> PtxSyntaxError:
        return PtxSyntaxError(f"line {line}: initial value {x!r} of a .{typ.name} variable: "
                              f"{why}: {stmt[:80]!r}")
    if typ.kind == "f" and typ.bits not in (32, 64):
        raise refuse(f"no initial value is allowed for .{typ.name}")
    if isinstance(op, Imm):
        if typ.kind == "f":
            raise refuse("an integer literal does not initialise a floating-point variable "
                         "(write 1.0 or 0f3F800000)")
        return op.value % (1 << typ.bits)
    if not isinstance(op, FImm):
        raise UnsupportedPtxError(f"line {line}: initial value {x!r} (only integer and "
                                  f"floating-point literals are supported): {stmt[:80]!r}")
    if typ.kind in ("u", "s"):
        raise refuse("a floating-point literal does not initialise an integer variable")
    if typ.bits == 64:
        return op.bits
    bits = op.bits if op.width == 32 else f64_bits_to_f32_bits(op.bits)
    return bits & ((1 << typ.bits) - 1)


def f64_bits_to_f32_bits(bits: int) -> int:
    """The bits of the .f32 nearest (ties to even) to the double with bits ``bits``;
    too large a value becomes an infinity."""
    with np.errstate(over="ignore"):
        f = np.array(bits, dtype=np.uint64).view(np.float64).astype(np.float32)
    return int(f.view(np.uint32))


def _parse_params(text: str, line: int, kname: str) -> list[Param]:
    """Kernel parameters (PTX ISA 5.1.6.1): ``.param .u64 p``, ``.param .u64 .ptr
    .global .align 4 p`` and by-value aggregates ``.param .align 4 .b8 p[12]``; laid out
    in order, each at its alignment."""
    params: list[Param] = []
    names: set[str] = set()
    offset = 0
    for p in (_split_list(text, line, f"parameters of kernel {kname}")
              if text.strip() else []):
        q = " ".join(p.split())
        m = re.fullmatch(
            r"\.param((?:\s+\.align\s+\d+)?)\s+\.(\w+)((?:\s+\.ptr)?"
            r"(?:\s+\.(?:global|shared|const|local))?(?:\s+\.align\s+\d+)?)?"
            rf"\s+({_IDENT})\s*(?:\[(\d+)\])?", q)
        if not m:
            raise UnsupportedPtxError(f"line {line}: unsupported parameter {q!r} "
                                      f"of kernel {kname}")
        typ = ptx_type(m.group(2))
        if typ is None or typ.kind == "pred":
            raise UnsupportedPtxError(f"line {line}: parameter type .{m.group(2)} of "
                                      f"kernel {kname}")
        count = int(m.group(5)) if m.group(5) else 1
        for a in re.findall(r"\.align\s+(\d+)", (m.group(1) or "") + (m.group(3) or "")):
            _check_align(int(a), line, q)
        if count == 0:
            raise PtxSyntaxError(f"line {line}: parameter {m.group(4)} of kernel {kname} "
                                 "is an empty array")
        if m.group(4) in names:
            raise PtxSyntaxError(f"line {line}: parameter {m.group(4)} of kernel {kname} "
                                 "declared twice")
        am = re.search(r"\.align\s+(\d+)", m.group(1) or "")
        # .align after .ptr states the pointee's alignment, not the parameter's
        align = int(am.group(1)) if (am and m.group(5)) else typ.bytes
        offset = -(-offset // align) * align
        names.add(m.group(4))
        params.append(Param(m.group(4), typ, typ.bytes * count, align, offset))
        offset += typ.bytes * count
        if offset > MAX_PARAM_BYTES:
            raise UnsupportedPtxError(f"line {line}: the parameters of kernel {kname} "
                                      f"take more than {MAX_PARAM_BYTES} bytes")
    return params


_PERF_DIRECTIVES = ("maxntid", "reqntid", "minnctapersm", "maxnreg", "maxnctapersm",
                    "noreturn", "pragma", "explicitcluster", "reqnctapercluster",
                    "maxclusterrank")


def _parse_entry_header(stmt: str, line: int) -> KernelSource:
    m = re.fullmatch(rf"((?:\.(?:visible|weak)\s+)*)\.entry\s+({_IDENT})\s*\((.*?)\)(.*)",
                     stmt, re.S)
    if not m:
        raise PtxSyntaxError(f"line {line}: malformed .entry header {stmt[:80]!r}")
    if len(m.group(1).split()) > 1:
        raise PtxSyntaxError(f"line {line}: more than one linkage directive on kernel "
                             f"{m.group(2)}: {stmt[:80]!r}")
    k = KernelSource(m.group(2), line)
    k.params = _parse_params(m.group(3), line, k.name)
    rest = m.group(4).strip()
    pos = 0
    while pos < len(rest):
        d = _HEADER_DIRECTIVE.match(rest, pos)
        if d is None or d.end() == pos:
            raise PtxSyntaxError(f"line {line}: cannot parse {rest[pos:pos + 60]!r} in the "
                                 f"header of kernel {k.name}")
        if d.group(1) not in _PERF_DIRECTIVES:
            raise UnsupportedPtxError(f"line {line}: directive .{d.group(1)} on kernel "
                                      f"{k.name}")
        nums = tuple(int(x) for x in re.findall(r"\d+", d.group(2) or ""))
        _check_header_directive(d.group(1), nums, line, k)
        k.directives[d.group(1)] = nums
        pos = d.end()
    if "maxntid" in k.directives and "reqntid" in k.directives:
        raise PtxSyntaxError(f"line {line}: kernel {k.name} has both .maxntid and .reqntid "
                             "(PTX ISA 11.4: they conflict)")
    return k


#: the performance directives that take positive sizes, and how many (PTX ISA 11.4)
_DIRECTIVE_SIZES = {"maxntid": 3, "reqntid": 3, "minnctapersm": 1, "maxnreg": 1,
                    "maxnctapersm": 1, "reqnctapercluster": 3, "maxclusterrank": 1}


def _check_header_directive(name: str, nums: tuple[int, ...], line: int,
                            k: KernelSource) -> None:
    most = _DIRECTIVE_SIZES.get(name)
    if most is None:
        return
    if not 1 <= len(nums) <= most or any(x < 1 for x in nums):
        raise PtxSyntaxError(f"line {line}: .{name} of kernel {k.name} takes 1 to {most} "
                             f"positive values, got {', '.join(map(str, nums)) or 'none'}")


#: one performance-tuning directive of a kernel header (PTX ISA 11.4): a name and a
#: comma-separated list of integers, or a .pragma string list
_HEADER_DIRECTIVE = re.compile(
    r'\s*\.(\w+)(?:\s+([0-9]+(?:\s*,\s*[0-9]+)*)|\s+"[^"]*"(?:\s*,\s*"[^"]*")*)?\s*;?\s*')


# ------------------------------------------------------------------------------ module


def parse_ptx(text: str) -> ModuleSource:
    """Parse PTX text into a :class:`ModuleSource` (no semantic checks of opcodes)."""
    if not isinstance(text, str):
        raise TypeError(f"PTX text must be a str, got {type(text).__name__}")
    mod = ModuleSource()
    var_names: set[str] = set()
    seen_heads: set[str] = set()
    stmts = list(_statements(_strip_comments(text)))
    i = 0
    while i < len(stmts):
        line, s, term = stmts[i]
        i += 1
        if term == ":":
            raise PtxSyntaxError(f"line {line}: label {s!r} outside a kernel body")
        if term == "}":
            if s:
                raise PtxSyntaxError(f"line {line}: unexpected '}}' after {s!r}")
            raise PtxSyntaxError(f"line {line}: unbalanced '}}'")
        if term == "{":
            if s.startswith(".section"):
                # DWARF debug data (nvcc -G / -lineinfo): checked against its grammar,
                # then skipped (it has no semantics)
                depth = 1
                while depth and i < len(stmts):
                    if stmts[i][2] != ":":
                        _check_section_data(stmts[i][1], stmts[i][0])
                    depth += {"{": 1, "}": -1}.get(stmts[i][2], 0)
                    i += 1
                continue
            if re.search(r"\.entry\s", s):
                k = _parse_entry_header(s, line)
                if k.name in mod.kernels or k.name in var_names:
                    raise PtxSyntaxError(f"line {line}: kernel {k.name} defined twice (or "
                                         "with the name of a module variable)")
                i = _parse_body(stmts, i, k, mod)
                mod.kernels[k.name] = k
                continue
            if re.search(r"\.func\s", s):
                raise UnsupportedPtxError(f"line {line}: a .func definition left in the "
                                          "text (parse_ptx does not inline calls: load the "
                                          "module with load_ptx)")
            if not s:
                raise UnsupportedPtxError(f"line {line}: '{{' scope at module level")
            raise UnsupportedPtxError(f"line {line}: unsupported module-level block {s[:60]!r}")
        # ';'-terminated module-level statement
        if not s:
            raise PtxSyntaxError(f"line {line}: empty statement (a ';' with nothing before it)")
        words = s.split()
        head = words[0]
        if head in LINE_DIRECTIVES:
            check_line_directive(s, line)
        if head in (".version", ".target", ".address_size") and head in seen_heads:
            raise PtxSyntaxError(f"line {line}: a second {head} directive")
        seen_heads.add(head)
        if head == ".version":
            mod.version = words[1] if len(words) > 1 else ""
        elif head == ".target":
            mod.target = " ".join(words[1:])
        elif head == ".address_size":
            mod.address_size = int(words[1])
            if mod.address_size != 64:
                raise UnsupportedPtxError(f"line {line}: only .address_size 64 is "
                                          "supported")
        elif head in (".file", ".loc"):
            continue
        elif re.match(r"(\.extern\s+|\.visible\s+)*\.shared\b", s):
            _add_module_variable(mod, _parse_variable(s, line), line, var_names)
        elif re.match(r"\.extern\s+\.func|\.extern\s+\.entry|(\.weak\s+)?\.func", s):
            continue  # a declaration only; a call to it is refused
        elif re.match(r"(\.visible\s+|\.extern\s+|\.weak\s+)*\.(global|const)\b", s):
            _add_module_variable(mod, _parse_variable(s, line), line, var_names)
        else:
            raise UnsupportedPtxError(f"line {line}: unsupported directive {s[:80]!r}")
    return mod


#: one line of a ``.section`` (PTX ISA 11.5.2): ``.b8/.b16/.b32/.b64`` and a list of
#: integers or labels (a label with an optional ``+offset``)
_SECTION_ITEM = r"(?:0[xX][0-9a-fA-F]+|[0-9]+|[A-Za-z_$.][\w$.]*(?:\+[0-9]+)?)"
_SECTION_LINE = re.compile(rf"\.b(?:8|16|32|64)[ \t]+{_SECTION_ITEM}"
                           rf"(?:[ \t]*,[ \t]*{_SECTION_ITEM})*")


def _check_section_data(text: str, line: int) -> None:
    """Refuse a line of a debug section that is not ``.bN value, ...``."""
    for k, ln in enumerate(text.split("\n")):
        if ln.strip() and not _SECTION_LINE.fullmatch(ln.strip()):
            raise PtxSyntaxError(f"line {line + k}: malformed .section data {ln.strip()[:60]!r}")


def _add_module_variable(mod: ModuleSource, v: Variable, line: int, seen: set[str]) -> None:
    if v.name in seen or v.name in mod.kernels:
        raise PtxSyntaxError(f"line {line}: module variable {v.name} declared twice (or "
                             "with the name of a kernel)")
    seen.add(v.name)
    mod.variables.append(v)


def _scope_labels(stmts: list, i: int, kname: str) -> list[set[str]]:
    """The labels of each ``{ }`` scope of the kernel body starting at ``stmts[i]``,
    scopes numbered in the order they open (0: the body itself). A label may be used
    before its definition, in its scope and the scopes nested in it (PTX ISA 4.4: a
    label in a nested scope is visible there only and hides one of the same name
    outside); two labels of one name in one scope are a PtxSyntaxError."""
    labels: list[set[str]] = [set()]
    stack = [0]
    for line, s, term in itertools.islice(stmts, i, None):
        if term == ":":
            if s in labels[stack[-1]]:
                raise PtxSyntaxError(f"line {line}: label {s} defined twice in one scope "
                                     f"of kernel {kname}")
            labels[stack[-1]].add(s)
        elif term == "{":
            stack.append(len(labels))
            labels.append(set())
        elif term == "}":
            stack.pop()
            if not stack:
                break
    return labels


class _Names:
    """The names a kernel body declares, scope by scope (PTX ISA 4.4, 5.4: registers,
    variables, parameters and labels share one name space per scope; a name declared
    in a nested scope hides the same name outside it). Names of nested scopes get an
    internal suffix ``#<scope>`` so that they are unique in the kernel."""

    def __init__(self, labels: list[set[str]], params: list[Param], kname: str) -> None:
        self.labels = labels
        self.kname = kname
        self.stack = [0]
        self.decls: list[dict[str, tuple[str, str]]] = [{}]
        self.opened = 0
        for p in params:
            self.decls[0][p.name] = ("param", p.name)

    def open(self) -> None:
        self.opened += 1
        self.stack.append(self.opened)
        self.decls.append({})

    def close(self) -> bool:
        """Leave the innermost scope; True when it was the kernel body."""
        self.stack.pop()
        self.decls.pop()
        return not self.stack

    @property
    def nested(self) -> bool:
        return len(self.stack) > 1

    def internal(self, name: str) -> str:
        return f"{name}#{self.stack[-1]}" if self.nested else name

    def declare(self, name: str, kind: str, line: int) -> str:
        """Declare a register (``kind`` "reg") or variable ("var") in the innermost
        scope; its internal name."""
        here = self.decls[-1]
        if name in here or (kind == "var" and name in self.labels[self.stack[-1]]):
            raise PtxSyntaxError(f"line {line}: {name} declared twice in one scope of "
                                 f"kernel {self.kname}")
        here[name] = (kind, self.internal(name))
        return here[name][1]

    def label(self, name: str, line: int) -> str:
        kind = self.decls[-1].get(name, ("",))[0]
        if kind in ("var", "param"):
            raise PtxSyntaxError(f"line {line}: label {name} has the name of a "
                                 f"{'variable' if kind == 'var' else 'parameter'} of "
                                 f"kernel {self.kname}")
        return self.internal(name)

    def resolve(self, name: str) -> tuple[str, str] | None:
        """(kind, internal name) of ``name`` as the innermost scope sees it."""
        for depth in range(len(self.stack) - 1, -1, -1):
            d = self.decls[depth].get(name)
            if d is not None:
                return d
            if name in self.labels[self.stack[depth]]:
                return ("label", name if depth == 0 else f"{name}#{self.stack[depth]}")
        return None

    def fix(self, op: Operand) -> Operand:
        """``op`` with its names replaced by their internal names."""
        if isinstance(op, Reg):
            r = self.resolve(op.name)
            return Reg(r[1], op.neg) if r and r[0] == "reg" else op
        if isinstance(op, Sym):
            r = self.resolve(op.name)
            if r is None or r[0] == "param":
                return op
            # a register declared without '%' (inline asm) is a register operand
            return Reg(r[1]) if r[0] == "reg" else Sym(r[1])
        if isinstance(op, Addr) and op.base is not None:
            base = self.fix(op.base)
            return op if base == op.base else Addr(base, op.offset)
        if isinstance(op, Vec):
            return Vec(tuple(self.fix(x) for x in op.items))
        if isinstance(op, Pair):
            return Pair(self.fix(op.first), self.fix(op.second))
        return op


def _parse_body(stmts: list, i: int, k: KernelSource, mod: ModuleSource) -> int:
    names = _Names(_scope_labels(stmts, i, k.name), k.params, k.name)
    pending_labels: list[str] = []
    totals: dict[str, int] = {}
    while i < len(stmts):
        line, s, term = stmts[i]
        i += 1
        if term == ":":
            pending_labels.append(names.label(s, line))
            continue
        if term == "{":
            if s:
                raise PtxSyntaxError(f"line {line}: unexpected {s!r} before '{{'")
            names.open()
            continue
        if term == "}":
            if s:
                raise PtxSyntaxError(f"line {line}: missing ';' after {s!r}")
            if names.close():
                for lab in pending_labels:
                    k.labels[lab] = len(k.instructions)
                return i
            continue
        if not s:
            if stmts[i - 2][2] == "}":
                continue  # '{ ... };': ptxas refuses the ';', harmless (test harnesses)
            raise PtxSyntaxError(f"line {line}: empty statement (a ';' with nothing before "
                                 f"it) in kernel {k.name}")
        if s.startswith("."):
            _parse_body_directive(s, line, k, names, totals)
            continue
        inst = _parse_instruction(s, line)
        inst = Instruction(inst.line, inst.text, inst.opcode, inst.parts,
                           tuple(names.fix(o) for o in inst.operands),
                           names.fix(inst.guard) if inst.guard else None)
        for lab in pending_labels:
            k.labels[lab] = len(k.instructions)
        pending_labels = []
        k.instructions.append(inst)
    raise PtxSyntaxError(f"line {k.line}: body of kernel {k.name} is not closed by '}}'")


def _parse_body_directive(s: str, line: int, k: KernelSource, names: _Names,
                          totals: dict[str, int]) -> None:
    """One declaration or directive statement of a kernel body."""
    # '.reg.b16 hl, hu' (no space, as in cuda_fp16's h2sqrt inline asm)
    s = re.sub(r"^\.(reg|local|shared)\.", r".\1 .", s)
    head = s.split()[0]
    if head == ".reg":
        for name, typ in _parse_reg_decl(s, line):
            k.registers[names.declare(name, "reg", line)] = typ
        if len(k.registers) > MAX_REGISTERS:
            raise UnsupportedPtxError(
                f"line {line}: kernel {k.name} declares more than {MAX_REGISTERS} "
                "registers (counting those of every inlined call)")
    elif head == ".extern":
        raise PtxSyntaxError(f"line {line}: an .extern variable is declared at module "
                             f"scope, not in kernel {k.name}: {s[:80]!r}")
    elif head in (".shared", ".local"):
        v = _parse_variable(s, line)
        v = replace(v, name=names.declare(v.name, "var", line))
        k.variables.append(v)
        totals[v.space] = totals.get(v.space, 0) + v.nbytes
        if totals[v.space] > MAX_VARIABLE_BYTES[v.space]:
            raise UnsupportedPtxError(
                f"line {line}: the .{v.space} variables of kernel {k.name} take "
                f"{totals[v.space]} bytes, more than the {MAX_VARIABLE_BYTES[v.space]} "
                f"bytes {_LIMIT_SOURCE[v.space]}")
    elif head in (".loc", ".file"):
        check_line_directive(s, line)
    elif head == ".pragma":
        _check_pragma(s, line)
    elif head == ".param" and names.nested:
        # the start of nvcc's call sequence ({ .param ...; st.param; call ...})
        raise UnsupportedPtxError(
            f"line {line}: {s[:60]!r} in kernel {k.name} begins a call sequence "
            "that was not inlined (load the module with load_ptx, which inlines "
            "calls to the .func functions the module defines)")
    else:
        raise UnsupportedPtxError(f"line {line}: unsupported directive {s[:80]!r} "
                                  f"in kernel {k.name}")


_UNSUPPORTED_OPCODES = {
    "tex": "texture instructions are not supported",
    "tld4": "texture instructions are not supported",
    "txq": "texture instructions are not supported",
    "suld": "surface instructions are not supported",
    "sust": "surface instructions are not supported",
    "sured": "surface instructions are not supported",
    "suq": "surface instructions are not supported",
}


#: modifiers an instruction can carry at most once (PTX ISA 9.7: state spaces,
#: rounding, flush and saturation, ordering and scope, cache operators, vector widths);
#: types and matrix layouts may repeat (``cvt.rni.f32.f32``, ``wmma.mma.sync.row.row``)
_SINGLE_MODIFIERS = frozenset(
    "global shared local param const generic rn rz rm rp rni rzi rmi rpi ftz sat satfinite "
    "approx full sync aligned uni volatile relaxed acquire release acq_rel sc weak wide hi "
    "lo cc nc ca cg cs lu cv wb wt v2 v4 v8 relu up down bfly idx clamp wrap shiftamt "
    "cta gpu sys cluster to eq ne lt le gt ge ls hs equ neu ltu leu gtu geu num nan and or "
    "xor async".split())
#: state spaces, and the instructions that name at most one (PTX ISA 9.7.9)
_SPACES = frozenset("global shared local param const generic".split())
_ONE_SPACE = frozenset("ld st ldu atom red prefetch".split())
#: a part shaped like a type (``.b97``, ``.u7``) whose width no PTX type has
_BAD_WIDTH = re.compile(r"[bsuf](?!(?:1|2|4|6|8|16|32|64|128)$)(?!1024$)[0-9]+")  # .b1024: tensormap


def _check_modifiers(parts: tuple[str, ...], line: int, text: str) -> None:
    """Refuse an empty modifier (``add..s32``) and one of :data:`_SINGLE_MODIFIERS`
    given twice (``ld.global.global.u32``)."""
    if any(not p for p in parts):
        raise PtxSyntaxError(f"line {line}: empty modifier in {text!r}")
    if parts[0] in _ONE_SPACE and sum(p.split("::")[0] in _SPACES for p in parts[1:]) > 1:
        raise PtxSyntaxError(f"line {line}: more than one state space in {text!r}")
    seen: set[str] = set()
    for p in parts[1:]:
        if _BAD_WIDTH.fullmatch(p):
            raise PtxSyntaxError(f"line {line}: .{p} is not a type (no PTX type has that "
                                 f"width) in {text!r}")
        if p in seen and p in _SINGLE_MODIFIERS:
            raise PtxSyntaxError(f"line {line}: modifier .{p} given twice in {text!r}")
        seen.add(p)


#: the instructions whose scalar form takes a one-element vector operand as its register
_ONE_ELEMENT_VECTOR_OPS = frozenset({"ld", "ldu", "st"})


def _parse_instruction(s: str, line: int) -> Instruction:
    text = " ".join(s.split())
    guard = None
    rest = text
    m = re.match(r"@\s*(!?)\s*(%?[A-Za-z_$][\w$]*)\s+(.*)", rest, re.S)
    if m:
        guard = Reg(m.group(2), m.group(1) == "!")
        rest = m.group(3)
    m = re.match(r"([a-z][\w.:]*)\s*(.*)", rest, re.S)
    if not m:
        raise PtxSyntaxError(f"line {line}: cannot parse instruction {text!r}")
    opcode, ops = m.group(1), m.group(2).strip()
    parts = tuple(opcode.split("."))
    _check_modifiers(parts, line, text)
    if parts[0] in _UNSUPPORTED_OPCODES:
        raise UnsupportedPtxError(f"line {line}: {text!r}: {_UNSUPPORTED_OPCODES[parts[0]]}")
    toks = _split_list(ops, line, "operands") if ops else []
    if parts[0] == "call":
        # call{.uni} (ret), func, (args) (PTX ISA 9.7.12.2): the lists become Vec operands
        operands = tuple(
            Vec(tuple(parse_operand(x, line, text)
                      for x in _split_list(o[1:-1], line, "call arguments")))
            if o.startswith("(") and o.endswith(")") else parse_operand(o, line, text)
            for o in toks)
    else:
        operands = tuple(parse_operand(o, line, text) for o in toks)
        if parts[0] in _ONE_ELEMENT_VECTOR_OPS and not any(p in ("v2", "v4", "v8")
                                                           for p in parts[1:]):
            # a scalar ld/st may name its register as a one-element vector, { %r1 }
            # (ptxas accepts it and Triton writes every scalar access so); it is that
            # register. With .v2/.v4 the element count must still match.
            operands = tuple(o.items[0] if isinstance(o, Vec) and len(o.items) == 1 else o
                             for o in operands)
    return Instruction(line, text, opcode, parts, operands, guard)
