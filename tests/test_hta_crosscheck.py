"""Cross-check against Holistic Trace Analysis (the [hta] extra) on real traces.

HTA parses the same files independently (pandas); its kernel table must hold the
same GPU activities, and its per-kernel-type sums (COMMUNICATION, MEMORY) must
match our communication category and our memcpy/memset activities. HTA keeps
durations in whole microseconds (start and end floored), so each activity agrees
within 2 us and sums within 1 us per activity.
"""

from __future__ import annotations

import shutil

import polars as pl
import pytest
from conftest import shared

import nongemm_trace


@pytest.fixture(scope="module")
def hta():
    """HTA (and pandas under it), imported where these tests run, not while every worker collects."""
    return pytest.importorskip("hta.trace_analysis", reason="Holistic Trace Analysis not installed ([hta] extra)")


CASES = [("h200", "bert_base_fp32_bs8_s128__eager.json.gz"), ("h200x2", "bert_ddp_train_rank0.json.gz"),
         ("external/tracelens", "h100__gaunernst_bert-small-uncased__1016001.json.gz")]


@pytest.mark.hta
@pytest.mark.parametrize("sub,name", CASES, ids=[c[1][:40] for c in CASES])
def test_matches_hta(tmp_path, sub, name, hta):
    src = shared(*sub.split("/"), name)
    d = tmp_path / "trace"
    d.mkdir()
    shutil.copy(src, d / name)
    ta = hta.TraceAnalysis(trace_dir=str(d))
    rank = next(iter(ta.t.get_all_traces()))
    df = ta.t.get_trace(rank)
    sym = ta.t.symbol_table.get_sym_table()
    hta_df = pl.DataFrame({"name": [sym[i] for i in df["name"]], "cat": [sym[i] for i in df["cat"]],
                           "ts_us": df["ts"].to_numpy().astype("int64"), "dur_us": df["dur"].to_numpy()})
    gpu = hta_df.filter(pl.col("cat").is_in(["kernel", "gpu_memcpy", "gpu_memset"]))
    rep = nongemm_trace.analyze(src)
    assert gpu.height > 50
    # HTA shifts times to start at its trace's first event, in whole microseconds (floor):
    # find that constant shift from HTA's first activity, taking the one that matches most
    ours_us = rep.kernels.with_columns((pl.col("ts_ns") // 1000).alias("abs_us"))
    first = gpu.sort("ts_us").row(0, named=True)
    shifts = ours_us.filter(pl.col("name") == first["name"])["abs_us"] - first["ts_us"]
    best = max(shifts.unique().to_list(), key=lambda s: gpu.join(
        ours_us.with_columns((pl.col("abs_us") - s).alias("ts_us")), on=["name", "ts_us"], how="semi").height)
    ours = ours_us.with_columns((pl.col("abs_us") - best).alias("ts_us"))
    # every activity HTA keeps is one of ours, with the same duration (HTA: whole microseconds)
    # (HTA floors start and end separately: starts within 1 us, durations within 2 us)
    both = gpu.sort("ts_us").join_asof(ours.sort("ts_us"), on="ts_us", by="name", strategy="nearest", tolerance=1)
    assert both["activity_id"].null_count() == 0
    assert both["activity_id"].n_unique() == gpu.height
    assert (both["dur_us"] - both["dur_ns"] / 1000).abs().max() <= 2.0
    # HTA's kernel types against our classes: its COMMUNICATION kernels are our communication
    # category, its MEMORY kernels our memcpy/memset activities
    is_comm_hta = both["name"].str.to_lowercase().str.contains("nccl")
    assert ((both["category"] == "communication") == is_comm_hta).all()
    assert ((both["kind"] != "kernel") == (both["cat"] != "kernel")).all()
    if gpu.height == rep.gpu_activities:  # HTA kept the whole file: totals agree too
        kt, _ = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
        total_hta = float(kt["sum"].sum())
        assert total_hta == pytest.approx(rep.gpu_time_ns / 1000, abs=gpu.height)
