"""Link every GPU activity to its launch call, its launching op and its top-level op.

* launch call: the host runtime/driver call with the same ``correlation`` id.
* launching op: the innermost op whose interval on the launch thread contains the
  launch call. The activity's (or launch call's) ``External id`` is taken when it
  names such an op on that thread (``attribution = external_id``); old traces
  write the correlation id there, colliding with unrelated ops, so an External id
  that does not contain the launch call is ignored and nesting decides
  (``nesting``). Kernels replayed from a CUDA graph hang off one
  ``cudaGraphLaunch`` (``graph_launch``): the op that replayed the graph is known,
  the per-kernel op is not. A launch call with no op around it gives
  ``launch_only``; no launch call in the file (launched before profiling began)
  gives ``none``.

The top-level op (the outermost real operator above the launching op) needs to know
which ranges are wrappers, which is the taxonomy's word: :mod:`nongemm_trace.classify`
resolves it on the tree built here.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..core.frames import add_columns, int_of_text, lookup_columns
from ..core.trace import Anomaly, Trace
from ..vocabulary import ATTRIBUTIONS  # noqa: F401  (re-exported)
from .nesting import op_tree


@dataclass
class Linked:
    """The trace's tables after linking.

    ``ops`` gains ``depth`` and ``parent_id``; ``activities`` gains ``launch_id``, ``launch_name``,
    ``launch_ts_ns``, ``launch_pid``, ``launch_tid``, ``launch_op_id`` and ``attribution``.
    """

    trace: Trace
    ops: pl.DataFrame
    activities: pl.DataFrame
    #: what linking found odd, in the order found (the trace itself is not changed)
    anomalies: tuple[Anomaly, ...] = ()
    #: ``launch_id, op_id``: every launch call's innermost op on its thread (null: none), from the
    #: same sweep as the op tree; the runtime calls are children of that op (its self CPU time)
    launch_ops: pl.DataFrame | None = None


def link(trace: Trace, ops: pl.DataFrame | None = None) -> Linked:
    """Link ``trace`` (reads only the contract's columns: :mod:`nongemm_trace.schema`). ``ops`` is the
    trace's op table with any columns of the caller's added (kept as they are); default the trace's."""
    if ops is None:
        ops = trace.ops
    # every launch call is a query of the same sweep that builds the op tree: its innermost op
    launch_points = trace.launches.select(
        pl.col("launch_id").alias("qid"), "pid", "tid", "ts_ns", "end_ns")
    ops, bad_nesting, launch_ops = op_tree(ops, launch_points)
    found: list[Anomaly] = []
    _note(found, "ops_overlap", bad_nesting,
          f"{bad_nesting} ops overlap their enclosing op on the same thread without nesting in it")

    acts = _attach_launches(trace, found)
    assert launch_ops is not None  # asked for: the launch points
    acts = _attach_ops(ops, acts, trace.launches, launch_ops, found)
    if launch_ops is not None:
        launch_ops = launch_ops.select(pl.col("qid").alias("launch_id"), "op_id")
    return Linked(trace=trace, ops=ops, activities=acts, anomalies=tuple(found), launch_ops=launch_ops)


def _note(found: list[Anomaly], code: str, count: int, message: str) -> None:
    if count:
        found.append(Anomaly(code, int(count), message))


def _attach_launches(trace: Trace, found: list[Anomaly]) -> pl.DataFrame:
    acts = trace.activities
    # filled from the event's pid / tid only where the args lack them: a column written anew is a copy
    # beside the trace's own (16 bytes an activity for the two, held as long as the analysis)
    acts = acts.with_columns(
        pl.coalesce(pl.col(col), int_of_text(acts, text)).alias(col)
        for col, text in (("device", "pid"), ("stream", "tid")) if acts[col].null_count())
    la = trace.launches.filter(pl.col("correlation").is_not_null())
    wanted = acts.select(pl.col("correlation").drop_nulls().unique())
    la = la.join(wanted, on="correlation", how="semi")
    calls = la.height
    la = la.sort(["correlation", "ts_ns", "tid", "name"]).unique(subset=["correlation"], keep="first")
    # the calls kept are one per distinct id: their count is the distinct count (no hashing of the ids
    # a second time to count them)
    dup = calls - la.height
    _note(found, "duplicate_correlation", dup,
          f"{dup} launch calls reuse a correlation id already taken; the earliest one was used")
    # the launch call's columns that later stages read (its end is ts + dur, and its External id is read
    # by _attach_ops alone, through launch_id: neither is held per activity, 16 bytes a row each)
    la = la.select(
        "correlation", "launch_id", pl.col("name").alias("launch_name"), pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"), pl.col("ts_ns").alias("launch_ts_ns"),
        pl.col("dur_ns").alias("launch_dur_ns"), pl.col("graph_launch").alias("_graph_launch"),
    )
    # only the key column goes through the join (a left join gathers every column of the left table
    # anew: a copy of all activities, most of a GPU-only trace's memory); at most one call per key
    return add_columns(acts, la, "correlation", nulls_equal=False)


def _attach_ops(ops: pl.DataFrame, acts: pl.DataFrame, launches: pl.DataFrame, launch_ops: pl.DataFrame,
                found: list[Anomaly]) -> pl.DataFrame:
    # the launched activities' columns read here, with their call's External id and end (gathered for
    # these rows only: the activities do not keep them)
    launched = lookup_columns(
        acts.filter(pl.col("launch_id").is_not_null()).select(
            "activity_id", "launch_id", "external_id", "launch_pid", "launch_tid", "launch_ts_ns"),
        "launch_id",
        launches.select("launch_id", pl.col("external_id").alias("launch_external_id"),
                        pl.col("end_ns").alias("launch_end_ns")),
        "launch_id")
    # 1. External id, accepted only when that op contains the launch call on its thread
    # (only ops whose id some launched activity names: most ops launch nothing, and sorting
    # them all would copy the op table's keys several times)
    named = launched.select(pl.coalesce("external_id", "launch_external_id").alias("_eid")).drop_nulls().unique()
    ext = ops.select(
        pl.col("external_id").alias("_eid"), pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
        pl.col("op_id").alias("_ext_op"), pl.col("ts_ns").alias("_ots"), pl.col("end_ns").alias("_oend"),
    ).join(named, on="_eid", how="semi").sort(["_eid", "launch_pid", "launch_tid", "_ots", "_oend"]) \
        .unique(subset=["_eid", "launch_pid", "launch_tid"], keep="first")
    cand = launched.select(
        "activity_id", "launch_pid", "launch_tid", "launch_ts_ns", "launch_end_ns",
        pl.coalesce("external_id", "launch_external_id").alias("_eid"),
    ).join(ext, on=["_eid", "launch_pid", "launch_tid"], how="left")
    inside = (pl.col("_ots") <= pl.col("launch_ts_ns")) & (pl.col("launch_end_ns") <= pl.col("_oend"))
    cand = cand.select("activity_id", pl.when(inside).then(pl.col("_ext_op")).otherwise(None).alias("_ext_op"))
    rejected = cand.join(launched.select("activity_id", pl.coalesce("external_id", "launch_external_id").alias("e")),
                         on="activity_id").filter(pl.col("_ext_op").is_null() & pl.col("e").is_not_null()
                                                  & (pl.col("e") > 0)).height
    _note(found, "external_id_rejected", rejected,
          f"{rejected} activities carry an External id that names no op containing their launch call "
               f"(old traces reuse the correlation id there); linked by nesting instead")

    # 2. nesting: the innermost op containing the launch call on its thread
    need = cand.filter(pl.col("_ext_op").is_null()).select("activity_id")
    nest = launched.join(need, on="activity_id", how="semi").select("activity_id", "launch_id").join(
        launch_ops.rename({"qid": "launch_id", "op_id": "_nest_op"}), on="launch_id", how="left").drop("launch_id")
    acts = add_columns(add_columns(acts, cand, "activity_id"), nest, "activity_id")
    is_graph = pl.col("_graph_launch").fill_null(False)
    acts = acts.with_columns(
        pl.coalesce("_ext_op", "_nest_op").alias("launch_op_id"),
        pl.when(pl.col("launch_id").is_null()).then(pl.lit("none"))
        .when(is_graph).then(pl.lit("graph_launch"))
        .when(pl.col("_ext_op").is_not_null()).then(pl.lit("external_id"))
        .when(pl.col("_nest_op").is_not_null()).then(pl.lit("nesting"))
        .otherwise(pl.lit("launch_only")).cast(pl.Categorical).alias("attribution"),
    ).drop("_ext_op", "_nest_op", "_graph_launch")
    return acts.sort("activity_id")
