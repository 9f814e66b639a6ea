"""Accumulation in a declared order, every operation rounded to the accumulator format.

These are the answers a naive implementation gets: "sequential" is the textbook loop
(Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 4.1,
recursive summation), "pairwise" the tree of section 4.1 (pairwise summation), and
"chunked" the two-level scheme GPU kernels use to bound the error of a low-precision
accumulator: partial sums over chunks of k are promoted into a wider accumulator
(DeepSeek-V3 technical report, arXiv 2412.19437, section 3.3.2: FP8 tensor-core partial
sums are copied to FP32 registers every N_C = 128 elements).

Every rounding here is a single correct rounding of an exact value: a sum of two float64
values is formed rounded to odd (TwoSum) and then rounded to the format, which equals
rounding the exact sum (``refimpl.matmul.rounding``). Products are exact in float64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from refimpl.eft import add_round_to_odd
from refimpl.matmul.accumulation import NAMED, Accumulation, WholeK, resolve_accumulation, round_in
from refimpl.matmul.rounding import Target, target
from refimpl.validation import check_bool, check_positive_int


def _product(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """The exact products a[..., i, k] * b[..., k, j] for all (i, j), as float64."""
    with np.errstate(invalid="ignore"):
        return a[..., :, k, None] * b[..., None, k, :]


@dataclass(frozen=True)
class Sequential(Accumulation):
    """Left-to-right accumulation over k in the output format.

    c_1 = fl(a_1 b_1); c_k = fl(c_{k-1} + fl(a_k b_k)) for k = 2..K, where fl rounds to the
    output format with nearest-even. With ``fma=True`` each step is one fused
    multiply-add, c_k = fl(c_{k-1} + a_k b_k) (IEEE 754-2019 section 5.4.1
    fusedMultiplyAdd). The first term starts the sum (no +0 is added first), so a sum of
    only -0 products is -0, as IEEE addition gives; an empty sum is +0.

    Args:
        fma: fuse multiply and add (default False: a plain loop without contraction).
    """

    fma: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fma", check_bool("fma", self.fma))

    def begin(self, shape: tuple[int, ...], tgt: Target) -> dict:
        return {"tgt": tgt, "shape": shape, "c": None}

    def update(self, state: dict, a: np.ndarray, b: np.ndarray) -> dict:
        tgt, c = state["tgt"], state["c"]
        for k in range(a.shape[-1]):
            p = _product(a, b, k)
            if c is None:
                c = round_in(p, tgt)
                continue
            if not self.fma:
                p = round_in(p, tgt)
            with np.errstate(invalid="ignore"):
                c = round_in(add_round_to_odd(c, p), tgt)
        state["c"] = c
        return state

    def finish(self, state: dict) -> np.ndarray:
        if state["c"] is None:
            return np.zeros(state["shape"], dtype=np.float32)
        return np.broadcast_to(state["c"], state["shape"]).astype(np.float32)


@dataclass(frozen=True)
class Pairwise(WholeK):
    """Pairwise (tree) summation of the products rounded to the output format.

    The tree, level by level: the leaves are fl(a_k b_k), k = 1..K in order; at each level
    neighbours (1, 2), (3, 4), ... are added (each sum rounded to the format) and an
    unpaired last element moves up unchanged; repeat until one value is left. For K a
    power of two this is the balanced tree of Higham (2nd ed., section 4.1); the depth
    is ceil(log2 K). An empty sum is +0. The tree spans all of k, so streaming collects
    the k slices and builds the tree at the end (the same tree however k is split).
    """

    def finish_k(self, a: np.ndarray, b: np.ndarray, tgt: Target,
                 shape: tuple[int, ...]) -> np.ndarray:
        if a.shape[-1] == 0:
            return np.zeros(shape, dtype=np.float32)
        # the products along a leading axis: (K, ..., M, N); rows in blocks bound memory
        out = np.empty(shape, dtype=np.float32)
        m = shape[-2]
        step = max(1, (1 << 22) // max(1, a.shape[-1] * shape[-1]))
        for r0 in range(0, m, step):
            ab = a[..., r0:r0 + step, :]
            with np.errstate(invalid="ignore"):
                level = np.moveaxis(ab[..., :, :, None] * b[..., None, :, :], -2, 0)
            level = round_in(level, tgt)
            while level.shape[0] > 1:
                n2 = level.shape[0] // 2
                with np.errstate(invalid="ignore"):
                    pairs = round_in(add_round_to_odd(level[0:2 * n2:2], level[1:2 * n2:2]), tgt)
                level = np.concatenate([pairs, level[2 * n2:]], axis=0)
            out[..., r0:r0 + step, :] = level[0]
        return out


InnerLike = Union[str, Accumulation]


@dataclass(frozen=True)
class Chunked(Accumulation):
    """Chunked accumulation with promotion to a wider accumulator.

    k is cut into consecutive chunks of ``size`` elements (the last may be shorter). Each
    chunk is summed by the ``inner`` model into ``inner_format``; the chunk results are
    then added left to right into the accumulator in the output format:
    acc_1 = fl(chunk_1), acc_j = fl(acc_{j-1} + chunk_j).

    Args:
        size: chunk length, >= 1 (default 128, DeepSeek-V3's promotion interval N_C).
        inner: the model within a chunk: ``"exact"`` (default; the chunk sum rounded
            once to ``inner_format``), ``"sequential"``, ``"sequential_fma"``, a BlockFMA
            preset name (``"H100-FP8"``: what DeepSeek-V3 works around) or a model.
        inner_format: the format of a chunk result (default ``None``: the output format).
    """

    size: int = 128
    inner: InnerLike = "exact"
    inner_format: Optional[str] = None

    def __post_init__(self) -> None:
        check_positive_int("Chunked.size", self.size)
        if isinstance(self.inner, Chunked):
            raise ValueError("Chunked.inner must not itself be Chunked")

    def _inner(self) -> Accumulation:
        return resolve_accumulation(self.inner)

    def begin(self, shape: tuple[int, ...], tgt: Target) -> dict:
        inner_tgt = tgt if self.inner_format is None else target(self.inner_format)
        return {"tgt": tgt, "inner_tgt": inner_tgt, "shape": shape, "acc": None,
                "inner": None, "filled": 0, "model": self._inner()}

    def _close_chunk(self, state: dict) -> None:
        part = state["model"].finish(state["inner"]).astype(np.float64)
        tgt = state["tgt"]
        if state["acc"] is None:
            state["acc"] = round_in(part, tgt)
        else:
            with np.errstate(invalid="ignore"):
                state["acc"] = round_in(add_round_to_odd(state["acc"], part), tgt)
        state["inner"], state["filled"] = None, 0

    def update(self, state: dict, a: np.ndarray, b: np.ndarray) -> dict:
        k, pos = a.shape[-1], 0
        while pos < k:
            if state["inner"] is None:
                state["inner"] = state["model"].begin(state["shape"], state["inner_tgt"])
            take = min(self.size - state["filled"], k - pos)
            state["inner"] = state["model"].update(
                state["inner"], a[..., :, pos:pos + take], b[..., pos:pos + take, :])
            state["filled"] += take
            pos += take
            if state["filled"] == self.size:
                self._close_chunk(state)
        return state

    def finish(self, state: dict) -> np.ndarray:
        if state["inner"] is not None:
            self._close_chunk(state)
        if state["acc"] is None:
            return np.zeros(state["shape"], dtype=np.float32)
        return np.broadcast_to(state["acc"], state["shape"]).astype(np.float32)


NAMED.update({"sequential": Sequential(fma=False), "sequential_fma": Sequential(fma=True),
              "pairwise": Pairwise(), "chunked": Chunked()})
