"""Tensor Memory (sm_100a) and the instructions that manage it and move data between it
and registers (PTX ISA 9.1, section 9.7.16: 9.7.16.1 Tensor Memory, 9.7.16.7.1
``tcgen05.alloc``/``dealloc``/``relinquish_alloc_permit``, 9.7.16.8 ``tcgen05.ld``/``st``/
``wait``, 9.7.16.11 ``tcgen05.fence``)::

    tcgen05.alloc.cta_group::1.sync.aligned{.shared::cta}.b32  [dst], nCols;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32              taddr, nCols;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    tcgen05.ld.sync.aligned.shape.num.b32   r, [taddr]{, immHalfSplitoff};
    tcgen05.st.sync.aligned.shape.num.b32   [taddr]{, immHalfSplitoff}, r;
    tcgen05.wait::{ld,st}.sync.aligned;
    tcgen05.fence::{before,after}_thread_sync;

The memory: each CTA has 128 lanes x 512 columns of 32-bit cells (zero at launch, as
the other memories here; a GPU leaves them undefined). An address is 32 bits, the lane in
bits 16-31 and the column in bits 0-15 (9.7.16.1.1).

Allocation (9.7.16.1.2, 9.7.16.7.1): one warp allocates ``nCols`` columns (a power of two
in 32..512; every lane of those columns) and the instruction writes the address of the
first column (lane 0) to the 4 bytes at ``dst`` in the CTA's shared memory. The columns
given are the lowest free run aligned to ``nCols`` (the placement is this interpreter's
choice; a kernel must use the address it was given). ``dealloc`` takes an address and a
count that name exactly one earlier allocation. An allocation that cannot be satisfied
would block until another warp deallocates: that wait is not modelled, and such an
allocation is an error naming the columns in use. ``relinquish_alloc_permit`` forbids
the CTA any later ``alloc``. The ISA requires every allocation to be deallocated before
the kernel exits: :func:`check_released` (for a wave whose launch has ended) raises an
error naming the CTA, its columns and the lines that allocated them. The launch does not
call it yet (it needs a hook at the end of each wave of :meth:`Module.launch`).
``.cta_group::2`` (a pair of CTAs) is refused, and so is a kernel that mixes groups.

Collective execution: every instruction here is ``.sync.aligned``: all threads of the
warp execute it, with the same operands (a warp with an exited or non-executing thread,
or operands that differ within the warp, is an error).

``tcgen05.ld``/``st`` (9.7.16.8): a warp reaches only the 32 lanes of its quarter of
the Tensor Memory, lanes 32 (w % 4) .. 32 (w % 4) + 31 for warp w of the CTA
(9.7.16.8.1); an access outside them, or to a cell of no allocation, is an error. The
shapes (thread t of the warp, register j, relative to ``taddr``):

- ``.32x32b.xN``: lane t, column j (N registers);
- ``.16x64b.xN``: lane t/4 + 8 (t % 2), column 2 j + (t/2) % 2 (N registers);
- ``.16x128b.xN``: register j = 2 i + r: lane t/4 + 8 r, column 4 i + t % 4;
- ``.16x256b.xN``: register j = 4 i + r: lane t/4 + 8 (r/2), column 8 i + 2 (t % 4) + r % 2;
- ``.16x32bx2.xN``: lane t % 16, column j + (t/16) immHalfSplitoff.

``.pack::16b``/``.unpack::16b`` and ``tcgen05.ld.red`` are refused. The loads and stores
complete when issued: the values are those of the cells at that point. ``wait::ld`` /
``wait::st`` end the thread's outstanding loads or stores; until then a
``tcgen05.mma`` that writes a cell an outstanding ``tcgen05.ld`` read, or that reads or
writes a cell an outstanding ``tcgen05.st`` wrote, is a race (:mod:`.tcgen05`). The
fences have no effect on values (execution is sequentially consistent). Cells that a
``tcgen05.shift`` left undefined (:mod:`.tcgen05_shift`) may not be read until written
again (:meth:`TensorMemory.read`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ExecutionError, UnsupportedPtxError
from .isa.data import _address
from .isa.operands import Op, getter, setter
from .mbarrier import MBarriers
from .memory import generic_to_shared
from .parser import Addr, Imm, Instruction, Reg, Vec
from .types import TYPES
from .wave_state import WaveState

__all__ = ["LANES", "COLUMNS", "TensorMemory", "COMPILERS", "check_released", "fragment",
           "need_sm100a", "whole_warps", "tmem_address"]

LANES = 128
COLUMNS = 512


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


def need_sm100a(inst: Instruction, ctx: Any) -> None:
    """tcgen05 exists on sm_100a (and the sm_100f family) only (9.7.16)."""
    target = str(getattr(getattr(ctx.kernel, "module_key", None), "target", "") or "")
    arch = target.split(",")[0].strip()
    if arch and arch not in ("sm_100a", "sm_100f", "sm_103a", "sm_103f"):
        raise _unsupported(inst, f"tcgen05 needs .target sm_100a, the module's is {arch} "
                                 "(ptxas refuses it there too)")


def _cta_group(inst: Instruction) -> None:
    groups = [p for p in inst.parts if p.startswith("cta_group::")]
    if groups != ["cta_group::1"]:
        raise _unsupported(inst, ".cta_group::1 is the only CTA group modelled "
                                 f"(got {', '.join('.' + g for g in groups) or 'none'}): "
                                 ".cta_group::2, a CTA pair sharing one MMA, is refused "
                                 "because the ISA gives the pair's data path layouts (A, B, "
                                 "C) and the split of A and B between the two CTAs' shared "
                                 "memory only as figures (PTX ISA 9.7.16.10.5.1-3), and a "
                                 "kernel's tcgen05 instructions all take one .cta_group "
                                 "(9.7.16.5), so its alloc, cp, shift and commit go with it")


# ------------------------------------------------------------------ the memory


class TensorMemory(WaveState):
    """The Tensor Memory of each CTA of a wave, its allocations and the outstanding
    asynchronous accesses."""

    ATTR = "tensor_memory"

    def reset(self) -> None:
        nb = len(self.wave.block_ids)
        self.cells = np.zeros((nb, LANES, COLUMNS), np.uint32)
        #: per block: first column -> (columns, line of the alloc)
        self.allocs: list[dict[int, tuple[int, int]]] = [dict() for _ in range(nb)]
        self.relinquished = np.zeros(nb, bool)
        #: asynchronous tcgen05 operations not yet known complete (see .tcgen05)
        self.pending: list[dict] = []
        #: per thread: outstanding tcgen05.ld / tcgen05.st accesses (block, lanes, cols,
        #: line)
        self.loads: dict[int, list[tuple]] = {}
        self.stores: dict[int, list[tuple]] = {}
        #: (thread, mbarrier offset) -> (object, its phase) at the thread's last
        #: successful wait on it
        self.observed: dict[tuple, tuple] = {}
        #: (block, collector buffer) -> (B codes, B type, line of the fill) (.tcgen05_ws)
        self.collectors: dict[tuple, tuple] = {}
        #: per cell: the line of a tcgen05.shift that left it undefined (0: defined);
        #: ``shifted`` says whether any is set (.tcgen05_shift)
        self.undefined = np.zeros((nb, LANES, COLUMNS), np.int32)
        self.shifted = False
        self.stats = self.wave.stats

    # ------------------------------------------------------------ errors
    def fail(self, thread: int, inst: Instruction, msg: str) -> None:
        raise ExecutionError(f"{self.wave.location(thread, inst)}: {msg}")

    def _in_use(self, blk: int) -> str:
        a = self.allocs[blk]
        return ", ".join(f"columns {c}..{c + n - 1} (line {ln})"
                         for c, (n, ln) in sorted(a.items())) or "none"

    # ------------------------------------------------------------ undefined cells
    def read(self, blk: int, lanes: Any, cols: Any, thread: int, inst: Instruction,
             what: str) -> None:
        """A read by ``what`` of the cells [blk, lanes, cols] (integer arrays that
        broadcast together): an error if one of them is undefined."""
        if not self.shifted:
            return
        ln, cl = np.broadcast_arrays(np.asarray(lanes), np.asarray(cols))
        lines = self.undefined[blk, ln, cl].ravel()
        if lines.any():
            k = int(np.argmax(lines != 0))
            self.fail(thread, inst, f"{what} reads Tensor Memory lane {int(ln.ravel()[k])}, "
                      f"column {int(cl.ravel()[k])}, which the tcgen05.shift on line "
                      f"{int(lines[k])} left undefined (PTX ISA 9.7.16.9.3 moves the rows "
                      "down and does not say what the first row of the matrix holds "
                      "afterwards)")

    def write(self, blk: int, lanes: Any, cols: Any) -> None:
        """Cells [blk, lanes, cols] written: defined again."""
        if self.shifted:
            self.undefined[blk, lanes, cols] = 0

    # ------------------------------------------------------------ allocation
    def alloc(self, blk: int, ncols: int, thread: int, inst: Instruction) -> int:
        if self.relinquished[blk]:
            self.fail(thread, inst, "tcgen05.alloc after the CTA executed "
                      "tcgen05.relinquish_alloc_permit (PTX ISA 9.7.16.7.1)")
        self._check_count(ncols, thread, inst, "alloc")
        used = np.zeros(COLUMNS, bool)
        for c, (n, _) in self.allocs[blk].items():
            used[c:c + n] = True
        for start in range(0, COLUMNS, ncols):
            if not used[start:start + ncols].any():
                self.allocs[blk][start] = (ncols, inst.line)
                return start
        self.fail(thread, inst, f"tcgen05.alloc of {ncols} columns cannot be satisfied: "
                  f"the CTA holds {self._in_use(blk)} of {COLUMNS} (the instruction would "
                  "block until another warp deallocates; that wait is not modelled)")
        return -1

    def _check_count(self, ncols: int, thread: int, inst: Instruction, what: str) -> None:
        if not 32 <= ncols <= COLUMNS or ncols & (ncols - 1):
            self.fail(thread, inst, f"tcgen05.{what} of {ncols} columns: nCols must be a "
                      "power of 2 in 32..512 (PTX ISA 9.7.16.7.1)")

    def dealloc(self, blk: int, taddr: int, ncols: int, threads: list,
                inst: Instruction) -> None:
        thread = threads[0]
        self._check_count(ncols, thread, inst, "dealloc")
        lane, col = taddr >> 16, taddr & 0xFFFF
        got = self.allocs[blk].get(col)
        if lane != 0 or got is None or got[0] != ncols:
            self.fail(thread, inst, f"tcgen05.dealloc of address {taddr:#x} ({ncols} "
                      f"columns) names no allocation of the CTA (allocated: "
                      f"{self._in_use(blk)}; the address must be one tcgen05.alloc wrote "
                      "and nCols its count)")
        mine = [r for r in self.pending if r["block"] == blk and r["cols"][0] < col + ncols
                and col < r["cols"][1]]
        for rec in mine:
            if not observed(self, rec, threads):
                self.fail(thread, inst, f"tcgen05.dealloc of columns {col}..{col + ncols - 1}"
                          f" while the {rec.get('op', 'tcgen05.mma')} on line {rec['line']} "
                          "that writes them "
                          "has not completed (no thread of the warp has waited on the "
                          "mbarrier of its tcgen05.commit)")
        self.pending = [r for r in self.pending if not any(r is m for m in mine)]
        del self.allocs[blk][col]

    # ------------------------------------------------------------ access checks
    def check_cells(self, blk: int, lanes: tuple[int, int], cols: tuple[int, int],
                    thread: int, inst: Instruction, what: str) -> None:
        """Lanes [lo, hi) and columns [lo, hi) lie in one allocation of the CTA."""
        l0, l1 = lanes
        c0, c1 = cols
        if l0 < 0 or l1 > LANES:
            self.fail(thread, inst, f"{what} lanes {l0}..{l1 - 1} outside the {LANES} lanes "
                      "of Tensor Memory")
        for c, (n, _) in self.allocs[blk].items():
            if c <= c0 and c1 <= c + n:
                return
        self.fail(thread, inst, f"{what} columns {c0}..{c1 - 1} (lanes {l0}..{l1 - 1}) are "
                  f"not inside one allocation of the CTA (allocated: {self._in_use(blk)})")


def state_of(ctx: Any) -> TensorMemory:
    st = TensorMemory.of(ctx)
    if st.stats is not ctx.stats:     # a new launch of a reused wave
        st.reset()
    return st


def check_released(wave: Any) -> None:
    """At the end of a launch: every CTA has deallocated its Tensor Memory (9.7.16.7.1);
    an ExecutionError naming the CTA, its columns and the allocating lines otherwise."""
    st = getattr(wave, TensorMemory.ATTR, None)
    if st is None or st.wave is not wave or st.stats is not wave.stats:
        return
    for blk, allocs in enumerate(st.allocs):
        if allocs:
            raise ExecutionError(
                f"kernel {wave.kernel.name}, block {tuple(wave.block_ids[blk])}: the CTA "
                f"exited holding Tensor Memory ({st._in_use(blk)}); every tcgen05.alloc "
                "must be freed by tcgen05.dealloc before the kernel exits (PTX ISA "
                "9.7.16.7.1)")


def _marks(rec: dict) -> list:
    """The (mbarrier offset, object, phase) marks of a committed operation (one per
    barrier a commit signals: several for ``.multicast::cluster``)."""
    m = rec.get("mbar")
    return [] if m is None else m if isinstance(m, list) else [m]


def settle(st: TensorMemory) -> None:
    """Drop the pending operations whose mbarriers were all invalidated or replaced."""
    if not st.pending:
        return
    mb = MBarriers.of(st.wave)
    st.pending = [r for r in st.pending if r.get("mbar") is None
                  or any(mb.objects.get(off) is obj for off, obj, _ in _marks(r))]


def observed(st: TensorMemory, rec: dict, threads: list) -> bool:
    """Whether one of ``threads`` has seen the completion of ``rec``: a successful
    mbarrier wait on (one of) its commit's barrier(s) after the tracked phase
    completed."""
    return any(st.observed.get((t, off), (None, -1))[0] is obj and
               st.observed[(t, off)][1] > phase
               for off, obj, phase in _marks(rec) for t in threads)



# ------------------------------------------------------------------ warps


def whole_warps(ctx: Any, inst: Instruction, ex: Any) -> np.ndarray:
    """The positions in ``ex`` of the warps executing a ``.sync.aligned`` instruction,
    each checked to execute it with every one of its threads."""
    live = np.flatnonzero(ex.mask.any(axis=1))
    for w in live.tolist():
        want = ctx.exists[ex.rows[w]]
        if (ex.mask[w] != want).any():
            lane = int(np.flatnonzero(ex.mask[w] != want)[0])
            raise ExecutionError(
                f"{ctx.location(int(ex.rows[w, lane]), inst)}: not executed by every "
                f"thread of the warp (lane {lane} does not; tcgen05.{inst.parts[1]} is "
                ".sync.aligned: the whole warp executes it)")
    return live


def _per_warp(ctx: Any, inst: Instruction, ex: Any, ix: Any, get: Any,
              what: str) -> dict[int, int]:
    """warp position -> the operand's value, checked uniform across the warp."""
    v = np.zeros(ex.rows.shape, np.int64)
    raw = np.asarray(get(ix)).astype(np.int64)
    v[ex.mask] = raw if raw.ndim else raw
    out = {}
    for w in np.flatnonzero(ex.mask.any(axis=1)).tolist():
        vals = v[w][ex.mask[w]]
        if (vals != vals[0]).any():
            lane = int(np.flatnonzero(ex.mask[w])[np.flatnonzero(vals != vals[0])[0]])
            raise ExecutionError(f"{ctx.location(int(ex.rows[w, lane]), inst)}: {what} "
                                 "differs within the warp (it must be the same for all "
                                 "threads)")
        out[w] = int(vals[0])
    return out


