"""Published attention-kernel measurements that the performance model is calibrated
against, each with its source.

Every figure is a forward-pass speed in TFLOP/s on one H100 80GB SXM5, counted the way
the FlashAttention papers count it: ``4 x batch x heads x seq_len^2 x head_dim`` FLOPs,
halved with a causal mask, divided by the measured time.

Sources:

- FlashAttention-3 (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao 2024, arXiv 2407.08608
  v1/v2), Figure 5 (FP16/BF16 forward; "Standard attention", "FlashAttention-2" and
  "FlashAttention-3" bars) and Figure 7 (FP8 forward). Setting of both figures (section
  4.1): batch x sequence length = 16K tokens, heads x head dimension = 2048, sequence
  lengths 512 to 16K, head dimension 64, 128 and 256, with and without a causal mask.
  The FlashAttention-2 bars are the FlashAttention-2 paper's kernel (Dao 2023, arXiv
  2307.08691) run on H100 without Hopper-specific instructions; that paper's own H100
  plot reports forward plus backward, so the forward figures come from this one.
- FlashAttention-3, Table 2 ("Pipelining ablation"): FP16 forward, non-causal, batch 4,
  sequence length 8448, 16 heads, head dimension 128 (3.538 ms = 661 TFLOP/s; without
  intra-warpgroup overlap 4.021 ms = 582; without warp specialisation 4.105 ms = 570;
  the shape is recovered from the time and the FLOP rate, 2.3386e12 FLOPs).

The figures' bars carry printed values; they were transcribed from the plots, so each
is marked ``approximate=True`` (a transcription of a printed label, not a table). The
standard-attention bars stop at 8K (out of memory at 16K) and exist only for head
dimensions 64 and 128; the FP8 figure has no FlashAttention-2 bars. For FP8 with a
causal mask only the head-dimension-64 bars at 512 and 1K were transcribed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = ["Measurement", "PUBLISHED", "SEQ_LENS", "figure_shape"]

#: sequence lengths of the papers' figures
SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)

_FIG5 = "FlashAttention-3 (Shah et al. 2024), Figure 5 (FP16/BF16 forward, H100 SXM5)"
_FIG7 = "FlashAttention-3 (Shah et al. 2024), Figure 7 (FP8 forward, H100 SXM5)"
_TAB2 = "FlashAttention-3 (Shah et al. 2024), Table 2 (pipelining ablation)"


@dataclass(frozen=True)
class Measurement:
    """One published figure.

    Attributes:
        kernel: model kernel name (:data:`hardware.pipeline.KERNELS`).
        dtype: "fp16" or "fp8".
        head_dim, seq_len, batch, heads, causal: the problem.
        tflops: the published speed, TFLOP/s.
        source: figure or table, with the paper.
        approximate: True when transcribed from a plot's labels.
        ref: the short name of the figure or table ("Fig. 5", "Fig. 7", "Table 2").
    """

    kernel: str
    dtype: str
    head_dim: int
    seq_len: int
    batch: int
    heads: int
    causal: bool
    tflops: float
    source: str
    approximate: bool
    ref: str = ""


def figure_shape(seq_len: int, head_dim: int) -> tuple[int, int]:
    """(batch, heads) of the papers' figures: 16K tokens, 2048 = heads x head_dim."""
    return 16384 // seq_len, 2048 // head_dim


#: (kernel, dtype, head_dim, causal) -> speeds at SEQ_LENS (None: no bar); the rows are
#: alike on purpose: the published bars, one curve each
_FIGURES: Mapping[tuple[str, str, int, bool], tuple[float | None, ...]] = {
    ("standard", "fp16", 64, False): (52, 63, 67, 72, 73, None),
    ("standard", "fp16", 64, True): (16, 18, 18, 18, 18, None),
    ("standard", "fp16", 128, False): (74, 100, 119, 133, 139, None),
    ("standard", "fp16", 128, True): (26, 31, 34, 35, 35, None),
    ("fa2", "fp16", 64, False): (282, 306, 318, 321, 322, 324),
    ("fa2", "fp16", 64, True): (180, 229, 262, 284, 295, 299),
    ("fa2", "fp16", 128, False): (309, 350, 362, 368, 370, 370),
    ("fa2", "fp16", 128, True): (191, 260, 298, 319, 333, 335),
    ("fa2", "fp16", 256, False): (275, 313, 321, 323, 324, 326),
    ("fa2", "fp16", 256, True): (208, 251, 278, 293, 297, 298),
    ("fa3", "fp16", 64, False): (333, 392, 460, 476, 496, 497),
    ("fa3", "fp16", 64, True): (197, 265, 371, 420, 460, 473),
    ("fa3", "fp16", 128, False): (467, 565, 625, 638, 646, 648),
    ("fa3", "fp16", 128, True): (292, 423, 521, 579, 602, 616),
    ("fa3", "fp16", 256, False): (482, 639, 707, 736, 746, 756),
    ("fa3", "fp16", 256, True): (286, 427, 537, 612, 628, 642),
    ("fa3", "fp8", 64, False): (240, 396, 462, 568, 596, 613),
    ("fa3", "fp8", 64, True): (164, 244, None, None, None, None),
    ("fa3", "fp8", 128, False): (348, 596, 733, 918, 974, 1008),
    ("fa3", "fp8", 256, False): (510, 744, 931, 966, 1151, 1171),
    ("fa3", "fp8", 256, True): (329, 521, 703, 856, 960, 1024),
}


def _build() -> tuple[Measurement, ...]:
    rows = []
    for (kernel, dtype, d, causal), speeds in _FIGURES.items():
        for n, v in zip(SEQ_LENS, speeds):
            if v is None:
                continue
            b, h = figure_shape(n, d)
            fig5 = dtype == "fp16"
            rows.append(Measurement(kernel, dtype, d, n, b, h, causal, float(v),
                                    _FIG5 if fig5 else _FIG7, True,
                                    "Fig. 5" if fig5 else "Fig. 7"))
    for kernel, ms in (("fa3", 3.538), ("fa3_no_intra_overlap", 4.021),
                       ("fa3_no_warp_specialization", 4.105)):
        flops = 4.0 * 4 * 16 * 8448 ** 2 * 128
        rows.append(Measurement(kernel, "fp16", 128, 8448, 4, 16, False,
                                round(flops / (ms * 1e-3) / 1e12), _TAB2, False,
                                "Table 2"))
    return tuple(rows)


#: every published figure, FP16 then FP8 figures, then Table 2
PUBLISHED: tuple[Measurement, ...] = _build()
