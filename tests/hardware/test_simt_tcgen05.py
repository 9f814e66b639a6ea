"""tcgen05.mma and tcgen05.commit (hardware/simt/tcgen05.py) against independent
references.

A hand-written sm_100a kernel (tests/hardware/data/tcgen05/mma_f16.ptx, accepted by
``ptxas -arch=sm_100a``) copies a shared-memory image built here into shared memory,
allocates 32 columns of Tensor Memory, lets one thread issue tcgen05.mma and commit it to
an mbarrier, and has every warp load its lane quarter of D with tcgen05.ld.32x32b.x8.
The image follows this file's own reading of the PTX ISA's canonical K-major layout
without swizzling (9.7.16.3.3: core matrices of 8 rows x 16 bytes, LBO between the two
16-byte columns of K, SBO between groups of 8 rows), and the descriptors are assembled
from Tables 40 and 42 field by field."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hardware.simt import (DeadlockError, ExecutionError, GlobalMemory, LaunchError,
                           UnsupportedPtxError, load_ptx)
from hardware.simt.tcgen05 import decode_idesc, decode_smem_descriptor
from refimpl import formats
from refimpl import matmul as mm

SRC = (Path(__file__).parent / "data" / "tcgen05" / "mma_f16.ptx").read_text()
LBO, SBO, B_START = 128, 256, 4096


def smem_desc(start: int, lbo: int, sbo: int, swizzle_code: int = 0) -> int:
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | \
        (((sbo >> 4) & 0x3FFF) << 32) | (1 << 46) | (swizzle_code << 61)


def idesc(n: int, m: int = 128, atype: int = 0, btype: int = 0, dtype: int = 1,
          neg_a: int = 0, neg_b: int = 0) -> int:
    return (dtype << 4) | (atype << 7) | (btype << 10) | (neg_a << 13) | (neg_b << 14) | \
        ((n >> 3) << 17) | ((m >> 4) << 24)


def image(a_codes: np.ndarray, b_codes: np.ndarray) -> np.ndarray:
    """A (128 x 16) and B (N x 16, K-major) 16-bit codes placed element by element."""
    img = np.zeros(8192, np.uint8)
    for start, mat in ((0, a_codes), (B_START, b_codes)):
        for r in range(mat.shape[0]):
            for k in range(16):
                addr = start + (r // 8) * SBO + (k // 8) * LBO + (r % 8) * 16 + (k % 8) * 2
                img[addr:addr + 2] = np.array([mat[r, k]], np.uint16).view(np.uint8)
    return img


def run(a_codes: np.ndarray, b_codes: np.ndarray, d_init: bool = False, gpu: str = "B200",
        src: str = SRC, desc: int | None = None, n: int = 8) -> np.ndarray:
    mem = GlobalMemory()
    img = image(a_codes, b_codes)
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 8 * 4)
    desc = idesc(n) if desc is None else desc
    load_ptx(src).launch("k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                                       smem_desc(B_START, LBO, SBO), desc, int(d_init)],
                         mem, gpu=gpu)
    return mem.from_device(po, np.uint32, (128, 8))


def assert_ptxas_accepts(tmp_path: Path, src: str) -> None:
    """``ptxas -arch=sm_100a`` assembles ``src`` (skipped without ptxas)."""
    import shutil
    import subprocess
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas")
    f = tmp_path / "k.ptx"
    f.write_text(src)
    r = subprocess.run(["ptxas", "-arch=sm_100a", str(f), "-o", "/dev/null"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def f16(x: np.ndarray) -> np.ndarray:
    return formats.encode(np.asarray(x, np.float32), "fp16").astype(np.uint16)


def test_descriptor_fields():
    d = decode_idesc("f16", idesc(64, atype=1, btype=1, neg_b=1))
    assert (d.m, d.n, d.atype, d.btype, d.dtype, d.neg_b) == (128, 64, "bf16", "bf16", "f32", True)
    s = decode_smem_descriptor(smem_desc(0x1230, 128, 1024, 2))
    assert (s.start, s.lbo, s.sbo, s.swizzle) == (0x1230, 128, 1024, 128)
    # the base offset (bits 49-51) applies to swizzled layouts only: Triton sets it from
    # the address of an unswizzled scale tile too (0x10200 >> 7 & 7 = 4)
    assert decode_smem_descriptor(smem_desc(0x10200, 0, 128) | (4 << 49)).base_offset == 0
    assert decode_smem_descriptor(smem_desc(0, 16, 1024, 2) | (4 << 49)).base_offset == 4
    with pytest.raises(ValueError, match="0b001"):
        decode_smem_descriptor(smem_desc(0, 16, 16) & ~(1 << 46))
    with pytest.raises(ValueError, match="mode 1"):
        decode_smem_descriptor(smem_desc(0, 16, 16, 1))


def test_small_integer_products_are_exact():
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (128, 16))
    b = rng.integers(-4, 5, (16, 8))
    out = run(f16(a), f16(b.T))
    expect = (a @ b).astype(np.float32)
    assert np.array_equal(out.view(np.float32), expect)


def test_matches_preset_and_numpy_reference():
    rng = np.random.default_rng(2)
    a = formats.decode(f16(rng.standard_normal((128, 16))), "fp16").astype(np.float64)
    b = formats.decode(f16(rng.standard_normal((16, 8))), "fp16").astype(np.float64)
    out = run(f16(a), f16(b.T)).view(np.float32)
    model = np.asarray(mm.matmul(a.astype(np.float32), b.astype(np.float32),
                                 accumulate="B200-FP16"), np.float32)
    assert np.array_equal(out, model)
    exact = a @ b                       # float64: each dot of 16 products is exact
    # the FP32 truncating accumulation errs by at most a few units of 2^-23 of the
    # largest magnitude it holds, bounded by sum |a| |b|
    assert (np.abs(out - exact) <= 2 ** -21 * (np.abs(a) @ np.abs(b))).all()


def test_enable_input_d_accumulates_previous_contents():
    a = np.ones((128, 16))
    b = np.ones((16, 8))
    # D starts at zero (fresh Tensor Memory): enable-input-d adds zero
    assert np.array_equal(run(f16(a), f16(b.T), d_init=True).view(np.float32),
                          np.full((128, 8), 16, np.float32))


def test_a_later_commit_covers_every_earlier_mma_of_its_thread(tmp_path):
    """tcgen05.commit tracks all prior asynchronous tcgen05 operations of the thread
    (PTX ISA 9.7.16.12.1): the mma committed to ``bar`` is also complete when a second
    commit, to ``bar2``, has completed, so a warp that waits on ``bar2`` alone may read
    D (as Triton's warp-specialised epilogue does)."""
    src = SRC.replace("  .shared .align 8 .b64 bar;\n",
                      "  .shared .align 8 .b64 bar;\n  .shared .align 8 .b64 bar2;\n")
    src = src.replace("  mbarrier.init.shared::cta.b64 [bar], 1;\n",
                      "  mbarrier.init.shared::cta.b64 [bar], 1;\n"
                      "  mbarrier.init.shared::cta.b64 [bar2], 1;\n")
    commit = "  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];\n"
    src = src.replace(commit, commit + commit.replace("[bar]", "[bar2]"))
    src = src.replace("mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;",
                      "mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar2], 0;")
    assert src.count("[bar2]") == 3
    assert_ptxas_accepts(tmp_path, src)
    a, b = np.ones((128, 16)), np.ones((16, 8))
    assert np.array_equal(run(f16(a), f16(b.T), src=src).view(np.float32),
                          np.full((128, 8), 16, np.float32))


def test_race_reading_d_before_the_commit_completes():
    src = SRC.replace("  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];\n",
                      "")
    src = src.replace("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;\n"
                      "  @!%p3 bra WAIT;\n", "")
    with pytest.raises(ExecutionError, match=r"race: tcgen05.ld reads .* tcgen05.mma on "
                                             r"line \d+ .*not yet committed"):
        run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), src=src)


