"""Errors: malformed and unsupported PTX, memory faults, barrier deadlock, step limit,
bad launch arguments; each names where it happened."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import (
    DeadlockError,
    GlobalMemory,
    LaunchError,
    MemoryAccessError,
    PtxSyntaxError,
    StepLimitError,
    UnsupportedPtxError,
    gallery,
    load_ptx,
)

HEAD = """.version 9.0
.target sm_90
.address_size 64
"""


def kernel(body: str, params: str = ".param .u64 p0", regs: str = "") -> str:
    return HEAD + f"""
.visible .entry k({params})
{{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<10>;
    {regs}
{body}
}}
"""


def test_unsupported_opcode_names_line_and_instruction():
    src = kernel("    ld.param.u64 %rd1, [p0];\n    tex.1d.v4.f32.s32 {%r1,%r2,%r3,%r4}, [t, {%r5}];\n    ret;")
    with pytest.raises(UnsupportedPtxError) as e:
        load_ptx(src)
    msg = str(e.value)
    assert "line 12" in msg and "tex.1d" in msg


@pytest.mark.parametrize("body,what", [
    ("    call foo, (%r1);\n    ret;", "call"),
    ("    add.cc.f32 %r1, %r2, %r3;\n    ret;", ".cc"),
    ("    mov.u32 %r1, %clock;\n    ret;", "%clock"),
    ("    bra %r1;\n    ret;", "label"),
    ("    tanh.approx.f16 %r1, %r2;\n    ret;", "f16"),
])
def test_unsupported_constructs(body, what):
    with pytest.raises(UnsupportedPtxError, match="line 1[12]"):
        load_ptx(kernel(body))


@pytest.mark.parametrize("src,match", [
    (HEAD + ".visible .entry k(.param .u64 p0)\n{\n    ret;\n", "not closed"),
    (kernel("    add.u32 %r1, %r2, %r3\n    ret;"), "line"),
    (kernel("    bra $L_nowhere;\n    ret;"), "undefined label"),
    (kernel("    mov.u32 %r1, 1.5;\n    ret;"), r"line 11: 'mov.u32 %r1, 1.5': floating-point "
     r"literal of the 0d or decimal \(.f64\) form used as a .u32 operand"),
    (HEAD + "$L1:\n", "outside a kernel"),
])
def test_malformed(src, match):
    with pytest.raises((PtxSyntaxError, UnsupportedPtxError), match=match):
        load_ptx(src)


def test_undeclared_register():
    with pytest.raises(UnsupportedPtxError, match="%r99"):
        load_ptx(kernel("    mov.u32 %r99, 1;\n    ret;"))


def test_out_of_bounds_names_kernel_block_thread_line_address():
    mod = gallery.load("vector_add")
    mem = GlobalMemory()
    a = mem.to_device(np.zeros(32, np.float32))
    b = mem.to_device(np.zeros(32, np.float32))
    c = mem.alloc(4 * 32)
    # n = 40 but the arrays hold 32: threads 32..39 of block 1 read past the end
    with pytest.raises(MemoryAccessError) as e:
        mod.launch("vector_add", 2, 32, [a, b, c, 40], mem)
    msg = str(e.value)
    assert "kernel vector_add" in msg and "block (1, 0, 0)" in msg
    assert "thread (0, 0, 0)" in msg and "line" in msg and "ld.global.f32" in msg
    assert f"{b + 128:#x}" in msg or f"{a + 128:#x}" in msg


def test_unallocated_and_misaligned():
    src = kernel("""    ld.param.u64 %rd1, [p0];
    ld.global.u32 %r1, [%rd1];
    ret;""")
    mod = load_ptx(src)
    mem = GlobalMemory()
    mem.alloc(64)
    with pytest.raises(MemoryAccessError, match="0x10"):
        mod.launch("k", 1, 1, [16], mem)
    base = mem.alloc(64)
    with pytest.raises(MemoryAccessError, match="misaligned"):
        mod.launch("k", 1, 1, [base + 2], mem)


def test_shared_out_of_bounds():
    src = kernel("""    .shared .align 4 .b8 buf[64];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, buf;
    add.u32 %r4, %r3, %r2;
    st.shared.u32 [%r4], %r1;
    ret;""")
    mod = load_ptx(src)
    with pytest.raises(MemoryAccessError, match=r"thread \(16, 0, 0\).*shared.*0x40"):
        mod.launch("k", 1, 32, [0], GlobalMemory())


def test_barrier_deadlock_detected():
    # warp 0 waits at a second barrier that warp 1 (which exits) never reaches
    src = kernel("""    mov.u32 %r1, %tid.x;
    bar.sync 0;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra $L_out;
    bar.sync 0;
