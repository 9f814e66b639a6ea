"""Warpgroup matrix layouts (sm_90a): the register fragments of ``wgmma.mma_async``'s
D and A operands, the 64-bit shared-memory matrix descriptor and the canonical
shared-memory layouts (with their swizzles) through which it addresses A and B.

Sources: PTX ISA 9.0, section 9.7.15.5.1 ("Register Fragments and Shared Memory Matrix
Layouts": "Shared Memory Matrix Layout", "Strides", "Matrix Descriptor").

Registers (9.7.15.5.1.1): warp q of the warpgroup holds rows 16q..16q+15 of D, and of A
when A comes from registers; within the warp, lane l (g = l / 4, t = l % 4) holds element
i of D at row 16q + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 t + i % 2 (two f16 elements
per 32-bit register with an ``.f16`` accumulator); A's fragment is the A fragment of
``mma.m16n8k16`` (f16/bf16), ``m16n8k8`` (tf32) or ``m16n8k32`` (8-bit types) of
:func:`hardware.simt.matrix.mma_layout`, offset by 16q rows.

Descriptors (9.7.15.5.1.2.2): a 64-bit value with the start address (bits 0-13), the
leading-dimension byte offset LBO (16-29) and the stride-dimension byte offset SBO
(32-45), each in units of 16 bytes, the base offset (49-51) and the swizzle mode (62-63:
0 none, 1 128-byte, 2 64-byte, 3 32-byte): :func:`decode_descriptor`. The operand is made
of 16-byte chunks (8 elements of 16 bits, 4 of tf32, 16 of 8 bits, contiguous along the
major dimension); :func:`chunk_addresses` places them by the canonical layouts:

- K-major (``imm-trans`` 0; always for tf32, FP8 and integers), chunk (row r, k-chunk c):
  no swizzle: 8 x 16-byte core matrices, ``start + 16 (r % 8) + SBO (r / 8) + LBO c``;
  swizzle of W bytes: rows of W bytes, ``start + W (r % 8) + SBO (r / 8) + 16 c``;
- MN-major (``imm-trans`` 1, f16/bf16 only), chunk (MN-chunk c, k): no swizzle:
  ``start + SBO c + 16 (k % 8) + LBO (k / 8)``; swizzle of W bytes (W / 16 chunks along
  MN per row): ``start + 16 (c % (W/16)) + LBO (c / (W/16)) + W (k % 8) + SBO (k / 8)``;

and the swizzle XORs the address's 16-byte chunk index with its row within the
repeating pattern: bits 4-6 ^= bits 7-9 (128 B), bits 4-5 ^= bits 7-8 (64 B), bit 4 ^=
bit 7 (32 B) (:func:`swizzle`), of the shared address itself, so a pattern repeats at
1024, 512 and 256-byte boundaries.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import matrix

__all__ = ["Descriptor", "INPUTS", "N_VALUES", "a_register_layout", "accumulator_layout",
           "chunk_addresses", "decode_descriptor", "fragment_matrix", "swizzle"]

#: input type -> (K, element bytes)
INPUTS = {"f16": (16, 2), "bf16": (16, 2), "tf32": (8, 4), "e4m3": (32, 1), "e5m2": (32, 1),
      "s8": (32, 1), "u8": (32, 1)}
_FLOAT_N = tuple(range(8, 257, 8))
_INT_N = (8, 16, 24) + tuple(range(32, 257, 16))
#: the N of m64nNk* each input type allows on sm_90a
N_VALUES = {t: (_INT_N if t in ("s8", "u8") else _FLOAT_N) for t in INPUTS}
_SWIZZLE = {0: 0, 1: 128, 2: 64, 3: 32}
_FRAG_A = {16: ("m16n8k16", 16), 8: ("m16n8k8", 32), 32: ("m16n8k32", 8)}


# ------------------------------------------------------------------ descriptors


class Descriptor(NamedTuple):
    """A decoded matrix descriptor (byte quantities)."""
    start: int
    lbo: int
    sbo: int
    base_offset: int
    swizzle: int   # bytes: 0 (none), 32, 64, 128


def decode_descriptor(desc: int) -> Descriptor:
    """The fields of a 64-bit wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2)."""
    d = int(desc) & 0xFFFFFFFFFFFFFFFF
    return Descriptor(start=(d & 0x3FFF) << 4, lbo=((d >> 16) & 0x3FFF) << 4,
                      sbo=((d >> 32) & 0x3FFF) << 4, base_offset=(d >> 49) & 0x7,
                      swizzle=_SWIZZLE[(d >> 62) & 0x3])


def swizzle(addr: np.ndarray, width: int) -> np.ndarray:
    """The shared address where a swizzled layout of ``width`` bytes (0, 32, 64, 128)
    puts the 16-byte chunk at ``addr``: the chunk index (bits 4..) XORed with the row in
    the repeating pattern (bits 7..), as many bits as the width has 16-byte chunks."""
    a = np.asarray(addr, dtype=np.int64)
    if width == 0:
        return a
    mask = {32: 1, 64: 3, 128: 7}[width]
    return a ^ (((a >> 7) & mask) << 4)


def chunk_addresses(d: Descriptor, rows: int, k_bytes: int, ebytes: int,
                    mn_major: bool) -> np.ndarray:
    """Shared addresses of the 16-byte chunks of a ``rows`` x K operand (``rows`` = M of
    A or N of B; K of ``k_bytes`` bytes): K-major (rows, k_bytes / 16) indexed by row and
    k-chunk, MN-major (rows * ebytes / 16, K) indexed by MN-chunk and k; element j of a
    chunk is at byte ``ebytes * j`` of it (see the module docstring)."""
    w = d.swizzle
    if not mn_major:
        r = np.arange(rows)[:, None]
        c = np.arange(k_bytes // 16)[None, :]
        if w == 0:
            a = d.start + 16 * (r % 8) + d.sbo * (r // 8) + d.lbo * c
        else:
            a = d.start + w * (r % 8) + d.sbo * (r // 8) + 16 * c
    else:
        c = np.arange(rows * ebytes // 16)[:, None]
        k = np.arange(k_bytes // ebytes)[None, :]
        if w == 0:
            a = d.start + d.sbo * c + 16 * (k % 8) + d.lbo * (k // 8)
        else:
            per = w // 16
            a = d.start + 16 * (c % per) + d.lbo * (c // per) + w * (k % 8) + d.sbo * (k // 8)
    return swizzle(a, w)


def descriptor_chunks(d: Descriptor, desc: int, rows: int, k_bytes: int, ebytes: int,
                      mn_major: bool, smem_size: int) -> np.ndarray:
    """:func:`chunk_addresses` of the descriptor ``desc`` (decoded: ``d``), flattened, for
    wgmma and tcgen05.mma alike: a ValueError for a base offset (a swizzle pattern that
    does not start at its repeat boundary) and for a chunk outside the ``smem_size`` bytes
    of the CTA's shared memory."""
    if d.base_offset:
        raise ValueError(f"matrix descriptor {desc:#x} has base offset {d.base_offset}: a "
                         "swizzle pattern that does not start at its repeat boundary is "
                         "not supported")
    c = chunk_addresses(d, rows, k_bytes, ebytes, mn_major).reshape(-1)
    if c.min() < 0 or c.max() + 16 > smem_size:
        bad = int(c[(c < 0) | (c + 16 > smem_size)][0])
        raise ValueError(
            f"matrix descriptor {desc:#x} (start {d.start:#x}, LBO {d.lbo}, SBO {d.sbo}, "
            f"swizzle {d.swizzle or 'none'}) addresses shared bytes {bad:#x}..{bad + 15:#x}, "
            f"outside the CTA's {smem_size} bytes of shared memory")
    return c


