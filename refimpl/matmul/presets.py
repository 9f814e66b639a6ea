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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from refimpl.matmul.accumulation import Accumulation
from refimpl.matmul.blockfma import BlockFMA

SOURCES: dict[str, str] = {
    "FHMP21": "Fasi, Higham, Mikaitis, Pranesh, Numerical behavior of NVIDIA tensor cores, "
              "PeerJ Comput. Sci. 7:e330 (2021)",
    "KM25": "Khattak, Mikaitis, Accurate models of NVIDIA tensor cores, arXiv:2512.07004 "
            "(2025), Table 3 and MATLAB models",
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
    make: Callable[[], Accumulation]
    sources: tuple[str, ...]
    evidence: str
    note: str

    def model(self) -> Accumulation:
        return self.make()


def _bfma(name: str, n: int, f: int, emin, floor, **kw) -> Callable[[], BlockFMA]:
    return lambda: BlockFMA(n, f, "toward_zero", name, input_emin=emin, align_floor=floor, **kw)


_FP8_EMIN = {"E4M3": -6, "E5M2": -14}
_IN = {"FP16": "fp16", "BF16": "bf16", "TF32": "tf32", "E4M3": "e4m3", "E5M2": "e5m2"}
_EMIN = {"FP16": -14, "BF16": -126, "TF32": -126, **_FP8_EMIN}

_LIST: list[Preset] = []


def _add(name, gpu, arch, fmt, instr, make, sources, evidence, note):
    _LIST.append(Preset(name, gpu, arch, _IN.get(fmt, fmt), instr, make, sources, evidence,
                        note))


# ---------------------------------------------------------------- NVIDIA Volta, Turing
_add("V100-FP16", "V100", "Volta", "FP16", "mma.m8n8k4 / wmma",
     _bfma("V100-FP16", 4, 23, -14, None), ("FHMP21", "KM25", "MMASim"), "measured",
     "n = 4, F = 23 (no extra alignment bit), RZ; FP16 output RNE")
_add("T4-FP16", "T4", "Turing", "FP16", "mma.m16n8k8",
     _bfma("T4-FP16", 8, 24, -14, None), ("MMASim", "FHMP21"), "measured",
     "n = 8 (one m16n8k8), F = 24 [MMASim]; no alignment floor measured; [FHMP21] "
     "probed T4 with 4-term inputs only")

# ---------------------------------------------------------------- NVIDIA Ampere
for _fmt, _n in (("FP16", 8), ("BF16", 8), ("TF32", 4)):
    _add(f"A100-{_fmt}", "A100", "Ampere", _fmt, "mma.m16n8k16 (TF32: m16n8k8) / wmma",
         _bfma(f"A100-{_fmt}", _n, 24, _EMIN[_fmt], -132), ("KM25", "FHMP21", "MMASim"),
         "measured", f"n = {_n} (half of the instruction's k), F = 24, floor -132, RZ")

# ---------------------------------------------------------------- NVIDIA Ada
for _fmt, _n in (("FP16", 8), ("BF16", 8), ("TF32", 4)):
    _add(f"L40S-{_fmt}", "L40S", "Ada Lovelace", _fmt, "mma.m16n8k16 (TF32: m16n8k8)",
         _bfma(f"L40S-{_fmt}", _n, 24, _EMIN[_fmt], -132), ("KM25", "MMASim"), "measured",
         f"n = {_n}, F = 24, RZ; alignment floor -132 inferred from A100")
for _fmt in ("E4M3", "E5M2"):
    _add(f"L40S-{_fmt}", "L40S", "Ada Lovelace", _fmt, "mma.m16n8k32",
         _bfma(f"L40S-{_fmt}", 16, 13, _EMIN[_fmt], -132, output_fraction_bits=13),
         ("KM25", "MMASim"), "measured",
         "n = 16 (half of k = 32), F = 13 and an E8M13 accumulator (C truncated to 13 "
         "fraction bits too), RZ; FP16 output RNE; floor -132 inferred from A100")

# ---------------------------------------------------------------- NVIDIA Hopper
for _fmt, _n in (("FP16", 16), ("BF16", 16), ("TF32", 8)):
    _add(f"H100-{_fmt}", "H100", "Hopper", _fmt, "mma.m16n8k16 / wgmma.mma_async",
         _bfma(f"H100-{_fmt}", _n, 25, _EMIN[_fmt], -133), ("KM25", "MMASim"), "measured",
         f"n = {_n}, F = 25 (2 extra alignment bits), floor -133, RZ")
for _fmt in ("E4M3", "E5M2"):
    _add(f"H100-{_fmt}", "H100", "Hopper", _fmt, "wgmma.mma_async (FP8)",
         _bfma(f"H100-{_fmt}", 32, 13, _EMIN[_fmt], -133, output_fraction_bits=13),
         ("KM25", "MMASim", "DSV3"), "measured",
         "n = 32, F = 13 and an E8M13 accumulator, RZ; FP16 output RNE; input exponent "
         f"floor {_EMIN[_fmt]} (the format's minimum)")
    _add(f"H100-{_fmt}-MMA", "H100", "Hopper", _fmt, "mma.sync.m16n8k32 (FP8)",
         _bfma(f"H100-{_fmt}-MMA", 32, 25, _EMIN[_fmt], -133), ("KM25",), "inferred",
         "mma.sync FP8 runs on the FP16 datapath: n = 32, F = 25, C inside ([KM25]'s H200 "
         "model, the same as its B200 one); no 13-bit truncation of C (measured by "
         "SageAttention/DeepGEMM users on H100 mma.sync)")

# ---------------------------------------------------------------- NVIDIA Blackwell
for _fmt, _n in (("FP16", 16), ("BF16", 16), ("TF32", 8)):
    _add(f"B200-{_fmt}", "B200", "Blackwell", _fmt, "mma.m16n8k16 / tcgen05.mma",
         _bfma(f"B200-{_fmt}", _n, 25, _EMIN[_fmt], -133, align_floor_fp16=-15),
         ("KM25", "MMASim"), "measured",
         f"n = {_n}, F = 25, floor -133 (FP16 output: -15), RZ; FP16 output RNE")
for _fmt in ("E4M3", "E5M2"):
    _add(f"B200-{_fmt}", "B200", "Blackwell", _fmt, "mma.sync.m16n8k32 (FP8)",
         _bfma(f"B200-{_fmt}", 32, 25, _EMIN[_fmt], -133, c_placement="after",
               align_floor_fp16=-15),
         ("KM25", "PTX"), "measured",
         "n = 32, F = 25, the products' sum rounded RZ to FP32, then C added with a "
         "separate FP32 round-to-nearest (C inside, [KM25]'s B200TC.m, is off by one ulp "
         "on about a third of random C)")
    _add(f"B200-{_fmt}-TCGEN05", "B200", "Blackwell", _fmt, "tcgen05.mma kind::f8f6f4",
         _bfma(f"B200-{_fmt}-TCGEN05", 32, 25, _EMIN[_fmt], -133, align_floor_fp16=-15),
         ("MMASim", "KM25"), "measured",
         "n = 32, F = 25, C (in tensor memory) inside the block, RZ [MMASim]")

#: canonical presets by name
PRESETS: dict[str, Preset] = {p.name: p for p in _LIST}

ALIASES: dict[str, str] = {"H100-FP8": "H100-E4M3", "B200-FP8": "B200-E4M3"}
for _p in list(PRESETS):
    _gpu, _, _rest = _p.partition("-")
    for _canon, _others in (("A100", ("A2", "A30", "A40")),
                            ("L40S", ("L4", "RTX4090", "RTX1000ADA")),
                            ("H100", ("H200",)), ("B200", ("B100", "GB200"))):
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


def preset(name: str) -> Accumulation:
    """The accumulation model of preset ``name`` (aliases accepted)."""
    return PRESETS[canonical(name)].model()


def aliases_of(name: str) -> list[str]:
    """The aliases of canonical preset ``name``."""
    return sorted(a for a, c in ALIASES.items() if c == name)
