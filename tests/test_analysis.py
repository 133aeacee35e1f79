"""The analysis object: one load for every analysis of a trace, options checked by name, stored
reports as baselines, categories declared by taxonomy data alone."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import nongemm_trace
import nongemm_trace.load as load_mod
from nongemm_trace import Analysis, AnalysisOptions, TraceError, cli
from nongemm_trace.analyses.check import check
from nongemm_trace.analyses.compare import compare
from nongemm_trace.analyses.explain import explain
from nongemm_trace.analyses.flops import flops_analysis
from nongemm_trace.analyses.launch import launch_analysis
from nongemm_trace.analyses.weak import weak_kernels
from nongemm_trace.classify.taxonomy import load_taxonomy
from nongemm_trace.errors import OptionError
from nongemm_trace.link import link
from nongemm_trace.writers.annotate import annotate

ROOT = Path(__file__).resolve().parent.parent
BERT = ROOT / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz"
GPT2 = ROOT / "sample_traces" / "gpt2_fp32_bs8_s128__compiled.json.gz"


@pytest.fixture
def loads(monkeypatch):
    calls = []
    real = load_mod.load_trace

    def counted(path, **kw):
        calls.append((str(path), kw.get("keep_python")))
        return real(path, **kw)

    monkeypatch.setattr(load_mod, "load_trace", counted)
    return calls


def test_one_load_serves_every_analysis(loads, tmp_path):
    a = Analysis(BERT, keep_python=True)
    rep = a.report()
    a.report(AnalysisOptions(level="top"))
    a.report(AnalysisOptions(level="module"))
    launch_analysis(a)
    flops_analysis(a)
    explain(a, "aten::addmm")
    weak_kernels(a)
    annotate(a, tmp_path / "out.json")
    compare([a, a])
    check(a, max_share={"non-GEMM": 0.5})
    assert len(loads) == 1
    assert a.report() is rep  # the same options give the kept report
    assert rep.to_dict() == nongemm_trace.analyze(BERT).to_dict()


def test_module_level_reloads_once_with_python_events(loads):
    a = Analysis(BERT)
    a.report()
    a.report(AnalysisOptions(level="module"))
    a.report(AnalysisOptions(level="module"))
    assert [k for _, k in loads] == [False, True]


def test_options_are_checked_by_parameter_name(capsys):
    a = Analysis(BERT)
    with pytest.raises(OptionError, match="skip_steps must be >= 0") as exc:
        a.report(AnalysisOptions(skip_steps=-1))
    assert exc.value.parameters == ("skip_steps",)
    with pytest.raises(OptionError, match="unknown level 'bogus'"):
        a.report(AnalysisOptions(level="bogus"))
    with pytest.raises(TypeError, match="unknown option"):
        nongemm_trace.launch_analysis(a, colour="red")
    # the command line says the flag
    assert cli.main(["analyze", str(BERT), "--skip-steps", "7"]) == 2
    assert "--skip-steps 7 leaves nothing: the trace has 2 steps" in capsys.readouterr().err


def test_link_leaves_its_input_alone():
    trace = load_mod.load_trace(BERT)
    before = list(trace.anomalies)
    first, second = link(trace), link(trace)
    assert trace.anomalies == before
    assert first.anomalies == second.anomalies
    assert first.activities.equals(second.activities)


def test_a_stored_report_is_a_baseline(tmp_path, capsys):
    base = tmp_path / "base.json"
    assert cli.main(["analyze", str(BERT), "--format", "json", "-o", str(base)]) == 0
    same = check(BERT, baseline=base, max_regression=0.0, max_category_regression={"gemm": 0.0}).violations
    assert same == []
    # the stored report gives the same verdicts as the trace itself
    other_json = check(GPT2, baseline=base, max_regression=0.05, max_category_regression={"memory": 0.05}).violations
    other_trace = check(GPT2, baseline=BERT, max_regression=0.05, max_category_regression={"memory": 0.05}).violations
    assert [(v.limit, round(v.value, 9)) for v in other_json] == [(v.limit, round(v.value, 9)) for v in other_trace]
    assert cli.main(["check", str(GPT2), "--baseline", str(base), "--max-regression", "5%"]) in (0, 1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": "1.0", "tool_version": "x"}))
    with pytest.raises(TraceError, match="not a report JSON"):
        check(BERT, baseline=bad, max_regression=0.1)


def test_a_new_category_needs_only_data(tmp_path):
    toml = tmp_path / "mine.toml"
    toml.write_text('extends = "default"\nname = "mine"\n[classes]\nbias_add = "non-GEMM"\n'
                    '[ops.bias_add]\nnames = ["aten::add"]\n')
    tax = load_taxonomy(str(toml))
    assert tax.categories[-1] == "bias_add" and "gemm" in tax.categories
    rep = Analysis(BERT, taxonomy=tax).report()
    assert rep.share("bias_add") > 0
    assert rep.categories.filter(pl.col("category") == "bias_add")["class"].item() == "non-GEMM"
    violations = check(BERT, options=AnalysisOptions(taxonomy=tax), max_category_share={"bias_add": 0.0}).violations
    assert [v.limit for v in violations] == ["max-category-share bias_add"]
    with pytest.raises(OptionError, match="unknown name 'bias_add'"):
        check(BERT, max_category_share={"bias_add": 0.1})  # the default taxonomy does not declare it
    broken = tmp_path / "broken.toml"
    broken.write_text('extends = "default"\n[ops.made_up]\nnames = ["aten::add"]\n')
    with pytest.raises(TraceError, match="unknown category 'made_up'.*declared in \\[classes\\]"):
        load_taxonomy(str(broken))
