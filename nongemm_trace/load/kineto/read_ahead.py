"""Read and scan the start of a trace while the command line imports (no polars here).

Before it can analyse anything, the command spends 0.15-0.3 s importing polars and the
pipeline: Python code on one core, holding the GIL. The C scanner can meanwhile read,
cut and scan the first chunks of the trace on the other core in a thread of its own, which
needs no GIL (a Python thread doing the same was tried: contending for the GIL, it slowed the
imports as much as it saved). :func:`start` begins that; the loader :func:`take`\\s what was
scanned, and reads on from where the thread stopped.

The thread cuts exactly where the loader would (:mod:`.cutting`) and scans each chunk as
:func:`.fast_scan.scan` does, so the tables are the same; it stops at the first chunk it
cannot cut or scan (the loader then decodes that one as it always does), a chunk's length
before the end of the file (the last events and the keys after the array stay with the
loader), or when taken. A ``.gz`` trace is inflated by the thread with zlib where the
scanner was built with it (``READ_AHEAD_GZIP``); the loader, which cannot take over
zlib's state, inflates the file again from its start (isal: 2-3 times zlib's speed) and
skips what was read ahead. ``NONGEMM_READ_AHEAD=off`` turns it off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core import native
from ..roles import TIME_LIMIT_US
from . import cutting, scanner

__all__ = ["ReadAhead", "discard", "start", "take", "wait", "worth_it"]


@dataclass
class ReadAhead:
    """What the thread did: the scanner's results of the chunks it scanned (file order), the
    offset of the next chunk's first event in the (inflated) text, where the ``traceEvents``
    key starts and the bytes before it (the metadata), and why it stopped."""

    results: tuple
    resume: int
    key_start: int
    prefix: bytes
    why: str


#: the one read-ahead in flight: (path, keep_python, handle)
_pending: list[tuple[str, bool, Any]] = []
#: why the last read-ahead taken stopped, and the chunks it had scanned (for tests and profiling)
stopped: list = []


def worth_it(path: str | Path) -> bool:
    """A regular file large enough (``.gz`` only where the scanner links zlib; not an Nsight
    Systems export), the scanner built, scanning threads allowed."""
    if not scanner.available() or native.turned_off("NONGEMM_READ_AHEAD") or not scanner.threads_allowed():
        return False
    if not hasattr(scanner.SCANNER, "read_ahead"):  # a platform without the thread
        return False
    p = str(path)
    if p.endswith((".sqlite", ".sqlite.gz", ".nsys-rep", ".nsys-rep.gz")):
        return False
    gz = p.endswith(".gz")
    if gz and not getattr(scanner.SCANNER, "READ_AHEAD_GZIP", 0):
        return False
    try:
        st = os.stat(p)
    except OSError:
        return False
    # the first chunk is cut once the first fill is in, and the last chunk's length stays with the
    # loader: below this there is at most one chunk to read ahead (trace JSON inflates 8-15x)
    need = cutting.first_fill() + 2 * cutting.chunk_bytes()
    return st.st_size >= (need // 8 if gz else need) and os.path.isfile(p)


def start(path: str | Path, keep_python: bool) -> bool:
    """Start reading ahead ``path`` (for tables with or without Python events); False when it
    is not worth it. Errors are left to the loader, which reads the file again."""
    if _pending or not worth_it(path):
        return False
    try:
        handle = scanner.SCANNER.read_ahead(os.fsencode(str(path)), scanner.ROUTES[keep_python], TIME_LIMIT_US,
                                            cutting.chunk_bytes(), cutting.read_block(), cutting.first_fill())
    except (OSError, ValueError, MemoryError):  # pragma: no cover - the loader reads it the usual way
        return False
    _pending.append((str(path), keep_python, handle))
    return True


def take(path: str | Path, keep_python: bool) -> ReadAhead | None:
    """The chunks read ahead for ``path``, or None (none started, another file or table set,
    nothing scanned). The thread stops at once (a chunk it is half-way through is the
    loader's); what it read is dropped when it is not for this load."""
    try:  # (another thread may have taken it meanwhile)
        p, keep, handle = _pending.pop()
    except IndexError:
        return None
    why, key_start, _, resume, results, prefix = scanner.SCANNER.read_ahead_take(handle)
    stopped[:] = [why, len(results)]
    if p != str(path) or keep != keep_python or resume < 0 or not results:
        return None
    return ReadAhead(results=results, resume=resume, key_start=key_start, prefix=prefix, why=why)


def wait() -> None:
    """Until the read-ahead in flight stops by itself (tests: what is taken is then known)."""
    try:
        handle = _pending[-1][2]
    except IndexError:  # none in flight, or taken meanwhile
        return
    scanner.SCANNER.read_ahead_wait(handle)  # the thread's joins are serialised in C: take may run beside it


def discard() -> None:
    """Stop and drop a read-ahead nobody took (the analysis failed before loading): its tables
    are freed now, not at exit."""
    while True:
        try:
            handle = _pending.pop()[2]
        except IndexError:
            return
        scanner.SCANNER.read_ahead_take(handle)
