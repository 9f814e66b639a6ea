"""``python -m oracle pipeline``: the FlashAttention-3 schedule comparison, the
calibrated whole-GPU attention model, its check against the published H100 figures
(``--sweep``) and a picture of one SM's schedule (``--plot FILE``).

Runs every schedule of :data:`hardware.pipeline.SCHEDULES` on one thread block's main
loop (FA3 paper, Shah et al. 2024, sections 3.1-3.2 and the Table 2 ablation) and
prints total time, tensor-core utilisation and the TFLOPS of all SMs running such
blocks, then
checks the ordering the paper reports: the full FA3 schedule beats each ablation and
each ablation beats the FlashAttention-2 style serial loop (exit 1 if not).
``--gantt`` adds an ASCII Gantt chart of the first blocks of each schedule; ``--events``
prints one schedule's event log as a table. A second table runs every kernel of
:data:`hardware.pipeline.KERNELS` on the whole GPU with the calibrated costs
(``--batch``, ``--heads``, ``--causal``).

``--sweep`` prints the model next to every published figure
(:data:`hardware.measurements.PUBLISHED`) with the error, and the largest error.
``--plot FILE`` draws the calibrated main loop of one SM (``--plot-kernel``, default
fa3) with matplotlib (optional extra ``pip install '.[plot]'``).
"""
from __future__ import annotations

import argparse

from tabulate import tabulate

from hardware import pipeline as pl
from hardware import specs
from oracle import limits, plots