def test_gpu_without_tcgen05_model_is_refused():
    with pytest.raises(LaunchError, match="tcgen05"):
        run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), gpu="H100")


def test_unmodelled_forms_are_refused():
    # the block-scaled kinds run (test_simt_tcgen05_scaled.py); these forms of them do not
    with pytest.raises(UnsupportedPtxError, match=r"kind::mxf8f6f4 needs .block_scale"):
        load_ptx(SRC.replace("kind::f16 [%r8], %rd4, %rd5, %r9, %p3",
                             "kind::mxf8f6f4 [%r8], %rd4, %rd5, %r9, [%r8], [%r8], %p3"))
    with pytest.raises(UnsupportedPtxError, match=r"takes .scale_vec::1X, .block32 .*not "
                                                  r"scale_vec::2X"):
        load_ptx(SRC.replace("kind::f16 [%r8], %rd4, %rd5, %r9, %p3",
                             "kind::mxf8f6f4.block_scale.scale_vec::2X [%r8], %rd4, %rd5, %r9, "
                             "[%r8], [%r8], %p3"))
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*\.ashift is refused: PTX ISA "
                                                  r"9.7.16.10.9.1 .*before or after"):
        load_ptx(SRC.replace("kind::f16 [%r8], %rd4", "kind::f16.ashift [%r8], [%r8]"))
    with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*tcgen05.mma.sp \(sparse A\)"):
        load_ptx(SRC.replace("tcgen05.mma.cta_group::1", "tcgen05.mma.sp.cta_group::1"))
    for form in ("tcgen05.mma.cta_group::", "tcgen05.alloc.cta_group::",
                 "tcgen05.commit.cta_group::", "tcgen05.dealloc.cta_group::",
                 "tcgen05.relinquish_alloc_permit.cta_group::"):
        with pytest.raises(UnsupportedPtxError, match=r"line \d+: .*\.cta_group::1 is the "
                                                      r"only CTA group modelled .*figures"):
            load_ptx(SRC.replace(form + "1", form + "2"))
    with pytest.raises(ExecutionError, match="M = 256 is not a tcgen05.mma.cta_group::1"):
        run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), desc=idesc(8, m=256))
    with pytest.raises(ExecutionError, match="N = 0"):
        run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), desc=idesc(8) & ~(0x3F << 17) | (0 << 17))


