"""Golden cases for attention (``refimpl.attention``): the exact reference, the
FlashAttention V1 and V2 schedules, split-KV (Flash-Decoding) and its merge, and the
backward pass.

Inputs are multiples of 1/16 in [-4, 4], exact in FP16 and BF16, so a low-precision
implementation reads the same numbers. Outputs and their tolerances:

- ``out``: FlashAttention's acceptance rule (``relative_to_naive``): the largest error of
  a result is at most 2x that of the naive low-precision computation (the reference array
  ``naive``, ``refimpl.attention.naive_attention`` in FP16 or BF16) plus 1e-5.
- ``lse`` (natural log): depends on the reduction order over keys, so ``allclose`` with
  the order named.
- ``stats``: the schedule's counts as written in the paper, exact:
  [HBM element reads, HBM element writes, peak on-chip elements, blocks computed,
  blocks skipped].
- gradients: ``allclose`` (dQ accumulation order is schedule-dependent).

FlashAttention-3 (Shah et al. 2024): the FP16 path has the same rule; in the FP8 path
``out`` and ``lse`` are the exact attention and the reference arrays ``fp8_model`` and
``fp8_model_lse`` the modelled FA3 FP8 computation (E4M3 tiles, optional incoherent
processing), so an FP8 kernel may be at most 2x as wrong as that model (variant ``fa3_fp8_quantization``: tensor, block, block with
incoherent processing).

Implementation-defined choices are variants: ``causal_alignment`` (bottom_right, the
default, as in flash-attention >= 2.1 and FlashInfer, or top_left as PyTorch SDPA's
is_causal), carried by every case whose answer depends on it (a causal mask, a window or
ALiBi with Sq != Sk or with padding: with padding, bottom_right aligns to each batch
entry's numbers of valid queries and keys), the option written into its parameters; and
``lse_of_empty_row`` (-inf here and in FA3/FlashInfer; FA2 writes +inf).

Every case whose ``out`` is held to the FP16 naive computation has a BF16 twin (its id
with ``.bf16`` appended, ``attention.flash_v3.bf16.32x32`` for the FA3 FP16 path): the
same shapes and options, its own inputs, ``naive_dtype`` BF16, for kernels computing in
BF16 (the case's ``params.naive_dtype`` says which precision a case is for).

``attention.attention.long_kv.bf16.d128`` is the size production kernels are tested at:
head size 128, 1024 keys, a causal chunk of 128 queries, against the BF16 naive
computation.

Sources: Dao et al. 2022 (arXiv 2205.14135); Dao 2023 (arXiv 2307.08691);
Flash-Decoding; flash-attention's tests (the 2x rule).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import AllClose, RelativeToNaive
from refimpl import attention as A
from refimpl.attention.flash_v3 import flash_v3

SPECS = {"FlashAttention": "Dao et al. 2022 (arXiv 2205.14135)",
         "FlashAttention-2": "Dao 2023 (arXiv 2307.08691)",
         "FlashAttention-3": "Shah et al. 2024 (arXiv 2407.08608)"}

OUT_TOL = RelativeToNaive(2.0, "naive", 1e-5)
LSE_TOL = AllClose(1e-5, 1e-5, "exact scores; float64 fixed-order sum of exp over keys")
GRAD_TOL = AllClose(1e-4, 1e-5, "exact matrix products; reference (non-tiled) order")
#: the case parameters that are fields of refimpl.attention.MaskOptions (the mask arrays,
#: key_padding_mask and alibi_slopes, are case inputs)
MASK_KEYS = ("scale", "causal", "causal_alignment", "window", "softcap")


def _options(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> A.MaskOptions:
    """The case's masking options: its parameters (``MASK_KEYS``) and mask inputs."""
    opts = {k: p[k] for k in MASK_KEYS if k in p and p[k] is not None}
    if "window" in opts:
        opts["window"] = tuple(opts["window"])
    return A.MaskOptions(**opts, key_padding_mask=inputs.get("key_padding_mask"),
                         alibi_slopes=inputs.get("alibi_slopes"))


def _stats(st: A.ScheduleStats) -> np.ndarray:
    return np.array([sum(st.hbm_reads.values()), sum(st.hbm_writes.values()),
                     st.peak_sram_elements, st.blocks_computed, st.blocks_skipped], np.int64)


