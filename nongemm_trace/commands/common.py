"""What several subcommands share: the analysis options every command takes, and their values."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..errors import OptionError, TraceError
from ..vocabulary import LEVELS

#: the exit status of bad input (a file that cannot be read, an option out of range)
EXIT_BAD_INPUT = 2

#: set once a single-trace analysis has written its report: it started nothing (worker processes,
#: Ray) that must be shut down at exit, so ``cli.entry`` may skip the interpreter's teardown
finished = {"single_analysis": False}


@contextmanager
def time_limit(trace: str, seconds: float | None) -> Iterator[None]:
    """``--timeout`` for one trace analysed in this process: past ``seconds``, a watchdog thread prints
    the one line and ends the process with exit 2 (a read blocked in the kernel, or native code, is
    never interrupted by an exception; the process's end is the one way out). The limit covers the
    analysis, not the writing of the report, so it never leaves a partial output."""
    if seconds is None:
        yield
        return
    if not seconds > 0:  # NaN, 0 and negative limits could never be met
        raise OptionError(trace, f"--timeout must be a number of seconds above 0, not {seconds!r}")
    import os
    import sys
    import threading

    def expire() -> None:
        line = TraceError(trace, f"timed out (no result within the time limit of {seconds:g} s, --timeout)")
        sys.stderr.write(f"nongemm-trace: error: {line.one_line()}\n")
        sys.stderr.flush()
        os._exit(EXIT_BAD_INPUT)
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def analysis_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every subcommand that analyses traces (``analyze`` has its own, with more help)."""
    p.add_argument("--taxonomy", default="default", help="built-in taxonomy name or a .toml file")
    p.add_argument("--level", choices=tuple(LEVELS), default=None,
                   help="which op an activity is charged to (default: the taxonomy's)")
    p.add_argument("--drop-unlinked", action="store_true",
                   help="leave out GPU activities with no launch call in the file")
    p.add_argument("--step-marker", metavar="NAME", help="name of the ranges that mark steps")
    p.add_argument("--skip-steps", type=int, default=0, metavar="N", help="drop the first N steps (warm-up)")


def analysis_options(args: argparse.Namespace) -> dict:
    """The values of :func:`analysis_arguments`, as the library's keyword arguments."""
    return {"taxonomy": args.taxonomy, "level": args.level, "drop_unlinked": args.drop_unlinked,
            "step_marker": args.step_marker, "skip_steps": args.skip_steps}


def write_model(args: argparse.Namespace, model: Any, table: Callable[[Any, Any], None],
                **text_formats: Callable[[Any], str]) -> int:
    """A result model in the format asked for: ``json`` (its document), a text format named in
    ``text_formats`` (``csv=…``, ``markdown=…``: model -> text), else ``table`` on a rich console."""
    from ..report.json_out import render_json
    from ..report.output import draw, emit

    if args.format == "json":
        emit(render_json(model), args.output)
    elif args.format in text_formats:
        emit(text_formats[args.format](model), args.output)
    else:
        draw(args.output, lambda console: table(model, console))
    return 0
