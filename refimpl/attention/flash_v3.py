"""FlashAttention-3 forward numerics: the FP16/BF16 path and the FP8 path (Shah et al.
2024, "FlashAttention-3", arXiv 2407.08608, section 3.3 "Low-precision with FP8" and
section 4.3 "Numerical error validation", Table 3).

The schedule (warp specialisation, ping-pong, intra-warpgroup pipelining) changes when
the tiles are computed, not what they are: the values are those of the FlashAttention-2
loop (outer over query tiles of ``B_r`` rows, inner over key tiles of ``B_c`` keys in
increasing key order, delayed normalisation). The timing model is
:mod:`hardware.pipeline`.

``fp8=False`` (FP16/BF16 inputs as float32 values): exactly
:func:`refimpl.attention.flash_v2` with the same ``block`` (the same code runs), so the
bytes are equal. ``accumulate`` other than ``"exact"`` runs this module's loop with that
accumulation model for both GEMMs (e.g. ``"H100-FP16"``).

``fp8=True``, per (batch, head) instance, in this order:

1. Incoherent processing (``incoherent=True``): ``Q <- fl32(Q M)``, ``K <- fl32(K M)``
   with the same orthogonal ``M = D H / sqrt(d)`` (``H`` the d x d Sylvester Hadamard
   matrix, ``D`` a diagonal of random signs from ``seed``:
   :func:`refimpl.scaling.random_signs`, a SplitMix64 hash of ``(seed, i)``), computed by
   :func:`refimpl.scaling.hadamard_transform`. ``(QM)(KM)^T = Q K^T`` in exact arithmetic;
   outliers are spread over all d coordinates before quantising. V is untouched. d must
   be a power of two.
2. Quantisation to ``fmt`` (E4M3 by default) with
   :func:`refimpl.scaling.block_fp8_quantize` (float32 scale ``amax / 448`` per tile,
   saturating round-to-nearest-even): ``block_quantization=True`` gives one scale per
   ``B_r x d`` tile of Q and per ``B_c x d`` (``B_c x d_v``) tile of K (V) of each
   instance (K and V per key/value head, before GQA sharing); ``False`` gives one scale
   per tensor (the same rule with a single tile covering the tensor, the paper's baseline).
3. Scores of tile (i, j): ``S = fl32(G * fl32(fl32(s_Q,i s_K,j) * fl32(scale)))`` with
   ``G = matmul(Q8_i, K8_j^T, accumulate)`` over the E4M3 values: products exact, FP32
   accumulation (``"exact"``: the exact sum rounded once, the default; or a tensor-core
   BlockFMA model such as ``"H100-FP8"``). The descale factors fold into the softmax
   scale, as the kernel folds them into ``softmax_scale_log2``. Then softcap, masks and
   ALiBi exactly as :mod:`refimpl.attention.scores` steps 3-5.
4. Online softmax in FP32 as :mod:`refimpl.attention.online`, except that the
   exponentials are shifted by ``p_offset`` binades so P uses the range of E4M3:
   ``P = RN32(2^p_offset e^(fl64(S - m_new)))`` in ``[0, 2^p_offset]`` (one correct
   rounding, :func:`refimpl.elementary.exp_f32`). FA3's FP8 kernel
   (``hopper/softmax.h``, ``Max_offset = 8``) computes ``exp2(x log2(e) - (m log2(e) - 8))``,
   so P lies in ``[0, 256]``, below E4M3's 448, and values down to ``2^-17`` of the row
   maximum survive instead of ``2^-9``. ``rowsum`` adds the FP32 P before quantisation
   (the kernel's order: ``p_rowsum="unquantized"``, default) or the quantised P
   (``"quantized"``). ``l_new = fl32(alpha l + rowsum)``.
5. ``P8 = round_to(P, fmt)``; ``acc_new = fl32(alpha acc + pv s_V,j)`` with
   ``pv = matmul(P8, V8_j, accumulate)`` (FP32); the factor ``2^p_offset`` is in both
   ``acc`` and ``l`` and cancels.
6. ``O = fl32(acc / l)`` (FP32 output); ``LSE = fl32(m + ln(l 2^-p_offset))``.

Every step is a function of the inputs and options alone (deterministic ``exp``/``log``,
order-fixed sums, modelled GEMMs), so the bytes are the same on every machine.
Fully masked rows give 0 and LSE ``-inf``; a row with a ``+inf`` score gives NaN
output and LSE ``+inf``, one with a NaN score NaN and NaN (as everywhere in
:mod:`refimpl.attention`).
Quantisation uses every key of a tile, masked or not (the kernel quantises the tensors
before the attention call). HBM traffic is counted in elements, as for FlashAttention-2
(the per-tile scales are not counted).

Two implementations of the loop, tested against each other byte for byte: ``"plain"``
(one query tile at a time, the paper's loops) and ``"fast"`` (query tiles in lock-step
per key tile).

Table 3: :func:`table3_experiment` reproduces the paper's numerical-error experiment
(inputs ``N(0,1) + N(0,100) Bernoulli(0.001)``, float64 reference, RMSE).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from refimpl import elementary, formats
from refimpl.attention.flash_v2 import flash_v2_core, forward_stats
from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.online import OnlineState, finalize, product_operand
from refimpl.attention.problem import Problem, prepare
from refimpl.attention.result import AttentionResult
from refimpl.attention.scores import scores_from_product
from refimpl.attention.tiles import check_block, computed_tiles, tile_ranges
from refimpl.deprecation import renamed_arguments
from refimpl.matmul import matmul, resolve_accumulation
from refimpl.scaling import block_fp8_quantize, hadamard_transform, random_signs
from refimpl.softmax import exp_diff_f32
from refimpl.summation import fold_sum
from refimpl.validation import check_bool, check_positive_int

__all__ = [
    "flash_v3", "incoherent_transform", "outlier_inputs", "table3_experiment",
    "Table3Result", "DEFAULT_BLOCK", "FA3_P_OFFSET", "P_ROWSUMS", "TABLE3_PAPER",
]

DEFAULT_BLOCK = (128, 64)

#: FA3's FP8 exponent shift of P (``Max_offset`` in the kernel): P in [0, 256]
FA3_P_OFFSET = 8

#: what the row sum l adds: the FP32 P (the kernel) or the quantised P
P_ROWSUMS = ("unquantized", "quantized")

IMPLEMENTATIONS = ("fast", "plain")

#: the paper's Table 3 RMSE figures, for side-by-side display only (never used to
#: judge the oracle's own figures)
TABLE3_PAPER = {
    "fp16_standard": 3.2e-4,
    "fp16_flash": 1.9e-4,
    "fp8_per_tensor": 2.4e-2,
    "fp8_per_tensor_incoherent": 9.3e-3,
    "fp8_block": 2.4e-2,
    "fp8_block_incoherent": 9.1e-3,
}


# --------------------------------------------------------------------------- inputs
def incoherent_transform(x: ArrayLike, seed: int = 0) -> np.ndarray:
    """``x M`` along the last axis, ``M = D H / sqrt(d)`` (FA3 incoherent processing):
    ``H`` the d x d Sylvester Hadamard matrix, ``D`` the signs
    :func:`refimpl.scaling.random_signs` ``(d, seed)``. Orthogonal, so applied to both
    Q and K it leaves ``Q K^T`` unchanged in exact arithmetic. Result in x's dtype,
    rounded once (see :func:`refimpl.scaling.hadamard_transform`).

    Raises:
        ValueError: d (the last axis) not a power of two, bad seed.
    """
    x = np.asarray(x)
    d = _hadamard_size(x.shape[-1] if x.ndim else 0)
    return hadamard_transform(x, size=d, axis=-1, signs=random_signs(d, _seed(seed)))


def _hadamard_size(d: int) -> int:
    if d < 1 or d & (d - 1):
        raise ValueError(
            f"incoherent processing needs a head dimension that is a power of two "
            f"(Hadamard size), got d = {d}")
    return int(d)


def _seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _standard_normal(gen: np.random.Generator, n: int) -> np.ndarray:
    """``n`` N(0, 1) samples by Marsaglia's polar method from the generator's 53-bit
    uniform doubles, with the deterministic ``log`` of :mod:`refimpl.elementary` (NumPy's
    own normal sampler takes its tail from the platform libm)."""
    out = np.empty(0)
    while out.size < n:
        need = n - out.size
        u = 2.0 * gen.random(2 * (need // 2 + 8 + need // 3)) - 1.0
        a, b = u[0::2], u[1::2]
        s = a * a + b * b
        ok = (s > 0) & (s < 1)
        a, b, s = a[ok], b[ok], s[ok]
        f = np.sqrt(-2.0 * elementary.log(s) / s)
        out = np.concatenate([out, np.stack([a * f, b * f], axis=-1).ravel()])
    return out[:n]


def outlier_inputs(
    shape: tuple[int, ...],
    seed: int = 0,
    *,
    count: int = 3,
    outlier_prob: float = 0.001,
    outlier_std: float = 10.0,
) -> list[np.ndarray]:
    """FA3 Table 3 inputs: ``count`` float32 arrays of ``shape`` with entries
    ``N(0, 1) + N(0, outlier_std^2) * Bernoulli(outlier_prob)`` (the paper:
    ``N(0,1) + N(0,100) Bernoulli(0.001)``), each rounded once to float32.

    Random numbers: ``numpy.random.Generator(numpy.random.PCG64(seed))``; per array, in
    this order, the N(0,1) part, the Bernoulli uniforms (``u < outlier_prob``), the
    outlier normals. Normals come from the generator's 53-bit uniforms by the polar
    method with a deterministic log, so the same seed gives the same bytes on every
    machine (for a given NumPy PCG64 stream, which NumPy keeps stable).
    """
    seed = _seed(seed)
    shape = tuple(shape)
    if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise ValueError(f"shape must hold non-negative integers, got {shape!r}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    if not (0.0 <= outlier_prob <= 1.0):
        raise ValueError(f"outlier_prob must be in [0, 1], got {outlier_prob!r}")
    if not (math.isfinite(outlier_std) and outlier_std >= 0):
        raise ValueError(f"outlier_std must be finite and >= 0, got {outlier_std!r}")
    gen = np.random.Generator(np.random.PCG64(seed))
    n = math.prod(shape)
    arrays = []
    for _ in range(count):
        base = _standard_normal(gen, n)
        hit = gen.random(n) < outlier_prob
        big = _standard_normal(gen, n) * outlier_std
        arrays.append((base + np.where(hit, big, 0.0)).astype(np.float32).reshape(shape))
    return arrays


# --------------------------------------------------------------------------- operands
@dataclass(frozen=True)
class _Operands:
    """Quantised (or plain) operands in the flattened layout, GQA heads expanded.

    q (B, Hq, Sq, D), k (B, Hq, Sk, D), v (B, Hq, Sk, Dv): float32 format values;
    q_scale (B, Hq, Sq), k_scale and v_scale (B, Hq, Sk): float32 scale of each row's or
    key's tile (all ones without FP8)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_scale: np.ndarray
    k_scale: np.ndarray
    v_scale: np.ndarray