def _naive(inputs, p, mask) -> np.ndarray:
    return A.naive_attention(inputs["q"], inputs["k"], inputs["v"], dtype=p["naive_dtype"],
                             mask=mask)


def _attention(inputs, p):
    mask = _options(inputs, p)
    out, lse = A.attention(inputs["q"], inputs["k"], inputs["v"], return_lse=True, mask=mask)
    return {"out": out, "lse": lse, "naive": _naive(inputs, p, mask)}


def _flash_v2(inputs, p):
    mask = _options(inputs, p)
    out, lse, st = A.flash_v2(inputs["q"], inputs["k"], inputs["v"], block=tuple(p["block"]),
                              mask=mask)
    return {"out": out, "lse": lse, "stats": _stats(st), "naive": _naive(inputs, p, mask)}


def _standard(inputs, p):
    mask = _options(inputs, p)
    out, st = A.standard_attention(inputs["q"], inputs["k"], inputs["v"], mask=mask)
    return {"out": out, "stats": _stats(st), "naive": _naive(inputs, p, mask)}


def _flash_v1(inputs, p):
    mask = _options(inputs, p)
    out, st = A.flash_v1(inputs["q"], inputs["k"], inputs["v"],
                         sram_elements=p["sram_elements"], mask=mask)
    return {"out": out, "stats": _stats(st), "naive": _naive(inputs, p, mask)}


def _split_kv(inputs, p):
    mask = _options(inputs, p)
    out, lse, st = A.split_kv(inputs["q"], inputs["k"], inputs["v"],
                              num_splits=p["num_splits"], block=tuple(p["block"]), mask=mask)
    return {"out": out, "lse": lse, "stats": _stats(st), "naive": _naive(inputs, p, mask)}


def _flash_v3(inputs, p):
    mask = _options(inputs, p)
    fa3 = {k: p[k] for k in ("fp8", "block_quantization", "incoherent", "seed")}
    out, lse, st = flash_v3(inputs["q"], inputs["k"], inputs["v"], block=tuple(p["block"]),
                              **fa3, mask=mask)
    if not p["fp8"]:
        return {"out": out, "lse": lse, "stats": _stats(st),
                "naive": _naive(inputs, p, mask)}
    exact, exact_lse = A.attention(inputs["q"], inputs["k"], inputs["v"], return_lse=True,
                                   mask=mask)
    return {"out": exact, "lse": exact_lse, "stats": _stats(st), "fp8_model": out,
            "fp8_model_lse": lse}


def _merge(inputs, p):
    out, lse = A.merge_attention_states(inputs["outs"], inputs["lses"])
    return {"out": out, "lse": lse}


def _backward(inputs, p):
    mask = _options(inputs, p)
    dq, dk, dv = A.attention_backward(inputs["q"], inputs["k"], inputs["v"], inputs["o"],
                                      inputs["do"], inputs["lse"], mask=mask)
    return {"dq": dq, "dk": dk, "dv": dv}


def _flash_v2_backward(inputs, p):
    mask = _options(inputs, p)
    dq, dk, dv, st = A.flash_v2_backward(inputs["q"], inputs["k"], inputs["v"], inputs["o"],
                                         inputs["do"], inputs["lse"],
                                         block=tuple(p["block"]), mask=mask)
    return {"dq": dq, "dk": dk, "dv": dv, "stats": _stats(st)}


