"""Attention: the exact reference and the FlashAttention schedules.

Layout (PyTorch SDPA): q (..., Hq, Sq, D), k and v (..., Hkv, Sk, D); GQA/MQA by head
grouping. Every function takes the same masking options, one :class:`MaskOptions`
(``mask=MaskOptions(scale=, causal=, causal_alignment=, window=, softcap=,
alibi_slopes=, key_padding_mask=, query_padding_mask=)``) or the same names as keywords,
with the conventions of :mod:`refimpl.attention.reference`. The tile of a schedule is
``block = (B_r, B_c)`` everywhere (:mod:`refimpl.attention.tiles`).

Results: every schedule (``standard_attention``, ``flash_v1``, ``flash_v2``,
``flash_v3``, ``split_kv``, ``refimpl.kvcache.paged_attention``) returns an
:class:`AttentionResult` with fields ``out``, ``lse``, ``stats``; it is the tuple of the
parts asked for, so ``out, lse, stats = flash_v2(...)`` and, with ``return_lse=False``
(the default of ``flash_v1`` and ``standard_attention``), ``out, stats = ...`` unpack
as before. :func:`attention` returns a bare ``out`` array by default and an
:class:`AttentionResult` ``(out, lse)`` with ``return_lse=True``; ``naive_attention``
returns ``out``. The backward passes return :class:`AttentionGradients`
(``dq, dk, dv[, stats]``).

Special rows, the same in the reference and every schedule: a fully masked row (or one
whose scores are all ``-inf``) gives output 0 and LSE ``-inf``; a row with a ``+inf``
score (a float32 overflow of ``scale * q . k``) gives output NaN and LSE ``+inf``; a row
with a NaN score gives NaN and NaN. No row's result depends on another row's data.

Building blocks for other schedules (paged K/V, FlashAttention-3): :func:`prepare`
validates inputs and options once; :func:`scores` gives the float32 scores of any tile;
:func:`online_block_update` is the FlashAttention-2 inner step and :func:`finalize` its
delayed normalisation; ``refimpl.attention.flash_v2.flash_v2_core`` runs the whole
forward on a key range. Calling them on the same tiles in the same order reproduces
:func:`flash_v2` byte for byte.
"""
from refimpl.attention.mask import MaskOptions
from refimpl.attention.online import OnlineState, finalize, online_block_update
from refimpl.attention.problem import ALIGNMENTS, Problem, prepare
from refimpl.attention.result import AttentionGradients, AttentionResult
from refimpl.attention.tiles import DEFAULT_BLOCK
from refimpl.attention.scores import scores
from refimpl.attention.reference import (
    NAIVE_DTYPES, attention, naive_attention, standard_attention,
)
from refimpl.attention.flash_v2 import flash_v2
from refimpl.attention.flash_v3 import flash_v3
from refimpl.attention.flash_v1 import flash_v1, v1_block_sizes
from refimpl.attention.split_kv import merge_attention_states, split_kv
from refimpl.attention.backward import attention_backward, flash_v2_backward
from refimpl.attention.stats import ScheduleStats
from refimpl.attention.tolerance import naive_error_bound, within_naive_tolerance

__all__ = [
    "ALIGNMENTS", "AttentionGradients", "AttentionResult", "DEFAULT_BLOCK", "MaskOptions",
    "NAIVE_DTYPES", "OnlineState", "Problem", "ScheduleStats", "attention",
    "attention_backward", "finalize", "flash_v1", "flash_v2", "flash_v2_backward",
    "flash_v3", "merge_attention_states", "naive_attention", "online_block_update",
    "split_kv",
    "naive_error_bound", "prepare", "scores", "standard_attention", "v1_block_sizes",
    "within_naive_tolerance",
]
