"""initcheck: reads of never-written shared, local and device memory
(hardware.simt.sanitizer; per-byte shadows in hardware.simt.executor and .memory).

The kernels with undefined behaviour are tests/hardware/data/ub/initcheck_*.cu (compiled
with ``nvcc -ptx -arch=sm_90``); each corrected twin (``*_fixed``) runs clean with the
outputs NumPy gives.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, UninitializedReadError, load_ptx

UB = Path(__file__).parent / "data" / "ub"


def _ptx(name: str) -> str:
    return (UB / f"{name}.ptx").read_text()


def _line(name: str, pattern: str) -> int:
    lines = [i + 1 for i, t in enumerate(_ptx(name).splitlines()) if re.search(pattern, t)]
    assert len(lines) == 1, lines
    return lines[0]


def _floats(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_unwritten_shared_memory_is_reported():
    x = _floats(32)
    mem = GlobalMemory()
    px, out = mem.to_device(x), mem.alloc(256)
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_ptx("initcheck_shared")).launch("shared_unwritten", 1, 64, [px, out], mem)
    r = e.value.report
    assert r.tool == "initcheck" and r.access.space == "shared" and r.access.kind == "read"
    assert r.access.thread == (32, 0, 0) and r.access.address == 128   # s[32]
    assert "shared variable '_ZZ16shared_unwrittenE1s' (256 bytes at 0x0) + 128" in \
        r.access.allocation
    assert r.access.line == _line("initcheck_shared", r"ld\.shared\.f32")
    # as a warning the launch completes; unwritten shared memory reads as zero here
    st = load_ptx(_ptx("initcheck_shared")).launch("shared_unwritten", 1, 64, [px, out],
                                                   mem, sanitize={"initcheck": "warn"})
    assert len(st.warnings) == 1 and "uninitialized shared memory" in st.warnings[0]


def test_unwritten_shared_twin_is_clean():
    x = _floats(32)
    mem = GlobalMemory()
    px, out = mem.to_device(x), mem.alloc(256)
    st = load_ptx(_ptx("initcheck_shared_fixed")).launch("shared_unwritten", 1, 64,
                                                         [px, out], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 64),
                                  np.concatenate([x, np.zeros(32, np.float32)]))
    assert st.warnings == []


def test_unwritten_device_memory_is_reported():
    x = _floats(64)
    mem = GlobalMemory()
    px, acc = mem.to_device(x), mem.alloc(256, name="acc")
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_ptx("initcheck_global")).launch("accumulate", 2, 32, [px, acc], mem)
    r = e.value.report
    assert r.access.space == "global" and r.access.address == acc
    assert r.access.allocation.startswith("allocation 'acc' (256 bytes at")
    assert r.access.block == (0, 0, 0) and r.access.thread == (0, 0, 0)
    assert r.access.line == _line("initcheck_global", r"ld\.global\.f32\s+%f2")
    # the host writes count: after calloc or to_device the same kernel is clean
    for start in (np.zeros(64, np.float32), np.ones(64, np.float32)):
        p = mem.calloc(256) if not start.any() else mem.to_device(start)
        load_ptx(_ptx("initcheck_global")).launch("accumulate", 2, 32, [px, p], mem)
        np.testing.assert_array_equal(mem.from_device(p, np.float32, 64), start + x)


def test_partly_written_device_memory_is_reported_at_the_first_unwritten_byte():
    mem = GlobalMemory()
    x = _floats(64)
    px, acc = mem.to_device(x), mem.alloc(256, name="acc")
    mem.write(acc, np.zeros(40, np.float32))           # elements 0-39 written
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_ptx("initcheck_global")).launch("accumulate", 2, 32, [px, acc], mem)
    assert e.value.report.access.address == acc + 160
    assert e.value.report.access.block == (1, 0, 0)
    assert e.value.report.access.thread == (8, 0, 0)


def test_unwritten_device_twin_is_clean():
    x = _floats(64)
    mem = GlobalMemory()
    px, acc = mem.to_device(x), mem.alloc(256)
    load_ptx(_ptx("initcheck_global_fixed")).launch("accumulate", 2, 32, [px, acc], mem)
    np.testing.assert_array_equal(mem.from_device(acc, np.float32, 64), x)


def test_unwritten_local_memory_is_reported_and_the_twin_is_clean():
    n = np.full(32, 8, np.int32)
    n[5] = 3
    k = np.arange(32, dtype=np.int32) % 8
    k[5] = 6                                           # thread 5 reads loc[6], unwritten
    mem = GlobalMemory()
    pn, pk, out = mem.to_device(n), mem.to_device(k), mem.alloc(128)
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_ptx("initcheck_local")).launch("local_unwritten", 1, 32, [pn, pk, out], mem)
    r = e.value.report
    assert r.access.space == "local" and r.access.thread == (5, 0, 0)
    assert r.access.address == 24
    assert r.access.allocation.startswith("local variable '__local_depot0' (32 bytes")
    assert r.access.line == _line("initcheck_local", r"ld\.local\.f32")
    load_ptx(_ptx("initcheck_local_fixed")).launch("local_unwritten", 1, 32, [pn, pk, out],
                                                   mem)
    t = np.arange(32)
    want = np.where(k < n, t + k, 0).astype(np.float32)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32), want)


def test_initcheck_off_reads_zeros():
    mem = GlobalMemory()
    x = _floats(64)
    px, acc = mem.to_device(x), mem.alloc(256)
    st = load_ptx(_ptx("initcheck_global")).launch("accumulate", 2, 32, [px, acc], mem,
                                                   sanitize={"initcheck": "off"})
    np.testing.assert_array_equal(mem.from_device(acc, np.float32, 64), x)
    assert st.warnings == []


def test_atomics_read_the_memory_they_update():
    # atom.global.add on never-written memory is an uninitialized read too
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    atom.global.add.u32 %r1, [%rd1], 1;
    ret;
}
"""
    mem = GlobalMemory()
    c = mem.alloc(4, name="counter")
    with pytest.raises(UninitializedReadError, match="uninitialized global memory") as e:
        load_ptx(ptx).launch("k", 1, 32, [c], mem)
    assert e.value.report.access.kind == "atomic" and e.value.report.access.address == c
    z = mem.calloc(4)
    load_ptx(ptx).launch("k", 1, 32, [z], mem)
    assert mem.read(z, np.uint32, 1)[0] == 32


