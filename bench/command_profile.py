#!/usr/bin/env python3
"""cProfile of the whole ``analyze`` command, imports included (the profile in docs/benchmarks.md).

    python3 bench/command_profile.py TRACE [--top N] [more analyze options]

Runs ``nongemm-trace analyze TRACE --format json -o /dev/null --quiet`` in this process
under cProfile, from before the command's first import (so the read-ahead starts
where the command starts it, and polars' import is in the profile), and prints where
the main thread's time went: process start to the command, the imports, each step of
the analysis, the report; then cProfile's own top entries by cumulative time. cProfile
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (label, file name, function): the steps reported, in the order they run
STEPS = [
    ("imports before the analysis (polars, the pipeline)", "cli.py", "_analyze_one", "imports"),
    ("load (read-ahead taken, rest streamed)", "__init__.py", "load_trace", None),
    ("link + op classification", "__init__.py", "link_and_classify", None),
    ("classify (kernel categories)", "__init__.py", "classify", None),
    ("per-op table", "breakdown.py", "op_table", None),
    ("analyze() in all", "api.py", "analyze", None),
    ("JSON report", "json_out.py", "render_json", None),
    ("  of the load: waiting for the file's next block", "queue.py", "get", None),
    ("  of the load: waiting for the scanning threads", "_base.py", "result", None),
]


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

    code = cli.main(["analyze", *args, "--format", "json", "-o", "/dev/null", "--quiet"])
    prof.disable()
    wall = time.perf_counter() - t
    stats = pstats.Stats(prof)
    cum: dict[tuple[str, str], float] = {}
    imports_in: dict[str, float] = {}
    for (fn, _, name), (_, _, _, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = (Path(fn).name, name)
        cum[key] = max(ct, cum.get(key, 0.0))
        if name == "_find_and_load":
            for (cfn, _, cname), (_, _, _, cct) in callers.items():
                imports_in[cname] = imports_in.get(cname, 0.0) + cct
    print(f"{Path(args[0]).name}: exit code {code}, {wall:.3f} s under cProfile (the interpreter's own start, "
          f"0.05-0.07 s here, before it)")
    for label, fn, name, kind in STEPS:
        secs = imports_in.get(name, 0.0) if kind == "imports" else cum.get((fn, name), float("nan"))
        print(f"  {label:52s} {secs:7.3f} s")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
