"""FlashAttention-2 forward schedule (Dao 2023, arXiv 2307.08691, Algorithm 1, section 3.1).

Per (batch, query head) instance: OUTER loop over query tiles i (one thread block each,
independent), INNER loop over key/value tiles j in increasing key order; ``m``, ``l`` and
the output accumulator stay on chip; normalisation is delayed to the end; only
``O_i`` and ``L_i = m + ln l`` are written back.

Per tile the arithmetic is exactly, in this order:

1. ``S = scores(Q_i, K_j)``: :func:`refimpl.attention.scores.scores` (correctly rounded
   ``Q_i K_j^T``, ``fl32(. * fl32(scale))``, softcap, masks ``-inf``, ALiBi), each element
   a function of its own row and key only;
2. :func:`refimpl.attention.online.online_block_update` with ``S`` and ``V_j``;

and after the last tile :func:`refimpl.attention.online.finalize`. Key tiles are
``[k0 + j B_c, k0 + (j + 1) B_c)`` clipped to the key range, so a schedule that reads the
same key tiles in the same order (for example block by block from a paged K/V cache with
page size ``B_c``) and calls the same two functions reproduces the bytes exactly.

Tile skipping: a (query tile, key tile) pair that the mask hides entirely (for causal
attention the tiles above the diagonal; for a window the tiles outside the band; tiles of
padding only) is not loaded or computed and is counted in ``blocks_skipped``. Skipping
changes no byte (see :mod:`refimpl.attention.online`).

B_r has no effect on the values (every step is row-local); B_c does (it sets the
granularity of the online rescaling).

Two implementations, tested against each other byte for byte: a plain one with the
paper's two loops, and a fast one that runs groups of query tiles in lock-step per key
tile, in reused scratch arrays, with its float64 products on a helper thread ahead of
the elementwise work where that helps (:func:`_fast`). Reuse: :func:`flash_v2_core` runs
the forward on a prepared problem and a key range;
:func:`refimpl.attention.tiles.computed_tiles` gives the skip decisions.
"""
from __future__ import annotations

import math
import threading
from typing import NamedTuple, Optional

import numpy as np
from numpy.typing import ArrayLike

from refimpl import elementary
from refimpl.blas import ProductThread
from refimpl.attention.mask import MaskOptions, mask_keywords
from refimpl.attention.online import OnlineState, finalize, nonfinite_rows, online_block_update
from refimpl.attention.problem import Problem, prepare
from refimpl.attention.result import AttentionResult
from refimpl.attention.scores import scores, scores_from_product
from refimpl.attention.tiles import DEFAULT_BLOCK, check_block, computed_tiles, tile_ranges
from refimpl.attention.stats import ScheduleStats, forward_working_set
from refimpl.matmul.screening import (exact_col_norms, exact_row_bounds, resolve_flagged,
                                      screen_fp32, screen_width)
from refimpl.summation import fold_sum_axis1
from refimpl.validation import check_bool

__all__ = ["flash_v2", "flash_v2_core", "forward_stats"]


def forward_stats(
    prob: Problem, qtiles: list[np.ndarray], ktiles: list[np.ndarray], comp: np.ndarray,
    r: int, c: int,
) -> ScheduleStats:
    """HBM traffic as FlashAttention-2 counts it (elements; one Q read per query tile, K
    and V per computed tile pair, O and LSE written once) and the on-chip working set
    of an ``r``-row query tile and a ``c``-key tile (none without query tiles)."""
    b, hq, _, _, _, d = prob.shape
    dv = prob.v.shape[-1]
    st = ScheduleStats()
    if not qtiles:
        return st
    st.sram(forward_working_set(r, c, d, dv))
    rows = sum(t.size for t in qtiles)
    st.read("Q", b * hq * rows * d)
    st.write("O", b * hq * rows * dv)
    st.write("LSE", b * hq * rows)
    if ktiles:
        # instances computing each key tile, over all query tiles
        n_j = comp.sum(axis=(0, 1), dtype=np.int64) * hq
        keys = int(np.dot(n_j, [t.size for t in ktiles]))
        st.blocks_computed = int(n_j.sum())
        st.blocks_skipped = len(qtiles) * len(ktiles) * b * hq - st.blocks_computed
        st.read("K", keys * d)
        st.read("V", keys * dv)
    return st


