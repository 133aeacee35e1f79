"""The surfaces no audit had tried (issue #42 item 7), each tried and bounded: a file that grows or is
deleted while it is read, int64 edges in Nsight Systems SQLite columns, hostile arguments of the
pytest marker, a hostile ``--layer-info``, and a Ray task over its memory."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys

import pytest
from conftest import SAMPLES, shared
from test_hostile_inputs import judge
from test_hostile_t4 import run_measured as run_cli

from nongemm_trace.core.reader import open_input
from nongemm_trace.load.source import iter_blocks

pytest_plugins = ["pytester"]

DOC = (b'{"traceEvents":[' + b",".join(
    b'{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":%d,"dur":2,"args":{}}' % i
    for i in range(2000)) + b"]}")


def test_a_file_that_grows_while_read_is_read_to_its_size_at_open(tmp_path):
    """A trace still being written ends where it ended when it was opened: never read forever."""
    path = tmp_path / "growing.json"
    path.write_bytes(DOC)
    with open_input(path) as f:
        head = f.read(100)
        with open(path, "ab") as more:
            more.write(b" garbage" * 100_000)
        assert head + f.read_all() == DOC
    path.write_bytes(DOC)
    blocks = iter_blocks(path, block=4096, capped=False)
    first = next(blocks)
    with open(path, "ab") as more:
        more.write(b"x" * 1_000_000)
    assert first + b"".join(blocks) == DOC


def test_a_file_deleted_while_read_is_read_whole(tmp_path):
    """The open file keeps its data: a trace deleted (or replaced) during its read gives its report."""
    path = tmp_path / "deleted.json.gz"
    path.write_bytes(gzip.compress(DOC))
    blocks = iter_blocks(path, block=4096, capped=False)
    first = next(blocks)
    path.unlink()
    path.write_bytes(b"another file under the name")
    assert first + b"".join(blocks) == DOC


MAX, MIN = 2**63 - 1, -2**63
#: UPDATEs of the shared export: times, ids and string references at the ends of int64
EDGES = {
    "kernel-times": [f"update CUPTI_ACTIVITY_KIND_KERNEL set start={MIN}, end={MAX} where rowid=1",
                     f"update CUPTI_ACTIVITY_KIND_KERNEL set start={MAX - 1}, end={MAX} where rowid=2",
                     f"update CUPTI_ACTIVITY_KIND_KERNEL set start={MIN}, end={MIN + 5} where rowid=3"],
    "ids": [f"update CUPTI_ACTIVITY_KIND_KERNEL set correlationId={MAX}, deviceId={MAX}, streamId={MIN}, "
            f"globalPid={MIN} where rowid<=5",
            f"update CUPTI_ACTIVITY_KIND_RUNTIME set correlationId={MAX}, globalTid={MIN} where rowid<=5",
            f"update CUPTI_ACTIVITY_KIND_KERNEL set shortName={MAX}, demangledName={MIN} where rowid between 6 and 8"],
    "nvtx": [f"update NVTX_EVENTS set start={MIN}, end={MAX} where rowid<=3",
             f"update NVTX_EVENTS set globalTid={MAX}, textId={MIN}, eventType={MAX} where rowid between 4 and 6"],
    "runtime-times": [f"update CUPTI_ACTIVITY_KIND_RUNTIME set start={MIN}, end={MAX} where rowid<=50"],
    "string-ids": [f"update StringIds set id={MAX} where rowid=1"],
}


def test_int64_edges_in_nsight_columns_are_reports_or_one_line(tmp_path):
    src = shared("h200_nsys", "bert_nvtx.sqlite.gz")
    base = gzip.decompress(src.read_bytes())
    for name, sql in EDGES.items():
        out = tmp_path / f"{name}.sqlite"
        out.write_bytes(base)
        con = sqlite3.connect(out)
        for s in sql:
            con.execute(s)
        con.commit()
        con.close()
        code, o, e, peak = run_cli(["analyze", str(out), "--format", "json"], timeout=120)
        d = judge(out, code, o, e, peak)
        assert d is not None, (name, e)
        # a kernel whose start and end are not a valid interval is counted missing, never summed
        assert d["gpu_activities"] == (305 if name == "kernel-times" else 308), name
        assert d["gpu_time_us"] < 1e6, name


def test_hostile_marker_arguments_fail_the_test_in_one_line(pytester, monkeypatch):
    """A marker's trace or limits of the wrong kind (a number, a list, NaN, text, an unknown keyword,
    a device as the trace) fail the test with one line: never a pass, never a hang."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("NONGEMM_MAX_TRACE_BYTES", str(64 << 20))
    (pytester.path / "traces").mkdir()
    shutil.copy(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", pytester.path / "traces" / "bert.json.gz")
    cases = {
        "number_trace": '123, max_share={"GEMM": 1.0}',
        "list_limits": '"traces/bert.json.gz", max_share=[("GEMM", 1.0)]',
        "nan_limit": '"traces/bert.json.gz", max_share={"GEMM": float("nan")}',
        "text_limit": '"traces/bert.json.gz", max_share={"GEMM": "lots"}',
        "unknown_keyword": '"traces/bert.json.gz", max_shares={"GEMM": 1.0}',
        "number_baseline": '"traces/bert.json.gz", baseline=7',
        "inf_regression": '"traces/bert.json.gz", baseline="traces/bert.json.gz", max_regression=float("inf")',
        "two_traces": '"traces/bert.json.gz", "traces/bert.json.gz", max_share={"GEMM": 1.0}',
        "zero_trace": '"/dev/zero", max_share={"GEMM": 1.0}',
    }
    body = "import pytest\n" + "".join(f"\n@pytest.mark.nongemm({args})\ndef test_{name}():\n    pass\n"
                                       for name, args in cases.items())
    pytester.makepyfile(test_marks=body)
    result = pytester.runpytest("-p", "nongemm_trace.pytest_plugin", "-p", "no:cacheprovider", "-p", "no:xdist",
                                "-rf")
    outcomes = result.parseoutcomes()
    text = result.stdout.str()
    assert outcomes.get("passed", 0) == 0, text[-3000:]
    assert outcomes.get("failed", 0) == len(cases) and "INTERNALERROR" not in text, text[-3000:]
    summary = [line for line in text.splitlines() if line.startswith("FAILED test_marks.py::")]
    for name in cases:  # the one line, not a traceback into the library
        line = next(x for x in summary if f"::test_{name} " in x)
        assert " - Failed: nongemm: " in line or "UsageError" in line, line


TRT = "external2/tensorrt/trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json"


def test_a_hostile_layer_info_is_one_line(tmp_path):
    """--layer-info that is deeply nested, of the wrong shape, empty, not JSON, a directory, missing,
    the profile itself, or /dev/zero through a link: one line naming it, bounded."""
    profile = shared(*TRT.split("/"))
    files = {"deep.json": '{"Layers":' + "[" * 100_000 + "]" * 100_000 + "}", "layers-number.json": '{"Layers": 5}',
             "empty.json": "", "not-json.json": "garbage"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "dir.json").mkdir()
    odd = [*(tmp_path / n for n in files), tmp_path / "dir.json", tmp_path / "missing.json", profile]
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.json").symlink_to("/dev/zero")
        odd.append(tmp_path / "zero.json")
    for info in odd:
        code, _, err, peak = run_cli(["analyze", str(profile), "--layer-info", str(info), "--format", "json"],
                                     {"NONGEMM_MAX_TRACE_BYTES": str(64 << 20)}, timeout=120)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and str(info) in lines[0], (info.name, err[-500:])
        assert "unexpected failure" not in lines[0] and peak < 700 << 20, info.name
    # layers of every wrong type inside a well-formed list: a report
    (tmp_path / "items.json").write_text(json.dumps({"Layers": [1, "x", None, [], {"Name": 5},
                                                                {"Name": None, "Inputs": 7},
                                                                {"Name": "a" * 100_000, "LayerType": ["x"]}]}))
    code, out, err, peak = run_cli(["analyze", str(profile), "--layer-info", str(tmp_path / "items.json"),
                                    "--format", "json"], timeout=120)
    assert judge(profile, code, out, err, peak) is not None


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("the bounds are Linux's (/proc, FIFOs, /dev/zero)")
