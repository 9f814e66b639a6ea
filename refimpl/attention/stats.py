"""Memory-traffic statistics of an attention schedule, counted as the algorithm is written.

Units are elements (not bytes). ``hbm_reads``/``hbm_writes`` map a tensor name (``Q``,
``K``, ``V``, ``O``, ``l``, ``m``, ``LSE``, ``S``, ``P``, ``dO``, ``D``, ``dQ``, ``dK``,
``dV``, ``O_partial``, ``LSE_partial``) to the number of elements moved between HBM and
on-chip memory, summed over batch entries and query heads (each (batch, head) instance
of the algorithm loads its own K/V, as a thread block does). Mask inputs (padding masks,
ALiBi slopes) are generated or read outside the counted tensors and are not counted.

``peak_sram_elements`` is the largest on-chip working set of one instance: the tiles of
Q, O (or its accumulator), K, V, the score tile S (P overwrites it) and the per-row
statistics the schedule keeps on chip (``m``, ``l``; the backward pass adds dO, dQ, dK,
dV, L and D tiles). A block is one (query tile, key tile) pair of one instance;
``blocks_skipped`` counts pairs the schedule never computes because the mask hides them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ScheduleStats", "forward_working_set"]


def forward_working_set(r: int, c: int, d: int, dv: int) -> int:
    """On-chip elements of one forward instance with an ``r``-row query tile and a
    ``c``-key tile: Q_i (r x d), the output accumulator (r x dv), K_j (c x d), V_j
    (c x dv), the S/P tile (r x c) and the row statistics m and l (FlashAttention
    Algorithm 1 and 2)."""
    return r * d + r * dv + c * d + c * dv + r * c + 2 * r


@dataclass
class ScheduleStats:
    """Counters of one schedule run (see the module docstring for units and names)."""

    hbm_reads: dict[str, int] = field(default_factory=dict)
    hbm_writes: dict[str, int] = field(default_factory=dict)
    peak_sram_elements: int = 0
    blocks_computed: int = 0
    blocks_skipped: int = 0

    @property
    def hbm_accesses(self) -> int:
        """Total elements read and written."""
        return sum(self.hbm_reads.values()) + sum(self.hbm_writes.values())

    def read(self, tensor: str, elements: int) -> None:
        self.hbm_reads[tensor] = self.hbm_reads.get(tensor, 0) + int(elements)

    def write(self, tensor: str, elements: int) -> None:
        self.hbm_writes[tensor] = self.hbm_writes.get(tensor, 0) + int(elements)

    def sram(self, elements: int) -> None:
        self.peak_sram_elements = max(self.peak_sram_elements, int(elements))

    def add(self, other: "ScheduleStats") -> None:
        """Accumulate another run's counts (peaks take the maximum)."""
        for k, n in other.hbm_reads.items():
            self.read(k, n)
        for k, n in other.hbm_writes.items():
            self.write(k, n)
        self.sram(other.peak_sram_elements)
        self.blocks_computed += other.blocks_computed
        self.blocks_skipped += other.blocks_skipped
