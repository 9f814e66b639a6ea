"""Attention performance on a GPU: a deterministic discrete-event model of one
FlashAttention thread block's main loop (:func:`simulate_block`), and the whole GPU
built on it and calibrated to published H100 measurements (:func:`simulate`).

- :mod:`hardware.pipeline.config`: what a block simulation runs: the main-loop
  schedules of one thread block (FlashAttention-3, arXiv 2407.08608, section 3: warp
  specialisation, ping-pong, intra-warpgroup pipelining) and the per-SM unit costs.
- :mod:`hardware.pipeline.schedule`: the unit costs from the GPU catalogue and the
  discrete-event engine.
- :mod:`hardware.pipeline.timeline`: the result of a block simulation: the event log,
  the circular-buffer invariant check and the ASCII Gantt chart.
- :mod:`hardware.pipeline.gpu`: the whole GPU (FA3 section 4): kernels, output tiles,
  the calibration and list-scheduled waves.
- :mod:`hardware.pipeline.published`: the whole-GPU model next to every published figure
  (:func:`sweep`).

Every public name of the five is importable from here (``from hardware import
pipeline as pl; pl.simulate_block("fa3", seq_len=8192)``).
"""
from __future__ import annotations

from hardware.pipeline.gpu import (
    FA2_TILES,
    H100_CALIBRATION,
    KERNELS,
    Calibration,
    GPURun,
    Kernel,
    Tile,
    attention_flops,
    coresident_tile_time,
    fa3_tile,
    kernel_tile,
    simulate,
)
from hardware.pipeline.config import (
    DTYPE_BYTES,
    HBM_LATENCY_CYCLES,
    L2_LATENCY_CYCLES,
    SCHEDULES,
    SOFTMAX_FP32_OPS_PER_SCORE,
    Schedule,
    UnitCosts,
)
from hardware.pipeline.schedule import simulate_block, unit_costs
from hardware.pipeline import config as _config
from hardware.pipeline import gpu as _gpu
from hardware.pipeline import published as _published
from hardware.pipeline import schedule as _schedule
from hardware.pipeline import timeline as _timeline
from hardware.pipeline.published import SweepRow, sweep
from hardware.pipeline.timeline import (
    GANTT_SYMBOLS,
    UNITS,
    BufferInvariantError,
    Event,
    Timeline,
    check_buffer_invariant,
    render_gantt,
)

# the public names of the five modules, one list each (no second copy here)
__all__ = [*_config.__all__, *_schedule.__all__, *_timeline.__all__, *_gpu.__all__, *_published.__all__]
