"""One exception type for every refusal, so the CLI can print one line and exit 2.

A :class:`TraceError` always names the file and the problem; library callers can
catch it to tell bad input from bugs. Its line is :func:`printable`: a file name or a quoted
kernel name never sends an escape sequence to the terminal it is printed on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: line breaks and tabs -> a space; other C0/C1 controls, DEL and the bidirectional controls -> dropped
_TABLE: dict[int, str | None] = {c: " " for c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D)}
_TABLE.update({c: None for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if c not in _TABLE})
_TABLE.update({c: None for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def printable(text: Any) -> str:
    """``text`` without control characters (nor the bidirectional overrides that make text read
    otherwise than it is stored): safe to write to a terminal."""
    return str(text).translate(_TABLE)


class TraceError(Exception):
    """Bad or unsupported input: the file cannot be analysed as asked."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = " ".join(str(problem).split())  # always a single line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return printable(f"{self.path}: {self.problem}" if self.path else self.problem)


class OptionError(TraceError):
    """An option's value is refused. ``parameters`` are the option names the message uses, so the
    command line can say ``--skip-steps`` where the library says ``skip_steps``."""

    def __init__(self, path: str | Path | None, problem: str, *parameters: str):
        self.parameters = parameters
        super().__init__(path, problem)
