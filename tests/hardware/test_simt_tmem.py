"""Tensor Memory (hardware/simt/tmem.py): allocation rules, tcgen05.st/ld shapes, the
lane quarters and the errors, on hand-written sm_100a kernels (each accepted by
``ptxas -arch=sm_100a``; see test_ptx_is_valid).

The fragment layouts are checked against this file's table of the PTX ISA's matrix
fragments (9.7.16.2.3.1), written out per shape: a warp stores distinct words with one
shape and reads the cells back with ``.32x32b`` (one lane per thread, one column per
register), so both shapes are compared against the table."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, UnsupportedPtxError, load_ptx
from hardware.simt.tmem import check_released

HEAD = """.version 8.7
.target sm_100a
.address_size 64
"""


def kernel(body: str, regs: int = 1) -> str:
    return HEAD + """
.visible .entry k(.param .u64 out, .param .u32 ncols)
{
  .reg .pred %p<4>;
  .reg .b32 %r<300>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b32 slot;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  and.b32 %r3, %r2, 3;
  setp.ne.u32 %p1, %r2, 0;
  ld.param.u32 %r4, [ncols];
  @%p1 bra A;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], %r4;
A:
  bar.sync 0;
  ld.shared.b32 %r5, [slot];
  shl.b32 %r6, %r3, 21;
  add.u32 %r7, %r5, %r6;
""" + body + """
  bar.sync 0;
  @%p1 bra D;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, %r4;
