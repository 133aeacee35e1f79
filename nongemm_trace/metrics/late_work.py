"""The host work that made a rank late to a collective.

Why: a rank that arrives last at a collective makes every other rank wait, and what users look up
next is what that rank was doing instead. A trace cannot say why a host was slow, but it can say
where its time went: between a rank's previous collective call and this one, the top-level host
ops of its threads and the time outside any op. The same window exists on every
rank of the call, so the late rank's time per op, beyond the other ranks' median for that op,
names the work that made it late: an op that ran longer, an op the others did not run, or time in
no recorded op at all (a stall, a garbage collection, a sleep).

Two steps, both columnar (as-of joins and group-bys, no loop per event):

* :func:`host_before_calls`, per rank: each call's window and the host time in it by op name (the
  :data:`KEPT` largest, the rest summed as :data:`OTHER_OPS`, the window's time outside top-level
  ops as :data:`OUTSIDE_OPS`), carried with the rank's calls to wherever ranks are matched;
* :func:`late_work`, across ranks: per matched call, the last rank's excess per op over the other
  ranks' median; per rank, those excesses summed over the calls it was last on.
"""

from __future__ import annotations

import polars as pl

from .intervals import interval_cover, overlap

#: the ops a call's window keeps by name (the largest); the rest are summed as one row
KEPT = 12
#: the row for a window's ops beyond the :data:`KEPT` largest
OTHER_OPS = "(other ops)"
#: the row for a window's host time outside every top-level op on its thread
OUTSIDE_OPS = "(host time outside ops)"
#: the excesses listed per call and per rank (the largest first)
LISTED = 3

HOST_TYPE: pl.DataType = pl.List(pl.Struct({"op": pl.Utf8, "ns": pl.Int64}))


