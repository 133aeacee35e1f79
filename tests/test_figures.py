"""The figures' layout rules that can be checked on the drawn figure: titles and legends inside
the canvas, no empty band under the legend, readable time units, step boundaries, one roof per
precision present, labelled bars, and colours that tell every category (and idle time) apart."""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from conftest import shared

from nongemm_trace.analyses.flops import flops_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.report import figures, palette


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour: distances there follow what the eye sees."""
    def lin(c):
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92
    r, g, b = (lin(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(v):
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116
    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _delta_e(a: str, b: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b))) ** 0.5


def test_every_category_and_idle_colour_is_distinct():
    colours = dict(palette.CATEGORY_COLORS, idle_host_bound=palette.IDLE_HOST_BOUND, idle_other=palette.IDLE_OTHER)
    close = [(a, b, round(_delta_e(colours[a], colours[b]), 1))
             for a, b in itertools.combinations(colours, 2) if _delta_e(colours[a], colours[b]) < 25]
    assert not close
    assert _delta_e(palette.CATEGORY_COLORS["communication"], palette.IDLE_HOST_BOUND) > 60
    assert _delta_e(palette.CATEGORY_COLORS["gemm"], palette.CATEGORY_COLORS["attention"]) > 40
    roofs = [palette.ROOF, palette.STEP_BOUNDARY]
    assert not set(roofs) & set(palette.CATEGORY_COLORS.values())


def _inside(fig, artist, tol: float = 1.0) -> bool:
    box = artist.get_window_extent(fig.canvas.get_renderer())
    return box.x0 >= -tol and box.y0 >= -tol and box.x1 <= fig.bbox.x1 + tol and box.y1 <= fig.bbox.y1 + tol


@pytest.fixture(scope="module")
def ddp_launch():
    return launch_analysis(shared("h200x2", "bert_ddp_train_rank0.json.gz"))


def test_timeline_title_legend_units_and_steps(ddp_launch):
    rep = ddp_launch
    fig = figures.timeline_figure(rep)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = fig.legends[0]
    assert _inside(fig, ax.title) and _inside(fig, legend)
    assert rep.verdict.split()[-1].strip(")") in ax.title.get_text()  # the whole verdict, wrapped, not cut
    below = legend.get_window_extent(fig.canvas.get_renderer()).y0
    assert below < 0.1 * fig.bbox.height  # no empty band under the legend
    span_ns = (rep.activities["ts_ns"] + rep.activities["dur_ns"]).max() - rep.activities["ts_ns"].min()
    assert span_ns > 2e8 and "(ms)" in ax.get_xlabel()  # a 350 ms trace is drawn in ms
    assert ax.xaxis.get_offset_text().get_text() == ""
    steps = rep.activities["step"].drop_nulls().n_unique()
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert steps == 3 and len(dashed) == steps - 1
    labels = {t.get_text() for t in legend.get_texts()}
    assert {"communication", "idle: waiting for launch", "step start"} <= labels
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_short_window_stays_in_microseconds(ddp_launch):
    fig = figures.timeline_figure(ddp_launch, (0.0, 1500.0))
    assert "(us)" in fig.axes[0].get_xlabel() and fig.axes[0].get_xlim() == (0.0, 1500.0)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_roofline_draws_one_roof_per_precision_present():
    rep = flops_analysis(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    plotted = rep.calls.filter((pl.col("time_ns") > 0) & (pl.col("bytes") > 0) & (pl.col("flops") > 0))
    present = set(plotted["precision"].drop_nulls()) & set(rep.device.tflops)
    fig = figures.roofline_figure(rep)
    fig.canvas.draw()
    ax = fig.axes[0]
    roofs = [ln.get_label() for ln in ax.get_lines() if ln.get_label().startswith("roof ")]
    assert sorted(r.split()[1] for r in roofs) == sorted(present) and "bf16" in present
    assert all(ln.get_color() == palette.ROOF for ln in ax.get_lines())
    assert _inside(fig, ax.title)
    key = next(t.get_text() for t in ax.texts if t.get_text().startswith("top ops"))
    assert "aten::mm" in key
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_precisions_with_one_peak_share_a_roof():
    peaks = {"fp32": 66.9, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}
    assert figures._roofs(peaks, ["bf16", "fp16"]) == ([(989.4, ["bf16", "fp16"])], "")
    roofs, note = figures._roofs(peaks, [])
    assert [p for p, _ in roofs] == [66.9, 989.4, 1978.9] and "unknown" in note


def test_share_bars_carry_their_values():
    rep = flops_analysis(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"))
    fig = figures.shares_figure(rep)
    texts = [t.get_text() for t in fig.axes[0].texts]
    expected = [f"{100 * v:.1f} %" for v in rep.classes.sort("class")["time_share"]]
    assert len(texts) == 2 * rep.classes.height and set(expected) <= set(texts)
    import matplotlib.pyplot as plt
    plt.close(fig)
