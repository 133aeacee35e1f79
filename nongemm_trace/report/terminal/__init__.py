"""Terminal renderers (rich): one module per result model, each reading the model only.

Tables are sized to the terminal; off a terminal (a pipe, a CI log, ``-o FILE``) they are
whole (see :func:`nongemm_trace.report.output.draw`). Styles come from :mod:`..palette`.
"""

from __future__ import annotations

from rich.markup import escape as _markup_escape

from ..escape import printable
from ..palette import WARNING
from ..sentences import unprofiled_source  # noqa: F401 - the renderers' import path


def escape(text: str) -> str:
    """Text from a trace for a rich console: control characters dropped (:func:`..escape.printable`: no
    escape sequence reaches the terminal) and rich's markup escaped (a name never styles or links)."""
    return _markup_escape(printable(text))


def warning_line(code: str, message: str, count: int | None = None) -> str:
    """One warning, indented, its code coloured (and its count when it has one)."""
    return f"  [{WARNING}]{code}[/{WARNING}]" + ("" if count is None else f" ({count:,})") + f": {escape(message)}"


def si(x: float | None) -> str:
    """A count with its SI prefix (``1.23 G``); ``-`` for none."""
    if x is None:
        return "-"
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:,.2f} {unit}"
    return f"{x:,.0f}"


#: the most rows of a per-step table a terminal shows: a trace of a million 9 us steps drew a
#: million rows (and held each as rich's cells); JSON, CSV and Parquet keep every step
MAX_STEP_ROWS = 500


def first_rows(df, limit: int = MAX_STEP_ROWS):
    """The first ``limit`` rows of a per-step table, and how many more there are."""
    return df.head(limit), max(0, df.height - limit)


def more_rows_line(more: int, what: str = "steps") -> str:
    """The line under a capped table: how many rows it left out and where they are."""
    return f"… {more:,} more {what} (every one is in --format json, csv or parquet)"
