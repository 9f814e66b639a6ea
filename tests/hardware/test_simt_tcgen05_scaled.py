"""Block-scaled tcgen05.mma (hardware/simt/tcgen05_scaled.py) and tcgen05.cp
(hardware/simt/tcgen05_cp.py) against independent references.

The sm_100a kernel below (accepted by ``ptxas -arch=sm_100a`` for each kind and cp shape
the tests substitute) copies a shared-memory image built here into shared memory,
allocates 256 columns of Tensor Memory, lets one thread move the two scale-factor tiles
from shared memory into columns 128 and 136 with ``tcgen05.cp``, issue one block-scaled
tcgen05.mma into columns 0-15 and commit it to an mbarrier; every warp then loads its
lane quarter of D. The image follows this file's reading of PTX ISA 9.1: A and B K-major
without swizzling (rows of 32 bytes: 32 FP8 codes or 64 E2M1 codes two to a byte, the
lower K in the low nibble), each scale tile 32 rows of 16 bytes whose row r, bytes
4 c .. 4 c + 3 are the scales of row 32 c + r (9.7.16.10.7, Figures 231-233); the
descriptors are assembled field by field from Tables 40, 43 and 44. Expected values:
small integers and powers of two whose products and sums are exact in float64, and the
refimpl block-scaled model (mma_block_scaled on MXArray / NVFP4Array) as a second
reference."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import ExecutionError, GlobalMemory, LaunchError, UnsupportedPtxError, load_ptx
from hardware.simt.tcgen05_cp import destination_lanes
from hardware.simt.tcgen05_scaled import decode_scaled_idesc
from refimpl import formats
from refimpl.matmul import mma_block_scaled
from refimpl.scaling import MXArray, NVFP4Array

SRC = """.version 8.7
.target sm_100a
.address_size 64

.visible .entry k(.param .u64 img, .param .u32 nwords, .param .u64 out,
                  .param .u64 adesc, .param .u64 bdesc, .param .u32 idesc, .param .u32 acc,
                  .param .u64 sfadesc, .param .u64 sfbdesc)
{
  .reg .pred %p<4>;
  .reg .b32 %r<48>;
  .reg .b64 %rd<16>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 slot;
  .shared .align 1024 .b8 tile[16384];

  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra ALLOCATED;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 256;
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
  mov.u32 %r13, tile;
  shr.u32 %r13, %r13, 4;
  cvt.u64.u32 %rd9, %r13;
  ld.param.u64 %rd4, [adesc];
  ld.param.u64 %rd5, [bdesc];
  ld.param.u64 %rd10, [sfadesc];
  ld.param.u64 %rd11, [sfbdesc];
  add.u64 %rd4, %rd4, %rd9;
  add.u64 %rd5, %rd5, %rd9;
  add.u64 %rd10, %rd10, %rd9;
  add.u64 %rd11, %rd11, %rd9;
  add.u32 %r14, %r8, 128;
  add.u32 %r15, %r8, 136;
  tcgen05.cp.cta_group::1.32x128b.warpx4 [%r14], %rd10;
  tcgen05.cp.cta_group::1.32x128b.warpx4 [%r15], %rd11;
  ld.param.u32 %r9, [idesc];
  ld.param.u32 %r10, [acc];
  setp.ne.u32 %p3, %r10, 0;
  tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%r8], %rd4, %rd5, %r9, [%r14], [%r15], %p3;
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  tcgen05.fence::after_thread_sync;
  shl.b32 %r11, %r2, 21;
  add.u32 %r12, %r8, %r11;
  tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28, %r29, %r30, %r31, %r32, %r33, %r34, %r35}, [%r12];
  tcgen05.wait::ld.sync.aligned;
  ld.param.u64 %rd6, [out];
  mul.wide.u32 %rd7, %r1, 64;
  add.u64 %rd8, %rd6, %rd7;
  st.global.v4.u32 [%rd8], {%r20, %r21, %r22, %r23};
  st.global.v4.u32 [%rd8+16], {%r24, %r25, %r26, %r27};
  st.global.v4.u32 [%rd8+32], {%r28, %r29, %r30, %r31};
  st.global.v4.u32 [%rd8+48], {%r32, %r33, %r34, %r35};
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @%p1 bra DONE;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r8, 256;
DONE:
  ret;
}
"""
MMA = "kind::mxf8f6f4.block_scale.scale_vec::1X"
LBO, SBO, B_START, SFA_START, SFB_START = 128, 256, 4096, 8192, 10240
N = 16


def smem_desc(start: int, lbo: int, sbo: int) -> int:
    """Table 40: start, LBO, SBO (each >> 4), the constant 0b001 at bits 46-48."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | \
        (((sbo >> 4) & 0x3FFF) << 32) | (1 << 46)


