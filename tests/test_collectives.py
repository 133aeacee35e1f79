"""Every collective across ranks (issue #45 item 3): the same call matched on every rank, its arrival
skew, the rank that arrived last, each rank's wait, bus bandwidth and the computation that hid it.

On real runs: the two-H200 DDP pair (NCCL kernels carry the collective's parameters), HTA's NCCL test
rank and a copy of the DDP pair with one rank's work shifted late (the synthetic slow rank); the two gloo
ranks made on this CPU are checked in tests/test_multirank_capture.py, beside the capture's other tests."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from conftest import interval_union_ns, ns, raw_events, shared

import nongemm_trace
from nongemm_trace.cli import main
from nongemm_trace.load.kineto.collectives import read_collective_records
from nongemm_trace.metrics.collectives import busbw_factor, kind_of

#: µs: each figure is rounded to the nanosecond once
TOL_US = 0.002


def _batch(capsys, *args) -> dict:
    code = main(["analyze", *map(str, args), "--format", "json", "--quiet", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _args_kernels(path: Path) -> list[dict]:
    """The kernels whose args name a collective, read from the raw JSON (independent of the library)."""
    return [e for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") == "kernel"
            and "Collective name" in (e.get("args") or {})]


@pytest.fixture
def ddp() -> Path:
    return shared("h200x2")


@pytest.fixture(scope="module")
def ddp_report(tmp_path_factory) -> dict:
    """The two-rank DDP pair's JSON document, analysed once for the module's tests (a document, not a
    live object: each test reads it alone)."""
    out = tmp_path_factory.mktemp("ddp") / "ddp.json"
    assert main(["analyze", str(shared("h200x2")), "--format", "json", "--quiet", "--workers", "1",
                 "-o", str(out)]) == 0
    return json.loads(out.read_text())


#: the step the JSON names for the calls launched before the trace's window
BEFORE = "(before the trace)"


def _before_kernels(path: Path) -> list[dict]:
    """The communication kernels whose launch call is not in the file (launched before the window
    opened, still running when it did), in time order, read from the raw JSON."""
    ev = raw_events(str(path))
    launched = {(e.get("args") or {}).get("correlation") for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    return sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower()
                   and (e.get("args") or {}).get("correlation") not in launched), key=lambda e: e["ts"])


def test_every_nccl_collective_is_matched_on_both_ranks(ddp, ddp_report):
    d = ddp_report
    calls = [c for c in d["collectives"] if c["step"] != BEFORE]
    per_rank = {r: _args_kernels(ddp / f"bert_ddp_train_rank{r}.json.gz") for r in (0, 1)}
    assert len(per_rank[0]) == len(per_rank[1]) == len(calls) > 0
    assert Counter(c["name"] for c in calls) == Counter(e["args"]["Collective name"] for e in per_rank[0])
    for c in calls:
        assert c["ranks"] == [0, 1] and c["process_group"] == "0" and c["group_size"] == 2
        assert c["skew_us"] == pytest.approx(max(c["wait_us"]), abs=TOL_US) or c["name"] == "broadcast"
        assert c["wait_us"][c["ranks"].index(c["last_rank"])] == 0
        assert c["link_gbps"] == 450.0  # H200 NVLink, one direction (devices/links.toml)
    # bytes: elements x dtype size, from the kernels' own args
    sizes = {"Float": 4, "Long": 8}
    want = Counter((e["args"]["Collective name"], e["args"]["In msg nelems"] * sizes[e["args"]["dtype"]])
                   for e in per_rank[0])
    assert Counter((c["name"], c["bytes"]) for c in calls) == want
    # the straggler (rank 1, docs/commands.md) is the rank that arrives last, call after call
    assert d["ranks"]["straggler_rank"] == 1
    last = Counter(c["last_rank"] for c in calls)
    assert last[1] > 0.9 * len(calls)
    rows = {r["rank"]: r["collectives"] for r in d["ranks"]["ranks"]}
    every = Counter(c["last_rank"] for c in d["collectives"])
    assert rows[1]["last"] == every[1] and rows[0]["last"] == every[0]


def test_the_calls_running_when_the_window_opened_are_matched_from_the_end(ddp, ddp_report):
    """The NCCL kernels launched before the profiler's window (the tail of the warm-up step's
    all-reduces: 11 on rank 0, whose window opened earlier on its device's queue, 6 on rank 1) carry no
    parameters; every rank opened its window at the same point of its program, so rank 1's 6 are the
    last 6 of rank 0's, matched in that order: start, skew and last rank from the raw kernels."""
    base = {r: json.loads(gzip.decompress((ddp / f"bert_ddp_train_rank{r}.json.gz").read_bytes()))
            ["baseTimeNanoseconds"] for r in (0, 1)}
    raw = {r: _before_kernels(ddp / f"bert_ddp_train_rank{r}.json.gz") for r in (0, 1)}
    assert (len(raw[0]), len(raw[1])) == (11, 6)
    n = min(len(k) for k in raw.values())
    calls = [c for c in ddp_report["collectives"] if c["step"] == BEFORE]
    assert [c["index"] for c in calls] == list(range(-n, 0))
    for j, c in enumerate(calls):
        starts = [base[r] + ns(raw[r][len(raw[r]) - n + j]["ts"]) for r in (0, 1)]
        assert (c["name"], c["ranks"], c["start_ns"], c["bytes"]) == ("allreduce", [0, 1], starts, None)
        assert ns(c["skew_us"]) == max(starts) - min(starts) and c["last_rank"] == starts.index(max(starts))
        assert c["late_work"] == []


