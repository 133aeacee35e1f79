"""``check``: regression gates; exit 1 when a limit is broken."""

from __future__ import annotations

import argparse

from . import options
from .options import analysis_options
from .outputs import render

HELP = "regression gates: exit 1 when a limit is broken"


def arguments(ck: argparse.ArgumentParser) -> None:
    ck.add_argument("trace", help="the trace to gate")
    ck.add_argument("--baseline", metavar="BASE",
                    help="the trace to compare with, or its stored report (analyze --format json)")
    ck.add_argument("--max-share", action="append", metavar="CLASS=FRACTION",
                    help="e.g. non-GEMM=0.45 or non-GEMM=45%% (repeatable; a category name works too)")
    ck.add_argument("--max-category-share", action="append", metavar="CATEGORY=FRACTION",
                    help="e.g. memory=0.2 (repeatable; a taxonomy category)")
    ck.add_argument("--max-regression", metavar="PCT", help="GPU time per step against --baseline, e.g. 10%%")
    ck.add_argument("--max-category-regression", action="append", metavar="CATEGORY=PCT",
                    help="a category's GPU time per step against --baseline, e.g. memory=5%% (repeatable)")
    ck.add_argument("--min-activities", metavar="PCT",
                    help="with --baseline: fail a trace with fewer GPU activities per step than this share of the "
                         "baseline's (default 25%%); a trace with no GPU activity always fails")
    ck.add_argument("--max-exposed-communication", metavar="FRACTION",
                    help="communication no computation hid, as a share of the busy GPU time, e.g. 10%%")
    ck.add_argument("--max-skew-us", metavar="TIME",
                    help="with --ranks: the largest arrival skew of a collective matched across the ranks, in us "
                         "(500) or with a unit (2ms)")
    ck.add_argument("--ranks", nargs="+", metavar="TRACE", help="the other ranks' traces of the run (--max-skew-us)")
    options.add_format(ck, "check")
    options.add(ck, *options.ANALYSIS)


def run(args: argparse.Namespace) -> int:
    from ..analyses.check import MIN_ACTIVITIES, check, parse_fraction, parse_named
    from ..analyses.comm_gates import parse_us
    floor = MIN_ACTIVITIES if args.min_activities is None else parse_fraction(args.min_activities, "--min-activities")
    violations, rep = check(
        args.trace, baseline=args.baseline, max_share=parse_named(args.max_share, "--max-share"),
        max_category_share=parse_named(args.max_category_share, "--max-category-share"),
        max_regression=parse_fraction(args.max_regression, "--max-regression") if args.max_regression else None,
        max_category_regression=parse_named(args.max_category_regression, "--max-category-regression"),
        min_activities=floor, max_exposed_communication=None if args.max_exposed_communication is None
        else parse_fraction(args.max_exposed_communication, "--max-exposed-communication"),
        max_skew_us=None if args.max_skew_us is None else parse_us(args.max_skew_us, "--max-skew-us"), ranks=args.ranks,
        **analysis_options(args))
    render("check", (args.trace, violations, rep), args)
    return 1 if violations else 0
