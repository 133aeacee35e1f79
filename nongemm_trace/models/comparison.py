"""The :class:`Comparison`: what changed between traces (built by
:func:`nongemm_trace.analyses.compare.compare`), with its JSON contract both ways.

Its tables are long (one row per trace and category or class) and already hold what the
document shows: times divided per step when asked, the delta to BASE and the ratio to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.trace import Anomaly
from ..vocabulary import SCHEMA_VERSION, TIME_BASES, ns
from ..vocabulary import us as _us
from .rows import warnings_of
from .short_repr import short_repr

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

#: columns of the long tables (``classes`` adds ``class`` first, ``categories`` ``category, class``)
LONG_COLUMNS = {"trace_index": pl.Int64, "time_ns": pl.Float64, "activities": pl.Float64, "launches": pl.Float64,
                "share": pl.Float64, "delta_ns": pl.Float64, "ratio": pl.Float64}
#: one row per trace: GPU time and activities (per step when asked), steps, non-GEMM share, device
TRACE_COLUMNS = {"trace": pl.Utf8, "gpu_time_ns": pl.Float64, "activities": pl.Float64, "steps": pl.Int64,
                 "non_gemm_share": pl.Float64, "device": pl.Utf8}


@dataclass(repr=False)
class Comparison:
    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "comparison"

    per_step: bool
    level: str
    taxonomy: str
    per_trace: pl.DataFrame  # TRACE_COLUMNS, BASE first
    categories: pl.DataFrame  # long: category, class, LONG_COLUMNS
    classes: pl.DataFrame  # long: class, LONG_COLUMNS
    fusion: dict[str, Any] | None
    quantization: dict[str, Any] | None
    warnings: list[Anomaly] = field(default_factory=list)
    engine_fusion: list[dict[str, Any]] | None = None
    #: the compared reports, when the comparison was measured here (not read from a document)
    reports: list[Report] = field(default_factory=list)

    @property
    def traces(self) -> list[str]:
        return self.per_trace["trace"].to_list()

    @property
    def time_basis(self) -> tuple[str, str]:
        """What the times are and what is counted: a deployment stack's profiles measure layer or
        node time (``vocabulary.TIME_BASES``), everything else GPU activity time. A comparison read
        back from a document has no reports: GPU time, as its fields say."""
        metrics = {r.metric for r in self.reports}
        if len(metrics) == 1 and (m := metrics.pop()) in TIME_BASES:
            return f"{m} time", f"{m}s"
        return "GPU time", "activities"

    def non_gemm_share(self, i: int) -> float:
        c = self.classes.filter((pl.col("trace_index") == i) & (pl.col("class") == "non-GEMM"))
        return float(c["share"].sum()) if c.height else 0.0

    def _repr_html_(self) -> str:
        """Jupyter's view: totals, share bars per trace and the category table against BASE."""
        from ..report.html import compare_fragment

        return compare_fragment(self)

    def to_dict(self) -> dict[str, Any]:
        traces = [{"trace": t["trace"], "gpu_time_us": _us(t["gpu_time_ns"]),
                   "activities": plain_number(t["activities"]),
                   "steps": t["steps"], "non_gemm_share": round(t["non_gemm_share"], 6), "device": t["device"]}
                  for t in self.per_trace.iter_rows(named=True)]
        cats = [{"category": cat, "class": rows[0]["class"], **_series(rows)}
                for cat, rows in _wide(self.categories, "category").items()]
        classes = [{"class": cls, **_series(rows), "share": [round(r["share"], 6) for r in rows]}
                   for cls, rows in _wide(self.classes, "class").items()]
        out = {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "per_step": self.per_step,
               "metric": "gpu", "level": self.level, "taxonomy": self.taxonomy,
               "traces": traces, "classes": classes, "categories": cats}
        if self.fusion:
            out["fusion"] = self.fusion
        if self.quantization:
            out["quantization"] = self.quantization
        if self.engine_fusion:
            out["engine_fusion"] = self.engine_fusion
        out["warnings"] = [w.as_dict() for w in self.warnings]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        """A comparison from its JSON document (``compare --format json``)."""
        per_trace = pl.DataFrame([{k: ns(t["gpu_time_us"]) if k == "gpu_time_ns" else t[k] for k in TRACE_COLUMNS}
                                  for t in d["traces"]], schema=TRACE_COLUMNS, orient="row")
        return cls(d["per_step"], d["level"], d["taxonomy"], per_trace,
                   _long(d["categories"], {"category": pl.Utf8, "class": pl.Utf8}),
                   _long(d["classes"], {"class": pl.Utf8}), d.get("fusion"), d.get("quantization"),
                   warnings_of(d), d.get("engine_fusion"))


def plain_number(x: float | None) -> float | int | None:
    """A count for the document: whole when it is (per-step counts may not be); None stays None
    (a count the compared document does not hold)."""
    if x is None:
        return None
    return int(x) if float(x).is_integer() else round(float(x), 3)


def _wide(long: pl.DataFrame, key: str) -> dict[str, list[dict[str, Any]]]:
    """The long table's rows per ``key`` (in the order the keys first appear), by trace."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in long.iter_rows(named=True):
        out.setdefault(r[key], []).append(r)
    return {k: sorted(rows, key=lambda r: r["trace_index"]) for k, rows in out.items()}


def _series(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "gpu_time_us": [_us(r["time_ns"]) for r in rows],
        "activities": [plain_number(r["activities"]) for r in rows],
        "launches": [plain_number(r["launches"]) for r in rows],
        "delta_us": [_us(r["delta_ns"]) for r in rows],
        "ratio": [None if r["ratio"] is None else round(r["ratio"], 6) for r in rows],
    }


def _long(items: list[dict[str, Any]], keys: dict[str, Any]) -> pl.DataFrame:
    rows = []
    for it in items:
        for i, t in enumerate(it["gpu_time_us"]):
            rows.append({**{k: it[k] for k in keys}, "trace_index": i, "time_ns": ns(t),
                         "activities": it["activities"][i], "launches": it["launches"][i],
                         "share": it["share"][i] if "share" in it else None, "delta_ns": ns(it["delta_us"][i]),
                         "ratio": it["ratio"][i]})
    return pl.DataFrame(rows, schema={**keys, **LONG_COLUMNS}, orient="row")
