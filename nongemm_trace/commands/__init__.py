"""The subcommands, as a table: each name with its help, the function that adds its arguments and
the handler that runs it. :mod:`nongemm_trace.commands.args` builds the parser from this table and
:mod:`nongemm_trace.cli` dispatches on it; a handler calls the library and a renderer
(:mod:`nongemm_trace.report`). Nothing here imports polars at import time (``cli`` sets the
allocator first): handlers import the library when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from . import analyze, check, compare, explain, flops, latency, launch, report, trace_files


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: every subcommand, in the order ``--help`` lists them
COMMANDS = (
    Command("analyze", analyze.HELP, analyze.arguments, analyze.run),
    Command("compare", compare.HELP, compare.arguments, compare.run),
    Command("plot", compare.PLOT_HELP, compare.plot_arguments, compare.run_plot),
    Command("check", check.HELP, check.arguments, check.run),
    Command("flops", flops.HELP, flops.arguments, flops.run),
    Command("launch", launch.HELP, launch.arguments, launch.run),
    Command("latency", latency.HELP, latency.arguments, latency.run),
    Command("whatif", latency.WHATIF_HELP, latency.whatif_arguments, latency.run_whatif),
    Command("convert", trace_files.CONVERT_HELP, trace_files.convert_arguments, trace_files.run_convert),
    Command("explain", explain.HELP, explain.arguments, explain.run),
    Command("annotate", trace_files.ANNOTATE_HELP, trace_files.annotate_arguments, trace_files.run_annotate),
    Command("report", report.HELP, report.arguments, report.run),
)
BY_NAME = {c.name: c for c in COMMANDS}