def test_no_call_before_the_trace_where_a_rank_has_several_groups(ddp, tmp_path, capsys):
    """Which group a kernel launched before the window was in is not recorded: a rank whose calls are of
    two process groups gets none of them (here the pair with its broadcasts renamed into group ``1``)."""
    for r in (0, 1):
        src = ddp / f"bert_ddp_train_rank{r}.json.gz"
        doc = json.loads(gzip.decompress(src.read_bytes()))
        for e in doc["traceEvents"]:
            a = e.get("args") or {}
            if a.get("Collective name") == "broadcast":
                a["Process Group Name"] = "1"
        (tmp_path / src.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    calls = _batch(capsys, tmp_path)["collectives"]
    assert len(calls) == 45 and not [c for c in calls if c["step"] == BEFORE]
    assert {c["process_group"] for c in calls if c["name"] == "broadcast"} == {"1"}


def test_waits_and_exposure_add_up_to_each_ranks_communication(ddp_report):
    """Per rank: each call's duration is its wait plus its transfer; the matched calls' exposed parts and
    those of the communication kernels no call was matched to (launched before the window: no args) add
    up to the rank's exposed communication, measured independently (interval unions)."""
    d = ddp_report
    calls = d["collectives"]
    for tr in d["traces"]:
        rank, path = tr["rank"], Path(tr["trace"])
        i = [c["ranks"].index(rank) for c in calls]
        waits = [c["wait_us"][j] for c, j in zip(calls, i)]
        exposed = [c["exposed_us"][j] for c, j in zip(calls, i)]
        durs = [c["exposed_us"][j] + c["overlap_us"][j] for c, j in zip(calls, i)]
        assert all(0 <= w <= x + TOL_US for w, x in zip(waits, durs))
        mine = next(r["collectives"] for r in d["ranks"]["ranks"] if r["rank"] == rank)
        assert mine["collective_us"] == pytest.approx(mine["wait_us"] + mine["transfer_us"], abs=TOL_US * len(calls))
        assert mine["wait_us"] == pytest.approx(sum(waits), abs=TOL_US * len(calls))
        k = nongemm_trace.analyze(path).kernels
        compute = k.filter(pl.col("category") != "communication")
        comm = k.filter(pl.col("category") == "communication")
        named = {e["args"]["correlation"] for e in _args_kernels(path)}
        # and the last ones launched before the window, as many as the other rank recorded
        before = _before_kernels(path)
        other = _before_kernels(next(Path(t["trace"]) for t in d["traces"] if t["rank"] != rank))
        named |= {e["args"]["correlation"] for e in before[len(before) - min(len(before), len(other)):]}
        unmatched = comm.filter(~pl.col("correlation").is_in(list(named)))
        busy_compute = interval_union_ns(compute)
        rest_ns = sum(interval_union_ns(pl.concat([compute, unmatched[j:j + 1]])) - busy_compute
                      for j in range(unmatched.height))
        total = (interval_union_ns(k) - busy_compute) / 1000
        assert tr["timeline"]["exposed_communication_us"] == pytest.approx(total, abs=1e-3)
        assert sum(exposed) + rest_ns / 1000 == pytest.approx(total, abs=TOL_US * len(calls))


#: device events: they follow their launch call (``args.correlation``), not the host's clock
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync"}


def delay_host(events: list[dict], t0: float, shift_us: float, stretch: bool = False) -> None:
    """Every host event of ``events`` from ``t0`` (µs) on happens ``shift_us`` later, and so does the
    device work those launched (work launched before runs when it ran); ``stretch``: the host ranges
    that held ``t0`` grow by as much (an op that ran longer), rather than staying as they were (a stall
    between events)."""
    host = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("cat") not in DEVICE_CATS]
    late = {(e.get("args") or {}).get("correlation") for e in host
            if e["ts"] >= t0 and e.get("cat") in ("cuda_runtime", "cuda_driver")} - {None}
    for e in host:
        if e["ts"] >= t0:
            e["ts"] += shift_us
        elif stretch and e.get("ph") == "X" and e["ts"] + e.get("dur", 0) >= t0:
            e["dur"] += shift_us
    for e in events:
        if e.get("cat") in DEVICE_CATS and (e.get("args") or {}).get("correlation") in late:
            e["ts"] += shift_us


