"""The :class:`LaunchReport`: launch overhead, idle gaps and communication overlap of one trace
(built by :func:`nongemm_trace.analyses.launch.launch_analysis`), with its JSON contract both ways."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.trace import Anomaly
from ..vocabulary import MODEL_TABLES, SCHEMA_VERSION, ns, us
from .rows import frame, us_row_frame, warnings_of
from .short_repr import short_repr

FIELDS = ("span", "busy", "idle", "host_bound_idle")


@dataclass(repr=False)
class LaunchReport:
    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "launch"

    #: the tables ``--table`` picks for csv / parquet (the default first)
    TABLES: ClassVar[tuple[str, ...]] = MODEL_TABLES["launch"]

    trace: str
    taxonomy: str
    level: str
    short_ns: int
    summary: dict[str, Any]
    steps: pl.DataFrame
    devices: pl.DataFrame
    streams: pl.DataFrame
    categories: pl.DataFrame
    activities: pl.DataFrame
    graphs: dict[str, Any]
    verdict: str
    device: dict[str, Any] | None
    warnings: list[Anomaly] = field(default_factory=list)

    def _repr_html_(self) -> str:
        """Jupyter's view: the verdict, the timeline's measures and the timeline figure."""
        from ..report.html import launch_fragment

        return launch_fragment(self)

    def to_dict(self) -> dict[str, Any]:
        out = {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
               "taxonomy": self.taxonomy, "level": self.level, "short_activity_us": self.short_ns / 1000}
        out.update(self.summary)
        out["verdict"] = self.verdict
        out["cuda_graphs"] = self.graphs
        out["steps"] = [_row(r) for r in self.steps.iter_rows(named=True)]
        out["devices"] = [_row(r) for r in self.devices.iter_rows(named=True)]
        out["streams"] = [_row(r) for r in self.streams.iter_rows(named=True)]
        out["categories"] = [{"category": r["category"], "activities": int(r["activities"]),
                              "gpu_time_us": whole_us(r["gpu_time_ns"]),
                              "launch_overhead_us": whole_us(r["launch_overhead_ns"]),
                              "short_activities": int(r["short_activities"])}
                             for r in self.categories.iter_rows(named=True)]
        out["device"] = self.device
        out["warnings"] = [w.as_dict() for w in self.warnings]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchReport:
        """A launch report from its JSON document (``launch --format json``); the per-activity
        table is not in the document."""
        summary = {k: v for k, v in d.items() if k not in _NOT_SUMMARY}
        return cls(d["trace"], d["taxonomy"], d["level"], ns(d["short_activity_us"]), summary,
                   us_row_frame(d["steps"]), us_row_frame(d["devices"]), us_row_frame(d["streams"]),
                   frame(d["categories"], _CATEGORIES) if d["categories"] else pl.DataFrame(), pl.DataFrame(),
                   d["cuda_graphs"], d["verdict"], d["device"], warnings_of(d))


#: the document's keys that are not the summary's
_NOT_SUMMARY = ("schema_version", "tool_version", "trace", "taxonomy", "level", "short_activity_us", "verdict",
                "cuda_graphs", "steps", "devices", "streams", "categories", "device", "warnings")
_CATEGORIES = {"category": ("category", pl.Utf8), "activities": ("activities", pl.Int64),
               "gpu_time_ns": ("gpu_time_us", pl.Int64), "launch_overhead_ns": ("launch_overhead_us", pl.Int64),
               "short_activities": ("short_activities", pl.Int64)}


def whole_us(value: Any) -> float:
    """Whole nanoseconds (a median's fraction dropped) in microseconds."""
    return us(int(value or 0))


def _row(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in r.items():
        if k.endswith("_ns"):
            out[k[:-3] + "_us"] = whole_us(v) if v is not None else None
        elif isinstance(v, float):
            out[k] = round(v, 3)
        else:
            out[k] = v
    return out


