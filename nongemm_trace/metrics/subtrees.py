"""Inclusive GPU time of every op by intervals: each op's subtree is a range of positions.

Why: an op's inclusive time is the time of every activity launched by it or by any op below
it. Repeating each activity once for every op above its launching op makes a table of
activities x depth rows: ten thousand ranges nested over ten thousand kernels (steps that
overlap, a deep recursion) made a hundred million rows from a 323 KB trace. Instead:

* the ops are put in **preorder** (by thread, start, longest first, id: the nesting sweep's
  order, in which an op's parent is the last op before it one level up, so the order is a
  preorder of the tree the sweep built), and each op's descendants are the positions
  ``[pos, end)``; ``end`` is the position of the op's next sibling, or of its nearest
  ancestor's next sibling, found by pointer jumping (log2 of the depth rounds of gathers);
* each activity gets its launching op's position; the activities sorted by position give each
  op's activities as a slice (two binary searches), and per category a running count and a
  running sum of the durations over that order give its count and time in the slice
  (:func:`inclusive_times`).

Work and memory are linear in ops x categories plus activities, whatever the depth. The ranges
are checked before they are used (leaves one position long, a first child right after its
parent, the last child ending where its parent ends); a tree they do not describe (a loader
whose parents do not follow the time order) gets ``None`` and the caller walks the tree.

Where the op ids are the row numbers (the loader's tables), the ranges come first from the times
alone (:func:`_ranges_by_time`): the nesting sweep puts into an op every later op of its thread
that starts before it ends, so its range ends at the first position of its thread starting at or
after its end, one binary search per op in place of the parent join, the two windows and the
pointer-jumping rounds (0.4 s for 400 k ops). They are then checked against the parents and
depths (:func:`_subtrees`: the ranges are then the subtrees, whatever made the parents); where
that fails because ops overlap without nesting, the ranges from the depths (:func:`_ends_by_depth`)
are checked the same way, and where that fails too (parents from elsewhere) the sibling
construction above decides, None included.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import appearance_codes, int_scalar, is_row_index

#: column names of :func:`subtree_ranges`' result
POS, END = "_pos", "_end"


def subtree_ranges(ops: pl.DataFrame) -> pl.DataFrame | None:
    """For each row of ``ops`` (``op_id, parent_id, depth, pid, tid, ts_ns, dur_ns``), in its row
    order: ``_pos`` (the op's position in preorder) and ``_end`` (one past its last descendant's),
    both Int64; None when the parents are not a tree laid out by that order."""
    if not {"op_id", "parent_id", "depth", "pid", "tid", "ts_ns", "dur_ns"} <= set(ops.columns):
        return None  # a bare tree (no times): walked
    n = ops.height
    if n == 0:
        return pl.DataFrame(schema={POS: pl.Int64, END: pl.Int64})
    by_time = _ranges_by_time(ops)
    return by_time if by_time is not None else _ranges_by_siblings(ops)


def _ranges_by_siblings(ops: pl.DataFrame) -> pl.DataFrame | None:
    """:func:`subtree_ranges` from the parents: each op's range ends at its next sibling's position
    or its nearest ancestor's next sibling's (any id column, any tree; None where the ranges are not
    the subtrees)."""
    n = ops.height
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    # op ids to row numbers (the loader makes them equal; other id columns are joined once)
    pid, tid = appearance_codes(ops["pid"], ops["tid"])  # threads as integers: sorted and grouped, not read
    keyed = ops.select(row.alias("_row"), "op_id", "parent_id", pl.col("depth").is_null().alias("_loose"),
                       "ts_ns", "dur_ns").with_columns(pid, tid)
    if is_row_index(ops["op_id"]):  # a parent's row is its id (one past the last row names no op)
        named = (ops["parent_id"] >= 0) & (ops["parent_id"] < n)
        parent_row = pl.select(pl.when(named).then(ops["parent_id"].cast(pl.Int64))).to_series()
    else:
        parent_row = keyed.select(pl.col("parent_id").alias("op_id")).join(
            keyed.select("op_id", "_row"), on="op_id", how="left", maintain_order="left")["_row"]
    if parent_row.null_count() != ops["parent_id"].null_count():
        return None  # a parent id that names no op
    keyed = keyed.with_columns(parent_row.alias("_prow")).drop("op_id", "parent_id")
    # preorder: the tree's ops by thread, start, longest first, id; ops outside the tree (no depth) after
    # the order alone (rows are numbered, so it is the ``_row`` a sort of the whole table would give,
    # without the sorted copy of every column), and the times left out of the gathered table, which
    # only that order reads
    order = keyed.select(pl.arg_sort_by(["_loose", "pid", "tid", "ts_ns", "dur_ns", "_row"],
                                        descending=[False, False, False, False, True, False])).to_series() \
        .cast(pl.Int64).alias("_row")
    pos_of_row = order.arg_sort().cast(pl.Int64).alias(POS)  # the inverse permutation
    by_pos = keyed.drop("ts_ns", "dur_ns")[order]
    by_pos = by_pos.with_columns(pl.int_range(n, dtype=pl.Int64).alias(POS),
                                 pos_of_row.gather(by_pos["_prow"].cast(pl.Int64)).alias("_ppos"))
    # siblings: the same parent, or roots of one thread (an op outside the tree is its own group)
    group = pl.when(pl.col("_ppos").is_not_null()).then(pl.col("_ppos") + 1) \
        .when(pl.col("_loose")).then(-pl.col(POS) - 1).otherwise(0)
    by_pos = by_pos.with_columns(group.alias("_grp"))
    by_pos = by_pos.with_columns(
        pl.col(POS).shift(-1).over(["_grp", "pid", "tid"]).alias("_next"),
        pl.when(pl.col("_loose")).then(pl.col(POS) + 1)
        .otherwise(pl.col(POS).max().over(["_loose", "pid", "tid"]) + 1).alias("_last"))
    end = _nearest_up(by_pos["_next"], by_pos["_ppos"])
    if end is None:
        return None
    end = pl.select(pl.coalesce(end, by_pos["_last"])).to_series().alias(END)
    if not _laid_out(by_pos["_ppos"], end):
        return None
    return pl.DataFrame({POS: pos_of_row, END: end.gather(pos_of_row)})


def _ranges_by_time(ops: pl.DataFrame) -> pl.DataFrame | None:
    """:func:`subtree_ranges` from the times, for op ids that are row numbers: each tree op's range
    ends at the first position of its thread whose op starts at or after its end (the sweep nests
    every op starting inside another, after it in the order, below it), or, where ops overlap
    without nesting, from the depths (:func:`_ends_by_depth`); None where the parents are not the
    sweep's (then :func:`_ranges_by_siblings` decides, giving None or the same ranges).

    Checked against the parents, not trusted (:func:`_subtrees`): ranges that pass are exactly the
    subtrees, so they are the ones the sibling construction gives, which holds for such a tree; the
    parents on the op's thread and no loose op in the tree make that construction's groups (siblings
    of one thread, loose ops alone) the tree's, and the same preorder its positions."""
    n = ops.height
    if not is_row_index(ops["op_id"]):
        return None
    parent = ops["parent_id"]
    has_parent = parent.is_not_null()
    if parent.null_count() < n and not (0 <= int_scalar(parent.min()) and int_scalar(parent.max()) < n):
        return None  # a parent id that names no op
    parent = parent.cast(pl.Int64)
    pid, tid = appearance_codes(ops["pid"], ops["tid"])  # the sibling construction's thread numbers
    loose = ops["depth"].is_null()
    if bool((loose & has_parent).any()):
        return None
    n_tid = int_scalar(tid.max()) + 1
    threads = (int_scalar(pid.max()) + 1) * n_tid
    thread = pid.cast(pl.Int64) * n_tid + tid.cast(pl.Int64)
    if bool((thread.gather(parent) != thread).any()):  # null where there is no parent: not counted
        return None
    ts, dur = ops["ts_ns"].cast(pl.Int64), ops["dur_ns"].cast(pl.Int64)
    if ts.null_count() or dur.null_count():
        return None  # ordered where the sort puts its nulls
    # the preorder (loose ops last; thread, start, longest first, row): where each thread's rows already
    # follow start and duration (the loader's order), a stable sort of the one integer key gives it
    key = (loose.cast(pl.Int64) * threads + thread).alias("_key")
    # (the rows gathered per key by a group-by, which keeps each key's rows in order, the few keys sorted:
    # a stable sort of the key itself was 25 ms for 400 k ops)
    order = pl.DataFrame([key]).select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_r"), "_key") \
        .group_by("_key").agg("_r").sort("_key").explode("_r")["_r"]
    k_o, ts_o, dur_o = key.gather(order), ts.gather(order), dur.gather(order)
    in_order = pl.select(((k_o != k_o.shift(-1)) | (ts_o < ts_o.shift(-1))
                          | ((ts_o == ts_o.shift(-1)) & (dur_o >= dur_o.shift(-1)))).fill_null(True).all()).item()
    if not in_order:
        order = pl.DataFrame([key, ts, dur]).select(pl.arg_sort_by(
            ["_key", "ts_ns", "dur_ns", pl.int_range(n, dtype=pl.Int64)],
            descending=[False, False, True, False])).to_series().cast(pl.Int64)
        ts_o, dur_o = ts.gather(order), dur.gather(order)
    del k_o
    # the inverse permutation, by one scatter (not a second sort)
    pos_of_row = pl.zeros(n, pl.Int64, eager=True).alias(POS).scatter(order, pl.int_range(n, dtype=pl.Int64,
                                                                                       eager=True))
    m = n - int(loose.sum())
    loose_end = pl.int_range(m + 1, n + 1, dtype=pl.Int64, eager=True)  # loose ops: one position

    def checked(tree_end: pl.Series | None) -> pl.DataFrame | None:
        if tree_end is None:
            return None
        end_of_row = pl.concat([tree_end, loose_end]).gather(pos_of_row).alias(END)
        return pl.DataFrame([pos_of_row, end_of_row]) \
            if _subtrees(parent, has_parent, ops["depth"], pos_of_row, end_of_row) else None

    # tree ops: (thread, start) packed in one int64, ascending along the order; an op's end searched there
    by_time: pl.Series | None = pl.Series(END, [], dtype=pl.Int64)
    if m:
        t_o = thread.gather(order.head(m))
        lo = int_scalar(ts_o.head(m).min())
        span = max(int_scalar((ts_o.head(m) + dur_o.head(m)).max()), int_scalar(ts_o.head(m).max())) - lo + 1
        if threads * span < _INT64_MAX:
            start_k = t_o * span + (ts_o.head(m) - lo)
            by_time = start_k.search_sorted(start_k + dur_o.head(m), "left").cast(pl.Int64)
        else:
            by_time = None
    got = checked(by_time)
    if got is None and m:  # ops overlapping without nesting: the depths tell
        got = checked(_ends_by_depth(ops["depth"].gather(order.head(m)).cast(pl.Int64)))
    return got


