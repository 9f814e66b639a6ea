"""Random structured control flow: PTX built from a random program (nested if/else,
loops with data-dependent trip counts, break, early return, predicated instructions)
against a per-lane scalar execution of the same program.

Checks the outputs of every lane and ``thread_instructions``: under immediate
post-dominator reconvergence a lane is active exactly for the instructions of its own
path, so the total equals the sum of the per-lane instruction counts. Programs without
early returns may also contain top-level exchanges (store to shared memory, bar.sync,
read the next thread's value, bar.sync), checked phase by phase.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simt_harness import load

from hardware.simt import GlobalMemory, load_ptx

M32 = 0xFFFFFFFF

# --------------------------------------------------------------------------- programs
# ("assign", op, src)                       acc = acc op src    (1 instruction)
# ("pred", bit, op, src)                    if (v >> bit) & 1: acc = acc op src, predicated
# ("if", bit, then, else)                   branch on bit `bit` of v ^ acc
# ("loop", shift, body)                     for k in range((v >> shift) & 7)
# ("break", bit)                            inside a loop: if bit of (acc ^ k) set: break
# ("ret", bit)                              if bit of acc set: out = acc; return

OPS = ("add", "xor", "mul", "sub")
SRCS = ("v", "k", "c")


def _stmt(depth: int, in_loop: bool):
    leaves = [
        st.tuples(st.just("assign"), st.sampled_from(OPS), st.sampled_from(SRCS)),
        st.tuples(st.just("pred"), st.integers(0, 31), st.sampled_from(OPS),
                  st.sampled_from(SRCS)),
        st.tuples(st.just("ret"), st.integers(0, 31)),
    ]
    if in_loop:
        leaves.append(st.tuples(st.just("break"), st.integers(0, 31)))
    if depth <= 0:
        return st.one_of(*leaves)
    block = st.lists(st.deferred(lambda: _stmt(depth - 1, in_loop)), max_size=3)
    loop_block = st.lists(st.deferred(lambda: _stmt(depth - 1, True)), max_size=3)
    return st.one_of(
        *leaves,
        st.tuples(st.just("if"), st.integers(0, 31), block, block),
        st.tuples(st.just("loop"), st.integers(0, 29), loop_block),
    )


programs = st.lists(_stmt(3, False), min_size=1, max_size=4)


class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.nlabel = 0
        self.nreg = 10     # %r0..%r9 fixed: r2 = v, r3 = acc, r4 = tmp, r5 = const
        self.npred = 1
        self.loops: list[tuple[str, str]] = []  # (counter register, end label)

    def label(self) -> str:
        self.nlabel += 1
        return f"$L_{self.nlabel}"

    def reg(self) -> str:
        self.nreg += 1
        return f"%r{self.nreg}"

    def pred(self) -> str:
        self.npred += 1
        return f"%p{self.npred}"

    def src(self, s: str) -> str:
        if s == "v":
            return "%r2"
        if s == "k":
            return self.loops[-1][0] if self.loops else "%r2"
        return "%r5"

    def op(self, op: str, s: str, guard: str = "") -> None:
        g = f"@{guard} " if guard else ""
        opc = {"add": "add.u32", "xor": "xor.b32", "mul": "mul.lo.u32", "sub": "sub.u32"}[op]
        self.lines.append(f"{g}{opc} %r3, %r3, {self.src(s)};")

    def block(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def bit_pred(self, a: str, bit: int) -> str:
        p = self.pred()
        self.lines.append(f"shr.u32 %r4, {a}, {bit};")
        self.lines.append("and.b32 %r4, %r4, 1;")
        self.lines.append(f"setp.ne.u32 {p}, %r4, 0;")
        return p

    def stmt(self, s) -> None:
        kind = s[0]
        if kind == "assign":
            self.op(s[1], s[2])
        elif kind == "pred":
            p = self.bit_pred("%r2", s[1])
            self.op(s[2], s[3], guard=p)
        elif kind == "if":
            _, bit, then, els = s
            self.lines.append("xor.b32 %r6, %r2, %r3;")
            p = self.bit_pred("%r6", bit)
            l_else, l_end = self.label(), self.label()
            self.lines.append(f"@!{p} bra {l_else if els else l_end};")
            self.block(then)
            if els:
                self.lines.append(f"bra.uni {l_end};")
                self.lines.append(f"{l_else}:")
                self.block(els)
            self.lines.append(f"{l_end}:")
        elif kind == "loop":
            _, shift, body = s
            k, n = self.reg(), self.reg()
            top, end = self.label(), self.label()
            p = self.pred()
            self.lines += [f"shr.u32 {n}, %r2, {shift};", f"and.b32 {n}, {n}, 7;",
                           f"mov.u32 {k}, 0;", f"{top}:", f"setp.ge.u32 {p}, {k}, {n};",
                           f"@{p} bra {end};"]
            self.loops.append((k, end))
            self.block(body)
            self.loops.pop()
            self.lines += [f"add.u32 {k}, {k}, 1;", f"bra.uni {top};", f"{end}:"]
        elif kind == "break":
            k, end = self.loops[-1]
            self.lines.append(f"xor.b32 %r6, %r3, {k};")
            p = self.bit_pred("%r6", s[1])
            self.lines.append(f"@{p} bra {end};")
        elif kind == "exchange":
            # acc ^= acc of the next thread of the block, through shared memory
            self.lines += ["st.shared.u32 [%r8], %r3;", "bar.sync 0;",
                           "ld.shared.u32 %r6, [%r9];", "bar.sync 0;",
                           "xor.b32 %r3, %r3, %r6;"]
        elif kind == "ret":
            p = self.bit_pred("%r3", s[1])
            skip = self.label()
            self.lines += [f"@!{p} bra {skip};", "st.global.u32 [%rd4], %r3;", "ret;",
                           f"{skip}:"]
        else:  # pragma: no cover
            raise AssertionError(kind)


PROLOGUE = 20  # instructions before the program body (incl. the mov of acc)
EPILOGUE = 2   # st + ret


def to_ptx(prog) -> str:
    g = _Gen()
    g.block(prog)
    body = "\n\t".join(g.lines)
    return f"""
