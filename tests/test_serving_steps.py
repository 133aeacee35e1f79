"""Serving traces without ``ProfilerStep#N`` marks: the steps are the engine's iterations (SGLang's
``step[MODE bs=N]``, vLLM's ``execute_…`` ranges; nongemm_trace/metrics/steps.py), named so
(``sglang iteration``), and every step figure is the loop's period over them (metrics/period.py).

The real traces are TraceLens's SGLang and vLLM decode traces (one iteration each); the figures are
checked against their raw JSON read with the standard library. A loop of several iterations is a small
trace written here, device-paced (the host runs ahead) and host-paced (the device waits for it)."""

from __future__ import annotations

import gzip
import json
import os
import re
import statistics
import subprocess
import sys

import pytest
from conftest import SAMPLES, ns, raw_events, shared

from nongemm_trace import analyze
from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.pipeline.analysis import Analysis

K2 = "external2/kineto"
SGLANG = (K2, "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz")
VLLM = (K2, "tracelens__inference__vllm_decode_full__graph_execution.json.gz")
#: each engine's iteration range, as the raw names spell it
RANGES = {"sglang": r"^step\[", "vllm": r"^execute_\d+_context_"}
ACTIVITY = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCHES = {"cuda_runtime", "cuda_driver"}


def _raw_ranges(path, engine: str) -> list[tuple[str, int, int]]:
    return sorted(((e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in raw_events(str(path))
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and re.search(RANGES[engine], e["name"])), key=lambda r: r[1])


@pytest.mark.parametrize("which, engine", [(SGLANG, "sglang"), (VLLM, "vllm")])
def test_a_serving_trace_steps_are_its_engine_iterations(which, engine):
    path = shared(*which)
    a = Analysis(path)
    rep = a.report()
    raw = _raw_ranges(path, engine)
    assert raw and rep.step_marker == f"{engine} iteration"
    assert rep.steps["name"].to_list() == [r[0] for r in raw]
    sel = a.selection()
    assert list(zip(sel.steps["ts_ns"].to_list(), sel.steps["end_ns"].to_list())) == [r[1:] for r in raw]
    assert "no_steps" not in {w.code for w in rep.warnings}
    lat = latency_analysis(a)
    assert lat.step_marker == rep.step_marker and lat.steps["name"].to_list() == [r[0] for r in raw]
    out = subprocess.run([sys.executable, "-m", "nongemm_trace", "latency", str(path)], capture_output=True,
                         text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert f"steps: {len(raw)} ({engine} iteration)" in out and "whole trace" not in out


def test_the_sglang_iteration_is_its_period_from_the_raw_events():
    """The SGLang decode iteration's period, worked out from the raw events: from the end of the device
    work launched before the iteration's range (the scheduler's kernels that waited for the previous
    iteration, set apart as work before the window is) to the later of the range's end and the end of
    the work launched inside it; not the time the host waited in a copy before the graph launch."""
    path = shared(*SGLANG)
    (_, lo, hi), = _raw_ranges(path, "sglang")
    ev = raw_events(str(path))
    launched = {e["args"]["correlation"]: ns(e["ts"]) for e in ev
                if e.get("ph") == "X" and e.get("cat") in LAUNCHES and "correlation" in e.get("args", {})}
    acts = [(launched.get(e["args"].get("correlation")), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in ev
            if e.get("ph") == "X" and e.get("cat") in ACTIVITY]
    boundary = max([hi] + [end for t, _, end in acts if t is not None and lo <= t <= hi])
    before = max(min(end, boundary) for t, start, end in acts if (t is None or t < lo) and start < boundary)
    period = boundary - max(lo, before)
    a = Analysis(path)
    rep = a.report()
    assert rep.steps["step_ns"].to_list() == [period]
    assert rep.steps["latency_ns"].to_list() == [boundary - lo]
    assert period < (boundary - lo) / 10  # the host's wait before the graph launch is not the step
    lat = latency_analysis(a).to_dict()
    assert [s["wall_us"] for s in lat["steps"]] == [round(period / 1000, 3)]
    assert launch_analysis(a).summary["mean_step_us"] == pytest.approx(period / 1000, abs=0.002)
    assert whatif_analysis(a, WhatIfParams(scale={"GEMM": 1})).to_dict()["measured_us"] == \
        pytest.approx(period / 1000, abs=0.002)


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _loop(tmp_path, *, host_us: float, device_us: float, n: int, mark: str, profiler_step: bool = False):
    """``n`` decode iterations of an engine loop, each a range named ``mark`` (``{k}``: its number) of
    ``host_us`` on the host, back to back, that launches one kernel of ``device_us``; the kernels queue
    on one stream (each starts when the previous ended, 5 us after its launch at the earliest)."""
    ev, free = [], 0.0
    for k in range(n):
        t = k * host_us
        if profiler_step:
            ev.append(_x("user_annotation", f"ProfilerStep#{k}", t, host_us))
        ev.append(_x("user_annotation", mark.format(k=k), t + 1, host_us - 2))
        ev.append(_x("cpu_op", "aten::mm", t + 2, 4, **{"External id": k + 1}))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 3, 2, correlation=k + 1, **{"External id": k + 1}))
        start = max(free, t + 8)
        ev.append(_x("kernel", "sgemm_128x64", start, device_us, 7, 0, device=0, stream=7, correlation=k + 1,
                     **{"External id": k + 1}))
        free = start + device_us
    p = tmp_path / "loop.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    return p


@pytest.mark.parametrize("mark, engine", [("step[DECODE bs=4]", "sglang"),
                                          ("execute_4_context_0_generation_4", "vllm")])
@pytest.mark.parametrize("host_us, device_us", [(50.0, 400.0), (400.0, 50.0)], ids=["device-paced", "host-paced"])
def test_a_loop_of_iterations_has_the_period_of_consecutive_iteration_starts(tmp_path, mark, engine, host_us,
                                                                             device_us):
    """Each iteration's period is the gap from its start to the next one's on the timeline that paces the
    loop: the device's kernel starts when the host runs ahead, the host's range starts when the device
    waits for it (the host work between two ranges is the loop's: an iteration runs on to the next one's
    start). The periods tile the loop; the first (device-paced: it starts with its range, before the
    queue forms) and the last (host-paced: it ends with its own range) are its edges."""
    n = 6
    path = _loop(tmp_path, host_us=host_us, device_us=device_us, n=n, mark=mark)
    a = Analysis(path)
    rep = a.report()
    assert rep.step_marker == f"{engine} iteration" and rep.steps.height == n
    ev = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    paced_by = "kernel" if device_us > host_us else "user_annotation"
    starts = [ns(e["ts"]) for e in ev if e["cat"] == paced_by]
    gaps = [b - s for s, b in zip(starts, starts[1:])]
    periods = rep.steps["step_ns"].to_list()
    assert (periods[1:] if paced_by == "kernel" else periods[:-1]) == gaps
    assert statistics.median(periods) == statistics.median(gaps) == ns(max(host_us, device_us))
    times = a.selection().step_times
    assert times is not None and times["start"].to_list()[1:] == times["end"].to_list()[:-1]
    lat = latency_analysis(a).to_dict()
    assert [s["wall_us"] for s in lat["steps"]] == [p / 1000 for p in periods]
    assert lat["total"]["mean_step_us"] == pytest.approx(sum(periods) / n / 1000, abs=0.002)


def test_profiler_steps_stay_the_steps_where_an_engine_marks_its_iterations_too(tmp_path):
    path = _loop(tmp_path, host_us=50.0, device_us=400.0, n=4, mark="step[DECODE bs=4]", profiler_step=True)
    rep = Analysis(path).report()
    assert rep.step_marker == "ProfilerStep" and rep.steps["name"].to_list() == [f"ProfilerStep#{k}" for k in range(4)]


def test_an_engine_iteration_marker_chooses_its_engine_ranges():
    """``--step-marker 'vllm iteration'`` on the SGLang trace takes the request-shape range SGLang writes
    around its own step range (sampling included) as the step."""
    path = shared(*SGLANG)
    rep = analyze(path, step_marker="vllm iteration")
    assert rep.step_marker == "vllm iteration"
    assert rep.steps["name"].to_list() == [r[0] for r in _raw_ranges(path, "vllm")]


def test_a_generate_loop_without_step_marks_is_no_loop_of_forward_passes(tmp_path):
    """A ``generate()`` call's forward passes are iterations ``phases`` infers from its op sequence, not
    ranges the program recorded: with its ``ProfilerStep#N`` marks taken out, the trace has no steps (the
    whole trace), although ``phases`` still finds its forward passes."""
    src = SAMPLES / "serving" / "gpt2_generate_cuda_bs4_p32_n6.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")]
    path = tmp_path / "generate_no_steps.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    rep = Analysis(path).report()
    assert rep.phase_engine == "generate" and sum(p["iterations"] for p in rep.phases) > 1
    assert rep.step_marker is None and rep.steps.height == 0
    assert latency_analysis(path).steps["name"].to_list() == ["(whole trace)"]
