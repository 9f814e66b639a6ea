"""The PTX ISA's instruction type rules (:mod:`hardware.simt.ptx_rules`) against ptxas.

The verdicts come from ``ptxas`` (CUDA 13.0), recorded by ``make_ptx_mutants.py`` in
``data/``: single-token mutants of the gallery's kernels (``ptx_mutants.json``, sm_90a)
and hand-written instructions (``ptx_rule_probes.json``, sm_80/sm_90a/sm_100a). What ptxas
accepts must load (or be refused as unsupported, for forms the interpreter does not
implement); what ptxas rejects for an instruction type rule must be refused.

The mutant test loads a deterministic sample (one mutant of each opcode, mutation kind and
verdict, the cheapest to load); ``PTX_MUTANTS_ALL=1`` loads every mutant (about two
minutes).
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from hardware.simt import PtxError, PtxSyntaxError, PtxTypeError, UnsupportedPtxError, load_ptx
from hardware.simt.parser import parse_ptx
from hardware.simt.ptx_rules import check_module
from make_ptx_mutants import GALLERY, kernel_spans, mutant_text, probe_text

DATA = Path(__file__).parent / "data"
MUTANTS = json.loads((DATA / "ptx_mutants.json").read_text())["mutants"]
PROBES = json.loads((DATA / "ptx_rule_probes.json").read_text())

#: ptxas messages that report a broken instruction type rule (operand types and sizes,
#: instruction types, required and illegal modifiers, immediate ranges, addresses)
TYPE_RULE_MESSAGES = (
    "Arguments mismatch", "Unexpected instruction types", "modifier required",
    "Rounding modifier", "Illegal rounding modifier", "out of range", "Illegal modifier",
    "Mismatch between instruction type and comparison", "applies only to signed",
    "Boolean operation is required", "Illegal vector size", "as address operand",
    "requires .u32 or .u64", "32-Bit ABI", "Operation .", "Incorrect type",
    "Reduction operation is required", "Barrier modifier required", "Barrier number",
    "multiple of warp size", "Illegal operation", "State space incorrect",
    "requires .global space", "Vector with elements of different types",
    "Incompatible elements of vector", "Not a name of any known instruction",
    "Clamp modifier required", "Result vector expected", "Comparison qualifier",
    "State space modifier required", "Special register argument not allowed",
    "Predicate output expected", "requires '.pred' type", "Argument vector size mismatch",
    "Vector of size", "Shape modifier required", "cannot be applied to",
)
#: the rules every instruction follows, modelled or not: an address register is an
#: integer or bit-size register, a vector's (a fragment's) registers agree
GENERIC_MESSAGES = ("as address operand", "Incompatible elements of vector")
#: the opcodes whose forms the rules describe (the rest: mma, wmma, ldmatrix, cp.async...
#: are checked by their compilers only)
MODELLED = frozenset(
    "add sub addc subc mul mad madc fma div rem abs neg min max popc clz bfind brev bfe "
    "bfi sad and or xor not cnot lop3 shf shl shr prmt copysign testp sqrt rcp rsqrt sin "
    "cos lg2 ex2 tanh selp mov cvta isspacep activemask match shfl vote redux setp ld ldu "
    "st cvt atom red bar barrier dp4a dp2a ldmatrix stmatrix".split())
#: ptxas messages of the declaration, symbol and literal rules (parser.py's, not these)
OTHER_RULE_MESSAGES = ("Unknown symbol", "Parsing error", "syntax error", "State space "
                       "mismatch", "Label expected", "redefin")
#: ptxas messages of target features (an instruction the .target lacks)
TARGET_MESSAGES = ("requires .target", "not supported on .target", "requires PTX ISA")


def _opcode(text: str) -> str:
    return re.sub(r"^@!?%\w+\s+", "", text.strip()).split()[0]


def classify(opcode: str, accepted: bool, message: str) -> str:
    """The class of a ptxas verdict: accepted, type-rule (must be refused), or why not."""
    if accepted:
        return "accepted"
    if any(m in message for m in TARGET_MESSAGES):
        return "target feature"
    if any(m in message for m in OTHER_RULE_MESSAGES):
        return "declaration/literal rules (other)"
    if not any(m in message for m in TYPE_RULE_MESSAGES):
        return "other ptxas rule"
    if opcode.split(".")[0] not in MODELLED and not any(m in message
                                                         for m in GENERIC_MESSAGES):
        return "type rule of an unmodelled opcode"
    return "type rule"


def outcome(text: str) -> str:
    """What load_ptx does with ``text``: loaded, refused (how) or a raw exception."""
    try:
        load_ptx(text)
    except PtxTypeError:
        return "PtxTypeError"
    except PtxSyntaxError:
        return "PtxSyntaxError"
    except UnsupportedPtxError:
        return "UnsupportedPtxError"
    except PtxError as e:  # pragma: no cover - reported by the assertion
        return type(e).__name__
    return "loaded"


# ----------------------------------------------------------------------- mutant corpus


def _kernel_lines() -> dict[tuple[str, int], int]:
    """(file, line) -> the number of lines of the kernel holding it (its load cost)."""
    out = {}
    for path in sorted(GALLERY.glob("*.ptx")):
        lines = path.read_text().split("\n")
        for _, a, b in kernel_spans(lines):
            for k in range(a, b + 1):
                out[(path.name, k + 1)] = b - a + 1
    return out


def _sample() -> list[list]:
    """The mutants the assertions are about, the cheapest to load of each class: one per
    opcode and mutation kind of those ptxas rejects for a type rule, one per opcode of
    those it accepts."""
    if os.environ.get("PTX_MUTANTS_ALL"):
        return MUTANTS
    cost = _kernel_lines()
    best: dict[tuple, list] = {}
    for m in MUTANTS:
        f, line, new, kind, ok, msg = m
        op = _opcode(new)
        cls = classify(op, ok, msg)
        if cls not in ("type rule", "accepted"):
            continue
        key = (op.split(".")[0], kind.split()[0] if cls == "type rule" else "", cls)
        if key not in best or cost[(f, line)] < cost[(best[key][0], best[key][1])]:
            best[key] = m
    return sorted(best.values(), key=lambda m: (m[0], m[1], m[2]))


def test_mutant_corpus_is_large_and_mostly_refused_by_ptxas():
    assert len(MUTANTS) >= 3000
    rejected = sum(1 for m in MUTANTS if not m[4])
    assert 0.3 * len(MUTANTS) < rejected < 0.9 * len(MUTANTS)
    counts = Counter(classify(_opcode(m[2]), m[4], m[5]) for m in MUTANTS)
    assert counts["type rule"] > 3000


def test_mutants_follow_ptxas():
    """Rejected by ptxas for a type rule -> refused; accepted by ptxas -> loads, or is
    refused as unsupported (never as malformed)."""
    sample = _sample()
    assert len(sample) > 100
    wrong = []
    tally: Counter = Counter()
    for f, line, new, kind, ok, msg in sample:
        cls = classify(_opcode(new), ok, msg)
        got = outcome(mutant_text(f, line, new))
        tally[(cls, got)] += 1
        if cls == "type rule" and got == "loaded":
            wrong.append(f"{f}:{line} {new.strip()!r} loads; ptxas: {msg}")
        if cls == "accepted" and got not in ("loaded", "UnsupportedPtxError"):
            wrong.append(f"{f}:{line} {new.strip()!r} refused ({got}); ptxas accepts it")
    assert not wrong, "\n".join(wrong[:20])
    assert tally[("type rule", "PtxTypeError")] > 50
    assert tally[("accepted", "loaded")] > 25


# ----------------------------------------------------------------------------- probes


def _probe_cases() -> list[tuple[str, str, bool, str]]:
    return [(row[0], arch, ok, msg) for row in PROBES["probes"]
            for arch, (ok, msg) in zip(PROBES["archs"], row[1:])]


def test_probes_follow_ptxas():
    """Each hand-written instruction: accepted on a target -> loads there (or is
    unsupported); rejected for a type rule on every target -> refused. (The rules do not
    depend on the target: an instruction accepted on several is loaded for the first.)"""
    wrong = []
    by_line: dict[str, list[tuple[bool, str]]] = {}
    for line, arch, ok, msg in _probe_cases():
        first = line not in by_line or not any(v[0] for v in by_line[line])
        by_line.setdefault(line, []).append((ok, msg))
        if ok and first:
            got = outcome(probe_text(line, arch))
            if got not in ("loaded", "UnsupportedPtxError"):
                wrong.append(f"{arch}: {line!r} refused ({got}); ptxas accepts it")
    for line, verdicts in by_line.items():
        if all(not ok and classify(_opcode(line), ok, msg) == "type rule"
               for ok, msg in verdicts):
            got = outcome(probe_text(line, "sm_90a"))
            if got == "loaded":
                wrong.append(f"{line!r} loads; ptxas: {verdicts[1][1]}")
    assert not wrong, "\n".join(wrong[:20])


def test_probe_set_covers_both_verdicts():
    cases = _probe_cases()
    assert len(cases) > 1500
    assert sum(ok for _, _, ok, _ in cases) > 500
    assert sum(not ok for _, _, ok, _ in cases) > 500


# ------------------------------------------------------------------------ the messages

_HEAD = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
.reg .pred %p<4>; .reg .b16 %rs<8>; .reg .b32 %r<8>; .reg .b64 %rd<8>;
.reg .f32 %f<8>; .reg .f64 %fd<8>;
"""


