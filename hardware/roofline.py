"""The roofline model and the inference lower bounds built on it.

Roofline (Williams, Waterman, Patterson, "Roofline: an insightful visual performance
model", CACM 2009): a kernel of arithmetic intensity ``I`` (FLOP per byte moved from
memory) attains at most ``min(peak, I * bandwidth)``; the *ridge point*
``peak / bandwidth`` is the intensity at which it stops being bandwidth-bound.

Applied to LLM inference (the analysis of Pope et al., "Efficiently Scaling Transformer
Inference", MLSys 2023, section 2; arXiv:2211.05102): a decode step at batch 1 must read
every weight once (``weight_bytes / bandwidth``); a prefill of ``T`` tokens must do
``2 * params * T`` FLOPs; in decode the weights are shared by the batch, so the weight
GEMMs have intensity ``2 * batch / bytes_per_weight`` and become compute-bound at
``batch = ridge * bytes_per_weight / 2``; attention's KV is private to each request, so
its intensity is the number of query heads sharing a KV head, whatever the batch.

Units are SI throughout: FLOP/s, bytes/s, bytes, seconds. The table functions at the
end produce three worked tables (ridge points by generation, lower bounds of an 8B model,
the batch that makes decode compute-bound) from the catalogue (:mod:`hardware.specs`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from hardware.specs import GPUSpec, get

__all__ = [
    "ridge_point",
    "gpu_ridge",
    "attainable_flops",
    "is_compute_bound",
    "weight_bytes",
    "decode_step_lower_bound",
    "prefill_lower_bound",
    "kv_capacity_tokens",
    "decode_intensity",
    "compute_bound_batch",
    "attention_intensity",
    "GenerationChange",
    "generation_change",
    "Model",
    "MODEL_8B",
    "GENERATIONS",
    "BATCH_ROWS",
    "WEIGHT_PRECISIONS",
    "ATTENTION_SCHEMES",
    "generation_table",
    "model_bounds_table",
    "batch_table",
]


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not v > 0:  # also refuses NaN
        raise ValueError(f"{name} must be positive, got {value!r}")
    return v


def _spec(gpu: GPUSpec | str) -> GPUSpec:
    return gpu if isinstance(gpu, GPUSpec) else get(gpu)


# --------------------------------------------------------------------------- roofline


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Ridge point ``peak_flops / bandwidth`` in FLOP per byte."""
    return _positive("peak_flops", peak_flops) / _positive("bandwidth", bandwidth)


def gpu_ridge(gpu: GPUSpec | str, precision: str | None = None) -> float:
    """Ridge point of a catalogue GPU at ``precision`` (default: BF16, else FP16)."""
    g = _spec(gpu)
    return ridge_point(g.flops(precision or g.half_precision), g.bandwidth)


def attainable_flops(intensity: float | np.ndarray, peak_flops: float,
                     bandwidth: float) -> float | np.ndarray:
    """Roofline: ``min(peak_flops, intensity * bandwidth)`` (array-friendly)."""
    _positive("peak_flops", peak_flops)
    _positive("bandwidth", bandwidth)
    i = np.asarray(intensity, dtype=np.float64)
    if np.any(i < 0) or np.any(np.isnan(i)):
        raise ValueError("intensity must be non-negative")
    out = np.minimum(peak_flops, i * bandwidth)
    return float(out) if out.ndim == 0 else out


def is_compute_bound(intensity: float, ridge: float) -> bool:
    """True when ``intensity`` reaches the ridge (the kernel is limited by compute)."""
    return float(intensity) >= _positive("ridge", ridge)


# --------------------------------------------------------------------------- inference bounds


def weight_bytes(n_params: float, bits_per_weight: float) -> float:
    """Bytes of ``n_params`` weights stored at ``bits_per_weight`` (70e9 at 16 -> 140 GB)."""
    return _positive("n_params", n_params) * _positive("bits_per_weight", bits_per_weight) / 8