_LOOP_READ = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry loop_read(.param .u64 x, .param .u64 out, .param .u32 n)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r5, [n];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    mov.f32 %f1, 0f00000000;
    mov.u32 %r2, 0;
LOOP:
    ld.global.f32 %f2, [%rd4];
    add.f32 %f1, %f1, %f2;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, %r5;
    @%p1 bra LOOP;
    add.u64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f1;
    ret;
}
"""


@pytest.mark.parametrize("gap", [0, 31, 63])
def test_one_unwritten_word_inside_a_read_range_is_reported(gap):
    # the range of the warp's addresses lies in one allocation and is all but one word
    # written: the fast path (whole range written) must not hide the word
    mem = GlobalMemory()
    px, out = mem.alloc(256), mem.alloc(256)
    x = _floats(64)
    mem.write(px, x[:gap])
    mem.write(px + 4 * (gap + 1), x[gap + 1:])
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_LOOP_READ).launch("loop_read", 1, 64, [px, out, 3], mem)
    assert e.value.report.access.thread == (gap, 0, 0)
    assert e.value.report.access.address == px + 4 * gap


def test_repeated_reads_of_written_memory_are_clean_and_right():
    # the same instruction repeats its addresses: checked once, then taken as written
    mem = GlobalMemory()
    x = _floats(64)
    px, out = mem.to_device(x), mem.alloc(256)
    load_ptx(_LOOP_READ).launch("loop_read", 1, 64, [px, out, 3], mem)
    want = (x + x) + x  # float32 additions in program order
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 64), want)


def test_repeated_reads_of_unwritten_memory_warn_each_launch():
    # a warning is not remembered as a clean read: a second launch warns again
    mem = GlobalMemory()
    px, out = mem.alloc(256), mem.alloc(256)
    mod = load_ptx(_LOOP_READ)
    for _ in range(2):
        st = mod.launch("loop_read", 1, 64, [px, out, 3], mem, sanitize={"initcheck": "warn"})
        assert any("uninitialized global memory" in w for w in st.warnings)


_SHARED_GAP = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry shared_gap(.param .u64 out, .param .u32 gap)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;
    .reg .pred %p<2>;
    .shared .align 4 .f32 s[64];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [gap];
    mov.u32 %r1, %tid.x;
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, s;
    add.u32 %r5, %r4, %r3;
    cvt.rn.f32.u32 %f1, %r1;
    setp.eq.u32 %p1, %r1, %r2;
    @!%p1 st.shared.f32 [%r5], %f1;
    bar.sync 0;
    ld.shared.f32 %f2, [%r5];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f2;
    ret;
}
"""


@pytest.mark.parametrize("sanitize", [None, "initcheck"])
@pytest.mark.parametrize("gap", [0, 40, 63])
def test_one_unwritten_shared_word_among_written_ones_is_reported(gap, sanitize):
    mem = GlobalMemory()
    out = mem.alloc(256)
    with pytest.raises(UninitializedReadError) as e:
        load_ptx(_SHARED_GAP).launch("shared_gap", 1, 64, [out, gap], mem, sanitize=sanitize)
    assert e.value.report.access.thread == (gap, 0, 0)
    assert e.value.report.access.address == 4 * gap
    # every word written: clean, each thread reads its own value
    load_ptx(_SHARED_GAP).launch("shared_gap", 1, 64, [out, 64], mem, sanitize=sanitize)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 64),
                                  np.arange(64, dtype=np.float32))
