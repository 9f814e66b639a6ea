"""cp.async.bulk (hardware.simt.tma): a producer warp feeding two consumer warps through
a two-stage mbarrier ring, bulk stores to global memory, multicast into the CTAs of a
cluster, races on pending bytes. Expected values are NumPy sums of the inputs."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import DeadlockError, ExecutionError, UnsupportedPtxError

PTXAS = shutil.which("ptxas")
HEAD = """.version 8.6
.target sm_90a
.address_size 64
"""


def ptxas_ok(src: str) -> None:
    if PTXAS is None:
        return
    r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


RING = HEAD + """.visible .entry ring(.param .u64 in, .param .u64 out, .param .u32 tiles)
{
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<16>;
    .shared .align 128 .b8 buf[512];
    .shared .align 8 .b64 bars[4];       // full0, full1, empty0, empty1
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r30, [tiles];
    mov.u32 %r1, %tid.x;
    shr.u32 %r3, %r1, 5;
    mov.u32 %r20, bars;
    mov.u32 %r21, buf;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_init;
    mbarrier.init.shared::cta.b64 [%r20], 1;
    add.u32 %r22, %r20, 8;
    mbarrier.init.shared::cta.b64 [%r22], 1;
    add.u32 %r22, %r20, 16;
    mbarrier.init.shared::cta.b64 [%r22], 64;
    add.u32 %r22, %r20, 24;
    mbarrier.init.shared::cta.b64 [%r22], 64;
    fence.mbarrier_init.release.cluster;
$L_init:
    bar.sync 0;
    mov.u32 %r10, 0;                      // tile
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra $L_consumer;
    elect.sync %r4|%p3, 0xffffffff;
    @!%p3 bra $L_end;
$L_produce:
    and.b32 %r11, %r10, 1;                // stage
    shr.u32 %r12, %r10, 1;
    and.b32 %r12, %r12, 1;
    xor.b32 %r12, %r12, 1;                // parity of the empty phase to wait for
    shl.b32 %r13, %r11, 3;
    add.u32 %r14, %r20, %r13;             // full[s]
    add.u32 %r15, %r14, 16;               // empty[s]
$L_wait_empty:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r15], %r12;
    @!%p4 bra $L_wait_empty;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14], 256;
    shl.b32 %r16, %r11, 8;
    add.u32 %r17, %r21, %r16;             // buf + s * 256
    mul.wide.u32 %rd3, %r10, 256;
    add.u64 %rd4, %rd1, %rd3;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r17], [%rd4], 256, [%r14];
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, %r30;
    @%p5 bra $L_produce;
    bra $L_end;
$L_consumer:
    sub.u32 %r5, %r1, 32;                 // column
    mov.u32 %r6, 0;                       // sum
$L_consume:
    and.b32 %r11, %r10, 1;
    shr.u32 %r12, %r10, 1;
    and.b32 %r12, %r12, 1;
    shl.b32 %r13, %r11, 3;
    add.u32 %r14, %r20, %r13;
    add.u32 %r15, %r14, 16;
    {read_early}
$L_wait_full:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r14], %r12;
    @!%p4 bra $L_wait_full;
    shl.b32 %r16, %r11, 8;
    add.u32 %r17, %r21, %r16;
    shl.b32 %r18, %r5, 2;
    add.u32 %r19, %r17, %r18;
    ld.shared.u32 %r7, [%r19];
    add.u32 %r6, %r6, %r7;
    mbarrier.arrive.shared::cta.b64 _, [%r15];
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, %r30;
    @%p5 bra $L_consume;
    mul.wide.u32 %rd5, %r5, 4;
    add.u64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r6;
