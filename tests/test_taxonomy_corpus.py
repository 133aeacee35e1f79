"""The default taxonomy on every shared trace with GPU activities: at most 1 % of the GPU time
unclassified, and kernels named like GEMMs class GEMM, at the launch and top levels (the rules
themselves: test_taxonomy.py)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from conftest import kineto_traces, trace_ids

from nongemm_trace import AnalysisOptions
from nongemm_trace.pipeline.analysis import Analysis

WITH_GPU = [p for p in kineto_traces() if "cpu_only" not in p.name and "mtia" not in p.name]


@pytest.fixture(scope="module")
def opened():
    """One analysis per trace for this module (``analyze(path, level=…)`` is ``Analysis(path).report(level=…)``):
    the trace is loaded and linked once for both levels and both tests, and let go with the module."""
    kept: dict[Path, Analysis] = {}

    def get(path: Path) -> Analysis:
        if path not in kept:
            kept[path] = Analysis(path)
        return kept[path]

    return get


# -- completeness ---------------------------------------------------------------------------

@pytest.mark.parametrize("level", ["launch", "top"])
@pytest.mark.parametrize("path", WITH_GPU, ids=trace_ids(WITH_GPU))
def test_unclassified_at_most_one_percent(path, level, opened):
    rep = opened(path).report(AnalysisOptions(level=level))
    assert rep.gpu_activities > 0
    unc = rep.kernels.filter(pl.col("category") == "unclassified")["dur_ns"].sum()
    assert unc <= 0.01 * rep.gpu_time_ns, rep.kernels.filter(pl.col("category") == "unclassified")["name"].unique()


# "gemm" but not the fbgemm library's namespace (its kernels are embeddings, permutes, quantization)
GEMM_NAMED = re.compile(r"(^|[^b])gemm|xmma|nvjet|cutlass|Cijk|fmha|flash_fwd|flash_bwd", re.IGNORECASE)
GPU_FAMILIES = [p for p in WITH_GPU if any(s in p.name for s in ("h100__", "h200", "bert_ddp"))
                or p.parent.name == "h200"] + [
    p for p in WITH_GPU if p.name.startswith(("critical_path__alexnet", "nccl_parser", "negative_queue",
                                               "trace_diff", "df_index", "ns_resolution"))]


@pytest.mark.parametrize("path", GPU_FAMILIES, ids=trace_ids(GPU_FAMILIES))
def test_gemm_named_kernels_are_gemm_class(path, opened):
    """H100, H200, A100 and V100 traces: kernels named like cuBLAS/cuDNN/CUTLASS GEMMs or fused
    attention are class GEMM for >= 99 % of their time, at the launch and top levels."""
    for level in ("launch", "top"):
        rep = opened(path).report(AnalysisOptions(level=level))
        k = rep.kernels.filter(pl.col("name").str.contains(GEMM_NAMED.pattern) & pl.col("kind").eq("kernel"))
        if k.height == 0:
            continue
        gemm = k.filter(pl.col("class") == "GEMM")["dur_ns"].sum()
        assert gemm >= 0.99 * k["dur_ns"].sum(), k.filter(pl.col("class") != "GEMM")["name"].unique().to_list()