def _kernel(line: str) -> str:
    return f"{_HEAD}{line}\nret;\n}}\n"


@pytest.mark.parametrize("line,words", [
    # operand types (PTX ISA 6.1 and 9.4.1)
    ("mad.lo.s32 %r1, %r3, %r4, %f1;", ["operand 4", "%f1", ".f32", ".s32", "6.1"]),
    ("add.s32 %r1, %rd2, %r3;", ["operand 2", "%rd2", ".b64", "6.1"]),
    ("ld.global.u32 %rs1, [%rd1];", ["%rs1", "9.4.1"]),
    ("ld.global.u32 %r1, [%f1];", ["%f1", "address", "6.4.1"]),
    ("ld.global.u32 %r1, [%r2];", ["32-bit", "6.4.1"]),
    ("add.f32 %f1, %f2, 1;", ["integer immediate", "4.5"]),
    # instruction types
    ("add.s8 %r1, %r2, %r3;", ["add does not take type .s8"]),
    ("mov.u8 %rs1, %rs2;", ["mov does not take type .u8"]),
    ("rem.b64 %rd1, %rd2, %rd3;", ["rem does not take type .b64"]),
    ("setp.ge.f16 %p1, %r1, %r2;", ["%r1", ".f16"]),
    ("setp.lt.b32 %p1, %r1, %r2;", ["comparison .lt", ".b32"]),
    # required modifiers
    ("match.any.b32 %r1, %r2, -1;", ["requires one of .sync"]),
    ("cvt.f32.u32 %f1, %r1;", ["integer-to-float", ".rn"]),
    ("cvt.rzi.f32.u32 %f1, %r1;", ["integer-to-float"]),
    ("cvt.s32.f32 %r1, %f1;", ["float-to-integer", ".rzi"]),
    ("cvt.f32.f64 %f1, %fd1;", ["narrowing"]),
    ("mul.s32 %r1, %r2, %r3;", ["requires one of .hi, .lo"]),
    ("fma.f32 %f1, %f2, %f3, %f4;", ["requires one of .rm, .rn, .rp, .rz"]),
    ("div.f32 %f1, %f2, %f3;", ["div.f32 requires one of .approx, .full"]),
    ("shf.l.b32 %r1, %r2, %r3, %r4;", [".clamp, .wrap"]),
    # immediate ranges
    ("bfe.u32 %r1, %r2, 0, 256;", ["operand 4", "256", "[0..255]"]),
    ("bfi.b32 %r1, %r2, %r3, 256, 1;", ["operand 4", "256", "[0..255]"]),
    ("bar.sync 16;", ["barrier number 16"]),
])
def test_refusal_names_line_statement_and_rule(line, words):
    """The rules' message (load_ptx runs them after compiling, so that a form the
    interpreter lacks is named as unsupported first: it refuses either way)."""
    with pytest.raises(PtxError):
        load_ptx(_kernel(line))
    with pytest.raises(PtxTypeError) as e:
        check_module(parse_ptx(_kernel(line)))
    msg = str(e.value)
    assert msg.startswith("line 8: ") and repr(line.rstrip(";"))[1:-1] in msg
    assert "PTX ISA" in msg
    for w in words:
        assert w in msg, (w, msg)


