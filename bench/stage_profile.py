#!/usr/bin/env python3
"""Where the time of one analysis goes, function by function (the profile in docs/benchmarks.md).

    python3 bench/stage_profile.py TRACE [--threads auto|off]

Times the pipeline's own steps by wrapping them (cProfile's per-call overhead would
inflate the Python-heavy steps and hide the columnar ones): in the load, decoding,
events to columns, assembling the tables; in
the link, the op-tree sweep and each attaching step; then classify and the report.
Times are summed over calls, in this process only (the scanning threads' work overlaps).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--threads", default="auto", choices=("auto", "off"))
    args = ap.parse_args()
    os.environ["NONGEMM_SCAN_THREADS"] = args.threads
    import importlib

    importlib.import_module("nongemm_trace.cli")  # the command line's allocator settings, before polars
    from nongemm_trace import classify, link, load
    from nongemm_trace.link import fast_sweep, nesting
    from nongemm_trace.load.kineto import fast_scan, loader, pipeline
    from nongemm_trace.pipeline import api, measure

    spent: dict[str, list[float]] = {}

    def wrap(owner, name: str, label: str) -> None:
        real = getattr(owner, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent.setdefault(label, []).append(time.perf_counter() - t0)

        setattr(owner, name, timed)

    wrap(load, "load_trace", "load")
    wrap(pipeline, "decode_chunk", "load: chunks decoded (this process)")
    wrap(fast_scan, "scan", "load: C scanner, tables wrapped (this process)")
    wrap(fast_scan, "decode_events", "load: msgspec decode (this process)")
    wrap(fast_scan, "chunk_tables", "load: events to columns (this process)")
    wrap(pipeline, "build", "load: tables assembled, duplicates checked (streamed)")
    wrap(loader, "build", "load: tables assembled, duplicates checked (whole document)")
    wrap(classify, "link_and_classify", "link")
    wrap(classify, "_with_name_columns", "link: op names to categories")
    wrap(nesting, "_packed", "link: op tree keys (thread, time) packed")
    wrap(fast_sweep, "op_tree", "link: op tree by the C sweep")
    wrap(nesting, "_starts_and_queries", "link: op tree in polars (starts sorted, ends searched)")
    wrap(nesting, "_verified", "link: launch calls' ops checked")
    wrap(classify, "outermost_up", "link: top-level ops")
    wrap(link, "_attach_launches", "link: activities to launch calls")
    wrap(link, "_attach_ops", "link: activities to ops")
    wrap(classify, "classify", "classify")
    for name in ("op_table", "category_table", "kernel_summary", "step_table"):
        wrap(measure, name, "report tables")

    t0 = time.perf_counter()
    api.analyze(args.trace)
    total = time.perf_counter() - t0
    print(f"analyze {total:.2f} s ({Path(args.trace).name}, threads {args.threads})")
    for label, times in spent.items():
        print(f"  {label:58s} {sum(times):6.2f} s  ({len(times)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
