"""Golden cases for softmax, log-sum-exp and the online softmax (``refimpl.softmax``).

Inputs are float32 score rows with the cases the definition is about: ``-inf`` masked
entries, fully masked rows (output exactly 0, LSE ``-inf``), a common offset of +1e4
(a naive float32 ``exp`` overflows; the result must not change), ties at the maximum,
and lengths that are not multiples of the online block.

Tolerance: the golden values are computed in float64 with a deterministic ``exp`` and
rounded once to float32. A float32 implementation loses precision in ``x - max`` (up to
|x - max| ulps of the result), in a sum of L terms (up to L ulps) and in ``exp`` and the
division, so results are accepted within ``ulp(n, fp32)`` with
n = 8 + L + the largest |x - max| of the case (rows bounded by construction).

Sources: Milakov & Gimelshein 2018; FlashAttention (Dao et al. 2022) section 3.1.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import Ulp
from refimpl import softmax as S

SPECS = {"Online softmax": "Milakov & Gimelshein 2018 (arXiv 1805.02867)"}


def _softmax(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"y": S.softmax(inputs["x"], axis=p["axis"])}


def _online(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"y": S.online_softmax(inputs["x"], axis=p["axis"], block=p["block"])}


def _lse(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {"lse": S.logsumexp(inputs["x"], axis=p["axis"])}


OPERATIONS = [
    Operation("softmax.softmax", _softmax, "y = refimpl.softmax.softmax(x, axis)"),
    Operation("softmax.online_softmax", _online,
              "y = refimpl.softmax.online_softmax(x, axis, block)"),
    Operation("softmax.logsumexp", _lse, "lse = refimpl.softmax.logsumexp(x, axis)"),
]

SPREAD = 8.0   # |x| <= 2 * sqrt(3) * SPREAD / 3.46..., so |x - max| < 2 * 3.47 * SPREAD / 3


def score_rows(rows: int, length: int, offset: float, spread: float = SPREAD):
    """A builder of float32 score rows (normal, scale ``spread / 3``, plus ``offset``);
    with 4 rows or more, row 1 has some ``-inf`` entries, row 2 is fully masked and row 3
    has tied maxima."""
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = rng.normal((rows, length), scale=spread / 3)
        x = (x + np.float32(offset)).astype(np.float32)
        if rows >= 4:
            x[1, rng.integers(0, length, max(1, length // 3))] = -np.inf   # some masked
            x[2, :] = -np.inf                                              # all masked
            x[3, : max(1, length // 2)] = x[3].max()                       # tied maxima
        return {"x": x}
    return build


def _tol(length: int) -> Ulp:
    bound = 8 + length + int(np.ceil(2 * 3.47 * SPREAD / 3))
    return Ulp(bound, "fp32")


def cases() -> list[CaseSpec]:
    out = []
    for rows, length, offset, level in ((6, 37, 0.0, 0), (8, 128, 0.0, 1),
                                        (6, 257, 1e4, 1), (4, 1, 0.0, 1),
                                        (16, 1000, -30.0, 2)):
        tag = f"{rows}x{length}" + (f".offset{offset:+g}" if offset else "")
        tol = _tol(length)
        out.append(CaseSpec(f"softmax.softmax.{tag}", "softmax.softmax", {"axis": -1},
                            score_rows(rows, length, offset), tolerance={"y": tol}, level=level,
                            description="safe softmax along the last axis; -inf entries, "
                                        "fully masked row -> zeros"))
        out.append(CaseSpec(f"softmax.logsumexp.{tag}", "softmax.logsumexp", {"axis": -1},
                            score_rows(rows, length, offset), tolerance={"lse": tol},
                            level=max(level, 1),
                            description="natural log-sum-exp; fully masked row -> -inf"))
        for block in (1, 16):
            if length > block:
                out.append(CaseSpec(
                    f"softmax.online_softmax.{tag}.block{block}", "softmax.online_softmax",
                    {"axis": -1, "block": block}, score_rows(rows, length, offset),
                    tolerance={"y": tol}, level=max(level, 1),
                    description=f"online softmax, state merged every {block} elements"))
    return out


AREA = Area("softmax", SPECS, OPERATIONS, cases)
