"""Named barriers with register operands and blocking setmaxnreg.inc (PTX ISA 9.7.13.1
bar/barrier, 9.7.18 setmaxnreg), as CUTLASS's NamedBarrier and FlashAttention-3's
warp-specialised kernels emit them.

Every kernel here is accepted by ``ptxas -arch=sm_90a`` (checked by :func:`run` when
ptxas is on the PATH). Expected values are written down from the kernels' definitions
(which thread writes what), not computed by the interpreter.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from test_simt_sm90 import ptxas_ok

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import DeadlockError, ExecutionError, RaceError

HEAD = """.version 8.6
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 out)
{
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<16>;
    .shared .align 4 .b32 buf[64];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;               // warp
    and.b32 %r3, %r1, 31;              // lane
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;          // &out[tid]
"""
TAIL = """    ret;
}
"""


def run(body: str, threads: int):
    src = HEAD + body + TAIL
    assert ptxas_ok(src) in (None, True)
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(4 * threads)
    stats = m.launch("k", 1, threads, [out], mem)
    return mem.from_device(out, np.uint32, threads), stats


# Two producer/consumer pairs of warps, each on its own named barrier: pair q (warps
# 2q, 2q+1) uses barrier q+1 with 64 threads, both operands in registers. The
# consumers come first in program order (the scheduler would run them first), wait at
# the barrier, then read what their producer stored: out[consumer thread, lane] =
# 1000 q + (31 - lane) + 7. A last bar.sync with a register id 0 joins the block.
PIPELINE = """    shr.u32 %r4, %r2, 1;               // pair q
    add.u32 %r5, %r4, 1;               // barrier id q + 1
    mov.u32 %r6, 64;                   // thread count
    and.b32 %r7, %r2, 1;
    setp.eq.u32 %p1, %r7, 0;           // even warps produce
    mov.u32 %r8, buf;
    shl.b32 %r9, %r4, 5;
    @%p1 bra $PROD;
    {SYNC} {ID}, {COUNT};
    sub.u32 %r12, 31, %r3;
    add.u32 %r12, %r12, %r9;
    shl.b32 %r13, %r12, 2;
    add.u32 %r13, %r13, %r8;
    ld.shared.u32 %r14, [%r13];
    st.global.u32 [%rd3], %r14;
    bra $END;
$PROD:
    add.u32 %r10, %r9, %r3;
    shl.b32 %r10, %r10, 2;
    add.u32 %r10, %r10, %r8;
    mad.lo.u32 %r11, %r4, 1000, %r3;
    add.u32 %r11, %r11, 7;
    st.shared.u32 [%r10], %r11;
    bar.arrive {ID}, {COUNT};
$END:
    mov.u32 %r15, 0;
    bar.sync {ZERO};
"""


def pipeline(sync="barrier.sync.aligned", ident="%r5", count="%r6", zero="%r15"):
    return PIPELINE.replace("{SYNC}", sync).replace("{ID}", ident).replace(
        "{COUNT}", count).replace("{ZERO}", zero)


def pipeline_expected():
    tid = np.arange(128)
    warp, lane = tid // 32, tid % 32
    return np.where(warp % 2 == 1, 1000 * (warp // 2) + (31 - lane) + 7, 0)


@pytest.mark.parametrize("sync", ["barrier.sync.aligned", "bar.sync", "barrier.sync"])
def test_register_ids_and_counts_order_producer_and_consumer(sync):
    out, stats = run(pipeline(sync), 128)
    assert (out == pipeline_expected()).all()
    assert stats.barriers == 3  # barrier 1, barrier 2, the block's barrier 0


def test_register_operands_count_as_the_immediate_forms():
    """One pair (64 threads), whose barrier can be written with immediates: the same
    values and the same counts either way."""
    out_r, st_r = run(pipeline(), 64)
    out_i, st_i = run(pipeline(ident="1", count="64", zero="0"), 64)
    assert (out_r == pipeline_expected()[:64]).all() and (out_i == out_r).all()
    assert st_r.barriers == st_i.barriers == 2
    assert (st_r.warp_instructions, st_r.thread_instructions) == (
        st_i.warp_instructions, st_i.thread_instructions)
    assert st_r.line_warp_instructions == st_i.line_warp_instructions


def test_one_register_operand_is_the_whole_block():
    """bar.sync %r: every thread of the CTA; warp 3 stores, then all read."""
    body = """    mov.u32 %r4, buf;
    shl.b32 %r5, %r3, 2;
    add.u32 %r5, %r5, %r4;
    setp.ne.u32 %p1, %r2, 3;
    @%p1 bra $WAIT;
    add.u32 %r6, %r3, 100;
    st.shared.u32 [%r5], %r6;
