"""The weight-stationary ``tcgen05.mma.ws`` (sm_100a; PTX ISA 9.2, section 9.7.16.10.9.3)::

    tcgen05.mma.ws.cta_group::1.kind{.collector::bN::op} [d-tmem],  a-desc,  b-desc, idesc,
                                                         enable-input-d;
    tcgen05.mma.ws.cta_group::1.kind{.collector::bN::op} [d-tmem], [a-tmem], b-desc, idesc,
                                                         enable-input-d;

D = A*B (+ D) as :mod:`.tcgen05` computes it for the kinds f16, tf32, f8f6f4 and i8 (the
same instruction descriptor, Table 42, and the same presets), with the shapes of Table 39
for ``.ws``: M = 32, 64 or 128 and N = 64, 128 or 256 (dense), and D in the data path
layouts G, E and D (:mod:`.tcgen05_layouts`). ``.ws`` exists for ``.cta_group::1`` only.

The collector buffers (9.7.16.10.9.3): four buffers ``b0``..``b3`` of the tensor core may
hold a B matrix. ``::fill`` reads B from shared memory and keeps it in buffer N;
``::use`` "can read" B from buffer N and requires an earlier fill still valid;
``::lastuse`` the same, after which the buffer's contents may be discarded; ``::discard``
(the default, as ``.collector::b0::discard``) reads B from shared memory and lets buffer N
go. Since ``use`` and ``lastuse`` may read either the buffer or the memory, the result is
defined only when the two agree: B is read through ``b-desc`` every time, and a use whose
B differs from what the fill kept (other codes, or another N, K or element type) is an
error naming the fill's line, as is a use with no valid fill. The buffers belong to each
CTA's tensor core; a fill by one thread may be used by another thread of the CTA. The A
collector of ``tcgen05.mma`` (``.collector::a::fill/use/lastuse/discard``, 9.7.16.10.9.1,
the same four operations for A) follows the same rules with one buffer ``a``.

Instruction descriptor bits 30-31 ("maximum shift while attempting B matrix reuse in
.ws": none, 8, 16 or 32) bound how far the hardware may look for a reusable B; they do not
enter D = A*B + D and are accepted with any value under ``.ws`` (they must be 0 without
it, :mod:`.tcgen05`).

Refused: the optional ``zero-column-mask-desc`` operand (9.7.16.4.3: Table 45 makes Skip
Span the run of used B columns and Use Span the run of zeroed ones, each minus one, while
its Example 2 shows the opposite runs, so the mask is not defined unambiguously), an A
in Tensor Memory with M = 32 or 64 (the ISA does not state its layout for layouts E and
G), ``.sp`` and ``.cta_group::2`` (Table 39: invalid with ``.ws``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .parser import Instruction
from .tmem import TensorMemory

__all__ = ["WS_M", "WS_N", "collector", "through_collector"]

WS_M = (32, 64, 128)
WS_N = (64, 128, 256)
_OPS = ("fill", "use", "lastuse", "discard")


def collector(inst: Instruction, parts: list[str], ws: bool = True) -> tuple[int | str, str]:
    """(buffer, operation) of the ``.collector::bN::op`` qualifier of a tcgen05.mma.ws
    (default ``b0``, ``discard``) or, ``ws`` false, of the ``.collector::a::op`` of a
    tcgen05.mma (buffer ``"a"``, default ``discard``); UnsupportedPtxError for a malformed
    or repeated one."""
    got = [p for p in parts if p.startswith("collector::")]
    if not got:
        return (0 if ws else "a"), "discard"
    bits = got[0].split("::")
    names = ("b0", "b1", "b2", "b3") if ws else ("a",)
    if len(got) > 1 or len(bits) != 3 or bits[1] not in names or bits[2] not in _OPS:
        form = "{b0,b1,b2,b3}" if ws else "a"
        raise UnsupportedPtxError(
            f"line {inst.line}: {inst.text!r}: tcgen05.mma{'.ws' if ws else ''} takes one "
            f".collector::{form}::{{fill,use,lastuse,discard}} qualifier (got "
            f"{', '.join('.' + g for g in got)})")
    return (int(bits[1][1]) if ws else "a"), bits[2]


def through_collector(ctx: Any, st: TensorMemory, inst: Instruction, t: int, blk: int,
                      codes: np.ndarray, etype: str, buf: int | str, op: str) -> None:
    """Apply collector operation ``op`` on buffer ``buf`` (0-3: the B buffers of .ws;
    ``"a"``: the A buffer of tcgen05.mma, 9.7.16.10.9.1, with the same rules) of thread
    ``t``'s CTA to the operand codes just read (see the module docstring)."""
    books = st.collectors
    key = (blk, buf)
    name = f"b{buf}" if buf != "a" else "a"
    what = "B" if buf != "a" else "A"
    if op == "fill":
        books[key] = (codes.copy(), etype, inst.line)
        return
    if op in ("use", "lastuse"):
        kept = books.get(key)
        where = ctx.location(t, inst)
        if kept is None:
            raise ExecutionError(
                f"{where}: .collector::{name}::{op} with no valid fill of collector buffer "
                f"{name} in this CTA (the ISA requires a previous ::fill still valid; "
                "::lastuse and ::discard end it; PTX ISA 9.7.16.10.9.1, 9.7.16.10.9.3)")
        kept_codes, ktype, line = kept
        if kept_codes.shape != codes.shape or ktype != etype or \
                not np.array_equal(kept_codes, codes):
            how = (f"a {kept_codes.shape[0]} x {kept_codes.shape[1]} {ktype} {what}"
                   if kept_codes.shape != codes.shape or ktype != etype else "other codes")
            raise ExecutionError(
                f"{where}: .collector::{name}::{op}: collector buffer {name} holds the "
                f"{what} filled on line {line} ({how}) but the operand now reads a "
                f"different {what}: the instruction may read either, so D is not defined "
                "(PTX ISA 9.7.16.10.9.1, 9.7.16.10.9.3)")
    if op in ("lastuse", "discard"):
        books.pop(key, None)
