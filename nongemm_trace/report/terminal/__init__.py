"""Terminal renderers (rich): one module per result model, each reading the model only.

Tables are sized to the terminal; off a terminal (a pipe, a CI log, ``-o FILE``) they are
whole (see :func:`nongemm_trace.report.output.draw`). Styles come from :mod:`..palette`.
"""

from __future__ import annotations

from rich.markup import escape

from ..palette import WARNING


def warning_line(code: str, message: str, count: int | None = None) -> str:
    """One warning, indented, its code coloured (and its count when it has one)."""
    return f"  [{WARNING}]{code}[/{WARNING}]" + ("" if count is None else f" ({count:,})") + f": {escape(message)}"
