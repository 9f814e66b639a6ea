"""racecheck (hardware.simt.racecheck): nvcc-compiled kernels with data races, each with
its corrected twin, under both scheduling modes.

The kernels are tests/hardware/data/ub/racecheck_*.cu, compiled with
``nvcc -ptx -arch=sm_90``; the expected PTX lines are found in the PTX text itself and the
expected outputs computed with NumPy.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, Module, load_ptx
from hardware.simt.errors import RaceError

DATA = Path(__file__).parent / "data" / "ub"
MODES = ["independent", "lockstep"]


@lru_cache(maxsize=None)
def _text(name: str) -> str:
    return (DATA / f"{name}.ptx").read_text()


@lru_cache(maxsize=None)
def _module(name: str) -> Module:
    return load_ptx(_text(name))


def _lines(name: str, kernel: str, prefix: str) -> list[int]:
    """1-based lines of kernel ``kernel`` in ``name``.ptx whose instruction starts with
    ``prefix``."""
    lines = _text(name).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f".visible .entry {kernel}("))
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(".visible .entry"):
            break
        if lines[i].strip().startswith(prefix):
            out.append(i + 1)
    return out


def _race(name: str, kernel: str, grid, block, args, mem, scheduling) -> RaceError:
    with pytest.raises(RaceError) as info:
        _module(name).launch(kernel, grid, block, args, mem, scheduling=scheduling)
    return info.value


@pytest.mark.parametrize("scheduling", MODES)
def test_shared_race_between_warps_and_its_twin(scheduling):
    x = np.arange(64, dtype=np.int32) * 7 - 5
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(256)
    err = _race("racecheck_shared", "swap_halves", 1, 64, [px, po], mem, scheduling)
    rep = err.report
    assert rep.tool == "racecheck" and "read-after-write" in rep.what
    (st,) = _lines("racecheck_shared", "swap_halves", "st.shared")
    (ld,) = _lines("racecheck_shared", "swap_halves", "ld.shared")
    assert (rep.other.line, rep.other.kind) == (st, "write")
    assert (rep.access.line, rep.access.kind) == (ld, "read")
    assert rep.access.space == "shared" and rep.access.address == rep.other.address
    # the two threads are in different warps and touch the same word
    ta, tb = rep.access.thread[0], rep.other.thread[0]
    assert ta // 32 != tb // 32 and (ta + 32) % 64 == tb
    assert rep.access.address == 4 * tb
    assert "_ZZ11swap_halvesE1s" in rep.access.allocation
    assert "different warps" in str(rep)
    stats = _module("racecheck_shared").launch("swap_halves_fixed", 1, 64, [px, po], mem,
                                               scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 64), np.roll(x, -32))


@pytest.mark.parametrize("scheduling", MODES)
def test_non_atomic_increment_by_two_warps_and_atomic_twin(scheduling):
    mem = GlobalMemory()
    po = mem.alloc(4)
    rep = _race("racecheck_shared", "count_plain", 1, 64, [po], mem, scheduling).report
    (ld, _) = _lines("racecheck_shared", "count_plain", "ld.shared")
    (_, st) = _lines("racecheck_shared", "count_plain", "st.shared")
    assert {rep.access.line, rep.other.line} == {ld, st}
    assert rep.access.thread[0] // 32 != rep.other.thread[0] // 32
    assert rep.access.address == rep.other.address == 0
    stats = _module("racecheck_shared").launch("count_atomic", 1, 64, [po], mem,
                                               scheduling=scheduling)
    assert stats.warnings == []
    assert mem.from_device(po, np.int32, 1)[0] == 64


@pytest.mark.parametrize("scheduling", MODES)
def test_read_of_what_an_exited_warp_wrote(scheduling):
    x = np.arange(32, dtype=np.int32) + 100
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(128)
    rep = _race("racecheck_shared", "write_then_exit", 1, 64, [px, po], mem,
                scheduling).report
    (st,) = _lines("racecheck_shared", "write_then_exit", "st.shared")
    (ld,) = _lines("racecheck_shared", "write_then_exit", "ld.shared")
    assert {rep.access.line, rep.other.line} == {st, ld}
    writer = rep.other if rep.other.line == st else rep.access
    reader = rep.access if writer is rep.other else rep.other
    assert writer.thread[0] < 32 <= reader.thread[0]
    assert reader.thread[0] - 32 == 31 - writer.thread[0]
    stats = _module("racecheck_shared").launch("write_then_exit_fixed", 1, 64, [px, po], mem,
                                               scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 32), (3 * x)[::-1])


@pytest.mark.parametrize("scheduling", MODES)
def test_intra_warp_exchange_without_syncwarp_is_a_hazard(scheduling):
    x = np.arange(32, dtype=np.int32) * 3
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(128)
    mod = _module("racecheck_shared")
    stats = mod.launch("reverse_warp", 1, 32, [px, po], mem, scheduling=scheduling)
    (st,) = _lines("racecheck_shared", "reverse_warp", "st.shared")
    (ld,) = _lines("racecheck_shared", "reverse_warp", "ld.shared")
    assert len(stats.warnings) == 1
    w = stats.warnings[0]
    assert "racecheck" in w and "lanes of one warp" in w and "__syncwarp" in w
    assert f"line {st}" in w and f"line {ld}" in w
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 32), (x + 1)[::-1])
    stats = mod.launch("reverse_warp_fixed", 1, 32, [px, po], mem, scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(po, np.int32, 32), (x + 1)[::-1])


@pytest.mark.parametrize("scheduling", MODES)
def test_last_block_pattern_needs_a_fence(scheduling):
    x = np.array([5, -3, 11, 40], dtype=np.int32)
    mem = GlobalMemory()
    px, part, out = mem.to_device(x), mem.alloc(16, name="partial"), mem.alloc(4)
    rep = _race("racecheck_global", "last_block_sum", 4, 32,
                [px, part, mem.calloc(4), out], mem, scheduling).report
    (st,) = [ln for ln in _lines("racecheck_global", "last_block_sum", "st.global")][:1]
    assert rep.other.line == st and rep.other.kind == "write"
    assert rep.access.kind == "read" and rep.access.space == "global"
    assert rep.access.block != rep.other.block
    assert rep.access.address == part + 4 * rep.other.block[0]
    assert "partial" in rep.access.allocation and "different blocks" in str(rep)
    stats = _module("racecheck_global").launch(
        "last_block_sum_fixed", 4, 32, [px, part, mem.calloc(4), out], mem,
        scheduling=scheduling)
    assert stats.warnings == []
    assert mem.from_device(out, np.int32, 1)[0] == 2 * int(x.sum())


@pytest.mark.parametrize("scheduling", MODES)
def test_block_reads_its_neighbours_global_writes(scheduling):
    x = np.arange(96, dtype=np.int32) * 2 + 1
    mem = GlobalMemory()
    px, buf, out = mem.to_device(x), mem.alloc(4 * 96), mem.alloc(4 * 96)
    rep = _race("racecheck_global", "neighbour_read", 3, 32, [px, buf, out], mem,
                scheduling).report
    assert {rep.access.kind, rep.other.kind} == {"read", "write"}
    assert rep.access.block != rep.other.block and rep.access.thread == rep.other.thread
    assert rep.access.address == rep.other.address
    stats = _module("racecheck_global").launch("neighbour_read_fixed", 3, 32,
                                               [px, buf, out], mem, scheduling=scheduling)
    assert stats.warnings == []
    got = mem.from_device(out, np.int32, 96)[32:]
    b = np.arange(32, 96) // 32
    np.testing.assert_array_equal(got, x[np.arange(32, 96) - 32] + b - 1)


def test_sanitize_option_turns_races_into_warnings_or_off():
    x = np.arange(64, dtype=np.int32)
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(256)
    mod = _module("racecheck_shared")
    stats = mod.launch("swap_halves", 1, 64, [px, po], mem, sanitize={"racecheck": "warn"})
    assert len(stats.warnings) == 1 and "read-after-write race" in stats.warnings[0]
    stats = mod.launch("swap_halves", 1, 64, [px, po], mem, sanitize={"racecheck": "off"})
    assert stats.warnings == []
    stats = mod.launch("reverse_warp", 1, 32, [px, po], mem, sanitize={"racecheck": "off"})
    assert stats.warnings == []


@pytest.mark.parametrize("scheduling", MODES)
def test_byte_elements_are_checked_per_byte(scheduling):
    x = (np.arange(64) * 3 % 251).astype(np.uint8)
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(64)
    rep = _race("racecheck_shared", "reverse_bytes", 1, 64, [px, po], mem, scheduling).report
    (st,) = _lines("racecheck_shared", "reverse_bytes", "st.shared")
    (ld,) = _lines("racecheck_shared", "reverse_bytes", "ld.shared")
    assert {rep.access.line, rep.other.line} == {st, ld}
    assert rep.access.address == rep.other.address
    assert rep.access.thread[0] + rep.other.thread[0] == 63
    # neighbouring lanes writing bytes of one word are no hazard
    stats = _module("racecheck_shared").launch("reverse_bytes_fixed", 1, 64, [px, po], mem,
                                               scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(po, np.uint8, 64), (x + 1)[::-1])


def test_flag_between_blocks_orders_data_only_with_fences():
    # block 1 spins on the flag: independent thread scheduling lets block 0 run
    x = np.arange(32, dtype=np.int32) - 9
    mem = GlobalMemory()
    px, data, out = mem.to_device(x), mem.alloc(128, name="data"), mem.alloc(128)
    rep = _race("racecheck_global", "flag_publish", 2, 32, [px, data, mem.calloc(4), out],
                mem, "independent").report
    (_, st) = _lines("racecheck_global", "flag_publish", "st.global")  # out[t], data[t]
    assert rep.other.line == st and rep.other.block == (0, 0, 0)
    assert rep.access.block == (1, 0, 0) and rep.access.kind == "read"
    assert "data" in rep.access.allocation
    stats = _module("racecheck_global").launch(
        "flag_publish_fixed", 2, 32, [px, data, mem.calloc(4), out], mem,
        scheduling="independent")
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32), 5 * x)


def _war_ptx(barrier: bool) -> str:
    """Each thread stores x[i] to s[t]; after a barrier reads s[(t + 32) % 64] (the other
    warp's word) and stores it to s[t]: without a barrier between the read and the
    store, the store overwrites a word the other warp reads (write-after-read race)."""
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry rotate(.param .u64 x, .param .u64 out)
{{
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 s[64];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, %ctaid.x;
    mad.lo.u32 %r8, %r9, 64, %r1;
    mul.wide.u32 %rd3, %r8, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, s;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], %r2;
    bar.sync 0;
    add.u32 %r6, %r1, 32;
    and.b32 %r6, %r6, 63;
    shl.b32 %r6, %r6, 2;
    add.u32 %r7, %r4, %r6;
    ld.shared.u32 %r2, [%r7];
    {"bar.sync 0;" if barrier else ""}
    st.shared.u32 [%r5], %r2;
    bar.sync 0;
    ld.shared.u32 %r2, [%r5];
    add.u64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r2;
    ret;
}}
"""


@pytest.mark.parametrize("scheduling", MODES)
@pytest.mark.parametrize("blocks", [1, 160])  # 64 lanes, and a wave of 10 240
def test_write_after_read_of_a_read_just_after_a_barrier(blocks, scheduling):
    # the read comes right after a barrier with no write since (racecheck logs it
    # without checks); the store that follows must still find it
    x = np.arange(64 * blocks, dtype=np.int32) * 5 - 3
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(4 * x.size)
    with pytest.raises(RaceError) as e:
        load_ptx(_war_ptx(False)).launch("rotate", blocks, 64, [px, po], mem,
                                         scheduling=scheduling)
    rep = e.value.report
    assert "write-after-read" in rep.what
    assert (rep.access.kind, rep.other.kind) == ("write", "read")
    assert rep.access.address == rep.other.address
    assert rep.access.block == rep.other.block
    assert rep.access.thread[0] // 32 != rep.other.thread[0] // 32
    assert (rep.other.thread[0] + 32) % 64 == rep.access.thread[0]
    stats = load_ptx(_war_ptx(True)).launch("rotate", blocks, 64, [px, po], mem,
                                            scheduling=scheduling)
    assert stats.warnings == []
    want = x.reshape(blocks, 64)[:, (np.arange(64) + 32) % 64].ravel()
    np.testing.assert_array_equal(mem.from_device(po, np.int32, x.size), want)


def _shift_ptx(in_place: bool) -> str:
    """Block b reads a[(b + 1) % B] (its neighbour's 64 words) and stores them to its own
    64 words: of ``a`` itself (in place: the neighbour block reads them, unordered) or
    of ``out``."""
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry shift_blocks(.param .u64 a, .param .u64 out)
{{
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %nctaid.x;
    add.u32 %r4, %r2, 1;
    rem.u32 %r4, %r4, %r3;
    mad.lo.u32 %r5, %r4, 64, %r1;
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    mad.lo.u32 %r7, %r2, 64, %r1;
    mul.wide.u32 %rd5, %r7, 4;
    add.u64 %rd6, {"%rd1" if in_place else "%rd2"}, %rd5;
    st.global.u32 [%rd6], %r6;
    ret;
}}
"""


@pytest.mark.parametrize("scheduling", MODES)
@pytest.mark.parametrize("blocks", [2, 160])
def test_global_write_after_another_blocks_read(blocks, scheduling):
    # the reads touch memory no write has touched yet (logged without checks); the
    # neighbour block's store to those words must find them
    a = np.arange(64 * blocks, dtype=np.int32) * 3 + 1
    mem = GlobalMemory()
    pa, po = mem.to_device(a), mem.alloc(4 * a.size)
    with pytest.raises(RaceError) as e:
        load_ptx(_shift_ptx(True)).launch("shift_blocks", blocks, 64, [pa, po], mem,
                                          scheduling=scheduling)
    rep = e.value.report
    assert "write-after-read" in rep.what and rep.access.space == "global"
    assert (rep.access.kind, rep.other.kind) == ("write", "read")
    assert rep.access.address == rep.other.address
    assert (rep.other.block[0] + 1) % blocks == rep.access.block[0]
    assert "different blocks" in str(rep)
    mem2 = GlobalMemory()
    pa, po = mem2.to_device(a), mem2.alloc(4 * a.size)
    stats = load_ptx(_shift_ptx(False)).launch("shift_blocks", blocks, 64, [pa, po], mem2,
                                               scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem2.from_device(po, np.int32, a.size),
                                  np.roll(a.reshape(blocks, 64), -1, axis=0).ravel())


def _same_word_ptx(space: str, value: str) -> str:
    """Both warps of a 64-thread block store a value to word ``tid % 32`` of ``out``
    (global) or of a shared array then copied out after a barrier; ``value`` is "lane"
    (both warps store the same values) or "tid" (they differ)."""
    v = "%r2" if value == "lane" else "%r1"
    if space == "global":
        body = f"""
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], {v};"""
    else:
        body = f"""
    shl.b32 %r3, %r2, 2;
    mov.u32 %r4, s;
    add.u32 %r5, %r4, %r3;
    st.shared.u32 [%r5], {v};
    bar.sync 0;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra DONE;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r6;
