"""Progress and logs (issue #43 item 3): every command reports on stderr while it runs (plain lines
off a terminal, every NONGEMM_PROGRESS_S seconds), ``--quiet``/``--verbose`` on every subcommand, the
package logs under ``nongemm_trace`` and is silent for a library user; an unknown option shows the
subcommand's usage."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLES

from nongemm_trace.commands import COMMANDS
from nongemm_trace.commands.args import parser

BERT = str(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz")


def _cli(*argv: str, period: str = "inf") -> subprocess.CompletedProcess:
    env = {**os.environ, "NONGEMM_PROGRESS_S": period}
    return subprocess.run([sys.executable, "-m", "nongemm_trace", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)


def test_off_a_terminal_progress_comes_as_periodic_plain_lines_on_stderr():
    quiet_out = _cli("latency", BERT).stdout
    done = _cli("latency", BERT, period="0.05")
    assert done.returncode == 0
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("nongemm-trace latency: ")]
    assert len(lines) >= 2, done.stderr
    assert any("bert_base_fp32_bs8_s128__eager.json.gz" in ln for ln in lines)
    assert "\x1b" not in done.stderr  # no bar, no escape sequences off a terminal
    assert done.stdout == quiet_out  # stdout stays the report's


def test_quiet_silences_and_verbose_logs_each_stage():
    quiet = _cli("launch", BERT, "--quiet", period="0.05")
    assert quiet.returncode == 0 and quiet.stderr == ""
    verbose = _cli("launch", BERT, "--verbose")
    stages = [ln for ln in verbose.stderr.splitlines() if ln.startswith("nongemm-trace: [")]
    assert any("reading bert_base" in ln for ln in stages) and any("linking and classifying" in ln for ln in stages)


def test_every_subcommand_takes_quiet_and_verbose():
    sub = next(a for a in parser()._actions if a.dest == "command")
    for command in COMMANDS:
        flags = {s for a in sub.choices[command.name]._actions for s in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose"} <= flags, command.name


def test_an_unknown_option_shows_the_subcommands_usage():
    done = _cli("launch", BERT, "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: nongemm-trace launch ")
    assert done.stderr.rstrip().endswith("nongemm-trace launch: error: unrecognized arguments: --bogus")


def test_the_library_logs_under_its_name_and_is_silent_by_default(caplog):
    code = ("import nongemm_trace, logging\n"
            "assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger('nongemm_trace').handlers)\n"
            f"nongemm_trace.analyze({BERT!r})\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    import nongemm_trace

    with caplog.at_level(logging.INFO, logger="nongemm_trace"):
        nongemm_trace.Analysis(BERT).report()
    assert [r.name for r in caplog.records if "reading" in r.getMessage()] == ["nongemm_trace"]


@pytest.mark.parametrize("value, expected", [("inf", float("inf")), ("2", 2.0), ("0", 5.0), ("x", 5.0)])
def test_the_period_is_read_from_the_environment(monkeypatch, value, expected):
    from nongemm_trace.commands.progress import period_s

    monkeypatch.setenv("NONGEMM_PROGRESS_S", value)
    assert period_s() == expected
