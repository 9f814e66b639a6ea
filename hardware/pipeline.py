"""Attention performance on a GPU: a deterministic discrete-event model of one
FlashAttention thread block's main loop (:func:`simulate_block`), and the whole GPU
built on it and calibrated to published H100 measurements (:func:`simulate`).

FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608) gets its speed on Hopper from
asynchrony rather than from doing less arithmetic. The model follows the paper's
section 3:

- 3.1 *warp specialisation*: a producer warp issues TMA loads of K_j, V_j into an
  ``s``-stage circular shared-memory buffer (wait for the stage to be empty, load,
  signal full); consumer warpgroups wait for full, compute S = Q K_j^T (GEMM0), the
  softmax, O += P V_j (GEMM1) and release the stage. K and V have their own barriers
  (as in Algorithm 1, "wait for K_j" and "wait for V_j"): each stage is a K slot and a
  V slot, K_j released once GEMM0(j) is done and V_j once GEMM1(j) is, so the buffer
  is two circular buffers of ``s`` stages.
- 3.1 *ping-pong*: two consumer warpgroups take turns on the tensor cores (a barrier
  orders the GEMMs of one warpgroup, "GEMM1 of one iteration and GEMM0 of the next",
  before those of the other), so the softmax of one runs while the other's GEMMs do.
- 3.2 *intra-warpgroup two-stage pipelining* (Algorithm 2): issue S_next = Q K_j^T, then
  O += P_cur V_{j-1}, and compute the softmax of S_next while the P V GEMM runs.

Schedules (the registry :data:`SCHEDULES`; paper Table 2 ablates exactly these two
ingredients, warp specialisation and GEMM-softmax overlap):

==================  ========  ===========  =========  =====================================
name                producer  warpgroups   ping-pong  intra-warpgroup pipelining
==================  ========  ===========  =========  =====================================
serial              no        1            no         no  (FlashAttention-2 style)
warp_specialized    yes       1            no         no
pingpong            no        2            yes        no
fa3                 yes       2            yes        yes
==================  ========  ===========  =========  =====================================

Without a producer (``serial``, ``pingpong``) the consumers load K_j, V_j themselves and
wait for the data before going on, as a FlashAttention-2 kernel does. Any other
combination can be run by passing a :class:`Schedule` (for example a producer with two
free-running consumer warpgroups).

Resources (units) of the one SM, each serving one operation at a time, first come first
served (ties broken by agent: producer, then warpgroup 0, then 1):

- ``memory``: the K/V tile transfers of this block, ``bytes / bandwidth`` each; the data
  lands ``load_latency`` after its transfer ends (transfers are pipelined: the next one
  may start while earlier ones are in flight).
- ``tensor``: the tensor cores; a warpgroup's WGMMA uses all four of an SM's, so GEMMs
  run one at a time, in the order they are issued.
- ``softmax``: the SFU (MUFU) and FP32 pipes that run the softmax; shared by the
  warpgroups (a warpgroup's four warps sit on the SM's four sub-partitions).

Unit costs (:func:`unit_costs`; ``r`` query rows of one warpgroup = ``B_r / warpgroups``,
``c`` keys in the block, ``d`` head dimension, ``b`` bytes per element of ``dtype``):

- GEMM0 and GEMM1: ``2 r c d / tensor_flops`` with ``tensor_flops`` = the GPU's dense
  ``dtype`` peak / SM count.
- softmax: ``r c / exp_rate + (SOFTMAX_FP32_OPS_PER_SCORE r c + r d) / fp32_rate``: one
  exp2 per score on the SFU (``exp_rate`` = SFU results/clock/SM x clock), plus FP32
  instructions (``fp32_rate`` = vector FP32 FLOP/s / 2 / SM count: an FMA counts two
  FLOPs but issues once): four per score (scale-and-subtract FMA, row max, row sum,
  conversion of P to the GEMM1 operand) and one multiply per element of the O
  accumulator (rescaling by e^(m_old - m_new)). The two are added: the same warps issue
  them and each step depends on the previous.
- load of K_j or of V_j: ``c d b / bandwidth``; ``bandwidth`` = (HBM bandwidth / SM
  count) x ``l2_reuse``, where ``l2_reuse`` (default ``min(ceil(seq_len / B_r), SMs)``)
  is the number of thread blocks served by one HBM read of a K/V tile: the query tiles
  of a head run concurrently and read the same K/V tiles, all but the first hitting in
  L2. (The catalogue has no L2 bandwidth, so this ignores L2's own limit.)
- ``load_latency``: the approximate A100 memory-hierarchy latencies of the catalogue
  (:data:`hardware.specs.CATALOGUE` ``"A100"``, of the order measured by Abdelkhalik et
  al., arXiv:2208.11174): ~200 cycles for an L2 hit when ``l2_reuse > 1``, ~500 cycles
  for HBM otherwise, at the GPU's boost clock.

The producer loads K_0, V_0, K_1, V_1, ... in that order. Without a producer, the
first consumer that needs block j loads K_j, and V_j with it when V_j's stage is free.

At the catalogue's ideal rates (:func:`unit_costs`, the default of
:func:`simulate_block`) the block model leaves out Q's load and O's store, latencies of
GEMM completion and barriers, causal masking, FP8's transpose of V and any contention
between the softmax and the tensor cores; :class:`UnitCosts` has a field for each (zero
by default) and :func:`simulate` sets them from a :class:`Calibration`.
Times are sums of float64 durations, so every result is bit-identical on any machine.

The whole GPU (:func:`simulate`, FA3 paper section 4): a kernel (:data:`KERNELS`:
unfused attention, FlashAttention-2 as run on H100, FA3 and each single-feature
ablation) runs its output tiles (``B_r`` query rows of one batch and head; the tile from
register pressure and shared memory, :func:`fa3_tile`) on ``SMs x CTAs per SM`` slots by
greedy list scheduling, which gives waves, the tail wave and causal imbalance; each
tile costs the block model's main loop over its K/V blocks (those above the causal
diagonal skipped, those it crosses masked) plus the tile's overhead and, without a
persistent kernel, its Q load and O store. The costs come from
:data:`H100_CALIBRATION`: the SFU's exp2 rate (16 per SM per clock) and the FP32 rate
for the rest of the softmax on separate pipes, GEMM completion and barrier latencies,
the exp2's hold on the tensor cores, ``ldmatrix`` operand copies for ``mma.sync``,
FP8's V transpose, the per-tile overhead and the launch. :func:`sweep` compares the
model with every published figure (:data:`hardware.measurements.PUBLISHED`).

Infinite resources for the bound tests: ``bandwidth=math.inf`` makes loads free (no
transfer time and no latency); ``tensor_flops``, ``exp_rate`` and ``fp32_rate`` set to
``math.inf`` (or ``compute=math.inf`` for all three) make computing free.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from typing import Generator, Iterable, Mapping

from hardware import specs
from hardware.measurements import PUBLISHED, Measurement
from refimpl.validation import check_bool, check_positive_int

__all__ = [
    "Schedule",
    "SCHEDULES",
    "UnitCosts",
    "Event",
    "Timeline",
    "BufferInvariantError",
    "SOFTMAX_FP32_OPS_PER_SCORE",
    "L2_LATENCY_CYCLES",
    "HBM_LATENCY_CYCLES",
    "DTYPE_BYTES",
    "UNITS",
    "GANTT_SYMBOLS",
    "unit_costs",
    "simulate_block",
    "simulate",
    "Calibration",
    "H100_CALIBRATION",
    "Kernel",
    "KERNELS",
    "Tile",
    "fa3_tile",
    "kernel_tile",
    "FA2_TILES",
    "GPURun",
    "attention_flops",
    "SweepRow",
    "sweep",
    "check_buffer_invariant",
    "render_gantt",
]

#: FP32 instructions per score in the softmax besides the exp2: the scale-and-subtract
#: FMA, the row-max compare, the row-sum add and the conversion of P to 16 bits
SOFTMAX_FP32_OPS_PER_SCORE = 4
#: approximate A100 latencies (the catalogue's memory hierarchy): L2 ~200, HBM2e ~500 cycles
L2_LATENCY_CYCLES = 200
HBM_LATENCY_CYCLES = 500
#: bytes per element of the tensor-core input types
DTYPE_BYTES: Mapping[str, int] = {"fp16": 2, "bf16": 2, "fp8": 1}

#: the resources of the SM, in Gantt-chart order
UNITS = ("memory", "tensor", "softmax", "sfu", "fp32", "ldsm")


class BufferInvariantError(AssertionError):
    """An event log breaks the circular-buffer protocol: a stage read before it is full,
    or overwritten before every consumer released it."""


@dataclass(frozen=True)
class Schedule:
    """One way of running the main loop.

    Attributes:
        name: registry key.
        producer: a producer warp issues the loads ahead (warp specialisation, FA3 3.1);
            without one, the consumers load K_j, V_j themselves and wait for the data.
        warpgroups: consumer warpgroups (1, 2 or 3; FA3 runs three at d = 64); they
            split the block's B_r rows.
        pingpong: consumer warpgroups take turns on the tensor cores (FA3 3.1).
        intra_overlap: GEMM0 of block j is issued before GEMM1 of block j-1 and the
            softmax of j overlaps that GEMM1 (FA3 3.2, Algorithm 2).
        description: one line for tables.
        block_barrier: without a producer, the consumer warpgroups meet at a block-wide
            barrier for every K and V tile before taking their turn (loads issued by the
            compute warps are published to all of them that way); default False.
        wait_empty, wait_full: False builds a deliberately broken schedule (loads that do
            not wait for the stage to be released / GEMMs that do not wait for the data);
            :func:`simulate` then raises :class:`BufferInvariantError`. They exist so the
            invariant check can be shown to catch real violations.
    """

    name: str
    producer: bool
    warpgroups: int
    pingpong: bool
    intra_overlap: bool
    description: str = ""
    wait_empty: bool = True
    wait_full: bool = True
    block_barrier: bool = False

    def __post_init__(self) -> None:
        if self.warpgroups not in (1, 2, 3):
            raise ValueError(f"schedule {self.name!r}: warpgroups must be 1, 2 or 3, "
                             f"got {self.warpgroups!r}")
        if self.pingpong and self.warpgroups < 2:
            raise ValueError(f"schedule {self.name!r}: ping-pong needs 2 or more warpgroups")


#: name -> schedule: the one registry, read by the CLI and the tests
SCHEDULES: Mapping[str, Schedule] = {
    s.name: s for s in (
        Schedule("serial", producer=False, warpgroups=1, pingpong=False,
                 intra_overlap=False,
                 description="FA2 style: load, GEMM0, softmax, GEMM1 in sequence"),
        Schedule("warp_specialized", producer=True, warpgroups=1, pingpong=False,
                 intra_overlap=False,
                 description="producer warp + circular buffer; one consumer warpgroup"),
        Schedule("pingpong", producer=False, warpgroups=2, pingpong=True,
                 intra_overlap=False,
                 description="two consumer warpgroups taking turns; no producer"),
        Schedule("fa3", producer=True, warpgroups=2, pingpong=True, intra_overlap=True,
                 description="warp specialisation + ping-pong + intra-warpgroup overlap"),
    )
}


@dataclass(frozen=True)
class UnitCosts:
    """Per-SM rates the unit costs are computed from (SI units; ``math.inf`` allowed).

    Attributes:
        tensor_flops: tensor-core FLOP/s of one SM in the GEMM input type.
        exp_rate: exp2 results per second of one SM (SFU).
        fp32_rate: FP32 instructions per second of one SM.
        bandwidth: bytes/s delivered to this block's K/V loads.
        load_latency: seconds from the end of a transfer to the data being usable.
        bytes_per_element: of Q, K, V in shared memory.
        gemm_latency: seconds from the end of a GEMM's tensor-core time until the issuing
            warpgroup sees its result (WGMMA completion and ``wgmma.wait_group``); the
            softmax of S_j waits this long after GEMM0(j) (default 0).
        sync_latency: seconds a barrier hand-over costs: the ping-pong turn passed to the
            next warpgroup, and, without a producer, the block-wide barrier after each
            consumer-issued load (default 0).
        softmax_fp32_ops: FP32 instructions per score besides the exp2 (default
            :data:`SOFTMAX_FP32_OPS_PER_SCORE`).
        v_transpose: seconds the producer spends transposing one V tile in shared
            memory after it lands (FP8 WGMMA needs V k-major, FA3 3.3; default 0).
        split_pipes: run the softmax on two units, "fp32" and "sfu", so one
            warpgroup's exponentials can overlap another's FP32 work
            (:meth:`softmax_parts`); default False: one "softmax" unit, the sum of both.
        exp_tensor_coupling: with ``split_pipes``, the fraction of an exp2 stream's time
            during which the SM's tensor cores cannot run another warpgroup's GEMM (an
            "exp_stall" on the tensor unit starting with the exp2); default 0.
        operand_seconds_per_flop: time per GEMM FLOP of the operand copies each warp
            makes from shared memory to registers (``ldmatrix`` before ``mma.sync``),
            on the "ldsm" unit (shared-memory bandwidth) right before the GEMM; default
            0 (WGMMA reads shared memory directly).
    """

    tensor_flops: float
    exp_rate: float
    fp32_rate: float
    bandwidth: float
    load_latency: float
    bytes_per_element: int
    gemm_latency: float = 0.0
    sync_latency: float = 0.0
    softmax_fp32_ops: float = SOFTMAX_FP32_OPS_PER_SCORE
    v_transpose: float = 0.0
    split_pipes: bool = False
    exp_tensor_coupling: float = 0.0
    operand_seconds_per_flop: float = 0.0

    def softmax_parts(self, rows: int, cols: int, head_dim: int
                      ) -> tuple[float, float, float]:
        """With ``split_pipes``: the softmax as three dependent steps on two pipes,
        FP32 before the exp2 (scale-and-subtract, row max: half the per-score FP32
        work), the exp2 on the SFU, FP32 after it (row sum, conversion of P: the other
        half, and the O rescale, one multiply per accumulator element)."""
        half = 0.5 * self.softmax_fp32_ops * rows * cols
        return (_div(half, self.fp32_rate), _div(float(rows * cols), self.exp_rate),
                _div(half + rows * head_dim, self.fp32_rate))

    def gemm(self, rows: int, cols: int, head_dim: int) -> float:
        """GEMM0 (rows x cols x d) or GEMM1 (rows x d x cols): 2 rows cols d FLOPs."""
        return _div(2.0 * rows * cols * head_dim, self.tensor_flops)

    def operands(self, rows: int, cols: int, head_dim: int) -> float:
        """Shared-memory-to-register operand copies that precede a GEMM
        (``operand_seconds_per_flop`` x its FLOPs; 0 for WGMMA)."""
        return 2.0 * rows * cols * head_dim * self.operand_seconds_per_flop

    def softmax(self, rows: int, cols: int, head_dim: int) -> float:
        """exp2 of rows x cols scores on the SFU plus the FP32 work (module docstring)."""
        fp32_ops = self.softmax_fp32_ops * rows * cols + rows * head_dim
        return _div(float(rows * cols), self.exp_rate) + _div(float(fp32_ops), self.fp32_rate)

    def load(self, cols: int, head_dim: int) -> float:
        """Transfer time of one K_j or V_j tile (cols x d elements)."""
        return _div(float(cols * head_dim * self.bytes_per_element), self.bandwidth)

    @property
    def latency(self) -> float:
        """Load latency; zero when bandwidth is infinite (an ideal memory)."""
        return 0.0 if math.isinf(self.bandwidth) else self.load_latency


def _div(work: float, rate: float) -> float:
    return 0.0 if math.isinf(rate) else work / rate


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
    """Result of :func:`simulate`.

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
# unit costs from the catalogue


