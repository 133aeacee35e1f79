"""The op table's inclusive times by subtree ranges (metrics/subtrees.py) against the walk up the
tree they replace, on random nestings (ties, recurring names, several threads, zero-length ops),
and linear on trees that made rows x depth before (issue #42 item 2)."""

from __future__ import annotations

import gzip
import json
import random
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nongemm_trace.metrics import breakdown, subtrees
from nongemm_trace.pipeline.api import analyze


def _random_trace(path, seed: int) -> None:
    """Ops nested by time on three threads (some sharing starts, ends or whole intervals, some of
    zero length), each launching a kernel or not; names recur along paths."""
    rng = random.Random(seed)
    events, corr = [], 0

    def grow(tid, lo, hi, depth):
        nonlocal corr
        t = lo
        while t < hi and rng.random() < 0.8:
            start = t + rng.choice([0, 0, 1, 3])
            end = min(hi, start + rng.choice([0, 1, 5, 20, 60]))
            if rng.random() < 0.1:
                start, end = lo, hi  # the same interval as its parent
            if start > end or start >= hi:
                break
            name = rng.choice(["aten::f", "aten::g", "aten::mm", "aten::add"])
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": start,
                           "dur": end - start, "args": {}})
            if end > start and rng.random() < 0.6:
                corr += 1
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
                               "ts": start + 0.5 * (end - start), "dur": 0.001, "args": {"correlation": corr}})
                events.append({"ph": "X", "cat": "kernel", "name": rng.choice(["sgemm_nn", "elementwise_kernel",
                                                                                "softmax_kernel"]),
                               "pid": 0, "tid": 7, "ts": 10_000 + corr, "dur": rng.randint(1, 9),
                               "args": {"correlation": corr, "stream": 7}})
            if depth < 6 and end - start > 2:
                grow(tid, start, end, depth + 1)
            t = end
    for tid in (1, 2, 3):
        grow(tid, 0, 400, 0)
    rng.shuffle(events)
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("metric", ["gpu", "cpu"])
def test_ranges_give_the_walks_table(tmp_path, monkeypatch, seed, metric):
    path = tmp_path / "t.json.gz"
    _random_trace(path, seed)
    seen = []
    monkeypatch.setattr(breakdown, "subtree_ranges", lambda ops: seen.append(subtrees.subtree_ranges(ops)) or seen[-1])
    by_ranges = analyze(path, metric=metric).ops
    assert seen and seen[0] is not None  # the ranges described the tree
    monkeypatch.setattr(breakdown, "subtree_ranges", lambda ops: None)
    walked = analyze(path, metric=metric).ops
    assert by_ranges.height > 0
    assert_frame_equal(by_ranges, walked, check_exact=True)


def test_ranges_are_the_subtrees():
    """A small tree by hand: positions in preorder, each range one past the last descendant."""
    ops = pl.DataFrame({"op_id": pl.Series(range(5), dtype=pl.UInt32),
                        "parent_id": pl.Series([None, 0, 1, 0, None], dtype=pl.UInt32),
                        "depth": pl.Series([0, 1, 2, 1, 0], dtype=pl.Int32), "pid": ["1"] * 5, "tid": ["1"] * 5,
                        "ts_ns": [0, 1, 2, 10, 30], "dur_ns": [20, 8, 3, 5, 4]})
    got = subtrees.subtree_ranges(ops)
    assert got is not None
    assert got[subtrees.POS].to_list() == [0, 1, 2, 3, 4]
    assert got[subtrees.END].to_list() == [4, 3, 3, 4, 5]


def test_parents_out_of_time_order_are_walked():
    """Parents a loader set against the time order are not a preorder of it: no ranges."""
    ops = pl.DataFrame({"op_id": pl.Series(range(3), dtype=pl.UInt32),
                        "parent_id": pl.Series([None, 2, None], dtype=pl.UInt32),
                        "depth": pl.Series([0, 1, 0], dtype=pl.Int32), "pid": ["1"] * 3, "tid": ["1"] * 3,
                        "ts_ns": [0, 1, 5], "dur_ns": [4, 2, 4]})
    assert subtrees.subtree_ranges(ops) is None
    cycle = ops.with_columns(pl.Series("parent_id", [1, 0, None], dtype=pl.UInt32))
    assert subtrees.subtree_ranges(cycle) is None


