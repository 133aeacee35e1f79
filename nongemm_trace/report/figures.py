"""Figures (matplotlib, no display needed): stacked bars per category (a comparison), the
launch timeline, the roofline and FLOP vs time shares (a FLOPs report). Colours: :mod:`.palette`."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from ..core.safe_write import write_file
from ..errors import TraceError
from .names import shorten
from .palette import IDLE_HOST_BOUND, IDLE_OTHER, ROOF, SHARE_FLOPS, SHARE_TIME, STEP_BOUNDARY, category_color


def plot_bars(cmp, output: str | Path, absolute: bool = False, title: str | None = None) -> None:
    """``cmp`` is a :class:`~nongemm_trace.analyses.compare.Comparison` (one trace is fine)."""
    plt = _pyplot()

    d = cmp.to_dict()
    labels = [Path(t["trace"]).name.replace(".json.gz", "").replace(".json", "") for t in d["traces"]]
    totals = [t["gpu_time_us"] for t in d["traces"]]
    cats = [c for c in d["categories"] if any(c["gpu_time_us"])]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) + 3), 5.5))
    bottoms = [0.0] * len(labels)
    for c in cats:
        vals = [v if absolute else (100 * v / tot if tot else 0.0) for v, tot in zip(c["gpu_time_us"], totals)]
        ax.bar(range(len(labels)), vals, bottom=bottoms, color=category_color(c["category"]),
               label=f"{c['category']} ({c['class']})", edgecolor="white", linewidth=0.5)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, t in enumerate(d["traces"]):
        ax.text(i, bottoms[i], f"non-GEMM {100 * t['non_gemm_share']:.0f} %", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottoms + [1.0]) * 1.12)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    unit = "per step" if d["per_step"] else "total"
    ax.set_ylabel(f"GPU time ({unit}, us)" if absolute else "share of GPU time (%)")
    ax.set_title(title or f"GPU time by category ({d['level']} level, taxonomy {d['taxonomy']})", fontsize=10, pad=10)
    if cats:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    _save(fig, output, dpi=120, bbox_inches="tight")


def plot_timeline(rep, output: str | Path, window: tuple[float, float] | None = None) -> None:
    """Draw ``rep.activities``; ``window`` is (start, end) in microseconds from the first activity."""
    _save(timeline_figure(rep, window), output, dpi=110)


def timeline_figure(rep, window: tuple[float, float] | None = None):
    """The launch timeline: one lane per (device, stream), the idle gaps below, step starts as
    dashed lines. The time axis is in us, ms or s by the span drawn (plain numbers, no offset); the
    verdict title wraps inside the canvas; the legend sits right under the axis."""
    plt = _pyplot()
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    acts = rep.activities
    if acts.height == 0:
        raise TraceError(rep.trace, "no GPU activities to plot")
    t0 = int(acts["ts_ns"].min())
    acts = acts.with_columns(((pl.col("ts_ns") - t0) / 1000).alias("x"), (pl.col("dur_ns") / 1000).alias("w"))
    if window:
        lo, hi = window
        acts = acts.filter((pl.col("x") + pl.col("w") >= lo) & (pl.col("x") <= hi))
        if acts.height == 0:
            raise TraceError(rep.trace, f"no GPU activity in the window {lo:g}:{hi:g} us")
    lo_us, hi_us = window or (0.0, float((acts["x"] + acts["w"]).max()))
    unit, per = _time_unit(hi_us - lo_us)
    acts = acts.with_columns(pl.col("x") / per, pl.col("w") / per)
    lanes = acts.select("device", "stream").unique().sort(["device", "stream"]).rows()
    fig, ax = plt.subplots(figsize=(14, 2.4 + 0.45 * (len(lanes) + 1)), layout="constrained")
    for i, (dev, stream) in enumerate(lanes):
        lane = acts.filter((pl.col("device") == dev) & (pl.col("stream") == stream))
        for cat, sub in sorted(lane.group_by("category"), key=lambda g: g[0]):
            ax.broken_barh(list(zip(sub["x"].to_list(), sub["w"].to_list())), (i + 0.6, 0.8),
                           facecolors=category_color(cat[0]), linewidth=0)
    gaps = acts.filter(pl.col("gap_device_ns") > 0).with_columns(
        (pl.col("x") - pl.col("gap_device_ns") / 1000 / per).alias("gx"),
        (pl.col("gap_device_ns") / 1000 / per).alias("gw"))
    host = gaps.filter(pl.col("host_bound_gap_ns") > 0)
    other = gaps.filter(pl.col("host_bound_gap_ns") == 0)
    ax.broken_barh(list(zip(host["gx"].to_list(), host["gw"].to_list())), (0, 0.5), facecolors=IDLE_HOST_BOUND)
    ax.broken_barh(list(zip(other["gx"].to_list(), other["gw"].to_list())), (0, 0.5), facecolors=IDLE_OTHER)
    top = len(lanes) + 0.5
    starts = acts.filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("x").min()).sort("step")
    for step, x in starts.rows()[1:]:  # the first step starts where the drawing does
        ax.axvline(x, color=STEP_BOUNDARY, linestyle="--", linewidth=0.8)
        ax.text(x, top, f" step {step}", fontsize=7, color=STEP_BOUNDARY, va="bottom", ha="left")
    ax.set_ylim(-0.2, top + 0.55)
    ax.set_yticks([0.25] + [i + 1 for i in range(len(lanes))])
    ax.set_yticklabels(["idle gaps"] + [f"dev {d} stream {s}" for d, s in lanes])
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.set_xlabel(f"time since the first GPU activity ({unit})")
    if window:
        ax.set_xlim(window[0] / per, window[1] / per)
    handles: list[Artist] = [Patch(color=category_color(c), label=c) for c in sorted(set(acts["category"].to_list()))]
    handles += [Patch(color=IDLE_HOST_BOUND, label="idle: waiting for launch"),
                Patch(color=IDLE_OTHER, label="idle: other")]
    if starts.height > 1:
        handles.append(Line2D([0], [0], color=STEP_BOUNDARY, linestyle="--", label="step start"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(8, len(handles)), fontsize=8, frameon=False)
    ax.set_title(_wrap(f"{Path(rep.trace).name}: {rep.verdict}", 14, 9), fontsize=9)
    return fig


def _time_unit(span_us: float) -> tuple[str, float]:
    """The unit a span reads best in (ticks of at most four digits) and microseconds per unit."""
    if span_us >= 2e6:
        return "s", 1e6
    if span_us >= 2e3:
        return "ms", 1e3
    return "us", 1.0


def _wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped to lines that fit ``width_in`` inches at ``fontsize`` points (a glyph of
    DejaVu Sans is about 0.6 em wide on average)."""
    import textwrap

    return textwrap.fill(text, width=max(20, int(width_in * 72 / (fontsize * 0.6))))


