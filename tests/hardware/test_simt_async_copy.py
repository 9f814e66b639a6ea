"""cp.async groups (hardware/simt/async_copy.py): data lands in shared memory when the
issuing thread's wait_group / wait_all completes its group, and touching a destination
before that is reported as a race. Expected values are written by hand from the PTX ISA
text of cp.async.commit_group / wait_group (9.7.9.25.3)."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, UnsupportedPtxError, load_ptx

HEAD = """.version 9.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<10>;
    .shared .align 16 .b8 smem[512];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;          // &src[tid]
    add.s64 %rd5, %rd2, %rd3;          // &out[tid]
    mov.u32 %r1, smem;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;             // &smem[tid] (group 0 area, 4 bytes per thread)
    add.u32 %r4, %r3, 256;             // &smem[64 + tid] (group 1 area)
"""
TAIL = """
    ret;
}
"""


def run(body: str, threads: int = 32, src=None, **launch):
    src = np.arange(1, 65, dtype=np.uint32) * 3 if src is None else src
    mem = GlobalMemory()
    ps = mem.to_device(src)
    po = mem.alloc(4 * 64)
    load_ptx(HEAD + body + TAIL).launch("k", 1, threads, [ps, po], mem, **launch)
    return mem.from_device(po, np.uint32, 64)


#: group 0: src[tid] -> smem[tid]; group 1: src[tid + 32] -> smem[64 + tid]; then
#: wait_group 1 (group 1 left in flight)
TWO_GROUPS = """
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.commit_group;
    cp.async.ca.shared.global [%r4], [%rd4+128], 4;
    cp.async.commit_group;
    cp.async.wait_group 1;
"""


def test_wait_group_completes_all_but_the_newest_groups():
    # wait_group 1 leaves group 1 in flight, so group 0's data is there
    body = TWO_GROUPS + """
    ld.shared.u32 %r10, [%r3];
    st.global.u32 [%rd5], %r10;
    cp.async.wait_group 0;
    ld.shared.u32 %r11, [%r4];
    st.global.u32 [%rd5+128], %r11;
"""
    out = run(body)
    src = np.arange(1, 65) * 3
    assert out[:32].tolist() == src[:32].tolist()
    assert out[32:].tolist() == src[32:].tolist()


def test_reading_a_group_still_in_flight_is_a_race():
    body = TWO_GROUPS + """
    ld.shared.u32 %r11, [%r4];
"""
    with pytest.raises(ExecutionError) as e:
        run(body)
    msg = str(e.value)
    # the address (shared offset 256 of thread 0), the reader, the instruction, the copy
    assert "race" in msg and "0x100" in msg and "thread (0, 0, 0)" in msg
    copy_line = (HEAD + body).splitlines().index("    cp.async.ca.shared.global [%r4], [%rd4+128], 4;") + 1
    assert "ld.shared.u32 %r11, [%r4]" in msg and f"cp.async (line {copy_line}," in msg


def test_an_uncommitted_copy_is_not_completed_by_wait_group():
    # wait_group waits for committed groups only; wait_all commits first
    body = """
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.wait_group 0;
    ld.shared.u32 %r10, [%r3];
"""
    with pytest.raises(ExecutionError, match="race"):
        run(body)
    ok = """
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.wait_all;
    ld.shared.u32 %r10, [%r3];
    st.global.u32 [%rd5], %r10;
"""
    assert run(ok)[:32].tolist() == (np.arange(1, 33) * 3).tolist()


def test_a_store_to_a_pending_destination_is_a_race():
    body = """
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.commit_group;
    st.shared.u32 [%r3], 7;
"""
    with pytest.raises(ExecutionError, match="race: store"):
        run(body)


def test_another_thread_reading_before_the_issuer_waits_is_a_race():
    # lane 0 copies; lane 1 waits (it has nothing in flight) and reads lane 0's slot
    body = """
    setp.eq.u32 %p1, %r0, 0;
    @%p1 cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.commit_group;
    @!%p1 cp.async.wait_group 0;
    @!%p1 ld.shared.u32 %r10, [%r1];
    cp.async.wait_group 0;
"""
    with pytest.raises(ExecutionError, match=r"thread \(1, 0, 0\).*race.*thread \(0, 0, 0\)"):
        run(body)


def test_the_source_is_read_when_the_copy_is_issued():
    body = """
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.commit_group;
    st.global.u32 [%rd4], 99;
    cp.async.wait_group 0;
    ld.shared.u32 %r10, [%r3];
    st.global.u32 [%rd5], %r10;
