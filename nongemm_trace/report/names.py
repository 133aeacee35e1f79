"""Long names (C++ template kernels, Triton kernels that list every fused op) shortened for text a
person reads: terminal tables, logs, figure labels. The middle goes, the start (namespace, kernel
family) and the end (the distinguishing suffix, Triton's counter) stay, so a shortened name is
stable, readable and still found by a search of the full one's start. JSON, CSV and Parquet keep
the full names: they never call this."""

from __future__ import annotations

#: the longest name a terminal or log cell shows (a log line stays under ~200 columns)
NAME_WIDTH = 60
ELLIPSIS = "…"


def shorten(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` if it fits in ``width`` characters, else its start and end around one ``…``."""
    if len(name) <= width:
        return name
    if width < 3:
        return name[:width]
    keep = width - 1
    tail = keep // 3
    return name[:keep - tail] + ELLIPSIS + name[len(name) - tail:]


def shorten_list(names: str, width: int, sep: str = ", ") -> str:
    """A cell listing names (``a, b, c``): each name shortened, then as many as fit in ``width``
    with ``+N more`` for the rest, so a cell of twelve Triton names stays one readable line."""
    parts = [shorten(p, min(NAME_WIDTH, width)) for p in names.split(sep) if p]
    for keep in range(len(parts), 0, -1):
        text = sep.join(parts[:keep]) + (f"{sep}+{len(parts) - keep} more" if keep < len(parts) else "")
        if len(text) <= width:
            return text
    return parts[0] + (f"{sep}+{len(parts) - 1} more" if len(parts) > 1 else "") if parts else ""
