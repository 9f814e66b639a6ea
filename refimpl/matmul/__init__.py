"""Matrix products with declared accumulation semantics.

``matmul(a, b, c, accumulate=..., out_format=..., in_format=...)`` computes D = A B + C whose
every bit is fixed by its inputs and its named accumulation model: ``"exact"`` (correctly
rounded, the default golden answer), ``"sequential"``, ``"pairwise"``, ``"chunked"``,
or the BlockFMA model of NVIDIA tensor cores (Fasi, Higham, Mikaitis and Pranesh,
"Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021; with
the per-generation parameters of Khattak and Mikaitis, "Accurate models of NVIDIA
tensor cores", arXiv:2512.07004).
``tiled_matmul`` runs the shared-memory tiled algorithm and counts its memory traffic.
"""
from refimpl.matmul.accumulation import NAMED, Accumulation, resolve_accumulation
from refimpl.matmul.blockfma import BlockFMA
from refimpl.matmul.blockscaled import BlockScaledFMA, block_scaled_matmul, mma_block_scaled
from refimpl.matmul.matrixcore import MatrixCore
from refimpl.matmul.exact import ExactAccumulation, exact_dot_reference
from refimpl.matmul.gemm import IN_CONVERSIONS, matmul
from refimpl.matmul.presets import ALIASES, PRESETS, Preset, canonical, preset
from refimpl.matmul.ordered import Chunked, Pairwise, Sequential
from refimpl.matmul.screening import ExactStats, exact_matmul64
from refimpl.matmul.tiled import TiledStats, tiled_matmul
from refimpl.deprecation import deprecated_names

__all__ = [
    "ALIASES", "Accumulation", "BlockFMA", "BlockScaledFMA", "Chunked", "MatrixCore",
    "block_scaled_matmul", "mma_block_scaled", "ExactAccumulation", "ExactStats",
    "IN_CONVERSIONS", "NAMED", "PRESETS", "Preset", "canonical", "preset",
    "Pairwise", "Sequential", "TiledStats", "exact_dot_reference", "exact_matmul64",
    "matmul", "resolve_accumulation", "tiled_matmul",
]

__getattr__ = deprecated_names(__name__, {"Exact": ("ExactAccumulation", ExactAccumulation)})