def idesc(kind: str, n: int = N, atype: int = 0, btype: int = 0, ue8m0: int = 1,
          sfa: int = 0, sfb: int = 0, neg_a: int = 0, m: int = 128) -> int:
    """Tables 43 and 44 field by field (the FP4 kinds: E2M1 = 1)."""
    if kind != "mxf8f6f4":
        atype = btype = 1
    return (sfb << 4) | (atype << 7) | (btype << 10) | (neg_a << 13) | ((n >> 3) << 17) | \
        (ue8m0 << 23) | ((m >> 7) << 27) | (sfa << 29)


def scale_tile(codes: np.ndarray, rows: int = 32) -> np.ndarray:
    """(R, 4) scale bytes (R <= 128 rows of A or columns of B, one byte per scale slot)
    -> the 32 x 16-byte tile: row r, bytes 4 c + j = codes[32 c + r, j]."""
    tile = np.zeros((rows, 16), np.uint8)
    for i in range(codes.shape[0]):
        tile[i % 32, 4 * (i // 32):4 * (i // 32) + 4] = codes[i]
    if rows == 128:            # the 128x128b copy: four copies of the tile, one a quarter
        tile = np.tile(tile[:32], (4, 1))
    return tile


def image(a_rows: np.ndarray, b_rows: np.ndarray, sfa: np.ndarray,
          sfb: np.ndarray) -> np.ndarray:
    """A (128 x 32 bytes), B (N x 32 bytes, K-major) and the scale tiles placed byte by
    byte."""
    img = np.zeros(16384, np.uint8)
    for start, mat in ((0, a_rows), (B_START, b_rows)):
        for r in range(mat.shape[0]):
            for byte in range(32):
                addr = start + (r // 8) * SBO + (byte // 16) * LBO + (r % 8) * 16 + byte % 16
                img[addr] = mat[r, byte]
    for start, tile in ((SFA_START, sfa), (SFB_START, sfb)):
        img[start:start + tile.size] = tile.reshape(-1)
    return img


def run(a_rows, b_rows, sfa_tile, sfb_tile, desc: int, mma: str = MMA, cp: str | None = None,
        gpu: str = "B200", src: str | None = None) -> np.ndarray:
    text = (src or SRC).replace(MMA, mma)
    if cp is not None:
        text = text.replace("32x128b.warpx4", cp)
    mem = GlobalMemory()
    img = image(a_rows, b_rows, sfa_tile, sfb_tile)
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * N * 4)
    load_ptx(text).launch("k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                                        smem_desc(B_START, LBO, SBO), desc, 0,
                                        smem_desc(SFA_START, 0, 128),
                                        smem_desc(SFB_START, 0, 128)], mem, gpu=gpu)
    return mem.from_device(po, np.float32, (128, N))


def pack_fp4(codes: np.ndarray) -> np.ndarray:
    """(rows, 64) E2M1 codes -> (rows, 32) bytes, the lower K in the low nibble."""
    c = codes.astype(np.uint8)
    return c[:, 0::2] | (c[:, 1::2] << 4)


E8M0_ONE = 127


def test_descriptor_fields_by_hand():
    # Triton's four dot_scaled descriptors (dot_scaled_e4m3.ptx): 0x08A10000 is bit 23
    # (UE8M0), N >> 3 = 16 at bits 17-22, M >> 7 = 1 at bit 27; the next ones add the
    # scale factor IDs 1, 2, 3 at bits 4-5 (B) and 29-30 (A)
    for i, word in enumerate((0x08A10000, 0x28A10010, 0x48A10020, 0x68A10030)):
        d = decode_scaled_idesc("mxf8f6f4", word)
        assert (d.m, d.n, d.scale_type, d.sfa_id, d.sfb_id, d.atype, d.btype) == \
            (128, 128, "ue8m0", i, i, "e4m3", "e4m3")
    d = decode_scaled_idesc("mxf8f6f4", (5 << 7) | (3 << 10) | (1 << 23) | (1 << 27))
    assert (d.atype, d.btype) == ("e2m1", "e2m3")
    d = decode_scaled_idesc("mxf4nvf4", (1 << 7) | (1 << 10) | (32 << 17) | (1 << 27) | (2 << 4))
    assert (d.atype, d.btype, d.scale_type, d.n, d.sfb_id) == ("e2m1", "e2m1", "ue4m3", 256, 2)
    with pytest.raises(ValueError, match="reserved bit"):
        decode_scaled_idesc("mxf8f6f4", 0x08A10000 | (1 << 24))
    with pytest.raises(ValueError, match="reserved bit"):
        decode_scaled_idesc("mxf4", (1 << 7) | (1 << 10) | (1 << 23) | (1 << 12))
    with pytest.raises(ValueError, match="UE4M3, which only kind::mxf4nvf4"):
        decode_scaled_idesc("mxf8f6f4", 0x08A10000 & ~(1 << 23))
    with pytest.raises(ValueError, match="cannot transpose"):
        decode_scaled_idesc("mxf4", (1 << 7) | (1 << 10) | (1 << 23) | (1 << 15))
    with pytest.raises(ValueError, match="atype code 2"):
        decode_scaled_idesc("mxf8f6f4", (2 << 7) | (1 << 23))


def test_cp_destination_lanes_by_hand():
    assert destination_lanes("128x128b", None).tolist() == [list(range(128))]
    assert destination_lanes("4x256b", None, 40).tolist() == [[40, 41, 42, 43]]
    x4 = destination_lanes("32x128b", "warpx4")
    assert x4.shape == (4, 32) and x4[:, 5].tolist() == [5, 37, 69, 101]
    # 02_13: pairs (0, 2), (1, 3): the first warp of a pair gets rows 0-31
    p = destination_lanes("64x128b", "warpx2::02_13")
    assert p[:, 0].tolist() == [0, 32] and p[:, 33].tolist() == [65, 97]
    p = destination_lanes("64x128b", "warpx2::01_23")
    assert p[:, 0].tolist() == [0, 64] and p[:, 33].tolist() == [33, 97]


def _mx_case(rng):
    a = rng.integers(-3, 4, (128, 32)).astype(np.float64)
    b = rng.integers(-3, 4, (N, 32)).astype(np.float64)       # B row n = column n
    ea = rng.integers(-2, 3, 128)
    eb = rng.integers(-2, 3, N)
    return a, b, ea, eb


@pytest.mark.parametrize("sid", [0, 3])
def test_mxf8f6f4_e4m3_exact_and_model(sid):
    rng = np.random.default_rng(sid)
    a, b, ea, eb = _mx_case(rng)
    ca, cb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (a, b))
    # the chosen byte holds the scale, the other bytes a scale of 2^100 that must not be used
    sa = np.full((128, 4), E8M0_ONE + 100, np.uint8)
    sb = np.full((N, 4), E8M0_ONE + 100, np.uint8)
    sa[:, sid], sb[:, sid] = E8M0_ONE + ea, E8M0_ONE + eb
    got = run(ca, cb, scale_tile(sa), scale_tile(sb), idesc("mxf8f6f4", sfa=sid, sfb=sid))
    exact = (a * np.ldexp(1.0, ea)[:, None]) @ (b * np.ldexp(1.0, eb)[:, None]).T
    assert np.array_equal(got, exact)
    model = mma_block_scaled(MXArray(ca, sa[:, sid:sid + 1], "e4m3", 32, 1),
                             MXArray(cb.T.copy(), sb[:, sid:sid + 1].T.copy(), "e4m3", 32, 0))
    assert np.array_equal(got, model)