$WAIT:
    mov.u32 %r7, 4;
    bar.sync %r7;
    ld.shared.u32 %r8, [%r5];
    st.global.u32 [%rd3], %r8;
"""
    out, stats = run(body, 128)
    assert (out == np.arange(128) % 32 + 100).all() and stats.barriers == 1


def test_a_warp_whose_guard_skips_the_barrier_does_not_arrive():
    """@p bar.sync %r, 64 with p false in all of warp 2 and 3: warps 0 and 1 complete
    the 64-thread barrier alone."""
    body = """    setp.lt.u32 %p1, %r2, 2;
    mov.u32 %r4, 5;
    mov.u32 %r5, 64;
    @%p1 bar.sync %r4, %r5;
    add.u32 %r6, %r1, 1;
    st.global.u32 [%rd3], %r6;
"""
    out, stats = run(body, 128)
    assert (out == np.arange(128) + 1).all() and stats.barriers == 1


@pytest.mark.parametrize("setup, operands, match", [
    ("and.b32 %r4, %r3, 1;", "%r4, 64", r"barrier id is not warp-uniform: this thread "
                                         r"gives 1, lane 0 of its warp gives 0"),
    ("setp.lt.u32 %p2, %r3, 16;\n    selp.u32 %r4, 32, 64, %p2;", "1, %r4",
     r"thread count is not warp-uniform: this thread gives 64, lane 0 of its warp gives 32"),
    ("add.u32 %r4, %r2, 15;", "%r4, 128", r"barrier id 16 outside 0..15"),
    ("mov.u32 %r4, 48;", "2, %r4", r"thread count 48 is not a positive multiple"),
    ("mov.u32 %r4, 0;", "2, %r4", r"thread count 0 is not a positive multiple"),
])
def test_bad_register_operands_are_errors_naming_thread_and_line(setup, operands, match):
    body = f"""    {setup}
    bar.sync {operands};
"""
    with pytest.raises(ExecutionError, match=match) as e:
        run(body, 128)
    assert "line " in str(e.value) and "bar.sync" in str(e.value)
    assert not isinstance(e.value, DeadlockError)


def test_non_uniform_id_names_the_thread():
    body = """    and.b32 %r4, %r3, 1;
    bar.sync %r4, 64;
"""
    with pytest.raises(ExecutionError, match=r"block \(0, 0, 0\), thread \(1, 0, 0\)"):
        run(body, 64)


def test_mismatched_register_ids_are_a_deadlock():
    """Warps 0, 2 at barrier 0 and warps 1, 3 at barrier 1, each wanting the whole
    block: neither completes."""
    body = """    and.b32 %r4, %r2, 1;
    bar.sync %r4;
"""
    with pytest.raises(DeadlockError, match="barrier deadlock"):
        run(body, 128)


# setmaxnreg: three warpgroups start at 65536 / 384 = 170 -> 168 registers per thread
# (3 x 168 x 128 = 64512). The consumers (warpgroups 1 and 2) come first in program
# order and ask for {HIGH}; the producer (warpgroup 0) gives registers up to {LOW}.
SETMAXNREG = """    shr.u32 %r4, %r1, 7;               // warpgroup
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra $PRODUCER;
    setmaxnreg.inc.sync.aligned.u32 {HIGH};
    add.u32 %r5, %r1, 1000;
    st.global.u32 [%rd3], %r5;
    bra $DONE;
$PRODUCER:
{PRODUCER}
    add.u32 %r5, %r1, 7;
    st.global.u32 [%rd3], %r5;
