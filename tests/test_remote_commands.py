"""Every command reads a trace where it lives (issue #45 item 4): a URL (here ``file://``, which needs
fsspec only; tests/test_ray_cluster.py reads ``s3://`` from a local S3 server) gives the same answer as
the local path, names the URL, and leaves no fetched copy behind; a missing object is one line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from conftest import SAMPLES

from nongemm_trace.analyses import specs
from nongemm_trace.cli import main

pytest.importorskip("fsspec", reason="URLs need fsspec (pip install 'nongemm-trace[cloud]')")

TRACE = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
OTHER = SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz"
#: every registered analysis with its spec's example arguments (a new one is covered with no edit), and explain
COMMANDS = [*([s.name, *s.example] for s in specs()), ["explain", "aten::addmm"], ["explain", "--weak"]]


def _url(p: Path) -> str:
    return p.resolve().as_uri()


def _json(capsys, argv: list[str]) -> dict:
    code = main([*argv, "--format", "json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _without_names(d, names):
    """The document with every value that names the trace dropped (the URL or the local path)."""
    if isinstance(d, dict):
        return {k: _without_names(v, names) for k, v in d.items() if not (isinstance(v, str) and v in names)}
    if isinstance(d, list):
        return [_without_names(v, names) for v in d]
    return d


def _fetched_copies() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("nongemm-fetch-*")}


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_a_url_gives_the_local_answer(argv, capsys):
    before = _fetched_copies()
    cmd, *rest = argv
    local = _json(capsys, [cmd, str(TRACE), *rest])
    remote = _json(capsys, [cmd, _url(TRACE), *rest])
    names = {str(TRACE), _url(TRACE)}
    assert _without_names(remote, names) == _without_names(local, names)
    if "trace" in local:
        assert (local["trace"], remote["trace"]) == (str(TRACE), _url(TRACE))
    assert _fetched_copies() == before


def test_compare_and_the_page_read_urls(capsys, tmp_path):
    local = _json(capsys, ["compare", str(TRACE), str(OTHER)])
    remote = _json(capsys, ["compare", _url(TRACE), _url(OTHER)])
    assert remote["classes"] == local["classes"] and remote["categories"] == local["categories"]
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert main(["report", str(TRACE), str(OTHER), "-o", str(a)]) == 0
    assert main(["report", _url(TRACE), _url(OTHER), "-o", str(b)]) == 0
    assert "bert_base_fp32_bs8_s128__eager" in b.read_text()


@pytest.mark.parametrize("cmd", ["latency", "explain --weak", "compare", "report"])
def test_a_missing_object_is_one_line(cmd, capsys, tmp_path):
    missing = (tmp_path / "nope.json.gz").as_uri()
    argv = cmd.split() + [missing] + ([_url(TRACE)] if cmd in ("compare", "report") else []) + \
        (["-o", str(tmp_path / "p.html")] if cmd == "report" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"nongemm-trace: error: {missing}: no such object", err


@pytest.mark.parametrize("cmd", ["analyze", "latency", "compare"])
def test_a_file_url_input_is_never_overwritten(cmd, capsys, tmp_path):
    """``-o`` naming the file a ``file://`` URL reads is refused before any work, as its plain path is
    (the check compared the URL's text with the output and let the report replace the trace)."""
    import shutil
    trace = tmp_path / "a.json.gz"
    shutil.copy(TRACE, trace)
    before = trace.read_bytes()
    argv = [cmd, trace.as_uri(), *([str(OTHER)] if cmd == "compare" else []), "--format", "json", "-o", str(trace)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "refusing to overwrite an input" in err and "\n" not in err, err
    assert trace.read_bytes() == before


def test_compare_names_the_urls_it_was_given(capsys):
    d = _json(capsys, ["compare", _url(TRACE), _url(OTHER)])
    assert [t["trace"] for t in d["traces"]] == [_url(TRACE), _url(OTHER)]
    assert "nongemm-fetch" not in json.dumps(d)
