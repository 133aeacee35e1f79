"""One typed options object in every public signature (issue #44 item 2): each function over a trace takes
``options=AnalysisOptions(...)``; the keyword form it took before (``level="top"``, …) still gives the same
result, with one ``DeprecationWarning`` that names the old and the new form and the release that drops it
(``core.deprecation.REMOVAL``)."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import polars as pl
import pytest

import nongemm_trace
from nongemm_trace import Analysis, AnalysisOptions, WhatIfParams, testing
from nongemm_trace.analyses.collectives import collective_calls
from nongemm_trace.analyses.latency import graph_of
from nongemm_trace.core.deprecation import REMOVAL
from nongemm_trace.integrations.gates import Gates
from nongemm_trace.report_page import build_page, write_page

ROOT = Path(__file__).resolve().parent.parent
BERT = ROOT / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz"
#: the options every case asks for, typed and as the keywords they were
OLD = {"level": "top", "skip_steps": 1}
TYPED = AnalysisOptions(**OLD)


@pytest.fixture(scope="module")
def a() -> Analysis:
    return Analysis(BERT)


def _same(x, y) -> bool:
    if isinstance(x, pl.DataFrame):
        return x.equals(y)
    if isinstance(x, tuple):  # graph_of: the analysis, the graph, the selection, the warnings
        return x[0] is y[0] and x[2] is y[2] and x[3] == y[3]
    if hasattr(x, "to_dict"):
        return x.to_dict() == y.to_dict()
    return x == y


def _once(call, *names: str):
    """``call()``'s result and the one DeprecationWarning it raised (its text names ``names``, the new form
    and the removal version)."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = call()
    said = [str(w.message) for w in got if issubclass(w.category, DeprecationWarning)]
    assert len(said) == 1, said
    for needle in (*names, "AnalysisOptions", f"goes away in nongemm-trace {REMOVAL}"):
        assert needle in said[0], said[0]
    return out


