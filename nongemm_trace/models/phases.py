"""A report's serving phases (``metrics/phases.py``) as the JSON document's ``phases`` list and back.

The rows are held in integer ns; the document gives microseconds and, per class and per top
non-GEMM category, the share of the phase's GPU time (the paper's question asked per phase).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._version import __version__
from ..vocabulary import SCHEMA_VERSION, ns
from ..vocabulary import us as _us
from .short_repr import short_repr


def _share(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def phases_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``phase, iterations, time_us, iteration_us, batch, tokens, gpu_time_us, activities, classes,
    categories`` per phase (the JSON contract names ``phase, iterations, time_us, classes``).
    ``iteration_us`` is an iteration's mean time (``time_us`` over ``iterations``), not a step time: a
    ``generate()`` call is one step of many iterations, and a step time is the loop's period."""
    out = []
    for r in rows:
        gpu = r["gpu_time_ns"]
        out.append({
            "phase": r["phase"], "iterations": r["iterations"], "time_us": _us(r["time_ns"]),
            "iteration_us": _us(r["iteration_ns"]), "batch": r["batch"], "tokens": r["tokens"],
            "gpu_time_us": _us(gpu), "activities": r["activities"],
            "classes": [{"class": c["class"], "time_us": _us(c["time_ns"]), "share": _share(c["time_ns"], gpu)}
                        for c in r["classes"]],
            "categories": [{"category": c["category"], "time_us": _us(c["time_ns"]),
                            "share": _share(c["time_ns"], gpu)} for c in r["categories"]]})
    return out


def phases_of_json(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The rows of :func:`phases_json`'s list (a stored report read back)."""
    return [{"phase": r["phase"], "iterations": r["iterations"], "time_ns": ns(r["time_us"]),
             "iteration_ns": ns(r.get("iteration_us", r.get("step_us"))), "batch": r["batch"],
             "tokens": r["tokens"],
             "gpu_time_ns": ns(r["gpu_time_us"]), "activities": r["activities"],
             "classes": [{"class": c["class"], "time_ns": ns(c["time_us"])} for c in r["classes"]],
             "categories": [{"category": c["category"], "time_ns": ns(c["time_us"])} for c in r["categories"]]}
            for r in rows or []]


@dataclass(repr=False)
class PhasesReport:
    """``phases``: a serving or ``generate()`` run's iterations by phase (prefill, decode, mixed, other),
    the rows the breakdown report holds (``Report.phases``, integer ns), with the engine whose marks
    told them; no rows for a trace that marks none."""

    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    NAME: ClassVar[str] = "phases"

    trace: str
    engine: str | None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
                "phase_engine": self.engine, "phases": phases_json(self.rows)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhasesReport:
        """A phases report from its JSON document (``phases --format json``)."""
        return cls(d["trace"], d.get("phase_engine"), phases_of_json(d.get("phases")))
