"""Warpgroup matrix instructions (sm_90a): ``wgmma.fence``, ``wgmma.mma_async``,
``wgmma.commit_group`` and ``wgmma.wait_group``.

Sources: PTX ISA 9.0, section 9.7.15 ("Asynchronous Warpgroup Level Matrix Multiply-
Accumulate Instructions"): 9.7.15.1 (warpgroup), 9.7.15.5.1 (register fragments and the
shared-memory matrix layouts: "Shared Memory Matrix Layout", "Strides", "Matrix
Descriptor"), 9.7.15.5.2 (``wgmma.mma_async``), 9.7.15.6.1-3 (``wgmma.fence``,
``commit_group``, ``wait_group``)::

    wgmma.mma_async.sync.aligned.m64nNk16.{f32,f16}.f16.f16   d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b;
    wgmma.mma_async.sync.aligned.m64nNk16.{f32,f16}.f16.f16   d, {a}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b;
    wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16       (the same two forms)
    wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32        d, a-desc|{a}, b-desc, scale-d, imm-scale-a, imm-scale-b;
    wgmma.mma_async.sync.aligned.m64nNk32.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}  (as tf32)
    wgmma.mma_async.sync.aligned.m64nNk32{.satfinite}.s32.{s8,u8}.{s8,u8}    d, a-desc|{a}, b-desc, scale-d;

N is 8..256 in steps of 8, and for the integer types 8, 16, 24, 32, 48, 64, ..., 256 (the
shapes ptxas accepts for sm_90a). The product is D = (scale-a A) (scale-b B) + (scale-d ?
D : 0) for the 64 x N tile of one warpgroup.

Warpgroup: four contiguous warps of a block whose first warp index is a multiple of 4.
Every ``wgmma`` instruction is ``.sync.aligned``: the 128 threads of the warpgroup execute
it together, convergently; a warpgroup with a missing warp, a partial warp or a block of
fewer threads is refused (:class:`~hardware.simt.errors.ExecutionError`), and so are
descriptors or ``scale-d`` that differ within the warpgroup.

The register fragments, the matrix descriptor and the shared-memory layouts are
:mod:`hardware.simt.wgmma_layout`'s (names re-exported here). A descriptor with a non-zero
base offset (a swizzle pattern that does not start at its repeat boundary) is refused, as
is any chunk outside the block's shared memory. The operand bytes are read through the
launch's shared-memory path (bounds, initcheck, racecheck and statistics see them as
16-byte reads by the warpgroup's threads).

Arithmetic: floating-point inputs go through the launch GPU's tensor-core preset of
:mod:`refimpl.matmul.presets` (``"H100-FP16"``, ``"H100-BF16"``, ``"H100-TF32"``,
``"H100-E4M3"``/``"H100-E5M2"``, the warpgroup FP8 model; e4m3 x e5m2 is that model with
each operand's own input exponent floor), evaluated by :func:`refimpl.matmul.matmul` on
the exact operands with D as its accumulator input (none when scale-d is false); a GPU
without one is refused at launch. ``.tf32`` operands are 32-bit words with the low 13 bits
dropped. Integer products are exact, wrapped to 32 bits or clamped with ``.satfinite``.

Asynchrony (9.7.15.4): the result is computed and written when ``wgmma.mma_async`` is
issued, and the instruction joins the thread's open wgmma-group; ``commit_group`` closes
it; ``wait_group N`` completes all committed groups but the N most recent. Until the group
of a ``wgmma.mma_async`` is completed, any other instruction that reads or writes one of
its accumulator or A registers is a race (ExecutionError naming the register, the thread,
the instruction and the wgmma); a later ``wgmma.mma_async`` of the same shape may use the
same accumulator registers (the ISA orders those). A register-to-register ``mov``
(copy, pack, unpack) of an in-flight register is a renaming, not a read (ptxas emits no
instruction for it; Triton unpacks f16 accumulators so before its wait): its destination
becomes in flight with the same group instead. A ``wgmma.mma_async`` whose D or A
register was written by another instruction since the thread's last ``wgmma.fence``, or a
thread's first ``wgmma.mma_async`` without a ``wgmma.fence`` before it, is refused as the
ISA requires the fence there. Writing a shared-memory operand of a ``wgmma.mma_async``
before the wait that completes it is a race too: the wait compares the operand's bytes
with those read at issue and reports a change (the address, the wgmma's line and a
thread of the warpgroup; a write of the bytes already there goes unseen). An
asynchronous copy into an operand's bytes (a TMA load refilling a pipeline stage), or
an ``st.shared`` by another thread, must be ordered after that wait, whenever it lands:
with racecheck on, one by a thread that has not acquired a release made by the
warpgroup after its wait (nor passed a barrier of the block after it) is a race
(:mod:`hardware.simt.wgmma_reads`).

Statistics: :class:`~hardware.simt.stats.LaunchStats` counts ``wgmma_instructions``
(one per warpgroup and ``wgmma.mma_async``) and ``wgmma_flops`` (2 x 64 x N x K each).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from refimpl import matmul as mm
from refimpl.matmul import presets

from . import matrix
from .errors import ExecutionError, LaunchError, UnsupportedPtxError
from .isa.operands import Op, getter, setter
from .parser import Addr, Imm, Instruction, Pair, Reg, Vec
from .proxycheck import async_read
from .types import TYPES
from .wgmma_reads import OperandReads, watch_store
from .wgmma_layout import (INPUTS, N_VALUES, Descriptor, a_register_layout, accumulator_layout,
                           chunk_addresses, decode_descriptor, descriptor_chunks,
                           fragment_matrix, swizzle)

__all__ = ["COMPILERS", "Descriptor", "chunk_addresses", "decode_descriptor",
           "accumulator_layout", "async_write", "swizzle", "watch", "wgmma_preset",
           "N_VALUES"]


def _unsupported(inst: Instruction, why: str) -> UnsupportedPtxError:
    return UnsupportedPtxError(f"line {inst.line}: {inst.text!r}: {why}")


# ------------------------------------------------------------------ arithmetic


def wgmma_preset(gpu: str, aname: str, bname: str) -> Any:
    """The accumulation model of a floating-point wgmma on ``gpu``: the preset
    ``"<gpu>-<FORMAT>"`` (canonical), for e4m3 x e5m2 the E4M3 preset with each operand's
    input exponent floor; None when the GPU has no preset of ``wgmma.mma_async`` for the
    inputs (wgmma exists on sm_90a only: Hopper)."""
    fa, fb = matrix.TENSOR_CORE_FORMATS[aname][2], matrix.TENSOR_CORE_FORMATS[bname][2]
    name = f"{gpu}-{fa}"
    for x in (name, f"{gpu}-{fb}"):
        if not presets.is_preset(x) or \
                "wgmma" not in presets.PRESETS[presets.canonical(x)].instruction:
            return None
    if fa == fb:
        return presets.canonical(name)
    ma, mb = presets.preset(name), presets.preset(f"{gpu}-{fb}")
    return dataclasses.replace(ma, input_emin=(ma.input_emin, mb.input_emin))


# ------------------------------------------------------------------ warpgroups


def _warpgroups(ctx: Any, inst: Instruction, ex: Any) -> tuple[np.ndarray, np.ndarray]:
    """(order (nwg, 4) positions into ex.warps, live (G,) warps that execute): the
    warpgroups of the executing warps, each checked whole and convergent."""
    live = ex.mask.any(axis=1)
    if not live.any():
        return np.zeros((0, 4), np.int64), live
    if not ex.mask[live].all():
        w = int(np.flatnonzero(live & ~ex.mask.all(axis=1))[0])
        lane = int(np.flatnonzero(~ex.mask[w])[0])
        raise ExecutionError(
            f"{ctx.location(int(ex.rows[w, lane]), inst)}: not executed by every lane of "
            "the warp (wgmma is .sync.aligned: all 128 threads of the warpgroup execute it "
            "convergently)")
    pos = np.flatnonzero(live)
    first = ex.rows[pos, 0]
    wib = ctx.thread_linear[first] // 32
    blk = ctx.thread_block[first]
    key = blk * 1_000_000 + wib // 4
    order = np.lexsort((wib, key))
    pos, wib, key = pos[order], wib[order], key[order]
    ukey, start, count = np.unique(key, return_index=True, return_counts=True)
    bad = count != 4
    if not bad.any():
        quart = wib.reshape(-1, 4) % 4
        bad = (quart != np.arange(4)).any(axis=1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        th = int(ex.rows[pos[start[j]], 0])
        raise ExecutionError(
            f"{ctx.location(th, inst)}: executed by warp(s) "
            f"{sorted(int(x) for x in wib[start[j]:start[j] + count[j]])} of warpgroup "
            f"{int(wib[start[j]] // 4)} without the others (a warpgroup is four aligned "
            "warps 4w..4w+3 of the block; wgmma is .sync.aligned: all four execute it "
            "together, and a block whose size is not a multiple of 128 has no whole last "
            "warpgroup)")
    if (~ctx.exists[ex.rows[pos]]).any():
        th = int(ex.rows[pos[0], 0])
        raise ExecutionError(f"{ctx.location(th, inst)}: the warpgroup has threads that do "
                             "not exist (the block size is not a multiple of 128)")
    return pos.reshape(-1, 4), live


def _uniform(ctx: Any, inst: Instruction, v: np.ndarray, threads: np.ndarray,
             what: str) -> np.ndarray:
    """v (nwg, 128) -> (nwg,) after checking it is the same in each warpgroup."""
    bad = (v != v[:, :1]).any(axis=1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        lane = int(np.flatnonzero(v[j] != v[j, 0])[0])
        raise ExecutionError(f"{ctx.location(int(threads[j, lane]), inst)}: {what} differs "
                             "within the warpgroup (it must be the same for all 128 threads)")
    return v[:, 0]


# ------------------------------------------------------------------ async state

_ACC, _AREG, _COPY = 1, 2, 3


class WgmmaState:
    """Per thread: committed and completed wgmma-groups, whether a wgmma.fence was
    executed; per tracked register and thread: the group of the last wgmma that used it,
    its role there, the wgmma's line, and whether another instruction wrote it since the
    thread's last fence."""

    def __init__(self, ctx: Any, regs: frozenset) -> None:
        self.ctx = ctx
        self.stats = ctx.stats
        self.regs = regs
        t = ctx.T
        self.committed = np.zeros(t, np.int64)
        self.completed = np.zeros(t, np.int64)
        self.fenced = np.zeros(t, bool)
        self.last = {r: np.full(t, -1, np.int64) for r in regs}
        self.role = {r: np.zeros(t, np.int64) for r in regs}
        self.line = {r: np.zeros(t, np.int64) for r in regs}
        self.dirty = {r: np.zeros(t, bool) for r in regs}
        self.keys = {r: np.full(t, -1, np.int64) for r in regs}   # shape and position
        self.any_pending = False
        #: the operand reads for racecheck's ordering of asynchronous writes after them
        self.operands = OperandReads(ctx)
        #: the shared-memory operands of wgmmas not yet completed, as read at issue
        self.reads: list[dict] = []

    def check_reads(self, inst: Instruction) -> None:
        """At a wait: each operand of a wgmma whose group is now complete must still hold
        the bytes it held at issue (the wgmma reads it asynchronously until then)."""
        ctx, left = self.ctx, []
        for rec in self.reads:
            done = rec["group"] < self.completed[rec["first"]]
            if done.any():
                now = ctx.smem[rec["off"][done][:, :, None] + np.arange(16)]
                bad = now != rec["data"][done]
                if bad.any():
                    w, c, b = (int(x) for x in np.argwhere(bad)[0])
                    thread = int(rec["first"][done][w])
                    rel = int(rec["off"][done][w, c]) + b - int(ctx.sbase[thread])
                    raise ExecutionError(
                        f"{ctx.location(thread, inst)}: race: shared address {rel:#x}, read "
                        f"by the wgmma.mma_async on line {rec['line']} as an operand, was "
                        "written before the wgmma.wait_group that completes its "
                        "wgmma-group (the operands are read asynchronously until then)")
                if done.all():
                    continue
                rec = {k: (v[~done] if isinstance(v, np.ndarray) else v)
                       for k, v in rec.items()}
            left.append(rec)
        self.reads = left

    def inflight(self, name: str, th: Any) -> np.ndarray:
        return self.last[name][th] >= self.completed[th]

    def race(self, name: str, th: np.ndarray, hit: np.ndarray, inst: Instruction,
             what: str) -> ExecutionError:
        j = int(np.flatnonzero(hit)[0])
        t = int(th[j])
        role = {_ACC: "the accumulator", _AREG: "the A operand",
                _COPY: "a copy of an accumulator"}[int(self.role[name][t])]
        return ExecutionError(
            f"{self.ctx.location(t, inst)}: race: {what} register {name}, {role} of the "
            f"wgmma.mma_async on line {int(self.line[name][t])}, before a "
            "wgmma.wait_group that completes its wgmma-group")


