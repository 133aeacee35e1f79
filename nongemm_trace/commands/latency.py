"""``latency`` (each step's wall time along its critical path, by category and bound) and ``whatif``
(the steps replayed with changed durations): docs/latency.md."""

from __future__ import annotations

import argparse
from typing import Callable

from ..vocabulary import LEVELS
from .common import finished, write_model

HELP = ("each step's wall time along its critical path, by category and bound (gpu, communication, launch, cpu, "
        "sync, other)")
WHATIF_HELP = "replay the steps with changed durations: predicted latency, shares and critical path"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="a trace with steps (ProfilerStep#N, or --step-marker NAME)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table", help="table (default), json or csv")
    p.add_argument("-o", "--output", help="write the report to PATH instead of stdout")
    p.add_argument("--taxonomy", default="default", help="built-in taxonomy name or a .toml file")
    p.add_argument("--level", choices=tuple(LEVELS), default=None,
                   help="which op an activity and a host piece are charged to (default: the taxonomy's)")
    p.add_argument("--step-marker", metavar="NAME", help="name of the ranges that mark steps")
    p.add_argument("--skip-steps", type=int, default=0, metavar="N", help="leave out the first N steps (warm-up)")
    unprofiled_argument(p)


def unprofiled_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unprofiled-step-us", type=float, default=None, metavar="X",
                   help="the run's measured step time without the profiler (us, mean per step): calibrates the "
                        "answers for the run without the profiler (default: the trace's nongemm_unprofiled "
                        "metadata, else the profiler-overhead model alone)")


def whatif_arguments(w: argparse.ArgumentParser) -> None:
    arguments(w)
    w.add_argument("--scale", action="append", default=[], metavar="SELECTOR=FACTOR",
                   help="multiply the durations of GEMM, non-GEMM, communication, unclassified, a category, "
                        "op:NAME or kernel:REGEX activities by FACTOR (0.5 = twice as fast; repeatable, the last "
                        "matching wins)")
    w.add_argument("--cpu-scale", type=float, default=1.0, metavar="F", help="host work takes F times as long")
    w.add_argument("--launch-us", type=float, default=None, metavar="X", help="every launch call costs X us")
    w.add_argument("--graphs", action="store_true", help="replay each step's launches as CUDA graphs")
    w.add_argument("--graph-launch-us", type=float, default=None, metavar="X",
                   help="with --graphs: one graph replay call costs X us (default: as the trace's graph launches, "
                        "else 1.6 us per replayed activity)")


def _options(args: argparse.Namespace) -> dict:
    return {"taxonomy": args.taxonomy, "level": args.level, "step_marker": args.step_marker,
            "skip_steps": args.skip_steps}


def _read_ahead(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """``command(args)`` with the trace's first chunks read and scanned on the other core while the
    latency modules import (as ``analyze`` does; the tables the analysis's rule keeps); once its
    report is written, the process may exit without freeing the trace's tables one by one
    (``cli.entry``: a second on a 1 GB trace, whose graph holds millions of pieces)."""
    from ..analysis import needs_python
    from ..load import start_read_ahead, stop_read_ahead
    if start_read_ahead(args.trace, needs_python(args.level)):
        try:
            code = command(args)
        finally:
            stop_read_ahead()  # not taken: the command stopped before loading
    else:
        code = command(args)
    finished["single_analysis"] = code == 0
    return code


def run(args: argparse.Namespace) -> int:
    return _read_ahead(args, _latency)


def run_whatif(args: argparse.Namespace) -> int:
    return _read_ahead(args, _whatif)


def _latency(args: argparse.Namespace) -> int:
    from ..latency import latency_analysis
    from ..report.files import latency_csv
    from ..report.terminal.latency import render_latency

    rep = latency_analysis(args.trace, unprofiled_step_us=args.unprofiled_step_us, **_options(args))
    return write_model(args, rep, render_latency, csv=latency_csv)


def _whatif(args: argparse.Namespace) -> int:
    from ..latency import whatif_analysis
    from ..report.files import whatif_csv
    from ..report.terminal.latency import render_whatif

    rep = whatif_analysis(args.trace, args.scale, cpu_scale=args.cpu_scale, launch_us=args.launch_us,
                          graphs=args.graphs, graph_launch_us=args.graph_launch_us,
                          unprofiled_step_us=args.unprofiled_step_us, **_options(args))
    return write_model(args, rep, render_whatif, csv=whatif_csv)
