"""``flops``: FLOPs, bytes and the roofline per op; where FLOPs misjudge time."""

from __future__ import annotations

import argparse

from .common import analysis_arguments, analysis_options, write_model

HELP = "FLOPs, bytes and the roofline per op; where FLOPs misjudge time"


def arguments(fp: argparse.ArgumentParser) -> None:
    fp.add_argument("trace", help="a Kineto trace recorded with record_shapes=True")
    fp.add_argument("--format", choices=("table", "json", "csv"), default="table", help="table (default), json or csv")
    fp.add_argument("--table", choices=("ops", "categories", "calls"), default="ops", help="which table csv writes")
    fp.add_argument("-o", "--output", help="write the report to PATH instead of stdout")
    fp.add_argument("--device-spec", metavar="NAME|FILE.toml", help="peak specs to use instead of the detected device")
    fp.add_argument("--roofline", metavar="FILE", help="draw the roofline scatter to FILE (.png/.svg)")
    fp.add_argument("--shares-plot", metavar="FILE", help="draw FLOP share vs time share per class to FILE")
    fp.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops in the table view (default 15)")
    analysis_arguments(fp)


def run(args: argparse.Namespace) -> int:
    from ..flops import flops_analysis

    rep = flops_analysis(args.trace, device_spec=args.device_spec, **analysis_options(args))
    if args.roofline or args.shares_plot:
        from ..report import figures
        if args.roofline:
            figures.plot_roofline(rep, args.roofline)
        if args.shares_plot:
            figures.plot_shares(rep, args.shares_plot)
    from ..report.files import flops_csv
    from ..report.terminal.flops import render_flops

    return write_model(args, rep, lambda r, console: render_flops(r, console, top=args.top),
                       csv=lambda r: flops_csv(r, args.table))
