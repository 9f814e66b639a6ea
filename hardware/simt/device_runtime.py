"""The CUDA runtime functions device code calls: ``printf`` (``vprintf``) and ``assert``
(``__assertfail``).

nvcc compiles ``printf(fmt, ...)`` to a call of ``vprintf(fmt, args)`` whose second
argument points at a packed argument buffer in local memory, and a failed ``assert`` to
a call of ``__assertfail(message, file, line, function, char_size)`` (both declared
``.extern .func`` in the PTX; CUDA C Programming Guide, "Formatted Output" and
"Assertion"). The inliner keeps these calls (``call.uni (ret), vprintf, (a, b)``) with
their parameters in ``.local`` variables; this module compiles them.

Special-value policy first: ``%f``/``%e``/``%g`` of an infinity print ``inf`` (``INF``
for the upper-case conversions) and of a NaN ``nan``, with a ``-`` when the sign bit is
set (glibc); the ``0`` flag does not apply to them. ``%s`` of a null pointer prints
``(null)`` and ``%p`` of one ``(nil)`` (glibc). ``%n``, ``%a``/``%A``, ``long double``
(``L``), wide characters and strings (``%lc``, ``%ls``) and fields wider than 65536
are refused with an :class:`ExecutionError` (the format is only known
when the call runs).

printf: the argument buffer holds each argument at the next multiple of its size (C
default argument promotions: ``char``/``short``/``int`` as 4 bytes, ``float`` promoted to
``double``, ``long``/``long long``/pointers as 8 bytes, as on 64-bit Linux); a ``*``
width or precision takes an ``int``. Conversions follow C99 7.19.6.1: flags ``-+ #0``,
width, precision, length modifiers ``hh h l ll j z t``, conversions ``d i o u x X c s p
e E f F g G %``. Floating-point conversions are exact (correctly rounded from the binary
value, ties to even, as glibc does). The text of one call is appended to
``LaunchStats.stdout`` for each executing thread in thread order, and calls are taken in
the order the warps execute them. The call returns the number of arguments parsed (CUDA
C Programming Guide, "Formatted Output": not the number of characters), -1 for a null
format.

assert: an executing thread raises :class:`DeviceAssertionError` naming the kernel, the
block and thread index (the first executing thread in thread order) and the message,
file, line and function ``__assertfail`` carries; the output printed so far is its
``stdout`` attribute.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np

from .errors import DeviceAssertionError, ExecutionError, MemoryAccessError, UnsupportedPtxError
from .isa.operands import Op
from .memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from .parser import Instruction, Sym, Vec

__all__ = ["c_call", "c_trap", "format_printf", "RUNTIME_FUNCTIONS"]

#: the CUDA runtime functions a ``call`` may name, with their (return, argument) counts
RUNTIME_FUNCTIONS = {"vprintf": (1, 2), "__assertfail": (0, 5)}

_SPEC = re.compile(rb"%([-+ #0]*)(\*|[0-9]+)?(?:\.(\*|[0-9]*))?(hh|h|ll|l|L|q|j|z|t)?(.?)",
                   re.S)
_MAX_STRING = 1 << 16
_MAX_FIELD = 1 << 16


class _Fault(Exception):
    """An argument read outside memory (reported by the caller with the thread)."""


def _int_text(value: int, conv: str, flags: str, width: int | None,
              prec: int | None) -> str:
    """C99 7.19.6.1 for d i o u x X: ``value`` already converted to the argument type."""
    neg = value < 0
    mag = -value if neg else value
    base = {"o": 8, "x": 16, "X": 16}.get(conv, 10)
    digits = "" if (prec == 0 and mag == 0) else (
        format(mag, {8: "o", 16: "x", 10: "d"}[base]))
    if conv == "X":
        digits = digits.upper()
    if prec is not None and len(digits) < prec:
        digits = "0" * (prec - len(digits)) + digits
    prefix = ""
    if conv in "di":
        prefix = "-" if neg else ("+" if "+" in flags else (" " if " " in flags else ""))
    if "#" in flags:
        if conv == "o" and not digits.startswith("0"):
            digits = "0" + digits
        elif conv in "xX" and mag != 0:
            prefix += "0" + conv
    return _pad(prefix, digits, flags, width, zero_ok=prec is None)


def _pad(prefix: str, body: str, flags: str, width: int | None, zero_ok: bool) -> str:
    n = len(prefix) + len(body)
    if width is None or n >= width:
        return prefix + body
    if "-" in flags:
        return prefix + body + " " * (width - n)
    if "0" in flags and zero_ok:
        return prefix + "0" * (width - n) + body
    return " " * (width - n) + prefix + body


def _float_text(x: float, conv: str, flags: str, width: int | None, prec: int | None) -> str:
    flags = "".join(sorted(set(flags)))
    if math.isfinite(x):
        spec = "%" + flags + (str(width) if width is not None else "") + (
            f".{prec}" if prec is not None else "") + conv
        return spec % x            # Python's %-format of floats is C's, correctly rounded
    neg = math.copysign(1.0, x) < 0
    body = ("nan" if math.isnan(x) else "inf")
    if conv in "EFG":
        body = body.upper()
    sign = "-" if neg else ("+" if "+" in flags else (" " if " " in flags else ""))
    return _pad(sign, body, flags, width, zero_ok=False)


def format_printf(fmt: bytes, read_arg: Callable[[int], int],
                  read_string: Callable[[int, int | None], bytes]) -> tuple[bytes, int]:
    """Format ``fmt`` (C printf semantics, see the module docstring).

    Args:
        fmt: the format string's bytes (without its NUL).
        read_arg: ``read_arg(size)`` returns the next argument of ``size`` bytes (4 or
            8) as an unsigned integer, aligned to ``size`` in the packed buffer.
        read_string: ``read_string(address, limit)`` returns the bytes of the C string
            at ``address`` (at most ``limit`` bytes when not None).

    Returns:
        (the output bytes, the number of arguments consumed).

    Raises:
        ExecutionError: a conversion that is not supported (``%n``, ``%a``, ``%L...``)
            or is malformed.
    """
    out = bytearray()
    pos = 0
    nargs = 0
    while True:
        k = fmt.find(b"%", pos)
        if k < 0:
            out += fmt[pos:]
            return bytes(out), nargs
        out += fmt[pos:k]
        m = _SPEC.match(fmt, k)
        flags = m.group(1).decode()
        conv = m.group(5).decode("latin-1")
        length = (m.group(4) or b"").decode()
        pos = m.end()
        if conv == "%":
            out += b"%"
            continue
        if conv == "" or conv not in "diouxXcspeEfFgGaAn":
            raise ExecutionError(f"printf: malformed conversion {fmt[k:pos + 1]!r} in "
                                 f"format {fmt[:60]!r}")
        if conv in "naA" or length in ("L", "q") or (length and conv in "csp"):
            raise ExecutionError(f"printf: conversion {fmt[k:pos].decode('latin-1')!r} is "
                                 "not supported")
        width: int | None = None
        prec: int | None = None
        if m.group(2) == b"*":
            w = _signed(read_arg(4), 32)
            nargs += 1
            if w < 0:
                flags += "-"
                w = -w
            width = w
        elif m.group(2):
            width = int(m.group(2))
        if m.group(3) is not None:
            if m.group(3) == b"*":
                p = _signed(read_arg(4), 32)
                nargs += 1
                prec = p if p >= 0 else None
            else:
                prec = int(m.group(3) or b"0")
        if max(width or 0, prec or 0) > _MAX_FIELD:
            raise ExecutionError(f"printf: field width or precision above {_MAX_FIELD} in "
                                 f"{fmt[k:pos].decode('latin-1')!r}")
        nargs += 1
        if conv in "diouxX":
            size = 8 if length in ("l", "ll", "j", "z", "t") else 4
            bits = {"hh": 8, "h": 16}.get(length, size * 8)
            raw = read_arg(size) & ((1 << bits) - 1)
            v = _signed(raw, bits) if conv in "di" else raw
            out += _int_text(v, conv, flags, width, prec).encode()
        elif conv == "c":
            ch = bytes([read_arg(4) & 0xFF])
            out += _pad("", "\x00", flags, width, False).encode().replace(b"\x00", ch)
        elif conv == "s":
            addr = read_arg(8)
            s = b"(null)" if addr == 0 else read_string(addr, prec)
            if prec is not None:
                s = s[:prec]
            body = s.decode("latin-1")
            out += _pad("", body, flags, width, False).encode("latin-1")
        elif conv == "p":
            addr = read_arg(8)
            body = "(nil)" if addr == 0 else f"0x{addr:x}"
            out += _pad("", body, flags, width, False).encode()
        else:
            x = float(np.uint64(read_arg(8)).view(np.float64))
            out += _float_text(x, conv, flags, width, prec).encode()


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


# ----------------------------------------------------------------------- memory access


def _reader(ctx: Any, thread: int, inst: Instruction) -> Callable[[int, int], bytes]:
    """``read(address, n)``: ``n`` bytes at a generic address, as ``thread`` sees them."""

    def read(addr: int, n: int) -> bytes:
        if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
            off, lim = addr - SHARED_WINDOW, ctx.smem_size
            buf, base = ctx.smem, int(ctx.sbase[thread])
        elif LOCAL_WINDOW <= addr < LOCAL_WINDOW + WINDOW_SIZE:
            off, lim = addr - LOCAL_WINDOW, ctx.local_size
            buf, base = ctx.lmem, int(ctx.lbase[thread])
        else:
            avail = ctx.memory.extent(addr)
            if avail < n:
                raise _Fault(f"{'out-of-bounds' if avail else 'unallocated'} global "
                             f"read of {n} bytes at address {addr:#x}")
            off = ctx.memory.offset(addr)
            return ctx.memory.buffer[off: off + n].tobytes()
        if off < 0 or off + n > lim:
            raise _Fault(f"out-of-bounds read of {n} bytes at address {addr:#x}")
        return buf[base + off: base + off + n].tobytes()

    return read


def _cstring(read: Callable[[int, int], bytes], ctx: Any, addr: int,
             limit: int | None) -> bytes:
    """The bytes of the NUL-terminated string at ``addr`` (at most ``limit``)."""
    out = bytearray()
    cap = _MAX_STRING if limit is None else min(limit, _MAX_STRING)
    while len(out) < cap:
        b = read(addr + len(out), 1)
        if b == b"\x00":
            return bytes(out)
        out += b
    if limit is None:
        raise _Fault(f"string at address {addr:#x} is not terminated within "
                     f"{_MAX_STRING} bytes")
    return bytes(out)


# ----------------------------------------------------------------------------- compile


def c_call(inst: Instruction, ctx: Any) -> Op:
    """call{.uni} (ret), vprintf, (fmt, args) and call{.uni} __assertfail, (message,
    file, line, function, char_size) (PTX ISA 9.7.12.2) as the inliner leaves them: the
    parameters are ``.local`` variables of the call site."""
    ops = list(inst.operands)
    rets: tuple = ()
    if ops and isinstance(ops[0], Vec):
        rets = ops.pop(0).items
    if not ops or not isinstance(ops[0], Sym):
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: malformed call")
    name = ops.pop(0).name
    args = ops.pop(0).items if ops and isinstance(ops[0], Vec) else ()
    if ops or name not in RUNTIME_FUNCTIONS:
        raise UnsupportedPtxError(
            f"line {inst.line}: {inst.text!r}: only calls to the .func functions a module "
            "defines (inlined) and to vprintf and __assertfail are supported")
    if (len(rets), len(args)) != RUNTIME_FUNCTIONS[name]:
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {name} takes "
                                  f"{RUNTIME_FUNCTIONS[name][1]} arguments")
    slots = []
    for a in list(rets) + list(args):
        if not isinstance(a, Sym):
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: call parameter "
                                      f"{a!r} is not a parameter variable")
        space, off = ctx.symbol(a.name, inst)
        if space != "local":
            raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: call parameter "
                                      f"{a.name} is not in a call sequence")
        slots.append(off)

    def arg(thread: int, k: int, n: int) -> int:
        o = int(ctx.lbase[thread]) + slots[len(rets) + k]
        return int.from_bytes(ctx.lmem[o: o + n].tobytes(), "little")

    def threads(ix: Any) -> list[int]:
        return (np.arange(ctx.T)[ix] if isinstance(ix, slice) else ix).tolist()

    if name == "__assertfail":
        def assertfail(ix: Any, ex: Any) -> None:
            for t in threads(ix):
                read = _reader(ctx, t, inst)
                try:
                    msg, file_, func = (_cstring(read, ctx, arg(t, k, 8), None)
                                        .decode("utf-8", "backslashreplace")
                                        if arg(t, k, 8) else "?" for k in (0, 1, 3))
                except _Fault as e:
                    raise MemoryAccessError(f"{ctx.location(t, inst)}: __assertfail: "
                                            f"{e}") from None
                line = _signed(arg(t, 2, 4), 32)
                err = DeviceAssertionError(
                    f"{ctx.location(t, inst)}: device-side assertion `{msg}` failed "
                    f"({file_}:{line}, in {func})")
                err.stdout = ctx.stats.stdout if ctx.stats is not None else ""
                raise err
        return Op(inst, "alu", assertfail)

    ret_off = slots[0]

    def vprintf(ix: Any, ex: Any) -> None:
        texts = []
        for t in threads(ix):
            read = _reader(ctx, t, inst)
            fmt_addr, buf_addr = arg(t, 0, 8), arg(t, 1, 8)
            cursor = [0]

            def read_arg(size: int) -> int:
                c = -(-cursor[0] // size) * size
                cursor[0] = c + size
                if buf_addr == 0:
                    raise _Fault("printf: the format takes arguments but none were passed")
                return int.from_bytes(read(buf_addr + c, size), "little")
            try:
                if fmt_addr == 0:
                    text, n = b"", -1
                else:
                    fmt = _cstring(read, ctx, fmt_addr, None)
                    text, n = format_printf(
                        fmt, read_arg, lambda a, lim: _cstring(read, ctx, a, lim))
            except _Fault as e:
                raise MemoryAccessError(f"{ctx.location(t, inst)}: {e}") from None
            except ExecutionError as e:
                raise ExecutionError(f"{ctx.location(t, inst)}: {e}") from None
            texts.append(text)
            o = int(ctx.lbase[t]) + ret_off
            ctx.lmem[o: o + 4] = np.frombuffer(int(n).to_bytes(4, "little", signed=True),
                                               np.uint8)
            ctx.linit[o: o + 4] = True
        if ctx.stats is not None:
            ctx.stats.stdout += b"".join(texts).decode("utf-8", "backslashreplace")
    return Op(inst, "alu", vprintf)


def c_trap(inst: Instruction, ctx: Any) -> Op:
    """trap (PTX ISA 9.7.19.1, ``__trap()``): aborts the kernel; an executing thread
    raises an :class:`ExecutionError` naming it (the first in thread order)."""

    def trap(ix: Any, ex: Any) -> None:
        t = int((np.arange(ctx.T)[ix] if isinstance(ix, slice) else ix)[0])
        raise ExecutionError(f"{ctx.location(t, inst)}: trap: the kernel aborted")
    if inst.operands:
        raise UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: trap takes no operands")
    return Op(inst, "alu", trap)
