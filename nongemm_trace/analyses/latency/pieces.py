"""The host pieces of the dependency graph: each CPU thread's timeline cut at every op and
runtime-call boundary, each piece with its innermost op and the runtime call around it.

Why a module of its own: on a 1 GB trace there are millions of pieces, and how they are cut
and labelled is most of the graph's cost. The fast path packs thread and time into one int64
key (``thread * span + time - first``), so cutting is one sort of integers; the innermost op
of every piece comes from the C sweep (:mod:`..link.fast_sweep`, the linker's) fed those keys
directly, checked by gathers; the call around a piece from the calls' starts placed among the
pieces' keys and carried forward. Where the C sweep is not built, the keys would overflow or
op ids do not rise with their rows, the reference path (:func:`..link.nesting.innermost_containing`
and a ``join_asof``) gives the same table; ``tests/test_latency_pieces.py`` compares the two.

The table lives as long as the graph, through every replay, and is the largest the latency
commands hold: its columns are as narrow as their values allow. Times stay int64 ns; row, thread and sync
numbers are 32-bit (:data:`INDEX`: a trace has far fewer pieces and threads), the op and call ids
keep their tables' UInt32, and the labels are enums (:data:`KIND`, :data:`BOUND`, the category an
enum of the trace's own names), each of its values in text order, so sorting and comparing them
goes as on text: about half the bytes of the int64 and text columns they were.
"""

from __future__ import annotations

from typing import Literal, cast

import numpy as np
import polars as pl

from ...core.frames import appearance_codes, int_scalar
from ...link import fast_sweep
from ...link.nesting import innermost_containing

_INT64_MAX = (1 << 63) - 1

#: a piece's kind (:mod:`.graph`; ``wait``: :mod:`.threads`) and bound (``capture``: a graph being
#: captured), each listed in text order: an enum sorts by its list
KIND = pl.Enum(sorted(("sync", "launch", "call", "gap", "wrapper", "op", "wait")))
BOUND = pl.Enum(sorted(("sync", "launch", "cpu", "other", "capture")))
#: the pieces' row, thread and sync numbers (rows of the pieces and the syncs, codes of the threads)
INDEX = pl.Int32


def thread_codes(ops: pl.DataFrame, calls: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series, pl.Series]:
    """One small integer per (pid, tid) holding ops or runtime calls: the table ``pid, tid, thr`` and
    the ``thr`` of every op and every call (from one numbering of both tables' threads,
    :func:`..core.frames.appearance_codes`: joining millions of rows on text would cost seconds on
    a large trace)."""
    both = pl.concat([ops.select(pl.col("pid", "tid").cast(pl.Categorical)),
                      calls.select(pl.col("pid", "tid").cast(pl.Categorical))])  # text or categorical
    p, t = appearance_codes(both["pid"], both["tid"])
    codes = pl.DataFrame([p.cast(pl.Int64).alias("p"), t.cast(pl.Int64).alias("t")])
    width = int_scalar(codes["t"].max() or 0) + 1 if codes.height else 1
    raw = (codes["p"] * width + codes["t"]).rename("raw")
    # each thread's first row, its number the rank of its key among the threads'
    table = both.with_columns(raw).gather(raw.arg_unique()).sort("raw").with_row_index("thr").with_columns(
        pl.col("thr").cast(INDEX))
    keys = table["raw"].to_numpy()
    if keys.size and int(keys[-1]) <= 4 * raw.len() + 1024:  # keys few and small: each row's number gathered
        numbers = np.zeros(int(keys[-1]) + 1, np.int32)
        numbers[keys] = np.arange(keys.size, dtype=np.int32)
        thr = pl.Series("thr", numbers[raw.to_numpy()], dtype=INDEX)
    else:
        thr = raw.to_frame().join(table.select("raw", "thr"), on="raw", how="left", maintain_order="left")["thr"]
    return table.select("pid", "tid", "thr"), thr.slice(0, ops.height), thr.slice(ops.height)


