"""tcgen05.mma.ws (hardware/simt/tcgen05_ws.py) against layouts and collector rules written
out here by hand from PTX ISA 9.2: Table 39 (.ws: M = 32, 64, 128; N = 64, 128, 256), the
data path layouts of 9.7.16.10.5 (M = 128 layout D; M = 64 layout E, "2x2"; M = 32 layout
G, "1x4", in the placement NVIDIA's CUTLASS uses for the weight-stationary accumulator:
the column halves / quarters of D side by side in the lane halves / quarters) and the
collector buffer operations of 9.7.16.10.9.3.

The kernel (accepted by ptxas -arch=sm_100a) allocates 64 columns, lets thread 0 issue
tcgen05.mma.ws ...collector::b1::fill (D = A B), then, when ``twice`` is set, a second
one with ...collector::b1::use and enable-input-d (D += A B; when ``poke`` is set it first
zeroes the first 4 bytes of B in shared memory), commits, and has every warp read 64
columns of its lane quarter."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, UnsupportedPtxError, load_ptx
from test_simt_tcgen05 import (B_START, KINDS, LBO, SBO, _bytes, assert_ptxas_accepts, f16,
                               idesc, image, image_bytes, smem_desc)

SRC = """.version 8.7
.target sm_100a
.address_size 64

