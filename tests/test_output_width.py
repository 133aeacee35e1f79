"""Output that is not a terminal (a pipe, a CI log, ``-o FILE``) is whole: no table cut at 80
columns, no number or name abbreviated; ``COLUMNS`` still sets a width when asked for."""

from __future__ import annotations

import json
from pathlib import Path

from nongemm_trace import cli

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TRACE = SAMPLES / "h100__gaunernst_bert-small-uncased__1016001.json.gz"


def _us(v: float) -> str:
    return f"{v:,.1f}"


def test_piped_report_holds_every_top_row_in_full(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["analyze", str(TRACE), "--format", "json", "--top", "15"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert cli.main(["analyze", str(TRACE), "--top", "15"]) == 0
    text = capsys.readouterr().out
    assert "…" not in text
    for row in [r for r in d["ops"] if r["self_gpu_time_us"] > 0][:15]:  # the table lists ops that launched work
        assert row["op"] in text and _us(row["self_gpu_time_us"]) in text
    for row in d["kernels"][:15]:
        assert row["name"] in text and _us(row["gpu_time_us"]) in text
    assert str(TRACE) in text
    out = tmp_path / "report.txt"
    assert cli.main(["analyze", str(TRACE), "--top", "15", "-o", str(out)]) == 0
    assert all(row["name"] in out.read_text() for row in d["kernels"][:15])


def test_columns_sets_a_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["analyze", str(TRACE), "--top", "15"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 80