def flash_v2_core(
    prob: Problem,
    block: tuple[int, int],
    key_range: Optional[tuple[int, int]] = None,
    implementation: str = "fast",
) -> tuple[np.ndarray, np.ndarray, ScheduleStats]:
    """FlashAttention-2 forward on the flattened problem over keys ``key_range`` (default
    all): returns out (B, Hq, Sq, Dv), LSE (B, Hq, Sq) (both float32) and the stats."""
    br, bc = check_block(block)
    b, hq, _, sq, sk, d = prob.shape
    k0, k1 = (0, sk) if key_range is None else key_range
    kq, vq = prob.kv_for_q_heads()
    qtiles = tile_ranges(sq, br)
    ktiles = tile_ranges(k1, bc, k0)
    comp = computed_tiles(prob, qtiles, ktiles)
    st = forward_stats(prob, qtiles, ktiles, comp, min(br, sq), min(bc, max(0, k1 - k0)))
    if implementation == "plain":
        out, lse = _plain(prob, kq, vq, qtiles, ktiles, comp)
    elif implementation == "fast":
        out, lse = _fast(prob, kq, vq, qtiles, ktiles, comp, br)
    else:
        raise ValueError(f"implementation must be 'plain' or 'fast', got {implementation!r}")
    return out, lse, st


def _plain(prob, kq, vq, qtiles, ktiles, comp):
    """The paper's loops, one batch entry and query tile at a time (all heads together)."""
    b, hq, _, sq, _, _ = prob.shape
    dv = prob.v.shape[-1]
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    for bi in range(b):
        sub = _batch_entry(prob, bi)
        for i, rows in enumerate(qtiles):  # parallel over thread blocks on a GPU
            state = OnlineState.initial((1, hq, rows.size), dv)
            q_i = prob.q[bi:bi + 1, :, rows]
            for j, cols in enumerate(ktiles):
                if not comp[bi, i, j]:
                    continue
                s, _, _ = scores(sub, q_i, kq[bi:bi + 1, :, cols], rows, cols)
                state = online_block_update(state, s, vq[bi:bi + 1, :, cols])
            o, l_ = finalize(state)
            out[bi][:, rows] = o[0]
            lse[bi][:, rows] = l_[0]
    return out, lse


def _batch_entry(prob: Problem, bi: int) -> Problem:
    sl = slice(bi, bi + 1)
    return Problem(
        q=prob.q[sl], k=prob.k[sl], v=prob.v[sl], batch_shape=(1,), scale=prob.scale,
        causal=prob.causal, alignment=prob.alignment, window=prob.window,
        softcap=prob.softcap, slopes=None if prob.slopes is None else prob.slopes[sl],
        key_valid=None if prob.key_valid is None else prob.key_valid[sl],
        query_valid=None if prob.query_valid is None else prob.query_valid[sl],
        offset=prob.offset[sl],
    )


#: query rows (times instances) run in lock-step by the fast implementation: bounds its
#: scratch arrays to about this many rows times B_c (at least one query tile of every
#: instance); any grouping gives the same bytes
_LOCKSTEP_ROWS = 1024
#: elements (instances x keys x query rows) per part of the elementwise passes: big
#: enough that NumPy's per-call cost is small, small enough for the part's temporaries
#: to stay near the core
_PART_ELEMS = 1 << 17
#: query rows per part at least
_MIN_PART_ROWS = 64


class _Scratch:
    """Scratch arrays of the fast path, grown on demand and reused (fresh temporaries
    cost more than the arithmetic on them: new memory is touched for the first time)."""

    def __init__(self) -> None:
        self.bufs: dict[tuple[str, int], np.ndarray] = {}

    def get(self, dtype: type, i: int, shape: tuple[int, ...]) -> np.ndarray:
        """A C-contiguous array of ``shape`` in buffer ``i`` of ``dtype``."""
        key = (np.dtype(dtype).str, i)
        size = math.prod(shape)
        buf = self.bufs.get(key)
        if buf is None or buf.size < size:
            buf = self.bufs[key] = np.empty(size, dtype=dtype)
        return buf[:size].reshape(shape)


