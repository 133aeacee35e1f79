"""The latency graph's host pieces: the packed-key path (C sweep, gathers) gives the reference
path's table (the linker's nesting and joins) row for row, and the integer-coded labels give
the kinds, bounds and categories the definitions in docs/latency.md name."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES, shared

from nongemm_trace.analyses.latency import graph_of
from nongemm_trace.analyses.latency.pieces import _packed_pieces, host_pieces, reference_pieces, thread_codes
from nongemm_trace.link import fast_sweep
from nongemm_trace.pipeline.analysis import Analysis

TRACES = [("h200", "bert_base_train_bs8_s128__eager.json.gz"), ("h200x2", "bert_ddp_train_rank0.json.gz"),
          ("h200_nsys", "bert_nvtx.sqlite.gz"),
          ("external", "hta", "critical_path__cuda_event_sync__event_sync_trace.json.gz"),
          ("external2", "kineto", "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz")]


def _inputs(a: Analysis) -> tuple:
    ops = a.linked().ops.filter(pl.col("dur_ns") > 0)
    calls = a.trace().launches.filter(pl.col("dur_ns") > 0)
    _, op_thr, call_thr = thread_codes(ops, calls)
    return ops, calls, op_thr, call_thr


@pytest.mark.skipif(not fast_sweep.available(), reason="the C sweep is not built")
@pytest.mark.parametrize("parts", TRACES, ids=[p[-1][:30] for p in TRACES])
def test_packed_pieces_are_the_reference_pieces(parts):
    ops, calls, op_thr, call_thr = _inputs(Analysis(shared(*parts)))
    ref = reference_pieces(ops, calls, op_thr, call_thr)
    lo = int(pl.concat([ops["ts_ns"], calls["ts_ns"]]).min())
    span = int(pl.concat([ops["end_ns"], calls["end_ns"]]).max()) - lo + 1
    fast = _packed_pieces(ops, calls, op_thr, call_thr, lo, span, int(pl.concat([op_thr, call_thr]).max()) + 1)
    assert fast.equals(ref) and fast.schema == ref.schema
    assert ref["op_id"].is_not_null().any() and ref["launch_id"].is_not_null().any()


def test_pieces_without_calls_or_ops():
    ops, calls, op_thr, call_thr = _inputs(Analysis(SAMPLES / "latency" / "bert_bs1_s32__fp32.json.gz"))
    for o, c, ot, ct in ((ops, calls.head(0), op_thr, call_thr.head(0)),
                         (ops.head(0), calls, op_thr.head(0), call_thr)):
        got, ref = host_pieces(o, c, ot, ct), reference_pieces(o, c, ot, ct)
        assert got.equals(ref) and got.height > 0


def test_piece_labels_follow_the_definitions():
    _, g, _, _ = graph_of(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    p = g.pieces
    bound = {"sync": "sync", "wait": "sync", "launch": "launch", "call": "cpu", "op": "cpu", "wrapper": "other",
             "gap": "other"}
    assert set(p["kind"].unique()) <= set(bound)
    assert p.filter(pl.col("kind") != "wait").select(
        (pl.col("kind").replace_strict(bound) == pl.col("bound")).all()).item()
    assert p.filter(pl.col("kind").is_in(["gap", "wrapper"]))["category"].unique().to_list() == ["unclassified"]
    assert (p.filter(pl.col("kind") == "gap")
            .select(pl.col("op_id").is_null().all() & pl.col("launch_id").is_null().all()).item())


def test_locate_is_the_as_of_join_by_thread():
    """Ties included (a replay can make pieces of no length: equal times along a thread), and times so
    far apart that threads x span overflows an int64 key (a trace whose events lie decades apart, or its
    replay: 3 threads x 4e18 ns, and 1e19 ns from the first time to the last, each over 2^63)."""
    from nongemm_trace.analyses.latency.pieces import locate
    rows = pl.DataFrame({"thr": [0, 0, 0, 0, 0, 2, 2, 2], "ts": [1, 2, 2, 2, 5, 0, 3, 3]}).with_row_index("row")
    q = pl.DataFrame({"thr": [0, 0, 0, 0, 2, 2, 2, 1, 0], "t": [0, 2, 3, 9, 3, -4, 7, 2, 5]}).sort("t")
    cases = [("right", -1, "backward", True), ("left", 0, "forward", True), ("left", -1, "backward", False),
             ("right", 0, "forward", False)]
    for first, last in ((0, 0), (0, 4 * 10**18), (-5 * 10**18, 5 * 10**18)):
        r = rows.with_columns(pl.when(pl.col("thr") == 2).then(pl.col("ts") + last).otherwise(pl.col("ts") + first))
        qq = (q.with_columns(pl.when(pl.col("thr") == 2).then(pl.col("t") + last).otherwise(pl.col("t") + first))
              .sort("t"))
        got = locate(r["thr"], r["ts"], [(qq["thr"], qq["t"], side, shift) for side, shift, _, _ in cases])
        rr = r.select("thr", pl.col("ts").alias("t"), pl.col("row").cast(pl.Int64))
        for g, (_, _, strategy, exact) in zip(got, cases):
            want = qq.join_asof(rr, on="t", by="thr", strategy=strategy, allow_exact_matches=exact,
                                check_sortedness=False)["row"]
            assert g.to_list() == want.to_list(), (first, last, strategy, exact)


def test_host_positions_are_the_same_whatever_the_block(monkeypatch):
    """The replay places each thread's pieces a block of pieces at a time (no loop per thread: a trace
    may hold a thread per op): blocks that cut threads anywhere give the positions of one block, on a
    training trace with a main and a backward thread and syncs."""
    import numpy as np

    from nongemm_trace.analyses.latency import replay as replay_mod
    from nongemm_trace.analyses.latency.replay import measured_piece_lengths

    _, g, _, _ = graph_of(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    assert g.pieces["thr"].n_unique() >= 2 and g.syncs.height
    lengths = measured_piece_lengths(g)
    monkeypatch.setattr(replay_mod, "_BLOCK", g.pieces.height + 1)
    whole = replay_mod._host_positions(g, lengths)
    monkeypatch.setattr(replay_mod, "_BLOCK", 7)
    cut = replay_mod._host_positions(g, lengths)
    for a, b in zip(whole, cut):
        assert np.array_equal(a, b)
    # each thread starts where its first piece starts
    o, _, starts, _ = cut
    assert np.array_equal(o[starts], g.pieces["ts"].to_numpy()[starts])
