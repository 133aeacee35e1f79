"""The outputs are one table (report/registry.py, by model and format): every command's ``--format``
choices are its model's formats in that table (plus the alias of the terminal view), ``--table`` the
tables its model declares, and every registered (model, format) — and every table of a file format —
renders through the real command line on a real trace. ``text``, the terminal view's other name,
still gives the same bytes. The registered analyses' commands, models and command lines come from the
analysis registry (each spec's ``example``): a new analysis is tested here without an edit."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest
from conftest import shared

from nongemm_trace import cli
from nongemm_trace.analyses import specs
from nongemm_trace.commands.args import parser
from nongemm_trace.commands.options import OPTIONS
from nongemm_trace.models import FlopsReport, LaunchReport, Report
from nongemm_trace.report import formats, registered
from nongemm_trace.report.registry import ALIASES, TERMINAL
from nongemm_trace.vocabulary import MODEL_TABLES

OUTPUTS = registered()

#: two traces the repository ships (conftest.BUNDLED): the file runs on a fresh clone too
TRACE = str(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))
OTHER = str(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"))

#: the model each command renders (analyze: one trace's report, or several traces' batch); every
#: registered analysis is a command of its name rendering its model
MODELS = {"analyze": ("report", "batch"), "compare": ("comparison",), "explain": ("explain", "weak"),
          **{s.name: (s.model,) for s in specs()}}
TABLED = {"analyze": "report", **{s.name: s.model for s in specs() if s.model in MODEL_TABLES}}

#: a command line that renders each model, the format and -o appended
ARGV = {
    "report": ["analyze", TRACE], "batch": ["analyze", TRACE, OTHER, "-q", "--workers", "1"],
    "comparison": ["compare", TRACE, OTHER], "explain": ["explain", TRACE, "aten::add"],
    "weak": ["explain", TRACE, "--weak"],
    **{s.model: [s.name, TRACE, *s.example] for s in specs()},
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _choices(p: argparse.ArgumentParser, dest: str):
    found = [a for a in p._actions if a.dest == dest]
    return tuple(found[0].choices) if found else None


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue() + err.getvalue()


def test_every_model_of_the_table_has_a_command_and_the_terminal_view():
    rendered = {o.model for o in OUTPUTS}
    assert rendered == {m for ms in MODELS.values() for m in ms} == set(ARGV)
    for model in rendered:
        assert TERMINAL in formats(model), model
    assert len({(o.model, o.format) for o in OUTPUTS}) == len(OUTPUTS), "a (model, format) registered twice"


def test_every_commands_format_choices_are_the_tables():
    subs = _subparsers()
    for command, models in MODELS.items():
        fmts = formats(*models)
        want = fmts + tuple(a for a, f in ALIASES.items() if f in fmts)
        assert _choices(subs[command], "format") == want, command
        assert subs[command].get_default("format") == TERMINAL, command
    with_format = {name for name, p in subs.items() if _choices(p, "format")}
    assert with_format == set(MODELS), "a command with --format outside the output table"


def test_table_choices_are_the_models_tables():
    subs = _subparsers()
    assert (Report.TABLES, LaunchReport.TABLES, FlopsReport.TABLES) == tuple(
        MODEL_TABLES[m] for m in ("report", "launch", "flops"))
    assert set(TABLED.values()) == set(MODEL_TABLES)
    for command, model in TABLED.items():
        assert _choices(subs[command], "table") == MODEL_TABLES[model], command
        assert subs[command].get_default("table") == MODEL_TABLES[model][0], command


def test_shared_options_are_declared_once():
    """A shared option has the same flags and settings in every command that takes it."""
    for name, p in _subparsers().items():
        for action in p._actions:
            if action.dest in OPTIONS and action.dest != "output":  # -o is required where it is the product
                flags, settings = OPTIONS[action.dest]
                assert tuple(action.option_strings) == flags, (name, action.dest)
                assert action.help == settings["help"], (name, action.dest)


@pytest.mark.parametrize("model,fmt", [(o.model, o.format) for o in OUTPUTS])
def test_every_registered_output_renders_on_a_real_trace(model, fmt, tmp_path):
    tables = MODEL_TABLES.get("report" if model == "batch" else model, (None,)) if fmt in ("csv", "parquet") \
        else (None,)
    for table in tables if model != "batch" else (None,):
        dest = tmp_path / f"{model}.{table or 'all'}.{fmt}"
        argv = ARGV[model] + ["--format", fmt] + (["--table", table] if table else [])
        takes_output = model not in ("explain", "weak")
        rc, printed = _run(argv + (["-o", str(dest)] if takes_output else []))
        assert rc == 0, printed
        if dest.is_dir():  # a batch's Parquet dataset: one part per trace and table
            assert len(list(dest.rglob("*.parquet"))) >= 2, (argv, printed)
            continue
        body = dest.read_bytes() if dest.is_file() else printed.encode()
        assert len(body) > 20, (argv, printed)


@pytest.mark.parametrize("model", ["check", "explain", "weak"])
def test_text_is_the_terminal_view_by_another_name(model):
    assert _run(ARGV[model] + ["--format", "text"]) == _run(ARGV[model] + ["--format", TERMINAL]) == _run(ARGV[model])