def test_mxf8f6f4_model_on_random_e4m3_e5m2_with_negate():
    rng = np.random.default_rng(7)
    ca = formats.encode(rng.standard_normal((128, 32)) * 8, "e4m3").astype(np.uint8)
    cb = formats.encode(rng.standard_normal((N, 32)), "e5m2").astype(np.uint8)
    sa = rng.integers(110, 140, (128, 4)).astype(np.uint8)
    sb = rng.integers(110, 140, (N, 4)).astype(np.uint8)
    got = run(ca, cb, scale_tile(sa), scale_tile(sb),
              idesc("mxf8f6f4", atype=0, btype=1, sfa=1, sfb=2, neg_a=1))
    neg = formats.encode(-formats.decode(ca, "e4m3"), "e4m3").astype(np.uint8)
    model = mma_block_scaled(MXArray(neg, sa[:, 1:2], "e4m3", 32, 1),
                             MXArray(cb.T.copy(), sb[:, 2:3].T.copy(), "e5m2", 32, 0))
    assert np.array_equal(got, model)


def test_mxf8f6f4_e4m3_times_padded_e2m1_exact_and_model():
    """kind::mxf8f6f4 with an E2M1 B: each 16-byte chunk of a row holds 16 elements in its
    first 8 bytes (two to a byte, the lower K in the low nibble) and 8 bytes of padding,
    here filled with 0xFF that must not be read (9.7.16.10.4.4)."""
    rng = np.random.default_rng(9)
    a, b, ea, eb = _mx_case(rng)
    ca = formats.encode(a, "e4m3").astype(np.uint8)
    cb = formats.encode(b, "e2m1").astype(np.uint8)
    rows = np.full((N, 32), 0xFF, np.uint8)
    for chunk in range(2):
        rows[:, 16 * chunk:16 * chunk + 8] = pack_fp4(cb[:, 16 * chunk:16 * chunk + 16])
    sa = np.zeros((128, 4), np.uint8)
    sb = np.zeros((N, 4), np.uint8)
    sa[:, 1], sb[:, 1] = E8M0_ONE + ea, E8M0_ONE + eb
    got = run(ca, rows, scale_tile(sa), scale_tile(sb),
              idesc("mxf8f6f4", atype=0, btype=5, sfa=1, sfb=1))
    exact = (a * np.ldexp(1.0, ea)[:, None]) @ (b * np.ldexp(1.0, eb)[:, None]).T
    assert np.array_equal(got, exact)
    model = mma_block_scaled(MXArray(ca, sa[:, 1:2], "e4m3", 32, 1),
                             MXArray(cb.T.copy(), sb[:, 1:2].T.copy(), "e2m1", 32, 0))
    assert np.array_equal(got, model)