DONE:"""
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry same_word(.param .u64 out)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    .shared .align 4 .b32 s[32];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;{body}
    ret;
}}
"""


@pytest.mark.parametrize("scheduling", MODES)
@pytest.mark.parametrize("space", ["global", "shared"])
def test_writes_of_the_same_value_by_two_warps_are_not_reported(space, scheduling):
    # the decision documented in hardware.simt.racecheck: whichever write lands, the
    # word holds the same value (compute-sanitizer's racecheck does not check global
    # memory at all); writes of different values are a write-after-write race
    mem = GlobalMemory()
    out = mem.alloc(128)
    stats = load_ptx(_same_word_ptx(space, "lane")).launch("same_word", 1, 64, [out], mem,
                                                          scheduling=scheduling)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32), np.arange(32))
    with pytest.raises(RaceError) as e:
        load_ptx(_same_word_ptx(space, "tid")).launch("same_word", 1, 64, [out], mem,
                                                      scheduling=scheduling)
    rep = e.value.report
    assert "write-after-write" in rep.what and rep.access.space == space
    assert rep.access.thread[0] % 32 == rep.other.thread[0] % 32
    assert rep.access.thread[0] // 32 != rep.other.thread[0] // 32


def test_gallery_warp_handshake_is_clean_in_two_warps():
    # lanes 0-15 of both warps store flags[1] (8) to out[lane]: the same value
    from hardware.simt import gallery
    mem = GlobalMemory()
    flags, out = mem.calloc(8), mem.alloc(4 * 32)
    stats = gallery.load("spinlock").launch("warp_handshake", 1, 64, [flags, out], mem)
    assert stats.warnings == []
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32), [8] * 16 + [7] * 16)