def decode_step_lower_bound(weight_bytes: float, bandwidth: float,
                            kv_bytes: float = 0.0) -> float:
    """Seconds for one decode step: every weight (and the KV read) crosses HBM once."""
    if kv_bytes < 0:
        raise ValueError(f"kv_bytes must be non-negative, got {kv_bytes}")
    return (_positive("weight_bytes", weight_bytes) + kv_bytes) / _positive("bandwidth", bandwidth)


def prefill_lower_bound(n_params: float, tokens: int, peak_flops: float,
                        utilization: float = 0.5) -> float:
    """Seconds for a prefill of ``tokens``: ``2 * n_params * tokens`` FLOPs at
    ``utilization * peak_flops`` (default: half the peak)."""
    u = _positive("utilization", utilization)
    if u > 1:
        raise ValueError(f"utilization must be at most 1, got {utilization}")
    flops = 2 * _positive("n_params", n_params) * _positive("tokens", tokens)
    return flops / (_positive("peak_flops", peak_flops) * u)


def kv_capacity_tokens(memory_bytes: float, weight_bytes: float,
                       kv_bytes_per_token: float) -> float:
    """Tokens of KV cache that fit beside the weights: ``(memory - weights) / kv``.

    Raises ValueError when the weights alone do not fit.
    """
    free = _positive("memory_bytes", memory_bytes) - _positive("weight_bytes", weight_bytes)
    if free < 0:
        raise ValueError(f"weights ({weight_bytes:.4g} B) exceed memory ({memory_bytes:.4g} B)")
    return free / _positive("kv_bytes_per_token", kv_bytes_per_token)


def decode_intensity(batch: float, bytes_per_weight: float) -> float:
    """Arithmetic intensity of decode's weight GEMMs: ``2 * batch / bytes_per_weight``."""
    return 2 * _positive("batch", batch) / _positive("bytes_per_weight", bytes_per_weight)


def compute_bound_batch(ridge: float, bytes_per_weight: float) -> float:
    """Batch at which decode's weight GEMMs reach the ridge: ``ridge * bytes / 2``."""
    return _positive("ridge", ridge) * _positive("bytes_per_weight", bytes_per_weight) / 2


def attention_intensity(query_heads_per_kv_head: float, kv_bytes_per_element: float = 2.0
                        ) -> float:
    """Decode attention's intensity, FLOP per byte of KV read.

    Each KV element is used by one multiply-add (2 FLOPs) of each of the ``g`` query
    heads sharing it, so the intensity is ``2 * g / kv_bytes_per_element``: ``g`` for
    BF16 KV (MHA 1, GQA-8 8, MLA ~128), independent of batch.
    """
    return 2 * _positive("query_heads_per_kv_head", query_heads_per_kv_head) / _positive(
        "kv_bytes_per_element", kv_bytes_per_element)


@dataclass(frozen=True)
class GenerationChange:
    """Effect of scaling compute and bandwidth on the roofline bounds.

    Attributes:
        decode_speedup: batch-1 decode bound improves by the bandwidth factor.
        decode_latency_reduction: ``1 - 1 / bandwidth_factor`` (1.3x -> ~23%).
        prefill_speedup: prefill throughput improves by the compute factor.
        batch_factor: the batch needed to be compute-bound scales with the ridge,
            ``compute_factor / bandwidth_factor`` (2 / 1.3 ~ 1.54).
    """

    decode_speedup: float
    decode_latency_reduction: float
    prefill_speedup: float
    batch_factor: float


def generation_change(compute_factor: float, bandwidth_factor: float) -> GenerationChange:
    """How bounds move when compute scales by one factor and bandwidth by another."""
    c = _positive("compute_factor", compute_factor)
    b = _positive("bandwidth_factor", bandwidth_factor)
    return GenerationChange(b, 1 - 1 / b, c, c / b)


# --------------------------------------------------------------------------- worked tables


@dataclass(frozen=True)
class Model:
    """A dense model for the lower bounds: parameters, weight bytes, KV bytes per token."""

    name: str
    n_params: float
    weight_bytes: float
    kv_bytes_per_token: float


