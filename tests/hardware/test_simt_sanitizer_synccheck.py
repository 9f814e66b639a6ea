"""synccheck (hardware.simt.synccheck): nvcc-compiled kernels whose barriers or warp
collectives are reached by part of their threads, each with its corrected twin, under
both scheduling modes.

The kernels are tests/hardware/data/ub/synccheck_*.cu, compiled with
``nvcc -ptx -arch=sm_90``; expected PTX lines are found in the PTX text and expected
outputs computed with NumPy.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, Module, load_ptx
from hardware.simt.errors import DeadlockError, SyncError

DATA = Path(__file__).parent / "data" / "ub"
MODES = ["independent", "lockstep"]
NAME = "synccheck_barriers"


@lru_cache(maxsize=None)
def _text() -> str:
    return (DATA / f"{NAME}.ptx").read_text()


@lru_cache(maxsize=None)
def _module() -> Module:
    return load_ptx(_text())


def _lines(kernel: str, prefix: str) -> list[int]:
    lines = _text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f".visible .entry {kernel}("))
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(".visible .entry"):
            break
        if lines[i].strip().startswith(prefix):
            out.append(i + 1)
    return out


def _setup(n: int = 64):
    x = np.arange(n, dtype=np.int32) * 5 + 2
    mem = GlobalMemory()
    return x, mem, mem.to_device(x), mem.alloc(4 * n)


@pytest.mark.parametrize("scheduling", MODES)
def test_divergent_syncthreads(scheduling):
    x, mem, px, po = _setup()
    bars = _lines("divergent_syncthreads", "bar.sync")
    assert len(bars) == 2
    # strict barriers: a deadlock, naming who arrived and who did not
    with pytest.raises(DeadlockError) as info:
        _module().launch("divergent_syncthreads", 1, 64, [px, po], mem, scheduling=scheduling)
    msg = str(info.value)
    assert "synccheck: arrived: warp 0 lanes 0-15; warp 1 lanes 0-15" in msg
    assert "never arrive: warp 0 lanes 16-31 (elsewhere); warp 1 lanes 16-31" in msg
    # warp-granular barriers (as the hardware): the late lanes are reported
    with pytest.raises(SyncError) as info:
        _module().launch("divergent_syncthreads", 1, 64, [px, po], mem, scheduling=scheduling,
                         barrier_mode="warp")
    rep = info.value.report
    assert rep.tool == "synccheck" and rep.what == "divergent barrier"
    assert rep.access.line == bars[1] and f"line {bars[0]}" in rep.detail
    assert rep.access.thread == (16, 0, 0) and "lanes 16-31" in rep.detail
    want = np.where(np.arange(64) % 32 < 16, x, -x)[::-1]
    for mode in ("strict", "warp"):
        stats = _module().launch("divergent_syncthreads_fixed", 1, 64, [px, po], mem,
                                 scheduling=scheduling, barrier_mode=mode)
        assert stats.warnings == []
        np.testing.assert_array_equal(mem.from_device(po, np.int32, 64), want)


@pytest.mark.parametrize("scheduling", MODES)
def test_early_return_before_syncthreads(scheduling):
    x, mem, px, po = _setup()
    with pytest.raises(DeadlockError) as info:
        _module().launch("early_return", 1, 64, [px, po, 40], mem, scheduling=scheduling)
    msg = str(info.value)
    assert "arrived: warp 0 lanes 0-31; warp 1 lanes 0-7" in msg
    assert "never arrive: warp 1 lanes 8-31" in msg
    want = x[:40][::-1]
    for k, mode in (("early_return", "warp"), ("early_return_fixed", "strict"),
                    ("early_return_fixed", "warp")):
        stats = _module().launch(k, 1, 64, [px, po, 40], mem, scheduling=scheduling,
                                 barrier_mode=mode)
        assert stats.warnings == []
        np.testing.assert_array_equal(mem.from_device(po, np.int32, 40), want)


@pytest.mark.parametrize("scheduling", MODES)
def test_full_mask_syncwarp_reached_by_half_a_warp(scheduling):
    x, mem, px, po = _setup(32)
    (line,) = _lines("syncwarp_half", "bar.warp.sync")
    with pytest.raises(SyncError) as info:
        _module().launch("syncwarp_half", 1, 32, [px, po], mem, scheduling=scheduling)
    rep = info.value.report
    assert rep.access.line == line and rep.access.thread == (0, 0, 0)
    assert "mask 0xffffffff" in rep.detail and "lanes 0-15 execute it" in rep.detail
    assert "16-31 never do" in rep.detail
    stats = _module().launch("syncwarp_half_fixed", 1, 32, [px, po], mem,
                             scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 16), x[:16][::-1])


@pytest.mark.parametrize("scheduling", MODES)
def test_full_mask_shuffle_reached_by_half_a_warp(scheduling):
    x, mem, px, po = _setup(32)
    (line,) = _lines("shfl_half", "shfl.sync")
    with pytest.raises(SyncError) as info:
        _module().launch("shfl_half", 1, 32, [px, po], mem, scheduling=scheduling)
    rep = info.value.report
    assert rep.access.line == line and "live lanes 16-31 do not" in rep.detail
    stats = _module().launch("shfl_half_fixed", 1, 32, [px, po], mem, scheduling=scheduling)
    assert stats.warnings == []
    lane = np.arange(32)
    want = np.where(lane < 16, x + x[lane ^ 1], x)
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 32), want)


@pytest.mark.parametrize("scheduling", MODES)
def test_shuffle_from_a_lane_outside_the_mask(scheduling):
    x, mem, px, po = _setup(32)
    (line,) = _lines("shfl_outside", "shfl.sync")
    with pytest.raises(SyncError) as info:
        _module().launch("shfl_outside", 1, 32, [px, po], mem, scheduling=scheduling)
    rep = info.value.report
    assert rep.access.line == line and rep.access.thread == (8, 0, 0)
    assert "lanes 8-15" in rep.detail
    stats = _module().launch("shfl_outside_fixed", 1, 32, [px, po], mem,
                             scheduling=scheduling)
    assert stats.warnings == []
    lane = np.arange(32)
    # width 16: lanes 8-15 would read past their segment and keep their own value
    want = np.where(lane < 8, x + x[np.minimum(lane + 8, 31)], np.where(lane < 16, 2 * x, x))
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 32), want)


def test_synccheck_can_warn_or_be_off():
    x, mem, px, po = _setup(32)
    stats = _module().launch("shfl_half", 1, 32, [px, po], mem, sanitize={"synccheck": "warn"})
    assert len(stats.warnings) == 1 and "member mask names lanes" in stats.warnings[0]
    stats = _module().launch("syncwarp_half", 1, 32, [px, po], mem,
                             sanitize={"synccheck": "off"})
    assert stats.warnings == []


_MASK_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %laneid;
    setp.lt.u32 %p1, %r1, 16;
    selp.b32 %r2, MASK_LO, MASK_HI, %p1;
    OP
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"""


