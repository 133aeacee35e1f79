"""Kineto / Chrome-trace JSON -> :class:`~nongemm_trace.trace.Trace`.

A large trace is **streamed**: its (decompressed) bytes arrive in blocks, the
``traceEvents`` array is cut at event boundaries (:mod:`.cutting`) into chunks of about
``cutting.chunk_bytes()`` (``NONGEMM_CHUNK_BYTES``), and each chunk is decoded (:mod:`.events`) and turned into partial
columnar tables (:mod:`.tables`) before the next is read. Only one chunk's text and
Python objects are alive at once, so peak memory is the tables plus a few chunks,
not the file. A boundary is found by a byte pattern (``}, {``) that can also occur
inside a string or a nested value; such a cut leaves a chunk that is not valid JSON
(an unterminated string or unbalanced brackets), and then the file is decoded whole
instead: the answer never depends on where the cuts fell.

Chunks are decoded by the C scanner (:mod:`.fast_scan`) where it is built: it runs
without the GIL, so two threads decode chunks side by side while this one reads and
cuts. Without it (no C compiler at install, ``NONGEMM_FAST_SCAN=off``) chunks are
decoded by msgspec in this thread. Either way every chunk's tables are put in file
order, so the result is the same.

Small files, bare-array files and anything the stream cannot handle (broken JSON
that a repair pass may fix) take the whole-document path. When the command line has
read the start of the file ahead (:mod:`.read_ahead`), the stream begins after it.
"""

from __future__ import annotations

import mmap
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import msgspec
import polars as pl

from ..errors import TraceError
from ..trace import Trace
from . import cutting, fast_scan, roles, scanner
from .cutting import EVENTS_KEY, Cutter, fill, read_block, release
from .document import decode_document, meta_of as _meta, repair as _repair
from .events import TOP_DECODER, MalformedJSON, malformed_notes
from .read_ahead import ReadAhead
from .source import Progress, iter_blocks, read_bytes
from .fast_scan import decode_chunk
from .tables import TABLES, Tally

#: threads that decode chunks side by side when the C scanner is built (it releases the GIL)
SCAN_THREADS = 2


class _SplitFailed(Exception):
    """The stream cannot be cut safely (a cut inside a string, an unusual layout): decode whole."""


def load_kineto(path: str | Path, *, keep_python: bool = False, blocks: Iterator[bytes] | None = None) -> Trace:
    """Load a Kineto JSON trace from a stream of its decompressed blocks (read here when not given):
    streamed when large (chunks scanned side by side, see :func:`.scanner.threads_allowed`), else
    decoded whole."""
    if blocks is None:
        blocks = iter_blocks(path, block=read_block())
    try:
        return _load(path, keep_python, blocks)
    finally:
        fast_scan.trim()


def load_read_ahead(path: str | Path, keep_python: bool, ahead: ReadAhead,
                    progress: Progress | None = None) -> Trace:
    """Load a JSON trace (``.gz`` too) whose first chunks a read-ahead thread has scanned
    (:mod:`.read_ahead`): their tables are taken as they are and the file is streamed on from the
    next chunk, with the fallbacks of :func:`load_kineto`."""
    blocks = iter_blocks(path, block=read_block(), progress=progress, offset=ahead.resume - 1)
    try:
        try:
            buf, _ = fill(blocks, cutting.chunk_bytes())
            held = [buf]
            del buf
            return _load_stream(str(path), held, blocks, keep_python, scanner.threads_allowed(), ahead=ahead)
        except _SplitFailed:
            pass
        finally:
            blocks.close()
        return _load_whole(path, read_bytes(path), keep_python)
    finally:
        fast_scan.trim()


def _load(path: str | Path, keep_python: bool, blocks: Iterator[bytes]) -> Trace:
    buf, eof = fill(blocks, cutting.chunk_bytes())
    if eof:
        return _load_whole(path, bytes(buf), keep_python)
    held = [buf]
    del buf  # _load_stream takes the only reference, so it can free the buffer
    try:
        return _load_stream(str(path), held, blocks, keep_python, scanner.threads_allowed())
    except _SplitFailed:
        pass
    finally:
        close = getattr(blocks, "close", None)
        if close:
            close()
    held.clear()
    return _load_whole(path, read_bytes(path), keep_python)


