"""Kineto ``cuda_sync`` records: read by every loader path, and used by the latency graph as
cross-stream dependencies (``Stream Wait Event``) and as the named stream / event of a synchronizing
call (``Stream Sync`` / ``Event Sync``). docs/latency.md, "The dependency graph"."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import polars as pl
import pytest
from conftest import raw_events, shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import graph_of, latency_analysis, measured_timeline, whatif_analysis
from nongemm_trace.analyses.latency.replay import measured_piece_lengths, replay
from nongemm_trace.analyses.latency.waits import DEPS_SCHEMA
from nongemm_trace.load import load_trace
from nongemm_trace.pipeline.analysis import Analysis

ALEXNET = ("external", "hta", "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")
EVENT_SYNC = ("external", "hta", "critical_path__cuda_event_sync__event_sync_trace.json.gz")
ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


@pytest.mark.parametrize("parts", [ALEXNET, EVENT_SYNC], ids=["alexnet", "event_sync"])
@pytest.mark.parametrize("scanner", ["on", "off"])
def test_the_records_are_read_as_written(parts, scanner, monkeypatch):
    """Every ``cuda_sync`` event of the file is a row, with its fields (a direct count of the JSON)."""
    monkeypatch.setenv("NONGEMM_FAST_SCAN", scanner)
    path = shared(*parts)
    want = [e for e in raw_events(str(path)) if e.get("cat") == "cuda_sync" and e.get("ph") == "X"]
    got = load_trace(path).cuda_syncs
    assert got.height == len(want) == (41 if parts == ALEXNET else 4)
    assert Counter(got["kind"].to_list()) == Counter(e["args"]["cuda_sync_kind"] for e in want)
    fields = ("correlation", "stream", "device", "wait_on_stream", "wait_on_cuda_event_record_corr_id")
    rows = sorted(tuple(e["args"].get(f) for f in fields) for e in want)
    assert sorted(got.select(fields).iter_rows()) == rows


def test_stream_waits_are_dependencies_across_streams():
    """AlexNet's 20 stream waits: 14 wait on an event recorded on a stream that ran nothing (no-ops); the
    other 6 (in each of 2 passes, stream 20 waits twice for stream 7 and stream 7 once for stream 20)
    are 6 dependencies, each from the last activity launched on the recorded stream before the record
    call to the first launched on the waiting stream after the wait call."""
    a = Analysis(shared(*ALEXNET))
    _, g, _, _ = graph_of(a, options=AnalysisOptions(step_marker=ALEXNET_STEP))
    rec = g.deps.filter(pl.col("recorded"))
    assert rec.height == 6
    acts = g.acts.select("row", "stream", "call_ts", "end")
    pairs = rec.join(acts.rename({"row": "act"}), on="act").join(
        acts.select(pl.col("row").alias("dep"), pl.col("stream").alias("dep_stream"),
                    pl.col("call_ts").alias("dep_call")), on="dep")
    assert set(zip(pairs["stream"], pairs["dep_stream"])) == {(20, 7), (7, 20)}
    assert (pairs["dep_call"] < pairs["call_ts"]).all()
    tl = measured_timeline(g)
    assert (tl.acts["ts"] == g.acts["ts"]).all() and (tl.acts["end"] == g.acts["end"]).all()


def test_a_slower_awaited_stream_moves_the_waiting_stream():
    """Lengthen the activities the recorded waits await: the waiting activities start no earlier than
    the awaited ends plus their delays; without the dependencies they would not move."""
    _, g, _, _ = graph_of(Analysis(shared(*ALEXNET)), options=AnalysisOptions(step_marker=ALEXNET_STEP))
    d = g.acts["dur"].to_numpy().copy()
    dep, act, delta = (g.deps[c].to_numpy() for c in ("dep", "act", "delta"))
    d[dep] += 5_000_000  # 5 ms more each
    pieces = measured_piece_lengths(g)
    tl = replay(g, d, pieces)
    E, S = tl.acts["end"].to_numpy(), tl.acts["ts"].to_numpy()
    assert (S[act] >= E[dep] + delta).all()
    alone = replay(dataclasses.replace(g, deps=pl.DataFrame(schema=DEPS_SCHEMA)), d, pieces)
    moved = S[act] - alone.acts["ts"].to_numpy()[act]
    assert (moved >= 0).all() and moved.max() > 1_000_000


def test_whatif_nothing_changed_reproduces_the_hta_steps():
    for parts, marker in ((ALEXNET, ALEXNET_STEP), (EVENT_SYNC, None)):
        a = Analysis(shared(*parts))
        opts = AnalysisOptions(step_marker=marker)
        rep = latency_analysis(a, options=opts)
        wall = dict(zip(rep.steps["step"].to_list(), rep.steps["wall"].to_list()))
        assert dict(rep.attribution.group_by("step").agg(pl.col("ns").sum()).iter_rows()) == wall
        for s in whatif_analysis(a, WhatIfParams(scale=("GEMM=1",)), options=opts).to_dict()["steps"]:
            assert s["predicted_us"] == s["measured_us"]


def test_event_and_stream_syncs_name_what_they_waited_for():
    """The cudaEventSynchronize waits for the last activity launched on the recorded stream before the
    cudaEventRecord its record names; the cudaStreamSynchronize for the stream its record names."""
    a = Analysis(shared(*EVENT_SYNC))
    t = a.trace()
    _, g, _, _ = graph_of(a)
    calls = t.launches.select("launch_id", "name", "correlation", "ts_ns")
    rec_t = int(calls.filter(pl.col("correlation") == 1533)["ts_ns"][0])
    got = g.syncs.join(calls, on="launch_id").join(g.awaits, on="sync").join(
        g.acts.select(pl.col("row").alias("act"), "stream", "call_ts"), on="act")
    ev = got.filter(pl.col("name") == "cudaEventSynchronize")
    assert ev.height == 1 and ev["stream"][0] == 7 and ev["call_ts"][0] < rec_t
    last = g.acts.filter((pl.col("stream") == 7) & (pl.col("call_ts") < rec_t))["call_ts"].max()
    assert ev["call_ts"][0] == last
    assert got.filter(pl.col("name") == "cudaStreamSynchronize")["stream"].to_list() == [7]


def _two_streams(tmp_path, with_record: bool = True):
    """One step: a 100 us fill on stream 20; a 200 us GEMM on stream 7, an event recorded after it, stream
    20 made to wait for it, and an add queued on stream 20 that starts 2 us after the GEMM ends."""
    def x(cat, name, ts, dur, tid=1, pid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    ev = [x("user_annotation", "ProfilerStep#1", 0, 100),
          x("cpu_op", "aten::fill_", 3, 7, **{"External id": 1}),
          x("cuda_runtime", "cudaLaunchKernel", 5, 3, correlation=1, **{"External id": 1}),
          x("kernel", "fill_kernel", 10, 100, 20, 0, device=0, stream=20, correlation=1, **{"External id": 1}),
          x("cpu_op", "aten::mm", 11, 19, **{"External id": 2}),
          x("cuda_runtime", "cudaLaunchKernel", 12, 5, correlation=2, **{"External id": 2}),
          x("kernel", "sgemm", 20, 200, 7, 0, device=0, stream=7, correlation=2, **{"External id": 2}),
          x("cuda_runtime", "cudaEventRecord", 31, 2, correlation=3),
          x("cuda_runtime", "cudaStreamWaitEvent", 35, 2, correlation=4),
          x("cpu_op", "aten::add", 40, 10, **{"External id": 3}),
          x("cuda_runtime", "cudaLaunchKernel", 42, 4, correlation=5, **{"External id": 3}),
          x("kernel", "add_kernel", 222, 4, 20, 0, device=0, stream=20, correlation=5, **{"External id": 3})]
    if with_record:
        ev.append(x("cuda_sync", "Stream Wait Event", 35, 0.001, 20, 0, cuda_sync_kind="Stream Wait Event",
                    stream=20, correlation=4, device=0, wait_on_stream=7, wait_on_cuda_event_record_corr_id=3))
    p = tmp_path / ("waits.json" if with_record else "no_record.json")
    p.write_text(json.dumps({"traceEvents": ev}))
    return p


def test_the_path_follows_a_recorded_wait_onto_the_awaited_stream(tmp_path):
    path = _two_streams(tmp_path)
    rep = latency_analysis(path)
    assert rep.steps["wall"].to_list() == [226_000]
    got = {(r["category"], r["bound"]): r["ns"] for r in rep.attribution.iter_rows(named=True)}
    # the add, its 2 us hand-off after the event, the GEMM it waited for, the GEMM's launch
    assert got[("arithmetic", "gpu")] == 4_000 and got[("arithmetic", "sync")] == 2_000
    assert got[("gemm", "gpu")] == 200_000 and got[("gemm", "launch")] == 8_000
    faster = whatif_analysis(path, WhatIfParams(scale=("GEMM=0.5",))).to_dict()["steps"][0]
    assert faster["predicted_us"] == 126.0  # the GEMM ends at 120 us; the add 2 us after it, 4 us long
    slower = whatif_analysis(path, WhatIfParams(scale=("GEMM=2",))).to_dict()["steps"][0]
    assert slower["predicted_us"] == 426.0
    # without the record the timing still shows the hand-off (the add started 112 us after its stream's
    # fill, 2 us after the GEMM on the other stream ended: latency/waits.py's unrecorded hand-offs), so
    # the add moves with the GEMM as it does with the record
    plain = _two_streams(tmp_path, with_record=False)
    assert whatif_analysis(plain, WhatIfParams(scale=("GEMM=0.5",))).to_dict()["steps"][0]["predicted_us"] == 126.0
    assert whatif_analysis(plain, WhatIfParams(scale=("GEMM=2",))).to_dict()["steps"][0]["predicted_us"] == 426.0
    # and the 112 us behind the fill is a wait the trace does not explain (beyond the usual 1 us queue gap)
    assert latency_analysis(plain).attribution.filter(pl.col("bound") == "sync")["ns"].sum() == 111_000
