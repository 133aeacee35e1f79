"""The measure stage: a classified trace and the report options to a :class:`Report`.

Steps, the activities kept (unlinked, skipped steps), the metric's fallback (no GPU
activities: the CPU metric), the CPU window of skipped steps, the paper's CPU + GPU
metric and the warnings a reader must see; every number reads the analysis' tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from .errors import OptionError
from .classify.taxonomy import Taxonomy
from .metrics.breakdown import (category_table, class_table, cpu_op_times, evidence_time, kernel_summary, op_table,
                                step_table)
from .metrics.engines import engine_view
from .metrics.op_cpu import call_cpu_times, in_window
from .metrics.steps import assign_steps, find_steps, guessed_steps_hold_work
from .models.report import Report
from .trace import Anomaly

if TYPE_CHECKING:  # pragma: no cover
    from .analysis import Analysis, Options

#: above this share of GPU time on generic words or no rule at all, the report warns
WEAK_EVIDENCE_SHARE = 0.05

#: columns of ``Report.kernels`` (one row per GPU activity), in this order
KERNEL_COLUMNS = [
    "activity_id", "name", "kind", "category", "class", "dur_ns", "ts_ns", "device", "stream", "correlation",
    "op", "launch_op", "top_op", "module", "launch_op_id", "top_op_id", "attribution", "rule", "evidence", "fused_ops", "launch_id",
    "launch_name", "launch_ts_ns", "launch_dur_ns", "step",
    # a deployment stack's evidence (TensorRT layers, ONNX Runtime nodes)
    "layer_type", "origin", "onnx_ops", "onnx_nodes", "origin_nodes", "provider", "median_ns",
]

#: formats whose activities are engine layers or ONNX nodes, with no host launch calls
ENGINE_FORMATS = ("tensorrt", "onnxruntime")

_DEVICE_KEYS = ("name", "computeMajor", "computeMinor", "totalGlobalMem", "numSms")


def measure(analysis: Analysis, opts: Options) -> Report:
    """The report of ``analysis`` under resolved options ``opts``."""
    tax = analysis.taxonomy
    path = analysis.path
    metric, level = opts.metric, opts.level
    drop_unlinked, step_marker, skip_steps = opts.drop_unlinked, opts.step_marker, opts.skip_steps
    acts = analysis.activities(level)
    trace, linked = analysis.trace(), analysis.linked()
    engine = trace.source_format in ENGINE_FORMATS
    warnings_extra = []
    if level == "module" and acts["module"].null_count() == acts.height and acts.height:
        warnings_extra.append(Anomaly("no_modules", 1, "no GPU activity was launched inside an nn.Module a rule names "
                                      "(record with with_stack=True / with_modules=True); module level = launch level"))
    if acts.height and linked.ops.height == 0 and not engine:
        warnings_extra.append(Anomaly(
            "no_cpu_ops", 1, "the trace has GPU activities but no CPU operator events (a GPU-only capture?): "
                             "every activity is classified by its kernel name alone"))
    # a format whose runs are named ranges (ONNX Runtime's model_run) declares its step marker
    declared = step_marker or trace.metadata.get("step_marker")
    steps, used_marker = find_steps(linked.ops, declared)
    if step_marker and steps.height == 0:
        raise OptionError(path, f"no ranges named '{step_marker}' to use as steps", "step_marker")
    acts = assign_steps(acts, steps)
    not_steps = None if declared else guessed_steps_hold_work(acts, used_marker)
    if not_steps:
        warnings_extra.append(Anomaly("steps_not_found", 1, not_steps))
        steps, used_marker = steps.head(0), None
        acts = acts.with_columns(pl.lit(None, pl.Int64).alias("step"))

    file_total = int(acts["dur_ns"].sum() or 0)
    file_count = acts.height
    warnings = list(trace.anomalies) + list(linked.anomalies) + warnings_extra
    unlinked = acts.filter(pl.col("attribution") == "none")
    if unlinked.height and not engine:
        verb = "excluded (--drop-unlinked)" if drop_unlinked else "classified by kernel name"
        warnings.append(Anomaly(
            "no_launch_call", unlinked.height,
            f"{unlinked.height} GPU activities ({unlinked['dur_ns'].sum() / 1000:,.1f} us) have no launch call in the "
            f"file (launched before profiling began?); {verb}"))
    graph = acts.filter(pl.col("attribution") == "graph_launch").height
    if graph:
        warnings.append(Anomaly("graph_replay", graph,
                                f"{graph} GPU activities were replayed from CUDA graphs: no per-op link, classified by kernel name"))
    if drop_unlinked:
        acts = acts.filter(pl.col("attribution") != "none")

    if skip_steps:
        if steps.height == 0:
            raise OptionError(path, "skip_steps given but the trace has no steps (use step_marker NAME)",
                              "skip_steps", "step_marker")
        if skip_steps >= steps.height:
            raise OptionError(path, f"skip_steps {skip_steps} leaves nothing: the trace has {steps.height} steps",
                              "skip_steps")
        outside = acts.filter(pl.col("step").is_null() | (pl.col("step") < skip_steps))
        warnings.append(Anomaly(
            "steps_skipped", outside.height,
            f"{outside.height} GPU activities ({outside['dur_ns'].sum() / 1000:,.1f} us) in the first {skip_steps} "
            f"steps or outside every step were excluded (--skip-steps {skip_steps})"))
        acts = acts.filter(pl.col("step") >= skip_steps)

    gpu_cats = category_table(acts, tax)
    moved = acts.filter(pl.col("rule") == "transfer")
    if moved.height and acts["dur_ns"].sum():  # their own class: say so, they leave the GEMM/non-GEMM shares
        warnings.append(Anomaly(
            "host_device_transfers", moved.height,
            f"{moved.height} host<->device memcpys ({moved['dur_ns'].sum() / 1000:,.1f} us, "
            f"{moved['dur_ns'].sum() / acts['dur_ns'].sum():.1%} of GPU time) are in class transfer, outside the "
            f"GEMM and non-GEMM shares (docs/taxonomy.md)"))
    cpu_total = None
    effective_metric = metric
    if engine:  # a profile's own time: layer time (TensorRT), node or kernel time (ONNX Runtime)
        effective_metric = str(trace.metadata.get("time_basis") or "gpu")
    elif metric == "gpu" and acts.height == 0 and linked.ops.height:
        effective_metric = "cpu"
        warnings.append(Anomaly("no_gpu_activities", 1,
                                "the trace has no GPU activities: reporting the cpu metric (operator CPU time)"))
    window = (None, None)
    if skip_steps:  # the CPU window of the kept steps
        keep = steps.filter(pl.col("step") >= skip_steps)
        window = (keep["ts_ns"].min(), keep["end_ns"].max())
    if effective_metric in ("cpu", "paper") and not engine:
        cpu_rows = cpu_op_times(linked.ops, "top" if level == "top" else "launch", tax.semantics.generic_categories)
        if skip_steps:
            cpu_rows = cpu_rows.join(in_window(linked.ops, *window), on="op_id", how="semi")
        cpu_cats = category_table(cpu_rows.rename({"cpu_ns": "dur_ns"}), tax)
        cpu_total = int(cpu_cats["time_ns"].sum())
        if effective_metric == "cpu":
            cats = cpu_cats.join(gpu_cats.select("category", pl.col("time_ns").alias("gpu_time_ns")), on="category",
                                 how="left").with_columns(pl.col("gpu_time_ns").fill_null(0))
        else:  # paper: CPU time of the ops + GPU time of their activities, per category
            cats = _paper_table(cpu_cats, gpu_cats, tax)
    else:
        cats = gpu_cats

    kernels = acts.select([c for c in KERNEL_COLUMNS if c in acts.columns])
    gpu_ns = int(acts["dur_ns"].sum() or 0)
    evidence = evidence_time(acts)
    weak = evidence["generic"] + evidence["none"]
    if gpu_ns and weak > WEAK_EVIDENCE_SHARE * gpu_ns:
        warnings.append(Anomaly(
            "weak_evidence", 1,
            f"{weak / gpu_ns:.1%} of the GPU time ({weak / 1000:,.1f} us) is classified by generic name words or "
            f"not at all: run 'nongemm-trace explain TRACE --weak' for the kernels and rules to add"))
    attribution = dict(acts.group_by("attribution").len().iter_rows()) if acts.height else {}
    return Report(
        trace=str(path),
        metric=effective_metric,
        level=level,
        taxonomy=tax.name,
        taxonomy_version=tax.version,
        categories=cats,
        classes=class_table(cats),
        ops=op_table(linked.ops, acts, None if engine else _call_cpu(linked, window),
                     "cpu" if effective_metric == "cpu" else "gpu"),
        kernels=kernels,
        kernel_summary=kernel_summary(acts),
        steps=step_table(acts, steps.filter(pl.col("step") >= skip_steps)),  # the kept steps only
        gpu_time_ns=gpu_ns,
        gpu_activities=acts.height,
        cpu_time_ns=cpu_total,
        total_gpu_time_in_file_ns=file_total,
        total_activities_in_file=file_count,
        step_marker=used_marker,
        steps_skipped=skip_steps,
        drop_unlinked=drop_unlinked,
        attribution={k: int(v) for k, v in attribution.items()},
        metadata=_metadata(trace.metadata),
        warnings=warnings,
        calls=linked.ops,
        evidence=evidence,
        category_names=tax.categories,
        engine=engine_view(acts, tax, trace.source_format) if engine else None,
    )


def _call_cpu(linked, window: tuple) -> pl.DataFrame:
    """Each op call's CPU and self CPU time (metrics/op_cpu.py), the calls inside ``window`` only."""
    calls = call_cpu_times(linked.ops, linked.trace.launches, linked.launch_ops)
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


def _metadata(meta: dict[str, Any]) -> dict[str, Any]:
    devices = meta.get("deviceProperties")
    dev = None
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        dev = {"count": len(devices), **{k: devices[0].get(k) for k in _DEVICE_KEYS if k in devices[0]}}
    keep = {}
    for k in ("schemaVersion", "distributedInfo", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
              "hip_runtime_version", "hip_driver_version", "roctracer_version", "record_shapes", "with_stack",
              "with_modules", "with_flops", "profile_memory", "trace_id", "displayTimeUnit", "baseTimeNanoseconds",
              "nongemm_run", "nsys_version", "time_basis", "tensorrt", "onnxruntime"):
        if k in meta and isinstance(meta[k], (str, int, float, bool, dict, list)):
            keep[k] = meta[k]
    return {"device": dev, "devices": devices if isinstance(devices, list) else [], "trace": keep}