def host_pieces(ops: pl.DataFrame, calls: pl.DataFrame, op_thr: pl.Series, call_thr: pl.Series) -> pl.DataFrame:
    """Each thread's timeline cut at every op and call boundary: ``row, thr, ts, end, op_id`` (innermost
    op, else null), ``launch_id`` (the runtime call it is inside, else null), in (thread, time) order. A
    zero-length piece closes each thread (its last boundary), so every boundary starts a piece. ``ops``
    and ``calls`` have positive durations; ``op_thr`` / ``call_thr`` are their threads' codes."""
    if ops.height and fast_sweep.available() and bool((ops["op_id"].diff().drop_nulls() > 0).all()):
        lo = int_scalar(pl.concat([ops["ts_ns"], calls["ts_ns"]]).min())
        hi = int_scalar(pl.concat([ops["end_ns"], calls["end_ns"]]).max())
        n_thr = int_scalar(pl.concat([op_thr, call_thr]).max()) + 1
        if n_thr * (hi - lo + 1) < _INT64_MAX:
            return _packed_pieces(ops, calls, op_thr, call_thr, lo, hi - lo + 1, n_thr)
    return reference_pieces(ops, calls, op_thr, call_thr)


def _packed_pieces(ops: pl.DataFrame, calls: pl.DataFrame, op_thr: pl.Series, call_thr: pl.Series,
                   lo: int, span: int, n_thr: int) -> pl.DataFrame:
    """:func:`host_pieces` from packed keys and the C sweep (the op ids rise with the rows, so the
    sweep's ties, by id, are the same by row position, which it is given as ids). Each array has a
    slot per piece (or per op): each is dropped once read, and the times are taken from the keys
    last (``key % span``: the time since the first), so few are alive at once."""
    base_o, base_c = op_thr.cast(pl.Int64) * span - lo, call_thr.cast(pl.Int64) * span - lo
    o_start, o_end = base_o + ops["ts_ns"], base_o + ops["end_ns"]
    c_start, c_end = base_c + calls["ts_ns"], base_c + calls["end_ns"]
    del base_o, base_c
    # sorted by numpy's stable sort (a merge of runs): the keys come as long sorted runs (each thread's
    # starts, and ends, in time order), which it merges in half the time of polars' sort here
    keys = np.concatenate([s.to_numpy() for s in (o_start, o_end, c_start, c_end)])
    keys.sort(kind="stable")
    # the boundaries, each once, in one chunk: the columns made from these keys are then read as numpy
    # arrays (the sweep, every replay) without a copy
    first = np.empty(len(keys), bool)
    first[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    k_np = keys[first]
    del keys, first
    k = pl.Series("k", k_np)  # the same memory: numpy's arrays below read it, the times are made from it in place
    thr = pl.Series("thr", k_np // span)
    # innermost op: the sweep's hit (a row of ``ops``) when it contains the whole piece
    rows = pl.int_range(ops.height, eager=True, dtype=pl.Int64)
    _, _, hit = fast_sweep.op_tree(o_start, o_end, -ops["dur_ns"], rows, op_thr, k, thr, n_thr)
    del rows
    # from here numpy's arrays, worked on in place where they can be (a slot per piece each): polars' steps
    # each made a column of their own, and its gathers by row took twice numpy's time here
    thr_np = thr.to_numpy()
    thr = pl.Series("thr", thr_np.astype(np.int32))
    end_k = k_np.copy()  # a piece ends at its thread's next boundary; a thread's last boundary at itself
    np.copyto(end_k[:-1], k_np[1:], where=thr_np[1:] == thr_np[:-1])
    del thr_np
    real = end_k > k_np
    h = hit.fill_null(0).to_numpy()
    inside = hit.is_not_null().to_numpy() & real
    del hit
    inside &= o_start.to_numpy()[h] <= k_np
    inside &= end_k <= o_end.to_numpy()[h]
    del o_start, o_end
    op_id = _masked(inside, ops["op_id"].to_numpy()[h], "op_id")
    del h, inside
    # runtime calls are leaves that do not overlap on a thread: the call around a piece is the last one
    # started at or before it (placed at its first piece, carried forward), if it ends at or after the piece
    if calls.height:
        order = c_start.arg_sort().cast(INDEX)
        last_call = pl.Series("c", [None], dtype=INDEX).extend_constant(None, k.len() - 1)
        first = k.search_sorted(c_start.gather(order), side="left")
        last_call = last_call.scatter(first, order).fill_null(strategy="forward")
        del order, first
        c = last_call.fill_null(0).to_numpy()
        around = last_call.is_not_null().to_numpy() & real
        del last_call
        around &= c_end.to_numpy()[c] >= end_k
        launch_id = _masked(around, calls["launch_id"].to_numpy()[c], "launch_id")
        del c, around
    else:
        launch_id = pl.repeat(None, k.len(), dtype=calls.schema["launch_id"], eager=True)
    del k, real
    np.remainder(k_np, span, out=k_np)
    k_np += lo
    ts = pl.Series("ts", k_np)
    np.remainder(end_k, span, out=end_k)
    end_k += lo
    end = pl.Series("end", end_k)
    return pl.DataFrame([pl.int_range(ts.len(), eager=True, dtype=INDEX).alias("row"), thr, ts, end,
                         op_id, launch_id.rename("launch_id")])


def _masked(mask: np.ndarray, values: np.ndarray, name: str) -> pl.Series:
    """``values`` where ``mask`` holds, else null."""
    return pl.select(pl.when(pl.Series(mask)).then(pl.Series(name, values))).to_series()


def reference_pieces(ops: pl.DataFrame, calls: pl.DataFrame, op_thr: pl.Series, call_thr: pl.Series) -> pl.DataFrame:
    """:func:`host_pieces` by sorts, the linker's nesting (:func:`innermost_containing`) and a ``join_asof``:
    the general path, and the reference the packed one is tested against."""
    op_iv = ops.select("pid", "tid", "op_id", "ts_ns", "dur_ns", "end_ns")
    times = pl.concat([
        pl.DataFrame({"thr": op_thr, "t": ops["ts_ns"]}), pl.DataFrame({"thr": op_thr, "t": ops["end_ns"]}),
        pl.DataFrame({"thr": call_thr, "t": calls["ts_ns"]}), pl.DataFrame({"thr": call_thr, "t": calls["end_ns"]}),
    ])
    lo, hi = int_scalar(times["t"].min() or 0), int_scalar(times["t"].max() or 0)
    span = hi - lo + 1
    if times.height and (int_scalar(times["thr"].max()) + 1) * span < (1 << 62):  # one int64 key: one fast sort
        key = (pl.col("thr").cast(pl.Int64) * span + (pl.col("t") - lo)).alias("k")
        bounds = times.select(key).unique().sort("k").select((pl.col("k") // span).alias("thr"),
                                                             (pl.col("k") % span + lo).alias("t"))
    else:
        bounds = times.unique().sort(["thr", "t"])
    pieces = bounds.with_columns(pl.col("t").shift(-1).over("thr").alias("end")).rename({"t": "ts"})
    pieces = pieces.with_columns(pl.col("end").fill_null(pl.col("ts"))).with_row_index("row")
    pieces = pieces.with_columns(pl.col("row").cast(INDEX), pl.col("thr").cast(INDEX))
    names = pl.concat([op_iv.select("pid", "tid").with_columns(op_thr.alias("thr")),
                       calls.select("pid", "tid").with_columns(call_thr.alias("thr"))]).unique("thr")
    pts = pieces.filter(pl.col("end") > pl.col("ts")).join(names, on="thr").select(
        pl.col("row").alias("qid"), "pid", "tid", pl.col("ts").alias("ts_ns"), pl.col("end").alias("end_ns"))
    n = pieces.height
    in_op = innermost_containing(op_iv, pts)
    starts = pl.DataFrame({"thr": call_thr, "ts": calls["ts_ns"], "call_end": calls["end_ns"],
                           "launch_id": calls["launch_id"]}).sort("ts")
    in_call = pieces.filter(pl.col("end") > pl.col("ts")).select("row", "thr", "ts", "end").sort("ts").join_asof(
        starts, on="ts", by="thr", strategy="backward", check_sortedness=False).filter(
        pl.col("call_end") >= pl.col("end"))
    return pieces.select("row", "thr", "ts", "end").with_columns(
        _scatter(n, in_op["qid"], in_op["op_id"].cast(ops.schema["op_id"]), "op_id"),
        _scatter(n, in_call["row"], in_call["launch_id"].cast(calls.schema["launch_id"]), "launch_id"))


def _scatter(n: int, rows: pl.Series, values: pl.Series, name: str) -> pl.Series:
    """A column of ``n`` nulls with ``values`` at ``rows`` (a join on the row number, without the join)."""
    out = pl.repeat(None, n, dtype=values.dtype, eager=True).alias(name)
    return out.scatter(rows.cast(pl.Int64), values) if rows.len() else out


def locate(thr: pl.Series, ts: pl.Series, queries: list[tuple[pl.Series, pl.Series, str, int]]) -> list[pl.Series]:
    """Rows found by thread and time, by binary search: ``thr, ts`` in (thread, time) order (the pieces'
    order along each thread, which every replay keeps); per query ``(q_thr, q_t, side, shift)`` the
    position ``search_sorted(side) + shift`` on one int64 key of thread and time, null where that is
    no row or a row of another thread. ``("right", -1)``: the last row at or before ``q_t`` (an as-of
    join backward); ``("left", 0)``: the first at or after (forward); ``("left", -1)``: the last
    before; ``("right", 0)``: the first after. Where the threads times the time span would overflow the
    key (a trace whose events lie decades apart, or its replay), the times are replaced by their dense
    ranks among all the times given, which keep their order and ties."""
    if thr.len() == 0:
        return [pl.repeat(None, q[0].len(), dtype=pl.Int64, eager=True) for q in queries]
    times = [ts] + [q[1] for q in queries]
    lo = min(int_scalar(t.min()) for t in times if t.len())
    span = max(int_scalar(t.max()) for t in times if t.len()) - lo + 1
    n_thr = max(int_scalar(t.max()) for t in [thr] + [q[0] for q in queries] if t.len()) + 1
    if n_thr * span >= _INT64_MAX:
        ranks = pl.concat([t.cast(pl.Int64) for t in times]).rank("dense").cast(pl.Int64)
        cuts = [0]
        for t in times:
            cuts.append(cuts[-1] + t.len())
        times = [ranks.slice(a, b - a) for a, b in zip(cuts, cuts[1:])]
        ts, lo, span = times[0], 1, int(ranks.max())
    # one array for the keys of every row, made in place with numpy (whose memory goes back to the system
    # once freed; each step of a polars expression would make a column of its own)
    key_np = thr.to_numpy().astype(np.int64)
    key_np *= span
    key_np -= lo
    key_np += ts.to_numpy()
    key = pl.Series(key_np)
    out = []
    for (q_thr, _, side, shift), q_t in zip(queries, times[1:]):
        i = key.search_sorted(q_thr.cast(pl.Int64) * span + q_t - lo,
                              side=cast(Literal["left", "right"], side)).cast(pl.Int64) + shift
        i = pl.select(pl.when((i >= 0) & (i < thr.len())).then(i)).to_series()
        same = thr.gather(i) == q_thr
        out.append(pl.select(pl.when(same).then(i)).to_series())
    return out
