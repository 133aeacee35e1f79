"""The figures an analysis's subcommand can draw besides its output (matplotlib, to a file): the
launch timeline (``--plot``, ``--window``), the roofline and the FLOP-vs-time shares (``--roofline``,
``--shares-plot``). A table by analysis name; an analysis without a row draws none."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TraceError

#: analysis name -> its figure flags: (flags, argparse settings)
FLAGS: dict[str, tuple[tuple[tuple[str, ...], dict[str, Any]], ...]] = {
    "launch": ((("--plot",), dict(metavar="FILE", help="draw the timeline to FILE (.png or .svg)")),
               (("--window",), dict(metavar="START:END", help="plot only this window, in us from the first "
                                                              "activity"))),
    "flops": ((("--roofline",), dict(metavar="FILE", help="draw the roofline scatter to FILE (.png/.svg)")),
              (("--shares-plot",), dict(metavar="FILE", help="draw FLOP share vs time share per class to FILE"))),
}


def add(p: argparse.ArgumentParser, analysis: str) -> None:
    for flags, settings in FLAGS.get(analysis, ()):
        p.add_argument(*flags, **settings)


def _window(args: argparse.Namespace) -> tuple[float, float] | None:
    if not args.window:
        return None
    try:
        lo, hi = (float(x) for x in args.window.split(":"))
    except ValueError:
        raise TraceError(args.trace, f"--window wants START:END in microseconds, not {args.window!r}") from None
    return lo, hi


def check(args: argparse.Namespace, analysis: str) -> None:
    """Refuse a figure option that cannot be read, before any work."""
    if analysis == "launch":
        _window(args)


def draw(args: argparse.Namespace, analysis: str, model: Any) -> None:
    """The figures ``args`` asks for, of ``model``."""
    if analysis == "launch" and args.plot:
        from ..report.figures import plot_timeline
        plot_timeline(model, args.plot, _window(args))
    if analysis == "flops" and (args.roofline or args.shares_plot):
        from ..report import figures
        if args.roofline:
            figures.plot_roofline(model, args.roofline)
        if args.shares_plot:
            figures.plot_shares(model, args.shares_plot)
