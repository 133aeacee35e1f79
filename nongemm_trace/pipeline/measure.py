"""The measure stage: a selection (:mod:`.selection`) and a metric to the breakdown :class:`Report`.

The selection says which activities, steps and CPU window count; this stage adds what only the
breakdown needs: the metric (its fallback where there are no GPU activities, a deployment stack's
own time basis), the CPU times of the ``cpu`` and ``paper`` metrics, and the report's tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from ..classify.taxonomy import Taxonomy
from ..core.frames import as_text
from ..load.graph_capture import capture_windows
from ..metrics.breakdown import (
    category_table,
    class_table,
    cpu_op_times,
    evidence_time,
    kernel_summary,
    op_table,
    step_table,
)
from ..metrics.engines import engine_view
from ..metrics.op_cpu import call_cpu_times, in_window
from ..metrics.phases import phase_table
from ..models.report import Report
from .selection import KERNEL_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    from .selection import Selection


def measure(sel: Selection, metric: str) -> Report:
    """The breakdown report of selection ``sel`` under ``metric`` (``gpu``, ``cpu``, ``paper``)."""
    tax, linked, acts, level = sel.tax, sel.linked, sel.activities, sel.level
    gpu_cats = category_table(acts, tax)
    effective_metric, metric_warnings = sel.measured_as(metric)
    cpu_total = None
    if effective_metric in ("cpu", "paper") and not sel.engine:
        cpu_rows = cpu_op_times(linked.ops, "top" if level == "top" else "launch", tax.semantics.generic_categories)
        if sel.steps_skipped:
            cpu_rows = cpu_rows.join(in_window(linked.ops, *sel.window), on="op_id", how="semi")
        cpu_cats = category_table(cpu_rows.rename({"cpu_ns": "dur_ns"}), tax)
        cpu_total = int(cpu_cats["time_ns"].sum())
        if effective_metric == "cpu":
            cats = cpu_cats.join(gpu_cats.select("category", pl.col("time_ns").alias("gpu_time_ns")), on="category",
                                 how="left").with_columns(pl.col("gpu_time_ns").fill_null(0))
        else:  # paper: CPU time of the ops + GPU time of their activities, per category
            cats = _paper_table(cpu_cats, gpu_cats, tax)
    else:
        cats = gpu_cats
    # the one column first: a group-by of the whole table copied every column of it (its chunks made one)
    attribution = dict(acts.select("attribution").group_by("attribution").len().iter_rows()) if acts.height else {}
    phase_engine, phases = (None, []) if sel.engine else \
        phase_table(acts, linked.ops, capture_windows(linked.trace.launches), _graph_calls(linked.trace.launches))
    return Report(
        trace=sel.trace,
        metric=effective_metric,
        level=level,
        taxonomy=tax.name,
        taxonomy_version=tax.version,
        categories=cats,
        classes=class_table(cats),
        ops=op_table(linked.ops, acts, None if sel.engine else _call_cpu(linked, sel.window),
                     "cpu" if effective_metric == "cpu" else "gpu"),
        # the models hold text (the loader's categorical codes stay in the pipeline: schema.TEXT); the
        # per-activity rows are cast when read (Report.kernels)
        kernel_rows=acts.select([c for c in KERNEL_COLUMNS if c in acts.columns]),
        kernel_summary=as_text(kernel_summary(acts)),
        steps=step_table(acts, sel.kept_steps, sel.step_times),  # the kept steps only
        gpu_time_ns=int(acts["dur_ns"].sum() or 0),
        gpu_activities=acts.height,
        cpu_time_ns=cpu_total,
        total_gpu_time_in_file_ns=sel.file_gpu_time_ns,
        total_activities_in_file=sel.file_activities,
        step_marker=sel.marker,
        steps_skipped=sel.steps_skipped,
        drop_unlinked=sel.drop_unlinked,
        attribution={k: int(v) for k, v in attribution.items()},
        metadata=sel.metadata,
        warnings=sel.warnings + metric_warnings,
        calls=linked.ops,
        evidence=evidence_time(acts),
        category_names=tax.categories,
        engine=engine_view(acts, tax, sel.source_format) if sel.engine else None,
        phases=phases,
        phase_engine=phase_engine,
    )


def _graph_calls(launches: pl.DataFrame) -> pl.DataFrame | None:
    """The calls that replay a CUDA/HIP graph (``pid, tid, ts_ns``): a loop of replays' iterations."""
    if "graph_launch" not in launches.columns:
        return None
    return launches.filter(pl.col("graph_launch").fill_null(False)).select("pid", "tid", "ts_ns")


def _call_cpu(linked, window: tuple) -> pl.DataFrame:
    """Each op call's CPU and self CPU time (metrics/op_cpu.py), the calls inside ``window`` only."""
    calls = call_cpu_times(linked.ops, linked.trace.launches, linked.launch_ops, linked.trace.profiler_overhead)
    if window[0] is None:
        return calls
    return calls.join(in_window(linked.ops, *window), on="op_id", how="semi")


def _paper_table(cpu_cats: pl.DataFrame, gpu_cats: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    both = pl.concat([
        cpu_cats.select("category", pl.col("time_ns").alias("cpu_time_ns"), pl.lit(0, pl.Int64).alias("gpu_time_ns"),
                        pl.lit(0, pl.Int64).alias("activities")),
        gpu_cats.select("category", pl.lit(0, pl.Int64).alias("cpu_time_ns"), pl.col("time_ns").alias("gpu_time_ns"),
                        "activities"),
    ]).group_by("category").agg(pl.all().sum())
    both = both.with_columns((pl.col("cpu_time_ns") + pl.col("gpu_time_ns")).alias("time_ns"))
    total = both["time_ns"].sum()
    both = both.with_columns(
        pl.col("category").replace_strict(tax.classes, default="unclassified", return_dtype=pl.Utf8).alias("class"),
        (pl.col("time_ns") / total if total else pl.lit(0.0)).alias("share"))
    return both.select("category", "class", "time_ns", "activities", "share", "cpu_time_ns", "gpu_time_ns") \
        .sort(["time_ns", "category"], descending=[True, False])
