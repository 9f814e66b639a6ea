"""Replay a request trace against a KV memory budget: contiguous reservation at the
maximum length versus paged allocation (Kwon et al. 2023, sections 3 and 6).

Step model (one step = one decoding iteration of the whole batch):

1. Requests with ``arrival <= t`` join the waiting queue (first come, first served).
2. Admission, in queue order, stopping at the first request that does not fit:
   ``"contiguous"`` needs one free reservation of ``max_len`` slots (the budget holds
   ``memory_slots // max_len`` of them); ``"paged"`` needs ``ceil(prompt / block_size)``
   free blocks with ``int(watermark * num_blocks)`` blocks still free afterwards (vLLM
   v0 admits with a 1% watermark, rounded down to whole blocks). An admitted request
   holds its prompt's K/V at once.
3. Every request admitted in an earlier step that still has output to produce appends
   one token, in admission order. Paged: when no block is free for it, the most
   recently admitted running request is preempted (its blocks freed, its progress
   dropped, and it goes back to the head of the queue to be recomputed, as vLLM does)
   until the append fits or the request itself was the victim.
4. Accounting: tokens held, slots allocated, requests running.
5. Requests holding ``prompt + output`` tokens finish and release their memory.

Fixed-size reservations cannot leave holes, so the contiguous waste here is internal:
slots reserved for tokens not generated yet, and slots never used (``max_len`` minus
the final length). Paged waste is only the unfilled tail of each last block.

The default trace generator is integer-only and seeded (SplitMix64), so a trace is the
same on every machine.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from refimpl.deprecation import deprecated_names
from refimpl.kvcache.pool import BlockPool
from refimpl.validation import as_float, check_int, check_positive_int

POLICIES = ("contiguous", "paged")
#: the latest arrival step a trace may hold (every step until then is simulated)
MAX_ARRIVAL = 10**6
#: the most requests a trace may hold
MAX_REQUESTS = 10**6
#: the largest mean gap between arrivals of :func:`sharegpt_like_trace`, in steps
MAX_MEAN_GAP = 1000.0


@dataclass(frozen=True)
class Request:
    """One request: arrival time (steps), prompt tokens, output tokens."""

    arrival: float
    prompt_len: int
    output_len: int

    @property
    def total(self) -> int:
        return self.prompt_len + self.output_len


#: ShareGPT-like length histograms: (lowest, highest, weight per mille); a length is a
#: bin drawn by weight, then uniform inside it. Exact means (see ``histogram_mean``):
#: prompt 160.94, output 338.3 tokens, near the ShareGPT means of the vLLM paper
#: (161 and 338); each is at most 1024 so prompt + output <= 2048.
PROMPT_HISTOGRAM: tuple[tuple[int, int, int], ...] = (
    (1, 16, 75), (17, 32, 120), (33, 64, 190), (65, 128, 240), (129, 256, 210),
    (257, 512, 110), (513, 1024, 55),
)
OUTPUT_HISTOGRAM: tuple[tuple[int, int, int], ...] = (
    (1, 16, 50), (17, 64, 95), (65, 128, 125), (129, 256, 215), (257, 512, 300),
    (513, 1024, 215),
)


def histogram_mean(hist: Sequence[tuple[int, int, int]]) -> Fraction:
    """Exact mean length of a histogram of uniform bins."""
    total = sum(w for _, _, w in hist)
    return Fraction(sum(w * (lo + hi) for lo, hi, w in hist), 2 * total)


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64 (2014): a tiny integer-only generator."""

    _MASK = (1 << 64) - 1

    def __init__(self, seed: int) -> None:
        self.state = seed & self._MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & self._MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self._MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self._MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """An int in [0, n) (modulo bias under n / 2**64, negligible here)."""
        return self.next() % n

    def unit(self) -> float:
        """A float in [0, 1): 53 random bits, exact."""
        return (self.next() >> 11) * 2.0 ** -53


def _draw(rng: SplitMix64, hist: Sequence[tuple[int, int, int]]) -> int:
    r = rng.below(sum(w for _, _, w in hist))
    for lo, hi, w in hist:
        if r < w:
            return lo + rng.below(hi - lo + 1)
        r -= w
    raise AssertionError("unreachable")


