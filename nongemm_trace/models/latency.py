"""The results of ``latency`` and ``whatif``: tables plus the JSON contract (``to_dict``).

``latency``: ``steps`` = list of ``{step, name, wall_us, attribution: [{category, class, bound,
time_us}]}`` and ``total`` of the same shape over all steps. ``whatif``: ``steps`` = list of
``{step, measured_us, predicted_us}``, ``measured_us`` / ``predicted_us`` (means per step),
``scales``, ``warnings``. Fields may be added, these are never renamed. Renderers read these
models and never compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.trace import Anomaly
from ..vocabulary import SCHEMA_VERSION, STEP_LATENCY, STEP_TIME, ns, steady_step, us
from .rows import warnings_of
from .short_repr import short_repr

#: where the critical path can be, in report order (docs/latency.md); ``capture``: host time recording a
#: CUDA/HIP graph (launches captured, not run: load/graph_capture.py)
BOUNDS = ("gpu", "communication", "launch", "cpu", "sync", "other", "capture")
#: the bounds that are the host's, and the device's (a capture is neither: nothing of the run ran in it)
HOST_BOUNDS, DEVICE_BOUNDS = ("launch", "cpu", "other"), ("gpu", "communication")
#: the bound of a critical path mostly spent capturing graphs
CAPTURE_BOUND = "capture-bound"


def bound_of(attribution: pl.DataFrame) -> str | None:
    """``host-bound`` or ``device-bound``: which side holds more of the critical path; ``capture-bound``
    where recording CUDA/HIP graphs holds more than either (a capture, not a run); None: no time."""
    if attribution.height == 0:
        return None
    side = attribution.group_by("bound").agg(pl.col("ns").sum())
    return _side(dict(zip(side["bound"].to_list(), side["ns"].to_list())))


def bounds_per_step(attribution: pl.DataFrame) -> dict[int, str | None]:
    """:func:`bound_of` of each step that has rows (``step, bound, ns``), from one group-by: a query per
    step cost more than the steps' rows."""
    side = attribution.group_by("step", "bound").agg(pl.col("ns").sum())
    per: dict[int, dict[str, int]] = {}
    for step, bound, time in side.select("step", "bound", "ns").iter_rows():
        per.setdefault(step, {})[bound] = time
    return {step: _side(bb) for step, bb in per.items()}


def _side(bb: dict[str, int]) -> str | None:
    """:func:`bound_of` from the time per bound."""
    host, dev = sum(bb.get(b, 0) for b in HOST_BOUNDS), sum(bb.get(b, 0) for b in DEVICE_BOUNDS)
    if bb.get("capture", 0) > max(host, dev):
        return CAPTURE_BOUND
    if host == dev == 0:
        return None
    return "host-bound" if host > dev else "device-bound"

_ATTRIBUTION = {"step": pl.Int64, "category": pl.Utf8, "class": pl.Utf8, "bound": pl.Utf8, "ns": pl.Int64}


def attribution_rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    """``category, class, bound, ns`` rows as the contract's ``{category, class, bound, time_us}``."""
    return [{"category": r["category"], "class": r["class"], "bound": r["bound"], "time_us": us(r["ns"])}
            for r in df.iter_rows(named=True)]


def totals(attribution: pl.DataFrame) -> pl.DataFrame:
    """The attribution summed over steps, largest first."""
    return attribution.group_by(["category", "class", "bound"]).agg(pl.col("ns").sum()).sort(
        ["ns", "category", "bound"], descending=[True, False, False])


def by(attribution: pl.DataFrame, key: str) -> dict[str, float]:
    """Microseconds per value of ``key`` (``bound`` or ``class``), largest first (then by name). Summed
    in Python: a step's table has a few rows, and a polars query per step costs more than the rows."""
    sums: dict[str, int] = {}
    for k, v in zip(attribution[key].to_list(), attribution["ns"].to_list()):
        sums[k] = sums.get(k, 0) + v
    return {k: us(v) for k, v in sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))}


def attribution_frame(rows: list[dict[str, Any]], step: int | None) -> pl.DataFrame:
    """``{category, class, bound, time_us}`` rows back as the attribution table of ``step``."""
    return pl.DataFrame({"step": [step] * len(rows), "category": [r["category"] for r in rows],
                         "class": [r["class"] for r in rows], "bound": [r["bound"] for r in rows],
                         "ns": [ns(r["time_us"]) for r in rows]}, schema=_ATTRIBUTION)


def _steps(steps: pl.DataFrame, attribution: pl.DataFrame) -> list[dict[str, Any]]:
    out, empty = [], attribution.head(0)
    per_step = attribution.partition_by("step", as_dict=True, maintain_order=True)
    for r in steps.iter_rows(named=True):
        mine = per_step.get((r["step"],), empty)
        out.append({"step": r["step"], "name": r["name"], "wall_us": us(r["wall"]), "step_us": us(r["wall"]),
                    "latency_us": us(r["latency"]) if r.get("latency") is not None else None,
                    "attribution": attribution_rows(mine), "by_bound_us": by(mine, "bound"),
                    "by_class_us": by(mine, "class")})
    return out


