"""Tiling utilisation: how an output matrix split into tiles fills the SMs.

Each ``tile_m x tile_n`` output tile is one thread block on one SM; a grid of ``T``
tiles on ``S`` SMs runs in ``ceil(T / S)`` waves (one block per SM at a time, the
simplest occupancy). Two kinds of waste follow from the shapes alone:

- *wave quantisation*: the last wave holds ``T - (waves - 1) * S`` tiles, leaving the
  other SMs idle;
- *padding* (tile quantisation): edge tiles that overhang the matrix compute elements
  that are thrown away.

Both are the effects of NVIDIA's "Matrix Multiplication Background User's Guide" (Deep
Learning Performance documentation, sections "Tile Quantization" and "Wave
Quantization"). Example: a 256-wide problem with 128-wide tiles is a clean 2 x 2; one more
column (257) needs a third tile column, six tiles, of which the two on the right hold a
single column each and leave their SMs essentially idle.
"""
from __future__ import annotations

from dataclasses import dataclass

from refimpl.validation import check_positive_int

__all__ = ["TileUtilization", "tile_utilization"]


@dataclass(frozen=True)
class TileUtilization:
    """Result of :func:`tile_utilization`.

    Attributes:
        tiles_m, tiles_n: tiles along each dimension (ceil divisions).
        tiles: ``tiles_m * tiles_n`` thread blocks.
        waves: ``ceil(tiles / num_sms)``.
        last_wave_tiles: tiles in the last wave.
        idle_sm_fraction_last_wave: SMs without a tile in the last wave / ``num_sms``.
        padding_fraction: computed elements outside the matrix / computed elements,
            ``1 - M * N / (tiles * tile_m * tile_n)``.
        partial_tiles: edge tiles that overhang the matrix.
        min_tile_fill: the smallest fraction of a tile that holds real elements.
        sm_utilization: useful work / (waves * num_sms * tile area), both losses together.
    """

    tiles_m: int
    tiles_n: int
    tiles: int
    waves: int
    last_wave_tiles: int
    idle_sm_fraction_last_wave: float
    padding_fraction: float
    partial_tiles: int
    min_tile_fill: float
    sm_utilization: float


def tile_utilization(M: int, N: int, tile_m: int, tile_n: int, num_sms: int
                     ) -> TileUtilization:
    """Tiles, waves, idle SMs in the last wave and padding of an ``M x N`` output.

    Example: ``tile_utilization(256, 257, 128, 128, 108)`` -> 6 tiles in
    one wave, 102 of 108 SMs idle, two tiles one column wide, 33% of the computed
    elements padding.
    """
    for name, v in (("M", M), ("N", N), ("tile_m", tile_m), ("tile_n", tile_n),
                    ("num_sms", num_sms)):
        check_positive_int(name, v)
    tm, tn = -(-M // tile_m), -(-N // tile_n)
    tiles = tm * tn
    waves = -(-tiles // num_sms)
    last = tiles - (waves - 1) * num_sms
    area = tile_m * tile_n
    edge_m, edge_n = M - (tm - 1) * tile_m, N - (tn - 1) * tile_n  # rows/cols of last tiles
    partial = tiles - (tm - (edge_m < tile_m)) * (tn - (edge_n < tile_n))
    return TileUtilization(
        tiles_m=tm,
        tiles_n=tn,
        tiles=tiles,
        waves=waves,
        last_wave_tiles=last,
        idle_sm_fraction_last_wave=(num_sms - last) / num_sms,
        padding_fraction=1 - (M * N) / (tiles * area),
        partial_tiles=partial,
        min_tile_fill=(edge_m * edge_n) / area,
        sm_utilization=(M * N) / (waves * num_sms * area),
    )
