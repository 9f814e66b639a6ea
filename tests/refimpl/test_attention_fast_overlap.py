"""The fast path of ``flash_v2`` with its float64 products on the helper thread
(:class:`refimpl.blas.ProductThread`): the same bytes as the plain schedule and as the
fast path without the overlap; the BLAS thread count and the user count are restored,
also when a step raises."""
from __future__ import annotations

import importlib
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl import blas as _blas
from refimpl.blas import ProductThread
from refimpl.attention import flash_v2
from refimpl.attention.problem import prepare
from refimpl.matmul.screening import exact_row_bounds, screen_width
from attention_draws import mask_options, maybe_large_logits, shapes

fv2 = importlib.import_module("refimpl.attention.flash_v2")  # the module, not the function

NEVER = 1 << 62  # a work threshold no problem reaches: no overlap


def overlap_possible() -> bool:
    """Whether ProductThread can overlap on this machine (OpenBLAS controls found and
    two or more cores)."""
    with ProductThread() as pt:
        return pt.overlap


def blas_threads():
    controls = _blas._state["controls"]
    return None if controls is None else controls[0]()


@st.composite
def problems(draw):
    rng, batch, hq, hkv, sq, sk, d = shapes(draw)
    if draw(st.booleans()):
        q = rng.standard_normal(batch + (hq, sq, d)).astype(np.float32)
        k = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
        v = rng.standard_normal(batch + (hkv, sk, d)).astype(np.float32)
    else:  # integer-like data: exact ties and equal logits in the products
        q = (rng.integers(-2, 3, batch + (hq, sq, d)) * 0.5).astype(np.float32)
        k = rng.integers(-2, 3, batch + (hkv, sk, d)).astype(np.float32)
        v = (rng.integers(-8, 9, batch + (hkv, sk, d)) * 2.0**-3).astype(np.float32)
    opts = mask_options(draw, rng, batch, hq, sq, sk)
    q, k, v = maybe_large_logits(draw, q, k, v, opts)
    block = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))  # rarely dividing 1..20
    return q, k, v, opts, block


def same(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


class RecordingProductThread(ProductThread):
    """ProductThread that records whether each use overlapped."""
    seen: list = []

    def __enter__(self):
        pt = super().__enter__()
        RecordingProductThread.seen.append(pt.overlap)
        return pt


@pytest.mark.slow
@settings(max_examples=60)
@given(problems())
def test_overlap_gives_plain_bytes(p):
    q, k, v, opts, block = p
    mp = pytest.MonkeyPatch()
    RecordingProductThread.seen = []
    try:
        mp.setattr(fv2, "ProductThread", RecordingProductThread)
        mp.setattr(fv2, "_OVERLAP_MIN_WORK", NEVER)
        o_seq, l_seq, st_seq = flash_v2(q, k, v, block=block, **opts)
        mp.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
        o_ov, l_ov, st_ov = flash_v2(q, k, v, block=block, **opts)
    finally:
        mp.undo()
    assert RecordingProductThread.seen[0] is False
    assert RecordingProductThread.seen[1] is overlap_possible()
    o_pl, l_pl, st_pl = flash_v2(q, k, v, block=block, implementation="plain", **opts)
    assert same(o_ov, o_pl) and same(l_ov, l_pl)
    assert same(o_ov, o_seq) and same(l_ov, l_seq)
    assert st_ov == st_pl == st_seq
    assert _blas._state["users"] == 0


def test_overlap_really_uses_the_helper_thread(monkeypatch):
    """With the threshold at 0 the products run on the helper thread (where it can),
    OpenBLAS is held to one thread meanwhile, and the count is restored after."""
    if blas_threads() is None:
        overlap_possible()  # the controls are looked up on first use
    before = blas_threads()
    seen = {"qk": set(), "pv": set(), "threads_in_step": set()}
    orig_qk, orig_pv = fv2._FastContext.qk_product, fv2._FastContext.pv_product
    orig_soft = fv2._FastContext.softmax_step

    def qk(self, *args):
        seen["qk"].add(threading.current_thread().name)
        return orig_qk(self, *args)

    def pv(self, *args):
        seen["pv"].add(threading.current_thread().name)
        return orig_pv(self, *args)

    main = threading.current_thread().name

    def soft(self, *args):
        seen["threads_in_step"].add(blas_threads())
        if self.blas.overlap:  # the helper has time to start a product queued for it
            deadline = time.monotonic() + 5.0
            while not (seen["qk"] | seen["pv"]) - {main} and time.monotonic() < deadline:
                time.sleep(0.001)
        return orig_soft(self, *args)

    monkeypatch.setattr(fv2._FastContext, "qk_product", qk)
    monkeypatch.setattr(fv2._FastContext, "pv_product", pv)
    monkeypatch.setattr(fv2._FastContext, "softmax_step", soft)
    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 3, 30, 16)).astype(np.float32) for _ in range(3))
    opts = dict(block=(5, 7), causal=True, softcap=5.0)
    got = flash_v2(q, k, v, **opts)
    want = flash_v2(q, k, v, implementation="plain", **opts)
    assert same(got[0], want[0]) and same(got[1], want[1])
    if overlap_possible():
        # a chunk of a product the helper has not started when it is needed is taken
        # over by the calling thread (the caller would otherwise wait idle): both
        # threads may form either product, the helper forms some
        helper = (seen["qk"] | seen["pv"]) - {main}
        assert helper and len(seen["qk"] | seen["pv"]) <= 2
        assert seen["qk"] and seen["pv"]
        assert seen["threads_in_step"] == {1}
    else:
        assert seen["qk"] == {main} and seen["pv"] == {main}
    assert blas_threads() == before
    assert _blas._state["users"] == 0