def _quantize(
    x: np.ndarray, rows: int, per_tensor: bool, fmt: str
) -> tuple[np.ndarray, np.ndarray]:
    """Values (x's shape) and the per-row scale (x.shape[:-1]) of x quantised in tiles
    of ``rows`` x (last axis), or with one tile for the whole tensor."""
    b, h, s, d = x.shape
    if x.size == 0:
        return x.astype(np.float32), np.ones(x.shape[:-1], dtype=np.float32)
    if per_tensor:
        q = block_fp8_quantize(x.reshape(b * h * s, d), block=(b * h * s, d), fmt=fmt)
        vals = formats.decode(q.codes, q.fmt).astype(np.float32).reshape(x.shape)
        return vals, np.full(x.shape[:-1], q.scales[0, 0], dtype=np.float32)
    q = block_fp8_quantize(x, block=(rows, d), fmt=fmt)
    vals = formats.decode(q.codes, q.fmt).astype(np.float32)
    per_row = np.repeat(q.scales[..., 0], rows, axis=-1)[..., :s]
    return vals, np.ascontiguousarray(per_row, dtype=np.float32)


def _operands(
    prob: Problem, br: int, bc: int, fp8: bool, block_quantization: bool,
    incoherent: bool, seed: int, fmt: str,
) -> _Operands:
    q, k, v = prob.q, prob.k, prob.v
    if incoherent:
        q, k = incoherent_transform(q, seed), incoherent_transform(k, seed)
    if fp8:
        per_tensor = not block_quantization
        q, qs = _quantize(q, br, per_tensor, fmt)
        k, ks = _quantize(k, bc, per_tensor, fmt)
        v, vs = _quantize(v, bc, per_tensor, fmt)
    else:
        qs, ks, vs = (np.ones(a.shape[:-1], dtype=np.float32) for a in (q, k, v))
    g = prob.group
    if g > 1:  # GQA/MQA: query head h reads key/value head h // g
        k, v, ks, vs = (np.repeat(a, g, axis=1) for a in (k, v, ks, vs))
    return _Operands(q, k, v, qs, ks, vs)


