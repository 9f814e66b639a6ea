"""The gallery's FlashAttention-3-style forward (nvcc's PTX of hardware/simt/gallery/
fa3_forward.cu, sm_90a), run by the interpreter with every sanitizer tool on (racecheck,
synccheck, initcheck, memcheck raising).

References:

- a NumPy model of the kernel's own algorithm, written here from the .cu: the same tile
  order (K/V blocks of 64 keys in order, per 64-row Q tile), each wgmma.mma_async as
  refimpl.matmul's tensor-core preset of the launch GPU (``H100-FP16`` m64n64k16 steps,
  ``H100-E4M3`` m64n64k32 steps, chained through the accumulator, the first S step without
  one: scale-d 0), the softmax's float32 operations one rounding each (``fmaf`` exactly,
  with an error-free transformation), ``ex2.approx.ftz.f32`` as the interpreter documents
  it (2^x rounded to the nearest float32; the hardware's is within 2 ulp of 2^x, so this
  part of the model is the interpreter's, not the GPU's: the test also asserts that no
  value of 2^x lies within 2^-50 relative (four float64 ulps) of a float32 rounding
  boundary, so that the float64 exp2 used here cannot round differently), P rounded to
  f16 or e4m3 (nearest even, satfinite), each thread's partial row sums in the order of
  its accumulator elements and the quad's sum at the end; the outputs must agree bit for
  bit;
- refimpl.attention: the exact reference attention, within flash-attention's tolerance
  rule (twice the error of the naive FP16 computation; for FP8, of refimpl.attention's
  FA3 FP8 schedule on the same inputs).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from hardware.simt import GlobalMemory, gallery, load_ptx
from hardware.simt.errors import DeadlockError, ExecutionError
from hardware.simt.sanitizer import TOOL_ERRORS
from hardware.simt.tensormap import encode_tiled
from refimpl import formats
from refimpl import matmul as mm
from refimpl.attention import attention, flash_v3, naive_attention, within_naive_tolerance

D = 64
LOG2E = np.float32(1.4426950408889634)


# ------------------------------------------------------------------ the launch


def launch(q: np.ndarray, k: np.ndarray, v: np.ndarray, fp8: bool, c: np.float32,
           gpu: str = "H100", module=None, vtrans: bool = False):
    """q (H, Sq, 64), k and v (H, Sk, 64): float16 arrays, or e4m3 codes (uint8);
    ``vtrans``: the e4m3 kernel that transposes V itself (V passed as it is)."""
    h, sq, _ = q.shape
    sk = k.shape[1]
    mem = GlobalMemory()
    vin = np.ascontiguousarray(v.transpose(0, 2, 1)) if fp8 and not vtrans else v
    pq, pk, pv = mem.to_device(q), mem.to_device(k), mem.to_device(vin)
    po = mem.calloc(h * sq * D * 2)
    dt, sw, eb = ("uint8", "64B", 1) if fp8 else ("float16", "128B", 2)
    mq = encode_tiled(dt, 2, pq, [D, h * sq], [D * eb], [64, 128], [1, 1], swizzle=sw)
    mk = encode_tiled(dt, 2, pk, [D, h * sk], [D * eb], [64, 64], [1, 1], swizzle=sw)
    if vtrans:    # V as it is, unswizzled: the producer warpgroup transposes it
        mv = encode_tiled(dt, 2, pv, [D, h * sk], [D], [64, 64], [1, 1])
    elif fp8:     # V^T: (H * 64) rows of Sk keys
        mv = encode_tiled(dt, 2, pv, [sk, h * D], [sk * eb], [64, 64], [1, 1], swizzle=sw)
    else:
        mv = encode_tiled(dt, 2, pv, [D, h * sk], [D * eb], [64, 64], [1, 1], swizzle=sw)
    name = ("fa3_forward_e4m3_vtrans" if vtrans else "fa3_forward_e4m3" if fp8 else
            "fa3_forward_f16")
    st = (module or gallery.load("fa3_forward")).launch(
        name, (sq // 128, h), 384, [mq, mk, mv, po, sq, sk, float(c)], mem,
        dynamic_shared=(8 if vtrans else 6) * 64 * 64 * eb + 1024, gpu=gpu)
    return mem.from_device(po, np.float16, (h, sq, D)), st


# ------------------------------------------------------------------ the model


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32)


def fma32(a, b, c) -> np.ndarray:
    """fl32(a b + c), one rounding: a b is exact in float64 (24 + 24 bits); the float64
    sum s and its error e (TwoSum) give the exact value s + e, and s can round to float32
    differently from s + e only when s is a float32 midpoint, which e then decides."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    p = a * b
    s = p + c
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    r = s.astype(np.float32)
    lo = np.nextafter(r, np.float32(-np.inf))
    hi = np.nextafter(r, np.float32(np.inf))
    mid_lo = (r.astype(np.float64) + lo.astype(np.float64)) / 2
    mid_hi = (r.astype(np.float64) + hi.astype(np.float64)) / 2
    r = np.where((s == mid_lo) & (e < 0), lo, r)
    r = np.where((s == mid_hi) & (e > 0), hi, r)
    return r


