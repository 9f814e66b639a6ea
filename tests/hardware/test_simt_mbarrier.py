"""mbarrier (PTX ISA 9.7.13.15): phases, arrivals, tx-counts, waits, deadlocks and misuse,
on hand-written sm_90a kernels (each accepted by ptxas where it is on this machine).
Expected values are derived in NumPy from what each kernel's threads write."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import DeadlockError, ExecutionError, PtxTypeError, RaceError
from hardware.simt.mbarrier import MAX_COUNT, encode, state_token

PTXAS = shutil.which("ptxas")

HEAD = """.version 8.6
.target sm_90a
.address_size 64
"""


def kernel(body: str, params: str = ".param .u64 out", shared: str = "") -> str:
    return HEAD + f""".visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b64 bar[4];
    .shared .align 16 .b32 buf[256];
    {shared}
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    shr.u32 %r3, %r1, 5;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r24, %ctaid.x;
    mov.u32 %r25, %ntid.x;
    mad.lo.u32 %r26, %r24, %r25, %r1;
    mul.wide.u32 %rd2, %r26, 4;
    add.u64 %rd3, %rd1, %rd2;
    mov.u32 %r20, bar;
    mov.u32 %r21, buf;
    shl.b32 %r4, %r2, 2;
    add.u32 %r22, %r21, %r4;
{body}
    ret;
}}
"""


def assemble_ok(src: str) -> None:
    if PTXAS is None:
        return
    r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def run(src: str, threads: int, words: int = 256, blocks: int = 1, **kw):
    assemble_ok(src)
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(4 * words * blocks)
    stats = m.launch("k", blocks, threads, [out], mem, **kw)
    return mem.from_device(out, np.uint32, words * blocks), stats


INIT = """    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_init;
    mbarrier.init.shared::cta.b64 [bar], {count};
$L_init:
    bar.sync 0;
"""

PRODUCER_CONSUMER = INIT + """    setp.{role}.u32 %p2, %r1, 32;
    @%p2 bra $L_consumer;
    mul.lo.u32 %r5, %r2, 3;
    st.shared.u32 [%r22], %r5;
    mbarrier.arrive.{sem}shared::cta.b64 %rd4, [%r20];
    bra $L_end;
$L_consumer:
$L_wait:
    mbarrier.try_wait.parity.{wsem}shared::cta.b64 %p3, [%r20], 0, 1000;
    @!%p3 bra $L_wait;
    ld.shared.u32 %r6, [%r22];
    add.u32 %r7, %r6, 1;
    st.global.u32 [%rd3], %r7;
$L_end:
"""


@pytest.mark.parametrize("role", ["ge", "lt"])  # consumer warp after or before the producer
def test_producer_consumer(role):
    src = kernel(PRODUCER_CONSUMER.format(count=32, role=role, sem="release.cta.",
                                          wsem="acquire.cta."))
    out, stats = run(src, 64, 64, blocks=2)
    out = out.reshape(2, 64)
    consumer = slice(32, 64) if role == "ge" else slice(0, 32)
    lanes = np.arange(32, dtype=np.uint32)
    for b in range(2):
        assert (out[b, consumer] == 3 * lanes + 1).all()
    assert not stats.warnings


def test_relaxed_arrive_and_wait_race():
    """Without release/acquire the data written before the arrival is not ordered
    before the consumer's read: racecheck reports it."""
    src = kernel(PRODUCER_CONSUMER.format(count=32, role="ge", sem="relaxed.cta.",
                                          wsem="relaxed.cta."))
    with pytest.raises(RaceError, match="read-after-write"):
        run(src, 64, 64)


def test_deadlock_names_barrier_phase_and_waiters():
    src = kernel(PRODUCER_CONSUMER.format(count=33, role="ge", sem="", wsem=""))
    with pytest.raises(DeadlockError) as e:
        run(src, 64, 64)
    msg = str(e.value)
    assert "mbarrier at shared address 0x0 of block (0, 0, 0)" in msg
    assert "phase 0 (parity 0), 1 of 33 arrivals pending, 0 tx bytes outstanding" in msg
    assert "warp 1 of block (0, 0, 0) lanes 0-31 at line" in msg and "parity 0" in msg
    assert "max_steps" not in msg


