"""The trace simulator: the 128/1024/300-token example, the default trace's distribution, a
hand-traced small run, preemption, and the paged-versus-contiguous waste."""
from __future__ import annotations

from fractions import Fraction

import pytest

from refimpl.kvcache.simulate import (OUTPUT_HISTOGRAM, PROMPT_HISTOGRAM, Request,
                                      SplitMix64, paged_example_trace,
                                      sharegpt_like_trace, simulate)


def test_paged_example_exactly() -> None:
    # ratios are int / int divisions, correctly rounded, hence compared exactly
    cont = simulate(paged_example_trace(), "contiguous")
    paged = simulate(paged_example_trace(), "paged", block_size=16)
    # max length 2048: 2048 - 128, 2048 - 1024, 2048 - 300
    assert cont.request_waste == (1920, 1024, 1748)
    # pages: 128 = 8 * 16, 1024 = 64 * 16, 300 -> 19 pages = 304 slots
    assert paged.request_waste == (0, 0, 4)
    assert paged.utilization == 1452 / 1456
    assert cont.utilization == 1452 / (3 * 2048)


def test_splitmix64_reference_value() -> None:
    # published first output of SplitMix64 seeded with 0
    assert SplitMix64(0).next() == 0xE220A8397B1DCDAF


def test_histograms_have_sharegpt_means() -> None:
    def mean(h):
        return Fraction(sum(w * Fraction(lo + hi, 2) for lo, hi, w in h),
                        sum(w for *_, w in h))
    assert abs(mean(PROMPT_HISTOGRAM) - 161) < 1
    assert abs(mean(OUTPUT_HISTOGRAM) - 338) < 1
    assert max(hi for _, hi, _ in PROMPT_HISTOGRAM) + max(
        hi for _, hi, _ in OUTPUT_HISTOGRAM) <= 2048


def test_default_trace_is_deterministic_and_sharegpt_like() -> None:
    t = sharegpt_like_trace(1000)
    assert t == sharegpt_like_trace(1000, seed=0) != sharegpt_like_trace(1000, seed=1)
    prompt = sum(r.prompt_len for r in t) / len(t)
    output = sum(r.output_len for r in t) / len(t)
    assert abs(prompt - 161) < 0.1 * 161 and abs(output - 338) < 0.1 * 338
    assert all(1 <= r.prompt_len and 1 <= r.output_len and r.total <= 2048 for r in t)
    assert all(a.arrival <= b.arrival for a, b in zip(t, t[1:]))


def test_small_run_hand_traced() -> None:
    # admitted at step 0 with 5 tokens, then 6, 7, 8; finishes at step 3
    trace = [Request(0, 5, 3)]
    c = simulate(trace, "contiguous", memory_slots=16, max_len=16)
    p = simulate(trace, "paged", memory_slots=16, max_len=16, block_size=4,
                 watermark=0.0)
    assert c.steps == p.steps == 4 and c.generated_tokens == p.generated_tokens == 3
    assert c.utilization == 26 / 64
    assert c.reserved_waste == (3 + 2 + 1) / 64
    assert c.fragmentation_waste == (64 - 26 - 6) / 64
    assert p.utilization == 26 / 32 and p.reserved_waste == 0
    assert c.request_waste == (8,) and p.request_waste == (0,)


def test_preemption_hand_traced() -> None:
    # 3 blocks of 4: R1 cannot grow while R0 runs, is preempted at steps 1 and 3,
    # runs alone from step 4 and finishes at step 12
    trace = [Request(0, 4, 4), Request(0, 4, 8)]
    r = simulate(trace, "paged", memory_slots=12, max_len=12, block_size=4,
                 watermark=0.0)
    assert (r.preemptions, r.steps, r.finished, r.peak_running) == (2, 13, 2, 2)
    assert r.generated_tokens == 4 + 8


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="policy"):
        simulate([], "buddy")
    with pytest.raises(ValueError, match=r"trace\[0\]"):
        simulate([Request(0, 2000, 100)], "paged")
    with pytest.raises(ValueError, match="memory_slots"):
        simulate([], "paged", memory_slots=100)


@pytest.mark.slow
def test_paged_waste_under_4_percent_contiguous_over_60() -> None:
    trace = sharegpt_like_trace(300)
    c = simulate(trace, "contiguous")
    p = simulate(trace, "paged", block_size=16)
    assert p.finished == c.finished == 300
    assert p.waste < 0.04
    assert c.waste > 0.60
    assert c.peak_running == 16 < p.peak_running
    assert p.steps < c.steps