def _shift_rank(src: Path, dst: Path, from_step: str, shift_us: float) -> None:
    """A copy of a rank trace whose host stalled ``shift_us`` at the start of step ``from_step``
    (:func:`delay_host`)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    delay_host(events, min(e["ts"] for e in events if e.get("name") == from_step), shift_us)
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_a_synthetic_slow_rank_is_last_on_every_collective_it_delays(ddp, ddp_report, tmp_path, capsys):
    before = {(c["step"], c["name"], c["index"]): c for c in ddp_report["collectives"]}
    shift_ms = 100.0
    shutil.copy(ddp / "bert_ddp_train_rank1.json.gz", tmp_path / "bert_ddp_train_rank1.json.gz")
    _shift_rank(ddp / "bert_ddp_train_rank0.json.gz", tmp_path / "bert_ddp_train_rank0.json.gz", "ProfilerStep#4",
                shift_ms * 1000)
    d = _batch(capsys, tmp_path)
    calls = d["collectives"]
    assert {(c["step"], c["name"], c["index"]) for c in calls} == set(before)
    delayed = [c for c in calls if c["step"] in ("ProfilerStep#4", "ProfilerStep#5")]
    kept = [c for c in calls if c["step"] == "ProfilerStep#3"]
    assert delayed and kept
    for c in delayed:  # rank 0 now arrives last on every call after its stall, by about the stall
        assert c["last_rank"] == 0, c
        assert c["skew_us"] > shift_ms * 1000 - before[(c["step"], c["name"], c["index"])]["skew_us"] - 1
        # (rank 1's waits stay bounded by its recorded kernels, which ended as they did in the real run)
    for c in kept:  # the calls before it are as they were
        b = before[(c["step"], c["name"], c["index"])]
        assert (c["last_rank"], c["skew_us"], c["wait_us"]) == (b["last_rank"], b["skew_us"], b["wait_us"])
    rows = {r["rank"]: r["collectives"] for r in d["ranks"]["ranks"]}
    assert rows[0]["last"] >= len(delayed)


def test_hta_nccl_rank_records_and_bus_bandwidth():
    """HTA's NCCL test trace is one rank of two: its records read whole, and the bus-bandwidth factors
    of nccl-tests."""
    path = shared("external", "hta", "nccl_parser_config__nccl_data.json.gz")
    rec = read_collective_records(path)
    raw = _args_kernels(path)
    kernels = rec.filter(pl.col("source") == "kernel")
    assert kernels.height == len(raw) > 0
    assert sorted(kernels["correlation"].to_list()) == sorted(e["args"]["correlation"] for e in raw)
    assert Counter(kernels["name"]) == Counter(e["args"]["Collective name"] for e in raw)
    assert set(kernels["pg"]) == {"0"} and set(kernels["group_size"]) == {2}
    # a one-rank batch has no collectives view (nothing to match)
    d = nongemm_trace.analyze(path)
    assert d.gpu_time_ns > 0
    f = pl.select(busbw_factor(pl.lit(k), pl.lit(8)).alias(k) for k in
                  ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall")).row(0, named=True)
    assert f == {"allreduce": 2 * 7 / 8, "allgather": 7 / 8, "reducescatter": 7 / 8, "broadcast": 1.0,
                 "reduce": 1.0, "alltoall": 7 / 8}
    names = pl.Series(["all_gather", "_allgather_base", "reduce_scatter_tensor_coalesced", "ALLREDUCE"])
    assert pl.select(kind_of(pl.lit(names))).to_series().to_list() == [
        "allgather", "allgather", "reducescatter", "allreduce"]



def test_parquet_dataset_has_the_collectives(ddp, ddp_report, tmp_path):
    """``-o DIR --format parquet``: ``table=collectives``, one row per call and rank, as the JSON says."""
    calls = ddp_report["collectives"]
    assert main(["analyze", str(ddp), "--format", "parquet", "-o", str(tmp_path / "ds"), "--quiet",
                 "--workers", "1"]) == 0
    df = pl.read_parquet(tmp_path / "ds" / "table=collectives" / "*.parquet").sort("call", "rank")
    assert df.height == sum(len(c["ranks"]) for c in calls)
    for (i, rank), rows in df.group_by(["call", "rank"], maintain_order=True):
        c = calls[i]
        j = c["ranks"].index(rank)
        assert rows["wait_us"][0] == c["wait_us"][j] and rows["start_ns"][0] == c["start_ns"][j]
        assert (rows["name"][0], rows["skew_us"][0], rows["last_rank"][0]) == (c["name"], c["skew_us"], c["last_rank"])
        assert rows["late_work"].to_list()[0] == c["late_work"]


def test_a_small_bandwidth_is_not_written_as_zero():
    """A few hundred bytes over a CPU collective that waited milliseconds (gloo on a loaded machine) is
    a bandwidth of 1e-4 GB/s: three significant digits below 0.1 GB/s, three decimals above."""
    from nongemm_trace.runs.collectives import _gbps

    assert _gbps(0.000123456) == 0.000123 and _gbps(0.0456789) == 0.0457
    assert _gbps(251.123456) == 251.123 and _gbps(1.23456) == 1.235
    assert _gbps(None) is None and _gbps(0.0) == 0.0
