"""Read a trace file's bytes: plain or gzip (detected by magic bytes, not the name).

Every failure becomes a one-line :class:`TraceError` naming the file: a missing
file, a truncated or corrupt gzip stream, an empty file, or something that is not
JSON at all.
"""

from __future__ import annotations

import os
import queue
import threading
import types
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

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
#: a streamed trace peaks at about 1.0-1.5x its JSON size (docs/benchmarks.md); the whole-document
#: fallback (a chunk cut inside a string) at several times more: a margin on top
_MEMORY_PER_BYTE = 3


def max_trace_bytes() -> int:
    """The largest JSON held whole: ``NONGEMM_MAX_TRACE_BYTES``, else a third of the
    memory available now (so a gzip bomb or a huge file is refused, not swapped to death)."""
    env = os.environ.get("NONGEMM_MAX_TRACE_BYTES")
    if env:
        try:
            return int(float(env))
        except ValueError:
            pass
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        avail = 16 << 30
    return max(256 << 20, avail // _MEMORY_PER_BYTE)


def _too_big(p: Path, size: int, limit: int, what: str) -> TraceError:
    return TraceError(p, f"{what} more than {limit / 1e9:.1f} GB of JSON ({size / 1e9:.1f} GB so far), more than "
                         f"this machine can analyse in memory (set NONGEMM_MAX_TRACE_BYTES to raise the limit)")


def read_bytes(path: str | Path) -> bytes:
    """Return the decompressed bytes of ``path``."""
    p = Path(path)
    limit = max_trace_bytes()
    fh, _ = _open(p, limit)
    try:
        with fh:
            raw = fh.read()
    except OSError as exc:
        raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceError(p, "empty file")
    if raw[:2] == GZIP_MAGIC:
        return _gunzip(p, raw, limit)
    if p.suffix == ".gz":
        raise TraceError(p, "named .gz but is not gzip data")
    return raw


def _open(p: Path, limit: int):
    """Open ``p`` for reading; a missing file, a directory or an oversized file is a TraceError."""
    try:
        size = p.stat().st_size if p.is_file() else 0
        if size > limit:
            raise _too_big(p, size, limit, "is")
        return open(p, "rb"), size
    except FileNotFoundError:
        raise TraceError(p, "no such file") from None
    except IsADirectoryError:
        raise TraceError(p, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None


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
    limit = max_trace_bytes() if capped else 1 << 62
    fh, size = _open(p, limit)
    with fh:
        try:
            if offset:  # a plain file is read from there, a gzip file inflated from its start
                gz = fh.read(2) == GZIP_MAGIC
                fh.seek(0 if gz else offset)
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
            raise _too_big(Path(path), total, limit, "holds")
        out.append(piece)
    return b"".join(out)


def too_long_stretch(path: str | Path, size: int) -> TraceError | None:
    """The error for a stretch of ``size`` bytes without an event boundary, held whole by the
    cutter, when it exceeds :func:`max_trace_bytes` (the whole-document path would refuse the
    file too); else None."""
    limit = max_trace_bytes()
    return _too_big(Path(path), size, limit, "holds") if size > limit else None


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


def _inflate(p: Path, pieces: Iterator[bytes], limit: int, block: int) -> Iterator[bytes]:
    """Decompress every gzip member of a stream of compressed pieces, ``block`` bytes of
    output at a time; a stream cut short is an error, and output beyond ``limit`` too."""
    total = 0
    d = _inflater.decompressobj(16 + zlib.MAX_WBITS)
    started = False  # the current member has consumed input
    carry = b""  # the first byte of the next member's magic, when a piece ends between its two bytes
    try:
        for data in pieces:
            if carry:
                data, carry = carry + bytes(data), b""
            while data:
                if d.eof:  # a member ended: what follows is another member or padding
                    data = bytes(data)
                    if data.strip(b"\x00") == b"":
                        data = b""
                        break
                    if len(data) < 2:
                        carry, data = data, b""
                        break
                    if data[:2] != GZIP_MAGIC:
                        return
                    d = _inflater.decompressobj(16 + zlib.MAX_WBITS)
                piece = d.decompress(data, block)
                started = True
                data = d.unconsumed_tail
                if d.eof:
                    data = d.unused_data
                if piece:
                    total += len(piece)
                    if total > limit:
                        raise _too_big(p, total, limit, "decompresses to")
                    yield piece
        if started and not d.eof:
            raise TraceError(p, "truncated gzip stream (the file ends before the compressed data does)")
    except _INFLATE_ERRORS as exc:
        raise TraceError(p, f"corrupt gzip data ({exc})") from None


def _gunzip(p: Path, raw: bytes, limit: int) -> bytes:
    """Decompress all gzip members of ``raw`` (bounded by ``limit``, so a gzip bomb stops)."""
    return b"".join(_inflate(p, iter([raw]), limit, _CHUNK))
