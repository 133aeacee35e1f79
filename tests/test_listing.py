"""The HTML page and the batch list the registry: an analysis registered for them (a throwaway one,
registered inside the test and taken out after) shows in each trace's batch object and on the page,
with no edit to either. Its page section is its model's ``html`` renderer where one is registered,
else a generic one; one that does not apply to a trace is left out, and none of this adds a
``--format`` to the command line.

The analysis and its model live at this module's top level so that the batch's worker processes
(started with ``spawn``) can unpickle the spec the driver sends them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from conftest import shared

from nongemm_trace.analyses.registry import AnalysisSpec, listed, register, unregister
from nongemm_trace.core.fields import option
from nongemm_trace.report import formats
from nongemm_trace.report.registry import PAGE, renders
from nongemm_trace.report.registry import unregister as unregister_renderer
from nongemm_trace.report_page import build_page
from nongemm_trace.runs.batch import run_batch


@dataclass
class CountReport:
    """The throwaway model: how many GPU activities the selection kept."""

    NAME: ClassVar[str] = "activity_count"
    trace: str
    activities: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "activities": self.activities, "label": self.label}


@dataclass(frozen=True)
class CountParams:
    label: str = option("counted", "what the count is called")


def count_activities(sel: Any, ctx: Any, params: CountParams) -> CountReport:
    return CountReport(sel.trace, sel.activities.height, params.label)


def has_steps(sel: Any) -> bool:
    return sel.steps.height > 0


def _trace() -> str:
    return str(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))


@pytest.fixture
def counted():
    """The throwaway analysis, registered for the page and the batch while the test runs."""
    spec = register(AnalysisSpec("activity_count", "how many GPU activities the selection kept", CountParams,
                                 CountReport.NAME, count_activities, page=100, batch=True))
    try:
        yield spec
    finally:
        unregister(spec.name)
    assert spec not in listed("page") + listed("batch")


def test_a_registered_analysis_appears_in_each_traces_batch_object(counted):
    result = run_batch([_trace()], {}, workers=1)
    (row,) = result.reports
    assert row["analyses"] == {"activity_count": {"trace": _trace(), "activities": row["gpu_activities"],
                                                  "label": "counted"}}
    assert "analyses" in result.to_dict()["traces"][0]


def test_a_registered_analysis_appears_on_the_page_by_a_generic_section(counted):
    page = build_page([_trace()])
    assert "<h3>activity_count</h3>" in page and "how many GPU activities the selection kept" in page
    assert "&quot;label&quot;: &quot;counted&quot;" in page  # no renderer at all: its JSON document
    # after the sections the page always had (a higher place): the launch section comes first
    assert page.index("Launch overhead and idle time") < page.index("<h3>activity_count</h3>")
    assert "chosen" in build_page([_trace()], params={"activity_count": {"label": "chosen"}})


def test_its_page_renderer_draws_its_section_and_is_no_command_line_format(counted):
    @renders(CountReport.NAME, PAGE)
    def section(model: Any, view: Any) -> str:
        return f'<p class="counted">{model.activities} activities</p>'
    try:
        page = build_page([_trace()])
        assert '<p class="counted">' in page and "<h3>activity_count</h3>" not in page
        assert PAGE not in formats(CountReport.NAME) and PAGE not in formats("launch")
    finally:
        unregister_renderer(CountReport.NAME, PAGE)


def test_an_analysis_that_does_not_apply_to_a_trace_is_left_out():
    spec = register(AnalysisSpec("stepped_count", "counted where the trace has steps", CountParams,
                                 CountReport.NAME, count_activities, page=100, applies=has_steps))
    try:
        no_steps = str(shared("external", "hta", "trace_file_list__inference_rank_1.json.gz"))
        assert "<h3>stepped_count</h3>" not in build_page([no_steps])
        assert "<h3>stepped_count</h3>" in build_page([_trace()])  # two ProfilerSteps
    finally:
        unregister(spec.name)