def _loop_read_ptx(space: str, barrier: bool) -> str:
    """Every thread reads word ``32 * j + lane`` (shared, after a barrier; one block of
    two warps) or ``64 * j + tid`` (global; blocks of 64) for j = 0..3 in one loop (one
    instruction, its addresses shifted each time), then warp 1 (shared) or block 1
    (global) stores to the words read at j = 3, after a barrier or not."""
    if space == "shared":
        setup = """
    mov.u32 %r9, s;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r9, %r3;
    st.shared.u32 [%r4], %r1;
    st.shared.u32 [%r4+256], %r1;
    bar.sync 0;
    shl.b32 %r3, %r2, 2;
    add.u32 %r4, %r9, %r3;"""
        load = "ld.shared.u32 %r6, [%r4];\n    add.u32 %r4, %r4, 128;"
        who = "shr.u32 %r8, %r1, 5;"
        store = "st.shared.u32 [%r4+-128], %r7;"
    else:
        setup = """
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd4, %rd1, %rd3;"""
        load = "ld.global.u32 %r6, [%rd4];\n    add.u64 %rd4, %rd4, 256;"
        who = "mov.u32 %r8, %ctaid.x;"
        store = "st.global.u32 [%rd4+-256], %r7;"
    lane = "and.b32 %r2, %r1, 31;" if space == "shared" else "mov.u32 %r2, %r1;"
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry loop_read(.param .u64 a)
{{
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .reg .pred %p<3>;
    .shared .align 4 .b32 s[128];
    ld.param.u64 %rd1, [a];
    mov.u32 %r1, %tid.x;
    {lane}{setup}
    mov.u32 %r5, 0;
    mov.u32 %r7, 0;
LOOP:
    {load}
    add.u32 %r7, %r7, %r6;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p1, %r5, 4;
    @%p1 bra LOOP;
    {"bar.sync 0;" if barrier else ""}
    {who}
    setp.ne.u32 %p2, %r8, 1;
    @%p2 bra DONE;
    {store}
DONE:
    ret;
}}
"""


@pytest.mark.parametrize("scheduling", MODES)
@pytest.mark.parametrize("space", ["shared", "global"])
def test_a_race_with_a_later_iteration_of_a_read_loop(space, scheduling):
    # the loop's reads are logged from one instruction whose addresses shift each time;
    # the store meets only the words of the last iteration
    a = np.arange(256, dtype=np.int32)
    mem = GlobalMemory()
    pa = mem.to_device(a)
    grid, block = (1, 64) if space == "shared" else (2, 64)
    with pytest.raises(RaceError) as e:
        load_ptx(_loop_read_ptx(space, False)).launch("loop_read", grid, block, [pa], mem,
                                                      scheduling=scheduling)
    rep = e.value.report
    assert "write-after-read" in rep.what and rep.access.space == space
    assert (rep.access.kind, rep.other.kind) == ("write", "read")
    if space == "shared":
        assert rep.access.thread[0] // 32 == 1 and rep.other.thread[0] // 32 == 0
        assert rep.access.address == rep.other.address == 384 + 4 * (rep.access.thread[0] % 32)
    else:
        assert rep.access.block == (1, 0, 0) and rep.other.block == (0, 0, 0)
        assert rep.access.address == rep.other.address == pa + 4 * (192 + rep.access.thread[0])
    if space == "shared":  # a barrier orders the block's reads before the store
        stats = load_ptx(_loop_read_ptx(space, True)).launch("loop_read", grid, block, [pa],
                                                             mem, scheduling=scheduling)
        assert stats.warnings == []