def test_deep_nesting_and_overlapping_steps_are_linear(tmp_path):
    """20,000 ops nested in one another over one kernel, and 5,000 overlapping steps over 5,000
    kernels: seconds, where the walk made rows x depth (1 ms a level before)."""
    deep = tmp_path / "deep.json"
    n = 20_000
    ev = [{"ph": "X", "cat": "cpu_op", "name": f"aten::lin{i % 3}", "pid": 1, "tid": 1, "ts": 1000 + i,
           "dur": 10 * n - 2 * i, "args": {}} for i in range(n)]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1000 + n, "dur": 1,
            "args": {"correlation": 5}},
           {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 2000 + 10 * n, "dur": 5,
            "args": {"correlation": 5, "stream": 7}}]
    deep.write_text(json.dumps({"traceEvents": ev}))
    t0 = time.perf_counter()
    ops = analyze(deep).ops
    assert time.perf_counter() - t0 < 20
    assert ops.filter(pl.col("op") == "aten::lin0")["gpu_time_ns"].item() == 5000
    assert ops.filter(pl.col("op") == "aten::lin0")["calls"].item() == len(range(0, n, 3))


def _swept_ops(seed: int, n: int = 400) -> pl.DataFrame:
    """Random intervals on three threads (shared starts and ends, zero lengths, some overlapping
    without nesting) with the nesting sweep's depth and parents, ids the row numbers."""
    from nongemm_trace.link.nesting import op_tree

    rng = random.Random(seed)
    ts = [rng.choice([0, 0, 5, 10]) * 10 + rng.randrange(0, 400, rng.choice([1, 10, 50])) for _ in range(n)]
    dur = [rng.choice([0, 1, 7, 30, 100, 300]) for _ in range(n)]
    ops = pl.DataFrame({"op_id": pl.Series(range(n), dtype=pl.UInt32), "pid": ["1"] * n,
                        "tid": [rng.choice(["7", "8", "9"]) for _ in range(n)], "ts_ns": ts, "dur_ns": dur})
    ops = ops.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    return op_tree(ops)[0]


def _same(ops: pl.DataFrame) -> pl.DataFrame | None:
    got, by_siblings = subtrees.subtree_ranges(ops), subtrees._ranges_by_siblings(ops)
    assert (got is None) == (by_siblings is None)
    if got is not None and by_siblings is not None:
        assert_frame_equal(got, by_siblings, check_exact=True)
    return got


@pytest.mark.parametrize("seed", range(40))
def test_ranges_by_time_are_the_siblings(seed):
    """The ranges from the times (one search per op) or the depths are the sibling construction's, None included:
    on the sweep's trees (in the loader's row order, and shuffled: the full sort), on ops that
    overlap without nesting, and on parents or depths the sweep would not give (another thread's, a
    loose op's, one later in the order, an id past the last row; a depth off by one)."""
    rng = random.Random(seed)
    ops = _swept_ops(seed, rng.choice([5, 60, 400]))
    got = _same(ops)
    # the sweep's trees never reach the sibling construction: by the times, or where ops overlap
    # without nesting, by the depths
    assert got is not None and subtrees._ranges_by_time(ops) is not None
    # the same ops in another row order, renumbered
    perm = list(range(ops.height))
    rng.shuffle(perm)
    back = pl.Series(perm).arg_sort()
    moved = ops[perm].with_columns(pl.Series("op_id", range(ops.height), dtype=pl.UInt32),
                                   back.gather(ops["parent_id"].gather(perm)).cast(pl.UInt32).alias("parent_id"))
    _same(moved)
    n = ops.height
    for _ in range(3):
        i, j = rng.randrange(n), rng.randrange(n)
        parents = ops["parent_id"].to_list()
        parents[i] = rng.choice([j, None, n, parents[j]])
        _same(ops.with_columns(pl.Series("parent_id", parents, dtype=pl.UInt32)))
        _same(ops.with_columns(pl.Series("tid", ops["tid"].to_list()[:i] + ["x"] + ops["tid"].to_list()[i + 1:])))
        depths = ops["depth"].to_list()
        depths[i] = rng.choice([None, 0, 1, (depths[i] or 0) + 1])
        _same(ops.with_columns(pl.Series("depth", depths, dtype=pl.Int32)))