def sharegpt_like_trace(num_requests: int = 1000, *, seed: int = 0,
                        mean_gap: float = 1.0) -> list[Request]:
    """A ShareGPT-like trace: lengths from :data:`PROMPT_HISTOGRAM` and
    :data:`OUTPUT_HISTOGRAM`, gaps between arrivals uniform in ``[0, 2 * mean_gap)``
    steps (one request per step on average by default). Same seed, same trace.

    Raises:
        ValueError: ``num_requests`` negative or above :data:`MAX_REQUESTS`;
            ``mean_gap`` not a number in [0, :data:`MAX_MEAN_GAP`] (NaN included).
        TypeError: a count or seed that is not an int, a gap that is not a number.
    """
    num_requests = check_int("num_requests", num_requests, minimum=0)
    if num_requests > MAX_REQUESTS:
        raise ValueError(f"num_requests must be at most {MAX_REQUESTS}, got {num_requests}")
    seed = check_int("seed", seed)
    gap = as_float("mean_gap", mean_gap)
    if not (0.0 <= gap <= MAX_MEAN_GAP):  # NaN fails too (its arrivals never come)
        raise ValueError(f"mean_gap must be a number in [0, {MAX_MEAN_GAP}], got "
                         f"{mean_gap!r}")
    mean_gap = gap
    rng = SplitMix64(seed)
    out, t = [], 0.0
    for _ in range(num_requests):
        out.append(Request(t, _draw(rng, PROMPT_HISTOGRAM), _draw(rng, OUTPUT_HISTOGRAM)))
        t += rng.unit() * 2.0 * mean_gap
    return out


def paged_example_trace() -> list[Request]:
    """The 128-, 1024- and 300-token requests of the PagedAttention example: under a
    2048-token contiguous reservation they waste most of their slots, with 16-token
    pages at most 15 each (Kwon et al. 2023, section 3)."""
    return [Request(0, 128, 0), Request(0, 1024, 0), Request(0, 300, 0)]


@dataclass(frozen=True)
class SimulationResult:
    """What a policy did with a trace.

    Time-aggregated fractions (sums over steps): ``utilization = tokens / allocated``;
    ``waste = 1 - utilization`` (of which ``reserved_waste`` was held for tokens not
    generated yet and ``fragmentation_waste`` was never to be used);
    ``memory_utilization = tokens / (steps * memory_slots)``.
    ``request_waste[i]``: slots allocated but unused by request ``i`` at its final
    length (``max_len - length`` contiguous, the last page's free tail paged).
    ``history[t]``: (tokens held, slots allocated, requests running) after step ``t``'s
    appends, before finished requests release their memory (step 4 of the model).
    """

    policy: str
    steps: int
    finished: int
    peak_running: int
    mean_running: float
    preemptions: int
    #: tokens appended by decoding, recomputed ones (after preemption) counted again
    generated_tokens: int
    utilization: float
    waste: float
    reserved_waste: float
    fragmentation_waste: float
    memory_utilization: float
    request_waste: tuple[int, ...]
    history: tuple[tuple[int, int, int], ...] = ()


