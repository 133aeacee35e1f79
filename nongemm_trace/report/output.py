"""Where a rendering goes: standard output or a file (``-o``), and the width of a rich console
(the terminal's; whole tables off a terminal)."""

from __future__ import annotations

import io
import os
import sys
from typing import Any, Callable

from ..safe_write import write_file

#: the width of output that is not a terminal (a pipe, a CI log, a file): wide enough that every
#: table is sized to its content and no number or name is cut; ``COLUMNS`` sets another
UNBOUNDED_WIDTH = 100_000


def draw(output: str | None, render: Callable[[Any], None], width: int | None = None) -> None:
    """Draw a rich rendering to the terminal (its width), or whole to a pipe or to ``output`` as plain text.
    ``width`` fixes the width off a terminal (a summary file that must stay whole whatever the
    environment says); otherwise ``COLUMNS`` sets it when given."""
    from rich.console import Console

    if width is None:
        columns = os.environ.get("COLUMNS", "").strip()
        width = int(columns) if columns.isdigit() and int(columns) > 0 else UNBOUNDED_WIDTH
    if output:
        buf = io.StringIO()
        render(Console(file=buf, width=width, color_system=None))
        write_file(output, buf.getvalue())
    elif sys.stdout.isatty():
        render(Console())
    else:
        render(Console(width=width, color_system=None))


def emit(text: str, output: str | None) -> None:
    """Text to ``output`` (written whole or not at all, never over an input), or to standard output."""
    if output:
        write_file(output, text)
    else:
        sys.stdout.write(text)
