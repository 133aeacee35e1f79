"""The result models read their own JSON back: ``Model.from_dict`` of a stored document gives
a model whose document is the same, byte for byte, for every model on real traces (GPU, CPU
and paper metrics, Nsight Systems, a TensorRT profile, CUDA graphs, the fusion and
quantization views, per-step comparisons, a distributed batch)."""

from __future__ import annotations

import json

import pytest
from conftest import shared

from nongemm_trace import Analysis, AnalysisOptions, BatchResult, Comparison, FlopsReport, LaunchReport, Report
from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.compare import compare
from nongemm_trace.analyses.flops import flops_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.runs.batch import run_batch

TRACES = {
    "eager": ("h200", "bert_base_fp32_bs8_s128__eager.json.gz"),
    "compiled": ("h200", "bert_base_fp32_bs8_s128__compiled.json.gz"),
    "graphs": ("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"),
    "nsys": ("h200_nsys", "bert_nvtx.sqlite.gz"),
    "cpu_only": ("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
    "tensorrt": ("external2", "tensorrt",
                 "trex__examples__pytorch__resnet__A100__fp32__resnet.onnx.engine.profile.json"),
}


@pytest.fixture(scope="module")
def analyses():
    return {k: Analysis.of(shared(*parts)) for k, parts in TRACES.items()}


def _text(model) -> str:
    return json.dumps(model.to_dict(), indent=2, ensure_ascii=False, allow_nan=False)


def _round_trip(model, cls) -> None:
    text = _text(model)
    back = cls.from_dict(json.loads(text))
    assert type(back) is cls
    assert _text(back) == text
    assert back.to_dict() == model.to_dict()


@pytest.mark.parametrize("name", list(TRACES))
def test_report_round_trip(analyses, name):
    _round_trip(analyses[name].report(), Report)


@pytest.mark.parametrize("metric", ["cpu", "paper"])
def test_report_round_trip_cpu_metrics(analyses, metric):
    _round_trip(analyses["eager"].report(AnalysisOptions(metric=metric)), Report)


def test_report_read_back_keeps_its_numbers(analyses):
    rep = analyses["eager"].report()
    back = Report.from_dict(rep.to_dict())
    assert back.share("non-GEMM") == pytest.approx(rep.share("non-GEMM"), abs=1e-6)
    assert back.categories["time_ns"].to_list() == rep.categories["time_ns"].to_list()
    assert back.ops["self_gpu_time_ns"].to_list() == rep.ops["self_gpu_time_ns"].to_list()
    short = rep.to_dict(max_kernels=5)  # the document holds the top kernels, and says how many there are
    back = Report.from_dict(short)
    assert back.kernel_summary.height == 5 < rep.kernel_summary.height == short["kernels_total"]
    assert back.to_dict(max_kernels=5) == short


@pytest.mark.parametrize("name", ["eager", "graphs", "nsys", "cpu_only"])
def test_launch_round_trip(analyses, name):
    _round_trip(launch_analysis(analyses[name]), LaunchReport)


@pytest.mark.parametrize("name", ["eager", "compiled", "tensorrt"])
def test_flops_round_trip(analyses, name):
    _round_trip(flops_analysis(analyses[name]), FlopsReport)


@pytest.mark.parametrize("per_step", [False, True])
def test_comparison_round_trip(analyses, per_step):
    cmp = compare([analyses["eager"], analyses["compiled"], analyses["nsys"]], per_step=per_step)
    assert cmp.fusion  # eager vs compiled: the fusion view is part of the document
    _round_trip(cmp, Comparison)
    back = Comparison.from_dict(cmp.to_dict())
    assert back.traces == cmp.traces and back.non_gemm_share(1) == pytest.approx(cmp.non_gemm_share(1), abs=1e-6)


def test_comparison_round_trip_quantization():
    cmp = compare([shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"),
                   shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")], per_step=True)
    assert cmp.quantization
    _round_trip(cmp, Comparison)


def test_batch_round_trip_with_ranks_and_a_failure(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    paths = [str(shared("h200x2", f"bert_ddp_train_rank{r}.json.gz")) for r in (0, 1)] + [str(bad)]
    result = run_batch(paths, {}, workers=1)
    assert result.ranks and result.failed
    _round_trip(result, BatchResult)


@pytest.mark.parametrize("name", ["eager", "graphs"])
def test_latency_round_trips(analyses, name):
    from nongemm_trace import LatencyReport, WhatIfReport
    from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis

    a = analyses[name]
    _round_trip(latency_analysis(a), LatencyReport)
    changes = WhatIfParams(scale=("GEMM=0.5", "kernel:elementwise|triton=0.8"), cpu_scale=1.5)
    _round_trip(whatif_analysis(a, changes), WhatIfReport)
    _round_trip(whatif_analysis(a, WhatIfParams(graphs=True, launch_us=3.0)), WhatIfReport)