def async_write(ctx: Any, slot: int, offsets: np.ndarray, inst: Instruction,
                what: str) -> None:
    """Hook of the asynchronous copies into shared memory: thread ``slot`` issues a
    write of wave shared ``offsets`` (:mod:`hardware.simt.wgmma_reads`)."""
    st = getattr(ctx, "wgmma_state", None)
    if st is not None and st.stats is ctx.stats:
        st.operands.write(slot, offsets, inst, what)


def _is_move(inst: Instruction) -> bool:
    """A register-to-register ``mov`` (copy, pack or unpack): a renaming that reads no
    register value on the hardware (ptxas emits no instruction for it)."""
    ops = inst.operands
    if inst.parts[0] != "mov" or len(ops) != 2:
        return False
    items = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
    return all(isinstance(x, Reg) and not x.neg for x in items) and \
        all(not x.name.startswith("%") or x.name[1:2] in "rfdhp" and "." not in x.name
            for x in items)


def _tracked(ctx: Any) -> frozenset:
    """The registers that any wgmma.mma_async of the kernel uses as D or A, and those
    that register moves copy them into (transitively)."""
    got = getattr(ctx, "_wgmma_regs", None)
    if got is None:
        names: set = set()
        insts = ctx.kernel.source.instructions
        for inst in insts:
            if inst.parts[:2] == ("wgmma", "mma_async") and len(inst.operands) >= 2:
                for op in inst.operands[:2]:
                    if isinstance(op, Vec):
                        names.update(x.name for x in op.items if isinstance(x, Reg))
        moves = [i for i in insts if _is_move(i)]
        grew = bool(names)
        while grew:
            grew = False
            for inst in moves:
                if set(_regs_in(inst.operands[1])) & names:
                    new = set(_regs_in(inst.operands[0])) - names
                    if new:
                        names |= new
                        grew = True
        got = frozenset(names)
        ctx._wgmma_regs = got
    return got


