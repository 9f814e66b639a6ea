"""What a thread-block simulation runs
(:func:`hardware.pipeline.schedule.simulate_block`): the main-loop :class:`Schedule` and
its registry, and the per-SM :class:`UnitCosts`.

Both the engine (:mod:`hardware.pipeline.schedule`) and its result
(:mod:`hardware.pipeline.timeline`) refer to these types, so they live here, below both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

__all__ = [
    "Schedule",
    "SCHEDULES",
    "UnitCosts",
    "SOFTMAX_FP32_OPS_PER_SCORE",
    "L2_LATENCY_CYCLES",
    "HBM_LATENCY_CYCLES",
    "DTYPE_BYTES",
]

#: FP32 instructions per score in the softmax besides the exp2: the scale-and-subtract
#: FMA, the row-max compare, the row-sum add and the conversion of P to 16 bits
SOFTMAX_FP32_OPS_PER_SCORE = 4
#: approximate A100 latencies (the catalogue's memory hierarchy): L2 ~200, HBM2e ~500 cycles
L2_LATENCY_CYCLES = 200
HBM_LATENCY_CYCLES = 500
#: bytes per element of the tensor-core input types
DTYPE_BYTES: Mapping[str, int] = {"fp16": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Schedule:
    """One way of running the main loop.

    Attributes:
        name: registry key.
        producer: a producer warp issues the loads ahead (warp specialisation, FA3 3.1);
            without one, the consumers load K_j, V_j themselves and wait for the data.
        warpgroups: consumer warpgroups (1, 2 or 3; FA3 runs three at d = 64); they
            split the block's B_r rows.
        pingpong: consumer warpgroups take turns on the tensor cores (FA3 3.1).
        intra_overlap: GEMM0 of block j is issued before GEMM1 of block j-1 and the
            softmax of j overlaps that GEMM1 (FA3 3.2, Algorithm 2).
        description: one line for tables.
        block_barrier: without a producer, the consumer warpgroups meet at a block-wide
            barrier for every K and V tile before taking their turn (loads issued by the
            compute warps are published to all of them that way); default False.
        prefetch: without a producer, the consumers issue the loads one step ahead as
            FlashAttention-2's forward loop does (Dao 2023, arXiv 2307.08691, Algorithm
            1 as implemented in its ``flash_fwd_kernel.h``): V_j is issued before
            GEMM0(j) and waited for after it, K_{j+1} is issued once GEMM0(j) is done
            and so lands during the softmax and GEMM1 of block j; default False (a
            block's tiles are loaded when first needed).
        wait_empty, wait_full: False builds a deliberately broken schedule (loads that do
            not wait for the stage to be released / GEMMs that do not wait for the data);
            :func:`simulate` then raises :class:`BufferInvariantError`. They exist so the
            invariant check can be shown to catch real violations.
    """

    name: str
    producer: bool
    warpgroups: int
    pingpong: bool
    intra_overlap: bool
    description: str = ""
    wait_empty: bool = True
    wait_full: bool = True
    block_barrier: bool = False
    prefetch: bool = False

    def __post_init__(self) -> None:
        if self.warpgroups not in (1, 2, 3):
            raise ValueError(f"schedule {self.name!r}: warpgroups must be 1, 2 or 3, "
                             f"got {self.warpgroups!r}")
        if self.prefetch and (self.producer or self.intra_overlap):
            raise ValueError(f"schedule {self.name!r}: prefetch is the load order of "
                             f"consumers without a producer or intra-warpgroup overlap")
        if self.pingpong and self.warpgroups < 2:
            raise ValueError(f"schedule {self.name!r}: ping-pong needs 2 or more warpgroups")


#: name -> schedule: the one registry, read by the CLI and the tests
SCHEDULES: Mapping[str, Schedule] = {
    s.name: s for s in (
        Schedule("serial", producer=False, warpgroups=1, pingpong=False,
                 intra_overlap=False,
                 description="FA2 style: load, GEMM0, softmax, GEMM1 in sequence"),
        Schedule("warp_specialized", producer=True, warpgroups=1, pingpong=False,
                 intra_overlap=False,
                 description="producer warp + circular buffer; one consumer warpgroup"),
        Schedule("pingpong", producer=False, warpgroups=2, pingpong=True,
                 intra_overlap=False,
                 description="two consumer warpgroups taking turns; no producer"),
        Schedule("fa3", producer=True, warpgroups=2, pingpong=True, intra_overlap=True,
                 description="warp specialisation + ping-pong + intra-warpgroup overlap"),
    )
}


@dataclass(frozen=True)
class UnitCosts:
    """Per-SM rates the unit costs are computed from (SI units; ``math.inf`` allowed).

    Attributes:
        tensor_flops: tensor-core FLOP/s of one SM in the GEMM input type.
        exp_rate: exp2 results per second of one SM (SFU).
        fp32_rate: FP32 instructions per second of one SM.
        bandwidth: bytes/s delivered to this block's K/V loads.
        load_latency: seconds from the end of a transfer to the data being usable.
        bytes_per_element: of Q, K, V in shared memory.
        gemm_latency: seconds from the end of a GEMM's tensor-core time until the issuing
            warpgroup sees its result (WGMMA completion and ``wgmma.wait_group``); the
            softmax of S_j waits this long after GEMM0(j) (default 0).
        sync_latency: seconds a barrier hand-over costs: the ping-pong turn passed to the
            next warpgroup, and, without a producer, the block-wide barrier after each
            consumer-issued load (default 0).
        softmax_fp32_ops: FP32 instructions per score besides the exp2 (default
            :data:`SOFTMAX_FP32_OPS_PER_SCORE`).
        v_transpose: seconds the producer spends transposing one V tile in shared
            memory after it lands (FP8 WGMMA needs V k-major, FA3 3.3; default 0).
        split_pipes: run the softmax on two units, "fp32" and "sfu", so one
            warpgroup's exponentials can overlap another's FP32 work
            (:meth:`softmax_parts`); default False: one "softmax" unit, the sum of both.
        exp_tensor_coupling: with ``split_pipes``, the fraction of an exp2 stream's time
            during which the SM's tensor cores cannot run another warpgroup's GEMM (an
            "exp_stall" on the tensor unit starting with the exp2); default 0.
        operand_seconds_per_flop: time per GEMM FLOP of the operand copies each warp
            makes from shared memory to registers (``ldmatrix`` before ``mma.sync``),
            on the "ldsm" unit (shared-memory bandwidth) right before the GEMM; default
            0 (WGMMA reads shared memory directly).
    """

    tensor_flops: float
    exp_rate: float
    fp32_rate: float
    bandwidth: float
    load_latency: float
    bytes_per_element: int
    gemm_latency: float = 0.0
    sync_latency: float = 0.0
    softmax_fp32_ops: float = SOFTMAX_FP32_OPS_PER_SCORE
    v_transpose: float = 0.0
    split_pipes: bool = False
    exp_tensor_coupling: float = 0.0
    operand_seconds_per_flop: float = 0.0

    def softmax_parts(self, rows: int, cols: int, head_dim: int
                      ) -> tuple[float, float, float]:
        """With ``split_pipes``: the softmax as three dependent steps on two pipes,
        FP32 before the exp2 (scale-and-subtract, row max: half the per-score FP32
        work), the exp2 on the SFU, FP32 after it (row sum, conversion of P: the other
        half, and the O rescale, one multiply per accumulator element)."""
        half = 0.5 * self.softmax_fp32_ops * rows * cols
        return (_div(half, self.fp32_rate), _div(float(rows * cols), self.exp_rate),
                _div(half + rows * head_dim, self.fp32_rate))

    def gemm(self, rows: int, cols: int, head_dim: int) -> float:
        """GEMM0 (rows x cols x d) or GEMM1 (rows x d x cols): 2 rows cols d FLOPs."""
        return _div(2.0 * rows * cols * head_dim, self.tensor_flops)

    def operands(self, rows: int, cols: int, head_dim: int) -> float:
        """Shared-memory-to-register operand copies that precede a GEMM
        (``operand_seconds_per_flop`` x its FLOPs; 0 for WGMMA)."""
        return 2.0 * rows * cols * head_dim * self.operand_seconds_per_flop

    def softmax(self, rows: int, cols: int, head_dim: int) -> float:
        """exp2 of rows x cols scores on the SFU plus the FP32 work (module docstring)."""
        fp32_ops = self.softmax_fp32_ops * rows * cols + rows * head_dim
        return _div(float(rows * cols), self.exp_rate) + _div(float(fp32_ops), self.fp32_rate)

    def load(self, cols: int, head_dim: int) -> float:
        """Transfer time of one K_j or V_j tile (cols x d elements)."""
        return _div(float(cols * head_dim * self.bytes_per_element), self.bandwidth)

    @property
    def latency(self) -> float:
        """Load latency; zero when bandwidth is infinite (an ideal memory)."""
        return 0.0 if math.isinf(self.bandwidth) else self.load_latency


def _div(work: float, rate: float) -> float:
    return 0.0 if math.isinf(rate) else work / rate


# --------------------------------------------------------------------------------------
# unit costs from the catalogue
