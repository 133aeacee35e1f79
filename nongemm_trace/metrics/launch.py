"""Launch overhead, GPU idle gaps and communication overlap: where the GPU waits.

Definitions (all in integer nanoseconds; every figure is computed per group —
trace, step, device, stream — with the same columnar code):

* span: first GPU activity start to last GPU activity end in the group;
* busy: the length of the union of the group's activity intervals (all streams);
  idle = span - busy (exactly: busy is computed as span minus the gaps);
* gap before an activity: how long the group's timeline had been empty when it
  started (``ts - max(end of every earlier activity)``, 0 when it overlaps);
* launch delay: activity start - its launch call's start;
* host-bound idle: the idle gaps that end with an activity whose launch call
  started after the gap began: the GPU was waiting for the CPU to launch work.
  A category's ``launch_overhead`` is the host-bound idle that ended with its
  activities;
* capture idle: the part of the idle gaps that a CUDA/HIP graph capture covered
  (:mod:`.intervals`): the host was recording work into a graph, not launching it,
  so that part is never host-bound idle;
* exposed communication: communication-activity time not overlapped by any
  other (compute or copy) activity on the same device:
  ``busy(all) - busy(all but communication)``; overlapped = communication busy - exposed.
* busy by class: the busy time split by which class was running, where classes
  overlap the first of GEMM, non-GEMM, unclassified, communication (so its
  communication part is the exposed communication): the classes' busy times and the
  idle time add up to the span, exactly.
"""

from __future__ import annotations

import polars as pl

from ..vocabulary import BUSY_CLASS_ORDER, OPTIONAL_BUSY_CLASSES
from .intervals import overlap

SHORT_NS = 10_000

_GAP = "gap_ns"


def activity_gaps(acts: pl.DataFrame, by: list[str], cover: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per activity: the idle gap before it on the timeline of its ``by`` group, the part of it a
    graph capture covered (``cover``: :func:`.intervals.interval_cover` of the capture windows) and
    the rest's host-bound part. Needs ``activity_id, ts_ns, end_ns, launch_ts_ns``."""
    keys = by or []
    df = acts.select(*keys, "activity_id", "ts_ns", "end_ns", "launch_ts_ns").sort([*keys, "ts_ns", "end_ns"])
    prev_end = pl.col("end_ns").cum_max().shift(1)
    if keys:
        prev_end = prev_end.over(keys)
    df = df.with_columns(prev_end.alias("_prev_end"))
    gap = (pl.col("ts_ns") - pl.col("_prev_end")).clip(lower_bound=0).fill_null(0)
    captured = pl.lit(0, pl.Int64)
    if cover is not None and cover.height:
        df = df.with_columns(overlap(df["_prev_end"], df["ts_ns"], cover).alias("_cap"))
        captured = pl.min_horizontal(pl.col("_cap"), gap)
    host = (gap > 0) & pl.col("launch_ts_ns").is_not_null() & (pl.col("launch_ts_ns") > pl.col("_prev_end"))
    return df.select("activity_id", gap.alias(_GAP),
                     pl.when(host).then(gap - captured).otherwise(0).alias("host_gap_ns"),
                     captured.alias("capture_gap_ns"),
                     (pl.col("ts_ns") - pl.col("_prev_end")).alias("since_prev_end_ns"))


def timeline_stats(acts: pl.DataFrame, by: list[str], short_ns: int = SHORT_NS,
                   cover: pl.DataFrame | None = None) -> pl.DataFrame:
    """span, busy, idle, host-bound idle, capture idle (``cover``: :func:`.intervals.interval_cover` of
    the capture windows), activities, launches, short activities, activities per second, mean launch
    delay and launch-call time per ``by`` group."""
    gaps = activity_gaps(acts, by, cover)
    df = acts.join(gaps, on="activity_id", how="left")
    aggs = [
        pl.col("ts_ns").min().alias("start_ns"),
        pl.col("end_ns").max().alias("end_ns"),
        pl.col(_GAP).sum().alias("idle_ns"),
        pl.col("host_gap_ns").sum().alias("host_bound_idle_ns"),
        pl.col("capture_gap_ns").sum().alias("capture_idle_ns"),
        pl.len().alias("activities"),
        pl.col("launch_id").drop_nulls().n_unique().alias("launches"),
        (pl.col("dur_ns") < short_ns).sum().alias("short_activities"),
        pl.col("dur_ns").sum().alias("gpu_time_ns"),
        (pl.col("ts_ns") - pl.col("launch_ts_ns")).mean().alias("mean_launch_delay_ns"),
        pl.col("launch_dur_ns").filter(pl.col("launch_id").is_first_distinct()).sum().alias("launch_call_ns"),
    ]
    g = df.group_by(by).agg(aggs) if by else df.select(aggs)
    g = g.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("span_ns"))
    g = g.with_columns((pl.col("span_ns") - pl.col("idle_ns")).alias("busy_ns"))
    return g.with_columns(
        pl.when(pl.col("span_ns") > 0).then(pl.col("activities") / (pl.col("span_ns") / 1e9)).alias("activities_per_s"),
    )


