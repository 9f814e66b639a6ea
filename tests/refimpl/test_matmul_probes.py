"""Probe tests: the inputs that reveal each numerical feature of a matrix unit, pinned for
every preset with the hardware result derived by hand here.

The published parameters are typed into ``NV`` below from the sources (never read from
``refimpl``): [KM25] Khattak and Mikaitis, arXiv:2512.07004, Table 3 and its MATLAB models;
[MMASim] Xie et al., arXiv:2511.10909; [FHMP21] Fasi et al., PeerJ CS 2021. Each probe's
expected value is a formula in those parameters (or, for AMD, a constant), with the
derivation in the comment. ``PROBE_TABLE`` lists which probes apply to which preset; a
test checks that every preset is probed.

NVIDIA model (block FMA): products exact, exponent e(a) + e(b) (a subnormal input reads
its format's minimum exponent), C inside the block with its FP32 exponent (or added
after the block with a separate FP32 round to nearest), alignment to the largest
exponent, terms truncated toward zero F bits below it, exact sum, rounded toward zero to
the accumulator (23 fraction bits, or 13 on the Hopper/Ada FP8 paths; FP16 output:
round to nearest even), overflow to Inf.
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import formats as F
from refimpl.matmul import PRESETS, matmul

INF = float("inf")

# name: (input format, n, F, accumulator fraction bits, C placement)
NV = {
    "V100-FP16": ("fp16", 4, 23, 23, "inside"),
    "T4-FP16": ("fp16", 8, 24, 23, "inside"),
    "A100-FP16": ("fp16", 8, 24, 23, "inside"),
    "A100-BF16": ("bf16", 8, 24, 23, "inside"),
    "A100-TF32": ("tf32", 4, 24, 23, "inside"),
    "L40S-FP16": ("fp16", 8, 24, 23, "inside"),
    "L40S-BF16": ("bf16", 8, 24, 23, "inside"),
    "L40S-TF32": ("tf32", 4, 24, 23, "inside"),
    "L40S-E4M3": ("e4m3", 16, 13, 13, "inside"),
    "L40S-E5M2": ("e5m2", 16, 13, 13, "inside"),
    "H100-FP16": ("fp16", 16, 25, 23, "inside"),
    "H100-BF16": ("bf16", 16, 25, 23, "inside"),
    "H100-TF32": ("tf32", 8, 25, 23, "inside"),
    "H100-E4M3": ("e4m3", 32, 13, 13, "inside"),
    "H100-E5M2": ("e5m2", 32, 13, 13, "inside"),
    "H100-E4M3-MMA": ("e4m3", 32, 13, 13, "inside"),   # FP32 accumulator
    "H100-E5M2-MMA": ("e5m2", 32, 13, 13, "inside"),
    "B200-FP16": ("fp16", 16, 25, 23, "inside"),
    "B200-BF16": ("bf16", 16, 25, 23, "inside"),
    "B200-TF32": ("tf32", 8, 25, 23, "inside"),
    "B200-E4M3": ("e4m3", 32, 25, 23, "after"),
    "B200-E5M2": ("e5m2", 32, 25, 23, "after"),
    "B200-E4M3-TCGEN05": ("e4m3", 32, 25, 23, "inside"),
    "B200-E5M2-TCGEN05": ("e5m2", 32, 25, 23, "inside"),
}
#: FP32 accumulator in two interleaved halves of n/2 (k = 0, 1 mod 4, then 2, 3 mod 4),
#: each rounded into FP32 ([KM25]'s published B200 mma.sync FP8 outputs)
INTERLEAVED = {"B200-E4M3", "B200-E5M2"}
# name: (input format, group, kind)
AMD = {
    "MI100-FP16": ("fp16", 4, "exact"), "MI100-BF16": ("bf16", 2, "exact"),
    "MI250X-FP16": ("fp16", 4, "ftz"), "MI250X-BF16": ("bf16", 4, "ftz"),
    "MI300X-FP16": ("fp16", 8, "trunc"), "MI300X-BF16": ("bf16", 8, "trunc"),
    "MI300X-TF32": ("tf32", 4, "trunc"), "MI300X-E4M3": ("e4m3fnuz", 16, "split"),
    "MI300X-E5M2": ("e5m2fnuz", 16, "split"),
}
BLOCK_SCALED = {"B200-MXF8F6F4", "B200-MXF4", "B200-NVF4"}   # tests in test_matmul_block_scaled
SIXTEEN_BIT = ("fp16", "bf16", "tf32")


def fmt_of(name: str) -> str:
    return NV[name][0] if name in NV else AMD[name][0]


def run(name, a, b, c=None, k=None, out="fp32") -> float:
    """One dot product through preset ``name``; the operands must be values of the
    preset's format (checked: a malformed probe fails instead of testing nothing)."""
    fmt = fmt_of(name)
    k = k or len(a)
    a = np.array(list(a) + [0.0] * (k - len(a)), np.float64)
    b = np.array(list(b) + [0.0] * (k - len(b)), np.float64)
    for x in (a, b):
        assert np.array_equal(np.asarray(F.round_to(x, fmt), np.float64), x), (name, x)
    cc = None if c is None else np.array([[c]], np.float32 if out == "fp32" else np.float16)
    return float(matmul(a[None, :].astype(np.float32), b[:, None].astype(np.float32), cc,
                        accumulate=name, out_format=out)[0, 0])


