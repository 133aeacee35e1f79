"""A batch's combined view as a reduction: each trace's report is cut into a *row* (what the outputs
print of that trace) and a *part* (what only the combined view and the collectives need), and the
parts reduce by :func:`merge` in any grouping.

Why: on a Ray cluster the driver must not receive every full report (1,000 ranks' op and kernel
tables, their collective calls); it fetches the rows, and the parts are merged where they lie
(:func:`nongemm_trace.runs.ray_engine.reduce_parts`). A part and the merge of parts have one shape,
so that a tree of merges gives the same sums as one pass over the reports (the process engine's).
"""

from __future__ import annotations

from typing import Any

from .collectives import CALLS_KEY, collectives_view

#: the fields of a report a trace's row keeps: what the terminal, CSV and Markdown outputs print of it, what
#: the ranks view reads and the listed analyses' documents (its categories are cut to the top non-GEMM one:
#: the row's "top non-GEMM")
ROW_FIELDS = ("trace", "rank", "metric", "level", "taxonomy", "gpu_time_us", "gpu_activities", "classes",
              "step_times_us", "timeline", "analyses")


def part_of(report: dict[str, Any]) -> dict[str, Any]:
    """One trace's part: its sums per category (the combined view's), and its collective calls when it is a rank."""
    cats: dict[str, list] = {}
    for c in report["categories"]:
        e = cats.setdefault(c["category"], [c["class"], 0.0, 0])
        e[1] += c.get("gpu_time_us", 0.0)
        e[2] += c["activities"] if report["metric"] == "gpu" else 0
    out: dict[str, Any] = {"traces": 1, "gpu_time_us": report["gpu_time_us"],
                           "gpu_activities": report["gpu_activities"], "categories": cats, "ranks": []}
    if report.get(CALLS_KEY) is not None and report.get("rank") is not None:
        out["ranks"] = [{"rank": report["rank"], CALLS_KEY: report[CALLS_KEY]}]
    return out


def row_of(report: dict[str, Any]) -> dict[str, Any]:
    """One trace's row (:data:`ROW_FIELDS`, and its top non-GEMM category)."""
    row = {k: report[k] for k in ROW_FIELDS if k in report}
    non = [c for c in report["categories"] if c["class"] == "non-GEMM" and c["share"] > 0]
    row["categories"] = non[:1]
    return row


def split(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A worker's report as ``(row, part)``; a failed trace's error line is its row and it has no part."""
    if "error" in report:
        return report, {}
    return row_of(report), part_of(report)


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Parts (or merges of parts) as one. Collective calls are only carried: matching them needs every rank."""
    out: dict[str, Any] = {"traces": 0, "gpu_time_us": 0.0, "gpu_activities": 0, "categories": {}, "ranks": []}
    for p in parts:
        if not p:
            continue
        out["traces"] += p["traces"]
        out["gpu_time_us"] += p["gpu_time_us"]
        out["gpu_activities"] += p["gpu_activities"]
        for name, (cls, t, n) in p["categories"].items():
            e = out["categories"].setdefault(name, [cls, 0.0, 0])
            e[1] += t
            e[2] += n
        out["ranks"] += p["ranks"]
    return out


def sums_only(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`merge` without the collective calls (the tree's reduction: calls go to :func:`collectives_of`)."""
    out = merge(parts)
    out["ranks"] = []
    return out


def collectives_of(parts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """The collectives matched across the ranks of these parts (:func:`.collectives.collectives_view`)."""
    return collectives_view([r for p in parts if p for r in p["ranks"]])


def combined_of(total: dict[str, Any], failed: int) -> dict[str, Any]:
    """The combined view from the merge of every part: GPU time and activities per category and class."""
    gpu = total["gpu_time_us"]
    rows = sorted(({"category": k, "class": v[0], "gpu_time_us": round(v[1], 3), "activities": v[2]}
                   for k, v in total["categories"].items()), key=lambda e: (-e["gpu_time_us"], e["category"]))
    for e in rows:
        e["share"] = round(e["gpu_time_us"] / gpu, 6) if gpu else 0.0
    classes: dict[str, float] = {}
    for e in rows:
        classes[e["class"]] = classes.get(e["class"], 0.0) + e["gpu_time_us"]
    return {"traces": total["traces"], "failed": failed, "gpu_time_us": round(gpu, 3),
            "gpu_activities": int(total["gpu_activities"]), "categories": rows,
            "classes": [{"class": k, "gpu_time_us": round(v, 3), "share": round(v / gpu, 6) if gpu else 0.0}
                        for k, v in sorted(classes.items())]}


def combined(reports: list[dict[str, Any]], failed: list[dict[str, str]]) -> dict[str, Any]:
    """GPU time and activities per category and class summed over the reports (one pass, in their order)."""
    return combined_of(merge([part_of(r) for r in reports]), len(failed))
