"""``latency`` and ``whatif``: the attribution tiles each step's wall time to the nanosecond, the wall
time is the issue's definition (computed here from the loaded tables, independently of the graph),
``whatif`` with nothing changed reproduces every step, the replay's rules on hand-made timelines, and
the H200 validation pairs in ``sample_traces/latency`` (docs/latency.md)."""

from __future__ import annotations

import json
import os

import polars as pl
import pytest
from conftest import SAMPLES, SHARED, kineto_traces, shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import graph_of, latency_analysis, measured_timeline, whatif_analysis
from nongemm_trace.analyses.latency.path import attribute, bound_times
from nongemm_trace.cli import main
from nongemm_trace.pipeline.analysis import Analysis

LAT = SAMPLES / "latency"
#: the shared traces with steps whose whole check stays cheap (the large external ones add seconds each)
STEPPED = ["h200/" + p for p in (
    "bert_base_fp32_bs8_s128__eager.json.gz", "bert_base_fp32_bs8_s128__compiled.json.gz",
    "bert_base_train_bs8_s128__eager.json.gz", "fasterrcnn_resnet50_fpn_bs2__eager.json.gz",
    "gpt2_fp32_bs8_s128__eager.json.gz", "gpt2_fp32_bs8_s128__compiled.json.gz",
    "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz", "llama_1b_bf16_bs1_s2048__eager.json.gz",
    "llama_1b_fp16_bs1_s512__eager.json.gz", "llama_1b_fp16_bs1_s512__compiled.json.gz",
    "llama_1b_fp8dyn_bs1_s2048__eager.json.gz", "resnet50_fp32_bs8__eager.json.gz",
    "resnet50_fp32_bs8__compiled.json.gz")] + [
    "h200x2/bert_ddp_train_rank0.json.gz", "h200x2/bert_ddp_train_rank1.json.gz",
    "external/hta/critical_path__cuda_event_sync__event_sync_trace.json.gz",
    "external/hta/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    # serving traces without ProfilerStep marks: their steps are the engine's iterations
    "external2/kineto/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
    "external2/kineto/tracelens__inference__vllm_decode_full__graph_execution.json.gz"]

#: an engine's iteration ranges (the steps of marker ``<engine> iteration``), as the raw names spell them
ENGINE_RANGES = {"sglang": r"^step\[", "vllm": r"^execute_\d+_context_\d+"}


if os.environ.get("NONGEMM_LATENCY_ALL"):  # every shared trace (minutes): NONGEMM_LATENCY_ALL=1 pytest -k tiles
    STEPPED = sorted({str(p.relative_to(SHARED)) for p in kineto_traces()} | {
        str(p.relative_to(SHARED)) for sub in ("h200_nsys", "external/nsys", "external2/kineto")
        for p in (SHARED / sub).glob("*") if p.suffix == ".gz" and not p.name.endswith(".golden.json.gz")})


def latency_by_definition(a: Analysis, marker: str) -> tuple[dict[int, int], dict[int, int]]:
    """Each step's queueing latency and period from the loaded tables alone (docs/latency.md). The
    latency: its CPU range's start to its boundary, the later of the range's end and the end of the
    last activity whose launch call (by correlation) starts inside it. The period: from the later of
    the range's start and the previous boundary (for the first step, the end of the activities
    launched before it or with no launch call in the file) to its boundary. An engine's iteration
    (marker ``sglang iteration``) is its range run on to the next iteration's start."""
    t = a.trace()
    engine = marker.removesuffix(" iteration")
    if engine in ENGINE_RANGES:
        named = pl.col("name").cast(pl.String).str.contains(ENGINE_RANGES[engine])
    else:
        named = (pl.col("name") == marker) | pl.col("name").cast(pl.String).str.starts_with(marker + "#")
    # the loader names every ProfilerStep#N op ProfilerStep* (its number in step_number)
    ops = t.ops.filter(named | (pl.col("name") == "ProfilerStep*") if marker == "ProfilerStep" else named)
    ops = ops.sort("ts_ns")
    ops = ops.filter(pl.col("ts_ns") >= pl.col("end_ns").cum_max().shift(1).fill_null(ops["ts_ns"].min()))
    if engine in ENGINE_RANGES:
        ops = ops.with_columns(pl.max_horizontal("end_ns", pl.col("ts_ns").shift(-1)).alias("end_ns"))
    la = t.launches.filter(pl.col("correlation").is_not_null()).sort("ts_ns").unique("correlation", keep="first")
    acts = t.activities.join(la.select("correlation", pl.col("ts_ns").alias("launch_ts")), on="correlation",
                             how="left").with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end"))
    ranges = list(ops.select("ts_ns", "end_ns").iter_rows())
    in_step = pl.lit(False)
    for s, e in ranges:
        in_step = in_step | ((pl.col("launch_ts") >= s) & (pl.col("launch_ts") <= e)).fill_null(False)
    ends = []
    for s, e in ranges:
        inside = acts.filter((pl.col("launch_ts") >= s) & (pl.col("launch_ts") <= e))
        ends.append(max(e, int(inside["end"].max())) if inside.height else e)
    first = ranges[0][0] if ranges else 0
    early = acts.filter(~in_step & (pl.col("launch_ts").is_null() | (pl.col("launch_ts") < first))
                        & (pl.col("ts_ns") < (ends[0] if ends else 0)))["end"].max()
    latency, period = {}, {}
    boundary = None if early is None else min(early, ends[0])
    for i, ((s, _e), end) in enumerate(zip(ranges, ends)):
        latency[i] = end - s
        start = min(max(s, boundary), end) if boundary is not None else s
        period[i] = end - start
        boundary = end if boundary is None else max(boundary, end)
    return latency, period


