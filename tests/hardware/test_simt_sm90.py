"""sm_90 instructions without state of their own (hardware.simt.isa.sm90) and ld.param
through a register: elect.sync, setmaxnreg, griddepcontrol, brkpt, packed 16-bit
integer min/max. Expected values are computed in NumPy from the ISA's definitions."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import ExecutionError, MemoryAccessError, PtxTypeError

DATA = pathlib.Path(__file__).parent / "data"
PTXAS = shutil.which("ptxas")
HEAD = """.version 8.6
.target sm_90a
.address_size 64
"""


def ptxas_ok(src: str) -> bool | None:
    if PTXAS is None:
        return None
    r = subprocess.run([PTXAS, "-arch=sm_90a", "-", "-o", "/dev/null"], input=src,
                       capture_output=True, text=True)
    return r.returncode == 0


def kernel(body: str, params: str = ".param .u64 out") -> str:
    return HEAD + f""".visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.u64 %rd3, %rd1, %rd2;
{body}
    ret;
}}
"""


def run(src: str, threads: int, words: int, args=None):
    assert ptxas_ok(src) in (None, True)
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(8 * words)
    m.launch("k", 1, threads, [out] + list(args or []), mem)
    return mem.from_device(out, np.uint32, 2 * words).reshape(words, 2)


ELECT = """    and.b32 %r2, %r1, 31;
    setp.lt.u32 %p1, %r2, {first};
    @%p1 bra $L_end;
    mov.u32 %r5, 0xFFFFFF80;
    mov.u32 %r7, 1;
    elect.sync %r3|%p2, {mask};
    selp.u32 %r4, 1, 0, %p2;
    st.global.v2.u32 [%rd3], {{%r3, %r4}};
$L_end:
"""


@pytest.mark.parametrize("first, mask", [(0, "0xFFFFFFFF"), (5, "0xFFFFFFE0"),
                                         (7, "%r5"), (31, "0x80000000")])
def test_elect_sync_leader_is_the_lowest_executing_member(first, mask):
    out = run(kernel(ELECT.format(first=first, mask=mask)), 64, 64)
    lane = np.arange(64) % 32
    run_ = lane >= first
    assert (out[run_, 0] == first).all()
    assert (out[run_, 1] == (lane[run_] == first)).all()
    assert (out[~run_] == 0).all()


SETMAXNREG = """    shr.u32 %r2, %r1, 7;               // warpgroup
    setp.eq.u32 %p1, %r2, 0;
    @!%p1 bra $L_consumer;
    setmaxnreg.dec.sync.aligned.u32 {low};
    bra $L_done;
$L_consumer:
    setmaxnreg.inc.sync.aligned.u32 {high};
$L_done:
    st.global.v2.u32 [%rd3], {{%r1, %r2}};
