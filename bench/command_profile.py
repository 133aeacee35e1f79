#!/usr/bin/env python3
"""cProfile of the whole ``analyze`` command, imports included (the profile in docs/benchmarks.md).

    python3 bench/command_profile.py TRACE [--top N] [more analyze options]

Runs ``nongemm-trace analyze TRACE --format json -o OUT --quiet`` (OUT a file in a private
temporary folder, removed after) in this process
under cProfile, from before the command's first import (so the read-ahead starts
where the command starts it, and polars' import is in the profile), and prints where
the main thread's time went: the imports, each step of the analysis, the report, and
within the load its waits; then cProfile's own top entries by cumulative time. cProfile
counts every Python call, so the Python-heavy parts (the imports above all) look
slower than they are: `bench/stage_profile.py` times the analysis steps without it.
Times of the C threads (the read-ahead, the scanning threads) are not in the main
thread's, except where it waits for them.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (label, the end of the function's file path, the function): the steps reported, in the order they run
STEPS = [
    ("load", "nongemm_trace/load/__init__.py", "load_trace"),
    ("link + op classification", "nongemm_trace/classify/__init__.py", "link_and_classify"),
    ("classify (kernel categories)", "nongemm_trace/classify/__init__.py", "classify"),
    ("per-op table", "nongemm_trace/metrics/breakdown.py", "op_table"),
    ("analyze() in all", "nongemm_trace/pipeline/api.py", "analyze"),
    ("JSON report", "nongemm_trace/report/json_out.py", "render_json"),
    ("  of the load: waiting for the file's next block", "/queue.py", "get"),
    ("  of the load: waiting for the scanning threads", "concurrent/futures/_base.py", "result"),
]
#: the function whose imports are the command's (polars and the pipeline, before the analysis)
IMPORTER = ("nongemm_trace/commands/analyze.py", "_analyze_one")


def main() -> int:
    args = sys.argv[1:]
    top = 30
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    if not args:
        print(__doc__)
        return 2
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    from nongemm_trace import cli  # the command's own first import, under the profile

    with tempfile.TemporaryDirectory(prefix="command_profile_") as folder:
        code = cli.main(["analyze", *args, "--format", "json", "-o", str(Path(folder) / "report.json"), "--quiet"])
    prof.disable()
    wall = time.perf_counter() - t
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]

    def cumulative(path_end: str, name: str) -> float:
        return sum(ct for (fn, _, fname), (_, _, _, ct, _) in stats.items()
                   if fname == name and fn.replace("\\", "/").endswith(path_end))

    imports = sum(cct for (_, _, name), (_, _, _, _, callers) in stats.items() if name == "_find_and_load"
                  for (cfn, _, cname), (_, _, _, cct) in callers.items()
                  if cname == IMPORTER[1] and cfn.replace("\\", "/").endswith(IMPORTER[0]))
    print(f"{Path(args[0]).name}: exit code {code}, {wall:.3f} s under cProfile (the interpreter's own start "
          f"not included)")
    print(f"  {'imports before the analysis (polars, the pipeline)':52s} {imports:7.3f} s")
    for label, path_end, name in STEPS:
        print(f"  {label:52s} {cumulative(path_end, name):7.3f} s")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
    return code


if __name__ == "__main__":
    sys.exit(main())
