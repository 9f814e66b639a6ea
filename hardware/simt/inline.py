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
source. Recursion, indirect calls (through a function pointer, with a prototype) and
predicated calls are refused, and so are calls to functions the module only declares,
except the CUDA runtime's ``vprintf`` and ``__assertfail``: their call sequences keep
the ``call`` (its parameters turned into site-local ``.local`` variables), which
:mod:`hardware.simt.device_runtime` executes. Each function is rewritten once into a
template (its site-local names carrying a placeholder for the call site), so inlining
takes time proportional to the inlined text: each call of the call tree becomes its own
copy, up to :data:`MAX_INLINED_CHARS`.
"""
from __future__ import annotations

import re

from .errors import PtxSyntaxError, UnsupportedPtxError
from .parser import _strip_comments
from .types import ptx_type

__all__ = ["inline_calls"]

_ID = r"[A-Za-z_$%][\w$]*"
_FUNC = re.compile(
    rf"((?:\.(?:visible|weak|extern)\s+)*)\.func\s*(\([^)]*\))?\s*({_ID})\s*(\([^)]*\))?"
    r"\s*((?:\.noreturn\s*)?)([{;])")
_CALL = re.compile(
    rf"(@!?{_ID}\s+)?(?<![\w.$])call(?:\.uni)?\s+(?:\(\s*([^)]*?)\s*\)\s*,\s*)?({_ID})"
    r"\s*(?:,\s*\(\s*([^)]*?)\s*\))?\s*(,\s*[^;]*)?;")
_PARAM_DECL = re.compile(
    rf"\.param\s+((?:\.align\s+\d+\s+)?)\.(\w+)\s+({_ID})(\s*\[\s*\d+\s*\])?\s*;")


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


#: one parameter of a .func header (PTX ISA 11.2.2 and 5.1.6)
_FUNC_PARAM = re.compile(
    rf"\.(?:param|reg)\s+(?:\.align\s+\d+\s+)?\.\w+\s+"
    rf"(?:\.ptr\s+(?:\.(?:global|shared|const|local)\s+)?(?:\.align\s+\d+\s+)?)?"
    rf"{_ID}\s*(?:\[\s*\d*\s*\])?")


def _check_param_list(plist: str | None, line: int, name: str) -> None:
    """Refuse a .func parameter list with an item its grammar does not consume."""
    if not plist or not plist.strip()[1:-1].strip():
        return
    for p in plist.strip()[1:-1].split(","):
        if not _FUNC_PARAM.fullmatch(p.strip()):
            raise PtxSyntaxError(f"line {line}: malformed parameter {p.strip()[:60]!r} of "
                                 f".func {name}")


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


def _rename(text: str, mapping: dict[str, str]) -> str:
    """Every whole-word occurrence of a key of ``mapping`` replaced by its value, all at
    once (one pass, so that a new name can never be renamed again)."""
    if not mapping:
        return text
    alt = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    return re.sub(rf"(?<![\w$%])({alt})(?![\w$])", lambda m: mapping[m.group(1)], text)


#: functions the CUDA runtime provides and the interpreter implements itself
#: (:mod:`hardware.simt.device_runtime`): their call sequences stay calls
BUILTIN_FUNCTIONS = ("vprintf", "__assertfail")
#: placeholder for the call-site suffix inside a function's template
_SITE = "\x01"
#: bound on the size of the inlined text (a deep call tree with fan-out grows
#: exponentially: each call of the tree becomes its own copy)
MAX_INLINED_CHARS = 32 << 20


def inline_calls(text: str) -> str:
    """``text`` with every device-function call replaced by the callee's body (see the
    module docstring); text without ``.func`` definitions is returned unchanged.

    Each function is rewritten once into a template whose call-site names carry a
    placeholder, so inlining costs time proportional to the size of the result (the
    call tree times the size of the functions), not to its square."""
    if ".func" not in text and "call" not in text:
        return text
    text = _strip(text)     # comments would swallow the rest of an inlined line
    funcs: dict[str, tuple[list[str], list[str], str, int]] = {}
    prototypes: dict[str, int] = {}
    out = []
    pos = 0
    for m in _FUNC.finditer(text):
        if m.start() < pos:
            continue
        for plist in (m.group(2), m.group(4)):
            _check_param_list(plist, _line_of(text, m.start()), m.group(3))
        for t in re.findall(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)",
                            (m.group(2) or "") + (m.group(4) or "")):
            if ptx_type(t) is None or t == "pred":
                raise PtxSyntaxError(f"line {_line_of(text, m.start())}: parameter type .{t} "
                                     f"of .func {m.group(3)}")
        for a in re.findall(r"\.align\s+(\d+)", (m.group(2) or "") + (m.group(4) or "")):
            if int(a) < 1 or int(a) & (int(a) - 1):
                raise PtxSyntaxError(f"line {_line_of(text, m.start())}: .align {a} is not a "
                                     f"power of two in the parameters of .func {m.group(3)}")
        if m.group(6) == ";":
            if ".extern" not in m.group(1):
                prototypes.setdefault(m.group(3), _line_of(text, m.start()))
            continue                       # a prototype
        close = _matching_brace(text, m.end() - 1)
        name = m.group(3)
        if name in funcs:
            raise PtxSyntaxError(f"line {_line_of(text, m.start())}: .func {name} "
                                 "defined twice")
        if name in BUILTIN_FUNCTIONS:
            raise UnsupportedPtxError(f"line {_line_of(text, m.start())}: .func {name} "
                                      "redefines a CUDA runtime function")
        funcs[name] = (_names(m.group(2)), _names(m.group(4)), text[m.end():close],
                       _line_of(text, m.end()))
        out.append(text[pos:m.start()])
        out.append("\n" * text.count("\n", m.start(), close + 1))
        pos = close + 1
    for name, line in prototypes.items():
        if name not in funcs:
            raise PtxSyntaxError(f"line {line}: .func {name} is declared but never defined "
                                 "(declare an external function with .extern .func)")
    if not funcs and not _CALL.search(text):
        return text
    out.append(text[pos:])
    return _Inliner(funcs).expand("".join(out), 1, "__inl", ())


def _strip(text: str) -> str:
    return _strip_comments(text)


class _Inliner:
    def __init__(self, funcs: dict) -> None:
        self.funcs = funcs
        self.templates: dict[str, str] = {}
        self.size = 0

    def template(self, name: str, stack: tuple[str, ...], line: int) -> str:
        """The body of ``name`` ready to paste at a call site: one line, ``{ }`` scoped,
        its site-local names suffixed with the placeholder :data:`_SITE`."""
        if name in stack:
            raise UnsupportedPtxError(f"line {line}: recursive call to {name} is not "
                                      "supported")
        t = self.templates.get(name)
        if t is not None:
            return t
        f_rets, f_params, body, body_line = self.funcs[name]
        labels = re.findall(rf"(?:^|[;{{}}\s])({_ID})\s*:(?!:)", body)
        local_vars = re.findall(rf"\.local\s+[^;]*?({_ID})\s*(?:\[[^\]]*\])?\s*;", body)
        mapping = {x: f"{x}{_SITE}" for x in set(labels) | set(local_vars)
                   | set(f_params) | set(f_rets)}
        body = _rename(body, mapping)
        # the callee's own ld/st.param are its formal parameters; those of its call
        # sequences become .local too, with them
        body = re.sub(r"\b(ld|st)\.param\b", r"\1.local", body)
        end = f"$Lret{_SITE}"
        body = re.sub(r"(?<![\w.$])ret(\.uni)?\s*;", f"bra {end};", body)
        body = self.expand(body, body_line, _SITE + "_", stack + (name,))
        t = "{ " + body.replace("\n", " ") + f" }} {end}: "
        self.templates[name] = t
        return t

    def expand(self, text: str, line0: int, prefix: str, stack: tuple[str, ...]) -> str:
        """Inline every call in ``text`` (a kernel or function body, comments removed,
        starting on line ``line0``); call site ``j`` gets the suffix ``prefix + j``."""
        out: list[str] = []
        pos = 0
        line = line0
        counted = 0
        for j, m in enumerate(_CALL.finditer(text), 1):
            line += text.count("\n", counted, m.start())
            counted = m.start()
            if m.start() < pos:
                raise UnsupportedPtxError(f"line {line}: two calls in one call sequence")
            if m.group(1):
                raise UnsupportedPtxError(f"line {line}: a predicated call is not supported")
            if m.group(5):
                raise UnsupportedPtxError(f"line {line}: an indirect call (through a "
                                          "function pointer) is not supported")
            name = m.group(3)
            builtin = name in BUILTIN_FUNCTIONS
            if name not in self.funcs and not builtin:
                raise UnsupportedPtxError(
                    f"line {line}: call to {name}, which this module declares but does not "
                    "define (an external function; calls are supported to the .func "
                    "functions a module defines and to the CUDA runtime's "
                    f"{' and '.join(BUILTIN_FUNCTIONS)})")
            site = f"{prefix}{j}"
            rets = [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
            args = [x.strip() for x in (m.group(4) or "").split(",") if x.strip()]
            # the call sequence around the call: its .param variables become .local ones
            depth = 0
            open_pos = -1
            for i in range(m.start() - 1, pos - 1, -1):
                if text[i] == "}":
                    depth += 1
                elif text[i] == "{":
                    if depth == 0:
                        open_pos = i
                        break
                    depth -= 1
            if open_pos < 0:
                raise UnsupportedPtxError(f"line {line}: call outside a call-sequence scope")
            close = _matching_brace(text, open_pos)
            call_text = text[m.start():m.end()]
            if builtin:
                renamed = {a: f"{a}{site}" for a in rets + args}
                ret_list = f"({', '.join(renamed[a] for a in rets)}), " if rets else ""
                inlined = (f"call.uni {ret_list}{name}, "
                           f"({', '.join(renamed[a] for a in args)});")
            else:
                f_rets, f_params, _, _ = self.funcs[name]
                if len(rets) != len(f_rets) or len(args) != len(f_params):
                    raise PtxSyntaxError(
                        f"line {line}: call to {name} with {len(rets)} return and "
                        f"{len(args)} argument parameters; the .func has {len(f_rets)} "
                        f"and {len(f_params)}")
                if len(set(rets + args)) != len(rets + args):
                    raise PtxSyntaxError(f"line {line}: call to {name} names a parameter "
                                         "twice")
                renamed = {a: f"{f}{site}" for a, f in zip(args + rets, f_params + f_rets)}
                inlined = self.template(name, stack, line).replace(_SITE, site)
            for d in _PARAM_DECL.finditer(text, open_pos, close):
                if d.group(3) not in renamed:
                    raise PtxSyntaxError(f"line {line}: .param {d.group(3)} of the call "
                                         f"sequence is not a parameter of the call to "
                                         f"{name}")
            seq = (_rename(text[open_pos:m.start()], renamed) + "\x00"
                   + _rename(text[m.end():close + 1], renamed))
            seq = seq.replace(".param", ".local")
            self.size += len(inlined)
            if self.size > MAX_INLINED_CHARS:
                raise UnsupportedPtxError(
                    f"line {line}: inlining the device-function calls would produce more "
                    f"than {MAX_INLINED_CHARS >> 20} MiB of PTX (each call of the call "
                    "tree is its own copy)")
            out.append(text[pos:open_pos])
            out.append(seq.replace("\x00", inlined + "\n" * call_text.count("\n")))
            pos = close + 1
        out.append(text[pos:])
        return "".join(out)