$L_end:
    ret;
}
"""


def launch_ring(tiles: int, read_early: str = ""):
    src = RING.replace("{read_early}", read_early)
    ptxas_ok(src)
    m = load_ptx(src)
    mem = GlobalMemory()
    x = np.random.default_rng(tiles).integers(0, 1 << 20, (tiles, 64)).astype(np.uint32)
    a, out = mem.to_device(x), mem.calloc(4 * 64)
    stats = m.launch("ring", 1, 96, [a, out, tiles], mem)
    return x, mem.from_device(out, np.uint32, 64), stats


@pytest.mark.parametrize("tiles", [1, 2, 7])
def test_producer_warp_feeds_consumers_through_a_ring(tiles):
    x, got, stats = launch_ring(tiles)
    assert (got == x.sum(axis=0, dtype=np.uint32)).all()
    assert not stats.warnings


def test_reading_a_pending_stage_is_a_race():
    early = """shl.b32 %r16, %r11, 8;
    add.u32 %r17, %r21, %r16;
    ld.shared.u32 %r7, [%r17];"""
    with pytest.raises(ExecutionError, match="race: load of shared address 0x0"):
        launch_ring(2, early)


def test_bytes_never_expected_leave_the_ring_deadlocked():
    src = RING.replace("{read_early}", "").replace(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14], 256;",
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r14], 512;")
    m = load_ptx(src)
    mem = GlobalMemory()
    a, out = mem.to_device(np.zeros((3, 64), np.uint32)), mem.calloc(256)
    with pytest.raises(DeadlockError, match="256 tx bytes outstanding"):
        m.launch("ring", 1, 96, [a, out, 3], mem)


STORE = HEAD + """.visible .entry k(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b32 tile[64];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mul.lo.u32 %r2, %r2, 3;
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, tile;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], %r2;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_end;
    cp.async.bulk.global.shared::cta.bulk_group [%rd2+64], [%r4], 256;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
    cp.async.bulk.wait_group 0;
    cp.async.bulk.prefetch.L2.global [%rd1], 256;
$L_end:
    ret;
}
"""


def test_bulk_store_to_global():
    ptxas_ok(STORE)
    m = load_ptx(STORE)
    mem = GlobalMemory()
    x = np.arange(64, dtype=np.uint32) * 11 + 5
    a, out = mem.to_device(x), mem.calloc(4 * 96)
    m.launch("k", 1, 64, [a, out], mem)
    got = mem.from_device(out, np.uint32, 96)
    assert (got[16:80] == 3 * x).all() and (got[:16] == 0).all() and (got[80:] == 0).all()


MULTICAST = HEAD + """.visible .entry k(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .reg .b16 %rs<2>;
    .shared .align 16 .b32 tile[32];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, bar;
    mov.u32 %r4, tile;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_init;
    mbarrier.init.shared::cta.b64 [%r3], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 128;
$L_init:
    barrier.cluster.arrive;
    barrier.cluster.wait;
    setp.ne.u32 %p2, %r2, 0;
    or.pred %p3, %p1, %p2;
    @%p3 bra $L_wait;
    mov.u16 %rs1, {mask};
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r4], [%rd1], 128, [%r3], %rs1;
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;
    @!%p1 bra $L_wait;
    shl.b32 %r5, %r1, 2;
    add.u32 %r6, %r4, %r5;
    ld.shared.u32 %r7, [%r6];
    mov.u32 %r8, %ctaid.x;
    mad.lo.u32 %r9, %r8, 32, %r1;
    mul.wide.u32 %rd3, %r9, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r7;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
}
"""


def test_multicast_into_every_cta_of_the_cluster():
    src = MULTICAST.replace("{mask}", "15")
    ptxas_ok(src)
    m = load_ptx(src)
    mem = GlobalMemory()
    x = np.arange(32, dtype=np.uint32) * 7 + 1
    a, out = mem.to_device(x), mem.calloc(4 * 32 * 8)
    m.launch("k", 8, 32, [a, out], mem, cluster=4)
    assert (mem.from_device(out, np.uint32, 256).reshape(8, 32) == x).all()


def test_multicast_missing_a_cta_deadlocks_it():
    m = load_ptx(MULTICAST.replace("{mask}", "13"))  # CTA rank 1 left out
    mem = GlobalMemory()
    a, out = mem.to_device(np.zeros(32, np.uint32)), mem.calloc(4 * 32 * 4)
    with pytest.raises(DeadlockError, match="of block \\(1, 0, 0\\): phase 0 \\(parity 0\\), "
                                            "0 of 1 arrivals pending, 128 tx bytes"):
        m.launch("k", 4, 32, [a, out], mem, cluster=4)


@pytest.mark.parametrize("inst, why", [
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.f16 [%rd1], [%r1], 16;",
     "half-precision bulk min/max are not stated"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.s64 [%rd1], [%r1], 16;",
     ".add does not take .s64"),
    ("cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.min.u64 "
     "[%r1], [%r2], 16, [%r3];", r"\.min into \.shared::cluster takes \.u32, \.s32"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.inc.u64 [%rd1], [%r1], 16;",
     ".inc does not take .u64"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
     "[%r1], [%rd1, {%r2, %r2}], [%r3], {%rs1};", "im2col"),
])
def test_refused_forms(inst, why):
    src = HEAD + f""".visible .entry k()
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .b16 %rs<4>;
    {inst}
    ret;
}}
"""
    with pytest.raises(UnsupportedPtxError, match=why):
        load_ptx(src)
TENSOR = HEAD + """.visible .entry k(.param .align 64 .b8 map[128], .param .align 64 .b8 omap[128],
                  .param .u64 out, .param .u32 c0, .param .u32 c1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 tile[1024];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [c0];
    ld.param.u32 %r6, [c1];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    mov.b64 %rd5, map;
    mov.b64 %rd6, omap;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    prefetch.tensormap [%rd5];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 1024;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd5, {%r5, %r6}], [%r2];
