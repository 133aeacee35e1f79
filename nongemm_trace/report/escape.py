"""Names from a trace are untrusted text: the one place that makes them safe to show.

Kernel, op, device and file names come from someone else's run and can hold anything: escape
sequences that retitle or recolour a terminal, markdown that breaks a table or hides a link,
text that a spreadsheet runs as a formula. The documents keep every name exactly (JSON,
Parquet); the renderers for people pass them through here:

* terminal and plain text (:func:`printable`, defined in :mod:`..errors`, whose one-line errors
  use it too): control characters are dropped (tabs and line breaks become a space), and so are
  the bidirectional overrides that make text read differently than it is stored;
* markdown (:func:`md_code` for names, :func:`md_text` for prose that may quote one, :func:`md_cell`
  for any table cell): names become code spans (no link, emphasis or HTML is parsed inside
  one), whose fence is longer than any run of backticks in the name; ``|`` is escaped in
  every cell (GitHub splits a row at it even inside code) and line breaks become spaces;
* CSV (:func:`csv_text`, :func:`csv_frame`): a text cell that starts with ``=``, ``+``, ``-``,
  ``@``, a tab or a carriage return gets a leading ``'``, so that a spreadsheet shows it as text
  instead of evaluating it (the OWASP rule for CSV injection). Numbers are never changed.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ..errors import printable

__all__ = ["printable", "printable_lines", "md_cell", "md_code", "md_text", "csv_text", "csv_frame"]

#: the characters that start a formula in a spreadsheet
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&!#])")


def printable_lines(text: str) -> str:
    """Plain text of several lines for a terminal: each line :func:`printable`, the line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def md_cell(text: Any) -> str:
    """Any markdown table cell: printable, ``|`` escaped."""
    return printable(text).replace("|", "\\|")


def md_code(name: Any) -> str:
    """A name as a markdown code span (in a table, :func:`md_cell` escapes its ``|`` as for any cell)."""
    s = printable(name)
    if not s:
        return ""
    fence = "`" * (max((len(r) for r in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_text(text: Any) -> str:
    """Prose for markdown (a warning that quotes a name): printable, with the characters that start
    markup, links or HTML backslash-escaped."""
    return _MD_SPECIAL.sub(r"\\\1", printable(text))


def csv_text(value: Any) -> Any:
    """One CSV cell: text that a spreadsheet would evaluate gets a leading ``'``; other values as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_frame(df: pl.DataFrame) -> pl.DataFrame:
    """:func:`csv_text` on every text column of ``df`` (in polars, not per row)."""
    starts = "^[" + re.escape("".join(FORMULA_START)) + "]"
    text = [c for c, t in df.schema.items() if t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum)]
    return df.with_columns(pl.when(pl.col(c).cast(pl.String).str.contains(starts))
                           .then(pl.lit("'") + pl.col(c).cast(pl.String))
                           .otherwise(pl.col(c).cast(pl.String)).alias(c) for c in text)
