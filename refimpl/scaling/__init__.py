"""Block and tensor scaling for low-precision formats: which scale a block gets, which
code each element gets, and what the dequantised tensor and a scaled dot product are.

- MX (OCP MX v1.0): ``mx_quantize`` -> ``MXArray`` (MXFP8 E4M3/E5M2, MXFP6 E2M3/E3M2,
  MXFP4 E2M1, MXINT8), scale rules floor/ceil/even/rceil, ``mx_dot`` / ``mx_matmul``
  (exact accumulation, one rounding); ``mx_reference.quantize_block`` is the plain
  per-block definition in exact arithmetic that ``mx_quantize`` is tested against.
- NVFP4: ``nvfp4_quantize`` -> ``NVFP4Array`` (rules of TransformerEngine's reference
  and kernel and of torchao, 1x16 and 16x16 blocks, optional random Hadamard transform).
- Block FP8 (DeepSeek-V3 tiles): ``block_fp8_quantize`` -> ``BlockFP8Array``.
- Per-tensor FP8: ``tensor_scale``, ``tensor_quantize``, ``DelayedScaling``.
- ``hadamard_transform`` and ``quantization_error`` (RMSE, max abs, SQNR dB).
"""
from refimpl.deprecation import deprecated_names

from .block_fp8 import BlockFP8Array, block_fp8_quantize, tile_amax
from .error import QuantizationMetrics, quantization_error
from .hadamard import (
    TE_WGRAD_SIGNS,
    hadamard_matrix,
    hadamard_transform,
    random_signs,
    sylvester_hadamard,
)
from .mx import (
    INF_BLOCK_POLICIES,
    INT8,
    MX_ELEMENTS,
    SCALE_RULES,
    MXArray,
    MXInt8,
    element_format,
    mx_quantize,
    mx_scale_exponent,
)
from .dyadic import round_dyadic
from .mx_dot import mx_dot, mx_matmul
from .nvfp4 import NVFP4_BLOCKS, NVFP4_RULES, NVFP4Array, nvfp4_global_scale, nvfp4_quantize
from .tensor import AMAX_ALGOS, DelayedScaling, FP8Tensor, tensor_quantize, tensor_scale

__all__ = [
    "SCALE_RULES", "INF_BLOCK_POLICIES", "MX_ELEMENTS", "MXInt8", "INT8", "MXArray",
    "element_format", "mx_scale_exponent", "mx_quantize", "mx_dot", "mx_matmul",
    "round_dyadic",
    "NVFP4_RULES", "NVFP4_BLOCKS", "NVFP4Array", "nvfp4_quantize", "nvfp4_global_scale",
    "BlockFP8Array", "block_fp8_quantize", "tile_amax",
    "tensor_scale", "tensor_quantize", "FP8Tensor", "DelayedScaling", "AMAX_ALGOS",
    "TE_WGRAD_SIGNS", "sylvester_hadamard", "hadamard_matrix", "hadamard_transform",
    "random_signs",
    "QuantizationMetrics", "quantization_error",
]

__getattr__ = deprecated_names(
    __name__, {"QuantizationError": ("QuantizationMetrics", QuantizationMetrics)})
