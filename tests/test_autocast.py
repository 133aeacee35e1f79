"""``whatif --autocast`` (nongemm_trace/analyses/latency/autocast.py) on the fp32/bf16 H200 pairs of
sample_traces/unprofiled and the held-out ones of sample_traces/unprofiled_heldout: the casts it
finds in the fp32 trace are the casts the bf16 run recorded, its prediction of the bf16 run without
the profiler is closer than the device-time scales alone, casts only add time, and a trace that
already ran in a lower precision is refused."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import SAMPLES

from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import whatif_analysis
from nongemm_trace.analyses.latency.unprofiled import METADATA_KEY
from nongemm_trace.cli import main
from nongemm_trace.pipeline.analysis import Analysis

CAPS = SAMPLES / "unprofiled"
PAIRS = sorted({p.name.split("__")[0] for p in CAPS.glob("*__bf16__shapes.json.gz")})
HELD_OUT = SAMPLES / "unprofiled_heldout"
ALL_PAIRS = [(CAPS, w) for w in PAIRS] + [
    (HELD_OUT, p.name.split("__")[0]) for p in sorted(HELD_OUT.glob("*__bf16__shapes.json.gz"))]


def _casts_recorded(path) -> float:
    """The casts per step the bf16 run recorded: its ``aten::_to_copy`` ops inside the steps."""
    ops = Analysis(path).linked().ops
    steps = ops.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep"))
    copies = ops.filter(pl.col("name") == "aten::_to_copy").join_asof(
        steps.select("ts_ns", pl.col("end_ns").alias("step_end")).sort("ts_ns"), on="ts_ns").filter(
        pl.col("ts_ns") < pl.col("step_end"))
    return copies.height / steps.height


def _class_per_step(path) -> dict[str, float]:
    from nongemm_trace import analyze

    rep = analyze(path)
    return {r["class"]: r["time_ns"] / rep.steps.height for r in rep.classes.iter_rows(named=True)}


def test_the_pairs_are_there():
    assert len(PAIRS) >= 2 and len(ALL_PAIRS) >= 5, ALL_PAIRS


@pytest.mark.parametrize(("caps", "workload"), ALL_PAIRS, ids=[f"{c.name}-{w}" for c, w in ALL_PAIRS])
def test_the_casts_found_are_the_casts_the_bf16_run_added(caps, workload):
    """Weights and biases, activations after fp32 and broadcasting ops, every reader of one fp32
    activation (BERT's query, key and value projections), on models the rules were not made on."""
    rep = whatif_analysis(caps / f"{workload}__fp32__shapes.json.gz", WhatIfParams(autocast="bf16")).to_dict()
    found = [s["casts"] for s in rep["autocast_casts"]]
    assert found and max(found) - min(found) <= 1, found  # the same every step (the first may cast its input)
    # the casts the bf16 run added (an fp32 run makes some of its own: a mask built as a tensor)
    slow, fast = caps / f"{workload}__fp32__shapes.json.gz", caps / f"{workload}__bf16__shapes.json.gz"
    added = _casts_recorded(fast) - _casts_recorded(slow)
    assert abs(sum(found) / len(found) - added) <= 0.10 * added, (found, added)


@pytest.mark.parametrize("workload", PAIRS)
def test_autocast_predicts_the_bf16_run_better_than_the_scales_alone(workload):
    """From the fp32 trace alone, with the GEMM and non-GEMM time ratios of the two traces: the bf16
    run without the profiler (its own measurement, CUDA events around its window, in the capturing process:
    the profiler attached, so the attached process's answer)."""
    slow, fast = CAPS / f"{workload}__fp32__shapes.json.gz", CAPS / f"{workload}__bf16__shapes.json.gz"
    truth = Analysis(fast).trace().metadata[METADATA_KEY]["step_us"]
    a, b = _class_per_step(slow), _class_per_step(fast)
    scales = [f"GEMM={b['GEMM'] / a['GEMM']:.4f}", f"non-GEMM={b['non-GEMM'] / a['non-GEMM']:.4f}"]
    errors = {}
    for autocast in (None, "bf16"):
        alone = Analysis(slow)
        del alone.trace().metadata[METADATA_KEY]
        rep = whatif_analysis(alone, WhatIfParams(scale=scales, autocast=autocast, attached=True)).to_dict()
        errors[autocast] = abs(rep["predicted_unprofiled_step_us"] / truth - 1)
    assert errors["bf16"] < errors[None], errors
    assert errors["bf16"] <= 0.30, errors


def test_casts_only_add_time():
    path = CAPS / f"{PAIRS[0]}__fp32__shapes.json.gz"
    plain = whatif_analysis(path).to_dict()
    cast = whatif_analysis(path, WhatIfParams(autocast="fp16")).to_dict()
    assert plain["predicted_us"] == pytest.approx(plain["measured_us"], abs=0.01)
    assert cast["predicted_us"] > plain["predicted_us"]
    assert cast["predicted_unprofiled_step_us"] > plain["predicted_unprofiled_step_us"]
    for p, c in zip(plain["steps"], cast["steps"]):
        assert c["predicted_us"] >= p["predicted_us"]


def test_a_trace_already_in_a_lower_precision_is_refused(capsys):
    path = CAPS / f"{PAIRS[0]}__bf16__shapes.json.gz"
    assert main(["whatif", str(path), "--autocast", "bf16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already take bf16/fp16 inputs" in err[0] and path.name in err[0]


RECIPE_PAIRS = [(SAMPLES / s, w) for s in ("recipe_h100", "recipe_h200")
                for w in ("gpt2_bs8_s256", "vit_b16_bs16", "wrn50_2_bs16", "llama_prefill_bs1_s512")]


@pytest.mark.parametrize(("caps", "workload"), RECIPE_PAIRS, ids=[f"{c.name}-{w}" for c, w in RECIPE_PAIRS])
def test_the_casts_found_without_recorded_shapes(caps, workload):
    """A trace captured without ``record_shapes`` holds no input types: a linear's bias is known from the
    call it ran (Llama-shaped projections have none), the query, key and value projections of one
    input are told by their name and the views between them, and an attention call's three inputs
    are cast together. Held to a quarter (a rotary embedding's fp32 product is unseen without shapes)."""
    slow, fast = caps / f"{workload}__fp32.json.gz", caps / f"{workload}__bf16.json.gz"
    found = [s["casts"] for s in whatif_analysis(slow, WhatIfParams(autocast="bf16")).to_dict()["autocast_casts"]]
    added = _casts_recorded(fast) - _casts_recorded(slow)
    assert abs(sum(found) / len(found) - added) <= 0.25 * added, (found, added)


def _batch_norms_per_step(path) -> float:
    ops = Analysis(path).linked().ops
    steps = ops.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep")).height
    return ops.filter(pl.col("name") == "aten::native_batch_norm").height / steps


def test_a_batch_norm_after_a_conv_costs_more_under_autocast():
    """A batch norm takes a conv's bf16 result with fp32 weights, which cuDNN's kernel does not: the bf16
    run of Wide-ResNet-50-2 (H100 recipe set 1) runs PyTorch's own batch norm with a copy of its
    statistics in each of the 53 the fp32 run ran in cuDNN. The what-if adds that host work to each of
    them, at the trace's own cost per event, and a copy kernel; a model with no batch norm gets none."""
    from nongemm_trace.analyses.latency import graph_of
    from nongemm_trace.analyses.latency.autocast import facts
    from nongemm_trace.analyses.latency.whatif import autocast_casts

    fp32, bf16 = (SAMPLES / "recipe_h100" / f"wrn50_2_bs16__{v}.json.gz" for v in ("fp32", "bf16"))
    extra = facts()["lower_input_events"]["aten::batch_norm"]
    a, g, sel, _ = graph_of(fp32)
    casts = autocast_casts(a.context(), g, sel, "bf16", fp32)
    per_step = casts.host.filter(pl.col("events") == extra).group_by("step").len()["len"].to_list()
    assert per_step == [round(_batch_norms_per_step(bf16))] * g.steps.height == [53] * 3
    a, g, sel, _ = graph_of(SAMPLES / "recipe_h100" / "vit_b16_bs16__fp32.json.gz")
    assert autocast_casts(a.context(), g, sel, "bf16", "vit").host.filter(pl.col("events") == extra).height == 0
