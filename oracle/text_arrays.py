"""Arrays as text: the layout ``generate --text`` writes for every array of every case
(``<case id>/<array name>.txt``, next to its ``.npy``) and ``check --results`` reads,
so that a harness in any language needs no ``.npy`` reader.

Layout (ASCII, ``\\n`` line ends)::

    # <case id>/<array name> <dtype> <shape> [<format>]
    <one vector a line>

- ``<dtype>`` is a suite dtype (``bool``, ``uint8``..``uint64``, ``int8``..``int64``,
  ``float16``, ``float32``, ``float64``); ``<shape>`` is the dimensions joined by ``x``
  (``6x37``), ``1`` for a 1-D array of one element and ``scalar`` for a 0-d array;
  ``<format>`` names the format of unsigned codes (``e4m3``), when the array holds codes.
- Every element is its bit pattern in uppercase hexadecimal, two digits a byte
  (``3F800000`` is float32 1.0, ``FF`` int8 -1, ``7E`` the E4M3 code 0x7E), ``0`` or ``1``
  for bool; elements of a line are separated by one space.
- A 0-d or 1-D array has one element a line (TestFloat style); an array of two or more
  dimensions has one line per vector along its last axis, in C order (row-major); an
  array with no elements has no line after the header.
"""
from __future__ import annotations

import math
import re

import numpy as np

__all__ = ["array_text", "parse_array_text", "TEXT_SUFFIX"]

TEXT_SUFFIX = ".txt"
DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "float64")
_HEADER = re.compile(r"^# (\S+) (\S+) (\S+)(?: (\S+))?$")


def _shape_text(shape: tuple[int, ...]) -> str:
    return "scalar" if not shape else "x".join(str(n) for n in shape)


def array_text(a: np.ndarray, label: str, fmt: str | None = None) -> bytes:
    """``a`` in the text layout, headed ``# <label> <dtype> <shape> [<fmt>]``."""
    a = np.asarray(a)
    dt = a.dtype.newbyteorder("=")
    if dt.name not in DTYPES:
        raise ValueError(f"{label}: dtype {a.dtype} has no text form")
    a = np.asarray(a, dtype=dt, order="C")   # (ascontiguousarray would make 0-d 1-d)
    head = f"# {label} {dt.name} {_shape_text(a.shape)}" + (f" {fmt}" if fmt else "")
    if dt.kind == "b":
        fields = a.astype(np.uint8).reshape(-1).astype(str)
    else:
        bits = a.view(f"u{dt.itemsize}").reshape(-1)
        width = 2 * dt.itemsize
        fields = np.array([f"{int(b):0{width}X}" for b in bits.tolist()], dtype=object)
    per_line = 1 if a.ndim <= 1 else a.shape[-1]
    lines = [head]
    if fields.size and per_line:
        for i in range(0, fields.size, per_line):
            lines.append(" ".join(fields[i:i + per_line]))
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_array_text(data: bytes, where: str) -> tuple[np.ndarray, str, str | None]:
    """(array, label, format) from the text layout.

    Raises:
        ValueError: anything that is not the layout, naming ``where`` and the line.
    """
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not ASCII text") from None
    if "\r" in text:
        n = text[:text.index("\r")].count("\n") + 1
        raise ValueError(f"{where}: line {n} holds a \\r (Windows line ends?); the layout "
                         "uses \\n alone (write the file in binary mode)")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError(f"{where}: empty; expected a '# <label> <dtype> <shape>' header")
    m = _HEADER.match(lines[0])
    if not m:
        raise ValueError(f"{where}: line 1 is not a '# <label> <dtype> <shape> [<format>]' "
                         f"header: {lines[0][:80]!r}")
    label, dtype, shape_text, fmt = m.groups()
    if dtype not in DTYPES:
        raise ValueError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if shape_text == "scalar":
        shape: tuple[int, ...] = ()
    elif re.fullmatch(r"\d+(x\d+)*", shape_text):
        shape = tuple(int(n) for n in shape_text.split("x"))
    else:
        raise ValueError(f"{where}: shape {shape_text!r} is not 'scalar' or dimensions "
                         "joined by 'x'")
    dt = np.dtype(dtype)
    count = math.prod(shape)
    per_line = 1 if len(shape) <= 1 else shape[-1]
    want_lines = 0 if count == 0 else count // per_line
    body = lines[1:]
    if len(body) != want_lines:
        raise ValueError(f"{where}: {len(body)} lines of values, expected {want_lines} for "
                         f"shape {shape_text}")
    width = 1 if dt.kind == "b" else 2 * dt.itemsize
    pattern = re.compile(r"^[01]$" if dt.kind == "b" else rf"^[0-9A-F]{{{width}}}$")
    values: list[int] = []
    for n, line in enumerate(body, 2):
        fields = line.split(" ")
        if len(fields) != per_line or not all(pattern.match(f) for f in fields):
            what = "0/1 value" if dt.kind == "b" else f"{width}-digit uppercase hex value"
            raise ValueError(f"{where}: line {n} must hold "
                             + (f"one {what}" if per_line == 1 else
                                f"{per_line} {what}s separated by one space")
                             + f" ({dtype}): {line[:80]!r}")
        values.extend(int(f, 16) for f in fields)
    if dt.kind == "b":
        arr = np.array(values, dtype=np.uint8).astype(bool)
    else:
        arr = np.array(values, dtype=f"u{dt.itemsize}").view(dt)
    return arr.reshape(shape), label, fmt
