"""wgmma (hardware/simt/wgmma.py) against independent references.

Hand-built sm_90a kernels copy a shared-memory image prepared here into shared memory,
run one wgmma.mma_async per warpgroup and store the accumulator registers. The image is
laid out by this file's own element-by-element reading of the PTX ISA (9.7.15.5.1:
core matrices of 8 rows x 16 bytes, LBO/SBO, the swizzle "bits 4-6 ^= bits 7-9" of the
address, bit by bit), the register fragments by the ISA's D and A figures written out
case by case; results are checked against exact float64 / integer products for small
integers (every tensor-core model is exact there) and against refimpl.matmul with the
launch GPU's preset on the exact operands otherwise."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import (ExecutionError, GlobalMemory, LaunchError, UnsupportedPtxError,
                           load_ptx)
from hardware.simt.errors import MemoryAccessError
from hardware.simt.wgmma import Descriptor, chunk_addresses, decode_descriptor, swizzle
from refimpl import formats
from refimpl import matmul as mm

# ----------------------------------------------------------- ISA layouts, by hand

_SWZ_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


def desc_bits(start: int, lbo: int, sbo: int, swz: int, base: int = 0) -> int:
    """Assemble a descriptor from the ISA's field table."""
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | \
        (((sbo >> 4) & 0x3FFF) << 32) | ((base & 7) << 49) | (_SWZ_CODE[swz] << 62)


def swizzled(addr: int, swz: int) -> int:
    """The ISA's swizzle, bit by bit: the 16-byte chunk bits 4.. XOR the row bits 7.."""
    nbits = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    out = addr
    for i in range(nbits):
        if (addr >> (7 + i)) & 1:
            out ^= 1 << (4 + i)
    return out