@pytest.mark.parametrize("rel", STEPPED, ids=[p.split("/")[-1][:40] for p in STEPPED])
def test_attribution_tiles_the_wall_time_and_nothing_changed_reproduces(rel):
    a = Analysis(shared(*rel.split("/")))
    rep = latency_analysis(a)
    if not rep.step_marker:
        if not os.environ.get("NONGEMM_LATENCY_ALL"):
            pytest.fail("the cheap set holds only traces with steps")
        pytest.skip("no steps in this trace")
    wall = dict(zip(rep.steps["step"].to_list(), rep.steps["wall"].to_list()))
    queueing = dict(zip(rep.steps["step"].to_list(), rep.steps["latency"].to_list()))
    assert (queueing, wall) == latency_by_definition(a, rep.step_marker)
    sums = dict(rep.attribution.group_by("step").agg(pl.col("ns").sum()).iter_rows())
    assert sums == wall  # to the nanosecond
    d = rep.to_dict()
    attribution = d["total"]["attribution"]
    assert sum(r["time_us"] for r in attribution) == pytest.approx(d["total"]["wall_us"], abs=1e-3 * len(attribution))
    assert set(rep.attribution["bound"]) <= {"gpu", "communication", "launch", "cpu", "sync", "other"}
    # the bound-only attribution (what-ifs, calibration, launch) is the full one summed over categories
    _, g, _, _ = graph_of(a)
    tl = measured_timeline(g)
    full = attribute(tl, a.taxonomy.classes, g.queue_gap_ns).group_by("step", "bound").agg(pl.col("ns").sum())
    assert sorted(bound_times(tl, g.queue_gap_ns).select("step", "bound", "ns").rows()) == sorted(full.rows())
    w = whatif_analysis(a, WhatIfParams(scale=("GEMM=1",)))
    for s in w.to_dict()["steps"]:
        assert s["predicted_us"] == pytest.approx(s["measured_us"], rel=0.01)
    if "ddp_train" in rel:  # rank 0 waits for rank 1 (the straggler: tests/test_batch.py) in its all-reduces
        comm = d["total"]["by_bound_us"].get("communication", 0.0) / d["total"]["wall_us"]
        assert (comm > 0.15) if "rank0" in rel else (comm < 0.01)
        if "rank0" in rel:
            half = whatif_analysis(a, WhatIfParams(scale=("communication=0.5",))).to_dict()
            assert half["predicted_us"] < 0.95 * half["measured_us"]


def test_the_measured_timeline_is_the_trace():
    """With every factor 1 the replay puts every activity and host point where the trace has it."""
    _, g, _, _ = graph_of(shared("h200", "fasterrcnn_resnet50_fpn_bs2__eager.json.gz"))  # 72 stream syncs
    tl = measured_timeline(g)
    assert g.syncs.height >= 70
    assert (tl.acts["ts"] == g.acts["ts"]).all() and (tl.acts["end"] == g.acts["end"]).all()
    assert (tl.pieces["ts"] == g.pieces["ts"]).all()


