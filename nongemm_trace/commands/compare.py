"""``compare`` (what changed between traces) and ``plot`` (stacked bars per category)."""

from __future__ import annotations

import argparse

from ..errors import TraceError
from . import options
from .options import typed_options
from .outputs import render
from .progress import wrote

HELP = "what changed between traces: per category, fusion and quantization views"
PLOT_HELP = "stacked bars of GPU time per category, one bar per trace"


def arguments(cp: argparse.ArgumentParser) -> None:
    cp.add_argument("traces", nargs="+", metavar="TRACE", help="BASE first, then one or more traces to compare with it")
    cp.add_argument("--per-step", action="store_true", help="divide times and counts by each trace's step count")
    options.add_format(cp, "comparison")
    options.add(cp, "output", *options.ANALYSIS)


def plot_arguments(pp: argparse.ArgumentParser) -> None:
    pp.add_argument("traces", nargs="+", metavar="TRACE", help="one bar per trace, in this order")
    pp.add_argument("-o", "--output", required=True, help="figure file (.png or .svg)")
    pp.add_argument("--absolute", action="store_true", help="bars in microseconds instead of shares")
    pp.add_argument("--per-step", action="store_true", help="divide times by each trace's step count")
    pp.add_argument("--title", help="the figure's title (default: none)")
    options.add(pp, *options.ANALYSIS)


def run(args: argparse.Namespace) -> int:
    from ..analyses.compare import compare
    from ..core.remote import local_paths, named_as_urls

    if len(args.traces) < 2:
        raise TraceError(args.traces[0], "compare needs BASE and at least one more trace")
    with local_paths(args.traces) as local:  # URLs: fetched, bounded, removed after the comparison
        cmp = compare(local, per_step=args.per_step, options=typed_options(args, local[0]))
    named_as_urls(cmp, local, args.traces)
    return render(cmp, args)


def run_plot(args: argparse.Namespace) -> int:
    from ..analyses.compare import compare
    from ..core.remote import local_paths
    from ..report.figures import plot_bars

    with local_paths(args.traces) as local:
        cmp = compare(local, per_step=args.per_step, options=typed_options(args, local[0]))
    plot_bars(cmp, args.output, absolute=args.absolute, title=args.title)
    wrote(f"wrote {args.output}")
    return 0
