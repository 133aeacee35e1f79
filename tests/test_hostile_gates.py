"""Hostile inputs of ../shared/fuzz/hostile that would give a wrong number: baselines that turn a
regression gate off (S12: negative times; also NaN, infinite, ill-typed values and categories that
do not add up), and in-range durations whose int64 sum wraps negative (S5: Kineto and TensorRT).
Each is refused in one line naming the file and the problem, never a pass or a negative total."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, hostile

from nongemm_trace.cli import main

EAGER = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str, *words: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "unexpected failure" not in lines[0], err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name, field", [("S12-baseline-negative.json", "gpu_time_us is -1.0"),
                                         ("S12-baseline-category-negative.json",
                                          "gpu_time_us of category 'gemm' is -5.0")])
def test_a_baseline_with_negative_times_is_refused_by_check(capsys, name, field):
    base = hostile(name)
    for limit in (["--max-regression", "5%"], ["--max-category-regression", "gemm=5%"]):
        code, out, err = _run(capsys, "check", EAGER, "--baseline", base, *limit)
        assert code == 2 and out == ""
        _one_line(err, str(base), field)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A real baseline: the sample's report as ``analyze --format json`` writes it."""
    path = tmp_path_factory.mktemp("base") / "base.json"
    assert main(["analyze", str(EAGER), "--format", "json", "-o", str(path)]) == 0
    return json.loads(path.read_text())


def _edit(stored, tmp_path, edit) -> str:
    d = json.loads(json.dumps(stored))
    edit(d)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(d))  # json writes NaN and Infinity as the literals Python's json reads back
    return str(path)


def _gemm(d):
    return next(c for c in d["categories"] if c["category"] == "gemm")


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(gpu_time_us=float("nan")), ["gpu_time_us is nan"]),
    (lambda d: d.update(gpu_time_us=float("inf")), ["gpu_time_us is inf"]),
    (lambda d: d.update(gpu_time_us=1e300), ["gpu_time_us is 1e+300", "292 years"]),
    (lambda d: d.update(gpu_time_us="12809.306"), ["gpu_time_us is '12809.306', not a number"]),
    (lambda d: d.update(gpu_time_us=True), ["gpu_time_us is True, not a number"]),
    (lambda d: _gemm(d).update(gpu_time_us=float("nan")), ["category 'gemm' is nan"]),
    (lambda d: _gemm(d).update(gpu_time_us=None), ["category 'gemm' is None, not a number"]),
    (lambda d: _gemm(d).update(gpu_time_us=_gemm(d)["gpu_time_us"] * 10), ["categories sum to", "not its gpu_time_us"]),
    (lambda d: d["categories"].append({"gpu_time_us": 0.0}), ["has no category name"]),
    (lambda d: d.update(steps="## step ##"), ["no categories and steps lists"]),
    (lambda d: d.update(categories={"gemm": 1.0}), ["no categories and steps lists"]),
])
def test_a_baseline_with_a_value_that_could_turn_the_gate_off_is_refused(capsys, tmp_path, stored, edit, words):
    base = _edit(stored, tmp_path, edit)
    code, out, err = _run(capsys, "check", EAGER, "--baseline", base, "--max-regression", "5%")
    assert code == 2 and out == ""
    _one_line(err, base, *words)


def test_a_valid_baseline_still_gates(capsys, tmp_path, stored):
    code, out, err = _run(capsys, "check", EAGER, "--baseline", _edit(stored, tmp_path, lambda d: None),
                          "--max-regression", "1%")
    assert code == 0 and out.startswith("ok: "), err
    half = lambda d: [c.update(gpu_time_us=round(c["gpu_time_us"] / 2, 3)) for c in d["categories"]] and \
        d.update(gpu_time_us=round(sum(c["gpu_time_us"] for c in d["categories"]), 3))  # noqa: E731
    code, out, err = _run(capsys, "check", EAGER, "--baseline", _edit(stored, tmp_path, half), "--max-regression",
                          "10%")
    assert code == 1 and "GPU time per step rose 100.0 %" in out, err


def test_a_baseline_without_gpu_time_gates_any_gpu_time(capsys, tmp_path, stored):
    """From no GPU time at all, any GPU time is a rise (it was a change of 0 %, a gate that never fired)."""
    def empty(d):
        d["gpu_time_us"] = 0.0
        for c in d["categories"]:
            c["gpu_time_us"] = 0.0
    code, out, err = _run(capsys, "check", EAGER, "--baseline", _edit(stored, tmp_path, empty), "--max-regression",
                          "10%")
    assert code == 1 and "FAIL max-regression: GPU time per step appeared (0.0 -> 6,404.7 us)" in out, err


@pytest.mark.parametrize("limit", [["--max-regression", "nan"], ["--max-regression", "inf"],
                                   ["--max-category-regression", "gemm=nan"]])
def test_a_regression_limit_that_never_fires_is_refused(capsys, limit):
    code, out, err = _run(capsys, "check", EAGER, "--baseline", EAGER, *limit)
    assert code == 2 and out == ""
    _one_line(err, "not a finite fraction")


@pytest.mark.parametrize("name, chunks", [("S5-int64-sum-wrap-kineto.json", ("", "256")),
                                          ("S5-int64-sum-wrap-tensorrt.profile.json", ("",))])
@pytest.mark.parametrize("native", ["on", "off"])
def test_durations_whose_sum_wraps_int64_are_refused(capsys, monkeypatch, name, chunks, native):
    path = hostile(name)
    monkeypatch.setenv("NONGEMM_NATIVE", native)
    for chunk in chunks:
        if chunk:
            monkeypatch.setenv("NONGEMM_CHUNK_BYTES", chunk)
        for fmt in ("json", "table"):
            code, out, err = _run(capsys, "analyze", path, "--format", fmt)
            assert code == 2 and out == ""
            _one_line(err, str(path), "add up to", "years", "more than int64 nanoseconds can sum")


def test_one_long_activity_in_range_still_reports(capsys, tmp_path):
    """The limit is on the sum, not on one time: one kernel of 3,999,999,999,999,999 us (Kineto's largest
    duration) is within it and reported exactly."""
    doc = json.loads(hostile("S5-int64-sum-wrap-kineto.json").read_text())
    doc["traceEvents"] = doc["traceEvents"][:1]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(doc))
    code, out, err = _run(capsys, "analyze", path, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["gpu_time_us"] == 3999999999999999.0