def exposed_communication(acts: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per ``by`` group (which should include ``device``): communication busy time, the part
    of it not overlapped by other activities (exposed), and the overlapped part."""
    comm = acts.filter(pl.col("category") == "communication")
    rest = acts.filter(pl.col("category") != "communication")
    cols = [*by, "exposed_communication_ns", "overlapped_communication_ns", "communication_ns"]
    if comm.height == 0:
        keys = acts.select(by).unique() if by else pl.DataFrame({"_": [0]})
        out = keys.with_columns(pl.lit(0, pl.Int64).alias(c) for c in cols[len(by):])
        return out.select(cols)
    all_busy = timeline_stats(acts, by).select(*by, pl.col("busy_ns").alias("_all"))
    comm_busy = timeline_stats(comm, by).select(*by, pl.col("busy_ns").alias("communication_ns"))
    if rest.height:
        rest_busy = timeline_stats(rest, by).select(*by, pl.col("busy_ns").alias("_rest"))
    else:
        rest_busy = all_busy.select(*by, pl.lit(0, pl.Int64).alias("_rest"))
    if by:
        j = all_busy.join(comm_busy, on=by, how="left").join(rest_busy, on=by, how="left")
    else:
        j = pl.concat([all_busy, comm_busy, rest_busy], how="horizontal")
    j = j.with_columns(pl.col("communication_ns").fill_null(0), pl.col("_rest").fill_null(0))
    j = j.with_columns((pl.col("_all") - pl.col("_rest")).alias("exposed_communication_ns"))
    j = j.with_columns((pl.col("communication_ns") - pl.col("exposed_communication_ns"))
                       .alias("overlapped_communication_ns"))
    return j.select(cols)




def busy_ns(acts: pl.DataFrame) -> int:
    """The length of the union of the activities' intervals (one timeline, every stream and device)."""
    if acts.height == 0:
        return 0
    df = acts.select("ts_ns", "end_ns").sort(["ts_ns", "end_ns"])
    gaps = (pl.col("ts_ns") - pl.col("end_ns").cum_max().shift(1)).clip(lower_bound=0).fill_null(0).sum()
    return int(df.select(pl.col("end_ns").max() - pl.col("ts_ns").min() - gaps).item())


def busy_by_class(acts: pl.DataFrame) -> dict[str, int]:
    """Busy time (ns) per class, overlaps given to the first class of :data:`BUSY_CLASS_ORDER`:
    the union of the first k classes' intervals minus that of the first k-1."""
    present = set(acts["class"].unique().to_list())
    order = [c for c in BUSY_CLASS_ORDER if c in present or c not in OPTIONAL_BUSY_CLASSES]
    out, before = {}, 0
    for k, cls in enumerate(order):
        upto = busy_ns(acts.filter(pl.col("class").is_in(order[: k + 1])))
        out[cls] = upto - before
        before = upto
    return out


def category_overhead(acts: pl.DataFrame, cover: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per category: activities, GPU time, short activities, and the host-bound idle that
    ended with its activities (gaps measured on each device's timeline, less what a graph
    capture covered: ``cover``)."""
    gaps = activity_gaps(acts, ["device"], cover)
    df = acts.join(gaps, on="activity_id", how="left")
    return df.group_by("category").agg(
        pl.len().alias("activities"), pl.col("dur_ns").sum().alias("gpu_time_ns"),
        pl.col("host_gap_ns").sum().alias("launch_overhead_ns"),
        (pl.col("dur_ns") < SHORT_NS).sum().alias("short_activities"),
    ).sort(["gpu_time_ns", "category"], descending=[True, False])
