"""Fit the profiler-overhead model (nongemm_trace/devices/profiler_overhead.toml) and report its error.

    python3 bench/fit_profiler_overhead.py CAPTURES_DIR [--toml] [--markdown]

CAPTURES_DIR holds the traces of bench/capture_unprofiled.py (each with its ``nongemm_unprofiled``
measurement: the same configuration timed without the profiler in rounds around the window).

The fit, per profiler setting: the host time of a step without the profiler (the measured **host
issue time**) against the trace's host time by piece kind (an op's own time, a wrapper's, the time
between ops, a launch call, another runtime call, a graph launch; the host-only replay of the steps,
every device duration 0, split by the kinds' shares), as ``issue = sum_k share_k x host x remains_k``
with every ``remains_k`` in [0, 1], least squares on relative errors with a soft L1 loss (a few
captures sit on a host that changed speed between the window and the rounds). It also fits the
additive alternative (a fixed cost per op event, launch and call) for comparison.

The report: per capture, the measured unprofiled step, the profiled step, the model's unprofiled
step from the trace alone (the fitted model, and leave-one-workload-out: the model fitted without
any capture of that workload), and the errors. ``--toml`` prints the data file's text.
"""
from __future__ import annotations

import glob
import json
import os
import sys
import warnings

import numpy as np
import polars as pl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

from nongemm_trace.analyses.latency import graph_of  # noqa: E402
from nongemm_trace.analyses.latency import unprofiled as U  # noqa: E402
from nongemm_trace.analyses.latency.replay import measured_piece_lengths, measured_timeline, replay  # noqa: E402

#: the device time activity tracing adds per GPU activity (ns): ACTIVITY_NS=... to try another value
ACTIVITY_NS = float(os.environ.get("ACTIVITY_NS", "800"))
SETTING_OF = {"plain": "plain", "shapes": "record_shapes", "stack": "with_stack"}


def features(path):
    """One capture: its host time by piece kind per step, its measured times, its analysis and graph."""
    analysis, g, rep, _ = graph_of(path)
    tl = measured_timeline(g)
    steps = tl.steps.filter(pl.col("step") >= rep.steps_skipped)
    lengths = measured_piece_lengths(g)
    n = g.acts.height
    host = replay(g, np.zeros(n, np.int64), lengths, np.zeros(n), np.zeros(n, np.int64)).steps
    launches = analysis.trace().launches
    kinds = U.piece_kinds(g, launches.filter(pl.col("graph_launch"))["launch_id"])
    p = g.pieces.select("ts")
    lo, hi = int(steps["ts"].min()), int(steps["end"].max())
    inside = ((p["ts"] >= lo) & (p["ts"] < hi)).to_numpy()
    sums = {k: float(lengths[inside & (kinds == U.KIND_CODES.index(k))].sum()) for k in U.PIECE_KINDS}
    total = sum(sums.values()) or 1.0
    host_us = float(host["wall"].mean()) / 1000.0
    meta = analysis.trace().metadata
    un = meta[U.METADATA_KEY]
    name = os.path.basename(path)[: -len(".json.gz")]
    workload, config, setting = name.split("__")
    return dict(name=name, workload=workload, config=config, setting=SETTING_OF[setting],
                profiled_us=float(steps["wall"].mean()) / 1000.0, host_us=host_us,
                unprofiled_us=float(un["step_us"]), issue_us=float(un["host_issue_us"]),
                **{f"h_{k}": host_us * v / total for k, v in sums.items()}), (analysis, g, steps)


#: the model's parameters and the piece kinds each one scales: an op's and a wrapper's own time (the
#: profiler's op callbacks), a runtime call's (CUPTI's callbacks), a graph launch's (every kernel of the
#: graph instrumented); the time between ops is not the profiler's and is kept (fitted free, it comes out
#: anywhere in [0, 1] from capture to capture: it is a few us per step)
PARAMETERS = {"op": ("op", "wrapper"), "runtime": ("launch", "call"), "graph_launch": ("graph_launch",)}


def fit(rows: list[dict]) -> dict[str, float]:
    from scipy.optimize import least_squares

    X = np.array([[sum(r[f"h_{k}"] for k in kinds) for kinds in PARAMETERS.values()] for r in rows])
    kept = np.array([r["h_gap"] for r in rows])
    y = np.array([r["issue_us"] for r in rows])
    used = X.sum(axis=0) > 0

    def resid(x):
        full = np.ones(len(PARAMETERS))
        full[used] = x
        return (X @ full + kept - y) / y

    sol = least_squares(resid, np.full(used.sum(), 0.6), bounds=(0.0, 1.0), loss="soft_l1", f_scale=0.1)
    values = dict.fromkeys(PARAMETERS, 1.0)
    for k, v in zip(np.array(list(PARAMETERS))[used], sol.x):
        values[str(k)] = round(float(v), 3)
    out = {"gap": 1.0}
    for name, kinds in PARAMETERS.items():
        out.update(dict.fromkeys(kinds, values[name]))
    return out


