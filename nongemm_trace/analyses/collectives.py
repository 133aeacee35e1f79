"""One rank trace's collective calls (:func:`nongemm_trace.metrics.collectives.rank_calls`), from the
same analysis as its report: the selection's steps and activities, the trace's launch calls, and
the collective records of the file (:mod:`nongemm_trace.load.kineto.collectives`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from ..load.kineto.collectives import read_collective_records
from ..metrics.collectives import CALL_SCHEMA, rank_calls
from ..metrics.late_work import top_level_host
from ..pipeline.analysis import Analysis
from ..pipeline.options import AnalysisOptions, keywords_of, typed_at

if TYPE_CHECKING:  # pragma: no cover
    from ..core.trace import Trace
    from ..pipeline.selection import Selection


def collective_calls(analysis: Analysis, options: AnalysisOptions | None = None, **old: Any) -> pl.DataFrame:
    """The rank's calls (:data:`~nongemm_trace.metrics.collectives.CALL_COLUMNS`) under ``options`` (its
    selection options; ``old``: those as keywords, deprecated); none for a format other than Kineto JSON
    (no collective parameters are recorded there)."""
    given = keywords_of(options, old, "collective_calls")
    trace = analysis.trace()
    if trace.source_format != "kineto":
        return pl.DataFrame(schema=CALL_SCHEMA)
    return calls_of(analysis.selection(typed_at(analysis.path, given)), trace, analysis.path)


def calls_of(sel: Selection, trace: Trace, path: Any) -> pl.DataFrame:
    """:func:`collective_calls` of a selection of the Kineto trace ``trace`` read from ``path``."""
    if trace.source_format != "kineto":
        return pl.DataFrame(schema=CALL_SCHEMA)
    records = read_collective_records(path)
    records = pl.concat([records.with_columns(pl.lit(False).alias("before")),
                         _before_the_trace(sel.activities, records, trace.metadata)])
    acts = sel.activities.select("device", pl.col("category").cast(pl.Utf8), "ts_ns",
                                 (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    pg, size = _only_group(trace.metadata.get("distributedInfo"))
    ops = sel.linked.ops.select("op_id", "parent_id", "name", "cat", "tid", "ts_ns", "end_ns")
    is_op = pl.col("cat").cast(pl.Utf8) == "cpu_op"
    # the outermost ops (their parent, if any, is a range: a step, an annotation, not an op), and the
    # user's ranges that hold nothing recorded (a region the user marked: its time is no op's)
    in_op = ops.filter(is_op).select(pl.col("op_id").alias("parent_id"), pl.lit(True).alias("_in_op"))
    parents = ops.select(pl.col("parent_id").alias("op_id")).drop_nulls().unique().with_columns(
        pl.lit(True).alias("_has_child"))
    ops = ops.join(in_op, on="parent_id", how="left").join(parents, on="op_id", how="left")
    outer = ops.filter(pl.col("_in_op").is_null() & (is_op | pl.col("_has_child").is_null()))
    top = top_level_host(outer, trace.launches)
    return rank_calls(records, sel.steps, trace.launches.select("correlation", "ts_ns"), acts, pg, size, top)


#: a collective's kind in a communication kernel's name (NCCL's ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``,
#: older ``ncclKernel_AllGather_RING_LL_Sum_float``); RCCL's ``ncclDevKernel_Generic`` names none
_KIND_IN_NAME = r"(?i)(all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all|send_?recv|reduce)"


def _before_the_trace(acts: pl.DataFrame, records: pl.DataFrame, metadata: dict) -> pl.DataFrame:
    """The collective kernels launched before the trace's window (still running when it opened: the tail of the
    step before the first one recorded), as records marked ``before``: they carry no parameters (those
    come with the launch), so only their kind, from the kernel's name, and their times are known; their
    process group and its size are those of the rank's other calls, and where those are of several
    groups none is added (which group a call was in is not known). Every rank opens its window at the
    same point of its program, so these are, on every rank, the last calls of one sequence
    (:func:`~nongemm_trace.metrics.collectives.rank_calls` counts them from the end). None where the
    records number the calls (``seq``: matched by it, these have none), and where no kernel carries the
    parameters (the calls are then timed by the host's records)."""
    empty = records.head(0).with_columns(pl.lit(False).alias("before"))
    kernels = records.filter(pl.col("source") == "kernel")
    if "correlation" not in acts.columns or kernels.height == 0 or records["seq"].null_count() < records.height:
        return empty
    groups = kernels.select("pg", "group_size").unique()
    if groups.height != 1:
        return empty
    pg, size = groups.row(0)
    launched = pl.col("launch_ts_ns").is_not_null() if "launch_ts_ns" in acts.columns else pl.lit(False)
    comm = acts.filter((pl.col("category").cast(pl.Utf8) == "communication") & ~launched)
    if comm.height == 0:
        return empty
    known = kernels["correlation"].drop_nulls()
    comm = comm.with_columns(pl.col("name").cast(pl.Utf8).str.extract(_KIND_IN_NAME, 1).alias("_kind")).filter(
        pl.col("_kind").is_not_null() & ~pl.col("correlation").cast(pl.Int64).is_in(known.to_list()))
    base = records["base_ns"].drop_nulls()
    b = int(base[0]) if base.len() else metadata.get("baseTimeNanoseconds")
    return comm.select(
        pl.lit("kernel").alias("source"), pl.col("_kind").alias("name"), pl.lit(pg, pl.Utf8).alias("pg"),
        pl.lit(None, pl.Int64).alias("seq"), pl.lit(None, pl.Int64).alias("in_nelems"),
        pl.lit(None, pl.Int64).alias("out_nelems"), pl.lit(size, pl.Int64).alias("group_size"),
        pl.lit(None, pl.Utf8).alias("dtype"), pl.col("correlation").cast(pl.Int64), pl.col("device").cast(pl.Int64),
        pl.lit(None, pl.Utf8).alias("pid"), pl.lit(None, pl.Utf8).alias("tid"), pl.col("ts_ns").cast(pl.Int64),
        pl.col("dur_ns").cast(pl.Int64), pl.lit(b if isinstance(b, int) else None, pl.Int64).alias("base_ns"),
        pl.lit(True).alias("before")).sort("ts_ns")


def _only_group(info: Any) -> tuple[str | None, int | None]:
    """The process group and its size of a run with one group (``distributedInfo``), else the world size."""
    if not isinstance(info, dict):
        return None, None
    groups = info.get("pg_config")
    if isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict):
        size = groups[0].get("pg_size")
        return str(groups[0].get("pg_name")), size if isinstance(size, int) else None
    world = info.get("world_size")
    return None, world if isinstance(world, int) else None