$L_out:
    ret;""")
    mod = load_ptx(src)
    with pytest.raises(DeadlockError, match=r"block \(0, 0, 0\).*line"):
        mod.launch("k", 1, 64, [0], GlobalMemory())


def test_divergent_barrier_within_a_warp_deadlocks():
    src = kernel("""    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 16;
    @%p1 bra $L_out;
    bar.sync 0;
$L_out:
    ret;""")
    with pytest.raises(DeadlockError):
        load_ptx(src).launch("k", 1, 32, [0], GlobalMemory())
    # per-warp semantics: the warp arrives as a whole
    st = load_ptx(src).launch("k", 1, 32, [0], GlobalMemory(), barrier_mode="warp")
    assert st.barriers == 1
    with pytest.raises(LaunchError, match="barrier_mode"):
        load_ptx(src).launch("k", 1, 32, [0], GlobalMemory(), barrier_mode="lenient")


def test_step_limit():
    src = kernel("""$L_top:
    bra.uni $L_top;
    ret;""")
    with pytest.raises(StepLimitError, match="max_steps=1000"):
        load_ptx(src).launch("k", 1, 32, [0], GlobalMemory(), max_steps=1000)


def test_launch_argument_errors():
    mod = gallery.load("vector_add")
    mem = GlobalMemory()
    with pytest.raises(LaunchError, match="4 arguments"):
        mod.launch("vector_add", 1, 32, [0, 0], mem)
    with pytest.raises(LaunchError, match="argument 3"):
        mod.launch("vector_add", 1, 32, [0, 0, 0, 1.5], mem)
    with pytest.raises(LaunchError, match="no kernel named"):
        mod.launch("nope", 1, 32, [], mem)
    with pytest.raises(LaunchError, match="1024"):
        mod.launch("vector_add", 1, (64, 32), [0, 0, 0, 1], mem)
    with pytest.raises(LaunchError, match="grid"):
        mod.launch("vector_add", 0, 32, [0, 0, 0, 1], mem)


def test_global_memory_host_api():
    mem = GlobalMemory()
    a = mem.alloc(10)
    b = mem.alloc(1)
    assert a % 256 == 0 and b % 256 == 0 and b >= a + 10
    x = np.arange(6, dtype=np.int16)
    p = mem.to_device(x)
    np.testing.assert_array_equal(mem.from_device(p, np.int16, (2, 3)), x.reshape(2, 3))
    with pytest.raises(IndexError):
        mem.read(p, np.int16, 7)
    with pytest.raises(ValueError):
        mem.alloc(0)
    with pytest.raises(TypeError):
        mem.alloc(2.0)


def test_deterministic_stats_and_outputs():
    data = np.random.default_rng(3).integers(0, 256, 1000).astype(np.uint8)
    runs = []
    for _ in range(2):
        mem = GlobalMemory()
        pd = mem.to_device(data)
        ph = mem.calloc(1024)
        st = gallery.load("histogram").launch("histogram", 2, 96, [pd, ph, 1000], mem)
        runs.append((mem.from_device(ph, np.uint32, 256).tobytes(), st))
    assert runs[0][0] == np.bincount(data, minlength=256).astype(np.uint32).tobytes()
    assert runs[0][0] == runs[1][0]
    assert runs[0][1] == runs[1][1]


def test_early_return_before_barrier_strict_and_lenient():
    # if (tid >= 40) return; __syncthreads(); out[tid] = tid
    src = kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 40;
    @%p1 bra $L_out;
    bar.sync 0;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
$L_out:
    ret;""")
    mod = load_ptx(src)
    mem = GlobalMemory()
    out = mem.to_device(np.full(64, -1, np.int32))
    with pytest.raises(DeadlockError, match="exited"):
        mod.launch("k", 1, 64, [out], mem)
    mem = GlobalMemory()
    out = mem.to_device(np.full(64, -1, np.int32))
    st = mod.launch("k", 1, 64, [out], mem, barrier_mode="warp")
    np.testing.assert_array_equal(mem.from_device(out, np.int32, 64),
                                  np.where(np.arange(64) < 40, np.arange(64), -1))
    assert st.barriers == 1


def test_debug_sections_and_loc_are_skipped():
    src = kernel("""    .loc 1 2 0
$L__func_begin0:
    ret;
$L__tmp0:""") + """
    .file 1 "k.cu"
    .section .debug_abbrev
    {
.b8 1
.b8 17
    }
"""
    mod = load_ptx(src)
    st = mod.launch("k", 1, 32, [0], GlobalMemory())
    assert st.warp_instructions == 1


# ------------------------------------------------------------------ limits at load


