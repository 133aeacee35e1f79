"""One vocabulary across commands (issue #43 item 2): on one trace, ``analyze``, ``launch`` and ``latency``
give the same step time (the loop's period) and the same bound, and the terminal says each run's busy
share once (a ResNet-50 trace read "busy 93 %" and "busy 90 %" in one view, "host-bound" in another)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import shared

from nongemm_trace import cli


def _json(capsys, argv: list[str]) -> dict:
    assert cli.main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["resnet50_fp32_bs8__eager.json.gz", "bert_base_fp32_bs8_s128__eager.json.gz"])
def test_the_three_commands_agree_on_step_time_and_bound(capsys, name):
    trace = str(shared("h200", name))
    analyze = _json(capsys, ["analyze", trace])
    launch = _json(capsys, ["launch", trace])
    latency = _json(capsys, ["latency", trace])
    steps = [s["step_us"] for s in analyze["steps"]]
    assert launch["mean_step_us"] == pytest.approx(sum(steps) / len(steps), abs=2e-3)  # means of rounded us
    assert latency["total"]["mean_step_us"] == pytest.approx(launch["mean_step_us"], abs=2e-3)
    assert launch["bound"] == latency["unprofiled"]["profiled_bound"]  # the profiled run's bound
    assert launch["unprofiled"]["bound"] == latency["unprofiled"]["bound"]  # and the run's without the profiler


def test_launch_says_the_busy_share_once_per_run(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert cli.main(["launch", str(shared("h200", "resnet50_fp32_bs8__eager.json.gz"))]) == 0
    head = capsys.readouterr().out.split("Timeline, all streams")[0]
    shares = re.findall(r"GPU (?:busy|idle) \d+ %", head)
    assert len(shares) == 2, head  # the profiled run's, and the run's without the profiler


@pytest.mark.parametrize("name", ["resnet50_fp32_bs8__eager.json.gz", "bert_base_fp32_bs8_s128__eager.json.gz"])
def test_whatif_and_the_page_say_the_same_step_time_and_bound(capsys, name):
    """``whatif --format json`` and the HTML page are outputs too: the same mean step and the same
    profiled bound as ``launch`` (and so as ``analyze`` and ``latency``, above)."""
    import html

    from nongemm_trace.report_page import build_page

    trace = str(shared("h200", name))
    launch = _json(capsys, ["launch", trace])
    whatif = _json(capsys, ["whatif", trace])
    assert whatif["measured_us"] == pytest.approx(launch["mean_step_us"], abs=2e-3)
    assert whatif["unprofiled"]["profiled_bound"] == launch["bound"]
    assert whatif["unprofiled"]["bound"] == launch["unprofiled"]["bound"]
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", build_page([trace]))).split())
    mean = f"{launch['mean_step_us']:,.1f} us"
    assert f"mean step {mean}" in page and f"step time (the loop's period): mean {mean}" in page
    assert f"profiled: {launch['bound']}: " in page
    other = {"host-bound": "device-bound", "device-bound": "host-bound"}[launch["bound"]]
    assert f"profiled: {other}" not in page
    assert f"{launch['unprofiled']['bound']} without the profiler (estimated): " in page  # BERT: device-bound


def test_the_notebook_views_of_latency_and_whatif_say_the_terminals_verdicts(capsys, monkeypatch):
    """In a notebook (``_repr_html_``) the latency view said no verdict and named the bounds its own
    way (``CPU-bound (host work)``, ``GPU-bound``, ``other (waits, gaps)``) where the terminal says
    ``host-bound: … (launch 13 %, op CPU work 63 %, outside ops 24 %)``; the what-if view named only
    the scaled durations, not the profiled and unprofiled answers."""
    import html

    from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis

    monkeypatch.setenv("COLUMNS", "400")
    trace = str(shared("h200", "resnet50_fp32_bs8__eager.json.gz"))
    views = ((latency_analysis(trace), ["latency", trace]),
             (whatif_analysis(trace, ["GEMM=0.5"], cpu_scale=0.9), ["whatif", trace, "--scale", "GEMM=0.5",
                                                                     "--cpu-scale", "0.9"]))
    for model, argv in views:
        assert cli.main([*argv, "-q"]) == 0
        lines = [" ".join(ln.split()) for ln in capsys.readouterr().out.splitlines()]
        said = [ln for ln in lines if ln.startswith(("profiled", "without the profiler", "what if: ", "(estimated",
                                                     "host-bound: ", "device-bound: "))]
        page = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", model._repr_html_())).split())
        assert len(said) >= 3 and [s for s in said if s not in page] == [], said
        assert "CPU-bound" not in page and "GPU-bound" not in page and "op CPU work (host)" in page
