"""CUDA/HIP graph calls in the launch table: which calls replay a graph, and which launches were
only recorded into one (the format facts: ``facts/cuda_graphs.toml``).

Why the loader marks them: a launch made while its stream is capturing records work into a graph
and runs nothing, so it has no GPU activity; the host time around it is the capture, not a run's
launch overhead. Left unmarked, a trace of a serving engine's start-up (one capture per batch size)
reads as a host-bound run of hundreds of launches that never reached the device, and every command
that measures the host (``launch``'s host-bound idle, ``latency``'s critical path) reports a run
that did not happen. Kineto and Nsight Systems record no stream on a runtime call, so a capture is
known by its thread: the calls between a thread's begin-capture and its end-capture. A launch in
that window that has a GPU activity after all (work sent to a stream that was not capturing) ran,
and is not marked.

Columns added to the launch table (the contract's, :mod:`nongemm_trace.schema`): ``graph_launch``
(the call replays a graph: one call, many activities) and ``captured`` (a launch of device work
recorded into a graph, not run). :func:`capture_windows` gives the windows themselves, for the
analyses that set host time or GPU idle time inside them apart; :func:`capture_note` the one warning.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

import polars as pl

from ..core.frames import per_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (requires-python), tomli as everywhere else
    import tomli as tomllib

#: what a runtime call is to a graph: the roles :func:`call_roles` gives
BEGIN, END, LAUNCH, GRAPH = "begin", "end", "launch", "graph"

WINDOW_SCHEMA = {"pid": pl.String, "tid": pl.String, "ts_ns": pl.Int64, "end_ns": pl.Int64}


@lru_cache(maxsize=1)
def facts() -> dict[str, Any]:
    """The call names (``facts/cuda_graphs.toml``), read once."""
    text = (resources.files("nongemm_trace") / "facts" / "cuda_graphs.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def base_name(name: pl.Expr) -> pl.Expr:
    """A call's name without the version and per-thread-stream suffixes (``cuStreamBeginCapture_v2``)."""
    return name.str.replace(facts()["suffix"], "")


def _role(name: pl.Expr) -> pl.Expr:
    f = facts()
    base = base_name(name)
    return (pl.when(base.is_in(f["capture"]["begin"])).then(pl.lit(BEGIN))
            .when(base.is_in(f["capture"]["end"])).then(pl.lit(END))
            .when(base.is_in(f["graph_launch"])).then(pl.lit(GRAPH))
            .when(base.is_in(f["capture"]["launch"])).then(pl.lit(LAUNCH)))


def call_roles(launches: pl.DataFrame) -> pl.Expr:
    """Each call's role (``begin``, ``end``, ``graph``, ``launch`` or null), once per distinct name."""
    if launches.height == 0:
        return pl.lit(None, pl.Utf8)
    return per_value(launches, "name", _role, pl.Utf8)


def has_captures(launches: pl.DataFrame) -> bool:
    """Whether any call begins or ends a capture (worked out on the distinct names: most traces have
    none, and their launch tables are then left alone)."""
    if launches.height == 0:
        return False
    names = launches.select(pl.col("name").unique().cast(pl.String)).to_series()
    return bool(pl.DataFrame({"name": names}).select(_role(pl.col("name")).is_in([BEGIN, END]).any()).item())


def _depths(launches: pl.DataFrame) -> pl.DataFrame:
    """Per call (``launch_id``, in thread and time order): its role and how many captures its thread had
    open while it ran (``depth``; a begin or end call counts the depth after it, ``before`` the one
    before it). A thread whose first capture call is an end was capturing when the profile began: its
    depths are raised by the captures closed that were never opened in the trace."""
    df = launches.select("launch_id", pl.col("pid", "tid").cast(pl.String), "ts_ns", "end_ns",
                         call_roles(launches).alias("role"))
    step = pl.when(pl.col("role") == BEGIN).then(1).when(pl.col("role") == END).then(-1).otherwise(0)
    df = df.sort(["pid", "tid", "ts_ns", "launch_id"]).with_columns(step.alias("_step"))
    df = df.with_columns(pl.col("_step").cum_sum().over(["pid", "tid"]).alias("_after"))
    opened_before = (-pl.col("_after").min()).clip(lower_bound=0).over(["pid", "tid"])
    return df.with_columns((pl.col("_after") + opened_before).alias("depth")).with_columns(
        (pl.col("depth") - pl.col("_step")).alias("before")).drop("_step", "_after")


