"""Tensor maps built by the kernel itself: tensormap.replace of every field of a tiled map
on 128 zeroed bytes of shared memory (CUDA C++ Programming Guide, "Device-side Encoding
and Modification of a Tensor Map": on sm_90a a zeroed buffer may be the initial value),
published with tensormap.cp_fenceproxy and used by cp.async.bulk.tensor; new values as
PTX ISA 9.7.9.28 defines them (rank one less than the rank, elemtype in the ISA's own
numbering); unset fields, values outside a field's range and bytes that are not a map
are errors naming the thread. Expected boxes are computed with NumPy indexing."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import ExecutionError

from test_simt_tma import HEAD, ptxas_ok


def build(elemtype: int = 2, box1: bool = True, estr0: str = "1", swizzle: int = 0,
          garbage: bool = False) -> str:
    """A one-thread builder: zero the map (or write garbage), replace every field, publish
    it, load the box (box0 x 8 elements at the origin) and copy the tile out."""
    zero = "0x12345678" if garbage else "0"
    box1_line = ("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r4], 1, %r21;"
                 if box1 else "")
    return HEAD + f""".visible .entry k(.param .u64 data, .param .u64 scratch,
                  .param .u64 out, .param .u32 rows, .param .u32 box0,
                  .param .u64 stride, .param .u32 txbytes)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 desc[128];
    .shared .align 128 .b8 tile[2048];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [scratch];
    ld.param.u64 %rd3, [out];
    ld.param.u32 %r20, [rows];
    ld.param.u32 %r22, [box0];
    ld.param.u64 %rd9, [stride];
    ld.param.u32 %r23, [txbytes];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    mov.u32 %r4, desc;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    mov.u32 %r10, 0;
    mov.u32 %r11, {zero};
$L_zero:
    add.u32 %r15, %r4, %r10;
    st.shared.u32 [%r15], %r11;
    add.u32 %r10, %r10, 4;
    setp.lt.u32 %p2, %r10, 128;
    @%p2 bra $L_zero;
    mov.u32 %r21, 8;
    mov.u32 %r24, 16;
    mov.u32 %r25, {estr0};
    tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r4], %rd1;
    tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r4], 1;
    tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r4], 0, %r22;
    {box1_line}
    tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r4], 0, %r24;
    tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r4], 1, %r20;
    tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r4], 0, %rd9;
    tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r4], 0, %r25;
    tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r4], 1, %r25;
    tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r4], {elemtype};
    tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%r4], 0;
    tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r4], {swizzle};
    tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%r4], 0;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [%r4], 128;
    fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], %r23;
    mov.u32 %r17, 0;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {{%r17, %r17}}], [%r2];