@pytest.mark.parametrize("op", ["vote.sync.ballot.b32 %r3, %p1, %r2;",
                                "match.any.sync.b32 %r3, %r1, %r2;",
                                "shfl.sync.bfly.b32 %r3, %r1, 1, 31, %r2;",
                                "bar.warp.sync %r2; mov.u32 %r3, 0;"])
def test_member_masks_that_differ_or_omit_an_executing_lane(op):
    mem = GlobalMemory()
    out = mem.alloc(128)
    line = 14  # the line of OP in _MASK_PTX
    # lanes 0-15 give 0x0000ffff, lanes 16-31 0xffffffff: the masks differ
    ptx = _MASK_PTX.replace("MASK_LO", "65535").replace("MASK_HI", "-1").replace("OP", op)
    with pytest.raises(SyncError, match="mask mismatch") as info:
        load_ptx(ptx).launch("k", 1, 32, [out], mem)
    assert info.value.report.access.line == line
    # every lane gives 0x0000ffff: lanes 16-31 execute it without their own bit
    ptx = _MASK_PTX.replace("MASK_LO", "65535").replace("MASK_HI", "65535").replace("OP", op)
    with pytest.raises(SyncError, match="lacks an executing lane") as info:
        load_ptx(ptx).launch("k", 1, 32, [out], mem)
    assert "lanes 16-31" in info.value.report.detail
    # the full mask everywhere is fine
    ptx = _MASK_PTX.replace("MASK_LO", "-1").replace("MASK_HI", "-1").replace("OP", op)
    assert load_ptx(ptx).launch("k", 1, 32, [out], mem).warnings == []