def captured_launches(launches: pl.DataFrame, activities: pl.DataFrame | None) -> pl.Series:
    """``captured`` for every row of ``launches`` (in its order): a call that launches device work, made
    on a thread while it was capturing, with no GPU activity of its correlation in ``activities``."""
    if not has_captures(launches):
        return pl.repeat(False, launches.height, eager=True, dtype=pl.Boolean).alias("captured")
    d = _depths(launches)
    inside = d.filter((pl.col("depth") > 0) & pl.col("role").is_in([LAUNCH, GRAPH])).select("launch_id")
    if inside.height == 0:
        return pl.repeat(False, launches.height, eager=True, dtype=pl.Boolean).alias("captured")
    inside = inside.join(launches.select("launch_id", "correlation"), on="launch_id")
    if activities is not None and activities.height:
        ran = activities.select(pl.col("correlation").drop_nulls().unique())
        inside = inside.join(ran, on="correlation", how="anti")
    return launches.select(pl.col("launch_id").is_in(inside["launch_id"].implode()).alias("captured")).to_series()


def mark_graph_calls(launches: pl.DataFrame, activities: pl.DataFrame | None = None) -> pl.DataFrame:
    """The launch table with ``graph_launch`` (the call replays a graph) and ``captured``
    (:func:`captured_launches`)."""
    role = call_roles(launches)
    return launches.with_columns((role == GRAPH).fill_null(False).alias("graph_launch"),
                                 captured_launches(launches, activities))


def capture_windows(launches: pl.DataFrame) -> pl.DataFrame:
    """``pid, tid, ts_ns, end_ns``: each span of a thread's time with a capture open (begin-capture's
    start to end-capture's end; nested captures on one thread make one window). A capture still open
    when the profile ends runs to the thread's last call, one open when it began from its first."""
    if not has_captures(launches):
        return pl.DataFrame(schema=WINDOW_SCHEMA)
    d = _depths(launches)
    thread = ["pid", "tid"]
    bounds = d.group_by(thread).agg(pl.col("ts_ns").min().alias("first"), pl.col("end_ns").max().alias("last"),
                                    pl.col("before").first().alias("open_at_start"),
                                    pl.col("depth").last().alias("open_at_end"))
    starts = pl.concat([
        bounds.filter(pl.col("open_at_start") > 0).select(*thread, pl.col("first").alias("t")),
        d.filter((pl.col("role") == BEGIN) & (pl.col("before") == 0)).select(*thread, pl.col("ts_ns").alias("t")),
    ]).sort([*thread, "t"])
    ends = pl.concat([
        d.filter((pl.col("role") == END) & (pl.col("depth") == 0)).select(*thread, pl.col("end_ns").alias("t")),
        bounds.filter(pl.col("open_at_end") > 0).select(*thread, pl.col("last").alias("t")),
    ]).sort([*thread, "t"])
    nth = pl.int_range(pl.len()).over(thread).alias("k")
    return starts.with_columns(nth).join(ends.with_columns(nth), on=[*thread, "k"]).select(
        *thread, pl.col("t").alias("ts_ns"), pl.col("t_right").alias("end_ns")).sort([*thread, "ts_ns"])


def capture_note(launches: pl.DataFrame, activities: pl.DataFrame) -> tuple[str, int, str] | None:
    """The one warning of a trace with captured launches (``graph_capture``: how many, and what ran
    instead), or None."""
    if "captured" not in launches.columns:
        return None
    n = int(launches["captured"].sum() or 0)
    if n == 0:
        return None
    windows = capture_windows(launches).height
    role = call_roles(launches)
    ran = launches.filter(role.is_in([LAUNCH, GRAPH]) & ~pl.col("captured"))
    if activities.height:
        ran = ran.join(activities.select(pl.col("correlation").drop_nulls().unique()), on="correlation", how="semi")
    else:
        ran = ran.head(0)
    replays = int(ran["graph_launch"].sum() or 0)
    ran_us = int(activities["dur_ns"].sum() or 0) / 1000 if activities.height else 0.0
    head = (f"{n:,} launches were captured into CUDA/HIP graphs ({windows:,} capture window"
            f"{'s' if windows != 1 else ''}: begin-capture to end-capture on the launching thread) and did not "
            f"run here: they have no GPU activity and count neither as launches, launch overhead nor host-bound "
            f"latency (the capture is bound 'capture')")
    what_ran = f"what ran is {activities.height:,} GPU activities ({ran_us:,.1f} us) of {ran.height:,} launches"
    if replays:
        return "graph_capture", n, f"{head}; {what_ran}, {replays:,} of them graph replays"
    if n > ran.height:
        return "graph_capture", n, f"{head}; the trace holds a graph capture, no replay: {what_ran}"
    return "graph_capture", n, f"{head}; {what_ran}"
