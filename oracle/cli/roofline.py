"""``python -m oracle roofline [--gpu NAME ...]``: roofline tables and GPU comparisons.

Without ``--gpu``: the worked roofline tables (:mod:`hardware.roofline`), computed from
the catalogue and printed with fixed number formats: generations (compute, bandwidth, ridge
points), lower bounds for an 8B model, the batch decode needs to become compute-bound,
and decode attention's arithmetic intensity. With ``--gpu`` (repeatable): one row per
named catalogue entry with the same figures side by side. ``--plot FILE`` draws the
roofline of the chosen GPUs (default: V100, A100, H100, B200) with the kernels placed
at their arithmetic intensity (attention forward, decode GEMV, decode attention,
prefill GEMM) and the calibrated FA3 model's H100 figure; it needs matplotlib
(``pip install '.[plot]'``).
"""
from __future__ import annotations

import argparse

from tabulate import tabulate

from hardware import pipeline as pl, roofline as rl
from hardware import specs
from oracle import plots


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu", action="append", metavar="NAME", default=None,
        help=f"compare catalogue entries (repeatable; known: {', '.join(specs.names())})",
    )
    parser.add_argument(
        "--sources", action="store_true",
        help="with --gpu: also list every figure of each entry with its source",
    )
    parser.add_argument(
        "--plot", metavar="FILE", default=None,
        help="draw the roofline of the --gpu entries (default V100 A100 H100 B200) with "
             "kernels placed on it to FILE (needs matplotlib: pip install '.[plot]')",
    )


def _table(rows: list[list[str]], headers: list[str]) -> str:
    # numbers are pre-formatted with fixed format specs: keep them as strings
    return tabulate(rows, headers=headers, disable_numparse=True, stralign="right")


def generations_text() -> str:
    rows = []
    for r in rl.generation_table():
        up = ("-", "-") if r.compute_vs_prev is None else (
            f"{r.compute_vs_prev:.1f}x", f"{r.bandwidth_vs_prev:.1f}x")
        rows.append([r.name, str(r.year), f"{r.half_tflops:.0f}", up[0],
                     f"{r.bandwidth_tbs:.2f} TB/s", up[1], f"{r.half_ridge:.0f}",
                     f"{r.low_tflops:.0f}", r.low_format.upper(), f"{r.low_ridge:.0f}"])
    return _table(rows, ["GPU", "year", "BF16 TFLOPS", "vs prev", "bandwidth", "vs prev",
                         "BF16 ridge", "lowest TFLOPS", "format", "ridge"])


def bounds_text() -> str:
    rows = [[r.name, f"{r.decode_s * 1e3:.1f} ms", f"{r.prefill_s * 1e3:.0f} ms",
             "-" if r.kv_tokens is None else f"{r.kv_tokens / 1e3:.0f}K"]
            for r in rl.model_bounds_table()]
    return _table(rows, ["GPU", "decode step (batch 1)", "prefill 4K (BF16, half peak)",
                         "KV tokens"])


def batch_text() -> str:
    rows = [[r.label, f"{r.ridge:.0f}", *(f"{b:.0f}" for b in r.batches)]
            for r in rl.batch_table()]
    return _table(rows, ["GPU", "ridge", *(name for name, _ in rl.WEIGHT_PRECISIONS)])


def attention_text(reference: str = "H100") -> str:
    ridge = rl.gpu_ridge(reference)
    rows = [[str(g), f"{rl.attention_intensity(g):.0f}", f"{ridge / g:.0f}x", name]
            for g, name in rl.ATTENTION_SCHEMES]
    return _table(rows, ["query heads per KV head", "intensity (FLOP/B)",
                         f"below {reference} BF16 ridge {ridge:.0f}", "scheme"])


def compare_text(names: list[str]) -> str:
    model = rl.MODEL_8B
    rows = []
    for name in names:
        g = specs.get(name)
        half, low = g.half_precision, g.lowest_precision
        bounds = rl.model_bounds_table([g.name])[0]
        ridge = rl.gpu_ridge(g)
        rows.append([
            g.name, f"{g.dense_tflops[half]:.0f}", f"{g.dense_tflops[low]:.0f} {low.upper()}",
            f"{g.memory_bandwidth_gbs / 1000:.2f}",
            "-" if g.memory_gb is None else f"{g.memory_gb:.0f}",
            f"{ridge:.0f}", f"{rl.gpu_ridge(g, low):.0f}",
            f"{bounds.decode_s * 1e3:.1f}", f"{bounds.prefill_s * 1e3:.0f}",
            "-" if bounds.kv_tokens is None else f"{bounds.kv_tokens / 1e3:.0f}K",
            f"{rl.compute_bound_batch(ridge, 2):.0f}",
        ])
    return _table(rows, ["GPU", "BF16 TFLOPS", "lowest TFLOPS", "HBM TB/s", "memory GB",
                         "BF16 ridge", "lowest ridge", f"{model.name} decode ms",
                         "prefill 4K ms", "KV tokens", "batch (BF16 weights)"])


def sources_text(name: str) -> str:
    g = specs.get(name)
    rows = []
    for key, src in g.sources.items():
        if key.startswith("dense_tflops."):
            value = g.dense_tflops[key.split(".", 1)[1]]
        elif key == "memory_hierarchy":
            value = f"{len(g.memory_hierarchy)} levels"
        else:
            value = getattr(g, key)
        rows.append([key, str(value), src])
    return f"{g.name} ({g.vendor} {g.architecture}, {g.form_factor})\n" + tabulate(
        rows, headers=["figure", "value", "source"], disable_numparse=True)


def _plot(args: argparse.Namespace) -> int:
    names = args.gpu or list(rl.GENERATIONS)
    for name in names:
        specs.get(name)  # ValueError for an unknown name
    n, d = 8192, 128
    fa3 = pl.simulate("fa3", seq_len=n, head_dim=d, batch=16384 // n, heads=2048 // d)
    intensity = 4.0 * n * n * d / (4 * n * d * 2)
    return plots.write_figure(plots.draw_roofline, names, args.plot, modelled=[
        (f"FA3 model on H100 (N = {n}, d = {d}): {fa3.tflops:.0f} TFLOP/s", intensity,
         fa3.tflops * 1e12)])


def run(args: argparse.Namespace) -> int:
    if args.plot is not None:
        return _plot(args)
    if args.gpu:
        for name in args.gpu:  # unknown names fail before anything is printed
            specs.get(name)
        print(compare_text(args.gpu))
        if args.sources:
            for name in args.gpu:
                print()
                print(sources_text(name))
        return 0
    if args.sources:
        raise ValueError("--sources needs at least one --gpu NAME")
    print("Compute, bandwidth and ridge point (FLOP/byte) per generation, dense, SXM")
    print(generations_text())
    print()
    print("Lower bounds for an 8B model (BF16 weights 16 GB, KV 128 KB per token)")
    print(bounds_text())
    print()
    print("Batch for decode's weight GEMMs to become compute-bound "
          "(intensity 2 x batch / bytes per weight)")
    print(batch_text())
    print()
    print("Decode attention: intensity = query heads per KV head (BF16 KV), any batch")
    print(attention_text())
    return 0
