"""bench/command_profile.py (the cProfile of the whole command in docs/benchmarks.md) runs
on a real trace and reports every step it names with a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import SAMPLES

ROOT = Path(__file__).resolve().parent.parent


def test_command_profile_reports_each_step():
    trace = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "command_profile.py"), str(trace), "--top", "5"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    times = dict(re.findall(r"^  (\S.*?)\s+(\d+\.\d{3}) s$", out.stdout, re.M))
    for step in ("imports before the analysis (polars, the pipeline)", "load (read-ahead taken, rest streamed)",
                 "link + op classification", "classify (kernel categories)", "analyze() in all", "JSON report"):
        assert step in times, (step, out.stdout)
    assert float(times["imports before the analysis (polars, the pipeline)"]) > 0.01  # polars was imported here
    assert 0 < float(times["load (read-ahead taken, rest streamed)"]) < float(times["analyze() in all"])
    assert "cumulative" in out.stdout  # cProfile's own table follows