$L_wait:
    bar.sync 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra $L_spin;
    shl.b32 %r7, %r1, 2;
    add.u32 %r8, %r3, %r7;
    ld.shared.u32 %r9, [%r8];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    bar.sync 0;
    @%p1 bra $L_end;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd6, {%r5, %r6}], [%r3];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_end:
    ret;
}
"""


def swizzled_placement(box: np.ndarray) -> np.ndarray:
    """The 1024 bytes of a box of 128-byte rows placed with the 128 B swizzle: row r's
    16-byte chunk c lands at chunk c ^ (r mod 8) of the row (tile 1024-byte aligned)."""
    flat = box.reshape(-1).view(np.uint8)
    out = np.zeros_like(flat)
    for j in range(flat.size):
        r, c, b = j // 128, (j % 128) // 16, j % 16
        out[r * 128 + (c ^ (r % 8)) * 16 + b] = flat[j]
    return out


@pytest.mark.parametrize("c0, c1", [(0, 0), (48, 33), (-10, -3), (96, 40)])
def test_tensor_tile_load_swizzled_with_out_of_bounds_and_store(c0, c1):
    from hardware.simt.tensormap import encode_tiled
    ptxas_ok(TENSOR)
    m = load_ptx(TENSOR)
    mem = GlobalMemory()
    rows, cols, pitch = 37, 100, 128          # fp16, rows padded to 256 bytes
    x = (np.arange(rows * pitch, dtype=np.uint32) * 2654435761 % 65521).astype(np.uint16)
    x = x.reshape(rows, pitch)
    a = mem.to_device(x)
    y = mem.calloc(rows * pitch * 2)
    out = mem.calloc(1024)
    args = dict(dtype="float16", rank=2, global_dim=[cols, rows], global_strides=[256],
                box_dim=[64, 8], element_strides=[1, 1], swizzle="128B")
    tmap = encode_tiled(global_address=a, **args)
    omap = encode_tiled(global_address=y, **args)
    args_ = [tmap, omap, out, c0 % (1 << 32), c1 % (1 << 32)]
    if min(c0, c1) < 0:
        # loads may start outside the tensor (zero fill); a store through the
        # .global.shared::cta direction may not (PTX ISA 9.7.9.25.5.1)
        with pytest.raises(ExecutionError, match=r"a tensor store starts at coordinates "
                                                 r"\[-10, -3\].*non-negative"):
            m.launch("k", 1, 256, args_, mem)
    else:
        m.launch("k", 1, 256, args_, mem)
    box = np.zeros((8, 64), np.uint16)
    for r in range(8):
        for c in range(64):
            gr, gc = c1 + r, c0 + c
            if 0 <= gr < rows and 0 <= gc < cols:
                box[r, c] = x[gr, gc]
    got = mem.from_device(out, np.uint8, 1024)
    assert (got == swizzled_placement(box)).all()
    if min(c0, c1) < 0:
        return
    back = mem.from_device(y, np.uint16, rows * pitch).reshape(rows, pitch)
    want = np.zeros_like(back)
    for r in range(8):
        for c in range(64):
            gr, gc = c1 + r, c0 + c
            if 0 <= gr < rows and 0 <= gc < cols:
                want[gr, gc] = x[gr, gc]
    assert (back == want).all()


TENSOR3 = HEAD + """.visible .entry k(.param .u64 map, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 tile[1536];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd5, [map];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    mov.u32 %r5, 16;
    mov.u32 %r6, -1;
    mov.u32 %r10, 1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], {nbytes};
    cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd5, {%r5, %r6, %r10}], [%r2];
