"""The command line: output formats, the JSON contract, bad input and exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import polars as pl
import pytest
from conftest import SAMPLES, raw_activity_total_ns

from nongemm_trace.cli import main

SAMPLE_FILES = sorted(SAMPLES.glob("*.json.gz"))
BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_json_contract_on_every_sample(capsys, path):
    code, out, err = run_cli(capsys, "analyze", path, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    for key in ("schema_version", "tool_version", "trace", "metric", "level", "taxonomy", "gpu_time_us",
                "gpu_activities", "categories", "ops", "warnings"):
        assert key in d
    n, total = raw_activity_total_ns(str(path))
    assert d["gpu_activities"] == n
    assert d["gpu_time_us"] == pytest.approx(total / 1000, abs=5e-4)
    assert d["metric"] == "gpu" and d["level"] == "launch"
    for c in d["categories"]:
        assert set(c) >= {"category", "class", "gpu_time_us", "share", "activities"}
    assert any(c["category"] == "unclassified" for c in d["categories"])
    assert sum(c["share"] for c in d["categories"]) == pytest.approx(1.0, abs=1e-5)
    cpu_by_name = {}
    for o in d["ops"]:
        assert set(o) >= {"op", "category", "calls", "gpu_time_us", "self_gpu_time_us", "activities", "cpu_time_us",
                          "self_cpu_time_us"}
        assert o["self_gpu_time_us"] <= o["gpu_time_us"] + 1e-6
        was = cpu_by_name.get(o["op"], (0.0, 0.0))
        cpu_by_name[o["op"]] = (was[0] + o["cpu_time_us"], was[1] + o["self_cpu_time_us"])
    # per name (a call's CPU time is in one row of its name): the self time lies inside the whole
    assert all(own <= whole + 1e-3 * len(d["ops"]) for whole, own in cpu_by_name.values())
    linked = sum(o["self_gpu_time_us"] for o in d["ops"])
    assert linked <= d["gpu_time_us"] + 1e-3
    for w in d["warnings"]:
        assert set(w) == {"code", "count", "message"}


def test_json_output_is_byte_identical_across_runs(capsys):
    _, a, _ = run_cli(capsys, "analyze", BERT, "--format", "json")
    _, b, _ = run_cli(capsys, "analyze", BERT, "--format", "json")
    assert a == b


def test_table_output_names_metric_and_level(capsys):
    code, out, _ = run_cli(capsys, "analyze", BERT, "--level", "top")
    assert code == 0
    assert "metric: gpu" in out and "level: top" in out
    assert "GEMM" in out and "non-GEMM" in out and "unclassified" in out


@pytest.mark.parametrize("table", ["categories", "ops", "kernels"])
def test_csv_and_parquet_tables(capsys, tmp_path, table):
    code, out, _ = run_cli(capsys, "analyze", BERT, "--format", "csv", "--table", table)
    assert code == 0
    header = out.splitlines()[0]
    assert "category" in header
    pq = tmp_path / f"{table}.parquet"
    code, out, _ = run_cli(capsys, "analyze", BERT, "--format", "parquet", "--table", table, "-o", pq)
    assert code == 0 and out == ""
    df = pl.read_parquet(pq)
    n, total = raw_activity_total_ns(str(BERT))
    if table == "kernels":
        assert df.height == n and int(df["dur_ns"].sum()) == total
    if table == "categories":
        assert int(df["gpu_time_ns"].sum()) == total


def test_cpu_metric(capsys):
    code, out, _ = run_cli(capsys, "analyze", BERT, "--metric", "cpu", "--format", "json")
    assert code == 0
    d = json.loads(out)
    assert d["metric"] == "cpu"
    assert d["cpu_time_us"] > 0
    assert sum(c["cpu_time_us"] for c in d["categories"]) == pytest.approx(d["cpu_time_us"], abs=0.01)


def _one_line_error(code, out, err, path):
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(path) in lines[0]
    assert "Traceback" not in err


def test_not_a_trace(capsys, tmp_path):
    p = tmp_path / "notes.json"
    p.write_text("hello, this is not json")
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)


def test_json_without_trace_events(capsys, tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"foo": [1, 2, 3]}))
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)
    assert "traceEvents" in err


def test_truncated_json(capsys, tmp_path):
    data = gzip.decompress(BERT.read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)
    assert "truncated" in err or "invalid" in err


def test_truncated_gzip(capsys, tmp_path):
    raw = BERT.read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(raw[: len(raw) // 2])
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)
    assert "gzip" in err


def test_gz_that_is_not_gzip(capsys, tmp_path):
    p = tmp_path / "fake.json.gz"
    p.write_text('{"traceEvents": []}')
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)
    assert "not gzip" in err


def test_missing_file(capsys, tmp_path):
    p = tmp_path / "nope.json.gz"
    code, out, err = run_cli(capsys, "analyze", p)
    _one_line_error(code, out, err, p)


def test_empty_trace_is_a_report_not_a_crash(capsys, tmp_path):
    p = tmp_path / "empty.json"
    p.write_text(json.dumps({"traceEvents": []}))
    code, out, err = run_cli(capsys, "analyze", p, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["gpu_time_us"] == 0 and d["gpu_activities"] == 0


def test_console_script_runs_as_module():
    r = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(BERT), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu_activities"] == 308


@pytest.mark.parametrize("fmt", ["json", "table", "csv"])
def test_the_command_exits_without_teardown_but_with_its_whole_output(fmt, tmp_path):
    """After a single-trace analysis the command skips the interpreter's teardown (os._exit):
    the report, piped to stdout or written to a file, must still be complete; a refusal keeps
    its exit code 2 and its message."""
    cmd = [sys.executable, "-m", "nongemm_trace", "analyze", str(BERT), "--format", fmt]
    piped = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = tmp_path / f"report.{fmt}"
    to_file = subprocess.run(cmd + ["-o", str(out)], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and to_file.returncode == 0, piped.stderr + to_file.stderr
    assert len(piped.stdout) > 500
    if fmt == "table":  # the file is drawn 160 columns wide, a pipe 80: both drawn to their last line
        # the steps table, then the sentence that defines its step time
        for text in (piped.stdout, out.read_text()):
            assert "┘\n" in text and text.endswith("its last kernel's end)\n")
    else:
        assert out.read_text() == piped.stdout
    if fmt == "json":
        assert json.loads(piped.stdout)["gpu_activities"] == 308
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    refused = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(bad)], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "bad.json" in refused.stderr


def test_report_to_pandas_on_a_real_trace():
    pytest.importorskip("pandas")
    import nongemm_trace
    rep = nongemm_trace.analyze(BERT)
    frames = rep.to_pandas()
    assert set(frames) == {"categories", "classes", "ops", "kernels", "kernel_summary", "steps"}
    assert len(frames["kernels"]) == rep.gpu_activities
    assert int(frames["categories"]["time_ns"].sum()) == rep.gpu_time_ns


def test_analyze_imports_no_numpy(tmp_path):
    """``analyze`` works on polars alone: numpy's import is CPU time and memory every run would pay
    (a numpy round trip in the name matcher once pulled it in); the commands that need it import it
    where they use it."""
    code = ("import sys; from nongemm_trace import cli; "
            f"cli.main(['analyze', {str(BERT)!r}, '--format', 'json', '-o', {str(tmp_path / 'o.json')!r}, '--quiet']); "
            "print('numpy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=SAMPLES.parent)  # this tree's package, not an installed one
    assert run.stdout.split()[-1] == "False"


def test_cli_sets_the_allocator_before_polars_loads(tmp_path):
    """jemalloc reads its configuration once, when polars is first imported: the command line
    must set it before that, so importing it must not import polars; a user's value wins."""
    code = ("import os, sys; os.environ.pop('_RJEM_MALLOC_CONF', None); import nongemm_trace.cli; "
            "print('polars' in sys.modules, os.environ['_RJEM_MALLOC_CONF'])")
    run = subprocess.run([sys.executable, "-c", code + "; import polars"], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0,tcache_max:4096"]
    # a trace past LARGE_TRACE_BYTES: freed pages returned after 100 ms (at once they cost 20-40 % of the
    # time from 47 MB up, for 5-7 % of the peak); sparse files of those sizes stand for traces
    for size, large in ((1 << 30, True), (40 << 20, True), (1 << 20, False)):
        trace = tmp_path / f"{size}.json"
        with open(trace, "wb") as f:
            f.truncate(size)
        code = (f"import os, sys; os.environ.pop('_RJEM_MALLOC_CONF', None); "
                f"sys.argv[1:] = ['analyze', {str(trace)!r}]; import nongemm_trace.cli as c; "
                "print(os.environ['_RJEM_MALLOC_CONF'] == c.ALLOCATOR_LARGE)")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert run.stdout.split() == [str(large)], size
    # glibc's mmap threshold: fixed in this process (mallopt) and, through the environment, in workers
    code = ("import os; os.environ.pop('MALLOC_MMAP_THRESHOLD_', None); import nongemm_trace.cli as c; "
            "print(os.environ['MALLOC_MMAP_THRESHOLD_'] == str(c.MMAP_THRESHOLD))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["True"]
    assert "jemalloc" not in run.stderr  # every option is one this polars' jemalloc accepts
    code = ("import os; os.environ['_RJEM_MALLOC_CONF'] = 'x:1'; import nongemm_trace.cli; "
            "print(os.environ['_RJEM_MALLOC_CONF'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "x:1"


def test_public_names_load_on_first_use():
    import nongemm_trace

    assert callable(nongemm_trace.analyze) and callable(nongemm_trace.launch_analysis)
    assert {"analyze", "Report", "TraceError", "load_taxonomy"} <= set(dir(nongemm_trace))
    with pytest.raises(AttributeError):
        nongemm_trace.no_such_name  # noqa: B018


def test_top_zero_prints_no_top_tables_and_one_step_is_singular(capsys):
    from conftest import SAMPLES, shared

    assert main(["analyze", str(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"), "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "Top 0" not in out and "Categories" in out
    assert main(["analyze", str(shared("external", "tracelens", "h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"))]) == 0
    out = capsys.readouterr().out
    assert "1 step (" in out and "1 steps" not in out


def test_version_and_a_missing_c_build_say_so(capsys, monkeypatch):
    from nongemm_trace import cli as cli_mod
    from nongemm_trace.core import native

    with pytest.raises(SystemExit):
        cli_mod.main(["--version"])
    assert "C extensions: built (trace scanner, op-tree sweep)" in capsys.readouterr().out
    monkeypatch.setattr(native, "built", lambda: {"_nongemm_scan": False, "_nongemm_sweep": True})
    monkeypatch.setattr(cli_mod, "_noted", [])
    monkeypatch.delenv("NONGEMM_NATIVE", raising=False)
    with pytest.raises(SystemExit):
        cli_mod.main(["--version"])
    assert "C extensions: not built (trace scanner;" in capsys.readouterr().out
    for _ in range(2):
        cli_mod.main(["analyze", str(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"), "--top", "0"])
    err = capsys.readouterr().err
    assert err.count("note: C extensions: not built") == 1  # once per run, not per command
