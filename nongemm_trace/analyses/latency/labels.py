"""The labels of the dependency graph's host pieces: what ran in each (``kind``), which side of the
path it counts for (``bound``) and its category, from the innermost op and the runtime call around it.

Why a module of its own: the pieces are the graph's largest table (a million on a 1 GB trace), and
labelling them is one of the build's largest costs: each op's and each call's label is worked out once,
on their own tables, and every piece gathers codes, never text (:func:`label_pieces`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ...core.frames import add_columns, int_scalar, is_row_index, lookup_columns
from .pieces import BOUND, KIND


def host_category(ops: pl.DataFrame, generic: list[str], level: str) -> pl.DataFrame:
    """``op_id, category`` of each op's own host time: the category its call takes at the launch
    level (:func:`~nongemm_trace.classify.ladder.call_category`: qdq dataflow, the forward op
    of a backward node, a written-out operation, the specific op around it, else its name), or
    at the top level its top-level op's."""
    from ...classify.ladder import call_category

    own = ops.select("op_id", "top_id", call_category(generic).alias("category"), "is_wrapper")
    if level == "top":
        top = own.select(pl.col("op_id").alias("top_id"), pl.col("category").alias("top_category"))
        own = own.join(top, on="top_id", how="left").with_columns(
            pl.coalesce("top_category", "category").alias("category"))
    return own.select("op_id", pl.col("category").fill_null("unclassified"), "is_wrapper")


#: a piece's kind by code, and its bound (the codes are what :func:`label_pieces` computes on)
_KINDS = ("sync", "launch", "call", "gap", "wrapper", "op")
_BOUNDS = ("sync", "launch", "cpu", "other", "other", "cpu")


def label_pieces(pieces: pl.DataFrame, op_cats: pl.DataFrame, launch_cats: pl.DataFrame,
                 syncs: pl.DataFrame) -> pl.DataFrame:
    """``kind``, ``bound`` and ``category`` of every piece (a sync's call: kind ``sync``). Worked
    out on small integer codes, the text gathered once at the end: string conditions over millions
    of pieces cost seconds on a large trace. Each op's own label (kind and category in one code) and each
    call's are made once per op and per call, so a piece gathers one code of each: its kind is its call's
    (sync, launch, else another call), else its op's (wrapper or op), else a gap; its category is its
    launch's, else its op's own (``unclassified`` for a gap, a wrapper, or an op of unknown kind)."""
    per_call = launch_cats.join(syncs.select("launch_id", "sync"), on="launch_id", how="full", coalesce=True)
    names = pl.concat([s.unique().cast(pl.String) for s in (op_cats["category"], per_call["launch_category"],
                                                            pl.Series(["unclassified"]))])  # text or categorical
    names = names.drop_nulls().unique().sort()
    n, unclassified = names.len(), names.index_of("unclassified")

    def code(c: str) -> pl.Expr:  # codes as narrow as the enum's, widened for the arithmetic below
        return pl.col(c).cast(pl.Enum(names)).to_physical().cast(pl.UInt32)
    wrapper = pl.col("is_wrapper")
    own = (pl.when(wrapper.fill_null(False)).then(4).otherwise(5).cast(pl.UInt32) * n
           + pl.when(wrapper.fill_null(True)).then(unclassified).otherwise(code("category").fill_null(unclassified)))
    # a call's code: kind * (n + 1) + category, the category n where it is the op's own (a sync, another call)
    call = pl.when(pl.col("sync").is_not_null()).then(pl.lit(n, pl.UInt32)).when(
        pl.col("launch_category").is_not_null()).then((n + 1) + code("launch_category"))
    op_id, launch_id = pieces["op_id"], pieces["launch_id"]
    o = _codes_at(op_id, op_cats.select("op_id", own.alias("o")), "op_id", 5 * n + unclassified)
    o[op_id.is_null().to_numpy()] = 3 * n + unclassified  # no op: a gap
    per_id = _dense(per_call.select("launch_id", call.alias("c")), launch_id)
    c = _codes_at(launch_id, per_id, "launch_id", 2 * (n + 1) + n)  # else: another call
    # worked out in place (each array a slot per piece): the kind, then the category in the calls' codes' slots
    no_call = launch_id.is_null().to_numpy()
    kind = o // n
    np.floor_divide(c, n + 1, out=kind, where=~no_call)
    k = pl.Series(kind.astype(np.uint8))
    del kind
    c %= n + 1
    o %= n
    no_call |= c == n
    np.copyto(c, o, where=no_call)
    del o, no_call
    category = pl.Series(c)
    return pieces.select("row", "thr", "ts", "end").with_columns(
        pl.Series("kind", _KINDS, KIND).gather(k), pl.Series("bound", _BOUNDS, BOUND).gather(k),
        names.cast(pl.Enum(names)).rename("category").gather(category), op_id, launch_id)


