"""The pytest plugin: the ``nongemm`` fixture and marker in a pytest run of their own (pytester),
on the bundled BERT sample (non-GEMM 4.3 % of GPU time) and the shared eager/compiled pair."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import REPO, SAMPLES, hostile, shared

pytest_plugins = ["pytester"]

BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


@pytest.fixture(scope="module")
def imported():
    """pytester's in-process runs drop the modules first imported inside them afterwards (a second
    copy of polars' types would follow): the whole pipeline is imported out here, once."""
    import nongemm_trace.pytest_plugin
    import nongemm_trace.report.json_out
    import nongemm_trace.testing  # noqa: F401
    from nongemm_trace.analyses.check import check

    check(BERT, max_share={"GEMM": 1.0}, baseline=BERT, max_regression=1.0)


@pytest.fixture
def run(pytester, monkeypatch, imported):
    """Run pytest on the files made in ``pytester`` with the plugin loaded by name (as its entry point
    does once installed), no other plugin auto-loaded."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (pytester.path / "traces").mkdir()
    shutil.copy(BERT, pytester.path / "traces" / "bert.json.gz")

    def go(*args: str):
        return pytester.runpytest("-p", "nongemm_trace.pytest_plugin", "-p", "no:cacheprovider", *args)

    return go


def test_fixture_and_marker_pass_fail_and_refuse_typos(pytester, run):
    pytester.makepyfile(test_perf="""
        import pytest

        SEEN = []

        def test_share_holds(nongemm):
            rep = nongemm.assert_share_at_most("traces/bert.json.gz", "non-GEMM", "10%")
            assert round(rep.share("non-GEMM"), 3) == 0.043
            SEEN.append(nongemm.analysis("traces/bert.json.gz"))

        def test_share_broken(nongemm):
            nongemm.assert_share_at_most("traces/bert.json.gz", "non-GEMM", 0.01)

        def test_typo_is_an_error_not_a_pass(nongemm):
            nongemm.assert_share_at_most("traces/bert.json.gz", "nonGEMM", 0.5)

        def test_at_least_and_the_session_cache(nongemm):
            nongemm.assert_share_at_least("traces/bert.json.gz", "GEMM", "90%")
            assert SEEN and nongemm.analysis("traces/../traces/bert.json.gz") is SEEN[0]  # one load per session

        def test_regression_against_itself(nongemm):
            nongemm.assert_no_regression("traces/bert.json.gz", baseline="traces/bert.json.gz",
                                         max_regression="1%", categories={"normalization": 0.0})

        @pytest.mark.nongemm("traces/bert.json.gz", max_share={"non-GEMM": 0.5}, max_category_share={"gemm": "95%"})
        def test_marker_holds():
            pass

        @pytest.mark.nongemm(trace="traces/bert.json.gz", max_category_share={"normalization": 0.001})
        def test_marker_broken():
            pass

        @pytest.mark.nongemm("traces/bert.json.gz", max_category_share={"memroy": 0.1})
        def test_marker_typo():
            pass

        @pytest.mark.nongemm("traces/missing.json.gz", max_share={"GEMM": 1.0})
        def test_marker_after_a_failing_body():
            assert False, "the body's own failure"
    """)
    result = run("-v")
    result.assert_outcomes(passed=4, failed=5)
    out = result.stdout.str()
    assert "nongemm-trace " in out  # the header line
    for name in ("test_share_holds", "test_at_least_and_the_session_cache", "test_regression_against_itself",
                 "test_marker_holds"):
        assert f"test_perf.py::{name} PASSED" in out
    result.stdout.fnmatch_lines(["*non-GEMM is 4.3 % of GPU time, above the limit of 1.0 %*",
                                 "*unknown name 'nonGEMM' (known: GEMM, non-GEMM, communication, transfer, "
                                 "unclassified, *",
                                 "*category normalization is 2.0 % of GPU time, above the limit of 0.1 %*",
                                 "*unknown name 'memroy'*", "*the body's own failure*"])
    assert "no trace at" not in out  # the marker waits for a passing body


def test_baselines_are_recorded_then_compared(pytester, run):
    pair = [shared("h200", f"bert_base_fp32_bs8_s128__{k}.json.gz") for k in ("compiled", "eager")]
    shutil.copy(pair[0], pytester.path / "traces" / "model.json.gz")  # the compiled model: 10.7 ms per step
    pytester.makepyfile(test_reg="""
        def test_no_slowdown(nongemm):
            nongemm.assert_no_regression("traces/model.json.gz", baseline="baselines/model.nongemm.json",
                                         max_regression="10%")
    """)
    missing = run()
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(
        ["*no baseline at *model.nongemm.json (record it: pytest --nongemm-update-baselines)*"])

    run("--nongemm-update-baselines").assert_outcomes(passed=1)
    stored = pytester.path / "baselines" / "model.nongemm.json"
    assert '"schema_version"' in stored.read_text() and '"categories"' in stored.read_text()
    run().assert_outcomes(passed=1)

    shutil.copy(pair[1], pytester.path / "traces" / "model.json.gz")  # now eager: 12.8 ms per step
    slower = run()
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*GPU time per step rose 20.0 % (5,336.2 -> 6,404.7 us), above the limit of 10.0 %*"])


def test_a_baseline_with_negative_times_fails_the_fixture_and_the_marker_in_one_line(pytester, run):
    """S12 (../shared/fuzz/hostile): a stored baseline with a negative total or category time compared
    as 'no regression' (a change of -100 %): now the test fails with the baseline's one line, as
    ``check`` exits 2 with it, and no traceback into the library."""
    for name in ("S12-baseline-negative.json", "S12-baseline-category-negative.json"):
        shutil.copy(hostile(name), pytester.path / "traces" / name)
    pytester.makepyfile(test_gate="""
        import pytest

        def test_fixture_total(nongemm):
            nongemm.assert_no_regression("traces/bert.json.gz", baseline="traces/S12-baseline-negative.json",
                                         max_regression="5%")

        def test_fixture_category(nongemm):
            nongemm.assert_no_regression("traces/bert.json.gz", baseline="traces/S12-baseline-category-negative.json",
                                         max_regression=None, categories={"gemm": "5%"})

        @pytest.mark.nongemm("traces/bert.json.gz", baseline="traces/S12-baseline-negative.json", max_regression=0.05)
        def test_marker_total():
            pass

        @pytest.mark.nongemm("traces/bert.json.gz", baseline="traces/S12-baseline-category-negative.json",
                             max_category_regression={"gemm": 0.05})
        def test_marker_category():
            pass
    """)
    result = run("-v", "-rN")  # no short summary: its lines are cut to the terminal's width
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert out.count("S12-baseline-negative.json: baseline gpu_time_us is -1.0: a time must be finite") == 2
    assert out.count("S12-baseline-category-negative.json: baseline gpu_time_us of category 'gemm' is -5.0") == 2
    assert "Traceback" not in out and "nongemm_trace/analyses/check.py" not in out and "During handling" not in out


def test_a_trace_that_lost_its_gpu_work_fails_the_fixture_and_the_marker(pytester, run):
    """E2 (../shared/fuzz/hostile-t4): ``{"traceEvents":[]}`` against a baseline with GPU time passed
    as a fall of 100 %; now the fixture and the marker fail it with the floor's line (issue #42 item 5)."""
    from conftest import HOSTILE_T4

    shutil.copy(hostile("E2-empty-events.json", HOSTILE_T4), pytester.path / "traces" / "empty.json")
    pytester.makepyfile(test_gate="""
        import pytest

        def test_fixture(nongemm):
            nongemm.assert_no_regression("traces/empty.json", baseline="traces/bert.json.gz", max_regression="5%")

        def test_fixture_lower_floor_still_fails(nongemm):
            nongemm.assert_no_regression("traces/empty.json", baseline="traces/bert.json.gz", max_regression="5%",
                                         min_activities="1%")

        @pytest.mark.nongemm("traces/empty.json", baseline="traces/bert.json.gz", max_regression=0.05)
        def test_marker():
            pass

        def test_fixture_floor_refused(nongemm):
            nongemm.assert_no_regression("traces/bert.json.gz", baseline="traces/bert.json.gz", min_activities="120%")
    """)
    result = run("-v", "-rN")
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    failed = [line for line in out.splitlines() if line.startswith("E ")]
    assert sum("the trace holds no GPU activity (its baseline has 154.0 per step)" in line for line in failed) == 3
    assert "bert.json.gz: min_activities is 1.2, not a share between 0 and 1" in out
    assert "Traceback" not in out and "During handling" not in out