def _ends_by_depth(depth: pl.Series) -> pl.Series | None:
    """Per position of the tree ops in preorder (``depth`` there: the sweep's, each op one level
    below the last op before it one level up), one past its last descendant: the first later
    position at its depth or above. Before each position ``j`` the ops at depths ``depth[j]`` to
    ``depth[j - 1]`` end (all of them after the last position), so at each depth the ops and their
    ends alternate, and the k-th op at a depth ends at the k-th end at that depth: both listed per
    depth by a group-by (each depth's in position order), no search, no sort of the positions. An
    op starting inside another and ending after it is still its child here, where the times put it
    outside (None: the depths are not a preorder's)."""
    m = depth.len()
    below = pl.concat([depth.slice(1), pl.Series([0], dtype=pl.Int64)])  # the depth the next position opens at
    ending = (depth - below + 1).clip(lower_bound=0)
    upto = ending.cum_sum()
    if int_scalar(upto[-1]) != m:
        return None
    k = pl.int_range(m, dtype=pl.Int64, eager=True)
    before = upto.search_sorted(k, "right").cast(pl.Int64)  # the k-th end: before position before + 1
    level = depth.gather(before) - (k - (upto - ending).gather(before))
    ends = pl.DataFrame({"d": level, "at": before + 1}).group_by("d").agg("at", pl.len()).sort("d")
    opens = pl.DataFrame({"d": depth, "at": k}).group_by("d").agg("at", pl.len()).sort("d")
    if not (ends["d"].equals(opens["d"]) and ends["len"].equals(opens["len"])):
        return None
    return pl.zeros(m, pl.Int64, eager=True).alias(END).scatter(opens["at"].explode(), ends["at"].explode())


