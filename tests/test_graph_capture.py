"""Graph capture windows (issue #45 item 1): launches made between a thread's begin-capture and
end-capture calls were recorded into a CUDA/HIP graph, not run; graph replays are what ran.

A capture records a launch call and no GPU activity for it. The traces here are real ones made into
what a profile of a capture holds: a window of one thread's launch calls put between begin- and
end-capture calls (the runtime's, the driver's versioned ones, HIP's), their activities taken out.
GPU captures of bench/capture_graph_capture.py under sample_traces/graph_capture/ are checked too
where present. Every figure is checked against the raw JSON (conftest's reader)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, interval_union_ns, kineto_traces, raw_events, shared

import nongemm_trace
from nongemm_trace.analyses.latency import latency_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.load import load_trace
from nongemm_trace.load.graph_capture import base_name, capture_windows

BERT = ("h200", "bert_base_fp32_bs8_s128__eager.json.gz")
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"}
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}


def _captured_copy(src: Path, dst: Path, first: int, count: int, begin: str, end: str) -> set[int]:
    """A copy of ``src`` in which launch calls ``first .. first + count`` (in time order) of the busiest
    thread sit inside one capture window and their activities are gone; returns their correlations."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    calls = sorted((e for e in events if e.get("cat") == "cuda_runtime" and e.get("name") in LAUNCHES),
                   key=lambda e: e["ts"])
    tid = max({e["tid"] for e in calls}, key=lambda t: sum(e["tid"] == t for e in calls))
    window = [e for e in calls if e["tid"] == tid][first:first + count]
    captured = {e["args"]["correlation"] for e in window}
    events[:] = [e for e in events if not (e.get("cat") in DEVICE and e["args"].get("correlation") in captured)]
    marks = ((begin, window[0]["ts"] - 0.5), (end, window[-1]["ts"] + window[-1]["dur"] + 0.1))
    for i, (name, ts) in enumerate(marks):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": window[0]["pid"], "tid": tid,
                       "ts": ts, "dur": 0.3, "args": {"correlation": -1 - i, "External id": 0}})
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return captured


@pytest.fixture(scope="module")
def partly(tmp_path_factory) -> tuple[Path, set[int]]:
    """BERT's forward with 100 of its launches captured (the runtime's names)."""
    dst = tmp_path_factory.mktemp("capture") / "bert_partly_captured.json.gz"
    return dst, _captured_copy(shared(*BERT), dst, 100, 100, "cudaStreamBeginCapture", "cudaStreamEndCapture")


@pytest.fixture(scope="module")
def capture_only(tmp_path_factory) -> tuple[Path, set[int]]:
    """The same forward with all its launches but the first two captured (the driver's versioned names):
    what a serving engine's start-up profile holds."""
    dst = tmp_path_factory.mktemp("capture") / "bert_capture_only.json.gz"
    return dst, _captured_copy(shared(*BERT), dst, 2, 10_000, "cuStreamBeginCapture_v2", "cuStreamEndCapture")


def _warnings(rep, code: str) -> list:
    return [w for w in rep.warnings if w.code == code]