#: the worked example: an 8B model, BF16 weights 16 GB, KV 128 KB (KiB) per token
MODEL_8B = Model("8B", 8e9, 16e9, 128 * 1024)

#: the generations of the ridge-point table, in order
GENERATIONS: tuple[str, ...] = ("V100", "A100", "H100", "B200")

#: rows of the batch table: (label, GPU, precision or None for BF16/FP16)
BATCH_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("A100", "A100", None),
    ("H100", "H100", None),
    ("H100 FP8", "H100", "fp8"),
    ("B200", "B200", None),
    ("B200 FP4", "B200", "fp4"),
)

#: weight storage formats of the batch table: (label, bytes per weight)
WEIGHT_PRECISIONS: tuple[tuple[str, float], ...] = (
    ("BF16 weights", 2.0), ("FP8 weights", 1.0), ("4-bit weights", 0.5))

#: attention schemes: (query heads per KV head, name)
ATTENTION_SCHEMES: tuple[tuple[int, str], ...] = (
    (1, "MHA (one KV per head)"), (8, "GQA, 8 groups"), (128, "MLA (absorbed, 128 heads share)"))


@dataclass(frozen=True)
class GenerationRow:
    name: str
    year: int | None
    half_tflops: float
    compute_vs_prev: float | None
    bandwidth_tbs: float
    bandwidth_vs_prev: float | None
    half_ridge: float
    low_tflops: float
    low_format: str
    low_ridge: float


def generation_table(gpus: Sequence[str] = GENERATIONS) -> list[GenerationRow]:
    """Compute, bandwidth and ridge per generation, each against the previous row."""
    rows: list[GenerationRow] = []
    prev: GPUSpec | None = None
    for name in gpus:
        g = get(name)
        half, low = g.dense_tflops[g.half_precision], g.dense_tflops[g.lowest_precision]
        rows.append(GenerationRow(
            name=g.name, year=g.year, half_tflops=half,
            compute_vs_prev=None if prev is None else half / prev.dense_tflops[prev.half_precision],
            bandwidth_tbs=g.memory_bandwidth_gbs / 1000,
            bandwidth_vs_prev=None if prev is None else
            g.memory_bandwidth_gbs / prev.memory_bandwidth_gbs,
            half_ridge=gpu_ridge(g), low_tflops=low, low_format=g.lowest_precision,
            low_ridge=gpu_ridge(g, g.lowest_precision),
        ))
        prev = g
    return rows


@dataclass(frozen=True)
class BoundsRow:
    name: str
    decode_s: float
    prefill_s: float
    kv_tokens: float | None


def model_bounds_table(gpus: Sequence[str] = GENERATIONS, model: Model = MODEL_8B,
                       prefill_tokens: int = 4096, utilization: float = 0.5
                       ) -> list[BoundsRow]:
    """Decode-step and prefill lower bounds and KV capacity of ``model`` per GPU."""
    rows = []
    for name in gpus:
        g = get(name)
        kv = None
        if g.memory_bytes is not None and g.memory_bytes >= model.weight_bytes:
            kv = kv_capacity_tokens(g.memory_bytes, model.weight_bytes, model.kv_bytes_per_token)
        rows.append(BoundsRow(
            name=g.name,
            decode_s=decode_step_lower_bound(model.weight_bytes, g.bandwidth),
            prefill_s=prefill_lower_bound(model.n_params, prefill_tokens,
                                          g.flops(g.half_precision), utilization),
            kv_tokens=kv,
        ))
    return rows


@dataclass(frozen=True)
class BatchRow:
    label: str
    ridge: float
    batches: tuple[float, ...]


def batch_table(rows: Sequence[tuple[str, str, str | None]] = BATCH_ROWS,
                weights: Sequence[tuple[str, float]] = WEIGHT_PRECISIONS) -> list[BatchRow]:
    """Batch needed for decode to be compute-bound, per GPU/precision and weight format."""
    out = []
    for label, name, precision in rows:
        r = gpu_ridge(name, precision)
        out.append(BatchRow(label, r, tuple(compute_bound_batch(r, b) for _, b in weights)))
    return out
