"""The selection stage: which GPU activities, steps and CPU window an analysis reads.

Every analysis of a trace (the breakdown ``measure`` turns into a :class:`Report`, ``launch``,
``flops``, ``latency``, ``compare``, ``check``) starts from the same choice: the steps (a marker
named, the format's declared marker, ``ProfilerStep#N``, a serving engine's iterations, or guessed)
and the thread each ran on, the activities kept (``drop_unlinked``, the first ``skip_steps`` steps
left out), the CPU window of the kept steps, and
the warnings a reader must see about that choice. :func:`select` is a function of what it reads (the
trace, its linked op tree, the classified activities, the taxonomy and the options): it calls nothing
back, and the :class:`~nongemm_trace.pipeline.analysis.Analysis` keeps its result per option set, so
an analysis that needs no breakdown never pays for one, and every analysis reads the same activities
as ``analyze``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl

from ..core.frames import int_scalar
from ..core.trace import Anomaly
from ..devices.identity import identify
from ..errors import OptionError
from ..load.formats import format_of
from ..metrics.breakdown import evidence_time
from ..metrics.period import step_times
from ..metrics.steps import assign_steps, find_steps, guessed_steps_hold_work, step_ranges
from ..vocabulary import METRICS

if TYPE_CHECKING:  # pragma: no cover
    from ..classify.taxonomy import Taxonomy
    from ..core.trace import Trace
    from ..link import Linked
    from .options import Options

#: above this share of GPU time on generic words or no rule at all, the selection warns
WEAK_EVIDENCE_SHARE = 0.05

#: the per-activity columns a breakdown report keeps (``Report.kernels``), in this order
KERNEL_COLUMNS = [
    "activity_id", "name", "kind", "category", "class", "dur_ns", "ts_ns", "device", "stream", "correlation",
    "op", "launch_op", "top_op", "module", "launch_op_id", "top_op_id", "attribution", "rule", "evidence", "fused_ops",
    "launch_id",
    "launch_name", "launch_ts_ns", "launch_dur_ns", "step",
    # a deployment stack's evidence (TensorRT layers, ONNX Runtime nodes)
    "layer_type", "origin", "onnx_ops", "onnx_nodes", "origin_nodes", "provider", "median_ns",
]

_DEVICE_KEYS = ("name", "computeMajor", "computeMinor", "totalGlobalMem", "numSms")
_TRACE_KEYS = ("schemaVersion", "distributedInfo", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
               "hip_runtime_version", "hip_driver_version", "roctracer_version", "record_shapes", "with_stack",
               "with_modules", "with_flops", "profile_memory", "trace_id", "displayTimeUnit", "baseTimeNanoseconds",
               "nongemm_run", "nsys_version", "time_basis", "tensorrt", "onnxruntime")


@dataclass
class Selection:
    """What every analysis of one trace under one option set reads.

    ``activities``: the kept GPU activities, classified at ``level``, each with its ``step``;
    ``steps``: every step found (``step, name, ts_ns, end_ns``), ``kept_steps`` those not skipped;
    ``window``: the CPU window ``(start_ns, end_ns)`` of the kept steps (``(None, None)``: the whole
    trace); ``marker``: the step range's name (None: no steps); ``warnings``: the trace's, the
    linker's and the selection's own. ``trace`` is the trace's path and ``taxonomy`` its taxonomy's
    name (as a report names them); ``linked`` (the op calls: ``linked.ops``) and ``tax`` are the
    analysis's."""

    trace: str
    taxonomy: str
    level: str
    activities: pl.DataFrame
    steps: pl.DataFrame
    window: tuple[int | None, int | None]
    marker: str | None
    steps_skipped: int
    drop_unlinked: bool
    warnings: list[Anomaly]
    #: GPU time and activity count of the whole file, before anything was left out
    file_gpu_time_ns: int
    file_activities: int
    #: the activities are engine layers or ONNX nodes (a format with no host timeline)
    engine: bool
    source_format: str
    #: what the activity times measure (``gpu``; a deployment stack's ``layer`` or ``node`` time)
    time_basis: str
    metadata: dict[str, Any]
    linked: Linked = field(repr=False)
    tax: Taxonomy = field(repr=False)
    #: every step's period and queueing latency (``step, start, end, wall, latency``, ns:
    #: :mod:`nongemm_trace.metrics.period`); None for a profile with no host timeline
    step_times: pl.DataFrame | None = field(default=None, repr=False)
    #: the trace's launch calls (the host timeline the steps' threads are found on)
    launches: pl.DataFrame | None = field(default=None, repr=False)

    @cached_property
    def step_threads(self) -> tuple[pl.DataFrame, list[Anomaly]]:
        """Each step's range on the thread that recorded it (``step, name, pid, tid, ts, end``; with no
        steps, the whole trace on the thread that launched most work), and the warning that choice adds:
        what latency replays (:func:`~nongemm_trace.metrics.steps.step_ranges`), worked out once."""
        launches = self.launches if self.launches is not None else pl.DataFrame(
            schema={"pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64, "end_ns": pl.Int64})
        ranges, warning = step_ranges(self.linked.ops, launches, self.marker)
        return ranges, [] if warning is None else [warning]

    @property
    def kept_steps(self) -> pl.DataFrame:
        return self.steps.filter(pl.col("step") >= self.steps_skipped)

    def measured_as(self, metric: str) -> tuple[str, list[Anomaly]]:
        """The metric a measure under ``metric`` reports and the warning it adds: a profile's own time
        basis (layer, node), or the CPU metric where the trace has no GPU activity at all."""
        if self.engine:
            return self.time_basis, []
        if metric == "gpu" and self.activities.height == 0 and self.linked.ops.height:
            return "cpu", [Anomaly("no_gpu_activities", 1,
                                   f"the trace has no GPU activities: reporting the cpu metric ({METRICS['cpu']})")]
        return metric, []

    def warnings_as(self, metric: str) -> list[Anomaly]:
        """The warnings of an analysis under ``metric``: the selection's, then the metric's."""
        return self.warnings + self.measured_as(metric)[1]


def select(path: Any, tax: Taxonomy, trace: Trace, linked: Linked, acts: pl.DataFrame, opts: Options) -> Selection:
    """The selection of the trace at ``path`` (its tables ``trace``, its op tree ``linked`` and its
    activities ``acts`` classified at ``opts.level`` by ``tax``) under resolved options ``opts`` (the
    metric is not read)."""
    level = opts.level
    assert level is not None  # resolved
    drop_unlinked, step_marker, skip_steps = opts.drop_unlinked, opts.step_marker, opts.skip_steps
    fmt = format_of(trace)
    engine = not fmt.host_timeline
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

    file_total, file_count = int(acts["dur_ns"].sum() or 0), acts.height
    # every step's period, from every activity (those skipped or dropped below set the boundaries too)
    periods = step_times(acts, steps) if not engine else None
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
                                f"{graph} GPU activities were replayed from CUDA graphs: no per-op link, "
                                "classified by kernel name"))
    if drop_unlinked:
        acts = acts.filter(pl.col("attribution") != "none")
    window: tuple[int | None, int | None] = (None, None)
    if skip_steps:
        acts, window = _skip(acts, steps, skip_steps, path, warnings)
    warnings += _content_warnings(acts)
    return Selection(str(path), tax.name, level, acts, steps, window, used_marker, skip_steps, drop_unlinked,
                     warnings, file_total, file_count, engine, fmt.name,
                     str(trace.metadata.get("time_basis") or fmt.time_basis),
                     _metadata(trace.metadata),
                     linked, tax, periods, None if engine else trace.launches)


