"""What-if: the dependency graph replayed with changed durations.

Selectors (``--scale SELECTOR=FACTOR``; a factor multiplies durations, so 0.5 is twice as
fast; when several match an activity the last one given wins): a class (``GEMM``,
``non-GEMM``, ``communication``, ``unclassified``), a category of the taxonomy, ``op:NAME``
(activities whose launching or top-level op is NAME), ``kernel:REGEX`` (activity names matching
REGEX). Host changes: ``cpu_scale`` (every host piece F times as long: op work, Python, launch
and runtime calls, a sync's return cost; not the waiting), ``launch_us`` (every launch call
costs X us), ``graphs`` (each step's launches replayed as CUDA graphs: docs/latency.md),
``autocast`` (the casts and host work ``torch.autocast`` adds: :mod:`.autocast`).
"""

from __future__ import annotations

import math
import re
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ...core.deprecation import REMOVAL, deprecated
from ...core.frames import int_scalar, per_value
from ...core.trace import Anomaly
from ...devices import match_device
from ...errors import OptionError
from ...metrics.period import host_slack, paced_by_host
from ...models.latency import WhatIfReport, bound_of
from ...vocabulary import AUTOCAST_DTYPES, CLASSES
from ..changes import WhatIfParams
from .autocast import Casts, cast_kernel_ns, find_casts
from .autocast import facts as autocast_facts
from .overlap import overlapping_steps
from .path import attribute, bound_times
from .replay import Timeline, measured_piece_lengths, measured_timeline, replay
from .unprofiled import unprofiled_summary, without_profiler

if TYPE_CHECKING:  # pragma: no cover
    from ...pipeline.context import Context

#: the host cost of a CUDA-graph replay call, per activity in the graph, when the trace holds none
#: (``cudaGraphLaunch`` under torch.profiler on an H200: 1.3-2.0 us per kernel: docs/latency.md)
GRAPH_LAUNCH_NS_PER_ACTIVITY = 1600
#: the queue gap between kernels of a replayed graph (H200 graph captures: 0.4 us, against
#: about 1 us between eagerly launched kernels)
GRAPH_QUEUE_GAP_NS = 420


def parse_scales(scales: list[str] | tuple[str, ...] | dict[str, float] | None, categories: tuple[str, ...],
                 path: Any = None) -> list[tuple[str, str, str, float]]:
    """``(text, kind, value, factor)`` per selector; an unknown class or category, a bad regular
    expression or factor is refused with the names that are known."""
    items = list(scales.items()) if isinstance(scales, dict) else [_split(s, path) for s in (scales or [])]
    out = []
    for sel, factor in items:
        try:
            f = float(factor)
        except (TypeError, ValueError):
            raise OptionError(path, f"scale {sel}={factor}: the factor is not a number", "scale") from None
        if not math.isfinite(f) or f < 0:
            raise OptionError(path, f"scale {sel}={factor}: the factor must be a finite number >= 0", "scale")
        if sel.startswith("op:") and len(sel) > 3:
            out.append((sel, "op", sel[3:], f))
        elif sel.startswith("kernel:") and len(sel) > 7:
            try:
                re.compile(sel[7:])
            except re.error as exc:
                raise OptionError(path, f"scale {sel}: not a regular expression ({exc})", "scale") from None
            out.append((sel, "kernel", sel[7:], f))
        elif sel in CLASSES:
            out.append((sel, "class", sel, f))
        elif sel in categories:
            out.append((sel, "category", sel, f))
        else:
            raise OptionError(path, f"unknown selector '{sel}' in scale (classes: {', '.join(CLASSES)}; categories: "
                                    f"{', '.join(categories)}; or op:NAME, kernel:REGEX)", "scale")
    return out


def _split(text: str, path: Any) -> tuple[str, str]:
    sel, eq, factor = str(text).rpartition("=")
    if not eq or not sel:
        raise OptionError(path, f"scale wants SELECTOR=FACTOR, not {text!r}", "scale")
    return sel, factor


