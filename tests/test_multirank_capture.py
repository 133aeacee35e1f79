"""bench/capture_multirank.py on the CPU: two gloo ranks of a tiny Llama, FSDP2 training with rank 1
slowed on purpose, and tensor-parallel inference. What the multi-rank analysis says about them is
checked against torch.profiler's own key_averages (written beside each trace) and the slowed rank.

CPU-only ranks have no device time line: exposed communication, busy time by class and GPU shares
are zero there (the GPU checks of the same script wait for a multi-GPU run, docs/multigpu.md)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, interval_union_ns, raw_events

import nongemm_trace
from nongemm_trace.cli import main

torch = pytest.importorskip("torch", reason="torch not installed")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("torch.distributed with gloo not available", allow_module_level=True)

#: the slowed rank's spin per step: long enough that it, not two busy cores' contention (four rank
#: processes and the test workers on this machine's two), sets the order of arrival
SLOW_RANK, SLOW_MS, STEPS = 1, 300, 3
RUNS = {"fsdp": ["fsdp2-train", "--slow-rank", str(SLOW_RANK), "--slow-ms", str(SLOW_MS)], "tp": ["tp-infer"]}
#: µs: both sides read the same whole-nanosecond timestamps (tests/test_references.py)
TOL_US = 0.001


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> dict[str, Path]:
    # imported here, where the capture runs, not while every worker collects the tests
    pytest.importorskip("transformers", reason="transformers not installed (the capture builds LlamaForCausalLM)")
    root = tmp_path_factory.mktemp("multirank")
    procs = {}
    for key, args in RUNS.items():  # both runs at once: most of each is starting Python and importing torch
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(REPO / "bench" / "capture_multirank.py"), *args, "-o", str(root / key), "--tiny", "--device",
               "cpu", "--timed", "0", "--wait", "0", "--warmup", "1", "--steps", str(STEPS)]
        procs[key] = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for p in procs.values():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    return {key: root / key for key in RUNS}


def _traces(folder: Path) -> list[Path]:
    return sorted(folder.glob("*_rank*.json.gz"))


def _meta(trace: Path) -> dict:
    return json.loads(trace.with_name(trace.name.replace(".json.gz", ".meta.json")).read_text())


def _batch(capsys, *args) -> dict:
    code = main(["analyze", *map(str, args), "--format", "json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("run", list(RUNS))
def test_each_rank_writes_its_trace_and_torchs_tables(captured, run):
    traces = _traces(captured[run])
    assert [t.name.rsplit("_rank", 1)[1] for t in traces] == ["0.json.gz", "1.json.gz"]
    for rank, t in enumerate(traces):
        doc = json.loads(gzip.decompress(t.read_bytes()))
        assert doc["distributedInfo"]["rank"] == rank and doc["distributedInfo"]["world_size"] == 2
        assert doc["distributedInfo"]["backend"] == "gloo"
        meta = _meta(t)
        assert meta["rank"] == rank and meta["latency_source"] == "perf_counter"
        assert len(meta["active_step_ms"]) == STEPS and all(x > 0 for x in meta["active_step_ms"])
        assert len(meta["key_averages"]) >= 20
        assert sum(1 for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")) == STEPS


@pytest.mark.parametrize("run", list(RUNS))
def test_cpu_times_per_op_match_key_averages(captured, run):
    """Per op name, CPU time equals key_averages' (a call nested in a same-name call: between once and
    twice, docs/definitions.md), and so does self CPU time, but for gloo's collectives: torch marks them
    async (begun on the calling thread, ended on gloo's worker) and gives them no self time; the file
    writes them as ops of the worker thread, so here their self time is their duration."""
    for t in _traces(captured[run]):
        rep = nongemm_trace.analyze(t)
        assert rep.metric == "cpu"  # a CPU-only trace reports host time by itself
        g = rep.ops.group_by("op").agg(pl.col("cpu_time_ns").sum(), pl.col("self_cpu_time_ns").sum())
        cpu = {n: c for n, c, _ in g.iter_rows()}
        self_ = {n: s for n, _, s in g.iter_rows()}
        torch_cpu, torch_self = Counter(), Counter()
        for row in _meta(t)["key_averages"]:
            if row["key"] in cpu:
                torch_cpu[row["key"]] += row["cpu_time_total_us"]
                torch_self[row["key"]] += row["self_cpu_time_total_us"]
        assert len(torch_cpu) >= 20
        same_name_nested = {e["name"] for e in _nested_same_name(t)}
        for name, theirs in torch_cpu.items():
            ours = cpu[name] / 1000
            if name in same_name_nested:
                assert ours - TOL_US <= theirs <= 2 * ours + TOL_US, name
            else:
                assert ours == pytest.approx(theirs, abs=TOL_US), name
        off = {n for n in torch_self if abs(self_[n] / 1000 - torch_self[n]) > TOL_US}
        assert off and all(n.startswith("gloo:") and torch_self[n] == 0 for n in off), off


def _nested_same_name(path: Path) -> list[dict]:
    """Op events that lie inside an op of the same name on the same thread (a plain scan of the file)."""
    ops = sorted((e for e in raw_events(str(path))
                  if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")),
                 key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    out, open_ = [], []
    for e in ops:
        open_ = [o for o in open_ if (o["pid"], o["tid"]) == (e["pid"], e["tid"]) and o["ts"] + o["dur"] > e["ts"]]
        if any(o["name"] == e["name"] for o in open_):
            out.append(e)
        open_.append(e)
    return out


@pytest.mark.parametrize("run", list(RUNS))
def test_collectives_are_communication(captured, run):
    for t in _traces(captured[run]):
        ops = nongemm_trace.analyze(t).ops
        coll = ops.filter(pl.col("op").str.contains(r"^(gloo:|c10d::|_c10d_functional::)"))
        assert coll.height >= 2 and set(coll["category"]) == {"communication"}, coll
        assert any(n.startswith("gloo:") for n in coll["op"])


def test_the_slowed_rank_is_the_straggler(captured, capsys):
    d = _batch(capsys, captured["fsdp"], "--workers", "1")
    ranks = d["ranks"]
    assert ranks["straggler_rank"] == SLOW_RANK, ranks["straggler_evidence"]
    assert "host time in collective ops" in ranks["straggler_evidence"]
    rows = {r["rank"]: r for r in ranks["ranks"]}
    # the others wait for it in every collective: a good part of the spin time of the steps (gloo's
    # waits are host work, which two busy cores stretch on both ranks alike)
    assert rows[0]["host_communication_us"] - rows[SLOW_RANK]["host_communication_us"] > STEPS * SLOW_MS * 1000 / 4
    # and what made it late is named: the range it spun in, by about the spin
    late = rows[SLOW_RANK]["collectives"]["late_work"]
    assert late[0]["op"] == "## slow_rank_host_work ##", late
    assert late[0]["excess_us"] > STEPS * SLOW_MS * 1000 / 2
    for tr in d["traces"]:  # the rank's host time in communication: its communication category (cpu metric)
        comm = sum(c["cpu_time_us"] for c in tr["categories"] if c["category"] == "communication")
        assert rows[tr["rank"]]["host_communication_us"] == pytest.approx(comm, abs=1e-3)
    for r in rows.values():  # no device time line on CPU-only ranks
        assert r["span_us"] == 0 and r["exposed_communication_us"] == 0 and r["communication_us"] == 0


def test_parquet_dataset_matches_the_json(captured, tmp_path, capsys):
    folders = [captured["fsdp"], captured["tp"]]
    one = _batch(capsys, *folders, "--workers", "1")
    code = main(["analyze", *map(str, folders), "--format", "parquet", "-o", str(tmp_path / "ds"), "--quiet",
                 "--workers", "1"])
    assert code == 0, capsys.readouterr().err
    cats = pl.read_parquet(tmp_path / "ds" / "table=categories" / "*.parquet")
    ops = pl.read_parquet(tmp_path / "ds" / "table=ops" / "*.parquet")
    for tr in one["traces"]:
        mine = cats.filter(pl.col("trace") == tr["trace"])
        assert set(mine["rank"]) == {tr["rank"]}
        got = dict(zip(mine["category"], mine["cpu_time_us"]))
        assert got == pytest.approx({c["category"]: c["cpu_time_us"] for c in tr["categories"]}, abs=1e-3)
        assert ops.filter(pl.col("trace") == tr["trace"]).height == len(tr["ops"])


def _gpu_runs() -> list[Path]:
    """Folders of GPU rank traces from bench/capture_multirank.py (docs/multigpu.md): under
    sample_traces/multirank/ or the shared traces' h200x*/ (none yet: the test is skipped)."""
    from conftest import SAMPLES, SHARED
    metas = [*SAMPLES.glob("multirank/*/*_rank*.meta.json"), *SHARED.glob("h200x*/*/*_rank*.meta.json")]
    return sorted({m.parent for m in metas if json.loads(m.read_text()).get("device") == "cuda"})


@pytest.mark.parametrize("folder", _gpu_runs() or [None], ids=lambda p: p.name if p else "none")
def test_gpu_ranks(folder, capsys, tmp_path):
    """The checks of docs/multigpu.md on a multi-GPU run: per-op self GPU time against key_averages,
    communication kernels, the slowed rank, exposed communication, the Parquet dataset, the Ray engine."""
    if folder is None:
        pytest.skip("no GPU rank traces of bench/capture_multirank.py yet (docs/multigpu.md)")
    d = _batch(capsys, folder, "--workers", "1")
    for tr in d["traces"]:
        path = Path(tr["trace"])
        rep = nongemm_trace.analyze(path)
        self_us = dict(rep.ops.group_by("op").agg(pl.col("self_gpu_time_ns").sum() / 1000).iter_rows())
        ops = {e["name"] for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
        rows = [r for r in _meta(path)["key_averages"] if r["key"] in ops]
        assert len(rows) >= 20
        for r in rows:
            want = pytest.approx(r["self_device_time_total_us"], rel=1e-3, abs=0.002)
            assert self_us.get(r["key"], 0.0) == want, r["key"]
        k = rep.kernels
        nccl = k["name"].str.contains("(?i)nccl")
        if _meta(path)["world_size"] > 1:  # one rank runs no collectives
            assert nccl.any() and set(k.filter(nccl)["category"]) == {"communication"}
            assert set(k.filter(pl.col("category") == "communication")["name"].str.contains("(?i)nccl")) == {True}
        exposed = interval_union_ns(k) - interval_union_ns(k.filter(pl.col("category") != "communication"))
        assert tr["timeline"]["exposed_communication_us"] == pytest.approx(exposed / 1000, abs=1e-3)
    slow = _meta(Path(d["traces"][0]["trace"])).get("slow_rank")
    if slow is not None:
        assert d["ranks"]["straggler_rank"] == slow, d["ranks"]["straggler_evidence"]
    assert main(["analyze", str(folder), "--format", "parquet", "-o", str(tmp_path / "ds"), "--quiet",
                 "--workers", "1"]) == 0
    cats = pl.read_parquet(tmp_path / "ds" / "table=categories" / "*.parquet")
    for tr in d["traces"]:
        got = cats.filter(pl.col("trace") == tr["trace"])["gpu_time_ns"].sum()
        assert got / 1000 == pytest.approx(tr["gpu_time_us"], abs=0.01)
    # the Ray engine (its start is most of a test's time: on the CPU ranks test_batch's Ray test covers the engine)
    try:
        import ray  # noqa: F401
    except ImportError:
        return
    from nongemm_trace.runs.summary import row_of

    ray_d = _batch(capsys, folder, "--engine", "ray", "--workers", "2")
    # under Ray each trace comes back as its row (the rest is reduced in the cluster: docs/commands.md)
    assert ray_d["traces"] == [row_of(t) for t in d["traces"]] and ray_d["ranks"] == d["ranks"]
    assert ray_d["combined"] == d["combined"] and ray_d.get("collectives") == d.get("collectives")


#: µs: each collective figure is rounded to the nanosecond once (tests/test_collectives.py)
COLLECTIVE_TOL_US = 0.002


@pytest.mark.parametrize("run", list(RUNS))
def test_gloo_collectives_are_matched_on_both_ranks(captured, run, capsys):
    d = _batch(capsys, captured[run])
    calls = d["collectives"]
    per_rank = {}
    for tr in d["traces"]:
        per_rank[tr["rank"]] = [e for e in raw_events(tr["trace"])
                                if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]
    assert len(per_rank[0]) == len(per_rank[1]) == len(calls) > 0
    assert all(c["ranks"] == [0, 1] and c["process_group"] == "0" and c["group_size"] == 2 for c in calls)
    assert {c["step"] for c in calls} == {f"ProfilerStep#{i}" for i in range(1, STEPS + 1)}
    for c in calls:
        assert c["wait_us"][c["ranks"].index(c["last_rank"])] == 0
        assert c["busbw_gbps"] is not None and c["busbw_gbps"] > 0 and c["link_gbps"] is None


def test_gloo_slowed_rank_is_last_on_every_collective_it_delays(captured, capsys):
    """Rank 1 spins its host for SLOW_MS at the start of each step (``## slow_rank_host_work ##``): a
    collective that rank 0 entered before the spin ended and rank 1 after it was delayed by the spin,
    and rank 1 is the one that arrived last there, by at least what was left of the spin when rank 0
    arrived (which rank 0 waited). (On a loaded machine other calls can be late on either side: only
    the calls the spin delays are told apart.)"""
    d = _batch(capsys, captured["fsdp"])
    calls = d["collectives"]
    slow = next(tr for tr in d["traces"] if tr["rank"] == SLOW_RANK)
    doc = json.loads(gzip.decompress(Path(slow["trace"]).read_bytes()))
    base = doc["baseTimeNanoseconds"]
    spins = [base + round((e["ts"] + e["dur"]) * 1000) for e in doc["traceEvents"]
             if e.get("name") == "## slow_rank_host_work ##" and e.get("ph") == "X"]
    assert len(spins) >= STEPS
    delayed = [c for c in calls if any(c["start_ns"][0] < end <= c["start_ns"][1] for end in spins)]
    assert len(delayed) >= STEPS - 1
    for c in delayed:
        end = next(e for e in spins if c["start_ns"][0] < e <= c["start_ns"][1])
        assert c["last_rank"] == SLOW_RANK, c
        assert c["skew_us"] * 1000 >= end - c["start_ns"][0] - 1
        assert c["wait_us"][0] == pytest.approx(c["skew_us"], abs=COLLECTIVE_TOL_US)
    rows = {r["rank"]: r["collectives"] for r in d["ranks"]["ranks"]}
    # the totals hold those waits (the rest of a run on a loaded machine can be late on either side)
    assert rows[0]["wait_us"] >= sum(c["wait_us"][0] for c in delayed) - COLLECTIVE_TOL_US * len(delayed)
    assert rows[SLOW_RANK]["last"] >= len(delayed)
