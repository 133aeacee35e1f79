"""Input validation, one line naming the right file (issue #42 item 6; ../shared/fuzz/hostile-t4):
a UTF-8 byte order mark accepted on every load path; ``--workers`` at least 1 and bounded; device-spec
values finite positive numbers, refused naming the TOML; duplicate keys inside an event and GPU
activities overlapping on one stream reported as warnings with the time involved, the same on the C
path and the Python path."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest
from conftest import HOSTILE_T4, SAMPLES, hostile
from test_hostile import _one_answer

from nongemm_trace.cli import main

BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code: int, out: str, err: str, *words: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert "unexpected failure" not in lines[0] and "Traceback" not in err, lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The structure cases of ``gen_kineto.py`` (at a small scale: K7 holds 1,000 overlapping kernels)."""
    out = tmp_path_factory.mktemp("t4")
    subprocess.run([sys.executable, str(hostile("gen_kineto.py", HOSTILE_T4)), str(out), "0.05"], check=True,
                   capture_output=True, timeout=300)
    return out


# -- a byte order mark ---------------------------------------------------------------------------------

def test_a_byte_order_mark_is_accepted_on_every_load_path(generated, tmp_path, monkeypatch):
    got = _one_answer("K13-utf8-bom.json", tmp_path, monkeypatch, folder=generated)
    assert got[0] == "ok" and got[1]["activities"]["name"] == ["ampere_sgemm_128x64_tn"]


@pytest.mark.parametrize("native", ["on", "off"])
def test_a_trace_with_a_byte_order_mark_reports_as_without_it(capsys, tmp_path, monkeypatch, native):
    monkeypatch.setenv("NONGEMM_NATIVE", native)
    plain = gzip.decompress(BERT.read_bytes())
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + plain)
    packed = tmp_path / "marked.json.gz"
    packed.write_bytes(gzip.compress(b"\xef\xbb\xbf" + plain))
    want = json.loads(_run(capsys, "analyze", BERT, "--format", "json")[1])
    for path in (marked, packed):
        got = json.loads(_run(capsys, "analyze", path, "--format", "json")[1])
        assert {**got, "trace": ""} == {**want, "trace": ""}


def test_a_tensorrt_profile_and_a_stored_baseline_with_a_byte_order_mark_are_read(capsys, tmp_path):
    trt = tmp_path / "marked.profile.json"
    trt.write_bytes(b"\xef\xbb\xbf" + hostile("E1-trt-profile-extra-key.profile.json", HOSTILE_T4).read_bytes())
    code, out, _ = _run(capsys, "analyze", trt, "--format", "json")
    assert code == 0 and json.loads(out)["gpu_activities"] == 1
    base = tmp_path / "base.json"
    code, out, _ = _run(capsys, "analyze", BERT, "--format", "json")
    base.write_bytes(b"\xef\xbb\xbf" + out.encode())
    code, out, err = _run(capsys, "check", BERT, "--baseline", base, "--max-regression", "1%")
    assert code == 0 and out.startswith("ok: "), err
