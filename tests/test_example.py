"""``nongemm-trace analyze --example``: a real trace ships inside the package (package data), so the
first command works from a plain ``pip install``."""

from __future__ import annotations

import json
from pathlib import Path

from nongemm_trace import cli
from nongemm_trace.examples import EXAMPLE, example_trace

ROOT = Path(__file__).resolve().parent.parent


def test_example_is_package_data_and_analyzes(capsys):
    path = example_trace()
    assert path.is_file() and path.name == EXAMPLE
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"examples/*.json.gz"' in pyproject  # shipped in the wheel
    assert cli.main(["analyze", "--example", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpu_activities"] == 308 and len(d["steps"]) == 2


def test_analyze_without_a_trace_says_so(capsys):
    assert cli.main(["analyze"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--example" in err[0]
