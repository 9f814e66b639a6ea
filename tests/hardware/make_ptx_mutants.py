"""Build ``tests/hardware/data/ptx_mutants.json``: single-token mutants of the gallery's PTX
and the verdict ``ptxas`` gives each (run by hand, not by pytest; needs ``ptxas``).

Every mutant changes one instruction line of one gallery kernel: a type suffix swapped
for another (``add.s32`` -> ``add.u64``, ``ld.global.f32`` -> ``ld.global.f16``), a
modifier dropped (``mul.lo.s32`` -> ``mul.s32``) or replaced by a related one (``.rn``
-> ``.rni``, ``.v2`` -> ``.v4``), a register operand swapped for one of another declared
type or size, the last operand dropped, or an integer immediate bumped (to 256, -1 or
2**32). The module it is checked in is the gallery file with every other kernel's lines
blanked (line numbers stay those of the file), so that a mutant loads in the time of one
kernel.

Each record is ``[file, line, new_text, kind, accepted, message]``: ``accepted`` is
whether ``ptxas -arch=sm_90a`` assembled the mutant, ``message`` its first error (file
name removed). The sample is deterministic: the candidates of each (file, opcode,
mutation) class are drawn with a fixed seed, at most :data:`PER_CLASS` of each, and
each file contributes at most :data:`PER_FILE`.

It also writes ``tests/hardware/data/ptx_rule_probes.json``: the verdicts of ptxas for
sm_80, sm_90a and sm_100a on each hand-written instruction of ``ptx_rule_probes.txt``,
each alone in the kernel of :func:`probe_text` (registers of every type declared).

Usage: ``python tests/hardware/make_ptx_mutants.py [--jobs N] [--probes-only]``
"""
from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "hardware" / "simt" / "gallery"
DATA = Path(__file__).resolve().parent / "data"
OUT = DATA / "ptx_mutants.json"
PROBES_IN = DATA / "ptx_rule_probes.txt"
PROBES_OUT = DATA / "ptx_rule_probes.json"
ARCH = "sm_90a"
PROBE_ARCHS = ("sm_80", "sm_90a", "sm_100a")
PER_CLASS = 2
PER_FILE = 260
SEED = 20260

_TYPES = [f"{k}{b}" for k in "bsu" for b in (8, 16, 32, 64)] + [
    "f16", "f32", "f64", "bf16", "f16x2", "bf16x2", "pred"]
_WIDTH = {t: int(re.sub(r"\D", "", t) or 1) for t in _TYPES}
_WIDTH.update({"f16x2": 32, "bf16x2": 32, "pred": 1})
#: related modifiers a mutant may put in place of one
_SWAP_MODIFIER = {
    "rn": ["rni", "rz"], "rz": ["rzi", "rn"], "rm": ["rmi"], "rp": ["rpi"],
    "rni": ["rn"], "rzi": ["rz", "rn"], "rmi": ["rm"], "rpi": ["rp"],
    "lo": ["hi", "wide"], "hi": ["lo"], "wide": ["lo"], "approx": ["rn", "full"],
    "full": ["approx"], "ftz": ["sat"], "sat": ["ftz"], "sync": ["aligned"],
    "global": ["shared", "local"], "shared": ["global"], "lt": ["lo", "ltu"],
    "ge": ["hs", "geu"], "gt": ["hi"], "le": ["ls"], "eq": ["equ"], "ne": ["neu"],
    "and": ["or"], "up": ["down"], "idx": ["bfly"], "wrap": ["clamp"],
    "any": ["all"], "all": ["uni"], "ballot": ["any"], "satfinite": ["sat"],
}
_INSTRUCTION = re.compile(r"^(\s*)(@!?%\w+\s+)?([a-z][\w.:]*)(\s+)(.*?);\s*$")
_REG_DECL = re.compile(r"\.reg\s+\.(\w+)\s+(%\w+)<(\d+)>")
_REGISTER = re.compile(r"%[A-Za-z_]\w*")
_INT = re.compile(r"(?<![\w.%$])(-?\d+)(?![\w.])")


