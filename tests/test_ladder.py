"""The decision ladder is one table (classify/ladder.py): every rule in it is complete (a stage,
a rung of the evidence ladder, a text for readers), and every rule the classifier gives on real
traces — Kineto eager, compiled, training, fp8, DDP, TensorRT and ONNX Runtime, at every level —
is a rule of the table, with the table's rung. The call rules feed both the activities' launch
level and the per-call category every other command reads, so the two agree call by call."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.classify.ladder import LADDER, RULE_TEXT, STAGES, call_category
from nongemm_trace.pipeline.analysis import Analysis
from nongemm_trace.vocabulary import EVIDENCE, LEVELS

TRACES = [
    ("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz"),
    ("h200", "bert_base_train_bs8_s128__eager.json.gz"),
    ("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"),
    ("h200x2", "bert_ddp_train_rank0.json.gz"),
    ("external2", "tensorrt", "trex__examples__pytorch__resnet__A100__qat__resnet-qat.onnx.engine.profile.json"),
    ("external2", "tensorrt", "trex__tests__inputs__mobilenet.qat.onnx.engine.profile.json"),
    ("external2", "onnxruntime", "ort__vscode-onnxvalidate__onnxruntime_profile__2019-06-28_04-56-43.json"),
]


def test_every_rule_is_complete():
    for r in LADDER:
        assert r.stage in STAGES, r
        assert r.evidence in EVIDENCE, r
        assert r.text.strip() and r.text != r.name, r
    for name in {r.name for r in LADDER}:
        same = {(r.evidence, r.evidence_column, r.text) for r in LADDER if r.name == name}
        assert len(same) == 1, f"rule {name!r} is described twice, differently: {same}"


def test_a_stage_ends_at_its_unconditional_rule():
    """A rule with no condition ends its stage's chain: one after it would never fire."""
    for stage in STAGES:
        rules = [r for r in LADDER if r.stage == stage]
        open_ended = [i for i, r in enumerate(rules) if r.when is None]
        assert open_ended in ([], [len(rules) - 1]), (stage, [r.name for r in rules])


@pytest.mark.parametrize("parts", TRACES, ids=lambda p: p[-1][:40])
def test_every_rule_given_is_in_the_table_with_its_rung(parts):
    analysis = Analysis.of(shared(*parts), AnalysisOptions(keep_python=True))
    rung = {r.name: r.evidence for r in LADDER}
    seen = set()
    for level in LEVELS:
        acts = analysis.activities(level)
        rules = set(acts["rule"].unique().to_list())
        assert rules <= set(RULE_TEXT), f"{level}: rules outside the ladder table: {rules - set(RULE_TEXT)}"
        fixed = acts.filter(pl.col("rule") != "kernel_name")
        want = fixed["rule"].replace_strict(rung, return_dtype=pl.Utf8)
        assert (fixed["evidence"] == want).all(), level
        by_kernel = acts.filter(pl.col("rule") == "kernel_name")
        assert by_kernel["evidence"].is_in(["family", "generic"]).all(), level
        seen |= rules
    assert seen - {"none"}, "the trace exercises no rule"


@pytest.mark.parametrize("parts", TRACES[:4], ids=lambda p: p[-1][:40])
def test_the_call_rules_give_the_launch_level_and_the_per_call_category_alike(parts):
    analysis = Analysis.of(shared(*parts))
    tax = analysis.taxonomy
    call_rules = [r.name for r in LADDER if r.stage == "call"]
    ops = analysis.linked().ops.select("op_id", call_category(tax.semantics.generic_categories).alias("call"))
    acts = analysis.activities("launch").filter(pl.col("rule").is_in(call_rules))
    assert acts.height, "no activity decided by its launching op"
    got = acts.join(ops, left_on="launch_op_id", right_on="op_id", how="left")
    assert (got["category"] == got["call"]).all()
