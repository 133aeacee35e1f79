"""The :class:`ShapesReport`: one row per operator and input shape (built by
:mod:`nongemm_trace.analyses.shapes`): how often the op ran with those inputs, the GPU time it owned,
and the rates it achieved, TFLOP/s and GB/s, so the shape that runs far under the device's roof is
found by name (the per-shape op table TraceLens users read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.trace import Anomaly
from ..vocabulary import SCHEMA_VERSION
from .rows import frame, warnings_of
from .short_repr import short_repr

#: the table's columns: (the document's key, dtype); times in ns, ``*_us`` in the document
COLUMNS: dict[str, tuple[str, Any]] = {
    "op": ("op", pl.Utf8), "category": ("category", pl.Utf8), "input_dims": ("input_dims", pl.Utf8),
    "input_type": ("input_type", pl.Utf8), "precision": ("precision", pl.Utf8), "calls": ("calls", pl.Int64),
    "time_ns": ("gpu_time_us", pl.Int64), "mean_ns": ("mean_us", pl.Int64),
    "flops_per_call": ("flops_per_call", pl.Int64), "bytes_per_call": ("bytes_per_call", pl.Int64),
    "achieved_tflops": ("achieved_tflops", pl.Float64), "achieved_gbps": ("achieved_gbps", pl.Float64),
}


@dataclass(repr=False)
class ShapesReport:
    """``shapes``: one row per (op, input shapes, input types), the most GPU time first: ``calls``,
    ``time_ns`` (the GPU time the calls owned, as ``flops`` counts it), ``mean_ns``, FLOPs and bytes per
    call (formula or estimate; null where neither applies) and the achieved TFLOP/s and GB/s."""

    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    NAME: ClassVar[str] = "shapes"

    trace: str
    device: str | None
    shapes: pl.DataFrame
    warnings: list[Anomaly] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for r in self.shapes.iter_rows(named=True):
            row = {key: r[col] for col, (key, _) in COLUMNS.items()}
            row["gpu_time_us"] = round(r["time_ns"] / 1000, 3)
            row["mean_us"] = round(r["mean_ns"] / 1000, 3)
            for k in ("achieved_tflops", "achieved_gbps"):
                row[k] = None if row[k] is None else round(row[k], 4)
            rows.append(row)
        return {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
                "device": self.device, "shapes": rows, "warnings": [w.as_dict() for w in self.warnings]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShapesReport:
        """A shapes report from its JSON document (``shapes --format json``)."""
        return cls(d["trace"], d.get("device"), frame(d["shapes"], COLUMNS), warnings_of(d))