def test_type_error_is_a_syntax_error():
    assert issubclass(PtxTypeError, PtxSyntaxError)


@pytest.mark.parametrize("line", [
    # relaxed type checking and the forms nvcc emits
    "add.s32 %r1, %r2, %r3;", "add.f32 %f1, %r2, %f3;", "mov.b32 %f1, %r1;",
    "mov.f32 %f1, %r1;", "ld.global.u8 %r1, [%rd1];", "ld.global.b16 %f1, [%rd1];",
    "st.global.u8 [%rd1], %r1;", "st.global.f32 [%rd1], %rd1;", "cvt.u32.u64 %r1, %rd1;",
    "cvt.rn.f16.f32 %rs1, %f1;", "cvt.f32.f16 %f1, %rs1;", "cvt.rn.f16x2.f32 %r1, %f1, %f2;",
    "cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f2;", "mov.b64 %rd1, {%r1, %r2};",
    "mov.b32 {%rs1, %rs2}, %r1;", "selp.b32 %r1, 1, 0, %p1;",
    "setp.eq.and.s32 %p1, %r1, %r2, !%p2;",
    "setp.lt.f32 %p1|%p2, %f1, 0f00000000;", "prmt.b32 %r1, %r2, %r3, 0x3210;",
    "shf.l.wrap.b32 %r1, %r2, %r3, %r4;", "mul.wide.u32 %rd1, %r2, %r3;",
    "mad.wide.s32 %rd1, %r2, %r3, %rd4;", "add.f16x2 %r1, %r2, %r3;",
    "fma.rn.bf16x2 %r1, %r2, %r3, %r4;",
    "bfe.u32 %r1, %r2, 0, 255;", "ld.shared.u32 %r1, [%r2];", "bar.sync 0, 64;",
    "shfl.sync.idx.b32 %r1|%p1, %r2, %f3, 31, -1;", "add.s32 %r1, %r2, 4294967296;",
])
def test_valid_forms_load(line):
    load_ptx(_kernel(line))