@pytest.fixture(scope="module")
def pairs():
    return {p.name.replace(".json.gz", ""): Analysis(p) for p in sorted(LAT.glob("*.json.gz"))}


def _mean_step(a: Analysis) -> float:
    return latency_analysis(a, options=AnalysisOptions(skip_steps=1)).to_dict()["total"]["mean_step_us"]


def _gemm(a: Analysis) -> int:
    rep = a.report(AnalysisOptions(skip_steps=1))
    return int(rep.classes.filter(pl.col("class") == "GEMM")["time_ns"].sum())


@pytest.mark.parametrize("model,amdahl_check", [("bert_bs32_s256", True), ("resnet50_bs32", True),
                                                ("gpt2_bs4_s256", True), ("bert_bs1_s32", False),
                                                ("resnet18_bs1", False)])
def test_tf32_pairs_predicted_from_the_slower_trace(pairs, model, amdahl_check):
    slow, fast = pairs[f"{model}__fp32"], pairs[f"{model}__tf32"]
    ratio = _gemm(fast) / _gemm(slow)
    w = whatif_analysis(slow, WhatIfParams(scale={"GEMM": ratio}), options=AnalysisOptions(skip_steps=1)).to_dict()
    truth = _mean_step(fast)
    err = abs(w["predicted_us"] / truth - 1)
    assert err <= 0.15
    if amdahl_check:  # where GEMM time is not all of the step, Amdahl's arithmetic errs; the replay must not
        assert err <= abs(w["amdahl_us"] / truth - 1) / 2


@pytest.mark.parametrize("model", ["bert_bs1_s32", "resnet18_bs1", "gpt2_bs4_s256"])
def test_eager_to_graphs_lands_within_2x(pairs, model):
    w = whatif_analysis(pairs[f"{model}__tf32"], WhatIfParams(graphs=True),
                        options=AnalysisOptions(skip_steps=1)).to_dict()
    truth = _mean_step(pairs[f"{model}__tf32_graph"])
    assert truth / 2 <= w["predicted_us"] <= 2 * truth
    assert w["predicted_us"] < w["measured_us"] / 2  # eager at batch 1 is launch-bound: graphs must matter


def test_host_changes_move_a_host_bound_step(pairs):
    a = pairs["bert_bs1_s32__fp32"]
    base = whatif_analysis(a, options=AnalysisOptions(skip_steps=1)).to_dict()["predicted_us"]
    slower = whatif_analysis(a, WhatIfParams(cpu_scale=2.0),
                             options=AnalysisOptions(skip_steps=1)).to_dict()["predicted_us"]
    assert slower == pytest.approx(2 * base, rel=0.05)  # every host piece doubles; the GPU never binds
    cheap = whatif_analysis(a, WhatIfParams(launch_us=0.0), options=AnalysisOptions(skip_steps=1)).to_dict()
    assert cheap["predicted_us"] < base
    assert "launch" not in cheap["by_bound_us"] or cheap["by_bound_us"]["launch"] < 0.2 * base