OPERATIONS = [
    Operation("attention.attention", _attention,
              "out, lse = refimpl.attention.attention(q, k, v, return_lse=True, mask=); "
              "naive = naive_attention(q, k, v, dtype=naive_dtype, mask=)"),
    Operation("attention.flash_v2", _flash_v2,
              "out, lse, stats = refimpl.attention.flash_v2(q, k, v, block=, mask=)"),
    Operation("attention.flash_v3", _flash_v3,
              "o, lse, stats = refimpl.attention.flash_v3(q, k, v, block=, fp8=, "
              "block_quantization=, incoherent=, seed=, mask=); FP16 mode: out = o; FP8 mode: "
              "out, lse = the exact attention; fp8_model, fp8_model_lse = o, lse"),
    Operation("attention.standard", _standard,
              "out, stats = refimpl.attention.standard_attention(q, k, v, mask=): "
              "S and P through HBM (FlashAttention paper, Algorithm 0)"),
    Operation("attention.flash_v1", _flash_v1,
              "out, stats = refimpl.attention.flash_v1(q, k, v, sram_elements=, mask=)"),
    Operation("attention.split_kv", _split_kv,
              "out, lse, stats = refimpl.attention.split_kv(q, k, v, num_splits=, block=, "
              "mask=)"),
    Operation("attention.merge_attention_states", _merge,
              "out, lse = refimpl.attention.merge_attention_states(outs, lses)"),
    Operation("attention.flash_v2_backward", _flash_v2_backward,
              "dq, dk, dv, stats = refimpl.attention.flash_v2_backward(q, k, v, o, do, lse, "
              "block=, mask=)"),
    Operation("attention.backward", _backward,
              "dq, dk, dv = refimpl.attention.attention_backward(q, k, v, o, do, lse, mask=)"),
]


def _qkv(b: int, hq: int, hkv: int, sq: int, sk: int, d: int, *, padding: bool = False,
         empty_batch: bool = False, alibi: bool = False, outliers: bool = False):
    def build(rng: CaseRandom) -> dict[str, np.ndarray]:
        def t(*shape: int) -> np.ndarray:
            x = rng.integers(-64, 65, shape).astype(np.float32) / np.float32(16)
            if outliers:   # FA3 paper's test data: rare large entries (~0.1%, x10)
                x = np.where(rng.integers(0, 1000, shape) == 0, x * np.float32(10), x)
            return x

        out = {"q": t(b, hq, sq, d), "k": t(b, hkv, sk, d), "v": t(b, hkv, sk, d)}
        if padding or empty_batch:
            # right padding (flash-attention's variable-length convention): batch entry
            # i has its first n_i keys valid, and causal alignment uses n_i
            valid = rng.integers(sk // 2, sk + 1, b)
            if empty_batch:
                valid[-1] = 0                # every key of the last batch masked
            out["key_padding_mask"] = np.arange(sk)[None, :] < valid[:, None]
        if alibi:
            out["alibi_slopes"] = np.float32(2.0) ** -np.arange(1, hq + 1, dtype=np.float32)
        return out
    return build


def _attn_params(naive: str = "fp16", **opts: Any) -> dict[str, Any]:
    p = {"naive_dtype": naive}
    p.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()})
    return p


_TOL = {"out": OUT_TOL, "lse": LSE_TOL}
#: the default causal alignment, written into the params of every case that depends on it
ALIGN = "bottom_right"
ALIGN_VARIANT = {"choice": "causal_alignment", "option": ALIGN}


