"""Check ``whatif`` against real runs: pairs of H200 traces that differ in one thing.

    python3 bench/latency_validation.py DIR [--markdown]

DIR holds NAME__fp32 / NAME__tf32 (TF32 off vs on), NAME__tf32_graph (the same forward
replayed from one CUDA graph) and, with ``CONTROL=1``, NAME__fp32again (an A/A control) traces with their
.meta.json (CUDA-event latencies), as ``bench/capture_latency_pairs.py merge`` writes them
(pairs captured interleaved in one process; a subset is in sample_traces/latency/). From the
slower trace alone, plus the GEMM time ratio measured on the pair (GEMM GPU time per step,
faster / slower), ``whatif --scale GEMM=ratio`` predicts the faster trace's mean step; the naive
Amdahl estimate is the slower mean step minus the GEMM time saved. Eager -> ``--graphs`` is
checked against the graph run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.changes import WhatIfParams
from nongemm_trace.analyses.latency import graph_of, latency_analysis, whatif_analysis
from nongemm_trace.pipeline.analysis import Analysis

#: the first profiled step carries the profiler's start-up (2-3x slower on every capture): left out
SKIP = 1
SKIPPED = AnalysisOptions(skip_steps=SKIP)


def gemm_per_step(a: Analysis) -> float:
    rep = a.report(SKIPPED)
    g = rep.classes.filter(rep.classes["class"] == "GEMM")["time_ns"].sum()
    return float(g) / max(rep.steps.height, 1)


def host_per_step(a: Analysis) -> float:
    """Mean CPU-range length of a step: the host's own work (no step here holds a synchronizing call)."""
    st = latency_analysis(a, options=SKIPPED).steps
    return float((st["cpu_end"] - st["ts"]).mean())


def activities_per_step(a: Analysis) -> float:
    """GPU activities (kernels, memsets, copies) launched per kept step: a faster run that launches
    other work (cuBLAS workspace memsets, split kernels) is not the same host work."""
    acts = graph_of(a)[1].acts
    kept = acts.filter(acts["step"] >= SKIP)
    return kept.height / max(kept["step"].n_unique(), 1)


def mean_step(a: Analysis) -> float:
    return latency_analysis(a, options=SKIPPED).to_dict()["total"]["mean_step_us"]


def meta(path: Path) -> dict:
    m = path.with_name(path.name.replace(".json.gz", ".meta.json"))
    return json.loads(m.read_text()) if m.exists() else {}


def pairs(folder: Path) -> list[dict]:
    rows = []
    for slow in sorted(folder.glob("*__fp32.json.gz")):
        base = slow.name[: -len("__fp32.json.gz")]
        fast = folder / f"{base}__tf32.json.gz"
        graph = folder / f"{base}__tf32_graph.json.gz"
        a_slow, a_fast = Analysis(slow), Analysis(fast) if fast.exists() else None
        if a_fast is not None:
            ratio = gemm_per_step(a_fast) / gemm_per_step(a_slow)
            w = whatif_analysis(a_slow, WhatIfParams(scale=(f"GEMM={ratio:.6f}",)), options=SKIPPED).to_dict()
            truth = mean_step(a_fast)
            drift = host_per_step(a_fast) / host_per_step(a_slow)
            adjusted = whatif_analysis(a_slow, WhatIfParams(scale=(f"GEMM={ratio:.6f}",), cpu_scale=drift),
                                       options=SKIPPED).to_dict()
            rows.append(dict(pair=f"{base}: TF32 off -> on", gemm_ratio=round(ratio, 4), slow_us=w["measured_us"],
                             predicted_us=w["predicted_us"], amdahl_us=w["amdahl_us"], measured_us=truth,
                             host_drift=round(drift, 3), predicted_at_fast_host_us=adjusted["predicted_us"],
                             activities=(activities_per_step(a_slow), activities_per_step(a_fast)),
                             cuda_events_ms=(meta(slow).get("latency_ms_synced"), meta(fast).get("latency_ms_synced"))))
        twin = folder / f"{base}__fp32again.json.gz"
        if twin.exists():  # the A/A control: the same configuration interleaved with itself, the noise floor
            a_twin = Analysis(twin)
            w = whatif_analysis(a_slow, WhatIfParams(scale=("GEMM=1",)), options=SKIPPED).to_dict()
            rows.append(dict(pair=f"{base}: fp32 -> fp32 again (A/A control)", gemm_ratio=None,
                             slow_us=w["measured_us"], predicted_us=w["predicted_us"], amdahl_us=None,
                             measured_us=mean_step(a_twin),
                             host_drift=round(host_per_step(a_twin) / host_per_step(a_slow), 3),
                             predicted_at_fast_host_us=None,
                             activities=(activities_per_step(a_slow), activities_per_step(a_twin)),
                             cuda_events_ms=(meta(slow).get("latency_ms_synced"), meta(twin).get("latency_ms_synced"))))
        if graph.exists() and a_fast is not None:
            w = whatif_analysis(a_fast, WhatIfParams(graphs=True), options=SKIPPED).to_dict()
            truth = mean_step(Analysis(graph))
            rows.append(dict(pair=f"{base}: eager -> CUDA graph (TF32)", gemm_ratio=None, slow_us=w["measured_us"],
                             predicted_us=w["predicted_us"], amdahl_us=None, measured_us=truth, host_drift=None,
                             predicted_at_fast_host_us=None, activities=None,
                             cuda_events_ms=(meta(fast).get("latency_ms_synced"),
                                             meta(graph).get("latency_ms_synced"))))
    for r in rows:
        r["error"] = round(r["predicted_us"] / r["measured_us"] - 1, 4)
        r["amdahl_error"] = None if r["amdahl_us"] is None else round(r["amdahl_us"] / r["measured_us"] - 1, 4)
        adj = r["predicted_at_fast_host_us"]
        r["error_at_fast_host"] = None if adj is None else round(adj / r["measured_us"] - 1, 4)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| pair | GEMM time ratio | slower, measured (us) | predicted (us) | faster, measured (us) | error | "
           "naive Amdahl (us) | Amdahl error | host drift | error at the faster run's host speed | "
           "activities per step | CUDA events, synced (ms) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        ev = " -> ".join(f"{x:.3f}" if x else "-" for x in r["cuda_events_ms"])
        amdahl = "-" if r["amdahl_us"] is None else f"{r['amdahl_us']:,.1f}"
        amdahl_err = "-" if r["amdahl_error"] is None else f"{100 * r['amdahl_error']:+.1f} %"
        ratio = "-" if r["gemm_ratio"] is None else r["gemm_ratio"]
        drift = "-" if r["host_drift"] is None else r["host_drift"]
        adj = "-" if r["error_at_fast_host"] is None else f"{100 * r['error_at_fast_host']:+.1f} %"
        acts = "-" if r["activities"] is None else " -> ".join(f"{x:.0f}" for x in r["activities"])
        out.append(f"| {r['pair']} | {ratio} | {r['slow_us']:,.1f} | {r['predicted_us']:,.1f} | "
                   f"{r['measured_us']:,.1f} | {100 * r['error']:+.1f} % | {amdahl} | {amdahl_err} | "
                   f"{drift} | {adj} | {acts} | {ev} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    rows = pairs(Path(sys.argv[1]))
    if "--markdown" in sys.argv:
        sys.stdout.write(markdown(rows))
    else:
        print(json.dumps(rows, indent=1))
