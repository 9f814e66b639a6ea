"""No default limit stops a correct kernel: without ``max_steps`` a launch has no
per-warp instruction bound, and a wave that stops changing anything stops with
LivelockError (hardware.simt.progress); the launch-wide ``max_instructions`` bound is
checked while a wave runs."""
import numpy as np
import pytest

from hardware.simt import (GlobalMemory, LaunchBudgetError, LivelockError, StepLimitError,
                           gallery, load_ptx)

HEAD = """.version 8.0
.target sm_80
.address_size 64
"""


def _kernel(body: str) -> str:
    return HEAD + """
.visible .entry k(.param .u64 p0, .param .u32 p1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<10>;
""" + body + "\n}\n"


LONG_LOOP = _kernel("""    ld.param.u64 %rd1, [p0];
    ld.param.u32 %r2, [p1];
    mov.u32 %r1, 0;
    mov.u32 %r3, 0;
$L_loop:
    add.u32 %r3, %r3, %r1;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, %r2;
    @%p1 bra $L_loop;
    mov.u32 %r4, %tid.x;
    mul.wide.u32 %rd2, %r4, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;""")


def test_a_long_correct_loop_runs_past_the_old_step_limit():
    """300 000 iterations of 4 instructions per warp (1.2 M instructions, six times the
    former default of 200 000 per warp) complete with the default settings."""
    n = 300_000
    mem = GlobalMemory()
    out = mem.alloc(4 * 64)
    st = load_ptx(LONG_LOOP).launch("k", 1, 64, [out, n], mem)
    expect = (n * (n - 1) // 2) % 2**32
    np.testing.assert_array_equal(mem.from_device(out, np.uint32, 64), expect)
    assert st.warp_instructions == 2 * (4 + 4 * n + 5)
    with pytest.raises(StepLimitError, match="max_steps=1000"):
        load_ptx(LONG_LOOP).launch("k", 1, 64, [out, n], mem, max_steps=1000)


SPIN = _kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $L_done;
$L_spin:
    ld.volatile.global.u32 %r3, [%rd1];
    setp.eq.u32 %p3, %r3, 0;
    @%p3 bra $L_spin;
$L_done:
    ret;""")


def test_a_spin_on_a_flag_nobody_sets_is_a_livelock_naming_the_warp():
    mem = GlobalMemory()
    flag = mem.calloc(4)
    with pytest.raises(LivelockError) as e:
        load_ptx(SPIN).launch("k", 2, 64, [flag, 0], mem)
    msg = str(e.value)
    assert "no progress" in msg and "max_steps" in msg
    assert "warp 1 of block (0, 0, 0)" in msg and "warp 1 of block (1, 0, 0)" in msg
    assert "warp 0 of block" not in msg  # warp 0 has exited
    assert "ld.volatile.global.u32" in msg or "setp.eq.u32" in msg or "bra $L_spin" in msg
    assert isinstance(e.value, StepLimitError)
    mem.write(flag, np.uint32([1]))
    load_ptx(SPIN).launch("k", 2, 64, [flag, 0], mem)


def test_lockstep_livelock_is_detected_without_a_step_bound():
    """The two halves of a warp wait for each other: a livelock under the pre-Volta
    SIMT stack, found by the progress detection; under independent scheduling they
    complete."""
    mod = gallery.load("spinlock")
    mem = GlobalMemory()
    flags, out = mem.calloc(8), mem.alloc(4 * 32)
    with pytest.raises(LivelockError, match="warp 0 of block"):
        mod.launch("warp_handshake", 1, 32, [flags, out], mem, scheduling="lockstep")
    mod.launch("warp_handshake", 1, 32, [mem.calloc(8), out], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 32), [8] * 16 + [7] * 16)


def test_max_instructions_stops_a_runaway_loop_inside_one_wave():
    """A loop that changes a register each time is progress by the detection's rule; the
    launch-wide bound stops it while its (only) wave runs."""
    mem = GlobalMemory()
    out = mem.alloc(4 * 32)
    with pytest.raises(LaunchBudgetError, match=r"in the wave of blocks 0-0.*max_instructions=50000"):
        load_ptx(LONG_LOOP).launch("k", 1, 32, [out, 2**31], mem, max_instructions=50_000)


def test_spin_lock_built_with_G_completes():
    n = 64
    mod = gallery.load("spinlock_G")
    mem = GlobalMemory()
    order, total = mem.alloc(4 * n), mem.calloc(4)
    mod.launch("spinlock_order", 1, n, [order, total, n], mem)
    assert mem.from_device(total, np.int32, 1)[0] == n
    assert sorted(mem.from_device(order, np.int32, n).tolist()) == list(range(n))


def test_flash_attention_built_with_G_runs_past_the_old_step_limit():
    """The -G build of the FlashAttention-2 forward executes more than 200 000
    instructions per warp (the former default bound) at n_kv = 192 and agrees with the
    float64 attention as the optimised build does (the bits differ: -G does not
    contract a * b + c into fma)."""
    rng = np.random.default_rng(7)
    n_q, n_kv = 64, 192
    q = rng.standard_normal((n_q, 64)).astype(np.float32)
    k = rng.standard_normal((n_kv, 64)).astype(np.float32)
    v = rng.standard_normal((n_kv, 64)).astype(np.float32)
    outs = []
    for name in ("flash_attention", "flash_attention_G"):
        mem = GlobalMemory()
        pq, pk, pv = mem.to_device(q), mem.to_device(k), mem.to_device(v)
        po = mem.alloc(4 * n_q * 64)
        st = gallery.load(name).launch("flash_attention_fwd", 1, 256,
                                       [pq, pk, pv, po, n_q, n_kv, np.float32(0.18)], mem)
        outs.append(mem.from_device(po, np.float32, (n_q, 64)))
        if name.endswith("_G"):
            assert st.warp_instructions > 8 * 200_000
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) * 0.18
    w = np.exp2(s - s.max(axis=1, keepdims=True))
    ref = (w @ v) / w.sum(axis=1, keepdims=True)
    for out in outs:
        assert np.abs(out - ref).max() < 1e-4