def tmem_address(op: Any, ctx: Any, inst: Instruction) -> Any:
    """``f(ix)`` -> the 32-bit Tensor Memory addresses of ``[taddr+offset]``."""
    if not isinstance(op, Addr) or not isinstance(op.base, Reg):
        raise _unsupported(inst, "a Tensor Memory address is [register] or "
                                 "[register+offset]")
    arr = ctx.register(op.base.name, inst)
    off = int(op.offset)
    return lambda ix: (arr[ix].astype(np.int64) + off) & 0xFFFFFFFF


# ------------------------------------------------------------------ alloc / dealloc


def c_alloc(inst: Instruction, ctx: Any) -> Op:
    parts = set(inst.parts[2:])
    sub = inst.parts[1]
    want = {"sync", "aligned", "cta_group::1"} | ({"b32"} if sub != "relinquish_alloc_permit"
                                                  else set())
    space = "generic"
    if sub == "alloc" and "shared::cta" in parts:
        space = "shared"
        parts.discard("shared::cta")
    if parts != want:
        _cta_group(inst)
        raise _unsupported(inst, f"tcgen05.{sub} takes .cta_group::1.sync.aligned"
                                 f"{'.b32' if 'b32' in want else ''} (got "
                                 f"{'.'.join(inst.parts[2:])})")
    ops = inst.operands
    nops = 0 if sub == "relinquish_alloc_permit" else 2
    if len(ops) != nops:
        raise _unsupported(inst, f"tcgen05.{sub} takes {nops} operands, got {len(ops)}")
    if sub == "alloc":
        dst = _address(ops[0], ctx, inst, space)
        gn = getter(ops[1], TYPES["u32"], ctx, inst)
    elif sub == "dealloc":
        ga = getter(ops[0], TYPES["b32"], ctx, inst)
        gn = getter(ops[1], TYPES["u32"], ctx, inst)

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        warps = whole_warps(ctx, inst, ex)
        if sub == "relinquish_alloc_permit":
            for w in warps.tolist():
                st.relinquished[int(ctx.thread_block[ex.rows[w, 0]])] = True
            return
        n = _per_warp(ctx, inst, ex, ix, gn, "nCols")
        if sub == "dealloc":
            ta = _per_warp(ctx, inst, ex, ix, ga, "taddr")
            for w in warps.tolist():
                t = int(ex.rows[w, 0])
                st.dealloc(int(ctx.thread_block[t]), ta[w] & 0xFFFFFFFF, n[w],
                           ex.rows[w][ex.mask[w]].tolist(), inst)
            return
        addr = _per_warp(ctx, inst, ex, ix, dst, "the dst address")
        for w in warps.tolist():
            t = int(ex.rows[w, 0])
            a = np.array([addr[w]], np.int64)
            if space == "generic":
                a = generic_to_shared(ctx, a, np.array([t]), inst, "tcgen05.alloc dst "
                                      "{:#x} is not a shared-memory address")
            col = st.alloc(int(ctx.thread_block[t]), n[w], t, inst)
            one = np.zeros((1, 32), bool)
            one[0, 0] = True
            sub_ex = type(ex)(ex.warps[w:w + 1], ex.rows[w:w + 1], one,
                              ex.lane_active[w:w + 1])
            ctx.store("shared", np.array([t]), sub_ex, a,
                      np.array([[col]], np.uint32), inst)
    return Op(inst, "alu", fn)


