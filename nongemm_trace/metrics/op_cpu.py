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

from ..core.frames import add_columns

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
    # measure stage's peak); only the four columns needed are taken before the sort, and each working
    # table is let go as soon as the next is made (they were the measure stage's peak, all held at once)
    thread = (_code("pid").cast(pl.Int64) * (1 << 32) + _code("tid").cast(pl.Int64)).rank("dense").cast(pl.Int64)
    group = (thread * (1 << 32) + _code("name").cast(pl.Int64)).alias("_g")
    order = ops.select("op_id", group, "ts_ns", "end_ns").sort(["_g", "ts_ns", "end_ns"],
                                                               descending=[False, False, True], maintain_order=True)
    inside = order.select(
        "op_id", (pl.col("end_ns").cum_max().shift(1).over("_g") >= pl.col("end_ns")).fill_null(False).alias("_nested"))
    del order
    out = add_columns(ops.select("op_id", "dur_ns"), inside, "op_id")
    del inside
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
    at equal starts) whose range holds it, on any thread; an event inside no op is left out. A trace
    holds one or two such events, so each is a filter over the ops."""
    rows = []
    for ts, dur in overhead.select("ts_ns", "dur_ns").iter_rows():
        holding = ops.lazy().select("op_id", "ts_ns", "end_ns").filter(
            (pl.col("ts_ns") <= ts) & (pl.col("end_ns") >= ts + dur)).sort(
            ["ts_ns", "end_ns"], descending=[True, False]).head(1).collect()
        if holding.height:
            rows.append({"op_id": holding["op_id"][0], "dur_ns": int(dur)})
    return pl.DataFrame(rows, schema={"op_id": ops.schema["op_id"], "dur_ns": pl.Int64}, orient="row") \
        if rows else pl.DataFrame(schema={"op_id": ops.schema["op_id"], "dur_ns": pl.Int64})
