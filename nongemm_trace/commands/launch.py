"""``launch``: launch overhead, GPU idle gaps and communication overlap of one trace."""

from __future__ import annotations

import argparse

from ..errors import TraceError
from . import options
from .options import analysis_options
from .outputs import render

HELP = "launch overhead, GPU idle gaps and communication overlap of one trace"


def arguments(la: argparse.ArgumentParser) -> None:
    la.add_argument("trace", help="the trace to analyse")
    options.add_format(la, "launch")
    options.add_table(la, "launch")
    options.add(la, "output")
    la.add_argument("--short-us", type=float, default=10.0, help="activities shorter than this are short (default 10)")
    la.add_argument("--plot", metavar="FILE", help="draw the timeline to FILE (.png or .svg)")
    la.add_argument("--window", metavar="START:END", help="plot only this window, in us from the first activity")
    options.add(la, *options.ANALYSIS)
    from .latency import unprofiled_argument
    unprofiled_argument(la)


def run(args: argparse.Namespace) -> int:
    from ..analyses.launch import launch_analysis

    window = None
    if args.window:
        try:
            lo, hi = (float(x) for x in args.window.split(":"))
        except ValueError:
            raise TraceError(args.trace, f"--window wants START:END in microseconds, not {args.window!r}") from None
        window = (lo, hi)
    rep = launch_analysis(args.trace, short_us=args.short_us, unprofiled_step_us=args.unprofiled_step_us,
                          **analysis_options(args))
    if args.plot:
        from ..report.figures import plot_timeline
        plot_timeline(rep, args.plot, window)
    return render("launch", rep, args)
