"""``report``: one self-contained HTML page of one or more traces."""

from __future__ import annotations

import argparse

from ..vocabulary import METRICS
from . import options
from .options import typed_options
from .progress import wrote

HELP = ("one self-contained HTML page (no network): breakdown, top ops and kernels, launch verdict and timeline "
        "per trace, and the comparison of several")


def arguments(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("traces", nargs="+", metavar="TRACE", help="trace file(s); with several, the first is BASE")
    rp.add_argument("-o", "--output", required=True, help="the HTML file to write")
    rp.add_argument("--metric", choices=tuple(METRICS), default=None, help="metric of the breakdown (default: the "
                    "taxonomy's); the launch view and the comparison are of GPU time")
    rp.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops and kernels per trace (default 15)")
    rp.add_argument("--short-us", type=float, default=10.0, help="activities shorter than this are short (default 10)")
    rp.add_argument("--per-step", action="store_true", help="the comparison per step (each trace divided by its steps)")
    rp.add_argument("--title", help="the page's title")
    options.add(rp, *options.ANALYSIS)


def run(args: argparse.Namespace) -> int:
    from ..core.remote import local_paths
    from ..report_page import write_page

    with local_paths(args.traces) as local:  # URLs: fetched, bounded, removed once the page is written
        out = write_page(local, args.output, top=args.top, short_us=args.short_us, per_step=args.per_step,
                         title=args.title, options=typed_options(args, local[0] if local else None, metric=args.metric))
    wrote(f"wrote {out}")
    return 0