_INT64_MAX = (1 << 63) - 1


def _subtrees(parent: pl.Series, has_parent: pl.Series, depth: pl.Series, pos: pl.Series, end: pl.Series) -> bool:
    """Per row, ``[pos, end)`` is the op's subtree (``parent``: the parent's row; ``depth`` null for
    the ops outside the tree, which have no parent): each range non-empty, after its parent's
    position and inside its parent's range, each depth one more than its parent's (0 at a root, so
    that it counts the op's ancestors), and the ranges' lengths, less one each, adding up to the
    depths. By elementwise gathers alone (a sum of the children's lengths per parent, by a group-by,
    was half the time of the ranges).

    Why that is enough: the parents' positions increase down every path, so there is no cycle; an
    op's descendants lie at distinct positions inside ``(pos, end)``, so there are at most
    ``end - pos - 1`` of them; the sum of those counts over all ops is the sum of their ancestor
    counts, the depths; the lengths adding up to it, no op has fewer descendants than its range
    holds, and every range is exactly its subtree."""
    if not bool((end > pos).all()):
        return False
    pdepth = depth.gather(parent)  # null where there is no parent
    if bool((has_parent & pdepth.is_null()).any()):
        return False  # a child of an op outside the tree
    want = pdepth.cast(pl.Int64).fill_null(-1) + 1
    pp, pe = pos.gather(parent), end.gather(parent)  # null where there is no parent
    if bool(((pp >= pos) | (pe < end) | (depth.cast(pl.Int64) != want)).any()):  # null: loose, not counted
        return False
    return int_scalar((end - pos - 1).sum()) == int_scalar(depth.cast(pl.Int64).sum())