def _load_stream(path: str, held: list[bytearray], blocks: Iterator[bytes], keep_python: bool, threads: bool,
                 ahead: ReadAhead | None = None) -> Trace:
    """Decode ``traceEvents`` chunk by chunk as the blocks arrive; the keys around it are metadata.
    ``held`` holds the bytes read so far (taken out, so that only this function references them).
    ``threads``: whether C-scanned chunks may be decoded by threads side by side.
    ``ahead``: what a read-ahead scanned (and the bytes before the ``traceEvents`` key), the
    blocks then starting at the byte before the next chunk's first event."""
    buf = held.pop()
    prefix = buf if ahead is None else ahead.prefix
    head = prefix[:64].lstrip()
    if head[:1] != b"{":
        raise _SplitFailed
    if ahead is None:
        key = EVENTS_KEY.search(buf)
        if key is None:
            raise _SplitFailed
        key_start, key_end = key.start(), key.end()
    else:
        key_start, key_end = ahead.key_start, 1
    try:  # the text before the key, closed, must be an object: then the key is at the top level
        meta = _meta(TOP_DECODER.decode(bytes(prefix[:key_start]) + b'"traceEvents":[]}'))
    except (msgspec.DecodeError, RecursionError):
        raise _SplitFailed from None
    del prefix
    meta.pop("traceEvents", None)
    malformed: dict[str, int] = {}
    tally = Tally()
    chunks: dict[int, tuple[int, dict[str, pl.DataFrame]]] = {}  # by chunk number: (events, tables)
    seq = 0
    streamed = 0  # bytes of JSON cut into chunks so far
    # chunks a read-ahead scanned: numbered first, wrapped into tables one at a time between
    # the next chunks' hand-overs (the scanning threads start at once)
    scanned: deque[tuple[int, tuple]] = deque()
    if ahead is not None:
        scanned.extend(enumerate(ahead.results))
        seq = len(scanned)
        streamed = ahead.resume
        ahead = None

    def wrap_scanned() -> None:
        n, res = scanned.popleft()
        chunks[n] = fast_scan.tables_of(res, keep_python, tally)
    pool: ThreadPoolExecutor | None = None
    pending: deque[tuple[int, Future, Any]] = deque()  # chunks being decoded by the threads, in file order
    spare: list[mmap.mmap] = []  # buffers of decoded chunks, for the next ones
    cutter = Cutter(buf, key_end, blocks, spare)  # buf[key_end - 1] is the array's '[' (or a chunk's)
    del buf

    def local(raw) -> None:
        try:
            chunks[seq] = decode_chunk(path, raw, keep_python, tally, malformed)
        except MalformedJSON:
            raise _SplitFailed from None

    if threads and fast_scan.available():
        # the C scanner runs without the GIL: threads of this process decode chunks side by side
        pool = ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="nongemm-scan")

    def collect() -> None:
        n, fut, used = pending.popleft()
        try:
            count, tables, their_tally, their_malformed = fut.result()
        except MalformedJSON:
            raise _SplitFailed from None
        chunks[n] = (count, tables)
        if used is not None:
            spare.append(used)  # the thread is done with its buffer: the next chunk can reuse it
        tally.add(their_tally.to_dict())
        for cat, k in their_malformed.items():
            malformed[cat] = malformed.get(cat, 0) + k

    def add(raw, owner) -> None:
        nonlocal seq, streamed
        streamed += len(raw)
        if pool is not None:
            while len(pending) >= SCAN_THREADS + 1:
                if scanned:
                    wrap_scanned()
                else:
                    collect()
            pending.append((seq, pool.submit(_decode_apart, path, raw, keep_python), owner))
            seq += 1
            return
        local(raw)
        seq += 1

    try:
        for view, owner in cutter:
            try:
                add(view, owner)
            finally:
                if pool is None:
                    release(view)  # raw fields of the events referenced it until add() returned
                    spare.append(owner)
                del view, owner
        try:  # the tail: the last events, the array's end and the keys after it
            top = TOP_DECODER.decode(b'{"traceEvents":[' + cutter.buf[cutter.pos:cutter.end])
        except (msgspec.DecodeError, RecursionError):
            raise _SplitFailed from None
        cutter.buf = None
        tail = top.pop("traceEvents", None)
        if tail is None:
            raise _SplitFailed
        if pool is not None:  # beside the last chunks still being scanned, not after them
            pending.append((seq, pool.submit(_decode_apart, path, tail, keep_python), None))
        else:
            local(tail)
        seq += 1
        while scanned:
            wrap_scanned()
        while pending:
            collect()
    finally:
        if pool is not None:
            for _, fut, _ in pending:
                fut.cancel()
            pool.shutdown(wait=True)
    meta.update(_meta(top))
    return _build(path, meta, _in_file_order(chunks), tally, malformed_notes(malformed))


def _decode_apart(path: str, raw, keep_python: bool) -> tuple[int, dict[str, pl.DataFrame], Tally, dict[str, int]]:
    """One chunk on a scanning thread, with its own tally (merged in file order by the caller)."""
    tally, malformed = Tally(), {}
    try:
        count, tables = decode_chunk(path, raw, keep_python, tally, malformed)
    finally:
        if isinstance(raw, memoryview):  # a chunk's view into its buffer (the tail is its own object)
            release(raw)
    return count, tables, tally, malformed


