"""Details a pipeline user meets: CSV microseconds without float noise, a clear message when pandas is
missing, ``explain`` naming activities without a launching op as such."""

from __future__ import annotations

import csv
import io
import re
import sys

import pytest
from conftest import shared
from test_output_width import TRACE

import nongemm_trace
from nongemm_trace import cli


def test_csv_microseconds_have_at_most_three_decimals(capsys):
    for table in ("categories", "ops", "kernels"):
        assert cli.main(["analyze", str(TRACE), "--format", "csv", "--table", table]) == 0
        rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
        us_cols = [c for c in rows[0] if c.endswith("_us")]
        assert us_cols
        for r in rows:
            for c in us_cols:
                assert re.fullmatch(r"-?\d+(\.\d{1,3})?", r[c]), (table, c, r[c])


def test_to_pandas_without_pandas_says_what_to_install(monkeypatch):
    rep = nongemm_trace.analyze(TRACE)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"nongemm-trace\[pandas\]"):
        rep.to_pandas()


def test_explain_names_activities_without_a_launching_op(capsys):
    path = shared("external2", "kineto", "tracelens__mi210__gpu_only_trace__gpu_only_trace.json.gz")
    assert cli.main(["explain", str(path), "Cijk"]) == 0
    out = capsys.readouterr().out
    assert "op None" not in out and "no launching op" in out


def test_top_ops_table_lists_ops_that_launched_work(capsys):
    sample = TRACE.parent / "bert_base_fp32_bs8_s128__eager.json.gz"
    assert cli.main(["analyze", str(sample), "--top", "40"]) == 0
    out = capsys.readouterr().out
    ops_table = out.split("ops by self GPU time", 1)[1].split("kernels by GPU time", 1)[0]
    assert "## step ##" not in ops_table and "aten::addmm" in ops_table


def test_every_subcommand_argument_has_help_text():
    import argparse

    from nongemm_trace.commands.args import parser

    subs = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = {name: [x.option_strings or [x.dest] for x in sp._actions if not x.help]
               for name, sp in subs.choices.items()}
    assert not {k: v for k, v in missing.items() if v}


def test_every_option_the_readme_lists_is_accepted():
    """The README's command list (COMMON expanded) names only options its subcommand takes."""
    import argparse
    from pathlib import Path

    from nongemm_trace.commands.args import parser

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = text.split("## Command line", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    common = re.findall(r"--[a-z][a-z-]*", next(ln for ln in block.splitlines() if ln.startswith("# COMMON")))
    listed: dict[str, set[str]] = {}
    command = None
    for line in block.splitlines():
        m = re.match(r"nongemm-trace (\w+)", line)
        if m:
            command = m.group(1)
        elif line.startswith("#"):
            continue
        if command:
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
            listed.setdefault(command, set()).update(re.findall(r"(?<![\w-])--[a-z][a-z-]*", code))
            if "[COMMON]" in code:
                listed[command].update(common)
    subs = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(listed) >= {"analyze", "launch", "compare", "check", "flops", "explain", "annotate"}
    unknown = {cmd: sorted(opts - {o for a in subs.choices[cmd]._actions for o in a.option_strings})
               for cmd, opts in listed.items()}
    assert not {k: v for k, v in unknown.items() if v}, unknown
