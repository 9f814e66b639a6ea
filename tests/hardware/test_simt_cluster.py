"""Thread-block clusters (sm_90): launch shapes, special registers, distributed shared
memory (mapa, .shared::cluster accesses, getctarank), barrier.cluster. Expected values
come from the CUDA definitions of the cluster index and rank, computed in NumPy."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import (DeadlockError, ExecutionError, LaunchError,
                                  MemoryAccessError, RaceError)

DATA = pathlib.Path(__file__).parent / "data"
PTXAS = shutil.which("ptxas")


def assemble_ok(src: str) -> None:
    if PTXAS is None:
        return
    r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def ring_reference(x: np.ndarray, nb: int, nt: int, size: int) -> np.ndarray:
    xx = x.reshape(nb, nt)
    want = np.empty_like(xx)
    for b in range(nb):
        rank = b % size
        peer = b - rank + (rank + 1) % size
        want[b] = xx[b] + 2 * np.roll(xx[peer], -1)
    return want


def test_nvcc_cluster_ring_distributed_shared_memory():
    src = (DATA / "cluster_ring.ptx").read_text()
    m = load_ptx(src)
    mem = GlobalMemory()
    nb, nt = 8, 128
    x = np.arange(nb * nt, dtype=np.int32) * 7 - 300
    a, out, r = mem.to_device(x), mem.alloc(4 * nb * nt), mem.alloc(16 * nb)
    stats = m.launch("cluster_ring", nb, nt, [a, out, r], mem)
    got = mem.from_device(out, np.int32, nb * nt).reshape(nb, nt)
    assert (got == ring_reference(x, nb, nt, 4)).all()
    ranks = mem.from_device(r, np.uint32, 4 * nb).reshape(nb, 4)
    b = np.arange(nb)
    assert (ranks[:, 0] == b % 4).all() and (ranks[:, 1] == 4).all()
    assert (ranks[:, 2] == b % 4).all() and (ranks[:, 3] == b).all()
    assert not stats.warnings
    # the kernel's .reqnctapercluster 4, 1, 1 decides the shape
    with pytest.raises(LaunchError, match="differs from the cluster"):
        m.launch("cluster_ring", nb, nt, [a, out, r], mem, cluster=2)
    with pytest.raises(LaunchError, match="not a multiple of cluster"):
        m.launch("cluster_ring", 6, nt, [a, out, r], mem)


def test_missing_cluster_sync_is_a_race():
    src = (DATA / "cluster_ring.ptx").read_text()
    first = "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n"
    assert first in src
    m = load_ptx(src.replace(first, "", 1))
    mem = GlobalMemory()
    x = np.arange(8 * 128, dtype=np.int32)
    a, out, r = mem.to_device(x), mem.alloc(4 * 8 * 128), mem.alloc(16 * 8)
    with pytest.raises(RaceError, match="different blocks"):
        m.launch("cluster_ring", 8, 128, [a, out, r], mem)


HEAD = """.version 8.6
.target sm_90a
.address_size 64
"""

SPECIAL = HEAD + """.visible .entry k(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %nctaid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 64;
    add.u64 %rd3, %rd1, %rd2;
    mov.u32 %r5, %tid.x;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra $L_end;
    mov.u32 %r10, %cluster_ctaid.x;
    mov.u32 %r11, %cluster_ctaid.y;
    mov.u32 %r12, %cluster_ctaid.z;
    mov.u32 %r13, %cluster_nctaid.x;
    mov.u32 %r14, %cluster_nctaid.y;
    mov.u32 %r15, %cluster_nctaid.z;
    mov.u32 %r16, %clusterid.x;
    mov.u32 %r17, %clusterid.y;
    mov.u32 %r18, %clusterid.z;
    mov.u32 %r19, %nclusterid.x;
    mov.u32 %r20, %nclusterid.y;
    mov.u32 %r21, %nclusterid.z;
    mov.u32 %r22, %cluster_ctarank;
    mov.u32 %r23, %cluster_nctarank;
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r24, 1, 0, %p1;
    st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r13};
    st.global.v4.u32 [%rd3+16], {%r14, %r15, %r16, %r17};
    st.global.v4.u32 [%rd3+32], {%r18, %r19, %r20, %r21};
    st.global.v4.u32 [%rd3+48], {%r22, %r23, %r24, %r1};