def _nearest_up(value: pl.Series, parent: pl.Series) -> pl.Series | None:
    """Per position, ``value`` there or at its nearest ancestor where it is not null (pointer
    jumping over ``parent`` positions); None when the parents hold a cycle."""
    best, anc = value, parent
    for _ in range(64):  # 2^64 levels: a path longer means a cycle
        if anc.null_count() == anc.len():
            return best
        best = pl.select(pl.coalesce(best, best.gather(anc))).to_series()
        anc = anc.gather(anc)
    return None


def _laid_out(parent: pl.Series, end: pl.Series) -> bool:
    """The ranges ``[pos, end)`` are the subtrees: each op's range is non-empty, a leaf's one
    position long, a parent's first child right after it and its last child ending at its end
    (its children's ranges follow one another by construction)."""
    n = end.len()
    df = pl.DataFrame({"p": parent, "e": end}).with_columns(pl.int_range(n, dtype=pl.Int64).alias("i"))
    if not bool((df["e"] > df["i"]).all()):
        return False
    kids = df.filter(pl.col("p").is_not_null()).group_by("p").agg(
        pl.col("i").min().alias("first"), pl.col("e").max().alias("last"))
    has_kids = pl.repeat(False, n, eager=True)
    if kids.height:
        has_kids = has_kids.scatter(kids["p"], True)
    if not bool(((df["e"] == df["i"] + 1) | has_kids).all()):
        return False
    if kids.height == 0:
        return True
    at = kids["p"]
    return bool(((kids["first"] == at + 1) & (kids["last"] == end.gather(at))).all())