"""
    assert run(body)[:32].tolist() == (np.arange(1, 33) * 3).tolist()


@pytest.mark.parametrize("form,size,valid", [
    ("cp.async.cg.shared.global [%r5], [%rd6], 16, 8;", 16, 8),
    ("cp.async.ca.shared.global [%r5], [%rd6], 8, 4;", 8, 4),
    ("cp.async.ca.shared.global [%r5], [%rd6], 8;", 8, 8),
    ("cp.async.cg.shared.global [%r5], [%rd6], 16, %r6;", 16, 12),
    ("cp.async.cg.shared.global [%r5], [%rd6], 16, %p2;", 16, 0),
    ("cp.async.cg.shared.global [%r5], [%rd6], 16, %p3;", 16, 16),
    ("cp.async.cg.shared.global.L2::cache_hint [%r5], [%rd6], 16, 4, %rd7;", 16, 4),
])
def test_copy_sizes_and_zero_fill(form, size, valid):
    # thread t copies `size` bytes from src + 16 t to smem + 16 t; bytes past `valid` are 0
    body = f"""
    shl.b32 %r7, %r0, 4;
    add.u32 %r5, %r1, %r7;
    mul.wide.u32 %rd8, %r0, 16;
    add.s64 %rd6, %rd1, %rd8;
    mov.u32 %r6, 12;
    setp.eq.u32 %p2, %r0, %r0;          // true: ignore the source
    setp.ne.u32 %p3, %r0, %r0;
    mov.u64 %rd7, 0;
    {form}
    cp.async.wait_all;
    ld.shared.v4.u32 {{%r10, %r11, %r12, %r13}}, [%r5];
    add.s64 %rd9, %rd2, %rd8;
    st.global.v4.u32 [%rd9], {{%r10, %r11, %r12, %r13}};
"""
    src = np.arange(256, dtype=np.uint8).view(np.uint32)
    # an 8-byte cp-size leaves bytes 8-15 of each 16 unwritten: read as shared
    # memory's initial zeros with initcheck off
    out = run(body, threads=8, src=src, sanitize={"initcheck": "off"}).view(np.uint8)[:128]
    want = np.zeros(128, np.uint8)
    for t in range(8):
        want[16 * t: 16 * t + valid] = np.arange(16 * t, 16 * t + valid)
    assert out.tolist() == want.tolist()


@pytest.mark.parametrize("form,why", [
    ("cp.async.cg.shared.global [%r3], [%rd4], 8;", "cp-size"),
    ("cp.async.ca.shared.global [%r3], [%rd4], 12;", "cp-size"),
    ("cp.async.ca.shared.global [%r3], [%rd4], 4, 8;", "src-size"),
    ("cp.async.wait_group %r3;", "constant"),
    ("cp.async.bulk.shared::cluster.global [%r3], [%rd4], 16, [%r4];", "bulk"),
])
def test_malformed_copies_are_refused(form, why):
    with pytest.raises(UnsupportedPtxError, match=why):
        run(form)


def test_a_copy_past_the_source_allocation_faults_but_src_size_zero_reads_nothing():
    far = """
    add.s64 %rd6, %rd1, 4096;
    cp.async.ca.shared.global [%r3], [%rd6], 4{tail};
    cp.async.wait_all;
    ld.shared.u32 %r10, [%r3];
    st.global.u32 [%rd5], %r10;
"""
    with pytest.raises(ExecutionError, match="out-of-bounds"):
        run(far.format(tail=""))
    assert run(far.format(tail=", 0"))[:32].tolist() == [0] * 32


_CP_ASYNC_PTX = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0, .param .u64 p1)
{
    .shared .align 16 .b8 buf[1024];
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, buf;
    add.s32 %r4, %r3, %r2;
    cp.async.cg.shared.global [%r4], [%rd4], 16, 8;
    add.s32 %r5, %r4, 512;
    cp.async.ca.shared.global [%r5], [%rd4+12], 4;
    cp.async.commit_group;
    cp.async.wait_group 0;
    bar.sync 0;
    ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4];
    ld.shared.u32 %r10, [%r5];
    add.s64 %rd5, %rd2, %rd3;
    st.global.v4.u32 [%rd5], {%r6, %r7, %r8, %r10};
    ret;
}
"""


def test_cp_async_copies_with_zero_fill():
    """cp.async (PTX ISA 9.7.9.25): cp-size bytes from global to shared, the bytes past
    src-size zero-filled; commit_group / wait_group complete it."""
    x = np.arange(32 * 4, dtype=np.uint32).reshape(32, 4) + 1000
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(16 * 32)
    load_ptx(_CP_ASYNC_PTX).launch("k", 1, 32, [px, po], mem)
    got = mem.from_device(po, np.uint32, 128).reshape(32, 4)
    exp = np.stack([x[:, 0], x[:, 1], np.zeros(32, np.uint32), x[:, 3]], axis=1)
    np.testing.assert_array_equal(got, exp)
