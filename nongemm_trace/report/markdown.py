"""Markdown rendering of a report, a comparison or a batch: a report to attach to a pull request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..models.batch import BatchResult
from ..models.comparison import Comparison
from ..models.report import Report
from .escape import md_cell as _cell
from .escape import md_code, md_text
from .files import batch_rows


def _table(head: list[str], rows: list[list[Any]], right_from: int = 1) -> list[str]:
    out = ["| " + " | ".join(head) + " |",
           "|" + "|".join("---" if i < right_from else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def analyze_markdown(rep: Report, top: int = 10) -> str:
    dev = (rep.metadata.get("device") or {}).get("name") or "unknown device"
    total = int(rep.categories["time_ns"].sum())
    lines = [f"### {md_code(Path(rep.trace).name)}", "",
             f"{md_code(dev)} · metric **{rep.metric}** · level **{rep.level}** · "
             f"taxonomy {rep.taxonomy} v{rep.taxonomy_version} · "
             f"{total / 1000:,.1f} us over {rep.gpu_activities:,} GPU activities"
             + (f" · {rep.steps.height} steps" if rep.steps.height else ""), ""]
    lines += _table(["class", "time (us)", "share"],
                    [[r["class"], f"{r['time_ns'] / 1000:,.1f}", f"{100 * r['share']:.1f} %"]
                     for r in rep.classes.iter_rows(named=True)])
    lines.append("")
    lines += _table(["category", "class", "time (us)", "share", "activities"],
                    [[r["category"], r["class"], f"{r['time_ns'] / 1000:,.1f}", f"{100 * r['share']:.1f} %",
                      f"{r['activities']:,}"] for r in rep.categories.iter_rows(named=True)], right_from=2)
    if rep.phases:
        lines += ["", "Phases (iterations of the serving run):", ""]
        lines += _table(["phase", "iterations", "time (us)", "iteration (us)", "batch", "tokens", "GPU time (us)",
                         "GEMM", "non-GEMM", "top non-GEMM categories"],
                        [_phase_row(r) for r in rep.phases], right_from=1)
    if rep.ops.height:
        by = "cpu" if rep.metric == "cpu" else "gpu"
        other = "self_cpu_time_ns" if by == "gpu" else "self_gpu_time_ns"
        # as the terminal's table: ops with self time of their own, never wrappers (a report read back
        # from JSON has no wrapper column, and from an older document no CPU times: "-")
        real = ~pl.col("wrapper") if "wrapper" in rep.ops.columns else pl.lit(True)
        own = (pl.col("self_cpu_time_ns") > 0) & real if by == "cpu" else pl.col("self_gpu_time_ns") > 0
        lines += ["", f"Top {top} ops by self {by.upper()} time:", ""]
        lines += _table(["op", "category", "calls", f"{by.upper()} time (us)", f"self {by.upper()} time (us)",
                         f"self {other[5:8].upper()} time (us)"],
                        [[md_code(r["op"]), r["category"], f"{r['calls']:,}",
                          *("-" if r[c] is None else f"{r[c] / 1000:,.1f}"
                            for c in (f"{by}_time_ns", f"self_{by}_time_ns", other))]
                         for r in rep.ops.filter(own).head(top).iter_rows(named=True)],
                        right_from=2)
    if rep.warnings:
        lines += ["", "Warnings:", ""] + [f"- `{w.code}` ({w.count:,}): {md_text(w.message)}" for w in rep.warnings]
    return "\n".join(lines) + "\n"


def _phase_row(r: dict[str, Any]) -> list[Any]:
    gpu = r["gpu_time_ns"]
    by = {c["class"]: c["time_ns"] for c in r["classes"]}
    share = lambda name: f"{100 * by.get(name, 0) / gpu:.1f} %" if gpu else "-"  # noqa: E731
    return [r["phase"], f"{r['iterations']:,}", f"{r['time_ns'] / 1000:,.1f}", f"{r['iteration_ns'] / 1000:,.1f}",
            "-" if r["batch"] is None else f"{r['batch']:g}", "-" if r["tokens"] is None else f"{r['tokens']:,}",
            f"{gpu / 1000:,.1f}", share("GEMM"), share("non-GEMM"),
            ", ".join(f"{c['category']} {100 * c['time_ns'] / gpu:.1f} %" for c in r["categories"]) if gpu else "-"]


def compare_markdown(cmp: Comparison) -> str:
    d = cmp.to_dict()
    names = [Path(t["trace"]).name for t in d["traces"]]
    unit = "us per step" if d["per_step"] else "us"
    lines = ["### Comparison", "", f"BASE: {md_code(names[0])} · GPU time in {unit} · ratio = trace / BASE", ""]
    head = ["", *[md_code(n) for n in names]]
    lines += _table(head, [
        ["GPU time", *[f"{t['gpu_time_us']:,.1f}" for t in d["traces"]]],
        ["activities", *[f"{t['activities']:,}" for t in d["traces"]]],
        ["non-GEMM share", *[f"{100 * t['non_gemm_share']:.1f} %" for t in d["traces"]]],
    ])
    lines.append("")
    rows = []
    for c in d["categories"]:
        if not any(c["gpu_time_us"]):
            continue
        cells = [f"{c['gpu_time_us'][0]:,.1f}"]
        for t, r in zip(c["gpu_time_us"][1:], c["ratio"][1:]):
            cells.append(f"{t:,.1f} ({'new' if r is None else f'{r:.2f}x'})")
        rows.append([c["category"], c["class"], *cells])
    lines += _table(["category", "class", *[md_code(n) for n in names]], rows, right_from=2)
    for section in ("quantization", "fusion"):
        if d.get(section):
            lines += ["", f"**{section.capitalize()}**:", ""]
            lines += [f"- {md_code(Path(p['trace']).name)}: {md_text(p['summary'])}" for p in d[section]["pairs"]]
    if d.get("fusion"):
        p = d["fusion"]["pairs"][0]
        lines += ["", "Fused kernels and the eager ops they replaced:", ""]
        lines += _table(["kernel", "category", "time (us)", "replaces"],
                        [[md_code(k["kernel"]), k["category"], f"{k['time_us']:,.1f}",
                          ", ".join(md_code(o) for o in k["replaces_eager_ops"]) or "-"] for k in p["kernels"][:10]],
                        right_from=2)
    if d["warnings"]:
        lines += ["", "Warnings:", ""] + [f"- `{w['code']}`: {md_text(w['message'])}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"


def batch_markdown(result: BatchResult) -> str:
    """A batch's traces, one row each, and the combined row."""
    out = ["| trace | GPU time (us) | activities | GEMM | non-GEMM | top non-GEMM |", "|---|---:|---:|---:|---:|---|"]
    for r in batch_rows(result):
        out.append(f"| {_cell(md_code(Path(r[0]).name))} | {r[3]:,.1f} | {r[4]:,} | {100 * r[5]:.1f} % | "
                   f"{100 * r[6]:.1f} % | {_cell(r[7])} |")
    c = result.combined
    out.append(f"| **all {c['traces']} traces** | {c['gpu_time_us']:,.1f} | {c['gpu_activities']:,} | "
               + " | ".join(f"{100 * next((x['share'] for x in c['classes'] if x['class'] == k), 0.0):.1f} %"
                            for k in ("GEMM", "non-GEMM")) + " | |")
    return "\n".join(out) + "\n"
