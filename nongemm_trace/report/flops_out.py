"""Rendering of a :class:`~nongemm_trace.flops.FlopsReport`: table, JSON, CSV and figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import TraceError
from .timeline import COLORS


def render_json(rep) -> str:
    return json.dumps(rep.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _g(x) -> str:
    if x is None:
        return "-"
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f}"


def _f(x, nd=2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:,.{nd}f}"


def render_table(rep, console: Console, top: int = 15) -> None:
    console.print(f"[bold]{escape(rep.trace)}[/bold]")
    dev = rep.device
    console.print("device peaks: " + (f"{dev.name} — " + ", ".join(f"{k} {v:g} TFLOP/s" for k, v in dev.tflops.items())
                                      + f", memory {dev.memory_tbps:g} TB/s" if dev else "unknown (no roofline)"))
    t = Table(title="FLOP share vs GPU-time share", title_justify="left")
    for c in ("class", "FLOPs", "FLOP share", "GPU time (us)", "time share"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for r in rep.classes.iter_rows(named=True):
        t.add_row(r["class"], _g(r["flops"]), f"{100 * r['flop_share']:.2f} %", f"{r['time_ns'] / 1000:,.1f}",
                  f"{100 * r['time_share']:.1f} %")
    console.print(t)
    t = Table(title=f"Top {top} ops by GPU time (rates over the time each op owns)", title_justify="left")
    for c in ("op", "category", "FLOPs", "bytes", "TFLOP/s", "TB/s", "bound", "% roof"):
        t.add_column(c, justify="left" if c in ("op", "category", "bound") else "right",
                     no_wrap=c == "op", overflow="ellipsis", max_width=max(16, console.width - 70) if c == "op" else None)
    for r in rep.ops.head(top).iter_rows(named=True):
        t.add_row(escape(r["op"]), r["category"], _g(r["flops"]), _g(r["bytes"]), _f(r["achieved_tflops"]),
                  _f(r["achieved_tbps"]), r["bound"] or "-", _f(r["roofline_pct"], 0))
    console.print(t)
    fits = rep.fits
    if fits.get("models"):
        t = Table(title=f"FLOPs vs latency on GEMM/convolution calls ({fits['distinct_shapes']} shapes, "
                        f"{fits['calls']} calls; MAPE on {fits['test_shapes']} held-out shapes)", title_justify="left")
        for c in ("model", "held-out MAPE", "train MAPE"):
            t.add_column(c, justify="left" if c == "model" else "right")
        for name, m in fits["models"].items():
            t.add_row(name, f"{100 * m['mape']:.1f} %", f"{100 * m['train_mape']:.1f} %")
        console.print(t)
    elif fits.get("note"):
        console.print(f"FLOPs vs latency: {fits['note']}")
    if rep.equal_flops:
        e = rep.equal_flops[0]
        console.print(f"equal FLOPs, unequal time: {e['calls']} calls of {_g(e['flops'])}FLOP took {e['min_us']:,.1f} to "
                      f"{e['max_us']:,.1f} us ({e['spread']:.2f}x)")
    for w in rep.warnings:
        console.print(f"  [yellow]{w.code}[/yellow] ({w.count:,}): {escape(w.message)}", highlight=False)


def plot_roofline(rep, output: str | Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = rep.calls.filter((pl.col("time_ns") > 0) & (pl.col("bytes") > 0) & pl.col("flops").is_not_null())
    if df.height == 0:
        raise TraceError(rep.trace, "no op with FLOPs, bytes and GPU time to plot")
    df = df.with_columns((pl.col("flops") / pl.col("bytes")).alias("ai"),
                         (pl.col("flops") / pl.col("time_ns") / 1e3).alias("tflops"))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for cat, sub in df.filter(pl.col("flops") > 0).group_by("category"):
        ax.scatter(sub["ai"].to_list(), sub["tflops"].to_list(), s=10, alpha=0.6, label=cat[0],
                   color=COLORS.get(cat[0], "#999999"))
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
    _save(fig, output, rep.trace)


def plot_shares(rep, output: str | Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    _save(fig, output, rep.trace)


def _save(fig, output, trace) -> None:
    import matplotlib.pyplot as plt
    try:
        fig.tight_layout()
        fig.savefig(output, dpi=120)
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
