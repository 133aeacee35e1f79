"""A gate never passes a trace that lost its GPU work (issue #42 item 5; ../shared/fuzz/hostile-t4).

E2 (``{"traceEvents":[]}``) checked against a baseline with 12.8 ms of GPU time printed "ok … within
every limit": its GPU time had fallen by 100 %. Now a baseline gate (``check --baseline``, the pytest
fixture and marker, the training callbacks' gates) fails a trace with no GPU activity, or with fewer
GPU activities per step than ``--min-activities`` (default 25 %) of its baseline's, with one line.
E1: TensorRT profiles whose first object has one more key, or a count written as a float, were
sniffed as empty Kineto traces; they are told by their structure now, and a JSON array no format
claims is refused naming the file."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import HOSTILE_T4, SAMPLES, hostile

from nongemm_trace.analyses.check import MIN_ACTIVITIES, check
from nongemm_trace.cli import main
from nongemm_trace.errors import OptionError
from nongemm_trace.load import formats, load_trace

BASE = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"  # 308 GPU activities in 2 steps, 12.8 ms


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _fails_on_activities(code: int, out: str, *words: str) -> str:
    """``check`` exit 1 with exactly one FAIL line, the floor's, saying ``words`` (every other gate is
    listed too, with its value: a GPU time that fell with the work passes its own gate)."""
    lines = out.strip().splitlines()
    failed = [ln for ln in lines if ln.startswith("FAIL")]
    assert code == 1 and len(failed) == 1 and failed[0].startswith("FAIL min-activities: "), out
    assert all(ln.startswith(("FAIL ", "ok ")) for ln in lines), out
    for w in words:
        assert w in failed[0], failed[0]
    return failed[0]


@pytest.fixture(scope="module")
def stored_base(tmp_path_factory):
    path = tmp_path_factory.mktemp("base") / "base.json"
    assert main(["analyze", str(BASE), "--format", "json", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def thinned(tmp_path_factory):
    """The baseline's trace with nine GPU activities in ten left out (its steps and ops kept)."""
    doc = json.loads(gzip.decompress(BASE.read_bytes()))
    kept, n = [], 0
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            n += 1
            if n % 10:
                continue
        kept.append(e)
    doc["traceEvents"] = kept
    path = tmp_path_factory.mktemp("thin") / "thinned.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("stored", [False, True], ids=["baseline trace", "stored baseline"])
def test_an_empty_trace_fails_a_regression_gate_in_one_line(capsys, stored, stored_base):
    empty = hostile("E2-empty-events.json", HOSTILE_T4)
    base = stored_base if stored else BASE
    for limit in (["--max-regression", "10%"], ["--max-category-regression", "gemm=10%"]):
        code, out, err = _run(capsys, "check", empty, "--baseline", base, *limit)
        _fails_on_activities(code, out, "no GPU activity", "154.0 per step")
        assert "FAIL min-activities" in out and err == ""
    code, out, _ = _run(capsys, "check", empty, "--baseline", base, "--max-regression", "10%", "--format", "json")
    verdict = json.loads(out)
    assert code == 1 and verdict["ok"] is False and [v["limit"] for v in verdict["violations"]] == ["min-activities"]


def test_a_trace_with_a_tenth_of_its_baseline_s_activities_fails_below_the_floor(capsys, thinned, stored_base):
    for base in (BASE, stored_base):
        code, out, _ = _run(capsys, "check", thinned, "--baseline", base, "--max-regression", "10%")
        _fails_on_activities(code, out, "fell to 15.0 from the baseline's 154.0", "below the floor of 25.0 %")
    # a floor stated lower lets it through (its GPU time fell: no regression)
    code, out, _ = _run(capsys, "check", thinned, "--baseline", BASE, "--max-regression", "10%",
                        "--min-activities", "5%")
    assert code == 0 and out.startswith("ok: "), out
    # the same trace against itself is at 100 % of its activities
    code, out, _ = _run(capsys, "check", BASE, "--baseline", BASE, "--max-regression", "10%")
    assert code == 0 and out.startswith("ok: "), out


def test_no_floor_turns_off_the_empty_trace_check(capsys):
    empty = hostile("E2-empty-events.json", HOSTILE_T4)
    code, out, _ = _run(capsys, "check", empty, "--baseline", BASE, "--max-regression", "10%", "--min-activities", "0")
    _fails_on_activities(code, out, "no GPU activity")
    # both without GPU activity: nothing to compare, the gate fails too
    code, out, _ = _run(capsys, "check", empty, "--baseline", empty, "--max-regression", "10%")
    _fails_on_activities(code, out, "nor does its baseline")


@pytest.mark.parametrize("value", ["150%", "-1%", "nan", "abc"])
def test_a_floor_that_is_no_share_is_refused_in_one_line(capsys, value):
    code, out, err = _run(capsys, "check", BASE, "--baseline", BASE, "--max-regression", "10%",
                          f"--min-activities={value}")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "--min-activities" in lines[0], err
    assert "unexpected failure" not in lines[0]


