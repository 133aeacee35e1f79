"""Every collective across ranks: one rank's calls, then the same call matched on every rank.

Why: a collective ends on every rank only once the last rank has arrived, so the ranks that came
earlier wait for it inside their collective; totals per rank (exposed communication, one straggler)
say that time was lost, not in which call, by whom, or how fast the data then moved. This module
measures it per call, in two steps (both columnar: joins, ``group_by``, as-of joins; no loop per
event):

* :func:`rank_calls`, per rank: its collective calls (the device kernels that carry the collective's
  parameters; on a rank with none, gloo's ranges, else the host's ``record_param_comms``) with their
  kind, process group, size in bytes, the step they belong to, their start and end on the host's
  clock (``base_ns`` + the trace's time), and the part of each that computation on the same device
  hid (``overlap_ns``: :mod:`.intervals`).
* :func:`match_calls`, across ranks: a collective is the same call on every rank of its process
  group when its sequence number is (where the trace writes one), else when it is the ``k``-th call
  of its kind in that group within the same step (``ProfilerStep#N`` is named alike on every rank),
  as every rank issues a group's collectives in one order. The kernels launched before the trace's window (no
  parameters: :func:`nongemm_trace.analyses.collectives.calls_of` adds them, marked ``before``) are
  the tail of the step before the first one recorded, of a length that differs between ranks: their
  step is :data:`BEFORE` and they are counted from its end. Per call: the arrival skew (latest
  start minus earliest), the rank that arrived last, each rank's wait (the latest start, or its own
  end where its part ended first, minus its own start: the time its collective could not progress;
  a broadcast's root whose message fits the peer's buffer returns without waiting), the transfer
  time (the last arrival's own duration), algorithm bandwidth (bytes / transfer time) and bus
  bandwidth (nccl-tests' factor per kind, data: ``facts/collectives.toml``) against the device's
  link (``devices/links.toml``).

Per rank, a call's duration is its wait plus its transfer, so over the matched calls
``collective_us = wait_us + transfer_us``; its exposed part (not hidden by computation) sums with the
unmatched communication kernels to the rank's exposed communication.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

import polars as pl

from .intervals import interval_cover, overlap
from .late_work import HOST_TYPE, host_before_calls, late_work

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the columns of one rank's calls (:func:`rank_calls`)
CALL_COLUMNS = ("source", "kind", "name", "pg", "seq", "step_name", "k", "bytes", "group_size", "dtype",
                "start_ns", "end_ns", "dur_ns", "overlap_ns", "host")
#: the step of the calls launched before the trace's window (the tail of the step before its first)
BEFORE = "(before the trace)"
#: host records that are no collective (``record_param_comms`` also marks a work's wait)
_NOT_COLLECTIVES = ("wait", "barrier")


@lru_cache(maxsize=1)
def facts() -> dict[str, Any]:
    """Collective kinds, bus-bandwidth factors and dtype sizes (``facts/collectives.toml``)."""
    return tomllib.loads((resources.files("nongemm_trace") / "facts" / "collectives.toml").read_text(encoding="utf-8"))


def kind_of(name: pl.Expr) -> pl.Expr:
    """The collective's kind (``allreduce``, ``allgather``, …) from any spelling; else the spelling's letters."""
    letters = name.str.to_lowercase().str.replace_all(r"[^a-z]", "")
    spellings = {s: kind for kind, names in facts()["kinds"].items() for s in names}
    return letters.replace_strict(spellings, default=letters, return_dtype=pl.Utf8)


def busbw_factor(kind: pl.Expr, n: pl.Expr) -> pl.Expr:
    """nccl-tests' bus-bandwidth factor ``a (n - b) / n`` of a kind at group size ``n`` (null: unknown kind)."""
    table = facts()["busbw"]
    a = kind.replace_strict({k: float(v[0]) for k, v in table.items()}, default=None, return_dtype=pl.Float64)
    b = kind.replace_strict({k: float(v[1]) for k, v in table.items()}, default=None, return_dtype=pl.Float64)
    return a * (n.cast(pl.Float64) - b) / n.cast(pl.Float64)


