"""``convert`` (an Nsight Systems export to a Kineto trace) and ``annotate`` (the trace with each
op's and activity's category written into it)."""

from __future__ import annotations

import argparse

from . import options
from .progress import wrote

CONVERT_HELP = ("an Nsight Systems SQLite export (.sqlite[.gz], or .nsys-rep with nsys on PATH) to a "
                "Kineto-compatible trace (.json or .json.gz)")
ANNOTATE_HELP = ("write the trace with args.nongemm_category / nongemm_class on every op and GPU activity "
                 "(for Perfetto / chrome://tracing)")


def convert_arguments(cv: argparse.ArgumentParser) -> None:
    cv.add_argument("report", help="the Nsight Systems report (.sqlite[.gz] export, or .nsys-rep)")
    cv.add_argument("-o", "--output", required=True, help="the Kineto trace to write (.json or .json.gz)")


def run_convert(args: argparse.Namespace) -> int:
    from ..writers.convert import convert

    trace = convert(args.report, args.output)
    wrote(f"wrote {args.output}: {trace.activities.height:,} GPU activities, {trace.launches.height:,} launch calls, "
          f"{trace.ops.height:,} NVTX ranges" + "".join(f"; {a.message}" for a in trace.anomalies))
    return 0


def annotate_arguments(n: argparse.ArgumentParser) -> None:
    n.add_argument("trace", help="the trace to annotate")
    n.add_argument("-o", "--output", required=True, help="output trace (.json or .json.gz)")
    options.add(n, "taxonomy", "level")


def run_annotate(args: argparse.Namespace) -> int:
    from ..writers.annotate import annotate

    done = annotate(args.trace, args.output, taxonomy=args.taxonomy, level=args.level)
    wrote(f"wrote {args.output}: {done.ops:,} ops and {done.activities:,} GPU activities annotated")
    return 0
