"""The command line's parser: every subcommand of :data:`nongemm_trace.commands.COMMANDS` with its options.

Kept apart from :mod:`.cli` (which runs the commands) and free of polars, so the
allocator setting in :mod:`.cli` still precedes polars' import.
"""

from __future__ import annotations

import argparse

from .._version import __version__
from ..core.native import build_line
from . import COMMANDS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nongemm-trace",
        description="Where GPU time goes in a profiler trace: GEMM vs non-GEMM operators.",
    )
    p.add_argument("--version", action="version", version=f"nongemm-trace {__version__}; {build_line()}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        sp = sub.add_parser(command.name, help=command.help)
        command.arguments(sp)
        _log_options(sp)
    return p


def _log_options(p: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--verbose``, the same on every subcommand (commands/progress.py)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="no progress display; errors only on stderr")
    g.add_argument("-v", "--verbose", action="store_true", help="log each stage on stderr, with its time")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line parsed; an option the subcommand does not know is reported with the
    subcommand's usage (argparse's own message showed the top-level usage, which lists no option)."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args