def _skip(acts: pl.DataFrame, steps: pl.DataFrame, skip_steps: int, path: Any,
          warnings: list[Anomaly]) -> tuple[pl.DataFrame, tuple[int | None, int | None]]:
    """The activities of the steps after the first ``skip_steps`` and the CPU window of those steps."""
    if steps.height == 0:
        raise OptionError(path, "skip_steps given but the trace has no steps (use step_marker NAME)",
                          "skip_steps", "step_marker")
    if skip_steps >= steps.height:
        raise OptionError(path, f"skip_steps {skip_steps} leaves nothing: the trace has {steps.height} steps",
                          "skip_steps")
    outside = acts.filter(pl.col("step").is_null() | (pl.col("step") < skip_steps))
    warnings.append(Anomaly(
        "steps_skipped", outside.height,
        f"{outside.height:,} GPU activities ({outside['dur_ns'].sum() / 1000:,.1f} us) in the first "
        f"{'step' if skip_steps == 1 else f'{skip_steps:,} steps'} or outside every step were excluded "
        f"(--skip-steps {skip_steps})"))
    keep = steps.filter(pl.col("step") >= skip_steps)
    window = (int_scalar(keep["ts_ns"].min()), int_scalar(keep["end_ns"].max()))
    return acts.filter(pl.col("step") >= skip_steps), window


def _content_warnings(acts: pl.DataFrame) -> list[Anomaly]:
    """What the kept activities hold that a reader of any view must know: host<->device copies
    outside the GEMM/non-GEMM shares, and time classified on weak evidence."""
    out = []
    total = int(acts["dur_ns"].sum() or 0)
    moved = acts.filter(pl.col("rule") == "transfer")
    if moved.height and total:  # their own class: say so, they leave the GEMM/non-GEMM shares
        out.append(Anomaly(
            "host_device_transfers", moved.height,
            f"{moved.height} host<->device memcpys ({moved['dur_ns'].sum() / 1000:,.1f} us, "
            f"{moved['dur_ns'].sum() / total:.1%} of GPU time) are in class transfer, outside the "
            f"GEMM and non-GEMM shares (docs/taxonomy.md)"))
    evidence = evidence_time(acts)
    weak = evidence["generic"] + evidence["none"]
    if total and weak > WEAK_EVIDENCE_SHARE * total:
        out.append(Anomaly(
            "weak_evidence", 1,
            f"{weak / total:.1%} of the GPU time ({weak / 1000:,.1f} us) is classified by generic name words or "
            f"not at all: run 'nongemm-trace explain TRACE --weak' for the kernels and rules to add"))
    return out


def _metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """The trace's device (the first one's identity, with the count; a part told by its properties
    where the name is empty or generic, ``name_from``) and its run facts a report keeps."""
    devices = meta.get("deviceProperties")
    dev = None
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        dev = {"count": len(devices), **{k: devices[0].get(k) for k in _DEVICE_KEYS if k in devices[0]}}
        part = identify(devices[0])  # an empty or generic name: the part its properties name
        if part:
            dev.update(name=part, name_from="properties")
    keep = {k: meta[k] for k in _TRACE_KEYS if k in meta and isinstance(meta[k], (str, int, float, bool, dict, list))}
    return {"device": dev, "devices": devices if isinstance(devices, list) else [], "trace": keep}
