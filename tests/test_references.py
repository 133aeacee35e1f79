"""Checks against independent references on real traces.

* torch.profiler's own key_averages (``*.meta.json``): self device time, CPU time and self
  CPU time per op name.
* the files themselves: total GPU activity time, to the nanosecond; per-op CPU times from a
  plain stack walk over the raw events.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from conftest import (
    ACTIVITY_CATS,
    LAUNCH_CATS,
    SHARED,
    kineto_traces,
    ns,
    raw_activity_total_ns,
    raw_events,
    shared,
    trace_ids,
)

import nongemm_trace
from nongemm_trace import AnalysisOptions
from nongemm_trace.pipeline.analysis import Analysis

H200 = sorted((SHARED / "h200").glob("*.json.gz")) if (SHARED / "h200").is_dir() else []
#: the project's own H200 captures with their key_averages (sample_traces/collected/*.meta.json): an
#: embedding bag + cuDNN LSTM training step (profile_memory, with_flops), a Mixtral-style MoE
#: (grouped GEMMs, top-k routing) and a torch.compile'd GPT-2 training step (Inductor backward)
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
CAPTURED = sorted(p.with_name(p.name.replace(".meta.json", ".json.gz"))
                  for p in (SAMPLES / "collected").glob("*.meta.json"))
ALL = kineto_traces()
OP_CATS = {"cpu_op", "user_annotation"}


@cache
def opened(path: Path) -> Analysis:
    """One analysis per file for this module's tests (``analyze(path, **options)`` is
    ``Analysis(path).report(**options)``): loaded and linked once for every report asked of it."""
    return Analysis(path)


def default_report(path: Path):
    """``analyze(path)`` with the default options, once per file for this module's tests."""
    return opened(path).report()


@pytest.mark.parametrize("path", H200 + CAPTURED, ids=trace_ids(H200 + CAPTURED))
def test_self_gpu_time_matches_profiler_key_averages(path):
    meta = json.loads(path.with_name(path.name.replace(".json.gz", ".meta.json")).read_text())
    cpu_op_names = {e["name"] for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    rep = default_report(path)
    self_us = dict(rep.ops.group_by("op").agg(pl.col("self_gpu_time_ns").sum() / 1000).iter_rows())
    checked = 0
    for row in meta["key_averages"]:
        if row["key"] not in cpu_op_names:
            continue  # annotations and kernels are not ops
        checked += 1
        want = row["self_device_time_total_us"]
        got = self_us.get(row["key"], 0.0)
        assert got == pytest.approx(want, rel=1e-3, abs=0.002), row["key"]
    assert checked >= 4


def stack_walk_cpu(path: Path) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """Per op name from the raw events, by a plain stack walk per thread: CPU time (calls inside
    a call of the same name not counted again), self CPU time (duration minus direct children:
    ops and runtime/driver calls, and the profiler's overhead events, which the innermost op
    holding one on any thread does not own), and the names that have a call inside a same-name call.
    The step ranges ``ProfilerStep#N`` count under one name, ``ProfilerStep*``, as the tool's op table
    (and ``torch.profiler``'s ``key_averages``) groups them."""
    by_thread = defaultdict(list)
    spans, overhead = [], []
    for e in raw_events(str(path)):
        if e.get("ph") == "X" and e.get("dur") is not None and e.get("cat") == "overhead":
            overhead.append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), ns(e["dur"])))
        if e.get("ph") == "X" and e.get("dur") is not None and e.get("cat") in OP_CATS:
            spans.append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
        if e.get("ph") == "X" and e.get("dur") is not None and (e.get("cat") in OP_CATS or e.get("cat") in LAUNCH_CATS):
            name = "ProfilerStep*" if re.fullmatch(r"ProfilerStep#\d+", e["name"]) else e["name"]
            by_thread[(str(e.get("pid")), str(e.get("tid")))].append(
                (ns(e["ts"]), -ns(e["dur"]), e["cat"] in OP_CATS, name))
    cpu, self_, nested = Counter(), Counter(), set()
    for events in by_thread.values():
        stack, open_names = [], Counter()  # stack: [end, name, self] of the open ops
        for ts, neg_dur, is_op, name in sorted(events):
            while stack and stack[-1][0] <= ts:
                end, done, own = stack.pop()
                open_names[done] -= 1
                self_[done] += max(own, 0)
            if stack:
                stack[-1][2] += neg_dur  # a direct child's time is not its parent's own
            if not is_op:
                continue
            if open_names[name]:
                nested.add(name)
            else:
                cpu[name] += -neg_dur
            stack.append([ts - neg_dur, name, -neg_dur])
            open_names[name] += 1
        for _, done, own in stack:
            self_[done] += max(own, 0)
    for start, end, dur in overhead:  # the innermost op holding it: latest start, then earliest end
        holding = [(s, -e, n) for s, e, n in spans if s <= start and e >= end]
        if holding:
            self_[max(holding)[2]] -= dur
    return dict(cpu), dict(self_), nested


def _cpu_by_name(rep) -> tuple[dict[str, int], dict[str, int]]:
    g = rep.ops.group_by("op").agg(pl.col("cpu_time_ns").sum(), pl.col("self_cpu_time_ns").sum())
    return {n: c for n, c, _ in g.iter_rows()}, {n: s for n, _, s in g.iter_rows()}


