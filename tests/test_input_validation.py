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
    _one_line(*_run(capsys, "flops", BERT, "--device-spec", tmp_path / "none.toml"), "none.toml: no such file")
    # a valid spec still works, and the shipped table passes its own checks
    spec.write_text('[devices.X]\nbf16 = 1000\nmemory_tbps = 3.5\n')
    code, out, _ = _run(capsys, "flops", BERT, "--device-spec", spec)
    assert code == 0 and "device peaks: X — bf16 1000 TFLOP/s, memory 3.5 TB/s" in out


# -- keys written twice inside an event ------------------------------------------------------------------

def _warning(got, code: str):
    found = [(n, msg) for c, n, msg in got[3] if c == code]
    assert len(found) == 1, got[3]
    return found[0]


def test_a_duplicate_key_hiding_a_kernel_is_read_last_wins_and_warned_on_every_path(generated, tmp_path,
                                                                                     monkeypatch):
    """K14: a kernel event with a second ``"cat": "cpu_op"``, a second ``dur`` (5 us -> 5 s) and a second
    ``correlation``: read as JSON parsers read it (an op of 5 s), the same on every load path, and said."""
    got = _one_answer("K14-duplicate-keys.json", tmp_path, monkeypatch, folder=generated)
    assert got[0] == "ok" and got[1]["activities"]["name"] == [] and got[1]["ops"]["dur_ns"] == [5_000_000_000]
    n, msg = _warning(got, "duplicate_keys")
    assert n == 1 and "(args.correlation, cat, dur)" in msg and "last value, as JSON parsers do" in msg
    assert "5,000,000.0 us of event time" in msg


def _doc(events: list[str]) -> str:
    return '{"traceEvents": [' + ",\n".join(events) + "]}"


KERNEL = ('{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 5, '
          '"args": {"correlation": %d, "stream": 7, "device": 0}}')


@pytest.mark.parametrize("dup, keys", [
    ('"c\\u0061t": "cpu_op"', "cat"),  # an escaped spelling of the same key
    ('"dur" : 7', "dur"),  # a space before the colon
    ('"args": {"stream": 9, "stream": 3}', "args, args.stream"),
])
def test_other_spellings_of_a_repeated_key_are_found_on_every_path(tmp_path, monkeypatch, dup, keys):
    events = [KERNEL % (i, 100 + 10 * i, i) for i in range(60)]
    events[30] = events[30][:-1] + ", " + dup + "}"
    (tmp_path / "dup.json").write_text(_doc(events))
    got = _one_answer("dup.json", tmp_path, monkeypatch, folder=tmp_path)
    n, msg = _warning(got, "duplicate_keys")
    assert n == 1 and f"({keys})" in msg


def test_metadata_names_and_real_traces_are_no_duplicate_keys(tmp_path, monkeypatch):
    events = [KERNEL % (i, 100 + 10 * i, i) for i in range(40)]
    events += ['{"name": "process_name", "ph": "M", "pid": %d, "tid": 0, "args": {"name": "python3"}}' % i  # noqa: UP031
               for i in range(40)]
    (tmp_path / "meta.json").write_text(_doc(events))
    got = _one_answer("meta.json", tmp_path, monkeypatch, folder=tmp_path)
    assert got[0] == "ok" and not [c for c, _, _ in got[3] if c == "duplicate_keys"]
    from nongemm_trace.load import load_trace

    for native in ("on", "off"):
        monkeypatch.setenv("NONGEMM_NATIVE", native)
        assert not [a for a in load_trace(BERT).anomalies if a.code in ("duplicate_keys", "stream_overlap")]


# -- activities overlapping on one stream -----------------------------------------------------------------

@pytest.mark.parametrize("native", ["on", "off"])
def test_kernels_overlapping_on_one_stream_are_warned_with_the_time(capsys, generated, monkeypatch, native):
    """K7: 1,000 kernels of 1 s each, 1 ns apart on one stream (and 1,000 of 0 s): 1,000 s of GPU time in
    a trace of about 1 s. The sum stays what the file says; the warning says how much of it overlaps."""
    monkeypatch.setenv("NONGEMM_NATIVE", native)
    code, out, _ = _run(capsys, "analyze", generated / "K7-overlapping-kernels-dur0.json.gz", "--format", "json")
    d = json.loads(out)
    warned = [w for w in d["warnings"] if w["code"] == "stream_overlap"]
    assert code == 0 and d["gpu_time_us"] == 1_000_000_000.0 and len(warned) == 1
    assert warned[0]["count"] == 999
    assert "999.0 s of 1,000.0 s of their time overlaps" in warned[0]["message"]
    assert "device 0 stream 7: 999.0 s of its 1,000.0 s" in warned[0]["message"]


def test_an_overlap_of_a_few_percent_is_not_warned_and_one_above_is():
    import polars as pl

    from nongemm_trace.load.stream_overlap import OVERLAP_SHARE, stream_overlaps

    # ten 1 us kernels per stream; stream 1's second starts 0.4 us early, stream 2's 0.6 us (4 % and 6 %)
    rows = [(s, i * 1000 - (early if i == 1 else 0)) for s, early in ((1, 400), (2, 600)) for i in range(10)]
    acts = pl.DataFrame({"device": [0] * 20, "stream": [s for s, _ in rows], "ts_ns": [t for _, t in rows],
                         "dur_ns": [1000] * 20}).with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns"))
    per = stream_overlaps(acts)
    assert per.select("stream", "overlap_ns", "activities").rows() == [(1, 400, 1), (2, 600, 1)]
    assert per.filter(pl.col("overlap_ns") > OVERLAP_SHARE * pl.col("dur_ns"))["stream"].to_list() == [2]
