"""The latency and what-if reports as HTML (Jupyter's ``_repr_html_``): the step wall times and
the critical path's attribution by class and bound, or measured against predicted step latency,
read from the models' JSON contract (microseconds, never raw int64 nanosecond timestamps)."""

from __future__ import annotations

from html import escape
from typing import Any

from .html import html_fragment, html_num, html_share, html_table, html_text, html_warnings
from .latency_lines import latency_head, whatif_head, whatif_verdict

#: what a ``bound`` of the critical path means, in the words of the terminal's verdict (host-bound:
#: launch, op CPU work, outside ops; device-bound: the device)
BOUND_TEXT = {"cpu": "op CPU work (host)", "launch": "launch (host)", "other": "outside ops (host)",
              "gpu": "device", "communication": "communication (device)", "sync": "sync",
              "capture": "graph capture (host)"}


def _by(title: str, values: dict[str, float], text: dict[str, str] | None = None) -> str:
    total = sum(values.values())
    rows = [html_text((text or {}).get(k, k)) + html_num(v) + html_share(v / total if total else 0.0)
            for k, v in sorted(values.items(), key=lambda kv: -kv[1])]
    return f"<h3>{escape(title)}</h3>" + html_table("latency-by", ["", "time (us)", "share"], rows)


def _head(lines: list[tuple[str, bool]]) -> list[str]:
    """The terminal's verdict lines (report/terminal/latency.py), the bold ones as verdicts."""
    return [f'<p class="{"verdict" if bold else "meta"}">{escape(text.strip())}</p>' for text, bold in lines]


def latency_section(d: dict[str, Any], head: list[tuple[str, bool]] | None = None) -> str:
    """A :class:`~nongemm_trace.models.latency.LatencyReport`'s document: the verdicts (``head``, the
    terminal's lines), the steps, then where the critical path's time went."""
    t = d["total"]
    out = [f'<p class="meta">{t["steps"]} step{"s" if t["steps"] != 1 else ""}'
           f' ({escape(str(d["step_marker"] or "whole trace"))}) · mean step {_plain(t["mean_step_us"])} us · '
           f'typical launch latency {_plain(d["typical_launch_latency_us"])} us</p>', *_head(head or [])]
    rows = [html_text(s["step"]) + html_text(s["name"], "name") + html_num(s["step_us"]) + html_num(s.get("latency_us"))
            for s in d["steps"]]
    out.append(html_table("latency-steps", ["step", "name", "step time (us)", "queueing latency (us)"], rows,
                      numeric_from=2))
    out.append(f'<p class="meta">step time: {escape(d["step_time"])}</p>')
    out.append(_by("Critical path by class", t["by_class_us"]))
    out.append(_by("Critical path by bound", t["by_bound_us"], BOUND_TEXT))
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


def whatif_section(d: dict[str, Any], head: list[tuple[str, bool]] | None = None, verdict: str = "") -> str:
    """A :class:`~nongemm_trace.models.latency.WhatIfReport`'s document: the change asked for and the
    measured and predicted step latency (``head``, the terminal's lines), the GPU shares before and
    after, the predicted critical path (``verdict``, the terminal's)."""
    out = _head(head or [])
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
    if verdict:
        out.append(f'<p class="verdict">{escape(verdict)}</p>')
    out.append(_by("Predicted critical path by bound", d["by_bound_us"], BOUND_TEXT))
    out.append(html_warnings(d["warnings"]))
    return "".join(out)


def _plain(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def latency_fragment(rep) -> str:
    return html_fragment(str(rep.trace), latency_section(rep.to_dict(), latency_head(rep)))


def whatif_fragment(rep) -> str:
    d = rep.to_dict()
    return html_fragment(str(rep.trace), whatif_section(d, whatif_head(rep, d), whatif_verdict(rep)))