"""


def test_setmaxnreg_producer_and_consumers():
    """Three warpgroups: the producer gives registers up, the consumers take them (the
    FlashAttention-3 / CUTLASS warp-specialised split, 40 + 2 x 232 registers)."""
    out = run(kernel(SETMAXNREG.format(low=40, high=232)), 384, 384)
    assert (out[:, 0] == np.arange(384)).all() and (out[:, 1] == np.arange(384) // 128).all()


@pytest.mark.parametrize("body, match", [
    (SETMAXNREG.format(low=240, high=240).replace("dec.sync.aligned.u32 240",
                                                   "inc.sync.aligned.u32 240"),
     "would hold 73728 registers, more than the 65536"),
    (SETMAXNREG.format(low=40, high=232).replace("shr.u32 %r2, %r1, 7;",
                                                  "shr.u32 %r2, %r1, 5;"),
     "not warpgroup-uniform"),
    (SETMAXNREG.format(low=200, high=232), "dec 200 while the warpgroup has 168"),
    ("    and.b32 %r2, %r1, 1;\n    setp.eq.u32 %p1, %r2, 0;\n    @%p1 setmaxnreg.inc"
     ".sync.aligned.u32 200;", "part of a warp"),
])
def test_setmaxnreg_constraints_at_run_time(body, match):
    with pytest.raises(ExecutionError, match=match):
        run(kernel(body), 384, 384)


def test_setmaxnreg_of_one_count_at_different_lines_is_warpgroup_uniform():
    """Each warp of the producer warpgroup runs its own copy of setmaxnreg.dec 40 (as
    Triton's warp_specialize partitions do): the same action and count, so uniform."""
    body = """    shr.u32 %r2, %r1, 7;               // warpgroup
    shr.u32 %r6, %r1, 5;               // warp
    setp.eq.u32 %p1, %r2, 0;
    @!%p1 bra $L_consumer;
    and.b32 %r6, %r6, 1;
    setp.eq.u32 %p2, %r6, 0;
    @%p2 bra $L_odd;
    setmaxnreg.dec.sync.aligned.u32 40;
    bra $L_done;
$L_odd:
    setmaxnreg.dec.sync.aligned.u32 40;
    bra $L_done;
$L_consumer:
    setmaxnreg.inc.sync.aligned.u32 232;
$L_done:
    st.global.v2.u32 [%rd3], {%r1, %r2};
"""
    out = run(kernel(body), 384, 384)
    assert (out[:, 0] == np.arange(384)).all() and (out[:, 1] == np.arange(384) // 128).all()


@pytest.mark.parametrize("n", [20, 100, 264])
def test_setmaxnreg_count_rule(n):
    src = kernel(f"    setmaxnreg.inc.sync.aligned.u32 {n};\n")
    assert ptxas_ok(src) in (None, False)
    with pytest.raises(PtxTypeError, match="multiple of 8 in 24..256"):
        load_ptx(src)


def test_griddepcontrol_and_fences_have_no_effect_on_values():
    body = """    griddepcontrol.wait;
    fence.proxy.async.shared::cta;
    fence.acq_rel.cluster;
    fence.mbarrier_init.release.cluster;
    add.u32 %r2, %r1, 9;
    st.global.v2.u32 [%rd3], {%r2, %r2};
    griddepcontrol.launch_dependents;
"""
    out = run(kernel(body), 32, 32)
    assert (out == (np.arange(32) + 9)[:, None]).all()


def test_brkpt_names_the_thread():
    body = """    setp.eq.u32 %p1, %r1, 3;
    @%p1 brkpt;
"""
    with pytest.raises(ExecutionError, match=r"thread \(3, 0, 0\), line \d+ \('@%p1 brkpt'\):"
                                             " brkpt"):
        run(kernel(body), 32, 32)


@pytest.mark.parametrize("op", ["min.u16x2", "max.u16x2", "min.s16x2", "max.s16x2",
                                "max.relu.s16x2", "min.relu.s16x2"])
def test_packed_16_bit_min_max(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    edges = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x8001, 0x7FFE], np.uint32)
    a = np.concatenate([rng.integers(0, 1 << 32, 57, dtype=np.uint64).astype(np.uint32),
                        edges | (edges[::-1] << 16)])
    b = np.concatenate([rng.integers(0, 1 << 32, 57, dtype=np.uint64).astype(np.uint32),
                        edges[::-1] | (edges << 16)])
    body = f"""    ld.param.u64 %rd4, [ina];
    cvta.to.global.u64 %rd4, %rd4;
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6];
    ld.global.u32 %r3, [%rd6+256];
    {op} %r4, %r2, %r3;
    st.global.v2.u32 [%rd3], {{%r4, %r4}};
"""
    src = kernel(body, ".param .u64 out, .param .u64 ina")
    assert ptxas_ok(src) in (None, True)
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(8 * 64)
    ina = mem.to_device(np.concatenate([a, b]))
    m.launch("k", 1, 64, [out, ina], mem)
    got = mem.from_device(out, np.uint32, 128)[::2]
    signed = "s16x2" in op
    want = np.zeros(64, np.uint32)
    for h in range(2):
        x = (a >> (16 * h)) & 0xFFFF
        y = (b >> (16 * h)) & 0xFFFF
        if signed:
            x = np.where(x >= 0x8000, x.astype(np.int64) - 0x10000, x)
            y = np.where(y >= 0x8000, y.astype(np.int64) - 0x10000, y)
        r = np.minimum(x, y) if op.startswith("min") else np.maximum(x, y)
        if "relu" in op:
            r = np.maximum(r, 0)
        want |= (r.astype(np.int64) & 0xFFFF).astype(np.uint32) << (16 * h)
    assert (got == want).all()


def test_relu_needs_s16x2():
    src = kernel("    max.relu.u16x2 %r4, %r1, %r1;\n")
    assert ptxas_ok(src) in (None, False)
    with pytest.raises(PtxTypeError, match="relu needs .s16x2"):
        load_ptx(src)


def test_nvcc_params_struct_read_through_a_register():
    """nvcc's PTX for a by-value struct indexed at run time (mov.b64 %rd, param;
    ld.param.u32 %r, [%rd]), the pattern of CUTLASS 2.x Params."""
    m = load_ptx((DATA / "params_by_value.ptx").read_text())
    a = (np.arange(78, dtype=np.int32) * 37 - 1000)
    p = np.concatenate([a, np.array([-3, 11], np.int32)])
    mem = GlobalMemory()
    out = mem.alloc(4 * 200)
    m.launch("params_by_value", 1, 200, [p.tobytes(), out], mem)
    i = np.arange(200)
    assert (mem.from_device(out, np.int32, 200) == a[i % 78] * -3 + 11).all()


def test_ld_param_register_address_out_of_range():
    body = """    mov.b64 %rd4, blob;
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd4, %rd5;
    ld.param.u32 %r2, [%rd6];
    st.global.v2.u32 [%rd3], {%r2, %r2};
"""
    src = kernel(body, ".param .u64 out, .param .align 4 .b8 blob[64]")
    assert ptxas_ok(src) in (None, True)
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(8 * 32)
    blob = np.arange(16, dtype=np.uint32) * 5
    m.launch("k", 1, 16, [out, blob.tobytes()], mem)
    assert (mem.from_device(out, np.uint32, 32)[::2] == blob).all()
    with pytest.raises(MemoryAccessError, match="outside the 72 bytes of kernel parameters"):
        m.launch("k", 1, 32, [out, blob.tobytes()], mem)


def test_globaltimer_counts_the_warps_instructions():
    body = """    mov.u64 %rd4, %globaltimer;
    mov.u32 %r2, %globaltimer_lo;
    add.u32 %r3, %r2, 1;
    add.u32 %r3, %r3, 1;
    mov.u64 %rd5, %globaltimer;
    sub.u64 %rd6, %rd5, %rd4;
    cvt.u32.u64 %r4, %rd6;
    st.global.v2.u32 [%rd3], {%r2, %r4};
"""
    out = run(kernel(body), 64, 64)
    # 5 instructions of the prologue and the first read precede the second; the two
    # 64-bit reads are 4 instructions apart
    assert (out[:, 0] == 6).all() and (out[:, 1] == 4).all()