def nv_params(name):
    return NV[name][1:]


# ------------------------------------------------------------------ the probes
def probe_rounding(name):
    """c = 2048, one product 1.75 * 2^-12 (= 1.75 * 2^-6 * 2^-6): FP32 ulp at 2048 is
    2^-12. Inside, F >= 23: the product keeps at least 2^-12 and stays below 2 * 2^-12,
    the sum is truncated to 2048 + 2^-12 (round to nearest would give 2048 + 2^-11);
    F = 13: grid 2^(11 - 13), the product is dropped: 2048. After the block, or a
    round-to-nearest unit: RN(2048 + 1.75 ulp) = 2048 + 2^-11."""
    got = run(name, [1.75 * 2**-6], [2.0**-6], 2048.0)
    if name in NV:
        _, n, f, acc, place = NV[name]
        want = 2048 + 2.0**-11 if place == "after" else (2048.0 if f == 13 else 2048 + 2.0**-12)
    else:
        want = 2048 + 2.0**-11
    return got, want


def probe_carry(name):
    """Truncation after the carry ([FHMP21]'s normalisation test): c = 3584 = 1.75 * 2^11,
    products 56 * 64 = 3584 and 1.5 * 2^-6 * 2^(18 - acc) = 1.5 ulp of the result (ulp
    at 2^12 with acc fraction bits: 2^(12 - acc)). Aligned at exponent 11 on a grid of
    at most 2^-12 (2^-2 for F = 13) nothing is lost; the sum 7168 + 1.5 ulp carries into
    exponent 12 and is truncated there: 7168 + 2^(12 - acc) (nearest would give 2 ulps).
    C after the block (acc 23): the products alone, 3584 + 1.5 * 2^-11, fit FP32 (ulp
    2^-12 at 3584), then RN(7168 + 1.5 * 2^-11) is a tie at ulp 2^-11: even, 7168 + 2^-10."""
    fmt, n, f, acc, place = NV[name]
    got = run(name, [56.0, 1.5 * 2**-6], [64.0, 2.0 ** (18 - acc)], 3584.0)
    return got, 7168 + 2.0**-10 if place == "after" else 7168 + 2.0 ** (12 - acc)


