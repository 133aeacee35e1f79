"""One chunk of events -> partial tables, by the C scanner when it is built, else by msgspec.

The C scanner (``csrc/nongemm_scan.c``, the top-level module ``_nongemm_scan``) reads
the fields the analysis uses straight into the tables' Arrow buffers, without a Python
object per event and without holding the GIL: it routes each event by category, sets
aside (and counts) what the tables do not take, and converts times to nanoseconds, as
:mod:`.tables` does for the Python path. It accepts only input that the msgspec path
(:mod:`.events` + :func:`.tables.chunk_tables`) would turn into exactly the same tables;
on anything else it names the reason and the chunk is decoded the Python way. The
extension is optional (built at install time where a C compiler exists);
``NONGEMM_FAST_SCAN=off`` turns it off (to compare the two paths).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ...core.frames import ArrowCapsules
from . import duplicate_keys
from .events import TIME_LIMIT_US, decode_events
from .scanner import ROUTES, available
from .scanner import SCANNER as _SCANNER
from .tables import TABLES, Tally, as_codes, chunk_tables, count_other

__all__ = ["available", "scan", "tables_of", "trim", "decode_chunk"]


def _frame(columns: tuple) -> pl.DataFrame:
    return pl.DataFrame([pl.Series(name, ArrowCapsules(schema, array)) for name, schema, array in columns])


def scan(raw: Any, keep_python: bool, tally: Tally) -> tuple[int, dict[str, pl.DataFrame]] | str:
    """A JSON array of events (bytes-like) -> (number of events, the partial tables of
    :func:`.tables.chunk_tables`, with chunk-relative ``ev_idx``), what was set aside added to
    ``tally``; or the reason the scanner left the array to the Python decoder (tally untouched)."""
    res = _SCANNER.scan(raw, ROUTES[keep_python], TIME_LIMIT_US)
    if isinstance(res, str):
        return res
    return tables_of(res, keep_python, tally)


def tables_of(res: tuple, keep_python: bool, tally: Tally) -> tuple[int, dict[str, pl.DataFrame]]:
    """The scanner's result for one chunk (of ``scan()`` or of the read-ahead thread) as
    :func:`scan` returns it, what was set aside added to ``tally``."""
    routes = ROUTES[keep_python]
    n, parts, no_cat, bad_phase, bad_time = res
    frames = [_frame(columns) for columns in parts]
    # the text columns as categorical codes, as the Python path makes them (schema.py, tables.CATEGORICAL)
    out = {key: as_codes(key, df, tally) for key, df in zip(TABLES, frames)}
    tally.no_cat += no_cat
    for counts, into in ((bad_phase, tally.bad_phase), (bad_time, tally.bad_time)):
        for (cat, _, _), k in zip(routes, counts):
            if k:
                into[cat] = into.get(cat, 0) + k
    other = frames[len(TABLES)]
    if other.height:
        count_other(other, tally)
    return n, out


def trim() -> None:
    """Return the scanner's spare column buffers to the system once a load is done (they are
    kept from chunk to chunk: fresh pages cost a fault each)."""
    if _SCANNER is not None:
        _SCANNER.trim()


def decode_chunk(path: str | Path, raw: Any, keep_python: bool, tally: Tally,
                 malformed: dict[str, int]) -> tuple[int, dict[str, pl.DataFrame]]:
    """(number of events, partial tables with chunk-relative ``ev_idx``) of one JSON array of events.
    Raises what :func:`.events.decode_events` raises for input neither path accepts. Events that write
    a read key twice are counted in ``tally`` (the scanner leaves such a chunk to this decode)."""
    if available():
        scanned = scan(raw, keep_python, tally)
        if not isinstance(scanned, str):
            return scanned
    events = decode_events(path, raw, malformed)
    duplicate_keys.find(raw, events, tally.duplicate_keys)
    return len(events), chunk_tables(events, 0, keep_python, tally)
