"""Timeline figure: one row per (device, stream), activities coloured by category,
device-level idle gaps shaded (host-bound ones darker). matplotlib, no display needed."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import TraceError

COLORS = {
    "gemm": "#1f77b4", "attention": "#6baed6", "normalization": "#2ca02c", "activation": "#98df8a",
    "arithmetic": "#ff7f0e", "memory": "#d62728", "logit": "#9467bd", "pooling": "#8c564b",
    "interpolation": "#c49c94", "embedding": "#e377c2", "roi": "#7f7f7f", "qdq": "#bcbd22", "other": "#17becf",
    "communication": "#000000", "unclassified": "#ff00ff",
}


def plot_timeline(rep, output: str | Path, window: tuple[float, float] | None = None) -> None:
    """Draw ``rep.activities``; ``window`` is (start, end) in microseconds from the first activity."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
        for cat, sub in lane.group_by("category"):
            ax.broken_barh(list(zip(sub["x"].to_list(), sub["w"].to_list())), (i + 0.6, 0.8),
                           facecolors=COLORS.get(cat[0], "#999999"), linewidth=0)
    gaps = acts.filter(pl.col("gap_device_ns") > 0).with_columns(
        (pl.col("x") - pl.col("gap_device_ns") / 1000).alias("gx"), (pl.col("gap_device_ns") / 1000).alias("gw"))
    host = gaps.filter(pl.col("host_bound_gap_ns") > 0)
    other = gaps.filter(pl.col("host_bound_gap_ns") == 0)
    ax.broken_barh(list(zip(host["gx"].to_list(), host["gw"].to_list())), (0, 0.5), facecolors="#444444")
    ax.broken_barh(list(zip(other["gx"].to_list(), other["gw"].to_list())), (0, 0.5), facecolors="#bbbbbb")
    ax.set_yticks([0.25] + [i + 1 for i in range(len(lanes))])
    ax.set_yticklabels(["idle gaps"] + [f"dev {d} stream {s}" for d, s in lanes])
    ax.set_xlabel("time since the first GPU activity (us)")
    if window:
        ax.set_xlim(*window)
    cats = sorted(set(acts["category"].to_list()))
    handles = [Patch(color=COLORS.get(c, "#999999"), label=c) for c in cats]
    handles += [Patch(color="#444444", label="idle: waiting for launch"), Patch(color="#bbbbbb", label="idle: other")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=min(8, len(handles)),
              fontsize=8, frameon=False)
    ax.set_title(f"{Path(rep.trace).name}: {rep.verdict}"[:160], fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(output, dpi=110)
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
