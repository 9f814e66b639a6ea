"""Golden cases for the machine models (``hardware.memory``, ``hardware.tiling``,
``hardware.roofline``): integer traffic counts are exact; ratios of catalogue figures
are accepted within a few float64 ulps (formula-level rounding).

- ``hardware.memory.coalesce``: per warp instruction (one row of 32 lane addresses and
  an active mask), requests, 32-byte sectors, 128-byte lines, bytes requested and
  touched (CUDA C Programming Guide, global memory accesses).
- ``hardware.memory.bank_conflicts``: per instruction, wavefronts and ideal wavefronts
  (CUDA C Programming Guide, shared memory, compute capability 5.x+).
- ``hardware.tiling.tile_utilization``: tiles, waves, idle SMs and padding.
- ``hardware.pipeline.simulate``: the FlashAttention-3 main-loop schedules' total time
  and tensor-core utilisation of one thread block (``simulate_block``, the catalogue's
  ideal rates; a model: variant ``pipeline_model``).
- ``hardware.roofline.tables``: the roofline tables of the GPU catalogue (ridge points,
  decode and prefill bounds, KV capacity, batch to become compute-bound).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hardware import fusion, memory, pipeline, roofline, tiling
from oracle.cases import Area, CaseSpec, Operation
from oracle.random_stream import CaseRandom
from oracle.tolerance import AllClose, Ulp

SPECS = {"CUDA C Programming Guide": "memory model of compute capability 6.0+",
         "Roofline": "Williams, Waterman, Patterson, CACM 2009"}

FLOAT_TOL = Ulp(4, "fp64")


def _coalesce(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    rows = [memory.coalesce(a, p["access_bytes"], m, segment_bytes=p["segment_bytes"],
                            line_bytes=p["line_bytes"])
            for a, m in zip(inputs["addresses"], inputs["active"])]
    return {name: np.array([getattr(r, name) for r in rows], dtype=np.int64)
            for name in ("requests", "sectors", "lines", "bytes_requested", "bytes_touched")}


def _banks(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    rows = [memory.bank_conflicts(a, p["access_bytes"], m, p["banks"])
            for a, m in zip(inputs["addresses"], inputs["active"])]
    return {"wavefronts": np.array([r.wavefronts for r in rows], dtype=np.int64),
            "ideal_wavefronts": np.array([r.ideal_wavefronts for r in rows], dtype=np.int64)}


def _tiles(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    rows = [tiling.tile_utilization(*(int(v) for v in row)) for row in inputs["problems"]]
    ints = ("tiles", "waves", "last_wave_tiles", "partial_tiles")
    floats = ("idle_sm_fraction_last_wave", "padding_fraction", "sm_utilization")
    out = {n: np.array([getattr(r, n) for r in rows], dtype=np.int64) for n in ints}
    out.update({n: np.array([getattr(r, n) for r in rows], dtype=np.float64) for n in floats})
    return out


def _tables(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    gpus = tuple(p["gpus"])
    gen = roofline.generation_table(gpus)
    bounds = roofline.model_bounds_table(gpus)
    batch = roofline.batch_table()
    f64 = np.float64
    return {
        "half_tflops": np.array([r.half_tflops for r in gen], f64),
        "bandwidth_tbs": np.array([r.bandwidth_tbs for r in gen], f64),
        "half_ridge": np.array([r.half_ridge for r in gen], f64),
        "low_ridge": np.array([r.low_ridge for r in gen], f64),
        "decode_s": np.array([r.decode_s for r in bounds], f64),
        "prefill_s": np.array([r.prefill_s for r in bounds], f64),
        "kv_tokens": np.array([np.nan if r.kv_tokens is None else r.kv_tokens
                               for r in bounds], f64),
        "batch_ridge": np.array([r.ridge for r in batch], f64),
        "batch_needed": np.array([r.batches for r in batch], f64),
    }


def _pipeline(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    times, util = [], []
    for schedule in p["schedules"]:
        t = pipeline.simulate_block(schedule, gpu=p["gpu"], seq_len=p["seq_len"],
                              head_dim=p["head_dim"], block=tuple(p["block"]),
                              stages=p["stages"], dtype=p["dtype"])
        times.append(t.total_time)
        util.append(t.tensor_utilization)
    out["total_time"] = np.array(times, np.float64)
    out["tensor_utilization"] = np.array(util, np.float64)
    return out


def _fusion(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    sc = fusion.sin2_plus_cos2()
    sig = fusion.stacked_sigmoids(p["depth"])
    stored = fusion.training_traffic(sig)                  # every intermediate saved
    recomputed = fusion.training_traffic(sig, saved=())
    return {"sin2_plus_cos2": np.array([fusion.traffic(sc).accesses,
                                        fusion.traffic(sc, fused=True).accesses], np.int64),
            "sigmoids": np.array([stored.forward.accesses, stored.backward.accesses,
                                  recomputed.forward.accesses, recomputed.backward.accesses],
                                 np.int64)}


def _tile_loads(inputs: Mapping[str, np.ndarray], p: Mapping[str, Any]) -> dict[str, np.ndarray]:
    rows = [memory.tile_load_segments(*(int(v) for v in row[:3]), elem_bytes=int(row[3]),
                                      base_address=int(row[4]))
            for row in inputs["tiles"]]
    return {"segments": np.array([r.segments for r in rows], np.int64),
            "distinct_segments": np.array([r.distinct_segments for r in rows], np.int64),
            "min_segments": np.array([r.min_segments for r in rows], np.int64)}


OPERATIONS = [
    Operation("hardware.fusion.traffic", _fusion,
              "global tensor accesses of the worked sin^2+cos^2 (unfused, fused) and "
              "stacked sigmoids (forward, backward; stored vs recomputed)"),
    Operation("hardware.memory.tile_load_segments", _tile_loads,
              "per row (tile_rows, tile_cols, leading_dim, elem_bytes, base_address): "
              "hardware.memory.tile_load_segments"),
    Operation("hardware.memory.coalesce", _coalesce,
              "per row: hardware.memory.coalesce(addresses[i], access_bytes, active[i])"),
    Operation("hardware.memory.bank_conflicts", _banks,
              "per row: hardware.memory.bank_conflicts(addresses[i], access_bytes, "
              "active[i], banks)"),
    Operation("hardware.tiling.tile_utilization", _tiles,
              "per row (M, N, tile_m, tile_n, num_sms): hardware.tiling.tile_utilization"),
    Operation("hardware.pipeline.simulate", _pipeline,
              "per schedule: hardware.pipeline.simulate_block(schedule, gpu=, seq_len=, "
              "head_dim=, block=, stages=, dtype=): total_time, tensor_utilization"),
    Operation("hardware.roofline.tables", _tables,
              "generation, 8B-model bounds and batch tables of hardware.roofline"),
]


def _warp_patterns(access: int, rng: CaseRandom) -> dict[str, np.ndarray]:
    """Rows of 32 lane addresses: the textbook patterns, then random ones."""
    lane = np.arange(32, dtype=np.int64)
    rows = [lane * access,                       # stride 1, aligned
            lane * access * 2,                   # stride 2
            lane * access * 32,                  # one lane per line
            np.zeros(32, np.int64) + 256,        # broadcast
            lane * access + 4,                   # misaligned by 4 bytes
            lane * access + 1,                   # straddling
            (lane ^ 1) * access,                 # permuted lanes
            lane * access * 33,                  # padded column walk
            (lane // 8) * 512 + (lane % 8) * access]
    rows += [rng.integers(0, 4096, 32) * access for _ in range(4)]
    rows += [rng.integers(0, 1 << 20, 32) for _ in range(2)]
    masks = [np.ones(32, bool)] * len(rows)
    masks[1] = lane < 16                         # half warp
    masks[-1] = rng.integers(0, 2, 32) == 1      # random divergence
    masks[-2] = np.zeros(32, bool)               # nobody active
    return {"addresses": np.stack(rows), "active": np.stack(masks)}


def _bank_patterns(access: int, rng: CaseRandom) -> dict[str, np.ndarray]:
    lane = np.arange(32, dtype=np.int64)
    rows = [lane * s * 4 for s in (1, 2, 4, 8, 16, 32, 33)]
    rows += [np.zeros(32, np.int64), lane * access, (lane % 4) * 128]
    rows += [rng.integers(0, 1024, 32) * 4 for _ in range(4)]
    masks = [np.ones(32, bool)] * len(rows)
    masks[-1] = rng.integers(0, 2, 32) == 1
    return {"addresses": np.stack(rows), "active": np.stack(masks)}


def _tile_problems(rng: CaseRandom) -> dict[str, np.ndarray]:
    fixed = [(256, 257, 128, 128, 108), (4096, 4096, 128, 128, 132),
             (1, 1, 64, 64, 1), (1000, 1000, 128, 256, 108)]
    rand = np.stack([rng.integers(1, 5000, 12), rng.integers(1, 5000, 12),
                     np.array(rng.choice([16, 32, 64, 128, 256], 12)),
                     np.array(rng.choice([16, 32, 64, 128, 256], 12)),
                     rng.integers(1, 200, 12)], axis=1)
    return {"problems": np.concatenate([np.array(fixed, np.int64), rand.astype(np.int64)])}


def cases() -> list[CaseSpec]:
    out = []
    for access, level in ((4, 0), (1, 1), (2, 1), (8, 1), (16, 1)):
        out.append(CaseSpec(
            f"hardware.memory.coalesce.{access}b", "hardware.memory.coalesce",
            {"access_bytes": access, "segment_bytes": 32, "line_bytes": 128},
            lambda r, a=access: _warp_patterns(a, r), level=level,
            description=f"{access}-byte global accesses of one warp instruction per row"))
    for access in (4, 8, 16):
        out.append(CaseSpec(
            f"hardware.memory.bank_conflicts.{access}b", "hardware.memory.bank_conflicts",
            {"access_bytes": access, "banks": 32},
            lambda r, a=access: _bank_patterns(a, r), level=1,
            description=f"{access}-byte shared-memory accesses, one instruction per row"))
    float_tol = {n: FLOAT_TOL for n in ("idle_sm_fraction_last_wave", "padding_fraction",
                                        "sm_utilization")}
    out.append(CaseSpec("hardware.tiling.tile_utilization", "hardware.tiling.tile_utilization",
                        {}, _tile_problems, tolerance=float_tol, level=1,
                        description="rows of (M, N, tile_m, tile_n, num_sms)"))
    pipe_tol = AllClose(1e-9, 0.0, "event-by-event sums of the discrete-event model")
    for seq_len, dtype in ((4096, "fp16"), (1000, "fp8")):
        out.append(CaseSpec(
            f"hardware.pipeline.h100.{dtype}.n{seq_len}", "hardware.pipeline.simulate",
            {"schedules": ["serial", "warp_specialized", "pingpong", "fa3"], "gpu": "H100",
             "seq_len": seq_len, "head_dim": 128, "block": [128, 64], "stages": 2,
             "dtype": dtype},
            lambda r: {}, tolerance={"total_time": pipe_tol, "tensor_utilization": pipe_tol},
            level=1, variant={"choice": "pipeline_model", "option": "hardware.pipeline"},
            description="FlashAttention-3 main loop: serial, warp-specialised, ping-pong, "
                        "full FA3 schedule on H100 figures"))
    # the id is pinned by the published suite (results folders are keyed by it)
    out.append(CaseSpec("hardware.fusion.seed_examples", "hardware.fusion.traffic",
                        {"depth": 3}, lambda r: {}, level=1,
                        description="fusion and recomputation traffic of elementwise chains "
                                    "(Ivanov et al. 2021; Chen et al. 2016)"))

    def tiles(rng: CaseRandom) -> dict[str, np.ndarray]:
        fixed = [(32, 32, 32, 4, 0), (32, 32, 33, 4, 0), (32, 32, 40, 4, 0),
                 (16, 16, 17, 2, 0), (8, 64, 64, 4, 4)]
        rand = [(int(rng.integers(1, 33)), int(rng.integers(1, 65)), 0,
                 int(rng.choice([1, 2, 4, 8], 1)[0]), int(rng.integers(0, 64)))
                for _ in range(8)]
        rand = [(r, c, c + int(rng.integers(0, 9)), e, b) for r, c, _, e, b in rand]
        return {"tiles": np.array(fixed + rand, np.int64)}

    out.append(CaseSpec("hardware.memory.tile_loads", "hardware.memory.tile_load_segments",
                        {}, tiles, level=1,
                        description="segments to load a tile of a row-major matrix: one "
                                    "extra element per row misaligns rows; padding fixes it"))
    names = ("half_tflops", "bandwidth_tbs", "half_ridge", "low_ridge", "decode_s",
             "prefill_s", "kv_tokens", "batch_ridge", "batch_needed")
    out.append(CaseSpec("hardware.roofline.tables", "hardware.roofline.tables",
                        {"gpus": list(roofline.GENERATIONS)}, lambda r: {},
                        tolerance={n: FLOAT_TOL for n in names}, level=1,
                        description="roofline tables (Williams, Waterman and Patterson 2009) from the "
                                    "GPU catalogue"))
    return out


AREA = Area("hardware", SPECS, OPERATIONS, cases)
