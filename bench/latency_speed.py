"""How long ``latency`` takes against ``analyze`` on one (large) trace, and where its time goes.

    python3 bench/latency_speed.py TRACE [--rounds N]

Runs ``analyze`` and ``latency`` as separate processes, interleaved (analyze, latency, analyze, …)
so that a shared machine's load hits both alike, and prints each run's wall time and the ratio of
the medians; then, in this process, the stages of ``latency``: load + link + classify (the
report ``analyze`` also makes), the dependency graph, the measured timeline and the walk and
attribution, and one what-if replay. Make a large trace with
``/work/shared/tools/scale_trace.py SRC COPIES OUT.json``.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed_cli(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nongemm_trace", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def stages(trace: str) -> dict[str, float]:
    from nongemm_trace.analyses.changes import WhatIfParams
    from nongemm_trace.analyses.latency import graph_of, whatif_analysis
    from nongemm_trace.analyses.latency.path import attribute
    from nongemm_trace.analyses.latency.replay import measured_timeline
    from nongemm_trace.pipeline.analysis import Analysis
    out, t = {}, time.perf_counter()
    a = Analysis(trace)
    a.report()
    out["load, link, classify, report"] = time.perf_counter() - t
    t = time.perf_counter()
    _, g, _, _ = graph_of(a)
    out["dependency graph"] = time.perf_counter() - t
    t = time.perf_counter()
    tl = measured_timeline(g)
    attribute(tl, a.taxonomy.classes, g.queue_gap_ns)
    out["measured timeline, walk, attribution"] = time.perf_counter() - t
    t = time.perf_counter()
    whatif_analysis(a, WhatIfParams(scale=("GEMM=0.5",)))
    out["one what-if (replay, walk, attribution)"] = time.perf_counter() - t
    out["pieces"], out["activities"], out["syncs"], out["steps"] = (g.pieces.height, g.acts.height, g.syncs.height,
                                                                   g.steps.height)
    return out


if __name__ == "__main__":
    trace = sys.argv[1]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    runs = {"analyze": [], "latency": []}
    for _ in range(rounds):
        for cmd in runs:
            runs[cmd].append(timed_cli([cmd, trace, "--format", "json"]))
            print(cmd, f"{runs[cmd][-1]:.1f} s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"median: analyze {med['analyze']:.1f} s, latency {med['latency']:.1f} s, "
          f"ratio {med['latency'] / med['analyze']:.2f}")
    for k, v in stages(trace).items():
        print(f"{k}: {v:.2f}" + (" s" if isinstance(v, float) else ""))
