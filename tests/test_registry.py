"""The analyses registry and the renderer table from the library's side: ``nongemm_trace.run`` gives
the model the subcommand renders, ``nongemm_trace.render`` the bytes the command line prints, typed
parameters and options refuse what an analysis does not take, every flag is documented from its
field, and the per-shape table (the analysis added as three files) agrees with ``flops``."""

from __future__ import annotations

import contextlib
import io
from dataclasses import fields

import polars as pl
import pytest
from conftest import shared

import nongemm_trace
from nongemm_trace import cli
from nongemm_trace.analyses import spec, specs
from nongemm_trace.commands.args import parser
from nongemm_trace.core.fields import flag_settings
from nongemm_trace.errors import OptionError
from nongemm_trace.models.shapes import ShapesReport
from nongemm_trace.pipeline.analysis import Analysis
from nongemm_trace.pipeline.options import AnalysisOptions


def _trace() -> str:
    return str(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))


def _printed(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(argv) in (0, 1)
    return out.getvalue()


@pytest.mark.parametrize("name", [s.name for s in specs()])
def test_run_and_render_give_the_command_lines_bytes(name):
    which = spec(name)
    a = Analysis(_trace())
    params = dict(zip(which.example[::2], which.example[1::2]))
    cli_params = {k.lstrip("-").replace("-", "_"): v for k, v in params.items()}
    values = {f.name: (flag_settings(f)["parse"]((cli_params[f.name],)) if flag_settings(f)["parse"]
                       else (cli_params[f.name],) if flag_settings(f)["repeat"] else cli_params[f.name])
              for f in fields(which.params) if f.name in cli_params}
    model = nongemm_trace.run(name, a, values)
    assert type(model).NAME == which.model
    assert "\n" not in repr(model) and len(repr(model)) < 500, "a model's repr is one short line"
    for fmt in ("json", "table"):
        assert nongemm_trace.render(model, fmt) == _printed([name, _trace(), *which.example, "--format", fmt])


def test_parameters_and_options_an_analysis_does_not_take_are_refused():
    with pytest.raises(TypeError, match="takes no parameter"):
        nongemm_trace.run("launch", _trace(), {"short_ms": 1})
    with pytest.raises(TypeError, match="does not take drop_unlinked"):
        nongemm_trace.run("latency", _trace(), options={"drop_unlinked": True})
    with pytest.raises(TypeError, match="unknown option"):
        AnalysisOptions.of({"levels": "top"})
    with pytest.raises(OptionError, match="skip_steps"):
        AnalysisOptions(skip_steps=-1)
    with pytest.raises(OptionError, match="unknown level"):
        AnalysisOptions(level="kernel")


def test_every_parameter_is_a_documented_flag_of_its_subcommand():
    sub = next(a for a in parser()._actions if a.dest == "command")
    for s in specs():
        actions = {a.dest: a for a in sub.choices[s.name]._actions}
        for f in fields(s.params):
            assert f.name in actions, (s.name, f.name)
            assert actions[f.name].help == flag_settings(f)["help"].replace("%", "%%"), (s.name, f.name)


def test_the_top_flag_comes_from_the_spec():
    """``--top N`` is on a subcommand exactly where its spec says what it counts (``top``), so an analysis
    whose table view is cut to its largest rows needs no entry on the command floor (``shapes``'s was)."""
    import argparse
    from dataclasses import replace

    from nongemm_trace.commands.derived import arguments_of

    sub = next(a for a in parser()._actions if a.dest == "command")
    for s in specs():
        top = [a for a in sub.choices[s.name]._actions if a.dest == "top"]
        assert [a.help for a in top] == ([s.top] if s.top else []), s.name
    assert {s.name for s in specs() if s.top} >= {"flops", "shapes"}
    p = argparse.ArgumentParser()
    arguments_of(replace(spec("launch"), top="rows of streams shown"))(p)
    assert p.parse_args(["t.json", "--top", "3"]).top == 3


def test_latency_keeps_its_graph_in_the_analysis_memo_not_its_attributes():
    a = Analysis(_trace())
    first = nongemm_trace.run("latency", a)
    assert "_latency_graphs" not in vars(a) and a.memo["latency_graphs"]
    graph = next(iter(a.memo["latency_graphs"].values()))
    nongemm_trace.run("whatif", a, {"scale": ("GEMM=0.5",)})
    assert next(iter(a.memo["latency_graphs"].values())) is graph, "the what-if reused the graph"
    assert first.steps.height == a.selection(AnalysisOptions(level=None)).step_threads[0].height


def test_shapes_agree_with_flops():
    """Each shape row is calls of one op with one input signature; together they hold the GPU time and
    the calls that ``flops`` counts, and each rate is the row's FLOPs over its time."""
    a = Analysis(_trace())
    shapes = nongemm_trace.run("shapes", a)
    flops = nongemm_trace.run("flops", a)
    owned = flops.calls.filter((pl.col("time_ns") > 0) | pl.col("flops").is_not_null())
    assert shapes.shapes["calls"].sum() == owned.height
    assert shapes.shapes["time_ns"].sum() == owned["time_ns"].sum()
    mm = shapes.shapes.filter(pl.col("op") == "aten::mm")
    assert mm.height >= 2, "aten::mm ran at several shapes"
    for r in mm.iter_rows(named=True):
        assert r["achieved_tflops"] == pytest.approx(r["flops_per_call"] * r["calls"] / r["time_ns"] / 1e3, rel=1e-6)
    assert shapes.shapes["time_ns"].to_list() == sorted(shapes.shapes["time_ns"].to_list(), reverse=True)
    assert ShapesReport.from_dict(shapes.to_dict()).to_dict() == shapes.to_dict()


def test_one_options_object_reaches_every_entry():
    """``options=AnalysisOptions(...)`` is the same as its fields as keywords, for ``analyze``, the
    functions over an analysis and ``run``; a keyword given beside it wins."""
    typed = AnalysisOptions(level="top", skip_steps=1)
    a = Analysis(_trace())
    assert nongemm_trace.analyze(a, options=typed).to_dict() == nongemm_trace.analyze(a, level="top",
                                                                                      skip_steps=1).to_dict()
    assert nongemm_trace.analyze(a, options=typed, level="launch").level == "launch"
    with pytest.warns(DeprecationWarning, match="launch_analysis.*0.3"):  # the keyword form, until it goes
        by_keywords = nongemm_trace.launch_analysis(a, level="top", skip_steps=1).to_dict()
    assert nongemm_trace.launch_analysis(a, options=typed).to_dict() == by_keywords
    assert nongemm_trace.run("launch", a, options=typed).to_dict() == by_keywords
    with pytest.raises(TypeError, match="AnalysisOptions"):
        nongemm_trace.launch_analysis(a, options={"level": "top"})


def test_the_training_callbacks_take_the_options_object():
    from nongemm_trace.integrations.steps import StepProfiler

    typed = AnalysisOptions(taxonomy="ispass25", level="top", metric="cpu")
    p = StepProfiler(options=typed)
    assert (p.taxonomy.name, p.report_options) == ("ispass25", {"level": "top", "metric": "cpu"})
    with pytest.warns(DeprecationWarning):  # a keyword beside options= still wins, as the old form did
        assert StepProfiler(options=typed, metric="gpu").report_options["metric"] == "gpu"


def test_the_context_offers_no_stage_calls_and_hands_the_breakdown_to_whom_reads_it():
    """An analysis reads its tables, op tree, activities, taxonomy and memo; it cannot ask for another
    selection or a breakdown. ``check`` and ``phases`` read the breakdown: the registry hands them the
    one ``analyze`` measures, not a second."""
    from dataclasses import fields as dc_fields

    from nongemm_trace.pipeline.context import Context

    names = {f.name for f in dc_fields(Context)}
    assert not names & {"selection", "report"}, names
    assert {s.name for s in specs() if s.breakdown} == {"check", "phases"}
    a = Analysis(_trace())
    rep = a.report(AnalysisOptions(metric="gpu"))
    assert nongemm_trace.run("check", a, {"max_share": {"non-GEMM": 0.99}}).report is rep
    assert a.context().breakdown is None


def test_the_whatif_changes_are_one_typed_object_and_the_old_keywords_warn():
    """``predict`` takes the ``whatif`` analysis's ``Params`` (the changes, typed and documented once);
    its former eleven-parameter form gives the same report, with the deprecation warning (0.3)."""
    from nongemm_trace.analyses.changes import WhatIfParams
    from nongemm_trace.analyses.latency import graph_in
    from nongemm_trace.analyses.latency.whatif import predict

    a = Analysis(_trace())
    sel = a.selection()
    ctx = a.context()
    g, warnings = graph_in(sel, ctx)
    typed = predict(ctx, g, sel, warnings, WhatIfParams(scale=("GEMM=0.5",), cpu_scale=1.5, launch_us=2.0))
    with pytest.warns(DeprecationWarning, match=r"WhatIfParams\(scale=.*0\.3"):
        old = predict(ctx, g, sel, warnings, ["GEMM=0.5"], cpu_scale=1.5, launch_us=2.0)
    assert old.to_dict() == typed.to_dict() == nongemm_trace.run("whatif", a, {
        "scale": {"GEMM": 0.5}, "cpu_scale": 1.5, "launch_us": 2.0}).to_dict()
    with pytest.raises(TypeError, match="not both"):
        predict(ctx, g, sel, warnings, WhatIfParams(), cpu_scale=2.0)
    with pytest.raises(TypeError, match="takes no change cpu_scal"):
        predict(ctx, g, sel, warnings, None, cpu_scal=2.0)
