"""``python -m oracle formats [NAME]``: list the number formats, or show one format's
properties and, for formats of 8 bits or fewer, its full value table.
``python -m oracle formats --presets [NAME]``: the tensor-core and matrix-core presets of
``refimpl.matmul`` (GPU, instruction, input format, parameters, C placement, evidence,
sources, aliases), or one preset in full."""
from __future__ import annotations

import argparse

from tabulate import tabulate

from refimpl import formats as F
from refimpl.matmul import BlockFMA, BlockScaledFMA, MatrixCore
from refimpl.matmul.presets import PRESETS, SOURCES, aliases_of, canonical


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", metavar="NAME",
        help="a format name or common spelling (e4m3, fp8_e4m3, bfloat16, ...); "
        "omit to list the registry; with --presets, a preset name or alias",
    )
    parser.add_argument(
        "--presets", action="store_true",
        help="list the tensor-core/matrix-core accumulation presets (matmul accumulate=) "
        "with their parameters and sources",
    )


def _g(x: float) -> str:
    return f"{x:.8g}"


def _listing() -> str:
    rows = [
        (f.name, f.bits, f"{f.exp_bits}/{f.man_bits}", f.bias, _g(f.max), _g(f.min_normal),
         _g(f.min_subnormal), "yes" if f.has_inf else "no", f.nan,
         "yes" if f.has_negative_zero else "no")
        for f in F.all_formats()
    ]
    return tabulate(rows, headers=["name", "bits", "exp/man", "bias", "max", "min normal",
                                   "min subnormal", "Inf", "NaN", "-0"],
                    disable_numparse=True)


def _properties(f: F.Format) -> str:
    rows = [
        ("name", f.name), ("bits", f.bits), ("sign", "yes" if f.signed else "no"),
        ("exponent bits", f.exp_bits), ("mantissa bits", f.man_bits), ("bias", f.bias),
        ("max", _g(f.max)), ("min normal", _g(f.min_normal)),
        ("min subnormal", _g(f.min_subnormal)), ("eps", _g(f.eps)),
        ("emax", f.emax), ("emin", f.emin), ("Inf", "yes" if f.has_inf else "no"),
        ("NaN layout", f.nan), ("negative zero", "yes" if f.has_negative_zero else "no"),
        ("code dtype", f.code_dtype.__name__), ("value dtype", f.value_dtype.__name__),
    ]
    if f.has_nan:
        rows.append(("NaN code (encode)", f"{f.nan_code():#x}"))
    if f.storage_bits:
        rows.append(("storage bits", f.storage_bits))
    return tabulate(rows, tablefmt="plain")


def _value_table(f: F.Format) -> str:
    table = F.value_table(f)
    width = (f.bits + 3) // 4
    rows = [(f"0x{c:0{width}X}", f"{c:0{f.bits}b}", repr(float(v)), k)
            for c, v, k in table.rows()]
    return tabulate(rows, headers=["code", "bits", "value", "class"], disable_numparse=True)


def _parameters(model: object) -> tuple[str, str, str]:
    """(block/group, fraction bits and accumulator, where C enters) of a preset model."""
    if isinstance(model, BlockFMA):
        acc = "E8M13" if model.output_fraction_bits == 13 else "FP32"
        return (f"n={model.n}", f"F={model.fraction_bits} RZ->{acc}",
                "after (FP32 RN)" if model.c_placement == "after" else "inside")
    if isinstance(model, MatrixCore):
        f = {"exact": "exact, RN", "ftz_pairwise": "FP32 RN pairs, FTZ",
             "truncated": "F=24, C after, RN", "truncated_split": "F=24 odd/even, RN"}
        return (f"L={model.group}", f[model.kind],
                "first term" if model.kind in ("exact", "ftz_pairwise") else "after")
    assert isinstance(model, BlockScaledFMA)
    return (f"k={model.k}/{model.scale_block}", f"F={model.fraction_bits} RZ->FP32", "inside")


def _presets(name: str | None) -> str:
    if name:
        p = PRESETS[canonical(name)]
        blk, arith, c = _parameters(p.model())
        rows = [("name", p.name), ("GPU", p.gpu), ("architecture", p.arch),
                ("instruction", p.instruction), ("input format", p.in_format),
                ("block", blk), ("arithmetic", arith), ("C enters", c),
                ("evidence", p.evidence), ("note", p.note),
                ("aliases", ", ".join(aliases_of(p.name)) or "-"),
                ("model", repr(p.model()))]
        rows += [(f"source [{s}]", SOURCES[s]) for s in p.sources]
        return tabulate(rows, tablefmt="plain")
    rows = []
    for p in PRESETS.values():
        blk, arith, c = _parameters(p.model())
        rows.append((p.name, p.arch, p.instruction, p.in_format, blk, arith, c, p.evidence,
                     ",".join(p.sources), " ".join(aliases_of(p.name))))
    table = tabulate(rows, headers=["preset", "arch", "instruction", "input", "block",
                                    "arithmetic", "C", "evidence", "sources", "aliases"],
                     disable_numparse=True)
    refs = "\n".join(f"[{k}] {v}" for k, v in SOURCES.items())
    return f"{table}\n\n{refs}"


def run(args: argparse.Namespace) -> int:
    if getattr(args, "presets", False):
        print(_presets(args.name))
        return 0
    if not args.name:
        print(_listing())
        return 0
    f = F.get(args.name)
    print(_properties(f))
    if f.bits <= 8:
        print()
        print(_value_table(f))
    return 0
