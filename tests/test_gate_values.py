"""Gates show their numbers (issue #43 item 5): ``check`` lists every limit with its measured value,
held or broken, in the text and the JSON (the callbacks' ``.check.json``), and a failed assertion
leads with the verdict, not the trace's absolute path."""

from __future__ import annotations

import json

import pytest
from conftest import shared

from nongemm_trace import check, cli
from nongemm_trace.testing import assert_share_at_most

LIMITS = dict(max_share={"non-GEMM": 0.45}, max_category_share={"memory": 0.2})


def test_every_gate_is_listed_with_its_value_and_limit_on_a_real_trace(capsys):
    trace = str(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))
    result = check(trace, **LIMITS)
    violations, rep = result.violations, result.report  # not the deprecated unpacking
    assert violations == [] and [g.limit for g in violations.gates] == ["max-share non-GEMM",
                                                                        "max-category-share memory"]
    g = violations.gates[0]
    assert g.ok and g.value == pytest.approx(rep.share("non-GEMM")) and g.allowed == 0.45
    assert cli.main(["check", trace, "--max-share", "non-GEMM=0.45", "--max-category-share", "memory=20%"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("ok: ") and len(text) == 3
    assert text[1].startswith("ok   max-share non-GEMM: non-GEMM is ") and "within the limit of 45.0 %" in text[1]
    assert cli.main(["check", trace, "--max-share", "non-GEMM=0.01", "--max-category-share", "memory=0.2",
                     "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [v["limit"] for v in doc["violations"]] == ["max-share non-GEMM"]
    assert [(x["limit"], x["ok"], x["allowed"]) for x in doc["gates"]] == [
        ("max-share non-GEMM", False, 0.01), ("max-category-share memory", True, 0.2)]
    assert doc["gates"][1]["value"] == pytest.approx(rep.share("memory"))


def test_a_failed_assertion_leads_with_the_verdict():
    trace = shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz")
    with pytest.raises(AssertionError) as err:
        assert_share_at_most(str(trace.resolve()), "non-GEMM", 0.01)
    message = str(err.value)
    assert message.startswith("non-GEMM is ") and message.endswith(f"(in {trace.name})")
    assert str(trace.parent) not in message
