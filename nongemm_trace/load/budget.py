"""Memory as the budget of a load: ``NONGEMM_MAX_MEMORY``.

What a streamed trace costs in memory is its tables, not its JSON: real traces keep about a
third of their JSON size as tables, while a file of dense small events (a 130-byte kernel
event, repeated) keeps twice its JSON size. So the streamed path is not capped by JSON bytes;
the tables are counted as the chunks' partial tables arrive (:class:`TableBudget`), and the
load is refused in one line once the analysis of what is in would need more than the budget
(the tables times :data:`PEAK_PER_TABLE_BYTE`, the analysis's copies of them included). A
stretch of JSON without an event boundary (held whole) and the whole-document path (which
holds the text) stay capped by ``NONGEMM_MAX_TRACE_BYTES`` (:func:`.source.max_trace_bytes`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import env
from ..errors import TraceError

if TYPE_CHECKING:  # pragma: no cover - the command line reads the budget before polars is imported
    import polars as pl

#: peak RSS of an analysis over the size of the loaded tables (their estimated size, op names as
#: categorical codes), with a margin: 3.9x at 1 GB of real JSON, 5.4x at 200 MB where the
#: interpreter and polars' own 100 MB weigh most (the rest: the chunks in flight, the link's and
#: the measure stage's working columns); the budget is for the large traces
PEAK_PER_TABLE_BYTE = 4
#: the default budget: this fraction of the memory available when the load starts
DEFAULT_FRACTION = 0.75


def max_memory() -> int:
    """The memory an analysis may use: ``NONGEMM_MAX_MEMORY`` (bytes), else three quarters of
    the memory available now. A value that is not a number is refused in one line."""
    text = env.text("NONGEMM_MAX_MEMORY")
    if text:
        try:
            value = int(float(text))
        except ValueError:
            raise TraceError(None, f"NONGEMM_MAX_MEMORY must be a number of bytes, not {text!r}") from None
        if value <= 0:
            raise TraceError(None, f"NONGEMM_MAX_MEMORY must be a positive number of bytes, not {text!r}")
        return value
    return max(256 << 20, int(available_memory() * DEFAULT_FRACTION))


def available_memory() -> int:
    """The memory a new allocation can have without swapping: the kernel's ``MemAvailable``
    (free memory plus the page cache it can drop: a trace just written or read sits in the page
    cache, and counting only free pages would refuse it), within a cgroup v2 limit if the process
    runs under one (a container); ``sysconf``'s free pages where neither can be read."""
    avail = _meminfo_available()
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            avail = 16 << 30
    room = _cgroup_room()
    return min(avail, room) if room is not None else avail


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What is left under this process's cgroup v2 memory limit (``memory.max`` minus
    ``memory.current``), or None without a limit."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            rel = next((line.strip().split(":", 2)[2] for line in fh if line.startswith("0::")), None)
        if rel is None:
            return None
        base = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = (base / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((base / "memory.current").read_text().strip()))
    except (OSError, ValueError, IndexError):
        return None


class TableBudget:
    """Counts the bytes of the partial tables a load has kept; :meth:`add` refuses the load once
    their analysis would need more than :func:`max_memory`."""

    def __init__(self, path: str | Path) -> None:
        self.path, self.limit = path, max_memory()
        self.used: float = 0

    def add(self, tables: dict[str, pl.DataFrame]) -> None:
        self.used += sum(df.estimated_size() for df in tables.values())
        if self.used * PEAK_PER_TABLE_BYTE > self.limit:
            raise TraceError(self.path, f"needs more than {self.limit / 1e9:.1f} GB of memory to analyse (its tables "
                                        f"alone reached {self.used / 1e9:.2f} GB before the end of the file); set "
                                        f"NONGEMM_MAX_MEMORY to raise the budget")