def kernel_spans(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, first line index, last line index) of each ``.entry`` (brace matching)."""
    spans = []
    i = 0
    while i < len(lines):
        m = re.search(r"\.entry\s+([\w$]+)", lines[i])
        if not m:
            i += 1
            continue
        depth, j, opened = 0, i, False
        while j < len(lines):
            code = lines[j].split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth == 0:
                break
            j += 1
        spans.append((m.group(1), i, j))
        i = j + 1
    return spans


def reduced(lines: list[str], keep: tuple[int, int]) -> list[str]:
    """The file with the lines of every kernel but ``keep`` blanked."""
    out = list(lines)
    for _, a, b in kernel_spans(lines):
        if (a, b) != keep:
            for k in range(a, b + 1):
                out[k] = ""
    return out


def _registers(lines: list[str], span: tuple[int, int]) -> dict[str, str]:
    """type -> one register of that type declared in the kernel."""
    out: dict[str, str] = {}
    for line in lines[span[0]: span[1] + 1]:
        for typ, prefix, count in _REG_DECL.findall(line):
            if int(count) > 1:
                out.setdefault(typ, f"{prefix}1")
    return out


def _type_alternatives(t: str) -> list[str]:
    w = _WIDTH[t]
    same_width = [x for x in _TYPES if _WIDTH[x] == w and x != t]
    same_kind = [x for x in _TYPES if x != t and re.sub(r"\d+", "", x) == re.sub(r"\d+", "", t)]
    return sorted(set(same_width + same_kind))


def _split_operands(ops: str) -> list[str]:
    """The top-level comma-separated operands (braces and brackets nest)."""
    out, depth, cur = [], 0, ""
    for ch in ops:
        depth += (ch in "{[(") - (ch in "}])")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def mutations(line: str, regs: dict[str, str]) -> list[tuple[str, str]]:
    """(kind, new line) for the single-token mutations of one instruction line."""
    m = _INSTRUCTION.match(line)
    if not m:
        return []
    indent, guard, opcode, space, ops = m.groups()
    guard = guard or ""
    parts = opcode.split(".")
    out: list[tuple[str, str]] = []

    def emit(kind: str, new_opcode: str, new_ops: str) -> None:
        out.append((kind, f"{indent}{guard}{new_opcode}{space}{new_ops};"))

    for i, p in enumerate(parts[1:], 1):
        if p in _WIDTH:
            for alt in _type_alternatives(p):
                emit(f"type .{p}->.{alt}", ".".join(parts[:i] + [alt] + parts[i + 1:]), ops)
        else:
            emit(f"drop .{p}", ".".join(parts[:i] + parts[i + 1:]), ops)
            for alt in _SWAP_MODIFIER.get(p, []):
                emit(f"modifier .{p}->.{alt}", ".".join(parts[:i] + [alt] + parts[i + 1:]),
                     ops)
    reg_types = {r: t for t, r in regs.items()}
    by_prefix = {re.sub(r"\d+$", "", r): t for t, r in regs.items()}
    for rm in _REGISTER.finditer(ops):
        name = rm.group(0)
        own = by_prefix.get(re.sub(r"\d+$", "", name))
        if own is None:
            continue
        for typ, other in sorted(regs.items()):
            if typ == own or other in reg_types and reg_types[other] == own:
                continue
            emit(f"register .{own}->.{typ}", opcode,
                 ops[:rm.start()] + other + ops[rm.end():])
    operands = _split_operands(ops)
    if len(operands) > 1:
        emit("operand dropped", opcode, ", ".join(operands[:-1]))
    for i, p in enumerate(parts[1:], 1):
        if p in ("v2", "v4"):
            emit(f"vector .{p}->.{'v4' if p == 'v2' else 'v2'}",
                 ".".join(parts[:i] + ["v4" if p == "v2" else "v2"] + parts[i + 1:]), ops)
    for im in _INT.finditer(ops):
        if ops[max(0, im.start() - 1)] in "+[":
            continue  # address offsets are the other rules' concern
        for new in ("256", "-1", "4294967296"):
            if new != im.group(1):
                emit(f"immediate {new}", opcode, ops[:im.start()] + new + ops[im.end():])
    return out


def candidates() -> list[tuple[str, int, str, str]]:
    """Every mutation of every gallery kernel, sampled per class (deterministic)."""
    rng = random.Random(SEED)
    chosen: list[tuple[str, int, str, str]] = []
    for path in sorted(GALLERY.glob("*.ptx")):
        lines = path.read_text().split("\n")
        classes: dict[tuple, list] = {}
        for _, a, b in kernel_spans(lines):
            regs = _registers(lines, (a, b))
            for k in range(a, b + 1):
                head = lines[k].strip().lstrip("@!%").split()
                if not head:
                    continue
                for kind, new in mutations(lines[k], regs):
                    op = _INSTRUCTION.match(lines[k]).group(3).split(".")[0]
                    classes.setdefault((op, kind), []).append((path.name, k + 1, new, kind))
        picked = []
        for key in sorted(classes):
            group = classes[key]
            picked += rng.sample(group, min(PER_CLASS, len(group)))
        if len(picked) > PER_FILE:
            picked = rng.sample(picked, PER_FILE)
        chosen += sorted(picked)
    return chosen


def mutant_text(name: str, line: int, new: str) -> str:
    """The module a mutant is checked in (shared with the test)."""
    lines = (GALLERY / name).read_text().split("\n")
    for _, a, b in kernel_spans(lines):
        if a <= line - 1 <= b:
            lines = reduced(lines, (a, b))
            break
    lines[line - 1] = new
    return "\n".join(lines)


_PROBE_KERNEL = """.version 8.7
.target {arch}
.address_size 64
.visible .entry k(.param .u64 pp)
{{
.reg .pred %p<4>; .reg .b16 %rs<8>; .reg .b32 %r<8>; .reg .b64 %rd<8>;
.reg .f32 %f<8>; .reg .f64 %fd<8>; .reg .u32 %u<8>; .reg .s32 %s<8>;
.reg .u64 %ud<8>; .reg .s64 %sd<8>; .reg .f16 %h<8>; .reg .u16 %us<8>; .reg .s16 %ss<8>;
.reg .u8 %uc<4>; .reg .s8 %sc<4>; .reg .b8 %bc<4>; .reg .f16x2 %hh<4>;
.shared .align 8 .b8 sm[256];
{line}
ret;
}}
"""


def probe_text(line: str, arch: str) -> str:
    """The module a probe instruction is checked in (shared with the test)."""
    return _PROBE_KERNEL.format(arch=arch, line=line)


def ptxas_verdict(text: str, arch: str = ARCH) -> tuple[bool, str]:
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run(["ptxas", "-O0", f"-arch={arch}", f.name, "-o", "/dev/null"],
                           capture_output=True, text=True, timeout=120)
    finally:
        Path(f.name).unlink()
    if r.returncode == 0:
        return True, ""
    msgs = [ln for ln in r.stderr.splitlines() if re.search(r"(error|fatal)\s*:", ln)]
    msg = msgs[0] if msgs else r.stderr.strip().splitlines()[0]
    return False, re.sub(r"^ptxas \S+, ", "", msg).strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--probes-only", action="store_true")
    args = ap.parse_args()
    version = next(ln for ln in subprocess.run(["ptxas", "--version"], capture_output=True,
                                               text=True).stdout.splitlines()
                   if "release" in ln).strip()
    probes = [ln.strip() for ln in PROBES_IN.read_text().splitlines() if ln.strip()]

    def probe(line: str) -> list:
        return [line] + [list(ptxas_verdict(probe_text(line, a), a)) for a in PROBE_ARCHS]

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(probe, probes))
    with open(PROBES_OUT, "w") as f:
        f.write('{"ptxas": %s, "archs": %s, "probes": [\n' % (json.dumps(version),
                                                               json.dumps(PROBE_ARCHS)))
        f.write(",\n".join(json.dumps(r) for r in rows))
        f.write("\n]}\n")
    print(f"{len(rows)} probes -> {PROBES_OUT}", file=sys.stderr)
    if args.probes_only:
        return 0
    cands = candidates()
    print(f"{len(cands)} mutants", file=sys.stderr)

    def verdict(c: tuple[str, int, str, str]) -> list:
        ok, msg = ptxas_verdict(mutant_text(c[0], c[1], c[2]))
        return [c[0], c[1], c[2], c[3], ok, msg]

    with ThreadPoolExecutor(args.jobs) as pool:
        records = list(pool.map(verdict, cands))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w") as f:
        f.write('{"ptxas": %s, "arch": "%s", "mutants": [\n' % (json.dumps(version), ARCH))
        f.write(",\n".join(json.dumps(r) for r in records))
        f.write("\n]}\n")
    rejected = sum(1 for r in records if not r[4])
    print(f"{len(records)} mutants, {rejected} rejected by ptxas -> {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
