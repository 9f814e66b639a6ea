"""tcgen05.shift (hardware/simt/tcgen05_shift.py) against the ISA's description, written
out here by hand (PTX ISA 9.2, 9.7.16.9.3: "shifting of 32-byte elements downwards across
all the rows, except the last, by one row"; 9.7.16.2.3: its implicit shape .31x256b).

The kernel (accepted by ptxas -arch=sm_100a) allocates 32 columns, lets every warp store
1000 * lane + column into the first 16 columns of its lane quarter (tcgen05.st.32x32b.x16),
has thread 0 issue one tcgen05.shift at taddr + ``off`` and commit it to an mbarrier, and
reads every quarter back after the wait. Expected: in the 32 lanes from off's lane and the
8 columns from off's column, lane l + 1 holds what lane l held (l = 0..30) and every other
cell is unchanged; the first lane, which the ISA does not define after the shift, is read
only after a tcgen05.cp.4x256b has rewritten it (reading it before is an error)."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, UnsupportedPtxError, load_ptx
from test_simt_tcgen05 import assert_ptxas_accepts

SRC = """.version 8.7
.target sm_100a
.address_size 64

.visible .entry k(.param .u64 out, .param .u32 off)
{
  .reg .pred %p<4>;
  .reg .b32 %r<60>;
  .reg .b64 %rd<8>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;

  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
  setp.ne.u32 %p2, %r1, 0;
  @%p2 bra INITED;
  mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
INITED:
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r8, [slot];
  shl.b32 %r11, %r2, 21;
  add.u32 %r12, %r8, %r11;
  mul.lo.u32 %r20, %r1, 1000;
  add.u32 %r21, %r20, 1;
  add.u32 %r22, %r20, 2;
  add.u32 %r23, %r20, 3;
  add.u32 %r24, %r20, 4;
  add.u32 %r25, %r20, 5;
  add.u32 %r26, %r20, 6;
  add.u32 %r27, %r20, 7;
  add.u32 %r28, %r20, 8;
  add.u32 %r29, %r20, 9;
  add.u32 %r30, %r20, 10;
  add.u32 %r31, %r20, 11;
  add.u32 %r32, %r20, 12;
  add.u32 %r33, %r20, 13;
  add.u32 %r34, %r20, 14;
  add.u32 %r35, %r20, 15;
  tcgen05.st.sync.aligned.32x32b.x16.b32 [%r12], {%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31, %r32, %r33, %r34, %r35};
  tcgen05.wait::st.sync.aligned;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  @%p2 bra ISSUED;
  ld.param.u32 %r9, [off];
  add.u32 %r10, %r8, %r9;
  tcgen05.shift.cta_group::1.down [%r10];
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  tcgen05.fence::after_thread_sync;
  tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r40, %r41, %r42, %r43, %r44, %r45, %r46, %r47, %r48, %r49, %r50, %r51, %r52, %r53, %r54, %r55}, [%r12];
  tcgen05.wait::ld.sync.aligned;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 64;
  add.u64 %rd3, %rd1, %rd2;
  st.global.v4.u32 [%rd3], {%r40, %r41, %r42, %r43};
  st.global.v4.u32 [%rd3+16], {%r44, %r45, %r46, %r47};
  st.global.v4.u32 [%rd3+32], {%r48, %r49, %r50, %r51};
  st.global.v4.u32 [%rd3+48], {%r52, %r53, %r54, %r55};
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @%p1 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r8, 32;
DONE:
  ret;
}
"""


def run(off: int, src: str = SRC, extra: list | None = None) -> np.ndarray:
    mem = GlobalMemory()
    po = mem.calloc(128 * 16 * 4)
    load_ptx(src).launch("k", 1, 128, [po, off] + (extra or []), mem, gpu="B200")
    return mem.from_device(po, np.uint32, (128, 16))


def before() -> np.ndarray:
    return (1000 * np.arange(128)[:, None] + np.arange(16)[None, :]).astype(np.uint32)


#: the kernel with, after the shift, thread 0's tcgen05.cp.4x256b of 4 rows x 32 bytes
#: from shared memory (word i = 5000 + i) to the shifted matrix's first 4 rows (the pair
#: 9.7.16.6.2 lists as pipelined: shift, then cp.4x256b): source row r's 16-byte chunk c
#: at 16 r + 128 c (LBO 128, no swizzling), so lane r, column 4 c + w gets 5000 + 4 r +
#: 32 c + w
WITH_CP = SRC.replace(
    ".param .u32 off)", ".param .u32 off, .param .u64 cdesc)").replace(
    "  .shared .align 4 .b32 slot;\n",
    "  .shared .align 4 .b32 slot;\n  .shared .align 128 .b8 src[256];\n").replace(
    "INITED:\n",
    "INITED:\n  setp.ge.u32 %p3, %r1, 64;\n  @%p3 bra FILLED;\n  mov.u32 %r15, src;\n"
    "  shl.b32 %r16, %r1, 2;\n  add.u32 %r15, %r15, %r16;\n  add.u32 %r17, %r1, 5000;\n"
    "  st.shared.u32 [%r15], %r17;\nFILLED:\n  fence.proxy.async.shared::cta;\n").replace(
    "  tcgen05.shift.cta_group::1.down [%r10];\n",
    "  tcgen05.shift.cta_group::1.down [%r10];\n  ld.param.u64 %rd5, [cdesc];\n"
    "  mov.u32 %r18, src;\n  shr.u32 %r18, %r18, 4;\n  cvt.u64.u32 %rd6, %r18;\n"
    "  add.u64 %rd5, %rd5, %rd6;\n  tcgen05.cp.cta_group::1.4x256b [%r10], %rd5;\n")
CDESC = 8 << 16 | 16 << 32 | 1 << 46      # LBO 128, SBO 256 (unused: 4 rows), start 0


@pytest.mark.parametrize("lane0,col0", [(0, 0), (32, 8), (96, 4)])
def test_shift_moves_rows_down_by_one(lane0, col0):
    want = before()
    for r in range(31, 0, -1):            # rows 0-30 move to 1-31, the last is overwritten
        for j in range(8):
            want[lane0 + r, col0 + j] = 1000 * (lane0 + r - 1) + col0 + j
    for r in range(4):                    # then the cp rewrites the first 4 rows
        for c in range(8):
            want[lane0 + r, col0 + c] = 5000 + 4 * r + 32 * (c // 4) + c % 4
    assert WITH_CP.count("tcgen05.cp") == 1
    assert np.array_equal(run((lane0 << 16) | col0, WITH_CP, [CDESC]), want)


def test_reading_the_first_row_after_the_shift_is_an_error():
    # without the cp the first row of the shifted matrix was never written again
    with pytest.raises(ExecutionError, match=r"thread \(32, 0, 0\), line \d+ \('tcgen05.ld.*"
                                             r"reads Tensor Memory lane 32, column 8, which "
                                             r"the tcgen05.shift on line \d+ left undefined"):
        run((32 << 16) | 8)


def test_shift_lane_must_be_a_multiple_of_32():
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ "
                                             r"\('tcgen05.shift.*lane 16, not a multiple of 32"):
        run(16 << 16)


def test_shift_outside_the_allocation():
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*tcgen05.shift "
                                             r"columns 28..35 .*not inside one allocation"):
        run(28)


def test_reading_before_the_shift_completes_is_a_race():
    src = SRC.replace("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;\n"
                      "  @!%p3 bra WAIT;\n", "")
    with pytest.raises(ExecutionError, match=r"line \d+ \('tcgen05.ld.*race: tcgen05.ld reads "
                                             r".*the rows moved by the tcgen05.shift on line "
                                             r"\d+"):
        run(0, src)


def test_both_qualifier_orders_and_cta_group_2_refused():
    # the ISA's own example writes .down before .cta_group; ptxas takes both
    src = WITH_CP.replace("tcgen05.shift.cta_group::1.down", "tcgen05.shift.down.cta_group::1")
    assert np.array_equal(run(0, src, [CDESC])[4, :8], before()[3, :8])
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*\.cta_group::2, a CTA pair "
                                                  r"sharing one MMA, is refused because"):
        load_ptx(SRC.replace("shift.cta_group::1", "shift.cta_group::2"))


def test_shift_kernel_is_accepted_by_ptxas(tmp_path):
    assert_ptxas_accepts(tmp_path, SRC)
    assert_ptxas_accepts(tmp_path, WITH_CP)
    assert_ptxas_accepts(tmp_path, SRC.replace("tcgen05.shift.cta_group::1.down",
                                               "tcgen05.shift.down.cta_group::1"))
