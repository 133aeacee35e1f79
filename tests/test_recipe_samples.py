"""The recipe captures (sample_traces/recipe_*: bench/capture_recipe.py, issue #41) are what they say they
are: truth.json names every trace of its folder and only those, its figures agree with its own rounds,
every trace holds at least three ``ProfilerStep#N`` steps, and the tool's commands run on them.

Accuracy is not asserted here: bench/recipe_validation.py reports it (docs/latency.md)."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from conftest import SAMPLES

from nongemm_trace.cli import main
from nongemm_trace.pipeline.analysis import Analysis

FOLDERS = sorted(p for p in SAMPLES.glob("recipe_*") if (p / "truth.json").exists())
FIELDS = {"workload", "variant", "kind", "role", "setting", "truth_step_us", "rounds", "steps_per_round", "gpu",
          "torch", "host", "profiler_options"}
FAST = {"tf32": "tf32", "bf16": "bf16", "graphs": "graph"}


def _truth(folder):
    return json.loads((folder / "truth.json").read_text())


def _traces():
    return [(f.name, name) for f in FOLDERS for name in sorted(_truth(f))]


def test_there_are_recipe_samples():
    assert FOLDERS, "no sample_traces/recipe_* folder with a truth.json"
    assert len(_traces()) >= 40


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_truth_is_consistent(folder):
    truth = _truth(folder)
    on_disk = {p.name for p in folder.glob("*.json.gz")}
    assert on_disk == set(truth), "truth.json names exactly the traces of its folder"
    assert len({t["gpu"] for t in truth.values()}) == 1
    assert len({t["torch"] for t in truth.values()}) == 1
    configs = {}
    for name, t in truth.items():
        assert FIELDS <= set(t), name
        assert name == f"{t['workload']}__{t['variant']}" + ("" if t["setting"] == "plain" else f"__{t['setting']}") \
            + ".json.gz"
        assert len(t["rounds"]) == 7 and all(r > 0 for r in t["rounds"])
        assert t["truth_step_us"] == pytest.approx(statistics.median(t["rounds"]), abs=0.01)
        assert t["profiler_options"]["schedule"] == {"wait": 1, "warmup": 1, "active": 3}
        assert t["host"].get("cpu_model") and t["host"].get("probes")
        # every capture of one configuration shares one truth (the run without the profiler has no setting)
        key = (t["workload"], t["variant"])
        assert configs.setdefault(key, (t["truth_step_us"], t["kind"]))[0] == t["truth_step_us"]
    workloads = {w for w, _ in configs}
    assert len(workloads) >= 20
    for (w, _v), (_, kind) in configs.items():
        if kind in FAST:
            assert (w, FAST[kind]) in configs, f"{w}: the pair's other side has no truth"
    kinds = {k for _, k in configs.values()}
    assert {"tf32", "bf16", "graphs"} <= kinds


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_brackets_are_two_unprofiled_rounds(folder):
    """Where a set brackets its captures (one unprofiled round right before and right after each
    window), each holds two step times of the order of its rounds: the same loop, timed the same way."""
    for name, t in _truth(folder).items():
        if "bracket_us" not in t:
            continue
        before, after = t["bracket_us"]
        assert before > 0 and after > 0, name
        assert min(t["rounds"]) / 3 <= before <= max(t["rounds"]) * 3, name
        assert min(t["rounds"]) / 3 <= after <= max(t["rounds"]) * 3, name


@pytest.mark.parametrize("folder,name", _traces())
def test_three_profiler_steps(folder, name):
    """The recipe's ``active=3`` window: ProfilerStep#2..#4, in the raw events and as the tool reads them."""
    path = SAMPLES / folder / name
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = sorted(e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    assert len(steps) >= 3
    if folder != FOLDERS[0].name:  # the second set repeats the first's configurations: read once is enough
        return
    rep = Analysis(path).report()
    assert rep.steps.height >= 3
    assert all(n.startswith("ProfilerStep#") for n in rep.steps["name"])


def _one_per_kind():
    """One trace of each (kind, role, setting), from the first set (the second repeats its configurations)."""
    out = []
    for f in FOLDERS[:1]:
        seen = set()
        for name, t in sorted(_truth(f).items()):
            key = (t["kind"], t["role"], t["setting"])
            if key not in seen:
                seen.add(key)
                out.append((f.name, name, t["kind"], t["role"]))
    return out


@pytest.mark.parametrize("folder,name,kind,role", _one_per_kind())
def test_the_commands_run(folder, name, kind, role, capsys, tmp_path):
    path = str(SAMPLES / folder / name)
    assert main(["analyze", path, "--top", "0"]) == 0
    assert main(["launch", path]) == 0
    assert main(["latency", path, "--format", "json", "-o", str(tmp_path / "lat.json")]) == 0
    lat = json.loads((tmp_path / "lat.json").read_text())
    assert lat["unprofiled"]["step_us"] > 0
    extra = {"graphs": ["--graphs"], "bf16": ["--scale", "GEMM=0.3", "--autocast", "bf16"]}.get(
        kind, ["--scale", "GEMM=0.3"])
    if role != "slow" and kind in ("graphs", "bf16"):
        extra = ["--scale", "GEMM=0.5"]  # a graph replay or a bf16 run: a plain what-if
    truth = _truth(SAMPLES / folder)[name]["truth_step_us"]
    out = tmp_path / "w.json"
    assert main(["whatif", path, *extra, "--unprofiled-step-us", f"{truth:.1f}", "--format", "json",
                 "-o", str(out)]) == 0
    w = json.loads(out.read_text())
    assert w["predicted_unprofiled_step_us"] > 0 and w["unprofiled_source"] == "measured"
    capsys.readouterr()
