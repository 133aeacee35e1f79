"""``latency`` and ``whatif``: where each step's wall time goes along its critical path, and
what it becomes when durations change.

Built on one :class:`~nongemm_trace.pipeline.analysis.Analysis` (same loading, linking, classification
and steps as ``analyze``): :mod:`.graph` builds the dependency graph as tables,
:mod:`.replay` replays it (the measured timeline is the replay with every factor 1),
:mod:`.path` walks each step's critical path and attributes it, :mod:`.whatif` changes the
durations. Definitions: docs/latency.md.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import polars as pl

from ...core.deprecation import REMOVAL, deprecated
from ...core.trace import Anomaly
from ...errors import TraceError
from ...load.formats import FORMATS, format_of
from ...models.latency import LatencyReport, WhatIfReport
from ...pipeline.analysis import Analysis, open_analysis
from ...pipeline.context import Context
from ...pipeline.options import AnalysisOptions, keywords_of
from ...pipeline.selection import Selection
from ..changes import WhatIfParams
from .graph import Graph, build
from .overlap import overlapping_steps
from .path import attribute
from .replay import measured_timeline
from .unprofiled import attached_estimate, attached_ratio, latency_unprofiled, without_profiler

__all__ = ["latency_analysis", "whatif_analysis", "latency_of", "whatif_of", "LatencyReport", "WhatIfReport",
           "graph_of", "graph_in", "measured_timeline"]

#: the memo key of what a trace keeps per (level, marker): the graph is the expensive part, and the same
#: for every what-if
_MEMO_KEY = "latency_graphs"


def _refuse_without_host_timeline(ctx: Context | Analysis) -> None:
    fmt = format_of(ctx.trace())
    if not fmt.host_timeline:
        raise TraceError(ctx.path, f"this {fmt.noun} holds times per {fmt.time_basis} and no host "
                                   f"timeline: latency and whatif need a trace of the run with one "
                                   f"({' or '.join(f.noun for f in FORMATS if f.host_timeline)})")


def graph_in(sel: Selection, ctx: Context) -> tuple[Graph, list[Anomaly]]:
    """The dependency graph of the selection's trace and level, built once per trace, level and step
    marker (kept in the context's memo), and the warnings of this selection (its own: a selection that
    skips steps or drops activities says so, whichever built the graph)."""
    _refuse_without_host_timeline(ctx)
    key = (sel.level, sel.marker)
    cache = ctx.memo.setdefault(_MEMO_KEY, {})
    ranges, chosen = sel.step_threads
    if key not in cache:
        trace = ctx.trace()
        cache[key] = build(ctx.linked().ops, trace.launches, ctx.activities(sel.level), ranges,
                           list(ctx.taxonomy.semantics.generic_categories), sel.level, trace.cuda_syncs)
    return cache[key], sel.warnings_as("gpu") + chosen


def graph_of(source: str | Path | Analysis, options: AnalysisOptions | None = None,
             **old: Any) -> tuple[Analysis, Graph, Selection, list[Anomaly]]:
    """The analysis, its dependency graph, its selection (steps, names, warnings) and the warnings, under
    ``options`` (``old``: its fields as keywords, as it took them before: deprecated)."""
    analysis, typed = open_analysis(source, keywords_of(options, old, "graph_of"), metric="gpu")
    return _graph(analysis, typed)


def _graph(analysis: Analysis, typed: AnalysisOptions) -> tuple[Analysis, Graph, Selection, list[Anomaly]]:
    typed = replace(typed, drop_unlinked=False, metric=None)  # the timeline needs every activity
    _refuse_without_host_timeline(analysis)
    sel = analysis.selection(typed)
    g, warnings = graph_in(sel, analysis.context(None, typed))
    return analysis, g, sel, warnings


def _kept(steps: pl.DataFrame, skip: int) -> pl.DataFrame:
    return steps.filter(pl.col("step") >= skip) if skip else steps


def latency_analysis(source: str | Path | Analysis, *, unprofiled_step_us: float | None = None,
                     attached: bool = False, options: AnalysisOptions | None = None, **old: Any) -> LatencyReport:
    """Per-step latency attribution of one trace (a path or an :class:`Analysis`), as profiled and
    without the profiler (``unprofiled_step_us``: the run's measured step time without it, else the
    trace's ``nongemm_unprofiled`` metadata, else the overhead model alone; ``attached``: the run in the
    process after its profiled window, the profiler still attached, not one it never touched). ``options``: the
    :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (taxonomy, level, step_marker, skip_steps);
    ``old``: its fields as keywords, as it took them before (deprecated)."""
    analysis, typed = open_analysis(source, keywords_of(options, old, "latency_analysis"), metric="gpu")
    analysis, _, sel, _ = _graph(analysis, typed)
    return latency_of(sel, analysis.context(), unprofiled_step_us, attached)


def latency_of(sel: Selection, ctx: Context, unprofiled_step_us: float | None = None,
               attached: bool = False) -> LatencyReport:
    """:func:`latency_analysis` of a selection (the analysis's ``run``)."""
    g, warnings = graph_in(sel, ctx)
    tl = measured_timeline(g)
    steps = _kept(tl.steps, sel.steps_skipped)
    tl.steps = steps
    att = attribute(tl, ctx.taxonomy.classes, g.queue_gap_ns)
    overlap = overlapping_steps(tl.steps, "measured")
    del tl  # not read again: its tables freed before the replays without the profiler
    if overlap is not None:
        warnings.append(overlap)
    estimate = None if attached else attached_estimate(ctx, g, steps)
    un = without_profiler(ctx, g, steps, step_us=unprofiled_step_us, path=sel.trace, attached=attached)
    if un.note:
        warnings.append(Anomaly("unprofiled_calibration", 1, un.note))
    ratio = attached_ratio(ctx, g, steps, un, estimate)
    return LatencyReport(str(sel.trace), sel.taxonomy, sel.level, sel.marker,
                         steps.select("step", "name", "ts", "end", "cpu_end", "gpu_end", "start", "wall", "latency"),
                         att,
                         g.launch_latency_ns, g.queue_gap_ns, warnings,
                         latency_unprofiled(un, steps, att, g.queue_gap_ns, ratio))


def whatif_analysis(source: str | Path | Analysis, changes: WhatIfParams | None = None, *,
                    options: AnalysisOptions | None = None, **old: Any) -> WhatIfReport:
    """Replay one trace with the ``changes`` of :class:`~nongemm_trace.analyses.changes.WhatIfParams`:
    ``scale`` (``("GEMM=0.5", "kernel:nccl=2")`` or a dict selector -> factor; a factor multiplies
    durations), ``cpu_scale`` (host work that many times as long), ``launch_us`` (every launch call costs
    that), ``graphs`` (each step's launches replayed as CUDA graphs), ``autocast`` (``"bf16"``/``"fp16"``:
    the casts and host work ``torch.autocast`` adds, :mod:`.autocast`); each answered for the profiled run
    and for the run without the profiler (``unprofiled_step_us`` as :func:`latency_analysis`); ``options``
    as :func:`latency_analysis`. ``old``: the form it took before (the scales in ``changes``' place, each
    other change and each option a keyword), which still works until
    :data:`~nongemm_trace.core.deprecation.REMOVAL` with one deprecation warning."""
    from .whatif import parse_scales, whatif_params

    known = {f.name for f in fields(WhatIfParams)}
    legacy = bool(old) or not (changes is None or isinstance(changes, WhatIfParams))
    if "scales" in old:  # the former name of the second parameter, given as a keyword
        if changes is not None:
            raise TypeError("whatif_analysis: scales given twice (as changes and as scales=)")
        changes = old.pop("scales")
    given = keywords_of(options, {k: v for k, v in old.items() if k not in known}, "whatif_analysis", warn=False)
    changes = whatif_params(changes, {k: v for k, v in old.items() if k in known}, "whatif_analysis", warn=False)
    if legacy:
        deprecated("whatif_analysis(source, scales, cpu_scale=..., level=..., ...)",
                   "whatif_analysis(source, WhatIfParams(scale=..., cpu_scale=...), "
                   "options=AnalysisOptions(level=...))", REMOVAL)
    analysis, typed = open_analysis(source, given, metric="gpu")
    parse_scales(changes.scale, analysis.taxonomy.categories, analysis.path)  # refused before the trace is read
    analysis, _, sel, _ = _graph(analysis, typed)
    return whatif_of(sel, analysis.context(), changes)


def whatif_of(sel: Selection, ctx: Context, changes: WhatIfParams | None = None, **old: Any) -> WhatIfReport:
    """:func:`whatif_analysis` of a selection (the analysis's ``run``): ``changes``, the typed
    :class:`~nongemm_trace.analyses.changes.WhatIfParams` (``old``: the scales-and-keywords form it took
    before, with a deprecation warning: :func:`.whatif.whatif_params`)."""
    from .whatif import predict, whatif_params

    changes = whatif_params(changes, old, "whatif_of")
    g, warnings = graph_in(sel, ctx)
    return predict(ctx, g, sel, warnings, changes)
