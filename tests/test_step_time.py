"""One step figure per trace: ``analyze``, ``launch``, ``latency``, ``whatif`` (unchanged), the HTML
page and every JSON document give each step the same period (nongemm_trace/metrics/period.py), and
``launch`` and ``latency`` the same bound, on every shared trace with steps (Kineto and Nsight
Systems; the serving traces' steps are their engine's iterations, metrics/steps.py) and the samples
with unprofiled rounds."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, SHARED, kineto_traces, shared

from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.pipeline.analysis import Analysis

#: the shared serving traces without ProfilerStep marks: their steps are the engine's iterations
SERVING = ("external2/kineto/tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
           "external2/kineto/tracelens__inference__vllm_decode_full__graph_execution.json.gz")


def _traces() -> list[str]:
    if not SHARED.exists():
        return []
    found = {p.relative_to(SHARED).as_posix() for p in kineto_traces()}
    for sub in ("h200_nsys", "external/nsys"):
        found |= {p.relative_to(SHARED).as_posix() for p in (SHARED / sub).glob("*.gz")
                  if not p.name.endswith(".golden.json.gz")}
    found |= {rel for rel in SERVING if (SHARED / rel).exists()}
    return sorted(found)


def _one_figure(a: Analysis) -> None:
    rep = a.report()
    d = rep.to_dict()
    if not d["steps"] or d.get("mean_step_us") is None:
        return
    assert rep.step_marker is not None and d["step_marker"] == rep.step_marker
    lat = latency_analysis(a)
    ld = lat.to_dict()
    assert [s["step_us"] for s in d["steps"]] == [s["wall_us"] for s in ld["steps"]] == \
        [s["step_us"] for s in ld["steps"]]
    assert [s["latency_us"] for s in d["steps"]] == [s["latency_us"] for s in ld["steps"]]
    assert d["mean_step_us"] == pytest.approx(ld["total"]["mean_step_us"], abs=0.002)
    launch = launch_analysis(a).summary
    assert launch["mean_step_us"] == pytest.approx(ld["total"]["mean_step_us"], abs=0.002)
    assert launch["bound"] == (ld["unprofiled"] or {}).get("profiled_bound")
    w = whatif_analysis(a, WhatIfParams(scale={"GEMM": 1})).to_dict()
    assert w["measured_us"] == pytest.approx(ld["total"]["mean_step_us"], abs=0.002)
    # nothing changed: the measured run (a replay rounds to the us)
    assert w["predicted_us"] == pytest.approx(w["measured_us"], rel=1e-4)
    assert w["step_time"] == ld["step_time"] == d["step_time"]
    assert ld["step_marker"] == d["step_marker"]


@pytest.mark.parametrize("rel", _traces())
def test_every_command_gives_one_step_figure(rel):
    _one_figure(Analysis(shared(*rel.split("/"))))


@pytest.mark.parametrize("name", ["unprofiled/bert_bs1_s32__fp32__plain.json.gz",
                                  "unprofiled/resnet50_bs32__fp32__plain.json.gz",
                                  "bert_base_fp32_bs8_s128__eager.json.gz"])
def test_the_samples_give_one_step_figure(name):
    _one_figure(Analysis(SAMPLES / name))


def test_the_html_page_shows_the_same_step(tmp_path):
    from nongemm_trace.report_page import write_page

    trace = SAMPLES / "unprofiled" / "bert_bs1_s32__fp32__plain.json.gz"
    mean = latency_analysis(trace).to_dict()["total"]["mean_step_us"]
    page = write_page([trace], tmp_path / "page.html").read_text()
    assert f"{mean:,.1f}" in page or f"{mean:.1f}" in page