def test_mxf4_two_scales_per_row_exact_and_model():
    rng = np.random.default_rng(3)
    va = rng.choice([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0], (128, 64))
    vb = rng.choice([-1.0, 0.0, 0.5, 2.0, 4.0, 6.0], (N, 64))
    ca, cb = (formats.encode(x, "e2m1").astype(np.uint8) for x in (va, vb))
    ea, eb = rng.integers(-3, 4, (128, 2)), rng.integers(-3, 4, (N, 2))
    sa = np.zeros((128, 4), np.uint8)
    sb = np.zeros((N, 4), np.uint8)
    sa[:, 2:4], sb[:, 2:4] = E8M0_ONE + ea, E8M0_ONE + eb     # scale factor ID 2
    got = run(pack_fp4(ca), pack_fp4(cb), scale_tile(sa), scale_tile(sb),
              idesc("mxf4", sfa=2, sfb=2), mma="kind::mxf4.block_scale.scale_vec::2X")
    sa_full = np.repeat(np.ldexp(1.0, ea), 32, axis=1)
    sb_full = np.repeat(np.ldexp(1.0, eb), 32, axis=1)
    assert np.array_equal(got, (va * sa_full) @ (vb * sb_full).T)
    model = mma_block_scaled(MXArray(ca, sa[:, 2:4], "e2m1", 32, 1),
                             MXArray(cb.T.copy(), sb[:, 2:4].T.copy(), "e2m1", 32, 0))
    assert np.array_equal(got, model)