RING = INIT.replace("[bar], {count};", "[bar], 32;\n    mbarrier.init.shared::cta.b64 "
                    "[bar+8], 32;") + """    setp.ge.u32 %p2, %r1, 32;
    mov.u32 %r10, 0;              // iteration
    mov.u32 %r11, 0;              // phase parity
    mov.u32 %r12, 0;              // consumer's sum
    add.u32 %r23, %r20, 8;        // the 'empty' barrier
    @%p2 bra $L_consumer;
$L_produce:
    setp.eq.u32 %p4, %r10, 0;
    @%p4 bra $L_fill;
$L_wait_empty:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r23], %r13;
    @!%p3 bra $L_wait_empty;
$L_fill:
    xor.b32 %r13, %r11, 1;
    mad.lo.u32 %r5, %r10, 100, %r2;
    st.shared.u32 [%r22], %r5;
    mbarrier.arrive.shared::cta.b64 %rd4, [%r20];
    mov.u32 %r13, %r11;
    xor.b32 %r11, %r11, 1;
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, {n};
    @%p5 bra $L_produce;
    bra $L_end;
$L_consumer:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r20], %r11;
    @!%p3 bra $L_consumer;
    ld.shared.u32 %r6, [%r22];
    add.u32 %r12, %r12, %r6;
    mbarrier.arrive.shared::cta.b64 %rd4, [%r23];
    xor.b32 %r11, %r11, 1;
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, {n};
    @%p5 bra $L_consumer;
    st.global.u32 [%rd3], %r12;
$L_end:
"""


def test_full_empty_ring_many_phases():
    """A one-stage ring: the producer waits on 'empty' (the parity of the phase before
    its last fill), the consumer on 'full' with a parity flipping every phase."""
    n = 7
    src = kernel(RING.format(n=n))
    out, _ = run(src, 64, 64)
    lanes = np.arange(32)
    want = sum(i * 100 + lanes for i in range(n))
    assert (out[32:64] == want).all()


TX = INIT.format(count=1) + """    setp.eq.u32 %p2, %r1, 0;
    @!%p2 bra $L_others;
    mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd4, [%r20], 96;
$L_others:
    setp.eq.u32 %p3, %r1, 32;
    @!%p3 bra $L_wait;
    st.shared.u32 [buf], 41;
    mbarrier.complete_tx.shared::cta.b64 [%r20], {first};
    mbarrier.complete_tx.shared::cta.b64 [%r20], {second};
$L_wait:
    mbarrier.test_wait.parity.shared::cta.b64 %p4, [%r20], 0;
    @!%p4 bra $L_wait;
    ld.shared.u32 %r6, [buf];
    st.global.u32 [%rd3], %r6;
"""


def test_expect_tx_and_complete_tx():
    out, _ = run(kernel(TX.format(first=32, second=64)), 64, 64)
    assert (out[:64] == 41).all()


def test_bytes_outstanding_deadlock():
    with pytest.raises(DeadlockError, match="0 of 1 arrivals pending, 32 tx bytes "
                                            "outstanding"):
        run(kernel(TX.format(first=32, second=32)), 64, 64)


STATE = INIT.format(count=2) + """    setp.eq.u32 %p2, %r1, 0;
    @!%p2 bra $L_end;
    mbarrier.arrive.shared::cta.b64 %rd4, [%r20];
    mbarrier.pending_count.b64 %r5, %rd4;
    mbarrier.test_wait.shared::cta.b64 %p3, [%r20], %rd4;
    selp.u32 %r6, 1, 0, %p3;
    mbarrier.arrive.shared::cta.b64 %rd5, [%r20];
    mbarrier.pending_count.b64 %r7, %rd5;
    mbarrier.test_wait.shared::cta.b64 %p4, [%r20], %rd4;
    selp.u32 %r8, 1, 0, %p4;
    mbarrier.arrive_drop.shared::cta.b64 %rd6, [%r20];
    mbarrier.pending_count.b64 %r9, %rd6;
    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];
    mbarrier.test_wait.shared::cta.b64 %p5, [%r20], %rd7;
    selp.u32 %r10, 1, 0, %p5;
    ld.shared.u64 %rd8, [bar];
    st.global.v4.u32 [%rd1], {%r5, %r6, %r7, %r8};
    st.global.v2.u32 [%rd1+16], {%r9, %r10};
    st.global.u64 [%rd1+24], %rd8;
    st.global.u64 [%rd1+32], %rd4;
$L_end:
"""


def test_state_tokens_pending_count_and_arrive_drop():
    """One thread: arrivals on a count-2 barrier, test_wait on their states; arrive_drop
    leaves a count-1 barrier whose next arrival completes a phase by itself."""
    out, _ = run(kernel(STATE), 32, 16)
    assert out[0] == 1 and out[1] == 0      # one arrival pending, phase 0 not done
    assert out[2] == 0 and out[3] == 1      # second arrival completed phase 0
    assert out[4] == 1                      # arrive_drop: pending 1 of phase 1 left
    assert out[5] == 1                      # phase 2 completed by one arrival
    word = int(out[6]) | int(out[7]) << 32
    assert word == encode(1, 1, 0, 2)
    token = int(out[8]) | int(out[9]) << 32
    assert token == state_token(1, 0)