D:
  ret;
}
"""


def vec(start: int, n: int) -> str:
    return "{" + ", ".join(f"%r{start + i}" for i in range(n)) + "}"


def layout(shape: str, num: int, split: int = 0) -> list[list[tuple[int, int]]]:
    """(lane, column) of register j of thread t, from the ISA's fragment figures."""
    out = []
    for t in range(32):
        row = []
        if shape == "32x32b":
            row = [(t, j) for j in range(num)]
        elif shape == "16x64b":
            row = [(t // 4 + 8 * (t % 2), 2 * j + (t // 2) % 2) for j in range(num)]
        elif shape == "16x128b":
            for i in range(num):
                row += [(t // 4, 4 * i + t % 4), (t // 4 + 8, 4 * i + t % 4)]
        elif shape == "16x256b":
            for i in range(num):
                c = 8 * i + 2 * (t % 4)
                row += [(t // 4, c), (t // 4, c + 1), (t // 4 + 8, c), (t // 4 + 8, c + 1)]
        else:
            row = [(t % 16, j + (t // 16) * split) for j in range(num)]
        out.append(row)
    return out


def roundtrip_src(shape: str, num: int, split: int = 0) -> tuple[str, int]:
    nregs = len(layout(shape, num, split)[0])
    movs = "".join(f"  mad.lo.u32 %r{20 + j}, %r1, 1000, {j + 1};\n" for j in range(nregs))
    tail = f", {split}" if shape == "16x32bx2" else ""
    body = movs + f"""  tcgen05.st.sync.aligned.{shape}.x{num}.b32 [%r7]{tail}, {vec(20, nregs)};
  tcgen05.wait::st.sync.aligned;
  tcgen05.ld.sync.aligned.32x32b.x32.b32 {vec(200, 32)}, [%r7];
  tcgen05.wait::ld.sync.aligned;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 128;
  add.u64 %rd3, %rd1, %rd2;
""" + "".join(f"  st.global.u32 [%rd3+{4 * j}], %r{200 + j};\n" for j in range(32))
    return kernel(body), nregs


CASES = [("32x32b", 4), ("16x64b", 8), ("16x128b", 4), ("16x256b", 2), ("16x32bx2", 8)]


@pytest.mark.parametrize("shape,num", CASES)
def test_store_shapes_place_registers_as_the_isa_figures(shape, num):
    split = 16 if shape == "16x32bx2" else 0
    src, nregs = roundtrip_src(shape, num, split)
    mem = GlobalMemory()
    po = mem.calloc(128 * 32 * 4)
    load_ptx(src).launch("k", 1, 128, [po, 32], mem, gpu="B200")
    got = mem.from_device(po, np.uint32, (128, 32))    # thread = lane, 32 columns
    want = np.zeros((128, 32), np.uint32)
    for w in range(4):
        for t, row in enumerate(layout(shape, num, split)):
            for j, (lane, col) in enumerate(row):
                want[32 * w + lane, col] = (32 * w + t) * 1000 + j + 1
    assert np.array_equal(got, want)


def launch(src: str, ncols: int = 32) -> None:
    mem = GlobalMemory()
    po = mem.calloc(128 * 32 * 4)
    load_ptx(src).launch("k", 1, 128, [po, ncols], mem, gpu="B200")


@pytest.mark.parametrize("ncols", [16, 48, 1024])
def test_column_count_must_be_a_power_of_two_in_range(ncols):
    with pytest.raises(ExecutionError, match="power of 2 in 32..512"):
        launch(kernel(""), ncols)


def test_warps_reach_only_their_lane_quarter():
    body = "  tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r20}, [%r5];\n"   # lane 0 for all
    with pytest.raises(ExecutionError, match=r"warp 1 of the CTA reaches only lanes 32..63"):
        launch(kernel(body))


def test_access_outside_the_allocation():
    body = "  tcgen05.ld.sync.aligned.32x32b.x64.b32 " + vec(20, 64) + ", [%r7];\n"
    with pytest.raises(ExecutionError, match=r"columns 0..63 .* not inside one allocation"):
        launch(kernel(body))


def test_alloc_after_relinquish_and_bad_dealloc():
    src = kernel("").replace(
        "A:\n", "  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
        "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;\nA:\n")
    with pytest.raises(ExecutionError, match="after the CTA executed"):
        launch(src)
    src = kernel("").replace("b32 %r5, %r4;", "b32 %r7, %r4;").replace(
        "@%p1 bra D;", "setp.ne.u32 %p1, %r2, 1;\n  @%p1 bra D;")
    with pytest.raises(ExecutionError, match="names no allocation"):
        launch(src)


def test_memory_still_allocated_at_exit_is_reported():
    src = kernel("").replace("  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, %r4;\n",
                             "")
    mod = load_ptx(src)
    mem = GlobalMemory()
    po = mem.calloc(4096)
    with pytest.raises(ExecutionError, match=r"exited holding Tensor Memory \(columns 0..63"):
        mod.launch("k", 1, 128, [po, 64], mem, gpu="B200")
    wave = next(iter(mod["k"]._waves.values()))
    with pytest.raises(ExecutionError, match=r"exited holding Tensor Memory \(columns 0..63"):
        check_released(wave)


def test_partial_warp_and_unmodelled_forms():
    src = kernel("").replace("@%p1 bra A;", "setp.ne.u32 %p1, %r1, 0;\n  @%p1 bra A;")
    with pytest.raises(ExecutionError, match="not executed by every thread of the warp"):
        launch(src)
    with pytest.raises(UnsupportedPtxError, match="cta_group::2"):
        load_ptx(kernel("").replace("alloc.cta_group::1", "alloc.cta_group::2"))
    with pytest.raises(UnsupportedPtxError, match="pack::16b"):
        load_ptx(kernel("  tcgen05.ld.sync.aligned.32x32b.x1.pack::16b.b32 {%r20}, [%r7];\n"))
    with pytest.raises(UnsupportedPtxError, match="sm_100a"):
        load_ptx(kernel("").replace("sm_100a", "sm_90a"))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_ptx_is_valid(tmp_path):
    for shape, num in CASES:
        src, _ = roundtrip_src(shape, num, 16 if shape == "16x32bx2" else 0)
        f = tmp_path / "k.ptx"
        f.write_text(src)
        r = subprocess.run(["ptxas", "-arch=sm_100a", str(f), "-o", "/dev/null"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
