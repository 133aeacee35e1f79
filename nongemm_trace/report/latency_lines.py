"""The latency and what-if verdicts as plain lines, said alike by the terminal (report/terminal/latency.py)
and the notebook view (report/html_latency.py): the profiled run's, the run's without the profiler and
where that estimate comes from, what a what-if changed and its answers. Each line comes with whether it
is a verdict (bold in the terminal)."""

from __future__ import annotations

from typing import Any

import polars as pl

from .sentences import unprofiled_source

#: the models' types are not named here: the models draw their notebook views through this module, so a
#: type-only import of them would close a cycle (models.latency -> report.html_latency -> here); each
#: function says which model it reads
LatencyReport = Any
WhatIfReport = Any

#: the critical path's bounds that are the host's
HOST = ("launch", "cpu", "other")


def _verdict(att: pl.DataFrame, wall_ns: int) -> str:
    if not wall_ns:
        return "no steps with time"
    bb = dict(att.group_by("bound").agg(pl.col("ns").sum()).iter_rows())
    host = sum(bb.get(b, 0) for b in HOST)
    dev = bb.get("gpu", 0) + bb.get("communication", 0)
    pct = lambda v: f"{100 * v / wall_ns:.0f} %"  # noqa: E731
    if bb.get("capture", 0) > max(host, dev):  # models.latency.bound_of's capture-bound
        return (f"graph capture: {pct(bb['capture'])} of the latency is the host recording CUDA/HIP graphs (launches "
                f"captured, not run); the rest: the host {pct(host)}, the device {pct(dev)}, "
                f"sync {pct(bb.get('sync', 0))}")
    kind = "host-bound" if host > dev else "device-bound"
    non = att.filter(pl.col("class") == "non-GEMM")
    non_launch = int(non.filter(pl.col("bound").is_in(list(HOST)))["ns"].sum() or 0)
    return (f"{kind}: {pct(host)} of the latency is the host (launch {pct(bb.get('launch', 0))}, op CPU work "
            f"{pct(bb.get('cpu', 0))}, outside ops {pct(bb.get('other', 0))}), {pct(dev)} the device, "
            f"{pct(bb.get('sync', 0))} sync; non-GEMM ops hold {pct(int(non['ns'].sum() or 0))}, "
            f"{pct(non_launch)} of it on the host")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f} % of the step without it" if whole else "-"


def _changed(profiled: str | None, unprofiled: str | None) -> str:
    """Says when the profiler changes the verdict."""
    if profiled and unprofiled and profiled != unprofiled:
        return f" ({profiled} under the profiler, {unprofiled} without it)"
    return ""


def latency_head(rep: LatencyReport) -> list[tuple[str, bool]]:
    """The latency verdicts, plain text, each with whether it is the bold kind: the profiled run's,
    then the run's without the profiler and where that estimate comes from. The terminal and the
    notebook view (report/html_latency.py) say the same lines."""
    wall = int(rep.steps["wall"].sum() or 0)
    lines = [(f"profiled: {_verdict(rep.attribution, wall)}", True)]
    un = rep.unprofiled
    if un:
        lines += [(f"without the profiler: steady step {un['step_us']:,.1f} us (the profiler adds "
                   f"{un['profiler_overhead_us']:,.1f} us, {_pct(un['profiler_overhead_us'], un['step_us'])}); "
                   f"{un['bound']}{_changed(un.get('profiled_bound'), un.get('bound'))}", True),
                  (f"  ({unprofiled_source(un)})", False)]
        if un.get("attached_step_us") is not None:
            lines.append((f"  in the same process after its window, the profiler still attached (CUPTI not torn "
                          f"down): steady step {un['attached_step_us']:,.1f} us", False))
    return lines


def whatif_head(rep: WhatIfReport, d: dict) -> list[tuple[str, bool]]:
    """What the what-if changed and its answer for the profiled run and the run without the profiler,
    plain text, each with whether it is the bold kind (the terminal and the notebook view say them)."""
    changes = [f"{s['selector']} x{s['factor']:g}" for s in rep.scales]
    if rep.settings.get("cpu_scale", 1.0) != 1.0:
        changes.append(f"host work x{rep.settings['cpu_scale']:g}")
    if rep.settings.get("launch_us") is not None:
        changes.append(f"launch calls {rep.settings['launch_us']:g} us")
    if rep.settings.get("graphs"):
        cost = (f"{rep.settings['graph_launch_us']:g} us" if rep.settings.get("graph_launch_us") is not None else
                f"{rep.settings['graph_launch_us_per_activity']:g} us per activity")
        changes.append(f"CUDA graphs ({rep.settings.get('graphs_replayed', 0)} replays, launch {cost}, "
                       f"{rep.settings.get('graph_launch_cost')})")
    if rep.settings.get("autocast"):
        per_step = rep.settings.get("autocast_casts") or []
        casts = sum(s["casts"] for s in per_step) / len(per_step) if per_step else 0
        mb = sum(s["cast_bytes"] or 0 for s in per_step) / len(per_step) / 1e6 if per_step else 0
        lower = sum(s.get("lower_input_ops", 0) for s in per_step) / len(per_step) if per_step else 0
        more = f", {lower:,.0f} ops with a lower-precision input" if lower else ""
        changes.append(f"autocast {rep.settings['autocast']} ({casts:,.0f} casts per step, {mb:,.1f} MB cast{more})")
    lines = [("what if: " + (", ".join(changes) or "nothing changes (replays the measured steps)"), False)]
    m, p, a = d["measured_us"], d["predicted_us"], d["amdahl_us"]
    if m is not None:
        lines.append((f"profiled run, mean step: measured {m:,.1f} us -> predicted {p:,.1f} us "
                      f"({100 * (p / m - 1):+.1f} %); naive Amdahl (step minus the time saved) {a:,.1f} us", True))
    um, up, un = d.get("unprofiled_step_us"), d.get("predicted_unprofiled_step_us"), rep.unprofiled or {}
    if um is not None and up is not None:
        lines.append((f"without the profiler, steady step: {um:,.1f} us -> predicted {up:,.1f} us "
                       f"({100 * (up / um - 1):+.1f} %); {un.get('predicted_bound')}"
                       f"{_changed(un.get('predicted_profiled_bound'), un.get('predicted_bound'))}", True))
        lines.append((f"  ({unprofiled_source(un)})", False))
    return lines


def whatif_verdict(rep: WhatIfReport) -> str:
    """The predicted critical path's verdict (the latency verdict of the replayed steps)."""
    return _verdict(rep.attribution, int(rep.steps["predicted"].sum() or 0))
