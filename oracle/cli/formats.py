"""``python -m oracle formats [NAME]``: list the number formats, or show one format's
properties and, for formats of 8 bits or fewer, its full value table."""
from __future__ import annotations

import argparse

from tabulate import tabulate

from refimpl import formats as F


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name", nargs="?", metavar="NAME",
        help="a format name or common spelling (e4m3, fp8_e4m3, bfloat16, ...); "
        "omit to list the registry",
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


def run(args: argparse.Namespace) -> int:
    if not args.name:
        print(_listing())
        return 0
    f = F.get(args.name)
    print(_properties(f))
    if f.bits <= 8:
        print()
        print(_value_table(f))
    return 0