.visible .entry k(.param .u64 img, .param .u32 nwords, .param .u64 out,
                  .param .u64 adesc, .param .u64 bdesc, .param .u32 idesc, .param .u32 twice,
                  .param .u32 poke)
{
  .reg .pred %p<6>;
  .reg .b32 %r<200>;
  .reg .b64 %rd<12>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;
  .shared .align 1024 .b8 tile[8192];

  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 64;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOCATED:
  setp.ne.u32 %p2, %r1, 0;
  @%p2 bra INITED;
  mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
INITED:
  ld.param.u64 %rd1, [img];
  ld.param.u32 %r3, [nwords];
  mov.u32 %r4, %r1;
COPY:
  setp.ge.u32 %p3, %r4, %r3;
  @%p3 bra COPIED;
  mul.wide.u32 %rd2, %r4, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r5, [%rd3];
  mov.u32 %r6, tile;
  shl.b32 %r7, %r4, 2;
  add.u32 %r6, %r6, %r7;
  st.shared.u32 [%r6], %r5;
  add.u32 %r4, %r4, 128;
  bra COPY;
COPIED:
  fence.proxy.async.shared::cta;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  ld.shared.b32 %r8, [slot];
  @%p2 bra ISSUED;
  ld.param.u64 %rd4, [adesc];
  ld.param.u64 %rd5, [bdesc];
  ld.param.u32 %r9, [idesc];
  mov.u32 %r13, tile;
  shr.u32 %r13, %r13, 4;
  cvt.u64.u32 %rd9, %r13;
  add.u64 %rd4, %rd4, %rd9;
  add.u64 %rd5, %rd5, %rd9;
  setp.ne.u32 %p3, 0, 0;
  tcgen05.mma.ws.cta_group::1.kind::f16.collector::b1::fill [%r8], %rd4, %rd5, %r9, %p3;
  ld.param.u32 %r10, [twice];
  setp.eq.u32 %p4, %r10, 0;
  @%p4 bra COMMIT;
  ld.param.u32 %r14, [poke];
  setp.eq.u32 %p5, %r14, 0;
  @%p5 bra SECOND;
  mov.u32 %r15, tile;
  st.shared.u32 [%r15+4096], 0;
  fence.proxy.async.shared::cta;
SECOND:
  setp.ne.u32 %p3, 1, 0;
  tcgen05.mma.ws.cta_group::1.kind::f16.collector::b1::use [%r8], %rd4, %rd5, %r9, %p3;
COMMIT:
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  tcgen05.fence::after_thread_sync;
  shl.b32 %r11, %r2, 21;
  add.u32 %r12, %r8, %r11;
  tcgen05.ld.sync.aligned.32x32b.x64.b32 {%r100, %r101, %r102, %r103, %r104, %r105, %r106, %r107, %r108, %r109, %r110, %r111, %r112, %r113, %r114, %r115, %r116, %r117, %r118, %r119, %r120, %r121, %r122, %r123, %r124, %r125, %r126, %r127, %r128, %r129, %r130, %r131, %r132, %r133, %r134, %r135, %r136, %r137, %r138, %r139, %r140, %r141, %r142, %r143, %r144, %r145, %r146, %r147, %r148, %r149, %r150, %r151, %r152, %r153, %r154, %r155, %r156, %r157, %r158, %r159, %r160, %r161, %r162, %r163}, [%r12];
  tcgen05.wait::ld.sync.aligned;
  ld.param.u64 %rd6, [out];
  mul.wide.u32 %rd7, %r1, 256;
  add.u64 %rd8, %rd6, %rd7;
  st.global.v4.u32 [%rd8+0], {%r100, %r101, %r102, %r103};
  st.global.v4.u32 [%rd8+16], {%r104, %r105, %r106, %r107};
  st.global.v4.u32 [%rd8+32], {%r108, %r109, %r110, %r111};
  st.global.v4.u32 [%rd8+48], {%r112, %r113, %r114, %r115};
  st.global.v4.u32 [%rd8+64], {%r116, %r117, %r118, %r119};
  st.global.v4.u32 [%rd8+80], {%r120, %r121, %r122, %r123};
  st.global.v4.u32 [%rd8+96], {%r124, %r125, %r126, %r127};
  st.global.v4.u32 [%rd8+112], {%r128, %r129, %r130, %r131};
  st.global.v4.u32 [%rd8+128], {%r132, %r133, %r134, %r135};
  st.global.v4.u32 [%rd8+144], {%r136, %r137, %r138, %r139};
  st.global.v4.u32 [%rd8+160], {%r140, %r141, %r142, %r143};
  st.global.v4.u32 [%rd8+176], {%r144, %r145, %r146, %r147};
  st.global.v4.u32 [%rd8+192], {%r148, %r149, %r150, %r151};
  st.global.v4.u32 [%rd8+208], {%r152, %r153, %r154, %r155};
  st.global.v4.u32 [%rd8+224], {%r156, %r157, %r158, %r159};
  st.global.v4.u32 [%rd8+240], {%r160, %r161, %r162, %r163};
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @%p1 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r8, 64;
DONE:
  ret;
}
"""


def run(a: np.ndarray, b: np.ndarray, m: int, n: int, twice: int = 0, poke: int = 0,
        src: str = SRC, desc: int | None = None) -> np.ndarray:
    """The 128 lanes x 64 columns after the kernel, as float32."""
    img = image(f16(a), f16(b.T))
    mem = GlobalMemory()
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 64 * 4)
    load_ptx(src).launch("k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                                       smem_desc(B_START, LBO, SBO),
                                       idesc(n, m=m) if desc is None else desc, twice, poke],
                         mem, gpu="B200")
    return mem.from_device(po, np.float32, (128, 64))


def placed(d: np.ndarray) -> np.ndarray:
    """D (M x N) in Tensor Memory, lanes x columns, by hand from the layout figures."""
    m, n = d.shape
    out = np.zeros((128, 64), np.float32)
    parts = 128 // m                     # 1 (layout D), 2 (E) or 4 (G) column blocks
    w = n // parts
    for p in range(parts):
        out[m * p:m * (p + 1), :w] = d[:, w * p:w * (p + 1)]
    return out


def operands(m: int, n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(-4, 5, (m, 16)), rng.integers(-4, 5, (16, n))


@pytest.mark.parametrize("m,n", [(128, 64), (64, 64), (64, 128), (32, 64), (32, 128)])
def test_ws_d_in_its_data_path_layout(m, n):
    a, b = operands(m, n)
    assert np.array_equal(run(a, b, m, n), placed((a @ b).astype(np.float32)))


def test_use_reads_the_filled_b():
    a, b = operands(64, 64)
    assert np.array_equal(run(a, b, 64, 64, twice=1),
                          placed((2 * (a @ b)).astype(np.float32)))


def test_use_after_b_changed_in_shared_memory_is_an_error():
    a, b = operands(64, 64)
    b[0:2, 0] = 3                        # the first 4 bytes of B: row n = 0, k = 0 and 1
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ \('tcgen05.mma.ws"
                                             r".*collector::b1::use: collector buffer b1 holds "
                                             r"the B filled on line \d+ \(other codes\)"):
        run(a, b, 64, 64, twice=1, poke=1)
    # with ::discard the second mma reads shared memory: D = A B + A B'
    src = SRC.replace("collector::b1::use", "collector::b1::discard")
    b2 = b.copy()
    b2[0:2, 0] = 0
    assert np.array_equal(run(a, b, 64, 64, twice=1, poke=1, src=src),
                          placed((a @ b + a @ b2).astype(np.float32)))


@pytest.mark.parametrize("first", ["collector::b1::lastuse", "collector::b1::discard",
                                   "collector::b2::fill"])
def test_use_without_a_valid_fill_is_an_error(first):
    a, b = operands(64, 64)
    src = SRC.replace("collector::b1::fill", first)
    if first.endswith("use"):            # lastuse needs a fill of its own: none here
        want = r"collector::b1::lastuse with no valid fill"
    else:
        want = r"collector::b1::use with no valid fill of collector buffer b1"
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*" + want):
        run(a, b, 64, 64, twice=1, src=src)


def test_lastuse_ends_the_fill():
    a, b = operands(64, 64)
    src = SRC.replace("collector::b1::use", "collector::b1::lastuse")
    assert np.array_equal(run(a, b, 64, 64, twice=1, src=src),
                          placed((2 * (a @ b)).astype(np.float32)))
    # the default qualifier is .collector::b0::discard: a fill of b1 survives it
    src = SRC.replace(".collector::b1::use", "")
    assert np.array_equal(run(a, b, 64, 64, twice=1, src=src),
                          placed((2 * (a @ b)).astype(np.float32)))


def test_ws_shapes_and_forms_refused():
    a, b = operands(64, 64)
    with pytest.raises(ExecutionError, match=r"line \d+ .*N = 8 is not a kind::f16 shape of "
                                             r"tcgen05.mma.ws with M = 64"):
        run(a, b[:, :8], 64, 8)
    with pytest.raises(ExecutionError, match=r"line \d+ .*M = 256 is not a tcgen05.mma.ws"):
        run(a, b, 64, 64, desc=idesc(64, m=256))
    # bits 30-31 (maximum shift for B reuse) are accepted under .ws
    assert np.array_equal(run(a, b, 64, 64, desc=idesc(64, m=64) | (3 << 30)),
                          placed((a @ b).astype(np.float32)))
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*zero-column-mask-desc .*refused: "
                                                  r"PTX ISA 9.7.16.4.3 .*Example 2"):
        load_ptx(SRC.replace("[%r8], %rd4, %rd5, %r9, %p3;\n  ld.param.u32 %r10",
                             "[%r8], %rd4, %rd5, %r9, %p3, %rd4;\n  ld.param.u32 %r10"))
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*one \.collector::"):
        load_ptx(SRC.replace("collector::b1::fill", "collector::b4::fill"))
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*\.collector::b1::fill: the B "
                                                  r"collector buffers belong to tcgen05.mma.ws"):
        load_ptx(SRC.replace("mma.ws.cta_group::1.kind::f16.collector::b1::fill",
                             "mma.cta_group::1.kind::f16.collector::b1::fill"))


def test_ws_kernel_is_accepted_by_ptxas(tmp_path):
    for q in ("collector::b1::use", "collector::b0::lastuse", "collector::b3::discard"):
        assert_ptxas_accepts(tmp_path, SRC.replace("collector::b1::use", q))
    for kind in KINDS:
        assert_ptxas_accepts(tmp_path, SRC.replace("kind::f16", f"kind::{kind}"))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("m", [32, 64])
def test_ws_other_kinds_small_integers_exact(kind, m):
    k, eb, code, dcode, enc = KINDS[kind]
    rng = np.random.default_rng(6)
    a = rng.integers(-4, 5, (m, k))
    b = rng.integers(-4, 5, (k, 64))
    img = image_bytes(_bytes(enc(a), eb), _bytes(enc(b.T), eb), eb)
    mem = GlobalMemory()
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 64 * 4)
    load_ptx(SRC.replace("kind::f16", f"kind::{kind}")).launch(
        "k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                      smem_desc(B_START, LBO, SBO),
                      idesc(64, m=m, atype=code, btype=code, dtype=dcode), 0, 0], mem,
        gpu="B200")
    got = mem.from_device(po, np.int32 if kind == "i8" else np.float32, (128, 64))
    assert np.array_equal(got, placed((a @ b).astype(np.float32)).astype(got.dtype))