$L_wait:
    bar.sync 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], 0;
    @!%p3 bra $L_spin;
    shl.b32 %r5, %r1, 2;
    add.u32 %r6, %r3, %r5;
    ld.shared.u32 %r7, [%r6];
    mul.wide.u32 %rd7, %r1, 4;
    add.u64 %rd8, %rd3, %rd7;
    st.global.u32 [%rd8], %r7;
    ret;
}}
"""


def _run(src: str, x: np.ndarray, rows: int, box0: int, txbytes: int):
    """Launch 128 threads on ``x`` (16 elements a row, ``rows`` rows); the first 512
    bytes of the tile come back as 128 words."""
    mem = GlobalMemory()
    a = mem.to_device(x)
    scratch = mem.calloc(256)
    scratch += (-scratch) % 128
    out = mem.calloc(512)
    load_ptx(src).launch("k", 1, 128, [a, scratch, out, rows, box0, x.strides[0], txbytes],
                         mem)
    return mem.from_device(out, np.uint8, 512)


def test_a_map_built_from_zeroed_bytes_loads_its_box():
    src = build(elemtype=2)                          # ISA 2: .u32
    ptxas_ok(src)
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16) * 7 + 3
    got = _run(src, x, rows=5, box0=16, txbytes=16 * 8 * 4).view(np.uint32).reshape(8, 16)
    want = np.zeros((8, 16), np.uint32)
    want[:5] = x[:5]                                 # rows past the tensor's 5 read zeros
    assert (got == want).all()


def test_elemtype_uses_the_isas_numbering():
    # the ISA's 9 is .f64 (8 bytes); the driver's 9 would be bf16 (2 bytes): an 8 x 8 box
    # of 8-byte elements is 512 bytes, the tile below is exactly rows 0-7, columns 0-7
    src = build(elemtype=9)
    ptxas_ok(src)
    x = np.arange(16 * 16, dtype=np.float64).reshape(16, 16) + 0.5
    got = _run(src, x, rows=16, box0=8, txbytes=8 * 8 * 8).view(np.float64).reshape(8, 8)
    assert (got == x[:8, :8]).all()


@pytest.mark.parametrize("kw,match", [
    (dict(box1=False), r"thread \(0, 0, 0\).*box_dim 1 of its rank 2 was never set"),
    (dict(estr0="9"), r"thread \(0, 0, 0\), line \d+.*element_stride: element_stride 9 "
                      r"outside 1\.\.8"),
    (dict(elemtype=13), r"elemtype 13 is not modelled"),
    (dict(swizzle=4), r"swizzle_mode 4 is not modelled"),
    (dict(garbage=True), r"neither a tensor map nor zeroed"),
])
def test_a_bad_device_built_map_is_an_error(kw, match):
    src = build(**kw)
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16)
    with pytest.raises(ExecutionError, match=match):
        _run(src, x, rows=16, box0=16, txbytes=16 * 8 * 4)


def test_a_device_built_map_is_checked_as_the_host_api_checks():
    # box 4 x 8 of 4-byte elements: 16 bytes inner, fine; box 3: 12 bytes, refused as
    # encode_tiled refuses it
    src = build(elemtype=2)
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16)
    with pytest.raises(ExecutionError, match=r"invalid tensor map: box_dim\[0\] \* element "
                                             r"size = 12 bytes is not a multiple of 16"):
        _run(src, x, rows=16, box0=3, txbytes=3 * 8 * 4)


GLOBAL_BUILD = HEAD + """.visible .entry k(.param .u64 data, .param .u64 map, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<30>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 tile[512];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [map];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    // the map is built in place in global memory (zeroed by the host): .global replaces
    mov.u32 %r20, 16;
    mov.u32 %r21, 8;
    mov.u32 %r25, 1;
    mov.u64 %rd9, 64;
    tensormap.replace.tile.global_address.global.b1024.b64 [%rd2], %rd1;
    tensormap.replace.tile.rank.global.b1024.b32 [%rd2], 1;
    tensormap.replace.tile.box_dim.global.b1024.b32 [%rd2], 0, %r20;
    tensormap.replace.tile.box_dim.global.b1024.b32 [%rd2], 1, %r21;
    tensormap.replace.tile.global_dim.global.b1024.b32 [%rd2], 0, %r20;
    tensormap.replace.tile.global_dim.global.b1024.b32 [%rd2], 1, %r20;
    tensormap.replace.tile.global_stride.global.b1024.b64 [%rd2], 0, %rd9;
    tensormap.replace.tile.element_stride.global.b1024.b32 [%rd2], 0, %r25;
    tensormap.replace.tile.element_stride.global.b1024.b32 [%rd2], 1, %r25;
    tensormap.replace.tile.elemtype.global.b1024.b32 [%rd2], 2;
    fence.proxy.tensormap::generic.release.gpu;
    fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
    mov.u32 %r17, 0;
    mov.u32 %r18, 8;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r17, %r18}], [%r2];
$L_wait:
    bar.sync 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], 0;
    @!%p3 bra $L_spin;
    shl.b32 %r5, %r1, 2;
    add.u32 %r6, %r3, %r5;
    ld.shared.u32 %r7, [%r6];
    mul.wide.u32 %rd7, %r1, 4;
    add.u64 %rd8, %rd3, %rd7;
    st.global.u32 [%rd8], %r7;
    ret;
}
"""


def test_a_map_built_in_global_memory_in_place():
    """.global replaces on zeroed global bytes (fields not replaced stay 0: no swizzle,
    no interleave, zero fill); the box at row 8 is rows 8-15."""
    ptxas_ok(GLOBAL_BUILD)
    mem = GlobalMemory()
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16) * 5 + 1
    a = mem.to_device(x)
    raw = mem.calloc(256)
    mp = raw + (-raw) % 128
    out = mem.calloc(512)
    load_ptx(GLOBAL_BUILD).launch("k", 1, 128, [a, mp, out], mem)
    got = mem.from_device(out, np.uint32, 128).reshape(8, 16)
    assert (got == x[8:16]).all()
