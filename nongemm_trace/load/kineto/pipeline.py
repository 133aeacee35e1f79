"""The streamed path: the ``traceEvents`` array cut into chunks as the blocks arrive, each
chunk decoded into partial tables, the tables put back in file order.

:class:`ChunkPipeline` owns the decoding: chunks go to the scanning threads side by side
when the C scanner is built (it runs without the GIL), else they are decoded in this
thread; chunks a read-ahead scanned come first. :func:`stream` frames the document
around it (the metadata before the key, the tail after the array).
"""

from __future__ import annotations

import mmap
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import msgspec
import polars as pl

from ...core.trace import Trace
from ...errors import TraceError
from ..bom import without_bom
from ..budget import TableBudget
from . import fast_scan
from .build import build, drop_chunk_repeats, in_file_order
from .cutting import EVENTS_KEY, Cutter, release
from .document import events_keys, meta_of
from .events import TOP_DECODER, malformed_notes
from .fast_scan import decode_chunk
from .read_ahead import ReadAhead
from .tables import Tally

#: threads that decode chunks side by side when the C scanner is built (it releases the GIL)
SCAN_THREADS = 2


class SplitFailed(Exception):
    """The stream cannot be cut safely (a cut inside a string, an unusual layout): decode whole."""


class ChunkPipeline:
    """Chunks of events (JSON arrays) in, partial tables in file order out.

    ``threads``: decode on :data:`SCAN_THREADS` threads (only where the C scanner is built);
    ``scanned``: the scanner's results of the chunks a read-ahead scanned (they come first).
    A chunk that neither decoder accepts raises :class:`SplitFailed`: the whole document's
    decode then says what is wrong (so the answer, error included, never depends on the cuts)."""

    def __init__(self, path: str, keep_python: bool, threads: bool, scanned: Iterable[tuple] = ()) -> None:
        self.path, self.keep_python = path, keep_python
        self.tally = Tally()
        self.budget = TableBudget(path)  # the tables kept so far, against NONGEMM_MAX_MEMORY
        self.malformed: dict[str, int] = {}
        self.spare: list[mmap.mmap] = []  # buffers of decoded chunks, for the cutter's next ones
        self._chunks: dict[int, tuple[int, dict[str, pl.DataFrame]]] = {}  # by chunk number: (events, tables)
        # scanned ahead: numbered first, wrapped into tables one at a time between hand-overs
        self._scanned: deque[tuple[int, tuple]] = deque(enumerate(scanned))
        self._seq = len(self._scanned)
        self._pending: deque[tuple[int, Future, Any]] = deque()  # on the threads, in file order
        self._pool = (ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="nongemm-scan")
                      if threads and fast_scan.available() else None)

    def add(self, raw: Any, owner: Any = None) -> None:
        """Decode one chunk (``owner``: the buffer ``raw`` views, reused once the chunk is decoded)."""
        n = self._seq
        self._seq += 1
        if self._pool is None:
            try:
                self._keep(n, *decode_chunk(self.path, raw, self.keep_python, self.tally, self.malformed))
            except TraceError:  # the whole document's decode gives the answer (and the error's wording)
                raise SplitFailed from None
            finally:
                if isinstance(raw, memoryview):
                    release(raw)  # raw fields of the events referenced it until decoded
                if owner is not None:
                    self.spare.append(owner)
            return
        while len(self._pending) >= SCAN_THREADS + 1:
            if self._scanned:
                self._wrap_scanned()
            else:
                self._collect()
        self._pending.append((n, self._pool.submit(_decode_apart, self.path, raw, self.keep_python), owner))

    def tables(self) -> dict[str, list[pl.DataFrame]]:
        """Every chunk's partial tables, in file order (after the last :meth:`add`)."""
        while self._scanned:
            self._wrap_scanned()
        while self._pending:
            self._collect()
        chunks, self._chunks = self._chunks, {}
        return in_file_order(chunks)

    def close(self) -> None:
        if self._pool is not None:
            for _, fut, _ in self._pending:
                fut.cancel()
            self._pool.shutdown(wait=True)

    def __enter__(self) -> ChunkPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _keep(self, n: int, count: int, tables: dict[str, pl.DataFrame]) -> None:
        """Keep chunk ``n``'s tables (``count`` events), its exact repeats dropped, against the budget."""
        self._chunks[n] = (count, drop_chunk_repeats(tables, self.tally.repeats))
        self.budget.add(self._chunks[n][1])

    def _wrap_scanned(self) -> None:
        n, res = self._scanned.popleft()
        self._keep(n, *fast_scan.tables_of(res, self.keep_python, self.tally))

    def _collect(self) -> None:
        n, fut, owner = self._pending.popleft()
        try:
            count, tables, their_tally, their_malformed = fut.result()
        except TraceError:
            raise SplitFailed from None
        self._keep(n, count, tables)
        if owner is not None:
            self.spare.append(owner)  # the thread is done with its buffer: the next chunk can reuse it
        self.tally.add(their_tally.to_dict())
        for cat, k in their_malformed.items():
            self.malformed[cat] = self.malformed.get(cat, 0) + k