def probe_alignment_bits(name):
    """One product 1 (exponent 0) and c = -2^-F, then c = -2^-(F+1), F from the table.
    Inside: c is one unit of the grid 2^-F (kept: 1 - 2^-F, truncated toward zero into
    the accumulator: 1 - 2^-min(F, acc + 1)), then half a unit (dropped: 1). After the
    block: RN(1 - 2^-25) is a tie, even: 1; RN(1 - 2^-26) = 1."""
    _, n, f, acc, place = NV[name]
    keep = run(name, [1.0], [1.0], -(2.0**-f))
    drop = run(name, [1.0], [1.0], -(2.0 ** -(f + 1)))
    if place == "after":
        return (keep, drop), (1.0, 1.0)
    return (keep, drop), (1 - 2.0 ** -min(f, acc + 1), 1.0)


def probe_amd_c_alignment(name):
    """Product 1, c = -2^-25 and c = -2^-26. CDNA3 (16-bit, TF32) rounds c down to a
    multiple of 2^(E - 24) = 2^-24 before adding: -2^-24, so 1 - 2^-24 (an FP32 value)
    both times; CDNA3 FP8 truncates toward zero: c -> 0, 1. Exact (CDNA1) and RN (CDNA2):
    RN(1 - 2^-25) is a tie (even: 1), RN(1 - 2^-26) = 1."""
    kind = AMD[name][2]
    got = (run(name, [1.0], [1.0], -(2.0**-25)), run(name, [1.0], [1.0], -(2.0**-26)))
    want = (1 - 2.0**-24,) * 2 if kind == "trunc" else (1.0, 1.0)
    return got, want


UNNORM = {  # (F, format kind) -> s, x, y with x y = 2^(2s - F), 1.5 * 2^s a format value
    (23, "16"): (0, 2.0**-12, 2.0**-11), (24, "16"): (0, 2.0**-12, 2.0**-12),
    (25, "16"): (0, 2.0**-12, 2.0**-13), (25, "8"): (8, 2.0**-6, 2.0**-3),
    (13, "8"): (0, 2.0**-6, 2.0**-7),
}


def probe_unnormalised_exponent(name):
    """(1.5 2^s)^2 - (1.5 2^s)^2 + x y: the product 2.25 * 2^(2s) has exponent 2s (not
    2s + 1), so the grid is 2^(2s - F) and x y = 2^(2s - F) is one whole unit: it
    survives alone (a normalised exponent would drop it)."""
    fmt, n, f, acc, place = NV[name]
    s, x, y = UNNORM[(f, "16" if fmt in SIXTEEN_BIT else "8")]
    big = 1.5 * 2.0**s
    return run(name, [big, -big, x], [big, big, y]), 2.0 ** (2 * s - f)


def probe_c_placement(name):
    """c = 256, one product 0.75 * 2^-6 * 2^-9 = 0.75 * 2^-15 (FP32 ulp at 256: 2^-15).
    C inside with truncation: 256 + 0.75 ulp -> 256 (F = 13: the product is below the
    grid 2^-5 anyway). C added after with RN, or a round-to-nearest unit: 256 + 2^-15."""
    got = run(name, [0.75 * 2**-6], [2.0**-9], 256.0)
    if name in NV and NV[name][4] == "inside":
        return got, 256.0
    return got, 256 + 2.0**-15


def probe_c_passes(name):
    """A = B = 0 and c = 1 + 2^-20: the 13-bit accumulators truncate C too (1); every
    other unit returns C unchanged."""
    k = NV[name][1] if name in NV else AMD[name][1]
    got = run(name, [], [], 1 + 2.0**-20, k=k)
    return got, 1.0 if name in NV and NV[name][3] == 13 else 1 + 2.0**-20


def probe_fp16_output(name):
    """FP16 accumulator: c = 1 (FP16), product 1.5 * 2^-6 * 2^-5 = 0.75 FP16 ulp at 1
    (2^-10): kept by every grid (F >= 13), rounded to nearest: 1 + 2^-10 (toward zero
    would give 1)."""
    return run(name, [1.5 * 2**-6], [2.0**-5], 1.0, out="fp16"), 1 + 2.0**-10