def test_nvf4_four_ue4m3_scales_per_row_exact_and_model():
    rng = np.random.default_rng(4)
    va = rng.choice([-6.0, -1.5, -0.5, 0.0, 1.0, 2.0, 4.0], (128, 64))
    vb = rng.choice([-3.0, -1.0, 0.0, 0.5, 1.5, 6.0], (N, 64))
    ca, cb = (formats.encode(x, "e2m1").astype(np.uint8) for x in (va, vb))
    scales = np.array([0.25, 0.75, 1.0, 1.5, 3.0, 8.0])
    fa, fb = rng.choice(scales, (128, 4)), rng.choice(scales, (N, 4))
    sa, sb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (fa, fb))
    got = run(pack_fp4(ca), pack_fp4(cb), scale_tile(sa), scale_tile(sb),
              idesc("mxf4nvf4", ue8m0=0), mma="kind::mxf4nvf4.block_scale.scale_vec::4X")
    exact = (va * np.repeat(fa, 16, axis=1)) @ (vb * np.repeat(fb, 16, axis=1)).T
    assert np.array_equal(got, exact)
    model = mma_block_scaled(NVFP4Array(ca, sa, 1.0, axis=1),
                             NVFP4Array(cb.T.copy(), sb.T.copy(), 1.0, axis=0))
    assert np.array_equal(got, model)


def test_nvf4_n8_reads_eight_lanes_of_one_scale_column():
    rng = np.random.default_rng(8)
    va = rng.choice([-1.0, 0.5, 2.0], (128, 64))
    vb = rng.choice([-6.0, 1.0, 1.5], (N, 64))
    fa, fb = rng.choice([0.5, 1.25, 2.0], (128, 4)), rng.choice([0.375, 1.0, 4.0], (N, 4))
    sa, sb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (fa, fb))
    sb[8:] = 0x7F            # NaN scales of columns 8-15 of B, which N = 8 does not read
    got = run(pack_fp4(formats.encode(va, "e2m1")), pack_fp4(formats.encode(vb, "e2m1")),
              scale_tile(sa), scale_tile(sb), idesc("mxf4nvf4", n=8, ue8m0=0),
              mma="kind::mxf4nvf4.block_scale.scale_vec::4X")
    exact = (va * np.repeat(fa, 16, axis=1)) @ (vb * np.repeat(fb, 16, axis=1)).T
    assert np.array_equal(got[:, :8], exact[:, :8]) and not got[:, 8:].any()


def _ones_case():
    a = np.full((128, 32), formats.encode(np.array(1.0), "e4m3"), np.uint8)
    b = np.full((N, 32), formats.encode(np.array(1.0), "e4m3"), np.uint8)
    sa = np.full((128, 4), E8M0_ONE, np.uint8)
    return a, b, sa


def test_cp_128x128b_needs_duplicated_quarters():
    a, b, sa = _ones_case()
    tile = scale_tile(sa, rows=128)
    got = run(a, b, tile, tile, idesc("mxf8f6f4"), cp="128x128b")
    assert np.array_equal(got, np.full((128, N), 32.0, np.float32))
    bad = tile.copy()
    bad[64 + 5, 4 * 1 + 0] = E8M0_ONE + 1      # lane 69, column 1: row 37 of A in quarter 2
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\).*line \d+.*scale factors "
                                             r"A of row 37 differ between lane 5 and lane 69.*"
                                             r"duplicated to all four"):
        run(a, b, bad, tile, idesc("mxf8f6f4"), cp="128x128b")


def test_ld_of_copied_scales_before_commit_is_a_race():
    a, b, sa = _ones_case()
    # warp 0 loads the copied A scales after the commit, without waiting on the mbarrier
    src = SRC.replace("ISSUED:\n", "ISSUED:\n  @%p1 bra LOADED;\n  add.u32 %r14, %r8, 128;\n"
                      "  tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r40}, [%r14];\nLOADED:\n")
    with pytest.raises(ExecutionError, match=r"line \d+.*race: tcgen05.ld reads.*"
                                             r"the destination of the tcgen05.cp on line"):
        run(a, b, scale_tile(sa), scale_tile(sa), idesc("mxf8f6f4"), src=src)