$L_end:
    ret;
}
"""


@pytest.mark.parametrize("grid, cluster", [((4, 2), (2, 2)), ((6, 2), (3, 1)),
                                           ((4, 4), (1, 4)), ((3, 2), None)])
def test_special_registers(grid, cluster):
    assemble_ok(SPECIAL)
    m = load_ptx(SPECIAL)
    mem = GlobalMemory()
    gx, gy = grid
    out = mem.calloc(64 * gx * gy)
    m.launch("k", grid, 32, [out], mem, cluster=cluster)
    got = mem.from_device(out, np.uint32, 16 * gx * gy).reshape(gy, gx, 16)
    cx, cy = cluster or (1, 1)
    for y in range(gy):
        for x in range(gx):
            r = got[y, x]
            assert list(r[0:3]) == [x % cx, y % cy, 0]
            assert list(r[3:6]) == [cx, cy, 1]
            assert list(r[6:9]) == [x // cx, y // cy, 0]
            assert list(r[9:12]) == [gx // cx, gy // cy, 1]
            assert r[12] == (x % cx) + cx * (y % cy) and r[13] == cx * cy
            assert r[14] == (cluster is not None) and r[15] == x


def test_cluster_launch_limits():
    m = load_ptx(SPECIAL)
    mem = GlobalMemory()
    out = mem.calloc(64 * 32)
    with pytest.raises(LaunchError, match="more than 8 .the portable limit"):
        m.launch("k", 16, 32, [out], mem, cluster=16)
    m.launch("k", 16, 32, [out], mem, cluster=16, non_portable_cluster=True)
    with pytest.raises(LaunchError, match="more than 16"):
        m.launch("k", 32, 32, [out], mem, cluster=32, non_portable_cluster=True)
    with pytest.raises(LaunchError, match="dimension y"):
        m.launch("k", (2, 3), 32, [out], mem, cluster=(1, 2))
    with pytest.raises(LaunchError, match="cluster"):
        m.launch("k", 2, 32, [out], mem, cluster=(0, 1))
    explicit = load_ptx(SPECIAL.replace(".entry k(.param .u64 out)",
                                        ".entry k(.param .u64 out) .explicitcluster "
                                        ".maxclusterrank 2"))
    with pytest.raises(LaunchError, match="explicitcluster"):
        explicit.launch("k", 2, 32, [out], mem)
    with pytest.raises(LaunchError, match="maxclusterrank 2"):
        explicit.launch("k", 4, 32, [out], mem, cluster=4)
    explicit.launch("k", 4, 32, [out], mem, cluster=2)


DSMEM = HEAD + """.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 cell[32];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    mov.u32 %r4, %ctaid.x;
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, cell;
    add.u32 %r7, %r6, %r5;
    st.shared.u32 [%r7], 0;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    // every CTA adds (its rank + 1) to lane tid of every CTA, with red, then CTA
    // rank 0 stores 1000 into lane tid of the last CTA
    mov.u32 %r8, 0;
$L_loop:
    mapa.shared::cluster.u32 %r9, %r7, %r8;
    add.u32 %r10, %r2, 1;
    red.shared::cluster.add.u32 [%r9], %r10;
    getctarank.shared::cluster.u32 %r11, %r9;
    setp.ne.u32 %p1, %r11, %r8;
    @%p1 trap;
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p2, %r8, %r3;
    @%p2 bra $L_loop;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    setp.ne.u32 %p3, %r2, 0;
    @%p3 bra $L_skip;
    sub.u32 %r12, %r3, 1;
    mapa.shared::cluster.u32 %r13, %r7, %r12;
    ld.shared::cluster.u32 %r14, [%r13];
    add.u32 %r14, %r14, 1000;
    st.shared::cluster.u32 [%r13], %r14;