def image_bytes(a_el: np.ndarray, b_el: np.ndarray, ebytes: int) -> np.ndarray:
    """As :func:`image` for elements of ``ebytes`` bytes (arrays of little-endian byte
    rows: (rows, K, ebytes)); a row of K elements is 32 bytes, two 16-byte columns."""
    img = np.zeros(8192, np.uint8)
    per = 16 // ebytes
    for start, mat in ((0, a_el), (B_START, b_el)):
        for r in range(mat.shape[0]):
            for k in range(mat.shape[1]):
                addr = start + (r // 8) * SBO + (k // per) * LBO + (r % 8) * 16 + \
                    (k % per) * ebytes
                img[addr:addr + ebytes] = mat[r, k]
    return img


def _bytes(codes: np.ndarray, ebytes: int) -> np.ndarray:
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[ebytes]
    return np.ascontiguousarray(codes.astype(dt)).view(np.uint8).reshape(codes.shape + (ebytes,))


KINDS = {   # kind -> (K, element bytes, idesc a/b type code, d type code, encode)
    "tf32": (8, 4, 2, 1, lambda x: np.asarray(x, np.float32).view(np.uint32)),
    "f8f6f4": (32, 1, 0, 1, lambda x: formats.encode(np.asarray(x, np.float32), "e4m3")),
    "i8": (32, 1, 1, 2, lambda x: np.asarray(x, np.int8).view(np.uint8)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_other_kinds_small_integers_exact(kind):
    k, eb, code, dcode, enc = KINDS[kind]
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (128, k))
    b = rng.integers(-4, 5, (k, 8))
    img = image_bytes(_bytes(enc(a), eb), _bytes(enc(b.T), eb), eb)
    mem = GlobalMemory()
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 8 * 4)
    src = SRC.replace("kind::f16", f"kind::{kind}")
    load_ptx(src).launch("k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                                       smem_desc(B_START, LBO, SBO),
                                       idesc(8, atype=code, btype=code, dtype=dcode), 0],
                         mem, gpu="B200")
    out = mem.from_device(po, np.uint32, (128, 8))
    got = out.view(np.int32) if kind == "i8" else out.view(np.float32)
    assert np.array_equal(got, (a @ b).astype(got.dtype))


def test_kernel_ptx_is_accepted_by_ptxas(tmp_path):
    import shutil
    import subprocess
    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas")
    for kind in ("f16", *KINDS):
        f = tmp_path / "k.ptx"
        f.write_text(SRC.replace("kind::f16", f"kind::{kind}"))
        r = subprocess.run(["ptxas", "-arch=sm_100a", str(f), "-o", "/dev/null"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_f8f6f4_e4m3_uses_the_tcgen05_preset_bit_for_bit():
    k, eb, code, dcode, enc = KINDS["f8f6f4"]
    rng = np.random.default_rng(4)
    ca = enc(rng.standard_normal((128, k)) * 8)
    cb = enc(rng.standard_normal((k, 8)) * 8)
    img = image_bytes(_bytes(ca, 1), _bytes(np.ascontiguousarray(cb.T), 1), 1)
    mem = GlobalMemory()
    pi = mem.to_device(img.view(np.uint32))
    po = mem.calloc(128 * 8 * 4)
    load_ptx(SRC.replace("kind::f16", "kind::f8f6f4")).launch(
        "k", 1, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                      smem_desc(B_START, LBO, SBO), idesc(8, dtype=1), 0], mem, gpu="B200")
    got = mem.from_device(po, np.float32, (128, 8))
    a = formats.decode(ca, "e4m3").astype(np.float32)
    b = formats.decode(cb, "e4m3").astype(np.float32)
    model = np.asarray(mm.matmul(a, b, accumulate="B200-E4M3-TCGEN05"), np.float32)
    assert np.array_equal(got, model)


def test_race_reading_d_after_the_commit_without_waiting():
    src = SRC.replace("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;\n"
                      "  @!%p3 bra WAIT;\n", "")
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ \('tcgen05.ld.*"
                                             r"race: .*no thread of this warp has waited"):
        run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), src=src)


