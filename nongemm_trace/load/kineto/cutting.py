"""Cut a stream of JSON bytes into chunks of whole trace events (no polars here).

The ``traceEvents`` array is cut at event boundaries (``}, {``) into chunks of about
:func:`chunk_bytes`, each framed in place as a JSON array of its own, so that it can be
handed to a decoder (:mod:`.kineto` decodes them on two threads) without a copy. The
cuts depend only on the bytes (the last boundary within one chunk's length of the
chunk's start), never on how the stream was split into blocks.

A boundary pattern can also occur inside a string or a nested value; such a cut leaves
a chunk that is not valid JSON, and the loader then decodes the file whole.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from typing import Any

from ...core import env
from ...errors import TraceError
from ..source import too_long_stretch

#: events are decoded and turned into columns this many bytes of JSON at a time. With two threads
#: scanning, three chunks are in flight, each with its text, its columns and the scanning thread's
#: buffers: the load's working memory is several times this, and smaller chunks cost time and leave
#: more of them in every table (the sizes compared: docs/benchmarks.md, "Memory as a budget")
CHUNK_BYTES = 6 << 20
#: ``NONGEMM_CHUNK_BYTES=N`` sets the chunk size (bytes, at least this), so that chunk boundaries
#: can be made to fall inside small files: the answer must not depend on where they fall
MIN_CHUNK_BYTES = 256


def chunk_bytes() -> int:
    """The chunk size: ``NONGEMM_CHUNK_BYTES`` when set (a whole number of bytes), else :data:`CHUNK_BYTES`."""
    text = env.text("NONGEMM_CHUNK_BYTES")
    if not text:
        return CHUNK_BYTES
    try:
        value = int(text)
    except ValueError:
        raise TraceError(None, f"NONGEMM_CHUNK_BYTES must be a whole number of bytes, not {text!r}") from None
    return max(value, MIN_CHUNK_BYTES)
#: JSON's whitespace (not regex's ``\s``: a form feed or vertical tab between tokens is invalid JSON, and a
#: cut there would drop it unseen)
_WS = rb"[ \t\n\r]*"
_BOUNDARY = re.compile(rb"\}" + _WS + rb"," + _WS + rb"\{")
EVENTS_KEY = re.compile(rb'"traceEvents"' + _WS + rb":" + _WS + rb"\[")


def read_block() -> int:
    """The file is read (and inflated) in blocks of a quarter chunk: the blocks queued
    ahead and the partial event carried from one chunk to the next stay a few MB."""
    return max(chunk_bytes() // 4, 4096)


def first_fill() -> int:
    """The bytes :func:`fill` holds when the loader looks for the ``traceEvents`` key (whole
    blocks of :func:`read_block`, until more than a chunk is in): the read-ahead thread looks
    in the same bytes."""
    block = read_block()
    return (chunk_bytes() // block + 1) * block


def fill(blocks: Iterator[bytes], size: int) -> tuple[bytearray, bool]:
    """Read blocks until more than ``size`` bytes are in; (the bytes, reached the end)."""
    buf = bytearray()
    for piece in blocks:
        buf += piece
        if len(buf) > size:
            return buf, False
    return buf, True


class Cutter:
    """Iterate over the chunks of the ``traceEvents`` array: ``(view, owner)``, where ``view``
    is the chunk framed as a JSON array (``[`` … ``]``) inside the buffer ``owner``. ``buf`` holds
    the bytes read so far (from the start of the stream) and ``pos`` the index just after the
    array's ``[``; ``spare`` holds buffers of chunks already decoded, for reuse. When the iteration
    ends, ``buf[pos:end]`` is the tail: the last events, the array's end and whatever follows it."""

    def __init__(self, buf: bytearray, pos: int, blocks: Iterator[bytes], spare: list, path: str = "") -> None:
        self.buf: Any = buf  # a bytearray, then anonymous memory maps (:func:`next_buffer`); None once iterated
        self.pos, self.end = pos, len(buf)
        self.blocks, self.spare, self.path = blocks, spare, path

    def __iter__(self) -> Iterator[tuple[memoryview, object]]:
        buf, pos, end = self.buf, self.pos, self.end
        self.buf = None  # the iteration holds the buffers: a chunk's may be reused once decoded
        wait = 0  # after a search that found no boundary: search again once this much is in
        while True:
            while end - pos >= max(chunk_bytes(), wait):
                # the last event boundary within one chunk's length (beyond it only for a giant event)
                found = last_boundary(buf, pos, pos + chunk_bytes()) or last_boundary(buf, pos, end)
                if found is None:
                    # one event (or a stretch of whitespace) longer than what is in: read more, and search
                    # again only when twice as much is in, so that a stretch of N bytes without a boundary
                    # costs searches of N, N/2, N/4 … bytes (linear), not one per block (quadratic)
                    wait = 2 * (end - pos)
                    refused = too_long_stretch(self.path, end - pos)  # held whole: capped as JSON text
                    if refused is not None:
                        raise refused
                    break
                wait = 0
                cut, nxt = found  # buf[cut] follows a '}'; the next chunk starts at the '{' at nxt
                # the rest goes to a new buffer (from the byte before the next event: it becomes that
                # chunk's '['), so this one can be framed in place as a JSON array and handed over whole
                rest = next_buffer(buf, nxt - 1, end, self.spare)
                buf[pos - 1], buf[cut] = 0x5B, 0x5D
                owner = buf
                yield memoryview(owner)[pos - 1:cut + 1], owner
                del owner
                buf, end, pos = rest, end - (nxt - 1), 1
                del rest
            piece = next(self.blocks, None)
            if piece is None:
                break
            if end + len(piece) > len(buf):  # an event longer than a chunk: a larger buffer
                buf = next_buffer(buf, 0, end, [], 2 * (end + len(piece)))
            buf[end:end + len(piece)] = piece
            end += len(piece)
            del piece
        self.buf, self.pos, self.end = buf, pos, end


def next_buffer(buf, start: int, end: int, spare: list, size: int = 0) -> mmap.mmap:
    """A buffer for the next chunk holding ``buf[start:end]``, with room for a chunk and the block
    that crosses its end: an anonymous memory map (buffers from the C allocator that grow block
    by block, or of one size after another, stay mapped in its heap: 100 MB more at 200 MB of
    JSON), taken from ``spare`` (the buffers of chunks already decoded) when one is big enough:
    writing into fresh pages costs a page fault per 4 KB, most of a second per GB."""
    need = max(size, chunk_bytes() + 2 * read_block(), end - start)
    while spare and len(spare[-1]) < need:
        spare.pop()
    rest = spare.pop() if spare else mmap.mmap(-1, need)
    with memoryview(buf) as src:
        rest[:end - start] = src[start:end]
    return rest


def last_boundary(buf, pos: int, end: int) -> tuple[int, int] | None:
    """The last ``}, {`` between two events in ``buf[pos:end]``: (index after the '}', index of the '{')."""
    window = 1 << 16
    while True:
        lo = max(pos, end - window)
        last = None
        for last in _BOUNDARY.finditer(buf, lo, end):  # noqa: B007 - the loop keeps the last match
            pass
        if last is not None:
            return last.start() + 1, last.end() - 1
        if lo == pos:
            return None
        window *= 16


def release(view: memoryview) -> None:
    """Release a chunk's view (its buffer can then be reused)."""
    try:
        view.release()
    except BufferError:  # pragma: no cover - a decoded object still holds it (an error is on its way)
        pass