def test_history_accounts_for_every_step() -> None:
    """The per-step history recomputes the aggregate figures (tokens / allocated over
    the run, peak running) and, for contiguous, allocation = running x max_len."""
    from fractions import Fraction as F

    trace = sharegpt_like_trace(80)
    for policy in ("contiguous", "paged"):
        r = simulate(trace, policy)
        assert len(r.history) == r.steps
        tokens = sum(h[0] for h in r.history)
        alloc = sum(h[1] for h in r.history)
        assert r.utilization == tokens / alloc
        assert F(r.memory_utilization).limit_denominator(10**12) == F(
            tokens, r.steps * 16 * 2048)
        assert max(h[2] for h in r.history) == r.peak_running
        assert all(0 <= t <= a <= 16 * 2048 for t, a, _ in r.history)
        if policy == "contiguous":
            assert all(a == n * 2048 for _, a, n in r.history)
        else:
            # pages: only the unfilled tail of each running request's last page
            assert all(a % 16 == 0 and (a - t < 16 * n if n else a == t == 0)
                       for t, a, n in r.history)


def test_history_hand_traced() -> None:
    # admitted at step 0 with 5 tokens, then 6, 7, 8; 16-slot reservation, 4-slot pages
    c = simulate([Request(0, 5, 3)], "contiguous", memory_slots=16, max_len=16)
    p = simulate([Request(0, 5, 3)], "paged", memory_slots=16, max_len=16, block_size=4,
                 watermark=0.0)
    assert c.history == ((5, 16, 1), (6, 16, 1), (7, 16, 1), (8, 16, 1))
    assert p.history == ((5, 8, 1), (6, 8, 1), (7, 8, 1), (8, 8, 1))


def test_simulate_watermark_is_rounded_down() -> None:
    # 150 pages of 16; R0 (1 page) is admitted, then R1 (148 pages) leaves exactly
    # int(0.01 * 150) = 1 page free, so it is admitted in the same step and finishes
    # there; R0 appends its one token at step 1 (a new page) and finishes
    trace = [Request(0, 16, 1), Request(0, 148 * 16, 0)]
    r = simulate(trace, "paged", memory_slots=150 * 16, max_len=150 * 16,
                 block_size=16, watermark=0.01)
    assert (r.steps, r.peak_running, r.finished, r.preemptions) == (2, 2, 2, 0)


@pytest.mark.parametrize("gap", [float("nan"), float("inf"), -0.5, 1e9])
def test_trace_gap_must_be_a_bounded_number(gap) -> None:
    # a NaN gap gave NaN arrivals, which never come: simulate looped forever
    with pytest.raises(ValueError, match="mean_gap"):
        sharegpt_like_trace(10, mean_gap=gap)
    with pytest.raises(TypeError, match="mean_gap"):
        sharegpt_like_trace(10, mean_gap="1")


@pytest.mark.parametrize("kwargs, match", [
    (dict(block_size=0), "block_size"),          # was a ZeroDivisionError
    (dict(block_size=-16), "block_size"),
    (dict(memory_slots=0), "memory_slots"),
    (dict(max_len=0), "max_len"),
    (dict(watermark=float("nan")), "watermark"),  # was int(nan): a raw ValueError
    (dict(watermark=1.5), "watermark"),
])
def test_simulate_sizes_are_checked(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        simulate(sharegpt_like_trace(5), "paged", **kwargs)


def test_simulate_refuses_what_would_never_finish() -> None:
    # an arrival that never comes (NaN), or comes after a million idle steps
    for arrival in (float("nan"), float("inf"), 1e12):
        with pytest.raises(ValueError, match=r"trace\[0\]\.arrival"):
            simulate([Request(arrival, 3, 3)], "paged")
    # a request whose tokens need more blocks than the budget holds (2050 slots are
    # 128 blocks of 16): it would be preempted and recomputed forever
    with pytest.raises(ValueError, match=r"trace\[0\].*129 blocks"):
        simulate([Request(0, 2040, 10)], "paged", memory_slots=2050, max_len=2050)
    # the same request fits the contiguous reservation
    r = simulate([Request(0, 2040, 10)], "contiguous", memory_slots=2050, max_len=2050)
    assert r.finished == 1
    with pytest.raises(TypeError, match=r"trace\[0\]\.prompt_len"):
        simulate([Request(0, 2.5, 1)], "paged")