def test_runtime_descriptor_errors_name_thread_and_line():
    a, b, sa = _ones_case()
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\).*line \d+.*scale factor "
                                             r"A ID 1 is not one of \(0, 2\)"):
        run(pack_fp4(np.zeros((128, 64))), pack_fp4(np.zeros((N, 64))), scale_tile(sa),
            scale_tile(sa), idesc("mxf4", sfa=1), mma="kind::mxf4.block_scale.scale_vec::2X")
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\).*N = 264 is not a "
                                             r"kind::mxf4nvf4 shape"):
        run(a, b, scale_tile(sa), scale_tile(sa), idesc("mxf4nvf4", n=264, ue8m0=0),
            mma="kind::mxf4nvf4.block_scale.scale_vec::4X")


def test_unmodelled_forms_are_refused_clearly():
    a, b, sa = _ones_case()
    t = scale_tile(sa)
    with pytest.raises(UnsupportedPtxError, match="UE8M0 scales per row"):
        run(a, b, t, t, idesc("mxf4nvf4", ue8m0=1),
            mma="kind::mxf4nvf4.block_scale.scale_vec::4X")
    with pytest.raises(UnsupportedPtxError, match="e2m3 x e4m3 inputs: the padded"):
        run(a, b, t, t, idesc("mxf8f6f4", atype=3))
    with pytest.raises(UnsupportedPtxError, match="decompressing tcgen05.cp"):
        run(a, b, t, t, idesc("mxf8f6f4"), cp="128x128b.b8x16.b4x16_p64")
    with pytest.raises(UnsupportedPtxError, match=r"tcgen05.cp.64x128b takes .warpx2::02_13 "
                                                  r"or .warpx2::01_23"):
        run(a, b, t, t, idesc("mxf8f6f4"), cp="64x128b")
    with pytest.raises(UnsupportedPtxError, match=r"kind::mxf4nvf4.block_scale takes"):
        load_ptx(SRC.replace(MMA, "kind::mxf4nvf4.block_scale"))
    with pytest.raises(LaunchError, match="no block-scaled preset for kind::mxf8f6f4"):
        run(a, b, t, t, idesc("mxf8f6f4"), gpu="H100")


A_FROM_TMEM = ("  tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%r8], %rd4, "
               "%rd5, %r9, [%r14], [%r15], %p3;",
               "  add.u32 %r16, %r8, 144;\n  tcgen05.cp.cta_group::1.128x256b [%r16], %rd4;\n"
               "  tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%r8], "
               "[%r16], %rd5, %r9, [%r14], [%r15], %p3;")


@pytest.mark.parametrize("kind", ["mxf8f6f4", "mxf4"])
def test_a_from_tensor_memory_copied_by_cp_128x256b(kind):
    """tcgen05.cp.128x256b with A's descriptor puts row r of A in lane r, its 32 bytes in
    8 consecutive cells: the [a-tmem] layout (the lower bytes first); the product is the
    one with A in shared memory."""
    rng = np.random.default_rng(21)
    if kind == "mxf8f6f4":
        a, b, ea, eb = _mx_case(rng)
        rows_a, rows_b = (formats.encode(x, "e4m3").astype(np.uint8) for x in (a, b))
        mma, vec = MMA, 1
    else:
        a = rng.choice([-2.0, -0.5, 0.0, 1.0, 3.0], (128, 64))
        b = rng.choice([-1.0, 0.0, 0.5, 4.0], (N, 64))
        rows_a, rows_b = (pack_fp4(formats.encode(x, "e2m1")) for x in (a, b))
        ea, eb = rng.integers(-2, 3, 128), rng.integers(-2, 3, N)
        mma, vec = "kind::mxf4.block_scale.scale_vec::2X", 2
    sa = np.zeros((128, 4), np.uint8)
    sb = np.zeros((N, 4), np.uint8)
    sa[:, :vec], sb[:, :vec] = (E8M0_ONE + ea)[:, None], (E8M0_ONE + eb)[:, None]
    src = SRC.replace(*A_FROM_TMEM)
    got = run(rows_a, rows_b, scale_tile(sa), scale_tile(sb), idesc(kind), mma=mma, src=src)
    exact = (a * np.ldexp(1.0, ea)[:, None]) @ (b * np.ldexp(1.0, eb)[:, None]).T
    assert np.array_equal(got, exact)