def _chosen(records: pl.DataFrame) -> pl.DataFrame:
    """The records that time the collectives: the device kernels where there are any, else gloo's
    ranges, else the host ops."""
    for source in ("kernel", "gloo", "host"):
        mine = records.filter(pl.col("source") == source)
        if mine.height:
            return mine
    return records.head(0)


def rank_calls(records: pl.DataFrame, steps: pl.DataFrame, launches: pl.DataFrame, activities: pl.DataFrame,
               default_pg: str | None = None, default_group: int | None = None,
               ops: pl.DataFrame | None = None) -> pl.DataFrame:
    """One rank's collective calls (:data:`CALL_COLUMNS`, times in ns on the host's clock).

    ``records``: :func:`nongemm_trace.load.kineto.collectives.read_collective_records`; ``steps``: the
    steps found (``name, ts_ns, end_ns``, the trace's times); ``launches``: ``correlation, ts_ns`` (a
    kernel's step is that of its launch call); ``activities``: ``device, category, ts_ns, end_ns``
    (the computation that hides a kernel; ``overlap_ns`` is null for host records); ``default_pg`` /
    ``default_group``: the process group and its size where a record names none (gloo's; a run with
    one group: ``distributedInfo``); ``ops``: the top-level host ops (``name, tid, ts_ns, end_ns``), whose
    time before each call is its ``host`` (:func:`~nongemm_trace.metrics.late_work.host_before_calls`)."""
    rec = _chosen(records)
    if rec.height == 0:
        return pl.DataFrame(schema={**CALL_SCHEMA})
    sizes = facts()["dtype_bytes"]
    rec = rec.with_columns(kind_of(pl.col("name")).alias("kind")).filter(~pl.col("kind").is_in(_NOT_COLLECTIVES))
    rec = rec.with_columns(pl.col("pg").fill_null(default_pg), pl.col("group_size").fill_null(default_group))
    # gloo records the input only: an all-gather's output is the group's inputs together
    gathered = (pl.col("kind") == "allgather") & pl.col("out_nelems").is_null()
    rec = rec.with_columns(pl.when(gathered).then(pl.col("in_nelems") * pl.col("group_size"))
                           .otherwise(pl.col("out_nelems")).alias("out_nelems"))
    nelems = pl.max_horizontal("in_nelems", "out_nelems")
    per = pl.col("dtype").replace_strict(sizes, default=None, return_dtype=pl.Int64)
    rec = rec.with_columns((nelems * per).alias("bytes"), pl.col("base_ns").fill_null(0).alias("base_ns"),
                           (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    if "before" not in rec.columns:
        rec = rec.with_columns(pl.lit(False).alias("before"))
    rec = rec.with_row_index("_r")
    # the time that places a call in a step: its launch call's for a kernel, its own otherwise
    calls = launches.select(pl.col("correlation").cast(pl.Int64), pl.col("ts_ns").alias("_launch_ts")).drop_nulls(
        "correlation").unique("correlation")
    rec = rec.join(calls, on="correlation", how="left").with_columns(
        pl.coalesce("_launch_ts", "ts_ns").alias("_t"))
    rec = rec.join(_step_names(rec.select("_r", "_t"), steps), on="_r", how="left").with_columns(
        pl.when(pl.col("before")).then(pl.lit(BEFORE)).otherwise(pl.col("step_name")).alias("step_name"))
    starts = steps.select(pl.col("name").cast(pl.Utf8).alias("step_name"), pl.col("ts_ns").alias("_floor")) \
        .unique("step_name", keep="first")
    rec = rec.join(starts, on="step_name", how="left")
    # computation hides a device kernel; a host range (gloo's threads) is not measured against the host's work
    rec = rec.join(_hidden(rec, activities), on="_r", how="left").with_columns(
        pl.when(pl.col("source") == "kernel").then(pl.col("overlap_ns").fill_null(0)).alias("overlap_ns"))
    rec = rec.join(_host(rec, ops), on="_r", how="left").with_columns(pl.col("host").fill_null(pl.lit([], HOST_TYPE)))
    group = [pl.col("pg").fill_null(""), pl.col("step_name").fill_null(""), "kind"]
    # the calls before the trace counted from the end (-1: the last): ranks hold different numbers of them
    rec = rec.sort("ts_ns", "_r").with_columns(
        (pl.int_range(pl.len()) - pl.when(pl.col("before")).then(pl.len()).otherwise(0)).over(group).alias("k"))
    return rec.select(
        "source", "kind", "name", "pg", "seq", "step_name", pl.col("k").cast(pl.Int64), "bytes", "group_size", "dtype",
        (pl.col("base_ns") + pl.col("ts_ns")).alias("start_ns"), (pl.col("base_ns") + pl.col("end_ns")).alias("end_ns"),
        "dur_ns", pl.col("overlap_ns").cast(pl.Int64), pl.col("host").cast(HOST_TYPE))


def _host(rec: pl.DataFrame, ops: pl.DataFrame | None) -> pl.DataFrame:
    """``_r, host`` of each call (empty lists without ``ops``)."""
    if ops is None or ops.height == 0 or rec.filter(~pl.col("before")).height == 0:
        return rec.select("_r", pl.lit([], HOST_TYPE).alias("host"))
    # a call launched before the trace has no host time in it (its ``_t`` is its kernel's start)
    return host_before_calls(rec.filter(~pl.col("before")).select("_r", "_t", "_floor"), ops)


CALL_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
                "source": pl.Utf8, "kind": pl.Utf8, "name": pl.Utf8, "pg": pl.Utf8, "seq": pl.Int64,
                "step_name": pl.Utf8, "k": pl.Int64, "bytes": pl.Int64, "group_size": pl.Int64, "dtype": pl.Utf8,
                "start_ns": pl.Int64, "end_ns": pl.Int64, "dur_ns": pl.Int64, "overlap_ns": pl.Int64, "host": HOST_TYPE}


def _step_names(times: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``_r, step_name``: the step whose range holds each time ``_t`` (null: none)."""
    if steps.height == 0:
        return times.select("_r", pl.lit(None, pl.Utf8).alias("step_name"))
    right = steps.select(pl.col("ts_ns").alias("_t"), pl.col("end_ns").alias("_s_end"),
                         pl.col("name").cast(pl.Utf8).alias("_s_name")).sort("_t")
    hit = times.sort("_t").join_asof(right, on="_t", strategy="backward")
    return hit.select("_r", pl.when(pl.col("_t") <= pl.col("_s_end")).then(pl.col("_s_name")).alias("step_name"))


def _hidden(rec: pl.DataFrame, activities: pl.DataFrame) -> pl.DataFrame:
    """``_r, overlap_ns``: how much of each kernel record computation on its device covered (host records:
    none; a trace of one device: that device)."""
    kernels = rec.filter(pl.col("source") == "kernel")
    compute = activities.filter(pl.col("category") != "communication")
    if kernels.height == 0 or compute.height == 0:
        return rec.select("_r", pl.lit(0, pl.Int64).alias("overlap_ns"))
    parts = []
    devices = compute["device"].unique().drop_nulls().to_list()
    for dev in devices:  # one cover per device of the rank (one, or a few)
        cover = interval_cover(compute.filter(pl.col("device") == dev))
        mine = kernels.filter(pl.col("device").fill_null(dev) == dev) if len(devices) > 1 else kernels
        parts.append(mine.select("_r", overlap(mine["ts_ns"], mine["end_ns"], cover).alias("overlap_ns")))
    return pl.concat(parts).unique("_r") if parts else rec.select("_r", pl.lit(0, pl.Int64).alias("overlap_ns"))


def match_calls(calls: pl.DataFrame, link_gbps: float | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(collectives, per_rank)`` from every rank's calls (:func:`rank_calls` plus ``rank``).

    ``collectives``: one row per call matched on two ranks or more, in the order of its first arrival:
    ``kind, pg, step_name, k, seq, ranks, bytes, group_size, first_ns, skew_ns, last_rank``, ``start_ns``
    and ``wait_ns`` (per rank, in ``ranks`` order), ``transfer_ns, algbw_gbps, busbw_gbps, link_gbps,
    busbw_share``, ``overlap_ns`` (per rank) and ``exposed_ns`` (per rank). ``per_rank``: ``rank,
    collectives, last, wait_ns, collective_ns, transfer_ns, exposed_ns``."""
    if calls.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    by_seq = calls["seq"].null_count() == 0
    key = ["pg", "seq"] if by_seq else ["pg", "step_name", "kind", "k"]
    c = calls.with_columns(pl.col("pg").fill_null(""), pl.col("step_name").fill_null(""))
    grouped = c.group_by(key).agg(pl.col("rank").n_unique().alias("_n"))
    c = c.join(grouped.filter(pl.col("_n") >= 2).drop("_n"), on=key, how="semi")
    if c.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    c = c.with_columns(pl.col("start_ns").max().over(key).alias("_last_start"))
    # a rank waits in its collective from its arrival until the last one's, unless its part ended first
    # (a broadcast's root whose message fits the peer's buffer returns without waiting)
    c = c.with_columns((pl.min_horizontal("_last_start", "end_ns") - pl.col("start_ns")).clip(lower_bound=0)
                       .alias("wait_ns"),
                       (pl.col("dur_ns") - pl.col("overlap_ns")).alias("exposed_ns"))
    # the last arrival: the latest start, ties to the lowest rank
    last = c.sort([*key, "start_ns", "rank"], descending=[False] * len(key) + [True, False]).unique(
        key, keep="first").select(*key, pl.col("rank").alias("last_rank"), pl.col("dur_ns").alias("transfer_ns"))
    described = [pl.col(x).first() for x in ("kind", "step_name", "k", "seq") if x not in key]
    one = c.sort("rank").group_by(key).agg(
        *described, pl.col("rank"), pl.col("bytes").max(), pl.col("group_size").max(),
        pl.col("start_ns").min().alias("first_ns"),
        (pl.col("start_ns").max() - pl.col("start_ns").min()).alias("skew_ns"), pl.col("start_ns"),
        pl.col("wait_ns"),
        pl.col("overlap_ns"), pl.col("exposed_ns"))
    one = one.join(last, on=key)
    n = pl.coalesce(pl.col("group_size"), pl.col("rank").list.len())
    algbw = pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns"))  # bytes/ns = GB/s
    one = one.with_columns(algbw.alias("algbw_gbps")).with_columns(
        (pl.col("algbw_gbps") * busbw_factor(pl.col("kind"), n)).alias("busbw_gbps"),
        pl.lit(link_gbps, pl.Float64).alias("link_gbps"))
    one = one.with_columns((pl.col("busbw_gbps") / pl.col("link_gbps")).alias("busbw_share")).sort("first_ns")
    one = one.rename({"rank": "ranks"})
    late_call, late_rank = late_work(c, key, last)
    one = one.join(late_call, on=key, how="left").with_columns(pl.col("late_work").fill_null(pl.lit([], HOST_TYPE)))
    per_rank = c.join(last.select(*key, "last_rank"), on=key).group_by("rank").agg(
        pl.len().alias("collectives"), (pl.col("rank") == pl.col("last_rank")).sum().alias("last"),
        pl.col("wait_ns").sum(), pl.col("dur_ns").sum().alias("collective_ns"),
        (pl.col("dur_ns") - pl.col("wait_ns")).sum().alias("transfer_ns"),
        pl.when(pl.col("exposed_ns").is_not_null().any()).then(pl.col("exposed_ns").sum()).alias("exposed_ns")
    ).sort("rank")
    per_rank = per_rank.join(late_rank, on="rank", how="left").with_columns(
        pl.col("late_work").fill_null(pl.lit([], HOST_TYPE)))
    return one, per_rank
