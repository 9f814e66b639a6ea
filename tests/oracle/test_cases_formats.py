"""The format cases of the registry: placement of inputs relative to the target, and
expected outputs checked against independent oracles (numpy.float16, values derived by
hand from the format definitions of OCP OFP8 rev 1.0 and OCP MX v1.0 section 5.3)."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import placement
from oracle.cases import registry
from oracles import built_case


def test_e2m1_placement_is_hand_derivable() -> None:
    x = placement.sharp_inputs("e2m1", np.float32)
    pos = sorted({float(v) for v in x if v > 0 and np.isfinite(v)})
    values = [0.5, 1, 1.5, 2, 3, 4, 6]
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0]        # 7.0: the overflow tie
    for v in values + ties + [8.0, 12.0]:
        assert v in pos
    for t in ties:     # float32 neighbours of every tie
        assert float(np.nextafter(np.float32(t), np.float32(0))) in pos
        assert float(np.nextafter(np.float32(t), np.float32(9))) in pos
    assert -0.25 in x and np.isinf(x).sum() == 2 and np.isnan(x).sum() == 2


def test_float64_placement_has_double_rounding_trap() -> None:
    x = placement.sharp_inputs("e4m3", np.float64)
    assert 1.0625 * (1 + 2.0 ** -40) in x        # above the tie 1.0625 by far less than
    assert 1.0625 * (1 - 2.0 ** -40) in x        # a float32 ulp


def test_wide_format_sample_covers_testfloat_points() -> None:
    codes = placement.target_codes("bf16")
    assert {0, 1, 0x7F7F, 0x3F80, 0x0080, 0x007F} <= set(codes.tolist())
    assert codes.max() == 0x7F7F


@pytest.mark.parametrize("case_id", ["formats.encode.fp16.f32.nearest_even",
                                     "formats.encode.fp16.f64.nearest_even"])
def test_fp16_expected_equals_numpy_float16(case_id: str) -> None:
    _, inputs, out = built_case(case_id)
    with np.errstate(over="ignore"):
        want = inputs["x"].astype(np.float16).view(np.uint16)
    nan = np.isnan(inputs["x"])
    assert np.array_equal(out["codes"][~nan], want[~nan])
    assert (out["codes"][nan] & 0x7C00 == 0x7C00).all()


# sharp cases, hand-derived from the format definitions
E4M3_SHARP = [(2.0 ** -10, 0x00), (1.5 * 2.0 ** -9, 0x02), (2.5 * 2.0 ** -9, 0x02),
              (3.5 * 2.0 ** -9, 0x04), (448.0, 0x7E), (464.0, 0x7E), (np.inf, 0x7F),
              (-0.0, 0x80), (-(2.0 ** -10), 0x80)]


def test_e4m3_sharp_cases_are_in_the_suite_with_their_codes() -> None:
    _, inputs, out = built_case("formats.encode.e4m3.f32.nearest_even")
    table = {(float(x), bool(np.signbit(x))): int(c)
             for x, c in zip(inputs["x"], out["codes"]) if not np.isnan(x)}
    for x, code in E4M3_SHARP:
        assert table[(x, bool(np.signbit(x)))] == code, x
    _, sat_in, sat = built_case("formats.encode.e4m3.f32.nearest_even.satfinite")
    assert sat["codes"][np.flatnonzero(sat_in["x"] == np.inf)[0]] == 0x7E


def test_e5m2_overflow_and_e8m0_tie_variants() -> None:
    _, inputs, out = built_case("formats.encode.e5m2.f32.nearest_even")
    x = inputs["x"]
    assert out["codes"][np.flatnonzero(x == 61440.0)[0]] == 0x7C
    assert out["codes"][np.flatnonzero(x == np.nextafter(np.float32(61440), 0))[0]] == 0x7B
    for rule, code in (("nearest_even", 0x80), ("up", 0x81)):
        _, inputs, out = built_case(f"formats.encode.e8m0.f32.{rule}")
        assert out["codes"][np.flatnonzero(inputs["x"] == 3.0)[0]] == code


def test_nan_variants_are_marked() -> None:
    from oracle.suite import variant_pairs

    options = {o for c in registry().all_cases for ch, o in variant_pairs(c.variant)
               if ch == "nan_to_e2m1"}
    assert options == {"zero", "0x8", "0x3", "signed_zero"}
    _, inputs, out = built_case("formats.encode.e2m1.f32.nearest_even.nan=0x8")
    assert out["codes"][:2].tolist() == [0x8, 0x8]


def test_default_suite_ids_unique_and_levels_nest() -> None:
    reg = registry()
    ids = [c.id for c in reg.all_cases]
    assert len(ids) == len(set(ids))
    smoke, default = reg.cases("smoke"), reg.cases("default")
    assert {c.id for c in smoke} < {c.id for c in default}


def test_stochastic_case_reproducible_and_between_neighbours() -> None:
    from refimpl.formats import decode, round_to

    _, a_in, a = built_case("formats.encode.e2m1.f32.stochastic")
    _, _, b = built_case("formats.encode.e2m1.f32.stochastic")
    assert np.array_equal(a["codes"], b["codes"])
    x = a_in["x"]
    y = decode(a["codes"], "e2m1").astype(np.float64)
    # a stochastic result is one of the two neighbours bracketing x (E2M1 saturates)
    down = round_to(x, "e2m1", rounding="toward_negative").astype(np.float64)
    up = round_to(x, "e2m1", rounding="toward_positive").astype(np.float64)
    assert ((y == down) | (y == up)).all()
    assert (down != up).sum() > 100 and ((y == down) & (down != up)).any() \
        and ((y == up) & (down != up)).any()


def test_registry_covers_every_area_operation_and_tolerance_kind() -> None:
    from oracle.cases import AREAS
    from oracle.tolerance import KINDS

    reg = registry()
    default = reg.cases("default")
    assert {a.name for a in reg.areas} == set(AREAS)
    assert {c.operation for c in default} == set(reg.operations)   # no orphan operation
    kinds = {t.kind for c in default for t in c.tolerance.values()} | {"exact"}
    assert kinds == set(KINDS)
    assert {c.id.split(".")[0] for c in reg.cases("smoke")} == set(AREAS)