@pytest.mark.parametrize("where", ["softmax_step", "acc_step", "pv_product", "qk_product",
                                   "screen_run"])
def test_thread_count_restored_when_a_step_raises(monkeypatch, where):
    if blas_threads() is None:
        overlap_possible()  # the controls are looked up on first use
    before = blas_threads()
    calls = {"n": 0}
    orig = getattr(fv2._FastContext, where)

    def boom(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:  # after the pipeline is under way
            raise RuntimeError("injected")
        return orig(self, *args)

    monkeypatch.setattr(fv2._FastContext, where, boom)
    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((2, 24, 8)).astype(np.float32) for _ in range(3))
    with pytest.raises(RuntimeError, match="injected"):
        flash_v2(q, k, v, block=(4, 4))
    assert calls["n"] >= 2  # the helper may have started the next product
    if before is not None:
        assert blas_threads() == before
    assert _blas._state["users"] == 0
    assert _blas._state["saved"] is None
    # the next call works and gives the plain bytes
    monkeypatch.setattr(fv2._FastContext, where, orig)
    got = flash_v2(q, k, v, block=(4, 4))
    want = flash_v2(q, k, v, block=(4, 4), implementation="plain")
    assert same(got[0], want[0]) and same(got[1], want[1])
    if before is not None:
        assert blas_threads() == before


def test_thread_count_restored_with_another_setting(monkeypatch):
    """A thread count other than the default is what comes back."""
    overlap_possible()
    controls = _blas._state["controls"]
    if controls is None:
        pytest.skip("the OpenBLAS thread count cannot be read here")
    before = controls[0]()
    try:
        controls[1](2 if before != 2 else 3)
        setting = controls[0]()
        monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
        rng = np.random.default_rng(9)
        q, k, v = (rng.standard_normal((1, 16, 8)).astype(np.float32) for _ in range(3))
        flash_v2(q, k, v, block=(4, 4))
        assert controls[0]() == setting
    finally:
        controls[1](before)