def probe_fp16_overflow(name):
    """FP16 accumulator: 65504 + 4 * 4 = 65520, the midpoint to 2^16: rounds to even,
    2^16, beyond FP16: +Inf."""
    return run(name, [4.0], [4.0], 65504.0, out="fp16"), INF


def probe_fp32_overflow(name):
    """BF16/TF32 products beyond FP32: 2^127 * 2 = 2^128 gives +Inf (and -Inf), also
    with truncation (the hardware, not IEEE roundTowardZero)."""
    return ((run(name, [2.0**127], [2.0]), run(name, [-(2.0**127)], [2.0])), (INF, -INF))


def probe_subnormal_input(name):
    """A subnormal operand reads its format's minimum exponent.
    E4M3 (issue probe): a = [2^-9, 2^-6], b = [256, 2^-6]: 2^-9 reads -6, so the first
    product has exponent 2 (not -1); F = 13: grid 2^-11, 2^-12 dropped: 0.5 (with the
    value's own exponent: 0.500244). F = 25: grid 2^-23, kept: 0.5 + 2^-12.
    E5M2: a = [2^-16, 2^-6], b = [2^15, 2^-7]: exponent -14 + 15 = 1, F = 13: grid 2^-12,
    2^-13 dropped: 0.5; F = 25: 0.5 + 2^-13.
    FP16: a = [2^-24, 2^-20], b = [1, 2^-20]: exponent -14, grid 2^(-14 - F) >= 2^-39,
    2^-40 dropped: 2^-24. BF16/TF32: a = [2^-130, 2^-26], b = [2^100, 2^-26]: exponent
    -26, grid 2^(-26 - F) >= 2^-51, 2^-52 dropped: 2^-30.
    AMD: CDNA2 flushes subnormal inputs (0); the others keep them."""
    fmt = fmt_of(name)
    if name in NV:
        f = NV[name][2]
        if fmt == "e4m3":
            return run(name, [2.0**-9, 2.0**-6], [256.0, 2.0**-6]), \
                0.5 if f == 13 else 0.5 + 2.0**-12
        if fmt == "e5m2":
            return run(name, [2.0**-16, 2.0**-6], [2.0**15, 2.0**-7]), \
                0.5 if f == 13 else 0.5 + 2.0**-13
        if fmt == "fp16":
            return run(name, [2.0**-24, 2.0**-20], [1.0, 2.0**-20]), 2.0**-24
        return run(name, [2.0**-130, 2.0**-26], [2.0**100, 2.0**-26]), 2.0**-30
    kind = AMD[name][2]
    if fmt == "fp16":
        return run(name, [2.0**-24], [1.0]), 0.0 if kind == "ftz" else 2.0**-24
    if fmt in ("bf16", "tf32"):
        return run(name, [2.0**-130], [2.0**100]), 0.0 if kind == "ftz" else 2.0**-30
    # FNUZ FP8: 2^-10 (E4M3FNUZ's smallest subnormal; E5M2FNUZ normal) times 2^7
    return run(name, [2.0**-10], [2.0**7]), 2.0**-3


def probe_block_interior(name):
    """B at index 0, s = 2^(log2 B - F) (one unit of the block's grid, below FP32's ulp
    of B for F >= 24) at index 1, -B at n - 1: in one block s survives the cancellation:
    s. A block boundary between them would round B + s to B first (or to even, for CDNA3)
    and give 0. B = 1024 (32^2) for 16-bit formats, 256 (16^2) for FP8; F = 24 for CDNA3.
    Interleaved halves (F = 25): B and s (indices 0, 1) form the first half, rounded
    toward zero into FP32 (ulp 2^-15 at 256 > s = 2^-17): 256; -B (index n - 1 = 3 mod 4)
    in the second half cancels it: 0."""
    fmt = fmt_of(name)
    n, f = (NV[name][1], NV[name][2]) if name in NV else (AMD[name][1], 24)
    x, eb = (32.0, 10) if fmt in SIXTEEN_BIT else (16.0, 8)
    e = eb - f                      # s = 2^e = 2^(e1) * 2^(e - e1) as format values
    e1 = e // 2
    a = [0.0] * n
    b = [0.0] * n
    a[0], b[0], a[n - 1], b[n - 1] = x, x, -x, x
    a[1], b[1] = 2.0**e1, 2.0 ** (e - e1)
    return run(name, a, b), 0.0 if name in INTERLEAVED else 2.0**e