# the kernel above with one thread's tcgen05.cp [taddr + (lane << 16)], adesc in place of
# the scale copies and the mma (idesc carries the lane); D's columns 0-15 are read back
_ISSUE = SRC[SRC.index("  mov.u32 %r13, tile;"):SRC.index("ISSUED:")]
CP_SRC = SRC.replace(_ISSUE, """  mov.u32 %r13, tile;
  shr.u32 %r13, %r13, 4;
  cvt.u64.u32 %rd9, %r13;
  ld.param.u64 %rd4, [adesc];
  add.u64 %rd4, %rd4, %rd9;
  ld.param.u32 %r9, [idesc];
  shl.b32 %r9, %r9, 16;
  add.u32 %r14, %r8, %r9;
  tcgen05.cp.cta_group::1.128x256b [%r14], %rd4;
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
""")


@pytest.mark.parametrize("shape", ["128x256b", "4x256b", "128x128b", "64x128b.warpx2::02_13",
                                   "64x128b.warpx2::01_23", "32x128b.warpx4"])
def test_cp_shapes_place_rows_as_the_isa_says(shape):
    """One thread's tcgen05.cp of a source matrix (rows of 16 or 32 bytes, K-major without
    swizzling: chunk c of row r at 16 (r % 8) + 256 (r / 8) + 128 c), read back by every
    warp's tcgen05.ld.32x32b.x16 of its lane quarter (columns 0-15)."""
    rows, bits = (int(x) for x in shape.split(".")[0].rstrip("b").split("x"))
    data = np.random.default_rng(rows + bits).integers(0, 2 ** 32, (rows, bits // 32),
                                                       dtype=np.uint32)
    img = np.zeros(16384, np.uint8)
    for r in range(rows):
        for c in range(bits // 128):
            at = 16 * (r % 8) + 256 * (r // 8) + 128 * c
            img[at:at + 16] = data[r, 4 * c:4 * c + 4].view(np.uint8)
    lane = 8 if shape == "4x256b" else 0
    mem = GlobalMemory()
    pi, po = mem.to_device(img.view(np.uint32)), mem.calloc(128 * N * 4)
    load_ptx(CP_SRC.replace("128x256b", shape)).launch(
        "k", 1, 128, [pi, img.size // 4, po, smem_desc(0, 128, 256), 0, lane, 0, 0, 0], mem,
        gpu="B200")
    got = mem.from_device(po, np.uint32, (128, N))
    want = np.zeros((128, N), np.uint32)
    lanes = np.arange(128)
    if shape in ("128x256b", "128x128b"):
        want[:, :bits // 32] = data
    elif shape == "4x256b":
        want[8:12, :8] = data
    elif shape.endswith("02_13"):      # warps 0, 2 and 1, 3 pair up: 0, 1 rows 0-31
        want[:, :4] = data[lanes % 32 + 32 * (lanes >= 64)]
    elif shape.endswith("01_23"):      # warps 0, 1 and 2, 3: each pair rows 0-63
        want[:, :4] = data[lanes % 64]
    else:
        want[:, :4] = data[lanes % 32]
    assert np.array_equal(got, want)


def test_block_scaled_shape_and_collector_errors():
    rng = np.random.default_rng(13)
    a, b, ea, eb = _mx_case(rng)
    ca, cb = (formats.encode(x, "e4m3").astype(np.uint8) for x in (a, b))
    sa = np.full((128, 4), E8M0_ONE, np.uint8)
    sb = np.full((N, 4), E8M0_ONE, np.uint8)
    # bits 27-28 hold M >> 7: M = 256 needs .cta_group::2 (Table 39)
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*M = 256 is not "
                                             r"a kind::mxf8f6f4 shape with .cta_group::1"):
        run(ca, cb, scale_tile(sa), scale_tile(sb), idesc("mxf8f6f4", m=256))
    # the A collector of the block-scaled kinds follows tcgen05.mma's rules
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*collector::a::"
                                             r"use with no valid fill of collector buffer a"):
        run(ca, cb, scale_tile(sa), scale_tile(sb), idesc("mxf8f6f4"),
            mma=MMA.replace("block_scale", "block_scale.collector::a::use"))
    got = run(ca, cb, scale_tile(sa), scale_tile(sb), idesc("mxf8f6f4"),
              mma=MMA.replace("block_scale", "block_scale.collector::a::fill"))
    assert np.array_equal(got, a @ b.T)
