"""Read a trace file's bytes: plain or gzip (detected by magic bytes, not the name).

Every failure becomes a one-line :class:`TraceError` naming the file: a missing
file, a truncated or corrupt gzip stream, an empty file, or something that is not
JSON at all.
"""

from __future__ import annotations

import queue
import threading
import types
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

from ..core.reader import max_trace_bytes, open_input, read_input, too_big
from ..errors import TraceError

_inflater: types.ModuleType
try:  # Intel ISA-L inflates about 2.8x faster than zlib, with the same API; zlib where it has no wheel
    from isal import isal_zlib as _inflater

    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflater.error)
except ImportError:  # pragma: no cover - platforms without an isal wheel
    _inflater = zlib
    _INFLATE_ERRORS = (zlib.error,)

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 16 << 20


def read_bytes(path: str | Path) -> bytes:
    """Return the decompressed bytes of ``path`` (any kind of file: :mod:`.reader`)."""
    p = Path(path)
    limit = max_trace_bytes()
    raw = read_input(p, limit)
    if not raw:
        raise TraceError(p, "empty file")
    if raw[:2] == GZIP_MAGIC:
        return _gunzip(p, raw, limit)
    if p.suffix == ".gz":
        raise TraceError(p, "named .gz but is not gzip data")
    return raw


Progress = Callable[[int, int], None]


def iter_blocks(path: str | Path, block: int = _CHUNK, progress: Progress | None = None,
                offset: int = 0, capped: bool = True) -> Generator[bytes, None, None]:
    """Yield the decompressed bytes of ``path`` in blocks of about ``block`` bytes, from byte
    ``offset`` of them on (where a read-ahead stopped: a gzip file is inflated from its start
    and the bytes before are dropped).

    Only a few blocks are alive at once, so a trace never needs its whole text in memory.
    The file is read (and a gzip file inflated) by a background thread: file reads and zlib
    release the GIL, so this overlaps with the decoding of the blocks already read.
    ``progress(done, total)`` is called with the bytes of the file consumed so far.
    The same errors as :func:`read_bytes`. ``capped=False``: no JSON-size limit (the streamed
    Kineto path, whose tables are budgeted instead: :mod:`.budget`; a caller that joins the
    blocks uses :func:`join_capped`).
    """
    p = Path(path)
    # a regular file streamed is bounded by its size; a stream (a device, a FIFO) by the cap, as read
    cap = max_trace_bytes()
    fh = open_input(p, cap if capped else 1 << 62, stream_limit=cap)
    limit = cap if capped or not fh.regular else 1 << 62
    size = fh.size
    with fh:
        try:
            if offset:  # a plain file is read from there, a gzip file inflated from its start
                gz = fh.read(2) == GZIP_MAGIC
                if fh.regular:
                    fh.seek(0 if gz else offset)
                else:  # pragma: no cover - a read-ahead reads regular files only
                    raise TraceError(p, "changed while it was read")
            head = fh.read(block)
            if not offset:
                gz = head[:2] == GZIP_MAGIC
        except OSError as exc:
            raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None
        if not head:
            raise TraceError(p, "empty file")
        if not gz and p.suffix == ".gz":
            raise TraceError(p, "named .gz but is not gzip data")
        consumed = [len(head) + (0 if gz else offset)]

        def pieces(n: int) -> Iterator[bytes]:
            if gz:  # small inputs: zlib copies the unconsumed rest of its input after every output block
                view = memoryview(head)
                for i in range(0, len(head), n):
                    yield view[i:i + n]  # type: ignore[misc]  # bytes-like: for the inflater only
            else:
                yield head
            while True:
                piece = fh.read(n)
                if not piece:
                    return
                consumed[0] += len(piece)
                yield piece

        source = _inflate(p, pieces(1 << 20), limit, block) if gz else pieces(block)
        if gz and offset:
            source = _skip(source, offset)
        yield from _in_background(p, source, consumed, size, progress)


def join_capped(path: str | Path, blocks: Iterator[bytes]) -> bytes:
    """The blocks joined, refused once they exceed :func:`max_trace_bytes` (a format read as one
    document holds its whole text)."""
    limit, total, out = max_trace_bytes(), 0, []
    for piece in blocks:
        total += len(piece)
        if total > limit:
            raise too_big(Path(path), total, limit, "holds")
        out.append(piece)
    return b"".join(out)


def too_long_stretch(path: str | Path, size: int) -> TraceError | None:
    """The error for a stretch of ``size`` bytes without an event boundary, held whole by the
    cutter, when it exceeds :func:`max_trace_bytes` (the whole-document path would refuse the
    file too); else None."""
    limit = max_trace_bytes()
    return too_big(Path(path), size, limit, "holds") if size > limit else None


