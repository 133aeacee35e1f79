"""The latency and what-if reports as HTML (Jupyter's ``_repr_html_``): the step wall times and
the critical path's attribution by class and bound, or measured against predicted step latency,
read from the models' JSON contract (microseconds, never raw int64 nanosecond timestamps)."""

from __future__ import annotations

from html import escape
from typing import Any

from .html import html_fragment, html_num, html_share, html_table, html_text, html_warnings

#: what a ``bound`` of the critical path means, for a reader
BOUND_TEXT = {"cpu": "CPU-bound (host work)", "launch": "launch latency", "gpu": "GPU-bound",
              "other": "other (waits, gaps)"}


def _by(title: str, values: dict[str, float], text: dict[str, str] | None = None) -> str:
    total = sum(values.values())
    rows = [html_text((text or {}).get(k, k)) + html_num(v) + html_share(v / total if total else 0.0)
            for k, v in sorted(values.items(), key=lambda kv: -kv[1])]
    return f"<h3>{escape(title)}</h3>" + html_table("latency-by", ["", "time (us)", "share"], rows)


def latency_section(d: dict[str, Any]) -> str:
    """A :class:`~nongemm_trace.models.latency.LatencyReport`'s document: steps, then where the
    critical path's time went."""
    t = d["total"]
    out = [f'<p class="meta">{t["steps"]} step{"s" if t["steps"] != 1 else ""}'
           f' ({escape(str(d["step_marker"]))}) · mean step {_plain(t["mean_step_us"])} us · typical launch latency '
           f'{_plain(d["typical_launch_latency_us"])} us</p>']
    rows = [html_text(s["step"]) + html_text(s["name"], "name") + html_num(s["step_us"]) + html_num(s.get("latency_us"))
            for s in d["steps"]]
    out.append(html_table("latency-steps", ["step", "name", "step time (us)", "queueing latency (us)"], rows,
                      numeric_from=2))
    out.append(f'<p class="meta">step time: {escape(d["step_time"])}</p>')
    out.append(_by("Critical path by class", t["by_class_us"]))
    out.append(_by("Critical path by bound", t["by_bound_us"], BOUND_TEXT))
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


def whatif_section(d: dict[str, Any]) -> str:
    """A :class:`~nongemm_trace.models.latency.WhatIfReport`'s document: the change asked for, the
    measured and predicted step latency, the GPU shares before and after."""
    asked = ", ".join(f"{s['selector']} x{s['factor']:g}" for s in d["scales"]) or "no duration scaled"
    speedup = d.get("speedup")
    out = [f'<p class="verdict">{escape(asked)}: mean step {_plain(d["measured_us"])} us -> '
           f'{_plain(d["predicted_us"])} us' + (f" ({speedup:.2f}x)" if speedup else "") + "</p>"]
    rows = [html_text(s["step"]) + html_text(s["name"], "name") + html_num(s["measured_us"])
            + html_num(s["predicted_us"])
            + html_num(s["amdahl_us"]) for s in d["steps"]]
    out.append(html_table("whatif-steps", ["step", "name", "measured (us)", "predicted (us)", "Amdahl (us)"], rows,
                      numeric_from=2))
    rows = [html_text(g["class"]) + html_num(g["measured_gpu_us"]) + html_num(g["predicted_gpu_us"])
            + (html_share(g["measured"]) if g["measured"] is not None else html_num(None))
            + (html_share(g["predicted"]) if g["predicted"] is not None else html_num(None)) for g in d["gpu_shares"]]
    out.append("<h3>GPU time by class</h3>" + html_table(
        "whatif-shares", ["class", "measured (us)", "predicted (us)", "measured share", "predicted share"], rows))
    out.append(_by("Predicted critical path by bound", d["by_bound_us"], BOUND_TEXT))
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


def _plain(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def latency_fragment(rep) -> str:
    return html_fragment(str(rep.trace), latency_section(rep.to_dict()))


def whatif_fragment(rep) -> str:
    return html_fragment(str(rep.trace), whatif_section(rep.to_dict()))