def inclusive_times(ranges: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """``_row`` (an op's row in the op table), ``category``, ``activities``, ``dur_ns``: per op and
    category, the activities launched by the op or any op below it and their summed duration; only
    the pairs with activities. ``acts``: ``category, dur_ns, _row`` (the launching op's row)."""
    pos, end = ranges[POS], ranges[END]
    at = acts.select("category", pl.col("dur_ns").cast(pl.Int64), pos.gather(acts["_row"]).alias(POS)).sort(POS)
    # each op's activities, all categories, are the positions [lo, hi) of the sorted table: two binary
    # searches per op, once; only the ops with one there go on (five in six ops of a training step
    # launch nothing, themselves or below)
    lo_all, hi_all = at[POS].search_sorted(pos, "left"), at[POS].search_sorted(end, "left")
    busy = (hi_all > lo_all).arg_true()
    lo, hi = lo_all.gather(busy).cast(pl.Int64), hi_all.gather(busy).cast(pl.Int64)
    del lo_all, hi_all
    rows = busy.cast(pl.Int64).alias("_row")
    out = []
    # per category (in the order the categories sort), a running count and a running sum of the
    # durations over that table, with a zero in front: the category's activities of an op are
    # cum[hi] - cum[lo], gathers where a binary search per op and category was twice the time
    for cat in at["category"].unique().sort():
        mine = at["category"].eq_missing(pl.Series([cat], dtype=at.schema["category"]))
        if at["dur_ns"].null_count():  # a running sum holds a null from one on: the category's own
            part = at.filter(mine)
            starts, ends = pos.gather(busy), end.gather(busy)
            count_lo = part[POS].search_sorted(starts, "left").cast(pl.Int64)
            count_hi = part[POS].search_sorted(ends, "left").cast(pl.Int64)
            time = pl.Series([0], dtype=pl.Int64).append(part["dur_ns"].cum_sum())
            got = pl.DataFrame({"_row": rows, "activities": count_hi - count_lo,
                                "dur_ns": time.gather(count_hi) - time.gather(count_lo)})
        else:
            count = pl.Series([0], dtype=pl.Int64).append(mine.cast(pl.Int64).cum_sum())
            time = pl.Series([0], dtype=pl.Int64).append(
                pl.select(pl.when(mine).then(at["dur_ns"]).otherwise(0).cum_sum()).to_series())
            got = pl.DataFrame({"_row": rows, "activities": count.gather(hi) - count.gather(lo),
                                "dur_ns": time.gather(hi) - time.gather(lo)})
        got = got.filter(pl.col("activities") > 0)
        out.append(got.with_columns(pl.lit(cat, at.schema["category"]).alias("category")))
    if not out:
        return pl.DataFrame(schema={"_row": pl.Int64, "category": acts.schema["category"], "activities": pl.Int64,
                                    "dur_ns": pl.Int64})
    return pl.concat(out).select("_row", "category", "activities", "dur_ns")


def outermost_of_name(ranges: pl.DataFrame, names: pl.Series) -> pl.Series:
    """Per op row: no op above it has its name (``names``, one per row), so an activity below
    several ops of one name is counted once for that name, at the outermost."""
    n = ranges.height
    # each name's ops by position: the names read in position order, then the positions gathered per
    # name by a group-by (which keeps each name's positions in that order; the names in any order): a
    # sort of every op by name and position was half of this function's time
    at = pl.zeros(n, pl.Int64, eager=True).scatter(ranges[POS], pl.int_range(n, dtype=pl.Int64, eager=True))
    df = pl.DataFrame({"n": names.gather(at), POS: pl.int_range(n, dtype=pl.Int64, eager=True)}) \
        .group_by("n").agg(POS).explode(POS)
    # ranges nest or are apart: an op is inside an earlier one of its name when the furthest end
    # among the earlier ones of its name lies past its start. The running maximum per name is one
    # running maximum over (name's rank, end) packed in an int64 (a window per name: a million
    # distinct step names made a million groups)
    rank = (pl.col("n") != pl.col("n").shift()).fill_null(True).cum_sum().cast(pl.Int64)
    span = n + 1
    df = df.with_columns((rank * span).alias("_base"), ranges[END].gather(at).gather(df[POS]).alias(END))
    reach = (pl.col("_base") + pl.col(END)).cum_max().shift(1)
    df = df.select(at.gather(df[POS]).alias("_row"),
                   (reach.is_null() | (reach < pl.col("_base") + pl.col(POS) + 1)).alias("_out"))
    return pl.repeat(False, n, eager=True).scatter(df["_row"], df["_out"])
