"""The interface every accumulation model implements.

A model turns the exact products a_ik * b_kj (float64 is exact for them: see
``refimpl.matmul.exact``) into outputs, in a declared order and arithmetic. Models are
streaming: ``begin`` makes an empty state, ``update`` consumes the next slice of k
(a (..., M, k) and b (..., k, N) float64 arrays holding format values), ``finish``
rounds to the output format. ``matmul`` calls ``update`` once with all of k; the tiled
algorithm calls it once per K step, so both give the same bytes whenever the model's
order is the same (a model that cannot stream says so by ``streaming = False``).

:func:`resolve_accumulation` turns the ``accumulate`` option into a model: the names of
:data:`NAMED` (registered by the modules that define those models, every one of which
the package imports) or a tensor-core preset of :mod:`refimpl.matmul.presets`. The
preset table imports the models; no model imports it: the table registers its lookup
here when it is imported (:func:`register_preset_lookup`; the package imports it), and
the models resolve a preset name through :func:`preset_model`.
"""
from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np

from refimpl.matmul.rounding import Target, to_format


class Accumulation:
    """Base class of accumulation models (see the module docstring)."""

    #: whether ``update`` may be called several times (k split into consecutive slices)
    streaming: bool = True

    def begin(self, shape: tuple[int, ...], tgt: Target) -> Any:
        raise NotImplementedError

    def update(self, state: Any, a: np.ndarray, b: np.ndarray) -> Any:
        raise NotImplementedError

    def finish(self, state: Any) -> np.ndarray:
        raise NotImplementedError

    def run(self, a: np.ndarray, b: np.ndarray, tgt: Target,
            c: np.ndarray | None = None) -> np.ndarray:
        """All of k in one update: the product as ``matmul`` computes it.

        With an accumulator input ``c`` (float64 values of the output format, the output's
        shape), a model without its own rule for C (every model here except the
        tensor-core ones) takes C as the first term of each output's sum: the model runs
        on the K + 1 terms 1 * c_ij, a_i1 b_1j, ..., a_iK b_Kj. For ``"exact"`` that is
        the exact a_i . b_j + c_ij rounded once; for ``"sequential"`` the loop starting
        from c_ij (c_k = fl(c_{k-1} + a_k b_k)), as a C = A B + C update computes it.
        """
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        if c is None:
            return self.finish(self.update(self.begin(shape, tgt), a, b))
        # every output as its own 1 x 1 product of length K + 1: [1, a_i] . [c_ij, b_j]
        a_all = np.broadcast_to(a, shape[:-2] + a.shape[-2:])
        b_all = np.broadcast_to(b, shape[:-2] + b.shape[-2:])
        m, n, k = shape[-2], shape[-1], a.shape[-1]
        ones = np.ones(shape[:-2] + (m, n, 1, 1))
        rows = np.concatenate(
            [ones, np.broadcast_to(a_all[..., :, None, None, :], shape[:-2] + (m, n, 1, k))],
            axis=-1)
        cols = np.concatenate(
            [np.broadcast_to(c, shape)[..., None, None],
             np.broadcast_to(np.swapaxes(b_all, -1, -2)[..., None, :, :, None],
                             shape[:-2] + (m, n, k, 1))], axis=-2)
        out = self.run(rows, cols, tgt)
        return out[..., 0, 0]


class WholeK(Accumulation):
    """A model whose order spans all of k: streaming keeps the k slices and
    :meth:`finish_k` forms the outputs from all of them at the end (the same result
    however k is split). An empty stream (no ``update``) gives +0."""

    def begin(self, shape: tuple[int, ...], tgt: Target) -> dict:
        return {"shape": shape, "tgt": tgt, "a": [], "b": []}

    def update(self, state: dict, a: np.ndarray, b: np.ndarray) -> dict:
        state["a"].append(a)
        state["b"].append(b)
        return state

    def finish(self, state: dict) -> np.ndarray:
        shape = tuple(state["shape"])
        if not state["a"]:
            return np.zeros(shape, dtype=np.float32)
        a = np.concatenate(state["a"], axis=-1)
        b = np.concatenate(state["b"], axis=-2)
        return self.finish_k(a, b, state["tgt"], shape)

    def finish_k(self, a: np.ndarray, b: np.ndarray, tgt: Target,
                 shape: tuple[int, ...]) -> np.ndarray:
        """The float32 outputs of shape ``shape`` from all of k: a (..., M, K),
        b (..., K, N)."""
        raise NotImplementedError


AccumulationLike = Union[str, "Accumulation"]

#: accumulation names accepted by ``matmul`` (BlockFMA presets are accepted too):
#: ``"exact"`` (refimpl.matmul.exact), ``"sequential"``, ``"sequential_fma"``,
#: ``"pairwise"``, ``"chunked"`` (refimpl.matmul.ordered)
NAMED: dict[str, Accumulation] = {}


def resolve_accumulation(accumulate: AccumulationLike) -> Accumulation:
    """The model named by ``accumulate``: an :class:`Accumulation` is returned unchanged;
    a string is one of ``NAMED`` or a tensor-core preset of ``refimpl.matmul.presets``
    (``"H100-E4M3"``, or an alias such as ``"H200-E4M3"`` or ``"H100-FP8"``; any letter
    case).

    Raises:
        TypeError: neither a string nor an Accumulation.
        ValueError: an unknown name (the message lists the known ones).
    """
    if isinstance(accumulate, Accumulation):
        return accumulate
    if not isinstance(accumulate, str):
        raise TypeError(f"accumulate must be a str or an Accumulation, "
                        f"got {type(accumulate).__name__}")
    if accumulate in NAMED:
        return NAMED[accumulate]
    try:
        model = preset_model(accumulate)
    except ValueError as err:
        raise ValueError(f"accumulate must be an Accumulation or one of {sorted(NAMED)} or "
                         f"a tensor-core preset, got {accumulate!r}: {err}") from None
    if not isinstance(model, Accumulation):
        raise ValueError(f"{accumulate!r} is a block-scaled preset: its operands carry "
                         "scales, use refimpl.matmul.block_scaled_matmul")
    return model


#: the preset table's lookup (module docstring), once registered
_PRESET_LOOKUP: list[Callable[[str], Any]] = []


def register_preset_lookup(lookup: Callable[[str], Any]) -> None:
    """Install the lookup of named tensor-core presets: ``lookup(name)`` returns a new
    model of preset or alias ``name`` and raises ValueError for an unknown name
    (:mod:`refimpl.matmul.presets` registers its ``preset`` when imported). A later
    registration replaces an earlier one."""
    _PRESET_LOOKUP[:] = [lookup]


def preset_model(name: str) -> Any:
    """The model of tensor-core preset ``name`` (an alias, any letter case) from the
    registered preset table: an :class:`Accumulation`, or a ``BlockScaledFMA`` for the
    block-scaled presets.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: an unknown name (the message lists the known ones).
        LookupError: no preset table registered (``refimpl.matmul.presets`` not imported).
    """
    if not _PRESET_LOOKUP:
        raise LookupError("no tensor-core preset table registered: import refimpl.matmul")
    return _PRESET_LOOKUP[0](name)


def round_in(x: np.ndarray, tgt: Target, rounding: str = "nearest_even") -> np.ndarray:
    """Round float64 ``x`` (exact or rounded to odd) to ``tgt`` and hand it back as
    float64, for arithmetic that continues in the target format."""
    return to_format(x, tgt, rounding).astype(np.float64)
