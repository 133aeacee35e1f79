"""Steps: ProfilerStep#N, repeated annotations, --step-marker and --skip-steps."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES, shared

import nongemm_trace
from nongemm_trace.errors import TraceError

BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def test_repeated_annotation_is_the_step():
    rep = nongemm_trace.analyze(BERT)
    assert rep.step_marker == "## step ##"
    assert rep.steps.height == 2
    # both steps ran the same work
    assert rep.steps["activities"].to_list() == [154, 154]
    assert int(rep.steps["gpu_time_ns"].sum()) <= rep.gpu_time_ns


def test_profiler_steps_and_skip():
    path = shared("h200x2", "bert_ddp_train_rank0.json.gz")
    rep = nongemm_trace.analyze(path)
    assert rep.step_marker == "ProfilerStep"
    assert rep.steps["name"].to_list() == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]
    skipped = nongemm_trace.analyze(path, skip_steps=1)
    kept = rep.kernels.filter(pl.col("step") >= 1)
    assert skipped.gpu_activities == kept.height
    assert skipped.gpu_time_ns == int(kept["dur_ns"].sum())
    assert int(skipped.categories["time_ns"].sum()) == skipped.gpu_time_ns
    assert any(w.code == "steps_skipped" for w in skipped.warnings)


def test_step_marker_option_and_errors():
    rep = nongemm_trace.analyze(BERT, step_marker="## step ##", skip_steps=1)
    assert rep.gpu_activities == 154
    with pytest.raises(TraceError):
        nongemm_trace.analyze(BERT, step_marker="no such range")
    with pytest.raises(TraceError):
        nongemm_trace.analyze(BERT, skip_steps=2)


def test_skipped_steps_are_not_listed():
    from nongemm_trace import analyze
    rep = analyze(shared("h200x2", "bert_ddp_train_rank0.json.gz"), skip_steps=1)
    assert rep.steps["name"].to_list() == ["ProfilerStep#4", "ProfilerStep#5"]
    assert int(rep.steps["gpu_time_ns"].sum()) == rep.gpu_time_ns