# --------------------------------------------------------------------------- one tile
def _tile_scores(
    prob: Problem, ops: _Operands, rows: np.ndarray, cols: np.ndarray, accumulate: object,
) -> np.ndarray:
    """Scores of query rows ``rows`` (a contiguous range) against key tile ``cols``:
    (B, H, r, c) float32, ``-inf`` where masked (module docstring, step 3)."""
    r0, r1 = int(rows[0]), int(rows[-1]) + 1
    c0, c1 = int(cols[0]), int(cols[-1]) + 1
    g = matmul(ops.q[:, :, r0:r1], np.swapaxes(ops.k[:, :, c0:c1], -1, -2),
               accumulate=accumulate).astype(np.float64)
    # the key tile shares one scale; the descale folds into the softmax scale
    qk = (ops.q_scale[:, :, r0:r1] * ops.k_scale[:, :, c0:c0 + 1]).astype(np.float32)
    descale = (qk.astype(np.float64) * float(np.float32(prob.scale))).astype(np.float32)
    with np.errstate(over="ignore"):  # overflow to +-inf is the documented result
        s = (g * descale[..., None].astype(np.float64)).astype(np.float32)
    # steps 3-5 of refimpl.attention.scores (softcap, masks, ALiBi with one rounding of
    # the exact sum), by the same code: the scale is already applied, and step 2 with
    # scale 1 is the identity (fl32(s * 1) = s, infinities included)
    s, _, _ = scores_from_product(replace(prob, scale=1.0), s, rows, cols)
    return s