def _codes_at(ids: pl.Series, table: pl.DataFrame, key: str, fill: int) -> np.ndarray:
    """``table``'s other column (small integer codes, as int32) at each of ``ids`` (``table[key]`` unique),
    ``fill`` where an id is null, has no row or its code is null: gathered by numpy where the table's rows
    are numbered by the id (the loader's ids), one pass over the pieces where polars' checks and gather
    took four."""
    column = next(c for c in table.columns if c != key)
    if not is_row_index(table[key]) or ids.dtype not in (pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64):
        return lookup_columns(ids.to_frame(key), key, table, key)[column].fill_null(fill).to_numpy().astype(np.int32)
    n = table.height
    codes = np.append(table[column].fill_null(fill).to_numpy(), fill).astype(np.int32)  # the last slot: no row
    return codes[np.minimum(ids.fill_null(n).to_numpy(), n)]


def capture_bound(pieces: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """The pieces with bound ``capture`` where their thread was capturing a CUDA/HIP graph (``windows``:
    :func:`~nongemm_trace.load.graph_capture.capture_windows`; ``threads``: ``pid, tid, thr``). The host
    time of a capture records work into a graph and runs none: it is neither launch overhead nor op
    CPU work of the run (the pieces keep their kind: the profiler's cost in them is unchanged)."""
    if windows.height == 0 or pieces.height == 0:
        return pieces
    codes = threads.select(pl.col("pid", "tid").cast(pl.String), "thr")
    w = windows.join(codes, on=["pid", "tid"]).select("thr", pl.col("ts_ns").alias("ts"),
                                                      pl.col("end_ns").alias("w_end")).sort("ts")
    if w.height == 0:
        return pieces
    hit = pieces.select("row", "thr", "ts", "end").sort("ts").join_asof(
        w, on="ts", by="thr", strategy="backward", check_sortedness=False)
    inside = hit.filter(pl.col("w_end").is_not_null() & (pl.col("end") <= pl.col("w_end")))["row"]
    if inside.len() == 0:
        return pieces
    # pieces are numbered by position (``row`` = index): the bound is written to their rows
    return pieces.with_columns(pieces["bound"].scatter(inside, "capture"))


def _dense(per_call: pl.DataFrame, ids: pl.Series) -> pl.DataFrame:
    """``per_call`` (unique ``launch_id``) as a table indexed by the launch id when the ids are small
    non-negative integers (the loader's row numbers), so :func:`lookup_columns` gathers instead of
    joining millions of pieces; else as it is."""
    top = max(int_scalar(ids.max() or 0), int_scalar(per_call["launch_id"].max() or 0)) if per_call.height else 0
    low = min(int_scalar(ids.min() or 0), int_scalar(per_call["launch_id"].min() or 0)) if per_call.height else 0
    if low < 0 or top > 4 * ids.len() + 1024:
        return per_call
    rows = pl.DataFrame({"launch_id": pl.int_range(top + 1, eager=True).cast(per_call.schema["launch_id"])})
    return add_columns(rows, per_call, "launch_id")
