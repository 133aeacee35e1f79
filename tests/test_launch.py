"""Launch overhead, idle gaps and communication overlap (``nongemm-trace launch``)."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import SAMPLES, kineto_traces, ns, raw_events, shared, trace_ids

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.cli import main

WITH_GPU = [p for p in kineto_traces() if "cpu_only" not in p.name and "mtia" not in p.name]


@pytest.mark.parametrize("path", WITH_GPU, ids=trace_ids(WITH_GPU))
def test_busy_plus_idle_is_span_exactly(path):
    rep = launch_analysis(path)
    s = rep.summary
    assert round(s["busy_us"] * 1000) + round(s["idle_us"] * 1000) == round(s["span_us"] * 1000)
    assert 0 <= s["host_bound_idle_us"] <= s["idle_us"]
    by_class = s["busy_by_class_us"]  # the busy time split by class: a partition, communication last
    assert sum(round(v * 1000) for v in by_class.values()) == round(s["busy_us"] * 1000)
    assert min(by_class.values()) >= 0 and by_class["communication"] == s["exposed_communication_us"]
    for table in (rep.steps, rep.devices, rep.streams):
        if table.height:
            assert (table["busy_ns"] + table["idle_ns"] == table["span_ns"]).all()
            assert (table["host_bound_idle_ns"] <= table["idle_ns"]).all()
            assert (table["busy_ns"] <= table["gpu_time_ns"]).all()  # a union is never longer than the sum
    # the busy time is the union of the activity intervals: check it by merging in Python
    acts = sorted(zip(rep.activities["ts_ns"].to_list(), rep.activities["dur_ns"].to_list()))
    union, cur_s, cur_e = 0, None, None
    for s0, d in acts:
        if cur_e is None or s0 > cur_e:
            union += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s0, s0 + d
        else:
            cur_e = max(cur_e, s0 + d)
    union += cur_e - cur_s
    assert round(s["busy_us"] * 1000) == union


TRACELENS = ["Falconsai_nsfw_image_detection__1016002", "gaunernst_bert-small-uncased__1016001",
             "facebook_timesformer-base-finetuned-k400__1016002", "google_owlv2-large-patch14-ensemble__1016001"]


@pytest.mark.parametrize("name", TRACELENS)
def test_busy_time_matches_tracelens(name):
    trace = shared("external", "tracelens", f"h100__{name}.json.gz")
    timeline = shared("external", "tracelens", f"{name}_perf_report_csvs", "gpu_timeline.csv")
    ref = {r["type"]: float(r["time ms"]) * 1000 for r in csv.DictReader(open(timeline))}
    s = launch_analysis(trace).summary
    assert s["busy_us"] == pytest.approx(ref["busy_time"], abs=0.05)  # TraceLens sums float microseconds
    assert s["span_us"] == pytest.approx(ref["total_time"], abs=0.05)
    assert s["idle_us"] == pytest.approx(ref["idle_time"], abs=0.05)


def test_tracelens_excludes_kernels_launched_before_profiling():
    """Qwen: 30 % of GPU time has no launch call in the file; TraceLens leaves it out."""
    name = "Qwen_Qwen1.5-0.5B-Chat__1016005"
    trace = shared("external", "tracelens", f"h100__{name}.json.gz")
    timeline = shared("external", "tracelens", f"{name}_perf_report_csvs", "gpu_timeline.csv")
    ref = {r["type"]: float(r["time ms"]) * 1000 for r in csv.DictReader(open(timeline))}
    linked = AnalysisOptions(drop_unlinked=True)
    assert launch_analysis(trace, options=linked).summary["busy_us"] == pytest.approx(ref["busy_time"], abs=0.05)
    assert launch_analysis(trace).summary["busy_us"] > ref["busy_time"] * 1.2


def test_cuda_graphs_amortize_launches():
    eager = launch_analysis(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    graph = launch_analysis(shared("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"))
    assert graph.summary["launches"] < graph.summary["activities"]
    assert eager.summary["launches"] == eager.summary["activities"]
    assert graph.summary["launch_overhead_per_activity_us"] < eager.summary["launch_overhead_per_activity_us"]
    g = graph.graphs
    assert g["graph_launches"] == 2 and g["graph_activities"] == 268
    assert g["amortized_launch_us_per_graph_activity"] < g["launch_us_per_eager_activity"]
    # the critical path's word, as latency says it, with the timeline's kind of it (issue #43 item 2)
    assert eager.verdict.startswith("host-bound: ") and "(launch-bound)" in eager.verdict


def _union(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_exposed_communication_computed_independently(rank):
    path = shared("h200x2", f"bert_ddp_train_rank{rank}.json.gz")
    comm, rest = [], []
    for e in raw_events(str(path)):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            iv = (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
            (comm if e["name"].startswith("nccl") else rest).append(iv)
    assert comm
    exposed = _union(comm + rest) - _union(rest)
    s = launch_analysis(path).summary
    assert round(s["exposed_communication_us"] * 1000) == exposed
    assert round(s["communication_us"] * 1000) == _union(comm)
    assert round((s["exposed_communication_us"] + s["overlapped_communication_us"]) * 1000) == _union(comm)
    assert 0 < exposed < _union(comm)  # NCCL overlaps backward compute, partly


def test_per_activity_fields_and_categories():
    rep = launch_analysis(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"))
    a = rep.activities
    assert {"launch_dur_ns", "launch_delay_ns", "gap_stream_ns", "gap_device_ns"} <= set(a.columns)
    assert (a["launch_delay_ns"].drop_nulls() > 0).all()  # a kernel starts after its launch call
    assert (a["gap_device_ns"] >= 0).all()
    assert rep.categories["launch_overhead_ns"].sum() == round(rep.summary["host_bound_idle_us"] * 1000)
    assert rep.categories["activities"].sum() == rep.summary["activities"]


def test_cli_json_csv_and_plot(tmp_path, capsys):
    path = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    png = tmp_path / "timeline.png"
    assert main(["launch", str(path), "--format", "json", "--plot", str(png), "--window", "0:2000"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("span_us", "busy_us", "idle_us", "host_bound_idle_us", "activities", "launches", "short_activities",
              "mean_launch_delay_us", "exposed_communication_us", "steps", "streams", "categories", "warnings"):
        assert k in d
    assert set(d["categories"][0]) >= {"category", "activities", "gpu_time_us", "launch_overhead_us"}
    assert set(d["steps"][0]) >= {"span_us", "busy_us", "idle_us", "host_bound_idle_us", "activities", "launches"}
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert main(["launch", str(path), "--format", "csv", "--table", "categories"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("category")
    assert main(["launch", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Timeline" in text and "busy in GEMM" in text and f"{d['busy_by_class_us']['GEMM']:,.1f} us" in text
    svg = tmp_path / "t.svg"
    assert main(["launch", str(path), "--plot", str(svg), "--format", "json"]) == 0
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert main(["launch", str(path), "--window", "nonsense", "--plot", str(png)]) == 2


def test_short_threshold_is_configurable():
    path = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    a = launch_analysis(path, short_us=5).summary["short_activities"]
    b = launch_analysis(path, short_us=50).summary["short_activities"]
    assert a < b


def test_a_trace_without_gpu_work_has_the_whole_summary(capsys):
    """A CPU-only trace's launch report says nothing ran on the device, in every format, with the
    same summary fields as any other trace (a missing field was a KeyError in the terminal)."""
    gpu = launch_analysis(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz")).summary
    path = str(shared("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    empty = launch_analysis(path).summary
    assert set(gpu) - {"step_span_us", "step_us", "mean_step_us", "step_time"} <= set(empty)
    assert main(["launch", path]) == 0
    out = capsys.readouterr().out
    assert "no GPU activities" in out and "launch overhead per activity" in out
