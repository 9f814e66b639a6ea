"""Bulk asynchronous copies (sm_90, the non-tensor half of the tensor memory
accelerator): PTX ISA 9.0, sections 9.7.9.25.4.1 (``cp.async.bulk``), 9.7.9.25.4.4
(``cp.async.bulk.prefetch``), 9.7.9.25.5.1-2 (``cp.async.bulk.commit_group`` /
``wait_group``)::

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{.multicast::cluster}{.L2::cache_hint}
        [dst], [src], size, [mbar]{, ctaMask}{, cache-policy};
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes{.L2::cache_hint} [dst], [src], size, [mbar]{, cache-policy};
    cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [dst], [src], size, [mbar];
    cp.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint} [dst], [src], size{, cache-policy};
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group{.read} N;
    cp.async.bulk.prefetch.L2.global{.L2::cache_hint} [src], size{, cache-policy};

``size`` and both addresses are multiples of 16 bytes. Semantics (a legal schedule,
deterministic):

- **Into shared memory** (completion through an mbarrier, :mod:`hardware.simt.mbarrier`):
  the source is read when the copy is issued; the destination bytes are *pending* until
  the copy completes, and any access to a pending byte is a race error (as for
  ``cp.async``, :mod:`hardware.simt.async_copy`), and a copy over the shared-memory
  operand of a ``wgmma.mma_async`` must be ordered after the wait that completes it
  (racecheck, :mod:`hardware.simt.wgmma_reads`). A copy completes when a thread first
  tests the phase of its mbarrier (``test_wait``/``try_wait``): its bytes land, then the
  barrier's tx-count drops by ``size`` (complete-tx). ``.multicast::cluster`` writes the
  same bytes at the same offset in every CTA of ``ctaMask`` (bit i: CTA rank i of the
  cluster) and signals the mbarrier at the same offset in each; a ``.shared::cluster``
  destination or mbarrier may be in another CTA of the cluster
  (:mod:`hardware.simt.cluster`).
- **To global memory** (``.bulk_group``): the copy is performed when it is issued and
  joins the thread's current bulk group; ``commit_group`` closes the group and
  ``wait_group{.read} N`` checks N (a non-negative constant). Writing the source or
  reading the destination before the wait is not reported.
- ``cp.async.bulk.prefetch``: no effect (a cache hint); the cache-policy operands are
  accepted and ignored.

Refused with a clear message: ``.cp_mask``. The tensor forms are
:func:`c_bulk_tensor`'s, the reductions (``cp.reduce.async.bulk{.tensor}``)
:mod:`hardware.simt.tma_reduce`'s.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .isa.data import _address
from .isa.operands import Op, getter, per_thread
from .parser import Imm, Instruction, Reg
from .proxycheck import async_read
from .tma_reduce import c_reduce_bulk, combine, map_type, reduce_dsmem_op, reduce_op
from .types import TYPES
from .wave_state import WaveState
from .wgmma import async_write

__all__ = ["BulkCopies", "c_bulk"]

_CHUNK = 16


class BulkCopies(WaveState):
    """The bulk copies of one wave waiting for their mbarrier, and the bulk groups."""

    ATTR = "bulk_copies"

    def reset(self) -> None:
        #: mbarrier offset -> [(dst offsets (n,), data (n,) uint8 or, for a reduction,
        #: (op, type, source bytes), thread, inst)]
        self.queue: dict[int, list] = {}
        self.committed = np.zeros(self.wave.T, dtype=np.int64)
        self.bytes = 0

    def enqueue(self, ac: Any, mbar: int, dst: np.ndarray, data: np.ndarray, thread: int,
                inst: Instruction) -> None:
        """Queue a copy of ``data`` to wave shared offsets ``dst`` on the mbarrier at
        ``mbar``; its bytes are pending (a race for any other access, ``ac``: the
        wave's :class:`~hardware.simt.async_copy.AsyncCopies`) until it lands."""
        async_write(self.wave, thread, dst, inst,
                    "a tensor copy" if "tensor" in inst.parts else "a bulk copy")
        np.add.at(ac.pending, dst, 1)
        ac.owner[dst] = thread
        ac.owner_line[dst] = inst.line
        ac.any_pending = True
        self.queue.setdefault(mbar, []).append((dst, data, thread, inst))

    def flush(self, mbar: int) -> None:
        """Complete the copies that signal the mbarrier at wave shared offset ``mbar``."""
        recs = self.queue.pop(mbar, None)
        if not recs:
            return
        from .async_copy import _state
        from .mbarrier import state_of
        ac = _state(self.wave)
        mb = state_of(self.wave)
        from .proxycheck import async_landed
        for dst, data, thread, inst in recs:
            if isinstance(data, tuple):     # a reduction: (op, type, source bytes)
                op, tname, src = data
                data = combine(op, tname, self.wave.smem[dst].copy(), src)
            self.wave.smem[dst] = data
            self.wave.sinit[dst] = True
            async_landed(self.wave, dst)
            np.add.at(ac.pending, dst, -1)
            mb.tx(mbar, -int(dst.size), thread, inst)
        ac.any_pending = bool(ac.queue) or bool(self.queue) or bool((ac.pending > 0).any())


state_of = BulkCopies.of


def _fail(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def _spans(ctx: Any, space: str, thread: int, ex: Any, start: int, size: int,
           inst: Instruction, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, byte offsets (size,)) of ``size`` bytes at ``start`` in ``space`` for
    ``thread``, checked 16 bytes at a time (alignment, bounds, memcheck)."""
    n = size // _CHUNK
    ix = np.full(n, thread, dtype=np.int64)
    addr = start + _CHUNK * np.arange(n, dtype=np.int64)
    buf, off = ctx._locate(space, ix, ex, addr, _CHUNK, inst, kind)
    return buf, (off[:, None] + np.arange(_CHUNK)).reshape(-1)


def c_bulk(inst: Instruction, ctx: Any) -> Op:
    """The cp.async.bulk family (see the module docstring)."""
    parts = inst.parts
    mods = set(parts[3:])
    reduce = parts[1] == "reduce"
    if reduce:
        if "tensor" in parts:
            return c_bulk_tensor(inst, ctx)
        if len(parts) < 5 or parts[4] != "shared::cluster":
            return c_reduce_bulk(inst, ctx, _spans, state_of)
        # into distributed shared memory, completing on an mbarrier: the copy path below,
        # the destination combined with the source when the copy lands
        rop, rtype = reduce_dsmem_op(inst)
        parts = parts[:1] + parts[2:]          # cp.async.bulk.<dst>.<src>... positions
        mods = set(parts[3:])
    if parts[0] != "cp" or parts[2] != "bulk":
        raise _fail(inst, "not a cp.async.bulk instruction")
    if "tensor" in mods:
        return c_bulk_tensor(inst, ctx)
    if "cp_mask" in mods:
        raise _fail(inst, "cp.async.bulk with .cp_mask is not supported")
    st = state_of(ctx)
    if "commit_group" in mods:
        if inst.operands or len(parts) != 4:
            raise _fail(inst, "cp.async.bulk.commit_group takes no operand")
        return Op(inst, "alu", lambda ix, ex: np.add.at(st.committed, ctx._thread_ids(ix), 1))
    if "wait_group" in mods:
        if len(inst.operands) != 1 or not isinstance(inst.operands[0], Imm) or \
                inst.operands[0].value < 0 or mods - {"wait_group", "read"}:
            raise _fail(inst, "cp.async.bulk.wait_group{.read} takes a non-negative "
                              "integer constant")
        return Op(inst, "alu", lambda ix, ex: None)  # every bulk store is complete
    if "prefetch" in mods:
        if mods - {"prefetch", "L2", "global", "L2::cache_hint"} or not 2 <= len(
                inst.operands) <= 3:
            raise _fail(inst, "cp.async.bulk.prefetch.L2.global [src], size")
        return Op(inst, "alu", lambda ix, ex: None)
    ops = list(inst.operands)
    if "L2::cache_hint" in mods:
        if not ops:
            raise _fail(inst, ".L2::cache_hint needs a cache-policy operand")
        ops = ops[:-1]
    dst_space, src_space = parts[3], parts[4]
    to_shared = dst_space in ("shared::cluster", "shared::cta")
    if reduce and (not to_shared or src_space != "shared::cta"
                   or "multicast::cluster" in mods):
        raise _fail(inst, "cp.reduce.async.bulk into shared memory is "
                          ".shared::cluster.shared::cta.mbarrier::complete_tx::bytes")
    if to_shared:
        if "mbarrier::complete_tx::bytes" not in mods or src_space not in (
                "global", "shared::cta"):
            raise _fail(inst, "a bulk copy into shared memory takes .global or .shared::cta "
                              "and .mbarrier::complete_tx::bytes")
        multicast = "multicast::cluster" in mods
        if multicast and (src_space != "global" or dst_space != "shared::cluster"):
            raise _fail(inst, ".multicast::cluster needs .shared::cluster.global")
        want = 5 if multicast else 4
        if len(ops) != want:
            raise _fail(inst, f"expected [dst], [src], size, [mbar]"
                              f"{', ctaMask' if multicast else ''}")
    else:
        if dst_space != "global" or src_space != "shared::cta" or "bulk_group" not in mods:
            raise _fail(inst, "cp.async.bulk.global.shared::cta.bulk_group [dst], [src], "
                              "size")
        if len(ops) != 3:
            raise _fail(inst, "expected [dst], [src], size")
        multicast = False
    gdst = _address(ops[0], ctx, inst, "global" if not to_shared else "shared")
    gsrc = _address(ops[1], ctx, inst, "global" if src_space == "global" else "shared")
    gsize = getter(ops[2], TYPES["u32"], ctx, inst)
    gbar = _address(ops[3], ctx, inst, "shared") if to_shared else None
    gmask = getter(ops[4], TYPES["b16"], ctx, inst) if multicast else None
    if isinstance(ops[2], Reg) is False and not isinstance(ops[2], Imm):
        raise _fail(inst, "size must be a register or a constant")

    def fn(ix: Any, ex: Any) -> None:
        from .async_copy import _state
        from .mbarrier import state_of as mbarriers
        th, (dst, src, size, bars, masks) = per_thread(
            ctx, ix, [(g, np.int64) for g in (gdst, gsrc, gsize, gbar, gmask)])
        cnt = th.size
        for i in range(cnt):
            t, n = int(th[i]), int(size[i])
            if n <= 0 or n % _CHUNK:
                raise ExecutionError(f"{ctx.location(t, inst)}: bulk copy size {n} is not "
                                     "a positive multiple of 16 bytes")
            sbuf, soff = _spans(ctx, "global" if src_space == "global" else "shared", t,
                                ex, int(src[i]), n, inst, "ld")
            data = sbuf[soff].copy()
            if src_space != "global":
                async_read(ctx, t, soff[::_CHUNK], _CHUNK, inst, "bulk copy")
            st.bytes += n
            if ctx.stats is not None:
                ctx.stats.bulk_copy_bytes += n
            if not to_shared:
                dbuf, doff = _spans(ctx, "global", t, ex, int(dst[i]), n, inst, "st")
                dbuf[doff] = data
                ctx.memory.init_shadow[doff] = True
                continue
            targets = [(int(dst[i]), int(bars[i]))]
            if multicast:
                cl = ctx.cluster
                m = int(masks[i])
                if m >> cl.size:
                    raise ExecutionError(f"{ctx.location(t, inst)}: ctaMask {m:#x} names "
                                         f"CTAs outside the cluster of {cl.size}")
                base_d, base_b = int(dst[i]) & (cl.UNIT - 1), int(bars[i]) & (cl.UNIT - 1)
                targets = [(((r + 1) << 24) | base_d, ((r + 1) << 24) | base_b)
                           for r in range(cl.size) if m >> r & 1]
            ac = _state(ctx)
            mb = mbarriers(ctx)
            for d, b in targets:
                _, doff = _spans(ctx, "shared", t, ex, d, n, inst, "st")
                boff = ctx._locate("shared", np.array([t]), ex, np.array([b], np.int64), 8,
                                   inst, "atom")[1]
                mb.get(int(boff[0]), t, inst)  # a valid mbarrier
                ac.check(doff[::_CHUNK], _CHUNK, np.full(n // _CHUNK, t), inst,
                         "bulk copy write")
                st.enqueue(ac, int(boff[0]), doff, (rop, rtype, data) if reduce else data,
                           t, inst)
    return Op(inst, "alu", fn)


# ------------------------------------------------------------------ tensor copies
_SWIZZLE_MASK = {"none": 0, "32B": 1, "64B": 3, "128B": 7}


def swizzle(addr: np.ndarray, mode: str) -> np.ndarray:
    """The shared address a byte at ``addr`` lands at under a swizzle mode: the 16-byte
    chunk index (bits 4-6) XORed with bits 7-9 (128 B), 7-8 (64 B) or 7 (32 B)."""
    m = _SWIZZLE_MASK[mode]
    return addr ^ (((addr >> 7) & m) << 4)


def _tensor_map(ctx: Any, base: Any, inst: Instruction) -> Any:
    """f(ix, thread) -> TensorMap of the operand (a .param name, a .param address in a
    register, or a global address in a register)."""
    from .memory import GLOBAL_BASE
    from .parser import Sym
    from .tensormap import SIZE, TensorMapError, decode
    if isinstance(base, Sym):
        sp, off = ctx.symbol(base.name, inst)
        if sp != "param":
            if sp not in ("global", "const"):
                raise _fail(inst, f"tensor map {base.name} is not a kernel parameter or a "
                                  "global/const variable")
            name = base.name
            addr_of = lambda ix: np.int64(ctx.module_symbol(name))  # noqa: E731
        else:
            addr_of = lambda ix: np.int64(off)  # noqa: E731
    else:
        reg = ctx.register(base.name, inst)
        if reg.dtype != np.uint64:
            raise _fail(inst, "a tensor map address is a 64-bit register")
        addr_of = lambda ix: reg[ix].view(np.int64)  # noqa: E731

    def read(ix: Any, i: int, thread: int, ex: Any) -> Any:
        a = addr_of(ix)
        a = int(a[i]) if np.ndim(a) else int(a)
        if a < GLOBAL_BASE:
            raw = bytes(ctx.params[a:a + SIZE]) if a % 64 == 0 and a + SIZE <= len(
                ctx.params) else b""
            if len(raw) != SIZE:
                raise ExecutionError(f"{ctx.location(thread, inst)}: tensor map at .param "
                                     f"address {a:#x} is not a 64-byte aligned 128-byte "
                                     "kernel parameter")
        else:
            if a % 64:
                raise ExecutionError(f"{ctx.location(thread, inst)}: tensor map address "
                                     f"{a:#x} is not 64-byte aligned")
            _, off = _spans(ctx, "global", thread, ex, a, SIZE, inst, "ld")
            raw = ctx.memory.buffer[off].tobytes()
        try:
            tm = decode(raw)
        except TensorMapError as e:
            raise ExecutionError(f"{ctx.location(thread, inst)}: {e}") from None
        return tm, a
    return read


def _box_elements(tm: Any, coords: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(byte addresses, in-bounds mask) of the box's elements, dimension 0 fastest."""
    grids = []
    for i in range(tm.rank):
        grids.append(coords[i] + tm.element_strides[i] * np.arange(tm.box_counts[i],
                                                                 dtype=np.int64))
    mesh = np.meshgrid(*grids[::-1], indexing="ij")  # slowest dimension first
    idx = [m.reshape(-1) for m in mesh[::-1]]        # idx[i]: dimension i
    inb = np.ones(idx[0].shape, dtype=bool)
    addr = np.full(idx[0].shape, tm.address, dtype=np.int64)
    for i in range(tm.rank):
        inb &= (idx[i] >= 0) & (idx[i] < tm.dims[i])
        step = tm.element_size if i == 0 else tm.strides[i - 1]
        addr += idx[i] * step
    return addr, inb


def c_bulk_tensor(inst: Instruction, ctx: Any) -> Op:
    """cp.async.bulk.tensor.{1..5}d tile mode (PTX ISA 9.7.9.25.5.2): global ->
    shared::cluster completing on an mbarrier (.multicast::cluster), and shared::cta ->
    global with bulk groups. The box is read (or written) element by element through
    the tensor map (:mod:`hardware.simt.tensormap`); out-of-bounds elements read as
    zeros (a NaN fill is refused: its bits are not documented) and are not written;
    in shared memory the box is dense, dimension 0 fastest, each byte placed at
    :func:`swizzle` of its address. im2col modes and interleaved maps are refused."""
    from .parser import TensorAddr
    parts = inst.parts
    mods = set(parts[3:])
    dim = next((p for p in parts if len(p) == 2 and p[1] == "d" and p[0] in "12345"), None)
    if dim is None:
        raise _fail(inst, "cp.async.bulk.tensor needs .1d to .5d")
    rank = int(dim[0])
    if any(p.startswith("im2col") for p in mods):
        raise _fail(inst, "cp.async.bulk.tensor im2col modes are not supported")
    ops = list(inst.operands)
    if "L2::cache_hint" in mods:
        ops = ops[:-1]
    k = parts.index(dim)
    dst_space, src_space = (parts[k + 1], parts[k + 2]) if len(parts) > k + 2 else ("", "")
    load = dst_space in ("shared::cluster", "shared::cta")
    multicast = "multicast::cluster" in mods
    rop = None
    if parts[1] == "reduce":      # cp.reduce.async.bulk.tensor (hardware.simt.tma_reduce)
        if load:
            raise _fail(inst, "a tensor reduction is .global.shared::cta")
        if "tile" not in mods:
            raise _fail(inst, "only the .tile mode of cp.reduce.async.bulk.tensor is "
                              "modelled")
        rop = reduce_op(inst)
    if load:
        if src_space != "global" or "mbarrier::complete_tx::bytes" not in mods:
            raise _fail(inst, "a tensor load is .shared::cluster.global"
                              ".mbarrier::complete_tx::bytes")
        if len(ops) != (4 if multicast else 3):
            raise _fail(inst, "expected [dst], [map, {coords}], [mbar]"
                              f"{', ctaMask' if multicast else ''}")
        tens = ops[1]
    else:
        if dst_space != "global" or src_space != "shared::cta" or "bulk_group" not in mods \
                or multicast or len(ops) != 2:
            raise _fail(inst, "a tensor store is .global.shared::cta.bulk_group "
                              "[map, {coords}], [src]")
        tens = ops[0]
    if not isinstance(tens, TensorAddr):
        raise _fail(inst, "expected a tensor operand [map, {coords}]")
    if len(tens.coords.items) != rank:
        raise _fail(inst, f".{dim} takes {rank} coordinates")
    gcoords = [getter(c, TYPES["s32"], ctx, inst) for c in tens.coords.items]
    gmap = _tensor_map(ctx, tens.base, inst)
    gsh = _address(ops[0] if load else ops[1], ctx, inst, "shared")
    gbar = _address(ops[2], ctx, inst, "shared") if load else None
    gmask = getter(ops[3], TYPES["b16"], ctx, inst) if multicast else None
    st = state_of(ctx)

    def fn(ix: Any, ex: Any) -> None:
        from .async_copy import _state
        from .mbarrier import state_of as mbarriers
        th = ctx._thread_ids(ix)
        cnt = th.size
        sh = np.broadcast_to(np.asarray(gsh(ix), np.int64), (cnt,))
        cs = [np.broadcast_to(np.asarray(g(ix)).astype(np.int64), (cnt,)) for g in gcoords]
        for i in range(cnt):
            t = int(th[i])
            tm, map_addr = gmap(ix, i, t, ex)
            if tm.rank != rank:
                raise ExecutionError(f"{ctx.location(t, inst)}: a .{dim} copy with a "
                                     f"rank-{tm.rank} tensor map")
            if tm.interleave != "none":
                raise ExecutionError(f"{ctx.location(t, inst)}: interleaved tensor maps "
                                     "are not supported")
            coords = [int(c[i]) for c in cs]
            if not load and min(coords) < 0:
                raise ExecutionError(
                    f"{ctx.location(t, inst)}: a tensor {'reduction' if rop else 'store'} "
                    f"starts at coordinates {coords}: the .global.shared::cta direction "
                    "takes non-negative coordinates (PTX ISA 9.7.9.25.5.1)")
            gaddr, inb = _box_elements(tm, coords)
            es = tm.element_size
            nbytes = tm.box_bytes
            s0 = int(sh[i])
            if s0 % 128:
                raise ExecutionError(f"{ctx.location(t, inst)}: shared address {s0:#x} of a "
                                     "tensor copy is not 128-byte aligned")
            unit = ctx.cluster.UNIT
            low = s0 & (unit - 1)
            chunks = low + _CHUNK * np.arange(nbytes // _CHUNK, dtype=np.int64)
            sw = swizzle(chunks, tm.swizzle) + (s0 - low)
            st.bytes += nbytes
            if ctx.stats is not None:
                per = ctx.stats.tma_load_bytes if load else ctx.stats.tma_store_bytes
                per[map_addr] = per.get(map_addr, 0) + nbytes
            if not load:
                _, soff = ctx._locate("shared", np.full(sw.size, t), ex, sw, _CHUNK, inst,
                                      "ld")
                data = ctx.smem[(soff[:, None] + np.arange(_CHUNK)).reshape(-1)]
                async_read(ctx, t, soff, _CHUNK, inst,
                           "tensor reduction" if rop else "tensor store")
                tname = map_type(tm, rop, ctx, t, inst) if rop else None
                keep = np.flatnonzero(inb)
                if keep.size:
                    buf, goff = ctx._locate("global", np.full(keep.size, t), ex,
                                            gaddr[keep], es, inst, "atom" if rop else "st")
                    span = (goff[:, None] + np.arange(es)).reshape(-1)
                    src = (keep[:, None] * es + np.arange(es)).reshape(-1)
                    if rop:
                        # each element of the box: the destination's, the source's bytes
                        buf[span] = combine(rop, tname, buf[span].copy(), data[src].copy())
                    else:
                        buf[span] = data[src]
                    ctx.memory.init_shadow[span] = True
                continue
            data = np.zeros(nbytes, dtype=np.uint8)
            keep = np.flatnonzero(inb)
            if keep.size < inb.size and tm.oob_fill != "none":
                raise ExecutionError(f"{ctx.location(t, inst)}: out-of-bounds elements with "
                                     "oob_fill nan_request_zero_fma (the NaN's bits are not "
                                     "documented)")
            if keep.size:
                buf, goff = ctx._locate("global", np.full(keep.size, t), ex, gaddr[keep],
                                        es, inst, "ld")
                data[(keep[:, None] * es + np.arange(es)).reshape(-1)] = \
                    buf[(goff[:, None] + np.arange(es)).reshape(-1)]
            targets = [s0]
            bar = int(np.broadcast_to(np.asarray(gbar(ix), np.int64), (cnt,))[i])
            bars = [bar]
            if multicast:
                cl = ctx.cluster
                m = int(np.broadcast_to(np.asarray(gmask(ix)).astype(np.int64), (cnt,))[i])
                if m >> cl.size:
                    raise ExecutionError(f"{ctx.location(t, inst)}: ctaMask {m:#x} names "
                                         f"CTAs outside the cluster of {cl.size}")
                ranks = [r for r in range(cl.size) if m >> r & 1]
                targets = [((r + 1) << 24) | low for r in ranks]
                bars = [((r + 1) << 24) | (bar & (unit - 1)) for r in ranks]
            ac = _state(ctx)
            mb = mbarriers(ctx)
            for d, b in zip(targets, bars):
                dsw = swizzle(chunks, tm.swizzle) + (d - low)
                _, coff = ctx._locate("shared", np.full(dsw.size, t), ex, dsw, _CHUNK, inst,
                                      "st")
                doff = (coff[:, None] + np.arange(_CHUNK)).reshape(-1)
                boff = ctx._locate("shared", np.array([t]), ex, np.array([b], np.int64), 8,
                                   inst, "atom")[1]
                mb.get(int(boff[0]), t, inst)
                ac.check(coff, _CHUNK, np.full(coff.size, t), inst, "tensor copy write")
                st.enqueue(ac, int(boff[0]), doff, data, t, inst)
    return Op(inst, "alu", fn)


# ------------------------------------------------------------------ tensormap.*
#: tensormap.replace.tile fields: (operands after [addr], new_val type, byte offset in the
#: map, bytes per entry; ord's range) in the encoding of :mod:`hardware.simt.tensormap`
_REPLACE_FIELDS = {
    "global_address": (1, "u64", 0, 8, 0), "rank": (1, "u32", 12, 1, 0),
    "box_dim": (2, "u32", 72, 2, 5), "global_dim": (2, "u32", 20, 4, 5),
    "global_stride": (2, "u64", 40, 8, 4), "element_stride": (2, "u32", 82, 1, 5),
    "elemtype": (1, "u32", 13, 1, 0), "interleave_layout": (1, "u32", 14, 1, 0),
    "swizzle_mode": (1, "u32", 15, 1, 0), "swizzle_atomicity": (1, "u32", -1, 0, 0),
    "fill_mode": (1, "u32", 17, 1, 0),
}


def _replace_value(field: str, val: int) -> tuple[int | None, str | None]:
    """(the byte value stored for tensormap.replace's new_val of ``field``, or None and
    why it is refused). PTX ISA 9.7.9.28 and its table "Tensormap new_val validity": rank
    is one less than the rank; box and global sizes, byte strides and element strides
    are the values themselves; elemtype uses the ISA's numbering (not the driver's)."""
    from .tensormap import DTYPES, ISA_ELEMTYPES
    if field == "global_address":
        return (val, None) if val % 16 == 0 else (None, f"global address {val:#x} is not "
                                                        "16-byte aligned")
    if field == "rank":
        return (val + 1, None) if val <= 4 else (None, f"rank new_val {val} is not 0..4 "
                                                       "(one less than the rank)")
    if field == "box_dim":
        return (val % 256, None) if 1 <= val <= 256 else (None, f"box_dim {val} outside "
                                                                "1..256")
    if field == "global_dim":
        return (val, None) if val >= 1 else (None, "global_dim 0 (sizes start at 1)")
    if field == "global_stride":
        return (val, None) if val % 16 == 0 and val < 1 << 40 else (
            None, f"global_stride {val} is not a multiple of 16 below 2^40")
    if field == "element_stride":
        return (val, None) if 1 <= val <= 8 else (None, f"element_stride {val} outside 1..8")
    if field == "elemtype":
        if val < len(ISA_ELEMTYPES):
            return [n for n, _ in DTYPES].index(ISA_ELEMTYPES[val]), None
        return None, (f"elemtype {val} is not modelled (0-12: {', '.join(ISA_ELEMTYPES)}; "
                      "the packed 4- and 6-bit types are not)")
    if field == "interleave_layout":
        return (val, None) if val <= 2 else (None, f"interleave_layout {val} is not 0..2")
    if field == "swizzle_mode":
        return (val, None) if val <= 3 else (None, f"swizzle_mode {val} is not modelled "
                                                   "(0 none, 1 32 B, 2 64 B, 3 128 B)")
    if field == "swizzle_atomicity":
        return (None, None) if val == 0 else (None, f"swizzle_atomicity {val} is not "
                                                    "modelled (0: 16 B)")
    return (val, None) if val <= 1 else (None, f"fill_mode {val} is not 0 (zeros) or 1 "
                                               "(NaN)")


def c_tensormap(inst: Instruction, ctx: Any) -> Op:
    """tensormap.replace.tile.field{.global,.shared::cta}.b1024.type [addr], {ord,} new_val
    (PTX ISA 9.7.9.28) on the 128 bytes of :mod:`hardware.simt.tensormap`: every field of
    a tiled map (global_address, rank, box_dim, global_dim, global_stride,
    element_stride, elemtype, interleave_layout, swizzle_mode, swizzle_atomicity 0,
    fill_mode), on a map or on 128 zeroed bytes, which the first replace makes a map built
    on the device; a new value outside the field's range is an error naming thread and
    line, and the map is checked as a whole when a copy uses it. And
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
    [dst], [src], 128, which copies a map from shared to global memory (the proxy fence
    needs nothing more here)."""
    import struct
    from .tensormap import DEVICE_BUILT, MAGIC, SIZE
    parts = inst.parts
    if parts[1] == "cp_fenceproxy":
        if "global" not in parts or "shared::cta" not in parts or len(inst.operands) != 3 \
                or not isinstance(inst.operands[2], Imm) or inst.operands[2].value != SIZE:
            raise _fail(inst, "tensormap.cp_fenceproxy.global.shared::cta... [dst], [src], 128")
        gd = _address(inst.operands[0], ctx, inst, "global")
        gs = _address(inst.operands[1], ctx, inst, "shared")

        def copy(ix: Any, ex: Any) -> None:
            th = ctx._thread_ids(ix)
            d = np.broadcast_to(np.asarray(gd(ix), np.int64), th.shape)
            s = np.broadcast_to(np.asarray(gs(ix), np.int64), th.shape)
            for i in range(th.size):
                t = int(th[i])
                _, soff = _spans(ctx, "shared", t, ex, int(s[i]), SIZE, inst, "ld")
                buf, doff = _spans(ctx, "global", t, ex, int(d[i]), SIZE, inst, "st")
                buf[doff] = ctx.smem[soff]
                ctx.memory.init_shadow[doff] = True
        return Op(inst, "alu", copy)
    if parts[1] != "replace" or len(parts) < 6 or parts[2] != "tile":
        raise _fail(inst, "tensormap.replace.tile.field... or tensormap.cp_fenceproxy")
    field = parts[3]
    if field not in _REPLACE_FIELDS:
        raise _fail(inst, f"tensormap.replace has no field .{field}")
    space = "shared" if "shared::cta" in parts else "global" if "global" in parts else None
    if space is None:
        raise _fail(inst, "tensormap.replace needs .global or .shared::cta")
    nops, vtype, at, width, ords = _REPLACE_FIELDS[field]
    ops = inst.operands
    if len(ops) != 1 + nops:
        raise _fail(inst, f"tensormap.replace.tile.{field} takes [addr], "
                          f"{'ord, ' if nops == 2 else ''}new_val")
    if ("b64" in parts) != (vtype == "u64"):
        raise _fail(inst, f"tensormap.replace.tile.{field} is .b{vtype[1:]}")
    ga = _address(ops[0], ctx, inst, space)
    ordinal = 0
    if nops == 2:
        if not isinstance(ops[1], Imm) or not 0 <= ops[1].value < ords:
            raise _fail(inst, f"ord is a constant 0..{ords - 1}")
        ordinal = ops[1].value
    gv = getter(ops[-1], TYPES[vtype], ctx, inst)

    def replace(ix: Any, ex: Any) -> None:
        th = ctx._thread_ids(ix)
        a = np.broadcast_to(np.asarray(ga(ix), np.int64), th.shape)
        v = np.broadcast_to(np.asarray(gv(ix)).astype(np.uint64), th.shape)
        for i in range(th.size):
            t = int(th[i])
            buf, off = _spans(ctx, space, t, ex, int(a[i]), SIZE, inst, "st")
            raw = bytearray(buf[off].tobytes())
            if not any(raw):      # zeroed bytes: a map built on the device
                struct.pack_into("<I", raw, 8, MAGIC)
                raw[DEVICE_BUILT] = 1
            elif struct.unpack_from("<I", raw, 8)[0] != MAGIC:
                raise ExecutionError(f"{ctx.location(t, inst)}: tensormap.replace on bytes "
                                     "that are neither a tensor map nor zeroed")
            stored, why = _replace_value(field, int(v[i]))
            if why:
                raise ExecutionError(f"{ctx.location(t, inst)}: tensormap.replace.{field}: "
                                     f"{why}")
            if stored is not None:
                pos = at + width * ordinal
                raw[pos:pos + width] = int(stored).to_bytes(width, "little")
            buf[off] = np.frombuffer(bytes(raw), np.uint8)
    return Op(inst, "alu", replace)