def test_nested_product_threads_restore_once():
    """Two overlapping users: the count is set to one by the first and restored by the
    last."""
    overlap_possible()
    before = blas_threads()
    with ProductThread() as a:
        with ProductThread() as b:
            if a.overlap:
                assert b.overlap and _blas._state["users"] == 2
                assert blas_threads() == 1
        if a.overlap:
            assert _blas._state["users"] == 1 and blas_threads() == 1
    assert _blas._state["users"] == 0
    assert blas_threads() == before


def test_disabled_product_thread_runs_at_once_on_caller():
    main = threading.current_thread()
    ran = []
    with ProductThread(enabled=False) as pt:
        assert not pt.overlap
        assert _blas._state["users"] == 0
        fut = pt.submit(lambda: ran.append(threading.current_thread()) or 42)
        assert ran == [main]  # already run, before wait
        assert fut.done()
        assert pt.wait(fut) == 42

        def fail():
            raise ZeroDivisionError("inside")

        bad = pt.submit(fail)  # does not raise here
        assert bad.done()
        with pytest.raises(ZeroDivisionError, match="inside"):
            pt.wait(bad)


def test_enabled_product_thread_reports_exceptions_through_wait():
    with ProductThread() as pt:
        def fail():
            raise KeyError("helper")

        fut = pt.submit(fail)
        with pytest.raises(KeyError, match="helper"):
            pt.wait(fut)
        # the helper still serves work after an exception
        name = pt.wait(pt.submit(lambda: threading.current_thread().name))
        if pt.overlap:
            assert name != threading.current_thread().name
        else:
            assert name == threading.current_thread().name
    assert _blas._state["users"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("lockstep, part", [(1024, 1 << 17), (32, 1 << 9)])
def test_overlap_larger_problem_many_tiles_groups_and_parts(monkeypatch, lockstep, part):
    """Many key tiles per group (both double buffers in turn), several lock-step groups
    and several parts per tile; masks and softcap take the general score path."""
    rng = np.random.default_rng(10)
    q = rng.standard_normal((2, 4, 150, 64)).astype(np.float32)
    k = rng.standard_normal((2, 2, 170, 64)).astype(np.float32)
    v = rng.standard_normal((2, 2, 170, 64)).astype(np.float32)
    kpm = rng.random((2, 170)) < 0.9
    for opts in (dict(block=(16, 24)),
                 dict(block=(16, 24), causal=True, window=(60, None), softcap=20.0,
                      key_padding_mask=kpm, alibi_slopes=np.array([0.5, 0.25, 0.125, 1.0]))):
        assert_fast_gives_plain_bytes(monkeypatch, q, k, v, opts,
                                      _LOCKSTEP_ROWS=lockstep, _PART_ELEMS=part)
    assert _blas._state["users"] == 0


def assert_fast_gives_plain_bytes(monkeypatch, q, k, v, opts, **settings):
    """With the module's ``settings``, the fast path with and without the helper thread
    gives the bytes of the plain schedule."""
    want = flash_v2(q, k, v, implementation="plain", **opts)
    for name, value in settings.items():
        monkeypatch.setattr(fv2, name, value)
    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
    got = flash_v2(q, k, v, **opts)
    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", NEVER)
    seq = flash_v2(q, k, v, **opts)
    monkeypatch.undo()
    assert same(got[0], want[0]) and same(got[1], want[1])
    assert same(seq[0], want[0]) and same(seq[1], want[1])


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_overlap_works_in_a_forked_child(monkeypatch):
    """A child forked after the helper thread started has no such thread: it must make
    its own (a pool that still counts the parent's thread would never run the work)."""
    import os

    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 40, 8)).astype(np.float32) for _ in range(3))
    want = flash_v2(q, k, v, block=(8, 8), implementation="plain")[0]
    flash_v2(q, k, v, block=(8, 8))  # the parent's helper thread exists now
    pid = os.fork()
    if pid == 0:  # child: report through the exit status only
        code = 1
        try:
            got = flash_v2(q, k, v, block=(8, 8))[0]
            code = 0 if got.tobytes() == want.tobytes() else 2
        finally:
            os._exit(code)
    done = threading.Event()
    status = {}

    def wait():
        status["code"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    if not done.wait(60):
        os.kill(pid, 9)
        pytest.fail("the forked child did not finish: its product pool never ran")
    assert status["code"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("qk_tiles, chunk_rows", [(1, 512), (2, 3), (3, 1), (5, 7)])
def test_runs_of_key_tiles_and_small_chunks_give_plain_bytes(monkeypatch, qk_tiles,
                                                             chunk_rows):
    """``S^T`` for runs of 1-5 adjacent key tiles, products cut into chunks of a few
    query rows (so that the calling thread takes many of them over), with tiles the
    mask skips between runs (causal, a window, padding): the plain bytes, and K and V
    left as they were."""
    rng = np.random.default_rng(12)
    q = rng.standard_normal((2, 2, 70, 16)).astype(np.float32)
    k = rng.standard_normal((2, 1, 90, 16)).astype(np.float32)
    v = rng.standard_normal((2, 1, 90, 8)).astype(np.float32)
    k0, v0 = k.copy(), v.copy()
    kpm = rng.random((2, 90)) < 0.8
    for opts in (dict(block=(8, 6)), dict(block=(8, 6), causal=True),
                 dict(block=(16, 5), window=(20, 3), key_padding_mask=kpm, softcap=9.0)):
        assert_fast_gives_plain_bytes(monkeypatch, q, k, v, opts, _QK_TILES=qk_tiles,
                                      _PRODUCT_CHUNK_ROWS=chunk_rows,
                                      _PV_CHUNK_ROWS=chunk_rows, _LOCKSTEP_ROWS=32)
    assert same(k, k0) and same(v, v0)
    assert _blas._state["users"] == 0


@pytest.mark.parametrize("key_range", [(0, 48), (12, 48), (20, 44), (36, 48)])
def test_key_range_screens_each_tile_with_its_own_keys(monkeypatch, key_range):
    """A key range that starts past key 0 (a split of Flash-Decoding): the screen of
    every tile bounds the products by the norms of that tile's own keys, and the range
    gives the plain bytes. The keys' norms differ by 10^6 from tile to tile, so a bound
    taken from other keys would be far off."""
    rng = np.random.default_rng(13)
    q = rng.standard_normal((1, 2, 9, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, 48, 16)).astype(np.float32)
    k *= np.repeat(np.float32([1e3, 1e-3, 1.0, 1e3, 1e-3, 1.0]), 8)[None, None, :, None]
    v = rng.standard_normal((1, 2, 48, 8)).astype(np.float32)
    prob = prepare(q, k, v)
    seen = []
    orig = fv2._FastContext.softmax_step

    def soft(self, tile, *args):
        c0, c1 = int(tile[0][0]), int(tile[0][-1]) + 1
        want = exact_row_bounds(self.k32[:, c0:c1].astype(np.float64))
        assert np.array_equal(self.k_bounds[:, c0:c1], want)
        seen.append(c0)
        return orig(self, tile, *args)

    widths = []  # the row bounds every screen width was taken from

    def width(ra2, cb2):
        widths.append(ra2.copy())
        return screen_width(ra2, cb2)

    monkeypatch.setattr(fv2._FastContext, "softmax_step", soft)
    monkeypatch.setattr(fv2, "screen_width", width)
    fast = fv2.flash_v2_core(prob, (4, 8), key_range=key_range)
    plain = fv2.flash_v2_core(prob, (4, 8), key_range=key_range, implementation="plain")
    starts = list(range(key_range[0], key_range[1], 8))
    assert sorted(set(seen)) == starts
    k64, v64 = prob.k.astype(np.float64), prob.v.astype(np.float64)
    k_of = [exact_row_bounds(k64[0, :, c0:c0 + 8]) for c0 in starts]
    v_of = [exact_row_bounds(np.swapaxes(v64[0, :, c0:c0 + 8], 1, 2)) for c0 in starts]
    # the screens of S^T: each tile with its own keys' bounds, none with others'
    used = [i for i, kb in enumerate(k_of) if any(np.array_equal(w, kb) for w in widths)]
    assert used == list(range(len(starts)))
    assert all(any(np.array_equal(w, b) for b in k_of + v_of) for w in widths)
    assert same(fast[0], plain[0]) and same(fast[1], plain[1])


F32_EDGES = [0.0, -0.0, 1.0, 1.0 + 2.0**-23, 2.0**-24, 2.0**-149, -2.0**-149, 2.0**-126,
             3.4028234663852886e38, -3.4028234663852886e38, 2.0**104, 1.5 * 2.0**-24,
             float("inf"), float("-inf"), float("nan")]


def assert_wide_sum_is_binary32_sum(a, b):
    """fl32(fl64(a + b)) has the bits of the binary32 sum of binary32 a and b."""
    a32, b32 = np.float32(a), np.float32(b)
    with np.errstate(over="ignore", invalid="ignore"):
        wide = np.float32(np.float64(a32) + np.float64(b32))
        narrow = a32 + b32
    assert wide.tobytes() == narrow.tobytes() or (np.isnan(wide) and np.isnan(narrow)), (a, b)


def test_rounded_float64_sum_of_binary32_is_the_binary32_sum_at_edges():
    """The accumulator update of rows whose maximum stayed (alpha = 1) adds in binary32:
    fl32(fl64(a + b)) = RN32(a + b) for binary32 a, b (53 >= 2 * 24 + 2, so the double
    rounding is innocuous), also at the overflow threshold, ties, subnormals and zeros."""
    for a in F32_EDGES:
        for b in F32_EDGES + [2.0**-25, 2.0**103, 3.0 * 2.0**-26]:
            assert_wide_sum_is_binary32_sum(a, b)


@settings(max_examples=300)
@given(st.floats(width=32), st.floats(width=32))
def test_rounded_float64_sum_of_binary32_is_the_binary32_sum(a, b):
    assert_wide_sum_is_binary32_sum(a, b)


def test_screen_of_a_run_waits_for_all_its_chunks(monkeypatch):
    """The screen of a run of ``S^T`` is queued after the run's chunks and reads all of
    them: whichever thread runs it (the helper, or the calling thread taking it over),
    every chunk is complete by then, also when chunks are slow and the calling thread
    takes some of them over."""
    done, checked, lock = set(), [], threading.Lock()
    orig_qk, orig_screen = fv2._FastContext.qk_product, fv2._FastContext.screen_run
    delays = iter(np.random.default_rng(3).uniform(0, 0.002, 10_000))

    def qk(self, tile, buf, a, z):
        with lock:
            d = next(delays)
        time.sleep(d)
        orig_qk(self, tile, buf, a, z)
        with lock:
            done.add((id(self.q_t), int(tile[0][0]), buf, a, z))

    def screen(self, run, cuts, buf):
        cols, a0, a1 = run
        want = {(id(self.q_t), int(cols[0]), buf, a, z)
                for a, z in fv2._product_chunks(a0, a1, self.blas.overlap)}
        with lock:
            missing = want - done
            done.difference_update(want)  # a later run may reuse the buffer
        checked.append((not missing, threading.current_thread().name))
        return orig_screen(self, run, cuts, buf)

    monkeypatch.setattr(fv2._FastContext, "qk_product", qk)
    monkeypatch.setattr(fv2._FastContext, "screen_run", screen)
    monkeypatch.setattr(fv2, "_OVERLAP_MIN_WORK", 0)
    monkeypatch.setattr(fv2, "_PRODUCT_CHUNK_ROWS", 4)
    rng = np.random.default_rng(14)
    q, k, v = (rng.standard_normal((1, 2, 40, 8)).astype(np.float32) for _ in range(3))
    got = flash_v2(q, k, v, block=(8, 4))
    want = flash_v2(q, k, v, block=(8, 4), implementation="plain")
    assert same(got[0], want[0]) and same(got[1], want[1])
    assert checked and all(ok for ok, _ in checked)
    assert _blas._state["users"] == 0
