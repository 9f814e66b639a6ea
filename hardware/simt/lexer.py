"""PTX text into statements and operands (PTX ISA chapter 4): comments, the line
directives whose grammar ends a statement, and every operand form with its literals
(integers are 64-bit, decimal floats are doubles, address offsets modulo 2^64)."""
from __future__ import annotations

import math
import re
import struct
from typing import Iterator

from .errors import PtxSyntaxError, UnsupportedPtxError
from .syntax import Addr, FImm, Imm, Operand, Pair, Reg, Sink, Sym, TensorAddr, Vec


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
