"""A report's serving phases (``metrics/phases.py``) as the JSON document's ``phases`` list and back.

The rows are held in integer ns; the document gives microseconds and, per class and per top
non-GEMM category, the share of the phase's GPU time (the paper's question asked per phase).
"""

from __future__ import annotations

from typing import Any

from ..vocabulary import ns
from ..vocabulary import us as _us


def _share(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def phases_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``phase, iterations, time_us, step_us, batch, tokens, gpu_time_us, activities, classes,
    categories`` per phase (the JSON contract names ``phase, iterations, time_us, classes``)."""
    out = []
    for r in rows:
        gpu = r["gpu_time_ns"]
        out.append({
            "phase": r["phase"], "iterations": r["iterations"], "time_us": _us(r["time_ns"]),
            "step_us": _us(r["step_ns"]), "batch": r["batch"], "tokens": r["tokens"],
            "gpu_time_us": _us(gpu), "activities": r["activities"],
            "classes": [{"class": c["class"], "time_us": _us(c["time_ns"]), "share": _share(c["time_ns"], gpu)}
                        for c in r["classes"]],
            "categories": [{"category": c["category"], "time_us": _us(c["time_ns"]),
                            "share": _share(c["time_ns"], gpu)} for c in r["categories"]]})
    return out


def phases_of_json(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The rows of :func:`phases_json`'s list (a stored report read back)."""
    return [{"phase": r["phase"], "iterations": r["iterations"], "time_ns": ns(r["time_us"]),
             "step_ns": ns(r["step_us"]), "batch": r["batch"], "tokens": r["tokens"],
             "gpu_time_ns": ns(r["gpu_time_us"]), "activities": r["activities"],
             "classes": [{"class": c["class"], "time_ns": ns(c["time_us"])} for c in r["classes"]],
             "categories": [{"category": c["category"], "time_ns": ns(c["time_us"])} for c in r["categories"]]}
            for r in rows or []]
