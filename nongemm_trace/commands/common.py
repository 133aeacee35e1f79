"""What several subcommands share when they run: the exit status of bad input, the time limit of
one trace, and whether a single analysis finished (the options are :mod:`.options`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import OptionError, TraceError

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
