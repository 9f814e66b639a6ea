"""PTX declarations (PTX ISA chapters 5 and 11): ``.reg`` lists, ``.shared``/``.local``/
``.global``/``.const`` variables with their alignment and typed initialisers, kernel
parameter lists and the entry header's performance directives, each checked against the
CUDA limits (:data:`MAX_REGISTERS`, :data:`MAX_VARIABLE_BYTES`, :data:`MAX_PARAM_BYTES`)
as ptxas checks them."""
from __future__ import annotations

import re

import numpy as np

from .errors import PtxSyntaxError, UnsupportedPtxError
from .lexer import _IDENT, _split_list, parse_operand
from .syntax import FImm, Imm, KernelSource, Operand, Param, Variable
from .types import PtxType, ptx_type


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
