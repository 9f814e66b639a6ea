"""launch(..., workers=...): the waves of a launch in worker processes (or an executor's
tasks), merged in block order into the same bytes and LaunchStats as one process."""
import concurrent.futures as cf
import dataclasses

import numpy as np
import pytest

import hardware.simt.module as module
from hardware.simt import GlobalMemory, LaunchError, MemoryAccessError, gallery, load_ptx

HEAD = """.version 8.0
.target sm_80
.address_size 64
"""


def _vector_add(n, **kw):
    a = np.arange(n, dtype=np.float32) * 0.75
    b = np.float32(1.5) - np.arange(n, dtype=np.float32) / 3
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.alloc(4 * n)
    st = load_ptx(gallery.source("vector_add")).launch(
        "vector_add", -(-n // 256), 256, [pa, pb, pc, n], mem, **kw)
    return mem.from_device(pc, np.float32, n), (a + b), st, mem


@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
def test_an_executor_gives_the_bytes_and_stats_of_one_process(monkeypatch, chunks):
    monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", 512)  # 2 blocks a wave: 11 waves
    n = 21 * 256 + 5
    one, want, st_one, mem_one = _vector_add(n)
    with cf.ThreadPoolExecutor(chunks) as ex:
        par, _, st_par, mem_par = _vector_add(n, workers=ex)
    np.testing.assert_array_equal(par.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(one.view(np.uint32), want.view(np.uint32))
    assert dataclasses.asdict(st_par) == dataclasses.asdict(st_one)
    np.testing.assert_array_equal(mem_par.buffer[:mem_par.used], mem_one.buffer[:mem_one.used])
    np.testing.assert_array_equal(mem_par.init_shadow[:mem_par.used],
                                  mem_one.init_shadow[:mem_one.used])


def test_worker_processes():
    """Two spawned processes (the waves they run have the default size)."""
    n = 3 * 2**17 + 100  # four waves of 512 blocks
    one, want, st_one, _ = _vector_add(n, sanitize=False)
    par, _, st_par, _ = _vector_add(n, sanitize=False, workers=2)
    np.testing.assert_array_equal(par.view(np.uint32), want.view(np.uint32))
    assert dataclasses.asdict(st_par) == dataclasses.asdict(st_one)


def test_global_atomics_are_refused():
    mod = gallery.load("module_vars")
    mem = GlobalMemory()
    x, y = mem.to_device(np.ones(8, np.float32)), mem.alloc(32)
    with pytest.raises(LaunchError, match=r"atom.*global memory.*launch without workers"):
        mod.launch("poly", 2, 4, [x, y, 8], mem, workers=2)


SAME_BYTE = HEAD + """
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %ctaid.x;
    add.u32 %r1, %r1, 1;
    st.global.u32 [%rd1+8], %r1;
    ret;
}
"""


def test_two_workers_changing_one_byte_is_an_error(monkeypatch):
    monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", 32)  # a block a wave
    mem = GlobalMemory()
    out = mem.calloc(16, name="out")
    with cf.ThreadPoolExecutor(2) as ex:
        with pytest.raises(LaunchError, match=r"blocks 0-1 and blocks 2-3.*'out'.*\+ 8"):
            load_ptx(SAME_BYTE).launch("k", 4, 32, [out], mem, workers=ex,
                                       sanitize={"racecheck": "off"})
    # the first chunk's bytes are merged, nothing of the second
    assert mem.from_device(out, np.uint32, 4).tolist() == [0, 0, 2, 0]


FAULT = HEAD + """
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""


def test_a_fault_keeps_the_bytes_written_before_it(monkeypatch):
    monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", 32)
    results = []
    for workers in (None, 3):
        mem = GlobalMemory()
        out = mem.calloc(4 * 5, name="out")  # blocks 5 and 6 write past the end
        ex = cf.ThreadPoolExecutor(workers) if workers else None
        with pytest.raises(MemoryAccessError, match=r"block \(5, 0, 0\)"):
            load_ptx(FAULT).launch("k", 7, 32, [out], mem, workers=ex)
        if ex:
            ex.shutdown()
        results.append(mem.from_device(out, np.uint32, 5).tolist())
    assert results[0] == results[1] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_workers_argument(bad):
    with pytest.raises(LaunchError, match="workers must be None, a positive int"):
        _vector_add(300, workers=bad)
