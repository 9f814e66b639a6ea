"""The shared-memory tiled matrix product, with its memory traffic counted.

The algorithm of Kirk and Hwu, "Programming Massively Parallel Processors", chapter 5
(tiled matrix multiplication): C is cut into BM x BN output
tiles, one per thread block. For each output tile, k is walked in steps of BK: the
BM x BK tile of A and the BK x BN tile of B are loaded from global into shared memory,
every thread (one per output element) reads its row of the A tile and its column of the B
tile from shared memory and accumulates, and the finished C tile is written back once.

Counting (elements, not bytes), with ragged edges counted honestly: a tile that hangs
over the matrix edge loads only the elements that exist, and only threads with an
output element read shared memory. For A (M x K), B (K x N), per batch entry:

    global reads of A  = M K ceil(N / BN)      (each element once per column of tiles)
    global reads of B  = K N ceil(M / BM)
    global writes      = M N
    shared writes      = global reads            (every loaded element is stored once)
    shared reads       = 2 M N K                 (each output reads K of A and K of B)
    tiles              = ceil(M / BM) ceil(N / BN)
    k steps            = tiles * ceil(K / BK)

For square N x N with T x T tiles and T dividing N, each input element is read N / T times
from global memory instead of N times (the untiled algorithm), and T times per load from
shared memory. ``padded_global_reads`` also reports what a kernel that always loads full
tiles (zero-filled past the edge) would move.

The values equal :func:`refimpl.matmul.matmul` under the same accumulation model, because
every model sees k in the same order: the K steps feed the model's streaming interface.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Union

import numpy as np

from refimpl.deprecation import REMOVED_IN, renamed_arguments
from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.accumulation import resolve_accumulation
from refimpl.matmul.gemm import as_format_values
from refimpl.matmul.rounding import target
from refimpl.validation import check_positive_int


@dataclass(frozen=True)
class TiledStats:
    """Traffic of one tiled product, in elements (see the module docstring)."""

    global_reads_a: int
    global_reads_b: int
    global_writes: int
    shared_writes: int
    shared_reads: int
    tiles: int
    k_steps: int
    padded_global_reads: int
    block: tuple[int, int, int] = (0, 0, 0)

    @property
    def global_reads(self) -> int:
        return self.global_reads_a + self.global_reads_b

    @property
    def tile_utilisation(self) -> float:
        """Outputs computed / output slots of all tiles (BM x BN each): below 1 when
        ragged edge tiles leave threads (and, for small matrices, SMs) idle (tile
        quantisation, NVIDIA "Matrix Multiplication Background User's Guide")."""
        slots = self.tiles * self.block[0] * self.block[1]
        return self.global_writes / slots if slots else 1.0

    @property
    def tile(self) -> tuple[int, int, int]:
        """Deprecated spelling of :attr:`block`."""
        warnings.warn(f"TiledStats.tile is deprecated and will be removed in {REMOVED_IN}; "
                      "use TiledStats.block", DeprecationWarning, stacklevel=2)
        return self.block


def _ceil_div(x: int, y: int) -> int:
    return -(-x // y)


@renamed_arguments({"tile": "block"})
def tiled_matmul(
    a: object,
    b: object,
    *,
    block: tuple[int, int, int] = (32, 32, 32),
    accumulate: Union[str, Accumulation] = "exact",
    out_format: object = "fp32",
    in_format: object = None,
) -> tuple[np.ndarray, TiledStats]:
    """Tiled ``a @ b`` with shared-memory tiles ``block = (BM, BN, BK)``.

    Args:
        a, b, accumulate, out_format, in_format: as for :func:`refimpl.matmul.matmul`.
        block: output tile rows BM, columns BN, and the K step BK, each >= 1.

    Returns:
        (c, stats): c as ``matmul`` returns it, stats a :class:`TiledStats`.

    Raises:
        TypeError: ``block`` is not a tuple, or an entry is not an int.
        ValueError: ``block`` does not have three entries or one is below 1 (which
            entry), or the errors of ``matmul``.
    """
    if not isinstance(block, tuple):
        raise TypeError(f"block must be a tuple (BM, BN, BK), got {block!r}")
    if len(block) != 3:
        raise ValueError(f"block must be a tuple (BM, BN, BK) of three entries, got {block!r}")
    bm, bn, bk = (check_positive_int(f"block {name}", v)
                  for name, v in zip(("BM", "BN", "BK"), block))
    fa, fb = (in_format if isinstance(in_format, tuple) else (in_format, in_format))
    a64 = as_format_values(a, "a", fa)
    b64 = as_format_values(b, "b", fb)
    if a64.shape[-1] != b64.shape[-2]:
        raise ValueError(f"inner dimensions differ: a {a64.shape}, b {b64.shape}")
    batch = np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2])
    nbatch = int(np.prod(batch, dtype=np.int64))
    model = resolve_accumulation(accumulate)
    tgt = target(out_format)
    m, k = a64.shape[-2:]
    n = b64.shape[-1]
    a64 = np.broadcast_to(a64, batch + (m, k))
    b64 = np.broadcast_to(b64, batch + (k, n))
    c = np.empty(batch + (m, n), dtype=np.float32)
    reads_a = reads_b = writes = shared_reads = tiles = steps = padded = 0
    for i0 in range(0, m, bm):
        rows = slice(i0, min(i0 + bm, m))
        for j0 in range(0, n, bn):
            cols = slice(j0, min(j0 + bn, n))
            tm, tn = rows.stop - rows.start, cols.stop - cols.start
            state = model.begin(batch + (tm, tn), tgt)
            for k0 in range(0, k, bk):
                ks = slice(k0, min(k0 + bk, k))
                tk = ks.stop - ks.start
                a_tile = a64[..., rows, ks]  # global -> shared
                b_tile = b64[..., ks, cols]
                reads_a += tm * tk
                reads_b += tk * tn
                padded += bm * bk + bk * bn
                shared_reads += 2 * tm * tn * tk  # each thread: its row and column
                steps += 1
                state = model.update(state, a_tile, b_tile)
            c[..., rows, cols] = model.finish(state)  # shared/registers -> global
            writes += tm * tn
            tiles += 1
    stats = TiledStats(
        global_reads_a=reads_a * nbatch, global_reads_b=reads_b * nbatch,
        global_writes=writes * nbatch, shared_writes=(reads_a + reads_b) * nbatch,
        shared_reads=shared_reads * nbatch, tiles=tiles * nbatch, k_steps=steps * nbatch,
        padded_global_reads=padded * nbatch, block=(bm, bn, bk),
    )
    return c, stats
