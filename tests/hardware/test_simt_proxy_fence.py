"""fence.proxy.async (hardware.simt.proxycheck): generic-proxy writes of shared memory
read by the async proxy (bulk and tensor stores, wgmma descriptor operands) need an
async proxy fence on a causality path from the write to the read (PTX ISA, "Memory
Consistency Model", proxies). Each case is a small PTX kernel (checked by ptxas when it
is installed) in a form that must run clean, against its twin that must be reported;
the outputs of the clean ones are checked against NumPy. The Triton kernels' own PTX
(tests/hardware/data/triton_sm90) fences after its barrier: it runs clean (in
test_simt_triton_sm90), and without its fences it is reported."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import RaceError

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


# every thread writes 3 x in[tid] to tile[tid]; thread 0 stores the tile with a bulk copy
STORE = HEAD + """.visible .entry k(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b32 tile[64];
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p2, %r1, 32;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mul.lo.u32 %r2, %r2, 3;
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, tile;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], %r2;
{before}
    bar.sync 0;
{after}
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_end;
{issuer}
    cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r4], 256;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_end:
    ret;
}
"""
FENCE = "    fence.proxy.async.shared::cta;"


def run_store(before: str = "", after: str = "", issuer: str = "", **kw):
    src = STORE.replace("{before}", before).replace("{after}", after).replace(
        "{issuer}", issuer)
    ptxas_ok(src)
    mem = GlobalMemory()
    x = (np.arange(64, dtype=np.uint32) * 7 + 1)
    a, out = mem.to_device(x), mem.calloc(256)
    stats = load_ptx(src).launch("k", 1, 64, [a, out], mem, **kw)
    return mem.from_device(out, np.uint32, 64), 3 * x, stats, src


def line_of(src: str, text: str) -> int:
    return next(i + 1 for i, t in enumerate(src.splitlines()) if text in t)


@pytest.mark.parametrize("scheduling", ["independent", "lockstep"])
@pytest.mark.parametrize("before, after, issuer", [
    (FENCE, "", ""),                                   # every writer, before the barrier
    ("    fence.proxy.async;", "", ""),                # the plain form covers shared
    ("", "", FENCE),                                   # the issuer, after the barrier
    ("", FENCE, ""),                                   # everyone after it (the issuer too)
    ("    fence.proxy.async.shared::cluster;", "", ""),
])
def test_fenced_bulk_store_is_clean(before, after, issuer, scheduling):
    got, want, stats, _ = run_store(before, after, issuer, scheduling=scheduling)
    assert (got == want).all()
    assert not stats.warnings


@pytest.mark.parametrize("scheduling", ["independent", "lockstep"])
def test_bulk_store_without_fence_is_a_race(scheduling):
    src = STORE.replace("{before}", "").replace("{after}", "").replace("{issuer}", "")
    with pytest.raises(RaceError) as e:
        run_store(scheduling=scheduling)
    msg = str(e.value)
    assert "read-after-write race between the generic and the async proxy" in msg
    assert "no fence.proxy.async of shared memory" in msg
    first, second = msg.splitlines()[1:3]
    assert f"line {line_of(src, 'st.shared.u32')}" in first and "write of shared" in first
    assert f"line {line_of(src, 'cp.async.bulk.global')}" in second
    assert "read of shared address 0x0" in second and "thread (0, 0, 0)" in second


@pytest.mark.parametrize("scheduling", ["independent", "lockstep"])
def test_writer_fence_after_the_barrier_is_not_ordered(scheduling):
    # warp 0 fences before the barrier, warp 1 only after it: warp 1's fences are not
    # ordered before thread 0's bulk copy, and thread 0 has no fence of its own
    before = "    @%p2 fence.proxy.async.shared::cta;"
    after = "    @!%p2 fence.proxy.async.shared::cta;"
    with pytest.raises(RaceError) as e:
        run_store(before, after, scheduling=scheduling)
    msg = str(e.value)
    assert "fence.proxy.async is not ordered before the bulk copy" in msg
    first = msg.splitlines()[1]
    assert "thread (32, 0, 0)" in first and "shared address 0x80" in first


def test_fence_of_global_memory_does_not_cover_shared():
    with pytest.raises(RaceError, match="no fence.proxy.async of shared memory"):
        run_store("    fence.proxy.async.global;")


def test_warn_mode_keeps_the_report_and_racecheck_off_none():
    got, want, stats, _ = run_store(sanitize="warn")
    assert (got == want).all()
    assert len(stats.warnings) == 1 and "async proxy" in stats.warnings[0]
    got, _, stats, _ = run_store(sanitize={"racecheck": "off"})
    assert (got == want).all() and not stats.warnings


# warp 1 writes the tile and arrives on an mbarrier (count 32); thread 0 waits on it and
# stores the tile: the arrival's release carries the fence to the waiter
MBAR = HEAD + """.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b32 tile[32];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r6, bar;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_sync;
    mbarrier.init.shared::cta.b64 [%r6], 32;
