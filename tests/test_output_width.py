"""Output that is not a terminal (a pipe, a CI log, ``-o FILE``) is a log a person reads: every
line at most :data:`~nongemm_trace.report.output.LOG_WIDTH` columns, long names shortened in the
middle (the full names stay in JSON and CSV), no number cut, no trailing blanks; ``COLUMNS``
still sets a width when asked for."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import shared

from nongemm_trace import cli
from nongemm_trace.analyses import specs
from nongemm_trace.report.names import shorten_apart
from nongemm_trace.report.output import LOG_WIDTH

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TRACE = SAMPLES / "h100__gaunernst_bert-small-uncased__1016001.json.gz"
BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def _us(v: float) -> str:
    return f"{v:,.1f}"


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_piped_report_fits_a_log_and_json_csv_keep_full_names(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["analyze", str(TRACE), "--format", "json", "--top", "15"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert cli.main(["analyze", str(TRACE), "--top", "15"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in _lines(text)) <= LOG_WIDTH
    assert all(line == line.rstrip() for line in _lines(text))  # no title padded with blanks
    ops = [r for r in d["ops"] if r["self_gpu_time_us"] > 0][:15]  # the table lists ops that launched work
    for row, name in zip(ops, shorten_apart([r["op"] for r in ops])):
        assert name in text and _us(row["self_gpu_time_us"]) in text
    long = [row["name"] for row in d["kernels"][:15] if len(row["name"]) > 60]
    assert long  # the test needs names to shorten
    kernels = d["kernels"][:15]  # names that shorten alike keep where they differ (report/names.py)
    for row, name in zip(kernels, shorten_apart([r["name"] for r in kernels])):
        assert name in text and _us(row["gpu_time_us"]) in text
    assert str(TRACE) in text
    assert cli.main(["analyze", str(TRACE), "--format", "csv", "--table", "kernels"]) == 0
    names = {r["name"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert set(long) <= names  # CSV: whole
    out = tmp_path / "report.txt"
    assert cli.main(["analyze", str(TRACE), "--top", "15", "-o", str(out)]) == 0
    written = out.read_text()
    assert all(name in written for name in shorten_apart([r["name"] for r in kernels]))
    assert max(len(line) for line in _lines(written)) <= LOG_WIDTH


def _h200(name: str) -> tuple[str, ...]:
    return ("h200", name)


#: each command on traces with long names (Triton, C++ templates), ranks, a deployment stack (every
#: registered analysis with its spec's example arguments); a tuple is a path under the shared traces
COMMANDS = [
    ["analyze", BERT], ["analyze", BERT, "--metric", "cpu"], *([s.name, BERT, *s.example] for s in specs()),
    ["explain", BERT, "--weak"], ["explain", BERT, "void"],
    ["compare", _h200("bert_base_fp32_bs8_s128__eager.json.gz"), _h200("bert_base_fp32_bs8_s128__compiled.json.gz")],
    ["compare", _h200("resnet50_fp32_bs8__eager.json.gz"), _h200("resnet50_fp32_bs8__compiled.json.gz")],
    ["analyze", ("external", "tracelens", "h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")],
    ["explain", ("external", "hta", "trace_diff__test__test.json.gz"), "--weak"],
    ["analyze", ("h200x2", "bert_ddp_train_rank0.json.gz"), ("h200x2", "bert_ddp_train_rank1.json.gz")],
    ["analyze",
     ("external2", "tensorrt", "trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json")],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(x[-1] if isinstance(x, tuple) else Path(str(x)).name
                                                                   for x in a))
def test_every_command_fits_a_log(argv, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main([str(shared(*a) if isinstance(a, tuple) else a) for a in argv]) == 0
    out = capsys.readouterr().out
    wide = [line for line in _lines(out) if len(line) > LOG_WIDTH]
    assert not wide, wide[0]


def test_columns_sets_a_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["analyze", str(TRACE), "--top", "15"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 80