def _decode_apart(path: str, raw, keep_python: bool) -> tuple[int, dict[str, pl.DataFrame], Tally, dict[str, int]]:
    """One chunk on a scanning thread, with its own tally (merged in file order by the caller)."""
    tally = Tally()
    malformed: dict[str, int] = {}
    try:
        count, tables = decode_chunk(path, raw, keep_python, tally, malformed)
    finally:
        if isinstance(raw, memoryview):  # a chunk's view into its buffer (the tail is its own object)
            release(raw)
    return count, tables, tally, malformed


def stream(path: str, held: list[bytearray], blocks: Iterator[bytes], keep_python: bool, threads: bool,
           ahead: ReadAhead | None = None) -> Trace:
    """Decode ``traceEvents`` chunk by chunk as the blocks arrive; the keys around it are metadata.
    ``held`` holds the bytes read so far (taken out, so that only this function references them).
    ``threads``: whether C-scanned chunks may be decoded by threads side by side.
    ``ahead``: what a read-ahead scanned (and the bytes before the ``traceEvents`` key), the
    blocks then starting at the byte before the next chunk's first event."""
    buf = held.pop()
    prefix = buf if ahead is None else ahead.prefix
    if without_bom(bytes(prefix[:64])).lstrip()[:1] != b"{":
        raise SplitFailed
    if ahead is None:
        key = EVENTS_KEY.search(buf)
        if key is None:
            raise SplitFailed
        key_start, key_end = key.start(), key.end()
    else:
        key_start, key_end = ahead.key_start, 1
    head = without_bom(bytes(prefix[:key_start]))
    try:  # the text before the key, closed, must be an object: then the key is at the top level
        meta = meta_of(TOP_DECODER.decode(head + b'"traceEvents":[]}'))
    except (msgspec.DecodeError, RecursionError):
        raise SplitFailed from None
    if events_keys(head, 1):  # another traceEvents key before this one: the whole document's decode says
        raise SplitFailed
    del prefix
    meta.pop("traceEvents", None)
    with ChunkPipeline(path, keep_python, threads, ahead.results if ahead else ()) as pipeline:
        ahead = None
        cutter = Cutter(buf, key_end, blocks, pipeline.spare,
                        path)  # buf[key_end - 1] is the array's '[' (or a chunk's)
        del buf
        for view, owner in cutter:
            pipeline.add(view, owner)
            del view, owner
        try:  # the tail: the last events, the array's end and the keys after it
            top = TOP_DECODER.decode(b'{"traceEvents":[' + cutter.buf[cutter.pos:cutter.end])
        except (msgspec.DecodeError, RecursionError):
            raise SplitFailed from None
        tail = top.pop("traceEvents", None)
        if tail is None or events_keys(b'{"traceEvents":[' + cutter.buf[cutter.pos:cutter.end], 2):
            raise SplitFailed  # another traceEvents key after the array
        cutter.buf = None
        pipeline.add(tail)  # beside the last chunks still being scanned, not after them
        parts = pipeline.tables()
    meta.update(meta_of(top))
    # the chunks' buffers and the scanner's spare columns are freed before the tables are put together
    # (at a 200 MB trace they were a fifth of the peak, which building the tables reaches)
    pipeline.spare.clear()
    del cutter, top
    fast_scan.trim()
    return build(path, meta, parts, pipeline.tally, malformed_notes(pipeline.malformed))