def plot_roofline(rep, output: str | Path) -> None:
    _save(roofline_figure(rep), output, dpi=120)


def roofline_figure(rep, labelled: int = 5):
    """One point per op call, coloured by category; one roof per precision the plotted calls ran in
    (precisions with the same peak share a roof and its label), in greys, labelled at their right
    end; the ``labelled`` ops with the most GPU time are numbered at their rate over all their calls
    and named in a key."""
    plt = _pyplot()

    df = rep.calls.filter((pl.col("time_ns") > 0) & (pl.col("bytes") > 0) & pl.col("flops").is_not_null())
    if df.height == 0:
        raise TraceError(rep.trace, "no op with FLOPs, bytes and GPU time to plot")
    df = df.with_columns((pl.col("flops") / pl.col("bytes")).alias("ai"),
                         (pl.col("flops") / pl.col("time_ns") / 1e3).alias("tflops"))
    fig, ax = plt.subplots(figsize=(8.5, 5.5), layout="constrained")
    points = df.filter(pl.col("flops") > 0)
    for cat, sub in sorted(points.group_by("category"), key=lambda g: g[0]):
        ax.scatter(sub["ai"].to_list(), sub["tflops"].to_list(), s=10, alpha=0.6, label=cat[0],
                   color=category_color(cat[0]))
    ai_max = max(df["ai"].max() or 1, 1) * 4
    note = ""
    if rep.device:
        roofs, note = _roofs(rep.device.tflops, points["precision"].drop_nulls().unique().to_list())
        bw = rep.device.memory_tbps
        xs = [x for x in (1e-3 * 2 ** (i / 4) for i in range(0, 120)) if x <= ai_max]
        for i, (peak, precs) in enumerate(roofs):
            ax.plot(xs, [min(peak, x * bw) for x in xs], color=ROOF, linewidth=0.9,
                    linestyle=("-", "--", ":", "-.")[i % 4], label=f"roof {'/'.join(precs)} ({peak:g} TF/s)")
            ax.text(xs[-1], peak, f"{'/'.join(precs)} {peak:g} TF/s", fontsize=7, color=ROOF, ha="right",
                    va="bottom")
        ax.text(xs[0], xs[0] * bw, f" memory {bw:g} TB/s", fontsize=7, color=ROOF, ha="left", va="bottom",
                rotation=25, rotation_mode="anchor", transform_rotates_text=True)
    named = rep.ops.filter((pl.col("flops") > 0) & (pl.col("bytes") > 0) & (pl.col("time_ns") > 0)).sort(
        "time_ns", descending=True).head(labelled)
    key: list[str] = []
    spots: dict[tuple[int, int], tuple[float, float, list[str]]] = {}
    repeated = set(named.filter(pl.col("op").is_duplicated())["op"].to_list())  # aten::mul as two categories
    for i, (op, cat, ai, tf) in enumerate(named.select("op", "category", "arithmetic_intensity",
                                                         "achieved_tflops").rows(), 1):
        spot = (round(math.log10(ai) * 4), round(math.log10(tf) * 4))  # a quarter decade: ops there read "2, 4"
        spots.setdefault(spot, (ai, tf, []))[2].append(str(i))
        key.append(f"{i}  {shorten(op, 40)}" + (f" ({cat})" if op in repeated else ""))
    for ai, tf, numbers in spots.values():
        ax.annotate(", ".join(numbers), (ai, tf), xytext=(-4, 4), textcoords="offset points", fontsize=7,
                    ha="right", fontweight="bold")
    if key:  # above the memory roof at low intensity nothing can be drawn: the key goes there
        ax.text(0.02, 0.98, "top ops by GPU time (all calls):\n" + "\n".join(key), transform=ax.transAxes,
                fontsize=7, va="top", ha="left")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(_wrap(f"{Path(rep.trace).name}: roofline, one point per op call{note}", 8.5, 9), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def _roofs(peaks: dict[str, float], present: list[str]) -> tuple[list[tuple[float, list[str]]], str]:
    """(peak, precisions) per roof drawn, lowest first, and a note for the title: the precisions
    the calls ran in, or every precision of the device when no call's precision is known."""
    drawn = [p for p in peaks if p in present]
    note = ""
    if not drawn:
        drawn, note = list(peaks), " (precision unknown: every roof drawn)"
    by_peak: dict[float, list[str]] = {}
    for p in drawn:
        by_peak.setdefault(peaks[p], []).append(p)
    return sorted(by_peak.items()), note


def plot_shares(rep, output: str | Path) -> None:
    _save(shares_figure(rep), output, dpi=120)


def shares_figure(rep):
    """FLOP share next to GPU-time share per class, each bar labelled with its value."""
    plt = _pyplot()

    cl = rep.classes.sort("class")
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    labels = cl["class"].to_list()
    x = range(len(labels))
    for offset, col, label, colour in ((-0.2, "flop_share", "share of FLOPs", SHARE_FLOPS),
                                       (0.2, "time_share", "share of GPU time", SHARE_TIME)):
        bars = ax.bar([i + offset for i in x], [100 * v for v in cl[col].to_list()], width=0.4, label=label,
                      color=colour)
        ax.bar_label(bars, fmt="%.1f %%", fontsize=7, padding=2)
    ax.set_ylim(0, 112)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_ylabel("%")
    ax.set_title(f"{Path(rep.trace).name}: FLOPs vs time", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, output: str | Path, **savefig) -> None:
    import matplotlib.pyplot as plt
    try:
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        write_file(output, lambda path: fig.savefig(path, **savefig))
    finally:
        plt.close(fig)
