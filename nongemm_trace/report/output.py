"""Where a rendering goes: standard output or a file (``-o``), and the width of a rich console
(the terminal's; :data:`LOG_WIDTH` off a terminal)."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from typing import Any

from ..core.safe_write import write_file

#: the width of output that is not a terminal (a pipe, a CI log, a file): a line a log viewer or a
#: pull request shows whole. Tables fit in it because renderers shorten long names in the middle
#: (:func:`.names.shorten`; JSON and CSV keep them whole) and no number is cut; ``COLUMNS`` sets another
LOG_WIDTH = 200


def draw(output: str | None, render: Callable[[Any], None], width: int | None = None) -> None:
    """Draw a rich rendering to the terminal (its width), or as plain text to a pipe or to ``output``,
    :data:`LOG_WIDTH` wide with no trailing blanks (rich pads titles to the table's width). ``width``
    fixes the width off a terminal (a summary file whatever the environment says); otherwise
    ``COLUMNS`` sets it when given."""
    from rich.console import Console

    if width is None:
        columns = os.environ.get("COLUMNS", "").strip()
        width = int(columns) if columns.isdigit() and int(columns) > 0 else LOG_WIDTH
    if not output and sys.stdout.isatty():
        render(Console())
        return
    buf = io.StringIO()
    render(Console(file=buf, width=width, color_system=None))
    text = "\n".join(line.rstrip() for line in buf.getvalue().split("\n"))
    if output:
        write_file(output, text)
    else:
        sys.stdout.write(text)


def emit_streamed(doc: Any, output: str | None) -> None:
    """A document written a batch at a time (``doc.to_file(path)``, ``doc.write(text stream)``) to
    ``output`` by the same writer as :func:`emit`, or to standard output."""
    if output:
        write_file(output, doc.to_file)
    else:
        doc.write(sys.stdout)


def emit(text: str, output: str | None) -> None:
    """Text to ``output`` (written whole or not at all, never over an input), or to standard output."""
    if output:
        write_file(output, text)
    else:
        sys.stdout.write(text)
