"""One FlashAttention thread block's main loop as a deterministic discrete-event model
(:func:`simulate_block`): the schedules, their unit costs and the engine.

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
first consumer that needs block j loads K_j, and V_j with it when V_j's stage is free;
a ``prefetch`` schedule issues them in FlashAttention-2's order instead (V_j before
GEMM0(j), K_{j+1} once GEMM0(j) is done and V_j has landed).

At the catalogue's ideal rates (:func:`unit_costs`, the default of
:func:`simulate_block`) the block model leaves out Q's load and O's store, latencies of
GEMM completion and barriers, causal masking, FP8's transpose of V and any contention
between the softmax and the tensor cores; :class:`UnitCosts` has a field for each (zero
by default) and :func:`simulate` sets them from a :class:`Calibration`.
Times are sums of float64 durations, so every result is bit-identical on any machine.

Infinite resources for the bound tests: ``bandwidth=math.inf`` makes loads free (no
transfer time and no latency); ``tensor_flops``, ``exp_rate`` and ``fp32_rate`` set to
``math.inf`` (or ``compute=math.inf`` for all three) make computing free.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Generator

from hardware import specs
from hardware.pipeline.config import (DTYPE_BYTES, HBM_LATENCY_CYCLES, L2_LATENCY_CYCLES,
                                      SCHEDULES, Schedule, UnitCosts)
from hardware.pipeline.timeline import UNITS, Event, Timeline, check_buffer_invariant
from refimpl.validation import check_bool, check_positive_int

__all__ = ["unit_costs", "simulate_block"]


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


def _request(p: _Problem, buf: str, j: int) -> Generator[_Cmd, None, None]:
    """Issue the load of tile ``buf``_j unless a consumer already has (``prefetch``
    schedules; waits for the stage to be empty as :func:`_issue_load` does)."""
    if j < p.blocks and (buf, j) not in p.requested:
        p.requested.add((buf, j))
        yield from _issue_load(p, buf, j)


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
            if p.schedule.prefetch:           # K_j (prefetched, or K_0), then V_j
                yield from _request(p, "K", j)
                yield from _request(p, "V", j)
            yield from _wait_full(p, "K", j)
            yield from operands(j)
            done0 = gemm("gemm0", "K", j)
            turns.hand_over()
            yield ("at", done0 + lat)
            _release(p, wg, "K", j)
            if p.schedule.prefetch:           # wait for V_j, then issue K_{j+1}
                yield from _wait_full(p, "V", j)
                yield from _request(p, "K", j + 1)
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