def additive(rows: list[dict]) -> tuple[np.ndarray, float]:
    """The alternative: issue = host - cost per event x events (median relative error of the host time)."""
    from scipy.optimize import nnls

    X = np.array([[r["n_op"], r["n_launch"], r["n_call"]] for r in rows])
    y = np.array([r["host_us"] - r["issue_us"] for r in rows])
    w = 1 / np.array([r["issue_us"] for r in rows])
    theta, _ = nnls(X * w[:, None], y * w)
    pred = np.array([r["host_us"] for r in rows]) - X @ theta
    return theta, float(np.median(np.abs(pred * w - 1)))


def predict(ctx, remains, setting) -> float:
    analysis, g, steps = ctx
    model = U.OverheadModel(setting, remains, ACTIVITY_NS, "", "")
    saved = analysis.trace().metadata.pop(U.METADATA_KEY)  # from the trace alone
    try:
        un = U.without_profiler(analysis, g, steps, model=model)
    finally:
        analysis.trace().metadata[U.METADATA_KEY] = saved
    return float(un.timeline.steps.filter(pl.col("step").is_in(steps["step"].implode()))["wall"].mean()) / 1000.0


def event_counts(row, ctx):
    analysis, g, steps = ctx
    lo, hi = int(steps["ts"].min()), int(steps["end"].max())
    ops = analysis.linked().ops.filter((pl.col("ts_ns") >= lo) & (pl.col("ts_ns") < hi))
    kinds = g.pieces.filter(pl.col("launch_id").is_not_null()).group_by("launch_id").agg(pl.col("kind").first())
    calls = analysis.trace().launches.filter((pl.col("ts_ns") >= lo) & (pl.col("ts_ns") < hi)).join(
        kinds, on="launch_id", how="left")
    n = steps.height
    row.update(n_op=ops.height / n, n_launch=calls.filter(pl.col("kind") == "launch").height / n,
               n_call=calls.filter(pl.col("kind") == "call").height / n)


def main(argv):
    folder = argv[0]
    rows, ctxs = [], {}
    for path in sorted(glob.glob(os.path.join(folder, "*__*__*.json.gz"))):
        row, ctx = features(path)
        event_counts(row, ctx)
        rows.append(row)
        ctxs[row["name"]] = ctx
    models, report = {}, []
    for setting in ("plain", "record_shapes", "with_stack"):
        mine = [r for r in rows if r["setting"] == setting]
        if not mine:
            continue
        models[setting] = fit(mine)
        theta, add_err = additive([r for r in mine if r["h_graph_launch"] == 0])
        models[setting + "_additive"] = {"op_us": round(theta[0], 3), "launch_us": round(theta[1], 3),
                                         "call_us": round(theta[2], 3), "median_error": round(add_err, 3)}
        for r in mine:
            held = fit([q for q in mine if q["workload"] != r["workload"]])
            r["model_us"] = predict(ctxs[r["name"]], models[setting], setting)
            r["held_out_us"] = predict(ctxs[r["name"]], held, setting)
            report.append(r)
    df = pl.DataFrame(report).select(
        "workload", "config", "setting", "unprofiled_us", "profiled_us", "model_us", "held_out_us",
        ((pl.col("profiled_us") / pl.col("unprofiled_us") - 1) * 100).alias("profiled_err_%"),
        ((pl.col("model_us") / pl.col("unprofiled_us") - 1) * 100).alias("model_err_%"),
        ((pl.col("held_out_us") / pl.col("unprofiled_us") - 1) * 100).alias("held_out_err_%"))
    summary = df.group_by("setting").agg(
        pl.len().alias("captures"), (pl.col("held_out_err_%").abs() <= 15).sum().alias("held_out_within_15%"),
        pl.col("held_out_err_%").abs().median().alias("held_out_median_abs_%"),
        (pl.col("profiled_err_%").abs() <= 15).sum().alias("profiled_within_15%"))
    with pl.Config(tbl_rows=200, tbl_cols=-1, tbl_width_chars=200, float_precision=1,
                   tbl_formatting="MARKDOWN" if "--markdown" in argv else None):
        print(df.sort("workload", "config", "setting"))
        print(summary.sort("setting"))
    print(json.dumps(models, indent=1))
    if "--toml" in argv:
        print(toml_text(models, rows))


def toml_text(models, rows) -> str:
    torch = "2.11"
    lines = ["# The share of each kind of host piece that remains without torch.profiler, per profiler setting",
             "# (nongemm_trace/analyses/latency/unprofiled.py). Fitted by bench/fit_profiler_overhead.py on the",
             "# captures of bench/capture_unprofiled.py (one H200, torch " + torch + "); docs/latency.md gives the "
             "captures and errors.",
             f'torch = "{torch}"', "",
             "# device time that activity tracing adds to each GPU activity (ns), taken from its duration",
             f"[device]\nactivity_ns = {ACTIVITY_NS:g}", ""]
    for setting in ("plain", "record_shapes", "with_stack"):
        if setting not in models:
            continue
        n = sum(1 for r in rows if r["setting"] == setting)
        w = len({r["workload"] for r in rows if r["setting"] == setting})
        lines += [f"[settings.{setting}]", f'fit = "{n} captures of {w} workloads"',
                  f"[settings.{setting}.remains]"]
        lines += [f"{k} = {v}" for k, v in models[setting].items()] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