def activity_factors(acts: pl.DataFrame, parsed: list[tuple[str, str, str, float]]) -> pl.Series:
    """The duration factor of every activity (by act row): the last matching selector's, else 1."""
    factor = pl.lit(1.0)
    for _, kind, value, f in parsed:
        hit = {"class": pl.col("class") == value, "category": pl.col("category") == value,
               "op": (pl.col("launch_op") == value) | (pl.col("top_op") == value),
               "kernel": per_value(acts, "name", lambda e, v=value: e.str.contains(v), pl.Boolean)}[kind]
        factor = pl.when(hit.fill_null(False)).then(pl.lit(f)).otherwise(factor)
    return acts.select(factor.alias("f"))["f"]


def piece_tops(g, ops: pl.DataFrame) -> np.ndarray:
    """The top-level op (``top_id``; -1 outside every real operator) of each host piece, by piece row."""
    tops = g.pieces.select("row", "op_id").join(ops.select("op_id", "top_id"), on="op_id", how="left",
                                                maintain_order="left")
    out = np.full(g.pieces.height, -1, np.int64)
    out[tops["row"].to_numpy()] = tops["top_id"].fill_null(-1).to_numpy()
    return out


def graph_regions(g, piece_len: np.ndarray, lat: np.ndarray, gap: np.ndarray, cost_ns: int | None,
                  per_activity_ns: int, tops: np.ndarray | None = None) -> int:
    """Replay each step's launches as CUDA graphs, in place; returns the number of graphs.

    On each thread, the pieces from a step's first to its last launch (a synchronizing call, which
    a graph cannot hold, closes one graph and the next launch opens another) collapse into one graph
    launch call costing ``cost_ns`` (else ``per_activity_ns`` per activity it replays); every
    activity launched there is released when that call returns, after the typical launch latency,
    and follows the one before it on its stream after the graph queue gap instead of the eager one.
    With ``tops`` (each piece's top-level op, :func:`piece_tops`) a graph also takes the rest of the
    top-level ops its first and last launches ran in (the same step and epoch): a replay runs none of
    the captured ops, so an op's host work before its first launch and after its last is gone too."""
    p = g.pieces.select("row", "thr", "ts", "kind")
    p = p.with_columns(pl.col("kind").is_in(["sync", "wait"]).cast(pl.Int64).cum_sum().over("thr").alias("epoch"))
    steps = g.steps.select("step", pl.col("ts").alias("t"), pl.col("end").alias("s_end")).sort("t")
    launches = p.filter(pl.col("kind") == "launch").sort("ts").join_asof(
        steps, left_on="ts", right_on="t", strategy="backward").filter(pl.col("ts") <= pl.col("s_end"))
    regions = launches.group_by(["thr", "step", "epoch"]).agg(pl.col("row").min().alias("lo"),
                                                              pl.col("row").max().alias("hi"))
    if regions.height == 0:
        return 0
    if tops is not None:
        regions = _whole_top_ops(p, regions, steps, tops)
    regions = regions.with_row_index("region")
    inside = regions.select("region", pl.int_ranges("lo", pl.col("hi") + 1).alias("lp")).explode("lp")
    a = g.acts.select(pl.col("row").alias("act"), "lp").join(inside, on="lp")
    count = a.group_by("region").len()
    regions = regions.join(count, on="region", how="left").with_columns(pl.col("len").fill_null(0))
    costs = (np.full(regions.height, cost_ns, np.int64) if cost_ns is not None
             else regions["len"].to_numpy().astype(np.int64) * per_activity_ns)
    piece_len[inside["lp"].to_numpy()] = 0
    piece_len[regions["lo"].to_numpy()] = costs
    # released when the call returns: the first launch's own activities wait for the call too
    first = a.join(regions.select(pl.col("lo").alias("lp"), pl.lit(True).alias("opens")), on="lp", how="left",
                   maintain_order="left")
    opens = first["opens"].fill_null(False).to_numpy()
    cost_of = pl.DataFrame({"lp": regions["lo"], "cost": costs})
    cost = first.join(cost_of, on="lp", how="left", maintain_order="left")["cost"].fill_null(0).to_numpy()
    rows = a["act"].to_numpy()
    lat[rows] = g.launch_latency_ns + np.where(opens, cost, 0)
    shift = max(g.queue_gap_ns - GRAPH_QUEUE_GAP_NS, 0)
    gap[rows] = np.maximum(np.minimum(gap[rows], GRAPH_QUEUE_GAP_NS), gap[rows] - shift)
    return regions.height


