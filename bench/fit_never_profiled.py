"""Fit ``[never_profiled] runtime`` (nongemm_trace/devices/profiler_overhead.toml) and check it held out.

    python3 bench/fit_never_profiled.py [--fit DIR,DIR,...] DIR [DIR ...] [--json FILE]

Kineto leaves CUPTI subscribed to the runtime API after a profiled window unless ``TEARDOWN_CUPTI=1``
is set, so a process that profiled once keeps paying CUPTI's callbacks on every launch and runtime
call; the overhead model's shares were fitted on steps timed in such processes. bench/capture_recipe.py
times 3 truth rounds per configuration before the process's first capture: the step of a process the
profiler never attached to. Each trace of the folders' truth.json is replayed without the profiler with
the runtime calls' shares (launch, call, graph launch) multiplied by each factor of a grid; the factor
of the ``--fit`` folders (default: the H100 recipe sets 1-5) is the one that puts the most of their
traces within 15 % of those rounds (ties: the least sum of absolute log errors, each capped at 0.3),
and every other folder is held out: per folder and in all, how many traces are within 15 % of their rounds before the
captures with the fitted factor and with none (factor 1, the attached process), and the attached
process's estimate against the rounds after the captures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from dataclasses import replace

import numpy as np
import polars as pl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore")

from recipe_validation import load_truth, sides  # noqa: E402

from nongemm_trace.analyses.latency import graph_of  # noqa: E402
from nongemm_trace.analyses.latency import unprofiled as U  # noqa: E402
from nongemm_trace.analyses.latency.overhead_model import RUNTIME_KINDS  # noqa: E402
from nongemm_trace.analyses.latency.replay import measured_timeline  # noqa: E402
from nongemm_trace.core.safe_write import write_file  # noqa: E402
from nongemm_trace.vocabulary import steady_step  # noqa: E402

GRID = tuple(round(0.05 * i, 2) for i in range(21))
FIT = ("recipe_h100", "recipe_h100_rerun", "recipe_h100_set3", "recipe_h100_set4", "recipe_h100_set5")
WITHIN = 0.15


def estimates(folder: str) -> list[dict]:
    """Per trace of the folder: the steady step without the profiler for every factor of the grid, and
    its truths before and after the captures."""
    rows = []
    for name, t in sorted(load_truth(folder).items()):
        before, after = sides(t)
        if before is None:
            continue
        analysis, g, sel, _ = graph_of(os.path.join(folder, name))
        steps = measured_timeline(g).steps.filter(pl.col("step") >= sel.steps_skipped)
        ops = analysis.linked().ops
        shapes = "input_dims" in ops.columns and bool(ops["input_dims"].is_not_null().any())
        attached = U.model_for(U.profiler_settings(analysis.trace().metadata, shapes), "attached")
        by_factor = {}
        for f in GRID:
            remains = {k: v * f if k in RUNTIME_KINDS else v for k, v in attached.remains.items()}
            un = U.without_profiler(analysis, g, steps, model=replace(attached, remains=remains), calibrate=False)
            walls = un.timeline.steps.filter(pl.col("step").is_in(steps["step"].implode()))["wall"]
            by_factor[f] = (steady_step(walls) or 0.0) / 1000.0
        rows.append({"folder": os.path.basename(os.path.normpath(folder)), "trace": name,
                     "setting": t["setting"], "before_us": before, "after_us": after, "estimate_us": by_factor})
    return rows


def loss(rows: list[dict], f: float) -> float:
    """The sum of the absolute log errors against the rounds before the captures, each capped at 0.3 (a
    capture whose host ran at another speed than its rounds weighs no more than any other miss)."""
    e = np.abs(np.log([r["estimate_us"][f] / r["before_us"] for r in rows]))
    return float(np.minimum(e, 0.3).sum())


def score(rows: list[dict], f: float) -> tuple[int, float]:
    """What the fit maximizes: the traces within 15 % of their rounds before the captures (the check the
    issue sets), then the least :func:`loss`."""
    return within(rows, f, "before_us"), -loss(rows, f)


def within(rows: list[dict], f: float, truth: str) -> int:
    return sum(abs(r["estimate_us"][f] / r[truth] - 1) <= WITHIN for r in rows if r[truth])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--fit", default=",".join(FIT), help="the folders (by name) the factor is fitted on")
    ap.add_argument("--json", default=None, help="write every trace's estimates here")
    args = ap.parse_args(argv)
    fit_names = set(args.fit.split(","))
    rows = [r for folder in args.folders for r in estimates(folder)]
    fitted = [r for r in rows if r["folder"] in fit_names]
    held = [r for r in rows if r["folder"] not in fit_names]
    if not fitted:
        print("no trace of the --fit folders has rounds before its captures", file=sys.stderr)
        return 2
    best = max(GRID, key=lambda f: score(fitted, f))
    print(f"fitted on {len(fitted)} traces of {len(fit_names & {r['folder'] for r in rows})} folders: "
          f"runtime = {best:g}")
    print("factor, fitted traces within 15 %, loss: " + "; ".join(
        f"{f:g} {within(fitted, f, 'before_us')} {loss(fitted, f):.1f}" for f in GRID))
    print("| traces | n | never profiled vs before (fitted) | attached vs before | attached vs after |")
    print("|---|---:|---:|---:|---:|")
    groups = [("fitted", fitted), ("held out", held)] + [
        (name, [r for r in held if r["folder"] == name]) for name in sorted({r["folder"] for r in held})]
    for label, rs in groups:
        if rs:
            print(f"| {label} | {len(rs)} | {within(rs, best, 'before_us')} | {within(rs, 1.0, 'before_us')} | "
                  f"{within(rs, 1.0, 'after_us')} |")
    errs = [r["estimate_us"][best] / r["before_us"] - 1 for r in held]
    if errs:
        print(f"held out: median error {100 * statistics.median(errs):+.1f} %, "
              f"median |error| {100 * statistics.median(abs(e) for e in errs):.1f} %")
    if args.json:
        write_file(args.json, json.dumps({"runtime": best, "rows": rows}, indent=1).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
