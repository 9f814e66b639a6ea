"""The GPU catalogue: one registry of accelerators, every figure with its source.

Throughputs are *dense* tensor/matrix-core peaks in TFLOPS (TOPS for integers), as
the vendors print them without 2:4 sparsity; bandwidth in GB/s (10**9 bytes/s) and
capacity in GB (10**9 bytes), the units of the datasheets.
On-chip sizes are binary (KiB, MiB), as the architecture whitepapers mean them.
A figure a vendor does not publish is ``None``, never a guess.

Entries are SXM/OAM boards unless the name says otherwise. Use :func:`get` by name
(case-insensitive; ``"H100"`` is the H100 SXM5) and :func:`names` for the list.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

__all__ = ["GPUSpec", "MemoryLevel", "PRECISIONS", "FLOAT_PRECISIONS", "CATALOGUE", "get", "names"]

#: precision keys of ``GPUSpec.dense_tflops``, widest first
PRECISIONS = ("fp64", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8", "int4")
#: floating-point precisions, widest first (the order that defines "lowest")
FLOAT_PRECISIONS = ("fp64", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4")

# Source labels, one per document (sections named in each entry's sources).
_A100_SM = ("NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), 'A100 SM "
            "Architecture' and Table 3")
_A100_MEM = ("approximate figures: capacities from the NVIDIA A100 Tensor Core GPU "
             "Architecture whitepaper (2020); latencies of the order measured by "
             "Abdelkhalik et al., 'Demystifying the Nvidia Ampere Architecture through "
             "Microbenchmarking and Instruction-level Analysis', arXiv:2208.11174 (2022)")
_H20_PB = "NVIDIA H20 product brief (partner document)"
_PG_THR = ("CUDA C Programming Guide, 'Arithmetic Instructions' throughput table: "
           "16 results/clock/SM for exp2/log2/rcp/rsqrt/sin/cos (cc 7.x-9.0)")
_PG_CC = ("CUDA C Programming Guide, 'Technical Specifications per Compute Capability': "
          "64K 32-bit registers per SM, warp size 32")
_V100_WP = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017), Table 1"
_V100_DS = "NVIDIA Tesla V100 datasheet (SXM2)"
_A100_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 3"
_A100_DS = "NVIDIA A100 80GB datasheet (SXM4)"
_H100_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3"
_H100_DS = "NVIDIA H100 datasheet (SXM5), dense = half the with-sparsity figure"
_H200_DS = "NVIDIA H200 datasheet (SXM), dense = half the with-sparsity figure"
_B200_DS = "NVIDIA HGX B200 / DGX B200 datasheet, per GPU, dense = half of sparse"
_FA3 = ("FlashAttention-3 paper (Shah et al. 2024), section 3.3: H100 SXM5 has 989 "
        "TFLOPS FP16 matmul but 3.9 TFLOPS of special functions")
_MI300X_DS = "AMD Instinct MI300X datasheet"
_CDNA3_WP = "AMD CDNA 3 Instruction Set Architecture / CDNA 3 whitepaper (2023)"


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a memory hierarchy, with the approximate figures a text gives.

    Attributes:
        name: "registers", "shared/L1", ...
        latency_cycles: (low, high) access latency in clock cycles (equal when the
            source gives one figure).
        capacity_bytes: capacity; ``per_sm`` says whether per SM or per GPU.
        bandwidth_bytes_per_s: bandwidth (per SM when ``per_sm``), None if not given.
        per_sm: capacity and bandwidth are per SM.
        note: qualifiers of the source ("on hit", "broadcast to 32 threads").
    """

    name: str
    latency_cycles: tuple[float, float]
    capacity_bytes: tuple[float, ...]
    bandwidth_bytes_per_s: float | None
    per_sm: bool
    note: str = ""


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator.

    Attributes:
        name: catalogue key, e.g. "H100".
        vendor, architecture, compute_capability: e.g. "NVIDIA", "Hopper", "9.0"
            (AMD: the gfx target).
        year: year of introduction, None if the sources do not give it.
        form_factor: "SXM5", "OAM", ...
        dense_tflops: precision -> dense tensor/matrix-core peak (TFLOPS or TOPS),
            keys from :data:`PRECISIONS`; a precision the hardware lacks is absent.
        vector_fp32_tflops: non-tensor FP32 peak.
        memory_bandwidth_gbs: HBM bandwidth, GB/s.
        memory_gb: HBM capacity, GB.
        sm_count: streaming multiprocessors (AMD: compute units).
        smem_per_sm_kib: largest shared memory (LDS) one SM can give its blocks, KiB.
        l1_smem_per_sm_kib: combined L1 + shared memory per SM, KiB.
        regfile_per_sm_kib: register file per SM, KiB.
        l2_mib: last-level on-die L2, MiB.
        warp_size: threads per warp (AMD: wavefront).
        boost_clock_mhz: the clock the vendor's peak figures are computed at.
        sfu_ops_per_clk_per_sm: special-function (exp2, rcp, ...) results per clock
            per SM.
        fp32_cores_per_sm, tensor_cores_per_sm: per SM (AMD: stream processors and
            matrix cores per CU).
        memory_hierarchy: levels with latency/capacity/bandwidth where a source
            gives them (A100: approximate figures, see its ``sources``).
        sources: field name -> where the figure comes from (dense_tflops per
            precision as ``"dense_tflops.bf16"``).
    """

    name: str
    vendor: str
    architecture: str
    compute_capability: str
    year: int | None
    form_factor: str
    dense_tflops: Mapping[str, float]
    vector_fp32_tflops: float | None
    memory_bandwidth_gbs: float
    memory_gb: float | None
    sm_count: int | None
    smem_per_sm_kib: int | None
    l1_smem_per_sm_kib: int | None
    regfile_per_sm_kib: int | None
    l2_mib: float | None
    warp_size: int
    boost_clock_mhz: float | None
    sfu_ops_per_clk_per_sm: int | None
    fp32_cores_per_sm: int | None = None
    tensor_cores_per_sm: int | None = None
    memory_hierarchy: tuple[MemoryLevel, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.dense_tflops) - set(PRECISIONS)
        if unknown:
            raise ValueError(f"{self.name}: unknown precisions {sorted(unknown)}; "
                             f"known: {PRECISIONS}")
        object.__setattr__(self, "dense_tflops", MappingProxyType(dict(self.dense_tflops)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def __hash__(self) -> int:  # the mappings are unhashable; names identify entries
        return hash((self.name, self.vendor, self.form_factor))

    # ---- derived figures (SI units) ----

    def flops(self, precision: str) -> float:
        """Dense peak of ``precision`` in FLOP/s (OP/s for integers).

        Raises:
            ValueError: no figure for ``precision`` on this GPU.
        """
        if precision not in self.dense_tflops:
            raise ValueError(
                f"{self.name} has no {precision!r} figure; it has "
                f"{', '.join(self.dense_tflops)}"
            )
        return self.dense_tflops[precision] * 1e12

    @property
    def bandwidth(self) -> float:
        """HBM bandwidth in bytes/s."""
        return self.memory_bandwidth_gbs * 1e9

    @property
    def memory_bytes(self) -> float | None:
        """HBM capacity in bytes (decimal GB, as the datasheets count)."""
        return None if self.memory_gb is None else self.memory_gb * 1e9

    @property
    def half_precision(self) -> str:
        """"bf16" where supported, else "fp16" (the half-precision tensor peak)."""
        return "bf16" if "bf16" in self.dense_tflops else "fp16"

    @property
    def lowest_precision(self) -> str:
        """The narrowest floating-point format with a tensor-core figure.

        V100 FP16, A100 BF16, H100 FP8, B200 FP4 (integer formats are not counted).
        """
        present = [p for p in FLOAT_PRECISIONS if p in self.dense_tflops]
        return present[-1]

    @property
    def sfu_ops_per_second(self) -> float | None:
        """Special-function (exp2) throughput: SMs x results/clock/SM x clock."""
        if None in (self.sm_count, self.sfu_ops_per_clk_per_sm, self.boost_clock_mhz):
            return None
        return self.sm_count * self.sfu_ops_per_clk_per_sm * self.boost_clock_mhz * 1e6

    def source(self, name: str) -> str:
        """Where figure ``name`` comes from (``"dense_tflops.fp8"`` for a precision).

        Raises:
            ValueError: no source recorded for ``name``.
        """
        if name not in self.sources:
            raise ValueError(f"{self.name}: no source recorded for {name!r}")
        return self.sources[name]


def _src(common: dict[str, str], **extra: str) -> dict[str, str]:
    out = dict(common)
    out.update({k.replace("__", "."): v for k, v in extra.items()})
    return out


# The catalogue: one GPUSpec per GPU with every figure and its source. The entries are
# alike in shape on purpose (a table of data, one row per GPU).
_V100 = GPUSpec(
    name="V100", vendor="NVIDIA", architecture="Volta", compute_capability="7.0",
    year=2017, form_factor="SXM2",
    dense_tflops={"fp64": 7.8, "fp16": 125.0},
    vector_fp32_tflops=15.7,
    memory_bandwidth_gbs=900.0, memory_gb=32.0,
    sm_count=80, smem_per_sm_kib=96, l1_smem_per_sm_kib=128, regfile_per_sm_kib=256,
    l2_mib=6.0, warp_size=32, boost_clock_mhz=1530.0, sfu_ops_per_clk_per_sm=16,
    fp32_cores_per_sm=64, tensor_cores_per_sm=8,
    sources=_src(
        {"fp32_cores_per_sm": _V100_WP, "tensor_cores_per_sm": _V100_WP,
         "year": _V100_WP, "memory_bandwidth_gbs": _V100_DS, "memory_gb": _V100_DS,
         "dense_tflops.fp16": _V100_DS, "dense_tflops.fp64": _V100_DS,
         "vector_fp32_tflops": _V100_DS, "sm_count": _V100_WP,
         "smem_per_sm_kib": _V100_WP, "l1_smem_per_sm_kib": _V100_WP,
         "regfile_per_sm_kib": _V100_WP, "l2_mib": _V100_WP, "warp_size": _PG_CC,
         "boost_clock_mhz": _V100_WP, "sfu_ops_per_clk_per_sm": _PG_THR}),
)

_KIB, _MIB = 1024, 1024 * 1024
#: the A100 memory hierarchy (approximate figures: ``_A100_MEM``)
_A100_HIERARCHY = (
    MemoryLevel("registers", (1, 1), (256 * _KIB,), 10e12, True, "~10 TB/s per SM"),
    MemoryLevel("shared/L1", (20, 40), (192 * _KIB,), 1e12, True, "~1 TB/s per SM"),
    MemoryLevel("L2", (200, 200), (40 * _MIB,), 3e12, False, "~200 cycles, ~3 TB/s"),
    MemoryLevel("HBM2e", (500, 500), (40e9, 80e9), 2039e9, False, "40 or 80 GB boards"),
    MemoryLevel("constant", (5, 5), (64 * _KIB,), None, False,
                "~5 cycles on a cache hit; broadcast to 32 threads"),
)

_A100 = GPUSpec(
    name="A100", vendor="NVIDIA", architecture="Ampere", compute_capability="8.0",
    year=2020, form_factor="SXM4",
    dense_tflops={"fp64": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0,
                  "int8": 624.0, "int4": 1248.0},
    vector_fp32_tflops=19.5,
    memory_bandwidth_gbs=2039.0, memory_gb=80.0,
    sm_count=108, smem_per_sm_kib=164, l1_smem_per_sm_kib=192, regfile_per_sm_kib=256,
    l2_mib=40.0, warp_size=32, boost_clock_mhz=1410.0, sfu_ops_per_clk_per_sm=16,
    fp32_cores_per_sm=64, tensor_cores_per_sm=4,
    memory_hierarchy=_A100_HIERARCHY,
    sources=_src(
        {"memory_hierarchy": _A100_MEM,
         "fp32_cores_per_sm": _A100_SM, "tensor_cores_per_sm": _A100_SM,
         "year": _A100_WP, "memory_bandwidth_gbs": _A100_DS,
         "memory_gb": _A100_DS, "dense_tflops.bf16": _A100_DS + "; " + _A100_WP,
         "dense_tflops.fp16": _A100_WP, "dense_tflops.fp64": _A100_WP + " (FP64 tensor core)",
         "dense_tflops.tf32": _A100_WP, "dense_tflops.int8": _A100_WP,
         "dense_tflops.int4": _A100_WP,
         "vector_fp32_tflops": _A100_DS + " (FP32 19.5 TFLOPS)",
         "sm_count": _A100_SM, "smem_per_sm_kib": _A100_WP + " (164 KB of the 192 KB)",
         "l1_smem_per_sm_kib": _A100_SM, "regfile_per_sm_kib": _A100_SM, "l2_mib": _A100_WP,
         "warp_size": _PG_CC, "boost_clock_mhz": _A100_WP,
         "sfu_ops_per_clk_per_sm": _PG_THR}),
)

_H100 = GPUSpec(
    name="H100", vendor="NVIDIA", architecture="Hopper", compute_capability="9.0",
    year=2022, form_factor="SXM5",
    dense_tflops={"fp64": 67.0, "tf32": 494.5, "fp16": 989.0, "bf16": 989.0,
                  "fp8": 1979.0, "int8": 1979.0},
    vector_fp32_tflops=67.0,
    memory_bandwidth_gbs=3350.0, memory_gb=80.0,
    sm_count=132, smem_per_sm_kib=228, l1_smem_per_sm_kib=256, regfile_per_sm_kib=256,
    l2_mib=50.0, warp_size=32, boost_clock_mhz=1830.0, sfu_ops_per_clk_per_sm=16,
    fp32_cores_per_sm=128, tensor_cores_per_sm=4,
    sources=_src(
        {"fp32_cores_per_sm": _H100_WP, "tensor_cores_per_sm": _H100_WP,
         "year": _H100_WP, "memory_bandwidth_gbs": _H100_DS,
         "memory_gb": _H100_DS, "dense_tflops.bf16": _H100_DS,
         "dense_tflops.fp16": _H100_DS, "dense_tflops.fp8": _H100_DS,
         "dense_tflops.fp64": _H100_DS + " (FP64 tensor core)",
         "dense_tflops.tf32": _H100_DS, "dense_tflops.int8": _H100_DS,
         "vector_fp32_tflops": _H100_DS, "sm_count": _H100_WP + " (SXM5)",
         "smem_per_sm_kib": _H100_WP, "l1_smem_per_sm_kib": _H100_WP,
         "regfile_per_sm_kib": _H100_WP, "l2_mib": _H100_WP, "warp_size": _PG_CC,
         "boost_clock_mhz": "derived: the clock of the dense FP16 peak, 989 TFLOPS / "
                            "(132 SMs x 4096 FLOP/clk/SM, " + _H100_WP + ")",
         "sfu_ops_per_clk_per_sm": _PG_THR + "; consistent with " + _FA3}),
)

#: the GH100 of the H100 SXM5 (the same SMs, clocks and tensor peaks) with 141 GB of HBM3e
_H200 = replace(
    _H100, name="H200", year=2024, form_factor="SXM",
    memory_bandwidth_gbs=4800.0, memory_gb=141.0,
    sources=_src(
        {"fp32_cores_per_sm": _H100_WP, "tensor_cores_per_sm": _H100_WP,
         "year": _H200_DS, "memory_bandwidth_gbs": _H200_DS, "memory_gb": _H200_DS,
         **{f"dense_tflops.{p}": _H200_DS
            for p in ("fp64", "tf32", "fp16", "bf16", "fp8", "int8")},
         "vector_fp32_tflops": _H200_DS,
         "sm_count": "same GH100 configuration as H100 SXM5: " + _H100_WP,
         "smem_per_sm_kib": _H100_WP, "l1_smem_per_sm_kib": _H100_WP,
         "regfile_per_sm_kib": _H100_WP, "l2_mib": _H100_WP, "warp_size": _PG_CC,
         "boost_clock_mhz": "as H100 SXM5 (identical tensor peaks), derived the same way",
         "sfu_ops_per_clk_per_sm": _PG_THR}),
)

_B200 = GPUSpec(
    name="B200", vendor="NVIDIA", architecture="Blackwell", compute_capability="10.0",
    year=2024, form_factor="SXM6",
    dense_tflops={"fp64": 40.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0,
                  "fp8": 4500.0, "fp6": 4500.0, "fp4": 9000.0, "int8": 4500.0},
    vector_fp32_tflops=None,
    memory_bandwidth_gbs=8000.0, memory_gb=180.0,
    sm_count=None, smem_per_sm_kib=228, l1_smem_per_sm_kib=256, regfile_per_sm_kib=256,
    l2_mib=None, warp_size=32, boost_clock_mhz=None, sfu_ops_per_clk_per_sm=None,
    sources=_src(
        {"year": _B200_DS, "memory_bandwidth_gbs": _B200_DS, "memory_gb": _B200_DS,
         **{f"dense_tflops.{p}": _B200_DS
            for p in ("fp64", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")},
         "smem_per_sm_kib": _PG_CC + " (cc 10.0: 228 KB shared per SM)",
         "l1_smem_per_sm_kib": _PG_CC + " (cc 10.0: 256 KB unified L1/shared)",
         "regfile_per_sm_kib": _PG_CC, "warp_size": _PG_CC}),
)

_H20 = GPUSpec(
    name="H20", vendor="NVIDIA", architecture="Hopper", compute_capability="9.0",
    year=2024, form_factor="SXM",
    dense_tflops={"bf16": 148.0, "fp16": 148.0, "fp8": 296.0, "int8": 296.0},
    vector_fp32_tflops=44.0,
    memory_bandwidth_gbs=4000.0, memory_gb=96.0,
    sm_count=None, smem_per_sm_kib=228, l1_smem_per_sm_kib=256, regfile_per_sm_kib=256,
    l2_mib=None, warp_size=32, boost_clock_mhz=None, sfu_ops_per_clk_per_sm=16,
    fp32_cores_per_sm=128, tensor_cores_per_sm=4,
    sources=_src(
        {"fp32_cores_per_sm": "Hopper SM as in " + _H100_WP,
         "tensor_cores_per_sm": "Hopper SM as in " + _H100_WP,
         "dense_tflops.bf16": _H20_PB, "memory_bandwidth_gbs": _H20_PB,
         "dense_tflops.fp16": _H20_PB, "dense_tflops.fp8": _H20_PB,
         "dense_tflops.int8": _H20_PB, "vector_fp32_tflops": _H20_PB,
         "memory_gb": _H20_PB, "year": _H20_PB,
         "smem_per_sm_kib": _PG_CC + " (cc 9.0)", "l1_smem_per_sm_kib": _H100_WP,
         "regfile_per_sm_kib": _PG_CC, "warp_size": _PG_CC,
         "sfu_ops_per_clk_per_sm": _PG_THR}),
)

_MI300X = GPUSpec(
    name="MI300X", vendor="AMD", architecture="CDNA 3", compute_capability="gfx942",
    year=2023, form_factor="OAM",
    dense_tflops={"fp64": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4,
                  "fp8": 2614.9, "int8": 2614.9},
    vector_fp32_tflops=163.4,
    memory_bandwidth_gbs=5300.0, memory_gb=192.0,
    sm_count=304, smem_per_sm_kib=64, l1_smem_per_sm_kib=None, regfile_per_sm_kib=512,
    l2_mib=32.0, warp_size=64, boost_clock_mhz=2100.0, sfu_ops_per_clk_per_sm=None,
    fp32_cores_per_sm=64, tensor_cores_per_sm=4,
    sources=_src(
        {"fp32_cores_per_sm": _MI300X_DS + " (19,456 stream processors / 304 CUs)",
         "tensor_cores_per_sm": _MI300X_DS + " (1,216 matrix cores / 304 CUs)",
         "memory_bandwidth_gbs": _MI300X_DS,
         "memory_gb": _MI300X_DS,
         "dense_tflops.bf16": _MI300X_DS,
         "dense_tflops.fp8": _MI300X_DS,
         **{f"dense_tflops.{p}": _MI300X_DS for p in ("fp64", "tf32", "fp16", "int8")},
         "vector_fp32_tflops": _MI300X_DS, "year": _MI300X_DS,
         "sm_count": _CDNA3_WP + " (8 XCDs x 38 CUs); " + _MI300X_DS,
         "smem_per_sm_kib": _CDNA3_WP + " (64 KB LDS per CU)",
         "regfile_per_sm_kib": _CDNA3_WP + " (512 KB VGPR file per CU)",
         "l2_mib": _CDNA3_WP + " (4 MB L2 per XCD x 8; plus 256 MB Infinity Cache)",
         "warp_size": _CDNA3_WP + " (wave64)", "boost_clock_mhz": _MI300X_DS}),
)

#: name -> spec: the one registry of GPUs (read by the roofline CLI and the tests)
CATALOGUE: Mapping[str, GPUSpec] = MappingProxyType(
    {g.name: g for g in (_V100, _A100, _H100, _H200, _B200, _H20, _MI300X)}
)


def names() -> tuple[str, ...]:
    """Catalogue names in catalogue order."""
    return tuple(CATALOGUE)


def get(name: str) -> GPUSpec:
    """The catalogue entry ``name`` (case-insensitive, surrounding spaces ignored).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: unknown name; the message lists the known ones.
    """
    if not isinstance(name, str):
        raise TypeError(f"GPU name must be a string, got {type(name).__name__}")
    key = name.strip().upper()
    for known, spec in CATALOGUE.items():
        if known.upper() == key:
            return spec
    raise ValueError(f"unknown GPU {name!r}; known: {', '.join(CATALOGUE)}")
