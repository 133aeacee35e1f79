"""How reproducible one profiled window is: bench/capture_repeats.py's captures read back.

    python3 bench/repeat_spread.py DIR [--markdown]

DIR holds ``repeats.json`` and the traces it names (unpacked from its ``traces-N.tar``). Per capture:
the profiled step as the trace shows it (``latency``'s mean step, the loop's period), the tool's
estimate of the step without the profiler from the trace alone, and the mean of the two unprofiled
rounds around the window (the brackets). Per configuration and profiler setting, over its repetitions:
the spread (max - min over the median) of the brackets, of the profiled step over its brackets (the
profiler's cost at that moment) and of the estimate's error against the brackets, and how many
estimates are within 15 %. A spread of the profiled/bracket ratio much larger than the brackets'
own says the profiler's cost moved while the host did not: no estimate from one trace can follow it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import polars as pl  # noqa: E402

from nongemm_trace.analyses.latency import latency_analysis  # noqa: E402
from nongemm_trace.pipeline.analysis import Analysis  # noqa: E402


def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) * 100 if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for r in json.load(open(os.path.join(args.dir, "repeats.json"))):
        path = os.path.join(args.dir, r["trace"])
        if not os.path.exists(path):
            continue
        lat = latency_analysis(Analysis(path)).to_dict()
        bracket = statistics.fmean(r["bracket_us"])
        profiled, est = lat["total"]["mean_step_us"], lat["unprofiled"]["step_us"]
        rows.append({"config": f"{r['workload']}__{r['variant']}", "setting": r["setting"], "repeat": r["repeat"],
                     "bracket_us": bracket, "profiled_us": profiled, "estimate_us": est,
                     "profiled/bracket": profiled / bracket, "err_%": (est / bracket - 1) * 100})
    df = pl.DataFrame(rows)
    summary = []
    for (config, setting), g in df.group_by(["config", "setting"], maintain_order=True):
        errs = g["err_%"].to_list()
        summary.append({
            "config": config, "setting": setting, "captures": g.height,
            "bracket_spread_%": _spread(g["bracket_us"].to_list()),
            "profiled/bracket median": statistics.median(g["profiled/bracket"].to_list()),
            "profiled/bracket spread_%": _spread(g["profiled/bracket"].to_list()),
            "err median_%": statistics.median(errs), "err min_%": min(errs), "err max_%": max(errs),
            "within 15 %": sum(abs(e) <= 15 for e in errs)})
    fmt = "MARKDOWN" if args.markdown else None
    with pl.Config(tbl_rows=500, tbl_cols=-1, tbl_width_chars=250, float_precision=1, tbl_formatting=fmt,
                   tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True):
        print(df)
        print(pl.DataFrame(summary))
    within = sum(abs(e) <= 15 for e in df["err_%"].to_list())
    print(f"{within} of {df.height} estimates within 15 % of their brackets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