def test_cli_json_contracts_and_selector_errors(pairs, capsys):
    path = str(LAT / "bert_bs32_s256__fp32.json.gz")
    assert main(["latency", path, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    step = d["steps"][0]
    assert {"step", "name", "wall_us", "attribution"} <= set(step)
    assert {"category", "class", "bound", "time_us"} <= set(step["attribution"][0])
    assert {"wall_us", "attribution"} <= set(d["total"])
    assert main(["whatif", path, "--scale", "GEMM=0.25", "--scale", "kernel:layer_norm=0.5", "--format", "json"]) == 0
    w = json.loads(capsys.readouterr().out)
    assert {"steps", "measured_us", "predicted_us", "scales", "warnings"} <= set(w)
    assert {"step", "measured_us", "predicted_us"} <= set(w["steps"][0])
    assert w["predicted_us"] < 0.5 * w["measured_us"]
    assert main(["whatif", path, "--scale", "normalisation=0.5"]) == 2
    err = capsys.readouterr().err
    assert "unknown selector 'normalisation'" in err and "normalization" in err and "--scale" in err
    assert main(["latency", path, "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("step,name,wall_us,category,class,bound,time_us")
    # a free-text selector that matches nothing is refused with the nearest names (no silent +0.0 %)
    assert main(["whatif", path, "--scale", "op:aten::adddmm=0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "op:aten::adddmm" in err[0] and "matches no GPU activity" in err[0] and "aten::addmm" in err[0]
    assert main(["whatif", path, "--scale", "kernel:softmax=0.5"]) == 2
    assert "kernel:softmax: matches no GPU activity" in capsys.readouterr().err


def test_whole_trace_is_one_step_without_step_ranges(tmp_path):
    rep = latency_analysis(shared("external", "hta", "trace_file_list__inference_rank_1.json.gz"))
    assert rep.steps.height == 1 and rep.steps["name"][0] == "(whole trace)"
    assert int(rep.attribution["ns"].sum()) == int(rep.steps["wall"][0])
    assert any(w.code == "no_steps" for w in rep.warnings)


def _synthetic(tmp_path):
    """One step on one thread: mm launches a 210 us kernel, a device sync waits for it (5 us return
    cost), then add launches a 4 us kernel; the step's CPU range ends at 300 us."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 300},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
           "args": {"External id": 5}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5,
           "args": {"correlation": 9, "External id": 5}},
          {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 20, "dur": 210,
           "args": {"device": 0, "stream": 7, "correlation": 9, "External id": 5}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 40, "dur": 195,
           "args": {"correlation": 10}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 240, "dur": 10,
           "args": {"External id": 6}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 242, "dur": 4,
           "args": {"correlation": 11, "External id": 6}},
          {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 254, "dur": 4,
           "args": {"device": 0, "stream": 7, "correlation": 11, "External id": 6}}]
    p = tmp_path / "synthetic.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    return p


def test_a_sync_moves_the_host_with_the_device(tmp_path):
    path = _synthetic(tmp_path)
    rep = latency_analysis(path)
    assert rep.steps["wall"].to_list() == [300_000]
    got = {(r["category"], r["bound"]): r["ns"] for r in rep.attribution.iter_rows(named=True)}
    # the path: the host after the sync, the sync's return cost, the GEMM kernel, its launch, the host before
    assert got[("gemm", "gpu")] == 210_000 and got[("unclassified", "sync")] == 5_000
    assert got[("gemm", "launch")] == 8_000
    faster = whatif_analysis(path, WhatIfParams(scale=("gemm=0.5",))).to_dict()
    assert faster["steps"][0]["predicted_us"] == 195.0  # the sync returns 105 us earlier, and so does the rest
    slower_host = whatif_analysis(path, WhatIfParams(cpu_scale=2.0)).to_dict()
    assert slower_host["steps"][0]["predicted_us"] == 382.0  # the kernel still ends first; the host doubles


def test_a_wait_on_autograds_thread_follows_that_thread():
    """The main thread idles in ``loss.backward()`` while autograd's thread runs the backward pass (no
    event on the main thread meanwhile): the path goes through that thread's work, and dearer launches
    there lengthen the main thread's wait by what they add."""
    a = Analysis(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    _, g, _, _ = graph_of(a)
    waits = g.syncs.filter(pl.col("kind") == "thread")
    assert waits.height == 3 and waits["thr"].n_unique() == 2  # 2 joins on the main thread, 1 fork on autograd's
    rep = latency_analysis(a, options=AnalysisOptions(skip_steps=1)).to_dict()
    step = rep["steps"][0]
    assert step["by_bound_us"]["cpu"] > 0.45 * step["wall_us"]  # the backward ops' host time is on the path
    s = latency_analysis(a, options=AnalysisOptions(skip_steps=1)).steps.row(0, named=True)
    launch = g.pieces.filter((pl.col("kind") == "launch") & (pl.col("ts") >= s["ts"]) & (pl.col("ts") < s["cpu_end"]))
    calls = launch.group_by("launch_id").agg((pl.col("end") - pl.col("ts")).sum().alias("ns"))
    added = calls.height * 30_000 - int(calls["ns"].sum())
    assert launch["thr"].n_unique() == 2
    w = whatif_analysis(a, WhatIfParams(launch_us=30), options=AnalysisOptions(skip_steps=1)).to_dict()
    assert (w["predicted_us"] - w["measured_us"]) * 1000 == pytest.approx(added, rel=0.03)


def test_steps_that_run_into_the_next_are_named_and_a_faster_host_ends_no_later():
    """Without a synchronize per step a device-bound trace's steps queue behind one another: the
    report says so (a faster host then lengthens each step's wall time while the work ends no later:
    the replay is monotone in every duration), and a trace that synchronizes each step is not flagged."""
    a = Analysis(shared("external", "hta", "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    codes = [w["code"] for w in latency_analysis(a).to_dict()["warnings"]]
    assert "steps_overlap" in codes
    _, g, _, _ = graph_of(a)
    measured = measured_timeline(g)
    w = whatif_analysis(a, WhatIfParams(cpu_scale=0.5))
    assert [x.code for x in w.warnings].count("steps_overlap") == 2  # measured and predicted timelines
    import numpy as np

    from nongemm_trace.analyses.latency.replay import measured_piece_lengths, replay
    half = np.rint(measured_piece_lengths(g) * 0.5).astype(np.int64)
    faster = replay(g, g.acts["dur"].to_numpy(), half, g.acts["lat"].to_numpy(allow_copy=True).astype(np.float64),
                    g.acts["gap"].to_numpy().copy())
    assert (faster.steps["gpu_end"] <= measured.steps["gpu_end"]).all()
    assert int(faster.acts["end"].max()) <= int(measured.acts["end"].max())
    synced = latency_analysis(Analysis(LAT / "bert_bs1_s32__fp32.json.gz")).to_dict()["warnings"]
    assert "steps_overlap" not in [x["code"] for x in synced]


def test_steps_left_out_are_not_counted_as_overlapping():
    """``--skip-steps`` leaves warm-up steps out of every number, the overlap warning included: whatif's
    measured timeline counts the steps latency counts, and with every factor 1 the predicted one too."""
    a = Analysis(shared("external", "hta", "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    for skip in (1, 4):
        skipping = AnalysisOptions(skip_steps=skip)
        latency = [w.count for w in latency_analysis(a, options=skipping).warnings if w.code == "steps_overlap"]
        whatif = whatif_analysis(a, WhatIfParams(scale={"GEMM": 1}), options=AnalysisOptions(skip_steps=skip)).warnings
        by_timeline = {w.message.split()[2]: w.count for w in whatif if w.code == "steps_overlap"}
        assert list(by_timeline.values()) == latency * 2, (skip, by_timeline, latency)


def test_the_step_is_the_loops_period_where_steps_queue():
    """On a trace whose host and device each take about a step's time and never synchronize, the
    step is the loop's period: the periods tile the kept steps' span from the first step's start,
    and halving GEMM time makes the host set the pace: each step then costs its CPU range (in steady
    state; the span's first steps drain the queue the window opened on faster), while the queueing
    latency, kept beside it, is longer than the period where steps queue."""
    a = Analysis(shared("external", "hta", "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    w = whatif_analysis(a, WhatIfParams(scale={"GEMM": 0.5}))
    d = w.to_dict()
    tl = latency_analysis(a).steps
    assert d["measured_span_us"] * 1000 == int(tl["end"].max() - tl["ts"].min())
    assert int(tl["wall"].sum()) == int(tl["end"].max() - tl["start"].min())  # the periods tile
    assert (tl["latency"] >= tl["wall"]).all() and (tl["latency"] > tl["wall"]).sum() >= tl.height // 2
    host_bound = (int(tl["cpu_end"].max()) - int(tl["ts"].min())) / 1000
    assert host_bound <= d["predicted_span_us"] < d["measured_span_us"]
    # the host now sets the pace: each step costs at least its CPU range (no step synchronizes, so halving
    # GEMM time leaves the ranges as they were), and no less than the window's span says, whose first
    # steps drain the queue the window opened on faster than the host issues new work
    cpu_range_us = float((tl["cpu_end"] - tl["ts"]).mean()) / 1000
    assert cpu_range_us * 0.99 <= d["predicted_us"] < d["measured_us"]
    step_ratio, span_ratio = d["predicted_us"] / d["measured_us"], d["predicted_span_us"] / d["measured_span_us"]
    assert step_ratio >= span_ratio - 0.001
    assert type(w).from_dict(d).to_dict() == d


def test_a_faster_device_drains_the_queue_the_window_opened_on():
    """A device-bound loop with no synchronize (Wide-ResNet-50-2, a recipe capture on an H100) has its device
    still working through earlier steps' kernels when the profiler's window opens: the first kernel the
    trace recorded starts 5 ms into the first step, behind work launched before launches were recorded.
    Made a hundred times faster, the device drains that queue as fast as the rest, so the loop is paced
    by its host in every step, the first one included: each step's predicted period is about its host
    range (held at its measured start, the old queue kept the device busy past the first step's host
    work and left that step a period of a tenth of the others). Nothing changed, every start is the
    measured one."""
    path = str(SAMPLES / "recipe_h100" / "wrn50_2_bs16__fp32.json.gz")
    a = Analysis(path)
    steps = whatif_analysis(a, WhatIfParams(scale={"GEMM": 0.01, "non-GEMM": 0.01})).to_dict()["steps"]
    host = latency_analysis(a).steps.select(((pl.col("cpu_end") - pl.col("ts")) / 1000).alias("host"))["host"]
    for s, h in zip(steps, host):
        assert 0.85 * h <= s["predicted_us"] <= 1.05 * h, (s, h)
    same = whatif_analysis(a, WhatIfParams(scale={"GEMM": 1})).to_dict()
    assert [s["predicted_us"] for s in same["steps"]] == [s["measured_us"] for s in same["steps"]]


def test_a_graph_takes_the_host_work_of_the_ops_it_captures():
    """A replay runs none of the captured ops: the host work of the top-level op that holds a step's
    first launch (``aten::linear``'s ``aten::t`` before its ``addmm`` launches, H100 recipe set 4's
    8-layer MLP) is gone with ``--graphs``, not only the pieces between the first and last launch."""
    from nongemm_trace.analyses.latency.replay import measured_piece_lengths
    from nongemm_trace.analyses.latency.whatif import graph_regions, piece_tops

    path = SAMPLES / "recipe_h100_set4" / "mlp8_bs1__eager.json.gz"
    a, g, _, _ = graph_of(path)
    tops = piece_tops(g, a.linked().ops)
    p = g.pieces.with_columns(pl.Series("top", tops))
    first_launch = p.filter(pl.col("kind") == "launch").join_asof(
        g.steps.select(pl.col("ts").alias("t"), "step").sort("t"), left_on="ts", right_on="t").group_by("step").agg(
        pl.col("row").min())
    held = p.filter(pl.col("row").is_in(first_launch["row"].implode()))["top"]
    before = p.filter(pl.col("top").is_in(held.implode()) & (pl.col("kind") != "launch")
                      & (pl.col("row") < pl.col("row").filter(pl.col("kind") == "launch").min().over("top")))
    assert before.height >= 3 and int((before["end"] - before["ts"]).sum()) > 0
    opening = before.group_by("top").agg(pl.col("row").min())["row"]
    rest = before.filter(~pl.col("row").is_in(opening.implode()))["row"].to_numpy()
    measured = measured_piece_lengths(g)
    for with_tops in (None, tops):
        lengths = measured.copy()
        lat, gap = g.acts["lat"].to_numpy().copy(), g.acts["gap"].to_numpy().copy()
        assert graph_regions(g, lengths, lat, gap, None, 1600, with_tops) == 3
        if with_tops is None:  # the op's work before its first launch stayed as measured
            assert (lengths[rest] == measured[rest]).all() and lengths[opening.to_numpy()].min() > 0
        else:  # the graph call opens where the op began (its cost, 1.6 us per activity); the rest is gone
            assert (lengths[rest] == 0).all()
            assert (lengths[opening.to_numpy()] == 25 * 1600).all()


def test_a_what_if_step_is_no_faster_than_its_host_issues_it():
    """A device-bound loop whose host ran ahead (Wide-ResNet-50-2 b16 fp32, H100 recipe set 1: 5 ms of host
    work per 16 ms step) opens its window on a backlog. Made bf16 (its GEMMs 8x faster, autocast's casts
    and host work added), the device works through that backlog faster than the host issues new steps,
    so the window's first steps end 3.7, 5.0 and 6.6 ms apart, a transient: in steady state the loop is
    paced by its host, every step costs its host's time, and the critical path runs on the host."""
    path = SAMPLES / "recipe_h100" / "wrn50_2_bs16__fp32.json.gz"
    d = whatif_analysis(path, WhatIfParams(scale=("GEMM=0.1295", "non-GEMM=0.8744"), autocast="bf16")).to_dict()
    for key in ("predicted_us", "predicted_unprofiled_us"):
        per_step = [s[key] for s in d["steps"]]
        assert max(per_step) <= 1.1 * min(per_step), (key, per_step)
    assert d["unprofiled"]["predicted_profiled_bound"] == d["unprofiled"]["predicted_bound"] == "host-bound"
    assert d["by_bound_us"].get("gpu", 0) < 0.05 * sum(d["by_bound_us"].values())