# ------------------------------------------------------------------ fragment layouts


def accumulator_layout(n: int) -> np.ndarray:
    """(128, n / 2, 2): for warpgroup thread 32 q + l and accumulator element i, its (row,
    column) in the 64 x n tile."""
    i = np.arange(n // 2)[None, :]
    th = np.arange(128)[:, None]
    q, lane = th // 32, th % 32
    g, t = lane // 4, lane % 4
    row = 16 * q + g + 8 * ((i >> 1) & 1)
    col = 8 * (i >> 2) + 2 * t + (i & 1)
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def a_register_layout(k: int) -> np.ndarray:
    """(128, elements, 2): the (row, column) in the 64 x k tile of A of each element of a
    warpgroup thread's A fragment."""
    shape, bits = _FRAG_A[k]
    t = matrix.mma_layout(shape, "a", bits)            # (32, n, 3) of (problem, row, col)
    out = np.zeros((128, t.shape[1], 2), dtype=np.int64)
    for q in range(4):
        out[32 * q:32 * q + 32, :, 0] = t[..., 1] + 16 * q
        out[32 * q:32 * q + 32, :, 1] = t[..., 2]
    return out


def fragment_matrix(codes: np.ndarray, table: np.ndarray, shape: tuple, per: int,
                     bits: int) -> np.ndarray:
    """Register words (nwg, 128, R) -> element codes (nwg, rows, cols) by the fragment
    table (128, E, 2); ``per`` elements of ``bits`` bits in each word, the lowest first."""
    nwg = codes.shape[0]
    e = table.shape[1]
    el = np.empty((nwg, 128, e), np.uint32)
    mask = np.uint32((1 << bits) - 1) if bits < 32 else np.uint32(0xFFFFFFFF)
    for i in range(e):
        el[:, :, i] = (codes[:, :, i // per] >> np.uint32(bits * (i % per))) & mask
    out = np.zeros((nwg,) + shape, np.uint32)
    out[:, table[..., 0], table[..., 1]] = el
    return out