#: (better, worse) pairs the paper's ablation implies, checked on every run
ORDERING = (("fa3", "warp_specialized"), ("fa3", "pingpong"),
            ("warp_specialized", "serial"), ("pingpong", "serial"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", default="H100",
                        help=f"catalogue entry (default H100; known: {', '.join(specs.names())})")
    parser.add_argument("--seq-len", type=int, default=8192, metavar="N",
                        help="keys per head (default 8192, the paper's ablation)")
    parser.add_argument("--head-dim", type=int, default=128, metavar="D",
                        help="head dimension (default 128)")
    parser.add_argument("--block", type=int, nargs=2, default=(128, 64),
                        metavar=("B_R", "B_C"), help="query rows, keys per block (128 64)")
    parser.add_argument("--stages", type=int, default=2, help="K/V buffer stages (2)")
    parser.add_argument("--dtype", default="fp16", choices=sorted(pl.DTYPE_BYTES),
                        help="tensor-core input type (fp16)")
    parser.add_argument("--gantt", action="store_true",
                        help="also print an ASCII Gantt chart per schedule")
    parser.add_argument("--gantt-blocks", type=int, default=6, metavar="K",
                        help="Gantt window: until the events of the first K blocks end (6)")
    parser.add_argument("--width", type=int, default=100, help="Gantt width in columns")
    parser.add_argument("--events", choices=list(pl.SCHEDULES), default=None,
                        metavar="SCHEDULE", help="print this schedule's event log")
    parser.add_argument("--limit", type=int, default=40,
                        help="with --events: at most this many rows (default 40)")
    parser.add_argument("--batch", type=int, default=None, metavar="B",
                        help="whole-GPU table: batch (default 16K tokens / seq-len, as "
                             "the papers run it)")
    parser.add_argument("--heads", type=int, default=None, metavar="H",
                        help="whole-GPU table: heads (default 2048 / head-dim)")
    parser.add_argument("--causal", action="store_true", help="whole-GPU table: causal")
    parser.add_argument("--sweep", action="store_true",
                        help="print the model against every published H100 figure")
    parser.add_argument("--plot", metavar="FILE", default=None,
                        help="draw one SM's calibrated schedule to FILE (PNG; needs "
                             "matplotlib: pip install '.[plot]')")
    parser.add_argument("--plot-kernel", choices=[k for k, v in pl.KERNELS.items()
                                                  if v.schedule is not None],
                        default="fa3", help="kernel drawn by --plot (default fa3)")
    parser.add_argument("--plot-blocks", type=int, default=4, metavar="K",
                        help="--plot window: until the events of the first K blocks end (4)")


def _costs_line(t: pl.Timeline) -> str:
    c = t.costs
    rows = t.block[0] // t.schedule.warpgroups
    return (f"{t.gpu} {t.dtype}, seq_len {t.seq_len}, d {t.head_dim}, block {t.block}, "
            f"{t.stages} stages. Per SM: tensor {c.tensor_flops / 1e12:.3g} TFLOP/s, "
            f"exp {c.exp_rate / 1e9:.3g} G/s, FP32 {c.fp32_rate / 1e9:.3g} G/s, "
            f"loads {c.bandwidth / 1e9:.4g} GB/s + {c.latency * 1e9:.0f} ns latency.\n"
            f"One block (B_r rows): GEMM {c.gemm(*t.block, t.head_dim) * 1e9:.0f} ns, "
            f"softmax {c.softmax(*t.block, t.head_dim) * 1e9:.0f} ns, "
            f"K or V tile {c.load(t.block[1], t.head_dim) * 1e9:.0f} ns; per warpgroup of "
            f"{rows} rows in {t.schedule.name}: GEMM "
            f"{c.gemm(rows, t.block[1], t.head_dim) * 1e9:.0f} ns, softmax "
            f"{c.softmax(rows, t.block[1], t.head_dim) * 1e9:.0f} ns")


def sweep_text() -> tuple[str, float]:
    """The modelled vs published table and the largest relative error."""
    rows = pl.sweep()
    table = []
    for r in rows:
        m = r.measurement
        table.append([m.kernel, m.dtype, m.head_dim, m.seq_len, f"{m.batch}x{m.heads}",
                      "yes" if m.causal else "no", f"{m.tflops:.0f}", f"{r.modelled:.0f}",
                      f"{r.error:+.1%}", "" if abs(r.error) <= 0.10 else "*",
                      m.ref + (" ~" if m.approximate else "")])
    worst = max(rows, key=lambda r: abs(r.error))
    wm = worst.measurement
    within = sum(abs(r.error) <= 0.10 for r in rows)
    text = tabulate(table, headers=["kernel", "dtype", "d", "N", "B x H", "causal",
                                    "published", "model", "error", ">10%", "source"],
                    disable_numparse=True, stralign="right")
    text += (f"\n\n{within} of {len(rows)} figures within 10%. Largest error "
             f"{worst.error:+.1%}: {wm.kernel} {wm.dtype} d={wm.head_dim} N={wm.seq_len}"
             f"{' causal' if wm.causal else ''} (published {wm.tflops:.0f}, model "
             f"{worst.modelled:.0f} TFLOP/s).\nTFLOP/s on H100 SXM5, FlashAttention-3 paper "
             f"(Shah et al. 2024); '~': transcribed from a figure's bar labels; "
             f"hardware.measurements lists the sources.")
    return text, abs(worst.error)


def gpu_table(args: argparse.Namespace) -> str:
    """Every kernel on the whole GPU with the calibrated costs."""
    batch = args.batch or max(1, 16384 // args.seq_len)
    heads = args.heads or max(1, 2048 // args.head_dim)
    rows = []
    for name, k in pl.KERNELS.items():
        r = pl.simulate(name, gpu=args.gpu, seq_len=args.seq_len, head_dim=args.head_dim,
                        batch=batch, heads=heads, causal=args.causal, dtype=args.dtype)
        tile = "-" if r.tile is None else f"{r.tile.b_r}x{r.tile.b_c}"
        rows.append([name, k.description, tile, f"{r.time * 1e3:.3f}", f"{r.tflops:.0f}",
                     f"{r.utilization:.1%}"])
    head = (f"Whole GPU, calibrated ({args.gpu}, {args.dtype}, N={args.seq_len}, "
            f"d={args.head_dim}, batch {batch}, heads {heads}"
            f"{', causal' if args.causal else ''}):")
    return head + "\n" + tabulate(rows, headers=["kernel", "what", "tile", "time (ms)",
                                                  "TFLOP/s", "of peak"],
                                  disable_numparse=True, stralign="right")


def _plot(args: argparse.Namespace) -> int:
    if args.plot_blocks < 1:
        raise ValueError(f"--plot-blocks must be >= 1, got {args.plot_blocks}")
    batch = args.batch or max(1, 16384 // args.seq_len)
    heads = args.heads or max(1, 2048 // args.head_dim)
    r = pl.simulate(args.plot_kernel, gpu=args.gpu, seq_len=args.seq_len,
                    head_dim=args.head_dim, batch=batch, heads=heads, causal=args.causal,
                    dtype=args.dtype)
    t = r.block
    end = max(ev.end for ev in t.events if ev.j < args.plot_blocks)
    return plots.write_figure(plots.draw_timeline, t, args.plot, end=end, title=(
        f"{args.plot_kernel} on one {args.gpu} SM (calibrated): {args.dtype}, "
        f"d = {args.head_dim}, tile {t.block[0]} x {t.block[1]}; whole GPU "
        f"{r.tflops:.0f} TFLOP/s ({r.utilization:.0%} of peak) at N = {args.seq_len}"))


def _check_size(args: argparse.Namespace) -> None:
    """The simulated block within the documented limits of :mod:`oracle.limits` (the
    work grows with seq_len / block: a huge --seq-len would run for hours)."""
    limits.check_arguments("hardware.pipeline.simulate", {
        "seq_len": args.seq_len, "head_dim": args.head_dim, "block": list(args.block),
        "stages": args.stages}, {"seq_len": "--seq-len", "head_dim": "--head-dim",
                                 "block": "--block", "stages": "--stages"})


def run(args: argparse.Namespace) -> int:
    if args.sweep:
        text, _ = sweep_text()
        print(text)
        return 0
    if args.plot is not None:
        return _plot(args)
    if args.gantt_blocks < 1:
        raise ValueError(f"--gantt-blocks must be >= 1, got {args.gantt_blocks}")
    if args.limit < 0:
        raise ValueError(f"--limit must be >= 0, got {args.limit}")
    _check_size(args)
    timelines = {
        name: pl.simulate_block(name, gpu=args.gpu, seq_len=args.seq_len, head_dim=args.head_dim,
                          block=tuple(args.block), stages=args.stages, dtype=args.dtype)
        for name in pl.SCHEDULES
    }
    print(_costs_line(timelines["fa3"]))
    print()
    serial = timelines["serial"].total_time
    sms = specs.get(args.gpu).sm_count or 0
    rows = [[name, t.schedule.description, f"{t.total_time * 1e6:.2f}",
             f"{t.tensor_utilization:.1%}", f"{t.flops_per_second * sms / 1e12:.0f}",
             f"{serial / t.total_time:.2f}x"] for name, t in timelines.items()]
    print(tabulate(rows, headers=["schedule", "what", "time (us)", "tensor util",
                                  "TFLOPS (all SMs)", "vs serial"],
                   disable_numparse=True, stralign="right"))
    failed = [(a, b) for a, b in ORDERING
              if not timelines[a].tensor_utilization > timelines[b].tensor_utilization]
    print()
    print("ordering (fa3 > each ablation > serial): " + (
        "ok" if not failed else "VIOLATED: " + ", ".join(f"{a} <= {b}" for a, b in failed)))
    print("(one thread block's main loop at the catalogue's ideal rates)")
    print()
    print(gpu_table(args))
    if args.gantt:
        for name, t in timelines.items():
            end = max(ev.end for ev in t.events if ev.j < args.gantt_blocks)
            print(f"\n{name}:")
            print(t.gantt(width=args.width, end=end))
        print("\nK/V: tile transfer; S/s: GEMM0 of warpgroup 0/1; O/o: GEMM1; E/e: softmax")
    if args.events:
        t = timelines[args.events]
        rows = [[ev.unit, ev.op, ev.j, "" if ev.buffer is None else ev.buffer,
                 "" if ev.stage is None else ev.stage, "" if ev.wg is None else ev.wg,
                 f"{ev.start * 1e9:.1f}", f"{ev.end * 1e9:.1f}"]
                for ev in t.events[:args.limit]]
        print(f"\n{args.events}: first {len(rows)} of {len(t.events)} events")
        print(tabulate(rows, headers=["unit", "op", "block", "buffer", "stage", "warpgroup",
                                      "start (ns)", "end (ns)"], disable_numparse=True))
    return 1 if failed else 0
