"""A grid of many waves compiles one wave and runs it for each set of blocks
(Wave.rebase rewrites the block and cluster special registers): the same bits and the
same LaunchStats as a launch that runs the grid as one wave."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import hardware.simt.module as module
from hardware.simt import GlobalMemory, gallery, load_ptx

DATA = Path(__file__).parent / "data"


def _vector_add(n: int, mod=None):
    a = np.arange(n, dtype=np.float32) * 0.5
    b = np.float32(3.25) - np.arange(n, dtype=np.float32)
    mem = GlobalMemory()
    pa, pb, pc = mem.to_device(a), mem.to_device(b), mem.alloc(4 * n)
    mod = mod or gallery.load("vector_add")
    st = mod.launch("vector_add", -(-n // 256), 256, [pa, pb, pc, n], mem)
    return mem.from_device(pc, np.float32, n), a + b, st, mod.kernel("vector_add")


def test_many_waves_give_the_bits_and_stats_of_one(monkeypatch):
    n = 10 * 256 + 17  # 11 blocks
    one, want, st_one, _ = _vector_add(n)
    monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", 512)  # two blocks a wave
    many, _, st_many, k = _vector_add(n, load_ptx(gallery.source("vector_add")))
    np.testing.assert_array_equal(one.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(many.view(np.uint32), want.view(np.uint32))
    assert dataclasses.asdict(st_many) == dataclasses.asdict(st_one)
    # five full waves of two blocks share one compiled wave, the last (one block) its own
    assert sorted(len(w.block_ids) for w in k._waves.values()) == [1, 2]


def test_cluster_waves_are_rebased(monkeypatch):
    """cluster_ring (clusters of 4 CTAs exchanging through distributed shared memory):
    16 blocks in waves of 4 blocks, the cluster registers rewritten for each wave."""
    from test_simt_cluster import ring_reference
    monkeypatch.setattr(module, "MAX_THREADS_PER_WAVE", 512)
    m = load_ptx((DATA / "cluster_ring.ptx").read_text())
    mem = GlobalMemory()
    nb, nt = 16, 128
    x = np.arange(nb * nt, dtype=np.int32) * 7 - 300
    a, out, r = mem.to_device(x), mem.alloc(4 * nb * nt), mem.alloc(16 * nb)
    m.launch("cluster_ring", nb, nt, [a, out, r], mem)
    got = mem.from_device(out, np.int32, nb * nt).reshape(nb, nt)
    assert (got == ring_reference(x, nb, nt, 4)).all()
    ranks = mem.from_device(r, np.uint32, 4 * nb).reshape(nb, 4)
    b = np.arange(nb)
    assert (ranks[:, 0] == b % 4).all() and (ranks[:, 1] == 4).all()
    assert (ranks[:, 2] == b % 4).all() and (ranks[:, 3] == b).all()
    assert len(m.kernel("cluster_ring")._waves) == 1


def test_rebase_needs_as_many_blocks():
    _, _, _, k = _vector_add(300, load_ptx(gallery.source("vector_add")))
    w = next(iter(k._waves.values()))
    with pytest.raises(ValueError, match="rebase needs 2 blocks, got 1"):
        w.rebase([(0, 0, 0)])
