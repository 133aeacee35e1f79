"""GPU activities that overlap on one stream: counted as they are, and reported with the time involved.

A CUDA stream runs its work in order, one activity after another; consecutive kernels may overlap a
little (programmatic dependent launch on Hopper starts the next kernel's prologue early, clocks
round). A trace in which much of a stream's time overlaps itself was not written by a profiler as
the device ran it (20,000 kernels overlapping in a 1 s trace add up to 20,000 s of GPU time): its
summed GPU time is not the device's. The loader keeps the activities as written (the sums are what
the file says) and warns when more than :data:`OVERLAP_SHARE` of a stream's activity time overlaps
earlier activities of the same stream, naming the streams and the time. Computed on the loaded
tables, so every load path (C or Python, whole or streamed) gives the same warning.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import polars as pl

#: the share of a stream's activity time that may overlap its own earlier activities before the trace
#: is warned about (a few percent is a dependent launch's overlap or clock rounding)
OVERLAP_SHARE = 0.05
#: the streams named in the warning (the others are counted)
SHOWN = 3


def stream_overlaps(acts: pl.DataFrame) -> pl.DataFrame:
    """Per ``(device, stream)``: the summed ``dur_ns`` of its activities, ``overlap_ns``, the time of each
    activity already covered by the stream's earlier ones (sorted by start), summed (the sum of durations
    minus the length of their union), and ``activities``, how many overlap an earlier one. Activities
    without a stream are left out.

    A trace has a few streams: each is sorted and swept alone (its starts and ends only), which holds
    one stream's rows at a time, half the memory of one sort of every activity with its keys and a
    window over them (the load's peak on a dense trace); past :data:`MANY_STREAMS` (a hostile file,
    a stream per kernel) one sort and a window do it in one pass."""
    keys = ["device", "stream"]
    if acts.height == 0 or not set(keys) <= set(acts.columns):
        return pl.DataFrame(schema=_SCHEMA)
    src = acts.lazy().filter(pl.col("stream").is_not_null())
    groups = src.select(keys).unique().sort(keys).collect()
    if groups.height > MANY_STREAMS:
        return _overlaps_at_once(src, keys)
    whole = groups.height == 1 and acts["stream"].null_count() == 0  # one stream: every row, no filtered copy
    out = [_in_order((src if whole else src.filter(pl.col("device").eq_missing(device) & (pl.col("stream") == stream)))
                     .select("ts_ns", "end_ns").collect())
           .select(pl.lit(device, pl.Int64).alias("device"), pl.lit(stream, pl.Int64).alias("stream"),
                   *_sums(_covered(pl.col("end_ns").cum_max().shift(1))))
           for device, stream in groups.iter_rows()]
    return pl.concat(out).cast(_SCHEMA) if out else pl.DataFrame(schema=_SCHEMA)


#: the result's columns
_SCHEMA = pl.Schema({"device": pl.Int64, "stream": pl.Int64, "activities": pl.UInt32, "dur_ns": pl.Int64,
                     "overlap_ns": pl.Int64})
#: above this many streams, :func:`stream_overlaps` sweeps them all in one sort instead of one each
MANY_STREAMS = 64


def _in_order(one: pl.DataFrame) -> pl.DataFrame:
    """One stream's ``ts_ns, end_ns`` sorted by start, then end; as it is where the starts already rise
    strictly (kernels are written in order: no sorted copy, and ties have no order to settle)."""
    ts = one["ts_ns"]
    if one.height < 2 or bool((ts.slice(1) > ts.slice(0, one.height - 1)).all()):
        return one
    return one.sort("ts_ns", "end_ns")


def _covered(before: pl.Expr) -> pl.Expr:
    """The part of each activity covered by ``before``, the end of its stream's work before it (the first
    activity: its own start, nothing before it)."""
    covered_until = before.fill_null(pl.col("ts_ns"))
    return (pl.min_horizontal(pl.col("end_ns"), covered_until) - pl.col("ts_ns")).clip(lower_bound=0)


def _sums(covered: pl.Expr) -> list[pl.Expr]:
    """A stream's sums (its durations as ``end_ns - ts_ns``, which the contract makes them)."""
    return [(covered > 0).sum().alias("activities"), (pl.col("end_ns") - pl.col("ts_ns")).sum().alias("dur_ns"),
            covered.sum().alias("overlap_ns")]


def _overlaps_at_once(src: pl.LazyFrame, keys: list[str]) -> pl.DataFrame:
    covered = _covered(pl.col("end_ns").cum_max().shift(1).over(keys))
    return (src.select(*keys, "ts_ns", "end_ns", "dur_ns").sort(*keys, "ts_ns", "end_ns")
            .with_columns(covered.alias("overlap_ns"))
            .group_by(keys).agg((pl.col("overlap_ns") > 0).sum().alias("activities"), pl.col("dur_ns").sum(),
                                pl.col("overlap_ns").sum())
            .sort(keys).collect().cast(_SCHEMA))


def note_stream_overlap(trace: Any) -> None:
    """Warn on ``trace`` (``stream_overlap``) when a stream's activities overlap each other for more than
    :data:`OVERLAP_SHARE` of its activity time; only for formats whose activities are GPU work on
    streams (a deployment stack's layers or nodes have no stream to overlap on)."""
    from .formats import format_of

    if format_of(trace).time_basis != "gpu":
        return
    per = stream_overlaps(trace.activities)
    bad = per.filter(pl.col("overlap_ns") > OVERLAP_SHARE * pl.col("dur_ns"))
    if bad.height == 0:
        return
    bad = bad.sort("overlap_ns", descending=True)
    shown = "; ".join(f"device {d} stream {s}: {_time(o)} of its {_time(t)}"
                      for d, s, o, t in bad.head(SHOWN).select("device", "stream", "overlap_ns", "dur_ns").iter_rows())
    more = f"; {bad.height - SHOWN} more streams" if bad.height > SHOWN else ""
    over, total = int(bad["overlap_ns"].sum()), int(bad["dur_ns"].sum())
    trace.note("stream_overlap", int(bad["activities"].sum()),
               f"GPU activities overlap on {bad.height} stream{'s' if bad.height > 1 else ''}, where work runs one "
               f"after another: {_time(over)} of {_time(total)} of their time overlaps earlier activities of the "
               f"same stream ({shown}{more}); the GPU time summed from this trace is more than the device ran")


def overlaps_noted(load: Callable) -> Callable:
    """A loader whose every trace has :func:`note_stream_overlap` applied."""
    @functools.wraps(load)
    def noted(*args, **kwargs):
        trace = load(*args, **kwargs)
        note_stream_overlap(trace)
        return trace
    return noted


def _time(ns: int) -> str:
    """A duration for a warning: us below a second, else seconds."""
    return f"{ns / 1e9:,.1f} s" if ns >= 1e9 else f"{ns / 1000:,.1f} us"
