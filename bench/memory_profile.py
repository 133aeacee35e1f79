#!/usr/bin/env python3
"""Peak memory of one analysis, stage by stage (the memory figures in docs/benchmarks.md).

    python3 bench/memory_profile.py TRACE [--interval-ms 2] [--json] [--detail]

Runs what ``nongemm-trace analyze TRACE --format json`` runs, in this process, one stage at a time:
load (the file to the contract's tables), link (``link_and_classify``: the op tree, activities to
launch calls and ops, the ops' categories and context), classify (the activities' categories at the
report's level), measure (the selection and the breakdown report) and render (the JSON document). A
thread reads ``/proc/self/statm`` every ``--interval-ms`` and keeps, per stage, the highest resident
set size seen (RSS at the stage's start and end too); the process's own high-water mark (``VmHWM``)
is the check on the sampling. tracemalloc sees nothing of polars' (Rust) allocations, so RSS is the
only honest measure. Ratios are to the JSON size (a ``.gz`` trace: its uncompressed size, read by
streaming it once before the run). ``--detail`` adds the peak inside each of the main steps
(:data:`STEPS`, indented under the stages; RSS freed by a step is given back by the allocator only
after ~100 ms, so a step's peak may include its predecessor's last working columns).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * PAGE


def hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    """The highest RSS seen while each stage runs."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval, self.stage, self.peaks, self.done = interval, "start", {}, False

    def run(self) -> None:
        while not self.done:
            r = rss()
            if r > self.peaks.get(self.stage, 0):
                self.peaks[self.stage] = r
            time.sleep(self.interval)

    def enter(self, stage: str) -> None:
        r = rss()
        self.peaks[self.stage] = max(self.peaks.get(self.stage, 0), r)
        self.stage = stage
        self.peaks[stage] = max(self.peaks.get(stage, 0), r)


#: (module, function) pairs whose peak --detail reports apart (nested in their stage)
STEPS = [
    ("nongemm_trace.load.kineto.pipeline", "build"), ("nongemm_trace.load.kineto.build", "_dedupe"),
    ("nongemm_trace.link", "_attach_launches"), ("nongemm_trace.link", "_attach_ops"),
    ("nongemm_trace.link.nesting", "op_tree"), ("nongemm_trace.classify", "outermost_up"),
    ("nongemm_trace.classify", "_with_name_columns"), ("nongemm_trace.classify", "qdq_calls"),
    ("nongemm_trace.classify", "chain_category"), ("nongemm_trace.classify", "enclosing_category"),
    ("nongemm_trace.classify", "backward_category"), ("nongemm_trace.classify", "add_columns"),
    ("nongemm_trace.pipeline.selection", "select"),
    ("nongemm_trace.pipeline.measure", "op_table"), ("nongemm_trace.pipeline.measure", "_call_cpu"),
    ("nongemm_trace.pipeline.measure", "kernel_summary"), ("nongemm_trace.pipeline.measure", "category_table"),
]


def _wrap_steps(sampler: Sampler) -> None:
    import importlib

    for module, name in STEPS:
        owner = importlib.import_module(module)
        real = getattr(owner, name)
        label = f"  {module.rsplit('.', 1)[-1]}.{name}"

        def wrapped(*a, _real=real, _label=label, **k):
            outer = sampler.stage
            sampler.enter(_label)
            try:
                return _real(*a, **k)
            finally:
                sampler.enter(outer)

        setattr(owner, name, wrapped)


def json_bytes(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += len(chunk)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--interval-ms", type=float, default=2.0)
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    ap.add_argument("--detail", action="store_true", help="also the peak inside the stages' main steps")
    args = ap.parse_args()
    path = Path(args.trace)
    size = json_bytes(path)

    import importlib

    importlib.import_module("nongemm_trace.cli")  # the command line's allocator settings, before polars
    from nongemm_trace.pipeline.analysis import Analysis
    from nongemm_trace.report.json_out import render_json

    sampler = Sampler(args.interval_ms / 1000)
    sampler.start()
    start = rss()
    stages, times, ends = [], {}, {}

    def stage(name, fn):
        sampler.enter(name)
        t0 = time.perf_counter()
        out = fn()
        times[name] = time.perf_counter() - t0
        ends[name] = rss()
        stages.append(name)
        return out

    if args.detail:
        _wrap_steps(sampler)
    a = Analysis(path)
    stage("load", a.trace)
    stage("link", a.linked)
    level = a.taxonomy.default_level
    stage("classify", lambda: a.activities(level))
    report = stage("measure", a.report)
    text = stage("render", lambda: render_json(report))
    sampler.enter("end")
    sampler.done = True
    sampler.join()
    del text
    peak = max(hwm(), *sampler.peaks.values())
    if args.detail:
        stages += [s for s in sampler.peaks if s.startswith("  ")]
        times.update({s: 0.0 for s in sampler.peaks if s.startswith("  ")})
        ends.update({s: 0 for s in sampler.peaks if s.startswith("  ")})
    rows = {s: {"peak_mb": sampler.peaks.get(s, 0) / 1e6, "end_mb": ends[s] / 1e6, "seconds": times[s],
                "peak_ratio": sampler.peaks.get(s, 0) / size} for s in stages}
    result = {"trace": str(path), "json_mb": size / 1e6, "start_mb": start / 1e6, "stages": rows,
              "peak_mb": peak / 1e6, "peak_ratio": peak / size}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{path.name}: {size / 1e6:,.0f} MB of JSON; RSS after imports {start / 1e6:,.0f} MB")
    print(f"{'stage':<10} {'seconds':>8} {'peak MB':>9} {'end MB':>9} {'peak / JSON':>12}")
    for s, r in rows.items():
        if s.startswith("  "):  # a step inside a stage: its peak only
            print(f"{s:<34} {r['peak_mb']:>9,.0f} {'':>9} {r['peak_ratio']:>12.2f}")
            continue
        print(f"{s:<10} {r['seconds']:>8.2f} {r['peak_mb']:>9,.0f} {r['end_mb']:>9,.0f} {r['peak_ratio']:>12.2f}")
    print(f"{'process':<10} {'':>8} {peak / 1e6:>9,.0f} {'':>9} {peak / size:>12.2f}  (VmHWM {hwm() / 1e6:,.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
