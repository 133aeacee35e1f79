"""``launch``: launch overhead, idle gaps and communication overlap for one trace.

Built on the analysis's :class:`~nongemm_trace.pipeline.selection.Selection` (the activities and steps
``analyze`` reads; no breakdown is measured) and :mod:`nongemm_trace.metrics.launch` (the definitions). Returns a
:class:`~nongemm_trace.models.LaunchReport`; renderers read it (:mod:`nongemm_trace.report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..core.frames import as_text, int_scalar, number
from ..errors import TraceError
from ..load.formats import format_of
from ..load.graph_capture import capture_windows
from ..metrics.intervals import interval_cover
from ..metrics.launch import (
    BUSY_CLASS_ORDER,
    OPTIONAL_BUSY_CLASSES,
    activity_gaps,
    busy_by_class,
    busy_ns,
    category_overhead,
    exposed_communication,
    timeline_stats,
)
from ..models.latency import CAPTURE_BOUND
from ..models.launch import FIELDS, LaunchReport
from ..models.launch import whole_us as _us
from ..pipeline.analysis import Analysis, open_analysis
from ..pipeline.context import Context
from ..pipeline.options import AnalysisOptions, keywords_of
from ..pipeline.selection import Selection
from ..vocabulary import STEP_TIME

#: the verdict's kind for a trace that records graphs rather than runs them
CAPTURE_KIND = "graph capture"


def launch_analysis(source: str | Path | Analysis, *, short_us: float = 10.0, unprofiled_step_us: float | None = None,
                    attached: bool = False, options: AnalysisOptions | None = None, **old: Any) -> LaunchReport:
    """Launch overhead and idle analysis of one trace (a path or an :class:`Analysis`), with the verdict
    for the run without the profiler (``summary["unprofiled"]``; ``unprofiled_step_us`` as
    :func:`nongemm_trace.latency.latency_analysis`; ``attached``: the loop after its window, the profiler
    still attached, as there). ``options``: the
    :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (taxonomy, level, drop_unlinked, step_marker,
    skip_steps); ``old``: its fields as keywords, as it took them before (deprecated)."""
    analysis, typed = open_analysis(source, keywords_of(options, old, "launch_analysis"), metric="gpu")
    sel = analysis.selection(typed)
    return launch_of(sel, analysis.context(None, typed), short_us, unprofiled_step_us, attached)


def launch_of(sel: Selection, ctx: Context, short_us: float = 10.0,
              unprofiled_step_us: float | None = None, attached: bool = False) -> LaunchReport:
    """:func:`launch_analysis` of a selection (the analysis's ``run``)."""
    path = sel.trace
    short_ns = int(round(short_us * 1000))
    acts = sel.activities.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    warnings = sel.warnings_as("gpu")
    launches = ctx.trace().launches
    windows = capture_windows(launches)
    cover = interval_cover(windows)
    capture = {"captured_launches": int(launches["captured"].sum() or 0) if "captured" in launches.columns else 0,
               "capture_us": _us(cover.select((pl.col("e") - pl.col("s")).sum()).item() if cover.height else 0),
               "capture_windows": windows.height}
    if acts.height == 0:
        empty = pl.DataFrame()
        summary: dict[str, Any] = {f"{f}_us": 0.0 for f in FIELDS} | {
            "activities": 0, "launches": 0, "short_activities": 0, "mean_launch_delay_us": None,
            "exposed_communication_us": 0.0, "overlapped_communication_us": 0.0, "communication_us": 0.0,
            "activities_per_s": None, "idle_share": None, "host_bound_share_of_idle": None,
            "launch_overhead_per_activity_us": None, "launch_call_us": 0.0,
            "busy_by_class_us": dict.fromkeys((c for c in BUSY_CLASS_ORDER if c not in OPTIONAL_BUSY_CLASSES), 0.0),
            "unprofiled": None, "bound": profiled_bound(sel, ctx), "capture_idle_us": 0.0,
            **capture} | _step_summary(sel)
        verdict = "no GPU activities: nothing ran on the device"
        if capture["captured_launches"]:
            verdict = f"{CAPTURE_KIND}: {_captured_words(capture)}; nothing ran on the device"
        return LaunchReport(str(path), sel.taxonomy, sel.level, short_ns, summary, empty, empty, empty, empty, empty,
                            {}, verdict, sel.metadata.get("device"), warnings)

    # the replays first: their per-piece arrays are freed before this report's own tables are made
    un_view = without_profiler_view(sel, ctx, unprofiled_step_us, attached)
    trace_stats = timeline_stats(acts, [], short_ns, cover)
    comm_dev = exposed_communication(acts, ["device"])
    summary = _summary(trace_stats.row(0, named=True), comm_dev)
    summary["busy_by_class_us"] = {k: _us(v) for k, v in busy_by_class(acts).items()}
    summary |= capture

    steps = _grouped(acts.filter(pl.col("step").is_not_null()), ["step"], short_ns, cover)
    devices = _grouped(acts, ["device"], short_ns, cover)
    streams = _grouped(acts, ["device", "stream"], short_ns, cover)
    if steps.height:
        spans = steps["span_ns"]
        summary["step_span_us"] = _spread(spans)
        if sel.step_times is not None:
            steps = steps.join(sel.step_times.select("step", pl.col("wall").alias("step_ns"),
                                                     pl.col("latency").alias("latency_ns")), on="step", how="left")
    summary |= _step_summary(sel)
    cats = category_overhead(acts.with_columns(pl.col("device").fill_null(-1)), cover)
    per_act = _per_activity(acts, cover)
    graphs = _graphs(acts)
    summary["unprofiled"] = un_view
    un = summary["unprofiled"]
    summary["bound"] = None if un is None else un.get("profiled_bound")
    verdict = _verdict(summary, acts, short_ns)
    if un is not None and un["kind"] != verdict.split(":")[0]:
        verdict += f"; {verdict.split(':')[0]} under the profiler, {un['kind']} without it"
    return LaunchReport(str(path), sel.taxonomy, sel.level, short_ns, summary, steps, devices, streams, cats, per_act,
                        graphs, verdict, sel.metadata.get("device"), warnings)


def profiled_bound(sel: Selection, ctx: Context) -> str | None:
    """The measured run's bound on the critical path over the kept steps, as latency reports it
    (``unprofiled.profiled_bound``); None for a format with no host timeline or no steps."""
    from ..models.latency import bound_of
    from .latency.path import bound_times

    found = _measured(sel, ctx)
    if found is None:
        return None
    g, measured = found
    measured.steps = measured.steps.filter(pl.col("step") >= sel.steps_skipped)
    return bound_of(bound_times(measured, g.queue_gap_ns))


def _measured(sel: Selection, ctx: Context) -> tuple[Any, Any] | None:
    """(dependency graph, measured timeline) as latency builds them, or None for a format with no host
    timeline. The graph replays every activity whatever ``drop_unlinked`` kept (it reads the level's
    activities, not the selection's), and the steps, their threads and the skipped count it reads of
    ``sel`` are the same under either choice: so launch's own selection serves, as latency's would."""
    from .latency import graph_in
    from .latency.replay import measured_timeline

    if not format_of(ctx.trace()).host_timeline:
        return None
    try:
        g, _ = graph_in(sel, ctx)
    except TraceError:
        return None
    return g, measured_timeline(g)


def without_profiler_view(sel: Selection, ctx: Context, step_us: float | None,
                          attached: bool = False) -> dict[str, Any] | None:
    """``busy_share`` and ``verdict`` of the run without the profiler (the replay of
    :mod:`.latency.unprofiled`), beside ``profiled_busy_share`` (the measured replay's, same scope: every
    activity, first start to last end); None for a format with no host timeline."""
    from ..models.latency import bound_of
    from .latency.path import bound_times
    from .latency.unprofiled import unprofiled_summary, without_profiler

    found = _measured(sel, ctx)
    if found is None:
        return None
    g, measured = found
    kept = measured.steps.filter(pl.col("step") >= sel.steps_skipped)
    measured.steps = kept
    profiled_bound = bound_of(bound_times(measured, g.queue_gap_ns))
    profiled_busy = busy_share(measured.acts)
    del measured, found  # the measured timeline's tables freed before the replays without the profiler
    un = without_profiler(ctx, g, kept, step_us=step_us, path=sel.trace, attached=attached)
    busy = busy_share(un.timeline.acts)
    if busy is None:
        return None
    un.timeline.steps = un.timeline.steps.filter(pl.col("step").is_in(kept["step"].implode()))
    bound = bound_of(bound_times(un.timeline, g.queue_gap_ns))
    # the kind is the critical path's bound, the word latency reports (the busy share's where it has none)
    kind = (bound if bound in ("host-bound", "device-bound")
            else CAPTURE_KIND if bound == CAPTURE_BOUND else "GPU-bound" if busy >= 0.7 else "idle (not launch-bound)")
    return unprofiled_summary(un) | {
        "busy_share": round(busy, 6), "profiled_busy_share": profiled_busy, "kind": kind,
        "bound": bound, "profiled_bound": profiled_bound,
        "verdict": f"{kind} without the profiler ({un.source}): GPU busy {100 * busy:.0f} % of the span"
                   + (f"; {bound} on the critical path" if bound and bound != kind else "")}


def _step_summary(sel: Any) -> dict[str, Any]:
    """The step figure every command shares, the loop's period (metrics/period.py), over the kept steps."""
    times = sel.step_times
    kept = times.filter(pl.col("step") >= sel.steps_skipped) if times is not None else None
    if kept is None or kept.height == 0:
        return {}
    return {"step_us": _spread(kept["wall"]), "mean_step_us": _us(kept["wall"].mean()), "step_time": STEP_TIME}


def _spread(values: pl.Series) -> dict[str, Any]:
    """min, median, max (us) and spread ((max - min) / mean) of per-step figures in ns."""
    mean = number(values.mean())
    return {"min": _us(values.min()), "median": _us(values.median()), "max": _us(values.max()),
            "spread": round(float((number(values.max()) - number(values.min())) / mean), 4) if mean else None}


def busy_share(acts: pl.DataFrame) -> float | None:
    """A replayed timeline's busy share: :func:`.metrics.launch.busy_ns` over its span, first start to last end."""
    a = acts.select(pl.col("ts").alias("ts_ns"), pl.col("end").alias("end_ns")).drop_nulls()
    span = int_scalar(a["end_ns"].max()) - int_scalar(a["ts_ns"].min()) if a.height else 0
    return round(busy_ns(a) / span, 6) if span > 0 else None


def _summary(t: dict[str, Any], comm: pl.DataFrame) -> dict[str, Any]:
    span, idle, host = t["span_ns"], t["idle_ns"], t["host_bound_idle_ns"]
    return {
        "span_us": _us(span), "busy_us": _us(t["busy_ns"]), "idle_us": _us(idle), "host_bound_idle_us": _us(host),
        "capture_idle_us": _us(t["capture_idle_ns"]),
        "activities": int(t["activities"]), "launches": int(t["launches"]),
        "short_activities": int(t["short_activities"]),
        "mean_launch_delay_us": None if t["mean_launch_delay_ns"] is None
            else round(t["mean_launch_delay_ns"] / 1000, 3),
        "launch_call_us": _us(t["launch_call_ns"]),
        "activities_per_s": None if t["activities_per_s"] is None else round(t["activities_per_s"], 1),
        "idle_share": round(idle / span, 6) if span else None,
        "host_bound_share_of_idle": round(host / idle, 6) if idle else None,
        "exposed_communication_us": _us(comm["exposed_communication_ns"].sum()),
        "overlapped_communication_us": _us(comm["overlapped_communication_ns"].sum()),
        "communication_us": _us(comm["communication_ns"].sum()),
        "launch_overhead_per_activity_us": round(host / t["activities"] / 1000, 4) if t["activities"] else None,
    }


def _grouped(acts: pl.DataFrame, by: list[str], short_ns: int, cover: pl.DataFrame) -> pl.DataFrame:
    if acts.height == 0:
        return pl.DataFrame()
    acts = acts.with_columns(pl.col(c).fill_null(-1) for c in by if c != "step")
    st = timeline_stats(acts, by, short_ns, cover)
    if "stream" in by:
        comm = _stream_exposure(acts)
    elif "device" in by:
        comm = exposed_communication(acts, by)
    else:
        comm = exposed_communication(acts, [*by, "device"]).group_by(by).agg(pl.all().sum())
    out = st.join(comm, on=by, how="left")
    return out.select(
        *by, "span_ns", "busy_ns", "idle_ns", "host_bound_idle_ns", "activities", "launches", "short_activities",
        "gpu_time_ns", "mean_launch_delay_ns", "activities_per_s", "exposed_communication_ns",
        "overlapped_communication_ns",
    ).sort(by)


def _stream_exposure(acts: pl.DataFrame) -> pl.DataFrame:
    """Per (device, stream): its communication time not overlapped by any non-communication
    activity of the same device (a stream is only exposed against the whole device)."""
    rows = []
    for (dev, stream), _ in acts.group_by(["device", "stream"]):
        comm = acts.filter((pl.col("device") == dev) & (pl.col("stream") == stream)
                           & (pl.col("category") == "communication"))
        if comm.height == 0:
            rows.append((dev, stream, 0, 0))
            continue
        rest = acts.filter((pl.col("device") == dev) & (pl.col("category") != "communication"))
        both = pl.concat([comm, rest])
        busy_all = int(timeline_stats(both, [])["busy_ns"][0])
        busy_rest = int(timeline_stats(rest, [])["busy_ns"][0]) if rest.height else 0
        comm_busy = int(timeline_stats(comm, [])["busy_ns"][0])
        rows.append((dev, stream, busy_all - busy_rest, comm_busy - (busy_all - busy_rest)))
    return pl.DataFrame(rows, schema={"device": acts.schema["device"], "stream": acts.schema["stream"],
                                      "exposed_communication_ns": pl.Int64, "overlapped_communication_ns": pl.Int64},
                        orient="row")


def _per_activity(acts: pl.DataFrame, cover: pl.DataFrame) -> pl.DataFrame:
    """Launch call duration, launch delay, gap since the previous activity on its stream and device."""
    acts = acts.with_columns(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1))
    dev = activity_gaps(acts, ["device"], cover).select("activity_id", pl.col("gap_ns").alias("gap_device_ns"),
                                                        pl.col("host_gap_ns").alias("host_bound_gap_ns"))
    stream = activity_gaps(acts, ["device", "stream"]).select("activity_id",
                                                              pl.col("gap_ns").alias("gap_stream_ns"))
    return as_text(acts.select(  # the model holds text (the activities' names may be categorical)
        "activity_id", "name", "kind", "category", "device", "stream", "ts_ns", "dur_ns", "launch_name",
        "launch_ts_ns", "launch_dur_ns", (pl.col("ts_ns") - pl.col("launch_ts_ns")).alias("launch_delay_ns"),
        "attribution", "step",
    )).join(stream, on="activity_id", how="left").join(dev, on="activity_id", how="left").sort("activity_id")


