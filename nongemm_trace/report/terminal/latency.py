"""The latency and what-if reports in the terminal: the verdict, the critical path per category
and bound, the steps (measured, predicted, naive Amdahl), the GPU-time shares."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from ...models.latency import BOUNDS, LatencyReport, WhatIfReport
from ..latency_lines import HOST, latency_head, whatif_head, whatif_verdict
from . import escape, first_rows, more_rows_line, warning_line


def _pivot_table(title: str, att: pl.DataFrame, steps: int, wall_ns: int) -> Table:
    """Category rows x bound columns, microseconds per step, with each row's share of the wall time."""
    present = [b for b in BOUNDS if b in set(att["bound"].to_list())]
    t = Table(title=title, title_justify="left")
    for col in ("category", "class", *present, "total", "share"):
        t.add_column(col, justify="left" if col in ("category", "class") else "right")
    rows = att.group_by(["category", "class", "bound"]).agg(pl.col("ns").sum())
    tot = rows.group_by(["category", "class"]).agg(pl.col("ns").sum().alias("total")).sort(
        ["total", "category"], descending=[True, False])
    per = {(r["category"], r["bound"]): r["ns"] for r in rows.iter_rows(named=True)}
    n = max(steps, 1)
    for r in tot.iter_rows(named=True):
        cells = [f"{per.get((r['category'], b), 0) / n / 1000:,.1f}" if per.get((r["category"], b)) else ""
                 for b in present]
        t.add_row(escape(r["category"]), r["class"], *cells, f"{r['total'] / n / 1000:,.1f}",
                  f"{100 * r['total'] / wall_ns:.1f} %" if wall_ns else "-")
    by_bound = rows.group_by("bound").agg(pl.col("ns").sum())
    bb = dict(by_bound.iter_rows())
    t.add_row("[bold]all[/bold]", "", *[f"{bb.get(b, 0) / n / 1000:,.1f}" for b in present],
              f"{wall_ns / n / 1000:,.1f}", "100.0 %" if wall_ns else "-")
    return t


def _print_head(console: Console, lines: list[tuple[str, bool]]) -> None:
    for text, bold in lines:
        console.print(f"[bold]{escape(text)}[/bold]" if bold else escape(text))


def render_latency(rep: LatencyReport, console: Console) -> None:
    wall = int(rep.steps["wall"].sum() or 0)
    n = rep.steps.height
    console.print(f"[bold]{escape(rep.trace)}[/bold]")
    console.print(f"taxonomy: {rep.taxonomy} | level: {rep.level} | steps: {n} ({rep.step_marker or 'whole trace'}) | "
                  f"mean step {wall / max(n, 1) / 1000:,.1f} us | typical launch latency "
                  f"{rep.launch_latency_ns / 1000:,.1f} us, queue gap {rep.queue_gap_ns / 1000:,.2f} us")
    _print_head(console, latency_head(rep))
    un = rep.unprofiled
    console.print(_pivot_table("Critical-path latency per step (us) by category and bound (profiled)", rep.attribution,
                               n, wall))
    t = Table(title="Steps", title_justify="left")
    un_steps = {r["step"]: r for r in (un or {}).get("steps", [])}
    sides = ("host", "device", "sync") + (("capture",) if "capture" in set(rep.attribution["bound"].to_list()) else ())
    cols = ("step", "name", "wall (us)", *(f"{s} (us)" for s in sides)) + (
        ("without profiler (us)",) if un_steps else ())
    for col in cols:
        t.add_column(col, justify="right" if col != "name" else "left")
    bb = rep.attribution.with_columns(pl.when(pl.col("bound").is_in(list(HOST))).then(pl.lit("host"))
                                      .when(pl.col("bound").is_in(["sync", "capture"])).then(pl.col("bound"))
                                      .otherwise(pl.lit("device"))
                                      .alias("side")).group_by(["step", "side"]).agg(pl.col("ns").sum())
    cell = {(r["step"], r["side"]): r["ns"] for r in bb.iter_rows(named=True)}
    shown, more = first_rows(rep.steps)
    for r in shown.iter_rows(named=True):
        extra = [f"{un_steps[r['step']]['step_us']:,.1f}" if r["step"] in un_steps else "-"] if un_steps else []
        t.add_row(str(r["step"]), escape(r["name"]), f"{r['wall'] / 1000:,.1f}",
                  *[f"{cell.get((r['step'], s), 0) / 1000:,.1f}" for s in sides], *extra)
    console.print(t)
    if more:
        console.print(more_rows_line(more), highlight=False)
    if rep.warnings:
        console.print("warnings:")
    for w in rep.warnings:
        console.print(warning_line(w.code, w.message, w.count))


def render_whatif(rep: WhatIfReport, console: Console) -> None:
    d = rep.to_dict()
    console.print(f"[bold]{escape(rep.trace)}[/bold]")
    _print_head(console, whatif_head(rep, d))
    sm, sp = d.get("measured_span_us"), d.get("predicted_span_us")
    queued = any(w.code == "steps_overlap" for w in rep.warnings)  # else the span adds only the time between steps
    if queued and sm and sp is not None and rep.steps.height > 1:
        console.print(f"all {rep.steps.height} steps, first start to last end: measured {sm:,.1f} us -> predicted "
                      f"{sp:,.1f} us ({100 * (sp / sm - 1):+.1f} %)")
    t = Table(title="Steps", title_justify="left")
    for col in ("step", "name", "measured (us)", "predicted (us)", "change", "naive Amdahl (us)"):
        t.add_column(col, justify="left" if col == "name" else "right")
    shown, more = first_rows(rep.steps)
    for r in shown.iter_rows(named=True):
        ch = f"{100 * (r['predicted'] / r['measured'] - 1):+.1f} %" if r["measured"] else "-"
        t.add_row(str(r["step"]), escape(r["name"]), f"{r['measured'] / 1000:,.1f}", f"{r['predicted'] / 1000:,.1f}",
                  ch,
                  f"{r['amdahl'] / 1000:,.1f}")
    console.print(t)
    if more:
        console.print(more_rows_line(more), highlight=False)
    s = Table(title="GPU time shares", title_justify="left")
    for col in ("class", "measured", "predicted"):
        s.add_column(col, justify="left" if col == "class" else "right")
    for r in d["gpu_shares"]:
        fmt = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
        s.add_row(r["class"], fmt(r["measured"]), fmt(r["predicted"]))
    console.print(s)
    wall = int(rep.steps["predicted"].sum() or 0)
    console.print(f"[bold]{escape(whatif_verdict(rep))}[/bold]")
    console.print(_pivot_table("Predicted critical path per step (us)", rep.attribution, rep.steps.height, wall))
    if rep.warnings:
        console.print("warnings:")
    for w in rep.warnings:
        console.print(warning_line(w.code, w.message, w.count))
