"""Device-function calls, by inlining: the PTX text is rewritten so that every ``call`` is
replaced by the body of the ``.func`` it names, before parsing.

PTX ISA 9.7.12.2 (call) and 5.1.6 (parameter state space): nvcc passes arguments through
``.param`` variables declared in a scope around the call (its *call sequence*)::

    { .param .b64 param0; st.param.f64 [param0+0], %fd2;
      .param .align 8 .b8 retval0[16];
      call.uni (retval0), f, (param0);
      ld.param.f64 %fd3, [retval0+0]; }

and the callee reads its formal parameters with ``ld.param`` and writes its return
parameters with ``st.param``. The rewrite gives each call site its own per-thread
storage: the call sequence's ``.param`` variables become ``.local`` variables with names
unique to the site, the callee's formal names are replaced by them, its ``ld.param`` /
``st.param`` become ``ld.local`` / ``st.local``, its labels and ``.local`` arrays are
renamed per site, ``ret`` becomes a branch to the end of the inlined body, and the body
is wrapped in a ``{ }`` scope (so its register declarations are its own). The inlined
text is put on the line of the ``call``, and every removed ``.func`` definition is
replaced by as many empty lines, so that line numbers in messages stay those of the
source. Recursion is refused.
"""
from __future__ import annotations

import re

from .errors import PtxSyntaxError, UnsupportedPtxError

__all__ = ["inline_calls"]

_ID = r"[A-Za-z_$%][\w$]*"
_FUNC = re.compile(
    rf"((?:\.(?:visible|weak|extern)\s+)*)\.func\s*(\([^)]*\))?\s*({_ID})\s*(\([^)]*\))?"
    r"\s*((?:\.noreturn\s*)?)([{;])")
_CALL = re.compile(
    rf"(@!?{_ID}\s+)?\bcall(?:\.uni)?\s+(?:\(\s*([^)]*?)\s*\)\s*,\s*)?({_ID})"
    r"\s*(?:,\s*\(\s*([^)]*?)\s*\))?\s*(?:,\s*[^;]*)?;")
_PARAM_DECL = re.compile(
    rf"\.param\s+((?:\.align\s+\d+\s+)?)\.(\w+)\s+({_ID})(\s*\[\s*\d+\s*\])?\s*;")
_MAX_DEPTH = 16


def _names(plist: str | None) -> list[str]:
    """Parameter names of a ``.func`` header's list, in order."""
    if not plist:
        return []
    out = []
    for p in plist.strip()[1:-1].split(","):
        m = re.search(rf"({_ID})\s*(?:\[\s*\d+\s*\])?\s*$", p.strip())
        if p.strip():
            if not m:
                raise PtxSyntaxError(f"malformed .func parameter {p.strip()!r}")
            out.append(m.group(1))
    return out


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _matching_brace(text: str, open_pos: int) -> int:
    depth = 0
    for i in range(open_pos, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise PtxSyntaxError(f"line {_line_of(text, open_pos)}: unbalanced '{{'")


def _sub_word(name: str, new: str, text: str) -> str:
    return re.sub(rf"(?<![\w$%]){re.escape(name)}(?![\w$])", new, text)


def inline_calls(text: str) -> str:
    """``text`` with every device-function call replaced by the callee's body (see the
    module docstring); text without ``.func`` definitions is returned unchanged."""
    if ".func" not in text:
        return text
    text = _strip(text)     # comments would swallow the rest of an inlined line
    funcs: dict[str, tuple[list[str], list[str], str, int]] = {}
    out = []
    pos = 0
    for m in _FUNC.finditer(text):
        if m.start() < pos:
            continue
        if m.group(6) == ";":
            continue                       # a prototype
        close = _matching_brace(text, m.end() - 1)
        name = m.group(3)
        if name in funcs:
            raise PtxSyntaxError(f"line {_line_of(text, m.start())}: .func {name} "
                                 "defined twice")
        funcs[name] = (_names(m.group(2)), _names(m.group(4)), text[m.end():close],
                       _line_of(text, m.start()))
        out.append(text[pos:m.start()])
        out.append("\n" * text.count("\n", m.start(), close + 1))
        pos = close + 1
    if not funcs:
        return text
    out.append(text[pos:])
    return _expand("".join(out), funcs, [0], ())


def _strip(text: str) -> str:
    from .parser import _strip_comments
    return _strip_comments(text)


def _expand(text: str, funcs: dict, counter: list[int], stack: tuple[str, ...]) -> str:
    """Inline every call in ``text`` (a kernel or function body, comments removed)."""
    while True:
        m = _CALL.search(text)
        if m is None:
            return text
        line = _line_of(text, m.start())
        if m.group(1):
            raise UnsupportedPtxError(f"line {line}: a predicated call is not supported")
        name = m.group(3)
        if name not in funcs:
            raise UnsupportedPtxError(f"line {line}: call to {name}, which is declared but "
                                      "not defined in this module (or is indirect)")
        if name in stack or len(stack) >= _MAX_DEPTH:
            raise UnsupportedPtxError(f"line {line}: recursive call to {name} is not "
                                      "supported")
        counter[0] += 1
        site = f"__inl{counter[0]}"
        rets = [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
        args = [x.strip() for x in (m.group(4) or "").split(",") if x.strip()]
        f_rets, f_params, body, _ = funcs[name]
        if len(rets) != len(f_rets) or len(args) != len(f_params):
            raise PtxSyntaxError(f"line {line}: call to {name} with {len(rets)} return and "
                                 f"{len(args)} argument parameters; the .func has "
                                 f"{len(f_rets)} and {len(f_params)}")
        # the callee, with its own calls inlined first
        inner = _expand(body, funcs, counter, stack + (name,))
        labels = re.findall(rf"(?:^|[;{{}}\s])({_ID})\s*:(?!:)", inner)
        for lab in set(labels):
            inner = _sub_word(lab, f"{lab}{site}", inner)
        for var in set(re.findall(rf"\.local\s+[^;]*?({_ID})\s*(?:\[[^\]]*\])?\s*;", inner)):
            inner = _sub_word(var, f"{var}{site}", inner)
        for formal, actual in zip(f_params + f_rets, args + rets):
            inner = _sub_word(formal, f"{actual}{site}", inner)
        inner = re.sub(r"\b(ld|st)\.param\b", r"\1.local", inner)
        end = f"$Lret{site}"
        inner = re.sub(r"(?<![\w.$])ret(\.uni)?\s*;", f"bra {end};", inner)
        inlined = "{ " + inner.replace("\n", " ") + f" }} {end}: "
        # the call sequence around the call: its .param variables become .local ones
        open_pos = -1
        depth = 0
        for i in range(m.start() - 1, -1, -1):
            if text[i] == "}":
                depth += 1
            elif text[i] == "{":
                if depth == 0:
                    open_pos = i
                    break
                depth -= 1
        else:
            open_pos = -1
        if open_pos < 0:
            raise UnsupportedPtxError(f"line {line}: call outside a call-sequence scope")
        close = _matching_brace(text, open_pos)
        seq_before = text[open_pos:m.start()]
        seq_after = text[m.end():close + 1]
        call_text = text[m.start():m.end()]
        seq = seq_before + "\x00" + seq_after
        for d in _PARAM_DECL.finditer(seq_before + seq_after):
            seq = _sub_word(d.group(3), f"{d.group(3)}{site}", seq)
        seq = seq.replace(".param", ".local")
        seq = seq.replace("\x00", inlined + "\n" * call_text.count("\n"))
        text = text[:open_pos] + seq + text[close + 1:]