def test_disable_output_lane_leaves_those_lanes_unchanged(tmp_path):
    src = SRC.replace("  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n",
                      "  mov.b32 %r30, 15;\n  mov.b32 %r31, 0;\n  mov.b32 %r32, 0;\n"
                      "  mov.b32 %r33, 2147483648;\n"
                      "  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, "
                      "{%r30, %r31, %r32, %r33}, %p3;\n")
    out = run(f16(np.ones((128, 16))), f16(np.ones((8, 16))), src=src).view(np.float32)
    want = np.full((128, 8), 16, np.float32)
    want[[0, 1, 2, 3, 127]] = 0          # mask bits 0-3 of word 0 and bit 31 of word 3
    assert np.array_equal(out, want)
    import shutil
    import subprocess
    if shutil.which("ptxas"):
        f = tmp_path / "k.ptx"
        f.write_text(src)
        r = subprocess.run(["ptxas", "-arch=sm_100a", str(f), "-o", "/dev/null"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def _twice(scale: int) -> str:
    """The kernel with D = A B, then D = A B + D * 2^-scale (scale-input-d)."""
    return SRC.replace(
        "  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n",
        "  setp.ne.u32 %p3, 0, 0;\n"
        "  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n"
        "  setp.ne.u32 %p3, 1, 0;\n"
        f"  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3, {scale};\n")


def test_scale_input_d_scales_the_accumulator_by_a_power_of_two(tmp_path):
    rng = np.random.default_rng(9)
    a = 2 * rng.integers(-2, 3, (128, 16))
    b = 2 * rng.integers(-2, 3, (16, 8))          # A B: multiples of 4, D / 4 exact
    out = run(f16(a), f16(b.T), src=_twice(2)).view(np.float32)
    assert np.array_equal(out, (a @ b + (a @ b) / 4).astype(np.float32))
    assert_ptxas_accepts(tmp_path, _twice(15))


def test_scale_input_d_that_underflows_is_refused():
    a = np.zeros((128, 16))
    a[:, 0] = 3 * 2.0 ** -7
    b = np.zeros((16, 8))
    b[0, :] = 2.0 ** -7                           # D = 3 * 2^-14, an f16 normal
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*scale-input-d "
                                             r"15: D\[0, 0\] = 0.00018310546875 times "
                                             r"2\^-15 is not exactly a f16 value"):
        run(f16(a), f16(b.T), src=_twice(15), desc=idesc(8, dtype=0))


def _multicast_src() -> str:
    """The kernel for a cluster of CTAs: every CTA initialises its mbarrier (then a
    cluster barrier), thread 0 of CTA rank 0 alone issues the mma and commits it with
    .multicast::cluster and the ctaMask parameter, every CTA waits on its own mbarrier and
    writes its lanes to out + 4096 * rank."""
    s = SRC.replace(".param .u32 idesc, .param .u32 acc)",
                    ".param .u32 idesc, .param .u32 acc, .param .u32 mask)")
    s = s.replace("  .reg .b64 %rd<12>;\n", "  .reg .b64 %rd<12>;\n  .reg .b16 %rs<2>;\n")
    s = s.replace("  bar.sync 0;\n  tcgen05.fence::after_thread_sync;\n"
                  "  ld.shared.b32 %r8, [slot];\n  @%p2 bra ISSUED;\n",
                  "  bar.sync 0;\n  barrier.cluster.arrive;\n  barrier.cluster.wait;\n"
                  "  tcgen05.fence::after_thread_sync;\n  ld.shared.b32 %r8, [slot];\n"
                  "  mov.u32 %r31, %cluster_ctarank;\n  or.b32 %r32, %r1, %r31;\n"
                  "  setp.ne.u32 %p2, %r32, 0;\n  @%p2 bra ISSUED;\n")
    s = s.replace("  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
                  "[bar];\n",
                  "  ld.param.u32 %r33, [mask];\n  cvt.u16.u32 %rs1, %r33;\n"
                  "  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster"
                  ".multicast::cluster.b64 [bar], %rs1;\n")
    s = s.replace("  ld.param.u64 %rd6, [out];\n", "  ld.param.u64 %rd6, [out];\n"
                  "  mul.wide.u32 %rd10, %r31, 4096;\n  add.u64 %rd6, %rd6, %rd10;\n")
    assert "multicast::cluster" in s and "%rd10" in s and "barrier.cluster.wait" in s
    return s


def _multicast_run(mask: int) -> np.ndarray:
    img = image(f16(np.ones((128, 16))), f16(np.ones((8, 16))))
    mem = GlobalMemory()
    pi, po = mem.to_device(img.view(np.uint32)), mem.calloc(2 * 128 * 8 * 4)
    load_ptx(_multicast_src()).launch(
        "k", 2, 128, [pi, img.size // 4, po, smem_desc(0, LBO, SBO),
                      smem_desc(B_START, LBO, SBO), idesc(8), 0, mask], mem, gpu="B200",
        cluster=(2,))
    return mem.from_device(po, np.float32, (2, 128, 8))


def test_commit_multicast_arrives_on_every_cta_the_mask_names(tmp_path):
    out = _multicast_run(0b11)
    assert np.array_equal(out[0], np.full((128, 8), 16, np.float32))   # rank 0's D
    assert np.array_equal(out[1], np.zeros((128, 8), np.float32))      # rank 1: none
    # a mask without rank 1 leaves rank 1 waiting on a phase that never completes
    with pytest.raises(DeadlockError, match=r"mbarrier at shared address 0x0 of block "
                                            r"\(1, 0, 0\)"):
        _multicast_run(0b01)
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*ctaMask 0x4 "
                                             r"names no CTA or CTAs outside the cluster of 2"):
        _multicast_run(0b100)
    assert_ptxas_accepts(tmp_path, _multicast_src())


