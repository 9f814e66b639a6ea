"""LaunchStats of the asynchronous copies and waits (hardware.simt.stats): TMA bytes per
tensor map (by the map's address), bulk-copy bytes, mbarrier waits executed and those
that completed. The expected figures are counted by hand from the kernel's text."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.tensormap import encode_tiled

PTXAS = shutil.which("ptxas")

# 64 threads. Thread 0 loads a 64-element fp32 row through `map` (a kernel parameter:
# .param address 0) and another through the map at `gmap` (global memory), both
# completing on `full`; every thread then tests phase 0 of `never` (nothing arrives
# there: false once the others cannot run), then spins on `full` (the copies land when
# the barrier is first tested: true at once); thread 0 stores the row back through
# `omap` (.param address 128) and copies 128 bytes of it with cp.async.bulk.
SRC = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 map[128], .param .align 64 .b8 omap[128],
                  .param .u64 gmap, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b32 tile[64];
    .shared .align 128 .b32 tile2[64];
    .shared .align 8 .b64 full;
    .shared .align 8 .b64 never;
    ld.param.u64 %rd3, [gmap];
    ld.param.u64 %rd4, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, full;
    mov.u32 %r3, never;
    mov.u32 %r4, tile;
    mov.u32 %r5, tile2;
    mov.u32 %r6, 0;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_sync;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mbarrier.init.shared::cta.b64 [%r3], 1;
    mov.b64 %rd1, map;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], [%rd1, {%r6}], [%r2];
    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r5], [%rd3, {%r6}], [%r2];
$L_sync:
    bar.sync 0;
    mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r3], 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], 0;
    @!%p3 bra $L_spin;
    @%p1 bra $L_end;
    mov.b64 %rd2, omap;
    cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd2, {%r6}], [%r4];
    cp.async.bulk.global.shared::cta.bulk_group [%rd4], [%r5], 128;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_end:
    ret;
}
"""


def test_tma_bytes_per_map_bulk_bytes_and_waits():
    if PTXAS is not None:
        r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=SRC,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    mem = GlobalMemory()
    x = np.arange(64, dtype=np.float32) + 0.5
    a, b = mem.to_device(x), mem.to_device(-x)
    y, out = mem.calloc(256), mem.calloc(128)
    enc = dict(dtype="float32", rank=1, global_dim=[64], global_strides=[],
               box_dim=[64], element_strides=[1])
    gm = mem.to_device(encode_tiled(global_address=b, **enc))
    st = load_ptx(SRC).launch("k", 1, 64, [encode_tiled(global_address=a, **enc),
                                          encode_tiled(global_address=y, **enc), gm, out],
                              mem)
    assert (mem.from_device(y, np.float32, 64) == x).all()
    assert (mem.from_device(out, np.float32, 32) == -x[:32]).all()
    assert st.tma_load_bytes == {0: 256, gm: 256}
    assert st.tma_store_bytes == {128: 256}
    assert st.tma_bytes == 768
    assert st.bulk_copy_bytes == 128
    assert st.mbarrier_waits == 2 * 64
    assert st.mbarrier_waits_completed == 64
    assert "TMA bytes 768" in st.summary()


def test_kernels_without_them_count_nothing():
    src = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""
    mem = GlobalMemory()
    out = mem.calloc(128)
    st = load_ptx(src).launch("k", 1, 32, [out], mem)
    assert (st.tma_load_bytes, st.tma_store_bytes, st.bulk_copy_bytes,
            st.mbarrier_waits, st.mbarrier_waits_completed) == ({}, {}, 0, 0, 0)
    assert "TMA bytes" not in st.summary()
