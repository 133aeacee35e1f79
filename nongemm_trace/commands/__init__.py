"""The subcommands, as a table: each name with its help, the function that adds its arguments and
the handler that runs it. Every registered analysis (:mod:`nongemm_trace.analyses.registry`) is a
subcommand built from its spec (:mod:`.derived`); the commands that are not one analysis of one trace
have a module here: ``analyze`` (one trace or a batch), ``compare`` and ``plot`` (several traces),
``explain`` (a name or ``--weak``), ``report`` (the HTML page) and the trace writers ``convert`` and
``annotate``. :mod:`nongemm_trace.commands.args` builds the parser from this table and
:mod:`nongemm_trace.cli` dispatches on it. Nothing here imports polars at import time (``cli`` sets the
allocator first): handlers import the library when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from ..analyses import specs
from . import analyze, compare, derived, explain, report, trace_files


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: every subcommand, in the order ``--help`` lists them: the commands of their own, then the analyses
COMMANDS = (
    Command("analyze", analyze.HELP, analyze.arguments, analyze.run),
    Command("compare", compare.HELP, compare.arguments, compare.run),
    Command("plot", compare.PLOT_HELP, compare.plot_arguments, compare.run_plot),
    *(Command(s.name, s.help, derived.arguments_of(s), derived.run_of(s)) for s in specs()),
    Command("convert", trace_files.CONVERT_HELP, trace_files.convert_arguments, trace_files.run_convert),
    Command("explain", explain.HELP, explain.arguments, explain.run),
    Command("annotate", trace_files.ANNOTATE_HELP, trace_files.annotate_arguments, trace_files.run_annotate),
    Command("report", report.HELP, report.arguments, report.run),
)
BY_NAME = {c.name: c for c in COMMANDS}