def _in_file_order(chunks: dict[int, tuple[int, dict[str, pl.DataFrame]]]) -> dict[str, list[pl.DataFrame]]:
    """The chunks' partial tables in file order, ``ev_idx`` shifted from chunk to file positions."""
    parts: dict[str, list[pl.DataFrame]] = {k: [] for k in TABLES}
    first = 0
    for n in sorted(chunks):
        count, tables = chunks.pop(n)
        for k, df in tables.items():
            parts[k].append(df.with_columns(pl.col("ev_idx") + first) if first and df.height else df)
        first += count
    return parts


def _load_whole(path: str | Path, data: bytes, keep_python: bool) -> Trace:
    """Decode the whole document at once (small files, bare arrays, repairs)."""
    pending: list[tuple[str, int, str]] = []
    malformed: dict[str, int] = {}
    tally = Tally()
    try:
        meta, raw_events, _ = decode_document(path, data)
        _, tables = decode_chunk(path, raw_events, keep_python, tally, malformed)
    except MalformedJSON as first:
        fixed = _repair(data)
        if fixed is None:
            raise TraceError(first.path, first.problem) from None
        data, note = fixed
        pending.append(("repaired_json", 1, note))
        try:
            meta, raw_events, _ = decode_document(path, data)
            _, tables = decode_chunk(path, raw_events, keep_python, tally, malformed)
        except MalformedJSON:
            raise TraceError(first.path, first.problem) from None
    del data, raw_events
    return _build(str(path), meta, {k: [df] for k, df in tables.items()}, tally,
                  pending + malformed_notes(malformed))


def _build(path: str, meta: dict[str, Any], parts: dict[str, list[pl.DataFrame]], tally: Tally,
           pending: list[tuple[str, int, str]]) -> Trace:
    """Concatenate the chunks' partial tables, number the rows, and record what was set aside."""

    def table(key: str, index: str) -> pl.DataFrame:
        frames = [f for f in parts[key] if f.height] or parts[key][:1]
        parts[key] = []
        # no rechunk: a copy of every table at once would double the peak memory
        df = frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)
        return df.with_row_index(index)

    trace = Trace(
        path=path,
        source_format="kineto",
        metadata=meta,
        ops=table("ops", "op_id"),
        launches=table("launches", "launch_id"),
        activities=table("acts", "activity_id"),
        python=table("py", "op_id"),
    )
    for code, n, msg in pending:
        trace.note(code, n, msg)
    for cat, n in sorted(tally.bad_time.items()):
        trace.note("missing_duration", n, f"{n} '{cat}' events had no valid ts/dur (missing, negative, NaN or "
                                          f"beyond 4e15 us); skipped")
    for cat, n in sorted(tally.bad_phase.items()):
        trace.note("unsupported_phase", n, f"{n} '{cat}' events are not complete ('X') events (e.g. B/E pairs); skipped")
    trace.note("missing_category", tally.no_cat, f"{tally.no_cat} complete events had no 'cat'; ignored")
    _dedupe(trace)
    trace.launches = roles.mark_graph_launches(trace.launches)
    if tally.other_n:
        trace.note(
            "other_device_events", tally.other_n,
            f"{tally.other_n} device events are not GPU activities this tool reads ("
            f"{'; '.join(f'{c}: {roles.OTHER_DEVICE_NOTES.get(c, c)}' for c in sorted(tally.other_cats))}; "
            f"{tally.other_us:,.1f} us summed, overlapping) and are not in the GPU totals",
        )
    return trace


_DEDUPE = {
    "activities": ("activity_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "device", "stream"],
                   "GPU activity events were exact duplicates (same kernel, stream, start, duration); counted once"),
    "ops": ("op_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "external_id"],
            "op events were exact duplicates; counted once"),
    "launches": ("launch_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation"],
                 "launch-call events were exact duplicates; counted once"),
}


def _dedupe(trace: Trace) -> None:
    """Drop exact duplicate events (a writer that flushed a buffer twice), with a warning:
    two kernels cannot start at the same nanosecond on the same stream."""
    for table, (idx, keys, msg) in _DEDUPE.items():
        df = getattr(trace, table)
        if df.height == 0:
            continue
        # duplicates share start and duration: find such rows by sorting two int columns (hashing
        # millions of rows costs several times more memory), then compare the full key on those only
        times = df.select("ts_ns", "dur_ns", pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row")) \
            .sort("ts_ns", "dur_ns")
        same = (pl.col("ts_ns").diff() == 0) & (pl.col("dur_ns").diff() == 0)
        rows = times.filter(same.fill_null(False) | same.shift(-1).fill_null(False))["_row"]
        if rows.len() == 0:
            continue
        cand = df[rows.sort()]
        dup = cand.select(idx, (~pl.struct(keys).is_first_distinct()).alias("_dup")).filter(pl.col("_dup"))[idx]
        dropped = dup.len()
        if dropped:
            setattr(trace, table, df.filter(~pl.col(idx).is_in(dup.implode())).drop(idx).with_row_index(idx))
            trace.note(f"duplicate_{table}", dropped, f"{dropped} {msg}")


