"""Calibration anchors: told the unchanged run's step without the profiler, every figure of that run
equals it (whatever part of it the host's cost can explain: host-bound, device-bound, shorter or
longer than the profiled step), and a change that only speeds work up never predicts a slower step.
On the bundled samples with unprofiled rounds (device-bound ResNet-50, host-bound BERT bs1)."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES

from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis
from nongemm_trace.pipeline.analysis import Analysis

SAMPLES_WITH_ROUNDS = ["unprofiled/bert_bs1_s32__fp32__plain.json.gz",
                       "unprofiled/resnet50_bs32__fp32__plain.json.gz"]
#: the told step as a share of the trace's own estimate: far shorter, a little shorter, longer, far longer
TOLD = [0.2, 0.9, 1.3, 6.0]


def _estimate(a: Analysis) -> float:
    return whatif_analysis(a, WhatIfParams(scale={"GEMM": 1})).to_dict()["unprofiled_step_us"]


@pytest.mark.parametrize("name", SAMPLES_WITH_ROUNDS)
@pytest.mark.parametrize("share", TOLD)
def test_the_unchanged_prediction_equals_the_told_step(name, share):
    a = Analysis(SAMPLES / name)
    told = round(_estimate(a) * share, 1)
    w = whatif_analysis(a, WhatIfParams(scale={"GEMM": 1}, unprofiled_step_us=told)).to_dict()
    assert w["unprofiled"]["source"] == "measured"
    assert w["unprofiled_step_us"] == pytest.approx(told, rel=1e-3)
    assert w["predicted_unprofiled_step_us"] == pytest.approx(told, rel=1e-3)
    lat = latency_analysis(a, unprofiled_step_us=told).to_dict()
    assert lat["unprofiled"]["step_us"] == pytest.approx(told, rel=1e-3)


@pytest.mark.parametrize("name", SAMPLES_WITH_ROUNDS)
@pytest.mark.parametrize("share", TOLD)
@pytest.mark.parametrize("scales", [{"GEMM": 0.5}, {"GEMM": 0.9, "activation": 0.2}, {"GEMM": 1e-3}])
def test_a_speed_up_never_predicts_a_slower_step_than_told(name, share, scales):
    a = Analysis(SAMPLES / name)
    told = round(_estimate(a) * share, 1)
    w = whatif_analysis(a, WhatIfParams(scale=scales, unprofiled_step_us=told)).to_dict()
    assert w["predicted_unprofiled_step_us"] <= told * (1 + 1e-4)
    for s in w["steps"]:
        assert s["predicted_unprofiled_us"] <= s["unprofiled_us"]


def test_the_device_scale_is_reported_when_the_host_cannot_reach_the_told_step():
    a = Analysis(SAMPLES / SAMPLES_WITH_ROUNDS[1])
    est = _estimate(a)
    half = WhatIfParams(scale={"GEMM": 1}, unprofiled_step_us=round(est * 0.5, 1))
    u = whatif_analysis(a, half).to_dict()["unprofiled"]
    assert u["device_scale"] < 1
    assert "device durations scaled" in (u["note"] or "")
    plain = whatif_analysis(Analysis(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"),
                            WhatIfParams(scale={"GEMM": 1})).to_dict()
    assert plain["unprofiled"]["source"] == "estimated"  # nothing told, nothing anchored
    assert plain["unprofiled"]["device_scale"] == 1 and plain["unprofiled"]["anchor"] == 1


def test_a_device_bound_estimate_the_device_cannot_explain_calibrates_the_host():
    """H100 recipe capture (second set) of ResNet-18 b1 (eager): the model's estimate (1,464 us) is
    device-bound by a hair, and its step hardly moves with the device. Told the step its process ran
    before any capture (1,257.7 us, the median of those rounds), the device alone would need a fraction
    of its durations; the host's cost is calibrated instead, and ``--graphs`` told stays where it is from
    the trace alone (the real graph replay's step is 1,197 us)."""
    a = Analysis(SAMPLES / "recipe_h100_rerun" / "resnet18_bs1__eager.json.gz")
    alone = whatif_analysis(a, WhatIfParams(graphs=True)).to_dict()
    w = whatif_analysis(a, WhatIfParams(graphs=True, unprofiled_step_us=1257.7)).to_dict()
    assert w["unprofiled"]["calibration_k"] > 1.0
    assert 0.8 <= w["unprofiled"]["device_scale"] <= 1.25
    assert w["predicted_unprofiled_step_us"] == pytest.approx(alone["predicted_unprofiled_step_us"], rel=0.1)


def test_a_told_step_longer_than_the_profiled_run_is_the_hosts():
    """H100 recipe capture (set 4) of BERT-base b1 s32 fp32 under ``profile_memory``: host-bound, its host
    faster in the capture's window than over the 7 rounds that timed the real step (7,717 us, longer than
    every profiled step, 6,778-7,149 us). Only a slower host explains that: the host's time takes the
    difference, not the device's. Scaled by up to 4 to reach such a step, the device once made
    ``--graphs`` told predict a GPT-2 b1 graph replay at 7,486 us, measured at 1,979 us."""
    path = SAMPLES / "recipe_h100_set4" / "bert_bs1_s32__fp32__memory.json.gz"
    real = json.loads((path.parent / "truth.json").read_text())[path.name]["truth_step_us"]
    a = Analysis(path)
    u = latency_analysis(a, unprofiled_step_us=real).unprofiled
    assert u["step_us"] == pytest.approx(real, rel=1e-3)
    assert u["host_scale"] > 1.0 and u["device_scale"] == 1.0 and u["calibration_k"] == 1.0
    assert "host ran slower" in u["note"]
    alone = whatif_analysis(a, WhatIfParams(graphs=True)).to_dict()["predicted_unprofiled_step_us"]
    told = whatif_analysis(a, WhatIfParams(graphs=True, unprofiled_step_us=real)).to_dict()
    assert told["predicted_unprofiled_step_us"] == pytest.approx(alone, rel=0.1)
    assert told["predicted_unprofiled_step_us"] < real / 2


def test_a_host_paced_step_the_device_cannot_explain_leaves_the_device_alone():
    """H200 ResNet-18 b1 eager under ``record_shapes`` (sample_traces/unprofiled, a synchronize per step):
    calibrated on its rounds' host issue time, the replay is 1.3 % longer than the measured step. The
    device, which does not pace the step, once took the difference: scaled to a quarter of its durations
    (the search range's end), so that ``--graphs`` predicted 256 us for a graph replay measured at 492 us.
    The anchor closes it alone, and the graph replay's device stays the trace's."""
    a = Analysis(SAMPLES / "unprofiled" / "resnet18_bs1__eager__shapes.json.gz")
    w = whatif_analysis(a, WhatIfParams(graphs=True)).to_dict()
    u = w["unprofiled"]
    assert u["source"] == "measured" and u["device_scale"] == 1.0 and u["anchor"] < 1.0
    assert w["unprofiled_step_us"] == pytest.approx(u["measured_step_us"], rel=1e-3)
    assert w["predicted_unprofiled_step_us"] == pytest.approx(492.5, rel=0.1)  # the graph run's rounds
