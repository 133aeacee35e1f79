"""``whatif --autocast``'s attention (nongemm_trace/analyses/latency/fused_attention.py): an fp32
``scaled_dot_product_attention`` that ran its math path runs one fused kernel under autocast. On the
Llama-shaped prefill of the H100 recipe captures (grouped-query attention: math path in fp32, cuDNN
attention in the bf16 capture of the same loop), every math call is found, its host work and
non-GEMM kernels give way to one fused call, and the what-if's step is shorter than with the math
path kept; a trace whose attention ran fused already is left as it was."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES

from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import autocast, whatif_analysis
from nongemm_trace.pipeline.analysis import Analysis

RECIPE = SAMPLES / "recipe_h100"
MATH = RECIPE / "llama_prefill_bs1_s512__fp32.json.gz"
FUSED = RECIPE / "gpt2_bs8_s256__fp32.json.gz"


def _without_fusion(monkeypatch) -> None:
    plain = {k: v for k, v in autocast.facts().items() if k != "fused_attention"}
    monkeypatch.setattr(autocast, "facts", lambda: plain)


def _whatif(path, **kw) -> dict:
    return whatif_analysis(Analysis(path), WhatIfParams(scale=("GEMM=0.5",), autocast="bf16", **kw)).to_dict()


def test_every_math_attention_call_is_found():
    a = Analysis(MATH)
    ops = a.linked().ops
    recorded = ops.filter(pl.col("name") == "aten::_scaled_dot_product_attention_math").height
    assert recorded == 24  # 8 layers x 3 steps
    cpu = ops.filter(pl.col("cat").cast(pl.String) == "cpu_op").select(
        "op_id", "parent_id", "depth", pl.col("name").cast(pl.String))
    acts = a.activities("launch").select(pl.int_range(pl.len()).alias("row"), "activity_id", "class")
    launch_op_of = a.activities("launch").select("activity_id", "launch_op_id").drop_nulls()
    from nongemm_trace.analyses.latency.fused_attention import find_math_attention

    math = find_math_attention(cpu, acts, launch_op_of, autocast.facts())
    assert math.calls == recorded
    dropped = acts.filter(pl.col("row").is_in(list(math.acts)))
    assert dropped.height > 0 and set(dropped["class"]) <= {"non-GEMM", "transfer", "unclassified"}


def test_the_fused_call_takes_the_math_paths_place(monkeypatch):
    fused = _whatif(MATH)
    _without_fusion(monkeypatch)
    kept = _whatif(MATH)
    assert fused["measured_us"] == kept["measured_us"]
    assert fused["predicted_us"] < kept["predicted_us"]
    assert fused["predicted_unprofiled_step_us"] < kept["predicted_unprofiled_step_us"]
    # one fused call costs host time: the saving is less than the math path's whole host time
    assert fused["predicted_us"] > 0.5 * kept["predicted_us"]


@pytest.mark.parametrize("path", [FUSED])
def test_a_trace_without_the_math_path_is_unchanged(monkeypatch, path):
    fused = _whatif(path)
    _without_fusion(monkeypatch)
    assert _whatif(path) == fused