def ex2(x: np.ndarray) -> np.ndarray:
    """ex2.approx.ftz.f32 as the interpreter models it: 2^x rounded to nearest float32,
    subnormal inputs and results flushed to zero."""
    x = np.asarray(x, np.float32)
    x = np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x)
    y = np.exp2(x.astype(np.float64))
    r = y.astype(np.float32)
    # a float32 midpoint next to y would let a float64 exp2 error of an ulp round the
    # other way: assert there is none (then this is the correctly rounded 2^x)
    fin = np.isfinite(y) & (y > 0)
    up = np.nextafter(r, np.float32(np.inf)).astype(np.float64)
    dn = np.nextafter(r, np.float32(-np.inf)).astype(np.float64)
    gap = np.minimum(np.abs(y - (r + up) / 2), np.abs(y - (r + dn) / 2))
    assert (gap[fin] > y[fin] * 2.0**-50).all()
    return np.where(r < np.finfo(np.float32).tiny, np.float32(0), r)


def values(x: np.ndarray, fp8: bool) -> np.ndarray:
    if fp8:
        return formats.decode(x, "e4m3").astype(np.float32)
    return x.astype(np.float32)


def chained(a: np.ndarray, b: np.ndarray, acc, ks: int, preset: str) -> np.ndarray:
    """A B by the kernel's wgmma steps of ks along K (acc None: the first without C)."""
    for k0 in range(0, a.shape[1], ks):
        acc = np.asarray(mm.matmul(a[:, k0:k0 + ks], b[k0:k0 + ks], acc, accumulate=preset,
                                   out_format="fp32"), np.float32)
    return acc


#: the columns of a row held by quad thread t, in the order of its accumulator
#: elements: (i / 4) = 0..7 and i % 2, column 8 (i / 4) + 2 t + i % 2
QUAD_COLUMNS = np.array([[8 * j + 2 * t + e for j in range(8) for e in range(2)]
                         for t in range(4)])


