"""What-if against the real run without the profiler, on the pairs of bench/capture_unprofiled.py.

    python3 bench/unprofiled_validation.py CAPTURES_DIR [--markdown] [--no-autocast]

For every pair (the slower configuration A, the faster B, captured under the same profiler setting,
one after the other) the slower trace alone predicts B's step without the profiler:

* TF32 and bf16 pairs: ``whatif A --scale GEMM=r [--scale non-GEMM=q --autocast bf16]``, ``r`` (``q``) the
  ratio of B's GEMM (non-GEMM) GPU time per step to A's, measured on the two traces (bf16 autocast changes
  both, and adds casts and host work: ``--autocast``);
* eager/graph pairs: ``whatif A --graphs``.

Each prediction is made twice: from the trace alone (``estimated``: the overhead model) and given A's
measured step without the profiler (``calibrated``: the ``nongemm_unprofiled`` metadata). The truth is
B's own measured unprofiled step: the median of every unprofiled round of B in the folder (CUDA events; the
rounds around each of B's windows, all settings pooled, since B's run without the profiler does not depend on
the profiler's settings; from WORKLOAD.meta.json, else B's trace alone), with ``truth_spread_%``, the spread of
B's per-capture medians (the host's noise between interleaved captures). Beside them: the
profiled prediction (what the tool answered before: the what-if's ``predicted_us``) and naive
Amdahl (A's unprofiled step minus the GPU time saved).

The rounds were timed in the capturing process, which had profiled before: the profiler stayed attached
(docs/latency.md), so every prediction is the attached process's (``attached=True``).
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import sys
import warnings

import polars as pl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

from nongemm_trace import analyze  # noqa: E402
from nongemm_trace.analyses.changes import WhatIfParams  # noqa: E402
from nongemm_trace.analyses.latency import whatif_analysis  # noqa: E402
from nongemm_trace.analyses.latency.unprofiled import METADATA_KEY  # noqa: E402
from nongemm_trace.pipeline.analysis import Analysis  # noqa: E402

PAIRS = {"tf32": ("fp32", "tf32"), "bf16": ("fp32", "bf16"), "graphs": ("eager", "graph")}


def per_step_class_ns(path: str) -> dict[str, float]:
    rep = analyze(path)
    n = max(rep.steps.height, 1)
    return {r["class"]: r["time_ns"] / n for r in rep.classes.iter_rows(named=True)}


def truth_rounds(folder: str, workload: str, config: str) -> tuple[float, float] | None:
    """The median of every unprofiled round of ``config`` and the spread of its per-capture medians (%)."""
    path = os.path.join(folder, workload + ".meta.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        captures = json.load(fh)["captures"]
    mine = [c for stem, c in captures.items() if stem.split("__")[1] == config]
    if not mine:
        return None
    rounds = [r for c in mine for r in c["round_step_us"]]
    medians = [c["step_us"] for c in mine]
    return statistics.median(rounds), (max(medians) - min(medians)) / statistics.median(medians) * 100


def pair_rows(folder: str, settings=("plain", "shapes", "stack"), autocast: bool = True) -> list[dict]:
    """One row per pair and setting found in ``folder``: the truth and the four predictions (µs)."""
    rows = []
    names = sorted({os.path.basename(p).split("__")[0] for p in glob.glob(os.path.join(folder, "*__*__*.json.gz"))})
    for workload in names:
        for kind, (slow, fast) in PAIRS.items():
            for setting in settings:
                a = os.path.join(folder, f"{workload}__{slow}__{setting}.json.gz")
                b = os.path.join(folder, f"{workload}__{fast}__{setting}.json.gz")
                if not (os.path.exists(a) and os.path.exists(b)):
                    continue
                pooled = truth_rounds(folder, workload, fast)
                truth, spread = pooled or (Analysis(b).trace().metadata[METADATA_KEY]["step_us"], None)
                if kind == "graphs":
                    scales, opts = [], {"graphs": True}
                else:
                    ca, cb = per_step_class_ns(a), per_step_class_ns(b)
                    scales = [f"GEMM={cb.get('GEMM', 0) / ca['GEMM']:.4f}"]
                    opts = {}
                    if kind == "bf16" and ca.get("non-GEMM"):
                        scales.append(f"non-GEMM={cb.get('non-GEMM', 0) / ca['non-GEMM']:.4f}")
                    if kind == "bf16" and autocast:
                        opts = {"autocast": "bf16"}
                cal = whatif_analysis(a, WhatIfParams(scale=tuple(scales), attached=True, **opts)).to_dict()
                alone = Analysis(a)
                del alone.trace().metadata[METADATA_KEY]  # the trace alone: no measurement
                est = whatif_analysis(alone, WhatIfParams(scale=tuple(scales), attached=True, **opts)).to_dict()
                a_unprof = cal["unprofiled"]["measured_step_us"]
                saved = cal["measured_us"] - cal["amdahl_us"]
                rows.append({"workload": workload, "pair": f"{slow}->{fast}", "setting": setting,
                             "scales": " ".join(scales) or "--graphs", "truth_us": truth, "truth_spread_%": spread,
                             "estimated_us": est["predicted_unprofiled_step_us"],
                             "calibrated_us": cal["predicted_unprofiled_step_us"], "profiled_us": cal["predicted_us"],
                             "amdahl_us": a_unprof - saved})
    return rows


def main(argv):
    if not argv or argv[0].startswith("-") or not os.path.isdir(argv[0]):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    rows = pair_rows(argv[0], autocast="--no-autocast" not in argv)
    df = pl.DataFrame(rows).with_columns(
        *[((pl.col(c) / pl.col("truth_us") - 1) * 100).alias(c.replace("_us", "_err_%"))
          for c in ("estimated_us", "calibrated_us", "profiled_us", "amdahl_us")])
    summary = df.group_by("setting").agg(
        pl.len().alias("pairs"),
        (pl.col("estimated_err_%").abs() <= 20).sum().alias("estimated_within_20%"),
        (pl.col("calibrated_err_%").abs() <= 10).sum().alias("calibrated_within_10%"),
        pl.col("estimated_err_%").abs().median().alias("estimated_median_abs_%"),
        pl.col("calibrated_err_%").abs().median().alias("calibrated_median_abs_%"),
        pl.col("profiled_err_%").abs().median().alias("profiled_median_abs_%"),
        pl.col("amdahl_err_%").abs().median().alias("amdahl_median_abs_%"))
    fmt = "MARKDOWN" if "--markdown" in argv else None
    with pl.Config(tbl_rows=200, tbl_cols=-1, tbl_width_chars=250, float_precision=1, tbl_formatting=fmt,
                   tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True):
        print(df.drop("scales").sort("workload", "pair", "setting"))
        print(summary.sort("setting"))


if __name__ == "__main__":
    main(sys.argv[1:])
