"""A serving run's phases on the HTML page: the terminal's *Phases* table (``report/terminal/phases.py``),
each figure's value kept in ``data-value``."""

from __future__ import annotations

from html import escape
from typing import Any

from .html import html_num, html_table, html_text


def phases_section(rows: list[dict[str, Any]], engine: str | None) -> str:
    """The table, or nothing for a trace without phases."""
    if not rows:
        return ""
    body = []
    for r in rows:
        gpu = r["gpu_time_ns"]
        by_class = {c["class"]: c["time_ns"] for c in r["classes"]}
        share = {k: round(100 * t / gpu, 1) if gpu else None for k, t in by_class.items()}
        cats = ", ".join(f"{c['category']} {100 * c['time_ns'] / gpu:.1f} %" for c in r["categories"]) if gpu else ""
        body.append(f"{html_text(r['phase'])}{html_num(r['iterations'])}{html_num(r['time_ns'] / 1000)}"
                    f"{html_num(r['iteration_ns'] / 1000)}{html_num(r['batch'])}{html_num(r['tokens'])}"
                    f"{html_num(gpu / 1000)}{html_num(share.get('GEMM', 0.0))}{html_num(share.get('non-GEMM', 0.0))}"
                    f"{html_text(cats)}")
    return (f"<h3>Phases</h3><p class=\"meta\">iterations told by {escape(str(engine))}'s marks (time: host span "
            "to GPU end)</p>" + html_table("phases", ["phase", "iterations", "time (us)", "iteration (us)", "batch",
                                                      "tokens", "GPU time (us)", "GEMM (%)", "non-GEMM (%)",
                                                      "top non-GEMM categories"], body))