@dataclass(frozen=True)
class _Step:
    """The options of one online step."""

    fp8: bool
    fmt: str
    p_offset: int
    p_rowsum: str
    accumulate: object


def _update(
    state: OnlineState, s: np.ndarray, v: np.ndarray, v_scale: np.ndarray, opt: _Step,
) -> OnlineState:
    """One online-softmax step (module docstring, steps 4-5); with ``fp8=False``,
    ``p_offset=0`` and exact accumulation it is
    :func:`refimpl.attention.online.online_block_update` operation for operation.

    v: (B, H, c, Dv) values; v_scale: (B, H) float32 scale of the value tile."""
    if s.shape[-1] == 0:
        return state
    m_new = np.maximum(state.m, np.max(s, axis=-1))
    alpha = exp_diff_f32(state.m, m_new)
    p = exp_diff_f32(s, m_new[..., None], shift=opt.p_offset)
    p_mm = formats.round_to(p, opt.fmt).astype(np.float32) if opt.fp8 else p
    rowsum = fold_sum(p_mm if opt.p_rowsum == "quantized" else p, axis=-1).astype(np.float32)
    l_new = (alpha.astype(np.float64) * state.l + rowsum).astype(np.float32)
    # rows that saw a +inf or NaN score (NaN P) stay out of the product, whose
    # accumulation model may mix rows; finalize makes them NaN
    pv = matmul(product_operand(p_mm, m_new), v, accumulate=opt.accumulate).astype(np.float64)
    pv = pv * v_scale.astype(np.float64)[..., None, None]  # exact: two float32 factors
    acc = (alpha[..., None].astype(np.float64) * state.acc + pv).astype(np.float32)
    return OnlineState(m_new, l_new, acc)