def _skip(blocks: Iterator[bytes], n: int) -> Iterator[bytes]:
    """``blocks`` without their first ``n`` bytes."""
    for piece in blocks:
        if n >= len(piece):
            n -= len(piece)
            continue
        yield piece[n:] if n else piece
        n = 0


_END = object()


def _in_background(p: Path, source: Iterator[bytes], consumed: list[int], size: int,
                   progress: Progress | None) -> Iterator[bytes]:
    """Run ``source`` in a producer thread feeding a small bounded queue; errors travel through it."""
    out: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for piece in source:
                if not put(piece):
                    return
            put(_END)
        except TraceError as exc:
            put(exc)
        except OSError as exc:
            put(TraceError(p, f"cannot read: {exc.strerror or exc}"))
        except BaseException as exc:  # noqa: BLE001 - pragma: no cover - reported in the consumer
            put(exc)

    worker = threading.Thread(target=produce, name="nongemm-read", daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            if progress:
                progress(consumed[0], size)
            yield item
    finally:
        stop.set()
        worker.join()


#: the first input a gzip member is given, doubled while it asks for more (:func:`_inflate`)
_FIRST_FEED = 256
_MAX_FEED = 1 << 20


def _inflate(p: Path, pieces: Iterator[bytes], limit: int, block: int) -> Iterator[bytes]:
    """Decompress every gzip member of a stream of compressed pieces, ``block`` bytes of
    output at a time; a stream cut short is an error, and output beyond ``limit`` too.

    Linear in the input however many members it holds: the inflater copies the input it did
    not use when a member ends (``unused_data``), so each member is fed windows of input that
    start small and double while it asks for more, never the rest of the file (40,000 empty
    members took 54 s when each one's end copied what followed it). After the last member only
    zero padding may follow; other bytes are refused in one line, as bytes after the JSON value are.
    """
    total = 0
    d = None  # the current member's inflater; None between members
    feed = _FIRST_FEED
    carry = b""  # a member's first magic byte, when a piece ends between its two bytes
    padding = False  # zero bytes followed the last member: only zeros may follow
    started = False
    try:
        for data in pieces:
            view = memoryview(carry + bytes(data)) if carry else memoryview(data)
            carry = b""
            pos, size = 0, len(view)
            while pos < size:
                if padding:
                    _zeros_only(p, view[pos:])
                    break
                if d is None:  # between members: another one, zero padding, or bytes that are neither
                    if view[pos] == 0 and started:
                        padding = True
                        continue
                    if size - pos < 2:
                        carry = bytes(view[pos:])
                        break
                    if bytes(view[pos:pos + 2]) != GZIP_MAGIC:
                        if not started:
                            raise TraceError(p, "not gzip data")
                        raise _trailing(p)
                    d, feed, started = _inflater.decompressobj(16 + zlib.MAX_WBITS), _FIRST_FEED, True
                window = view[pos:pos + feed]
                piece = d.decompress(window, block)
                while True:
                    if piece:
                        total += len(piece)
                        if total > limit:
                            raise too_big(p, total, limit, "decompresses to")
                        yield piece
                    if d.eof or not d.unconsumed_tail:
                        break
                    piece = d.decompress(d.unconsumed_tail, block)
                if d.eof:
                    pos += len(window) - len(d.unused_data)
                    d = None
                else:
                    pos += len(window)
                    feed = min(feed * 2, _MAX_FEED)
        if carry:
            raise _trailing(p)
        while d is not None and not d.eof:  # output the inflater still held when its output block filled
            piece = d.decompress(b"", block)
            if not piece:
                raise TraceError(p, "truncated gzip stream (the file ends before the compressed data does)")
            total += len(piece)
            if total > limit:
                raise too_big(p, total, limit, "decompresses to")
            yield piece
    except _INFLATE_ERRORS as exc:
        raise TraceError(p, f"corrupt gzip data ({exc})") from None


def _trailing(p: Path) -> TraceError:
    return TraceError(p, "bytes after the end of the gzip data that are neither another gzip member nor zero "
                         "padding (a file written over, or two files joined)")


def _zeros_only(p: Path, view: memoryview) -> None:
    """Zero padding after the data (a file system's preallocation) is accepted; anything else there is refused."""
    if bytes(view).count(0) != len(view):
        raise _trailing(p)


def _gunzip(p: Path, raw: bytes, limit: int) -> bytes:
    """Decompress all gzip members of ``raw`` (bounded by ``limit``, so a gzip bomb stops)."""
    return b"".join(_inflate(p, iter([raw]), limit, _CHUNK))
