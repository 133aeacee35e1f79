"""One exception type for every refusal, so the CLI can print one line and exit 2.

A :class:`TraceError` always names the file and the problem; library callers can
catch it to tell bad input from bugs.
"""

from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """Bad or unsupported input: the file cannot be analysed as asked."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = " ".join(str(problem).split())  # always a single line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class OptionError(TraceError):
    """An option's value is refused. ``parameters`` are the option names the message uses, so the
    command line can say ``--skip-steps`` where the library says ``skip_steps``."""

    def __init__(self, path: str | Path | None, problem: str, *parameters: str):
        self.parameters = parameters
        super().__init__(path, problem)