$L_wait:
    bar.sync 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra $L_spin;
    shl.b32 %r7, %r1, 2;
    add.u32 %r8, %r3, %r7;
    ld.shared.u32 %r9, [%r8];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    ret;
}
"""


def test_tensor_3d_box_with_element_strides_map_in_global_memory():
    """A 3-D fp32 box (dims 0..2 = 32 x 7 x 3 of a 40 x 9 x 4 tensor, traversal stride 2
    along dimension 1: 4 rows) whose map lies in global memory."""
    from hardware.simt.tensormap import encode_tiled
    mem = GlobalMemory()
    x = np.arange(4 * 9 * 48, dtype=np.float32).reshape(4, 9, 48) * 0.5 - 7
    a = mem.to_device(x)
    tmap = encode_tiled("float32", 3, a, [40, 9, 4], [48 * 4, 48 * 4 * 9], [32, 7, 3],
                        [1, 2, 1])
    mp = mem.to_device(tmap)
    nbytes = 32 * 4 * 3 * 4
    src = TENSOR3.replace("{nbytes}", str(nbytes))
    ptxas_ok(src)
    out = mem.calloc(nbytes)
    load_ptx(src).launch("k", 1, nbytes // 4, [mp, out], mem)
    got = mem.from_device(out, np.float32, nbytes // 4).reshape(3, 4, 32)
    want = np.zeros((3, 4, 32), np.float32)
    for z in range(3):
        for r in range(4):
            for c in range(32):
                gz, gy, gx = 1 + z, -1 + 2 * r, 16 + c
                if 0 <= gz < 4 and 0 <= gy < 9 and 0 <= gx < 40:
                    want[z, r, c] = x[gz, gy, gx]
    assert (got.view(np.uint32) == want.view(np.uint32)).all()


def test_nvcc_memcpy_async_on_a_cuda_barrier():
    """nvcc's PTX for cuda::memcpy_async on a block-scope cuda::barrier: cp.async.bulk,
    expect_tx, arrivals with a count, try_wait on the state in a back-off loop timed by
    %globaltimer (deterministic here)."""
    import pathlib
    src = (pathlib.Path(__file__).parent / "data" / "bulk_reverse.ptx").read_text()
    m = load_ptx(src)
    mem = GlobalMemory()
    x = np.random.default_rng(1).standard_normal(3 * 256).astype(np.float32)
    a, out = mem.to_device(x), mem.alloc(4 * 3 * 256)
    stats = m.launch("bulk_reverse", 3, 256, [a, out], mem)
    got = mem.from_device(out, np.float32, 3 * 256).reshape(3, 256)
    assert (got == 2 * x.reshape(3, 256)[:, ::-1]).all() and not stats.warnings
    # expecting the tile's bytes twice leaves 1024 bytes that never come
    line = "\tmbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r8], %r10;\n"
    assert line in src
    twice = load_ptx(src.replace(line, line + line))
    with pytest.raises(DeadlockError, match="0 of 256 arrivals pending, 1024 tx bytes "
                                            "outstanding"):
        twice.launch("bulk_reverse", 1, 256, [a, out], mem)


@pytest.mark.parametrize("swz", ["none", "128B"])
def test_nvcc_tma_tile_with_a_grid_constant_tensor_map(swz):
    """nvcc's PTX for cuda::ptx::cp_async_bulk_tensor with a __grid_constant__
    CUtensorMap (cvta.param of the parameter's address) on a 3 x 3 grid of boxes."""
    import pathlib
    from hardware.simt.tensormap import encode_tiled
    src = (pathlib.Path(__file__).parent / "data" / "tma_tile.ptx").read_text()
    m = load_ptx(src)
    mem = GlobalMemory()
    rows, cols = 24, 192
    x = (np.arange(rows * cols, dtype=np.uint32) * 40503 % 65521).astype(np.uint16)
    x = x.reshape(rows, cols)
    a = mem.to_device(x)
    tmap = encode_tiled("float16", 2, a, [cols, rows], [cols * 2], [64, 8], [1, 1],
                        swizzle=swz)
    out = mem.alloc(2 * 512 * 9)
    stats = m.launch("tma_tile", (3, 3), 128, [tmap, out], mem)
    got = mem.from_device(out, np.uint8, 1024 * 9).reshape(3, 3, 1024)
    boxes = x.reshape(3, 8, 3, 64).transpose(0, 2, 1, 3)
    for by in range(3):
        for bx in range(3):
            box = np.ascontiguousarray(boxes[by, bx])
            want = box.view(np.uint8).reshape(-1) if swz == "none" else \
                swizzled_placement(box)
            assert (got[by, bx] == want).all()
    assert not stats.warnings


REPLACE = HEAD + """.visible .entry k(.param .u64 map, .param .u64 scratch, .param .u64 other,
                  .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 desc[128];
    .shared .align 128 .b8 tile[512];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [map];
    ld.param.u64 %rd2, [scratch];
    ld.param.u64 %rd3, [other];
    ld.param.u64 %rd4, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    mov.u32 %r4, desc;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    // copy the map into shared memory, point it at the other tensor with 5 rows,
    // publish it in global memory and load a box through it
    mov.u32 %r10, 0;
$L_copy:
    cvt.u64.u32 %rd5, %r10;
    add.u64 %rd6, %rd1, %rd5;
    ld.global.v4.u32 {%r11, %r12, %r13, %r14}, [%rd6];
    add.u32 %r15, %r4, %r10;
    st.shared.v4.u32 [%r15], {%r11, %r12, %r13, %r14};
    add.u32 %r10, %r10, 16;
    setp.lt.u32 %p2, %r10, 128;
    @%p2 bra $L_copy;
    mov.u32 %r16, 5;
    tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r4], %rd3;
    tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r4], 1, %r16;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd2], [%r4], 128;
    fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
    mov.u32 %r17, 0;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r17, %r17}], [%r2];
$L_wait:
    bar.sync 0;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], 0;
    @!%p3 bra $L_spin;
    shl.b32 %r5, %r1, 2;
    add.u32 %r6, %r3, %r5;
    ld.shared.u32 %r7, [%r6];
    mul.wide.u32 %rd7, %r1, 4;
    add.u64 %rd8, %rd4, %rd7;
    st.global.u32 [%rd8], %r7;
    ret;
}
"""


def test_tensormap_replace_and_publish_on_the_device():
    from hardware.simt.tensormap import encode_tiled
    ptxas_ok(REPLACE)
    m = load_ptx(REPLACE)
    mem = GlobalMemory()
    x = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16)
    y = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16) * 3 + 1000
    a, b = mem.to_device(x), mem.to_device(y)
    tmap = encode_tiled("uint32", 2, a, [16, 16], [64], [16, 8], [1, 1])
    mp, scratch, out = mem.to_device(tmap), mem.calloc(128), mem.calloc(512)
    m.launch("k", 1, 128, [mp, scratch, b, out], mem)
    got = mem.from_device(out, np.uint32, 128).reshape(8, 16)
    want = np.zeros((8, 16), np.uint32)
    want[:5] = y[:5]
    assert (got == want).all()
    assert (mem.from_device(mp, np.uint8, 128) == tmap).all()  # the original is unchanged


def test_tensormap_replace_of_a_field_at_the_wrong_width_is_refused():
    src = HEAD + """.visible .entry k()
{
    .reg .b32 %r<4>;
    mov.u32 %r1, 0;
    tensormap.replace.tile.global_address.shared::cta.b1024.b32 [%r1], %r1;
    ret;
}
"""
    with pytest.raises(UnsupportedPtxError, match="global_address is .b64"):
        load_ptx(src)
