"""Limits on what ``verify`` recomputes: parameters and inputs of a manifest are data
from disk, so each operation's recomputation is bounded before any work is done.

A case whose parameters or inputs fall outside these limits is reported as a problem
("recomputation refused") and not recomputed; the limits are far above every case this
oracle writes (a test checks the whole ``full`` suite against them).

Rules for every operation (including those of a custom registry):

- every number anywhere in the parameters is finite with magnitude at most
  ``2**20`` (1048576), every list has at most 64 items, every string at most 200
  characters, nesting at most 4 levels;
- the inputs hold at most ``2**24`` elements together.

Per operation, tighter bounds on named parameters (a number, or every item of a list,
in ``[lo, hi]``; ``product`` bounds the product of a list's items), and a work
estimate from the input shapes:

==============================  =========================================================
operation                       limits
==============================  =========================================================
hardware.pipeline.simulate      seq_len in [1, 2**20] (1M-token contexts), head_dim
                                in [1, 1024], block items in [1, 1024], seq_len / block
                                item <= 2**14 (2**20 keys in blocks of 64),
                                stages in [1, 16], at most 8 schedules
simt.gallery_run                grid items >= 1 with product <= 1024, block items >= 1
                                with product <= 1024 (CUDA's threads per block),
                                grid x block threads <= 2**16, dynamic_shared <= 2**18,
                                every ``count`` argument in [0, 2**20], every ``int``
                                argument in [-2**16, 2**16]
kvcache.simulate                memory_slots <= 2**20, max_len <= 2**16, block_size in
                                [1, 4096]; at most 4096 requests (trace rows),
                                trace values at most 2**16, prompt and output tokens
                                together at most 2**21
kvcache.trace / paged_attention num_blocks <= 2**16, block_size in [1, 4096],
                                head_dim <= 1024, num_kv_heads <= 256
attention.*, kvcache.paged_*    elements of q times keys per head <= 2**31
matmul.*, scaling.mx_matmul     elements of a times columns of b <= 2**30
formats.unpack                  count <= 2**24
attention.split_kv              num_splits in [1, 4096]
attention.flash_v1              sram_elements in [1, 2**24]
==============================  =========================================================
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

GENERIC_NUMBER = 2 ** 20
GENERIC_LIST = 64
GENERIC_STRING = 200
GENERIC_DEPTH = 4
GENERIC_INPUT_ELEMENTS = 2 ** 24

#: at most this many key (or query) blocks per head in a pipeline simulation: 2**20 keys
#: (1M-token contexts) in blocks of 64
PIPELINE_BLOCKS = 2 ** 14

#: per operation: parameter name -> (lo, hi) for a number or for every item of a list;
#: "<name>.product" -> (lo, hi) for the product of a list's items
_PIPELINE = {"seq_len": (1, 2 ** 20), "head_dim": (1, 1024), "block": (1, 1024),
             "stages": (1, 16), "schedules.length": (1, 8)}
_SIMT = {"grid": (1, 2 ** 20), "grid.product": (1, 1024), "block": (1, 1024),
         "block.product": (1, 1024), "dynamic_shared": (0, 2 ** 18)}
_KV = {"num_blocks": (1, 2 ** 16), "block_size": (1, 4096), "head_dim": (1, 1024),
       "num_kv_heads": (1, 256), "block_q": (1, 4096)}
_SIM = {"memory_slots": (1, 2 ** 20), "max_len": (1, 2 ** 16), "block_size": (1, 4096)}

LIMITS: dict[str, dict[str, tuple[int, int]]] = {
    "*": {},
    "hardware.pipeline.simulate": _PIPELINE,
    "simt.gallery_run": _SIMT,
    "kvcache.simulate": _SIM,
    "kvcache.trace": _KV,
    "kvcache.paged_attention": _KV,
    "formats.unpack": {"count": (0, 2 ** 24)},
    "attention.split_kv": {"num_splits": (1, 4096), "block": (1, 2 ** 16)},
    "attention.flash_v1": {"sram_elements": (1, 2 ** 24)},
}
for _name in ("formats.pack", "formats.encode", "formats.decode", "formats.round_to",
              "hardware.fusion.traffic", "hardware.memory.tile_load_segments",
              "hardware.memory.coalesce", "hardware.memory.bank_conflicts",
              "hardware.tiling.tile_utilization", "hardware.roofline.tables",
              "attention.attention", "attention.flash_v2", "attention.flash_v3",
              "attention.standard", "attention.merge_attention_states",
              "attention.flash_v2_backward", "attention.backward", "matmul.matmul",
              "matmul.tiled", "matmul.mma", "matmul.block_scaled", "scaling.tensor_quantize", "scaling.delayed_scaling",
              "scaling.quantization_error", "scaling.hadamard_transform",
              "scaling.mx_quantize", "scaling.mx_matmul", "scaling.nvfp4_quantize",
              "scaling.block_fp8_quantize", "softmax.softmax", "softmax.online_softmax",
              "softmax.logsumexp"):
    LIMITS.setdefault(_name, {})

#: work estimates from input shapes: operation prefix -> (description, function, limit)
_ATTENTION_WORK = 2 ** 31
_MATMUL_WORK = 2 ** 30


def describe() -> str:
    """The limits as text (this module's documentation)."""
    return __doc__ or ""


def _generic(value: Any, path: str, depth: int, out: list[str]) -> None:
    if depth > GENERIC_DEPTH:
        out.append(f"params.{path}: nested deeper than the limit of {GENERIC_DEPTH}")
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or abs(value) > GENERIC_NUMBER:
            out.append(f"params.{path} = {value!r} is outside the limit of "
                       f"+-{GENERIC_NUMBER} for any number")
    elif isinstance(value, str):
        if len(value) > GENERIC_STRING:
            out.append(f"params.{path}: a string longer than the limit of {GENERIC_STRING}")
    elif isinstance(value, list):
        if len(value) > GENERIC_LIST:
            out.append(f"params.{path}: {len(value)} items, over the limit of {GENERIC_LIST}")
            return
        for i, v in enumerate(value):
            _generic(v, f"{path}[{i}]", depth + 1, out)
    elif isinstance(value, dict):
        if len(value) > GENERIC_LIST:
            out.append(f"params.{path}: {len(value)} keys, over the limit of {GENERIC_LIST}")
            return
        for k, v in value.items():
            _generic(v, f"{path}.{k}", depth + 1, out)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _named(op: str, params: Mapping[str, Any], out: list[str]) -> None:
    for key, (lo, hi) in LIMITS.get(op, {}).items():
        name, _, agg = key.partition(".")
        if name not in params:
            continue
        v = params[name]
        if agg == "length":
            if isinstance(v, list) and not lo <= len(v) <= hi:
                out.append(f"params.{name}: {len(v)} items, outside the limit [{lo}, {hi}]")
            continue
        items = v if isinstance(v, list) else [v]
        if not all(_number(x) for x in items):
            out.append(f"params.{name} = {v!r}: must be a number or a list of numbers "
                       f"(limit [{lo}, {hi}])")
            continue
        if agg == "product":
            total = math.prod(items)
            if not lo <= total <= hi:
                out.append(f"params.{name} = {v!r}: product {total} is outside the limit "
                           f"[{lo}, {hi}]")
        else:
            bad = [x for x in items if not lo <= x <= hi]
            if bad:
                out.append(f"params.{name} = {v!r} is outside the limit [{lo}, {hi}]")


def _simt_args(params: Mapping[str, Any], out: list[str]) -> None:
    grid, block = params.get("grid"), params.get("block")
    if isinstance(grid, list) and isinstance(block, list) \
            and all(_number(x) for x in grid + block):
        threads = math.prod(grid) * math.prod(block)
        if threads > 2 ** 16:
            out.append(f"params.grid x params.block = {threads} threads, over the limit "
                       f"of {2 ** 16}")
    args = params.get("args")
    for i, a in enumerate(args if isinstance(args, list) else []):
        if isinstance(a, dict):
            for k, lo, hi in (("count", 0, 2 ** 20), ("int", -2 ** 16, 2 ** 16)):
                if k in a and not (_number(a[k]) and lo <= a[k] <= hi):
                    out.append(f"params.args[{i}].{k} = {a[k]!r} is outside the limit "
                               f"[{lo}, {hi}]")


def _pipeline_tiles(params: Mapping[str, Any], out: list[str]) -> None:
    n, block = params.get("seq_len"), params.get("block")
    if _number(n) and isinstance(block, list) and all(_number(b) and b >= 1 for b in block):
        for b in block:
            if n / b > PIPELINE_BLOCKS:
                out.append(f"params.seq_len / params.block = {n} / {b} is over the limit "
                           f"of {PIPELINE_BLOCKS} blocks")


def problems(operation: str, params: Any,
             inputs: Mapping[str, tuple[tuple[int, ...], Any]] | Mapping[str, np.ndarray]
             ) -> list[str]:
    """Why recomputing ``operation`` with ``params`` and ``inputs`` is refused (empty
    when it is within the limits). ``inputs`` maps names to arrays (values are checked
    where a limit reads them) or to shapes."""
    out: list[str] = []
    if not isinstance(params, dict):
        return ["params must be an object"]
    _generic(params, "", 0, out)
    out = [o.replace("params..", "params.") for o in out]
    _named(operation, params, out)
    if operation == "simt.gallery_run":
        _simt_args(params, out)
    if operation == "hardware.pipeline.simulate":
        _pipeline_tiles(params, out)
    shapes = {k: tuple(np.shape(v)) if not isinstance(v, tuple) else v
              for k, v in inputs.items()}
    total = sum(math.prod(s) for s in shapes.values())
    if total > GENERIC_INPUT_ELEMENTS:
        out.append(f"inputs hold {total} elements, over the limit of "
                   f"{GENERIC_INPUT_ELEMENTS}")
    q, k = shapes.get("q"), shapes.get("k")
    if (operation.startswith("attention.") or operation == "kvcache.paged_attention") \
            and q is not None and k is not None and len(k) >= 2:
        work = math.prod(q) * k[-2]
        if work > _ATTENTION_WORK:
            out.append(f"q ({math.prod(q)} elements) times {k[-2]} keys = {work}, over "
                       f"the work limit of {_ATTENTION_WORK}")
    a, b = shapes.get("a", shapes.get("a_codes")), shapes.get("b", shapes.get("b_codes"))
    if operation in ("matmul.matmul", "matmul.tiled", "matmul.mma", "matmul.block_scaled",
                     "scaling.mx_matmul") \
            and a is not None and b is not None and len(b) >= 1:
        work = math.prod(a) * b[-1]
        if work > _MATMUL_WORK:
            out.append(f"a ({math.prod(a)} elements) times {b[-1]} columns = {work}, "
                       f"over the work limit of {_MATMUL_WORK}")
    if operation == "kvcache.simulate" and "trace" in inputs \
            and isinstance(inputs["trace"], np.ndarray):
        t = inputs["trace"]
        if t.ndim != 2 or t.shape[0] > 4096:
            out.append(f"trace of shape {list(t.shape)}: at most 4096 requests (rows)")
        elif t.size and not np.all(np.abs(t.astype(np.float64)) <= 2 ** 16):
            out.append(f"trace values must be at most {2 ** 16} in magnitude")
        elif t.shape[1] >= 3 and float(np.sum(t[:, 1:3], dtype=np.float64)) > 2 ** 21:
            out.append(f"trace asks for more than {2 ** 21} prompt and output tokens")
    return out


def check_arguments(operation: str, params: Mapping[str, Any],
                    flags: Mapping[str, str]) -> None:
    """The command line's check of the same limits, before any work: the first problem
    (a named bound before the generic one) as a ValueError, each ``params.NAME``
    spelled as its flag (``flags`` maps NAME -> ``--flag``).

    Raises:
        ValueError: outside a limit, naming the flag and the bound."""
    refused = problems(operation, dict(params), {})
    if not refused:
        return
    text = next((r for r in refused if "any number" not in r), refused[0])
    for name in sorted(flags, key=len, reverse=True):
        text = text.replace(f"params.{name}", flags[name])
    raise ValueError(f"{text} (the limits of oracle/limits.py)")
