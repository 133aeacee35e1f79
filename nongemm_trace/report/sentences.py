"""The sentences and the rank table that the terminal and the HTML page both show, written once.

The page used to say less than the terminal: no estimate of the run without the profiler, no
straggler sentence, no rank table. Both renderers now take their words from here (plain text; each
escapes it for its medium), so they cannot drift apart (``tests/test_html_terminal.py``)."""

from __future__ import annotations

from typing import Any

from ..vocabulary import BUSY_CLASS_ORDER, OPTIONAL_BUSY_CLASSES, STEP_TIME

#: what a deployment stack's activities are called where they are counted
COUNTED_UNITS = {"layer": "engine layers", "node": "ONNX nodes"}


def counted_text(metric: str, gpu_activities: int, op_calls: int) -> str:
    """What the total is summed over: GPU activities (engine layers, ONNX nodes), or under the CPU
    metric the op calls (and the GPU's activities, where the trace has any)."""
    if metric == "cpu":
        return f"{op_calls:,} op calls" + (f" ({gpu_activities:,} GPU activities)" if gpu_activities else "")
    return f"{gpu_activities:,} {COUNTED_UNITS.get(metric, 'GPU activities')}"


def total_sentence(total_us: float, counted: str, steps: int, marker: str | None) -> str:
    """``analyze``'s total: ``total: 7,724.7 us over 270 GPU activities, 2 steps (## step ##)``."""
    return (f"total: {total_us:,.1f} us over {counted}"
            + (f", {steps} step{'s' if steps != 1 else ''} ({marker})" if steps else ""))


def evidence_sentence(shares: dict[str, float], of: str) -> str:
    """What the categories rest on: each rung of the evidence ladder with its share of ``of``."""
    rungs = " · ".join(f"{k} {100 * v:.1f} %" for k, v in shares.items() if v)
    return f"categories rest on: {rungs} (of {of}; docs/taxonomy.md, the evidence ladder)"


def step_time_sentence() -> str:
    """What a step time is, said under every table of step times."""
    return f"step time: the loop's {STEP_TIME}"


def base_sentence(name: str, basis: str, unit: str, level: str, taxonomy: str) -> tuple[str, str]:
    """A comparison's first line, as (its lead, the rest): which trace is BASE and what is compared."""
    return f"BASE: {name}", f" — {basis} in {unit}, ratio = trace / BASE (level {level}, taxonomy {taxonomy})"


def pair_sentence(section: str, trace: str, summary: str) -> tuple[str, str]:
    """A comparison's fusion or quantization sentence for one trace against BASE, as (lead, rest)."""
    return section, f" ({trace}): {summary}"


def unprofiled_source(un: dict) -> str:
    """Where a figure for the run without the profiler comes from, in words."""
    if un.get("source") == "measured":
        on = "host issue time" if un.get("calibrated_on") == "host_issue" else "step"
        step = f", measured step {un['measured_step_us']:,.1f} us" if un.get("measured_step_us") else ""
        return f"calibrated on the measured {on} without the profiler{step}: model x{un.get('calibration_k', 1):.2f}"
    return f"estimated from the trace alone by the profiler-overhead model [{un.get('setting')}]"


def launch_verdicts(verdict: str, summary: dict[str, Any]) -> list[str]:
    """``launch``'s verdict lines: the profiled run, then (when known) the run without the profiler
    and where that estimate comes from. Each run's busy share is said once, in its own line."""
    lines = [f"profiled: {verdict}"]
    un = summary.get("unprofiled")
    if un:
        lines.append(un["verdict"])  # the profiled busy share is the line above's: said once
        lines.append(f"({unprofiled_source(un)})")
    return lines


def graph_sentence(graphs: dict[str, Any]) -> str | None:
    """What CUDA-graph replay saved in launch calls (None where the trace replays no graph)."""
    if not graphs.get("graph_launches"):
        return None
    eager = graphs.get("launch_us_per_eager_activity")
    # a trace of replays only (a graph's decode step, replayed) launched nothing eagerly to compare with
    vs = f" vs {eager:,.2f} us per eagerly launched one" if eager is not None else \
        " (no activity was launched eagerly to compare with)"
    n = graphs["graph_launches"]
    return (f"CUDA graphs: {n:,} launch{'es' if n != 1 else ''} replayed {graphs['graph_activities']:,} activities "
            f"({graphs['activities_per_graph_launch']:,.1f} each); launch call time "
            f"{graphs['amortized_launch_us_per_graph_activity']:,.2f} us per replayed activity{vs}")


def step_sentences(summary: dict[str, Any]) -> list[str]:
    """``launch``'s step time (the loop's period) and the device span per step, where known."""
    lines = []
    if "step_us" in summary:
        sp = summary["step_us"]
        lines.append(f"step time (the loop's period): mean {summary['mean_step_us']:,.1f} us, min {sp['min']:,.1f} us, "
                     f"median {sp['median']:,.1f} us, max {sp['max']:,.1f} us "
                     f"(spread {100 * (sp['spread'] or 0):.1f} % of the mean)")
    if "step_span_us" in summary:
        sp = summary["step_span_us"]
        lines.append(f"device span per step (its first activity's start to its last one's end): min "
                     f"{sp['min']:,.1f} us, median {sp['median']:,.1f} us, max {sp['max']:,.1f} us")
    return lines


def busy_classes(rows: list[dict[str, Any]]) -> list[str]:
    """The compute classes of the span, in the order that owns overlaps; a class listed only where
    the time line has it (host<->device transfers), so the span's sum is whole on every rank."""
    have = {c for r in rows for c in (r.get("busy_by_class_us") or {})}
    return [c for c in BUSY_CLASS_ORDER if c != "communication" and (c in have or c not in OPTIONAL_BUSY_CLASSES)]


def ranks_title(ranks: dict[str, Any]) -> str:
    spread = ranks["straggler_spread"]
    return (f"Ranks: straggler rank {ranks['straggler_rank']}, "
            + ("no step times" if spread is None else f"spread of mean step time {100 * spread:.1f} % of the median")
            + f"; span = {' + '.join(busy_classes(ranks['ranks']))} + exposed comm. + idle (overlaps: the first)")


def ranks_table(ranks: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The rank table: its headers and one row of texts per rank (``-`` where a figure is unknown)."""
    busy = busy_classes(ranks["ranks"])
    head = ["rank", "steps", "mean step (us)", "max step (us)", "span (us)", *(f"{c} (us)" for c in busy),
            "exposed comm. (us)", "host-bound idle (us)", "other idle (us)", "communication (us)", "GPU time (us)"]

    def dash(v: Any) -> str:
        return "-" if v is None else f"{v:,.1f}"

    rows = []
    for r in ranks["ranks"]:
        idle, host, by_class = r.get("idle_us"), r.get("host_bound_idle_us"), r.get("busy_by_class_us") or {}
        rows.append([str(r["rank"]), str(r["steps"]), dash(r["mean_step_us"]), dash(r["max_step_us"]),
                     dash(r.get("span_us")), *(dash(by_class.get(c)) for c in busy),
                     dash(r.get("exposed_communication_us")), dash(host),
                     dash(None if idle is None or host is None else round(idle - host, 3)),
                     dash(r.get("communication_us")), f"{r['gpu_time_us']:,.1f}"])
    return head, rows


def ranks_lines(ranks: dict[str, Any]) -> list[str]:
    """The sentences under the rank table: the straggler's evidence, and the note when there is one."""
    return [f"straggler: {ranks['straggler_evidence']}"] + ([f"note: {ranks['note']}"] if ranks.get("note") else [])