@pytest.mark.parametrize("decl,match", [
    ("    .reg .b64 %big<1000000000>;", r"line \d+: .*declares 1000000000 registers"),
    ("    .shared .align 4 .b8 s[99999999999];", r"line \d+: .shared variable s of "
                                                  r"99999999999 bytes exceeds"),
    ("    .shared .align 4 .b32 s[20000];", r"line \d+: .shared variable s of 80000"),
    ("    .local .align 4 .b8 l[1048576];", r"line \d+: .local variable l of 1048576"),
])
def test_oversized_declarations_are_refused_at_load(decl, match):
    with pytest.raises(UnsupportedPtxError, match=match):
        load_ptx(kernel(decl + "\n    ret;"))


def test_oversized_module_variables_and_parameters_are_refused():
    with pytest.raises(UnsupportedPtxError, match=r"line 4: .const variable c of 80000"):
        load_ptx(HEAD + ".const .align 4 .b32 c[20000];\n")
    with pytest.raises(UnsupportedPtxError, match=r"line 4: .global variable g"):
        load_ptx(HEAD + ".global .align 4 .b8 g[99999999999];\n")
    with pytest.raises(UnsupportedPtxError, match="parameters of kernel k take more than"):
        load_ptx(kernel("    ret;", params=".param .align 4 .b8 p0[40000]"))
    # two static arrays that each fit but not together (48 KiB per block)
    with pytest.raises(UnsupportedPtxError, match="shared variables of kernel k take 65536"):
        load_ptx(kernel("    .shared .align 4 .b8 a[32768];\n    .shared .align 4 .b8 "
                        "b[32768];\n    ret;"))


@pytest.mark.parametrize("inst,match", [
    ("bar.sync 16;", "barrier id 16 outside 0..15"),
    ("barrier.sync 1, 48;", "thread count 48"),
    ("bar.sync 0, 64, 3;", "an id and an optional thread count"),
    ("ret %r1;", "ret takes no operands"),
])
def test_out_of_range_operands_are_refused(inst, match):
    with pytest.raises(UnsupportedPtxError, match=match):
        load_ptx(kernel(f"    {inst}\n    ret;", regs=".reg .b16 %rs<2>;"))


def test_wide_integer_immediates_are_truncated_to_the_operand():
    # PTX ISA 4.5.1: an integer literal is 64-bit and converted to the size of its use
    # (ptxas accepts each of these): 5000000000 = 2^32 + 705032704, -2147483649 =
    # -2^32 + 2147483647, 65537 = 2^16 + 1, 2^64 - 1 = -1 as 64 bits
    src = kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, 0;
    add.s32 %r2, %r1, 5000000000;
    add.u32 %r3, %r1, -2147483649;
    mov.u16 %rs1, 65537;
    cvt.u32.u16 %r4, %rs1;
    st.global.v4.u32 [%rd1], {%r2, %r3, %r4, %r1};
    mov.u64 %rd2, 18446744073709551615;
    st.global.u64 [%rd1+16], %rd2;
    ret;""", regs=".reg .b16 %rs<2>;")
    mem = GlobalMemory()
    out = mem.alloc(24)
    load_ptx(src).launch("k", 1, 1, [out], mem)
    assert mem.from_device(out, np.uint32, 3).tolist() == [705032704, 2147483647, 1]
    assert mem.from_device(out + 16, np.uint64, 1)[0] == 2**64 - 1


def test_in_range_immediates_are_accepted():
    # -1 as a .u32 and 0xFFFFFFFF as a .s32 are the same 32 bits (both accepted)
    src = kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, -1;
    mov.s32 %r2, 0xFFFFFFFF;
    xor.b32 %r3, %r1, %r2;
    add.s32 %r3, %r3, -2147483648;
    st.global.u32 [%rd1], %r3;
    ret;""")
    mem = GlobalMemory()
    out = mem.alloc(4)
    load_ptx(src).launch("k", 1, 1, [out], mem)
    assert mem.from_device(out, np.uint32, 1)[0] == 0x80000000


# ---------------------------------------------------------------- limits at launch


def _bounded(directives: str) -> str:
    return HEAD + f"""
.visible .entry k(.param .u64 p0){directives}
{{
    ret;
}}
"""


def test_launch_bounds_are_enforced():
    """__launch_bounds__(128) compiles to .maxntid 128, 1, 1 (PTX ISA 11.4.2): a block
    of more threads cannot launch; .reqntid (11.4.3) requires the exact shape."""
    mod = load_ptx(_bounded("\n.maxntid 128, 1, 1"))
    mod.launch("k", 1, 128, [0], GlobalMemory())
    mod.launch("k", 1, (8, 16), [0], GlobalMemory())
    with pytest.raises(LaunchError, match=r"129 threads, more than the 128.*maxntid 128"):
        mod.launch("k", 1, 129, [0], GlobalMemory())
    mod = load_ptx(_bounded("\n.reqntid 64, 2"))
    mod.launch("k", 1, (64, 2), [0], GlobalMemory())
    with pytest.raises(LaunchError, match=r"reqntid 64, 2"):
        mod.launch("k", 1, (128, 1), [0], GlobalMemory())