def probe_e5m2_normal_exponent(name):
    """E5M2 normals go down to 2^-14: a = b = [2^-10, 2^-15] gives products 2^-20
    (exponent -20, the largest) and 2^-30 (2^-15 is subnormal: exponent -14 - 14 = -28).
    Grid 2^(-20 - F) keeps 2^-30 for F >= 10: 2^-20 + 2^-30 (an FP32 and an E8M13 value).
    Reading 2^-10 with E4M3's floor -6 would align at -12 and drop it."""
    return run(name, [2.0**-10, 2.0**-15], [2.0**-10, 2.0**-15]), 2.0**-20 + 2.0**-30


def probe_block_size(name):
    """Products B, -B, t (B = 1024 = 32^2 and t = 2^-20 for 16-bit formats; B = 256 and
    t = 2^-18 (E4M3) or 2^-20 (E5M2, FNUZ: 2^-20) for FP8) with B at index 0 and -B at
    n - 1. t at n - 2 shares their block: the grid 2^(log2 B - F) (F <= 25) drops it,
    0. t at index n starts the next block: t."""
    fmt = fmt_of(name)
    n = NV[name][1] if name in NV else AMD[name][1]
    if fmt in SIXTEEN_BIT:
        x, r = 32.0, 2.0**-10
    elif fmt == "e4m3":
        x, r = 16.0, 2.0**-9
    else:
        x, r = 16.0, 2.0**-10
    a = [0.0] * (n + 1)
    b = [0.0] * (n + 1)
    a[0], b[0], a[n - 1], b[n - 1] = x, x, -x, x
    same, nxt = list(a), list(a)
    bs, bn = list(b), list(b)
    same[n - 2], bs[n - 2] = r, r
    nxt[n], bn[n] = r, r
    return (run(name, same, bs), run(name, nxt, bn)), (0.0, r * r)


def probe_exact_group(name):
    """1 + 2^-24 + 2^-24 (products 1, 2^-12 * 2^-12, twice). Kept exactly by F >= 24 in
    one block: 1 + 2^-23. F = 23 (V100): grid 2^-23 drops both: 1. CDNA1 FP16 (groups
    of 4, exact): 1 + 2^-23; CDNA1 BF16 (groups of 2): RN(1 + 2^-24) is a tie, 1, twice:
    1. CDNA2: (1 + 2^-24) rounds to 1 in FP32: 1. CDNA3: F = 24 below the products'
    exponent 0 keeps them: 1 + 2^-23."""
    got = run(name, [1.0, 2.0**-12, 2.0**-12], [1.0, 2.0**-12, 2.0**-12])
    if name in NV:
        return got, 1.0 if NV[name][2] == 23 else 1 + 2.0**-23
    want = {"MI100-FP16": 1 + 2.0**-23, "MI100-BF16": 1.0, "MI250X-FP16": 1.0,
            "MI250X-BF16": 1.0}.get(name, 1 + 2.0**-23)
    return got, want