@dataclass(repr=False)
class LatencyReport:
    """Per-step wall time along the critical path, by category and bound."""

    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "latency"


    trace: str
    taxonomy: str
    level: str
    step_marker: str | None
    steps: pl.DataFrame          # step, name, ts, end, cpu_end, gpu_end, start, wall (the period), latency (ns)
    attribution: pl.DataFrame    # step, category, class, bound, ns
    launch_latency_ns: int
    queue_gap_ns: int
    warnings: list[Anomaly] = field(default_factory=list)
    #: the run without the profiler (latency/unprofiled.py): ``source``, ``setting``, ``calibration_k``,
    #: ``measured_step_us``, ``note``, ``step_us``, ``profiler_overhead_us``, ``bound``, ``profiled_bound``
    #: (means per step) and ``steps``: ``[{step, step_us, profiler_overhead_us, bound}]``
    unprofiled: dict[str, Any] | None = None

    @property
    def total(self) -> pl.DataFrame:
        return totals(self.attribution)

    def _repr_html_(self) -> str:
        """Jupyter's view: step wall times and the critical path by class and bound, in us."""
        from ..report.html_latency import latency_fragment

        return latency_fragment(self)

    def to_dict(self) -> dict[str, Any]:
        wall = int(self.steps["wall"].sum() or 0)
        queued = (self.steps["latency"].drop_nulls() if "latency" in self.steps.columns
                  else pl.Series([], dtype=pl.Int64))
        total = self.total
        un = self.unprofiled or {}
        per_step = {r["step"]: {k: r[k] for k in UNPROFILED_STEP} for r in un.get("steps", [])}
        steps = _steps(self.steps, self.attribution)
        for r in steps:
            r["unprofiled"] = per_step.get(r["step"])
        return {
            "schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
            "taxonomy": self.taxonomy, "level": self.level, "step_marker": self.step_marker,
            "typical_launch_latency_us": us(self.launch_latency_ns), "typical_queue_gap_us": us(self.queue_gap_ns),
            "step_time": STEP_TIME, "step_latency": STEP_LATENCY,
            "steps": steps,
            "total": {"steps": self.steps.height, "wall_us": us(wall),
                      "mean_step_us": us(wall / self.steps.height) if self.steps.height else None,
                      "mean_latency_us": us(int(queued.sum()) / queued.len()) if queued.len() else None,
                      "attribution": attribution_rows(total), "by_bound_us": by(total, "bound"),
                      "by_class_us": by(total, "class"),
                      "unprofiled": {k: un[k] for k in UNPROFILED_STEP if k != "step"} if un else None},
            "unprofiled": self.unprofiled,
            "warnings": [w.as_dict() for w in self.warnings],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyReport:
        """A latency report from its JSON document (the steps' start and end times are not in it)."""
        rows = d["steps"]
        steps = pl.DataFrame({"step": [r["step"] for r in rows], "name": [r["name"] for r in rows],
                              **{c: [None] * len(rows) for c in ("ts", "end", "cpu_end", "gpu_end", "start")},
                              "wall": [ns(r["wall_us"]) for r in rows],
                              "latency": [ns(r["latency_us"]) if r.get("latency_us") is not None else None
                                          for r in rows]},
                             schema={"step": pl.Int64, "name": pl.Utf8, "ts": pl.Int64, "end": pl.Int64,
                                     "cpu_end": pl.Int64, "gpu_end": pl.Int64, "start": pl.Int64, "wall": pl.Int64,
                                     "latency": pl.Int64})
        att = pl.concat([attribution_frame(r["attribution"], r["step"]) for r in rows]) if rows else \
            pl.DataFrame(schema=_ATTRIBUTION)
        return cls(d["trace"], d["taxonomy"], d["level"], d["step_marker"], steps, att,
                   ns(d["typical_launch_latency_us"]), ns(d["typical_queue_gap_us"]), warnings_of(d),
                   d.get("unprofiled"))


#: a step's figures for the run without the profiler, in the latency document
UNPROFILED_STEP = ("step", "step_us", "profiler_overhead_us", "bound")

#: the what-if document's keys that are not its settings
_NOT_SETTINGS = ("step_time", "unprofiled_step_us", "predicted_unprofiled_step_us", "unprofiled_source", "unprofiled",
                 "schema_version", "tool_version", "trace", "taxonomy", "level", "scales", "measured_us",
                 "predicted_us", "speedup", "amdahl_us", "measured_span_us", "predicted_span_us", "steps", "gpu_shares",
                 "attribution", "by_bound_us",
                 "by_class_us", "warnings")


@dataclass(repr=False)
class WhatIfReport:
    """Measured and predicted step latency under changed durations, with the new critical path."""

    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "whatif"


    trace: str
    taxonomy: str
    level: str
    scales: list[dict[str, Any]]
    settings: dict[str, Any]
    steps: pl.DataFrame          # step, name, measured, predicted, amdahl (ns); unprofiled, predicted_unprofiled
    attribution: pl.DataFrame    # the predicted timeline's: step, category, class, bound, ns
    gpu_shares: pl.DataFrame     # class, measured_ns, predicted_ns
    warnings: list[Anomaly] = field(default_factory=list)
    #: the kept steps' first start to last end, ns, ``measured`` and ``predicted``: where steps overlap
    #: on the device (no synchronize per step), the throughput answer that per-step wall times are not
    span: dict[str, int | None] = field(default_factory=dict)
    #: the run without the profiler: ``source`` ("measured"/"estimated"), ``setting``, ``calibration_k``,
    #: ``measured_step_us``, ``note``, ``bound`` / ``predicted_bound`` and ``profiled_bound`` /
    #: ``predicted_profiled_bound`` (host- or device-bound, with and without the profiler)
    unprofiled: dict[str, Any] | None = None

    def _repr_html_(self) -> str:
        """Jupyter's view: measured against predicted step latency and the GPU shares, in us."""
        from ..report.html_latency import whatif_fragment

        return whatif_fragment(self)

    def mean(self, column: str) -> float | None:
        if (not self.steps.height or column not in self.steps.columns
                or self.steps[column].null_count() == self.steps.height):
            return None
        return us(self.steps[column].mean())

    def steady(self, column: str) -> float | None:
        """A run without the profiler's step in steady state (us): the median of the steps'
        (:func:`~nongemm_trace.vocabulary.steady_step`)."""
        if not self.steps.height or column not in self.steps.columns:
            return None
        value = steady_step(self.steps[column])
        return None if value is None else us(value)

    def to_dict(self) -> dict[str, Any]:
        total = totals(self.attribution)
        measured, predicted = self.mean("measured"), self.mean("predicted")
        gm, gp = int(self.gpu_shares["measured_ns"].sum() or 0), int(self.gpu_shares["predicted_ns"].sum() or 0)
        return {
            "schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
            "taxonomy": self.taxonomy, "level": self.level, "scales": self.scales, **self.settings,
            "step_time": STEP_TIME, "measured_us": measured, "predicted_us": predicted,
            "speedup": round(measured / predicted, 4) if measured and predicted else None,
            "amdahl_us": self.mean("amdahl"),
            "unprofiled_step_us": self.steady("unprofiled"),
            "predicted_unprofiled_step_us": self.steady("predicted_unprofiled"),
            "unprofiled_source": (self.unprofiled or {}).get("source"),
            "unprofiled": self.unprofiled,
            "measured_span_us": us(self.span.get("measured")), "predicted_span_us": us(self.span.get("predicted")),
            "steps": [{"step": r["step"], "name": r["name"], "measured_us": us(r["measured"]),
                       "predicted_us": us(r["predicted"]), "amdahl_us": us(r["amdahl"]),
                       "unprofiled_us": _us_or_none(r.get("unprofiled")),
                       "predicted_unprofiled_us": _us_or_none(r.get("predicted_unprofiled"))}
                      for r in self.steps.iter_rows(named=True)],
            "gpu_shares": [{"class": r["class"], "measured": round(r["measured_ns"] / gm, 6) if gm else None,
                            "predicted": round(r["predicted_ns"] / gp, 6) if gp else None,
                            "measured_gpu_us": us(r["measured_ns"]), "predicted_gpu_us": us(r["predicted_ns"])}
                           for r in self.gpu_shares.iter_rows(named=True)],
            "attribution": attribution_rows(total), "by_bound_us": by(total, "bound"),
            "by_class_us": by(total, "class"),
            "warnings": [w.as_dict() for w in self.warnings],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WhatIfReport:
        """A what-if report from its JSON document (the predicted attribution over all steps, as it holds)."""
        rows = d["steps"]
        steps = pl.DataFrame({"step": [r["step"] for r in rows], "name": [r["name"] for r in rows],
                              **{c: [ns(r.get(f"{c}_us")) for r in rows] for c in _WHATIF_STEP}},
                             schema={"step": pl.Int64, "name": pl.Utf8, **dict.fromkeys(_WHATIF_STEP, pl.Int64)})
        shares = pl.DataFrame({"class": [r["class"] for r in d["gpu_shares"]],
                               "measured_ns": [ns(r["measured_gpu_us"]) for r in d["gpu_shares"]],
                               "predicted_ns": [ns(r["predicted_gpu_us"]) for r in d["gpu_shares"]]},
                              schema={"class": pl.Utf8, "measured_ns": pl.Int64, "predicted_ns": pl.Int64})
        settings = {k: v for k, v in d.items() if k not in _NOT_SETTINGS}
        span = {k: ns(d[f"{k}_span_us"]) for k in ("measured", "predicted") if d.get(f"{k}_span_us") is not None}
        return cls(d["trace"], d["taxonomy"], d["level"], d["scales"], settings, steps,
                   attribution_frame(d["attribution"], None), shares, warnings_of(d), span, d.get("unprofiled"))


def _us_or_none(v: Any) -> float | None:
    return None if v is None else us(v)


#: a what-if step's times (ns in the table, ``NAME_us`` in the document)
_WHATIF_STEP = ("measured", "predicted", "amdahl", "unprofiled", "predicted_unprofiled")
