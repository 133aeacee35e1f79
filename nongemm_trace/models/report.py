"""The :class:`Report`: what ``analyze`` measured, as tables plus a JSON-ready dict.

Renderers (terminal table, CSV, Parquet, JSON) only read a Report; they never
compute. ``Report.to_dict`` is the documented JSON contract (``SCHEMA_VERSION``);
``Report.from_dict`` reads such a document back (its tables as far as the document
holds them: the per-activity ``kernels`` and ``calls`` tables are not in it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.frames import as_text
from ..core.trace import Anomaly
from ..errors import TraceError
from ..schema import NARROW
from ..vocabulary import CLASSES, MODEL_TABLES, SCHEMA_VERSION, STEP_TIME, TIME_BASES, ns
from ..vocabulary import us as _us
from .phases import phases_json, phases_of_json
from .rows import frame, warnings_of
from .short_repr import short_repr

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64
_OPS = {"op": ("op", _S), "category": ("category", _S), "calls": ("calls", _I),
        "gpu_time_ns": ("gpu_time_us", _I), "self_gpu_time_ns": ("self_gpu_time_us", _I),
        "activities": ("activities", _I), "cpu_time_ns": ("cpu_time_us", _I),
        "self_cpu_time_ns": ("self_cpu_time_us", _I)}
_KERNELS = {"name": ("name", _S), "kind": ("kind", _S), "category": ("category", _S), "class": ("class", _S),
            "activities": ("activities", _I), "gpu_time_ns": ("gpu_time_us", _I)}
_STEPS = {"step": ("step", _I), "name": ("name", _S), "cpu_time_ns": ("cpu_time_us", _I),
          "gpu_time_ns": ("gpu_time_us", _I), "activities": ("activities", _I), "step_ns": ("step_us", _I),
          "latency_ns": ("latency_us", _I)}
_CLASSES = {"class": ("class", _S), "time_ns": ("time_us", _I), "share": ("share", _F),
            "activities": ("activities", _I)}



def _us_or_none(v: Any) -> float | None:
    return None if v is None else _us(v)


def _op_rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{"op": r["op"], "category": r["category"], "calls": int(r["calls"]),
             "gpu_time_us": _us(r["gpu_time_ns"]), "self_gpu_time_us": _us(r["self_gpu_time_ns"]),
             "activities": int(r["activities"]), "cpu_time_us": _us(r["cpu_time_ns"]),
             "self_cpu_time_us": _us(r["self_cpu_time_ns"])} for r in df.iter_rows(named=True)]


def _step_rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return [{"step": int(r["step"]), "name": r["name"], "cpu_time_us": _us(r["cpu_time_ns"]),
             "gpu_time_us": _us(r["gpu_time_ns"]), "activities": int(r["activities"]),
             "step_us": _us_or_none(r.get("step_ns")), "latency_us": _us_or_none(r.get("latency_ns"))}
            for r in df.iter_rows(named=True)]


class Rows:
    """A function that makes a slice of a table into the document's rows, with the fields it
    writes (``(key, column, kind)``, kind ``text``, ``int``, ``us`` or ``us_or_none``): a writer
    may encode the columns instead of the rows (:mod:`nongemm_trace.report.json_out`), the same
    bytes without a dict a row."""

    def __init__(self, make: Any, fields: tuple[tuple[str, str, str], ...]) -> None:
        self.make, self.fields = make, fields

    def __call__(self, df: pl.DataFrame) -> list[dict[str, Any]]:
        return self.make(df)


OP_ROWS = Rows(_op_rows, (("op", "op", "text"), ("category", "category", "text"), ("calls", "calls", "int"),
                          ("gpu_time_us", "gpu_time_ns", "us"), ("self_gpu_time_us", "self_gpu_time_ns", "us"),
                          ("activities", "activities", "int"), ("cpu_time_us", "cpu_time_ns", "us"),
                          ("self_cpu_time_us", "self_cpu_time_ns", "us")))
STEP_ROWS = Rows(_step_rows, (("step", "step", "int"), ("name", "name", "text"), ("cpu_time_us", "cpu_time_ns", "us"),
                              ("gpu_time_us", "gpu_time_ns", "us"), ("activities", "activities", "int"),
                              ("step_us", "step_ns", "us_or_none"), ("latency_us", "latency_ns", "us_or_none")))


#: rows of a table made into the document's rows at once (:func:`_mean_step_us`, the JSON writer)
ROW_BATCH = 20_000


def _mean_step_us(steps: pl.DataFrame) -> float | None:
    """The mean of the steps' periods as the document's rows give them (each rounded to ns in us,
    summed in order: the figure a reader of the rows gets), a batch of rows at a time."""
    if "step_ns" not in steps.columns:
        return None
    total, n = 0.0, 0
    for lo in range(0, steps.height, ROW_BATCH):
        periods = _periods_us(steps["step_ns"].slice(lo, ROW_BATCH).drop_nulls())
        total, n = sum(periods, total), n + len(periods)
    return round(total / n, 3) if n else None


def _periods_us(ns_values: pl.Series) -> list[float]:
    """``[us(v) for v in ns_values]`` by one division of the column (a million steps took 2.4 s by
    the function a value): for integer nanoseconds below 2^50 in magnitude, ``round(v / 1000, 3)``
    is ``v / 1000`` itself (its ulp far below 0.001), the same double."""
    lo, hi = (ns_values.min(), ns_values.max()) if ns_values.dtype.is_integer() else (None, None)
    if isinstance(lo, int) and isinstance(hi, int) and -(1 << 50) < lo and hi < (1 << 50):
        # by polars (no numpy import on ``analyze``'s path), and by a column of divisors: polars divides
        # by a scalar as a product with its reciprocal, which rounds some quotients otherwise
        thousands = pl.repeat(1000.0, ns_values.len(), dtype=pl.Float64, eager=True)
        return (ns_values.cast(pl.Int64).cast(pl.Float64) / thousands).to_list()
    return [_us(v) for v in ns_values.to_list()]


def _share(x: Any) -> float:
    return round(float(x or 0.0), 6)


@dataclass(repr=False)
class Report:
    """One trace's breakdown (``analyze``): where its time went, by class and category, per op,
    per kernel and per step, under one metric (``gpu``, ``cpu``, ``paper``; a deployment stack's
    ``layer``/``node`` time) and level (``launch``, ``top``, ``module``). Tables are polars frames in
    integer nanoseconds; every activity counted is in exactly one category, and the categories sum
    to ``gpu_time_ns`` (checked when measured). ``to_dict()`` is the JSON contract (microseconds),
    ``from_dict()`` reads it back; ``share(name)`` gives a class's or category's share."""

    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "report"

    #: the tables ``--table`` picks for csv / parquet (the default first)
    TABLES: ClassVar[tuple[str, ...]] = MODEL_TABLES["report"]


    trace: str
    metric: str
    level: str
    taxonomy: str
    taxonomy_version: str
    categories: pl.DataFrame
    classes: pl.DataFrame
    ops: pl.DataFrame
    #: one row per activity counted, as the pipeline holds it (text columns may be categorical
    #: codes, schema.TEXT); read it as :attr:`kernels`
    kernel_rows: pl.DataFrame
    kernel_summary: pl.DataFrame
    steps: pl.DataFrame
    gpu_time_ns: int
    gpu_activities: int
    cpu_time_ns: int | None
    total_gpu_time_in_file_ns: int
    total_activities_in_file: int
    step_marker: str | None
    steps_skipped: int
    drop_unlinked: bool
    attribution: dict[str, int]
    metadata: dict[str, Any]
    warnings: list[Anomaly] = field(default_factory=list)
    #: one row per op call after linking (op_id, name, depth, parent_id, top_id, op_category,
    #: qdq_call, input_dims, input_type, concrete_inputs, …): the per-call view for deeper analyses
    calls: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: GPU activity time (ns) per rung of the evidence ladder its category rests on
    #: (semantics, dataflow, family, generic, none: docs/taxonomy.md)
    evidence: dict[str, int] = field(default_factory=dict)
    #: the categories the report's taxonomy declares (the names ``share`` accepts)
    category_names: tuple[str, ...] = ()
    #: a deployment stack's fusion view (TensorRT, ONNX Runtime profiles), else None
    engine: dict[str, Any] | None = None
    #: how many kernel rows the measured report had, when ``kernel_summary`` holds only the first
    #: ones (a report read back from its JSON); None: ``kernel_summary`` is whole
    kernel_summary_total: int | None = None
    #: a serving or generate() run's phases (metrics/phases.py: one row per phase, integer ns) and
    #: the engine whose marks told the iterations apart; empty and None for other traces
    phases: list[dict[str, Any]] = field(default_factory=list)
    phase_engine: str | None = None

    @property
    def kernels(self) -> pl.DataFrame:
        """One row per activity counted (``KERNEL_COLUMNS`` of the selection), as text. Cast when first
        read, not when measured: a JSON or terminal report never reads it, and every activity's kernel
        name as text was the peak memory of a trace with many activities."""
        if any(t == pl.Categorical for t in self.kernel_rows.schema.values()):
            self.kernel_rows = as_text(self.kernel_rows)
        # ids the loader held in 32 bits (schema.NARROW) leave as the Int64 every format gives
        narrow = [c for c in NARROW if self.kernel_rows.schema.get(c) == pl.Int32]
        if narrow:
            self.kernel_rows = self.kernel_rows.with_columns(pl.col(narrow).cast(pl.Int64))
        return self.kernel_rows

    # -- derived numbers -------------------------------------------------
    def share(self, name: str) -> float:
        """Share of the metric's total for a class (``GEMM``, ``non-GEMM`` …) or a category; 0.0 for
        one with no time in this trace. A name that is neither raises :class:`TraceError`."""
        known = self.category_names or tuple(self.categories["category"].to_list())
        if name not in CLASSES and name not in known:
            raise TraceError(self.trace, f"unknown class or category {name!r} (classes: {', '.join(CLASSES)}; "
                                         f"categories: {', '.join(known)})")
        for table, key in ((self.classes, "class"), (self.categories, "category")):
            row = table.filter(pl.col(key) == name)
            if row.height:
                return float(row["share"].sum())
        return 0.0

    def gpu_categories(self) -> pl.DataFrame:
        """``category, class, gpu_time_ns, activities``: the category table's GPU time under every
        metric (the ``cpu`` and ``paper`` tables carry it beside their own; a deployment stack's is its
        own time), read alike from a live report and a stored one (``check``, ``compare``)."""
        col = "gpu_time_ns" if "gpu_time_ns" in self.categories.columns else "time_ns"
        return self.categories.select("category", "class", pl.col(col).alias("gpu_time_ns"), "activities")

    def to_pandas(self) -> dict[str, Any]:
        """The report's tables as pandas DataFrames (needs pandas and pyarrow: the ``[pandas]`` extra)."""
        try:
            import pandas  # noqa: F401
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError("Report.to_pandas() needs pandas and pyarrow: pip install 'nongemm-trace[pandas]' "
                              "(the tables themselves are polars DataFrames: report.categories, report.ops, …)"
                              ) from None
        return {k: getattr(self, k).to_pandas()
                for k in ("categories", "classes", "ops", "kernels", "kernel_summary", "steps")}

    def _repr_html_(self) -> str:
        """Jupyter's view: class and category bars, the top ops and kernels (names escaped)."""
        from ..report.html import report_fragment

        return report_fragment(self)

    # -- JSON contract -----------------------------------------------------
    def json_tables(self, max_ops: int | None = None) -> dict[str, tuple[pl.DataFrame, Any]]:
        """The document's lists that grow with the trace (a row per op name, a row per step), each
        as its table and the function that makes a slice of it into the document's rows: a writer
        may write them in batches (:func:`nongemm_trace.report.json_out.render_json`)."""
        return {"ops": (self.ops if max_ops is None else self.ops.head(max_ops), OP_ROWS),
                "steps": (self.steps, STEP_ROWS)}

    def to_dict(self, max_ops: int | None = None, max_kernels: int | None = 50,
                deferred: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON document; ``deferred``: stand-ins for the lists of :meth:`json_tables`, put in
        their place (a writer that writes those lists in batches)."""
        cats = []
        for r in self.categories.iter_rows(named=True):
            row = {"category": r["category"], "class": r["class"]}
            if self.metric == "gpu":
                row["gpu_time_us"] = _us(r["time_ns"])
            elif self.metric in TIME_BASES:
                row[f"{self.metric}_time_us"] = _us(r["time_ns"])
            else:
                row[f"{self.metric}_time_us"] = _us(r["time_ns"])
                if "cpu_time_ns" in r:
                    row["cpu_time_us"] = _us(r["cpu_time_ns"])
                row["gpu_time_us"] = _us(r.get("gpu_time_ns", 0))
            row["share"] = _share(r["share"])
            row["activities"] = int(r["activities"])
            cats.append(row)
        classes = [{"class": r["class"], "time_us": _us(r["time_ns"]), "share": _share(r["share"]),
                    "activities": int(r["activities"])} for r in self.classes.iter_rows(named=True)]
        tables = self.json_tables(max_ops)
        ops: Any = deferred["ops"] if deferred else _op_rows(tables["ops"][0])
        ks = self.kernel_summary if max_kernels is None else self.kernel_summary.head(max_kernels)
        kernels = [{"name": r["name"], "kind": r["kind"], "category": r["category"], "class": r["class"],
                    "activities": int(r["activities"]), "gpu_time_us": _us(r["gpu_time_ns"])}
                   for r in ks.iter_rows(named=True)]
        steps: Any = deferred["steps"] if deferred else _step_rows(self.steps)
        mean_step = _mean_step_us(self.steps)
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool_version": __version__,
            "trace": self.trace,
            "metric": self.metric,
            "level": self.level,
            "taxonomy": self.taxonomy,
            "taxonomy_version": self.taxonomy_version,
            "gpu_time_us": _us(self.gpu_time_ns),
            "gpu_activities": self.gpu_activities,
        }
        if self.cpu_time_ns is not None:
            out["cpu_time_us"] = _us(self.cpu_time_ns)
        if self.metric == "paper":
            out["paper_time_us"] = _us(int(self.categories["time_ns"].sum()))
        if self.metric in TIME_BASES:
            out[f"{self.metric}_time_us"] = _us(self.gpu_time_ns)
        out.update({
            "file_gpu_time_us": _us(self.total_gpu_time_in_file_ns),
            "file_gpu_activities": self.total_activities_in_file,
            "drop_unlinked": self.drop_unlinked,
            "step_marker": self.step_marker,
            "steps_skipped": self.steps_skipped,
            "attribution": dict(sorted(self.attribution.items())),
            "evidence": {k: {"gpu_time_us": _us(v), "share": _share(v / self.gpu_time_ns if self.gpu_time_ns else 0.0)}
                         for k, v in self.evidence.items()},
            "classes": classes,
            "categories": cats,
            "ops": ops,
            "kernels": kernels,
            "kernels_shown": len(kernels),
            "kernels_total": self.kernel_summary.height if self.kernel_summary_total is None
            else self.kernel_summary_total,
            "steps": steps,
            "mean_step_us": mean_step,
            "step_time": STEP_TIME if mean_step is not None else None,
            "device": self.metadata.get("device"),
            "trace_metadata": self.metadata.get("trace"),
            "warnings": [w.as_dict() for w in self.warnings],
        })
        if self.engine is not None:
            out["engine"] = self.engine
        if self.phases:
            out["phases"] = phases_json(self.phases)
            out["phase_engine"] = self.phase_engine
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        """A report from its JSON document (:meth:`to_dict`, ``analyze --format json``)."""
        metric = d["metric"]
        cats = {"category": ("category", _S), "class": ("class", _S),
                "time_ns": ("gpu_time_us" if metric == "gpu" else f"{metric}_time_us", _I),
                "activities": ("activities", _I), "share": ("share", _F)}
        if metric in ("cpu", "paper"):
            if metric == "paper":
                cats["cpu_time_ns"] = ("cpu_time_us", _I)
            cats["gpu_time_ns"] = ("gpu_time_us", _I)
        kernel_summary = frame(d["kernels"], _KERNELS).with_columns(
            (pl.col("gpu_time_ns") / pl.col("activities")).alias("mean_ns"))
        categories = frame(d["categories"], cats)
        return cls(
            trace=d["trace"], metric=metric, level=d["level"], taxonomy=d["taxonomy"],
            taxonomy_version=d["taxonomy_version"], categories=categories, classes=frame(d["classes"], _CLASSES),
            ops=frame(d["ops"], _OPS), kernel_rows=pl.DataFrame(), kernel_summary=kernel_summary,
            steps=frame(d["steps"], _STEPS), gpu_time_ns=ns(d["gpu_time_us"]), gpu_activities=d["gpu_activities"],
            cpu_time_ns=ns(d["cpu_time_us"]) if "cpu_time_us" in d else None,
            total_gpu_time_in_file_ns=ns(d["file_gpu_time_us"]), total_activities_in_file=d["file_gpu_activities"],
            step_marker=d["step_marker"], steps_skipped=d["steps_skipped"], drop_unlinked=d["drop_unlinked"],
            attribution=dict(d["attribution"]), metadata={"device": d["device"], "trace": d["trace_metadata"]},
            warnings=warnings_of(d), evidence={k: ns(v["gpu_time_us"]) for k, v in d["evidence"].items()},
            category_names=tuple(categories["category"].to_list()), engine=d.get("engine"),
            kernel_summary_total=d["kernels_total"], phases=phases_of_json(d.get("phases")),
            phase_engine=d.get("phase_engine"))
