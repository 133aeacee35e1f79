"""One chunk of events -> partial tables, by the C scanner when it is built, else by msgspec.

The C scanner (``csrc/nongemm_scan.c``, the top-level module ``_nongemm_scan``) reads
the fields the analysis uses straight into Arrow buffers, without a Python object per
event and without holding the GIL. It accepts only input that the msgspec path
(:mod:`.events` + :func:`.tables.chunk_tables`) would turn into exactly the same tables;
on anything else it names the reason and the chunk is decoded the Python way. The
extension is optional (built at install time where a C compiler exists);
``NONGEMM_FAST_SCAN=off`` turns it off (to compare the two paths).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from .events import decode_events
from .tables import Tally, chunk_tables, frame_tables

#: the result layout this module reads (the extension's ``ABI``)
ABI = 4


class _Columns:
    """The scanner's result as an Arrow PyCapsule producer: polars takes the buffers without
    copying them and without pyarrow (whose import alone costs 40-90 MB of memory)."""

    __slots__ = ("_capsules",)

    def __init__(self, schema: Any, array: Any) -> None:
        self._capsules = (schema, array)

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        return self._capsules


def _load_scanner() -> Any:
    try:
        import _nongemm_scan
    except ImportError:
        return None
    return _nongemm_scan if getattr(_nongemm_scan, "ABI", None) == ABI else None


_SCANNER = _load_scanner()


def available() -> bool:
    """The C scanner is built, of this version, and not turned off."""
    off = os.environ.get("NONGEMM_FAST_SCAN", "on").strip().lower() in ("0", "off", "false", "no")
    return _SCANNER is not None and not off


def scan(raw: Any) -> pl.DataFrame | str:
    """A JSON array of events (bytes-like) -> one row per event with the fields the tables use,
    or the reason the scanner left it to the Python decoder."""
    res = _SCANNER.scan(raw)
    if isinstance(res, str):
        return res
    n, columns = res
    wide = pl.DataFrame([pl.Series(name, _Columns(schema, array)) for name, schema, array in columns])
    assert wide.height == n
    return wide


def trim() -> None:
    """Return the scanner's spare column buffers to the system once a load is done (they are
    kept from chunk to chunk: fresh pages cost a fault each)."""
    if _SCANNER is not None:
        _SCANNER.trim()


def decode_chunk(path: str | Path, raw: Any, keep_python: bool, tally: Tally,
                 malformed: dict[str, int]) -> tuple[int, dict[str, pl.DataFrame]]:
    """(number of events, partial tables with chunk-relative ``ev_idx``) of one JSON array of events.
    Raises what :func:`.events.decode_events` raises for input neither path accepts."""
    if available():
        wide = scan(raw)
        if not isinstance(wide, str):
            return wide.height, frame_tables(wide, 0, keep_python, tally)
    events = decode_events(path, raw, malformed)
    return len(events), chunk_tables(events, 0, keep_python, tally)
