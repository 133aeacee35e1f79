"""Fit the profiler's device cost in a CUDA-graph replay on recipe captures, and check it on others.

Activity tracing adds device time to every GPU activity (``activity_ns`` in
``nongemm_trace/devices/profiler_overhead.toml``, fitted on eager H200 captures). A graph replay's
kernels pay less of it, and each replay's first kernel starts several microseconds after the
previous replay's last one while profiled. Two constants model it: ``graph_activity_ns`` per
replayed activity and ``graph_replay_gap_ns`` per replay that was queued. This script takes the
``*__graph.json.gz`` captures of the folders given (``truth.json`` beside them), replays each
without the profiler with the eager constant and no replay gap, and fits the two by least squares
(neither negative) on the first folder: the time to remove per step is ``a x activities + b x replays``. It then
prints each capture's error with the fitted constants, the first folder and the held-out ones::

    PYTHONPATH=. python3 bench/fit_graph_tracing.py sample_traces/recipe_h100 \\
        sample_traces/recipe_h100_rerun sample_traces/recipe_h100_set3
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from nongemm_trace.analyses.latency import graph_of
from nongemm_trace.analyses.latency.graph import graph_replayed
from nongemm_trace.analyses.latency.unprofiled import model_for, profiler_settings, without_profiler
from nongemm_trace.vocabulary import steady_step


def capture_terms(path: Path) -> tuple[float, float, float, float, float]:
    """(replayed activities per step, queued replays per step, the unprofiled step with the eager
    constant and no replay gap (us), the same with the data's constants (us), activity_ns (ns))."""
    analysis, g, sel, _ = graph_of(path)
    launches = analysis.trace().launches
    replayed, first = graph_replayed(g, launches)
    in_steps = g.acts["step"].is_not_null().to_numpy()
    n_steps = max(g.steps.height, 1)
    shapes = bool(analysis.linked().ops["input_dims"].is_not_null().any()) \
        if "input_dims" in analysis.linked().ops.columns else False
    model = model_for(profiler_settings(analysis.trace().metadata, shapes), "attached")  # as the truths were timed
    eager = replace(model, graph_activity_ns=None, graph_replay_gap_ns=0.0)
    steps = g.steps

    def steady(m) -> float:  # the step the reports give: the steady one
        un = without_profiler(analysis, g, steps, model=m)
        return (steady_step(un.timeline.steps["wall"]) or 0.0) / 1000

    return (float((replayed & in_steps).sum()) / n_steps, float((first & in_steps).sum()) / n_steps,
            steady(eager), steady(model), model.activity_ns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path, help="recipe folders; the first is fitted on")
    args = ap.parse_args()
    rows = []
    for folder in args.folders:
        truth = json.loads((folder / "truth.json").read_text())
        for trace in sorted(folder.glob("*__graph.json.gz")):
            n, m, eager_us, data_us, act_ns = capture_terms(trace)
            rows.append({"folder": folder.name, "trace": trace.name, "activities": n, "replays": m,
                         "truth_us": truth[trace.name]["truth_step_us"], "eager_us": eager_us, "data_us": data_us,
                         "activity_ns": act_ns})
    df = pl.DataFrame(rows)
    fit = df.filter(pl.col("folder") == args.folders[0].name)
    # the time to remove per step beyond what the model removed: activity_ns x N - (truth - eager)
    need = (fit["activity_ns"] / 1000 * fit["activities"] - (fit["truth_us"] - fit["eager_us"])).to_numpy()
    (a, b), *_ = np.linalg.lstsq(fit.select("activities", "replays").to_numpy(), need, rcond=None)
    if b < 0:  # a cost the profiler adds is never negative: the activities' term alone
        (a,), *_ = np.linalg.lstsq(fit.select("activities").to_numpy(), need, rcond=None)
        b = 0.0
    elif a < 0:
        (b,), *_ = np.linalg.lstsq(fit.select("replays").to_numpy(), need, rcond=None)
        a = 0.0
    print(f"fitted on {args.folders[0].name}: graph_activity_ns = {a * 1000:.0f}, "
          f"graph_replay_gap_ns = {b * 1000:.0f}")
    pred = pl.col("eager_us") + pl.col("activity_ns") / 1000 * pl.col("activities") - (
        a * pl.col("activities") + b * pl.col("replays"))
    out = df.with_columns(pred.alias("fitted_us")).with_columns(
        ((pl.col("eager_us") / pl.col("truth_us") - 1) * 100).round(1).alias("eager_err_%"),
        ((pl.col("fitted_us") / pl.col("truth_us") - 1) * 100).round(1).alias("fitted_err_%"),
        ((pl.col("data_us") / pl.col("truth_us") - 1) * 100).round(1).alias("data_err_%"))
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_width_chars=200):
        print(out.select("folder", "trace", pl.col("activities").round(0), "replays", "truth_us", "eager_err_%",
                         "fitted_err_%", "data_err_%"))


if __name__ == "__main__":
    main()