def test_variables_are_addressed_in_their_state_space():
    """PTX ISA 6.4.1: the probes ptxas refuses for a state-space mismatch (a .param or
    .shared variable through ld.global, a .param one generically) are refused; the
    accepted accesses of the same variables load."""
    rows = [r for r in PROBES["probes"] if re.search(r"\[(sm|pp)[\]+]", r[0])]
    refused = [r[0] for r in rows if "State space mismatch" in r[2][1]]
    assert len(refused) >= 4
    for line in refused:
        with pytest.raises(PtxTypeError, match="state space|addressable"):
            check_module(parse_ptx(probe_text(line, "sm_90a")))
    for line in [r[0] for r in rows if r[2][0]]:
        assert outcome(probe_text(line, "sm_90a")) in ("loaded", "UnsupportedPtxError")


def _float_min_max_atomics() -> list[list]:
    return [r for r in PROBES["probes"]
            if re.match(r"(atom|red)\.", r[0]) and re.search(r"\.(min|max)\.", r[0])
            and re.search(r"\.(f32|f64|f16|bf16|f16x2|bf16x2) ", r[0])]


def test_float_min_max_atomics_are_probed():
    lines = [r[0] for r in _float_min_max_atomics()]
    assert len(lines) >= 15
    for t in ("f32", "f64", "f16", "bf16x2"):
        assert any(f".{t} " in ln for ln in lines), t
    assert any(ln.startswith("red.") for ln in lines)


@pytest.mark.parametrize("row", _float_min_max_atomics(), ids=lambda r: r[0])
def test_float_min_max_atomics_are_refused_as_ptxas_refuses_them(row):
    """atom/red .min/.max on .f32 and .f64 (and scalar half types): ptxas refuses them
    on every probed target although the PTX ISA's atom table lists them; so does the
    interpreter, with the line and the rule."""
    line, verdicts = row[0], row[1:]
    assert not any(ok for ok, _ in verdicts), "ptxas accepts it on some target"
    for arch in PROBES["archs"]:
        with pytest.raises(PtxError):
            load_ptx(probe_text(line, arch))
        with pytest.raises(PtxTypeError) as e:
            check_module(parse_ptx(probe_text(line, arch)))
        msg = str(e.value)
        assert msg.startswith("line 11: ") and line.rstrip(";") in msg
        assert "PTX ISA 9.7.13" in msg
        op = re.search(r"\.(min|max)\.", line).group(1)
        assert f".{op}" in msg
