"""Pictures of the machine models: the pipeline timeline of one SM, the roofline with
kernels placed on it, and the KV-cache memory over time.

matplotlib is an optional extra (``pip install '.[plot]'``). It is imported only inside
the drawing functions, and only its object-oriented API is used (a
``matplotlib.figure.Figure`` with the Agg canvas, never ``pyplot``), so drawing works
without a display and leaves no global state. Each function returns the Figure (the
tests inspect its axes, labels and artists) and writes ``path`` when one is given.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from hardware import roofline as rl, specs

__all__ = ["MATPLOTLIB_HINT", "draw_timeline", "draw_roofline", "draw_kv_memory",
           "ROOFLINE_KERNELS", "write_figure"]

#: the message when matplotlib is missing
MATPLOTLIB_HINT = ("plotting needs matplotlib, an optional extra: "
                   "pip install '.[plot]' (or pip install matplotlib)")

#: colours of the consumer warpgroups (up to three), the producer and the exp2 unit
_WG_COLOURS = ("tab:blue", "tab:orange", "tab:green")
_LOAD_COLOURS = {"K": "tab:gray", "V": "tab:olive"}


def _figure(width: float, height: float) -> Any:
    try:  # deferred: matplotlib is the optional [plot] extra
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # absent, or blocked (sys.modules entry None)
        raise ImportError(MATPLOTLIB_HINT) from None
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | os.PathLike | None) -> None:
    if path is not None:
        fig.savefig(os.fspath(path), bbox_inches="tight")


def write_figure(draw: Callable[..., Any], what: Any, path: str | os.PathLike,
                 **options: Any) -> int:
    """The exit status of a CLI command drawing ``draw(what, path, **options)``: 0 after
    printing "wrote PATH", 2 after printing the reason to stderr when matplotlib is
    missing."""
    try:
        draw(what, path, **options)
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


# ------------------------------------------------------------------ the timeline


def draw_timeline(timeline: Any, path: str | os.PathLike | None = None, *,
                  end: float | None = None, title: str | None = None) -> Any:
    """Draw one SM's schedule as the FA3 paper's figures 1-2 do: a row for the producer
    (K and V tile transfers), one per consumer warpgroup (its GEMM0, softmax, GEMM1),
    then the shared units: tensor cores (coloured by warpgroup) and the exp2 unit (and
    the FP32 pipe when the softmax runs on split pipes).

    Args:
        timeline: a :class:`hardware.pipeline.Timeline` (``simulate_block``, or
            ``simulate(...).block``).
        path: PNG (or any format matplotlib infers from the suffix) to write.
        end: last time shown, seconds (default: the whole run).
        title: figure title (default: schedule, GPU, dtype, d, block).

    Returns:
        The matplotlib Figure; its one Axes has y tick labels naming the rows.

    Raises:
        ImportError: matplotlib is not installed (the message says how to install it).
        ValueError: ``end`` not positive.
    """
    fig = _figure(11, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    t_end = timeline.total_time if end is None else float(end)
    if not t_end > 0:
        raise ValueError(f"end must be positive, got {end!r}")
    us = 1e6
    wgs = timeline.schedule.warpgroups
    units = {ev.unit for ev in timeline.events}
    rows = ["producer (TMA loads)" if timeline.schedule.producer else "loads"]
    rows += [f"warpgroup {w}" for w in range(wgs)]
    rows += ["tensor cores"]
    if "sfu" in units:
        rows += ["exp2 (SFU)", "FP32 pipe"]
    else:
        rows += ["softmax (SFU + FP32)"]
    y = {name: len(rows) - 1 - k for k, name in enumerate(rows)}   # first row on top
    height = 0.7

    def bar(row: str, ev: Any, colour: str, hatch: str | None = None) -> None:
        if ev.start >= t_end or ev.end <= ev.start:
            return
        x0, x1 = ev.start * us, min(ev.end, t_end) * us
        ax.broken_barh([(x0, x1 - x0)], (y[row] - height / 2, height),
                       facecolors=colour, edgecolors="black", linewidth=0.3, hatch=hatch)

    wg_hatch = {"gemm0": None, "gemm1": "//", "softmax": "..", "exp": "..", "fp32": "xx"}
    for ev in timeline.events:
        if ev.unit == "memory":
            bar(rows[0], ev, _LOAD_COLOURS.get(ev.buffer, "tab:gray"))
            continue
        if ev.wg is None:
            continue
        colour = _WG_COLOURS[ev.wg % len(_WG_COLOURS)]
        if ev.op in ("gemm0", "gemm1", "softmax", "exp", "fp32"):
            bar(f"warpgroup {ev.wg}", ev, colour, wg_hatch[ev.op])
        if ev.op == "exp_stall":
            bar("tensor cores", ev, "lightgray", "..")
        elif ev.unit == "tensor":
            bar("tensor cores", ev, colour, wg_hatch[ev.op])
        elif ev.unit == "sfu":
            bar("exp2 (SFU)", ev, colour, wg_hatch["exp"])
        elif ev.unit == "fp32":
            bar("FP32 pipe", ev, colour, wg_hatch["fp32"])
        elif ev.unit == "softmax":
            bar("softmax (SFU + FP32)", ev, colour, wg_hatch["softmax"])

    # deferred: matplotlib is the optional [plot] extra
    from matplotlib.patches import Patch

    legend = [Patch(facecolor=_WG_COLOURS[w], label=f"warpgroup {w}") for w in range(wgs)]
    legend += [Patch(facecolor="white", edgecolor="black", hatch=h, label=lab)
               for h, lab in ((None, "S = QK^T (GEMM0)"), ("//", "O += PV (GEMM1)"),
                              ("..", "softmax / exp2"), ("xx", "softmax FP32 work"))]
    legend += [Patch(facecolor=c, label=f"{b} tile load") for b, c in _LOAD_COLOURS.items()]
    if any(ev.op == "exp_stall" for ev in timeline.events):
        legend.append(Patch(facecolor="lightgray", hatch="..",
                            label="tensor cores held by an exp2 stream"))
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4,
              fontsize=8, frameon=False)
    ax.set_yticks([y[r] for r in rows])
    ax.set_yticklabels(rows)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, t_end * us)
    ax.set_xlabel("time (µs)")
    ax.grid(axis="x", linewidth=0.3)
    util = sum(max(0.0, min(ev.end, t_end) - ev.start) for ev in timeline.events
               if ev.op in ("gemm0", "gemm1") and ev.start < t_end) / t_end
    ax.set_title(title or (
        f"{timeline.schedule.name} on one {timeline.gpu} SM: {timeline.dtype}, "
        f"d = {timeline.head_dim}, block {timeline.block[0]} x {timeline.block[1]}, "
        f"tensor cores busy {util:.0%} of the window"), fontsize=10)
    _save(fig, path)
    return fig


# ------------------------------------------------------------------ the roofline

#: kernels placed on the roofline: (label, how the intensity is computed)
ROOFLINE_KERNELS = (
    "attention forward (FA3, N = 8K, d = 128)",
    "decode GEMV (batch 1, BF16 weights)",
    "decode attention (GQA-8, BF16 KV)",
    "prefill GEMM (4096 tokens x 4096 x 4096)",
)


def _kernel_points() -> list[tuple[str, float]]:
    n, d = 8192, 128
    attn = 4.0 * n * n * d / (4 * n * d * 2)          # FLOPs / (Q, K, V in, O out) bytes
    m = k = nn = 4096
    gemm = 2.0 * m * k * nn / (2 * (m * k + k * nn + m * nn))
    return [(ROOFLINE_KERNELS[0], attn), (ROOFLINE_KERNELS[1], rl.decode_intensity(1, 2)),
            (ROOFLINE_KERNELS[2], rl.attention_intensity(8)), (ROOFLINE_KERNELS[3], gemm)]


def draw_roofline(gpus: Sequence[str] = ("V100", "A100", "H100", "B200"),
                  path: str | os.PathLike | None = None, *,
                  modelled: Iterable[tuple[str, float, float]] = ()) -> Any:
    """Draw the roofline (BF16/FP16 dense peak and HBM bandwidth) of each GPU on log-log
    axes, its ridge point marked, and place the kernels of :data:`ROOFLINE_KERNELS` at
    their arithmetic intensity: a vertical line each, with a marker where it meets each
    GPU's roof (the attainable FLOP/s).

    Args:
        gpus: catalogue names.
        path: file to write.
        modelled: extra points (label, intensity FLOP/B, FLOP/s), e.g. the whole-GPU
            model's FA3 figure, drawn as stars.

    Returns:
        The Figure; one Axes whose lines are labelled with the GPU names.

    Raises:
        ImportError: matplotlib is missing. ValueError: unknown GPU name.
    """
    gs = [specs.get(n) for n in gpus]   # unknown names fail before drawing
    if not gs:
        raise ValueError("draw_roofline needs at least one GPU")
    fig = _figure(9, 5.5)
    ax = fig.add_subplot(1, 1, 1)
    x = np.logspace(-1, 4.5, 400)
    for g in gs:
        peak = g.flops(g.half_precision)
        ax.plot(x, rl.attainable_flops(x, peak, g.bandwidth) / 1e12, linewidth=1.6,
                label=f"{g.name} ({peak / 1e12:.0f} TFLOP/s {g.half_precision.upper()}, "
                      f"{g.bandwidth / 1e12:.2f} TB/s)")
        ridge = rl.gpu_ridge(g)
        ax.plot([ridge], [peak / 1e12], marker="o", color=ax.lines[-1].get_color(),
                markersize=4)
    gpu_handles = list(ax.lines[::2])
    markers = ("s", "v", "^", "D")
    kernel_handles = []
    for (label, inten), mk in zip(_kernel_points(), markers):
        ax.axvline(inten, color="black", linewidth=0.6, linestyle=":")
        ys = [rl.attainable_flops(inten, g.flops(g.half_precision), g.bandwidth) / 1e12
              for g in gs]
        kernel_handles += ax.plot([inten] * len(ys), ys, marker=mk, color="black",
                                  markersize=5, linestyle="none",
                                  label=f"{label}: {inten:.4g} FLOP/B")
    for label, inten, flops in modelled:
        kernel_handles += ax.plot([inten], [flops / 1e12], marker="*", markersize=11,
                                  linestyle="none", color="tab:red", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(0.3, 5000)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("attainable TFLOP/s (dense)")
    ax.set_title("Roofline: min(peak, intensity x bandwidth); kernels at their intensity",
                 fontsize=10)
    ax.grid(which="both", linewidth=0.3)
    first = ax.legend(handles=gpu_handles, fontsize=7, loc="lower right", title="GPU roofs",
                      title_fontsize=7)
    ax.add_artist(first)
    ax.legend(handles=kernel_handles, fontsize=7, loc="upper left",
              title="kernels (markers where they meet each roof)", title_fontsize=7)
    _save(fig, path)
    return fig


# ------------------------------------------------------------------ KV-cache memory


def draw_kv_memory(results: Sequence[Any], path: str | os.PathLike | None = None, *,
                   memory_slots: int | None = None, title: str | None = None) -> Any:
    """Draw KV-cache memory over time for each policy's simulation: slots allocated
    (solid) and tokens actually held (dashed), per step, with the budget as a
    horizontal line; a second panel shows the running requests.

    Args:
        results: :class:`refimpl.kvcache.simulate.SimulationResult` objects (their
            ``history``), e.g. one contiguous and one paged.
        path: file to write.
        memory_slots: the budget line (omitted when None).
        title: figure title.

    Returns:
        The Figure; two Axes (memory, running requests) sharing the step axis.

    Raises:
        ImportError: matplotlib is missing. ValueError: no results, or one without
        a history.
    """
    if not results:
        raise ValueError("draw_kv_memory needs at least one simulation result")
    for r in results:
        if not r.history:
            raise ValueError(f"the {r.policy} result has no per-step history")
    fig = _figure(10, 6)
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    colours = {"contiguous": "tab:red", "paged": "tab:blue"}
    for r in results:
        steps = range(len(r.history))
        tokens = [h[0] for h in r.history]
        alloc = [h[1] for h in r.history]
        c = colours.get(r.policy)
        ax.plot(steps, alloc, color=c, linewidth=1.2,
                label=f"{r.policy}: slots allocated (KV used {r.utilization:.0%})")
        ax.plot(steps, tokens, color=c, linewidth=1.0, linestyle="--",
                label=f"{r.policy}: tokens held")
        ax2.plot(steps, [h[2] for h in r.history], color=c, linewidth=1.0,
                 label=f"{r.policy} ({r.steps} steps, peak {r.peak_running})")
    if memory_slots is not None:
        ax.axhline(memory_slots, color="black", linewidth=0.8, linestyle=":",
                   label=f"budget ({memory_slots} slots)")
    ax.set_ylabel("KV slots (tokens)")
    ax.set_title(title or "KV-cache memory over time: contiguous reservation vs paged",
                 fontsize=10)
    ax.legend(fontsize=8, loc="center", bbox_to_anchor=(0.55, 0.6))
    ax.grid(linewidth=0.3)
    ax2.set_xlabel("step (one decoding iteration)")
    ax2.set_ylabel("running")
    ax2.legend(fontsize=8, loc="upper right")
    ax2.grid(linewidth=0.3)
    _save(fig, path)
    return fig