def _whole_top_ops(p: pl.DataFrame, regions: pl.DataFrame, steps: pl.DataFrame, tops: np.ndarray) -> pl.DataFrame:
    """``regions`` (``thr, step, epoch, lo, hi``) widened to the first and last piece of the top-level ops
    their first and last launches ran in, within the region's step and epoch on its thread."""
    p = p.with_columns(pl.Series("top", tops[p["row"].to_numpy()]))
    ends = regions.join(steps.select("step", "t", "s_end"), on="step", how="left").with_columns(
        pl.Series("lo_top", tops[regions["lo"].to_numpy()]), pl.Series("hi_top", tops[regions["hi"].to_numpy()]))
    span = p.filter(pl.col("top") >= 0).group_by("thr", "epoch", "top").agg(
        pl.col("row").min().alias("first"), pl.col("row").max().alias("last"),
        pl.col("ts").min().alias("t0"), pl.col("ts").max().alias("t1"))
    lo = ends.join(span, left_on=["thr", "epoch", "lo_top"], right_on=["thr", "epoch", "top"], how="left",
                   maintain_order="left").select(
        pl.when(pl.col("first").is_not_null() & (pl.col("t0") >= pl.col("t")))
        .then(pl.min_horizontal("first", "lo")).otherwise(pl.col("lo")).alias("lo"))
    hi = ends.join(span, left_on=["thr", "epoch", "hi_top"], right_on=["thr", "epoch", "top"], how="left",
                   maintain_order="left").select(
        pl.when(pl.col("last").is_not_null() & (pl.col("t1") <= pl.col("s_end")))
        .then(pl.max_horizontal("last", "hi")).otherwise(pl.col("hi")).alias("hi"))
    return regions.with_columns(lo["lo"].cast(regions.schema["lo"]), hi["hi"].cast(regions.schema["hi"]))


def _graph_launch_cost(trace_launches: pl.DataFrame, acts: pl.DataFrame,
                       given_us: float | None) -> tuple[int | None, int, str]:
    """(fixed cost per graph or None, cost per replayed activity, where it came from)."""
    if given_us is not None:
        return int(round(given_us * 1000)), 0, "given"
    calls = trace_launches.filter(pl.col("graph_launch")).select("launch_id", "dur_ns")
    if calls.height:
        n = acts.filter(pl.col("launch_id").is_in(calls["launch_id"].implode())).height
        if n:
            return None, int(round(int(calls["dur_ns"].sum()) / n)), "measured in the trace"
    return None, GRAPH_LAUNCH_NS_PER_ACTIVITY, "default"


def _changed(g, base_d: np.ndarray, base_len: np.ndarray, base_lat: np.ndarray, factors: np.ndarray, *,
             cpu_scale: float, launch_us: float | None, graph_cost: tuple[int | None, int, np.ndarray | None] | None,
             settings: dict[str, Any] | None = None, casts: Casts | None = None, base_gap: np.ndarray | None = None):
    """The replay of ``g`` from the given durations, piece lengths and launch latencies with the
    changes applied (the measured run's or the run without the profiler's); ``casts``: autocast's
    host work (at this run's cost per op event) and cast kernels, added before the scaling of the
    host and after that of the kernels."""
    new_d = np.rint(base_d * factors).astype(np.int64)
    if casts is not None:
        base_len = casts.host_lengths(g, base_len)
        new_d = casts.device_durations(new_d)
    # in place, and the lengths given dropped once scaled: a slot per host piece each, alive through the replay
    if cpu_scale == 1.0:  # each length rounds to itself: no float copy of every piece, and no rounding
        piece_len = np.asarray(base_len, np.int64)
        if launch_us is not None or graph_cost is not None:
            piece_len = piece_len.copy()  # changed in place below: never the caller's array
    else:
        scaled = np.multiply(base_len, float(cpu_scale))
        piece_len = np.rint(scaled, out=scaled).astype(np.int64)
        del scaled
    del base_len
    if launch_us is not None:
        is_launch = (g.pieces["kind"] == "launch").fill_null(False)  # a mask: no text array of every piece
        launch_rows = g.pieces.filter(is_launch).group_by("launch_id").agg(pl.col("row").min())["row"]
        piece_len[is_launch.to_numpy()] = 0
        piece_len[launch_rows.to_numpy()] = int(round(launch_us * 1000))
    lat = np.asarray(base_lat, np.float64).copy()
    gap = (g.acts["gap"].to_numpy() if base_gap is None else base_gap).copy()
    if graph_cost is not None:
        n = graph_regions(g, piece_len, lat, gap, graph_cost[0], graph_cost[1], graph_cost[2])
        if settings is not None:
            settings["graphs_replayed"] = n
    return replay(g, new_d, piece_len, lat, gap), new_d


