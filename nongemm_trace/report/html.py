"""HTML rendering: a self-contained report page, and the compact views behind ``_repr_html_``.

The page (``nongemm-trace report TRACE… -o report.html``) is one file that needs no
network: its CSS is inline and its figures are inline SVG (:mod:`.svg`). The numbers come
from the models' JSON contract (``to_dict()``), so a cell shows the same value as the
JSON report; each number cell carries that exact value in ``data-value`` and the rounded
one as its text. Every name from a trace (ops, kernels, files, warnings) is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from .._version import __version__
from ..vocabulary import METRIC_TEXT
from . import svg
from .palette import IDLE_HOST_BOUND, IDLE_OTHER
from .sentences import (
    base_sentence,
    counted_text,
    evidence_sentence,
    graph_sentence,
    launch_verdicts,
    pair_sentence,
    ranks_lines,
    ranks_table,
    ranks_title,
    step_sentences,
    step_time_sentence,
    total_sentence,
)

#: what a deployment stack's activities are
_UNITS = {"layer": "engine layers", "node": "ONNX nodes"}

CSS = """
.nongemm{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;max-width:1200px}
.nongemm h1{font-size:22px;margin:.2em 0}.nongemm h2{font-size:18px;margin:1.2em 0 .3em;border-bottom:1px solid #ddd}
.nongemm h3{font-size:15px;margin:1em 0 .3em}.nongemm .meta{color:#555;margin:.2em 0}
.nongemm table{border-collapse:collapse;margin:.4em 0 .8em}
.nongemm th,.nongemm td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:middle;\
white-space:nowrap}
.nongemm th{background:#f4f4f4;font-weight:600}.nongemm td.num,.nongemm th.num{text-align:right;\
font-variant-numeric:tabular-nums}
.nongemm td.name{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;max-width:560px;overflow:hidden;\
text-overflow:ellipsis;white-space:nowrap}
.nongemm .legend span{margin-right:12px;white-space:nowrap}\
.nongemm .legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.nongemm .verdict{font-weight:600;padding:6px 10px;background:#f4f8ff;border-left:4px solid #1f77b4}
.nongemm .warn{color:#8a5a00}.nongemm svg{display:block;max-width:100%;height:auto}\
.nongemm svg.cell{display:inline-block}
.nongemm nav a{margin-right:12px}
"""


def html_num(value: Any, digits: int = 1) -> str:
    """A number cell: the JSON value in ``data-value``, rounded with thousands separators as text."""
    if value is None:
        return '<td class="num" data-value="">-</td>'
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"
    return f'<td class="num" data-value="{value!r}">{text}</td>'


def html_share(value: float) -> str:
    return f'<td class="num" data-value="{value!r}">{100 * value:.1f} %</td>'


def html_table(cls: str, head: Iterable[str], rows: Iterable[str], numeric_from: int = 1) -> str:
    cells = "".join(f'<th{" class=num" if i >= numeric_from else ""}>{escape(h)}</th>' for i, h in enumerate(head))
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def html_text(x: Any, cls: str = "") -> str:
    """A text cell; a ``name`` cell stays one line (a C++ template kernel name would wrap to tens of
    lines), cut at its end on screen, whole in the page's text and in its tooltip."""
    title = f' title="{escape(str(x))}"' if cls == "name" else ""
    return f'<td{f" class={cls!r}" if cls else ""}{title}>{escape(str(x))}</td>'


def _time_key(d: dict[str, Any]) -> str:
    return f"{d['metric']}_time_us"


# -- one report ---------------------------------------------------------------

def report_section(rep, top: int = 15, full: bool = True) -> str:
    """The class and category breakdown, top ops and kernels (and, ``full``, steps, evidence and
    warnings) of a :class:`~nongemm_trace.report.model.Report`."""
    d = rep.to_dict(max_ops=None, max_kernels=top)
    metric = METRIC_TEXT.get(d["metric"], d["metric"])
    dev = (d.get("device") or {}).get("name") or "unknown device"
    key = _time_key(d)
    total = d.get(key, d["gpu_time_us"])
    steps = len(d["steps"])
    out = [f'<p class="meta">{escape(dev)} · metric <b>{escape(d["metric"])}</b> ({escape(metric)}) · level '
           f'<b>{escape(d["level"])}</b> · taxonomy {escape(d["taxonomy"])} v{escape(str(d["taxonomy_version"]))}</p>']
    # the terminal's sentence (report/sentences.py), its total marked with the exact value
    sentence = escape(total_sentence(total, counted_text(d["metric"], d["gpu_activities"],
                                                         sum(c["activities"] for c in d["categories"])),
                                     steps, d.get("step_marker")))
    out.append('<p class="meta">' + sentence.replace(
        f"{total:,.1f} us", f'<span class="total" data-value="{total!r}">{total:,.1f} us</span>', 1)
        + (f' · mean step <span class="step" data-value="{d["mean_step_us"]!r}">{d["mean_step_us"]:,.1f} us</span>'
           + ("" if full else f' ({escape(d["step_time"])})')  # a full page says it under the steps
           if d.get("mean_step_us") is not None else "") + "</p>")
    counted = "op calls" if d["metric"] == "cpu" else "activities"
    out.append(svg.stacked_bar([(c["class"], c["share"]) for c in d["classes"]], label=f"share of {metric} by class"))
    out.append(svg.legend(c["class"] for c in d["classes"] if c["share"] > 0))
    out.append(html_table("classes", ["class", "time (us)", "share", "", counted],
                      [html_text(c["class"]) + html_num(c["time_us"]) + html_share(c["share"])
                       + f"<td>{svg.share_cell(c['class'], c['share'])}</td>" + html_num(c["activities"])
                       for c in d["classes"]]))
    out.append(f"<h3>Categories — share of {escape(metric)}</h3>")
    out.append(html_table("categories", ["category", "class", "time (us)", "share", "", counted],
                      [html_text(c["category"]) + html_text(c["class"]) + html_num(c.get(key, c.get("gpu_time_us")))
                       + html_share(c["share"]) + f"<td>{svg.share_cell(c['category'], c['share'])}</td>"
                       + html_num(c["activities"]) for c in d["categories"]], numeric_from=2))
    if d["metric"] == "cpu":
        out.append(_cpu_ops(rep, d, top))
    ops = [o for o in d["ops"] if o["self_gpu_time_us"] > 0][:top]  # wrappers that launched nothing are left out
    if ops and d["metric"] != "cpu":
        out.append(f"<h3>Top {len(ops)} ops by self GPU time</h3>")
        out.append(html_table("ops", ["op", "category", "calls", "GPU time (us)", "self GPU time (us)", "activities"],
                          [html_text(o["op"], "name") + html_text(o["category"]) + html_num(o["calls"])
                           + html_num(o["gpu_time_us"])
                           + html_num(o["self_gpu_time_us"]) + html_num(o["activities"]) for o in ops], numeric_from=2))
    if d.get("engine"):
        out.append(_engine_section(d["engine"], top))
    if d["kernels"]:
        unit = _UNITS.get(d["metric"])
        out.append(f"<h3>Top {len(d['kernels'])} {unit or 'kernels'} by {'time' if unit else 'GPU time'} "
                   f"(of {d['kernels_total']:,})</h3>")
        out.append(html_table("kernels", [unit[:-1] if unit else "kernel", "kind", "category", "count",
                                      "time (us)" if unit else "GPU time (us)"],
                          [html_text(k["name"], "name") + html_text(k["kind"]) + html_text(k["category"])
                           + html_num(k["activities"])
                           + html_num(k["gpu_time_us"]) for k in d["kernels"]], numeric_from=3))
    if full and d["steps"]:
        out.append("<h3>Steps</h3>")
        out.append(html_table("steps", ["step", "name", "step time (us)", "queueing latency (us)", "CPU span (us)",
                                    "GPU time (us)", "activities"],
                          [html_num(s["step"]) + html_text(s["name"], "name") + html_num(s.get("step_us"))
                           + html_num(s.get("latency_us"))
                           + html_num(s["cpu_time_us"]) + html_num(s["gpu_time_us"]) + html_num(s["activities"])
                           for s in d["steps"]], numeric_from=2))
    if full and d.get("mean_step_us") is not None and d["steps"]:
        out.append(f'<p class="meta">{escape(step_time_sentence())}</p>')
    if full and any(v["share"] for v in d["evidence"].values()):
        of = f"{d['metric']} time" if d["metric"] in _UNITS else "GPU time"
        out.append(f'<p class="meta">{escape(evidence_sentence({k: v["share"] for k, v in d["evidence"].items()}, of))}'
                   "</p>")
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


def _cpu_ops(rep, d: dict[str, Any], top: int) -> str:
    """Under the CPU metric (a CPU-only trace): the top ops by self CPU time, as the terminal lists
    them (never wrappers such as steps: the report's ops table marks them)."""
    ops_table = getattr(rep, "ops", None)
    wrappers = set(ops_table.filter(ops_table["wrapper"])["op"].to_list()) \
        if ops_table is not None and "wrapper" in ops_table.columns else set()
    ops = sorted((o for o in d["ops"] if (o.get("self_cpu_time_us") or 0) > 0 and o["op"] not in wrappers),
                 key=lambda o: -o["self_cpu_time_us"])[:top]
    if not ops:
        return ""
    head = ["op", "category", "calls", "CPU time (us)", "self CPU time (us)", "self GPU time (us)"]
    return (f"<h3>Top {len(ops)} ops by self CPU time</h3>"
            + html_table("ops", head,
                     [html_text(o["op"], "name") + html_text(o["category"]) + html_num(o["calls"])
                      + html_num(o["cpu_time_us"])
                      + html_num(o["self_cpu_time_us"])
                      + html_num(o["self_gpu_time_us"]) for o in ops], numeric_from=2))


def _engine_section(view: dict[str, Any], top: int) -> str:
    """A deployment stack's fusion view: what GEMM layers folded, what runs on its own (TensorRT),
    or ONNX Runtime's own fused ops."""
    if view.get("format") == "tensorrt":
        return (f"<h3>Non-GEMM ONNX ops folded into GEMM layers (paper's rule: GEMM "
                f"{100 * view['gemm_share_paper_rule']:.1f} %)</h3>"
                + html_table("folded", ["ONNX op", "category", "GEMM layers", "their time (us)"],
                         [html_text(r["op"], "name") + html_text(r["category"] or "-") + html_num(r["gemm_layers"])
                          + html_num(r["gemm_layer_time_us"]) for r in view["folded_into_gemm_layers"][:top]], 2)
                + "<h3>Standalone non-GEMM layers by layer type</h3>"
                + html_table("standalone", ["layer type", "layers", "time (us)", "share"],
                         [html_text(r["layer_type"]) + html_num(r["layers"]) + html_num(r["time_us"])
                          + html_share(r["share"])
                          for r in view["standalone_by_layer_type"][:top]]))
    if view.get("fused_ops"):
        return ("<h3>ONNX Runtime's own fused ops</h3>"
                + html_table("fused", ["op", "category", "nodes", "time (us)", "share"],
                         [html_text(r["op"], "name") + html_text(r["category"]) + html_num(r["activities"])
                          + html_num(r["time_us"])
                          + html_share(r["share"]) for r in view["fused_ops"][:top]], 2))
    return ""


def html_warnings(warnings: list[dict[str, Any]]) -> str:
    if not warnings:
        return ""
    items = "".join(f'<li><code>{escape(w["code"])}</code> ({w.get("count", 1):,}): {escape(w["message"])}</li>'
                    for w in warnings)
    return f'<div class="warn"><b>warnings</b><ul>{items}</ul></div>'


# -- launch -------------------------------------------------------------------

_LAUNCH_ROWS = (("span_us", "span (first start to last end)"), ("busy_us", "busy (union of activities)"),
                ("idle_us", "idle"), ("host_bound_idle_us", "host-bound idle (waiting for a launch)"),
                ("exposed_communication_us", "exposed communication"),
                ("overlapped_communication_us", "overlapped communication"),
                ("mean_launch_delay_us", "mean launch delay"),
                ("launch_overhead_per_activity_us", "launch overhead per activity"))


def launch_section(lrep, timeline: bool = True, width: int = 1000, warnings: bool = True) -> str:
    """The verdict, the timeline's measures and (``timeline``) the figure of a
    :class:`~nongemm_trace.analyses.launch.LaunchReport` (``warnings``: also its warnings, which are
    the report's: the page shows them once)."""
    d = lrep.to_dict()
    out = [f'<p class="{"meta" if line.startswith("(") else "verdict"}">{escape(line)}</p>'
           for line in launch_verdicts(lrep.verdict, lrep.summary)]  # the terminal's lines
    if not d.get("activities"):
        return "".join(out)
    rows = [html_text(label) + html_num(d[k], 2 if k == "launch_overhead_per_activity_us" else 1)
            for k, label in _LAUNCH_ROWS if d.get(k) is not None]
    for k, label in (("activities", "activities"), ("launches", "launch calls"), ("short_activities",
                     f"short activities (< {d['short_activity_us']:g} us)")):
        if d.get(k) is not None:
            rows.append(html_text(label) + html_num(d[k]))
    out.append(html_table("launch", ["measure", "value (us or count)"], rows))
    notes = [graph_sentence(lrep.graphs), *step_sentences(lrep.summary)]  # the terminal's lines too
    out.extend(f'<p class="meta">{escape(line)}</p>' for line in notes if line is not None)
    if timeline:
        out.append(svg.timeline(lrep.activities, width=width))
        cats = lrep.activities["category"].unique().sort().to_list() if lrep.activities.height else []
        out.append(svg.legend(cats) + f'<p class="legend"><span><i style="background:{IDLE_HOST_BOUND}"></i>idle, '
                   f'host-bound</span><span><i style="background:{IDLE_OTHER}"></i>idle, other</span></p>')
    if warnings:
        out.append(html_warnings(d["warnings"]))
    return "".join(out)


def ranks_section(ranks: dict) -> str:
    """The rank table and the straggler's sentence (report/sentences.py: the terminal's words)."""
    head, rows = ranks_table(ranks)
    body = [html_text(row[0]) + "".join(f'<td class="num">{escape(c)}</td>' for c in row[1:]) for row in rows]
    return (f'<p class="meta">{escape(ranks_title(ranks))}</p>' + html_table("ranks", head, body)
            + "".join(f'<p class="verdict">{escape(line)}</p>' for line in ranks_lines(ranks)))


# -- comparison ---------------------------------------------------------------

def compare_section(cmp) -> str:
    """Per-trace totals, share bars and the category table (time and ratio against BASE) of a
    :class:`~nongemm_trace.analyses.compare.Comparison`."""
    d = cmp.to_dict()
    names = [Path(t["trace"]).name for t in d["traces"]]
    unit = "us per step" if d["per_step"] else "us"
    basis, things = cmp.time_basis
    lead, rest = base_sentence(names[0].replace(".json.gz", ""), basis, unit, d["level"], d["taxonomy"])
    out = [f'<p class="meta"><b>{escape(lead)}</b>{escape(rest)}</p>']  # the terminal's words
    labels = ["BASE", *(f"#{i}" for i in range(1, len(names)))]
    head = ["", "trace", basis, things, "steps", "non-GEMM share"]
    out.append(html_table("traces", head, [html_text(label) + html_text(n, "name") + html_num(t["gpu_time_us"])
                                       + html_num(t["activities"]) + html_num(t["steps"])
                                       + html_share(t["non_gemm_share"])
                                       for label, n, t in zip(labels, names, d["traces"])], numeric_from=2))
    total = [sum(c["gpu_time_us"][i] for c in d["categories"]) for i in range(len(names))]
    out.append(svg.bars_by_trace([(f"{labels[i]} {n}",
                                   [(c["category"], c["gpu_time_us"][i] / total[i] if total[i] else 0.0)
                                       for c in d["categories"]]) for i, n in enumerate(names)]))
    cats = [c for c in d["categories"] if any(c["gpu_time_us"])]
    out.append(svg.legend(c["category"] for c in cats))
    rows = []
    for c in cats:
        cells = html_text(c["category"]) + html_text(c["class"]) + html_num(c["gpu_time_us"][0])
        for t, r in zip(c["gpu_time_us"][1:], c["ratio"][1:]):
            cells += html_num(t) + ('<td class="num" data-value="">new</td>' if r is None else
                                f'<td class="num" data-value="{r!r}">{r:.2f}x</td>')
        rows.append(cells)
    head = ["category", "class", "BASE (us)"]
    for label in labels[1:]:
        head += [f"{label} (us)", f"{label} / BASE"]
    out.append(html_table("compare", head, rows, numeric_from=2))
    for section in ("quantization", "fusion"):
        for p in (d.get(section) or {}).get("pairs", []):
            lead, rest = pair_sentence(section, Path(p["trace"]).name, p["summary"])
            out.append(f"<p><b>{escape(lead)}</b>{escape(rest)}</p>")
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


# -- the page and the notebook views ------------------------------------------

def render_html(reports: list, launches: list | None = None, comparison=None, top: int = 15,
                title: str = "nongemm-trace report", ranks: dict | None = None, after_ranks: str = "",
                after_report: list[str] | None = None) -> str:
    """The whole page: the comparison first (several traces), the ranks (distributed ranks: the rank
    table and the straggler, as the terminal prints them, then ``after_ranks``: the collectives'
    tables, ``html_collectives.py``), then one section per trace with its breakdown, top ops and
    kernels, then its ``after_report``: the sections of the analyses the registry lists on the page
    (``report_page.py``; a serving run's phases, the launch verdict and timeline), and its ``launches``
    entry where one is given (the launch section as the page drew it before the registry listed it).
    The sections given as HTML are drawn by their modules, which draw their cells with this one's helpers."""
    after_report = after_report or [""] * len(reports)

    launches = launches or [None] * len(reports)
    parts = [f"<h1>{escape(title)}</h1>",
             f'<p class="meta">nongemm-trace {escape(__version__)} · {len(reports)} trace'
             f'{"s" if len(reports) != 1 else ""}</p>']
    if len(reports) > 1:
        parts.append("<nav>" + "".join(f'<a href="#trace-{i}">{escape(Path(r.trace).name)}</a>'
                                       for i, r in enumerate(reports)) + "</nav>")
    if comparison is not None:
        parts.append(f'<section id="comparison"><h2>Comparison</h2>{compare_section(comparison)}</section>')
    if ranks:
        parts.append(f'<section id="ranks"><h2>Ranks</h2>{ranks_section(ranks)}{after_ranks}</section>')
    for i, (rep, lrep, extra) in enumerate(zip(reports, launches, after_report)):
        where = "" if Path(str(rep.trace)).is_absolute() else f'<p class="meta">{escape(str(rep.trace))}</p>'
        parts.append(f'<section class="trace" id="trace-{i}"><h2>{escape(Path(rep.trace).name)}</h2>'
                     f'{where}{report_section(rep, top)}{extra}')  # an absolute path would leak into a shared page
        if lrep is not None:
            parts.append(f"<h3>Launch overhead and idle time</h3>{launch_section(lrep, warnings=False)}")
        parts.append("</section>")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>"
            f'<body><main class="nongemm">{"".join(parts)}</main></body></html>\n')


def html_fragment(title: str, body: str) -> str:
    return f'<div class="nongemm"><style>{CSS}</style><b>{escape(title)}</b>{body}</div>'


def report_fragment(rep) -> str:
    """A Report in a notebook: the breakdown and the top ten ops and kernels."""
    return html_fragment(str(rep.trace), report_section(rep, top=10, full=False))


def launch_fragment(lrep) -> str:
    """A LaunchReport in a notebook: verdict, measures, timeline."""
    return html_fragment(str(lrep.trace), launch_section(lrep, width=720))


def compare_fragment(cmp) -> str:
    """A Comparison in a notebook."""
    return html_fragment("comparison", compare_section(cmp))
