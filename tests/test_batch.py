"""Many traces at once: folders, globs, parallel workers, Ray, Parquet datasets, ranks."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import polars as pl
import pytest
from conftest import REPO, SAMPLES, hostile, interval_union_ns, shared

import nongemm_trace
from nongemm_trace.cli import main


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_folder_of_ranks(capsys):
    folder = shared("h200x2")
    code, out, err = _run(capsys, "analyze", folder, "--format", "json", "--workers", "2")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) >= {"traces", "combined"}
    assert [t["rank"] for t in d["traces"]] == [0, 1]
    singles = [nongemm_trace.analyze(folder / f"bert_ddp_train_rank{r}.json.gz") for r in (0, 1)]
    for t, s in zip(d["traces"], singles):
        assert t["gpu_time_us"] == pytest.approx(s.gpu_time_ns / 1000, abs=1e-3)
        assert t["gpu_activities"] == s.gpu_activities
    assert d["combined"]["gpu_time_us"] == pytest.approx(sum(s.gpu_time_ns for s in singles) / 1000, abs=0.01)
    assert d["combined"]["gpu_activities"] == sum(s.gpu_activities for s in singles)
    ranks = d["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1]
    # rank 0's all-reduces wait for rank 1, which idles on its CPU: rank 1 is the straggler
    assert ranks["straggler_rank"] == 1 and "collectives" in ranks["straggler_evidence"]
    by_rank = {r["rank"]: r for r in ranks["ranks"]}
    assert by_rank[1]["communication_us"] < by_rank[0]["communication_us"] / 10
    assert by_rank[1]["host_bound_idle_us"] > by_rank[0]["host_bound_idle_us"]
    for tr in d["traces"]:  # communication time: the communication category's GPU time, independently
        comm = sum(c["gpu_time_us"] for c in tr["categories"] if c["category"] == "communication")
        assert by_rank[tr["rank"]]["communication_us"] == pytest.approx(comm, rel=0.01)
    means = [r["mean_step_us"] for r in ranks["ranks"]]
    assert ranks["straggler_spread"] == pytest.approx((max(means) - min(means)) / (sum(means) / 2), abs=1e-5)
    order = ("GEMM", "non-GEMM", "unclassified", "communication")
    for rank, single in zip((0, 1), singles):  # the time line by class: an interval union per class set
        row, acts = by_rank[rank], single.kernels
        unions = [interval_union_ns(acts.filter(pl.col("class").is_in(order[: k + 1]))) for k in range(len(order))]
        want = {c: (unions[k] - (unions[k - 1] if k else 0)) / 1000 for k, c in enumerate(order)}
        assert row["busy_by_class_us"] == pytest.approx(want, abs=1e-3)
        assert row["busy_by_class_us"]["communication"] == pytest.approx(row["exposed_communication_us"], abs=1e-3)
        assert sum(row["busy_by_class_us"].values()) + row["idle_us"] == pytest.approx(row["span_us"], abs=5e-3)
        assert row["busy_by_class_us"]["GEMM"] > row["busy_by_class_us"]["non-GEMM"] > 0
    from rich.console import Console

    from nongemm_trace.models.batch import BatchResult
    from nongemm_trace.report.terminal.batch import render_batch
    console = Console(record=True, width=400)
    render_batch(BatchResult.from_dict(d), console)
    text = console.export_text()
    assert "GEMM (us)" in text and "non-GEMM (us)" in text and "span (us)" in text
    assert f"{by_rank[1]['busy_by_class_us']['GEMM']:,.1f}" in text and f"{by_rank[0]['span_us']:,.1f}" in text


def test_one_bad_file_among_good_ones(tmp_path, capsys):
    for name in ("bert_base_fp32_bs8_s128__eager.json.gz", "legacy_inference_rank_1.json.gz"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes()[:5000])
    code, out, err = _run(capsys, "analyze", tmp_path, "--format", "json", "--quiet")
    assert code == 2
    d = json.loads(out)
    assert len(d["traces"]) == 2 and len(d["failed"]) == 1
    assert d["failed"][0]["trace"] == str(bad)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "gzip" in lines[0]


def test_globs_and_table_output(capsys):
    code, out, err = _run(capsys, "analyze", str(SAMPLES / "zoo" / "*eager*.json.gz"), "--quiet")
    assert code == 0 and err == ""
    assert "4 traces" in out and "Combined" in out


def test_parquet_dataset(tmp_path, capsys):
    out_dir = tmp_path / "ds"
    code, out, err = _run(capsys, "analyze", SAMPLES / "zoo", "--format", "parquet", "-o", out_dir, "--quiet")
    assert code == 0, err
    assert out == ""
    kern = pl.read_parquet(out_dir / "table=kernels" / "*.parquet")
    assert kern["trace"].n_unique() == 5
    cats = pl.read_parquet(out_dir / "table=categories" / "*.parquet")
    for trace, total in cats.group_by("trace").agg(pl.col("gpu_time_ns").sum()).iter_rows():
        assert total == nongemm_trace.analyze(trace).gpu_time_ns


def test_ray_engine_on_two_traces_and_one_that_hangs(capsys, tmp_path):
    """Ray tasks report in the input order; the task of a trace that never ends is cancelled at its
    time limit (which counts from the task's start) and named in one line; the others report."""
    pytest.importorskip("ray", reason="Ray not installed (the [ray] extra)")
    a = SAMPLES / "zoo" / "bert_base__bs1_fp16_eager.json.gz"
    b = SAMPLES / "zoo" / "vit_b_16__bs1_fp16_eager.json.gz"
    stalled = _fifo(tmp_path)
    code, out, err = _run(capsys, "analyze", a, stalled, b, "--engine", "ray", "--workers", "2", "--timeout", "8",
                          "--format", "json", "--quiet")
    if "Ray did not start" in err and os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.skip(f"Ray's node did not come up on this machine: {err.strip()[-200:]}")  # its load, not ours
    assert code == 2 and out, err
    d = json.loads(out)
    assert [t["trace"] for t in d["traces"]] == [str(a), str(b)]
    assert d["traces"][0]["gpu_activities"] == nongemm_trace.analyze(a).gpu_activities
    want = f"{stalled}: timed out (no result within the time limit of 8 s per trace)"
    assert d["failed"] == [{"trace": str(stalled), "error": want}]
    assert f"nongemm-trace: error: {want}" in err.splitlines()
    from nongemm_trace.runs import ray_engine as batch_workers  # a loaded host: Ray's workers got the time to register
    assert all(os.environ.get(k) for k in batch_workers.RAY_PATIENCE)


def test_empty_folder_is_an_error(tmp_path, capsys):
    code, out, err = _run(capsys, "analyze", tmp_path)
    assert code == 2 and "no trace files" in err


def test_batch_workers_run_without_scanning_threads(monkeypatch):
    """Each batch worker already has a core of its own: it must not start scanning threads per
    trace (what a process worker and a Ray task run first turns them off), and it reports the same."""
    from nongemm_trace.load.kineto import scanner
    from nongemm_trace.runs import batch

    path = str(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    monkeypatch.setenv("NONGEMM_SCAN_THREADS", "auto")
    plain = batch._work(path, {}, None, 0)
    assert scanner.threads_allowed()
    batch._prepare_worker()
    assert not scanner.threads_allowed()
    assert batch._work(path, {}, None, 0) == plain




def _cli(*args, timeout=240):
    """The command line in a process of its own (the worktree's package first on the path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=REPO)


def _three_traces(folder, middle: str):
    names = ["a_bert.json.gz", middle, "c_legacy.json.gz"]
    shutil.copy(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", folder / names[0])
    shutil.copy(SAMPLES / "legacy_inference_rank_1.json.gz", folder / names[2])
    return [folder / n for n in names]


def test_a_worker_that_dies_fails_only_its_trace(tmp_path):
    """S7: the worker analysing ``*kill*`` SIGKILLs itself (as the OOM killer or a crash in native code
    would): that trace is failed with one line naming it, the two others report, exit 2."""
    paths = _three_traces(tmp_path, "b_kill.json.gz")
    shutil.copy(SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz", paths[1])
    r = _cli(hostile("S7-batch-worker-crash.py"), "analyze", tmp_path, "--format", "json", "--quiet",
             "--workers", "2")
    assert r.returncode == 2, r.stderr
    d = json.loads(r.stdout)
    assert [t["trace"] for t in d["traces"]] == [str(paths[0]), str(paths[2])]
    assert d["traces"][0]["gpu_activities"] == nongemm_trace.analyze(paths[0]).gpu_activities
    assert d["combined"]["traces"] == 2 and d["combined"]["failed"] == 1
    assert d["failed"] == [{"trace": str(paths[1]), "error": f"{paths[1]}: the worker analysing it died "
                                                             "(killed by SIGKILL)"}]
    assert r.stderr.strip().splitlines() == [f"nongemm-trace: error: {d['failed'][0]['error']}"]


def test_a_worker_that_dies_with_one_worker_still_reports_the_rest(tmp_path):
    """One worker for three traces: the worker that died is replaced, the trace after it reports."""
    paths = _three_traces(tmp_path, "b_kill.json.gz")
    shutil.copy(SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz", paths[1])
    r = _cli(hostile("S7-batch-worker-crash.py"), "analyze", *paths, "--format", "csv", "--quiet", "--workers", "1")
    assert r.returncode == 2, r.stderr
    rows = r.stdout.strip().splitlines()
    assert len(rows) == 3 and rows[1].startswith(str(paths[0])) and rows[2].startswith(str(paths[2]))
    assert "b_kill.json.gz: the worker analysing it died (killed by SIGKILL)" in r.stderr


def _fifo(folder):
    """A trace that never ends: a named pipe nobody writes (opening it blocks in the kernel)."""
    p = folder / "b_stalled.json"
    os.mkfifo(p)
    return p


def test_timeout_fails_only_the_trace_that_hangs(tmp_path, capsys):
    paths = _three_traces(tmp_path, "b_stalled.json")
    _fifo(tmp_path)
    code, out, err = _run(capsys, "analyze", *paths, "--timeout", "6", "--format", "json", "--quiet")
    assert code == 2
    d = json.loads(out)
    assert [t["trace"] for t in d["traces"]] == [str(paths[0]), str(paths[2])]
    want = f"{paths[1]}: timed out (no result within the time limit of 6 s per trace)"
    assert d["failed"] == [{"trace": str(paths[1]), "error": want}]
    assert err.strip().splitlines() == [f"nongemm-trace: error: {want}"]


def test_timeout_of_one_trace_is_one_line(tmp_path):
    stalled = _fifo(tmp_path)
    r = _cli("-m", "nongemm_trace", "analyze", stalled, "--timeout", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"nongemm-trace: error: {stalled}: timed out (no result within the "
                                             "time limit of 1 s, --timeout)"]
    ok = _cli("-m", "nongemm_trace", "analyze", SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", "--timeout", "60",
              "--format", "json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["gpu_activities"] == 308


@pytest.mark.parametrize("value", ["0", "-3", "nan"])
def test_a_timeout_that_can_never_be_met_is_refused(capsys, value):
    one = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    for args in ([one], [one, SAMPLES / "legacy_inference_rank_1.json.gz"]):
        code, out, err = _run(capsys, "analyze", *args, "--timeout", value, "--quiet")
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and "--timeout must be a number of seconds above 0" in err


def _exit_at_start() -> None:
    os._exit(3)


def test_workers_that_cannot_start_fail_the_jobs_instead_of_starting_forever():
    """A broken environment (every worker dies before it is ready) ends the run, each job failed in one line."""
    from nongemm_trace.runs.batch_workers import Failure, run_processes

    got = run_processes([(1,), (2,), (3,)], abs, workers=1, prepare=_exit_at_start)
    assert got == [Failure("died", "no worker process could start (exit status 3)")] * 3



def test_ranks_without_step_markers_still_get_a_ranks_section(tmp_path, capsys):
    """The DDP pair with its ProfilerStep ranges taken out (as an FSDP pair profiled without a
    schedule has none): still two ranks, the same straggler from the time lines, and a note."""
    import gzip
    for r in (0, 1):
        doc = json.loads(gzip.decompress(shared("h200x2", f"bert_ddp_train_rank{r}.json.gz").read_bytes()))
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    code, out, err = _run(capsys, "analyze", tmp_path, "--format", "json", "--workers", "1")
    assert code == 0, err
    ranks = json.loads(out)["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1] and all(r["steps"] == 0 for r in ranks["ranks"])
    assert ranks["straggler_rank"] == 1 and "collectives" in ranks["straggler_evidence"]
    assert ranks["straggler_spread"] is None and "no step markers" in ranks["note"]
    code, out, err = _run(capsys, "analyze", tmp_path, "--workers", "1")
    assert code == 0 and "straggler rank 1, no step times" in out and "note: ranks 0, 1 have no step markers" in out


def test_ranks_with_host_device_transfers_list_them_in_the_span(tmp_path, capsys):
    """A public AlexNet trace (16 pageable HtoD copies) given two rank numbers: its Ranks table lists
    a transfer column, and the span's parts (GEMM + non-GEMM + transfer + unclassified + exposed
    communication + idle) still add up on every rank."""
    import gzip
    src = shared("external", "hta", "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for r in (0, 1):
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 2}
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    code, out, err = _run(capsys, "analyze", tmp_path, "--format", "json", "--workers", "1")
    assert code == 0, err
    rows = json.loads(out)["ranks"]["ranks"]
    for row in rows:
        assert row["busy_by_class_us"]["transfer"] > 0
        assert sum(row["busy_by_class_us"].values()) + row["idle_us"] == pytest.approx(row["span_us"], abs=5e-3)
    code, out, err = _run(capsys, "analyze", tmp_path, "--workers", "1")
    assert code == 0, err
    assert "span = GEMM + non-GEMM + transfer + unclassified + exposed comm. + idle" in out
    from rich.console import Console

    from nongemm_trace.report.terminal.batch import render_batch
    from nongemm_trace.runs.batch import run_batch
    wide = Console(width=400, record=True, file=io.StringIO())
    render_batch(run_batch([str(tmp_path / "rank0.json"), str(tmp_path / "rank1.json")], {}, workers=1), wide)
    header = next(line for line in wide.export_text().splitlines() if "transfer (us)" in line)
    assert header.index("non-GEMM (us)") < header.index("transfer (us)") < header.index("unclassified (us)")