def autocast_casts(ctx: Context, g, sel, dtype: str, path: Any) -> Casts:
    """Autocast's casts in this trace (:mod:`.autocast`), refused for a dtype autocast does not take or a
    trace that already ran under it."""
    if dtype not in AUTOCAST_DTYPES:
        raise OptionError(path, f"autocast {dtype!r}: one of {', '.join(AUTOCAST_DTYPES)}", "autocast")
    ops = ctx.linked().ops
    low = ops["input_type"].cast(pl.String).str.contains("BFloat16|Half", literal=False).fill_null(False)
    lower = ops["name"].cast(pl.String).is_in(autocast_facts()["lower_precision"])
    if bool((low & lower).any()):
        raise OptionError(path, "autocast: the trace's GEMM ops already take bf16/fp16 inputs (it ran under "
                                "autocast or in a lower precision): there is nothing to cast", "autocast")
    device = match_device((sel.metadata.get("devices") or [None])[0])
    launch_op_of = ctx.activities(sel.level).select("activity_id", "launch_op_id").drop_nulls()
    return find_casts(ops, g.acts, launch_op_of, cast_kernel_ns(device.memory_tbps if device else None))


def unmatched_selectors(acts: pl.DataFrame, parsed: list[tuple[str, str, str, float]], path: Any) -> list[Anomaly]:
    """An ``op:`` or ``kernel:`` selector that matches no activity of the trace is refused, naming the
    nearest names the trace holds (a typo would otherwise predict +0.0 % silently); a class or category
    (names the taxonomy has already checked) that the trace does not hold is a warning."""
    import difflib

    out = []
    for text, kind, value, _ in parsed:
        if kind == "op":
            names = pl.concat([acts["launch_op"], acts["top_op"]]).drop_nulls().unique()
            hit = bool(names.is_in([value]).any())
        elif kind == "kernel":
            names = acts["name"].drop_nulls().unique().cast(pl.String)  # text or categorical
            hit = bool(names.str.contains(value).any())
        else:
            names = acts[kind].drop_nulls().unique()
            hit = bool(names.is_in([value]).any())
        if hit:
            continue
        if kind in ("class", "category"):
            out.append(Anomaly("selector_unmatched", 1, f"scale {text}: the trace has no GPU activity in this {kind}"))
            continue
        near = [n if len(n) <= 60 else n[:57] + "..." for n in
                difflib.get_close_matches(value, names.sort().to_list(), n=3, cutoff=0.4)]
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise OptionError(path, f"scale {text}: matches no GPU activity of the trace{hint}", "scale")
    return out


def whatif_params(changes: Any = None, old: dict[str, Any] | None = None, where: str = "predict",
                  warn: bool = True) -> WhatIfParams:
    """``changes`` as the typed :class:`~nongemm_trace.analyses.changes.WhatIfParams`. The calling
    convention it replaced (the scales in its place, each other change a keyword: ``scales, cpu_scale=…``)
    still works until :data:`~nongemm_trace.core.deprecation.REMOVAL`, with the one deprecation warning
    (``warn``: unless the caller gives its own); both at once are refused (which would win?)."""
    old = dict(old or {})
    if isinstance(changes, WhatIfParams):
        if old:
            raise TypeError(f"{where}: give the changes as WhatIfParams or as keywords, not both ({', '.join(old)})")
        return changes
    if changes is None and not old:
        return WhatIfParams()
    known = {f.name for f in fields(WhatIfParams)} - {"scale"}
    unknown = sorted(set(old) - known)
    if unknown:
        raise TypeError(f"{where} takes no change {', '.join(unknown)} (its changes: {', '.join(sorted(known))})")
    if warn:
        deprecated(f"{where}(..., scales, cpu_scale=..., ...)",
                   f"{where}(..., WhatIfParams(scale=..., cpu_scale=..., ...))", REMOVAL)
    return WhatIfParams(scale=changes if isinstance(changes, dict) else tuple(changes or ()), **old)