.version 9.0
.target sm_90
.address_size 64

.visible .entry prog(
\t.param .u64 prog_param_0,
\t.param .u64 prog_param_1,
\t.param .u32 prog_param_2
)
{{
\t.reg .pred %p<{g.npred + 1}>;
\t.reg .b32 %r<{g.nreg + 1}>;
\t.reg .b64 %rd<6>;
\t.shared .align 4 .b8 buf[256];
\tld.param.u64 %rd1, [prog_param_0];
\tld.param.u64 %rd2, [prog_param_1];
\tld.param.u32 %r5, [prog_param_2];
\tmov.u32 %r0, %ctaid.x;
\tmov.u32 %r1, %ntid.x;
\tmov.u32 %r4, %tid.x;
\tmad.lo.s32 %r1, %r0, %r1, %r4;
\tmov.u32 %r7, buf;
\tshl.b32 %r8, %r4, 2;
\tadd.u32 %r8, %r8, %r7;
\tmov.u32 %r6, %ntid.x;
\tadd.u32 %r9, %r4, 1;
\trem.u32 %r9, %r9, %r6;
\tshl.b32 %r9, %r9, 2;
\tadd.u32 %r9, %r9, %r7;
\tmul.wide.u32 %rd3, %r1, 4;
\tadd.s64 %rd4, %rd2, %rd3;
\tadd.s64 %rd5, %rd1, %rd3;
\tld.global.u32 %r2, [%rd5];
\tmov.u32 %r3, %r2;
\t{body}
\tst.global.u32 [%rd4], %r3;
\tret;
}}
"""


# ------------------------------------------------------------------ scalar reference


class _Return(Exception):
    pass


class _Break(Exception):
    pass


def run_lane(prog, v: int, c: int, acc: int | None = None, prologue: bool = True,
             epilogue: bool = True) -> tuple[int, int, bool]:
    """(output, instructions executed, returned early) of one lane running the
    statements ``prog`` from accumulator ``acc`` (default v), by direct evaluation."""
    state = {"acc": v if acc is None else acc, "n": PROLOGUE if prologue else 0}

    def apply(op: str, src: int) -> None:
        a = state["acc"]
        state["acc"] = {"add": a + src, "xor": a ^ src, "mul": a * src,
                        "sub": a - src}[op] & M32

    def val(s: str, ks: list[int]) -> int:
        return v if s == "v" or (s == "k" and not ks) else (ks[-1] if s == "k" else c)

    def block(stmts, ks) -> None:
        for s in stmts:
            stmt(s, ks)

    def stmt(s, ks) -> None:
        kind = s[0]
        if kind == "assign":
            state["n"] += 1
            apply(s[1], val(s[2], ks))
        elif kind == "pred":
            state["n"] += 4
            if (v >> s[1]) & 1:
                apply(s[2], val(s[3], ks))
        elif kind == "if":
            _, bit, then, els = s
            state["n"] += 5
            if ((v ^ state["acc"]) >> bit) & 1:
                block(then, ks)
                if els:
                    state["n"] += 1
            else:
                block(els, ks)
        elif kind == "loop":
            _, shift, body = s
            n = (v >> shift) & 7
            state["n"] += 3
            k = 0
            try:
                while True:
                    state["n"] += 2
                    if k >= n:
                        break
                    block(body, ks + [k])
                    state["n"] += 2
                    k += 1
            except _Break:
                pass
        elif kind == "break":
            state["n"] += 5
            if ((state["acc"] ^ ks[-1]) >> s[1]) & 1:
                raise _Break
        elif kind == "ret":
            state["n"] += 4
            if (state["acc"] >> s[1]) & 1:
                state["n"] += 2
                raise _Return

    try:
        block(prog, [])
        if epilogue:
            state["n"] += EPILOGUE
    except _Return:
        return state["acc"], state["n"], True
    return state["acc"], state["n"], False


def run_block(prog, x: np.ndarray, c: int, block: int) -> tuple[list[int], int]:
    """Outputs and total instructions of all lanes: top-level "exchange" statements are
    the barrier phases (every lane of the block finishes the phase before it); between
    them each lane runs on its own."""
    n = x.size
    acc = [int(v) for v in x]
    total = 0
    phases, cur = [], []
    for stmt in prog:
        if stmt[0] == "exchange":
            phases.append(cur)
            cur = []
        else:
            cur.append(stmt)
    phases.append(cur)
    for k, phase in enumerate(phases):
        last = k == len(phases) - 1
        for t in range(n):
            acc[t], cnt, ret = run_lane(phase, int(x[t]), c, acc[t], prologue=(k == 0),
                                        epilogue=last)
            assert not ret, "programs with exchanges have no early return"
            total += cnt
        if not last:
            total += 5 * n  # st, bar, ld, bar, xor
            acc = [acc[t] ^ acc[(t // block) * block + (t % block + 1) % block]
                   for t in range(n)]
    return acc, total


@pytest.mark.slow
@settings(max_examples=40)
@given(programs, st.integers(0, 2**32 - 1), st.sampled_from([(1, 64), (2, 48), (3, 32)]),
       st.lists(st.integers(0, 8), max_size=2))
@example([("if", 3, [("assign", "add", "v")], [("loop", 1, [("assign", "xor", "k")])]),
          ("loop", 4, [("break", 2), ("assign", "mul", "c")])], 7, (2, 48), [1, 2])
def test_random_control_flow_matches_per_lane_execution(prog, seed, launch, exchanges):
    grid, block = launch
    n = grid * block
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    c = int(rng.integers(0, 2**32))
    if exchanges and not _has_ret(prog):
        # insert barrier-separated exchanges between top-level statements
        for pos in sorted(exchanges, reverse=True):
            prog = prog[: pos % (len(prog) + 1)] + [("exchange",)] + prog[pos % (len(prog) + 1):]
    mod = load(to_ptx(prog))
    mem = GlobalMemory()
    px = mem.to_device(x)
    po = mem.alloc(4 * n)
    stats = mod.launch("prog", grid, block, [px, po, c], mem, max_steps=10**6)
    out = mem.from_device(po, np.uint32, n)
    if any(s[0] == "exchange" for s in prog):
        acc, total = run_block(prog, x, c, block)
        np.testing.assert_array_equal(out, np.array(acc, dtype=np.uint32))
        assert stats.thread_instructions == total
        assert stats.barriers == 2 * grid * sum(s[0] == "exchange" for s in prog)
    else:
        ref = [run_lane(prog, int(v), c) for v in x]
        np.testing.assert_array_equal(out, np.array([r[0] for r in ref], dtype=np.uint32))
        assert stats.thread_instructions == sum(r[1] for r in ref)
    assert stats.warp_instructions >= -(-stats.thread_instructions // 32)


def _has_ret(stmts) -> bool:
    for s in stmts:
        if s[0] == "ret":
            return True
        if s[0] == "if" and (_has_ret(s[2]) or _has_ret(s[3])):
            return True
        if s[0] == "loop" and _has_ret(s[2]):
            return True
    return False


def test_uniform_program_has_no_divergence():
    prog = [("loop", 0, [("assign", "add", "k")]), ("if", 31, [("assign", "xor", "c")], [])]
    mod = load_ptx(to_ptx(prog))
    mem = GlobalMemory()
    x = np.full(64, 5, np.uint32)       # same trip count and branch in every lane
    px = mem.to_device(x)
    po = mem.alloc(256)
    stats = mod.launch("prog", 1, 64, [px, po, 0], mem)
    assert stats.divergent_branches == 0
    assert stats.simd_efficiency == 1.0
    assert stats.max_stack_depth == 1


def test_divergent_loop_exit_shrinks_mask_without_growing_stack():
    # trip count = lane % 8: at k = 0..6 some lanes leave the loop (7 divergent exits
    # per warp), at k = 7 the last ones leave together (uniform). The exit branch
    # reconverges where the loop ends; after the first split the top entry already
    # reconverges there, so the stack stays at depth 2 instead of growing per iteration.
    prog = [("loop", 0, [("assign", "add", "k")])]
    mod = load_ptx(to_ptx(prog))
    mem = GlobalMemory()
    x = (np.arange(64) % 8).astype(np.uint32)
    px = mem.to_device(x)
    po = mem.alloc(256)
    stats = mod.launch("prog", 1, 64, [px, po, 0], mem)
    np.testing.assert_array_equal(mem.from_device(po, np.uint32, 64),
                                  x + x * (x - 1) // 2)
    assert stats.max_stack_depth == 2
    assert stats.divergent_branches == 2 * 7
