"""BF16 versions of the attention cases: every case held to the FP16 naive computation
has a twin held to the BF16 one, and the criterion tells the two precisions apart: the
naive computation in BF16 passes every BF16 case and fails every FP16 one, the naive
computation in FP16 passes both (its error is smaller)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oracle
from oracle.cases import registry
from oracle.cases.attention import _options
from refimpl import attention as A
from refimpl import formats as F


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("attn") / "golden"
    oracle.generate(out, only="attention.attention.*", progress=None)
    return out


def test_every_fp16_case_has_a_bf16_twin_with_the_same_definition() -> None:
    specs = {s.id: s for s in registry().all_cases if s.id.startswith("attention.")}
    fp16 = [s for s in specs.values()
            if s.params.get("naive_dtype") == "fp16" and "naive" in s.reference]
    assert len(fp16) >= 17
    for s in fp16:
        twin = specs[s.id.replace(".fp16.", ".bf16.") if ".fp16." in s.id
                     else s.id + ".bf16"]
        assert twin.params == {**s.params, "naive_dtype": "bf16"}
        assert (twin.operation, twin.variant, twin.reference) == \
            (s.operation, s.variant, s.reference)
        assert twin.tolerance == s.tolerance
        assert twin.level == max(s.level, 1)
    # the default suite holds the twins of its FP16 cases
    default = {s.id for s in registry().cases("default")}
    assert {"attention.attention.mha.bf16", "attention.attention.decode.bf16",
            "attention.flash_v2.causal.8x32.bf16", "attention.flash_v3.bf16.32x32"} <= default


def test_the_bf16_naive_reference_is_bf16_and_the_inputs_exact_in_it(suite: Path) -> None:
    s = oracle.load(suite)
    twins = [c for c in s.cases if c.id.endswith(".bf16")]
    assert len(twins) == 9
    for c in twins:
        for name in ("q", "k", "v"):
            x = c.inputs[name]
            assert np.array_equal(F.round_to(x, "bf16"), x), (c.id, name)
        naive = c.reference["naive"]
        assert np.array_equal(F.round_to(naive, "bf16"), naive), c.id


def _naive_in(dtype: str):
    def fn(**kw):
        inputs = {k: kw.pop(k) for k in ("q", "k", "v", "key_padding_mask", "alibi_slopes")
                  if k in kw}
        mask = _options(inputs, kw)
        out = A.naive_attention(inputs["q"], inputs["k"], inputs["v"], dtype=dtype, mask=mask)
        _, lse = A.attention(inputs["q"], inputs["k"], inputs["v"], return_lse=True,
                             mask=mask)
        return {"out": out, "lse": lse}
    return fn


def test_a_bf16_computation_passes_the_bf16_cases_and_fails_the_fp16_ones(suite: Path) -> None:
    ops = {"attention.attention": _naive_in("bf16")}
    r = oracle.run(suite, ops, inputs="keywords")
    bf16 = {c.id for c in oracle.load(suite).cases if c.params["naive_dtype"] == "bf16"}
    failed = {cid for cid, _ in r.failures}
    assert failed and not failed & bf16
    assert failed == {c.id for c in oracle.load(suite).cases} - bf16
    assert all(msg.startswith("out:") for _, msg in r.failures)
    r16 = oracle.run(suite, {"attention.attention": _naive_in("fp16")}, inputs="keywords")
    assert r16.ok and r16.compared == r16.passed == 2 * len(oracle.load(suite).cases)
