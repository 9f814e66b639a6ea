"""Bulk reductions from shared to global memory (cp.reduce.async.bulk and its tensor
form, PTX ISA 9.7.9.25.4.2 / 9.7.9.25.5.3): every element of the destination becomes
redOp(destination, source); expected values computed with NumPy integer arithmetic and
numpy.float16 (IEEE binary16; float32 intermediates round once more innocuously), the
PTX checked with ptxas."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import ExecutionError
from hardware.simt.tensormap import encode_tiled

from oracles import BFLOAT16, round_binary
from test_simt_tma import HEAD, ptxas_ok


def flat_kernel(qual: str, nbytes: int) -> str:
    """128 threads copy ``nbytes`` of source into shared memory; thread 0 reduces them
    into the destination with ``cp.reduce.async.bulk...{qual}`` and waits for its group."""
    return HEAD + f""".visible .entry k(.param .u64 dst, .param .u64 src)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 buf[{nbytes}];
    ld.param.u64 %rd1, [dst];
    ld.param.u64 %rd2, [src];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    setp.ge.u32 %p1, %r3, {nbytes};
    @%p1 bra $L_sync;
    cvt.u64.u32 %rd3, %r3;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.u32 %r4, [%rd4];
    add.u32 %r5, %r2, %r3;
    st.shared.u32 [%r5], %r4;
