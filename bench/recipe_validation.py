"""The run without the profiler and the what-ifs against the truth of bench/capture_recipe.py's captures.

    python3 bench/recipe_validation.py DIR [DIR ...] [--json FILE] [--markdown]

Every trace named in a folder's ``truth.json`` is read with the tool's own functions (one
:class:`~nongemm_trace.pipeline.analysis.Analysis` per trace: ``analyze``, ``latency_analysis`` and
``whatif_analysis`` share its load), and checked against CUDA-event timings of the same loop run without
the profiler (``truth_step_us``: the median of 7 interleaved rounds of back-to-back steps). The traces
hold no ``nongemm_unprofiled`` metadata, so "from the trace alone" is the overhead model's estimate.

Checks (error = predicted / truth - 1):

* ``self`` (every trace): the trace's own step without the profiler, ``latency``'s ``unprofiled.step_us``
  (the loop's period), against its own truth; within 15 %. Beside it the naive answer, the profiled
  step as the trace shows it (``latency``'s mean step); where a what-if runs on the trace, its
  ``unprofiled_step_us`` must be the same figure (a difference is reported). Where the capture has
  ``bracket_us`` (one unprofiled round right before and right after its window), the same prediction
  is checked against their mean too (mode ``bracket``): the host's speed at the capture's own moment,
  which on a host that drifts between rounds is the only truth a trace can know of. ``truth_spread_%``
  (max - min over the median of the 7 rounds) says how far the pooled truth itself moves, and the
  summary's ``host steady`` groups keep the captures whose host held one speed around the window
  (brackets within 10 % of each other and of the pooled truth).
  The same prediction against the rounds timed before any capture of the process (mode ``before``:
  the median of the first ``rounds_before_captures`` rounds, 3 where truth.json does not say) and
  against those timed after the captures (mode ``after``): torch.profiler leaves CUPTI attached to
  the process once a window with CUDA activities ends (Kineto finalizes it only with
  ``TEARDOWN_CUPTI=1``), and host-bound loops run slower from then on, so the pooled truth mixes a
  process the profiler never touched (``before``) with one it left attached (``after``) (docs/latency.md).
  ``before`` checks the step without the profiler (a process it never attached to), ``after`` the
  attached process's figure (``unprofiled.attached_step_us``).
* ``tf32`` (each trace of a pair's fp32 side): ``whatif --scale GEMM=r``, ``r`` = the tf32 trace's GEMM
  GPU time per step over the fp32 trace's (kernels launched inside the profiled steps; the tf32 trace
  of the same profiler setting where there is one, else the plain one), against the tf32 truth:
  from the trace alone within 20 % (``alone``), told the fp32 run's real step
  (``--unprofiled-step-us`` = the fp32 truth) within 10 % (``told``). The what-ifs' truths, told and
  checked, are each side's rounds before any capture (the run without the profiler; the pooled rounds
  where truth.json does not say which is which).
* ``bf16``: ``whatif --scale GEMM=r --scale non-GEMM=q --autocast bf16`` (``r``, ``q`` measured as above
  on the bf16 and fp32 traces) against the bf16 truth; within 25 %, alone and told.
* ``graphs``: ``whatif --graphs`` on the eager trace against the graph replay's truth; within 25 %, alone and
  told.
* ``alone-bracket``, ``told-bracket`` (each of the three, where the slower side's capture has
  ``partner_bracket_us``: the faster side timed right before and right after its window): the same
  what-ifs against that, told the slower side's ``bracket_us`` mean: the truth at the host speed of the
  capture's own moment, as ``bracket`` is for ``self``. The brackets are timed in the capturing process,
  which the profiler stayed attached to after its first window: these modes, and ``bracket``, check the
  attached process's answers (``attached``, ``unprofiled.attached_step_us``).

Naive Amdahl beside each (``naive``): for ``tf32``/``bf16``, the slower run's truth minus the GPU time the
change saves per step, ``(1 - r) * G + (1 - q) * N`` with ``G``/``N`` the slower trace's GEMM/non-GEMM GPU
time per step (``q`` = 1 for tf32); for ``graphs`` (no GPU time saved), the eager trace's GPU time per step:
the step if every host cost vanished (the naive reading of "graphs remove the launch overhead").

The table lists every check; the summary counts the checks within their threshold, per folder, check and
kind of trace, with the median absolute error of the tool and of the naive answer, and the worst misses.
Accuracy is reported here and in docs, not asserted (tests/test_recipe_samples.py checks only that the
samples are consistent and the commands run).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import polars as pl  # noqa: E402

from nongemm_trace import analyze  # noqa: E402
from nongemm_trace.analyses.changes import WhatIfParams  # noqa: E402
from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis  # noqa: E402
from nongemm_trace.pipeline.analysis import Analysis  # noqa: E402

THRESHOLDS = {("self", "alone"): 15.0, ("self", "bracket"): 15.0, ("self", "before"): 15.0, ("self", "after"): 15.0,
              ("tf32", "alone"): 20.0, ("tf32", "told"): 10.0,
              ("bf16", "alone"): 25.0, ("bf16", "told"): 25.0, ("graphs", "alone"): 25.0, ("graphs", "told"): 25.0}
# the same limits against the faster side timed around the slower side's window (``partner_bracket_us``)
THRESHOLDS.update({(check, f"{mode}-bracket"): THRESHOLDS[(check, mode)]
                   for check in ("tf32", "bf16", "graphs") for mode in ("alone", "told")})
FAST = {"tf32": "tf32", "bf16": "bf16", "graphs": "graph"}


def load_truth(folder: str) -> dict[str, dict]:
    with open(os.path.join(folder, "truth.json")) as fh:
        return json.load(fh)


def class_per_step(rep) -> dict[str, float]:
    """GPU time per step (ns) by class, of the activities launched inside the profiled steps."""
    k = rep.kernels.filter(pl.col("launch_ts_ns").is_not_null() & pl.col("step").is_not_null())
    n = max(k["step"].n_unique(), 1)
    return {r["class"]: r["dur_ns"] / n for r in k.group_by("class").agg(pl.col("dur_ns").sum()).iter_rows(named=True)}


class Folder:
    """The traces of one capture folder, each loaded once."""

    def __init__(self, folder: str):
        self.folder = folder
        self.truth = load_truth(folder)
        self._an: dict[str, Analysis] = {}
        self._cls: dict[str, dict[str, float]] = {}

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def analysis(self, name: str) -> Analysis:
        if name not in self._an:
            self._an[name] = Analysis(self.path(name))
        return self._an[name]

    def classes(self, name: str) -> dict[str, float]:
        if name not in self._cls:
            self._cls[name] = class_per_step(analyze(self.analysis(name)))
        return self._cls[name]

    def config_truth(self, workload: str, variant: str) -> float | None:
        """The configuration's step in a process the profiler never attached to: its rounds before any
        capture (the pooled rounds where truth.json does not say which is which)."""
        for t in self.truth.values():
            if t["workload"] == workload and t["variant"] == variant:
                return sides(t)[0] or t["truth_step_us"]
        return None

    def twin(self, workload: str, variant: str, setting: str) -> str | None:
        """The trace of ``workload``/``variant`` under ``setting``, else the plain one."""
        best = None
        for name, t in self.truth.items():
            if t["workload"] == workload and t["variant"] == variant:
                if t["setting"] == setting:
                    return name
                if t["setting"] == "plain":
                    best = name
        return best


def steady(t: dict) -> bool | None:
    """Whether the host held one speed around the capture: its two bracket rounds agree within 10 %, and
    their mean is within 10 % of the pooled truth (None without brackets)."""
    b = t.get("bracket_us")
    if not b:
        return None
    mean = statistics.fmean(b)
    return abs(b[0] - b[1]) <= 0.10 * mean and abs(mean / t["truth_step_us"] - 1) <= 0.10


def sides(t: dict) -> tuple[float | None, float | None]:
    """The median of the truth rounds timed before the process's first capture, and of those after its
    last (None where the rounds do not say which is which)."""
    rounds = t.get("rounds") or []
    k = t.get("rounds_before_captures", 3 if len(rounds) == 7 else None)
    if k is None or not 0 < k < len(rounds):
        return None, None
    return statistics.median(rounds[:k]), statistics.median(rounds[k:])


def err(pred: float | None, truth: float) -> float | None:
    return None if pred is None else (pred / truth - 1) * 100


def folder_rows(folder: str) -> list[dict]:
    f = Folder(folder)
    rows = []
    gpu = next(iter(f.truth.values()))["gpu"] if f.truth else ""
    for name, t in sorted(f.truth.items()):
        base = {"folder": os.path.basename(os.path.normpath(folder)), "gpu": gpu, "trace": name,
                "workload": t["workload"], "variant": t["variant"], "setting": t["setting"],
                "truth_spread_%": t.get("truth_spread_pct"), "host_steady": steady(t)}
        a = f.analysis(name)
        lat = latency_analysis(a).to_dict()
        un = lat["unprofiled"]
        profiled = lat["total"]["mean_step_us"]
        truth = t["truth_step_us"]
        rows.append({**base, "check": "self", "mode": "alone", "truth_us": truth, "pred_us": un["step_us"],
                     "naive_us": profiled, "bound": un.get("bound"), "profiled_bound": un.get("profiled_bound"),
                     "whatif_unprofiled_us": None, "scales": ""})
        self_row = rows[-1]
        if t.get("bracket_us"):
            # against the host of the capture's own moment (one unprofiled round right before and right after
            # the window): which misses are the host moving between rounds. Those rounds run in the capturing
            # process, the profiler attached since its first window: the attached process's figure
            rows.append({**self_row, "mode": "bracket", "truth_us": statistics.fmean(t["bracket_us"]),
                         "pred_us": un.get("attached_step_us")})
        # each process against its own rounds: the run without the profiler (never attached) against those
        # before any capture, the attached process's figure against those after
        for mode, truth_side, pred in zip(("before", "after"), sides(t), (un["step_us"], un.get("attached_step_us"))):
            if truth_side is not None:
                rows.append({**self_row, "mode": mode, "truth_us": truth_side, "pred_us": pred})
        kind = t["kind"]
        if t["role"] != "slow" or kind not in FAST:
            continue
        fast_truth = f.config_truth(t["workload"], FAST[kind])
        if fast_truth is None:
            continue
        opts: dict = {}
        scales: list[str] = []
        ca = f.classes(name)
        naive_saved = 0.0
        if kind == "graphs":
            opts = {"graphs": True}
            naive = sum(ca.values()) / 1e3
        else:
            fast = f.twin(t["workload"], FAST[kind], t["setting"])
            if fast is None:
                continue
            cb = f.classes(fast)
            r = cb.get("GEMM", 0.0) / ca["GEMM"]
            scales.append(f"GEMM={r:.4f}")
            naive_saved = (1 - r) * ca["GEMM"]
            if kind == "bf16":
                q = cb.get("non-GEMM", 0.0) / ca["non-GEMM"] if ca.get("non-GEMM") else 1.0
                scales.append(f"non-GEMM={q:.4f}")
                naive_saved += (1 - q) * ca.get("non-GEMM", 0.0)
                opts = {"autocast": "bf16"}
            naive = truth - naive_saved / 1e3
        slow_step = sides(t)[0] or truth  # the slower run's step in a process the profiler never attached to
        modes = [("alone", None, fast_truth, naive, False), ("told", slow_step, fast_truth, naive, False)]
        if t.get("partner_bracket_us") and t.get("bracket_us"):
            # both sides timed around this capture's window: the what-if's truth at its host's speed, and
            # the slower run's step told as it was then; both in the capturing process, the profiler attached
            here, fast_here = statistics.fmean(t["bracket_us"]), statistics.fmean(t["partner_bracket_us"])
            naive_here = naive if kind == "graphs" else here - naive_saved / 1e3
            modes += [("alone-bracket", None, fast_here, naive_here, True),
                      ("told-bracket", here, fast_here, naive_here, True)]
        answers: dict = {}  # (told, attached) -> (prediction, note): the alone what-if serves both of its modes
        for mode, told, check_truth, check_naive, attached in modes:
            if (told, attached) not in answers:
                try:
                    w = whatif_analysis(a, WhatIfParams(scale=tuple(scales), unprofiled_step_us=told,
                                                        attached=attached, **opts)).to_dict()
                    answers[told, attached] = (w["predicted_unprofiled_step_us"], None)
                    if told is None and not attached:
                        self_row["whatif_unprofiled_us"] = w["unprofiled_step_us"]
                except Exception as exc:  # noqa: BLE001  (a refusal is a result too)
                    answers[told, attached] = (None, f"{type(exc).__name__}: {exc}"[:120])
            pred, note = answers[told, attached]
            rows.append({**base, "check": kind, "mode": mode, "truth_us": check_truth, "pred_us": pred,
                         "naive_us": check_naive, "bound": un.get("bound"), "profiled_bound": un.get("profiled_bound"),
                         "whatif_unprofiled_us": None, "scales": " ".join(scales) or "--graphs",
                         **({"note": note} if note else {})})
    for r in rows:
        r["err_%"] = err(r["pred_us"], r["truth_us"])
        r["naive_err_%"] = err(r["naive_us"], r["truth_us"])
        lim = THRESHOLDS.get((r["check"], r["mode"]))
        r["limit_%"] = lim
        r["within"] = r["err_%"] is not None and abs(r["err_%"]) <= lim
        r["naive_within"] = r["naive_err_%"] is not None and abs(r["naive_err_%"]) <= lim
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    keys = sorted({(r["folder"], r["gpu"], r["check"], r["mode"]) for r in rows})
    for folder, gpu, check, mode in keys:
        mine = [r for r in rows if (r["folder"], r["gpu"], r["check"], r["mode"]) == (folder, gpu, check, mode)]
        groups = {"all": mine}
        if check == "self":
            groups["device-bound"] = [r for r in mine if r["bound"] == "device-bound"]
            groups["host-bound"] = [r for r in mine if r["bound"] != "device-bound"]
            groups["plain"] = [r for r in mine if r["setting"] == "plain"]
            groups["other settings"] = [r for r in mine if r["setting"] != "plain"]
            groups["host steady"] = [r for r in mine if r.get("host_steady")]
            groups["host steady, host-bound"] = [r for r in mine
                                                 if r.get("host_steady") and r["bound"] != "device-bound"]
        for g, rs in groups.items():
            if not rs:
                continue
            errs = [abs(r["err_%"]) for r in rs if r["err_%"] is not None]
            nerrs = [abs(r["naive_err_%"]) for r in rs if r["naive_err_%"] is not None]
            worst = max(rs, key=lambda r: abs(r["err_%"]) if r["err_%"] is not None else 1e9)
            out.append({"folder": folder, "gpu": gpu, "check": check, "mode": mode, "traces": g, "n": len(rs),
                        "limit_%": rs[0]["limit_%"], "within": sum(r["within"] for r in rs),
                        "naive_within": sum(r["naive_within"] for r in rs),
                        "median_abs_err_%": statistics.median(errs) if errs else None,
                        "naive_median_abs_err_%": statistics.median(nerrs) if nerrs else None,
                        "worst": f"{worst['trace']} {worst['err_%']:+.1f} %" if worst["err_%"] is not None
                        else f"{worst['trace']} (refused)"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="folders with truth.json and the traces it names")
    ap.add_argument("--json", help="write every row and the summary to this file")
    ap.add_argument("--markdown", action="store_true", help="tables as Markdown")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = []
    for d in args.dirs:
        if not os.path.exists(os.path.join(d, "truth.json")):
            print(f"{d}: no truth.json", file=sys.stderr)
            return 2
        rows += folder_rows(d)
    summary = summarize(rows)
    cols = ["folder", "trace", "check", "mode", "bound", "truth_us", "pred_us", "err_%", "naive_us", "naive_err_%",
            "within"]
    fmt = "MARKDOWN" if args.markdown else None
    with pl.Config(tbl_rows=500, tbl_cols=-1, tbl_width_chars=250, float_precision=1, tbl_formatting=fmt,
                   tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True, fmt_str_lengths=60):
        print(pl.DataFrame(rows, infer_schema_length=None).select(cols))
        print(pl.DataFrame(summary, infer_schema_length=None))
    diff = [r for r in rows if r["check"] == "self" and r["whatif_unprofiled_us"] is not None
            and abs(r["whatif_unprofiled_us"] - r["pred_us"]) > 0.01 * r["pred_us"]]
    for r in diff:
        print(f"note: {r['trace']}: latency says {r['pred_us']:.1f} us without the profiler, "
              f"whatif {r['whatif_unprofiled_us']:.1f} us")
    for r in rows:
        if r.get("note"):
            print(f"note: {r['trace']} {r['check']} {r['mode']}: {r['note']}")
    traces = sum(r['check'] == 'self' and r['mode'] == 'alone' for r in rows)
    print(f"{len(rows)} checks on {traces} traces in {time.time() - t0:.1f} s")
    if args.json:
        from nongemm_trace.core.safe_write import write_file
        doc = {"rows": rows, "summary": summary, "thresholds_%": {f"{c}/{m}": v for (c, m), v in THRESHOLDS.items()}}
        write_file(args.json, json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
