"""The ``profile_memory`` factor of the profiler-overhead model, from captures with and without it.

    python3 bench/fit_profile_memory.py DIR [--toml] [--brackets]

DIR holds bench/capture_recipe.py's captures and their ``truth.json``: every ``__memory`` capture (the
``profile_memory=True`` setting) beside its plain twin, the same configuration profiled a few seconds
earlier. ``profile_memory`` records the caching allocator's events inside the ops that allocate, so it
lengthens the ops' and wrappers' own host time; launch calls do not allocate, so their growth between
the twins is the host's own drift (the H100 recipe captures' host changed speed by up to 1.7x within a
minute, and the memory captures came last). Per pair: (op + wrapper host time per step, memory over
plain) / (launch time per step, memory over plain); the factor on the ``op`` and ``wrapper`` shares that
remain without the profiler is 1 over the median of the pairs.

``--brackets`` (captures with ``bracket_us``: one unprofiled round right before and right after each
capture's window) fits the factor on the truth at each capture's own moment instead of the launch calls'
drift: per pair, the factor that gives the memory capture's estimate the same error against its brackets
as the plain twin's estimate has against its own (so that the plain model's own error on that loop is not
charged to ``profile_memory``); the factor is the median over the pairs. The model's factor is this mode's
answer on H100 recipe set 4 (``sample_traces/recipe_h100_set4``); docs/latency.md checks it on set 5 and
the H200 sets.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import warnings

import numpy as np
import polars as pl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

from dataclasses import replace  # noqa: E402

from nongemm_trace.analyses.latency import graph_of  # noqa: E402
from nongemm_trace.analyses.latency.replay import measured_piece_lengths, measured_timeline  # noqa: E402
from nongemm_trace.analyses.latency.unprofiled import model_for, profiler_settings, without_profiler  # noqa: E402


def host_by_kind(path: str) -> dict[str, float]:
    """Host time per step (ns) by piece kind, inside the steps."""
    _, g, _, _ = graph_of(path)
    lengths = measured_piece_lengths(g)
    inside = np.zeros(g.pieces.height, bool)
    for first, last in g.steps.select("first", "last").iter_rows():
        inside[first:last + 1] = True
    n = max(g.steps.height, 1)
    t = pl.DataFrame({"kind": g.pieces["kind"], "len": lengths}).filter(pl.Series(inside))
    return {k: v / n for k, v in t.group_by("kind").agg(pl.col("len").sum()).iter_rows()}


class Estimate:
    """One trace's step without the profiler (us, the mean over its kept steps) under a profile_memory
    factor: the trace loaded and its graph built once, replayed per factor."""

    def __init__(self, path: str) -> None:
        analysis, self.g, sel, _ = graph_of(path)
        self.ctx = analysis.context()
        tl = measured_timeline(self.g)
        self.steps = tl.steps.filter(pl.col("step") >= sel.steps_skipped)
        ops = self.ctx.linked().ops
        shapes = "input_dims" in ops.columns and bool(ops["input_dims"].is_not_null().any())
        # the brackets are timed in the capturing process, after its first window: the profiler attached
        self.base = model_for({**profiler_settings(self.ctx.trace().metadata, shapes), "profile_memory": False},
                              "attached")

    def __call__(self, factor: float) -> float:
        remains = {k: v * (factor if k in ("op", "wrapper") else 1.0) for k, v in self.base.remains.items()}
        un = without_profiler(self.ctx, self.g, self.steps, model=replace(self.base, remains=remains))
        walls = un.timeline.steps.filter(pl.col("step").is_in(self.steps["step"].implode()))["wall"]
        return float(walls.mean()) / 1000.0  # type: ignore[arg-type]


def bracket_factor(folder: str, name: str, twin: str, truth: dict) -> float:
    """The factor that gives ``name`` (a memory capture) its plain twin's error against the brackets."""
    plain_err = Estimate(os.path.join(folder, twin))(1.0) / statistics.fmean(truth[twin]["bracket_us"])
    goal = plain_err * statistics.fmean(truth[name]["bracket_us"])
    est = Estimate(os.path.join(folder, name))
    lo, hi = 0.3, 1.5  # the estimate grows with the factor (more of the ops' time remains)
    for _ in range(14):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if est(mid) < goal else (lo, mid)
    return (lo + hi) / 2


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or not os.path.exists(os.path.join(args[0], "truth.json")):
        print("usage: fit_profile_memory.py DIR [--toml] [--brackets] (DIR with truth.json)", file=sys.stderr)
        return 2
    folder = args[0]
    with open(os.path.join(folder, "truth.json")) as fh:
        truth = json.load(fh)
    ratios = []
    for name, t in sorted(truth.items()):
        if t["setting"] != "memory":
            continue
        twin = next((n for n, u in truth.items() if u["workload"] == t["workload"] and u["variant"] == t["variant"]
                     and u["setting"] == "plain"), None)
        if twin is None:
            continue
        if "--brackets" in args:
            if not (t.get("bracket_us") and truth[twin].get("bracket_us")):
                continue
            f = bracket_factor(folder, name, twin, truth)
            ratios.append(1 / f)
            print(f"{name}: op and wrapper remains x{f:.3f} for its plain twin's error against the brackets")
            continue
        m, p = host_by_kind(os.path.join(folder, name)), host_by_kind(os.path.join(folder, twin))
        ops = (m.get("op", 0) + m.get("wrapper", 0)) / (p.get("op", 0) + p.get("wrapper", 0))
        drift = m.get("launch", 0) / p["launch"]
        ratios.append(ops / drift)
        print(f"{name}: ops x{ops:.3f}, launches x{drift:.3f} (the host's drift), memory events x{ops / drift:.3f}")
    if not ratios:
        print(f"{folder}: no memory capture with a plain twin", file=sys.stderr)
        return 2
    factor = 1 / statistics.median(ratios)
    print(f"median x{statistics.median(ratios):.3f} -> op and wrapper remains x {factor:.3f}")
    if "--toml" in args:
        where = os.path.basename(os.path.normpath(folder)) + (" (brackets)" if "--brackets" in args else "")
        print(f'[profile_memory]\nfit = "{len(ratios)} capture pairs, {where}"\n'
              f"[profile_memory.remains]\nop = {factor:.3f}\nwrapper = {factor:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