def _state(ctx: Any) -> WgmmaState:
    st = getattr(ctx, "wgmma_state", None)
    if st is None or st.stats is not ctx.stats:   # a new launch of a reused wave
        st = WgmmaState(ctx, _tracked(ctx))
        ctx.wgmma_state = st
    return st


def _regs_in(op: Any) -> list[str]:
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, Vec):
        return [n for x in op.items for n in _regs_in(x)]
    if isinstance(op, Pair):
        return _regs_in(op.first) + _regs_in(op.second)
    if isinstance(op, Addr) and isinstance(op.base, Reg):
        return [op.base.name]
    return []


_NO_DEST = frozenset("st red bar barrier cp prefetch membar fence".split())


def watch(op: Op, inst: Instruction, ctx: Any) -> Op:
    """Wrap a compiled non-wgmma instruction that touches a register some wgmma uses: it
    raises on a register in flight, and marks the registers it writes for the fence
    check (the module docstring); wrap ``st.shared`` for the operand-read check of
    :mod:`hardware.simt.wgmma_reads`. Other instructions are returned unchanged."""
    if inst.parts[0] == "wgmma" or op.fn is None or getattr(ctx, "kernel", None) is None:
        return op
    tracked = _tracked(ctx)
    if not tracked:
        return op
    op = _watch_registers(op, inst, ctx, tracked)
    if inst.parts[0] == "st" and {"shared", "shared::cta"} & set(inst.parts[1:]):
        op = watch_store(op, inst, ctx, lambda: _state(ctx).operands)
    return op