def _parts(nbh: int, o0: int, o1: int, c: int, whole_instances: bool) -> list[tuple]:
    """Parts ``(h0, h1, p0, p1)`` (instances h0:h1, query rows p0:p1 of the group) of
    about :data:`_PART_ELEMS` elements of a ``c``-key tile (``whole_instances``: every
    part has all instances)."""
    w = o1 - o0
    wc = min(w, max(_MIN_PART_ROWS, _PART_ELEMS // max(1, nbh * c)))
    hg = nbh if whole_instances else max(1, min(nbh, _PART_ELEMS // max(1, c * wc)))
    return [(h0, min(nbh, h0 + hg), p0, min(o1, p0 + wc))
            for h0 in range(0, nbh, hg) for p0 in range(o0, o1, wc)]


#: query rows per chunk of a product on the helper thread at least (the calling thread
#: forms the chunks the helper has not started when it needs them: the finer the
#: chunks, the better the two threads share the products)
_PRODUCT_CHUNK_ROWS = 512


#: query rows per chunk of a product ``P V_j`` at least (it is shorter than a run of
#: ``S^T``: fewer, larger chunks cost less to queue)
_PV_CHUNK_ROWS = 1024


def _product_chunks(o0: int, o1: int, overlap: bool,
                    rows: int | None = None) -> list[tuple[int, int]]:
    """Column ranges of a product of the live query rows ``o0:o1`` (one without the
    helper thread), chunks of ``rows`` rows at least (default
    :data:`_PRODUCT_CHUNK_ROWS`)."""
    if not overlap:
        return [(o0, o1)]
    n = max(1, (o1 - o0) // (rows or _PRODUCT_CHUNK_ROWS))
    edges = [o0 + (o1 - o0) * i // n for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:]))


#: adjacent key tiles whose ``S^T`` is formed in one product
_QK_TILES = 2


#: multiply-adds of the products below which the fast path does not overlap them
#: with the elementwise work (a helper thread costs more than it saves)
_OVERLAP_MIN_WORK = 1 << 26


def _fast(prob, kq, vq, qtiles, ktiles, comp, br):
    """Groups of query tiles in lock-step per key tile. Same bytes as :func:`_plain`:
    every step is row-local, and a tile the mask hides entirely leaves a row's state as
    it is (see :mod:`refimpl.attention.online`), so rows whose tile skips a key tile may
    be computed with the others.

    Per group of rows: the two correctly rounded products are formed by float64 BLAS
    (their error screen is that of :func:`refimpl.matmul.exact.exact_product_fp32`):
    ``S^T = K Q^T`` for a run of up to :data:`_QK_TILES` adjacent key tiles at once
    (key-major, so that the row operations of the online softmax run along contiguous
    memory), and ``P V_j`` per key tile (query-major; BLAS reads ``P`` as the
    transpose of the key-major probabilities, in place). K and V stay float32; each
    product converts the keys it reads to float64 once. The screen of ``S^T`` runs on
    a whole run after its product (each tile with its own keys' width, one resolution
    of what it flags); the other elementwise work (the screen of ``P V_j``, the score
    pipeline, the operations of :func:`refimpl.attention.online.online_step`) runs in
    parts of query rows, in reused scratch arrays. On a machine with several cores the
    products run on a helper thread (:class:`refimpl.blas.ProductThread`), in chunks of
    query rows, ahead of the calling thread: two runs of ``S^T`` are queued at once,
    each followed by its screen (double buffers; the next is queued as soon as the
    calling thread has read a buffer), ``P_j V_j`` as soon as the softmax of tile j is
    done, while the accumulator update of tile j - 1 runs; a chunk or screen the helper
    has not started when the calling thread needs it is done there (the calling thread
    would otherwise wait idle). The next group's first two runs are queued as soon as
    the group's last run has been read, so the helper goes on with them while the
    group's last accumulator updates run. The order of every operation on every value
    is the same."""
    b, hq, _, sq, sk, d = prob.shape
    dv = prob.v.shape[-1]
    nbh = b * hq
    out = np.zeros((b, hq, sq, dv), dtype=np.float32)
    lse = np.full((b, hq, sq), -np.inf, dtype=np.float32)
    if not ktiles or sq == 0:
        return out, lse
    work = int(comp.sum()) * hq * br * max(t.size for t in ktiles) * (d + dv)
    # query tiles per group: about _LOCKSTEP_ROWS rows over all instances together
    per = max(1, _LOCKSTEP_ROWS // max(1, br * nbh))
    starts = list(range(0, len(qtiles), per))

    def stage(gi):
        group = qtiles[starts[gi]:starts[gi] + per]
        r0, r1 = int(group[0][0]), int(group[-1][-1]) + 1
        return ctx.stage(group, r0, r1, comp[:, starts[gi]:starts[gi] + per])

    with ProductThread(enabled=work >= _OVERLAP_MIN_WORK) as blas:
        ctx = _FastContext(prob, kq, vq, ktiles, blas)
        try:
            ahead = [stage(0)]  # the group staged next
            ctx.bound_values()
            for gi in range(len(starts)):

                def prefetch(gi=gi):
                    if gi + 1 < len(starts):
                        ahead.append(stage(gi + 1))

                now = ahead.pop()
                r0, n = now.r0, now.n
                o, l_out = ctx.group(now, prefetch)
                out[:, :, r0:r0 + n] = o.reshape(b, hq, n, dv)
                lse[:, :, r0:r0 + n] = l_out.reshape(b, hq, n)
        finally:
            for f in ctx.pending:  # nothing may still write to the buffers
                if not f.cancelled():
                    f.exception()
    return out, lse


class _Staged(NamedTuple):
    """A group of query rows as :meth:`_FastContext.stage` planned it."""
    r0: int
    n: int
    tiles: list  # (keys, first and end live query row) per computed key tile
    runs: list  # (keys, live rows) per run of adjacent key tiles
    where: list  # (run, row offset within the run) per tile
    cuts: list  # the rows of each run's tiles within the run
    qk: list  # (chunk futures, screen future) of the first two runs


class _FastContext:
    """The fast path's operands, buffers and steps (see :func:`_fast`)."""

    def __init__(self, prob, kq, vq, ktiles, blas) -> None:
        b, hq, _, sq, sk, d = prob.shape
        self.prob, self.ktiles, self.blas = prob, ktiles, blas
        self.b, self.hq, self.nbh, self.dv = b, hq, b * hq, prob.v.shape[-1]
        self.plain_scores = not (prob.has_mask or prob.softcap is not None
                                 or prob.slopes is not None)
        self.scale32 = np.float32(prob.scale)
        self.q3 = prob.q.reshape(self.nbh, sq, d)
        # K and V stay float32: each product converts the key rows it reads (a run of
        # K, a tile of V) to float64 once, into a buffer per double buffer. The screen
        # bounds of every key tile of the range (row norms of K_j and of V_j^T, sums in
        # any order: exact_row_bounds's factor covers their rounding), indexed by key
        self.k32 = kq.reshape(self.nbh, sk, d)
        self.v32 = vq.reshape(self.nbh, sk, self.dv)
        self.k_bounds = np.zeros((self.nbh, sk))
        for t in ktiles:
            t0, t1 = int(t[0]), int(t[-1]) + 1
            self.k_bounds[:, t0:t1] = exact_row_bounds(self.k32[:, t0:t1])
        self._converted = {}
        self._convert_lock = threading.Lock()
        self.v_bounds = None  # see bound_values (after the first products are queued)
        self.cmax = max(t.size for t in ktiles)
        self.sc = _Scratch()
        self.pending = []  # every future queued (all are waited for at the end)

    def bound_values(self) -> None:
        """The screen bounds of V: rows of V_j^T (one per feature) for every key tile,
        keys in tile order (computed while the first products run)."""
        self.v_bounds = {int(t[0]): exact_row_bounds(
            np.swapaxes(self.v32[:, int(t[0]):int(t[-1]) + 1], 1, 2))
                         for t in self.ktiles}

    def stage(self, group, r0, r1, comp_g):
        """Plans the group of query rows r0:r1 (the tiles ``group``) and queues its
        first two runs of ``S^T``: the state its products and screens read (Q^T, its
        column norms, the S^T buffers) is set here, which the steps of the group
        before have done with (every run of theirs has been taken)."""
        nbh, cmax, sc = self.nbh, self.cmax, self.sc
        n = r1 - r0
        self.q_t = np.ascontiguousarray(np.swapaxes(self.q3[:, r0:r1], 1, 2), dtype=np.float64)
        self.q_norms = exact_col_norms(self.q_t)  # columns of Q^T
        # S^T of up to _QK_TILES adjacent key tiles at once (a taller product runs
        # faster), two such buffers
        self.s_t = [sc.get(np.float64, 10 + i, (nbh, _QK_TILES * cmax, n)) for i in range(2)]
        # RN32(S^T) of a run, screened after its product (on either thread), per
        # buffer, and the screen's scratch (a tile at a time)
        self.y_run = [sc.get(np.float32, 10 + i, (nbh, _QK_TILES * cmax, n)) for i in range(2)]
        self.hi_run = [sc.get(np.float32, 12 + i, (nbh, cmax, n)) for i in range(2)]
        tiles = []
        for j, cols in enumerate(self.ktiles):
            live = np.flatnonzero(comp_g[:, :, j].any(axis=0))
            if live.size:
                o0 = int(group[live[0]][0]) - r0
                o1 = int(group[live[-1]][-1]) + 1 - r0
                tiles.append((cols, o0, o1))
        # runs of up to _QK_TILES adjacent key tiles, one S^T product each:
        # (keys, the union of their live query rows), and each tile's run and offset
        runs, where = [], []  # runs: [first key, end key, a0, a1, tiles]
        for cols, o0, o1 in tiles:
            k0 = int(cols[0])
            r = runs[-1] if runs else None
            if r is not None and r[4] < _QK_TILES and r[1] == k0:
                r[1:] = [k0 + cols.size, min(r[2], o0), max(r[3], o1), r[4] + 1]
            else:
                r = [k0, k0 + cols.size, o0, o1, 1]
                runs.append(r)
            where.append((len(runs) - 1, k0 - r[0]))
        runs = [(np.arange(k0, k1), a0, a1) for k0, k1, a0, a1, _ in runs]
        # the rows of each run's tiles within the run (each tile screened with its own
        # keys' width)
        cuts = [[] for _ in runs]
        for (cols, _, _), (ri, off) in zip(tiles, where):
            cuts[ri].append((off, off + cols.size))
        # S_j goes to buffer j % 2 as soon as S_{j-2} has been read there: the helper
        # then always has a product queued (P_j V_j waits for the softmax of tile j,
        # S_{j+1} does not), and one it has not started when the calling thread needs
        # it is taken over whole
        qk = [self.submit_run(runs[i], cuts[i], i % 2) for i in range(min(2, len(runs)))]
        return _Staged(r0, n, tiles, runs, where, cuts, qk)

    def submit(self, fn, tile, buf, rows=None):
        """The product ``fn`` of ``tile`` in column chunks (of ``rows`` rows at least,
        default :data:`_PRODUCT_CHUNK_ROWS`): futures."""
        _, o0, o1 = tile
        blas, futures = self.blas, []
        for a, z in _product_chunks(o0, o1, blas.overlap, rows):
            f = blas.submit(lambda a=a, z=z: fn(tile, buf, a, z))
            f.steal = lambda a=a, z=z: fn(tile, buf, a, z)
            self.pending.append(f)
            futures.append(f)
        return futures

    def submit_run(self, run, cuts, buf):
        """The product ``S^T`` of ``run`` in chunks, then its screen (queued after
        them): (chunk futures, screen future)."""
        futures = self.submit(self.qk_product, run, buf)
        f = self.blas.submit(lambda: self.screen_run(run, cuts, buf))
        f.steal = lambda: self.screen_run(run, cuts, buf)
        self.pending.append(f)
        return futures, f

    def take(self, futures, then=None):
        """Chunks the helper has not started are formed here (the calling thread would
        otherwise wait idle); then the others are waited for. ``then``, a future queued
        after the chunks that reads their results: taken over whole if the helper has
        not started it (checked first: the helper starts it only after it has taken
        every chunk), else waited for."""
        blas = self.blas
        mine = then is not None and blas.overlap and then.cancel()
        if blas.overlap:
            for f in futures:
                if f.cancel():
                    f.steal()
        for f in futures:
            if not f.cancelled():
                blas.wait(f)
        if mine:
            then.steal()
        elif then is not None:
            blas.wait(then)

    def group(self, staged, prefetch):
        """Out and LSE (instances, rows) of a group :meth:`stage` planned; calls
        ``prefetch()`` (which stages the next group) as soon as the group's last run of
        ``S^T`` has been read, so that the helper goes on with the next group's
        products while the last accumulator updates run here."""
        nbh, dv, cmax, sc = self.nbh, self.dv, self.cmax, self.sc
        self.r0, n, tiles, runs, where, cuts, qk = staged
        self.m = np.full((nbh, n), -np.inf, dtype=np.float32)
        self.l_ = np.zeros((nbh, n), dtype=np.float32)
        self.acc = np.zeros((nbh, n, dv), dtype=np.float32)
        # double buffers: the products of later tiles are formed while tile j is read
        self.alpha = [np.empty((nbh, n)) for _ in range(2)]
        self.rsum = [np.empty((nbh, n)) for _ in range(2)]
        # the probabilities, and alpha in row cmax (exp_f32 runs in place there)
        self.p_t = [sc.get(np.float64, 12 + i, (nbh, cmax + 1, n)) for i in range(2)]
        self.pv = [sc.get(np.float64, 14 + i, (nbh, n, dv)) for i in range(2)]
        if not tiles:
            prefetch()
        pv_prev = None
        for i, tile in enumerate(tiles):
            ri, off = where[i]
            if off == 0:
                self.take(*qk[ri % 2])
            self.softmax_step(tile, i % 2, ri % 2, off)
            pv = self.submit(self.pv_product, tile, i % 2, _PV_CHUNK_ROWS)
            last = i + 1 == len(tiles) or where[i + 1][0] != ri
            if last and ri + 2 < len(runs):
                qk[ri % 2] = self.submit_run(runs[ri + 2], cuts[ri + 2], ri % 2)
            if i + 1 == len(tiles):
                prefetch()
            if pv_prev is not None:
                self.take(pv_prev[0])
                self.acc_step(*pv_prev[1])
            pv_prev = (pv, (tile, i % 2))
        if pv_prev is not None:
            self.take(pv_prev[0])
            self.acc_step(*pv_prev[1])
        return finalize(OnlineState(self.m, self.l_, self.acc))

    def keys64(self, which: str, buf: int, c0: int, c: int) -> np.ndarray:
        """Keys ``c0:c0 + c`` of K (``which`` "k") or V ("v") in float64, converted once
        for double buffer ``buf`` (the chunks of a product, on either thread, and the
        screen's resolution share it; buffer ``buf`` is reused only after its product
        and steps are done)."""
        key = (which, buf)
        with self._convert_lock:
            got = self._converted.get(key)
            if got is None or not got[0] <= c0 <= c0 + c <= got[0] + got[1].shape[1]:
                src = self.k32 if which == "k" else self.v32
                got = self._converted[key] = (c0, src[:, c0:c0 + c].astype(np.float64))
        return got[1][:, c0 - got[0]:c0 - got[0] + c]

    def qk_product(self, tile, buf, a, z):
        """Columns ``a:z`` of ``S^T = K_j Q^T`` in float64 into ``s_t[buf]``."""
        cols = tile[0]
        c0, c = int(cols[0]), cols.size
        np.matmul(self.keys64("k", buf, c0, c), self.q_t[:, :, a:z],
                  out=self.s_t[buf][:, :c, a:z])

    def pv_product(self, tile, buf, a, z):
        """Rows ``a:z`` of ``P V_j`` in float64 into ``pv[buf]`` (``P`` is the transpose
        of ``p_t[buf]``: BLAS reads it in place)."""
        cols = tile[0]
        c0, c = int(cols[0]), cols.size
        np.matmul(np.swapaxes(self.p_t[buf][:, :c, a:z], 1, 2), self.keys64("v", buf, c0, c),
                  out=self.pv[buf][:, a:z])

    def screen_run(self, run, cuts, sbuf):
        """The screen of ``S^T`` of a run of key tiles (``s_t[sbuf]``, the run's live
        query rows): the correctly rounded float32 values into ``y_run``. Each tile's
        rows ``cuts`` are screened with the width of its own keys (the largest row
        bound of K_j times the largest column norm of Q^T over the run's rows: at least
        each product's own width); what any of them flags is resolved in one call."""
        cols, a0, a1 = run
        c, c0 = cols.size, int(cols[0])
        blk = self.s_t[sbuf][:, :c, a0:a1]
        y = self.y_run[sbuf][:, :c, a0:a1]
        flags = []
        for t0, t1 in cuts:
            w_s, tiny_s = screen_width(self.k_bounds[:, c0 + t0:c0 + t1], self.q_norms[:, a0:a1])
            flags.append(screen_fp32(blk[:, t0:t1], w_s, y[:, t0:t1],
                                     self.hi_run[sbuf][:, :t1 - t0, a0:a1], tiny_s))
        flag = flags[0] if len(flags) == 1 else np.concatenate(flags, axis=1)
        resolve_flagged(flag, y, self.keys64("k", sbuf, c0, c), self.q_t[:, :, a0:a1], blk)

    def softmax_step(self, tile, buf, sbuf, off):
        """The score pipeline on the screened ``S^T`` (rows ``off:`` of ``y_run``) and
        steps 1-4 of the online step (the probabilities into ``p_t[buf]``, alpha into
        ``alpha[buf]``, the row sums ``fold_sum(p)`` into ``rsum[buf]``)."""
        cols, o0, o1 = tile
        c = cols.size
        prob, sc, b, hq = self.prob, self.sc, self.b, self.hq
        y_t, p_t = self.y_run[sbuf][:, off:off + c], self.p_t[buf]
        m, alpha = self.m, self.alpha[buf]
        for h0, h1, p0, p1 in _parts(self.nbh, o0, o1, max(c, self.dv), not self.plain_scores):
            hs, ps = slice(h0, h1), slice(p0, p1)
            nh, wc = h1 - h0, p1 - p0
            y = y_t[hs, :, ps]
            with np.errstate(over="ignore", invalid="ignore"):
                if self.plain_scores:
                    np.multiply(y, self.scale32, out=y)  # fl32(S * fl32(scale))
                    s_part = y
                else:
                    s4, _, _ = scores_from_product(
                        prob, np.swapaxes(y.reshape(b, hq, c, wc), -1, -2),
                        np.arange(self.r0 + p0, self.r0 + p1), cols)
                    s_part = np.swapaxes(s4, -1, -2).reshape(nh, c, wc)
                # the operations of refimpl.attention.online.online_step
                m_old = m[hs, ps]
                m_new = np.maximum(m_old, s_part.max(axis=1))
                m64 = m_new.astype(np.float64)
                if not (m_new > -np.inf).all():  # (NaN too: then looked at closely)
                    m64[np.isneginf(m_new)] = 0.0
                # the exponents in place of the probabilities where that block lies
                # in one piece (else in scratch and copied)
                e = p_t[hs, :c + 1, ps]
                in_place = e.flags.c_contiguous
                if not in_place:
                    e = sc.get(np.float64, 0, (nh, c + 1, wc))
                # fl64(s - m): s converted to float64 exactly, then the float64
                # difference (faster than one mixed-type pass)
                np.copyto(e[:, :c], s_part)
                e[:, :c] -= m64[:, None, :]
                np.subtract(m_old, m64, out=e[:, c])
                # binary32 values, held in float64 (every s - m <= 0, or NaN)
                elementary._exp_f32_nonpositive(e, out=e)
                p64 = p_t[hs, :c, ps]
                if not in_place:
                    np.copyto(p64, e[:, :c])
                bad = nonfinite_rows(m_new)
                if bad.any():  # product_operand: their probabilities take no part
                    bb, bj = np.nonzero(bad)
                    p64[bb, :, bj] = 0.0
                # step 4's fold sum, while the part is near the core
                self.rsum[buf][hs, ps] = fold_sum_axis1(
                    p64, sc.get(np.float64, 2, (nh, (c + 1) // 2, wc)))
                alpha[hs, ps] = e[:, c]
                m[hs, ps] = m_new

    def acc_step(self, tile, buf):
        """Step 5, ``l = fl32(alpha l + fl32(rowsum))``, and step 6,
        ``acc = fl32(fl64(alpha acc) + RN32(P V_j))``. The screen of ``P V_j`` bounds
        ``||p||_2 <= sqrt(sum p)`` (0 <= p <= 1; the fold sum is within 7u of
        ``sum p``)."""
        cols, o0, o1 = tile
        c, dv, sc = cols.size, self.dv, self.sc
        c0 = int(cols[0])
        v_j, v_bounds = self.keys64("v", buf, c0, c), self.v_bounds[c0]
        pv, p_live = self.pv[buf], np.swapaxes(self.p_t[buf][:, :c, o0:o1], 1, 2)
        alpha = self.alpha[buf]
        rowsum = self.rsum[buf][:, o0:o1]
        self.l_[:, o0:o1] = (alpha[:, o0:o1] * self.l_[:, o0:o1]
                             + rowsum.astype(np.float32)).astype(np.float32)
        p_norms = np.sqrt(rowsum * (1.0 + 2.0**-40))
        w_v, tiny_v = screen_width(v_bounds, p_norms)
        for h0, h1, p0, p1 in _parts(self.nbh, o0, o1, max(c, dv), not self.plain_scores):
            hs, ps = slice(h0, h1), slice(p0, p1)
            nh, wc = h1 - h0, p1 - p0
            w = w_v[hs]
            blk = pv[hs, ps]
            y = sc.get(np.float32, 0, (nh, wc, dv))  # RN32(P V_j)
            acc = self.acc[hs, ps]
            a = alpha[hs, ps]
            with np.errstate(over="ignore", invalid="ignore"):
                resolve_flagged(screen_fp32(blk, w, y, sc.get(np.float32, 1, (nh, wc, dv)),
                                            tiny_v), y, p_live[hs], v_j[hs], pv[hs, o0:o1],
                                p0 - o0)
                # rows whose maximum moved (alpha != 1, or NaN): fl64(alpha acc) is
                # exact (two binary32 factors), then the float64 sum is rounded
                moved = a != 1.0
                if 2 * np.count_nonzero(moved) > moved.size:  # most rows (early tiles)
                    t = sc.get(np.float64, 0, acc.shape)
                    np.multiply(acc, a[..., None], out=t)
                    np.add(t, y, out=acc, casting="same_kind")
                else:
                    mb, mr = np.nonzero(moved)
                    fix = acc[mb, mr] * a[mb, mr, None]
                    fix += y[mb, mr]
                    # the others (the maximum seldom moves): fl64(1 acc) = acc, and
                    # fl32(fl64(acc + y)) = RN32(acc + y) for binary32 acc and y (the
                    # double rounding is innocuous: 53 >= 2 * 24 + 2), a binary32 sum
                    np.add(acc, y, out=acc)
                    acc[mb, mr] = fix


@mask_keywords
def flash_v2(
    q: ArrayLike, k: ArrayLike, v: ArrayLike,
    *,
    block: tuple[int, int] = DEFAULT_BLOCK,
    mask: Optional[MaskOptions] = None,
    return_lse: bool = True,
    implementation: str = "fast",
) -> AttentionResult:
    """FlashAttention-2 forward (see the module docstring for the exact arithmetic).

    Args:
        q, k, v: as :func:`refimpl.attention.attention`.
        block: ``(B_r, B_c)`` query and key tile sizes (default 128 x 128).
        mask: the masking options, a :class:`refimpl.attention.MaskOptions` (its
            fields are described there), or None for none; each field is also a keyword
            of this function (:func:`refimpl.attention.mask.mask_keywords`), not together
            with ``mask``.
        return_lse: return the natural LSE the algorithm writes for the backward pass
            (default True).
        implementation: ``"fast"`` (default) or ``"plain"``; same bytes.
    Returns:
        :class:`refimpl.attention.AttentionResult`: ``(out, lse, stats)`` or, without
        ``return_lse``, ``(out, stats)``. Stats per instance: Q_i read once per query
        tile; K_j and V_j read once per computed tile pair; O_i and LSE_i written once.
    """
    return_lse = check_bool("return_lse", return_lse)
    prob = prepare(q, k, v, mask=mask)
    out, lse, st = flash_v2_core(prob, block, implementation=implementation)
    return AttentionResult(prob.restore(out), prob.restore(lse) if return_lse else None, st)
