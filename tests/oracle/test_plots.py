"""The pictures (oracle.plots) and the CLI options that draw them.

Oracles: the files exist and are PNGs; the matplotlib objects carry the expected rows,
labels, scales and data (checked against the model objects and catalogue figures the
pictures were drawn from); without matplotlib the message names the extra.
"""
from __future__ import annotations

import sys

import pytest

from hardware import pipeline as pl
from oracle import plots
from oracle.cli import main
from refimpl.kvcache.simulate import sharegpt_like_trace, simulate

PNG = b"\x89PNG\r\n\x1a\n"


def _png(path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG)


# ---------------------------------------------------------------- without matplotlib


@pytest.fixture
def no_matplotlib(monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends",
                 "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)


def test_missing_matplotlib_names_the_extra(no_matplotlib, tmp_path):
    t = pl.simulate_block("fa3", seq_len=512, head_dim=64)
    with pytest.raises(ImportError, match=r"pip install '\.\[plot\]'"):
        plots.draw_timeline(t, tmp_path / "t.png")
    with pytest.raises(ImportError, match="matplotlib"):
        plots.draw_roofline(["H100"])
    assert not (tmp_path / "t.png").exists()


@pytest.mark.parametrize("argv", [["pipeline", "--plot"], ["roofline", "--plot"],
                                  ["kvcache", "--requests", "20", "--plot"]])
def test_cli_without_matplotlib_exits_2(no_matplotlib, tmp_path, capsys, argv):
    out = tmp_path / "x.png"
    assert main(argv + [str(out)]) == 2
    assert "pip install '.[plot]'" in capsys.readouterr().err
    assert not out.exists()


# ---------------------------------------------------------------- with matplotlib


@pytest.fixture
def mpl():
    return pytest.importorskip("matplotlib")


def test_timeline(mpl, tmp_path):
    r = pl.simulate("fa3", seq_len=4096, head_dim=128, batch=4, heads=16)
    fig = plots.draw_timeline(r.block, tmp_path / "t.png")
    _png(tmp_path / "t.png")
    (ax,) = fig.axes
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["producer (TMA loads)", "warpgroup 0", "warpgroup 1", "tensor cores",
                    "exp2 (SFU)", "FP32 pipe"]
    assert ax.get_xlabel() == "time (µs)"
    assert "fa3" in ax.get_title()
    # one bar per event that is drawn: every GEMM twice (its warpgroup's row, tensor)
    gemms = [e for e in r.block.events if e.op in ("gemm0", "gemm1")]
    bars = [c for c in ax.collections]
    assert len(bars) >= 2 * len(gemms)
    assert ax.get_xlim()[1] == pytest.approx(r.block.total_time * 1e6)


def test_timeline_of_the_ideal_model_and_a_window(mpl, tmp_path):
    t = pl.simulate_block("serial", seq_len=1024, head_dim=64)
    fig = plots.draw_timeline(t, end=t.total_time / 2, title="serial")
    (ax,) = fig.axes
    assert [x.get_text() for x in ax.get_yticklabels()] == [
        "loads", "warpgroup 0", "tensor cores", "softmax (SFU + FP32)"]
    assert ax.get_title() == "serial"
    assert ax.get_xlim()[1] == pytest.approx(t.total_time / 2 * 1e6)
    with pytest.raises(ValueError, match="end"):
        plots.draw_timeline(t, end=0.0)


def test_roofline(mpl, tmp_path):
    fig = plots.draw_roofline(["A100", "H100"], tmp_path / "r.png",
                              modelled=[("model", 4096.0, 600e12)])
    _png(tmp_path / "r.png")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "arithmetic intensity" in ax.get_xlabel()
    labels = [ln.get_label() for ln in ax.lines]
    roofs = {lab.split()[0]: ln for lab, ln in zip(labels, ax.lines)
             if lab.startswith(("A100 (", "H100 ("))}
    assert set(roofs) == {"A100", "H100"}
    # the flat part of each roof is the catalogue's BF16 peak (datasheets: 312, 989)
    assert max(roofs["A100"].get_ydata()) == pytest.approx(312)
    assert max(roofs["H100"].get_ydata()) == pytest.approx(989)
    for kernel in plots.ROOFLINE_KERNELS:
        assert any(lab.startswith(kernel) for lab in labels)
    gemv = next(ln for ln in ax.lines if ln.get_label().startswith("decode GEMV"))
    assert list(gemv.get_xdata()) == [1.0, 1.0]           # 2 x batch 1 / 2 bytes
    # memory-bound: intensity x bandwidth (1 FLOP/B x 2.039 / 3.35 TB/s)
    assert sorted(gemv.get_ydata()) == pytest.approx([2.039, 3.35])
    assert "model" in labels
    with pytest.raises(ValueError):
        plots.draw_roofline(["H300"])


def test_kv_memory(mpl, tmp_path):
    trace = sharegpt_like_trace(60)
    res = [simulate(trace, p) for p in ("contiguous", "paged")]
    fig = plots.draw_kv_memory(res, tmp_path / "kv.png", memory_slots=16 * 2048)
    _png(tmp_path / "kv.png")
    ax, ax2 = fig.axes
    assert ax.get_ylabel() == "KV slots (tokens)" and ax2.get_ylabel() == "running"
    assert ax2.get_xlabel().startswith("step")
    lines = {ln.get_label().split(":")[0] + (":tokens" if "tokens held" in ln.get_label()
                                             else ""): ln for ln in ax.lines}
    alloc = lines["contiguous"]
    assert list(alloc.get_ydata()) == [h[1] for h in res[0].history]
    assert max(alloc.get_ydata()) <= 16 * 2048
    budget = next(ln for ln in ax.lines if ln.get_label().startswith("budget"))
    assert list(budget.get_ydata()) == [16 * 2048] * 2
    assert len(ax2.lines) == 2
    with pytest.raises(ValueError, match="at least one"):
        plots.draw_kv_memory([])


def test_cli_plots(mpl, tmp_path, capsys):
    for argv, name in ((["pipeline", "--seq-len", "2048", "--head-dim", "64"], "t.png"),
                       (["pipeline", "--plot-kernel", "fa2", "--causal"], "t2.png"),
                       (["roofline", "--gpu", "H100", "--gpu", "MI300X"], "r.png"),
                       (["kvcache", "--requests", "40"], "k.png")):
        assert main(argv + ["--plot", str(tmp_path / name)]) == 0
        _png(tmp_path / name)
    assert "wrote" in capsys.readouterr().out
    assert main(["roofline", "--gpu", "H300", "--plot", str(tmp_path / "bad.png")]) == 2
    assert main(["pipeline", "--plot-blocks", "0", "--plot", str(tmp_path / "b.png")]) == 2