$L_sync:
    bar.sync 0;
    setp.lt.u32 %p2, %r1, 32;
    @%p2 bra $L_wait;
    sub.u32 %r7, %r1, 32;
    mul.lo.u32 %r2, %r7, %r7;
    shl.b32 %r3, %r7, 2;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], %r2;
{fence}
    mbarrier.arrive.shared::cta.b64 _, [%r6];
    bra $L_end;
$L_wait:
    @%p1 bra $L_end;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r6], 0;
    @!%p3 bra $L_spin;
    cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r4], 128;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_end:
    ret;
}
"""


@pytest.mark.parametrize("fence", [True, False])
def test_mbarrier_handoff(fence):
    src = MBAR.replace("{fence}", FENCE if fence else "")
    ptxas_ok(src)
    mem = GlobalMemory()
    out = mem.calloc(128)
    m = load_ptx(src)
    if not fence:
        with pytest.raises(RaceError) as e:
            m.launch("k", 1, 64, [out], mem)
        assert "thread (32, 0, 0)" in str(e.value).splitlines()[1]
        return
    m.launch("k", 1, 64, [out], mem)
    assert (mem.from_device(out, np.uint32, 32) == np.arange(32) ** 2).all()


# a tensor store of a 64-element fp32 row written by the block's threads
TSTORE = HEAD + """.visible .entry k(.param .align 64 .b8 map[128])
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b32 tile[64];
    mov.u32 %r1, %tid.x;
    mov.u32 %r4, tile;
    shl.b32 %r3, %r1, 2;
    add.u32 %r5, %r4, %r3;
    add.u32 %r2, %r1, 100;
    st.shared.u32 [%r5], %r2;
{fence}
    bar.sync 0;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_end;
    mov.b64 %rd6, map;
    mov.u32 %r6, 0;
    cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd6, {%r6}], [%r4];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$L_end:
    ret;
}
"""


@pytest.mark.parametrize("fence", [True, False])
def test_tensor_store(fence):
    from hardware.simt.tensormap import encode_tiled
    src = TSTORE.replace("{fence}", FENCE if fence else "")
    ptxas_ok(src)
    mem = GlobalMemory()
    y = mem.calloc(256)
    tmap = encode_tiled("float32", 1, y, [64], [], [64], [1])
    m = load_ptx(src)
    if not fence:
        with pytest.raises(RaceError, match="and the tensor store") as e:
            m.launch("k", 1, 64, [tmap], mem)
        assert f"line {line_of(src, 'cp.async.bulk.tensor')}" in str(e.value)
        return
    m.launch("k", 1, 64, [tmap], mem)
    assert (mem.from_device(y, np.uint32, 64) == np.arange(64) + 100).all()


TRITON = Path(__file__).parent / "data" / "triton_sm90"


@pytest.mark.parametrize("name", ["matmul_fp16", "matmul_bf16_n256"])
def test_triton_wgmma_operands_without_its_fences(name):
    """Triton's matmuls fill shared memory with st.shared (matmul_fp16) or cp.async
    (matmul_bf16_n256, generic proxy too), then bar.sync, then fence.proxy.async, then
    wgmma: without the fences the wgmma's operand read is a race."""
    import json
    meta = json.loads((TRITON / "metadata.json").read_text())[name]
    text = (TRITON / f"{name}.ptx").read_text()
    bare = re.sub(r"\n\s*fence\.proxy\.async\.shared::cta;", "\n", text)
    assert bare != text
    bm, bn, bk = (int(meta["constexprs"][c]) for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    mem = GlobalMemory()
    a = mem.to_device(np.ones((bm, 3 * bk), np.float16))
    b = mem.to_device(np.ones((3 * bk, bn), np.float16))
    c = mem.calloc(bm * bn * 4)
    args = [a, b, c, bm, bn, 3 * bk, 3 * bk, bn, bn, 0, 0]
    with pytest.raises(RaceError) as e:
        load_ptx(bare).launch(meta["kernel"], 1, 32 * meta["num_warps"], args, mem,
                              dynamic_shared=meta["shared"], gpu="H100")
    second = str(e.value).splitlines()[2]
    assert "wgmma.mma_async" in second