def _inclusive_plain(ranges: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """Two binary searches per op and category, every op."""
    at = acts.select("category", "dur_ns", ranges[subtrees.POS].gather(acts["_row"]).alias("p")).sort(["category", "p"])
    rows = pl.int_range(ranges.height, dtype=pl.Int64, eager=True).alias("_row")
    out = []
    for part in at.partition_by("category", maintain_order=True):
        cum = pl.Series([0], dtype=pl.Int64).append(part["dur_ns"].cast(pl.Int64).cum_sum())
        lo = part["p"].search_sorted(ranges[subtrees.POS], "left").cast(pl.Int64)
        hi = part["p"].search_sorted(ranges[subtrees.END], "left").cast(pl.Int64)
        got = pl.DataFrame({"_row": rows, "activities": hi - lo, "dur_ns": cum.gather(hi) - cum.gather(lo)})
        out.append(got.filter(pl.col("activities") > 0).with_columns(
            pl.lit(part["category"][0], part.schema["category"]).alias("category")))
    return pl.concat(out).select("_row", "category", "activities", "dur_ns")


def _outermost_plain(ranges: pl.DataFrame, names: pl.Series) -> list[bool]:
    """An op is outermost of its name when no op of its name holds its range."""
    pos, end, names_ = ranges[subtrees.POS].to_list(), ranges[subtrees.END].to_list(), names.to_list()
    return [not any(names_[j] == names_[i] and pos[j] < pos[i] < end[j] for j in range(len(pos)))
            for i in range(len(pos))]


@pytest.mark.parametrize("seed", range(12))
def test_inclusive_times_and_outermost_are_the_plain_ones(seed):
    """Per op and category by running counts over the activities in position order (the ops with
    none left out first) as by a search per op and category; the outermost op of each name as by
    its definition."""
    rng = random.Random(seed)
    ops = _swept_ops(seed, rng.choice([5, 80]))
    ranges = subtrees.subtree_ranges(ops)
    assert ranges is not None
    k = rng.choice([1, 10, 200])
    acts = pl.DataFrame({"category": pl.Series([rng.choice(["gemm", "norm", "other", None]) for _ in range(k)],
                                               dtype=pl.Categorical),
                         "dur_ns": [rng.randint(1, 9) for _ in range(k)],
                         "_row": [rng.randrange(ops.height) for _ in range(k)]})
    assert_frame_equal(subtrees.inclusive_times(ranges, acts), _inclusive_plain(ranges, acts), check_exact=True)
    names = pl.Series([rng.choice(["a", "b", None]) for _ in range(ops.height)])
    got = subtrees.outermost_of_name(ranges, names).to_list()
    want = _outermost_plain(ranges, names)
    assert [g for g, nm in zip(got, names) if nm is not None] == [w for w, nm in zip(want, names) if nm is not None]


def test_overlapping_ops_take_their_ranges_from_the_depths():
    """An op starting inside another and ending after it is its child (the sweep's), and so is an
    op starting after the first ended but inside the second: the times alone would leave it out of
    the first's range; the depths put it in."""
    from nongemm_trace.link.nesting import op_tree

    ops = pl.DataFrame({"op_id": pl.Series(range(3), dtype=pl.UInt32), "pid": ["1"] * 3, "tid": ["1"] * 3,
                        "ts_ns": [0, 5, 12], "dur_ns": [10, 15, 3]})
    ops = op_tree(ops.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")))[0]
    assert ops["parent_id"].to_list() == [None, 0, 0]
    got = _same(ops)
    assert got is not None and subtrees._ranges_by_time(ops) is not None
    assert got[subtrees.END].to_list() == [3, 2, 3]
