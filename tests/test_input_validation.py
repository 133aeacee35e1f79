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


# -- --workers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-5", "100000"])
def test_workers_out_of_bounds_are_refused_in_one_line(capsys, value):
    for traces in ([BERT], [BERT, BERT]):
        code, out, err = _run(capsys, "analyze", *traces, f"--workers={value}")
        _one_line(code, out, err, "--workers", value if value != "100000" else "100,000")


def test_workers_are_bounded_by_the_cpus_and_the_traces(monkeypatch):
    from nongemm_trace.errors import OptionError
    from nongemm_trace.runs import batch_workers
    from nongemm_trace.runs.batch import run_batch

    monkeypatch.setattr(batch_workers, "available_cpus", lambda: 4)
    assert batch_workers.bounded_workers(None, 100) == 4 and batch_workers.bounded_workers(None, 3) == 3
    assert batch_workers.bounded_workers(8, 100) == 8 and batch_workers.bounded_workers(8, 2) == 2
    for bad in (9, 0, -5, 2.5, True):
        with pytest.raises(OptionError, match="workers"):
            batch_workers.bounded_workers(bad, 10)
    with pytest.raises(OptionError, match="at most 8"):
        run_batch([str(BERT)], {}, workers=100_000)


# -- --device-spec ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, words", [
    ("dev-0.toml", "memory_tbps is 0, not a finite number of TB/s above 0"),
    ("dev--1.toml", "memory_tbps is -1"),
    ("dev-nan.toml", "memory_tbps is 'nan'"),
    ("dev-inf.toml", "memory_tbps is inf"),
    ("dev-abc.toml", "memory_tbps is 'abc'"),
    ("dev-1.toml", "memory_tbps is [1]"),
    ("dev-true.toml", "memory_tbps is True"),
    ("dev-1e308.toml", "memory_tbps is 1e+308"),
    ("dev-notatable.toml", "device X is 5, not a table"),
])
def test_a_device_spec_that_is_no_finite_positive_peak_is_refused_naming_the_toml(capsys, name, words):
    spec = hostile(f"U-device-spec/{name}", HOSTILE_T4)
    code, out, err = _run(capsys, "flops", BERT, "--device-spec", spec)
    line = _one_line(code, out, err, f"{spec}: ", words)
    assert str(BERT) not in line  # the TOML is at fault, not the trace


def test_each_peak_of_a_device_spec_is_checked(capsys, tmp_path):
    spec = tmp_path / "spec.toml"
    for body, words in (('[devices.X]\nbf16 = 1\nfp8 = nan\nmemory_tbps = 1\n', "fp8 is nan"),
                        ('[devices.X]\nbf16 = 1\nmemory_tbps = 1\nmatch = "H100"\n', "match is 'H100'"),
                        ("devices = 5\n", "'devices' is 5"),
                        ("[devices.X]\nbf16 = 1\n", "needs memory_tbps")):
        spec.write_text(body)
        code, out, err = _run(capsys, "flops", BERT, "--device-spec", spec)
        _one_line(code, out, err, f"{spec}: ", words)
    spec.write_bytes(b"\xff\xfe[devices.X]")
    _one_line(*_run(capsys, "flops", BERT, "--device-spec", spec), f"{spec}: ", "not UTF-8")
    _one_line(*_run(capsys, "flops", BERT, "--device-spec", tmp_path / "none.toml"), "none.toml: cannot read")
    # a valid spec still works, and the shipped table passes its own checks
    spec.write_text('[devices.X]\nbf16 = 1000\nmemory_tbps = 3.5\n')
    code, out, _ = _run(capsys, "flops", BERT, "--device-spec", spec)
    assert code == 0 and "device peaks: X — bf16 1000 TFLOP/s, memory 3.5 TB/s" in out
