"""Interval nesting on one thread, computed with a columnar sweep (no per-event loop).

Kineto writes no parent ids: an op's parent is the innermost op on the same
(pid, tid) whose interval contains it. We sort all op starts and ends of a thread
into one sequence, keep a running count of open ops (``cum_sum``), and read:

* an op's depth = ops open just before it starts;
* its parent = the last op started before it with depth one less
  (``join_asof`` by thread and depth);
* the innermost op containing a point = the last op started before the point whose
  depth is (ops open at the point) - 1.

When thread and time fit one int64 key (always, but for hours-long traces with very
many threads), only the starts are sorted and the counts come from a binary search in
the sorted ends (:func:`_starts_and_queries`); the numbers are the sweep's.

Ties: at equal times ends sort before starts (an op ending at t does not contain
an op starting at t), starts before queries (an op starting at t contains a call
starting at t), and longer ops before shorter ones (parents first). Ops with zero
duration cannot contain anything and are left out of the tree.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import add_columns, appearance_codes, int_scalar, is_row_index
from . import fast_sweep

_END, _START, _QUERY = 0, 1, 2


def _thread_codes(ops: pl.DataFrame, queries: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(ops' pid/tid codes, queries' pid/tid codes), from one numbering over both tables' rows
    (:func:`..core.frames.appearance_codes`: integers sort and join several times faster than text)."""
    both = ops.select(pl.col("pid", "tid").cast(pl.Categorical))
    if queries is not None:  # each side cast first: one may hold text, the other categorical codes
        both = pl.concat([both, queries.select(pl.col("pid", "tid").cast(pl.Categorical))], how="vertical")
    # numbered over both tables at once: a value's number is the same in each
    codes = pl.DataFrame(appearance_codes(both["pid"], both["tid"]))
    if queries is None:
        return codes, None
    return codes.slice(0, ops.height), codes.slice(ops.height)