def _watch_registers(op: Op, inst: Instruction, ctx: Any, tracked: frozenset) -> Op:
    inst_regs = inst.operands
    touched = sorted({n for o in inst_regs for n in _regs_in(o)} & tracked)
    if inst.guard is not None and inst.guard.name in tracked:
        touched = sorted(set(touched) | {inst.guard.name})
    if not touched:
        return op
    written = []
    if inst.parts[0] not in _NO_DEST and inst_regs and not isinstance(inst_regs[0], Addr):
        written = sorted(set(_regs_in(inst_regs[0])) & tracked)
    move = _is_move(inst)
    sources = sorted(set(_regs_in(inst_regs[1])) & tracked) if move else []
    fn = op.fn

    def checked(ix: Any, ex: Any) -> None:
        st = _state(ctx)
        copied = None
        if st.any_pending:
            th = np.asarray(ctx._thread_ids(ix))
            for name in (written if move else touched):
                hit = st.inflight(name, th)
                if hit.any():
                    what = "write of" if name in written else "read of"
                    raise st.race(name, th, hit, inst, what)
            for name in sources:   # a move passes an in-flight value on, reading nothing
                hit = st.inflight(name, th)
                if hit.any():
                    last = np.where(hit, st.last[name][th], -1)
                    if copied is None or (last > copied[0]).any():
                        copied = (last if copied is None else np.maximum(copied[0], last),
                                  st.line[name][th])
        fn(ix, ex)
        for name in written:
            st.dirty[name][ix] = True
            if copied is not None:
                st.last[name][ix] = copied[0]
                st.role[name][ix] = _COPY
                st.line[name][ix] = copied[1]
    op.fn = checked
    return op


