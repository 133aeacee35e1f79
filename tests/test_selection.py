"""The selection stage and stored reports: every analysis reads the selection, and a report read
back from its JSON document answers ``check`` and ``compare`` as the live one does.

Traces: one of every model of the shared H200 set, its Nsight Systems export, and the deployment
stacks' profiles (TensorRT, ONNX Runtime); each is checked against the next one as its baseline
and compared with it, once with the live trace and once with its stored report on BASE's side.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from conftest import SAMPLES, SHARED, shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.check import check
from nongemm_trace.analyses.compare import compare
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.models.report import Report
from nongemm_trace.pipeline.analysis import Analysis


def _models() -> list[str]:
    """Relative paths under the shared traces (none where the folder is absent: the tests skip)."""
    if not (SHARED / "h200").is_dir():
        return []
    h200 = sorted(p.name for p in (SHARED / "h200").glob("*.json.gz"))
    return [f"h200/{n}" for n in h200] + [
        "h200_nsys/bert_nvtx.sqlite.gz",
        "external2/tensorrt/trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json",
        "external2/tensorrt/trex__examples__pytorch__resnet__A100__fp32__resnet.onnx.engine.profile.json",
        "external2/onnxruntime/ort__vscode-onnxvalidate__onnxruntime_profile__2019-06-28_04-56-43.json",
    ]


MODELS = _models()


@cache
def _analysis(rel: str) -> Analysis:
    return Analysis(shared(*rel.split("/")))


def _stored(rel: str) -> Report:
    """The trace's report as ``analyze --format json`` writes it, read back."""
    return Report.from_dict(json.loads(json.dumps(_analysis(rel).report(AnalysisOptions(metric="gpu")).to_dict())))


def _partner(rel: str) -> str:
    """The next trace of the same kind (deployment stacks with their own, traces with traces)."""
    engine = "external2" in rel
    same = [m for m in MODELS if ("external2" in m) == engine]
    return same[(same.index(rel) + 1) % len(same)]


def _limits(rel: str) -> dict:
    cats = _analysis(rel).taxonomy.categories
    return {"max_regression": 0.0, "max_category_regression": dict.fromkeys(cats, 0.0)}


@pytest.mark.parametrize("rel", MODELS)
def test_a_stored_report_is_the_same_baseline_as_the_live_trace(rel, tmp_path):
    other = _partner(rel)
    live = check(_analysis(other), baseline=_analysis(rel), **_limits(other)).violations
    stored = check(_analysis(other), baseline=_stored(rel), **_limits(other)).violations
    path = tmp_path / "base.json"
    path.write_text(json.dumps(_analysis(rel).report(AnalysisOptions(metric="gpu")).to_dict()))
    from_file = check(_analysis(other), baseline=str(path), **_limits(other)).violations
    assert stored == live and from_file == live
    same = check(_analysis(rel), baseline=_stored(rel), **_limits(rel)).violations
    assert same == []  # against itself nothing rose, in any category


def _without_activity_views(d: dict) -> dict:
    """A comparison's document without what only the activities give: launch counts, fusion views."""
    d = {k: v for k, v in d.items() if k not in ("fusion", "engine_fusion")}
    for table in ("categories", "classes"):
        d[table] = [{k: v for k, v in row.items() if k != "launches"} for row in d[table]]
    return d


@pytest.mark.parametrize("rel", MODELS)
def test_a_stored_report_compares_as_the_live_trace(rel):
    other = _analysis(_partner(rel))
    live = compare([_analysis(rel), other]).to_dict()
    stored = compare([_stored(rel), other]).to_dict()
    assert _without_activity_views(stored) == _without_activity_views(live)
    assert all(row["launches"][0] is None for row in stored["categories"])  # not held: null, never 0
    assert [row["launches"][1] for row in stored["categories"]] == [row["launches"][1] for row in live["categories"]]
    assert stored.get("quantization") == live.get("quantization")


EAGER = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def test_the_issue_s_category_gate_against_the_same_trace_s_stored_report_passes():
    """It reported "memory GPU time per step appeared (0.0 -> 1.8 us)": the stored report has no
    per-activity table, and the baseline was read from it."""
    a = Analysis(EAGER)
    doc = a.report().to_dict()
    assert next(c for c in doc["categories"] if c["category"] == "memory")["gpu_time_us"] > 0
    violations = check(a, baseline=Report.from_dict(doc), max_category_regression={"memory": 0.05}).violations
    assert violations == []


def test_the_issue_s_compare_of_a_stored_report_and_its_trace_shows_no_change():
    """It raised polars' ColumnNotFoundError: compare read the stored report's per-activity table."""
    a = Analysis(EAGER)
    cmp = compare([Report.from_dict(a.report().to_dict()), a])
    assert cmp.categories["delta_ns"].abs().max() == 0.0
    assert cmp.categories.filter(cmp.categories["trace_index"] == 1)["launches"].sum() > 0


def test_launch_builds_no_breakdown():
    a = Analysis(EAGER)
    launch_analysis(a)
    assert a._reports == {}  # it read the selection, and measured nothing it would not read
    # one selection per option set: the metric is not read
    assert a.selection() is a.selection(AnalysisOptions(metric="cpu"))


def test_a_cpu_metric_report_is_no_compare_side():
    from nongemm_trace.errors import TraceError

    a = Analysis(EAGER)
    with pytest.raises(TraceError, match="cpu-metric report"):
        compare([Report.from_dict(a.report(AnalysisOptions(metric="cpu")).to_dict()), a])
