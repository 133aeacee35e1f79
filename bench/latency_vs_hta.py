"""``latency`` against Holistic Trace Analysis's critical path, on HTA's own critical-path test traces.

    python3 bench/latency_vs_hta.py

HTA (the [hta] extra) builds its critical-path graph from the same file; its breakdown
(``get_critical_path_breakdown``) classifies each path edge as ``cpu_bound``,
``gpu_compute_bound``, ``gpu_kernel_kernel_overhead`` or ``gpu_kernel_launch_overhead``. We
print its sums next to ours (host = cpu + launch + other, device = gpu + communication, sync)
over the same step range, and the seconds each takes from the file (trace read included; imports
done first), median of ``--rounds`` (default 3) interleaved runs. HTA 0.5 calls
``DataFrame.drop(axis=..., columns=...)``, which pandas 3 refuses: the shim below drops the redundant ``axis``.
"""
from __future__ import annotations

import logging
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CASES = [  # (file under shared/traces/external/hta, HTA annotation, our step marker)
    ("critical_path__cuda_event_sync__event_sync_trace.json.gz", "ProfilerStep", None),
    ("critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz", "measure|forward",
     "[param|pytorch.model.alex_net|0|0|0|measure|forward]"),
]


def _pandas_shim() -> None:
    import pandas as pd

    drop = pd.DataFrame.drop

    def patched(self, *a, **k):
        if "columns" in k or "index" in k:
            k.pop("axis", None)
        return drop(self, *a, **k)

    pd.DataFrame.drop = patched


def hta_breakdown(path: Path, annotation: str) -> dict[str, float]:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    _pandas_shim()
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, d)
        ta = TraceAnalysis(trace_dir=d)
        rank = next(iter(ta.t.get_all_traces()))
        g, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=0)
        bd = g.get_critical_path_breakdown()
    sums = bd.groupby("bound_by").duration.sum().to_dict()
    return {k: float(v) for k, v in sums.items() if k} | {"total": float(bd.duration.sum())}


def ours(path: Path, marker: str | None) -> dict[str, float]:
    from nongemm_trace import AnalysisOptions
    from nongemm_trace.analyses.latency import latency_analysis

    d = latency_analysis(path, options=AnalysisOptions(step_marker=marker)).to_dict()["total"]
    return d["by_bound_us"] | {"total": d["wall_us"]}


def timed(fn, *args) -> tuple[dict[str, float], float]:
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


if __name__ == "__main__":
    args = sys.argv[1:]
    rounds = 3
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i: i + 2]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "shared" / "traces"
    _pandas_shim()
    import hta.trace_analysis  # noqa: F401  (imports outside the timings)

    import nongemm_trace.analyses.latency  # noqa: F401
    for name, ann, marker in CASES:
        p = root / "external" / "hta" / name
        th, to = [], []
        for _ in range(rounds):
            h, s = timed(hta_breakdown, p, ann)
            th.append(s)
            o, s = timed(ours, p, marker)
            to.append(s)
        mh, mo = statistics.median(th), statistics.median(to)
        print(f"{name[:60]}\n  HTA:  {h}\n  ours: {o}\n  seconds (median of {rounds}): HTA {mh:.2f}, ours {mo:.2f} "
              f"({mh / mo:.1f}x faster)")
