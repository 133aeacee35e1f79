"""A model's ``repr`` in one short line: what it is about and how big its tables are.

The dataclasses' generated ``repr`` printed every table in full (a Report's was 16,753 characters),
which floods a notebook cell or a debugger. This one names the scalar fields (long texts cut) and
gives each table as ``rows x columns`` and each list or dict as its length; empty and unset
fields are left out."""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

#: texts longer than this are cut in the middle (a trace path keeps its file name)
TEXT_CHARS = 60


def short_repr_text(value: str) -> str:
    """``repr(value)``, cut in the middle when longer than :data:`TEXT_CHARS`."""
    if len(value) <= TEXT_CHARS:
        return repr(value)
    return repr(value[:12] + "…" + value[-(TEXT_CHARS - 13):])


def _field(value: Any) -> str | None:
    if isinstance(value, pl.DataFrame):
        return f"<{value.height}x{value.width}>"
    if isinstance(value, str):
        return short_repr_text(value)
    if isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (list, tuple, dict)) and value:
        return f"<{len(value)} {'item' if len(value) == 1 else 'items'}>"
    return None


def short_repr(self: Any) -> str:
    """``Name(field=value, table=<rows x cols>, …)`` for a dataclass model (assign as ``__repr__``)."""
    parts = []
    for f in dataclasses.fields(self):
        text = _field(getattr(self, f.name))
        if text is not None:
            parts.append(f"{f.name}={text}")
    return f"{type(self).__name__}({', '.join(parts)})"