def test_grid_and_block_dimension_limits():
    mod = load_ptx(_bounded(""))
    with pytest.raises(LaunchError, match="grid limits"):
        mod.launch("k", (1, 65536), 32, [0], GlobalMemory())
    with pytest.raises(LaunchError, match="grid limits"):
        mod.launch("k", 2**31, 32, [0], GlobalMemory())
    with pytest.raises(LaunchError, match="block limits"):
        mod.launch("k", 1, (1, 1, 65), [0], GlobalMemory())


def test_huge_grid_is_not_materialised():
    """grid = 2**31 - 1 blocks: the blocks are made wave by wave (listing them all took
    all the memory); without the launch-wide budget (which refuses this grid at once) a
    spinning kernel stops at the step limit of its first warp."""
    src = kernel("""$L_top:
    bra.uni $L_top;
    ret;""")
    with pytest.raises(StepLimitError, match=r"warp 0 of block \(0, 0, 0\)"):
        load_ptx(src).launch("k", 2**31 - 1, 32, [0], GlobalMemory(), max_steps=100,
                             max_instructions=None)


def test_step_limit_counts_per_warp_and_names_the_spinning_warp():
    """Warp 1 of block 0 spins on a flag nobody sets; warp 0 and the other blocks finish.
    The limit counts each warp's own instructions: the launch stops after about
    max_steps instructions of the spinning warp, whatever the other warps did."""
    src = kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $L_done;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra $L_done;
$L_spin:
    ld.volatile.global.u32 %r3, [%rd1];
    setp.eq.u32 %p3, %r3, 0;
    @%p3 bra $L_spin;
$L_done:
    ret;""")
    mem = GlobalMemory()
    flag = mem.calloc(4)
    with pytest.raises(StepLimitError) as e:
        load_ptx(src).launch("k", 4, 64, [flag], mem, max_steps=3000)
    assert "warp 1 of block (0, 0, 0) (threads 32-63 of the block)" in str(e.value)
    assert "max_steps=3000" in str(e.value)
    assert "ld.volatile.global.u32" in str(e.value) or "$L_spin" in str(e.value)
    # with the flag set, every warp finishes well inside the limit
    mem.write(flag, np.uint32([1]))
    st = load_ptx(src).launch("k", 4, 64, [flag], mem, max_steps=3000)
    # by hand: 5 instructions to the first branch; warp 0 then ret (6 per block); warp 1
    # of block 0 runs 5 more and ret (11), warp 1 of the other blocks 2 more and ret (8)
    assert st.warp_instructions == 4 * 6 + 11 + 3 * 8
    assert st.thread_instructions == 32 * st.warp_instructions


def test_a_spinning_warp_stops_quickly_by_default():
    """A single warp spinning forever stops in seconds with the default settings (no
    per-warp bound: the progress detection sees nothing change)."""
    import time
    from hardware.simt import DEFAULT_MAX_STEPS, LivelockError
    assert DEFAULT_MAX_STEPS is None
    src = kernel("""$L_top:
    bra.uni $L_top;
    ret;""")
    t0 = time.perf_counter()
    with pytest.raises(LivelockError, match="warp 0 of block"):
        load_ptx(src).launch("k", 1, 32, [0], GlobalMemory())
    assert time.perf_counter() - t0 < 60


# ---------------------------------------------------------------- memory checks


def test_access_before_any_allocation_is_a_clean_error():
    src = kernel("""    ld.param.u64 %rd1, [p0];
    ld.global.u32 %r1, [%rd1];
    ret;""")
    with pytest.raises(MemoryAccessError, match="nothing is allocated"):
        load_ptx(src).launch("k", 1, 32, [1 << 32], GlobalMemory())


def test_overrun_into_the_next_allocation_is_detected():
    """Index n..2n-1 of an n-element array lies in the guard gap after it, never in the
    next allocation (with a 256-byte gap, a[1100] of a 1024-float array landed in b)."""
    src = kernel("""    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    add.u32 %r1, %r1, 1090;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;""")
    mem = GlobalMemory()
    a = mem.alloc(4 * 1024)
    b = mem.to_device(np.zeros(1024, np.float32))
    with pytest.raises(MemoryAccessError, match="past the end of allocation"):
        load_ptx(src).launch("k", 1, 32, [a], mem)
    assert not mem.from_device(b, np.float32, 1024).any()
    for n in (1, 100, 4096, 5000):
        p = mem.alloc(n)
        q = mem.alloc(1)
        assert q >= p + 2 * n
