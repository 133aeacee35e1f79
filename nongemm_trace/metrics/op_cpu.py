"""Host (CPU) time of every op call, defined as torch.profiler defines it.

* ``cpu_ns``: the call's duration (inclusive host time), counted for the outermost call of
  its name only: a call nested inside a call of the same name on the same thread (``aten::set_``
  calling its other overload) is already inside that call's time, so an op name's total is
  not counted twice (torch.profiler's ``key_averages`` merges such a call into its parent).
* ``self_cpu_ns``: the duration minus the durations of its direct children on the same
  thread: the ops nested directly in it and the runtime/driver calls (``cudaLaunchKernel``,
  ``cudaMemcpyAsync``, ``cudaStreamSynchronize``, …) whose innermost op it is. torch.profiler
  lists those calls as events of their own, so its self CPU time leaves them out too.
  Kineto writes its own overhead (``Activity Buffer Request``) on no thread of the process
  (pid -1), yet torch subtracts it from the op it interrupted (its in-memory event knows the
  thread). Here it is a child of the innermost op, on any thread, whose range holds it: the op
  that was running when the profiler took the time (``aten::gather`` of a Llama trace kept 2 ms of
  a buffer request, 31x its own self time; docs/definitions.md).

Columnar throughout: one sort for the same-name nesting, group-bys for the children.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import add_columns, int_scalar

CPU_COLUMNS = ("cpu_time_ns", "self_cpu_time_ns")


def call_cpu_times(ops: pl.DataFrame, launches: pl.DataFrame | None = None,
                   launch_ops: pl.DataFrame | None = None, overhead: pl.DataFrame | None = None) -> pl.DataFrame:
    """``op_id, cpu_ns, self_cpu_ns`` for every op of the linked op table ``ops`` (with
    ``parent_id``); ``launches`` (``launch_id, dur_ns``) and ``launch_ops`` (``launch_id,
    op_id``: each launch call's innermost op) make the runtime calls children too, and ``overhead``
    (``ts_ns, dur_ns``: the profiler's bookkeeping) a child of the innermost op holding it."""
    id_type = ops.schema["op_id"]
    # the outermost call of its name on its thread: no earlier-starting call of that name still open
    # at its end (starts ascending, longer first at equal starts, so a parent precedes its children)
    # (thread, name) as one int64: the thread's dense rank in the high half, the name's categorical
    # code in the low one (a struct of three strings ranked cost 100 MB at 200 MB of JSON, the
    # measure stage's peak); only the three columns needed are taken before they are ordered, and each
    # working table is let go as soon as the next is made (they were the measure stage's peak, all held
    # at once)
    thread = (_code("pid").cast(pl.Int64) * (1 << 32) + _code("tid").cast(pl.Int64)).rank("dense").cast(pl.Int64)
    group = (thread * (1 << 32) + _code("name").cast(pl.Int64)).alias("_g")
    rows, by_group = _ordered(ops.select(group, "ts_ns", "end_ns"))
    # the flags are written back to the rows they were read from (the permutation): no join on the ids
    nested = pl.repeat(False, ops.height, eager=True).scatter(rows, _nested(by_group))
    del by_group, rows
    out = ops.select("op_id", "dur_ns").with_columns(nested.alias("_nested"))
    del nested
    # the columns first, then the rows: a filter of the whole op table copies every column of it
    # (340 MB at 1 GB of JSON, the measure stage's peak); the sums by the streaming engine, whose
    # scratch memory is a third of the in-memory group-by's
    kids = [ops.lazy().select("parent_id", "dur_ns").filter(pl.col("parent_id").is_not_null()).select(
        pl.col("parent_id").cast(id_type).alias("op_id"), "dur_ns")]
    if launches is not None and launch_ops is not None and launches.height:
        calls = launch_ops.lazy().filter(pl.col("op_id").is_not_null()).join(
            launches.lazy().select("launch_id", "dur_ns"), on="launch_id")
        kids.append(calls.select(pl.col("op_id").cast(id_type), "dur_ns"))
    if overhead is not None and overhead.height:
        kids.append(_interrupted(ops, overhead).lazy().select(pl.col("op_id").cast(id_type), "dur_ns"))
    children = pl.concat(kids).group_by("op_id").agg(pl.col("dur_ns").sum().alias("_kids")).collect(engine="streaming")
    out = add_columns(out, children, "op_id")
    return out.select(
        "op_id",
        pl.when(pl.col("_nested")).then(0).otherwise(pl.col("dur_ns")).cast(pl.Int64).alias("cpu_ns"),
        (pl.col("dur_ns") - pl.col("_kids").fill_null(0)).clip(lower_bound=0).cast(pl.Int64).alias("self_cpu_ns"),
    )


def _ordered(keyed: pl.DataFrame) -> tuple[pl.Series, pl.DataFrame]:
    """The rows of ``keyed`` (``_g, ts_ns, end_ns``) group by group (the groups in any order), each
    group's by start, longer first, then row, and ``keyed`` in that order. The loader's rows follow
    start and end on each thread already, so the rows gathered per group (a group-by keeps each
    group's rows in order) are in that order where a check finds them so: no sort (three sort keys,
    the ends descending, were a third of the CPU times' cost, and a stable sort of the group alone
    half of what was left); else the sort by all three."""
    rows = keyed.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_r"), "_g").group_by("_g").agg("_r") \
        .explode("_r")["_r"]
    if not (keyed["ts_ns"].null_count() or keyed["end_ns"].null_count()):
        by_group = keyed[rows]
        g, ts, end = by_group["_g"], by_group["ts_ns"], by_group["end_ns"]
        step = (g != g.shift(-1)) | (ts < ts.shift(-1)) | ((ts == ts.shift(-1)) & (end >= end.shift(-1)))
        if bool(step.fill_null(True).all()):
            return rows, by_group
        del by_group, g, ts, end
    rows = keyed.select(pl.arg_sort_by(["_g", "ts_ns", "end_ns"], descending=[False, False, True],
                                       maintain_order=True)).to_series()
    return rows, keyed[rows]


def _nested(by_group: pl.DataFrame) -> pl.Series:
    """Per row of ``by_group`` (``_g, ts_ns, end_ns`` in :func:`_ordered`'s order): an earlier row of
    its group ends at or after its end. The running maximum of the ends within each group is one
    running maximum over (group's rank along the rows, end) packed in an int64 (a window per group:
    a hash of the groups); the window where the packed keys would overflow."""
    g, end = by_group["_g"], by_group["end_ns"]
    if by_group.height and not end.null_count():
        rank = pl.select((g != g.shift()).fill_null(True).cum_sum().cast(pl.Int64)).to_series()
        lo, hi = int_scalar(end.min()), int_scalar(end.max())
        span = hi - lo + 1
        if int_scalar(rank[-1]) * span + span < _INT64_MAX:
            key = rank * span + (end - lo)
            return pl.select((key.cum_max().shift(1) >= key).fill_null(False)).to_series()
    return by_group.select((pl.col("end_ns").cum_max().shift(1).over("_g") >= pl.col("end_ns"))
                           .fill_null(False)).to_series()


_INT64_MAX = (1 << 63) - 1


def _code(col: str) -> pl.Expr:
    """A text column's categorical code (u32): equal texts, equal codes."""
    return pl.col(col).cast(pl.Categorical).to_physical()


def in_window(ops: pl.DataFrame, lo: int | None, hi: int | None) -> pl.DataFrame:
    """The op ids whose range lies inside [lo, hi] (the kept steps of ``skip_steps``); all when no window."""
    if lo is None or hi is None:
        return ops.select("op_id")
    return ops.select("op_id", "ts_ns", "end_ns").filter((pl.col("ts_ns") >= lo) & (pl.col("end_ns") <= hi)) \
        .select("op_id")


def _interrupted(ops: pl.DataFrame, overhead: pl.DataFrame) -> pl.DataFrame:
    """``op_id, dur_ns``: for each overhead event, the innermost op (the latest start; the earliest end
    at equal starts) whose range holds it, on any thread; an event inside no op is left out.

    Only the ops that hold some event can be one: found for all events at once (the events by start,
    the earliest end among those starting at or after an op's start), they are a few tens of 400 k;
    each event is then paired with each of them (a filter of every op per event was 1.5 ms an
    event, and a trace of 200 MB holds 30 events). Two holding ops of one start and end leave the
    pick to the query over every op, as before (which of them it takes is its sort's)."""
    events = overhead.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_e"), "ts_ns", "dur_ns").drop_nulls()
    near = ops.select("op_id", pl.col("ts_ns").alias("_ots"), pl.col("end_ns").alias("_oend")).clear()
    if events.height:
        by_start = events.select("ts_ns", (pl.col("ts_ns") + pl.col("dur_ns")).alias("_end")).sort("ts_ns")
        first_end = by_start["_end"].reverse().cum_min().reverse()
        at = by_start["ts_ns"].search_sorted(ops["ts_ns"], "left").cast(pl.Int64)
        holds = (at < by_start.height) & (first_end.gather(at.clip(upper_bound=by_start.height - 1)) <= ops["end_ns"])
        near = ops.select("op_id", pl.col("ts_ns").alias("_ots"), pl.col("end_ns").alias("_oend")).filter(
            holds & ops["ts_ns"].is_not_null() & ops["end_ns"].is_not_null())
    if events.height * near.height > _PAIRS_AT_ONCE:  # very many of both: each event on its own
        picks = [_innermost(near.rename({"_ots": "ts_ns", "_oend": "end_ns"}), ts, dur, 2).select(
            pl.lit(e, pl.Int64).alias("_e"), pl.col("op_id"), pl.col("ts_ns").alias("_ots"),
            pl.col("end_ns").alias("_oend")) for e, ts, dur in events.iter_rows()]
        pairs = pl.concat([near.head(0).select(pl.lit(0, pl.Int64).alias("_e"), "op_id", "_ots", "_oend"), *picks])
    else:
        pairs = events.join(near, how="cross").filter(
            (pl.col("_ots") <= pl.col("ts_ns")) & (pl.col("_oend") >= pl.col("ts_ns") + pl.col("dur_ns"))) \
            .sort(["_e", "_ots", "_oend"], descending=[False, True, False]).select("_e", "op_id", "_ots", "_oend")
    same = (pl.col("_e") == pl.col("_e").shift(-1)) & (pl.col("_ots") == pl.col("_ots").shift(-1)) \
        & (pl.col("_oend") == pl.col("_oend").shift(-1))
    first = pairs.with_columns(same.fill_null(False).alias("_tie")).filter(pl.col("_e").is_first_distinct()) \
        .join(events, on="_e").sort("_e")
    ties = first["_tie"].arg_true()
    if ties.len():  # a tie of start and end: as the query over every op picks
        chosen = [_innermost(ops, ts, dur, 1)["op_id"][0]
                  for ts, dur in first[ties].select("ts_ns", "dur_ns").iter_rows()]
        first = first.with_columns(first["op_id"].scatter(ties, chosen))
    return first.select(pl.col("op_id").cast(ops.schema["op_id"]), pl.col("dur_ns").cast(pl.Int64))


#: events x holding ops paired in one table at most (else each event is a query of its own)
_PAIRS_AT_ONCE = 1 << 22


def _innermost(ops: pl.DataFrame, ts, dur, k: int) -> pl.DataFrame:
    """``op_id, ts_ns, end_ns`` of the first ``k`` ops holding ``[ts, ts + dur]``, innermost first."""
    return ops.lazy().select("op_id", "ts_ns", "end_ns").filter(
        (pl.col("ts_ns") <= ts) & (pl.col("end_ns") >= ts + dur)).sort(
        ["ts_ns", "end_ns"], descending=[True, False]).head(k).collect()
