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
    (two cuBLAS kernels that differ only in their tile size, in the middle) keep the places where they
    differ: ``start…tilesize64x64x8_st…end``. Equal names stay equal.

    A name shows where it parts from each name it would read as, not where the whole group first
    parts: of five ``elementwise_kernel<128, …>`` kernels one is ``<128, 2, …>``, and the four others
    (mul, add, neg over BFloat16) part later. Names that differ in two places far apart (cub's
    sort kernels over ``<long, float>`` and ``<long, int>``, in two template lists) show two windows."""
    short = {n: shorten(n, width) for n in names}
    rivals: dict[str, set[str]] = {}  # the names each one has read as, so far
    for _ in range(_ROUNDS):  # shown apart, two names of different groups may read alike: again
        groups: dict[str, set[str]] = {}
        for n, s in short.items():
            groups.setdefault(s, set()).add(n)
        alike = [g for g in groups.values() if len(g) > 1]
        if not alike:
            break
        for group in alike:
            for n in group:
                rivals.setdefault(n, set()).update(group - {n})
                short[n] = _around(n, sorted({_common_length(n, m) for m in rivals[n]}), width)
    return [short[n] for n in names]


#: passes over the names that still read alike (the second is rare, a third was never needed)
_ROUNDS = 4


def _common_length(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


#: at most this many windows of a name's middle are shown (each 3 characters before a difference)
MAX_WINDOWS = 3


def _around(name: str, points: list[int], width: int) -> str:
    """``name`` in ``width`` characters: its start, a window from just before each of the sorted
    ``points`` (nearby points share one; the fewest windows that hold them all, at most
    :data:`MAX_WINDOWS`, keeping the last ones), and its end."""
    if len(name) <= width or width < 12 or not points:
        return shorten(name, width)
    for k in range(1, MAX_WINDOWS + 1):
        mid = (width - (k + 1) - 2 * ((width - k - 1) // 4)) // k
        starts = _clusters(points, mid)
        if len(starts) <= k:
            break
        if k == 1 and (wide := _one_window(name, points, width)) is not None:
            return wide  # one window with a shorter start and end says more than several short ones
    text = _windows(name, starts[-MAX_WINDOWS:], width)
    return text if text is not None else shorten(name, width)


def _one_window(name: str, points: list[int], width: int) -> str | None:
    """``start…window…end`` with one window from 3 characters before the first point to 3 after the
    last, the start and end taking what is left (at least 4 characters each); None if it does not fit."""
    begin, end = max(0, points[0] - 3), min(len(name), points[-1] + 4)
    edge = width - 2 - (end - begin)
    head = edge - edge // 2
    if edge // 2 < 4 or begin < head or end > len(name) - edge // 2:
        return None
    return name[:head] + ELLIPSIS + name[begin:end] + ELLIPSIS + name[len(name) - edge // 2:]


def _clusters(points: list[int], mid: int) -> list[int]:
    """The first point of each run of ``points`` that one window of ``mid`` characters shows (a window
    begins 3 characters before its point and shows at least 3 after the last one it holds)."""
    starts: list[int] = []
    for p in points:
        if not starts or p + 3 > starts[-1] - 3 + mid:
            starts.append(p)
    return starts


def _windows(name: str, starts: list[int], width: int) -> str | None:
    """``start…window…[window…]end`` in ``width`` characters, each window beginning 3 characters
    before its point (None if the windows overlap the start)."""
    cuts = len(starts) + 1  # one ellipsis around each window
    head = tail = (width - cuts) // 4
    mid = (width - cuts - head - tail) // len(starts)
    pieces, at = [name[:head]], head
    for point in starts:
        begin = max(at, point - 3)
        rest = width - sum(map(len, pieces)) - len(pieces)  # what the end may take from here
        if begin + mid >= len(name) - (rest - mid - 1):  # near the end: this window joins the end
            return ELLIPSIS.join([*pieces, name[len(name) - rest:]]) if begin >= len(name) - rest else None
        pieces.append(name[begin:begin + mid])
        at = begin + mid
    pieces.append(name[len(name) - (width - sum(map(len, pieces)) - len(pieces)):])
    return ELLIPSIS.join(pieces)
