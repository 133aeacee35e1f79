"""The FLOPs report in the terminal: FLOP vs time shares, the top ops with their rates, the fits."""

from __future__ import annotations

import math

import polars as pl
from rich.console import Console
from rich.table import Table

from ...models.flops import FlopsReport
from ..names import shorten
from ..palette import TITLE
from . import escape, si, warning_line


def _f(x, nd=2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:,.{nd}f}"


def render_flops(rep: FlopsReport, console: Console, top: int = 15) -> None:
    console.print(f"[{TITLE}]{escape(rep.trace)}[/{TITLE}]")
    dev = rep.device
    console.print("device peaks: " + (f"{dev.name} — " + ", ".join(f"{k} {v:g} TFLOP/s" for k, v in dev.tflops.items())
                                      + f", memory {dev.memory_tbps:g} TB/s" if dev else "unknown (no roofline)"))
    t = Table(title="FLOP share vs GPU-time share", title_justify="left")
    for c in ("class", "FLOPs", "FLOP share", "GPU time (us)", "time share"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for r in rep.classes.iter_rows(named=True):
        t.add_row(r["class"], si(r["flops"]), f"{100 * r['flop_share']:.2f} %", f"{r['time_ns'] / 1000:,.1f}",
                  f"{100 * r['time_share']:.1f} %")
    console.print(t)
    t = Table(title=f"Top {top} ops by GPU time (rates over the time each op owns)", title_justify="left")
    for c in ("op", "category", "FLOPs", "bytes", "TFLOP/s", "TB/s", "bound", "% roof"):
        t.add_column(c, justify="left" if c in ("op", "category", "bound") else "right",
                     no_wrap=c == "op", overflow="ellipsis",
                     max_width=max(16, console.width - 70) if c == "op" else None)
    for r in rep.ops.head(top).iter_rows(named=True):
        t.add_row(escape(shorten(r["op"])), r["category"], si(r["flops"]), si(r["bytes"]), _f(r["achieved_tflops"]),
                  _f(r["achieved_tbps"]), r["bound"] or "-", _f(r["roofline_pct"], 0))
    console.print(t)
    over = rep.ops.head(top).filter(pl.col("roofline_pct") > 100)["op"].to_list()
    if over:
        console.print(f"% roof > 100 ({escape(', '.join(shorten(o, 30) for o in over[:3]))}"
                      f"{', …' if len(over) > 3 else ''}): faster than the roof allows: fewer bytes moved than "
                      "counted (caches) or a faster precision than the dtype (fp32 on TF32)", highlight=False)
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
        console.print(f"equal FLOPs, unequal time: {e['calls']} calls of {si(e['flops'])}FLOP took "
                      f"{e['min_us']:,.1f} to {e['max_us']:,.1f} us ({e['spread']:.2f}x)")
    for w in rep.warnings:
        console.print(warning_line(w.code, w.message, w.count), highlight=False)