def _finalize(state: OnlineState, p_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """``O = fl32(acc / l)``; ``LSE = fl32(m + ln(l 2^-p_offset))``. Any row with a
    visible key has ``l >= 2^p_offset`` (its maximum contributes ``2^p_offset``), so
    ``l 2^-p_offset`` is exact in float32."""
    return finalize(state, lse_shift=p_offset)


# --------------------------------------------------------------------------- the loops
def _plain(prob, ops, qtiles, ktiles, comp, opt):
    """The paper's loops: one query tile at a time (all batch entries and heads
    together; tiles a batch entry skips keep their state for that entry)."""
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    for i, rows in enumerate(qtiles):
        state = OnlineState.initial((b, hq, rows.size), dv)
        for j, cols in enumerate(ktiles):
            keep = comp[:, i, j]
            if not keep.any():
                continue
            s = _tile_scores(prob, ops, rows, cols, opt.accumulate)
            new = _update(state, s, ops.v[:, :, cols], ops.v_scale[:, :, cols[0]], opt)
            state = new if keep.all() else state.where(keep[:, None, None], new)
        out[:, :, rows], lse[:, :, rows] = _finalize(state, opt.p_offset)
    return out, lse


#: query rows run in lock-step by the fast loop (bounds its temporaries; any grouping
#: gives the same bytes, every step being row-local)
_LOCKSTEP_ROWS = 1024


def _fast(prob, ops, qtiles, ktiles, comp, opt, br):
    """Groups of query tiles in lock-step per key tile; same bytes as :func:`_plain`."""
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    per = max(1, _LOCKSTEP_ROWS // br)
    for g0 in range(0, len(qtiles), per):
        group = qtiles[g0:g0 + per]
        r0, r1 = int(group[0][0]), int(group[-1][-1]) + 1
        state = OnlineState.initial((b, hq, r1 - r0), dv)
        tile_of_row = (np.arange(r0, r1) // br) - g0
        for j, cols in enumerate(ktiles):
            comp_j = comp[:, g0:g0 + per, j]
            live = np.flatnonzero(comp_j.any(axis=0))
            if live.size == 0:
                continue
            a0, a1 = int(group[live[0]][0]), int(group[live[-1]][-1]) + 1
            s = _tile_scores(prob, ops, np.arange(a0, a1), cols, opt.accumulate)
            sl = slice(a0 - r0, a1 - r0)
            sub = OnlineState(state.m[:, :, sl], state.l[:, :, sl], state.acc[:, :, sl])
            new = _update(sub, s, ops.v[:, :, cols], ops.v_scale[:, :, cols[0]], opt)
            keep = comp_j[:, tile_of_row[sl]]
            if not keep.all():
                new = sub.where(keep[:, None, :], new)
            state.m[:, :, sl], state.l[:, :, sl], state.acc[:, :, sl] = new.m, new.l, new.acc
        out[:, :, r0:r1], lse[:, :, r0:r1] = _finalize(state, opt.p_offset)
    return out, lse


# --------------------------------------------------------------------------- public
@renamed_arguments({"fp8_format": "fmt"})
@mask_keywords
def flash_v3(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    *,
    block: tuple[int, int] = DEFAULT_BLOCK,
    fp8: bool = False,
    block_quantization: bool = True,
    incoherent: bool = False,
    seed: int = 0,
    fmt: str = "e4m3",
    accumulate: object = "exact",
    p_offset: Optional[int] = None,
    p_rowsum: str = "unquantized",
    mask: Optional[MaskOptions] = None,
    return_lse: bool = True,
    implementation: str = "fast",
) -> AttentionResult:
    """FlashAttention-3 forward (Shah et al. 2024, section 3.3; the exact arithmetic is
    in the module docstring).

    Args:
        q, k, v: as :func:`refimpl.attention.attention`; inputs are float32 values
            (FP16/BF16 data as float32 arrays).
        block: ``(B_r, B_c)`` (default 128 x 64, FA3's FP16 forward tile for d = 128);
            also the FP8 quantisation tiles.
        fp8: the FP8 path (default False: FP16/BF16, the same bytes as ``flash_v2``).
        block_quantization: FP8 scales per ``B_r x d`` / ``B_c x d`` tile (default True)
            or one per tensor (False, the baseline).
        incoherent: multiply Q and K by the random orthogonal ``M`` first (default False).
        seed: the sign diagonal of ``M`` (default 0).
        fmt: the FP8 format of Q, K, V and P, ``"e4m3"`` (default, FA3) or
            ``"e5m2"`` (the old spelling ``fp8_format=`` still works, with a
            DeprecationWarning, until ``refimpl.deprecation.REMOVED_IN``).
        accumulate: FP32 accumulation model of both GEMMs: ``"exact"`` (default,
            correctly rounded), a BlockFMA preset (``"H100-FP8"``, ``"H100-FP16"``), or
            any name or model :func:`refimpl.matmul.matmul` accepts.
        p_offset: binades P is shifted by before quantisation (0..8; default
            ``FA3_P_OFFSET`` = 8 with ``fp8``, 0 without; P then lies in
            ``[0, 2^p_offset]``, which must fit the format).
        p_rowsum: ``"unquantized"`` (default: l adds the FP32 P, as the kernel does) or
            ``"quantized"`` (l adds the P that enters the GEMM).
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: also return the natural LSE (default True).
        implementation: ``"fast"`` (default) or ``"plain"``; same bytes.
    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, lse, stats)`` or, without
        ``return_lse``, ``(out, stats)``: out (..., Hq, Sq, Dv) float32, lse
        (..., Hq, Sq) float32, :class:`ScheduleStats`.
    Raises:
        TypeError: a wrong type (an option, ``mask``, a flag).
        ValueError: bad inputs or option values (which one, what was expected).
    """
    fp8 = check_bool("fp8", fp8)
    block_quantization = check_bool("block_quantization", block_quantization)
    incoherent = check_bool("incoherent", incoherent)
    return_lse = check_bool("return_lse", return_lse)
    br, bc = check_block(block)
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    if p_rowsum not in P_ROWSUMS:
        raise ValueError(f"p_rowsum must be one of {P_ROWSUMS}, got {p_rowsum!r}")
    fp8_fmt = formats.get(fmt)
    if fp8_fmt.name not in ("e4m3", "e5m2"):
        raise ValueError(f"fmt must be 'e4m3' or 'e5m2', got {fmt!r}")
    if p_offset is None:
        p_offset = FA3_P_OFFSET if fp8 else 0
    if (isinstance(p_offset, bool) or not isinstance(p_offset, (int, np.integer))
            or not 0 <= p_offset <= 8):
        raise ValueError(f"p_offset must be an integer in [0, 8] (P <= 2^p_offset <= 256 "
                         f"fits E4M3 and E5M2), got {p_offset!r}")
    seed = _seed(seed)
    model = resolve_accumulation(accumulate)
    prob = prepare(q, k, v, mask=mask)
    if incoherent:
        _hadamard_size(prob.shape[5])
    shares_v2 = (not fp8 and not incoherent and p_offset == 0 and isinstance(accumulate, str)
                 and accumulate == "exact")
    if shares_v2:
        out, lse, st = flash_v2_core(prob, (br, bc), implementation=implementation)
    else:
        sq, sk = prob.shape[3], prob.shape[4]
        qtiles, ktiles = tile_ranges(sq, br), tile_ranges(sk, bc)
        comp = computed_tiles(prob, qtiles, ktiles)
        ops = _operands(prob, br, bc, fp8, block_quantization, incoherent, seed, fp8_fmt.name)
        opt = _Step(fp8, fp8_fmt.name, int(p_offset), p_rowsum, model)
        if implementation == "plain":
            out, lse = _plain(prob, ops, qtiles, ktiles, comp, opt)
        else:
            out, lse = _fast(prob, ops, qtiles, ktiles, comp, opt, br)
        st = forward_stats(prob, qtiles, ktiles, comp, min(br, sq), min(bc, sk))
    return AttentionResult(prob.restore(out), prob.restore(lse) if return_lse else None, st)


# --------------------------------------------------------------------------- Table 3
@dataclass(frozen=True)
class Table3Result:
    """RMSE of each configuration against the float64 reference (``rmse`` maps a name
    of ``TABLE3_PAPER`` to the oracle's figure) and the experiment's parameters."""

    rmse: dict[str, float]
    seq_len: int
    head_dim: int
    heads: int
    seed: int
    block: tuple[int, int]

    @property
    def ratio(self) -> float:
        """Per-tensor FP8 RMSE over block + incoherent FP8 RMSE (the paper: 2.6)."""
        return self.rmse["fp8_per_tensor"] / self.rmse["fp8_block_incoherent"]

    def rows(self) -> list[tuple[str, float, float]]:
        """``(configuration, oracle RMSE, paper RMSE)`` in the paper's order."""
        return [(name, self.rmse[name], TABLE3_PAPER[name]) for name in TABLE3_PAPER]


def table3_experiment(
    seq_len: int = 4096,
    head_dim: int = 128,
    seed: int = 0,
    *,
    heads: int = 1,
    block: tuple[int, int] = DEFAULT_BLOCK,
    accumulate: object = "exact",
) -> Table3Result:
    """FlashAttention-3 Table 3 (section 4.3): RMSE against a float64 reference.

    Inputs: :func:`outlier_inputs` (Q, K, V of shape (heads, seq_len, head_dim), seed
    ``seed``). Reference: :func:`refimpl.attention.attention` with
    ``precision="float64"`` on those float32 inputs. Configurations:

    - ``fp16_standard``: :func:`refimpl.attention.naive_attention` in FP16 (every
      tensor operation rounded to FP16; the paper's "baseline FP16");
    - ``fp16_flash``: inputs rounded to FP16, :func:`flash_v3` with ``fp8=False``
      (FP32 softmax and accumulators), output rounded to FP16;
    - ``fp8_per_tensor``: ``fp8=True, block_quantization=False`` (the FP8 baseline; the
      paper's baseline is a standard attention with per-tensor scaling);
    - ``fp8_per_tensor_incoherent``: the same with ``incoherent=True`` (the paper's
      "no block quantisation" ablation);
    - ``fp8_block``: block quantisation, no incoherent processing (the paper's "no
      incoherent processing" ablation);
    - ``fp8_block_incoherent``: FA3 FP8 (block quantisation + incoherent processing).

    RMSE: ``sqrt(mean((O - O_ref)^2))`` over all outputs
    (:func:`refimpl.scaling.quantization_error`, correctly rounded sums).

    The default size (one head, N = 4096, d = 128; about half a minute) is one the
    paper's figures are close to; the FP8 errors come from rare outliers, so they vary
    from seed to seed and grow with N (the paper does not state its sizes).
    """
    from refimpl.attention.reference import attention, naive_attention
    from refimpl.scaling import quantization_error

    for name, val in (("seq_len", seq_len), ("head_dim", head_dim), ("heads", heads)):
        check_positive_int(name, val)
    q, k, v = outlier_inputs((heads, seq_len, head_dim), seed)
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                    precision="float64")
    err = lambda out: quantization_error(ref, out).rmse  # noqa: E731
    rmse: dict[str, float] = {}
    q16, k16, v16 = (formats.round_to(x, "fp16").astype(np.float32) for x in (q, k, v))
    rmse["fp16_standard"] = err(naive_attention(q16, k16, v16, dtype="fp16"))
    o16, _ = flash_v3(q16, k16, v16, block=block, return_lse=False)
    rmse["fp16_flash"] = err(formats.round_to(o16, "fp16"))
    configs = {
        "fp8_per_tensor": (False, False),
        "fp8_per_tensor_incoherent": (False, True),
        "fp8_block": (True, False),
        "fp8_block_incoherent": (True, True),
    }
    for name, (blockq, inc) in configs.items():
        out, _ = flash_v3(q, k, v, block=block, fp8=True, block_quantization=blockq,
                          incoherent=inc, seed=seed, accumulate=accumulate,
                          return_lse=False)
        rmse[name] = err(out)
    return Table3Result(rmse, int(seq_len), int(head_dim), int(heads), int(seed),
                        (int(block[0]), int(block[1])))