def test_the_fixtures_run_takes_the_typed_options_or_their_keywords(pytester, run):
    """``nongemm.run(name, trace, options=AnalysisOptions(...))``, as every other entry takes the options
    (issue #44 item 2): the same model as the keywords give (which warn: deprecated), a keyword beside
    the object winning."""
    pytester.makepyfile(test_run="""
        import pytest

        from nongemm_trace import AnalysisOptions

        def test_typed_and_keywords_agree(nongemm):
            typed = nongemm.run("launch", "traces/bert.json.gz", options=AnalysisOptions(skip_steps=1))
            with pytest.warns(DeprecationWarning, match=r"nongemm\\.run.*options=AnalysisOptions.*0\\.3"):
                old = nongemm.run("launch", "traces/bert.json.gz", skip_steps=1)
            assert typed.to_dict() == old.to_dict()
            with pytest.warns(DeprecationWarning):
                beside = nongemm.run("launch", "traces/bert.json.gz", options=AnalysisOptions(skip_steps=1),
                                     skip_steps=0)
            assert beside.to_dict() == nongemm.run("launch", "traces/bert.json.gz").to_dict() != typed.to_dict()

        def test_the_assertions_take_the_typed_options(nongemm):
            top = AnalysisOptions(level="top")
            rep = nongemm.assert_share_at_most("traces/bert.json.gz", "non-GEMM", "99%", options=top)
            assert rep.level == "top"
            assert nongemm.assert_share_at_least("traces/bert.json.gz", "GEMM", "1%", options=top).level == "top"
            memory = nongemm.assert_category_share_at_most("traces/bert.json.gz", "memory", 0.99, options=top)
            assert memory.level == "top"
            assert nongemm.assert_unclassified_at_most("traces/bert.json.gz", 1.0, options=top).level == "top"
            assert nongemm.assert_checks("traces/bert.json.gz", max_share={"GEMM": 1.0}, options=top).level == "top"
            assert nongemm.report("traces/bert.json.gz", top).level == "top"
            with pytest.warns(DeprecationWarning, match=r"assert_share_at_most.*level=.*0\\.3"):
                old = nongemm.assert_share_at_most("traces/bert.json.gz", "non-GEMM", "99%", level="top")
            assert old.to_dict() == rep.to_dict()

        @pytest.mark.nongemm("traces/bert.json.gz", max_share={"non-GEMM": 0.99}, options=AnalysisOptions(level="top"))
        def test_marker_takes_the_typed_options():
            pass
    """)
    run("-q", "-W", "error::DeprecationWarning").assert_outcomes(passed=3)


def test_the_entry_point_names_the_plugin():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"nongemm_trace": "nongemm_trace.pytest_plugin"}
    import nongemm_trace.pytest_plugin as plugin

    assert callable(plugin.pytest_addoption) and callable(plugin.nongemm)
