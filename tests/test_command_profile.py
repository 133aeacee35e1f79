"""bench/command_profile.py (the cProfile of the whole command in docs/benchmarks.md) runs
on real traces and reports every step it names with a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, shared

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("imports before the analysis (polars, the pipeline)", "load", "link + op classification",
         "classify (kernel categories)", "per-op table", "analyze() in all", "JSON report",
         "of the load: waiting for the file's next block", "of the load: waiting for the scanning threads")


@pytest.mark.parametrize("where", ["sample", "shared"])
def test_command_profile_reports_each_step(where):
    trace = (SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz" if where == "sample"
             else shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "command_profile.py"), str(trace), "--top", "5"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{trace.name}: exit code 0,")
    times = {k: float(v) for k, v in re.findall(r"^ +(\S.*?)\s+(\d+\.\d{3}) s$", out.stdout, re.M)}
    assert set(STEPS) <= set(times), out.stdout
    assert times["imports before the analysis (polars, the pipeline)"] > 0.01  # polars was imported here
    assert 0 < times["load"] < times["analyze() in all"]
    assert times["load"] + times["link + op classification"] + times["classify (kernel categories)"] \
        <= times["analyze() in all"] + 1e-3
    assert "cumulative" in out.stdout  # cProfile's own table follows
