"""The calls' CPU times (metrics/op_cpu.py) against the plain formulations they replace (issue #46):
the same-name nesting by one sort of all three keys and a window per group, and the op each
profiler-overhead event interrupted by a filter of every op per event, on random ops (rows in the
loader's order and shuffled, shared starts and ends, several threads) and events (ties too)."""

from __future__ import annotations

import random

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from nongemm_trace.metrics import op_cpu


def _ops(rng: random.Random, n: int, sorted_rows: bool) -> pl.DataFrame:
    ts = [rng.randrange(0, 300, rng.choice([1, 10, 50])) for _ in range(n)]
    dur = [rng.choice([0, 1, 7, 30, 100]) for _ in range(n)]
    df = pl.DataFrame({"pid": ["1"] * n, "tid": [rng.choice(["7", "8"]) for _ in range(n)],
                       "name": [rng.choice(["aten::a", "aten::b", "aten::c"]) for _ in range(n)],
                       "ts_ns": ts, "dur_ns": dur}).with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    if sorted_rows:
        df = df.sort(["ts_ns", "dur_ns"], descending=[False, True])
    return df.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("op_id"),
                           pl.lit(None, pl.UInt32).alias("parent_id"))


def _nested_plain(ops: pl.DataFrame) -> pl.Series:
    thread = (op_cpu._code("pid").cast(pl.Int64) * (1 << 32) + op_cpu._code("tid").cast(pl.Int64)).rank("dense")
    group = (thread.cast(pl.Int64) * (1 << 32) + op_cpu._code("name").cast(pl.Int64)).alias("_g")
    order = ops.with_columns(pl.int_range(pl.len()).alias("_row")).select("_row", group, "ts_ns", "end_ns").sort(
        ["_g", "ts_ns", "end_ns"], descending=[False, False, True], maintain_order=True)
    flags = order.select("_row", (pl.col("end_ns").cum_max().shift(1).over("_g") >= pl.col("end_ns"))
                         .fill_null(False).alias("_n")).sort("_row")
    return flags["_n"]


def _interrupted_plain(ops: pl.DataFrame, overhead: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for ts, dur in overhead.select("ts_ns", "dur_ns").iter_rows():
        holding = op_cpu._innermost(ops, ts, dur, 1)
        if holding.height:
            rows.append({"op_id": holding["op_id"][0], "dur_ns": int(dur)})
    return pl.DataFrame(rows, schema={"op_id": ops.schema["op_id"], "dur_ns": pl.Int64}, orient="row")


@pytest.mark.parametrize("seed", range(40))
def test_cpu_times_are_the_plain_ones(seed, monkeypatch):
    if seed % 2:  # each event a query of its own, as with very many events and holding ops
        monkeypatch.setattr(op_cpu, "_PAIRS_AT_ONCE", 0)
    rng = random.Random(seed)
    ops = _ops(rng, rng.choice([1, 20, 300]), sorted_rows=seed % 3 != 0)
    got = op_cpu.call_cpu_times(ops)
    assert got["cpu_ns"].to_list() == pl.select(
        pl.when(_nested_plain(ops)).then(0).otherwise(ops["dur_ns"])).to_series().to_list()
    events = pl.DataFrame({"ts_ns": [rng.randrange(-10, 320) for _ in range(8)],
                           "dur_ns": [rng.choice([0, 1, 5, 40, 500]) for _ in range(8)]})
    assert_frame_equal(op_cpu._interrupted(ops, events), _interrupted_plain(ops, events))
    assert op_cpu._interrupted(ops, events.head(0)).height == 0


def test_an_event_held_by_two_like_ops_is_picked_as_the_plain_query_picks():
    """Two ops of one start and end on two threads hold the event: the filter of every op decides."""
    ops = pl.DataFrame({"op_id": pl.Series([0, 1, 2], dtype=pl.UInt32), "ts_ns": [0, 5, 5], "end_ns": [100, 50, 50]})
    events = pl.DataFrame({"ts_ns": [10, 60, 200], "dur_ns": [1, 2, 3]})
    assert_frame_equal(op_cpu._interrupted(ops, events), _interrupted_plain(ops, events))