def top_level_host(ops: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """``name, tid, ts_ns, end_ns``: the host's top-level work, ``ops`` (the outermost ones: the caller's
    choice) and the runtime calls (``calls``) made outside every one of them on their thread: a ``cudaEventSynchronize``
    under no op is the host waiting on the device, time a rank spends that no op shows."""
    cols = ("name", "tid", "ts_ns", "end_ns")
    top = ops.select(pl.col("name").cast(pl.Utf8), pl.col("tid").cast(pl.Utf8), "ts_ns", "end_ns")
    rt = calls.select(pl.col("name").cast(pl.Utf8), pl.col("tid").cast(pl.Utf8), "ts_ns", "end_ns")
    if rt.height == 0 or top.height == 0:
        return pl.concat([top, rt]).select(cols)
    enclosing = top.select("tid", "ts_ns", pl.col("end_ns").alias("_op_end")).sort("ts_ns")
    under = rt.sort("ts_ns").join_asof(enclosing, on="ts_ns", by="tid", strategy="backward", check_sortedness=False)
    free = under.filter(pl.col("_op_end").is_null() | (pl.col("_op_end") < pl.col("end_ns"))).select(cols)
    return pl.concat([top, free])


def host_before_calls(calls: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """``_r, host``: for each call of one rank (``_r, _t, _floor``: its row, when it was issued, and the
    start of its step), the host time between the rank's previous call and ``_t``, per top-level op
    name (``ops``: ``name, tid, ts_ns, end_ns`` of the top-level ops of every thread: the forward pass
    on the main thread and the backward on autograd's both lead up to a gradient's all-reduce), as a
    list of ``{op, ns}`` largest first; :data:`OUTSIDE_OPS` is the window's time in no op of any
    thread. The rank's first call is measured from the start of its step, which is named alike on
    every rank (the profile's own start is not: each rank's profiler starts when it starts); outside
    a step it has no window (an empty list)."""
    if calls.height == 0:
        return pl.DataFrame(schema={"_r": pl.UInt32, "host": HOST_TYPE})
    c = calls.select("_r", "_t", "_floor").sort("_t", "_r")
    c = c.with_columns(pl.coalesce(pl.col("_t").shift(1), "_floor").alias("_from"))
    o = ops.select(pl.col("name").cast(pl.Utf8), "ts_ns", "end_ns").sort("ts_ns")
    # each op belongs to the first call issued at or after its start, and counts up to that call
    owner = o.join_asof(c.select(pl.col("_t").alias("_owner_t"), "_r", "_from"), left_on="ts_ns",
                        right_on="_owner_t", strategy="forward")
    inside = owner.filter(pl.col("_r").is_not_null() & (pl.col("ts_ns") >= pl.col("_from")).fill_null(False)) \
        .with_columns(pl.min_horizontal("end_ns", "_owner_t").alias("_end"))
    inside = inside.with_columns((pl.col("_end") - pl.col("ts_ns")).clip(lower_bound=0).alias("ns"))
    per_op = inside.group_by("_r", "name").agg(pl.col("ns").sum())
    ranked = per_op.with_columns(pl.col("ns").rank("ordinal", descending=True).over("_r").alias("_k"))
    named = ranked.filter(pl.col("_k") <= KEPT).select("_r", pl.col("name").alias("op"), "ns")
    rest = ranked.filter(pl.col("_k") > KEPT).group_by("_r").agg(pl.col("ns").sum()).select(
        "_r", pl.lit(OTHER_OPS).alias("op"), "ns")
    # the window's time in no op of any thread: its length minus what the union of the ops covers of it
    windows = c.filter(pl.col("_from").is_not_null())
    covered = overlap(windows["_from"], windows["_t"], interval_cover(o))
    outside = windows.select("_r", pl.lit(OUTSIDE_OPS).alias("op"),
                             (pl.col("_t") - pl.col("_from") - covered).clip(lower_bound=0).alias("ns"))
    rows = pl.concat([named, rest, outside]).filter(pl.col("ns") > 0).sort(["_r", "ns", "op"],
                                                                            descending=[False, True, False])
    got = rows.group_by("_r", maintain_order=True).agg(pl.struct("op", "ns").alias("host"))
    return c.select("_r").join(got, on="_r", how="left").with_columns(
        pl.col("host").fill_null(pl.lit([], HOST_TYPE)).cast(HOST_TYPE))


def late_work(calls: pl.DataFrame, key: list[str], last: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(per_call, per_rank)``. ``calls``: every rank's matched calls (``key`` columns, ``rank``, ``host``);
    ``last``: ``key`` columns and ``last_rank``. ``per_call``: ``key`` columns and ``late_work`` (the last
    rank's excess over the other ranks' median per op, the :data:`LISTED` largest positive ones:
    ``{op, ns}``); ``per_rank``: ``rank`` and ``late_work``, those excesses summed over the calls it was
    last on."""
    empty_call = pl.DataFrame(schema={**{k: calls.schema[k] for k in key}, "late_work": HOST_TYPE})
    empty_rank = pl.DataFrame(schema={"rank": pl.Int64, "late_work": HOST_TYPE})
    if "host" not in calls.columns or calls.height == 0:
        return empty_call, empty_rank
    rows = calls.select(*key, "rank", "host").explode("host").drop_nulls("host").unnest("host")
    if rows.height == 0:
        return empty_call, empty_rank
    # every rank of a call against the ops of its last rank's window, the only ones that can exceed the
    # others' (at most KEPT + 2 a call, whatever the other ranks ran: the grid stays ranks x 14 a call);
    # an op a rank did not run counts 0 there
    last = last.select(*key, "last_rank")
    late_ops = rows.join(last, on=key).filter(pl.col("rank") == pl.col("last_rank")).select(*key, "op")
    grid = calls.select(*key, "rank").join(late_ops, on=key)
    grid = grid.join(rows, on=[*key, "rank", "op"], how="left").with_columns(pl.col("ns").fill_null(0))
    grid = grid.join(last, on=key)
    is_last = pl.col("rank") == pl.col("last_rank")
    excess = grid.group_by(*key, "op").agg(
        pl.col("ns").filter(is_last).first().alias("_late"), pl.col("ns").filter(~is_last).median().alias("_others"),
        pl.col("last_rank").first()).with_columns((pl.col("_late") - pl.col("_others")).round(0).cast(pl.Int64)
                                                  .alias("ns")).filter(pl.col("ns") > 0)
    top = lambda df, by: df.sort([*by, "ns", "op"], descending=[False] * len(by) + [True, False]).group_by(  # noqa: E731
        by, maintain_order=True).agg(pl.struct("op", "ns").head(LISTED).alias("late_work"))
    per_call = top(excess, key)
    per_rank = top(excess.group_by(pl.col("last_rank").alias("rank"), "op").agg(pl.col("ns").sum()), ["rank"])
    return per_call, per_rank.with_columns(pl.col("rank").cast(pl.Int64))
