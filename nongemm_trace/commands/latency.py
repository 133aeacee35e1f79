"""``latency`` (each step's wall time along its critical path, by category and bound) and ``whatif``
(the steps replayed with changed durations): docs/latency.md."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..vocabulary import AUTOCAST_DTYPES
from . import options
from .common import finished
from .outputs import render

HELP = ("each step's wall time along its critical path, by category and bound (gpu, communication, launch, cpu, "
        "sync, other)")
WHATIF_HELP = "replay the steps with changed durations: predicted latency, shares and critical path"


def arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    options.add_format(p, "latency")


def _common(p: argparse.ArgumentParser) -> None:
    """What ``latency`` and ``whatif`` both take (their formats differ by model)."""
    p.add_argument("trace", help="a trace with steps (ProfilerStep#N, or --step-marker NAME)")
    options.add(p, "output", "taxonomy", "level", *options.STEPS)
    unprofiled_argument(p)


def unprofiled_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unprofiled-step-us", type=float, default=None, metavar="X",
                   help="the run's measured step time without the profiler (us, mean per step): calibrates the "
                        "answers for the run without the profiler (default: the trace's nongemm_unprofiled "
                        "metadata, else the profiler-overhead model alone)")


def whatif_arguments(w: argparse.ArgumentParser) -> None:
    _common(w)
    options.add_format(w, "whatif")
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
    w.add_argument("--autocast", choices=AUTOCAST_DTYPES, default=None,
                   help="the step under torch.autocast to this dtype: adds the casts and the host work autocast "
                        "brings (the kernels' own speed-up is your --scale, e.g. GEMM=0.3)")


def _options(args: argparse.Namespace) -> dict:
    return {"taxonomy": args.taxonomy, "level": args.level, "step_marker": args.step_marker,
            "skip_steps": args.skip_steps}


def _read_ahead(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """``command(args)`` with the trace's first chunks read and scanned on the other core while the
    latency modules import (as ``analyze`` does; the tables the analysis's rule keeps); once its
    report is written, the process may exit without freeing the trace's tables one by one
    (``cli.entry``: a second on a 1 GB trace, whose graph holds millions of pieces)."""
    from ..load import start_read_ahead, stop_read_ahead
    from ..pipeline.analysis import needs_python
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

    rep = latency_analysis(args.trace, unprofiled_step_us=args.unprofiled_step_us, **_options(args))
    return render("latency", rep, args)


def _whatif(args: argparse.Namespace) -> int:
    from ..latency import whatif_analysis

    rep = whatif_analysis(args.trace, args.scale, cpu_scale=args.cpu_scale, launch_us=args.launch_us,
                          graphs=args.graphs, graph_launch_us=args.graph_launch_us, autocast=args.autocast,
                          unprofiled_step_us=args.unprofiled_step_us, **_options(args))
    return render("whatif", rep, args)
