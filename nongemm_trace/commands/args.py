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
        command.arguments(sub.add_parser(command.name, help=command.help))
    return p