def model_tile(q: np.ndarray, k: np.ndarray, v: np.ndarray, c: np.float32,
               fp8: bool) -> np.ndarray:
    """One consumer warpgroup's 64 output rows (float16) from its Q tile (64 x 64) and
    the head's K, V (Sk x 64), float32 values of the inputs."""
    ks, preset = (32, "H100-E4M3") if fp8 else (16, "H100-FP16")
    offset = np.float32(8 if fp8 else 0)
    m = np.full(64, -np.inf, np.float32)
    l = np.zeros((64, 4), np.float32)                  # per row and quad thread
    o = np.zeros((64, D), np.float32)
    for j in range(k.shape[0] // 64):
        s = chained(q, k[64 * j:64 * j + 64].T.copy(), None, ks, preset)
        mx = np.maximum(m, s.max(axis=1))
        alpha = ex2(f32(f32(m.astype(np.float64) - mx) * np.float64(c)))
        mc = fma32(mx, c, -offset)
        p = ex2(fma32(s, c, -mc[:, None]))
        acc = f32(l * alpha[:, None].astype(np.float64))
        for col in range(16):
            acc = f32(acc + p[np.arange(64)[:, None], QUAD_COLUMNS[:, col]].astype(np.float64))
        l, m = acc, mx
        if fp8:
            pr = formats.decode(formats.encode(p, "e4m3", saturate=True), "e4m3")
        else:
            pr = p.astype(np.float16)
        o = f32(o * alpha[:, None].astype(np.float64))
        o = chained(pr.astype(np.float32), v[64 * j:64 * j + 64], o, ks, preset)
    tot = f32(f32(l[:, 0] + l[:, 1].astype(np.float64)) +
              f32(l[:, 2] + l[:, 3].astype(np.float64)).astype(np.float64))
    inv = f32(1.0 / tot.astype(np.float64))
    return f32(o * inv[:, None].astype(np.float64)).astype(np.float16)


def model(q, k, v, c, fp8):
    qv, kv, vv = (values(x, fp8) for x in (q, k, v))
    out = np.empty(q.shape, np.float16)
    for h in range(q.shape[0]):
        for r0 in range(0, q.shape[1], 64):
            out[h, r0:r0 + 64] = model_tile(qv[h, r0:r0 + 64], kv[h], vv[h], c, fp8)
    return out


# ------------------------------------------------------------------ inputs and counts


def inputs(h: int, sq: int, sk: int, fp8: bool, seed: int):
    rng = np.random.default_rng(seed)
    x = [rng.standard_normal((h, s, D)).astype(np.float32) for s in (sq, sk, sk)]
    if fp8:   # e4m3 codes whose largest magnitude is 448 (so one per-tensor scale is 1)
        x = [np.asarray(formats.encode(448 * a / np.abs(a).max(), "e4m3", saturate=True),
                        np.uint8) for a in x]
        return x
    return [a.astype(np.float16) for a in x]


def check_counts(st, h: int, sq: int, sk: int, fp8: bool) -> None:
    ctas, nkv, eb = (sq // 128) * h, sk // 64, 1 if fp8 else 2
    # per consumer warpgroup and K/V block: one S and one PV GEMM of 64 / k wgmmas each
    steps = 64 // (32 if fp8 else 16)
    assert st.wgmma_instructions == ctas * 2 * nkv * 2 * steps
    assert st.wgmma_flops == 4 * h * sq * sk * D
    # .param offsets 0, 128, 256: the Q map (one 128 x 64 box per CTA), K and V (one
    # 64 x 64 box per CTA and block)
    assert st.tma_load_bytes == {0: ctas * 128 * 64 * eb, 128: ctas * nkv * 64 * 64 * eb,
                                 256: ctas * nkv * 64 * 64 * eb}
    # every consumer thread waits on Q once and on each K and V block once; the producer
    # thread on the K and the V empty barrier of every block that reuses a stage
    waits = ctas * (256 * (1 + 2 * nkv) + 2 * max(0, nkv - 2))
    assert st.mbarrier_waits == st.mbarrier_waits_completed == waits
    assert not st.warnings


def scale(fp8: bool) -> float:
    # FP8 inputs reach 448: a smaller score scale keeps the logits moderate
    return 2.0**-16 if fp8 else 1.0 / np.sqrt(D)


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("fp8", [False, True], ids=["f16", "e4m3"])
@pytest.mark.parametrize("h, sq, sk", [(1, 128, 64), (1, 128, 256), (2, 256, 128)])
def test_fa3_forward_bit_exact(fp8, h, sq, sk):
    """One K/V block (no ring reuse, no overlap loop), four (the two-stage ring wraps:
    the producer waits on the empty barriers), two heads and two CTAs per head."""
    q, k, v = inputs(h, sq, sk, fp8, seed=h * sq + sk + fp8)
    c = np.float32(np.float32(scale(fp8)) * LOG2E)
    got, st = launch(q, k, v, fp8, c)
    want = model(q, k, v, c, fp8)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    check_counts(st, h, sq, sk, fp8)


@pytest.mark.parametrize("h, sq, sk", [(1, 128, 64), (2, 128, 256)])
def test_fa3_forward_e4m3_in_kernel_transpose(h, sq, sk):
    """fa3_forward_e4m3_vtrans: V loaded as it is and transposed by the producer
    warpgroup (generic loads and 16-byte stores into the 64-byte-swizzled K-major tile,
    fence.proxy.async, an mbarrier arrival of its 128 threads): the model's bits, the
    same as the kernel fed V^T."""
    q, k, v = inputs(h, sq, sk, True, seed=h + sk)
    c = np.float32(np.float32(scale(True)) * LOG2E)
    got, st = launch(q, k, v, True, c, vtrans=True)
    assert np.array_equal(got.view(np.uint16), model(q, k, v, c, True).view(np.uint16))
    ctas, nkv = (sq // 128) * h, sk // 64
    assert st.wgmma_instructions == ctas * 2 * nkv * 2 * 2
    assert st.tma_load_bytes == {0: ctas * 128 * 64, 128: ctas * nkv * 4096,
                                 256: ctas * nkv * 4096}
    # the consumers as before; thread 0 on the K empty barriers; the producer's 128
    # threads on every raw V tile and on the V^T empty barrier of every reused stage.
    # Polls that return false (lanes of a warp waiting on divergent paths, which are
    # not suspended) come on top
    done = ctas * (256 * (1 + 2 * nkv) + max(0, nkv - 2) + 128 * nkv +
                   128 * max(0, nkv - 2))
    assert st.mbarrier_waits_completed == done <= st.mbarrier_waits
    assert not st.warnings


def test_fa3_transpose_without_the_proxy_fence_is_a_race():
    """The producer's V^T stores read by the consumers' wgmma (the async proxy) with no
    fence.proxy.async after them: a generic-to-async race."""
    src = gallery.source("fa3_forward")
    entry = src.index(".entry fa3_forward_e4m3_vtrans")
    fences = [m.start() for m in re.finditer(r"fence\.proxy\.async\.shared::cta;", src)
              if m.start() > entry]
    assert len(fences) == 2                # before the raw TMA load, after the transpose
    bad = src[:fences[1]] + src[fences[1]:].replace("fence.proxy.async.shared::cta;", "", 1)
    with pytest.raises(TOOL_ERRORS["racecheck"], match="generic and the async proxy"):
        run_variant(bad, fp8=True, vtrans=True)


def test_fa3_forward_f16_within_reference_bounds():
    q, k, v = inputs(1, 128, 256, False, seed=3)
    c = np.float32(np.float32(scale(False)) * LOG2E)
    got, _ = launch(q, k, v, False, c)
    qv, kv, vv = (a.astype(np.float32) for a in (q, k, v))
    ref = attention(qv, kv, vv, precision="float64")
    naive = naive_attention(qv, kv, vv, dtype="fp16")
    assert within_naive_tolerance(got.astype(np.float32), ref, naive)
    # and the model is no pretence: the exact rounded reference differs in the bits
    assert not np.array_equal(got, np.asarray(ref, np.float32).astype(np.float16))


def test_fa3_forward_e4m3_within_reference_bounds():
    """Against refimpl.attention's FA3 FP8 schedule (per-tensor scales, which are 1 for
    these inputs, P shifted by 8 binades as here): at most twice its error."""
    q, k, v = inputs(1, 128, 256, True, seed=4)
    sc = scale(True)
    c = np.float32(np.float32(sc) * LOG2E)
    got, _ = launch(q, k, v, True, c)
    qv, kv, vv = (values(a, True) for a in (q, k, v))
    ref = attention(qv, kv, vv, scale=sc, precision="float64")
    fa3, _, _ = flash_v3(qv, kv, vv, scale=sc, fp8=True, block_quantization=False)
    assert within_naive_tolerance(got.astype(np.float32), ref, fa3)
    err = np.abs(got.astype(np.float64) - ref).max()
    assert 1e-3 < err < 0.1 * np.abs(ref).max()     # e4m3 P: visible, bounded


def test_fa3_forward_h200():
    """The H200 has the H100's tensor cores (the same presets): the same bits."""
    q, k, v = inputs(1, 128, 128, False, seed=9)
    c = np.float32(np.float32(scale(False)) * LOG2E)
    a, _ = launch(q, k, v, False, c, gpu="H100")
    b, _ = launch(q, k, v, False, c, gpu="H200")
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


# ------------------------------------------------------------------ broken variants


def run_variant(ptx: str, fp8: bool = False, vtrans: bool = False):
    q, k, v = inputs(1, 128, 256, fp8, seed=11)
    c = np.float32(np.float32(scale(fp8)) * LOG2E)
    return launch(q, k, v, fp8, c, module=load_ptx(ptx), vtrans=vtrans)


#: the loop's "wgmma.wait_group 0" and the vempty arrival after it
_RELEASE = re.compile(r"(\twgmma.wait_group.sync.aligned 0;\n\t// end inline asm\n)"
                      r"((?:\t(?:mov|add)\S*\s.*\n)*\t// begin inline asm\n"
                      r"\tmbarrier.arrive.shared::cta.b64 _, \[%r\d+\];\n)")


@pytest.mark.parametrize("entry, fp8, vtrans, write", [
    ("fa3_forward_f16", False, False, ("tensor copy", "cp.async.bulk.tensor")),
    ("fa3_forward_e4m3", True, False, ("tensor copy", "cp.async.bulk.tensor")),
    ("fa3_forward_e4m3_vtrans", True, True, ("shared-memory store", "st.shared"))])
def test_fa3_stage_released_before_the_wgmma_wait_is_a_race(entry, fp8, vtrans, write):
    """The V stage handed back to the producer before the wgmma.wait_group that
    completes the PV GEMM reading it: the producer's next write of the stage (its TMA
    load, or with vtrans its transposing stores) is not ordered after the wgmma's operand
    read (the result is the same: the interpreter computes the product at issue;
    racecheck reports the hazard)."""
    src = gallery.source("fa3_forward")
    start = src.index(f".entry {entry}(")
    m = [x for x in _RELEASE.finditer(src) if x.start() > start][1]   # in the loop
    bad = (src[:m.start()] + m.group(2) + "\t// end inline asm\n\t// begin inline asm\n"
           "\twgmma.wait_group.sync.aligned 0;\n" + src[m.end():])
    with pytest.raises(TOOL_ERRORS["racecheck"],
                       match=f"{write[0]} over a wgmma.mma_async operand") as e:
        run_variant(bad, fp8, vtrans)
    assert "wgmma.mma_async" in e.value.report.other.text
    assert write[1] in e.value.report.access.text


def test_fa3_softmax_before_its_gemm_completes_is_a_race():
    """wait_group 2 instead of 1: the softmax reads S while its wgmma is in flight."""
    src = gallery.source("fa3_forward").replace("wgmma.wait_group.sync.aligned 1;",
                                                "wgmma.wait_group.sync.aligned 2;")
    with pytest.raises(ExecutionError, match="race: read of register .* the accumulator"):
        run_variant(src)


def test_fa3_missing_ping_pong_arrival_is_a_deadlock():
    """Without warpgroup 1's bar.arrive on barrier 2, warpgroup 2 waits forever; the
    producer then waits for stages never released."""
    src = gallery.source("fa3_forward").replace("bar.arrive 2, 256;", "")
    with pytest.raises(DeadlockError, match="also wait at bar.sync"):
        run_variant(src)


@pytest.mark.parametrize("announced, outstanding", [
    (16400, "16 tx bytes outstanding"),
    (16368, r"tx-count -16 \(copies completed 16 bytes more than expect_tx announced\)")])
def test_fa3_wrong_expect_tx_is_a_deadlock(announced, outstanding):
    """The Q barrier's expect_tx off by 16 bytes (the box is 16384): its phase never
    completes, and the deadlock names the barrier's tx-count."""
    src = gallery.source("fa3_forward")
    bad, n = re.subn(r"(mov.u32 \t%r\d+, )16384;", rf"\g<1>{announced};", src, count=1)
    assert n == 1
    with pytest.raises(DeadlockError, match=outstanding):
        run_variant(bad)
