"""CPU time per op (``cpu_time_*`` / ``self_cpu_time_*``) on a real CPU-only trace and on the
bundled BERT sample: the numbers (a stack walk over the raw events), the CPU tables of the CPU
metric, every output format, and the kept-steps window. torch.profiler's key_averages on the
H200 traces: tests/test_references.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import shared
from test_references import stack_walk_cpu

import nongemm_trace
from nongemm_trace import AnalysisOptions, cli

BERT = Path(__file__).resolve().parent.parent / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz"


@pytest.fixture(scope="module")
def cpu_only():
    path = shared("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    return path, nongemm_trace.analyze(path)


def test_cpu_only_trace_ops_carry_their_cpu_times(cpu_only):
    """Three threads: a ProfilerStep on the main thread, gloo all-reduces on two others: a call's
    children are on its own thread only (the step keeps its whole duration as self time)."""
    path, rep = cpu_only
    assert rep.metric == "cpu" and rep.gpu_activities == 0
    want_cpu, want_self, _ = stack_walk_cpu(path)
    g = rep.ops.group_by("op").agg(pl.col("cpu_time_ns").sum(), pl.col("self_cpu_time_ns").sum(), pl.col("calls").sum())
    got = {n: (c, s, k) for n, c, s, k in g.iter_rows()}
    assert {n: v[:2] for n, v in got.items()} == {n: (want_cpu[n], want_self[n]) for n in want_cpu}
    assert got["gloo:all_reduce"][2] == 10 and got["ProfilerStep*"][1] == got["ProfilerStep*"][0] > 0
    # the CPU metric's categories are the ops' self CPU time (no runtime calls here), wrappers left out
    real = rep.ops.filter(~pl.col("wrapper")).group_by("category").agg(pl.col("self_cpu_time_ns").sum())
    assert dict(real.iter_rows()) == {c: t for c, t in rep.categories.select("category", "time_ns").iter_rows() if t}
    assert rep.ops["self_cpu_time_ns"].to_list() == sorted(rep.ops["self_cpu_time_ns"].to_list(), reverse=True)


def test_cpu_only_top_ops_table_is_on_cpu_columns(cpu_only, capsys):
    path, rep = cpu_only
    assert cli.main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    table = out.split("Top 15 ops by self CPU time", 1)[1].split("Steps", 1)[0]
    assert "GPU" not in table and "CPU time (us)" in table and "self CPU (us)" in table
    row = rep.ops.filter(pl.col("op") == "gloo:all_reduce").row(0, named=True)
    assert f"{row['self_cpu_time_ns'] / 1000:,.1f}" in table
    assert "ProfilerStep" not in table  # a wrapper: not counted by the CPU metric either
    assert cli.main(["analyze", str(path), "--format", "json"]) == 0
    ops = {r["op"]: r for r in json.loads(capsys.readouterr().out)["ops"]}
    assert ops["gloo:all_reduce"]["self_cpu_time_us"] == round(row["self_cpu_time_ns"] / 1000, 3)
    assert cli.main(["analyze", str(path), "--format", "csv", "--table", "ops"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    gloo = next(r for r in rows if r["op"] == "gloo:all_reduce")
    assert float(gloo["cpu_time_us"]) == round(row["cpu_time_ns"] / 1000, 3)


def test_cpu_columns_at_every_level_and_metric(capsys):
    """Each call's CPU time is in one row of its name, whichever category rows the level makes;
    under the CPU metric the table sorts and shows CPU columns, GPU columns beside them."""
    an = nongemm_trace.Analysis(BERT)
    by_name = {}
    for level in ("launch", "top"):
        for metric in ("gpu", "cpu"):
            ops = an.report(AnalysisOptions(level=level, metric=metric)).ops
            by_name[level, metric] = dict(ops.group_by("op").agg(pl.col("cpu_time_ns").sum(),
                                                                 pl.col("self_cpu_time_ns").sum()).rows_by_key("op",
                                                                                                               unique=True))
    assert len({json.dumps(v, sort_keys=True) for v in by_name.values()}) == 1
    assert by_name["launch", "gpu"]["aten::addmm"][0] > 0
    assert cli.main(["analyze", str(BERT), "--metric", "cpu", "--top", "5"]) == 0
    table = capsys.readouterr().out.split("Top 5 ops by self CPU time", 1)[1].split("Top 5 kernels", 1)[0]
    assert "self GPU (us)" in table and "aten::addmm" in table
    assert cli.main(["analyze", str(BERT), "--metric", "cpu", "--top", "5", "--format", "markdown"]) == 0
    md = capsys.readouterr().out.split("Top 5 ops by self CPU time:", 1)[1]
    assert "| self CPU time (us) |" in md and "`aten::addmm`" in md and "## step ##" not in md


def test_skipped_steps_leave_their_cpu_time_out():
    full = nongemm_trace.analyze(BERT)
    kept = nongemm_trace.analyze(BERT, skip_steps=1)
    step = kept.steps.filter(pl.col("step") == 1)["cpu_time_ns"].item()
    marker = kept.step_marker
    assert kept.ops.filter(pl.col("op") == marker)["cpu_time_ns"].sum() == step
    assert 0 < kept.ops["self_cpu_time_ns"].sum() < full.ops["self_cpu_time_ns"].sum()


def test_cpu_metric_reads_the_calls_categories_of_the_gpu_metric():
    """One rule for every metric: under ``--metric cpu`` a written-out RMSNorm's calls count their
    host time in normalization, as their kernels do under the GPU metric."""
    path = shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz")
    a = nongemm_trace.Analysis(path)
    from nongemm_trace.metrics.breakdown import cpu_op_times

    linked = a.linked()
    rows = cpu_op_times(linked.ops, "launch", a.taxonomy.semantics.generic_categories).join(
        linked.ops.select("op_id", "name"), on="op_id")
    rsqrt = rows.filter(pl.col("name") == "aten::rsqrt")
    gpu = a.activities("launch").filter(pl.col("launch_op") == "aten::rsqrt")
    assert rsqrt.height and set(rsqrt["category"]) == set(gpu["category"]) == {"normalization"}
    cats = dict(a.report(AnalysisOptions(metric="cpu")).categories.select("category", "time_ns").iter_rows())
    assert cats["normalization"] >= int(rsqrt["cpu_ns"].sum())

def test_cpu_metric_header_counts_op_calls(capsys):
    from nongemm_trace.cli import main
    path = shared("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert main(["analyze", str(path)]) == 0
    total = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("total:"))
    assert "op calls" in total and "GPU activities" not in total