def test_generic_addresses_and_a_stale_state():
    body = INIT.format(count=1) + """    setp.eq.u32 %p2, %r1, 0;
    @!%p2 bra $L_end;
    cvta.shared.u64 %rd9, bar;
    mbarrier.arrive.b64 %rd4, [%rd9];
    mbarrier.arrive.b64 %rd5, [%rd9];
    mbarrier.arrive.b64 %rd6, [%rd9];
    mbarrier.test_wait.b64 %p3, [%rd9], %rd4;
$L_end:
"""
    with pytest.raises(ExecutionError, match="state of phase 0 waited on mbarrier at "
                                             "shared address 0x0 .* whose phase is 3"):
        run(kernel(body), 32, 16)


@pytest.mark.parametrize("body, match", [
    ("mbarrier.arrive.shared::cta.b64 %rd4, [%r20];", "not a valid mbarrier object"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    mbarrier.init.shared::cta.b64 "
     "[%r20], 1;", "mbarrier.init of a valid object"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    mbarrier.arrive.shared::cta.b64 "
     "%rd4, [%r20], 2;", "2 arrival.s. on mbarrier .* only 1 pending"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    mbarrier.expect_tx.shared::cta.b64 "
     f"[%r20], {MAX_COUNT};\n    mbarrier.expect_tx.shared::cta.b64 [%r20], 1;",
     "tx-count .* would become 1048576"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    st.shared.u32 [bar], 5;\n    "
     "mbarrier.arrive.shared::cta.b64 %rd4, [%r20];", "overwritten by an ordinary store"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    mbarrier.inval.shared::cta.b64 "
     "[%r20];\n    mbarrier.complete_tx.shared::cta.b64 [%r20], 4;",
     "not a valid mbarrier object"),
    ("mbarrier.init.shared::cta.b64 [%r20], 0;", "count 0 outside 1..1048575"),
    ("add.u32 %r9, %r20, 4;\n    mbarrier.init.shared::cta.b64 [%r9], 1;",
     "misaligned 8-byte shared access"),
    ("mbarrier.init.shared::cta.b64 [%r20], 1;\n    mbarrier.arrive.noComplete."
     "shared::cta.b64 %rd4, [%r20], 1;", "noComplete arrival completes the phase"),
])
def test_misuse_is_an_error(body, match):
    src = kernel(f"""    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $L_end;
    {body}
$L_end:
""")
    with pytest.raises(ExecutionError, match=match):
        run(src, 32, 16)


@pytest.mark.parametrize("inst, rule", [
    ("mbarrier.arrive.release.cluster.shared::cluster.b64 %rd4, [%r20];", "must be _"),
    ("mbarrier.try_wait.release.cta.shared::cta.b64 %p3, [%r20], %rd4;", "acquire"),
    ("mbarrier.try_wait.parity.shared::cluster.b64 %p3, [%r20], %r5;", "shared"),
    ("mbarrier.arrive.acquire.cta.shared::cta.b64 %rd4, [%r20];", "release"),
    ("mbarrier.arrive.cta.shared::cta.b64 %rd4, [%r20];", "needs .release or .relaxed"),
])
def test_forms_ptxas_refuses(inst, rule):
    src = kernel(f"    {inst}\n")
    if PTXAS is not None:
        r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=src,
                           capture_output=True, text=True)
        assert r.returncode != 0
    with pytest.raises(PtxTypeError, match=rule):
        load_ptx(src)


def test_divergent_lanes_of_one_warp():
    """Lanes 1-31 wait (their path runs first) for an arrival of lane 0 of the same
    warp: the waiters are not suspended while lane 0's path is pending, and independent
    thread scheduling lets lane 0 run."""
    body = INIT.format(count=1) + """    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $L_wait;
    st.shared.u32 [buf], 77;
    mbarrier.arrive.shared::cta.b64 %rd4, [%r20];
    bra $L_read;
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r20], 0;
    @!%p3 bra $L_wait;
$L_read:
    ld.shared.u32 %r6, [buf];
    st.global.u32 [%rd3], %r6;
"""
    out, stats = run(kernel(body), 32, 32)
    assert (out == 77).all()


NAMED = """    setp.ge.u32 %p2, %r1, 64;
    @%p2 bra $L_consumer;
    mul.lo.u32 %r5, %r1, 5;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r21, %r8;
    st.shared.u32 [%r9], %r5;
    bar.arrive 1, 128;
    bra $L_end;
$L_consumer:
    bar.sync 1, 128;
    sub.u32 %r7, %r1, 64;
    shl.b32 %r8, %r7, 2;
    add.u32 %r9, %r21, %r8;
    ld.shared.u32 %r6, [%r9];
    st.global.u32 [%rd3], %r6;
$L_end:
"""


def test_named_barrier_arrive_and_sync():
    """Producer warps bar.arrive, consumer warps bar.sync on barrier 1 of 128 threads
    (the producer/consumer pattern of warp-specialised kernels)."""
    out, _ = run(kernel(NAMED), 128, 128)
    assert (out[64:128] == 5 * np.arange(64)).all()


def test_named_barrier_short_of_threads_deadlocks():
    with pytest.raises(DeadlockError):
        run(kernel(NAMED.replace("1, 128", "1, 160")), 128, 128)
