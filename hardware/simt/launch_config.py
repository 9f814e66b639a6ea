"""What a launch is given: the grid, block and cluster shapes as ``dim3`` values
(:func:`dim3`) and :class:`LaunchConfig`, the grid, block and memory layout of one
launch that the wave (:mod:`hardware.simt.executor`), the scheduler and the cluster
model all read."""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import LaunchError

__all__ = ["LaunchConfig", "dim3", "is_int"]


class LaunchConfig:
    """Grid, block and the kernel's memory layout for one launch."""

    def __init__(self, kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 dynamic_shared: int, gpu: str | None = None) -> None:
        self.kernel = kernel
        self.gpu = gpu  # the tensor-core model of mma (see hardware.simt.matrix)
        self.grid = grid
        self.block = block
        self.threads_per_block = block[0] * block[1] * block[2]
        self.warps_per_block = -(-self.threads_per_block // 32)
        self.dynamic_shared = dynamic_shared
        self.shared_bytes = kernel.static_shared_bytes + dynamic_shared
        self.local_bytes = kernel.local_bytes
        #: the cluster shape and whether the launch gave one (hardware.simt.cluster)
        self.cluster: tuple[int, int, int] = (1, 1, 1)
        self.explicit_cluster = False


def is_int(v: Any) -> bool:
    """A Python or NumPy integer, not a bool (a count is never True, 2.0 or "2")."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def dim3(v: Any, what: str) -> tuple[int, int, int]:
    """``v`` (an int or a tuple/list of 1-3 ints, as ``dim3``) as (x, y, z)."""
    items = (v,) if is_int(v) else v
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "iu":
        items = tuple(v.tolist())
    if not isinstance(items, (tuple, list)) or not 1 <= len(items) <= 3:
        raise LaunchError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    for i, x in enumerate(items):
        if not is_int(x):
            raise LaunchError(f"{what}[{i}] must be an int, got {type(x).__name__} {x!r}")
        if x < 1:
            raise LaunchError(f"{what}[{i}] must be positive, got {x}")
    return tuple(int(x) for x in items) + (1,) * (3 - len(items))  # type: ignore[return-value]