def unit_costs(gpu: specs.GPUSpec | str = "H100", *, seq_len: int, block: tuple[int, int],
               dtype: str = "fp16", tensor_flops: float | None = None,
               exp_rate: float | None = None, fp32_rate: float | None = None,
               bandwidth: float | None = None, load_latency: float | None = None,
               l2_reuse: float | None = None) -> UnitCosts:
    """The per-SM rates of ``gpu`` (formulas in the module docstring); any rate given
    explicitly replaces the derived one.

    Args:
        gpu: catalogue entry or name.
        seq_len, block: the problem; they set the default ``l2_reuse``.
        dtype: "fp16", "bf16" or "fp8": the tensor-core peak and the bytes per element.
        tensor_flops: FLOP/s of one SM (default: dense ``dtype`` peak / SMs).
        exp_rate: exp2 per second of one SM (default: SFU results/clock/SM x clock).
        fp32_rate: FP32 instructions per second of one SM (default: vector FP32
            FLOP/s / 2 / SMs).
        bandwidth: bytes/s for this block's K/V tiles (default: HBM bandwidth / SMs x
            ``l2_reuse``).
        load_latency: seconds (default: the A100 figures, L2 ~200 cycles if ``l2_reuse > 1``,
            else HBM ~500 cycles, at the boost clock).
        l2_reuse: thread blocks served by one HBM read of a K/V tile (default:
            ``min(ceil(seq_len / B_r), SMs)``).

    Raises:
        ValueError: unknown dtype, a rate that is not positive, or a catalogue figure
            the derivation needs that the entry lacks (then pass the rate explicitly).
    """
    g = specs.get(gpu) if isinstance(gpu, str) else gpu
    seq_len = check_positive_int("seq_len", seq_len)
    if not (isinstance(block, (tuple, list)) and len(block) == 2):
        raise ValueError(f"block must be (B_r, B_c), got {block!r}")
    check_positive_int("block[0] (B_r)", block[0])
    check_positive_int("block[1] (B_c)", block[1])
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")

    def need(name: str, value: object, what: str) -> float:
        if value is None:
            raise ValueError(f"{g.name} has no {name} in the catalogue, needed for {what}; "
                             f"pass {what} explicitly")
        return float(value)  # type: ignore[arg-type]

    def per_sm(what: str) -> float:
        return need("sm_count", g.sm_count, what)

    def clock(what: str) -> float:
        return need("boost_clock_mhz", g.boost_clock_mhz, what) * 1e6

    if tensor_flops is None:
        if dtype not in g.dense_tflops:
            raise ValueError(f"{g.name} has no dense {dtype} tensor figure; it has "
                             f"{', '.join(g.dense_tflops)}")
        tensor_flops = g.flops(dtype) / per_sm("tensor_flops")
    if exp_rate is None:
        exp_rate = need("sfu_ops_per_clk_per_sm", g.sfu_ops_per_clk_per_sm, "exp_rate") \
            * clock("exp_rate")
    if fp32_rate is None:
        fp32_rate = need("vector_fp32_tflops", g.vector_fp32_tflops, "fp32_rate") * 1e12 \
            / 2.0 / per_sm("fp32_rate")
    if l2_reuse is None and (bandwidth is None or load_latency is None):
        l2_reuse = float(min(-(-seq_len // block[0]), per_sm("l2_reuse")))
    if l2_reuse is not None:
        _check_rate("l2_reuse", l2_reuse)
    if bandwidth is None:
        bandwidth = g.bandwidth / per_sm("bandwidth") * l2_reuse  # type: ignore[operator]
    if load_latency is None:
        cycles = L2_LATENCY_CYCLES if l2_reuse > 1 else HBM_LATENCY_CYCLES  # type: ignore
        load_latency = cycles / clock("load_latency")
    for name, value in (("tensor_flops", tensor_flops), ("exp_rate", exp_rate),
                        ("fp32_rate", fp32_rate), ("bandwidth", bandwidth)):
        _check_rate(name, value)
    load_latency = float(load_latency)
    if not (load_latency >= 0 and math.isfinite(load_latency)):
        raise ValueError(f"load_latency must be a finite number >= 0, got {load_latency!r}")
    return UnitCosts(float(tensor_flops), float(exp_rate), float(fp32_rate),
                     float(bandwidth), load_latency, DTYPE_BYTES[dtype])


def _check_rate(name: str, value: float) -> None:
    v = float(value)
    if not v > 0:  # refuses NaN too
        raise ValueError(f"{name} must be positive (math.inf allowed), got {value!r}")


# --------------------------------------------------------------------------------------
# the discrete-event engine

_Cmd = tuple  # ("at", time) or ("wait", signal key)
_Agent = Generator[_Cmd, None, None]


class _Engine:
    """Agents are generators that yield ("at", t) to sleep until t or ("wait", key) to
    block on a signal; units are first-come-first-served in global time order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, int, _Agent]] = []
        self._seq = 0
        self._rank: dict[int, int] = {}
        self._signals: dict[tuple, float] = {}
        self._waiters: dict[tuple, list[_Agent]] = {}
        self._free = {u: 0.0 for u in UNITS}
        self.events: list[Event] = []
        self._live: set[int] = set()

    def spawn(self, agent: _Agent, rank: int) -> None:
        self._rank[id(agent)] = rank
        self._live.add(id(agent))
        self._push(0.0, agent)

    def _push(self, t: float, agent: _Agent) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._rank[id(agent)], self._seq, agent))

    def is_set(self, key: tuple) -> bool:
        """Whether signal ``key`` has been sent at or before now."""
        t = self._signals.get(key)
        return t is not None and t <= self.now

    def signal(self, key: tuple, t: float) -> None:
        self._signals[key] = t
        for agent in self._waiters.pop(key, ()):
            self._push(max(t, self.now), agent)

    def occupy(self, unit: str, op: str, j: int, duration: float, *, wg: int | None = None,
               stage: int | None = None, buffer: str | None = None) -> float:
        """Queue ``op`` on ``unit`` now; returns its end time."""
        start = max(self.now, self._free[unit])
        end = start + duration
        self._free[unit] = end
        self.events.append(Event(unit, op, j, start, end, wg, stage, buffer))
        return end

    def occupy_with_stall(self, j: int, duration: float, coupling: float,
                          wg: int | None) -> float:
        """An exp2 stream on the SFU that also holds the tensor unit for ``coupling``
        of its time, both from when the two are free; returns the exp2's end."""
        start = max(self.now, self._free["sfu"], self._free["tensor"])
        end = start + duration
        self._free["sfu"] = end
        self._free["tensor"] = start + coupling * duration
        self.events.append(Event("sfu", "exp", j, start, end, wg))
        self.events.append(Event("tensor", "exp_stall", j, start, start + coupling * duration,
                                 wg))
        return end

    def mark(self, op: str, j: int, t: float, *, wg: int | None = None,
             stage: int | None = None, buffer: str | None = None) -> None:
        self.events.append(Event("smem", op, j, t, t, wg, stage, buffer))

    def run(self) -> None:
        while self._heap:
            t, _, _, agent = heapq.heappop(self._heap)
            self.now = t
            self._advance(agent)
        if self._live:
            raise RuntimeError("pipeline model deadlocked: agents wait on signals that "
                               f"are never sent ({sorted(self._waiters)[:4]} ...)")

    def _advance(self, agent: _Agent) -> None:
        while True:
            try:
                cmd = next(agent)
            except StopIteration:
                self._live.discard(id(agent))
                return
            if cmd[0] == "at":
                if cmd[1] > self.now:
                    self._push(cmd[1], agent)
                    return
            else:
                t = self._signals.get(cmd[1])
                if t is None:
                    self._waiters.setdefault(cmd[1], []).append(agent)
                    return
                if t > self.now:
                    self._push(t, agent)
                    return


# --------------------------------------------------------------------------------------
# the agents


@dataclass
class _Problem:
    schedule: Schedule
    costs: UnitCosts
    head_dim: int
    rows: int            # query rows per consumer warpgroup
    cols: list[int]      # keys in each K/V block
    stages: int
    engine: _Engine
    requested: set[tuple[str, int]] = field(default_factory=set)
    releases: dict[tuple[str, int], int] = field(default_factory=dict)
    arrived: dict[tuple[str, int], set[int]] = field(default_factory=dict)

    @property
    def blocks(self) -> int:
        return len(self.cols)


def _issue_load(p: _Problem, buf: str, j: int) -> Generator[_Cmd, None, None]:
    """Wait for the stage of ``buf`` to be empty, transfer the tile, signal full when
    it lands."""
    e, s = p.engine, p.stages
    if p.schedule.wait_empty and j >= s:
        yield ("wait", ("released", buf, j - s))
    duration = p.costs.load(p.cols[j], p.head_dim)
    if buf == "V":
        duration += p.costs.v_transpose
    end = e.occupy("memory", "load", j, duration, stage=j % s, buffer=buf)
    arrival = end + p.costs.latency
    e.mark("full", j, arrival, stage=j % s, buffer=buf)
    e.signal(("full", buf, j), arrival)


def _producer(p: _Problem) -> _Agent:
    for j in range(p.blocks):
        yield from _issue_load(p, "K", j)
        yield from _issue_load(p, "V", j)


def _barrier(p: _Problem, wg: int, buf: str, j: int) -> Generator[_Cmd, None, None]:
    """The block-wide barrier of ``block_barrier`` schedules: every warpgroup arrives
    once per tile; all leave ``sync_latency`` after the last arrival."""
    got = p.arrived.setdefault((buf, j), set())
    if wg not in got:
        got.add(wg)
        if len(got) == p.schedule.warpgroups:
            p.engine.signal(("barrier", buf, j), p.engine.now + p.costs.sync_latency)
    yield ("wait", ("barrier", buf, j))


def _wait_full(p: _Problem, buf: str, j: int) -> Generator[_Cmd, None, None]:
    """Wait until tile ``buf``_j has landed.

    Without a producer the consumers load (FlashAttention-2 style): the first warpgroup
    that needs K_j loads it, and V_j with it if V_j's stage is already free (otherwise
    V_j is loaded when first needed); everyone then waits for the data.
    """
    if not p.schedule.producer:
        wanted = [buf]
        if buf == "K" and (p.stages > j or p.engine.is_set(("released", "V", j - p.stages))):
            wanted.append("V")
        for b in wanted:
            if (b, j) not in p.requested:
                p.requested.add((b, j))
                yield from _issue_load(p, b, j)
    if p.schedule.wait_full:
        yield ("wait", ("full", buf, j))
        if not p.schedule.producer and p.costs.sync_latency > 0:
            yield ("at", p.engine.now + p.costs.sync_latency)   # the block barrier


def _release(p: _Problem, wg: int, buf: str, j: int) -> None:
    e = p.engine
    e.mark("release", j, e.now, wg=wg, stage=j % p.stages, buffer=buf)
    key = (buf, j)
    p.releases[key] = p.releases.get(key, 0) + 1
    if p.releases[key] == p.schedule.warpgroups:
        e.signal(("released", buf, j), e.now)


class _Turns:
    """The ping-pong barrier: warpgroups take turns issuing their GEMMs in a fixed
    round-robin order (turn k of warpgroup w is number k * warpgroups + w)."""

    def __init__(self, p: _Problem, wg: int) -> None:
        self.p, self.wg, self.k = p, wg, 0

    def take(self) -> Generator[_Cmd, None, None]:
        if self.p.schedule.pingpong:
            yield ("wait", ("turn", self.k * self.p.schedule.warpgroups + self.wg))

    def hand_over(self) -> None:
        if self.p.schedule.pingpong:
            n = self.p.schedule.warpgroups
            self.p.engine.signal(("turn", self.k * n + self.wg + 1),
                                 self.p.engine.now + self.p.costs.sync_latency)
        self.k += 1


def _consumer(p: _Problem, wg: int) -> _Agent:
    """One consumer warpgroup.

    Without intra-warpgroup overlap (FA3 Algorithm 1's consumer): per block j, GEMM1 of
    block j-1 (wait, release V_{j-1}), GEMM0 of block j (wait, release K_j), softmax; a
    ping-pong turn covers "GEMM1 of one iteration and GEMM0 of the next". With it
    (Algorithm 2): GEMM0(j) then GEMM1(j-1) issued in one turn, the softmax of j runs as
    soon as GEMM0(j) is done, overlapping GEMM1(j-1), whose end the O rescale waits for.
    """
    e, c, d, r, s = p.engine, p.costs, p.head_dim, p.rows, p.stages
    lat = c.gemm_latency
    turns = _Turns(p, wg)

    def gemm(op: str, buf: str, j: int) -> float:
        return e.occupy("tensor", op, j, c.gemm(r, p.cols[j], d), wg=wg, stage=j % s,
                        buffer=buf)

    def operands(j: int) -> Generator[_Cmd, None, None]:
        if c.operand_seconds_per_flop > 0:
            yield ("at", e.occupy("ldsm", "ldsm", j, c.operands(r, p.cols[j], d), wg=wg))

    def softmax(j: int) -> Generator[_Cmd, None, None]:
        if not c.split_pipes:
            yield ("at", e.occupy("softmax", "softmax", j, c.softmax(r, p.cols[j], d),
                                  wg=wg))
            return
        pre, exp, post = c.softmax_parts(r, p.cols[j], d)
        yield ("at", e.occupy("fp32", "fp32", j, pre, wg=wg))
        if c.exp_tensor_coupling > 0:
            yield ("at", e.occupy_with_stall(j, exp, c.exp_tensor_coupling, wg))
        else:
            yield ("at", e.occupy("sfu", "exp", j, exp, wg=wg))
        yield ("at", e.occupy("fp32", "fp32", j, post, wg=wg))

    def pv(j: int) -> Generator[_Cmd, None, float]:
        yield from _wait_full(p, "V", j)
        yield from operands(j)
        return gemm("gemm1", "V", j)

    for j in range(p.blocks):
        if p.schedule.block_barrier and not p.schedule.producer:
            for buf, jj in (("K", j), ("V", j - 1)):
                if jj >= 0:
                    yield from _wait_full(p, buf, jj)
                    yield from _barrier(p, wg, buf, jj)
        yield from turns.take()
        if p.schedule.intra_overlap:
            yield from _wait_full(p, "K", j)
            yield from operands(j)
            done0 = gemm("gemm0", "K", j)
            done1 = (yield from pv(j - 1)) if j > 0 else None
            turns.hand_over()
            yield ("at", done0 + lat)
            _release(p, wg, "K", j)
            yield from softmax(j)
            if done1 is not None:
                yield ("at", done1 + lat)   # the O rescale waits for the P V GEMM
                _release(p, wg, "V", j - 1)
        else:
            if j > 0:
                yield ("at", (yield from pv(j - 1)) + lat)
                _release(p, wg, "V", j - 1)
            yield from _wait_full(p, "K", j)
            yield from operands(j)
            done0 = gemm("gemm0", "K", j)
            turns.hand_over()
            yield ("at", done0 + lat)
            _release(p, wg, "K", j)
            yield from softmax(j)
    last = p.blocks - 1
    if p.schedule.block_barrier and not p.schedule.producer:
        yield from _wait_full(p, "V", last)
        yield from _barrier(p, wg, "V", last)
    yield from turns.take()
    done1 = yield from pv(last)
    turns.hand_over()
    yield ("at", done1 + lat)
    _release(p, wg, "V", last)


# --------------------------------------------------------------------------------------
# public entry point


def simulate_block(schedule: str | Schedule, *, gpu: specs.GPUSpec | str = "H100",
                   seq_len: int, head_dim: int, block: tuple[int, int] = (128, 64),
                   stages: int = 2, dtype: str = "fp16", tensor_flops: float | None = None,
                   exp_rate: float | None = None, fp32_rate: float | None = None,
                   compute: float | None = None, bandwidth: float | None = None,
                   load_latency: float | None = None, l2_reuse: float | None = None,
                   costs: UnitCosts | None = None, check: bool = True) -> Timeline:
    """Run one thread block's main loop under ``schedule`` and return its timeline.

    The rates are the catalogue's ideal figures (:func:`unit_costs`) unless overridden;
    :func:`simulate` runs the whole GPU with the calibrated costs instead.

    Args:
        schedule: a name from :data:`SCHEDULES` ("serial", "warp_specialized",
            "pingpong", "fa3") or a :class:`Schedule`.
        gpu: catalogue entry (:mod:`hardware.specs`) the rates are derived from.
        seq_len: keys (the K/V length); the last block may be partial.
        head_dim: d.
        block: (B_r, B_c): query rows of the block, keys per K/V block. With two
            consumer warpgroups each takes B_r / 2 rows.
        stages: s, stages of the circular K and V buffers.
        dtype: tensor-core input type, "fp16", "bf16" or "fp8" (rate and bytes).
        tensor_flops, exp_rate, fp32_rate, bandwidth, load_latency, l2_reuse: override
            the derived per-SM rates (:func:`unit_costs`); ``math.inf`` allowed for the
            rates. ``compute`` sets the three compute rates at once (``math.inf``: free
            compute, the load bound). ``bandwidth=math.inf``: free loads.
        costs: a complete :class:`UnitCosts` to use as given (then none of the rate
            arguments may be passed).
        check: run :func:`check_buffer_invariant` on the event log (default True).

    Returns:
        :class:`Timeline` with ``total_time``, ``tensor_utilization`` and the events.

    Raises:
        ValueError: unknown schedule, bad sizes or rates, B_r not divisible by the
            warpgroups, or both loads and compute free (no time passes).
        BufferInvariantError: the schedule broke the buffer protocol.
    """
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
        schedule = SCHEDULES[schedule]
    elif not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a name or a Schedule, got {type(schedule).__name__}")
    seq_len = check_positive_int("seq_len", seq_len)
    head_dim = check_positive_int("head_dim", head_dim)
    stages = check_positive_int("stages", stages)
    check = check_bool("check", check)
    if not (isinstance(block, (tuple, list)) and len(block) == 2):
        raise ValueError(f"block must be (B_r, B_c), got {block!r}")
    b_r = check_positive_int("block[0] (B_r)", block[0])
    b_c = check_positive_int("block[1] (B_c)", block[1])
    if b_r % schedule.warpgroups:
        raise ValueError(f"block[0] (B_r) = {b_r} must be divisible by the "
                         f"{schedule.warpgroups} consumer warpgroups of {schedule.name!r}")
    if compute is not None:
        given = [n for n, v in (("tensor_flops", tensor_flops), ("exp_rate", exp_rate),
                                ("fp32_rate", fp32_rate)) if v is not None]
        if given:
            raise ValueError(f"compute sets tensor_flops, exp_rate and fp32_rate at once; "
                             f"do not also pass {', '.join(given)}")
        tensor_flops = exp_rate = fp32_rate = compute
    g = specs.get(gpu) if isinstance(gpu, str) else gpu
    if costs is None:
        costs = unit_costs(g, seq_len=seq_len, block=(b_r, b_c), dtype=dtype,
                           tensor_flops=tensor_flops, exp_rate=exp_rate,
                           fp32_rate=fp32_rate, bandwidth=bandwidth,
                           load_latency=load_latency, l2_reuse=l2_reuse)
    elif not isinstance(costs, UnitCosts):
        raise TypeError(f"costs must be a UnitCosts, got {type(costs).__name__}")
    elif any(v is not None for v in (tensor_flops, exp_rate, fp32_rate, bandwidth,
                                     load_latency, l2_reuse)):
        raise ValueError("costs is given whole; do not also pass rates")
    if math.isinf(costs.bandwidth) and all(
            math.isinf(x) for x in (costs.tensor_flops, costs.exp_rate, costs.fp32_rate)):
        raise ValueError("bandwidth and compute cannot both be infinite: no time would pass")

    cols = [min(b_c, seq_len - j * b_c) for j in range(-(-seq_len // b_c))]
    engine = _Engine()
    p = _Problem(schedule, costs, head_dim, b_r // schedule.warpgroups, cols, stages, engine)
    if schedule.pingpong:
        engine.signal(("turn", 0), 0.0)
    if schedule.producer:
        engine.spawn(_producer(p), 0)
    for wg in range(schedule.warpgroups):
        engine.spawn(_consumer(p, wg), 1 + wg)
    engine.run()

    # stable: events that start together stay in the causal order they were logged
    events = tuple(sorted(engine.events, key=lambda ev: ev.start))
    if check:
        check_buffer_invariant(events, stages=stages, warpgroups=schedule.warpgroups)
    total = max(ev.end for ev in events)
    busy = math.fsum(ev.end - ev.start for ev in events
                     if ev.unit == "tensor" and ev.op != "exp_stall")
    util = busy / total if total > 0 else 0.0
    return Timeline(schedule, g.name, seq_len, head_dim, (b_r, b_c), stages, dtype, costs,
                    events, total, busy, util, 4.0 * b_r * seq_len * head_dim)


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


# --------------------------------------------------------------------------------------
# the whole GPU: kernels, tiles, calibration, waves


@dataclass(frozen=True)
class Calibration:
    """The costs the ideal block model leaves out, one named figure each.

    Every value is physical and global (one set for every problem); the fit that chose
    them is described in :data:`H100_CALIBRATION`'s sources. Cycles are at the clock the
    GPU actually runs (``clock_fraction`` x the catalogue's boost clock).

    Attributes:
        clock_fraction: sustained SM clock under a saturating tensor-core load over the
            boost clock of the catalogue's peaks; scales every on-chip rate (tensor
            cores, SFU, FP32, shared memory) alike.
        sync_cycles: a barrier hand-over between warpgroups (ping-pong named barrier,
            mbarrier wake-up) or a block-wide barrier.
        gemm_latency_cycles: from the end of a GEMM's tensor-core time to its result in
            the issuing warpgroup's registers (the softmax of S_j depends on GEMM0(j)).
        softmax_fp32_ops: FP32-pipe instructions per score besides the exp2 (scale and
            subtract, row max, row sum, conversion of P, the shuffles of the two row
            reductions amortised per score).
        mask_fp32_ops: extra FP32-pipe instructions per score of a tile the causal
            diagonal crosses (index compare and select).
        mma_sync_fraction: tensor-core rate of Ampere-style ``mma.sync`` on Hopper as a
            fraction of the WGMMA peak (FlashAttention-2 cannot use WGMMA).
        tile_overhead_cycles: per output tile outside the main loop: the scheduler's
            next-tile fetch, barrier initialisation and the O and LSE epilogue's
            register work (the data movement of Q and O is modelled separately).
        hbm_efficiency: fraction of the datasheet HBM bandwidth a streaming kernel
            attains (unfused attention's softmax, copies and GEMM writes).
        launch_us: one kernel launch, microseconds (unfused attention runs several).
        producer_registers: registers per thread the producer warpgroup keeps after
            ``setmaxnreg`` (the consumers share the rest).
        split_softmax_pipes: the exp2 (SFU) and the FP32 work are separate pipes that
            different warpgroups use at once (:attr:`UnitCosts.split_pipes`); False:
            one softmax unit.
        sources: figure -> why this value.
    """

    clock_fraction: float
    sync_cycles: float
    gemm_latency_cycles: float
    softmax_fp32_ops: float
    mask_fp32_ops: float
    mma_sync_fraction: float
    tile_overhead_cycles: float
    hbm_efficiency: float
    launch_us: float
    producer_registers: int
    split_softmax_pipes: bool = True
    exp_tensor_coupling: float = 0.0
    smem_bytes_per_clk: float = 128.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("clock_fraction", "mma_sync_fraction", "hbm_efficiency"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v!r}")
        for name in ("sync_cycles", "gemm_latency_cycles", "softmax_fp32_ops",
                     "mask_fp32_ops", "tile_overhead_cycles", "launch_us"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not 0 <= self.exp_tensor_coupling <= 1:
            raise ValueError(f"exp_tensor_coupling must be in [0, 1], got "
                             f"{self.exp_tensor_coupling!r}")
        if not (self.smem_bytes_per_clk > 0 and math.isfinite(self.smem_bytes_per_clk)):
            raise ValueError(f"smem_bytes_per_clk must be positive, got "
                             f"{self.smem_bytes_per_clk!r}")
        if (isinstance(self.producer_registers, bool)
                or not isinstance(self.producer_registers, int)
                or not 0 < self.producer_registers <= 255):
            raise ValueError(f"producer_registers must be an int in [1, 255], got "
                             f"{self.producer_registers!r}")


#: the H100 SXM5 calibration against :data:`hardware.measurements.PUBLISHED`: one set of
#: global figures, chosen by a coordinate search (run once, outside the package) that
#: minimised the number of published flash-kernel figures off by more than 10%, then
#: the root-mean-square log error, each figure kept within the range its source allows
H100_CALIBRATION = Calibration(
    clock_fraction=0.97, sync_cycles=10.0, gemm_latency_cycles=850.0,
    softmax_fp32_ops=3.25, mask_fp32_ops=5.0, mma_sync_fraction=1.0,
    tile_overhead_cycles=650.0, hbm_efficiency=0.68, launch_us=4.0,
    producer_registers=32, split_softmax_pipes=True, exp_tensor_coupling=1.0,
    smem_bytes_per_clk=128.0,
    sources={
        "clock_fraction": "fitted, 0.97 (about 1775 of 1830 MHz): the H100 SXM5 (700 W) "
                          "clocks down slightly under a saturating tensor-core load; "
                          "bounded below by FA3's 756 TFLOP/s at d = 256 (Figure 5)",
        "sync_cycles": "fitted, 10 cycles: a named-barrier arrive/sync between warpgroups "
                       "costs tens of cycles at most",
        "gemm_latency_cycles": "fitted, 850 cycles (about 0.48 us): from a warpgroup's last "
                               "WGMMA of a GEMM to its wgmma.wait_group returning with the "
                               "FP32 accumulators in registers; set mainly by FA3 Table 2 "
                               "(without intra-warpgroup overlap two completions per "
                               "iteration are exposed: 661 -> 582 TFLOP/s)",
        "softmax_fp32_ops": "counted 3.5 per score (FFMA scale-and-subtract, FMNMX row "
                            "max, FADD row sum, half an F2FP pack), fitted 3.25",
        "mask_fp32_ops": "fitted, 5 per score of a diagonal tile (column index, compare, "
                         "select, and the masked rows' extra max/sum work)",
        "mma_sync_fraction": "fitted, 1.0: mma.sync reaches the tensor rate; "
                             "FlashAttention-2's loss on H100 comes from its ldmatrix "
                             "operand copies (128 B/clock/SM) and its unpipelined loop",
        "tile_overhead_cycles": "fitted, 650 cycles per output tile: scheduler fetch, "
                                "barrier set-up, the O/LSE epilogue's register work",
        "hbm_efficiency": "fitted on unfused attention, 0.68 (about 2.3 of 3.35 TB/s): "
                          "what PyTorch's softmax, copies and GEMM writes stream at",
        "launch_us": "4 us per kernel launch (typical CUDA launch plus PyTorch dispatch)",
        "producer_registers": "FA3 gives the producer warpgroup 24-32 registers per "
                              "thread with setmaxnreg (PTX ISA, setmaxnreg)",
        "exp_tensor_coupling": "fitted, 1.0: the published FA3 FP16 figures take per "
                               "score the tensor time plus the exp2 time (16/clock/SM): "
                               "t = 4d/(4096 x 0.93) + 1/16 clocks fits d = 64, 128, 256 "
                               "within 4%, i.e. the measured kernels do not hide the "
                               "exponentials behind the other warpgroup's GEMMs; the "
                               "sources do not name the mechanism (dispatch or register-"
                               "file port contention are candidates)",
        "smem_bytes_per_clk": "32 banks x 4 bytes per clock per SM (CUDA C Programming "
                              "Guide, shared memory, compute capability 9.0)",
        "sfu": "16 exp2 results per clock per SM (CUDA C Programming Guide throughput "
               "table; FA3 section 3.3: 3.9 TFLOPS of special functions on H100 SXM5)",
    },
)


@dataclass(frozen=True)
class Kernel:
    """An attention kernel as the whole-GPU model runs it.

    Attributes:
        name: registry key (:data:`KERNELS`).
        description: one line.
        schedule: the main-loop schedule of one output tile (None: unfused attention,
            three kernels through HBM).
        mma: "wgmma" (Hopper warpgroup MMA) or "mma_sync" (Ampere-style, per warp).
        persistent: one CTA per SM walks the tiles (FA3), so Q of the next tile loads
            during this one's epilogue; otherwise every tile is its own CTA and pays
            its Q load.
        longest_first: causal tiles are handed out longest first (a dynamic scheduler
            sorting by work); otherwise in launch order (a query-tile index
            increasing in the grid, as the hardware block scheduler dispatches).
        ctas_per_sm: co-resident CTAs (FA2 on H100: 2, limited by registers and
            shared memory); they share the SM's units.
    """

    name: str
    description: str
    schedule: Schedule | None
    mma: str = "wgmma"
    persistent: bool = True
    longest_first: bool = False
    ctas_per_sm: int = 1


def _fa3_schedule(name: str, producer: bool, pingpong: bool, intra: bool) -> Schedule:
    return Schedule(name, producer=producer, warpgroups=2, pingpong=pingpong,
                    intra_overlap=intra)


#: name -> kernel: the one registry of whole-GPU kernels (FA3 paper section 4)
KERNELS: Mapping[str, Kernel] = {
    k.name: k for k in (
        Kernel("standard", "unfused: S = QK^T, softmax, O = PV through HBM", None,
               persistent=False, longest_first=False),
        Kernel("fa2", "FlashAttention-2 on H100: mma.sync, no TMA, 2 CTAs per SM",
               Schedule("fa2", producer=False, warpgroups=2, pingpong=False,
                        intra_overlap=False),
               mma="mma_sync", persistent=False, longest_first=False, ctas_per_sm=2),
        Kernel("fa3", "FlashAttention-3: warp specialisation, ping-pong, intra-warpgroup "
                      "overlap", _fa3_schedule("fa3", True, True, True)),
        Kernel("fa3_no_warp_specialization", "FA3 without a producer warpgroup",
               dataclasses.replace(_fa3_schedule("fa3_no_ws", False, True, True),
                                   block_barrier=True)),
        Kernel("fa3_no_pingpong", "FA3 without the ping-pong barrier",
               _fa3_schedule("fa3_no_pp", True, False, True)),
        Kernel("fa3_no_intra_overlap", "FA3 without intra-warpgroup overlap",
               _fa3_schedule("fa3_no_intra", True, True, False)),
    )
}

#: largest dynamic shared memory one CTA may use on compute capability 9.0 (CUDA C
#: Programming Guide, technical specifications: 227 KB)
SMEM_PER_CTA_BYTES = 227 * 1024
#: 32-bit registers per SM (CUDA C Programming Guide, compute capability 9.0)
REGISTERS_PER_SM = 65536


@dataclass(frozen=True)
class Tile:
    """The tile a kernel runs: B_r query rows, B_c keys, consumer warpgroups, and the
    register and shared-memory demand that chose it."""

    b_r: int
    b_c: int
    warpgroups: int
    registers_per_thread: int
    register_budget: int
    smem_bytes: int


def fa3_tile(head_dim: int, dtype: str = "fp16", causal: bool = False, *,
             producer_registers: int = 32) -> Tile:
    """The FA3 tile from register pressure and shared memory.

    Consumer warpgroups: 3 for ``head_dim <= 64``, else 2 (64 query rows each, as the
    FA3 kernels run them). Each consumer thread holds its share of the O accumulator
    (64 x d FP32 over 128 threads: d / 2 registers) and, with intra-warpgroup overlap,
    two score tiles (S_next and P_cur, 64 x B_c FP32: B_c registers together); the
    budget is ``(65536 - 128 x producer_registers) / (128 x warpgroups)`` (``setmaxnreg``
    hands the producer's registers to the consumers: 240 with 2 consumers, 160 with 3).
    Shared memory holds Q, two stages of K and V (and for FP8 a transposed copy of V);
    it must fit 227 KB. B_c is the largest multiple of 16 (FP8: 32, the k of an FP8
    WGMMA) meeting both; a causal mask caps it at 128 (square tiles on the diagonal).
    This reproduces the FA3 launch template's FP16 tiles: 192 x 128 (d 64), 128 x 176
    (d 128; 128 x 128 causal), 128 x 80 (d 256; limited by shared memory).
    """
    head_dim = check_positive_int("head_dim", head_dim)
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    wgs = 3 if head_dim <= 64 else 2
    b_r = 64 * wgs
    budget = (REGISTERS_PER_SM - 128 * producer_registers) // (128 * wgs)
    step = 32 if dtype == "fp8" else 16
    nbytes = DTYPE_BYTES[dtype]

    def smem(b_c: int) -> int:
        v_copies = 3 if dtype == "fp8" else 2
        return (b_r * head_dim + 2 * b_c * head_dim + v_copies * b_c * head_dim) * nbytes

    b_c = 0
    for cand in range(step, 257, step):
        if head_dim // 2 + cand <= budget and smem(cand) <= SMEM_PER_CTA_BYTES:
            b_c = cand
    if b_c == 0:
        raise ValueError(f"no FA3 tile fits head_dim {head_dim} ({dtype})")
    if causal:
        b_c = min(b_c, 128)
    return Tile(b_r, b_c, wgs, head_dim // 2 + b_c, budget, smem(b_c))


#: FlashAttention-2's tiles on H100 (flash-attention csrc flash_fwd_launch_template.h,
#: sm90 path): head_dim -> (B_r, B_c); 4 warps per CTA, 2 CTAs per SM
FA2_TILES: Mapping[int, tuple[int, int]] = {64: (128, 128), 128: (128, 64), 256: (64, 64)}


@dataclass(frozen=True)
class GPURun:
    """Result of :func:`simulate`.

    Attributes:
        kernel: the kernel run.
        gpu, dtype, seq_len, head_dim, batch, heads, causal: the problem.
        tile: the tile (None for unfused attention).
        time: seconds for the whole forward pass.
        flops: the papers' FLOP count (4 B H N^2 d, halved when causal).
        tiles: output tiles (CTAs' work items), waves: tiles / (SMs x CTAs per SM).
        block: the main-loop timeline of one full-length tile (None when unfused).
        parts: named contributions to the time, seconds (what the model added up).
    """

    kernel: Kernel
    gpu: str
    dtype: str
    seq_len: int
    head_dim: int
    batch: int
    heads: int
    causal: bool
    tile: Tile | None
    time: float
    flops: float
    tiles: int
    waves: float
    block: Timeline | None
    parts: Mapping[str, float]

    @property
    def tflops(self) -> float:
        """The papers' figure of merit: ``flops / time`` in TFLOP/s."""
        return self.flops / self.time / 1e12

    @property
    def utilization(self) -> float:
        """``flops / time`` over the dense tensor peak of ``dtype``."""
        return self.flops / self.time / specs.get(self.gpu).flops(self.dtype)


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int,
                    causal: bool) -> float:
    """FLOPs as the FlashAttention benchmarks count them: ``4 B H N^2 d``, halved with
    a causal mask (the two GEMMs; the softmax is not counted)."""
    f = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return f / 2 if causal else f


def _block_costs(g: specs.GPUSpec, cal: Calibration, kernel: Kernel, dtype: str,
                 seq_len: int, head_dim: int, tile: Tile) -> UnitCosts:
    clock = g.boost_clock_mhz * 1e6 * cal.clock_fraction  # type: ignore[operator]
    sms = g.sm_count
    tensor = g.flops(dtype) / sms * cal.clock_fraction  # type: ignore[operator]
    if kernel.mma == "mma_sync":
        tensor *= cal.mma_sync_fraction
    exp_rate = g.sfu_ops_per_clk_per_sm * clock  # type: ignore[operator]
    fp32 = g.vector_fp32_tflops * 1e12 / 2 / sms * cal.clock_fraction  # type: ignore
    reuse = float(min(-(-seq_len // tile.b_r), sms))  # type: ignore[type-var]
    bandwidth = g.bandwidth / sms * reuse * cal.hbm_efficiency  # type: ignore[operator]
    latency = (L2_LATENCY_CYCLES if reuse > 1 else HBM_LATENCY_CYCLES) / clock
    v_transpose = 0.0
    if dtype == "fp8":
        # one shared-memory read and write of the tile
        v_transpose = 2.0 * tile.b_c * head_dim / cal.smem_bytes_per_clk / clock
    operand = 0.0
    if kernel.mma == "mma_sync":
        # each of a CTA's 4 warps copies the whole K (or V) tile, B_c x d elements, from
        # shared memory for its 2 (B_r / 4) B_c d FLOPs: 4 / B_r bytes per FLOP at 2 bytes
        operand = (4.0 * DTYPE_BYTES[dtype] / (2.0 * tile.b_r)) / cal.smem_bytes_per_clk / clock
    return UnitCosts(tensor, exp_rate, fp32, bandwidth, latency, DTYPE_BYTES[dtype],
                     gemm_latency=cal.gemm_latency_cycles / clock,
                     sync_latency=cal.sync_cycles / clock,
                     softmax_fp32_ops=cal.softmax_fp32_ops, v_transpose=v_transpose,
                     split_pipes=cal.split_softmax_pipes,
                     exp_tensor_coupling=cal.exp_tensor_coupling,
                     operand_seconds_per_flop=operand)


def _kernel(schedule: str | Kernel) -> Kernel:
    if isinstance(schedule, Kernel):
        return schedule
    if not isinstance(schedule, str):
        raise TypeError(f"schedule must be a kernel name or a Kernel, got "
                        f"{type(schedule).__name__}")
    if schedule not in KERNELS:
        raise ValueError(f"unknown kernel {schedule!r}; known: {', '.join(KERNELS)}")
    return KERNELS[schedule]


def kernel_tile(kernel: str | Kernel, head_dim: int, dtype: str = "fp16",
                causal: bool = False, block: tuple[int, int] | None = None,
                calibration: Calibration = H100_CALIBRATION) -> Tile | None:
    """The tile ``kernel`` runs (None for unfused attention): :func:`fa3_tile` for the
    FA3 family, :data:`FA2_TILES` for FlashAttention-2 (128 x 64 for other head
    dimensions), or ``block`` = (B_r, B_c) when given."""
    k = _kernel(kernel)
    if block is not None and not (isinstance(block, (tuple, list)) and len(block) == 2):
        raise ValueError(f"block must be (B_r, B_c), got {block!r}")
    if k.schedule is None:
        return None
    if k.mma == "mma_sync":
        b_r, b_c = block if block is not None else FA2_TILES.get(head_dim, (128, 64))
        b_r = check_positive_int("block[0] (B_r)", b_r)
        b_c = check_positive_int("block[1] (B_c)", b_c)
        return Tile(b_r, b_c, 1, 0, 0, (b_r + 2 * b_c) * head_dim * DTYPE_BYTES[dtype])
    t = fa3_tile(head_dim, dtype, causal, producer_registers=calibration.producer_registers)
    if block is None:
        return t
    b_r = check_positive_int("block[0] (B_r)", block[0])
    b_c = check_positive_int("block[1] (B_c)", block[1])
    if b_r % 64:
        raise ValueError(f"block[0] (B_r) = {b_r} must be a multiple of 64 (one "
                         f"consumer warpgroup per 64 rows)")
    return Tile(b_r, b_c, b_r // 64, head_dim // 2 + b_c, t.register_budget,
                (b_r + 4 * b_c) * head_dim * DTYPE_BYTES[dtype])


class _LoopTimes:
    """Main-loop seconds of one tile with n K/V blocks, from the block model: exact up
    to ``EXACT`` blocks, then extended by the steady-state period (the slope between
    ``EXACT`` and ``2 EXACT`` blocks), so long tiles cost no event simulation."""

    EXACT = 8

    def __init__(self, schedule: Schedule, costs: UnitCosts, g: specs.GPUSpec,
                 head_dim: int, block: tuple[int, int], stages: int, dtype: str) -> None:
        self._args = (schedule, costs, g, head_dim, block, stages, dtype)
        self._cache: dict[int, Timeline] = {}

    def timeline(self, n: int) -> Timeline:
        if n not in self._cache:
            schedule, costs, g, d, block, stages, dtype = self._args
            self._cache[n] = simulate_block(schedule, gpu=g, seq_len=n * block[1],
                                            head_dim=d, block=block, stages=stages,
                                            dtype=dtype, costs=costs, check=False)
        return self._cache[n]

    def __call__(self, n: int) -> float:
        if n <= 2 * self.EXACT:
            return self.timeline(n).total_time
        a, b = self(self.EXACT), self(2 * self.EXACT)
        return b + (n - 2 * self.EXACT) * (b - a) / self.EXACT


def _makespan(durations: list[float], slots: int) -> float:
    """Greedy list scheduling in the given order: each tile goes to the slot that frees
    first (ties: lowest slot), as a block scheduler or a dynamic tile counter does."""
    if len(durations) <= slots:
        return max(durations, default=0.0)
    heap = [(0.0, k) for k in range(slots)]
    for dur in durations:
        t, k = heapq.heappop(heap)
        heapq.heappush(heap, (t + dur, k))
    return max(t for t, _ in heap)


def simulate(schedule: str | Kernel = "fa3", *, gpu: specs.GPUSpec | str = "H100",
             seq_len: int, head_dim: int, batch: int = 1, heads: int = 1,
             causal: bool = False, dtype: str = "fp16",
             block: tuple[int, int] | None = None, stages: int = 2,
             calibration: Calibration = H100_CALIBRATION) -> GPURun:
    """The forward pass of attention on the whole GPU: time, TFLOP/s, utilisation.

    Policy: the FLOPs are the papers' count (causal halves them); time is never below
    the HBM traffic over the attainable bandwidth. Deterministic: sums and maxima of
    float64 in a fixed order.

    Flash kernels (FA2, FA3 and its ablations): every output tile of ``B_r`` query rows
    of one (batch, head) runs the block model (:func:`simulate_block`) over its K/V
    blocks with the calibrated costs (:class:`Calibration`): the SFU's exp2 rate (16
    per SM per clock), the FP32 rate for the rest of the softmax, barrier and GEMM
    completion latencies, FP8's V transpose. A tile also pays ``tile_overhead`` (and
    ``mask_fp32_ops`` per score of each K/V block the causal diagonal crosses); a
    non-persistent kernel's tile pays its own Q load and O store, a persistent one's
    only on its SM's first tile. Tiles go to ``SMs x ctas_per_sm`` slots by greedy list
    scheduling in tile-index order (query tile fastest, then heads and batch; longest
    first for a kernel with ``longest_first``), which models waves, the tail wave and
    causal imbalance. Unfused attention sums its
    kernels, each the larger of its tensor time and its HBM time, plus launches.

    Args:
        schedule: a name from :data:`KERNELS` ("standard", "fa2", "fa3",
            "fa3_no_warp_specialization", "fa3_no_pingpong", "fa3_no_intra_overlap")
            or a :class:`Kernel`.
        gpu: catalogue entry; needs SM count, clock, SFU and FP32 figures.
        seq_len: N, queries and keys (self-attention).
        head_dim, batch, heads: d, B, H.
        causal: causal mask (FLOPs halved, blocks above the diagonal skipped).
        dtype: "fp16", "bf16" or "fp8".
        block: (B_r, B_c) instead of the kernel's own tile (:func:`kernel_tile`).
        stages: K/V pipeline stages.
        calibration: the cost figures (default :data:`H100_CALIBRATION`).

    Returns:
        :class:`GPURun`.

    Raises:
        ValueError: unknown kernel, bad sizes, or a catalogue entry without the figures.
        TypeError: ``schedule`` or ``calibration`` of the wrong type.
    """
    k = _kernel(schedule)
    if not isinstance(calibration, Calibration):
        raise TypeError(f"calibration must be a Calibration, got "
                        f"{type(calibration).__name__}")
    seq_len = check_positive_int("seq_len", seq_len)
    head_dim = check_positive_int("head_dim", head_dim)
    batch = check_positive_int("batch", batch)
    heads = check_positive_int("heads", heads)
    stages = check_positive_int("stages", stages)
    causal = check_bool("causal", causal)
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    g = specs.get(gpu) if isinstance(gpu, str) else gpu
    for name in ("sm_count", "boost_clock_mhz", "sfu_ops_per_clk_per_sm",
                 "vector_fp32_tflops"):
        if getattr(g, name) is None:
            raise ValueError(f"{g.name} has no {name} in the catalogue; the whole-GPU "
                             f"model needs it")
    if dtype not in g.dense_tflops:
        raise ValueError(f"{g.name} has no dense {dtype} tensor figure")
    flops = attention_flops(batch, heads, seq_len, head_dim, causal)
    cal = calibration
    hbm = g.bandwidth * cal.hbm_efficiency
    nbytes = DTYPE_BYTES[dtype]
    if k.schedule is None:
        return _standard(k, g, cal, dtype, seq_len, head_dim, batch, heads, causal, flops)

    tile = kernel_tile(k, head_dim, dtype, causal, block, cal)
    assert tile is not None
    clock = g.boost_clock_mhz * 1e6 * cal.clock_fraction  # type: ignore[operator]
    sms: int = g.sm_count  # type: ignore[assignment]
    costs = _block_costs(g, cal, k, dtype, seq_len, head_dim, tile)
    if k.mma == "mma_sync":   # the co-resident CTAs, one consumer group each
        sched = dataclasses.replace(k.schedule, warpgroups=k.ctas_per_sm)
        block_shape = (tile.b_r * k.ctas_per_sm, tile.b_c)
    else:
        sched = dataclasses.replace(k.schedule, warpgroups=tile.warpgroups)
        block_shape = (tile.b_r, tile.b_c)
    loop = _LoopTimes(sched, costs, g, head_dim, block_shape, stages, dtype)
    per_sm_hbm = hbm / sms
    q_load = HBM_LATENCY_CYCLES / clock + tile.b_r * head_dim * nbytes / per_sm_hbm
    o_store = tile.b_r * head_dim * 2 / per_sm_hbm + tile.b_r * 4 / per_sm_hbm
    overhead = cal.tile_overhead_cycles / clock
    mask_block = cal.mask_fp32_ops * tile.b_r * tile.b_c / costs.fp32_rate

    m_tiles = -(-seq_len // tile.b_r)
    kv_blocks = -(-seq_len // tile.b_c)
    per_head: list[tuple[int, int]] = []   # (K/V blocks, masked blocks) per query tile
    for i in range(m_tiles):
        if causal:
            n = -(-min((i + 1) * tile.b_r, seq_len) // tile.b_c)
            first_masked = max(0, -(-(i * tile.b_r + 1) // tile.b_c) - 1)
            per_head.append((n, n - first_masked))
        else:
            per_head.append((kv_blocks, 0))
    extra = overhead if k.persistent else overhead + q_load + o_store
    durations_head = [loop(n) + m * mask_block + extra for n, m in per_head]
    if causal and k.longest_first:   # all heads' heaviest tiles first
        durations = sorted(durations_head * (batch * heads), reverse=True)
    else:                            # tile index order: query tile fastest, then heads
        durations = durations_head * (batch * heads)
    slots = sms * k.ctas_per_sm
    span = _makespan(durations, slots)
    if k.persistent:
        span += q_load            # the first tile's Q on every SM
    launch = cal.launch_us * 1e-6
    traffic = (batch * heads * seq_len * head_dim * (3 * nbytes + 2)
               + batch * heads * seq_len * 4)          # Q, K, V in; O, LSE out
    floor = traffic / hbm
    time = max(span, floor) + launch
    parts = {"tiles (list-scheduled)": span, "HBM floor": floor, "launch": launch,
             "main loop of a full tile": loop(kv_blocks),
             "tile overhead": extra, "Q load": q_load}
    ntiles = len(durations)
    return GPURun(k, g.name, dtype, seq_len, head_dim, batch, heads, causal, tile, time,
                  flops, ntiles, ntiles / slots, loop.timeline(min(kv_blocks, 8)), parts)


def _standard(k: Kernel, g: specs.GPUSpec, cal: Calibration, dtype: str, seq_len: int,
              head_dim: int, batch: int, heads: int, causal: bool,
              flops: float) -> GPURun:
    """Unfused attention as the FlashAttention benchmarks' PyTorch reference runs it:
    Q, K, V copied into the batched-GEMM layout (read and write each), S = scale QK^T
    written to HBM (the scale fused into the GEMM), a masked add for causal (reads S and the N x N mask, which
    is re-read per head once it exceeds L2, writes S), softmax (reads and writes
    N x N), O = PV reading P, O permuted back. Each kernel takes the larger of its
    tensor time and its HBM time; the sum plus a launch per kernel is the time."""
    nb = DTYPE_BYTES[dtype]
    e = float(batch * heads * seq_len * seq_len)       # score elements
    x = float(batch * heads * seq_len * head_dim)      # elements of Q, K, V or O
    hbm = g.bandwidth * cal.hbm_efficiency
    tensor = g.flops(dtype) * cal.clock_fraction
    l2 = (g.l2_mib or 0.0) * 2 ** 20
    kernels: list[tuple[str, float, float]] = [        # (name, FLOPs, bytes)
        ("Q layout", 0.0, 2 * x * nb), ("K layout", 0.0, 2 * x * nb),
        ("V layout", 0.0, 2 * x * nb),
        ("S = QK^T", 2 * e * head_dim, e * nb + 2 * x * nb)]
    if causal:
        mask = seq_len * seq_len * nb
        kernels.append(("causal mask add", 0.0,
                        2 * e * nb + (e * nb if mask > l2 else mask)))
    kernels += [("softmax", 0.0, 2 * e * nb),
                ("O = PV", 2 * e * head_dim, e * nb + 2 * x * nb),
                ("O layout", 0.0, 2 * x * nb)]
    parts = {name: max(f / tensor, b / hbm) for name, f, b in kernels}
    parts["launches"] = len(kernels) * cal.launch_us * 1e-6
    time = math.fsum(parts.values())
    return GPURun(k, g.name, dtype, seq_len, head_dim, batch, heads, causal, None, time,
                  flops, len(kernels), 0.0, None, parts)


@dataclass(frozen=True)
class SweepRow:
    """One published figure next to the model's."""

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
