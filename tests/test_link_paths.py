"""The link's fast paths give exactly what its general paths give.

* the op tree from packed (thread, time) keys — by the C sweep (one radix sort, one
  pass), or in polars (starts sorted, ends binary-searched) — equals the full sweep over
  every boundary;
* when ids are row numbers: columns written by position instead of joined, parents'
  bounds gathered instead of joined, top-level ops by pointer jumping instead of a
  join per depth level.
Checked on every shared Kineto trace, and on hand-made tables for the edge cases.
"""

from __future__ import annotations

import polars as pl
import pytest
from conftest import kineto_traces, trace_ids
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import nongemm_trace.core.frames as frames
from nongemm_trace.classify import op_name_table
from nongemm_trace.classify.taxonomy import load_taxonomy
from nongemm_trace.core.frames import add_columns, is_row_index
from nongemm_trace.link import fast_sweep, nesting
from nongemm_trace.load import load_trace

TRACES = kineto_traces()
#: the packed op tree by the C sweep (where it is built) and by polars
SWEEPS = [pytest.param("on", marks=pytest.mark.skipif(fast_sweep._SWEEP is None, reason="the C sweep is not built")),
          "off"]


def test_the_sweep_is_built():
    """Built by the install wherever a C compiler exists (CI included), like the scanner."""
    import os
    if os.environ.get("NONGEMM_ALLOW_NO_SCANNER") == "1":
        pytest.skip("NONGEMM_ALLOW_NO_SCANNER=1")
    assert fast_sweep.available()


def _general(monkeypatch):
    """Turn every fast path off: the full sweep and joins everywhere."""
    monkeypatch.setattr(nesting, "_INT64_MAX", 0)
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")


@pytest.mark.parametrize("sweep", SWEEPS)
@pytest.mark.parametrize("path", TRACES, ids=trace_ids(TRACES))
def test_fast_link_equals_general_link(path, sweep, monkeypatch):
    monkeypatch.setenv("NONGEMM_FAST_SWEEP", sweep)
    trace = load_trace(path)
    ops = add_columns(trace.ops, op_name_table(load_taxonomy("default"), trace.ops), ["name", "cat"],
                      nulls_equal=True).with_columns(pl.col("is_wrapper").fill_null(False))
    points = trace.launches.select(pl.col("launch_id").alias("qid"), "pid", "tid", "ts_ns", "end_ns")
    tree, bad, hits = nesting.op_tree(ops, points)
    top = frames.outermost_up(tree, "is_wrapper", "top_id")
    inner = nesting.innermost_containing(tree, points)
    with monkeypatch.context() as m:
        _general(m)
        tree2, bad2, hits2 = nesting.op_tree(ops, points)
        top2 = frames.outermost_up(tree2, "is_wrapper", "top_id")
        inner2 = nesting.innermost_containing(tree2, points)
    assert bad == bad2
    assert_frame_equal(tree, tree2, check_exact=True)
    assert_frame_equal(top, top2, check_exact=True)
    assert_frame_equal(hits, hits2, check_exact=True)
    assert_frame_equal(inner, inner2, check_exact=True)