def _collector_a(first: str, second: str, poke: bool = False) -> str:
    """The kernel with two mma: D = A B with ``.collector::a::<first>``, then
    D = A B + D with ``.collector::a::<second>``; ``poke`` zeroes A's first 4 bytes in
    shared memory between them."""
    between = "  mov.u32 %r15, tile;\n  st.shared.u32 [%r15], 0;\n" \
              "  fence.proxy.async.shared::cta;\n" if poke else ""
    return SRC.replace(
        "  tcgen05.mma.cta_group::1.kind::f16 [%r8], %rd4, %rd5, %r9, %p3;\n",
        "  setp.ne.u32 %p3, 0, 0;\n"
        f"  tcgen05.mma.cta_group::1.kind::f16.collector::a::{first} [%r8], %rd4, %rd5, "
        "%r9, %p3;\n" + between + "  setp.ne.u32 %p3, 1, 0;\n"
        f"  tcgen05.mma.cta_group::1.kind::f16.collector::a::{second} [%r8], %rd4, %rd5, "
        "%r9, %p3;\n")


def test_collector_a_use_needs_the_filled_a(tmp_path):
    rng = np.random.default_rng(12)
    a = rng.integers(1, 4, (128, 16))             # A's first two elements are not zero
    b = rng.integers(-3, 4, (16, 8))
    out = run(f16(a), f16(b.T), src=_collector_a("fill", "lastuse")).view(np.float32)
    assert np.array_equal(out, (2 * (a @ b)).astype(np.float32))
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ .*collector::a::"
                                             r"use: collector buffer a holds the A filled on "
                                             r"line \d+ \(other codes\)"):
        run(f16(a), f16(b.T), src=_collector_a("fill", "use", poke=True))
    with pytest.raises(ExecutionError, match=r"line \d+ .*collector::a::use with no valid "
                                             r"fill of collector buffer a"):
        run(f16(a), f16(b.T), src=_collector_a("discard", "use"))
    # ::discard reads shared memory: the poked A counts
    a2 = a.copy()
    a2[0, :2] = 0
    out = run(f16(a), f16(b.T), src=_collector_a("fill", "discard", poke=True))
    assert np.array_equal(out.view(np.float32), (a @ b + a2 @ b).astype(np.float32))
    assert_ptxas_accepts(tmp_path, _collector_a("fill", "use", poke=True))
