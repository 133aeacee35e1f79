"""Figures (matplotlib, no display needed): stacked bars per category (a comparison), the
launch timeline, the roofline and FLOP vs time shares (a FLOPs report). Colours: :mod:`.palette`."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import TraceError
from ..safe_write import write_file
from .palette import IDLE_HOST_BOUND, IDLE_OTHER, category_color


def plot_bars(cmp, output: str | Path, absolute: bool = False, title: str | None = None) -> None:
    """``cmp`` is a :class:`~nongemm_trace.compare.Comparison` (one trace is fine)."""
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
    plt = _pyplot()
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
    lanes = acts.select("device", "stream").unique().sort(["device", "stream"]).rows()
    fig_h = 2.0 + 0.45 * (len(lanes) + 1)
    fig, ax = plt.subplots(figsize=(14, fig_h))
    for i, (dev, stream) in enumerate(lanes):
        lane = acts.filter((pl.col("device") == dev) & (pl.col("stream") == stream))
        for cat, sub in sorted(lane.group_by("category"), key=lambda g: g[0]):
            ax.broken_barh(list(zip(sub["x"].to_list(), sub["w"].to_list())), (i + 0.6, 0.8),
                           facecolors=category_color(cat[0]), linewidth=0)
    gaps = acts.filter(pl.col("gap_device_ns") > 0).with_columns(
        (pl.col("x") - pl.col("gap_device_ns") / 1000).alias("gx"), (pl.col("gap_device_ns") / 1000).alias("gw"))
    host = gaps.filter(pl.col("host_bound_gap_ns") > 0)
    other = gaps.filter(pl.col("host_bound_gap_ns") == 0)
    ax.broken_barh(list(zip(host["gx"].to_list(), host["gw"].to_list())), (0, 0.5), facecolors=IDLE_HOST_BOUND)
    ax.broken_barh(list(zip(other["gx"].to_list(), other["gw"].to_list())), (0, 0.5), facecolors=IDLE_OTHER)
    ax.set_yticks([0.25] + [i + 1 for i in range(len(lanes))])
    ax.set_yticklabels(["idle gaps"] + [f"dev {d} stream {s}" for d, s in lanes])
    ax.set_xlabel("time since the first GPU activity (us)")
    if window:
        ax.set_xlim(*window)
    cats = sorted(set(acts["category"].to_list()))
    handles = [Patch(color=category_color(c), label=c) for c in cats]
    handles += [Patch(color=IDLE_HOST_BOUND, label="idle: waiting for launch"), Patch(color=IDLE_OTHER, label="idle: other")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=min(8, len(handles)),
              fontsize=8, frameon=False)
    ax.set_title(f"{Path(rep.trace).name}: {rep.verdict}"[:160], fontsize=9)
    _save(fig, output, dpi=110)


def plot_roofline(rep, output: str | Path) -> None:
    plt = _pyplot()

    df = rep.calls.filter((pl.col("time_ns") > 0) & (pl.col("bytes") > 0) & pl.col("flops").is_not_null())
    if df.height == 0:
        raise TraceError(rep.trace, "no op with FLOPs, bytes and GPU time to plot")
    df = df.with_columns((pl.col("flops") / pl.col("bytes")).alias("ai"),
                         (pl.col("flops") / pl.col("time_ns") / 1e3).alias("tflops"))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for cat, sub in sorted(df.filter(pl.col("flops") > 0).group_by("category"), key=lambda g: g[0]):
        ax.scatter(sub["ai"].to_list(), sub["tflops"].to_list(), s=10, alpha=0.6, label=cat[0],
                   color=category_color(cat[0]))
    ai_max = max(df["ai"].max() or 1, 1) * 4
    if rep.device:
        bw = rep.device.memory_tbps
        xs = [1e-3 * 2 ** (i / 4) for i in range(0, 120)]
        xs = [x for x in xs if x <= ai_max]
        for prec, peak in sorted(rep.device.tflops.items(), key=lambda kv: kv[1]):
            ax.plot(xs, [min(peak, x * bw) for x in xs], linewidth=0.8, label=f"roof {prec} ({peak:g} TF/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{Path(rep.trace).name}: roofline, one point per op call", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    _save(fig, output, dpi=120)


def plot_shares(rep, output: str | Path) -> None:
    plt = _pyplot()

    cl = rep.classes.sort("class")
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = cl["class"].to_list()
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], [100 * v for v in cl["flop_share"].to_list()], width=0.4, label="share of FLOPs")
    ax.bar([i + 0.2 for i in x], [100 * v for v in cl["time_share"].to_list()], width=0.4, label="share of GPU time")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_ylabel("%")
    ax.set_title(f"{Path(rep.trace).name}: FLOPs vs time", fontsize=9)
    ax.legend(fontsize=8)
    _save(fig, output, dpi=120)


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, output: str | Path, **savefig) -> None:
    import matplotlib.pyplot as plt
    try:
        fig.tight_layout()
        write_file(output, lambda path: fig.savefig(path, **savefig))
    finally:
        plt.close(fig)
