"""The whole-GPU model (:func:`hardware.pipeline.gpu.simulate`) next to every published
FlashAttention figure (:data:`hardware.measurements.PUBLISHED`: FlashAttention-2 and -3
papers, H100 SXM5)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from hardware.measurements import PUBLISHED, Measurement
from hardware.pipeline.gpu import H100_CALIBRATION, Calibration, simulate

__all__ = ["SweepRow", "sweep"]


@dataclass(frozen=True)
class SweepRow:
    """One published figure next to the model's.

    Attributes:
        measurement: the published figure (its problem, kernel and source).
        modelled: the model's speed on that problem, TFLOP/s.
    """

    measurement: Measurement
    modelled: float

    @property
    def error(self) -> float:
        """(modelled - published) / published."""
        return self.modelled / self.measurement.tflops - 1.0


def sweep(calibration: Calibration = H100_CALIBRATION,
          measurements: Iterable[Measurement] | None = None) -> list[SweepRow]:
    """The model at every published figure (default
    :data:`hardware.measurements.PUBLISHED`), TFLOP/s on the H100 catalogue entry."""
    rows = []
    for m in (PUBLISHED if measurements is None else measurements):
        r = simulate(m.kernel, seq_len=m.seq_len, head_dim=m.head_dim, batch=m.batch,
                     heads=m.heads, causal=m.causal, dtype=m.dtype, calibration=calibration)
        rows.append(SweepRow(m, r.tflops))
    return rows