def _nestable(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops that can contain something (dur > 0), with only the columns the sweep reads:
    filtering the whole op table would copy all its text columns."""
    return ops.select("pid", "tid", "op_id", "ts_ns", "dur_ns", "end_ns").filter(pl.col("dur_ns") > 0)


def _sweep(ops: pl.DataFrame, queries: pl.DataFrame | None) -> pl.DataFrame:
    """All op starts and ends (and query points) in sweep order, with ``thr`` (one int per
    thread), ``seq`` (position in the sweep), ``kind``, ``ref`` (op or query id) and ``open``
    (ops open after this point, on its thread)."""
    has_q = queries is not None and queries.height > 0
    same_ids = queries is None or not has_q or queries.schema["qid"] == ops.schema["op_id"]
    ref = ops.schema["op_id"] if same_ids else pl.Int64
    op_codes, q_codes = _thread_codes(ops, queries if has_q else None)
    keyed = ops.select("ts_ns", "dur_ns", "end_ns", pl.col("op_id").cast(ref).alias("ref")).hstack(op_codes)
    parts = [
        keyed.select("pid", "tid", pl.col("ts_ns").alias("t"), pl.lit(_START, pl.Int8).alias("kind"),
                     (-pl.col("dur_ns")).alias("k2"), "ref"),
        keyed.select("pid", "tid", pl.col("end_ns").alias("t"), pl.lit(_END, pl.Int8).alias("kind"),
                     pl.lit(0, pl.Int64).alias("k2"), "ref"),
    ]
    del keyed
    if has_q:
        assert queries is not None and q_codes is not None  # has_q
        parts.append(queries.select(
            pl.col("ts_ns").alias("t"), pl.lit(_QUERY, pl.Int8).alias("kind"),
            pl.lit(0, pl.Int64).alias("k2"), pl.col("qid").cast(ref).alias("ref"),
        ).hstack(q_codes).select("pid", "tid", "t", "kind", "k2", "ref"))
    # the sorted frame keeps only the columns the sweep reads (the times are sort keys only)
    ev = pl.concat(parts, how="vertical")
    del parts
    ev = ev.sort(["pid", "tid", "t", "kind", "k2", "ref"]).select("pid", "tid", "kind", "ref")
    # every op adds +1 and -1 on its own thread, so each thread starts at 0 open ops in a single
    # running sum over the sorted sequence (no per-thread window); threads become one int key
    new_thread = (pl.col("pid") != pl.col("pid").shift()) | (pl.col("tid") != pl.col("tid").shift())
    delta = pl.when(pl.col("kind") == _START).then(1).when(pl.col("kind") == _END).then(-1).otherwise(0)
    return ev.select(
        new_thread.fill_null(True).cast(pl.UInt32).cum_sum().alias("thr"),
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("seq"), "kind", "ref",
        delta.cast(pl.Int32).cum_sum().alias("open"),
    )


_INT64_MAX = (1 << 63) - 1


def _packed(ops: pl.DataFrame,
            queries: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame | None, int, int] | None:
    """Thread and time packed into one int64 key (``thread * span + time - first``): the ops'
    ``thr, k`` (start), ``k_end``, ``k2`` (minus the duration), ``op_id`` and the queries' ``thr,
    k, qid``, with ``span`` and the number of thread numbers; None when the keys would overflow
    (an hours-long trace with very many threads)."""
    has_q = queries is not None and queries.height > 0
    same_ids = queries is None or not has_q or queries.schema["qid"] == ops.schema["op_id"]
    ref = ops.schema["op_id"] if same_ids else pl.Int64
    op_codes, q_codes = _thread_codes(ops, queries if has_q else None)
    keyed = op_codes.hstack(ops.select("ts_ns", "dur_ns", "end_ns", pl.col("op_id").cast(ref)))
    q = (q_codes.hstack(queries.select("ts_ns", pl.col("qid").cast(ref)))
         if q_codes is not None and queries is not None else None)
    frames = [keyed] + ([q] if q is not None else [])
    lo = min(int_scalar(f["ts_ns"].min()) for f in frames)
    hi = max([int_scalar(keyed["end_ns"].max())] + ([int_scalar(q["ts_ns"].max())] if q is not None else []))
    n_tid = max(int_scalar(f["tid"].max()) for f in frames) + 1
    n_pid = max(int_scalar(f["pid"].max()) for f in frames) + 1
    span = hi - lo + 1
    if n_pid * n_tid * span >= _INT64_MAX:
        return None
    thread = pl.col("pid").cast(pl.Int64) * n_tid + pl.col("tid").cast(pl.Int64)
    starts = keyed.select(thread.alias("thr"), (thread * span + (pl.col("ts_ns") - lo)).alias("k"),
                          (thread * span + (pl.col("end_ns") - lo)).alias("k_end"), (-pl.col("dur_ns")).alias("k2"),
                          "op_id")
    if q is not None:
        q = q.select(thread.alias("thr"), (thread * span + (pl.col("ts_ns") - lo)).alias("k"), "qid")
    return starts, q, span, n_pid * n_tid


def _starts_and_queries(ops: pl.DataFrame, queries: pl.DataFrame | None,
                        packed: tuple | None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The ops' starts in sweep order (``thr, seq, op_id, depth``) and the queries (``thr, seq,
    want, qid``: ``seq`` = the last start at or before the query, ``want`` = the depth of the op
    that must contain it), as the sweep defines them.

    With packed keys (``packed``, from :func:`_packed`) only the starts are sorted (by key, longer
    first, op id) and the ends sorted as plain integers, and an op's depth is its rank among the
    starts minus the ends at or before its start (binary search) — the same numbers as the full
    sweep, for a fraction of its sort. Without them (None: the keys would overflow), the sweep.
    """
    if packed is None:
        return _from_sweep(_sweep(ops, queries), queries is not None and queries.height > 0)
    keyed, q, _, _ = packed
    starts = keyed.select("k", "k2", "op_id", "thr").sort(["k", "k2", "op_id"])
    ends = keyed["k_end"].sort()
    closed = ends.search_sorted(starts["k"], side="right")
    st = starts.select(
        "thr", pl.int_range(pl.len(), dtype=pl.UInt32).alias("seq"), "op_id",
        (pl.int_range(pl.len(), dtype=pl.Int64) - pl.lit(closed).cast(pl.Int64)).alias("depth"),
    )
    if q is None:
        return st, None
    qk = q["k"]
    opened = starts["k"].search_sorted(qk, side="right").cast(pl.Int64)
    qs = q.select(
        "thr",
        (pl.lit(opened) - 1).alias("_seq"),
        (pl.lit(opened) - pl.lit(ends.search_sorted(qk, side="right")).cast(pl.Int64) - 1).alias("want"),
        "qid",
    )
    # a query before every start has no op around it (its depth is -1); keep it, matching nothing
    qs = qs.with_columns(pl.col("_seq").clip(0).cast(pl.UInt32).alias("seq"),
                         pl.when(pl.col("_seq") < 0).then(-1).otherwise(pl.col("want")).alias("want")).drop("_seq")
    return st, qs.sort("seq")


def _native_tree(packed: tuple) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The tree (``op_id, depth, parent_id``) and the queries' unverified hits (``qid, op_id``)
    by the C sweep (:mod:`.fast_sweep`) from the packed keys: the numbers of
    :func:`_starts_and_queries` and its as-of joins."""
    keyed, q, _, threads = packed
    none = pl.Series("k", [], dtype=pl.Int64)
    depth, parent, hit = fast_sweep.op_tree(keyed["k"], keyed["k_end"], keyed["k2"], keyed["op_id"], keyed["thr"],
                                            none if q is None else q["k"], none if q is None else q["thr"], threads)
    tree = pl.DataFrame([keyed["op_id"], depth, parent])
    hits = None if q is None else pl.DataFrame([q["qid"], hit])
    return tree, hits


def _tree_and_hits(nestable: pl.DataFrame, points: pl.DataFrame | None,
                   tree: bool = True) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The tree (``op_id, depth, parent_id``; None when ``tree`` is false) and the points'
    unverified hits (``qid, op_id``; None without points): by the C sweep where it is built and
    the keys pack, else in polars."""
    packed = _packed(nestable, points)
    if packed is not None and fast_sweep.available():
        return _native_tree(packed)
    st, q = _starts_and_queries(nestable, points, packed)
    hit = _asof_hits(q, st.rename({"depth": "want"})) if points is not None else None
    if not tree:
        return None, hit
    del q
    left = st.with_columns((pl.col("depth") - 1).alias("want"))
    right = st.select("thr", "seq", pl.col("depth").alias("want"), pl.col("op_id").alias("parent_id"))
    return left.join_asof(right, on="seq", by=["thr", "want"], strategy="backward",
                          allow_exact_matches=False, check_sortedness=False), hit


def _from_sweep(sw: pl.DataFrame, has_q: bool) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    st = sw.filter(pl.col("kind") == _START).select(
        pl.col("thr").cast(pl.Int64), "seq", pl.col("ref").alias("op_id"),
        (pl.col("open") - 1).cast(pl.Int64).alias("depth"),
    )
    q = None
    if has_q:
        q = sw.filter(pl.col("kind") == _QUERY).select(
            pl.col("thr").cast(pl.Int64), "seq", (pl.col("open") - 1).cast(pl.Int64).alias("want"),
            pl.col("ref").alias("qid"),
        )
    return st, q


def op_tree(ops: pl.DataFrame, points: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int, pl.DataFrame | None]:
    """Return ``ops`` with ``depth`` and ``parent_id`` (null for roots and 0-length ops),
    the number of ops that overlap their parent without nesting inside it, and, when
    ``points`` are given, :func:`innermost_containing` for them from the same sweep (one
    sort of all op boundaries instead of two)."""
    nestable = _nestable(ops)
    if nestable.height == 0:
        hits = None if points is None else points.select("qid").with_columns(pl.lit(None, pl.UInt32).alias("op_id"))
        return ops.with_columns(pl.lit(None, pl.Int32).alias("depth"),
                                pl.lit(None, pl.UInt32).alias("parent_id")), 0, hits
    tree, hit = _tree_and_hits(nestable, points)
    assert tree is not None  # asked for
    hits = None if points is None else _verified(hit, ops, points)
    # depth as Int32 (a tree is never 2^31 deep): 4 bytes a row of the op table
    tree = tree.select(pl.col("op_id").cast(ops.schema["op_id"]), pl.col("depth").cast(pl.Int32),
                       pl.col("parent_id").cast(pl.UInt32))
    # aligned to the op table's rows and added as columns: joining the whole table would copy it
    out = add_columns(ops, tree, "op_id")
    # overlap without nesting: a child that ends after its parent
    if is_row_index(out["op_id"]):  # the parent's row is its id: read its end directly
        bad = out.select((pl.col("end_ns") > pl.col("end_ns").gather(pl.col("parent_id"))).sum()).item()
    else:
        bounds = out.select(pl.col("op_id").alias("parent_id"), pl.col("end_ns").alias("_pend"))
        chk = out.select("parent_id", "end_ns").join(bounds, on="parent_id", how="inner")
        bad = chk.filter(pl.col("end_ns") > pl.col("_pend")).height
    return out, bad, hits


def _asof_hits(q: pl.DataFrame | None, st: pl.DataFrame) -> pl.DataFrame | None:
    """Innermost op around each query (``q`` from :func:`_starts_and_queries`), unverified: the
    last op started before the query on its thread whose depth is (ops open at the query) - 1."""
    if q is None:
        return None
    return q.join_asof(st.select("thr", "seq", "want", "op_id"), on="seq", by=["thr", "want"], strategy="backward",
                       check_sortedness=False).select("qid", "op_id")


def _verified(hit: pl.DataFrame | None, ops: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """The hits whose op contains the query (guards against ops that overlap without nesting);
    null for the others and for queries without a hit."""
    if points.height == 0 or hit is None:
        return points.select("qid").with_columns(pl.lit(None, pl.UInt32).alias("op_id"))
    hit = hit.select(pl.col("qid").cast(points.schema["qid"]), pl.col("op_id").cast(pl.UInt32))
    if is_row_index(ops["op_id"]) and is_row_index(points["qid"]):  # ids are rows: gather, no joins
        op = add_columns(points.select("qid"), hit, "qid")["op_id"]
        ok = (ops["ts_ns"].gather(op) <= points["ts_ns"]) & (points["end_ns"] <= ops["end_ns"].gather(op))
        return pl.DataFrame({"qid": points["qid"], "op_id": pl.select(pl.when(ok).then(op)).to_series()})
    bounds = ops.select("op_id", pl.col("ts_ns").alias("_ots"), pl.col("end_ns").alias("_oend"))
    chk = (points.select("qid", "ts_ns", "end_ns").join(hit, on="qid", how="left")
           .join(bounds, on="op_id", how="left"))
    inside = (pl.col("_ots") <= pl.col("ts_ns")) & (pl.col("end_ns") <= pl.col("_oend"))
    return chk.select("qid", pl.when(inside).then(pl.col("op_id")).otherwise(None).alias("op_id"))


def innermost_containing(ops: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """For each row of ``points`` (``qid, pid, tid, ts_ns, end_ns``) find the innermost op
    (``op_id``) on the same thread whose interval contains [ts_ns, end_ns]; null if none."""
    nestable = _nestable(ops)
    if nestable.height == 0 or points.height == 0:
        return points.select("qid").with_columns(pl.lit(None, pl.UInt32).alias("op_id"))
    return _verified(_tree_and_hits(nestable, points, tree=False)[1], ops, points)
