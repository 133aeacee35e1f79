"""The analyze report in the terminal: header with the metric and level, the class and
category shares, the top ops and kernels, steps and warnings."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from ...models.report import Report
from ...vocabulary import METRIC_TEXT
from ..names import NAME_WIDTH, shorten_apart
from ..palette import TITLE, WARNINGS_HEADING
from ..sentences import counted_text, evidence_sentence, step_time_sentence, total_sentence
from . import escape, first_rows, more_rows_line, warning_line
from .phases import render_phases


def _us(ns: int) -> str:
    return f"{ns / 1000:,.1f}"


#: what a deployment stack's activities are (the total line and the top table name them)
_UNITS = {"layer": ("engine layers", "layers"), "node": ("ONNX nodes", "nodes")}


def render_report(report: Report, console: Console, top: int = 15) -> None:
    d = report.metadata.get("device") or {}
    dev = d.get("name") or "unknown device"
    metric = METRIC_TEXT.get(report.metric, report.metric)
    console.print(f"[{TITLE}]{escape(report.trace)}[/{TITLE}]")
    total = int(report.categories["time_ns"].sum())
    console.print(f"device: {escape(dev)} | metric: {report.metric} ({metric}) | level: {report.level} | "
                  f"taxonomy: {report.taxonomy} v{report.taxonomy_version}")
    _, kernels = _UNITS.get(report.metric, ("GPU activities", "kernels"))
    counted = counted_text(report.metric, report.gpu_activities, int(report.categories["activities"].sum()))
    # the HTML page says the same sentences (report/sentences.py)
    console.print(escape(total_sentence((total or 0) / 1000, counted, report.steps.height, report.step_marker)))
    if report.gpu_time_ns and report.evidence:
        of = f"{report.metric} time" if report.metric in _UNITS else "GPU time"
        console.print(escape(evidence_sentence({k: v / report.gpu_time_ns for k, v in report.evidence.items()}, of)))

    t = Table(title=f"Classes — share of {metric}", title_justify="left")
    for c in ("class", "time (us)", "share", "op calls" if report.metric == "cpu" else "activities"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for r in report.classes.iter_rows(named=True):
        t.add_row(r["class"], _us(r["time_ns"]), f"{100 * r['share']:.1f} %", f"{r['activities']:,}")
    console.print(t)

    t = Table(title=f"Categories — share of {metric} ({report.level} level)", title_justify="left")
    for c in ("category", "class", "time (us)", "share", "op calls" if report.metric == "cpu" else "activities"):
        t.add_column(c, justify="left" if c in ("category", "class") else "right")
    for r in report.categories.iter_rows(named=True):
        t.add_row(r["category"], r["class"], _us(r["time_ns"]), f"{100 * r['share']:.1f} %", f"{r['activities']:,}")
    console.print(t)
    if report.engine is not None:
        _engine_tables(report.engine, console, top)

    if report.ops.height and top > 0 and report.engine is None:  # --top 0: no top tables, not empty ones
        _op_table(report, console, top)

    if report.kernel_summary.height and top > 0:
        t = Table(title=f"Top {top} {kernels} by {'GPU time' if kernels == 'kernels' else 'time'}",
                  title_justify="left")
        for c in (kernels.rstrip("s"), "category", "count",
                  "GPU time (us)" if kernels == "kernels" else "time (us)", "mean (us)"):
            t.add_column(c, justify="left" if c in ("kernel", "layer", "node", "category") else "right",
                         overflow="ellipsis",
                         max_width=max(16, console.width - 55) if c == "kernel" else None, no_wrap=c == "kernel")
        rows = report.kernel_summary.head(top)
        width = min(NAME_WIDTH, max(16, console.width - 55))  # cut here, so that rich need not cut again
        for r, name in zip(rows.iter_rows(named=True), shorten_apart(rows["name"].to_list(), width)):
            t.add_row(escape(name), r["category"], f"{r['activities']:,}", _us(r["gpu_time_ns"]),
                      f"{r['mean_ns'] / 1000:,.2f}")
        console.print(t)

    if report.steps.height:
        t = Table(title="Steps", title_justify="left")
        stack = report.metric in _UNITS  # a deployment stack's steps hold its layers or nodes
        periods = "step_ns" in report.steps.columns and report.steps["step_ns"].null_count() < report.steps.height
        heads = ["step", "name", *(("step time (us)", "queueing latency (us)") if periods else ()), "CPU span (us)",
                 f"{report.metric} time (us)" if stack else "GPU time (us)", kernels if stack else "activities"]
        for c in heads:
            t.add_column(c, justify="left" if c == "name" else "right")
        shown, more = first_rows(report.steps)
        for r in shown.iter_rows(named=True):
            times = (_us(r["step_ns"]), _us(r["latency_ns"])) if periods else ()
            t.add_row(str(r["step"]), escape(r["name"]), *times, _us(r["cpu_time_ns"]), _us(r["gpu_time_ns"]),
                      f"{r['activities']:,}")
        console.print(t)
        if more:
            console.print(more_rows_line(more), highlight=False)
        if periods:
            console.print(step_time_sentence(), highlight=False)

    render_phases(report.phases, report.phase_engine, console)
    if report.warnings:
        console.print(f"[{WARNINGS_HEADING}]warnings[/{WARNINGS_HEADING}]")
        for w in report.warnings:
            console.print(warning_line(w.code, w.message, w.count), highlight=False)


def _op_table(report: Report, console: Console, top: int) -> None:
    """The top ops: by self GPU time, or under the CPU metric by self CPU time (its GPU column only
    where the trace has GPU activities). Rows: ops with self time of their own, never wrappers
    (steps, annotations: the inclusive columns carry them, and the CPU metric does not count them)."""
    by_cpu = report.metric == "cpu"
    if by_cpu:
        cols = [("CPU time (us)", "cpu_time_ns"), ("self CPU (us)", "self_cpu_time_ns")]
        if report.gpu_activities:
            cols.append(("self GPU (us)", "self_gpu_time_ns"))
        # a report read back from JSON has no wrapper column (the document does not carry it)
        real = ~pl.col("wrapper") if "wrapper" in report.ops.columns else pl.lit(True)
        rows = report.ops.filter((pl.col("self_cpu_time_ns") > 0) & real)
    else:
        cols = [("GPU time (us)", "gpu_time_ns"), ("self GPU (us)", "self_gpu_time_ns"),
                ("activities", "activities"), ("self CPU (us)", "self_cpu_time_ns")]
        rows = report.ops.filter(pl.col("self_gpu_time_ns") > 0)
    t = Table(title=f"Top {top} ops by self {'CPU' if by_cpu else 'GPU'} time", title_justify="left")
    for c in ("op", "category", "calls", *(head for head, _ in cols)):
        t.add_column(c, justify="left" if c in ("op", "category") else "right", overflow="ellipsis",
                     no_wrap=c == "op", max_width=max(16, console.width - 80) if c == "op" else None)
    shown = rows.head(top)
    width = min(NAME_WIDTH, max(16, console.width - 80))
    for r, name in zip(shown.iter_rows(named=True), shorten_apart(shown["op"].to_list(), width)):
        t.add_row(escape(name), r["category"], f"{r['calls']:,}",
                  *("-" if r[c] is None else f"{r[c]:,}" if c == "activities" else _us(r[c]) for _, c in cols))
    console.print(t)


def _engine_tables(view: dict, console: Console, top: int) -> None:
    """A deployment stack's fusion view: what GEMM layers folded, what runs on its own."""
    if view.get("format") == "tensorrt":
        t = Table(title=f"Fusion: non-GEMM ONNX ops folded into GEMM layers (paper's rule: GEMM "
                        f"{100 * view['gemm_share_paper_rule']:.1f} %)", title_justify="left")
        for c in ("ONNX op", "category", "GEMM layers", "their time (us)"):
            t.add_column(c, justify="left" if c in ("ONNX op", "category") else "right")
        for r in view["folded_into_gemm_layers"][: max(top, 0)]:
            t.add_row(escape(r["op"]), r["category"] or "-", f"{r['gemm_layers']:,}", f"{r['gemm_layer_time_us']:,.1f}")
        console.print(t)
        t = Table(title="Standalone non-GEMM layers by layer type", title_justify="left")
        for c in ("layer type", "layers", "time (us)", "share"):
            t.add_column(c, justify="left" if c == "layer type" else "right")
        for r in view["standalone_by_layer_type"][: max(top, 0)]:
            t.add_row(escape(r["layer_type"]), f"{r['layers']:,}", f"{r['time_us']:,.1f}", f"{100 * r['share']:.1f} %")
        console.print(t)
    elif view.get("fused_ops"):
        t = Table(title="ONNX Runtime's own fused ops", title_justify="left")
        for c in ("op", "category", "nodes", "time (us)", "share"):
            t.add_column(c, justify="left" if c in ("op", "category") else "right")
        for r in view["fused_ops"][: max(top, 0)]:
            t.add_row(escape(r["op"]), r["category"], f"{r['activities']:,}", f"{r['time_us']:,.1f}",
                      f"{100 * r['share']:.1f} %")
        console.print(t)
