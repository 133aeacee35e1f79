"""Load a trace file into a :class:`~nongemm_trace.trace.Trace` (columnar tables)."""

from __future__ import annotations

from pathlib import Path

from ..errors import TraceError
from ..trace import Trace
from .kineto import load_kineto
from .source import SQLITE_MAGIC, read_bytes

__all__ = ["load_trace", "TraceError"]


def load_trace(path: str | Path, *, keep_python: bool = False) -> Trace:
    """Load ``path`` (Kineto ``.json`` or ``.json.gz``); bad input raises :class:`TraceError`."""
    data = read_bytes(path)
    if data.startswith(SQLITE_MAGIC):
        raise TraceError(path, "is an SQLite database (an Nsight Systems export?); only Kineto JSON traces are read")
    return load_kineto(path, keep_python=keep_python, data=data)