def cases() -> list[CaseSpec]:
    out: list[CaseSpec] = []

    def add(cid, op, params, build, level, variant=None, desc="", tol=None, ref=("naive",)):
        out.append(CaseSpec(cid, op, params, build, tolerance=tol or _TOL,
                            reference=ref, level=level, variant=variant, description=desc))

    # the reference definition under each option
    add("attention.attention.mha", "attention.attention", _attn_params(),
        _qkv(1, 2, 2, 33, 33, 16), 0, desc="plain attention, Sq = Sk = 33, D = 16")
    for align in ("bottom_right", "top_left"):
        for sq, sk in ((17, 40), (40, 17)):
            add(f"attention.attention.gqa.causal_{align}.{sq}x{sk}", "attention.attention",
                _attn_params(causal=True, causal_alignment=align),
                _qkv(2, 4, 2, sq, sk, 16), 1,
                variant={"choice": "causal_alignment", "option": align},
                desc=f"GQA 4/2 heads, causal ({align}), Sq={sq}, Sk={sk}")
    add("attention.attention.window_padding", "attention.attention",
        _attn_params(window=(3, 0), causal_alignment=ALIGN),
        _qkv(2, 2, 1, 24, 24, 8, padding=True), 1, variant=ALIGN_VARIANT,
        desc="sliding window (3, 0), key padding mask, MQA")
    add("attention.attention.empty_rows", "attention.attention",
        _attn_params(causal=True, causal_alignment=ALIGN),
        _qkv(2, 2, 2, 9, 6, 8, empty_batch=True), 1,
        variant=({"choice": "lse_of_empty_row", "option": "-inf"}, ALIGN_VARIANT),
        desc="fully masked rows (Sq > Sk bottom-right, all keys padded): out 0, LSE -inf")
    add("attention.attention.softcap_alibi", "attention.attention",
        _attn_params(naive="bf16", softcap=5.0, causal_alignment=ALIGN),
        _qkv(1, 4, 4, 20, 31, 16, alibi=True), 1, variant=ALIGN_VARIANT,
        desc="softcap 5 and ALiBi slopes 2^-h, BF16 naive reference")
    add("attention.attention.large_logits", "attention.attention",
        _attn_params(scale=16.0), _qkv(1, 1, 1, 16, 48, 8), 1,
        desc="scale 16: logits beyond float32 exp's range, no overflow allowed")
    add("attention.attention.decode", "attention.attention", _attn_params(),
        _qkv(2, 8, 2, 1, 100, 64), 1, desc="decode: Sq = 1, Sk = 100, D = 64, GQA 8/2")
    add("attention.attention.long", "attention.attention", _attn_params(causal=True),
        _qkv(1, 2, 2, 200, 200, 64), 2, desc="causal 200 x 200, D = 64")
    add("attention.attention.long_kv.bf16.d128", "attention.attention",
        _attn_params(naive="bf16", causal=True, causal_alignment=ALIGN),
        _qkv(1, 2, 1, 128, 1024, 128), 1, variant=ALIGN_VARIANT,
        desc="head size 128, 1024 keys, causal chunk of the last 128 queries, GQA 2/1, "
             "BF16 naive reference")

    # schedules
    add("attention.flash_v2.mha.16x16", "attention.flash_v2",
        _attn_params(block=(16, 16)), _qkv(1, 2, 2, 33, 33, 16), 0,
        desc="FlashAttention-2, 16 x 16 tiles, ragged edges")
    add("attention.flash_v2.causal.8x32", "attention.flash_v2",
        _attn_params(block=(8, 32), causal=True, causal_alignment=ALIGN),
        _qkv(2, 4, 2, 40, 70, 16), 1, variant=ALIGN_VARIANT,
        desc="FlashAttention-2, causal block skipping, GQA")
    add("attention.flash_v2.window_padding", "attention.flash_v2",
        _attn_params(block=(8, 8), window=(3, 0), causal_alignment=ALIGN),
        _qkv(2, 2, 1, 24, 24, 8, padding=True), 1, variant=ALIGN_VARIANT,
        desc="FlashAttention-2, sliding window and key padding, MQA")
    add("attention.standard.mha", "attention.standard", _attn_params(),
        _qkv(1, 2, 2, 33, 33, 16), 1, tol={"out": OUT_TOL},
        desc="standard attention with its Theta(N d + N^2) HBM accesses")
    add("attention.flash_v1.m256", "attention.flash_v1",
        _attn_params(sram_elements=256), _qkv(1, 2, 2, 33, 33, 16), 1,
        tol={"out": OUT_TOL}, desc="FlashAttention V1, M = 256 elements on chip")
    add("attention.flash_v1.causal.m1024", "attention.flash_v1",
        _attn_params(sram_elements=1024, causal=True), _qkv(1, 2, 1, 40, 40, 16), 1,
        tol={"out": OUT_TOL}, desc="FlashAttention V1, causal, M = 1024")
    add("attention.split_kv.decode.3", "attention.split_kv",
        _attn_params(num_splits=3, block=(1, 16)), _qkv(2, 8, 2, 1, 100, 64), 1,
        desc="Flash-Decoding: 3 key ranges merged")
    add("attention.split_kv.empty_split", "attention.split_kv",
        _attn_params(num_splits=5, block=(4, 16)), _qkv(1, 2, 2, 4, 40, 16), 1,
        desc="5 splits of 3 key tiles: trailing splits are empty and weigh 0")

    add("attention.flash_v3.fp16.32x32", "attention.flash_v3",
        _attn_params(block=(32, 32), fp8=False, block_quantization=True, incoherent=False,
                     seed=0, causal=True), _qkv(1, 1, 1, 64, 64, 64), 1,
        desc="FlashAttention-3 FP16/BF16 path (the same bytes as FlashAttention-2)")
    fp8_tol = {"out": RelativeToNaive(2.0, "fp8_model", 1e-5),
               "lse": RelativeToNaive(2.0, "fp8_model_lse", 1e-5)}
    for bq, inc, level in ((False, False, 1), (True, False, 1), (True, True, 1)):
        tag = ("block" if bq else "tensor") + (".incoherent" if inc else "")
        add(f"attention.flash_v3.fp8.{tag}", "attention.flash_v3",
            _attn_params(block=(32, 32), fp8=True, block_quantization=bq, incoherent=inc,
                         seed=0), _qkv(1, 1, 1, 64, 64, 64, outliers=True), level,
            tol=fp8_tol, ref=("fp8_model", "fp8_model_lse"),
            variant={"choice": "fa3_fp8_quantization", "option": tag},
            desc=f"FlashAttention-3 FP8 path ({tag} E4M3 scales): out is the exact "
                 "attention; an FP8 kernel may be at most 2x as wrong as the modelled "
                 "FA3 FP8 computation (reference fp8_model)")

    def merge_inputs(rng: CaseRandom) -> dict[str, np.ndarray]:
        outs = rng.normal((4, 2, 3, 5, 8))
        lses = rng.normal((4, 2, 3, 5), scale=4.0)
        lses[2] = -np.inf                 # an empty part
        lses[:, 1, 2, 4] = -np.inf        # a row empty in every part
        return {"outs": outs.astype(np.float32), "lses": lses.astype(np.float32)}

    merge_tol = AllClose(1e-6, 1e-6, "float64, fixed order over parts, rounded once")
    add("attention.merge_attention_states", "attention.merge_attention_states", {},
        merge_inputs, 1, tol={"out": merge_tol, "lse": merge_tol}, ref=(),
        desc="merge 4 partial states, one part empty, one row empty everywhere")

    def backward_inputs(rng: CaseRandom) -> dict[str, np.ndarray]:
        x = _qkv(1, 2, 1, 12, 20, 8)(rng)
        o, lse = A.attention(x["q"], x["k"], x["v"], causal=True, return_lse=True)
        x.update(o=o, lse=lse, do=rng.integers(-64, 65, o.shape).astype(np.float32) / 64)
        return x

    grads = {"dq": GRAD_TOL, "dk": GRAD_TOL, "dv": GRAD_TOL}
    add("attention.backward.causal", "attention.backward",
        {"causal": True, "causal_alignment": ALIGN}, backward_inputs, 1, tol=grads, ref=(),
        variant=ALIGN_VARIANT, desc="reference gradients, causal, MQA")
    add("attention.flash_v2_backward.causal.4x8", "attention.flash_v2_backward",
        {"causal": True, "causal_alignment": ALIGN, "block": [4, 8]}, backward_inputs, 1,
        tol=grads, ref=(), variant=ALIGN_VARIANT,
        desc="FlashAttention-2 backward schedule (K/V outer, dQ accumulated in query-tile "
             "order), causal, MQA")
    return out + bf16_twins(out)


def bf16_twins(specs: list[CaseSpec]) -> list[CaseSpec]:
    """A BF16 version of every case held to the FP16 naive computation: same shapes and
    options, ``naive_dtype="bf16"``, the id with ``.bf16`` appended (``.fp16.`` becomes
    ``.bf16.``), its own inputs (the random stream is keyed by the id), in the default
    suite even where the FP16 case is a smoke case."""
    out = []
    for spec in specs:
        if spec.params.get("naive_dtype") != "fp16" or "naive" not in spec.reference:
            continue
        cid = (spec.id.replace(".fp16.", ".bf16.") if ".fp16." in spec.id
               else spec.id + ".bf16")
        desc = spec.description.replace("FP16/BF16 path", "BF16 path")
        out.append(replace(spec, id=cid, params={**spec.params, "naive_dtype": "bf16"},
                           level=max(spec.level, 1),
                           description=f"{desc}; BF16 naive reference"))
    return out


AREA = Area("attention", SPECS, OPERATIONS, cases)