def _silent(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        return call()


#: (name, the call under the typed options, the call under the keywords it took before)
CASES = {
    "launch_analysis": (lambda a: nongemm_trace.launch_analysis(a, options=TYPED),
                        lambda a: nongemm_trace.launch_analysis(a, **OLD)),
    "flops_analysis": (lambda a: nongemm_trace.flops_analysis(a, options=TYPED),
                       lambda a: nongemm_trace.flops_analysis(a, **OLD)),
    "latency_analysis": (lambda a: nongemm_trace.latency_analysis(a, options=AnalysisOptions(skip_steps=1)),
                         lambda a: nongemm_trace.latency_analysis(a, skip_steps=1)),
    "graph_of": (lambda a: graph_of(a, AnalysisOptions(skip_steps=1)), lambda a: graph_of(a, skip_steps=1)),
    "check": (lambda a: nongemm_trace.check(a, max_share={"non-GEMM": 0.99}, options=TYPED),
              lambda a: nongemm_trace.check(a, max_share={"non-GEMM": 0.99}, **OLD)),
    "compare": (lambda a: nongemm_trace.compare([a, a], options=TYPED),
                lambda a: nongemm_trace.compare([a, a], **OLD)),
    "collective_calls": (lambda a: collective_calls(a, TYPED), lambda a: collective_calls(a, **OLD)),
    "build_page": (lambda a: build_page([a], options=TYPED), lambda a: build_page([a], **OLD)),
    "Analysis.report": (lambda a: a.report(TYPED), lambda a: a.report(**OLD)),
    "Analysis.selection": (lambda a: a.selection(TYPED), lambda a: a.selection(**OLD)),
    "Analysis.context": (lambda a: a.context(None, TYPED).options, lambda a: a.context(None, **OLD).options),
    "Analysis.of": (lambda a: Analysis.of(a, AnalysisOptions(keep_python=True)) is a,
                    lambda a: Analysis.of(a, keep_python=True) is a),
    "assert_share_at_most": (lambda a: testing.assert_share_at_most(a, "non-GEMM", 0.99, options=TYPED),
                             lambda a: testing.assert_share_at_most(a, "non-GEMM", 0.99, **OLD)),
    "assert_share_at_least": (lambda a: testing.assert_share_at_least(a, "GEMM", 0.01, options=TYPED),
                              lambda a: testing.assert_share_at_least(a, "GEMM", 0.01, **OLD)),
    "assert_category_share_at_most": (
        lambda a: testing.assert_category_share_at_most(a, "memory", 0.99, options=TYPED),
        lambda a: testing.assert_category_share_at_most(a, "memory", 0.99, **OLD)),
    "assert_unclassified_at_most": (lambda a: testing.assert_unclassified_at_most(a, 1.0, options=TYPED),
                                    lambda a: testing.assert_unclassified_at_most(a, 1.0, **OLD)),
    "assert_no_regression": (lambda a: testing.assert_no_regression(a, baseline=BERT, options=TYPED),
                             lambda a: testing.assert_no_regression(a, baseline=BERT, **OLD)),
    "assert_checks": (lambda a: testing.assert_checks(a, max_share={"GEMM": 1.0}, options=TYPED),
                      lambda a: testing.assert_checks(a, max_share={"GEMM": 1.0}, **OLD)),
}


@pytest.mark.parametrize("name", CASES)
def test_each_entry_takes_the_typed_options_and_its_old_keywords_warn_once(a, name):
    typed, old = CASES[name]
    new = _silent(lambda: typed(a))
    assert _same(new, _once(lambda: old(a), name.split(".")[-1], "is deprecated"))


def test_the_typed_options_are_read():
    """Not only accepted: the level and the steps asked for are the ones measured."""
    a = Analysis(BERT)
    rep = testing.assert_share_at_most(a, "non-GEMM", 0.99, options=TYPED)
    assert rep.level == "top" and rep.steps.height == a.report().steps.height - 1
    assert nongemm_trace.launch_analysis(a, options=TYPED).level == "top"
    assert nongemm_trace.check(a, max_share={"GEMM": 1.0}, options=AnalysisOptions(metric="cpu")).report.metric == "cpu"


def test_a_keyword_beside_the_typed_options_wins_and_an_unknown_one_is_refused_before_any_warning(a):
    beside = _once(lambda: nongemm_trace.launch_analysis(a, options=TYPED, level="launch"), "launch_analysis")
    assert beside.level == "launch"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(TypeError, match="unknown option"):
            nongemm_trace.flops_analysis(a, colour="red")
        with pytest.raises(TypeError, match="unknown option"):
            a.report(taxonomy="default")  # the analysis's taxonomy is its own
        with pytest.raises(TypeError, match="options must be an AnalysisOptions"):
            nongemm_trace.compare([a, a], options={"level": "top"})


def test_whatif_takes_its_params_and_the_options_and_opens_the_trace_once(monkeypatch):
    from nongemm_trace.analyses import latency

    opened = []
    real = latency.open_analysis
    monkeypatch.setattr(latency, "open_analysis", lambda *x, **k: opened.append(x) or real(*x, **k))
    a = Analysis(BERT)
    new = _silent(lambda: nongemm_trace.whatif_analysis(a, WhatIfParams(scale=("GEMM=0.5",), cpu_scale=2.0),
                                                        options=AnalysisOptions(skip_steps=1)))
    assert len(opened) == 1
    # the form it took before, scales in the params' place and every change and option a keyword: one warning
    old = _once(lambda: nongemm_trace.whatif_analysis(a, ["GEMM=0.5"], cpu_scale=2.0, skip_steps=1),
                "whatif_analysis", "WhatIfParams")
    assert new.to_dict() == old.to_dict()
    by_name = _once(lambda: nongemm_trace.whatif_analysis(a, scales=["GEMM=0.5"], cpu_scale=2.0, skip_steps=1),
                    "whatif_analysis")
    assert by_name.to_dict() == new.to_dict()
    with pytest.raises(TypeError, match="not both"):
        nongemm_trace.whatif_analysis(a, WhatIfParams(), cpu_scale=2.0)


def test_the_what_if_keywords_name_the_one_removal_version():
    from nongemm_trace.analyses.latency.whatif import whatif_params

    with pytest.warns(DeprecationWarning, match=rf"predict.*WhatIfParams.*nongemm-trace {REMOVAL}\)"):
        assert whatif_params(["GEMM=0.5"], {"cpu_scale": 2.0}) == WhatIfParams(scale=("GEMM=0.5",), cpu_scale=2.0)
    source = (ROOT / "nongemm_trace" / "analyses" / "latency" / "whatif.py").read_text()
    assert '"0.3"' not in source and "REMOVAL" in source


def test_the_gates_apply_under_the_typed_options(tmp_path):
    trace = tmp_path / BERT.name  # apply writes NAME.check.json beside the trace
    shutil.copy(BERT, trace)
    a, gates = Analysis(trace), Gates(max_share={"non-GEMM": "99%"})
    new = _silent(lambda: gates.apply(a, TYPED))
    assert new == _once(lambda: gates.apply(a, **OLD), "Gates.apply") == []
    assert (tmp_path / (BERT.name.split(".json")[0] + ".check.json")).exists()


def test_the_page_is_written_under_the_typed_options(a, tmp_path):
    new = _silent(lambda: write_page([a], tmp_path / "new.html", top=5, options=TYPED)).read_text()
    old = _once(lambda: write_page([a], tmp_path / "old.html", top=5, **OLD), "write_page").read_text()
    assert new == old == build_page([a], top=5, options=TYPED)


@pytest.mark.parametrize("framework", ["huggingface", "lightning"])
def test_the_training_callbacks_take_the_three_objects(framework):
    pytest.importorskip("torch", reason="the callbacks need torch")
    if framework == "huggingface":
        pytest.importorskip("transformers", reason="transformers not installed")
        from nongemm_trace.integrations.huggingface import NonGemmCallback
    else:
        pytest.importorskip("lightning.pytorch", reason="lightning not installed")
        from nongemm_trace.integrations.lightning import NonGemmCallback
    from nongemm_trace.integrations.steps import ProfileWindow

    new = _silent(lambda: NonGemmCallback(window=ProfileWindow(start=4, steps=2),
                                          gates=Gates(max_share={"non-GEMM": "45%"}),
                                          options=AnalysisOptions(level="top")))
    old = _once(lambda: NonGemmCallback(start=4, steps=2, max_share={"non-GEMM": "45%"}, level="top"),
                "StepProfiler")
    assert (new.profiler.window, new.profiler.gates, new.profiler.report_options) == \
        (old.profiler.window, old.profiler.gates, old.profiler.report_options) and \
        new.profiler.report_options == {"level": "top"}
