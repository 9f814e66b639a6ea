"""Matrix products with declared accumulation semantics.

``matmul(a, b, accumulate=..., out_format=..., in_format=...)`` computes a product whose
every bit is fixed by its inputs and its named accumulation model: ``"exact"`` (correctly
rounded, the default golden answer), ``"sequential"``, ``"pairwise"``, ``"chunked"``,
or the BlockFMA model of NVIDIA tensor cores (Fasi, Higham, Mikaitis and Pranesh,
"Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021; with
the per-generation parameters of Khattak and Mikaitis, "Accurate models of NVIDIA
tensor cores", arXiv:2512.07004).
``tiled_matmul`` runs the shared-memory tiled algorithm and counts its memory traffic.
"""
from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.blockfma import PRESET_OPTIONS, PRESETS, BlockFMA
from refimpl.matmul.exact import Exact, ExactStats, exact_dot_reference, exact_matmul64
from refimpl.matmul.gemm import NAMED, matmul, resolve_accumulation
from refimpl.matmul.ordered import Chunked, Pairwise, Sequential
from refimpl.matmul.tiled import TiledStats, tiled_matmul

__all__ = [
    "Accumulation", "BlockFMA", "Chunked", "Exact", "ExactStats", "NAMED", "PRESETS",
    "PRESET_OPTIONS",
    "Pairwise", "Sequential", "TiledStats", "exact_dot_reference", "exact_matmul64",
    "matmul", "resolve_accumulation", "tiled_matmul",
]
