"""``latency`` and ``whatif``: where each step's wall time goes along its critical path, and
what it becomes when durations change.

Built on one :class:`~nongemm_trace.pipeline.analysis.Analysis` (same loading, linking, classification
and steps as ``analyze``): :mod:`.graph` builds the dependency graph as tables,
:mod:`.replay` replays it (the measured timeline is the replay with every factor 1),
:mod:`.path` walks each step's critical path and attributes it, :mod:`.whatif` changes the
durations. Definitions: docs/latency.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..core.frames import int_scalar
from ..core.trace import Anomaly
from ..errors import TraceError
from ..load.formats import FORMATS, format_of
from ..metrics.steps import find_steps
from ..models.latency import LatencyReport, WhatIfReport
from ..pipeline.analysis import Analysis, open_analysis
from ..pipeline.selection import Selection
from .graph import Graph, build
from .overlap import overlapping_steps
from .path import attribute
from .replay import measured_timeline
from .unprofiled import latency_unprofiled, without_profiler

__all__ = ["latency_analysis", "whatif_analysis", "LatencyReport", "WhatIfReport", "graph_of", "measured_timeline"]

#: what the analysis keeps per options (the graph is the expensive part, and the same for every what-if)
_CACHE_ATTR = "_latency_graphs"


def _step_ranges(analysis: Analysis, marker: str | None, warnings: list[Anomaly]) -> tuple[pl.DataFrame, str | None]:
    """``step, name, pid, tid, ts, end``: the steps ``analyze`` uses; with none, the whole trace on the
    thread that launched most work (one step named ``(whole trace)``)."""
    ops = analysis.linked().ops
    steps, used = find_steps(ops, marker) if marker else (pl.DataFrame(), None)
    if steps.height:
        tids = ops.filter(pl.col("name").is_in(steps["name"].unique().implode())).select(
            pl.col("name").cast(pl.String), "pid", "tid", "ts_ns", "end_ns").unique(["name", "pid", "ts_ns", "end_ns"])
        steps = steps.join(tids, on=["name", "pid", "ts_ns", "end_ns"], how="left")
        return steps.select("step", "name", "pid", "tid", pl.col("ts_ns").alias("ts"),
                            pl.col("end_ns").alias("end")), used
    trace = analysis.trace()
    host = pl.concat([ops.select("pid", "tid", "ts_ns", "end_ns"),
                      trace.launches.select("pid", "tid", "ts_ns", "end_ns")])
    if host.height == 0:
        warnings.append(Anomaly("no_steps", 1, "the trace has no host events (ops or runtime calls): there is no step "
                                               "to measure latency over"))
        return pl.DataFrame(schema={"step": pl.Int64, "name": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8,
                                    "ts": pl.Int64, "end": pl.Int64}), None
    busiest = trace.launches.group_by(["pid", "tid"]).len().sort("len", descending=True).head(1)
    if busiest.height == 0:
        busiest = ops.group_by(["pid", "tid"]).len().sort("len", descending=True).head(1)
    mine = host.join(busiest.select("pid", "tid"), on=["pid", "tid"])
    warnings.append(Anomaly("no_steps", 1, "the trace has no steps: the whole trace is one step, on the thread "
                                           "that launched the most work (name the step range with step_marker)"))
    return pl.DataFrame({"step": [0], "name": ["(whole trace)"], "pid": busiest["pid"], "tid": busiest["tid"],
                         "ts": [int_scalar(mine["ts_ns"].min())], "end": [int_scalar(mine["end_ns"].max())]}), None


def graph_of(source: str | Path | Analysis, **options: Any) -> tuple[Analysis, Graph, Selection, list[Anomaly]]:
    """The analysis, its dependency graph, its selection (steps, names, warnings) and the warnings."""
    analysis, report_opts = open_analysis(source, options, metric="gpu")
    report_opts.pop("drop_unlinked", None)  # the timeline needs every activity
    fmt = format_of(analysis.trace())
    if not fmt.host_timeline:
        raise TraceError(analysis.path, f"this {fmt.noun} holds times per {fmt.time_basis} and no host "
                                        f"timeline: latency and whatif need a trace of the run with one "
                                        f"({' or '.join(f.noun for f in FORMATS if f.host_timeline)})")
    sel = analysis.selection(**report_opts)
    key = (sel.level, sel.marker)
    cache = analysis.__dict__.setdefault(_CACHE_ATTR, {})
    if key not in cache:
        warnings = sel.warnings_as(report_opts.get("metric") or "gpu")
        ranges, _ = _step_ranges(analysis, sel.marker, warnings)
        linked, tax = analysis.linked(), analysis.taxonomy
        g = build(linked.ops, analysis.trace().launches, analysis.activities(sel.level),
                  ranges, list(tax.semantics.generic_categories), sel.level, analysis.trace().cuda_syncs)
        cache[key] = (g, warnings)
    g, warnings = cache[key]
    return analysis, g, sel, list(warnings)


def _kept(steps: pl.DataFrame, skip: int) -> pl.DataFrame:
    return steps.filter(pl.col("step") >= skip) if skip else steps


def latency_analysis(source: str | Path | Analysis, *, unprofiled_step_us: float | None = None,
                     **options: Any) -> LatencyReport:
    """Per-step latency attribution of one trace (a path or an :class:`Analysis`), as profiled and
    without the profiler (``unprofiled_step_us``: the run's measured step time without it, else the
    trace's ``nongemm_unprofiled`` metadata, else the overhead model alone). ``options``: those of
    :func:`nongemm_trace.analyze` (taxonomy, level, step_marker, skip_steps)."""
    analysis, g, sel, warnings = graph_of(source, **options)
    tl = measured_timeline(g)
    steps = _kept(tl.steps, sel.steps_skipped)
    tl.steps = steps
    att = attribute(tl, analysis.taxonomy.classes, g.queue_gap_ns)
    overlap = overlapping_steps(tl.steps, "measured")
    if overlap is not None:
        warnings.append(overlap)
    un = without_profiler(analysis, g, steps, step_us=unprofiled_step_us, path=sel.trace)
    if un.note:
        warnings.append(Anomaly("unprofiled_calibration", 1, un.note))
    return LatencyReport(str(sel.trace), sel.taxonomy, sel.level, sel.marker,
                         steps.select("step", "name", "ts", "end", "cpu_end", "gpu_end", "start", "wall", "latency"),
                         att,
                         g.launch_latency_ns, g.queue_gap_ns, warnings,
                         latency_unprofiled(un, steps, att, analysis.taxonomy.classes, g.queue_gap_ns))


def whatif_analysis(source: str | Path | Analysis, scales: list[str] | dict[str, float] | None = None, *,
                    cpu_scale: float = 1.0, launch_us: float | None = None, graphs: bool = False,
                    graph_launch_us: float | None = None, autocast: str | None = None,
                    unprofiled_step_us: float | None = None, **options: Any) -> WhatIfReport:
    """Replay one trace with changed durations: ``scales`` (``["GEMM=0.5", "kernel:nccl=2"]`` or a dict
    selector -> factor; a factor multiplies durations), ``cpu_scale`` (host work that many times as
    long), ``launch_us`` (every launch call costs that), ``graphs`` (each step's launches replayed as
    CUDA graphs), ``autocast`` (``"bf16"``/``"fp16"``: the casts and host work ``torch.autocast``
    adds, :mod:`.autocast`); each answered for the profiled run and for the run without the profiler
    (``unprofiled_step_us`` as :func:`latency_analysis`); ``options`` as :func:`latency_analysis`."""
    from .whatif import parse_scales, predict

    analysis, _ = open_analysis(source, dict(options))
    parse_scales(scales, analysis.taxonomy.categories, analysis.path)  # refused before the trace is read
    analysis, g, sel, warnings = graph_of(analysis, **options)
    return predict(analysis, g, sel, warnings, scales, cpu_scale=cpu_scale, launch_us=launch_us, graphs=graphs,
                   graph_launch_us=graph_launch_us, autocast=autocast, unprofiled_step_us=unprofiled_step_us)
