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

The parsed form is :mod:`hardware.simt.syntax`, statements and operands are scanned by
:mod:`hardware.simt.lexer` and declarations read by :mod:`hardware.simt.declarations`;
their public names are importable from here.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import replace

from .declarations import (MAX_PARAM_BYTES, MAX_REGISTERS, MAX_VARIABLE_BYTES,  # noqa: F401
                           _LIMIT_SOURCE, _parse_entry_header, _parse_reg_decl, _parse_variable)
from .errors import PtxSyntaxError, UnsupportedPtxError
from .lexer import (LINE_DIRECTIVES, _check_pragma, _split_list, _statements,  # noqa: F401
                    _strip_comments, check_line_directive, decimal_float, parse_operand)
# the parsed form lives in .syntax; importable from here as before
from .syntax import (SPECIAL_REGISTERS, Addr, FImm, Imm, Instruction, KernelSource,  # noqa: F401
                     ModuleSource, Operand, Pair, Param, Reg, Sink, Sym, TensorAddr, Variable,
                     Vec)

__all__ = [
    "Reg", "Imm", "FImm", "Sym", "Addr", "Vec", "Pair", "Sink", "TensorAddr", "Operand",
    "Instruction", "Param", "Variable", "KernelSource", "ModuleSource", "parse_ptx",
    "SPECIAL_REGISTERS",
]


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
        if s.startswith(".branchtargets"):
            # label: .branchtargets L1, ..., Ln; (PTX ISA 11.5.1): the list brx.idx reads
            if not pending_labels:
                raise PtxSyntaxError(f"line {line}: .branchtargets needs a label before "
                                     "it")
            targets = []
            for name in (x.strip() for x in s[len(".branchtargets"):].split(",")):
                r = names.resolve(name)
                if not name or r is None or r[0] != "label":
                    raise PtxSyntaxError(f"line {line}: .branchtargets lists {name!r}, "
                                         "which is not a label of the kernel")
                targets.append(r[1])
            # the list's own label is the last one before it; earlier ones label the
            # next instruction
            k.branch_tables[pending_labels.pop()] = tuple(targets)
            continue
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