# ------------------------------------------------------------------ ld / st / wait

#: shape -> (lanes, registers per .x1)
SHAPES = {"32x32b": (32, 1), "16x64b": (16, 1), "16x128b": (16, 2), "16x256b": (16, 4),
          "16x32bx2": (16, 1)}
_NUMS = {f"x{n}": n for n in (1, 2, 4, 8, 16, 32, 64, 128)}


def fragment(shape: str, num: int, split: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) offsets (32, registers) from ``taddr`` of each thread's registers
    for ``tcgen05.ld/st.shape.xnum`` (see the module docstring)."""
    t = np.arange(32)[:, None]
    per = SHAPES[shape][1]
    j = np.arange(num * per)[None, :]
    i, r = j // per, j % per
    if shape == "32x32b":
        lane, col = t + 0 * j, j + 0 * t
    elif shape == "16x64b":
        lane, col = t // 4 + 8 * (t % 2) + 0 * j, 2 * j + (t // 2) % 2
    elif shape == "16x128b":
        lane, col = t // 4 + 8 * r, 4 * i + t % 4
    elif shape == "16x256b":
        lane, col = t // 4 + 8 * (r // 2), 8 * i + 2 * (t % 4) + r % 2
    else:
        lane, col = t % 16 + 0 * j, j + (t // 16) * split
    return np.broadcast_to(lane, (32, num * per)), np.broadcast_to(col, (32, num * per))


def _ldst(inst: Instruction, ctx: Any) -> Op:
    parts = inst.parts
    load = parts[1] == "ld"
    if len(parts) > 2 and parts[2] == "red":
        raise _unsupported(inst, "tcgen05.ld.red is not supported (sm_101a/sm_103f)")
    rest = list(parts[2:])
    if rest[:2] != ["sync", "aligned"] or rest[-1] != "b32":
        raise _unsupported(inst, f"tcgen05.{parts[1]}.sync.aligned.shape.num.b32")
    mods = rest[2:-1]
    if any(m.startswith(("pack", "unpack")) for m in mods):
        raise _unsupported(inst, ".pack::16b / .unpack::16b are not supported")
    if len(mods) != 2 or mods[0] not in SHAPES or mods[1] not in _NUMS:
        raise _unsupported(inst, f"shape and .num: one of {sorted(SHAPES)} and .x1..x128 "
                                 f"(got {'.'.join(mods)})")
    shape, num = mods[0], _NUMS[mods[1]]
    nlanes, per = SHAPES[shape]
    nregs = num * per
    if nregs > 128:
        raise _unsupported(inst, f".{shape}.{mods[1]} would need {nregs} registers (at most "
                                 "128, PTX ISA Table 49)")
    ops = list(inst.operands)
    regs_op = ops.pop(0) if load else ops.pop()
    addr_op = ops.pop(0)
    split = 0
    if shape == "16x32bx2":
        if len(ops) != 1 or not isinstance(ops[0], Imm):
            raise _unsupported(inst, ".16x32bx2 takes an immediate immHalfSplitoff")
        split = ops[0].value
    elif ops:
        raise _unsupported(inst, f"too many operands for .{shape}")
    if not isinstance(regs_op, Vec) or len(regs_op.items) != nregs:
        raise _unsupported(inst, f".{shape}.{mods[1]} takes a vector of {nregs} .b32 "
                                 "registers")
    t32 = TYPES["b32"]
    if load:
        access = [setter(x, t32, ctx, inst) for x in regs_op.items]
    else:
        access = [getter(x, t32, ctx, inst) for x in regs_op.items]
    ga = tmem_address(addr_op, ctx, inst)
    lane_off, col_off = fragment(shape, num, split)
    span = int(col_off.max()) + 1
    what = f"tcgen05.{parts[1]}"

    def fn(ix: Any, ex: Any) -> None:
        st = state_of(ctx)
        warps = whole_warps(ctx, inst, ex)
        ta = _per_warp(ctx, inst, ex, ix, ga, "taddr")
        g = ex.rows.shape[0]
        vals = None
        if not load:
            vals = np.zeros((g, 32, nregs), np.uint32)
            for j, get in enumerate(access):
                v = np.asarray(get(ix)).astype(np.uint32)
                vals[:, :, j][ex.mask] = v
        out = np.zeros((g, 32, nregs), np.uint32)
        for w in warps.tolist():
            t = int(ex.rows[w, 0])
            blk = int(ctx.thread_block[t])
            q = int(ctx.thread_linear[t]) // 32 % 4
            lane0, col0 = ta[w] >> 16, ta[w] & 0xFFFF
            if not (32 * q <= lane0 and lane0 + nlanes <= 32 * q + 32):
                st.fail(t, inst, f"{what} of lanes {lane0}..{lane0 + nlanes - 1}: warp "
                        f"{int(ctx.thread_linear[t]) // 32} of the CTA reaches only lanes "
                        f"{32 * q}..{32 * q + 31} (its quarter, warp id % 4 = {q}; PTX ISA "
                        "9.7.16.8.1)")
            st.check_cells(blk, (lane0, lane0 + nlanes), (col0, col0 + span), t, inst, what)
            ln, cl = lane0 + lane_off, col0 + col_off
            _check_pending(st, blk, (lane0, lane0 + nlanes), (col0, col0 + span),
                           ex.rows[w][ex.mask[w]].tolist(), inst, load)
            live = ex.mask[w]
            if load:
                st.read(blk, ln, cl, t, inst, what)
                out[w] = st.cells[blk, ln, cl]
            else:
                st.cells[blk, ln[live], cl[live]] = vals[w][live]
                st.write(blk, ln[live], cl[live])
            rec = (blk, (lane0, lane0 + nlanes), (col0, col0 + span), inst.line)
            book = st.loads if load else st.stores
            for th in ex.rows[w][live].tolist():
                book.setdefault(int(th), []).append(rec)
        if load:
            for j, put in enumerate(access):
                put(ix, out[:, :, j][ex.mask])
    return Op(inst, "alu", fn)


def _check_pending(st: TensorMemory, blk: int, lanes: tuple, cols: tuple, threads: list,
                   inst: Instruction, load: bool) -> None:
    """A tcgen05.ld/st of cells a tcgen05.mma writes, by a warp that has not seen its
    completion, is a race."""
    settle(st)
    thread = threads[0]
    for rec in st.pending:
        if rec["block"] != blk or rec.get("done") or observed(st, rec, threads):
            continue
        if rec["lanes"][0] < lanes[1] and lanes[0] < rec["lanes"][1] and \
                rec["cols"][0] < cols[1] and cols[0] < rec["cols"][1]:
            how = ("not yet committed (no tcgen05.commit by its thread since)"
                   if rec.get("mbar") is None else
                   "committed, but no thread of this warp has waited on the mbarrier "
                   "phase that signals its completion")
            st.fail(thread, inst, f"race: tcgen05.{'ld reads' if load else 'st writes'} "
                    f"Tensor Memory lanes {lanes[0]}..{lanes[1] - 1}, columns "
                    f"{cols[0]}..{cols[1] - 1}, "
                    f"{rec.get('what', 'the D matrix of the tcgen05.mma')} on line "
                    f"{rec['line']} (issued by {st.wave.location(rec['thread'], None)}), "
                    f"which is {how}; wait for the mbarrier of its tcgen05.commit first")


def c_tcgen05_memory(inst: Instruction, ctx: Any) -> Op:
    """tcgen05.alloc/dealloc/relinquish_alloc_permit/ld/st/wait/fence."""
    sub = inst.parts[1]
    if sub in ("alloc", "dealloc", "relinquish_alloc_permit"):
        return c_alloc(inst, ctx)
    if sub in ("ld", "st"):
        return _ldst(inst, ctx)
    if sub in ("wait::ld", "wait::st"):
        if inst.parts[2:] != ("sync", "aligned") or inst.operands:
            raise _unsupported(inst, f"tcgen05.{sub}.sync.aligned takes no operand")
        book = "loads" if sub == "wait::ld" else "stores"

        def wait(ix: Any, ex: Any) -> None:
            st = state_of(ctx)
            whole_warps(ctx, inst, ex)
            d = getattr(st, book)
            for th in ex.rows[ex.mask].tolist():
                d.pop(int(th), None)
        return Op(inst, "alu", wait)
    if sub in ("fence::before_thread_sync", "fence::after_thread_sync"):
        if len(inst.parts) != 2 or inst.operands:
            raise _unsupported(inst, f"tcgen05.{sub} takes no modifier or operand")
        return Op(inst, "alu", lambda ix, ex: None)
    raise _unsupported(inst, f"tcgen05.{sub} is not supported")


COMPILERS = {"alloc", "dealloc", "relinquish_alloc_permit", "ld", "st", "wait::ld",
             "wait::st", "fence::before_thread_sync", "fence::after_thread_sync"}
