"""Steps: the repeated unit of work (training or inference iteration) in a trace.

Found from ``ProfilerStep#N`` ranges when present; else a serving engine's iteration ranges
(SGLang's ``step[MODE bs=N]``, vLLM's ``execute_…_context_…_generation_…``: the annotation rules of
``facts/serving_phases.toml``, the very ranges ``phases`` counts), under the marker
``<engine> iteration``; else the most repeated outermost user annotation (e.g. ``## step ##``);
``marker`` chooses a name (an engine's iteration marker chooses its ranges).

The engine's ranges come before a guessed annotation because the engine writes them around each
iteration it runs, the unit its loop repeats (an iteration's ranges rarely repeat one name: their names
carry the batch and token counts, so a guess would keep only the iterations of one shape). The
iterations ``phases`` infers without an annotation are not steps: a ``generate()`` loop's forward
passes and a loop of graph replays are read from the op sequence (an embedding call, a write of token
ids before a graph launch), boundaries a heuristic draws between ops, not ranges the program recorded;
and a forward pass is one token of a ``generate()`` call, a unit other than the one the user's loop
repeats (the call, which ``prof.step()`` marks when the loop has one): a step that silently became a
token where ``prof.step()`` is missing would change what the step figure means.

An engine's iteration step runs from its range's start to the next iteration's start (the last one to
its range's end): the host work an engine does between its ranges (scheduling the next batch, SGLang's
sampling after its ``step[…]`` range) is the loop's, as ``prof.step()``'s ranges tile a training loop,
so that where the host paces the loop the period is the gap between consecutive iteration starts.
An activity belongs to the step whose CPU interval contains its launch call
(launch calls may come from any thread of the process, e.g. autograd's). An
activity with no launch call in the file is placed by its own start time in the
step that started last before it.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import int_scalar, starts_with
from ..core.trace import Anomaly
from ..load.roles import STEP_OP
from .phases import engine_ranges, rules

#: an engine's iteration marker is the engine's name and this word (``sglang iteration``)
ITERATION = "iteration"

PROFILER_STEP = "ProfilerStep#"
#: a step marker guessed from repeated annotations must hold at least this share of the GPU time
STEP_MIN_COVERAGE = 0.5


def find_steps(ops: pl.DataFrame, marker: str | None = None) -> tuple[pl.DataFrame, str | None]:
    """Return (steps table ``step, name, pid, ts_ns, end_ns``, marker used or None)."""
    if ops.height == 0:
        return _empty(), None
    if marker and engine_of(marker):
        cand = engine_ranges(ops, engine_of(marker))[1]
        used: str | None = marker
    elif marker:
        named = (pl.col("name") == marker) | starts_with(ops, "name", marker + "#")
        cand = ops.filter(named | (pl.col("name") == STEP_OP) if marker == PROFILER_STEP.rstrip("#") else named)
        used = marker
    else:
        cand = ops.filter(starts_with(ops, "name", PROFILER_STEP) | (pl.col("name") == STEP_OP))
        used = PROFILER_STEP.rstrip("#") if cand.height else None
        if cand.height == 0:
            engine, cand = engine_ranges(ops)
            used = None if engine is None else f"{engine} {ITERATION}"
        if cand.height == 0:
            # outermost user annotations that repeat; else (under emit_nvtx a record_function
            # range is written like an op) outermost '## … ##' ranges that repeat
            counts = _repeated(ops.filter((pl.col("depth") == 0) & (pl.col("cat") == "user_annotation")))
            roots = ops.filter((pl.col("depth") == 0) & (pl.col("cat") == "user_annotation"))
            if counts.height == 0:
                roots = ops.filter((pl.col("depth") == 0) & starts_with(ops, "name", "##"))
                counts = _repeated(roots)
            if counts.height:
                used = counts["name"][0]
                cand = roots.filter(pl.col("name") == used)
    if cand.height == 0:
        return _empty(), None
    # outermost occurrences only (a marker nested in itself is one step)
    cand = cand.sort("ts_ns")
    cand = cand.filter(pl.col("ts_ns") >= pl.col("end_ns").cum_max().shift(1).fill_null(cand["ts_ns"].min()))
    if engine_of(used):  # an engine's iteration runs on to the next one's start: the steps tile its loop
        cand = cand.with_columns(pl.max_horizontal("end_ns", pl.col("ts_ns").shift(-1).over("pid")).alias("end_ns"))
    steps = (cand.select(step_name(cand).alias("name"), "pid", "ts_ns", "end_ns").with_row_index("step")
             .with_columns(pl.col("step").cast(pl.Int64)))
    return steps, used


def engine_of(marker: str | None) -> str | None:
    """The serving engine whose iterations ``marker`` names (``sglang iteration``: ``sglang``), else None."""
    if not marker or not marker.endswith(" " + ITERATION):
        return None
    engine = marker[: -len(ITERATION) - 1]
    return engine if any(r["engine"] == engine for r in rules().get("annotation", [])) else None


def step_name(ops: pl.DataFrame) -> pl.Expr:
    """Each op's name as text, a step range's as the trace wrote it (``ProfilerStep#N``: the loader
    keeps one name for them, :data:`~nongemm_trace.load.roles.STEP_OP`, and their numbers)."""
    text = pl.col("name").cast(pl.String)
    if "step_number" not in ops.columns:
        return text
    return pl.when(pl.col("step_number").is_not_null()).then(
        pl.lit(PROFILER_STEP) + pl.col("step_number").cast(pl.String)).otherwise(text)


def _repeated(roots: pl.DataFrame) -> pl.DataFrame:
    return (roots.group_by("name").agg(pl.len().alias("n"), pl.col("ts_ns").min().alias("first"))
            .filter(pl.col("n") >= 2).sort(["n", "first"], descending=[True, False]))


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"step": pl.Int64, "name": pl.Utf8, "pid": pl.Utf8, "ts_ns": pl.Int64,
                                "end_ns": pl.Int64})


def assign_steps(acts: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Add a ``step`` column (null outside every step) to the activities table."""
    if steps.height == 0:
        return acts.with_columns(pl.lit(None, pl.Int64).alias("step"))
    t = pl.coalesce("launch_ts_ns", "ts_ns").alias("_t")
    left = acts.select("activity_id", t, pl.col("launch_ts_ns").is_not_null().alias("_launched")).sort("_t")
    right = steps.select("step", pl.col("ts_ns").alias("_t"), pl.col("end_ns").alias("_send")).sort("_t")
    hit = left.join_asof(right, on="_t", strategy="backward")
    inside = (~pl.col("_launched")) | (pl.col("_t") <= pl.col("_send"))
    hit = hit.select("activity_id", pl.when(inside).then(pl.col("step")).otherwise(None).alias("step"))
    return acts.join(hit, on="activity_id", how="left").sort("activity_id")