$L_skip:
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ld.shared.u32 %r15, [%r7];
    getctarank.shared::cluster.u32 %r16, %r7;
    mad.lo.u32 %r17, %r4, 32, %r1;
    mul.wide.u32 %rd2, %r17, 8;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r15, %r16};
    ret;
}
"""


@pytest.mark.parametrize("size", [2, 4])
def test_shared_cluster_red_ld_st_and_getctarank(size):
    assemble_ok(DSMEM)
    m = load_ptx(DSMEM)
    mem = GlobalMemory()
    nb = 2 * size
    out = mem.calloc(8 * 32 * nb)
    stats = m.launch("k", nb, 32, [out], mem, cluster=size)
    got = mem.from_device(out, np.uint32, 2 * 32 * nb).reshape(nb, 32, 2)
    total = sum(r + 1 for r in range(size))
    for b in range(nb):
        rank = b % size
        want = total + (1000 if rank == size - 1 else 0)
        assert (got[b, :, 0] == want).all()
        assert (got[b, :, 1] == rank).all()
    assert not stats.warnings


def _one_thread(body: str, decls: str = "") -> str:
    return HEAD + f""".visible .entry k()
{{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b32 cell[32];
    {decls}
    mov.u32 %r1, cell;
{body}
    ret;
}}
"""


@pytest.mark.parametrize("body, err, match", [
    ("mov.u32 %r2, 2;\n    mapa.shared::cluster.u32 %r3, %r1, %r2;", ExecutionError,
     "mapa to CTA rank 2, outside the cluster of 2"),
    ("mov.u32 %r2, 1;\n    mapa.shared::cluster.u32 %r3, %r1, %r2;\n    "
     "ld.shared::cta.u32 %r4, [%r3];", MemoryAccessError, "used by a .shared::cta access"),
    ("mov.u32 %r3, 0x3000000;\n    ld.shared::cluster.u32 %r4, [%r3];", MemoryAccessError,
     "names CTA rank 2, outside the cluster of 2"),
    ("barrier.cluster.wait;", ExecutionError, "without a preceding barrier.cluster.arrive"),
    ("mov.u32 %r5, %tid.x;\n    setp.ge.u32 %p1, %r5, 32;\n    @%p1 bra $L_late;\n"
     "    barrier.cluster.arrive;\n    barrier.cluster.arrive;\n$L_late:\n"
     "    barrier.cluster.arrive;", ExecutionError, "arrive twice"),
])
def test_cluster_misuse(body, err, match):
    src = _one_thread(body)
    assemble_ok(src)
    m = load_ptx(src)
    with pytest.raises(err, match=match):
        m.launch("k", 2, 64, [], GlobalMemory(), cluster=2)


def test_exited_threads_count_as_arrived_at_the_cluster_barrier():
    body = """    mov.u32 %r2, %cluster_ctarank;
    setp.eq.u32 %p1, %r2, 1;
    @%p1 bra $L_out;
    barrier.cluster.arrive;
    barrier.cluster.wait;
$L_out:
"""
    src = _one_thread(body)
    assemble_ok(src)
    load_ptx(src).launch("k", 2, 64, [], GlobalMemory(), cluster=2)


def test_cluster_barrier_deadlock_is_reported():
    """CTA rank 1 waits on an mbarrier nobody arrives at, so it never reaches the
    cluster barrier that CTA rank 0 waits at."""
    body = """    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r5, %tid.x;
    setp.eq.u32 %p3, %r5, 0;
    mov.u32 %r6, bar;
    @%p3 mbarrier.init.shared::cta.b64 [%r6], 1;
    bar.sync 0;
    setp.eq.u32 %p1, %r2, 1;
    @!%p1 bra $L_cluster;
$L_spin:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r6], 0;
    @!%p2 bra $L_spin;
$L_cluster:
    barrier.cluster.arrive;
    barrier.cluster.wait;
"""
    src = _one_thread(body, ".shared .align 8 .b64 bar;")
    assemble_ok(src)
    m = load_ptx(src)
    with pytest.raises(DeadlockError) as e:
        m.launch("k", 2, 32, [], GlobalMemory(), cluster=2)
    msg = str(e.value)
    assert "cluster barrier of the cluster of 2 CTA(s) from block (0, 0, 0): phase 0, " \
           "32 of 64 threads arrived" in msg
    assert "mbarrier at shared address" in msg and "of block (1, 0, 0)" in msg