#: µs: both sides read the same timestamps (whole nanoseconds); torch sums floats (error < 1e-9 us)
KEY_AVERAGES_TOL_US = 0.001


@pytest.mark.parametrize("path", H200 + CAPTURED, ids=trace_ids(H200 + CAPTURED))
def test_cpu_times_per_op_match_a_stack_walk_and_key_averages(path):
    """Each op name's CPU and self CPU time equal a plain stack walk over the file to the
    nanosecond, and torch.profiler's key_averages but for the difference docs/definitions.md explains:
    torch adds a call nested in a same-name call (that has siblings) to the name's time twice. Kineto's
    overhead events (pid -1 in the file) are taken out of the op they interrupted, as torch does
    (``aten::gather`` of the FP8 Llama trace kept 2 ms of one, 31x its self time)."""
    rep = default_report(path)
    cpu, self_ = _cpu_by_name(rep)
    want_cpu, want_self, nested = stack_walk_cpu(path)
    assert {k: v for k, v in cpu.items() if v} == {k: v for k, v in want_cpu.items() if v}
    assert {k: v for k, v in self_.items() if v} == {k: v for k, v in want_self.items() if v}

    meta = json.loads(path.with_name(path.name.replace(".json.gz", ".meta.json")).read_text())
    torch_cpu, torch_self = Counter(), Counter()
    for row in meta["key_averages"]:  # an annotation has a second, GPU-side row with no CPU time
        if row["key"] in cpu:
            torch_cpu[row["key"]] += row["cpu_time_total_us"]
            torch_self[row["key"]] += row["self_cpu_time_total_us"]
    assert len(torch_cpu) >= 5
    tol = KEY_AVERAGES_TOL_US
    for name, theirs in torch_cpu.items():
        ours = cpu[name] / 1000
        if name in nested:  # torch counts between once and twice what we count once
            assert ours - tol <= theirs <= ours + want_cpu.get(name, 0) / 1000 + tol, name
        else:
            assert ours == pytest.approx(theirs, abs=tol), name
    off = {n: self_[n] / 1000 - torch_self[n] for n in torch_self if abs(self_[n] / 1000 - torch_self[n]) > tol}
    assert off == {}


def test_h200_traces_present():
    shared("h200")
    assert len(H200) >= 13


@pytest.mark.parametrize("path", ALL, ids=trace_ids(ALL))
def test_categories_sum_to_file_total(path):
    n, total = raw_activity_total_ns(str(path))
    rep = default_report(path)
    assert rep.gpu_activities == n
    assert rep.gpu_time_ns == total
    assert rep.total_gpu_time_in_file_ns == total
    if rep.metric == "gpu":
        assert int(rep.categories["time_ns"].sum()) == total
        assert int(rep.categories["activities"].sum()) == n
    d = rep.to_dict()
    assert d["gpu_time_us"] == pytest.approx(total / 1000, abs=5e-4)
    if rep.metric == "gpu":
        assert sum(c["gpu_time_us"] for c in d["categories"]) == pytest.approx(d["gpu_time_us"],
                                                                               abs=1e-3 * len(d["categories"]))
    # every activity in exactly one category
    assert rep.kernels.height == n
    assert rep.kernels["category"].null_count() == 0
    assert rep.kernels["activity_id"].n_unique() == n


@pytest.mark.parametrize("path", ALL, ids=trace_ids(ALL))
def test_drop_unlinked_removes_exactly_the_activities_without_launch_call(path):
    events = raw_events(str(path))
    launch_corr = {e.get("args", {}).get("correlation") for e in events
                   if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS}
    orphan_ns = 0
    orphans = 0
    _, total = raw_activity_total_ns(str(path))
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ACTIVITY_CATS and e.get("dur") is not None:
            if e.get("args", {}).get("correlation") not in launch_corr:
                orphans += 1
                orphan_ns += ns(e["dur"])
    rep = opened(path).report(AnalysisOptions(drop_unlinked=True))
    assert rep.gpu_time_ns == total - orphan_ns
    if rep.metric == "gpu" and rep.gpu_activities:
        assert int(rep.categories["time_ns"].sum()) == total - orphan_ns
    full = default_report(path)
    assert full.attribution.get("none", 0) == orphans
    if orphans:
        assert any(w.code == "no_launch_call" and w.count == orphans for w in full.warnings)


def test_captured_samples_present():
    assert len(CAPTURED) >= 3 and all(p.is_file() for p in CAPTURED)


def test_embedding_bag_backward_is_embedding():
    """ATen's embedding-bag backward (``_embedding_bag_dense_backward``: radix sorts, segment
    scans, scatter kernels) is embedding time, not other/memory/arithmetic by its kernels' names."""
    rep = nongemm_trace.analyze(SAMPLES / "collected" / "embbag_lstm_train_bs64__eager.json.gz")
    # the rows of the GPU time each op launched itself (others hold what ops inside it launched)
    got = rep.ops.filter(pl.col("op").str.contains("embedding_bag") & (pl.col("self_gpu_time_ns") > 0))
    pairs = set(zip(got["op"], got["category"]))
    assert pairs == {("aten::_embedding_bag", "embedding"), ("aten::_embedding_bag_dense_backward", "embedding")}, pairs
    assert got["self_gpu_time_ns"].sum() == rep.kernels.filter(
        pl.col("launch_op").str.contains("embedding_bag"))["dur_ns"].sum()
