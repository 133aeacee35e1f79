"""Kineto / Chrome-trace JSON -> :class:`~nongemm_trace.core.trace.Trace`: the entry points.

A large trace is **streamed**: its (decompressed) bytes arrive in blocks, the
``traceEvents`` array is cut at event boundaries (:mod:`.cutting`) into chunks of about
``cutting.chunk_bytes()`` (``NONGEMM_CHUNK_BYTES``), and each chunk is decoded (:mod:`.events`) and turned into partial
columnar tables (:mod:`.tables`) before the next is read. Only one chunk's text and
Python objects are alive at once, so peak memory is the tables plus a few chunks,
not the file. A boundary is found by a byte pattern (``}, {``) that can also occur
inside a string or a nested value; such a cut leaves a chunk that is not valid JSON
(an unterminated string or unbalanced brackets), and then the file is decoded whole
instead: the answer never depends on where the cuts fell.

Chunks are decoded by :class:`.pipeline.ChunkPipeline`: by the C scanner
(:mod:`.fast_scan`) on two threads side by side where it is built (it runs without the
GIL) while this one reads and cuts, else by msgspec in this thread (no C compiler at
install, ``NONGEMM_FAST_SCAN=off``). Either way every chunk's tables are put in file
order, so the result is the same.

Small files, bare-array files and anything the stream cannot handle (broken JSON
that a repair pass may fix) take the whole-document path. When the command line has
read the start of the file ahead (:mod:`.read_ahead`), the stream begins after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ...core.trace import Trace
from ...errors import TraceError
from ..budget import TableBudget
from ..source import Progress, iter_blocks, read_bytes
from . import cutting, fast_scan, scanner
from .build import build
from .cutting import fill, read_block
from .document import decode_document, repair
from .events import MalformedJSON, malformed_notes
from .fast_scan import decode_chunk
from .pipeline import SplitFailed, stream
from .read_ahead import ReadAhead
from .tables import Tally


def load_kineto(path: str | Path, *, keep_python: bool = False, blocks: Iterator[bytes] | None = None) -> Trace:
    """Load a Kineto JSON trace from a stream of its decompressed blocks (read here when not given):
    streamed when large (chunks scanned side by side, see :func:`.scanner.threads_allowed`), else
    decoded whole."""
    if blocks is None:
        blocks = iter_blocks(path, block=read_block(), capped=False)
    try:
        buf, eof = fill(blocks, cutting.chunk_bytes())
        if eof or _not_json(buf):  # (not JSON: refused at its first bytes, not after the stream's cap of them)
            return load_whole(path, bytes(buf), keep_python)
        held = [buf]
        del buf  # stream() takes the only reference, so it can free the buffer
        return _stream_or_whole(path, held, blocks, keep_python)
    finally:
        fast_scan.trim()


#: bytes a JSON document (or a UTF-8 byte order mark) can start with
_JSON_STARTS = frozenset(b" \t\r\n{[\xef")


def _not_json(buf: bytearray) -> bool:
    """The first byte cannot start a JSON document (``/dev/zero``, a binary file): the whole-document
    decode of the first chunk gives the refusal every path gives, without reading on."""
    return bool(buf) and buf[0] not in _JSON_STARTS


def load_read_ahead(path: str | Path, keep_python: bool, ahead: ReadAhead,
                    progress: Progress | None = None) -> Trace:
    """Load a JSON trace (``.gz`` too) whose first chunks a read-ahead thread has scanned
    (:mod:`.read_ahead`): their tables are taken as they are and the file is streamed on from the
    next chunk, with the fallbacks of :func:`load_kineto`."""
    blocks = iter_blocks(path, block=read_block(), progress=progress, offset=ahead.resume - 1, capped=False)
    try:
        try:
            buf, _ = fill(blocks, cutting.chunk_bytes())
        except BaseException:
            blocks.close()
            raise
        held = [buf]
        del buf
        return _stream_or_whole(path, held, blocks, keep_python, ahead)
    finally:
        fast_scan.trim()


def _stream_or_whole(path: str | Path, held: list[bytearray], blocks: Iterator[bytes], keep_python: bool,
                     ahead: ReadAhead | None = None) -> Trace:
    """Stream the rest; when the stream cannot be cut safely, decode the file whole."""
    try:
        return stream(str(path), held, blocks, keep_python, scanner.threads_allowed(), ahead)
    except SplitFailed:
        pass
    finally:
        close = getattr(blocks, "close", None)
        if close:
            close()
    held.clear()
    return load_whole(path, read_bytes(path), keep_python)


def load_whole(path: str | Path, data: bytes, keep_python: bool) -> Trace:
    """Decode the whole document at once (small files, bare arrays, repairs)."""
    pending: list[tuple[str, int, str]] = []
    malformed: dict[str, int] = {}
    tally = Tally()
    try:
        meta, raw_events, _ = decode_document(path, data)
        _, tables = decode_chunk(path, raw_events, keep_python, tally, malformed)
    except MalformedJSON as first:
        fixed = repair(data)
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
    TableBudget(path).add(tables)
    return build(str(path), meta, {k: [df] for k, df in tables.items()}, tally,
                 pending + malformed_notes(malformed))


