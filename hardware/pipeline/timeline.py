"""The result of a thread-block simulation (:mod:`hardware.pipeline.schedule`): the
event log and :class:`Timeline`, the check that a log keeps the circular-buffer protocol
(FlashAttention-3, arXiv 2407.08608, section 3.1 and Algorithm 1) and an ASCII Gantt
chart."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from hardware.pipeline.config import Schedule, UnitCosts
from refimpl.validation import check_positive_int

__all__ = [
    "Event",
    "Timeline",
    "BufferInvariantError",
    "UNITS",
    "GANTT_SYMBOLS",
    "check_buffer_invariant",
    "render_gantt",
]

#: the resources of the SM, in Gantt-chart order
UNITS = ("memory", "tensor", "softmax", "sfu", "fp32", "ldsm")


class BufferInvariantError(AssertionError):
    """An event log breaks the circular-buffer protocol: a stage read before it is full,
    or overwritten before every consumer released it."""


@dataclass(frozen=True)
class Event:
    """One entry of the event log.

    ``unit`` is one of :data:`UNITS` (busy from ``start`` to ``end``; "sfu", "fp32" and
    "ldsm" only with the calibrated costs' split softmax and operand copies) or "smem"
    (zero-length barrier events: op "full" when a tile has landed, "release" when
    warpgroup ``wg`` frees its stage). ``op`` is "load", "gemm0", "gemm1", "softmax"
    (or, split, "fp32" and "exp"), "exp_stall", "ldsm", "full" or "release"; ``j`` the
    K/V block; ``buffer`` "K" or "V" (GEMM0 reads K_j,
    GEMM1 reads V_j; None for the softmax); ``stage`` the stage of that buffer an event
    writes, reads or signals; ``wg`` the consumer warpgroup (None for loads and full).
    """

    unit: str
    op: str
    j: int
    start: float
    end: float
    wg: int | None = None
    stage: int | None = None
    buffer: str | None = None


@dataclass(frozen=True)
class Timeline:
    """Result of :func:`~hardware.pipeline.schedule.simulate_block`.

    Attributes:
        schedule: the schedule run.
        gpu: catalogue name.
        seq_len, head_dim, block, stages, dtype: the problem.
        costs: the rates used.
        events: the event log by start time; events that start together are in the
            causal order the model logged them (see :func:`check_buffer_invariant`).
        total_time: seconds until the last event ends.
        tensor_busy: seconds the tensor cores run GEMMs (an "exp_stall", the tensor
            cores held by an exp2 stream, is not counted).
        tensor_utilization: ``tensor_busy / total_time``.
        flops: useful FLOPs of the two GEMMs (4 B_r seq_len d).
    """

    schedule: Schedule
    gpu: str
    seq_len: int
    head_dim: int
    block: tuple[int, int]
    stages: int
    dtype: str
    costs: UnitCosts
    events: tuple[Event, ...]
    total_time: float
    tensor_busy: float
    tensor_utilization: float
    flops: float

    @property
    def flops_per_second(self) -> float:
        """Useful FLOP/s of this block on its SM (``tensor_utilization x tensor_flops``);
        times the SM count it is the whole-GPU figure if every SM runs such a block."""
        return self.flops / self.total_time if self.total_time > 0 else math.inf

    def gantt(self, width: int = 100, start: float = 0.0, end: float | None = None) -> str:
        """ASCII Gantt chart; see :func:`render_gantt`."""
        return render_gantt(self, width=width, start=start, end=end)


# --------------------------------------------------------------------------------------
# the buffer invariant

_BUFFER_OPS = ("load", "full", "gemm0", "gemm1", "release")


def check_buffer_invariant(events: Iterable[Event], *, stages: int, warpgroups: int) -> None:
    """Replay the log in time order and check the circular-buffer protocol on every event.

    The K buffer and the V buffer each have ``stages`` stages, and each stage cycles:
    empty -> the load of block j starts (only into stage j mod s, and only once every
    warpgroup has released the previous occupant j - s) -> full (not before the transfer
    ends) -> reads of block j (GEMM0 reads K_j, GEMM1 reads V_j; only while the stage
    holds block j and is full, and not after the reader released it) -> each warpgroup
    releases it (once, after its reads of j have ended) -> empty.

    Raises:
        BufferInvariantError: the first violation, naming the event and the stage's state.
    """
    # Events at equal times are taken in log order, which the model writes causally
    # (a release before the load it allows, a load before its full, full before the
    # reads); a read's end is taken right after the read's own log position.
    timed: list[tuple[float, int, int, Event]] = []
    for n, ev in enumerate(events):
        if ev.op in _BUFFER_OPS:
            if ev.buffer not in ("K", "V"):
                raise BufferInvariantError(f"{ev.op} of block {ev.j} names no buffer")
            timed.append((ev.start, n, 0, ev))
            if ev.op in ("gemm0", "gemm1"):
                timed.append((ev.end, n, 1, ev))   # the read ends
    timed.sort(key=lambda x: (x[0], x[1], x[2]))

    occupant: dict[tuple[str, int], int] = {}     # (buffer, stage) -> block loaded last
    landed: dict[tuple[str, int], float] = {}     # (buffer, block) -> transfer end
    full: set[tuple[str, int]] = set()
    released: dict[tuple[str, int], set[int]] = {}  # (buffer, block) -> warpgroups
    reading: dict[tuple[str, int, int], int] = {}   # (buffer, block, wg) -> reads running
    was_read: set[tuple[str, int, int]] = set()

    def fail(ev: Event, why: str) -> None:
        raise BufferInvariantError(
            f"{why}: {ev.op} of {ev.buffer}_{ev.j} (warpgroup {ev.wg}, stage {ev.stage}) "
            f"at t={ev.start:.6g} s, {stages} stages")

    for t, _, is_end, ev in timed:
        buf, j = ev.buffer, ev.j
        assert buf is not None
        if is_end:
            reading[(buf, j, ev.wg)] -= 1  # type: ignore[index]
            continue
        if ev.stage != j % stages:
            fail(ev, f"block {j} belongs in stage {j % stages}")
        slot = (buf, ev.stage)
        if ev.op == "load":
            prev = occupant.get(slot)
            done = released.get((buf, prev), set()) if prev is not None else set()
            if prev is not None and len(done) < warpgroups:
                fail(ev, f"stage overwritten while {buf}_{prev} is still in use "
                         f"(released by warpgroups {sorted(done)} of {warpgroups})")
            occupant[slot] = j
            landed[(buf, j)] = ev.end
        elif ev.op == "full":
            if occupant.get(slot) != j or (buf, j) not in landed:
                fail(ev, "full signalled for a tile that is not being loaded there")
            if t < landed[(buf, j)]:
                fail(ev, "full signalled before the transfer ended")
            full.add((buf, j))
        elif ev.op == "release":
            if occupant.get(slot) != j:
                fail(ev, "release of a tile the stage does not hold")
            if reading.get((buf, j, ev.wg), 0) or (buf, j, ev.wg) not in was_read:  # type: ignore
                fail(ev, "stage released before this warpgroup's reads ended")
            if ev.wg in released.setdefault((buf, j), set()):
                fail(ev, "stage released twice by the same warpgroup")
            released[(buf, j)].add(ev.wg)  # type: ignore[arg-type]
        else:
            if occupant.get(slot) != j or (buf, j) not in full:
                fail(ev, "stage read before it is full")
            if ev.wg in released.get((buf, j), ()):
                fail(ev, "stage read after this warpgroup released it")
            key = (buf, j, ev.wg)
            reading[key] = reading.get(key, 0) + 1  # type: ignore[index]
            was_read.add(key)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# ASCII Gantt chart

#: op -> (symbol for warpgroup 0, 1, 2)
GANTT_SYMBOLS: Mapping[str, tuple[str, str, str]] = {
    "gemm0": ("S", "s", "Z"), "gemm1": ("O", "o", "Q"), "softmax": ("E", "e", "X"),
    "exp": ("E", "e", "X"), "fp32": ("F", "f", "Y"), "exp_stall": ("-", "-", "-"),
    "ldsm": ("L", "l", "M"),
}


def render_gantt(timeline: Timeline, *, width: int = 100, start: float = 0.0,
                 end: float | None = None) -> str:
    """One row per unit (memory, tensor, softmax), ``width`` columns from ``start`` to
    ``end`` (default: the whole run). A column shows the event covering its midpoint:
    ``K``/``V`` transfer of a K or V tile, ``S``/``s`` GEMM0 (S = Q K^T) of warpgroup
    0/1, ``O``/``o`` GEMM1 (O += P V), ``E``/``e`` softmax, ``.`` idle.
    """
    width = check_positive_int("width", width)
    end = timeline.total_time if end is None else end
    if not end > start:
        raise ValueError(f"end ({end!r}) must be greater than start ({start!r})")
    step = (end - start) / width
    rows = []
    used = {ev.unit for ev in timeline.events}
    for unit in UNITS:
        if unit in ("sfu", "fp32", "ldsm") and unit not in used:
            continue   # the split softmax pipes appear only when the model used them
        spans = [ev for ev in timeline.events if ev.unit == unit and ev.end > ev.start]
        line = []
        k = 0
        for col in range(width):
            mid = start + (col + 0.5) * step
            while k < len(spans) and spans[k].end <= mid:
                k += 1
            ev = spans[k] if k < len(spans) and spans[k].start <= mid else None
            line.append("." if ev is None else ev.buffer if ev.op == "load"  # type: ignore
                        else GANTT_SYMBOLS[ev.op][ev.wg or 0])
        rows.append(f"{unit:>8} |{''.join(line)}|")
    scale = f"{'':>8}  {start * 1e6:<.3f} us{'':>{max(width - 20, 1)}}{end * 1e6:.3f} us"
    return "\n".join(rows + [scale])