@pytest.mark.parametrize("value", [-1, "308", 1.5, True, None])
def test_a_stored_baseline_without_a_count_of_activities_is_refused(capsys, tmp_path, stored_base, value):
    d = json.loads(stored_base.read_text())
    d["gpu_activities"] = value
    base = tmp_path / "edited.json"
    base.write_text(json.dumps(d))
    code, out, err = _run(capsys, "check", BASE, "--baseline", base, "--max-regression", "10%")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert str(base) in lines[0] and "gpu_activities is" in lines[0] and "not a count" in lines[0]


def test_the_library_and_the_training_gates_fail_the_same_way():
    from nongemm_trace.integrations.gates import Gates
    from nongemm_trace.pipeline.analysis import Analysis

    empty = hostile("E2-empty-events.json", HOSTILE_T4)
    violations = check(empty, baseline=BASE, max_regression=0.1).violations
    assert [v.limit for v in violations] == ["min-activities"] and violations[0].allowed == MIN_ACTIVITIES
    with pytest.raises(OptionError, match="min_activities is 2"):
        check(BASE, baseline=BASE, max_regression=0.1, min_activities=2)
    gates = Gates(max_regression="10%", baseline=str(BASE), on_violation="warn", min_activities="30%")
    assert not Gates(min_activities="30%").any  # a floor alone is no limit
    analysis = Analysis(empty)
    with pytest.warns(UserWarning, match="no GPU activity"):
        got = gates.apply(analysis)
    assert [v.limit for v in got] == ["min-activities"] and got[0].allowed == 0.3
    with pytest.raises(OptionError, match="not a share between 0 and 1"):
        Gates(max_regression=0.1, baseline=str(BASE), min_activities=1.5).validate(analysis.taxonomy)


# -- sniffing by structure ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, layers, layer_ms", [("E1-trt-profile-extra-key.profile.json", 1, 5000.0),
                                                   ("E1-trt-profile-count-float.profile.json", 2, 1.0)])
def test_a_tensorrt_profile_is_told_by_its_structure(name, layers, layer_ms, monkeypatch):
    path = hostile(name, HOSTILE_T4)
    assert formats.sniff(path.read_bytes()[:formats.SNIFF_BYTES], str(path)) == "tensorrt"
    for native in ("on", "off"):
        monkeypatch.setenv("NONGEMM_NATIVE", native)
        trace = load_trace(path)
        assert trace.source_format == "tensorrt" and trace.activities.height == layers
        assert trace.activities["dur_ns"].sum() == round(layer_ms * 1e6)


def test_a_count_that_is_no_whole_number_is_warned_about(capsys):
    path = hostile("E1-trt-profile-count-float.profile.json", HOSTILE_T4)
    code, out, _ = _run(capsys, "analyze", path, "--format", "json")
    warnings = {w["code"]: w["message"] for w in json.loads(out)["warnings"]}
    assert code == 0 and "count 5e-324 is not a whole number of inferences" in warnings["bad_inference_count"]


def test_a_tensorrt_profile_fails_a_gate_against_a_kineto_baseline_with_its_own_numbers(capsys):
    path = hostile("E1-trt-profile-extra-key.profile.json", HOSTILE_T4)
    code, out, _ = _run(capsys, "check", path, "--baseline", BASE, "--max-regression", "10%")
    assert code == 1 and "FAIL min-activities" in out
    assert "FAIL min-activities: GPU activities per step fell to 1.0" in out
    assert "(6,404.7 -> 5,000,000.0 us)" in out  # 5 s of layer time read, not 0


@pytest.mark.parametrize("text, what", [
    (b"[1, 2, 3]", "a number"),
    (b'[{"foo": 1, "bar": [1]}, {"ph": "X"}]', 'an object with the keys "foo", "bar"'),
    (b'[["count", 1]]', "an array"),
    (b'\xef\xbb\xbf["name"]', "a string"),
])
def test_a_json_array_of_no_known_format_is_refused_by_name(capsys, tmp_path, text, what):
    path = tmp_path / "unknown.json"
    for data in (text, gzip.compress(text)):
        path.write_bytes(data)
        code, out, err = _run(capsys, "analyze", path)
        lines = err.strip().splitlines()
        assert code == 2 and out == "" and len(lines) == 1, err
        assert str(path) in lines[0] and f"is a JSON array whose first item is {what}" in lines[0]
        assert "not a format this tool reads" in lines[0]


@pytest.mark.parametrize("head, fmt", [
    (b"[]", "kineto"),  # Chrome's array format with no events
    (b'[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]', "kineto"),
    (b'[{"count": 50}, {"name": "l", "timeMs": 1.0}]', "tensorrt"),
    (b'[{"count": 50.0, "extra": {"a": [1]}}]', "tensorrt"),
    (b'[{"cat": "Session", "pid": 1, "tid": 1, "dur": 1, "ts": 1, "ph": "X", "name": "model_run"}]', "onnxruntime"),
    (b'[{"ph": "X", "args": {"x": "' + b"y" * (70 << 10) + b'"}}]', "kineto"),  # first item past the head
])
def test_arrays_go_to_the_format_their_first_item_says(head, fmt):
    assert formats.sniff(head, "t.json") == fmt