def _graphs(acts: pl.DataFrame) -> dict[str, Any]:
    g = acts.filter(pl.col("attribution") == "graph_launch")
    if g.height == 0:
        return {"graph_launches": 0, "graph_activities": 0}
    launches = g.select("launch_id", "launch_dur_ns").unique()
    call_ns = int(launches["launch_dur_ns"].sum())
    other = acts.filter((pl.col("attribution") != "graph_launch") & pl.col("launch_id").is_not_null())
    other_calls = other.select("launch_id", "launch_dur_ns").unique()
    return {
        "graph_launches": launches.height,
        "graph_activities": g.height,
        "activities_per_graph_launch": round(g.height / launches.height, 2),
        "graph_launch_call_us": _us(call_ns),
        "amortized_launch_us_per_graph_activity": round(call_ns / g.height / 1000, 4),
        "launch_us_per_eager_activity": round(int(other_calls["launch_dur_ns"].sum()) / other.height / 1000, 4)
        if other.height else None,
    }


def _captured_words(s: dict[str, Any]) -> str:
    return (f"{s['captured_launches']:,} launches were recorded into CUDA/HIP graphs and not run "
            f"({s['capture_us']:,.1f} us of capture on the host)")


def _verdict(s: dict[str, Any], acts: pl.DataFrame, short_ns: int) -> str:
    replayed = acts.filter(pl.col("attribution") == "graph_launch").height
    only_capture = not replayed and s["captured_launches"] > s["launches"]
    if s.get("captured_launches") and (s.get("bound") == CAPTURE_BOUND or only_capture):
        # a capture, not a run: what ran is told, never as the run's bound
        return (f"{CAPTURE_KIND}: {_captured_words(s)}; what ran: {s['activities']:,} activities, GPU busy "
                f"{100 * (1 - (s['idle_share'] or 0.0)):.0f} % of a {s['span_us']:,.1f} us span")
    idle_share = s["idle_share"] or 0.0
    host_share = s["host_bound_share_of_idle"] or 0.0
    short = acts.filter(pl.col("dur_ns") < short_ns)
    mix = ""
    if short.height:
        top = short.group_by("category").len().sort(["len", "category"], descending=[True, False]).head(2)
        mix = " (mostly " + " and ".join(top["category"].to_list()) + ")"
    shorts = f"{short.height:,} of {acts.height:,} activities are under {short_ns / 1000:g} us{mix}"
    span = s["span_us"] or 0.0
    exposed = s["exposed_communication_us"] or 0.0
    bound = s.get("bound")  # the critical path's, as latency reports it; None: no host timeline or steps
    if span and exposed / span > 0.2:
        kind = "communication-bound"
        head = f"exposed communication is {100 * exposed / span:.0f} % of the span"
    elif bound == "device-bound":  # the word latency says, for one bound per trace in every command
        kind = bound
        head = f"GPU busy {100 * (1 - idle_share):.0f} % of the span"
    elif bound == "host-bound":
        kind = bound
        head = (f"GPU idle {100 * idle_share:.0f} % of the span, {100 * host_share:.0f} % of it waiting for the "
                f"CPU ({'launch-bound' if host_share > 0.5 else 'not launch-bound'})")
    elif idle_share > 0.3 and host_share > 0.5:
        kind = "launch-bound"
        head = f"GPU idle {100 * idle_share:.0f} % of the span, {100 * host_share:.0f} % of it waiting for the CPU"
    elif idle_share > 0.3:
        kind = "idle (not launch-bound)"
        head = (f"GPU idle {100 * idle_share:.0f} % of the span, only {100 * host_share:.0f} % of it waiting for "
                f"launches (synchronizations, host work or dependencies)")
    else:
        kind = "GPU-bound"
        head = f"GPU busy {100 * (1 - idle_share):.0f} % of the span"
    captured = ""
    if s.get("captured_launches") and s.get("capture_idle_us") and span:
        captured = (f"; {100 * s['capture_idle_us'] / span:.0f} % of the span the GPU idled while the host captured "
                    f"a graph ({s['captured_launches']:,} launches recorded, not run)")
    return f"{kind}: {head}; {shorts}{captured}"