def _ops(rows):
    return pl.DataFrame(rows, schema={"pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64, "dur_ns": pl.Int64},
                        orient="row").with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")) \
        .with_row_index("op_id")


@pytest.mark.parametrize("rows", [
    # equal starts (longer first), an end at another's start, a zero-length op, two threads, overlap
    [("1", "1", 0, 100), ("1", "1", 0, 50), ("1", "1", 50, 50), ("1", "1", 10, 0), ("1", "2", 5, 10),
     ("1", "1", 90, 30), ("2", "1", 0, 1000), ("1", "1", 100, 0)],
    # a deep chain and times far from zero (epoch nanoseconds)
    [("7", "7", 1_700_000_000_000_000_000 + i, 1000 - 2 * i) for i in range(200)],
])
@pytest.mark.parametrize("sweep", SWEEPS)
def test_packed_sweep_edge_cases(rows, sweep, monkeypatch):
    monkeypatch.setenv("NONGEMM_FAST_SWEEP", sweep)
    ops = _ops(rows)
    # a call at a start, inside, after every op, on a thread without ops, and at an op's end
    points = pl.DataFrame({"qid": [0, 1, 2, 3, 4], "pid": ["1", "1", "1", "9", "1"], "tid": ["1", "2", "1", "9", "1"],
                           "ts_ns": [0, 6, 120, 0, 50], "end_ns": [0, 7, 121, 1, 55]}) \
        .with_columns(pl.col("qid").cast(pl.UInt32))
    if rows[0][2] > 10**15:
        points = points.with_columns(pl.col("ts_ns") + rows[0][2], pl.col("end_ns") + rows[0][2])
    fast = nesting.op_tree(ops, points)
    with monkeypatch.context() as m:
        _general(m)
        slow = nesting.op_tree(ops, points)
    assert fast[1] == slow[1]
    assert_frame_equal(fast[0], slow[0], check_exact=True)
    assert_frame_equal(fast[2], slow[2], check_exact=True)


_interval = st.tuples(st.sampled_from(["1", "2", "x"]), st.sampled_from(["1", "7"]), st.integers(0, 40),
                      st.integers(0, 25))


@settings(max_examples=int(__import__("os").environ.get("NONGEMM_FUZZ_EXAMPLES", "60")), deadline=None)
@given(rows=st.lists(_interval, min_size=1, max_size=40), queries=st.lists(_interval, max_size=12),
       shuffle=st.randoms(use_true_random=False))
def test_random_intervals_every_sweep_agrees(rows, queries, shuffle):
    """Random ops on a few threads (nested, overlapping, equal starts and ends, zero-length),
    ids in random order, and random queries: the C sweep, the polars packed path and the full
    sweep give the same tree, overlap count and hits."""
    ids = list(range(len(rows)))
    shuffle.shuffle(ids)
    ops = _ops(rows).with_columns(pl.Series("op_id", ids, dtype=pl.UInt32))
    points = pl.DataFrame([(i, p, t, ts, ts + d) for i, (p, t, ts, d) in enumerate(queries)],
                          schema={"qid": pl.UInt32, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64,
                                  "end_ns": pl.Int64}, orient="row")
    results = []
    with pytest.MonkeyPatch.context() as m:
        for sweep in (["on"] if fast_sweep._SWEEP is not None else []) + ["off", "general"]:
            m.setenv("NONGEMM_FAST_SWEEP", "off" if sweep == "general" else sweep)
            if sweep == "general":
                _general(m)
            results.append(nesting.op_tree(ops, points))
    for tree, bad, hits in results[1:]:
        assert bad == results[0][1]
        assert_frame_equal(tree, results[0][0], check_exact=True)
        assert_frame_equal(hits, results[0][2], check_exact=True)


def test_row_index():
    assert is_row_index(pl.Series([0, 1, 2], dtype=pl.UInt32))
    assert not is_row_index(pl.Series([0, 2, 1]))
    assert not is_row_index(pl.Series([1, 2, 3]))
    assert not is_row_index(pl.Series([0, None, 2]))
    assert not is_row_index(pl.Series([], dtype=pl.UInt32))
    # checked block by block: a disorder inside a block, and one straddling two blocks, are both seen
    from nongemm_trace.core.frames import _ROW_BLOCK

    n = 3 * _ROW_BLOCK + 5
    assert is_row_index(pl.Series(range(n), dtype=pl.UInt32))
    for at in (_ROW_BLOCK // 2, _ROW_BLOCK - 1, 2 * _ROW_BLOCK - 1):
        rows = list(range(n))
        rows[at], rows[at + 1] = rows[at + 1], rows[at]
        assert not is_row_index(pl.Series(rows, dtype=pl.UInt32)), at
    # each block consecutive in itself, the jumps only where one block meets the next
    b = _ROW_BLOCK
    rows = [*range(b), *range(b + 1, 2 * b + 1), *range(2 * b, n)]
    assert len(rows) == n and rows[-1] == n - 1 and not is_row_index(pl.Series(rows, dtype=pl.UInt32))


def test_columns_by_position_equal_a_join(monkeypatch):
    df = pl.DataFrame({"id": pl.Series(range(6), dtype=pl.UInt32), "x": list("abcdef")})
    right = pl.DataFrame({"id": pl.Series([4, 0, 2, None, 9], dtype=pl.UInt32), "v": [40, 0, 20, -1, 90],
                          "s": ["e", "a", "c", "?", "z"]})
    fast = add_columns(df, right, "id")
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")
    assert_frame_equal(fast, add_columns(df, right, "id"), check_exact=True)
    with pytest.raises(ValueError):
        add_columns(df, pl.DataFrame({"id": pl.Series([1, 1], dtype=pl.UInt32), "v": [1, 2]}), "id")
    monkeypatch.undo()
    with pytest.raises(ValueError):
        add_columns(df, pl.DataFrame({"id": pl.Series([1, 1], dtype=pl.UInt32), "v": [1, 2]}), "id")


def test_thread_codes_agree_between_ops_and_queries():
    """polars may give a text value another categorical code in a later cast once nothing holds
    the first (seen: '2' took code 0 after '1' had it), so ops' and queries' thread ids are
    cast together; a query on an op's thread must find it whatever was cast before."""
    ops = _ops([("a", "b", 0, 100)])
    pl.Series([f"v{i}" for i in range(50_000)]).cast(pl.Categorical)  # churn the codes
    points = pl.DataFrame({"qid": pl.Series([0, 1], dtype=pl.UInt32), "pid": ["z", "a"], "tid": ["y", "b"],
                           "ts_ns": [10, 10], "end_ns": [20, 20]})
    _, _, hits = nesting.op_tree(ops, points)
    assert hits["op_id"].to_list() == [None, 0]
    assert nesting.innermost_containing(ops, points)["op_id"].to_list() == [None, 0]


def test_lookup_by_position_equals_a_join(monkeypatch):
    """Columns of a table looked up by row number (gathers) equal a left join: order kept, nulls and
    ids beyond the table give nulls."""
    table = pl.DataFrame({"id": pl.Series(range(4), dtype=pl.UInt32), "v": [10, 11, 12, 13], "s": list("abcd")})
    df = pl.DataFrame({"k": pl.Series([3, None, 0, 3, 7], dtype=pl.UInt32), "x": [1, 2, 3, 4, 5]})
    fast = frames.lookup_columns(df, "k", table, "id")
    assert fast["v"].to_list() == [13, None, 10, 13, None]
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")
    assert_frame_equal(fast, frames.lookup_columns(df, "k", table, "id"), check_exact=True)


@pytest.mark.parametrize("name", ["bert_base_train_bs8_s128__eager", "llama_1b_fp8dyn_bs1_s2048__eager"])
@pytest.mark.parametrize("level", ["launch", "top"])
def test_classified_activities_by_position_equal_joins(name, level, monkeypatch):
    from conftest import shared

    from nongemm_trace.classify import classify, link_and_classify
    tax = load_taxonomy("default")
    linked = link_and_classify(load_trace(shared("h200", name + ".json.gz")), tax)
    fast = classify(linked, tax, level)
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")
    assert_frame_equal(fast, classify(linked, tax, level), check_exact=True)


@pytest.mark.parametrize("name", ["bert_base_train_bs8_s128__eager", "llama_1b_fp8dyn_bs1_s2048__eager",
                                  "fasterrcnn_resnet50_fpn_bs2__eager"])
def test_op_table_by_position_equals_joins(name, monkeypatch):
    """The per-op table from name codes, gathers and position marks equals the one from joins on
    the names (each activity counted once per op name above it, however often the name recurs)."""
    from conftest import shared

    from nongemm_trace.classify import classify, link_and_classify
    from nongemm_trace.metrics import breakdown
    tax = load_taxonomy("default")
    linked = link_and_classify(load_trace(shared("h200", name + ".json.gz")), tax)
    acts = classify(linked, tax, "launch")
    fast = breakdown.op_table(linked.ops, acts)
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")
    assert_frame_equal(fast, breakdown.op_table(linked.ops, acts), check_exact=True)


def test_op_table_counts_a_recurring_name_once():
    from nongemm_trace.metrics import breakdown
    ops = pl.DataFrame({"op_id": pl.Series([0, 1, 2], dtype=pl.UInt32), "name": ["f", "f", "g"],
                        "parent_id": pl.Series([None, 0, 1], dtype=pl.UInt32), "op_category": ["a", "a", None]})
    acts = pl.DataFrame({"activity_id": pl.Series([0, 1], dtype=pl.UInt32), "category": ["x", "x"],
                         "dur_ns": [5, 7], "launch_op_id": pl.Series([2, 1], dtype=pl.UInt32)})
    out = {r["op"]: r for r in breakdown.op_table(ops, acts).iter_rows(named=True)}
    assert out["f"]["gpu_time_ns"] == 12 and out["f"]["calls"] == 2 and out["f"]["self_gpu_time_ns"] == 7
    assert out["g"]["gpu_time_ns"] == 5 and out["g"]["calls"] == 1


def test_walk_up_by_position_equals_joins(monkeypatch):
    """The op-tree walk upwards (each row again per ancestor; for a set of ops, each ancestor once)
    gives the same levels by gathers and by joins; rows at a root stop, other columns ride along."""
    ops = pl.DataFrame({"op_id": pl.Series(range(6), dtype=pl.UInt32),
                        "parent_id": pl.Series([None, 0, 1, 0, None, 2], dtype=pl.UInt32)})
    rows = pl.DataFrame({"a": [10, 11, 12, 13], "op_id": pl.Series([5, 3, 4, 5], dtype=pl.UInt32)})

    def walk():
        levels = [lv.sort(["a", "op_id"]) for lv in frames.walk_up(ops, rows)]
        distinct = [lv.sort("op_id") for lv in frames.walk_up(ops, rows.select("op_id"), distinct=True)]
        return levels, distinct, sorted(frames.strict_ancestors(ops, pl.Series([5, 3])).to_list())

    fast = walk()
    assert [lv["op_id"].to_list() for lv in fast[0]] == [[2, 0, 2], [1, 1], [0, 0]]
    assert [lv["op_id"].to_list() for lv in fast[1]] == [[0, 2], [1], [0]]
    assert fast[2] == [0, 1, 2]
    monkeypatch.setenv("NONGEMM_ROW_INDEX", "off")
    slow = walk()
    for a, b in zip(fast[0] + fast[1], slow[0] + slow[1]):
        assert_frame_equal(a, b, check_exact=True)
    assert len(fast[0]) == len(slow[0]) and len(fast[1]) == len(slow[1]) and fast[2] == slow[2]