def element_address(r: int, k: int, e: int, start: int, lbo: int, sbo: int, swz: int,
                    mn_major: bool) -> int:
    """Byte address of element (r, k) of a rows x K operand (r: M of A, N of B)."""
    t = 16 // e                       # elements per 16 bytes
    if not mn_major:
        if swz == 0:                  # core matrix (r // 8, k // t): 8 rows of 16 bytes
            a = start + (r // 8) * sbo + (k // t) * lbo + (r % 8) * 16 + (k % t) * e
        else:                         # 8 rows of swz bytes; K runs along the row
            a = start + (r // 8) * sbo + (r % 8) * swz + k * e
    else:
        if swz == 0:                  # core matrix: 8 k-rows of t MN-elements
            a = start + (r // t) * sbo + (k // 8) * lbo + (k % 8) * 16 + (r % t) * e
        else:                         # 8 k-rows of swz bytes; MN runs along the row
            per = swz // e
            a = start + (r // per) * lbo + (k // 8) * sbo + (k % 8) * swz + (r % per) * e
    return swizzled(a, swz)


def place(image: np.ndarray, codes: np.ndarray, e: int, **lay) -> None:
    """Write the element codes (rows, K) into the byte image at their addresses."""
    rows, kk = codes.shape
    for r in range(rows):
        for k in range(kk):
            a = element_address(r, k, e, **lay)
            assert not image_used[id(image)][a:a + e].any(), "layout overlaps itself"
            image[a:a + e] = np.frombuffer(int(codes[r, k]).to_bytes(e, "little"), np.uint8)
            image_used[id(image)][a:a + e] = True


image_used: dict[int, np.ndarray] = {}


def new_image(size: int) -> np.ndarray:
    img = np.zeros(size, np.uint8)
    image_used[id(img)] = np.zeros(size, bool)
    return img


def d_position(thread: int, i: int) -> tuple[int, int]:
    """The ISA's accumulator figure: warp w of the warpgroup holds rows 16w..16w+15;
    lane l's element i: row groupID (+8 for the second pair of each four), column
    8 (i / 4) + 2 threadID_in_group + (i odd)."""
    w, lane = thread // 32, thread % 32
    group, tig = lane // 4, lane % 4
    row = 16 * w + group + (8 if i % 4 >= 2 else 0)
    col = (i // 4) * 8 + tig * 2 + (i % 2)
    return row, col


def a_position(thread: int, i: int, k: int) -> tuple[int, int]:
    """The ISA's A-fragment figures for m64nNk16 (8 halves), k8 (4 tf32), k32 (16 bytes)."""
    w, lane = thread // 32, thread % 32
    g, t = lane // 4, lane % 4
    if k == 16:
        row = g + (8 if i in (2, 3, 6, 7) else 0)
        col = 2 * t + (i % 2) + (8 if i >= 4 else 0)
    elif k == 8:
        row = g + (8 if i in (1, 3) else 0)
        col = t + (4 if i >= 2 else 0)
    else:
        row = g + (8 if (i // 4) % 2 else 0)
        col = 4 * t + (i % 4) + (16 if i >= 8 else 0)
    return 16 * w + row, col


# ----------------------------------------------------------------- the kernel

_FMT = {"f16": "fp16", "bf16": "bf16", "e4m3": "e4m3", "e5m2": "e5m2"}
_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
_E = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}


def kernel(shape: str, types: str, nd: int, smem: int, a_regs: bool, tail: str,
           threads: int = 128, extra: str = "", after: str = "", fence: bool = True,
           wait: int = 0, scale_d: str = "%p1") -> str:
    words = smem // 4
    copy = "\n".join(f"ld.global.b32 %r4, [%rd11+{4 * threads * j}];\n"
                     f"st.shared.b32 [%r3+{4 * threads * j}], %r4;"
                     for j in range(-(-words // threads)))
    dregs = ",".join(f"%r{100 + i}" for i in range(nd))
    load_c = "\n".join(f"ld.global.b32 %r{100 + i}, [%rd13+{4 * i}];" for i in range(nd))
    load_a = "\n".join(f"ld.global.b32 %r{90 + i}, [%rd17+{4 * i}];" for i in range(4))
    store = "\n".join(f"st.global.b32 [%rd16+{4 * i}], %r{100 + i};" for i in range(nd))
    a_op = "{%r90,%r91,%r92,%r93}" if a_regs else "%rd5"
    return f"""
.version 8.5
.target sm_90a
.address_size 64
.shared .align 1024 .b8 smem[{smem}];
.visible .entry k(.param .u64 pimg, .param .u64 pa, .param .u64 pc, .param .u64 pout,
                  .param .u64 pda, .param .u64 pdb, .param .u32 psd, .param .u32 pwgs)
{{
.reg .b32 %r<400>; .reg .b64 %rd<30>; .reg .pred %p<4>;
mov.u32 %r0, %tid.x;
ld.param.u64 %rd1, [pimg];
ld.param.u64 %rd2, [pa];
ld.param.u64 %rd3, [pc];
ld.param.u64 %rd4, [pout];
ld.param.u64 %rd5, [pda];
ld.param.u64 %rd6, [pdb];
ld.param.u32 %r5, [psd];
ld.param.u32 %r6, [pwgs];
setp.ne.u32 %p1, %r5, 0;
mul.wide.u32 %rd10, %r0, 4;
add.u64 %rd11, %rd1, %rd10;
mov.u32 %r1, smem;
shl.b32 %r2, %r0, 2;
add.u32 %r3, %r1, %r2;
{copy}
fence.proxy.async.shared::cta;
bar.sync 0;
mul.wide.u32 %rd12, %r0, {4 * nd};
add.u64 %rd13, %rd3, %rd12;
add.u64 %rd16, %rd4, %rd12;
mul.wide.u32 %rd18, %r0, 16;
add.u64 %rd17, %rd2, %rd18;
{load_c}
{load_a}
shr.u32 %r7, %r0, 7;
mul.lo.u32 %r7, %r7, %r6;
add.u32 %r7, %r7, %r1;
shr.u32 %r7, %r7, 4;
cvt.u64.u32 %rd14, %r7;
add.u64 %rd5, %rd5, %rd14;
add.u64 %rd6, %rd6, %rd14;
{extra}
{"wgmma.fence.sync.aligned;" if fence else ""}
wgmma.mma_async.sync.aligned.{shape}.{types} {{{dregs}}}, {a_op}, %rd6, {scale_d}{tail};
wgmma.commit_group.sync.aligned;
{after}
wgmma.wait_group.sync.aligned {wait};
{store}
ret;
}}
"""


def codes_of(values: np.ndarray, t: str) -> np.ndarray:
    if t == "tf32":
        return values.astype(np.float32).view(np.uint32).astype(np.int64)
    if t in ("s8", "u8"):
        return (values.astype(np.int64) & 0xFF)
    return np.asarray(formats.encode(values.astype(np.float32), _FMT[t]), np.int64)


def run_wgmma(atype: str, btype: str, dtype: str, n: int, a: np.ndarray, b: np.ndarray,
              c: np.ndarray, *, a_lay: dict | None, b_lay: dict, smem: int,
              scale_a: int = 1, scale_b: int = 1, scale_d: bool = True, satfinite=False,
              nwg: int = 1, wg_stride: int = 0, gpu: str = "H100", **kw) -> np.ndarray:
    """a (nwg, 64, K), b (nwg, K, N) values, c (nwg, 64, N) values -> D (nwg, 64, N) as
    codes (uint32; f16 accumulators as their 16-bit codes)."""
    k = _K[atype]
    e = _E[atype]
    img = new_image(smem)
    for w in range(nwg):
        off = w * wg_stride
        if a_lay is not None:
            lay = dict(a_lay)
            lay["start"] += off
            place(img, codes_of(a[w], atype), e, **lay)
        lay = dict(b_lay)
        lay["start"] += off
        place(img, codes_of(b[w].T, btype), e, **lay)
    acc_bits = 16 if dtype == "f16" else 32
    nd = n // 2 if acc_bits == 32 else n // 4
    threads = 128 * nwg
    cwords = np.zeros((threads, nd), np.uint32)
    if dtype == "f32":
        ccodes = c.astype(np.float32).view(np.uint32)
    elif dtype == "f16":
        ccodes = c.astype(np.float16).view(np.uint16).astype(np.uint32)
    else:
        ccodes = (c.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    per = 32 // acc_bits
    for t in range(threads):
        w, tl = t // 128, t % 128
        for i in range(n // 2):
            r, col = d_position(tl, i)
            cwords[t, i // per] |= np.uint32(int(ccodes[w, r, col]) << (acc_bits * (i % per)))
    areg = np.zeros((threads, 4), np.uint32)
    if a_lay is None:
        ac = [codes_of(a[w], atype) for w in range(nwg)]
        nel = {16: 8, 8: 4, 32: 16}[k]
        bits = 32 // (nel // 4)
        for t in range(threads):
            w, tl = t // 128, t % 128
            for i in range(nel):
                r, col = a_position(tl, i, k)
                areg[t, i // (nel // 4)] |= np.uint32(int(ac[w][r, col]) <<
                                                      (bits * (i % (nel // 4))))
    types = f"{dtype}.{atype}.{btype}"
    if satfinite:
        types = "satfinite." + types
    tail = ""
    if atype not in ("s8", "u8"):
        tail += f", {scale_a}, {scale_b}"
    if atype in ("f16", "bf16"):
        if a_lay is not None:
            tail += f", {int(a_lay['mn_major'])}"
        tail += f", {int(b_lay['mn_major'])}"
    ptx = kernel(f"m64n{n}k{k}", types, nd, smem, a_lay is None, tail, threads, **kw)
    mem = GlobalMemory()
    pi = mem.to_device(img)
    pa = mem.to_device(areg)
    pc = mem.to_device(cwords)
    po = mem.calloc(threads * nd * 4)
    da = 0 if a_lay is None else desc_bits(0, a_lay["lbo"], a_lay["sbo"], a_lay["swz"]) + \
        (a_lay["start"] >> 4)
    db = desc_bits(0, b_lay["lbo"], b_lay["sbo"], b_lay["swz"]) + (b_lay["start"] >> 4)
    load_ptx(ptx).launch("k", 1, threads, [pi, pa, pc, po, da, db, int(scale_d), wg_stride],
                         mem, gpu=gpu)
    words = mem.from_device(po, np.uint32, (threads, nd))
    out = np.zeros((nwg, 64, n), np.uint32)
    for t in range(threads):
        w, tl = t // 128, t % 128
        for i in range(n // 2):
            r, col = d_position(tl, i)
            out[w, r, col] = (int(words[t, i // per]) >> (acc_bits * (i % per))) & \
                ((1 << acc_bits) - 1)
    return out


def lay(start=0, lbo=0, sbo=0, swz=0, mn=False) -> dict:
    return dict(start=start, lbo=lbo, sbo=sbo, swz=swz, mn_major=mn)


def small_ints(rng, shape, lo=-3, hi=4):
    return rng.integers(lo, hi, shape).astype(np.float64)


def f32_of(codes: np.ndarray) -> np.ndarray:
    return codes.astype(np.uint32).view(np.float32).astype(np.float64)


# ----------------------------------------------------------------- descriptor fields


def test_descriptor_fields_by_hand():
    # start 0x1230 -> 0x123 in bits 0-13; LBO 256 -> 16 at bit 16; SBO 1024 -> 64 at
    # bit 32; base offset 5 at bits 49-51; mode 3 (32 B) in bits 62-63
    v = 0x123 | (16 << 16) | (64 << 32) | (5 << 49) | (3 << 62)
    assert decode_descriptor(v) == Descriptor(0x1230, 256, 1024, 5, 32)
    # the constants Triton ORs into its sm_90 descriptors: 64 B swizzle with SBO 512
    # (bit 63, bit 37) and 128 B swizzle with SBO 1024 (bit 62, bit 38)
    assert decode_descriptor(0x8000002000000000) == Descriptor(0, 0, 512, 0, 64)
    assert decode_descriptor(0x4000004000000000) == Descriptor(0, 0, 1024, 0, 128)
    # bits outside the fields are ignored; every field at its maximum
    assert decode_descriptor((1 << 64) - 1) == Descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, 32)
    assert decode_descriptor(desc_bits(0x40, 0x80, 0x100, 64)) == Descriptor(0x40, 0x80,
                                                                              0x100, 0, 64)


def test_swizzle_by_hand():
    # 128 B: chunk bits 4-6 XOR row bits 7-9
    assert swizzle(0x80, 128) == 0x90
    assert swizzle(0x3F0, 128) == 0x380
    assert swizzle(0x400, 128) == 0x400          # repeats every 1024 bytes
    assert swizzle(0x485, 128) == 0x495          # byte within the chunk kept
    # 64 B: bits 4-5 XOR bits 7-8; bit 6 untouched
    assert swizzle(0x180, 64) == 0x1B0
    assert swizzle(0x1C0, 64) == 0x1F0
    assert swizzle(0x200, 64) == 0x200
    # 32 B: bit 4 XOR bit 7
    assert swizzle(0x80, 32) == 0x90 and swizzle(0x100, 32) == 0x100
    assert swizzle(0x1234, 0) == 0x1234
    a = np.arange(0, 4096, 16)
    for w in (32, 64, 128):      # a permutation of the chunks within each repeat
        s = swizzle(a, w)
        assert sorted(s.tolist()) == a.tolist()
        assert all(swizzled(int(x), w) == int(y) for x, y in zip(a, s))


@pytest.mark.parametrize("swz,mn", [(0, False), (32, False), (64, False), (128, False),
                                    (0, True), (32, True), (64, True), (128, True)])
def test_chunk_addresses_match_elementwise_layout(swz, mn):
    d = Descriptor(0x400, 0x800 if not (mn and swz) else 0x1000, 0x200 if not mn else 0x400,
                   0, swz)
    rows, e = 64, 2
    got = chunk_addresses(d, rows, 32, e, mn)
    for r in range(rows):
        for k in range(16):
            want = element_address(r, k, e, d.start, d.lbo, d.sbo, swz, mn)
            if not mn:
                c = got[r, k // 8] + 2 * (k % 8)
            else:
                c = got[r // 8, k] + 2 * (r % 8)
            assert c == want


# ----------------------------------------------------------------- products


def test_f16_k_major_128b_swizzle_f32_accumulator():
    rng = np.random.default_rng(1)
    n = 64
    a = rng.standard_normal((1, 64, 16)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((1, 16, n)).astype(np.float16).astype(np.float64)
    c = rng.standard_normal((1, 64, n)).astype(np.float32).astype(np.float64)
    # K-major 128 B: rows of 128 bytes (this wgmma's 32 bytes at the start of each),
    # 8 rows per 1024-byte pattern: SBO 1024
    got = run_wgmma("f16", "f16", "f32", n, a, b, c, a_lay=lay(0, 0, 1024, 128),
                    b_lay=lay(8192, 0, 1024, 128), smem=16384)
    want = mm.matmul(a[0].astype(np.float32), b[0].astype(np.float32), c[0].astype(np.float32),
                     accumulate="H100-FP16", out_format="fp32")
    assert np.array_equal(got[0], np.asarray(want, np.float32).view(np.uint32))
    assert not np.array_equal(got[0], np.float32(a[0] @ b[0] + c[0]).view(np.uint32))


def test_bf16_no_swizzle_core_matrices_and_scale_d_false():
    rng = np.random.default_rng(2)
    n = 8
    a, b = small_ints(rng, (1, 64, 16)), small_ints(rng, (1, 16, n))
    c = small_ints(rng, (1, 64, n)) + 100
    # K-major, no swizzle: core matrices 128 bytes, LBO (next along K) 128, SBO (next 8
    # rows) 256; B: LBO 2048 (far away), SBO 128
    got = run_wgmma("bf16", "bf16", "f32", n, a, b, c, a_lay=lay(0, 128, 256, 0),
                    b_lay=lay(4096, 2048, 128, 0), smem=8192, scale_d=False)
    assert np.array_equal(f32_of(got[0]), a[0] @ b[0])        # exact, C not used
    got = run_wgmma("bf16", "bf16", "f32", n, a, b, c, a_lay=lay(0, 128, 256, 0),
                    b_lay=lay(4096, 2048, 128, 0), smem=8192, scale_d=True)
    assert np.array_equal(f32_of(got[0]), a[0] @ b[0] + c[0])


def test_f16_a_registers_b_n_major_64b_swizzle_negated_a_f16_accumulator():
    rng = np.random.default_rng(3)
    n = 24
    a, b, c = small_ints(rng, (1, 64, 16)), small_ints(rng, (1, 16, n)), \
        small_ints(rng, (1, 64, n))
    # B N-major with 64 B swizzle: 32 N-elements per 64-byte row, 8 k-rows per 512-byte
    # atom (SBO 512 to the next 8 k), the next 32 N at LBO 1024
    got = run_wgmma("f16", "f16", "f16", n, a, b, c, a_lay=None,
                    b_lay=lay(0, 1024, 512, 64, mn=True), smem=4096, scale_a=-1)
    want = (-a[0] @ b[0] + c[0]).astype(np.float16).view(np.uint16)
    assert np.array_equal(got[0], want)


def test_f16_m_major_a_no_swizzle_and_n_major_b_128b():
    rng = np.random.default_rng(4)
    n = 128
    a, b, c = small_ints(rng, (1, 64, 16)), small_ints(rng, (1, 16, n)), \
        small_ints(rng, (1, 64, n))
    # A M-major, no swizzle: core matrix 8 k x 8 m halves; SBO 128 to the next 8 m,
    # LBO 1024 to the next 8 k. B N-major 128 B: 64 N per row, LBO 2048 to the next 64
    got = run_wgmma("f16", "f16", "f32", n, a, b, c, a_lay=lay(0, 1024, 128, 0, mn=True),
                    b_lay=lay(4096, 2048, 1024, 128, mn=True), smem=8192, scale_b=-1)
    assert np.array_equal(f32_of(got[0]), a[0] @ -b[0] + c[0])


def test_tf32_32b_swizzle_drops_low_bits():
    rng = np.random.default_rng(5)
    n = 16
    ints = small_ints(rng, (1, 64, 8))
    a = ints * (1 + 2.0**-20)          # below tf32's 10 fraction bits: the core drops it
    b = small_ints(rng, (1, 8, n))
    c = small_ints(rng, (1, 64, n))
    got = run_wgmma("tf32", "tf32", "f32", n, a, b, c, a_lay=lay(0, 0, 256, 32),
                    b_lay=lay(2048, 0, 256, 32), smem=4096)
    assert np.array_equal(f32_of(got[0]), ints[0] @ b[0] + c[0])
    assert not np.array_equal(ints[0] @ b[0], a[0] @ b[0])


@pytest.mark.parametrize("at,bt,dt", [("e4m3", "e5m2", "f32"), ("e5m2", "e5m2", "f16"),
                                      ("e4m3", "e4m3", "f32")])
def test_fp8_k32(at, bt, dt):
    rng = np.random.default_rng(6)
    n = 32 if dt == "f32" else 8
    a = rng.standard_normal((1, 64, 32))
    b = rng.standard_normal((1, 32, n))
    a = formats.decode(formats.encode(a.astype(np.float32), _FMT[at]), _FMT[at]).astype(float)
    b = formats.decode(formats.encode(b.astype(np.float32), _FMT[bt]), _FMT[bt]).astype(float)
    c = rng.standard_normal((1, 64, n)).astype(np.float16).astype(np.float64)
    got = run_wgmma(at, bt, dt, n, a, b, c, a_lay=lay(0, 0, 512, 64),
                    b_lay=lay(4096, 0, 512, 64), smem=8192)
    from refimpl.matmul import presets
    model = presets.preset(f"H100-{at.upper()}")
    if at != bt:
        import dataclasses
        model = dataclasses.replace(model, input_emin=(-6, -14))
    out = "fp16" if dt == "f16" else "fp32"
    want = np.asarray(mm.matmul(a[0].astype(np.float32), b[0].astype(np.float32),
                                c[0].astype(np.float32), accumulate=model, out_format=out))
    want = want.astype(np.float16).view(np.uint16) if dt == "f16" else \
        want.astype(np.float32).view(np.uint32)
    assert np.array_equal(got[0], want)


def test_fp8_small_integers_exact_from_registers():
    rng = np.random.default_rng(7)
    a, b, c = small_ints(rng, (1, 64, 32)), small_ints(rng, (1, 32, 16)), \
        small_ints(rng, (1, 64, 16))
    got = run_wgmma("e4m3", "e4m3", "f32", 16, a, b, c, a_lay=None,
                    b_lay=lay(0, 0, 256, 32), smem=1024)
    assert np.array_equal(f32_of(got[0]), a[0] @ b[0] + c[0])


def test_integer_satfinite_and_wrap():
    rng = np.random.default_rng(8)
    n = 48
    a = rng.integers(-128, 128, (1, 64, 32)).astype(np.int64)
    b = rng.integers(0, 256, (1, 32, n)).astype(np.int64)
    c = rng.integers(-2**31, 2**31, (1, 64, n)).astype(np.int64)
    c[0, :4] = 2**31 - 1
    c[0, 4:8] = -2**31
    exact = np.einsum("mk,kn->mn", a[0], b[0]) + c[0]
    got = run_wgmma("s8", "u8", "s32", n, a, b, c, a_lay=lay(0, 0, 512, 64),
                    b_lay=lay(4096, 0, 512, 64), smem=8192, satfinite=True)
    assert np.array_equal(got[0].view(np.int32), np.clip(exact, -2**31, 2**31 - 1))
    got = run_wgmma("s8", "u8", "s32", n, a, b, c, a_lay=lay(0, 0, 512, 64),
                    b_lay=lay(4096, 0, 512, 64), smem=8192)
    assert np.array_equal(got[0].astype(np.int64), exact & 0xFFFFFFFF)
    assert (np.clip(exact, -2**31, 2**31 - 1) != exact).any()
    # A from registers, u8 x s8, scale-d false
    a2 = rng.integers(0, 256, (1, 64, 32))
    b2 = rng.integers(-128, 128, (1, 32, 8))
    got = run_wgmma("u8", "s8", "s32", 8, a2, b2, c[:, :, :8], a_lay=None,
                    b_lay=lay(0, 0, 256, 32), smem=1024, scale_d=False)
    assert np.array_equal(got[0].view(np.int32), a2[0] @ b2[0])


def test_two_warpgroups_read_their_own_descriptors():
    rng = np.random.default_rng(9)
    n = 16
    a, b, c = small_ints(rng, (2, 64, 16)), small_ints(rng, (2, 16, n)), \
        small_ints(rng, (2, 64, n))
    got = run_wgmma("f16", "f16", "f32", n, a, b, c, a_lay=lay(0, 0, 512, 64),
                    b_lay=lay(4096, 0, 512, 64), smem=16384, nwg=2, wg_stride=8192)
    for w in range(2):
        assert np.array_equal(f32_of(got[w]), a[w] @ b[w] + c[w])


# ----------------------------------------------------------------- errors


def _simple(**kw):
    rng = np.random.default_rng(10)
    a, b, c = small_ints(rng, (1, 64, 16)), small_ints(rng, (1, 16, 8)), \
        small_ints(rng, (1, 64, 8))
    args = dict(a_lay=lay(0, 0, 512, 64), b_lay=lay(4096, 0, 512, 64), smem=8192)
    args.update(kw)
    return run_wgmma("f16", "f16", "f32", 8, a, b, c, **args)


def test_reading_an_accumulator_before_the_wait_is_a_race():
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\), line \d+ \('add.u32 "
                       r"%r300, %r101, 1'\): race: read of register %r101, the accumulator "
                       r"of the wgmma.mma_async on line \d+"):
        _simple(after="add.u32 %r300, %r101, 1;")
    with pytest.raises(ExecutionError, match="race: write of register %r100"):
        _simple(after="mov.u32 %r100, 0;")
    # wait_group 1 leaves the last group pending: the store after it is a race
    with pytest.raises(ExecutionError, match=r"st.global.b32 \[%rd16\+0\], %r100.\): "
                       "race: read of register %r100"):
        _simple(wait=1)
    _simple(after="add.u32 %r300, %r5, 1;")    # other registers are free


def test_fence_required():
    with pytest.raises(ExecutionError, match="without a wgmma.fence"):
        _simple(fence=False)
    # an accumulator written after the fence needs another one
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0",
                 extra="wgmma.fence.sync.aligned;\nmov.u32 %r100, 0;", fence=False)
    with pytest.raises(ExecutionError, match="written since the last wgmma.fence"):
        _launch(src)


def _launch(src, threads=128, desc_a=0, desc_b=0, smem=1024):
    mem = GlobalMemory()
    img = mem.calloc(smem)
    buf = mem.calloc(1 << 16)
    load_ptx(src).launch("k", 1, threads, [img, buf, buf, buf, desc_a, desc_b, 1, 0], mem,
                         gpu="H100")


def test_descriptor_outside_shared_memory():
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0")
    # past the end of the variable (memcheck names the wgmma and the thread) and past
    # the end of the block's shared memory
    with pytest.raises(MemoryAccessError, match=r"thread \(\d+, 0, 0\), line \d+ "
                       r"\('wgmma.mma_async.*out-of-bounds shared access"):
        _launch(src, desc_b=desc_bits(0x300, 0, 512, 64))
    with pytest.raises(ExecutionError, match=r"descriptor 0x\w+ \(start 0x3ff00, LBO 0, "
                       r"SBO 512, swizzle 64\) addresses shared bytes .* outside the CTA"):
        _launch(src, desc_b=desc_bits(0x3FF00, 0, 512, 64))
    with pytest.raises(ExecutionError, match="base offset 3"):
        _launch(src, desc_b=desc_bits(0, 0, 512, 64, base=3))


def test_descriptor_must_be_uniform_in_the_warpgroup():
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0",
                 extra="cvt.u64.u32 %rd20, %r0;\nshr.u64 %rd20, %rd20, 6;\n"
                       "add.u64 %rd6, %rd6, %rd20;")
    with pytest.raises(ExecutionError, match="descriptor differs within the warpgroup"):
        _launch(src)


def test_partial_warpgroups_refused():
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0", threads=64)
    with pytest.raises(ExecutionError, match="warpgroup"):
        _launch(src, threads=64)
    # a guard that differs between lanes: the wgmma executes on part of a warp
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0",
                 extra="setp.lt.u32 %p3, %r0, 100;")
    src = src.replace("wgmma.mma_async", "@%p3 wgmma.mma_async", 1)
    with pytest.raises(ExecutionError, match="not executed by every lane of the warp"):
        _launch(src)


@pytest.mark.parametrize("shape,types,nd,tail,why", [
    ("m64n40k32", "s32.s8.s8", 20, "", "not a wgmma shape"),
    ("m64n8k16", "f16.bf16.bf16", 2, ", 1, 1, 0, 0", "accumulator"),
    ("m64n8k8", "f32.tf32.tf32", 4, ", 1, 1, 0, 0", "operands"),
    ("m64n8k16", "f32.f16.f16", 4, ", 2, 1, 0, 0", "imm-scale-a"),
    ("m64n8k16", "f32.f16.f16", 4, ", 1, 1, 0, 2", "imm-trans-b"),
    ("m64n8k16", "f32.f16.f16", 2, ", 1, 1, 0, 0", "d needs 4 registers"),
    ("m64n8k32", "f32.e4m3.s8", 4, ", 1, 1", "do not mix"),
    ("m64n8k16", "s32.s8.s8", 4, "", "not a wgmma shape"),
])
def test_forms_ptxas_refuses_are_refused(shape, types, nd, tail, why):
    # each refused by ptxas -arch=sm_90a as well
    src = kernel(shape, types, nd, 1024, False, tail)
    with pytest.raises(UnsupportedPtxError, match=why):
        load_ptx(src)


def test_gpu_without_a_wgmma_preset_refused():
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0")
    mem = GlobalMemory()
    p = mem.calloc(1 << 16)
    with pytest.raises(LaunchError, match="no wgmma.mma_async preset"):
        load_ptx(src).launch("k", 1, 128, [p, p, p, p, 0, 0, 1, 0], mem, gpu="B200")


def test_operand_written_before_the_wait_is_a_race():
    # B lies at 4096: a thread overwrites its first word between commit and wait
    with pytest.raises(ExecutionError, match=r"wgmma.wait_group.*race: shared address "
                       r"0x100[0-3], read by the wgmma.mma_async on line \d+ as an operand"):
        _simple(after="mov.u32 %r301, 0x7C007C00;\nst.shared.b32 [%r1+4096], %r301;")
    _simple(after="st.shared.b32 [%r1+6144], %r5;")    # outside the operands: no race


def test_warps_reconverge_before_the_wgmma_and_stats_count_it():
    # warp 1 runs a loop the other warps skip, lane 0 a branch of its own; all four
    # warps meet again at the wgmma
    extra = """shr.u32 %r301, %r0, 5;
setp.ne.u32 %p2, %r301, 1;
mov.u32 %r302, 0;
@%p2 bra JOIN;
LOOP:
add.u32 %r302, %r302, 1;
setp.lt.u32 %p3, %r302, 3;
@%p3 bra LOOP;
JOIN:
setp.ne.u32 %p2, %r0, 0;
@%p2 bra JOIN2;
add.u32 %r303, %r303, 1;
JOIN2:"""
    rng = np.random.default_rng(11)
    a, b, c = small_ints(rng, (1, 64, 16)), small_ints(rng, (1, 16, 8)), \
        small_ints(rng, (1, 64, 8))
    got = run_wgmma("f16", "f16", "f32", 8, a, b, c, a_lay=lay(0, 0, 512, 64),
                    b_lay=lay(4096, 0, 512, 64), smem=8192, extra=extra)
    assert np.array_equal(f32_of(got[0]), a[0] @ b[0] + c[0])
    src = kernel("m64n24k16", "f32.f16.f16", 12, 1024, False, ", 1, 1, 0, 0", threads=256)
    mem = GlobalMemory()
    p, q = mem.calloc(1 << 16), mem.calloc(1 << 16)
    stats = load_ptx(src).launch("k", 1, 256, [p, p, p, q, 0, 0, 1, 0], mem, gpu="H100")
    assert stats.wgmma_instructions == 2                # 2 warpgroups
    assert stats.wgmma_flops == 2 * 2 * 64 * 24 * 16


@pytest.mark.parametrize("t", ["tf32", "bf16"])
def test_a_from_registers_tf32_and_bf16(t):
    rng = np.random.default_rng(12)
    k = _K[t]
    a, b, c = small_ints(rng, (1, 64, k)), small_ints(rng, (1, k, 16)), \
        small_ints(rng, (1, 64, 16))
    got = run_wgmma(t, t, "f32", 16, a, b, c, a_lay=None, b_lay=lay(0, 0, 256, 32),
                    smem=1024, scale_b=-1)
    assert np.array_equal(f32_of(got[0]), a[0] @ -b[0] + c[0])


def test_wait_group_keeps_the_newest_groups_pending():
    # two groups: wait_group 1 completes the first only; its accumulators are free,
    # the second's are not
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0", wait=1,
                 after="wgmma.fence.sync.aligned;\nwgmma.mma_async.sync.aligned.m64n8k16."
                       "f32.f16.f16 {%r200,%r201,%r202,%r203}, %rd5, %rd6, %p1, 1, 1, 0, 0;"
                       "\nwgmma.commit_group.sync.aligned;")
    text = src.replace("wgmma.wait_group.sync.aligned 1;",
                       "wgmma.wait_group.sync.aligned 1;\nadd.u32 %r300, %r100, 1;")
    _launch(text.replace("st.global.b32 [%rd16+0], %r100;", ""))    # first group: done
    with pytest.raises(ExecutionError, match="race: read of register %r200"):
        _launch(text.replace("add.u32 %r300, %r100, 1;", "add.u32 %r300, %r200, 1;"))


@pytest.mark.parametrize("target", ["sm_90", "sm_100a"])
def test_wgmma_needs_sm_90a(target):
    # ptxas: "Instruction 'wgmma.fence' not supported on .target 'sm_90'" (and sm_100a)
    src = kernel("m64n8k16", "f32.f16.f16", 4, 1024, False, ", 1, 1, 0, 0")
    with pytest.raises(UnsupportedPtxError, match=f"needs .target sm_90a.*{target}"):
        load_ptx(src.replace(".target sm_90a", f".target {target}"))


@pytest.mark.parametrize("t,n", [("f16", 8), ("f16", 136), ("f16", 256), ("s8", 24),
                                 ("s8", 208)])
def test_n_values_with_mn_major_32b_b(t, n):
    rng = np.random.default_rng(n)
    k = _K[t]
    a, b, c = small_ints(rng, (1, 64, k)), small_ints(rng, (1, k, n)), \
        small_ints(rng, (1, 64, n))
    if t == "f16":
        # B N-major 32 B: 16 N per 32-byte row, 8 k-rows (256 bytes) per atom, the next
        # 16 N at LBO 512, the next 8 k at SBO 256
        b_lay = lay(8192, 512, 256, 32, mn=True)
        smem = 8192 + 512 * (n // 16) + 256
    else:
        b_lay = lay(8192, 0, 256, 32)
        smem = 8192 + 256 * (n // 8)
    smem = -(-smem // 1024) * 1024
    got = run_wgmma(t, t, "s32" if t == "s8" else "f32", n, a, b, c,
                    a_lay=lay(0, 0, 1024, 128), b_lay=b_lay, smem=smem)
    want = a[0] @ b[0] + c[0]
    if t == "s8":
        assert np.array_equal(got[0].view(np.int32), want)
    else:
        assert np.array_equal(f32_of(got[0]), want)


def test_register_moves_pass_in_flight_values_on():
    # a mov (Triton unpacks f16x2 accumulators this way before its wait) is a renaming:
    # allowed before the wait; a real use of the copy before the wait is the race
    _simple(after="mov.b32 %r310, %r101;\nmov.b64 %rd25, {%r102, %r103};", wait=0)
    with pytest.raises(ExecutionError, match=r"add.u32 %r300, %r310, 1.*race: read of "
                       r"register %r310, a copy of an accumulator of the wgmma.mma_async"):
        _simple(after="mov.b32 %r310, %r101;\nadd.u32 %r300, %r310, 1;")
    with pytest.raises(ExecutionError, match="race: write of register %r101"):
        _simple(after="mov.b32 %r101, %r5;")
