"""``conform attention.attention --dtype fp32``: a float32 attention (scores, softmax and
P V in float32, any order) passes the float32 bound; one that rounds P to bf16 fails; the
bound itself checked by hand on a one-key problem."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.cli import main
from oracle.conformance import ConformanceError, check_attention
from oracle.conformance.tensors import fp32_attention_bound
from refimpl.attention import MaskOptions

U = 2.0 ** -24


def _visible(sq: int, sk: int, opts: dict) -> np.ndarray:
    """(B or 1, Sq, Sk) visibility; bottom-right alignment counts each batch entry's
    valid keys and queries (right padding, flash-attention's variable-length rule)."""
    kp, qp = opts.get("key_padding_mask"), opts.get("query_padding_mask")
    nk = np.full(1, sk) if kp is None else kp.sum(-1)
    nq = np.full(1, sq) if qp is None else qp.sum(-1)
    bottom = opts.get("causal_alignment", "bottom_right") == "bottom_right"
    off = (nk - nq) if bottom else np.zeros_like(nk - nq)
    i = np.arange(sq)[None, :, None] + off[:, None, None]
    j = np.arange(sk)[None, None, :]
    vis = np.ones((off.size, sq, sk), bool)
    if opts.get("causal"):
        vis &= j <= i
    if opts.get("window") is not None:
        left, right = opts["window"]
        vis &= (j >= i - left) & (j <= i + right)
    return vis


def sdpa32(q, k, v, round_p: bool = False, **opts):
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * np.float32(1 / np.sqrt(q.shape[-1]))
    vis = _visible(*s.shape[-2:], opts)[:, None]
    if opts.get("key_padding_mask") is not None:
        vis = vis & opts["key_padding_mask"][:, None, None, :]
    if opts.get("query_padding_mask") is not None:
        vis = vis & opts["query_padding_mask"][:, None, :, None]
    s = np.where(vis, s, -np.inf).astype(np.float32)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(np.float32)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    with np.errstate(all="ignore"):
        p = np.where(den > 0, e / den, 0).astype(np.float32)
    if round_p:
        b = p.view(np.uint32)
        p = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.einsum("bhij,bhjd->bhid", p, v).astype(np.float32)


def test_a_float32_attention_passes() -> None:
    r = check_attention(sdpa32, dtype="fp32", masks=True, max_examples=10)
    assert r.compared["out"] > 1000


def test_rounding_p_to_bf16_fails() -> None:
    with pytest.raises(ConformanceError, match="float32 bound"):
        check_attention(lambda q, k, v, **o: sdpa32(q, k, v, True, **o), dtype="fp32",
                        max_examples=0)


def test_the_bf16_rounding_passes_the_bf16_rule() -> None:
    """The same implementation is within the naive-bf16 rule: only fp32 tells it apart."""
    check_attention(lambda q, k, v, **o: sdpa32(q, k, v, True, **o), dtype="bf16",
                    max_examples=0)


def test_the_bound_by_hand() -> None:
    # one key, D = 1, scale 1: p = 1, A = |v| = 1, s = 1, E = gamma_1 + 2u, spread 0:
    # 2 * (2 E + (2 + 10) u) + 2^-126 = 2 * (2 * (u/(1-u) + 2u) + 12u) + 2^-126
    one = np.ones((1, 1, 1, 1), np.float32)
    b = fp32_attention_bound(one, one, one, MaskOptions())
    want = 2 * (2 * (U / (1 - U) + 2 * U) + 12 * U) + 2.0 ** -126
    assert b.shape == (1, 1, 1, 1) and b[0, 0, 0, 0] == pytest.approx(want, rel=1e-12)
    # a fully masked row (padding every key) is held to exactly 0
    q = np.ones((1, 1, 2, 1), np.float32)
    pad = np.zeros((1, 1), bool)
    assert not fp32_attention_bound(q, one, one, MaskOptions(key_padding_mask=pad)).any()


def test_cli_takes_fp32(monkeypatch, tmp_path, capsys) -> None:
    (tmp_path / "att32.py").write_text(
        "from tests.oracle.test_conform_attention_fp32 import sdpa32\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["conform", "attention.attention", "--impl", "att32:sdpa32", "--dtype",
                 "fp32", "--max-examples", "3"]) == 0
    out = capsys.readouterr().out
    # the ok line says which criterion was applied
    assert out.startswith("ok:") and "(attention.attention, float32 bound)" in out
    assert main(["conform", "attention.attention", "--impl", "att32:sdpa32", "--dtype",
                 "bf16", "--max-examples", "0"]) == 0
    assert "(attention.attention, 2x the naive bf16 error)" in capsys.readouterr().out
