"""Tensor-core and matrix-core presets: every GPU and input format, with its source.

A preset is a named accumulation model of one GPU's matrix-multiply-accumulate
instruction, ``"<GPU>-<FORMAT>"`` (``"H100-E4M3"``, ``"L40S-TF32"``, ``"MI300X-BF16"``);
``matmul(a, b, c, accumulate=name, out_format="fp32" | "fp16")`` evaluates D = A B + C
with it. GPUs of one architecture that behave the same share one canonical preset and
are aliases of it (``ALIASES``): A2, A30 and A40 are A100; L4, RTX 4090 and RTX 1000 Ada
are L40S; H200 is H100; B100 and GB200 are B200; MI210 and MI250 are MI250X; MI300A is
MI300X. The names of earlier versions stay aliases too (``"H100-FP8"`` is
``"H100-E4M3"``, ``"B200-FP8"`` is ``"B200-E4M3"``).

Sources (``SOURCES``): [FHMP21] Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021);
[KM25] Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores", arXiv:2512.07004
(2025), Table 3 and the per-GPU MATLAB models; [KM25b] Khattak and Mikaitis,
"Generalized methodology for determining numerical features of hardware floating-point
matrix multipliers", Parts I (IEEE HPEC 2025) and II (AMD CDNA1-3); [MMASim] Xie, Wang,
Yang, Yang, "MMA-Sim: bit-accurate reference model of tensor cores and matrix cores",
arXiv:2511.10909 (2025); [PTX] NVIDIA PTX ISA 8.x, ``mma``, ``wgmma``, ``tcgen05.mma``;
[DSV3] DeepSeek-V3 technical report, arXiv:2412.19437, section 3.3.2 (Hopper FP8
accumulation keeps about 14 bits).

``evidence`` says whether a preset's parameters were measured on that GPU by a source
(``"measured"``: bit-exact agreement with hardware outputs reported) or inferred
(``"inferred"``: from a GPU of the same architecture, or a parameter no source
measured; the note says which).

This table imports the models and no model imports it: it registers :func:`preset` with
``refimpl.matmul.accumulation`` (:func:`~refimpl.matmul.accumulation.preset_model`),
through which ``matmul``'s ``accumulate=``, ``BlockFMA.preset`` and
``block_scaled_matmul`` look a name up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from refimpl.matmul.accumulation import Accumulation, register_preset_lookup
from refimpl.matmul.blockfma import BlockFMA
from refimpl.matmul.blockscaled import BlockScaledFMA
from refimpl.matmul.matrixcore import MatrixCore

SOURCES: dict[str, str] = {
    "FHMP21": "Fasi, Higham, Mikaitis, Pranesh, Numerical behavior of NVIDIA tensor cores, "
              "PeerJ Comput. Sci. 7:e330 (2021)",
    "KM25": "Khattak, Mikaitis, Accurate models of NVIDIA tensor cores, arXiv:2512.07004 "
            "(2025), Table 3 and MATLAB models",
    "KM25data": "Khattak, Mikaitis, published real-GPU outputs of mma.sync.m16n8k32 FP8 "
                "(github.com/north-numerical-computing/MATLAB-tensor-core, "
                "model_validation/<GPU>/<E4M3|E5M2>: 5000 dot products per GPU, format and "
                "output; harness model_validation/CUDA/mma_fp8_output_fp32.cu, _fp16.cu)",
    "KM25b": "Khattak, Mikaitis, Generalized methodology for determining numerical features "
             "of hardware floating-point matrix multipliers, Parts I (HPEC 2025) and II",
    "MMASim": "Xie, Wang, Yang, Yang, MMA-Sim: bit-accurate reference model of tensor cores "
              "and matrix cores, arXiv:2511.10909 (2025)",
    "PTX": "NVIDIA PTX ISA 8.x: mma, wgmma.mma_async, tcgen05.mma",
    "DSV3": "DeepSeek-V3 technical report, arXiv:2412.19437, section 3.3.2",
}


@dataclass(frozen=True)
class Preset:
    """One GPU's matrix instruction for one input format.

    Attributes:
        name: ``"<GPU>-<FORMAT>"``.
        gpu: the GPU measured or modelled (``"H100"``).
        arch: its architecture (``"Hopper"``).
        in_format: the operands' format (a ``refimpl.formats`` name; a pair for mixed).
        instruction: the instruction modelled (``"wgmma.mma_async"``).
        make: builds the accumulation model.
        sources: keys of ``SOURCES``.
        evidence: ``"measured"`` or ``"inferred"``.
        note: what the parameters are and where each comes from.
    """

    name: str
    gpu: str
    arch: str
    in_format: str
    instruction: str
    make: Callable[[], "Accumulation | BlockScaledFMA"]
    sources: tuple[str, ...]
    evidence: str
    note: str

    def model(self) -> "Accumulation | BlockScaledFMA":
        return self.make()

    @property
    def block_scaled(self) -> bool:
        return self.instruction.endswith(".block_scale")


def _bfma(name: str, n: int, f: int, emin, floor, **kw) -> Callable[[], BlockFMA]:
    # BF16 and TF32 MMA instructions have FP32 accumulators only (PTX ISA, mma: .bf16 and
    # .tf32 take .f32 C and D)
    kw.setdefault("fp16_accumulator", not name.endswith(("BF16", "TF32")))
    return lambda: BlockFMA(n, f, "toward_zero", name, input_emin=emin, align_floor=floor, **kw)


def _interleaved(emin: int, floor16) -> BlockFMA:
    """The FP16-accumulator datapath of Hopper mma.sync FP8 (refimpl.matmul.blockfma:
    interleaved halves, C after)."""
    return BlockFMA(32, 25, "toward_zero", input_emin=emin, align_floor=-133,
                    c_placement="after", interleave=True, align_floor_fp16=floor16)


_FP8_EMIN = {"E4M3": -6, "E5M2": -14}
_IN = {"FP16": "fp16", "BF16": "bf16", "TF32": "tf32", "E4M3": "e4m3", "E5M2": "e5m2"}
_EMIN = {"FP16": -14, "BF16": -126, "TF32": -126, **_FP8_EMIN}

_LIST: list[Preset] = []


def _add(name, gpu, arch, fmt, instr, make, sources, evidence, note):
    _LIST.append(Preset(name, gpu, arch, _IN.get(fmt, fmt), instr, make, sources, evidence,
                        note))


def _add_16bit(gpu, arch, instr, n16, f, floor, sources, note, **kw):
    """The FP16, BF16 and TF32 presets of ``gpu``: blocks of ``n16`` products (TF32,
    whose instructions have half the k, ``n16 // 2``), ``f`` fraction bits, RZ;
    ``note`` is formatted with the block size ``n``."""
    for fmt, n in (("FP16", n16), ("BF16", n16), ("TF32", n16 // 2)):
        _add(f"{gpu}-{fmt}", gpu, arch, fmt, instr,
             _bfma(f"{gpu}-{fmt}", n, f, _EMIN[fmt], floor, **kw), sources, "measured",
             note.format(n=n))


def _add_e8m13(name, gpu, arch, fmt, instr, n, floor, sources, note, **kw):
    """An FP8 preset ``name`` with an E8M13 accumulator: blocks of ``n`` products, F = 13
    and C truncated to 13 fraction bits, RZ."""
    _add(name, gpu, arch, fmt, instr,
         _bfma(name, n, 13, _EMIN[fmt], floor, output_fraction_bits=13, **kw), sources,
         "measured", note)



# ---------------------------------------------------------------- NVIDIA Volta, Turing
_add("V100-FP16", "V100", "Volta", "FP16", "mma.m8n8k4 / wmma",
     _bfma("V100-FP16", 4, 23, -14, None), ("FHMP21", "KM25", "MMASim"), "measured",
     "n = 4, F = 23 (no extra alignment bit), RZ; FP16 output RNE")
_add("T4-FP16", "T4", "Turing", "FP16", "mma.m16n8k8",
     _bfma("T4-FP16", 8, 24, -14, None), ("MMASim", "FHMP21"), "measured",
     "n = 8 (one m16n8k8), F = 24 [MMASim]; no alignment floor measured; [FHMP21] "
     "probed T4 with 4-term inputs only")

# One block per GPU generation below, alike in shape on purpose: each states its
# measured block size, fraction bits, floor, sources and evidence.

# ---------------------------------------------------------------- NVIDIA Ampere
_add_16bit("A100", "Ampere", "mma.m16n8k16 (TF32: m16n8k8) / wmma", 8, 24, -132,
           ("KM25", "FHMP21", "MMASim"),
           "n = {n} (half of the instruction's k), F = 24, floor -132, RZ")

# ---------------------------------------------------------------- NVIDIA Ada
_add_16bit("L40S", "Ada Lovelace", "mma.m16n8k16 (TF32: m16n8k8)", 8, 24, -132,
           ("KM25", "MMASim"), "n = {n}, F = 24, RZ; alignment floor -132 inferred from A100")
for _fmt in ("E4M3", "E5M2"):
    _add_e8m13(f"L40S-{_fmt}", "L40S", "Ada Lovelace", _fmt, "mma.m16n8k32", 16, -132,
               ("KM25", "MMASim", "KM25data"),
               "n = 16 (half of k = 32), F = 13 and an E8M13 accumulator (C truncated to 13 "
               "fraction bits too), RZ; FP16 output RNE (two blocks, each rounded into FP16); "
               "bit-exact on the 5000 published L40S (FP32) and Ada RTX 1000 (FP32, FP16) "
               "outputs of each format; floor -132 inferred from A100")

# ---------------------------------------------------------------- NVIDIA Hopper
_add_16bit("H100", "Hopper", "mma.m16n8k16 / wgmma.mma_async", 16, 25, -133,
           ("KM25", "MMASim"), "n = {n}, F = 25 (2 extra alignment bits), floor -133, RZ")
for _fmt in ("E4M3", "E5M2"):
    _add_e8m13(f"H100-{_fmt}", "H100", "Hopper", _fmt, "wgmma.mma_async (FP8)", 32, -133,
               ("KM25", "MMASim", "DSV3"),
               "n = 32, F = 13 and an E8M13 accumulator, RZ; FP16 output RNE; input exponent "
               f"floor {_EMIN[_fmt]} (the format's minimum)")
    _add_e8m13(f"H100-{_fmt}-MMA", "H100", "Hopper", _fmt, "mma.sync.m16n8k32 (FP8)", 32,
               -133, ("KM25", "KM25data"),
               "FP32 accumulator: n = 32, F = 13 and an E8M13 accumulator, RZ ([KM25]'s H100TC.m; "
               "bit-exact on the 5000 published H100 and H200 outputs, which were taken with "
               "C = 0), C inside and truncated to 13 bits inferred (H100TC.m; no published "
               "output has C); FP16 accumulator: two interleaved halves of 16 (k = 0, 1 mod 4, "
               "then 2, 3 mod 4), each rounded to nearest even into FP16, then C added with one "
               "FP16 round to nearest (bit-exact on the 5000 published H100 and H200 outputs "
               "with C; any F >= 18 fits them, F = 25 inferred from the FP16 datapath; no "
               "alignment floor measured)",
               fp16_model=_interleaved(_EMIN[_fmt], None))

# ---------------------------------------------------------------- NVIDIA Blackwell
_add_16bit("B200", "Blackwell", "mma.m16n8k16 / tcgen05.mma", 16, 25, -133,
           ("KM25", "MMASim"),
           "n = {n}, F = 25, floor -133 (FP16 output: -15), RZ; FP16 output RNE",
           align_floor_fp16=-15)
for _fmt in ("E4M3", "E5M2"):
    _add(f"B200-{_fmt}", "B200", "Blackwell", _fmt, "mma.sync.m16n8k32 (FP8)",
         _bfma(f"B200-{_fmt}", 32, 25, _EMIN[_fmt], -133, c_placement="after",
               align_floor_fp16=-15, interleave=True),
         ("KM25", "KM25data", "PTX"), "measured",
         "two interleaved halves of 16 (k = 0, 1 mod 4, then 2, 3 mod 4), F = 25, each "
         "rounded into the accumulator (FP32 RZ, FP16 RNE), then C added with one round "
         "to nearest: bit-exact on the 5000 published B200 outputs with C of each format "
         "and accumulator (C inside one block of 32, [KM25]'s B200TC.m, misses about a "
         "third of the FP32 ones; one block of 32 with C after misses 15-21 % of the FP16 "
         "ones); the halves are [KM25]'s earlier inter_pattern (GEMM.m); inferred: the "
         "halves with FP32 accumulators (the FP32 outputs fit one block of 32 too), F = 25 "
         "with FP16 (any F >= 18 fits), the alignment floors -133 (FP16: -15)")
    _add(f"B200-{_fmt}-TCGEN05", "B200", "Blackwell", _fmt, "tcgen05.mma kind::f8f6f4",
         _bfma(f"B200-{_fmt}-TCGEN05", 32, 25, _EMIN[_fmt], -133, align_floor_fp16=-15),
         ("MMASim", "KM25"), "measured",
         "n = 32, F = 25, C (in tensor memory) inside the block, RZ [MMASim]")

for _name, _kind, _k, _bs, _sf, _f, _ops, _note in (
        ("B200-MXF8F6F4", "mxf8f6f4", 32, 32, "e8m0", 25, "mxfp8/mxfp6/mxfp4",
         "k = 32, E8M0 scale per 32; product exponents e(a) + e(b) + e(sa) + e(sb), "
         "F = 25 with C inside, RZ [MMASim ST-FDPA]"),
        ("B200-MXF4", "mxf4nvf4", 64, 32, "e8m0", 35, "mxfp4",
         "k = 64, E8M0 scale per 32; groups of 16 products summed exactly, group "
         "exponent e(sa) + e(sb), F = 35 with C inside, RZ [MMASim GST-FDPA]"),
        ("B200-NVF4", "mxf4nvf4", 64, 16, "e4m3", 35, "nvfp4",
         "k = 64, UE4M3 scale per 16; groups of 16 summed exactly, term = sum * sig(sa) "
         "sig(sb), exponent e(sa) + e(sb), F = 35, C inside, RZ [MMASim GST-FDPA]")):
    _add(_name, "B200", "Blackwell", _ops, f"tcgen05.mma kind::{_kind}.block_scale",
         (lambda n=_name, kd=_kind, k=_k, bs=_bs, sf=_sf, f=_f:
          BlockScaledFMA(kd, k, bs, sf, f, n)),
         ("MMASim", "PTX"), "measured", _note + "; use block_scaled_matmul/mma_block_scaled")

# ---------------------------------------------------------------- AMD CDNA
def _mc(name: str, kind: str, group: int, emin) -> Callable[[], MatrixCore]:
    return lambda: MatrixCore(kind, group, emin, name)


_IN.update({"E4M3FNUZ": "e4m3fnuz", "E5M2FNUZ": "e5m2fnuz"})
for _fmt, _g in (("FP16", 4), ("BF16", 2)):
    _add(f"MI100-{_fmt}", "MI100", "CDNA1", _fmt, f"v_mfma_f32_*_{_fmt.lower()}",
         _mc(f"MI100-{_fmt}", "exact", _g, _EMIN[_fmt]), ("MMASim", "KM25b"), "measured",
         f"groups of {_g} products and C summed exactly, one RN to FP32 (E-FDPA)")
for _fmt in ("FP16", "BF16"):
    _add(f"MI250X-{_fmt}", "MI250X", "CDNA2", _fmt,
         f"v_mfma_f32_*_{_fmt.lower()}" + ("_1k" if _fmt == "BF16" else ""),
         _mc(f"MI250X-{_fmt}", "ftz_pairwise", 4, _EMIN[_fmt]), ("MMASim", "KM25b"),
         "measured", "FP32 products and pairwise FP32 RN additions of 4, subnormal inputs, "
         "sums and C flushed to zero (FTZ-MUL-ADD); BF16: the _1k instructions (the older "
         "BF16 ones add pairs)")
for _fmt, _g, _kind, _emin in (("FP16", 8, "truncated", -14), ("BF16", 8, "truncated", -126),
                               ("TF32", 4, "truncated", -126),
                               ("E4M3", 16, "truncated_split", -7),
                               ("E5M2", 16, "truncated_split", -15)):
    _in = _fmt + "FNUZ" if _fmt.startswith("E") else _fmt
    _add(f"MI300X-{_fmt}", "MI300X", "CDNA3", _in,
         "v_mfma_f32_*_" + {"TF32": "xf32", "E4M3": "fp8_fp8", "E5M2": "bf8_bf8"}.get(
             _fmt, _fmt.lower()),
         _mc(f"MI300X-{_fmt}", _kind, _g, _emin), ("MMASim", "KM25b"), "measured",
         f"groups of {_g}: products truncated 24 bits below their largest exponent, C "
         "added after with round-down alignment (2^(E-31) and 2^(E-24)), RN to FP32 "
         "(TR-FDPA)" if _kind == "truncated" else
         "groups of 16 in odd and even halves, each truncated 24 bits below its largest "
         "exponent, C added after with truncation, RN to FP32 (GTR-FDPA); operands in the "
         "FNUZ formats (E4M3FNUZ, E5M2FNUZ); the truncation (not round-down) when C joins "
         "follows [MMASim]'s later release")

#: canonical presets by name
PRESETS: dict[str, Preset] = {p.name: p for p in _LIST}

ALIASES: dict[str, str] = {"H100-FP8": "H100-E4M3", "B200-FP8": "B200-E4M3"}
for _p in list(PRESETS):
    _gpu, _, _rest = _p.partition("-")
    for _canon, _others in (("A100", ("A2", "A30", "A40")),
                            ("L40S", ("L4", "RTX4090", "RTX1000ADA")),
                            ("H100", ("H200",)), ("B200", ("B100", "GB200")),
                            ("MI250X", ("MI210", "MI250")), ("MI300X", ("MI300A", "MI300"))):
        if _gpu == _canon:
            for _o in _others:
                ALIASES[f"{_o}-{_rest}"] = _p


def canonical(name: str) -> str:
    """The canonical preset name of ``name`` (a preset or an alias, any letter case).

    Raises:
        ValueError: an unknown name (the message lists the canonical names).
    """
    if not isinstance(name, str):
        raise TypeError(f"preset name must be a str, got {type(name).__name__}")
    key = name.strip().upper()
    for table in (PRESETS, ALIASES):
        for k in table:
            if k.upper() == key:
                return k if table is PRESETS else ALIASES[k]
    raise ValueError(f"unknown tensor-core preset {name!r}; known: {', '.join(PRESETS)} "
                     f"(aliases: {', '.join(ALIASES)})")


def is_preset(name: object) -> bool:
    """Whether ``name`` names a preset or an alias."""
    try:
        canonical(name)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def preset(name: str) -> "Accumulation | BlockScaledFMA":
    """The model of preset ``name`` (aliases accepted): an accumulation model for
    ``matmul``, or a :class:`BlockScaledFMA` for ``block_scaled_matmul``."""
    return PRESETS[canonical(name)].model()


def aliases_of(name: str) -> list[str]:
    """The aliases of canonical preset ``name``."""
    return sorted(a for a, c in ALIASES.items() if c == name)


register_preset_lookup(preset)
