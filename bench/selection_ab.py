#!/usr/bin/env python3
"""Interleaved before/after benchmark of ``analyze``, ``launch`` and ``latency`` on one large trace.

    python3 bench/selection_ab.py --before /tmp/before [--after .] [--size-mb 1000] [--rounds 5] [--keep]

``--before`` is another checkout of this project (for example ``git worktree add /tmp/before COMMIT``
with its C extension built in place: ``python3 setup.py build_ext --inplace``). The trace is made
with ../shared/tools/scale_trace.py from a real shared trace (``--source``) into the temporary
folder and deleted at the end (unless ``--keep``). Each round runs every command once per tree, in
a fresh process (``python3 -m nongemm_trace CMD TRACE --format json -o OUT``, OUT a file in a private temporary folder
(never a device path: an older tree's writer would replace it), with the tree
first on ``sys.path``, its bytecode compiled first), the trees' order alternating between rounds,
so a drift of the shared machine's speed falls on both alike. Prints the median wall time per
command and tree, the after/before ratio, and every run's time.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import SHARED, make  # noqa: E402  (bench/bench.py: the scaled trace, made the same way)

COMMANDS = ("analyze", "launch", "latency")


def run(tree: Path, command: str, trace: Path, out: Path) -> float:
    """Wall seconds of one command, run from ``tree`` in a fresh process, its report written to ``out``
    (a regular file); a failure stops the bench."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "nongemm_trace", command, str(trace), "--format", "json", "-o",
                        str(out)], cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{tree}: {command} failed (exit {p.returncode}): {p.stderr.strip()[-400:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the other checkout (its extension built)")
    ap.add_argument("--after", default=str(HERE.parent), help="this checkout (default: this tree)")
    ap.add_argument("--size-mb", type=float, default=1000.0, help="the trace's JSON size in MB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--source", default=str(SHARED / "traces" / "h200" / "bert_base_train_bs8_s128__eager.json.gz"))
    ap.add_argument("--keep", action="store_true", help="keep the scaled trace")
    args = ap.parse_args()
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    for tree in trees.values():
        compileall.compile_dir(str(tree / "nongemm_trace"), quiet=1)
    trace = Path(tempfile.gettempdir()) / f"selection_ab_{int(args.size_mb)}mb.json"
    make(Path(args.source), args.size_mb, trace)
    times: dict[tuple[str, str], list[float]] = {}
    outputs = tempfile.TemporaryDirectory(prefix="selection_ab_out_")
    out = Path(outputs.name) / "report.json"
    try:
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for command in COMMANDS:
                for name in order:
                    times.setdefault((command, name), []).append(run(trees[name], command, trace, out))
            print(f"round {r + 1}: " + ", ".join(f"{c} {n} {times[c, n][-1]:.2f}s" for c in COMMANDS for n in trees),
                  file=sys.stderr)
    finally:
        outputs.cleanup()
        if not args.keep:
            trace.unlink(missing_ok=True)
    mb = args.size_mb
    print(f"| command | before (s) | after (s) | after / before | runs before | runs after |  ({mb:,.0f} MB, "
          f"{args.rounds} interleaved rounds, medians)")
    print("|---|---:|---:|---:|---|---|")
    for command in COMMANDS:
        b, a = times[command, "before"], times[command, "after"]
        mb_, ma = statistics.median(b), statistics.median(a)
        print(f"| {command} | {mb_:.2f} | {ma:.2f} | {ma / mb_:.2f} | {' / '.join(f'{x:.2f}' for x in b)} | "
              f"{' / '.join(f'{x:.2f}' for x in a)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
