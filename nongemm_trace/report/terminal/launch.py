"""The launch report in the terminal: the verdict, the time line, per stream, step and category."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ...models.launch import LaunchReport
from ..palette import TITLE
from ..sentences import graph_sentence, launch_verdicts, step_sentences
from . import escape, first_rows, more_rows_line, warning_line


def _us(v: Any, decimals: int = 1) -> str:
    return "-" if v is None else f"{v:,.{decimals}f}"


def render_launch(rep: LaunchReport, console: Console) -> None:
    s = rep.summary
    dev = (rep.device or {}).get("name") or "unknown device"
    console.print(f"[{TITLE}]{escape(rep.trace)}[/{TITLE}]")
    console.print(f"device: {escape(dev)} | taxonomy: {rep.taxonomy} | level: {rep.level} | short activity: "
                  f"< {rep.short_ns / 1000:g} us")
    for line in launch_verdicts(rep.verdict, rep.summary):  # the HTML page shows the same lines
        console.print(f"  {escape(line)}" if line.startswith("(") else f"[{TITLE}]{escape(line)}[/{TITLE}]")
    t = Table(title="Timeline, all streams", title_justify="left")
    t.add_column("measure")
    t.add_column("value", justify="right")
    span = s["span_us"] or 0.0
    pct = (lambda v: f"  ({100 * v / span:.1f} % of span)") if span else (lambda v: "")
    rows = [
        ("span (first start to last end)", f"{_us(s['span_us'])} us"),
        ("busy (union of activities)", f"{_us(s['busy_us'])} us{pct(s['busy_us'])}"),
        *((f"  busy in {cls}" + (" (exposed)" if cls == "communication" else ""), f"{_us(v)} us{pct(v)}")
          for cls, v in (s.get("busy_by_class_us") or {}).items()),
        ("idle", f"{_us(s['idle_us'])} us{pct(s['idle_us'])}"),
        ("host-bound idle (waiting for a launch)", f"{_us(s['host_bound_idle_us'])} us{pct(s['host_bound_idle_us'])}"),
        ("activities / launches", f"{s['activities']:,} / {s['launches']:,}"),
        (f"short activities (< {rep.short_ns / 1000:g} us)", f"{s['short_activities']:,}"),
        ("mean launch delay", f"{_us(s['mean_launch_delay_us'])} us"),
        ("launch overhead per activity", f"{_us(s['launch_overhead_per_activity_us'], 2)} us"),
        ("exposed / overlapped communication",
         f"{_us(s['exposed_communication_us'])} / {_us(s['overlapped_communication_us'])} us"),
    ]
    if s.get("captured_launches"):
        at = next(i for i, (k, _) in enumerate(rows) if k.startswith("host-bound idle")) + 1
        rows[at:at] = [("capture idle (recording a graph, not launching)",
                        f"{_us(s['capture_idle_us'])} us{pct(s['capture_idle_us'])}"),
                       ("launches captured into graphs (not run)", f"{s['captured_launches']:,}")]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)
    graphs = graph_sentence(rep.graphs)
    if graphs is not None:
        console.print(graphs, highlight=False)
    for name, by in (("streams", ["device", "stream"]), ("steps", ["step"])):
        df = getattr(rep, name)
        if df.height == 0:
            continue
        t = Table(title=f"Per {name[:-1]} (us)", title_justify="left")
        for c in by + ["span", "busy", "idle", "host idle", "activities", "exp. comm"]:
            t.add_column(c, justify="right")
        shown, more = first_rows(df)
        for r in shown.iter_rows(named=True):
            t.add_row(*[escape(str(r[c])) for c in by], _us(r["span_ns"] / 1000), _us(r["busy_ns"] / 1000),
                      _us(r["idle_ns"] / 1000), _us(r["host_bound_idle_ns"] / 1000), f"{r['activities']:,}",
                      _us((r["exposed_communication_ns"] or 0) / 1000))
        console.print(t)
        if more:
            console.print(more_rows_line(more, name), highlight=False)
    for line in step_sentences(s):  # the HTML page shows the same lines
        console.print(line, highlight=False)
    t = Table(title="Per category", title_justify="left")
    for c in ("category", "activities", "GPU time (us)", "short", "launch overhead (us)"):
        t.add_column(c, justify="left" if c == "category" else "right")
    for r in rep.categories.iter_rows(named=True):
        t.add_row(r["category"], f"{r['activities']:,}", _us(r["gpu_time_ns"] / 1000), f"{r['short_activities']:,}",
                  _us(r["launch_overhead_ns"] / 1000))
    console.print(t)
    for w in rep.warnings:
        console.print(warning_line(w.code, w.message, w.count), highlight=False)