def test_captured_launches_are_marked_and_counted_once(partly):
    path, captured = partly
    trace = load_trace(path)
    marked = trace.launches.filter(pl.col("captured"))
    assert set(marked["correlation"].to_list()) == captured
    rep = nongemm_trace.analyze(path)
    (w,) = _warnings(rep, "graph_capture")  # one warning, whatever the number of launches
    assert w.count == len(captured) and w.message.startswith(f"{len(captured)} launches were captured")
    assert [x["code"] for x in rep.to_dict()["warnings"]].count("graph_capture") == 1
    # what ran: every activity of the file, each once; the captured ones had none
    raw = [e for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") in DEVICE]
    assert rep.gpu_activities == len(raw)
    assert rep.gpu_time_ns == sum(round(e["dur"] * 1000) for e in raw)
    assert int(rep.categories["time_ns"].sum()) == rep.gpu_time_ns


def test_launch_sets_the_capture_apart_from_host_bound_idle(partly):
    path, captured = partly
    rep = launch_analysis(path)
    s = rep.summary
    trace = load_trace(path)
    (win,) = capture_windows(trace.launches).iter_rows(named=True)
    acts = nongemm_trace.analyze(path).kernels
    # the GPU's idle stretches, by a plain merge (independent of the library), and what the window covers
    spans = sorted(zip(acts["ts_ns"].to_list(), (acts["ts_ns"] + acts["dur_ns"]).to_list()))
    idle, end = [], spans[0][1]
    for ts, e in spans[1:]:
        if ts > end:
            idle.append((end, ts))
        end = max(end, e)
    covered = sum(max(0, min(b, win["end_ns"]) - max(a, win["ts_ns"])) for a, b in idle)
    assert covered > 0
    assert s["capture_idle_us"] == pytest.approx(covered / 1000, abs=1e-3)
    assert s["captured_launches"] == len(captured) and s["capture_windows"] == 1
    assert s["launches"] == acts["launch_id"].drop_nulls().n_unique()
    # idle = host-bound + capture + the rest, and no host-bound gap reaches into the window
    assert s["host_bound_idle_us"] + s["capture_idle_us"] <= s["idle_us"] + 1e-3
    assert s["busy_us"] == pytest.approx(interval_union_ns(acts) / 1000, abs=1e-3)
    per = rep.activities.filter(pl.col("host_bound_gap_ns") > 0)
    starts = per["ts_ns"] - per["gap_device_ns"]
    inside = per.filter((starts >= win["ts_ns"]) & (per["ts_ns"] <= win["end_ns"]))
    assert (inside["host_bound_gap_ns"] < inside["gap_device_ns"]).all()


def test_latency_puts_the_capture_on_its_own_bound(partly):
    path, _ = partly
    rep = latency_analysis(path)
    att = rep.attribution
    capture = int(att.filter(pl.col("bound") == "capture")["ns"].sum())
    (win,) = capture_windows(load_trace(path).launches).iter_rows(named=True)
    assert 0 < capture <= win["end_ns"] - win["ts_ns"]
    # every step still adds up to its wall time
    walls = dict(rep.steps.select("step", "wall").iter_rows())
    for step, ns in att.group_by("step").agg(pl.col("ns").sum()).iter_rows():
        assert ns == walls[step]


def test_a_capture_only_trace_gets_one_verdict(capture_only):
    path, captured = capture_only
    rep = nongemm_trace.analyze(path)
    (w,) = _warnings(rep, "graph_capture")
    assert w.count == len(captured) and "graph capture, no replay" in w.message
    assert f"what ran is {rep.gpu_activities:,} GPU activities" in w.message
    launch = launch_analysis(path)
    assert launch.verdict.startswith("graph capture: ")
    assert launch.summary["activities"] == rep.gpu_activities
    assert launch.summary["host_bound_idle_us"] <= launch.summary["idle_us"]
    lat = latency_analysis(path)
    by = dict(lat.attribution.group_by("bound").agg(pl.col("ns").sum()).iter_rows())
    host = sum(by.get(b, 0) for b in ("launch", "cpu", "other"))
    assert by["capture"] > host and by["capture"] > by.get("gpu", 0)
    from nongemm_trace.models.latency import bound_of
    assert bound_of(lat.attribution) == "capture-bound"
    # what ran, as latency sees it: no more device time than analyze counts
    assert by.get("gpu", 0) <= rep.gpu_time_ns


def test_call_names_with_versions_and_hip():
    names = pl.Series(["cuStreamBeginCapture_v2", "cudaStreamEndCapture_v10000", "hipStreamBeginCapture",
                       "cuGraphLaunch_ptsz", "cudaGraphLaunch"])
    assert pl.select(base_name(pl.lit(names))).to_series().to_list() == [
        "cuStreamBeginCapture", "cudaStreamEndCapture", "hipStreamBeginCapture", "cuGraphLaunch", "cudaGraphLaunch"]


@pytest.mark.parametrize("path", kineto_traces(), ids=lambda p: p.name)
def test_no_shared_trace_has_captured_launches(path):
    """The shared traces record no capture: nothing is marked, so their totals are as before."""
    trace = load_trace(path)
    assert not trace.launches["captured"].any()
    assert not [a for a in trace.anomalies if a.code == "graph_capture"]


GPU_CAPTURES = sorted((REPO / "sample_traces" / "graph_capture").glob("graph_*.json.gz"))


@pytest.mark.parametrize("path", GPU_CAPTURES, ids=lambda p: p.name)
def test_gpu_captures_of_the_bench_script(path):
    """bench/capture_graph_capture.py on an H100: launches between cudaStreamBeginCapture and
    cudaStreamEndCapture have no activity and are the warning's count; replays are what ran."""
    events = [e for e in raw_events(str(path)) if e.get("ph") == "X"]
    ran = {e["args"].get("correlation") for e in events if e.get("cat") in DEVICE}
    calls = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    depth, inside = {}, 0
    for e in calls:  # a plain walk over the calls of each thread (independent of the library)
        t = e["tid"]
        if e["name"].startswith(("cudaStreamBeginCapture", "cuStreamBeginCapture")):
            depth[t] = depth.get(t, 0) + 1
        elif e["name"].startswith(("cudaStreamEndCapture", "cuStreamEndCapture")):
            depth[t] = depth.get(t, 0) - 1
        elif depth.get(t, 0) > 0 and e["name"] in LAUNCHES | {"cudaGraphLaunch"} \
                and e["args"].get("correlation") not in ran:
            inside += 1
    rep = nongemm_trace.analyze(path)
    found = _warnings(rep, "graph_capture")
    assert (found[0].count if found else 0) == inside
    launch = launch_analysis(path)
    replays = [e for e in calls if e["name"] == "cudaGraphLaunch" and e["args"].get("correlation") in ran]
    if inside and not replays:
        assert launch.verdict.startswith("graph capture: ")
    if replays:
        assert launch.graphs["graph_launches"] == len(replays)
