"""``flops``: FLOPs, bytes and the roofline per op; where FLOPs misjudge time."""

from __future__ import annotations

import argparse

from . import options
from .options import analysis_options
from .outputs import render

HELP = "FLOPs, bytes and the roofline per op; where FLOPs misjudge time"


def arguments(fp: argparse.ArgumentParser) -> None:
    fp.add_argument("trace", help="a Kineto trace recorded with record_shapes=True")
    options.add_format(fp, "flops")
    options.add_table(fp, "flops")
    options.add(fp, "output")
    fp.add_argument("--device-spec", metavar="NAME|FILE.toml", help="peak specs to use instead of the detected device")
    fp.add_argument("--roofline", metavar="FILE", help="draw the roofline scatter to FILE (.png/.svg)")
    fp.add_argument("--shares-plot", metavar="FILE", help="draw FLOP share vs time share per class to FILE")
    fp.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops in the table view (default 15)")
    options.add(fp, *options.ANALYSIS)


def run(args: argparse.Namespace) -> int:
    from ..flops import flops_analysis

    rep = flops_analysis(args.trace, device_spec=args.device_spec, **analysis_options(args))
    if args.roofline or args.shares_plot:
        from ..report import figures
        if args.roofline:
            figures.plot_roofline(rep, args.roofline)
        if args.shares_plot:
            figures.plot_shares(rep, args.shares_plot)
    return render("flops", rep, args)