def guessed_steps_hold_work(acts: pl.DataFrame, used_marker: str | None) -> str | None:
    """Why the steps found by guessing (a repeated annotation, not ``ProfilerStep#N`` nor an engine's
    iterations, which the program recorded around each step) are not steps: they hold less than
    :data:`STEP_MIN_COVERAGE` of the GPU time (``Optimizer.zero_grad`` ranges repeat too). None when
    they are fine. ``acts`` has the ``step`` column."""
    if used_marker is None or used_marker == PROFILER_STEP.rstrip("#") or engine_of(used_marker):
        return None
    total = int(acts["dur_ns"].sum() or 0)
    inside = int(acts.filter(pl.col("step").is_not_null())["dur_ns"].sum() or 0)
    if not total or inside >= STEP_MIN_COVERAGE * total:
        return None
    return (f"the repeated range '{used_marker}' holds only {inside / total:.1%} of the GPU time: not used as "
            f"steps (name the step range with --step-marker NAME)")


def step_ranges(ops: pl.DataFrame, launches: pl.DataFrame, marker: str | None) -> tuple[pl.DataFrame, Anomaly | None]:
    """Each step's range on its thread, ``step, name, pid, tid, ts, end``: the ranges named ``marker``
    (the selection's, an engine's iteration marker included), each on the thread that recorded it; with
    no marker, the whole trace as one step
    (named ``(whole trace)``) on the thread that launched most work, and the warning that says so."""
    steps = find_steps(ops, marker)[0] if marker else pl.DataFrame()
    if steps.height:
        # each step's thread: the op of its range (the same name, process and times; an engine's
        # iteration ends at the next one's start, not with its range); the few ops that start with a step
        # picked first: a join copies every column of every op it is given
        keys = ["pid", "ts_ns"] if engine_of(marker) else ["pid", "ts_ns", "end_ns"]
        starting = ops.filter(pl.col("ts_ns").is_in(steps["ts_ns"].implode()))
        ranges_of = starting.join(steps.select(keys).unique(), on=keys)
        tids = ranges_of.select(step_name(ranges_of).alias("name"), "tid", *keys).unique(["name", *keys])
        steps = steps.join(tids, on=["name", *keys], how="left")
        ranges = steps.select("step", "name", "pid", "tid", pl.col("ts_ns").alias("ts"), pl.col("end_ns").alias("end"))
        return ranges, None
    host = pl.concat([ops.select("pid", "tid", "ts_ns", "end_ns"), launches.select("pid", "tid", "ts_ns", "end_ns")])
    if host.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "name": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8, "ts": pl.Int64,
                                    "end": pl.Int64}), \
            Anomaly("no_steps", 1, "the trace has no host events (ops or runtime calls): there is no step to measure "
                                   "latency over")
    busiest = launches.group_by(["pid", "tid"]).len().sort("len", descending=True).head(1)
    if busiest.height == 0:
        busiest = ops.group_by(["pid", "tid"]).len().sort("len", descending=True).head(1)
    mine = host.join(busiest.select("pid", "tid"), on=["pid", "tid"])
    return pl.DataFrame({"step": [0], "name": ["(whole trace)"], "pid": busiest["pid"], "tid": busiest["tid"],
                         "ts": [int_scalar(mine["ts_ns"].min())], "end": [int_scalar(mine["end_ns"].max())]}), \
        Anomaly("no_steps", 1, "the trace has no steps: the whole trace is one step, on the thread that launched the "
                               "most work (name the step range with step_marker)")