$L_sync:
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $L_done;
    fence.proxy.async.shared::cta;
    cp.reduce.async.bulk.global.shared::cta.bulk_group{qual} [%rd1], [%r2], {nbytes};
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_done:
    ret;
}}
"""


def _run(qual: str, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    src_ptx = flat_kernel(qual, src.nbytes)
    ptxas_ok(src_ptx)
    mem = GlobalMemory()
    pd, ps = mem.to_device(dst), mem.to_device(src)
    load_ptx(src_ptx).launch("k", 1, 128, [pd, ps], mem)
    return mem.from_device(pd, dst.dtype, dst.shape)


rng = np.random.default_rng(3)
U32 = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
V32 = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
U32[:4] = [0, 5, 2**32 - 1, 7]
V32[:4] = [3, 5, 1, 2]


@pytest.mark.parametrize("qual,want", [
    (".add.u32", lambda d, s: d + s),                          # wraps modulo 2^32
    (".and.b32", lambda d, s: d & s),
    (".or.b32", lambda d, s: d | s),
    (".xor.b32", lambda d, s: d ^ s),
    (".min.u32", np.minimum),
    (".max.u32", np.maximum),
    (".min.s32", lambda d, s: np.minimum(d.view(np.int32), s.view(np.int32)).view(np.uint32)),
    (".max.s32", lambda d, s: np.maximum(d.view(np.int32), s.view(np.int32)).view(np.uint32)),
    (".inc.u32", lambda d, s: np.where(d >= s, 0, d + 1).astype(np.uint32)),
    (".dec.u32", lambda d, s: np.where((d == 0) | (d > s), s, d - 1).astype(np.uint32)),
])
def test_integer_reductions_32(qual, want):
    with np.errstate(over="ignore"):
        expected = want(U32.copy(), V32.copy())
    assert np.array_equal(_run(qual, U32.copy(), V32.copy()), expected)


def test_add_f32_rounds_to_nearest_and_flushes_subnormals():
    """RN sums; a subnormal input counts as the zero of its sign and a subnormal result
    becomes the zero of its sign (PTX ISA 9.7.9.25.4.2: the current implementation
    flushes). Expected values by hand."""
    tiny = 2.0**-130                                   # a float32 subnormal
    cases = [  # (d, s, d + s as the reduction gives it)
        (1.0, 2.0**-24, 1.0),                          # a tie to even
        (tiny, tiny, 0.0),                             # both inputs flushed
        (2.0**-126, -2.0**-127, 2.0**-126),            # the subnormal addend flushed
        (-2.0**-126, 2.0**-127, -2.0**-126),
        (-0.0, tiny, 0.0),                             # -0 + +0 is +0 (round to nearest)
        (1.5 * 2.0**-126, -2.0**-126, 0.0),            # a subnormal result: +0
        (-1.5 * 2.0**-126, 2.0**-126, -0.0),           # ... of its sign: -0
        (3e38, 3e38, np.inf),                          # overflow
        (1.0, -1.0, 0.0),
    ] * 2
    d, s, want = (np.array([c[i] for c in cases], np.float32) for i in range(3))
    got = _run(".add.f32", np.resize(d, 32).view(np.uint32).copy(),
               np.resize(s, 32).view(np.uint32).copy())
    assert np.array_equal(got[:want.size], want.view(np.uint32))


def test_add_f64_keeps_subnormals():
    d = np.array([1.0, 2.0**-1070, 0.1, -1.0], np.float64)
    s = np.array([2.0**-53, 2.0**-1070, 0.2, 1.0], np.float64)
    got = _run(".add.f64", d.view(np.uint64).copy(), s.view(np.uint64).copy())
    assert np.array_equal(got, (d + s).view(np.uint64))


@pytest.mark.parametrize("qual,view,fn", [
    (".add.u64", np.uint64, lambda d, s: d + s),
    (".min.s64", np.int64, np.minimum),
    (".max.u64", np.uint64, np.maximum),
    (".xor.b64", np.uint64, lambda d, s: d ^ s),
])
def test_integer_reductions_64(qual, view, fn):
    d, s = U32.copy().view(np.uint64), V32.copy().view(np.uint64)
    with np.errstate(over="ignore"):
        expected = fn(d.view(view), s.view(view)).view(np.uint64)
    assert np.array_equal(_run(qual, d, s), expected)


def test_add_noftz_f16_rounds_once_and_keeps_subnormals():
    d = np.array([1.0, 2.0**-24, 65504.0, -1.0, 0.1, 2.0**-14, 1.0, 3.0] * 4, np.float16)
    s = np.array([2.0**-11, 2.0**-24, 65504.0, 1.0, 0.2, -2.0**-15, 2.0**-11 * 3, -0.0] * 4,
                 np.float16)
    got = _run(".add.noftz.f16", d.view(np.uint16).copy(), s.view(np.uint16).copy())
    with np.errstate(over="ignore"):
        want = (d + s).view(np.uint16)       # a tie to even, a subnormal sum, overflow
    assert np.array_equal(got, want)


def test_add_noftz_bf16():
    """Sums rounded once to bfloat16 (exact Fraction sums rounded by the tests' binary
    rounding oracle): a tie to even, a tie up, a subnormal addend far below, a zero."""
    d = np.array([1.0, 1.0, 3.0, -2.0] * 8, np.float32)
    s = np.array([2.0**-8, 2.0**-8 * 3, 2.0**-130, 2.0] * 8, np.float32)
    bits = lambda a: (a.view(np.uint32) >> 16).astype(np.uint16)   # exact: short values
    got = _run(".add.noftz.bf16", bits(d), bits(s))
    want = [float(round_binary(Fraction(float(x)) + Fraction(float(y)), *BFLOAT16))
            for x, y in zip(d, s)]
    want = bits(np.array(want, np.float32))
    assert np.array_equal(got, want)


TENSOR_REDUCE = HEAD + """.visible .entry k(.param .align 64 .b8 map[128], .param .u64 src,
                  .param .u32 c0, .param .u32 c1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 buf[512];
    ld.param.u64 %rd2, [src];
    ld.param.u32 %r8, [c0];
    ld.param.u32 %r9, [c1];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    cvt.u64.u32 %rd3, %r3;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.u32 %r4, [%rd4];
    add.u32 %r5, %r2, %r3;
    st.shared.u32 [%r5], %r4;
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $L_done;
    fence.proxy.async.shared::cta;
    mov.u64 %rd5, map;
    cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd5, {%r8, %r9}], [%r2];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_done:
    ret;
}
"""


@pytest.mark.parametrize("c0,c1", [(0, 0), (8, 12)])     # the second box is partly outside
def test_tensor_reduction_adds_the_in_bounds_box(c0, c1):
    ptxas_ok(TENSOR_REDUCE)
    mem = GlobalMemory()
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16) * 1000
    box = (np.arange(16 * 8, dtype=np.uint32) + 7).reshape(8, 16)   # 8 rows of 16
    px, pb = mem.to_device(x), mem.to_device(box)
    tmap = encode_tiled("uint32", 2, px, [16, 16], [64], [16, 8], [1, 1])
    load_ptx(TENSOR_REDUCE).launch("k", 1, 128, [tmap, pb, c0, c1], mem)
    got = mem.from_device(px, np.uint32, (16, 16))
    want = x.copy()
    rows = slice(c1, min(c1 + 8, 16))
    cols = slice(c0, 16)
    want[rows, cols] += box[:rows.stop - rows.start, :cols.stop - cols.start]
    assert np.array_equal(got, want)


def test_tensor_reduction_through_a_float_map_is_refused():
    mem = GlobalMemory()
    x = np.zeros((16, 16), np.float32)
    px, pb = mem.to_device(x), mem.to_device(np.zeros(128, np.float32))
    tmap = encode_tiled("float32", 2, px, [16, 16], [64], [16, 8], [1, 1])
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\).*a tensor reduction "
                                             r"through a float32 map is not modelled"):
        load_ptx(TENSOR_REDUCE).launch("k", 1, 128, [tmap, pb, 0, 0], mem)


DSMEM_REDUCE = HEAD + """.visible .entry k(.param .u64 out)
{
    .reg .pred %p<8>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 cell[128];
    .shared .align 128 .b8 src[128];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, cell;
    mov.u32 %r4, src;
    mov.u32 %r5, bar;
    shl.b32 %r6, %r1, 2;
    // cell[i] = 100 rank + i, src[i] = 3 i + 1 + rank
    mad.lo.u32 %r7, %r2, 100, %r1;
    add.u32 %r8, %r3, %r6;
    st.shared.u32 [%r8], %r7;
    mad.lo.u32 %r9, %r1, 3, 1;
    add.u32 %r9, %r9, %r2;
    add.u32 %r10, %r4, %r6;
    st.shared.u32 [%r10], %r9;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_sync;
    mbarrier.init.shared::cta.b64 [%r5], 1;
$L_sync:
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    // CTA 0, thread 0 expects the bytes; CTA 1, thread 0 reduces its src into CTA 0's cell
    or.pred %p2, %p1, %p1;
    @%p2 bra $L_wait;
    setp.ne.u32 %p3, %r2, 0;
    @%p3 bra $L_send;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 128;
    bra $L_wait;
$L_send:
    mov.u32 %r11, 0;
    mapa.shared::cluster.u32 %r12, %r3, %r11;
    mapa.shared::cluster.u32 %r13, %r5, %r11;
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32 [%r12], [%r4], 128, [%r13];
$L_wait:
    setp.ne.u32 %p3, %r2, 0;
    @%p3 bra $L_end;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r5], 0;
    @!%p4 bra $L_spin;
    ld.shared.u32 %r14, [%r8];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r14;
$L_end:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    ret;
}
"""


def test_reduction_into_another_ctas_shared_memory_lands_on_its_mbarrier():
    ptxas_ok(DSMEM_REDUCE)
    mem = GlobalMemory()
    out = mem.calloc(4 * 32)
    load_ptx(DSMEM_REDUCE).launch("k", 2, 32, [out], mem, cluster=2)
    i = np.arange(32, dtype=np.uint32)
    assert np.array_equal(mem.from_device(out, np.uint32, 32), i + (3 * i + 1 + 1))