def simulate(trace: Sequence[Request], policy: str, *, memory_slots: int = 16 * 2048,
             max_len: int = 2048, block_size: int = 16,
             watermark: float = 0.01) -> SimulationResult:
    """Replay ``trace`` under ``policy`` (``"contiguous"`` or ``"paged"``).

    Args:
        memory_slots: KV budget in token slots (default: 16 max-length requests).
        max_len: the contiguous reservation and the longest allowed request.
        block_size: page size of the paged policy.
        watermark: fraction of blocks the paged policy keeps free at admission.

    Raises:
        ValueError: an unknown policy; a size that is not a positive int, a watermark
            outside [0, 1]; a request that is too long for ``max_len`` (or, paged, for
            the blocks of ``memory_slots``: it would be preempted forever); an arrival
            that is not a number within :data:`MAX_ARRIVAL` steps (NaN never arrives);
            more than :data:`MAX_REQUESTS` requests.
        TypeError: a count that is not an int.
    """
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    memory_slots = check_positive_int("memory_slots", memory_slots)
    max_len = check_positive_int("max_len", max_len)
    block_size = check_positive_int("block_size", block_size)
    w = as_float("watermark", watermark)
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"watermark must be a fraction in [0, 1], got {watermark!r}")
    watermark = w
    if memory_slots < max_len:
        raise ValueError(f"memory_slots ({memory_slots}) holds no {max_len}-slot request")
    num_blocks = memory_slots // block_size
    if len(trace) > MAX_REQUESTS:
        raise ValueError(f"trace has {len(trace)} requests; at most {MAX_REQUESTS}")
    for i, r in enumerate(trace):
        check_int(f"trace[{i}].prompt_len", r.prompt_len)
        check_int(f"trace[{i}].output_len", r.output_len)
        arrival = as_float(f"trace[{i}].arrival", r.arrival)
        if not -MAX_ARRIVAL <= arrival <= MAX_ARRIVAL:  # NaN fails too
            raise ValueError(f"trace[{i}].arrival must be a step in [-{MAX_ARRIVAL}, "
                             f"{MAX_ARRIVAL}], got {r.arrival!r}")
        if r.prompt_len < 1 or r.output_len < 0 or r.total > max_len:
            raise ValueError(f"trace[{i}] = {r}: need prompt >= 1, output >= 0 and "
                             f"prompt + output <= max_len ({max_len})")
        if policy == "paged" and -(-r.total // block_size) > num_blocks:
            # it could never hold all its tokens: preempted and recomputed forever
            raise ValueError(f"trace[{i}] = {r}: {r.total} tokens need "
                             f"{-(-r.total // block_size)} blocks of {block_size}; "
                             f"memory_slots ({memory_slots}) gives {num_blocks}")
    n = len(trace)
    order = sorted(range(n), key=lambda i: (trace[i].arrival, i))
    paged = policy == "paged"
    pool = BlockPool(memory_slots // block_size, block_size) if paged else None
    slots_per_block = block_size
    capacity = memory_slots // max_len
    keep_free = int(watermark * (memory_slots // block_size))  # vLLM v0 rounds down

    waiting: list[int] = []
    running: list[int] = []  # admission order
    length = [0] * n
    tables: dict[int, list[int]] = {}
    admitted_at = [-1] * n
    request_waste = [0] * n
    next_arrival = 0
    t = steps = finished = peak = preemptions = generated = 0
    sum_running = sum_tokens = sum_alloc = sum_reserved = 0
    history: list[tuple[int, int, int]] = []

    def preempt(i: int) -> None:
        nonlocal preemptions
        pool.release(reversed(tables.pop(i)))  # type: ignore[union-attr]
        running.remove(i)
        length[i] = 0
        waiting.insert(0, i)
        preemptions += 1

    while finished < n:
        while next_arrival < n and trace[order[next_arrival]].arrival <= t:
            waiting.append(order[next_arrival])
            next_arrival += 1
        while waiting:
            i = waiting[0]
            if paged:
                need = -(-trace[i].prompt_len // block_size)
                if pool.num_free - need < keep_free and running:  # type: ignore[union-attr]
                    break
                if need > pool.num_free:  # type: ignore[union-attr]
                    break
                tables[i] = pool.allocate(need)  # type: ignore[union-attr]
            elif len(running) >= capacity:
                break
            waiting.pop(0)
            running.append(i)
            length[i] = trace[i].prompt_len
            admitted_at[i] = t
        for i in list(running):
            # a request preempted earlier in this loop, just admitted, or complete
            # does not append
            if i not in running or admitted_at[i] == t or length[i] >= trace[i].total:
                continue
            if paged and length[i] % block_size == 0:
                while pool.num_free == 0 and i in running:  # type: ignore[union-attr]
                    preempt(running[-1])
                if i not in running:
                    continue
                tables[i] += pool.allocate(1)  # type: ignore[union-attr]
            length[i] += 1
            generated += 1
        tokens = sum(length[i] for i in running)
        if paged:
            alloc = pool.num_used * slots_per_block  # type: ignore[union-attr]
            reserved = 0
        else:
            alloc = len(running) * max_len
            reserved = sum(trace[i].total - length[i] for i in running)
        history.append((tokens, alloc, len(running)))
        sum_running += len(running)
        sum_tokens += tokens
        sum_alloc += alloc
        sum_reserved += reserved
        peak = max(peak, len(running))
        for i in [i for i in running if length[i] >= trace[i].total]:
            if paged:
                request_waste[i] = len(tables[i]) * block_size - length[i]
                pool.release(reversed(tables.pop(i)))  # type: ignore[union-attr]
            else:
                request_waste[i] = max_len - length[i]
            running.remove(i)
            finished += 1
        t += 1
        steps += 1

    util = sum_tokens / sum_alloc if sum_alloc else 1.0
    return SimulationResult(
        policy=policy, steps=steps, finished=finished, peak_running=peak,
        mean_running=sum_running / steps if steps else 0.0, preemptions=preemptions,
        generated_tokens=generated, utilization=util, waste=1.0 - util,
        reserved_waste=sum_reserved / sum_alloc if sum_alloc else 0.0,
        fragmentation_waste=(sum_alloc - sum_tokens - sum_reserved) / sum_alloc
        if sum_alloc else 0.0,
        memory_utilization=sum_tokens / (steps * memory_slots) if steps else 0.0,
        request_waste=tuple(request_waste),
        history=tuple(history),
    )


__getattr__ = deprecated_names(
    __name__, {"seed_example_trace": ("paged_example_trace", paged_example_trace)})