def predict(ctx: Context, g, sel, warnings, changes: WhatIfParams | None = None, **old: Any) -> WhatIfReport:
    """The what-if report of graph ``g`` (of the trace ``ctx`` reads; ``sel`` its selection): the ``changes``
    replayed on the profiled run and on the run without the profiler (:mod:`.unprofiled`). The changes
    are one typed object (the ``whatif`` analysis's ``Params``), not eleven parameters; ``old``: the
    keywords it took before (:func:`whatif_params`)."""
    p = whatif_params(changes, old, "predict")
    scales, cpu_scale, launch_us, graphs = p.scale, p.cpu_scale, p.launch_us, p.graphs
    graph_launch_us, autocast, unprofiled_step_us = p.graph_launch_us, p.autocast, p.unprofiled_step_us
    path = sel.trace
    for name, v in (("cpu_scale", cpu_scale), ("launch_us", launch_us), ("graph_launch_us", graph_launch_us)):
        if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
            raise OptionError(path, f"{name} must be a finite number >= 0, not {v!r}", name)
    parsed = parse_scales(scales, ctx.taxonomy.categories, path)
    a = g.acts
    unmatched = unmatched_selectors(a, parsed, path)
    factors = activity_factors(a, parsed).to_numpy()
    d = a["dur"].to_numpy()
    settings: dict[str, Any] = {"cpu_scale": cpu_scale, "launch_us": launch_us, "graphs": graphs}
    graph_cost = None
    if graphs:
        fixed, per_act, source = _graph_launch_cost(ctx.trace().launches, a, graph_launch_us)
        graph_cost = (fixed, per_act, piece_tops(g, ctx.linked().ops))
        settings.update(graph_launch_us=None if fixed is None else fixed / 1000,
                        graph_launch_us_per_activity=None if fixed is not None else per_act / 1000,
                        graph_launch_cost=source)
    casts = None
    if autocast is not None:
        casts = autocast_casts(ctx, g, sel, autocast, path)
        settings["autocast"] = autocast
        settings["autocast_casts"] = casts.per_step.filter(pl.col("step") >= sel.steps_skipped).select(
            "step", "casts", "wrapped_ops", "cast_bytes", "lower_input_ops").to_dicts()
    # each timeline attributed as soon as it is made, then freed, one at a time: four of them at once (a
    # million host pieces each) were this command's peak; the steps reported are those kept in both
    predicted, new_d = _changed(g, d, measured_piece_lengths(g), a["lat"].to_numpy(allow_copy=True), factors,
                                cpu_scale=cpu_scale, launch_us=launch_us, graph_cost=graph_cost, settings=settings,
                                casts=casts)
    skip = sel.steps_skipped
    keep = predicted.steps.filter(pl.col("step") >= skip) if skip else predicted.steps
    # in steady state no step is faster than its host issues it (the measured CPU ranges against the
    # measured periods: the selection's step times, the same figures as the measured timeline's)
    if sel.step_times is not None:
        measured_slack = host_slack(g.steps.select("step", "ts", pl.col("end").alias("cpu_end")).join(
            sel.step_times.select("step", "wall"), on="step"))
        keep = paced_by_host(keep, measured_slack, _waits(predicted))
    predicted.steps = keep
    classes = ctx.taxonomy.classes
    att = attribute(predicted, classes, g.queue_gap_ns)
    del predicted
    measured = measured_timeline(g)
    kept_measured = measured.steps.filter(pl.col("step").is_in(keep["step"].implode()))
    profiled_bound = bound_of(bound_times(replace(measured, steps=kept_measured), g.queue_gap_ns))
    measured_steps = measured.steps
    del measured
    un = without_profiler(ctx, g, kept_measured, step_us=unprofiled_step_us, path=path, attached=p.attached)
    kept_steps = kept_measured["step"].implode()
    un.timeline.steps = un.timeline.steps.filter(pl.col("step").is_in(kept_steps))
    un_bound = bound_of(bound_times(un.timeline, g.queue_gap_ns))
    # only its steps are read from here: its pieces, activities and syncs freed before the next replay
    un.timeline = replace(un.timeline, pieces=un.timeline.pieces.clear(), acts=un.timeline.acts.clear(),
                          syncs=un.timeline.syncs.clear())
    # a graph launch without the profiler costs what the model leaves of the profiled one (unless given)
    un_cost = None if graph_cost is None else graph_cost if graph_launch_us is not None else (
        None if graph_cost[0] is None else int(graph_cost[0] * un.model.remains["graph_launch"]),
        int(graph_cost[1] * un.model.remains["graph_launch"]), graph_cost[2])
    un_pred, _ = _changed(g, un.act_dur, un.piece_len, un.lat, factors, cpu_scale=cpu_scale, launch_us=launch_us,
                          graph_cost=un_cost, casts=casts, base_gap=un.gap)
    un_pred.steps = paced_by_host(un_pred.steps, host_slack(un.timeline.steps), _waits(un_pred))
    warnings = list(warnings) + unmatched
    for kept, what in ((kept_measured, "measured"), (keep, "predicted")):  # the steps left out are not reported
        overlap = overlapping_steps(kept, what)
        if overlap is not None:
            warnings.append(overlap)
    if un.note:
        warnings.append(Anomaly("unprofiled_calibration", 1, un.note))
    saved = a.select("step", pl.Series("saved", d - new_d)).group_by("step").agg(pl.col("saved").sum())
    steps = measured_steps.select("step", "name", pl.col("wall").alias("measured")).join(
        keep.select("step", pl.col("wall").alias("predicted")), on="step").join(saved, on="step", how="left")
    steps = (steps.with_columns((pl.col("measured") - pl.col("saved").fill_null(0)).alias("amdahl"))
             .drop("saved").sort("step"))
    steps = steps.join(un.timeline.steps.select("step", un.anchored("wall").alias("unprofiled")), on="step",
                       how="left").join(
        un_pred.steps.select("step", un.anchored("wall").alias("predicted_unprofiled")), on="step", how="left")
    if un.source == "measured" and _speeds_up_only(factors, cpu_scale, launch_us, graphs, autocast):
        # the measured step is a fact: work that only gets faster cannot make a step slower than it
        steps = steps.with_columns(
            pl.min_horizontal("predicted_unprofiled", "unprofiled").alias("predicted_unprofiled"))
    in_steps = a.select("class", "step", pl.Series("m", d), pl.Series("p", new_d)).filter(
        pl.col("step").is_in(steps["step"].implode()))
    shares = in_steps.group_by("class").agg(pl.col("m").sum().alias("measured_ns"),
                                            pl.col("p").sum().alias("predicted_ns"))
    order = {c: i for i, c in enumerate(CLASSES)}
    shares = shares.sort(pl.col("class").replace_strict(order, default=len(order), return_dtype=pl.Int64))
    span = {what: int_scalar(t["end"].max()) - int_scalar(t["ts"].min()) if t.height else None
            for what, t in (("measured", kept_measured), ("predicted", keep))}
    un_pred.steps = un_pred.steps.filter(pl.col("step").is_in(kept_steps))
    bounds = {"profiled_bound": profiled_bound, "predicted_profiled_bound": bound_of(att), "bound": un_bound,
              "predicted_bound": bound_of(bound_times(un_pred, g.queue_gap_ns))}
    return WhatIfReport(str(path), sel.taxonomy, sel.level, [{"selector": t, "factor": f} for t, _, _, f in parsed],
                        settings, steps, att, shares, warnings, span, unprofiled_summary(un) | bounds)


def _waits(tl: Timeline) -> pl.DataFrame:
    """``thr, ts``: where a timeline's host waited (a synchronizing call or a wait on another thread)."""
    return tl.syncs.filter(pl.col("waited")).select("thr", "ts")


def _speeds_up_only(factors: np.ndarray, cpu_scale: float, launch_us: float | None, graphs: bool,
                    autocast: str | None) -> bool:
    """Whether a change only makes work faster: duration factors and the CPU scale at most 1, and
    nothing that replaces work by other work (a launch cost, graphs, autocast's casts)."""
    return bool((factors <= 1).all()) and cpu_scale <= 1 and launch_us is None and not graphs and autocast is None