$DONE:
"""


def setmaxnreg(high, producer):
    return SETMAXNREG.replace("{HIGH}", str(high)).replace("{PRODUCER}", producer)


def test_setmaxnreg_inc_waits_for_the_producers_dec():
    """168 + 232 + 168 = 568 registers per thread (72704 > 65536) do not fit: each
    consumer's inc waits until the producer's dec to 40 frees 128 x 128 registers; then
    40 + 232 + 232 = 504 per thread (64512) fit and both go on."""
    out, _ = run(setmaxnreg(232, "    setmaxnreg.dec.sync.aligned.u32 40;"), 384)
    tid = np.arange(384)
    assert (out == np.where(tid < 128, tid + 7, tid + 1000)).all()


def test_setmaxnreg_inc_without_a_dec_is_a_deadlock():
    """The producer exits without giving registers up: 168 + 232 + 168 = 568 x 128 =
    72704 can never fit."""
    with pytest.raises(DeadlockError) as e:
        run(setmaxnreg(232, "    ret;"), 384)
    msg = str(e.value)
    assert "setmaxnreg deadlock: warpgroup 1 waits for 232 registers per thread" in msg
    assert "would hold 72704 registers, more than the 65536" in msg
    assert "warpgroup 0 (warps 0-3) holds 168 registers per thread and has exited" in msg
    assert "warpgroup 2 (warps 8-11) holds 168 registers per thread and waits at " \
           "setmaxnreg.inc 232" in msg


def test_setmaxnreg_partly_satisfied_then_deadlock():
    """A dec to 104 lets one consumer have 232 (104 + 232 + 168 = 504), the other can
    never get it (104 + 232 + 232 = 568 x 128 = 72704); the producer then waits at a
    barrier that the blocked consumer never reaches."""
    producer = """    setmaxnreg.dec.sync.aligned.u32 104;
    bar.sync 1, 384;"""
    body = setmaxnreg(232, producer).replace(
        "    add.u32 %r5, %r1, 1000;", "    bar.sync 1, 384;\n    add.u32 %r5, %r1, 1000;")
    with pytest.raises(DeadlockError) as e:
        run(body, 384)
    msg = str(e.value)
    assert "setmaxnreg deadlock: warpgroup 2 waits for 232" in msg
    assert "would hold 72704 registers" in msg
    assert "warpgroup 0 (warps 0-3) holds 104 registers per thread and waits at a " \
           "barrier" in msg
    assert "warpgroup 1 (warps 4-7) holds 232 registers per thread and waits at a " \
           "barrier" in msg


def test_register_barriers_order_the_pipeline_for_racecheck():
    """Under racecheck the pipeline is race-free; without the consumers' barrier.sync
    their loads race with the producers' stores."""
    src = HEAD + pipeline() + TAIL
    mem = GlobalMemory()
    out = mem.calloc(4 * 128)
    load_ptx(src).launch("k", 1, 128, [out], mem, sanitize=["racecheck", "synccheck"])
    assert (mem.from_device(out, np.uint32, 128) == pipeline_expected()).all()
    racy = src.replace("    barrier.sync.aligned %r5, %r6;\n", "")
    assert ptxas_ok(racy) in (None, True)
    with pytest.raises(RaceError, match="buf"):
        load_ptx(racy).launch("k", 1, 128, [mem.calloc(4 * 128)], mem,
                              sanitize=["racecheck"])


def test_register_barriers_are_per_block():
    """Three blocks, each its own barriers 1 and 2."""
    src = HEAD.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1, %tid.x;\n    mov.u32 %r30, "
                       "%ctaid.x;\n    mad.lo.u32 %r31, %r30, 128, %r1;").replace(
        "mul.wide.u32 %rd2, %r1, 4;", "mul.wide.u32 %rd2, %r31, 4;") + pipeline() + TAIL
    assert ptxas_ok(src) in (None, True)
    mem = GlobalMemory()
    out = mem.calloc(4 * 384)
    stats = load_ptx(src).launch("k", 3, 128, [out], mem)
    assert (mem.from_device(out, np.uint32, 384) == np.tile(pipeline_expected(), 3)).all()
    assert stats.barriers == 9


def test_nvcc_pipeline_with_register_named_barriers_and_setmaxnreg():
    """data/named_barrier_pipeline.cu compiled by nvcc for sm_90a: the consumers'
    setmaxnreg.inc 232 comes first in the PTX and waits for the producer's dec 40; the
    accumulations match float32 NumPy bit for bit (products by 1 and 2 are exact, so a
    fused multiply-add rounds as a multiply and an add do)."""
    src = (pathlib.Path(__file__).parent / "data" / "named_barrier_pipeline.ptx").read_text()
    assert ptxas_ok(src) in (None, True)
    iters = 6
    x = np.random.default_rng(1).standard_normal(iters * 128).astype(np.float32)
    mem = GlobalMemory()
    a, o = mem.to_device(x), mem.calloc(256 * 4)
    stats = load_ptx(src).launch("named_barrier_pipeline", 1, 384, [a, o, np.int32(iters)],
                                 mem, sanitize=["racecheck", "synccheck"])
    t = np.arange(128)
    want = []
    for wg in (1, 2):
        acc = np.zeros(128, np.float32)
        for i in range(iters):
            acc = acc + x[i * 128 + (t + wg) % 128] * np.float32(wg)
        want.append(acc)
    got = mem.from_device(o, np.float32, 256)
    assert (got.view(np.uint32) == np.concatenate(want).view(np.uint32)).all()
    # stage-full barriers once per iteration, stage-free ones from iteration 2 on
    assert stats.barriers == iters + (iters - 2)