# ------------------------------------------------------------------ fence / commit / wait


def _threads_of(ctx: Any, inst: Instruction, ex: Any) -> np.ndarray:
    order, _ = _warpgroups(ctx, inst, ex)
    return ex.rows[order].reshape(-1)


def c_wgmma(inst: Instruction, ctx: Any) -> Op:
    """wgmma.fence / commit_group / wait_group / mma_async (see the module docstring)."""
    parts = inst.parts
    sub = parts[1] if len(parts) > 1 else ""
    if sub not in ("fence", "commit_group", "wait_group", "mma_async"):
        raise _unsupported(inst, f"wgmma.{sub} is not supported (fence, commit_group, "
                                 "wait_group, mma_async)")
    if "sp" in parts:
        raise _unsupported(inst, "sparse wgmma (.sp) is not supported")
    if parts[2:4] != ("sync", "aligned"):
        raise _unsupported(inst, f"wgmma.{sub} needs .sync.aligned")
    target = str(getattr(getattr(ctx.kernel, "module_key", None), "target", "") or "")
    arch = target.split(",")[0].strip()
    if arch and arch != "sm_90a":
        raise _unsupported(inst, f"wgmma needs .target sm_90a, the module's is {arch} "
                                 "(ptxas refuses it there too)")
    if sub == "mma_async":
        return _mma_async(inst, ctx)
    if len(parts) != 4:
        raise _unsupported(inst, f"wgmma.{sub}.sync.aligned takes no other modifier")
    if sub == "wait_group":
        ops = inst.operands
        if len(ops) != 1 or not isinstance(ops[0], Imm) or ops[0].value < 0:
            raise _unsupported(inst, "wait_group takes a non-negative integer constant N")
        keep = ops[0].value
    elif inst.operands:
        raise _unsupported(inst, f"wgmma.{sub} takes no operand")

    def fn(ix: Any, ex: Any) -> None:
        st = _state(ctx)
        th = _threads_of(ctx, inst, ex)
        if sub == "fence":
            st.fenced[th] = True
            for d in st.dirty.values():
                d[th] = False
        elif sub == "commit_group":
            st.committed[th] += 1
        else:
            st.completed[th] = np.maximum(st.completed[th], st.committed[th] - keep)
            st.operands.complete(st.completed)
            if st.reads:
                st.check_reads(inst)
    return Op(inst, "alu", fn)


# ------------------------------------------------------------------ mma_async


def _imm(op: Any, inst: Instruction, what: str, allowed: tuple) -> int:
    if not isinstance(op, Imm) or op.value not in allowed:
        raise _unsupported(inst, f"{what} must be an integer constant in {allowed}")
    return op.value


