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


def shorten_apart(names: list[str], width: int = NAME_WIDTH) -> list[str]:
    """Each name shortened as :func:`shorten` does, except that names which would then read the same
    (two cuBLAS kernels that differ only in their tile size, in the middle) keep the part where they
    first differ: ``start…tilesize64x64x8_st…end``. Equal names stay equal."""
    short = [shorten(n, width) for n in names]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(short):
        groups.setdefault(s, []).append(i)
    for idx in groups.values():
        full = [names[i] for i in idx]
        if len(set(full)) < 2:
            continue
        at = len(_common_prefix(full))
        for i in idx:
            short[i] = _around(names[i], at, width)
    return short


def _common_prefix(names: list[str]) -> str:
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def _around(name: str, at: int, width: int) -> str:
    """``name`` in ``width`` characters: its start, the part from just before ``at``, and its end."""
    if len(name) <= width or width < 12:
        return shorten(name, width)
    keep = width - 2
    head, tail = keep // 4, keep // 4
    mid = keep - head - tail
    start = max(head, at - 3)
    if start + mid >= len(name) - tail:  # the difference is near the end: start and a longer end
        return name[:head] + ELLIPSIS + name[len(name) - (keep - head):]
    return name[:head] + ELLIPSIS + name[start:start + mid] + ELLIPSIS + name[len(name) - tail:]