def probe_round_down(name):
    """c = 1 + 2^-23, products -2^-24 (-2^-12 * 2^-12) and 2^-40 (2^-20 * 2^-20).
    Exact: 1 + 2^-24 + 2^-40, above the midpoint: RN 1 + 2^-23 (CDNA1; CDNA2 BF16 too,
    its FP32 sums being exact here). CDNA2 FP16 flushes the subnormal 2^-20: 1 + 2^-24,
    a tie, even: 1. CDNA3 rounds the products' sum down to 2^(E - 31) = 2^-31: -2^-24,
    the tie again: 1. NVIDIA, C inside: F >= 24 keeps -2^-24 and drops 2^-40, truncated
    into FP32: 1; F = 23 truncates -2^-24 toward zero: 1 + 2^-23."""
    got = run(name, [2.0**-12, 2.0**-20], [-(2.0**-12), 2.0**-20], 1 + 2.0**-23)
    if name in NV:
        return got, 1 + 2.0**-23 if NV[name][2] == 23 else 1.0
    want = {"MI100-FP16": 1 + 2.0**-23, "MI100-BF16": 1 + 2.0**-23, "MI250X-FP16": 1.0,
            "MI250X-BF16": 1 + 2.0**-23}.get(name, 1.0)
    return got, want


def probe_odd_even(name):
    """CDNA3 FP8: 16 * 16 = 256 at index 0, six products 1.5 * 2^-8 * 2^-9 = 0.75 * 2^-16
    at the odd indices 1..11. The odd half is summed on its own (exactly 4.5 * 2^-16),
    then truncated to 2^(8 - 24) = 2^-16: 4 units, 256 + 2^-14 (an FP32 value). One
    fused sum over all 16 would truncate each small product to 0: 256."""
    a = [16.0] + [0.0] * 11
    b = [16.0] + [0.0] * 11
    for i in range(1, 12, 2):
        a[i], b[i] = 1.5 * 2.0**-8, 2.0**-9
    return run(name, a, b), 256 + 2.0**-14


ALL_NV = sorted(NV)
FP16_OUT = [n for n in ALL_NV]
PROBE_TABLE = {
    "rounding": (probe_rounding, ALL_NV + sorted(AMD)),
    "alignment bits": (probe_alignment_bits, ALL_NV),
    "carry then truncation": (probe_carry, ALL_NV),
    "C alignment (AMD)": (probe_amd_c_alignment, sorted(AMD)),
    "unnormalised exponent": (probe_unnormalised_exponent, ALL_NV),
    "C placement": (probe_c_placement, ALL_NV + sorted(AMD)),
    "C through the accumulator": (probe_c_passes, ALL_NV + sorted(AMD)),
    "FP16 output": (probe_fp16_output, FP16_OUT),
    "FP16 overflow": (probe_fp16_overflow, FP16_OUT),
    "FP32 overflow": (probe_fp32_overflow,
                      [n for n in ALL_NV + sorted(AMD) if fmt_of(n) in ("bf16", "tf32")]),
    "subnormal input": (probe_subnormal_input, ALL_NV + sorted(AMD)),
    "E5M2 normal exponent": (probe_e5m2_normal_exponent,
                             [n for n in ALL_NV if NV[n][0] == "e5m2"]),
    "block size": (probe_block_size,
                   ALL_NV + [n for n in sorted(AMD) if AMD[n][2] in ("trunc", "split")]),
    "block interior": (probe_block_interior,
                       ALL_NV + [n for n in sorted(AMD) if AMD[n][2] in ("trunc", "split")]),
    "exact group": (probe_exact_group,
                    [n for n in ALL_NV + sorted(AMD) if fmt_of(n) in SIXTEEN_BIT]),
    "round down": (probe_round_down,
                   [n for n in ALL_NV + sorted(AMD) if fmt_of(n) in SIXTEEN_BIT]),
    "odd/even halves": (probe_odd_even, ["MI300X-E4M3", "MI300X-E5M2"]),
}
CASES = [(probe, name) for probe, (_, names) in PROBE_TABLE.items() for name in names]


@pytest.mark.parametrize("probe,name", CASES, ids=[f"{p}-{n}" for p, n in CASES])
def test_probe(probe, name):
    got, want = PROBE_TABLE[probe][0](name)
    assert np.array_equal(np.float32(got), np.float32(want)), (name, probe, got, want)


def test_every_preset_is_probed():
    assert set(NV) | set(AMD) | BLOCK_SCALED == set(PRESETS)
    probed = {n for _, n in CASES}
    assert probed == set(NV) | set(AMD)