def _mma_async(inst: Instruction, ctx: Any) -> Op:
    parts = inst.parts
    shape = parts[4] if len(parts) > 4 else ""
    types = [p for p in parts[5:] if p != "satfinite"]
    satfinite = "satfinite" in parts[5:]
    if len(types) != 3 or len(parts) - 5 != 3 + satfinite:
        raise _unsupported(inst, "needs .shape.dtype.atype.btype (and .satfinite for "
                                 "integers)")
    dname, aname, bname = types
    if aname not in INPUTS or bname not in INPUTS:
        raise _unsupported(inst, f"input types .{aname}.{bname} are not supported (f16, "
                                 "bf16, tf32, e4m3, e5m2, s8, u8; .b1 is not)")
    integer = aname in ("s8", "u8")
    if integer != (bname in ("s8", "u8")):
        raise _unsupported(inst, "integer and floating-point inputs do not mix")
    fp8 = aname in ("e4m3", "e5m2")
    if not (fp8 and bname in ("e4m3", "e5m2")) and not integer and aname != bname:
        raise _unsupported(inst, f".{aname}.{bname}: both inputs must have the same type "
                                 "(e4m3 and e5m2 excepted)")
    allowed_d = ("s32",) if integer else (("f32",) if aname in ("bf16", "tf32")
                                          else ("f32", "f16"))
    if dname not in allowed_d:
        raise _unsupported(inst, f".{dname} accumulator with .{aname} inputs (allowed: "
                                 f"{', '.join(allowed_d)})")
    if satfinite and not integer:
        raise _unsupported(inst, ".satfinite applies to integer wgmma only")
    k, ebytes = INPUTS[aname]
    try:
        m_, rest = shape.split("n")
        n = int(rest.split("k")[0])
        ok = m_ == "m64" and rest == f"{n}k{k}"
    except ValueError:
        ok = False
    if not ok or n not in N_VALUES[aname]:
        raise _unsupported(inst, f"shape .{shape} is not a wgmma shape for .{aname} "
                                 f"(m64nNk{k}, N in {N_VALUES[aname][0]}..256)")
    ops = inst.operands
    a_regs = isinstance(ops[1], Vec) if len(ops) > 1 else False
    trans_ok = aname in ("f16", "bf16")
    want = 4 + (0 if integer else 2) + (0 if not trans_ok else (1 if a_regs else 2))
    if len(ops) != want:
        raise _unsupported(inst, f"takes {want} operands in this form, got {len(ops)}")
    d_items = _vec(ops[0], inst, "d")
    acc_bits = 16 if dname == "f16" else 32
    n_d = n // 2 if acc_bits == 32 else n // 4
    if len(d_items) != n_d:
        raise _unsupported(inst, f"d needs {n_d} registers for m64n{n} .{dname}, got "
                                 f"{len(d_items)}")
    scale_a = scale_b = 1
    trans_a = trans_b = 0
    if not integer:
        scale_a = _imm(ops[4], inst, "imm-scale-a", (1, -1))
        scale_b = _imm(ops[5], inst, "imm-scale-b", (1, -1))
    if trans_ok:
        if a_regs:
            trans_b = _imm(ops[6], inst, "imm-trans-b", (0, 1))
        else:
            trans_a = _imm(ops[6], inst, "imm-trans-a", (0, 1))
            trans_b = _imm(ops[7], inst, "imm-trans-b", (0, 1))
    sd = ops[3]
    if isinstance(sd, Imm):
        _imm(sd, inst, "scale-d", (0, 1))
        sd_value = bool(sd.value)
        get_sd = lambda ix: sd_value  # noqa: E731
    else:
        get_sd = getter(sd, TYPES["pred"], ctx, inst)
    if not integer:
        gpu = getattr(ctx, "gpu", None)
        if gpu is not None and wgmma_preset(gpu, aname, bname) is None:
            fa = matrix.TENSOR_CORE_FORMATS[aname][2]
            same = sorted(p for p, v in presets.PRESETS.items()
                          if p.endswith(f"-{fa}") and "wgmma" in v.instruction)
            raise LaunchError(
                f"line {inst.line}: {inst.text!r}: gpu={gpu!r} has no wgmma.mma_async "
                f"preset for .{aname}/.{bname} inputs (wgmma is an sm_90a instruction); "
                f"GPUs with one: {', '.join(same)}; launch with one of them (no other "
                "model is substituted)")
    t32 = TYPES["b32"]
    d_get = [getter(x, t32, ctx, inst) for x in d_items]
    d_put = [setter(x, t32, ctx, inst) for x in d_items]
    if a_regs:
        a_items = _vec(ops[1], inst, "a")
        if len(a_items) != 4:
            raise _unsupported(inst, f"a needs 4 registers, got {len(a_items)}")
        a_get = [getter(x, t32, ctx, inst) for x in a_items]
        a_table = a_register_layout(k)
    else:
        a_items = []
        a_desc = getter(ops[1], TYPES["b64"], ctx, inst)
    b_desc = getter(ops[2], TYPES["b64"], ctx, inst)
    d_table = accumulator_layout(n)
    d_names = [x.name for x in d_items if isinstance(x, Reg)]
    a_names = [x.name for x in a_items if isinstance(x, Reg)]
    key = hash((shape, dname)) & 0xFFFFFFF
    spec = dict(k=k, n=n, ebytes=ebytes, aname=aname, bname=bname, dname=dname,
                integer=integer, satfinite=satfinite, scale=scale_a * scale_b,
                trans_a=trans_a, trans_b=trans_b, acc_bits=acc_bits)

    def fn(ix: Any, ex: Any) -> None:
        st = _state(ctx)
        order, _ = _warpgroups(ctx, inst, ex)
        nwg = order.shape[0]
        if nwg == 0:
            return
        g = ex.rows.shape[0]
        th = ex.rows[order].reshape(nwg, 128)
        flat = th.reshape(-1)
        _check_registers(st, inst, flat, d_names, a_names, key)

        def regs(gets: list) -> np.ndarray:      # (nwg, 128, R) uint32
            out = np.empty((nwg, 128, len(gets)), np.uint32)
            for r, get in enumerate(gets):
                v = np.broadcast_to(np.asarray(get(ix)).astype(np.uint32), (g * 32,))
                out[:, :, r] = v.reshape(g, 32)[order].reshape(nwg, 128)
            return out
        sdv = np.broadcast_to(np.asarray(get_sd(ix), bool), (g * 32,)).reshape(g, 32)
        sdv = _uniform(ctx, inst, sdv[order].reshape(nwg, 128), th, "scale-d")
        if a_regs:
            a = fragment_matrix(regs(a_get), a_table, (64, k), 4 // ebytes, 8 * ebytes)
        else:
            a = _smem_operand(ctx, st, inst, ex, order, ix, a_desc, 64, spec, trans_a, th)
        b = _smem_operand(ctx, st, inst, ex, order, ix, b_desc, n, spec, trans_b, th)
        b = np.swapaxes(b, 1, 2)                          # (nwg, K, N)
        dcodes = fragment_matrix(regs(d_get), d_table, (64, n), 32 // acc_bits, acc_bits)
        out = _product(ctx, spec, a, b, dcodes, sdv)      # (nwg, 64, n) codes
        per = 32 // acc_bits
        elems = out[:, d_table[..., 0], d_table[..., 1]]  # (nwg, 128, n/2)
        for r, put in enumerate(d_put):
            v = np.zeros((nwg, 128), np.uint64)
            for h in range(per):
                v |= elems[:, :, r * per + h].astype(np.uint64) << np.uint64(acc_bits * h)
            full = np.zeros((g, 32), np.uint32)
            full[order] = v.reshape(nwg, 4, 32).astype(np.uint32)
            put(ix, full.reshape(-1))
        grp = st.committed[flat]
        for i, name in enumerate(d_names):
            st.last[name][flat] = grp
            st.role[name][flat] = _ACC
            st.line[name][flat] = inst.line
            st.dirty[name][flat] = False
            st.keys[name][flat] = key * 1024 + i
        for name in a_names:       # never an in-flight accumulator (checked above)
            st.last[name][flat] = grp
            st.role[name][flat] = _AREG
            st.line[name][flat] = inst.line
        st.any_pending = True
        if ctx.stats is not None:
            ctx.stats.wgmma_instructions += nwg
            ctx.stats.wgmma_flops += 2 * 64 * n * k * nwg
    return Op(inst, "alu", fn)


def _vec(op: Any, inst: Instruction, what: str) -> list:
    if isinstance(op, Vec):
        return list(op.items)
    raise _unsupported(inst, f"{what} must be a register vector {{...}}")


def _check_registers(st: WgmmaState, inst: Instruction, th: np.ndarray, d_names: list,
                     a_names: list, key: int) -> None:
    """The fence and in-flight rules for the D and A registers of a wgmma.mma_async."""
    if not st.fenced[th].all():
        t = int(th[np.flatnonzero(~st.fenced[th])[0]])
        raise ExecutionError(f"{st.ctx.location(t, inst)}: wgmma.mma_async without a "
                             "wgmma.fence before it (the PTX ISA requires one before the "
                             "first wgmma.mma_async of a warpgroup)")
    for i, name in enumerate(d_names):
        _check_unwritten(st, inst, th, name, "accumulator")
        fl = st.inflight(name, th)
        if fl.any():
            same = (st.role[name][th] == _ACC) & (st.keys[name][th] == key * 1024 + i)
            if (fl & ~same).any():
                raise st.race(name, th, fl & ~same, inst, "use as accumulator of")
    for name in a_names:
        _check_unwritten(st, inst, th, name, "A")
        fl = st.inflight(name, th) & (st.role[name][th] == _ACC)
        if fl.any():
            raise st.race(name, th, fl, inst, "read as A of")


def _check_unwritten(st: WgmmaState, inst: Instruction, th: np.ndarray, name: str,
                     role: str) -> None:
    """Register ``name`` (``role``: accumulator or A) not written since the last fence."""
    if st.dirty[name][th].any():
        t = int(th[np.flatnonzero(st.dirty[name][th])[0]])
        raise ExecutionError(
            f"{st.ctx.location(t, inst)}: {role} register {name} was written since the "
            "last wgmma.fence (the PTX ISA requires a wgmma.fence between a register "
            "access and a wgmma.mma_async that uses the register)")


def _smem_operand(ctx: Any, st: WgmmaState, inst: Instruction, ex: Any, order: np.ndarray,
                  ix: Any,
                  get_desc: Any, rows: int, spec: dict, mn_major: int,
                  th: np.ndarray) -> np.ndarray:
    """The (nwg, rows, K) element codes of a descriptor operand, read from shared memory
    in 16-byte chunks spread over the warpgroup's threads."""
    nwg = order.shape[0]
    g = ex.rows.shape[0]
    raw = np.broadcast_to(np.asarray(get_desc(ix)).astype(np.uint64), (g * 32,))
    desc = _uniform(ctx, inst, raw.reshape(g, 32)[order].reshape(nwg, 128), th,
                    "the matrix descriptor")
    eb = spec["ebytes"]
    k_bytes = 32
    chunks = []
    for j in range(nwg):
        d = decode_descriptor(int(desc[j]))
        try:
            c = descriptor_chunks(d, int(desc[j]), rows, k_bytes, eb, bool(mn_major),
                                  ctx.smem_size)
        except ValueError as e:
            raise ExecutionError(f"{ctx.location(int(th[j, 0]), inst)}: {e}") from None
        chunks.append(c)
    addr = np.stack(chunks)                                # (nwg, C)
    nch = addr.shape[1]
    data = np.empty((nwg, nch, 16), np.uint8)
    warps = ex.warps[order].reshape(-1)
    rws = ex.rows[order].reshape(-1, 32)
    act = ex.lane_active[order].reshape(-1, 32)
    for c0 in range(0, nch, 128):
        cnt = min(128, nch - c0)
        m = np.zeros((nwg, 128), bool)
        m[:, :cnt] = True
        sub = type(ex)(warps, rws, m.reshape(-1, 32), act)
        six = th[:, :cnt].reshape(-1)
        got = ctx.load("shared", six, sub, addr[:, c0:c0 + cnt].reshape(-1),
                       np.dtype(np.uint8), 16, inst)
        if ctx.tools:
            async_read(ctx, six, (ctx.sbase[th[:, 0]][:, None] + addr[:, c0:c0 + cnt])
                       .reshape(-1), 16, inst, "wgmma.mma_async operand read")
        data[:, c0:c0 + cnt] = got.reshape(nwg, cnt, 16)
    st.reads.append({"first": th[:, 0].copy(), "group": st.committed[th[:, 0]].copy(),
                     "off": ctx.sbase[th[:, 0]][:, None] + addr, "data": data,
                     "line": inst.line})
    st.operands.issue(th, ctx.sbase[th[:, 0]][:, None] + addr, st.committed[th[:, 0]],
                      inst.line)
    elem = data.reshape(nwg, nch, 16 // eb, eb).copy().view(f"<u{eb}")[..., 0]
    kk = spec["k"]
    if not mn_major:                      # (rows, K/T chunks, T) -> (rows, K)
        return elem.reshape(nwg, rows, kk).astype(np.uint32)
    t = 16 // eb                          # (rows/T, K, T) -> (rows, K)
    e = elem.reshape(nwg, rows // t, kk, t)
    return np.transpose(e, (0, 1, 3, 2)).reshape(nwg, rows, kk).astype(np.uint32)


def _product(ctx: Any, spec: dict, a: np.ndarray, b: np.ndarray, d: np.ndarray,
             scale_d: np.ndarray) -> np.ndarray:
    """D codes (nwg, 64, N) of (scale A) B + (scale-d ? D : 0)."""
    if spec["integer"]:
        ai = matrix._integers(a, spec["aname"])
        bi = matrix._integers(b, spec["bname"])
        ci = matrix._integers(d, "s32") * scale_d[:, None, None]
        return matrix._int_mma(ai, bi, ci, spec["satfinite"])
    av = matrix._values(a, spec["aname"]) * spec["scale"]
    bv = matrix._values(b, spec["bname"])
    dname = spec["dname"]
    out_fmt = "fp16" if dname == "f16" else "fp32"
    model = wgmma_preset(ctx.gpu, spec["aname"], spec["bname"])
    res = np.empty(d.shape, np.float32)
    for flag in (True, False):
        sel = scale_d == flag
        if not sel.any():
            continue
        c = matrix._values(d[sel], dname).astype(np.float32) if flag else None
        res[sel] = np.asarray(mm.matmul(av[sel].astype(np.float32), bv[sel].astype(np.float32),
                                        c, accumulate=model, out_format=out_fmt),
                              dtype=np.float32)
    return matrix._codes(res, dname)


#: opcode -> compiler, merged into the instruction table
COMPILERS = {"wgmma": c_wgmma}
