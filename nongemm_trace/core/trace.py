"""The loaded trace: columnar tables plus the file's metadata and load anomalies.

Tables (polars DataFrames, times in int64 nanoseconds since the trace's own origin):

``ops``         host ranges that can launch work (``cpu_op``, ``user_annotation``)
``launches``    host launch calls (``cuda_runtime``/``cuda_driver``/``hip*`` …)
``activities``  device activities: kernels, memcpys, memsets
``python``      ``python_function`` events, only when asked for (else empty)
``cuda_syncs``  CUDA synchronization records (Kineto ``cuda_sync`` events; empty where none)
``profiler_overhead``  the profiler's own host bookkeeping (Kineto ``overhead`` events: ``ts_ns``,
                ``dur_ns``), which interrupts an op without being one (empty where none)

Anomalies found while loading are kept as :class:`Anomaly` records so a report
can count them instead of losing them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..schema import empty


@dataclass(frozen=True)
class Anomaly:
    """Something odd in the input, counted: the report shows it as a warning."""

    code: str
    count: int
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "count": self.count, "message": self.message}


def no_overhead() -> pl.DataFrame:
    """An empty ``profiler_overhead`` table."""
    return pl.DataFrame(schema={"ts_ns": pl.Int64, "dur_ns": pl.Int64})


@dataclass
class Trace:
    path: str
    source_format: str
    metadata: dict[str, Any]
    ops: pl.DataFrame
    launches: pl.DataFrame
    activities: pl.DataFrame
    python: pl.DataFrame
    anomalies: list[Anomaly] = field(default_factory=list)
    cuda_syncs: pl.DataFrame = field(default_factory=lambda: empty("cuda_syncs"))
    profiler_overhead: pl.DataFrame = field(default_factory=lambda: no_overhead())

    def note(self, code: str, count: int, message: str) -> None:
        if count:
            self.anomalies.append(Anomaly(code, int(count), message))
